/* SPDX-License-Identifier: MIT */
/* The opcodes are CPython's (Lib/pickle.py); nothing is memoised, nothing is a reference. */
#include "replay/pickle-out.h"

#include <errno.h>
#include <string.h>

enum {
        OP_PROTO = 0x80, OP_STOP = '.', OP_MARK = '(', OP_EMPTY_DICT = '}', OP_SETITEMS = 'u',
        OP_EMPTY_LIST = ']', OP_APPENDS = 'e', OP_BINUNICODE = 'X', OP_BININT = 'J', OP_LONG1 = 0x8a,
        OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_NONE = 'N',
};

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
        p->f = f;
        byte(p, OP_PROTO);
        byte(p, 2);
}

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

        byte(p, OP_BINUNICODE);
        le(p, n, 4);
        fwrite(s, 1, n, p->f);
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
        return ferror(p->f) ? -EIO : 0;
}
