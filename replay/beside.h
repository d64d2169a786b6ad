/* SPDX-License-Identifier: MIT */
/*
 * Work run beside the caller's: on a thread of its own when one can be had, at once when
 * not, so that a second core shortens an analysis and its absence changes nothing. The
 * thread's stack is small: the analyzer may run under an address-space limit.
 */
#ifndef NPUPROF_REPLAY_BESIDE_H
#define NPUPROF_REPLAY_BESIDE_H

#include <pthread.h>
#include <stdbool.h>

typedef struct npf_beside {
        pthread_t thread;
        bool threaded;
} npf_beside_t;

/* Runs @fn(@arg) on a thread, or before returning if no thread can be started. */
void npf_beside_start(npf_beside_t *b, void *(*fn)(void *), void *arg);

/* Returns once @fn has returned. */
void npf_beside_wait(npf_beside_t *b);

#endif /* NPUPROF_REPLAY_BESIDE_H */
