/* SPDX-License-Identifier: MIT */
/*
 * The control socket: a Unix stream socket speaking the protocol of
 * include/npuprof/protocol.h. Connections, caps (request size, clients, idle time, unread
 * replies) and the peer's credentials are handled here; framing and parsing are
 * daemon/request.c's; what a command means is the caller's, through npf_server_request_cb. A socket handed over by systemd
 * (sd_listen_fds) is used as it is.
 */
#ifndef NPUPROF_DAEMON_SERVER_H
#define NPUPROF_DAEMON_SERVER_H

#include "daemon/request.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

typedef struct npf_server npf_server_t;
typedef struct npf_request npf_request_t;

typedef struct npf_peer {
        pid_t pid;
        uid_t uid;
        gid_t gid;
} npf_peer_t;

typedef struct npf_server_limits {
        unsigned clients_max;           /* connections at once; one more evicts the longest idle */
        uint64_t idle_ms;               /* a connection without a complete request this long is closed */
} npf_server_limits_t;

/*
 * Called for each well-formed request of a known command. Answer with npf_server_reply() or
 * npf_server_reply_error(), now or later; until then the connection's next requests wait.
 */
typedef void (*npf_server_request_cb)(npf_request_t *req, npf_command_t command, json_t *request,
                                      const npf_peer_t *peer, void *data);

/*
 * npf_server_start() - listen on the socket systemd passed, or else bind @path (a stale
 * socket file left by a dead daemon is replaced; a live one is not), mode 0660, group
 * @group when not NULL, and serve clients within @limits. Return: 0, or -errno with the
 * reason in @err (256 bytes).
 */
int npf_server_start(uv_loop_t *loop, const char *path, const char *group, const npf_server_limits_t *limits,
                     npf_server_request_cb cb, void *data, npf_server_t **ret_server, char *err);

/* Reply with @result (a reference is stolen). Safe when the client has gone meanwhile. */
void npf_server_reply(npf_request_t *req, json_t *result);
void npf_server_reply_error(npf_request_t *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Stop listening, close every client, and remove the socket file if we made it. */
void npf_server_close(npf_server_t *s);

bool npf_server_activated(const npf_server_t *s);
unsigned npf_server_clients(const npf_server_t *s);
unsigned npf_server_clients_max(const npf_server_t *s);
/* Connections closed to admit a new one since the start. */
uint64_t npf_server_evicted(const npf_server_t *s);
/*
 * Requests answered since the start with the answer to the same request, asked after they
 * came (a read the daemon was asked again while the request waited): see server.c.
 */
uint64_t npf_server_shared(const npf_server_t *s);

#endif /* NPUPROF_DAEMON_SERVER_H */
