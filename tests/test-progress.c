/* SPDX-License-Identifier: MIT */
/*
 * The watch of progress (daemon/progress) on synthetic ranks swept as the daemon sweeps
 * them: a rank's step is the one it started last, seen at sweep times that jitter. 10,000
 * steps of +-10% jitter are no slowdown, at several seeds and sweep granularities; a 30%
 * slowdown is found about slowdown_steps after it began, placed at its step, and ends when
 * the steps are fast again; a rank that stops is stalled after the threshold and not
 * before; the ranks behind are named, and who waits for them; steps in a window count for
 * nothing; a new claim starts afresh.
 */
#include "daemon/progress.h"
#include "lib/steptext.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MS 1000000ull
#define MAX_RANKS 8
#define MAX_EVENTS 64

typedef struct event {
        npf_progress_event_kind_t kind;
        uint32_t rank;
        int64_t step, since;
        double seconds, factor, baseline_s, step_time_s;
        uint64_t at_ns;
        char message[NPF_PROGRESS_MESSAGE_MAX];
} event_t;

typedef struct sim_rank {
        uint32_t slot, tag, rank;
        int64_t step;                   /* the step it started last */
        uint64_t next_ns;               /* when it starts the next */
        double base_ms, jitter;         /* each step base_ms * (1 +- jitter) */
        int64_t slow_from, slow_to;     /* steps in [from, to) take slow_factor times as long */
        double slow_factor;
        int64_t hang_at;                /* 0, or the step it stops at */
        int64_t window_from, window_to; /* steps in [from, to] are in a window... */
        double window_factor;           /* ...and this much slower */
        uint64_t flush_ns;              /* after its window it stays at window_to this long, flushing */
        uint64_t last_step_ns;          /* when it started its step */
        bool windowed, gone;
        unsigned seed;
} sim_rank_t;

typedef struct sim {
        npf_progress_t *p;
        npf_progress_options_t opt;
        uint64_t now;
        uint64_t poll_ns;
        double poll_jitter;
        unsigned seed;
        sim_rank_t r[MAX_RANKS];
        unsigned n;
        event_t ev[MAX_EVENTS];
        unsigned n_ev;
} sim_t;

/* A uniform number in [0, 1), from @seed (an LCG: the same run at every seed). */
static double uniform(unsigned *seed)
{
        *seed = *seed * 1103515245u + 12345u;
        return (double) ((*seed >> 8) & 0xffffff) / (double) 0x1000000;
}

static void on_event(const npf_progress_event_t *ev, void *data)
{
        sim_t *s = data;
        event_t *e;

        if (s->n_ev >= MAX_EVENTS)
                fail_msg("more than %d events", MAX_EVENTS);
        e = &s->ev[s->n_ev++];
        *e = (event_t) { .kind = ev->kind, .rank = ev->rank, .step = ev->step, .since = ev->since_step,
                         .seconds = ev->seconds, .factor = ev->factor, .baseline_s = ev->baseline_s,
                         .step_time_s = ev->step_time_s, .at_ns = s->now };
        if (ev->message)
                snprintf(e->message, sizeof(e->message), "%s", ev->message);
}

static void sim_init(sim_t *s, unsigned seed, uint64_t poll_ms)
{
        memset(s, 0, sizeof(*s));
        s->opt = (npf_progress_options_t) {
                .stall_after_ms = 5000,
                .stall_factor = 20,
                .slowdown_pct = 20,
                .slowdown_steps = 50,
                .gap_max_ms = 4 * poll_ms > 1000 ? 4 * poll_ms : 1000,
        };
        s->poll_ns = poll_ms * MS;
        s->poll_jitter = 0.2;
        s->seed = seed * 7919u + 3;
        s->now = 1000 * MS;
        assert_int_equal(npf_progress_new(&s->opt, on_event, s, &s->p), 0);
}

static void sim_free(sim_t *s)
{
        s->p = npf_progress_free(s->p);
}

static sim_rank_t *add_rank(sim_t *s, uint32_t rank, double base_ms, double jitter)
{
        sim_rank_t *r = &s->r[s->n++];

        *r = (sim_rank_t) { .slot = rank, .tag = 100 + rank, .rank = rank, .step = 1, .base_ms = base_ms,
                            .jitter = jitter, .seed = s->seed + rank * 31u, .last_step_ns = s->now };
        r->next_ns = s->now + (uint64_t) (base_ms * MS);
        return r;
}

static uint64_t step_ns(sim_rank_t *r, int64_t step)
{
        double ms = r->base_ms * (1.0 + r->jitter * (2.0 * uniform(&r->seed) - 1.0));

        if (step >= r->slow_from && step < r->slow_to)
                ms *= r->slow_factor;
        if (r->window_to && step >= r->window_from && step <= r->window_to)
                ms *= r->window_factor;
        return (uint64_t) (ms * MS);
}

/* Each rank starts the steps whose time came, up to @now. */
static void advance(sim_rank_t *r, uint64_t now)
{
        while (!r->gone && r->next_ns <= now && !(r->hang_at && r->step >= r->hang_at)) {
                r->step++;
                r->last_step_ns = r->next_ns;
                r->next_ns += step_ns(r, r->step);
                if (r->window_to && r->step == r->window_to + 1)
                        r->next_ns += r->flush_ns;      /* closing the window: flushing, stepping nowhere */
        }
        r->windowed = r->window_to && r->step >= r->window_from &&
                      (r->step <= r->window_to || (r->step == r->window_to + 1 && now < r->last_step_ns + r->flush_ns));
}

/* One sweep, a poll interval (jittered) after the last. */
static void sweep(sim_t *s)
{
        double g = 1.0 + s->poll_jitter * (2.0 * uniform(&s->seed) - 1.0);

        s->now += (uint64_t) ((double) s->poll_ns * g);
        npf_progress_begin(s->p, s->now);
        for (unsigned i = 0; i < s->n; i++) {
                sim_rank_t *r = &s->r[i];
                advance(r, s->now);
                if (r->gone)
                        continue;
                npf_progress_sample(s->p, &(npf_progress_sample_t) { .slot = r->slot, .tag = r->tag, .rank = r->rank,
                                                                     .step = r->step, .windowed = r->windowed });
        }
        npf_progress_end(s->p);
}

/* Sweep until rank 0 reaches @step. */
static void run_to(sim_t *s, int64_t step)
{
        while (s->r[0].step < step)
                sweep(s);
}

static void run_for(sim_t *s, uint64_t ns)
{
        uint64_t end = s->now + ns;

        while (s->now < end)
                sweep(s);
}

static unsigned count(const sim_t *s, npf_progress_event_kind_t kind)
{
        unsigned n = 0;

        for (unsigned i = 0; i < s->n_ev; i++)
                n += s->ev[i].kind == kind;
        return n;
}

static const event_t *first(const sim_t *s, npf_progress_event_kind_t kind)
{
        for (unsigned i = 0; i < s->n_ev; i++)
                if (s->ev[i].kind == kind)
                        return &s->ev[i];
        return NULL;
}

static double rank_step_time(const sim_t *s, uint32_t slot)
{
        npf_progress_rank_t r;
        uint32_t cursor = 0;

        while (npf_progress_next(s->p, &cursor, &r))
                if (r.slot == slot)
                        return r.step_time_s;
        fail_msg("slot %u is not live", slot);
        return 0;
}

/* A granularity of sweeping: steps of @step_ms seen every @poll_ms. */
typedef struct grain {
        double step_ms;
        uint64_t poll_ms;
        double steps_per_sweep;
} grain_t;

static const grain_t grains[] = {
        { 30, 100, 3.3 },       /* the integration test's */
        { 30, 1000, 33 },       /* the default poll, a fast job */
        { 2000, 1000, 0.5 },    /* a slow job: a step every other sweep */
};

/* --- jitter is never a slowdown ----------------------------------------------------------- */

static void test_jitter(void **state)
{
        (void) state;
        for (size_t g = 0; g < sizeof(grains) / sizeof(grains[0]); g++) {
                for (unsigned seed = 1; seed <= 4; seed++) {
                        sim_t s;
                        sim_init(&s, seed, grains[g].poll_ms);
                        for (uint32_t k = 0; k < 4; k++)
                                add_rank(&s, k, grains[g].step_ms, 0.10);
                        run_to(&s, 10000);
                        if (s.n_ev)
                                fail_msg("%.0f ms steps seen every %" PRIu64 " ms, seed %u: %u events, the first %d "
                                         "at step %" PRId64 ", factor %.3f", grains[g].step_ms, grains[g].poll_ms,
                                         seed, s.n_ev, (int) s.ev[0].kind, s.ev[0].step, s.ev[0].factor);
                        assert_false(npf_progress_slowing(s.p));
                        assert_int_equal(npf_progress_slowdowns(s.p), 0);
                        double job = npf_progress_step_time(s.p) * 1e3;
                        if (job < grains[g].step_ms * 0.95 || job > grains[g].step_ms * 1.05)
                                fail_msg("the job's step time %.2f ms, not about %.0f", job, grains[g].step_ms);
                        for (uint32_t k = 0; k < 4; k++) {
                                double r = rank_step_time(&s, k) * 1e3;
                                if (r < grains[g].step_ms * 0.9 || r > grains[g].step_ms * 1.1)
                                        fail_msg("rank %u's step time %.2f ms, not about %.0f", k, r, grains[g].step_ms);
                        }
                        assert_null(npf_progress_message(s.p));
                        sim_free(&s);
                }
        }
}

/* --- a slowdown of 30% at step N -------------------------------------------------------------- */

static void test_slowdown(void **state)
{
        const int64_t at = 3000, back = 6000;

        (void) state;
        for (size_t g = 0; g < sizeof(grains) / sizeof(grains[0]); g++) {
                for (unsigned seed = 1; seed <= 4; seed++) {
                        sim_t s;
                        /* A sweep sees a step to within a sweep's steps: since_step is placed that well. */
                        double slack = grains[g].steps_per_sweep > 1.5 ? 2 * grains[g].steps_per_sweep : 3;
                        sim_init(&s, seed, grains[g].poll_ms);
                        for (uint32_t k = 0; k < 4; k++) {
                                sim_rank_t *r = add_rank(&s, k, grains[g].step_ms, 0.10);
                                r->slow_from = at;
                                r->slow_to = back;
                                r->slow_factor = 1.3;
                        }
                        run_to(&s, at - 1);
                        assert_int_equal(s.n_ev, 0);
                        run_to(&s, at + 200);
                        const event_t *e = first(&s, NPF_PROGRESS_SLOWDOWN_BEGAN);
                        if (!e)
                                fail_msg("%.0f ms steps seen every %" PRIu64 " ms, seed %u: no slowdown found by step "
                                         "%" PRId64, grains[g].step_ms, grains[g].poll_ms, seed, s.r[0].step);
                        printf("  %.0f ms steps every %" PRIu64 " ms, seed %u: found at step %" PRId64 ", since %" PRId64
                               ", factor %.3f, baseline %.2f ms\n", grains[g].step_ms, grains[g].poll_ms, seed, e->step,
                               e->since, e->factor, e->baseline_s * 1e3);
                        /* Found once it held slowdown_steps steps, give or take a block and a sweep. */
                        if (e->step > at + 50 + NPF_PROGRESS_BLOCK_STEPS + 2 * slack || e->step < at + 40)
                                fail_msg("found at step %" PRId64 ", %" PRId64 " steps after it began", e->step,
                                         e->step - at);
                        if (e->since < at - slack || e->since > at + slack)
                                fail_msg("since step %" PRId64 ", not %" PRId64 " (+-%.0f)", e->since, at, slack);
                        if (e->factor < 1.22 || e->factor > 1.38)
                                fail_msg("factor %.3f, not about 1.3", e->factor);
                        if (e->baseline_s * 1e3 < grains[g].step_ms * 0.95 || e->baseline_s * 1e3 > grains[g].step_ms * 1.05)
                                fail_msg("baseline %.2f ms, not about %.0f", e->baseline_s * 1e3, grains[g].step_ms);
                        assert_true(npf_progress_slowing(s.p));
                        assert_int_equal(npf_progress_slowdowns(s.p), 1);
                        assert_non_null(npf_progress_message(s.p));
                        assert_non_null(strstr(npf_progress_message(s.p), "its baseline since step"));

                        json_t *o = npf_progress_json(s.p), *sd = json_object_get(o, "slowdown");
                        assert_true(json_is_object(sd));
                        assert_int_equal(json_integer_value(json_object_get(sd, "since_step")), e->since);
                        assert_true(json_is_real(json_object_get(sd, "factor")));
                        assert_true(json_is_real(json_object_get(sd, "baseline_ms")));
                        json_decref(o);

                        /* It goes on: told once. Then the steps are fast again: it is over, once. */
                        run_to(&s, back - 1);
                        assert_int_equal(count(&s, NPF_PROGRESS_SLOWDOWN_BEGAN), 1);
                        assert_int_equal(count(&s, NPF_PROGRESS_SLOWDOWN_ENDED), 0);
                        run_to(&s, back + 200);
                        const event_t *end = first(&s, NPF_PROGRESS_SLOWDOWN_ENDED);
                        assert_non_null(end);
                        if (end->step > back + 50 + NPF_PROGRESS_BLOCK_STEPS + 2 * slack)
                                fail_msg("over at step %" PRId64 ", %" PRId64 " steps after", end->step, end->step - back);
                        assert_false(npf_progress_slowing(s.p));
                        /* And nothing more while it runs on at its old pace. */
                        run_to(&s, back + 3000);
                        assert_int_equal(s.n_ev, 2);
                        sim_free(&s);
                }
        }
}

/* A slowdown of 10%, half the 20% margin, is none; one of a few blocks (a checkpoint) neither. */
static void test_small_or_short(void **state)
{
        sim_t s;

        (void) state;
        sim_init(&s, 3, 100);
        for (uint32_t k = 0; k < 4; k++) {
                sim_rank_t *r = add_rank(&s, k, 30, 0.10);
                r->slow_from = 2000;
                r->slow_to = 4000;
                r->slow_factor = 1.10;
        }
        run_to(&s, 5000);
        assert_int_equal(s.n_ev, 0);
        /* 30 steps three times as long: shorter than slowdown_steps. */
        for (uint32_t k = 0; k < 4; k++) {
                s.r[k].slow_from = 5500;
                s.r[k].slow_to = 5530;
                s.r[k].slow_factor = 3;
        }
        run_to(&s, 7000);
        assert_int_equal(s.n_ev, 0);
        sim_free(&s);
}

/* --- stalls ------------------------------------------------------------------------------- */

static void test_stall(void **state)
{
        sim_t s;

        (void) state;
        sim_init(&s, 5, 100);
        for (uint32_t k = 0; k < 4; k++)
                add_rank(&s, k, 30, 0.10);
        s.r[2].hang_at = 500;
        run_to(&s, 480);
        assert_int_equal(s.n_ev, 0);
        /* Rank 2 starts step 500 and no other; the threshold is 5 s (20 x 30 ms is less). */
        while (s.r[2].step < 500)
                sweep(&s);
        uint64_t stopped = s.r[2].last_step_ns;
        while (s.now < stopped + 4900 * MS) {
                sweep(&s);
                assert_int_equal(npf_progress_stalled(s.p), 0);
        }
        assert_int_equal(s.n_ev, 0);
        run_for(&s, 400 * MS);
        assert_int_equal(npf_progress_stalled(s.p), 1);
        const event_t *e = first(&s, NPF_PROGRESS_STALL_BEGAN);
        assert_non_null(e);
        assert_int_equal(e->rank, 2);
        assert_int_equal(e->step, 500);
        if (e->seconds < 5.0 || e->seconds > 5.4)
                fail_msg("stalled after %.2f s of silence", e->seconds);
        if (e->at_ns < stopped + 5000 * MS || e->at_ns > stopped + 5300 * MS)
                fail_msg("told %.2f s after its last step", (double) (e->at_ns - stopped) / 1e9);
        /* The others are ahead and step on: the sentence names rank 2, behind them. */
        const char *m = npf_progress_message(s.p);
        assert_non_null(m);
        printf("  %s\n", m);
        assert_non_null(strstr(m, "rank 2 is stalled at step 500 (no step for 5."));
        assert_non_null(strstr(m, "behind the 3 others, at steps "));
        e = first(&s, NPF_PROGRESS_STALLS);
        assert_non_null(e);
        assert_non_null(strstr(e->message, "rank 2 is stalled at step 500 (no step for 5."));
        json_t *o = npf_progress_json(s.p);
        assert_int_equal(json_array_size(json_object_get(o, "stalled_ranks")), 1);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "stalled_ranks"), 0)), 2);
        assert_true(json_integer_value(json_object_get(o, "fastest_step")) > 500);
        json_decref(o);
        const npf_view_progress_t *v = npf_progress_view(s.p);
        assert_true(v[2].known && v[2].stalled && v[2].tag == 102 && v[2].stalled_for_s >= 5.0);
        assert_true(v[1].known && !v[1].stalled && v[1].step_time_ms > 25 && v[1].step_time_ms < 35);
        /* Told once: more sweeps change nothing. */
        run_for(&s, 2000 * MS);
        assert_int_equal(count(&s, NPF_PROGRESS_STALL_BEGAN), 1);
        assert_int_equal(count(&s, NPF_PROGRESS_STALLS), 1);
        /* It steps again: over, once. */
        s.r[2].hang_at = 0;
        s.r[2].next_ns = s.now + 10 * MS;
        run_for(&s, 300 * MS);
        assert_int_equal(npf_progress_stalled(s.p), 0);
        assert_int_equal(count(&s, NPF_PROGRESS_STALL_ENDED), 1);
        assert_true(first(&s, NPF_PROGRESS_STALL_ENDED)->seconds > 7.0);
        assert_null(npf_progress_message(s.p));
        /* Stalled again, then gone: over, as left. */
        s.r[2].hang_at = s.r[2].step;
        run_for(&s, 5500 * MS);
        assert_int_equal(count(&s, NPF_PROGRESS_STALL_BEGAN), 2);
        s.r[2].gone = true;
        sweep(&s);
        assert_int_equal(count(&s, NPF_PROGRESS_STALL_GONE), 1);
        assert_int_equal(npf_progress_stalled(s.p), 0);
        assert_int_equal(npf_progress_stalls(s.p), 2);
        assert_false(npf_progress_view(s.p)[2].known);
        sim_free(&s);
}

/* A rank of 1 s steps may be silent 20 x 1 s, longer than stall_after (5 s), before it is stalled. */
static void test_stall_factor(void **state)
{
        sim_t s;

        (void) state;
        sim_init(&s, 6, 100);
        add_rank(&s, 0, 1000, 0.05);
        add_rank(&s, 1, 1000, 0.05);
        s.r[1].hang_at = 60;
        run_to(&s, 60);
        while (s.r[1].step < 60)
                sweep(&s);
        uint64_t stopped = s.r[1].last_step_ns;
        while (s.now < stopped + 15000 * MS)
                sweep(&s);
        assert_int_equal(npf_progress_stalled(s.p), 0);
        while (s.now < stopped + 22000 * MS)
                sweep(&s);
        assert_int_equal(npf_progress_stalled(s.p), 1);
        const event_t *e = first(&s, NPF_PROGRESS_STALL_BEGAN);
        assert_non_null(e);
        if (e->seconds < 18 || e->seconds > 22)
                fail_msg("stalled after %.1f s; 20 step times of %.2f s", e->seconds, e->step_time_s);
        sim_free(&s);
}

/* A rank that never stepped while watched is never stalled: it may be waiting to begin. */
static void test_never_stepped(void **state)
{
        sim_t s;

        (void) state;
        sim_init(&s, 7, 100);
        add_rank(&s, 0, 30, 0)->hang_at = 1;
        run_for(&s, 20000 * MS);
        assert_int_equal(s.n_ev, 0);
        assert_int_equal(npf_progress_stalled(s.p), 0);
        sim_free(&s);
}

/* Put the ranks of @s at @steps and let them step no more. */
static void stop_at(sim_t *s, const int64_t *steps)
{
        for (unsigned i = 0; i < s->n; i++) {
                s->r[i].hang_at = steps[i];
                if (s->r[i].step > steps[i])
                        fail_msg("rank %u is past %" PRId64, i, steps[i]);
        }
}

/* In a hang of synchronous training every rank waits in a collective for the one behind. */
static void test_they_wait(void **state)
{
        int64_t at[MAX_RANKS];
        sim_t s;

        (void) state;
        sim_init(&s, 8, 100);
        for (uint32_t k = 0; k < 8; k++) {
                add_rank(&s, k, 30, 0.05);
                s.r[k].step = 40900;
        }
        run_to(&s, 40950);
        for (unsigned k = 0; k < 8; k++)
                at[k] = k == 5 ? 41002 : 41003;
        stop_at(&s, at);
        run_for(&s, 10000 * MS);
        assert_int_equal(npf_progress_stalled(s.p), 8);
        const char *m = npf_progress_message(s.p);
        printf("  %s\n", m);
        assert_non_null(m);
        assert_non_null(strstr(m, "rank 5 is at step 41,002, the 7 others at 41,003: they wait for it (no step for "));
        /* The sentence was told as the ranks crossed their thresholds, the last time as it is now. */
        assert_int_equal(s.ev[s.n_ev - 1].kind, NPF_PROGRESS_STALLS);
        assert_non_null(strstr(s.ev[s.n_ev - 1].message, "rank 5 is at step 41,002, the 7 others at 41,003: they wait"));
        assert_int_equal(count(&s, NPF_PROGRESS_STALL_BEGAN), 8);
        sim_free(&s);

        /* Two behind, at one step; the others at two. */
        sim_init(&s, 9, 100);
        for (uint32_t k = 0; k < 6; k++)
                add_rank(&s, k, 30, 0.05);
        run_to(&s, 300);
        int64_t two[] = { 400, 399, 400, 401, 399, 400 };
        stop_at(&s, two);
        run_for(&s, 10000 * MS);
        m = npf_progress_message(s.p);
        printf("  %s\n", m);
        assert_non_null(strstr(m, "ranks 1 and 4 are at step 399, the 4 others at 400 to 401: they wait for them"));
        sim_free(&s);

        /* All at one step: none is behind another here. */
        sim_init(&s, 10, 100);
        for (uint32_t k = 0; k < 3; k++)
                add_rank(&s, k, 30, 0.05);
        run_to(&s, 1200);
        int64_t same[] = { 1234, 1234, 1234 };
        stop_at(&s, same);
        run_for(&s, 10000 * MS);
        m = npf_progress_message(s.p);
        printf("  %s\n", m);
        assert_non_null(strstr(m, "all 3 ranks have made no step for "));
        assert_non_null(strstr(m, "all at step 1,234: none is behind another here"));
        sim_free(&s);
}

/* --- windows -------------------------------------------------------------------------------- */

/*
 * Steps in a window are three times as long, and the window's flush keeps the rank at one
 * step for 8 s, longer than stall_after: neither a slowdown nor a stall, and the step time
 * after is the one before.
 */
static void test_window(void **state)
{
        sim_t s;

        (void) state;
        for (unsigned seed = 1; seed <= 3; seed++) {
                sim_init(&s, seed, 100);
                for (uint32_t k = 0; k < 4; k++) {
                        sim_rank_t *r = add_rank(&s, k, 30, 0.10);
                        r->window_from = 2000;
                        r->window_to = 2300;
                        r->window_factor = 3;
                        r->flush_ns = 8000 * MS;
                }
                run_to(&s, 2150);
                assert_true(s.r[0].windowed);
                run_to(&s, 2301);
                assert_true(s.r[0].windowed);  /* flushing */
                run_for(&s, 8500 * MS);
                assert_false(s.r[0].windowed);
                run_to(&s, 4000);
                if (s.n_ev)
                        fail_msg("seed %u: %u events; the first %d at step %" PRId64, seed, s.n_ev, (int) s.ev[0].kind,
                                 s.ev[0].step);
                for (uint32_t k = 0; k < 4; k++) {
                        double r = rank_step_time(&s, k) * 1e3;
                        if (r < 27 || r > 33)
                                fail_msg("rank %u's step time %.2f ms after the window", k, r);
                }
                sim_free(&s);
        }
}

/* A window on one rank alone slows the others too (they wait for it): no interval of the job counts. */
static void test_window_one_rank(void **state)
{
        sim_t s;

        (void) state;
        sim_init(&s, 4, 100);
        for (uint32_t k = 0; k < 4; k++) {
                sim_rank_t *r = add_rank(&s, k, 30, 0.10);
                r->slow_from = 2000;
                r->slow_to = 2400;
                r->slow_factor = 2;
        }
        s.r[3].window_from = 1990;
        s.r[3].window_to = 2500;
        s.r[3].window_factor = 2;
        run_to(&s, 4000);
        assert_int_equal(s.n_ev, 0);
        sim_free(&s);
}

/* --- claims --------------------------------------------------------------------------------- */

/* A rank restarted (another claim of its slot, from step 1): nothing carries over, nothing is told. */
static void test_new_claim(void **state)
{
        sim_t s;

        (void) state;
        sim_init(&s, 11, 100);
        for (uint32_t k = 0; k < 4; k++)
                add_rank(&s, k, 30, 0.10);
        run_to(&s, 1000);
        assert_true(rank_step_time(&s, 1) > 0);
        s.r[1].tag = 999;
        s.r[1].step = 1;
        s.r[1].base_ms = 60;    /* another job, slower: a step time of its own */
        sweep(&s);
        assert_true(rank_step_time(&s, 1) == 0);
        assert_int_equal(npf_progress_view(s.p)[1].tag, 999);
        run_to(&s, 3000);
        double r = rank_step_time(&s, 1) * 1e3;
        if (r < 54 || r > 66)
                fail_msg("the new claim's step time %.2f ms, not about 60", r);
        assert_int_equal(s.n_ev, 0);

        /* Every rank a new claim, a new job twice as slow: no slowdown of the old one. */
        for (uint32_t k = 0; k < 4; k++) {
                s.r[k].tag += 1000;
                s.r[k].step = 1;
                s.r[k].base_ms = 60;
                s.r[k].next_ns = s.now + 60 * MS;
        }
        run_to(&s, 2000);
        assert_int_equal(s.n_ev, 0);
        assert_true(npf_progress_step_time(s.p) > 0.054);
        sim_free(&s);
}

/* A job slowed when all its ranks leave: its slowdown is over with them. */
static void test_job_leaves(void **state)
{
        sim_t s;

        (void) state;
        sim_init(&s, 12, 100);
        for (uint32_t k = 0; k < 2; k++) {
                sim_rank_t *r = add_rank(&s, k, 30, 0.05);
                r->slow_from = 1000;
                r->slow_to = 100000;
                r->slow_factor = 2;
        }
        run_to(&s, 1200);
        assert_true(npf_progress_slowing(s.p));
        s.r[0].gone = s.r[1].gone = true;
        sweep(&s);
        assert_false(npf_progress_slowing(s.p));
        assert_int_equal(count(&s, NPF_PROGRESS_SLOWDOWN_ENDED), 1);
        json_t *o = npf_progress_json(s.p);
        assert_true(json_is_null(json_object_get(o, "slowdown")));
        assert_true(json_is_null(json_object_get(o, "step_time_ms")));
        assert_true(json_is_null(json_object_get(o, "fastest_step")));
        assert_true(json_is_null(json_object_get(o, "message")));
        assert_int_equal(json_array_size(json_object_get(o, "stalled_ranks")), 0);
        json_decref(o);
        sim_free(&s);
}

/* A rank that could not be read in a sweep is not gone. */
static void test_unread(void **state)
{
        sim_t s;

        (void) state;
        sim_init(&s, 13, 100);
        add_rank(&s, 0, 30, 0.05);
        run_to(&s, 500);
        double before = rank_step_time(&s, 0);
        npf_progress_begin(s.p, s.now += 100 * MS);
        npf_progress_unread(s.p, 0);
        npf_progress_end(s.p);
        assert_true(npf_progress_view(s.p)[0].known);
        assert_true(rank_step_time(&s, 0) == before);
        sim_free(&s);
}

static void test_words(void **state)
{
        char b[32];

        (void) state;
        assert_string_equal(npf_step_text(0, b), "0");
        assert_string_equal(npf_step_text(999, b), "999");
        assert_string_equal(npf_step_text(1000, b), "1,000");
        assert_string_equal(npf_step_text(41002, b), "41,002");
        assert_string_equal(npf_step_text(1234567, b), "1,234,567");
        assert_string_equal(npf_step_text(INT64_MAX, b), "9,223,372,036,854,775,807");
        assert_string_equal(npf_step_text(-1200, b), "-1,200");

        npf_progress_t *p;
        npf_progress_options_t bad = { .stall_after_ms = 1000, .stall_factor = 20, .slowdown_pct = 0,
                                       .slowdown_steps = 50, .gap_max_ms = 1000 };
        assert_int_equal(npf_progress_new(&bad, NULL, NULL, &p), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_jitter),
                cmocka_unit_test(test_slowdown),
                cmocka_unit_test(test_small_or_short),
                cmocka_unit_test(test_stall),
                cmocka_unit_test(test_stall_factor),
                cmocka_unit_test(test_never_stepped),
                cmocka_unit_test(test_they_wait),
                cmocka_unit_test(test_window),
                cmocka_unit_test(test_window_one_rank),
                cmocka_unit_test(test_new_claim),
                cmocka_unit_test(test_job_leaves),
                cmocka_unit_test(test_unread),
                cmocka_unit_test(test_words),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
