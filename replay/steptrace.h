/* SPDX-License-Identifier: MIT */
/*
 * torch_npu's and MindSpore's own per-step breakdown, step_trace_time.csv, as their
 * profilers write it beside the trace (torch_npu: prof_view/_trace_step_time_parser.py).
 * The columns are found by their header's names, so both layouts read: "Step,Computing,..."
 * and, since torch_npu 2.7, "Device_id,Step,Computing,...". Microseconds; a value may end
 * in a tab, as some releases write them; an empty Step is a window without steps (-1).
 */
#ifndef NPUPROF_REPLAY_STEPTRACE_H
#define NPUPROF_REPLAY_STEPTRACE_H

#include "replay/device.h"

#include <stddef.h>

#define NPF_STEPTRACE_ERR_MAX 256u
#define NPF_STEPTRACE_BYTES_MAX ((size_t) 64 << 20)     /* the file: a row a step */
#define NPF_STEPTRACE_ROWS_MAX 65536u                   /* steps of one window */

/*
 * npf_steptrace_load() - the rows of the step_trace_time.csv at @path.
 * Return: their number and a new array in @ret (free() it); -EINVAL with the line and
 * what is wrong in @err (NPF_STEPTRACE_ERR_MAX bytes) for a file without the Step and
 * Computing columns or a row with a value that is not a number; -E2BIG past
 * NPF_STEPTRACE_BYTES_MAX or NPF_STEPTRACE_ROWS_MAX; -ENOMEM; the -errno of reading it.
 */
int64_t npf_steptrace_load(const char *path, npf_dev_breakdown_t **ret, char *err);

#endif /* NPUPROF_REPLAY_STEPTRACE_H */
