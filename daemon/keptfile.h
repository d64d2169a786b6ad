/* SPDX-License-Identifier: MIT */
/*
 * A file the daemon keeps current for readers elsewhere: the Prometheus exposition for
 * node_exporter's textfile collector (--metrics-file) and the node's fleet record
 * (--fleet-dir). Every write replaces the file whole through lib/atomicfile: the text goes
 * to DIR/.NAME.tmp (hidden, and not *.prom or *.json, which the readers take), is fsynced,
 * made mode 0644 and renamed over the file, in libuv's thread pool so that a slow disk or
 * a hung NFS server never stalls the loop. A reader sees the old file or the new one,
 * never a part of one.
 *
 * The file is written at start, when asked (npf_kept_file_update() when the text changed,
 * npf_kept_file_put() whatever it is), and every interval whatever happened, so that its
 * age says the daemon is alive. One write at a time: a text asked for during a write is
 * written after it. After a failed write, changes wait for the next interval, so a full
 * disk costs one attempt per interval. A failure is logged once per distinct error,
 * counted, and never stops anything.
 */
#ifndef NPUPROF_DAEMON_KEPTFILE_H
#define NPUPROF_DAEMON_KEPTFILE_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#define NPF_METRICS_INTERVAL_S_DEFAULT 15u
#define NPF_KEPT_INTERVAL_S_MAX 3600u

typedef struct npf_kept_file npf_kept_file_t;

/* The file's text now, as a new malloc'd string (the caller frees it), or NULL. */
typedef char *(*npf_kept_text_fn)(void *data);

/*
 * npf_kept_file_new() - keep @path (absolute; copied) up to date with what @text returns,
 * every @interval_ms at least; the first write is queued at once. @what names the file in
 * the log ("the metrics file"; a string that outlives the writer).
 * Return: 0 and the writer in @ret_file, or -errno.
 */
int npf_kept_file_new(uv_loop_t *loop, const char *path, const char *what, uint64_t interval_ms,
                      npf_kept_text_fn text, void *data, npf_kept_file_t **ret_file);

/* What the file holds may have changed: write it if the text differs from the last written. */
void npf_kept_file_update(npf_kept_file_t *m);

/*
 * Write @text (malloc'd, taken over) now, or after the write in flight, changed or not;
 * dropped while writes fail (the interval writes what is current then).
 */
void npf_kept_file_put(npf_kept_file_t *m, char *text);

/* Writes that failed so far (for the exposition itself). @m may be NULL. */
uint64_t npf_kept_file_errors(const npf_kept_file_t *m);

/* {path, interval_s, writes, errors, last_error} (last_error null after a success). */
json_t *npf_kept_file_status_json(const npf_kept_file_t *m);

/*
 * Write the text one last time, then free the writer once that write and its timer are
 * done; @text is not called after this returns. Accepts NULL.
 */
void npf_kept_file_close(npf_kept_file_t *m);

#endif /* NPUPROF_DAEMON_KEPTFILE_H */
