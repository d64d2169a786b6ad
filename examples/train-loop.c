/* SPDX-License-Identifier: MIT */
/*
 * train-loop: a stand-in for a training process, linked with libnpuprof the way a real one
 * is. Each step does CPU work and touches memory for about --step-ms milliseconds; the
 * rank library opens and closes its collection window at the steps the node's daemon
 * publishes. --first-step resumes the loop at a later step, as a job restarted from a
 * checkpoint does: it runs the steps FIRST..FIRST+N-1 (1..N by default). At the end it prints
 * "rank R: N steps done (mean step T ms); window STATE in DIR": T is the loop's wall time over
 * its steps, STATE and DIR those of the rank's last window.
 *
 * For the daemon's watch of progress: --jitter PCT makes each step up to PCT percent
 * longer or shorter (uniformly, seeded by the rank); --slow-at N --slow-factor F makes the
 * steps from N take F times as long (a fail-slow); --hang-at N stops at step N, as a rank
 * stuck in a collective does, and sleeps in hang_forever() until it is killed: that is the
 * function its stacks name when the daemon asks for them.
 *
 *   train-loop --rank R --steps N --step-ms MS [--shm-name NAME] [--backend host|acl|auto] [--busy PCT]
 *              [--first-step FIRST] [--jitter PCT] [--slow-at N --slow-factor F] [--hang-at N]
 */
#include "npuprof/protocol.h"
#include "npuprof/rank.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Where the steps' arithmetic ends up, so that the compiler keeps the arithmetic. */
static volatile double work_sink;

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/*
 * About @ms milliseconds of a step: @busy percent of it (a quarter by default) arithmetic
 * over a buffer that grows and shrinks, the rest waiting, as a rank waits for its device;
 * eight of them share two cores, and many more with --busy 0.
 */
static double work(double ms, unsigned busy, int64_t step)
{
        uint64_t start = now_ns(), end = start + (uint64_t) (ms * busy * 10000.0);
        size_t n = (size_t) (1 << 16) * (size_t) (1 + step % 4);
        double *buf = malloc(n * sizeof(*buf)), acc = 0;

        if (!buf)
                return 0;
        while (now_ns() < end)
                for (size_t i = 0; i < n; i += 64) {
                        buf[i] = (double) i * 1.0001 + acc;
                        acc += buf[i] * 1e-9;
                }
        free(buf);
        uint64_t rest = start + (uint64_t) (ms * 1e6);
        uint64_t now = now_ns();
        if (now < rest)
                nanosleep(&(struct timespec) { .tv_sec = (time_t) ((rest - now) / 1000000000u),
                                               .tv_nsec = (long) ((rest - now) % 1000000000u) }, NULL);
        return acc;
}

/*
 * Stuck in step @step, as in a collective that never completes: until killed. A function of
 * its own, never inlined, so that the rank's stacks show where it hangs.
 */
static __attribute__((noinline, noreturn)) void hang_forever(int64_t rank, int64_t step)
{
        printf("rank %" PRId64 ": hangs at step %" PRId64 "\n", rank, step);
        fflush(stdout);
        for (;;)
                pause();
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "rank", required_argument, NULL, 'r' },   { "steps", required_argument, NULL, 'n' },
                { "step-ms", required_argument, NULL, 'm' }, { "shm-name", required_argument, NULL, 's' },
                { "backend", required_argument, NULL, 'b' }, { "busy", required_argument, NULL, 'u' },
                { "first-step", required_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' },
                { "jitter", required_argument, NULL, 'j' },  { "slow-at", required_argument, NULL, 'S' },
                { "slow-factor", required_argument, NULL, 'F' }, { "hang-at", required_argument, NULL, 'H' },
                { "version", no_argument, NULL, 'V' },
                { 0 },
        };
        npf_rank_options_t o = { .rank = -1, .local_device = -1 };
        long steps = 40, step_ms = 20, busy = 25, first = 1, jitter = 0;
        long long slow_at = 0, hang_at = 0;
        double slow_factor = 1;
        char err[NPF_SHM_ERR_MAX] = "";
        npf_rank_t *h;
        int c;

        argv[0] = (char *) "train-loop";       /* getopt's messages name it so */
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'r': o.rank = atoll(optarg); break;
                case 'n': steps = atol(optarg); break;
                case 'm': step_ms = atol(optarg); break;
                case 's': o.shm_name = optarg; break;
                case 'b': o.backend = optarg; break;
                case 'u': busy = atol(optarg); break;
                case 'f': first = atol(optarg); break;
                case 'j': jitter = atol(optarg); break;
                case 'S': slow_at = atoll(optarg); break;
                case 'F': slow_factor = atof(optarg); break;
                case 'H': hang_at = atoll(optarg); break;
                case 'h':
                        printf("Usage: train-loop --rank R --steps N --step-ms MS [OPTIONS]\n"
                               "\n"
                               "Example:\n"
                               "  train-loop --rank 0 --steps 2000 --step-ms 50\n"
                               "                   a rank of 2000 steps of 50 ms on the node's segment: it opens\n"
                               "                   the window that npuprofctl start --at 1000 --steps 5 asks for\n"
                               "\n"
                               "A stand-in for a training process, linked with libnpuprof as one is: each step\n"
                               "computes and waits for about MS milliseconds and calls npf_rank_step().\n"
                               "\n"
                               "Options:\n"
                               "  --rank R           this rank's number (default $RANK, else 0)\n"
                               "  --steps N          steps to run (default 40)\n"
                               "  --step-ms MS       milliseconds of each step (default 20)\n"
                               "  --shm-name NAME    the node's segment (default $NPUPROF_SHM, else npuprof)\n"
                               "  --backend B        host, acl or auto (default auto)\n"
                               "  --busy PERCENT     of each step computing, the rest waiting (default 25)\n"
                               "  --first-step FIRST the first step, as a job resumed from a checkpoint (default 1)\n"
                               "  --jitter PCT       each step up to PCT percent longer or shorter (default 0)\n"
                               "  --slow-at N --slow-factor F\n"
                               "                     the steps from N take F times as long\n"
                               "  --hang-at N        stop at step N and sleep until killed\n"
                               "  --help             this text\n"
                               "  --version          the version\n");
                        return 0;
                case 'V':
                        printf("train-loop %s\n", NPUPROF_VERSION);
                        return 0;
                default:
                        fputs("see train-loop --help\n", stderr);
                        return 2;
                }
        }
        if (steps < 1 || step_ms < 0 || busy < 0 || busy > 100 || first < 1 || first > INT32_MAX) {
                fprintf(stderr, "train-loop: --steps must be at least 1, --step-ms not negative, --busy from 0 to 100, "
                                "--first-step from 1 to %" PRId32 "\n", INT32_MAX);
                return 2;
        }
        if (jitter < 0 || jitter > 100 || slow_at < 0 || !(slow_factor > 0 && slow_factor <= 1000) || hang_at < 0) {
                fprintf(stderr, "train-loop: --jitter from 0 to 100, --slow-at and --hang-at not negative, "
                                "--slow-factor above 0 and at most 1000\n");
                return 2;
        }
        /* The jitter of rank R is the same at every run. */
        unsigned seed = (unsigned) (o.rank >= 0 ? o.rank : 0) * 2654435761u + 1;
        int r = npf_rank_open(&o, &h, err);
        if (r < 0) {
                fprintf(stderr, "train-loop: %s\n", err);
                return 1;
        }
        double acc = 0;
        uint64_t t0 = now_ns();
        for (int64_t step = first; step < first + steps; step++) {
                npf_rank_step(h, step);
                if (hang_at && step >= hang_at)
                        hang_forever((int64_t) o.rank, step);
                double ms = (double) step_ms;
                if (slow_at && step >= slow_at)
                        ms *= slow_factor;
                if (jitter)
                        ms *= 1.0 + (double) jitter / 100.0 * (2.0 * rand_r(&seed) / RAND_MAX - 1.0);
                acc += work(ms, (unsigned) busy, step);
        }
        work_sink = acc;
        npf_rank_info_t info;
        npf_rank_info(h, &info);
        printf("rank %" PRId64 ": %ld steps done (mean step %.1f ms); window %s%s%s\n", info.rank, steps,
               (double) (now_ns() - t0) / 1e6 / (double) steps, npf_shm_window_state_name(info.state),
               info.output[0] ? " in " : "", info.output);
        npf_rank_close(h);
        return 0;
}
