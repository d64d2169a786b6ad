/* SPDX-License-Identifier: MIT */
#include "daemon/analyze.h"
#include "lib/clock.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct run run_t;

/* What is known of one window's analysis. window_id 0: a free entry. */
typedef struct record {
        uint64_t window_id;
        uint64_t seq;                   /* order of arrival, to reuse the oldest finished entry */
        uint32_t state;
        uint64_t started_ns, ended_ns;  /* CLOCK_MONOTONIC; 0 when it never ran */
        char *dir;                      /* until it has run */
        char *outdir;                   /* likewise; NULL: dir/analysis */
        uid_t uid;                      /* the analyzer's user, (uid_t) -1: the daemon's */
        gid_t gid;
        char *report;                   /* done */
        char *reason;                   /* failed */
        json_t *answers;                /* the report's answers (summary.json), or NULL */
        char **more;                    /* a cluster's: the window directories after dir, until it has run */
        size_t n_more;
        run_t *run;                     /* running */
} record_t;

/* One child: its process, its wall-clock timer and its stderr, freed once all three are closed. */
struct run {
        npf_analyze_t *a;
        record_t *rec;
        char *outdir;
        char *report;                   /* outdir/report.json */
        struct stat before;             /* of report.json before the child ran; st_ino 0: none */
        uv_process_t proc;
        uv_timer_t timer;
        uv_pipe_t err;
        int handles;                    /* still open */
        bool exited, eof, timed_out, finished;
        int spawn_error;
        int64_t exit_status;
        int term_signal;
        size_t tail_len;
        char tail[NPF_ANALYZE_TAIL_MAX];
};

struct npf_analyze {
        uv_loop_t *loop;
        npf_analyze_options_t opt;
        char *analyzer;                 /* opt.analyzer points here */
        npf_analyze_event_cb cb;
        void *data;
        record_t records[NPF_ANALYZE_KEPT];
        record_t *queue[NPF_ANALYZE_QUEUE_MAX];   /* a ring, oldest at head */
        unsigned q_head, q_len;
        unsigned running;
        unsigned runs;                  /* run_t alive, closing ones included */
        uint64_t seq;
        uint64_t done, failed, dropped;
        bool closing, pumping;
        char rbuf[16384];
};

static const char *state_name(uint32_t state)
{
        switch (state) {
        case NPF_ANALYSIS_QUEUED: return "queued";
        case NPF_ANALYSIS_RUNNING: return "running";
        case NPF_ANALYSIS_DONE: return "done";
        case NPF_ANALYSIS_FAILED: return "failed";
        default: return "unknown";
        }
}

/* --- words -------------------------------------------------------------------------------- */

int npf_analyze_parse_bytes(const char *s, uint64_t *ret)
{
        static const char units[] = "KMGT";
        unsigned shift = 0;
        char *end;

        if (!s || !isdigit((unsigned char) s[0]))
                return -EINVAL;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end) {
                const char *u = strchr(units, toupper((unsigned char) *end));
                if (u) {
                        shift = 10u * (unsigned) (u - units + 1);
                        end++;
                        if (strcasecmp(end, "iB") == 0)
                                end += 2;
                }
                if (strcasecmp(end, "B") == 0)
                        end++;
                if (*end)
                        return -EINVAL;
        }
        if (v > (uint64_t) INT64_MAX >> shift)
                return -ERANGE;
        *ret = (uint64_t) v << shift;
        return 0;
}

void npf_analyze_format_bytes(uint64_t bytes, char *buf, size_t len)
{
        static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        unsigned u = 0;

        if (bytes < 1024) {
                snprintf(buf, len, "%" PRIu64 " byte%s", bytes, bytes == 1 ? "" : "s");
                return;
        }
        while (u + 1 < sizeof(units) / sizeof(units[0]) && bytes >= UINT64_C(1024) << (10 * (u + 1)))
                u++;
        snprintf(buf, len, "%.1f %s", (double) bytes / (double) (UINT64_C(1024) << (10 * u)), units[u]);
}

/* Return: the length of the valid UTF-8 sequence at @s (at most @n bytes), or 0 if there is none. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
        size_t len;
        unsigned char lo = 0x80, hi = 0xbf;

        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                len = 2;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                len = 3;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                len = 4;
        else
                return 0;
        if (len > n)
                return 0;
        /* No overlong forms, no surrogates, nothing above U+10FFFF. */
        if (s[0] == 0xe0)
                lo = 0xa0;
        else if (s[0] == 0xed)
                hi = 0x9f;
        else if (s[0] == 0xf0)
                lo = 0x90;
        else if (s[0] == 0xf4)
                hi = 0x8f;
        if (s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < len; i++)
                if (s[i] < 0x80 || s[i] > 0xbf)
                        return 0;
        return len;
}

/*
 * The last non-empty line of @tail into @buf: control characters and bytes that are not
 * UTF-8 become '?', and a line too long for @buf ends in "...".
 */
static void last_line(const char *tail, size_t n, char *buf, size_t len)
{
        size_t end = n, start, o = 0;

        while (end > 0 && isspace((unsigned char) tail[end - 1]))
                end--;
        start = end;
        while (start > 0 && tail[start - 1] != '\n' && tail[start - 1] != '\r')
                start--;
        for (size_t i = start; i < end;) {
                const unsigned char *c = (const unsigned char *) tail + i;
                size_t k = utf8_sequence(c, end - i);
                if (k == 0 || c[0] < 0x20 || c[0] == 0x7f) {
                        c = (const unsigned char *) "?";
                        i++;
                        k = 1;
                } else {
                        i += k;
                }
                if (o + k + 4 > len) {
                        if (o + 4 <= len)
                                memcpy(buf + o, "...", 3), o += 3;
                        break;
                }
                memcpy(buf + o, c, k);
                o += k;
        }
        if (len)
                buf[o < len ? o : len - 1] = '\0';
}

/* Return: true if @tail says, in any of the ways allocators and runtimes do, that memory ran out. */
static bool says_out_of_memory(const char *tail, size_t n)
{
        static const char *const words[] = { "out of memory", "cannot allocate", "can't allocate",
                                             "could not allocate", "failed to allocate", "allocation failed",
                                             "failed to mmap", "bad_alloc", "memoryerror" };
        char low[NPF_ANALYZE_TAIL_MAX];

        if (!tail)
                return false;
        if (n > sizeof(low))
                tail += n - sizeof(low), n = sizeof(low);
        for (size_t i = 0; i < n; i++)
                low[i] = (char) tolower((unsigned char) tail[i]);
        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (memmem(low, n, words[i], strlen(words[i])))
                        return true;
        return false;
}

bool npf__analyze_reason(const npf_analyze_exit_t *e, const npf_analyze_options_t *opt, char *buf, size_t len)
{
        char line[NPF_ANALYZE_REASON_MAX], size[32];
        const char *base = opt->analyzer ? strrchr(opt->analyzer, '/') : NULL;
        const char *said = line;

        base = base ? base + 1 : opt->analyzer ? opt->analyzer : "";
        last_line(e->tail ? e->tail : "", e->tail ? e->tail_len : 0, line, sizeof(line));
        /* "npuprof-replay: report.json: cannot open: ..." says it without the program's name. */
        for (const char *name = base; said == line && name; name = name == base ? "npuprof-replay" : NULL)
                if (*name && strncmp(line, name, strlen(name)) == 0 && strncmp(line + strlen(name), ": ", 2) == 0)
                        said = line + strlen(name) + 2;

        if (e->spawn_error < 0)
                snprintf(buf, len, "cannot run %s: %s", opt->analyzer ? opt->analyzer : "the analyzer",
                         uv_strerror(e->spawn_error));
        else if (e->timed_out)
                snprintf(buf, len, "time limit of %" PRIu64 " s reached", opt->timeout_s);
        else if (e->term_signal == SIGXCPU)
                snprintf(buf, len, "CPU time limit of %" PRIu64 " s reached", opt->timeout_s);
        else if ((e->term_signal == 0 && e->exit_status == NPF_ANALYZE_EXIT_OOM) ||
                 says_out_of_memory(e->tail, e->tail_len)) {
                npf_analyze_format_bytes(opt->memory_bytes, size, sizeof(size));
                if (opt->memory_bytes)
                        snprintf(buf, len, "memory limit of %s reached", size);
                else
                        snprintf(buf, len, "out of memory%s%s", *said ? ": " : "", said);
        } else if (e->term_signal) {
                const char *what = strsignal(e->term_signal);
                snprintf(buf, len, "killed by signal %d (%s)", e->term_signal, what ? what : "unknown");
        } else if (e->exit_status == 0) {
                if (!e->report_missing) {
                        if (len)
                                buf[0] = '\0';
                        return false;
                }
                snprintf(buf, len, "the analyzer exited 0 but wrote no report.json");
        } else if (e->exit_status == 1 && *said) {
                snprintf(buf, len, "%s", said);
        } else if (e->exit_status == 2) {
                snprintf(buf, len, "the analyzer refused its command line%s%s", *said ? ": " : "", said);
        } else {
                snprintf(buf, len, "exit status %" PRId64 "%s%s", e->exit_status, *said ? ": " : ", nothing said on stderr",
                         said);
        }
        /* snprintf() may have cut a character in two: the text ends before it. */
        for (size_t i = 0, n = strlen(buf), k; i < n; i += k)
                if ((k = utf8_sequence((const unsigned char *) buf + i, n - i)) == 0) {
                        buf[i] = '\0';
                        break;
                }
        return true;
}

/* --- records -------------------------------------------------------------------------- */

static record_t *find(const npf_analyze_t *a, uint64_t window_id)
{
        for (unsigned i = 0; window_id && i < NPF_ANALYZE_KEPT; i++)
                if (a->records[i].window_id == window_id)
                        return (record_t *) &a->records[i];
        return NULL;
}

static void free_more(record_t *r)
{
        for (size_t i = 0; i < r->n_more; i++)
                free(r->more[i]);
        free(r->more);
        r->more = NULL;
        r->n_more = 0;
}

static void record_clear(record_t *r)
{
        free_more(r);
        free(r->dir);
        free(r->outdir);
        free(r->report);
        free(r->reason);
        json_decref(r->answers);
        memset(r, 0, sizeof(*r));
}

/* A free entry, or else the oldest finished one, emptied. Return: NULL when every entry is in use. */
static record_t *record_new(npf_analyze_t *a, uint64_t window_id)
{
        record_t *best = NULL;

        for (unsigned i = 0; i < NPF_ANALYZE_KEPT; i++) {
                record_t *r = &a->records[i];
                if (r->window_id == 0) {
                        best = r;
                        break;
                }
                if ((r->state == NPF_ANALYSIS_DONE || r->state == NPF_ANALYSIS_FAILED) && (!best || r->seq < best->seq))
                        best = r;
        }
        if (!best)
                return NULL;
        record_clear(best);
        best->window_id = window_id;
        best->seq = ++a->seq;
        return best;
}

static double elapsed_s(const record_t *r, uint64_t now_ns)
{
        uint64_t end = r->state == NPF_ANALYSIS_RUNNING ? now_ns : r->ended_ns;

        if (!r->started_ns || end < r->started_ns)
                return 0;
        return (double) ((end - r->started_ns) / 1000000u) / 1000.0;
}

/*
 * The answers npuprof-replay wrote beside @report: summary.json's "answers", strings only,
 * from a file of at most NPF_ANALYZE_SUMMARY_MAX bytes; NULL when there is none.
 */
static json_t *read_answers(const char *report)
{
        const char *slash = strrchr(report, '/');
        char path[PATH_MAX];
        struct stat st;
        json_t *s, *a, *out = NULL, *x;
        size_t i;

        if (!slash || snprintf(path, sizeof(path), "%.*s/summary.json", (int) (slash - report), report) >= (int) sizeof(path) ||
            stat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > NPF_ANALYZE_SUMMARY_MAX ||
            !(s = json_load_file(path, 0, NULL)))
                return NULL;
        a = json_object_get(s, "answers");
        if (json_is_array(a) && (out = json_array()))
                json_array_foreach (a, i, x)
                        if (json_is_string(x))
                                json_array_append(out, x);
        json_decref(s);
        return out;
}

/* Mark @r done or failed (with @reason); @report, which may be NULL, and @reason are copied. */
static void record_finish(npf_analyze_t *a, record_t *r, const char *report, const char *reason)
{
        r->ended_ns = npf_clock_ns(CLOCK_MONOTONIC);
        free_more(r);
        free(r->dir);
        free(r->outdir);
        r->dir = r->outdir = NULL;
        r->report = report ? strdup(report) : NULL;
        r->answers = report ? read_answers(report) : NULL;
        if (!reason) {
                r->state = NPF_ANALYSIS_DONE;
                a->done++;
        } else {
                r->state = NPF_ANALYSIS_FAILED;
                r->reason = strdup(reason);
                a->failed++;
        }
}

/* --- children ------------------------------------------------------------------------- */

static void pump(npf_analyze_t *a);
static void analyze_free(npf_analyze_t *a);

static void on_run_closed(uv_handle_t *h)
{
        run_t *run = h->data;
        npf_analyze_t *a = run->a;

        if (--run->handles > 0)
                return;
        free(run->outdir);
        free(run->report);
        free(run);
        if (--a->runs == 0 && a->closing)
                analyze_free(a);
}

static void close_handle(uv_handle_t *h)
{
        if (!uv_is_closing(h))
                uv_close(h, on_run_closed);
}

/* The child is over (or never ran) and its stderr read: record the outcome, start the next. */
static void finish(run_t *run)
{
        npf_analyze_t *a = run->a;
        record_t *rec = run->rec;
        char reason[NPF_ANALYZE_REASON_MAX];
        struct stat st;
        bool fresh;

        if (run->finished)
                return;
        run->finished = true;
        close_handle((uv_handle_t *) &run->proc);
        close_handle((uv_handle_t *) &run->timer);
        close_handle((uv_handle_t *) &run->err);
        a->running--;
        rec->run = NULL;

        npf_analyze_exit_t e = {
                .spawn_error = run->spawn_error,
                .exit_status = run->exit_status,
                .term_signal = run->term_signal,
                .timed_out = run->timed_out,
                .tail = run->tail,
                .tail_len = run->tail_len,
        };
        /*
         * A report of this run: one left by an earlier run does not count. The analyzer renames
         * its report into place, so a new one is a new file (no clock is compared: the output
         * root may be on a file server with a clock of its own).
         */
        fresh = stat(run->report, &st) == 0 && S_ISREG(st.st_mode) &&
                (st.st_ino != run->before.st_ino || st.st_dev != run->before.st_dev ||
                 st.st_mtim.tv_sec != run->before.st_mtim.tv_sec || st.st_mtim.tv_nsec != run->before.st_mtim.tv_nsec);
        e.report_missing = !fresh;
        npf_analysis_event_t ev = { .window_id = rec->window_id, .dir = rec->dir };
        if (npf__analyze_reason(&e, &a->opt, reason, sizeof(reason))) {
                ev.state = NPF_ANALYSIS_FAILED;
                ev.reason = reason;
                /* Status 1 with a report: what could be analysed is in it. */
                ev.report = fresh && e.exit_status == 1 && !e.term_signal ? run->report : NULL;
        } else {
                ev.state = NPF_ANALYSIS_DONE;
                ev.report = run->report;
        }
        ev.seconds = elapsed_s(rec, npf_clock_ns(CLOCK_MONOTONIC));
        if (a->cb)
                a->cb(&ev, a->data);
        record_finish(a, rec, ev.report, ev.reason);
        pump(a);
}

/* SIGKILL to the child's process group (it leads one): whatever it started goes with it. */
static void kill_group(run_t *run)
{
        if (kill(-run->proc.pid, SIGKILL) < 0)
                uv_process_kill(&run->proc, SIGKILL);
}

/* The wall-clock limit, or, once the child has exited, the end of the wait for its stderr's end. */
static void on_timer(uv_timer_t *t)
{
        run_t *run = t->data;

        if (run->exited) {
                finish(run);
                return;
        }
        /* The loop's clock is cached: a timer can fire a little before the limit has passed. */
        uint64_t limit_ns = run->a->opt.timeout_s * 1000000000u;
        uint64_t ran_ns = npf_clock_ns(CLOCK_MONOTONIC) - run->rec->started_ns;
        if (ran_ns < limit_ns) {
                uv_timer_start(&run->timer, on_timer, (limit_ns - ran_ns) / 1000000u + 1, 0);
                return;
        }
        run->timed_out = true;
        kill_group(run);
}

static void on_child_exit(uv_process_t *proc, int64_t exit_status, int term_signal)
{
        run_t *run = proc->data;

        run->exited = true;
        run->exit_status = exit_status;
        run->term_signal = term_signal;
        uv_timer_stop(&run->timer);
        /* A grandchild could hold stderr open: its end is waited for, but not for ever. */
        if (run->eof)
                finish(run);
        else
                uv_timer_start(&run->timer, on_timer, NPF_ANALYZE_GRACE_MS, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
        run_t *run = h->data;

        (void) suggested;
        *buf = uv_buf_init(run->a->rbuf, sizeof(run->a->rbuf));
}

/* Keep the last NPF_ANALYZE_TAIL_MAX bytes the child writes on stderr. */
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
        run_t *run = stream->data;
        size_t n = nread > 0 ? (size_t) nread : 0, keep;

        if (nread < 0) {
                run->eof = true;
                uv_read_stop(stream);
                if (run->exited)
                        finish(run);
                return;
        }
        if (n >= sizeof(run->tail)) {
                memcpy(run->tail, buf->base + n - sizeof(run->tail), sizeof(run->tail));
                run->tail_len = sizeof(run->tail);
                return;
        }
        keep = run->tail_len + n > sizeof(run->tail) ? sizeof(run->tail) - n : run->tail_len;
        memmove(run->tail, run->tail + run->tail_len - keep, keep);
        memcpy(run->tail + keep, buf->base, n);
        run->tail_len = keep + n;
}

/* "@dir/@name" in a new string, or NULL. */
static char *join(const char *dir, const char *name)
{
        char *s;

        return asprintf(&s, "%s/%s", dir, name) < 0 ? NULL : s;
}

/* Start the analysis of @rec in a child. */
static void start(npf_analyze_t *a, record_t *rec)
{
        run_t *run = calloc(1, sizeof(*run));
        char nice[16], cpu[32], mem[32], wait[32];
        int r;

        if (run) {
                run->outdir = rec->outdir ? strdup(rec->outdir) : join(rec->dir, "analysis");
                run->report = run->outdir ? join(run->outdir, "report.json") : NULL;
        }
        if (!run || !run->report) {
                if (run)
                        free(run->outdir);
                free(run);
                record_finish(a, rec, NULL, "out of memory in the daemon");
                return;
        }
        if (stat(run->report, &run->before) < 0)
                memset(&run->before, 0, sizeof(run->before));
        run->a = a;
        run->rec = rec;
        rec->run = run;
        rec->state = NPF_ANALYSIS_RUNNING;
        rec->started_ns = npf_clock_ns(CLOCK_MONOTONIC);
        a->running++;
        a->runs++;
        run->handles = 3;
        uv_pipe_init(a->loop, &run->err, 0);
        uv_timer_init(a->loop, &run->timer);
        run->proc.data = run->timer.data = run->err.data = run;

        snprintf(nice, sizeof(nice), "%d", a->opt.nice);
        snprintf(cpu, sizeof(cpu), "%" PRIu64, a->opt.timeout_s);
        snprintf(mem, sizeof(mem), "%" PRIu64, a->opt.memory_bytes);
        /* A framework's own parser (torch_npu's, MindSpore's) may still be writing the
         * window's output when it closes: half the time limit goes to waiting for it. */
        snprintf(wait, sizeof(wait), "%" PRIu64, a->opt.timeout_s / 2);
        /* A cluster's: "cluster" first, its window directories last. */
        char *argv[NPF_ANALYZE_CLUSTER_MAX + 16];
        size_t n = 0;
        argv[n++] = a->analyzer;
        if (rec->n_more)
                argv[n++] = (char *) "cluster";
        argv[n++] = (char *) "--nice";
        argv[n++] = nice;
        argv[n++] = (char *) "--limit-cpu";
        argv[n++] = cpu;
        argv[n++] = (char *) "--wait";
        argv[n++] = wait;
        argv[n++] = (char *) "-o";
        argv[n++] = run->outdir;
        /* Without an address-space limit the option is left out. */
        if (a->opt.memory_bytes) {
                argv[n++] = (char *) "--limit-memory";
                argv[n++] = mem;
        }
        argv[n++] = rec->dir;
        for (size_t i = 0; i < rec->n_more; i++)
                argv[n++] = rec->more[i];
        argv[n] = NULL;
        char **args = argv;
        uv_stdio_container_t stdio[3] = {
                { .flags = UV_IGNORE },
                { .flags = UV_IGNORE },
                { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *) &run->err },
        };
        /* Detached: a process group of its own, so that a time limit kills all of it. */
        uv_process_options_t o = {
                .exit_cb = on_child_exit,
                .file = a->analyzer,
                .args = args,
                .flags = UV_PROCESS_DETACHED,
                .stdio_count = 3,
                .stdio = stdio,
        };
        /* As the window's owner: what it writes there is that user's, and can go nowhere else. */
        if (rec->uid != (uid_t) -1) {
                o.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
                o.uid = rec->uid;
                o.gid = rec->gid;
        }
        /* A failed spawn leaves the process handle initialised all the same: finish() closes it. */
        r = uv_spawn(a->loop, &run->proc, &o);
        if (r < 0) {
                run->spawn_error = r;
                run->exited = run->eof = true;
                finish(run);
                return;
        }
        if (a->cb) {
                npf_analysis_event_t ev = { .window_id = rec->window_id, .state = NPF_ANALYSIS_RUNNING,
                                            .dir = rec->dir, .pid = run->proc.pid };
                a->cb(&ev, a->data);
        }
        uv_update_time(a->loop);
        uv_timer_start(&run->timer, on_timer, a->opt.timeout_s * 1000u, 0);
        uv_read_start((uv_stream_t *) &run->err, on_alloc, on_read);
}

/*
 * Start queued analyses while fewer than `jobs` run. A start that fails at once finishes,
 * which pumps again: that inner call leaves the work to this loop rather than recurse.
 */
static void pump(npf_analyze_t *a)
{
        if (a->pumping)
                return;
        a->pumping = true;
        while (!a->closing && a->running < a->opt.jobs && a->q_len > 0) {
                record_t *rec = a->queue[a->q_head];
                a->q_head = (a->q_head + 1) % NPF_ANALYZE_QUEUE_MAX;
                a->q_len--;
                start(a, rec);
        }
        a->pumping = false;
}

/* --- the queue ------------------------------------------------------------------------ */

int npf_analyze_new(uv_loop_t *loop, const npf_analyze_options_t *opt, npf_analyze_event_cb cb, void *data,
                    npf_analyze_t **ret_analyze)
{
        npf_analyze_t *a = calloc(1, sizeof(*a));

        if (!a || !(a->analyzer = strdup(opt->analyzer ? opt->analyzer : NPF_ANALYZER_PATH))) {
                free(a);
                return -ENOMEM;
        }
        a->loop = loop;
        a->opt = *opt;
        a->opt.analyzer = a->analyzer;
        if (a->opt.jobs > NPF_ANALYZE_JOBS_MAX)
                a->opt.jobs = NPF_ANALYZE_JOBS_MAX;
        if (a->opt.timeout_s == 0)
                a->opt.timeout_s = NPF_ANALYZE_TIMEOUT_S_DEFAULT;
        if (a->opt.queue_max == 0 || a->opt.queue_max > NPF_ANALYZE_QUEUE_MAX)
                a->opt.queue_max = NPF_ANALYZE_QUEUE_MAX;
        a->cb = cb;
        a->data = data;
        *ret_analyze = a;
        return 0;
}

/* A new record for @window_id. Return: 0 and it in @ret, or -ECANCELED, -EEXIST, -ENOBUFS. */
static int admit(npf_analyze_t *a, uint64_t window_id, record_t **ret)
{
        record_t *r;

        if (!a || a->closing || a->opt.jobs == 0)
                return -ECANCELED;
        if (window_id == 0 || find(a, window_id))
                return -EEXIST;
        /* Queued and running ones (at most QUEUE_MAX + JOBS_MAX) never fill every entry. */
        r = record_new(a, window_id);
        if (!r)
                return -ENOBUFS;
        *ret = r;
        return 0;
}

/* Queue the analysis @id of @dir, and, for a cluster, of the @n_more directories @more
 * (taken over, freed here on failure). Return: as npf_analyze_window(). */
static int enqueue(npf_analyze_t *a, uint64_t id, const char *dir, const char *outdir, uid_t uid, gid_t gid,
                   char **more, size_t n_more)
{
        char *copy = strdup(dir), *out = outdir ? strdup(outdir) : NULL;
        record_t *r;
        int ret = -ENOMEM;

        if (!copy || (outdir && !out) || (ret = admit(a, id, &r)) < 0) {
                free(copy);
                free(out);
                for (size_t i = 0; i < n_more; i++)
                        free(more[i]);
                free(more);
                return ret;
        }
        r->state = NPF_ANALYSIS_QUEUED;
        r->dir = copy;
        r->outdir = out;
        r->uid = uid;
        r->gid = gid;
        r->more = more;
        r->n_more = n_more;
        if (a->q_len == a->opt.queue_max) {
                record_t *oldest = a->queue[a->q_head];
                char why[128];
                a->q_head = (a->q_head + 1) % NPF_ANALYZE_QUEUE_MAX;
                a->q_len--;
                snprintf(why, sizeof(why), "not analysed: dropped from the queue, where %u windows were waiting",
                         a->opt.queue_max);
                record_finish(a, oldest, NULL, why);
                a->dropped++;
        }
        a->queue[(a->q_head + a->q_len) % NPF_ANALYZE_QUEUE_MAX] = r;
        a->q_len++;
        pump(a);
        return 0;
}

int npf_analyze_window(npf_analyze_t *a, uint64_t window_id, const char *dir, const char *outdir, uid_t uid,
                       gid_t gid)
{
        return enqueue(a, window_id, dir, outdir, uid, gid, NULL, 0);
}

int npf_analyze_cluster(npf_analyze_t *a, uint64_t generation, const char *const *dirs, size_t n, const char *outdir,
                        uid_t uid, gid_t gid)
{
        char **more;

        if (n < 2 || n > NPF_ANALYZE_CLUSTER_MAX || !outdir)
                return -EINVAL;
        if (!(more = calloc(n - 1, sizeof(*more))))
                return -ENOMEM;
        for (size_t i = 1; i < n; i++)
                if (!(more[i - 1] = strdup(dirs[i]))) {
                        while (--i > 0)
                                free(more[i - 1]);
                        free(more);
                        return -ENOMEM;
                }
        return enqueue(a, NPF_ANALYZE_CLUSTER_ID(generation), dirs[0], outdir, uid, gid, more, n - 1);
}

int npf_analyze_refuse(npf_analyze_t *a, uint64_t window_id, const char *reason)
{
        record_t *r;
        int ret = admit(a, window_id, &r);

        if (ret < 0)
                return ret;
        record_finish(a, r, NULL, reason);
        return r->reason ? 0 : -ENOMEM;
}

/* A string, or null when there is none or it is not UTF-8. */
static json_t *string_or_null(const char *s)
{
        json_t *j = s ? json_string(s) : NULL;

        return j ? j : json_null();
}

json_t *npf_analyze_window_json(const npf_analyze_t *a, uint64_t window_id)
{
        const record_t *r = a ? find(a, window_id) : NULL;

        if (!r)
                return NULL;
        return json_pack("{s:s, s:o, s:O?, s:o, s:o, s:o}", "state", state_name(r->state),
                         "report", string_or_null(r->report), "answers", r->answers,
                         "reason", string_or_null(r->reason),
                         "pid", r->run && r->run->proc.pid > 0 ? json_integer(r->run->proc.pid) : json_null(),
                         "seconds", r->state == NPF_ANALYSIS_QUEUED ? json_null()
                                                                    : json_real(elapsed_s(r, npf_clock_ns(CLOCK_MONOTONIC))));
}

json_t *npf_analyze_summary_json(const npf_analyze_t *a)
{
        return json_pack("{s:b, s:o, s:I, s:I, s:I, s:i, s:I, s:I, s:I, s:I, s:I, s:I}",
                         "enabled", a->opt.jobs > 0,
                         "analyzer", string_or_null(a->analyzer),
                         "jobs", (json_int_t) a->opt.jobs,
                         "timeout_s", (json_int_t) a->opt.timeout_s,
                         "memory_bytes", (json_int_t) a->opt.memory_bytes,
                         "nice", a->opt.nice,
                         "queue_max", (json_int_t) a->opt.queue_max,
                         "queued", (json_int_t) a->q_len,
                         "running", (json_int_t) a->running,
                         "done", (json_int_t) a->done,
                         "failed", (json_int_t) a->failed,
                         "dropped", (json_int_t) a->dropped);
}

static void analyze_free(npf_analyze_t *a)
{
        for (unsigned i = 0; i < NPF_ANALYZE_KEPT; i++)
                record_clear(&a->records[i]);
        free(a->analyzer);
        free(a);
}

void npf_analyze_close(npf_analyze_t *a)
{
        if (!a || a->closing)
                return;
        a->closing = true;
        a->q_len = 0;
        /* A child still running is killed and left to be reaped as the daemon exits: nothing waits for it. */
        for (unsigned i = 0; i < NPF_ANALYZE_KEPT; i++) {
                run_t *run = a->records[i].run;
                if (!run)
                        continue;
                if (!run->exited)
                        kill_group(run);
                run->finished = true;
                a->records[i].run = NULL;
                close_handle((uv_handle_t *) &run->proc);
                close_handle((uv_handle_t *) &run->timer);
                close_handle((uv_handle_t *) &run->err);
        }
        if (a->runs == 0)
                analyze_free(a);
}
