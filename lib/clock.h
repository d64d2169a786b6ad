/* SPDX-License-Identifier: MIT */
/* Clock readings in nanoseconds, for every part of npuprof (heartbeats, timestamps, timeouts). */
#ifndef NPUPROF_LIB_CLOCK_H
#define NPUPROF_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* @id (CLOCK_MONOTONIC for heartbeats and durations, CLOCK_REALTIME for timestamps) in ns. */
uint64_t npf_clock_ns(clockid_t id);

#endif /* NPUPROF_LIB_CLOCK_H */
