/* SPDX-License-Identifier: MIT */
/* npuprofd: the per-node daemon. Options here; the daemon itself is daemon/daemon.c. */
#include "daemon/analyze.h"
#include "daemon/daemon.h"
#include "daemon/fleet.h"
#include "daemon/fwshm.h"
#include "daemon/log.h"
#include "daemon/keptfile.h"
#include "daemon/progress.h"
#include "lib/outroot.h"
#include "lib/proc.h"
#include "lib/shmopen.h"
#include "npuprof/protocol.h"
#include "npuprof/shm.h"
#include "conf/view.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <grp.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define FD_RESERVE 64   /* descriptors kept for all but the clients: segment, watches, analyzers */

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: npuprofd --config PATH [OPTIONS]\n"
                "\n"
                "Examples:\n"
                "  systemctl enable --now npuprofd.socket npuprofd.service\n"
                "                         the packaged daemon, on /etc/npuprof/profiler_config.json\n"
                "  npuprofd --config ~/profiler_config.json --shm-name $USER --socket /tmp/npuprofd.sock \\\n"
                "           --output-root /tmp/npuprof\n"
                "                         one of your own, without root, beside the node's: then\n"
                "                         npuprofctl --socket /tmp/npuprofd.sock --shm-name $USER status\n"
                "\n"
                "The per-node npuprof daemon: watches profiler_config.json and publishes each new valid\n"
                "configuration into the node's shared-memory segment for the training ranks.\n"
                "\n"
                "  --config PATH          the profiler_config.json to watch (required)\n"
                "  --shm-name NAME        the segment's name (default $%s, else %s)\n"
                "  --socket PATH          the control socket (default $%s, else %s)\n"
                "  --socket-group GROUP   group of the control socket (default: the daemon's)\n"
                "  --rank-group GROUP     the rank table's group, mode 0660: only the daemon's user and\n"
                "                         GROUP may attach ranks (default: mode 0666, any user)\n"
                "  --poll-interval MS     stat the file every MS milliseconds (default %u, minimum %u)\n"
                "  --no-inotify           poll only: for NFS and file systems where inotify misses edits\n"
                "  --output-root DIR      the only tree window output may be written under (default\n"
                "                         %s). A configuration's prof_dir is resolved\n"
                "                         against it before publication: empty is DIR itself, relative\n"
                "                         is below DIR, absolute must be DIR or below it; \"..\" is\n"
                "                         refused. A file whose directory falls outside is invalid.\n"
                "  --stall-timeout MS     a collecting rank without a heartbeat this long is stalled\n"
                "                         (default %u)\n"
                "  --stall-after S        a rank that made no step for S seconds is in a progress stall\n"
                "                         (default %u; decimals allowed, from 1)...\n"
                "  --stall-factor K       ...or for K times its own step time, where that is longer\n"
                "                         (default %u)\n"
                "  --slowdown-pct P       the job's step time P%% above its baseline...\n"
                "                         (default %u)\n"
                "  --slowdown-steps N     ...for N steps is a slowdown (default %u, at least %u)\n"
                "  --max-clients N        control-socket connections at once (default %u, at most the\n"
                "                         open-file limit less %u); one more closes the longest idle\n"
                "  --idle-timeout MS      close a connection that completes no request for MS (default %u)\n"
                "  --log stderr|journal   where logs go (default: the journal when stderr is the journal)\n"
                "  --metrics-file PATH    keep the Prometheus exposition (the `metrics` command's text) in\n"
                "                         PATH, an absolute *.prom file in node_exporter's textfile\n"
                "                         directory; replaced whole (a temporary .NAME.tmp renamed over\n"
                "                         it), at start, on every change and every --metrics-interval\n"
                "  --metrics-interval S   rewrite it every S seconds at least (default %u; decimals\n"
                "                         allowed, from 0.01 to %u)\n"
                "  --fleet-dir DIR        keep this node's record in DIR/NAME.json, DIR absolute and\n"
                "                         shared by the nodes, for `npuprofctl fleet`: replaced whole\n"
                "                         on every change and every --fleet-interval\n"
                "  --node-name NAME       the record's name (default: the host name); [A-Za-z0-9._-]\n"
                "  --fleet-interval S     rewrite it every S seconds at least (default %u; decimals\n"
                "                         allowed); a record older than %u intervals is stale\n"
                "\n"
                "Every window that ends done is analysed by npuprof-replay in a child process, into\n"
                "WINDOW/analysis (report.json, report.txt, memory.svg), or $STATE_DIRECTORY/analysis/\n"
                "when the daemon may not write into the window directory:\n"
                "  --analyzer PATH        the analyzer (default: npuprof-replay beside npuprofd, else %s)\n"
                "  --analyze-jobs N       analyses at once, the others wait (default %u, at most %u);\n"
                "                         0: no analysis\n"
                "  --analyze-timeout S    kill an analysis after S seconds, wall clock; also its CPU\n"
                "                         time limit (default %u)\n"
                "  --analyze-memory BYTES its address-space limit, with K, M, G or T (default 4G);\n"
                "                         0: none (an analyzer built with AddressSanitizer needs that)\n"
                "  --analyze-nice N       lower its priority by N, 0 to 19 (default %d)\n"
                "\n"
                "Unmodified torch_npu and MindSpore jobs are driven by publishing into their own shared\n"
                "memory, DynamicProfileNpuShm<hour> and DynamicProfileShm<hour> (all off by default):\n"
                "  --legacy LIST          torch_npu, mindspore-json and/or mindspore-packed (release 2.5),\n"
                "                         comma-separated; the two MindSpore layouts exclude each other;\n"
                "                         the packed object is the job's own, adopted when it appears\n"
                "  --legacy-group GROUP   the group of the objects it makes, mode 0660 (default: 0666)\n"
                "  --legacy-refresh S     refresh their change time every S seconds (default %u)\n"
                "  --legacy-clock-offset S  add S seconds to the clock that names the hours (tests)\n"
                "  --shm-opener PATH      a job's object of another user, which this daemon may not open,\n"
                "                         is asked of npuprof-shmopen listening at PATH (default %s;\n"
                "                         \"\" for none)\n"
                "\n"
                "Unmodified PyTorch jobs started with KINETO_USE_DAEMON=1 poll libkineto's endpoint, as\n"
                "they poll dynolog's; this daemon serves it where it can be had (on by default):\n"
                "  --kineto-socket-dir DIR  serve DIR/dynolog, a socket file (mode 0666, or 0660 with\n"
                "                         --rank-group), for jobs started with KINETO_IPC_SOCKET_DIR=DIR\n"
                "                         (default $KINETO_IPC_SOCKET_DIR, else the abstract name\n"
                "                         \"\\0dynolog\\0\" of the daemon's network namespace, as \"\" says)\n"
                "  --no-kineto            serve neither\n"
                "  --help                 this text\n"
                "  --version              the version, the shm ABI and the protocol version\n"
                "\n"
                "Signals: SIGHUP reloads the file; SIGTERM and SIGINT stop. See npuprofd(8).\n",
                NPF_ENV_SHM, NPF_SHM_NAME_DEFAULT, NPF_ENV_SOCKET, NPF_PROTO_SOCKET_DEFAULT, NPF_POLL_MS_DEFAULT,
                NPF_POLL_MS_MIN, NPF_OUTPUT_ROOT_DEFAULT, NPF_STALL_MS_DEFAULT, NPF_PROGRESS_STALL_AFTER_S_DEFAULT,
                NPF_PROGRESS_STALL_FACTOR_DEFAULT, NPF_PROGRESS_SLOWDOWN_PCT_DEFAULT, NPF_PROGRESS_SLOWDOWN_STEPS_DEFAULT,
                NPF_PROGRESS_SLOWDOWN_STEPS_MIN, NPF_PROTO_CLIENTS_MAX, FD_RESERVE,
                NPF_PROTO_IDLE_MS, NPF_METRICS_INTERVAL_S_DEFAULT, NPF_KEPT_INTERVAL_S_MAX, NPF_FLEET_INTERVAL_S_DEFAULT,
                NPF_FLEET_STALE_INTERVALS, NPF_ANALYZER_PATH,
                NPF_ANALYZE_JOBS_DEFAULT, NPF_ANALYZE_JOBS_MAX, NPF_ANALYZE_TIMEOUT_S_DEFAULT, NPF_ANALYZE_NICE_DEFAULT,
                NPF_FWSHM_REFRESH_S_DEFAULT, NPF_SHMOPEN_SOCKET);
}

/* Parse a positive number of milliseconds. Return: 0, or -EINVAL with a message printed. */
static int parse_ms(const char *opt, const char *s, unsigned min, uint64_t *ret)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);

        if (errno || end == s || *end || s[0] == '-' || v < min || v > 86400000ull) {
                fprintf(stderr, "npuprofd: %s takes milliseconds from %u to 86400000, not '%s'\n", opt, min, s);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

/* Parse an integer from @min to @max. Return: 0, or -EINVAL with a message printed. */
static int parse_int(const char *opt, const char *s, long long min, long long max, long long *ret)
{
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);

        if (errno || end == s || *end || v < min || v > max) {
                fprintf(stderr, "npuprofd: %s takes an integer from %lld to %lld, not '%s'\n", opt, min, max, s);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

/* --metrics-interval, --fleet-interval: seconds, decimals allowed, from 0.01. Return: 0, or -EINVAL. */
static int parse_interval(const char *opt, const char *s, uint64_t *ret_ms)
{
        char *end;
        errno = 0;
        double v = strtod(s, &end);

        if (errno || end == s || *end || !(v >= 0.01 && v <= NPF_KEPT_INTERVAL_S_MAX)) {
                fprintf(stderr, "npuprofd: %s takes seconds from 0.01 to %u, not '%s'\n", opt,
                        NPF_KEPT_INTERVAL_S_MAX, s);
                return -EINVAL;
        }
        *ret_ms = (uint64_t) (v * 1000.0 + 0.5);
        return 0;
}

/* --stall-after: seconds, decimals allowed, from 1 to a week. Return: 0, or -EINVAL. */
static int parse_seconds(const char *opt, const char *s, uint64_t *ret_ms)
{
        char *end;
        errno = 0;
        double v = strtod(s, &end);

        if (errno || end == s || *end || !(v >= 1 && v <= 604800)) {
                fprintf(stderr, "npuprofd: %s takes seconds from 1 to 604800, not '%s'\n", opt, s);
                return -EINVAL;
        }
        *ret_ms = (uint64_t) (v * 1000.0 + 0.5);
        return 0;
}

/* --analyze-memory: 0, or a byte count of at least NPF_ANALYZE_MEMORY_MIN. Return: 0, or -EINVAL. */
static int parse_memory(const char *s, uint64_t *ret)
{
        uint64_t v;

        if (npf_analyze_parse_bytes(s, &v) < 0 || (v != 0 && v < NPF_ANALYZE_MEMORY_MIN)) {
                fprintf(stderr, "npuprofd: --analyze-memory takes 0 (no limit) or bytes from 1M, with K, M, G or T "
                        "(like 4G), not '%s'\n", s);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

/*
 * Raise the soft limit on open files to the hard one, so that many clients can connect.
 * Return: the clients that fit in it, at most @wanted.
 */
static unsigned fit_clients(unsigned wanted)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return wanted;
        if (rl.rlim_cur < rl.rlim_max) {
                rlim_t cur = rl.rlim_cur;
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        rl.rlim_cur = cur;
        }
        if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t) wanted + FD_RESERVE)
                return wanted;
        return rl.rlim_cur > 2 * FD_RESERVE ? (unsigned) (rl.rlim_cur - FD_RESERVE) : FD_RESERVE;
}

/*
 * The directory of --config @path, which inotify watches (the file itself may come later):
 * it must be there and readable to this user. Return: 0, or -errno with what to do printed.
 */
static int check_config_dir(const char *path)
{
        char buf[PATH_MAX];
        struct stat st;
        int r = 0;

        if (snprintf(buf, sizeof(buf), "%s", path) >= (int) sizeof(buf))
                return 0;       /* the watch says what is wrong with it */
        const char *dir = dirname(buf);
        if (stat(dir, &st) < 0)
                r = -errno;
        else if (!S_ISDIR(st.st_mode))
                r = -ENOTDIR;
        else if (access(dir, R_OK | X_OK) < 0)
                r = -errno;
        switch (r) {
        case 0:
                return 0;
        case -ENOENT:
                fprintf(stderr, "npuprofd: --config %s: the directory %s does not exist: create it (mkdir -p %s) "
                        "and put the file there, or give --config the file's right path\n", path, dir, dir);
                break;
        case -ENOTDIR:
                fprintf(stderr, "npuprofd: --config %s: %s is not a directory: give --config the file's right "
                        "path\n", path, dir);
                break;
        case -EACCES:
                fprintf(stderr, "npuprofd: --config %s: this user (uid %u) may not read the directory %s, which "
                        "npuprofd watches: let it read and search it (chmod o+rx %s, or give it to a group of this "
                        "user), or run npuprofd as another user\n", path, (unsigned) geteuid(), dir, dir);
                break;
        default:
                fprintf(stderr, "npuprofd: --config %s: the directory %s: %s\n", path, dir, strerror(-r));
                break;
        }
        return r;
}

/*
 * Say, once at start, when the output root @root cannot hold windows: a file stands where a
 * directory should, or it is missing and this user may not create it (a rank creates it,
 * as its own user, and fails as this one would). Only a warning: the file system may yet
 * change, and until then every file is found invalid or every window fails, saying why.
 */
static void check_output_root(const char *root)
{
        char dir[NPF_SHM_PATH_MAX];
        struct stat st;

        snprintf(dir, sizeof(dir), "%s", root);
        for (;;) {
                if (stat(dir, &st) == 0) {
                        if (!S_ISDIR(st.st_mode))
                                fprintf(stderr, "npuprofd: warning: --output-root %s: %s is not a directory, so no "
                                        "window can be written: give --output-root a directory\n", root, dir);
                        else if (strcmp(dir, root) != 0 && !(st.st_mode & S_IWOTH) && access(dir, W_OK) < 0)
                                fprintf(stderr, "npuprofd: warning: --output-root %s does not exist, and this user "
                                        "(uid %u) may not create it in %s, as each rank does for its own user: "
                                        "create it for every user (install -d -m 1777 %s), or give --output-root a "
                                        "directory the ranks may write\n", root, (unsigned) geteuid(), dir, root);
                        return;
                }
                char *slash = strrchr(dir, '/');
                if ((errno != ENOENT && errno != ENOTDIR) || !slash || slash == dir)
                        return;
                *slash = '\0';
        }
}

int main(int argc, char **argv)
{
        enum { OPT_CONFIG = 256, OPT_SHM, OPT_SOCKET, OPT_GROUP, OPT_POLL, OPT_NO_INOTIFY, OPT_ROOT, OPT_STALL,
               OPT_MAX_CLIENTS, OPT_IDLE, OPT_LOG, OPT_ANALYZER, OPT_JOBS, OPT_TIMEOUT, OPT_MEMORY, OPT_NICE,
               OPT_LEGACY, OPT_LEGACY_GROUP, OPT_LEGACY_REFRESH, OPT_LEGACY_CLOCK, OPT_METRICS_FILE,
               OPT_METRICS_INTERVAL, OPT_RANK_GROUP, OPT_FLEET_DIR, OPT_NODE_NAME, OPT_FLEET_INTERVAL, OPT_OPENER,
               OPT_STALL_AFTER, OPT_STALL_FACTOR, OPT_SLOWDOWN_PCT, OPT_SLOWDOWN_STEPS, OPT_KINETO_DIR, OPT_NO_KINETO, OPT_HELP, OPT_VERSION };
        static const struct option opts[] = {
                { "config", required_argument, NULL, OPT_CONFIG },
                { "shm-name", required_argument, NULL, OPT_SHM },
                { "socket", required_argument, NULL, OPT_SOCKET },
                { "socket-group", required_argument, NULL, OPT_GROUP },
                { "rank-group", required_argument, NULL, OPT_RANK_GROUP },
                { "poll-interval", required_argument, NULL, OPT_POLL },
                { "no-inotify", no_argument, NULL, OPT_NO_INOTIFY },
                { "output-root", required_argument, NULL, OPT_ROOT },
                { "stall-timeout", required_argument, NULL, OPT_STALL },
                { "stall-after", required_argument, NULL, OPT_STALL_AFTER },
                { "stall-factor", required_argument, NULL, OPT_STALL_FACTOR },
                { "slowdown-pct", required_argument, NULL, OPT_SLOWDOWN_PCT },
                { "slowdown-steps", required_argument, NULL, OPT_SLOWDOWN_STEPS },
                { "max-clients", required_argument, NULL, OPT_MAX_CLIENTS },
                { "idle-timeout", required_argument, NULL, OPT_IDLE },
                { "log", required_argument, NULL, OPT_LOG },
                { "analyzer", required_argument, NULL, OPT_ANALYZER },
                { "analyze-jobs", required_argument, NULL, OPT_JOBS },
                { "analyze-timeout", required_argument, NULL, OPT_TIMEOUT },
                { "analyze-memory", required_argument, NULL, OPT_MEMORY },
                { "analyze-nice", required_argument, NULL, OPT_NICE },
                { "legacy", required_argument, NULL, OPT_LEGACY },
                { "legacy-group", required_argument, NULL, OPT_LEGACY_GROUP },
                { "legacy-refresh", required_argument, NULL, OPT_LEGACY_REFRESH },
                { "legacy-clock-offset", required_argument, NULL, OPT_LEGACY_CLOCK },
                { "shm-opener", required_argument, NULL, OPT_OPENER },
                { "kineto-socket-dir", required_argument, NULL, OPT_KINETO_DIR },
                { "no-kineto", no_argument, NULL, OPT_NO_KINETO },
                { "metrics-file", required_argument, NULL, OPT_METRICS_FILE },
                { "metrics-interval", required_argument, NULL, OPT_METRICS_INTERVAL },
                { "fleet-dir", required_argument, NULL, OPT_FLEET_DIR },
                { "node-name", required_argument, NULL, OPT_NODE_NAME },
                { "fleet-interval", required_argument, NULL, OPT_FLEET_INTERVAL },
                { "help", no_argument, NULL, OPT_HELP },
                { "version", no_argument, NULL, OPT_VERSION },
                { 0 },
        };
        const char *env_shm = getenv(NPF_ENV_SHM), *env_socket = getenv(NPF_ENV_SOCKET);
        const char *env_kineto_dir = getenv("KINETO_IPC_SOCKET_DIR");
        npf_daemon_options_t o = {
                .shm_name = env_shm && *env_shm ? env_shm : NPF_SHM_NAME_DEFAULT,
                .socket_path = env_socket && *env_socket ? env_socket : NPF_PROTO_SOCKET_DEFAULT,
                .rank_group = (gid_t) -1,
                .output_root = NPF_OUTPUT_ROOT_DEFAULT,
                .poll_ms = NPF_POLL_MS_DEFAULT,
                .metrics_interval_ms = NPF_METRICS_INTERVAL_S_DEFAULT * 1000u,
                .fleet_interval_ms = NPF_FLEET_INTERVAL_S_DEFAULT * 1000u,
                .inotify = true,
                .kineto = true,
                .kineto_socket_dir = env_kineto_dir && *env_kineto_dir ? env_kineto_dir : NULL,
                .log_target = NPF_LOG_AUTO,
                .stall_ms = NPF_STALL_MS_DEFAULT,
                .progress = {
                        .stall_after_ms = NPF_PROGRESS_STALL_AFTER_S_DEFAULT * 1000u,
                        .stall_factor = NPF_PROGRESS_STALL_FACTOR_DEFAULT,
                        .slowdown_pct = NPF_PROGRESS_SLOWDOWN_PCT_DEFAULT,
                        .slowdown_steps = NPF_PROGRESS_SLOWDOWN_STEPS_DEFAULT,
                },
                .clients_max = NPF_PROTO_CLIENTS_MAX,
                .idle_ms = NPF_PROTO_IDLE_MS,
                .analyze = {
                        .analyzer = NPF_ANALYZER_PATH,
                        .jobs = NPF_ANALYZE_JOBS_DEFAULT,
                        .timeout_s = NPF_ANALYZE_TIMEOUT_S_DEFAULT,
                        .memory_bytes = NPF_ANALYZE_MEMORY_DEFAULT,
                        .nice = NPF_ANALYZE_NICE_DEFAULT,
                },
                .fwshm = {
                        .group = (gid_t) -1,
                        .refresh_s = NPF_FWSHM_REFRESH_S_DEFAULT,
                        .shm_dir = "/dev/shm",
                        .opener = NPF_SHMOPEN_SOCKET,
                },
        };
        char err[NPF_SHM_ERR_MAX], sibling[PATH_MAX], host[HOST_NAME_MAX + 1];

        /* The analyzer beside this daemon (a build tree, the same bin directory) before the installed one. */
        if (npf_proc_sibling("npuprof-replay", sibling, sizeof(sibling)) == 0)
                o.analyze.analyzer = sibling;
        static char root[NPF_SHM_PATH_MAX];
        uint64_t ms;
        long long n;
        int c;

        argv[0] = (char *) "npuprofd";         /* getopt's messages name it so */
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case OPT_CONFIG: o.config_path = optarg; break;
                case OPT_SHM: o.shm_name = optarg; break;
                case OPT_SOCKET: o.socket_path = optarg; break;
                case OPT_GROUP: o.socket_group = optarg; break;
                case OPT_RANK_GROUP: {
                        struct group *g = getgrnam(optarg);
                        if (!g) {
                                fprintf(stderr, "npuprofd: --rank-group: no group '%s'\n", optarg);
                                return 2;
                        }
                        o.rank_group = g->gr_gid;
                        break;
                }
                case OPT_NO_INOTIFY: o.inotify = false; break;
                case OPT_ROOT: o.output_root = optarg; break;
                case OPT_POLL:
                        if (parse_ms("--poll-interval", optarg, NPF_POLL_MS_MIN, &ms) < 0)
                                return 2;
                        o.poll_ms = (unsigned) ms;
                        break;
                case OPT_STALL:
                        if (parse_ms("--stall-timeout", optarg, 1, &ms) < 0)
                                return 2;
                        o.stall_ms = ms;
                        break;
                case OPT_STALL_AFTER:
                        if (parse_seconds("--stall-after", optarg, &o.progress.stall_after_ms) < 0)
                                return 2;
                        break;
                case OPT_STALL_FACTOR:
                        if (parse_int("--stall-factor", optarg, 1, 10000, &n) < 0)
                                return 2;
                        o.progress.stall_factor = (unsigned) n;
                        break;
                case OPT_SLOWDOWN_PCT:
                        if (parse_int("--slowdown-pct", optarg, 1, 10000, &n) < 0)
                                return 2;
                        o.progress.slowdown_pct = (unsigned) n;
                        break;
                case OPT_SLOWDOWN_STEPS:
                        if (parse_int("--slowdown-steps", optarg, NPF_PROGRESS_SLOWDOWN_STEPS_MIN, 10000000, &n) < 0)
                                return 2;
                        o.progress.slowdown_steps = (unsigned) n;
                        break;
                case OPT_MAX_CLIENTS:
                        if (parse_int("--max-clients", optarg, 1, 1 << 20, &n) < 0)
                                return 2;
                        o.clients_max = (unsigned) n;
                        break;
                case OPT_IDLE:
                        if (parse_ms("--idle-timeout", optarg, 1, &ms) < 0)
                                return 2;
                        o.idle_ms = ms;
                        break;
                case OPT_LOG:
                        if (strcmp(optarg, "stderr") == 0)
                                o.log_target = NPF_LOG_STDERR;
                        else if (strcmp(optarg, "journal") == 0)
                                o.log_target = NPF_LOG_JOURNAL;
                        else {
                                fprintf(stderr, "npuprofd: --log takes stderr or journal, not '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case OPT_ANALYZER:
                        if (optarg[0] != '/') {
                                fprintf(stderr, "npuprofd: --analyzer takes an absolute path, not '%s'\n", optarg);
                                return 2;
                        }
                        o.analyze.analyzer = optarg;
                        break;
                case OPT_JOBS:
                        if (parse_int("--analyze-jobs", optarg, 0, NPF_ANALYZE_JOBS_MAX, &n) < 0)
                                return 2;
                        o.analyze.jobs = (unsigned) n;
                        break;
                case OPT_TIMEOUT:
                        if (parse_int("--analyze-timeout", optarg, 1, NPF_ANALYZE_TIMEOUT_S_MAX, &n) < 0)
                                return 2;
                        o.analyze.timeout_s = (uint64_t) n;
                        break;
                case OPT_MEMORY:
                        if (parse_memory(optarg, &o.analyze.memory_bytes) < 0)
                                return 2;
                        break;
                case OPT_NICE:
                        if (parse_int("--analyze-nice", optarg, 0, 19, &n) < 0)
                                return 2;
                        o.analyze.nice = (int) n;
                        break;
                case OPT_LEGACY:
                        if (npf_fwshm_parse_kinds(optarg, &o.fwshm.kinds, err, sizeof(err)) < 0) {
                                fprintf(stderr, "npuprofd: --legacy: %s\n", err);
                                return 2;
                        }
                        break;
                case OPT_LEGACY_GROUP: {
                        struct group *g = getgrnam(optarg);
                        if (!g) {
                                fprintf(stderr, "npuprofd: --legacy-group: no group '%s'\n", optarg);
                                return 2;
                        }
                        o.fwshm.group = g->gr_gid;
                        break;
                }
                case OPT_LEGACY_REFRESH:
                        if (parse_int("--legacy-refresh", optarg, 1, 50, &n) < 0)
                                return 2;
                        o.fwshm.refresh_s = (unsigned) n;
                        break;
                case OPT_LEGACY_CLOCK:
                        if (parse_int("--legacy-clock-offset", optarg, -(1LL << 32), 1LL << 32, &n) < 0)
                                return 2;
                        o.fwshm.clock_offset_s = n;
                        break;
                case OPT_OPENER:
                        o.fwshm.opener = *optarg ? optarg : NULL;
                        break;
                case OPT_KINETO_DIR:
                        if (optarg[0] && optarg[0] != '/') {
                                fprintf(stderr, "npuprofd: --kineto-socket-dir takes an absolute path or \"\", not '%s'\n",
                                        optarg);
                                return 2;
                        }
                        o.kineto_socket_dir = optarg[0] ? optarg : NULL;
                        break;
                case OPT_NO_KINETO: o.kineto = false; break;
                case OPT_METRICS_FILE: {
                        const char *base = strrchr(optarg, '/');
                        if (optarg[0] != '/' || !base[1] || strcmp(base, "/.") == 0 || strcmp(base, "/..") == 0) {
                                fprintf(stderr, "npuprofd: --metrics-file takes the absolute path of a file, not "
                                        "'%s'\n", optarg);
                                return 2;
                        }
                        o.metrics_path = optarg;
                        break;
                }
                case OPT_METRICS_INTERVAL:
                        if (parse_interval("--metrics-interval", optarg, &o.metrics_interval_ms) < 0)
                                return 2;
                        break;
                case OPT_FLEET_DIR:
                        if (optarg[0] != '/') {
                                fprintf(stderr, "npuprofd: --fleet-dir takes an absolute directory, not '%s'\n",
                                        optarg);
                                return 2;
                        }
                        o.fleet_dir = optarg;
                        break;
                case OPT_NODE_NAME:
                        if (!npf_fleet_node_name_ok(optarg)) {
                                fprintf(stderr, "npuprofd: --node-name takes 1 to %u of A-Z a-z 0-9 . _ -, not "
                                        "starting with '.', not '%s'\n", NPF_FLEET_NODE_MAX - 1, optarg);
                                return 2;
                        }
                        o.node_name = optarg;
                        break;
                case OPT_FLEET_INTERVAL:
                        if (parse_interval("--fleet-interval", optarg, &o.fleet_interval_ms) < 0)
                                return 2;
                        break;
                case OPT_HELP:
                        usage(stdout);
                        return 0;
                case OPT_VERSION:
                        printf("npuprofd %s (shm ABI %u, protocol %d)\n", NPUPROF_VERSION, NPF_SHM_ABI_VERSION,
                               NPF_PROTO_VERSION);
                        return 0;
                default:
                        fputs("see npuprofd --help\n", stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "npuprofd: unexpected argument '%s'; options take the form --name VALUE (see npuprofd "
                        "--help)\n", argv[optind]);
                return 2;
        }
        if (!o.config_path) {
                fprintf(stderr, "npuprofd: --config PATH is required: the profiler_config.json to watch, as in "
                        "npuprofd --config /etc/npuprof/profiler_config.json (see npuprofd --help)\n");
                return 2;
        }
        if (strlen(o.socket_path) >= sizeof(((struct sockaddr_un *) 0)->sun_path)) {
                fprintf(stderr, "npuprofd: --socket %s is %zu bytes long; a Unix socket path takes at most %zu\n",
                        o.socket_path, strlen(o.socket_path), sizeof(((struct sockaddr_un *) 0)->sun_path) - 1);
                return 2;
        }
        if (npf_shm_name_check(o.shm_name, err) < 0) {
                fprintf(stderr, "npuprofd: %s\n", err);
                return 2;
        }
        switch (npf_outroot_normalize(o.output_root, root, sizeof(root))) {
        case 0:
                o.output_root = root;
                break;
        case -ENAMETOOLONG:
                fprintf(stderr, "npuprofd: --output-root %.64s... is too long; at most %u bytes\n", o.output_root,
                        NPF_SHM_PATH_MAX - 1);
                return 2;
        default:
                fprintf(stderr, "npuprofd: --output-root takes an absolute path without \"..\", not '%s'\n",
                        o.output_root);
                return 2;
        }
        if (o.inotify && check_config_dir(o.config_path) < 0)
                return 1;
        check_output_root(o.output_root);
        if (o.fleet_dir && !o.node_name) {
                if (gethostname(host, sizeof(host)) < 0 || (host[sizeof(host) - 1] = '\0', !npf_fleet_node_name_ok(host))) {
                        fprintf(stderr, "npuprofd: the host name '%s' cannot name a fleet record; give --node-name\n",
                                host);
                        return 2;
                }
                o.node_name = host;
        }
        /* A client that hangs up before its reply must cost a write error, not the daemon. */
        signal(SIGPIPE, SIG_IGN);
        /*
         * What a status of a thousand ranks allocates goes back to the system when it is freed:
         * left to itself, glibc raises its mmap threshold to the largest block freed (and its
         * trim threshold to twice that), and keeps every later block of that size in the heap.
         */
        mallopt(M_MMAP_THRESHOLD, 64 * 1024);
        mallopt(M_TRIM_THRESHOLD, 64 * 1024);
        /* Reading the file needs one thread at a time; libuv's default of four is memory for nothing. */
        setenv("UV_THREADPOOL_SIZE", "2", 0);
        o.clients_max = fit_clients(o.clients_max);
        return npf_daemon_run(&o);
}
