/* SPDX-License-Identifier: MIT */
/*
 * Every thread's stack, as npf_stacks_write() reads it in its own process: threads blocked
 * in functions of this file (in a condition variable's futex, in nanosleep, at the bottom
 * of a deep recursion), the main thread waiting for the writer, named with their callers;
 * every thread listed; a thread that blocks the signal, and one that cannot take it (held
 * in a ptrace stop by a child), said so, the write ending all the same and the process
 * living on when the late signal comes; the signal's previous action put back; the
 * interpreter's hook, raised on the writer's thread with its descriptor pointed at the
 * output and then at /dev/null.
 */
#include "rank/stacks.h"
#include "npuprof/rank.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "insyscall.h"

#define NOINLINE __attribute__((noinline))
#define DEPTH 200                       /* frames of the deep thread: more than NPF_STACKS_FRAMES_MAX */

static pid_t gettid_(void)
{
        return (pid_t) syscall(SYS_gettid);
}

/* --- the threads, each in a function of its own ------------------------------------------- */

typedef struct blocked {
        pthread_t thread;
        _Atomic pid_t tid;
        sem_t entered;                  /* posted from inside the named function */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stop;                      /* under lock */
        bool block_signal;              /* the thread blocks NPF_STACKS_SIGNAL */
} blocked_t;

static blocked_t *blocked_new(bool block_signal)
{
        blocked_t *b = calloc(1, sizeof(*b));

        assert_non_null(b);
        sem_init(&b->entered, 0, 0);
        pthread_mutex_init(&b->lock, NULL);
        pthread_cond_init(&b->cond, NULL);
        b->block_signal = block_signal;
        return b;
}

static bool stopped(blocked_t *b)
{
        pthread_mutex_lock(&b->lock);
        bool s = b->stop;
        pthread_mutex_unlock(&b->lock);
        return s;
}

static NOINLINE void stuck_in_cond_wait(blocked_t *b)
{
        pthread_mutex_lock(&b->lock);
        sem_post(&b->entered);
        while (!b->stop)
                pthread_cond_wait(&b->cond, &b->lock);
        pthread_mutex_unlock(&b->lock);
}

static NOINLINE void stuck_in_nanosleep(blocked_t *b)
{
        sem_post(&b->entered);
        while (!stopped(b))
                nanosleep(&(struct timespec) { .tv_sec = 0, .tv_nsec = 20000000 }, NULL);
}

static int recursion_goes_deep(blocked_t *b, int depth);

/* Called through this pointer, the recursion cannot be made a loop. */
static int (*volatile recurse)(blocked_t *, int) = recursion_goes_deep;

/* @depth frames of recursion_goes_deep() below the thread's start, the last one stuck. */
static NOINLINE int recursion_goes_deep(blocked_t *b, int depth)
{
        if (depth > 0)
                return recurse(b, depth - 1) + 1;
        stuck_in_cond_wait(b);
        return 0;
}

static void *start_cond(void *arg)
{
        blocked_t *b = arg;

        if (b->block_signal) {
                sigset_t one;
                sigemptyset(&one);
                sigaddset(&one, NPF_STACKS_SIGNAL);
                pthread_sigmask(SIG_BLOCK, &one, NULL);
        }
        atomic_store(&b->tid, gettid_());
        stuck_in_cond_wait(b);
        return NULL;
}

static void *start_sleep(void *arg)
{
        blocked_t *b = arg;

        atomic_store(&b->tid, gettid_());
        stuck_in_nanosleep(b);
        return NULL;
}

/* Never returns: its caller's call to it is the caller's last instruction. */
static NOINLINE __attribute__((noreturn)) void never_returns(blocked_t *b)
{
        stuck_in_cond_wait(b);
        for (;;)
                pause();
}

/*
 * The return address into this function is its end, the first byte of whatever follows it:
 * only the byte before names it (libdwfl.h, dwfl_frame_pc(): isactivation).
 */
static NOINLINE void *start_noreturn(void *arg)
{
        blocked_t *b = arg;

        atomic_store(&b->tid, gettid_());
        never_returns(b);
}

static void *start_deep(void *arg)
{
        blocked_t *b = arg;

        atomic_store(&b->tid, gettid_());
        return (void *) (intptr_t) recursion_goes_deep(b, DEPTH);
}

/* Start @b on @start and wait until it is inside its named function, asleep in system call @nr. */
static void blocked_start(blocked_t *b, void *(*start)(void *), long nr)
{
        assert_int_equal(pthread_create(&b->thread, NULL, start, b), 0);
        while (sem_wait(&b->entered) < 0 && errno == EINTR)
                ;
        wait_in_syscall(atomic_load(&b->tid), nr);
}

static void blocked_stop(blocked_t *b)
{
        pthread_mutex_lock(&b->lock);
        b->stop = true;
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
        pthread_join(b->thread, NULL);
        sem_destroy(&b->entered);
        pthread_cond_destroy(&b->cond);
        pthread_mutex_destroy(&b->lock);
        free(b);
}

/* --- the writer, on a thread of its own while the main thread waits ------------------------- */

typedef struct dump {
        int fd;                         /* a memfd */
        pid_t tid;                      /* the writer's thread */
        int r;
        char err[NPF_STACKS_ERR_MAX];
        char *text;                     /* what was written, NUL-terminated */
} dump_t;

static void *write_stacks(void *arg)
{
        dump_t *d = arg;

        d->tid = gettid_();
        d->r = npf_stacks_write(d->fd, d->err);
        return NULL;
}

/* The main thread, waiting in a function of its own while another thread writes the stacks. */
static NOINLINE void main_waits_for_dump(dump_t *d)
{
        pthread_t t;

        assert_int_equal(pthread_create(&t, NULL, write_stacks, d), 0);
        pthread_join(t, NULL);
}

static char *read_all(int fd)
{
        off_t size = lseek(fd, 0, SEEK_END);
        char *text = malloc((size_t) size + 1);

        assert_non_null(text);
        assert_int_equal(pread(fd, text, (size_t) size, 0), size);
        text[size] = '\0';
        return text;
}

static void dump_run(dump_t *d)
{
        *d = (dump_t) { .fd = memfd_create("stacks", MFD_CLOEXEC) };
        assert_true(d->fd >= 0);
        main_waits_for_dump(d);
        if (d->r != 0)
                fail_msg("npf_stacks_write: %d %s", d->r, d->err);
        d->text = read_all(d->fd);
}

static void dump_free(dump_t *d)
{
        close(d->fd);
        free(d->text);
}

/* The part of @text about thread @tid, up to the next part; NULL if none. Freed by the caller. */
static char *section(const char *text, pid_t tid)
{
        char head[32];

        snprintf(head, sizeof(head), "\nthread %d \"", (int) tid);
        const char *p = strstr(text, head);
        if (!p)
                return NULL;
        p++;
        const char *end = strstr(p, "\nthread ");
        const char *interp = strstr(p, "\ninterpreter stacks");
        const char *last = strstr(p, "\nend of the stacks");
        if (!end || (interp && interp < end))
                end = interp;
        if (!end || (last && last < end))
                end = last;
        return strndup(p, end ? (size_t) (end - p) : strlen(p));
}

/* Fail, showing @text, unless @part holds @words. */
static void expect_in(const char *part, const char *words, const char *text)
{
        if (!part || !strstr(part, words)) {
                fprintf(stderr, "--- the whole output:\n%s--- end\n", text);
                fail_msg("\"%s\" is not in the part:\n%s", words, part ? part : "(no such part)");
        }
}

/* The frames of @part, in order: each of @names must come after the one before. */
static void expect_in_order(const char *part, const char *const *names, size_t n, const char *text)
{
        const char *p = part;

        for (size_t i = 0; i < n; i++) {
                const char *q = p ? strstr(p, names[i]) : NULL;
                if (!q) {
                        fprintf(stderr, "--- the whole output:\n%s--- end\n", text);
                        fail_msg("\"%s\" is not after \"%s\" in the part:\n%s", names[i],
                                 i ? names[i - 1] : "the start", part ? part : "(no such part)");
                }
                p = q + strlen(names[i]);
        }
}

/* --- the tests ------------------------------------------------------------------------------ */

static NOINLINE void test_names_every_thread(void **state)
{
        blocked_t *cond = blocked_new(false), *sleep = blocked_new(false);
        dump_t d;

        (void) state;
        blocked_start(cond, start_cond, SYS_futex);
        blocked_start(sleep, start_sleep, SYS_clock_nanosleep);
        dump_run(&d);

        char head[64];
        snprintf(head, sizeof(head), "stacks of process %d (", (int) getpid());
        expect_in(d.text, head, d.text);

        char *c = section(d.text, atomic_load(&cond->tid));
        static const char *const cond_frames[] = { "pthread_cond_wait", " stuck_in_cond_wait+0x", " start_cond+0x" };
        expect_in_order(c, cond_frames, 3, d.text);
        expect_in(c, "/test-stacks.c:", d.text);
        char *s = section(d.text, atomic_load(&sleep->tid));
        static const char *const sleep_frames[] = { "nanosleep", " stuck_in_nanosleep+0x", " start_sleep+0x" };
        expect_in_order(s, sleep_frames, 3, d.text);
        char *m = section(d.text, getpid());
        static const char *const main_frames[] = { " main_waits_for_dump+0x", " test_names_every_thread+0x",
                                                   " main+0x" };
        expect_in_order(m, main_frames, 3, d.text);
        /* Frame lines: "#N 0xPC function+0xOFF (module) [file:line]". */
        expect_in(m, "  #0 0x", d.text);
        expect_in(m, "/tests/test-stacks) [tests/test-stacks.c:", d.text);

        /*
         * Every thread but the writer (which has ended now), and nothing else: the test's three
         * and a sanitizer's own, which blocks every signal (TSan's background thread).
         */
        DIR *dir = opendir("/proc/self/task");
        struct dirent *e;
        int listed = 0, threads = 0;
        char blocks[64];
        snprintf(blocks, sizeof(blocks), "  (it blocks signal %d: ", NPF_STACKS_SIGNAL);
        assert_non_null(dir);
        while ((e = readdir(dir))) {
                pid_t tid = (pid_t) atoi(e->d_name);
                if (tid <= 0)
                        continue;
                threads++;
                char *part = section(d.text, tid);
                if (part) {
                        listed++;
                        expect_in(part, tid == atomic_load(&cond->tid) || tid == atomic_load(&sleep->tid) ||
                                        tid == getpid() || !strstr(part, blocks) ? "  #1 0x" : blocks, d.text);
                }
                free(part);
        }
        closedir(dir);
        assert_true(threads >= 3);
        assert_int_equal(listed, threads);
        snprintf(head, sizeof(head), "\nthreads: %d, besides thread %d ", threads, (int) d.tid);
        expect_in(d.text, head, d.text);
        char *w = section(d.text, d.tid);
        assert_null(w);
        expect_in(d.text, "\nend of the stacks of process ", d.text);

        free(c);
        free(s);
        free(m);
        dump_free(&d);
        blocked_stop(cond);
        blocked_stop(sleep);
}

static void test_frames_are_bounded(void **state)
{
        blocked_t *deep = blocked_new(false);
        dump_t d;
        char line[64];

        (void) state;
        blocked_start(deep, start_deep, SYS_futex);
        dump_run(&d);
        char *p = section(d.text, atomic_load(&deep->tid));
        static const char *const frames[] = { " stuck_in_cond_wait+0x", " recursion_goes_deep+0x" };
        expect_in_order(p, frames, 2, d.text);
        snprintf(line, sizeof(line), "  #%u 0x", NPF_STACKS_FRAMES_MAX - 1);
        expect_in(p, line, d.text);
        snprintf(line, sizeof(line), "  #%u 0x", NPF_STACKS_FRAMES_MAX);
        assert_null(strstr(p, line));
        snprintf(line, sizeof(line), "(more frames, after the first %u)", NPF_STACKS_FRAMES_MAX);
        expect_in(p, line, d.text);
        free(p);
        dump_free(&d);
        blocked_stop(deep);
}

static void test_caller_of_a_call_that_never_returns(void **state)
{
        blocked_t *b = blocked_new(false);
        dump_t d;

        (void) state;
        blocked_start(b, start_noreturn, SYS_futex);
        dump_run(&d);
        char *p = section(d.text, atomic_load(&b->tid));
        static const char *const frames[] = { " stuck_in_cond_wait+0x", " never_returns+0x", " start_noreturn+0x" };
        expect_in_order(p, frames, 3, d.text);
        free(p);
        dump_free(&d);
        /* It never returns: the thread is let go by cancelling it, in pthread_cond_wait. */
        pthread_cancel(b->thread);
        pthread_join(b->thread, NULL);
        free(b);
}

static int handler_marks;

static void marker(int sig)
{
        (void) sig;
        handler_marks++;
}

static void test_blocking_thread_said_and_action_restored(void **state)
{
        blocked_t *b = blocked_new(true);
        struct sigaction mine = { .sa_handler = marker }, now;
        dump_t d;
        char words[96];

        (void) state;
        sigemptyset(&mine.sa_mask);
        assert_int_equal(sigaction(NPF_STACKS_SIGNAL, &mine, NULL), 0);
        blocked_start(b, start_cond, SYS_futex);
        dump_run(&d);
        char *p = section(d.text, atomic_load(&b->tid));
        snprintf(words, sizeof(words), "(it blocks signal %d: its frames were not read)", NPF_STACKS_SIGNAL);
        expect_in(p, words, d.text);
        /* The main thread, which took the signal, was read. */
        char *m = section(d.text, getpid());
        expect_in(m, " main_waits_for_dump+0x", d.text);
        /* Everyone answered: the previous action is back. */
        assert_int_equal(sigaction(NPF_STACKS_SIGNAL, NULL, &now), 0);
        assert_ptr_equal(now.sa_handler, marker);
        assert_int_equal(handler_marks, 0);
        free(p);
        free(m);
        dump_free(&d);
        blocked_stop(b);
        signal(NPF_STACKS_SIGNAL, SIG_DFL);
}

/*
 * A thread that cannot take the signal: a child ptrace-stops it (PTRACE_SEIZE, then
 * PTRACE_INTERRUPT), so that the signal stays pending until the child lets it go.
 * Return: the child, which detaches when @release is closed; 0 where ptrace is not allowed.
 */
static pid_t hold_in_ptrace_stop(pid_t tid, const int release[2])
{
        int ready[2];
        char c = 0;

        assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                int status;
                close(ready[0]);
                close(release[1]);
                if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0 || ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0 ||
                    waitpid(tid, &status, __WALL) != tid)
                        _exit(1);
                c = 1;
                if (write(ready[1], &c, 1) != 1)
                        _exit(1);
                while (read(release[0], &c, 1) < 0 && errno == EINTR)
                        ;
                ptrace(PTRACE_DETACH, tid, NULL, NULL);
                _exit(0);
        }
        close(ready[1]);
        ssize_t n = read(ready[0], &c, 1);
        close(ready[0]);
        if (n == 1 && c == 1)
                return child;
        waitpid(child, NULL, 0);
        return 0;
}

/* Return: true if signal @sig is pending for thread @tid (SigPnd of its status). */
static bool signal_pending(pid_t tid, int sig)
{
        char path[64], buf[4096];
        int fd;

        snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int) tid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        assert_true(n > 0);
        buf[n] = '\0';
        const char *p = strstr(buf, "\nSigPnd:");
        assert_non_null(p);
        return (strtoull(p + 8, NULL, 16) >> (sig - 1)) & 1;
}

static void test_thread_that_cannot_answer(void **state)
{
        blocked_t *b = blocked_new(false), *other = blocked_new(false);
        struct sigaction now;
        int release[2];
        dump_t d;
        char words[96];

        (void) state;
        blocked_start(b, start_cond, SYS_futex);
        blocked_start(other, start_sleep, SYS_clock_nanosleep);
        assert_int_equal(pipe2(release, O_CLOEXEC), 0);
        pid_t tracer = hold_in_ptrace_stop(atomic_load(&b->tid), release);
        close(release[0]);
        if (tracer == 0) {
                close(release[1]);
                blocked_stop(b);
                blocked_stop(other);
                skip();         /* ptrace is not allowed here */
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        dump_run(&d);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        char *p = section(d.text, atomic_load(&b->tid));
        snprintf(words, sizeof(words), "(it did not take signal %d within %u ms: its frames were not read)",
                 NPF_STACKS_SIGNAL, NPF_STACKS_ANSWER_MS);
        expect_in(p, words, d.text);
        /* The threads after it were read all the same. */
        char *o = section(d.text, atomic_load(&other->tid));
        expect_in(o, " stuck_in_nanosleep+0x", d.text);
        int64_t ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        assert_true(ms >= NPF_STACKS_ANSWER_MS);
        /* The signal is pending in the stopped thread: the handler stayed, or it would end the process. */
        assert_true(signal_pending(atomic_load(&b->tid), NPF_STACKS_SIGNAL));
        assert_int_equal(sigaction(NPF_STACKS_SIGNAL, NULL, &now), 0);
        assert_true((now.sa_flags & SA_SIGINFO) && now.sa_sigaction != NULL);

        /* Let it go: it takes the late signal, which does nothing, and the process lives on. */
        close(release[1]);
        int status;
        assert_int_equal(waitpid(tracer, &status, 0), tracer);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        for (int i = 0; i < 10000 && signal_pending(atomic_load(&b->tid), NPF_STACKS_SIGNAL); i++)
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        assert_false(signal_pending(atomic_load(&b->tid), NPF_STACKS_SIGNAL));
        free(p);
        free(o);
        dump_free(&d);
        blocked_stop(b);
        blocked_stop(other);
        signal(NPF_STACKS_SIGNAL, SIG_DFL);
}

/* --- the interpreter's hook ------------------------------------------------------------------ */

static int interp_fd;
static _Atomic pid_t interp_tid;

/* As faulthandler's handler does: write to the descriptor it was given. */
static void interpreter_dumps(int sig)
{
        static const char line[] = "Thread 0x1 (most recent call first):\n  File \"x.py\", line 7 in stuck\n";

        (void) sig;
        atomic_store(&interp_tid, gettid_());
        if (write(interp_fd, line, sizeof(line) - 1) < 0)
                abort();
}

static void test_interpreter_hook(void **state)
{
        int signo = SIGRTMAX - 4;
        struct sigaction sa = { .sa_handler = interpreter_dumps };
        struct stat st, null;
        dump_t d;

        (void) state;
        interp_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        assert_true(interp_fd >= 0);
        sigemptyset(&sa.sa_mask);
        assert_int_equal(sigaction(signo, &sa, NULL), 0);
        /* The writer's thread blocks it, as the library's watcher blocks every signal. */
        sigset_t one, old;
        sigemptyset(&one);
        sigaddset(&one, signo);
        pthread_sigmask(SIG_BLOCK, &one, &old);
        npf_stacks_set_interpreter(signo, interp_fd);
        dump_run(&d);
        pthread_sigmask(SIG_SETMASK, &old, NULL);

        char head[64];
        snprintf(head, sizeof(head), "\ninterpreter stacks (signal %d):\n", signo);
        const char *native = strstr(d.text, "\nthread "), *interp = strstr(d.text, head);
        assert_non_null(native);
        if (!interp || interp < native)
                fail_msg("no interpreter part after the native one:\n%s", d.text);
        expect_in(interp, "  File \"x.py\", line 7 in stuck\n", d.text);
        expect_in(interp, "\nend of the stacks of process", d.text);
        assert_int_equal(atomic_load(&interp_tid), d.tid);
        /* Pointed back at /dev/null, still close-on-exec. */
        assert_int_equal(fstat(interp_fd, &st), 0);
        assert_int_equal(stat("/dev/null", &null), 0);
        assert_true(S_ISCHR(st.st_mode) && st.st_rdev == null.st_rdev);
        assert_true(fcntl(interp_fd, F_GETFD) & FD_CLOEXEC);
        dump_free(&d);

        /* Its handler gone: said so, and no signal raised (the default action would end the process). */
        signal(signo, SIG_DFL);
        dump_run(&d);
        char words[80];
        snprintf(words, sizeof(words), "(signal %d has no handler any more: nothing to ask)", signo);
        expect_in(d.text, words, d.text);
        dump_free(&d);

        /* Off. */
        npf_stacks_set_interpreter(0, -1);
        dump_run(&d);
        assert_null(strstr(d.text, "interpreter stacks"));
        dump_free(&d);
        close(interp_fd);
}

static void test_write_error(void **state)
{
        char err[NPF_STACKS_ERR_MAX] = "";
        int p[2];

        (void) state;
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        close(p[0]);
        signal(SIGPIPE, SIG_IGN);
        assert_int_equal(npf_stacks_write(p[1], err), -EPIPE);
        assert_non_null(strstr(err, "cannot write the stacks: "));
        close(p[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names_every_thread),
                cmocka_unit_test(test_frames_are_bounded),
                cmocka_unit_test(test_caller_of_a_call_that_never_returns),
                cmocka_unit_test(test_blocking_thread_said_and_action_restored),
                cmocka_unit_test(test_thread_that_cannot_answer),
                cmocka_unit_test(test_interpreter_hook),
                cmocka_unit_test(test_write_error),
        };
        int failed = cmocka_run_group_tests(tests, NULL, NULL);

        /* Not a tail call: main stays on the stack the tests read. */
        fflush(stdout);
        return failed;
}
