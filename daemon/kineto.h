/* SPDX-License-Identifier: MIT */
/*
 * The endpoint libkineto polls: unmodified PyTorch jobs started with KINETO_USE_DAEMON=1
 * ask the node's daemon every few seconds for an on-demand trace (lib/kinetoipc.h), as
 * they ask Meta's dynolog; npuprofd answers them from profiler_config.json.
 *
 * Every process that polls is a client of the node, known by its socket's name (a UUID of
 * its own): its pid and its ancestors' as it sent them, its pid here (the kernel's
 * credentials of each datagram, SO_PASSCRED), its user, job id, rank (RANK in its
 * environment, where the daemon may read it), its last poll and the windows it was given.
 * Clients silent for 60 s are forgotten, as dynolog forgets them
 * (LibkinetoConfigManager.cpp:28, 124-196).
 *
 * Each generation in force that is a window is given to each client once, when its request
 * says it can take one (the ACTIVITIES bit: libkineto is not tracing) and the rank filter
 * selects it, and never while a window given before has not ended: libkineto ignores a
 * request while another is pending (AsyncActivityProfilerHandler.cpp:84-96). The daemon
 * makes the window's directory below the configuration's prof_dir, names the trace file
 * there (conf/kineto.h), and watches for the trace libkineto writes (renamed into place
 * whole: output_json.cpp:1066-1106). A trace that lands is done: the daemon writes its
 * manifest.json and the window is recorded and analysed like a rank's; a client that
 * leaves, or that says it is idle again after tracing, without a trace there, has lost it,
 * with the reason.
 *
 * Hostile datagrams cost a read and a count each: the socket is read at most
 * NPF_KINETO_READS_PER_WAKEUP times a wakeup, answers are sent without waiting (a client
 * that does not read loses its answer), and the clients kept are bounded.
 */
#ifndef NPUPROF_DAEMON_KINETO_H
#define NPUPROF_DAEMON_KINETO_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "daemon/sweep.h"
#include "npuprof/shm.h"

#define NPF_KINETO_CLIENTS_MAX    1024u         /* clients kept at once */
#define NPF_KINETO_EXPIRE_MS      60000u        /* dynolog's kKeepAliveTimeSecs */
#define NPF_KINETO_READS_PER_WAKEUP 256u
#define NPF_KINETO_LEAD_MS        12000u        /* a window bounded by time starts this long after its publication */
#define NPF_KINETO_WARMUP_MS      5000u         /* libkineto's default ACTIVITIES_WARMUP_PERIOD_SECS */
/*
 * libkineto waits about 90 ms for an answer (9 tries 10 ms apart: IpcFabricConfigClient.cpp
 * 98-99 and 185, FabricManager.h:205-214); one that comes later is read at its next poll as
 * that poll's, and every later answer one poll late. A request that waited in the socket
 * longer than this (the kernel's receive time, SO_TIMESTAMPNS) is not answered: libkineto
 * takes the silence for "nothing", and the next poll gets the window, in step.
 */
#define NPF_KINETO_ANSWER_MS      50u

typedef struct npf_kineto_options {
        const char *socket_dir;         /* NULL or "": the abstract name "\0dynolog\0"; else DIR/dynolog */
        gid_t group;                    /* with socket_dir: the socket's group, mode 0660; (gid_t) -1: mode 0666 */
        const char *node;               /* this node's name, in trace ids */
        /* A window of a client ended (done, lost, failed, missed, filtered): to be recorded. */
        void (*ended)(const npf_window_record_t *rec, void *data);
        void *data;
} npf_kineto_options_t;

typedef struct npf_kineto npf_kineto_t;

/*
 * npf_kineto_new() - bind the endpoint and read it from @loop.
 * Return: 0; -EADDRINUSE when another daemon (dynolog, or another npuprofd) has the name;
 * or another -errno; @err (of @err_len bytes) says what failed.
 */
int npf_kineto_new(uv_loop_t *loop, const npf_kineto_options_t *o, npf_kineto_t **ret, char *err, size_t err_len);

/* The configuration now in force (copied), or NULL while the file is broken: no new window. */
void npf_kineto_publish(npf_kineto_t *k, const npf_shm_config_t *c);

/* At each sweep: traces that landed, windows that were lost, clients gone. */
void npf_kineto_sweep(npf_kineto_t *k);

/*
 * The endpoint, its counts and its clients, for status: {endpoint, clients: [{pid, host_pid,
 * uid, jobid, rank, pids, polls, last_poll_ms_ago, tracing, windows_given, window}], counts}.
 * Return: a new reference.
 */
json_t *npf_kineto_status_json(const npf_kineto_t *k);

/* The counts, for the metrics: clients now, requests, configurations given, datagrams refused. */
typedef struct npf_kineto_counts {
        uint64_t clients, requests, given, refused, traces, lost;
} npf_kineto_counts_t;
void npf_kineto_counts(const npf_kineto_t *k, npf_kineto_counts_t *ret);

/* Close the socket (removing its file) and free @k; accepts NULL. */
void npf_kineto_close(npf_kineto_t *k);

#endif /* NPUPROF_DAEMON_KINETO_H */
