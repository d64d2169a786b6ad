/* SPDX-License-Identifier: MIT */
/*
 * Seqlock torture: one writer publishes configurations as fast as it can while reader
 * threads and a reader process (attached as a rank would be, control block read-only)
 * verify every configuration they read. Each configuration is a function of a seed and
 * carries its own checksum, so a torn read cannot pass. Exit 0 only with zero torn reads.
 *
 * Usage: torture-seqlock [SECONDS]
 */
#include "npuprof/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READER_THREADS 3
#define PROBE_RANK 4242u

typedef struct counts {
        uint64_t reads;
        uint64_t retries;
        uint64_t torn;
        uint64_t generations;   /* distinct generations seen */
        uint64_t errors;        /* reads that failed outright */
} counts_t;

static atomic_bool stop;

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
        const uint8_t *b = p;

        for (size_t i = 0; i < n; i++) {
                h ^= b[i];
                h *= UINT64_C(0x100000001b3);
        }
        return h;
}

/* The test's own checksum: over the payload, skipping the fields publication fills in. */
static uint64_t own_checksum(const npf_shm_config_t *c)
{
        const size_t from = offsetof(npf_shm_args_t, start_step);
        const size_t to = offsetof(npf_shm_args_t, reserved);
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        h = fnv((const char *) c + from, to - from, h);
        return fnv(c->prof_dir, sizeof(*c) - offsetof(npf_shm_config_t, prof_dir), h);
}

/* Build the configuration of @seed: every field follows from it. */
static void make_config(npf_shm_config_t *c, uint64_t seed)
{
        memset(c, 0, sizeof(*c));
        c->args.enabled = 1;
        c->args.start_step = (int64_t) (seed * 7);
        c->args.step_count = seed % 13 + 1;
        c->args.stop_step = c->args.start_step + (int64_t) c->args.step_count - 1;
        c->args.warmup = seed % 3;
        c->args.level = (int32_t) (seed % 4) - 1;
        c->args.flags = (uint32_t) (seed * 2654435761u);
        c->args.rank_filter = seed % 2 ? NPF_RANKS_LIST : NPF_RANKS_ALL;
        /* Lengths vary, so readers copy more or less than the writer last wrote. */
        size_t len = (size_t) snprintf(c->prof_dir, sizeof(c->prof_dir), "/prof/%" PRIu64 "/", seed);
        size_t pad = (seed * 977) % 3000;
        memset(c->prof_dir + len, 'a' + (int) (seed % 26), pad);
        c->args.prof_dir_len = (uint32_t) (len + pad);
        c->args.extra_len = (uint32_t) snprintf(c->extra, sizeof(c->extra), "{\"seed\":%" PRIu64 "}", seed);
        memset(c->rank_bitmap, (int) (seed & 0xff), sizeof(c->rank_bitmap));
        c->args.rank_count = (uint32_t) __builtin_popcount((unsigned) (seed & 0xff)) * (NPF_SHM_MAX_RANKS / 8);
        uint64_t own = own_checksum(c);
        memcpy(c->args.reserved, &own, sizeof(own));
}

static bool verify_config(const npf_shm_config_t *got, npf_shm_config_t *scratch)
{
        uint64_t own;

        if (got->args.generation == 0)
                return true;    /* nothing published yet */
        memcpy(&own, got->args.reserved, sizeof(own));
        if (own != own_checksum(got))
                return false;
        make_config(scratch, (uint64_t) got->args.start_step / 7);
        scratch->args.generation = got->args.generation;
        scratch->args.checksum = got->args.checksum;
        scratch->args.published_ns = got->args.published_ns;
        return memcmp(scratch, got, sizeof(*got)) == 0;
}

static bool verify_window(const npf_shm_window_t *w, npf_shm_config_t *scratch)
{
        if (w->args.generation == 0)
                return true;
        make_config(scratch, (uint64_t) w->args.start_step / 7);
        bool selected = npf_shm_config_selects(scratch, PROBE_RANK);
        return w->args.stop_step == scratch->args.stop_step && w->args.flags == scratch->args.flags &&
               w->args.level == scratch->args.level && w->args.prof_dir_len == scratch->args.prof_dir_len &&
               memcmp(w->prof_dir, scratch->prof_dir, scratch->args.prof_dir_len + 1) == 0 &&
               w->selected == selected && memcmp(w->args.reserved, scratch->args.reserved, 8) == 0;
}

/* Read until told to stop: full reads, and window reads the way a rank does them. */
static void read_loop(const npf_shm_ctl_t *ctl, bool windows, counts_t *n)
{
        npf_shm_config_t *got = malloc(sizeof(*got)), *scratch = malloc(sizeof(*scratch));
        npf_shm_window_t *w = malloc(sizeof(*w));
        uint64_t seen = 0;

        while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
                int r;
                bool ok;
                uint64_t gen;
                if (windows) {
                        if (!npf_shm_changed(ctl, seen)) {
                                sched_yield();  /* a rank does a step's work here */
                                continue;
                        }
                        r = npf_shm_read_window(ctl, PROBE_RANK, w);
                        ok = r >= 0 && verify_window(w, scratch);
                        gen = w->args.generation;
                } else {
                        r = npf_shm_read_config(ctl, got);
                        ok = r >= 0 && verify_config(got, scratch);
                        gen = got->args.generation;
                }
                if (r == -EAGAIN) {
                        n->errors++;
                        continue;
                }
                n->reads++;
                if (r > 0)
                        n->retries += (uint64_t) r;
                if (!ok) {
                        n->torn++;
                        continue;
                }
                if (gen < seen)
                        n->torn++;      /* time went backwards */
                else if (gen > seen)
                        n->generations++;
                seen = gen;
        }
        free(got);
        free(scratch);
        free(w);
}

typedef struct reader_arg {
        const npf_shm_ctl_t *ctl;
        bool windows;
        counts_t n;
} reader_arg_t;

static void *reader_thread(void *p)
{
        reader_arg_t *a = p;

        read_loop(a->ctl, a->windows, &a->n);
        return NULL;
}

/*
 * The reader process stops when the read end of its stop pipe, @p, sees end of file: when the
 * parent closes the write end, or dies. Unlike a signal, this cannot come before the child is
 * ready for it, nor kill the child before it reports.
 */
static void *stop_watch(void *p)
{
        int fd = *(const int *) p;
        char c;

        while (read(fd, &c, 1) < 0 && errno == EINTR)
                ;
        atomic_store(&stop, true);
        return NULL;
}

int main(int argc, char **argv)
{
        double seconds = argc > 1 ? atof(argv[1]) : 3.0;
        char name[64], err[NPF_SHM_ERR_MAX];
        npf_shm_t *shm;
        int pfd[2], stop_fd[2];        /* counts from the reader process; its stop */
        int rc = 1;

        snprintf(name, sizeof(name), "npftest-torture-%d", (int) getpid());
        npf_shm_unlink(name);
        if (npf_shm_open(name, NPF_SHM_WRITER | NPF_SHM_CREATE, &shm, err) < 0) {
                fprintf(stderr, "torture: %s\n", err);
                return 1;
        }
        if (pipe2(pfd, O_CLOEXEC) < 0 || pipe2(stop_fd, O_CLOEXEC) < 0) {
                perror("torture: pipe2");
                goto out;
        }

        /* The reader process attaches on its own, read-only, as a rank would. */
        pid_t child = fork();
        if (child < 0) {
                perror("torture: fork");
                goto out;
        }
        if (child == 0) {
                npf_shm_t *mine;
                counts_t n = { 0 };
                pthread_t t, watch;
                close(pfd[0]);
                close(stop_fd[1]);
                if (pthread_create(&watch, NULL, stop_watch, &stop_fd[0]) != 0)
                        _exit(3);
                if (npf_shm_open(name, 0, &mine, err) < 0)
                        _exit(2);
                reader_arg_t wa = { .ctl = npf_shm_ctl(mine), .windows = true };
                if (pthread_create(&t, NULL, reader_thread, &wa) != 0)
                        _exit(3);
                read_loop(npf_shm_ctl(mine), false, &n);
                pthread_join(t, NULL);
                pthread_join(watch, NULL);
                n.reads += wa.n.reads;
                n.retries += wa.n.retries;
                n.torn += wa.n.torn;
                n.errors += wa.n.errors;
                n.generations = n.generations < wa.n.generations ? n.generations : wa.n.generations;
                (void) !write(pfd[1], &n, sizeof(n));
                _exit(0);
        }
        /* Only the child holds these ends, so its exit is end of file on the parent's. */
        close(pfd[1]);
        close(stop_fd[0]);

        reader_arg_t readers[READER_THREADS];
        pthread_t threads[READER_THREADS];
        for (int i = 0; i < READER_THREADS; i++) {
                readers[i] = (reader_arg_t) { .ctl = npf_shm_ctl(shm), .windows = i == 0 };
                pthread_create(&threads[i], NULL, reader_thread, &readers[i]);
        }

        npf_shm_config_t *c = malloc(sizeof(*c));
        struct timespec t0, t;
        uint64_t published = 0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
                make_config(c, published + 1);
                if (npf_shm_publish_config(shm, c, NULL) < 0) {
                        fprintf(stderr, "torture: publish failed\n");
                        break;
                }
                published++;
                clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((double) (t.tv_sec - t0.tv_sec) + (double) (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);

        atomic_store(&stop, true);
        close(stop_fd[1]);
        counts_t proc = { 0 }, total = { 0 };
        for (int i = 0; i < READER_THREADS; i++) {
                pthread_join(threads[i], NULL);
                total.reads += readers[i].n.reads;
                total.retries += readers[i].n.retries;
                total.torn += readers[i].n.torn;
                total.errors += readers[i].n.errors;
        }
        int status = 0;
        ssize_t got;
        while ((got = read(pfd[0], &proc, sizeof(proc))) < 0 && errno == EINTR)
                ;
        close(pfd[0]);
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
                ;

        printf("torture: %" PRIu64 " publications in %.1f s\n", published, seconds);
        for (int i = 0; i < READER_THREADS; i++)
                printf("torture: thread %d (%s): %" PRIu64 " reads, %" PRIu64 " retries, %" PRIu64
                       " waits for a stable sequence, %" PRIu64 " generations seen, %" PRIu64 " torn\n", i,
                       readers[i].windows ? "window" : "full", readers[i].n.reads, readers[i].n.retries,
                       readers[i].n.errors, readers[i].n.generations, readers[i].n.torn);
        printf("torture: process (full + window): %" PRIu64 " reads, %" PRIu64 " retries, %" PRIu64
               " generations seen, %" PRIu64 " torn\n", proc.reads, proc.retries, proc.generations, proc.torn);
        total.reads += proc.reads;
        total.retries += proc.retries;
        total.torn += proc.torn;
        printf("torture: total %" PRIu64 " reads, %" PRIu64 " retries, %" PRIu64 " torn\n", total.reads,
               total.retries, total.torn);

        bool reported = got == (ssize_t) sizeof(proc) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        bool progressed = proc.reads > 0 && proc.generations > 1;
        for (int i = 0; i < READER_THREADS; i++)
                progressed = progressed && readers[i].n.reads > 0 && readers[i].n.generations > 1;
        if (!reported && WIFSIGNALED(status))
                fprintf(stderr, "torture: FAILED (the reader process was killed by signal %d)\n", WTERMSIG(status));
        else if (!reported)
                fprintf(stderr, "torture: FAILED (the reader process exited with %d after %zd bytes of counts)\n",
                        WIFEXITED(status) ? WEXITSTATUS(status) : -1, got);
        else if (total.torn == 0 && progressed && published > 1)
                rc = 0;
        else
                fprintf(stderr, "torture: FAILED (%s)\n", total.torn ? "torn reads" : "a reader made no progress");
        free(c);
out:
        npf_shm_close(shm);
        npf_shm_unlink(name);
        return rc;
}
