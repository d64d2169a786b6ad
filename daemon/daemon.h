/* SPDX-License-Identifier: MIT */
/*
 * npuprofd: one libuv loop that watches profiler_config.json, publishes each new valid
 * configuration into the node's segment, sweeps the rank table, answers the control
 * socket and speaks sd_notify. A bad file never replaces a good configuration, and nothing
 * a user or a rank writes stops the daemon.
 */
#ifndef NPUPROF_DAEMON_DAEMON_H
#define NPUPROF_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/analyze.h"
#include "daemon/fwshm.h"
#include "daemon/progress.h"

#define NPF_POLL_MS_DEFAULT 1000u
#define NPF_POLL_MS_MIN 50u
#define NPF_OUTPUT_ROOT_DEFAULT "/var/lib/npuprof/output"

typedef struct npf_daemon_options {
        const char *config_path;
        const char *shm_name;
        const char *socket_path;
        const char *socket_group;       /* NULL: the daemon's own group */
        gid_t rank_group;               /* the rank table's, mode 0660; (gid_t) -1: mode 0666 */
        const char *output_root;
        const char *metrics_path;       /* --metrics-file; NULL: none */
        uint64_t metrics_interval_ms;
        const char *fleet_dir;          /* --fleet-dir, absolute; NULL: no fleet record */
        const char *node_name;          /* the record's name in it */
        uint64_t fleet_interval_ms;
        unsigned poll_ms;
        bool inotify;
        int log_target;                 /* NPF_LOG_* */
        uint64_t stall_ms;
        npf_progress_options_t progress; /* progress stalls and slowdowns; gap_max_ms is the daemon's */
        unsigned clients_max;           /* control-socket connections at once */
        uint64_t idle_ms;               /* a connection without a request this long is closed */
        npf_analyze_options_t analyze;  /* of finished windows */
        npf_fwshm_options_t fwshm;     /* the frameworks' segments, for unmodified jobs; kinds 0: none */
        bool kineto;                    /* serve libkineto's endpoint (daemon/kineto.h) */
        const char *kineto_socket_dir;  /* NULL: its abstract name; else DIR/dynolog */
} npf_daemon_options_t;

/*
 * npf_daemon_run() - run the daemon until SIGTERM or SIGINT.
 * Return: the process exit status: 0 after a clean stop, 1 if it could not start.
 */
int npf_daemon_run(const npf_daemon_options_t *opt);

#endif /* NPUPROF_DAEMON_DAEMON_H */
