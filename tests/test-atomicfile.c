/* SPDX-License-Identifier: MIT */
/* Files replaced whole: lib/atomicfile. Each test works in a directory of its own. */
#include "lib/atomicfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmpdir.h"

/* The names in @d, sorted and joined by spaces. */
static const char *listing(const tmpdir_t *d)
{
        static char out[512];
        struct dirent **names;
        int n = scandir(d->path, &names, NULL, alphasort);

        out[0] = '\0';
        for (int i = 0; i < n; i++) {
                if (strcmp(names[i]->d_name, ".") != 0 && strcmp(names[i]->d_name, "..") != 0)
                        snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", out[0] ? " " : "",
                                 names[i]->d_name);
                free(names[i]);
        }
        free(names);
        return out;
}

static const char *content(const tmpdir_t *d, const char *name)
{
        static char buf[256];
        int fd = openat(d->fd, name, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return NULL;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n < 0 ? 0 : n] = '\0';
        return buf;
}

static void put(const tmpdir_t *d, const char *name, const char *text)
{
        int fd = openat(d->fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        close(fd);
}

static void test_new_file(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f;

        assert_int_equal(npf_atomicfile_write(&f, d->fd, "a.json", "tmp", 0644, 0, "{}\n", 3), 0);
        assert_string_equal(content(d, "a.json"), "{}\n");
        assert_string_equal(listing(d), "a.json");
        assert_null(f.step);
        assert_int_equal(f.fd, -1);
}

static void test_replaces_by_rename(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f;
        struct stat before, after;

        put(d, "a.json", "old");
        assert_int_equal(fstatat(d->fd, "a.json", &before, 0), 0);
        assert_int_equal(npf_atomicfile_write(&f, d->fd, "a.json", "tmp", 0644, 0, "new", 3), 0);
        assert_int_equal(fstatat(d->fd, "a.json", &after, 0), 0);
        assert_string_equal(content(d, "a.json"), "new");
        assert_true(before.st_ino != after.st_ino);
        assert_string_equal(listing(d), "a.json");
}

static void test_noreplace(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f;

        put(d, "manifest.json", "the rank's");
        assert_int_equal(npf_atomicfile_write(&f, d->fd, "manifest.json", "x.tmp", 0644, NPF_ATOMICFILE_NOREPLACE, "mine", 4),
                         -EEXIST);
        assert_string_equal(f.step, "rename over");
        assert_string_equal(npf_atomicfile_failed_name(&f), "manifest.json");
        assert_string_equal(content(d, "manifest.json"), "the rank's");
        assert_string_equal(listing(d), "manifest.json");
        /* A link there counts as a file too, and is not followed. */
        assert_int_equal(symlinkat("/nonexistent", d->fd, "b.json"), 0);
        assert_int_equal(npf_atomicfile_write(&f, d->fd, "b.json", "x.tmp", 0644, NPF_ATOMICFILE_NOREPLACE, "mine", 4),
                         -EEXIST);
}

/* A temporary left by a writer killed mid-write is removed; a link there is not followed. */
static void test_leftover_temporary(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f;

        put(d, ".a.json.tmp", "half of a");
        put(d, "target", "untouched");
        assert_int_equal(npf_atomicfile_write(&f, d->fd, "a.json", "tmp", 0644, 0, "whole", 5), 0);
        assert_string_equal(content(d, "a.json"), "whole");
        assert_int_equal(symlinkat("target", d->fd, ".a.json.tmp"), 0);
        assert_int_equal(npf_atomicfile_write(&f, d->fd, "a.json", "tmp", 0644, 0, "again", 5), 0);
        assert_string_equal(content(d, "a.json"), "again");
        assert_string_equal(content(d, "target"), "untouched");
        assert_string_equal(listing(d), "a.json target");
}

/* A temporary's name that cannot be freed: the step says so, the file is as it was. */
static void test_blocked_temporary(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f;

        put(d, "a.json", "old");
        assert_int_equal(mkdirat(d->fd, ".a.json.tmp", 0755), 0);
        assert_int_equal(npf_atomicfile_write(&f, d->fd, "a.json", "tmp", 0644, 0, "new", 3), -EISDIR);
        assert_string_equal(f.step, "remove");
        assert_string_equal(npf_atomicfile_failed_name(&f), ".a.json.tmp");
        assert_string_equal(content(d, "a.json"), "old");
}

/* The rename fails (the name is a directory): the temporary is removed. */
static void test_rename_fails(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f;

        assert_int_equal(mkdirat(d->fd, "a.prom", 0755), 0);
        assert_int_equal(npf_atomicfile_write(&f, d->fd, "a.prom", "tmp", 0644, 0, "x", 1), -EISDIR);
        assert_string_equal(f.step, "rename over");
        assert_string_equal(listing(d), "a.prom");
}

/* Streaming: nothing is at the name until the commit; an abort leaves nothing. */
static void test_begin_commit_abort(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f, g;

        put(d, "a.csv", "old");
        assert_int_equal(npf_atomicfile_begin(&f, d->fd, "a.csv", "tmp", 0644, 0), 0);
        assert_int_equal(npf_atomicfile_append(&f, "1,2\n", 4), 0);
        assert_int_equal(npf_atomicfile_append(&f, "3,4\n", 4), 0);
        assert_string_equal(content(d, "a.csv"), "old");
        assert_string_equal(listing(d), ".a.csv.tmp a.csv");
        assert_int_equal(npf_atomicfile_commit(&f, 0), 0);
        assert_string_equal(content(d, "a.csv"), "1,2\n3,4\n");

        assert_int_equal(npf_atomicfile_begin(&g, d->fd, "a.csv", "tmp", 0644, 0), 0);
        assert_int_equal(npf_atomicfile_append(&g, "lost", 4), 0);
        npf_atomicfile_abort(&g);
        npf_atomicfile_abort(&g);       /* twice is harmless */
        assert_string_equal(content(d, "a.csv"), "1,2\n3,4\n");
        assert_string_equal(listing(d), "a.csv");
}

/* Without a tag, two writes at once have temporaries of their own; the last rename wins. */
static void test_unique_temporaries(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f, g;

        assert_int_equal(npf_atomicfile_begin(&f, d->fd, "c.json", NULL, 0600, 0), 0);
        assert_int_equal(npf_atomicfile_begin(&g, d->fd, "c.json", NULL, 0600, 0), 0);
        assert_string_not_equal(f.tmp, g.tmp);
        assert_int_equal(strncmp(f.tmp, ".c.json.", 8), 0);
        assert_int_equal(npf_atomicfile_append(&f, "first", 5), 0);
        assert_int_equal(npf_atomicfile_append(&g, "second", 6), 0);
        assert_int_equal(npf_atomicfile_commit(&f, 0), 0);
        assert_int_equal(npf_atomicfile_commit(&g, 0), 0);
        assert_string_equal(content(d, "c.json"), "second");
        assert_string_equal(listing(d), "c.json");
}

static void test_modes(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f;
        struct stat st;
        mode_t old = umask(077);

        assert_int_equal(npf_atomicfile_write(&f, d->fd, "umasked", "tmp", 0644, 0, "x", 1), 0);
        assert_int_equal(npf_atomicfile_write(&f, d->fd, "exact", "tmp", 0644, NPF_ATOMICFILE_EXACT_MODE, "x", 1), 0);
        umask(old);
        assert_int_equal(fstatat(d->fd, "umasked", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(fstatat(d->fd, "exact", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
}

/* An O_PATH descriptor of the directory, as npf_outroot_walk() gives, serves as well. */
static void test_opath_directory(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f;
        int dfd = open(d->path, O_PATH | O_DIRECTORY | O_CLOEXEC);

        assert_true(dfd >= 0);
        assert_int_equal(npf_atomicfile_write(&f, dfd, "m.json", "tmp", 0644, 0, "ok", 2), 0);
        close(dfd);
        assert_string_equal(content(d, "m.json"), "ok");
}

static void test_bad_names(void **state)
{
        tmpdir_t *d = *state;
        npf_atomicfile_t f;
        char long_name[300];

        assert_int_equal(npf_atomicfile_write(&f, d->fd, "../escape", "tmp", 0644, 0, "x", 1), -EINVAL);
        memset(long_name, 'n', 252);     /* fits NAME_MAX, but not with ".NAME.tmp" */
        long_name[252] = '\0';
        assert_int_equal(npf_atomicfile_write(&f, d->fd, long_name, "tmp", 0644, 0, "x", 1), -ENAMETOOLONG);
        assert_string_equal(f.step, "create");
        assert_string_equal(listing(d), "");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, tmpdir_setup, tmpdir_teardown)

int main(void)
{
        const struct CMUnitTest tests[] = {
                T(test_new_file),          T(test_replaces_by_rename), T(test_noreplace),
                T(test_leftover_temporary), T(test_blocked_temporary), T(test_rename_fails),
                T(test_begin_commit_abort), T(test_unique_temporaries), T(test_modes),
                T(test_opath_directory),   T(test_bad_names),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
