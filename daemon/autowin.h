/* SPDX-License-Identifier: MIT */
/*
 * What the daemon does by itself when the ranks' progress says so: the configuration's "auto"
 * section (conf/conf.h, npf_conf_auto_t).
 *
 *   - On a slowdown of the job, one window of on_slowdown.steps steps on every rank, at one
 *     step that every rank of every node reaches. The node that sees the slowdown proposes
 *     it: the step is its fastest rank's step plus a margin of steps that covers the time
 *     the other daemons take to learn of it (two of their sweeps and a second, at the job's
 *     step time). Nodes that share a fleet directory agree through it: a proposal is
 *     DIR/auto/NNNNNNNN.json, written whole and never over another (lib/atomicfile.h,
 *     NOREPLACE), so that of two nodes proposing at once one wins and the other takes its
 *     window; every daemon looks for the next number at each sweep, at most once a
 *     second, and opens the window it names on its own ranks. Without a fleet directory
 *     the daemon proposes to itself.
 *   - On a progress stall that has lasted on_stall.after_s, each stalled rank of the node
 *     is asked, through its slot, to write its stacks below the output directory
 *     (shm/slot.h, npf_slot_ask_stacks()): the daemon needs no right over other users'
 *     processes. Ranks that stall within NPF_AUTOWIN_STACKS_GRACE_MS of the first are asked
 *     in the same capture.
 *
 * Budgets always hold, for each kind apart: at most max_per_day in any 24 hours and none
 * within cooldown_s of the last (for windows, counted over the fleet's proposals). A
 * person's edit always wins: no window opens by itself while a window is armed or open on
 * the node, and a new version of the file is published over an automatic window at once.
 *
 * An automatic window is a generation like any other: the configuration in force with the
 * window's steps, all ranks, and "reason" in its extra JSON (so that each rank's manifest
 * says it); the daemon publishes it through the callback, and daemon/windows keeps the
 * reason of its generation.
 * Context: the daemon's loop.
 */
#ifndef NPUPROF_DAEMON_AUTOWIN_H
#define NPUPROF_DAEMON_AUTOWIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf/conf.h"
#include "daemon/progress.h"
#include "npuprof/shm.h"

#define NPF_AUTOWIN_MARGIN_STEPS_MIN 3u
#define NPF_AUTOWIN_LOOK_MS 1000u               /* proposals looked for at most this often */
#define NPF_AUTOWIN_STACKS_GRACE_MS 10000u      /* a stall capture takes in ranks this long */
#define NPF_AUTOWIN_STACKS_KEPT 64u             /* stack requests shown */
#define NPF_AUTOWIN_PROPOSALS_DIR "auto"
#define NPF_AUTOWIN_REASON_MAX 256u

typedef struct npf_autowin npf_autowin_t;

/*
 * Publish @config as the next generation for the automatic window whose reason is
 * @reason. Return: the generation, or 0 when it could not be published.
 */
typedef uint64_t (*npf_autowin_publish_fn)(const npf_shm_config_t *config, const char *reason, void *data);

typedef struct npf_autowin_options {
        const char *fleet_dir;          /* absolute, or NULL: the node agrees with itself */
        const char *node;               /* the node's name, in proposals and reasons */
        unsigned poll_ms;               /* the daemons' sweep interval while ranks are attached */
        npf_autowin_publish_fn publish;
        void *data;
} npf_autowin_options_t;

/* Return: 0 and the watch in @ret, or -ENOMEM. @opt's strings are copied. */
int npf_autowin_new(const npf_autowin_options_t *opt, npf_autowin_t **ret);
npf_autowin_t *npf_autowin_free(npf_autowin_t *a);

/*
 * npf_autowin_configured() - the file's configuration @person, with its "auto" @policy, is
 * in force; @published: it was published now (CLOCK_REALTIME @now_ns), not read again
 * unchanged. A proposal made before a published one is not taken: a person's edit wins.
 */
void npf_autowin_configured(npf_autowin_t *a, const npf_shm_config_t *person, const npf_conf_auto_t *policy,
                            bool published, uint64_t now_ns);

/*
 * npf_autowin_slowdown() - @p has just found a slowdown (@ev, NPF_PROGRESS_SLOWDOWN_BEGAN)
 * at CLOCK_REALTIME @now_ns; @windows_open: ranks of the node are in a window (armed, open
 * or flushing). Proposes the window, or logs why not.
 */
void npf_autowin_slowdown(npf_autowin_t *a, const npf_progress_t *p, const npf_progress_event_t *ev,
                          bool windows_open, uint64_t now_ns);

/*
 * npf_autowin_sweep() - after each sweep: take the fleet's new proposals, ask newly stalled
 * ranks for their stacks, note which answered. @ranks: the segment's rank table; @p: the
 * progress the sweep fed; @prof_dir: the configuration in force's; now in CLOCK_REALTIME.
 */
void npf_autowin_sweep(npf_autowin_t *a, npf_shm_ranks_t *ranks, const npf_progress_t *p, const char *prof_dir,
                       bool windows_open, uint64_t now_ns);

uint64_t npf_autowin_windows(const npf_autowin_t *a);  /* automatic windows opened on this node, ever */
uint64_t npf_autowin_stacks(const npf_autowin_t *a);   /* ranks asked for their stacks, ever */

/*
 * {policy, windows, stacks_asked, last: null | {kind, reason, generation, start_step,
 * unix_ms}, budget: {slowdown: {used, max_per_day, next_unix_ms}, stall: {...}},
 * stacks: [{rank, pid, asked, asked_unix_ms, path, state, error}], fleet_dir}.
 * Return: a new reference.
 */
json_t *npf_autowin_json(const npf_autowin_t *a);

#endif /* NPUPROF_DAEMON_AUTOWIN_H */
