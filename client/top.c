/* SPDX-License-Identifier: MIT */
#include "client/top.h"
#include "client/ipc.h"
#include "client/progress.h"
#include "client/status.h"
#include "conf/view.h"
#include "lib/clock.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define TERM_ROWS_DEFAULT 24            /* a terminal that does not tell its size */
#define TERM_COLS_DEFAULT 80
#define ITERATIONS_MAX 1000000000LL

/* On a terminal: the cursor hidden and the screen cleared at the start, the cursor shown again at the end. */
#define TTY_BEGIN "\033[?25l\033[H\033[2J"
#define TTY_END "\033[?25h"

/*
 * What the signal handler needs. A signal that ends top while it waits for the daemon
 * (up to NPF_IPC_TIMEOUT_MS) ends it at once, from the handler; at any other time it is
 * blocked until top sleeps, and ends the sleep.
 */
static volatile sig_atomic_t got_stop, got_resize, calling, on_tty, exit_status = -1;

/* The signals top handles, blocked but while it waits; the mask while it waits. */
static sigset_t handled_set, waiting_set;

static void on_signal(int sig)
{
        if (sig == SIGWINCH) {
                got_resize = 1;
                return;
        }
        got_stop = sig;
        if (calling) {
                if (on_tty) {
                        ssize_t w = write(STDOUT_FILENO, TTY_END "\n", sizeof(TTY_END "\n") - 1);
                        (void) w;
                }
                _exit(exit_status >= 0 ? exit_status : 128 + sig);
        }
}

static const char *str(const json_t *o, const char *key, const char *none)
{
        const char *s = json_string_value(json_object_get(o, key));

        return s ? s : none;
}

/* One rank's row, and where it sorts. */
typedef struct {
        const json_t *r;
        long long rank, lag;
        bool has_rank, has_lag;
} row_t;

/* The ranks furthest behind first, then those whose lag is unknown; by rank among equals. */
static int by_lag(const void *a, const void *b)
{
        const row_t *x = a, *y = b;

        if (x->has_lag != y->has_lag)
                return x->has_lag ? -1 : 1;
        if (x->has_lag && x->lag != y->lag)
                return x->lag > y->lag ? -1 : 1;
        if (x->has_rank != y->has_rank)
                return x->has_rank ? -1 : 1;
        return (x->rank > y->rank) - (x->rank < y->rank);
}

/* A step of the reply: an integer that is not negative. */
static bool step_of(const json_t *v, long long *ret)
{
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return false;
        *ret = (long long) json_integer_value(v);
        return true;
}

/*
 * The rows of @ranks (any value) sorted for showing, in a new array of *@ret_n; the
 * slowest and fastest known steps in @ret_min and @ret_max (-1 when none is known).
 * The lag is behind the fastest rank here, or behind the progress's fastest_step when
 * that is further on. Return: the array (free()), NULL when there are no rows or no memory.
 */
static row_t *sorted_rows(const json_t *ranks, const json_t *progress, size_t *ret_n, long long *ret_min,
                          long long *ret_max)
{
        size_t n = json_array_size(ranks), i;
        long long fastest = -1, slowest = -1, s;
        row_t *rows = n ? calloc(n, sizeof(*rows)) : NULL;
        json_t *r;

        *ret_n = 0;
        json_array_foreach(ranks, i, r)
                if (step_of(json_object_get(r, "step"), &s)) {
                        fastest = s > fastest ? s : fastest;
                        slowest = slowest < 0 || s < slowest ? s : slowest;
                }
        *ret_min = slowest;
        *ret_max = fastest;
        if (step_of(json_object_get(progress, "fastest_step"), &s) && s > fastest)
                fastest = s;
        if (!rows)
                return NULL;
        json_array_foreach(ranks, i, r) {
                row_t *w = &rows[i];
                w->r = r;
                w->has_rank = json_is_integer(json_object_get(r, "rank"));
                w->rank = w->has_rank ? (long long) json_integer_value(json_object_get(r, "rank")) : LLONG_MAX;
                w->has_lag = step_of(json_object_get(r, "step"), &s);
                w->lag = w->has_lag ? fastest - s : 0;
        }
        qsort(rows, n, sizeof(*rows), by_lag);
        *ret_n = n;
        return rows;
}

static void print_row(FILE *f, const row_t *w)
{
        const json_t *r = w->r, *pid = json_object_get(r, "pid"), *step = json_object_get(r, "step");
        char rk[24] = "-", pd[24] = "-", st[24] = "-", lag[24] = "-", stt[NPF_CLI_TIME_MAX];

        if (w->has_rank)
                snprintf(rk, sizeof(rk), "%lld", w->rank);
        if (json_is_integer(pid))
                snprintf(pd, sizeof(pd), "%lld", (long long) json_integer_value(pid));
        if (json_is_integer(step))
                snprintf(st, sizeof(st), "%lld", (long long) json_integer_value(step));
        if (w->has_lag)
                snprintf(lag, sizeof(lag), "%lld", w->lag);
        fprintf(f, "  %6s %8s %10s %9s %8s  ", rk, pd, st,
                npf_cli_step_time(json_object_get(r, "step_time_ms"), false, stt), lag);
        npf_cli_print_text(f, str(r, "state", "?"));
        npf_cli_print_stalled(f, r);
        if (json_is_string(json_object_get(r, "message"))) {
                fputs("  ", f);
                npf_cli_print_text(f, str(r, "message", ""));
        }
        fputc('\n', f);
}

/* The config: line of the header from the config object @c (any value). */
static void print_config(FILE *f, const json_t *c)
{
        const json_t *err = json_object_get(c, "error");

        if (json_is_string(json_object_get(c, "unreadable"))) {
                fputs("config:   unreadable: ", f);
                npf_cli_print_text(f, str(c, "unreadable", ""));
                fputc('\n', f);
                return;
        }
        if (!json_is_object(c)) {
                fputs("config:   -\n", f);
                return;
        }
        fprintf(f, "config:   generation %lld, file ", (long long) json_integer_value(json_object_get(c, "generation")));
        npf_cli_print_text(f, str(c, "state", "unknown"));
        if (json_is_string(json_object_get(err, "message"))) {
                fputs(" (", f);
                npf_cli_print_text(f, str(err, "message", ""));
                fputc(')', f);
        }
        fputs("; window ", f);
        npf_cli_print_window(f, json_object_get(c, "window"));
        if (json_is_true(json_object_get(json_object_get(c, "window"), "enabled"))) {
                if (strcmp(str(c, "ranks", "all"), "all") == 0) {
                        fputs(", every rank", f);
                } else {
                        fputs(", ranks ", f);
                        npf_cli_print_text(f, str(c, "ranks", ""));
                }
        }
        fputc('\n', f);
}

/* The ranks: line: how many, how many stalled, the range of their steps. */
static void print_ranks_line(FILE *f, const json_t *ranks, long long min, long long max)
{
        size_t i, stalled = 0;
        json_t *r;

        if (!json_is_array(ranks)) {
                fputs("ranks:    the reply holds no readable rank table\n", f);
                return;
        }
        json_array_foreach(ranks, i, r)
                stalled += npf_cli_rank_stalled(r);
        fprintf(f, "ranks:    %zu attached", json_array_size(ranks));
        if (stalled)
                fprintf(f, ", %zu stalled", stalled);
        if (min >= 0)
                fprintf(f, min == max ? "; all at step %lld" : "; steps %lld..%lld", min, max);
        fputc('\n', f);
}

/*
 * The header of one refresh on @head: from the daemon's @reply, or, when it is NULL, the
 * reason @err, what to do about it, @fix (or NULL), and what segment @seg holds. Whether a rank table follows in @ret_body; the
 * rank table and the progress of the reply in @ret_ranks and @ret_progress.
 * Return: the refresh's exit status.
 */
static int render_head(FILE *head, const json_t *reply, const char *err, const char *fix, const json_t *seg,
                       const char *when, double interval, bool *ret_body, const json_t **ret_ranks,
                       const json_t **ret_progress)
{
        const json_t *res = json_object_get(reply, "result"), *dm;
        char up[NPF_CLI_TIME_MAX];
        int status = 0;

        *ret_ranks = *ret_progress = NULL;
        *ret_body = false;
        if (!reply) {
                fputs("npuprofd: not reachable: ", head);
                npf_cli_print_text(head, err);
                fprintf(head, "  (%s, trying again every %gs)\n", when, interval);
                if (fix) {
                        fputs("          ", head);
                        npf_cli_print_text(head, fix);
                        fputc('\n', head);
                }
                fputs("shm:      ", head);
                if (!json_is_object(seg) || json_is_string(json_object_get(seg, "error"))) {
                        npf_cli_print_text(head, str(seg, "error", "cannot be read"));
                        fputc('\n', head);
                        if (json_is_string(json_object_get(seg, "fix"))) {
                                fputs("          ", head);
                                npf_cli_print_text(head, str(seg, "fix", ""));
                                fputc('\n', head);
                        }
                        return NPF_EXIT_UNREACHABLE;
                }
                npf_cli_print_text(head, str(seg, "name", "?"));
                fputs(" (read directly, read-only)\n", head);
                res = seg;
                status = NPF_EXIT_UNREACHABLE;
        } else if (!json_is_true(json_object_get(reply, "ok"))) {
                fputs("npuprofd: refused: ", head);
                npf_cli_print_text(head, str(reply, "error", "the daemon refused"));
                fprintf(head, "  (%s, every %gs)\n", when, interval);
                return 1;
        } else {
                dm = json_object_get(res, "daemon");
                json_int_t uptime = json_integer_value(json_object_get(dm, "uptime_s"));
                fprintf(head, "npuprofd: pid %lld, up %s, shm ", (long long) json_integer_value(json_object_get(dm, "pid")),
                        npf_cli_duration(uptime > 0 ? (double) uptime : 0, up));
                npf_cli_print_text(head, str(json_object_get(res, "shm"), "name", "?"));
                fprintf(head, "  (%s, every %gs)\n", when, interval);
                *ret_progress = json_object_get(res, "progress");
        }
        print_config(head, json_object_get(res, "config"));
        *ret_ranks = json_object_get(res, "ranks");
        *ret_body = true;
        return status;
}

/*
 * One refresh on @out, the header then the rank table; with @term_rows (0: no limit), in at
 * most that many lines less one, the cursor's. Return: the refresh's exit status.
 */
static int render(FILE *out, const json_t *reply, const char *err, const char *fix, const json_t *seg,
                  const char *when, double interval, long term_rows)
{
        const json_t *ranks, *progress;
        char *hbuf = NULL;
        size_t hlen = 0, n = 0, shown, head_lines = 0;
        long long min = -1, max = -1;
        FILE *head = open_memstream(&hbuf, &hlen);
        bool body;
        int status;

        if (!head) {
                fputs("npuprofctl top: out of memory\n", out);
                return 1;
        }
        status = render_head(head, reply, err, fix, seg, when, interval, &body, &ranks, &progress);
        row_t *rows = body ? sorted_rows(ranks, progress, &n, &min, &max) : NULL;
        if (body) {
                print_ranks_line(head, ranks, min, max);
                if (n > 0 || json_is_object(progress))
                        npf_cli_print_progress(head, progress, ranks);
        }
        fclose(head);
        if (hbuf)
                fwrite(hbuf, 1, hlen, out);
        for (size_t i = 0; i < hlen; i++)
                head_lines += hbuf[i] == '\n';
        free(hbuf);
        if (n == 0) {
                free(rows);
                return status;
        }
        /* The rows that fit under the header, the heading and the cursor's line; one of them
         * says how many do not. */
        shown = n;
        if (term_rows > 0) {
                long left = term_rows - 1 - (long) head_lines - 1;
                if (left < (long) n)
                        shown = left > 1 ? (size_t) left - 1 : 0;
        }
        fprintf(out, "  %6s %8s %10s %9s %8s  %s\n", "RANK", "PID", "STEP", "STEP TIME", "LAG", "STATE");
        for (size_t i = 0; i < shown; i++)
                print_row(out, &rows[i]);
        if (shown < n)
                fprintf(out, "  (%zu more rank%s not shown: the terminal has %ld lines)\n", n - shown,
                        n - shown == 1 ? "" : "s", term_rows);
        free(rows);
        return status;
}

/* The columns of @line (UTF-8) that fit in @cols: its length in bytes, cut at a character. */
static size_t fit(const char *line, size_t len, long cols)
{
        long chars = 0;

        for (size_t i = 0; i < len; i++)
                if (((unsigned char) line[i] & 0xc0) != 0x80 && ++chars > cols)
                        return i;
        return len;
}

/*
 * Show the refresh @frame (@len bytes of lines). On a terminal, over the last one, each
 * line cut to @cols and cleared to its end, and the screen below cleared; elsewhere as it
 * is, after a blank line unless it is the @first.
 * Return: 0, or -errno when it could not be written (a closed pipe, a full disk).
 */
static int draw(const char *frame, size_t len, bool tty, bool first, long cols)
{
        if (!tty) {
                if (!first)
                        fputc('\n', stdout);
                fwrite(frame, 1, len, stdout);
                return fflush(stdout) == 0 && !ferror(stdout) ? 0 : -(errno ? errno : EIO);
        }
        fputs("\033[H", stdout);
        for (const char *p = frame, *end = frame + len; p < end;) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);
                fwrite(p, 1, fit(p, l, cols), stdout);
                fputs("\033[K\n", stdout);
                p += l + 1;
        }
        fputs("\033[J", stdout);
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : -(errno ? errno : EIO);
}

/* The terminal's size, or the defaults when it does not tell. */
static void term_size(long *ret_rows, long *ret_cols)
{
        struct winsize ws;

        *ret_rows = TERM_ROWS_DEFAULT;
        *ret_cols = TERM_COLS_DEFAULT;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
                *ret_rows = ws.ws_row;
                *ret_cols = ws.ws_col;
        }
}

/* One refresh: ask, render, draw. Return: its exit status, or -errno when it could not be shown. */
static int refresh(const char *socket_path, const char *shm_name, double interval, bool first)
{
        json_t *reply = NULL, *seg = NULL;
        char err[256] = "", when[16] = "", fixbuf[NPF_IPC_FIX_MAX];
        const char *fix = NULL;
        char *frame = NULL;
        size_t len = 0;
        long rows = 0, cols = 0;
        int r, status;
        FILE *f;

        /* The call may wait its whole timeout: a signal now ends top at once (on_signal()). */
        calling = 1;
        sigprocmask(SIG_SETMASK, &waiting_set, NULL);
        r = npf_ipc_call(socket_path, "status", NPF_IPC_TIMEOUT_MS, &reply, err);
        sigprocmask(SIG_BLOCK, &handled_set, NULL);
        calling = 0;
        if (r < 0) {
                reply = NULL;
                fix = npf_ipc_fix(r, socket_path, fixbuf);
                seg = npf_cli_segment_view(shm_name);
        } else {
                /* The rank table of the reply, rows, as an object per rank; a table that is not one is no table. */
                json_t *res = json_object_get(reply, "result"), *table = json_object_get(res, "ranks");
                if (table) {
                        json_t *list = npf_view_table_objects(table);
                        json_object_set_new(res, "ranks", list ? list : json_null());
                }
        }

        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm))
                strftime(when, sizeof(when), "%H:%M:%S", &tm);
        if (on_tty)
                term_size(&rows, &cols);
        f = open_memstream(&frame, &len);
        if (!f) {
                status = -ENOMEM;
        } else {
                status = render(f, reply, err, fix, seg, when, interval, rows);
                fclose(f);
                r = draw(frame, len, on_tty, first, cols);
                if (r < 0)
                        status = r;
        }
        free(frame);
        json_decref(reply);
        json_decref(seg);
        return status;
}

/* Sleep until @deadline_ns (CLOCK_MONOTONIC), the handled signals let through: one ends the sleep. */
static void sleep_until(uint64_t deadline_ns)
{
        while (!got_stop && !got_resize) {
                uint64_t now = npf_clock_ns(CLOCK_MONOTONIC);
                if (now >= deadline_ns)
                        return;
                struct timespec ts = { .tv_sec = (time_t) ((deadline_ns - now) / 1000000000u),
                                       .tv_nsec = (long) ((deadline_ns - now) % 1000000000u) };
                if (ppoll(NULL, 0, &ts, &waiting_set) < 0 && errno != EINTR)
                        return;
        }
}

static void top_help(void)
{
        printf("Usage: npuprofctl top [--interval SECONDS] [-n|--iterations N]\n\n"
               "The node's ranks, refreshed every SECONDS (default 1, at least %g), like top(1):\n"
               "the daemon, the configuration in force, the ranks' steps, the job's step time,\n"
               "its slowdown, the stalled ranks and the daemon's word on them, then a row per\n"
               "rank: RANK, PID, STEP, STEP TIME, LAG (steps behind the fastest rank) and STATE,\n"
               "the ranks furthest behind first. On a terminal each refresh is drawn over the\n"
               "last, as many rows as fit; elsewhere each is printed whole, after a blank line.\n"
               "When the daemon cannot be reached, each refresh says so and shows what the\n"
               "segment holds. -n N, --iterations N: stop after N refreshes; else SIGINT (^C),\n"
               "SIGTERM or SIGHUP ends it.\n"
               "Exit: that of the last refresh: 0 the daemon answered, 1 it refused, 3 it could\n"
               "not be reached; 2 usage; 128 + the signal when one came before the first refresh.\n",
               NPF_TOP_INTERVAL_MIN);
}

int npf_cli_top(int argc, char **argv, const char *socket_path, const char *shm_name)
{
        enum { OPT_INTERVAL = 256, OPT_HELP };
        static const struct option opts[] = {
                { "interval", required_argument, NULL, OPT_INTERVAL },
                { "iterations", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, OPT_HELP },
                { 0 },
        };
        static const int stops[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH };
        struct sigaction sa = { .sa_handler = on_signal }, old_sa[4];
        bool handled[4] = { false };
        double interval = 1.0;
        long long iterations = 0;
        sigset_t orig;
        char *end;
        int c, status = 0;

        argv[0] = (char *) "npuprofctl top";    /* getopt's messages name it */
        optind = 1;
        while ((c = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
                switch (c) {
                case OPT_INTERVAL:
                        errno = 0;
                        interval = strtod(optarg, &end);
                        if (errno || end == optarg || *end || !(interval >= NPF_TOP_INTERVAL_MIN &&
                                                                 interval <= NPF_TOP_INTERVAL_MAX)) {
                                fprintf(stderr, "npuprofctl top: --interval takes seconds from %g to %g, not '%s'\n",
                                        NPF_TOP_INTERVAL_MIN, NPF_TOP_INTERVAL_MAX, optarg);
                                return 2;
                        }
                        break;
                case 'n':
                        errno = 0;
                        iterations = strtoll(optarg, &end, 10);
                        if (errno || end == optarg || *end || iterations < 1 || iterations > ITERATIONS_MAX) {
                                fprintf(stderr, "npuprofctl top: --iterations takes a count from 1 to %lld, not '%s'\n",
                                        ITERATIONS_MAX, optarg);
                                return 2;
                        }
                        break;
                case OPT_HELP:
                        top_help();
                        return 0;
                default:
                        fputs("see npuprofctl top --help\n", stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "npuprofctl top: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }

        on_tty = isatty(STDOUT_FILENO);
        /* The signals that end top, and SIGWINCH on a terminal, wait blocked until it sleeps or
         * calls the daemon. A signal ignored when top started (a background job's SIGINT) stays
         * ignored. */
        sigemptyset(&handled_set);
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
                if (stops[i] == SIGWINCH && !on_tty)
                        continue;
                if (sigaction(stops[i], NULL, &old_sa[i]) < 0 || old_sa[i].sa_handler == SIG_IGN)
                        continue;
                sigaction(stops[i], &sa, NULL);
                handled[i] = true;
                sigaddset(&handled_set, stops[i]);
        }
        sigprocmask(SIG_BLOCK, &handled_set, &orig);
        waiting_set = orig;
        for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
                if (handled[i])
                        sigdelset(&waiting_set, stops[i]);
        if (on_tty) {
                fputs(TTY_BEGIN, stdout);
                fflush(stdout);
        }
        for (long long k = 0; !got_stop; k++) {
                uint64_t started = npf_clock_ns(CLOCK_MONOTONIC);
                got_resize = 0;
                status = refresh(socket_path, shm_name, interval, k == 0);
                if (status < 0) {
                        fprintf(stderr, "npuprofctl top: cannot show the refresh: %s\n", strerror(-status));
                        exit_status = 1;
                        break;
                }
                exit_status = status;
                if (iterations && k + 1 >= iterations)
                        break;
                sleep_until(started + (uint64_t) (interval * 1e9 + 0.5));
        }
        if (on_tty) {
                fputs(TTY_END, stdout);
                fflush(stdout);
        }
        /* A signal still pending finds the handler, which only notes it; then the old ones come back. */
        sigprocmask(SIG_SETMASK, &orig, NULL);
        for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
                if (handled[i])
                        sigaction(stops[i], &old_sa[i], NULL);
        return exit_status >= 0 ? exit_status : 128 + got_stop;
}
