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
        struct npf_windows_prof_dir { uint64_t generation; char *dir; } prof_dirs[NPF_WINDOWS_PROF_DIRS];
        unsigned head;
} npf_windows_t;

/* Remember that the windows of @generation are named below @prof_dir. */
void npf_windows_note_prof_dir(npf_windows_t *w, uint64_t generation, const char *prof_dir);

/*
 * npf_windows_ended() - log the window @rec that ended, and hand it on: a done window to
 * @analyze (NULL: none, the daemon is stopping), a lost one given its manifest.
 * Context: the daemon's loop, from a sweep.
 */
void npf_windows_ended(const npf_windows_t *w, npf_analyze_t *analyze, const npf_window_record_t *rec);

/* Log what became of an analysis, with the generation and rank of its window in @sweep. */
void npf_windows_analysis_logged(const npf_sweep_t *sweep, const npf_analysis_event_t *ev);

/*
 * The window history of @sweep as JSON, newest first, at most @max: each output as an
 * absolute directory where its prof_dir is known, each with its analysis from @analyze
 * (null when there is none). Return: a new reference.
 */
json_t *npf_windows_history_json(const npf_windows_t *w, const npf_sweep_t *sweep, npf_analyze_t *analyze,
                                 size_t max);

/* Free what @w holds. */
void npf_windows_clear(npf_windows_t *w);

#endif /* NPUPROF_DAEMON_WINDOWS_H */
