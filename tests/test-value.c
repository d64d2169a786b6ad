/* SPDX-License-Identifier: MIT */
/*
 * The value tree (replay/value.h): building containers, the reduce callback (innermost first,
 * once per container, seen through every reference and the memo, items freed), the memo,
 * copied strings, JSON text read into a tree (replay/jsontree.h), and the accessors on every
 * kind of value.
 */
#include "replay/value.h"
#include "replay/jsontree.h"

#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define ERR_SIZE 256

static npf_value_t int_value(int64_t i)
{
        return (npf_value_t) { .kind = NPF_V_INT, .as.i = i };
}

static npf_value_t str_value(npf_vtree_t *t, const char *s)
{
        npf_value_t v;

        assert_int_equal(npf_vtree_strdup(t, NPF_V_STR, s, strlen(s), &v), 0);
        return v;
}

static npf_value_t container(npf_vtree_t *t, npf_vkind_t kind)
{
        npf_value_t v;

        assert_int_equal(npf_vtree_container(t, kind, &v), 0);
        assert_int_equal(v.kind, kind);
        assert_int_equal(npf_value_len(v), 0);
        return v;
}

static void append(npf_vtree_t *t, npf_value_t c, npf_value_t *items, size_t n)
{
        char err[ERR_SIZE] = "";

        if (npf_vtree_append(t, c, items, n, err, sizeof(err)) < 0)
                fail_msg("append: %s", err);
}

static void append1(npf_vtree_t *t, npf_value_t c, npf_value_t item)
{
        append(t, c, &item, 1);
}

static void append_pair(npf_vtree_t *t, npf_value_t dict, npf_value_t k, npf_value_t v)
{
        npf_value_t kv[2] = { k, v };

        append(t, dict, kv, 2);
}

/* --- accessors on scalars ------------------------------------------------------------------- */

static void test_free_null(void **state)
{
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);

        (void) state;
        assert_null(npf_vtree_free(NULL));
        assert_non_null(t);
        assert_null(npf_vtree_free(t));
}

static void test_integers(void **state)
{
        const npf_value_t t = { .kind = NPF_V_BOOL, .as.i = 1 }, f = { .kind = NPF_V_BOOL, .as.i = 0 };
        const npf_value_t big = { .kind = NPF_V_INT, .flags = NPF_VF_UNSIGNED, .as.u = UINT64_MAX };
        const npf_value_t huge = { .kind = NPF_V_INT, .flags = NPF_VF_HUGE, .as.i = -1 };
        const npf_value_t fl = { .kind = NPF_V_FLOAT, .as.f = 2.5 };
        int64_t i;
        uint64_t u;
        double d;

        (void) state;
        assert_true(npf_value_int64(int_value(-5), &i) && i == -5);
        assert_false(npf_value_uint64(int_value(-5), &u));
        assert_true(npf_value_uint64(int_value(INT64_MAX), &u) && u == INT64_MAX);
        assert_true(npf_value_int64(int_value(INT64_MIN), &i) && i == INT64_MIN);
        assert_true(npf_value_double(int_value(-3), &d) && d == -3.0);

        /* Booleans are 0 and 1. */
        assert_true(npf_value_int64(t, &i) && i == 1);
        assert_true(npf_value_int64(f, &i) && i == 0);
        assert_true(npf_value_uint64(t, &u) && u == 1);

        /* Above INT64_MAX: unsigned only. */
        assert_false(npf_value_int64(big, &i));
        assert_true(npf_value_uint64(big, &u) && u == UINT64_MAX);
        assert_true(npf_value_double(big, &d) && d == 18446744073709551616.0);

        /* Wider than 64 bits: no integer, no double. */
        assert_false(npf_value_int64(huge, &i));
        assert_false(npf_value_uint64(huge, &u));
        assert_false(npf_value_double(huge, &d));

        /* Floats are no integers; None and strings are nothing. */
        assert_false(npf_value_int64(fl, &i));
        assert_false(npf_value_uint64(fl, &u));
        assert_true(npf_value_double(fl, &d) && d == 2.5);
        assert_false(npf_value_int64((npf_value_t) { .kind = NPF_V_NONE }, &i));
        assert_false(npf_value_double((npf_value_t) { .kind = NPF_V_NONE }, &d));
}

/* ret_ outputs are written only on success. */
static void test_outputs_untouched_on_failure(void **state)
{
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t list = container(t, NPF_V_LIST), k = int_value(7), v = int_value(8);
        int64_t i = 42;
        uint64_t u = 42;
        double d = 4.2;

        (void) state;
        assert_false(npf_value_int64((npf_value_t) { .kind = NPF_V_STR }, &i));
        assert_false(npf_value_uint64(int_value(-1), &u));
        assert_false(npf_value_double((npf_value_t) { .kind = NPF_V_BYTES }, &d));
        assert_true(i == 42 && u == 42 && d == 4.2);
        assert_false(npf_value_pair(list, 0, &k, &v));
        assert_false(npf_value_get(list, "a", &v));
        assert_true(k.as.i == 7 && v.as.i == 8);
        npf_vtree_free(t);
}

static void test_strings(void **state)
{
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        char src[] = "mutable";
        static const char nul[] = "a\0b";
        npf_value_t s, b, e, n, big;
        char *large = malloc(1u << 20);

        (void) state;
        assert_non_null(large);
        assert_int_equal(npf_vtree_strdup(t, NPF_V_STR, src, strlen(src), &s), 0);
        assert_int_equal(npf_vtree_strdup(t, NPF_V_BYTES, "\xff\x00\x01", 3, &b), 0);
        assert_int_equal(npf_vtree_strdup(t, NPF_V_STR, "", 0, &e), 0);
        assert_int_equal(npf_vtree_strdup(t, NPF_V_STR, nul, sizeof(nul) - 1, &n), 0);
        /* A string larger than any chunk the tree keeps for small ones. */
        memset(large, 'L', 1u << 20);
        assert_int_equal(npf_vtree_strdup(t, NPF_V_STR, large, 1u << 20, &big), 0);
        memset(large, 'X', 1u << 20);
        memcpy(src, "changed", 7);

        /* The tree holds copies. */
        assert_true(npf_value_streq(s, "mutable"));
        assert_false(npf_value_streq(s, "changed"));
        assert_false(npf_value_streq(s, "mutabl"));
        assert_false(npf_value_streq(s, "mutables"));
        assert_int_equal(b.kind, NPF_V_BYTES);
        assert_int_equal(b.len, 3);
        assert_memory_equal(b.as.s, "\xff\x00\x01", 3);
        assert_false(npf_value_streq(b, "\xff"));       /* bytes are no str */
        assert_true(npf_value_streq(e, ""));
        assert_int_equal(n.len, 3);
        assert_false(npf_value_streq(n, "a"));
        assert_int_equal(big.len, 1u << 20);
        for (size_t i = 0; i < big.len; i++)
                if (big.as.s[i] != 'L')
                        fail_msg("byte %zu of the copy changed", i);
        assert_int_equal(npf_value_len(s), 0);
        assert_int_equal(npf_value_at(s, 0).kind, NPF_V_NONE);

        /* A length that does not fit a value is refused before anything is read. */
        assert_int_equal(npf_vtree_strdup(t, NPF_V_STR, "x", (size_t) UINT32_MAX + 1, &s), -E2BIG);
        assert_true(npf_value_streq(s, "mutable"));
        free(large);
        npf_vtree_free(t);
}

static void test_kind_names(void **state)
{
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        static const struct {
                npf_vkind_t kind;
                const char *name;
        } names[] = {
                { NPF_V_BOOL, "bool" }, { NPF_V_INT, "int" },   { NPF_V_FLOAT, "float" }, { NPF_V_STR, "str" },
                { NPF_V_BYTES, "bytes" }, { NPF_V_LIST, "list" }, { NPF_V_TUPLE, "tuple" }, { NPF_V_DICT, "dict" },
                { NPF_V_SET, "set" },
        };

        (void) state;
        for (size_t i = 0; i < N_OF(names); i++) {
                npf_value_t v = { .kind = (uint8_t) names[i].kind };
                if (names[i].kind >= NPF_V_LIST)
                        v = container(t, names[i].kind);
                assert_string_equal(npf_value_kind_name(v), names[i].name);
        }
        assert_non_null(npf_value_kind_name((npf_value_t) { .kind = NPF_V_NONE }));
        assert_non_null(npf_value_kind_name((npf_value_t) { .kind = NPF_V_RECORD }));
        npf_vtree_free(t);
}

/* --- containers ----------------------------------------------------------------------------- */

static void test_sequences(void **state)
{
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t l = container(t, NPF_V_LIST), tu = container(t, NPF_V_TUPLE), s = container(t, NPF_V_SET);
        npf_value_t three[3] = { int_value(1), int_value(2), int_value(3) }, k, v;
        size_t before;
        int64_t i;

        (void) state;
        append(t, l, three, 3);
        append(t, l, three, 2);
        append(t, tu, three, 1);
        append(t, s, three, 0);
        assert_int_equal(npf_value_len(l), 5);
        for (size_t j = 0; j < 5; j++)
                assert_true(npf_value_int64(npf_value_at(l, j), &i) && i == (int64_t) (j % 3) + 1);
        assert_int_equal(npf_value_at(l, 5).kind, NPF_V_NONE);
        assert_int_equal(npf_value_at(l, SIZE_MAX).kind, NPF_V_NONE);
        assert_int_equal(npf_value_len(tu), 1);
        assert_int_equal(npf_value_len(s), 0);
        assert_false(npf_value_pair(l, 0, &k, &v));
        assert_false(npf_value_get(l, "a", &v));

        /* Many items, one at a time; the tree's size follows. */
        before = npf_vtree_bytes(t);
        for (int64_t j = 0; j < 100000; j++)
                append1(t, s, int_value(j));
        assert_int_equal(npf_value_len(s), 100000);
        assert_true(npf_value_int64(npf_value_at(s, 99999), &i) && i == 99999);
        assert_true(npf_vtree_bytes(t) >= before + 100000 * sizeof(npf_value_t));
        npf_vtree_free(t);
}

static void test_dicts(void **state)
{
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t d = container(t, NPF_V_DICT), inner = container(t, NPF_V_LIST), k, v;
        npf_value_t items[4] = { str_value(t, "a"), int_value(1), str_value(t, "b"), inner };
        int64_t i;

        (void) state;
        append(t, d, items, 4);         /* two pairs: @n counts keys and values */
        append_pair(t, d, int_value(5), str_value(t, "five"));
        append_pair(t, d, str_value(t, "a"), int_value(9));
        assert_int_equal(npf_value_len(d), 4);
        assert_true(npf_value_pair(d, 0, &k, &v));
        assert_true(npf_value_streq(k, "a"));
        assert_true(npf_value_int64(v, &i) && i == 1);
        assert_true(npf_value_pair(d, 1, &k, &v));
        assert_int_equal(v.kind, NPF_V_LIST);
        assert_ptr_equal(v.as.c, inner.as.c);
        assert_true(npf_value_pair(d, 2, &k, &v));
        assert_true(npf_value_int64(k, &i) && i == 5);
        assert_false(npf_value_pair(d, 4, &k, &v));

        /* A key given twice: the later value wins, as when Python builds the dict. */
        assert_true(npf_value_get(d, "a", &v));
        assert_true(npf_value_int64(v, &i) && i == 9);
        assert_true(npf_value_get(d, "b", &v));
        assert_int_equal(v.kind, NPF_V_LIST);
        assert_false(npf_value_get(d, "five", &v));    /* a value, not a key */
        assert_false(npf_value_get(d, "", &v));
        assert_int_equal(npf_value_at(d, 0).kind, NPF_V_NONE);
        npf_vtree_free(t);
}

/* --- the reduce callback -------------------------------------------------------------------- */

typedef struct offers {
        size_t calls;
        npf_vkind_t kinds[16];
        size_t lens[16];
        int error;                      /* returned for a dict with "bad" */
        bool keep_all;
} offers_t;

/* Dicts with "id" become record 3 / id; a dict with "bad" fails with offers->error. */
static int reduce_ids(void *userdata, const npf_value_t *v, npf_value_t *ret, char *err, size_t err_size)
{
        offers_t *o = userdata;
        npf_value_t id;
        uint64_t u;

        if (o->calls < N_OF(o->kinds)) {
                o->kinds[o->calls] = (npf_vkind_t) v->kind;
                o->lens[o->calls] = npf_value_len(*v);
        }
        o->calls++;
        if (v->kind == NPF_V_DICT && npf_value_get(*v, "bad", &id)) {
                snprintf(err, err_size, "the test refuses a bad dict");
                return o->error;
        }
        if (o->keep_all || v->kind != NPF_V_DICT || !npf_value_get(*v, "id", &id) || !npf_value_uint64(id, &u))
                return 0;
        *ret = (npf_value_t) { .kind = NPF_V_RECORD, .rkind = 3, .as.u = u };
        return 1;
}

static npf_value_t id_dict(npf_vtree_t *t, int64_t id)
{
        npf_value_t d = container(t, NPF_V_DICT);

        append_pair(t, d, str_value(t, "id"), int_value(id));
        append_pair(t, d, str_value(t, "payload"), str_value(t, "some text"));
        return d;
}

static void assert_record(npf_value_t v, uint64_t id)
{
        assert_int_equal(v.kind, NPF_V_RECORD);
        assert_int_equal(v.rkind, 3);
        assert_true(v.as.u == id);
        assert_int_equal(npf_value_len(v), 0);
        assert_int_equal(npf_value_at(v, 0).kind, NPF_V_NONE);
}

static void test_reduce_on_append(void **state)
{
        offers_t o = { 0 };
        npf_vtree_t *t = npf_vtree_new(reduce_ids, &o);
        npf_value_t root = container(t, NPF_V_LIST), inner = container(t, NPF_V_LIST), plain;
        char err[ERR_SIZE] = "";

        (void) state;
        /* A dict inside a list inside the root: offered innermost first, when placed. */
        append1(t, inner, id_dict(t, 11));
        assert_int_equal(o.calls, 1);
        assert_record(npf_value_at(inner, 0), 11);
        plain = container(t, NPF_V_DICT);
        append_pair(t, plain, str_value(t, "x"), int_value(1));
        append1(t, inner, plain);
        append1(t, root, inner);
        assert_int_equal(o.calls, 3);
        assert_int_equal(o.kinds[0], NPF_V_DICT);
        assert_int_equal(o.kinds[1], NPF_V_DICT);
        assert_int_equal(o.kinds[2], NPF_V_LIST);
        assert_int_equal(o.lens[2], 2);

        /* Kept containers stay what they were; the root is offered by npf_vtree_finish(). */
        assert_int_equal(npf_value_at(root, 0).kind, NPF_V_LIST);
        assert_int_equal(npf_value_at(npf_value_at(root, 0), 1).kind, NPF_V_DICT);
        assert_int_equal(npf_vtree_finish(t, &root, err, sizeof(err)), 0);
        assert_int_equal(o.calls, 4);
        assert_int_equal(root.kind, NPF_V_LIST);
        assert_record(npf_value_at(npf_value_at(root, 0), 0), 11);
        npf_vtree_free(t);
}

static void test_reduce_root(void **state)
{
        offers_t o = { 0 };
        npf_vtree_t *t = npf_vtree_new(reduce_ids, &o);
        npf_value_t d = id_dict(t, 5), scalar = int_value(3);
        char err[ERR_SIZE] = "";

        (void) state;
        assert_int_equal(npf_vtree_finish(t, &d, err, sizeof(err)), 0);
        assert_record(npf_value_resolve(d), 5);
        assert_int_equal(o.calls, 1);
        /* Not a container: nothing to offer. */
        assert_int_equal(npf_vtree_finish(t, &scalar, err, sizeof(err)), 0);
        assert_int_equal(scalar.as.i, 3);
        assert_int_equal(o.calls, 1);
        npf_vtree_free(t);
}

/* A shared container is offered once; every reference, and the memo, sees the record. */
static void test_reduce_shared(void **state)
{
        offers_t o = { 0 };
        npf_vtree_t *t = npf_vtree_new(reduce_ids, &o);
        npf_value_t a = container(t, NPF_V_LIST), b = container(t, NPF_V_TUPLE), d = id_dict(t, 42), got;
        char err[ERR_SIZE] = "";

        (void) state;
        assert_int_equal(npf_vtree_memo_put(t, 0, d), 0);
        npf_vtree_share(d);
        append1(t, a, d);
        append1(t, a, d);
        append1(t, b, d);
        assert_int_equal(o.calls, 1);
        assert_record(npf_value_at(a, 0), 42);
        assert_record(npf_value_at(a, 1), 42);
        assert_record(npf_value_at(b, 0), 42);
        assert_record(npf_value_resolve(d), 42);
        assert_int_equal(npf_vtree_memo_get(t, 0, &got), 0);
        assert_record(npf_value_resolve(got), 42);
        assert_int_equal(npf_value_len(d), 0);
        assert_false(npf_value_get(d, "id", &got));
        /* Adding to it now is an error, with words. */
        assert_true(npf_vtree_append(t, d, &got, 1, err, sizeof(err)) < 0);
        assert_true(err[0] != '\0');
        npf_vtree_free(t);
}

/* A container only in the memo when it is reduced: the memo gets the record. */
static void test_reduce_memo(void **state)
{
        offers_t o = { 0 };
        npf_vtree_t *t = npf_vtree_new(reduce_ids, &o);
        npf_value_t parent = container(t, NPF_V_LIST), d = id_dict(t, 7), got;

        (void) state;
        assert_int_equal(npf_vtree_memo_len(t), 0);
        assert_int_equal(npf_vtree_memo_put(t, npf_vtree_memo_len(t), d), 0);
        assert_int_equal(npf_vtree_memo_len(t), 1);
        append1(t, parent, d);
        assert_record(npf_value_at(parent, 0), 7);
        assert_int_equal(npf_vtree_memo_get(t, 0, &got), 0);
        assert_record(npf_value_resolve(got), 7);
        /* New containers after a reduction are whole and empty. */
        for (int i = 0; i < 100; i++) {
                npf_value_t c = container(t, NPF_V_DICT);
                append_pair(t, c, int_value(i), int_value(i));
                append1(t, parent, c);
        }
        assert_int_equal(npf_value_len(parent), 101);
        assert_record(npf_value_at(parent, 0), 7);
        for (size_t i = 1; i <= 100; i++)
                assert_int_equal(npf_value_len(npf_value_at(parent, i)), 1);
        npf_vtree_free(t);
}

static void test_memo(void **state)
{
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t got = int_value(99);
        int64_t i;

        (void) state;
        assert_int_equal(npf_vtree_memo_get(t, 0, &got), -ENOENT);
        assert_int_equal(got.kind, NPF_V_NONE);
        assert_int_equal(npf_vtree_memo_put(t, 3, int_value(33)), 0);
        assert_int_equal(npf_vtree_memo_len(t), 4);
        assert_int_equal(npf_vtree_memo_get(t, 2, &got), -ENOENT);
        assert_int_equal(npf_vtree_memo_get(t, 4, &got), -ENOENT);
        assert_int_equal(npf_vtree_memo_get(t, 3, &got), 0);
        assert_true(npf_value_int64(got, &i) && i == 33);
        /* A slot put again holds the new value. */
        assert_int_equal(npf_vtree_memo_put(t, 3, int_value(34)), 0);
        assert_int_equal(npf_vtree_memo_get(t, 3, &got), 0);
        assert_true(npf_value_int64(got, &i) && i == 34);
        assert_int_equal(npf_vtree_memo_put(t, UINT64_MAX, int_value(1)), -E2BIG);
        assert_int_equal(npf_vtree_memo_put(t, (uint64_t) UINT32_MAX + 1, int_value(1)), -E2BIG);
        npf_vtree_free(t);
}

static void test_reduce_error(void **state)
{
        offers_t o = { .error = -EBADMSG };
        npf_vtree_t *t = npf_vtree_new(reduce_ids, &o);
        npf_value_t list = container(t, NPF_V_LIST), bad = container(t, NPF_V_DICT), root;
        char err[ERR_SIZE] = "";

        (void) state;
        append_pair(t, bad, str_value(t, "bad"), int_value(1));
        assert_int_equal(npf_vtree_append(t, list, &bad, 1, err, sizeof(err)), -EBADMSG);
        assert_string_equal(err, "the test refuses a bad dict");
        npf_vtree_free(t);

        /* The same through npf_vtree_finish() and npf_jsontree_load(). */
        o = (offers_t) { .error = -ERANGE };
        t = npf_vtree_new(reduce_ids, &o);
        bad = container(t, NPF_V_DICT);
        append_pair(t, bad, str_value(t, "bad"), int_value(1));
        err[0] = '\0';
        assert_int_equal(npf_vtree_finish(t, &bad, err, sizeof(err)), -ERANGE);
        assert_string_equal(err, "the test refuses a bad dict");
        static const char text[] = "[1, [2, {\"bad\": true}], 3]";
        root = int_value(77);
        err[0] = '\0';
        assert_int_equal(npf_jsontree_load(text, strlen(text), t, NULL, NULL, &root, err, sizeof(err)), -ERANGE);
        assert_string_equal(err, "the test refuses a bad dict");
        assert_int_equal(root.as.i, 77);
        npf_vtree_free(t);
}

/* Reduced containers give their items back: the tree shrinks. */
static void test_reduce_frees_items(void **state)
{
        offers_t o = { 0 };
        npf_vtree_t *t = npf_vtree_new(reduce_ids, &o);
        npf_value_t list = container(t, NPF_V_LIST), d = container(t, NPF_V_DICT);
        size_t full;

        (void) state;
        append_pair(t, d, str_value(t, "id"), int_value(1));
        for (int64_t i = 0; i < 10000; i++)
                append_pair(t, d, int_value(i), int_value(i));
        full = npf_vtree_bytes(t);
        append1(t, list, d);
        assert_record(npf_value_at(list, 0), 1);
        assert_true(npf_vtree_bytes(t) + 10000 * 2 * sizeof(npf_value_t) <= full);
        npf_vtree_free(t);
}

/* --- JSON ----------------------------------------------------------------------------------- */

static void test_from_json(void **state)
{
        static const char text[] = "{\"int\": -9223372036854775808, \"max\": 9223372036854775807, \"real\": 1.5,"
                                   " \"t\": true, \"f\": false, \"n\": null, \"s\": \"x\\u00e9\\u2713\","
                                   " \"empty\": \"\", \"list\": [1, [2, [3]], {}], \"obj\": {\"k\": \"v\"}}";
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t root = int_value(0), v;
        char err[ERR_SIZE] = "", *copy = strdup(text);
        int64_t i;
        double d;

        (void) state;
        assert_non_null(copy);
        assert_int_equal(npf_jsontree_load(copy, strlen(copy), t, NULL, NULL, &root, err, sizeof(err)), 0);
        /* Strings are copies: the text may go. */
        memset(copy, 'x', strlen(copy));
        free(copy);
        assert_int_equal(root.kind, NPF_V_DICT);
        assert_int_equal(npf_value_len(root), 10);
        assert_true(npf_value_get(root, "int", &v) && npf_value_int64(v, &i) && i == INT64_MIN);
        assert_true(npf_value_get(root, "max", &v) && npf_value_int64(v, &i) && i == INT64_MAX);
        assert_true(npf_value_get(root, "real", &v) && v.kind == NPF_V_FLOAT && npf_value_double(v, &d) && d == 1.5);
        assert_true(npf_value_get(root, "t", &v) && v.kind == NPF_V_BOOL && npf_value_int64(v, &i) && i == 1);
        assert_true(npf_value_get(root, "f", &v) && v.kind == NPF_V_BOOL && npf_value_int64(v, &i) && i == 0);
        assert_true(npf_value_get(root, "n", &v) && v.kind == NPF_V_NONE);
        assert_true(npf_value_get(root, "s", &v) && npf_value_streq(v, "x\xc3\xa9\xe2\x9c\x93"));
        assert_true(npf_value_get(root, "empty", &v) && npf_value_streq(v, ""));
        assert_true(npf_value_get(root, "list", &v));
        assert_int_equal(v.kind, NPF_V_LIST);
        assert_int_equal(npf_value_len(v), 3);
        assert_true(npf_value_int64(npf_value_at(npf_value_at(npf_value_at(v, 1), 1), 0), &i) && i == 3);
        assert_int_equal(npf_value_at(v, 2).kind, NPF_V_DICT);
        assert_true(npf_value_get(root, "obj", &v) && npf_value_get(v, "k", &v) && npf_value_streq(v, "v"));
        npf_vtree_free(t);
}

/* JSON strings may hold NUL; the tree keeps every byte. */
static void test_from_json_nul(void **state)
{
        static const char text[] = "[\"a\\u0000b\"]";
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t root, s;
        char err[ERR_SIZE] = "";

        (void) state;
        assert_int_equal(npf_jsontree_load(text, strlen(text), t, NULL, NULL, &root, err, sizeof(err)), 0);
        s = npf_value_at(root, 0);
        assert_int_equal(s.len, 3);
        assert_memory_equal(s.as.s, "a\0b", 3);
        npf_vtree_free(t);
}

static void test_from_json_reduced(void **state)
{
        offers_t o = { 0 };
        npf_vtree_t *t = npf_vtree_new(reduce_ids, &o);
        static const char text[] = "{\"entries\": [{\"id\": 1}, {\"id\": 2, \"more\": [1, 2]}, {\"x\": 3}]}";
        npf_value_t root, entries;
        char err[ERR_SIZE] = "";

        (void) state;
        assert_int_equal(npf_jsontree_load(text, strlen(text), t, NULL, NULL, &root, err, sizeof(err)), 0);
        /* Six containers: [1, 2], three dicts, the list, the root. */
        assert_int_equal(o.calls, 6);
        assert_true(npf_value_get(root, "entries", &entries));
        assert_record(npf_value_at(entries, 0), 1);
        assert_record(npf_value_at(entries, 1), 2);
        assert_int_equal(npf_value_at(entries, 2).kind, NPF_V_DICT);
        npf_vtree_free(t);
}

/* Two trees hold the same values, containers item by item. */
static bool same_tree(npf_value_t a, npf_value_t b)
{
        a = npf_value_resolve(a);
        b = npf_value_resolve(b);
        if (a.kind != b.kind)
                return false;
        switch (a.kind) {
        case NPF_V_NONE:
                return true;
        case NPF_V_BOOL:
        case NPF_V_INT:
                return a.as.i == b.as.i && a.flags == b.flags;
        case NPF_V_FLOAT:
                return memcmp(&a.as.f, &b.as.f, sizeof(double)) == 0;
        case NPF_V_STR:
                return a.len == b.len && memcmp(a.as.s, b.as.s, a.len) == 0;
        case NPF_V_LIST:
        case NPF_V_DICT:
                if (npf_value_len(a) != npf_value_len(b))
                        return false;
                for (size_t i = 0; i < npf_value_len(a); i++)
                        if (!same_tree(npf_value_at(a, i), npf_value_at(b, i)))
                                return false;
                return true;
        default:
                return false;
        }
}

/* The outer levels walked by npf_jsontree_load(), the rest decoded by jansson: the same tree
 * as jansson's decoding of the whole document, whatever the spacing and nesting. */
static void test_json_walked_as_whole(void **state)
{
        (void) state;
        static const char *const docs[] = {
                "{}", "[]", " [ ] ", "{\"a\":1}", "[1,2,3]", "[1,-2.5e3,true,false,null,\"s\"]",
                "{\"a\":1,\"b\":-2.5e-3,\"c\":true,\"d\":null,\"e\":\"x\",\"f\":[],\"g\":{}}",
                "{\"device_traces\":[[{\"action\":\"alloc\",\"addr\":1,\"frames\":[{\"name\":\"f\",\"line\":3}]},"
                "{\"action\":\"free\",\"addr\":1}],[]],\"segments\":[{\"blocks\":[{\"size\":1},{\"size\":2}]}]}",
                "[[[[[1]]]],[[[2,[3]]]],{\"k\":[{\"k\":[{\"k\":1}]}]}]",
                "\n\t{ \"a\" :\r\n [ 1 ,\n2 ] , \"b\" : { \"c\" : [ { } ] } }\n",
                "[\"\\u00e9\\u2713\\ud83d\\ude00\",\"a\\\"b\\\\c\\/d\\n\",\"\\u0000\"]",
                "[9223372036854775807,-9223372036854775808,0.1,1e300]",
                "[{\"same\":\"short\"},{\"same\":\"short\"},{\"same\":\"short string repeated\"}]",
        };
        for (size_t k = 0; k < N_OF(docs); k++) {
                npf_vtree_t *walked = npf_vtree_new(NULL, NULL), *whole = npf_vtree_new(NULL, NULL);
                npf_value_t a, b;
                char err[ERR_SIZE] = "";
                json_t *j = json_loadb(docs[k], strlen(docs[k]), JSON_ALLOW_NUL, NULL);

                assert_non_null(j);
                assert_int_equal(npf_jsontree_value(whole, j, &b, err, sizeof(err)), 0);
                assert_int_equal(npf_vtree_finish(whole, &b, err, sizeof(err)), 0);
                json_decref(j);
                if (npf_jsontree_load(docs[k], strlen(docs[k]), walked, NULL, NULL, &a, err, sizeof(err)) != 0)
                        fail_msg("%s: %s", docs[k], err);
                if (!same_tree(a, b))
                        fail_msg("%s: the walked tree differs from jansson's", docs[k]);
                npf_vtree_free(walked);
                npf_vtree_free(whole);
        }

        /* A key given twice: the later value, as jansson and Python keep it. */
        static const char dup[] = "{\"dup\": 1, \"x\": [{\"dup\": 3, \"dup\": 4}], \"dup\": 2}";
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t root, v, x;
        char err[ERR_SIZE] = "";
        int64_t i;
        assert_int_equal(npf_jsontree_load(dup, strlen(dup), t, NULL, NULL, &root, err, sizeof(err)), 0);
        assert_true(npf_value_get(root, "dup", &v) && npf_value_int64(v, &i) && i == 2);
        assert_true(npf_value_get(root, "x", &x) && npf_value_get(npf_value_at(x, 0), "dup", &v) &&
                    npf_value_int64(v, &i) && i == 4);
        npf_vtree_free(t);
}

/* A broken document is reported where jansson would report it in the whole text, in its
 * words, whether the walk or jansson finds it; nothing is returned. */
static void test_json_errors_placed(void **state)
{
        (void) state;
        static const char *const docs[] = {
                "[1 2]", "[1,]", "[1,,2]", "{\"a\" 1}", "{\"a\":1,}", "{1:2}", "{\"a\":1 \"b\":2}", "[1] x",
                "[1] [2]", "{\"a\":[1,2}", "[", "{", "{\"a\"", "{\"a\":", "[\"abc", "[tru]", "[1, true false]",
                "{\"device_traces\":[[{\"action\":\"alloc\",\"addr\":}]]}",
                "{\n  \"device_traces\": [\n    [\n      {\"action\": \"alloc\", \"addr\": 12 \"size\": 3}\n"
                "    ]\n  ]\n}",
                "{\n  \"segments\": [\n    {\"blocks\": [1, 2,, 3]}\n  ],\n  \"x\": 1 2\n}",
                "[\"\\u00e9\\u00e9\", {\"k\": 01}]", "[\"\\u00e9\\u00e9\" 1]", "[1e999]", "[\"a\\qb\"]",
                "[99999999999999999999]", "{\"a\":1}}", "[{\"a\":1}{\"b\":2}]", "[1x]", "[1:2]", "[1.5.5]",
                "{\"a\\u0000b\":1}", "{\"segments\":[{\"blocks\":[{\"size\":1} {\"size\":2}]}]}",
                "{\"segments\":[{\"blocks\":[{\"size\":1},{\"size\" 2}]}]}", "[[[[1 2]]]]", "[truex]",
        };
        for (size_t k = 0; k < N_OF(docs); k++) {
                npf_vtree_t *t = npf_vtree_new(NULL, NULL);
                npf_value_t root = int_value(77);
                char err[ERR_SIZE] = "", want[ERR_SIZE];
                json_error_t je;

                assert_null(json_loadb(docs[k], strlen(docs[k]), JSON_ALLOW_NUL, &je));
                snprintf(want, sizeof(want), "line %d, column %d: %s", je.line, je.column, je.text);
                assert_int_equal(npf_jsontree_load(docs[k], strlen(docs[k]), t, NULL, NULL, &root, err, sizeof(err)),
                                 -EINVAL);
                if (strcmp(err, want) != 0)
                        fail_msg("%s: \"%s\", jansson says \"%s\"", docs[k], err, want);
                assert_int_equal(root.as.i, 77);
                npf_vtree_free(t);
        }

        /* A raw NUL byte is no JSON text (jansson would skip one after a number). */
        static const char nul[] = "{\"device_traces\":[[{\"addr\":1\0,\"size\":8}]]}";
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t root;
        char err[ERR_SIZE] = "";
        assert_int_equal(npf_jsontree_load(nul, sizeof(nul) - 1, t, NULL, NULL, &root, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, "line 1, column 29: a NUL byte, which JSON text never holds near '\\x00'");
        npf_vtree_free(t);
}

/* As deep as jansson parses (2048 levels): built and freed without trouble. */
static void test_from_json_deep(void **state)
{
        const size_t depth = 2000;
        char *text = malloc(2 * depth + 1);
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t v;
        char err[ERR_SIZE] = "";

        (void) state;
        assert_non_null(text);
        memset(text, '[', depth);
        memset(text + depth, ']', depth);
        text[2 * depth] = '\0';
        assert_int_equal(npf_jsontree_load(text, 2 * depth, t, NULL, NULL, &v, err, sizeof(err)), 0);
        for (size_t d = 1; d < depth; d++) {
                assert_int_equal(npf_value_len(v), 1);
                v = npf_value_at(v, 0);
        }
        assert_int_equal(v.kind, NPF_V_LIST);
        assert_int_equal(npf_value_len(v), 0);
        npf_vtree_free(t);
        free(text);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_free_null),
                cmocka_unit_test(test_integers),
                cmocka_unit_test(test_outputs_untouched_on_failure),
                cmocka_unit_test(test_strings),
                cmocka_unit_test(test_kind_names),
                cmocka_unit_test(test_sequences),
                cmocka_unit_test(test_dicts),
                cmocka_unit_test(test_reduce_on_append),
                cmocka_unit_test(test_reduce_root),
                cmocka_unit_test(test_reduce_shared),
                cmocka_unit_test(test_reduce_memo),
                cmocka_unit_test(test_memo),
                cmocka_unit_test(test_reduce_error),
                cmocka_unit_test(test_reduce_frees_items),
                cmocka_unit_test(test_from_json),
                cmocka_unit_test(test_from_json_nul),
                cmocka_unit_test(test_from_json_reduced),
                cmocka_unit_test(test_from_json_deep),
                cmocka_unit_test(test_json_walked_as_whole),
                cmocka_unit_test(test_json_errors_placed),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
