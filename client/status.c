/* SPDX-License-Identifier: MIT */
#include "client/status.h"
#include "client/ipc.h"
#include "client/progress.h"
#include "npuprof/protocol.h"
#include "npuprof/shm.h"
#include "lib/clock.h"
#include "conf/view.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str(const json_t *o, const char *key, const char *none)
{
        const char *s = json_string_value(json_object_get(o, key));

        return s ? s : none;
}

static json_int_t num(const json_t *o, const char *key)
{
        return json_integer_value(json_object_get(o, key));
}

static void print_json(json_t *o)
{
        /* 15 digits: what the daemon sent, not 20.091000000000001. */
        char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15));

        if (s)
                puts(s);
        free(s);
}

static void print_duration(json_int_t s)
{
        if (s >= 86400)
                printf("%lldd%02lldh", (long long) s / 86400, (long long) s % 86400 / 3600);
        else if (s >= 3600)
                printf("%lldh%02lldm", (long long) s / 3600, (long long) s % 3600 / 60);
        else if (s >= 60)
                printf("%lldm%02llds", (long long) s / 60, (long long) s % 60);
        else
                printf("%llds", (long long) s);
}

void npf_cli_print_window(FILE *f, const json_t *w)
{
        json_t *start = json_object_get(w, "start_step"), *stop = json_object_get(w, "stop_step");

        if (!json_is_true(json_object_get(w, "enabled"))) {
                fprintf(f, "none (profiling off)");
                return;
        }
        bool timed = json_is_integer(json_object_get(w, "duration_ms"));

        if (json_is_string(start))
                fprintf(f, "from the next step");
        else
                fprintf(f, timed ? "from step %lld" : "steps %lld", (long long) json_integer_value(start));
        if (timed)
                fprintf(f, " for %lld ms", (long long) num(w, "duration_ms"));
        else if (json_is_integer(stop))
                fprintf(f, "..%lld", (long long) json_integer_value(stop));
        else
                fprintf(f, ", %lld steps", (long long) num(w, "steps"));
}

static void print_config(json_t *c)
{
        json_t *err = json_object_get(c, "error");

        if (json_object_get(c, "unreadable")) {
                printf("config:  unreadable: %s\n", str(c, "unreadable", ""));
                return;
        }
        printf("config:  %s", str(c, "path", "?"));
        if (json_is_string(json_object_get(c, "dialect")))
                printf(" (%s)", str(c, "dialect", ""));
        printf(", generation %lld, %s\n", (long long) num(c, "generation"), str(c, "state", "unknown"));
        if (json_is_object(err)) {
                printf("         error: ");
                if (json_is_integer(json_object_get(err, "line")))
                        printf("line %lld, column %lld: ", (long long) num(err, "line"), (long long) num(err, "column"));
                if (json_is_string(json_object_get(err, "key")))
                        printf("%s: ", str(err, "key", ""));
                printf("%s\n", str(err, "message", ""));
                if (num(c, "generation") > 0)
                        printf("         the last good configuration (generation %lld) stays in force\n",
                               (long long) num(c, "generation"));
                else
                        printf("         no configuration was ever valid: profiling stays off\n");
        }
        printf("window:  ");
        npf_cli_print_window(stdout, json_object_get(c, "window"));
        if (json_is_true(json_object_get(json_object_get(c, "window"), "enabled")))
                printf(", %s%s", strcmp(str(c, "ranks", "all"), "all") ? "ranks " : "",
                       strcmp(str(c, "ranks", "all"), "all") ? str(c, "ranks", "") : "every rank");
        printf("\n");
}

/*
 * The rank table, then the job's progress under it (client/progress.h): always with
 * @always_progress, else only when the reply has a @progress.
 */
static void print_ranks(json_t *ranks, json_t *progress, bool always_progress)
{
        size_t i, stalled = 0;
        json_t *r;

        if (!json_is_array(ranks)) {
                printf("ranks:   the reply holds no readable rank table\n");
                return;
        }
        json_array_foreach(ranks, i, r)
                stalled += npf_cli_rank_stalled(r);
        printf("ranks:   %zu attached", json_array_size(ranks));
        if (stalled)
                printf(", %zu stalled", stalled);
        printf("\n");
        if (json_array_size(ranks) == 0)
                return;
        printf("  %6s %8s %10s  %-11s %9s %9s  %-14s %s\n", "RANK", "PID", "STEP", "STATE", "STEP TIME", "HEARTBEAT",
               "WINDOW", "GEN");
        json_array_foreach(ranks, i, r) {
                json_t *step = json_object_get(r, "step"), *age = json_object_get(r, "heartbeat_age_ms");
                json_t *pid = json_object_get(r, "pid");
                char win[64] = "-", hb[32] = "-", st[32] = "-", pd[32] = "-", stt[NPF_CLI_TIME_MAX];
                if (json_is_integer(json_object_get(r, "start_step")))
                        snprintf(win, sizeof(win), "%lld..%lld", (long long) num(r, "start_step"),
                                 (long long) num(r, "stop_step"));
                if (json_is_integer(age))
                        snprintf(hb, sizeof(hb), "%.1fs", (double) json_integer_value(age) / 1000.0);
                if (json_is_integer(step))
                        snprintf(st, sizeof(st), "%lld", (long long) json_integer_value(step));
                /* A rank in a pid namespace the reader cannot see into has no pid here. */
                if (json_is_integer(pid))
                        snprintf(pd, sizeof(pd), "%lld", (long long) json_integer_value(pid));
                printf("  %6lld %8s %10s  %-11s %9s %9s  %-14s %lld", (long long) num(r, "rank"), pd, st,
                       str(r, "state", "?"), npf_cli_step_time(json_object_get(r, "step_time_ms"), false, stt), hb,
                       win, (long long) num(r, "generation"));
                if (json_is_string(json_object_get(r, "state_step")) || json_is_integer(json_object_get(r, "state_step"))) {
                        if (strcmp(str(r, "state", ""), "missed") == 0)
                                printf("  (was at step %lld)", (long long) num(r, "state_step"));
                }
                npf_cli_print_stalled(stdout, r);
                if (json_is_string(json_object_get(r, "message"))) {
                        printf("  ");
                        npf_cli_print_text(stdout, str(r, "message", ""));
                }
                printf("\n");
        }
        if (always_progress || progress)
                npf_cli_print_progress(stdout, progress, ranks);
}

/* "analyses: 1 queued, 1 running, 4 done, 0 failed", or that there are none. */
static void print_analyses(json_t *a)
{
        if (!json_is_object(a))
                return;
        if (!json_is_true(json_object_get(a, "enabled"))) {
                printf("analyses: off (npuprofd --analyze-jobs 0)\n");
                return;
        }
        printf("analyses: %lld queued, %lld running, %lld done, %lld failed", (long long) num(a, "queued"),
               (long long) num(a, "running"), (long long) num(a, "done"), (long long) num(a, "failed"));
        if (num(a, "dropped") > 0)
                printf(" (%lld of them dropped from a full queue of %lld)", (long long) num(a, "dropped"),
                       (long long) num(a, "queue_max"));
        printf("\n");
}

/* A window's analysis in a few words: "-" when it has none. */
static const char *analysis_state(json_t *w)
{
        return str(json_object_get(w, "analysis"), "state", "-");
}

/* Under a window's row: where its report is, or why its analysis failed. */
static void print_analysis_detail(json_t *w, int indent)
{
        json_t *an = json_object_get(w, "analysis");
        const char *state = str(an, "state", "");

        const json_t *a;
        size_t i;

        if (strcmp(state, "done") == 0)
                printf("%*sreport: %s (%.1f s)\n", indent, "", str(an, "report", "?"),
                       json_number_value(json_object_get(an, "seconds")));
        else if (strcmp(state, "failed") == 0)
                printf("%*sfailed: %s\n", indent, "", str(an, "reason", "?"));
        /* Then the report's answers: what the accelerators did. */
        json_array_foreach (json_object_get(an, "answers"), i, a)
                if (json_is_string(a))
                        printf("%*s%s\n", indent, "", json_string_value(a));
        /* A failure that still wrote a report of what could be analysed. */
        if (strcmp(state, "failed") == 0 && json_is_string(json_object_get(an, "report")))
                printf("%*sreport: %s\n", indent, "", str(an, "report", "?"));
}

static void print_windows(json_t *w)
{
        static const char *const outcomes[] = { "done", "failed", "missed", "filtered", "lost" };

        printf("windows:");
        for (size_t i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++)
                printf(" %s %lld%s", outcomes[i], (long long) num(w, outcomes[i]), i + 1 < 5 ? "," : "\n");
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(w, "recent"), i, r) {
                if (i >= NPF_PROTO_STATUS_RECENT)
                        break;
                printf("  rank %lld window %lld..%lld gen %lld: %s%s%s", (long long) num(r, "rank"),
                       (long long) num(r, "start_step"), (long long) num(r, "stop_step"),
                       (long long) num(r, "generation"), str(r, "outcome", "?"),
                       json_is_string(json_object_get(r, "output")) ? "  " : "", str(r, "output", ""));
                if (json_is_object(json_object_get(r, "analysis")))
                        printf("  (analysis %s)", analysis_state(r));
                printf("\n");
                if (json_is_string(json_object_get(r, "reason")))
                        printf("    why: %s\n", str(r, "reason", ""));
                print_analysis_detail(r, 4);
        }
}

/* `windows`: every window the daemon saw end, newest first, then the counts by outcome. */
static void print_window_list(json_t *res)
{
        static const char *const outcomes[] = { "done", "failed", "missed", "filtered", "lost" };
        json_t *list = json_object_get(res, "windows"), *w, *counts = json_object_get(res, "outcomes");
        size_t i;

        if (json_array_size(list) == 0) {
                printf("no window has ended yet\n");
        } else {
                printf("%6s %6s  %-17s %-9s %-9s %s\n", "RANK", "GEN", "WINDOW", "OUTCOME", "ANALYSIS",
                       "DIRECTORY / MESSAGE");
                json_array_foreach(list, i, w) {
                        char win[48];
                        snprintf(win, sizeof(win), "%lld..%lld", (long long) num(w, "start_step"),
                                 (long long) num(w, "stop_step"));
                        printf("%6lld %6lld  %-17s %-9s %-9s %s", (long long) num(w, "rank"),
                               (long long) num(w, "generation"), win, str(w, "outcome", "?"), analysis_state(w),
                               str(w, "output", "-"));
                        if (json_is_string(json_object_get(w, "message")))
                                printf("  (%s)", str(w, "message", ""));
                        printf("\n");
                        if (json_is_string(json_object_get(w, "reason")))
                                printf("%43swhy: %s\n", "", str(w, "reason", ""));
                        print_analysis_detail(w, 43);
                }
        }
        /* Each generation's cluster analysis, once every window of it on the node has ended. */
        json_array_foreach(json_object_get(res, "clusters"), i, w) {
                printf("cluster of generation %lld: %s\n", (long long) num(w, "generation"), analysis_state(w));
                print_analysis_detail(w, 4);
        }
        printf("windows:");
        for (size_t k = 0; k < sizeof(outcomes) / sizeof(outcomes[0]); k++)
                printf(" %s %lld%s", outcomes[k], (long long) num(counts, outcomes[k]), k + 1 < 5 ? "," : "\n");
        print_analyses(json_object_get(res, "analysis"));
}

/* What the daemon does by itself (the configuration's "auto"), and what it did. */
static void print_auto(json_t *a)
{
        json_t *policy = json_object_get(a, "policy"), *last = json_object_get(a, "last"), *q;
        json_t *slow = json_object_get(policy, "on_slowdown"), *stall = json_object_get(policy, "on_stall");
        size_t i;

        if (!json_is_object(a))
                return;
        if (!json_is_object(policy)) {
                printf("auto:    off (no \"auto\" in the configuration)\n");
                return;
        }
        printf("auto:   ");
        if (json_is_object(slow))
                printf(" a window of %lld steps on a slowdown;", (long long) num(slow, "steps"));
        if (json_is_object(stall))
                printf(" stacks of ranks stalled %lld s;", (long long) num(stall, "after_s"));
        printf(" cooldown %lld s, at most %lld a day; %lld window%s opened, %lld rank%s asked for stacks\n",
               (long long) num(policy, "cooldown_s"), (long long) num(policy, "max_per_day"),
               (long long) num(a, "windows"), num(a, "windows") == 1 ? "" : "s", (long long) num(a, "stacks_asked"),
               num(a, "stacks_asked") == 1 ? "" : "s");
        if (json_is_object(last))
                printf("  last: %s\n", str(last, "reason", "?"));
        json_array_foreach(json_object_get(a, "stacks"), i, q) {
                if (i >= NPF_PROTO_STATUS_RECENT)
                        break;
                printf("  stacks of rank %lld (pid %lld): %s  %s%s%s\n", (long long) num(q, "rank"),
                       (long long) num(q, "pid"), str(q, "state", "?"), str(q, "path", ""),
                       json_is_string(json_object_get(q, "error")) ? ": " : "", str(q, "error", ""));
        }
}

/* The frameworks' segments: each publisher's objects, and the unmodified jobs that map them. */
static void print_fwshm(json_t *fwshm)
{
        json_t *pubs = json_object_get(fwshm, "publishers"), *p, *x;
        size_t i, k;

        if (!json_is_array(pubs))
                return;
        json_array_foreach(pubs, i, p) {
                json_t *objs = json_object_get(p, "objects"), *procs = json_object_get(p, "processes");
                printf("legacy:  %s, %zu object%s, %zu process%s attached\n", str(p, "publisher", "?"),
                       json_array_size(objs), json_array_size(objs) == 1 ? "" : "s", json_array_size(procs),
                       json_array_size(procs) == 1 ? "" : "es");
                if (json_is_string(json_object_get(p, "note")))
                        printf("    note: %s\n", str(p, "note", ""));
                json_array_foreach(objs, k, x) {
                        if (json_is_string(json_object_get(x, "error")))
                                printf("    %-32s NOT DRIVEN: %s\n", str(x, "name", "?"),
                                       str(x, "why", str(x, "error", "")));
                        else
                                printf("    %-32s %s%s%s\n", str(x, "name", "?"),
                                       json_is_true(json_object_get(x, "current")) ? "current" : "not yet written",
                                       json_is_true(json_object_get(x, "owned")) ? "" : ", made by a job",
                                       json_is_true(json_object_get(x, "via_opener")) ? " (opened by npuprof-shmopen)"
                                                                                      : "");
                }
                json_array_foreach(procs, k, x)
                        printf("    pid %-8lld %-16s %s\n", (long long) num(x, "pid"), str(x, "command", "?"),
                               str(x, "object", "?"));
        }
        json_t *opener = json_object_get(fwshm, "opener");
        if (json_is_string(json_object_get(opener, "error")))
                printf("    shm opener %s: %s\n", str(opener, "socket", "?"), str(opener, "error", ""));
        if (num(fwshm, "maps_unreadable") > 0)
                printf("    (%lld processes could not be looked into: their /proc/PID/maps is not readable)\n",
                       (long long) num(fwshm, "maps_unreadable"));
}

/* A file the daemon keeps (the metrics file, the fleet record): where, how often, how it goes. */
/* libkineto's endpoint: the PyTorch processes that poll it, each with its window. */
static void print_kineto(json_t *k)
{
        json_t *clients = json_object_get(k, "clients"), *counts = json_object_get(k, "counts"), *c;
        size_t i;

        if (!json_is_object(k))
                return;
        if (json_is_string(json_object_get(k, "off"))) {
                printf("libkineto: not served: %s\n", str(k, "off", "?"));
                return;
        }
        printf("libkineto: %s, %zu process%s polling; %lld window%s given, %lld traced, %lld lost",
               str(k, "endpoint", "?"), json_array_size(clients), json_array_size(clients) == 1 ? "" : "es",
               (long long) num(counts, "given"), num(counts, "given") == 1 ? "" : "s", (long long) num(counts, "traces"),
               (long long) num(counts, "lost"));
        if (num(counts, "malformed") || num(counts, "unknown_types"))
                printf("; %lld malformed datagram%s (last: %s)", (long long) num(counts, "malformed"),
                       num(counts, "malformed") == 1 ? "" : "s", str(k, "last_malformed", "?"));
        printf("\n");
        json_array_foreach(clients, i, c) {
                json_t *w = json_object_get(c, "window"), *rank = json_object_get(c, "rank");
                char who[64];
                if (json_is_integer(rank))
                        snprintf(who, sizeof(who), "rank %lld", (long long) json_integer_value(rank));
                else
                        snprintf(who, sizeof(who), "rank ?");
                printf("  pid %lld", (long long) num(c, "pid"));
                if (json_is_integer(json_object_get(c, "host_pid")) && num(c, "host_pid") != num(c, "pid"))
                        printf(" (%lld here)", (long long) num(c, "host_pid"));
                printf("  %s  job %lld  last poll %lld ms ago%s", who, (long long) num(c, "jobid"),
                       (long long) num(c, "last_poll_ms_ago"), json_is_true(json_object_get(c, "tracing")) ? ", tracing" : "");
                if (json_is_object(w))
                        printf("  window of generation %lld %s: %s", (long long) num(w, "generation"), str(w, "state", "?"),
                               str(w, "trace", "?"));
                printf("\n");
                if (!json_is_integer(rank) && json_is_string(json_object_get(c, "rank_unknown")))
                        printf("    rank unknown: %s\n", str(c, "rank_unknown", ""));
        }
}

static void print_kept(const char *label, json_t *k)
{
        if (!json_is_object(k))
                return;
        printf("%s %s, every %g s, %lld write%s", label, str(k, "path", "?"),
               json_real_value(json_object_get(k, "interval_s")), (long long) num(k, "writes"),
               num(k, "writes") == 1 ? "" : "s");
        if (num(k, "errors"))
                printf(", %lld failed (last: %s)", (long long) num(k, "errors"), str(k, "last_error", "none since"));
        printf("\n");
}

/* The rank table in @o, sent as rows, made an object per rank (null if unreadable). */
static void expand_ranks(json_t *o)
{
        json_t *table = json_object_get(o, "ranks");

        if (table) {
                json_t *list = npf_view_table_objects(table);
                json_object_set_new(o, "ranks", list ? list : json_null());
        }
}

/* What a person can do when segment @shm_name cannot be opened with @r, or NULL. */
static const char *segment_fix(int r)
{
        switch (r) {
        case -ENOENT:
                return "no npuprofd has made it on this node: start npuprofd (systemctl start npuprofd.socket), "
                       "or name the segment it serves with --shm-name NAME or NPUPROF_SHM";
        case -EACCES:
                return "its rank table is its group's alone (npuprofd --rank-group): run as root or as a member "
                       "of that group";
        default:
                return NULL;
        }
}

json_t *npf_cli_segment_view(const char *shm_name)
{
        char err[NPF_SHM_ERR_MAX];
        npf_shm_t *shm;
        int r = npf_shm_open(shm_name, NPF_SHM_RDONLY, &shm, err);

        if (r < 0) {
                const char *fix = segment_fix(r);
                return fix ? json_pack("{s:s, s:s, s:s}", "name", shm_name, "error", err, "fix", fix)
                           : json_pack("{s:s, s:s}", "name", shm_name, "error", err);
        }
        json_t *o = json_pack("{s:s, s:o, s:o}", "name", shm_name, "config", npf_view_config(npf_shm_ctl(shm)),
                              "ranks", npf_view_ranks(shm, npf_clock_ns(CLOCK_MONOTONIC), NPF_STALL_MS_DEFAULT,
                                              NULL, NULL));
        npf_shm_close(shm);
        expand_ranks(o);
        return o;
}

int npf_cli_status(const char *socket_path, const char *shm_name, bool json)
{
        char err[256];
        json_t *reply = NULL;
        int r = npf_ipc_call(socket_path, "status", NPF_IPC_TIMEOUT_MS, &reply, err);

        if (r < 0) {
                json_t *seg = npf_cli_segment_view(shm_name);
                if (json) {
                        json_t *cfg = json_object_get(seg, "config"), *ranks = json_object_get(seg, "ranks");
                        json_t *o = json_pack("{s:n, s:s, s:{s:s, s:o}, s:o, s:o}", "daemon", "daemon_error", err, "shm",
                                              "name", shm_name, "error", json_object_get(seg, "error")
                                                                        ? json_incref(json_object_get(seg, "error"))
                                                                        : json_null(),
                                              "config", cfg ? json_incref(cfg) : json_null(),
                                              "ranks", ranks ? json_incref(ranks) : json_array());
                        print_json(o);
                        json_decref(o);
                } else {
                        char fix[NPF_IPC_FIX_MAX];
                        printf("npuprofd: not reachable: %s\n", err);
                        if (npf_ipc_fix(r, socket_path, fix))
                                printf("          %s\n", fix);
                        if (json_object_get(seg, "error")) {
                                printf("shm:     %s\n", str(seg, "error", ""));
                                if (json_object_get(seg, "fix"))
                                        printf("         %s\n", str(seg, "fix", ""));
                        } else {
                                printf("shm:     %s (read directly, read-only)\n", shm_name);
                                print_config(json_object_get(seg, "config"));
                                print_ranks(json_object_get(seg, "ranks"), NULL, true);
                        }
                }
                json_decref(seg);
                return NPF_EXIT_UNREACHABLE;
        }
        if (!json_is_true(json_object_get(reply, "ok"))) {
                fprintf(stderr, "npuprofctl status: %s\n", str(reply, "error", "the daemon refused"));
                json_decref(reply);
                return 1;
        }
        json_t *res = json_object_get(reply, "result");
        expand_ranks(res);
        if (json) {
                print_json(res);
        } else {
                json_t *dm = json_object_get(res, "daemon"), *shm = json_object_get(res, "shm");
                printf("npuprofd: running, pid %lld, version %s, up ", (long long) num(dm, "pid"),
                       str(dm, "version", "?"));
                print_duration(num(dm, "uptime_s"));
                printf("%s\n", json_is_true(json_object_get(dm, "socket_activated")) ? ", socket-activated" : "");
                printf("shm:     %s%s\n", str(shm, "name", "?"),
                       json_is_true(json_object_get(shm, "adopted")) ? " (adopted from an earlier daemon)" : "");
                print_config(json_object_get(res, "config"));
                print_ranks(json_object_get(res, "ranks"), json_object_get(res, "progress"), true);
                print_windows(json_object_get(res, "windows"));
                print_auto(json_object_get(res, "auto"));
                print_analyses(json_object_get(res, "analysis"));
                print_fwshm(json_object_get(res, "legacy"));
                print_kineto(json_object_get(res, "kineto"));
                print_kept("metrics:", json_object_get(dm, "metrics_file"));
                print_kept("fleet:  ", json_object_get(dm, "fleet"));
        }
        json_decref(reply);
        return 0;
}

/* A failed command's one JSON object. */
static void print_error_json(const char *command, const char *error, bool unreachable)
{
        json_t *o = json_pack("{s:s, s:s, s:b}", "command", command, "error", error, "unreachable", unreachable);

        print_json(o);
        json_decref(o);
}

int npf_cli_command(const char *socket_path, const char *command, bool json)
{
        char err[256];
        json_t *reply = NULL;
        int r = npf_ipc_call(socket_path, command,
                             strcmp(command, "reload") == 0 ? NPF_IPC_RELOAD_TIMEOUT_MS : NPF_IPC_TIMEOUT_MS, &reply, err);

        if (r < 0) {
                char fix[NPF_IPC_FIX_MAX];
                const char *how = npf_ipc_fix(r, socket_path, fix);
                fprintf(stderr, "npuprofctl %s: the daemon is not reachable: %s%s%s\n", command, err, how ? "; " : "",
                        how ? how : "");
                if (json)
                        print_error_json(command, err, true);
                return NPF_EXIT_UNREACHABLE;
        }
        if (!json_is_true(json_object_get(reply, "ok"))) {
                fprintf(stderr, "npuprofctl %s: %s\n", command, str(reply, "error", "the daemon refused"));
                if (json)
                        print_error_json(command, str(reply, "error", "the daemon refused"), false);
                json_decref(reply);
                return 1;
        }
        json_t *res = json_object_get(reply, "result");
        bool refused = strcmp(command, "reload") == 0 && !json_is_true(json_object_get(res, "valid"));

        if (strcmp(command, "ranks") == 0)
                expand_ranks(res);

        if (json)
                print_json(res);
        else if (strcmp(command, "metrics") == 0)
                fputs(str(res, "text", ""), stdout);
        else if (strcmp(command, "ranks") == 0)
                print_ranks(json_object_get(res, "ranks"), json_object_get(res, "progress"), false);
        else if (strcmp(command, "windows") == 0)
                print_window_list(res);
        else if (strcmp(command, "reload") == 0)
                printf("reloaded: generation %lld, file %s\n", (long long) num(res, "generation"), str(res, "state", "?"));
        else
                print_json(res);
        /* A reload that found the file broken did not do what was asked: the exit code says so. */
        if (refused && !json)
                fprintf(stderr, "npuprofctl reload: the file is %s; generation %lld stays in force "
                        "(npuprofctl status shows why)\n", str(res, "state", "invalid"), (long long) num(res, "generation"));
        json_decref(reply);
        return refused ? 1 : 0;
}
