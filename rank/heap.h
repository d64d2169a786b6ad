/* SPDX-License-Identifier: MIT */
/*
 * Heap tracking for the host backend's profile_memory: libnpuprof-heap.so, preloaded into a
 * training process (LD_PRELOAD), wraps malloc, calloc, realloc, reallocarray, memalign,
 * aligned_alloc, posix_memalign, valloc, pvalloc and free and, while a window with
 * profile_memory is open, records every allocation of at least a minimum size and its free,
 * with call stacks, from every thread of the process. A child forked during the window does
 * not record. The host backend finds these two functions with dlsym() and writes what
 * was recorded as memory_snapshot.json, in the PyTorch memory-snapshot layout (segments,
 * device_traces), so that the analyzer treats host memory like device memory: each heap
 * allocation is a segment of one block.
 */
#ifndef NPUPROF_RANK_HEAP_H
#define NPUPROF_RANK_HEAP_H

#include <stdint.h>

#define NPF_HEAP_MIN_BYTES_DEFAULT 4096u        /* $NPUPROF_HEAP_MIN_BYTES overrides */
#define NPF_HEAP_EVENTS_MAX (1u << 20)          /* more are counted as dropped */

typedef int (*npf_heap_start_fn)(uint64_t min_bytes);
typedef int (*npf_heap_stop_fn)(const char *path, char *err);

/*
 * Start recording allocations of at least @min_bytes (0: every size), into empty tables.
 * Return: 0, -EBUSY (a window of this process records already), -ENOMEM.
 */
int npf_heap_start(uint64_t min_bytes);

/* Stop, and write what was recorded to @path. Return: 0 or -errno, the reason in @err (256 bytes). */
int npf_heap_stop(const char *path, char *err);

#endif /* NPUPROF_RANK_HEAP_H */
