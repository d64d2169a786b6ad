/* SPDX-License-Identifier: MIT */
/*
 * The daemon's log: one plain line per event on stderr, or the journal with structured
 * fields (NPUPROF_GENERATION, NPUPROF_CONFIG, NPUPROF_RANK) through sd_journal_send(),
 * written by a thread of its own once npf_log_start_writer() has started it.
 */
#ifndef NPUPROF_DAEMON_LOG_H
#define NPUPROF_DAEMON_LOG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

enum { NPF_LOG_AUTO = 0, NPF_LOG_STDERR, NPF_LOG_JOURNAL };

#define NPF_LOG_NONE INT64_C(-1)       /* no generation, or no rank */

/* Choose where logs go; NPF_LOG_AUTO picks the journal when JOURNAL_STREAM is stderr. */
void npf_log_init(int target, const char *config_path);

/* Return: true if logs go to the journal. */
bool npf_log_to_journal(void);

/*
 * Hand the writing to a thread of its own, so that a slow log (a file on a disk busy with
 * other writers' fsyncs, a journal that does not read) never holds the caller: npf_log()
 * then queues the line, and when 512 wait, drops it and counts it, saying so in the log
 * once it catches up. Without it, or if it cannot start, lines are written at once.
 * Return: 0, or a negative errno (and lines stay written at once).
 */
int npf_log_start_writer(void);

/* Write what waits, then stop the writer: lines are written at once again. */
void npf_log_stop_writer(void);

/* Log one event at syslog @priority; @generation and @rank may be NPF_LOG_NONE. */
void npf_log(int priority, int64_t generation, int64_t rank, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/*
 * A problem that recurs (a broken file read again, a write failing at each interval) is
 * logged once: when it first appears, and again only once it has changed or cleared.
 */
typedef struct npf_log_once {
        char last[PATH_MAX + 256];      /* the problem last logged; empty: none */
} npf_log_once_t;

/* Return: true, noting @problem, if it is not the problem last logged: log it then. */
bool npf_log_once_new(npf_log_once_t *o, const char *problem);

/* Return: true, forgetting it, if a problem was logged: the caller may say it cleared. */
bool npf_log_once_clear(npf_log_once_t *o);

/* The problem last logged, or NULL. */
const char *npf_log_once_last(const npf_log_once_t *o);

#endif /* NPUPROF_DAEMON_LOG_H */
