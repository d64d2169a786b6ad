/* SPDX-License-Identifier: MIT */
/*
 * rank-driver: plays one training rank against a node's segment through the real slot API,
 * as libnpuprof will, so that the daemon's tests see real slots written by real processes.
 *
 *   rank-driver --shm NAME --rank R [--step N] [--state STATE] [--window S-E]
 *               [--generation G] [--device D] [--message TEXT] [--beat MS] [--hold]
 *
 * It maps the segment as a rank does (control block read-only, rank table read-write),
 * claims rank R, records step N with a heartbeat, publishes the window state, then prints
 * "claimed slot X" on stdout. Without --hold it releases the slot and exits 0. With --hold
 * it keeps the slot until SIGTERM or SIGINT (then releases it and exits 0), until stdin
 * closes when stdin is a pipe or socket, or until it is killed; with --beat MS it advances
 * its step and heartbeat every MS milliseconds meanwhile. A failed claim prints the error
 * and exits 1; a usage error exits 2.
 *
 * --window defaults to the window in force when the state has one; --generation defaults
 * to the generation in force.
 */
#include "npuprof/shm.h"
#include "shm/slot.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
        stop_signal = sig;
}

static uint64_t monotonic_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static uint64_t realtime_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void usage(FILE *f)
{
        fputs("Usage: rank-driver --shm NAME --rank R [--step N] [--state STATE] [--window S-E]\n"
              "                   [--generation G] [--device D] [--message TEXT] [--beat MS] [--hold]\n"
              "STATE: idle armed collecting flushing done missed failed filtered lost\n",
              f);
}

/* Parse a signed integer in [min, max]. Return: 0, or -EINVAL. */
static int parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
        char *end;

        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || *end || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_state(const char *s, uint32_t *ret)
{
        for (uint32_t i = 0; i < NPF_WINDOW__COUNT; i++)
                if (strcmp(s, npf_shm_window_state_name(i)) == 0) {
                        *ret = i;
                        return 0;
                }
        return -EINVAL;
}

/* Return: true if @fd is a pipe or socket, whose closing ends --hold. */
static bool closable(int fd)
{
        struct stat st;

        return fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

int main(int argc, char **argv)
{
        enum { OPT_SHM = 256, OPT_RANK, OPT_STEP, OPT_STATE, OPT_WINDOW, OPT_GEN, OPT_DEVICE, OPT_MESSAGE,
               OPT_BEAT, OPT_HOLD, OPT_HELP };
        static const struct option opts[] = {
                { "shm", required_argument, NULL, OPT_SHM },
                { "rank", required_argument, NULL, OPT_RANK },
                { "step", required_argument, NULL, OPT_STEP },
                { "state", required_argument, NULL, OPT_STATE },
                { "window", required_argument, NULL, OPT_WINDOW },
                { "generation", required_argument, NULL, OPT_GEN },
                { "device", required_argument, NULL, OPT_DEVICE },
                { "message", required_argument, NULL, OPT_MESSAGE },
                { "beat", required_argument, NULL, OPT_BEAT },
                { "hold", no_argument, NULL, OPT_HOLD },
                { "help", no_argument, NULL, OPT_HELP },
                { 0 },
        };
        const char *shm_name = NULL, *message = "";
        int64_t rank = -1, step = NPF_STEP_NONE, gen = -1, device = -1, beat_ms = 0, win_start = 0, win_stop = 0;
        uint32_t state = NPF_WINDOW_IDLE;
        bool have_window = false, hold = false;
        char err[NPF_SHM_ERR_MAX] = "";
        npf_shm_t *shm = NULL;
        npf_slot_lease_t lease = { .slot = NULL, .lock_fd = -1 };
        int c, r;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                char *dash;
                switch (c) {
                case OPT_SHM: shm_name = optarg; break;
                case OPT_MESSAGE: message = optarg; break;
                case OPT_HOLD: hold = true; break;
                case OPT_RANK:
                        if (parse_i64(optarg, 0, NPF_SHM_MAX_RANKS - 1, &rank) < 0)
                                goto bad;
                        break;
                case OPT_STEP:
                        if (parse_i64(optarg, -1, NPF_STEP_MAX, &step) < 0)
                                goto bad;
                        break;
                case OPT_GEN:
                        if (parse_i64(optarg, 0, INT64_MAX, &gen) < 0)
                                goto bad;
                        break;
                case OPT_DEVICE:
                        if (parse_i64(optarg, -1, INT32_MAX, &device) < 0)
                                goto bad;
                        break;
                case OPT_BEAT:
                        if (parse_i64(optarg, 1, 60000, &beat_ms) < 0)
                                goto bad;
                        break;
                case OPT_STATE:
                        if (parse_state(optarg, &state) < 0)
                                goto bad;
                        break;
                case OPT_WINDOW:
                        dash = strchr(optarg, '-');
                        if (!dash)
                                goto bad;
                        *dash = '\0';
                        r = parse_i64(optarg, 0, NPF_STEP_MAX, &win_start);
                        *dash = '-';
                        if (r < 0 || parse_i64(dash + 1, 0, NPF_STEP_MAX, &win_stop) < 0 || win_stop < win_start)
                                goto bad;
                        have_window = true;
                        break;
                case OPT_HELP:
                        usage(stdout);
                        return 0;
                default:
                        goto bad;
                }
        }
        if (!shm_name || rank < 0 || optind < argc)
                goto bad;

        r = npf_shm_open(shm_name, 0, &shm, err);
        if (r < 0) {
                fprintf(stderr, "rank-driver: cannot open segment %s: %s (%s)\n", shm_name, err, strerror(-r));
                return 1;
        }

        /* What the daemon has published: the defaults for --generation and --window. */
        npf_shm_window_t *w = malloc(sizeof(*w));
        if (!w) {
                fprintf(stderr, "rank-driver: out of memory\n");
                npf_shm_close(shm);
                return 1;
        }
        if (npf_shm_read_window(npf_shm_ctl(shm), (uint32_t) rank, w) >= 0) {
                if (gen < 0)
                        gen = (int64_t) w->args.generation;
                if (!have_window && w->args.enabled && w->args.start_step >= 0 && w->args.stop_step >= 0) {
                        win_start = w->args.start_step;
                        win_stop = w->args.stop_step;
                }
        }
        free(w);
        if (gen < 0)
                gen = 0;

        r = npf_slot_claim(shm, (uint32_t) rank, (int32_t) device, &lease, err);
        if (r < 0) {
                fprintf(stderr, "rank-driver: cannot claim rank %" PRId64 ": %s (%s)\n", rank, err, strerror(-r));
                npf_shm_close(shm);
                return 1;
        }

        npf_shm_slot_state_t st = {
                .generation = (uint64_t) gen,
                .state = state,
                .backend = NPF_BACKEND_HOST,
                .window_start = win_start,
                .window_stop = win_stop,
                .state_step = step,
                .state_ns = realtime_ns(),
        };
        snprintf(st.message, sizeof(st.message), "%s", message);
        npf_slot_step(lease.slot, step, monotonic_ns());
        npf_slot_set_state(npf_shm_ranks(shm), lease.slot, &st);

        printf("claimed slot %u\n", npf_slot_index(npf_shm_ranks(shm), lease.slot));
        fflush(stdout);

        if (hold) {
                struct sigaction sa = { .sa_handler = on_stop };
                sigemptyset(&sa.sa_mask);
                sigaction(SIGTERM, &sa, NULL);
                sigaction(SIGINT, &sa, NULL);
                bool watch_stdin = closable(STDIN_FILENO);
                uint64_t next_beat = monotonic_ns() + (uint64_t) beat_ms * 1000000u;

                while (!stop_signal) {
                        struct pollfd p = { .fd = watch_stdin ? STDIN_FILENO : -1, .events = POLLIN };
                        int timeout = -1;
                        if (beat_ms) {
                                uint64_t now = monotonic_ns();
                                timeout = now >= next_beat ? 0 : (int) ((next_beat - now) / 1000000u) + 1;
                        }
                        r = poll(&p, 1, timeout);
                        if (r < 0 && errno != EINTR)
                                break;
                        if (r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
                                char buf[256];
                                ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
                                if (n <= 0)
                                        break;  /* stdin closed: the test is done with us */
                        }
                        if (beat_ms && monotonic_ns() >= next_beat) {
                                if (step >= 0)
                                        step++;
                                npf_slot_step(lease.slot, step, monotonic_ns());
                                next_beat += (uint64_t) beat_ms * 1000000u;
                        }
                }
        }
        npf_slot_release(shm, &lease);
        npf_shm_close(shm);
        return 0;

bad:
        usage(stderr);
        return 2;
}
