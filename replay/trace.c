/* SPDX-License-Identifier: MIT */
/*
 * Chrome trace analysis. The reader is the streaming scanner of replay/evscan.h: the file is
 * mapped a piece at a time and each piece unmapped once scanned, and each event handed over
 * is turned into a 32-byte span (or a B/E edge) while its bytes are still there, so that
 * neither the file nor its events are ever in memory whole. The analysis then sorts the
 * spans per thread and nests them with a stack.
 */
#include "replay/trace.h"
#include "replay/evscan.h"
#include "replay/input.h"
#include "lib/jsonpos.h"
#include "replay/intern.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NONE UINT32_MAX
#define CHUNK ((size_t) 4 << 20)        /* bytes fed to the scanner at a time */
#define NOT_TRACE_AFTER 64u             /* elements without "ph" before the input is no trace */
#define NO_OFFSET SIZE_MAX
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
        uint64_t device_events;         /* of them, a device's by their category */
        int64_t start, end;
        uint64_t steps;                 /* ProfilerStep spans on this thread */
        int64_t first_step;             /* the start of the first of them */
        bool npu;                       /* its process is labelled an NPU's */
        bool device;                    /* an accelerator's track (see trace.h) */
        struct span *spans;             /* its events, freed once nested */
        size_t n_spans, cap_spans;
} thread_t;

/* What the metadata says of a process. */
typedef struct proc {
        uint32_t name;                  /* process_name, NONE if none */
        bool npu;                       /* process_labels begins with "NPU" */
} proc_t;

/* One event of a tree. */
typedef struct span {
        int64_t start, end;             /* ns; end is meaningless while open */
        uint32_t name, thread;
        uint32_t seq;                   /* element index: the order of the file on ties */
        bool open;                      /* no end known: borrows its parent's */
        bool device;                    /* of a device's category (kernel, gpu_memcpy, ...) */
} span_t;

/* A "B" or an "E", before they are paired. */
typedef struct edge {
        int64_t ts;
        uint32_t name, thread, seq;
        bool end;
        bool device;
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
        proc_t *procs;                  /* by process key's index */
        size_t n_procs, cap_procs;
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
        npf_evscan_t *s;
        const char *text;               /* the whole input, or NULL when it is read from fd */
        int fd;
        size_t len;
        npf_input_progress_cb progress;
        void *userdata;
        size_t next_progress;
        size_t elements;                /* of the events array so far, objects or not */
        uint64_t scan_malformed;        /* the scanner's count of malformed elements, so far */
        bool any_ph;                    /* some element has a "ph" */
        tkey_t last_pid, last_tid;      /* the thread of the previous event, looked up again often */
        uint32_t last_thread;
        size_t m_offset;                /* where the first malformed event is, while not in its message */
        int failed;                     /* why the event callback stopped the scan */
        size_t fail_offset;             /* where, NO_OFFSET if nowhere */
        char fail[NPF_TRACE_ERR_MAX];   /* the message, without the place */
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

/*
 * The id of the name @s, valid UTF-8 without NUL, whose whole length is @len; past
 * NPF_TRACE_NAME_MAX it is shortened, and only its first NPF_TRACE_NAME_MAX bytes are read.
 */
static int intern_name(npf_trace_t *t, const char *s, size_t len, uint32_t *ret)
{
        static const char dots[] = "...";
        char buf[NPF_TRACE_NAME_MAX + 1];

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

/* Whether the @n bytes at @p are ASCII without control characters and backslashes: a word
 * at a time, since kernels' names are long. */
static bool plain(const char *p, size_t n)
{
        const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
        size_t i = 0;

        for (; i + 8 <= n; i += 8) {
                uint64_t w, b;
                memcpy(&w, p + i, 8);
                b = w ^ (ones * '\\');
                /* A byte >= 0x80, one < 0x20, one that is a backslash. */
                if ((w | ((w - ones * 0x20) & ~w) | ((b - ones) & ~b)) & highs)
                        return false;
        }
        for (; i < n; i++)
                if ((unsigned char) p[i] < 0x20 || (unsigned char) p[i] >= 0x80 || p[i] == '\\')
                        return false;
        return true;
}

/*
 * The id of the raw JSON string contents @s. Printable ASCII without a backslash, what names
 * nearly always are, is interned as it lies; anything else is decoded first, a bad escape or
 * byte turned into U+FFFD, so that every name is valid UTF-8 without NUL.
 */
static int intern_raw(npf_trace_t *t, npf_evscan_str_t s, uint32_t *ret)
{
        char buf[NPF_TRACE_NAME_MAX + 1];

        if (plain(s.p, s.n))
                return intern_name(t, s.n ? s.p : "", s.n, ret);
        /* The buffer holds at least NPF_TRACE_NAME_MAX - 3 bytes of a longer name: enough. */
        return intern_name(t, buf, npf_evscan_unescape(s, buf, sizeof(buf)), ret);
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

/* The process of @pid, added if new. */
static int proc_get(npf_trace_t *t, tkey_t pid, proc_t **ret)
{
        uint32_t id;
        int r = key_id(t, 'P', pid, (tkey_t) { 0 }, &id);

        if (r < 0)
                return r;
        if (t->names[id].entry == NONE) {
                if (grow((void **) &t->procs, &t->cap_procs, t->n_procs, sizeof(proc_t)) < 0)
                        return -ENOMEM;
                t->procs[t->n_procs] = (proc_t) { .name = NONE };
                t->names[id].entry = (uint32_t) t->n_procs++;
        }
        *ret = &t->procs[t->names[id].entry];
        return 0;
}

/* --- reading ---------------------------------------------------------------------------- */

/*
 * The 1-based line and column (in bytes) of byte @offset of the input. Only a message needs
 * them, so they are counted afresh, from the start of the input (read again from the file,
 * whose pages were dropped as it was scanned).
 */
static void place(const loader_t *L, size_t offset, uint32_t *ret_line, uint32_t *ret_column)
{
        size_t pos = 0, line_start = 0, size = (size_t) 1 << 20;
        uint64_t lines = 0;
        char *buf;

        if (L->text) {
                npf_jsonpos_line_column(L->text, L->len, offset, ret_line, ret_column);
                return;
        }
        if (!(buf = malloc(size))) {
                *ret_line = *ret_column = 0;
                return;
        }
        while (pos < offset) {
                ssize_t n = pread(L->fd, buf, offset - pos < size ? offset - pos : size, (off_t) pos);
                if (n <= 0)
                        break;
                for (const char *p = buf, *end = buf + n; (p = memchr(p, '\n', (size_t) (end - p))); ) {
                        lines++;
                        line_start = pos + (size_t) (++p - buf);
                }
                pos += (size_t) n;
        }
        free(buf);
        *ret_line = lines + 1 > UINT32_MAX ? UINT32_MAX : (uint32_t) (lines + 1);
        *ret_column = offset - line_start + 1 > UINT32_MAX ? UINT32_MAX : (uint32_t) (offset - line_start + 1);
}

/* @msg prefixed with the place of @offset into @buf (NPF_TRACE_ERR_MAX bytes). */
static void placed(const loader_t *L, size_t offset, const char *msg, char *buf)
{
        char tmp[NPF_TRACE_ERR_MAX];
        uint32_t line, column;
        size_t n, k = strlen(msg);

        /* @msg may be @buf itself: kept aside, then cut to what fits after the place. */
        memcpy(tmp, msg, k + 1);
        place(L, offset, &line, &column);
        n = (size_t) snprintf(buf, NPF_TRACE_ERR_MAX, "line %" PRIu32 ", column %" PRIu32 ": ", line, column);
        k = k < NPF_TRACE_ERR_MAX - 1 - n ? k : NPF_TRACE_ERR_MAX - 1 - n;
        memcpy(buf + n, tmp, k);
        buf[n + k] = '\0';
}

/* Stop the scan from the event callback, with a message placed at @offset once it has stopped. */
static int stop(loader_t *L, int r, size_t offset, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int stop(loader_t *L, int r, size_t offset, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(L->fail, sizeof(L->fail), fmt, ap);
        va_end(ap);
        L->failed = r;
        L->fail_offset = offset;
        return r;
}

/* Count a skipped event, element @index at @offset; the first one is described (and placed
 * once the input is read). */
static void malformed(loader_t *L, size_t index, size_t offset, const char *what)
{
        npf_trace_t *t = L->t;

        if (t->malformed++ == 0) {
                snprintf(t->first_malformed, sizeof(t->first_malformed), "event %zu %s; skipped", index, what);
                L->m_offset = offset;
        }
}

/*
 * @n elements that are not objects, which the scanner skipped since the last event: counted
 * as malformed. When the first of them is the first malformed element, it is also the
 * scanner's first (every element the scanner counts as malformed is one here), which the
 * scanner has described and placed.
 */
static void non_objects(loader_t *L, const npf_evscan_stats_t *st, uint64_t n)
{
        npf_trace_t *t = L->t;

        if (t->malformed == 0) {
                snprintf(t->first_malformed, sizeof(t->first_malformed), "%s", st->first_malformed);
                L->m_offset = NO_OFFSET;
        }
        t->malformed += n;
        L->elements += (size_t) n;
}

static bool is_ws(char c)
{
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The end of the JSON value at @p in well-formed text that ends before @end. */
static const char *value_end(const char *p, const char *end)
{
        size_t depth = 0;
        bool in_string = false;

        if (p < end && *p != '"' && *p != '{' && *p != '[') {
                while (p < end && *p != ',' && *p != '}' && *p != ']' && !is_ws(*p))
                        p++;
                return p;
        }
        for (; p < end; p++) {
                if (in_string) {
                        if (*p == '\\')
                                p++;
                        else if (*p == '"' && (in_string = false, depth == 0))
                                return p + 1;
                } else if (*p == '"') {
                        in_string = true;
                } else if (*p == '{' || *p == '[') {
                        depth++;
                } else if ((*p == '}' || *p == ']') && --depth == 0) {
                        return p + 1;
                }
        }
        return end;
}

/*
 * The raw text of the value of @key in the object @obj, which the scanner has read (so it is
 * well-formed): keys compared as raw bytes, the last of duplicates, as the scanner takes them.
 * Return: whether there is one, and where in *@ret (a string keeps its quotes).
 */
static bool member(npf_evscan_str_t obj, const char *key, npf_evscan_str_t *ret)
{
        const char *p = obj.p, *end = obj.p + obj.n;
        size_t klen = strlen(key);
        bool found = false;

        if (!p || obj.n < 2 || *p != '{')
                return false;
        for (p++; p < end;) {
                while (p < end && (is_ws(*p) || *p == ','))
                        p++;
                if (p >= end || *p != '"')
                        break;
                const char *k = p + 1, *q = value_end(p, end);
                bool match = q - k == (ptrdiff_t) klen + 1 && memcmp(k, key, klen) == 0;
                for (p = q; p < end && (is_ws(*p) || *p == ':'); p++)
                        ;
                q = value_end(p, end);
                if (match) {
                        *ret = (npf_evscan_str_t) { p, (size_t) (q - p) };
                        found = true;
                }
                p = q;
        }
        return found;
}

/* Bits of the fields of an event whose value is there but not usable. */
enum { BAD_TS = 1, BAD_DUR = 2, BAD_PID = 4, BAD_TID = 8 };

/* Which fields of @ev the scanner found unusable: those it hands over absent, yet present. */
static unsigned unusable(const npf_evscan_event_t *ev)
{
        npf_evscan_str_t v;
        unsigned bad = 0;

        if (!ev->has_ts && member(ev->raw, "ts", &v))
                bad |= BAD_TS;
        if (!ev->has_dur && member(ev->raw, "dur", &v))
                bad |= BAD_DUR;
        if (!ev->has_pid && !ev->pid_str.p && member(ev->raw, "pid", &v))
                bad |= BAD_PID;
        if (!ev->has_tid && !ev->tid_str.p && member(ev->raw, "tid", &v))
                bad |= BAD_TID;
        return bad;
}

static const char *unusable_text(unsigned bad)
{
        if (bad & (BAD_PID | BAD_TID))
                return "has a pid or tid that is neither an integer nor a string";
        if (bad & BAD_TS)
                return "has no usable \"ts\" (microseconds, at most 3e15)";
        return "has a \"dur\" that is not a number of microseconds >= 0";
}

/* A pid or tid: an integer, a string, or 0 when it is missing. */
static int key_of(npf_trace_t *t, bool has, int64_t num, npf_evscan_str_t s, tkey_t *ret)
{
        uint32_t id;
        int r;

        if (has || !s.p) {
                *ret = (tkey_t) { .num = has ? num : 0, .str = NONE };
                return 0;
        }
        if ((r = intern_raw(t, s, &id)) < 0)
                return r;
        *ret = (tkey_t) { .num = 0, .str = id };
        return 0;
}

/* The thread of @ev. Return: 0, -ENOMEM, -E2BIG. */
static int thread_of(loader_t *L, const npf_evscan_event_t *ev, uint32_t *ret)
{
        tkey_t pid, tid;
        int r;

        if ((r = key_of(L->t, ev->has_pid, ev->pid, ev->pid_str, &pid)) < 0 ||
            (r = key_of(L->t, ev->has_tid, ev->tid, ev->tid_str, &tid)) < 0)
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

/* The string value of @key in @args: its raw contents, quotes off. */
static bool arg_string(npf_evscan_str_t args, const char *key, npf_evscan_str_t *ret)
{
        npf_evscan_str_t v;

        /* A string's contents come after its opening quote; any other value after ':' or a space. */
        if (!args.p || !npf_evscan_get(args, key, &v) || v.p == args.p || v.p[-1] != '"')
                return false;
        *ret = v;
        return true;
}

/* An "M" event: process_name, thread_name and process_labels; other metadata is ignored. */
static int metadata(loader_t *L, const npf_evscan_event_t *ev)
{
        npf_trace_t *t = L->t;
        bool process = npf_evscan_eq(ev->name, "process_name"), labels = npf_evscan_eq(ev->name, "process_labels");
        npf_evscan_str_t value;
        uint32_t n, thread;
        proc_t *p;
        tkey_t pid;
        int r;

        if ((!process && !labels && !npf_evscan_eq(ev->name, "thread_name")) ||
            !arg_string(ev->args, labels ? "labels" : "name", &value)) {
                t->ignored++;
                return 0;
        }
        if (process || labels) {
                if ((r = key_of(t, ev->has_pid, ev->pid, ev->pid_str, &pid)) < 0 || (r = proc_get(t, pid, &p)) < 0)
                        return r;
                if (labels) {
                        /* torch_npu's and MindSpore's device processes: "NPU", "NPU 0". Read, yet
                         * counted as ignored: it names nothing. */
                        p->npu = value.n >= 3 && memcmp(value.p, "NPU", 3) == 0;
                        t->ignored++;
                        return 0;
                }
                if ((r = intern_raw(t, value, &n)) < 0)
                        return r;
                p->name = n;
                return 0;
        }
        if ((r = thread_of(L, ev, &thread)) < 0 || (r = intern_raw(t, value, &n)) < 0)
                return r;
        t->threads[thread].name = n;
        return 0;
}

static int add_span(npf_trace_t *t, int64_t start, int64_t end, bool open, uint32_t name, uint32_t thread,
                    uint32_t seq, bool device)
{
        thread_t *th = &t->threads[thread];

        if (grow((void **) &th->spans, &th->cap_spans, th->n_spans, sizeof(span_t)) < 0)
                return -ENOMEM;
        th->spans[th->n_spans++] = (span_t) { .start = start, .end = end, .open = open, .name = name,
                                              .thread = thread, .seq = seq, .device = device };
        return 0;
}

static int add_edge(npf_trace_t *t, int64_t ts, uint32_t name, uint32_t thread, uint32_t seq, bool end,
                    bool device)
{
        if (grow((void **) &t->edges, &t->cap_edges, t->n_edges, sizeof(edge_t)) < 0)
                return -ENOMEM;
        t->edges[t->n_edges++] = (edge_t) { .ts = ts, .name = name, .thread = thread, .seq = seq, .end = end,
                                            .device = device };
        return 0;
}

/* A JSON integer (no string, fraction or exponent) from 0 to @max. */
static bool uint_of(npf_evscan_str_t v, uint64_t max, uint64_t *ret)
{
        uint64_t n = 0;

        if (v.n == 0 || v.p[-1] == '"')
                return false;
        for (size_t i = 0; i < v.n; i++) {
                unsigned d = (unsigned) (v.p[i] - '0');
                if (d > 9 || n > (max - d) / 10)
                        return false;
                n = n * 10 + d;
        }
        *ret = n;
        return true;
}

/*
 * A counter event: counted as ignored (it is in no tree), and where it is the host
 * backend's "memory" counter with a usable ts and an integer rss_kib, a sample of the
 * process's resident memory.
 */
static int counter(loader_t *L, const npf_evscan_event_t *ev)
{
        npf_trace_t *t = L->t;
        npf_evscan_str_t v;
        uint64_t kib;

        t->ignored++;
        if (!npf_evscan_eq(ev->name, "memory") || !ev->has_ts || !ev->args.p ||
            !npf_evscan_get(ev->args, "rss_kib", &v) || v.p == ev->args.p ||
            !uint_of(v, UINT64_MAX >> 10, &kib))
                return 0;
        if (grow((void **) &t->rss_time_us, &t->cap_rss, t->n_rss, sizeof(double)) < 0 ||
            grow((void **) &t->rss_bytes, &t->cap_rss_bytes, t->n_rss, sizeof(uint64_t)) < 0)
                return -ENOMEM;
        t->rss_time_us[t->n_rss] = (double) ev->ts_ns / 1e3;
        t->rss_bytes[t->n_rss++] = kib << 10;
        return 0;
}

/* Whether @cat is one of Kineto's categories of what a GPU ran. */
static bool device_category(npf_evscan_str_t cat)
{
        if (!cat.p || cat.n < 6)
                return false;
        if (cat.p[0] == 'k')
                return npf_evscan_eq(cat, "kernel");
        return cat.p[0] == 'g' && (npf_evscan_eq(cat, "gpu_memcpy") || npf_evscan_eq(cat, "gpu_memset") ||
                                   npf_evscan_eq(cat, "gpu_user_annotation"));
}

/* One event, element @seq of the events; @bad: its unusable fields. */
static int event(loader_t *L, const npf_evscan_event_t *ev, unsigned bad, uint32_t seq)
{
        npf_trace_t *t = L->t;
        char ph = ev->ph;
        npf_evscan_str_t v;
        uint32_t thread, name;
        int64_t dur = 0;
        int r;

        /* An empty "ph" is one too: the element is an event of no known phase. */
        if (ph || (!L->any_ph && member(ev->raw, "ph", &v) && v.n > 0 && v.p[0] == '"'))
                L->any_ph = true;
        if (bad) {
                malformed(L, seq, ev->offset, unusable_text(bad));
                return 0;
        }
        switch (ph) {
        case 'X': case 'B': case 'E': case 'i': case 'I': case 'R':
                break;
        case 'C':
                return counter(L, ev);
        case 'M':
                return metadata(L, ev);
        default:
                t->ignored++;
                return 0;
        }
        if (!ev->has_ts) {
                malformed(L, seq, ev->offset, unusable_text(BAD_TS));
                return 0;
        }
        if ((r = thread_of(L, ev, &thread)) < 0)
                return r;
        bool device = device_category(ev->cat);
        if (ph == 'E')
                return add_edge(t, ev->ts_ns, 0, thread, seq, true, device);
        if (!ev->name.p && member(ev->raw, "name", &v)) {
                malformed(L, seq, ev->offset, "has a \"name\" that is not a string");
                return 0;
        }
        if (ph == 'X' && ev->has_dur) {
                if (ev->dur_ns < 0) {
                        malformed(L, seq, ev->offset, unusable_text(BAD_DUR));
                        return 0;
                }
                dur = ev->dur_ns;
        }
        if ((r = intern_raw(t, ev->name, &name)) < 0)
                return r;
        if (ph == 'B')
                return add_edge(t, ev->ts_ns, name, thread, seq, false, device);
        /* "X" with or without "dur"; instants are zero long. */
        return add_span(t, ev->ts_ns, ev->ts_ns + dur, ph == 'X' && !ev->has_dur, name, thread, seq, device);
}

/* The scanner's callback: every element of the events that is an object, in order. */
static int on_event(void *userdata, const npf_evscan_event_t *ev)
{
        loader_t *L = userdata;
        npf_evscan_stats_t st;
        unsigned bad = 0;
        int r;

        /* The scanner counts as malformed the elements it skipped and the events whose ts,
         * dur, pid or tid it hands over absent, being unusable: which of them this one is, is
         * worked out only when its count has moved. */
        npf_evscan_stats(L->s, &st);
        if (st.malformed != L->scan_malformed) {
                uint64_t n = st.malformed - L->scan_malformed;
                L->scan_malformed = st.malformed;
                if ((bad = unusable(ev)) != 0 && n > 0)
                        n--;
                if (n > 0)
                        non_objects(L, &st, n);
        }
        if (L->elements >= NPF_TRACE_EVENTS_MAX)
                return stop(L, -E2BIG, ev->offset, "more than %u events; at most that many are read",
                            NPF_TRACE_EVENTS_MAX);
        size_t seq = L->elements++;
        if ((r = event(L, ev, bad, (uint32_t) seq)) == -ENOMEM)
                return stop(L, r, ev->offset, "out of memory after %zu events", seq);
        if (r < 0)
                return stop(L, r, ev->offset, "event %zu cannot be kept: %s", seq, strerror(-r));
        if (!L->any_ph && L->elements >= NOT_TRACE_AFTER)
                return stop(L, -ENOMSG, ev->offset, "none of the first %u elements has a \"ph\": not a Chrome trace",
                            NOT_TRACE_AFTER);
        return 0;
}

/* Feed the input's @len bytes at @p, which end at offset @done, and report progress. */
static int feed(loader_t *L, const void *p, size_t len, size_t done, char *msg)
{
        int r = npf_evscan_feed(L->s, p, len, msg);

        if (r == 0 && L->progress && done >= L->next_progress && done < L->len) {
                L->progress(L->userdata, done, L->len);
                L->next_progress = done + NPF_INPUT_PROGRESS_EVERY;
        }
        return r;
}

/* The file open at L->fd, mapped a piece at a time, each piece dropped once scanned. */
static int feed_file(loader_t *L, char *msg)
{
        int r = 0;

        for (size_t off = 0; off < L->len && r == 0; off += CHUNK) {
                size_t n = L->len - off < CHUNK ? L->len - off : CHUNK;
                void *map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, L->fd, (off_t) off);
                if (map == MAP_FAILED) {
                        r = -errno;
                        snprintf(msg, NPF_EVSCAN_ERR_MAX, "cannot map the bytes from %zu: %s", off, strerror(-r));
                        return r;
                }
                /* Its pages mapped in one call rather than a fault each, and read ahead. */
                (void) madvise(map, n, MADV_POPULATE_READ);
                (void) madvise(map, n, MADV_SEQUENTIAL);
                r = feed(L, map, n, off + n, msg);
                munmap(map, n);
        }
        return r;
}

/*
 * Scan the whole input and keep its events. Return: 0, or a negative errno with a sentence
 * in @err. An input that ends early once the events have begun is marked truncated.
 */
static int scan(loader_t *L, char *err)
{
        npf_trace_t *t = L->t;
        char msg[NPF_EVSCAN_ERR_MAX] = "";
        npf_evscan_stats_t st;
        bool fed = false;
        int r = 0;

        if (!(L->s = npf_evscan_new(on_event, NULL, L))) {
                snprintf(err, NPF_TRACE_ERR_MAX, "out of memory");
                return -ENOMEM;
        }
        if (L->text) {
                for (size_t off = 0, n; off < L->len && r == 0; off += n) {
                        n = L->len - off < CHUNK ? L->len - off : CHUNK;
                        r = feed(L, L->text + off, n, off + n, msg);
                }
        } else {
                r = feed_file(L, msg);
        }
        if (r == 0) {
                fed = true;
                r = npf_evscan_finish(L->s, msg);
        }
        if (L->failed) {
                if (L->fail_offset == NO_OFFSET)
                        snprintf(err, NPF_TRACE_ERR_MAX, "%s", L->fail);
                else
                        placed(L, L->fail_offset, L->fail, err);
                return L->failed;
        }
        npf_evscan_stats(L->s, &st);
        /* The end of input once the events began, after their array too: a writer that died. */
        if (r == -EINVAL && fed && st.events_array && strstr(msg, ": the document ends "))
                st.truncated = true, r = 0;
        if (r < 0) {
                snprintf(err, NPF_TRACE_ERR_MAX, "%s", msg[0] ? msg : strerror(-r));
                return r;
        }
        t->truncated = st.truncated;
        if (st.malformed != L->scan_malformed) {
                uint64_t n = st.malformed - L->scan_malformed;
                L->scan_malformed = st.malformed;
                non_objects(L, &st, n);
        }
        if (L->elements > 0 && !L->any_ph) {
                snprintf(err, NPF_TRACE_ERR_MAX, "none of the %zu elements has a \"ph\": not a Chrome trace",
                         L->elements);
                return -ENOMSG;
        }
        if (t->malformed && L->m_offset != NO_OFFSET)
                placed(L, L->m_offset, t->first_malformed, t->first_malformed);
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
                                r = add_span(t, b->ts, b->ts, true, b->name, b->thread, b->seq, b->device);
                        }
                }
                if (!e->end) {
                        stack[depth++] = (uint32_t) i;
                } else if (depth == 0) {
                        t->unmatched_ends++;
                } else {
                        const edge_t *b = &t->edges[stack[--depth]];
                        r = add_span(t, b->ts, e->ts, false, b->name, b->thread, b->seq, b->device);
                }
        }
        while (depth > 0 && r == 0) {
                const edge_t *b = &t->edges[stack[--depth]];
                r = add_span(t, b->ts, b->ts, true, b->name, b->thread, b->seq, b->device);
        }
        free(stack);
        free(t->edges);
        t->edges = NULL;
        t->n_edges = t->cap_edges = 0;
        return r;
}

/* By start; an open span (it will borrow its parent's end) before a closed one, longer first. */
static inline int cmp_span_inline(const span_t *x, const span_t *y)
{
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        if (x->open != y->open)
                return x->open ? -1 : 1;
        if (!x->open && x->end != y->end)
                return x->end > y->end ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Merge the sorted @na spans at @a and @nb at @b into @out. */
static void merge(const span_t *a, size_t na, const span_t *b, size_t nb, span_t *out)
{
        size_t i = 0, j = 0;

        while (i < na && j < nb)
                *out++ = cmp_span_inline(&b[j], &a[i]) < 0 ? b[j++] : a[i++];
        memcpy(out, a + i, (na - i) * sizeof(*a));
        memcpy(out + (na - i), b + j, (nb - j) * sizeof(*b));
}

/*
 * Sort the @n spans at @v, with @tmp room for as many and @runs for n + 1 offsets: a merge
 * sort of the runs already in order, since a thread's events come mostly in order (kineto's
 * runs average dozens of events, a parent written after its children ending one).
 */
static void sort_spans(span_t *v, size_t n, span_t *tmp, size_t *runs)
{
        span_t *src = v, *dst = tmp;
        size_t k = 0;

        runs[k++] = 0;
        for (size_t i = 1; i < n; i++)
                if (cmp_span_inline(&v[i - 1], &v[i]) > 0)
                        runs[k++] = i;
        runs[k] = n;
        if (k == 1)
                return;
        /* k runs, run i at [runs[i], runs[i + 1]); each pass merges them in pairs. */
        while (k > 1) {
                size_t m = 0;
                for (size_t i = 0; i < k; i += 2) {
                        size_t a = runs[i], b = runs[i + 1], c = i + 2 <= k ? runs[i + 2] : b;
                        merge(src + a, b - a, src + b, c - b, dst + a);
                        runs[m++] = a;
                }
                runs[m] = n;
                k = m;
                span_t *x = src;
                src = dst;
                dst = x;
        }
        if (src != v)
                memcpy(v, src, n * sizeof(*v));
}

typedef struct frame {
        const span_t *s;
        int64_t children;               /* ns covered by the children (they never overlap) */
        bool op;                        /* the host's: its name's figures count it */
} frame_t;

static void pop(npf_trace_t *t, const frame_t *f)
{
        name_t *n = &t->names[f->s->name];

        if (!f->op)
                return;
        n->self_ns = sat_add(n->self_ns, f->s->end - f->s->start - f->children);
        n->open--;
}

/* Nest the spans of thread @th, sorted, with @stack room for all of them. */
static int nest(npf_trace_t *t, thread_t *th, frame_t *stack, step_t **steps, size_t *n_steps, size_t *cap_steps)
{
        int64_t end = INT64_MIN;
        size_t depth = 0;

        for (size_t i = 0; i < th->n_spans; i++) {
                const span_t *s = &th->spans[i];
                int64_t e = s->open ? s->start : s->end;
                end = e > end ? e : end;
        }
        th->start = th->spans[0].start;
        th->end = end;
        for (size_t i = 0; i < th->n_spans; i++) {
                span_t *s = &th->spans[i];
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
                bool op = !s->device && !th->npu;
                if (depth > 0)
                        stack[depth - 1].children += dur;
                stack[depth++] = (frame_t) { .s = s, .op = op };
                name_t *n = &t->names[s->name];
                if (op) {
                        n->count++;
                        if (n->open++ == 0)
                                n->total_ns = sat_add(n->total_ns, dur);
                }
                th->events++;
                th->device_events += s->device;
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
        th->device = th->npu || th->device_events == th->events;
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

/*
 * Keep the steps of the thread with the most of them, in step order, and their figures:
 * a host thread's where one has steps, not a device's copy of the annotation.
 */
static int pick_steps(npf_trace_t *t, const step_t *all, size_t n)
{
        uint32_t best = NONE;
        bool host = false;

        for (size_t i = 0; i < t->n_threads; i++)
                host |= t->threads[i].steps && !t->threads[i].device;
        for (size_t i = 0; i < t->n_threads; i++) {
                const thread_t *th = &t->threads[i];
                if (th->steps && !(host && th->device) && (best == NONE || th->steps > t->threads[best].steps ||
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
        span_t *sorted = NULL;
        step_t *steps = NULL;
        size_t *runs = NULL, n_steps = 0, cap_steps = 0, most = 0;
        int r;

        if ((r = pair_edges(t)) < 0)
                return r;
        for (size_t i = 0; i < t->n_threads && t->n_procs; i++) {
                proc_t *p;
                if ((r = proc_get(t, t->threads[i].pid, &p)) < 0)
                        return r;
                t->threads[i].process = p->name;
                t->threads[i].npu = p->npu;
        }
        for (size_t i = 0; i < t->n_threads; i++) {
                t->events += t->threads[i].n_spans;
                most = t->threads[i].n_spans > most ? t->threads[i].n_spans : most;
        }
        if (t->events == 0)
                return 0;
        stack = malloc(most * sizeof(*stack));
        sorted = malloc(most * sizeof(*sorted));
        runs = malloc((most + 1) * sizeof(*runs));
        if (!stack || !sorted || !runs) {
                free(stack);
                free(sorted);
                free(runs);
                return -ENOMEM;
        }
        t->start = INT64_MAX;
        t->end = INT64_MIN;
        for (size_t i = 0; i < t->n_threads && r == 0; i++) {
                thread_t *th = &t->threads[i];
                if (th->n_spans == 0)
                        continue;
                sort_spans(th->spans, th->n_spans, sorted, runs);
                r = nest(t, th, stack, &steps, &n_steps, &cap_steps);
                t->start = th->start < t->start ? th->start : t->start;
                t->end = th->end > t->end ? th->end : t->end;
                free(th->spans);
                th->spans = NULL;
                th->n_spans = th->cap_spans = 0;
        }
        if (r == 0)
                r = pick_steps(t, steps, n_steps);
        free(steps);
        free(stack);
        free(sorted);
        free(runs);
        return r;
}

/* Read and analyse the input that @L says where to find. */
static int load(loader_t *L, npf_trace_t **ret_trace, char *err)
{
        npf_trace_t *t = calloc(1, sizeof(*t));
        int r;

        err[0] = '\0';
        if (!t || !(t->in = npf_intern_new())) {
                free(t);
                snprintf(err, NPF_TRACE_ERR_MAX, "out of memory");
                return -ENOMEM;
        }
        t->step_thread = NONE;
        L->t = t;
        L->next_progress = NPF_INPUT_PROGRESS_EVERY;
        L->last_thread = NONE;
        L->m_offset = NO_OFFSET;
        r = scan(L, err);
        L->s = npf_evscan_free(L->s);
        if (r < 0)
                goto fail;
        if ((r = analyse(t)) < 0) {
                snprintf(err, NPF_TRACE_ERR_MAX, "out of memory analysing %zu events", L->elements);
                goto fail;
        }
        if (L->progress)
                L->progress(L->userdata, L->len, L->len);
        *ret_trace = t;
        return 0;
fail:
        npf_trace_free(t);
        return r;
}

int npf_trace_load(const void *buf, size_t len, npf_input_progress_cb progress, void *userdata,
                   npf_trace_t **ret_trace, char *err)
{
        loader_t L = { .text = buf, .fd = -1, .len = len, .progress = progress, .userdata = userdata };

        return load(&L, ret_trace, err);
}

int npf_trace_load_file(const char *path, npf_input_progress_cb progress, void *userdata,
                        npf_trace_t **ret_trace, char *err)
{
        loader_t L = { .progress = progress, .userdata = userdata };
        struct stat st;
        int r;

        if ((L.fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
                r = -errno;
                snprintf(err, NPF_TRACE_ERR_MAX, "cannot open %.180s: %s", path, strerror(-r));
                return r;
        }
        if (fstat(L.fd, &st) < 0) {
                r = -errno;
                snprintf(err, NPF_TRACE_ERR_MAX, "cannot stat %.180s: %s", path, strerror(-r));
        } else if (!S_ISREG(st.st_mode) || st.st_size == 0) {
                r = -EINVAL;
                snprintf(err, NPF_TRACE_ERR_MAX, "%.180s: %s", path,
                         S_ISREG(st.st_mode) ? "the file is empty" : "not a regular file");
        } else {
                L.len = (size_t) st.st_size;
                r = load(&L, ret_trace, err);
        }
        close(L.fd);
        return r;
}

npf_trace_t *npf_trace_free(npf_trace_t *t)
{
        if (!t)
                return NULL;
        npf_intern_free(t->in);
        free(t->names);
        for (size_t i = 0; i < t->n_threads; i++)
                free(t->threads[i].spans);
        free(t->threads);
        free(t->procs);
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
                        "{s:o, s:o, s:o, s:o, s:I, s:f, s:f, s:I, s:I, s:b}", "pid", key_json(t, th->pid), "tid",
                        key_json(t, th->tid), "process", name_json(t, th->process), "name",
                        name_json(t, th->name), "events", (json_int_t) th->events, "start_us", us(th->start),
                        "span_us", us(th->end - th->start), "clipped", (json_int_t) th->clipped, "borrowed_ends",
                        (json_int_t) th->borrowed, "device", th->device)) < 0;
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
                fputs(th->device ? (p != NONE || th->name != NONE ? " (device)" : "(device)") : "", f);
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
