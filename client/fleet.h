/* SPDX-License-Identifier: MIT */
/*
 * `npuprofctl fleet`: every node's record in a fleet directory (include/npuprof/fleet.h),
 * side by side. Records are grouped by the configuration file they name; in each group the
 * newest version of the file is the one with the latest mtime_ns, and a node that read
 * another is lagging. A record older than NPF_FLEET_STALE_INTERVALS of its own intervals is
 * stale (its daemon stopped, hung or cut off), one whose daemon stopped cleanly says so, and
 * one whose node finds the file invalid or missing is invalid. A file in the directory that
 * is not a record (truncated, not JSON, of another format, written in the future, too
 * large, not a regular file) is listed as unreadable with the reason and judged no further.
 */
#ifndef NPUPROF_CLIENT_FLEET_H
#define NPUPROF_CLIENT_FLEET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "npuprof/fleet.h"

#define NPF_FLEET_FUTURE_MS (5 * 60 * 1000)     /* a record written further ahead of our clock is refused */

/*
 * npf_fleet_parse() - check the record @bytes of the file @name (NODE.json) at CLOCK_REALTIME
 * @now_ms: its format, its node name against the file's, every key a reader uses, and its
 * time. Return: a new reference to the record; NULL with the reason in @why.
 */
json_t *npf_fleet_parse(const char *name, const char *bytes, size_t len, int64_t now_ms, char *why, size_t why_len);

/*
 * npf_fleet_judge() - the fleet of @dir from its records at @now_ms, as `fleet --json`
 * prints it: {dir, nodes: [...], generation, newest: [...], lagging, stale, stopped,
 * invalid, unreadable: [{file, reason}]}. Return: a new reference, or NULL with errno set
 * when @dir cannot be read.
 */
json_t *npf_fleet_judge(const char *dir, int64_t now_ms);

/* Return: 0 when every node agrees (and there is at least one), else 1. */
int npf_fleet_verdict(const json_t *fleet);

/*
 * npf_cli_fleet() - `fleet [--fleet-dir DIR] [--json] [--wait [--timeout S]]`, @argv[0]
 * "fleet"; DIR is the daemon's on @socket_path when not given.
 * Return: the exit status: 0 every node agrees, 1 one does not (or the wait timed out),
 * 2 usage, 3 DIR cannot be read or found.
 */
int npf_cli_fleet(int argc, char **argv, const char *socket_path);

#endif /* NPUPROF_CLIENT_FLEET_H */
