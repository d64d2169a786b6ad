/* SPDX-License-Identifier: MIT */
/*
 * What the segment holds, as JSON, in the shapes of the control protocol
 * (include/npuprof/protocol.h): the configuration in force with the file's state, and the
 * rank table. The daemon answers `status` with these; npuprofctl shows them when the
 * daemon cannot be reached. Reads only; every value is bounds-checked by the readers.
 */
#ifndef NPUPROF_SHM_VIEW_H
#define NPUPROF_SHM_VIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "npuprof/shm.h"
#include "shm/slot.h"

#define NPF_STALL_MS_DEFAULT 120000u    /* a collecting rank silent this long is stalled */

/*
 * npf_view_config() - {path, generation, valid, state, error, error_count, dialect, window,
 * ranks (the rank filter: "all", or like "0-7,16")}.
 * Return: a new reference; NULL if out of memory. A segment that cannot be read whole
 * gives {"unreadable": "why"}.
 */
json_t *npf_view_config(const npf_shm_ctl_t *ctl);

/* The state a person is shown for slot @v: its window state, or "stalled". */
const char *npf_view_rank_state(const npf_slot_view_t *v, uint64_t now_monotonic_ns, uint64_t stall_ms);

/*
 * npf_view_ranks() - the occupied slots, ordered by rank: [{rank, pid, step, state,
 * heartbeat_age_ms, generation, window, local_device, state_step, message, output}].
 * A rank is "stalled" as @stalled (indexed by slot) says, when given (the daemon's sweep
 * judges by watching); else by its heartbeat's age, npf_view_rank_state().
 * Return: a new reference, NULL if out of memory.
 */
json_t *npf_view_ranks(const npf_shm_ranks_t *table, uint64_t now_monotonic_ns, uint64_t stall_ms,
                       const bool *stalled);

#endif /* NPUPROF_SHM_VIEW_H */
