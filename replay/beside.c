/* SPDX-License-Identifier: MIT */
/* Work run beside the caller's: threads with a small stack, or at once. */
#include "replay/beside.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define STACK_BYTES (256u * 1024u)      /* the work here needs a few KiB */

/* Starts @fn(@arg) on a thread with a small stack. Return: whether it was started. */
static bool start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
        pthread_attr_t attr;
        bool started = false;

        if (pthread_attr_init(&attr) == 0) {
                started = pthread_attr_setstacksize(&attr, STACK_BYTES) == 0 && pthread_create(thread, &attr, fn, arg) == 0;
                pthread_attr_destroy(&attr);
        }
        return started;
}

void npf_beside_start(npf_beside_t *b, void *(*fn)(void *), void *arg)
{
        b->threaded = start(&b->thread, fn, arg);
        if (!b->threaded)
                fn(arg);
}

void npf_beside_wait(npf_beside_t *b)
{
        if (b->threaded)
                pthread_join(b->thread, NULL);
        b->threaded = false;
}

struct npf_lane {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t changed;         /* a piece was handed over, ran, or the lane ends */
        void (*fn)(void *);
        void *arg;
        bool busy, ending;
};

static void *lane_main(void *arg)
{
        npf_lane_t *l = arg;

        pthread_mutex_lock(&l->lock);
        for (;;) {
                while (!l->busy && !l->ending)
                        pthread_cond_wait(&l->changed, &l->lock);
                if (!l->busy)
                        break;
                pthread_mutex_unlock(&l->lock);
                l->fn(l->arg);
                pthread_mutex_lock(&l->lock);
                l->busy = false;
                pthread_cond_broadcast(&l->changed);
        }
        pthread_mutex_unlock(&l->lock);
        return NULL;
}

npf_lane_t *npf_lane_new(void)
{
        npf_lane_t *l = calloc(1, sizeof(*l));

        if (!l)
                return NULL;
        if (pthread_mutex_init(&l->lock, NULL) != 0) {
                free(l);
                return NULL;
        }
        if (pthread_cond_init(&l->changed, NULL) != 0 || !start(&l->thread, lane_main, l)) {
                pthread_cond_destroy(&l->changed);
                pthread_mutex_destroy(&l->lock);
                free(l);
                return NULL;
        }
        return l;
}

void npf_lane_run(npf_lane_t *l, void (*fn)(void *), void *arg)
{
        if (!l) {
                fn(arg);
                return;
        }
        pthread_mutex_lock(&l->lock);
        while (l->busy)
                pthread_cond_wait(&l->changed, &l->lock);
        l->fn = fn;
        l->arg = arg;
        l->busy = true;
        pthread_cond_broadcast(&l->changed);
        pthread_mutex_unlock(&l->lock);
}

void npf_lane_wait(npf_lane_t *l)
{
        if (!l)
                return;
        pthread_mutex_lock(&l->lock);
        while (l->busy)
                pthread_cond_wait(&l->changed, &l->lock);
        pthread_mutex_unlock(&l->lock);
}

npf_lane_t *npf_lane_free(npf_lane_t *l)
{
        if (!l)
                return NULL;
        npf_lane_wait(l);
        pthread_mutex_lock(&l->lock);
        l->ending = true;
        pthread_cond_broadcast(&l->changed);
        pthread_mutex_unlock(&l->lock);
        pthread_join(l->thread, NULL);
        pthread_cond_destroy(&l->changed);
        pthread_mutex_destroy(&l->lock);
        free(l);
        return NULL;
}

void npf_prefault(void *p, size_t len)
{
        long page = sysconf(_SC_PAGESIZE);

        if (!p || len == 0 || page <= 0)
                return;
        /* Whole pages: the first and last hold other bytes of the same mapping, left as they are. */
        uintptr_t mask = (uintptr_t) page - 1, from = (uintptr_t) p & ~mask;
        uintptr_t to = ((uintptr_t) p + len + mask) & ~mask;
        (void) madvise((void *) from, to - from, MADV_POPULATE_WRITE);
}
