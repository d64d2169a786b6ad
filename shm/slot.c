/* SPDX-License-Identifier: MIT */
/* Slots of the rank table. The claim protocol is described in include/npuprof/shm.h. */
#include "slot.h"
#include "lib/proc.h"
#include "seqlock.h"
#include "internal.h"
#include "lib/clock.h"
#include "lib/futex.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* --- the descriptors that hold slot locks, closed in a forked child ---------------------- */

/*
 * Every descriptor of this process that holds (or is about to hold) a slot's lock. A child
 * of fork() shares its parent's open file descriptions, and with them their locks: were
 * the child to keep them open, a parent that died would look alive for as long as the
 * child ran. The fork handler closes them all in the child.
 */
typedef struct lock_fd {
        int fd;
        pid_t owner;                    /* the process that opened it */
} lock_fd_t;

static pthread_mutex_t lock_fds_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t lock_fds_once = PTHREAD_ONCE_INIT;
static lock_fd_t *lock_fds;
static size_t lock_fds_count, lock_fds_size;

static void lock_fds_prepare(void)
{
        pthread_mutex_lock(&lock_fds_mutex);
}

static void lock_fds_parent(void)
{
        pthread_mutex_unlock(&lock_fds_mutex);
}

/* In the child: its parent's slots are the parent's. Only close(), async-signal-safe. */
static void lock_fds_child(void)
{
        for (size_t i = 0; i < lock_fds_count; i++)
                close(lock_fds[i].fd);
        lock_fds_count = 0;
        pthread_mutex_unlock(&lock_fds_mutex);
}

static void lock_fds_init(void)
{
        pthread_atfork(lock_fds_prepare, lock_fds_parent, lock_fds_child);
}

/* Note @fd, opened by this process, as a lock holder. Return: 0 or -ENOMEM. */
static int lock_fd_add(int fd)
{
        int r = 0;

        pthread_once(&lock_fds_once, lock_fds_init);
        pthread_mutex_lock(&lock_fds_mutex);
        if (lock_fds_count == lock_fds_size) {
                size_t size = lock_fds_size ? 2 * lock_fds_size : 16;
                lock_fd_t *more = realloc(lock_fds, size * sizeof(*more));
                if (more) {
                        lock_fds = more;
                        lock_fds_size = size;
                } else {
                        r = -ENOMEM;
                }
        }
        if (r == 0)
                lock_fds[lock_fds_count++] = (lock_fd_t) { .fd = fd, .owner = getpid() };
        pthread_mutex_unlock(&lock_fds_mutex);
        return r;
}

/*
 * Close @fd if it is a lock holder that process @owner opened and this process still has
 * open: in a forked child, the fork handler closed its parent's, and a number it reused
 * for a claim of its own is not the parent's. Return: true if it was.
 */
static bool lock_fd_close(int fd, pid_t owner)
{
        bool found = false;

        pthread_mutex_lock(&lock_fds_mutex);
        for (size_t i = 0; i < lock_fds_count && !found; i++)
                if (lock_fds[i].fd == fd && lock_fds[i].owner == owner) {
                        lock_fds[i] = lock_fds[--lock_fds_count];
                        found = true;
                }
        if (found)
                close(fd);
        pthread_mutex_unlock(&lock_fds_mutex);
        return found;
}

/* --- slot locks ---------------------------------------------------------------------------- */

/*
 * The bytes a slot's lock covers: its hot entry's. A claimant writes its cold entry too, but
 * the lock only says who holds the slot, and one range per slot is all it needs.
 */
static off_t lock_start(uint32_t index)
{
        return (off_t) (offsetof(npf_shm_ranks_t, slots) + (size_t) index * sizeof(npf_shm_slot_t));
}

/* Take (F_WRLCK) or drop (F_UNLCK) the lock on slot @index's hot entry. Return: 0, -EAGAIN if held, -errno. */
static int slot_lock(int fd, uint32_t index, short type)
{
        struct flock lk = {
                .l_type = type,
                .l_whence = SEEK_SET,
                .l_start = lock_start(index),
                .l_len = sizeof(npf_shm_slot_t),
        };

        if (fcntl(fd, F_OFD_SETLK, &lk) < 0)
                return errno == EACCES ? -EAGAIN : -errno;
        return 0;
}

/*
 * Return: 1 if another open file description than @fd's holds a write lock on slot
 * @index's hot entry, 0 if none does, -errno if the kernel could not tell. A read lock is no
 * holder's: anyone who may read the table can take one.
 */
static int slot_locked(int fd, uint32_t index)
{
        struct flock lk = {
                .l_type = F_WRLCK,
                .l_whence = SEEK_SET,
                .l_start = lock_start(index),
                .l_len = sizeof(npf_shm_slot_t),
        };

        if (fcntl(fd, F_OFD_GETLK, &lk) < 0)
                return -errno;
        return lk.l_type == F_WRLCK;
}

uint64_t npf_slot_claim_word(const npf_shm_slot_t *slot)
{
        return atomic_load_explicit(npf__seq(&slot->claim), memory_order_relaxed);
}

uint64_t npf_slot_proc_start(const npf_shm_slot_t *slot)
{
        return atomic_load_explicit(npf__seq(&slot->proc_start), memory_order_acquire);
}

uint64_t npf_slot_seq(const npf_shm_slot_t *slot)
{
        return atomic_load_explicit(npf__seq(&slot->seq), memory_order_relaxed);
}

npf_shm_slot_cold_t *npf_slot_cold(const npf_shm_ranks_t *table, uint32_t index)
{
        return (npf_shm_slot_cold_t *) &table->cold[index];
}

bool npf_slot_guarded(const npf_shm_slot_t *slot, uint64_t claim)
{
        return atomic_load_explicit(a32(&slot->lock_tag), memory_order_relaxed) == NPF_SLOT_TAG(claim);
}

/*
 * Empty @slot and hand it back: the last store frees it, keeping its tag. A released slot
 * keeps its window state until it is claimed again, so that the daemon still sees how the
 * last window of a rank that closed right after it ended.
 * Context: the holder of the claim word @claim (its owner, or a reclaimer).
 */
static void slot_clear(npf_shm_ranks_t *table, npf_shm_slot_t *slot, uint64_t claim, bool keep_state)
{
        npf_shm_slot_state_t idle = { .state = NPF_WINDOW_IDLE };

        if (!keep_state)
                npf_slot_set_state(table, slot, &idle);
        atomic_store_explicit(npf__seq(&slot->proc_start), 0, memory_order_relaxed);
        atomic_store_explicit(npf__seq((uint64_t *) &slot->step), (uint64_t) -1, memory_order_relaxed);
        atomic_store_explicit(npf__seq(&slot->claim), claim_word(NPF_SLOT_TAG(claim), 0), memory_order_release);
}

/*
 * Return: true unless the holder of @claim in slot @index is known to be gone, asking
 * through @fd (an open file description that holds no lock on that slot): a claim made
 * under a lock lives as long as its lock; any other is judged by its pid and start time.
 */
static bool holder_alive(const npf_shm_ranks_t *table, int fd, uint32_t index, uint64_t claim)
{
        const npf_shm_slot_t *slot = &table->slots[index];
        uint32_t pid = NPF_SLOT_PID(claim);
        uint64_t start, now;

        if (pid == 0 || pid == NPF_SLOT_RECLAIMING)
                return false;
        int locked = slot_locked(fd, index);
        if (locked != 0)
                return true;    /* locked, or the kernel cannot tell: alive */
        if (npf_slot_guarded(slot, claim))
                return false;   /* its lock is gone, and with it its holder, in whatever namespace */
        /* A holder that takes no lock (an older libnpuprof): judged by its pid. */
        start = atomic_load_explicit(npf__seq(&slot->proc_start), memory_order_acquire);
        if (start == 0)         /* still claiming: alive unless the pid is gone */
                return npf_proc_start_time((pid_t) pid, &now) != -ESRCH;
        int state = npf_proc_check((pid_t) pid, start);
        return state != NPF_PROC_GONE && state != NPF_PROC_REUSED;
}

static int slot_read(const npf_shm_ranks_t *table, int fd, uint32_t index, npf_slot_view_t *v, bool with_ended);

/* npf_slot_reclaim(), asking about locks through @fd. */
static int reclaim(npf_shm_ranks_t *table, int fd, uint32_t index, npf_slot_view_t *ret_last)
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
        if (pid == 0 || pid == NPF_SLOT_RECLAIMING || holder_alive(table, fd, index, claim))
                return 0;

        if (slot_read(table, fd, index, &last, true) < 0) {
                memset(&last, 0, sizeof(last));
                last.index = index;
                last.pid = pid;
                last.tag = NPF_SLOT_TAG(claim);
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
        slot_clear(table, slot, mark, false);
        if (ret_last)
                *ret_last = last;
        return 1;
}

int npf_slot_reclaim(npf_shm_t *shm, uint32_t index, npf_slot_view_t *ret_last)
{
        return reclaim(npf_shm_ranks(shm), npf__shm_ranks_fd(shm), index, ret_last);
}

/*
 * The free slot where the fewest windows ended, the lowest of those, that @busy (a bit
 * per slot) does not mark: a slot keeps the last NPF_SLOT_ENDED windows that ended in it
 * for the daemon's next sweep, so ranks that come and go faster than it sweeps must not
 * all pass through one slot. Return: its index, or NPF_SHM_SLOTS when none is free.
 */
static uint32_t least_used_free_slot(npf_shm_ranks_t *table, const uint64_t *busy)
{
        uint32_t best = NPF_SHM_SLOTS;
        uint64_t fewest = UINT64_MAX;

        for (uint32_t i = 0; i < NPF_SHM_SLOTS && fewest > 0; i++) {
                npf_shm_slot_t *slot = &table->slots[i];
                uint64_t claim = atomic_load_explicit(npf__seq(&slot->claim), memory_order_relaxed);
                uint64_t ended = atomic_load_explicit(npf__seq(&slot->windows_ended), memory_order_relaxed);

                if (NPF_SLOT_PID(claim) == 0 && ended < fewest && !(busy[i / 64] >> (i % 64) & 1)) {
                        best = i;
                        fewest = ended;
                }
        }
        return best;
}

/*
 * A new claim has no request for stacks outstanding: the request word goes back to the last
 * one answered. A request an earlier holder left unanswered is never taken for answered (the
 * answer word is not moved forward over it), and a release or reclaim leaves both words be,
 * so that the daemon still sees such a request unanswered, its holder gone.
 */
static void stacks_reset(npf_shm_slot_t *slot)
{
        atomic_store_explicit(a32((uint32_t *) &slot->stacks_error), 0, memory_order_relaxed);
        atomic_store_explicit(a32(&slot->stacks_asked), npf_slot_stacks_done(slot), memory_order_relaxed);
}

/*
 * Lock a free slot through @fd, claim it for (@pid, @start) and fill it in. A free slot
 * that another open file description holds locked is being claimed (or was just released):
 * it is passed over. Return: its index, -ENOSPC, or -errno when a lock cannot be taken.
 */
static int take_free_slot(npf_shm_ranks_t *table, int fd, uint32_t rank, int32_t device, uint32_t pid,
                          uint64_t start, uint64_t *ret_claim)
{
        uint64_t busy[NPF_SHM_SLOTS / 64] = { 0 };

        for (int pass = 0; pass < 2; pass++) {
                for (uint32_t i = least_used_free_slot(table, busy); i < NPF_SHM_SLOTS;
                     i = least_used_free_slot(table, busy)) {
                        npf_shm_slot_t *slot = &table->slots[i];
                        int r = slot_lock(fd, i, F_WRLCK);

                        if (r == -EAGAIN) {
                                busy[i / 64] |= UINT64_C(1) << (i % 64);
                                continue;
                        }
                        if (r < 0)
                                return r;
                        uint64_t claim = atomic_load_explicit(npf__seq(&slot->claim), memory_order_acquire);
                        if (NPF_SLOT_PID(claim) != 0) {
                                slot_lock(fd, i, F_UNLCK);
                                continue;
                        }
                        /*
                         * The lock is ours, so no other claimant that locks writes lock_tag now.
                         * It names the claim before the claim exists: a claimant that died
                         * after claiming is never taken for one that took no lock.
                         */
                        uint32_t was = atomic_load_explicit(a32(&slot->lock_tag), memory_order_relaxed);
                        uint32_t tag = NPF_SLOT_TAG(claim) + 1;
                        atomic_store_explicit(a32(&slot->lock_tag), tag, memory_order_relaxed);
                        uint64_t mine = claim_word(tag, pid);
                        if (!atomic_compare_exchange_strong(npf__seq(&slot->claim), &claim, mine)) {
                                /* Taken by a claimant that locks nothing: its claim is not ours to mark. */
                                atomic_compare_exchange_strong(a32(&slot->lock_tag), &tag, was);
                                slot_lock(fd, i, F_UNLCK);
                                continue;
                        }
                        npf_shm_slot_state_t idle = { .state = NPF_WINDOW_IDLE };
                        atomic_store_explicit(a32(&slot->rank), rank, memory_order_relaxed);
                        slot->local_device = device;
                        slot->claimed_ns = npf_clock_ns(CLOCK_REALTIME);
                        npf_slot_step(slot, -1, 0);
                        npf_slot_set_state(table, slot, &idle);
                        stacks_reset(slot);
                        atomic_store_explicit(npf__seq(&slot->proc_start), start, memory_order_release);
                        *ret_claim = mine;
                        return (int) i;
                }
                /* Full: free what dead processes left behind, then look once more. */
                for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                        reclaim(table, fd, i, NULL);
        }
        return -ENOSPC;
}

/* Describe the live holder of slot @s, @claim, for a refused claim of process (@pid, @start). */
static void describe_holder(char *err, const npf_shm_slot_t *held, uint32_t rank, uint32_t s, uint64_t claim,
                            uint32_t pid, uint64_t start)
{
        uint32_t hpid = NPF_SLOT_PID(claim);
        uint64_t hstart = atomic_load_explicit(npf__seq(&held->proc_start), memory_order_relaxed);

        if (hpid == pid && hstart == start)
                npf__set_err(err, "rank %u is already claimed by this process, %u (slot %u)", rank, hpid, s);
        else if (hstart && npf_proc_check((pid_t) hpid, hstart) != NPF_PROC_ALIVE)
                npf__set_err(err, "rank %u is already claimed by a live process of another pid namespace, "
                             "pid %u there (slot %u)", rank, hpid, s);
        else
                npf__set_err(err, "rank %u is already claimed by live process %u (slot %u)", rank, hpid, s);
}

int npf_slot_claim(npf_shm_t *shm, uint32_t rank, int32_t local_device, npf_slot_lease_t *ret_lease, char *err)
{
        npf_shm_ranks_t *table = npf_shm_ranks(shm);
        uint32_t pid = (uint32_t) getpid();
        uint64_t start;
        int fd, r;

        if (rank >= NPF_SHM_MAX_RANKS) {
                npf__set_err(err, "rank %u is out of range (0 to %u)", rank, NPF_SHM_MAX_RANKS - 1);
                return -EINVAL;
        }
        r = npf_proc_self_start_time(&start);
        if (r < 0) {
                npf__set_err(err, "cannot read the start time of this process: %s", strerror(-r));
                return r;
        }
        fd = npf__shm_ranks_reopen(shm);
        if (fd == -ESTALE)
                npf__set_err(err, "the rank table was removed and made anew; attach again");
        else if (fd < 0)
                npf__set_err(err, "cannot open the rank table to lock a slot: %s", strerror(-fd));
        if (fd < 0)
                return fd;
        r = lock_fd_add(fd);
        if (r < 0) {
                close(fd);
                npf__set_err(err, "out of memory");
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
                                        if (hpid != NPF_SLOT_RECLAIMING && holder_alive(table, fd, s, claim)) {
                                                describe_holder(err, held, rank, s, claim, pid, start);
                                                r = -EBUSY;
                                                goto fail;
                                        }
                                        /* Its holder is gone, or being reclaimed: help, then look again. */
                                        reclaim(table, fd, s, NULL);
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
                r = take_free_slot(table, fd, rank, local_device, pid, start, &mine);
                if (r < 0) {
                        if (r == -ENOSPC)
                                npf__set_err(err, "all %u slots of the rank table are held by live processes",
                                             NPF_SHM_SLOTS);
                        else
                                npf__set_err(err, "cannot lock a slot of the rank table: %s", strerror(-r));
                        goto fail;
                }
                uint32_t expect = 0;
                if (atomic_compare_exchange_strong(entry, &expect, NPF_INDEX_ENTRY(r, NPF_SLOT_TAG(mine)))) {
                        *ret_lease = (npf_slot_lease_t) {
                                .slot = &table->slots[r], .claim = mine, .lock_fd = fd, .owner = (pid_t) pid,
                        };
                        return 0;
                }
                /* Another claimant of this rank won the race: give our slot back and look. */
                slot_clear(table, &table->slots[r], mine, false);
                slot_lock(fd, (uint32_t) r, F_UNLCK);
        }
        npf__set_err(err, "rank %u: the rank table kept changing; try again", rank);
        r = -EAGAIN;
fail:
        lock_fd_close(fd, (pid_t) pid);
        return r;
}

void npf_slot_release(npf_shm_t *shm, npf_slot_lease_t *lease)
{
        npf_shm_ranks_t *table = npf_shm_ranks(shm);
        npf_shm_slot_t *slot = lease->slot;

        if (!slot)
                return;
        if (lease->owner != getpid()) {
                npf_slot_abandon(lease);
                return;
        }
        uint32_t index = npf_slot_index(table, slot);
        uint64_t claim = lease->claim;
        uint32_t rank = atomic_load_explicit(a32(&slot->rank), memory_order_relaxed);
        uint64_t mark = claim_word(NPF_SLOT_TAG(claim), NPF_SLOT_RECLAIMING);

        /* Only our own claim is released; one a reclaimer already took is left to it. */
        if (atomic_compare_exchange_strong(npf__seq(&slot->claim), &claim, mark)) {
                if (rank < NPF_SHM_MAX_RANKS) {
                        uint32_t expect = NPF_INDEX_ENTRY(index, NPF_SLOT_TAG(claim));
                        atomic_compare_exchange_strong(a32(&table->index[rank]), &expect, 0);
                }
                slot_clear(table, slot, mark, true);
        }
        /* The lock goes last: until the slot is free, it is ours. */
        lock_fd_close(lease->lock_fd, lease->owner);
        *lease = (npf_slot_lease_t) { .slot = NULL, .lock_fd = -1 };
}

void npf_slot_abandon(npf_slot_lease_t *lease)
{
        /* After a fork() the handler closed it, and the number may now be another file's. */
        if (lease->slot)
                lock_fd_close(lease->lock_fd, lease->owner);
        *lease = (npf_slot_lease_t) { .slot = NULL, .lock_fd = -1 };
}

uint32_t npf_slot_pid_here(const npf_slot_view_t *v)
{
        if (v->pid == 0 || v->pid == NPF_SLOT_RECLAIMING || v->proc_start == 0)
                return 0;
        return npf_proc_check((pid_t) v->pid, v->proc_start) == NPF_PROC_ALIVE ? v->pid : 0;
}

void npf_slot_find_holders(npf_shm_t *shm, const bool *want, npf_slot_holder_t *holders)
{
        const npf_shm_ranks_t *table = npf_shm_ranks(shm);
        npf_proc_lock_query_t q[64];
        uint32_t at[64];
        size_t n = 0;

        for (uint32_t i = 0; i <= NPF_SHM_SLOTS; i++) {
                /* Holders in another pid namespace are looked for 64 at a time, in one pass over /proc. */
                if (n == 64 || (i == NPF_SHM_SLOTS && n > 0)) {
                        npf_proc_find_lock_holders(npf__shm_ranks_fd(shm), q, n);
                        for (size_t k = 0; k < n; k++)
                                holders[at[k]].pid = (uint32_t) q[k].pid;
                        n = 0;
                }
                if (i == NPF_SHM_SLOTS || !want[i])
                        continue;
                const npf_shm_slot_t *slot = &table->slots[i];
                uint64_t claim = atomic_load_explicit(npf__seq(&slot->claim), memory_order_acquire);
                uint64_t start = atomic_load_explicit(npf__seq(&slot->proc_start), memory_order_acquire);
                uint32_t pid = NPF_SLOT_PID(claim);

                if (pid == 0 || pid == NPF_SLOT_RECLAIMING || start == 0)
                        continue;
                holders[i] = (npf_slot_holder_t) { .tag = NPF_SLOT_TAG(claim), .pid = 0 };
                if (npf_proc_check((pid_t) pid, start) == NPF_PROC_ALIVE)
                        holders[i].pid = pid;
                else if (npf_slot_guarded(slot, claim) && slot_locked(npf__shm_ranks_fd(shm), i) > 0) {
                        q[n] = (npf_proc_lock_query_t) {
                                .start = start,
                                .inner = (pid_t) pid,
                                .offset = (uint64_t) lock_start(i),
                        };
                        at[n++] = i;
                }
        }
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

void npf_slot_set_state(npf_shm_ranks_t *table, npf_shm_slot_t *slot, const npf_shm_slot_state_t *st)
{
        npf_shm_slot_cold_t *cold = npf_slot_cold(table, npf_slot_index(table, slot));
        npf_shm_slot_state_t copy = *st;
        uint64_t s;

        copy.message[sizeof(copy.message) - 1] = '\0';
        copy.output[sizeof(copy.output) - 1] = '\0';
        copy.rank = slot->rank;
        copy.pid = NPF_SLOT_PID(atomic_load_explicit((_Atomic uint64_t *) &slot->claim, memory_order_relaxed));
        s = npf__seq_write_begin(&slot->seq);
        npf__seq_copy_in(&cold->st, &copy, sizeof(copy));
        /* A window that ended is also kept apart, for the daemon, until the next one ends. */
        if (is_outcome(copy.state)) {
                uint64_t ended = atomic_load_explicit(npf__seq(&slot->windows_ended), memory_order_relaxed);
                npf__seq_copy_in(&cold->ended[ended % NPF_SLOT_ENDED], &copy, sizeof(copy));
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

/* The words of slot @index's hot entry into @v. */
static void hot_read(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *v)
{
        const npf_shm_slot_t *slot = &table->slots[index];
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
}

/*
 * Copy slot @index's cold entry (its first @n bytes) into @dst, between the two loads of its
 * seqlock: through @fd with pread() where @fd >= 0, so that the reader never maps a cold page
 * (the kernel copies from the object, and the reader's page tables stay as they were), else
 * word by word through the mapping. Return: 0, or -EIO when the object is shorter.
 */
static int cold_copy(const npf_shm_ranks_t *table, int fd, uint32_t index, void *dst, size_t n)
{
        if (fd < 0) {
                npf__seq_copy_out(dst, &table->cold[index], n);
                return 0;
        }
        off_t at = (off_t) (offsetof(npf_shm_ranks_t, cold) + (size_t) index * sizeof(npf_shm_slot_cold_t));
        ssize_t got;
        do
                got = pread(fd, dst, n, at);
        while (got < 0 && errno == EINTR);
        return got == (ssize_t) n ? 0 : -EIO;
}

/*
 * Read slot @index into @v, its ended windows only if @with_ended (else they are zeroes),
 * the cold entry through @fd when it is >= 0 (see cold_copy()).
 */
static int slot_read(const npf_shm_ranks_t *table, int fd, uint32_t index, npf_slot_view_t *v, bool with_ended)
{
        const npf_shm_slot_t *slot;
        npf_shm_slot_cold_t cold;
        size_t n = with_ended ? offsetof(npf_shm_slot_cold_t, pad0) : sizeof(cold.st);

        if (index >= NPF_SHM_SLOTS)
                return -ERANGE;
        slot = &table->slots[index];
        hot_read(table, index, v);
        if (!with_ended)
                memset(v->ended, 0, sizeof(v->ended));

        for (unsigned tries = 0; tries < NPF__SLOT_READ_TRIES; tries++) {
                uint64_t s = npf__seq_read_begin_bounded(&slot->seq, NPF__SLOT_READ_SPINS);
                if (s == UINT64_MAX)
                        continue;
                if (cold_copy(table, fd, index, &cold, n) < 0)
                        return -EIO;
                v->windows_ended = atomic_load_explicit(npf__seq(&slot->windows_ended), memory_order_relaxed);
                if (npf__seq_read_retry(&slot->seq, s))
                        continue;
                v->seq = s;
                v->st = cold.st;
                if (with_ended)
                        memcpy(v->ended, cold.ended, sizeof(v->ended));
                if (!memchr(v->st.message, '\0', sizeof(v->st.message)) ||
                    !memchr(v->st.output, '\0', sizeof(v->st.output)) || v->st.state >= NPF_WINDOW__COUNT ||
                    (with_ended && !ended_ok(v->ended)))
                        return -EBADMSG;
                return 0;
        }
        return -EAGAIN;
}

int npf_slot_read_hot(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *view)
{
        if (index >= NPF_SHM_SLOTS)
                return -ERANGE;
        hot_read(table, index, view);
        return 0;
}

int npf_slot_read(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *ret_view)
{
        return slot_read(table, -1, index, ret_view, true);
}

int npf_slot_read_current(const npf_shm_ranks_t *table, uint32_t index, npf_slot_view_t *ret_view)
{
        return slot_read(table, -1, index, ret_view, false);
}

int npf_slot_pread(const npf_shm_t *shm, uint32_t index, npf_slot_view_t *ret_view)
{
        return slot_read(npf_shm_ranks(shm), npf__shm_ranks_fd(shm), index, ret_view, true);
}

int npf_slot_pread_current(const npf_shm_t *shm, uint32_t index, npf_slot_view_t *ret_view)
{
        return slot_read(npf_shm_ranks(shm), npf__shm_ranks_fd(shm), index, ret_view, false);
}

/* --- requests for the holder's stacks ------------------------------------------------------ */

int npf_slot_ask_stacks(npf_shm_slot_t *slot, uint32_t *ret_asked)
{
        /* Release: the holder that sees the request sees what the asker wrote before it. */
        uint32_t asked = atomic_fetch_add_explicit(a32(&slot->stacks_asked), 1, memory_order_acq_rel) + 1;

        npf_futex_wake(&slot->stacks_asked, true, INT32_MAX);
        *ret_asked = asked;
        return 0;
}

bool npf_slot_stacks_answered(const npf_shm_slot_t *slot, uint32_t asked, int *ret_error)
{
        uint32_t done = atomic_load_explicit(a32(&slot->stacks_done), memory_order_acquire);

        /* The numbers wrap: a later request is one at most 2^31 ahead. */
        if ((int32_t) (done - asked) < 0)
                return false;
        if (ret_error)
                *ret_error = (int) atomic_load_explicit(a32((const uint32_t *) &slot->stacks_error),
                                                        memory_order_relaxed);
        return true;
}

uint32_t npf_slot_stacks_asked(const npf_shm_slot_t *slot)
{
        return atomic_load_explicit(a32(&slot->stacks_asked), memory_order_acquire);
}

uint32_t npf_slot_stacks_done(const npf_shm_slot_t *slot)
{
        return atomic_load_explicit(a32(&slot->stacks_done), memory_order_relaxed);
}

int npf_slot_wait_stacks(const npf_shm_slot_t *slot, uint32_t seen, unsigned timeout_ms)
{
        return npf_futex_wait(&slot->stacks_asked, seen, true, timeout_ms);
}

void npf_slot_wake_stacks(const npf_shm_slot_t *slot)
{
        npf_futex_wake(&slot->stacks_asked, true, INT32_MAX);
}

void npf_slot_answer_stacks(npf_shm_slot_t *slot, uint32_t asked, int error)
{
        atomic_store_explicit(a32((uint32_t *) &slot->stacks_error), (uint32_t) error, memory_order_relaxed);
        atomic_store_explicit(a32(&slot->stacks_done), asked, memory_order_release);
}
