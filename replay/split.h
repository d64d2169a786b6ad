/* SPDX-License-Identifier: MIT */
/*
 * `npuprof-replay split FILE`: a large snapshot cut into pieces, each a snapshot of its own
 * (a data-only pickle of protocol 2, as _dump_snapshot writes) that npuprof-replay and
 * PyTorch's memory viewer load. Piece k of N holds, of every device's trace, its k-th share
 * (as equal as whole entries allow), and as its segments and blocks the allocator's state
 * after that share's last entry, which the replay gives: replaying a piece undoes its
 * entries back to the state its share began from, as the whole file's replay passes
 * through it. A device with no trace keeps its dump-time state in every piece.
 */
#ifndef NPUPROF_REPLAY_SPLIT_H
#define NPUPROF_REPLAY_SPLIT_H

#include "replay/replay.h"
#include "replay/snapshot.h"

#include <stddef.h>
#include <stdio.h>

#define NPF_SPLIT_ERR_MAX 320u
#define NPF_SPLIT_PIECES_MAX 10000u

/*
 * The number of pieces: @slices, or as few as keep each device's share to @max_entries
 * entries (when @slices is 0). Return: at least 1, at most NPF_SPLIT_PIECES_MAX.
 */
size_t npf_split_pieces(const npf_snapshot_t *s, size_t slices, size_t max_entries);

/*
 * npf_split_piece() - write piece @k (from 0) of @pieces of @s to @f, from the @n replays of
 * its devices (npf_replay_run()).
 * Return: 0, or -ENOMEM / -EIO with the reason in @err (NPF_SPLIT_ERR_MAX bytes).
 */
int npf_split_piece(FILE *f, const npf_snapshot_t *s, npf_replay_t *const *replays, size_t n, size_t k,
                    size_t pieces, char *err);

#endif /* NPUPROF_REPLAY_SPLIT_H */
