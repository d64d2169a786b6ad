/* SPDX-License-Identifier: MIT */
#include "lib/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Return: the pid named by directory entry @name of /proc, or 0 if it names none. */
static pid_t pid_of(const char *name)
{
        char *end;
        long v;

        if (name[0] < '1' || name[0] > '9')
                return 0;
        errno = 0;
        v = strtol(name, &end, 10);
        return errno || *end || v > INT32_MAX ? 0 : (pid_t) v;
}

/*
 * Each open-file-description write lock that open file @fdinfo (the text of a
 * /proc/PID/fdinfo/N) holds answers the queries of @q, not yet answered, for a process
 * that started at @start and locked from that offset: they get @pid. Return: how many.
 */
static int match_locks(const char *fdinfo, pid_t pid, uint64_t start, npf_proc_lock_query_t *q, size_t n)
{
        int found = 0;

        for (const char *line = fdinfo; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                char kind[16], mode[16], access[16];
                uint64_t from;

                /* lock:   1: OFDLCK ADVISORY  WRITE -1 00:1a:2296 262208 264511 */
                if (strncmp(line, "lock:", 5) != 0 ||
                    sscanf(line + 5, " %*d: %15s %15s %15s %*d %*x:%*x:%*u %" SCNu64, kind, mode, access, &from) != 4 ||
                    strcmp(kind, "OFDLCK") != 0 || strcmp(access, "WRITE") != 0)
                        continue;
                for (size_t k = 0; k < n; k++)
                        if (q[k].pid == 0 && q[k].start == start && q[k].offset == from) {
                                q[k].pid = pid;
                                found++;
                        }
        }
        return found;
}

/* Look through the open files of process @pid, started at @start, for locks on (@dev, @ino).
 * Return: how many queries were answered, or -1 when its open files are closed to us. */
static int match_process(pid_t pid, uint64_t start, dev_t dev, ino_t ino, npf_proc_lock_query_t *q, size_t n)
{
        char path[64], buf[4096];
        struct dirent *e;
        struct stat st;
        int found = 0;
        DIR *d;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int) pid);
        d = opendir(path);
        if (!d)
                return errno == EACCES || errno == EPERM ? -1 : 0;
        while ((e = readdir(d))) {
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%d/fd/%.16s", (int) pid, e->d_name);
                if (stat(path, &st) < 0 || st.st_dev != dev || st.st_ino != ino)
                        continue;
                snprintf(path, sizeof(path), "/proc/%d/fdinfo/%.16s", (int) pid, e->d_name);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                size_t len = 0;
                ssize_t r;
                while (len < sizeof(buf) - 1 && (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
                        len += (size_t) r;
                close(fd);
                buf[len] = '\0';
                found += match_locks(buf, pid, start, q, n);
        }
        closedir(d);
        return found;
}

/* The pid that @pid has in its own pid namespace, the last of NSpid in its status; 0 if unknown. */
static pid_t innermost_pid(pid_t pid)
{
        char path[64], *line = NULL;
        size_t cap = 0;
        long inner = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        if (!(f = fopen(path, "re")))
                return 0;
        while (getline(&line, &cap, f) > 0) {
                if (strncmp(line, "NSpid:", 6) != 0)
                        continue;
                char *p = line + 6, *end;
                for (long v; (v = strtol(p, &end, 10)), end != p; p = end)
                        inner = v;
                break;
        }
        free(line);
        fclose(f);
        return inner > 0 && inner <= INT32_MAX ? (pid_t) inner : 0;
}

/* A process like the holder of @q (its start time), whose open files are closed to us. */
static void note_candidate(npf_proc_lock_query_t *q, size_t n, pid_t pid, uint64_t start)
{
        pid_t inner = innermost_pid(pid);

        for (size_t k = 0; inner && k < n; k++)
                if (q[k].pid == 0 && q[k].start == start && q[k].inner == inner)
                        q[k].candidate = q[k].candidate == 0 ? pid : -1;        /* -1: more than one */
}

int npf_proc_find_lock_holders(int fd, npf_proc_lock_query_t *q, size_t n)
{
        struct dirent *e;
        struct stat st;
        size_t left = 0;
        int found = 0;
        DIR *d;

        if (fstat(fd, &st) < 0)
                return -errno;
        for (size_t k = 0; k < n; k++) {
                left += q[k].pid == 0;
                q[k].candidate = 0;
        }
        d = opendir("/proc");
        if (!d)
                return -errno;
        while ((size_t) found < left && (e = readdir(d))) {
                pid_t pid = pid_of(e->d_name);
                uint64_t start;
                size_t k = 0;

                if (pid == 0 || npf_proc_start_time(pid, &start) < 0)
                        continue;
                /* Only a process that started when a holder did has its open files read. */
                while (k < n && (q[k].pid != 0 || q[k].start != start))
                        k++;
                if (k < n) {
                        int m = match_process(pid, start, st.st_dev, st.st_ino, q, n);
                        if (m < 0)
                                note_candidate(q, n, pid, start);
                        else
                                found += m;
                }
        }
        closedir(d);
        for (size_t k = 0; k < n; k++)
                if (q[k].pid == 0 && q[k].candidate > 0) {
                        q[k].pid = q[k].candidate;
                        found++;
                }
        return found;
}

int npf_proc_sibling(const char *name, char *buf, size_t len)
{
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        char *slash;

        if (n <= 0)
                return n < 0 ? -errno : -ENOENT;
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (!slash)
                return -ENOENT;
        *slash = '\0';
        if ((size_t) snprintf(buf, len, "%s/%s", self, name) >= len)
                return -ENAMETOOLONG;
        return access(buf, X_OK) < 0 ? -errno : 0;
}

int npf_proc_environ(pid_t pid, const char *name, char *buf, size_t len)
{
        char path[64], env[32768];
        size_t name_len = strlen(name), used = 0;
        ssize_t n = 0;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/environ", (int) pid);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                return -errno;
        /* The first 32 KiB: where a launcher's variables are, and more than most environments hold. */
        while (used < sizeof(env) - 1 && (n = read(fd, env + used, sizeof(env) - 1 - used)) > 0)
                used += (size_t) n;
        int saved = n < 0 ? errno : 0;
        close(fd);
        if (saved)
                return -saved;
        env[used] = '\0';
        for (size_t at = 0; at < used; at += strlen(env + at) + 1) {
                const char *v = env + at;
                if (strncmp(v, name, name_len) == 0 && v[name_len] == '=') {
                        if ((size_t) snprintf(buf, len, "%s", v + name_len + 1) >= len)
                                return -ENAMETOOLONG;
                        return 0;
                }
        }
        return -ENOENT;
}
