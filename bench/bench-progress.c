/* SPDX-License-Identifier: MIT */
/*
 * The watch of progress (daemon/progress), measured on long synthetic runs shaped like real
 * jobs: 8 ranks of synchronous training (every rank starts step k at the job's time for it,
 * give or take 2% of a step of collective skew), step times of +-10% jitter, swept as the
 * daemon sweeps (a poll interval, +-20%: a busy node). Two shapes of job: steps of 0.3 to
 * 2 s (drawn per seed) swept every second, and steps of 20 ms swept every 100 ms. Each
 * figure is over many seeds, beside a baseline run on the same sweeps of the same series:
 * the detector a person writes first (the mean of the last slowdown_steps steps against the
 * mean of every step before them, the same 20% threshold, over once within half of it).
 *
 *   (a) false alarms per 100,000 steps of jitter and no slowdown; then the same with a
 *       checkpoint every 1,000 steps (one step 30 times as long), as real jobs have;
 *   (b) the delay from a slowdown's first step to its report, in steps, and the error of
 *       the step it is said to have begun at, for slowdowns of 20%, 30% and 50% starting
 *       at a random step;
 *   (c) a rank hung in a step while the others wait for it in the next: the time from the
 *       step it should have ended to the report, and whether the sentence names it.
 *
 * Usage: bench-progress [SEEDS]   (default 20: a run of (a) is 100,000 steps a seed)
 */
#include "daemon/progress.h"
#include "bench/stats.h"
#include "npuprof/shm.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANKS 8u
#define MS 1000000ull
#define CHECKPOINT_EVERY 1000
#define CHECKPOINT_FACTOR 30.0
#define SLOW_TRIALS 5u                  /* runs of (b) a seed, each case and size */
#define SLOW_FROM_MIN 1000
#define SLOW_FROM_SPAN 2000
#define SLOW_WATCH 1000                 /* steps after its start a slowdown must be told within */
#define SENTENCE_MAX NPF_PROGRESS_MESSAGE_MAX

typedef struct job_case {
        const char *name;
        double step_ms_lo, step_ms_hi;  /* a seed's step time, drawn in [lo, hi] */
        uint64_t poll_ms;
} job_case_t;

static const job_case_t cases[] = {
        { "steps 0.3-2 s, sweeps 1 s", 300, 2000, 1000 },
        { "steps 20 ms, sweeps 100 ms", 20, 20, 100 },
};

/* A run's inputs. */
typedef struct run_spec {
        double step_ms;
        uint64_t poll_ms;
        int64_t steps;                  /* the job stops after this step */
        bool checkpoints;
        int64_t slow_from;              /* 0, or the first step slowed... */
        double slow_factor;             /* ...by this factor */
        int64_t hang_at;                /* 0, or the step rank HANG_RANK never ends */
        uint64_t watch_ns;              /* after the hang: how long to sweep on */
        unsigned seed;
} run_spec_t;

#define HANG_RANK 3u

/* A run's results, from the watch and from the naive detector. */
typedef struct run_result {
        unsigned slowdowns, stalls;             /* SLOWDOWN_BEGAN, STALL_BEGAN (hung rank aside) */
        int64_t first_step, first_since;        /* the first slowdown at or after slow_from: job step, since_step */
        unsigned naive_alarms;
        int64_t naive_first_step, naive_first_since;
        double hang_detect_s;                   /* < 0: the hung rank was never found */
        bool hang_named;                        /* the sentence says it is the one behind */
        uint64_t sweeps;
} run_result_t;

typedef struct sim {
        const run_spec_t *spec;
        run_result_t *res;
        uint64_t now;
        uint64_t *t;                    /* t[k]: when the job starts step k, k in [1, steps + 1] */
        char sentence[SENTENCE_MAX];
} sim_t;

/* A uniform number in [0, 1) (xorshift: the same run at every seed). */
static double uniform(uint64_t *s)
{
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return (double) (*s >> 11) / 9007199254740992.0;
}

static uint64_t mix(uint64_t z)
{
        z += 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

/* The collective skew of rank @r at step @k: up to 2% of a step late. */
static uint64_t skew_ns(const run_spec_t *sp, uint32_t r, int64_t k)
{
        uint64_t h = mix(((uint64_t) k << 8 | r) ^ ((uint64_t) sp->seed << 40));

        return (uint64_t) ((double) (h >> 11) / 9007199254740992.0 * 0.02 * sp->step_ms * (double) MS);
}

static void on_event(const npf_progress_event_t *ev, void *data)
{
        sim_t *s = data;
        run_result_t *res = s->res;

        switch (ev->kind) {
        case NPF_PROGRESS_SLOWDOWN_BEGAN:
                res->slowdowns++;
                if (s->spec->slow_from && res->first_step < 0 && ev->step >= s->spec->slow_from) {
                        res->first_step = ev->step;
                        res->first_since = ev->since_step;
                }
                break;
        case NPF_PROGRESS_STALL_BEGAN:
                if (s->spec->hang_at && ev->rank == HANG_RANK) {
                        if (res->hang_detect_s < 0)
                                res->hang_detect_s = (double) (s->now - s->t[s->spec->hang_at + 1]) / 1e9;
                } else if (!s->spec->hang_at) {
                        res->stalls++;
                }
                break;
        case NPF_PROGRESS_STALLS:
                if (ev->message)
                        snprintf(s->sentence, sizeof(s->sentence), "%s", ev->message);
                break;
        default:
                break;
        }
}

/*
 * The detector a person writes first, on the same sweeps: each sweep's job step (the
 * median of the ranks'), the time between sweeps spread evenly over the steps it saw;
 * an alarm when the mean of the last N steps is above the mean of all before them by the
 * threshold, over once it is back within half of it.
 */
typedef struct naive {
        double *sum;                    /* sum[k]: seconds of steps 1..k as the sweeps saw them */
        int64_t step;                   /* the job step at the last sweep; 0: none */
        uint64_t at;
        bool on;
} naive_t;

static void naive_feed(naive_t *nv, const run_spec_t *sp, run_result_t *res, uint64_t now, int64_t step,
                       unsigned n, double pct)
{
        if (nv->step > 0 && step > nv->step) {
                double each = (double) (now - nv->at) / 1e9 / (double) (step - nv->step);
                for (int64_t k = nv->step + 1; k <= step; k++)
                        nv->sum[k] = nv->sum[k - 1] + each;
        }
        if (step != nv->step || nv->step == 0) {
                nv->step = step;
                nv->at = now;
        }
        int64_t cut = nv->step - (int64_t) n;
        if (cut < 2 * (int64_t) n)
                return;
        double last = (nv->sum[nv->step] - nv->sum[cut]) / n, before = (nv->sum[cut] - nv->sum[1]) / (double) (cut - 1);
        if (!nv->on && last > before * (1 + pct / 100)) {
                nv->on = true;
                res->naive_alarms++;
                if (sp->slow_from && res->naive_first_step < 0 && nv->step >= sp->slow_from) {
                        res->naive_first_step = nv->step;
                        res->naive_first_since = cut + 1;
                }
        } else if (nv->on && last < before * (1 + pct / 200)) {
                nv->on = false;
        }
}

static int by_int64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;

        return (x > y) - (x < y);
}

static int run(const run_spec_t *sp, run_result_t *res)
{
        npf_progress_options_t opt = {
                .stall_after_ms = NPF_PROGRESS_STALL_AFTER_S_DEFAULT * 1000ull,
                .stall_factor = NPF_PROGRESS_STALL_FACTOR_DEFAULT,
                .slowdown_pct = NPF_PROGRESS_SLOWDOWN_PCT_DEFAULT,
                .slowdown_steps = NPF_PROGRESS_SLOWDOWN_STEPS_DEFAULT,
                .gap_max_ms = 4 * sp->poll_ms > 1000 ? 4 * sp->poll_ms : 1000,       /* as npuprofd sets it */
        };
        sim_t s = { .spec = sp, .res = res, .now = 1000 * MS };
        naive_t nv = { 0 };
        npf_progress_t *p = NULL;
        uint64_t rng = mix(sp->seed + 1);
        int64_t at[RANKS], steps[RANKS];

        *res = (run_result_t) { .first_step = -1, .first_since = -1, .naive_first_step = -1,
                                .naive_first_since = -1, .hang_detect_s = -1 };
        s.t = malloc(((size_t) sp->steps + 2) * sizeof(*s.t));
        nv.sum = calloc((size_t) sp->steps + 2, sizeof(*nv.sum));
        if (!s.t || !nv.sum || npf_progress_new(&opt, on_event, &s, &p) < 0)
                goto fail;
        s.t[1] = s.now + 10 * MS;
        for (int64_t k = 1; k <= sp->steps; k++) {
                double ms = sp->step_ms * (1.0 + 0.1 * (2.0 * uniform(&rng) - 1.0));
                if (sp->slow_from && k >= sp->slow_from)
                        ms *= sp->slow_factor;
                if (sp->checkpoints && k % CHECKPOINT_EVERY == 0)
                        ms *= CHECKPOINT_FACTOR;
                s.t[k + 1] = s.t[k] + (uint64_t) (ms * MS);
        }
        for (uint32_t r = 0; r < RANKS; r++)
                at[r] = 0;

        uint64_t end = sp->hang_at ? s.t[sp->hang_at + 1] + sp->watch_ns : s.t[sp->steps];
        while (s.now < end) {
                s.now += (uint64_t) ((double) sp->poll_ms * MS * (1.0 + 0.2 * (2.0 * uniform(&rng) - 1.0)));
                npf_progress_begin(p, s.now);
                for (uint32_t r = 0; r < RANKS; r++) {
                        /* The hung rank never ends its step; the others start the next and wait in it. */
                        int64_t cap = !sp->hang_at ? sp->steps : r == HANG_RANK ? sp->hang_at : sp->hang_at + 1;
                        while (at[r] < cap && s.t[at[r] + 1] + skew_ns(sp, r, at[r] + 1) <= s.now)
                                at[r]++;
                        steps[r] = at[r] > 0 ? at[r] : -1;
                        npf_progress_sample(p, &(npf_progress_sample_t) { .slot = r, .tag = 100 + r, .rank = r,
                                                                          .step = steps[r] });
                }
                npf_progress_end(p);
                res->sweeps++;
                qsort(steps, RANKS, sizeof(steps[0]), by_int64);
                if (steps[(RANKS - 1) / 2] > 0)
                        naive_feed(&nv, sp, res, s.now, steps[(RANKS - 1) / 2], opt.slowdown_steps, opt.slowdown_pct);
                if (sp->slow_from && res->first_step >= 0 && res->naive_first_step >= 0)
                        break;
        }
        if (sp->hang_at) {
                char want[64];
                snprintf(want, sizeof(want), "rank %u is at step", HANG_RANK);
                res->hang_named = strstr(s.sentence, want) && strstr(s.sentence, "wait for it");
        }
        npf_progress_free(p);
        free(s.t);
        free(nv.sum);
        return 0;
fail:
        npf_progress_free(p);
        free(s.t);
        free(nv.sum);
        return -1;
}

static double draw_step_ms(const job_case_t *c, unsigned seed)
{
        uint64_t z = mix(seed * 977u + 5);

        return c->step_ms_lo + (c->step_ms_hi - c->step_ms_lo) * ((double) (z >> 11) / 9007199254740992.0);
}

/* "p50 12  p90 30  max 41" of the @n values at @v (reordered); "-" when none. */
static void print_dist(double *v, int n, const char *unit)
{
        if (n == 0) {
                printf("%-34s", "-");
                return;
        }
        double p50 = npf_bench_median(v, n), p90 = npf_bench_percentile(v, n, 0.9), mx = v[n - 1];
        char buf[64];
        snprintf(buf, sizeof(buf), "%.0f / %.0f / %.0f%s", p50, p90, mx, unit);
        printf("%-22s", buf);
}

static int false_alarms(unsigned seeds)
{
        printf("(a) false alarms per 100,000 steps, 8 ranks, +-10%% jitter, no slowdown, %u seeds x 100,000 steps\n\n",
               seeds);
        printf("  %-28s %-24s %-10s %-8s %s\n", "job", "shape", "slowdowns", "stalls", "naive detector (baseline)");
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
                for (int ck = 0; ck < 2; ck++) {
                        unsigned slow = 0, stall = 0, naive = 0;
                        for (unsigned seed = 0; seed < seeds; seed++) {
                                run_spec_t sp = { .step_ms = draw_step_ms(&cases[c], seed), .poll_ms = cases[c].poll_ms,
                                                  .steps = 100000, .checkpoints = ck, .seed = seed * 2 + (unsigned) ck };
                                run_result_t r;
                                if (run(&sp, &r) < 0)
                                        return -1;
                                slow += r.slowdowns;
                                stall += r.stalls;
                                naive += r.naive_alarms;
                        }
                        double per = 1.0 / seeds;
                        printf("  %-28s %-24s %-10.2f %-8.2f %.2f\n", cases[c].name,
                               ck ? "+ checkpoint/1000 steps" : "jitter only", slow * per, stall * per, naive * per);
                }
        printf("\n");
        return 0;
}

static int delays(unsigned seeds)
{
        static const double sizes[] = { 1.2, 1.25, 1.3, 1.5 };
        static const char *const size_names[] = { "+20%", "+25%", "+30%", "+50%" };
        unsigned trials = seeds * SLOW_TRIALS;
        double *d = calloc(trials, sizeof(*d)), *e = calloc(trials, sizeof(*e));
        double *nd = calloc(trials, sizeof(*nd)), *ne = calloc(trials, sizeof(*ne));

        if (!d || !e || !nd || !ne)
                return -1;
        printf("(b) a slowdown from a random step (%d to %d), jitter only, %u runs each: delay to the report in steps,\n"
               "    and the error of the step it is said to have begun at (|since_step - true|), p50 / p90 / max;\n"
               "    found: within %d steps of its start\n\n", SLOW_FROM_MIN, SLOW_FROM_MIN + SLOW_FROM_SPAN, trials,
               SLOW_WATCH);
        printf("  %-28s %-5s %-7s %-22s %-22s| naive: %-6s %-22s %s\n", "job", "size", "found", "delay (steps)",
               "since error (steps)", "found", "delay (steps)", "since error");
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
                for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                        int n = 0, nn = 0;
                        for (unsigned i = 0; i < trials; i++) {
                                uint64_t h = mix(i * 131u + z * 7u + c);
                                run_spec_t sp = { .step_ms = draw_step_ms(&cases[c], i), .poll_ms = cases[c].poll_ms,
                                                  .slow_factor = sizes[z], .seed = 1000 + i * 3u + (unsigned) z };
                                run_result_t r;
                                sp.slow_from = SLOW_FROM_MIN + (int64_t) (h % SLOW_FROM_SPAN);
                                sp.steps = sp.slow_from + SLOW_WATCH;
                                if (run(&sp, &r) < 0)
                                        return -1;
                                if (r.first_step >= 0) {
                                        d[n] = (double) (r.first_step - sp.slow_from);
                                        e[n++] = (double) llabs(r.first_since - sp.slow_from);
                                }
                                if (r.naive_first_step >= 0) {
                                        nd[nn] = (double) (r.naive_first_step - sp.slow_from);
                                        ne[nn++] = (double) llabs(r.naive_first_since - sp.slow_from);
                                }
                        }
                        char found[16], nfound[16];
                        snprintf(found, sizeof(found), "%d%%", n * 100 / (int) trials);
                        snprintf(nfound, sizeof(nfound), "%d%%", nn * 100 / (int) trials);
                        printf("  %-28s %-5s %-7s ", cases[c].name, size_names[z], found);
                        print_dist(d, n, "");
                        print_dist(e, n, "");
                        printf("|        %-6s ", nfound);
                        print_dist(nd, nn, "");
                        print_dist(ne, nn, "");
                        printf("\n");
                }
        printf("\n");
        free(d);
        free(e);
        free(nd);
        free(ne);
        return 0;
}

static int stalls(unsigned seeds)
{
        unsigned trials = seeds;
        double *v = calloc(trials, sizeof(*v));

        if (!v)
                return -1;
        printf("(c) rank %u hung in a random step (%d to %d), the 7 others waiting in the next, %u runs each:\n"
               "    seconds from the end its step should have had to the report (stall_after_s %u, the threshold\n"
               "    a fixed per-rank timeout would use: the baseline), p50 / p90 / max; named: the sentence says\n"
               "    it is the one behind and the others wait for it\n\n", HANG_RANK, SLOW_FROM_MIN,
               SLOW_FROM_MIN + SLOW_FROM_SPAN, trials, NPF_PROGRESS_STALL_AFTER_S_DEFAULT);
        printf("  %-28s %-7s %-22s %s\n", "job", "found", "time to report (s)", "named");
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                int n = 0, named = 0;
                for (unsigned i = 0; i < trials; i++) {
                        run_spec_t sp = { .step_ms = draw_step_ms(&cases[c], i), .poll_ms = cases[c].poll_ms,
                                          .seed = 5000 + i, .watch_ns = (NPF_PROGRESS_STALL_AFTER_S_DEFAULT + 60) * 1000 * MS };
                        run_result_t r;
                        sp.hang_at = SLOW_FROM_MIN + (int64_t) (mix(i + 77) % SLOW_FROM_SPAN);
                        sp.steps = sp.hang_at + 2;
                        if (run(&sp, &r) < 0)
                                return -1;
                        if (r.hang_detect_s >= 0)
                                v[n++] = r.hang_detect_s;
                        named += r.hang_named;
                }
                char found[16], nm[16];
                snprintf(found, sizeof(found), "%d%%", n * 100 / (int) trials);
                snprintf(nm, sizeof(nm), "%d%%", named * 100 / (int) trials);
                printf("  %-28s %-7s ", cases[c].name, found);
                print_dist(v, n, "");
                printf("%s\n", nm);
        }
        printf("\n");
        free(v);
        return 0;
}

/*
 * (d) The watch's part of a sweep with 1,024 ranks stepping (every slot of the rank table),
 * the median of 21 runs of 200 sweeps; the baseline, interleaved: the least a sweep does
 * with the same samples anyway, copying each into an array and taking the job's median.
 */
static int sweep_cost(void)
{
        enum { RUNS = 21, SWEEPS = 200, N = NPF_SHM_SLOTS };
        npf_progress_options_t opt = { .stall_after_ms = 300000, .stall_factor = 20, .slowdown_pct = 20,
                                       .slowdown_steps = 50, .gap_max_ms = 4000 };
        static npf_progress_sample_t sm[N];
        static int64_t copy[N];
        double watch[RUNS], plain[RUNS];
        npf_progress_t *p = NULL;
        uint64_t now = 1000 * MS, rng = 42;
        int64_t acc = 0;

        if (npf_progress_new(&opt, NULL, NULL, &p) < 0)
                return -1;
        for (uint32_t r = 0; r < N; r++)
                sm[r] = (npf_progress_sample_t) { .slot = r, .tag = 100 + r, .rank = r, .step = 1 };
        for (int run_i = 0; run_i < RUNS; run_i++) {
                uint64_t t0 = npf_bench_now_ns();
                for (int k = 0; k < SWEEPS; k++) {
                        now += 1000 * MS;
                        npf_progress_begin(p, now);
                        for (uint32_t r = 0; r < N; r++) {
                                sm[r].step += 2 + (uniform(&rng) < 0.5);
                                npf_progress_sample(p, &sm[r]);
                        }
                        npf_progress_end(p);
                }
                watch[run_i] = (double) (npf_bench_now_ns() - t0) / SWEEPS / 1e3;
                t0 = npf_bench_now_ns();
                for (int k = 0; k < SWEEPS; k++) {
                        for (uint32_t r = 0; r < N; r++) {
                                copy[r] = sm[r].step + (uniform(&rng) < 0.5);   /* the same draws */
                        }
                        qsort(copy, N, sizeof(copy[0]), by_int64);
                        acc += copy[(N - 1) / 2];
                        __asm__ volatile("" : "+r"(acc));
                }
                plain[run_i] = (double) (npf_bench_now_ns() - t0) / SWEEPS / 1e3;
        }
        printf("(d) the watch's part of a sweep of 1,024 ranks stepping, median of %d runs of %d sweeps\n\n", RUNS, SWEEPS);
        printf("  npf_progress_begin + 1,024 samples + end   %7.1f us a sweep   baseline (copy the steps, their median)"
               " %6.1f us   %.1fx\n", npf_bench_median(watch, RUNS), npf_bench_median(plain, RUNS),
               npf_bench_median(watch, RUNS) / npf_bench_median(plain, RUNS));
        printf("\n");
        npf_progress_free(p);
        return 0;
}

int main(int argc, char **argv)
{
        int seeds = argc > 1 ? atoi(argv[1]) : 20;

        if (seeds < 1) {
                fprintf(stderr, "usage: bench-progress [SEEDS]\n");
                return 2;
        }
        printf("progress watch bench: defaults (slowdown 20%% for 50 steps, stall after %u s), 8 synchronous ranks\n\n",
               NPF_PROGRESS_STALL_AFTER_S_DEFAULT);
        if (false_alarms((unsigned) seeds) < 0 || delays((unsigned) seeds) < 0 || stalls((unsigned) seeds) < 0 ||
            sweep_cost() < 0) {
                fprintf(stderr, "bench-progress: out of memory\n");
                return 1;
        }
        return 0;
}
