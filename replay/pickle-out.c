/* SPDX-License-Identifier: MIT */
/* The opcodes are CPython's (Lib/pickle.py): BINPUT and BINGET for what repeats, as it writes them. */
#include "replay/pickle-out.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum {
        OP_PROTO = 0x80, OP_STOP = '.', OP_MARK = '(', OP_EMPTY_DICT = '}', OP_SETITEMS = 'u',
        OP_EMPTY_LIST = ']', OP_APPENDS = 'e', OP_BINUNICODE = 'X', OP_BININT = 'J', OP_LONG1 = 0x8a,
        OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_NONE = 'N', OP_BINPUT = 'q', OP_LONG_BINPUT = 'r',
        OP_BINGET = 'h', OP_LONG_BINGET = 'j',
};

#define MEMO_MAX (UINT32_MAX - 1u)      /* memo indices; beyond, what is left is not memoised */

static void byte(npf_pout_t *p, int b)
{
        putc(b, p->f);
}

static void le(npf_pout_t *p, uint64_t v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                byte(p, (int) ((v >> (8 * i)) & 0xff));
}

void npf_pout_begin(npf_pout_t *p, FILE *f)
{
        *p = (npf_pout_t) { .f = f };
        byte(p, OP_PROTO);
        byte(p, 2);
}

/* --- the memo ------------------------------------------------------------------------------ */

static uint64_t hash_str(const char *s, size_t n)
{
        uint64_t h = 0xcbf29ce484222325u ^ n;

        for (size_t i = 0; i < n; i++)
                h = (h ^ (unsigned char) s[i]) * 0x100000001b3u;
        return h ^ (h >> 31);
}

static uint64_t hash_key(uint64_t k)
{
        k ^= k >> 33;
        k *= 0xff51afd7ed558ccdu;
        return k ^ (k >> 33);
}

static bool slot_is(const struct npf_pout_slot *x, const char *s, uint64_t key)
{
        return x->key == key && (s ? x->s && memcmp(x->s, s, key) == 0 : !x->s);
}

/* The slot of the string @s (of @key bytes) or of the caller's name @key (@s NULL): where it
 * is, or where it would go. NULL when the memo has no room and cannot be given more. */
static struct npf_pout_slot *memo_find(npf_pout_t *p, const char *s, uint64_t key, uint64_t h)
{
        npf_pout_memo_t *m = &p->memo;

        if ((m->n + 1) * 2 > m->cap) {
                size_t cap = m->cap ? m->cap * 2 : 1024;
                struct npf_pout_slot *g = calloc(cap, sizeof(*g));
                if (!g) {
                        p->failed = true;
                        return NULL;
                }
                for (size_t i = 0; i < m->cap; i++) {
                        const struct npf_pout_slot *x = &m->slots[i];
                        if (!x->index)
                                continue;
                        uint64_t xh = x->s ? hash_str(x->s, x->key) : hash_key(x->key);
                        size_t j = xh & (cap - 1);
                        while (g[j].index)
                                j = (j + 1) & (cap - 1);
                        g[j] = *x;
                }
                free(m->slots);
                m->slots = g;
                m->cap = cap;
        }
        for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
                if (!m->slots[i].index || slot_is(&m->slots[i], s, key))
                        return &m->slots[i];
}

static void memo_get(npf_pout_t *p, uint32_t index)
{
        if (index < 256) {
                byte(p, OP_BINGET);
                byte(p, (int) index);
        } else {
                byte(p, OP_LONG_BINGET);
                le(p, index, 4);
        }
}

/* BINPUT of the value on top of the stack into the next index, recorded in @x. */
static void memo_put(npf_pout_t *p, struct npf_pout_slot *x, const char *s, uint64_t key)
{
        if (!x || p->failed || p->next >= MEMO_MAX)
                return;
        if (p->next < 256) {
                byte(p, OP_BINPUT);
                byte(p, (int) p->next);
        } else {
                byte(p, OP_LONG_BINPUT);
                le(p, p->next, 4);
        }
        *x = (struct npf_pout_slot) { .s = s, .key = key, .index = ++p->next };
        p->memo.n++;
}

void npf_pout_put(npf_pout_t *p, uint64_t key)
{
        struct npf_pout_slot *x = p->failed ? NULL : memo_find(p, NULL, key, hash_key(key));

        if (x && !x->index)
                memo_put(p, x, NULL, key);
}

bool npf_pout_get(npf_pout_t *p, uint64_t key)
{
        struct npf_pout_slot *x = p->failed ? NULL : memo_find(p, NULL, key, hash_key(key));

        if (!x || !x->index)
                return false;
        memo_get(p, x->index - 1);
        return true;
}

/* --- values -------------------------------------------------------------------------------- */

void npf_pout_dict(npf_pout_t *p)
{
        byte(p, OP_EMPTY_DICT);
        byte(p, OP_MARK);
}

void npf_pout_close_dict(npf_pout_t *p)
{
        byte(p, OP_SETITEMS);
}

void npf_pout_list(npf_pout_t *p)
{
        byte(p, OP_EMPTY_LIST);
        byte(p, OP_MARK);
}

void npf_pout_close_list(npf_pout_t *p)
{
        byte(p, OP_APPENDS);
}

void npf_pout_str(npf_pout_t *p, const char *s)
{
        size_t n = strlen(s);
        struct npf_pout_slot *x = p->failed ? NULL : memo_find(p, s, n, hash_str(s, n));

        if (x && x->index) {
                memo_get(p, x->index - 1);
                return;
        }
        byte(p, OP_BINUNICODE);
        le(p, n, 4);
        fwrite(s, 1, n, p->f);
        memo_put(p, x, s, n);
}

/* LONG1: the two's complement, little-endian, in as few bytes as keep the sign. */
static void long1(npf_pout_t *p, uint64_t bits, bool negative)
{
        size_t n = 8;

        while (n > 1) {
                uint8_t top = (uint8_t) (bits >> (8 * (n - 1))), next = (uint8_t) (bits >> (8 * (n - 2)));
                if ((!negative && top == 0 && !(next & 0x80)) || (negative && top == 0xff && (next & 0x80)))
                        n--;
                else
                        break;
        }
        if (!negative && n == 8 && (bits >> 63)) {      /* a uint64 at or above 2^63 takes a ninth byte */
                byte(p, OP_LONG1);
                byte(p, 9);
                le(p, bits, 8);
                byte(p, 0);
                return;
        }
        byte(p, OP_LONG1);
        byte(p, (int) n);
        le(p, bits, n);
}

void npf_pout_int(npf_pout_t *p, int64_t v)
{
        if (v >= INT32_MIN && v <= INT32_MAX) {
                byte(p, OP_BININT);
                le(p, (uint64_t) (uint32_t) (int32_t) v, 4);
                return;
        }
        long1(p, (uint64_t) v, v < 0);
}

void npf_pout_uint(npf_pout_t *p, uint64_t v)
{
        if (v <= INT32_MAX)
                npf_pout_int(p, (int64_t) v);
        else
                long1(p, v, false);
}

void npf_pout_bool(npf_pout_t *p, bool v)
{
        byte(p, v ? OP_NEWTRUE : OP_NEWFALSE);
}

void npf_pout_none(npf_pout_t *p)
{
        byte(p, OP_NONE);
}

int npf_pout_end(npf_pout_t *p)
{
        byte(p, OP_STOP);
        free(p->memo.slots);
        p->memo = (npf_pout_memo_t) { 0 };
        return ferror(p->f) ? -EIO : 0;
}
