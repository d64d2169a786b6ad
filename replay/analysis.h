/* SPDX-License-Identifier: MIT */
/*
 * What a person chasing an out-of-memory error asks of a replayed snapshot, per device: how
 * high memory went and when, which blocks were live at the peak and who allocated them,
 * what leaked, what was there before tracing began, how fragmented the reservation was,
 * how long frees waited on other streams, which call sites held the most memory the
 * longest, and how much memory a perfect static planner would have needed.
 *
 * The answers are one JSON object per device, the "devices" items of report.json; the
 * schema is in docs/npuprof-replay.1.
 */
#ifndef NPUPROF_REPLAY_ANALYSIS_H
#define NPUPROF_REPLAY_ANALYSIS_H

#include "replay/replay.h"

#include <jansson.h>
#include <stddef.h>

typedef struct npf_analysis_opts {
        size_t top;                     /* rows of each ranked list (blocks, leaks, sites) */
        size_t max_frames;              /* frames of each call stack shown */
} npf_analysis_opts_t;

/* The static plan of the lifetimes of @r: what a first-fit planner places, by size. */
typedef struct npf_plan {
        uint64_t plan_bytes;            /* the sum of the partitions' sizes */
        uint64_t peak_live_bytes;       /* the most bytes live at once */
        size_t partitions, tensors;
} npf_plan_t;

/*
 * npf_plan_lifetimes() - place every block of @r in the first partition (partitions are
 * taken largest first) whose lifetimes do not overlap its own; a block that fits in none
 * opens a partition of its size. Blocks are placed largest first.
 * Return: 0 and the plan in @ret, -ENOMEM, or -E2BIG for a trace of 2^32 - 2 events or more.
 */
int npf_plan_lifetimes(const npf_replay_t *r, npf_plan_t *ret);

/*
 * npf_analysis_device() - the report of one replayed device.
 * Return: a new JSON object, or NULL when out of memory.
 * Context: any; reads @s and @r only.
 */
json_t *npf_analysis_device(const npf_snapshot_t *s, const npf_replay_t *r, const npf_analysis_opts_t *o);

/* The call stack @stack of @s as a JSON array of {name, filename, line}, innermost first. */
json_t *npf_analysis_stack(const npf_snapshot_t *s, uint32_t stack, size_t max_frames);

#endif /* NPUPROF_REPLAY_ANALYSIS_H */
