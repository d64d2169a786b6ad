/* SPDX-License-Identifier: MIT */
/*
 * The device chart of npuprof-replay (steps.svg), written with the SVG writer of svg.h: where
 * the device's time in a step went, as torch_npu divides it (replay/device.h): computing,
 * communication not overlapped by computing, idle (free) and pipeline bubble, stacked in this
 * order from the bottom, the communication that computing hid hatched inside the computing.
 *
 * One rank: a bar per step. Several ranks (a cluster): a bar per rank, of its median step
 * (each part the median of that part over its steps), the slow ranks outlined in red and
 * listed with their notes. Past NPF_SVG_STEPS_BARS bars, each bar stands for a run of
 * consecutive steps or ranks, each part the median of the run's, and is labelled with the
 * run's range. Labels, names, notes and the title are untrusted text, escaped and shortened
 * by the writer.
 */
#ifndef NPUPROF_REPLAY_SVG_STEPS_H
#define NPUPROF_REPLAY_SVG_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define NPF_SVG_STEPS_MAX 65536u        /* steps of one rank, and ranks, in one chart */
#define NPF_SVG_STEPS_BARS 400u         /* bars drawn at most; more are binned */

/*
 * One step of one rank, in microseconds. A value that is not a number, infinite or negative
 * is drawn as 0. The four parts are stacked as they are given: torch_npu counts a step's
 * device span as their sum.
 */
typedef struct npf_svg_step {
        const char *label;              /* "step 50"; NULL: its position in the array */
        double computing_us;
        double not_overlapped_us;       /* communication that no computing covered */
        double free_us;                 /* the device idle between the step's first and last task */
        double bubble_us;               /* pipeline receives */
        double overlapped_us;           /* communication that computing covered: drawn inside the
                                         * computing, never taller than it; 0: none */
} npf_svg_step_t;

/* One rank: its steps, in the order they ran. */
typedef struct npf_svg_steps_rank {
        const char *name;               /* "rank 3"; NULL: its position in the array */
        const npf_svg_step_t *steps;
        size_t n_steps;                 /* 0: the rank has no bar ("n/a") */
        bool slow;                      /* listed under the plot; in a cluster, its bar outlined in red */
        const char *note;               /* why, "computes 1.7x its stage peers", listed; NULL: none */
} npf_svg_steps_rank_t;

/*
 * npf_svg_steps() - write the device chart of the @n ranks at @ranks under @title (NULL or
 * empty: a title of its own) to @f: with one rank, a bar per step; with more, a bar per rank
 * of its median step. No rank, or no steps at all, writes a chart that says so. Nothing in
 * @ranks is kept or freed.
 * Return: 0; -EINVAL (NULL @f, NULL @ranks with @n > 0, a rank with NULL steps and
 * n_steps > 0) or -E2BIG (more than NPF_SVG_STEPS_MAX ranks, or steps in a rank), found
 * before anything is written; -ENOMEM; or the -errno of a failed write or of the final
 * fflush() of @f.
 * Context: any thread; reentrant. Time O(s log s) in the steps s; memory linear in the steps
 * or ranks drawn and in the steps of the largest rank.
 */
int npf_svg_steps(FILE *f, const char *title, const npf_svg_steps_rank_t *ranks, size_t n);

#endif /* NPUPROF_REPLAY_SVG_STEPS_H */
