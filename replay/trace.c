/* SPDX-License-Identifier: MIT */
/*
 * Chrome trace analysis. The reader walks the top level of the document by hand and hands
 * each value to jansson (JSON_DISABLE_EOF_CHECK gives back where the value ended), so that
 * an events array of gigabytes is never a tree in memory: each event is turned into a
 * 32-byte span (or a B/E edge) and freed. The analysis then sorts the spans per thread and
 * nests them with a stack.
 */
#include "replay/trace.h"
#include "replay/input.h"
#include "lib/jsonpos.h"
#include "replay/intern.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define PIECE_MAX ((size_t) 1 << 30)    /* one JSON value; jansson counts positions in an int */
#define NOT_TRACE_AFTER 64u             /* elements without "ph" before the input is no trace */
#define TRUNCATED 1                     /* internal: the input ended inside the events */
#define STEP_PREFIX "ProfilerStep#"

/* A pid or tid: an integer, or a string (an interned id). */
typedef struct tkey {
        int64_t num;
        uint32_t str;                   /* NONE for an integer */
} tkey_t;

/*
 * What is known of one interned string: an operator's figures when it names spans, the
 * thread or process it stands for when it is a thread or process key (see key_id()).
 */
typedef struct name {
        int64_t step;                   /* N of "ProfilerStep#N", -1 for any other name */
        uint64_t count;                 /* spans of this name */
        int64_t self_ns, total_ns;
        uint32_t open;                  /* spans of this name on the stack now */
        uint32_t entry;                 /* a key's thread or process index, NONE */
} name_t;

typedef struct thread {
        tkey_t pid, tid;
        uint32_t name;                  /* thread_name, NONE if none */
        uint32_t process;               /* process_name of its pid, NONE if none */
        uint64_t events, clipped, borrowed;
        int64_t start, end;
        uint64_t steps;                 /* ProfilerStep spans on this thread */
        int64_t first_step;             /* the start of the first of them */
} thread_t;

/* One event of a tree. */
typedef struct span {
        int64_t start, end;             /* ns; end is meaningless while open */
        uint32_t name, thread;
        uint32_t seq;                   /* element index: the order of the file on ties */
        bool open;                      /* no end known: borrows its parent's */
} span_t;

/* A "B" or an "E", before they are paired. */
typedef struct edge {
        int64_t ts;
        uint32_t name, thread, seq;
        bool end;
} edge_t;

typedef struct step {
        npf_trace_step_t s;
        uint32_t thread;
} step_t;

struct npf_trace {
        npf_intern_t *in;               /* names, pid and tid strings, thread and process keys */
        name_t *names;                  /* by interned id */
        size_t n_names, cap_names;
        thread_t *threads;
        size_t n_threads, cap_threads;
        uint32_t *procs;                /* process_name of each process key's index */
        size_t n_procs, cap_procs;
        span_t *spans;                  /* freed once analysed */
        size_t n_spans, cap_spans;
        edge_t *edges;                  /* freed once paired */
        size_t n_edges, cap_edges;
        npf_trace_step_t *steps;
        size_t n_steps;
        npf_trace_step_stats_t stats;
        double *rss_time_us;            /* the "memory" counter's rss_kib samples, in bytes, by time */
        uint64_t *rss_bytes;
        size_t n_rss, cap_rss, cap_rss_bytes;
        uint32_t step_thread;           /* NONE without steps */
        uint64_t events, ignored, malformed, unmatched_ends, names_truncated;
        bool truncated;
        int64_t start, end;             /* of all threads, valid when events > 0 */
        char first_malformed[NPF_TRACE_ERR_MAX];
};

typedef struct loader {
        npf_trace_t *t;
        const char *text;
        size_t len, pos;
        npf_input_progress_cb progress;
        void *userdata;
        size_t next_progress;
        size_t elements;                /* of the events array, so far */
        bool any_ph;                    /* some element has a "ph" */
        bool events_started;            /* the end of input is a truncation from here on */
        tkey_t last_pid, last_tid;      /* the thread of the previous event, looked up again often */
        uint32_t last_thread;
        char *err;
} loader_t;

/* --- small things -------------------------------------------------------------------- */

/* Make room for one more item of @size bytes in the vector *@p of *@cap items holding @n. */
static int grow(void **p, size_t *cap, size_t n, size_t size)
{
        if (n < *cap)
                return 0;
        size_t c = *cap ? *cap * 2 : 64;
        if (c > SIZE_MAX / size)
                return -ENOMEM;
        void *q = realloc(*p, c * size);
        if (!q)
                return -ENOMEM;
        *p = q;
        *cap = c;
        return 0;
}

static int64_t sat_add(int64_t a, int64_t b)
{
        return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static bool key_eq(tkey_t a, tkey_t b)
{
        return a.num == b.num && a.str == b.str;
}

static const char *json_kind(const json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_OBJECT: return "an object";
        case JSON_ARRAY: return "an array";
        case JSON_STRING: return "a string";
        case JSON_INTEGER:
        case JSON_REAL: return "a number";
        case JSON_TRUE:
        case JSON_FALSE: return "a boolean";
        default: return "null";
        }
}

/* N of "ProfilerStep#N", or -1. */
static int64_t step_number(const char *s, size_t len)
{
        size_t p = sizeof(STEP_PREFIX) - 1;
        int64_t n = 0;

        if (len <= p || len > p + 18 || memcmp(s, STEP_PREFIX, p) != 0)
                return -1;
        for (size_t i = p; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                n = n * 10 + (s[i] - '0');
        }
        return n;
}

/* --- names, threads, processes -------------------------------------------------------- */

/* The id of @s (@len bytes), added if new, with its entry in t->names. */
static int intern_bytes(npf_trace_t *t, const char *s, size_t len, uint32_t *ret)
{
        int64_t id = npf_intern_string(t->in, s, len);

        if (id < 0)
                return (int) id;
        /* Ids come in order; the one never seen here is 0, the empty string. */
        for (; t->n_names <= (size_t) id; t->n_names++) {
                if (grow((void **) &t->names, &t->cap_names, t->n_names, sizeof(name_t)) < 0)
                        return -ENOMEM;
                t->names[t->n_names] = (name_t) { .step = t->n_names == (size_t) id ? step_number(s, len) : -1,
                                                  .entry = NONE };
        }
        *ret = (uint32_t) id;
        return 0;
}

static const char *str(const npf_trace_t *t, uint32_t id)
{
        return npf_intern_str(t->in, id);
}

/* The id of the name @s (NUL-terminated), shortened past NPF_TRACE_NAME_MAX. */
static int intern(npf_trace_t *t, const char *s, uint32_t *ret)
{
        static const char dots[] = "...";
        char buf[NPF_TRACE_NAME_MAX + 1];
        size_t len = strlen(s);

        if (len > NPF_TRACE_NAME_MAX) {
                /* Cut at a character boundary: the name must stay UTF-8 for the report. */
                size_t cut = NPF_TRACE_NAME_MAX - (sizeof(dots) - 1);
                while (cut > 0 && ((unsigned char) s[cut] & 0xc0) == 0x80)
                        cut--;
                memcpy(buf, s, cut);
                memcpy(buf + cut, dots, sizeof(dots));
                s = buf;
                len = cut + sizeof(dots) - 1;
                t->names_truncated++;
        }
        return intern_bytes(t, s, len, ret);
}

/*
 * The id of a thread key (@kind 'T', @pid and @tid) or process key ('P', @pid): bytes that
 * no name can be, since a name never holds a NUL. Its t->names entry says which one it is.
 */
static int key_id(npf_trace_t *t, char kind, tkey_t pid, tkey_t tid, uint32_t *ret)
{
        char key[2 + 2 * (sizeof(int64_t) + sizeof(uint32_t))] = { '\0', kind };
        size_t len = 2;

        for (int i = 0; i < (kind == 'T' ? 2 : 1); i++) {
                const tkey_t *k = i ? &tid : &pid;
                memcpy(key + len, &k->num, sizeof(k->num));
                memcpy(key + len + sizeof(k->num), &k->str, sizeof(k->str));
                len += sizeof(k->num) + sizeof(k->str);
        }
        return intern_bytes(t, key, len, ret);
}

static int thread_get(npf_trace_t *t, tkey_t pid, tkey_t tid, uint32_t *ret)
{
        uint32_t id;
        int r = key_id(t, 'T', pid, tid, &id);

        if (r < 0)
                return r;
        if (t->names[id].entry == NONE) {
                if (grow((void **) &t->threads, &t->cap_threads, t->n_threads, sizeof(thread_t)) < 0)
                        return -ENOMEM;
                t->threads[t->n_threads] = (thread_t) { .pid = pid, .tid = tid, .name = NONE, .process = NONE };
                t->names[id].entry = (uint32_t) t->n_threads++;
        }
        *ret = t->names[id].entry;
        return 0;
}

/* The process_name slot of @pid, added if new. */
static int proc_get(npf_trace_t *t, tkey_t pid, uint32_t **ret)
{
        uint32_t id;
        int r = key_id(t, 'P', pid, (tkey_t) { 0 }, &id);

        if (r < 0)
                return r;
        if (t->names[id].entry == NONE) {
                if (grow((void **) &t->procs, &t->cap_procs, t->n_procs, sizeof(uint32_t)) < 0)
                        return -ENOMEM;
                t->procs[t->n_procs] = NONE;
                t->names[id].entry = (uint32_t) t->n_procs++;
        }
        *ret = &t->procs[t->names[id].entry];
        return 0;
}

/* --- reading ---------------------------------------------------------------------------- */

static int fail_at(loader_t *L, int r, size_t offset, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_at(loader_t *L, int r, size_t offset, const char *fmt, ...)
{
        uint32_t line, column;
        va_list ap;
        int n;

        npf_jsonpos_line_column(L->text, L->len, offset, &line, &column);
        n = snprintf(L->err, NPF_TRACE_ERR_MAX, "line %" PRIu32 ", column %" PRIu32 ": ", line, column);
        va_start(ap, fmt);
        vsnprintf(L->err + n, NPF_TRACE_ERR_MAX - (size_t) n, fmt, ap);
        va_end(ap);
        return r;
}

/* Count a skipped event; the first one is described with its place. */
static int malformed(loader_t *L, size_t offset, const char *what)
{
        npf_trace_t *t = L->t;

        if (t->malformed++ == 0) {
                uint32_t line, column;
                npf_jsonpos_line_column(L->text, L->len, offset, &line, &column);
                snprintf(t->first_malformed, sizeof(t->first_malformed),
                         "line %" PRIu32 ", column %" PRIu32 ": event %zu %s; skipped", line, column, L->elements,
                         what);
        }
        return 0;
}

static bool at_end(const loader_t *L)
{
        return L->pos >= L->len;
}

static void skip_ws(loader_t *L)
{
        for (; L->pos < L->len; L->pos++) {
                char c = L->text[L->pos];
                if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
                        return;
        }
}

/* The end of input where a value or a token was expected: a truncation once events began. */
static int early_end(loader_t *L, const char *expected)
{
        if (L->events_started)
                return TRUNCATED;
        return fail_at(L, -EINVAL, L->len, "the file ends where %s was expected", expected);
}

/*
 * The JSON value at L->pos, which then moves past it. Return: 0 and the value, TRUNCATED
 * when the input ends inside it after the events began, or -EINVAL with L->err filled.
 */
static int value(loader_t *L, json_t **ret)
{
        size_t off = L->pos, n = L->len - off < PIECE_MAX ? L->len - off : PIECE_MAX;
        json_error_t e;

        json_t *v = json_loadb(L->text + off, n, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL, &e);
        if (v) {
                L->pos = off + (size_t) e.position;
                *ret = v;
                return 0;
        }
        size_t at = off + (e.position > 0 ? (size_t) e.position : 0);
        if (n == PIECE_MAX && at >= off + n)
                return fail_at(L, -EINVAL, off, "a JSON value of more than %zu MiB; refused", PIECE_MAX >> 20);
        /*
         * The input ends inside the value (or inside its last token, "tr" or "1."): a file
         * cut short by a writer that died, rather than a broken one.
         */
        if (L->events_started && (json_error_code(&e) == json_error_premature_end_of_input ||
                                  (at >= L->len && L->text[L->len - 1] != ']' && L->text[L->len - 1] != '}')))
                return TRUNCATED;
        return fail_at(L, -EINVAL, at > off ? at - 1 : off, "%s", e.text);
}

/* @v as nanoseconds: an integer, a real or a numeric string of microseconds within range. */
static bool time_of(const json_t *v, int64_t *ret_ns)
{
        double us;

        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);
                if (i > (json_int_t) NPF_TRACE_TIME_MAX_US || i < -(json_int_t) NPF_TRACE_TIME_MAX_US)
                        return false;
                *ret_ns = (int64_t) i * 1000;
                return true;
        }
        if (json_is_real(v)) {
                us = json_real_value(v);
        } else if (json_is_string(v)) {
                /* Digits, sign, point and exponent only: no "inf", "nan", hex or spaces. */
                const char *s = json_string_value(v);
                size_t len = json_string_length(v);
                char buf[64], *end;
                if (len == 0 || len >= sizeof(buf) || strspn(s, "0123456789+-.eE") != len)
                        return false;
                memcpy(buf, s, len + 1);
                us = strtod(buf, &end);
                if (*end)
                        return false;
        } else {
                return false;
        }
        if (!(fabs(us) <= NPF_TRACE_TIME_MAX_US))
                return false;
        *ret_ns = (int64_t) llround(us * 1000.0);
        return true;
}

/* A pid or tid: an integer or a string; missing is 0. Return: 0, -EINVAL (neither), -ENOMEM, -E2BIG. */
static int key_of(npf_trace_t *t, const json_t *v, tkey_t *ret)
{
        if (!v || json_is_integer(v)) {
                *ret = (tkey_t) { .num = v ? json_integer_value(v) : 0, .str = NONE };
                return 0;
        }
        if (!json_is_string(v))
                return -EINVAL;
        uint32_t s;
        int r = intern(t, json_string_value(v), &s);
        if (r < 0)
                return r;
        *ret = (tkey_t) { .num = 0, .str = s };
        return 0;
}

/* The thread of @ev. Return: 0, -EINVAL (a pid or tid of another type), -ENOMEM, -E2BIG. */
static int thread_of(loader_t *L, const json_t *ev, uint32_t *ret)
{
        tkey_t pid, tid;
        int r;

        if ((r = key_of(L->t, json_object_get(ev, "pid"), &pid)) < 0 ||
            (r = key_of(L->t, json_object_get(ev, "tid"), &tid)) < 0)
                return r;
        if (L->last_thread == NONE || !key_eq(pid, L->last_pid) || !key_eq(tid, L->last_tid)) {
                if ((r = thread_get(L->t, pid, tid, &L->last_thread)) < 0)
                        return r;
                L->last_pid = pid;
                L->last_tid = tid;
        }
        *ret = L->last_thread;
        return 0;
}

/* An "M" event: process_name and thread_name name things; the others are ignored. */
static int metadata(loader_t *L, const json_t *ev, size_t off)
{
        npf_trace_t *t = L->t;
        const char *what = json_string_value(json_object_get(ev, "name"));
        const char *name = json_string_value(json_object_get(json_object_get(ev, "args"), "name"));
        bool process = what && strcmp(what, "process_name") == 0;
        uint32_t n, thread = 0, *p = NULL;
        tkey_t pid;
        int r;

        if (!what || !name || (!process && strcmp(what, "thread_name") != 0)) {
                t->ignored++;
                return 0;
        }
        if (process) {
                r = key_of(t, json_object_get(ev, "pid"), &pid);
                if (r == 0)
                        r = proc_get(t, pid, &p);
        } else {
                r = thread_of(L, ev, &thread);
        }
        if (r == -EINVAL)
                return malformed(L, off, "has a pid or tid that is neither an integer nor a string");
        if (r < 0 || (r = intern(t, name, &n)) < 0)
                return r;
        if (process)
                *p = n;
        else
                t->threads[thread].name = n;
        return 0;
}

static int add_span(npf_trace_t *t, int64_t start, int64_t end, bool open, uint32_t name, uint32_t thread,
                    uint32_t seq)
{
        if (grow((void **) &t->spans, &t->cap_spans, t->n_spans, sizeof(span_t)) < 0)
                return -ENOMEM;
        t->spans[t->n_spans++] = (span_t) { .start = start, .end = end, .open = open, .name = name,
                                            .thread = thread, .seq = seq };
        return 0;
}

/*
 * A counter event: counted as ignored (it is in no tree), and where it is the host
 * backend's "memory" counter with a usable ts and an integer rss_kib, a sample of the
 * process's resident memory.
 */
static int counter(loader_t *L, const json_t *ev)
{
        npf_trace_t *t = L->t;
        const json_t *rss = json_object_get(json_object_get(ev, "args"), "rss_kib");
        const char *name = json_string_value(json_object_get(ev, "name"));
        int64_t ts;

        t->ignored++;
        if (!name || strcmp(name, "memory") != 0 || !json_is_integer(rss) || json_integer_value(rss) < 0 ||
            json_integer_value(rss) > (json_int_t) (UINT64_MAX >> 10) || !time_of(json_object_get(ev, "ts"), &ts))
                return 0;
        if (grow((void **) &t->rss_time_us, &t->cap_rss, t->n_rss, sizeof(double)) < 0 ||
            grow((void **) &t->rss_bytes, &t->cap_rss_bytes, t->n_rss, sizeof(uint64_t)) < 0)
                return -ENOMEM;
        t->rss_time_us[t->n_rss] = (double) ts / 1e3;
        t->rss_bytes[t->n_rss++] = (uint64_t) json_integer_value(rss) << 10;
        return 0;
}

/* One element of traceEvents, which starts at byte @off. */
static int event(loader_t *L, const json_t *ev, size_t off)
{
        npf_trace_t *t = L->t;
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        uint32_t seq = (uint32_t) L->elements, thread, name;
        int64_t ts, dur = 0;
        int r;

        if (!ph) {
                t->ignored++;
                return 0;
        }
        L->any_ph = true;
        if (ph[0] == 'C' && !ph[1])
                return counter(L, ev);
        if (!ph[0] || ph[1] || !strchr("XBEiIRM", ph[0])) {
                t->ignored++;
                return 0;
        }
        if (ph[0] == 'M')
                return metadata(L, ev, off);
        r = thread_of(L, ev, &thread);
        if (r == -EINVAL)
                return malformed(L, off, "has a pid or tid that is neither an integer nor a string");
        if (r < 0)
                return r;
        if (!time_of(json_object_get(ev, "ts"), &ts))
                return malformed(L, off, "has no usable \"ts\" (microseconds, at most 3e15)");
        if (ph[0] == 'E') {
                if (grow((void **) &t->edges, &t->cap_edges, t->n_edges, sizeof(edge_t)) < 0)
                        return -ENOMEM;
                t->edges[t->n_edges++] = (edge_t) { .ts = ts, .thread = thread, .seq = seq, .end = true };
                return 0;
        }
        const json_t *jname = json_object_get(ev, "name"), *jdur = json_object_get(ev, "dur");
        if (jname && !json_is_string(jname))
                return malformed(L, off, "has a \"name\" that is not a string");
        if (ph[0] == 'X' && jdur && (!time_of(jdur, &dur) || dur < 0))
                return malformed(L, off, "has a \"dur\" that is not a number of microseconds >= 0");
        if ((r = intern(t, jname ? json_string_value(jname) : "", &name)) < 0)
                return r;
        if (ph[0] == 'B') {
                if (grow((void **) &t->edges, &t->cap_edges, t->n_edges, sizeof(edge_t)) < 0)
                        return -ENOMEM;
                t->edges[t->n_edges++] = (edge_t) { .ts = ts, .name = name, .thread = thread, .seq = seq };
                return 0;
        }
        /* "X" with or without "dur"; instants are zero long. */
        return add_span(t, ts, ts + dur, ph[0] == 'X' && !jdur, name, thread, seq);
}

static void report_progress(loader_t *L)
{
        if (L->progress && L->pos >= L->next_progress) {
                L->progress(L->userdata, L->pos, L->len);
                L->next_progress = L->pos + NPF_INPUT_PROGRESS_EVERY;
        }
}

/* The events array; L->pos is at its '['. Return: 0, TRUNCATED, or a negative errno. */
static int events(loader_t *L)
{
        L->pos++;
        L->events_started = true;
        skip_ws(L);
        if (at_end(L))
                return TRUNCATED;
        if (L->text[L->pos] == ']') {
                L->pos++;
                return 0;
        }
        for (;;) {
                size_t off = L->pos;
                json_t *ev;
                int r;

                if (L->elements >= NPF_TRACE_EVENTS_MAX)
                        return fail_at(L, -E2BIG, off, "more than %u events; at most that many are read",
                                       NPF_TRACE_EVENTS_MAX);
                if ((r = value(L, &ev)) != 0)
                        return r;
                if (!json_is_object(ev)) {
                        r = L->any_ph ? -EINVAL : -ENOMSG;
                        fail_at(L, r, off, "element %zu of the events is %s, not an event object%s", L->elements,
                                json_kind(ev), L->any_ph ? "" : ": not a Chrome trace");
                        json_decref(ev);
                        return r;
                }
                r = event(L, ev, off);
                json_decref(ev);
                if (r == -ENOMEM)
                        return fail_at(L, r, off, "out of memory after %zu events", L->elements);
                if (r < 0)
                        return fail_at(L, r, off, "event %zu cannot be kept: %s", L->elements, strerror(-r));
                L->elements++;
                if (!L->any_ph && L->elements >= NOT_TRACE_AFTER)
                        return fail_at(L, -ENOMSG, off, "none of the first %u elements has a \"ph\": not a Chrome trace",
                                       NOT_TRACE_AFTER);
                report_progress(L);
                skip_ws(L);
                if (at_end(L))
                        return TRUNCATED;
                if (L->text[L->pos] == ']') {
                        L->pos++;
                        return 0;
                }
                if (L->text[L->pos] != ',')
                        return fail_at(L, -EINVAL, L->pos, "',' or ']' expected after event %zu", L->elements - 1);
                L->pos++;
                skip_ws(L);
                if (at_end(L))
                        return TRUNCATED;
        }
}

/* The object form; L->pos is at its '{'. Return: 0, TRUNCATED, or a negative errno. */
static int object(loader_t *L)
{
        bool found = false;
        int r;

        L->pos++;
        skip_ws(L);
        if (at_end(L))
                return early_end(L, "a key or '}'");
        if (L->text[L->pos] == '}') {
                L->pos++;
                goto done;
        }
        for (;;) {
                size_t off = L->pos;
                json_t *key, *v;

                if (L->text[off] != '"')
                        return fail_at(L, -EINVAL, off, "a key string expected");
                if ((r = value(L, &key)) != 0)
                        return r;
                bool events_key = strcmp(json_string_value(key), "traceEvents") == 0;
                json_decref(key);
                skip_ws(L);
                if (at_end(L))
                        return early_end(L, "':'");
                if (L->text[L->pos] != ':')
                        return fail_at(L, -EINVAL, L->pos, "':' expected after a key");
                L->pos++;
                skip_ws(L);
                if (at_end(L))
                        return early_end(L, "a value");
                off = L->pos;
                if (events_key && found)
                        return fail_at(L, -EINVAL, off, "\"traceEvents\" appears twice");
                if (events_key && L->text[off] == '[') {
                        found = true;
                        if ((r = events(L)) != 0)
                                return r;
                } else {
                        if ((r = value(L, &v)) != 0)
                                return r;
                        const char *kind = json_kind(v);
                        json_decref(v);
                        if (events_key)
                                return fail_at(L, -EINVAL, off, "\"traceEvents\" is %s, not an array of events", kind);
                }
                skip_ws(L);
                if (at_end(L))
                        return early_end(L, "',' or '}'");
                if (L->text[L->pos] == '}') {
                        L->pos++;
                        break;
                }
                if (L->text[L->pos] != ',')
                        return fail_at(L, -EINVAL, L->pos, "',' or '}' expected");
                L->pos++;
                skip_ws(L);
                if (at_end(L))
                        return early_end(L, "a key");
        }
done:
        if (!found) {
                snprintf(L->err, NPF_TRACE_ERR_MAX, "a JSON object without \"traceEvents\": not a Chrome trace");
                return -ENOMSG;
        }
        return 0;
}

/* The whole document. Return: 0, TRUNCATED, or a negative errno. */
static int document(loader_t *L)
{
        json_t *v;
        int r;

        if (L->len >= 3 && memcmp(L->text, "\xef\xbb\xbf", 3) == 0)
                L->pos = 3;
        skip_ws(L);
        if (at_end(L)) {
                snprintf(L->err, NPF_TRACE_ERR_MAX, "the input is empty: no JSON value");
                return -EINVAL;
        }
        if (L->text[L->pos] == '[')
                r = events(L);
        else if (L->text[L->pos] == '{')
                r = object(L);
        else if ((r = value(L, &v)) == 0) {
                snprintf(L->err, NPF_TRACE_ERR_MAX, "the JSON document is %s: not a Chrome trace", json_kind(v));
                json_decref(v);
                return -ENOMSG;
        }
        if (r != 0)
                return r;
        skip_ws(L);
        if (!at_end(L))
                return fail_at(L, -EINVAL, L->pos, "the end of the file expected after the trace");
        return 0;
}

/* --- the analysis ---------------------------------------------------------------------- */

/* By thread, then by time; 0 when both are equal. */
static int cmp_thread_time(uint32_t thread_a, int64_t a, uint32_t thread_b, int64_t b)
{
        if (thread_a != thread_b)
                return thread_a < thread_b ? -1 : 1;
        return a < b ? -1 : a > b;
}

static int cmp_edge(const void *a, const void *b)
{
        const edge_t *x = a, *y = b;
        int c = cmp_thread_time(x->thread, x->ts, y->thread, y->ts);

        return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Pair every "E" with the latest open "B" of its thread, in time order; lone "B"s stay open. */
static int pair_edges(npf_trace_t *t)
{
        uint32_t *stack = NULL;
        size_t depth = 0;
        int r = 0;

        if (t->n_edges == 0)
                return 0;
        qsort(t->edges, t->n_edges, sizeof(edge_t), cmp_edge);
        stack = malloc(t->n_edges * sizeof(*stack));
        if (!stack)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_edges && r == 0; i++) {
                const edge_t *e = &t->edges[i];
                if (i > 0 && e->thread != t->edges[i - 1].thread) {
                        while (depth > 0 && r == 0) {
                                const edge_t *b = &t->edges[stack[--depth]];
                                r = add_span(t, b->ts, b->ts, true, b->name, b->thread, b->seq);
                        }
                }
                if (!e->end) {
                        stack[depth++] = (uint32_t) i;
                } else if (depth == 0) {
                        t->unmatched_ends++;
                } else {
                        const edge_t *b = &t->edges[stack[--depth]];
                        r = add_span(t, b->ts, e->ts, false, b->name, b->thread, b->seq);
                }
        }
        while (depth > 0 && r == 0) {
                const edge_t *b = &t->edges[stack[--depth]];
                r = add_span(t, b->ts, b->ts, true, b->name, b->thread, b->seq);
        }
        free(stack);
        free(t->edges);
        t->edges = NULL;
        t->n_edges = t->cap_edges = 0;
        return r;
}

/* Per thread, by start; an open span (it will borrow its parent's end) before a closed one, longer first. */
static int cmp_span(const void *a, const void *b)
{
        const span_t *x = a, *y = b;
        int c = cmp_thread_time(x->thread, x->start, y->thread, y->start);

        if (c)
                return c;
        if (x->open != y->open)
                return x->open ? -1 : 1;
        if (!x->open && x->end != y->end)
                return x->end > y->end ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

typedef struct frame {
        const span_t *s;
        int64_t children;               /* ns covered by the children (they never overlap) */
} frame_t;

static void pop(npf_trace_t *t, const frame_t *f)
{
        name_t *n = &t->names[f->s->name];

        n->self_ns = sat_add(n->self_ns, f->s->end - f->s->start - f->children);
        n->open--;
}

/* Nest the spans of one thread, t->spans[@from .. @to), with @stack room for all of them. */
static int nest(npf_trace_t *t, size_t from, size_t to, frame_t *stack, step_t **steps, size_t *n_steps,
                size_t *cap_steps)
{
        thread_t *th = &t->threads[t->spans[from].thread];
        int64_t end = INT64_MIN;
        size_t depth = 0;

        for (size_t i = from; i < to; i++) {
                const span_t *s = &t->spans[i];
                int64_t e = s->open ? s->start : s->end;
                end = e > end ? e : end;
        }
        th->start = t->spans[from].start;
        th->end = end;
        for (size_t i = from; i < to; i++) {
                span_t *s = &t->spans[i];
                while (depth > 0 && stack[depth - 1].s->end <= s->start)
                        pop(t, &stack[--depth]);
                int64_t limit = depth > 0 ? stack[depth - 1].s->end : end;
                if (s->open) {
                        s->end = limit;
                        th->borrowed++;
                } else if (depth > 0 && s->end > limit) {
                        s->end = limit;
                        th->clipped++;
                }
                int64_t dur = s->end - s->start;
                if (depth > 0)
                        stack[depth - 1].children += dur;
                stack[depth++] = (frame_t) { .s = s };
                name_t *n = &t->names[s->name];
                n->count++;
                if (n->open++ == 0)
                        n->total_ns = sat_add(n->total_ns, dur);
                th->events++;
                if (n->step >= 0) {
                        if (grow((void **) steps, cap_steps, *n_steps, sizeof(step_t)) < 0)
                                return -ENOMEM;
                        (*steps)[(*n_steps)++] = (step_t) {
                                .s = { .step = n->step, .start_us = (double) s->start / 1e3, .dur_us = (double) dur / 1e3 },
                                .thread = s->thread,
                        };
                        if (th->steps++ == 0)
                                th->first_step = s->start;
                }
        }
        while (depth > 0)
                pop(t, &stack[--depth]);
        return 0;
}

static int cmp_step(const void *a, const void *b)
{
        const npf_trace_step_t *x = a, *y = b;

        if (x->step != y->step)
                return x->step < y->step ? -1 : 1;
        return x->start_us < y->start_us ? -1 : x->start_us > y->start_us;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *) a, y = *(const double *) b;

        return x < y ? -1 : x > y;
}

/* Keep the steps of the thread with the most of them, in step order, and their figures. */
static int pick_steps(npf_trace_t *t, const step_t *all, size_t n)
{
        uint32_t best = NONE;

        for (size_t i = 0; i < t->n_threads; i++) {
                const thread_t *th = &t->threads[i];
                if (th->steps && (best == NONE || th->steps > t->threads[best].steps ||
                                  (th->steps == t->threads[best].steps && th->first_step < t->threads[best].first_step)))
                        best = (uint32_t) i;
        }
        if (best == NONE)
                return 0;
        size_t k = t->threads[best].steps;
        t->steps = malloc(k * sizeof(*t->steps));
        double *d = malloc(k * sizeof(*d));
        if (!t->steps || !d) {
                free(d);
                return -ENOMEM;
        }
        t->step_thread = best;
        for (size_t i = 0; i < n; i++)
                if (all[i].thread == best)
                        t->steps[t->n_steps++] = all[i].s;
        qsort(t->steps, k, sizeof(*t->steps), cmp_step);
        for (size_t i = 0; i < k; i++)
                d[i] = t->steps[i].dur_us;
        qsort(d, k, sizeof(*d), cmp_double);
        t->stats = (npf_trace_step_stats_t) {
                .n = k,
                .median_us = k % 2 ? d[k / 2] : (d[k / 2 - 1] + d[k / 2]) / 2,
                .p90_us = d[(size_t) ceil(0.9 * (double) k) - 1],
                .max_us = d[k - 1],
        };
        free(d);
        return 0;
}

static int analyse(npf_trace_t *t)
{
        frame_t *stack = NULL;
        step_t *steps = NULL;
        size_t n_steps = 0, cap_steps = 0;
        int r;

        if ((r = pair_edges(t)) < 0)
                return r;
        for (size_t i = 0; i < t->n_threads && t->n_procs; i++) {
                uint32_t *p;
                if ((r = proc_get(t, t->threads[i].pid, &p)) < 0)
                        return r;
                t->threads[i].process = *p;
        }
        t->events = t->n_spans;
        if (t->n_spans == 0)
                return 0;
        qsort(t->spans, t->n_spans, sizeof(span_t), cmp_span);
        stack = malloc(t->n_spans * sizeof(*stack));
        if (!stack)
                return -ENOMEM;
        t->start = INT64_MAX;
        t->end = INT64_MIN;
        for (size_t from = 0, to; from < t->n_spans && r == 0; from = to) {
                for (to = from + 1; to < t->n_spans && t->spans[to].thread == t->spans[from].thread; to++)
                        ;
                r = nest(t, from, to, stack, &steps, &n_steps, &cap_steps);
                const thread_t *th = &t->threads[t->spans[from].thread];
                t->start = th->start < t->start ? th->start : t->start;
                t->end = th->end > t->end ? th->end : t->end;
        }
        if (r == 0)
                r = pick_steps(t, steps, n_steps);
        free(steps);
        free(stack);
        free(t->spans);
        t->spans = NULL;
        t->n_spans = t->cap_spans = 0;
        return r;
}

int npf_trace_load(const void *buf, size_t len, npf_input_progress_cb progress, void *userdata,
                   npf_trace_t **ret_trace, char *err)
{
        npf_trace_t *t = calloc(1, sizeof(*t));
        int r;

        err[0] = '\0';
        if (!t) {
                snprintf(err, NPF_TRACE_ERR_MAX, "out of memory");
                return -ENOMEM;
        }
        t->step_thread = NONE;
        t->in = npf_intern_new();
        if (!t->in) {
                free(t);
                snprintf(err, NPF_TRACE_ERR_MAX, "out of memory");
                return -ENOMEM;
        }
        loader_t L = {
                .t = t, .text = buf, .len = len, .progress = progress, .userdata = userdata,
                .next_progress = NPF_INPUT_PROGRESS_EVERY, .last_thread = NONE, .err = err,
        };
        r = document(&L);
        if (r == TRUNCATED) {
                t->truncated = true;
                r = 0;
        }
        if (r == 0 && L.elements > 0 && !L.any_ph) {
                snprintf(err, NPF_TRACE_ERR_MAX, "none of the %zu elements has a \"ph\": not a Chrome trace",
                         L.elements);
                r = -ENOMSG;
        }
        if (r < 0)
                goto fail;
        if ((r = analyse(t)) < 0) {
                snprintf(err, NPF_TRACE_ERR_MAX, "out of memory analysing %zu events", L.elements);
                goto fail;
        }
        if (progress)
                progress(userdata, len, len);
        *ret_trace = t;
        return 0;
fail:
        npf_trace_free(t);
        return r;
}

int npf_trace_load_file(const char *path, npf_input_progress_cb progress, void *userdata,
                        npf_trace_t **ret_trace, char *err)
{
        void *map;
        size_t len;
        int r = npf_input_map(path, &map, &len, err, NPF_TRACE_ERR_MAX);

        if (r < 0)
                return r;
        r = npf_trace_load(map, len, progress, userdata, ret_trace, err);
        npf_input_unmap(map, len);
        return r;
}

npf_trace_t *npf_trace_free(npf_trace_t *t)
{
        if (!t)
                return NULL;
        npf_intern_free(t->in);
        free(t->names);
        free(t->threads);
        free(t->procs);
        free(t->spans);
        free(t->edges);
        free(t->steps);
        free(t->rss_time_us);
        free(t->rss_bytes);
        free(t);
        return NULL;
}

size_t npf_trace_rss(const npf_trace_t *t, const double **ret_time_us, const uint64_t **ret_bytes)
{
        *ret_time_us = t->rss_time_us;
        *ret_bytes = t->rss_bytes;
        return t->n_rss;
}

size_t npf_trace_steps(const npf_trace_t *t, const npf_trace_step_t **ret_steps)
{
        *ret_steps = t->steps;
        return t->n_steps;
}

void npf_trace_step_stats(const npf_trace_t *t, npf_trace_step_stats_t *ret_stats)
{
        *ret_stats = t->stats;
}

/* --- reports ---------------------------------------------------------------------------- */

/* An operator: the figures and the name. */
typedef struct op {
        const name_t *n;
        const char *s;
} op_t;

/* Most self (or total) time first, ties by name. */
static int cmp_self(const void *a, const void *b)
{
        const op_t *x = a, *y = b;

        if (x->n->self_ns != y->n->self_ns)
                return x->n->self_ns > y->n->self_ns ? -1 : 1;
        return strcmp(x->s, y->s);
}

static int cmp_total(const void *a, const void *b)
{
        const op_t *x = a, *y = b;

        if (x->n->total_ns != y->n->total_ns)
                return x->n->total_ns > y->n->total_ns ? -1 : 1;
        return strcmp(x->s, y->s);
}

/* The operators, sorted by @cmp: names with spans, steps aside. Return: their number, or -ENOMEM. */
static ssize_t ranked(const npf_trace_t *t, int (*cmp)(const void *, const void *), op_t **ret)
{
        op_t *v = malloc((t->n_names ? t->n_names : 1) * sizeof(*v));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_names; i++)
                if (t->names[i].count && t->names[i].step < 0)
                        v[n++] = (op_t) { &t->names[i], str(t, (uint32_t) i) };
        qsort(v, n, sizeof(*v), cmp);
        *ret = v;
        return (ssize_t) n;
}

static double us(int64_t ns)
{
        return (double) ns / 1e3;
}

static json_t *key_json(const npf_trace_t *t, tkey_t k)
{
        return k.str == NONE ? json_integer(k.num) : json_string(str(t, k.str));
}

static json_t *name_json(const npf_trace_t *t, uint32_t name)
{
        return name == NONE ? json_null() : json_string(str(t, name));
}

static json_t *top_json(const npf_trace_t *t, int (*cmp)(const void *, const void *), size_t top_n)
{
        op_t *v;
        ssize_t n = ranked(t, cmp, &v);
        json_t *a = n < 0 ? NULL : json_array();

        if (!a) {
                if (n >= 0)
                        free(v);
                return NULL;
        }
        for (size_t i = 0; i < (size_t) n && i < top_n; i++) {
                const name_t *o = v[i].n;
                if (json_array_append_new(a, json_pack("{s:s, s:I, s:f, s:f}", "name", v[i].s, "count",
                                                       (json_int_t) o->count, "self_us", us(o->self_ns), "total_us",
                                                       us(o->total_ns))) < 0) {
                        json_decref(a);
                        a = NULL;
                        break;
                }
        }
        free(v);
        return a;
}

static json_t *us_or_null(bool known, double v)
{
        return known ? json_real(v) : json_null();
}

json_t *npf_trace_report_json(const npf_trace_t *t, size_t top_n)
{
        json_t *threads = json_array(), *steps = json_array(), *step_thread = json_null();
        bool any = t->events > 0, failed = !threads || !steps;

        for (size_t i = 0; i < t->n_threads && !failed; i++) {
                const thread_t *th = &t->threads[i];
                if (!th->events)
                        continue;
                failed = json_array_append_new(threads, json_pack(
                        "{s:o, s:o, s:o, s:o, s:I, s:f, s:f, s:I, s:I}", "pid", key_json(t, th->pid), "tid",
                        key_json(t, th->tid), "process", name_json(t, th->process), "name",
                        name_json(t, th->name), "events", (json_int_t) th->events, "start_us", us(th->start),
                        "span_us", us(th->end - th->start), "clipped", (json_int_t) th->clipped, "borrowed_ends",
                        (json_int_t) th->borrowed)) < 0;
        }
        for (size_t i = 0; i < t->n_steps && !failed; i++)
                failed = json_array_append_new(steps, json_pack("{s:I, s:f, s:f}", "step", (json_int_t) t->steps[i].step,
                                                                "start_us", t->steps[i].start_us, "dur_us",
                                                                t->steps[i].dur_us)) < 0;
        if (t->step_thread != NONE)
                step_thread = json_pack("{s:o, s:o}", "pid", key_json(t, t->threads[t->step_thread].pid), "tid",
                                        key_json(t, t->threads[t->step_thread].tid));
        json_t *r = failed ? NULL : json_pack(
                "{s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                "events", (json_int_t) t->events, "ignored", (json_int_t) t->ignored, "malformed",
                (json_int_t) t->malformed, "unmatched_ends", (json_int_t) t->unmatched_ends, "names_truncated",
                (json_int_t) t->names_truncated, "truncated", t->truncated, "start_us", us_or_null(any, us(t->start)),
                "end_us", us_or_null(any, us(t->end)), "threads", json_incref(threads), "top_self",
                top_json(t, cmp_self, top_n), "top_total", top_json(t, cmp_total, top_n), "steps", json_incref(steps),
                "step_thread", json_incref(step_thread), "step_median_us", us_or_null(t->n_steps, t->stats.median_us),
                "step_p90_us", us_or_null(t->n_steps, t->stats.p90_us), "step_max_us",
                us_or_null(t->n_steps, t->stats.max_us));
        if (r && t->n_rss) {
                size_t peak = 0;
                for (size_t i = 1; i < t->n_rss; i++)
                        if (t->rss_bytes[i] > t->rss_bytes[peak])
                                peak = i;
                if (json_object_set_new(r, "rss", json_pack("{s:I, s:I, s:f}", "samples", (json_int_t) t->n_rss,
                                                            "peak_bytes", (json_int_t) t->rss_bytes[peak],
                                                            "peak_time_us", t->rss_time_us[peak])) < 0) {
                        json_decref(r);
                        r = NULL;
                }
        } else if (r && json_object_set_new(r, "rss", json_null()) < 0) {
                json_decref(r);
                r = NULL;
        }
        if (r && t->malformed && json_object_set_new(r, "first_malformed", json_string(t->first_malformed)) < 0) {
                json_decref(r);
                r = NULL;
        }
        json_decref(threads);
        json_decref(steps);
        json_decref(step_thread);
        return r;
}

/* @ns for a person: "812.0 us", "4.27 ms", "1.50 s". */
static const char *dur_text(int64_t ns, char *buf, size_t size)
{
        double v = (double) ns / 1e3;

        if (fabs(v) < 1e3)
                snprintf(buf, size, "%.1f us", v);
        else if (fabs(v) < 1e6)
                snprintf(buf, size, "%.2f ms", v / 1e3);
        else
                snprintf(buf, size, "%.2f s", v / 1e6);
        return buf;
}

/* @s with control characters replaced: a name must not break a table's line. */
static void put_clean(FILE *f, const char *s)
{
        for (; *s; s++)
                fputc((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

/* The columns a pid or tid takes. */
static int key_width(const npf_trace_t *t, tkey_t k)
{
        char buf[32];

        if (k.str == NONE)
                return snprintf(buf, sizeof(buf), "%" PRId64, k.num);
        size_t n = strlen(str(t, k.str));
        return n < 64 ? (int) n : 64;
}

/* A pid or tid, left-aligned in @width columns. */
static void put_key(FILE *f, const npf_trace_t *t, tkey_t k, int width)
{
        if (k.str == NONE) {
                fprintf(f, "%-*" PRId64, width, k.num);
                return;
        }
        int pad = width - key_width(t, k);
        put_clean(f, str(t, k.str));
        fprintf(f, "%*s", pad > 0 ? pad : 0, "");
}

static int text_top(FILE *f, const npf_trace_t *t, const char *what, int (*cmp)(const void *, const void *),
                    size_t top_n)
{
        char a[32], b[32];
        op_t *v;
        ssize_t n = ranked(t, cmp, &v);

        if (n < 0)
                return -ENOMEM;
        if (n == 0 || top_n == 0) {
                free(v);
                return 0;
        }
        fprintf(f, "\nTop %zu operators by %s time\n  %12s %12s %10s  name\n", top_n < (size_t) n ? top_n : (size_t) n,
                what, "self", "total", "count");
        for (size_t i = 0; i < (size_t) n && i < top_n; i++) {
                fprintf(f, "  %12s %12s %10" PRIu64 "  ", dur_text(v[i].n->self_ns, a, sizeof(a)),
                        dur_text(v[i].n->total_ns, b, sizeof(b)), v[i].n->count);
                put_clean(f, v[i].s[0] ? v[i].s : "(no name)");
                fputc('\n', f);
        }
        free(v);
        return 0;
}

int npf_trace_report_text(const npf_trace_t *t, FILE *f, size_t top_n)
{
        char a[32], b[32], c[32];
        size_t shown = 0;

        fprintf(f, "Trace: %" PRIu64 " events", t->events);
        if (t->events)
                fprintf(f, " over %s", dur_text(t->end - t->start, a, sizeof(a)));
        fprintf(f, "%s\n", t->truncated ? " (the file is cut short: what came before the cut was read)" : "");
        if (t->ignored || t->malformed || t->unmatched_ends || t->names_truncated)
                fprintf(f, "  %" PRIu64 " ignored (other kinds), %" PRIu64 " malformed, %" PRIu64
                        " ends without a begin, %" PRIu64 " names shortened\n",
                        t->ignored, t->malformed, t->unmatched_ends, t->names_truncated);
        if (t->malformed)
                fprintf(f, "  first malformed: %s\n", t->first_malformed);

        int wp = 3, wt = 3;
        for (size_t i = 0; i < t->n_threads; i++) {
                if (!t->threads[i].events)
                        continue;
                int p = key_width(t, t->threads[i].pid), q = key_width(t, t->threads[i].tid);
                wp = p > wp ? p : wp;
                wt = q > wt ? q : wt;
        }
        fprintf(f, "\nThreads\n  %-*s %-*s %10s %12s %8s %8s  name\n", wp, "pid", wt, "tid", "events", "span",
                "clipped", "borrowed");
        for (size_t i = 0; i < t->n_threads; i++) {
                const thread_t *th = &t->threads[i];
                uint32_t p = th->process;
                if (!th->events)
                        continue;
                fputs("  ", f);
                put_key(f, t, th->pid, wp);
                fputc(' ', f);
                put_key(f, t, th->tid, wt);
                fprintf(f, " %10" PRIu64 " %12s %8" PRIu64 " %8" PRIu64 "  ", th->events,
                        dur_text(th->end - th->start, a, sizeof(a)), th->clipped, th->borrowed);
                if (p != NONE) {
                        put_clean(f, str(t, p));
                        fputs(th->name != NONE ? ": " : "", f);
                }
                if (th->name != NONE)
                        put_clean(f, str(t, th->name));
                fputc('\n', f);
        }

        if (text_top(f, t, "self", cmp_self, top_n) < 0 || text_top(f, t, "total", cmp_total, top_n) < 0)
                return -ENOMEM;

        if (t->n_steps) {
                const npf_trace_step_stats_t *s = &t->stats;
                fprintf(f, "\nSteps (ProfilerStep#N): %zu, median %s, p90 %s, longest %s\n  %10s %12s %12s\n",
                        t->n_steps, dur_text(llround(s->median_us * 1e3), a, sizeof(a)),
                        dur_text(llround(s->p90_us * 1e3), b, sizeof(b)),
                        dur_text(llround(s->max_us * 1e3), c, sizeof(c)), "step", "start", "duration");
                for (; shown < t->n_steps && shown < 100; shown++) {
                        const npf_trace_step_t *st = &t->steps[shown];
                        fprintf(f, "  %10" PRId64 " %12s %12s\n", st->step,
                                dur_text(llround(st->start_us * 1e3) - t->start, a, sizeof(a)),
                                dur_text(llround(st->dur_us * 1e3), b, sizeof(b)));
                }
                if (shown < t->n_steps)
                        fprintf(f, "  ... and %zu more in report.json\n", t->n_steps - shown);
        } else {
                fprintf(f, "\nSteps: no ProfilerStep#N spans\n");
        }
        return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}
