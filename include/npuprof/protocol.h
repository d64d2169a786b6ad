/* SPDX-License-Identifier: MIT */
/*
 * The control-socket protocol between npuprofd and its clients, whole.
 *
 * Transport: a Unix stream socket (default NPF_PROTO_SOCKET_DEFAULT, or $NPUPROF_SOCKET).
 * Framing: newline-delimited JSON. Each request is one line holding one object; each reply
 * is one line holding one object; a connection may carry any number of requests, answered
 * in order.
 *
 *   request:  {"version": 1, "command": "status"}
 *   reply:    {"version": 1, "ok": true, "result": {...}}
 *   error:    {"version": 1, "ok": false, "error": "what went wrong"}
 *
 * A request of another version gets an error reply naming both versions and the connection
 * is closed; so is one that is not JSON, not an object, or longer than
 * NPF_PROTO_REQUEST_MAX bytes. A connection idle for NPF_PROTO_IDLE_MS is closed.
 *
 * Commands and their results:
 *   status   {"daemon": {pid, version, uptime_s, uid, socket_activated, inotify,
 *             poll_interval_ms, output_root, stall_timeout_ms}, "shm": {name, adopted},
 *             "config": {path, generation, valid, state, error, error_count, window, dialect},
 *             "ranks": [{rank, pid, step, state, heartbeat_age_ms, generation, window, ...}],
 *             "windows": {by outcome: count}, "reloads": n}
 *            config.error is null or {message, line, column, key}; config.window is
 *            {enabled, start_step, stop_step, warmup, steps}; a rank's state is one of
 *            NPF_PROTO_RANK_STATES.
 *   ranks    {"ranks": [...]} as in status.
 *   config   {"generation": n, "config": the configuration in force (npf_conf_to_json()) or null}.
 *   reload   {"generation": n, "valid": bool, "state": "valid"|"invalid"}: the file is read again
 *            now, and the reply comes once it was. Only root or
 *            the daemon's own user may ask; others get an error naming the rule.
 *   metrics  {"text": "..."}: Prometheus text exposition format 0.0.4.
 */
#ifndef NPUPROF_PROTOCOL_H
#define NPUPROF_PROTOCOL_H

#define NPUPROF_VERSION             "0.1.0"
#define NPF_PROTO_VERSION           1
#define NPF_PROTO_SOCKET_DEFAULT    "/run/npuprof/npuprofd.sock"
#define NPF_PROTO_REQUEST_MAX       (64 * 1024)     /* bytes of one request line */
#define NPF_PROTO_CLIENTS_MAX       128             /* connections at once */
#define NPF_PROTO_IDLE_MS           30000           /* a silent connection is closed */

/* Environment variables that give every program of the project its defaults. */
#define NPF_ENV_SHM                 "NPUPROF_SHM"
#define NPF_ENV_SOCKET              "NPUPROF_SOCKET"

/* A rank's state in replies: the slot's window state, or "stalled" (collecting, no heartbeat). */
#define NPF_PROTO_RANK_STATES \
        "idle", "armed", "collecting", "flushing", "done", "missed", "failed", "filtered", "lost", "stalled"

#endif /* NPUPROF_PROTOCOL_H */
