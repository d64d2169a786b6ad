/* SPDX-License-Identifier: MIT */
/* A window's manifest.json: lib/manifest, the one writer of ranks and the daemon. */
#include "lib/manifest.h"

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

static void put(const tmpdir_t *d, const char *name, size_t size)
{
        char path[128];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", d->path, name);
        assert_non_null(f = fopen(path, "w"));
        for (size_t i = 0; i < size; i++)
                fputc('x', f);
        fclose(f);
}

static json_t *load(const tmpdir_t *d)
{
        char path[128];
        json_error_t je;
        json_t *m;

        snprintf(path, sizeof(path), "%s/manifest.json", d->path);
        m = json_load_file(path, 0, &je);
        if (!m)
                fail_msg("%s: %s", path, je.text);
        return m;
}

/* The keys of @o in their order, joined by spaces. */
static const char *keys(const json_t *o)
{
        static char out[512];
        const char *k;
        json_t *v;

        out[0] = '\0';
        json_object_foreach ((json_t *) o, k, v)
                snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", out[0] ? " " : "", k);
        return out;
}

/* A rank's manifest: every field known, the files of the directory but hidden ones and links. */
static void test_rank_manifest(void **state)
{
        tmpdir_t *d = *state;
        char link[128];
        json_t *runtime = json_pack("{s:i}", "device", 3);
        npf_manifest_t m = {
                .rank = 7, .pid = 4242, .generation = 9, .start_step = 100, .stop_step = 104, .warmup = 1,
                .last_step = 104, .backend = "host", .complete = true, .started_unix_ms = 1700000000000,
                .ended_unix_ms = 1700000000500, .message = "", .runtime = runtime,
        };
        npf_atomicfile_t f;

        put(d, "trace.json", 12);
        put(d, ".hidden", 3);
        snprintf(link, sizeof(link), "%s/link.json", d->path);
        assert_int_equal(symlink("trace.json", link), 0);
        assert_int_equal(npf_manifest_write(&f, d->fd, &m, "tmp", 0), 0);
        json_decref(runtime);

        json_t *o = load(d);
        assert_string_equal(keys(o), "rank pid host generation window backend files status started_unix_ms "
                                     "ended_unix_ms message runtime");
        assert_int_equal(json_integer_value(json_object_get(o, "rank")), 7);
        assert_int_equal(json_integer_value(json_object_get(o, "pid")), 4242);
        assert_int_equal(json_integer_value(json_object_get(o, "generation")), 9);
        json_t *w = json_object_get(o, "window");
        assert_string_equal(keys(w), "start_step stop_step warmup last_step");
        assert_int_equal(json_integer_value(json_object_get(w, "stop_step")), 104);
        assert_int_equal(json_integer_value(json_object_get(w, "warmup")), 1);
        assert_int_equal(json_integer_value(json_object_get(w, "last_step")), 104);
        assert_string_equal(json_string_value(json_object_get(o, "status")), "complete");
        assert_true(json_is_null(json_object_get(o, "message")));
        assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "runtime"), "device")), 3);
        json_t *files = json_object_get(o, "files");
        assert_int_equal(json_array_size(files), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(files, 0), "name")), "trace.json");
        assert_int_equal(json_integer_value(json_object_get(json_array_get(files, 0), "size")), 12);
        assert_null(json_object_get(o, "written_by"));
        json_decref(o);
}

/* The daemon's, for a lost window: what is not known is null, and it says who wrote it. */
static void test_lost_manifest(void **state)
{
        tmpdir_t *d = *state;
        npf_manifest_t m = {
                .rank = 2, .pid = -1, .generation = 3, .start_step = 50, .stop_step = -1, .warmup = -1,
                .last_step = 49, .backend = "none", .complete = false, .started_unix_ms = -1,
                .ended_unix_ms = 1700000000500, .message = "lost: the rank died", .written_by = "npuprofd",
        };
        npf_atomicfile_t f;

        assert_int_equal(npf_manifest_write(&f, d->fd, &m, "npuprofd.tmp", NPF_ATOMICFILE_NOREPLACE), 0);
        json_t *o = load(d);
        assert_string_equal(keys(o), "rank pid host generation window backend files status started_unix_ms "
                                     "ended_unix_ms message written_by");
        json_t *w = json_object_get(o, "window");
        assert_true(json_is_null(json_object_get(o, "pid")));
        assert_true(json_is_null(json_object_get(w, "stop_step")));
        assert_true(json_is_null(json_object_get(w, "warmup")));
        assert_true(json_is_null(json_object_get(w, "last_step")));
        assert_true(json_is_null(json_object_get(o, "started_unix_ms")));
        assert_string_equal(json_string_value(json_object_get(o, "status")), "incomplete");
        assert_string_equal(json_string_value(json_object_get(o, "message")), "lost: the rank died");
        assert_string_equal(json_string_value(json_object_get(o, "written_by")), "npuprofd");
        json_decref(o);

        /* Never over a manifest already there. */
        m.message = "second";
        assert_int_equal(npf_manifest_write(&f, d->fd, &m, "npuprofd.tmp", NPF_ATOMICFILE_NOREPLACE), -EEXIST);
        o = load(d);
        assert_string_equal(json_string_value(json_object_get(o, "message")), "lost: the rank died");
        json_decref(o);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, tmpdir_setup_opath, tmpdir_teardown)

int main(void)
{
        const struct CMUnitTest tests[] = { T(test_rank_manifest), T(test_lost_manifest) };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
