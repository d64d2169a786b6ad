/* SPDX-License-Identifier: MIT */
/*
 * The host backend, real on any Linux: per step, wall and CPU time, resident memory, page
 * faults and context switches, and cycles and instructions through perf_event_open where
 * the kernel allows it, written as a Chrome trace (trace.json) that Perfetto and
 * chrome://tracing open: one "ProfilerStep#N" span per step, and counter tracks.
 *
 * The trace is written with write(2) from a private buffer, emptied at the end of every step
 * and at close, and only by the process that opened the window: a child forked during the
 * window neither inherits a stdio buffer that its exit() would flush into the shared file,
 * nor writes the parent's trace itself.
 */
#include "rank/backend.h"
#include "lib/clock.h"
#include "rank/heap.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

typedef struct sample {
        uint64_t wall_ns;               /* CLOCK_MONOTONIC */
        uint64_t cpu_ns;                /* user + system of the process */
        uint64_t rss_kib;
        uint64_t minflt, majflt, nvcsw, nivcsw;
        uint64_t cycles, instructions;  /* 0 where perf counters are not allowed */
} sample_t;

#define TRACE_BUF 16384             /* more than a step's events */

/* What the hardware counters count (perf_event_open on the stepping thread, inherited). */
#define COUNTED_THREADS "the stepping thread and threads it starts during the window"

typedef struct host {
        int trace;                      /* trace.json */
        pid_t owner;                    /* the process that opened the window; only it writes */
        int error;                      /* the first write error, as -errno */
        size_t len;
        char buf[TRACE_BUF];
        int perf_cycles, perf_instructions;
        int64_t step;                   /* the step whose span is open */
        sample_t at_start;              /* of that step */
        int pid;
        int64_t rank;
        uint64_t steps;
        char dir[NPF_SHM_PATH_MAX + 160];
        npf_heap_stop_fn heap_stop;     /* set while heap tracking runs for this window */
} host_t;

static int perf_counter(uint64_t config)
{
        struct perf_event_attr pe = {
                .type = PERF_TYPE_HARDWARE,
                .size = sizeof(pe),
                .config = config,
                .exclude_kernel = 1,
                .exclude_hv = 1,
                .inherit = 1,
        };

        /*
         * pid 0 is the calling thread, the one that steps; inherit adds the threads (and child
         * processes) it starts while the counter is open, not threads that existed before.
         * Any CPU. -1 where the kernel does not allow it (paranoid, VMs).
         */
        return (int) syscall(SYS_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static uint64_t perf_read(int fd)
{
        uint64_t v = 0;

        if (fd < 0 || read(fd, &v, sizeof(v)) != (ssize_t) sizeof(v))
                return 0;
        return v;
}

static void sample(const host_t *h, sample_t *s)
{
        struct rusage ru;
        long pages = 0;

        s->wall_ns = npf_clock_ns(CLOCK_MONOTONIC);
        s->cpu_ns = npf_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        getrusage(RUSAGE_SELF, &ru);
        s->minflt = (uint64_t) ru.ru_minflt;
        s->majflt = (uint64_t) ru.ru_majflt;
        s->nvcsw = (uint64_t) ru.ru_nvcsw;
        s->nivcsw = (uint64_t) ru.ru_nivcsw;
        FILE *f = fopen("/proc/self/statm", "re");
        if (f) {
                if (fscanf(f, "%*s %ld", &pages) != 1)
                        pages = 0;
                fclose(f);
        }
        s->rss_kib = (uint64_t) pages * (uint64_t) sysconf(_SC_PAGESIZE) / 1024u;
        s->cycles = perf_read(h->perf_cycles);
        s->instructions = perf_read(h->perf_instructions);
}

/* Is this the process that opened the window? A forked child writes nothing of it. */
static bool owner(const host_t *h)
{
        return getpid() == h->owner;
}

/* Write out the private buffer. */
static void flush(host_t *h)
{
        size_t done = 0;

        if (!owner(h)) {
                h->len = 0;
                return;
        }
        while (done < h->len && !h->error) {
                ssize_t w = write(h->trace, h->buf + done, h->len - done);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        h->error = -errno;
                else if (w == 0)
                        h->error = -EIO;
                else
                        done += (size_t) w;
        }
        h->len = 0;
}

/* Append to the private buffer, writing it out first when it is too full. */
static __attribute__((format(printf, 2, 3))) void put(host_t *h, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (!owner(h))
                return;
        for (int tries = 0; tries < 2; tries++) {
                va_start(ap, fmt);
                n = vsnprintf(h->buf + h->len, sizeof(h->buf) - h->len, fmt, ap);
                va_end(ap);
                if (n < 0) {
                        h->error = h->error ? h->error : -EINVAL;
                        return;
                }
                if ((size_t) n < sizeof(h->buf) - h->len) {
                        h->len += (size_t) n;
                        return;
                }
                flush(h);
        }
        h->error = h->error ? h->error : -ENOBUFS;       /* one event larger than the buffer */
}

/* Close the span of h->step, which ends now. */
static void end_step(host_t *h)
{
        sample_t now;

        sample(h, &now);
        const sample_t *a = &h->at_start;
        double ts = (double) a->wall_ns / 1000.0, dur = (double) (now.wall_ns - a->wall_ns) / 1000.0;
        put(h,
                "%s\n{\"name\":\"ProfilerStep#%" PRId64 "\",\"ph\":\"X\",\"cat\":\"step\",\"ts\":%.3f,\"dur\":%.3f,"
                "\"pid\":%d,\"tid\":%d,\"args\":{\"step\":%" PRId64 ",\"cpu_ms\":%.3f,\"rss_kib\":%" PRIu64
                ",\"minor_faults\":%" PRIu64 ",\"major_faults\":%" PRIu64 ",\"voluntary_switches\":%" PRIu64
                ",\"involuntary_switches\":%" PRIu64,
                h->steps ? "," : "", h->step, ts, dur, h->pid, h->pid, h->step, (double) (now.cpu_ns - a->cpu_ns) / 1e6,
                now.rss_kib, now.minflt - a->minflt, now.majflt - a->majflt, now.nvcsw - a->nvcsw, now.nivcsw - a->nivcsw);
        if (h->perf_cycles >= 0)
                put(h, ",\"cycles\":%" PRIu64 ",\"instructions\":%" PRIu64, now.cycles - a->cycles,
                        now.instructions - a->instructions);
        put(h, "}}");
        put(h,
                ",\n{\"name\":\"memory\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,\"args\":{\"rss_kib\":%" PRIu64 "}}"
                ",\n{\"name\":\"cpu\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,\"args\":{\"cpu_ms\":%.3f}}",
                ts, h->pid, now.rss_kib, ts, h->pid, (double) (now.cpu_ns - a->cpu_ns) / 1e6);
        h->steps++;
        h->at_start = now;
}

static int host_probe(char *err)
{
        (void) err;
        return 0;
}

static int host_window_open(void **ret_state, const npf_backend_window_t *w, char *err)
{
        char path[NPF_SHM_PATH_MAX + 256];
        host_t *h = calloc(1, sizeof(*h));
        int fd;

        if (!h) {
                snprintf(err, NPF_BACKEND_ERR_MAX, "out of memory");
                return -ENOMEM;
        }
        snprintf(path, sizeof(path), "%s/trace.json", w->dir);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
                int r = -errno;
                snprintf(err, NPF_BACKEND_ERR_MAX, "cannot create %.180s: %s", path, strerror(errno));
                free(h);
                return r;
        }
        h->trace = fd;
        h->owner = getpid();
        h->pid = (int) h->owner;
        h->rank = w->rank;
        snprintf(h->dir, sizeof(h->dir), "%s", w->dir);

        /* profile_memory: the heap tracker, when the process was started with it preloaded. */
        const char *heap = "off";
        if (w->args->flags & NPF_FLAG_PROFILE_MEMORY) {
                npf_heap_start_fn start = (npf_heap_start_fn) (uintptr_t) dlsym(RTLD_DEFAULT, "npf_heap_start");
                npf_heap_stop_fn stop = (npf_heap_stop_fn) (uintptr_t) dlsym(RTLD_DEFAULT, "npf_heap_stop");
                const char *env = getenv("NPUPROF_HEAP_MIN_BYTES");
                uint64_t min = env && *env ? strtoull(env, NULL, 10) : NPF_HEAP_MIN_BYTES_DEFAULT;
                if (!start || !stop)
                        heap = "not available: start the process with LD_PRELOAD=libnpuprof-heap.so";
                else if (start(min) == 0) {
                        h->heap_stop = stop;
                        heap = "recording";
                } else
                        heap = "busy: another window of this process records the heap";
        }
        h->perf_cycles = perf_counter(PERF_COUNT_HW_CPU_CYCLES);
        h->perf_instructions = h->perf_cycles >= 0 ? perf_counter(PERF_COUNT_HW_INSTRUCTIONS) : -1;
        put(h,
                "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"npuprof host backend\",\"rank\":%" PRId64
                ",\"hardware_counters\":%s,\"hardware_counters_count\":\"%s\",\"heap_tracking\":\"%s\"},"
                "\n\"traceEvents\":["
                "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %" PRId64 "\"}}",
                w->rank, h->perf_cycles >= 0 ? "true" : "false", h->perf_cycles >= 0 ? COUNTED_THREADS : "nothing: perf_event_open is not allowed here",
                heap, h->pid, w->rank);
        h->steps = 1;   /* the metadata event above is the first of the list */
        h->step = w->first_step;
        sample(h, &h->at_start);
        *ret_state = h;
        return 0;
}

static int host_window_step(void *state, int64_t step, char *err)
{
        host_t *h = state;

        if (!owner(h))
                return 0;
        end_step(h);
        flush(h);
        h->step = step;
        if (h->error < 0) {
                snprintf(err, NPF_BACKEND_ERR_MAX, "cannot write trace.json: %s", strerror(-h->error));
                return h->error;
        }
        return 0;
}

static int host_window_close(void *state, int64_t last_step, bool complete, char *err)
{
        host_t *h = state;
        int r = 0;

        (void) last_step;
        /* In a forked child: the window, its trace and its heap tables are the parent's. */
        bool mine = owner(h);
        if (mine) {
                end_step(h);
                put(h, "\n],\"complete\":%s}\n", complete ? "true" : "false");
                flush(h);
                r = h->error;
        }
        if (close(h->trace) < 0 && r == 0 && mine)
                r = -errno;
        if (r < 0)
                snprintf(err, NPF_BACKEND_ERR_MAX, "cannot write trace.json: %s", strerror(-r));
        if (mine && h->heap_stop) {
                char path[sizeof(h->dir) + 32], herr[256];
                snprintf(path, sizeof(path), "%s/memory_snapshot.json", h->dir);
                if (h->heap_stop(path, herr) < 0 && r == 0) {
                        r = -EIO;
                        snprintf(err, NPF_BACKEND_ERR_MAX, "heap tracking: %.200s", herr);
                }
        }
        if (h->perf_cycles >= 0)
                close(h->perf_cycles);
        if (h->perf_instructions >= 0)
                close(h->perf_instructions);
        free(h);
        return r;
}

static void host_shutdown(void)
{
}

const npf_backend_ops_t npf_backend_host = {
        .name = "host",
        .probe = host_probe,
        .window_open = host_window_open,
        .window_step = host_window_step,
        .window_close = host_window_close,
        .shutdown = host_shutdown,
};
