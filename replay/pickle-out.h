/* SPDX-License-Identifier: MIT */
/*
 * A writer of data-only Python pickles (protocol 2): dictionaries, lists, strings,
 * integers, booleans and None, as CPython's pickle module and PyTorch's memory viewer read
 * them. A container is opened, its items written, then closed: npf_pout_dict() ... a key
 * and its value per item ... npf_pout_close_dict().
 *
 * What repeats is written once and referred to after, as CPython's pickler does with the
 * objects a document shares: every string (the keys of millions of dicts, a file's name in
 * thousands of frames) goes into the pickle's memo the first time and is a memo read after;
 * so does a container the caller names (npf_pout_put()), a stack of frames or a frame,
 * which the caller then writes with npf_pout_get() wherever it comes again.
 */
#ifndef NPUPROF_REPLAY_PICKLE_OUT_H
#define NPUPROF_REPLAY_PICKLE_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The memo's index of what was written, by string or by the caller's name for a container. */
typedef struct npf_pout_memo {
        struct npf_pout_slot {
                const char *s;          /* a string (the caller's, alive until npf_pout_end()), or NULL */
                uint64_t key;           /* the length of @s, or the caller's name */
                uint32_t index;         /* + 1; 0: empty */
        } *slots;
        size_t cap, n;                  /* cap is 0 or a power of two */
} npf_pout_memo_t;

typedef struct npf_pout {
        FILE *f;
        npf_pout_memo_t memo;
        uint32_t next;                  /* the next memo index */
        bool failed;                    /* out of memory: what is left is written, not memoised */
} npf_pout_t;

/* Start a pickle on @f. */
void npf_pout_begin(npf_pout_t *p, FILE *f);
void npf_pout_dict(npf_pout_t *p);
void npf_pout_close_dict(npf_pout_t *p);
void npf_pout_list(npf_pout_t *p);
void npf_pout_close_list(npf_pout_t *p);
/* The string @s, which must stay alive and unchanged until npf_pout_end(). */
void npf_pout_str(npf_pout_t *p, const char *s);
void npf_pout_int(npf_pout_t *p, int64_t v);
void npf_pout_uint(npf_pout_t *p, uint64_t v);
void npf_pout_bool(npf_pout_t *p, bool v);
void npf_pout_none(npf_pout_t *p);

/* Memoise the container just closed under the caller's name @key. */
void npf_pout_put(npf_pout_t *p, uint64_t key);
/* If a container was memoised under @key, write a memo read of it. Return: whether it was. */
bool npf_pout_get(npf_pout_t *p, uint64_t key);

/* End the pickle and free the memo. Return: 0, or -EIO when a write failed. */
int npf_pout_end(npf_pout_t *p);

#endif /* NPUPROF_REPLAY_PICKLE_OUT_H */
