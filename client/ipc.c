/* SPDX-License-Identifier: MIT */
#include "client/ipc.h"
#include "npuprof/protocol.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define REPLY_MAX (64u << 20)

static int64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until @fd is ready for @events or the deadline passes. Return: 0 or -ETIMEDOUT/-errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
        for (;;) {
                int64_t left = deadline - now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = fd, .events = events };
                int r = poll(&p, 1, (int) left);
                if (r > 0)
                        return 0;
                if (r == 0)
                        return -ETIMEDOUT;
                if (errno != EINTR)
                        return -errno;
        }
}

int npf_ipc_call(const char *socket_path, const char *command, int timeout_ms, json_t **ret_reply, char *err)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int64_t deadline = now_ms() + timeout_ms;
        char *buf = NULL, *req = NULL;
        size_t used = 0, cap = 0;
        int fd = -1, r;

        if (strlen(socket_path) >= sizeof(sa.sun_path)) {
                snprintf(err, 256, "socket path %s is too long", socket_path);
                return -ENAMETOOLONG;
        }
        strcpy(sa.sun_path, socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                r = -errno;
                snprintf(err, 256, "cannot connect to %s: %s", socket_path, strerror(errno));
                goto out;
        }
        json_t *rq = json_pack("{s:i, s:s}", "version", NPF_PROTO_VERSION, "command", command);
        req = json_dumps(rq, JSON_COMPACT);
        json_decref(rq);
        if (!req) {
                r = -ENOMEM;
                snprintf(err, 256, "out of memory");
                goto out;
        }
        size_t len = strlen(req);
        req[len++] = '\n';      /* json_dumps left room: the NUL becomes the newline */
        for (size_t off = 0; off < len;) {
                ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        snprintf(err, 256, "cannot send to %s: %s", socket_path, strerror(errno));
                        goto out;
                }
                off += (size_t) n;
        }
        for (;;) {
                if (used + 4096 > cap) {
                        cap = cap ? cap * 2 : 65536;
                        char *bigger = cap <= REPLY_MAX ? realloc(buf, cap) : NULL;
                        if (!bigger) {
                                r = -EMSGSIZE;
                                snprintf(err, 256, "the reply from %s is too long", socket_path);
                                goto out;
                        }
                        buf = bigger;
                }
                r = wait_fd(fd, POLLIN, deadline);
                if (r < 0) {
                        snprintf(err, 256, "no reply from %s within %d ms", socket_path, timeout_ms);
                        goto out;
                }
                ssize_t n = recv(fd, buf + used, cap - used, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : -ECONNRESET;
                        snprintf(err, 256, "%s closed the connection without a reply", socket_path);
                        goto out;
                }
                used += (size_t) n;
                char *nl = memchr(buf, '\n', used);
                if (!nl)
                        continue;
                json_error_t jerr;
                json_t *reply = json_loadb(buf, (size_t) (nl - buf), 0, &jerr);
                if (!json_is_object(reply)) {
                        json_decref(reply);
                        r = -EBADMSG;
                        snprintf(err, 256, "the reply from %s is not a JSON object", socket_path);
                        goto out;
                }
                *ret_reply = reply;
                r = 0;
                goto out;
        }
out:
        if (fd >= 0)
                close(fd);
        free(buf);
        free(req);
        return r;
}

const char *npf_ipc_fix(int r, const char *socket_path, char *buf)
{
        struct stat st;

        switch (r) {
        case -ENOENT:
        case -ECONNREFUSED:
                snprintf(buf, NPF_IPC_FIX_MAX, "%s (systemctl start npuprofd.socket), or name the socket it "
                         "listens on with --socket PATH or NPUPROF_SOCKET",
                         r == -ENOENT ? "is npuprofd running? Start it" : "no npuprofd listens there: start it");
                return buf;
        case -EACCES:
        case -EPERM:
                if (stat(socket_path, &st) < 0) {
                        snprintf(buf, NPF_IPC_FIX_MAX, "a directory on the way to the socket is closed to this "
                                 "user: run as root (sudo)");
                        return buf;
                }
                if (st.st_gid == 0) {
                        snprintf(buf, NPF_IPC_FIX_MAX, "only root may connect: run as root (sudo), or start "
                                 "npuprofd with --socket-group GROUP, a group of yours");
                        return buf;
                }
                struct group *g = getgrgid(st.st_gid);
                char name[64];
                if (g)
                        snprintf(name, sizeof(name), "%s", g->gr_name);
                else
                        snprintf(name, sizeof(name), "%u", (unsigned) st.st_gid);
                snprintf(buf, NPF_IPC_FIX_MAX, "only root and the socket's group %s may connect: run as root "
                         "(sudo), or join the group (sudo usermod -aG %s $USER, then log in again)", name, name);
                return buf;
        default:
                return NULL;
        }
}
