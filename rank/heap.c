/* SPDX-License-Identifier: MIT */
/*
 * libnpuprof-heap.so: the heap tracker (see heap.h). Outside a window each wrapper costs one
 * relaxed load. While recording, the tables live in mmap'd memory, so recording never
 * allocates; backtrace() may (its first call loads the unwinder), which a per-thread flag
 * sends straight to the real allocator.
 */
#include "rank/heap.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define STACK_DEPTH 16
#define STACKS_MAX (1u << 16)
#define LIVE_SLOTS (1u << 21)           /* open addressing, a power of two */

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);

/* The allocator's entry points are the interface this library exists to replace. */
void *malloc(size_t n);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t n);
void *memalign(size_t align, size_t n);
void *aligned_alloc(size_t align, size_t n);
int posix_memalign(void **ret, size_t align, size_t n);
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

typedef struct live {
        uint64_t addr;                  /* 0 = empty, 1 = deleted */
        uint64_t size;
        uint32_t stack;
} live_t;

static _Atomic int recording;
static uint64_t min_bytes;
static _Thread_local int in_hook;
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

static live_t *live_find(uint64_t addr, bool for_insert)
{
        for (uint64_t i = hash64(addr) & (LIVE_SLOTS - 1), n = 0; n < LIVE_SLOTS; i = (i + 1) & (LIVE_SLOTS - 1), n++) {
                if (live[i].addr == addr)
                        return &live[i];
                if (live[i].addr == 0 || (for_insert && live[i].addr == 1))
                        return for_insert ? &live[i] : NULL;
        }
        return NULL;
}

static void append(uint32_t action, uint64_t addr, uint64_t size, uint32_t stack)
{
        if (n_events >= NPF_HEAP_EVENTS_MAX) {
                dropped++;
                return;
        }
        events[n_events++] = (event_t) { .addr = addr, .size = size, .time_ns = now_ns(), .stack = stack, .action = action };
}

static void record_alloc(void *p, size_t n)
{
        void *pc[STACK_DEPTH + 2];

        if (!p)
                return;
        in_hook = 1;
        int depth = backtrace(pc, STACK_DEPTH + 2);
        lock_take();
        if (atomic_load_explicit(&recording, memory_order_relaxed)) {
                uint32_t s = depth > 2 ? intern(pc + 2, (uint32_t) depth - 2) : STACKS_MAX;
                live_t *l = live_find((uint64_t) (uintptr_t) p, true);
                if (l) {
                        *l = (live_t) { .addr = (uint64_t) (uintptr_t) p, .size = n, .stack = s };
                        append(EV_ALLOC, l->addr, n, s);
                } else {
                        dropped++;
                }
        }
        lock_give();
        in_hook = 0;
}

static void record_free(void *p)
{
        in_hook = 1;
        lock_take();
        live_t *l = atomic_load_explicit(&recording, memory_order_relaxed) ? live_find((uint64_t) (uintptr_t) p, false)
                                                                          : NULL;
        if (l) {
                append(EV_FREE, l->addr, l->size, l->stack);
                l->addr = 1;    /* deleted */
        }
        lock_give();
        in_hook = 0;
}

static bool tracking(size_t n)
{
        return atomic_load_explicit(&recording, memory_order_relaxed) && !in_hook && n >= min_bytes;
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

        if (tracking(n * size))
                record_alloc(p, n * size);
        return p;
}

void *realloc(void *old, size_t n)
{
        if (old && atomic_load_explicit(&recording, memory_order_relaxed) && !in_hook)
                record_free(old);
        void *p = __libc_realloc(old, n);
        if (tracking(n))
                record_alloc(p, n);
        return p;
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
        return memalign(align, n);
}

int posix_memalign(void **ret, size_t align, size_t n)
{
        if (align < sizeof(void *) || (align & (align - 1)))
                return EINVAL;
        void *p = memalign(align, n);
        if (!p)
                return ENOMEM;
        *ret = p;
        return 0;
}

void free(void *p)
{
        if (p && atomic_load_explicit(&recording, memory_order_relaxed) && !in_hook)
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

int npf_heap_start(uint64_t min)
{
        if (atomic_load(&recording) || events)
                return -EBUSY;
        events = map(NPF_HEAP_EVENTS_MAX * sizeof(*events));
        stacks = map(STACKS_MAX * sizeof(*stacks));
        live = map(LIVE_SLOTS * sizeof(*live));
        if (!events || !stacks || !live) {
                unmap_all();
                return -ENOMEM;
        }
        n_events = n_stacks = 0;
        dropped = 0;
        min_bytes = min ? min : 1;
        atomic_store(&recording, 1);
        return 0;
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

static void put_frames(FILE *f, uint32_t s)
{
        fputc('[', f);
        for (uint32_t i = 0; s < n_stacks && i < stacks[s].depth; i++) {
                Dl_info info;
                bool known = dladdr(stacks[s].pc[i], &info) != 0;
                fprintf(f, "%s{\"name\":", i ? "," : "");
                put_string(f, known && info.dli_sname ? info.dli_sname : "??");
                fprintf(f, ",\"filename\":");
                put_string(f, known && info.dli_fname ? info.dli_fname : "??");
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
        f = fopen(path, "wex");
        if (!f) {
                int r = -errno;
                snprintf(err, 256, "cannot create %.200s: %s", path, strerror(errno));
                in_hook = 0;
                unmap_all();
                return r;
        }
        /* The allocations still live at the end: one segment of one block each. */
        fprintf(f, "{\"segments\":[");
        for (uint64_t i = 0; i < LIVE_SLOTS; i++) {
                if (live[i].addr <= 1)
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
                (unsigned long long) min_bytes, n_events, (unsigned long long) dropped);
        int r = ferror(f) ? -EIO : 0;
        if (fclose(f) != 0 && r == 0)
                r = -errno;
        if (r < 0)
                snprintf(err, 256, "cannot write %.200s: %s", path, strerror(-r));
        in_hook = 0;
        unmap_all();
        return r;
}
