/* SPDX-License-Identifier: MIT */
/* Rank-table slots: claim, duplicate claimants, release, reclaim of dead and reused pids. */
#include "npuprof/shm.h"
#include "shm/proc.h"
#include "shm/slot.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct fixture {
        char name[64];
        npf_shm_t *shm;
        npf_shm_ranks_t *table;
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
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fixture_t *f = *state;

        npf_shm_close(f->shm);
        npf_shm_unlink(f->name);
        free(f);
        return 0;
}

static void test_claim_read_release(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *slot;
        npf_slot_view_t v;
        char err[NPF_SHM_ERR_MAX];
        uint64_t start;

        assert_int_equal(npf_slot_claim(f->table, 42, 3, &slot, err), 0);
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

        npf_slot_step(slot, 77, 123456789);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.step, 77);
        assert_int_equal(v.heartbeat_ns, 123456789);

        npf_slot_release(f->table, slot);
        assert_int_equal(f->table->index[42], 0);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.pid, 0);
        /* Released: the rank can be claimed again. */
        assert_int_equal(npf_slot_claim(f->table, 42, 0, &slot, err), 0);
        npf_slot_release(f->table, slot);
}

static void test_second_claim_same_process_refused(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *a, *b = NULL;
        char err[NPF_SHM_ERR_MAX] = "";

        assert_int_equal(npf_slot_claim(f->table, 5, 0, &a, err), 0);
        assert_int_equal(npf_slot_claim(f->table, 5, 0, &b, err), -EBUSY);
        assert_null(b);
        assert_non_null(strstr(err, "rank 5 is already claimed by this process"));
        /* Other ranks are unaffected. */
        assert_int_equal(npf_slot_claim(f->table, 6, 0, &b, err), 0);
        assert_ptr_not_equal(a, b);
}

static void test_second_live_claimant_refused(void **state)
{
        fixture_t *f = *state;
        int to_child[2], to_parent[2];
        char err[NPF_SHM_ERR_MAX] = "", c;
        npf_shm_slot_t *slot = NULL;

        assert_int_equal(pipe(to_child), 0);
        assert_int_equal(pipe(to_parent), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_shm_slot_t *mine;
                int r = npf_slot_claim(f->table, 9, 0, &mine, NULL);
                (void) !write(to_parent[1], r == 0 ? "y" : "n", 1);
                (void) !read(to_child[0], &c, 1);       /* stay alive until told */
                _exit(0);
        }
        assert_int_equal(read(to_parent[0], &c, 1), 1);
        assert_int_equal(c, 'y');
        assert_int_equal(npf_slot_claim(f->table, 9, 0, &slot, err), -EBUSY);
        char want[64];
        snprintf(want, sizeof(want), "live process %d", (int) pid);
        assert_non_null(strstr(err, want));

        assert_int_equal(write(to_child[1], "x", 1), 1);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        /* Now the holder is gone: the rank is taken over. */
        assert_int_equal(npf_slot_claim(f->table, 9, 0, &slot, err), 0);
        assert_int_equal(NPF_SLOT_PID(slot->claim), (uint32_t) getpid());
        close(to_child[0]);
        close(to_child[1]);
        close(to_parent[0]);
        close(to_parent[1]);
}

static void test_reclaim_dead_process(void **state)
{
        fixture_t *f = *state;
        npf_slot_view_t last;
        npf_shm_slot_t *slot;
        int status;

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_shm_slot_t *mine;
                if (npf_slot_claim(f->table, 100, 2, &mine, NULL) != 0)
                        _exit(1);
                npf_shm_slot_state_t st = { .state = NPF_WINDOW_COLLECTING, .generation = 4,
                                            .window_start = 10, .window_stop = 14 };
                snprintf(st.output, sizeof(st.output), "rank100_start10_stop14");
                npf_slot_set_state(mine, &st);
                npf_slot_step(mine, 12, 1);
                _exit(0);       /* dies without releasing */
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_int_equal(WEXITSTATUS(status), 0);

        uint32_t idx = NPF_INDEX_SLOT(f->table->index[100]);
        assert_true(idx < NPF_SHM_SLOTS);
        assert_int_equal(npf_slot_reclaim(f->table, idx, &last), 1);
        assert_int_equal(last.pid, (uint32_t) pid);
        assert_int_equal(last.rank, 100);
        assert_int_equal(last.step, 12);
        assert_int_equal(last.st.state, NPF_WINDOW_COLLECTING);
        assert_string_equal(last.st.output, "rank100_start10_stop14");
        assert_int_equal(f->table->index[100], 0);
        assert_int_equal(NPF_SLOT_PID(f->table->slots[idx].claim), 0);
        /* A second reclaim finds nothing to do. */
        assert_int_equal(npf_slot_reclaim(f->table, idx, NULL), 0);

        /* A live owner is never reclaimed. */
        assert_int_equal(npf_slot_claim(f->table, 101, 0, &slot, NULL), 0);
        assert_int_equal(npf_slot_reclaim(f->table, npf_slot_index(f->table, slot), NULL), 0);
        assert_int_equal(NPF_SLOT_PID(slot->claim), (uint32_t) getpid());
        assert_int_equal(npf_slot_reclaim(f->table, NPF_SHM_SLOTS, NULL), -ERANGE);
}

/* A pid that now belongs to another process is told apart by its start time. */
static void test_reclaim_reused_pid(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *slot;
        npf_slot_view_t last;

        assert_int_equal(npf_slot_claim(f->table, 7, 0, &slot, NULL), 0);
        /* Pretend the claimant was an earlier process that had our pid. */
        slot->proc_start -= 1;
        assert_int_equal(npf_slot_reclaim(f->table, npf_slot_index(f->table, slot), &last), 1);
        assert_int_equal(last.pid, (uint32_t) getpid());
        assert_int_equal(f->table->index[7], 0);
        /* And the rank may be claimed again by the process that really has the pid. */
        assert_int_equal(npf_slot_claim(f->table, 7, 0, &slot, NULL), 0);
}

static void test_claim_takes_over_stale_index(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *slot;

        /* Garbage in the index (a slot number out of range) does not block the rank. */
        f->table->index[11] = 0xdeadbeef;
        assert_int_equal(npf_slot_claim(f->table, 11, 0, &slot, NULL), 0);
        assert_int_equal(NPF_INDEX_SLOT(f->table->index[11]), npf_slot_index(f->table, slot));
        /* Nor does an entry that points at another rank's slot. */
        npf_shm_slot_t *other;
        assert_int_equal(npf_slot_claim(f->table, 12, 0, &other, NULL), 0);
        f->table->index[13] = f->table->index[12];
        assert_int_equal(npf_slot_claim(f->table, 13, 0, &slot, NULL), 0);
        assert_ptr_not_equal(slot, other);
        assert_int_equal(other->rank, 12);
}

/* An ended window keeps the rank and pid that ended it, after the slot passes to another rank. */
static void test_ended_names_its_rank(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *slot, *again;
        npf_slot_view_t v;
        npf_shm_slot_state_t st = { .generation = 1, .state = NPF_WINDOW_DONE, .window_start = 3, .window_stop = 4 };

        assert_int_equal(npf_slot_claim(f->table, 1, 0, &slot, NULL), 0);
        uint32_t idx = npf_slot_index(f->table, slot);
        npf_slot_set_state(slot, &st);
        npf_slot_release(f->table, slot);
        /* While a slot where no window ended is free, the one that keeps a window is not taken. */
        assert_int_equal(npf_slot_claim(f->table, 2, 0, &again, NULL), 0);
        assert_ptr_not_equal(again, slot);
        npf_slot_release(f->table, again);
        /* Every other slot has kept more: the freed slot is the one reused. */
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                if (i != idx)
                        f->table->slots[i].windows_ended = 2;
        assert_int_equal(npf_slot_claim(f->table, 3, 0, &again, NULL), 0);
        assert_ptr_equal(again, slot);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.rank, 3);
        assert_int_equal(v.windows_ended, 1);
        assert_int_equal(v.ended[0].state, NPF_WINDOW_DONE);
        assert_int_equal(v.ended[0].rank, 1);
        assert_int_equal(v.ended[0].pid, (uint32_t) getpid());
        npf_slot_release(f->table, again);
}

static void test_rank_out_of_range(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *slot = NULL;
        char err[NPF_SHM_ERR_MAX] = "";

        assert_int_equal(npf_slot_claim(f->table, NPF_SHM_MAX_RANKS, 0, &slot, err), -EINVAL);
        assert_non_null(strstr(err, "65536"));
        assert_null(slot);
        assert_int_equal(npf_slot_claim(f->table, NPF_SHM_MAX_RANKS - 1, 0, &slot, err), 0);
}

static void test_table_full(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *slot = NULL;
        char err[NPF_SHM_ERR_MAX] = "";

        for (uint32_t r = 0; r < NPF_SHM_SLOTS; r++)
                assert_int_equal(npf_slot_claim(f->table, r * 64, 0, &slot, err), 0);
        slot = NULL;
        assert_int_equal(npf_slot_claim(f->table, 1, 0, &slot, err), -ENOSPC);
        assert_null(slot);
        assert_non_null(strstr(err, "1024 slots"));
        /* One freed slot is enough. */
        npf_slot_release(f->table, &f->table->slots[500]);
        assert_int_equal(npf_slot_claim(f->table, 1, 0, &slot, err), 0);
        assert_int_equal(npf_slot_index(f->table, slot), 500);
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
                                npf_shm_slot_t *s;
                                char c;
                                close(go[1]);
                                close(hold[1]);
                                (void) !read(go[0], &c, 1);     /* all start together */
                                int r = npf_slot_claim(f->table, rank, 0, &s, NULL);
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
                        npf_shm_slot_t *s;
                        _exit(npf_slot_claim(f->table, rank, 0, &s, NULL) == 0 ? 0 : 1);
                }
                assert_int_equal(waitpid(dead, NULL, 0), dead);
                assert_int_equal(pipe(go), 0);
                assert_int_equal(pipe(done), 0);
                assert_int_equal(pipe(hold), 0);
                for (int i = 0; i < N; i++) {
                        pids[i] = fork();
                        assert_true(pids[i] >= 0);
                        if (pids[i] == 0) {
                                npf_shm_slot_t *s;
                                char c;
                                close(go[1]);
                                close(hold[1]);
                                (void) !read(go[0], &c, 1);
                                int r = npf_slot_claim(f->table, rank, 0, &s, NULL);
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

/* A reclaimer that cannot read /proc (out of file descriptors) must not take a live slot. */
static void test_unreadable_proc_is_not_death(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *slot;
        int status;

        assert_int_equal(npf_slot_claim(f->table, 31, 0, &slot, NULL), 0);
        uint32_t idx = npf_slot_index(f->table, slot);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct rlimit rl = { .rlim_cur = 16, .rlim_max = 16 };
                setrlimit(RLIMIT_NOFILE, &rl);
                while (open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0)
                        ;
                /* EMFILE now: the holder's /proc entry cannot be opened. */
                _exit(npf_slot_reclaim(f->table, idx, NULL) == 0 ? 0 : 1);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(NPF_SLOT_PID(slot->claim), (uint32_t) getpid());
        assert_int_equal(NPF_INDEX_SLOT(f->table->index[31]), idx);
}

/* Only the owner's own claim is released; a stranger's release changes nothing. */
static void test_release_only_own_claim(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *slot;
        int status;

        assert_int_equal(npf_slot_claim(f->table, 32, 0, &slot, NULL), 0);
        uint64_t before = slot->claim;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_slot_release(f->table, slot);
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_int_equal(slot->claim, before);
        assert_int_not_equal(f->table->index[32], 0);
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
                npf_shm_slot_t *mine;
                if (npf_slot_claim(f->table, 33, 0, &mine, NULL) != 0)
                        _exit(1);
                mine->seq |= 1;         /* as if killed between write_begin and write_end */
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_int_equal(WEXITSTATUS(status), 0);
        uint32_t idx = NPF_INDEX_SLOT(f->table->index[33]);
        assert_int_equal(npf_slot_read(f->table, idx, &v), -EAGAIN);
        assert_int_equal(npf_slot_reclaim(f->table, idx, NULL), 1);
        assert_int_equal(f->table->slots[idx].seq % 2, 0);
        npf_shm_slot_t *slot;
        assert_int_equal(npf_slot_claim(f->table, 33, 0, &slot, NULL), 0);
        npf_shm_slot_state_t st = { .state = NPF_WINDOW_ARMED, .generation = 2 };
        npf_slot_set_state(slot, &st);
        assert_int_equal(npf_slot_read(f->table, npf_slot_index(f->table, slot), &v), 0);
        assert_int_equal(v.st.state, NPF_WINDOW_ARMED);
}

static void test_state_roundtrip_and_bounds(void **state)
{
        fixture_t *f = *state;
        npf_shm_slot_t *slot;
        npf_slot_view_t v;
        npf_shm_slot_state_t st = { .state = NPF_WINDOW_FAILED, .generation = 9, .window_start = 5,
                                    .window_stop = 9, .state_step = 6 };

        assert_int_equal(npf_slot_claim(f->table, 3, 0, &slot, NULL), 0);
        uint32_t idx = npf_slot_index(f->table, slot);
        memset(st.message, 'm', sizeof(st.message));    /* unterminated: cut on write */
        npf_slot_set_state(slot, &st);
        assert_int_equal(npf_slot_read(f->table, idx, &v), 0);
        assert_int_equal(v.st.state, NPF_WINDOW_FAILED);
        assert_int_equal(v.st.generation, 9);
        assert_int_equal(v.st.state_step, 6);
        assert_int_equal(strlen(v.st.message), sizeof(v.st.message) - 1);

        /* Bytes a hostile rank wrote are refused, not trusted. */
        memset(slot->st.output, 'o', sizeof(slot->st.output));
        assert_int_equal(npf_slot_read(f->table, idx, &v), -EBADMSG);
        slot->st.output[0] = '\0';
        slot->st.state = 1000;
        assert_int_equal(npf_slot_read(f->table, idx, &v), -EBADMSG);
        slot->st.state = NPF_WINDOW_DONE;
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
        npf_shm_slot_t *slot;
        npf_slot_view_t full, cur;
        npf_shm_slot_state_t failed = { .state = NPF_WINDOW_FAILED, .generation = 2, .window_start = 5,
                                        .window_stop = 9, .state_step = 6, .message = "disk full" };
        npf_shm_slot_state_t armed = { .state = NPF_WINDOW_ARMED, .generation = 3, .window_start = 20,
                                       .window_stop = 24, .state_step = 11 };

        assert_int_equal(npf_slot_claim(f->table, 4, 1, &slot, NULL), 0);
        uint32_t idx = npf_slot_index(f->table, slot);
        npf_slot_set_state(slot, &failed);
        npf_slot_set_state(slot, &armed);
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
        memset(slot->ended[0].output, 'o', sizeof(slot->ended[0].output));
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
        npf_shm_slot_t *slot;
        npf_slot_view_t v;

        assert_int_equal(npf_slot_claim(f->table, 7, 0, &slot, NULL), 0);
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                f->table->slots[i].seq = 2 * i + 1;
        yields = 0;
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                assert_int_equal(npf_slot_read(f->table, i, &v), -EAGAIN);
        assert_int_equal(yields, 0);
        assert_int_equal(npf_slot_reclaim(f->table, npf_slot_index(f->table, slot), NULL), 0);   /* alive */
        slot->seq++;
        assert_int_equal(npf_slot_read(f->table, npf_slot_index(f->table, slot), &v), 0);
        assert_int_equal(v.rank, 7);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_claim_read_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_second_claim_same_process_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_second_live_claimant_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reclaim_dead_process, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reclaim_reused_pid, setup, teardown),
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
        };
        return cmocka_run_group_tests_name("slot", tests, NULL, NULL);
}
