/* SPDX-License-Identifier: MIT */
/*
 * Work run beside the caller's: on a thread of its own when one can be had, at once when
 * not, so that a second core shortens an analysis and its absence changes nothing. Two
 * kinds: one piece of work (npf_beside_*: the static plan, timeline.csv), or a lane that
 * runs many pieces one after the other (npf_lane_*: the pickle reader's batches). Threads'
 * stacks are small: the analyzer may run under an address-space limit.
 */
#ifndef NPUPROF_REPLAY_BESIDE_H
#define NPUPROF_REPLAY_BESIDE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct npf_beside {
        pthread_t thread;
        bool threaded;
} npf_beside_t;

/* Runs @fn(@arg) on a thread, or before returning if no thread can be started. */
void npf_beside_start(npf_beside_t *b, void *(*fn)(void *), void *arg);

/* Returns once @fn has returned. */
void npf_beside_wait(npf_beside_t *b);

/*
 * A lane: one thread that runs the pieces of a long piece of work handed to it one after
 * the other, while the caller prepares the next. Without a thread, each piece is run when
 * it is handed over.
 */
typedef struct npf_lane npf_lane_t;

/* A new lane, or NULL when no thread can be had (npf_lane_run() then runs at once). */
npf_lane_t *npf_lane_new(void);

/* Runs @fn(@arg) on the lane, once the piece before it has returned. */
void npf_lane_run(npf_lane_t *l, void (*fn)(void *), void *arg);

/* Returns once the lane has nothing left to run. Accepts NULL. */
void npf_lane_wait(npf_lane_t *l);

/* Waits, then ends the lane's thread. Accepts NULL; returns NULL. */
npf_lane_t *npf_lane_free(npf_lane_t *l);

/*
 * Maps the pages under [@p, @p + @len) of a mapping already made, so that the writes another
 * thread will make there take no page fault: a thread that would otherwise wait (the pickle
 * reader for its lane, a thread beside the replay) does this for the room the other will
 * fill. It writes nothing (a page already mapped stays as it is, one not yet is mapped
 * zeroed, as its fault would), so the other may write beside it.
 */
void npf_prefault(void *p, size_t len);

#endif /* NPUPROF_REPLAY_BESIDE_H */
