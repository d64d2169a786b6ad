/* SPDX-License-Identifier: MIT */
/*
 * libnpuprof's cost inside a training loop: npf_rank_step() when nothing changed (inline and
 * called), when a new configuration concerns another rank, and the step that opens a
 * host-backend window. Medians of interleaved runs next to an empty loop of the same run.
 */
#include "npuprof/rank.h"
#include "bench/stats.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RUNS 21
#define ITERS 20000000u
#define CHANGES 2000

static double empty_loop(void)
{
        uint64_t t0 = npf_bench_now_ns();

        for (int64_t step = 1; step <= ITERS; step++)
                __asm__ volatile("" : : "r"(step) : "memory");
        return (double) (npf_bench_now_ns() - t0) / ITERS;
}

static double steps_inline(npf_rank_t *h, int64_t base)
{
        uint64_t t0 = npf_bench_now_ns();

        for (int64_t step = base; step < base + ITERS; step++) {
                npf_rank_step(h, step);
                __asm__ volatile("" : : "r"(step) : "memory");
        }
        return (double) (npf_bench_now_ns() - t0) / ITERS;
}

static double steps_called(npf_rank_t *h, int64_t base)
{
        uint64_t t0 = npf_bench_now_ns();

        for (int64_t step = base; step < base + ITERS; step++) {
                npf_rank_step_call(h, step);
                __asm__ volatile("" : : "r"(step) : "memory");
        }
        return (double) (npf_bench_now_ns() - t0) / ITERS;
}

static void publish(npf_shm_t *w, int64_t start, uint32_t only_rank, const char *dir)
{
        npf_shm_config_t *c = calloc(1, sizeof(*c));

        c->args.enabled = 1;
        c->args.start_step = start;
        c->args.stop_step = start;
        c->args.step_count = 1;
        c->args.backend = NPF_BACKEND_HOST;
        c->args.activities = NPF_ACT_CPU;
        c->args.rank_filter = NPF_RANKS_LIST;
        c->rank_bitmap[only_rank / 8] |= (uint8_t) (1u << (only_rank % 8));
        c->args.rank_count = 1;
        c->args.prof_dir_len = (uint32_t) snprintf(c->prof_dir, sizeof(c->prof_dir), "%s", dir);
        if (npf_shm_publish_config(w, c, NULL) < 0)
                abort();
        free(c);
}

int main(void)
{
        char name[64], err[NPF_SHM_ERR_MAX], dir[] = "/tmp/npfbench-rank-XXXXXX";
        double empty[RUNS], inl[RUNS], called[RUNS];
        static double other[CHANGES], opening[CHANGES / 10];
        npf_shm_t *w;
        npf_rank_t *h;

        if (!mkdtemp(dir))
                return 1;
        snprintf(name, sizeof(name), "npfbench-r-%d", (int) getpid());
        npf_shm_unlink(name);
        if (npf_shm_open(name, NPF_SHM_WRITER | NPF_SHM_CREATE, &w, err) < 0) {
                fprintf(stderr, "bench: %s\n", err);
                return 1;
        }
        npf_rank_options_t o = { .shm_name = name, .rank = 5, .local_device = -1, .backend = "host" };
        if (npf_rank_open(&o, &h, err) < 0) {
                fprintf(stderr, "bench: %s\n", err);
                return 1;
        }
        publish(w, 1, 7, dir);  /* a window for rank 7 only: this rank is filtered, then idle */
        npf_rank_step(h, 1);

        for (int r = 0; r < RUNS; r++) {
                empty[r] = empty_loop();
                inl[r] = steps_inline(h, 2 + (int64_t) r * 2 * ITERS);
                called[r] = steps_called(h, 2 + (int64_t) r * 2 * ITERS + ITERS);
        }

        /* A configuration concerning another rank: the read, the filter, the slot update. */
        int64_t step = (int64_t) RUNS * 2 * ITERS + 10;
        for (int i = 0; i < CHANGES; i++, step++) {
                publish(w, step + 5, 7, dir);
                uint64_t t0 = npf_bench_now_ns();
                npf_rank_step(h, step);
                other[i] = (double) (npf_bench_now_ns() - t0);
        }
        /* The step that opens a host window: directory, trace file, first sample. */
        for (int i = 0; i < CHANGES / 10; i++) {
                publish(w, step + 1, 5, dir);
                npf_rank_step(h, step++);               /* reads it: armed */
                uint64_t t0 = npf_bench_now_ns();
                npf_rank_step(h, step++);               /* the start step: collecting */
                opening[i] = (double) (npf_bench_now_ns() - t0);
                npf_rank_step(h, step++);               /* closes it */
        }

        double e = npf_bench_median(empty, RUNS), k = npf_bench_median(inl, RUNS), c = npf_bench_median(called, RUNS);
        printf("libnpuprof bench: medians of %d interleaved runs of %u steps, on this machine\n\n", RUNS, ITERS);
        printf("  npf_rank_step (inline), nothing changed %5.2f ns/step   empty loop %4.2f ns   net %5.2f ns"
               "   goal <= 2 ns\n", k, e, k - e);
        printf("  npf_rank_step_call, nothing changed     %5.2f ns/step   empty loop %4.2f ns   net %5.2f ns\n", c, e,
               c - e);
        printf("  a new configuration for another rank    %5.0f ns (median of %d)                  goal <= 1000 ns\n",
               npf_bench_median(other, CHANGES), CHANGES);
        printf("  the start step, host window opening     %5.0f ns (median of %d): mkdir, trace.json, first sample\n",
               npf_bench_median(opening, CHANGES / 10), CHANGES / 10);

        npf_rank_close(h);
        npf_shm_close(w);
        npf_shm_unlink(name);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : 1;
}
