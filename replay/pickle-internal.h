/* SPDX-License-Identifier: MIT */
/*
 * What the two readers of a pickle share, for pickle.c and pickle-batch.c only: the machine's
 * state (the input, the stack, the marks, the tree that holds the memo, the batches), its
 * error message, and the decoding of the numbers that both read. pickle.c runs the opcodes
 * one by one; pickle-batch.c reads a batch of flat dicts in one loop and builds it on a lane.
 */
#ifndef NPUPROF_REPLAY_PICKLE_INTERNAL_H
#define NPUPROF_REPLAY_PICKLE_INTERNAL_H

#include "replay/beside.h"
#include "replay/pickle.h"
#include "replay/value.h"

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NPF__PICKLE_KEYS 64u             /* key numbers remembered, by memo slot */

/* A batch of the fast path, read or being built: pickle-batch.c's. */
typedef struct npf__pickle_batch npf__pickle_batch_t;

/* The machine, on the reader's thread. npf_pickle_load() owns it and everything it points to. */
typedef struct npf__pickle_vm {
        const uint8_t *base, *p, *end;
        const uint8_t *op;                      /* the opcode being run */
        npf_vtree_t *tree;
        npf_value_t *stack;
        size_t sp, stack_cap;
        size_t *marks;
        size_t n_marks, marks_cap;
        int proto;
        char *err;
        bool batches;                           /* the batch fast path is taken */
        npf__pickle_batch_t *batch[2];          /* its buffers, made on first use: one read, */
        npf__pickle_batch_t *building;          /* the other built on the lane, or NULL */
        npf_lane_t *lane;
        bool lane_tried;
        const npf_pickle_direct_t *direct;      /* the caller's reader of dicts, or NULL */
        struct npf__pickle_key {                /* its keys, by the memo slot that names them */
                uint64_t slot;                  /* + 1; 0: empty */
                npf_value_t key;                /* the str, its number in rkind */
        } keys[NPF__PICKLE_KEYS];
} npf__pickle_vm_t;

/* Forgets the key number of memo slot @slot, which the opcodes set again. */
static inline void npf__pickle_keys_forget(npf__pickle_vm_t *vm, uint64_t slot)
{
        struct npf__pickle_key *k = &vm->keys[slot % NPF__PICKLE_KEYS];

        if (k->slot == slot + 1)
                k->slot = 0;
}

/*
 * npf__pickle_fail() - write "offset N: " and the message of @fmt into @vm->err, N the offset
 * of the opcode being run (of the cursor when there is none).
 * Return: @r.
 */
int npf__pickle_fail(npf__pickle_vm_t *vm, int r, const char *fmt, ...);

static inline uint64_t npf__pickle_load64(const uint8_t *p)
{
        uint64_t v;

        memcpy(&v, p, sizeof(v));
        return v;
}

/* An unsigned integer of @n (at most 8) little-endian bytes. */
static inline uint64_t npf__pickle_le(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        uint32_t w;

        if (n == 8)
                return le64toh(npf__pickle_load64(p));
        if (n == 4) {
                memcpy(&w, p, sizeof(w));
                return le32toh(w);
        }
        for (unsigned i = n; i-- > 0;)
                v = v << 8 | p[i];
        return v;
}

/* The 8 big-endian bytes of BINFLOAT at @p. */
static inline npf_value_t npf__pickle_binfloat(const uint8_t *p)
{
        npf_value_t v = { .kind = NPF_V_FLOAT };
        uint64_t u = be64toh(npf__pickle_load64(p));

        memcpy(&v.as.f, &u, sizeof(v.as.f));
        return v;
}

/*
 * An integer of @n little-endian two's-complement bytes (LONG1, LONG4). A copy in each
 * reader, out of line: the compiler then knows which registers a call leaves alone.
 */
static __attribute__((noinline)) npf_value_t npf__pickle_long_value(const uint8_t *p, uint64_t n)
{
        npf_value_t v = { .kind = NPF_V_INT };
        bool negative = n > 0 && (p[n - 1] & 0x80);

        if (n == 0)
                return v;
        if (n <= 8) {
                uint64_t u = npf__pickle_le(p, (unsigned) n);
                if (negative && n < 8)
                        u |= ~UINT64_C(0) << (8 * n);
                v.as.i = (int64_t) u;
                return v;
        }
        /* Wider: it fits if every byte above the eighth is a sign extension. */
        uint8_t ext = negative ? 0xff : 0x00;
        for (uint64_t i = 8; i < n; i++) {
                if (p[i] != ext) {
                        v.flags = NPF_VF_HUGE;
                        v.as.i = negative ? -1 : 1;
                        return v;
                }
        }
        v.as.u = npf__pickle_le(p, 8);
        if (!negative && (v.as.u >> 63))
                v.flags = NPF_VF_UNSIGNED;
        else if (negative && !(v.as.u >> 63)) {
                v.flags = NPF_VF_HUGE;
                v.as.i = -1;
        }
        return v;
}

#endif /* NPUPROF_REPLAY_PICKLE_INTERNAL_H */
