/* SPDX-License-Identifier: MIT */
/*
 * The reader's fast path, measured: the per-step "changed since G?" check and the read of a
 * changed configuration, each as the median of interleaved runs next to a baseline measured
 * in the same run (an empty loop; a plain copy of the same bytes).
 */
#include "npuprof/shm.h"
#include "bench/stats.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RUNS 21
#define CHECK_ITERS 20000000u
#define READ_ITERS 2000000u

/* The loop every check runs in, without the check. */
static double empty_loop(void)
{
        uint64_t acc = 0, t0 = npf_bench_now_ns();

        for (uint32_t i = 0; i < CHECK_ITERS; i++) {
                acc += i;
                __asm__ volatile("" : "+r"(acc));
        }
        return (double) (npf_bench_now_ns() - t0) / CHECK_ITERS;
}

static double unchanged_check(const npf_shm_ctl_t *ctl, uint64_t generation)
{
        uint64_t acc = 0, t0 = npf_bench_now_ns();

        for (uint32_t i = 0; i < CHECK_ITERS; i++) {
                acc += i + npf_shm_changed(ctl, generation);
                __asm__ volatile("" : "+r"(acc));
        }
        if (acc == 0)
                abort();
        return (double) (npf_bench_now_ns() - t0) / CHECK_ITERS;
}

static double window_read(const npf_shm_ctl_t *ctl, npf_shm_window_t *w)
{
        uint64_t t0 = npf_bench_now_ns();

        for (uint32_t i = 0; i < READ_ITERS; i++) {
                if (npf_shm_read_window(ctl, 5, w) < 0)
                        abort();
                __asm__ volatile("" : : "r"(w) : "memory");
        }
        return (double) (npf_bench_now_ns() - t0) / READ_ITERS;
}

/* The same bytes the window read takes, copied with memcpy and no seqlock. */
static double plain_copy(const npf_shm_ctl_t *ctl, npf_shm_window_t *w)
{
        uint64_t t0 = npf_bench_now_ns();
        size_t len = ctl->config.args.prof_dir_len + 1;

        for (uint32_t i = 0; i < READ_ITERS; i++) {
                memcpy(&w->args, &ctl->config.args, sizeof(w->args));
                memcpy(w->prof_dir, ctl->config.prof_dir, len);
                __asm__ volatile("" : : "r"(w) : "memory");
        }
        return (double) (npf_bench_now_ns() - t0) / READ_ITERS;
}

static double full_read(const npf_shm_ctl_t *ctl, npf_shm_config_t *c)
{
        const uint32_t iters = READ_ITERS / 100;
        uint64_t t0 = npf_bench_now_ns();

        for (uint32_t i = 0; i < iters; i++) {
                if (npf_shm_read_config(ctl, c) < 0)
                        abort();
                __asm__ volatile("" : : "r"(c) : "memory");
        }
        return (double) (npf_bench_now_ns() - t0) / iters;
}

static void publish(npf_shm_t *shm, const char *prof_dir)
{
        npf_shm_config_t *c = calloc(1, sizeof(*c));

        c->args.enabled = 1;
        c->args.start_step = 1000;
        c->args.stop_step = 1004;
        c->args.step_count = 5;
        c->args.rank_filter = NPF_RANKS_LIST;
        c->rank_bitmap[0] = 0xff;
        c->args.prof_dir_len = (uint32_t) strlen(prof_dir);
        memcpy(c->prof_dir, prof_dir, c->args.prof_dir_len + 1);
        if (npf_shm_publish_config(shm, c, NULL) < 0)
                abort();
        free(c);
}

typedef struct writer_arg {
        npf_shm_t *shm;
        _Atomic bool stop;
        uint64_t published;
} writer_arg_t;

/* Another core publishing as fast as it can: every read below finds its cache lines moved. */
static void *writer_thread(void *p)
{
        writer_arg_t *a = p;
        npf_shm_config_t *c = calloc(1, sizeof(*c));

        c->args.enabled = 1;
        c->args.rank_filter = NPF_RANKS_ALL;
        c->args.prof_dir_len = (uint32_t) snprintf(c->prof_dir, sizeof(c->prof_dir), "/shared/prof/job-20261121");
        while (!atomic_load_explicit(&a->stop, memory_order_relaxed)) {
                c->args.start_step = (int64_t) a->published;
                npf_shm_publish_config(a->shm, c, NULL);
                a->published++;
                usleep(50);
        }
        free(c);
        return NULL;
}

/* Wait until a generation after @seen is completely published. */
static void wait_published(const npf_shm_ctl_t *ctl, uint64_t seen)
{
        for (;;) {
                uint64_t s = atomic_load_explicit((_Atomic uint64_t *) &ctl->config_seq, memory_order_acquire);
                if (!(s & 1) && s != seen * 2)
                        return;
        }
}

/*
 * The read a rank really does: the configuration was just written by another core, so its
 * lines come from that core's cache, and a read may meet a publication in progress.
 */
static void cross_core_reads(npf_shm_t *writer, const npf_shm_ctl_t *ctl, double *ret_p50, double *ret_p99,
                             double *ret_copy_p50)
{
        enum { N = 20000 };
        static double lat[N], copy[N];
        npf_shm_window_t *w = malloc(sizeof(*w));
        writer_arg_t arg = { .shm = writer };
        pthread_t t;
        uint64_t seen = 0;

        pthread_create(&t, NULL, writer_thread, &arg);
        for (int i = 0; i < N; i++) {
                wait_published(ctl, seen);
                uint64_t t0 = npf_bench_now_ns();
                int r = npf_shm_read_window(ctl, 5, w);
                uint64_t t1 = npf_bench_now_ns();
                if (r < 0) {            /* the writer was preempted mid-write: not a read to time */
                        i--;
                        continue;
                }
                lat[i] = (double) (t1 - t0);
                seen = w->args.generation;
                /* The baseline: the same bytes, copied plainly right after a change, no seqlock. */
                wait_published(ctl, seen);
                uint64_t t2 = npf_bench_now_ns();
                memcpy(&w->args, &ctl->config.args, sizeof(w->args));
                memcpy(w->prof_dir, ctl->config.prof_dir, 32);
                copy[i] = (double) (npf_bench_now_ns() - t2);
                seen = atomic_load(&((npf_shm_ctl_t *) ctl)->config_seq) / 2;
        }
        atomic_store(&arg.stop, true);
        pthread_join(t, NULL);
        *ret_p50 = npf_bench_median(lat, N);
        *ret_p99 = npf_bench_percentile(lat, N, 0.99);
        *ret_copy_p50 = npf_bench_median(copy, N);
        free(w);
}

int main(void)
{
        char name[64], err[NPF_SHM_ERR_MAX], longdir[NPF_SHM_PATH_MAX];
        double empty[RUNS], check[RUNS], read_short[RUNS], copy_short[RUNS], read_long[RUNS], copy_long[RUNS];
        double full[RUNS];
        npf_shm_t *writer, *reader;
        npf_shm_window_t *w = malloc(sizeof(*w));
        npf_shm_config_t *c = malloc(sizeof(*c));

        snprintf(name, sizeof(name), "npfbench-%d", (int) getpid());
        npf_shm_unlink(name);
        if (npf_shm_open(name, NPF_SHM_WRITER | NPF_SHM_CREATE, &writer, err) < 0 ||
            npf_shm_open(name, 0, &reader, err) < 0) {
                fprintf(stderr, "bench: %s\n", err);
                return 1;
        }
        const npf_shm_ctl_t *ctl = npf_shm_ctl(reader);    /* read-only, as a rank maps it */
        memset(longdir, 'd', sizeof(longdir) - 1);
        longdir[0] = '/';
        longdir[sizeof(longdir) - 1] = '\0';

        for (int r = 0; r < RUNS; r++) {
                publish(writer, "/shared/prof/job-20261121-llama-70b");
                empty[r] = empty_loop();
                check[r] = unchanged_check(ctl, ctl->config.args.generation);
                read_short[r] = window_read(ctl, w);
                copy_short[r] = plain_copy(ctl, w);
                full[r] = full_read(ctl, c);
                publish(writer, longdir);
                read_long[r] = window_read(ctl, w);
                copy_long[r] = plain_copy(ctl, w);
        }

        double e = npf_bench_median(empty, RUNS), k = npf_bench_median(check, RUNS);
        printf("npuprof bench: medians of %d interleaved runs on this machine\n\n", RUNS);
        printf("  unchanged check (npf_shm_changed)    %6.2f ns/call   empty loop %5.2f ns/iter   "
               "net %5.2f ns   goal <= 2 ns\n", k, e, k - e);
        printf("  changed read, 36-byte prof_dir        %6.1f ns/call   plain memcpy %5.1f ns         "
               "ratio %4.1fx   goal <= 200 ns\n", npf_bench_median(read_short, RUNS), npf_bench_median(copy_short, RUNS),
               npf_bench_median(read_short, RUNS) / npf_bench_median(copy_short, RUNS));
        printf("  changed read, 4095-byte prof_dir      %6.1f ns/call   plain memcpy %5.1f ns         "
               "ratio %4.1fx   (worst case)\n", npf_bench_median(read_long, RUNS), npf_bench_median(copy_long, RUNS),
               npf_bench_median(read_long, RUNS) / npf_bench_median(copy_long, RUNS));
        printf("  full configuration read (16.5 KiB)    %6.0f ns/call   (daemon and npuprofctl only)\n",
               npf_bench_median(full, RUNS));

        double p50, p99, copy50;
        cross_core_reads(writer, ctl, &p50, &p99, &copy50);
        printf("  changed read, just written by another core  p50 %5.0f ns  p99 %5.0f ns   plain memcpy p50 %4.0f ns"
               "   goal <= 200 ns\n", p50, p99, copy50);
        printf("  (each figure of this last line includes one clock_gettime, about 20 ns)\n");

        npf_shm_close(reader);
        npf_shm_close(writer);
        npf_shm_unlink(name);
        free(w);
        free(c);
        return 0;
}
