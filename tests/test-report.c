/* SPDX-License-Identifier: MIT */
/* timeline.csv's rows, formatted by hand, against printf's on every boundary of the digits. */
#include "replay/replay.h"
#include "replay/report.h"
#include "replay/snapshot.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Every count of digits, each at its least and greatest value, and the extremes. */
static size_t boundaries(uint64_t *v)
{
        size_t n = 0;
        uint64_t p = 1;

        v[n++] = 0;
        for (int k = 1; k < 20; k++) {
                p *= 10;
                v[n++] = p - 1;
                v[n++] = p;
                v[n++] = p + 1;
                v[n++] = p + p / 3;     /* digits other than 0, 1 and 9 */
        }
        v[n++] = UINT64_MAX - 1;
        v[n++] = UINT64_MAX;
        return n;
}

/* The row printf makes of event @i of @r. */
static int printf_row(char *buf, size_t size, const npf_replay_t *r, size_t i)
{
        const npf_mem_event_t *e = &r->events[i];
        char time[24] = "";

        if (e->time_us != NPF_TIME_UNKNOWN)
                snprintf(time, sizeof(time), "%" PRId64, e->time_us);
        return snprintf(buf, size, "%" PRId64 ",%zu,%s,0x%" PRIx64 ",%" PRIu64 ",0x%" PRIx64 ",%" PRIu64 ",%" PRIu64
                        ",%" PRIu64 ",%" PRIu64 ",%s\n", r->device, i, npf_action_name(e->action), e->addr, e->size,
                        e->stream, r->allocated[i], r->requested[i], r->active[i], r->reserved[i], time);
}

/* @r's rows made into a buffer of @size bytes, a call at a time, against printf's. */
static void assert_rows_by(const npf_replay_t *r, size_t size)
{
        size_t i = 0, rows = 0;
        char *buf = malloc(size + 1), want[NPF_REPORT_TIMELINE_ROW_MAX];

        assert_non_null(buf);
        while (i < r->n) {
                size_t from = i, len = npf_report_timeline_rows(buf, size, r, &i);
                assert_true(i > from);
                buf[len] = '\0';
                char *row = buf;
                for (size_t k = from; k < i; k++, rows++) {
                        int wl = printf_row(want, sizeof(want), r, k);
                        assert_true(wl > 0 && (size_t) wl < sizeof(want));
                        assert_memory_equal(row, want, (size_t) wl);
                        row += wl;
                }
                assert_ptr_equal(row, buf + len);
        }
        assert_int_equal(rows, r->n);
        free(buf);
}

/* @r's rows all in one call, and a few rows a call (each call resumes where the last
 * stopped), against printf's. */
static void assert_rows(const npf_replay_t *r)
{
        assert_rows_by(r, (r->n + 1) * NPF_REPORT_TIMELINE_ROW_MAX);
        assert_rows_by(r, 4 * NPF_REPORT_TIMELINE_ROW_MAX);
}

/* A replay of @n events of @device, its events and counts zeroed, for the test to fill. */
static npf_replay_t fake_replay(int64_t device, size_t n)
{
        npf_mem_event_t *events = calloc(n, sizeof(*events));
        uint64_t *counts = calloc(4 * n, sizeof(*counts));

        assert_non_null(events);
        assert_non_null(counts);
        return (npf_replay_t) { .device = device, .events = events, .n = n, .allocated = counts,
                                .requested = counts + n, .active = counts + 2 * n, .reserved = counts + 3 * n };
}

static void fake_replay_free(npf_replay_t *r)
{
        free((void *) r->events);
        free(r->allocated);
}

/* Runs of numbers whose leading digits repeat, then change, in every column at once: the
 * writer keeps the leading digits of the row before. */
static void test_rows_with_leading_digits_kept(void **state)
{
        static const uint64_t around[] = { 100000000, 299999990, UINT64_C(1000000000000000),
                                           UINT64_C(1732000000000000), UINT64_C(9999999999999990) };
        enum { RUN = 25 };
        size_t n = sizeof(around) / sizeof(around[0]) * RUN;
        npf_replay_t r = fake_replay(0, n);
        npf_mem_event_t *events = (npf_mem_event_t *) r.events;
        (void) state;

        for (size_t i = 0; i < n; i++) {
                /* Up from 12 below the value, or down from 12 above it: each run crosses a
                 * change of its leading digits one way or the other. */
                uint64_t v = i / RUN % 2 ? around[i / RUN] + 12 - i % RUN : around[i / RUN] - 12 + i % RUN;
                events[i] = (npf_mem_event_t) { .action = NPF_MEM_ALLOC, .addr = v, .size = v,
                                                .time_us = (int64_t) v };
                r.allocated[i] = v;
                r.requested[i] = v - 1;
                r.active[i] = v + 7;
                r.reserved[i] = v;
        }
        assert_rows(&r);
        fake_replay_free(&r);
}

static void test_rows_match_printf(void **state)
{
        uint64_t v[128];
        size_t nv = boundaries(v), n = nv * 3;
        npf_replay_t r = fake_replay(7, n);
        npf_mem_event_t *events = (npf_mem_event_t *) r.events;
        (void) state;

        /* Each value in every column, beside others of other lengths; reserved and stream
         * repeat, as the writer's cache of them expects, and change. */
        for (size_t i = 0; i < n; i++) {
                events[i] = (npf_mem_event_t) { .action = (uint8_t) (i % NPF_MEM__COUNT), .addr = v[(i + 1) % nv],
                                                .size = v[i % nv], .stream = v[i / 7 % nv],
                                                .time_us = i % 5 == 4 ? NPF_TIME_UNKNOWN
                                                           : (int64_t) v[(i + 3) % nv] * (i % 2 ? -1 : 1) };
                r.allocated[i] = v[(i + 5) % nv];
                r.requested[i] = v[(i + 7) % nv];
                r.active[i] = v[(i + 11) % nv];
                r.reserved[i] = v[i / 3 % nv];
        }
        events[0].time_us = INT64_MIN + 1;
        events[1].time_us = INT64_MAX;
        assert_rows(&r);
        fake_replay_free(&r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rows_match_printf),
                cmocka_unit_test(test_rows_with_leading_digits_kept),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
