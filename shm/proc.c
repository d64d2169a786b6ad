/* SPDX-License-Identifier: MIT */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The start time in the stat file at @path: as npf_proc_start_time(). */
static int start_time_at(const char *path, uint64_t *ret_start)
{
        char buf[1024];
        ssize_t n;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ESRCH ? -ESRCH : -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        int saved = errno;
        close(fd);
        if (n < 0)
                return saved == ESRCH ? -ESRCH : -saved;     /* ESRCH: it exited between open and read */
        if (n == 0)
                return -EBADMSG;
        buf[n] = '\0';

        /* The command name may hold spaces and parentheses: fields resume after the last ')'. */
        char *p = strrchr(buf, ')');
        if (!p)
                return -EBADMSG;
        p++;
        /* After ')' come field 3 (state) .. field 22 (starttime): skip 19 fields. */
        char state = 0;
        for (int field = 3; field < 22; field++) {
                while (*p == ' ')
                        p++;
                if (field == 3)
                        state = *p;
                while (*p && *p != ' ')
                        p++;
                if (!*p)
                        return -EBADMSG;
        }
        if (state == 'Z' || state == 'X')
                return -ESRCH;
        char *end;
        errno = 0;
        unsigned long long start = strtoull(p, &end, 10);
        if (errno || end == p)
                return -EBADMSG;
        *ret_start = start;
        return 0;
}

int npf_proc_start_time(pid_t pid, uint64_t *ret_start)
{
        char path[64];

        if (pid <= 0)
                return -ESRCH;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        return start_time_at(path, ret_start);
}

int npf_proc_self_start_time(uint64_t *ret_start)
{
        return start_time_at("/proc/self/stat", ret_start);
}

int npf_proc_check(pid_t pid, uint64_t start)
{
        uint64_t now;

        int r = npf_proc_start_time(pid, &now);

        if (r == -ESRCH)
                return NPF_PROC_GONE;
        if (r < 0)
                return NPF_PROC_UNKNOWN;
        return now == start ? NPF_PROC_ALIVE : NPF_PROC_REUSED;
}
