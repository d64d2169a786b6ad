/* SPDX-License-Identifier: MIT */
/* npuprofctl's side of the control protocol (include/npuprof/protocol.h). */
#ifndef NPUPROF_CLIENT_IPC_H
#define NPUPROF_CLIENT_IPC_H

#include <jansson.h>

#define NPF_IPC_TIMEOUT_MS 5000
#define NPF_IPC_RELOAD_TIMEOUT_MS 60000 /* a reload waits for the file to be read, maybe over NFS */

/*
 * npf_ipc_call() - send @command to the daemon on @socket_path and wait for the reply.
 * Return: 0 and the whole reply object in @ret_reply (check its "ok"); or -errno when the
 * daemon cannot be reached or did not answer in @timeout_ms, with the reason in @err
 * (256 bytes).
 */
int npf_ipc_call(const char *socket_path, const char *command, int timeout_ms, json_t **ret_reply, char *err);

#endif /* NPUPROF_CLIENT_IPC_H */
