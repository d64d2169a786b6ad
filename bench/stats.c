/* SPDX-License-Identifier: MIT */
#include "bench/stats.h"

#include <stdlib.h>
#include <time.h>

uint64_t npf_bench_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *) a, y = *(const double *) b;

        return (x > y) - (x < y);
}

double npf_bench_percentile(double *v, int n, double p)
{
        qsort(v, (size_t) n, sizeof(*v), cmp_double);
        int i = (int) (p * (n - 1) + 0.5);
        return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}
