/* SPDX-License-Identifier: MIT */
/* The output root: npf_outroot_normalize() and npf_outroot_resolve(). */
#include "lib/outroot.h"
#include "npuprof/shm.h"

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

#define ROOT "/var/lib/npuprof/output"

/* Resolve @dir under @root into a buffer of NPF_SHM_PATH_MAX bytes; expect @want. */
static void expect_dir(const char *root, const char *dir, const char *want)
{
        char got[NPF_SHM_PATH_MAX], err[NPF_OUTROOT_ERR_MAX] = "";
        int r = npf_outroot_resolve(root, dir, "prof_dir", got, sizeof(got), err);

        if (r != 0 || strcmp(got, want) != 0)
                fail_msg("root %s, prof_dir \"%s\": got r=%d \"%s\" (%s), expected \"%s\"", root, dir, r,
                         r == 0 ? got : "", err, want);
}

/* Resolving @dir under @root must fail with @rc, the message holding @words, @ret untouched. */
static void expect_refused(const char *root, const char *dir, int rc, const char *words)
{
        char got[NPF_SHM_PATH_MAX], err[NPF_OUTROOT_ERR_MAX] = "";

        memset(got, 'x', sizeof(got));
        int r = npf_outroot_resolve(root, dir, "prof_dir", got, sizeof(got), err);
        if (r != rc)
                fail_msg("root %s, prof_dir \"%.80s\": got r=%d (%s), expected %d", root, dir, r, err, rc);
        if (!strstr(err, words))
                fail_msg("root %s, prof_dir \"%.80s\": message \"%s\" lacks \"%s\"", root, dir, err, words);
        assert_int_equal(got[0], 'x');
}

static void test_empty(void **state)
{
        (void) state;
        expect_dir(ROOT, "", ROOT);
}

static void test_relative(void **state)
{
        (void) state;
        expect_dir(ROOT, "job1", ROOT "/job1");
}

static void test_nested_relative(void **state)
{
        (void) state;
        expect_dir(ROOT, "team/job1/run2", ROOT "/team/job1/run2");
        expect_dir(ROOT, "a//b///c", ROOT "/a/b/c");
}

static void test_absolute_inside(void **state)
{
        (void) state;
        expect_dir(ROOT, ROOT "/job1", ROOT "/job1");
        expect_dir(ROOT, "//var///lib/npuprof/output//job1", ROOT "/job1");
}

static void test_absolute_equal(void **state)
{
        (void) state;
        expect_dir(ROOT, ROOT, ROOT);
        expect_dir(ROOT, ROOT "/", ROOT);
}

static void test_trailing_slashes(void **state)
{
        (void) state;
        expect_dir(ROOT, "job1/", ROOT "/job1");
        expect_dir(ROOT, "job1///", ROOT "/job1");
        expect_dir(ROOT, ROOT "/job1//", ROOT "/job1");
}

static void test_dot_components(void **state)
{
        (void) state;
        expect_dir(ROOT, ".", ROOT);
        expect_dir(ROOT, "./", ROOT);
        expect_dir(ROOT, "./job1/./x/.", ROOT "/job1/x");
        expect_dir(ROOT, "/var/./lib/npuprof/./output/job1", ROOT "/job1");
        /* Names that only start with dots are names. */
        expect_dir(ROOT, ".hidden/...", ROOT "/.hidden/...");
}

static void test_dotdot(void **state)
{
        (void) state;
        expect_refused(ROOT, "..", -EINVAL, "\"..\"");
        expect_refused(ROOT, "../etc", -EINVAL, "\"..\"");
        expect_refused(ROOT, "job1/../job2", -EINVAL, "\"..\"");     /* even when it would stay inside */
        expect_refused(ROOT, ROOT "/..", -EINVAL, "\"..\"");
        expect_refused(ROOT, "/etc/../var/lib/npuprof/output", -EINVAL, "\"..\"");
        expect_refused(ROOT, "job1/..", -EINVAL, "output root " ROOT);
}

static void test_absolute_outside(void **state)
{
        (void) state;
        expect_refused(ROOT, "/etc", -EPERM, "prof_dir /etc is outside the output root " ROOT);
        expect_refused(ROOT, "/", -EPERM, "is outside the output root");
        expect_refused(ROOT, "/var/lib/npuprof", -EPERM, "is outside the output root");
        /* A sibling whose name starts like the root is not below it. */
        expect_refused(ROOT, ROOT "2", -EPERM, "is outside the output root");
        expect_refused(ROOT, ROOT "-other/x", -EPERM, "is outside the output root");
}

static void test_root_slash(void **state)
{
        (void) state;
        expect_dir("/", "", "/");
        expect_dir("/", "job1", "/job1");
        expect_dir("/", "/etc/x", "/etc/x");
        expect_dir("/", "/", "/");
        expect_dir("/", "//", "/");
        expect_refused("/", "/tmp/../etc", -EINVAL, "\"..\"");
}

static void test_too_long(void **state)
{
        (void) state;
        char dir[NPF_SHM_PATH_MAX + 16], want[NPF_SHM_PATH_MAX + 64];
        size_t room = NPF_SHM_PATH_MAX - 1 - strlen(ROOT "/");

        /* Exactly as long as fits: NPF_SHM_PATH_MAX - 1 bytes and the NUL. */
        memset(dir, 'a', room);
        dir[room] = '\0';
        snprintf(want, sizeof(want), "%s/%s", ROOT, dir);
        assert_int_equal(strlen(want), NPF_SHM_PATH_MAX - 1);
        expect_dir(ROOT, dir, want);
        /* One byte more does not. */
        memset(dir, 'a', room + 1);
        dir[room + 1] = '\0';
        expect_refused(ROOT, dir, -ENAMETOOLONG, "at most 4095");
        /* Nor does a short relative name under a root that leaves no room. */
        char root[NPF_SHM_PATH_MAX];
        root[0] = '/';
        memset(root + 1, 'r', NPF_SHM_PATH_MAX - 3);
        root[NPF_SHM_PATH_MAX - 2] = '\0';
        expect_dir(root, "", root);
        expect_refused(root, "job", -ENAMETOOLONG, "at most 4095");
        /* A small output buffer is respected too. */
        char small[8], err[NPF_OUTROOT_ERR_MAX];
        assert_int_equal(npf_outroot_resolve("/r", "abcde", "output_dir", small, sizeof(small), err), -ENAMETOOLONG);
        assert_non_null(strstr(err, "output_dir abcde"));
        assert_int_equal(npf_outroot_resolve("/r", "abcd", "output_dir", small, sizeof(small), err), 0);
        assert_string_equal(small, "/r/abcd");
}

static void test_key_named(void **state)
{
        (void) state;
        char got[64], err[NPF_OUTROOT_ERR_MAX];

        assert_int_equal(npf_outroot_resolve(ROOT, "/etc", "prof_path", got, sizeof(got), err), -EPERM);
        assert_string_equal(err, "prof_path /etc is outside the output root " ROOT);
}

static void expect_normal(const char *path, int rc, const char *want)
{
        char got[NPF_SHM_PATH_MAX] = "";
        int r = npf_outroot_normalize(path, got, sizeof(got));

        if (r != rc || (rc == 0 && strcmp(got, want) != 0))
                fail_msg("normalize \"%s\": got r=%d \"%s\", expected %d \"%s\"", path, r, got, rc, want ? want : "");
}

static void test_normalize(void **state)
{
        (void) state;
        expect_normal("/", 0, "/");
        expect_normal("///", 0, "/");
        expect_normal("/srv//prof/./out/", 0, "/srv/prof/out");
        expect_normal("/srv/prof/..", -EINVAL, NULL);
        expect_normal("srv/prof", -EINVAL, NULL);
        expect_normal("", -EINVAL, NULL);
        char small[4];
        assert_int_equal(npf_outroot_normalize("/abcd", small, sizeof(small)), -ENAMETOOLONG);
}

/* --- the walk below the root: no symbolic link followed ------------------------------ */

/* A private tree: ROOT/a (a directory), ROOT/file, ROOT/link -> OUTSIDE, ROOT/inner -> a. */
typedef struct tree {
        char base[64], root[128], outside[128];
} tree_t;

static int tree_setup(void **state)
{
        static tree_t t;
        char p[256];

        snprintf(t.base, sizeof(t.base), "/tmp/npftest-outroot.XXXXXX");
        assert_non_null(mkdtemp(t.base));
        snprintf(t.root, sizeof(t.root), "%s/root", t.base);
        snprintf(t.outside, sizeof(t.outside), "%s/outside", t.base);
        assert_int_equal(mkdir(t.root, 0755), 0);
        assert_int_equal(mkdir(t.outside, 0755), 0);
        snprintf(p, sizeof(p), "%s/a", t.root);
        assert_int_equal(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/file", t.root);
        int fd = open(p, O_WRONLY | O_CREAT, 0644);
        assert_true(fd >= 0);
        close(fd);
        snprintf(p, sizeof(p), "%s/link", t.root);
        assert_int_equal(symlink(t.outside, p), 0);
        snprintf(p, sizeof(p), "%s/inner", t.root);
        assert_int_equal(symlink("a", p), 0);
        *state = &t;
        return 0;
}

static int tree_teardown(void **state)
{
        tree_t *t = *state;
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", t->base);
        return system(cmd) == 0 ? 0 : -1;
}

/* Walk ROOT/@rel (no create): expect @rc and, when refused, @words in the message. */
static void expect_walk(const tree_t *t, const char *rel, int rc, const char *words)
{
        char dir[256], err[NPF_OUTROOT_ERR_MAX] = "";

        snprintf(dir, sizeof(dir), "%s/%s", t->root, rel);
        int r = npf_outroot_walk(dir, strlen(t->root), NPF_OUTROOT_CHECK, "prof_dir", err);
        if (r != rc)
                fail_msg("walk %s: got %d (%s), expected %d", rel, r, err, rc);
        if (words && !strstr(err, words))
                fail_msg("walk %s: message \"%s\" lacks \"%s\"", rel, err, words);
}

static void test_walk_checks(void **state)
{
        tree_t *t = *state;

        expect_walk(t, "a", 0, NULL);
        expect_walk(t, "a/not/yet", 0, NULL);           /* a rank will create them */
        expect_walk(t, "link", -ELOOP, "reaches through the symbolic link");
        expect_walk(t, "link/job", -ELOOP, "/root/link (-> ");
        expect_walk(t, "a/../../outside", -EINVAL, "\"..\"");  /* never climbs */
        expect_walk(t, "inner/x", -ELOOP, "symbolic link"); /* even one that stays inside */
        expect_walk(t, "file/x", -ENOTDIR, "is not a directory");
}

static void test_walk_creates_without_leaving(void **state)
{
        tree_t *t = *state;
        char dir[256], err[NPF_OUTROOT_ERR_MAX] = "", p[256];
        struct stat st;

        snprintf(dir, sizeof(dir), "%s/a/b/c", t->root);
        int fd = npf_outroot_walk(dir, strlen(t->root), NPF_OUTROOT_CREATE, "prof_dir", err);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        close(fd);
        assert_int_equal(stat(dir, &st), 0);

        /* Through the link: refused, and nothing made on the other side. */
        snprintf(dir, sizeof(dir), "%s/link/job", t->root);
        assert_int_equal(npf_outroot_walk(dir, strlen(t->root), NPF_OUTROOT_CREATE, "prof_dir", err), -ELOOP);
        snprintf(p, sizeof(p), "%s/job", t->outside);
        assert_int_equal(stat(p, &st), -1);
        assert_int_equal(errno, ENOENT);
}

static void test_walk_opens_only_what_exists(void **state)
{
        tree_t *t = *state;
        char dir[256], err[NPF_OUTROOT_ERR_MAX] = "";
        struct stat st;

        snprintf(dir, sizeof(dir), "%s/a", t->root);
        int fd = npf_outroot_walk(dir, strlen(t->root), NPF_OUTROOT_OPEN, "dir", err);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        close(fd);
        /* Missing: an error, and nothing created, where CHECK would be content. */
        snprintf(dir, sizeof(dir), "%s/a/not/yet", t->root);
        assert_int_equal(npf_outroot_walk(dir, strlen(t->root), NPF_OUTROOT_OPEN, "dir", err), -ENOENT);
        snprintf(dir, sizeof(dir), "%s/a/not", t->root);
        assert_int_equal(stat(dir, &st), -1);
        snprintf(dir, sizeof(dir), "%s/link", t->root);
        assert_int_equal(npf_outroot_walk(dir, strlen(t->root), NPF_OUTROOT_OPEN, "dir", err), -ELOOP);
}

static void test_walk_root_is_the_operators(void **state)
{
        tree_t *t = *state;
        char dir[256], err[NPF_OUTROOT_ERR_MAX] = "";

        /* A root that is itself a link is followed; only what lies below it is checked. */
        snprintf(dir, sizeof(dir), "%s/link/x", t->root);
        assert_int_equal(npf_outroot_walk(dir, strlen(t->root) + strlen("/link"), NPF_OUTROOT_CHECK, "prof_dir", err), 0);
        /* A missing root is no refusal before publication; a rank creates it. */
        snprintf(dir, sizeof(dir), "%s/none/x", t->base);
        assert_int_equal(npf_outroot_walk(dir, strlen(t->base) + strlen("/none"), NPF_OUTROOT_CHECK, "prof_dir", err), 0);
        int fd = npf_outroot_walk(dir, strlen(t->base) + strlen("/none"), NPF_OUTROOT_CREATE, "prof_dir", err);
        assert_true(fd >= 0);
        close(fd);
        /* A root length that cuts a component is a caller's error. */
        snprintf(dir, sizeof(dir), "%s/a", t->root);
        assert_int_equal(npf_outroot_walk(dir, strlen(t->root) - 1, NPF_OUTROOT_CHECK, "prof_dir", err), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_empty),
                cmocka_unit_test(test_relative),
                cmocka_unit_test(test_nested_relative),
                cmocka_unit_test(test_absolute_inside),
                cmocka_unit_test(test_absolute_equal),
                cmocka_unit_test(test_trailing_slashes),
                cmocka_unit_test(test_dot_components),
                cmocka_unit_test(test_dotdot),
                cmocka_unit_test(test_absolute_outside),
                cmocka_unit_test(test_root_slash),
                cmocka_unit_test(test_too_long),
                cmocka_unit_test(test_key_named),
                cmocka_unit_test(test_normalize),
                cmocka_unit_test_setup_teardown(test_walk_checks, tree_setup, tree_teardown),
                cmocka_unit_test_setup_teardown(test_walk_creates_without_leaving, tree_setup, tree_teardown),
                cmocka_unit_test_setup_teardown(test_walk_opens_only_what_exists, tree_setup, tree_teardown),
                cmocka_unit_test_setup_teardown(test_walk_root_is_the_operators, tree_setup, tree_teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
