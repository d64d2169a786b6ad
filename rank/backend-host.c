/* SPDX-License-Identifier: MIT */
/*
 * The host backend, real on any Linux: per step, wall and CPU time, resident memory, page
 * faults and context switches, and cycles and instructions through perf_event_open where
 * the kernel allows it, written as a Chrome trace (trace.json) that Perfetto and
 * chrome://tracing open: one "ProfilerStep#N" span per step, and counter tracks.
 */
#include "rank/backend.h"
#include "rank/heap.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct sample {
        uint64_t wall_ns;               /* CLOCK_MONOTONIC */
        uint64_t cpu_ns;                /* user + system of the process */
        uint64_t rss_kib;
        uint64_t minflt, majflt, nvcsw, nivcsw;
        uint64_t cycles, instructions;  /* 0 where perf counters are not allowed */
} sample_t;

typedef struct host {
        FILE *trace;
        int perf_cycles, perf_instructions;
        int64_t step;                   /* the step whose span is open */
        sample_t at_start;              /* of that step */
        int pid;
        int64_t rank;
        uint64_t steps;
        char dir[NPF_SHM_PATH_MAX + 160];
        npf_heap_stop_fn heap_stop;     /* set while heap tracking runs for this window */
} host_t;

static uint64_t clock_ns(clockid_t id)
{
        struct timespec ts;

        clock_gettime(id, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int perf_counter(uint64_t config)
{
        struct perf_event_attr pe = {
                .type = PERF_TYPE_HARDWARE,
                .size = sizeof(pe),
                .config = config,
                .exclude_kernel = 1,
                .exclude_hv = 1,
        };

        /* This process, any CPU; -1 where the kernel does not allow it (paranoid, VMs). */
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

        s->wall_ns = clock_ns(CLOCK_MONOTONIC);
        s->cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
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

/* Close the span of h->step, which ends now. */
static void end_step(host_t *h)
{
        sample_t now;

        sample(h, &now);
        const sample_t *a = &h->at_start;
        double ts = (double) a->wall_ns / 1000.0, dur = (double) (now.wall_ns - a->wall_ns) / 1000.0;
        fprintf(h->trace,
                "%s\n{\"name\":\"ProfilerStep#%" PRId64 "\",\"ph\":\"X\",\"cat\":\"step\",\"ts\":%.3f,\"dur\":%.3f,"
                "\"pid\":%d,\"tid\":%d,\"args\":{\"step\":%" PRId64 ",\"cpu_ms\":%.3f,\"rss_kib\":%" PRIu64
                ",\"minor_faults\":%" PRIu64 ",\"major_faults\":%" PRIu64 ",\"voluntary_switches\":%" PRIu64
                ",\"involuntary_switches\":%" PRIu64,
                h->steps ? "," : "", h->step, ts, dur, h->pid, h->pid, h->step, (double) (now.cpu_ns - a->cpu_ns) / 1e6,
                now.rss_kib, now.minflt - a->minflt, now.majflt - a->majflt, now.nvcsw - a->nvcsw, now.nivcsw - a->nivcsw);
        if (h->perf_cycles >= 0)
                fprintf(h->trace, ",\"cycles\":%" PRIu64 ",\"instructions\":%" PRIu64, now.cycles - a->cycles,
                        now.instructions - a->instructions);
        fprintf(h->trace, "}}");
        fprintf(h->trace,
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
        if (fd < 0 || !(h->trace = fdopen(fd, "w"))) {
                int r = -errno;
                snprintf(err, NPF_BACKEND_ERR_MAX, "cannot create %.180s: %s", path, strerror(errno));
                if (fd >= 0)
                        close(fd);
                free(h);
                return r;
        }
        h->pid = (int) getpid();
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
        fprintf(h->trace,
                "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"npuprof host backend\",\"rank\":%" PRId64
                ",\"hardware_counters\":%s,\"heap_tracking\":\"%s\"},\n\"traceEvents\":["
                "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %" PRId64 "\"}}",
                w->rank, h->perf_cycles >= 0 ? "true" : "false", heap, h->pid, w->rank);
        h->steps = 1;   /* the metadata event above is the first of the list */
        h->step = w->first_step;
        sample(h, &h->at_start);
        *ret_state = h;
        return 0;
}

static int host_window_step(void *state, int64_t step, char *err)
{
        host_t *h = state;

        (void) err;
        end_step(h);
        h->step = step;
        return 0;
}

static int host_window_close(void *state, int64_t last_step, bool complete, char *err)
{
        host_t *h = state;
        int r = 0;

        (void) last_step;
        end_step(h);
        fprintf(h->trace, "\n],\"complete\":%s}\n", complete ? "true" : "false");
        if (fflush(h->trace) != 0 || ferror(h->trace)) {
                r = errno ? -errno : -EIO;
                snprintf(err, NPF_BACKEND_ERR_MAX, "cannot write trace.json: %s", strerror(-r));
        }
        if (fclose(h->trace) != 0 && r == 0) {
                r = -errno;
                snprintf(err, NPF_BACKEND_ERR_MAX, "cannot write trace.json: %s", strerror(errno));
        }
        if (h->heap_stop) {
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
