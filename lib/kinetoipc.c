/* SPDX-License-Identifier: MIT */
#include "lib/kinetoipc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The request structs' fixed parts, as libkineto lays them out (Utils.h:15-34). */
#define REQ_FIXED  16u                  /* int type, int n, int64_t jobid */
#define CTXT_SIZE  16u                  /* int32 gpu, pid_t pid, int64_t jobid */

static int bad(char *why, size_t len, const char *fmt, ...)
{
        va_list ap;

        if (why && len) {
                va_start(ap, fmt);
                vsnprintf(why, len, fmt, ap);
                va_end(ap);
        }
        return -EBADMSG;
}

static int32_t get32(const unsigned char *p)
{
        int32_t v;

        memcpy(&v, p, sizeof(v));
        return v;
}

static int64_t get64(const unsigned char *p)
{
        int64_t v;

        memcpy(&v, p, sizeof(v));
        return v;
}

/* Whether the type field @t names @name: its bytes, then a NUL (the sender copied a C string). */
static bool type_is(const char *t, const char *name)
{
        size_t n = strlen(name);

        return memcmp(t, name, n) == 0 && t[n] == '\0';
}

int npf_kineto_parse(const void *buf, size_t len, npf_kineto_msg_t *m, char *why, size_t why_len)
{
        const unsigned char *p = buf;
        char type[NPF_KINETO_TYPE_SIZE];
        uint64_t size;

        memset(m, 0, sizeof(*m));
        if (len < NPF_KINETO_HEADER_SIZE)
                return bad(why, why_len, "a datagram of %zu bytes, shorter than the %u-byte header", len,
                           NPF_KINETO_HEADER_SIZE);
        if (len > NPF_KINETO_DATAGRAM_MAX)
                return bad(why, why_len, "a datagram of %zu bytes, longer than any request (%u at most)", len,
                           NPF_KINETO_DATAGRAM_MAX);
        memcpy(&size, p, sizeof(size));
        memcpy(type, p + 8, sizeof(type));
        if (size != len - NPF_KINETO_HEADER_SIZE)
                return bad(why, why_len, "its header says %llu bytes of payload, the datagram has %zu",
                           (unsigned long long) size, len - NPF_KINETO_HEADER_SIZE);
        if (!memchr(type, '\0', sizeof(type)))
                return bad(why, why_len, "its type is not a NUL-terminated name");
        p += NPF_KINETO_HEADER_SIZE;

        if (type_is(type, "req")) {
                if (size < REQ_FIXED)
                        return bad(why, why_len, "a request of %llu bytes, shorter than its %u fixed ones",
                                   (unsigned long long) size, REQ_FIXED);
                int32_t n = get32(p + 4);
                if (n < 0 || (uint32_t) n > NPF_KINETO_PIDS_MAX)
                        return bad(why, why_len, "a request for %d pids (0 to %u)", n, NPF_KINETO_PIDS_MAX);
                if (size != REQ_FIXED + 4u * (uint32_t) n)
                        return bad(why, why_len, "a request for %d pids in %llu bytes, not %u", n,
                                   (unsigned long long) size, REQ_FIXED + 4u * (uint32_t) n);
                m->kind = NPF_KINETO_REQ;
                m->config_type = get32(p);
                m->jobid = get64(p + 8);
                m->n_pids = (uint32_t) n;
                for (uint32_t i = 0; i < m->n_pids; i++) {
                        m->pids[i] = get32(p + REQ_FIXED + 4 * i);
                        if (m->pids[i] <= 0)
                                return bad(why, why_len, "pid %u of the request is %d", i, m->pids[i]);
                }
                return 0;
        }
        if (type_is(type, "ctxt")) {
                if (size != CTXT_SIZE)
                        return bad(why, why_len, "a registration of %llu bytes, not %u", (unsigned long long) size,
                                   CTXT_SIZE);
                m->kind = NPF_KINETO_CTXT;
                m->gpu = get32(p);
                m->pid = get32(p + 4);
                m->jobid = get64(p + 8);
                if (m->pid <= 0)
                        return bad(why, why_len, "a registration of pid %d", m->pid);
                return 0;
        }
        if (why && why_len)
                snprintf(why, why_len, "a message of type \"%.31s\", which libkineto never sends", type);
        return -ENOMSG;
}

size_t npf_kineto_message(void *buf, size_t cap, const char *type, const void *payload, size_t n)
{
        unsigned char *p = buf;
        uint64_t size = n;
        size_t tlen = strlen(type);

        if (tlen >= NPF_KINETO_TYPE_SIZE || cap < NPF_KINETO_HEADER_SIZE || n > cap - NPF_KINETO_HEADER_SIZE)
                return 0;
        memset(p, 0, NPF_KINETO_HEADER_SIZE);
        memcpy(p, &size, sizeof(size));
        memcpy(p + 8, type, tlen);
        if (n)
                memcpy(p + NPF_KINETO_HEADER_SIZE, payload, n);
        return NPF_KINETO_HEADER_SIZE + n;
}

int npf_kineto_address(const char *dir, struct sockaddr_un *sa, socklen_t *ret_len)
{
        size_t name = strlen(NPF_KINETO_ENDPOINT);

        memset(sa, 0, sizeof(*sa));
        sa->sun_family = AF_UNIX;
        if (dir && dir[0]) {
                int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir, NPF_KINETO_ENDPOINT);
                if (n < 0 || (size_t) n >= sizeof(sa->sun_path))
                        return -ENAMETOOLONG;
                *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + (size_t) n + 1);
                return 0;
        }
        /* sun_path: a NUL, the name, a NUL; all of it the name (Endpoint.h:231-238). */
        memcpy(sa->sun_path + 1, NPF_KINETO_ENDPOINT, name);
        *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + name + 2);
        return 0;
}
