/* SPDX-License-Identifier: MIT */
/*
 * The "device" section of report.json and its part of report.txt: per rank, where each
 * step's time went on the device, the temporal breakdown and the overlap of communication
 * by computation, the kernels and collectives with the most time, the links' bandwidth, and
 * first of all the answer, a sentence. The schema is npuprof-replay(1)'s; times are
 * microseconds.
 */
#ifndef NPUPROF_REPLAY_DEVREPORT_H
#define NPUPROF_REPLAY_DEVREPORT_H

#include "replay/device.h"

#include <jansson.h>
#include <stdio.h>

/*
 * npf_devreport_rank() - the rank object of @d (its breakdown computed here), with at most
 * @top kernels and collectives, and @source naming what it was read from.
 * Return: a new reference, or NULL when out of memory.
 */
json_t *npf_devreport_rank(npf_device_t *d, const char *source, size_t top);

/*
 * npf_devreport_rank_steps() - a rank object from a breakdown alone (@n rows of @rows, as
 * step_trace_time.csv gives them): no temporal breakdown, kernels or collectives.
 */
json_t *npf_devreport_rank_steps(int64_t rank, npf_dev_framework_t fw, const npf_dev_breakdown_t *rows, size_t n,
                                 const char *source);

/* The median of the @n values at @v (sorted in place; the mean of the two middle ones for an
 * even @n; 0 for none). */
double npf_devreport_median(double *v, size_t n);

/* The median of @key over the step objects @steps (as report.json's "steps"); 0 for none. */
double npf_devreport_steps_median(const json_t *steps, const char *key);

/* The answer for a rank object @rank, "step 50: 75% of the device's step is communication
 * not overlapped (102 ms of 137 ms)", into @buf (@size bytes). Return: @buf. */
const char *npf_devreport_answer(const json_t *rank, char *buf, size_t size);

/* The device section for people: each rank's answer, its steps, kernels, collectives and
 * links, from the "device" object @device. Return: 0, or -EIO when writing failed. */
int npf_devreport_text(FILE *f, const json_t *device, size_t top);

/*
 * npf_devreport_svg() - steps.svg from the "device" object @device: one rank's steps as
 * stacked bars (computing, communication not overlapped, idle, pipeline bubble), or each
 * rank's median step side by side, its "slow_ranks" (a cluster's) marked with their cause.
 * Return: 0, -ENOMEM, or the -errno of a failed write.
 */
int npf_devreport_svg(FILE *f, const char *title, const json_t *device);

#endif /* NPUPROF_REPLAY_DEVREPORT_H */
