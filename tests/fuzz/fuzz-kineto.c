/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the kineto endpoint's datagram reader (lib/kinetoipc.c), which
 * daemon/kineto.c runs on every datagram its socket receives from any local process: the
 * input is one datagram. Besides "no crash, no overread, no UB" it checks what the daemon
 * relies on:
 *
 *   - the answer is 0, -EBADMSG or -ENOMSG, with a reason that is a C string, not empty, and
 *     it is the answer the protocol's rules, checked here independently, call for;
 *   - on 0 the message is a "req" or a "ctxt", n_pids <= NPF_KINETO_PIDS_MAX, every pid > 0,
 *     and npf_kineto_message() re-encodes what was parsed into the input byte for byte (the
 *     type field's bytes after its NUL aside: libkineto sends zeros there, the reader does not
 *     look at them);
 *   - npf_kineto_message() refuses a buffer one byte too short.
 */
#include "lib/kinetoipc.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int32_t get32(const uint8_t *p)
{
        int32_t v;

        memcpy(&v, p, sizeof(v));
        return v;
}

/*
 * The protocol's rules, said again without lib/kinetoipc's code: what @d must get. 0 for a
 * well-formed "req" or "ctxt"; -ENOMSG for a well-formed datagram of another type (dropped,
 * not counted as malformed); -EBADMSG for anything else, a datagram too long to be read whole
 * first of all.
 */
static int expected(const uint8_t *d, size_t n)
{
        uint64_t size;

        if (n < NPF_KINETO_HEADER_SIZE || n > NPF_KINETO_DATAGRAM_MAX)
                return -EBADMSG;
        memcpy(&size, d, sizeof(size));
        if (size != n - NPF_KINETO_HEADER_SIZE || !memchr(d + 8, '\0', NPF_KINETO_TYPE_SIZE))
                return -EBADMSG;
        const uint8_t *p = d + NPF_KINETO_HEADER_SIZE;
        if (memcmp(d + 8, "req", 4) == 0) {
                if (size < 16)
                        return -EBADMSG;
                int32_t k = get32(p + 4);
                if (k < 0 || k > (int32_t) NPF_KINETO_PIDS_MAX || size != 16 + 4 * (uint64_t) k)
                        return -EBADMSG;
                for (int32_t i = 0; i < k; i++)
                        if (get32(p + 16 + 4 * i) <= 0)
                                return -EBADMSG;
                return 0;
        }
        if (memcmp(d + 8, "ctxt", 5) == 0)
                return size == 16 && get32(p + 4) > 0 ? 0 : -EBADMSG;
        return -ENOMSG;
}

/* The parsed message @m said again, into @out; its length. */
static size_t reencode(const npf_kineto_msg_t *m, uint8_t *out, size_t cap)
{
        uint8_t payload[16 + 4 * NPF_KINETO_PIDS_MAX];
        int32_t v;
        size_t n;

        if (m->kind == NPF_KINETO_REQ) {
                memcpy(payload, &m->config_type, 4);
                v = (int32_t) m->n_pids;
                memcpy(payload + 4, &v, 4);
                memcpy(payload + 8, &m->jobid, 8);
                memcpy(payload + 16, m->pids, 4 * m->n_pids);
                n = 16 + 4 * m->n_pids;
                return npf_kineto_message(out, cap, "req", payload, n);
        }
        memcpy(payload, &m->gpu, 4);
        memcpy(payload + 4, &m->pid, 4);
        memcpy(payload + 8, &m->jobid, 8);
        return npf_kineto_message(out, cap, "ctxt", payload, 16);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        npf_kineto_msg_t m;
        char why[128];
        uint8_t out[NPF_KINETO_HEADER_SIZE + 16 + 4 * NPF_KINETO_PIDS_MAX];

        /* The datagram in a buffer of its own size, so that ASan sees any read past it. */
        uint8_t *dgram = malloc(size ? size : 1);
        if (!dgram)
                return 0;
        if (size)
                memcpy(dgram, data, size);
        memset(why, 0x7f, sizeof(why));
        int r = npf_kineto_parse(dgram, size, &m, why, sizeof(why));

        if (r != expected(dgram, size))
                abort();
        if (r != 0) {
                if (!memchr(why, '\0', sizeof(why)) || why[0] == '\0')
                        abort();
                free(dgram);
                return 0;
        }
        if (m.kind != NPF_KINETO_REQ && m.kind != NPF_KINETO_CTXT)
                abort();
        if (m.n_pids > NPF_KINETO_PIDS_MAX || (m.kind == NPF_KINETO_CTXT && (m.n_pids || m.pid <= 0)))
                abort();
        for (uint32_t i = 0; i < m.n_pids; i++)
                if (m.pids[i] <= 0)
                        abort();

        /* Said again, it is the datagram: the header's size and type name, then the payload. */
        size_t n = reencode(&m, out, sizeof(out));
        if (n != size || memcmp(out, dgram, 8) != 0 ||
            memcmp(out + NPF_KINETO_HEADER_SIZE, dgram + NPF_KINETO_HEADER_SIZE, n - NPF_KINETO_HEADER_SIZE) != 0)
                abort();
        size_t t = strlen((const char *) out + 8);
        if (memcmp(out + 8, dgram + 8, t + 1) != 0)
                abort();
        for (size_t i = 8 + t; i < NPF_KINETO_HEADER_SIZE; i++)         /* zeros after the name */
                if (out[i] != 0)
                        abort();
        /* And not into a buffer one byte short. */
        if (reencode(&m, out, n - 1) != 0)
                abort();
        free(dgram);
        return 0;
}
