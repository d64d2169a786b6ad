/* SPDX-License-Identifier: MIT */
/*
 * The files npuprof-replay writes from a replayed snapshot: report.txt (rendered from the
 * report's JSON, so that the two never disagree), timeline.csv and memory.svg.
 */
#ifndef NPUPROF_REPLAY_REPORT_H
#define NPUPROF_REPLAY_REPORT_H

#include "replay/replay.h"
#include "replay/trace.h"

#include <jansson.h>
#include <stdio.h>

/* The part of report.txt for one snapshot: @snap is its object in report.json. Return: 0 or -errno. */
int npf_report_snapshot_text(FILE *f, const json_t *snap);

/* The header line of timeline.csv. */
#define NPF_REPORT_TIMELINE_HEADER "device,index,action,addr,size,stream,allocated,requested,active,reserved,time_us\n"

/* One row per event of @r: device, index, action, addr, size, stream, allocated, requested,
 * active, reserved (bytes after the event), time_us (empty when unknown). Return: 0 or -errno. */
int npf_report_timeline(FILE *f, const npf_replay_t *r);

#define NPF_REPORT_TIMELINE_ROW_MAX 256u        /* room one row needs, more than it takes */

/*
 * npf_report_timeline_rows() - the rows of npf_report_timeline() from event *@index on,
 * as many as leave NPF_REPORT_TIMELINE_ROW_MAX bytes free before they are formatted, into
 * @buf (@size bytes); *@index is then the next event's. Return: the bytes formatted.
 */
size_t npf_report_timeline_rows(char *buf, size_t size, const npf_replay_t *r, size_t *index);

/*
 * memory.svg: one panel per replayed device, the allocated peak marked, OOMs as marks;
 * then one per trace of @traces that sampled the process's resident memory (a host
 * window's trace.json), its peak marked.
 */
int npf_report_memory_svg(FILE *f, const char *title, npf_replay_t *const *replays, size_t n,
                          npf_trace_t *const *traces, size_t n_traces);

/* "1.5 GiB" into @buf (24 bytes). */
const char *npf_report_bytes(uint64_t v, char *buf);

#endif /* NPUPROF_REPLAY_REPORT_H */
