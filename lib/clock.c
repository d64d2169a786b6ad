/* SPDX-License-Identifier: MIT */
#include "lib/clock.h"

uint64_t npf_clock_ns(clockid_t id)
{
        struct timespec ts;

        clock_gettime(id, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}
