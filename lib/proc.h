/* SPDX-License-Identifier: MIT */
/* Process identity: a pid plus its start time, so that a reused pid is not mistaken. */
#ifndef NPUPROF_LIB_PROC_H
#define NPUPROF_LIB_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum {
        NPF_PROC_ALIVE  = 0,    /* the same process is running */
        NPF_PROC_GONE   = 1,    /* no such process (or a zombie) */
        NPF_PROC_REUSED = 2,    /* the pid now belongs to another process */
        NPF_PROC_UNKNOWN = 3,   /* /proc could not tell (EMFILE, EACCES, ...): take it as alive */
};

/*
 * npf_proc_start_time() - the start time of @pid, field 22 of /proc/PID/stat, in clock
 * ticks after boot. Return: 0 and the time in @ret_start, -ESRCH if there is no such
 * process (or it is a zombie), -EBADMSG if the file cannot be parsed, or another -errno
 * when /proc cannot be read (which says nothing about the process).
 */
int npf_proc_start_time(pid_t pid, uint64_t *ret_start);

/*
 * npf_proc_self_start_time() - the caller's own start time, as npf_proc_start_time() gives
 * it, through /proc/self: right whether /proc was mounted in the caller's pid namespace
 * or in an outer one (where the caller's pid is not getpid()).
 */
int npf_proc_self_start_time(uint64_t *ret_start);

/*
 * Return: NPF_PROC_ALIVE, _GONE, _REUSED or _UNKNOWN for the process (@pid, @start). Only
 * a missing pid is _GONE: a failure to read /proc must never make a live rank look dead.
 */
int npf_proc_check(pid_t pid, uint64_t start);

/* One lock holder that npf_proc_find_lock_holders() looks for. */
typedef struct npf_proc_lock_query {
        uint64_t start;                 /* the holder's start time, as npf_proc_start_time() gives it */
        uint64_t offset;                /* the first byte of its lock */
        pid_t inner;                    /* its pid in its own pid namespace, as it recorded it */
        pid_t pid;                      /* found: its pid in the caller's pid namespace; 0: not found */
        pid_t candidate;                /* internal: the one process like it whose files are closed to us */
} npf_proc_lock_query_t;

/*
 * npf_proc_find_lock_holders() - for each of the @n queries in @q whose pid is 0, the
 * process that started at its start time and holds an open-file-description write lock
 * beginning at its offset on the file that @fd is open on, as /proc/PID/fdinfo shows it:
 * the holder's pid as the caller sees it, whatever pid namespace the holder runs in.
 * A process whose open files the caller may not read (another user's, for the daemon that
 * runs as its own user) is found by its start time and, in /proc/PID/status, the pid it
 * has in its own namespace (NSpid's last), where exactly one process matches both.
 * Return: how many were found, or -errno when /proc cannot be listed.
 * Context: reads /proc/PID/stat of every process, and the open files of those that
 * started at a wanted time: for the daemon's sweep, not for a per-step path.
 */
int npf_proc_find_lock_holders(int fd, npf_proc_lock_query_t *q, size_t n);

/*
 * npf_proc_sibling() - the program @name in the directory of the caller's own executable
 * (/proc/self/exe), as a build tree or an installed bin directory holds npuprof's programs
 * side by side. Return: 0 and its path in @buf (@len bytes) when it is there and may be
 * run; -ENOENT (or the error of access(2)) when it is not; -ENAMETOOLONG.
 */
int npf_proc_sibling(const char *name, char *buf, size_t len);

/*
 * npf_proc_environ() - the value of @name in the environment process @pid started with
 * (/proc/PID/environ, readable by its own user and by root), into @buf of @len bytes.
 * Return: 0; -ENOENT when it has no such variable; -ENAMETOOLONG when the value does not
 * fit; the -errno of reading the file (-EACCES: another user's process).
 */
int npf_proc_environ(pid_t pid, const char *name, char *buf, size_t len);

#endif /* NPUPROF_LIB_PROC_H */
