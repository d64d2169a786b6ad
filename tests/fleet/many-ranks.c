/* SPDX-License-Identifier: MIT */
/*
 * Many live ranks on one node: PROCS processes of THREADS threads each, every thread owning
 * RANKS / (PROCS * THREADS) handles of libnpuprof, and stepping each of them once every
 * STEP_MS milliseconds (absolute deadlines: a late tick catches up, steps are never skipped)
 * from step 1 to STEPS. Each rank then prints one line of what libnpuprof says it did:
 *
 *   rank R state S window START STOP output DIR
 *
 * and the driver exits 0 when every process did (1 if a handle could not be opened).
 *
 * Usage: many-ranks --shm NAME [--ranks 256] [--procs 4] [--threads 4] [--steps 10000]
 *                   [--step-ms 1] [--backend host]
 */
#include "npuprof/rank.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct worker {
        pthread_t thread;
        npf_rank_t **h;
        int n;
        int64_t steps;
        long step_ns;
} worker_t;

static void *work(void *arg)
{
        worker_t *w = arg;
        struct timespec next;

        clock_gettime(CLOCK_MONOTONIC, &next);
        for (int64_t s = 1; s <= w->steps; s++) {
                for (int i = 0; i < w->n; i++)
                        npf_rank_step(w->h[i], s);
                next.tv_nsec += w->step_ns;
                while (next.tv_nsec >= 1000000000L) {
                        next.tv_nsec -= 1000000000L;
                        next.tv_sec++;
                }
                while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
                        ;
        }
        return NULL;
}

/* One process: ranks @first .. @first + @n - 1 over @threads threads. Return: the exit status. */
static int run_process(const char *shm, const char *backend, int first, int n, int threads, int64_t steps,
                       long step_ns)
{
        npf_rank_t **h = calloc((size_t) n, sizeof(*h));
        worker_t *w = calloc((size_t) threads, sizeof(*w));
        char err[NPF_SHM_ERR_MAX];

        if (!h || !w)
                return 1;
        /* A line is one write: the processes share the output file. */
        setvbuf(stdout, NULL, _IOLBF, 0);
        for (int i = 0; i < n; i++) {
                npf_rank_options_t o = { .shm_name = shm, .rank = first + i, .local_device = -1, .backend = backend };
                int r = npf_rank_open(&o, &h[i], err);
                if (r < 0) {
                        fprintf(stderr, "many-ranks: rank %d: %s\n", first + i, err);
                        return 1;
                }
        }
        for (int t = 0, at = 0; t < threads; t++) {
                int k = n / threads + (t < n % threads);
                w[t] = (worker_t) { .h = h + at, .n = k, .steps = steps, .step_ns = step_ns };
                at += k;
                pthread_create(&w[t].thread, NULL, work, &w[t]);
        }
        for (int t = 0; t < threads; t++)
                pthread_join(w[t].thread, NULL);
        for (int i = 0; i < n; i++) {
                npf_rank_info_t info;
                npf_rank_info(h[i], &info);
                printf("rank %" PRId64 " state %u window %" PRId64 " %" PRId64 " output %s\n", info.rank, info.state,
                       info.window_start, info.window_stop, info.output[0] ? info.output : "-");
                npf_rank_close(h[i]);
        }
        fflush(stdout);
        free(h);
        free(w);
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "shm", required_argument, NULL, 's' },   { "ranks", required_argument, NULL, 'r' },
                { "procs", required_argument, NULL, 'p' }, { "threads", required_argument, NULL, 't' },
                { "steps", required_argument, NULL, 'n' }, { "step-ms", required_argument, NULL, 'm' },
                { "backend", required_argument, NULL, 'b' }, { 0 },
        };
        const char *shm = NULL, *backend = "host";
        int ranks = 256, procs = 4, threads = 4, c, rc = 0;
        int64_t steps = 10000;
        long step_ms = 1;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's': shm = optarg; break;
                case 'r': ranks = atoi(optarg); break;
                case 'p': procs = atoi(optarg); break;
                case 't': threads = atoi(optarg); break;
                case 'n': steps = atoll(optarg); break;
                case 'm': step_ms = atol(optarg); break;
                case 'b': backend = optarg; break;
                default: return 2;
                }
        }
        if (!shm || ranks < 1 || procs < 1 || procs > ranks || threads < 1 || steps < 1 || step_ms < 0) {
                fprintf(stderr, "usage: many-ranks --shm NAME [--ranks N] [--procs P] [--threads T] [--steps S] "
                        "[--step-ms MS] [--backend NAME]\n");
                return 2;
        }
        fflush(stdout);
        pid_t *pids = calloc((size_t) procs, sizeof(*pids));
        for (int p = 0, first = 0; p < procs; p++) {
                int n = ranks / procs + (p < ranks % procs);
                pids[p] = fork();
                if (pids[p] == 0)
                        _exit(run_process(shm, backend, first, n, threads < n ? threads : n, steps, step_ms * 1000000L));
                first += n;
        }
        for (int p = 0; p < procs; p++) {
                int status;
                if (pids[p] < 0 || waitpid(pids[p], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
                        rc = 1;
        }
        free(pids);
        return rc;
}
