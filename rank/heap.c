/* SPDX-License-Identifier: MIT */
/*
 * libnpuprof-heap.so: the heap tracker (see heap.h). Outside a window each wrapper costs one
 * relaxed load. While recording, the tables live in mmap'd memory, so recording never
 * allocates; backtrace() may (its first call loads the unwinder), which a per-thread flag
 * sends straight to the real allocator. A forked child never records: the tables it
 * inherits are the parent's window, not its own.
 */
#include "rank/heap.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <execinfo.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define STACK_DEPTH 16
#define STACKS_MAX (1u << 16)
#define LIVE_SLOTS (1u << 21)           /* open addressing, a power of two */

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void *__libc_valloc(size_t n);
void *__libc_pvalloc(size_t n);
void __libc_free(void *p);

/* The allocator's entry points are the interface this library exists to replace. */
void *malloc(size_t n);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t n);
void *reallocarray(void *p, size_t n, size_t size);
void *memalign(size_t align, size_t n);
void *aligned_alloc(size_t align, size_t n);
int posix_memalign(void **ret, size_t align, size_t n);
void *valloc(size_t n);
void *pvalloc(size_t n);
void free(void *p);

enum { EV_ALLOC = 1, EV_FREE = 2 };

typedef struct event {
        uint64_t addr, size, time_ns;
        uint32_t stack;
        uint32_t action;
} event_t;

typedef struct stack {
        void *pc[STACK_DEPTH];
        uint32_t depth;
} stack_t_;

/* Linear probing with backward-shift deletion: no tombstones, a lookup stops at the first empty slot. */
typedef struct live {
        uint64_t addr;                  /* 0 = empty */
        uint64_t size;
        uint32_t stack;
} live_t;

static _Atomic int recording;
static _Atomic uint64_t min_bytes;
static _Thread_local int in_hook __attribute__((tls_model("initial-exec")));
static atomic_flag lock = ATOMIC_FLAG_INIT;

static event_t *events;
static uint32_t n_events;
static uint64_t dropped;
static stack_t_ *stacks;
static uint32_t n_stacks;
static live_t *live;

static void lock_take(void)
{
        while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire))
                ;
}

static void lock_give(void)
{
        atomic_flag_clear_explicit(&lock, memory_order_release);
}

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static uint64_t hash64(uint64_t x)
{
        x ^= x >> 33;
        x *= UINT64_C(0xff51afd7ed558ccd);
        x ^= x >> 33;
        return x;
}

/* Intern a stack; linear search of a short list is enough for a window's distinct call sites. */
static uint32_t intern(void *const *pc, uint32_t depth)
{
        for (uint32_t i = n_stacks; i-- > 0;)
                if (stacks[i].depth == depth && memcmp(stacks[i].pc, pc, depth * sizeof(*pc)) == 0)
                        return i;
        if (n_stacks >= STACKS_MAX)
                return STACKS_MAX;      /* "unknown" */
        memcpy(stacks[n_stacks].pc, pc, depth * sizeof(*pc));
        stacks[n_stacks].depth = depth;
        return n_stacks++;
}

static uint64_t home(uint64_t addr)
{
        return hash64(addr) & (LIVE_SLOTS - 1);
}

/* The slot of @addr, or with @for_insert the empty slot where it goes; NULL when absent or full. */
static live_t *live_find(uint64_t addr, bool for_insert)
{
        for (uint64_t i = home(addr), n = 0; n < LIVE_SLOTS; i = (i + 1) & (LIVE_SLOTS - 1), n++) {
                if (live[i].addr == addr)
                        return &live[i];
                if (live[i].addr == 0)
                        return for_insert ? &live[i] : NULL;
        }
        return NULL;
}

/* Empty @l, moving back the entries after it that could no longer be found past the gap. */
static void live_delete(live_t *l)
{
        uint64_t gap = (uint64_t) (l - live);

        for (uint64_t j = (gap + 1) & (LIVE_SLOTS - 1); live[j].addr; j = (j + 1) & (LIVE_SLOTS - 1)) {
                /* An entry may fill the gap when its home is not cyclically in (gap, j]. */
                uint64_t h = home(live[j].addr);
                if (((j - h) & (LIVE_SLOTS - 1)) >= ((j - gap) & (LIVE_SLOTS - 1))) {
                        live[gap] = live[j];
                        gap = j;
                }
        }
        live[gap] = (live_t) { 0 };
}

static void append(uint32_t action, uint64_t addr, uint64_t size, uint32_t stack)
{
        if (n_events >= NPF_HEAP_EVENTS_MAX) {
                dropped++;
                return;
        }
        events[n_events++] = (event_t) { .addr = addr, .size = size, .time_ns = now_ns(), .stack = stack, .action = action };
}

/*
 * The stack of the allocation about to be recorded, taken in the recording function itself
 * (inlined): its two first frames, that function and the wrapper, are ours.
 * Context: in_hook set.
 */
static inline __attribute__((always_inline)) uint32_t stack_depth(void **pc)
{
        int depth = backtrace(pc, STACK_DEPTH + 2);

        return depth > 2 ? (uint32_t) depth : 0;
}

/* Context: the lock held, recording. */
static void insert_locked(void *p, size_t n, void *const *pc, uint32_t depth)
{
        uint32_t s = depth ? intern(pc + 2, depth - 2) : STACKS_MAX;
        live_t *l = live_find((uint64_t) (uintptr_t) p, true);

        if (!l) {
                dropped++;
                return;
        }
        *l = (live_t) { .addr = (uint64_t) (uintptr_t) p, .size = n, .stack = s };
        append(EV_ALLOC, l->addr, n, s);
}

/* Context: the lock held, recording. */
static void forget_locked(void *p)
{
        live_t *l = live_find((uint64_t) (uintptr_t) p, false);

        if (l) {
                append(EV_FREE, l->addr, l->size, l->stack);
                live_delete(l);
        }
}

static bool is_recording(void)
{
        return atomic_load_explicit(&recording, memory_order_relaxed);
}

static uint64_t min_size(void)
{
        return atomic_load_explicit(&min_bytes, memory_order_relaxed);
}

static bool tracking(size_t n)
{
        return is_recording() && !in_hook && n >= min_size();
}

/* May @p be in the table? Blocks smaller than the minimum never are: no lock for them. */
static bool watched(void *p)
{
        return p && is_recording() && !in_hook && malloc_usable_size(p) >= min_size();
}

static __attribute__((noinline)) void record_alloc(void *p, size_t n)
{
        void *pc[STACK_DEPTH + 2];

        if (!p)
                return;
        in_hook = 1;
        uint32_t depth = stack_depth(pc);
        lock_take();
        if (is_recording())
                insert_locked(p, n, pc, depth);
        lock_give();
        in_hook = 0;
}

static void record_free(void *p)
{
        in_hook = 1;
        lock_take();
        if (is_recording())
                forget_locked(p);
        lock_give();
        in_hook = 0;
}

void *malloc(size_t n)
{
        void *p = __libc_malloc(n);

        if (tracking(n))
                record_alloc(p, n);
        return p;
}

void *calloc(size_t n, size_t size)
{
        void *p = __libc_calloc(n, size);
        size_t bytes;

        if (p && !__builtin_mul_overflow(n, size, &bytes) && tracking(bytes))
                record_alloc(p, bytes);
        return p;
}

/*
 * A tracked block is reallocated under the lock: its free is recorded only when the real
 * realloc released it, and before another thread can be handed the same address.
 */
static __attribute__((noinline)) void *realloc_watched(void *old, size_t n)
{
        void *pc[STACK_DEPTH + 2];
        uint32_t depth = 0;

        in_hook = 1;
        if (n >= min_size())
                depth = stack_depth(pc);
        lock_take();
        void *p = __libc_realloc(old, n);
        int e = errno;
        if (is_recording()) {
                if (p || n == 0)        /* realloc(old, 0) frees old */
                        forget_locked(old);
                if (p && n >= min_size())
                        insert_locked(p, n, pc, depth);
        }
        lock_give();
        in_hook = 0;
        errno = e;
        return p;
}

void *realloc(void *old, size_t n)
{
        if (watched(old))
                return realloc_watched(old, n);
        void *p = __libc_realloc(old, n);
        if (tracking(n))
                record_alloc(p, n);
        return p;
}

void *reallocarray(void *old, size_t n, size_t size)
{
        size_t bytes;

        if (__builtin_mul_overflow(n, size, &bytes)) {
                errno = ENOMEM;
                return NULL;
        }
        return realloc(old, bytes);
}

void *memalign(size_t align, size_t n)
{
        void *p = __libc_memalign(align, n);

        if (tracking(n))
                record_alloc(p, n);
        return p;
}

void *aligned_alloc(size_t align, size_t n)
{
        if (align == 0 || (align & (align - 1))) {
                errno = EINVAL;
                return NULL;
        }
        void *p = __libc_memalign(align, n);
        if (tracking(n))
                record_alloc(p, n);
        return p;
}

int posix_memalign(void **ret, size_t align, size_t n)
{
        int e = errno;

        if (align < sizeof(void *) || (align & (align - 1)))
                return EINVAL;
        void *p = __libc_memalign(align, n);
        if (tracking(n))
                record_alloc(p, n);
        if (!p) {
                errno = e;
                return ENOMEM;
        }
        *ret = p;
        return 0;
}

void *valloc(size_t n)
{
        void *p = __libc_valloc(n);

        if (tracking(n))
                record_alloc(p, n);
        return p;
}

void *pvalloc(size_t n)
{
        void *p = __libc_pvalloc(n);

        if (tracking(n))
                record_alloc(p, n);
        return p;
}

void free(void *p)
{
        if (watched(p))
                record_free(p);
        __libc_free(p);
}

static void *map(size_t n)
{
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        return p == MAP_FAILED ? NULL : p;
}

static void unmap_all(void)
{
        if (events)
                munmap(events, NPF_HEAP_EVENTS_MAX * sizeof(*events));
        if (stacks)
                munmap(stacks, STACKS_MAX * sizeof(*stacks));
        if (live)
                munmap(live, LIVE_SLOTS * sizeof(*live));
        events = NULL;
        stacks = NULL;
        live = NULL;
}

/* fork(): no thread holds the lock across it, and the child stops recording and drops the tables. */
static void fork_prepare(void)
{
        lock_take();
}

static void fork_parent(void)
{
        lock_give();
}

static void fork_child(void)
{
        atomic_store(&recording, 0);
        unmap_all();
        lock_give();
}

static __attribute__((constructor)) void heap_init(void)
{
        pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int npf_heap_start(uint64_t min)
{
        int r = 0;

        lock_take();
        if (atomic_load(&recording) || events) {
                r = -EBUSY;
                goto done;
        }
        /* Fresh zeroed mappings each window: an empty table, no slot left from the last one. */
        events = map(NPF_HEAP_EVENTS_MAX * sizeof(*events));
        stacks = map(STACKS_MAX * sizeof(*stacks));
        live = map(LIVE_SLOTS * sizeof(*live));
        if (!events || !stacks || !live) {
                unmap_all();
                r = -ENOMEM;
                goto done;
        }
        n_events = n_stacks = 0;
        dropped = 0;
        atomic_store(&min_bytes, min ? min : 1);
        atomic_store(&recording, 1);
done:
        lock_give();
        return r;
}

/* After a window's snapshot is written: a new window may start. */
static void release_tables(void)
{
        lock_take();
        unmap_all();
        lock_give();
}

/*
 * The snapshot's stream writes with write(2) only in the process that opened it: a child
 * forked while it is being written, leaving through exit(), flushes its copy into nothing.
 */
typedef struct sink {
        int fd;
        pid_t pid;
} sink_t;

static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
        sink_t *k = cookie;

        if (getpid() != k->pid)
                return (ssize_t) n;
        for (size_t done = 0; done < n;) {
                ssize_t w = write(k->fd, buf + done, n - done);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return done ? (ssize_t) done : -1;
                done += (size_t) w;
        }
        return (ssize_t) n;
}

static int sink_close(void *cookie)
{
        sink_t *k = cookie;
        int r = 0;

        if (getpid() == k->pid)
                r = close(k->fd);
        __libc_free(k);
        return r;
}

static FILE *sink_open(const char *path)
{
        sink_t *k = __libc_malloc(sizeof(*k));
        FILE *f;

        if (!k)
                return NULL;
        k->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        k->pid = getpid();
        if (k->fd < 0) {
                int e = errno;
                __libc_free(k);
                errno = e;
                return NULL;
        }
        f = fopencookie(k, "w", (cookie_io_functions_t) { .write = sink_write, .close = sink_close });
        if (!f) {
                int e = errno;
                close(k->fd);
                __libc_free(k);
                errno = e;
        }
        return f;
}

/* Write @s as a JSON string. */
static void put_string(FILE *f, const char *s)
{
        fputc('"', f);
        for (; s && *s; s++) {
                unsigned char c = (unsigned char) *s;
                if (c == '"' || c == '\\')
                        fprintf(f, "\\%c", c);
                else if (c < 0x20)
                        fprintf(f, "\\u%04x", c);
                else
                        fputc(c, f);
        }
        fputc('"', f);
}

/*
 * dladdr() walks the whole symbol table of the object a pc lies in: tens of microseconds
 * in a library of 100,000 symbols (libtorch), for each frame of each event. Each distinct pc
 * is looked up once per dump, in a table made at the start of the dump (calloc: in_hook is
 * set, the tracker's own allocations are not recorded) and kept at most half full; past
 * that, and when it could not be had, a pc is looked up each time.
 */
#define SYMS_MAX (1u << 18)             /* 8 MiB at most, for the dump alone */

typedef struct sym {
        void *pc;
        const char *name, *file;
        char *demangled;                /* the name as C++ writes it, malloc()ed, or NULL */
} sym_t;

static sym_t *syms;
static size_t syms_mask, syms_used;

/*
 * C++ frames are named as C++ writes them, as PyTorch's own snapshots name them: by
 * libstdc++'s __cxa_demangle(), where the process has loaded libstdc++ (every PyTorch
 * process has, as a library of its own: RTLD_LOCAL), found at the dump, so that the tracker
 * links no C++ runtime and loads none.
 */
typedef char *demangle_fn(const char *mangled, char *buf, size_t *len, int *status);
static demangle_fn *demangle;
static void *libstdcxx;

static void demangle_find(void)
{
        libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
        *(void **) &demangle = libstdcxx ? dlsym(libstdcxx, "__cxa_demangle") : NULL;
}

static void demangle_forget(void)
{
        if (libstdcxx)
                dlclose(libstdcxx);
        libstdcxx = NULL;
        demangle = NULL;
}

static const sym_t *lookup(void *pc)
{
        static sym_t one;
        Dl_info info;
        sym_t *e = &one;

        if (syms) {
                size_t i = ((uintptr_t) pc >> 4) * 0x9E3779B97F4A7C15u & syms_mask;
                while (syms[i].pc && syms[i].pc != pc)
                        i = (i + 1) & syms_mask;
                if (syms[i].pc)
                        return &syms[i];
                if (2 * (syms_used + 1) <= syms_mask + 1) {
                        e = &syms[i];
                        syms_used++;
                }
        }
        bool known = dladdr(pc, &info) != 0;
        e->pc = pc;
        e->name = known && info.dli_sname ? info.dli_sname : "??";
        e->file = known && info.dli_fname ? info.dli_fname : "??";
        e->demangled = NULL;
        if (e != &one && demangle && strncmp(e->name, "_Z", 2) == 0) {
                int status = -1;
                e->demangled = demangle(e->name, NULL, NULL, &status);
                if (status == 0 && e->demangled)
                        e->name = e->demangled;
        }
        return e;
}

static void syms_release(void)
{
        for (size_t i = 0; syms && i <= syms_mask; i++)
                free(syms[i].demangled);
        free(syms);
        syms = NULL;
}

static void put_frames(FILE *f, uint32_t s)
{
        fputc('[', f);
        for (uint32_t i = 0; s < n_stacks && i < stacks[s].depth; i++) {
                const sym_t *y = lookup(stacks[s].pc[i]);
                fprintf(f, "%s{\"name\":", i ? "," : "");
                put_string(f, y->name);
                fprintf(f, ",\"filename\":");
                put_string(f, y->file);
                fprintf(f, ",\"line\":0,\"pc\":\"%p\"}", stacks[s].pc[i]);
        }
        fputc(']', f);
}

static void put_trace(FILE *f, const char *action, const event_t *e, bool *first)
{
        fprintf(f, "%s\n{\"action\":\"%s\",\"addr\":%llu,\"size\":%llu,\"stream\":0,\"time_us\":%llu,\"frames\":",
                *first ? "" : ",", action, (unsigned long long) e->addr, (unsigned long long) e->size,
                (unsigned long long) (e->time_ns / 1000u));
        put_frames(f, e->stack);
        fputc('}', f);
        *first = false;
}

int npf_heap_stop(const char *path, char *err)
{
        bool first = true;
        FILE *f;

        lock_take();
        atomic_store(&recording, 0);
        lock_give();
        if (!events) {
                snprintf(err, 256, "heap tracking was not started");
                return -EINVAL;
        }
        in_hook = 1;    /* our own stdio and dladdr allocations are not the job's */
        f = sink_open(path);
        if (!f) {
                int r = -errno;
                snprintf(err, 256, "cannot create %.200s: %s", path, strerror(errno));
                in_hook = 0;
                release_tables();
                return r;
        }
        /* Room for every pc of every stack, at most half full, up to SYMS_MAX. */
        for (syms_mask = 1; syms_mask < SYMS_MAX && syms_mask < 2 * (size_t) n_stacks * STACK_DEPTH; syms_mask <<= 1)
                ;
        syms = calloc(syms_mask, sizeof(*syms));
        syms_mask--;
        syms_used = 0;
        demangle_find();
        /* The allocations still live at the end: one segment of one block each. */
        fprintf(f, "{\"segments\":[");
        for (uint64_t i = 0; i < LIVE_SLOTS; i++) {
                if (!live[i].addr)
                        continue;
                fprintf(f, "%s\n{\"device\":0,\"address\":%llu,\"total_size\":%llu,\"allocated_size\":%llu,"
                           "\"active_size\":%llu,\"requested_size\":%llu,\"stream\":0,\"segment_type\":\"%s\","
                           "\"segment_pool_id\":[0,0],\"is_expandable\":false,\"frames\":",
                        first ? "" : ",", (unsigned long long) live[i].addr, (unsigned long long) live[i].size,
                        (unsigned long long) live[i].size, (unsigned long long) live[i].size,
                        (unsigned long long) live[i].size, live[i].size >= (1u << 20) ? "large" : "small");
                put_frames(f, live[i].stack);
                fprintf(f, ",\"blocks\":[{\"address\":%llu,\"size\":%llu,\"requested_size\":%llu,"
                           "\"state\":\"active_allocated\",\"frames\":",
                        (unsigned long long) live[i].addr, (unsigned long long) live[i].size,
                        (unsigned long long) live[i].size);
                put_frames(f, live[i].stack);
                fprintf(f, "}]}");
                first = false;
        }
        fprintf(f, "],\n\"device_traces\":[[");
        first = true;
        for (uint32_t i = 0; i < n_events; i++) {
                if (events[i].action == EV_ALLOC) {
                        put_trace(f, "segment_alloc", &events[i], &first);
                        put_trace(f, "alloc", &events[i], &first);
                } else {
                        put_trace(f, "free_requested", &events[i], &first);
                        put_trace(f, "free_completed", &events[i], &first);
                        put_trace(f, "segment_free", &events[i], &first);
                }
        }
        fprintf(f, "]],\n\"npuprof\":{\"source\":\"host heap\",\"min_bytes\":%llu,\"events\":%u,\"dropped\":%llu}}\n",
                (unsigned long long) min_size(), n_events, (unsigned long long) dropped);
        int r = ferror(f) ? -EIO : 0;
        if (fclose(f) != 0 && r == 0)
                r = -errno;
        if (r < 0)
                snprintf(err, 256, "cannot write %.200s: %s", path, strerror(-r));
        syms_release();
        demangle_forget();
        in_hook = 0;
        release_tables();
        return r;
}
