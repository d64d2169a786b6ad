/* SPDX-License-Identifier: MIT */
/*
 * npuprofd, measured: latency from a configuration save (write a temporary, rename over) to
 * the new generation being visible in the segment, p50 and p99 over SAVES saves, with
 * inotify and with --no-inotify at a 100 ms poll; next to it, in the same run, the latency
 * of a bare inotify watch on the same directory (the floor any watcher has). Then the
 * daemon's resident memory and its wake-ups per second when idle. Last, the control
 * socket: the status round trip (a new connection each, as npuprofctl makes) with no other
 * client and with 1,000 idle clients held open, p50 and p99, and their ratio.
 *
 * Usage: bench-daemon PATH-TO-NPUPROFD [SAVES]
 */
#include "npuprof/protocol.h"
#include "npuprof/shm.h"
#include "bench/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap_us(long us)
{
        nanosleep(&(struct timespec) { .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000 }, NULL);
}

/* @p of the @n latencies at @v, in milliseconds. */
static double pct(uint64_t *v, int n, double p)
{
        double *d = malloc((size_t) n * sizeof(*d));

        for (int i = 0; i < n; i++)
                d[i] = (double) v[i] / 1e6;
        double r = npf_bench_percentile(d, n, p);
        free(d);
        return r;
}

/* Save @step as the new configuration the way editors do: a temporary renamed over. */
static void save(const char *dir, int64_t step)
{
        char tmp[512], path[512], text[128];
        int n = snprintf(text, sizeof(text), "{\"start_step\": %" PRId64 ", \"steps\": 5}\n", step);

        snprintf(tmp, sizeof(tmp), "%s/.profiler_config.json.tmp", dir);
        snprintf(path, sizeof(path), "%s/profiler_config.json", dir);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, text, (size_t) n) != n || close(fd) < 0) {
                perror("bench: save");
                exit(1);
        }
        if (rename(tmp, path) < 0) {
                perror("bench: rename");
                exit(1);
        }
}

static pid_t start_daemon(const char *npuprofd, const char *dir, const char *shm, bool inotify, const char *poll_ms)
{
        char config[512], sock[512];

        snprintf(config, sizeof(config), "%s/profiler_config.json", dir);
        snprintf(sock, sizeof(sock), "%s/npuprofd.sock", dir);
        pid_t pid = fork();
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 2);
                execl(npuprofd, npuprofd, "--config", config, "--shm-name", shm, "--socket", sock, "--poll-interval",
                      poll_ms, "--log", "stderr", inotify ? "--stall-timeout" : "--no-inotify", inotify ? "60000" : NULL,
                      (char *) NULL);
                _exit(127);
        }
        return pid;
}

/* Wait for the daemon's segment to publish a generation. Return: the reader, or NULL. */
static npf_shm_t *attach(const char *shm)
{
        char err[NPF_SHM_ERR_MAX];
        npf_shm_t *s;

        for (int i = 0; i < 500; i++) {
                if (npf_shm_open(shm, 0, &s, err) == 0) {
                        if (npf_shm_changed(npf_shm_ctl(s), 0))
                                return s;
                        npf_shm_close(s);
                }
                nap_us(10000);
        }
        return NULL;
}

/* Save @n times; record how long each took to become visible in @lat. Return: -1 on a wrong read. */
static int measure(const char *dir, npf_shm_t *s, int n, int64_t first_step, uint64_t *lat)
{
        const npf_shm_ctl_t *ctl = npf_shm_ctl(s);
        npf_shm_window_t *w = malloc(sizeof(*w));
        uint64_t gen = atomic_load(&((npf_shm_ctl_t *) ctl)->config_seq) / 2;
        unsigned seed = (unsigned) first_step;

        for (int i = 0; i < n; i++) {
                int64_t step = first_step + i;
                uint64_t t0 = npf_bench_now_ns();
                save(dir, step);
                while (!npf_shm_changed(ctl, gen)) {
                        if (npf_bench_now_ns() - t0 > 5000000000u) {
                                fprintf(stderr, "bench: save %d never became visible\n", i);
                                free(w);
                                return -1;
                        }
                        nap_us(20);
                }
                lat[i] = npf_bench_now_ns() - t0;
                if (npf_shm_read_window(ctl, 0, w) < 0 || w->args.start_step != step) {
                        fprintf(stderr, "bench: save %d: read start_step %" PRId64 ", wanted %" PRId64 "\n", i,
                                w->args.start_step, step);
                        free(w);
                        return -1;
                }
                gen = w->args.generation;
                /* Let each save stand alone, at a random phase of any poll timer. */
                nap_us(5000 + rand_r(&seed) % 100000);
        }
        free(w);
        return 0;
}

/* The floor: how long a bare inotify watch takes to hear of the same kind of save. */
static void measure_inotify(const char *dir, int n, uint64_t *lat)
{
        char buf[4096];
        int fd = inotify_init1(IN_CLOEXEC);

        inotify_add_watch(fd, dir, IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE);
        for (int i = 0; i < n; i++) {
                uint64_t t0 = npf_bench_now_ns();
                save(dir, 50000 + i);
                for (;;) {
                        struct pollfd p = { .fd = fd, .events = POLLIN };
                        if (poll(&p, 1, 1000) <= 0)
                                break;
                        ssize_t got = read(fd, buf, sizeof(buf));
                        bool moved = false;
                        for (char *e = buf; got > 0 && e < buf + got;) {
                                struct inotify_event *ev = (struct inotify_event *) e;
                                moved = moved || (ev->mask & IN_MOVED_TO);
                                e += sizeof(*ev) + ev->len;
                        }
                        if (moved)
                                break;
                }
                lat[i] = npf_bench_now_ns() - t0;
                nap_us(5000);
        }
        close(fd);
}

/* Context switches of every thread of @pid: each is a wake-up or a preemption. */
static uint64_t switches(pid_t pid)
{
        char path[128], line[256];
        uint64_t total = 0;

        for (int tid = pid; tid < pid + 64; tid++) {
                snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int) pid, tid);
                FILE *f = fopen(path, "re");
                if (!f)
                        continue;
                while (fgets(line, sizeof(line), f)) {
                        unsigned long long v;
                        if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
                            sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
                                total += v;
                }
                fclose(f);
        }
        return total;
}

/* A field of /proc/PID/status, in KiB. */
static long status_kib(pid_t pid, const char *field)
{
        char path[64], line[256];
        size_t n = strlen(field);
        long kib = -1;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        FILE *f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, field, n) == 0 && line[n] == ':' && sscanf(line + n + 1, "%ld", &kib) == 1)
                        break;
        if (f)
                fclose(f);
        return kib;
}

/* Context switches per second of @pid over @seconds, after letting it settle. */
static double idle_switches(pid_t pid, int seconds)
{
        nap_us(1500000);
        uint64_t sw0 = switches(pid), t0 = npf_bench_now_ns();
        nap_us(seconds * 1000000L);
        uint64_t sw1 = switches(pid), t1 = npf_bench_now_ns();
        return (double) (sw1 - sw0) / ((double) (t1 - t0) / 1e9);
}

static void stop_daemon(pid_t pid)
{
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
}

/* A connection to @sock, or -1. */
static int dial(const char *sock)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
        if (fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* @n status round trips on new connections into @lat. Return: -1 on a wrong answer. */
static int measure_status(const char *sock, int n, uint64_t *lat)
{
        char req[64], buf[65536];
        int len = snprintf(req, sizeof(req), "{\"version\": %d, \"command\": \"status\"}\n", NPF_PROTO_VERSION);

        for (int i = 0; i < n; i++) {
                uint64_t t0 = npf_bench_now_ns();
                int fd = dial(sock);
                size_t got = 0;
                if (fd < 0 || write(fd, req, (size_t) len) != len)
                        return -1;
                while (got < sizeof(buf) && !memchr(buf, '\n', got)) {
                        ssize_t r = read(fd, buf + got, sizeof(buf) - got);
                        if (r <= 0)
                                break;
                        got += (size_t) r;
                }
                close(fd);
                lat[i] = npf_bench_now_ns() - t0;
                if (got < 20 || !memmem(buf, got, "\"ok\":true", 9))
                        return -1;
        }
        return 0;
}

/* Status p50/p99 with no other client, then with @idle idle clients; prints their ratio. */
static int bench_idle_clients(const char *npuprofd, const char *dir, const char *shm, int n, int idle)
{
        char sock[512];
        uint64_t *none = calloc((size_t) n, 8), *loaded = calloc((size_t) n, 8);
        int *fds = calloc((size_t) idle, sizeof(int)), opened = 0, rc = -1;
        struct rlimit rl;

        /* The idle clients need descriptors here too. */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        snprintf(sock, sizeof(sock), "%s/npuprofd.sock", dir);
        pid_t d = start_daemon(npuprofd, dir, shm, true, "1000");
        npf_shm_t *s = attach(shm);
        if (!s || measure_status(sock, n, none) < 0)
                goto out;
        for (; opened < idle; opened++)
                if ((fds[opened] = dial(sock)) < 0)
                        goto out;
        nap_us(200000);
        if (measure_status(sock, n, loaded) < 0)
                goto out;
        double p99_none = pct(none, n, 0.99), p99_idle = pct(loaded, n, 0.99);
        printf("  status, no other client           p50 %6.2f ms  p99 %6.2f ms   (%d round trips, a connection each)\n",
               pct(none, n, 0.5), p99_none, n);
        printf("  status, %d idle clients         p50 %6.2f ms  p99 %6.2f ms   p99 ratio %.2f x the baseline above\n",
               idle, pct(loaded, n, 0.5), p99_idle, p99_idle / p99_none);
        rc = 0;
out:
        for (int i = 0; i < opened; i++)
                close(fds[i]);
        npf_shm_close(s);
        stop_daemon(d);
        npf_shm_unlink(shm);
        free(none);
        free(loaded);
        free(fds);
        return rc;
}


int main(int argc, char **argv)
{
        const char *npuprofd = argc > 1 ? argv[1] : "build/npuprofd";
        int saves = argc > 2 ? atoi(argv[2]) : 200;
        char dir[] = "/tmp/npfbench-XXXXXX", shm[64];
        uint64_t *floor_lat = calloc((size_t) saves, 8), *ino = calloc((size_t) saves, 8);
        uint64_t *poll_lat = calloc((size_t) saves, 8);
        int rc = 1;

        if (!mkdtemp(dir) || saves < 10)
                return 1;
        snprintf(shm, sizeof(shm), "npfbench-d-%d", (int) getpid());
        save(dir, 1);

        printf("npuprofd bench: %d saves (temporary + rename) each, on this machine\n\n", saves);
        measure_inotify(dir, saves, floor_lat);

        pid_t d = start_daemon(npuprofd, dir, shm, true, "1000");
        npf_shm_t *s = attach(shm);
        if (!s || measure(dir, s, saves, 1000, ino) < 0)
                goto out;
        printf("  save -> visible, inotify          p50 %6.2f ms  p99 %6.2f ms   goal p99 <= 5 ms\n", pct(ino, saves, 0.5),
               pct(ino, saves, 0.99));
        printf("  bare inotify watch (same saves)   p50 %6.2f ms  p99 %6.2f ms   the floor for any watcher\n",
               pct(floor_lat, saves, 0.5), pct(floor_lat, saves, 0.99));

        /* Idle: nothing changes, no rank attached. Count context switches of every thread over
         * 6 s at this poll interval, then at twice it: if only the poll wakes the daemon, the
         * switches per poll tick come out the same. */
        double idle_1000 = idle_switches(d, 6), per_tick_1000 = idle_1000 * 1.0;
        printf("  resident memory                   %6ld KiB                     goal <= 4096 KiB\n"
               "                                    (private %ld, shared libraries %ld, segment %ld)\n",
               status_kib(d, "VmRSS"), status_kib(d, "RssAnon"), status_kib(d, "RssFile"), status_kib(d, "RssShmem"));
        npf_shm_close(s);
        stop_daemon(d);
        npf_shm_unlink(shm);

        d = start_daemon(npuprofd, dir, shm, true, "2000");
        s = attach(shm);
        if (!s)
                goto out;
        double idle_2000 = idle_switches(d, 8), per_tick_2000 = idle_2000 * 2.0;
        printf("  idle context switches, all threads  poll 1000 ms: %.2f/s = %.2f per tick;"
               " poll 2000 ms: %.2f/s = %.2f per tick\n"
               "                                    (no timer but the poll's runs when idle: a tick is the\n"
               "                                    timer, the thread-pool stat, and the loop taking its result)\n",
               idle_1000, per_tick_1000, idle_2000, per_tick_2000);
        npf_shm_close(s);
        stop_daemon(d);
        npf_shm_unlink(shm);

        d = start_daemon(npuprofd, dir, shm, false, "100");
        s = attach(shm);
        if (!s || measure(dir, s, saves, 100000, poll_lat) < 0)
                goto out;
        printf("  save -> visible, --no-inotify     p50 %6.2f ms  p99 %6.2f ms   goal p99 <= 105 ms (poll 100 ms + 5)\n",
               pct(poll_lat, saves, 0.5), pct(poll_lat, saves, 0.99));
        npf_shm_close(s);
        s = NULL;
        stop_daemon(d);
        d = 0;
        npf_shm_unlink(shm);
        if (bench_idle_clients(npuprofd, dir, shm, 2000, 1000) < 0)
                goto out;
        rc = 0;
out:
        if (rc)
                fprintf(stderr, "bench: the daemon did not publish; is %s built?\n", npuprofd);
        npf_shm_close(s);
        if (d > 0)
                stop_daemon(d);
        npf_shm_unlink(shm);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
                rc = 1;
        free(floor_lat);
        free(ino);
        free(poll_lat);
        return rc;
}
