/* SPDX-License-Identifier: MIT */
/*
 * The frameworks' own profiler output in a window directory, found a few levels down:
 *   torch_npu's NAME_ascend_pt and MindSpore's NAME_ascend_ms directories (or any directory
 *   holding ASCEND_PROFILER_OUTPUT/): their text export (trace_view.json,
 *   step_trace_time.csv, communication.json) or db export (ascend_pytorch_profiler_N.db,
 *   ascend_mindspore_profiler_N.db), and the rank of profiler_info_N.json;
 *   Kineto's traces, *.pt.trace.json and *.pt.trace.json.gz.
 * An Ascend output is ready once its ASCEND_PROFILER_OUTPUT holds a trace, a db or
 * step_trace_time.csv and nothing below its directory has changed for @settle_s seconds:
 * torch_npu and MindSpore write it after the window closes, from a parser that may run for
 * minutes (asynchronously, in dynamic profiling). Until then it is parsing; one that has
 * settled with none of those files is raw (the framework's analysis was switched off: only
 * its PROF_* and FRAMEWORK/ collection, if anything), and the framework's offline analysis
 * makes it readable.
 */
#ifndef NPUPROF_REPLAY_FWOUT_H
#define NPUPROF_REPLAY_FWOUT_H

#include "replay/device.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define NPF_FWOUT_DEPTH_MAX 4           /* directories below the one searched */
#define NPF_FWOUT_MAX 4096u             /* outputs taken from one search */
#define NPF_FWOUT_ERR_MAX 512u

typedef enum npf_fwout_kind {
        NPF_FWOUT_ASCEND,               /* torch_npu's or MindSpore's */
        NPF_FWOUT_KINETO,
} npf_fwout_kind_t;

typedef enum npf_fwout_state {
        NPF_FWOUT_READY,
        NPF_FWOUT_PARSING,              /* the framework's parser is still writing it */
        NPF_FWOUT_RAW,                  /* raw data only */
} npf_fwout_state_t;

typedef struct npf_fwout {
        char dir[PATH_MAX];             /* the *_ascend_pt directory; a Kineto trace's file */
        npf_fwout_kind_t kind;
        npf_fwout_state_t state;
        npf_dev_framework_t framework;
        int64_t rank;                   /* profiler_info_N.json's rank_id, else N; -1 */
        int64_t stage;                  /* the pipeline stage: see npf_fwout_find(); -1 */
        time_t changed;                 /* the latest change below dir */
        /* Under dir/ASCEND_PROFILER_OUTPUT/, the files there ("" when absent). */
        char db[NAME_MAX + 1], steps_csv[NAME_MAX + 1];
        bool trace, comm;               /* trace_view.json, communication.json */
} npf_fwout_t;

/*
 * npf_fwout_find() - the framework outputs below @dir (itself included), at most @max into
 * @ret, sorted by rank and path; states as of @now with @settle_s seconds of quiet. An
 * Ascend output's stage is the rank's place in its pipeline-parallel group, a group of
 * profiler_metadata.json's "parallel_group_info" whose "group_name" begins with "pp"
 * (torch_npu's profiler_interface.py writes it; msprof-analyze takes its stages from the
 * same groups), its "group_rank"; else the index of the rank in its "global_ranks".
 * Return: their number, or the -errno of opening @dir.
 */
int npf_fwout_find(const char *dir, time_t now, int settle_s, npf_fwout_t *ret, size_t max);

/* "python3 -c 'from torch_npu.profiler.profiler import analyse; analyse(\"DIR\")'": the
 * command that makes the raw output @f readable, into @buf (@size bytes). Return: @buf. */
const char *npf_fwout_offline_command(const npf_fwout_t *f, char *buf, size_t size);

/*
 * npf_fwout_load() - the device timeline of the ready output @f: the db export where there
 * is one, else the trace; communication.json's links beside a trace; the rank of @f.
 * Return: 0 and the timeline in @ret; -ENOENT when @f has neither a trace nor a db (only
 * step_trace_time.csv); or the reader's error, with a sentence in @err (NPF_FWOUT_ERR_MAX).
 */
int npf_fwout_load(const npf_fwout_t *f, npf_device_t **ret, char *err);

#endif /* NPUPROF_REPLAY_FWOUT_H */
