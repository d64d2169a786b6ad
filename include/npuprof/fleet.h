/* SPDX-License-Identifier: MIT */
/*
 * The fleet record, whole: what each npuprofd started with --fleet-dir DIR keeps of its
 * node in DIR/NAME.json, and `npuprofctl fleet` reads from every node.
 *
 * DIR is shared by the nodes (the NFS or parallel file system that holds the
 * configuration). Each daemon replaces its own record whole, as a hidden temporary
 * (.NAME.json.tmp) renamed over it, whenever what it holds changes, except the steps and
 * times, which move every step, and at least every interval_s whatever happened. Readers
 * take the regular files DIR/NAME.json, NAME not starting with '.', and judge a record by
 * its content, never by the file's mtime: an NFS client's attribute cache may keep an old
 * mtime on a new file.
 *
 *   {"format": 1, "node": NAME, "state": "running" | "stopped",
 *    "written_unix_ms": N, "interval_s": S,
 *    "daemon": {"pid", "version", "started_unix_ms"},
 *    "file": {"path", "state": "valid" | "invalid" | "missing" | "unknown",
 *             "hash": "16 hex digits", "mtime_ns": N, "checked_unix_ms": N,
 *             "error": null | {"line", "column", "key", "message"}},
 *    "in_force": {"generation", "hash", "published_unix_ms"},
 *    "ranks": {"attached": N, "states": {STATE: {"count", "step_min", "step_max"}}},
 *    "windows": {"outcomes": {done, failed, missed, filtered, lost},
 *                "recent": [{rank, generation, start_step, stop_step, outcome, output}, ...]},
 *    "analysis": {queued, running, done, failed},
 *    "progress": {"ranks": N, "step_min": N | null, "step_max": N | null,
 *                 "step_time_ms": x | null, "slowdown": null | {"since_step": N, "factor": x},
 *                 "stalled": [{"rank", "step", "stalled_for_s"}, ...], "stalled_more": N,
 *                 "stepping": {"count", "step_min", "step_max"},
 *                 "laggards": [{"rank", "step"}, ...], "laggards_more": N}}
 *
 * file is the file as the daemon last read it: hash is FNV-1a 64 of its bytes (of the
 * reason when it could not be read), mtime_ns its modification time (0 when it could not
 * be read); state "unknown" until the daemon's first reading. Two nodes read the same version of a file when path, hash and mtime_ns agree;
 * the newest version of a file is the one with the latest mtime_ns (the file server's clock,
 * the same for every node), the greater hash between two of the same mtime_ns. in_force is
 * the configuration the node's ranks follow; its generation counts the node's own
 * publications, so generations are compared within a node, never across nodes. A rank
 * state (NPF_PROTO_RANK_STATES) without ranks is left out; recent holds at most
 * NPF_FLEET_RECENT windows, newest first, output an absolute directory or null. No record
 * exceeds NPF_FLEET_RECORD_MAX bytes whatever the number of ranks, and a reader takes none
 * larger. A record of another format is not read.
 *
 * progress is what daemon/progress makes of the node's ranks' steps: ranks counts those
 * with a step, step_min and step_max their range, step_time_ms the job's (the node's ranks
 * together), slowdown the one on, if any. stalled lists the ranks in a progress stall, at
 * most NPF_FLEET_LAGGARDS, lowest step first (then lowest rank), stalled_more counts the
 * rest; stepping is the count and step range of the ranks with a step that are not
 * stalled. laggards lists the ranks not stalled that are NPF_FLEET_LAG_STEPS or more behind
 * the node's fastest (ranks of a synchronous job are within a step of each other), worst
 * first, at most NPF_FLEET_LAGGARDS, laggards_more the rest. Which ranks are stalled, and
 * whether a slowdown is on and since which step, is a change that rewrites the record; the
 * steps, the step time, the factor, stalled_for_s and the laggards move with every step
 * and are written at the interval.
 */
#ifndef NPUPROF_FLEET_H
#define NPUPROF_FLEET_H

#define NPF_FLEET_FORMAT 1
#define NPF_FLEET_RECORD_MAX (64 * 1024)
#define NPF_FLEET_RECENT 5
#define NPF_FLEET_INTERVAL_S_DEFAULT 10u
#define NPF_FLEET_LAGGARDS 16           /* ranks listed in progress.stalled and progress.laggards, each */
#define NPF_FLEET_LAG_STEPS 2           /* a rank this many steps behind is a laggard */
#define NPF_FLEET_STALE_INTERVALS 3     /* a record older than this many intervals is stale */
#define NPF_FLEET_NODE_MAX 64           /* bytes of a node name: [A-Za-z0-9._-], not starting with '.' */

#endif /* NPUPROF_FLEET_H */
