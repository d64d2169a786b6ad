/* SPDX-License-Identifier: MIT */
/*
 * The control-socket protocol between npuprofd and its clients, whole.
 *
 * Transport: a Unix stream socket (default NPF_PROTO_SOCKET_DEFAULT, or $NPUPROF_SOCKET).
 * Framing: newline-delimited JSON. Each request is one line holding one object; each reply
 * is one line holding one object; a connection may carry any number of requests, answered
 * in order.
 *
 *   request:  {"version": 2, "command": "status"}
 *   reply:    {"version": 2, "ok": true, "result": {...}}
 *   error:    {"version": 2, "ok": false, "error": "what went wrong"}
 *
 * A request of another version gets an error reply naming both versions and the connection
 * is closed; so is one that is not JSON, not an object, or longer than
 * NPF_PROTO_REQUEST_MAX bytes, and a connection shut down for writing in the middle of a
 * line. A request without a command or with an unknown one gets an error reply and the
 * connection stays open.
 *
 * Abuse: a connection that completes no request for NPF_PROTO_IDLE_MS (npuprofd
 * --idle-timeout) is closed, whether it is silent or trickles a line that never ends. At
 * most NPF_PROTO_CLIENTS_MAX connections (--max-clients, and no more than the open-file
 * limit allows) are open at once; one more closes the connection that has gone longest
 * without a request, so idle or half-open clients never lock out a live one. A closed
 * idle client may find an error line saying why before the end of the stream. A client
 * that leaves more than 64 KiB of replies unread has its next requests wait (its idle
 * time runs); more than 4 MiB unread and it is dropped.
 *
 * Shared answers: the reads (status, ranks, windows, config, metrics) tell the daemon's
 * state, and an answer made after a request came is as true an answer to it as a new one.
 * So a request that waited (in a batch sent at once, or while the daemon was busy) gets,
 * to the byte, the answer made for the same request line since it came, if there is one;
 * never one made before it came. A client asking faster than the daemon answers costs it
 * one answer per batch. status daemon.clients.shared_answers counts them.
 *
 * Commands and their results:
 *   status   {"daemon": {pid, version, uptime_s, uid, socket_activated, inotify,
 *             poll_interval_ms, output_root, stall_timeout_ms, clients: {open, max, evicted,
 *             shared_answers, idle_timeout_ms}}, "shm": {name, adopted},
 *             "config": {path, generation, valid, state, error, error_count, window, dialect,
 *             ranks (the rank filter: "all" or like "0-7,16")},
 *             "ranks": {"columns": [...], "rows": [[...], ...]},
 *             "windows": {by outcome: count}, "reloads": n,
 *             "progress": {step_time_ms, slowdown: null | {since_step, factor, baseline_ms},
 *             stalled_ranks: [rank, ...], fastest_step, message}}
 *            config.error is null or {message, line, column, key}; config.window is
 *            {enabled, start_step, stop_step, warmup, steps}.
 *            ranks is the rank table, a row per rank ordered by rank, each row's values in
 *            the order of columns: rank, pid, step, state (one of NPF_PROTO_RANK_STATES),
 *            state_step, start_step and stop_step (the window; null without one),
 *            generation, heartbeat_age_ms, local_device, message, output, step_time_ms,
 *            stalled (a progress stall: no step for long, not the state "stalled") and
 *            stalled_for_s; null where not known. Version 1 sent an object per rank: at
 *            256 ranks the names were most of the reply and of its cost. npuprofctl
 *            --json prints an object per rank.
 *            progress is the job's (the node's ranks'): its step time, its slowdown, the
 *            ranks in a progress stall, the highest step, and one sentence on the stalled
 *            ranks (which are behind, who waits for them) or else on the slowdown; the
 *            daemon object has the settings stall_after_s, stall_factor, slowdown_pct and
 *            slowdown_steps (daemon/progress.h, npuprofd(8) PROGRESS).
 *            windows.recent is the newest NPF_PROTO_STATUS_RECENT entries of the window history,
 *            as in `windows`.
 *            "analysis": {enabled, analyzer, jobs, timeout_s, memory_bytes, nice, queue_max,
 *            queued, running, done, failed, dropped}: the analyzer runs (npuprof-replay).
 *   ranks    {"ranks": [...]} as in status.
 *   windows  {"windows": [{rank, pid, generation, start_step, stop_step, outcome, output,
 *             message, ended_unix_ms}, ...], "outcomes": {done, failed, missed, filtered, lost}}:
 *            every window the daemon saw end (outcome done, failed, missed, filtered or lost),
 *            newest first. The daemon keeps the last NPF_PROTO_WINDOWS_KEPT; older ones are
 *            only counted in outcomes (counts since the daemon started). output is the
 *            window directory: absolute when the prof_dir of its generation is still known
 *            (the last 16 generations), else as the rank named it (relative to prof_dir);
 *            output and message are null when the rank gave none; pid is null when the
 *            rank came and went between two sweeps. ended_unix_ms is when
 *            the daemon saw the window end (CLOCK_REALTIME, milliseconds).
 *            Each entry's analysis is null (not analysed) or {state: queued|running|done|failed,
 *            report (the report.json path, or null), reason (why it failed, or null), pid
 *            (while running), seconds}; the reply has the same "analysis" summary as status.
 *   config   {"generation": n, "config": the configuration in force (npf_conf_to_json()) or null}.
 *            Its prof_dir is the absolute directory the daemon published: the file's
 *            prof_dir resolved under the daemon's output root (status daemon.output_root).
 *   reload   {"generation": n, "valid": bool, "state": "valid"|"invalid"|"missing"}: the file is read again
 *            now, and the reply comes once it was. Only root or
 *            the daemon's own user may ask; others get an error naming the rule.
 *   metrics  {"text": "..."}: Prometheus text exposition format 0.0.4, with
 *            npuprof_analyses{state} (queued, running), npuprof_analyses_total{state} (done,
 *            failed) and npuprof_analyses_dropped_total; npuprof_rank_step{rank},
 *            npuprof_rank_step_time_seconds{rank}, npuprof_ranks_stalled,
 *            npuprof_progress_stalls_total, npuprof_slowdown and npuprof_slowdowns_total.
 */
#ifndef NPUPROF_PROTOCOL_H
#define NPUPROF_PROTOCOL_H

#define NPUPROF_VERSION             "0.1.0"
#define NPF_PROTO_VERSION           2
#define NPF_PROTO_SOCKET_DEFAULT    "/run/npuprof/npuprofd.sock"
#define NPF_PROTO_REQUEST_MAX       (64 * 1024)     /* bytes of one request line */
#define NPF_PROTO_CLIENTS_MAX       4096            /* connections at once, by default */
#define NPF_PROTO_IDLE_MS           30000           /* no complete request: closed, by default */
#define NPF_PROTO_WINDOWS_KEPT      256             /* windows the `windows` command can list */
#define NPF_PROTO_STATUS_RECENT     10              /* of them, the newest that `status` shows */

/* Environment variables that give every program of the project its defaults. */
#define NPF_ENV_SHM                 "NPUPROF_SHM"
#define NPF_ENV_SOCKET              "NPUPROF_SOCKET"

/* A rank's state in replies: the slot's window state, or "stalled" (collecting, no heartbeat). */
#define NPF_PROTO_RANK_STATES \
        "idle", "armed", "collecting", "flushing", "done", "missed", "failed", "filtered", "lost", "stalled"

#endif /* NPUPROF_PROTOCOL_H */
