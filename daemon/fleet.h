/* SPDX-License-Identifier: MIT */
/*
 * The node's fleet record (--fleet-dir): what this daemon holds, summarised for the
 * operator of many nodes, kept in DIR/NODE.json (include/npuprof/fleet.h) through
 * daemon/keptfile. It is written when what it holds changes, the steps and times aside,
 * and at least every interval; the last write, on a clean stop, says "stopped".
 */
#ifndef NPUPROF_DAEMON_FLEET_H
#define NPUPROF_DAEMON_FLEET_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "npuprof/fleet.h"
#include "npuprof/shm.h"

/* The node as the daemon sees it now; the json_t members are new references the record takes. */
typedef struct npf_fleet_node {
        bool stopping;
        uint64_t started_real_ns;
        const char *config_path;
        const npf_shm_status_t *file;   /* the file as last read: state, first error, when */
        uint64_t read_hash;             /* of the bytes last read (watch) */
        uint64_t read_mtime_ns;         /* their modification time; 0: not read */
        uint64_t generation;            /* in force; 0: none */
        uint64_t in_force_hash;         /* of the bytes of the configuration in force */
        uint64_t published_ns;          /* CLOCK_REALTIME of its publication */
        json_t *ranks;                  /* the rank table, conf/view's {columns, rows} */
        json_t *outcomes;               /* windows ended by outcome */
        json_t *recent;                 /* the newest windows, as the protocol's history */
        json_t *analysis;               /* the analyzer's summary */
        json_t *progress;               /* daemon/progress's npf_progress_json(); NULL: none */
        json_t *autowin;                /* daemon/autowin's npf_autowin_json(); NULL: none */
} npf_fleet_node_t;

/* Fill @ret_node (zeroed) with the node now. */
typedef void (*npf_fleet_node_fn)(void *data, npf_fleet_node_t *ret_node);

typedef struct npf_fleet npf_fleet_t;

/*
 * npf_fleet_record_json() - the record of @node (a valid node name) for @n, written at
 * CLOCK_REALTIME @now_ns; takes @n's references. @ret_key, when not NULL, gets what the
 * record holds less its steps and times, as a string to compare (malloc'd).
 * Return: a new reference no larger, dumped, than NPF_FLEET_RECORD_MAX; NULL out of memory.
 */
json_t *npf_fleet_record_json(const char *node, uint64_t interval_ms, npf_fleet_node_t *n, uint64_t now_ns,
                              char **ret_key);

/* Return: true if @name may name a node: 1 to NPF_FLEET_NODE_MAX - 1 of [A-Za-z0-9._-], no leading '.'. */
bool npf_fleet_node_name_ok(const char *name);

/*
 * npf_fleet_new() - keep @dir/@node.json (@dir absolute) for the node @fn describes, every
 * @interval_ms at least; the first write is queued at once.
 * Return: 0 and the keeper in @ret_fleet, or -errno.
 */
int npf_fleet_new(uv_loop_t *loop, const char *dir, const char *node, uint64_t interval_ms, npf_fleet_node_fn fn,
                  void *data, npf_fleet_t **ret_fleet);

/* The node may have changed: write the record if what it holds did, its steps and times aside. */
void npf_fleet_update(npf_fleet_t *f);

/* {dir, node, path, interval_s, writes, errors, last_error}, for status. */
json_t *npf_fleet_status_json(const npf_fleet_t *f);

/* Write the record one last time (the node stopping) and free the keeper after. Accepts NULL. */
void npf_fleet_close(npf_fleet_t *f);

#endif /* NPUPROF_DAEMON_FLEET_H */
