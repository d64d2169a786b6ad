/* SPDX-License-Identifier: MIT */
/*
 * The rank sweep: reclaim slots whose process is gone (its slot's lock is no longer held,
 * or, for a rank that takes no lock, its pid is gone or belongs to another process), find
 * each rank's pid as the daemon sees it (a rank in a container has another in its own pid
 * namespace), record the outcome of every window once (a window open when its rank died
 * is `lost`; its output is left where it is), and count ranks by state, `stalled` included.
 *
 * Each pass feeds the watch of progress (daemon/progress.h), whose "progress stall" (a rank
 * that stopped stepping, in or out of a window) is another notion than this one.
 *
 * A collecting rank is stalled when its heartbeat stayed the same over sweeps spanning more
 * than stall_ms, each gap between two sweeps counted for at most gap_max_ms: time that
 * passed while the daemon was not watching (stopped, or a clock that jumped forward, as
 * CLOCK_MONOTONIC does in a guest after its VM was paused) is not the rank's silence.
 */
#ifndef NPUPROF_DAEMON_SWEEP_H
#define NPUPROF_DAEMON_SWEEP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/progress.h"
#include "npuprof/protocol.h"
#include "npuprof/shm.h"
#include "shm/slot.h"

#define NPF_SWEEP_HISTORY NPF_PROTO_WINDOWS_KEPT  /* windows remembered, for status and `windows` */
#define NPF_SWEEP_STALLED NPF_WINDOW__COUNT     /* index of "stalled" in by_state[] */

typedef struct npf_window_record {
        uint64_t id;                    /* 1, 2, 3...: the order the daemon recorded windows in */
        uint32_t rank;
        uint32_t pid;
        uint64_t generation;
        int64_t  start_step;
        int64_t  stop_step;
        uint32_t outcome;               /* NPF_WINDOW_DONE, _FAILED, _MISSED, _FILTERED, _LOST */
        uint64_t ended_ns;              /* CLOCK_REALTIME when the sweep saw it end */
        uint64_t state_ns;              /* CLOCK_REALTIME of the rank's last change of state */
        int64_t  last_step;             /* the rank's step when the sweep saw it last */
        uint32_t backend;               /* NPF_BACKEND_*, as the rank published it */
        char     output[128];           /* as the rank wrote it: relative to prof_dir, maybe unterminated */
        char     message[256];          /* likewise */
} npf_window_record_t;

typedef struct npf_sweep {
        uint64_t stall_ms;
        uint64_t gap_max_ms;                            /* the most a gap between two sweeps counts for */
        uint64_t last_ns;                               /* CLOCK_MONOTONIC of the last sweep */
        uint32_t attached;                              /* live slots at the last sweep */
        uint32_t by_state[NPF_WINDOW__COUNT + 1];       /* ranks per state, stalled last */
        uint64_t outcomes[NPF_WINDOW__COUNT];           /* windows ended, per outcome, ever */
        uint64_t reclaimed;
        uint64_t reclaim_ns;                            /* when dead ranks were last looked for */
        uint64_t runs;                                  /* sweeps made, ever */
        uint64_t unrecorded;                            /* windows that ended faster than sweeps saw */
        uint64_t recorded;                              /* windows recorded, ever: the last id given */
        bool primed;                                    /* a first pass was made */
        npf_progress_t *progress;                       /* fed each live rank's step at every pass; NULL: none */
        /* What was last recorded of each slot, so that an outcome is counted once. */
        struct {
                uint32_t tag, pid;
                uint64_t claim;                         /* the claim word when its cold entry was read */
                uint64_t seq;                           /* the sequence it was read at; UINT64_MAX: to read */
                uint32_t state;                         /* the window state read then */
                uint64_t ended;                         /* windows_ended recorded */
                uint64_t heartbeat;                     /* the heartbeat last seen */
                uint64_t quiet_ns;                      /* sweep time it stayed so, while collecting */
        } seen[NPF_SHM_SLOTS];
        bool stalled[NPF_SHM_SLOTS];                    /* by slot, at the last sweep */
        npf_slot_holder_t holder[NPF_SHM_SLOTS];        /* by slot: its holder's pid here, for the claim of a tag */
        bool look[NPF_SHM_SLOTS];                       /* scratch: slots whose holder is looked up */
        npf_window_record_t history[NPF_SWEEP_HISTORY]; /* a ring, newest at head - 1 */
        uint32_t head, count;
} npf_sweep_t;

/* Log lines and counts go through this, so the sweep itself never prints. */
typedef void (*npf_sweep_record_cb)(const npf_window_record_t *rec, void *data);

/*
 * npf_sweep_record() - add @rec, a window that ended outside the rank table (a libkineto
 * process's, daemon/kineto.h), to the history as the sweep's own are: it is given the next
 * id and its ended_ns, counted by outcome, and handed to @cb.
 */
void npf_sweep_record(npf_sweep_t *s, const npf_window_record_t *rec, npf_sweep_record_cb cb, void *data);

/*
 * Dead ranks are looked for (a lock test per rank, and a read of /proc/PID/stat per rank
 * that takes no lock) at most this often: a status asked a thousand times a second must
 * not cost that per request.
 */
#define NPF_SWEEP_RECLAIM_MS 100

/*
 * npf_sweep_run() - one pass over the rank table of @shm at CLOCK_MONOTONIC @now_ns.
 * A rank's pid as the daemon sees it is looked up once per claim (see
 * npf_slot_find_holders()), into holder[].
 * Context: the daemon's loop. The reclaim is safe against ranks claiming at the same time.
 */
void npf_sweep_run(npf_sweep_t *s, npf_shm_t *shm, uint64_t now_ns, npf_sweep_record_cb cb, void *data);

/*
 * The window history, newest first, at most @max of it, each {rank, pid, generation,
 * start_step, stop_step, outcome, output, message, ended_unix_ms} (pid, output and message
 * null when unknown or empty), and the counts by outcome. Return: new references.
 */
json_t *npf_sweep_history_json(const npf_sweep_t *s, size_t max);
json_t *npf_sweep_outcomes_json(const npf_sweep_t *s);

/* The @k-th newest window of the history (0: the newest), or NULL past its end. */
const npf_window_record_t *npf_sweep_history_at(const npf_sweep_t *s, size_t k);

#endif /* NPUPROF_DAEMON_SWEEP_H */
