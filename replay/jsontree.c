/* SPDX-License-Identifier: MIT */
#include "replay/jsontree.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHORT_MAX 64u                           /* strings copied once, however often they come */
#define SHORT_SLOTS 4096u                       /* a power of two */
#define ELEMENT_MAX ((size_t) INT_MAX)          /* jansson counts a value's bytes in an int */

typedef struct reader {
        const char *buf;
        size_t len, pos, next_progress;
        npf_vtree_t *t;
        npf_input_progress_cb progress;
        void *userdata;
        char *err;
        size_t err_size;
        npf_value_t *shorts;    /* SHORT_SLOTS copied strings, by hash; kind 0 when empty */
} reader_t;

/* --- jansson's values into the tree --------------------------------------------------------- */

/* @s as a string of the tree: a short one copied once (keys, actions, file names repeat in
 * every entry), others each time. */
static int string(reader_t *rd, npf_vtree_t *t, const char *s, size_t len, npf_value_t *ret)
{
        if (!rd || !rd->shorts || len > SHORT_MAX)
                return npf_vtree_strdup(t, NPF_V_STR, s, len, ret);
        uint32_t h = 2166136261u;       /* FNV-1a */
        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char) s[i]) * 16777619u;
        npf_value_t *slot = &rd->shorts[h & (SHORT_SLOTS - 1)];
        if (slot->kind == NPF_V_STR && slot->len == len && memcmp(slot->as.s, s, len) == 0) {
                *ret = *slot;
                return 0;
        }
        int r = npf_vtree_strdup(t, NPF_V_STR, s, len, ret);
        if (r == 0)
                *slot = *ret;   /* the newest of a collision wins */
        return r;
}

static int from_json(reader_t *rd, npf_vtree_t *t, const json_t *j, npf_value_t *ret, char *err, size_t err_size)
{
        npf_value_t c, kv[2];
        const char *key;
        size_t i, key_len;
        json_t *item;
        int r;

        switch (json_typeof(j)) {
        case JSON_NULL:
                *ret = (npf_value_t) { .kind = NPF_V_NONE };
                return 0;
        case JSON_TRUE:
        case JSON_FALSE:
                *ret = (npf_value_t) { .kind = NPF_V_BOOL, .as.i = json_is_true(j) };
                return 0;
        case JSON_INTEGER:
                *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = json_integer_value(j) };
                return 0;
        case JSON_REAL:
                *ret = (npf_value_t) { .kind = NPF_V_FLOAT, .as.f = json_real_value(j) };
                return 0;
        case JSON_STRING:
                return string(rd, t, json_string_value(j), json_string_length(j), ret);
        case JSON_ARRAY:
                if ((r = npf_vtree_container(t, NPF_V_LIST, &c)) < 0)
                        return r;
                json_array_foreach (j, i, item) {
                        if ((r = from_json(rd, t, item, &kv[0], err, err_size)) < 0 ||
                            (r = npf_vtree_append(t, c, kv, 1, err, err_size)) < 0)
                                return r;
                }
                *ret = c;
                return 0;
        case JSON_OBJECT:
                if ((r = npf_vtree_container(t, NPF_V_DICT, &c)) < 0)
                        return r;
                json_object_keylen_foreach ((json_t *) j, key, key_len, item) {
                        if ((r = string(rd, t, key, key_len, &kv[0])) < 0 ||
                            (r = from_json(rd, t, item, &kv[1], err, err_size)) < 0 ||
                            (r = npf_vtree_append(t, c, kv, 2, err, err_size)) < 0)
                                return r;
                }
                *ret = c;
                return 0;
        }
        return -EINVAL;
}

int npf_jsontree_value(npf_vtree_t *tree, const json_t *json, npf_value_t *ret, char *err, size_t err_size)
{
        int r = from_json(NULL, tree, json, ret, err, err_size);

        if (r == -ENOMEM)
                snprintf(err, err_size, "out of memory");
        return r;
}

/* --- the outer containers, walked here -------------------------------------------------------- */

/* Line and character column (both from 1, as jansson counts) of byte @off. Only for errors. */
static void place(const reader_t *rd, size_t off, long *line, long *column)
{
        *line = 1;
        *column = 1;
        for (size_t i = 0; i < off && i < rd->len; i++) {
                if (rd->buf[i] == '\n') {
                        ++*line;
                        *column = 1;
                } else if (((unsigned char) rd->buf[i] & 0xc0) != 0x80) {
                        ++*column;
                }
        }
}

/* jansson's words for an error the walk finds, "near" the token at @off as jansson shows it. */
static int fail_at(reader_t *rd, size_t off, const char *what)
{
        const char *p = rd->buf + off;
        size_t n = 0, left = off < rd->len ? rd->len - off : 0;
        long line, column;

        place(rd, off, &line, &column);
        if (left && *p == '"') {
                for (n = 1; n < left && p[n] != '"' && p[n] != '\n'; n++)
                        ;
                n += n < left && p[n] == '"';
        } else if (left && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
                while (n < left && ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z')))
                        n++;
        } else if (left && (*p == '-' || (*p >= '0' && *p <= '9'))) {
                while (n < left && (p[n] == '-' || p[n] == '+' || p[n] == '.' || p[n] == 'e' || p[n] == 'E' ||
                                    (p[n] >= '0' && p[n] <= '9')))
                        n++;
        } else {
                n = left ? 1 : 0;
        }
        /* jansson's column is where it stopped reading: the token's last character. */
        for (size_t i = 1; i < n; i++)
                column += ((unsigned char) p[i] & 0xc0) != 0x80;
        if (!n)         /* at the end, the last character read */
                snprintf(rd->err, rd->err_size, "line %ld, column %ld: %s near end of file", line, column - 1, what);
        else if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
                snprintf(rd->err, rd->err_size, "line %ld, column %ld: %s near '\\x%02x'", line, column, what,
                         (unsigned char) *p);
        else
                snprintf(rd->err, rd->err_size, "line %ld, column %ld: %s near '%.*s'", line, column, what,
                         (int) (n < 40 ? n : 40), p);
        return -EINVAL;
}

static void skip_space(reader_t *rd)
{
        while (rd->pos < rd->len &&
               (rd->buf[rd->pos] == ' ' || rd->buf[rd->pos] == '\n' || rd->buf[rd->pos] == '\r' ||
                rd->buf[rd->pos] == '\t'))
                rd->pos++;
}

/* One value decoded by jansson at rd->pos, into the tree. jansson stops at the value's end
 * and says where (json_loadb() counts exactly, characters it looked ahead at included). */
static int element(reader_t *rd, npf_value_t *ret)
{
        size_t start = rd->pos, n = rd->len - start < ELEMENT_MAX ? rd->len - start : ELEMENT_MAX;
        json_error_t je;
        json_t *j = json_loadb(rd->buf + start, n, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DISABLE_EOF_CHECK, &je);

        if (!j) {
                long line, column;
                place(rd, start, &line, &column);
                if (n == ELEMENT_MAX && je.position >= (int) (ELEMENT_MAX - 8))
                        snprintf(rd->err, rd->err_size, "line %ld, column %ld: a single value longer than 2 GiB "
                                 "is not read", line, column);
                else
                        snprintf(rd->err, rd->err_size, "line %ld, column %ld: %s", line + je.line - 1,
                                 je.line == 1 ? column + je.column - 1 : (long) je.column, je.text);
                return -EINVAL;
        }
        rd->pos = start + (size_t) je.position;
        int r = from_json(rd, rd->t, j, ret, rd->err, rd->err_size);
        json_decref(j);
        return r;
}

/* The value at rd->pos: a container above the stream depth is walked here, item by item. */
static int value(reader_t *rd, unsigned depth, npf_value_t *ret)
{
        char open = rd->pos < rd->len ? rd->buf[rd->pos] : 0;

        if (open == 0)
                return fail_at(rd, rd->pos, "unexpected token");
        if (open == '[' ? depth >= NPF_JSONTREE_WALK_LISTS : open == '{' ? depth >= NPF_JSONTREE_WALK_OBJECTS : true)
                return element(rd, ret);

        char close = open == '{' ? '}' : ']';
        npf_value_t c, kv[2];
        int r;

        if ((r = npf_vtree_container(rd->t, open == '{' ? NPF_V_DICT : NPF_V_LIST, &c)) < 0)
                return r;
        rd->pos++;
        skip_space(rd);
        if (rd->pos < rd->len && rd->buf[rd->pos] == close) {
                rd->pos++;
                *ret = c;
                return 0;
        }
        for (;;) {
                size_t n = 0;
                if (open == '{') {
                        if (rd->pos >= rd->len || rd->buf[rd->pos] != '"')
                                return fail_at(rd, rd->pos, "string or '}' expected");
                        size_t key_at = rd->pos;
                        if ((r = element(rd, &kv[n++])) < 0)
                                return r;
                        if (memchr(kv[0].as.s, 0, kv[0].len))
                                return fail_at(rd, key_at, "NUL byte in object key not supported");
                        skip_space(rd);
                        if (rd->pos >= rd->len || rd->buf[rd->pos] != ':')
                                return fail_at(rd, rd->pos, "':' expected");
                        rd->pos++;
                        skip_space(rd);
                }
                if (open == '[' && rd->pos >= rd->len)
                        return fail_at(rd, rd->pos, "']' expected");
                if ((r = value(rd, depth + 1, &kv[n++])) < 0 ||
                    (r = npf_vtree_append(rd->t, c, kv, n, rd->err, rd->err_size)) < 0)
                        return r;
                if (rd->progress && rd->pos >= rd->next_progress) {
                        rd->progress(rd->userdata, rd->pos, rd->len);
                        rd->next_progress = rd->pos + NPF_INPUT_PROGRESS_EVERY;
                }
                skip_space(rd);
                if (rd->pos < rd->len && rd->buf[rd->pos] == ',') {
                        rd->pos++;
                        skip_space(rd);
                        continue;
                }
                if (rd->pos < rd->len && rd->buf[rd->pos] == close) {
                        rd->pos++;
                        *ret = c;
                        return 0;
                }
                return fail_at(rd, rd->pos, open == '{' ? "'}' expected" : "']' expected");
        }
}

int npf_jsontree_load(const void *buf, size_t len, npf_vtree_t *tree, npf_input_progress_cb progress,
                      void *userdata, npf_value_t *ret, char *err, size_t err_size)
{
        reader_t rd = { .buf = buf, .len = len, .next_progress = NPF_INPUT_PROGRESS_EVERY, .t = tree, .progress = progress,
                        .userdata = userdata, .err = err, .err_size = err_size,
                        .shorts = calloc(SHORT_SLOTS, sizeof(npf_value_t)) };
        npf_value_t root;
        int r = -ENOMEM;

        err[0] = '\0';
        if (!rd.shorts)
                goto out;
        /* jansson skips a raw NUL after a number and miscounts where the value ended: refused
         * first, as it is no JSON text. */
        const char *nul = memchr(buf, 0, len);
        if (nul) {
                r = fail_at(&rd, (size_t) (nul - (const char *) buf), "a NUL byte, which JSON text never holds");
                goto out;
        }
        skip_space(&rd);
        if ((r = value(&rd, 0, &root)) < 0)
                goto out;
        skip_space(&rd);
        if (rd.pos < rd.len) {
                r = fail_at(&rd, rd.pos, "end of file expected");
                goto out;
        }
        if ((r = npf_vtree_finish(tree, &root, err, err_size)) == 0)
                *ret = root;
out:
        if (r == -ENOMEM)
                snprintf(err, err_size, "out of memory");
        free(rd.shorts);
        return r;
}
