/* SPDX-License-Identifier: MIT */
/*
 * The ranks' progress between windows, as the sweeps see it: each attached rank's step,
 * sampled at every sweep (the rank does nothing more per step than it did: it stores its
 * step, and keeps no clock unless a window is armed or open, so the sweep's own clock
 * times the steps), and what the steps say:
 *
 *   - a rank's step time: the median of its recent blocks, a block being the steps between
 *     two sweeps that saw the step change, at least NPF_PROGRESS_BLOCK_STEPS steps or as
 *     many sweeps (so that a sweep's granularity costs at most about a tenth);
 *   - a progress stall: a rank the daemon saw step that has made no step for
 *     stall_after_ms, or stall_factor times its own step time where that is longer. (Not
 *     the sweep's "stalled" state, a collecting rank whose heartbeat stopped: see
 *     daemon/sweep.h.) When ranks stall, one sentence says which are behind the others;
 *   - a slowdown: the job's step time (the node's ranks together: the median of their
 *     steps) above its baseline by slowdown_pct for slowdown_steps steps; the baseline is
 *     the median of the job's blocks before the rise (at most NPF_PROGRESS_REF_BLOCKS of
 *     them, none of an earlier slowdown), the rise the median of the blocks since, each of
 *     them above the baseline but for isolated ones; it began at the step that the first
 *     raised blocks place, and ends once the last slowdown_steps steps' median is back
 *     within half the margin.
 *
 * Steps in a window (a rank collecting or flushing, or whose window ended since the last
 * sweep) are slowed by the profiling itself: they count in no step time, no stall and, on
 * any rank, no interval of the job. A new claim of a slot starts its rank afresh; a job
 * whose ranks are all new claims starts afresh.
 *
 * The sweep feeds it (npf_progress_begin(), a sample per live slot, npf_progress_end());
 * it reads no segment and prints nothing: what begins and ends is told to its callback.
 * Context: one thread (the daemon's loop).
 */
#ifndef NPUPROF_DAEMON_PROGRESS_H
#define NPUPROF_DAEMON_PROGRESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf/view.h"

#define NPF_PROGRESS_STALL_AFTER_S_DEFAULT 300u
#define NPF_PROGRESS_STALL_FACTOR_DEFAULT 20u
#define NPF_PROGRESS_SLOWDOWN_PCT_DEFAULT 20u
#define NPF_PROGRESS_SLOWDOWN_STEPS_DEFAULT 50u
#define NPF_PROGRESS_SLOWDOWN_STEPS_MIN 5u
#define NPF_PROGRESS_BLOCK_STEPS 10u    /* a block: this many steps, or sweeps, at least */
#define NPF_PROGRESS_RANK_BLOCKS 16u    /* a rank's step time: the median of its last blocks */
#define NPF_PROGRESS_JOB_BLOCKS 1024u   /* the job's blocks kept */
#define NPF_PROGRESS_REF_BLOCKS 256u    /* the baseline: the median of at most this many */
#define NPF_PROGRESS_MESSAGE_MAX 512u

typedef struct npf_progress_options {
        uint64_t stall_after_ms;        /* no step this long: stalled... */
        unsigned stall_factor;          /* ...or this many step times of its own, where that is longer */
        unsigned slowdown_pct;          /* the job's step time this far above its baseline... */
        unsigned slowdown_steps;        /* ...for this many steps: a slowdown */
        uint64_t gap_max_ms;            /* a longer gap between sweeps breaks the step times and counts as this much silence */
} npf_progress_options_t;

/* One live slot as a sweep read it. */
typedef struct npf_progress_sample {
        uint32_t slot;
        uint32_t tag;                   /* of the claim */
        uint32_t rank;
        int64_t step;                   /* < 0: none yet */
        bool windowed;                  /* collecting or flushing, or a window ended since the last sweep */
} npf_progress_sample_t;

typedef enum npf_progress_event_kind {
        NPF_PROGRESS_STALL_BEGAN,       /* rank, step, seconds (its silence), step_time_s (0: unknown) */
        NPF_PROGRESS_STALL_ENDED,       /* rank, step (its new one), seconds */
        NPF_PROGRESS_STALL_GONE,        /* rank, step, seconds: it left (or lost its slot) while stalled */
        NPF_PROGRESS_STALLS,            /* the stalled ranks are others now, and some are: message */
        NPF_PROGRESS_SLOWDOWN_BEGAN,    /* since_step, step, factor, baseline_s, step_time_s */
        NPF_PROGRESS_SLOWDOWN_ENDED,    /* since_step, step (the job's now), step_time_s, baseline_s; gone */
} npf_progress_event_kind_t;

typedef struct npf_progress_event {
        npf_progress_event_kind_t kind;
        uint32_t rank;
        int64_t step;
        int64_t since_step;
        double seconds;
        double step_time_s, baseline_s, factor;
        bool gone;                      /* SLOWDOWN_ENDED: the job's ranks left, not a recovery */
        const char *message;            /* STALLS: the sentence, as progress.message says it */
} npf_progress_event_t;

/* Told what begins and ends, in the order it happens; @ev lives for the call only. */
typedef void (*npf_progress_event_cb)(const npf_progress_event_t *ev, void *data);

typedef struct npf_progress npf_progress_t;

/* A rank as the last sweep left it. */
typedef struct npf_progress_rank {
        uint32_t slot, rank;
        int64_t step;                   /* < 0: none yet */
        double step_time_s;             /* 0: not known yet */
        bool stalled;
        double stalled_for_s;           /* its silence, while stalled */
} npf_progress_rank_t;

/*
 * npf_progress_new() - watch with @opt (copied), telling @cb.
 * Return: 0 and the watch in @ret_progress, or -ENOMEM / -EINVAL (a zero setting).
 */
int npf_progress_new(const npf_progress_options_t *opt, npf_progress_event_cb cb, void *data,
                     npf_progress_t **ret_progress);

/* Free @p. Accepts NULL. Return: NULL. */
npf_progress_t *npf_progress_free(npf_progress_t *p);

/*
 * A sweep at CLOCK_MONOTONIC @now_ns: npf_progress_begin(), then npf_progress_sample()
 * for each live slot in the order of the slots, or npf_progress_unread() for a claimed
 * slot that could not be read this time (what is known of it is kept), then
 * npf_progress_end(), which judges: a rank of the last sweep that is neither sampled nor
 * unread has left.
 */
void npf_progress_begin(npf_progress_t *p, uint64_t now_ns);
void npf_progress_sample(npf_progress_t *p, const npf_progress_sample_t *s);
void npf_progress_unread(npf_progress_t *p, uint32_t slot);
void npf_progress_end(npf_progress_t *p);

/*
 * Walk the ranks of the last sweep in the order of their slots: start with *@cursor 0.
 * Return: true and the next in @ret, or false at the end.
 */
bool npf_progress_next(const npf_progress_t *p, uint32_t *cursor, npf_progress_rank_t *ret);

/* What the rank table shows of each slot's progress, indexed by slot: for npf_rank_view_refresh(). */
const npf_view_progress_t *npf_progress_view(const npf_progress_t *p);

uint32_t npf_progress_stalled(const npf_progress_t *p);        /* ranks stalled now */
uint64_t npf_progress_stalls(const npf_progress_t *p);         /* progress stalls begun, ever */
uint64_t npf_progress_slowdowns(const npf_progress_t *p);      /* slowdowns found, ever */
bool npf_progress_slowing(const npf_progress_t *p);            /* a slowdown is on */

/* The highest step of the node's ranks at the last sweep; -1: none. */
int64_t npf_progress_fastest_step(const npf_progress_t *p);
/* The job's step time now, in seconds; 0: not known. */
double npf_progress_step_time(const npf_progress_t *p);

/* The sentence about stalled ranks, or else about the slowdown; NULL when there is neither. */
const char *npf_progress_message(const npf_progress_t *p);

/*
 * npf_progress_json() - {step_time_ms, slowdown: null | {since_step, factor, baseline_ms},
 * stalled_ranks: [rank, ...] (ascending), fastest_step, message}; step_time_ms,
 * fastest_step and message null when not known. Return: a new reference.
 */
json_t *npf_progress_json(const npf_progress_t *p);

#endif /* NPUPROF_DAEMON_PROGRESS_H */
