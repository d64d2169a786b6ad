/* SPDX-License-Identifier: MIT */
/* Process identity: a pid plus its start time, so that a reused pid is not mistaken. */
#ifndef NPUPROF_PROC_H
#define NPUPROF_PROC_H

#include <stdint.h>
#include <sys/types.h>

enum {
        NPF_PROC_ALIVE  = 0,    /* the same process is running */
        NPF_PROC_GONE   = 1,    /* no such process (or a zombie) */
        NPF_PROC_REUSED = 2,    /* the pid now belongs to another process */
};

/*
 * npf_proc_start_time() - the start time of @pid, field 22 of /proc/PID/stat, in clock
 * ticks after boot. Return: 0 and the time in @ret_start, -ESRCH if there is no such
 * process, -EBADMSG if the file cannot be parsed.
 */
int npf_proc_start_time(pid_t pid, uint64_t *ret_start);

/* Return: NPF_PROC_ALIVE, _GONE or _REUSED for the process (@pid, @start). */
int npf_proc_check(pid_t pid, uint64_t start);

#endif /* NPUPROF_PROC_H */
