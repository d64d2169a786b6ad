/* SPDX-License-Identifier: MIT */
/*
 * The windows that ended, as the daemon routes them: where each one's output is (a rank
 * names its directory relative to its generation's prof_dir, which is remembered here for
 * the last generations published), what becomes of it (a done window is handed to the
 * analyzer, a lost one given the manifest its rank never wrote), and the history as the
 * protocol shows it.
 */
#ifndef NPUPROF_DAEMON_WINDOWS_H
#define NPUPROF_DAEMON_WINDOWS_H

#include <jansson.h>
#include <stdint.h>

#include "daemon/analyze.h"
#include "daemon/sweep.h"

#define NPF_WINDOWS_PROF_DIRS 16        /* generations whose prof_dir names their windows' output */

typedef struct npf_windows {
        const char *output_root;        /* borrowed, normal form */
        const char *state_dir;          /* borrowed: systemd's StateDirectory=, or NULL */
        /* Of each of the last generations: where their windows are, and why, for an automatic one. */
        struct npf_windows_prof_dir { uint64_t generation; char *dir, *reason; } prof_dirs[NPF_WINDOWS_PROF_DIRS];
        unsigned head;
        uint64_t clustered;             /* the last generation whose cluster analysis was queued */
} npf_windows_t;

/* Remember that the windows of @generation are named below @prof_dir. */
void npf_windows_note_prof_dir(npf_windows_t *w, uint64_t generation, const char *prof_dir);

/* Remember that @generation is an automatic window's, opened for @reason (daemon/autowin.h). */
void npf_windows_note_reason(npf_windows_t *w, uint64_t generation, const char *reason);

/*
 * npf_windows_ended() - log the window @rec that ended, and hand it on: a done window to
 * @analyze (NULL: none, the daemon is stopping), a lost one given its manifest.
 * Context: the daemon's loop, from a sweep.
 */
void npf_windows_ended(const npf_windows_t *w, npf_analyze_t *analyze, const npf_window_record_t *rec);

/*
 * npf_windows_cluster() - once no rank of the node is in a window (armed, collecting,
 * flushing or stalled, as @sweep last saw them), queue in @analyze the cluster analysis of
 * the newest generation not yet analysed so whose windows include two done ones or more:
 * `npuprof-replay cluster` over those window directories, into cluster-gen<G>/ beside them
 * (or, for a daemon that writes under its StateDirectory=, there below STATE/analysis/).
 * Context: the daemon's loop, after a sweep.
 */
void npf_windows_cluster(npf_windows_t *w, npf_analyze_t *analyze, const npf_sweep_t *sweep);

/* The cluster analyses of the generations in @sweep's history, newest first:
 * [{generation, windows, analysis}]. Return: a new reference. */
json_t *npf_windows_clusters_json(const npf_sweep_t *sweep, npf_analyze_t *analyze);

/* Log what became of an analysis, with the generation and rank of its window in @sweep. */
void npf_windows_analysis_logged(const npf_sweep_t *sweep, const npf_analysis_event_t *ev);

/*
 * The window history of @sweep as JSON, newest first, at most @max: each output as an
 * absolute directory where its prof_dir is known, each with its analysis from @analyze
 * (null when there is none) and its reason (null but for an automatic window's). Return: a new reference.
 */
json_t *npf_windows_history_json(const npf_windows_t *w, const npf_sweep_t *sweep, npf_analyze_t *analyze,
                                 size_t max);

/* Free what @w holds. */
void npf_windows_clear(npf_windows_t *w);

#endif /* NPUPROF_DAEMON_WINDOWS_H */
