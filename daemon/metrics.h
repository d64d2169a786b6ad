/* SPDX-License-Identifier: MIT */
/*
 * The daemon's Prometheus text exposition, format 0.0.4: what `npuprofctl metrics` shows
 * and --metrics-file holds (daemon/keptfile.h). It comes in two parts. The first, steady,
 * moves only when a count or a state does, so that an unchanged one means nothing to
 * write. The second moves at every sweep while ranks step: the sweeps counted, each
 * rank's step and step time; a change of it alone is written at the file's interval.
 */
#ifndef NPUPROF_DAEMON_METRICS_H
#define NPUPROF_DAEMON_METRICS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/autowin.h"
#include "daemon/kineto.h"
#include "daemon/progress.h"
#include "daemon/sweep.h"
#include "npuprof/shm.h"

/* What the text says, as the daemon knows it now. Everything is borrowed. */
typedef struct npf_metrics {
        bool up;                        /* false as the daemon stops */
        uint64_t started_real_ns;       /* CLOCK_REALTIME */
        uint64_t generation;            /* in force */
        uint64_t published_ns;          /* CLOCK_REALTIME of its publication; 0: none */
        const npf_shm_status_t *file;   /* the watched file, as last read */
        uint64_t reloads;
        const npf_sweep_t *sweep;
        const npf_progress_t *progress; /* the ranks' progress; NULL: none */
        const npf_autowin_t *autowin;   /* what the daemon did by itself; NULL: none */
        const json_t *analysis;         /* the analyzer's summary: queued, running, done, failed, dropped */
        const json_t *legacy;           /* the frameworks' publishers (npf_fwshm_status_json()), or NULL */
        const npf_kineto_t *kineto;     /* libkineto's endpoint; NULL: not served */
        bool has_file;                  /* --metrics-file is set: its errors are counted */
        uint64_t file_errors;
} npf_metrics_t;

/*
 * npf_metrics_text() - the text; its first @ret_steady bytes are the steady part.
 * Return: a new string, or NULL when memory ran out.
 */
char *npf_metrics_text(const npf_metrics_t *m, size_t *ret_steady);

#endif /* NPUPROF_DAEMON_METRICS_H */
