/* SPDX-License-Identifier: MIT */
/* What the files of the shm module share with each other and nobody else. */
#ifndef NPUPROF_SHM_INTERNAL_H
#define NPUPROF_SHM_INTERNAL_H

#include <stdint.h>

#include "npuprof/shm.h"

/* Write a message into @err, a buffer of NPF_SHM_ERR_MAX bytes; NULL @err is ignored. */
void npf__set_err(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The descriptor @shm keeps on its rank table, open as it was mapped: what asks about slot locks. */
int npf__shm_ranks_fd(const npf_shm_t *shm);

/*
 * npf__shm_ranks_reopen() - open @shm's rank table anew, read-write and close-on-exec: an
 * open file description of its own, to hold one slot's lock. The caller owns the result.
 * Return: the descriptor, -ESTALE if the name now names another object than the one
 * mapped, or another -errno.
 */
int npf__shm_ranks_reopen(const npf_shm_t *shm);

#endif /* NPUPROF_SHM_INTERNAL_H */
