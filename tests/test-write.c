/* SPDX-License-Identifier: MIT */
/*
 * The writer of the dialects (conf/write): what it writes into a file of each dialect is
 * read back by the daemon's own parser as the window it was asked for, and the file's
 * other keys stay.
 */
#include "conf/write.h"
#include "conf/conf.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct parsed {
        npf_shm_config_t c;
        npf_conf_report_t r;
} parsed_t;

/* @text with @w written into it (NULL: profiling off), parsed back. Return: the new text. */
static char *write_and_parse(const char *text, const npf_conf_window_t *w, parsed_t *ret)
{
        json_error_t je;
        json_t *root = json_loads(text, JSON_PRESERVE_ORDER, &je);
        char err[NPF_CONF_WRITE_ERR_MAX] = "";
        npf_conf_report_t r;

        assert_non_null(root);
        assert_int_equal(npf_conf_parse(text, strlen(text), &ret->c, &r), 0);
        uint32_t dialect = r.dialect;
        if (w) {
                if (npf_conf_write_window(root, dialect, w, err) < 0)
                        fail_msg("%s: %s", text, err);
        } else {
                npf_conf_write_off(root, dialect);
        }
        char *out = json_dumps(root, JSON_PRESERVE_ORDER | JSON_COMPACT);
        json_decref(root);
        assert_non_null(out);
        if (npf_conf_parse(out, strlen(out), &ret->c, &ret->r) < 0)
                fail_msg("%s does not parse: %s: %s", out, ret->r.errors[0].key, ret->r.errors[0].message);
        assert_int_equal(ret->r.dialect, dialect);
        return out;
}

/* Writing @w into @text, a file of @dialect, fails with a message that holds @words. */
static void refused(const char *text, uint32_t dialect, const npf_conf_window_t *w, const char *words)
{
        json_t *root = json_loads(text, JSON_PRESERVE_ORDER, NULL);
        char err[NPF_CONF_WRITE_ERR_MAX] = "";

        assert_non_null(root);
        assert_int_equal(npf_conf_write_window(root, dialect, w, err), -EINVAL);
        if (!strstr(err, words))
                fail_msg("\"%s\" lacks \"%s\"", err, words);
        json_decref(root);
}

static void test_native(void **state)
{
        (void) state;
        parsed_t p;
        npf_conf_window_t w = { .at = 10, .steps = 3, .has_warmup = true, .warmup = 1, .level = "level2",
                                .ranks = "0-2,7", .backend = "host" };
        char *out = write_and_parse("{\"output_dir\": \"job\", \"duration_ms\": 500}", &w, &p);

        assert_true(p.c.args.enabled);
        assert_int_equal(p.c.args.start_step, 10);
        assert_int_equal(p.c.args.step_count, 4);               /* the warmup included */
        assert_int_equal(p.c.args.warmup, 1);
        assert_int_equal(p.c.args.duration_ms, 0);              /* a time bound would contradict the steps */
        assert_int_equal(p.c.args.level, NPF_LEVEL_2);
        assert_int_equal(p.c.args.backend, NPF_BACKEND_HOST);
        assert_int_equal(p.c.args.rank_count, 4);
        assert_true(npf_shm_config_selects(&p.c, 7) && !npf_shm_config_selects(&p.c, 3));
        assert_non_null(strstr(out, "\"output_dir\":\"job\""));
        free(out);

        w = (npf_conf_window_t) { .at_next = true, .steps = 2 };
        out = write_and_parse("{\"start_step\": 4}", &w, &p);
        assert_int_equal(p.c.args.start_step, NPF_STEP_NEXT);
        free(out);
        out = write_and_parse("{\"start_step\": 4, \"steps\": 2}", NULL, &p);
        assert_false(p.c.args.enabled);
        free(out);
}

static void test_torch_npu(void **state)
{
        (void) state;
        parsed_t p;
        const char *file = "{\"prof_dir\": \"p\", \"start_step\": 0, \"active\": 1, \"record_shapes\": true}";
        npf_conf_window_t w = { .at = 20, .steps = 4, .level = "1", .ranks = "0-3,8" };
        char *out = write_and_parse(file, &w, &p);

        assert_true(p.c.args.enabled);
        assert_int_equal(p.c.args.start_step, 20);
        assert_int_equal(p.c.args.step_count, 4);
        assert_int_equal(p.c.args.level, NPF_LEVEL_1);
        assert_int_equal(p.c.args.rank_count, 5);
        assert_true(npf_shm_config_selects(&p.c, 8) && !npf_shm_config_selects(&p.c, 4));
        assert_non_null(strstr(out, "\"is_rank\":true,\"rank_list\":[0,1,2,3,8]"));
        assert_non_null(strstr(out, "\"experimental_config\":{\"profiler_level\":\"Level1\"}"));
        assert_true(p.c.args.flags & NPF_FLAG_RECORD_SHAPES);
        free(out);

        /* Every rank: is_rank false. torch_npu's "next" is its start_step -1. */
        w = (npf_conf_window_t) { .at_next = true, .steps = 2, .ranks = "all", .level = "none" };
        out = write_and_parse(file, &w, &p);
        assert_non_null(strstr(out, "\"is_rank\":false"));
        assert_non_null(strstr(out, "\"start_step\":-1"));
        assert_non_null(strstr(out, "\"profiler_level\":\"Level_none\""));
        assert_int_equal(p.c.args.rank_filter, NPF_RANKS_ALL);
        free(out);

        out = write_and_parse("{\"prof_dir\": \"p\", \"start_step\": 3, \"active\": 1}", NULL, &p);
        assert_false(p.c.args.enabled);
        free(out);

        w = (npf_conf_window_t) { .at = 0, .steps = 2 };
        refused(file, NPF_DIALECT_TORCH_NPU, &w, "\"never\"");
        w = (npf_conf_window_t) { .at = 5, .steps = 2, .ranks = "9-3" };
        refused(file, NPF_DIALECT_TORCH_NPU, &w, "a range goes upwards");
        w = (npf_conf_window_t) { .at = 5, .steps = 2, .level = "Level1" };
        refused("{\"prof_dir\": \"p\", \"experimental_config\": 3}", NPF_DIALECT_TORCH_NPU, &w,
                "experimental_config is not an object");
}

static void test_mindspore(void **state)
{
        (void) state;
        parsed_t p;
        const char *file = "{\"start_step\": -1, \"stop_step\": -1, \"prof_path\": \"m\", \"analyse_mode\": 0}";
        npf_conf_window_t w = { .at = 5, .steps = 3, .level = "Level1", .ranks = "0,4" };
        char *out = write_and_parse(file, &w, &p);

        assert_true(p.c.args.enabled);
        assert_int_equal(p.c.args.start_step, 5);
        assert_int_equal(p.c.args.stop_step, 7);
        assert_int_equal(p.c.args.level, NPF_LEVEL_1);
        assert_non_null(strstr(out, "\"profiler_level\":1"));   /* MindSpore's levels are integers */
        assert_int_equal(p.c.args.rank_count, 2);
        free(out);

        out = write_and_parse("{\"start_step\": 2, \"stop_step\": 4, \"prof_path\": \"m\"}", NULL, &p);
        assert_false(p.c.args.enabled);
        free(out);

        w = (npf_conf_window_t) { .at_next = true, .steps = 2 };
        refused(file, NPF_DIALECT_MINDSPORE, &w, "no \"next\" step");
        w = (npf_conf_window_t) { .at = 5, .steps = 2, .has_warmup = true, .warmup = 1 };
        refused(file, NPF_DIALECT_MINDSPORE, &w, "no warmup");
        w = (npf_conf_window_t) { .at = INT64_MAX, .steps = 3 };
        refused(file, NPF_DIALECT_MINDSPORE, &w, "past the last step");
}

/* The level and rank readers the writer shares with the parser. */
static void test_level_and_ranks(void **state)
{
        (void) state;
        int32_t level = 99;
        npf_shm_config_t *c = calloc(1, sizeof(*c));
        char err[NPF_CONF_MSG_MAX];

        assert_non_null(c);
        assert_int_equal(npf_conf_level_parse("LEVEL0", &level), 0);
        assert_int_equal(level, NPF_LEVEL_0);
        assert_int_equal(npf_conf_level_parse("LevelNone", &level), 0);
        assert_int_equal(level, NPF_LEVEL_NONE);
        assert_int_equal(npf_conf_level_parse("-1", &level), 0);
        assert_int_equal(level, NPF_LEVEL_NONE);
        assert_int_equal(npf_conf_level_parse("Level7", &level), -EINVAL);
        assert_int_equal(level, NPF_LEVEL_NONE);                /* untouched */
        assert_string_equal(npf_conf_level_spelling(NPF_LEVEL_NONE), "Level_none");

        assert_int_equal(npf_conf_ranks_parse("*", c, err), 0);
        assert_int_equal(c->args.rank_filter, NPF_RANKS_ALL);
        assert_int_equal(npf_conf_ranks_parse(" 1, 3-5 ", c, err), 0);
        assert_int_equal(c->args.rank_filter, NPF_RANKS_LIST);
        assert_int_equal(c->args.rank_count, 4);
        assert_int_equal(npf_conf_ranks_parse("1,,2", c, err), -EINVAL);
        assert_non_null(strstr(err, "is not a rank"));
        assert_int_equal(npf_conf_ranks_parse("65536", c, err), -EINVAL);
        assert_non_null(strstr(err, "out of range"));
        assert_int_equal(npf_conf_ranks_parse("", c, err), -EINVAL);
        assert_non_null(strstr(err, "empty"));
        assert_int_equal(c->args.rank_count, 4);                /* untouched */
        free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_native),
                cmocka_unit_test(test_torch_npu),
                cmocka_unit_test(test_mindspore),
                cmocka_unit_test(test_level_and_ranks),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
