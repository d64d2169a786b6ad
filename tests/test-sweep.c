/* SPDX-License-Identifier: MIT */
/*
 * The daemon's sweep of the rank table, and what of the table it reads: every slot's hot
 * entry at every sweep, a slot's cold entry (its window state) only when that entry's
 * sequence or the slot's claim moved since the sweep last read it, and then by pread(),
 * never through its mapping. The ranks write through a mapping of their own; in the
 * daemon's, the cold entries are unreadable (PROT_NONE) from start to end, so that a sweep
 * that touched one would die of SIGSEGV, and the cold entries it reads are counted by
 * pread() itself, which this program defines over the C library's.
 */
/* This program defines pread() itself: no fortified inline wrapper of it. */
#undef _FORTIFY_SOURCE
#include "daemon/sweep.h"
#include "npuprof/shm.h"
#include "shm/slot.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#define MS 1000000ull

typedef struct fixture {
        char name[64];
        npf_shm_t *shm;                 /* the daemon's */
        npf_shm_t *ranks;               /* the ranks': a mapping of their own */
        npf_shm_ranks_t *table;         /* through the ranks' mapping */
        npf_sweep_t *sweep;
        unsigned recorded;
        uint32_t last_outcome;
} fixture_t;

static int setup(void **state)
{
        static int n;
        fixture_t *f = calloc(1, sizeof(*f));
        char err[NPF_SHM_ERR_MAX];

        snprintf(f->name, sizeof(f->name), "npftest-sweep-%d-%d", (int) getpid(), n++);
        npf_shm_unlink(f->name);
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &f->shm, err), 0);
        assert_int_equal(npf_shm_open(f->name, 0, &f->ranks, err), 0);
        f->table = npf_shm_ranks(f->ranks);
        assert_ptr_not_equal(f->table, npf_shm_ranks(f->shm));
        f->sweep = calloc(1, sizeof(*f->sweep));
        f->sweep->stall_ms = 60000;
        /* The daemon's mapping of the cold entries: unreadable for the whole test. */
        _Static_assert(offsetof(npf_shm_ranks_t, cold) % 4096 == 0, "the cold entries start a page");
        assert_int_equal(mprotect(npf_shm_ranks(f->shm)->cold, sizeof(f->table->cold), PROT_NONE), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fixture_t *f = *state;

        npf_shm_close(f->ranks);
        npf_shm_close(f->shm);
        npf_shm_unlink(f->name);
        free(f->sweep);
        free(f);
        return 0;
}

static void count_cb(const npf_window_record_t *rec, void *data)
{
        fixture_t *f = data;

        f->recorded++;
        f->last_outcome = rec->outcome;
}

/* Reads of cold entries: pread() and pread64() are this program's, and count them. */
static uint64_t cold_reads;

static ssize_t counted_pread(int fd, void *buf, size_t n, off_t at)
{
        if (at >= (off_t) offsetof(npf_shm_ranks_t, cold) && at < (off_t) sizeof(npf_shm_ranks_t))
                cold_reads++;
        return syscall(SYS_pread64, fd, buf, n, at);
}

ssize_t pread(int fd, void *buf, size_t n, off_t at)
{
        return counted_pread(fd, buf, n, at);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t at)
{
        return counted_pread(fd, buf, n, at);
}

/* One sweep at @now_ns. Return: the cold entries it read. */
static uint64_t sweep(fixture_t *f, uint64_t now_ns)
{
        uint64_t before = cold_reads;

        npf_sweep_run(f->sweep, f->shm, now_ns, count_cb, f);
        return cold_reads - before;
}

/* An idle table, from the daemon's first sweep on, is swept through its hot entries alone. */
static void test_idle_sweep_reads_no_cold_entry(void **state)
{
        fixture_t *f = *state;

        for (uint64_t k = 1; k <= 3; k++)
                assert_int_equal(sweep(f, k * 200 * MS), 0);
        assert_int_equal(f->sweep->attached, 0);
        assert_int_equal(f->sweep->runs, 3);
        assert_int_equal(f->recorded, 0);
}

/*
 * Ranks that step, and do nothing else, are swept through their hot entries alone: their
 * window states are what the sweep read when they last moved. A state that moves is read
 * again (once, or twice when a window ended: the ended windows too), an ended window
 * recorded once, a new claim read anew.
 */
static void test_cold_entry_read_only_when_it_moved(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease[3];
        npf_shm_slot_state_t collecting = { .generation = 1, .state = NPF_WINDOW_COLLECTING, .window_start = 10,
                                            .window_stop = 14, .state_step = 10 };
        npf_shm_slot_state_t done = collecting;

        done.state = NPF_WINDOW_DONE;
        for (uint32_t r = 0; r < 3; r++) {
                assert_int_equal(npf_slot_claim(f->ranks, r, 0, &lease[r], NULL), 0);
                npf_slot_set_state(f->table, lease[r].slot, &collecting);
                npf_slot_step(lease[r].slot, 10, 1000);
        }
        assert_int_equal(sweep(f, 200 * MS), 3);
        assert_int_equal(f->sweep->attached, 3);
        assert_int_equal(f->sweep->by_state[NPF_WINDOW_COLLECTING], 3);

        /* Steps and heartbeats are hot: the sweep reads them, and still counts three collecting. */
        for (uint64_t k = 2; k <= 4; k++) {
                for (uint32_t r = 0; r < 3; r++)
                        npf_slot_step(lease[r].slot, 10 + (int64_t) k, 1000 + k);
                assert_int_equal(sweep(f, k * 200 * MS), 0);
                assert_int_equal(f->sweep->attached, 3);
                assert_int_equal(f->sweep->by_state[NPF_WINDOW_COLLECTING], 3);
        }

        /* Rank 1's window ends: its state and its ended windows are read, the window recorded once. */
        npf_slot_set_state(f->table, lease[1].slot, &done);
        assert_int_equal(sweep(f, 1000 * MS), 2);
        assert_int_equal(f->sweep->by_state[NPF_WINDOW_COLLECTING], 2);
        assert_int_equal(f->sweep->by_state[NPF_WINDOW_DONE], 1);
        assert_int_equal(f->recorded, 1);
        assert_int_equal(f->last_outcome, NPF_WINDOW_DONE);
        assert_int_equal(sweep(f, 1200 * MS), 0);
        assert_int_equal(f->sweep->by_state[NPF_WINDOW_DONE], 1);
        assert_int_equal(f->recorded, 1);

        /* Released, the slot is free and quiet; claimed again, it is read anew. */
        npf_slot_release(f->ranks, &lease[2]);
        sweep(f, 1400 * MS);
        assert_int_equal(f->sweep->attached, 2);
        assert_int_equal(sweep(f, 1600 * MS), 0);
        assert_int_equal(npf_slot_claim(f->ranks, 7, 0, &lease[2], NULL), 0);
        assert_int_equal(sweep(f, 1800 * MS), 1);
        assert_int_equal(f->sweep->attached, 3);
        assert_int_equal(f->sweep->by_state[NPF_WINDOW_IDLE], 1);
        for (uint32_t r = 0; r < 3; r++)
                npf_slot_release(f->ranks, &lease[r]);
}

/* A hot entry is what the sweep reads: the sequence lives there, and its window state does not. */
static void test_hot_entry_holds_what_a_sweep_reads(void **state)
{
        (void) state;
        assert_true(offsetof(npf_shm_slot_t, seq) + sizeof(uint64_t) <= sizeof(npf_shm_slot_t));
        assert_true(offsetof(npf_shm_ranks_t, slots) + sizeof(((npf_shm_ranks_t *) 0)->slots) <=
                    offsetof(npf_shm_ranks_t, cold));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_idle_sweep_reads_no_cold_entry, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cold_entry_read_only_when_it_moved, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hot_entry_holds_what_a_sweep_reads, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
