/* SPDX-License-Identifier: MIT */
/*
 * The pickle reader's fast path, for pickle.c only. Python writes a list of dicts (a
 * device's trace entries, a segment's blocks) in batches of up to 1,000, each a MARK, the
 * dicts and APPENDS. Such batches are read here in one loop, not opcode by opcode, and built
 * into the tree on a lane (beside.h) while the reader reads on. The tree ends as the opcodes
 * run one by one would leave it; the reduce callback is offered the same containers in the
 * same order, on the lane's thread, never beside a call of the reader's. With a caller's
 * direct reader (npf_pickle_direct_t), the dicts it takes go to it instead, unbuilt.
 */
#ifndef NPUPROF_REPLAY_PICKLE_BATCH_H
#define NPUPROF_REPLAY_PICKLE_BATCH_H

#include "replay/pickle-internal.h"

#include <stdbool.h>
#include <stdint.h>

/* npf__pickle_batch_begins() - whether the MARK at @p opens a batch: a dict (or a FRAME
 * before one) follows. Context: the reader's thread. */
static inline bool npf__pickle_batch_begins(const npf__pickle_vm_t *vm, const uint8_t *p)
{
        return vm->end - p >= 2 && p[0] == '(' && (p[1] == '}' || p[1] == 0x95);
}

/*
 * npf__pickle_batch_of_dicts() - at a MARK (@vm->p just after it), read the batches that
 * follow and hand them to the lane to build. Unless another batch follows at once, the lane
 * is waited for before this returns: the opcodes that run next use the tree.
 * Return: 1 with @vm->p after what was read; 0 to leave the MARK to the opcodes, nothing
 * read; or a negative errno with its message in @vm->err.
 * Context: the reader's thread.
 */
int npf__pickle_batch_of_dicts(npf__pickle_vm_t *vm);

/*
 * npf__pickle_batch_drain() - wait for the batch being built on the lane, if any: the tree
 * is then as if the opcodes had read everything so far. The reader calls it before it
 * touches the tree or calls the progress callback.
 * Return: 0, or the batch's error with its message in @vm->err.
 * Context: the reader's thread.
 */
int npf__pickle_batch_drain(npf__pickle_vm_t *vm);

/* npf__pickle_batch_free() - free @b, which is not being built. Accepts NULL; returns NULL. */
npf__pickle_batch_t *npf__pickle_batch_free(npf__pickle_batch_t *b);

#endif /* NPUPROF_REPLAY_PICKLE_BATCH_H */
