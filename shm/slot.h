/* SPDX-License-Identifier: MIT */
/*
 * Slots of the rank table: claim, step and heartbeat, window state, release and reclaim.
 * A slot is owned by the process that claimed it, which holds an open-file-description
 * lock on the bytes of the slot's hot entry (include/npuprof/shm.h) for as long as it
 * holds the slot; the daemon reclaims it only once that lock is gone, whatever pid
 * namespace its holder ran in. Slots of holders that take no lock (an older libnpuprof)
 * are reclaimed once their pid is gone or belongs to another process.
 */
#ifndef NPUPROF_SLOT_H
#define NPUPROF_SLOT_H

#include <stdbool.h>
#include <sys/types.h>

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
        uint64_t seq;                   /* the even sequence st was read at; 0 after npf_slot_read_hot() */
        npf_shm_slot_state_t st;        /* strings NUL-terminated */
        npf_shm_slot_state_t ended[NPF_SLOT_ENDED];     /* window n at [n % NPF_SLOT_ENDED] */
        uint64_t windows_ended;         /* how many have ended in this slot */
} npf_slot_view_t;

/*
 * A claimed slot, as its holder keeps it: the caller's, given back with npf_slot_release().
 * Its descriptor holds the slot's lock; a child forked from the holder has it closed at
 * fork (by a handler of pthread_atfork()), so that a child never keeps its parent's slot.
 */
typedef struct npf_slot_lease {
        npf_shm_slot_t *slot;           /* NULL: no slot */
        uint64_t claim;                 /* the claim word of this claim */
        int lock_fd;                    /* holds the lock on the hot entry's bytes */
        pid_t owner;                    /* getpid() of the claimant */
} npf_slot_lease_t;

/*
 * npf_slot_claim() - claim the slot of global rank @rank for the calling process.
 * A slot left by a process that is gone is taken over; so is one whose holder took no
 * lock and whose pid was reused. The slot is locked before it is claimed, through a new
 * open file description of the rank table (one descriptor per claim, close-on-exec).
 * Return: 0 and the claim in @ret_lease; -EINVAL if @rank >= NPF_SHM_MAX_RANKS; -EBUSY if
 * a live process holds @rank (@err, of NPF_SHM_ERR_MAX bytes, names it); -ENOSPC if all
 * slots are taken by live processes; -ESTALE if @shm's rank table was removed and made
 * anew; -EMFILE and other -errno when the rank table cannot be opened again or locked.
 * Context: any thread; at most one slot per rank id per node.
 */
int npf_slot_claim(npf_shm_t *shm, uint32_t rank, int32_t local_device, npf_slot_lease_t *ret_lease, char *err);

/*
 * Give the slot of @lease back and close its descriptor; its window state stays readable
 * until the slot is claimed again. A slot that a reclaimer took meanwhile is left to it.
 * In any process but the claimant (a forked child), nothing is done. Accepts an empty
 * lease; empties @lease. Context: the owner.
 */
void npf_slot_release(npf_shm_t *shm, npf_slot_lease_t *lease);

/*
 * In a child forked from the holder of @lease: let go of what the child inherited of it
 * (its descriptor, unless the fork handler closed it already), leaving the slot and its
 * lock to the parent. Empties @lease.
 */
void npf_slot_abandon(npf_slot_lease_t *lease);

/* Record the step the owner is at and the heartbeat time. Context: the owner, per step. */
void npf_slot_step(npf_shm_slot_t *slot, int64_t step, uint64_t monotonic_ns);

/*
 * Publish the window state @st of @slot, a hot entry of @table, into its cold entry
 * (strings are cut to their arrays). When @st is how a window ended (done, failed, missed,
 * filtered) it is also kept among the slot's last ended windows and the count of ended
 * windows moves, so the daemon sees it even if the rank moves on at once.
 * Context: the owner.
 */
void npf_slot_set_state(npf_shm_ranks_t *table, npf_shm_slot_t *slot, const npf_shm_slot_state_t *st);

/* Return: the cold entry of slot @index of @table (@index < NPF_SHM_SLOTS). */
npf_shm_slot_cold_t *npf_slot_cold(const npf_shm_ranks_t *table, uint32_t index);

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
 * npf_slot_pread(), npf_slot_pread_current() - npf_slot_read() and npf_slot_read_current()
 * for a long-lived reader of every slot (the daemon): the cold entry is copied by pread()
 * through @shm's descriptor on the rank table, not through the mapping, so that no cold page
 * is ever mapped in the reader (with 1,024 ranks, 2.2 MiB that would stay resident in it).
 * Return: as npf_slot_read(), or -EIO when the object was cut short.
 */
int npf_slot_pread(const npf_shm_t *shm, uint32_t index, npf_slot_view_t *ret_view);
int npf_slot_pread_current(const npf_shm_t *shm, uint32_t index, npf_slot_view_t *ret_view);

/*
 * npf_slot_read_hot() - the words of slot @index's hot entry alone (claim, rank, device,
 * proc_start, step, heartbeat, claimed_ns) into @view, whose st, ended, windows_ended and
 * seq are left as they were: for a reader that knows, by the slot's seq (npf_slot_seq()),
 * that its window state did not move since it last read it. No byte of the cold entry is read.
 * Return: 0, or -ERANGE for a bad index.
 */
int npf_slot_read_hot(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *view);

/*
 * npf_slot_reclaim() - free slot @index if its holder is gone: its lock is no longer held,
 * or, for a holder that took no lock, its pid is gone or was reused.
 * Return: 1 if it was reclaimed (its last contents in @ret_last, when not NULL), 0 if it
 * is free or its owner alive, -ERANGE for a bad index.
 * Context: the daemon's sweep, or a claimant; safe against concurrent reclaimers.
 */
int npf_slot_reclaim(npf_shm_t *shm, uint32_t index, npf_slot_view_t *ret_last);

/*
 * npf_slot_guarded() - whether the holder of @claim in @slot took the slot's lock: if so,
 * its lock alone says whether it lives, else its pid does.
 */
bool npf_slot_guarded(const npf_shm_slot_t *slot, uint64_t claim);

/* Who holds a slot, as a reader sees it. */
typedef struct npf_slot_holder {
        uint32_t tag;                   /* of the claim; 0: nothing looked up */
        uint32_t pid;                   /* the holder's pid in the reader's pid namespace; 0: not known */
} npf_slot_holder_t;

/*
 * npf_slot_find_holders() - for each slot @want marks (an array of NPF_SHM_SLOTS), the pid
 * of its holder in the caller's pid namespace, into @holders[slot] with the claim's tag:
 * the pid it recorded when that process started when the holder did, else the process
 * that holds the slot's lock, found through /proc (a holder in another pid namespace;
 * unknown if the caller may not see it). A slot that is free, or whose claim is not yet
 * complete, is left as it was.
 * Context: the daemon's sweep. Reads /proc/PID/stat per slot, and every process's only
 * for holders in another pid namespace.
 */
void npf_slot_find_holders(npf_shm_t *shm, const bool *want, npf_slot_holder_t *holders);

/*
 * The pid of the holder that @v shows, as the caller sees it, when its recorded pid is
 * that process's (it started when the holder did); 0 when that is not known.
 */
uint32_t npf_slot_pid_here(const npf_slot_view_t *v);

/*
 * A slot's words as a sweep or a view reads them one at a time, outside its seqlock: the
 * claim word (holder's tag and pid; relaxed), the holder's start time (acquire: stored
 * last by a claim, so a nonzero one is the completed claim's) and the sequence of its cold
 * entry (relaxed: a hint that the window state moved, read again under the seqlock).
 * Context: any reader of the rank table.
 */
uint64_t npf_slot_claim_word(const npf_shm_slot_t *slot);
uint64_t npf_slot_proc_start(const npf_shm_slot_t *slot);
uint64_t npf_slot_seq(const npf_shm_slot_t *slot);

/* Return: the slot index of @slot in @table. */
uint32_t npf_slot_index(const npf_shm_ranks_t *table, const npf_shm_slot_t *slot);

/*
 * Requests for a holder's stacks (the words stacks_asked, stacks_done and stacks_error of
 * include/npuprof/shm.h). The daemon asks; the holder, which waits on the request word
 * with a futex shared between processes (no FUTEX_PRIVATE_FLAG), writes its stacks and
 * answers with the number of the request it served. It serves the newest: an answer to a
 * later request answers the earlier ones too.
 */

/*
 * npf_slot_ask_stacks() - ask the holder of @slot for its stacks: one more request, and a
 * FUTEX_WAKE of whoever waits on the request word.
 * Return: 0 and the request's number in @ret_asked.
 * Context: the daemon, on a slot it may write; any thread.
 */
int npf_slot_ask_stacks(npf_shm_slot_t *slot, uint32_t *ret_asked);

/*
 * npf_slot_stacks_answered() - has the holder answered request @asked (or a later one)?
 * Return: true if so, with the answer's error (0, or the positive errno of a failed write)
 * in @ret_error, which may be NULL; false while it has not.
 * Context: any reader of the rank table, read-only mappings included.
 */
bool npf_slot_stacks_answered(const npf_shm_slot_t *slot, uint32_t asked, int *ret_error);

/* The newest request (acquire: what the daemon wrote before it asked is seen). Context: the holder. */
uint32_t npf_slot_stacks_asked(const npf_shm_slot_t *slot);

/* The number of the last request the holder answered. Context: any. */
uint32_t npf_slot_stacks_done(const npf_shm_slot_t *slot);

/*
 * npf_slot_wait_stacks() - wait, at most @timeout_ms, while the request word of @slot still
 * holds @seen. The word's address may be unmapped meanwhile by another thread: the kernel
 * then answers at once with an error, or waits on nothing until the timeout.
 * Return: 0 when woken or the word differs, -ETIMEDOUT, -EINTR, or another -errno.
 * Context: the holder's thread that answers requests.
 */
int npf_slot_wait_stacks(const npf_shm_slot_t *slot, uint32_t seen, unsigned timeout_ms);

/* Wake whoever waits on @slot's request word, leaving it as it is. Context: the holder. */
void npf_slot_wake_stacks(const npf_shm_slot_t *slot);

/*
 * npf_slot_answer_stacks() - answer request @asked: @error (0, or a positive errno), then,
 * last (release), the request's number.
 * Context: the holder.
 */
void npf_slot_answer_stacks(npf_shm_slot_t *slot, uint32_t asked, int error);

#endif /* NPUPROF_SLOT_H */
