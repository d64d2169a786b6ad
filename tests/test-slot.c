/* SPDX-License-Identifier: MIT */
/*
 * Rank-table slots: claim, duplicate claimants, release, reclaim of dead holders. A holder
 * lives while its slot's lock is held, in whatever pid namespace it runs; one that takes
 * no lock (an older libnpuprof) is judged by its pid and start time.
 */
#include "npuprof/shm.h"
#include "lib/proc.h"
#include "shm/slot.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "insyscall.h"

typedef struct fixture {
        char name[64];
        npf_shm_t *shm;
        npf_shm_ranks_t *table;
        int life[2];            /* a pipe: children that wait, wait until the test ends, pass or fail */
} fixture_t;

static int setup(void **state)
{
        static int n;
        fixture_t *f = calloc(1, sizeof(*f));
        char err[NPF_SHM_ERR_MAX];

        snprintf(f->name, sizeof(f->name), "npftest-slot-%d-%d", (int) getpid(), n++);
        npf_shm_unlink(f->name);
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &f->shm, err), 0);
        f->table = npf_shm_ranks(f->shm);
        assert_int_equal(pipe(f->life), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fixture_t *f = *state;

        close(f->life[1]);
        close(f->life[0]);
        npf_shm_close(f->shm);
        npf_shm_unlink(f->name);
        free(f);
        return 0;
}

/* In a child, first thing: the test process alone keeps the life pipe's write end. */
static void in_child(fixture_t *f)
{
        close(f->life[1]);
}

/* In a child: wait until the test process ends the test (or dies), then exit. */
static _Noreturn void live_until_test_ends(fixture_t *f)
{
        char c;

        while (read(f->life[0], &c, 1) < 0 && errno == EINTR)
                ;
        _exit(0);
}

/*
 * Return: 1 if some open file description holds a write lock on slot @index's bytes, 0 if
 * none does, as the kernel tells a process that holds none.
 */
static int slot_locked(fixture_t *f, uint32_t index)
{
        char path[128];
        struct flock lk = {
                .l_type = F_WRLCK,
                .l_whence = SEEK_SET,
                .l_start = (off_t) (offsetof(npf_shm_ranks_t, slots) + index * sizeof(npf_shm_slot_t)),
                .l_len = sizeof(npf_shm_slot_t),
        };

        snprintf(path, sizeof(path), "/dev/shm/%s.ranks", f->name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fcntl(fd, F_OFD_GETLK, &lk), 0);
        close(fd);
        return lk.l_type == F_WRLCK;
}

/*
 * Claim @rank for (@pid, @start) as a libnpuprof that takes no lock claimed: by the claim
 * word, its pid and start time alone. Return: the slot's index.
 */
static uint32_t claim_without_lock(fixture_t *f, uint32_t rank, uint32_t pid, uint64_t start)
{
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++) {
                npf_shm_slot_t *s = &f->table->slots[i];
                uint64_t c = __atomic_load_n(&s->claim, __ATOMIC_ACQUIRE);
                if (NPF_SLOT_PID(c) != 0)
                        continue;
                uint64_t mine = (uint64_t) (NPF_SLOT_TAG(c) + 1) << 32 | pid;
                if (!__atomic_compare_exchange_n(&s->claim, &c, mine, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
                        continue;
                s->rank = rank;
                s->local_device = -1;
                s->step = -1;
                __atomic_store_n(&s->proc_start, start, __ATOMIC_RELEASE);
                f->table->index[rank] = NPF_INDEX_ENTRY(i, NPF_SLOT_TAG(mine));
                return i;
        }
        fail_msg("no free slot");
        return NPF_SHM_SLOTS;
}

/* Swap slot @index's claim word for (its tag, @pid), as if its holder had that pid. */
static void forge_pid(fixture_t *f, uint32_t index, uint32_t pid)
{
        npf_shm_slot_t *s = &f->table->slots[index];
        uint64_t c = __atomic_load_n(&s->claim, __ATOMIC_ACQUIRE);

        __atomic_store_n(&s->claim, (uint64_t) NPF_SLOT_TAG(c) << 32 | pid, __ATOMIC_RELEASE);
}

/* Fork a child that waits until killed or the test ends: a live process that is no rank. Return: its pid. */
static pid_t bystander(fixture_t *f)
{
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0) {
                in_child(f);
                live_until_test_ends(f);
        }
        return pid;
}

static void test_claim_read_release(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        npf_shm_slot_t *slot;
        npf_slot_view_t v;
        char err[NPF_SHM_ERR_MAX];
        uint64_t start;

        assert_int_equal(npf_slot_claim(f->shm, 42, 3, &lease, err), 0);
        slot = lease.slot;
        uint32_t idx = npf_slot_index(f->table, slot);
        assert_int_equal(f->table->index[42], NPF_INDEX_ENTRY(idx, NPF_SLOT_TAG(slot->claim)));
        assert_int_equal(NPF_INDEX_SLOT(f->table->index[42]), idx);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.pid, (uint32_t) getpid());
        assert_int_equal(v.rank, 42);
        assert_int_equal(v.local_device, 3);
        assert_int_equal(v.step, -1);
        assert_int_equal(v.st.state, NPF_WINDOW_IDLE);
        assert_int_equal(npf_proc_start_time(getpid(), &start), 0);
        assert_int_equal(v.proc_start, start);
        assert_true(v.claimed_ns > 0);
        /* The claim was made under the slot's lock, which its holder keeps. */
        assert_int_equal(slot->lock_tag, v.tag);
        assert_true(npf_slot_guarded(slot, slot->claim));
        assert_int_equal(slot_locked(f, idx), 1);
        assert_int_equal(lease.owner, getpid());
        assert_int_equal(fcntl(lease.lock_fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);

        npf_slot_step(slot, 77, 123456789);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.step, 77);
        assert_int_equal(v.heartbeat_ns, 123456789);

        int fd = lease.lock_fd;
        npf_slot_release(f->shm, &lease);
        assert_null(lease.slot);
        assert_int_equal(f->table->index[42], 0);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.pid, 0);
        /* Its lock went with it, and its descriptor. */
        assert_int_equal(slot_locked(f, idx), 0);
        assert_int_equal(fcntl(fd, F_GETFD), -1);
        npf_slot_release(f->shm, &lease);      /* an empty lease: nothing */
        /* Released: the rank can be claimed again. */
        assert_int_equal(npf_slot_claim(f->shm, 42, 0, &lease, err), 0);
        npf_slot_release(f->shm, &lease);
}

static void test_second_claim_same_process_refused(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t a, b = { .slot = NULL };
        char err[NPF_SHM_ERR_MAX] = "";

        assert_int_equal(npf_slot_claim(f->shm, 5, 0, &a, err), 0);
        assert_int_equal(npf_slot_claim(f->shm, 5, 0, &b, err), -EBUSY);
        assert_null(b.slot);
        assert_non_null(strstr(err, "rank 5 is already claimed by this process"));
        /* Other ranks are unaffected. */
        assert_int_equal(npf_slot_claim(f->shm, 6, 0, &b, err), 0);
        assert_ptr_not_equal(a.slot, b.slot);
}

static void test_second_live_claimant_refused(void **state)
{
        fixture_t *f = *state;
        int to_child[2], to_parent[2];
        char err[NPF_SHM_ERR_MAX] = "", c;
        npf_slot_lease_t lease;

        assert_int_equal(pipe(to_child), 0);
        assert_int_equal(pipe(to_parent), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_slot_lease_t mine;
                close(to_child[1]);
                int r = npf_slot_claim(f->shm, 9, 0, &mine, NULL);
                (void) !write(to_parent[1], r == 0 ? "y" : "n", 1);
                (void) !read(to_child[0], &c, 1);       /* stay alive until told */
                _exit(0);
        }
        assert_int_equal(read(to_parent[0], &c, 1), 1);
        assert_int_equal(c, 'y');
        assert_int_equal(npf_slot_claim(f->shm, 9, 0, &lease, err), -EBUSY);
        char want[64];
        snprintf(want, sizeof(want), "live process %d", (int) pid);
        assert_non_null(strstr(err, want));

        assert_int_equal(write(to_child[1], "x", 1), 1);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        /* Now the holder is gone: the rank is taken over. */
        assert_int_equal(npf_slot_claim(f->shm, 9, 0, &lease, err), 0);
        assert_int_equal(NPF_SLOT_PID(lease.slot->claim), (uint32_t) getpid());
        close(to_child[0]);
        close(to_child[1]);
        close(to_parent[0]);
        close(to_parent[1]);
}

static void test_reclaim_dead_process(void **state)
{
        fixture_t *f = *state;
        npf_slot_view_t last;
        npf_slot_lease_t lease;
        int status;

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_slot_lease_t mine;
                if (npf_slot_claim(f->shm, 100, 2, &mine, NULL) != 0)
                        _exit(1);
                npf_shm_slot_state_t st = { .state = NPF_WINDOW_COLLECTING, .generation = 4,
                                            .window_start = 10, .window_stop = 14 };
                snprintf(st.output, sizeof(st.output), "rank100_start10_stop14");
                npf_slot_set_state(f->table, mine.slot, &st);
                npf_slot_step(mine.slot, 12, 1);
                _exit(0);       /* dies without releasing */
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_int_equal(WEXITSTATUS(status), 0);

        uint32_t idx = NPF_INDEX_SLOT(f->table->index[100]);
        assert_true(idx < NPF_SHM_SLOTS);
        assert_int_equal(slot_locked(f, idx), 0);
        assert_int_equal(npf_slot_reclaim(f->shm, idx, &last), 1);
        assert_int_equal(last.pid, (uint32_t) pid);
        assert_int_equal(last.rank, 100);
        assert_int_equal(last.step, 12);
        assert_int_equal(last.st.state, NPF_WINDOW_COLLECTING);
        assert_string_equal(last.st.output, "rank100_start10_stop14");
        assert_int_equal(f->table->index[100], 0);
        assert_int_equal(NPF_SLOT_PID(f->table->slots[idx].claim), 0);
        /* A second reclaim finds nothing to do. */
        assert_int_equal(npf_slot_reclaim(f->shm, idx, NULL), 0);

        /* A live owner is never reclaimed. */
        assert_int_equal(npf_slot_claim(f->shm, 101, 0, &lease, NULL), 0);
        assert_int_equal(npf_slot_reclaim(f->shm, npf_slot_index(f->table, lease.slot), NULL), 0);
        assert_int_equal(NPF_SLOT_PID(lease.slot->claim), (uint32_t) getpid());
        assert_int_equal(npf_slot_reclaim(f->shm, NPF_SHM_SLOTS, NULL), -ERANGE);
}

/* A holder that takes no lock and whose pid now belongs to another process is told apart by its start time. */
static void test_reclaim_reused_pid_of_holder_without_lock(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        npf_slot_view_t last;
        uint64_t start;

        /* The claimant was an earlier process that had our pid, and took no lock. */
        assert_int_equal(npf_proc_start_time(getpid(), &start), 0);
        uint32_t idx = claim_without_lock(f, 7, (uint32_t) getpid(), start - 1);
        assert_false(npf_slot_guarded(&f->table->slots[idx], f->table->slots[idx].claim));
        assert_int_equal(npf_slot_reclaim(f->shm, idx, &last), 1);
        assert_int_equal(last.pid, (uint32_t) getpid());
        assert_int_equal(f->table->index[7], 0);
        /* And the rank may be claimed again by the process that really has the pid. */
        assert_int_equal(npf_slot_claim(f->shm, 7, 0, &lease, NULL), 0);

        /* Such a holder that is alive keeps its slot, and its rank. */
        idx = claim_without_lock(f, 8, (uint32_t) getpid(), start);
        assert_int_equal(npf_slot_reclaim(f->shm, idx, NULL), 0);
        assert_int_equal(npf_slot_claim(f->shm, 8, 0, &lease, NULL), -EBUSY);
}

/*
 * A holder that holds its slot's lock lives as long as the lock, whatever pid it recorded:
 * one whose pid now names an unrelated process, or no process, keeps its slot and its rank
 * (a holder in another pid namespace records a pid that means nothing here); once it is
 * gone its slot is freed, even when its pid names a live process that started when it did.
 */
static void test_locked_holder_lives_whatever_its_pid(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        char err[NPF_SHM_ERR_MAX] = "";
        int go[2], ready[2];
        uint64_t mine;
        char c;

        assert_int_equal(pipe(go), 0);
        assert_int_equal(pipe(ready), 0);
        pid_t holder = fork();
        assert_true(holder >= 0);
        if (holder == 0) {
                npf_slot_lease_t l;
                in_child(f);
                close(go[1]);
                int r = npf_slot_claim(f->shm, 400, 0, &l, NULL);
                (void) !write(ready[1], r == 0 ? "y" : "n", 1);
                (void) !read(go[0], &c, 1);
                _exit(0);
        }
        assert_int_equal(read(ready[0], &c, 1), 1);
        assert_int_equal(c, 'y');
        uint32_t idx = NPF_INDEX_SLOT(f->table->index[400]);
        assert_true(idx < NPF_SHM_SLOTS);

        pid_t other = bystander(f);
        uint32_t pids[] = { (uint32_t) other, 1, 4000000 };     /* reused, init's, none */
        for (size_t k = 0; k < sizeof(pids) / sizeof(pids[0]); k++) {
                forge_pid(f, idx, pids[k]);
                assert_int_equal(npf_slot_reclaim(f->shm, idx, NULL), 0);
                assert_int_equal(npf_slot_claim(f->shm, 400, 0, &lease, err), -EBUSY);
                assert_int_equal(NPF_SLOT_PID(f->table->slots[idx].claim), pids[k]);
        }
        assert_non_null(strstr(err, "another pid namespace, pid 4000000 there"));
        kill(other, SIGKILL);
        waitpid(other, NULL, 0);

        /* Gone: its slot is freed though the pid it recorded is ours, with our start time. */
        assert_int_equal(write(go[1], "x", 1), 1);
        assert_int_equal(waitpid(holder, NULL, 0), holder);
        assert_int_equal(npf_proc_start_time(getpid(), &mine), 0);
        forge_pid(f, idx, (uint32_t) getpid());
        f->table->slots[idx].proc_start = mine;
        assert_int_equal(npf_slot_reclaim(f->shm, idx, NULL), 1);
        assert_int_equal(npf_slot_claim(f->shm, 400, 0, &lease, err), 0);
        close(go[0]);
        close(go[1]);
        close(ready[0]);
        close(ready[1]);
}

/*
 * A rank in a pid namespace of its own (a container's) records a pid that names another
 * process here: it is alive for as long as it runs, its rank is never given to another,
 * its pid here is found through its lock, and once it is killed its slot is reclaimed.
 */
static void test_holder_in_another_pid_namespace(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        npf_slot_holder_t holders[NPF_SHM_SLOTS] = { { 0 } };
        bool want[NPF_SHM_SLOTS] = { false };
        npf_slot_view_t v, last;
        char err[NPF_SHM_ERR_MAX] = "";
        int ready[2];
        struct { int ok; pid_t pid; } hello;

        if (geteuid() != 0)
                skip();
        assert_int_equal(pipe(ready), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                in_child(f);
                /* The child's children are born into a new pid namespace; the first is its pid 1. */
                if (unshare(CLONE_NEWPID) < 0) {
                        hello.ok = -errno;
                        hello.pid = 0;
                        (void) !write(ready[1], &hello, sizeof(hello));
                        _exit(0);
                }
                pid_t rank = fork();
                if (rank == 0) {
                        npf_slot_lease_t l;
                        npf_shm_slot_state_t st = { .state = NPF_WINDOW_COLLECTING, .generation = 3,
                                                    .window_start = 5, .window_stop = 500 };
                        hello.ok = npf_slot_claim(f->shm, 300, 1, &l, NULL) == 0 && getpid() == 1;
                        hello.pid = 0;
                        if (hello.ok) {
                                npf_slot_set_state(f->table, l.slot, &st);
                                npf_slot_step(l.slot, 42, 1);
                        }
                        (void) !write(ready[1], &hello, sizeof(hello));
                        if (hello.ok)
                                live_until_test_ends(f);
                        _exit(1);
                }
                /* Its pid here, which it cannot know itself. */
                hello.ok = rank > 0;
                hello.pid = rank;
                (void) !write(ready[1], &hello, sizeof(hello));
                waitpid(rank, NULL, 0);
                _exit(0);
        }
        int got = 0;
        pid_t rank_here = 0;
        for (int k = 0; k < 2; k++) {
                assert_int_equal(read(ready[0], &hello, sizeof(hello)), sizeof(hello));
                if (hello.ok == -EPERM || hello.ok == -EINVAL) {
                        waitpid(child, NULL, 0);
                        skip();         /* no pid namespaces here, even for root */
                }
                assert_int_equal(hello.ok, 1);
                got++;
                if (hello.pid)
                        rank_here = hello.pid;
        }
        assert_int_equal(got, 2);
        assert_true(rank_here > 1);

        uint32_t idx = NPF_INDEX_SLOT(f->table->index[300]);
        assert_true(idx < NPF_SHM_SLOTS);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.pid, 1);     /* its own pid, in its namespace: here, init's */
        assert_int_equal(v.step, 42);
        assert_int_equal(v.st.state, NPF_WINDOW_COLLECTING);
        /* Judged by its pid it would be dead: pid 1 here started long before it. */
        assert_int_equal(npf_proc_check(1, v.proc_start), NPF_PROC_REUSED);
        assert_int_equal(npf_slot_pid_here(&v), 0);
        /* Judged by its lock it lives: no reclaim, no second holder of its rank. */
        assert_int_equal(npf_slot_reclaim(f->shm, idx, NULL), 0);
        assert_int_equal(npf_slot_claim(f->shm, 300, 0, &lease, err), -EBUSY);
        assert_non_null(strstr(err, "another pid namespace, pid 1 there"));
        /* Its pid here is found, through the lock it holds. */
        want[idx] = true;
        npf_slot_find_holders(f->shm, want, holders);
        assert_int_equal(holders[idx].tag, v.tag);
        assert_int_equal(holders[idx].pid, (uint32_t) rank_here);

        /* Killed: the kernel drops its lock, and its slot is reclaimed with its window. */
        assert_int_equal(kill(rank_here, SIGKILL), 0);
        assert_int_equal(waitpid(child, NULL, 0), child);
        assert_int_equal(slot_locked(f, idx), 0);
        assert_int_equal(npf_slot_reclaim(f->shm, idx, &last), 1);
        assert_int_equal(last.pid, 1);
        assert_int_equal(last.rank, 300);
        assert_int_equal(last.st.state, NPF_WINDOW_COLLECTING);
        assert_int_equal(npf_slot_claim(f->shm, 300, 0, &lease, err), 0);
        close(ready[0]);
        close(ready[1]);
}

/*
 * A child forked from a holder shares its open file descriptions, and would keep its lock
 * when the holder died: the fork handler closes the child's copy. The child's release
 * changes nothing; the holder's slot is freed once the holder dies, the child still alive.
 */
static void test_forked_child_keeps_no_slot(void **state)
{
        fixture_t *f = *state;
        struct { char c; pid_t pid; } kid;
        int said[2], status;

        assert_int_equal(pipe(said), 0);
        pid_t holder = fork();
        assert_true(holder >= 0);
        if (holder == 0) {
                npf_slot_lease_t l;
                in_child(f);
                if (npf_slot_claim(f->shm, 500, 0, &l, NULL) != 0)
                        _exit(1);
                if (fork() == 0) {
                        /* The child: its copy of the lock's descriptor is closed already. */
                        kid.c = fcntl(l.lock_fd, F_GETFD) >= 0 ? 'o' : 'c';
                        kid.pid = getpid();
                        npf_slot_release(f->shm, &l);
                        (void) !write(said[1], &kid, sizeof(kid));
                        live_until_test_ends(f);
                }
                live_until_test_ends(f);
        }
        assert_int_equal(read(said[0], &kid, sizeof(kid)), sizeof(kid));
        assert_int_equal(kid.c, 'c');
        uint32_t idx = NPF_INDEX_SLOT(f->table->index[500]);
        assert_true(idx < NPF_SHM_SLOTS);
        /* The child's release left the holder's claim and lock alone. */
        assert_int_equal(NPF_SLOT_PID(f->table->slots[idx].claim), (uint32_t) holder);
        assert_int_equal(slot_locked(f, idx), 1);
        assert_int_equal(npf_slot_reclaim(f->shm, idx, NULL), 0);

        /* The holder dies; its child lives on, and keeps nothing of its slot. */
        assert_int_equal(kill(holder, SIGKILL), 0);
        assert_int_equal(waitpid(holder, &status, 0), holder);
        assert_int_equal(kill(kid.pid, 0), 0);
        assert_int_equal(slot_locked(f, idx), 0);
        assert_int_equal(npf_slot_reclaim(f->shm, idx, NULL), 1);
        kill(kid.pid, SIGKILL);
        close(said[0]);
        close(said[1]);
}

/*
 * A free slot that another open file description holds locked is a claim in progress, or
 * one just released: it is passed over, and with every free slot so held the claim ends
 * with -ENOSPC rather than waiting.
 */
static void test_claim_passes_over_locked_free_slots(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        char path[128], err[NPF_SHM_ERR_MAX] = "";

        snprintf(path, sizeof(path), "/dev/shm/%s.ranks", f->name);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        struct flock lk = {
                .l_type = F_WRLCK, .l_whence = SEEK_SET,
                .l_start = (off_t) offsetof(npf_shm_ranks_t, slots), .l_len = sizeof(npf_shm_slot_t),
        };
        assert_int_equal(fcntl(fd, F_OFD_SETLK, &lk), 0);
        assert_int_equal(npf_slot_claim(f->shm, 600, 0, &lease, err), 0);
        assert_int_not_equal(npf_slot_index(f->table, lease.slot), 0);
        assert_int_equal(NPF_SLOT_PID(f->table->slots[0].claim), 0);

        lk.l_len = 0;           /* every slot */
        assert_int_equal(fcntl(fd, F_OFD_SETLK, &lk), -1);    /* but the one held by the lease */
        lk.l_len = (off_t) (npf_slot_index(f->table, lease.slot) * sizeof(npf_shm_slot_t));
        assert_int_equal(fcntl(fd, F_OFD_SETLK, &lk), 0);
        lk.l_start = (off_t) (offsetof(npf_shm_ranks_t, slots) + (npf_slot_index(f->table, lease.slot) + 1) *
                              sizeof(npf_shm_slot_t));
        lk.l_len = 0;
        assert_int_equal(fcntl(fd, F_OFD_SETLK, &lk), 0);
        npf_slot_lease_t none = { .slot = NULL };
        assert_int_equal(npf_slot_claim(f->shm, 601, 0, &none, err), -ENOSPC);
        assert_null(none.slot);
        close(fd);
        /* Their lock gone, the slots are free to claim again. */
        assert_int_equal(npf_slot_claim(f->shm, 601, 0, &none, err), 0);
}

static void test_claim_takes_over_stale_index(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease, other;

        /* Garbage in the index (a slot number out of range) does not block the rank. */
        f->table->index[11] = 0xdeadbeef;
        assert_int_equal(npf_slot_claim(f->shm, 11, 0, &lease, NULL), 0);
        assert_int_equal(NPF_INDEX_SLOT(f->table->index[11]), npf_slot_index(f->table, lease.slot));
        /* Nor does an entry that points at another rank's slot. */
        assert_int_equal(npf_slot_claim(f->shm, 12, 0, &other, NULL), 0);
        f->table->index[13] = f->table->index[12];
        assert_int_equal(npf_slot_claim(f->shm, 13, 0, &lease, NULL), 0);
        assert_ptr_not_equal(lease.slot, other.slot);
        assert_int_equal(other.slot->rank, 12);
}

/* An ended window keeps the rank and pid that ended it, after the slot passes to another rank. */
static void test_ended_names_its_rank(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease, again;
        npf_slot_view_t v;
        npf_shm_slot_state_t st = { .generation = 1, .state = NPF_WINDOW_DONE, .window_start = 3, .window_stop = 4 };

        assert_int_equal(npf_slot_claim(f->shm, 1, 0, &lease, NULL), 0);
        npf_shm_slot_t *slot = lease.slot;
        uint32_t idx = npf_slot_index(f->table, slot);
        npf_slot_set_state(f->table, slot, &st);
        npf_slot_release(f->shm, &lease);
        /* While a slot where no window ended is free, the one that keeps a window is not taken. */
        assert_int_equal(npf_slot_claim(f->shm, 2, 0, &again, NULL), 0);
        assert_ptr_not_equal(again.slot, slot);
        npf_slot_release(f->shm, &again);
        /* Every other slot has kept more: the freed slot is the one reused. */
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                if (i != idx)
                        f->table->slots[i].windows_ended = 2;
        assert_int_equal(npf_slot_claim(f->shm, 3, 0, &again, NULL), 0);
        assert_ptr_equal(again.slot, slot);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.rank, 3);
        assert_int_equal(v.windows_ended, 1);
        assert_int_equal(v.ended[0].state, NPF_WINDOW_DONE);
        assert_int_equal(v.ended[0].rank, 1);
        assert_int_equal(v.ended[0].pid, (uint32_t) getpid());
        npf_slot_release(f->shm, &again);
}

static void test_rank_out_of_range(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease = { .slot = NULL };
        char err[NPF_SHM_ERR_MAX] = "";

        assert_int_equal(npf_slot_claim(f->shm, NPF_SHM_MAX_RANKS, 0, &lease, err), -EINVAL);
        assert_non_null(strstr(err, "65536"));
        assert_null(lease.slot);
        assert_int_equal(npf_slot_claim(f->shm, NPF_SHM_MAX_RANKS - 1, 0, &lease, err), 0);
}

static void test_table_full(void **state)
{
        fixture_t *f = *state;
        static npf_slot_lease_t leases[NPF_SHM_SLOTS];
        npf_slot_lease_t lease = { .slot = NULL };
        char err[NPF_SHM_ERR_MAX] = "";
        struct rlimit rl;

        /* A descriptor per claim: a process holding every slot needs more than 1024. */
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_cur < 2 * NPF_SHM_SLOTS) {
                if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 2 * NPF_SHM_SLOTS)
                        skip();
                rl.rlim_cur = 2 * NPF_SHM_SLOTS;
                assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
        }
        for (uint32_t r = 0; r < NPF_SHM_SLOTS; r++)
                assert_int_equal(npf_slot_claim(f->shm, r * 64, 0, &leases[r], err), 0);
        assert_int_equal(npf_slot_claim(f->shm, 1, 0, &lease, err), -ENOSPC);
        assert_null(lease.slot);
        assert_non_null(strstr(err, "1024 slots"));
        /* One freed slot is enough. */
        for (uint32_t r = 0; r < NPF_SHM_SLOTS; r++)
                if (npf_slot_index(f->table, leases[r].slot) == 500)
                        npf_slot_release(f->shm, &leases[r]);
        assert_int_equal(npf_slot_claim(f->shm, 1, 0, &lease, err), 0);
        assert_int_equal(npf_slot_index(f->table, lease.slot), 500);
        for (uint32_t r = 0; r < NPF_SHM_SLOTS; r++)
                npf_slot_release(f->shm, &leases[r]);
}

/* Many processes race for one rank id: exactly one wins, whatever the interleaving. */
static void test_claim_race_one_winner(void **state)
{
        fixture_t *f = *state;
        enum { N = 16, ROUNDS = 20 };

        for (int round = 0; round < ROUNDS; round++) {
                int go[2], done[2], hold[2];
                pid_t pids[N];
                int wins = 0, busy = 0;
                uint32_t rank = 1000 + (uint32_t) round;

                assert_int_equal(pipe(go), 0);
                assert_int_equal(pipe(done), 0);
                assert_int_equal(pipe(hold), 0);
                for (int i = 0; i < N; i++) {
                        pids[i] = fork();
                        assert_true(pids[i] >= 0);
                        if (pids[i] == 0) {
                                npf_slot_lease_t l;
                                char c;
                                close(go[1]);
                                close(hold[1]);
                                (void) !read(go[0], &c, 1);     /* all start together */
                                int r = npf_slot_claim(f->shm, rank, 0, &l, NULL);
                                (void) !write(done[1], r == 0 ? "w" : r == -EBUSY ? "b" : "e", 1);
                                (void) !read(hold[0], &c, 1);   /* hold the slot until EOF */
                                _exit(0);
                        }
                }
                close(go[0]);
                close(done[1]);
                close(hold[0]);
                char start[N];
                memset(start, 'g', sizeof(start));
                assert_int_equal(write(go[1], start, N), N);
                for (int i = 0; i < N; i++) {
                        char c;
                        assert_int_equal(read(done[0], &c, 1), 1);
                        wins += c == 'w';
                        busy += c == 'b';
                }
                assert_int_equal(wins, 1);
                assert_int_equal(busy, N - 1);
                /* The index names the winner's slot, and no other slot claims the rank. */
                uint32_t e = f->table->index[rank];
                assert_true(e != 0 && NPF_INDEX_SLOT(e) < NPF_SHM_SLOTS);
                int holders = 0;
                for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                        holders += NPF_SLOT_PID(f->table->slots[i].claim) != 0 && f->table->slots[i].rank == rank;
                assert_int_equal(holders, 1);
                close(go[1]);
                close(hold[1]);
                for (int i = 0; i < N; i++)
                        waitpid(pids[i], NULL, 0);
                close(done[0]);
        }
}

/*
 * Claimants race against a holder that died: one wins, and no slot ever holds the rank
 * twice. Without tags on the index this ended with two live holders in a third of rounds.
 */
static void test_claim_race_against_dead_holder(void **state)
{
        fixture_t *f = *state;
        enum { N = 8, ROUNDS = 40 };

        for (int round = 0; round < ROUNDS; round++) {
                uint32_t rank = 2000 + (uint32_t) round;
                int go[2], done[2], hold[2];
                pid_t pids[N];
                int wins = 0;

                pid_t dead = fork();
                assert_true(dead >= 0);
                if (dead == 0) {
                        npf_slot_lease_t l;
                        _exit(npf_slot_claim(f->shm, rank, 0, &l, NULL) == 0 ? 0 : 1);
                }
                assert_int_equal(waitpid(dead, NULL, 0), dead);
                assert_int_equal(pipe(go), 0);
                assert_int_equal(pipe(done), 0);
                assert_int_equal(pipe(hold), 0);
                for (int i = 0; i < N; i++) {
                        pids[i] = fork();
                        assert_true(pids[i] >= 0);
                        if (pids[i] == 0) {
                                npf_slot_lease_t l;
                                char c;
                                close(go[1]);
                                close(hold[1]);
                                (void) !read(go[0], &c, 1);
                                int r = npf_slot_claim(f->shm, rank, 0, &l, NULL);
                                (void) !write(done[1], r == 0 ? "w" : "b", 1);
                                (void) !read(hold[0], &c, 1);
                                _exit(0);
                        }
                }
                close(go[0]);
                close(done[1]);
                close(hold[0]);
                assert_int_equal(write(go[1], "gggggggg", N), N);
                for (int i = 0; i < N; i++) {
                        char c;
                        assert_int_equal(read(done[0], &c, 1), 1);
                        wins += c == 'w';
                }
                int holders = 0;
                for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++) {
                        uint32_t p = NPF_SLOT_PID(f->table->slots[i].claim);
                        holders += p != 0 && p != NPF_SLOT_RECLAIMING && f->table->slots[i].rank == rank;
                }
                assert_int_equal(wins, 1);
                assert_int_equal(holders, 1);
                close(go[1]);
                close(hold[1]);
                for (int i = 0; i < N; i++)
                        waitpid(pids[i], NULL, 0);
                close(done[0]);
        }
}

/*
 * A reclaimer that cannot read /proc (out of file descriptors) must not take a live slot:
 * neither one held under a lock nor one of a holder that takes none.
 */
static void test_unreadable_proc_is_not_death(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        uint64_t start;
        int status;

        assert_int_equal(npf_slot_claim(f->shm, 31, 0, &lease, NULL), 0);
        uint32_t idx = npf_slot_index(f->table, lease.slot);
        assert_int_equal(npf_proc_start_time(getpid(), &start), 0);
        uint32_t old = claim_without_lock(f, 35, (uint32_t) getpid(), start);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct rlimit rl = { .rlim_cur = 16, .rlim_max = 16 };
                setrlimit(RLIMIT_NOFILE, &rl);
                while (open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0)
                        ;
                /* EMFILE now: the holder's /proc entry cannot be opened. */
                _exit(npf_slot_reclaim(f->shm, idx, NULL) == 0 && npf_slot_reclaim(f->shm, old, NULL) == 0 ? 0 : 1);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(NPF_SLOT_PID(lease.slot->claim), (uint32_t) getpid());
        assert_int_equal(NPF_INDEX_SLOT(f->table->index[31]), idx);
        assert_int_equal(NPF_SLOT_PID(f->table->slots[old].claim), (uint32_t) getpid());
}

/* Only the owner's own claim is released; a stranger's release changes nothing. */
static void test_release_only_own_claim(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        int status;

        assert_int_equal(npf_slot_claim(f->shm, 32, 0, &lease, NULL), 0);
        uint64_t before = lease.slot->claim;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_slot_release(f->shm, &lease);
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_int_equal(lease.slot->claim, before);
        assert_int_not_equal(f->table->index[32], 0);
        assert_int_equal(slot_locked(f, npf_slot_index(f->table, lease.slot)), 1);
        /* Nor does the owner release a claim that is no longer its own. */
        uint32_t idx = npf_slot_index(f->table, lease.slot);
        npf_slot_lease_t stale = lease;
        stale.claim ^= UINT64_C(1) << 32;
        int fd = dup(lease.lock_fd);
        stale.lock_fd = fd;
        npf_slot_release(f->shm, &stale);
        assert_int_equal(lease.slot->claim, before);
        assert_int_equal(NPF_INDEX_SLOT(f->table->index[32]), idx);
        close(fd);
        npf_slot_release(f->shm, &lease);
        assert_int_equal(NPF_SLOT_PID(f->table->slots[idx].claim), 0);
}

/* A rank killed inside a state write leaves the sequence odd; reclaim and reuse repair it. */
static void test_odd_sequence_left_by_dead_writer(void **state)
{
        fixture_t *f = *state;
        npf_slot_view_t v;
        int status;

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_slot_lease_t mine;
                if (npf_slot_claim(f->shm, 33, 0, &mine, NULL) != 0)
                        _exit(1);
                mine.slot->seq |= 1;    /* as if killed between write_begin and write_end */
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_int_equal(WEXITSTATUS(status), 0);
        uint32_t idx = NPF_INDEX_SLOT(f->table->index[33]);
        assert_int_equal(npf_slot_read(f->table, idx, &v), -EAGAIN);
        assert_int_equal(npf_slot_reclaim(f->shm, idx, NULL), 1);
        assert_int_equal(f->table->slots[idx].seq % 2, 0);
        npf_slot_lease_t lease;
        assert_int_equal(npf_slot_claim(f->shm, 33, 0, &lease, NULL), 0);
        npf_shm_slot_t *slot = lease.slot;
        npf_shm_slot_state_t st = { .state = NPF_WINDOW_ARMED, .generation = 2 };
        npf_slot_set_state(f->table, slot, &st);
        assert_int_equal(npf_slot_read(f->table, npf_slot_index(f->table, slot), &v), 0);
        assert_int_equal(v.st.state, NPF_WINDOW_ARMED);
}

static void test_state_roundtrip_and_bounds(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        npf_shm_slot_t *slot;
        npf_slot_view_t v;
        npf_shm_slot_state_t st = { .state = NPF_WINDOW_FAILED, .generation = 9, .window_start = 5,
                                    .window_stop = 9, .state_step = 6 };

        assert_int_equal(npf_slot_claim(f->shm, 3, 0, &lease, NULL), 0);
        slot = lease.slot;
        uint32_t idx = npf_slot_index(f->table, slot);
        memset(st.message, 'm', sizeof(st.message));    /* unterminated: cut on write */
        npf_slot_set_state(f->table, slot, &st);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.st.state, NPF_WINDOW_FAILED);
        assert_int_equal(v.st.generation, 9);
        assert_int_equal(v.st.state_step, 6);
        assert_int_equal(strlen(v.st.message), sizeof(v.st.message) - 1);

        /* Bytes a hostile rank wrote are refused, not trusted. */
        memset(f->table->cold[idx].st.output, 'o', sizeof(f->table->cold[idx].st.output));
        assert_int_equal(npf_slot_read(f->table, idx, &v), -EBADMSG);
        f->table->cold[idx].st.output[0] = '\0';
        f->table->cold[idx].st.state = 1000;
        assert_int_equal(npf_slot_read(f->table, idx, &v), -EBADMSG);
        f->table->cold[idx].st.state = NPF_WINDOW_DONE;
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        slot->seq = 3;  /* a writer that never finishes */
        assert_int_equal(npf_slot_read(f->table, idx, &v), -EAGAIN);
        assert_int_equal(npf_slot_read(f->table, NPF_SHM_SLOTS, &v), -ERANGE);
}

/*
 * npf_slot_read_current() gives what npf_slot_read() gives but the ended windows: zeroes
 * there, whatever the view held and whatever the slot keeps, and the count of them read.
 */
static void test_read_current_leaves_ended_out(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        npf_shm_slot_t *slot;
        npf_slot_view_t full, cur;
        npf_shm_slot_state_t failed = { .state = NPF_WINDOW_FAILED, .generation = 2, .window_start = 5,
                                        .window_stop = 9, .state_step = 6, .message = "disk full" };
        npf_shm_slot_state_t armed = { .state = NPF_WINDOW_ARMED, .generation = 3, .window_start = 20,
                                       .window_stop = 24, .state_step = 11 };

        assert_int_equal(npf_slot_claim(f->shm, 4, 1, &lease, NULL), 0);
        slot = lease.slot;
        uint32_t idx = npf_slot_index(f->table, slot);
        npf_slot_set_state(f->table, slot, &failed);
        npf_slot_set_state(f->table, slot, &armed);
        npf_slot_step(slot, 12, 5000);
        assert_int_equal(npf_slot_read(f->table, idx, &full), 0);
        assert_int_equal(full.windows_ended, 1);
        assert_int_equal(full.ended[0].state, NPF_WINDOW_FAILED);

        memset(&cur, 0xab, sizeof(cur));
        assert_int_equal(npf_slot_read_current(f->table, idx, &cur), 0);
        assert_memory_equal(&cur.st, &full.st, sizeof(cur.st));
        assert_int_equal(cur.st.state, NPF_WINDOW_ARMED);
        assert_int_equal(cur.windows_ended, 1);
        assert_int_equal(cur.step, 12);
        assert_int_equal(cur.pid, full.pid);
        assert_int_equal(cur.rank, 4);
        for (size_t i = 0; i < sizeof(cur.ended); i++)
                assert_int_equal(((const uint8_t *) cur.ended)[i], 0);

        /* An ended record a hostile rank broke fails the full read, not the current one. */
        memset(f->table->cold[idx].ended[0].output, 'o', sizeof(f->table->cold[idx].ended[0].output));
        assert_int_equal(npf_slot_read(f->table, idx, &full), -EBADMSG);
        assert_int_equal(npf_slot_read_current(f->table, idx, &cur), 0);
        assert_int_equal(cur.st.state, NPF_WINDOW_ARMED);
}

/* The reader's yields, counted: this definition is the one the slot code calls. */
static unsigned yields;
int sched_yield(void)
{
        yields++;
        return 0;
}

/*
 * A hostile process keeps every sequence of the table odd: reading each slot gives up at
 * once, with no yield, so a sweep or a status over the whole table stays cheap; a slot
 * whose sequence becomes even again reads again.
 */
static void test_odd_sequences_everywhere_cost_no_yield(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        npf_shm_slot_t *slot;
        npf_slot_view_t v;

        assert_int_equal(npf_slot_claim(f->shm, 7, 0, &lease, NULL), 0);
        slot = lease.slot;
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                f->table->slots[i].seq = 2 * i + 1;
        yields = 0;
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                assert_int_equal(npf_slot_read(f->table, i, &v), -EAGAIN);
        assert_int_equal(yields, 0);
        assert_int_equal(npf_slot_reclaim(f->shm, npf_slot_index(f->table, slot), NULL), 0);     /* alive */
        slot->seq++;
        assert_int_equal(npf_slot_read(f->table, npf_slot_index(f->table, slot), &v), 0);
        assert_int_equal(v.rank, 7);
}

static uint64_t monotonic_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/*
 * A request for stacks wakes a holder in another process that waits on its own mapping of
 * the slot (a shared futex: a private one would leave it asleep for its 60 s); it answers,
 * and the answer is seen through the asker's mapping. Requests are numbered on, across the
 * wrap of the word; an answer to a later one answers the earlier ones too.
 */
static void test_stacks_request_wakes_holder(void **state)
{
        fixture_t *f = *state;
        int claimed[2];
        char c;

        assert_int_equal(pipe(claimed), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_shm_t *shm;
                npf_slot_lease_t lease;
                char err[NPF_SHM_ERR_MAX];

                in_child(f);
                close(claimed[0]);
                if (npf_shm_open(f->name, 0, &shm, err) < 0 || npf_slot_claim(shm, 9, -1, &lease, err) < 0)
                        _exit(1);
                uint32_t seen = npf_slot_stacks_asked(lease.slot);
                if (seen != npf_slot_stacks_done(lease.slot) || write(claimed[1], "x", 1) != 1)
                        _exit(2);
                while (npf_slot_stacks_asked(lease.slot) == seen)
                        if (npf_slot_wait_stacks(lease.slot, seen, 60000) == -ETIMEDOUT)
                                _exit(3);
                npf_slot_answer_stacks(lease.slot, npf_slot_stacks_asked(lease.slot), EACCES);
                _exit(0);
        }
        close(claimed[1]);
        assert_int_equal(read(claimed[0], &c, 1), 1);
        close(claimed[0]);
        uint32_t e = __atomic_load_n(&f->table->index[9], __ATOMIC_ACQUIRE);
        npf_shm_slot_t *slot = &f->table->slots[NPF_INDEX_SLOT(e)];

        /* Asleep on the futex, before it is asked. */
        wait_in_syscall(pid, SYS_futex);
        uint32_t before = npf_slot_stacks_asked(slot), asked;
        int error = 0;
        assert_false(npf_slot_stacks_answered(slot, before + 1, &error));
        uint64_t t0 = monotonic_ms();
        assert_int_equal(npf_slot_ask_stacks(slot, &asked), 0);
        assert_int_equal(asked, before + 1);
        while (!npf_slot_stacks_answered(slot, asked, &error) && monotonic_ms() - t0 < 10000)
                usleep(1000);
        assert_true(npf_slot_stacks_answered(slot, asked, &error));
        assert_true(monotonic_ms() - t0 < 10000);
        assert_int_equal(error, EACCES);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_true(npf_slot_stacks_answered(slot, before, NULL));
        assert_false(npf_slot_stacks_answered(slot, asked + 1, NULL));

        /* Across the wrap. */
        slot->stacks_asked = slot->stacks_done = UINT32_MAX;
        assert_int_equal(npf_slot_ask_stacks(slot, &asked), 0);
        assert_int_equal(asked, 0);
        assert_false(npf_slot_stacks_answered(slot, 0, NULL));
        assert_true(npf_slot_stacks_answered(slot, UINT32_MAX, NULL));
        npf_slot_answer_stacks(slot, 1, 0);
        assert_true(npf_slot_stacks_answered(slot, 0, &error));
        assert_int_equal(error, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_claim_read_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_second_claim_same_process_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_second_live_claimant_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reclaim_dead_process, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reclaim_reused_pid_of_holder_without_lock, setup, teardown),
                cmocka_unit_test_setup_teardown(test_locked_holder_lives_whatever_its_pid, setup, teardown),
                cmocka_unit_test_setup_teardown(test_holder_in_another_pid_namespace, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forked_child_keeps_no_slot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_claim_passes_over_locked_free_slots, setup, teardown),
                cmocka_unit_test_setup_teardown(test_claim_takes_over_stale_index, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ended_names_its_rank, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rank_out_of_range, setup, teardown),
                cmocka_unit_test_setup_teardown(test_table_full, setup, teardown),
                cmocka_unit_test_setup_teardown(test_claim_race_one_winner, setup, teardown),
                cmocka_unit_test_setup_teardown(test_claim_race_against_dead_holder, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unreadable_proc_is_not_death, setup, teardown),
                cmocka_unit_test_setup_teardown(test_release_only_own_claim, setup, teardown),
                cmocka_unit_test_setup_teardown(test_odd_sequence_left_by_dead_writer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_state_roundtrip_and_bounds, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_current_leaves_ended_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_odd_sequences_everywhere_cost_no_yield, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stacks_request_wakes_holder, setup, teardown),
        };
        return cmocka_run_group_tests_name("slot", tests, NULL, NULL);
}
