/* SPDX-License-Identifier: MIT */
/*
 * Slots of the rank table: claim, step and heartbeat, window state, release and reclaim.
 * A slot is owned by the process that claimed it; the daemon reclaims it only once that
 * process is gone or its pid belongs to another process.
 */
#ifndef NPUPROF_SLOT_H
#define NPUPROF_SLOT_H

#include "npuprof/shm.h"

#define NPF_SLOT_RECLAIMING UINT32_MAX  /* pid half of the claim word while a slot is reclaimed */

/* What a slot holds, read untorn, with identity and liveness. */
typedef struct npf_slot_view {
        uint32_t index;                 /* slot number in the table */
        uint32_t pid;                   /* 0 = free, NPF_SLOT_RECLAIMING while reclaimed */
        uint32_t tag;                   /* of the current claim */
        uint32_t rank;
        int32_t  local_device;
        uint64_t proc_start;
        int64_t  step;
        uint64_t heartbeat_ns;
        uint64_t claimed_ns;
        npf_shm_slot_state_t st;        /* strings NUL-terminated */
        npf_shm_slot_state_t ended[NPF_SLOT_ENDED];     /* window n at [n % NPF_SLOT_ENDED] */
        uint64_t windows_ended;         /* how many have ended in this slot */
} npf_slot_view_t;

/*
 * npf_slot_claim() - claim the slot of global rank @rank for the calling process.
 * A slot left by a process that is gone (or whose pid was reused) is taken over.
 * Return: 0 and the slot in @ret_slot; -EINVAL if @rank >= NPF_SHM_MAX_RANKS; -EBUSY if
 * a live process holds @rank (@err, of NPF_SHM_ERR_MAX bytes, names it); -ENOSPC if all
 * slots are taken by live processes.
 * Context: any thread; at most one slot per rank id per node.
 */
int npf_slot_claim(npf_shm_ranks_t *table, uint32_t rank, int32_t local_device,
                   npf_shm_slot_t **ret_slot, char *err);

/* Give the slot back; its window state stays readable until the slot is claimed again. Context: the owner. */
void npf_slot_release(npf_shm_ranks_t *table, npf_shm_slot_t *slot);

/* Record the step the owner is at and the heartbeat time. Context: the owner, per step. */
void npf_slot_step(npf_shm_slot_t *slot, int64_t step, uint64_t monotonic_ns);

/*
 * Publish the window state @st (strings are cut to their arrays). When @st is how a window
 * ended (done, failed, missed, filtered) it is also kept among the slot's last ended windows
 * and the count of ended windows moves, so the daemon sees it even if the rank moves on at once.
 * Context: the owner.
 */
void npf_slot_set_state(npf_shm_slot_t *slot, const npf_shm_slot_state_t *st);

/*
 * npf_slot_read() - read slot @index untorn, strings bounded.
 * Return: 0, -ERANGE for a bad index, -EBADMSG if the state is not well-formed, -EAGAIN
 * if no stable copy could be had in a bounded number of tries (it never yields the CPU,
 * whatever a process wrote into the slot). On an error @ret_view holds nothing to use.
 * Context: any; the daemon's loop reads every slot this way.
 */
int npf_slot_read(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *ret_view);

/*
 * npf_slot_read_current() - npf_slot_read() without the slot's ended windows (@ret_view's
 * are zeroes; windows_ended is read): a seventh of the copying, for readers that only
 * want the rank as it is now, or that know no window ended since they last looked.
 */
int npf_slot_read_current(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *ret_view);

/*
 * npf_slot_reclaim() - free slot @index if its process is gone or its pid was reused.
 * Return: 1 if it was reclaimed (its last contents in @ret_last, when not NULL), 0 if it
 * is free or its owner alive, -ERANGE for a bad index.
 * Context: the daemon's sweep, or a claimant; safe against concurrent reclaimers.
 */
int npf_slot_reclaim(npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *ret_last);

/* Return: the slot index of @slot in @table. */
uint32_t npf_slot_index(const npf_shm_ranks_t *table, const npf_shm_slot_t *slot);

#endif /* NPUPROF_SLOT_H */
