/* SPDX-License-Identifier: MIT */
/*
 * The rank table as JSON: the table the daemon keeps between reads and changes in place
 * (npf_rank_view_refresh) must always be the table made afresh (npf_view_ranks), through
 * claims, steps, states, ended windows, releases, a slot taken by another rank, stalls and
 * strings that grow and shrink, and the progress the daemon judged of each claim; and the
 * table turns into an object per rank.
 */
#include "npuprof/shm.h"
#include "shm/slot.h"
#include "conf/view.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define STALL_MS 1000u

typedef struct fixture {
        char name[64];
        npf_shm_t *shm;
        npf_shm_ranks_t *table;
        npf_rank_view_t *kept;
} fixture_t;

static int setup(void **state)
{
        static int n;
        fixture_t *f = calloc(1, sizeof(*f));
        char err[NPF_SHM_ERR_MAX];

        snprintf(f->name, sizeof(f->name), "npftest-view-%d-%d", (int) getpid(), n++);
        npf_shm_unlink(f->name);
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &f->shm, err), 0);
        f->table = npf_shm_ranks(f->shm);
        f->kept = npf_rank_view_new();
        assert_non_null(f->kept);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fixture_t *f = *state;

        npf_rank_view_free(f->kept);
        npf_shm_close(f->shm);
        npf_shm_unlink(f->name);
        free(f);
        return 0;
}

/* The kept table, refreshed at @now, is the fresh one to the byte; it has @rows rows. */
static void same(fixture_t *f, uint64_t now, const bool *stalled, size_t rows)
{
        json_t *fresh = npf_view_ranks(f->shm, now, STALL_MS, stalled, NULL);
        json_t *kept = npf_rank_view_refresh(f->kept, f->shm, now, STALL_MS, stalled, NULL, NULL);
        char *a, *b;

        assert_non_null(fresh);
        assert_non_null(kept);
        a = json_dumps(fresh, JSON_COMPACT | JSON_PRESERVE_ORDER);
        b = json_dumps(kept, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (strcmp(a, b) != 0)
                fail_msg("kept:  %s\nfresh: %s", b, a);
        assert_int_equal(json_array_size(json_object_get(kept, "rows")), rows);
        free(a);
        free(b);
        json_decref(fresh);
        json_decref(kept);
}

static void set_state(npf_shm_ranks_t *table, npf_shm_slot_t *slot, uint32_t state, int64_t step, const char *message,
                      const char *output)
{
        npf_shm_slot_state_t st = {
                .generation = 3,
                .state = state,
                .backend = NPF_BACKEND_HOST,
                .window_start = 10,
                .window_stop = 14,
                .state_step = step,
        };

        snprintf(st.message, sizeof(st.message), "%s", message);
        snprintf(st.output, sizeof(st.output), "%s", output);
        npf_slot_set_state(table, slot, &st);
}

static void test_kept_is_fresh(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t five_lease, two_lease, nine_lease;
        npf_shm_slot_t *five, *two;
        uint64_t now = 5000000000ull;

        same(f, now, NULL, 0);
        assert_int_equal(npf_slot_claim(f->shm, 5, 1, &five_lease, NULL), 0);
        five = five_lease.slot;
        same(f, now, NULL, 1);
        /* A lower rank claimed later comes first. */
        assert_int_equal(npf_slot_claim(f->shm, 2, 0, &two_lease, NULL), 0);
        two = two_lease.slot;
        same(f, now, NULL, 2);
        npf_slot_step(five, 9, now);
        npf_slot_step(two, 9, now);
        set_state(f->table, five, NPF_WINDOW_ARMED, 9, "", "");
        set_state(f->table, two, NPF_WINDOW_ARMED, 9, "", "");
        same(f, now + 1000000, NULL, 2);
        npf_slot_step(five, 10, now + 2000000);
        set_state(f->table, five, NPF_WINDOW_COLLECTING, 10, "", "rank5_start10_stop14");
        same(f, now + 2000000, NULL, 2);
        /* A long message, then a short one, then none: strings in place grow and shrink. */
        set_state(f->table, two, NPF_WINDOW_FAILED, 10, "the backend refused: a long reason that runs on and on",
                  "r2");
        same(f, now + 3000000, NULL, 2);
        set_state(f->table, two, NPF_WINDOW_FAILED, 11, "short", "rank2_start10_stop14.1");
        same(f, now + 3000000, NULL, 2);
        set_state(f->table, two, NPF_WINDOW_IDLE, 12, "", "");
        same(f, now + 3000000, NULL, 2);
        /* Silent past the stall time: stalled by its heartbeat, or as the sweep says. */
        same(f, now + 2000000 + 2ull * STALL_MS * 1000000, NULL, 2);
        bool stalled[NPF_SHM_SLOTS] = { false };
        stalled[npf_slot_index(f->table, five)] = true;
        same(f, now + 3000000, stalled, 2);
        same(f, now + 3000000, NULL, 2);
        set_state(f->table, five, NPF_WINDOW_DONE, 15, "", "rank5_start10_stop14");
        same(f, now + 4000000, NULL, 2);
        /* Released: its row goes; its slot taken by rank 9, which sorts last. */
        npf_slot_release(f->shm, &five_lease);
        same(f, now + 4000000, NULL, 1);
        assert_int_equal(npf_slot_claim(f->shm, 9, 2, &nine_lease, NULL), 0);
        same(f, now + 4000000, NULL, 2);
        npf_slot_release(f->shm, &two_lease);
        npf_slot_release(f->shm, &nine_lease);
        same(f, now + 5000000, NULL, 0);
}

static void test_many_ranks(void **state)
{
        fixture_t *f = *state;
        static npf_slot_lease_t slots[300];
        uint64_t now = 7000000000ull;

        for (uint32_t r = 0; r < 300; r++)
                assert_int_equal(npf_slot_claim(f->shm, 299 - r, 0, &slots[r], NULL), 0);
        same(f, now, NULL, 300);
        for (int step = 1; step <= 3; step++) {
                for (uint32_t r = 0; r < 300; r += step)
                        npf_slot_step(slots[r].slot, step, now);
                same(f, now + (uint64_t) step * 1000000, NULL, 300);
        }
        for (uint32_t r = 0; r < 300; r += 2)
                npf_slot_release(f->shm, &slots[r]);
        same(f, now + 5000000, NULL, 150);
        for (uint32_t r = 1; r < 300; r += 2)
                npf_slot_release(f->shm, &slots[r]);
        same(f, now + 5000000, NULL, 0);
}

/* @kept refreshed with @progress is the table made afresh with it; return the first row's object. */
static json_t *with_progress(fixture_t *f, const npf_view_progress_t *progress)
{
        npf_rank_view_t *fresh_view = npf_rank_view_new();
        json_t *fresh = npf_rank_view_refresh(fresh_view, f->shm, 1000, STALL_MS, NULL, NULL, progress);
        json_t *kept = npf_rank_view_refresh(f->kept, f->shm, 1000, STALL_MS, NULL, NULL, progress);
        char *a = json_dumps(fresh, JSON_COMPACT | JSON_PRESERVE_ORDER), *b = json_dumps(kept, JSON_COMPACT | JSON_PRESERVE_ORDER);

        if (strcmp(a, b) != 0)
                fail_msg("kept:  %s\nfresh: %s", b, a);
        free(a);
        free(b);
        json_t *objects = npf_view_table_objects(kept);
        json_t *o = json_incref(json_array_get(objects, 0));
        json_decref(objects);
        json_decref(fresh);
        json_decref(kept);
        npf_rank_view_free(fresh_view);
        return o;
}

/* The progress the daemon judged of a claim: step_time_ms, stalled, stalled_for_s; of another claim, nulls. */
static void test_progress_columns(void **state)
{
        fixture_t *f = *state;
        static npf_view_progress_t progress[NPF_SHM_SLOTS];
        npf_slot_lease_t lease;
        npf_slot_view_t v;
        json_t *o;

        assert_int_equal(npf_slot_claim(f->shm, 4, 0, &lease, NULL), 0);
        uint32_t i = npf_slot_index(f->table, lease.slot);
        assert_int_equal(npf_slot_read_current(f->table, i, &v), 0);
        npf_slot_step(lease.slot, 77, 1000);

        o = with_progress(f, NULL);
        assert_true(json_is_null(json_object_get(o, "step_time_ms")));
        assert_true(json_is_null(json_object_get(o, "stalled")));
        assert_true(json_is_null(json_object_get(o, "stalled_for_s")));
        json_decref(o);
        /* Judged, its step time not known yet. */
        progress[i] = (npf_view_progress_t) { .tag = v.tag, .known = true };
        o = with_progress(f, progress);
        assert_true(json_is_null(json_object_get(o, "step_time_ms")));
        assert_true(json_is_false(json_object_get(o, "stalled")));
        assert_true(json_is_null(json_object_get(o, "stalled_for_s")));
        json_decref(o);
        progress[i].step_time_ms = 30.12345;
        o = with_progress(f, progress);
        assert_true(json_real_value(json_object_get(o, "step_time_ms")) == 30.123);
        json_decref(o);
        progress[i].step_time_ms = 31.5;
        progress[i].stalled = true;
        progress[i].stalled_for_s = 312.46;
        o = with_progress(f, progress);
        assert_true(json_real_value(json_object_get(o, "step_time_ms")) == 31.5);
        assert_true(json_is_true(json_object_get(o, "stalled")));
        assert_true(json_real_value(json_object_get(o, "stalled_for_s")) == 312.5);
        json_decref(o);
        /* Judged of an earlier claim of the slot: nothing is known of this one. */
        progress[i].tag = v.tag + 1;
        o = with_progress(f, progress);
        assert_true(json_is_null(json_object_get(o, "step_time_ms")));
        assert_true(json_is_null(json_object_get(o, "stalled")));
        json_decref(o);
        npf_slot_release(f->shm, &lease);
}

static void test_table_objects(void **state)
{
        fixture_t *f = *state;
        npf_slot_lease_t lease;
        npf_shm_slot_t *slot;

        assert_int_equal(npf_slot_claim(f->shm, 4, 3, &lease, NULL), 0);
        slot = lease.slot;
        npf_slot_step(slot, 77, 1000);
        set_state(f->table, slot, NPF_WINDOW_COLLECTING, 12, "", "rank4_start10_stop14");
        json_t *table = npf_view_ranks(f->shm, 1000, STALL_MS, NULL, NULL);
        json_t *objects = npf_view_table_objects(table);
        assert_non_null(objects);
        assert_int_equal(json_array_size(objects), 1);
        json_t *o = json_array_get(objects, 0);
        assert_int_equal(json_object_size(o), json_array_size(json_object_get(table, "columns")));
        assert_int_equal(json_integer_value(json_object_get(o, "rank")), 4);
        assert_int_equal(json_integer_value(json_object_get(o, "pid")), getpid());
        assert_int_equal(json_integer_value(json_object_get(o, "step")), 77);
        assert_string_equal(json_string_value(json_object_get(o, "state")), "collecting");
        assert_int_equal(json_integer_value(json_object_get(o, "start_step")), 10);
        assert_int_equal(json_integer_value(json_object_get(o, "stop_step")), 14);
        assert_int_equal(json_integer_value(json_object_get(o, "local_device")), 3);
        assert_string_equal(json_string_value(json_object_get(o, "output")), "rank4_start10_stop14");
        assert_true(json_is_null(json_object_get(o, "step_time_ms")));
        assert_true(json_is_null(json_object_get(o, "stalled")));
        json_decref(objects);
        json_decref(table);

        /* What is not such a table is refused, not half read. */
        const char *bad[] = { "[]", "{}", "{\"columns\": [\"rank\"], \"rows\": [[1, 2]]}",
                              "{\"columns\": [1], \"rows\": [[1]]}", "{\"columns\": [\"rank\"], \"rows\": [5]}" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *t = json_loads(bad[i], 0, NULL);
                assert_non_null(t);
                json_t *r = npf_view_table_objects(t);
                if (r)
                        fail_msg("%s was read as a table: %s", bad[i], json_dumps(r, JSON_COMPACT));
                json_decref(t);
        }
        npf_slot_release(f->shm, &lease);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_kept_is_fresh, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many_ranks, setup, teardown),
                cmocka_unit_test_setup_teardown(test_table_objects, setup, teardown),
                cmocka_unit_test_setup_teardown(test_progress_columns, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
