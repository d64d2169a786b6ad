/* SPDX-License-Identifier: MIT */
/* npuprofctl's side of the control protocol (include/npuprof/protocol.h). */
#ifndef NPUPROF_CLIENT_IPC_H
#define NPUPROF_CLIENT_IPC_H

#include <jansson.h>

#define NPF_IPC_TIMEOUT_MS 5000
#define NPF_IPC_RELOAD_TIMEOUT_MS 60000 /* a reload waits for the file to be read, maybe over NFS */
#define NPF_IPC_FIX_MAX 320             /* bytes of npf_ipc_fix()'s sentence */

/*
 * npf_ipc_call() - send @command to the daemon on @socket_path and wait for the reply.
 * Return: 0 and the whole reply object in @ret_reply (check its "ok"); or -errno when the
 * daemon cannot be reached or did not answer in @timeout_ms, with the reason in @err
 * (256 bytes).
 */
int npf_ipc_call(const char *socket_path, const char *command, int timeout_ms, json_t **ret_reply, char *err);

/*
 * npf_ipc_fix() - what a person can do when npf_ipc_call() could not reach @socket_path
 * and returned @r: start the daemon or name its socket (no socket, nobody listening), join
 * the socket's group or run as root (permission denied).
 * Return: @buf, holding that sentence (NPF_IPC_FIX_MAX bytes), or NULL when there is none
 * to give for @r.
 */
const char *npf_ipc_fix(int r, const char *socket_path, char *buf);

#endif /* NPUPROF_CLIENT_IPC_H */
