/* SPDX-License-Identifier: MIT */
/*
 * What the segment holds, as JSON, in the shapes of the control protocol
 * (include/npuprof/protocol.h): the configuration in force with the file's state, and the
 * rank table. The daemon answers `status` with these; npuprofctl shows them when the
 * daemon cannot be reached. Reads only; every value is bounds-checked by the readers.
 */
#ifndef NPUPROF_CONF_VIEW_H
#define NPUPROF_CONF_VIEW_H

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
 * What the daemon's watch of progress (daemon/progress.h) says of the rank in a slot: the
 * table's step_time_ms, stalled and stalled_for_s.
 */
typedef struct npf_view_progress {
        uint32_t tag;                   /* the claim it speaks of: of another claim, nothing is known */
        bool known;                     /* judged at the last sweep */
        bool stalled;                   /* a progress stall: no step for long (not the state "stalled") */
        double step_time_ms;            /* 0: not known yet */
        double stalled_for_s;           /* its silence, while stalled */
} npf_view_progress_t;

/*
 * npf_view_ranks() - the occupied slots of @shm's rank table as a table, a row per rank,
 * ordered by rank (each cold entry read by pread(), npf_slot_pread_current()):
 * {"columns": ["rank", "pid", "step", "state", "state_step", "start_step", "stop_step",
 * "generation", "heartbeat_age_ms", "local_device", "message", "output", "step_time_ms",
 * "stalled", "stalled_for_s"], "rows": [[...]]}. The last three are null here: only the
 * daemon, which watches the steps, knows them (npf_rank_view_refresh() with @progress).
 * A table, not an object per rank: at hundreds of ranks the names would be most of a
 * `status` reply, and writing and parsing them most of its cost.
 * A rank is "stalled" as @stalled (indexed by slot) says, when given (the daemon's sweep
 * judges by watching); else by its heartbeat's age, npf_view_rank_state().
 * A rank's pid is the one the reader sees: as @holders (indexed by slot) says for the
 * claim of its tag, when given (the daemon's sweep looks it up); else the pid the rank
 * recorded when that is the process that started when the rank did (npf_slot_pid_here());
 * else null: a rank in another pid namespace.
 * Return: a new reference, NULL if out of memory.
 */
json_t *npf_view_ranks(const npf_shm_t *shm, uint64_t now_monotonic_ns, uint64_t stall_ms,
                       const bool *stalled, const npf_slot_holder_t *holders);

/*
 * The rank table kept as JSON between reads, each rank's row changed in place: for a
 * reader that shows the table again and again (the daemon, at every `status`), what
 * npf_view_ranks() gives without making and freeing every value each time.
 */
typedef struct npf_rank_view npf_rank_view_t;

npf_rank_view_t *npf_rank_view_new(void);
void npf_rank_view_free(npf_rank_view_t *rv);

/*
 * npf_rank_view_refresh() - read @shm's rank table again into @rv; @progress (indexed by slot; may
 * be NULL) gives step_time_ms (null until known), stalled and stalled_for_s (null unless
 * stalled) of each rank whose claim it judged, the three null for others.
 * Return: a new reference to the table, as npf_view_ranks() makes it. It is @rv's own and
 * changes at the next refresh: write it out (json_dumps()) before then.
 * Context: one thread per @rv.
 */
json_t *npf_rank_view_refresh(npf_rank_view_t *rv, const npf_shm_t *shm, uint64_t now_monotonic_ns,
                              uint64_t stall_ms, const bool *stalled, const npf_slot_holder_t *holders,
                              const npf_view_progress_t *progress);

/*
 * npf_view_table_objects() - a table of npf_view_ranks() as an object per row, its keys
 * the column names: what a person reads and what `npuprofctl --json` prints.
 * Return: a new reference; NULL if @table is not such a table (or out of memory).
 */
json_t *npf_view_table_objects(const json_t *table);

#endif /* NPUPROF_CONF_VIEW_H */
