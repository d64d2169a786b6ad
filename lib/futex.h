/* SPDX-License-Identifier: MIT */
/*
 * Futexes on 32-bit words: the raw system call, nothing else, so that a signal handler may
 * call them (they are async-signal-safe; they set errno, which a handler saves). A shared
 * futex (@shared true) is one that other processes reach through a shared mapping of the
 * same file; a private one (FUTEX_PRIVATE_FLAG) is this process's alone and cheaper.
 */
#ifndef NPUPROF_LIB_FUTEX_H
#define NPUPROF_LIB_FUTEX_H

#include <stdbool.h>
#include <stdint.h>

/*
 * npf_futex_wait() - sleep while *@word holds @expected, at most @timeout_ms (relative,
 * CLOCK_MONOTONIC), or for ever when @timeout_ms is UINT32_MAX.
 * Return: 0 when woken or *@word differs, -ETIMEDOUT, -EINTR (a signal handler ran), or
 * another -errno (-EFAULT: @word is not mapped).
 * Context: any; async-signal-safe.
 */
int npf_futex_wait(const uint32_t *word, uint32_t expected, bool shared, uint32_t timeout_ms);

/* Wake at most @count waiters on @word. Return: how many were woken, or -errno. Async-signal-safe. */
int npf_futex_wake(const uint32_t *word, bool shared, int count);

#endif /* NPUPROF_LIB_FUTEX_H */
