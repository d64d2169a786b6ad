/* SPDX-License-Identifier: MIT */
/*
 * The analysis of finished windows: each window directory handed in is analysed by the
 * npuprof-replay program in a child process, never in the daemon. At most `jobs` children
 * run at once; the others wait in a bounded queue (the oldest waiting is dropped when it
 * is full). A child runs niced, under an address-space and a CPU-time limit that the
 * analyzer applies to itself before it reads any input (--nice, --limit-memory,
 * --limit-cpu), and under a wall-clock limit that this module enforces with SIGKILL. Its
 * stderr is read through a pipe and only the last bytes are kept, for the reason of a
 * failure. Whatever a child does (crash, hang, exhaust its memory, write nonsense on
 * stderr), the daemon only records it.
 *
 * The analyses of the last NPF_ANALYZE_KEPT windows are remembered, keyed by the window's
 * id (npf_window_record_t.id), for `status`, `windows` and the metrics.
 */
#ifndef NPUPROF_DAEMON_ANALYZE_H
#define NPUPROF_DAEMON_ANALYZE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#define NPF_ANALYZE_JOBS_DEFAULT 1u
#define NPF_ANALYZE_JOBS_MAX 64u
#define NPF_ANALYZE_TIMEOUT_S_DEFAULT 600u
#define NPF_ANALYZE_TIMEOUT_S_MAX 604800u       /* a week */
#define NPF_ANALYZE_MEMORY_DEFAULT (UINT64_C(4) << 30)
#define NPF_ANALYZE_MEMORY_MIN (UINT64_C(1) << 20)
#define NPF_ANALYZE_NICE_DEFAULT 10
#define NPF_ANALYZE_QUEUE_MAX 256u              /* windows waiting; beyond, the oldest is dropped */
#define NPF_ANALYZE_KEPT 512u                   /* analyses remembered, finished or not */
#define NPF_ANALYZE_REASON_MAX 320u             /* bytes of a failure's reason */
#define NPF_ANALYZE_SUMMARY_MAX 16384u          /* bytes of the analyzer's summary.json read */
#define NPF_ANALYZE_TAIL_MAX 4096u              /* bytes of a child's stderr kept */
#define NPF_ANALYZE_EXIT_OOM 3                  /* npuprof-replay's exit status for "out of memory" */
#define NPF_ANALYZE_GRACE_MS 2000u              /* after the child's exit, wait this long for its stderr's end */

#ifndef NPF_ANALYZER_PATH
#define NPF_ANALYZER_PATH "/usr/local/bin/npuprof-replay"
#endif

enum {
        NPF_ANALYSIS_QUEUED = 1,
        NPF_ANALYSIS_RUNNING,
        NPF_ANALYSIS_DONE,
        NPF_ANALYSIS_FAILED,
};

typedef struct npf_analyze_options {
        const char *analyzer;           /* the npuprof-replay program */
        unsigned jobs;                  /* children at once; 0: no analysis at all */
        uint64_t timeout_s;             /* wall-clock (and CPU-time) limit of one analysis */
        uint64_t memory_bytes;          /* address-space limit; 0: none (sanitizer builds) */
        int nice;                       /* lower its priority by this much, 0 to 19 */
        unsigned queue_max;             /* windows that may wait, at most (and 0:) NPF_ANALYZE_QUEUE_MAX */
} npf_analyze_options_t;

/* One analysis as it changes state, for the daemon's log. Valid during the callback only. */
typedef struct npf_analysis_event {
        uint64_t window_id;
        uint32_t state;                 /* NPF_ANALYSIS_RUNNING, _DONE or _FAILED */
        const char *dir;                /* the window directory */
        const char *report;             /* done: report.json's path */
        const char *reason;             /* failed: why */
        double seconds;                 /* done or failed: how long it ran */
        int pid;                        /* running: the child's */
} npf_analysis_event_t;

typedef void (*npf_analyze_event_cb)(const npf_analysis_event_t *ev, void *data);

typedef struct npf_analyze npf_analyze_t;

/*
 * npf_analyze_new() - an analysis queue on @loop with @opt (copied). @cb, which may be
 * NULL, is told when an analysis starts and ends.
 * Return: 0 and the queue in @ret_analyze, or -ENOMEM.
 * Context: the daemon's loop thread.
 */
int npf_analyze_new(uv_loop_t *loop, const npf_analyze_options_t *opt, npf_analyze_event_cb cb, void *data,
                    npf_analyze_t **ret_analyze);

/*
 * npf_analyze_window() - queue the window directory @dir (absolute; copied) of the window
 * @window_id for analysis, into @outdir (copied), or @dir/analysis when @outdir is NULL;
 * it starts at once when fewer than `jobs` run. A window already known is not queued again.
 * The analyzer runs as @uid and @gid, or as the daemon when @uid is (uid_t) -1.
 * Return: 0; -ECANCELED when analysis is off or the queue is closing; -EEXIST; -ENOMEM.
 */
int npf_analyze_window(npf_analyze_t *a, uint64_t window_id, const char *dir, const char *outdir, uid_t uid,
                       gid_t gid);

/* The id of the cluster analysis of a generation, beside the windows' ids. */
#define NPF_ANALYZE_CLUSTER_ID(generation) ((UINT64_C(1) << 63) | (uint64_t) (generation))
#define NPF_ANALYZE_CLUSTER_MAX 1024u           /* windows in one cluster analysis */

/*
 * npf_analyze_cluster() - queue the cluster analysis of @generation: `npuprof-replay
 * cluster` over the @n (2 to NPF_ANALYZE_CLUSTER_MAX) window directories @dirs (absolute;
 * copied), into @outdir (copied), as @uid and @gid ((uid_t) -1: the daemon's), under the
 * id NPF_ANALYZE_CLUSTER_ID(@generation), in the same queue and limits as the windows'.
 * Return: as npf_analyze_window(), or -EINVAL for a count out of range or no @outdir.
 */
int npf_analyze_cluster(npf_analyze_t *a, uint64_t generation, const char *const *dirs, size_t n, const char *outdir,
                        uid_t uid, gid_t gid);

/*
 * npf_analyze_refuse() - record that the window @window_id cannot be analysed, as a failed
 * analysis with @reason (a window without a directory, or one outside the output root).
 * Return: 0, -ECANCELED when analysis is off or closing, -EEXIST, or -ENOMEM.
 */
int npf_analyze_refuse(npf_analyze_t *a, uint64_t window_id, const char *reason);

/*
 * The analysis of window @window_id as {state, report, reason, pid, seconds}: report is
 * report.json's path when done, or when failed with status 1 after writing a report of
 * what could be analysed, else null; reason is null unless failed; pid is the child's
 * while running, else null; seconds is null while queued. NULL when none is known.
 * Return: a new reference, or NULL.
 */
json_t *npf_analyze_window_json(const npf_analyze_t *a, uint64_t window_id);

/*
 * The settings and the counts: {enabled, analyzer, jobs, timeout_s, memory_bytes, nice,
 * queue_max, queued, running, done, failed, dropped} (queued and running: now; done, failed
 * and dropped: since the daemon started; dropped ones are counted in failed too).
 * Return: a new reference.
 */
json_t *npf_analyze_summary_json(const npf_analyze_t *a);

/*
 * npf_analyze_close() - kill the running children (SIGKILL) and forget the queue. The
 * structure frees itself once the children are reaped and their handles closed, which the
 * loop's run sees through. NULL is accepted.
 */
void npf_analyze_close(npf_analyze_t *a);

/*
 * npf_analyze_parse_bytes() - a byte count like "4G", "512M", "1048576", "64KiB" (K, M, G,
 * T are powers of 1024; "B" and "iB" may follow).
 * Return: 0 and the count in @ret, or -EINVAL (not such a count) or -ERANGE (over 2^63).
 */
int npf_analyze_parse_bytes(const char *s, uint64_t *ret);

/* @bytes for people: "4.0 GiB", "1.0 MiB", "512 bytes". */
void npf_analyze_format_bytes(uint64_t bytes, char *buf, size_t len);

/* How a child ended, for npf__analyze_reason(). */
typedef struct npf_analyze_exit {
        int spawn_error;                /* <0: it never ran (a libuv error) */
        int64_t exit_status;
        int term_signal;
        bool timed_out;                 /* killed by the wall-clock limit */
        bool report_missing;            /* exit 0, yet no report.json */
        const char *tail;               /* the end of its stderr; may be NULL */
        size_t tail_len;
} npf_analyze_exit_t;

/*
 * npf__analyze_reason() - why an analysis failed, in words, into @buf: "time limit of 600 s
 * reached", "memory limit of 4.0 GiB reached", "killed by signal 11 (Segmentation fault)",
 * or the analyzer's own last line on stderr (without its program-name prefix, control
 * characters replaced, at most NPF_ANALYZE_REASON_MAX - 1 bytes, valid UTF-8).
 * Return: true when the analysis failed, false when it succeeded (@buf then empty).
 */
bool npf__analyze_reason(const npf_analyze_exit_t *e, const npf_analyze_options_t *opt, char *buf, size_t len);

#endif /* NPUPROF_DAEMON_ANALYZE_H */
