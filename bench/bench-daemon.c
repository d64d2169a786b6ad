/* SPDX-License-Identifier: MIT */
/*
 * npuprofd, measured: latency from a configuration save (write a temporary, rename over) to
 * the new generation being visible in the segment, p50 and p99 over SAVES saves, with
 * inotify and with --no-inotify at a 100 ms poll; next to it, in the same run, the latency
 * of a bare inotify watch on the same directory (the floor any watcher has). Then the
 * daemon's resident memory and its wake-ups per second when idle. Last, the control
 * socket: the status round trip (a new connection each, as npuprofctl makes) with no other
 * client and with 1,000 idle clients held open, p50 and p99, and their ratio. Last, with
 * 1,024 live ranks attached (MANY-RANKS, tests/fleet/many-ranks.c, stepping every 10 ms), at
 * a 1000 ms and a 100 ms poll: the daemon's resident memory beside the idle daemon's, its
 * CPU time per sweep over 20 s, and the status round trip.
 *
 * Run as root, it first gives itself a private /dev/shm (a mount namespace of its own with a
 * fresh tmpfs there), so that nothing it starts can leave objects in the host's; otherwise it
 * uses private segment names and removes them at the end.
 *
 * Usage: bench-daemon PATH-TO-NPUPROFD [SAVES [MANY-RANKS]]
 */
#include "npuprof/protocol.h"
#include "npuprof/shm.h"
#include "bench/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
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
/* A "Field: N kB" line of /proc/PID/FILE (status, smaps_rollup). */
static long proc_kib(pid_t pid, const char *file, const char *field)
{
        char path[64], line[256];
        size_t n = strlen(field);
        long kib = -1;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, file);
        FILE *f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, field, n) == 0 && line[n] == ':' && sscanf(line + n + 1, "%ld", &kib) == 1)
                        break;
        if (f)
                fclose(f);
        return kib;
}

static long status_kib(pid_t pid, const char *field)
{
        return proc_kib(pid, "status", field);
}

/* The proportional set: each shared page divided among the processes that map it. */
static long pss_kib(pid_t pid)
{
        return proc_kib(pid, "smaps_rollup", "Pss");
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

/*
 * The baseline of the daemon's resident memory, in the same run: @prog loads the libraries
 * the daemon loads and waits. On kernels that map a library's page cache in large folios,
 * most of a library is resident in any process that touches it at all.
 */
static void measure_floor(const char *prog)
{
        pid_t p = fork();

        if (p == 0) {
                execl(prog, prog, (char *) NULL);
                _exit(127);
        }
        if (p < 0)
                return;
        nap_us(300000);
        printf("  the same libraries, doing nothing %6ld KiB                     the floor: %s\n"
               "                                    (private %ld, shared libraries %ld; proportional set %ld KiB)\n",
               status_kib(p, "VmRSS"), prog, status_kib(p, "RssAnon"), status_kib(p, "RssFile"), pss_kib(p));
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
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

/*
 * Send @req on a new connection to @sock and read the whole answer (one line, of any length)
 * into *@buf (grown as needed, *@cap its size). Return: its length, or -1.
 */
static ssize_t ask(const char *sock, const char *req, char **buf, size_t *cap)
{
        size_t got = 0, len = strlen(req);
        int fd = dial(sock);

        if (fd < 0 || write(fd, req, len) != (ssize_t) len) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        for (;;) {
                if (got == *cap) {
                        char *b = realloc(*buf, *cap * 2);
                        if (!b)
                                break;
                        *buf = b;
                        *cap *= 2;
                }
                ssize_t r = read(fd, *buf + got, *cap - got);
                if (r <= 0)
                        break;
                got += (size_t) r;
                if (memchr(*buf + got - (size_t) r, '\n', (size_t) r))
                        break;
        }
        close(fd);
        return (ssize_t) got;
}

/* @n status round trips on new connections into @lat. Return: -1 on a wrong answer. */
static int measure_status(const char *sock, int n, uint64_t *lat)
{
        char req[64];
        size_t cap = 65536;
        char *buf = malloc(cap);
        int rc = 0;

        snprintf(req, sizeof(req), "{\"version\": %d, \"command\": \"status\"}\n", NPF_PROTO_VERSION);
        for (int i = 0; i < n && rc == 0; i++) {
                uint64_t t0 = npf_bench_now_ns();
                ssize_t got = ask(sock, req, &buf, &cap);
                lat[i] = npf_bench_now_ns() - t0;
                if (got < 20 || !memmem(buf, (size_t) got, "\"ok\":true", 9))
                        rc = -1;
        }
        free(buf);
        return rc;
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


/* The daemon's CPU time so far, all threads, in clock ticks (utime + stime of /proc/PID/stat). */
static long long cpu_ticks(pid_t pid)
{
        char path[64], line[1024];
        unsigned long long ut = 0, st = 0;
        long long ticks = -1;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        FILE *f = fopen(path, "re");
        if (f && fgets(line, sizeof(line), f)) {
                /* After the command's name in parentheses: state is field 3, utime 14, stime 15. */
                char *p = strrchr(line, ')');
                if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
                        ticks = (long long) (ut + st);
        }
        if (f)
                fclose(f);
        return ticks;
}

/*
 * From the daemon's Prometheus text, as the metrics command sends it in JSON: the ranks
 * attached (npuprof_ranks summed over its states) and npuprof_sweeps_total. Return: -1 if
 * the daemon did not answer.
 */
static int ranks_and_sweeps(const char *sock, long *ret_ranks, long *ret_sweeps)
{
        static const char ranks_key[] = "npuprof_ranks{state=", sweeps_key[] = "npuprof_sweeps_total ";
        char req[64];
        size_t cap = 65536;
        char *buf = malloc(cap);
        long ranks = 0, sweeps = -1;

        snprintf(req, sizeof(req), "{\"version\": %d, \"command\": \"metrics\"}\n", NPF_PROTO_VERSION);
        ssize_t got = ask(sock, req, &buf, &cap);
        if (got <= 0 || !memmem(buf, (size_t) got, "\"ok\":true", 9)) {
                free(buf);
                return -1;
        }
        buf[got - 1] = '\0';
        for (char *p = buf; (p = strstr(p, ranks_key)); p++) {
                char *brace = strchr(p, '}');
                if (brace)
                        ranks += strtol(brace + 1, NULL, 10);
        }
        /* The first is its HELP line: the sample is the one followed by a number. */
        for (char *p = buf; (p = strstr(p, sweeps_key)); p++) {
                char *end, *at = p + strlen(sweeps_key);
                long v = strtol(at, &end, 10);
                if (end > at)
                        sweeps = v;
        }
        free(buf);
        *ret_ranks = ranks;
        *ret_sweeps = sweeps;
        return 0;
}

/* @n ranks of libnpuprof attached to @shm, stepping every 10 ms for a day, in a process group of their own. */
static pid_t start_ranks(const char *many, const char *shm, int n)
{
        char ranks[16];

        snprintf(ranks, sizeof(ranks), "%d", n);
        pid_t pid = fork();
        if (pid == 0) {
                setpgid(0, 0);
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 1);
                dup2(null, 2);
                execl(many, many, "--shm", shm, "--ranks", ranks, "--procs", "4", "--threads", "1", "--steps", "8640000",
                      "--step-ms", "10", (char *) NULL);
                _exit(127);
        }
        if (pid > 0)
                setpgid(pid, pid);
        return pid;
}

static void stop_ranks(pid_t pgid)
{
        kill(-pgid, SIGKILL);
        waitpid(pgid, NULL, 0);
}

/*
 * With @n live ranks attached at a @poll_ms poll: the daemon's resident memory (beside the
 * idle daemon's @idle_kib), its CPU time per sweep over @seconds, and @requests status
 * round trips. Return: -1 if the ranks never all attached or the daemon did not answer.
 */
static int bench_ranks(const char *npuprofd, const char *many, const char *dir, const char *shm, const char *poll_ms,
                       int n, int seconds, int requests, long idle_kib)
{
        char sock[512];
        uint64_t *lat = calloc((size_t) requests, 8);
        long ranks = 0, sweeps0, sweeps1;
        pid_t r = 0;
        int rc = -1;

        snprintf(sock, sizeof(sock), "%s/npuprofd.sock", dir);
        /* A window far beyond any step the ranks reach: they are watched, never profiled. */
        save(dir, INT64_C(1000000000000));
        pid_t d = start_daemon(npuprofd, dir, shm, true, poll_ms);
        npf_shm_t *s = attach(shm);
        if (!s || (r = start_ranks(many, shm, n)) < 0) {
                fprintf(stderr, "bench: could not start the daemon or %s\n", many);
                goto out;
        }
        uint64_t t0 = npf_bench_now_ns();
        while (npf_bench_now_ns() - t0 < 60000000000u) {
                if (ranks_and_sweeps(sock, &ranks, &sweeps0) == 0 && ranks == n)
                        break;
                nap_us(100000);
        }
        if (ranks != n) {
                fprintf(stderr, "bench: %ld of %d ranks attached after 60 s\n", ranks, n);
                goto out;
        }
        uint64_t attached_ms = (npf_bench_now_ns() - t0) / 1000000u;
        /* Let a few sweeps pass after the last rank attached, so that what they touch is resident. */
        nap_us(3 * atol(poll_ms) * 1000L + 500000);
        if (ranks_and_sweeps(sock, &ranks, &sweeps0) < 0)
                goto out;
        long long c0 = cpu_ticks(d);
        uint64_t w0 = npf_bench_now_ns();
        nap_us(seconds * 1000000L);
        long long c1 = cpu_ticks(d);
        uint64_t w1 = npf_bench_now_ns();
        if (ranks_and_sweeps(sock, &ranks, &sweeps1) < 0 || sweeps1 <= sweeps0) {
                fprintf(stderr, "bench: the daemon did not sweep (%ld sweeps, then %ld)\n", sweeps0, sweeps1);
                goto out;
        }
        long vm = status_kib(d, "VmRSS"), anon = status_kib(d, "RssAnon"), file = status_kib(d, "RssFile"),
             shmem = status_kib(d, "RssShmem"), pss = pss_kib(d);
        if (measure_status(sock, requests, lat) < 0) {
                fprintf(stderr, "bench: a status with %d ranks went unanswered\n", n);
                goto out;
        }
        long vm_status = status_kib(d, "VmRSS"), anon_status = status_kib(d, "RssAnon"),
             shmem_status = status_kib(d, "RssShmem");
        /* The view kept for statuses is given back 30 s after the last one, at a sweep. */
        nap_us(32000000L + 2 * atol(poll_ms) * 1000L);
        long vm_after = status_kib(d, "VmRSS"), anon_after = status_kib(d, "RssAnon");

        double hz = (double) sysconf(_SC_CLK_TCK), cpu_ms = (double) (c1 - c0) * 1000.0 / hz;
        double wall_s = (double) (w1 - w0) / 1e9;
        long swept = sweeps1 - sweeps0;
        printf("  %d ranks attached, poll %4s ms  (all attached %" PRIu64 " ms after they started; ranks step every 10 ms)\n",
               n, poll_ms, attached_ms);
        printf("    resident memory                 %6ld KiB  idle daemon %ld KiB  goal <= 4096 KiB: %s\n"
               "                                    (private %ld, shared libraries %ld, segment %ld;\n"
               "                                    proportional set %ld KiB)\n",
               vm, idle_kib, vm <= 4096 ? "met" : "NOT met", anon, file, shmem, pss);
        printf("    daemon CPU per sweep            %6.3f ms    all its CPU / sweeps: %ld sweeps in %.1f s, %.0f ms of CPU\n"
               "                                    (%.2f%% of a core; counted in ticks of %.0f ms)\n",
               cpu_ms / (double) swept, swept, wall_s, cpu_ms, 100.0 * cpu_ms / 1000.0 / wall_s, 1000.0 / hz);
        printf("    status, %d ranks              p50 %6.2f ms  p99 %6.2f ms   (%d round trips, a connection each)\n", n,
               pct(lat, requests, 0.5), pct(lat, requests, 0.99), requests);
        printf("    resident after those statuses   %6ld KiB  (private %ld, segment %ld: the rank table kept as JSON)\n",
               vm_status, anon_status, shmem_status);
        printf("    ... 32 s after the last one     %6ld KiB  (private %ld: the table given back)  goal <= 4096 KiB: %s\n",
               vm_after, anon_after, vm_after <= 4096 ? "met" : "NOT met");
        rc = 0;
out:
        if (r > 0)
                stop_ranks(r);
        npf_shm_close(s);
        stop_daemon(d);
        npf_shm_unlink(shm);
        free(lat);
        return rc;
}

/*
 * As root, a private /dev/shm: a mount namespace of this process's own (inherited by the
 * daemons and ranks it starts) with a fresh tmpfs there. Return: whether it has one.
 */
static bool private_dev_shm(void)
{
        if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0)
                return false;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
                return false;
        return true;
}

int main(int argc, char **argv)
{
        const char *npuprofd = argc > 1 ? argv[1] : "build/npuprofd";
        int saves = argc > 2 ? atoi(argv[2]) : 200;
        const char *many = argc > 3 ? argv[3] : NULL;
        const char *libs_floor = argc > 4 ? argv[4] : NULL;
        char dir[] = "/tmp/npfbench-XXXXXX", shm[64];
        uint64_t *floor_lat = calloc((size_t) saves, 8), *ino = calloc((size_t) saves, 8);
        uint64_t *poll_lat = calloc((size_t) saves, 8);
        int rc = 1;
        long idle_kib;

        private_dev_shm();
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
        idle_kib = status_kib(d, "VmRSS");
        printf("  resident memory                   %6ld KiB                     goal <= 4096 KiB\n"
               "                                    (private %ld, shared libraries %ld, segment %ld;\n"
               "                                    proportional set %ld KiB: shared pages divided\n"
               "                                    among the processes that map them)\n",
               idle_kib, status_kib(d, "RssAnon"), status_kib(d, "RssFile"), status_kib(d, "RssShmem"), pss_kib(d));
        if (libs_floor)
                measure_floor(libs_floor);
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
        if (many && (bench_ranks(npuprofd, many, dir, shm, "1000", (int) NPF_SHM_SLOTS, 20, 200, idle_kib) < 0 ||
                     bench_ranks(npuprofd, many, dir, shm, "100", (int) NPF_SHM_SLOTS, 20, 200, idle_kib) < 0))
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
