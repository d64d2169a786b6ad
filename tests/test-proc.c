/* SPDX-License-Identifier: MIT */
/* Process identity: start times from /proc, gone and reused pids. */
#include "lib/proc.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static void test_own_start_time_is_stable(void **state)
{
        (void) state;
        uint64_t a = 0, b = 0;

        assert_int_equal(npf_proc_start_time(getpid(), &a), 0);
        assert_int_equal(npf_proc_start_time(getpid(), &b), 0);
        assert_true(a > 0);
        assert_int_equal(a, b);
        assert_int_equal(npf_proc_check(getpid(), a), NPF_PROC_ALIVE);
        assert_int_equal(npf_proc_check(getpid(), a + 1), NPF_PROC_REUSED);
}

static void test_child_started_later(void **state)
{
        (void) state;
        uint64_t mine, child;
        int p[2];
        char c;

        assert_int_equal(pipe(p), 0);
        assert_int_equal(npf_proc_start_time(getpid(), &mine), 0);
        usleep(20000);  /* two clock ticks at 100 Hz */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                (void) !read(p[0], &c, 1);
                _exit(0);
        }
        assert_int_equal(npf_proc_start_time(pid, &child), 0);
        assert_true(child > mine);
        assert_int_equal(npf_proc_check(pid, child), NPF_PROC_ALIVE);
        assert_int_equal(write(p[1], "x", 1), 1);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        assert_int_equal(npf_proc_check(pid, child), NPF_PROC_GONE);
        assert_int_equal(npf_proc_start_time(pid, &child), -ESRCH);
        close(p[0]);
        close(p[1]);
}

static void test_zombie_is_gone(void **state)
{
        (void) state;
        uint64_t start;

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(0);
        /* Wait for it to become a zombie without reaping it. */
        for (int i = 0; i < 500; i++) {
                char path[64], buf[256];
                snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
                FILE *fp = fopen(path, "re");
                if (!fp)
                        break;
                size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
                fclose(fp);
                buf[n] = '\0';
                char *rp = strrchr(buf, ')');
                if (rp && rp[2] == 'Z')
                        break;
                usleep(2000);
        }
        assert_int_equal(npf_proc_start_time(pid, &start), -ESRCH);
        waitpid(pid, NULL, 0);
}

/* A command name with spaces and parentheses does not shift the fields. */
static void test_hostile_command_name(void **state)
{
        (void) state;
        int p[2], q[2];
        char c;
        uint64_t start, expect;

        assert_int_equal(pipe(p), 0);
        assert_int_equal(pipe(q), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                prctl(PR_SET_NAME, "a) b ) 9 (c", 0, 0, 0);
                (void) !write(q[1], "r", 1);
                (void) !read(p[0], &c, 1);
                _exit(0);
        }
        assert_int_equal(read(q[0], &c, 1), 1);
        assert_int_equal(npf_proc_start_time(pid, &start), 0);
        /* Compare with the field counted from the right end, which the name cannot disturb. */
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        FILE *fp = fopen(path, "re");
        assert_non_null(fp);
        size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
        fclose(fp);
        buf[n] = '\0';
        assert_non_null(strstr(buf, "(a) b ) 9 (c)"));
        char *field = strrchr(buf, ')') + 2;
        for (int i = 3; i < 22; i++)
                field = strchr(field, ' ') + 1;
        expect = strtoull(field, NULL, 10);
        assert_int_equal(start, expect);
        assert_int_equal(write(p[1], "x", 1), 1);
        waitpid(pid, NULL, 0);
        close(p[0]);
        close(p[1]);
        close(q[0]);
        close(q[1]);
}

static void test_invalid_pids(void **state)
{
        (void) state;
        uint64_t start = 99;

        assert_int_equal(npf_proc_start_time(0, &start), -ESRCH);
        assert_int_equal(npf_proc_start_time(-5, &start), -ESRCH);
        assert_int_equal(start, 99);
        assert_int_equal(npf_proc_check(0, 1), NPF_PROC_GONE);
        /* Above the kernel's pid_max (at most 2^22). */
        assert_int_equal(npf_proc_check(1 << 23, 1), NPF_PROC_GONE);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_own_start_time_is_stable),
                cmocka_unit_test(test_child_started_later),
                cmocka_unit_test(test_zombie_is_gone),
                cmocka_unit_test(test_hostile_command_name),
                cmocka_unit_test(test_invalid_pids),
        };
        return cmocka_run_group_tests_name("proc", tests, NULL, NULL);
}
