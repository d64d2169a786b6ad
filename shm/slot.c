/* SPDX-License-Identifier: MIT */
/* Slots of the rank table. The claim protocol is described in include/npuprof/shm.h. */
#include "slot.h"
#include "proc.h"
#include "seqlock.h"
#include "internal.h"
#include "shm/clock.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NPF__CLAIM_TRIES 64
/*
 * A slot is read for every slot at each sweep and each status, on the daemon's loop, and
 * anyone may write the rank table: a sequence kept odd or changing for ever must cost a
 * bounded few microseconds, not a thousand yields. A rank's own write takes well under a
 * microsecond; a slot still unreadable after this is skipped until the next read.
 */
#define NPF__SLOT_READ_TRIES 16u
#define NPF__SLOT_READ_SPINS 256u

typedef _Atomic uint32_t npf__atomic_u32;

static npf__atomic_u32 *a32(const uint32_t *p)
{
        return (npf__atomic_u32 *) p;
}

static uint64_t claim_word(uint32_t tag, uint32_t pid)
{
        return (uint64_t) tag << 32 | pid;
}

uint32_t npf_slot_index(const npf_shm_ranks_t *table, const npf_shm_slot_t *slot)
{
        return (uint32_t) (slot - table->slots);
}

/*
 * Empty @slot and hand it back: the last store frees it, keeping its tag. A released slot
 * keeps its window state until it is claimed again, so that the daemon still sees how the
 * last window of a rank that closed right after it ended.
 * Context: the holder of the claim word @claim (its owner, or a reclaimer).
 */
static void slot_clear(npf_shm_slot_t *slot, uint64_t claim, bool keep_state)
{
        npf_shm_slot_state_t idle = { .state = NPF_WINDOW_IDLE };

        if (!keep_state)
                npf_slot_set_state(slot, &idle);
        atomic_store_explicit(npf__seq(&slot->proc_start), 0, memory_order_relaxed);
        atomic_store_explicit(npf__seq((uint64_t *) &slot->step), (uint64_t) -1, memory_order_relaxed);
        atomic_store_explicit(npf__seq(&slot->claim), claim_word(NPF_SLOT_TAG(claim), 0), memory_order_release);
}

/* Return: true unless the holder with pid @pid is known to be gone (or its pid reused). */
static bool holder_alive(const npf_shm_slot_t *slot, uint32_t pid)
{
        uint64_t start = atomic_load_explicit(npf__seq(&slot->proc_start), memory_order_acquire);
        uint64_t now;

        if (pid == 0 || pid == NPF_SLOT_RECLAIMING)
                return false;
        if (start == 0)         /* still claiming: alive unless the pid is gone */
                return npf_proc_start_time((pid_t) pid, &now) != -ESRCH;
        int state = npf_proc_check((pid_t) pid, start);
        return state != NPF_PROC_GONE && state != NPF_PROC_REUSED;
}

int npf_slot_reclaim(npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *ret_last)
{
        npf_shm_slot_t *slot;
        npf_slot_view_t last;
        uint64_t claim;
        uint32_t pid, rank;

        if (index >= NPF_SHM_SLOTS)
                return -ERANGE;
        slot = &table->slots[index];
        claim = atomic_load_explicit(npf__seq(&slot->claim), memory_order_acquire);
        pid = NPF_SLOT_PID(claim);
        if (pid == 0 || pid == NPF_SLOT_RECLAIMING || holder_alive(slot, pid))
                return 0;

        if (npf_slot_read(table, index, &last) < 0) {
                memset(&last, 0, sizeof(last));
                last.index = index;
                last.pid = pid;
        }
        /* Only one reclaimer wins, and only if nobody claimed the slot since we looked. */
        uint64_t mark = claim_word(NPF_SLOT_TAG(claim), NPF_SLOT_RECLAIMING);
        if (!atomic_compare_exchange_strong(npf__seq(&slot->claim), &claim, mark))
                return 0;
        rank = atomic_load_explicit(a32(&slot->rank), memory_order_relaxed);
        if (rank < NPF_SHM_MAX_RANKS) {
                uint32_t expect = NPF_INDEX_ENTRY(index, NPF_SLOT_TAG(claim));
                atomic_compare_exchange_strong(a32(&table->index[rank]), &expect, 0);
        }
        slot_clear(slot, mark, false);
        if (ret_last)
                *ret_last = last;
        return 1;
}

/* Take a free slot for (@pid, @start) and fill it in. Return: its index, or -ENOSPC. */
/*
 * The free slot where the fewest windows ended, the lowest of those: a slot keeps the last
 * NPF_SLOT_ENDED windows that ended in it for the daemon's next sweep, so ranks that come
 * and go faster than it sweeps must not all pass through one slot. Return: its index, or
 * NPF_SHM_SLOTS when none is free.
 */
static uint32_t least_used_free_slot(npf_shm_ranks_t *table)
{
        uint32_t best = NPF_SHM_SLOTS;
        uint64_t fewest = UINT64_MAX;

        for (uint32_t i = 0; i < NPF_SHM_SLOTS && fewest > 0; i++) {
                npf_shm_slot_t *slot = &table->slots[i];
                uint64_t claim = atomic_load_explicit(npf__seq(&slot->claim), memory_order_relaxed);
                uint64_t ended = atomic_load_explicit(npf__seq(&slot->windows_ended), memory_order_relaxed);

                if (NPF_SLOT_PID(claim) == 0 && ended < fewest) {
                        best = i;
                        fewest = ended;
                }
        }
        return best;
}

static int take_free_slot(npf_shm_ranks_t *table, uint32_t rank, int32_t device, uint32_t pid, uint64_t start,
                          uint64_t *ret_claim)
{
        for (int pass = 0; pass < 2; pass++) {
                for (uint32_t i = least_used_free_slot(table); i < NPF_SHM_SLOTS; i = least_used_free_slot(table)) {
                        npf_shm_slot_t *slot = &table->slots[i];
                        uint64_t claim = atomic_load_explicit(npf__seq(&slot->claim), memory_order_relaxed);

                        if (NPF_SLOT_PID(claim) != 0)
                                continue;
                        uint64_t mine = claim_word(NPF_SLOT_TAG(claim) + 1, pid);
                        if (!atomic_compare_exchange_strong(npf__seq(&slot->claim), &claim, mine))
                                continue;
                        npf_shm_slot_state_t idle = { .state = NPF_WINDOW_IDLE };
                        atomic_store_explicit(a32(&slot->rank), rank, memory_order_relaxed);
                        slot->local_device = device;
                        slot->claimed_ns = npf_clock_ns(CLOCK_REALTIME);
                        npf_slot_step(slot, -1, 0);
                        npf_slot_set_state(slot, &idle);
                        atomic_store_explicit(npf__seq(&slot->proc_start), start, memory_order_release);
                        *ret_claim = mine;
                        return (int) i;
                }
                /* Full: free what dead processes left behind, then look once more. */
                for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                        npf_slot_reclaim(table, i, NULL);
        }
        return -ENOSPC;
}

int npf_slot_claim(npf_shm_ranks_t *table, uint32_t rank, int32_t local_device,
                   npf_shm_slot_t **ret_slot, char *err)
{
        uint32_t pid = (uint32_t) getpid();
        uint64_t start;
        int r;

        if (rank >= NPF_SHM_MAX_RANKS) {
                npf__set_err(err, "rank %u is out of range (0 to %u)", rank, NPF_SHM_MAX_RANKS - 1);
                return -EINVAL;
        }
        r = npf_proc_start_time((pid_t) pid, &start);
        if (r < 0) {
                npf__set_err(err, "cannot read the start time of this process: %s", strerror(-r));
                return r;
        }

        for (int tries = 0; tries < NPF__CLAIM_TRIES; tries++) {
                npf__atomic_u32 *entry = a32(&table->index[rank]);
                uint32_t e = atomic_load_explicit(entry, memory_order_acquire);

                if (e != 0) {
                        uint32_t s = NPF_INDEX_SLOT(e);
                        if (s < NPF_SHM_SLOTS) {
                                npf_shm_slot_t *held = &table->slots[s];
                                uint64_t claim = atomic_load_explicit(npf__seq(&held->claim), memory_order_acquire);
                                uint32_t hpid = NPF_SLOT_PID(claim);
                                uint32_t hrank = atomic_load_explicit(a32(&held->rank), memory_order_relaxed);

                                if (NPF_INDEX_ENTRY(s, NPF_SLOT_TAG(claim)) == e && hpid != 0 &&
                                    (hrank == rank || hpid == NPF_SLOT_RECLAIMING)) {
                                        /* The entry is current: its slot holds this claim. */
                                        if (hpid != NPF_SLOT_RECLAIMING && holder_alive(held, hpid)) {
                                                npf__set_err(err, "rank %u is already claimed by %s %u (slot %u)", rank,
                                                             hpid == pid ? "this process," : "live process", hpid, s);
                                                return -EBUSY;
                                        }
                                        /* Its holder is gone, or being reclaimed: help, then look again. */
                                        npf_slot_reclaim(table, s, NULL);
                                        sched_yield();
                                        continue;
                                }
                        }
                        /*
                         * A stale entry (its tag is of an earlier claim) or garbage (its slot holds
                         * another rank): clearing it is safe, a current entry never looks like it.
                         */
                        atomic_compare_exchange_strong(entry, &e, 0);
                        continue;
                }

                uint64_t mine;
                r = take_free_slot(table, rank, local_device, pid, start, &mine);
                if (r < 0) {
                        npf__set_err(err, "all %u slots of the rank table are held by live processes", NPF_SHM_SLOTS);
                        return r;
                }
                uint32_t expect = 0;
                if (atomic_compare_exchange_strong(entry, &expect, NPF_INDEX_ENTRY(r, NPF_SLOT_TAG(mine)))) {
                        *ret_slot = &table->slots[r];
                        return 0;
                }
                /* Another claimant of this rank won the race: give our slot back and look. */
                slot_clear(&table->slots[r], mine, false);
        }
        npf__set_err(err, "rank %u: the rank table kept changing; try again", rank);
        return -EAGAIN;
}

void npf_slot_release(npf_shm_ranks_t *table, npf_shm_slot_t *slot)
{
        uint32_t index = npf_slot_index(table, slot);
        uint64_t claim = atomic_load_explicit(npf__seq(&slot->claim), memory_order_acquire);
        uint32_t rank = atomic_load_explicit(a32(&slot->rank), memory_order_relaxed);

        /* Only our own claim is released; one a reclaimer already took is left to it. */
        if (NPF_SLOT_PID(claim) != (uint32_t) getpid())
                return;
        uint64_t mark = claim_word(NPF_SLOT_TAG(claim), NPF_SLOT_RECLAIMING);
        if (!atomic_compare_exchange_strong(npf__seq(&slot->claim), &claim, mark))
                return;
        if (rank < NPF_SHM_MAX_RANKS) {
                uint32_t expect = NPF_INDEX_ENTRY(index, NPF_SLOT_TAG(claim));
                atomic_compare_exchange_strong(a32(&table->index[rank]), &expect, 0);
        }
        slot_clear(slot, mark, true);
}

void npf_slot_step(npf_shm_slot_t *slot, int64_t step, uint64_t monotonic_ns)
{
        atomic_store_explicit(npf__seq((uint64_t *) &slot->step), (uint64_t) step, memory_order_relaxed);
        atomic_store_explicit(npf__seq(&slot->heartbeat_ns), monotonic_ns, memory_order_relaxed);
}

/* Return: true if @state is how a window ended. */
static bool is_outcome(uint32_t state)
{
        return state == NPF_WINDOW_DONE || state == NPF_WINDOW_FAILED || state == NPF_WINDOW_MISSED ||
               state == NPF_WINDOW_FILTERED;
}

void npf_slot_set_state(npf_shm_slot_t *slot, const npf_shm_slot_state_t *st)
{
        npf_shm_slot_state_t copy = *st;
        uint64_t s;

        copy.message[sizeof(copy.message) - 1] = '\0';
        copy.output[sizeof(copy.output) - 1] = '\0';
        copy.rank = slot->rank;
        copy.pid = NPF_SLOT_PID(atomic_load_explicit((_Atomic uint64_t *) &slot->claim, memory_order_relaxed));
        s = npf__seq_write_begin(&slot->seq);
        npf__seq_copy_in(&slot->st, &copy, sizeof(copy));
        /* A window that ended is also kept apart, for the daemon, until the next one ends. */
        if (is_outcome(copy.state)) {
                uint64_t ended = atomic_load_explicit(npf__seq(&slot->windows_ended), memory_order_relaxed);
                npf__seq_copy_in(&slot->ended[ended % NPF_SLOT_ENDED], &copy, sizeof(copy));
                atomic_store_explicit(npf__seq(&slot->windows_ended), ended + 1, memory_order_relaxed);
        }
        npf__seq_write_end(&slot->seq, s);
}

/* Return: true if every record of ended windows is terminated and names a state. */
static bool ended_ok(const npf_shm_slot_state_t *ended)
{
        for (uint32_t k = 0; k < NPF_SLOT_ENDED; k++)
                if (!memchr(ended[k].message, '\0', sizeof(ended[k].message)) ||
                    !memchr(ended[k].output, '\0', sizeof(ended[k].output)) || ended[k].state >= NPF_WINDOW__COUNT)
                        return false;
        return true;
}

/* Read slot @index into @v, its ended windows only if @with_ended (else they are zeroes). */
static int slot_read(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *v, bool with_ended)
{
        const npf_shm_slot_t *slot;

        if (index >= NPF_SHM_SLOTS)
                return -ERANGE;
        slot = &table->slots[index];
        uint64_t claim = atomic_load_explicit(npf__seq(&slot->claim), memory_order_acquire);
        v->index = index;
        v->pid = NPF_SLOT_PID(claim);
        v->tag = NPF_SLOT_TAG(claim);
        v->rank = atomic_load_explicit(a32(&slot->rank), memory_order_relaxed);
        v->proc_start = atomic_load_explicit(npf__seq(&slot->proc_start), memory_order_relaxed);
        v->step = (int64_t) atomic_load_explicit(npf__seq((const uint64_t *) &slot->step), memory_order_relaxed);
        v->heartbeat_ns = atomic_load_explicit(npf__seq(&slot->heartbeat_ns), memory_order_relaxed);
        v->claimed_ns = atomic_load_explicit(npf__seq(&slot->claimed_ns), memory_order_relaxed);
        v->local_device = (int32_t) atomic_load_explicit(a32((const uint32_t *) &slot->local_device),
                                                         memory_order_relaxed);
        if (!with_ended)
                memset(v->ended, 0, sizeof(v->ended));

        for (unsigned tries = 0; tries < NPF__SLOT_READ_TRIES; tries++) {
                uint64_t s = npf__seq_read_begin_bounded(&slot->seq, NPF__SLOT_READ_SPINS);
                if (s == UINT64_MAX)
                        continue;
                npf__seq_copy_out(&v->st, &slot->st, sizeof(v->st));
                if (with_ended)
                        npf__seq_copy_out(v->ended, slot->ended, sizeof(v->ended));
                v->windows_ended = atomic_load_explicit(npf__seq(&slot->windows_ended), memory_order_relaxed);
                if (npf__seq_read_retry(&slot->seq, s))
                        continue;
                if (!memchr(v->st.message, '\0', sizeof(v->st.message)) ||
                    !memchr(v->st.output, '\0', sizeof(v->st.output)) || v->st.state >= NPF_WINDOW__COUNT ||
                    (with_ended && !ended_ok(v->ended)))
                        return -EBADMSG;
                return 0;
        }
        return -EAGAIN;
}

int npf_slot_read(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *ret_view)
{
        return slot_read(table, index, ret_view, true);
}

int npf_slot_read_current(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *ret_view)
{
        return slot_read(table, index, ret_view, false);
}
