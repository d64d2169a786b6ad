/* SPDX-License-Identifier: MIT */
/*
 * The analysis queue of npuprofd (daemon/analyze.c): byte counts, the reasons of failures,
 * and the supervision of children on a real libuv loop: the command line they get, the
 * bounded queue, the wall-clock limit, signals, the tail of stderr, and closing with a
 * child running. The children are this test binary run again (it plays a child when its
 * arguments hold --limit-cpu), so that each test chooses what the child does; the real
 * npuprof-replay under the real daemon is tests/test-analyze.sh's.
 */
#include "daemon/analyze.h"

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define GiB (UINT64_C(1) << 30)
#define MiB (UINT64_C(1) << 20)

static char self[PATH_MAX];             /* this binary, the children's program */

/* --- the child ------------------------------------------------------------------------ */

/*
 * What a child does is named by its PATH's last component: "hold*" waits to be killed,
 * "segv" dies of SIGSEGV, "noisy" writes 100 KB on stderr then a last line and exits 1,
 * anything else writes its arguments, one a line, into OUTDIR/report.json and exits 0.
 */
static int child(int argc, char **argv)
{
        const char *out = NULL, *path = argv[argc - 1], *base = strrchr(path, '/');
        struct rlimit no_core = { 0, 0 };
        char file[PATH_MAX];

        setrlimit(RLIMIT_CORE, &no_core);
        base = base ? base + 1 : path;
        for (int i = 1; i + 1 < argc; i++)
                if (strcmp(argv[i], "-o") == 0)
                        out = argv[i + 1];
        if (strncmp(base, "hold", 4) == 0) {
                /* Held until killed, or until the test that started it is gone. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() == 1)
                        return 1;
                for (;;)
                        pause();
        }
        if (strcmp(base, "segv") == 0) {
                signal(SIGSEGV, SIG_DFL);       /* not a sanitizer's report: the signal itself */
                raise(SIGSEGV);
                return 9;
        }
        if (strcmp(base, "noisy") == 0) {
                for (int i = 0; i < 100 * 1024 / 64; i++)
                        fprintf(stderr, "%063d\n", i);
                fprintf(stderr, "npuprof-replay: trace.json: the last words\n\n");
                return 1;
        }
        if (!out || (mkdir(out, 0755) < 0 && errno != EEXIST))
                return 1;
        snprintf(file, sizeof(file), "%s/report.json", out);
        FILE *f = fopen(file, "w");
        if (!f)
                return 1;
        for (int i = 1; i < argc; i++)
                fprintf(f, "%s\n", argv[i]);
        fclose(f);
        return 0;
}

/* --- words ---------------------------------------------------------------------------- */

static void expect_bytes(const char *s, uint64_t want)
{
        uint64_t got = 0;
        int r = npf_analyze_parse_bytes(s, &got);

        if (r != 0 || got != want)
                fail_msg("\"%s\": r=%d, %llu bytes; expected %llu", s, r, (unsigned long long) got,
                         (unsigned long long) want);
}

static void test_parse_bytes(void **state)
{
        static const char *const bad[] = { "", "G", "-1", "+1", " 1", "1 ", "4X", "4 G", "1.5G", "4GG", "4iB",
                                           "0x10", "4Gi" };
        uint64_t v = 7;

        (void) state;
        expect_bytes("0", 0);
        expect_bytes("1048576", MiB);
        expect_bytes("1M", MiB);
        expect_bytes("512m", 512 * MiB);
        expect_bytes("4G", 4 * GiB);
        expect_bytes("4GB", 4 * GiB);
        expect_bytes("4GiB", 4 * GiB);
        expect_bytes("4gib", 4 * GiB);
        expect_bytes("64K", 64 * 1024);
        expect_bytes("2T", 2048 * GiB);
        expect_bytes("10B", 10);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                if (npf_analyze_parse_bytes(bad[i], &v) != -EINVAL)
                        fail_msg("\"%s\" was taken", bad[i]);
                assert_int_equal(v, 7);
        }
        assert_int_equal(npf_analyze_parse_bytes("8388608T", &v), -ERANGE);
        assert_int_equal(npf_analyze_parse_bytes("99999999999999999999", &v), -ERANGE);
        assert_int_equal(v, 7);
}

static void expect_size(uint64_t bytes, const char *want)
{
        char got[32];

        npf_analyze_format_bytes(bytes, got, sizeof(got));
        assert_string_equal(got, want);
}

static void test_format_bytes(void **state)
{
        (void) state;
        expect_size(4 * GiB, "4.0 GiB");
        expect_size(MiB, "1.0 MiB");
        expect_size(1536 * MiB, "1.5 GiB");
        expect_size(1024, "1.0 KiB");
        expect_size(512, "512 bytes");
        expect_size(1, "1 byte");
        expect_size(3 * 1024 * GiB, "3.0 TiB");
}

static const npf_analyze_options_t limits = {
        .analyzer = "/usr/bin/npuprof-replay",
        .jobs = 1,
        .timeout_s = 600,
        .memory_bytes = 4 * GiB,
        .nice = 10,
};

/* The reason for @e under @opt must be @want (NULL: it did not fail). */
static void expect_reason_with(const npf_analyze_exit_t *e, const npf_analyze_options_t *opt, const char *want)
{
        char got[NPF_ANALYZE_REASON_MAX];
        bool failed = npf__analyze_reason(e, opt, got, sizeof(got));

        if (failed != (want != NULL) || (want && strcmp(got, want) != 0))
                fail_msg("reason \"%s\" (failed %d); expected \"%s\"", got, failed, want ? want : "(none)");
}

static void expect_reason(const npf_analyze_exit_t *e, const char *want)
{
        expect_reason_with(e, &limits, want);
}

/* A child that exited with @status after writing @tail on stderr. */
static npf_analyze_exit_t exited(int64_t status, const char *tail)
{
        return (npf_analyze_exit_t) { .exit_status = status, .tail = tail, .tail_len = tail ? strlen(tail) : 0 };
}

static void test_reason_limits(void **state)
{
        npf_analyze_exit_t e = { .term_signal = SIGKILL, .timed_out = true };
        npf_analyze_options_t none = limits;

        (void) state;
        expect_reason(&e, "time limit of 600 s reached");
        e = (npf_analyze_exit_t) { .term_signal = SIGXCPU };
        expect_reason(&e, "CPU time limit of 600 s reached");
        e = exited(NPF_ANALYZE_EXIT_OOM, "npuprof-replay: out of memory\n");
        expect_reason(&e, "memory limit of 4.0 GiB reached");
        e = exited(NPF_ANALYZE_EXIT_OOM, NULL);
        expect_reason(&e, "memory limit of 4.0 GiB reached");
        /* An allocator that says so, whatever the status: AddressSanitizer's words, glibc's. */
        e = exited(1, "==12==ERROR: AddressSanitizer: failed to allocate 0x1000 (4096) bytes\n==12==ABORTING\n");
        expect_reason(&e, "memory limit of 4.0 GiB reached");
        e = exited(1, "npuprof-replay: cannot map trace.json: Cannot allocate memory\n");
        expect_reason(&e, "memory limit of 4.0 GiB reached");
        e = exited(1, "=================================================================\nERROR: Failed to mmap\n");
        expect_reason(&e, "memory limit of 4.0 GiB reached");
        none.memory_bytes = 0;
        e = exited(NPF_ANALYZE_EXIT_OOM, "npuprof-replay: out of memory\n");
        expect_reason_with(&e, &none, "out of memory: out of memory");
        none.memory_bytes = MiB;
        expect_reason_with(&e, &none, "memory limit of 1.0 MiB reached");
}

static void test_reason_signals_and_statuses(void **state)
{
        npf_analyze_exit_t e = { .term_signal = SIGSEGV };

        (void) state;
        expect_reason(&e, "killed by signal 11 (Segmentation fault)");
        e = (npf_analyze_exit_t) { .term_signal = SIGKILL };
        expect_reason(&e, "killed by signal 9 (Killed)");
        e = (npf_analyze_exit_t) { .spawn_error = UV_ENOENT };
        expect_reason(&e, "cannot run /usr/bin/npuprof-replay: no such file or directory");
        e = exited(0, "progress: 100%\n");
        expect_reason(&e, NULL);
        e.report_missing = true;
        expect_reason(&e, "the analyzer exited 0 but wrote no report.json");
        /* The last line, without the program's name, progress lines (\r) and blank lines skipped. */
        e = exited(1, "reading 10%\rreading 20%\rnpuprof-replay: report.json: cannot open: Permission denied\n\n");
        expect_reason(&e, "report.json: cannot open: Permission denied");
        e = exited(1, "trace.json: not a regular file");
        expect_reason(&e, "trace.json: not a regular file");
        e = exited(1, "");
        expect_reason(&e, "exit status 1, nothing said on stderr");
        e = exited(2, "npuprof-replay: unknown option '--limit-cpu'\n");
        expect_reason(&e, "the analyzer refused its command line: unknown option '--limit-cpu'");
        e = exited(7, "npuprof-replay: odd\n");
        expect_reason(&e, "exit status 7: odd");
}

/* What a child writes is shown as text: control characters and bytes that are not UTF-8 become '?'. */
static void test_reason_is_clean_text(void **state)
{
        char tail[2048], got[NPF_ANALYZE_REASON_MAX];
        npf_analyze_exit_t e;
        json_t *j;

        (void) state;
        e = exited(1, "bad \x1b[31mred\x1b[0m \xff\xfe caf\xc3\xa9 \xed\xa0\x80 \xc3\n");
        expect_reason(&e, "bad ?[31mred?[0m ?? caf\xc3\xa9 ??? ?");
        /* A long line is cut at a character, ends in "...", and is still UTF-8. */
        size_t n = 0;
        for (; n + 2 < 1500; n += 2)
                memcpy(tail + n, "\xc3\xa9", 2);
        tail[n] = '\0';
        e = exited(1, tail);
        assert_true(npf__analyze_reason(&e, &limits, got, sizeof(got)));
        assert_true(strlen(got) < NPF_ANALYZE_REASON_MAX);
        assert_true(strlen(got) > NPF_ANALYZE_REASON_MAX - 8);
        assert_string_equal(got + strlen(got) - 3, "...");
        j = json_string(got);
        assert_non_null(j);
        json_decref(j);
        /* A small buffer is never overrun. */
        char small[8];
        memset(small, 'x', sizeof(small));
        e = exited(1, "npuprof-replay: a long story\n");
        assert_true(npf__analyze_reason(&e, &limits, small, 6));
        assert_int_equal(strlen(small), 5);
        assert_int_equal(small[7], 'x');
}

/* --- the queue on a loop -------------------------------------------------------------- */

typedef struct world {
        uv_loop_t loop;
        uv_timer_t guard;               /* fails the test if the loop would run for ever */
        npf_analyze_t *a;
        char dir[64];
        unsigned running, max_running, ended;
        int last_pid;
} world_t;

static void on_guard(uv_timer_t *t)
{
        (void) t;
        fail_msg("the loop ran for 60 s without ending");
}

static void on_event(const npf_analysis_event_t *ev, void *data)
{
        world_t *w = data;

        if (ev->state == NPF_ANALYSIS_RUNNING) {
                w->last_pid = ev->pid;
                if (++w->running > w->max_running)
                        w->max_running = w->running;
                return;
        }
        w->ended++;
        w->running--;
}

static void world_init(world_t *w, const npf_analyze_options_t *opt)
{
        memset(w, 0, sizeof(*w));
        assert_int_equal(uv_loop_init(&w->loop), 0);
        uv_timer_init(&w->loop, &w->guard);
        uv_timer_start(&w->guard, on_guard, 60000, 0);
        uv_unref((uv_handle_t *) &w->guard);
        snprintf(w->dir, sizeof(w->dir), "/tmp/npf-test-analyze.XXXXXX");
        assert_non_null(mkdtemp(w->dir));
        assert_int_equal(npf_analyze_new(&w->loop, opt, on_event, w, &w->a), 0);
}

/* Run until every analysis has ended (the loop has nothing else to do). */
static void world_run(world_t *w)
{
        uv_run(&w->loop, UV_RUN_DEFAULT);
}

static void world_done(world_t *w)
{
        char cmd[128];

        npf_analyze_close(w->a);
        uv_close((uv_handle_t *) &w->guard, NULL);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&w->loop), 0);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", w->dir);
        assert_int_equal(system(cmd), 0);
}

/* Make the window directory @name and queue it as window @id. */
static int queue(world_t *w, uint64_t id, const char *name)
{
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/%s", w->dir, name);
        assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
        return npf_analyze_window(w->a, id, path, NULL, (uid_t) -1, (gid_t) -1);
}

/* Window @id's analysis as JSON must have @state; and @words in its reason, when not NULL. */
static void expect_state(world_t *w, uint64_t id, const char *state, const char *words)
{
        json_t *j = npf_analyze_window_json(w->a, id);
        const char *got = json_string_value(json_object_get(j, "state"));
        const char *reason = json_string_value(json_object_get(j, "reason"));

        if (!got || strcmp(got, state) != 0 || (words && (!reason || !strstr(reason, words))))
                fail_msg("window %llu: state %s, reason \"%s\"; expected %s with \"%s\"", (unsigned long long) id,
                         got ? got : "(none)", reason ? reason : "", state, words ? words : "");
        json_decref(j);
}

static json_int_t count(world_t *w, const char *key)
{
        json_t *s = npf_analyze_summary_json(w->a);
        json_int_t n = json_integer_value(json_object_get(s, key));

        json_decref(s);
        return n;
}

static npf_analyze_options_t options(unsigned jobs, uint64_t timeout_s)
{
        return (npf_analyze_options_t) { .analyzer = self, .jobs = jobs, .timeout_s = timeout_s,
                                         .memory_bytes = 2 * GiB, .nice = 7 };
}

static void test_off(void **state)
{
        npf_analyze_options_t opt = options(0, 600);
        world_t w;

        (void) state;
        world_init(&w, &opt);
        assert_int_equal(queue(&w, 1, "ok"), -ECANCELED);
        assert_int_equal(npf_analyze_refuse(w.a, 2, "no"), -ECANCELED);
        assert_null(npf_analyze_window_json(w.a, 1));
        json_t *s = npf_analyze_summary_json(w.a);
        assert_true(json_is_false(json_object_get(s, "enabled")));
        json_decref(s);
        world_done(&w);
}

static void test_cannot_run(void **state)
{
        npf_analyze_options_t opt = options(1, 600);
        world_t w;

        (void) state;
        opt.analyzer = "/nonexistent/npuprof-replay";
        world_init(&w, &opt);
        /* Each start fails at once and the next is taken, till the queue is empty. */
        for (uint64_t id = 1; id <= 5; id++)
                assert_int_equal(queue(&w, id, "ok"), 0);
        world_run(&w);
        for (uint64_t id = 1; id <= 5; id++)
                expect_state(&w, id, "failed", "cannot run /nonexistent/npuprof-replay: no such file or directory");
        assert_int_equal(count(&w, "failed"), 5);
        assert_int_equal(count(&w, "running") + count(&w, "queued"), 0);
        world_done(&w);
}

static void test_refuse_and_duplicates(void **state)
{
        npf_analyze_options_t opt = options(1, 600);
        world_t w;

        (void) state;
        world_init(&w, &opt);
        assert_int_equal(npf_analyze_refuse(w.a, 5, "not analysed: the rank named no window directory"), 0);
        expect_state(&w, 5, "failed", "the rank named no window directory");
        assert_int_equal(npf_analyze_refuse(w.a, 5, "again"), -EEXIST);
        assert_int_equal(queue(&w, 5, "ok"), -EEXIST);
        assert_int_equal(queue(&w, 0, "ok"), -EEXIST);
        assert_null(npf_analyze_window_json(w.a, 6));
        json_t *j = npf_analyze_window_json(w.a, 5);
        assert_true(json_is_null(json_object_get(j, "report")));
        assert_true(json_is_real(json_object_get(j, "seconds")));
        json_decref(j);
        world_done(&w);
}

/* The file at @path, whole, into @buf (@size bytes with the NUL). */
static void slurp(const char *path, char *buf, size_t size)
{
        FILE *f = fopen(path, "r");

        assert_non_null(f);
        size_t n = fread(buf, 1, size - 1, f);
        buf[n] = '\0';
        fclose(f);
}

/* The analyzer gets its limits, its output directory and the window, in that order. */
static void test_command_line(void **state)
{
        npf_analyze_options_t opt = options(1, 42);
        char path[PATH_MAX], want[PATH_MAX * 3], got[PATH_MAX * 3] = "";
        world_t w;

        (void) state;
        world_init(&w, &opt);
        assert_int_equal(queue(&w, 1, "args"), 0);
        expect_state(&w, 1, "running", NULL);
        world_run(&w);
        expect_state(&w, 1, "done", NULL);
        snprintf(path, sizeof(path), "%s/args/analysis/report.json", w.dir);
        json_t *j = npf_analyze_window_json(w.a, 1);
        assert_string_equal(json_string_value(json_object_get(j, "report")), path);
        assert_true(json_is_null(json_object_get(j, "reason")));
        json_decref(j);
        slurp(path, got, sizeof(got));
        snprintf(want, sizeof(want), "--nice\n7\n--limit-cpu\n42\n--wait\n21\n-o\n%s/args/analysis\n--limit-memory\n%llu\n%s/args\n",
                 w.dir, (unsigned long long) (2 * GiB), w.dir);
        assert_string_equal(got, want);

        /* Without a memory limit, the option is left out; an output directory of the caller's is used. */
        world_done(&w);
        opt.memory_bytes = 0;
        world_init(&w, &opt);
        snprintf(path, sizeof(path), "%s/args", w.dir);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(want, sizeof(want), "%s/elsewhere", w.dir);
        assert_int_equal(npf_analyze_window(w.a, 1, path, want, (uid_t) -1, (gid_t) -1), 0);
        world_run(&w);
        expect_state(&w, 1, "done", NULL);
        snprintf(path, sizeof(path), "%s/elsewhere/report.json", w.dir);
        slurp(path, got, sizeof(got));
        snprintf(want, sizeof(want), "--nice\n7\n--limit-cpu\n42\n--wait\n21\n-o\n%s/elsewhere\n%s/args\n", w.dir, w.dir);
        assert_string_equal(got, want);
        world_done(&w);
}

/*
 * One job at a time, a queue of two: a child that hangs holds the only job; of three more
 * windows the first waits longest and is dropped; the hanging child reaches the time limit
 * and the two others run, one after the other.
 */
static void test_queue_and_time_limit(void **state)
{
        npf_analyze_options_t opt = options(1, 1);
        world_t w;

        (void) state;
        opt.queue_max = 2;
        world_init(&w, &opt);
        assert_int_equal(queue(&w, 1, "hold"), 0);
        assert_int_equal(queue(&w, 2, "ok2"), 0);
        assert_int_equal(queue(&w, 3, "ok3"), 0);
        expect_state(&w, 1, "running", NULL);
        expect_state(&w, 2, "queued", NULL);
        json_t *j = npf_analyze_window_json(w.a, 2);
        assert_true(json_is_null(json_object_get(j, "seconds")));
        json_decref(j);
        assert_int_equal(queue(&w, 4, "ok4"), 0);
        expect_state(&w, 2, "failed", "dropped from the queue, where 2 windows were waiting");
        expect_state(&w, 3, "queued", NULL);
        expect_state(&w, 4, "queued", NULL);
        assert_int_equal(count(&w, "queued"), 2);
        assert_int_equal(count(&w, "running"), 1);
        assert_int_equal(count(&w, "dropped"), 1);
        world_run(&w);
        expect_state(&w, 1, "failed", "time limit of 1 s reached");
        expect_state(&w, 3, "done", NULL);
        expect_state(&w, 4, "done", NULL);
        assert_int_equal(w.max_running, 1);
        assert_int_equal(count(&w, "done"), 2);
        assert_int_equal(count(&w, "failed"), 2);
        assert_int_equal(count(&w, "queued") + count(&w, "running"), 0);
        world_done(&w);
}

static void test_signal(void **state)
{
        npf_analyze_options_t opt = options(2, 600);
        world_t w;

        (void) state;
        world_init(&w, &opt);
        assert_int_equal(queue(&w, 1, "segv"), 0);
        assert_int_equal(queue(&w, 2, "ok"), 0);
        assert_int_equal(w.max_running, 2);
        world_run(&w);
        expect_state(&w, 1, "failed", "killed by signal 11 (Segmentation fault)");
        expect_state(&w, 2, "done", NULL);
        world_done(&w);
}

/* 100 KB on stderr: only the end is kept, and the last line is the reason. */
static void test_stderr_tail(void **state)
{
        npf_analyze_options_t opt = options(1, 600);
        world_t w;

        (void) state;
        world_init(&w, &opt);
        assert_int_equal(queue(&w, 1, "noisy"), 0);
        world_run(&w);
        json_t *j = npf_analyze_window_json(w.a, 1);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "trace.json: the last words");
        json_decref(j);
        world_done(&w);
}

/* Closing the queue kills a running child and lets the loop end at once. */
static void test_close_kills(void **state)
{
        npf_analyze_options_t opt = options(1, 600);
        world_t w;

        (void) state;
        world_init(&w, &opt);
        assert_int_equal(queue(&w, 1, "hold"), 0);
        assert_int_equal(queue(&w, 2, "ok"), 0);
        assert_true(w.last_pid > 0);
        int pid = w.last_pid;
        world_done(&w);
        /* Killed, and left for this process to reap. */
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGKILL);
        assert_int_equal(w.ended, 0);
}

int main(int argc, char **argv)
{
        static const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_bytes),
                cmocka_unit_test(test_format_bytes),
                cmocka_unit_test(test_reason_limits),
                cmocka_unit_test(test_reason_signals_and_statuses),
                cmocka_unit_test(test_reason_is_clean_text),
                cmocka_unit_test(test_off),
                cmocka_unit_test(test_cannot_run),
                cmocka_unit_test(test_refuse_and_duplicates),
                cmocka_unit_test(test_command_line),
                cmocka_unit_test(test_queue_and_time_limit),
                cmocka_unit_test(test_signal),
                cmocka_unit_test(test_stderr_tail),
                cmocka_unit_test(test_close_kills),
        };
        ssize_t n;

        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], "--limit-cpu") == 0)
                        return child(argc, argv);
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
                return 1;
        self[n] = '\0';
        return cmocka_run_group_tests(tests, NULL, NULL);
}
