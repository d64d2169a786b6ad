/* SPDX-License-Identifier: MIT */
/* What every benchmark of make bench needs: a monotonic clock, medians and percentiles. */
#ifndef NPUPROF_BENCH_STATS_H
#define NPUPROF_BENCH_STATS_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t npf_bench_now_ns(void);

/* The value at fraction @p (0.5: the median) of the @n values at @v, which are sorted. */
double npf_bench_percentile(double *v, int n, double p);

static inline double npf_bench_median(double *v, int n)
{
        return npf_bench_percentile(v, n, 0.5);
}

#endif /* NPUPROF_BENCH_STATS_H */
