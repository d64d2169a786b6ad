/* SPDX-License-Identifier: MIT */
/*
 * Chrome trace analysis: hand-written traces whose trees, self and total times are worked
 * out by hand in the comments; both top-level forms, B/E pairing, borrowed ends, clipping,
 * metadata names, ProfilerStep#N, the device's events (torch_npu's NPU processes, Kineto's
 * GPU categories), string and float times, escapes in names, what is malformed, broken or
 * no trace at all, places in a file read a piece at a time. Then two real traces: torch.profiler's (committed with the fuzz corpus; its
 * figures come from an independent Python computation) and one that the host backend
 * writes right here, in a window this test opens on a private segment, whose step spans
 * must fall between the clock readings taken around each npf_rank_step().
 */
#include "replay/trace.h"
#include "npuprof/rank.h"
#include "conf/conf.h"
#include "lib/clock.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef NPF_TRACE_TESTDATA
#define NPF_TRACE_TESTDATA "tests/fuzz/corpus-trace"
#endif

/* What a test holds when an assertion jumps out of it; freed at teardown. */
static npf_trace_t *held;
static json_t *report;
static char *text;

static int teardown(void **state)
{
        (void) state;
        held = npf_trace_free(held);
        json_decref(report);
        report = NULL;
        free(text);
        text = NULL;
        return 0;
}

/* Load @s, which must be a valid trace, and its report with every operator. */
static npf_trace_t *load_len(const char *s, size_t len)
{
        char err[NPF_TRACE_ERR_MAX];
        npf_trace_t *t = NULL;
        int r = npf_trace_load(s, len, NULL, NULL, &t, err);

        if (r != 0)
                fail_msg("npf_trace_load: %d (%s): %s", r, strerror(-r), err);
        teardown(NULL);
        held = t;
        report = npf_trace_report_json(t, 1000);
        assert_non_null(report);
        return t;
}

static npf_trace_t *load(const char *s)
{
        return load_len(s, strlen(s));
}

/* Load @s, which must fail with @expected, and check the message. */
static void load_fails(const char *s, int expected, const char *message)
{
        char err[NPF_TRACE_ERR_MAX];
        npf_trace_t *t = NULL;
        int r = npf_trace_load(s, strlen(s), NULL, NULL, &t, err);

        if (r != expected)
                fail_msg("%s: %d (%s), expected %d: %s", s, r, strerror(-r), expected, r ? err : "no error");
        assert_null(t);
        assert_string_equal(err, message);
}

static int64_t count(const char *key)
{
        json_t *v = json_object_get(report, key);

        if (!json_is_integer(v))
                fail_msg("report: \"%s\" is not an integer", key);
        return json_integer_value(v);
}

static void assert_us(const json_t *v, double expected, const char *what)
{
        if (!json_is_real(v) || json_real_value(v) != expected)
                fail_msg("%s: %.17g, expected %.17g", what, json_is_real(v) ? json_real_value(v) : -1.0, expected);
}

/* Operator @name in the top list @list must have @n spans, @self_us and @total_us. */
static void assert_op(const char *list, const char *name, int64_t n, double self_us, double total_us)
{
        json_t *a = json_object_get(report, list), *e;
        size_t i;

        json_array_foreach(a, i, e) {
                if (strcmp(json_string_value(json_object_get(e, "name")), name) != 0)
                        continue;
                assert_int_equal(json_integer_value(json_object_get(e, "count")), n);
                assert_us(json_object_get(e, "self_us"), self_us, name);
                assert_us(json_object_get(e, "total_us"), total_us, name);
                return;
        }
        fail_msg("%s: no operator \"%s\"", list, name);
}

/* The name at position @i of the top list @list. */
static const char *top_name(const char *list, size_t i)
{
        const char *s = json_string_value(json_object_get(json_array_get(json_object_get(report, list), i), "name"));

        if (!s)
                fail_msg("%s has no entry %zu", list, i);
        return s;
}

static json_t *thread_at(size_t i)
{
        json_t *th = json_array_get(json_object_get(report, "threads"), i);

        if (!th)
                fail_msg("no thread %zu in the report", i);
        return th;
}

#define EV(ph, name, ts, rest) "{\"name\":\"" name "\",\"ph\":\"" ph "\",\"ts\":" #ts rest "}"
#define X1(name, ts, dur) EV("X", name, ts, ",\"dur\":" #dur ",\"pid\":1,\"tid\":1")

/* --- trees ---------------------------------------------------------------------------- */

static void test_nesting(void **state)
{
        (void) state;
        /*
         * A [0,100] holds B [10,40] (which holds C [20,30]) and D [50,70]; E [100,110] starts
         * where A ends: a sibling. A's self is 100 - 30 - 20 = 50, B's 30 - 10 = 20. F [200,300]
         * holds another F [210,260]: two spans, self 50 + 50, total 100 (not 150). Of two
         * spans that start together, the longer holds the shorter: G [400,450] holds H
         * [400,410]. Listed in another order than their times.
         */
        npf_trace_t *t = load("[" X1("D", 50, 20) "," X1("A", 0, 100) "," X1("C", 20, 10) "," X1("B", 10, 30) ","
                              X1("E", 100, 10) "," X1("F", 210, 50) "," X1("F", 200, 100) "," X1("H", 400, 10) ","
                              X1("G", 400, 50) "]");

        assert_non_null(t);
        assert_int_equal(count("events"), 9);
        assert_op("top_self", "G", 1, 40, 50);
        assert_op("top_self", "H", 1, 10, 10);
        assert_op("top_self", "A", 1, 50, 100);
        assert_op("top_self", "B", 1, 20, 30);
        assert_op("top_self", "C", 1, 10, 10);
        assert_op("top_self", "D", 1, 20, 20);
        assert_op("top_self", "E", 1, 10, 10);
        assert_op("top_self", "F", 2, 100, 100);
        /* Most self time first, ties by name; the same for total. */
        const char *by_self[] = { "F", "A", "G", "B", "D", "C", "E", "H" },
                   *by_total[] = { "A", "F", "G", "B", "D", "C", "E", "H" };
        for (size_t i = 0; i < 8; i++) {
                assert_string_equal(top_name("top_self", i), by_self[i]);
                assert_string_equal(top_name("top_total", i), by_total[i]);
        }
        assert_int_equal(json_array_size(json_object_get(report, "top_self")), 8);
        json_t *th = thread_at(0);
        assert_int_equal(json_integer_value(json_object_get(th, "events")), 9);
        assert_us(json_object_get(th, "span_us"), 450, "span");
        assert_int_equal(json_integer_value(json_object_get(th, "clipped")), 0);
        assert_us(json_object_get(report, "start_us"), 0, "start");
        assert_us(json_object_get(report, "end_us"), 450, "end");

        /* top_n limits the lists. */
        json_t *two = npf_trace_report_json(t, 2);
        assert_int_equal(json_array_size(json_object_get(two, "top_self")), 2);
        assert_int_equal(json_array_size(json_object_get(two, "top_total")), 2);
        json_decref(two);
}

static void test_begin_end(void **state)
{
        (void) state;
        /*
         * Thread 1: a [0,50] holds b [10,20]; an E at 60 has nothing open. Thread 2: c [5,15],
         * its E written before its B. E closes the latest B of its own thread whatever its name.
         */
        load("{\"traceEvents\":["
             "{\"ph\":\"B\",\"name\":\"a\",\"ts\":0,\"pid\":1,\"tid\":1},"
             "{\"ph\":\"E\",\"ts\":15,\"pid\":1,\"tid\":2},"
             "{\"ph\":\"B\",\"name\":\"c\",\"ts\":5,\"pid\":1,\"tid\":2},"
             "{\"ph\":\"B\",\"name\":\"b\",\"ts\":10,\"pid\":1,\"tid\":1},"
             "{\"ph\":\"E\",\"name\":\"a\",\"ts\":20,\"pid\":1,\"tid\":1},"
             "{\"ph\":\"E\",\"ts\":50,\"pid\":1,\"tid\":1},"
             "{\"ph\":\"E\",\"ts\":60,\"pid\":1,\"tid\":1}]}");
        assert_int_equal(count("events"), 3);
        assert_int_equal(count("unmatched_ends"), 1);
        assert_op("top_self", "a", 1, 40, 50);
        assert_op("top_self", "b", 1, 10, 10);
        assert_op("top_self", "c", 1, 10, 10);
        assert_int_equal(json_array_size(json_object_get(report, "threads")), 2);
        assert_int_equal(json_integer_value(json_object_get(thread_at(0), "tid")), 1);
        assert_int_equal(json_integer_value(json_object_get(thread_at(1), "tid")), 2);
        assert_int_equal(json_integer_value(json_object_get(thread_at(1), "events")), 1);
}

static void test_missing_end_borrows(void **state)
{
        (void) state;
        /*
         * P [0,100] holds Q, an X without dur at 30: Q ends with P, at 100, and holds R [40,50].
         * P's self 100 - 70 = 30, Q's 70 - 10 = 60. At the top level, a B at 150 that never
         * ends takes the end of the thread's last event, S [160,200]: 50 long, self 10.
         * An instant at 45 is a zero-long child of R.
         */
        load("[" X1("P", 0, 100) ","
             "{\"name\":\"Q\",\"ph\":\"X\",\"ts\":30,\"pid\":1,\"tid\":1}," X1("R", 40, 10) ","
             "{\"name\":\"open\",\"ph\":\"B\",\"ts\":150,\"pid\":1,\"tid\":1}," X1("S", 160, 40) ","
             "{\"name\":\"mark\",\"ph\":\"i\",\"ts\":45,\"pid\":1,\"tid\":1,\"s\":\"t\"}]");
        assert_int_equal(count("events"), 6);
        assert_op("top_self", "P", 1, 30, 100);
        assert_op("top_self", "Q", 1, 60, 70);
        assert_op("top_self", "R", 1, 10, 10);
        assert_op("top_self", "open", 1, 10, 50);
        assert_op("top_self", "S", 1, 40, 40);
        assert_op("top_self", "mark", 1, 0, 0);
        assert_int_equal(json_integer_value(json_object_get(thread_at(0), "borrowed_ends")), 2);
        assert_int_equal(json_integer_value(json_object_get(thread_at(0), "clipped")), 0);

        /* An event with no end, alone on its thread, is zero long. */
        load("[{\"name\":\"lone\",\"ph\":\"B\",\"ts\":7,\"pid\":1,\"tid\":1}]");
        assert_op("top_self", "lone", 1, 0, 0);
}

static void test_clipping(void **state)
{
        (void) state;
        /*
         * K [50,150] overruns its parent J [0,100]: clipped to [50,100]. M [200,210] and
         * N [205,215] overlap: N nests in M, clipped to [205,210].
         */
        load("[" X1("J", 0, 100) "," X1("K", 50, 100) "," X1("M", 200, 10) "," X1("N", 205, 10) "]");
        assert_op("top_self", "J", 1, 50, 100);
        assert_op("top_self", "K", 1, 50, 50);
        assert_op("top_self", "M", 1, 5, 10);
        assert_op("top_self", "N", 1, 5, 5);
        assert_int_equal(json_integer_value(json_object_get(thread_at(0), "clipped")), 2);
}

static void test_metadata_names(void **state)
{
        (void) state;
        /* Names come before or after the events; other metadata and phases are ignored. */
        load("{\"traceEvents\":["
             "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":7,\"args\":{\"name\":\"trainer\"}},"
             "{\"name\":\"op\",\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":7,\"tid\":70},"
             "{\"name\":\"op\",\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":7,\"tid\":71},"
             "{\"name\":\"op\",\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":\"gpu\",\"tid\":\"stream 7\"},"
             "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":7,\"tid\":71,\"args\":{\"name\":\"loader\"}},"
             "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":7,\"tid\":71,\"args\":{\"sort_index\":1}},"
             "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":9,\"tid\":9,\"args\":{\"name\":\"idle\"}},"
             "{\"name\":\"rss\",\"ph\":\"C\",\"ts\":1,\"pid\":7,\"args\":{\"kib\":5}},"
             "{\"name\":\"flow\",\"ph\":\"s\",\"ts\":1,\"id\":3,\"pid\":7,\"tid\":70},"
             "{\"name\":\"no phase\",\"ts\":1}"
             "],\"displayTimeUnit\":\"ms\"}");
        assert_int_equal(count("events"), 3);
        assert_int_equal(count("ignored"), 4);
        /* Threads in order of first appearance; a named thread without events is not listed. */
        assert_int_equal(json_array_size(json_object_get(report, "threads")), 3);
        json_t *a = thread_at(0), *b = thread_at(1), *c = thread_at(2);
        assert_string_equal(json_string_value(json_object_get(a, "process")), "trainer");
        assert_true(json_is_null(json_object_get(a, "name")));
        assert_int_equal(json_integer_value(json_object_get(a, "tid")), 70);
        assert_string_equal(json_string_value(json_object_get(b, "process")), "trainer");
        assert_string_equal(json_string_value(json_object_get(b, "name")), "loader");
        assert_string_equal(json_string_value(json_object_get(c, "pid")), "gpu");
        assert_string_equal(json_string_value(json_object_get(c, "tid")), "stream 7");
        assert_true(json_is_null(json_object_get(c, "process")));
        /* Thread names are no operators. */
        assert_int_equal(json_array_size(json_object_get(report, "top_self")), 1);
}

/* --- steps ---------------------------------------------------------------------------- */

static void test_steps(void **state)
{
        (void) state;
        /*
         * Four steps of 10, 20, 30, 40 us on the CPU thread, written out of order; a GPU stream
         * repeats three of them, later: the CPU thread has more. "ProfilerStep#2x" is no step.
         */
        npf_trace_t *t = load("[" X1("ProfilerStep#3", 30, 30) "," X1("ProfilerStep#1", 0, 10) ","
                              X1("ProfilerStep#2", 10, 20) "," X1("ProfilerStep#4", 60, 40) ","
                              X1("ProfilerStep#2x", 70, 1) "," X1("ProfilerStep#", 80, 1) "," X1("aten::mm", 1, 5) ","
                              EV("X", "ProfilerStep#1", 3, ",\"dur\":9,\"pid\":0,\"tid\":7") ","
                              EV("X", "ProfilerStep#2", 13, ",\"dur\":19,\"pid\":0,\"tid\":7") ","
                              EV("X", "ProfilerStep#3", 33, ",\"dur\":29,\"pid\":0,\"tid\":7") "]");
        const npf_trace_step_t *s;
        npf_trace_step_stats_t st;

        assert_int_equal(npf_trace_steps(t, &s), 4);
        for (int i = 0; i < 4; i++) {
                assert_int_equal(s[i].step, i + 1);
                assert_true(s[i].dur_us == 10.0 * (i + 1));
        }
        assert_true(s[0].start_us == 0 && s[1].start_us == 10 && s[2].start_us == 30 && s[3].start_us == 60);
        npf_trace_step_stats(t, &st);
        assert_int_equal(st.n, 4);
        assert_true(st.median_us == 25 && st.p90_us == 40 && st.max_us == 40);
        assert_us(json_object_get(report, "step_median_us"), 25, "median");
        assert_us(json_object_get(report, "step_p90_us"), 40, "p90");
        assert_us(json_object_get(report, "step_max_us"), 40, "max");
        json_t *steps = json_object_get(report, "steps");
        assert_int_equal(json_array_size(steps), 4);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(steps, 3), "step")), 4);
        assert_us(json_object_get(json_array_get(steps, 3), "dur_us"), 40, "step 4");
        json_t *where = json_object_get(report, "step_thread");
        assert_int_equal(json_integer_value(json_object_get(where, "pid")), 1);
        assert_int_equal(json_integer_value(json_object_get(where, "tid")), 1);
        /* Steps are not operators; names that only look like one are. */
        assert_op("top_self", "ProfilerStep#2x", 1, 1, 1);
        assert_op("top_self", "ProfilerStep#", 1, 1, 1);
        assert_op("top_self", "aten::mm", 1, 5, 5);
        assert_int_equal(json_array_size(json_object_get(report, "top_self")), 3);

        /* Equal counts: the thread whose first step starts first. An odd count's median. */
        t = load("[" EV("X", "ProfilerStep#1", 5, ",\"dur\":7,\"pid\":0,\"tid\":7") ","
                 EV("X", "ProfilerStep#1", 2, ",\"dur\":9,\"pid\":1,\"tid\":1") "]");
        assert_int_equal(npf_trace_steps(t, &s), 1);
        assert_true(s[0].start_us == 2 && s[0].dur_us == 9);
        npf_trace_step_stats(t, &st);
        assert_true(st.median_us == 9 && st.p90_us == 9);

        /* No steps: nulls. */
        t = load("[" X1("op", 1, 1) "]");
        assert_int_equal(npf_trace_steps(t, &s), 0);
        npf_trace_step_stats(t, &st);
        assert_int_equal(st.n, 0);
        assert_true(json_is_null(json_object_get(report, "step_median_us")));
        assert_true(json_is_null(json_object_get(report, "step_thread")));
        assert_int_equal(json_array_size(json_object_get(report, "steps")), 0);
}

/* --- forms and numbers ------------------------------------------------------------------ */

static void test_forms(void **state)
{
        (void) state;
        static const char events[] = X1("A", 0, 10) ",\n" X1("B", 2, 3);
        char buf[512];

        /* The same events, bare or in the object form (with other keys around), give the same. */
        snprintf(buf, sizeof(buf), "\xef\xbb\xbf [%s]\n", events);
        load(buf);
        assert_false(json_is_true(json_object_get(report, "truncated")));
        assert_op("top_self", "A", 1, 7, 10);
        snprintf(buf, sizeof(buf), "{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":0}],\"traceEvents\":[%s],"
                 "\"traceName\":\"x\",\"n\":12}", events);
        load(buf);
        assert_op("top_self", "A", 1, 7, 10);
        assert_int_equal(count("events"), 2);
        load("[]");
        assert_int_equal(count("events"), 0);
        assert_true(json_is_null(json_object_get(report, "start_us")));
        load("{\"traceEvents\":[]}");
        assert_int_equal(count("events"), 0);

        /* The array form may lack its closing bracket; a writer that died may stop anywhere. */
        static const char *const cut[] = {
                "[" X1("A", 0, 10) "," X1("B", 2, 3),
                "[" X1("A", 0, 10) "," X1("B", 2, 3) ",",
                "[" X1("A", 0, 10) "," X1("B", 2, 3) ",{\"name\":\"C\",\"ph\":\"X\",\"ts\":4,\"du",
                "[" X1("A", 0, 10) "," X1("B", 2, 3) ",{\"name\":\"C\",\"ph\":\"X\",\"ts\":tr",
                "{\"otherData\":{},\"traceEvents\":[" X1("A", 0, 10) "," X1("B", 2, 3) "\n",
                "{\"traceEvents\":[" X1("A", 0, 10) "," X1("B", 2, 3) "],\"complete\":tr",
                "{\"traceEvents\":[" X1("A", 0, 10) "," X1("B", 2, 3) "]",
                "{\"traceEvents\":[" X1("A", 0, 10) "," X1("B", 2, 3) "],",
                "{\"traceEvents\":[" X1("A", 0, 10) "," X1("B", 2, 3) "],\"complete\"",
        };
        load("{\"traceEvents\": [ ");
        assert_true(json_is_true(json_object_get(report, "truncated")));
        assert_int_equal(count("events"), 0);
        for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
                load(cut[i]);
                if (!json_is_true(json_object_get(report, "truncated")))
                        fail_msg("%s: not marked truncated", cut[i]);
                assert_int_equal(count("events"), 2);
                assert_op("top_self", "A", 1, 7, 10);
        }
}

static void test_times(void **state)
{
        (void) state;
        /* torch.profiler writes float microseconds, some versions strings; pid and tid strings. */
        npf_trace_t *t = load("{\"traceEvents\":["
                              "{\"name\":\"ProfilerStep#1\",\"ph\":\"X\",\"ts\":\"1712345678901.123\",\"dur\":\"2500.25\","
                              "\"pid\":\"CPU functions\",\"tid\":\"1\"},"
                              "{\"name\":\"k\",\"ph\":\"X\",\"ts\":1712345678902.5,\"dur\":0.5,"
                              "\"pid\":\"CPU functions\",\"tid\":\"1\"},"
                              "{\"name\":\"k\",\"ph\":\"X\",\"ts\":\"1712345678903\",\"dur\":1e1,"
                              "\"pid\":\"CPU functions\",\"tid\":\"1\"}]}");
        const npf_trace_step_t *s;

        assert_int_equal(npf_trace_steps(t, &s), 1);
        assert_true(s[0].start_us == 1712345678901.123 && s[0].dur_us == 2500.25);
        assert_op("top_self", "k", 2, 10.5, 10.5);
        assert_us(json_object_get(thread_at(0), "span_us"), 2500.25, "span");
        /* A string that holds an integer is that integer. */
        assert_int_equal(json_integer_value(json_object_get(thread_at(0), "tid")), 1);
}

static void test_malformed(void **state)
{
        (void) state;
        /* Events that cannot be placed are skipped and counted; the first one is described. */
        load("[\n" X1("ok", 1, 1) ",\n"
             "  {\"name\":\"a\",\"ph\":\"X\",\"ts\":\"abc\",\"pid\":1,\"tid\":1},\n"
             "{\"name\":\"b\",\"ph\":\"X\",\"ts\":\"inf\",\"pid\":1,\"tid\":1},\n"
             "{\"name\":\"c\",\"ph\":\"X\",\"ts\":\"0x10\",\"pid\":1,\"tid\":1},\n"
             "{\"name\":\"d\",\"ph\":\"X\",\"ts\":1,\"dur\":-1,\"pid\":1,\"tid\":1},\n"
             "{\"name\":\"e\",\"ph\":\"X\",\"ts\":1,\"pid\":1.5,\"tid\":1},\n"
             "{\"name\":5,\"ph\":\"X\",\"ts\":1,\"pid\":1,\"tid\":1},\n"
             "{\"name\":\"f\",\"ph\":\"X\",\"ts\":4e15,\"pid\":1,\"tid\":1},\n"
             "{\"name\":\"g\",\"ph\":\"X\",\"ts\":1,\"dur\":null,\"pid\":1,\"tid\":1},\n"
             "{\"name\":\"h\",\"ph\":\"B\",\"pid\":1,\"tid\":1},\n"
             "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":[],\"tid\":1,\"args\":{\"name\":\"x\"}}]");
        assert_int_equal(count("events"), 1);
        assert_int_equal(count("malformed"), 10);
        assert_string_equal(json_string_value(json_object_get(report, "first_malformed")),
                            "line 3, column 3: event 1 has no usable \"ts\" (microseconds, at most 3e15); skipped");
        load("[" X1("ok", 1, 1) "]");
        assert_null(json_object_get(report, "first_malformed"));

        /*
         * An element that is not an object is skipped too, and counts among the elements. An
         * unusable field makes any event malformed, a counter's or a flow's too; a missing
         * one only where it is needed (a flow needs no "dur").
         */
        load("[" X1("a", 1, 1) ",3,\"x\",\n[{}]," X1("b", 2, 1) ",null,"
             "{\"name\":\"memory\",\"ph\":\"C\",\"ts\":\"soon\",\"args\":{\"rss_kib\":1}},"
             "{\"name\":\"f\",\"ph\":\"s\",\"ts\":1,\"pid\":{},\"id\":1},"
             "{\"name\":\"f\",\"ph\":\"f\",\"ts\":2,\"pid\":1,\"id\":1}]");
        assert_int_equal(count("events"), 2);
        assert_int_equal(count("malformed"), 6);
        assert_int_equal(count("ignored"), 1);
        assert_true(json_is_null(json_object_get(report, "rss")));
        assert_string_equal(json_string_value(json_object_get(report, "first_malformed")),
                            "line 1, column 55: element 1 of the events is a number, not an object; skipped");
        /* The element index counts what was skipped; the first malformed is the first in the file. */
        load("[" X1("a", 1, 1) ",7,{\"name\":\"b\",\"ph\":\"X\",\"ts\":1,\"dur\":[]}]");
        assert_int_equal(count("malformed"), 2);
        assert_string_equal(json_string_value(json_object_get(report, "first_malformed")),
                            "line 1, column 55: element 1 of the events is a number, not an object; skipped");
        load("[{\"name\":\"b\",\"ph\":\"X\",\"ts\":1,\"dur\":[]},7," X1("a", 1, 1) ",\n"
             "{\"name\":\"c\",\"ph\":\"X\",\"ts\":1,\"tid\":true}]");
        assert_int_equal(count("malformed"), 3);
        assert_int_equal(count("events"), 1);
        assert_string_equal(json_string_value(json_object_get(report, "first_malformed")),
                            "line 1, column 2: event 0 has a \"dur\" that is not a number of microseconds >= 0; skipped");
        load("[" X1("a", 1, 1) ",\n  {\"name\":\"c\",\"ph\":\"X\",\"ts\":1,\"tid\":true},7]");
        assert_string_equal(json_string_value(json_object_get(report, "first_malformed")),
                            "line 2, column 3: event 1 has a pid or tid that is neither an integer nor a string; skipped");

        /* The phase is the first character of "ph"; an empty one is a phase, none known. */
        load("[{\"name\":\"q\",\"ph\":\"Xy\",\"ts\":1,\"dur\":2},{\"ph\":\"\"},{\"ph\":7}]");
        assert_int_equal(count("events"), 1);
        assert_int_equal(count("ignored"), 2);
        assert_op("top_self", "q", 1, 2, 2);
}

static void test_names(void **state)
{
        (void) state;
        /*
         * Escapes are decoded; a bad escape, a lone surrogate, \u0000 and a byte that is not
         * UTF-8 become U+FFFD, so that the report stays valid JSON. pid and tid strings are
         * names too; one that holds an integer is that integer, the same thread as the number.
         */
        load("[{\"name\":\"caf\\u00e9 \\ud83d\\ude00\\t\",\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":1,\"tid\":\"2\"},"
             "{\"name\":\"\xff\\u0000\\ud800\\q\",\"ph\":\"X\",\"ts\":3,\"dur\":1,\"pid\":\"1\",\"tid\":2},"
             "{\"name\":\"x\",\"ph\":\"X\",\"ts\":5,\"dur\":1,\"pid\":\"h\\u00f4te\",\"tid\":\"\"}]");
        assert_op("top_self", "caf\xc3\xa9 \xf0\x9f\x98\x80\t", 1, 1, 1);
        assert_op("top_self", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 1, 1, 1);
        assert_int_equal(json_array_size(json_object_get(report, "threads")), 2);
        assert_int_equal(json_integer_value(json_object_get(thread_at(0), "pid")), 1);
        assert_int_equal(json_integer_value(json_object_get(thread_at(0), "tid")), 2);
        assert_int_equal(json_integer_value(json_object_get(thread_at(0), "events")), 2);
        assert_string_equal(json_string_value(json_object_get(thread_at(1), "pid")), "h\xc3\xb4te");
        assert_string_equal(json_string_value(json_object_get(thread_at(1), "tid")), "");
        char *dump = json_dumps(report, 0);
        assert_non_null(dump);
        free(dump);
}

static void test_long_names(void **state)
{
        (void) state;
        /* A name past the cap is cut at a character boundary and ends in "...". */
        size_t n = NPF_TRACE_NAME_MAX + 100;
        char *name = malloc(n + 1), *buf = malloc(n + 128);

        assert_non_null(name);
        assert_non_null(buf);
        for (size_t i = 0; i < n; i += 2)
                memcpy(name + i, "\xc3\xa9", 2);        /* é */
        name[n] = '\0';
        snprintf(buf, n + 128, "[{\"name\":\"%s\",\"ph\":\"X\",\"ts\":0,\"dur\":1}]", name);
        free(name);
        text = buf;
        load(text);
        assert_int_equal(count("names_truncated"), 1);
        const char *s = top_name("top_self", 0);
        assert_true(strlen(s) <= NPF_TRACE_NAME_MAX);
        assert_true(strlen(s) >= NPF_TRACE_NAME_MAX - 4);
        assert_string_equal(s + strlen(s) - 3, "...");
        assert_memory_equal(s, "\xc3\xa9\xc3\xa9", 4);
        /* The report is valid JSON: the cut left whole characters. */
        char *dump = json_dumps(report, 0);
        assert_non_null(dump);
        free(dump);

        /* The same when the name is written with escapes, decoded before it is cut (load()
         * has freed the text above). */
        buf = malloc(3 * n + 128);
        assert_non_null(buf);
        text = buf;
        size_t len = (size_t) sprintf(buf, "[{\"name\":\"");
        for (size_t i = 0; i < n; i += 2)
                len += (size_t) sprintf(buf + len, "\\u00e9");
        sprintf(buf + len, "\",\"ph\":\"X\",\"ts\":0,\"dur\":1}]");
        load(text);
        assert_int_equal(count("names_truncated"), 1);
        s = top_name("top_self", 0);
        assert_true(strlen(s) <= NPF_TRACE_NAME_MAX && strlen(s) >= NPF_TRACE_NAME_MAX - 4);
        assert_string_equal(s + strlen(s) - 3, "...");
        assert_memory_equal(s, "\xc3\xa9\xc3\xa9", 4);
}

/* --- errors ----------------------------------------------------------------------------- */

static void test_broken_json(void **state)
{
        (void) state;
        load_fails("[\n" X1("a", 1, 1) "\n" X1("b", 1, 1) "]", -EINVAL,
                   "line 3, column 1: ',' or ']' expected after element 0 of the events");
        load_fails("{\"traceEvents\": [\n  {\"ph\": \"X\", \"ts\": 1,, \"dur\": 2}]}", -EINVAL,
                   "line 2, column 23: a key string expected");
        load_fails("[" X1("a", 1, 1) ",]", -EINVAL, "line 1, column 55: a value expected");
        load_fails("[" X1("a", 1, 1) ",{\"ph\":tru}]", -EINVAL,
                   "line 1, column 61: an unknown word where a value was expected");
        load_fails("[]\nx", -EINVAL, "line 2, column 1: the document goes on after its end");
        load_fails("{\"a\" 1}", -EINVAL, "line 1, column 6: ':' expected after a key");
        load_fails("{\"a\":1 \"b\":2}", -EINVAL, "line 1, column 8: ',' or '}' expected after a value");
        load_fails("{1:2}", -EINVAL, "line 1, column 2: a key string expected");
        load_fails("", -EINVAL, "line 1, column 1: the document ends where a JSON value was expected");
        load_fails(" \n ", -EINVAL, "line 2, column 2: the document ends where a JSON value was expected");
        /* Before the events begin, an early end is an error, not a truncation. */
        load_fails("{\"otherData\":{\"a\":", -EINVAL, "line 1, column 19: the document ends inside a top-level value");
        load_fails("{\"otherData\":1,", -EINVAL, "line 1, column 16: the document ends where a key was expected");
        load_fails("{\"traceEvents\":[],\"traceEvents\":[]}", -EINVAL,
                   "line 1, column 19: \"traceEvents\" appears twice");
        load_fails("{\"traceEvents\":{\"a\":1}}", -EINVAL,
                   "line 1, column 16: \"traceEvents\" is not an array of events");

        /* An event longer than the scanner takes (16 MiB) is refused, not read for ever. */
        size_t n = 17u << 20;
        text = malloc(n + 256);
        assert_non_null(text);
        size_t len = (size_t) sprintf(text, "[" X1("a", 1, 1) ",\n {\"name\":\"");
        memset(text + len, 'a', n);
        strcpy(text + len + n, "\",\"ph\":\"X\",\"ts\":1}]");
        load_fails(text, -E2BIG, "line 2, column 2: element 1 of the events is more than 16 MiB; refused");
}

static void test_not_a_trace(void **state)
{
        (void) state;
        load_fails("{\"segments\":[],\"device_traces\":[]}", -ENOMSG,
                   "a JSON object without \"traceEvents\": not a Chrome trace");
        load_fails("{}", -ENOMSG, "a JSON object without \"traceEvents\": not a Chrome trace");
        /* Neither an object nor an array, whatever follows its first byte. */
        load_fails("42", -ENOMSG, "line 1, column 1: the document is neither an object nor an array: not a Chrome trace");
        load_fails("hello", -ENOMSG,
                   "line 1, column 1: the document is neither an object nor an array: not a Chrome trace");
        load_fails("[1,2]", -ENOMSG, "none of the 2 elements has a \"ph\": not a Chrome trace");
        /* A snapshot's legacy form is a bare list of segments: objects, none with a "ph". */
        load_fails("[{\"device\":0,\"address\":1},{\"device\":0,\"address\":2}]", -ENOMSG,
                   "none of the 2 elements has a \"ph\": not a Chrome trace");
        /* It is told without reading a huge one to its end. */
        size_t n = 100000;
        char *big = malloc(n * 16 + 8);
        assert_non_null(big);
        text = big;
        size_t len = (size_t) sprintf(big, "[");
        for (size_t i = 0; i < n; i++)
                len += (size_t) sprintf(big + len, "%s{\"device\":0}", i ? "," : "");
        strcpy(big + len, "]");
        load_fails(big, -ENOMSG, "line 1, column 821: none of the first 64 elements has a \"ph\": not a Chrome trace");
}

typedef struct progress {
        size_t calls, last, total;
        bool ordered;
} progress_t;

static void on_progress(void *userdata, size_t done, size_t total)
{
        progress_t *p = userdata;

        p->ordered &= done >= p->last && done <= total && (p->calls == 0 || p->total == total);
        p->calls++;
        p->last = done;
        p->total = total;
}

static void test_load_file(void **state)
{
        (void) state;
        char dir[] = "/tmp/npftest-trace-XXXXXX", path[64], err[NPF_TRACE_ERR_MAX];
        npf_trace_t *t = NULL;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/none.json", dir);
        assert_int_equal(npf_trace_load_file(path, NULL, NULL, &t, err), -ENOENT);
        assert_non_null(strstr(err, path));
        assert_int_equal(npf_trace_load_file(dir, NULL, NULL, &t, err), -EINVAL);
        assert_non_null(strstr(err, "not a regular file"));
        snprintf(path, sizeof(path), "%s/empty.json", dir);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
        assert_int_equal(npf_trace_load_file(path, NULL, NULL, &t, err), -EINVAL);
        assert_non_null(strstr(err, "the file is empty"));
        f = fopen(path, "w");
        assert_non_null(f);
        fputs("[" X1("op", 1, 2) "]", f);
        fclose(f);
        assert_int_equal(npf_trace_load_file(path, NULL, NULL, &t, err), 0);
        assert_non_null(t);
        held = t;
        const npf_trace_step_t *steps;
        assert_int_equal(npf_trace_steps(t, &steps), 0);
        held = npf_trace_free(held);

        /*
         * Past the first pieces the file is mapped in: places are found in the file again,
         * counted over pieces too. An event on each line, padded to 6 MiB; one malformed
         * near the end; then a broken one.
         */
        f = fopen(path, "w");
        assert_non_null(f);
        size_t lines = 0;
        fputs("[\n", f);
        for (; lines < 6000; lines++)
                fprintf(f, "{\"name\":\"op\",\"ph\":\"X\",\"ts\":%zu,\"dur\":1,\"args\":{\"pad\":\"%01000d\"}},\n",
                        lines, 0);
        fputs("   {\"name\":\"late\",\"ph\":\"X\",\"ts\":\"never\"}\n]\n", f);
        fclose(f);
        progress_t p = { .ordered = true };
        assert_int_equal(npf_trace_load_file(path, on_progress, &p, &t, err), 0);
        held = t;
        report = npf_trace_report_json(t, 5);
        assert_int_equal(count("events"), 6000);
        assert_string_equal(json_string_value(json_object_get(report, "first_malformed")),
                            "line 6002, column 4: event 6000 has no usable \"ts\" (microseconds, at most 3e15); skipped");
        assert_true(p.ordered);
        assert_true(p.last == p.total && p.calls >= 1);
        f = fopen(path, "r+");
        assert_non_null(f);
        assert_int_equal(fseek(f, -2, SEEK_END), 0);
        fputs(";\n", f);
        fclose(f);
        held = npf_trace_free(held);
        assert_int_equal(npf_trace_load_file(path, NULL, NULL, &t, err), -EINVAL);
        assert_string_equal(err, "line 6003, column 1: ',' or ']' expected after element 6000 of the events");
        /* A message from the reader itself (not the scanner) is placed the same way. */
        f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "[%*s", 5 << 20, "");
        for (int i = 0; i < 70; i++)
                fprintf(f, "%s\n {\"device\":%d}", i ? "," : "", i);
        fputs("]", f);
        fclose(f);
        assert_int_equal(npf_trace_load_file(path, NULL, NULL, &t, err), -ENOMSG);
        assert_string_equal(err, "line 65, column 2: none of the first 64 elements has a \"ph\": not a Chrome trace");
        unlink(path);
        rmdir(dir);
}

/* About every 16 MiB, in order, and once at the end with everything read. */
static void test_progress(void **state)
{
        (void) state;
        size_t n = 17 * 1024, len = 0, cap = n * 1100 + 16;
        char err[NPF_TRACE_ERR_MAX], pad[1001];
        progress_t p = { .ordered = true };
        npf_trace_t *t = NULL;

        memset(pad, 'x', 1000);
        pad[1000] = '\0';
        text = malloc(cap);
        assert_non_null(text);
        len += (size_t) snprintf(text, cap, "[");
        for (size_t i = 0; i < n; i++)
                len += (size_t) snprintf(text + len, cap - len, "%s{\"ph\":\"X\",\"name\":\"a\",\"ts\":%zu,\"dur\":1,"
                                         "\"args\":{\"pad\":\"%s\"}}", i ? "," : "", i, pad);
        len += (size_t) snprintf(text + len, cap - len, "]");
        assert_true(len > 17u << 20);
        assert_int_equal(npf_trace_load(text, len, on_progress, &p, &t, err), 0);
        held = t;
        assert_true(p.ordered);
        assert_int_equal(p.calls, 2);
        assert_int_equal(p.last, len);
        assert_int_equal(p.total, len);
}

/* --- the device's events ----------------------------------------------------------------- */

static bool thread_device(size_t i)
{
        json_t *v = json_object_get(thread_at(i), "device");

        if (!json_is_boolean(v))
                fail_msg("thread %zu: \"device\" is not a boolean", i);
        return json_is_true(v);
}

/* Whether @name is in neither top list. */
static void assert_no_op(const char *name)
{
        static const char *const lists[] = { "top_self", "top_total" };
        json_t *e;
        size_t i;

        for (size_t l = 0; l < 2; l++)
                json_array_foreach(json_object_get(report, lists[l]), i, e)
                        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
                                fail_msg("%s lists \"%s\"", lists[l], name);
}

/*
 * torch_npu's trace_view.json: the Python process (labelled CPU) and the device's (labelled
 * NPU, NPU 0), whose labels may come after their events. The device's tracks are nested and
 * counted but are no operators, and the device's copies of the steps, more of them than the
 * host has, are not the steps.
 */
static void test_device_npu(void **state)
{
        (void) state;
        npf_trace_t *t = load("["
             "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":10,\"tid\":0,\"args\":{\"name\":\"Python\"}},"
             "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":10,\"tid\":0,\"args\":{\"labels\":\"CPU\"}},"
             "{\"ph\":\"X\",\"name\":\"ProfilerStep#1\",\"pid\":10,\"tid\":10,\"ts\":\"100.000\",\"dur\":50,\"cat\":\"cpu_op\"},"
             "{\"ph\":\"X\",\"name\":\"aten::conv2d\",\"pid\":10,\"tid\":10,\"ts\":\"110.000\",\"dur\":20,\"cat\":\"cpu_op\"},"
             "{\"ph\":\"X\",\"name\":\"Computing\",\"pid\":20,\"tid\":0,\"ts\":\"120.000\",\"dur\":30},"
             "{\"ph\":\"X\",\"name\":\"Free\",\"pid\":20,\"tid\":3,\"ts\":\"150.000\",\"dur\":10},"
             "{\"ph\":\"X\",\"name\":\"ProfilerStep#1\",\"pid\":30,\"tid\":1,\"ts\":\"100.500\",\"dur\":49},"
             "{\"ph\":\"X\",\"name\":\"ProfilerStep#2\",\"pid\":30,\"tid\":1,\"ts\":\"151\",\"dur\":49},"
             "{\"ph\":\"X\",\"name\":\"Notify_Wait\",\"pid\":30,\"tid\":1,\"ts\":\"152\",\"dur\":5},"
             "{\"ph\":\"X\",\"name\":\"aten::conv2d\",\"pid\":30,\"tid\":1,\"ts\":\"160\",\"dur\":5},"
             "{\"ph\":\"X\",\"name\":\"host_op\",\"pid\":40,\"tid\":4,\"ts\":\"1\",\"dur\":3},"
             "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":20,\"tid\":0,\"args\":{\"name\":\"Overlap Analysis\"}},"
             "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":20,\"tid\":0,\"args\":{\"labels\":\"NPU\"}},"
             "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":30,\"tid\":0,\"args\":{\"labels\":\"NPU 0\"}},"
             "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":40,\"tid\":0,\"args\":{\"labels\":\"CPU, NPU\"}}]");
        const npf_trace_step_t *s;

        assert_int_equal(count("events"), 9);
        assert_int_equal(count("ignored"), 4);          /* the labels, as before they were read */
        assert_int_equal(json_array_size(json_object_get(report, "threads")), 5);
        assert_false(thread_device(0));                 /* 10/10 */
        assert_true(thread_device(1));                  /* 20/0 */
        assert_true(thread_device(2));                  /* 20/3 */
        assert_true(thread_device(3));                  /* 30/1 */
        assert_false(thread_device(4));                 /* 40/4: its labels do not begin with NPU */
        assert_int_equal(json_integer_value(json_object_get(thread_at(3), "events")), 4);
        assert_string_equal(json_string_value(json_object_get(thread_at(1), "process")), "Overlap Analysis");
        /* The host's operators only: conv2d once, not with the device's namesake. */
        assert_int_equal(json_array_size(json_object_get(report, "top_self")), 2);
        assert_op("top_self", "aten::conv2d", 1, 20, 20);
        assert_op("top_total", "host_op", 1, 3, 3);
        assert_no_op("Computing");
        assert_no_op("Free");
        assert_no_op("Notify_Wait");
        /* The host's single step, not the device's two. */
        assert_int_equal(npf_trace_steps(t, &s), 1);
        assert_true(s[0].step == 1 && s[0].start_us == 100 && s[0].dur_us == 50);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(report, "step_thread"), "pid")), 10);

        /* Where only a device has steps, they are the steps. */
        t = load("["
             "{\"ph\":\"X\",\"name\":\"ProfilerStep#4\",\"pid\":30,\"tid\":1,\"ts\":1,\"dur\":9},"
             "{\"ph\":\"X\",\"name\":\"op\",\"pid\":10,\"tid\":10,\"ts\":1,\"dur\":9},"
             "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":30,\"args\":{\"labels\":\"NPU\"}}]");
        assert_int_equal(npf_trace_steps(t, &s), 1);
        assert_int_equal(s[0].step, 4);
        assert_true(thread_device(0));
        assert_false(thread_device(1));
}

/*
 * A Kineto trace: the CPU threads' ops, runtime calls and annotations; the GPU streams'
 * kernels, copies, sets and copies of the annotations (gpu_user_annotation), some of them
 * ProfilerStep#N; a stream of only such events is a device's, one with a host event too is
 * not, though its kernel is still no operator.
 */
static void test_device_kineto(void **state)
{
        (void) state;
#define K(cat, name, pid, tid, ts, dur) \
        "{\"ph\":\"X\",\"cat\":\"" cat "\",\"name\":\"" name "\",\"pid\":" #pid ",\"tid\":" #tid ",\"ts\":" #ts \
        ",\"dur\":" #dur "}"
        npf_trace_t *t = load("{\"schemaVersion\":1,\"traceEvents\":["
             K("user_annotation", "ProfilerStep#1", 7, 7, 0, 100) ","
             K("user_annotation", "## forward ##", 7, 7, 5, 50) ","
             K("cpu_op", "aten::mm", 7, 7, 10, 20) ","
             K("cuda_runtime", "cudaLaunchKernel", 7, 7, 12, 4) ","
             K("kernel", "ampere_sgemm_32x128_nt", 0, 7, 20, 30) ","
             K("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, 60, 5) ","
             K("gpu_memset", "Memset (Device)", 0, 7, 70, 1) ","
             K("gpu_user_annotation", "ProfilerStep#1", 0, 7, 18, 90) ","
             K("gpu_user_annotation", "## forward ##", 0, 7, 19, 40) ","
             K("gpu_user_annotation", "ProfilerStep#2", 0, 8, 120, 90) ","
             K("gpu_user_annotation", "ProfilerStep#3", 0, 8, 220, 90) ","
             K("kernel", "ncclKernel_AllReduce", 0, 9, 30, 10) ","
             K("cpu_op", "odd", 0, 9, 50, 2) ","
             "{\"ph\":\"f\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"pid\":0,\"tid\":7,\"ts\":20,\"id\":1,\"bp\":\"e\"},"
             "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":0,\"tid\":0,\"args\":{\"labels\":\"GPU 0\"}}"
             "]}");
#undef K
        const npf_trace_step_t *s;

        assert_int_equal(count("events"), 13);
        assert_false(thread_device(0));                 /* 7/7 */
        assert_true(thread_device(1));                  /* 0/7 */
        assert_true(thread_device(2));                  /* 0/8 */
        assert_false(thread_device(3));                 /* 0/9 */
        assert_op("top_self", "aten::mm", 1, 16, 20);
        assert_op("top_self", "cudaLaunchKernel", 1, 4, 4);
        assert_op("top_self", "## forward ##", 1, 30, 50);
        assert_op("top_self", "odd", 1, 2, 2);
        assert_int_equal(json_array_size(json_object_get(report, "top_self")), 4);
        assert_no_op("ampere_sgemm_32x128_nt");
        assert_no_op("ncclKernel_AllReduce");
        assert_no_op("Memcpy HtoD (Pageable -> Device)");
        assert_no_op("Memset (Device)");
        /* The CPU thread's step, not the stream's two copies. */
        assert_int_equal(npf_trace_steps(t, &s), 1);
        assert_true(s[0].step == 1 && s[0].start_us == 0 && s[0].dur_us == 100);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(report, "step_thread"), "tid")), 7);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(report, "step_thread"), "pid")), 7);
}

/* --- the text report ---------------------------------------------------------------------- */

static void test_report_text(void **state)
{
        (void) state;
        size_t size = 0;
        npf_trace_t *t = load("{\"traceEvents\":["
                              "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":7,\"args\":{\"name\":\"rank 0\"}},"
                              "{\"name\":\"ProfilerStep#5\",\"ph\":\"X\",\"ts\":1000,\"dur\":2500000,\"pid\":7,\"tid\":7},"
                              "{\"name\":\"ProfilerStep#6\",\"ph\":\"X\",\"ts\":2501000,\"dur\":1500,\"pid\":7,\"tid\":7},"
                              "{\"name\":\"aten::mm\",\"ph\":\"X\",\"ts\":2000,\"dur\":812,\"pid\":7,\"tid\":7},"
                              "{\"name\":\"bad\\nname\",\"ph\":\"X\",\"ts\":3000,\"dur\":1,\"pid\":7,\"tid\":7}]}");
        FILE *f = open_memstream(&text, &size);

        assert_non_null(f);
        assert_int_equal(npf_trace_report_text(t, f, 10), 0);
        fclose(f);
        static const char *const lines[] = {
                "Trace: 4 events over 2.50 s\n",
                "\nThreads\n  pid tid     events         span  clipped borrowed  name\n"
                "  7   7            4       2.50 s        0        0  rank 0\n",
                "\nTop 2 operators by self time\n"
                "          self        total      count  name\n"
                "      812.0 us     812.0 us          1  aten::mm\n"
                "        1.0 us       1.0 us          1  bad?name\n",
                "\nSteps (ProfilerStep#N): 2, median 1.25 s, p90 2.50 s, longest 2.50 s\n"
                "        step        start     duration\n"
                "           5       0.0 us       2.50 s\n"
                "           6       2.50 s      1.50 ms\n",
        };
        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
                if (!strstr(text, lines[i]))
                        fail_msg("the report lacks\n%s\nit is:\n%s", lines[i], text);
}

/* --- real traces ------------------------------------------------------------------------ */

/*
 * A real torch.profiler trace (torch 1.13, the legacy profiler's bare array, pid "CPU
 * functions"): a Linear layer's forward and backward in three record_function steps. The
 * figures were computed by an independent Python script: per thread, sorted by start then
 * longer first, each event's parent is the latest earlier event that is still open at its
 * start; overruns clipped; total time skips events under one of the same name.
 */
static void test_torch_profiler(void **state)
{
        (void) state;
        char err[NPF_TRACE_ERR_MAX];
        npf_trace_t *t = NULL;
        const npf_trace_step_t *s;
        npf_trace_step_stats_t st;
        int r = npf_trace_load_file(NPF_TRACE_TESTDATA "/torch-profiler-1.13.json", NULL, NULL, &t, err);

        if (r != 0)
                fail_msg("%d: %s", r, err);
        held = t;
        report = npf_trace_report_json(t, 5);
        assert_int_equal(count("events"), 191);
        assert_int_equal(json_integer_value(json_object_get(thread_at(0), "clipped")), 2);
        assert_string_equal(json_string_value(json_object_get(thread_at(0), "pid")), "CPU functions");
        assert_string_equal(top_name("top_self", 0), "aten::linear");
        assert_op("top_self", "aten::linear", 3, 994, 2129);
        assert_op("top_self", "aten::addmm", 3, 903, 997);
        assert_op("top_total", "forward", 3, 396, 2704);
        assert_op("top_total", "autograd::engine::evaluate_function: AddmmBackward0", 3, 41, 618);
        assert_int_equal(npf_trace_steps(t, &s), 3);
        assert_true(s[0].step == 1 && s[0].start_us == 344 && s[0].dur_us == 3534);
        assert_true(s[1].step == 2 && s[1].start_us == 3928 && s[1].dur_us == 659);
        assert_true(s[2].step == 3 && s[2].start_us == 4614 && s[2].dur_us == 275);
        npf_trace_step_stats(t, &st);
        assert_true(st.median_us == 659 && st.p90_us == 3534 && st.max_us == 3534);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void) st;
        (void) type;
        (void) ftw;
        remove(path);
        return 0;
}

typedef struct window {
        char shm[64], dir[64];
        npf_shm_t *writer;
        npf_rank_t *rank;
} window_t;

static int window_setup(void **state)
{
        window_t *w = calloc(1, sizeof(*w));
        char err[NPF_SHM_ERR_MAX];

        assert_non_null(w);
        snprintf(w->shm, sizeof(w->shm), "npftest-trace-%d", (int) getpid());
        npf_shm_unlink(w->shm);
        snprintf(w->dir, sizeof(w->dir), "/tmp/npftest-trace-XXXXXX");
        assert_non_null(mkdtemp(w->dir));
        if (npf_shm_open(w->shm, NPF_SHM_WRITER | NPF_SHM_CREATE, &w->writer, err) != 0)
                fail_msg("npf_shm_open: %s", err);
        *state = w;
        return 0;
}

static int window_teardown(void **state)
{
        window_t *w = *state;

        npf_rank_close(w->rank);
        npf_shm_close(w->writer);
        npf_shm_unlink(w->shm);
        nftw(w->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(w);
        return teardown(NULL);
}

/*
 * The host backend's trace of a window of steps 3 to 6, collected here: steps 3..6 come out
 * in order, each starting during its npf_rank_step() call and ending during the next one
 * (same clock: CLOCK_MONOTONIC), and each at least as long as the sleep inside it.
 */
static void test_host_backend(void **state)
{
        window_t *w = *state;
        static const char conf[] = "{\"start_step\": 3, \"steps\": 4, \"backend\": \"host\"}";
        npf_shm_config_t *c = calloc(1, sizeof(*c));
        npf_conf_report_t *cr = calloc(1, sizeof(*cr));
        char err[NPF_TRACE_ERR_MAX], path[256];
        uint64_t before[9], after[9], generation;

        assert_non_null(c);
        assert_non_null(cr);
        if (npf_conf_parse(conf, strlen(conf), c, cr) != 0)
                fail_msg("%s", cr->errors[0].message);
        snprintf(c->prof_dir, sizeof(c->prof_dir), "%s", w->dir);
        c->args.prof_dir_len = (uint32_t) strlen(w->dir);
        assert_int_equal(npf_shm_publish_config(w->writer, c, &generation), 0);
        free(cr);
        free(c);
        npf_rank_options_t o = { .shm_name = w->shm, .rank = 0, .local_device = 0, .backend = "host" };
        char rerr[NPF_SHM_ERR_MAX];
        if (npf_rank_open(&o, &w->rank, rerr) != 0)
                fail_msg("npf_rank_open: %s", rerr);
        for (int s = 1; s <= 8; s++) {
                before[s] = npf_clock_ns(CLOCK_MONOTONIC);
                assert_int_equal(npf_rank_step(w->rank, s), 0);
                after[s] = npf_clock_ns(CLOCK_MONOTONIC);
                nanosleep(&(struct timespec) { .tv_nsec = 2000000 }, NULL);
        }
        npf_rank_info_t info;
        npf_rank_info(w->rank, &info);
        assert_int_equal(info.state, NPF_WINDOW_DONE);

        snprintf(path, sizeof(path), "%s/rank0_start3_stop6/trace.json", w->dir);
        npf_trace_t *t = NULL;
        int r = npf_trace_load_file(path, NULL, NULL, &t, err);
        if (r != 0)
                fail_msg("%s: %s", path, err);
        held = t;
        report = npf_trace_report_json(t, 10);
        assert_non_null(report);
        assert_false(json_is_true(json_object_get(report, "truncated")));
        assert_int_equal(count("events"), 4);
        assert_int_equal(count("ignored"), 8);         /* two counters per step */
        assert_int_equal(count("malformed"), 0);
        json_t *th = thread_at(0);
        assert_int_equal(json_integer_value(json_object_get(th, "pid")), getpid());
        assert_int_equal(json_integer_value(json_object_get(th, "tid")), getpid());
        assert_string_equal(json_string_value(json_object_get(th, "process")), "rank 0");

        const npf_trace_step_t *s;
        assert_int_equal(npf_trace_steps(t, &s), 4);
        for (int i = 0; i < 4; i++) {
                int n = 3 + i;
                /* The trace keeps nanoseconds as microseconds with three decimals. */
                int64_t start = llround(s[i].start_us * 1e3), end = start + llround(s[i].dur_us * 1e3);
                assert_int_equal(s[i].step, n);
                if (start < (int64_t) before[n] - 1 || start > (int64_t) after[n] + 1 ||
                    end < (int64_t) before[n + 1] - 1 || end > (int64_t) after[n + 1] + 1)
                        fail_msg("step %d: [%" PRId64 ", %" PRId64 "], expected to start in [%" PRIu64 ", %" PRIu64
                                 "] and end in [%" PRIu64 ", %" PRIu64 "]", n, start, end, before[n], after[n],
                                 before[n + 1], after[n + 1]);
                assert_true(s[i].dur_us >= 2000);
                if (i > 0)
                        assert_true(fabs(s[i].start_us - (s[i - 1].start_us + s[i - 1].dur_us)) < 0.002);
        }
        npf_trace_step_stats_t st;
        npf_trace_step_stats(t, &st);
        assert_int_equal(st.n, 4);
        assert_true(st.median_us >= 2000 && st.median_us <= st.p90_us && st.p90_us <= st.max_us);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_nesting, teardown),
                cmocka_unit_test_teardown(test_begin_end, teardown),
                cmocka_unit_test_teardown(test_missing_end_borrows, teardown),
                cmocka_unit_test_teardown(test_clipping, teardown),
                cmocka_unit_test_teardown(test_metadata_names, teardown),
                cmocka_unit_test_teardown(test_steps, teardown),
                cmocka_unit_test_teardown(test_device_npu, teardown),
                cmocka_unit_test_teardown(test_device_kineto, teardown),
                cmocka_unit_test_teardown(test_forms, teardown),
                cmocka_unit_test_teardown(test_times, teardown),
                cmocka_unit_test_teardown(test_malformed, teardown),
                cmocka_unit_test_teardown(test_long_names, teardown),
                cmocka_unit_test_teardown(test_names, teardown),
                cmocka_unit_test_teardown(test_broken_json, teardown),
                cmocka_unit_test_teardown(test_not_a_trace, teardown),
                cmocka_unit_test_teardown(test_load_file, teardown),
                cmocka_unit_test_teardown(test_progress, teardown),
                cmocka_unit_test_teardown(test_report_text, teardown),
                cmocka_unit_test_teardown(test_torch_profiler, teardown),
                cmocka_unit_test_setup_teardown(test_host_backend, window_setup, window_teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
