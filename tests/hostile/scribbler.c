/* SPDX-License-Identifier: MIT */
/*
 * scribbler: a hostile rank. It attaches to a node's segment the way a rank does (control
 * block read-only, rank table read-write), claims a slot, then writes random bytes and
 * targeted nasty values into its own slot, every other slot and the rank index, as fast as
 * it can, for a given time:
 *
 *   scribbler --shm NAME [--seconds S] [--rank R] [--seed N]
 *   scribbler --shm NAME --probe
 *
 * Before it scribbles, and alone with --probe, it tries to get the control block writable:
 * open(O_RDWR), a shared writable mapping of a read-only descriptor, and mprotect() of a
 * read-only mapping. Each attempt prints "control block: ATTEMPT refused: REASON" or
 * "control block: ATTEMPT ALLOWED" (nothing is ever written through it). The exit status is
 * 3 if any attempt was allowed, 1 if the segment cannot be attached, 2 for a usage error,
 * else 0; the last line says how many writes and bytes it made, and at what rate.
 */
#include "npuprof/shm.h"
#include "lib/proc.h"
#include "shm/slot.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;

/* xorshift64*: fast, and the same run for the same --seed. */
static uint64_t rnd(void)
{
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * UINT64_C(0x2545f4914f6cdd1d);
}

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Try each way of writing the control block. Return: how many were allowed. */
static int probe_ctl(const char *name)
{
        char path[256];
        int allowed = 0, fd;
        void *map;

        snprintf(path, sizeof(path), "/dev/shm/%s.ctl", name);
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
                printf("control block: open O_RDWR ALLOWED\n");
                allowed++;
                map = mmap(NULL, sizeof(npf_shm_ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (map != MAP_FAILED) {
                        printf("control block: writable shared mapping of the O_RDWR descriptor ALLOWED\n");
                        allowed++;
                        munmap(map, sizeof(npf_shm_ctl_t));
                }
                close(fd);
        } else {
                printf("control block: open O_RDWR refused: %s\n", strerror(errno));
        }
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                printf("control block: open O_RDONLY failed: %s\n", strerror(errno));
                return allowed;
        }
        map = mmap(NULL, sizeof(npf_shm_ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
                printf("control block: writable shared mapping ALLOWED\n");
                allowed++;
                munmap(map, sizeof(npf_shm_ctl_t));
        } else {
                printf("control block: writable shared mapping refused: %s\n", strerror(errno));
        }
        map = mmap(NULL, sizeof(npf_shm_ctl_t), PROT_READ, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
                if (mprotect(map, sizeof(npf_shm_ctl_t), PROT_READ | PROT_WRITE) == 0) {
                        printf("control block: mprotect to writable ALLOWED\n");
                        allowed++;
                } else {
                        printf("control block: mprotect to writable refused: %s\n", strerror(errno));
                }
                munmap(map, sizeof(npf_shm_ctl_t));
        }
        close(fd);
        fflush(stdout);
        return allowed;
}

typedef struct scribble {
        npf_shm_ranks_t *table;
        npf_shm_slot_t *mine;
        uint32_t pids[4];               /* other processes: init, the daemon, our parent, us */
        uint64_t starts[4];             /* their real start times, so that forged claims look alive */
        uint64_t writes, bytes;
} scribble_t;

static void put64(scribble_t *s, void *p, uint64_t v)
{
        memcpy(p, &v, sizeof(v));
        s->writes++;
        s->bytes += sizeof(v);
}

static void put32(scribble_t *s, void *p, uint32_t v)
{
        memcpy(p, &v, sizeof(v));
        s->writes++;
        s->bytes += sizeof(v);
}

/* @n random bytes at @p, eight at a time. */
static void noise(scribble_t *s, void *p, size_t n)
{
        unsigned char *b = p;

        for (size_t i = 0; i + 8 <= n; i += 8)
                put64(s, b + i, rnd());
}

/* A string buffer with no NUL, or full of bytes that are not UTF-8. */
static void bad_text(scribble_t *s, char *buf, size_t n)
{
        memset(buf, (rnd() & 1) ? 'A' : 0xff, n);
        if (rnd() & 1)
                buf[n - 1] = '\0';      /* terminated, but not UTF-8 or very long */
        s->writes++;
        s->bytes += n;
}

static void nasty_state(scribble_t *s, npf_shm_slot_state_t *st)
{
        switch (rnd() % 6) {
        case 0: put32(s, &st->state, NPF_WINDOW__COUNT + (uint32_t) (rnd() % 1000)); break;
        case 1: put32(s, &st->state, UINT32_MAX); break;
        case 2: bad_text(s, st->message, sizeof(st->message)); break;
        case 3: bad_text(s, st->output, sizeof(st->output)); break;
        case 4: put64(s, &st->window_start, (uint64_t) INT64_MIN); put64(s, &st->window_stop, INT64_MAX); break;
        default: put64(s, &st->generation, UINT64_MAX - (rnd() % 3)); break;
        }
}

/* One targeted value in slot @slot. */
static void nasty_slot(scribble_t *s, npf_shm_slot_t *slot)
{
        npf_shm_slot_cold_t *cold = &s->table->cold[slot - s->table->slots];
        unsigned who = (unsigned) (rnd() % 4);

        switch (rnd() % 12) {
        case 0: put64(s, &slot->seq, (rnd() << 1) | 1); break;         /* odd: a writer that never ends */
        case 1: put64(s, &slot->windows_ended, rnd()); break;          /* far more than the slot keeps */
        case 2: put64(s, &slot->windows_ended, UINT64_MAX); break;
        case 3: put32(s, &slot->rank, (uint32_t) (NPF_SHM_MAX_RANKS + rnd() % 1000000)); break;
        case 4: put32(s, &slot->rank, (uint32_t) (rnd() % NPF_SHM_MAX_RANKS)); break;
        case 5: /* the claim of another live process, with its real start time */
                put64(s, &slot->claim, (rnd() << 32) | s->pids[who]);
                put64(s, &slot->proc_start, s->starts[who]);
                break;
        case 6: put64(s, &slot->claim, (uint64_t) (rnd() & 0xffffffffu) << 32 | 0xffffffffu); break;
        case 7: put64(s, (uint64_t *) &slot->step, (uint64_t) INT64_MIN); break;
        case 8: put64(s, &slot->heartbeat_ns, UINT64_MAX); break;
        case 9: nasty_state(s, &cold->st); break;
        case 10: nasty_state(s, &cold->ended[rnd() % NPF_SLOT_ENDED]); break;
        default: put32(s, (uint32_t *) &slot->local_device, (uint32_t) rnd()); break;
        }
}

/* One index entry: noise, a slot number past the table, or one that names a live slot. */
static void nasty_index(scribble_t *s)
{
        uint32_t *e = &s->table->index[rnd() % NPF_SHM_MAX_RANKS];

        switch (rnd() % 4) {
        case 0: put32(s, e, (uint32_t) rnd()); break;
        case 1: put32(s, e, NPF_INDEX_ENTRY(NPF_SHM_SLOTS + rnd() % 1000, rnd())); break;
        case 2: put32(s, e, (uint32_t) rnd() << NPF_INDEX_SLOT_BITS); break;   /* slot field 0: "-1" */
        default: put32(s, e, NPF_INDEX_ENTRY(rnd() % NPF_SHM_SLOTS, rnd() % 4)); break;
        }
}

static void scribble_once(scribble_t *s)
{
        npf_shm_slot_t *other = &s->table->slots[rnd() % NPF_SHM_SLOTS];

        switch (rnd() % 8) {
        case 0: noise(s, s->mine, sizeof(*s->mine)); break;
        case 1: { /* a random run of bytes anywhere in the slots */
                size_t off = rnd() % (sizeof(s->table->slots) - 512) & ~(size_t) 7;
                noise(s, (unsigned char *) s->table->slots + off, 8 + rnd() % 504);
                break;
        }
        case 2: nasty_slot(s, s->mine); break;
        case 3: case 4: nasty_slot(s, other); break;
        case 5: case 6: nasty_index(s); break;
        default: /* keep many sequence words odd, for ever */
                for (int k = 0; k < 64; k++)
                        put64(s, &s->table->slots[rnd() % NPF_SHM_SLOTS].seq, (rnd() << 1) | 1);
                break;
        }
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "shm", required_argument, NULL, 's' },     { "seconds", required_argument, NULL, 't' },
                { "rank", required_argument, NULL, 'r' },    { "seed", required_argument, NULL, 'S' },
                { "probe", no_argument, NULL, 'p' },         { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        const char *name = NULL;
        double seconds = 10;
        long rank = 65000;
        bool probe_only = false;
        char err[NPF_SHM_ERR_MAX];
        scribble_t s = { 0 };
        npf_shm_t *shm;
        int c, allowed;

        rng_state = (uint64_t) getpid() * UINT64_C(0x9e3779b97f4a7c15) | 1;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's': name = optarg; break;
                case 't': seconds = atof(optarg); break;
                case 'r': rank = atol(optarg); break;
                case 'S': rng_state = strtoull(optarg, NULL, 0) | 1; break;
                case 'p': probe_only = true; break;
                case 'h':
                        printf("Usage: scribbler --shm NAME [--seconds S] [--rank R] [--seed N] | --probe\n");
                        return 0;
                default:
                        return 2;
                }
        }
        if (!name || seconds <= 0 || rank < 0 || rank >= (long) NPF_SHM_MAX_RANKS) {
                fprintf(stderr, "scribbler: --shm NAME is needed, --seconds above 0, --rank 0 to 65535\n");
                return 2;
        }
        allowed = probe_ctl(name);
        if (probe_only)
                return allowed ? 3 : 0;

        if (npf_shm_open(name, 0, &shm, err) < 0) {
                fprintf(stderr, "scribbler: %s\n", err);
                return 1;
        }
        s.table = npf_shm_ranks(shm);
        npf_slot_lease_t lease;
        if (npf_slot_claim(shm, (uint32_t) rank, -1, &lease, err) < 0) {
                fprintf(stderr, "scribbler: %s\n", err);
                return 1;
        }
        s.mine = lease.slot;
        printf("claimed slot %u as rank %ld\n", npf_slot_index(s.table, s.mine), rank);
        s.pids[0] = 1;
        s.pids[1] = (uint32_t) npf_shm_ctl(shm)->daemon_pid;
        s.pids[2] = (uint32_t) getppid();
        s.pids[3] = (uint32_t) getpid();
        for (int k = 0; k < 4; k++)
                npf_proc_start_time((pid_t) s.pids[k], &s.starts[k]);
        fflush(stdout);

        uint64_t start = now_ns(), end = start + (uint64_t) (seconds * 1e9), now = start;
        while (now < end) {
                for (int k = 0; k < 1024; k++)
                        scribble_once(&s);
                now = now_ns();
        }
        double took = (double) (now - start) / 1e9;
        printf("scribbled %" PRIu64 " writes, %" PRIu64 " bytes in %.1f s: %.0f writes/s, %.1f MiB/s\n", s.writes,
               s.bytes, took, (double) s.writes / took, (double) s.bytes / took / 1048576.0);
        npf_shm_close(shm);
        return allowed ? 3 : 0;
}
