/* SPDX-License-Identifier: MIT */
/*
 * The daemon's Prometheus exposition kept in a file, for node_exporter's textfile collector
 * (--metrics-file). Every write replaces the file whole: the text goes to DIR/.NAME.tmp
 * (made afresh, O_EXCL), is fsynced, made mode 0644 and renamed over the file, in libuv's
 * thread pool so that a slow disk never stalls the loop; on failure the temporary is
 * removed. A reader sees the old file or the new one, never a part of one.
 *
 * The file is written at start, whenever the text changes (npf_metrics_file_update()),
 * and every interval whatever happened, so that its mtime says the daemon is alive. One
 * write at a time: a change during a write is written after it. After a failed write,
 * changes wait for the next interval, so a full disk costs one attempt per interval. A
 * failure is logged once per distinct error, counted, and never stops anything.
 */
#ifndef NPUPROF_DAEMON_METRICSFILE_H
#define NPUPROF_DAEMON_METRICSFILE_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#define NPF_METRICS_INTERVAL_S_DEFAULT 15u
#define NPF_METRICS_INTERVAL_S_MAX 3600u

typedef struct npf_metrics_file npf_metrics_file_t;

/* The exposition now, as a new malloc'd string (the caller frees it), or NULL. */
typedef char *(*npf_metrics_text_fn)(void *data);

/*
 * npf_metrics_file_new() - keep @path (absolute; copied) up to date with what @text
 * returns, every @interval_ms at least; the first write is queued at once.
 * Return: 0 and the writer in @ret_file, or -errno.
 */
int npf_metrics_file_new(uv_loop_t *loop, const char *path, uint64_t interval_ms, npf_metrics_text_fn text,
                         void *data, npf_metrics_file_t **ret_file);

/* The counters may have changed: write the file if the text differs from the last written. */
void npf_metrics_file_update(npf_metrics_file_t *m);

/* Writes that failed so far (for the exposition itself). @m may be NULL. */
uint64_t npf_metrics_file_errors(const npf_metrics_file_t *m);

/* {path, interval_s, writes, errors, last_error} (last_error null after a success). */
json_t *npf_metrics_file_status_json(const npf_metrics_file_t *m);

/*
 * Write the text one last time, then free the writer once that write and its timer are
 * done; @text is not called after this returns. Accepts NULL.
 */
void npf_metrics_file_close(npf_metrics_file_t *m);

#endif /* NPUPROF_DAEMON_METRICSFILE_H */
