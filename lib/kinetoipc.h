/* SPDX-License-Identifier: MIT */
/*
 * The datagrams libkineto exchanges with a node daemon when a PyTorch job runs with
 * KINETO_USE_DAEMON=1: dynolog's IPC fabric, as libkineto compiles it (its vendored copy,
 * libkineto/third_party/dynolog_headers/dynolog/src/ipcfabric/, and dynolog's
 * dynolog/src/tracing/IPCMonitor.cpp, which serves it).
 *
 * Every message is one Unix datagram: a header of 40 bytes, {size_t size; char type[32];}
 * in the sender's byte order (FabricManager.h:30-35, Metadata), then `size` bytes of payload
 * (FabricManager.h:120-122 sends both in one sendmsg()). libkineto sends "req" only
 * (IpcFabricConfigClient.cpp:161-174): {int32 type; int32 n; int64 jobid; int32 pids[n]}
 * (Utils.h:25-34), type a mask of NPF_KINETO_EVENTS and NPF_KINETO_ACTIVITIES (what it can
 * take now: 0 while it traces), jobid $SLURM_JOB_ID or 0, pids its own pid and then its
 * ancestors'. The daemon answers "req" with the configuration text, without a NUL, or with
 * nothing at all when it has none (IPCMonitor.cpp:68-97). "ctxt" ({int32 gpu; int32 pid;
 * int64 jobid}, Utils.h:15-22) registers an instance; the answer is an int32, the instances
 * of that job on that device (IPCMonitor.cpp:99-121).
 *
 * Nothing here does I/O: the daemon's endpoint (daemon/kineto.h) reads and writes the socket.
 */
#ifndef NPUPROF_LIB_KINETOIPC_H
#define NPUPROF_LIB_KINETOIPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#define NPF_KINETO_HEADER_SIZE 40u      /* sizeof(Metadata): size_t size, char type[32] */
#define NPF_KINETO_TYPE_SIZE   32u
#define NPF_KINETO_ENDPOINT    "dynolog"        /* the daemon's name (Utils.h:36, IPCMonitor.h:22) */
#define NPF_KINETO_PIDS_MAX    64u      /* pids a request may carry here; libkineto sends at most 11 */
#define NPF_KINETO_DATAGRAM_MAX 4096u   /* the longest request read whole; longer ones are refused */

enum { NPF_KINETO_EVENTS = 1, NPF_KINETO_ACTIVITIES = 2 };     /* LibkinetoConfigType */

enum { NPF_KINETO_REQ = 1, NPF_KINETO_CTXT = 2 };

/* A request, as parsed. */
typedef struct npf_kineto_msg {
        int kind;                       /* NPF_KINETO_REQ or NPF_KINETO_CTXT */
        int32_t config_type;            /* req: NPF_KINETO_* bits */
        int64_t jobid;
        uint32_t n_pids;                /* req: pids[0] the sender's own, then its ancestors' */
        int32_t pids[NPF_KINETO_PIDS_MAX];
        int32_t gpu, pid;               /* ctxt */
} npf_kineto_msg_t;

/*
 * npf_kineto_parse() - parse the datagram @buf of @len bytes (its whole length, as received,
 * even where more than was read: then it is refused).
 * Return: 0; -EBADMSG when it is not a well-formed request (@why, of @why_len bytes, says
 * what is wrong); -ENOMSG for a well-formed message of a type this side does not answer
 * (dynolog logs and drops those too).
 */
int npf_kineto_parse(const void *buf, size_t len, npf_kineto_msg_t *m, char *why, size_t why_len);

/*
 * npf_kineto_message() - the datagram of type @type (at most 31 bytes) carrying the @n
 * bytes of @payload, into @buf of @cap bytes.
 * Return: its length, or 0 when it does not fit.
 */
size_t npf_kineto_message(void *buf, size_t cap, const char *type, const void *payload, size_t n);

/*
 * npf_kineto_address() - the daemon's address: the abstract name "\0dynolog\0" (its
 * trailing NUL is part of the name: Endpoint.h:217-240 gives the length as the name's and
 * two), or @dir/dynolog, NUL-terminated, when @dir is neither NULL nor empty (libkineto's
 * KINETO_IPC_SOCKET_DIR).
 * Return: 0, or -ENAMETOOLONG.
 */
int npf_kineto_address(const char *dir, struct sockaddr_un *sa, socklen_t *ret_len);

#endif /* NPUPROF_LIB_KINETOIPC_H */
