/* SPDX-License-Identifier: MIT */
#include "lib/shmopen.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define HOUR_DIGITS 10u         /* %Y%m%d%H, as both frameworks name their objects */

static const char *const prefixes[] = { "DynamicProfileNpuShm", "DynamicProfileShm" };

bool npf_shmopen_name_ok(const char *name)
{
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
                size_t n = strlen(prefixes[i]);
                if (strncmp(name, prefixes[i], n) != 0 || strlen(name + n) != HOUR_DIGITS)
                        continue;
                for (size_t k = 0; k < HOUR_DIGITS; k++)
                        if (!isdigit((unsigned char) name[n + k]))
                                return false;
                return true;
        }
        return false;
}

int npf_shmopen_connect(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = NPF_SHMOPEN_TIMEOUT_MS / 1000, .tv_usec = NPF_SHMOPEN_TIMEOUT_MS % 1000 * 1000 };
        int s, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        if ((s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0)
                return -errno;
        if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
            connect(s, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                r = -errno;
                close(s);
                return r;
        }
        return s;
}

/* Close every descriptor that @msg carried. Return: how many there were; the first in *@ret_fd. */
static size_t take_fds(struct msghdr *msg, int *ret_fd)
{
        size_t n = 0;

        for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
                        continue;
                for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(fd));
                        if (n++ == 0)
                                *ret_fd = fd;
                        else
                                close(fd);
                }
        }
        return n;
}

int npf_shmopen_ask(int sock, const char *name, int *ret_fd, bool *ret_remote)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * 4)];  /* room to see, and close, what should not be there */
                struct cmsghdr align;
        } control;
        int32_t error = 0;
        struct iovec iov = { .iov_base = &error, .iov_len = sizeof(error) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                              .msg_controllen = sizeof(control.buf) };
        ssize_t n;
        int fd = -1;

        *ret_remote = false;
        *ret_fd = -1;
        do
                n = send(sock, name, strlen(name), MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        size_t fds = take_fds(&msg, &fd);
        /* An answer is one int32_t, with one descriptor for 0 and none for an errno; anything else
         * (the opener gone, a cut or extra descriptor) ends the connection, its descriptors closed. */
        bool good = (size_t) n == sizeof(error) && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && error >= 0 &&
                    fds == (error == 0 ? 1u : 0u);
        if (!good) {
                if (fds)
                        close(fd);
                return n == 0 ? -ECONNRESET : -EPROTO;
        }
        *ret_remote = true;
        if (error)
                return -error;
        *ret_fd = fd;
        return 0;
}

int npf_shmopen_read_request(int sock, char *name)
{
        ssize_t n;

        do
                n = recv(sock, name, NPF_SHMOPEN_NAME_MAX + 1, MSG_TRUNC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if (n == 0)
                return 0;
        if ((size_t) n > NPF_SHMOPEN_NAME_MAX)
                return -EMSGSIZE;
        name[n] = '\0';
        return strlen(name) == (size_t) n ? 1 : -EINVAL;    /* a NUL inside */
}

int npf_shmopen_reply(int sock, int error, int fd)
{
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } control;
        int32_t e = error;
        struct iovec iov = { .iov_base = &e, .iov_len = sizeof(e) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (!error) {
                memset(&control, 0, sizeof(control));
                msg.msg_control = control.buf;
                msg.msg_controllen = sizeof(control.buf);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(fd));
        }
        return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}
