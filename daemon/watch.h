/* SPDX-License-Identifier: MIT */
/*
 * Watching profiler_config.json. Stat polling (uv_fs_poll) always, and inotify
 * (uv_fs_event) on the file's directory unless turned off, so that every way of saving a
 * file is seen: write in place, write to a temporary and rename over, delete and
 * re-create, truncate then write.
 *
 * The file is read in libuv's thread pool (a hung network file system must not stall the
 * loop) until two consecutive reads agree, then parsed there; when it changed during the
 * reading, it is read again NPF_WATCH_REREAD_MS later. A valid result is delivered
 * at once. An invalid or missing file is delivered only after it stayed so for
 * NPF_WATCH_SETTLE_MS without another event: a file caught between truncate and write,
 * or between delete and re-create, is never reported as broken.
 */
#ifndef NPUPROF_DAEMON_WATCH_H
#define NPUPROF_DAEMON_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "conf/conf.h"

#define NPF_WATCH_SETTLE_MS 100u
#define NPF_WATCH_REREAD_MS 20u         /* a file that changed while it was read is read again after this */

typedef struct npf_watch npf_watch_t;

/* One reading of the file. Owned by the watcher; valid during the callback only. */
typedef struct npf_watch_result {
        int rc;                         /* 0 valid, -EINVAL invalid, -ENOENT missing, -errno */
        const npf_shm_config_t *config; /* when rc == 0 */
        const npf_conf_auto_t *autow;   /* its "auto" section, when rc == 0 */
        const npf_conf_report_t *report;
        uint64_t content_hash;          /* of the bytes read; of the reason when none could be */
        int64_t mtime_s;                /* the file's modification time, whole seconds, when rc == 0 */
        uint64_t mtime_ns;              /* the same in nanoseconds, of the bytes read; 0: none could be */
} npf_watch_result_t;

typedef void (*npf_watch_cb)(npf_watch_t *w, const npf_watch_result_t *result, void *data);

/*
 * npf_watch_start() - watch @path on @loop; the first reading is delivered soon after.
 * With @output_root (absolute, in npf_outroot_normalize() form; copied), a valid file's
 * prof_dir is resolved under it (lib/outroot.h): the configuration delivered carries the
 * absolute, confined directory, and a file whose directory falls outside the root is
 * delivered as invalid, with the error at the directory's key. NULL: no confinement.
 * Return: 0 and the watcher in @ret_watch, or -errno.
 */
int npf_watch_start(uv_loop_t *loop, const char *path, unsigned poll_ms, bool inotify, const char *output_root,
                    npf_watch_cb cb, void *data, npf_watch_t **ret_watch);

/* Read the file now and deliver what is found, valid or not (SIGHUP, `reload`). */
void npf_watch_reload(npf_watch_t *w);

/* Stop watching; the watcher frees itself once its handles and any read in flight are done. */
void npf_watch_close(npf_watch_t *w);

/* How many times the file was read (for tests and metrics). */
uint64_t npf_watch_reads(const npf_watch_t *w);

#endif /* NPUPROF_DAEMON_WATCH_H */
