/* SPDX-License-Identifier: MIT */
/*
 * Every thread's stack, read by the process itself.
 *
 * The writer takes the threads one at a time. For each, it sets the capture word to
 * "asked" under a new ticket and sends NPF_STACKS_SIGNAL with tgkill(); the thread's
 * handler (raw futexes and atomics only: async-signal-safe) copies the interrupted
 * registers from its ucontext into the capture block, sets "taken" and waits on the word.
 * The writer unwinds the stack from those registers with libdwfl while the thread waits,
 * sets "released", and waits for the handler to set "idle" and return. The ticket rides in
 * the word with the state, so that a handler that runs late (a thread that took the signal
 * after the writer gave up on it) never acts on another thread's capture; and the handler
 * holds its thread at most NPF_STACKS_HOLD_MS, whatever the writer does.
 *
 * The unwinding is elfutils' (libdwfl.h): one Dwfl per write, its modules reported from
 * /proc/self/maps (dwfl_linux_proc_report()), attached with dwfl_attach_state() to thread
 * callbacks of our own that give the captured registers (set_initial_registers) and read
 * this process's memory where a bad address cannot crash it (memory_read:
 * process_vm_readv() on our own pid, else a write() of the word into a pipe, which the
 * kernel refuses with EFAULT). The stack is unwound while the thread is held, and only its
 * program counters are kept: the names and source lines are looked up once it goes on.
 */
#include "rank/stacks.h"
#include "npuprof/rank.h"
#include "lib/futex.h"

#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* --- the registers of an interrupted thread, as DWARF numbers them ------------------------- */

#if defined(__x86_64__)
/*
 * DWARF registers 0 to 16 of the x86-64 psABI: rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp,
 * r8 to r15, and the return address column 16, rip, from which libdwfl takes the first
 * frame's pc (no dwfl_thread_state_register_pc() needed: frame.c, state_fetch_pc()).
 */
#define NREGS 17
static const int greg_of[NREGS] = {
        REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
        REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP,
};

static void take_registers(const ucontext_t *uc, uint64_t *regs, uint64_t *pc)
{
        for (int i = 0; i < NREGS; i++)
                regs[i] = (uint64_t) uc->uc_mcontext.gregs[greg_of[i]];
        *pc = regs[16];
}
#elif defined(__aarch64__)
/*
 * DWARF registers 0 to 31 of AAPCS64: x0 to x30 and sp. The return address column is x30
 * (the link register), not the pc, which is handed over apart with
 * dwfl_thread_state_register_pc().
 */
#define NREGS 32
static void take_registers(const ucontext_t *uc, uint64_t *regs, uint64_t *pc)
{
        for (int i = 0; i < 31; i++)
                regs[i] = uc->uc_mcontext.regs[i];
        regs[31] = uc->uc_mcontext.sp;
        *pc = uc->uc_mcontext.pc;
}
#else
#define NREGS 0
#endif

/* --- the capture block, shared with the handler -------------------------------------------- */

enum {
        CAPTURE_IDLE = 0,
        CAPTURE_ASKED,          /* the writer sent the signal to capture.tid */
        CAPTURE_TAKING,         /* the handler is copying the registers */
        CAPTURE_TAKEN,          /* they are copied; the thread waits */
        CAPTURE_RELEASED,       /* the writer is done with it */
};
#define STATE_BITS 3u
#define STATE_MASK ((1u << STATE_BITS) - 1u)

static struct {
        _Atomic uint32_t word;          /* ticket << STATE_BITS | state: the futex both sides wait on */
        _Atomic int32_t tid;            /* the thread asked */
        uint64_t regs[NREGS > 0 ? NREGS : 1];
        uint64_t pc;
} capture;

static const uint32_t *capture_futex(void)
{
        return (const uint32_t *) &capture.word;
}

/* CLOCK_MONOTONIC in ms. Async-signal-safe. */
static uint64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* In the handler: wait to be released, at most NPF_STACKS_HOLD_MS, then let go of @mine. */
static void hold(uint32_t mine)
{
        uint32_t taken = mine | CAPTURE_TAKEN, released = mine | CAPTURE_RELEASED;
        uint64_t until = now_ms() + NPF_STACKS_HOLD_MS;

        for (;;) {
                uint32_t w = atomic_load_explicit(&capture.word, memory_order_acquire);
                uint64_t now = now_ms();

                if (w == released || (w == taken && now >= until)) {
                        /* Released, or the writer is too late: it finds the word moved on and says so. */
                        if (atomic_compare_exchange_strong(&capture.word, &w, mine | CAPTURE_IDLE)) {
                                npf_futex_wake(capture_futex(), false, INT32_MAX);
                                return;
                        }
                        continue;
                }
                if (w != taken)
                        return;
                npf_futex_wait(capture_futex(), taken, false, (uint32_t) (until - now));
        }
}

static void on_stacks_signal(int sig, siginfo_t *info, void *context)
{
        int saved = errno;
        uint32_t w = atomic_load_explicit(&capture.word, memory_order_acquire);

        (void) sig;
        (void) info;
        /* Only the thread asked, and only while it is asked: a signal taken late, or anyone else's, does nothing. */
        if ((w & STATE_MASK) == CAPTURE_ASKED &&
            atomic_load_explicit(&capture.tid, memory_order_relaxed) == (int32_t) syscall(SYS_gettid) &&
            atomic_compare_exchange_strong(&capture.word, &w, (w & ~STATE_MASK) | CAPTURE_TAKING)) {
                uint32_t mine = w & ~STATE_MASK;
#if NREGS > 0
                take_registers(context, capture.regs, &capture.pc);
#else
                (void) context;
#endif
                atomic_store_explicit(&capture.word, mine | CAPTURE_TAKEN, memory_order_release);
                npf_futex_wake(capture_futex(), false, INT32_MAX);
                hold(mine);
        }
        errno = saved;
}

/* --- what is written: a buffer over the descriptor ----------------------------------------- */

typedef struct out {
        int fd;
        int error;                      /* the first failed write's -errno */
        size_t len;
        char buf[16384];
} out_t;

static void out_flush(out_t *o)
{
        size_t done = 0;

        while (done < o->len && o->error == 0) {
                ssize_t n = write(o->fd, o->buf + done, o->len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        o->error = n < 0 ? -errno : -EIO;
                else
                        done += (size_t) n;
        }
        o->len = 0;
}

/* Append a line's worth of text; a longer one is cut. */
static void __attribute__((format(printf, 2, 3))) out_printf(out_t *o, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (sizeof(o->buf) - o->len < 4096)
                out_flush(o);
        va_start(ap, fmt);
        n = vsnprintf(o->buf + o->len, sizeof(o->buf) - o->len, fmt, ap);
        va_end(ap);
        if (n > 0)
                o->len += (size_t) n < sizeof(o->buf) - o->len ? (size_t) n : sizeof(o->buf) - o->len - 1;
}

/* --- the threads ---------------------------------------------------------------------------- */

typedef struct thread_info {
        char name[32];
        char state[32];                 /* "S (sleeping)" */
        bool blocks;                    /* it blocks NPF_STACKS_SIGNAL */
} thread_info_t;

static int cmp_tid(const void *a, const void *b)
{
        pid_t x = *(const pid_t *) a, y = *(const pid_t *) b;

        return (x > y) - (x < y);
}

/* The threads of this process, ascending, at most NPF_STACKS_THREADS_MAX. Return: their number, or -errno. */
static int list_threads(pid_t **ret_tids, bool *ret_more)
{
        DIR *d = opendir("/proc/self/task");
        pid_t *tids = NULL;
        size_t n = 0, size = 0;
        struct dirent *e;

        *ret_more = false;
        if (!d)
                return -errno;
        while ((e = readdir(d))) {
                char *end;
                long tid = strtol(e->d_name, &end, 10);
                if (*end || tid <= 0)
                        continue;
                if (n == NPF_STACKS_THREADS_MAX) {
                        *ret_more = true;
                        break;
                }
                if (n == size) {
                        size_t more = size ? 2 * size : 64;
                        pid_t *t = realloc(tids, more * sizeof(*t));
                        if (!t) {
                                free(tids);
                                closedir(d);
                                return -ENOMEM;
                        }
                        tids = t;
                        size = more;
                }
                tids[n++] = (pid_t) tid;
        }
        closedir(d);
        if (n)
                qsort(tids, n, sizeof(*tids), cmp_tid);
        *ret_tids = tids;
        return (int) n;
}

/* Read /proc/self/task/@tid/@what into @buf (NUL-terminated). Return: bytes read, or -1. */
static ssize_t read_task_file(pid_t tid, const char *what, char *buf, size_t size)
{
        char path[64];
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int) tid, what);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        do
                n = read(fd, buf, size - 1);
        while (n < 0 && errno == EINTR);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return n;
}

/* The value of line "@key:\t..." of a status file, up to the end of the line, into @ret. */
static void status_field(const char *status, const char *key, char *ret, size_t size)
{
        const char *p = status;
        size_t klen = strlen(key);

        ret[0] = '\0';
        for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
                        p += klen + 1;
                        p += strspn(p, " \t");
                        snprintf(ret, size, "%.*s", (int) strcspn(p, "\n"), p);
                        return;
                }
}

static void thread_info(pid_t tid, thread_info_t *ret)
{
        char status[4096], mask[32];

        *ret = (thread_info_t) { .blocks = false };
        if (read_task_file(tid, "comm", ret->name, sizeof(ret->name)) > 0)
                ret->name[strcspn(ret->name, "\n")] = '\0';
        if (read_task_file(tid, "status", status, sizeof(status)) <= 0)
                return;
        status_field(status, "State", ret->state, sizeof(ret->state));
        status_field(status, "SigBlk", mask, sizeof(mask));
        /* SigBlk is the blocked set in hex, signal s at bit s - 1 (proc(5)). */
        ret->blocks = (strtoull(mask, NULL, 16) >> (NPF_STACKS_SIGNAL - 1)) & 1;
}

/* --- the unwinder --------------------------------------------------------------------------- */

typedef struct frame {
        Dwarf_Addr pc;
        bool activation;                /* the pc is where the thread is, not a return address */
} frame_t;

typedef struct unwinder {
        Dwfl *dwfl;
        pid_t pid;
        pid_t tid;                      /* the thread being unwound */
        Dwarf_Word regs[NREGS > 0 ? NREGS : 1];
        Dwarf_Word pc;
        bool vm_readv_refused;
        int pipe[2];                    /* memory_read's fallback; -1 until it is needed */
        unsigned count;
        bool more;                      /* frames beyond NPF_STACKS_FRAMES_MAX */
        frame_t frames[NPF_STACKS_FRAMES_MAX];
} unwinder_t;

/* Dwfl_Thread_Callbacks.next_thread: threads are never iterated, only asked for by tid (get_thread). */
static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
        (void) dwfl;
        (void) arg;
        (void) thread_argp;
        return 0;
}

/* Dwfl_Thread_Callbacks.get_thread: the thread held now, and no other. */
static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
        unwinder_t *u = arg;

        (void) dwfl;
        if (tid != u->tid)
                return false;
        *thread_argp = u;
        return true;
}

/*
 * Dwfl_Thread_Callbacks.memory_read: one word of this process's memory at @addr, which
 * the unwinder computed from a stack and may be anything. process_vm_readv() reads it
 * without touching it from here; where that call is refused (a seccomp filter, say), the
 * kernel copies the word into a pipe, and says EFAULT for an address that is not mapped.
 * syscall(SYS_write): not write(), which a sanitizer checks as a read of ours.
 */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
        unwinder_t *u = arg;
        Dwarf_Word w;

        (void) dwfl;
        if (!u->vm_readv_refused) {
                struct iovec local = { .iov_base = &w, .iov_len = sizeof(w) };
                struct iovec remote = { .iov_base = (void *) (uintptr_t) addr, .iov_len = sizeof(w) };
                ssize_t n = process_vm_readv(u->pid, &local, 1, &remote, 1, 0);
                if (n == (ssize_t) sizeof(w)) {
                        *result = w;
                        return true;
                }
                if (n >= 0 || (errno != ENOSYS && errno != EPERM))
                        return false;
                u->vm_readv_refused = true;
        }
        if (u->pipe[0] < 0 && pipe2(u->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return false;
        ssize_t n = syscall(SYS_write, u->pipe[1], (const void *) (uintptr_t) addr, sizeof(w));
        if (n <= 0)
                return false;
        ssize_t got = read(u->pipe[0], &w, (size_t) n);
        if (n != (ssize_t) sizeof(w) || got != n)
                return false;
        *result = w;
        return true;
}

/*
 * Dwfl_Thread_Callbacks.set_initial_registers: the registers the handler copied. "After
 * this call, till at least thread_detach is called, the thread is assumed to be frozen"
 * (libdwfl.h): it is, in its handler, until the writer releases it.
 */
static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
        unwinder_t *u = thread_arg;

#if defined(__aarch64__)
        dwfl_thread_state_register_pc(thread, u->pc);
#endif
        return dwfl_thread_state_registers(thread, 0, NREGS, u->regs);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
        .next_thread = next_thread,
        .get_thread = get_thread,
        .memory_read = memory_read,
        .set_initial_registers = set_initial_registers,
};

/*
 * The modules are the files mapped into this process (/proc/self/maps; the vDSO read from
 * /proc/self/mem). A separate debug file is found by build ID on this machine
 * (/usr/lib/debug/.build-id/, where Debian's -dbgsym packages put them) and nowhere else:
 * dwfl_standard_find_debuginfo() would also ask the debuginfod servers of $DEBUGINFOD_URLS,
 * over the network, from inside a job that is already stuck.
 */
static const Dwfl_Callbacks dwfl_callbacks = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_build_id_find_debuginfo,
};

/* What unwinding needs while a thread is held is loaded before any is: each module's .eh_frame. */
static int preload_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start, void *arg)
{
        Dwarf_Addr bias;

        (void) userdata;
        (void) name;
        (void) start;
        (void) arg;
        dwfl_module_eh_cfi(mod, &bias);
        return DWARF_CB_OK;
}

/* A Dwfl of this process, attached to the callbacks above. Return: it, or NULL with why in @why. */
static Dwfl *unwinder_begin(unwinder_t *u, const char **why)
{
        Dwfl *dwfl = dwfl_begin(&dwfl_callbacks);
        int r;

        if (!dwfl) {
                *why = dwfl_errmsg(-1);
                return NULL;
        }
        dwfl_report_begin(dwfl);
        r = dwfl_linux_proc_report(dwfl, u->pid);
        if (dwfl_report_end(dwfl, NULL, NULL) != 0 || r != 0) {
                *why = r > 0 ? strerror(r) : dwfl_errmsg(-1);
                dwfl_end(dwfl);
                return NULL;
        }
        /* A NULL Elf: the architecture is the first module's (libdwfl.h, dwfl_attach_state()). */
        if (!dwfl_attach_state(dwfl, NULL, u->pid, &thread_callbacks, u)) {
                *why = dwfl_errmsg(-1);
                dwfl_end(dwfl);
                return NULL;
        }
        dwfl_getmodules(dwfl, preload_module, NULL, 0);
        return dwfl;
}

/* Keep each frame's pc, at most NPF_STACKS_FRAMES_MAX. */
static int on_frame(Dwfl_Frame *state, void *arg)
{
        unwinder_t *u = arg;
        Dwarf_Addr pc;
        bool activation;

        if (!dwfl_frame_pc(state, &pc, &activation) || pc == 0)
                return DWARF_CB_ABORT;
        if (u->count == NPF_STACKS_FRAMES_MAX) {
                u->more = true;
                return DWARF_CB_ABORT;
        }
        u->frames[u->count++] = (frame_t) { .pc = pc, .activation = activation };
        return DWARF_CB_OK;
}

/*
 * Stop thread @tid in its handler, under a new ticket. Return: the ticket with the thread
 * held; -EAGAIN when it did not take the signal within NPF_STACKS_ANSWER_MS; -ESRCH when
 * it is gone; another -errno of tgkill().
 */
static int64_t take_thread(pid_t pid, pid_t tid, uint32_t *ticket)
{
        uint32_t mine = (++*ticket << STATE_BITS) & ~STATE_MASK, asked = mine | CAPTURE_ASKED;
        uint64_t until = now_ms() + NPF_STACKS_ANSWER_MS;

        atomic_store_explicit(&capture.tid, tid, memory_order_relaxed);
        atomic_store_explicit(&capture.word, asked, memory_order_release);
        if (syscall(SYS_tgkill, pid, tid, NPF_STACKS_SIGNAL) < 0) {
                int r = -errno;
                atomic_store_explicit(&capture.word, mine | CAPTURE_IDLE, memory_order_relaxed);
                return r;
        }
        for (;;) {
                uint32_t w = atomic_load_explicit(&capture.word, memory_order_acquire);
                uint64_t now = now_ms();

                if (w == (mine | CAPTURE_TAKEN))
                        return mine;
                if (w == asked && now >= until) {
                        /* A late handler finds the word moved on, and returns. */
                        if (atomic_compare_exchange_strong(&capture.word, &w, mine | CAPTURE_IDLE))
                                return -EAGAIN;
                        continue;
                }
                /* Asked: until the bound. Taking: the handler stores "taken" next. */
                npf_futex_wait(capture_futex(), w, false, w == asked ? (uint32_t) (until - now) : 10u);
        }
}

/*
 * Let the thread held under @mine go on, and wait (bounded) until its handler let go of
 * the capture block. Return: false if the handler had let go already (it held the thread
 * as long as it may): the frames may have been read from a stack that moved.
 */
static bool release_thread(uint32_t mine)
{
        uint32_t w = mine | CAPTURE_TAKEN;
        bool held = atomic_compare_exchange_strong(&capture.word, &w, mine | CAPTURE_RELEASED);

        if (held) {
                uint64_t until = now_ms() + NPF_STACKS_HOLD_MS;
                npf_futex_wake(capture_futex(), false, INT32_MAX);
                while ((w = atomic_load_explicit(&capture.word, memory_order_acquire)) == (mine | CAPTURE_RELEASED)) {
                        uint64_t now = now_ms();
                        if (now >= until)
                                break;
                        npf_futex_wait(capture_futex(), w, false, (uint32_t) (until - now));
                }
        }
        atomic_store_explicit(&capture.tid, 0, memory_order_relaxed);
        return held;
}

/* One frame's line: "#N 0xPC function+0xOFF (module) [file:line]". */
static void write_frame(out_t *o, Dwfl *dwfl, unsigned n, const frame_t *f)
{
        /* A return address is past its call: its caller is looked up at the byte before (libdwfl.h, dwfl_frame_pc()). */
        Dwarf_Addr at = f->activation ? f->pc : f->pc - 1;
        Dwfl_Module *mod = dwfl_addrmodule(dwfl, at);
        const char *name = NULL, *module = NULL, *file = NULL;
        GElf_Off off = 0;
        GElf_Sym sym;
        int line = 0;

        if (mod) {
                module = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
                name = dwfl_module_addrinfo(mod, at, &off, &sym, NULL, NULL, NULL);
                Dwfl_Line *l = dwfl_module_getsrc(mod, at);
                if (l)
                        file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
        }
        out_printf(o, "  #%u 0x%016" PRIx64 " %s", n, (uint64_t) f->pc, name ? name : "??");
        if (name)
                out_printf(o, "+0x%" PRIx64, (uint64_t) (off + (f->pc - at)));
        if (module)
                out_printf(o, " (%s)", module);
        if (file)
                out_printf(o, " [%s:%d]", file, line);
        out_printf(o, "\n");
}

/*
 * The native frames of thread @tid, held under the handler while they are unwound.
 * Return: true if a signal was sent that the thread has not taken (it may take it later).
 */
static bool write_native(out_t *o, unwinder_t *u, pid_t tid, const thread_info_t *ti, uint32_t *ticket)
{
        if (ti->blocks) {
                out_printf(o, "  (it blocks signal %d: its frames were not read)\n", NPF_STACKS_SIGNAL);
                return false;
        }
        int64_t mine = take_thread(u->pid, tid, ticket);
        if (mine == -EAGAIN) {
                out_printf(o, "  (it did not take signal %d within %u ms: its frames were not read)\n",
                           NPF_STACKS_SIGNAL, NPF_STACKS_ANSWER_MS);
                return true;
        }
        if (mine < 0) {
                out_printf(o, "  (%s: its frames were not read)\n",
                           mine == -ESRCH ? "it ended" : strerror((int) -mine));
                return false;
        }
        memcpy(u->regs, capture.regs, sizeof(u->regs));
        u->pc = capture.pc;
        u->tid = tid;
        u->count = 0;
        u->more = false;
        int r = dwfl_getthread_frames(u->dwfl, tid, on_frame, u);
        /* "Some systems return error instead of zero on end of the backtrace" (libdwfl.h): only no frame is one. */
        const char *why = r < 0 && u->count == 0 ? dwfl_errmsg(-1) : NULL;
        bool held = release_thread((uint32_t) mine);

        if (!held)
                out_printf(o, "  (it went on after %u ms, before its stack was read: the frames may be wrong)\n",
                           NPF_STACKS_HOLD_MS);
        for (unsigned i = 0; i < u->count; i++)
                write_frame(o, u->dwfl, i, &u->frames[i]);
        if (u->more)
                out_printf(o, "  (more frames, after the first %u)\n", NPF_STACKS_FRAMES_MAX);
        if (why)
                out_printf(o, "  (no frame could be read: %s)\n", why);
        return false;
}

/* --- the interpreter's stacks ---------------------------------------------------------------- */

static _Atomic int interp_signo, interp_fd = -1;

void npf_stacks_set_interpreter(int signo, int fd)
{
        bool ok = signo > 0 && signo <= SIGRTMAX && signo != SIGKILL && signo != SIGSTOP &&
                  signo != NPF_STACKS_SIGNAL && fd >= 0;

        atomic_store(&interp_fd, ok ? fd : -1);
        atomic_store(&interp_signo, ok ? signo : 0);
}

/*
 * Point the interpreter's descriptor at @o's, raise its signal on this thread (the handler
 * runs before raise() returns), and point the descriptor back at /dev/null.
 */
static void write_interpreter(out_t *o)
{
        int signo = atomic_load(&interp_signo), fd = atomic_load(&interp_fd);
        struct sigaction sa;
        sigset_t one, old;

        if (signo == 0)
                return;
        out_printf(o, "\ninterpreter stacks (signal %d):\n", signo);
        /* No handler (it was taken away): the default action would end the process. */
        if (sigaction(signo, NULL, &sa) < 0 || (!(sa.sa_flags & SA_SIGINFO) &&
                                                 (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))) {
                out_printf(o, "  (signal %d has no handler any more: nothing to ask)\n", signo);
                return;
        }
        out_flush(o);
        if (o->error < 0)
                return;
        /* dup3(), not dup2(): the descriptor stays close-on-exec, as a child must not inherit the output. */
        if (dup3(o->fd, fd, O_CLOEXEC) < 0) {
                out_printf(o, "  (cannot point descriptor %d at the output: %s)\n", fd, strerror(errno));
                return;
        }
        sigemptyset(&one);
        sigaddset(&one, signo);
        pthread_sigmask(SIG_UNBLOCK, &one, &old);
        raise(signo);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0) {
                dup3(null, fd, O_CLOEXEC);
                close(null);
        }
}

/* --- the whole ----------------------------------------------------------------------------- */

static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t ticket;                 /* under write_lock */

static void write_header(out_t *o, pid_t pid, pid_t self, int count, bool more)
{
        struct timespec ts;
        struct tm tm;
        char when[32] = "", exe[64] = "", self_name[32] = "";

        clock_gettime(CLOCK_REALTIME, &ts);
        if (gmtime_r(&ts.tv_sec, &tm))
                strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        read_task_file(pid, "comm", exe, sizeof(exe));
        exe[strcspn(exe, "\n")] = '\0';
        read_task_file(self, "comm", self_name, sizeof(self_name));
        self_name[strcspn(self_name, "\n")] = '\0';
        out_printf(o, "stacks of process %d (%s) at %s.%03ldZ\n", (int) pid, exe, when, ts.tv_nsec / 1000000L);
        out_printf(o, "threads: %d%s, besides thread %d (%s), which writes this\n", count, more ? " (and more)" : "",
                   (int) self, self_name);
}

int npf_stacks_write(int fd, char *err)
{
        out_t *o = calloc(1, sizeof(*o));
        unwinder_t *u = calloc(1, sizeof(*u));
        pid_t pid = getpid(), self = (pid_t) syscall(SYS_gettid), *tids = NULL;
        struct sigaction sa = { .sa_sigaction = on_stacks_signal, .sa_flags = SA_SIGINFO | SA_RESTART }, old;
        bool more = false, pending = false, installed = false;
        const char *why = NREGS > 0 ? NULL : "native frames are not supported on this architecture";
        int count, r;

        if (!o || !u) {
                free(o);
                free(u);
                if (err)
                        snprintf(err, NPF_STACKS_ERR_MAX, "out of memory");
                return -ENOMEM;
        }
        o->fd = fd;
        *u = (unwinder_t) { .pid = pid, .pipe = { -1, -1 } };
        pthread_mutex_lock(&write_lock);

        r = list_threads(&tids, &more);
        count = r < 0 ? 0 : r;
        for (int i = 0; i < r; i++)
                if (tids[i] == self)
                        count--;
        write_header(o, pid, self, count, more);
        if (r < 0)
                out_printf(o, "(cannot list /proc/self/task: %s)\n", strerror(-r));
        if (!why)
                u->dwfl = unwinder_begin(u, &why);
        if (u->dwfl) {
                /* The whole handler runs with every signal blocked: nothing else interrupts a held thread. */
                sigfillset(&sa.sa_mask);
                installed = sigaction(NPF_STACKS_SIGNAL, &sa, &old) == 0;
                if (!installed)
                        why = strerror(errno);
        }
        for (int i = 0; i < r; i++) {
                thread_info_t ti;

                if (tids[i] == self)
                        continue;
                thread_info(tids[i], &ti);
                out_printf(o, "\nthread %d \"%s\", state %s:\n", (int) tids[i], ti.name, ti.state[0] ? ti.state : "?");
                if (installed)
                        pending |= write_native(o, u, tids[i], &ti, &ticket);
                else
                        out_printf(o, "  (%s)\n", why ? why : "native frames cannot be read");
        }
        /* A signal still pending in a thread would end the process under the default action: ours stays. */
        if (installed && !pending)
                sigaction(NPF_STACKS_SIGNAL, &old, NULL);
        if (u->dwfl)
                dwfl_end(u->dwfl);
        if (u->pipe[0] >= 0) {
                close(u->pipe[0]);
                close(u->pipe[1]);
        }
        write_interpreter(o);
        /* A reader that finds this line has the whole. */
        out_printf(o, "\nend of the stacks of process %d\n", (int) pid);
        out_flush(o);
        r = o->error;
        pthread_mutex_unlock(&write_lock);
        if (r < 0 && err)
                snprintf(err, NPF_STACKS_ERR_MAX, "cannot write the stacks: %s", strerror(-r));
        free(tids);
        free(o);
        free(u);
        return r;
}
