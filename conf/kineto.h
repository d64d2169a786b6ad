/* SPDX-License-Identifier: MIT */
/*
 * The window in force, said as libkineto's on-demand configuration: the text a node daemon
 * hands a PyTorch process that polls it (KINETO_USE_DAEMON=1), as dynolog's `dyno gputrace`
 * builds it (cli/src/commands/gputrace.rs:30-129), in the keys libkineto's Config parses
 * (libkineto/src/Config.cpp:52-151, 328-436): one KEY=VALUE a line.
 *
 * Steps: libkineto counts iterations from 0, the first step() call (torch's optimizer
 * hook); a file's step N is that iteration N. A window of steps [S, E] with W warmup steps
 * is PROFILE_START_ITERATION = S + W after ACTIVITIES_WARMUP_ITERATIONS = W, for
 * ACTIVITIES_ITERATIONS = E - S + 1 - W: the warmup steps run the profiler and are not
 * kept, as torch_npu's schedule does. A window at the next step asks for iteration 0,
 * which libkineto, past it already, moves to the next iteration (plus the warmup);
 * start_at_multiple_of is PROFILE_START_ITERATION_ROUNDUP. A window bounded by time is
 * PROFILE_START_TIME (ms since the epoch) and ACTIVITIES_DURATION_MSECS.
 */
#ifndef NPUPROF_CONF_KINETO_H
#define NPUPROF_CONF_KINETO_H

#include <stddef.h>
#include <stdint.h>

#include "npuprof/shm.h"

#define NPF_KINETO_TEXT_MAX 2048u       /* the longest configuration text made here */

/* What differs from one process to the next. */
typedef struct npf_kineto_target {
        const char *log_file;           /* ACTIVITIES_LOG_FILE: absolute, ends in ".json" */
        const char *trace_id;           /* REQUEST_TRACE_ID: this process's trace */
        const char *group_id;           /* REQUEST_GROUP_TRACE_ID: the window's, the same on every node */
        uint64_t start_unix_ms;         /* a window bounded by time: when it starts */
} npf_kineto_target_t;

/*
 * npf_kineto_config_text() - the configuration text of the window @a for the process @t,
 * into @buf of @len bytes (NPF_KINETO_TEXT_MAX is enough).
 * Return: its length; -EINVAL when a value cannot be said (a path or id holding a newline,
 * '#' or '=', which libkineto's parser would cut: AbstractConfig.cpp:69-72, 134-182; a log
 * file not ending in ".json", where libkineto would not insert the pid), with @err (of
 * @err_len bytes) saying which; -ENOSPC when @buf is too short.
 */
int npf_kineto_config_text(const npf_shm_args_t *a, const npf_kineto_target_t *t, char *buf, size_t len,
                           char *err, size_t err_len);

/*
 * npf_kineto_trace_name() - where libkineto writes the trace of process @pid asked to write
 * @log_file: "_<pid>" inserted before the first ".pt.trace.json", else before the first
 * ".json" (libkineto/src/Config.cpp:361-381), into @buf of @len bytes.
 * Return: 0, or -ENAMETOOLONG.
 */
int npf_kineto_trace_name(const char *log_file, int32_t pid, char *buf, size_t len);

#endif /* NPUPROF_CONF_KINETO_H */
