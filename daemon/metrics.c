/* SPDX-License-Identifier: MIT */
#include "daemon/metrics.h"
#include "npuprof/protocol.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void metric(char **buf, size_t *len, size_t *used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void metric(char **buf, size_t *len, size_t *used, const char *fmt, ...)
{
        va_list ap;

        for (;;) {
                va_start(ap, fmt);
                int n = vsnprintf(*buf + *used, *len - *used, fmt, ap);
                va_end(ap);
                if (n < 0)
                        return;
                if ((size_t) n < *len - *used) {
                        *used += (size_t) n;
                        return;
                }
                char *bigger = realloc(*buf, *len * 2);
                if (!bigger)
                        return;
                *buf = bigger;
                *len *= 2;
        }
}

/*
 * The analyses: npuprof_analyses{state="queued"|"running"} now (a gauge), and
 * npuprof_analyses_total{state="done"|"failed"} ended since the daemon started (a counter),
 * of which npuprof_analyses_dropped_total never ran for a full queue.
 */
static void analysis_metrics(const json_t *o, char **buf, size_t *len, size_t *used)
{
        metric(buf, len, used, "# HELP npuprof_analyses Window analyses waiting or running now.\n"
                               "# TYPE npuprof_analyses gauge\nnpuprof_analyses{state=\"queued\"} %lld\n"
                               "npuprof_analyses{state=\"running\"} %lld\n"
                               "# HELP npuprof_analyses_total Window analyses ended, by state.\n"
                               "# TYPE npuprof_analyses_total counter\nnpuprof_analyses_total{state=\"done\"} %lld\n"
                               "npuprof_analyses_total{state=\"failed\"} %lld\n"
                               "# HELP npuprof_analyses_dropped_total Windows dropped from a full analysis queue "
                               "(counted as failed too).\n"
                               "# TYPE npuprof_analyses_dropped_total counter\nnpuprof_analyses_dropped_total %lld\n",
               (long long) json_integer_value(json_object_get(o, "queued")),
               (long long) json_integer_value(json_object_get(o, "running")),
               (long long) json_integer_value(json_object_get(o, "done")),
               (long long) json_integer_value(json_object_get(o, "failed")),
               (long long) json_integer_value(json_object_get(o, "dropped")));
}

/* A label value as the exposition format wants it: backslash, quote and newline escaped. */
static const char *label(const char *v, char *buf, size_t len)
{
        size_t n = 0;

        for (; v && *v && n + 3 < len; v++) {
                if (*v == '\\' || *v == '"' || *v == '\n')
                        buf[n++] = '\\';
                buf[n++] = *v == '\n' ? 'n' : *v;
        }
        buf[n] = '\0';
        return buf;
}

/*
 * The frameworks' publishers (--legacy): npuprof_legacy_objects{publisher, state="driven"|
 * "undriven"}, the processes that map them, and one npuprof_legacy_undriven{publisher,
 * object, uid, reason} 1 for each job's object the daemon cannot write to, so that an alert
 * names it; npuprofctl status says why and what to change.
 */
static void legacy_metrics(const json_t *legacy, char **buf, size_t *len, size_t *used)
{
        json_t *pubs = json_object_get(legacy, "publishers"), *p, *o;
        char pub[64], name[128], reason[128];
        size_t i, k;

        if (!json_array_size(pubs))
                return;
        metric(buf, len, used, "# HELP npuprof_legacy_objects The frameworks' objects, by whether the daemon "
                               "writes to them.\n# TYPE npuprof_legacy_objects gauge\n");
        json_array_foreach(pubs, i, p) {
                unsigned driven = 0, undriven = 0;
                json_array_foreach(json_object_get(p, "objects"), k, o) {
                        if (json_object_get(o, "error"))
                                undriven++;
                        else
                                driven++;
                }
                label(json_string_value(json_object_get(p, "publisher")), pub, sizeof(pub));
                metric(buf, len, used, "npuprof_legacy_objects{publisher=\"%s\",state=\"driven\"} %u\n"
                                       "npuprof_legacy_objects{publisher=\"%s\",state=\"undriven\"} %u\n",
                       pub, driven, pub, undriven);
        }
        metric(buf, len, used, "# HELP npuprof_legacy_processes Processes that map the frameworks' objects.\n"
                               "# TYPE npuprof_legacy_processes gauge\n");
        json_array_foreach(pubs, i, p)
                metric(buf, len, used, "npuprof_legacy_processes{publisher=\"%s\"} %zu\n",
                       label(json_string_value(json_object_get(p, "publisher")), pub, sizeof(pub)),
                       json_array_size(json_object_get(p, "processes")));
        metric(buf, len, used, "# HELP npuprof_legacy_undriven A job's object the daemon cannot write to: which, "
                               "whose, and why (npuprofctl status says what to change).\n"
                               "# TYPE npuprof_legacy_undriven gauge\n");
        json_array_foreach(pubs, i, p) {
                label(json_string_value(json_object_get(p, "publisher")), pub, sizeof(pub));
                json_array_foreach(json_object_get(p, "objects"), k, o) {
                        if (!json_object_get(o, "error"))
                                continue;
                        json_t *uid = json_object_get(o, "uid");
                        char uid_text[24] = "unknown";
                        if (uid)
                                snprintf(uid_text, sizeof(uid_text), "%lld", (long long) json_integer_value(uid));
                        metric(buf, len, used, "npuprof_legacy_undriven{publisher=\"%s\",object=\"%s\",uid=\"%s\","
                                               "reason=\"%s\"} 1\n", pub,
                               label(json_string_value(json_object_get(o, "name")), name, sizeof(name)), uid_text,
                               label(json_string_value(json_object_get(o, "error")), reason, sizeof(reason)));
                }
        }
}

/* Seconds since the epoch of CLOCK_REALTIME @ns, to the millisecond. */
static double unix_seconds(uint64_t ns)
{
        return (double) (ns / 1000000u) / 1000.0;
}

/*
 * The ranks' progress that moves only with a state: npuprof_ranks_stalled (progress
 * stalls, not the state "stalled" of npuprof_ranks), npuprof_slowdown (one is on),
 * npuprof_progress_stalls_total and npuprof_slowdowns_total.
 */
static void progress_metrics(const npf_progress_t *p, char **buf, size_t *len, size_t *used)
{
        metric(buf, len, used, "# HELP npuprof_ranks_stalled Ranks that made no step for --stall-after or "
                               "--stall-factor step times of their own (progress stalls).\n"
                               "# TYPE npuprof_ranks_stalled gauge\nnpuprof_ranks_stalled %" PRIu32 "\n"
                               "# HELP npuprof_progress_stalls_total Progress stalls begun.\n"
                               "# TYPE npuprof_progress_stalls_total counter\nnpuprof_progress_stalls_total %" PRIu64 "\n"
                               "# HELP npuprof_slowdown Whether the job's step time is in a slowdown now.\n"
                               "# TYPE npuprof_slowdown gauge\nnpuprof_slowdown %d\n"
                               "# HELP npuprof_slowdowns_total Slowdowns of the job found.\n"
                               "# TYPE npuprof_slowdowns_total counter\nnpuprof_slowdowns_total %" PRIu64 "\n",
               npf_progress_stalled(p), npf_progress_stalls(p), npf_progress_slowing(p),
               npf_progress_slowdowns(p));
}

/* What the daemon did by itself: npuprof_auto_windows_total, npuprof_auto_stacks_total. */
static void auto_metrics(const npf_autowin_t *a, char **buf, size_t *len, size_t *used)
{
        metric(buf, len, used, "# HELP npuprof_auto_windows_total Windows opened by themselves (the configuration's "
                               "auto.on_slowdown) on this node's ranks.\n"
                               "# TYPE npuprof_auto_windows_total counter\nnpuprof_auto_windows_total %" PRIu64 "\n"
                               "# HELP npuprof_auto_stacks_total Stalled ranks asked for their stacks "
                               "(auto.on_stall).\n"
                               "# TYPE npuprof_auto_stacks_total counter\nnpuprof_auto_stacks_total %" PRIu64 "\n",
               npf_autowin_windows(a), npf_autowin_stacks(a));
}

/* libkineto's endpoint: the PyTorch processes that poll it, and what it gave them. */
static void kineto_metrics(const npf_kineto_t *k, char **buf, size_t *len, size_t *used)
{
        npf_kineto_counts_t c;

        npf_kineto_counts(k, &c);
        metric(buf, len, used, "# HELP npuprof_kineto_clients libkineto processes (PyTorch jobs with "
                               "KINETO_USE_DAEMON=1) polling this daemon.\n"
                               "# TYPE npuprof_kineto_clients gauge\nnpuprof_kineto_clients %" PRIu64 "\n"
                               "# HELP npuprof_kineto_requests_total Their requests for a configuration.\n"
                               "# TYPE npuprof_kineto_requests_total counter\nnpuprof_kineto_requests_total %" PRIu64 "\n"
                               "# HELP npuprof_kineto_windows_total Their windows, by what became of them.\n"
                               "# TYPE npuprof_kineto_windows_total counter\n"
                               "npuprof_kineto_windows_total{outcome=\"given\"} %" PRIu64 "\n"
                               "npuprof_kineto_windows_total{outcome=\"traced\"} %" PRIu64 "\n"
                               "npuprof_kineto_windows_total{outcome=\"lost\"} %" PRIu64 "\n"
                               "# HELP npuprof_kineto_datagrams_refused_total Datagrams refused: malformed, of "
                               "an unknown type, or from a client past the limit.\n"
                               "# TYPE npuprof_kineto_datagrams_refused_total counter\n"
                               "npuprof_kineto_datagrams_refused_total %" PRIu64 "\n",
               c.clients, c.requests, c.given, c.traces, c.lost, c.refused);
}

/* What moves at every sweep while ranks step: each rank's step, and its step time once known. */
static void rank_metrics(const npf_progress_t *p, char **buf, size_t *len, size_t *used)
{
        npf_progress_rank_t r;
        uint32_t cursor = 0;

        metric(buf, len, used, "# HELP npuprof_rank_step The step each attached rank is at.\n"
                               "# TYPE npuprof_rank_step gauge\n");
        while (npf_progress_next(p, &cursor, &r))
                if (r.step >= 0)
                        metric(buf, len, used, "npuprof_rank_step{rank=\"%" PRIu32 "\"} %" PRId64 "\n", r.rank, r.step);
        metric(buf, len, used, "# HELP npuprof_rank_step_time_seconds Each rank's step time: the median of its "
                               "recent steps outside windows.\n# TYPE npuprof_rank_step_time_seconds gauge\n");
        cursor = 0;
        while (npf_progress_next(p, &cursor, &r))
                if (r.step_time_s > 0)
                        metric(buf, len, used, "npuprof_rank_step_time_seconds{rank=\"%" PRIu32 "\"} %.6g\n", r.rank,
                               r.step_time_s);
}

char *npf_metrics_text(const npf_metrics_t *m, size_t *ret_steady)
{
        static const char *const rank_states[] = { NPF_PROTO_RANK_STATES };
        static const uint32_t outcomes[] = { NPF_WINDOW_DONE, NPF_WINDOW_FAILED, NPF_WINDOW_MISSED,
                                             NPF_WINDOW_FILTERED, NPF_WINDOW_LOST };
        size_t len = 4096, used = 0;
        char *buf = malloc(len);

        if (!buf)
                return NULL;
        buf[0] = '\0';
        metric(&buf, &len, &used,
               "# HELP npuprof_up Whether the daemon runs: 0 is written into the metrics file as it stops.\n"
               "# TYPE npuprof_up gauge\nnpuprof_up %d\n"
               "# HELP npuprof_build_info The daemon's version, shared-memory ABI and protocol.\n"
               "# TYPE npuprof_build_info gauge\n"
               "npuprof_build_info{version=\"%s\",shm_abi=\"%u\",protocol=\"%d\"} 1\n"
               "# HELP npuprof_start_time_seconds When the daemon started, in seconds since the epoch.\n"
               "# TYPE npuprof_start_time_seconds gauge\nnpuprof_start_time_seconds %.3f\n",
               m->up, NPUPROF_VERSION, NPF_SHM_ABI_VERSION, NPF_PROTO_VERSION, unix_seconds(m->started_real_ns));
        metric(&buf, &len, &used,
               "# HELP npuprof_generation Generation of the configuration in force.\n"
               "# TYPE npuprof_generation gauge\nnpuprof_generation %" PRIu64 "\n"
               "# HELP npuprof_generation_published_timestamp_seconds When the configuration in force was "
               "published, in seconds since the epoch; 0: none yet.\n"
               "# TYPE npuprof_generation_published_timestamp_seconds gauge\n"
               "npuprof_generation_published_timestamp_seconds %.3f\n"
               "# HELP npuprof_config_valid Whether the watched file, as last read, is valid.\n"
               "# TYPE npuprof_config_valid gauge\nnpuprof_config_valid %d\n"
               "# HELP npuprof_config_errors_total Broken versions of the watched file seen.\n"
               "# TYPE npuprof_config_errors_total counter\nnpuprof_config_errors_total %u\n"
               "# HELP npuprof_reloads_total Reloads asked for by SIGHUP or the reload command.\n"
               "# TYPE npuprof_reloads_total counter\nnpuprof_reloads_total %" PRIu64 "\n"
               "# HELP npuprof_ranks Ranks attached to the segment, by state.\n# TYPE npuprof_ranks gauge\n",
               m->generation, m->published_ns ? unix_seconds(m->published_ns) : 0.0,
               m->file->file_state == NPF_FILE_VALID, m->file->error_count, m->reloads);
        for (uint32_t s = 0; s <= NPF_SWEEP_STALLED; s++)
                metric(&buf, &len, &used, "npuprof_ranks{state=\"%s\"} %u\n", rank_states[s], m->sweep->by_state[s]);
        metric(&buf, &len, &used, "# HELP npuprof_windows_total Windows ended, by outcome.\n"
                                  "# TYPE npuprof_windows_total counter\n");
        for (size_t i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++)
                metric(&buf, &len, &used, "npuprof_windows_total{outcome=\"%s\"} %" PRIu64 "\n",
                       npf_shm_window_state_name(outcomes[i]), m->sweep->outcomes[outcomes[i]]);
        metric(&buf, &len, &used, "# HELP npuprof_windows_unrecorded_total Windows that ended faster than sweeps could see them.\n"
                                  "# TYPE npuprof_windows_unrecorded_total counter\nnpuprof_windows_unrecorded_total %" PRIu64 "\n",
               m->sweep->unrecorded);
        metric(&buf, &len, &used, "# HELP npuprof_slots_reclaimed_total Slots freed after their process was gone.\n"
                                  "# TYPE npuprof_slots_reclaimed_total counter\nnpuprof_slots_reclaimed_total %" PRIu64 "\n",
               m->sweep->reclaimed);
        analysis_metrics(m->analysis, &buf, &len, &used);
        legacy_metrics(m->legacy, &buf, &len, &used);
        if (m->has_file)
                metric(&buf, &len, &used, "# HELP npuprof_metrics_file_errors_total Writes of the metrics file that "
                                          "failed.\n# TYPE npuprof_metrics_file_errors_total counter\n"
                                          "npuprof_metrics_file_errors_total %" PRIu64 "\n",
                       m->file_errors);
        if (m->progress)
                progress_metrics(m->progress, &buf, &len, &used);
        if (m->autowin)
                auto_metrics(m->autowin, &buf, &len, &used);
        if (m->kineto)
                kineto_metrics(m->kineto, &buf, &len, &used);
        /* What moves at every sweep comes last: the file takes it at its interval. */
        size_t steady = used;
        metric(&buf, &len, &used, "# HELP npuprof_sweeps_total Sweeps of the rank table.\n"
                                  "# TYPE npuprof_sweeps_total counter\nnpuprof_sweeps_total %" PRIu64 "\n",
               m->sweep->runs);
        if (m->progress)
                rank_metrics(m->progress, &buf, &len, &used);
        if (ret_steady)
                *ret_steady = steady;
        return buf;
}
