/* SPDX-License-Identifier: MIT */
/*
 * The daemon's log: one plain line per event on stderr, or the journal with structured
 * fields (NPUPROF_GENERATION, NPUPROF_CONFIG, NPUPROF_RANK) through sd_journal_send().
 */
#ifndef NPUPROF_DAEMON_LOG_H
#define NPUPROF_DAEMON_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

enum { NPF_LOG_AUTO = 0, NPF_LOG_STDERR, NPF_LOG_JOURNAL };

#define NPF_LOG_NONE INT64_C(-1)       /* no generation, or no rank */

/* Choose where logs go; NPF_LOG_AUTO picks the journal when JOURNAL_STREAM is stderr. */
void npf_log_init(int target, const char *config_path);

/* Return: true if logs go to the journal. */
bool npf_log_to_journal(void);

/* Log one event at syslog @priority; @generation and @rank may be NPF_LOG_NONE. */
void npf_log(int priority, int64_t generation, int64_t rank, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

#endif /* NPUPROF_DAEMON_LOG_H */
