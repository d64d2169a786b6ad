/* SPDX-License-Identifier: MIT */
/*
 * A window's manifest.json: the window's rank, steps and outcome, and every file its
 * directory holds, written last into the directory (docs/profiler_config.json.5, OUTPUT).
 * Its rank writes it when it closes the window; the daemon writes it for a rank that died
 * while collecting. One writer for both, so the two read alike.
 */
#ifndef NPUPROF_LIB_MANIFEST_H
#define NPUPROF_LIB_MANIFEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/atomicfile.h"

/* A window, as its manifest says it. A negative value is one not known: null in the file. */
typedef struct npf_manifest {
        int64_t rank;
        int64_t pid;                    /* the rank's, as the writer sees it */
        uint64_t generation;
        int64_t start_step;
        int64_t stop_step;              /* negative: a window bounded by time */
        int64_t warmup;
        int64_t last_step;              /* the last step collected; below start_step: none */
        const char *backend;
        bool complete;                  /* "status": "complete", else "incomplete" */
        int64_t started_unix_ms;
        int64_t ended_unix_ms;
        const char *message;            /* NULL or empty: null */
        json_t *runtime;                /* borrowed; NULL or empty: left out */
        const char *written_by;         /* NULL: left out (the rank's own) */
        const char *reason;             /* why the window opened, an automatic one's; NULL or empty: left out */
} npf_manifest_t;

/*
 * npf_manifest_write() - write manifest.json for @m into the window directory @dfd,
 * listing the regular files the directory holds, through a temporary of @tag
 * (lib/atomicfile.h, whose @flags it takes). Nothing in the directory is followed if it
 * is a link.
 * Return: 0, or -errno with the failed step in @f.
 * Context: any; a few small writes and two fsyncs.
 */
int npf_manifest_write(npf_atomicfile_t *f, int dfd, const npf_manifest_t *m, const char *tag, unsigned flags);

#endif /* NPUPROF_LIB_MANIFEST_H */
