/* SPDX-License-Identifier: MIT */
/* The word a person likely meant: npf_near_word() on npuprofctl's commands. */
#include "lib/nearword.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const commands[] = {
        "status", "ranks", "top", "windows", "start", "stop", "config", "reload", "metrics", "validate", "fleet",
        "analyze", "help",
};

static const char *near(const char *word)
{
        return npf_near_word(word, commands, N_OF(commands));
}

static void typos_find_their_word(void **state)
{
        (void) state;
        assert_string_equal(near("stauts"), "status");  /* a swap of neighbours: one edit */
        assert_string_equal(near("statsu"), "status");
        assert_string_equal(near("windos"), "windows"); /* a letter left out */
        assert_string_equal(near("fleeet"), "fleet");   /* one too many */
        assert_string_equal(near("relaod"), "reload");
        assert_string_equal(near("metric"), "metrics");
}

static void a_prefix_of_one_word_is_that_word(void **state)
{
        (void) state;
        assert_string_equal(near("win"), "windows");
        assert_string_equal(near("val"), "validate");
        assert_string_equal(near("f"), "fleet");
        /* "s" begins status, start and stop: no prefix decides, and a word of one letter has
         * no near word. */
        assert_null(near("s"));
}

static void far_or_short_words_find_none(void **state)
{
        (void) state;
        assert_null(near(""));
        assert_null(near("frobnicate"));
        assert_null(near("xy"));                        /* three edits from "top" */
        assert_null(near("p"));                         /* two from "top": as many as its letters */
        assert_string_equal(near("op"), "top");         /* one from "top", fewer than its letters */
        assert_string_equal(near("tpo"), "top");        /* a swap is one edit */
        assert_null(near("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")); /* longer than any table */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(typos_find_their_word),
                cmocka_unit_test(a_prefix_of_one_word_is_that_word),
                cmocka_unit_test(far_or_short_words_find_none),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
