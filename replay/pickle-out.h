/* SPDX-License-Identifier: MIT */
/*
 * A writer of data-only Python pickles (protocol 2): dictionaries, lists, strings,
 * integers, booleans and None, as CPython's pickle module and PyTorch's memory viewer read
 * them. A container is opened, its items written, then closed: npf_pout_dict() ... a key
 * and its value per item ... npf_pout_close_dict().
 */
#ifndef NPUPROF_REPLAY_PICKLE_OUT_H
#define NPUPROF_REPLAY_PICKLE_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct npf_pout {
        FILE *f;
} npf_pout_t;

/* Start a pickle on @f. */
void npf_pout_begin(npf_pout_t *p, FILE *f);
void npf_pout_dict(npf_pout_t *p);
void npf_pout_close_dict(npf_pout_t *p);
void npf_pout_list(npf_pout_t *p);
void npf_pout_close_list(npf_pout_t *p);
void npf_pout_str(npf_pout_t *p, const char *s);
void npf_pout_int(npf_pout_t *p, int64_t v);
void npf_pout_uint(npf_pout_t *p, uint64_t v);
void npf_pout_bool(npf_pout_t *p, bool v);
void npf_pout_none(npf_pout_t *p);

/* End the pickle. Return: 0, or -EIO when a write failed. */
int npf_pout_end(npf_pout_t *p);

#endif /* NPUPROF_REPLAY_PICKLE_OUT_H */
