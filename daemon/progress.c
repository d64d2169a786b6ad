/* SPDX-License-Identifier: MIT */
#include "daemon/progress.h"
#include "lib/steptext.h"
#include "npuprof/shm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_BLOCKS_MIN 3u               /* a slowdown is told by three blocks at least */
#define REF_BLOCKS_MIN 5u               /* and measured against five at least... */
#define REF_SPANS 2u                    /* ...that hold twice slowdown_steps steps */
#define RANKS_NAMED 8u                  /* ranks a sentence names; the rest are counted */
#define CHANGE_LOOKBACK 8u              /* blocks before a rise where its beginning is looked for */

/*
 * A series of (sweep time, step) samples, cut into blocks: a block runs from a sweep that
 * saw the step change to a later one that did, once it holds min_steps steps or spans as
 * many sweeps. Each end is then off by less than a step and less than a sweep's gap, so
 * a block's mean step time is off by a tenth at worst, and the errors of blocks side by
 * side cancel. An interval that is not clean (a window, a gap, another claim) closes
 * nothing and breaks the series: the next block starts after it.
 */
typedef struct series {
        uint64_t t0;                    /* when a sweep first saw step s0 */
        int64_t s0;
        int64_t last;                   /* the step at the last sample; < 0: none */
        uint32_t sweeps;                /* since t0 */
        bool open;
} series_t;

typedef struct block {
        double tau;                     /* seconds per step */
        int64_t s0, s1;                 /* the steps it spans */
        bool slow;                      /* part of a slowdown: never part of a baseline */
} block_t;

typedef struct rank_track {
        series_t se;
        uint32_t tag, rank;
        int64_t step;
        uint64_t quiet_ns;              /* sweep time since its step last changed, gaps capped */
        double step_time_s;             /* median of blocks[]; 0: none yet */
        float blocks[NPF_PROGRESS_RANK_BLOCKS];
        uint8_t n_blocks, head;
        bool live;                      /* at the last sweep */
        bool seen;                      /* at this one */
        bool windowed, stepped, stalled;
} rank_track_t;

struct npf_progress {
        npf_progress_options_t opt;
        npf_progress_event_cb cb;
        void *data;
        uint32_t job_block_steps;
        /* The sweep under way. */
        uint64_t now_ns, last_ns;
        uint64_t gap_counted;           /* the gap since the last sweep, capped */
        bool gap_ok;                    /* the gap is short enough to time steps across */
        uint32_t members, continuing, n_steps;
        uint64_t sig;                   /* of the members (slot, tag), order aside */
        bool any_windowed, any_unread;
        /* The ranks. */
        uint32_t n_live, n_next;
        uint32_t live[NPF_SHM_SLOTS], next[NPF_SHM_SLOTS];     /* slots of the last sweep, of this one */
        uint32_t stalled;
        uint64_t stalled_sig, stalls;
        int64_t fastest;
        /* The job. */
        series_t job;
        uint64_t job_sig;
        uint32_t job_members;
        int64_t job_step;
        uint32_t head, n;               /* blocks[]: a ring, the newest at head - 1 */
        double step_time_s;
        bool slowing;
        int64_t since;
        double baseline_s, factor;
        uint64_t slowdowns;
        char message[NPF_PROGRESS_MESSAGE_MAX];
        block_t blocks[NPF_PROGRESS_JOB_BLOCKS];
        double scratch[NPF_PROGRESS_JOB_BLOCKS];
        int64_t steps[NPF_SHM_SLOTS];
        npf_view_progress_t view[NPF_SHM_SLOTS];
        rank_track_t ranks[NPF_SHM_SLOTS];
};

static void tell(npf_progress_t *p, const npf_progress_event_t *ev)
{
        if (p->cb)
                p->cb(ev, p->data);
}

static uint64_t mix(uint32_t slot, uint32_t tag)
{
        uint64_t z = ((uint64_t) slot << 32 | tag) + 0x9e3779b97f4a7c15ull;

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

static int by_double(const void *a, const void *b)
{
        double x = *(const double *) a, y = *(const double *) b;

        return (x > y) - (x < y);
}

static int by_int64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;

        return (x > y) - (x < y);
}

static int by_uint32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;

        return (x > y) - (x < y);
}

/* The median of @a[0..@n) (reordered), @n > 0. */
static double median(double *a, size_t n)
{
        qsort(a, n, sizeof(*a), by_double);
        return n % 2 ? a[n / 2] : (a[n / 2 - 1] + a[n / 2]) / 2;
}

/* Feed @se the step @step seen at @now; @clean: the interval since the last sample may be timed. Return: true and @ret when a block closed. */
static bool series_feed(series_t *se, uint64_t now, int64_t step, bool clean, uint32_t min_steps, block_t *ret)
{
        bool changed = se->last >= 0 && step != se->last, closed = false;

        if (!clean || step < 0 || se->last < 0 || step < se->last) {
                se->open = false;
        } else if (!se->open) {
                if (changed) {
                        se->open = true;
                        se->t0 = now;
                        se->s0 = step;
                        se->sweeps = 0;
                }
        } else {
                se->sweeps++;
                if (changed && ((uint64_t) (step - se->s0) >= min_steps || se->sweeps >= min_steps)) {
                        ret->tau = (double) (now - se->t0) / 1e9 / (double) (step - se->s0);
                        ret->s0 = se->s0;
                        ret->s1 = step;
                        ret->slow = false;
                        se->t0 = now;
                        se->s0 = step;
                        se->sweeps = 0;
                        closed = true;
                }
        }
        se->last = step;
        return closed;
}

static void series_reset(series_t *se)
{
        *se = (series_t) { .last = -1 };
}

int npf_progress_new(const npf_progress_options_t *opt, npf_progress_event_cb cb, void *data,
                     npf_progress_t **ret_progress)
{
        npf_progress_t *p;

        if (!opt->stall_after_ms || !opt->stall_factor || !opt->slowdown_pct || !opt->slowdown_steps ||
            !opt->gap_max_ms)
                return -EINVAL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->opt = *opt;
        p->cb = cb;
        p->data = data;
        p->job_block_steps = opt->slowdown_steps / 5;
        if (p->job_block_steps < 1)
                p->job_block_steps = 1;
        if (p->job_block_steps > NPF_PROGRESS_BLOCK_STEPS)
                p->job_block_steps = NPF_PROGRESS_BLOCK_STEPS;
        p->fastest = -1;
        p->job_step = -1;
        series_reset(&p->job);
        *ret_progress = p;
        return 0;
}

npf_progress_t *npf_progress_free(npf_progress_t *p)
{
        free(p);
        return NULL;
}

void npf_progress_begin(npf_progress_t *p, uint64_t now_ns)
{
        uint64_t gap = p->last_ns && now_ns > p->last_ns ? now_ns - p->last_ns : 0;
        uint64_t max = p->opt.gap_max_ms * 1000000u;

        p->gap_ok = p->last_ns != 0 && now_ns >= p->last_ns && gap <= max;
        p->gap_counted = gap < max ? gap : max;
        p->now_ns = now_ns;
        p->last_ns = now_ns;
        p->members = p->continuing = p->n_steps = p->n_next = 0;
        p->sig = 0;
        p->any_windowed = p->any_unread = false;
}

static void rank_reset(rank_track_t *t, uint32_t tag, uint32_t rank)
{
        memset(t, 0, sizeof(*t));
        series_reset(&t->se);
        t->tag = tag;
        t->rank = rank;
        t->step = -1;
}

/* How long @t may be silent: stall_after, or stall_factor of its step times where that is longer. */
static uint64_t stall_ns(const npf_progress_t *p, const rank_track_t *t)
{
        uint64_t after = p->opt.stall_after_ms * 1000000u;
        double own = t->step_time_s * p->opt.stall_factor * 1e9;

        if (own > 9e18)
                own = 9e18;     /* a step time a scribbled slot gave: no overflow */
        return own > (double) after ? (uint64_t) own : after;
}

static void rank_event(npf_progress_t *p, npf_progress_event_kind_t kind, const rank_track_t *t)
{
        tell(p, &(npf_progress_event_t) { .kind = kind, .rank = t->rank, .step = t->step,
                                          .seconds = (double) t->quiet_ns / 1e9, .step_time_s = t->step_time_s });
}

static void rank_block(rank_track_t *t, const block_t *b)
{
        double a[NPF_PROGRESS_RANK_BLOCKS];

        t->blocks[t->head] = (float) b->tau;
        t->head = (uint8_t) ((t->head + 1) % NPF_PROGRESS_RANK_BLOCKS);
        if (t->n_blocks < NPF_PROGRESS_RANK_BLOCKS)
                t->n_blocks++;
        for (unsigned k = 0; k < t->n_blocks; k++)
                a[k] = t->blocks[k];
        t->step_time_s = median(a, t->n_blocks);
}

static void note_view(npf_progress_t *p, uint32_t slot)
{
        const rank_track_t *t = &p->ranks[slot];

        p->view[slot] = (npf_view_progress_t) {
                .tag = t->tag,
                .known = true,
                .stalled = t->stalled,
                .step_time_ms = t->step_time_s * 1e3,
                .stalled_for_s = t->stalled ? (double) t->quiet_ns / 1e9 : 0,
        };
}

void npf_progress_sample(npf_progress_t *p, const npf_progress_sample_t *s)
{
        rank_track_t *t;
        block_t b;

        if (s->slot >= NPF_SHM_SLOTS || p->ranks[s->slot].seen)
                return;
        t = &p->ranks[s->slot];
        bool fresh = !t->live || t->tag != s->tag;
        if (fresh) {
                /* Another claim of the slot: what was known is of another process. */
                if (t->live && t->stalled)
                        rank_event(p, NPF_PROGRESS_STALL_GONE, t);
                rank_reset(t, s->tag, s->rank);
        }
        bool changed = !fresh && s->step != t->step;
        bool clean = !fresh && p->gap_ok && !s->windowed && !t->windowed;
        uint64_t silence = t->quiet_ns;

        if (s->windowed) {
                /* A window's silence is the sweep's to judge (its "stalled" state), not a progress stall. */
                t->quiet_ns = 0;
        } else if (changed) {
                t->stepped = true;
                t->quiet_ns = 0;
        } else if (!fresh) {
                t->quiet_ns += p->gap_counted;
        }
        if (series_feed(&t->se, p->now_ns, s->step, clean, NPF_PROGRESS_BLOCK_STEPS, &b))
                rank_block(t, &b);
        t->step = s->step;
        t->rank = s->rank;
        t->windowed = s->windowed;
        if (t->stalled && (changed || s->windowed)) {
                t->stalled = false;
                tell(p, &(npf_progress_event_t) { .kind = NPF_PROGRESS_STALL_ENDED, .rank = t->rank, .step = t->step,
                                                  .seconds = (double) (silence + p->gap_counted) / 1e9,
                                                  .step_time_s = t->step_time_s });
        } else if (!t->stalled && t->stepped && !s->windowed && t->quiet_ns >= stall_ns(p, t)) {
                t->stalled = true;
                p->stalls++;
                rank_event(p, NPF_PROGRESS_STALL_BEGAN, t);
        }
        t->seen = true;
        note_view(p, s->slot);
        p->next[p->n_next++] = s->slot;

        p->members++;
        p->sig += mix(s->slot, s->tag);
        p->continuing += !fresh;
        p->any_windowed |= s->windowed;
        if (s->step >= 0)
                p->steps[p->n_steps++] = s->step;
}

void npf_progress_unread(npf_progress_t *p, uint32_t slot)
{
        if (slot >= NPF_SHM_SLOTS || !p->ranks[slot].live || p->ranks[slot].seen)
                return;
        p->ranks[slot].seen = true;
        p->next[p->n_next++] = slot;
        p->any_unread = true;
}

/* --- the job ----------------------------------------------------------------------------- */

/* The @k-th oldest of the job's blocks. */
static block_t *job_block(npf_progress_t *p, uint32_t k)
{
        return &p->blocks[(p->head + NPF_PROGRESS_JOB_BLOCKS - p->n + k) % NPF_PROGRESS_JOB_BLOCKS];
}

static int64_t block_steps(const block_t *b)
{
        return b->s1 - b->s0;
}

/* How many of the newest blocks it takes to hold slowdown_steps steps, RUN_BLOCKS_MIN at least; 0: more than there are. */
static uint32_t span_blocks(npf_progress_t *p)
{
        int64_t steps = 0;

        for (uint32_t k = 1; k <= p->n; k++) {
                steps += block_steps(job_block(p, p->n - k));
                if (k >= RUN_BLOCKS_MIN && steps >= (int64_t) p->opt.slowdown_steps)
                        return k;
        }
        return 0;
}

/* The median step time of blocks [@from, @to). */
static double span_median(npf_progress_t *p, uint32_t from, uint32_t to)
{
        uint32_t n = 0;

        for (uint32_t k = from; k < to; k++)
                p->scratch[n++] = job_block(p, k)->tau;
        return n ? median(p->scratch, n) : 0;
}

/*
 * The baseline before block @end: the median of the newest NPF_PROGRESS_REF_BLOCKS blocks
 * before it that were part of no slowdown. Return: false when they are too few to tell.
 */
static bool baseline(npf_progress_t *p, uint32_t end, double *ret)
{
        uint32_t n = 0;
        int64_t steps = 0;

        for (uint32_t k = end; k-- > 0 && n < NPF_PROGRESS_REF_BLOCKS;) {
                const block_t *b = job_block(p, k);
                if (b->slow)
                        continue;
                p->scratch[n++] = b->tau;
                steps += block_steps(b);
        }
        if (n < REF_BLOCKS_MIN || steps < (int64_t) (REF_SPANS * p->opt.slowdown_steps))
                return false;
        *ret = median(p->scratch, n);
        return *ret > 0;
}

/*
 * Where a rise above @thr that goes on to the newest block began: walking back from the
 * newest, the blocks above it, and one below between two above (a quick block among slow
 * ones) while four in five are above. Return: the index of its first block, or -1 when
 * the newest is not above.
 */
static int64_t run_start(npf_progress_t *p, double thr)
{
        int64_t start = -1;
        uint32_t above = 0, blocks = 0;

        for (int64_t k = (int64_t) p->n - 1; k >= 0; k--) {
                const block_t *b = job_block(p, (uint32_t) k);
                if (b->slow)
                        break;
                if (b->tau > thr) {
                        above++;
                        blocks++;
                        start = k;
                        continue;
                }
                const block_t *before = k > 0 ? job_block(p, (uint32_t) k - 1) : NULL;
                if (start < 0 || !before || before->slow || before->tau <= thr || above * 5 < (blocks + 1) * 4)
                        break;
                blocks++;
        }
        return start;
}

static double clamp01(double x)
{
        return x < 0 ? 0 : x > 1 ? 1 : x;
}

/*
 * The step where a rise from @base to @slow began, the run of raised blocks starting at
 * @start: the boundary between blocks that the most evidence puts it at (the largest sum
 * of each later block's steps times its excess over the midpoint, a CUSUM, over the run
 * and up to CHANGE_LOOKBACK blocks before it), moved into the block on either side of it
 * that is partly slowed (a block half slowed is halfway between the two step times).
 */
static int64_t change_point(npf_progress_t *p, uint32_t start, double base, double slow)
{
        double mid = (base + slow) / 2, span = slow - base, sum = 0, best = -1;
        uint32_t lo = start > CHANGE_LOOKBACK ? start - CHANGE_LOOKBACK : 0, at = start;

        for (uint32_t k = start; k > lo; k--)
                if (job_block(p, k - 1)->slow) {
                        lo = k;
                        break;
                }
        /* sum is the evidence for a change at the start of block k, walking from the newest. */
        for (uint32_t k = p->n; k-- > lo;) {
                const block_t *b = job_block(p, k);
                sum += (double) block_steps(b) * (b->tau - mid);
                if (sum > best) {
                        best = sum;
                        at = k;
                }
        }
        const block_t *after = job_block(p, at);
        const block_t *before = at > lo && job_block(p, at - 1)->s1 == after->s0 ? job_block(p, at - 1) : NULL;
        double f_after = clamp01((after->tau - base) / span);
        double f_before = before ? clamp01((before->tau - base) / span) : 0;

        if (f_before > 1 - f_after)
                return after->s0 - (int64_t) (f_before * (double) block_steps(before) + 0.5);
        return after->s0 + (int64_t) ((1 - f_after) * (double) block_steps(after) + 0.5);
}

static void slowdown_event(npf_progress_t *p, npf_progress_event_kind_t kind, bool gone)
{
        tell(p, &(npf_progress_event_t) { .kind = kind, .step = p->job_step, .since_step = p->since,
                                          .factor = p->factor, .baseline_s = p->baseline_s,
                                          .step_time_s = p->step_time_s, .gone = gone });
}

/* A block of the job closed: is a slowdown beginning, going on, or over? */
static void judge_job(npf_progress_t *p)
{
        double up = 1.0 + p->opt.slowdown_pct / 100.0;
        uint32_t k = span_blocks(p);
        double base, slow;

        p->step_time_s = span_median(p, k ? p->n - k : 0, p->n);
        if (!k)
                return;
        if (p->slowing) {
                job_block(p, p->n - 1)->slow = true;
                p->factor = p->step_time_s / p->baseline_s;
                /* Over once the step time is back within half the margin: no flapping at its edge. */
                if (p->step_time_s < p->baseline_s * (1.0 + p->opt.slowdown_pct / 200.0)) {
                        p->slowing = false;
                        slowdown_event(p, NPF_PROGRESS_SLOWDOWN_ENDED, false);
                }
                return;
        }
        if (!baseline(p, p->n - k, &base))
                return;
        int64_t start = run_start(p, base * up);
        if (start < 0)
                return;
        /* A rise longer than the span is measured against what came before all of it. */
        if ((uint32_t) start < p->n - k && !baseline(p, (uint32_t) start, &base))
                return;
        if (p->n - (uint32_t) start < RUN_BLOCKS_MIN)
                return;
        slow = span_median(p, (uint32_t) start, p->n);
        if (slow <= base * up)
                return;
        int64_t steps = 0;
        for (uint32_t i = (uint32_t) start; i < p->n; i++)
                steps += block_steps(job_block(p, i));
        if (steps < (int64_t) p->opt.slowdown_steps)
                return;
        int64_t since = change_point(p, (uint32_t) start, base, slow);
        for (uint32_t i = (uint32_t) start; i < p->n; i++)
                job_block(p, i)->slow = true;
        p->slowing = true;
        p->since = since;
        p->baseline_s = base;
        p->factor = slow / base;
        p->slowdowns++;
        slowdown_event(p, NPF_PROGRESS_SLOWDOWN_BEGAN, false);
}

static void job_reset(npf_progress_t *p)
{
        if (p->slowing) {
                p->slowing = false;
                slowdown_event(p, NPF_PROGRESS_SLOWDOWN_ENDED, true);
        }
        series_reset(&p->job);
        p->n = p->head = 0;
        p->step_time_s = 0;
        p->job_step = -1;
}

/*
 * The job's interval since the last sweep is timed when every rank was sampled both times
 * (the same claims), none in a window, and the gap was short; its step is the median of
 * its ranks' (the lower one of an even count): in synchronous training the ranks step
 * together, and one rank stuck or gone ahead does not move it.
 */
static void update_job(npf_progress_t *p)
{
        block_t b;

        if ((p->members == 0 && !p->any_unread) || (p->members > 0 && p->continuing == 0)) {
                job_reset(p);
                if (p->members == 0)
                        return;
        }
        bool clean = p->gap_ok && !p->any_windowed && !p->any_unread && p->members > 0 &&
                     p->n_steps == p->members && p->sig == p->job_sig && p->members == p->job_members;
        p->job_sig = p->sig;
        p->job_members = p->members;
        if (p->n_steps == 0) {
                series_reset(&p->job);
                return;
        }
        qsort(p->steps, p->n_steps, sizeof(p->steps[0]), by_int64);
        p->job_step = p->steps[(p->n_steps - 1) / 2];
        if (series_feed(&p->job, p->now_ns, p->job_step, clean, p->job_block_steps, &b)) {
                p->blocks[p->head] = b;
                p->head = (p->head + 1) % NPF_PROGRESS_JOB_BLOCKS;
                if (p->n < NPF_PROGRESS_JOB_BLOCKS)
                        p->n++;
                judge_job(p);
        }
}

/* --- words -------------------------------------------------------------------------------- */

static const char *duration_text(double s, char *buf, size_t len)
{
        if (s < 10)
                snprintf(buf, len, "%.1f s", s);
        else if (s < 120)
                snprintf(buf, len, "%.0f s", s);
        else if (s < 7200)
                snprintf(buf, len, "%u min %02u s", (unsigned) (s / 60), (unsigned) s % 60);
        else
                snprintf(buf, len, "%u h %02u min", (unsigned) (s / 3600), (unsigned) (s / 60) % 60);
        return buf;
}

static const char *step_time_text(double s, char *buf, size_t len)
{
        if (s < 1)
                snprintf(buf, len, "%.1f ms", s * 1e3);
        else
                snprintf(buf, len, "%.2f s", s);
        return buf;
}

/* A growing sentence in p->message; what does not fit is cut. */
static void say(npf_progress_t *p, size_t *used, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(npf_progress_t *p, size_t *used, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (*used >= sizeof(p->message) - 1)
                return;
        va_start(ap, fmt);
        n = vsnprintf(p->message + *used, sizeof(p->message) - *used, fmt, ap);
        va_end(ap);
        if (n > 0)
                *used = *used + (size_t) n < sizeof(p->message) ? *used + (size_t) n : sizeof(p->message) - 1;
}

/* "rank 3", "ranks 3 and 17", "ranks 3, 5, ... and 12 more" of @ranks (sorted), @n > 0. */
static void say_ranks(npf_progress_t *p, size_t *used, const uint32_t *ranks, uint32_t n)
{
        uint32_t named = n > RANKS_NAMED ? RANKS_NAMED : n;

        say(p, used, "rank%s ", n > 1 ? "s" : "");
        for (uint32_t i = 0; i < named; i++)
                say(p, used, "%s%" PRIu32, i == 0 ? "" : i + 1 == n ? " and " : ", ", ranks[i]);
        if (named < n)
                say(p, used, " and %" PRIu32 " more", n - named);
}

/* "step 41,003" or "steps 41,003 to 41,005". */
static void say_steps(npf_progress_t *p, size_t *used, int64_t lo, int64_t hi)
{
        char a[32], b[32];

        if (lo == hi)
                say(p, used, "step %s", npf_step_text(lo, a));
        else
                say(p, used, "steps %s to %s", npf_step_text(lo, a), npf_step_text(hi, b));
}

/*
 * The sentence about the stalled ranks: which are behind and who waits for them. In a
 * hang of synchronous training every rank waits in a collective for one that is elsewhere,
 * and the step counters show which: it is the one behind.
 */
static void stall_message(npf_progress_t *p)
{
        uint32_t behind[NPF_SHM_SLOTS], n_behind = 0, n_known = 0, n_stalled = 0;
        int64_t s_lo = INT64_MAX, s_hi = INT64_MIN, o_lo = INT64_MAX, o_hi = INT64_MIN;
        double quiet = 0;
        size_t used = 0;
        char d[48];

        for (uint32_t i = 0; i < p->n_live; i++) {
                const rank_track_t *t = &p->ranks[p->live[i]];
                if (t->step < 0)
                        continue;
                n_known++;
                if (t->stalled) {
                        n_stalled++;
                        s_lo = t->step < s_lo ? t->step : s_lo;
                        s_hi = t->step > s_hi ? t->step : s_hi;
                        quiet = (double) t->quiet_ns / 1e9 > quiet ? (double) t->quiet_ns / 1e9 : quiet;
                } else {
                        o_lo = t->step < o_lo ? t->step : o_lo;
                        o_hi = t->step > o_hi ? t->step : o_hi;
                }
        }
        duration_text(quiet, d, sizeof(d));
        if (n_stalled == n_known) {
                /* All are stalled: those at the lowest step hold up the others, if any are ahead. */
                for (uint32_t i = 0; i < p->n_live; i++) {
                        const rank_track_t *t = &p->ranks[p->live[i]];
                        if (t->step == s_lo)
                                behind[n_behind++] = t->rank;
                        else if (t->step >= 0) {
                                o_lo = t->step < o_lo ? t->step : o_lo;
                                o_hi = t->step > o_hi ? t->step : o_hi;
                        }
                }
                qsort(behind, n_behind, sizeof(behind[0]), by_uint32);
                if (n_behind == 1 && n_known == 1) {
                        say_ranks(p, &used, behind, 1);
                        say(p, &used, " has made no step for %s, at ", d);
                        say_steps(p, &used, s_lo, s_lo);
                } else if (n_behind == n_known) {
                        say(p, &used, "all %" PRIu32 " ranks have made no step for %s, all at ", n_known, d);
                        say_steps(p, &used, s_lo, s_lo);
                        say(p, &used, ": none is behind another here");
                } else {
                        say_ranks(p, &used, behind, n_behind);
                        say(p, &used, " %s at ", n_behind == 1 ? "is" : "are");
                        say_steps(p, &used, s_lo, s_lo);
                        say(p, &used, ", the %" PRIu32 " other%s at ", n_known - n_behind, n_known - n_behind == 1 ? "" : "s");
                        if (o_lo == o_hi) {
                                char a[32];
                                say(p, &used, "%s", npf_step_text(o_lo, a));
                        } else {
                                char a[32], b[32];
                                say(p, &used, "%s to %s", npf_step_text(o_lo, a), npf_step_text(o_hi, b));
                        }
                        say(p, &used, ": they wait for %s (no step for %s)", n_behind == 1 ? "it" : "them", d);
                }
                return;
        }
        /* Some still step, or have not been silent long enough to tell. */
        for (uint32_t i = 0; i < p->n_live; i++) {
                const rank_track_t *t = &p->ranks[p->live[i]];
                if (t->stalled)
                        behind[n_behind++] = t->rank;
        }
        qsort(behind, n_behind, sizeof(behind[0]), by_uint32);
        uint32_t others = n_known - n_stalled;
        say_ranks(p, &used, behind, n_behind);
        say(p, &used, " %s stalled at ", n_behind == 1 ? "is" : "are");
        say_steps(p, &used, s_lo, s_hi);
        say(p, &used, " (no step for %s), %s the %" PRIu32 " other%s, at ", d, s_hi < o_lo ? "behind" : "while",
            others, others == 1 ? "" : "s");
        say_steps(p, &used, o_lo, o_hi);
        if (s_hi >= o_lo)
                say(p, &used, ", %s not stalled", others == 1 ? "is" : "are");
}

static void slowdown_message(npf_progress_t *p)
{
        char since[32], now[32], base[32];
        size_t used = 0;

        say(p, &used, "the step time is %.2fx its baseline since step %s: %s against %s", p->factor,
            npf_step_text(p->since, since), step_time_text(p->step_time_s, now, sizeof(now)),
            step_time_text(p->baseline_s, base, sizeof(base)));
}

void npf_progress_end(npf_progress_t *p)
{
        uint64_t sig = 0;

        /* Ranks of the last sweep that this one did not see have left. */
        for (uint32_t i = 0; i < p->n_live; i++) {
                rank_track_t *t = &p->ranks[p->live[i]];
                if (t->seen)
                        continue;
                if (t->stalled)
                        rank_event(p, NPF_PROGRESS_STALL_GONE, t);
                rank_reset(t, 0, 0);
                p->view[p->live[i]].known = false;
        }
        memcpy(p->live, p->next, p->n_next * sizeof(p->live[0]));
        p->n_live = p->n_next;
        update_job(p);

        p->stalled = 0;
        p->fastest = -1;
        for (uint32_t i = 0; i < p->n_live; i++) {
                rank_track_t *t = &p->ranks[p->live[i]];
                t->live = true;
                t->seen = false;
                if (t->step > p->fastest)
                        p->fastest = t->step;
                if (t->stalled) {
                        p->stalled++;
                        sig += mix(p->live[i], t->tag);
                }
        }
        p->message[0] = '\0';
        if (p->stalled)
                stall_message(p);
        else if (p->slowing)
                slowdown_message(p);
        if (p->stalled && sig != p->stalled_sig)
                tell(p, &(npf_progress_event_t) { .kind = NPF_PROGRESS_STALLS, .message = p->message,
                                                  .step = p->job_step });
        p->stalled_sig = sig;
}

/* --- reading ---------------------------------------------------------------------------- */

bool npf_progress_next(const npf_progress_t *p, uint32_t *cursor, npf_progress_rank_t *ret)
{
        if (*cursor >= p->n_live)
                return false;
        uint32_t slot = p->live[(*cursor)++];
        const rank_track_t *t = &p->ranks[slot];
        *ret = (npf_progress_rank_t) {
                .slot = slot,
                .rank = t->rank,
                .step = t->step,
                .step_time_s = t->step_time_s,
                .stalled = t->stalled,
                .stalled_for_s = t->stalled ? (double) t->quiet_ns / 1e9 : 0,
        };
        return true;
}

const npf_view_progress_t *npf_progress_view(const npf_progress_t *p)
{
        return p->view;
}

uint32_t npf_progress_stalled(const npf_progress_t *p)
{
        return p->stalled;
}

uint64_t npf_progress_stalls(const npf_progress_t *p)
{
        return p->stalls;
}

uint64_t npf_progress_slowdowns(const npf_progress_t *p)
{
        return p->slowdowns;
}

bool npf_progress_slowing(const npf_progress_t *p)
{
        return p->slowing;
}

double npf_progress_step_time(const npf_progress_t *p)
{
        return p->step_time_s;
}

const char *npf_progress_message(const npf_progress_t *p)
{
        return p->message[0] ? p->message : NULL;
}

/* @v (>= 0) rounded to 1/@scale: what a reply shows, without a tail of binary noise. */
static json_t *rounded(double v, double scale)
{
        return json_real(v >= 0 && v < 1e15 ? (double) (int64_t) (v * scale + 0.5) / scale : v);
}

int64_t npf_progress_fastest_step(const npf_progress_t *p)
{
        return p->fastest;
}

json_t *npf_progress_json(const npf_progress_t *p)
{
        uint32_t ranks[NPF_SHM_SLOTS], n = 0;
        json_t *stalled = json_array(), *slowdown = json_null();

        for (uint32_t i = 0; i < p->n_live; i++)
                if (p->ranks[p->live[i]].stalled)
                        ranks[n++] = p->ranks[p->live[i]].rank;
        qsort(ranks, n, sizeof(ranks[0]), by_uint32);
        for (uint32_t i = 0; stalled && i < n; i++)
                json_array_append_new(stalled, json_integer(ranks[i]));
        if (p->slowing)
                slowdown = json_pack("{s:I, s:o, s:o}", "since_step", (json_int_t) p->since,
                                     "factor", rounded(p->factor, 1e3), "baseline_ms", rounded(p->baseline_s * 1e3, 1e3));
        return json_pack("{s:o, s:o, s:o, s:o, s:o}",
                         "step_time_ms", p->step_time_s > 0 ? rounded(p->step_time_s * 1e3, 1e3) : json_null(),
                         "slowdown", slowdown ? slowdown : json_null(),
                         "stalled_ranks", stalled ? stalled : json_array(),
                         "fastest_step", p->fastest >= 0 ? json_integer(p->fastest) : json_null(),
                         "message", p->message[0] ? json_string(p->message) : json_null());
}
