/* SPDX-License-Identifier: MIT */
/*
 * The shm opener's protocol: how npuprofd, which runs with no privilege, is handed a
 * descriptor of a framework's object that a job of another user made (mode 0600, the job's
 * own), by npuprof-shmopen, the one privileged program of the package.
 *
 * A request is one SOCK_SEQPACKET message: the object's name, no '/' and no NUL. The reply
 * is one message of an int32_t, 0 with the descriptor (SCM_RIGHTS, opened read-write), or a
 * positive errno and nothing else. The opener answers only for the frameworks' names
 * (npf_shmopen_name_ok()): DynamicProfileNpuShm<10 digits> (torch_npu) and
 * DynamicProfileShm<10 digits> (MindSpore), regular files of at most NPF_SHMOPEN_SIZE_MAX
 * bytes in the shm directory, never through a symbolic link.
 */
#ifndef NPUPROF_LIB_SHMOPEN_H
#define NPUPROF_LIB_SHMOPEN_H

#include <stdbool.h>
#include <stddef.h>

#define NPF_SHMOPEN_SOCKET "/run/npuprof-shmopen.sock"
#define NPF_SHMOPEN_NAME_MAX 63u
#define NPF_SHMOPEN_SIZE_MAX (1u << 20)         /* the frameworks make 1 MiB (torch_npu) or 28 bytes */
#define NPF_SHMOPEN_TIMEOUT_MS 2000u            /* a reply, the opener's start by systemd included */

/* Whether @name is a framework's object that the opener may open. */
bool npf_shmopen_name_ok(const char *name);

/*
 * npf_shmopen_connect() - a connection to the opener listening at @path, with send and
 * receive timeouts of NPF_SHMOPEN_TIMEOUT_MS.
 * Return: the socket, or a negative errno (-ENOENT: no opener there).
 */
int npf_shmopen_connect(const char *path);

/*
 * npf_shmopen_ask() - ask the opener on @sock for @name.
 * Return: 0 with the descriptor in *@ret_fd; a negative errno the opener answered (the
 * object's open(), or -EINVAL for a name it does not serve), in which case *@ret_remote
 * is true; or a negative errno of the connection itself (*@ret_remote false), after which
 * @sock is of no more use.
 */
int npf_shmopen_ask(int sock, const char *name, int *ret_fd, bool *ret_remote);

/*
 * npf_shmopen_read_request() - the next request on @sock, into @name (NPF_SHMOPEN_NAME_MAX
 * + 1 bytes), not yet checked. Return: 1, 0 at the end of the connection, or a negative
 * errno (-EMSGSIZE: longer than a name).
 */
int npf_shmopen_read_request(int sock, char *name);

/* npf_shmopen_reply() - @fd (when @error is 0) or @error. Return: 0 or a negative errno. */
int npf_shmopen_reply(int sock, int error, int fd);

#endif /* NPUPROF_LIB_SHMOPEN_H */
