/* SPDX-License-Identifier: MIT */
/*
 * Which system call a thread or process sleeps in, from /proc/ID/syscall (proc(5)), and a
 * bounded wait until it sleeps in a given one: the condition that a thread has gone to
 * sleep where a test wants it. Include it after <cmocka.h>.
 */
#ifndef NPUPROF_TESTS_INSYSCALL_H
#define NPUPROF_TESTS_INSYSCALL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The number of the system call thread or process @id is in, or -1 (it runs in user space). */
static inline long in_syscall(pid_t id)
{
        char path[64], buf[256] = "";
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/syscall", (int) id);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        return n <= 0 || strncmp(buf, "running", 7) == 0 ? -1 : strtol(buf, NULL, 10);
}

/* Wait until @id sleeps in system call @nr, looking every millisecond for at most 10 s. */
static inline void wait_in_syscall(pid_t id, long nr)
{
        for (int i = 0; i < 10000; i++) {
                if (in_syscall(id) == nr)
                        return;
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        }
        fail_msg("%d never slept in system call %ld", (int) id, nr);
}

#endif /* NPUPROF_TESTS_INSYSCALL_H */
