/* SPDX-License-Identifier: MIT */
/* The shared-memory segment: ABI layout, create/adopt/attach, publication, hostile bytes. */
#include "npuprof/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct fixture {
        char name[64];
        npf_shm_t *writer;
} fixture_t;

static int setup(void **state)
{
        static int n;
        fixture_t *f = calloc(1, sizeof(*f));
        char err[NPF_SHM_ERR_MAX];

        snprintf(f->name, sizeof(f->name), "npftest-shm-%d-%d", (int) getpid(), n++);
        npf_shm_unlink(f->name);
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &f->writer, err), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fixture_t *f = *state;

        npf_shm_close(f->writer);
        npf_shm_unlink(f->name);
        free(f);
        return 0;
}

/* Map the /dev/shm file of object @suffix of @name writable, as a hostile process would. */
static void *map_raw(const char *name, const char *suffix, size_t size)
{
        char path[128];
        int fd;
        void *p;

        snprintf(path, sizeof(path), "/dev/shm/%s.%s", name, suffix);
        fd = open(path, O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        assert_true(p != MAP_FAILED);
        return p;
}

static npf_shm_config_t *sample_config(const char *prof_dir)
{
        npf_shm_config_t *c = calloc(1, sizeof(*c));

        c->args.enabled = 1;
        c->args.start_step = 1000;
        c->args.stop_step = 1004;
        c->args.step_count = 5;
        c->args.level = NPF_LEVEL_1;
        c->args.rank_filter = NPF_RANKS_LIST;
        c->rank_bitmap[3 / 8] |= 1u << (3 % 8);
        c->rank_bitmap[65535 / 8] |= 1u << (65535 % 8);
        c->args.rank_count = 2;
        c->args.prof_dir_len = (uint32_t) strlen(prof_dir);
        memcpy(c->prof_dir, prof_dir, strlen(prof_dir) + 1);
        return c;
}

static void test_abi_layout(void **state)
{
        (void) state;
        /* The documented offsets, checked at run time as well as by the header's asserts. */
        static const struct { size_t got, want; } fields[] = {
                { offsetof(npf_shm_ctl_t, config_seq), 64 },
                { offsetof(npf_shm_ctl_t, status_seq), 128 },
                { offsetof(npf_shm_ctl_t, config), 192 },
                { offsetof(npf_shm_ctl_t, status), 16768 },
                { offsetof(npf_shm_config_t, prof_dir), 192 },
                { offsetof(npf_shm_config_t, extra), 4288 },
                { offsetof(npf_shm_config_t, rank_bitmap), 8384 },
                { offsetof(npf_shm_args_t, start_step), 24 },
                { offsetof(npf_shm_args_t, stop_step), 32 },
                { offsetof(npf_shm_args_t, flags), 88 },
                { offsetof(npf_shm_ranks_t, slots), 128 },
                { offsetof(npf_shm_ranks_t, index), 131200 },
                { offsetof(npf_shm_ranks_t, cold), 397312 },
                { sizeof(npf_shm_ranks_t), 2691072 },
                { offsetof(npf_shm_slot_t, step), 24 },
                { offsetof(npf_shm_slot_t, seq), 64 },
                { sizeof(npf_shm_slot_t), 128 },
                { offsetof(npf_shm_slot_cold_t, st), 0 },
                { offsetof(npf_shm_slot_cold_t, ended), 440 },
                { offsetof(npf_shm_slot_t, windows_ended), 72 },
                { sizeof(npf_shm_slot_cold_t), 2240 },
                { sizeof(npf_shm_ctl_t), 18496 },
        };
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
                assert_int_equal(fields[i].got, fields[i].want);
        /*
         * Hot entries are pairs of whole cache lines, the first on a 128-byte boundary, so
         * that no two ranks' per-step stores share a line or a prefetched pair; cold entries
         * are whole lines. The hot entries come first: a sweep reads the first pages alone.
         */
        assert_int_equal(offsetof(npf_shm_ranks_t, slots) % 128, 0);
        assert_int_equal(sizeof(npf_shm_slot_t), 128);
        assert_int_equal(offsetof(npf_shm_ranks_t, cold) % 4096, 0);
        assert_int_equal(sizeof(npf_shm_slot_cold_t) % 64, 0);
        assert_true(offsetof(npf_shm_ranks_t, slots) + sizeof(((npf_shm_ranks_t *) 0)->slots) <=
                    offsetof(npf_shm_ranks_t, index));
        assert_true(offsetof(npf_shm_ranks_t, index) < offsetof(npf_shm_ranks_t, cold));
        assert_true(NPF_SHM_SLOTS >= 256);
        assert_int_equal(sizeof(((npf_shm_config_t *) 0)->rank_bitmap) * 8, 65536);
}

static void test_create_modes_and_header(void **state)
{
        fixture_t *f = *state;
        const npf_shm_ctl_t *ctl = npf_shm_ctl(f->writer);
        char path[128];
        struct stat st;

        assert_false(npf_shm_adopted(f->writer));
        assert_int_equal(ctl->magic, NPF_SHM_CTL_MAGIC);
        assert_int_equal(ctl->abi_version, NPF_SHM_ABI_VERSION);
        assert_int_equal(ctl->ctl_size, sizeof(npf_shm_ctl_t));
        assert_int_equal(npf_shm_ranks(f->writer)->slot_count, NPF_SHM_SLOTS);

        /* Ranks get no write permission on the control block, whatever the umask. */
        snprintf(path, sizeof(path), "/dev/shm/%s.ctl", f->name);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        snprintf(path, sizeof(path), "/dev/shm/%s.ranks", f->name);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0666);
}

static void test_reader_cannot_write_control_block(void **state)
{
        fixture_t *f = *state;
        npf_shm_t *reader;
        char err[NPF_SHM_ERR_MAX];
        int status;

        assert_int_equal(npf_shm_open(f->name, 0, &reader, err), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                volatile uint64_t *seq = (volatile uint64_t *) &npf_shm_ctl(reader)->config_seq;
                signal(SIGSEGV, SIG_DFL);       /* cmocka's handler would catch it */
                *seq = 12345;   /* must fault: mapped read-only */
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGSEGV);
        assert_int_equal(npf_shm_ctl(reader)->config_seq, 0);

        /* And the API refuses to publish through a reader. */
        npf_shm_config_t *c = sample_config("/tmp/p");
        assert_int_equal(npf_shm_publish_config(reader, c, NULL), -EPERM);
        free(c);
        npf_shm_close(reader);
}

static void test_publish_and_read(void **state)
{
        fixture_t *f = *state;
        const npf_shm_ctl_t *ctl = npf_shm_ctl(f->writer);
        npf_shm_config_t *c = sample_config("/data/prof"), *out = calloc(1, sizeof(*out));
        uint64_t gen = 0;

        /* Nothing published: generation 0, profiling off. */
        assert_false(npf_shm_changed(ctl, 0));
        assert_int_equal(npf_shm_read_config(ctl, out), 0);
        assert_int_equal(out->args.enabled, 0);

        assert_int_equal(npf_shm_publish_config(f->writer, c, &gen), 0);
        assert_int_equal(gen, 1);
        assert_true(npf_shm_changed(ctl, 0));
        assert_false(npf_shm_changed(ctl, 1));
        assert_true(npf_shm_read_config(ctl, out) >= 0);
        assert_int_equal(out->args.generation, 1);
        assert_int_equal(out->args.start_step, 1000);
        assert_int_equal(out->args.stop_step, 1004);
        assert_string_equal(out->prof_dir, "/data/prof");
        assert_int_equal(out->args.checksum, npf_shm_config_checksum(out));
        assert_true(out->args.published_ns > 0);

        c->args.start_step = 2000;
        assert_int_equal(npf_shm_publish_config(f->writer, c, &gen), 0);
        assert_int_equal(gen, 2);
        assert_true(npf_shm_changed(ctl, 1));
        assert_int_equal(ctl->config_seq, 4);
        free(c);
        free(out);
}

static void test_read_window_selects_ranks(void **state)
{
        fixture_t *f = *state;
        const npf_shm_ctl_t *ctl = npf_shm_ctl(f->writer);
        npf_shm_config_t *c = sample_config("/p");
        npf_shm_window_t *w = calloc(1, sizeof(*w));

        assert_int_equal(npf_shm_publish_config(f->writer, c, NULL), 0);
        assert_true(npf_shm_read_window(ctl, 3, w) >= 0);
        assert_true(w->selected);
        assert_int_equal(w->args.generation, 1);
        assert_int_equal(w->args.level, NPF_LEVEL_1);
        assert_string_equal(w->prof_dir, "/p");
        assert_true(npf_shm_read_window(ctl, 65535, w) >= 0);
        assert_true(w->selected);
        assert_true(npf_shm_read_window(ctl, 4, w) >= 0);
        assert_false(w->selected);
        assert_true(npf_shm_read_window(ctl, 70000, w) >= 0);
        assert_false(w->selected);

        c->args.rank_filter = NPF_RANKS_ALL;
        assert_int_equal(npf_shm_publish_config(f->writer, c, NULL), 0);
        assert_true(npf_shm_read_window(ctl, 4, w) >= 0);
        assert_true(w->selected);
        free(c);
        free(w);
}

static void test_publish_rejects_unterminated(void **state)
{
        fixture_t *f = *state;
        npf_shm_config_t *c = sample_config("/p");

        c->args.prof_dir_len = NPF_SHM_PATH_MAX;
        assert_int_equal(npf_shm_publish_config(f->writer, c, NULL), -EINVAL);
        c->args.prof_dir_len = 1;       /* "/p" has its NUL at 2, not 1 */
        assert_int_equal(npf_shm_publish_config(f->writer, c, NULL), -EINVAL);
        assert_int_equal(npf_shm_ctl(f->writer)->config_seq, 0);
        free(c);
}

static void test_adopt_keeps_generation(void **state)
{
        fixture_t *f = *state;
        npf_shm_config_t *c = sample_config("/p");
        npf_shm_t *again;
        char err[NPF_SHM_ERR_MAX];
        uint64_t gen;

        assert_int_equal(npf_shm_publish_config(f->writer, c, &gen), 0);
        assert_int_equal(npf_shm_publish_config(f->writer, c, &gen), 0);
        f->writer = npf_shm_close(f->writer);

        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &again, err), 0);
        assert_true(npf_shm_adopted(again));
        assert_false(npf_shm_changed(npf_shm_ctl(again), 2));
        assert_int_equal(npf_shm_publish_config(again, c, &gen), 0);
        assert_int_equal(gen, 3);
        f->writer = again;
        free(c);
}

/* One daemon per segment: a second writer is refused while the first holds it. */
static void test_one_writer(void **state)
{
        fixture_t *f = *state;
        npf_shm_t *second = NULL, *reader = NULL;
        char err[NPF_SHM_ERR_MAX] = "";
        int status;

        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &second, err), -EBUSY);
        assert_null(second);
        assert_non_null(strstr(err, "already served by another daemon"));
        /* The lock is the writer's, not the process's: another process is refused too. */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_shm_t *other;
                _exit(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &other, NULL) == -EBUSY ? 0 : 1);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_int_equal(WEXITSTATUS(status), 0);
        /* Readers are not writers. */
        assert_int_equal(npf_shm_open(f->name, 0, &reader, err), 0);
        npf_shm_close(reader);
        /* Once the first writer is gone, the next one may take over. */
        f->writer = npf_shm_close(f->writer);
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &f->writer, err), 0);
        assert_true(npf_shm_adopted(f->writer));
}

static void test_open_missing(void **state)
{
        (void) state;
        npf_shm_t *s = NULL;
        char err[NPF_SHM_ERR_MAX] = "";

        assert_int_equal(npf_shm_open("npftest-never-created", 0, &s, err), -ENOENT);
        assert_null(s);
        assert_non_null(strstr(err, "npftest-never-created"));
}

static void test_other_abi_refused(void **state)
{
        fixture_t *f = *state;
        npf_shm_ctl_t *raw = map_raw(f->name, "ctl", sizeof(npf_shm_ctl_t));
        npf_shm_t *s = NULL;
        char err[NPF_SHM_ERR_MAX] = "";

        raw->abi_version = NPF_SHM_ABI_VERSION + 1;
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), -EPROTO);
        char want[64];
        snprintf(want, sizeof(want), "ABI version %u", NPF_SHM_ABI_VERSION + 1);
        assert_non_null(strstr(err, want));
        snprintf(want, sizeof(want), "speaks version %u", NPF_SHM_ABI_VERSION);
        assert_non_null(strstr(err, want));
        /* Nor does a daemon adopt it. */
        f->writer = npf_shm_close(f->writer);
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &s, err), -EPROTO);
        assert_null(s);

        raw->abi_version = NPF_SHM_ABI_VERSION;
        raw->magic = 0x1122334455667788u;
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), -EPROTO);
        assert_non_null(strstr(err, "bad magic"));

        raw->magic = 0;
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), -EAGAIN);
        raw->magic = NPF_SHM_CTL_MAGIC;
        raw->ctl_size = 100;
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), -EPROTO);
        raw->ctl_size = sizeof(npf_shm_ctl_t);
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), 0);
        npf_shm_close(s);
        munmap(raw, sizeof(*raw));
}

static void test_rank_table_refused_when_damaged(void **state)
{
        fixture_t *f = *state;
        npf_shm_ranks_t *raw = map_raw(f->name, "ranks", sizeof(npf_shm_ranks_t));
        npf_shm_t *s = NULL;
        char err[NPF_SHM_ERR_MAX] = "";

        raw->slot_count = 7;
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), -EPROTO);
        assert_non_null(strstr(err, "7 slots"));
        raw->slot_count = NPF_SHM_SLOTS;
        raw->abi_version = 9;
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), -EPROTO);
        assert_non_null(strstr(err, "ABI version 9"));
        raw->abi_version = NPF_SHM_ABI_VERSION;
        munmap(raw, sizeof(*raw));
}

static void test_truncated_object_refused(void **state)
{
        fixture_t *f = *state;
        char path[128];
        npf_shm_t *s = NULL;
        char err[NPF_SHM_ERR_MAX] = "";

        snprintf(path, sizeof(path), "/dev/shm/%s.ctl", f->name);
        assert_int_equal(truncate(path, 100), 0);
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), -EPROTO);
        assert_non_null(strstr(err, "smaller"));
        assert_int_equal(truncate(path, 0), 0);
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), -EAGAIN);
        assert_null(s);
}

/* A reader survives arbitrary bytes: every read fails cleanly, none crashes. */
static void test_garbage_config_never_trusted(void **state)
{
        fixture_t *f = *state;
        npf_shm_ctl_t *raw = map_raw(f->name, "ctl", sizeof(npf_shm_ctl_t));
        npf_shm_config_t *c = sample_config("/p"), *out = calloc(1, sizeof(*out));
        npf_shm_window_t *w = calloc(1, sizeof(*w));
        npf_shm_status_t st;
        unsigned seed = 42;

        assert_int_equal(npf_shm_publish_config(f->writer, c, NULL), 0);
        for (int round = 0; round < 200; round++) {
                uint8_t *bytes = (uint8_t *) &raw->config;
                for (size_t i = 0; i < sizeof(raw->config); i++)
                        bytes[i] = (uint8_t) rand_r(&seed);
                if (round % 2)
                        raw->config.args.prof_dir_len = (uint32_t) rand_r(&seed);
                memset(out, 0x5a, sizeof(*out));
                assert_int_equal(npf_shm_read_config(npf_shm_ctl(f->writer), out), -EBADMSG);
                /* What failed to read is not handed out. */
                assert_int_equal(out->args.generation, UINT64_C(0x5a5a5a5a5a5a5a5a));
                assert_int_equal(out->prof_dir[100], 0x5a);
                int r = npf_shm_read_window(npf_shm_ctl(f->writer), (uint32_t) rand_r(&seed), w);
                /* The window read carries no checksum; what it returns is bounded. */
                if (r >= 0)
                        assert_true(strlen(w->prof_dir) < NPF_SHM_PATH_MAX);
                else
                        assert_int_equal(r, -EBADMSG);
                uint8_t *sb = (uint8_t *) &raw->status;
                for (size_t i = 0; i < sizeof(raw->status); i++)
                        sb[i] = (uint8_t) (rand_r(&seed) | 1);  /* no NUL anywhere */
                memset(&st, 0x5a, sizeof(st));
                assert_int_equal(npf_shm_read_status(npf_shm_ctl(f->writer), &st), -EBADMSG);
                assert_int_equal(st.line, 0x5a5a5a5a);
        }
        raw->config.args.prof_dir_len = 100000;
        assert_int_equal(npf_shm_read_window(npf_shm_ctl(f->writer), 0, w), -EBADMSG);

        /* A sequence stuck odd (a writer that died mid-write) is reported, not waited on forever. */
        raw->config_seq = 7;
        assert_int_equal(npf_shm_read_config(npf_shm_ctl(f->writer), out), -EAGAIN);
        assert_int_equal(npf_shm_read_window(npf_shm_ctl(f->writer), 0, w), -EAGAIN);
        assert_true(npf_shm_changed(npf_shm_ctl(f->writer), 3));
        free(c);
        free(out);
        free(w);
        munmap(raw, sizeof(*raw));
}

/* What a dead or hostile earlier holder left is repaired or refused, never trusted. */
static void test_adopt_repairs_or_refuses(void **state)
{
        fixture_t *f = *state;
        char path[128], err[NPF_SHM_ERR_MAX] = "";
        struct stat st;
        npf_shm_t *s = NULL;

        f->writer = npf_shm_close(f->writer);
        snprintf(path, sizeof(path), "/dev/shm/%s.ctl", f->name);

        /* A mode a rank could write through is put right. */
        assert_int_equal(chmod(path, 0666), 0);
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &s, err), 0);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_true(npf_shm_adopted(s));
        s = npf_shm_close(s);

        /* An object left empty, or without its magic, by a creator that died is made anew. */
        assert_int_equal(truncate(path, 0), 0);
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &s, err), 0);
        assert_false(npf_shm_adopted(s));
        assert_int_equal(npf_shm_ctl(s)->magic, NPF_SHM_CTL_MAGIC);
        s = npf_shm_close(s);
        npf_shm_ctl_t *raw = map_raw(f->name, "ctl", sizeof(npf_shm_ctl_t));
        raw->magic = 0;
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &s, err), 0);
        assert_false(npf_shm_adopted(s));
        s = npf_shm_close(s);

        /* Somebody else's object is not adopted. */
        assert_int_equal(chown(path, 65534, 65534), 0);
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &s, err), -EPERM);
        assert_non_null(strstr(err, "belongs to another user"));
        assert_int_equal(chown(path, 0, 0), 0);
        munmap(raw, sizeof(*raw));
        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &f->writer, err), 0);
}

/*
 * With a group, the rank table is mode 0660 and that group's, made so whatever the umask,
 * and an adopted one is put so; adopted without one, it is mode 0666 again. The control
 * block stays 0644.
 */
static void test_rank_table_group(void **state)
{
        fixture_t *f = *state;
        char ranks[128], ctl[128], err[NPF_SHM_ERR_MAX] = "";
        gid_t group = geteuid() == 0 ? 65534 : getegid();
        struct stat st;
        npf_shm_t *s = NULL;

        snprintf(ranks, sizeof(ranks), "/dev/shm/%s.ranks", f->name);
        snprintf(ctl, sizeof(ctl), "/dev/shm/%s.ctl", f->name);
        f->writer = npf_shm_close(f->writer);
        npf_shm_unlink(f->name);
        mode_t mask = umask(077);
        assert_int_equal(npf_shm_open_group(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, group, &s, err), 0);
        umask(mask);
        assert_false(npf_shm_adopted(s));
        assert_int_equal(stat(ranks, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0660);
        assert_int_equal(st.st_gid, group);
        assert_int_equal(stat(ctl, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        s = npf_shm_close(s);

        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &s, err), 0);
        assert_true(npf_shm_adopted(s));
        assert_int_equal(stat(ranks, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0666);
        s = npf_shm_close(s);
        assert_int_equal(npf_shm_open_group(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, group, &s, err), 0);
        assert_int_equal(stat(ranks, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0660);
        assert_int_equal(st.st_gid, group);
        /* A rank opens it as before. */
        npf_shm_t *rank = NULL;
        assert_int_equal(npf_shm_open(f->name, 0, &rank, err), 0);
        npf_shm_close(rank);
        f->writer = s;
}

/* A daemon killed mid-publish leaves the sequence odd; the next publication repairs it. */
static void test_publish_after_dead_writer(void **state)
{
        fixture_t *f = *state;
        npf_shm_ctl_t *raw = map_raw(f->name, "ctl", sizeof(npf_shm_ctl_t));
        npf_shm_config_t *c = sample_config("/p"), *out = calloc(1, sizeof(*out));
        uint64_t gen;

        assert_int_equal(npf_shm_publish_config(f->writer, c, &gen), 0);
        raw->config_seq |= 1;   /* killed between write_begin and write_end */
        assert_int_equal(npf_shm_read_config(npf_shm_ctl(f->writer), out), -EAGAIN);
        assert_int_equal(npf_shm_publish_config(f->writer, c, &gen), 0);
        assert_int_equal(raw->config_seq % 2, 0);
        assert_int_equal(raw->config_seq, gen * 2);
        assert_true(npf_shm_read_config(npf_shm_ctl(f->writer), out) >= 0);
        assert_int_equal(out->args.generation, gen);
        assert_false(npf_shm_changed(npf_shm_ctl(f->writer), gen));
        free(c);
        free(out);
        munmap(raw, sizeof(*raw));
}

static void test_status_roundtrip(void **state)
{
        fixture_t *f = *state;
        npf_shm_status_t st = { .file_state = NPF_FILE_INVALID, .line = 7, .column = 22, .error_count = 3 };
        npf_shm_status_t out;

        snprintf(st.path, sizeof(st.path), "/etc/npuprof/profiler_config.json");
        snprintf(st.key, sizeof(st.key), "experimental_config.profiler_level");
        memset(st.message, 'x', sizeof(st.message));  /* unterminated: publish cuts it */
        assert_int_equal(npf_shm_publish_status(f->writer, &st), 0);
        assert_true(npf_shm_read_status(npf_shm_ctl(f->writer), &out) >= 0);
        assert_int_equal(out.file_state, NPF_FILE_INVALID);
        assert_int_equal(out.line, 7);
        assert_int_equal(out.column, 22);
        assert_string_equal(out.key, "experimental_config.profiler_level");
        assert_int_equal(strlen(out.message), sizeof(out.message) - 1);
        /* The file status does not move the configuration's generation. */
        assert_false(npf_shm_changed(npf_shm_ctl(f->writer), 0));
}

static void test_name_check(void **state)
{
        (void) state;
        char err[NPF_SHM_ERR_MAX];
        char longname[300];

        assert_int_equal(npf_shm_name_check("npuprof", err), 0);
        assert_int_equal(npf_shm_name_check("job-7_a.b", err), 0);
        assert_int_equal(npf_shm_name_check("", err), -EINVAL);
        assert_int_equal(npf_shm_name_check("a/b", err), -EINVAL);
        assert_non_null(strstr(err, "a/b"));
        assert_int_equal(npf_shm_name_check("..", err), -EINVAL);
        assert_int_equal(npf_shm_name_check("sp ace", err), -EINVAL);
        memset(longname, 'a', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        assert_int_equal(npf_shm_name_check(longname, err), -EINVAL);
        assert_int_equal(npf_shm_unlink("bad/name"), -EINVAL);
}

static void test_unlink(void **state)
{
        fixture_t *f = *state;
        npf_shm_t *s = NULL;
        char err[NPF_SHM_ERR_MAX];

        assert_int_equal(npf_shm_unlink(f->name), 0);
        assert_int_equal(npf_shm_open(f->name, 0, &s, err), -ENOENT);
        assert_int_equal(npf_shm_unlink(f->name), -ENOENT);
        /* The writer's mapping outlives the name. */
        assert_int_equal(npf_shm_ctl(f->writer)->magic, NPF_SHM_CTL_MAGIC);
}

static void test_window_state_names(void **state)
{
        (void) state;
        assert_string_equal(npf_shm_window_state_name(NPF_WINDOW_ARMED), "armed");
        assert_string_equal(npf_shm_window_state_name(NPF_WINDOW_MISSED), "missed");
        assert_string_equal(npf_shm_window_state_name(NPF_WINDOW_LOST), "lost");
        assert_string_equal(npf_shm_window_state_name(999), "invalid");
        for (uint32_t s = 0; s < NPF_WINDOW__COUNT; s++)
                assert_string_not_equal(npf_shm_window_state_name(s), "invalid");
}

/* Every enumerator of the ABI has its name; a value outside has none. */
static void test_enum_names(void **state)
{
        (void) state;
        assert_string_equal(npf_shm_dialect_name(NPF_DIALECT_TORCH_NPU), "torch_npu");
        assert_string_equal(npf_shm_dialect_name(4), "unknown");
        assert_string_equal(npf_shm_dialect_name(UINT32_MAX), "unknown");
        for (int32_t l = NPF_LEVEL_NONE; l <= NPF_LEVEL_2; l++)
                assert_string_not_equal(npf_shm_level_name(l), "invalid");
        assert_string_equal(npf_shm_level_name(NPF_LEVEL_0), "Level0");
        assert_string_equal(npf_shm_level_name(-2), "invalid");
        assert_string_equal(npf_shm_level_name(3), "invalid");
        assert_string_equal(npf_shm_backend_name(NPF_BACKEND_AUTO), "auto");
        assert_string_equal(npf_shm_backend_name(NPF_BACKEND_HOST), "host");
        assert_string_equal(npf_shm_backend_name(NPF_BACKEND_KINETO), "kineto");
        assert_string_equal(npf_shm_backend_name(4), "invalid");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_abi_layout),
                cmocka_unit_test_setup_teardown(test_create_modes_and_header, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reader_cannot_write_control_block, setup, teardown),
                cmocka_unit_test_setup_teardown(test_publish_and_read, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_window_selects_ranks, setup, teardown),
                cmocka_unit_test_setup_teardown(test_publish_rejects_unterminated, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopt_keeps_generation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_one_writer, setup, teardown),
                cmocka_unit_test(test_open_missing),
                cmocka_unit_test_setup_teardown(test_other_abi_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rank_table_refused_when_damaged, setup, teardown),
                cmocka_unit_test_setup_teardown(test_truncated_object_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_garbage_config_never_trusted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopt_repairs_or_refuses, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rank_table_group, setup, teardown),
                cmocka_unit_test_setup_teardown(test_publish_after_dead_writer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_status_roundtrip, setup, teardown),
                cmocka_unit_test(test_name_check),
                cmocka_unit_test_setup_teardown(test_unlink, setup, teardown),
                cmocka_unit_test(test_window_state_names),
                cmocka_unit_test(test_enum_names),
        };
        return cmocka_run_group_tests_name("shm", tests, NULL, NULL);
}
