/* SPDX-License-Identifier: MIT */
/*
 * Chrome trace analysis: the trace.json of the host backend, of torch.profiler (kineto's
 * object form and the legacy bare array), of anything that writes the Chrome Trace Event
 * format. Per thread, the events are nested into a tree by time; from the tree come the
 * operators with the most self and total time, and the duration of every ProfilerStep#N.
 *
 * What is read: the object form {"traceEvents": [...], ...} and the bare array form. A file
 * that ends early once the events have begun (a writer that died; the format allows the
 * array's closing bracket to be missing) is read up to the cut and marked truncated.
 * Phases "X" (ts, dur), "B"/"E" (matched per pid and tid as a stack, in time order),
 * "i"/"I"/"R" (instants, zero length) and "M" (process_name and thread_name name the
 * threads, process_labels tells a device's process); every other phase is counted as
 * ignored. The phase is the first character of "ph". ts and dur are microseconds: integers,
 * decimals, or strings that hold one, turned exactly into nanoseconds. pid and tid are
 * integers or strings, a string that holds an integer being that integer (a missing one is
 * 0). The events are read by the streaming scanner of replay/evscan.h, the file mapped a
 * piece at a time, so memory stays at a few dozen bytes per event however large the file is.
 *
 * The tree, per (pid, tid): events sorted by start, longer first, nested with a stack. An
 * event with no end (an "X" without dur, a "B" without its "E") borrows its parent's end,
 * at the top level the end of the thread's last event. A child that overruns its parent is
 * clipped to the parent's end ("clipped"). Self time is the duration minus the children's
 * (which after clipping never overlap). An operator's total time counts an event nested in
 * one of the same name once, so recursion does not count twice; sums saturate at INT64_MAX
 * nanoseconds. An event whose ts or dur is there but not a number of microseconds within
 * NPF_TRACE_TIME_MAX_US, or whose pid or tid is neither an integer nor a string, is skipped
 * and counted as malformed, whatever its phase; so is an event of the trees without "ts",
 * with a "dur" < 0 or a "name" that is not a string, and an element of the events that is
 * not an object. Names are kept as UTF-8: a bad escape or byte becomes U+FFFD (escapes are
 * not checked otherwise, nor are control characters in strings refused).
 *
 * The device's events: those of a process whose process_labels metadata begins with "NPU"
 * (torch_npu's and MindSpore's Ascend Hardware, HCCL, Overlap Analysis, ...) and Kineto's of
 * the categories kernel, gpu_memcpy, gpu_memset and gpu_user_annotation. They are in the
 * trees, the events and the threads, but in neither top list: the operators are the host's
 * (replay/device.h analyses the device). A thread of such a process, or whose events all are
 * such, is a device's.
 *
 * Steps are the ProfilerStep#N spans of the thread that has the most of them (on a tie, the
 * one whose first step starts first: the CPU thread rather than a GPU stream that repeats
 * the annotation), among the host's threads when one of them has steps, in step order.
 *
 * The "trace" section of report.json (npf_trace_report_json()):
 *   {
 *     "events": N,              spans in the trees: "X", "B"/"E" pairs, unmatched "B", instants
 *     "ignored": N,             elements with another phase or none ("C", flows, async, ...),
 *                               and metadata other than process_name and thread_name
 *     "malformed": N,           elements skipped; "first_malformed": "line L, column C: ..." when N > 0
 *     "unmatched_ends": N,      "E" with no open "B" on its thread
 *     "names_truncated": N,     names longer than NPF_TRACE_NAME_MAX, shortened to end in "..."
 *     "truncated": bool,        the file ended early; what came before it was read
 *     "start_us": x, "end_us": x,             first start and last end, null without events
 *     "threads": [ { "pid": int|string, "tid": int|string,
 *                    "process": string|null, "name": string|null,   from "M" metadata
 *                    "events": N, "start_us": x, "span_us": x,      first start to last end
 *                    "clipped": N, "borrowed_ends": N,
 *                    "device": bool } ... ],            a device's thread; in order of first appearance
 *     "top_self":  [ { "name", "count", "self_us", "total_us" } ... ],  most self time first
 *     "top_total": [ same ... ],           most total time first; ProfilerStep#N and the
 *                                          device's events are in neither
 *     "steps": [ { "step": N, "start_us": x, "dur_us": x } ... ],
 *     "step_thread": { "pid", "tid" } | null,
 *     "step_median_us": x|null, "step_p90_us": x|null, "step_max_us": x|null,
 *     "rss": { "samples": N, "peak_bytes": N, "peak_time_us": x } | null
 *   }
 * rss: the process's resident memory as the host backend's "memory" counter events ("ph":
 * "C", args.rss_kib) sample it, one a step; counters are otherwise ignored.
 * Times are microseconds as JSON reals (nanosecond resolution). At most top_n operators
 * are listed in each top list; ties are broken by name.
 */
#ifndef NPUPROF_REPLAY_TRACE_H
#define NPUPROF_REPLAY_TRACE_H

#include "replay/input.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NPF_TRACE_ERR_MAX 256u          /* bytes of the message buffers below */
#define NPF_TRACE_EVENTS_MAX (1u << 30) /* elements of traceEvents */
#define NPF_TRACE_NAME_MAX 1024u        /* bytes of a name; longer ones are shortened */
#define NPF_TRACE_TIME_MAX_US 3e15      /* |ts| and dur: 95 years; epoch microseconds fit */

typedef struct npf_trace npf_trace_t;

/* One ProfilerStep#N span. */
typedef struct npf_trace_step {
        int64_t step;                   /* N */
        double start_us;                /* as in the trace */
        double dur_us;
} npf_trace_step_t;

/* The step durations at a glance, for a rank's line in the cluster report. */
typedef struct npf_trace_step_stats {
        size_t n;                       /* steps; the figures below are 0 when there are none */
        double median_us;               /* the mean of the two middle ones for an even n */
        double p90_us;                  /* nearest rank */
        double max_us;
} npf_trace_step_stats_t;

/*
 * npf_trace_load() - read and analyse the Chrome trace in @buf (@len bytes). Nothing in the
 * result points into @buf. @progress may be NULL.
 * Return: 0 and the trace in @ret_trace (free it with npf_trace_free()); -EINVAL for broken
 * JSON, with the line and column in @err ("line 3, column 17: ..."), -ENOMSG for a document
 * that is not a Chrome trace (neither an object nor an array, an object without traceEvents,
 * no element with a "ph": the caller may try another reader), -E2BIG past
 * NPF_TRACE_EVENTS_MAX elements or for one longer than NPF_EVSCAN_EVENT_MAX bytes (16 MiB),
 * -ENOMEM; a sentence in @err (NPF_TRACE_ERR_MAX bytes) in every case. @progress is called
 * about every NPF_INPUT_PROGRESS_EVERY bytes, and once at the end with all of them.
 * Context: any; reentrant.
 */
int npf_trace_load(const void *buf, size_t len, npf_input_progress_cb progress, void *userdata,
                   npf_trace_t **ret_trace, char *err);

/*
 * npf_trace_load_file() - npf_trace_load() on the file at @path, mapped a piece at a time,
 * each piece unmapped once read: the file is never resident whole.
 * Return: as npf_trace_load(), or the -errno of open/fstat/mmap (@err names the file);
 * -EINVAL for an empty file or one that is not a regular file.
 */
int npf_trace_load_file(const char *path, npf_input_progress_cb progress, void *userdata,
                        npf_trace_t **ret_trace, char *err);

/* Frees @t. Accepts NULL; returns NULL. */
npf_trace_t *npf_trace_free(npf_trace_t *t);

/*
 * npf_trace_steps() - the ProfilerStep#N spans, in step order (see the top of this file).
 * Return: their number, the array in @ret_steps (NULL when there are none), owned by @t.
 */
size_t npf_trace_steps(const npf_trace_t *t, const npf_trace_step_t **ret_steps);

/*
 * npf_trace_rss() - the samples of the process's resident memory (the "memory" counter):
 * their times in microseconds, as in the trace, in @ret_time_us and their bytes in
 * @ret_bytes, in the order of the file, both owned by @t. Return: their number.
 */
size_t npf_trace_rss(const npf_trace_t *t, const double **ret_time_us, const uint64_t **ret_bytes);

/* The median, 90th percentile and longest of the step durations into @ret_stats. */
void npf_trace_step_stats(const npf_trace_t *t, npf_trace_step_stats_t *ret_stats);

/*
 * npf_trace_report_json() - the "trace" section of report.json (schema above), with at most
 * @top_n operators in each top list. Return: a new reference, or NULL when out of memory.
 */
json_t *npf_trace_report_json(const npf_trace_t *t, size_t top_n);

/*
 * npf_trace_report_text() - the same for people: a summary, then aligned tables of threads,
 * the @top_n operators by self and by total time, and the steps; durations in us, ms or s.
 * Return: 0, -ENOMEM, or -EIO when writing to @f failed.
 */
int npf_trace_report_text(const npf_trace_t *t, FILE *f, size_t top_n);

#endif /* NPUPROF_REPLAY_TRACE_H */
