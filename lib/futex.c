/* SPDX-License-Identifier: MIT */
#include "lib/futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int npf_futex_wait(const uint32_t *word, uint32_t expected, bool shared, uint32_t timeout_ms)
{
        struct timespec ts = {
                .tv_sec = (time_t) (timeout_ms / 1000u),
                .tv_nsec = (long) (timeout_ms % 1000u) * 1000000L,
        };
        int op = shared ? FUTEX_WAIT : FUTEX_WAIT | FUTEX_PRIVATE_FLAG;

        /* FUTEX_WAIT takes its timeout relative, measured against CLOCK_MONOTONIC (futex(2)). */
        if (syscall(SYS_futex, word, op, expected, timeout_ms == UINT32_MAX ? NULL : &ts, NULL, 0) == 0)
                return 0;
        return errno == EAGAIN ? 0 : -errno;
}

int npf_futex_wake(const uint32_t *word, bool shared, int count)
{
        long n = syscall(SYS_futex, word, shared ? FUTEX_WAKE : FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count, NULL, NULL, 0);

        return n < 0 ? -errno : (int) n;
}
