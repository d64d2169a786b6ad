/* SPDX-License-Identifier: MIT */
#include "lib/jsonpos.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NPF__JSONPOS_DEPTH 256

typedef struct scan {
        const char *s;
        size_t n;
        size_t i;
} scan_t;

static void skip_ws(scan_t *sc)
{
        while (sc->i < sc->n && strchr(" \t\r\n", sc->s[sc->i]) && sc->s[sc->i])
                sc->i++;
}

static bool at(const scan_t *sc, char c)
{
        return sc->i < sc->n && sc->s[sc->i] == c;
}

/* Skip a string starting at '"'; its raw contents are [*ret_start, *ret_end). */
static int skip_string(scan_t *sc, size_t *ret_start, size_t *ret_end)
{
        if (!at(sc, '"'))
                return -EINVAL;
        size_t start = ++sc->i;
        while (sc->i < sc->n && sc->s[sc->i] != '"')
                sc->i += sc->s[sc->i] == '\\' ? 2 : 1;
        if (sc->i >= sc->n)
                return -EINVAL;
        *ret_start = start;
        *ret_end = sc->i++;
        return 0;
}

/* Skip an object member's key and its ':'; the key's raw contents are [*ret_start, *ret_end). */
static int skip_key(scan_t *sc, size_t *ret_start, size_t *ret_end)
{
        skip_ws(sc);
        if (skip_string(sc, ret_start, ret_end) < 0)
                return -EINVAL;
        skip_ws(sc);
        if (!at(sc, ':'))
                return -EINVAL;
        sc->i++;
        return 0;
}

static int skip_value(scan_t *sc, int depth)
{
        size_t a, b;

        if (depth > NPF__JSONPOS_DEPTH)
                return -EINVAL;
        skip_ws(sc);
        if (sc->i >= sc->n)
                return -EINVAL;
        char open = sc->s[sc->i];
        if (open == '"')
                return skip_string(sc, &a, &b);
        if (open != '{' && open != '[') {
                while (sc->i < sc->n && !strchr(",]} \t\r\n", sc->s[sc->i]) && sc->s[sc->i])
                        sc->i++;
                return 0;
        }
        char close = open == '{' ? '}' : ']';
        sc->i++;
        skip_ws(sc);
        if (at(sc, close)) {
                sc->i++;
                return 0;
        }
        for (;;) {
                if (open == '{' && skip_key(sc, &a, &b) < 0)
                        return -EINVAL;
                if (skip_value(sc, depth + 1) < 0)
                        return -EINVAL;
                skip_ws(sc);
                if (at(sc, close)) {
                        sc->i++;
                        return 0;
                }
                if (!at(sc, ','))
                        return -EINVAL;
                sc->i++;
        }
}

/* Compare raw string contents (escapes undone for the simple ones) with @key. */
static bool key_equals(const char *raw, size_t len, const char *key)
{
        size_t k = 0;

        for (size_t i = 0; i < len; i++, k++) {
                char c = raw[i];
                if (c == '\\') {
                        if (++i >= len)
                                return false;
                        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
                        const char *p = strchr(from, raw[i]);
                        if (!p || !raw[i])
                                return false;   /* \uXXXX: not worth decoding for a position */
                        c = to[p - from];
                }
                if (key[k] == '\0' || key[k] != c)
                        return false;
        }
        return key[k] == '\0';
}

/* Skip the value at hand and the ',' after it. Return: -ENOENT if no ',' follows. */
static int skip_to_next(scan_t *sc, int nesting)
{
        if (skip_value(sc, nesting) < 0)
                return -ENOENT;
        skip_ws(sc);
        if (!at(sc, ','))
                return -ENOENT;
        sc->i++;
        return 0;
}

static int find(scan_t *sc, const char *const *path, size_t depth, int nesting)
{
        skip_ws(sc);
        if (depth == 0)
                return 0;
        if (nesting > NPF__JSONPOS_DEPTH)
                return -ENOENT;

        if (at(sc, '[')) {
                const char *c = path[0];
                if (c[0] != '[' || c[1] < '0' || c[1] > '9')
                        return -ENOENT;
                char *end;
                unsigned long want = strtoul(c + 1, &end, 10);
                if (*end != ']')
                        return -ENOENT;
                sc->i++;
                for (unsigned long k = 0;; k++) {
                        skip_ws(sc);
                        if (at(sc, ']'))
                                return -ENOENT;
                        if (k == want)
                                return find(sc, path + 1, depth - 1, nesting + 1);
                        if (skip_to_next(sc, nesting) < 0)
                                return -ENOENT;
                }
        }
        if (!at(sc, '{'))
                return -ENOENT;
        sc->i++;
        for (;;) {
                size_t a, b;
                if (skip_key(sc, &a, &b) < 0)
                        return -ENOENT;
                if (key_equals(sc->s + a, b - a, path[0]))
                        return find(sc, path + 1, depth - 1, nesting + 1);
                if (skip_to_next(sc, nesting) < 0)
                        return -ENOENT;
        }
}

void npf_jsonpos_line_column(const char *text, size_t len, size_t offset, uint32_t *ret_line,
                             uint32_t *ret_column)
{
        uint32_t line = 1, column = 1;

        for (size_t i = 0; i < offset && i < len; i++) {
                if (text[i] == '\n') {
                        line++;
                        column = 1;
                } else {
                        column++;
                }
        }
        *ret_line = line;
        *ret_column = column;
}

int npf_jsonpos_find(const char *text, size_t len, const char *const *path, size_t depth,
                     uint32_t *ret_line, uint32_t *ret_column)
{
        scan_t sc = { .s = text, .n = len };

        if (!text || find(&sc, path, depth, 0) < 0 || sc.i >= len)
                return -ENOENT;
        npf_jsonpos_line_column(text, len, sc.i, ret_line, ret_column);
        return 0;
}
