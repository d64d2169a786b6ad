/* SPDX-License-Identifier: MIT */
/*
 * The replay: per device, start from the allocator's state at dump time and undo the trace
 * from its newest entry to its oldest, as PyTorch's memory viewer and the torch_npu tools do,
 * to know the allocated, active and reserved bytes after every event and the lifetime of
 * every block.
 *
 *   alloc            removes its block             free_requested  makes it allocated again
 *   free_completed   re-creates a pending block    free            re-creates an allocated block
 *   segment_free     re-inserts the segment        segment_unmap   re-inserts it, merged with
 *                                                                  neighbours of its stream
 *   segment_alloc    removes the segment           segment_map     shrinks or splits the
 *                                                                  segment it was mapped into
 *   oom, snapshot, workspace_snapshot and unknown actions change nothing.
 *
 * torch_npu puts (workspace_snapshot, segment_alloc, alloc) triples at the front of a trace
 * for workspace memory live at dump time; each counts as a segment holding one allocated
 * block at dump time.
 */
#ifndef NPUPROF_REPLAY_REPLAY_H
#define NPUPROF_REPLAY_REPLAY_H

#include "replay/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NPF_REPLAY_ERR_MAX 320u
#define NPF_REPLAY_ISSUES_KEPT 1000u    /* inconsistencies kept with detail; all are counted */
#define NPF_BEFORE_TRACE (-1)           /* a lifetime that began before the first event */
#define NPF_AFTER_TRACE INT64_MAX       /* ... or had not ended at dump time */

/*
 * How the allocator rounds a requested size up to a block's size, told from the snapshot's
 * own live blocks (npf_replay_rounding()). A block re-created by undoing its free has only
 * its requested size in the trace: the rule gives it the block the allocator would have
 * made.
 */
typedef enum npf_rounding {
        NPF_ROUNDING_UNKNOWN,           /* no live block to tell by: a re-created block keeps its requested size */
        NPF_ROUNDING_TORCH_NPU,         /* round_up(size + 32, 512), torch_npu's NPUCachingAllocator */
        NPF_ROUNDING_PYTORCH,           /* at least 512, a multiple of 512, PyTorch's CUDACachingAllocator */
} npf_rounding_t;

/*
 * One block's life, in event indices of its device's trace. Its size is what the program
 * asked for (the trace's sizes, a block's requested_size at dump time); its footprint is the
 * block's size, as the allocator counts it: read at dump time, else by the rounding rule.
 */
typedef struct npf_replay_life {
        uint64_t addr, size, footprint, stream;
        int64_t alloc;                  /* NPF_BEFORE_TRACE: a ghost, allocated before tracing */
        int64_t free_requested;         /* NPF_AFTER_TRACE: still allocated at dump */
        int64_t freed;                  /* free or free_completed; NPF_AFTER_TRACE: still active */
        uint32_t stack;                 /* where it was allocated; 0: unknown */
        uint32_t context;
} npf_replay_life_t;

/* An inconsistency of the trace with the state it is undone from. */
typedef struct npf_issue {
        size_t index;                   /* event index in the device's trace */
        uint8_t action;                 /* npf_mem_action_t */
        uint64_t addr;
        char what[112];
} npf_issue_t;

typedef struct npf_replay_range {
        uint64_t addr, size, stream;
} npf_replay_range_t;

typedef struct npf_replay {
        int64_t device;
        const npf_mem_event_t *events;      /* the device's trace, borrowed from the snapshot */
        size_t n;
        /*
         * After each event, n of each: the allocator's bytes (block sizes) of allocated and
         * of active blocks, the bytes the program requested of the allocated ones, reserved.
         */
        uint64_t *allocated, *requested, *active, *reserved;
        uint64_t start_allocated, start_requested, start_active, start_active_requested, start_reserved;
        uint64_t dump_allocated, dump_requested, dump_active, dump_active_requested, dump_reserved;
        npf_rounding_t rounding;        /* the snapshot's (npf_replay_rounding()) */
        size_t rounding_blocks;         /* the snapshot's live blocks it was told by */
        size_t rounding_obeying;        /* of them, those that obey it */
        size_t inferred_sizes;          /* re-created blocks sized by the rule */
        size_t unsized;                 /* re-created blocks with no rule: their requested size */
        size_t dump_segments;
        npf_replay_life_t *lives;
        size_t n_lives;
        npf_issue_t *issues;            /* the first NPF_REPLAY_ISSUES_KEPT */
        size_t n_issues;                /* all of them */
        size_t unheld;                  /* lives of a second live block at one address in the
                                         * snapshot, which no block holds */
        size_t workspace_segments;
        uint64_t workspace_bytes;
        size_t workspace_events;        /* the leading triples, which describe dump time */
} npf_replay_t;

/* A block live after an event: its life (addr, size asked, footprint, stream, stack) and whether its free is pending. */
typedef struct npf_replay_live {
        npf_replay_life_t life;
        bool pending;
} npf_replay_live_t;

/* The allocator's state after one event: segments by address, live blocks by address. */
typedef struct npf_replay_state {
        npf_replay_range_t *segments;
        size_t n_segments;
        npf_replay_live_t *live;               /* allocated and pending-free blocks, by address */
        size_t n_blocks;
} npf_replay_state_t;

/*
 * npf_replay_rounding() - the rounding rule most of the live blocks of @s obey, their
 * number in @ret_blocks and how many obey it in @ret_obeying (NULL: not wanted); torch_npu's
 * where as many obey both. NPF_ROUNDING_UNKNOWN when no live block obeys either.
 */
npf_rounding_t npf_replay_rounding(const npf_snapshot_t *s, size_t *ret_blocks, size_t *ret_obeying);

/* The block the allocator makes for @size under @rule: @size itself when the rule is unknown. */
uint64_t npf_rounding_block_size(npf_rounding_t rule, uint64_t size);

/* "torch_npu", "pytorch", or NULL for NPF_ROUNDING_UNKNOWN. */
const char *npf_rounding_name(npf_rounding_t rule);

/* The devices of @s that have a trace entry or a segment, ascending; their number. */
size_t npf_replay_devices(const npf_snapshot_t *s, int64_t **ret);

/*
 * npf_replay_run() - replay the trace of @device in @s.
 * With @strict, the first inconsistency fails the replay; otherwise each is recorded and the
 * replay carries on. Return: 0 and the result in @ret; -EINVAL (strict, with the
 * inconsistency in @err, NPF_REPLAY_ERR_MAX bytes) or -ENOMEM.
 * Context: any; @s must outlive the result.
 */
int npf_replay_run(const npf_snapshot_t *s, int64_t device, bool strict, npf_replay_t **ret, char *err);
npf_replay_t *npf_replay_free(npf_replay_t *r);

/*
 * npf_replay_state_at() - the segments and blocks of @r's device just after event @index
 * (or before the first event when @index is -1), by undoing the trace again down to it.
 * Return: 0 and the state in @ret, or -ENOMEM / -EINVAL (@index out of range).
 */
int npf_replay_state_at(const npf_snapshot_t *s, const npf_replay_t *r, int64_t index, npf_replay_state_t **ret);

/*
 * npf_replay_footprint_at() - npf_replay_state_at(), for a caller that wants of each block
 * only its address, sizes, stream and whether its free is pending (the fragmentation of the
 * memory). Where @r met no inconsistency, its lives say which blocks were live at any index
 * (allocated at or before it, freed after it), and only the segment events are undone
 * again: a few times quicker. A block's other fields are then the whole replay's.
 * Return: as npf_replay_state_at().
 */
int npf_replay_footprint_at(const npf_snapshot_t *s, const npf_replay_t *r, int64_t index, npf_replay_state_t **ret);
npf_replay_state_t *npf_state_free(npf_replay_state_t *st);

#endif /* NPUPROF_REPLAY_REPLAY_H */
