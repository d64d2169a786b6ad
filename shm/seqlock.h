/* SPDX-License-Identifier: MIT */
/*
 * Seqlock primitives for the shared-memory segment. The protocol and why it is correct
 * are described once, in include/npuprof/shm.h; these are its only implementation.
 * Data under a seqlock is moved in 8-byte words with relaxed atomics, so a racing reader
 * copies garbage it will discard, never undefined behaviour.
 */
#ifndef NPUPROF_SEQLOCK_H
#define NPUPROF_SEQLOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define NPF__SEQ_SPINS  1000u   /* spins on an odd sequence before yielding the CPU */
#define NPF__SEQ_YIELDS 1000u   /* then yields, before giving up with -EAGAIN */

typedef _Atomic uint64_t npf__atomic_u64;

static inline npf__atomic_u64 *npf__seq(const uint64_t *word)
{
        return (npf__atomic_u64 *) word;
}

/* The even sequence the next write starts from: a writer that died mid-write left it odd. */
static inline uint64_t npf__seq_write_base(const uint64_t *seq)
{
        return (atomic_load_explicit(npf__seq(seq), memory_order_relaxed) + 1) & ~(uint64_t) 1;
}

/* Writer: mark a write in progress. Return: the even sequence it started from. */
static inline uint64_t npf__seq_write_begin(uint64_t *seq)
{
        uint64_t s = npf__seq_write_base(seq);

        atomic_store_explicit(npf__seq(seq), s + 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        return s;
}

/* Writer: publish; readers that began before see a changed sequence and retry. */
static inline void npf__seq_write_end(uint64_t *seq, uint64_t begun)
{
        atomic_store_explicit(npf__seq(seq), begun + 2, memory_order_release);
}

/*
 * Reader: wait for a stable (even) sequence. A writer preempted mid-write would keep a
 * spinning reader off its CPU, so after a short spin the reader yields; a writer that
 * never finishes (it died, or is hostile) ends the wait.
 * Return: the sequence, or UINT64_MAX if it stayed odd.
 */
static inline uint64_t npf__seq_read_begin(const uint64_t *seq)
{
        for (unsigned i = 0; i < NPF__SEQ_SPINS + NPF__SEQ_YIELDS; i++) {
                uint64_t s = atomic_load_explicit(npf__seq(seq), memory_order_acquire);
                if (!(s & 1))
                        return s;
                if (i >= NPF__SEQ_SPINS)
                        sched_yield();
        }
        return UINT64_MAX;
}

/*
 * Reader: as npf__seq_read_begin(), but for a reader that must stay cheap whatever the
 * writer does (the daemon reading every slot of the rank table on its loop): it spins at
 * most @spins loads and never yields.
 * Return: the sequence, or UINT64_MAX if it stayed odd.
 */
static inline uint64_t npf__seq_read_begin_bounded(const uint64_t *seq, unsigned spins)
{
        for (unsigned i = 0; i < spins; i++) {
                uint64_t s = atomic_load_explicit(npf__seq(seq), memory_order_acquire);
                if (!(s & 1))
                        return s;
        }
        return UINT64_MAX;
}

/* Reader: Return: nonzero if what was read since @begun may be torn. */
static inline int npf__seq_read_retry(const uint64_t *seq, uint64_t begun)
{
        atomic_thread_fence(memory_order_acquire);
        return atomic_load_explicit(npf__seq(seq), memory_order_relaxed) != begun;
}

/* Copy @n bytes (a multiple of 8, both sides 8-aligned) out of a seqlocked area. */
static inline void npf__seq_copy_out(void *dst, const void *src, size_t n)
{
        uint64_t *d = dst;
        const uint64_t *s = src;
        size_t words = n / 8, body = words & ~(size_t) 3;

        /* Unrolled: atomics are not vectorized, but independent loads pipeline. */
        for (size_t i = 0; i < body; i += 4) {
                uint64_t a = atomic_load_explicit(npf__seq(&s[i]), memory_order_relaxed);
                uint64_t b = atomic_load_explicit(npf__seq(&s[i + 1]), memory_order_relaxed);
                uint64_t c = atomic_load_explicit(npf__seq(&s[i + 2]), memory_order_relaxed);
                uint64_t e = atomic_load_explicit(npf__seq(&s[i + 3]), memory_order_relaxed);
                d[i] = a;
                d[i + 1] = b;
                d[i + 2] = c;
                d[i + 3] = e;
        }
        for (size_t t = 0; t < (words & 3); t++)
                d[body + t] = atomic_load_explicit(npf__seq(&s[body + t]), memory_order_relaxed);
}

/* Copy @n bytes (a multiple of 8, both sides 8-aligned) into a seqlocked area. */
static inline void npf__seq_copy_in(void *dst, const void *src, size_t n)
{
        uint64_t *d = dst;
        const uint64_t *s = src;

        for (size_t i = 0; i < n / 8; i++)
                atomic_store_explicit(npf__seq(&d[i]), s[i], memory_order_relaxed);
}

/* Round a byte count up to whole words. */
static inline size_t npf__words(size_t n)
{
        return (n + 7) & ~(size_t) 7;
}

#endif /* NPUPROF_SEQLOCK_H */
