/* SPDX-License-Identifier: MIT */
#include "daemon/kineto.h"
#include "conf/kineto.h"
#include "daemon/log.h"
#include "lib/atomicfile.h"
#include "lib/clock.h"
#include "lib/kinetoipc.h"
#include "lib/manifest.h"
#include "lib/outroot.h"
#include "lib/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PIDS_KEPT 12u                   /* libkineto sends its own and at most ten ancestors' */

/* What became of the window a client was given. */
enum { WIN_NONE = 0, WIN_GIVEN, WIN_TRACING };

typedef struct client {
        struct sockaddr_un addr;        /* its socket: its name, a UUID of its own */
        socklen_t addr_len;
        int32_t pid;                    /* in its own pid namespace: pids[0] */
        int32_t host_pid;               /* here, from its credentials; 0: not known */
        uid_t uid;
        gid_t gid;
        int64_t jobid;
        int64_t rank;                   /* RANK in its environment; -1: not known */
        char rank_why[96];              /* why not, when not */
        uint32_t n_pids;
        int32_t pids[PIDS_KEPT];
        uint64_t proc_start;            /* its start time, when its pid here is known; 0: not known */
        uint64_t first_ns, last_ns;     /* CLOCK_MONOTONIC of its first and last request */
        uint64_t polls;
        bool tracing;                   /* its last request could take no configuration */
        uint64_t given_generation;      /* the last generation given, or passed over; 0: none */
        uint32_t windows_given;
        /* The window given and not ended. */
        int win;
        uint64_t win_generation;
        int64_t win_start, win_stop;
        uint64_t win_warmup;
        uint64_t win_given_real_ns, win_deadline_real_ns;
        bool win_seen_tracing;
        char *win_dir;                  /* absolute */
        char *win_leaf;                 /* relative to the generation's prof_dir */
        char *win_trace;                /* where libkineto writes it */
} client_t;

struct npf_kineto {
        uv_loop_t *loop;
        uv_poll_t poll;
        int fd;
        npf_kineto_options_t opt;
        char path[sizeof(((struct sockaddr_un *) 0)->sun_path) + 1];   /* the socket file; "" for the abstract name */
        char endpoint[120];             /* as status says it */
        npf_shm_config_t *config;       /* in force; NULL: none */
        client_t *clients[NPF_KINETO_CLIENTS_MAX];
        uint32_t n_clients;
        /* Counts, ever. */
        uint64_t datagrams, requests, given, replies, empty, send_failed, malformed, unknown, refused_clients,
                 expired, traces, lost, ctxt, late;
        char last_malformed[160];
        unsigned finishing;             /* windows whose end is being written in the thread pool */
        bool closed;                    /* the socket is closed: free at the last one */
};

static void window_clear(client_t *c)
{
        free(c->win_dir);
        free(c->win_leaf);
        free(c->win_trace);
        c->win_dir = c->win_leaf = c->win_trace = NULL;
        c->win = WIN_NONE;
}

static void client_free(client_t *c)
{
        if (!c)
                return;
        window_clear(c);
        free(c);
}

/* The record of @c's window (or of the generation @c's window would be) ending as @outcome. */
static void record(npf_kineto_t *k, const client_t *c, uint32_t outcome, uint64_t generation, int64_t start,
                   int64_t stop, const char *leaf, const char *message)
{
        npf_window_record_t rec = {
                .rank = c->rank >= 0 ? (uint32_t) c->rank : NPF_SHM_MAX_RANKS,
                .pid = (uint32_t) (c->host_pid ? c->host_pid : c->pid),
                .generation = generation,
                .start_step = start,
                .stop_step = stop,
                .outcome = outcome,
                .state_ns = c->win_given_real_ns,
                .last_step = -1,
                .backend = NPF_BACKEND_KINETO,
        };

        snprintf(rec.output, sizeof(rec.output), "%s", leaf ? leaf : "");
        snprintf(rec.message, sizeof(rec.message), "%s", message ? message : "");
        if (k->opt.ended)
                k->opt.ended(&rec, k->opt.data);
}

/* --- the socket ---------------------------------------------------------------------------- */

static void on_readable(uv_poll_t *h, int status, int events);

int npf_kineto_new(uv_loop_t *loop, const npf_kineto_options_t *o, npf_kineto_t **ret, char *err, size_t err_len)
{
        npf_kineto_t *k = calloc(1, sizeof(*k));
        struct sockaddr_un sa;
        socklen_t len;
        int one = 1, r;

        if (!k)
                return -ENOMEM;
        k->loop = loop;
        k->opt = *o;
        k->fd = -1;
        if ((r = npf_kineto_address(o->socket_dir, &sa, &len)) < 0) {
                snprintf(err, err_len, "%s/%s is too long a socket path", o->socket_dir, NPF_KINETO_ENDPOINT);
                goto fail;
        }
        if (o->socket_dir && o->socket_dir[0]) {
                snprintf(k->path, sizeof(k->path), "%s", sa.sun_path);
                snprintf(k->endpoint, sizeof(k->endpoint), "%s", k->path);
        } else {
                snprintf(k->endpoint, sizeof(k->endpoint), "@%s (abstract, with its trailing NUL)", NPF_KINETO_ENDPOINT);
        }
        k->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (k->fd < 0) {
                r = -errno;
                snprintf(err, err_len, "socket: %s", strerror(-r));
                goto fail;
        }
        /* Each datagram comes with its sender's credentials: its pid here, whatever its namespace. */
        if (setsockopt(k->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
                r = -errno;
                snprintf(err, err_len, "SO_PASSCRED: %s", strerror(-r));
                goto fail;
        }
        /* ...and the time the kernel took it in: a request read too late is left unanswered. */
        if (setsockopt(k->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) < 0) {
                r = -errno;
                snprintf(err, err_len, "SO_TIMESTAMPNS: %s", strerror(-r));
                goto fail;
        }
        if (k->path[0]) {
                /*
                 * Every process binds a socket of its own in the directory too (Endpoint.h:89-103):
                 * one that is missing is made as /tmp is, writable by all, sticky.
                 */
                if (mkdir(o->socket_dir, 0755) == 0 && chmod(o->socket_dir, 01777) < 0) {
                        r = -errno;
                        snprintf(err, err_len, "cannot open %s to every user: %s", o->socket_dir, strerror(-r));
                        goto fail;
                }
                /* A socket file left by an earlier daemon is replaced; anything else is not. */
                struct stat st;
                if (lstat(k->path, &st) == 0 && S_ISSOCK(st.st_mode))
                        unlink(k->path);
        }
        mode_t old = umask(o->group != (gid_t) -1 ? 0117 : 0111);
        r = bind(k->fd, (struct sockaddr *) &sa, len) < 0 ? -errno : 0;
        umask(old);
        if (r < 0) {
                snprintf(err, err_len, "cannot bind %s: %s%s", k->endpoint, strerror(-r),
                         r == -EADDRINUSE ? " (is dynolog, or another npuprofd, serving it?)" : "");
                k->path[0] = '\0';
                goto fail;
        }
        if (k->path[0] && o->group != (gid_t) -1 && chown(k->path, (uid_t) -1, o->group) < 0) {
                r = -errno;
                snprintf(err, err_len, "cannot give %s to group %u: %s", k->path, (unsigned) o->group, strerror(-r));
                goto fail;
        }
        if ((r = uv_poll_init(loop, &k->poll, k->fd)) < 0) {
                snprintf(err, err_len, "uv_poll_init: %s", uv_strerror(r));
                r = -EIO;
                goto fail;
        }
        k->poll.data = k;
        uv_poll_start(&k->poll, UV_READABLE, on_readable);
        *ret = k;
        return 0;
fail:
        if (k->path[0])
                unlink(k->path);
        if (k->fd >= 0)
                close(k->fd);
        free(k);
        return r;
}

static void free_kineto(npf_kineto_t *k)
{
        for (uint32_t i = 0; i < NPF_KINETO_CLIENTS_MAX; i++)
                client_free(k->clients[i]);
        free(k->config);
        free(k);
}

static void on_poll_closed(uv_handle_t *h)
{
        npf_kineto_t *k = h->data;

        close(k->fd);
        k->closed = true;
        if (!k->finishing)
                free_kineto(k);
}

void npf_kineto_close(npf_kineto_t *k)
{
        if (!k)
                return;
        if (k->path[0])
                unlink(k->path);
        uv_poll_stop(&k->poll);
        uv_close((uv_handle_t *) &k->poll, on_poll_closed);
}

/* Send the answer of type @type, @n bytes of @payload, to @to; never waits. */
static void answer(npf_kineto_t *k, const struct sockaddr_un *to, socklen_t to_len, const char *type,
                   const void *payload, size_t n)
{
        char buf[NPF_KINETO_HEADER_SIZE + NPF_KINETO_TEXT_MAX];
        size_t len = npf_kineto_message(buf, sizeof(buf), type, payload, n);

        if (!len)
                return;
        if (sendto(k->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *) to, to_len) < 0)
                k->send_failed++;       /* not reading, or gone: libkineto asks again */
        else
                k->replies++;
}

/* --- clients ----------------------------------------------------------------------------- */

static client_t *client_find(npf_kineto_t *k, const struct sockaddr_un *from, socklen_t len)
{
        for (uint32_t i = 0; i < NPF_KINETO_CLIENTS_MAX; i++) {
                client_t *c = k->clients[i];
                if (c && c->addr_len == len && memcmp(&c->addr, from, len) == 0)
                        return c;
        }
        return NULL;
}

/* The rank of @c, from the launcher's variables in its environment (torchrun: RANK). */
static void client_rank(client_t *c)
{
        static const char *const names[] = { "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID" };
        char v[32], *end;
        int r = -ENOENT;

        c->rank = -1;
        if (!c->host_pid) {
                snprintf(c->rank_why, sizeof(c->rank_why), "its pid here is not known");
                return;
        }
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                r = npf_proc_environ(c->host_pid, names[i], v, sizeof(v));
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        break;
                long long rank = strtoll(v, &end, 10);
                if (end != v && *end == '\0' && rank >= 0 && rank < NPF_SHM_MAX_RANKS) {
                        c->rank = rank;
                        c->rank_why[0] = '\0';
                        return;
                }
        }
        snprintf(c->rank_why, sizeof(c->rank_why), r == -ENOENT ? "no RANK in its environment"
                                                    : "its environment cannot be read: %s", strerror(-r));
}

static client_t *client_add(npf_kineto_t *k, const struct sockaddr_un *from, socklen_t len,
                            const npf_kineto_msg_t *m, const struct ucred *cred, uint64_t now)
{
        uint32_t i = 0;

        while (i < NPF_KINETO_CLIENTS_MAX && k->clients[i])
                i++;
        if (i == NPF_KINETO_CLIENTS_MAX)
                return NULL;
        client_t *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        memcpy(&c->addr, from, len);
        c->addr_len = len;
        c->pid = m->pids[0];
        c->host_pid = cred ? cred->pid : 0;
        c->uid = cred ? cred->uid : (uid_t) -1;
        c->gid = cred ? cred->gid : (gid_t) -1;
        c->jobid = m->jobid;
        c->n_pids = m->n_pids < PIDS_KEPT ? m->n_pids : PIDS_KEPT;
        memcpy(c->pids, m->pids, c->n_pids * sizeof(c->pids[0]));
        c->first_ns = now;
        if (c->host_pid && npf_proc_start_time(c->host_pid, &c->proc_start) < 0)
                c->proc_start = 0;
        client_rank(c);
        k->clients[i] = c;
        k->n_clients++;
        npf_log(LOG_INFO, NPF_LOG_NONE, c->rank, "libkineto process %d (pid %d here, job %" PRId64 ") polls %s",
                c->pid, c->host_pid, c->jobid, k->endpoint);
        return c;
}

/* --- windows ------------------------------------------------------------------------------ */

static bool regular_file(const char *path)
{
        struct stat st;

        return path && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void window_lost(npf_kineto_t *k, client_t *c, const char *why)
{
        k->lost++;
        record(k, c, NPF_WINDOW_LOST, c->win_generation, c->win_start, c->win_stop, c->win_leaf, why);
        window_clear(c);
}

/* Where libkineto writes the trace of @c when it refuses the path asked for. */
static void fallback_path(const client_t *c, char *buf, size_t len)
{
        snprintf(buf, len, "/proc/%d/root/tmp/libkineto_activities_%d.json", c->host_pid, c->pid);
}

/* Whether @c's trace is under its /tmp instead, written since its window was given. */
static bool fallback_there(const client_t *c)
{
        char path[96];
        struct stat st;

        if (!c->host_pid)
                return false;
        fallback_path(c, path, sizeof(path));
        return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
               (uint64_t) st.st_mtim.tv_sec * 1000000000u + (uint64_t) st.st_mtim.tv_nsec >= c->win_given_real_ns;
}

/*
 * Copy the trace libkineto wrote under the process's /tmp instead (a libkineto that keeps
 * on-demand traces to /tmp, or KINETO_ONDEMAND_TRACE_DIR: Config.cpp:206-228, 361-365)
 * into @c's window directory under the name asked for, reading it through /proc/PID/root,
 * so that a process in another mount namespace is reached too. Return: 0, or -errno
 * (-EACCES: the daemon may not look into another user's process).
 */
static int fetch_fallback(const client_t *c)
{
        char src[96], err[NPF_OUTROOT_ERR_MAX], buf[65536];
        const char *name = strrchr(c->win_trace, '/') + 1;
        npf_atomicfile_t f;
        struct stat st;
        ssize_t n;
        int in, dfd, r;

        fallback_path(c, src, sizeof(src));
        if (!c->host_pid || (in = open(src, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
                return c->host_pid ? -errno : -ESRCH;
        /* Written since the window was given: not an earlier window's of the same pid. */
        if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode) ||
            (uint64_t) st.st_mtim.tv_sec * 1000000000u + (uint64_t) st.st_mtim.tv_nsec < c->win_given_real_ns) {
                close(in);
                return -ENOENT;
        }
        if ((dfd = npf_outroot_walk(c->win_dir, strlen(c->win_dir), NPF_OUTROOT_OPEN, "the window directory", err)) < 0) {
                close(in);
                return dfd;
        }
        r = npf_atomicfile_begin(&f, dfd, name, "npuprofd.tmp", 0644, 0);
        while (r == 0 && (n = read(in, buf, sizeof(buf))) != 0)
                r = n < 0 ? -errno : npf_atomicfile_append(&f, buf, (size_t) n);
        if (r == 0)
                r = npf_atomicfile_commit(&f, NPF_ATOMICFILE_NOREPLACE);
        else
                npf_atomicfile_abort(&f);
        close(dfd);
        close(in);
        return r;
}

/* The manifest of @c's window, whose trace is there. Return: 0, or -errno. */
static int write_manifest(const client_t *c)
{
        char err[NPF_OUTROOT_ERR_MAX];
        npf_atomicfile_t f;
        npf_manifest_t m = {
                .rank = c->rank,
                .pid = c->host_pid ? c->host_pid : c->pid,
                .generation = c->win_generation,
                .start_step = c->win_start,
                .stop_step = c->win_stop,
                .warmup = (int64_t) c->win_warmup,
                .last_step = -1,
                .backend = "kineto",
                .complete = true,
                .started_unix_ms = (int64_t) (c->win_given_real_ns / 1000000u),
                .ended_unix_ms = (int64_t) (npf_clock_ns(CLOCK_REALTIME) / 1000000u),
                .written_by = "npuprofd, for libkineto",
        };
        int dfd = npf_outroot_walk(c->win_dir, strlen(c->win_dir), NPF_OUTROOT_OPEN, "the window directory", err);
        int r;

        if (dfd < 0)
                return dfd;
        r = npf_manifest_write(&f, dfd, &m, "npuprofd.tmp", NPF_ATOMICFILE_NOREPLACE);
        close(dfd);
        return r == -EEXIST ? 0 : r;
}

/*
 * The end of a window whose trace is there (or under the process's /tmp, to be fetched
 * first): written in the thread pool, off the loop, then recorded. Its manifest costs two
 * fsyncs; 256 windows that end in one sweep held the loop 300 ms, past the time libkineto
 * waits for an answer (bench-kineto).
 */
typedef struct finish {
        uv_work_t req;
        npf_kineto_t *k;
        client_t who;                   /* the client as it was; its window's strings are this item's */
        bool fetch;
        int result;                     /* of the fetch: 0, or -errno */
        int manifest;                   /* of the manifest's writing: 0, or -errno */
} finish_t;

static void free_kineto(npf_kineto_t *k);

static void finish_work(uv_work_t *req)
{
        finish_t *f = req->data;

        f->result = f->fetch ? fetch_fallback(&f->who) : 0;
        if (f->result == 0)
                f->manifest = write_manifest(&f->who);
}

static void finish_done(uv_work_t *req, int status)
{
        finish_t *f = req->data;
        npf_kineto_t *k = f->k;
        client_t *c = &f->who;
        char why[256];

        if (!k->closed) {
                if (status == 0 && f->result == 0 && f->manifest < 0)
                        npf_log(LOG_WARNING, (int64_t) c->win_generation, c->rank, "cannot write the manifest of %s: %s",
                                c->win_dir, strerror(-f->manifest));
                if (status == 0 && f->result == 0) {
                        if (f->fetch)
                                npf_log(LOG_WARNING, (int64_t) c->win_generation, c->rank, "libkineto process %d wrote "
                                        "its trace to /tmp/libkineto_activities_%d.json, not where it was asked: copied "
                                        "into %s; start the job with KINETO_ONDEMAND_TRACE_DIR set to the output root",
                                        c->pid, c->pid, c->win_dir);
                        k->traces++;
                        record(k, c, NPF_WINDOW_DONE, c->win_generation, c->win_start, c->win_stop, c->win_leaf, "");
                } else {
                        snprintf(why, sizeof(why), "its trace, written to /tmp/libkineto_activities_%d.json, could not "
                                 "be copied into the window directory: %s; start the job with KINETO_ONDEMAND_TRACE_DIR "
                                 "set to the output root", c->pid, strerror(status < 0 ? -status : -f->result));
                        k->lost++;
                        record(k, c, NPF_WINDOW_LOST, c->win_generation, c->win_start, c->win_stop, c->win_leaf, why);
                }
        }
        free(c->win_dir);
        free(c->win_leaf);
        free(c->win_trace);
        free(f);
        if (--k->finishing == 0 && k->closed)
                free_kineto(k);
}

/* @c's window has its trace: finish it in the thread pool; @c is free for its next window at once. */
static void window_finish(npf_kineto_t *k, client_t *c, bool fetch)
{
        finish_t *f = calloc(1, sizeof(*f));

        if (!f) {
                window_lost(k, c, "out of memory");
                return;
        }
        f->k = k;
        f->who = *c;
        f->fetch = fetch;
        f->req.data = f;
        c->win_dir = c->win_leaf = c->win_trace = NULL;
        window_clear(c);
        k->finishing++;
        uv_queue_work(k->loop, &f->req, finish_work, finish_done);
}

/* @c's trace is not where it was asked for, and will not come: lost, and why. */
static void trace_missing(npf_kineto_t *k, client_t *c, bool left)
{
        char why[256];

        snprintf(why, sizeof(why), "%s without writing %s: a libkineto that keeps on-demand traces under /tmp "
                 "writes /tmp/libkineto_activities_%d.json instead; start the job with "
                 "KINETO_ONDEMAND_TRACE_DIR set to the output root", left ? "the process ended, or stopped polling," :
                 "libkineto finished tracing", c->win_trace, c->pid);
        window_lost(k, c, why);
}

/* Look at @c's window: landed, still to come, or lost. */
static void window_check(npf_kineto_t *k, client_t *c)
{
        if (c->win == WIN_NONE)
                return;
        bool asked = regular_file(c->win_trace);
        if (asked || fallback_there(c)) {
                window_finish(k, c, !asked);
                return;
        }
        uint64_t now = npf_clock_ns(CLOCK_REALTIME);
        if (c->win_seen_tracing && !c->tracing)
                trace_missing(k, c, false);
        else if (c->win_deadline_real_ns && now > c->win_deadline_real_ns && !c->tracing)
                trace_missing(k, c, false);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * UINT64_C(0x100000001b3);
        return h;
}

/*
 * What makes a window this window, whatever its generation (a daemon started anew publishes
 * the same file under another) and on every node: its steps or time, switches, ranks and
 * directory.
 */
static uint64_t window_id(const npf_shm_config_t *c)
{
        const npf_shm_args_t *a = &c->args;
        int64_t steps[] = { a->start_step, a->stop_step, (int64_t) a->step_count, (int64_t) a->warmup,
                            (int64_t) a->start_at_multiple_of, (int64_t) a->duration_ms };
        uint32_t words[] = { a->flags, a->activities, a->rank_filter };
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        h = fnv(h, steps, sizeof(steps));
        h = fnv(h, words, sizeof(words));
        h = fnv(h, c->prof_dir, a->prof_dir_len);
        if (a->rank_filter == NPF_RANKS_LIST)
                h = fnv(h, c->rank_bitmap, sizeof(c->rank_bitmap));
        return h;
}

/* The leaf of @c's window directory for the window @id of @a. */
static void window_leaf(const client_t *c, const npf_shm_args_t *a, uint64_t id, uint64_t start_unix_ms, char *buf,
                        size_t len)
{
        char who[48];

        if (c->rank >= 0)
                snprintf(who, sizeof(who), "rank%" PRId64 "_kineto_pid%d", c->rank, c->host_pid ? c->host_pid : c->pid);
        else
                snprintf(who, sizeof(who), "kineto_pid%d", c->host_pid ? c->host_pid : c->pid);
        /* The window's identity in the name: its directory exists exactly when it was given. */
        if (a->duration_ms)
                snprintf(buf, len, "%s_%08" PRIx32 "_at%" PRIu64 "_for%" PRIu64 "ms", who, (uint32_t) id, start_unix_ms,
                         a->duration_ms);
        else if (a->start_step == NPF_STEP_NEXT)
                snprintf(buf, len, "%s_%08" PRIx32 "_next_for%" PRIu64, who, (uint32_t) id, a->step_count);
        else
                snprintf(buf, len, "%s_%08" PRIx32 "_start%" PRId64 "_stop%" PRId64, who, (uint32_t) id, a->start_step,
                         a->stop_step);
}

/*
 * Make @c's window directory, writable by @c: its own when the daemon may give it, else by
 * all. Return: 0; 1 when it is there already: an earlier daemon gave @c this window (its
 * name holds the process and the window's identity, window_id()); or -errno.
 */
static int window_mkdir(npf_kineto_t *k, const client_t *c, const char *leaf, char *msg, size_t msg_len)
{
        const npf_shm_config_t *cfg = k->config;
        size_t root_len = cfg->args.root_len ? cfg->args.root_len : cfg->args.prof_dir_len;
        char err[NPF_OUTROOT_ERR_MAX];
        int dfd = npf_outroot_walk(cfg->prof_dir, root_len, NPF_OUTROOT_CREATE, "the output directory", err);
        int r;

        if (dfd < 0) {
                snprintf(msg, msg_len, "%s", err);
                return dfd;
        }
        r = mkdirat(dfd, leaf, 0755) < 0 ? -errno : 0;
        if (r == -EEXIST) {
                struct stat st;
                r = fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) ? 1 : -EEXIST;
        } else if (r == 0) {
                bool theirs = c->uid != (uid_t) -1 && c->uid != geteuid();
                if (theirs && geteuid() == 0)
                        r = fchownat(dfd, leaf, c->uid, c->gid, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
                else if (theirs || c->uid == (uid_t) -1)
                        r = fchmodat(dfd, leaf, 0777, 0) < 0 ? -errno : 0;
        }
        close(dfd);
        if (r < 0)
                snprintf(msg, msg_len, "cannot make %.200s/%.100s: %s", cfg->prof_dir, leaf, strerror(-r));
        return r;
}

/*
 * The configuration text for @c, which can take one now, into @text: a window given, or
 * nothing (0). Return: its length.
 */
static int window_give(npf_kineto_t *k, client_t *c, char *text, size_t len)
{
        const npf_shm_config_t *cfg = k->config;
        const npf_shm_args_t *a = cfg ? &cfg->args : NULL;
        char leaf[160], msg[NPF_OUTROOT_ERR_MAX + 64], path[PATH_MAX], trace[PATH_MAX], id[96], group[48];

        if (!a || !a->enabled || a->generation <= c->given_generation || c->win != WIN_NONE)
                return 0;
        c->given_generation = a->generation;
        uint64_t now_ms = npf_clock_ns(CLOCK_REALTIME) / 1000000u;
        uint64_t start_ms = a->published_ns / 1000000u + NPF_KINETO_LEAD_MS;
        c->win_given_real_ns = npf_clock_ns(CLOCK_REALTIME);
        if (a->rank_filter == NPF_RANKS_LIST &&
            (c->rank < 0 || !(cfg->rank_bitmap[c->rank / 8] >> (c->rank % 8) & 1))) {
                char why[160];
                if (c->rank >= 0)
                        snprintf(why, sizeof(why), "the window's ranks leave out rank %" PRId64, c->rank);
                else
                        snprintf(why, sizeof(why), "the window names ranks, and this process's rank is not known: %s",
                                 c->rank_why);
                record(k, c, NPF_WINDOW_FILTERED, a->generation, a->start_step, a->stop_step, NULL, why);
                return 0;
        }
        /* A window bounded by time starts at one moment on every node; a client that asks too late misses it. */
        if (a->duration_ms && now_ms + NPF_KINETO_WARMUP_MS + 1000 > start_ms) {
                snprintf(msg, sizeof(msg), "asked %" PRIu64 " ms after the window's publication: libkineto needs %u ms "
                         "of warmup before its start, %u ms after publication", now_ms - a->published_ns / 1000000u,
                         NPF_KINETO_WARMUP_MS, NPF_KINETO_LEAD_MS);
                record(k, c, NPF_WINDOW_MISSED, a->generation, a->start_step, a->stop_step, NULL, msg);
                return 0;
        }
        uint64_t wid = window_id(cfg);
        window_leaf(c, a, wid, start_ms, leaf, sizeof(leaf));
        if ((size_t) snprintf(path, sizeof(path), "%s/%s", cfg->prof_dir, leaf) >= sizeof(path) ||
            (size_t) snprintf(trace, sizeof(trace), "%s/kineto.pt.trace.json", path) >= sizeof(trace)) {
                record(k, c, NPF_WINDOW_FAILED, a->generation, a->start_step, a->stop_step, NULL,
                       "the window directory's path is too long");
                return 0;
        }
        snprintf(id, sizeof(id), "npuprof-%s-g%" PRIu64 "-pid%d", k->opt.node ? k->opt.node : "node", a->generation,
                 c->host_pid ? c->host_pid : c->pid);
        snprintf(group, sizeof(group), "npuprof-%016" PRIx64, wid);
        npf_kineto_target_t t = { .log_file = trace, .trace_id = id, .group_id = group, .start_unix_ms = start_ms };
        int n = npf_kineto_config_text(a, &t, text, len, msg, sizeof(msg)), made = 0;
        if (n < 0 || (made = window_mkdir(k, c, leaf, msg, sizeof(msg))) < 0) {
                if (n == -ENOSPC)
                        snprintf(msg, sizeof(msg), "the configuration text is longer than %u bytes", NPF_KINETO_TEXT_MAX);
                record(k, c, NPF_WINDOW_FAILED, a->generation, a->start_step, a->stop_step, NULL, msg);
                return 0;
        }
        char name[PATH_MAX];
        if (npf_kineto_trace_name(trace, c->pid, name, sizeof(name)) < 0 || !(c->win_dir = strdup(path)) ||
            !(c->win_leaf = strdup(leaf)) || !(c->win_trace = strdup(name))) {
                window_clear(c);
                return 0;
        }
        c->win = WIN_GIVEN;
        c->win_generation = a->generation;
        c->win_start = a->start_step;
        c->win_stop = a->stop_step;
        c->win_warmup = a->warmup;
        c->win_seen_tracing = false;
        c->win_deadline_real_ns = a->duration_ms ? (start_ms + a->duration_ms) * 1000000u + 30 * 1000000000ull : 0;
        c->windows_given++;
        if (made == 1) {
                /* Given by the daemon before this one: never twice; its trace is watched for as if given now. */
                npf_log(LOG_INFO, (int64_t) a->generation, c->rank, "libkineto process %d (pid %d here) was given this "
                        "window by an earlier daemon: its trace is awaited in %s", c->pid, c->host_pid, c->win_trace);
                return 0;
        }
        k->given++;
        npf_log(LOG_INFO, (int64_t) a->generation, c->rank, "libkineto process %d (pid %d here) given its window, "
                "its trace to land in %s", c->pid, c->host_pid, c->win_trace);
        return n;
}

/* A request of @c: what it can take now, and its answer; none when it was read @late. */
static void on_request(npf_kineto_t *k, client_t *c, const npf_kineto_msg_t *m, uint64_t now, bool late)
{
        char text[NPF_KINETO_TEXT_MAX];
        int n = 0;

        c->last_ns = now;
        c->polls++;
        c->tracing = !(m->config_type & NPF_KINETO_ACTIVITIES);
        if (c->win != WIN_NONE && c->tracing) {
                c->win = WIN_TRACING;
                c->win_seen_tracing = true;
        }
        window_check(k, c);
        if (late) {
                k->late++;
                return;
        }
        if (!c->tracing)
                n = window_give(k, c, text, sizeof(text));
        if (n <= 0)
                k->empty++;
        answer(k, &c->addr, c->addr_len, "req", text, n > 0 ? (size_t) n : 0);
}

/* The instances of job @jobid on device @gpu: what dynolog answers a registration with. */
static int32_t instances(const npf_kineto_t *k, int64_t jobid)
{
        int32_t n = 0;

        for (uint32_t i = 0; i < NPF_KINETO_CLIENTS_MAX; i++)
                n += k->clients[i] && k->clients[i]->jobid == jobid;
        return n;
}

static void malformed(npf_kineto_t *k, const char *why)
{
        k->malformed++;
        snprintf(k->last_malformed, sizeof(k->last_malformed), "%s", why);
}

static void on_datagram(npf_kineto_t *k, const unsigned char *buf, size_t len, const struct sockaddr_un *from,
                        socklen_t from_len, const struct ucred *cred, bool late)
{
        npf_kineto_msg_t m;
        char why[128];
        uint64_t now = npf_clock_ns(CLOCK_MONOTONIC);
        int r = npf_kineto_parse(buf, len, &m, why, sizeof(why));

        if (r == -ENOMSG) {
                k->unknown++;
                return;
        }
        if (r < 0) {
                malformed(k, why);
                return;
        }
        /* Only a named socket can be answered: libkineto's always is. */
        if (from_len <= offsetof(struct sockaddr_un, sun_path) + 1) {
                malformed(k, "a request from an unnamed socket, which no answer can reach");
                return;
        }
        if (m.kind == NPF_KINETO_CTXT) {
                int32_t count = instances(k, m.jobid);
                k->ctxt++;
                answer(k, from, from_len, "ctxt", &count, sizeof(count));
                return;
        }
        k->requests++;
        if (m.n_pids == 0)              /* dynolog answers none of these either (IPCMonitor.cpp:76-79) */
                return;
        client_t *c = client_find(k, from, from_len);
        if (!c && !(c = client_add(k, from, from_len, &m, cred, now))) {
                k->refused_clients++;
                if (!late)
                        answer(k, from, from_len, "req", NULL, 0);
                return;
        }
        on_request(k, c, &m, now, late);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
        npf_kineto_t *k = h->data;
        unsigned char buf[NPF_KINETO_DATAGRAM_MAX];
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(struct timespec))];
        } control;

        (void) events;
        if (status < 0)
                return;
        for (unsigned i = 0; i < NPF_KINETO_READS_PER_WAKEUP; i++) {
                struct sockaddr_un from;
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
                struct msghdr mh = {
                        .msg_name = &from, .msg_namelen = sizeof(from),
                        .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = control.buf, .msg_controllen = sizeof(control.buf),
                };
                memset(&from, 0, sizeof(from));
                /* MSG_TRUNC: the datagram's whole length, even where it was longer than the buffer. */
                ssize_t n = recvmsg(k->fd, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
                if (n < 0)
                        break;          /* EAGAIN: all read */
                k->datagrams++;
                const struct ucred *cred = NULL;
                uint64_t taken_ns = 0;
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS &&
                            cm->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
                                cred = (const struct ucred *) CMSG_DATA(cm);
                        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS &&
                            cm->cmsg_len == CMSG_LEN(sizeof(struct timespec))) {
                                struct timespec ts;
                                memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
                                taken_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
                        }
                }
                uint64_t now_real = npf_clock_ns(CLOCK_REALTIME);
                bool late = taken_ns && now_real > taken_ns && now_real - taken_ns > NPF_KINETO_ANSWER_MS * 1000000ull;
                if ((size_t) n > sizeof(buf)) {
                        char why[96];
                        snprintf(why, sizeof(why), "a datagram of %zd bytes, longer than any request", n);
                        malformed(k, why);
                        continue;
                }
                on_datagram(k, buf, (size_t) n, &from, mh.msg_namelen, cred, late);
        }
}

/* --- the configuration, the sweep, status --------------------------------------------------- */

void npf_kineto_publish(npf_kineto_t *k, const npf_shm_config_t *c)
{
        if (!c) {
                free(k->config);
                k->config = NULL;
                return;
        }
        if (!k->config && !(k->config = malloc(sizeof(*k->config))))
                return;
        memcpy(k->config, c, sizeof(*c));
}

/*
 * libkineto never removes the socket file it binds in the directory (Endpoint.h:106-108):
 * the file of a process that ended is removed here, where it is in the daemon's directory
 * and named as libkineto names it.
 */
static void unlink_client_socket(const npf_kineto_t *k, const client_t *c)
{
        const char *name = c->addr.sun_path;
        size_t dir = strlen(k->opt.socket_dir ? k->opt.socket_dir : "");
        struct stat st;

        if (!k->path[0] || c->addr_len <= offsetof(struct sockaddr_un, sun_path) + 1 || name[0] == '\0' ||
            strncmp(name, k->opt.socket_dir, dir) != 0 || strncmp(name + dir, "/dynoconfigclient", 17) != 0 ||
            strchr(name + dir + 1, '/') || memchr(name, '\0', sizeof(c->addr.sun_path)) == NULL)
                return;
        if (lstat(name, &st) == 0 && S_ISSOCK(st.st_mode))
                unlink(name);
}

void npf_kineto_sweep(npf_kineto_t *k)
{
        uint64_t now = npf_clock_ns(CLOCK_MONOTONIC);

        for (uint32_t i = 0; i < NPF_KINETO_CLIENTS_MAX; i++) {
                client_t *c = k->clients[i];
                if (!c)
                        continue;
                window_check(k, c);
                /* Gone: its process ended (known at once where its pid here is), or silent too long. */
                int state = c->proc_start ? npf_proc_check(c->host_pid, c->proc_start) : NPF_PROC_ALIVE;
                bool ended = state == NPF_PROC_GONE || state == NPF_PROC_REUSED;
                if (!ended && now - c->last_ns <= NPF_KINETO_EXPIRE_MS * 1000000ull)
                        continue;
                if (c->win != WIN_NONE)
                        trace_missing(k, c, true);
                npf_log(LOG_INFO, NPF_LOG_NONE, c->rank, "libkineto process %d (pid %d here) %s", c->pid, c->host_pid,
                        ended ? "ended" : "stopped polling");
                if (ended)
                        unlink_client_socket(k, c);
                client_free(c);
                k->clients[i] = NULL;
                k->n_clients--;
                k->expired++;
        }
}

static json_t *client_json(const client_t *c, uint64_t now)
{
        json_t *pids = json_array(), *win = json_null();

        for (uint32_t i = 0; i < c->n_pids; i++)
                json_array_append_new(pids, json_integer(c->pids[i]));
        if (c->win != WIN_NONE)
                win = json_pack("{s:I, s:s, s:s, s:s}", "generation", (json_int_t) c->win_generation, "state",
                                c->win == WIN_TRACING ? "collecting" : "armed", "dir", c->win_dir, "trace", c->win_trace);
        return json_pack("{s:i, s:o, s:o, s:I, s:o, s:o, s:o, s:I, s:I, s:b, s:I, s:I, s:o}",
                         "pid", c->pid,
                         "host_pid", c->host_pid ? json_integer(c->host_pid) : json_null(),
                         "uid", c->uid != (uid_t) -1 ? json_integer(c->uid) : json_null(),
                         "jobid", (json_int_t) c->jobid,
                         "rank", c->rank >= 0 ? json_integer(c->rank) : json_null(),
                         "rank_unknown", c->rank >= 0 ? json_null() : json_string(c->rank_why),
                         "pids", pids,
                         "polls", (json_int_t) c->polls,
                         "last_poll_ms_ago", (json_int_t) ((now - c->last_ns) / 1000000u),
                         "tracing", c->tracing,
                         "windows_given", (json_int_t) c->windows_given,
                         "given_generation", (json_int_t) c->given_generation,
                         "window", win);
}

static int by_rank_then_pid(const void *a, const void *b)
{
        const client_t *x = *(client_t *const *) a, *y = *(client_t *const *) b;

        if (x->rank != y->rank)
                return x->rank < 0 ? 1 : y->rank < 0 ? -1 : (x->rank > y->rank) - (x->rank < y->rank);
        return (x->pid > y->pid) - (x->pid < y->pid);
}

json_t *npf_kineto_status_json(const npf_kineto_t *k)
{
        const client_t *sorted[NPF_KINETO_CLIENTS_MAX];
        uint64_t now = npf_clock_ns(CLOCK_MONOTONIC);
        json_t *list = json_array();
        size_t n = 0;

        for (uint32_t i = 0; i < NPF_KINETO_CLIENTS_MAX; i++)
                if (k->clients[i])
                        sorted[n++] = k->clients[i];
        qsort(sorted, n, sizeof(sorted[0]), by_rank_then_pid);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(list, client_json(sorted[i], now));
        return json_pack("{s:s, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:o}",
                         "endpoint", k->endpoint, "clients", list, "counts",
                         "datagrams", (json_int_t) k->datagrams, "requests", (json_int_t) k->requests,
                         "given", (json_int_t) k->given, "replies", (json_int_t) k->replies,
                         "empty", (json_int_t) k->empty, "send_failed", (json_int_t) k->send_failed,
                         "malformed", (json_int_t) k->malformed, "unknown_types", (json_int_t) k->unknown,
                         "clients_refused", (json_int_t) k->refused_clients, "expired", (json_int_t) k->expired,
                         "traces", (json_int_t) k->traces, "lost", (json_int_t) k->lost,
                         "unanswered_late", (json_int_t) k->late,
                         "last_malformed", k->last_malformed[0] ? json_string(k->last_malformed) : json_null());
}

void npf_kineto_counts(const npf_kineto_t *k, npf_kineto_counts_t *ret)
{
        *ret = (npf_kineto_counts_t) {
                .clients = k->n_clients, .requests = k->requests, .given = k->given,
                .refused = k->malformed + k->unknown + k->refused_clients, .traces = k->traces, .lost = k->lost,
        };
}
