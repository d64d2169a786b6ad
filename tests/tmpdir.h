/* SPDX-License-Identifier: MIT */
/* A cmocka fixture: a fresh directory under /tmp for each test, removed after it. Include it after <cmocka.h>. */
#ifndef NPUPROF_TESTS_TMPDIR_H
#define NPUPROF_TESTS_TMPDIR_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct tmpdir {
        char path[64];
        int fd;                         /* O_RDONLY; O_PATH with tmpdir_setup_opath() */
} tmpdir_t;

static inline int tmpdir_open(void **state, int flags)
{
        tmpdir_t *d = calloc(1, sizeof(*d));

        assert_non_null(d);
        snprintf(d->path, sizeof(d->path), "/tmp/npftest-dir.XXXXXX");
        assert_non_null(mkdtemp(d->path));
        d->fd = open(d->path, flags | O_DIRECTORY | O_CLOEXEC);
        assert_true(d->fd >= 0);
        *state = d;
        return 0;
}

static inline int tmpdir_setup(void **state)
{
        return tmpdir_open(state, O_RDONLY);
}

static inline int tmpdir_setup_opath(void **state)
{
        return tmpdir_open(state, O_PATH);
}

static inline int tmpdir_teardown(void **state)
{
        tmpdir_t *d = *state;
        char cmd[96];

        close(d->fd);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->path);
        assert_int_equal(system(cmd), 0);
        free(d);
        return 0;
}

#endif /* NPUPROF_TESTS_TMPDIR_H */
