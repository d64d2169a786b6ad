/* SPDX-License-Identifier: MIT */
/*
 * The Chrome trace scanner: both document forms, the top-level keys, every field of an
 * event, times converted exactly, escapes, lookups in args, what is malformed, truncated or
 * broken and where; every document scanned whole, a byte at a time and in chunks of many
 * sizes must give the same events, counts and messages, and so must every prefix of one.
 * Then the real traces of shared/testdata (kineto's gzipped, inflated piecewise through
 * gzip; torch_npu's trace_view.json), whose figures come from Python's json module.
 */
#include "replay/evscan.h"

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#ifndef NPF_PROFILER_OUTPUTS
#define NPF_PROFILER_OUTPUTS "../shared/testdata/profiler_outputs"
#endif
#define TRACE_VIEW NPF_PROFILER_OUTPUTS \
        "/torch_npu-2rank-alexnet/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
#define KINETO NPF_PROFILER_OUTPUTS "/kineto-gpu/a100-rank0-of-2.pt.trace.json.gz"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* --- recording what a scan reports ---------------------------------------------------------- */

/* A string as reported, copied: @p NULL when absent. */
typedef struct copy {
        char *p;
        size_t n;
} copy_t;

/* An event as reported, every field copied. */
typedef struct rev {
        char ph;
        copy_t name, cat, pid_str, tid_str, args, id, raw;
        bool has_pid, has_tid, has_ts, has_dur;
        int64_t pid, tid, ts_ns, dur_ns;
        size_t offset;
} rev_t;

typedef struct rtop {
        copy_t key, value;
} rtop_t;

typedef struct rec {
        rev_t *ev;
        size_t n, cap;
        rtop_t *top;
        size_t n_top, cap_top;
        int r;                          /* of the scan */
        char err[NPF_EVSCAN_ERR_MAX];
        npf_evscan_stats_t st;
        size_t stop_after;              /* events after which the callback returns 7; 0 never */
        const char *input;              /* during a scan: the whole input, */
        size_t input_len;               /* its length */
} rec_t;

static copy_t copy_of(npf_evscan_str_t s)
{
        copy_t c = { NULL, s.n };

        if (s.p) {
                c.p = malloc(s.n + 1);
                assert_non_null(c.p);
                memcpy(c.p, s.p, s.n);
                c.p[s.n] = '\0';
        }
        return c;
}

/* Every string of @ev lies inside its raw text, which is the input's at its offset. */
static void check_inside(const rec_t *r, const npf_evscan_event_t *ev)
{
        const npf_evscan_str_t *s[] = { &ev->name, &ev->cat, &ev->pid_str, &ev->tid_str, &ev->args, &ev->id };

        assert_non_null(ev->raw.p);
        assert_true(ev->raw.n >= 2 && ev->raw.p[0] == '{' && ev->raw.p[ev->raw.n - 1] == '}');
        assert_true(ev->offset + ev->raw.n <= r->input_len);
        assert_memory_equal(ev->raw.p, r->input + ev->offset, ev->raw.n);
        for (size_t i = 0; i < N_OF(s); i++)
                if (s[i]->p)
                        assert_true(s[i]->p >= ev->raw.p && s[i]->p + s[i]->n <= ev->raw.p + ev->raw.n);
}

static int on_event(void *userdata, const npf_evscan_event_t *ev)
{
        rec_t *r = userdata;

        check_inside(r, ev);
        if (r->n == r->cap) {
                r->cap = r->cap ? 2 * r->cap : 16;
                r->ev = realloc(r->ev, r->cap * sizeof(*r->ev));
                assert_non_null(r->ev);
        }
        r->ev[r->n++] = (rev_t) {
                .ph = ev->ph, .name = copy_of(ev->name), .cat = copy_of(ev->cat), .pid_str = copy_of(ev->pid_str),
                .tid_str = copy_of(ev->tid_str), .args = copy_of(ev->args), .id = copy_of(ev->id),
                .raw = copy_of(ev->raw), .has_pid = ev->has_pid, .has_tid = ev->has_tid, .has_ts = ev->has_ts,
                .has_dur = ev->has_dur, .pid = ev->pid, .tid = ev->tid, .ts_ns = ev->ts_ns, .dur_ns = ev->dur_ns,
                .offset = ev->offset,
        };
        return r->stop_after && r->n == r->stop_after ? 7 : 0;
}

static int on_top(void *userdata, npf_evscan_str_t key, npf_evscan_str_t value)
{
        rec_t *r = userdata;

        if (r->n_top == r->cap_top) {
                r->cap_top = r->cap_top ? 2 * r->cap_top : 16;
                r->top = realloc(r->top, r->cap_top * sizeof(*r->top));
                assert_non_null(r->top);
        }
        r->top[r->n_top++] = (rtop_t) { copy_of(key), copy_of(value) };
        return 0;
}

static void rec_clear(rec_t *r)
{
        for (size_t i = 0; i < r->n; i++) {
                rev_t *e = &r->ev[i];
                free(e->name.p);
                free(e->cat.p);
                free(e->pid_str.p);
                free(e->tid_str.p);
                free(e->args.p);
                free(e->id.p);
                free(e->raw.p);
        }
        for (size_t i = 0; i < r->n_top; i++) {
                free(r->top[i].key.p);
                free(r->top[i].value.p);
        }
        free(r->ev);
        free(r->top);
        *r = (rec_t) { 0 };
}

/* The recordings a test holds when an assertion jumps out of it; freed at teardown. */
static rec_t held, other;

static int teardown(void **state)
{
        (void) state;
        rec_clear(&held);
        rec_clear(&other);
        return 0;
}

/* Scan the @len bytes at @doc, fed @chunk bytes at a time, into @r (cleared first). */
static void scan_into(rec_t *r, const char *doc, size_t len, size_t chunk)
{
        size_t stop_after = r->stop_after;
        /* A copy exactly @len long, so that AddressSanitizer sees any read past the end. */
        char *copy = malloc(len ? len : 1);

        assert_non_null(copy);
        memcpy(copy, doc, len);
        rec_clear(r);
        r->stop_after = stop_after;
        r->input = copy;
        r->input_len = len;
        npf_evscan_t *s = npf_evscan_new(on_event, on_top, r);
        assert_non_null(s);
        memset(r->err, 0, sizeof(r->err));
        r->r = 0;
        for (size_t o = 0; o < len && r->r == 0; o += chunk) {
                /* Each chunk in a buffer of its own, freed at once: nothing may point into it later. */
                size_t n = len - o < chunk ? len - o : chunk;
                char *piece = malloc(n);
                assert_non_null(piece);
                memcpy(piece, copy + o, n);
                r->r = npf_evscan_feed(s, piece, n, r->err);
                free(piece);
        }
        if (r->r == 0)
                r->r = npf_evscan_finish(s, r->err);
        else  /* A failed scan says so again. */
                assert_int_equal(npf_evscan_finish(s, NULL), r->r);
        npf_evscan_stats(s, &r->st);
        assert_int_equal(r->st.bytes, r->r == 0 ? len : r->st.bytes);
        npf_evscan_free(s);
        free(copy);
        r->input = NULL;
}

static void copy_equal(const copy_t *a, const copy_t *b, const char *what, size_t i)
{
        if ((a->p == NULL) != (b->p == NULL) || a->n != b->n || (a->p && memcmp(a->p, b->p, a->n) != 0))
                fail_msg("event %zu: %s differs: \"%s\" and \"%s\"", i, what, a->p ? a->p : "(absent)",
                         b->p ? b->p : "(absent)");
}

/* @a and @b reported the same, field by field. */
static void rec_equal(const rec_t *a, const rec_t *b, size_t chunk)
{
        if (a->r != b->r || strcmp(a->err, b->err) != 0)
                fail_msg("chunks of %zu: %d \"%s\", whole: %d \"%s\"", chunk, b->r, b->err, a->r, a->err);
        assert_int_equal(a->n, b->n);
        for (size_t i = 0; i < a->n; i++) {
                const rev_t *x = &a->ev[i], *y = &b->ev[i];
                assert_int_equal(x->ph, y->ph);
                copy_equal(&x->name, &y->name, "name", i);
                copy_equal(&x->cat, &y->cat, "cat", i);
                copy_equal(&x->pid_str, &y->pid_str, "pid_str", i);
                copy_equal(&x->tid_str, &y->tid_str, "tid_str", i);
                copy_equal(&x->args, &y->args, "args", i);
                copy_equal(&x->id, &y->id, "id", i);
                copy_equal(&x->raw, &y->raw, "raw", i);
                assert_true(x->has_pid == y->has_pid && x->has_tid == y->has_tid && x->has_ts == y->has_ts &&
                            x->has_dur == y->has_dur);
                assert_true(x->pid == y->pid && x->tid == y->tid && x->ts_ns == y->ts_ns && x->dur_ns == y->dur_ns);
                assert_int_equal(x->offset, y->offset);
        }
        assert_int_equal(a->n_top, b->n_top);
        for (size_t i = 0; i < a->n_top; i++) {
                copy_equal(&a->top[i].key, &b->top[i].key, "top key", i);
                copy_equal(&a->top[i].value, &b->top[i].value, "top value", i);
        }
        assert_int_equal(a->st.events, b->st.events);
        assert_int_equal(a->st.malformed, b->st.malformed);
        assert_int_equal(a->st.events_array, b->st.events_array);
        assert_int_equal(a->st.truncated, b->st.truncated);
        assert_int_equal(a->st.malformed_line, b->st.malformed_line);
        assert_int_equal(a->st.malformed_column, b->st.malformed_column);
        assert_string_equal(a->st.first_malformed, b->st.first_malformed);
}

/* Scan @doc (@len bytes) whole into `held`, then in chunks of many sizes, each giving the same. */
static rec_t *scan_len(const char *doc, size_t len)
{
        static const size_t chunks[] = { 1, 2, 3, 5, 7, 11, 16, 64, 100, 4096 };

        scan_into(&held, doc, len, len ? len : 1);
        for (size_t i = 0; i < N_OF(chunks); i++) {
                if (chunks[i] >= len)
                        break;
                other.stop_after = held.stop_after;
                scan_into(&other, doc, len, chunks[i]);
                rec_equal(&held, &other, chunks[i]);
        }
        return &held;
}

static rec_t *scan(const char *doc)
{
        return scan_len(doc, strlen(doc));
}

/* @doc must scan without error; its events are returned. */
static rec_t *scan_ok(const char *doc)
{
        rec_t *r = scan(doc);

        if (r->r != 0)
                fail_msg("%s: %d: %s", doc, r->r, r->err);
        return r;
}

static void scan_fails(const char *doc, int expected, const char *message)
{
        rec_t *r = scan(doc);

        if (r->r != expected || strcmp(r->err, message) != 0)
                fail_msg("%s: %d \"%s\", expected %d \"%s\"", doc, r->r, r->err, expected, message);
}

static void assert_copy(const copy_t *c, const char *expected)
{
        if (!expected) {
                if (c->p)
                        fail_msg("\"%s\" where none was expected", c->p);
                return;
        }
        if (!c->p || c->n != strlen(expected) || memcmp(c->p, expected, c->n) != 0)
                fail_msg("\"%s\", expected \"%s\"", c->p ? c->p : "(absent)", expected);
}

/* --- the two forms ----------------------------------------------------------------------------- */

/* Kineto's layout: keys before traceEvents and after it, pretty-printed. */
static const char kineto_doc[] =
        "{\n"
        "  \"schemaVersion\": 1,\n"
        "  \"deviceProperties\": [\n    {\"id\": 0, \"name\": \"A100\", \"totalGlobalMem\": 42297524224}\n  ],\n"
        "  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 2},\n"
        "  \"traceEvents\": [\n"
        "  {\n"
        "    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 4515, \"tid\": 4515,\n"
        "    \"ts\": 1683564901548726, \"dur\": 209748,\n"
        "    \"args\": {\n      \"External id\": 1,\"Input Dims\": [[1, 2], [3]]\n    }\n"
        "  },\n"
        "  {\n"
        "    \"ph\": \"f\", \"id\": 12, \"pid\": \"Spans\", \"tid\": \"7\", \"ts\": 1683564901548863.5,"
        " \"cat\": \"ac2g\"\n"
        "  },\n"
        "  {\n"
        "    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"\", \"tid\": \"\","
        " \"ts\": 1683564902805798\n"
        "  }\n"
        "  ],\n"
        "  \"traceName\": \"/tmp/tmpu3g3sevh.json\",\n"
        "  \"displayTimeUnit\": \"ms\",\n"
        "  \"baseTimeNanoseconds\": 1711964646000000000\n"
        "}\n";

static void test_object_form(void **state)
{
        (void) state;
        rec_t *r = scan_ok(kineto_doc);

        assert_int_equal(r->n, 3);
        assert_int_equal(r->st.events, 3);
        assert_int_equal(r->st.malformed, 0);
        assert_true(r->st.events_array);
        assert_false(r->st.truncated);
        assert_string_equal(r->st.first_malformed, "");

        const rev_t *e = &r->ev[0];
        assert_int_equal(e->ph, 'X');
        assert_copy(&e->name, "aten::mm");
        assert_copy(&e->cat, "cpu_op");
        assert_true(e->has_pid && e->pid == 4515 && e->has_tid && e->tid == 4515);
        assert_copy(&e->pid_str, NULL);
        assert_true(e->has_ts && e->ts_ns == INT64_C(1683564901548726000));
        assert_true(e->has_dur && e->dur_ns == INT64_C(209748000));
        assert_copy(&e->args, "{\n      \"External id\": 1,\"Input Dims\": [[1, 2], [3]]\n    }");
        assert_copy(&e->id, NULL);
        assert_int_equal(e->offset, strstr(kineto_doc, "  {\n    \"ph\": \"X\"") + 2 - kineto_doc);

        e = &r->ev[1];
        assert_int_equal(e->ph, 'f');
        assert_copy(&e->name, NULL);
        assert_copy(&e->id, "12");
        assert_false(e->has_pid);
        assert_copy(&e->pid_str, "Spans");
        assert_true(e->has_tid && e->tid == 7);       /* a string holding an integer */
        assert_true(e->has_ts && e->ts_ns == INT64_C(1683564901548863500));
        assert_false(e->has_dur);
        assert_copy(&e->args, NULL);

        e = &r->ev[2];
        assert_int_equal(e->ph, 'i');
        assert_copy(&e->name, "Record Window End");
        assert_copy(&e->pid_str, "");
        assert_copy(&e->tid_str, "");

        /* Every other top-level key, in order, before and after the events, with its raw value. */
        static const char *const top[][2] = {
                { "schemaVersion", "1" },
                { "deviceProperties", "[\n    {\"id\": 0, \"name\": \"A100\", \"totalGlobalMem\": 42297524224}\n  ]" },
                { "distributedInfo", "{\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 2}" },
                { "traceName", "\"/tmp/tmpu3g3sevh.json\"" },
                { "displayTimeUnit", "\"ms\"" },
                { "baseTimeNanoseconds", "1711964646000000000" },
        };
        assert_int_equal(r->n_top, N_OF(top));
        for (size_t i = 0; i < N_OF(top); i++) {
                assert_copy(&r->top[i].key, top[i][0]);
                assert_copy(&r->top[i].value, top[i][1]);
        }

        /* traceEvents first, and alone; an empty array; keys only after it. */
        r = scan_ok("{\"traceEvents\":[{\"ph\":\"X\"}],\"a\":null}");
        assert_int_equal(r->n, 1);
        assert_int_equal(r->n_top, 1);
        assert_copy(&r->top[0].key, "a");
        assert_copy(&r->top[0].value, "null");
        r = scan_ok("{\"traceEvents\":[]}");
        assert_int_equal(r->n, 0);
        assert_true(r->st.events_array);
        r = scan_ok(" {\"x\": \"]\\\"}\", \"traceEvents\" : [ ] , \"y\":[{}]} ");
        assert_int_equal(r->n_top, 2);
        assert_copy(&r->top[0].value, "\"]\\\"}\"");
        assert_copy(&r->top[1].value, "[{}]");
}

static void test_array_form(void **state)
{
        (void) state;
        /* torch_npu's: ts as strings of microseconds with a nanosecond fraction; CRLF; a BOM. */
        static const char doc[] =
                "\xef\xbb\xbf[{\"ph\": \"X\", \"name\": \"aten::empty\", \"pid\": 3096504, \"tid\": 3096504, "
                "\"ts\": \"1736408883688177.930\", \"dur\": 145.57, \"cat\": \"cpu_op\", "
                "\"args\": {\"Sequence number\": -1, \"Input Dims\": \";\\r\\n;\"}},\r\n"
                "\t{\"ph\": \"C\", \"name\": \"HBM\", \"pid\": 3, \"tid\": 0, \"ts\": \"1736408883840600.069\", "
                "\"args\": {\"Read(MB/s)\": \"12.5\"}},\r\n"
                "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 3170820512,"
                " \"args\": {\"name\": \"Ascend Hardware\"}}]\r\n";
        rec_t *r = scan_ok(doc);

        assert_int_equal(r->n, 3);
        assert_int_equal(r->n_top, 0);
        assert_int_equal(r->ev[0].ts_ns, INT64_C(1736408883688177930));
        assert_int_equal(r->ev[0].dur_ns, 145570);
        assert_int_equal(r->ev[0].offset, 4);
        assert_int_equal(r->ev[1].ph, 'C');
        assert_int_equal(r->ev[1].ts_ns, INT64_C(1736408883840600069));
        assert_false(r->ev[2].has_ts);
        assert_false(r->ev[2].has_tid);
        assert_true(r->ev[2].has_pid && r->ev[2].pid == INT64_C(3170820512));
        assert_int_equal(r->st.malformed, 0);

        r = scan_ok("[]");
        assert_int_equal(r->n, 0);
        assert_true(r->st.events_array);
        assert_false(r->st.truncated);
        r = scan_ok("[{}]");
        assert_int_equal(r->n, 1);
        assert_int_equal(r->ev[0].ph, 0);
        assert_copy(&r->ev[0].raw, "{}");
}

/* --- times ----------------------------------------------------------------------------------- */

static void test_times(void **state)
{
        (void) state;
        static const struct {
                const char *ts;
                int64_t ns;
        } good[] = {
                { "\"1736408883674584.732\"", INT64_C(1736408883674584732) },   /* a double has ...584.75 */
                { "1736408883674584.732", INT64_C(1736408883674584732) },
                { "12.5", 12500 },
                { "\"7\"", 7000 },
                { "1e3", 1000000 },
                { "1E+3", 1000000 },
                { "\"2.5e-1\"", 250 },
                { "-3.0005", -3001 },           /* half away from zero */
                { "-3.0004", -3000 },
                { "3.0005", 3001 },
                { "0.0005", 1 },
                { "0.00049999", 0 },
                { "-0", 0 },
                { "0.1234567e4", 1234567 },
                { "123456789e-9", 123 },        /* 0.123456789 us */
                { "123456789e-15", 0 },
                { "\"+5\"", 5000 },
                { "\".5\"", 500 },
                { "\"5.\"", 5000 },
                { "\"007\"", 7000 },
                { "3000000000000000", INT64_C(3000000000000000000) },
                { "-3e15", -INT64_C(3000000000000000000) },
                { "0e999999999999", 0 },
                { "1e-999999999999", 0 },
        };
        static const char *const bad[] = {
                "3000000000000001", "-3000000000000000.001", "1e16", "1e400", "\"abc\"", "\"\"", "\" 7\"",
                "\"7 \"", "\"0x10\"", "\"inf\"", "\"nan\"", "\"1e\"", "\"-\"", "\".\"", "\"1.2.3\"", "true",
                "null", "[1]", "{\"a\":1}", "\"1\\u0030\"",
        };
        char doc[256];

        for (size_t i = 0; i < N_OF(good); i++) {
                snprintf(doc, sizeof(doc), "[{\"ts\":%s,\"dur\":%s}]", good[i].ts, good[i].ts);
                rec_t *r = scan_ok(doc);
                assert_int_equal(r->n, 1);
                if (!r->ev[0].has_ts || r->ev[0].ts_ns != good[i].ns || !r->ev[0].has_dur || r->ev[0].dur_ns != good[i].ns)
                        fail_msg("%s: %d %" PRId64 ", expected %" PRId64, good[i].ts, r->ev[0].has_ts, r->ev[0].ts_ns,
                                 good[i].ns);
                assert_int_equal(r->st.malformed, 0);
        }
        for (size_t i = 0; i < N_OF(bad); i++) {
                snprintf(doc, sizeof(doc), "[{\"ts\":%s},{\"dur\":%s},{\"ts\":1,\"dur\":2}]", bad[i], bad[i]);
                rec_t *r = scan_ok(doc);
                assert_int_equal(r->n, 3);
                if (r->ev[0].has_ts || r->ev[1].has_dur)
                        fail_msg("%s was taken as %" PRId64 " and %" PRId64, bad[i], r->ev[0].ts_ns, r->ev[1].dur_ns);
                assert_true(r->ev[2].has_ts && r->ev[2].has_dur);
                /* Both events are counted as malformed, and handed over all the same. */
                assert_int_equal(r->st.malformed, 2);
                assert_int_equal(r->st.events, 3);
                assert_string_equal(r->st.first_malformed, "line 1, column 2: event 0 has a \"ts\" that is not a number "
                                                           "of microseconds within range; handed over without it");
        }
        /* Of duplicate keys, the last wins, and a good one last makes the event well-formed. */
        rec_t *r = scan_ok("[{\"ts\":\"x\",\"ts\":5,\"pid\":1.5,\"pid\":2},{\"ts\":5,\"ts\":null}]");
        assert_true(r->ev[0].has_ts && r->ev[0].ts_ns == 5000 && r->ev[0].has_pid && r->ev[0].pid == 2);
        assert_false(r->ev[1].has_ts);
        assert_int_equal(r->st.malformed, 1);
}

static void test_pid_tid(void **state)
{
        (void) state;
        rec_t *r = scan_ok("[{\"pid\":-12,\"tid\":\"-9223372036854775808\"},"
                           "{\"pid\":9223372036854775807,\"tid\":\"Trace\"},"
                           "{\"pid\":9223372036854775808},{\"pid\":1.0},{\"pid\":\"1.0\",\"tid\":\"0012\"},"
                           "{\"pid\":[1],\"tid\":true}]");

        assert_int_equal(r->n, 6);
        assert_true(r->ev[0].has_pid && r->ev[0].pid == -12 && r->ev[0].has_tid && r->ev[0].tid == INT64_MIN);
        assert_true(r->ev[1].has_pid && r->ev[1].pid == INT64_MAX && !r->ev[1].has_tid);
        assert_copy(&r->ev[1].tid_str, "Trace");
        assert_false(r->ev[2].has_pid);         /* out of range: malformed */
        assert_copy(&r->ev[2].pid_str, NULL);
        assert_false(r->ev[3].has_pid);         /* not an integer: malformed */
        assert_copy(&r->ev[4].pid_str, "1.0");  /* a string that is no integer: a name */
        assert_true(r->ev[4].has_tid && r->ev[4].tid == 12);
        assert_false(r->ev[5].has_pid || r->ev[5].has_tid);
        assert_int_equal(r->st.malformed, 3);
        assert_string_equal(r->st.first_malformed, "line 1, column 85: event 2 has a \"pid\" that is not an integer or "
                                                   "a string; handed over without it");
        assert_int_equal(r->st.malformed_line, 1);
        assert_int_equal(r->st.malformed_column, 85);
}

/* Fields of another type are absent; unknown keys, nested values and escapes are skipped. */
static void test_fields(void **state)
{
        (void) state;
        rec_t *r = scan_ok("[{\"ph\":5,\"name\":[\"a\"],\"cat\":{},\"args\":[1],\"id\":true,"
                           "\"x\":{\"ph\":\"B\",\"name\":\"n\"}},"
                           "{\"ph\":\"\",\"name\":\"a\\\"b\\\\\",\"id\":\"0x1f\",\"args\":{},\"zz\":[[[]]],\"pi\":-1.5e-3,"
                           "\"phase\":\"X\",\"names\":\"no\"},"
                           "{\"name\":\"first\",\"name\":\"second\",\"ph\":\"E\",\"ph\":\"B\"}]");

        assert_int_equal(r->n, 3);
        assert_int_equal(r->ev[0].ph, 0);
        assert_copy(&r->ev[0].name, NULL);
        assert_copy(&r->ev[0].cat, NULL);
        assert_copy(&r->ev[0].args, NULL);
        assert_copy(&r->ev[0].id, NULL);
        assert_int_equal(r->ev[1].ph, 0);
        assert_copy(&r->ev[1].name, "a\\\"b\\\\");
        assert_copy(&r->ev[1].id, "0x1f");
        assert_copy(&r->ev[1].args, "{}");
        assert_copy(&r->ev[2].name, "second");
        assert_int_equal(r->ev[2].ph, 'B');
        assert_int_equal(r->st.malformed, 0);
}

/* --- chunks, prefixes, truncation ----------------------------------------------------------------- */

/* Every prefix of a document scans alike whole and a byte at a time (scan_len compares). */
static void test_every_prefix(void **state)
{
        (void) state;
        static const char *const docs[] = {
                kineto_doc,
                "[{\"name\":\"a\\\"\\\\\",\"ts\":-1.5e2,\"args\":{\"k\":[true,false,null,{\"z\":\"]}\"}]}},\n"
                "7, null, \"s\", [1,2], {\"ph\":\"B\",\"ts\":\"12.5\",\"pid\":\"p\",\"id\":\"7\"},\n{}]",
                "{\"a\":123456,\"b\":true,\"traceEvents\":[{\"ts\":1},\n 12,{\"dur\":3}],\"c\":\"x\"}",
        };

        for (size_t d = 0; d < N_OF(docs); d++) {
                size_t len = strlen(docs[d]);
                for (size_t n = 0; n <= len; n++) {
                        rec_t *r = scan_len(docs[d], n);
                        /* A cut inside the events is a truncation; anywhere else an error. */
                        if (r->r != 0 && r->r != -EINVAL && r->r != -ENOMSG)
                                fail_msg("prefix %zu of document %zu: %d %s", n, d, r->r, r->err);
                        if (r->r == 0 && n < len)
                                assert_true(r->st.truncated || d == 0);
                }
        }
}

static void test_truncated(void **state)
{
        (void) state;
        rec_t *r = scan_ok("[{\"ph\":\"X\",\"ts\":1},{\"ph\":\"X\",\"ts\":2}");
        assert_int_equal(r->n, 2);
        assert_true(r->st.truncated);

        r = scan_ok("[{\"ph\":\"X\",\"ts\":1},{\"ph\":\"X\",\"ts\":2},\n  {\"ph\":\"X\",\"na");
        assert_int_equal(r->n, 2);
        assert_true(r->st.truncated);

        r = scan_ok("[{\"ts\":1},\n12");        /* a number that may go on */
        assert_int_equal(r->n, 1);
        assert_int_equal(r->st.malformed, 0);
        assert_true(r->st.truncated);

        r = scan_ok("{\"schemaVersion\":1,\"traceEvents\":[{\"ts\":1},{\"ts\":2}, ");
        assert_int_equal(r->n, 2);
        assert_int_equal(r->n_top, 1);
        assert_true(r->st.truncated);

        /* Once the array has begun, even before its first element. */
        r = scan_ok("{\"traceEvents\":[");
        assert_int_equal(r->n, 0);
        assert_true(r->st.truncated);

        r = scan_ok("[{\"ts\":1}]");
        assert_false(r->st.truncated);

        /* Cut short anywhere else: an error at the end. */
        scan_fails("{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":0}", -EINVAL,
                   "line 1, column 48: the document ends inside a top-level value");
        scan_fails("{\"schemaVersion\":1,\n\"traceEv", -EINVAL,
                   "line 2, column 9: the document ends inside a top-level key");
        scan_fails("{\"schemaVersion\":1", -EINVAL, "line 1, column 19: the document ends inside a top-level value");
        scan_fails("{\"schemaVersion\":1 ", -EINVAL, "line 1, column 20: the document ends where ',' or '}' was expected");
        scan_fails("{\"a\"", -EINVAL, "line 1, column 5: the document ends where ':' was expected");
        scan_fails("{\"traceEvents\":[]", -EINVAL, "line 1, column 18: the document ends where ',' or '}' was expected");
        scan_fails("{", -EINVAL, "line 1, column 2: the document ends where a key or '}' was expected");
        scan_fails("", -EINVAL, "line 1, column 1: the document ends where a JSON value was expected");
        scan_fails(" \n ", -EINVAL, "line 2, column 2: the document ends where a JSON value was expected");
}

/* --- malformed elements and errors ------------------------------------------------------------- */

static void test_malformed(void **state)
{
        (void) state;
        rec_t *r = scan_ok("[{\"ts\":1},\n  42, null,\"s\" ,[{\"ts\":2}], true, {\"ts\":3}, -0.5e1]");

        assert_int_equal(r->n, 2);
        assert_int_equal(r->st.events, 2);
        assert_int_equal(r->st.malformed, 6);
        assert_int_equal(r->st.malformed_line, 2);
        assert_int_equal(r->st.malformed_column, 3);
        assert_string_equal(r->st.first_malformed,
                            "line 2, column 3: element 1 of the events is a number, not an object; skipped");
        assert_int_equal(r->ev[1].ts_ns, 3000);

        static const char *const kinds[][2] = {
                { "[\"x\"]", "line 1, column 2: element 0 of the events is a string, not an object; skipped" },
                { "[null]", "line 1, column 2: element 0 of the events is null, not an object; skipped" },
                { "[{},false]", "line 1, column 5: element 1 of the events is a boolean, not an object; skipped" },
                { "[[]]", "line 1, column 2: element 0 of the events is an array, not an object; skipped" },
        };
        for (size_t i = 0; i < N_OF(kinds); i++)
                assert_string_equal(scan_ok(kinds[i][0])->st.first_malformed, kinds[i][1]);
}

static void test_errors(void **state)
{
        (void) state;
        static const struct {
                const char *doc;
                int r;
                const char *err;
        } cases[] = {
                { "[{\"a\":1}\n,{\"b\" 2}]", -EINVAL, "line 2, column 7: ':' expected after a key" },
                { "[\r\n{\"a\":1},\r\n{\"b\":}]", -EINVAL, "line 3, column 6: a value expected" },
                { "[{\"a\":tru}]", -EINVAL, "line 1, column 7: an unknown word where a value was expected" },
                { "[{\"a\":True}]", -EINVAL, "line 1, column 7: an unknown word where a value was expected" },
                { "[{\"a\":01}]", -EINVAL, "line 1, column 7: a malformed number" },
                { "[{\"a\":1.}]", -EINVAL, "line 1, column 7: a malformed number" },
                { "[{\"a\":-}]", -EINVAL, "line 1, column 7: a malformed number" },
                { "[{\"a\":1-2}]", -EINVAL, "line 1, column 7: a malformed number" },
                { "[{\"a\":+1}]", -EINVAL, "line 1, column 7: a value expected" },
                { "[{\"a\":1 2}]", -EINVAL, "line 1, column 9: ',' or '}' expected in an object" },
                { "[{\"a\":[1 2]}]", -EINVAL, "line 1, column 10: ',' or ']' expected in an array" },
                { "[{\"a\":[1,]}]", -EINVAL, "line 1, column 10: a value expected" },
                { "[{\"a\":{1:2}}]", -EINVAL, "line 1, column 8: a key string expected" },
                { "[{a:1}]", -EINVAL, "line 1, column 3: a key string expected" },
                { "[{\"a\":1,}]", -EINVAL, "line 1, column 9: a key string expected" },
                { "[{\"a\":1]", -EINVAL, "line 1, column 8: ',' or '}' expected in an object" },
                { "[{\"a\":1}{\"b\":2}]", -EINVAL, "line 1, column 9: ',' or ']' expected after element 0 of the events" },
                { "[{},]", -EINVAL, "line 1, column 5: a value expected" },
                { "[,{}]", -EINVAL, "line 1, column 2: a value expected" },
                { "[1 2]", -EINVAL, "line 1, column 4: ',' or ']' expected after element 0 of the events" },
                { "[1true]", -EINVAL, "line 1, column 3: ',' or ']' expected after element 0 of the events" },
                { "[{}] x", -EINVAL, "line 1, column 6: the document goes on after its end" },
                { "{\"traceEvents\":[]}\n\n}", -EINVAL, "line 3, column 1: the document goes on after its end" },
                { "{\"traceEvents\":{}}", -EINVAL, "line 1, column 16: \"traceEvents\" is not an array of events" },
                { "{\"traceEvents\":[],\"traceEvents\":[]}", -EINVAL, "line 1, column 19: \"traceEvents\" appears twice" },
                { "{\"a\" 1}", -EINVAL, "line 1, column 6: ':' expected after a key" },
                { "{\"a\":1 \"b\":2}", -EINVAL, "line 1, column 8: ',' or '}' expected after a value" },
                { "{\"a\":1,}", -EINVAL, "line 1, column 8: a key string expected" },
                { "{\"a\":nul}", -EINVAL, "line 1, column 6: an unknown word where a value was expected" },
                { "{1:2}", -EINVAL, "line 1, column 2: a key string expected" },
                { "\xef\xbb[]", -EINVAL, "line 1, column 3: a byte order mark cut short" },
                { "42", -ENOMSG, "line 1, column 1: the document is neither an object nor an array: not a Chrome trace" },
                { "\"traceEvents\"", -ENOMSG,
                  "line 1, column 1: the document is neither an object nor an array: not a Chrome trace" },
                { "{\"a\":1}", -ENOMSG, "a JSON object without \"traceEvents\": not a Chrome trace" },
                { "{}", -ENOMSG, "a JSON object without \"traceEvents\": not a Chrome trace" },
        };

        for (size_t i = 0; i < N_OF(cases); i++)
                scan_fails(cases[i].doc, cases[i].r, cases[i].err);

        /* Events before an error are handed over; none after. */
        rec_t *r = scan("[{\"ts\":1},{\"ts\":2},{\"ts\" 3},{\"ts\":4}]");
        assert_int_equal(r->r, -EINVAL);
        assert_int_equal(r->n, 2);

        /* A failed scanner says the same again, and takes no more input. */
        char err[NPF_EVSCAN_ERR_MAX];
        npf_evscan_t *s = npf_evscan_new(NULL, NULL, NULL);
        assert_non_null(s);
        assert_int_equal(npf_evscan_feed(s, "[{]", 3, err), -EINVAL);
        assert_string_equal(err, "line 1, column 3: a key string expected");
        memset(err, 0, sizeof(err));
        assert_int_equal(npf_evscan_feed(s, "}]", 2, err), -EINVAL);
        assert_string_equal(err, "line 1, column 3: a key string expected");
        assert_int_equal(npf_evscan_finish(s, err), -EINVAL);
        assert_string_equal(err, "line 1, column 3: a key string expected");
        npf_evscan_free(s);

        /* Nothing may be fed after the end. */
        s = npf_evscan_new(NULL, NULL, NULL);
        assert_non_null(s);
        assert_int_equal(npf_evscan_feed(s, "[]", 2, NULL), 0);
        assert_int_equal(npf_evscan_finish(s, NULL), 0);
        assert_int_equal(npf_evscan_finish(s, NULL), 0);
        assert_int_equal(npf_evscan_feed(s, " ", 1, err), -EINVAL);
        assert_string_equal(err, "fed after the end of input");
        npf_evscan_free(s);
        assert_null(npf_evscan_free(NULL));
}

/* A callback's nonzero return stops the scan and is what every later call returns. */
static void test_callback_stops(void **state)
{
        (void) state;
        held.stop_after = 2;
        rec_t *r = scan("[{\"ts\":1},{\"ts\":2},{\"ts\":3}]");
        assert_int_equal(r->r, 7);
        assert_int_equal(r->n, 2);
        assert_string_equal(r->err, "the event callback stopped the scan (7)");
}

static void test_depth(void **state)
{
        (void) state;
        size_t max = NPF_EVSCAN_DEPTH_MAX;
        char *doc = malloc(4 * max + 64);
        size_t n = 0;

        assert_non_null(doc);
        /* The array is level 1, the event 2, args 3: args nested to level max is fine... */
        n += (size_t) sprintf(doc + n, "[{\"args\":");
        for (size_t i = 3; i <= max; i++)
                doc[n++] = '[';
        for (size_t i = 3; i <= max; i++)
                doc[n++] = ']';
        n += (size_t) sprintf(doc + n, "}]");
        rec_t *r = scan_len(doc, n);
        assert_int_equal(r->r, 0);
        assert_int_equal(r->n, 1);

        /* ...one more is not. */
        n = (size_t) sprintf(doc, "[{\"args\":");
        for (size_t i = 3; i <= max + 1; i++)
                doc[n++] = '[';
        doc[n] = '\0';
        r = scan_len(doc, n);
        char expected[128];
        snprintf(expected, sizeof(expected), "line 1, column %zu: nested deeper than %zu levels", n, max);
        assert_int_equal(r->r, -EINVAL);
        assert_string_equal(r->err, expected);

        /* In a top-level value, and in an element that is not an event. */
        n = (size_t) sprintf(doc, "{\"a\":");
        for (size_t i = 2; i <= max + 1; i++)
                doc[n++] = '[';
        doc[n] = '\0';
        r = scan_len(doc, n);
        assert_int_equal(r->r, -EINVAL);
        snprintf(expected, sizeof(expected), "line 1, column %zu: nested deeper than %zu levels", n, max);
        assert_string_equal(r->err, expected);
        n = (size_t) sprintf(doc, "[");
        for (size_t i = 2; i <= max + 1; i++)
                doc[n++] = '[';
        r = scan_len(doc, n);
        assert_int_equal(r->r, -EINVAL);
        free(doc);
}

/* An event over NPF_EVSCAN_EVENT_MAX is refused; a top-level value over NPF_EVSCAN_TOP_MAX is not reported. */
static void test_limits(void **state)
{
        (void) state;
        size_t big = NPF_EVSCAN_EVENT_MAX + 100;
        char *doc = malloc(big + 64);
        size_t n;

        assert_non_null(doc);
        n = (size_t) sprintf(doc, "[{\"ts\":1},\n{\"name\":\"");
        memset(doc + n, 'a', big);
        n += big;
        n += (size_t) sprintf(doc + n, "\"}]");
        /* The last: the first chunk ends where the limit does, the element carried from its start. */
        static const size_t chunks[] = { 0, 65536, 1000003, 11 + NPF_EVSCAN_EVENT_MAX };
        assert_int_equal(strchr(doc, '\n') + 1 - doc, 11);
        for (size_t i = 0; i < N_OF(chunks); i++) {
                scan_into(&held, doc, n, chunks[i] ? chunks[i] : n);
                assert_int_equal(held.r, -E2BIG);
                assert_string_equal(held.err, "line 2, column 1: element 1 of the events is more than 16 MiB; refused");
                assert_int_equal(held.n, 1);
        }
        /* Just within the limit: read. */
        n = (size_t) sprintf(doc, "[{\"name\":\"");
        memset(doc + n, 'b', NPF_EVSCAN_EVENT_MAX - n - 1 + 1 - 2);
        n += NPF_EVSCAN_EVENT_MAX - n - 2 + 1;
        n += (size_t) sprintf(doc + n, "\"}]");
        scan_into(&held, doc, n, n);
        assert_int_equal(held.r, 0);
        assert_int_equal(held.n, 1);
        assert_int_equal(held.ev[0].raw.n, NPF_EVSCAN_EVENT_MAX);
        scan_into(&other, doc, n, 4096);
        rec_equal(&held, &other, 4096);

        /* A top-level value over 1 MiB, with brackets in strings: skipped, unreported; the rest read. */
        size_t tb = NPF_EVSCAN_TOP_MAX + 10;
        n = (size_t) sprintf(doc, "{\"small\":[1],\"huge\":[\"");
        for (size_t i = 0; i < tb; i++)
                doc[n++] = "]}\\\"x"[i % 5];
        n += (size_t) sprintf(doc + n, "\"],\"traceEvents\":[{\"ts\":1}],\"num\":");
        memset(doc + n, '7', tb);       /* a number longer than the limit too */
        n += tb;
        n += (size_t) sprintf(doc + n, ",\"last\":{}}");
        static const size_t chunks2[] = { 0, 1 << 16, 1 << 20, 3 };
        for (size_t i = 0; i < N_OF(chunks2); i++) {
                rec_t *r = i == 0 ? &held : &other;
                scan_into(r, doc, n, chunks2[i] ? chunks2[i] : n);
                if (r->r != 0)
                        fail_msg("chunks of %zu: %s", chunks2[i], r->err);
                assert_int_equal(r->n, 1);
                assert_int_equal(r->n_top, 2);
                assert_copy(&r->top[0].key, "small");
                assert_copy(&r->top[1].key, "last");
                if (i > 0)
                        rec_equal(&held, r, chunks2[i]);
        }

        /* A top-level key over 1 MiB is refused. */
        n = (size_t) sprintf(doc, "{\"");
        memset(doc + n, 'k', tb);
        n += tb;
        n += (size_t) sprintf(doc + n, "\":1}");
        scan_into(&held, doc, n, n);
        assert_int_equal(held.r, -E2BIG);
        assert_string_equal(held.err, "line 1, column 2: a top-level key of more than 1 MiB; refused");
        scan_into(&other, doc, n, 100000);
        rec_equal(&held, &other, 100000);
        free(doc);
}

/* --- strings and lookups ------------------------------------------------------------------------- */

static void assert_unescaped(const char *raw, const char *expected)
{
        char buf[64];
        size_t n = npf_evscan_unescape((npf_evscan_str_t) { raw, strlen(raw) }, buf, sizeof(buf));

        if (n != strlen(expected) || strcmp(buf, expected) != 0)
                fail_msg("%s: \"%s\" (%zu), expected \"%s\"", raw, buf, n, expected);
}

static void test_unescape(void **state)
{
        (void) state;
        /* Names are handed over raw, then decoded. */
        rec_t *r = scan_ok("[{\"name\":\"caf\\u00e9 \\\"x\\\" \\ud83d\\ude00\"}]");
        assert_copy(&r->ev[0].name, "caf\\u00e9 \\\"x\\\" \\ud83d\\ude00");
        assert_unescaped(r->ev[0].name.p, "caf\xc3\xa9 \"x\" \xf0\x9f\x98\x80");

        assert_unescaped("a\\\\b\\/c\\b\\f\\n\\r\\t", "a\\b/c\b\f\n\r\t");
        assert_unescaped("\\u0041\\u00E9\\u20ac", "A\xc3\xa9\xe2\x82\xac");
        assert_unescaped("caf\xc3\xa9", "caf\xc3\xa9");                 /* raw UTF-8 kept */
        assert_unescaped("\\ud83d", "\xef\xbf\xbd");                      /* a lone high surrogate */
        assert_unescaped("\\ud83dx", "\xef\xbf\xbdx");
        assert_unescaped("\\ude00", "\xef\xbf\xbd");                      /* a lone low one */
        assert_unescaped("\\ud83d\\u0041", "\xef\xbf\xbd" "A");
        assert_unescaped("\\x", "\xef\xbf\xbd");
        assert_unescaped("\\u12", "\xef\xbf\xbd" "12");
        assert_unescaped("\\u12g4", "\xef\xbf\xbd" "12g4");
        assert_unescaped("\\u0000", "\xef\xbf\xbd");                      /* no NUL inside */
        assert_unescaped("a\\", "a\xef\xbf\xbd");
        assert_unescaped("\xff" "a\xc3", "\xef\xbf\xbd" "a\xef\xbf\xbd");      /* not UTF-8 */
        assert_unescaped("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");   /* an encoded surrogate */
        assert_unescaped("\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd");                  /* overlong */
        assert_unescaped("", "");
        char nul[64];                                                   /* a raw NUL byte */
        assert_int_equal(npf_evscan_unescape((npf_evscan_str_t) { "a\0b", 3 }, nul, sizeof(nul)), 5);
        assert_string_equal(nul, "a\xef\xbf\xbd" "b");

        /* Cut at a character boundary, terminated, the whole length returned. */
        char buf[5];
        npf_evscan_str_t s = { "ab\\u00e9\\u00e9", 14 };
        assert_int_equal(npf_evscan_unescape(s, buf, sizeof(buf)), 6);
        assert_string_equal(buf, "ab\xc3\xa9");
        assert_int_equal(npf_evscan_unescape(s, buf, 4), 6);
        assert_string_equal(buf, "ab");
        assert_int_equal(npf_evscan_unescape(s, buf, 1), 6);
        assert_string_equal(buf, "");
        assert_int_equal(npf_evscan_unescape(s, NULL, 0), 6);
        assert_int_equal(npf_evscan_unescape((npf_evscan_str_t) { NULL, 0 }, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "");

        assert_true(npf_evscan_eq((npf_evscan_str_t) { "ProfilerStep#5", 14 }, "ProfilerStep#5"));
        assert_false(npf_evscan_eq((npf_evscan_str_t) { "ProfilerStep#5", 13 }, "ProfilerStep#5"));
        assert_false(npf_evscan_eq((npf_evscan_str_t) { NULL, 0 }, ""));
        assert_true(npf_evscan_eq((npf_evscan_str_t) { "", 0 }, ""));
}

static void test_args_lookup(void **state)
{
        (void) state;
        rec_t *r = scan_ok("[{\"ph\":\"X\",\"args\":{\"Input Dims\": [[1, 2], [3]],"
                           " \"nested\": {\"x\": {\"y\": 1}, \"s\": \"no\"},"
                           " \"x\": 5, \"s\": \"12\", \"f\": \"2.5\", \"n\": -7, \"e\": 1.5e3, \"dup\": 1, \"dup\": 2,"
                           " \"esc\\u0041\": 9, \"str\": \"a\\\"b\", \"big\": 99999999999999999999, \"t\": true,"
                           " \"sp\": \" 1\", \"word\": \"inf\"}}]");
        npf_evscan_str_t args = { r->ev[0].args.p, r->ev[0].args.n }, v;
        int64_t i;
        double d;

        assert_true(npf_evscan_get(args, "Input Dims", &v));
        assert_true(npf_evscan_eq(v, "[[1, 2], [3]]"));
        assert_true(npf_evscan_get(args, "nested", &v));
        assert_true(npf_evscan_eq(v, "{\"x\": {\"y\": 1}, \"s\": \"no\"}"));
        assert_true(npf_evscan_get_int(args, "x", &i));         /* not the nested one */
        assert_int_equal(i, 5);
        assert_true(npf_evscan_get(args, "str", &v));           /* a string's raw contents */
        assert_true(npf_evscan_eq(v, "a\\\"b"));
        assert_true(npf_evscan_get_int(args, "s", &i));         /* a string holding an integer */
        assert_int_equal(i, 12);
        assert_true(npf_evscan_get_int(args, "n", &i));
        assert_int_equal(i, -7);
        assert_true(npf_evscan_get_int(args, "dup", &i));       /* the last wins */
        assert_int_equal(i, 2);
        assert_true(npf_evscan_get_int(args, "escA", &i));      /* a key compared decoded */
        assert_int_equal(i, 9);
        assert_false(npf_evscan_get_int(args, "f", &i));
        assert_false(npf_evscan_get_int(args, "e", &i));
        assert_false(npf_evscan_get_int(args, "big", &i));
        assert_false(npf_evscan_get_int(args, "t", &i));
        assert_false(npf_evscan_get_int(args, "y", &i));
        assert_false(npf_evscan_get_int(args, "missing", &i));
        assert_true(npf_evscan_get_double(args, "f", &d));
        assert_true(d == 2.5);
        assert_true(npf_evscan_get_double(args, "e", &d));
        assert_true(d == 1500);
        assert_true(npf_evscan_get_double(args, "x", &d));
        assert_true(d == 5);
        assert_true(npf_evscan_get_double(args, "big", &d));
        assert_true(d == 1e20);
        assert_false(npf_evscan_get_double(args, "sp", &d));
        assert_false(npf_evscan_get_double(args, "word", &d));
        assert_false(npf_evscan_get_double(args, "Input Dims", &d));
        assert_false(npf_evscan_get_double(args, "str", &d));

        /* @ret untouched when not found; nothing found in what is not a well-formed object. */
        v = (npf_evscan_str_t) { "keep", 4 };
        assert_false(npf_evscan_get(args, "nope", &v));
        assert_true(npf_evscan_eq(v, "keep"));
        static const char *const broken[] = { "", "[\"a\",1]", "{\"a\":1", "{\"a\" 1}", "{\"a\":}", "{\"a\":1,}", "{a:1}",
                                              "{\"a\":tru}", "{\"b\":[1}, \"a\":1}" };
        for (size_t k = 0; k < N_OF(broken); k++)
                assert_false(npf_evscan_get((npf_evscan_str_t) { broken[k], strlen(broken[k]) }, "a", &v));
        assert_false(npf_evscan_get((npf_evscan_str_t) { NULL, 0 }, "a", &v));
        /* The whole object is read: a broken tail fails the lookup of a key before it. */
        assert_false(npf_evscan_get((npf_evscan_str_t) { "{\"a\":1,\"b\":]}", 13 }, "a", &v));
        assert_true(npf_evscan_get((npf_evscan_str_t) { "{ \"a\" : \"\" }", 12 }, "a", &v));
        assert_true(v.p != NULL && v.n == 0);
}

/* --- real traces --------------------------------------------------------------------------------- */

static bool have(const char *path)
{
        struct stat sb;

        if (stat(path, &sb) == 0)
                return true;
        print_message("skipped: %s is absent\n", path);
        return false;
}

typedef struct tally {
        uint64_t by_ph[256];
        uint64_t events;
        int64_t x_ts_sum, x_dur_sum;    /* of "X" events, ns, wrapping */
        uint64_t str_pids;
        char top[512];                  /* the top-level keys, space-separated */
} tally_t;

static int tally_event(void *userdata, const npf_evscan_event_t *ev)
{
        tally_t *t = userdata;

        t->events++;
        t->by_ph[(uint8_t) ev->ph]++;
        if (ev->ph == 'X') {
                t->x_ts_sum = (int64_t) ((uint64_t) t->x_ts_sum + (uint64_t) ev->ts_ns);
                t->x_dur_sum = (int64_t) ((uint64_t) t->x_dur_sum + (uint64_t) ev->dur_ns);
        }
        t->str_pids += ev->pid_str.p != NULL;
        return 0;
}

static int tally_top(void *userdata, npf_evscan_str_t key, npf_evscan_str_t value)
{
        tally_t *t = userdata;
        size_t n = strlen(t->top);

        (void) value;
        snprintf(t->top + n, sizeof(t->top) - n, "%s%.*s", n ? " " : "", (int) key.n, key.p);
        return 0;
}

/* Scan what @f reads, in pieces of @piece bytes, into @t. */
static void tally_stream(FILE *f, size_t piece, tally_t *t, npf_evscan_stats_t *ret_st)
{
        char err[NPF_EVSCAN_ERR_MAX];
        char *buf = malloc(piece);
        npf_evscan_t *s = npf_evscan_new(tally_event, tally_top, t);
        size_t n;
        int r = 0;

        assert_non_null(buf);
        assert_non_null(s);
        while (r == 0 && (n = fread(buf, 1, piece, f)) > 0)
                r = npf_evscan_feed(s, buf, n, err);
        if (r == 0)
                r = npf_evscan_finish(s, err);
        free(buf);
        npf_evscan_stats(s, ret_st);
        npf_evscan_free(s);
        if (r != 0)
                fail_msg("%d: %s", r, err);
}

/*
 * torch_npu's trace_view.json (bare array, ts as strings with a nanosecond fraction). The
 * figures are Python's, with exact decimals:
 *   python3 -c "import json,decimal,collections as c; D=decimal.Decimal
 *   e=json.load(open(P),parse_float=D); print(len(e), c.Counter(x.get('ph') for x in e))
 *   x=[v for v in e if v.get('ph')=='X']; ns=lambda v: int((D(v)*1000).to_integral_value(decimal.ROUND_HALF_UP))
 *   print(sum(ns(v['ts']) for v in x) % 2**64, sum(ns(v['dur']) for v in x))"
 * gives 10112 events: C 4431, X 4384, f 611, s 606, M 80; the sums below.
 */
static void test_trace_view(void **state)
{
        (void) state;
        if (!have(TRACE_VIEW))
                skip();
        static const size_t pieces[] = { 1 << 20, 4096, 997 };
        for (size_t i = 0; i < N_OF(pieces); i++) {
                FILE *f = fopen(TRACE_VIEW, "rb");
                tally_t *t = calloc(1, sizeof(*t));
                npf_evscan_stats_t st;
                assert_non_null(f);
                assert_non_null(t);
                tally_stream(f, pieces[i], t, &st);
                fclose(f);
                assert_int_equal(t->events, 10112);
                assert_int_equal(t->by_ph['C'], 4431);
                assert_int_equal(t->by_ph['X'], 4384);
                assert_int_equal(t->by_ph['f'], 611);
                assert_int_equal(t->by_ph['s'], 606);
                assert_int_equal(t->by_ph['M'], 80);
                assert_int_equal((uint64_t) t->x_ts_sum, UINT64_C(12357987939591150106));
                assert_int_equal(t->x_dur_sum, INT64_C(3623631093));
                assert_int_equal(st.malformed, 0);
                assert_false(st.truncated);
                assert_string_equal(t->top, "");
                free(t);
        }
}

/*
 * Kineto's trace of an A100 rank, gzipped: inflated by gzip through a pipe, fed as read.
 *   python3 -c "import json,gzip,decimal,collections as c; D=decimal.Decimal
 *   d=json.load(gzip.open(P),parse_float=D); e=d['traceEvents']
 *   print(list(d), len(e), c.Counter(x.get('ph') for x in e), sum(isinstance(x.get('pid'),str) for x in e))
 *   x=[v for v in e if v.get('ph')=='X']
 *   print(sum(int((D(v['dur'])*1000).to_integral_value(decimal.ROUND_HALF_UP)) for v in x))"
 */
static void test_kineto(void **state)
{
        (void) state;
        if (!have(KINETO))
                skip();
        FILE *f = popen("gzip -dc '" KINETO "'", "r");
        tally_t *t = calloc(1, sizeof(*t));
        npf_evscan_stats_t st;

        assert_non_null(f);
        assert_non_null(t);
        tally_stream(f, 65536, t, &st);
        assert_int_equal(pclose(f), 0);
        assert_int_equal(t->events, 40573);
        assert_int_equal(t->by_ph['X'], 26933);
        assert_int_equal(t->by_ph['f'], 9195);
        assert_int_equal(t->by_ph['s'], 4405);
        assert_int_equal(t->by_ph['M'], 38);
        assert_int_equal(t->by_ph['i'], 2);
        assert_int_equal(t->str_pids, 4);
        assert_int_equal(t->x_dur_sum, INT64_C(4383359174));
        assert_string_equal(t->top, "schemaVersion deviceProperties distributedInfo INFO traceName displayTimeUnit "
                                    "baseTimeNanoseconds");
        assert_int_equal(st.malformed, 0);
        assert_false(st.truncated);
        free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_object_form, teardown),
                cmocka_unit_test_teardown(test_array_form, teardown),
                cmocka_unit_test_teardown(test_times, teardown),
                cmocka_unit_test_teardown(test_pid_tid, teardown),
                cmocka_unit_test_teardown(test_fields, teardown),
                cmocka_unit_test_teardown(test_every_prefix, teardown),
                cmocka_unit_test_teardown(test_truncated, teardown),
                cmocka_unit_test_teardown(test_malformed, teardown),
                cmocka_unit_test_teardown(test_errors, teardown),
                cmocka_unit_test_teardown(test_callback_stops, teardown),
                cmocka_unit_test_teardown(test_depth, teardown),
                cmocka_unit_test_teardown(test_limits, teardown),
                cmocka_unit_test_teardown(test_unescape, teardown),
                cmocka_unit_test_teardown(test_args_lookup, teardown),
                cmocka_unit_test_teardown(test_trace_view, teardown),
                cmocka_unit_test_teardown(test_kineto, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
