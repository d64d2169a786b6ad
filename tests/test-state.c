/* SPDX-License-Identifier: MIT */
/*
 * What a consistent replay's lives and counts say, against working it out again, on the
 * real torch_npu snapshots (plain, expandable segments, emptied caches, two devices): the
 * static plan's most bytes live, read from the counts and swept from the spans; and the
 * state of a device at an index, undone again from dump time (npf_replay_state_at()) and
 * read from the lives (npf_replay_footprint_at()): the same segments and the same blocks,
 * with the same sizes and pending frees, at every fifth index
 * (each undo again is a replay of its own: every index would take seconds, minutes under the
 * sanitizers), the first and the last.
 */
#include "replay/analysis.h"
#include "replay/replay.h"
#include "replay/snapshot.h"

#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define SNAPSHOT_DIR "../shared/testdata/torch_npu_snapshots"

static void assert_same_state(const npf_replay_state_t *x, const npf_replay_state_t *y, const char *what)
{
        if (x->n_blocks != y->n_blocks || x->n_segments != y->n_segments)
                fail_msg("%s: %zu blocks and %zu segments undone, %zu and %zu from the lives", what, x->n_blocks,
                         x->n_segments, y->n_blocks, y->n_segments);
        for (size_t k = 0; k < x->n_segments; k++)
                if (x->segments[k].addr != y->segments[k].addr || x->segments[k].size != y->segments[k].size)
                        fail_msg("%s: segment %zu differs", what, k);
        for (size_t k = 0; k < x->n_blocks; k++) {
                const npf_replay_live_t *a = &x->live[k], *b = &y->live[k];
                if (a->life.addr != b->life.addr || a->life.size != b->life.size ||
                    a->life.footprint != b->life.footprint || a->life.stream != b->life.stream ||
                    a->pending != b->pending)
                        fail_msg("%s: block %zu (0x%" PRIx64 ") differs", what, k, a->life.addr);
        }
}

#define STRIDE 5

/* Every STRIDE-th index of every device of @path, the last, and before the first event.
 * Return: the indices. */
static size_t check_snapshot(const char *path)
{
        char err[NPF_SNAPSHOT_ERR_MAX > NPF_REPLAY_ERR_MAX ? NPF_SNAPSHOT_ERR_MAX : NPF_REPLAY_ERR_MAX];
        npf_snapshot_t *s;
        int64_t *devices;
        size_t checked = 0;

        if (npf_snapshot_load(path, NULL, NULL, &s, err) < 0)
                fail_msg("%s: %s", path, err);
        size_t nd = npf_replay_devices(s, &devices);
        for (size_t d = 0; d < nd; d++) {
                npf_replay_t *r;
                if (npf_replay_run(s, devices[d], false, &r, err) < 0)
                        fail_msg("%s: %s", path, err);
                /* The real snapshots are consistent: the lives are read, not the fallback taken. */
                assert_int_equal(r->n_issues, 0);
                /* The plan of the replay as it is, and as if it had met an inconsistency. */
                npf_replay_t swept = *r;
                npf_plan_t counted_plan, swept_plan;
                swept.n_issues = 1;
                assert_int_equal(npf_plan_lifetimes(r, &counted_plan), 0);
                assert_int_equal(npf_plan_lifetimes(&swept, &swept_plan), 0);
                assert_true(counted_plan.peak_live_bytes > 0);
                assert_true(counted_plan.peak_live_bytes == swept_plan.peak_live_bytes);
                assert_true(counted_plan.plan_bytes == swept_plan.plan_bytes);
                assert_int_equal(counted_plan.partitions, swept_plan.partitions);
                for (int64_t i = -1; i < (int64_t) r->n;
                     i = i + STRIDE < (int64_t) r->n || i == (int64_t) r->n - 1 ? i + STRIDE : (int64_t) r->n - 1) {
                        npf_replay_state_t *x, *y;
                        char what[600];
                        snprintf(what, sizeof(what), "%s, device %" PRId64 ", after event %" PRId64, path, devices[d], i);
                        assert_int_equal(npf_replay_state_at(s, r, i, &x), 0);
                        assert_int_equal(npf_replay_footprint_at(s, r, i, &y), 0);
                        assert_same_state(x, y, what);
                        npf_state_free(x);
                        npf_state_free(y);
                        checked++;
                }
                npf_replay_free(r);
        }
        free(devices);
        npf_snapshot_free(s);
        return checked;
}

static void test_lives_and_counts_as_worked_out(void **state)
{
        DIR *dir = opendir(SNAPSHOT_DIR);
        struct dirent *de;
        size_t files = 0, indices = 0;
        (void) state;

        if (!dir) {
                print_message("%s is absent: the real-snapshot test is skipped\n", SNAPSHOT_DIR);
                skip();
        }
        while ((de = readdir(dir))) {
                size_t len = strlen(de->d_name);
                if (len < 5 || strcmp(de->d_name + len - 4, ".pkl") != 0)
                        continue;
                char path[512];
                snprintf(path, sizeof(path), "%s/%s", SNAPSHOT_DIR, de->d_name);
                indices += check_snapshot(path);
                files++;
        }
        closedir(dir);
        print_message("%zu snapshots, %zu indices: the same state both ways\n", files, indices);
        assert_true(files >= 5);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lives_and_counts_as_worked_out),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
