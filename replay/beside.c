/* SPDX-License-Identifier: MIT */
/* Work run beside the caller's: a thread with a small stack, or at once. */
#include "replay/beside.h"

#define STACK_BYTES (256u * 1024u)      /* the work here needs a few KiB */

void npf_beside_start(npf_beside_t *b, void *(*fn)(void *), void *arg)
{
        pthread_attr_t attr;

        b->threaded = false;
        if (pthread_attr_init(&attr) == 0) {
                b->threaded = pthread_attr_setstacksize(&attr, STACK_BYTES) == 0 &&
                              pthread_create(&b->thread, &attr, fn, arg) == 0;
                pthread_attr_destroy(&attr);
        }
        if (!b->threaded)
                fn(arg);
}

void npf_beside_wait(npf_beside_t *b)
{
        if (b->threaded)
                pthread_join(b->thread, NULL);
        b->threaded = false;
}
