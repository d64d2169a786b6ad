/* SPDX-License-Identifier: MIT */
/*
 * The replay as an SQLite database (npuprof-replay --db FILE), for people to query with SQL
 * and join with their own tables. One file per run, replaced whole:
 *
 *   events(device, idx, action, addr, size, stream, allocated, requested, active, reserved,
 *          time_us, stack)                one row per trace entry; the bytes after it, as
 *                                         timeline.csv says them; stack: stack_frames.stack
 *   blocks(device, addr, size, block_size, stream, alloc_idx, free_requested_idx, free_idx,
 *          stack)                         one row per block's life; size is what was asked,
 *                                         block_size the allocator's; an idx is NULL before
 *                                         the first event or after the last
 *   segments(device, addr, total, allocated, requested, stream, expandable)   at dump time
 *   frames(id, name, filename, line)
 *   stack_frames(stack, depth, frame)      depth 0 is the innermost frame
 *   devices(device, events, rounding, inferred_sizes)
 *
 * Addresses, sizes and times are integers (addresses below 2^63, as every allocator's are).
 */
#ifndef NPUPROF_REPLAY_DB_H
#define NPUPROF_REPLAY_DB_H

#include "replay/replay.h"
#include "replay/snapshot.h"

#include <stddef.h>

#define NPF_DB_ERR_MAX 320u

/*
 * npf_db_write() - write the @n replays of @s (each a device of it) into a new SQLite
 * database at @path, built beside it and put in place whole (lib/atomicfile.h).
 * Return: 0; or -EIO (SQLite's message in @err, NPF_DB_ERR_MAX bytes), -ENOMEM, -errno.
 */
int npf_db_write(const char *path, const npf_snapshot_t *s, npf_replay_t *const *replays, size_t n, char *err);

#endif /* NPUPROF_REPLAY_DB_H */
