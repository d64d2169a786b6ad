/* SPDX-License-Identifier: MIT */
/* Where a key path stands in JSON text: npf_jsonpos_find() and npf_jsonpos_line_column(). */
#include "lib/jsonpos.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Find @path in a heap copy of the @len bytes at @text that is exactly @len bytes long, with
 * no terminating NUL, so that AddressSanitizer catches any read past the end.
 */
static int find_exact(const char *text, size_t len, const char *const *path, size_t depth, uint32_t *ret_line,
                      uint32_t *ret_column)
{
        char *copy = malloc(len ? len : 1);
        int r;

        assert_non_null(copy);
        memcpy(copy, text, len);
        r = npf_jsonpos_find(copy, len, path, depth, ret_line, ret_column);
        free(copy);
        return r;
}

/* The byte offset of 1-based @line and @column in @text. */
static size_t offset_of(const char *text, uint32_t line, uint32_t column)
{
        size_t i = 0;

        for (uint32_t l = 1; l < line; l++) {
                const char *nl = strchr(text + i, '\n');
                assert_non_null(nl);
                i = (size_t) (nl - text) + 1;
        }
        return i + column - 1;
}

static void expect_at(const char *text, const char *const *path, size_t depth, uint32_t line, uint32_t column)
{
        uint32_t l = 0, c = 0;
        int r = find_exact(text, strlen(text), path, depth, &l, &c);

        if (r != 0 || l != line || c != column)
                fail_msg("%s: path of depth %zu starting \"%s\": got r=%d %u:%u, expected %u:%u", text, depth,
                         depth ? path[0] : "", r, l, c, line, column);
}

static void expect_missing(const char *text, const char *const *path, size_t depth)
{
        uint32_t l = 0, c = 0;
        int r = find_exact(text, strlen(text), path, depth, &l, &c);

        if (r != -ENOENT)
                fail_msg("%s: path of depth %zu starting \"%s\": got r=%d %u:%u, expected -ENOENT", text, depth,
                         depth ? path[0] : "", r, l, c);
}

static void test_top_level_keys(void **state)
{
        (void) state;
        const char *text = "{\"a\": 1, \"bb\": \"x\", \"c\": null}";
        const char *const a[] = { "a" }, *const bb[] = { "bb" }, *const c[] = { "c" };

        expect_at(text, a, 1, 1, 7);
        expect_at(text, bb, 1, 1, 16);
        expect_at(text, c, 1, 1, 26);
}

static void test_nested_objects_and_arrays(void **state)
{
        (void) state;
        const char *text =
                "{\n"
                "  \"outer\": {\n"
                "    \"list\": [10, {\"deep\": true}, [7, 8]],\n"
                "    \"k\": \"v\"\n"
                "  }\n"
                "}\n";
        const char *const outer[] = { "outer" };
        const char *const list[] = { "outer", "list" };
        const char *const first[] = { "outer", "list", "[0]" };
        const char *const second[] = { "outer", "list", "[1]" };
        const char *const deep[] = { "outer", "list", "[1]", "deep" };
        const char *const inner[] = { "outer", "list", "[2]", "[1]" };
        const char *const k[] = { "outer", "k" };

        expect_at(text, outer, N_OF(outer), 2, 12);
        expect_at(text, list, N_OF(list), 3, 13);
        expect_at(text, first, N_OF(first), 3, 14);
        expect_at(text, second, N_OF(second), 3, 18);
        expect_at(text, deep, N_OF(deep), 3, 27);
        expect_at(text, inner, N_OF(inner), 3, 38);
        expect_at(text, k, N_OF(k), 4, 10);
}

static void test_top_level_array(void **state)
{
        (void) state;
        const char *text = "[\"a\", {\"x\": [true, false]}]";
        const char *const p0[] = { "[0]" };
        const char *const p1x1[] = { "[1]", "x", "[1]" };

        expect_at(text, p0, N_OF(p0), 1, 2);
        expect_at(text, p1x1, N_OF(p1x1), 1, 20);
}

static void test_keys_with_escapes(void **state)
{
        (void) state;
        /* {"a\"b": 1, "c\\d": 2, "e\nf": 3, "g\/h": 4} */
        const char *text = "{\"a\\\"b\": 1, \"c\\\\d\": 2, \"e\\nf\": 3, \"g\\/h\": 4}";
        const char *const quote[] = { "a\"b" }, *const backslash[] = { "c\\d" };
        const char *const newline[] = { "e\nf" }, *const slash[] = { "g/h" };
        const char *const raw[] = { "a\\\"b" }, *const a[] = { "a" }, *const ab[] = { "ab" };

        expect_at(text, quote, 1, 1, 10);
        expect_at(text, backslash, 1, 1, 21);
        expect_at(text, newline, 1, 1, 32);
        expect_at(text, slash, 1, 1, 43);
        expect_missing(text, raw, 1);
        expect_missing(text, a, 1);
        expect_missing(text, ab, 1);
}

static void test_string_values_do_not_confuse_the_scan(void **state)
{
        (void) state;
        /* {"s": "x\"}, \"t\": 9", "t": 1}: a value that looks like a key. */
        const char *text = "{\"s\": \"x\\\"}, \\\"t\\\": 9\", \"t\": 1}";
        /* {"x": "k", "k": 3}: a value equal to the key searched. */
        const char *text2 = "{\"x\": \"k\", \"k\": 3}";
        const char *const t[] = { "t" }, *const k[] = { "k" };

        expect_at(text, t, 1, 1, 30);
        expect_at(text2, k, 1, 1, 17);
}

static void test_similar_keys_and_levels(void **state)
{
        (void) state;
        const char *const a[] = { "a" }, *const k[] = { "k" }, *const ok[] = { "o", "k" };

        /* A longer key with the same start is not the key. */
        expect_at("{\"ab\": 1, \"a\": 2}", a, 1, 1, 16);
        /* The same key nested in another object is not the top-level key. */
        expect_at("{\"o\": {\"k\": 1}, \"k\": 2}", k, 1, 1, 22);
        expect_at("{\"o\": {\"k\": 1}, \"k\": 2}", ok, 2, 1, 13);
}

static void test_whitespace_variants(void **state)
{
        (void) state;
        const char *const a[] = { "a" }, *const a1[] = { "a", "[1]" };

        expect_at("{\t\"a\"\r\n :\n\n\t 5 }", a, 1, 4, 3);
        expect_at("{\"a\":[1,2]}", a1, 2, 1, 9);
        expect_at("{ \"a\" : [ 1 ,\n\t2 ] }", a1, 2, 2, 2);
        expect_at("\n\n  {\"a\": 1}", a, 1, 3, 9);
        expect_at("\r\n{\"a\":\r\n\"v\"}", a, 1, 3, 1);
}

static void test_depth_zero_is_the_root(void **state)
{
        (void) state;
        const char *const none[] = { "unused" };

        expect_at("  {}", none, 0, 1, 3);
        expect_at("\n[1]", none, 0, 2, 1);
}

static void test_missing_paths(void **state)
{
        (void) state;
        const char *const b[] = { "b" }, *const a_b[] = { "a", "b" }, *const a0[] = { "a", "[0]" };
        const char *const a2[] = { "a", "[2]" }, *const i0[] = { "[0]" }, *const bad_index[] = { "a", "[x]" };
        const char *const unclosed_index[] = { "a", "[1" }, *const a[] = { "a" };

        expect_missing("{\"a\": 1}", b, 1);
        expect_missing("{}", b, 1);
        expect_missing("{\"a\": 1}", a_b, 2);              /* through a scalar */
        expect_missing("{\"a\": {\"c\": 1}}", a_b, 2);
        expect_missing("{\"a\": []}", a0, 2);               /* empty array */
        expect_missing("{\"a\": [1, 2]}", a2, 2);           /* index past the end */
        expect_missing("{\"a\": {\"b\": 1}}", a0, 2);       /* an index into an object */
        expect_missing("{\"a\": [1, 2]}", a_b, 2);          /* a key into an array */
        expect_missing("{\"a\": 1}", i0, 1);
        expect_missing("{\"a\": [1, 2]}", bad_index, 2);
        expect_missing("{\"a\": [1, 2]}", unclosed_index, 2);
        expect_missing("5", a, 1);
        expect_missing("", a, 1);
        expect_missing("   ", a, 1);
}

static void test_null_text(void **state)
{
        (void) state;
        const char *const a[] = { "a" };
        uint32_t l = 0, c = 0;

        assert_int_equal(npf_jsonpos_find(NULL, 0, a, 1, &l, &c), -ENOENT);
        assert_int_equal(npf_jsonpos_find(NULL, 10, a, 1, &l, &c), -ENOENT);
}

/* Every prefix of a document: either not found, or found where the whole text has it. */
static void test_truncated_text(void **state)
{
        (void) state;
        const char *text =
                "{\"a\": 12, \"s\": \"x\\\"y\", \"o\": {\"k\": [1, {\"z\": null}]},\n"
                " \"esc\\n\": true, \"last\": \"end\"}";
        const char *const paths[][4] = {
                { "a" }, { "s" }, { "o" }, { "o", "k" }, { "o", "k", "[1]" }, { "o", "k", "[1]", "z" },
                { "esc\n" }, { "last" }, { "nope" },
        };
        const size_t depths[] = { 1, 1, 1, 2, 3, 4, 1, 1, 1 };
        size_t len = strlen(text);
        size_t found_somewhere = 0;

        for (size_t p = 0; p < N_OF(paths); p++) {
                uint32_t full_line = 0, full_column = 0;
                int full = find_exact(text, len, paths[p], depths[p], &full_line, &full_column);

                assert_int_equal(full, p + 1 == N_OF(paths) ? -ENOENT : 0);
                for (size_t n = 0; n <= len; n++) {
                        uint32_t l = 0, c = 0;
                        int r = find_exact(text, n, paths[p], depths[p], &l, &c);
                        if (r == -ENOENT)
                                continue;
                        if (r != 0 || full != 0 || l != full_line || c != full_column)
                                fail_msg("prefix of %zu bytes, path %zu: r=%d %u:%u, whole text %d %u:%u", n, p, r,
                                         l, c, full, full_line, full_column);
                        assert_true(offset_of(text, l, c) < n);   /* inside the prefix */
                        found_somewhere++;
                }
        }
        assert_true(found_somewhere > 0);
}

static void test_unterminated_strings_and_escapes(void **state)
{
        (void) state;
        const char *const a[] = { "a" }, *const b[] = { "b" }, *const a0[] = { "a", "[0]" };
        static const char *const texts[] = {
                "{\"a\\", "{\"a", "{\"", "{", "[", "\"", "\\", "{\"a\": \"\\", "{\"a\": \"x",
                "{\"a\": [\"\\\"", "{\"a\": [1,", "{\"a\": [1", "{\"x\": \"\\\\\\", "{\"x\":", "{\"x\" 1",
                "{\"x\": 1 \"b\": 2}", "{\"x\": {\"y\": [}, \"b\": 1}", "{\"a\":}",
        };

        for (size_t i = 0; i < N_OF(texts); i++) {
                uint32_t l = 0, c = 0;
                size_t len = strlen(texts[i]);
                int r;

                r = find_exact(texts[i], len, a, 1, &l, &c);
                assert_true(r == -ENOENT || (r == 0 && l == 1 && c >= 1 && c <= len));
                r = find_exact(texts[i], len, b, 1, &l, &c);
                assert_true(r == -ENOENT || (r == 0 && l == 1 && c >= 1 && c <= len));
                r = find_exact(texts[i], len, a0, 2, &l, &c);
                assert_true(r == -ENOENT || (r == 0 && l == 1 && c >= 1 && c <= len));
        }
        /* A key with nothing after it: there is no value to point at. */
        expect_missing("{\"a\":", a, 1);
        expect_missing("{\"a\":  ", a, 1);
}

/* Deterministic garbage: the scan must stay inside the buffer and answer sensibly. */
static void test_garbage(void **state)
{
        (void) state;
        static const char alphabet[] = "{}[]\":,\\ \n\tab01-.eE\x80\xff";
        const char *const paths[][3] = { { "a" }, { "a", "b" }, { "[0]" }, { "a", "[1]", "b" }, { "ab" } };
        const size_t depths[] = { 1, 2, 1, 3, 1 };
        uint32_t seed = 12345;
        char buf[64];

        for (int iter = 0; iter < 20000; iter++) {
                size_t len;

                seed = seed * 1103515245u + 12345u;
                len = (seed >> 16) % sizeof(buf);
                for (size_t i = 0; i < len; i++) {
                        seed = seed * 1103515245u + 12345u;
                        buf[i] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
                }
                for (size_t p = 0; p < N_OF(paths); p++) {
                        uint32_t l = 0, c = 0, lines = 1;
                        int r = find_exact(buf, len, paths[p], depths[p], &l, &c);

                        for (size_t i = 0; i < len; i++)
                                lines += buf[i] == '\n';
                        if (r == -ENOENT)
                                continue;
                        if (r != 0 || l < 1 || l > lines || c < 1 || c > len)
                                fail_msg("iteration %d, path %zu: r=%d %u:%u in %zu bytes", iter, p, r, l, c, len);
                }
        }
}

static void test_deep_nesting(void **state)
{
        (void) state;
        enum { DEPTH = 100000 };
        const char *const three[] = { "[0]", "[0]", "[0]" };
        const char *const a[] = { "a" }, *const b[] = { "b" };
        char *text = malloc(2 * DEPTH + 64);
        size_t n = 0;
        uint32_t l = 0, c = 0;
        int r;

        assert_non_null(text);
        /* [[[[ ... ]]]] */
        memset(text, '[', DEPTH);
        memset(text + DEPTH, ']', DEPTH);
        r = find_exact(text, 2 * DEPTH, three, 3, &l, &c);
        assert_int_equal(r, 0);
        assert_int_equal(l, 1);
        assert_int_equal(c, 4);
        /* Unclosed nesting, and a key after a deeply nested value: no crash, no overread. */
        assert_int_equal(find_exact(text, DEPTH, a, 1, &l, &c), -ENOENT);
        n = (size_t) snprintf(text, 16, "{\"a\": ");
        memset(text + n, '[', DEPTH);
        n += DEPTH;
        memset(text + n, ']', DEPTH);
        n += DEPTH;
        memcpy(text + n, ", \"b\": 1}", 9);
        n += 9;
        r = find_exact(text, n, a, 1, &l, &c);
        assert_int_equal(r, 0);
        assert_int_equal(l, 1);
        assert_int_equal(c, 7);
        r = find_exact(text, n, b, 1, &l, &c);
        assert_true(r == -ENOENT || (r == 0 && l == 1 && c == n - 1));
        free(text);
}

/* Raw NUL bytes in a key (found by the fuzzer) must not carry the compare past the wanted key. */
static void test_nul_bytes_in_key(void **state)
{
        (void) state;
        static const char text[] = "{\"ab\0\0\0\0\": 1, \"ab\": 2}";
        const char *const ab[] = { "ab" };
        uint32_t l = 0, c = 0;

        assert_int_equal(find_exact(text, sizeof(text) - 1, ab, 1, &l, &c), 0);
        assert_int_equal(l, 1);
        assert_int_equal(c, 21);
}

static void test_line_column(void **state)
{
        (void) state;
        const char *text = "ab\ncd\n";
        size_t len = strlen(text);
        uint32_t l = 0, c = 0;

        npf_jsonpos_line_column(text, len, 0, &l, &c);
        assert_int_equal(l, 1);
        assert_int_equal(c, 1);
        npf_jsonpos_line_column(text, len, 2, &l, &c);  /* the newline itself */
        assert_int_equal(l, 1);
        assert_int_equal(c, 3);
        npf_jsonpos_line_column(text, len, 3, &l, &c);
        assert_int_equal(l, 2);
        assert_int_equal(c, 1);
        npf_jsonpos_line_column(text, len, 5, &l, &c);
        assert_int_equal(l, 2);
        assert_int_equal(c, 3);
        npf_jsonpos_line_column(text, len, 6, &l, &c);  /* just past the end */
        assert_int_equal(l, 3);
        assert_int_equal(c, 1);
        npf_jsonpos_line_column(text, len, 1000, &l, &c);   /* past the end: clamped */
        assert_int_equal(l, 3);
        assert_int_equal(c, 1);
        npf_jsonpos_line_column(text, 2, 1000, &l, &c);     /* never reads past @len */
        assert_int_equal(l, 1);
        assert_int_equal(c, 3);
}

static void test_line_column_counts_bytes(void **state)
{
        (void) state;
        const char *text = "\xc3\xa9x\r\ny";      /* é is two bytes; \r is a byte of line 1 */
        uint32_t l = 0, c = 0;

        npf_jsonpos_line_column(text, strlen(text), 2, &l, &c);
        assert_int_equal(l, 1);
        assert_int_equal(c, 3);
        npf_jsonpos_line_column(text, strlen(text), 5, &l, &c);
        assert_int_equal(l, 2);
        assert_int_equal(c, 1);
        npf_jsonpos_line_column("", 0, 0, &l, &c);
        assert_int_equal(l, 1);
        assert_int_equal(c, 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_top_level_keys),
                cmocka_unit_test(test_nested_objects_and_arrays),
                cmocka_unit_test(test_top_level_array),
                cmocka_unit_test(test_keys_with_escapes),
                cmocka_unit_test(test_string_values_do_not_confuse_the_scan),
                cmocka_unit_test(test_similar_keys_and_levels),
                cmocka_unit_test(test_whitespace_variants),
                cmocka_unit_test(test_depth_zero_is_the_root),
                cmocka_unit_test(test_missing_paths),
                cmocka_unit_test(test_null_text),
                cmocka_unit_test(test_truncated_text),
                cmocka_unit_test(test_unterminated_strings_and_escapes),
                cmocka_unit_test(test_garbage),
                cmocka_unit_test(test_deep_nesting),
                cmocka_unit_test(test_nul_bytes_in_key),
                cmocka_unit_test(test_line_column),
                cmocka_unit_test(test_line_column_counts_bytes),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
