/* SPDX-License-Identifier: MIT */
/*
 * A caching-allocator memory snapshot, as PyTorch's and torch_npu's _dump_snapshot write it:
 * the segments and blocks at dump time and each device's trace of allocator events. Read
 * from a pickle (protocols 2 to 5, through replay/pickle.h), from the same dictionary as
 * JSON, or from the legacy bare list of segments. Unknown keys and actions are ignored;
 * frames, stacks and strings are interned (replay/intern.h).
 */
#ifndef NPUPROF_REPLAY_SNAPSHOT_H
#define NPUPROF_REPLAY_SNAPSHOT_H

#include "replay/input.h"
#include "replay/intern.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NPF_SNAPSHOT_ERR_MAX 320u
#define NPF_TIME_UNKNOWN INT64_MIN

typedef enum npf_mem_action {
        NPF_MEM_ALLOC,
        NPF_MEM_FREE_REQUESTED,
        NPF_MEM_FREE_COMPLETED,
        NPF_MEM_FREE,                   /* older PyTorch: one event for both */
        NPF_MEM_SEGMENT_ALLOC,
        NPF_MEM_SEGMENT_FREE,
        NPF_MEM_SEGMENT_MAP,            /* expandable segments */
        NPF_MEM_SEGMENT_UNMAP,
        NPF_MEM_OOM,                    /* addr holds device_free */
        NPF_MEM_SNAPSHOT,
        NPF_MEM_WORKSPACE_SNAPSHOT,     /* torch_npu */
        NPF_MEM_UNKNOWN,
        NPF_MEM__COUNT
} npf_mem_action_t;

typedef struct npf_mem_event {
        uint64_t addr;          /* NPF_MEM_OOM: the device's free bytes */
        uint64_t size;
        uint64_t stream;
        int64_t time_us;        /* NPF_TIME_UNKNOWN when absent */
        uint32_t stack;         /* interned frames, 0: none */
        uint32_t context;       /* interned compile_context, 0: none */
        uint32_t user;          /* interned user_metadata, 0: none */
        uint8_t action;         /* npf_mem_action_t */
        uint8_t pad[3];
} npf_mem_event_t;

typedef enum npf_block_state {
        NPF_BLOCK_INACTIVE,
        NPF_BLOCK_ALLOCATED,            /* active_allocated */
        NPF_BLOCK_PENDING_FREE,         /* active_pending_free: freed, waiting on a stream */
} npf_block_state_t;

typedef struct npf_block {
        uint64_t addr, size, requested;
        uint32_t stack;
        uint8_t state;          /* npf_block_state_t */
} npf_block_t;

typedef struct npf_segment {
        uint64_t addr, total, allocated, active, requested, stream;
        int64_t device;
        uint32_t stack;
        uint32_t type;          /* interned segment_type ("large", "small") */
        size_t first_block, n_blocks;   /* in npf_snapshot_t.blocks */
        bool expandable;
} npf_segment_t;

typedef struct npf_device_trace {
        size_t first, n;        /* in npf_snapshot_t.events */
} npf_device_trace_t;

typedef struct npf_snapshot {
        npf_segment_t *segments;
        size_t n_segments;
        npf_block_t *blocks;
        size_t n_blocks;
        npf_mem_event_t *events;            /* every device's trace, device by device */
        size_t n_events;
        npf_device_trace_t *traces;     /* index: device */
        size_t n_traces;
        npf_intern_t *intern;
        json_t *allocator_settings;     /* NULL when absent */
        size_t n_annotations;           /* external_annotations */
        bool legacy;                    /* a bare list of segments */
        const char *format;             /* "pickle" or "json" */
        size_t input_bytes;
} npf_snapshot_t;

/*
 * npf_snapshot_load() - read the snapshot at @path (pickle or JSON, told by its first byte).
 * npf_snapshot_loadb() - the same from @len bytes at @buf.
 * Return: 0 and the snapshot in @ret; or -EINVAL with a sentence in @err
 * (NPF_SNAPSHOT_ERR_MAX bytes) naming where the input is wrong ("device_traces[0][17]: size
 * is a str, not an int"), -EPERM for a pickle that would run code, -ENOMEM, or -errno of
 * opening and reading @path.
 * Context: any; reentrant.
 */
int npf_snapshot_load(const char *path, npf_input_progress_cb progress, void *userdata, npf_snapshot_t **ret,
                      char *err);
int npf_snapshot_loadb(const void *buf, size_t len, npf_input_progress_cb progress, void *userdata,
                       npf_snapshot_t **ret, char *err);
/* npf_snapshot_loadb() with npf_pickle_load()'s @flags for a pickle (NPF_PICKLE_OPCODES_ONLY,
 * NPF_PICKLE_NO_DIRECT), for tests that compare the reader's paths: the result is the same. */
int npf_snapshot_loadb_flags(const void *buf, size_t len, unsigned flags, npf_input_progress_cb progress,
                             void *userdata, npf_snapshot_t **ret, char *err);

npf_snapshot_t *npf_snapshot_free(npf_snapshot_t *s);

/* "alloc", "segment_map", ...; "unknown" for NPF_MEM_UNKNOWN. */
const char *npf_action_name(npf_mem_action_t a);

#endif /* NPUPROF_REPLAY_SNAPSHOT_H */
