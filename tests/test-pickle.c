/* SPDX-License-Identifier: MIT */
/*
 * The data-only pickle reader, npf_pickle_load(): CPython's own pickles of protocols 0 to 5
 * read exactly, pickles that would run code refused by name and offset, truncated, malformed
 * and hostile pickles refused with a clear error and never a crash, the reduce callback, and
 * the real torch_npu snapshots against facts Python derived from them.
 *
 * The fixtures come from tests/pickle-fixtures.h, written by tests/gen-pickle-fixtures.py
 * with CPython's pickle module. Each document there also has a canonical text, written from
 * the Python objects; canon_value() below writes the same text from the C tree through the
 * accessors, so a fixture is checked value by value, bit for bit.
 */
#include "replay/pickle.h"
#include "replay/value.h"
#include "tests/pickle-direct.h"
#include "tests/pickle-fixtures.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
/* A string literal as bytes and its length, without the terminating NUL. */
#define BYTES(s) (const unsigned char *) (s), sizeof(s) - 1

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif

#ifdef HAVE_ASAN
/* An allocation of gigabytes fails (NULL) instead of being served, as it is without ASan
 * under the address-space limit of test_memo_index_costs_no_gigabytes(). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
        return "allocator_may_return_null=1:max_allocation_size_mb=2048";
}
#endif

/* --- loading ------------------------------------------------------------------------------- */

typedef struct loaded {
        unsigned char *buf;
        npf_vtree_t *tree;
        npf_value_t root;
        int rc;
        char err[NPF_PICKLE_ERR_MAX];
} loaded_t;

static const npf_value_t untouched = { .kind = 0xee, .flags = 0xee, .rkind = 0xeeee, .len = 0xeeeeeeee };

/*
 * Load the @len bytes at @data from a heap copy of exactly that size (AddressSanitizer sees a
 * read past its end) into a new tree with @reduce, and check what every result promises: 0
 * and a root, or a negative errno, a terminated non-empty message and the root untouched.
 */
static int load_direct(loaded_t *l, const void *data, size_t len, unsigned flags, npf_vtree_reduce_cb reduce,
                       void *userdata, const npf_pickle_direct_t *direct);

static int load_flags(loaded_t *l, const void *data, size_t len, unsigned flags, npf_vtree_reduce_cb reduce,
                      void *userdata)
{
        return load_direct(l, data, len, flags, reduce, userdata, NULL);
}

/* load_flags() with a direct reader of dicts (npf_pickle_load_direct()). */
static int load_direct(loaded_t *l, const void *data, size_t len, unsigned flags, npf_vtree_reduce_cb reduce,
                       void *userdata, const npf_pickle_direct_t *direct)
{
        *l = (loaded_t) { .buf = malloc(len ? len : 1), .root = untouched };
        assert_non_null(l->buf);
        if (len)
                memcpy(l->buf, data, len);
        l->tree = npf_vtree_new(reduce, userdata);
        assert_non_null(l->tree);
        memset(l->err, 'x', sizeof(l->err));
        l->rc = npf_pickle_load_direct(l->buf, len, l->tree, flags, direct, NULL, NULL, &l->root, l->err);
        if (l->rc < 0) {
                assert_non_null(memchr(l->err, '\0', sizeof(l->err)));
                assert_true(l->err[0] != '\0');
                assert_memory_equal(&l->root, &untouched, sizeof(untouched));
        } else {
                assert_int_equal(l->rc, 0);
                assert_true(l->root.kind != untouched.kind);
        }
        return l->rc;
}

static int load(loaded_t *l, const void *data, size_t len, npf_vtree_reduce_cb reduce, void *userdata)
{
        return load_flags(l, data, len, 0, reduce, userdata);
}

static void unload(loaded_t *l)
{
        l->tree = npf_vtree_free(l->tree);
        free(l->buf);
        l->buf = NULL;
}

/* Load @data and expect @want (or @alt, when not 0). Return: whether it came; if not, why. */
static bool rc_is(const char *what, const unsigned char *data, size_t len, int want, int alt)
{
        loaded_t l;
        int rc = load(&l, data, len, NULL, NULL);
        bool ok = rc == want || (alt != 0 && rc == alt);

        if (!ok)
                print_error("%s: expected %d (%s) or %d, got %d (%s): %s\n", what, want, strerror(-want), alt, rc,
                            rc < 0 ? strerror(-rc) : "success", rc < 0 ? l.err : "");
        unload(&l);
        return ok;
}

static void expect_rc(const char *what, const unsigned char *data, size_t len, int want)
{
        assert_true(rc_is(what, data, len, want, 0));
}

/* A character that can be part of an opcode's name. */
static bool in_name(char c)
{
        return c == '_' || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* @err names @word as a whole word, and "offset @offset" (not a longer number). */
static void assert_names(const char *err, const char *word, size_t offset)
{
        char off[32];
        size_t n = strlen(word);
        bool found = false;

        for (const char *p = err; (p = strstr(p, word)); p++)
                found |= (p == err || !in_name(p[-1])) && !in_name(p[n]);
        if (!found)
                fail_msg("\"%s\" does not name %s", err, word);
        snprintf(off, sizeof(off), "offset %zu", offset);
        const char *p = strstr(err, off);
        if (!p || (p[strlen(off)] >= '0' && p[strlen(off)] <= '9'))
                fail_msg("\"%s\" does not say %s", err, off);
}

/* --- the canonical text (see Canon in tests/gen-pickle-fixtures.py) ------------------------ */

typedef struct canon {
        char *text;             /* NULL when only the length and hash are kept */
        size_t len, cap;
        uint64_t hash;
} canon_t;

#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
        const unsigned char *s = p;

        for (size_t i = 0; i < n; i++)
                h = (h ^ s[i]) * FNV_PRIME;
        return h;
}

/* @n bytes of @piece onto @c. It asserts nothing: offered_value() uses it off the test's thread. */
static void canon_append(canon_t *c, const char *piece, size_t n)
{
        c->hash = fnv1a(c->hash, piece, n);
        if (c->text) {
                if (c->len + n + 1 > c->cap) {
                        c->cap = (c->len + n + 1) * 2;
                        if (!(c->text = realloc(c->text, c->cap)))
                                abort();
                }
                memcpy(c->text + c->len, piece, n + 1);
        }
        c->len += n;
}

static void canon_put(canon_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void canon_put(canon_t *c, const char *fmt, ...)
{
        char piece[128];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(piece, sizeof(piece), fmt, ap);
        va_end(ap);
        assert_true(n > 0 && (size_t) n < sizeof(piece));
        canon_append(c, piece, (size_t) n);
}

static void canon_blob(canon_t *c, char tag, const char *s, size_t len)
{
        if (len > 40) {
                canon_put(c, "%c%zu#%016" PRIx64 ",", tag, len, fnv1a(FNV_OFFSET, s, len));
                return;
        }
        canon_put(c, "%c%zu:", tag, len);
        for (size_t i = 0; i < len; i++)
                canon_put(c, "%02x", (unsigned char) s[i]);
        canon_put(c, ",");
}

/* @v, resolved, as canonical text; the accessors are checked against each other on the way. */
static void canon_value(canon_t *c, npf_value_t v, unsigned depth)
{
        static const char *const brackets[] = {
                [NPF_V_LIST] = "[]", [NPF_V_TUPLE] = "()", [NPF_V_SET] = "<>", [NPF_V_DICT] = "{}",
        };
        npf_value_t k, item;
        int64_t i;
        uint64_t u;
        double f;

        assert_true(depth < 64);
        if (v.kind != NPF_V_LIST && v.kind != NPF_V_TUPLE && v.kind != NPF_V_SET && v.kind != NPF_V_DICT)
                assert_int_equal(npf_value_len(v), 0);
        switch (v.kind) {
        case NPF_V_NONE:
                canon_put(c, "N,");
                return;
        case NPF_V_BOOL:
                assert_true(npf_value_int64(v, &i) && (i == 0 || i == 1));
                canon_put(c, i ? "T," : "F,");
                return;
        case NPF_V_INT:
                if (npf_value_int64(v, &i)) {
                        assert_int_equal(v.flags, 0);
                        canon_put(c, "i%" PRId64 ",", i);
                } else if (npf_value_uint64(v, &u)) {
                        assert_int_equal(v.flags, NPF_VF_UNSIGNED);
                        assert_true(u > (uint64_t) INT64_MAX);
                        canon_put(c, "u%" PRIu64 ",", u);
                } else {
                        assert_int_equal(v.flags, NPF_VF_HUGE);
                        assert_false(npf_value_double(v, &f));
                        canon_put(c, v.as.i > 0 ? "h+," : v.as.i < 0 ? "h-," : "h?,");
                }
                return;
        case NPF_V_FLOAT:
                assert_true(npf_value_double(v, &f));
                assert_false(npf_value_int64(v, &i));
                memcpy(&u, &f, sizeof(u));
                canon_put(c, "f%016" PRIx64 ",", u);
                return;
        case NPF_V_STR:
        case NPF_V_BYTES:
                canon_blob(c, v.kind == NPF_V_STR ? 's' : 'b', v.as.s, v.len);
                return;
        case NPF_V_LIST:
        case NPF_V_TUPLE:
        case NPF_V_SET:
        case NPF_V_DICT: {
                size_t n = npf_value_len(v);
                canon_put(c, "%c", brackets[v.kind][0]);
                for (size_t j = 0; j < n; j++) {
                        if (v.kind == NPF_V_DICT) {
                                assert_true(npf_value_pair(v, j, &k, &item));
                                canon_value(c, k, depth + 1);
                        } else {
                                item = npf_value_at(v, j);
                        }
                        canon_value(c, item, depth + 1);
                }
                assert_int_equal(npf_value_at(v, n).kind, NPF_V_NONE);
                assert_false(npf_value_pair(v, n, &k, &item));
                canon_put(c, "%c,", brackets[v.kind][1]);
                return;
        }
        case NPF_V_RECORD:      /* only where a reduce callback made one */
                canon_put(c, "R%u.%" PRIu64 ",", v.rkind, v.as.u);
                return;
        default:
                fail_msg("a value of kind %u (%s) in a pickle", v.kind, npf_value_kind_name(v));
        }
}

/* The tree of @fx is the document Python pickled, to the bit. */
static void check_canon(const struct fx_doc *fx, npf_value_t root)
{
        canon_t c = { .text = fx->canon ? malloc(1) : NULL, .cap = 1, .hash = FNV_OFFSET };

        if (c.text)
                c.text[0] = '\0';
        canon_value(&c, npf_value_resolve(root), 0);
        if (fx->canon) {
                size_t i = 0;
                while (i < c.len && fx->canon[i] == c.text[i])
                        i++;
                if (i != c.len || fx->canon[i] != '\0') {
                        size_t from = i > 40 ? i - 40 : 0;
                        print_error("%s: the trees differ at character %zu\n  python: ...%.80s\n  reader: ...%.80s\n",
                                    fx->name, i, fx->canon + from, c.text + from);
                        free(c.text);
                        fail();
                }
        }
        free(c.text);
        if (c.len != fx->canon_len || c.hash != fx->canon_hash)
                fail_msg("%s: canonical text of %zu bytes, hash %016" PRIx64 "; Python's: %zu bytes, hash %016" PRIx64,
                         fx->name, c.len, c.hash, fx->canon_len, fx->canon_hash);
}

/* --- the documents, through the accessors --------------------------------------------------- */

static npf_value_t key(npf_value_t dict, const char *k)
{
        npf_value_t v;

        if (!npf_value_get(dict, k, &v))
                fail_msg("no key \"%s\" in the %s", k, npf_value_kind_name(dict));
        return v;
}

static void assert_i64(npf_value_t v, int64_t want)
{
        int64_t i;

        assert_int_equal(v.kind, NPF_V_INT);
        assert_true(npf_value_int64(v, &i));
        assert_true(i == want);
}

static void assert_bytes(npf_value_t v, npf_vkind_t kind, const void *s, size_t len)
{
        assert_int_equal(v.kind, kind);
        assert_int_equal(v.len, len);
        if (len)
                assert_memory_equal(v.as.s, s, len);
}

static void assert_seq(npf_value_t v, npf_vkind_t kind, size_t len)
{
        assert_int_equal(v.kind, kind);
        assert_int_equal(npf_value_len(v), len);
}

/* @v is the integer @how says: 'i' @i, 'u' @u (above INT64_MAX), '+' or '-' wider than 64 bits. */
static bool int_is(npf_value_t v, char how, int64_t i, uint64_t u)
{
        int64_t gi;
        uint64_t gu;

        if (v.kind != NPF_V_INT)
                return false;
        switch (how) {
        case 'i':
                return v.flags == 0 && npf_value_int64(v, &gi) && gi == i;
        case 'u':
                return v.flags == NPF_VF_UNSIGNED && npf_value_uint64(v, &gu) && gu == u && !npf_value_int64(v, &gi);
        default:
                return v.flags == NPF_VF_HUGE && !npf_value_int64(v, &gi) && !npf_value_uint64(v, &gu) &&
                       (how == '+' ? v.as.i > 0 : v.as.i < 0);
        }
}

/* INTS of the generator: how each must read. */
static const struct want_int {
        char how;       /* i: int64, u: uint64 above INT64_MAX, +/-: wider than 64 bits */
        int64_t i;
        uint64_t u;
} want_ints[] = {
        { 'i', 0, 0 }, { 'i', 1, 0 }, { 'i', 255, 0 }, { 'i', 256, 0 }, { 'i', 65535, 0 }, { 'i', 65536, 0 },
        { 'i', -1, 0 }, { 'i', -255, 0 }, { 'i', -256, 0 }, { 'i', INT32_MAX, 0 }, { 'i', INT32_MIN, 0 },
        { 'i', INT64_C(2147483648), 0 }, { 'i', INT64_C(-2147483649), 0 }, { 'i', INT64_C(4294967296), 0 },
        { 'i', INT64_MAX, 0 }, { 'i', INT64_MIN, 0 }, { 'u', 0, UINT64_C(9223372036854775808) },
        { 'u', 0, UINT64_MAX }, { '+', 0, 0 }, { '-', 0, 0 }, { '+', 0, 0 }, { '-', 0, 0 }, { '+', 0, 0 },
        { '-', 0, 0 },
};

static void check_ints(npf_value_t ints)
{
        assert_seq(ints, NPF_V_LIST, N_OF(want_ints));
        for (size_t i = 0; i < N_OF(want_ints); i++)
                if (!int_is(npf_value_at(ints, i), want_ints[i].how, want_ints[i].i, want_ints[i].u))
                        fail_msg("ints[%zu] is not what Python pickled", i);
}

static void check_floats(npf_value_t floats)
{
        static const double want[] = { 0.0, -0.0, 1.5, -2.25, 1e308, 5e-324 };
        double f;

        assert_seq(floats, NPF_V_LIST, 10);
        for (size_t i = 0; i < N_OF(want); i++) {
                assert_true(npf_value_double(npf_value_at(floats, i), &f));
                assert_true(f == want[i]);
                assert_int_equal(!!signbit(f), !!signbit(want[i]));
        }
        assert_true(npf_value_double(npf_value_at(floats, 6), &f) && isinf(f) && f > 0);
        assert_true(npf_value_double(npf_value_at(floats, 7), &f) && isinf(f) && f < 0);
        assert_true(npf_value_double(npf_value_at(floats, 8), &f) && isnan(f));
        assert_true(npf_value_double(npf_value_at(floats, 9), &f) && f == 0.1);
}

static void check_strs(npf_value_t strs)
{
        static const char nul[] = "back\\slash\nnewline\ttab\0nul";
        char big[300];

        memset(big, 'x', sizeof(big));

        assert_seq(strs, NPF_V_LIST, 7);
        assert_true(npf_value_streq(npf_value_at(strs, 0), ""));
        assert_true(npf_value_streq(npf_value_at(strs, 1), "a"));
        assert_true(npf_value_streq(npf_value_at(strs, 2), "hello"));
        assert_true(npf_value_streq(npf_value_at(strs, 3), "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x90\x8d"));
        assert_bytes(npf_value_at(strs, 4), NPF_V_STR, nul, sizeof(nul) - 1);
        assert_true(npf_value_streq(npf_value_at(strs, 5), "\xc3\xbf\xc4\x80"));
        assert_bytes(npf_value_at(strs, 6), NPF_V_STR, big, sizeof(big));
        assert_false(npf_value_streq(npf_value_at(strs, 2), "hell"));
        assert_false(npf_value_streq(npf_value_at(strs, 1), "ab"));
}

static void check_containers(npf_value_t doc)
{
        npf_value_t tuples = key(doc, "tuples"), lists = key(doc, "lists"), nested = key(doc, "nested");
        npf_value_t shared = key(doc, "shared"), a, b, t;

        assert_seq(tuples, NPF_V_LIST, 5);
        assert_seq(lists, NPF_V_LIST, 5);
        for (size_t n = 0; n < 5; n++) {
                assert_seq(npf_value_at(tuples, n), NPF_V_TUPLE, n);
                assert_seq(npf_value_at(lists, n), NPF_V_LIST, n);
                for (size_t i = 0; i < n && n > 1; i++) {
                        assert_i64(npf_value_at(npf_value_at(tuples, n), i), (int64_t) i + 1);
                        assert_i64(npf_value_at(npf_value_at(lists, n), i), (int64_t) i + 1);
                }
        }
        assert_i64(npf_value_at(npf_value_at(tuples, 1), 0), 1);
        assert_int_equal(npf_value_at(npf_value_at(lists, 1), 0).kind, NPF_V_NONE);

        assert_seq(key(key(key(nested, "a"), "b"), "c"), NPF_V_DICT, 0);
        assert_i64(key(npf_value_at(key(nested, "k"), 1), "x"), 1);
        t = npf_value_at(npf_value_at(npf_value_at(npf_value_at(key(nested, "t"), 0), 1), 1), 0);
        assert_i64(t, 3);

        /* The same list three times: the memo hands out one container, not copies. */
        assert_seq(shared, NPF_V_LIST, 3);
        a = npf_value_at(shared, 0);
        b = npf_value_at(shared, 1);
        t = npf_value_at(npf_value_at(shared, 2), 0);
        assert_seq(a, NPF_V_LIST, 2);
        assert_ptr_equal(a.as.c, b.as.c);
        assert_ptr_equal(a.as.c, t.as.c);
        assert_i64(npf_value_at(a, 0), 1);
        assert_true(npf_value_streq(npf_value_at(a, 1), "two"));
}

static void check_keys(npf_value_t keys)
{
        static const char *const values[] = { "one", "minus one", "huge", "float", "tuple", "none", "false" };
        npf_value_t k[N_OF(values)], v;
        double f;
        int64_t i;

        assert_seq(keys, NPF_V_DICT, N_OF(values));
        for (size_t j = 0; j < N_OF(values); j++) {
                assert_true(npf_value_pair(keys, j, &k[j], &v));
                assert_true(npf_value_streq(v, values[j]));
        }
        assert_i64(k[0], 1);
        assert_i64(k[1], -1);
        assert_true(int_is(k[2], '+', 0, 0));
        assert_true(k[3].kind == NPF_V_FLOAT && npf_value_double(k[3], &f) && f == 1.5);
        assert_seq(k[4], NPF_V_TUPLE, 2);
        assert_int_equal(k[5].kind, NPF_V_NONE);
        assert_true(k[6].kind == NPF_V_BOOL && npf_value_int64(k[6], &i) && i == 0);
        /* A dict without string keys has no string key to find. */
        assert_false(npf_value_get(keys, "one", &v));
}

/* The small document of tests/gen-pickle-fixtures.py, item by item through the accessors. */
static void check_small_doc(npf_value_t doc, int proto)
{
        unsigned char all[256];
        npf_value_t v;
        int64_t i;
        uint64_t u;

        assert_seq(doc, NPF_V_DICT, 11 + (proto >= 3) + (proto >= 4) + (proto >= 5));
        assert_string_equal(npf_value_kind_name(doc), "dict");
        assert_int_equal(key(doc, "none").kind, NPF_V_NONE);
        v = key(doc, "true");
        assert_true(v.kind == NPF_V_BOOL && npf_value_int64(v, &i) && i == 1 && npf_value_uint64(v, &u) && u == 1);
        v = key(doc, "false");
        assert_true(v.kind == NPF_V_BOOL && npf_value_int64(v, &i) && i == 0);
        assert_false(npf_value_get(doc, "absent", &v));
        assert_false(npf_value_get(doc, "non", &v));
        check_ints(key(doc, "ints"));
        check_floats(key(doc, "floats"));
        check_strs(key(doc, "strs"));
        check_containers(doc);
        check_keys(key(doc, "keys"));

        if (proto >= 3) {
                npf_value_t b = key(doc, "bytes");
                for (size_t j = 0; j < sizeof(all); j++)
                        all[j] = (unsigned char) j;
                assert_seq(b, NPF_V_LIST, 4);
                assert_bytes(npf_value_at(b, 0), NPF_V_BYTES, "", 0);
                assert_bytes(npf_value_at(b, 1), NPF_V_BYTES, "\x00\xff", 2);
                assert_bytes(npf_value_at(b, 2), NPF_V_BYTES, all, sizeof(all));
                assert_int_equal(npf_value_at(b, 3).len, 300);
                assert_string_equal(npf_value_kind_name(npf_value_at(b, 1)), "bytes");
        }
        if (proto >= 4) {
                npf_value_t s = key(doc, "sets");
                int64_t sum = 0;
                assert_seq(s, NPF_V_LIST, 5);
                assert_seq(npf_value_at(s, 0), NPF_V_SET, 0);
                assert_seq(npf_value_at(s, 1), NPF_V_SET, 3);
                assert_seq(npf_value_at(s, 2), NPF_V_SET, 0);
                assert_seq(npf_value_at(s, 3), NPF_V_SET, 1);
                assert_seq(npf_value_at(s, 4), NPF_V_SET, 1);
                for (size_t j = 0; j < 3; j++) {
                        assert_true(npf_value_int64(npf_value_at(npf_value_at(s, 1), j), &i));
                        sum += i;
                }
                assert_int_equal(sum, 6);
                assert_true(npf_value_streq(npf_value_at(npf_value_at(s, 3), 0), "a"));
                assert_seq(npf_value_at(npf_value_at(s, 4), 0), NPF_V_TUPLE, 2);
        }
        if (proto >= 5) {
                npf_value_t b = key(doc, "bytearray");
                assert_bytes(npf_value_at(b, 0), NPF_V_BYTES, "", 0);
                assert_bytes(npf_value_at(b, 1), NPF_V_BYTES, "\x01\x02\x03", 3);
        }
}

/* The big document: long strings, batches of APPENDS and SETITEMS, a memo of over 256 slots. */
static void check_big_doc(npf_value_t doc)
{
        npf_value_t s = key(doc, "str65600"), d = key(doc, "dict1200"), l = key(doc, "list1200"), k, v;
        npf_value_t first = key(doc, "first"), tail = key(doc, "tail");
        char want[32];

        assert_int_equal(key(doc, "str300").len, 300);
        assert_int_equal(s.kind, NPF_V_STR);
        assert_int_equal(s.len, 65600);
        for (size_t i = 0; i < s.len; i++)
                if (s.as.s[i] != (char) ('a' + i % 26))
                        fail_msg("str65600[%zu] is 0x%02x", i, (unsigned char) s.as.s[i]);
        assert_seq(d, NPF_V_DICT, 1200);
        for (size_t i = 0; i < 1200; i++) {
                assert_true(npf_value_pair(d, i, &k, &v));
                assert_i64(k, (int64_t) i);
                assert_i64(v, (int64_t) i * 3);
        }
        assert_seq(l, NPF_V_LIST, 1200);
        for (size_t i = 0; i < 1200; i++) {
                snprintf(want, sizeof(want), "item%zu", i);
                assert_true(npf_value_streq(npf_value_at(l, i), want));
        }
        assert_seq(first, NPF_V_DICT, 1);
        assert_seq(tail, NPF_V_LIST, 2);
        assert_ptr_equal(npf_value_at(tail, 0).as.c, first.as.c);
        assert_ptr_equal(npf_value_at(tail, 1).as.c, first.as.c);
}

static void check_protocol(int proto)
{
        size_t seen = 0;

        for (size_t i = 0; i < N_OF(fx_docs); i++) {
                const struct fx_doc *fx = &fx_docs[i];
                loaded_t l;
                if (fx->proto != proto)
                        continue;
                if (load(&l, fx->data, fx->len, NULL, NULL) < 0)
                        fail_msg("%s: %s", fx->name, l.err);
                check_canon(fx, l.root);
                if (strncmp(fx->name, "small", 5) == 0)
                        check_small_doc(l.root, proto);
                else
                        check_big_doc(l.root);
                unload(&l);
                seen++;
        }
        assert_true(seen > 0);
}

static void test_protocol_0(void **state)
{
        (void) state;
        check_protocol(0);
}

static void test_protocol_1(void **state)
{
        (void) state;
        check_protocol(1);
}

static void test_protocol_2(void **state)
{
        (void) state;
        check_protocol(2);
}

static void test_protocol_3(void **state)
{
        (void) state;
        check_protocol(3);
}

static void test_protocol_4(void **state)
{
        (void) state;
        check_protocol(4);
}

static void test_protocol_5(void **state)
{
        (void) state;
        check_protocol(5);
}

/* --- refused: what would run code ----------------------------------------------------------- */

static void test_refused_cpython_pickles(void **state)
{
        (void) state;
        for (size_t i = 0; i < N_OF(fx_hostiles); i++) {
                const struct fx_hostile *h = &fx_hostiles[i];
                loaded_t l;
                int rc = load(&l, h->data, h->len, NULL, NULL);
                if (rc != -EPERM)
                        fail_msg("%s: expected -EPERM, got %d: %s", h->name, rc, rc < 0 ? l.err : "");
                assert_names(l.err, h->opcode, h->offset);
                unload(&l);
        }
}

/* Every refused opcode, each with what it would need on the stack, so that only it is wrong. */
static const struct refused_case {
        const char *opcode;
        const unsigned char *data;
        size_t len;
        size_t offset;
} refused_cases[] = {
        { "GLOBAL", BYTES("\x80\x05" "cos\nsystem\n."), 2 },
        { "STACK_GLOBAL", BYTES("\x80\x05\x8c\x02" "os" "\x8c\x06" "system" "\x93."), 14 },
        { "REDUCE", BYTES("\x80\x05N)R."), 4 },
        { "BUILD", BYTES("\x80\x05}}b."), 4 },
        { "INST", BYTES("\x80\x05(ios\nsystem\n."), 3 },
        { "OBJ", BYTES("\x80\x05(N)o."), 5 },
        { "NEWOBJ", BYTES("\x80\x05N)\x81."), 4 },
        { "NEWOBJ_EX", BYTES("\x80\x05N)}\x92."), 5 },
        { "EXT1", BYTES("\x80\x05\x82\x01."), 2 },
        { "EXT2", BYTES("\x80\x05\x83\x01\x01."), 2 },
        { "EXT4", BYTES("\x80\x05\x84\x01\x01\x01\x01."), 2 },
        { "PERSID", BYTES("\x80\x05Pref\n."), 2 },
        { "BINPERSID", BYTES("\x80\x05NQ."), 3 },
        { "NEXT_BUFFER", BYTES("\x80\x05\x97."), 2 },
        { "READONLY_BUFFER", BYTES("\x80\x05N\x98."), 3 },
        /* Inside a frame the offset is still the one in the file. */
        { "REDUCE", BYTES("\x80\x04\x95\x04\x00\x00\x00\x00\x00\x00\x00N)R."), 13 },
        /* Protocol 0, no PROTO: the first byte. */
        { "GLOBAL", BYTES("cposix\nsystem\n(S'true'\ntR."), 0 },
};

static void test_refused_opcodes(void **state)
{
        (void) state;
        for (size_t i = 0; i < N_OF(refused_cases); i++) {
                const struct refused_case *c = &refused_cases[i];
                loaded_t l;
                int rc = load(&l, c->data, c->len, NULL, NULL);
                if (rc != -EPERM)
                        fail_msg("%s: expected -EPERM, got %d: %s", c->opcode, rc, rc < 0 ? l.err : "");
                assert_names(l.err, c->opcode, c->offset);
                unload(&l);
        }
}

/* --- truncated and malformed ---------------------------------------------------------------- */

/* Every prefix of @fx in [from, to) with step @step is a truncated pickle: -EINVAL. */
static void check_prefixes(const struct fx_doc *fx, size_t from, size_t to, size_t step)
{
        for (size_t n = from; n < to && n < fx->len; n += step) {
                loaded_t l;
                int rc = load(&l, fx->data, n, NULL, NULL);
                if (rc != -EINVAL)
                        fail_msg("%s cut to %zu of %zu bytes: expected -EINVAL, got %d: %s", fx->name, n, fx->len, rc,
                                 rc < 0 ? l.err : "(success)");
                unload(&l);
        }
}

static void test_truncated(void **state)
{
        (void) state;
        for (size_t i = 0; i < N_OF(fx_docs); i++) {
                const struct fx_doc *fx = &fx_docs[i];
                if (fx->len <= 8192) {
                        check_prefixes(fx, 0, fx->len, 1);
                } else {
                        /* Every prefix at both ends, and one in 257 in between. */
                        check_prefixes(fx, 0, 4096, 1);
                        check_prefixes(fx, 4096, fx->len - 4096, 257);
                        check_prefixes(fx, fx->len - 4096, fx->len, 1);
                }
        }
}

static const struct bad_case {
        const char *what;
        const unsigned char *data;
        size_t len;
        int rc, alt;            /* alt: another acceptable result, or 0 */
} bad_cases[] = {
        { "empty input", BYTES(""), -EINVAL, 0 },
        { "STOP with an empty stack", BYTES("."), -EINVAL, 0 },
        { "PROTO and STOP", BYTES("\x80\x02."), -EINVAL, 0 },
        { "PROTO without its argument", BYTES("\x80"), -EINVAL, 0 },
        { "protocol 6", BYTES("\x80\x06N."), -EINVAL, 0 },
        { "no STOP", BYTES("\x80\x02N"), -EINVAL, 0 },
        { "STOP with two values on the stack", BYTES("\x80\x02NN."), -EINVAL, 0 },
        { "STOP inside a MARK", BYTES("\x80\x02(N."), -EINVAL, 0 },
        { "BINGET of a slot never set", BYTES("\x80\x02h\x05."), -EINVAL, 0 },
        { "BINGET past the slots set", BYTES("\x80\x02Nq\x00" "0h\x01."), -EINVAL, 0 },
        { "LONG_BINGET of a slot never set", BYTES("\x80\x02j\x00\x00\x01\x00."), -EINVAL, 0 },
        { "LONG_BINGET 2^32-1", BYTES("\x80\x02j\xff\xff\xff\xff."), -EINVAL, 0 },
        { "GET of a slot never set", BYTES("Np0\n0g1\n."), -EINVAL, 0 },
        { "GET of no number", BYTES("Np0\n0gx\n."), -EINVAL, 0 },
        { "PUT of a negative slot", BYTES("Np-1\n."), -EINVAL, 0 },
        { "MEMOIZE with an empty stack", BYTES("\x80\x04\x94N."), -EINVAL, 0 },
        { "BINPUT with an empty stack", BYTES("\x80\x02q\x00N."), -EINVAL, 0 },
        { "LONG_BINPUT 2^32-1", BYTES("\x80\x02Nr\xff\xff\xff\xff."), -E2BIG, 0 },
        { "APPENDS without MARK", BYTES("\x80\x02]NNe."), -EINVAL, 0 },
        { "APPENDS with nothing below the MARK", BYTES("\x80\x02(Ne."), -EINVAL, 0 },
        { "APPENDS to a dict", BYTES("\x80\x02}(Ne."), -EINVAL, 0 },
        { "APPEND to None", BYTES("\x80\x02NNa."), -EINVAL, 0 },
        { "APPEND with one value", BYTES("\x80\x02]a."), -EINVAL, 0 },
        { "SETITEMS with an odd count", BYTES("\x80\x02}(K\x01K\x02K\x03u."), -EINVAL, 0 },
        { "SETITEMS without MARK", BYTES("\x80\x02}K\x01K\x02u."), -EINVAL, 0 },
        { "SETITEMS to a list", BYTES("\x80\x02](K\x01K\x02u."), -EINVAL, 0 },
        { "SETITEM to a list", BYTES("\x80\x02]K\x01K\x02s."), -EINVAL, 0 },
        { "SETITEM with two values", BYTES("\x80\x02}Ns."), -EINVAL, 0 },
        { "DICT with an odd count", BYTES("(K\x01" "d."), -EINVAL, 0 },
        { "ADDITEMS to a list", BYTES("\x80\x04](K\x01\x90."), -EINVAL, 0 },
        { "TUPLE without MARK", BYTES("\x80\x02K\x01t."), -EINVAL, 0 },
        { "TUPLE1 with an empty stack", BYTES("\x80\x02\x85."), -EINVAL, 0 },
        { "TUPLE3 with two values", BYTES("\x80\x02NN\x87."), -EINVAL, 0 },
        { "POP with an empty stack", BYTES("\x80\x02" "0N."), -EINVAL, 0 },
        { "POP_MARK without MARK", BYTES("\x80\x02N1."), -EINVAL, 0 },
        { "DUP with an empty stack", BYTES("\x80\x02" "2."), -EINVAL, 0 },
        { "unknown opcode 0xff", BYTES("\x80\x02\xff."), -EINVAL, 0 },
        { "unknown opcode 0x00", BYTES("\x80\x02\x00."), -EINVAL, 0 },
        { "unknown opcode 0x99", BYTES("\x80\x05\x99."), -EINVAL, 0 },
        { "INT of no number", BYTES("I12x\n."), -EINVAL, 0 },
        { "INT without its newline", BYTES("I12"), -EINVAL, 0 },
        { "empty INT", BYTES("I\n."), -EINVAL, 0 },
        { "LONG of no number", BYTES("Lxyz\n."), -EINVAL, 0 },
        { "FLOAT of no number", BYTES("Fabc\n."), -EINVAL, 0 },
        { "UNICODE with a cut escape", BYTES("V\\u12\n."), -EINVAL, 0 },
        { "UNICODE with a bad escape", BYTES("V\\u12zz\n."), -EINVAL, 0 },
        { "UNICODE beyond U+10FFFF", BYTES("V\\U00110000\n."), -EINVAL, 0 },
        { "UNICODE without its newline", BYTES("Vabc"), -EINVAL, 0 },
        { "LONG4 of a negative length", BYTES("\x80\x02\x8b\xff\xff\xff\xff."), -EINVAL, 0 },
        /* Lengths that run past the end of the input. */
        { "BINUNICODE of 2^32-1 bytes", BYTES("\x80\x02X\xff\xff\xff\xff" "abc."), -EINVAL, 0 },
        { "BINUNICODE of 5 bytes, 3 there", BYTES("\x80\x02X\x05\x00\x00\x00" "ab."), -EINVAL, 0 },
        { "SHORT_BINUNICODE of 5 bytes, 3 there", BYTES("\x80\x04\x8c\x05" "ab."), -EINVAL, 0 },
        { "SHORT_BINBYTES of 5 bytes, 3 there", BYTES("\x80\x03" "C\x05" "ab."), -EINVAL, 0 },
        { "BINBYTES of 2^31 bytes", BYTES("\x80\x03" "B\x00\x00\x00\x80" "ab."), -EINVAL, 0 },
        { "BINSTRING of 2^31-1 bytes", BYTES("T\xff\xff\xff\x7f" "ab."), -EINVAL, 0 },
        { "LONG1 of 255 bytes, 3 there", BYTES("\x80\x02\x8a\xff" "ab."), -EINVAL, 0 },
        { "LONG4 of 2^31-1 bytes", BYTES("\x80\x02\x8b\xff\xff\xff\x7f" "ab."), -EINVAL, 0 },
        { "BININT with 2 of its 4 bytes", BYTES("\x80\x02J\x01\x02"), -EINVAL, 0 },
        { "BININT1 at the end", BYTES("\x80\x02K"), -EINVAL, 0 },
        { "BINFLOAT with 3 of its 8 bytes", BYTES("\x80\x02G\x00\x00."), -EINVAL, 0 },
        { "BINGET at the end", BYTES("\x80\x02h"), -EINVAL, 0 },
        { "LONG_BINPUT with 2 of its 4 bytes", BYTES("\x80\x02Nr\x00\x00"), -EINVAL, 0 },
        { "FRAME with 3 of its 8 length bytes", BYTES("\x80\x04\x95\x01\x02\x03"), -EINVAL, 0 },
        { "FRAME of 8 bytes, 2 there", BYTES("\x80\x04\x95\x08\x00\x00\x00\x00\x00\x00\x00N."), -EINVAL, 0 },
        { "FRAME of 2^64-1 bytes", BYTES("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xffN."), -EINVAL, 0 },
        /* Past 4 GiB a string is also too long for a value: either error is clear. */
        { "BINUNICODE8 of 2^40 bytes", BYTES("\x80\x04\x8d\x00\x00\x00\x00\x00\x01\x00\x00" "ab."), -EINVAL, -E2BIG },
        { "BINBYTES8 of 2^64-1 bytes", BYTES("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\xff" "ab."), -EINVAL, -E2BIG },
        { "BYTEARRAY8 of 2^33 bytes", BYTES("\x80\x05\x96\x00\x00\x00\x00\x02\x00\x00\x00" "ab."), -EINVAL, -E2BIG },
};

static void test_malformed(void **state)
{
        size_t wrong = 0;

        (void) state;
        for (size_t i = 0; i < N_OF(bad_cases); i++) {
                const struct bad_case *b = &bad_cases[i];
                wrong += !rc_is(b->what, b->data, b->len, b->rc, b->alt);
        }
        if (wrong)
                fail_msg("%zu of %zu malformed pickles got another answer", wrong, N_OF(bad_cases));
}

/* A malformed pickle's message says where: "offset N". */
static void test_errors_say_where(void **state)
{
        loaded_t l;

        (void) state;
        assert_int_equal(load(&l, BYTES("\x80\x02]NNe."), NULL, NULL), -EINVAL);
        assert_names(l.err, "offset", 5);
        unload(&l);
        assert_int_equal(load(&l, BYTES("\x80\x02X\x05\x00\x00\x00" "ab."), NULL, NULL), -EINVAL);
        assert_names(l.err, "offset", 2);
        unload(&l);
}

/* --- data opcodes CPython writes rarely or never -------------------------------------------- */

static npf_value_t load_ok(loaded_t *l, const char *what, const unsigned char *data, size_t len)
{
        if (load(l, data, len, NULL, NULL) < 0)
                fail_msg("%s: %s", what, l->err);
        return npf_value_resolve(l->root);
}

static void test_rare_opcodes(void **state)
{
        loaded_t l;
        npf_value_t v;

        (void) state;
        v = load_ok(&l, "DUP", BYTES("\x80\x02K\x05" "2\x86."));
        assert_seq(v, NPF_V_TUPLE, 2);
        assert_i64(npf_value_at(v, 0), 5);
        assert_i64(npf_value_at(v, 1), 5);
        unload(&l);
        assert_i64(load_ok(&l, "POP", BYTES("\x80\x02K\x01K\x02" "0.")), 1);
        unload(&l);
        assert_i64(load_ok(&l, "POP_MARK", BYTES("\x80\x02K\x07(K\x01K\x02" "1.")), 7);
        unload(&l);
        v = load_ok(&l, "BINUNICODE8", BYTES("\x80\x04\x8d\x03\x00\x00\x00\x00\x00\x00\x00" "abc."));
        assert_true(npf_value_streq(v, "abc"));
        unload(&l);
        v = load_ok(&l, "BINBYTES8", BYTES("\x80\x04\x8e\x02\x00\x00\x00\x00\x00\x00\x00\xff\x00."));
        assert_bytes(v, NPF_V_BYTES, "\xff\x00", 2);
        unload(&l);
        v = load_ok(&l, "EMPTY_SET and ADDITEMS", BYTES("\x80\x04\x8f(K\x01K\x02\x90."));
        assert_seq(v, NPF_V_SET, 2);
        unload(&l);
        /* Python 2 strings: the reader makes str of them, as Python 3 does by default. */
        assert_true(npf_value_streq(load_ok(&l, "STRING", BYTES("S'abc'\n.")), "abc"));
        unload(&l);
        assert_true(npf_value_streq(load_ok(&l, "SHORT_BINSTRING", BYTES("U\x03" "abc.")), "abc"));
        unload(&l);
        assert_true(npf_value_streq(load_ok(&l, "BINSTRING", BYTES("T\x03\x00\x00\x00" "abc.")), "abc"));
        unload(&l);
        /* The reader stops at STOP, as CPython's does: what follows is not read. */
        assert_int_equal(load_ok(&l, "garbage after STOP", BYTES("\x80\x02N.garbage\xff")).kind, NPF_V_NONE);
        unload(&l);
}

static void test_integer_encodings(void **state)
{
        static const struct {
                const char *what;
                const unsigned char *data;
                size_t len;
                char how;
                int64_t i;
                uint64_t u;
        } cases[] = {
                { "LONG1 of no bytes", BYTES("\x80\x02\x8a\x00."), 'i', 0, 0 },
                { "LONG1 -1", BYTES("\x80\x02\x8a\x01\xff."), 'i', -1, 0 },
                { "LONG1 -1 in 9 bytes", BYTES("\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\xff."), 'i', -1, 0 },
                { "LONG1 1 in 10 bytes", BYTES("\x80\x02\x8a\x0a\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00."), 'i', 1, 0 },
                { "LONG1 -2^63", BYTES("\x80\x02\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."), 'i', INT64_MIN, 0 },
                { "LONG1 -2^63 in 9 bytes", BYTES("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\xff."), 'i',
                  INT64_MIN, 0 },
                { "LONG1 2^64-1", BYTES("\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00."), 'u', 0, UINT64_MAX },
                { "LONG1 -2^63-1", BYTES("\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\xff."), '-', 0, 0 },
                { "LONG1 -2^64", BYTES("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xff."), '-', 0, 0 },
                { "LONG1 2^64", BYTES("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."), '+', 0, 0 },
                { "LONG4 of no bytes", BYTES("\x80\x02\x8b\x00\x00\x00\x00."), 'i', 0, 0 },
                { "LONG4 258", BYTES("\x80\x02\x8b\x02\x00\x00\x00\x02\x01."), 'i', 258, 0 },
                { "BININT -2", BYTES("\x80\x02J\xfe\xff\xff\xff."), 'i', -2, 0 },
                { "BININT2 65535", BYTES("\x80\x02M\xff\xff."), 'i', 65535, 0 },
                { "INT -7", BYTES("I-7\n."), 'i', -7, 0 },
                { "INT beyond 32 bits", BYTES("I99999999999\n."), 'i', INT64_C(99999999999), 0 },
                { "LONG 5 without its L", BYTES("L5\n."), 'i', 5, 0 },
                { "LONG -2^63", BYTES("L-9223372036854775808L\n."), 'i', INT64_MIN, 0 },
                { "LONG 2^63", BYTES("L9223372036854775808L\n."), 'u', 0, UINT64_C(9223372036854775808) },
                { "LONG 2^64-1", BYTES("L18446744073709551615L\n."), 'u', 0, UINT64_MAX },
                { "LONG 2^64", BYTES("L18446744073709551616L\n."), '+', 0, 0 },
                { "LONG -2^63-1", BYTES("L-9223372036854775809L\n."), '-', 0, 0 },
                { "LONG of 100 digits", BYTES("L1000000000000000000000000000000000000000000000000000000000000000000000"
                                              "000000000000000000000000000000L\n."), '+', 0, 0 },
        };
        size_t wrong = 0;

        (void) state;
        for (size_t i = 0; i < N_OF(cases); i++) {
                loaded_t l;
                if (load(&l, cases[i].data, cases[i].len, NULL, NULL) < 0) {
                        print_error("%s: %s\n", cases[i].what, l.err);
                        wrong++;
                } else if (!int_is(npf_value_resolve(l.root), cases[i].how, cases[i].i, cases[i].u)) {
                        npf_value_t v = npf_value_resolve(l.root);
                        print_error("%s: read as a %s with flags 0x%x and the bits 0x%016" PRIx64 "\n", cases[i].what,
                                    npf_value_kind_name(v), v.flags, v.as.u);
                        wrong++;
                }
                unload(&l);
        }
        if (wrong)
                fail_msg("%zu of %zu integers read wrong", wrong, N_OF(cases));
}

static void test_text_scalars(void **state)
{
        loaded_t l;
        npf_value_t v;
        int64_t i;
        double f;

        (void) state;
        v = load_ok(&l, "INT 01", BYTES("I01\n."));
        assert_true(v.kind == NPF_V_BOOL && npf_value_int64(v, &i) && i == 1);
        unload(&l);
        v = load_ok(&l, "INT 00", BYTES("I00\n."));
        assert_true(v.kind == NPF_V_BOOL && npf_value_int64(v, &i) && i == 0);
        unload(&l);
        v = load_ok(&l, "FLOAT -0.0", BYTES("F-0.0\n."));
        assert_true(npf_value_double(v, &f) && f == 0.0 && signbit(f));
        unload(&l);
        v = load_ok(&l, "FLOAT -inf", BYTES("F-inf\n."));
        assert_true(npf_value_double(v, &f) && isinf(f) && f < 0);
        unload(&l);
        v = load_ok(&l, "FLOAT 5e-324", BYTES("F5e-324\n."));
        assert_true(npf_value_double(v, &f) && f == 5e-324);
        unload(&l);
        /* raw-unicode-escape: Latin-1 bytes and \u, \U escapes become UTF-8. */
        v = load_ok(&l, "UNICODE", BYTES("V\xe9\\u2713\\U0001f40d\\u005c\n."));
        assert_true(npf_value_streq(v, "\xc3\xa9\xe2\x9c\x93\xf0\x9f\x90\x8d\\"));
        unload(&l);
}

/* --- odd shapes ----------------------------------------------------------------------------- */

static void test_unhashable_key(void **state)
{
        static const struct {
                const char *what;
                const unsigned char *data;
                size_t len;
                npf_vkind_t kind;
        } cases[] = {
                { "a list as a key", BYTES("\x80\x02}]Ns."), NPF_V_LIST },
                { "a dict as a key", BYTES("\x80\x02}}(K\x01K\x02uNs."), NPF_V_DICT },
                { "a set as a key", BYTES("\x80\x04}\x8fNs."), NPF_V_SET },
        };
        loaded_t l;

        (void) state;
        /* Python could not build these; the reader may refuse them but must read them safely. */
        for (size_t i = 0; i < N_OF(cases); i++) {
                npf_value_t k, v;
                if (load(&l, cases[i].data, cases[i].len, NULL, NULL) == 0) {
                        assert_seq(l.root, NPF_V_DICT, 1);
                        assert_true(npf_value_pair(l.root, 0, &k, &v));
                        assert_int_equal(k.kind, cases[i].kind);
                        assert_int_equal(v.kind, NPF_V_NONE);
                } else {
                        assert_int_equal(l.rc, -EINVAL);
                }
                unload(&l);
        }
}

/* Lists and tuples that hold themselves, as CPython pickles them (POP, POP_MARK, GET). */
static const struct fx_cycle {
        const char *what;
        const unsigned char *data;
        size_t len;
} cycles[] = {
        { "l = []; l.append(l), protocol 2", BYTES("\x80\x02]q\x00h\x00" "a.") },
        { "l = []; t = (l,); l.append(t), protocol 0", BYTES("((lp0\n(g0\ntp1\na00g1\n.") },
        { "l = []; t = (l,); l.append(t), protocol 1", BYTES("(]q\x00(h\x00tq\x01" "a1h\x01.") },
        { "l = []; t = (l,); l.append(t), protocol 2", BYTES("\x80\x02]q\x00h\x00\x85q\x01" "a0h\x01.") },
        { "a list in itself twice, by DUP", BYTES("\x80\x02]2" "a2" "a.") },
};

static int reduce_sequences(void *userdata, const npf_value_t *v, npf_value_t *ret, char *err, size_t err_size)
{
        size_t *calls = userdata;

        (void) err;
        (void) err_size;
        ++*calls;
        if (v->kind != NPF_V_LIST && v->kind != NPF_V_TUPLE)
                return 0;
        *ret = (npf_value_t) { .kind = NPF_V_RECORD, .rkind = 1, .as.u = npf_value_len(*v) };
        return 1;
}

static void test_cycles(void **state)
{
        (void) state;
        for (size_t i = 0; i < N_OF(cycles); i++) {
                loaded_t l;
                size_t calls = 0;
                npf_value_t v;

                /* Without reduction the cycle is there to see. */
                if (load(&l, cycles[i].data, cycles[i].len, NULL, NULL) < 0)
                        fail_msg("%s: %s", cycles[i].what, l.err);
                v = npf_value_resolve(l.root);
                assert_true(v.kind == NPF_V_LIST || v.kind == NPF_V_TUPLE);
                npf_value_t inner = npf_value_at(v, 0);
                if (inner.as.c != v.as.c)
                        inner = npf_value_at(inner, 0);
                assert_ptr_equal(inner.as.c, v.as.c);
                unload(&l);

                /* With it, either a record or a clear error; never a crash or a leak. */
                if (load(&l, cycles[i].data, cycles[i].len, reduce_sequences, &calls) == 0)
                        assert_int_equal(npf_value_resolve(l.root).kind, NPF_V_RECORD);
                else
                        assert_int_equal(l.rc, -EINVAL);
                assert_true(calls > 0);
                unload(&l);
        }
}

/* @head, @n times @unit, @middle, @n2 times @unit2, @tail: a pickle too big to write out. */
static unsigned char *repeat(const char *head, const char *unit, size_t n, const char *middle, const char *unit2,
                             size_t n2, const char *tail, size_t *ret_len)
{
        size_t lh = strlen(head), lu = strlen(unit), lm = strlen(middle), lu2 = strlen(unit2), lt = strlen(tail);
        size_t len = lh + lu * n + lm + lu2 * n2 + lt;
        unsigned char *p = malloc(len), *q = p;

        assert_non_null(p);
        memcpy(q, head, lh);
        q += lh;
        for (size_t i = 0; i < n; i++, q += lu)
                memcpy(q, unit, lu);
        memcpy(q, middle, lm);
        q += lm;
        for (size_t i = 0; i < n2; i++, q += lu2)
                memcpy(q, unit2, lu2);
        memcpy(q, tail, lt);
        *ret_len = len;
        return p;
}

/* @v holds @depth levels of one-item @kind below it, then an empty one (or None). */
static void check_chain(npf_value_t v, npf_vkind_t kind, size_t depth, npf_vkind_t last)
{
        for (size_t d = 0; d < depth; d++) {
                if (v.kind != kind || npf_value_len(v) != 1)
                        fail_msg("level %zu: a %s of %zu items", d, npf_value_kind_name(v), npf_value_len(v));
                v = npf_value_at(v, 0);
        }
        assert_int_equal(v.kind, last);
}

static void test_deep_nesting(void **state)
{
        const size_t deep = 100000;
        unsigned char *p;
        size_t len, calls = 0;
        loaded_t l;

        (void) state;
        /* 100,000 nested lists, built without marks: no cap applies, and nothing may recurse. */
        p = repeat("\x80\x02", "]", deep + 1, "", "a", deep, ".", &len);
        if (load(&l, p, len, NULL, NULL) == 0)
                check_chain(l.root, NPF_V_LIST, deep, NPF_V_LIST);
        else
                assert_int_equal(l.rc, -E2BIG);
        unload(&l);
        if (load(&l, p, len, reduce_sequences, &calls) == 0)
                assert_int_equal(npf_value_resolve(l.root).kind, NPF_V_RECORD);
        else
                assert_int_equal(l.rc, -E2BIG);
        unload(&l);
        free(p);

        p = repeat("\x80\x02N", "\x85", deep, "", "", 0, ".", &len);
        if (load(&l, p, len, NULL, NULL) == 0)
                check_chain(l.root, NPF_V_TUPLE, deep, NPF_V_NONE);
        else
                assert_int_equal(l.rc, -E2BIG);
        unload(&l);
        free(p);

        /* Marks have a cap: up to it a MARK ... LIST nesting reads, past it is refused. */
        p = repeat("", "(", NPF_PICKLE_DEPTH_MAX, "", "l", NPF_PICKLE_DEPTH_MAX, ".", &len);
        if (load(&l, p, len, NULL, NULL) < 0)
                fail_msg("%u nested marks: %s", NPF_PICKLE_DEPTH_MAX, l.err);
        check_chain(l.root, NPF_V_LIST, NPF_PICKLE_DEPTH_MAX - 1, NPF_V_LIST);
        unload(&l);
        free(p);
        p = repeat("", "(", NPF_PICKLE_DEPTH_MAX + 1, "", "l", NPF_PICKLE_DEPTH_MAX + 1, ".", &len);
        expect_rc("one mark past the cap", p, len, -E2BIG);
        free(p);
        p = repeat("\x80\x02", "(", deep, "", "", 0, ".", &len);
        expect_rc("100,000 marks", p, len, -E2BIG);
        free(p);
}

static void test_stack_cap(void **state)
{
        unsigned char *p;
        size_t len;

        (void) state;
        p = repeat("\x80\x02", "N", NPF_PICKLE_STACK_MAX + 1, "", "", 0, ".", &len);
        expect_rc("one value past the stack cap", p, len, -E2BIG);
        free(p);
}

/* "N, LONG_BINPUT @idx, STOP" in @p. */
static void put_at(unsigned char p[9], uint32_t idx)
{
        memcpy(p, "\x80\x02Nr", 4);
        for (unsigned i = 0; i < 4; i++)
                p[4 + i] = (unsigned char) (idx >> (8 * i));
        p[8] = '.';
}

static void test_memo_cap(void **state)
{
        unsigned char p[9];

        (void) state;
        put_at(p, NPF_PICKLE_MEMO_MAX);
        expect_rc("LONG_BINPUT at the memo cap", p, sizeof(p), -E2BIG);
}

/*
 * A memo index just below the cap, in a 9-byte pickle: whatever the answer, it must not take
 * gigabytes. Run in a child under a 2 GiB address-space limit (under ASan, its allocator
 * refuses more than 2 GiB at once, see __asan_default_options()), so that a reader that tries
 * gets -ENOMEM and the test fails instead of the machine.
 */
static void test_memo_index_costs_no_gigabytes(void **state)
{
        unsigned char p[9];
        int status;
        pid_t pid;

        (void) state;
        put_at(p, NPF_PICKLE_MEMO_MAX - 1);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
#ifndef HAVE_ASAN
                struct rlimit rl = { 2ul << 30, 2ul << 30 };
                if (setrlimit(RLIMIT_AS, &rl) < 0)
                        _exit(3);
#endif
                char err[NPF_PICKLE_ERR_MAX];
                npf_vtree_t *t = npf_vtree_new(NULL, NULL);
                npf_value_t v;
                int rc = t ? npf_pickle_load(p, sizeof(p), t, 0, NULL, NULL, &v, err) : -ENOMEM;
                size_t bytes = t ? npf_vtree_bytes(t) : 0;
                printf("LONG_BINPUT %u: %d %s, the tree holds %zu bytes\n", NPF_PICKLE_MEMO_MAX - 1, rc,
                       rc < 0 ? err : "", bytes);
                fflush(stdout);
                npf_vtree_free(t);
                _exit(rc == -ENOMEM || (rc == 0 && bytes > (64u << 20)) ? 1 : 0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("a 9-byte pickle with LONG_BINPUT %u wants gigabytes (child status 0x%x)",
                         NPF_PICKLE_MEMO_MAX - 1, status);
}

/* --- the reduce callback -------------------------------------------------------------------- */

#define MAX_OFFERED 64

typedef struct events {
        size_t calls;                           /* containers offered */
        const npf_container_t *offered[MAX_OFFERED];
        size_t n;                               /* records made */
        size_t fail_at;                         /* the record that fails; SIZE_MAX: none */
        bool early;                             /* an item was offered after its container */
        struct {
                char action[16];
                uint64_t addr, size;
        } ev[16];
} events_t;

static bool was_offered(const events_t *e, npf_value_t item)
{
        if (item.kind != NPF_V_LIST && item.kind != NPF_V_TUPLE && item.kind != NPF_V_DICT && item.kind != NPF_V_SET)
                return true;
        for (size_t i = 0; i < e->calls && i < MAX_OFFERED; i++)
                if (e->offered[i] == item.as.c)
                        return true;
        return false;
}

/* Every dict with an "action" becomes record 7 / its number; the rest stays. */
static int reduce_events(void *userdata, const npf_value_t *v, npf_value_t *ret, char *err, size_t err_size)
{
        events_t *e = userdata;
        npf_value_t action, k, item;
        uint64_t addr, size;

        /* Innermost first: every container among the items was offered already. */
        for (size_t i = 0; i < npf_value_len(*v); i++) {
                if (v->kind == NPF_V_DICT) {
                        assert_true(npf_value_pair(*v, i, &k, &item));
                        e->early |= !was_offered(e, k);
                } else {
                        item = npf_value_at(*v, i);
                }
                e->early |= !was_offered(e, item);
        }
        if (e->calls < MAX_OFFERED)
                e->offered[e->calls] = v->as.c;
        e->calls++;
        if (v->kind != NPF_V_DICT || !npf_value_get(*v, "action", &action))
                return 0;
        if (e->n == e->fail_at) {
                snprintf(err, err_size, "entry %zu: the test refuses it", e->n);
                return -EBADMSG;
        }
        if (action.kind != NPF_V_STR || action.len >= sizeof(e->ev[0].action) || e->n == N_OF(e->ev) ||
            !npf_value_get(*v, "addr", &k) || !npf_value_uint64(k, &addr) || !npf_value_get(*v, "size", &k) ||
            !npf_value_uint64(k, &size)) {
                snprintf(err, err_size, "entry %zu: not an entry of the test", e->n);
                return -EINVAL;
        }
        memcpy(e->ev[e->n].action, action.as.s, action.len);
        e->ev[e->n].action[action.len] = '\0';
        e->ev[e->n].addr = addr;
        e->ev[e->n].size = size;
        *ret = (npf_value_t) { .kind = NPF_V_RECORD, .rkind = 7, .as.u = e->n++ };
        return 1;
}

static void assert_record(npf_value_t v, uint64_t which)
{
        assert_int_equal(v.kind, NPF_V_RECORD);
        assert_int_equal(v.rkind, 7);
        assert_true(v.as.u == which);
        assert_int_equal(npf_value_len(v), 0);
}

static void assert_event(const events_t *e, size_t i, const char *action, uint64_t addr, uint64_t size)
{
        assert_string_equal(e->ev[i].action, action);
        assert_true(e->ev[i].addr == addr);
        assert_true(e->ev[i].size == size);
}

static void test_reduce(void **state)
{
        (void) state;
        for (size_t i = 0; i < N_OF(fx_reduce); i++) {
                const struct fx_doc *fx = &fx_reduce[i];
                events_t e = { .fail_at = SIZE_MAX };
                npf_value_t root, traces, plain;
                loaded_t l;

                /* Read as it is first: the document Python wrote. */
                if (load(&l, fx->data, fx->len, NULL, NULL) < 0)
                        fail_msg("%s: %s", fx->name, l.err);
                check_canon(fx, l.root);
                unload(&l);

                if (load(&l, fx->data, fx->len, reduce_events, &e) < 0)
                        fail_msg("%s: %s", fx->name, l.err);
                /* Eleven containers, each offered once however often it is referred to. */
                assert_int_equal(e.calls, 11);
                assert_false(e.early);
                assert_int_equal(e.n, 4);
                assert_event(&e, 0, "alloc", 4096, 512);
                assert_event(&e, 1, "free", 4096, 512);
                assert_event(&e, 2, "oom", 0, UINT64_C(1) << 40);
                assert_event(&e, 3, "alloc", 8192, 64);

                root = npf_value_resolve(l.root);
                assert_seq(root, NPF_V_DICT, 5);
                traces = key(root, "traces");
                assert_seq(traces, NPF_V_LIST, 4);
                assert_record(npf_value_at(traces, 0), 0);
                assert_record(npf_value_at(traces, 1), 1);
                assert_record(npf_value_at(traces, 2), 0);       /* the memo's reference */
                assert_record(npf_value_at(traces, 3), 2);
                assert_record(npf_value_at(key(root, "late"), 0), 3);
                assert_record(key(root, "again"), 3);            /* a reference after placement */
                assert_record(key(key(root, "other"), "k"), 0);
                plain = key(root, "plain");
                assert_seq(plain, NPF_V_LIST, 2);
                assert_i64(key(npf_value_at(plain, 0), "x"), 1);
                assert_seq(npf_value_at(plain, 1), NPF_V_TUPLE, 2);
                unload(&l);

                /* Every prefix, with the callback at work: -EINVAL and nothing leaked. */
                for (size_t n = 0; n < fx->len; n++) {
                        e = (events_t) { .fail_at = SIZE_MAX };
                        if (load(&l, fx->data, n, reduce_events, &e) != -EINVAL)
                                fail_msg("%s cut to %zu bytes, reduced: %d %s", fx->name, n, l.rc, l.err);
                        unload(&l);
                }
        }
}

static void test_reduce_root(void **state)
{
        (void) state;
        for (size_t i = 0; i < N_OF(fx_reduce_root); i++) {
                const struct fx_doc *fx = &fx_reduce_root[i];
                events_t e = { .fail_at = SIZE_MAX };
                loaded_t l;

                if (load(&l, fx->data, fx->len, reduce_events, &e) < 0)
                        fail_msg("%s: %s", fx->name, l.err);
                assert_int_equal(e.calls, 1);
                assert_record(npf_value_resolve(l.root), 0);
                assert_event(&e, 0, "free", UINT64_C(9223372036854775813), 7);
                unload(&l);
        }
}

static void test_reduce_error(void **state)
{
        (void) state;
        for (size_t i = 0; i < N_OF(fx_reduce); i++) {
                const struct fx_doc *fx = &fx_reduce[i];
                for (size_t at = 0; at < 4; at++) {
                        events_t e = { .fail_at = at };
                        char want[64];
                        loaded_t l;
                        int rc = load(&l, fx->data, fx->len, reduce_events, &e);
                        if (rc != -EBADMSG)
                                fail_msg("%s, failing entry %zu: expected -EBADMSG, got %d: %s", fx->name, at, rc,
                                         rc < 0 ? l.err : "");
                        snprintf(want, sizeof(want), "entry %zu: the test refuses it", at);
                        if (!strstr(l.err, want))
                                fail_msg("%s: \"%s\" does not pass on \"%s\"", fx->name, l.err, want);
                        unload(&l);
                }
        }
}

/* A callback's long message is cut to the buffer, still terminated. */
static int reduce_wordy(void *userdata, const npf_value_t *v, npf_value_t *ret, char *err, size_t err_size)
{
        (void) userdata;
        (void) v;
        (void) ret;
        assert_true(err_size >= 64 && err_size <= NPF_PICKLE_ERR_MAX);
        memset(err, 'w', err_size - 1);
        err[err_size - 1] = '\0';
        return -ERANGE;
}

static void test_reduce_long_message(void **state)
{
        loaded_t l;

        (void) state;
        assert_int_equal(load(&l, BYTES("\x80\x02]."), reduce_wordy, NULL), -ERANGE);
        assert_true(strchr(l.err, 'w') != NULL);
        unload(&l);
}

/* --- progress ------------------------------------------------------------------------------- */

typedef struct progress {
        size_t calls, last, total;
        bool backwards;
} progress_t;

static void on_progress(void *userdata, size_t done, size_t total)
{
        progress_t *p = userdata;

        p->backwards |= done <= p->last || done > total;
        p->last = done;
        p->total = total;
        p->calls++;
}

static void test_progress(void **state)
{
        const size_t chunk = 1u << 20, n = 40;
        size_t len = 3 + n * (5 + chunk + 1) + 1;
        unsigned char *p = calloc(1, len), *q = p;
        char err[NPF_PICKLE_ERR_MAX];
        progress_t pr = { 0 };
        npf_vtree_t *t = npf_vtree_new(NULL, NULL);
        npf_value_t v;

        (void) state;
        assert_non_null(p);
        assert_non_null(t);
        memcpy(q, "\x80\x04]", 3), q += 3;
        for (size_t i = 0; i < n; i++) {
                *q++ = 'B';
                *q++ = 0, *q++ = 0, *q++ = 0x10, *q++ = 0;      /* 1 MiB, little-endian */
                q += chunk;
                *q++ = 'a';
        }
        *q++ = '.';
        assert_int_equal((size_t) (q - p), len);
        assert_int_equal(npf_pickle_load(p, len, t, 0, on_progress, &pr, &v, err), 0);
        assert_int_equal(npf_value_len(v), n);
        /* About every 16 MiB of 41 MiB: two or three calls, forwards, against the whole size. */
        assert_true(pr.calls >= 2 && pr.calls <= 4);
        assert_false(pr.backwards);
        assert_int_equal(pr.total, len);
        npf_vtree_free(t);
        free(p);
}

/* --- the real torch_npu snapshots ----------------------------------------------------------- */

static unsigned char *read_file(const char *path, size_t *ret_len)
{
        struct stat st;
        unsigned char *p;
        size_t done = 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0 || fstat(fd, &st) < 0)
                fail_msg("%s: %s", path, strerror(errno));
        p = malloc((size_t) st.st_size ? (size_t) st.st_size : 1);
        assert_non_null(p);
        while (done < (size_t) st.st_size) {
                ssize_t n = read(fd, p + done, (size_t) st.st_size - done);
                if (n <= 0)
                        fail_msg("%s: %s", path, n < 0 ? strerror(errno) : "short read");
                done += (size_t) n;
        }
        close(fd);
        *ret_len = done;
        return p;
}

static bool have_snapshots(void)
{
        struct stat st;

        if (stat(FX_SNAPSHOT_DIR, &st) == 0 && S_ISDIR(st.st_mode))
                return true;
        print_message("%s is absent: the real-snapshot tests are skipped\n", FX_SNAPSHOT_DIR);
        return false;
}

static uint64_t u64(npf_value_t dict, const char *k)
{
        uint64_t u;

        if (!npf_value_uint64(key(dict, k), &u))
                fail_msg("\"%s\" is a %s, not an unsigned integer", k, npf_value_kind_name(key(dict, k)));
        return u;
}

/* The snapshot's segments against Python's count, block count and sum of total_size. */
static void check_segments(const struct fx_snapshot *fx, npf_value_t root)
{
        npf_value_t segs = key(root, "segments");
        size_t blocks = 0;
        uint64_t bytes = 0;

        assert_seq(segs, NPF_V_LIST, fx->segments);
        for (size_t i = 0; i < fx->segments; i++) {
                npf_value_t s = npf_value_at(segs, i);
                blocks += npf_value_len(key(s, "blocks"));
                bytes += u64(s, "total_size");
        }
        assert_int_equal(blocks, fx->blocks);
        assert_true(bytes == fx->segment_bytes);
}

static void test_snapshots(void **state)
{
        (void) state;
        if (!have_snapshots())
                skip();
        for (size_t i = 0; i < N_OF(fx_snapshots); i++) {
                const struct fx_snapshot *fx = &fx_snapshots[i];
                struct fx_doc doc = { .name = fx->name, .canon_len = fx->canon_len, .canon_hash = fx->canon_hash };
                char path[512];
                size_t len;
                loaded_t l;
                npf_value_t root, traces;

                snprintf(path, sizeof(path), "%s/%s", FX_SNAPSHOT_DIR, fx->name);
                unsigned char *p = read_file(path, &len);
                assert_int_equal(len, fx->size);
                if (load(&l, p, len, NULL, NULL) < 0)
                        fail_msg("%s: %s", fx->name, l.err);
                free(p);
                root = npf_value_resolve(l.root);
                check_canon(&doc, root);
                check_segments(fx, root);
                traces = key(root, "device_traces");
                assert_seq(traces, NPF_V_LIST, fx->devices);
                for (size_t d = 0; d < fx->devices; d++) {
                        npf_value_t t = npf_value_at(traces, d);
                        uint64_t sum = 0;
                        size_t n = npf_value_len(t);
                        assert_int_equal(n, fx->entries[d]);
                        for (size_t j = 0; j < n; j++) {
                                uint64_t size;
                                npf_value_t e = npf_value_at(t, j), v;
                                if (npf_value_get(e, "size", &v)) {
                                        assert_true(npf_value_uint64(v, &size));
                                        sum += size;
                                }
                        }
                        assert_true(sum == fx->size_sum[d]);
                        if (n) {
                                assert_true(u64(npf_value_at(t, 0), "addr") == fx->first_addr[d]);
                                assert_true(u64(npf_value_at(t, n - 1), "addr") == fx->last_addr[d]);
                        }
                }
                unload(&l);
        }
}

/* What the snapshot reader will do: every trace entry becomes a record as soon as it is read. */
typedef struct entries {
        size_t n, cap;
        struct {
                uint64_t addr, size;
        } *e;
} entries_t;

static int reduce_entries(void *userdata, const npf_value_t *v, npf_value_t *ret, char *err, size_t err_size)
{
        entries_t *es = userdata;
        uint64_t addr = 0, size = 0;
        npf_value_t a;

        if (v->kind != NPF_V_DICT || !npf_value_get(*v, "action", &a))
                return 0;
        if ((npf_value_get(*v, "addr", &a) && !npf_value_uint64(a, &addr)) ||
            (npf_value_get(*v, "size", &a) && !npf_value_uint64(a, &size))) {
                snprintf(err, err_size, "entry %zu: an address or size that is no unsigned integer", es->n);
                return -EINVAL;
        }
        if (es->n == es->cap) {
                es->cap = es->cap ? es->cap * 2 : 1024;
                es->e = realloc(es->e, es->cap * sizeof(*es->e));
                assert_non_null(es->e);
        }
        es->e[es->n].addr = addr;
        es->e[es->n].size = size;
        *ret = (npf_value_t) { .kind = NPF_V_RECORD, .rkind = 2, .as.u = es->n++ };
        return 1;
}

static void test_snapshots_reduced(void **state)
{
        (void) state;
        if (!have_snapshots())
                skip();
        for (size_t i = 0; i < N_OF(fx_snapshots); i++) {
                const struct fx_snapshot *fx = &fx_snapshots[i];
                entries_t es = { 0 };
                size_t len, plain_bytes, total = 0;
                char path[512];
                loaded_t l;
                npf_value_t root, traces;

                snprintf(path, sizeof(path), "%s/%s", FX_SNAPSHOT_DIR, fx->name);
                unsigned char *p = read_file(path, &len);
                if (load(&l, p, len, NULL, NULL) < 0)
                        fail_msg("%s: %s", fx->name, l.err);
                plain_bytes = npf_vtree_bytes(l.tree);
                unload(&l);
                if (load(&l, p, len, reduce_entries, &es) < 0)
                        fail_msg("%s: %s", fx->name, l.err);
                free(p);
                /* The entries' dictionaries are gone: the tree is smaller than the plain one. */
                assert_true(npf_vtree_bytes(l.tree) < plain_bytes);

                root = npf_value_resolve(l.root);
                check_segments(fx, root);
                traces = key(root, "device_traces");
                for (size_t d = 0; d < fx->devices; d++) {
                        npf_value_t t = npf_value_at(traces, d);
                        size_t n = npf_value_len(t);
                        uint64_t sum = 0;
                        assert_int_equal(n, fx->entries[d]);
                        for (size_t j = 0; j < n; j++) {
                                npf_value_t r = npf_value_at(t, j);
                                assert_true(r.kind == NPF_V_RECORD && r.rkind == 2 && r.as.u < es.n);
                                sum += es.e[r.as.u].size;
                        }
                        assert_true(sum == fx->size_sum[d]);
                        if (n) {
                                assert_true(es.e[npf_value_at(t, 0).as.u].addr == fx->first_addr[d]);
                                assert_true(es.e[npf_value_at(t, n - 1).as.u].addr == fx->last_addr[d]);
                        }
                        total += n;
                }
                /* One record per entry: each was offered once. */
                assert_int_equal(es.n, total);
                unload(&l);
                free(es.e);
        }
}

/* --- the batch fast path ------------------------------------------------------------------- */

/* What the reduce callback was offered, in order, as canonical text (or its hash). As the
 * snapshot reader does, frames (dicts with "filename") become records, lists of them stacks,
 * dicts with "action" entries; a dict with "fail" fails the read; the rest is kept. */
typedef struct offered {
        canon_t c;
        uint64_t records;
        size_t room;                    /* dicts the direct reader's last reserve() made room for */
        size_t reserves, beyond_room;   /* reserve() calls, and dicts handed over past the room */
} offered_t;

enum { REC_FRAME = 8, REC_STACK, REC_ENTRY };

/* @v in @c without asserting anything: the callback may run on the reader's second thread,
 * where cmocka cannot fail a test. A container's items are written as their kind and
 * payload (a string's bytes, a number's bits, a record's id), a container among them by its
 * kind and length. */
static void offered_value(canon_t *c, npf_value_t v, bool items)
{
        char piece[64];
        int n = snprintf(piece, sizeof(piece), "%u.%u.%u.%u:", v.kind, v.flags, v.rkind,
                         npf__value_is_container(v) ? (unsigned) npf_value_len(v) : v.len);
        uint64_t payload = v.kind == NPF_V_STR || v.kind == NPF_V_BYTES ? fnv1a(FNV_OFFSET, v.as.s, v.len)
                           : npf__value_is_container(v) || v.kind == NPF_V_NONE ? 0 : v.as.u;

        n += snprintf(piece + n, sizeof(piece) - (size_t) n, "%016" PRIx64 ",", payload);
        canon_append(c, piece, (size_t) n);
        if (items && npf__value_is_container(v))
                for (size_t i = 0, k = npf_value_len(v) * (v.kind == NPF_V_DICT ? 2 : 1); i < k; i++)
                        offered_value(c, npf_value_resolve(npf_value_items(v)[i]), false);
}

static int reduce_offered(void *userdata, const npf_value_t *v, npf_value_t *ret, char *err, size_t err_size)
{
        offered_t *o = userdata;
        npf_value_t a;
        uint16_t kind = 0;

        offered_value(&o->c, *v, true);
        if (v->kind == NPF_V_DICT && npf_value_get(*v, "fail", &a)) {
                snprintf(err, err_size, "the test refuses container %" PRIu64, o->records);
                return -ECANCELED;
        }
        if (v->kind == NPF_V_DICT)
                kind = npf_value_get(*v, "action", &a) ? REC_ENTRY : npf_value_get(*v, "filename", &a) ? REC_FRAME : 0;
        if (v->kind == NPF_V_LIST && npf_value_len(*v) > 0) {
                kind = REC_STACK;
                for (size_t i = 0; i < npf_value_len(*v); i++)
                        if (npf_value_at(*v, i).kind != NPF_V_RECORD || npf_value_at(*v, i).rkind != REC_FRAME)
                                kind = 0;
        }
        if (!kind)
                return 0;
        *ret = (npf_value_t) { .kind = NPF_V_RECORD, .rkind = kind, .as.u = o->records++ };
        return 1;
}

/* The direct reader of the tests: what reduce_offered() does, offered a container that holds
 * the dict's pairs or the list's items, as npf_vtree_complete_items() offers one. */
static int offer_as_container(void *userdata, npf_vkind_t kind, const npf_value_t *items, size_t n,
                              npf_value_t *ret, char *err, size_t err_size)
{
        npf_container_t c;
        npf_value_t v = npf_test_container(&c, kind, items, n);

        return reduce_offered(userdata, &v, ret, err, err_size);
}

static unsigned direct_key(void *userdata, const char *s, size_t len)
{
        (void) userdata;
        return npf_test_direct_key(s, len);
}

static size_t direct_dicts;     /* read by the direct path, for tests that want it taken */

static int direct_dict(void *userdata, const npf_value_t *pairs, size_t n, const npf_value_t *by_key,
                       uint32_t present, npf_value_t *ret, char *err, size_t err_size)
{
        (void) by_key;
        assert_true(present & 1u << 1);
        direct_dicts++;
        offered_t *o = userdata;
        if (o->room == 0)
                o->beyond_room++;
        else
                o->room--;
        return offer_as_container(userdata, NPF_V_DICT, pairs, 2 * n, ret, err, err_size);
}

/* Called while no dict is handed over: the room the batch about to be built may fill. */
static int direct_reserve(void *userdata, size_t n)
{
        offered_t *o = userdata;

        o->room = n;
        o->reserves++;
        return 0;
}

static int direct_list(void *userdata, const npf_value_t *items, size_t n, npf_value_t *ret, char *err,
                       size_t err_size)
{
        return offer_as_container(userdata, NPF_V_LIST, items, n, ret, err, err_size);
}

/*
 * @data read with the batch fast path and a direct reader of dicts with "action", with the
 * batch fast path alone, and with the opcodes one by one: the same result, the same error,
 * the same containers offered in the same order. Return: the containers the tree made with
 * the fast path alone, and with the opcodes in @ret_opcodes_made (0 when the read failed).
 */
static size_t assert_as_opcodes(const char *name, const unsigned char *data, size_t len, bool keep_text,
                                size_t *ret_opcodes_made)
{
        static const char *const path[] = { "the direct path", "the fast path", "the opcodes" };
        offered_t o[3] = { 0 };
        canon_t root[3] = { 0 };
        loaded_t l[3];
        size_t made[3] = { 0 };

        for (int k = 0; k < 3; k++) {
                npf_pickle_direct_t direct = {
                        .key = direct_key, .dict = direct_dict, .list = k == 0 ? direct_list : NULL,
                        .reserve = direct_reserve, .required = 1u << 1, .lists = 1u << 4, .userdata = &o[k],
                };
                o[k].c = (canon_t) { .text = keep_text ? calloc(1, 1) : NULL, .cap = 1, .hash = FNV_OFFSET };
                root[k] = (canon_t) { .text = keep_text ? calloc(1, 1) : NULL, .cap = 1, .hash = FNV_OFFSET };
                if (load_direct(&l[k], data, len, k == 2 ? NPF_PICKLE_OPCODES_ONLY : 0, reduce_offered, &o[k],
                                k == 0 ? &direct : NULL) == 0) {
                        canon_value(&root[k], npf_value_resolve(l[k].root), 0);
                        made[k] = npf_vtree_containers_made(l[k].tree);
                }
        }
        /* Every dict the direct reader was handed was one its reserve() made room for. */
        if (o[0].beyond_room || (o[0].records && !o[0].reserves))
                fail_msg("%s (%zu bytes): %zu dicts handed over beyond the room reserved (%zu reserves)", name, len,
                         o[0].beyond_room, o[0].reserves);
        for (int k = 0; k < 2; k++) {
                if (l[k].rc != l[2].rc || (l[k].rc < 0 && strcmp(l[k].err, l[2].err) != 0))
                        fail_msg("%s (%zu bytes): %s returns %d \"%s\", the opcodes %d \"%s\"", name, len, path[k],
                                 l[k].rc, l[k].rc < 0 ? l[k].err : "", l[2].rc, l[2].rc < 0 ? l[2].err : "");
                if (o[k].c.len != o[2].c.len || o[k].c.hash != o[2].c.hash || o[k].records != o[2].records ||
                    (keep_text && strcmp(o[k].c.text, o[2].c.text) != 0))
                        fail_msg("%s (%zu bytes): the containers offered by %s differ (%zu against %zu bytes of "
                                 "text)%s%.200s%s%.200s", name, len, path[k], o[k].c.len, o[2].c.len,
                                 keep_text ? "\n  fast:    " : "", keep_text ? o[k].c.text : "",
                                 keep_text ? "\n  opcodes: " : "", keep_text ? o[2].c.text : "");
                if (root[k].len != root[2].len || root[k].hash != root[2].hash)
                        fail_msg("%s (%zu bytes): the trees of %s and the opcodes differ", name, len, path[k]);
        }
        for (int k = 0; k < 3; k++) {
                unload(&l[k]);
                free(o[k].c.text);
                free(root[k].text);
        }
        *ret_opcodes_made = made[2];
        return made[1];
}

static void test_batches_as_opcodes(void **state)
{
        (void) state;
        for (size_t i = 0; i < N_OF(fx_batches); i++) {
                const struct fx_doc *fx = &fx_batches[i];
                bool fast = !strstr(fx->name, "(left to the opcodes)");
                size_t fast_made, opcodes_made;
                loaded_t l;

                /* Without a callback, the document Python wrote. */
                if (load(&l, fx->data, fx->len, NULL, NULL) < 0)
                        fail_msg("%s: %s", fx->name, l.err);
                check_canon(fx, l.root);
                unload(&l);

                fast_made = assert_as_opcodes(fx->name, fx->data, fx->len, true, &opcodes_made);
                /* Where the fast path reads a batch, the tree makes no container for its dicts
                 * (nor for the frames of the preamble, which are a batch too). */
                if (strstr(fx->name, "fail"))
                        assert_true(fast_made == 0 && opcodes_made == 0);
                else if (fast ? opcodes_made - fast_made < FX_BATCH_ENTRIES : opcodes_made - fast_made >= FX_BATCH_ENTRIES)
                        fail_msg("%s: %zu containers made with the fast path, %zu without", fx->name, fast_made,
                                 opcodes_made);
                /* Every prefix fails alike. */
                for (size_t n = 0; n < fx->len; n++)
                        assert_as_opcodes(fx->name, fx->data, n, true, &opcodes_made);
        }
}

/* More batches than the reader hands its second thread at once, each referring to what the
 * one before memoized while that one is being built (tests/gen-pickle-fixtures.py). */
static void test_batches_as_opcodes_across_handoffs(void **state)
{
        size_t len, fast_made, opcodes_made;
        unsigned char *p = read_file(NPF_PICKLE_HANDOFF, &len);

        (void) state;
        direct_dicts = 0;
        fast_made = assert_as_opcodes("handoff.pkl", p, len, false, &opcodes_made);
        /* 9,500 entries and their stacks, none built in the tree; the direct path reads them. */
        assert_true(opcodes_made - fast_made >= 9500);
        if (direct_dicts < 9500)
                fail_msg("handoff.pkl: %zu dicts by the direct path", direct_dicts);
        free(p);
}

/* The real snapshots, with thousands of entries in batches of 1,000. */
static void test_batches_as_opcodes_snapshots(void **state)
{
        (void) state;
        if (!have_snapshots())
                skip();
        for (size_t i = 0; i < N_OF(fx_snapshots); i++) {
                char path[512];
                size_t len, fast_made, opcodes_made;

                snprintf(path, sizeof(path), "%s/%s", FX_SNAPSHOT_DIR, fx_snapshots[i].name);
                unsigned char *p = read_file(path, &len);
                direct_dicts = 0;
                fast_made = assert_as_opcodes(fx_snapshots[i].name, p, len, false, &opcodes_made);
                assert_true(fast_made < opcodes_made);
                /* Nearly every trace entry goes by the direct path. */
                if (direct_dicts < 7000)
                        fail_msg("%s: %zu dicts by the direct path", fx_snapshots[i].name, direct_dicts);
                free(p);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_batches_as_opcodes),
                cmocka_unit_test(test_batches_as_opcodes_across_handoffs),
                cmocka_unit_test(test_batches_as_opcodes_snapshots),
                cmocka_unit_test(test_protocol_0),
                cmocka_unit_test(test_protocol_1),
                cmocka_unit_test(test_protocol_2),
                cmocka_unit_test(test_protocol_3),
                cmocka_unit_test(test_protocol_4),
                cmocka_unit_test(test_protocol_5),
                cmocka_unit_test(test_refused_cpython_pickles),
                cmocka_unit_test(test_refused_opcodes),
                cmocka_unit_test(test_truncated),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_errors_say_where),
                cmocka_unit_test(test_rare_opcodes),
                cmocka_unit_test(test_integer_encodings),
                cmocka_unit_test(test_text_scalars),
                cmocka_unit_test(test_unhashable_key),
                cmocka_unit_test(test_cycles),
                cmocka_unit_test(test_deep_nesting),
                cmocka_unit_test(test_stack_cap),
                cmocka_unit_test(test_memo_cap),
                cmocka_unit_test(test_memo_index_costs_no_gigabytes),
                cmocka_unit_test(test_reduce),
                cmocka_unit_test(test_reduce_root),
                cmocka_unit_test(test_reduce_error),
                cmocka_unit_test(test_reduce_long_message),
                cmocka_unit_test(test_progress),
                cmocka_unit_test(test_snapshots),
                cmocka_unit_test(test_snapshots_reduced),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
