/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the pickle reader. Besides "no crash, no leak, no UB, no runaway
 * memory" it checks what every caller relies on: a failure is a documented error with a
 * terminated message and leaves the result alone; a success is a tree that every accessor
 * walks consistently. A reduce callback turns some containers into records on the way, as
 * the snapshot reader does, and refuses others, so that both paths are fuzzed too.
 * Every input is read three times, with the batch fast path and a direct reader of the dicts
 * with "action" (npf_pickle_load_direct(), as the snapshot reader has one), with the batch
 * fast path alone and with the opcodes one by one: the three must offer the same containers
 * to the callback in the same order and end the same.
 */
#include "replay/pickle.h"
#include "replay/value.h"
#include "tests/pickle-direct.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WALK_DEPTH 128                  /* deeper values are not visited */
#define WALK_VISITS 16384u              /* shared references can make a small input huge */

enum { REC_ENTRY = 1, REC_PAIR, REC_FRAME, REC_STACK };

typedef struct fuzz {
        size_t offered, records;
        uint64_t log;           /* what was offered, in order */
} fuzz_t;

static uint64_t mix(uint64_t h, uint64_t x)
{
        return (h ^ x) * UINT64_C(0x100000001b3);
}

/* @v in @h: its kind and payload; of a container, its kind and length. */
static uint64_t value_hash(uint64_t h, npf_value_t v)
{
        h = mix(mix(mix(h, v.kind), v.flags), v.rkind);
        switch (v.kind) {
        case NPF_V_STR:
        case NPF_V_BYTES:
                h = mix(h, v.len);
                for (uint32_t i = 0; i < v.len; i++)
                        h = mix(h, (unsigned char) v.as.s[i]);
                return h;
        case NPF_V_LIST:
        case NPF_V_TUPLE:
        case NPF_V_DICT:
        case NPF_V_SET:
                return mix(h, npf_value_len(v));
        case NPF_V_NONE:
                return h;
        default:
                return mix(h, v.as.u);
        }
}

/* Dicts with "action" become entries, with "filename" frames, lists of frames stacks,
 * 2-tuples pairs, as a snapshot's do; a dict with "fail" aborts the read. */
static int reduce(void *userdata, const npf_value_t *v, npf_value_t *ret, char *err, size_t err_size)
{
        fuzz_t *f = userdata;
        npf_value_t a;

        f->offered++;
        if (v->kind != NPF_V_LIST && v->kind != NPF_V_TUPLE && v->kind != NPF_V_DICT && v->kind != NPF_V_SET)
                abort();
        f->log = value_hash(f->log, *v);
        for (size_t i = 0, n = npf_value_len(*v) * (v->kind == NPF_V_DICT ? 2 : 1); i < n; i++)
                f->log = value_hash(f->log, npf_value_resolve(npf_value_items(*v)[i]));
        if (v->kind == NPF_V_DICT && npf_value_get(*v, "fail", &a)) {
                snprintf(err, err_size, "the fuzzer refuses a dict with \"fail\"");
                return -ECANCELED;
        }
        if (v->kind == NPF_V_DICT && npf_value_get(*v, "action", &a)) {
                *ret = (npf_value_t) { .kind = NPF_V_RECORD, .rkind = REC_ENTRY, .as.u = f->records++ };
                return 1;
        }
        if (v->kind == NPF_V_DICT && npf_value_get(*v, "filename", &a)) {
                *ret = (npf_value_t) { .kind = NPF_V_RECORD, .rkind = REC_FRAME, .as.u = f->records++ };
                return 1;
        }
        if (v->kind == NPF_V_LIST && npf_value_len(*v) > 0) {
                bool frames = true;
                for (size_t i = 0; i < npf_value_len(*v) && frames; i++)
                        frames = npf_value_at(*v, i).kind == NPF_V_RECORD && npf_value_at(*v, i).rkind == REC_FRAME;
                if (frames) {
                        *ret = (npf_value_t) { .kind = NPF_V_RECORD, .rkind = REC_STACK, .as.u = f->records++ };
                        return 1;
                }
        }
        if (v->kind == NPF_V_TUPLE && npf_value_len(*v) == 2) {
                *ret = (npf_value_t) { .kind = NPF_V_RECORD, .rkind = REC_PAIR, .as.u = f->records++ };
                return 1;
        }
        return 0;
}

/* The direct reader: what reduce() does, offered a container holding the dict's pairs or the
 * list's items, as npf_vtree_complete_items() offers one. */
static int offer_as_container(void *userdata, npf_vkind_t kind, const npf_value_t *items, size_t n,
                              npf_value_t *ret, char *err, size_t err_size)
{
        npf_container_t c;
        npf_value_t v = npf_test_container(&c, kind, items, n);

        return reduce(userdata, &v, ret, err, err_size);
}

static unsigned direct_key(void *userdata, const char *s, size_t len)
{
        (void) userdata;
        return npf_test_direct_key(s, len);
}

static int direct_dict(void *userdata, const npf_value_t *pairs, size_t n, const npf_value_t *by_key,
                       uint32_t present, npf_value_t *ret, char *err, size_t err_size)
{
        (void) by_key;
        if (!(present & 1u << 1))
                abort();
        return offer_as_container(userdata, NPF_V_DICT, pairs, 2 * n, ret, err, err_size);
}

static int direct_list(void *userdata, const npf_value_t *items, size_t n, npf_value_t *ret, char *err,
                       size_t err_size)
{
        if (n == 0)
                abort();
        return offer_as_container(userdata, NPF_V_LIST, items, n, ret, err, err_size);
}

static bool is_container(npf_value_t v)
{
        return v.kind == NPF_V_LIST || v.kind == NPF_V_TUPLE || v.kind == NPF_V_DICT || v.kind == NPF_V_SET;
}

/* One value, resolved: the accessors agree with its kind and with each other. */
static unsigned check_value(npf_value_t v, const fuzz_t *f)
{
        unsigned sum = 0;
        int64_t i;
        uint64_t u;
        double d;

        if (npf_value_resolve(v).kind != v.kind || !npf_value_kind_name(v))
                abort();
        if (!is_container(v) && npf_value_len(v) != 0)
                abort();
        switch (v.kind) {
        case NPF_V_NONE:
                break;
        case NPF_V_BOOL:
                if (!npf_value_int64(v, &i) || (i != 0 && i != 1))
                        abort();
                break;
        case NPF_V_INT:
                if (v.flags == 0) {
                        if (!npf_value_int64(v, &i) || i != v.as.i || !npf_value_double(v, &d))
                                abort();
                } else if (v.flags == NPF_VF_UNSIGNED) {
                        if (npf_value_int64(v, &i) || !npf_value_uint64(v, &u) || u <= INT64_MAX)
                                abort();
                } else if (v.flags == NPF_VF_HUGE) {
                        if (npf_value_int64(v, &i) || npf_value_uint64(v, &u) || v.as.i == 0)
                                abort();
                } else {
                        abort();
                }
                break;
        case NPF_V_FLOAT:
                if (!npf_value_double(v, &d) || npf_value_int64(v, &i))
                        abort();
                break;
        case NPF_V_STR:
        case NPF_V_BYTES:
                /* Every byte must be readable: in the input or in the tree. */
                for (uint32_t k = 0; k < v.len; k++)
                        sum += (unsigned char) v.as.s[k];
                if (v.len && v.len < 64 && !memchr(v.as.s, '\0', v.len)) {
                        char s[64];
                        memcpy(s, v.as.s, v.len);
                        s[v.len] = '\0';
                        if (npf_value_streq(v, s) != (v.kind == NPF_V_STR))
                                abort();
                }
                break;
        case NPF_V_RECORD:
                if (v.rkind < REC_ENTRY || v.rkind > REC_STACK || v.as.u >= f->records)
                        abort();
                break;
        case NPF_V_LIST:
        case NPF_V_TUPLE:
        case NPF_V_DICT:
        case NPF_V_SET:
                break;
        default:
                abort();
        }
        return sum;
}

/* A dict: every string key is found again, and the value found is that of a pair with it. */
static void check_keys(npf_value_t dict, size_t n)
{
        npf_value_t k, v, got;

        for (size_t i = 0; i < n && i < 64; i++) {
                char s[64];
                if (!npf_value_pair(dict, i, &k, &v))
                        abort();
                if (k.kind != NPF_V_STR || k.len >= sizeof(s) || memchr(k.as.s, '\0', k.len))
                        continue;
                memcpy(s, k.as.s, k.len);
                s[k.len] = '\0';
                if (!npf_value_get(dict, s, &got))
                        abort();
        }
}

typedef struct frame {
        npf_value_t v;
        size_t next, n;
} frame_t;

/* Depth-first over the tree without recursion, up to WALK_DEPTH and WALK_VISITS; what it
 * visits, in order, in @shape. */
static unsigned walk(npf_value_t root, const fuzz_t *f, uint64_t *shape)
{
        static frame_t stack[WALK_DEPTH];
        size_t depth = 0, visits = 0;
        unsigned sum = 0;
        npf_value_t k, item;

        root = npf_value_resolve(root);
        sum += check_value(root, f);
        *shape = value_hash(*shape, root);
        if (!is_container(root))
                return sum;
        stack[0] = (frame_t) { .v = root, .n = npf_value_len(root) };
        depth = 1;
        while (depth > 0 && visits < WALK_VISITS) {
                frame_t *fr = &stack[depth - 1];
                if (fr->next == fr->n) {
                        if (npf_value_at(fr->v, fr->n).kind != NPF_V_NONE || npf_value_pair(fr->v, fr->n, &k, &item))
                                abort();
                        if (fr->v.kind == NPF_V_DICT)
                                check_keys(fr->v, fr->n);
                        depth--;
                        continue;
                }
                if (fr->v.kind == NPF_V_DICT) {
                        if (!npf_value_pair(fr->v, fr->next, &k, &item))
                                abort();
                        sum += check_value(k, f);
                        *shape = value_hash(*shape, k);
                } else {
                        item = npf_value_at(fr->v, fr->next);
                }
                fr->next++;
                visits++;
                sum += check_value(item, f);
                *shape = value_hash(*shape, item);
                if (is_container(item) && depth < WALK_DEPTH)
                        stack[depth++] = (frame_t) { .v = item, .n = npf_value_len(item) };
        }
        return sum;
}

/* What the walk read, so that no byte of a string goes unread. */
static volatile unsigned sink;

/* One read of @data with @flags: what it returned, offered and built. */
typedef struct read {
        int rc;
        char err[NPF_PICKLE_ERR_MAX];
        fuzz_t f;
        uint64_t shape;
} read_t;

static void read_once(const uint8_t *data, size_t size, unsigned flags, bool direct, read_t *r)
{
        const npf_pickle_direct_t d = {
                .key = direct_key, .dict = direct_dict, .list = direct_list, .userdata = &r->f,
                .required = 1u << 1, .lists = 1u << 4,
        };
        static const npf_value_t untouched = { .kind = 0xee, .flags = 0xee, .rkind = 0xeeee, .len = 0xeeeeeeee };
        npf_value_t root = untouched;
        npf_vtree_t *t;

        memset(r, 0, sizeof(*r));
        if (!(t = npf_vtree_new(reduce, &r->f)))
                abort();
        memset(r->err, 'x', sizeof(r->err));
        r->rc = npf_pickle_load_direct(data, size, t, flags, direct ? &d : NULL, NULL, NULL, &root, r->err);
        if (r->rc == 0) {
                sink = walk(root, &r->f, &r->shape);
                (void) npf_vtree_bytes(t);
                r->err[0] = '\0';
        } else {
                if (r->rc != -EINVAL && r->rc != -EPERM && r->rc != -E2BIG && r->rc != -ENOMEM && r->rc != -ECANCELED)
                        abort();
                if (!memchr(r->err, '\0', sizeof(r->err)) || r->err[0] == '\0' ||
                    memcmp(&root, &untouched, sizeof(root)))
                        abort();
        }
        npf_vtree_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static read_t reads[3], *const opcodes = &reads[2];
        static const char *const path[] = { "the direct path", "the batch fast path" };

        read_once(data, size, 0, true, &reads[0]);
        read_once(data, size, 0, false, &reads[1]);
        read_once(data, size, NPF_PICKLE_OPCODES_ONLY, false, opcodes);
        for (int k = 0; k < 2; k++) {
                const read_t *fast = &reads[k];
                if (fast->rc != opcodes->rc || strcmp(fast->err, opcodes->err) != 0 ||
                    fast->f.offered != opcodes->f.offered || fast->f.records != opcodes->f.records ||
                    fast->f.log != opcodes->f.log || fast->shape != opcodes->shape) {
                        fprintf(stderr, "%s and the opcodes differ: rc %d / %d, \"%s\" / \"%s\", offered %zu / %zu, "
                                "records %zu / %zu, log %016llx / %016llx, shape %016llx / %016llx\n", path[k],
                                fast->rc, opcodes->rc, fast->err, opcodes->err, fast->f.offered, opcodes->f.offered,
                                fast->f.records, opcodes->f.records, (unsigned long long) fast->f.log,
                                (unsigned long long) opcodes->f.log, (unsigned long long) fast->shape,
                                (unsigned long long) opcodes->shape);
                        abort();
                }
        }
        return 0;
}
