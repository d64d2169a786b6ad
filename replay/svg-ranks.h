/* SPDX-License-Identifier: MIT */
/*
 * The cluster chart of `npuprof-replay cluster` (ranks.svg), written with the SVG writer of
 * svg.h: per-rank median step time and peak memory, one bar per rank, stragglers
 * highlighted. Rank names and the title are untrusted text, escaped and shortened by the
 * writer.
 */
#ifndef NPUPROF_REPLAY_SVG_RANKS_H
#define NPUPROF_REPLAY_SVG_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NPF_SVG_RANKS_MAX 65536u        /* ranks in one cluster chart */

/* One bar of the cluster chart. */
typedef struct npf_svg_rank {
        const char *name;               /* the bar's label, "3"; NULL: its position in the array */
        double step_us;                 /* median step time, microseconds */
        uint64_t peak_bytes;            /* peak memory (allocated or reserved: the caller's choice) */
        bool has_step;                  /* false: no step time known, no bar */
        bool has_peak;                  /* false: no memory known, no bar */
        bool straggler;                 /* drawn in the warning colour */
} npf_svg_rank_t;

/*
 * npf_svg_ranks() - write the cluster chart of @n ranks under @title to @f: one panel of
 * median step times with dashed lines at @median_us (the median of all ranks) and at
 * @threshold_us (above which a rank is a straggler), one panel of peak memory. Either line
 * is left out when its value is not a positive number. The caller decides which ranks are
 * stragglers.
 * Return: 0; -EINVAL (NULL @f, or NULL @ranks with @n > 0); -E2BIG for more than
 * NPF_SVG_RANKS_MAX ranks; or the -errno of a failed write or fflush() of @f.
 * Context: any thread; reentrant.
 */
int npf_svg_ranks(FILE *f, const char *title, const npf_svg_rank_t *ranks, size_t n, double median_us,
                  double threshold_us);

#endif /* NPUPROF_REPLAY_SVG_RANKS_H */
