/* SPDX-License-Identifier: MIT */
/*
 * The shm opener's protocol (lib/shmopen): the names it serves, a request and its answer
 * over a real SOCK_SEQPACKET pair, a descriptor that arrives open and writable, and the
 * malformed messages either side may be sent.
 */
#include "lib/shmopen.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static void test_names(void **state)
{
        (void) state;
        assert_true(npf_shmopen_name_ok("DynamicProfileShm2026112909"));
        assert_true(npf_shmopen_name_ok("DynamicProfileNpuShm2026112909"));
        assert_false(npf_shmopen_name_ok("DynamicProfileShm202611290"));      /* nine digits */
        assert_false(npf_shmopen_name_ok("DynamicProfileShm20261129090"));    /* eleven */
        assert_false(npf_shmopen_name_ok("DynamicProfileShm202611290x"));
        assert_false(npf_shmopen_name_ok("DynamicProfileShm/026112909"));
        assert_false(npf_shmopen_name_ok("../etc/shadow"));
        assert_false(npf_shmopen_name_ok("npuprof.ranks"));
        assert_false(npf_shmopen_name_ok(""));
        assert_false(npf_shmopen_name_ok("xDynamicProfileShm2026112909"));
}

/* The opener's side of one request on @s, in a child: a descriptor of a new temporary file
 * (@error 0), or @error; the child exits 0 when the request named @want. */
static pid_t serve(int s, int error, const char *want)
{
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0) {
                char path[] = "/tmp/test-shmopen.XXXXXX", name[NPF_SHMOPEN_NAME_MAX + 1];
                int fd = -1;
                if (npf_shmopen_read_request(s, name) != 1)
                        _exit(1);
                if (!error) {
                        if ((fd = mkstemp(path)) < 0)
                                _exit(1);
                        unlink(path);
                }
                _exit(npf_shmopen_reply(s, error, fd) == 0 && strcmp(name, want) == 0 ? 0 : 1);
        }
        return pid;
}

static int child_status(pid_t pid)
{
        int st;

        assert_int_equal(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_descriptor(void **state)
{
        int sv[2], fd = -1;
        bool remote = false;
        char buf[8];

        (void) state;
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        pid_t child = serve(sv[1], 0, "DynamicProfileShm2026112909");
        assert_int_equal(npf_shmopen_ask(sv[0], "DynamicProfileShm2026112909", &fd, &remote), 0);
        assert_int_equal(child_status(child), 0);
        assert_true(remote);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "abc", 3), 3);                      /* open for writing */
        assert_int_equal(pread(fd, buf, 3, 0), 3);
        assert_memory_equal(buf, "abc", 3);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
        child = serve(sv[1], ENOENT, "DynamicProfileNpuShm2026112910");
        assert_int_equal(npf_shmopen_ask(sv[0], "DynamicProfileNpuShm2026112910", &fd, &remote), -ENOENT);
        assert_int_equal(child_status(child), 0);
        assert_true(remote);
        assert_int_equal(fd, -1);
        close(sv[0]);
        close(sv[1]);
}

/* What a peer may send that is no request: too long, a NUL inside, the end. */
static void test_bad_requests(void **state)
{
        char name[NPF_SHMOPEN_NAME_MAX + 1], big[200];
        int sv[2];

        (void) state;
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        memset(big, 'a', sizeof(big));
        assert_int_equal(send(sv[0], big, sizeof(big), 0), (ssize_t) sizeof(big));
        assert_int_equal(npf_shmopen_read_request(sv[1], name), -EMSGSIZE);
        assert_int_equal(send(sv[0], "DynamicProfileShm2026112909\0/../x", 34, 0), 34);
        assert_int_equal(npf_shmopen_read_request(sv[1], name), -EINVAL);
        assert_int_equal(send(sv[0], "DynamicProfileShm2026112909", 27, 0), 27);
        assert_int_equal(npf_shmopen_read_request(sv[1], name), 1);    /* the connection goes on */
        close(sv[0]);
        assert_int_equal(npf_shmopen_read_request(sv[1], name), 0);
        close(sv[1]);
}

/* What an opener may answer that is no answer: the daemon drops the connection, no descriptor leaks. */
static void test_bad_answers(void **state)
{
        int sv[2], fd;
        bool remote;
        int32_t neg = -5;

        (void) state;
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        assert_int_equal(send(sv[1], "xy", 2, 0), 2);                  /* too short */
        assert_int_equal(npf_shmopen_ask(sv[0], "DynamicProfileShm2026112909", &fd, &remote), -EPROTO);
        assert_false(remote);
        assert_int_equal(send(sv[1], &neg, sizeof(neg), 0), (ssize_t) sizeof(neg));
        assert_int_equal(npf_shmopen_ask(sv[0], "DynamicProfileShm2026112909", &fd, &remote), -EPROTO);
        int32_t zero = 0;                                               /* success without a descriptor */
        assert_int_equal(send(sv[1], &zero, sizeof(zero), 0), (ssize_t) sizeof(zero));
        assert_int_equal(npf_shmopen_ask(sv[0], "DynamicProfileShm2026112909", &fd, &remote), -EPROTO);
        assert_int_equal(fd, -1);
        close(sv[1]);                                                   /* the opener is gone */
        int r = npf_shmopen_ask(sv[0], "DynamicProfileShm2026112909", &fd, &remote);
        assert_true(r == -EPIPE || r == -ECONNRESET);
        assert_false(remote);
        close(sv[0]);
}

static void test_connect(void **state)
{
        (void) state;
        assert_int_equal(npf_shmopen_connect("/nonexistent/npuprof-shmopen.sock"), -ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_descriptor),
                cmocka_unit_test(test_bad_requests),
                cmocka_unit_test(test_bad_answers),
                cmocka_unit_test(test_connect),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
