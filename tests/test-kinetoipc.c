/* SPDX-License-Identifier: MIT */
/*
 * libkineto's side of npuprofd's kineto endpoint, without a socket:
 *
 *   lib/kinetoipc   the datagrams of dynolog's IPC fabric, built here byte by byte as
 *                   libkineto builds them (FabricManager.h:30-35, 70-85, 120-122 and
 *                   Utils.h:15-34 of libkineto/third_party/dynolog_headers/.../ipcfabric/;
 *                   IpcFabricConfigClient.cpp:161-174), parsed, refused, answered;
 *   conf/kineto     the window in force said as libkineto's configuration text, every line
 *                   of it read back as libkineto's parser reads it (AbstractConfig.cpp:134-182),
 *                   and where libkineto writes the trace of a process (Config.cpp:361-381).
 */
#include "conf/kineto.h"
#include "lib/kinetoipc.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <cmocka.h>

/* --- libkineto's structs, as its copy of dynolog's headers declares them --------------- */

/* FabricManager.h:30-35: struct Metadata { size_t size = 0; char type[TYPE_SIZE] = ""; }; */
struct lk_metadata {
        size_t size;
        char type[32];
};
/* Utils.h:25-34: struct LibkinetoRequest { int type; int n; int64_t jobid; int32_t pids[]; }; */
struct lk_request {
        int type;
        int n;
        int64_t jobid;
        int32_t pids[];
};
/* Utils.h:15-22: struct LibkinetoContext { int32_t gpu; pid_t pid; int64_t jobid; }; */
struct lk_context {
        int32_t gpu;
        pid_t pid;
        int64_t jobid;
};

_Static_assert(sizeof(struct lk_metadata) == NPF_KINETO_HEADER_SIZE, "Metadata is the 40-byte header");
_Static_assert(offsetof(struct lk_metadata, type) == 8, "type at 8");
_Static_assert(sizeof(((struct lk_metadata *) 0)->type) == NPF_KINETO_TYPE_SIZE, "type[32]");
_Static_assert(sizeof(struct lk_request) == 16 && offsetof(struct lk_request, n) == 4 &&
               offsetof(struct lk_request, jobid) == 8 && offsetof(struct lk_request, pids) == 16, "LibkinetoRequest");
_Static_assert(sizeof(struct lk_context) == 16 && offsetof(struct lk_context, pid) == 4 &&
               offsetof(struct lk_context, jobid) == 8, "LibkinetoContext");

/* --- datagrams, byte by byte ----------------------------------------------------------- */

#define DGRAM_CAP (NPF_KINETO_DATAGRAM_MAX + 64)

static void put32(unsigned char *p, int32_t v)
{
        memcpy(p, &v, sizeof(v));               /* the sender's byte order: the struct is memcpy'd */
}

static void put64(unsigned char *p, uint64_t v)
{
        memcpy(p, &v, sizeof(v));
}

/* The header: u64 size at 0, char type[32] at 8, "type" then NULs (FabricManager.h:43,74:
 * memcpy(type, s.c_str(), s.size() + 1) into a value-initialised Metadata). */
static void header(unsigned char *buf, uint64_t size, const char *type)
{
        put64(buf, size);
        memset(buf + 8, 0, NPF_KINETO_TYPE_SIZE);
        memcpy(buf + 8, type, strlen(type) + 1);
}

/* A "req" of @n_given pids whose field n says @n: {int32 type, int32 n, int64 jobid, int32 pids[]}. */
static size_t req(unsigned char *buf, int32_t config_type, int32_t n, int64_t jobid, const int32_t *pids,
                  size_t n_given)
{
        size_t size = 16 + 4 * n_given;

        header(buf, size, "req");
        put32(buf + 40, config_type);
        put32(buf + 44, n);
        put64(buf + 48, (uint64_t) jobid);
        for (size_t i = 0; i < n_given; i++)
                put32(buf + 56 + 4 * i, pids[i]);
        return NPF_KINETO_HEADER_SIZE + size;
}

static size_t ctxt(unsigned char *buf, int32_t gpu, int32_t pid, int64_t jobid)
{
        header(buf, 16, "ctxt");
        put32(buf + 40, gpu);
        put32(buf + 44, pid);
        put64(buf + 48, (uint64_t) jobid);
        return 56;
}

/* A real poll: pids[0] the process, then its ancestors up to (not including) pid 1. */
static const int32_t six_pids[6] = { 12445, 12444, 12398, 12001, 873, 2 };

/* Assert -EBADMSG, and a reason that says @says. */
static void refused(const void *buf, size_t len, const char *says)
{
        npf_kineto_msg_t m;
        char why[128] = "";

        assert_int_equal(npf_kineto_parse(buf, len, &m, why, sizeof(why)), -EBADMSG);
        if (!strstr(why, says))
                fail_msg("the reason \"%s\" does not say \"%s\"", why, says);
}

/* --- npf_kineto_parse ------------------------------------------------------------------- */

static void test_parse_request(void **state)
{
        unsigned char buf[DGRAM_CAP];
        npf_kineto_msg_t m;
        char why[128];
        (void) state;

        size_t len = req(buf, NPF_KINETO_ACTIVITIES, 6, 4242, six_pids, 6);
        assert_int_equal(len, 80);              /* as the protocol notes saw it: len=80 hdr.size=40 */
        assert_memory_equal(buf + 8, "req\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 32);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        assert_memory_equal(buf, "\x28\0\0\0\0\0\0\0", 8);
        assert_memory_equal(buf + 40, "\x02\0\0\0\x06\0\0\0\x92\x10\0\0\0\0\0\0\x9d\x30\0\0", 20);
#endif
        /* The same bytes as libkineto's own code makes them: malloc(sizeof(LibkinetoRequest) + 4n). */
        struct lk_request *r = calloc(1, sizeof(*r) + 6 * sizeof(int32_t));
        unsigned char lk[80];
        struct lk_metadata md = { 0 };
        assert_non_null(r);
        r->type = NPF_KINETO_ACTIVITIES;
        r->n = 6;
        r->jobid = 4242;
        memcpy(r->pids, six_pids, sizeof(six_pids));
        md.size = sizeof(*r) + 6 * sizeof(int32_t);
        memcpy(md.type, "req", 4);
        memcpy(lk, &md, sizeof(md));
        memcpy(lk + sizeof(md), r, md.size);
        free(r);
        assert_memory_equal(lk, buf, sizeof(lk));

        memset(&m, 0x55, sizeof(m));
        assert_int_equal(npf_kineto_parse(buf, len, &m, why, sizeof(why)), 0);
        assert_int_equal(m.kind, NPF_KINETO_REQ);
        assert_int_equal(m.config_type, NPF_KINETO_ACTIVITIES);
        assert_int_equal(m.jobid, 4242);
        assert_int_equal(m.n_pids, 6);
        for (unsigned i = 0; i < 6; i++)
                assert_int_equal(m.pids[i], six_pids[i]);
        assert_int_equal(m.pids[6], 0);         /* nothing past n */

        /* A poll while a trace runs (type 0), a 64-bit job id, one pid: what libkineto also sends. */
        len = req(buf, 0, 1, (INT64_C(1) << 40) + 7, six_pids, 1);
        assert_int_equal(npf_kineto_parse(buf, len, &m, NULL, 0), 0);
        assert_int_equal(m.kind, NPF_KINETO_REQ);
        assert_int_equal(m.config_type, 0);
        assert_true(m.jobid == (INT64_C(1) << 40) + 7);
        assert_int_equal(m.n_pids, 1);
        assert_int_equal(m.pids[0], 12445);

        /* As many pids as this side takes. */
        int32_t many[NPF_KINETO_PIDS_MAX];
        for (unsigned i = 0; i < NPF_KINETO_PIDS_MAX; i++)
                many[i] = (int32_t) (1000 + i);
        len = req(buf, NPF_KINETO_EVENTS | NPF_KINETO_ACTIVITIES, NPF_KINETO_PIDS_MAX, 0, many, NPF_KINETO_PIDS_MAX);
        assert_int_equal(npf_kineto_parse(buf, len, &m, why, sizeof(why)), 0);
        assert_int_equal(m.config_type, 3);
        assert_int_equal(m.n_pids, NPF_KINETO_PIDS_MAX);
        assert_int_equal(m.pids[NPF_KINETO_PIDS_MAX - 1], 1000 + NPF_KINETO_PIDS_MAX - 1);
}

/* n == 0 is well-formed: the daemon answers nothing to it, as dynolog (IPCMonitor.cpp:76-79). */
static void test_parse_no_pids(void **state)
{
        unsigned char buf[DGRAM_CAP];
        npf_kineto_msg_t m;
        char why[128];
        (void) state;

        size_t len = req(buf, NPF_KINETO_ACTIVITIES, 0, 7, NULL, 0);
        assert_int_equal(len, 56);
        assert_int_equal(npf_kineto_parse(buf, len, &m, why, sizeof(why)), 0);
        assert_int_equal(m.kind, NPF_KINETO_REQ);
        assert_int_equal(m.n_pids, 0);
        assert_int_equal(m.jobid, 7);
}

static void test_parse_context(void **state)
{
        unsigned char buf[DGRAM_CAP];
        npf_kineto_msg_t m;
        char why[128];
        (void) state;

        size_t len = ctxt(buf, 3, 777, 99);
        /* libkineto's registerInstance(): a LibkinetoContext of 16 bytes, type "ctxt". */
        struct lk_context c = { .gpu = 3, .pid = 777, .jobid = 99 };
        assert_memory_equal(buf + 40, &c, sizeof(c));
        assert_memory_equal(buf + 8, "ctxt\0\0\0\0", 8);
        assert_int_equal(npf_kineto_parse(buf, len, &m, why, sizeof(why)), 0);
        assert_int_equal(m.kind, NPF_KINETO_CTXT);
        assert_int_equal(m.gpu, 3);
        assert_int_equal(m.pid, 777);
        assert_int_equal(m.jobid, 99);

        len = ctxt(buf, 0, 0, 99);
        refused(buf, len, "pid 0");
}

static void test_parse_short(void **state)
{
        unsigned char buf[DGRAM_CAP];
        (void) state;

        size_t len = req(buf, 2, 6, 0, six_pids, 6);
        refused(buf, NPF_KINETO_HEADER_SIZE - 1, "shorter than the 40-byte header");
        refused(buf, 0, "a datagram of 0 bytes");
        /* The header whole, its payload cut: the size says more than came. */
        refused(buf, len - 4, "its header says 40 bytes of payload, the datagram has 36");
}

static void test_parse_size_disagrees(void **state)
{
        unsigned char buf[DGRAM_CAP];
        (void) state;

        size_t len = req(buf, 2, 6, 0, six_pids, 6);
        put64(buf, 41);                                          /* says more than there is */
        refused(buf, len, "its header says 41 bytes of payload, the datagram has 40");
        put64(buf, 39);                                          /* says less */
        refused(buf, len, "its header says 39 bytes of payload, the datagram has 40");
        put64(buf, UINT64_MAX);                                  /* no wrap-around */
        refused(buf, len, "its header says");
        put64(buf, (uint64_t) len);                              /* the datagram's length, header included */
        refused(buf, len, "its header says 80 bytes");
        /* A trailing byte beyond a correct request. */
        len = req(buf, 2, 6, 0, six_pids, 6);
        buf[len] = 0;
        refused(buf, len + 1, "its header says 40 bytes of payload, the datagram has 41");
}

static void test_parse_bad_request(void **state)
{
        unsigned char buf[DGRAM_CAP];
        int32_t pids[NPF_KINETO_PIDS_MAX + 1];
        (void) state;

        /* Shorter than {type, n, jobid}: 12 bytes. */
        header(buf, 12, "req");
        put32(buf + 40, 2);
        put32(buf + 44, 0);
        put32(buf + 48, 0);
        refused(buf, 52, "a request of 12 bytes, shorter than its 16 fixed ones");
        header(buf, 0, "req");
        refused(buf, 40, "a request of 0 bytes");

        /* n negative. */
        size_t len = req(buf, 2, -1, 0, NULL, 0);
        refused(buf, len, "a request for -1 pids");
        len = req(buf, 2, INT32_MIN, 0, NULL, 0);
        refused(buf, len, "a request for -2147483648 pids");

        /* n beyond NPF_KINETO_PIDS_MAX, the size agreeing with it. */
        for (unsigned i = 0; i < NPF_KINETO_PIDS_MAX + 1; i++)
                pids[i] = (int32_t) (100 + i);
        len = req(buf, 2, NPF_KINETO_PIDS_MAX + 1, 0, pids, NPF_KINETO_PIDS_MAX + 1);
        refused(buf, len, "a request for 65 pids (0 to 64)");
        len = req(buf, 2, INT32_MAX, 0, pids, 2);
        refused(buf, len, "a request for 2147483647 pids");

        /* n disagreeing with the size, both ways. */
        len = req(buf, 2, 6, 0, six_pids, 5);
        refused(buf, len, "a request for 6 pids in 36 bytes, not 40");
        int32_t seven[7] = { 12445, 12444, 12398, 12001, 873, 2, 3 };
        len = req(buf, 2, 6, 0, seven, 7);
        refused(buf, len, "a request for 6 pids in 44 bytes, not 40");
        len = req(buf, 2, 0, 0, six_pids, 1);
        refused(buf, len, "a request for 0 pids in 20 bytes, not 16");

        /* A pid that no process has. */
        int32_t bad[6];
        memcpy(bad, six_pids, sizeof(bad));
        bad[3] = 0;
        len = req(buf, 2, 6, 0, bad, 6);
        refused(buf, len, "pid 3 of the request is 0");
        memcpy(bad, six_pids, sizeof(bad));
        bad[0] = -5;
        len = req(buf, 2, 6, 0, bad, 6);
        refused(buf, len, "pid 0 of the request is -5");
        memcpy(bad, six_pids, sizeof(bad));
        bad[5] = INT32_MIN;
        len = req(buf, 2, 6, 0, bad, 6);
        refused(buf, len, "pid 5 of the request is -2147483648");
}

static void test_parse_bad_type(void **state)
{
        unsigned char buf[DGRAM_CAP];
        npf_kineto_msg_t m;
        char why[128] = "";
        (void) state;

        /* 32 bytes of type and no NUL among them: "req" then 29 letters, and all letters. */
        size_t len = req(buf, 2, 6, 0, six_pids, 6);
        memset(buf + 8 + 3, 'x', NPF_KINETO_TYPE_SIZE - 3);
        refused(buf, len, "its type is not a NUL-terminated name");
        memset(buf + 8, 'r', NPF_KINETO_TYPE_SIZE);
        refused(buf, len, "its type is not a NUL-terminated name");

        /* A registration of the wrong size. */
        len = ctxt(buf, 0, 777, 1);
        put64(buf, 15);
        refused(buf, len - 1, "a registration of 15 bytes, not 16");
        len = ctxt(buf, 0, 777, 1);
        put64(buf, 20);
        memset(buf + len, 0, 4);
        refused(buf, len + 4, "a registration of 20 bytes, not 16");
        header(buf, 0, "ctxt");
        refused(buf, 40, "a registration of 0 bytes, not 16");

        /* A well-formed message of a type libkineto never sends: not answered, not malformed. */
        header(buf, 8, "what");
        memset(buf + 40, 0, 8);
        assert_int_equal(npf_kineto_parse(buf, 48, &m, why, sizeof(why)), -ENOMSG);
        assert_non_null(strstr(why, "\"what\""));
        header(buf, 0, "");
        assert_int_equal(npf_kineto_parse(buf, 40, &m, why, sizeof(why)), -ENOMSG);
        /* The whole name, not a prefix of it (dynolog compares 3 bytes; libkineto sends "req" exactly). */
        len = req(buf, 2, 6, 0, six_pids, 6);
        memcpy(buf + 8, "reqs", 5);
        assert_int_equal(npf_kineto_parse(buf, len, &m, why, sizeof(why)), -ENOMSG);
        memcpy(buf + 8, "re\0", 3);
        assert_int_equal(npf_kineto_parse(buf, len, &m, why, sizeof(why)), -ENOMSG);
}

static void test_parse_long(void **state)
{
        npf_kineto_msg_t m;
        char why[128] = "";
        (void) state;

        /* The longest datagram read whole: an unknown type, so it is dropped, not refused. */
        unsigned char *buf = calloc(1, NPF_KINETO_DATAGRAM_MAX + 1);
        assert_non_null(buf);
        header(buf, NPF_KINETO_DATAGRAM_MAX - NPF_KINETO_HEADER_SIZE, "what");
        assert_int_equal(npf_kineto_parse(buf, NPF_KINETO_DATAGRAM_MAX, &m, why, sizeof(why)), -ENOMSG);
        /* One byte more, the header agreeing. */
        header(buf, NPF_KINETO_DATAGRAM_MAX + 1 - NPF_KINETO_HEADER_SIZE, "what");
        refused(buf, NPF_KINETO_DATAGRAM_MAX + 1, "a datagram of 4097 bytes, longer than any request (4096 at most)");
        free(buf);

        /* The length as received, beyond what was read: nothing past the 4096 bytes read is looked at
         * (ASan says so if it were). */
        buf = malloc(NPF_KINETO_DATAGRAM_MAX);
        assert_non_null(buf);
        size_t len = req(buf, 2, 6, 0, six_pids, 6);
        (void) len;
        refused(buf, 70000, "a datagram of 70000 bytes, longer than any request");
        free(buf);
}

/* The reason is a C string whatever buffer it is given, or none at all. */
static void test_parse_why_buffer(void **state)
{
        unsigned char buf[DGRAM_CAP];
        npf_kineto_msg_t m;
        char why[8];
        (void) state;

        size_t len = req(buf, 2, -1, 0, NULL, 0);
        memset(why, 'x', sizeof(why));
        assert_int_equal(npf_kineto_parse(buf, len, &m, why, sizeof(why)), -EBADMSG);
        assert_non_null(memchr(why, '\0', sizeof(why)));
        assert_int_equal(npf_kineto_parse(buf, len, &m, NULL, 0), -EBADMSG);
        assert_int_equal(npf_kineto_parse(buf, 3, &m, NULL, 0), -EBADMSG);
        header(buf, 0, "what");
        assert_int_equal(npf_kineto_parse(buf, 40, &m, NULL, 0), -ENOMSG);
}

/* --- npf_kineto_message ----------------------------------------------------------------- */

static void test_message(void **state)
{
        unsigned char buf[256];
        const char *text = "ACTIVITIES_LOG_FILE=/tmp/x.json\nACTIVITIES_DURATION_MSECS=500\n";
        size_t n = strlen(text);
        uint64_t size;
        (void) state;

        /* An answer to "req": the configuration text, without its NUL. */
        memset(buf, 0xaa, sizeof(buf));
        assert_int_equal(npf_kineto_message(buf, sizeof(buf), "req", text, n), 40 + n);
        memcpy(&size, buf, sizeof(size));
        assert_int_equal(size, n);
        assert_memory_equal(buf + 8, "req", 3);
        for (unsigned i = 8 + 3; i < 40; i++)
                assert_int_equal(buf[i], 0);
        assert_memory_equal(buf + 40, text, n);
        assert_int_equal(buf[40 + n], 0xaa);            /* nothing written past it */
        /* It is what libkineto's recv reads: a Metadata, then size bytes. */
        struct lk_metadata md;
        memcpy(&md, buf, sizeof(md));
        assert_int_equal(md.size, n);
        assert_string_equal(md.type, "req");

        /* Nothing to say: exactly the header, size 0. */
        memset(buf, 0xaa, sizeof(buf));
        assert_int_equal(npf_kineto_message(buf, sizeof(buf), "req", NULL, 0), 40);
        memcpy(&size, buf, sizeof(size));
        assert_int_equal(size, 0);
        assert_memory_equal(buf + 8, "req\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 32);
        assert_int_equal(buf[40], 0xaa);
        assert_int_equal(npf_kineto_message(buf, 40, "req", "", 0), 40);      /* a buffer of the header alone */

        /* The answer to "ctxt": an int32. */
        int32_t count = 3;
        assert_int_equal(npf_kineto_message(buf, sizeof(buf), "ctxt", &count, sizeof(count)), 44);
        assert_memory_equal(buf + 8, "ctxt\0", 5);
        assert_memory_equal(buf + 40, &count, 4);

        /* The longest type: 31 bytes and its NUL. One more does not fit. */
        char type[33];
        memset(type, 't', 31);
        type[31] = '\0';
        assert_int_equal(npf_kineto_message(buf, sizeof(buf), type, NULL, 0), 40);
        assert_memory_equal(buf + 8, type, 31);
        assert_int_equal(buf[39], 0);
        memset(type, 't', 32);
        type[32] = '\0';
        assert_int_equal(npf_kineto_message(buf, sizeof(buf), type, NULL, 0), 0);

        /* A payload too long for the buffer, by one byte; and one that just fits. */
        assert_int_equal(npf_kineto_message(buf, 40 + n - 1, "req", text, n), 0);
        assert_int_equal(npf_kineto_message(buf, 40 + n, "req", text, n), 40 + n);
        assert_int_equal(npf_kineto_message(buf, 39, "req", NULL, 0), 0);
        assert_int_equal(npf_kineto_message(buf, 0, "req", NULL, 0), 0);
        assert_int_equal(npf_kineto_message(buf, 50, "req", text, SIZE_MAX), 0);      /* no wrap-around */
}

/* What npf_kineto_message makes of a parsed request is the request. */
static void test_message_round_trip(void **state)
{
        unsigned char in[DGRAM_CAP], out[DGRAM_CAP], payload[16 + 4 * 6];
        npf_kineto_msg_t m;
        (void) state;

        size_t len = req(in, NPF_KINETO_ACTIVITIES, 6, -3, six_pids, 6);
        assert_int_equal(npf_kineto_parse(in, len, &m, NULL, 0), 0);
        put32(payload, m.config_type);
        put32(payload + 4, (int32_t) m.n_pids);
        put64(payload + 8, (uint64_t) m.jobid);
        for (unsigned i = 0; i < m.n_pids; i++)
                put32(payload + 16 + 4 * i, m.pids[i]);
        assert_int_equal(npf_kineto_message(out, sizeof(out), "req", payload, sizeof(payload)), len);
        assert_memory_equal(out, in, len);
}

/* --- npf_kineto_address ----------------------------------------------------------------- */

static void test_address(void **state)
{
        struct sockaddr_un sa;
        socklen_t len = 0;
        (void) state;

        /* Abstract: "\0dynolog\0", the trailing NUL part of the name (Endpoint.h:231-238). */
        memset(&sa, 0xaa, sizeof(sa));
        assert_int_equal(npf_kineto_address(NULL, &sa, &len), 0);
        assert_int_equal(sa.sun_family, AF_UNIX);
        assert_memory_equal(sa.sun_path, "\0dynolog\0", 9);
        assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + 9);
#ifdef __linux__
        assert_int_equal(len, 11);      /* sizeof(sa_family_t) + strlen("dynolog") + 2 */
#endif
        for (size_t i = 9; i < sizeof(sa.sun_path); i++)
                assert_int_equal(sa.sun_path[i], 0);
        len = 0;
        assert_int_equal(npf_kineto_address("", &sa, &len), 0);        /* KINETO_IPC_SOCKET_DIR= */
        assert_memory_equal(sa.sun_path, "\0dynolog\0", 9);
        assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + 9);

        /* KINETO_IPC_SOCKET_DIR: DIR/dynolog, NUL-terminated, the NUL counted (Endpoint.h:224-230). */
        memset(&sa, 0xaa, sizeof(sa));
        assert_int_equal(npf_kineto_address("/run/npuprof", &sa, &len), 0);
        assert_int_equal(sa.sun_family, AF_UNIX);
        assert_string_equal(sa.sun_path, "/run/npuprof/dynolog");
        assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + strlen("/run/npuprof/dynolog") + 1);

        /* The longest directory whose DIR/dynolog and NUL fill sun_path; one byte more does not fit. */
        char dir[sizeof(sa.sun_path)];
        size_t most = sizeof(sa.sun_path) - 1 - strlen("/dynolog");
        memset(dir, 'd', most);
        dir[0] = '/';
        dir[most] = '\0';
        assert_int_equal(npf_kineto_address(dir, &sa, &len), 0);
        assert_int_equal(strlen(sa.sun_path), sizeof(sa.sun_path) - 1);
        assert_int_equal(len, sizeof(struct sockaddr_un));
        dir[most] = 'd';
        dir[most + 1] = '\0';
        assert_int_equal(npf_kineto_address(dir, &sa, &len), -ENAMETOOLONG);
        char huge[1024];
        memset(huge, 'h', sizeof(huge) - 1);
        huge[sizeof(huge) - 1] = '\0';
        assert_int_equal(npf_kineto_address(huge, &sa, &len), -ENAMETOOLONG);
}

/* --- npf_kineto_config_text ------------------------------------------------------------- */

/* The keys libkineto's Config knows (libkineto/src/Config.cpp:52-151) that the text may hold. */
static const char *const known_keys[] = {
        "ACTIVITIES_LOG_FILE", "PROFILE_START_ITERATION", "PROFILE_START_ITERATION_ROUNDUP",
        "ACTIVITIES_WARMUP_ITERATIONS", "ACTIVITIES_ITERATIONS", "PROFILE_START_TIME", "ACTIVITIES_DURATION_MSECS",
        "PROFILE_REPORT_INPUT_SHAPES", "PROFILE_PROFILE_MEMORY", "PROFILE_WITH_STACK", "PROFILE_WITH_FLOPS",
        "PROFILE_WITH_MODULES", "REQUEST_TRACE_ID", "REQUEST_GROUP_TRACE_ID", "ACTIVITY_TYPES",
};

/* libkineto/include/ActivityType.h:80-110: a name outside it stops libkineto's parse. */
static const char *const activity_names[] = {
        "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset", "kernel",
        "external_correlation", "cuda_runtime", "cuda_driver", "cpu_instant_event", "python_function",
};

/*
 * Read @text as AbstractConfig::parse() (libkineto/src/AbstractConfig.cpp:134-182) does: lines
 * split on '\n', '#' starts a comment, each line split on '=' into exactly two parts (else
 * "Invalid config line" and the rest is lost), keys and values trimmed of " \t\n" only (so a
 * '\r' stays). Here every line must come through whole: one '=', no '#', no '\r', no blank line,
 * a known key, a value. The text ends with a newline.
 */
static void assert_libkineto_reads(const char *text)
{
        const char *line = text;

        assert_true(text[0] != '\0');
        assert_int_equal(text[strlen(text) - 1], '\n');
        while (*line) {
                const char *end = strchr(line, '\n');
                size_t n = (size_t) (end - line);
                char copy[NPF_KINETO_TEXT_MAX];
                assert_non_null(end);
                assert_true(n > 0 && n < sizeof(copy));
                memcpy(copy, line, n);
                copy[n] = '\0';
                if (strchr(copy, '#') || strchr(copy, '\r'))
                        fail_msg("libkineto would cut the line \"%s\"", copy);
                char *eq = strchr(copy, '=');
                if (!eq || strchr(eq + 1, '='))
                        fail_msg("the line \"%s\" is not one KEY=VALUE", copy);
                *eq = '\0';
                bool known = false;
                for (size_t i = 0; i < sizeof(known_keys) / sizeof(known_keys[0]); i++)
                        known |= strcmp(copy, known_keys[i]) == 0;
                if (!known)
                        fail_msg("the key \"%s\" is not one libkineto's Config knows", copy);
                if (eq[1] == '\0' || eq[1] == ' ' || eq[1] == '\t')
                        fail_msg("the value of %s is empty or would be trimmed", copy);
                if (!strcmp(copy, "ACTIVITY_TYPES")) {
                        char *save = NULL;
                        for (char *a = strtok_r(eq + 1, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
                                bool ok = false;
                                for (size_t i = 0; i < sizeof(activity_names) / sizeof(activity_names[0]); i++)
                                        ok |= strcmp(a, activity_names[i]) == 0;
                                if (!ok)
                                        fail_msg("libkineto knows no activity type \"%s\"", a);
                        }
                }
                line = end + 1;
        }
}

/* The value of @key in @text (a static copy), or NULL when no line has it. */
static const char *value_of(const char *text, const char *key)
{
        static char value[NPF_KINETO_TEXT_MAX];
        size_t k = strlen(key);

        for (const char *line = text; *line; line = strchr(line, '\n') + 1) {
                if (!strncmp(line, key, k) && line[k] == '=') {
                        size_t n = strcspn(line + k + 1, "\n");
                        memcpy(value, line + k + 1, n);
                        value[n] = '\0';
                        return value;
                }
                if (!strchr(line, '\n'))
                        break;
        }
        return NULL;
}

/* The @i-th line of @text (a static copy), from 0; the last when @i is -1. */
static const char *line_of(const char *text, int i)
{
        static char line[NPF_KINETO_TEXT_MAX];
        int count = 0;

        for (const char *p = text; *p; p = strchr(p, '\n') + 1)
                count++;
        if (i < 0)
                i = count + i;
        const char *p = text;
        for (int j = 0; j < i && *p; j++)
                p = strchr(p, '\n') + 1;
        size_t n = strcspn(p, "\n");
        memcpy(line, p, n);
        line[n] = '\0';
        return line;
}

static npf_shm_args_t step_window(int64_t start, int64_t stop, uint64_t warmup)
{
        npf_shm_args_t a;

        memset(&a, 0, sizeof(a));
        a.enabled = 1;
        a.start_step = start;
        a.stop_step = stop;
        a.step_count = (uint64_t) (stop - start + 1);
        a.warmup = warmup;
        a.activities = NPF_ACT_CPU | NPF_ACT_NPU;
        a.backend = NPF_BACKEND_KINETO;
        return a;
}

static const npf_kineto_target_t target = {
        .log_file = "/tmp/npuprof/w7/kineto.pt.trace.json",
        .trace_id = "npuprof-7-12445",
        .group_id = "npuprof-7",
        .start_unix_ms = UINT64_C(1767225600123),
};

/* The text of @a for @t, read back as libkineto reads it. */
static const char *text_of(const npf_shm_args_t *a, const npf_kineto_target_t *t)
{
        static char buf[NPF_KINETO_TEXT_MAX];
        char err[256] = "";
        int n = npf_kineto_config_text(a, t, buf, sizeof(buf), err, sizeof(err));

        if (n < 0)
                fail_msg("npf_kineto_config_text: %d: %s", n, err);
        assert_int_equal((size_t) n, strlen(buf));
        assert_libkineto_reads(buf);
        return buf;
}

static void test_config_steps(void **state)
{
        (void) state;
        npf_shm_args_t a = step_window(100, 104, 0);

        /* dyno gputrace's order (gputrace.rs:30-51): the file, the window, the switches; then the ids. */
        assert_string_equal(text_of(&a, &target),
                            "ACTIVITIES_LOG_FILE=/tmp/npuprof/w7/kineto.pt.trace.json\n"
                            "PROFILE_START_ITERATION=100\n"
                            "ACTIVITIES_WARMUP_ITERATIONS=0\n"
                            "ACTIVITIES_ITERATIONS=5\n"
                            "PROFILE_REPORT_INPUT_SHAPES=false\n"
                            "PROFILE_PROFILE_MEMORY=false\n"
                            "PROFILE_WITH_STACK=false\n"
                            "PROFILE_WITH_FLOPS=false\n"
                            "PROFILE_WITH_MODULES=false\n"
                            "REQUEST_TRACE_ID=npuprof-7-12445\n"
                            "REQUEST_GROUP_TRACE_ID=npuprof-7\n");

        /* Warmup steps run the profiler and are not kept: the kept ones still end at step 104. */
        a = step_window(100, 104, 2);
        const char *text = text_of(&a, &target);
        assert_string_equal(value_of(text, "PROFILE_START_ITERATION"), "102");
        assert_string_equal(value_of(text, "ACTIVITIES_WARMUP_ITERATIONS"), "2");
        assert_string_equal(value_of(text, "ACTIVITIES_ITERATIONS"), "3");
        assert_null(value_of(text, "PROFILE_START_ITERATION_ROUNDUP"));
        assert_null(value_of(text, "PROFILE_START_TIME"));
        assert_null(value_of(text, "ACTIVITIES_DURATION_MSECS"));

        /* start_at_multiple_of: libkineto rounds the start up (Config.cpp:424-425). */
        a = step_window(100, 104, 0);
        a.start_at_multiple_of = 10;
        text = text_of(&a, &target);
        assert_string_equal(value_of(text, "PROFILE_START_ITERATION_ROUNDUP"), "10");
        assert_string_equal(line_of(text, 1), "PROFILE_START_ITERATION=100");
        assert_string_equal(line_of(text, 2), "PROFILE_START_ITERATION_ROUNDUP=10");
        assert_string_equal(value_of(text, "ACTIVITIES_ITERATIONS"), "5");

        /* The next step: iteration 0, which libkineto, past it, moves to the next one. */
        a = step_window(NPF_STEP_NEXT, NPF_STEP_NONE, 0);
        a.step_count = 5;
        text = text_of(&a, &target);
        assert_string_equal(value_of(text, "PROFILE_START_ITERATION"), "0");
        assert_string_equal(value_of(text, "ACTIVITIES_ITERATIONS"), "5");
        a.warmup = 2;
        text = text_of(&a, &target);
        assert_string_equal(value_of(text, "PROFILE_START_ITERATION"), "0");
        assert_string_equal(value_of(text, "ACTIVITIES_WARMUP_ITERATIONS"), "2");
        assert_string_equal(value_of(text, "ACTIVITIES_ITERATIONS"), "3");
}

static void test_config_time(void **state)
{
        (void) state;
        npf_shm_args_t a;

        memset(&a, 0, sizeof(a));
        a.enabled = 1;
        a.start_step = NPF_STEP_NEXT;
        a.stop_step = NPF_STEP_NONE;
        a.duration_ms = 500;
        a.start_at_multiple_of = 10;            /* a step's business: not said for a time window */
        a.activities = NPF_ACT_CPU | NPF_ACT_NPU;
        const char *text = text_of(&a, &target);
        assert_string_equal(line_of(text, 0), "ACTIVITIES_LOG_FILE=/tmp/npuprof/w7/kineto.pt.trace.json");
        assert_string_equal(line_of(text, 1), "PROFILE_START_TIME=1767225600123");
        assert_string_equal(line_of(text, 2), "ACTIVITIES_DURATION_MSECS=500");
        assert_null(value_of(text, "PROFILE_START_ITERATION"));
        assert_null(value_of(text, "PROFILE_START_ITERATION_ROUNDUP"));
        assert_null(value_of(text, "ACTIVITIES_WARMUP_ITERATIONS"));
        assert_null(value_of(text, "ACTIVITIES_ITERATIONS"));
        assert_string_equal(value_of(text, "REQUEST_TRACE_ID"), "npuprof-7-12445");
}

static void test_config_flags(void **state)
{
        static const struct {
                uint32_t flag;
                const char *key;
        } flags[] = {
                { NPF_FLAG_RECORD_SHAPES, "PROFILE_REPORT_INPUT_SHAPES" },
                { NPF_FLAG_PROFILE_MEMORY, "PROFILE_PROFILE_MEMORY" },
                { NPF_FLAG_WITH_STACK, "PROFILE_WITH_STACK" },
                { NPF_FLAG_WITH_FLOPS, "PROFILE_WITH_FLOPS" },
                { NPF_FLAG_WITH_MODULES, "PROFILE_WITH_MODULES" },
        };
        size_t n = sizeof(flags) / sizeof(flags[0]);
        (void) state;

        for (size_t i = 0; i < n; i++) {
                npf_shm_args_t a = step_window(100, 104, 0);
                a.flags = flags[i].flag | NPF_FLAG_L2_CACHE | NPF_FLAG_MSTX;   /* flags libkineto has no key for */
                const char *text = text_of(&a, &target);
                for (size_t j = 0; j < n; j++) {
                        const char *v = value_of(text, flags[j].key);
                        assert_non_null(v);
                        if (strcmp(v, i == j ? "true" : "false"))
                                fail_msg("flag %#x: %s=%s", flags[i].flag, flags[j].key, v);
                }
        }
        npf_shm_args_t a = step_window(100, 104, 0);
        a.flags = NPF_FLAG_RECORD_SHAPES | NPF_FLAG_PROFILE_MEMORY | NPF_FLAG_WITH_STACK | NPF_FLAG_WITH_FLOPS |
                  NPF_FLAG_WITH_MODULES;
        const char *text = text_of(&a, &target);
        for (size_t j = 0; j < n; j++)
                assert_string_equal(value_of(text, flags[j].key), "true");
}

static void test_config_activities(void **state)
{
        (void) state;
        npf_shm_args_t a = step_window(100, 104, 0);

        a.activities = NPF_ACT_CPU;
        const char *text = text_of(&a, &target);
        assert_string_equal(line_of(text, -1),
                            "ACTIVITY_TYPES=cpu_op,user_annotation,cpu_instant_event,python_function");
        a.activities = NPF_ACT_NPU;
        text = text_of(&a, &target);
        assert_string_equal(line_of(text, -1),
                            "ACTIVITY_TYPES=kernel,gpu_memcpy,gpu_memset,gpu_user_annotation,cuda_runtime");
        /* Both: libkineto's defaults, every type (Config.cpp:470-472); said by no key. */
        a.activities = NPF_ACT_CPU | NPF_ACT_NPU;
        text = text_of(&a, &target);
        assert_null(value_of(text, "ACTIVITY_TYPES"));
        assert_string_equal(line_of(text, -1), "REQUEST_GROUP_TRACE_ID=npuprof-7");
        /* The time window too: the types come last. */
        memset(&a, 0, sizeof(a));
        a.duration_ms = 500;
        a.activities = NPF_ACT_CPU;
        text = text_of(&a, &target);
        assert_string_equal(line_of(text, -1),
                            "ACTIVITY_TYPES=cpu_op,user_annotation,cpu_instant_event,python_function");
}

/* Assert -EINVAL for @t, with a message that says @says (NULL: anything). */
static void config_refused(const npf_kineto_target_t *t, const char *says)
{
        npf_shm_args_t a = step_window(100, 104, 0);
        char buf[NPF_KINETO_TEXT_MAX], err[512] = "";

        int r = npf_kineto_config_text(&a, t, buf, sizeof(buf), err, sizeof(err));

        if (r != -EINVAL)
                fail_msg("log file \"%s\", trace id \"%s\", group \"%s\": %d, not -EINVAL", t->log_file, t->trace_id,
                         t->group_id, r);
        assert_true(err[0] != '\0');
        if (says && !strstr(err, says))
                fail_msg("the message \"%s\" does not say \"%s\"", err, says);
}

static void test_config_refused(void **state)
{
        static const char *const unsayable[] = {
                "/tmp/a#b/t.json",              /* '#': the rest of the line a comment */
                "/tmp/a=b/t.json",              /* '=': three parts, an invalid line */
                "/tmp/a\nb/t.json",             /* a newline: two lines */
                "/tmp/a\rb/t.json",             /* '\r': kept by libkineto's trim */
                "/tmp/t.json\r",
        };
        (void) state;

        for (size_t i = 0; i < sizeof(unsayable) / sizeof(unsayable[0]); i++) {
                npf_kineto_target_t t = target;
                t.log_file = unsayable[i];
                config_refused(&t, unsayable[i]);
        }
        /* Where libkineto would not insert the pid at all. */
        npf_kineto_target_t t = target;
        t.log_file = "tmp/t.json";
        config_refused(&t, "tmp/t.json");
        t.log_file = "/out/trace";
        config_refused(&t, "/out/trace");
        t.log_file = "";
        config_refused(&t, NULL);

        /* The ids are values of lines too. */
        t = target;
        t.trace_id = "a=b";
        config_refused(&t, NULL);
        t = target;
        t.group_id = "g\nACTIVITIES_LOG_FILE=/tmp/elsewhere.json";
        config_refused(&t, NULL);

        /* And these are fine: the first ".json" ends them. */
        npf_shm_args_t a = step_window(1, 2, 0);
        t = target;
        t.log_file = "/out/w.d/rank-0.json";
        assert_string_equal(value_of(text_of(&a, &t), "ACTIVITIES_LOG_FILE"), "/out/w.d/rank-0.json");
        t.log_file = "/out/a.json.pt.trace.json";      /* ".pt.trace.json" comes first for libkineto */
        assert_non_null(text_of(&a, &t));
}

/*
 * A log file whose first ".json" (or ".pt.trace.json") does not end it: libkineto inserts the
 * pid there, in a directory's name or before a suffix (/out/x.json.d/t.json is written as
 * /out/x_<pid>.json.d/t.json, a directory nobody made), so the window's trace is lost.
 * conf/kineto.h says such a file is refused.
 */
static void test_config_json_ends_it(void **state)
{
        static const char *const files[] = {
                "/out/x.json.d/t.json", "/out/t.jsonl", "/out/t.json.bak", "/out/t.pt.trace.json.gz",
                "/out/a.pt.trace.json/w1/kineto.pt.trace.json",
        };
        (void) state;

        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                npf_kineto_target_t t = target;
                t.log_file = files[i];
                config_refused(&t, files[i]);
        }
}

/* An id that cannot be said is refused, and the message names it, not the log file. */
static void test_config_id_refused(void **state)
{
        npf_kineto_target_t t = target;
        (void) state;

        t.trace_id = "npuprof#7";
        config_refused(&t, "npuprof#7");
        t = target;
        t.group_id = "group=7";
        config_refused(&t, "group=7");
}

static void test_config_nospace(void **state)
{
        (void) state;
        npf_shm_args_t a = step_window(100, 104, 0);
        char buf[NPF_KINETO_TEXT_MAX], err[256];
        int n = npf_kineto_config_text(&a, &target, buf, sizeof(buf), err, sizeof(err));

        assert_true(n > 0);
        assert_int_equal(npf_kineto_config_text(&a, &target, buf, 10, err, sizeof(err)), -ENOSPC);
        assert_int_equal(npf_kineto_config_text(&a, &target, buf, (size_t) n, err, sizeof(err)), -ENOSPC);
        assert_int_equal(npf_kineto_config_text(&a, &target, buf, (size_t) n + 1, err, sizeof(err)), n);
        assert_int_equal(npf_kineto_config_text(&a, &target, buf, 0, err, sizeof(err)), -ENOSPC);
        /* The last line is the one that does not fit. */
        a.activities = NPF_ACT_NPU;
        n = npf_kineto_config_text(&a, &target, buf, sizeof(buf), err, sizeof(err));
        assert_true(n > 0);
        assert_int_equal(npf_kineto_config_text(&a, &target, buf, (size_t) n - 5, err, sizeof(err)), -ENOSPC);
}

/* --- npf_kineto_trace_name -------------------------------------------------------------- */

/*
 * libkineto's own rule, transcribed from libkineto/src/Config.cpp:361-381 (Config::handleOption,
 * ACTIVITIES_LOG_FILE):
 *
 *   activitiesLogUrl_ = fmt::format("file://{}", val);
 *   size_t jidx = activitiesLogUrl_.find(".pt.trace.json");
 *   if (jidx != std::string::npos) {
 *     activitiesLogUrl_.replace(jidx, 14, fmt::format("_{}.pt.trace.json", processId()));
 *   } else {
 *     jidx = activitiesLogUrl_.find(".json");
 *     if (jidx != std::string::npos)
 *       activitiesLogUrl_.replace(jidx, 5, fmt::format("_{}.json", processId()));
 *   }
 *
 * and the logger strips "file://" again (ActivityLoggerFactory.h:42-78).
 */
static void libkineto_trace_name(const char *val, int32_t pid, char *out, size_t len)
{
        char url[256];
        const char *at;
        int n = snprintf(url, sizeof(url), "file://%s", val);

        assert_true(n > 0 && (size_t) n < sizeof(url));
        if ((at = strstr(url, ".pt.trace.json")))
                n = snprintf(out, len, "%.*s_%d.pt.trace.json%s", (int) (at - url), url, pid, at + 14);
        else if ((at = strstr(url, ".json")))
                n = snprintf(out, len, "%.*s_%d.json%s", (int) (at - url), url, pid, at + 5);
        else
                n = snprintf(out, len, "%s", url);
        assert_true(n > 0 && (size_t) n < len);
        memmove(out, out + strlen("file://"), strlen(out) - strlen("file://") + 1);
}

static void test_trace_name(void **state)
{
        static const char *const paths[] = {
                "/o/kineto.pt.trace.json", "/o/t.json", "/o/a.json.d/b.json", "/o/a.json/b.pt.trace.json",
                "/o/trace", "/o/x.pt.trace.json.pt.trace.json", "/tmp/npuprof/w7/kineto.pt.trace.json",
                "/o/.json", "/o/t.pt.trace.jso", "/o/t.pt.json",
        };
        char buf[256], want[256];
        (void) state;

        assert_int_equal(npf_kineto_trace_name("/o/kineto.pt.trace.json", 42, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "/o/kineto_42.pt.trace.json");
        assert_int_equal(npf_kineto_trace_name("/o/t.json", 42, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "/o/t_42.json");

        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                int32_t pid = (int32_t) (12445 + i * 1000003 % 4000000);
                libkineto_trace_name(paths[i], pid, want, sizeof(want));
                assert_int_equal(npf_kineto_trace_name(paths[i], pid, buf, sizeof(buf)), 0);
                if (strcmp(buf, want))
                        fail_msg("%s, pid %d: \"%s\", libkineto writes \"%s\"", paths[i], pid, buf, want);
        }

        /* Too long, by one byte; and just long enough. */
        size_t n = strlen("/o/kineto_42.pt.trace.json");
        assert_int_equal(npf_kineto_trace_name("/o/kineto.pt.trace.json", 42, buf, n), -ENAMETOOLONG);
        assert_int_equal(npf_kineto_trace_name("/o/kineto.pt.trace.json", 42, buf, n + 1), 0);
        assert_string_equal(buf, "/o/kineto_42.pt.trace.json");
        assert_int_equal(npf_kineto_trace_name("/o/trace", 42, buf, strlen("/o/trace")), -ENAMETOOLONG);
        assert_int_equal(npf_kineto_trace_name("/o/t.json", INT32_MAX, buf, 8), -ENAMETOOLONG);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_request),
                cmocka_unit_test(test_parse_no_pids),
                cmocka_unit_test(test_parse_context),
                cmocka_unit_test(test_parse_short),
                cmocka_unit_test(test_parse_size_disagrees),
                cmocka_unit_test(test_parse_bad_request),
                cmocka_unit_test(test_parse_bad_type),
                cmocka_unit_test(test_parse_long),
                cmocka_unit_test(test_parse_why_buffer),
                cmocka_unit_test(test_message),
                cmocka_unit_test(test_message_round_trip),
                cmocka_unit_test(test_address),
                cmocka_unit_test(test_config_steps),
                cmocka_unit_test(test_config_time),
                cmocka_unit_test(test_config_flags),
                cmocka_unit_test(test_config_activities),
                cmocka_unit_test(test_config_refused),
                cmocka_unit_test(test_config_json_ends_it),
                cmocka_unit_test(test_config_id_refused),
                cmocka_unit_test(test_config_nospace),
                cmocka_unit_test(test_trace_name),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
