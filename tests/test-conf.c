/* SPDX-License-Identifier: MIT */
/* The configuration parser: every key of every dialect, the window rules, every error class. */
#include "conf/conf.h"

#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define SENTINEL 0xa5
#define DS NPF_FLAG_DATA_SIMPLIFICATION    /* the only switch on by default */

enum { N = NPF_DIALECT_NATIVE, T = NPF_DIALECT_TORCH_NPU, M = NPF_DIALECT_MINDSPORE };

/* One parse: its return, the configuration (filled with SENTINEL first) and the report. */
typedef struct result {
        int rc;
        npf_shm_config_t c;
        npf_conf_report_t r;
} result_t;

/* --- helpers ------------------------------------------------------------------------- */

static void dump_report(const char *text, const npf_conf_report_t *r)
{
        print_message("input: %s\n", text);
        for (uint32_t i = 0; i < r->n_errors && i < NPF_CONF_DIAG_MAX; i++)
                print_message("  error [%s] %u:%u %s\n", r->errors[i].key, r->errors[i].line, r->errors[i].column,
                              r->errors[i].message);
        for (uint32_t i = 0; i < r->n_warnings && i < NPF_CONF_DIAG_MAX; i++)
                print_message("  warning [%s] %u:%u %s\n", r->warnings[i].key, r->warnings[i].line,
                              r->warnings[i].column, r->warnings[i].message);
}

static bool untouched(const npf_shm_config_t *c)
{
        const unsigned char *b = (const unsigned char *) c;

        for (size_t i = 0; i < sizeof(*c); i++)
                if (b[i] != SENTINEL)
                        return false;
        return true;
}

static void parse_len(result_t *res, const char *text, size_t len)
{
        memset(res, SENTINEL, sizeof(*res));
        res->rc = npf_conf_parse(text, len, &res->c, &res->r);
}

/* Parse @text, which must be valid; return the number of warnings. */
static uint32_t parse_valid(result_t *res, const char *text)
{
        parse_len(res, text, strlen(text));
        if (res->rc != 0 || res->r.n_errors != 0) {
                dump_report(text, &res->r);
                fail_msg("expected %s to be valid, got %d", text, res->rc);
        }
        return res->r.n_warnings;
}

/* Parse @len bytes of @text, which must be invalid: -EINVAL, the configuration untouched. */
static void parse_invalid_len(result_t *res, const char *text, size_t len)
{
        parse_len(res, text, len);
        if (res->rc != -EINVAL || res->r.n_errors == 0) {
                dump_report(text, &res->r);
                fail_msg("expected %.200s to be invalid, got %d with %u errors", text, res->rc, res->r.n_errors);
        }
        if (!untouched(&res->c))
                fail_msg("%.200s: the configuration was written although the parse failed", text);
}

/* Parse @text, which must have exactly one error; return it. */
static const npf_conf_diag_t *parse_one_error(result_t *res, const char *text)
{
        parse_invalid_len(res, text, strlen(text));
        if (res->r.n_errors != 1) {
                dump_report(text, &res->r);
                fail_msg("%s: expected one error, got %u", text, res->r.n_errors);
        }
        return &res->r.errors[0];
}

/* The diagnostic must be at @key, @line, @column, and its message must hold @want1 and @want2. */
static void check_diag(const char *text, const npf_conf_diag_t *d, const char *key, uint32_t line, uint32_t column,
                       const char *want1, const char *want2)
{
        if (strcmp(d->key, key) != 0 || d->line != line || d->column != column ||
            (want1 && !strstr(d->message, want1)) || (want2 && !strstr(d->message, want2)))
                fail_msg("%s:\n got      [%s] %u:%u \"%s\"\n expected [%s] %u:%u with \"%s\" and \"%s\"", text,
                         d->key, d->line, d->column, d->message, key, line, column, want1 ? want1 : "",
                         want2 ? want2 : "");
}

static const npf_conf_diag_t *find_diag(const npf_conf_diag_t *d, uint32_t n, const char *key)
{
        for (uint32_t i = 0; i < n && i < NPF_CONF_DIAG_MAX; i++)
                if (strcmp(d[i].key, key) == 0)
                        return &d[i];
        fail_msg("no diagnostic with key \"%s\" among %u", key, n);
        return NULL;
}

static bool rank_set(const npf_shm_config_t *c, uint32_t r)
{
        return c->rank_bitmap[r / 8] & (1u << (r % 8));
}

static void check_window(const char *text, uint32_t enabled, int64_t start, int64_t stop, uint64_t count,
                         uint64_t warmup)
{
        result_t res;
        const npf_shm_args_t *a = &res.c.args;

        parse_valid(&res, text);
        if (a->enabled != enabled || a->start_step != start || a->stop_step != stop || a->step_count != count ||
            a->warmup != warmup)
                fail_msg("%s:\n got      enabled %u start %" PRId64 " stop %" PRId64 " count %" PRIu64
                         " warmup %" PRIu64 "\n expected enabled %u start %" PRId64 " stop %" PRId64
                         " count %" PRIu64 " warmup %" PRIu64,
                         text, a->enabled, a->start_step, a->stop_step, a->step_count, a->warmup, enabled, start,
                         stop, count, warmup);
}

/* --- every key of every dialect: a valid value lands in its field ------------------- */

typedef enum field {
        F_FLAGS, F_LEVEL, F_AIC, F_ACTIVITIES, F_ANALYSE, F_EXPORT, F_HOST_SYS, F_BACKEND, F_GC_US,
        F_DURATION, F_MULTIPLE, F_START, F_STOP, F_COUNT, F_WARMUP, F_RANKS, F_PROF_DIR, F_EXTRA,
} field_t;

static const char *const field_names[] = {
        "flags", "level", "aic_metrics", "activities", "analyse_mode", "export_type", "host_sys", "backend",
        "gc_detect_threshold_us", "duration_ms", "start_at_multiple_of", "start_step", "stop_step",
        "step_count", "warmup", "rank_count", "prof_dir", "extra",
};

typedef struct key_case {
        uint32_t dialect;
        const char *json;
        field_t field;
        int64_t want;                   /* for F_RANKS: rank_count with a list filter */
        const char *want_str;           /* for F_PROF_DIR and F_EXTRA */
} key_case_t;

static const key_case_t key_cases[] = {
        /* native: every key of top_keys that D_N reads */
        { N, "{\"start_step\": 7}", F_START, 7, NULL },
        { N, "{\"start_step\": 7, \"steps\": 3}", F_STOP, 9, NULL },
        { N, "{\"start_step\": 7, \"steps\": 3, \"warmup\": 2}", F_WARMUP, 2, NULL },
        { N, "{\"start_step\": 7, \"steps\": 3, \"warmup\": 2}", F_COUNT, 5, NULL },
        { N, "{\"start_step\": 7, \"duration_ms\": 1500}", F_DURATION, 1500, NULL },
        { N, "{\"start_step\": 10, \"start_at_multiple_of\": 5}", F_MULTIPLE, 5, NULL },
        { N, "{\"backend\": \"host\"}", F_BACKEND, NPF_BACKEND_HOST, NULL },
        { N, "{\"backend\": \"acl\"}", F_BACKEND, NPF_BACKEND_ACL, NULL },
        { N, "{\"ranks\": \"3\"}", F_RANKS, 1, NULL },
        { N, "{\"output_dir\": \"/tmp/out\"}", F_PROF_DIR, 0, "/tmp/out" },
        { N, "{\"activities\": [\"NPU\"]}", F_ACTIVITIES, NPF_ACT_NPU, NULL },
        { N, "{\"activities\": [\"CPU\"]}", F_ACTIVITIES, NPF_ACT_CPU, NULL },
        { N, "{\"analyse\": true}", F_ANALYSE, NPF_ANALYSE_SYNC, NULL },
        { N, "{\"analyse\": \"sync\"}", F_ANALYSE, NPF_ANALYSE_SYNC, NULL },
        { N, "{\"analyse\": \"async\"}", F_ANALYSE, NPF_ANALYSE_ASYNC, NULL },
        { N, "{\"analyse\": \"off\"}", F_ANALYSE, NPF_ANALYSE_OFF, NULL },
        { N, "{\"level\": \"Level2\"}", F_LEVEL, NPF_LEVEL_2, NULL },
        { N, "{\"level\": 1}", F_LEVEL, NPF_LEVEL_1, NULL },
        { N, "{\"level\": -1}", F_LEVEL, NPF_LEVEL_NONE, NULL },
        { N, "{\"level\": \"Level_none\"}", F_LEVEL, NPF_LEVEL_NONE, NULL },
        { N, "{\"aic_metrics\": \"MemoryL0\"}", F_AIC, NPF_AIC_MEMORY_L0, NULL },
        { N, "{\"aic_metrics\": 7}", F_AIC, NPF_AIC_MEMORY_ACCESS, NULL },
        { N, "{\"record_shapes\": true}", F_FLAGS, DS | NPF_FLAG_RECORD_SHAPES, NULL },
        { N, "{\"profile_memory\": true}", F_FLAGS, DS | NPF_FLAG_PROFILE_MEMORY, NULL },
        { N, "{\"with_stack\": true}", F_FLAGS, DS | NPF_FLAG_WITH_STACK, NULL },
        { N, "{\"with_flops\": true}", F_FLAGS, DS | NPF_FLAG_WITH_FLOPS, NULL },
        { N, "{\"with_modules\": true}", F_FLAGS, DS | NPF_FLAG_WITH_MODULES, NULL },
        { N, "{\"l2_cache\": true}", F_FLAGS, DS | NPF_FLAG_L2_CACHE, NULL },
        { N, "{\"op_attr\": true}", F_FLAGS, DS | NPF_FLAG_OP_ATTR, NULL },
        { N, "{\"mstx\": true}", F_FLAGS, DS | NPF_FLAG_MSTX, NULL },
        { N, "{\"parallel_strategy\": true}", F_FLAGS, DS | NPF_FLAG_PARALLEL_STRATEGY, NULL },
        { N, "{\"data_simplification\": false}", F_FLAGS, 0, NULL },
        { N, "{\"record_op_args\": true}", F_FLAGS, DS | NPF_FLAG_RECORD_OP_ARGS, NULL },
        { N, "{\"sys_io\": true}", F_FLAGS, DS | NPF_FLAG_SYS_IO, NULL },
        { N, "{\"sys_interconnection\": true}", F_FLAGS, DS | NPF_FLAG_SYS_INTERCONNECTION, NULL },
        { N, "{\"export_type\": [\"db\"]}", F_EXPORT, NPF_EXPORT_DB, NULL },
        { N, "{\"export_type\": \"db\"}", F_EXPORT, NPF_EXPORT_DB, NULL },
        { N, "{\"export_type\": [\"text\", \"db\"]}", F_EXPORT, NPF_EXPORT_TEXT | NPF_EXPORT_DB, NULL },
        { N, "{\"host_sys\": [\"cpu\", \"osrt\"]}", F_HOST_SYS, NPF_HOST_SYS_CPU | NPF_HOST_SYS_OSRT, NULL },
        { N, "{\"mstx_domain_include\": [\"d1\", \"d2\"]}", F_EXTRA, 0, "{\"mstx_domain_include\":[\"d1\",\"d2\"]}" },
        { N, "{\"mstx_domain_exclude\": [\"d3\"]}", F_EXTRA, 0, "{\"mstx_domain_exclude\":[\"d3\"]}" },
        { N, "{\"gc_detect_threshold\": 1.5}", F_GC_US, 1500, NULL },
        { N, "{\"gc_detect_threshold\": 0}", F_GC_US, 0, NULL },
        { N, "{\"gc_detect_threshold\": null}", F_GC_US, -1, NULL },

        /* torch_npu, top level */
        { T, "{\"prof_dir\": \"p\", \"start_step\": 7}", F_START, 7, NULL },
        { T, "{\"start_step\": 7, \"active\": 3}", F_COUNT, 3, NULL },
        { T, "{\"start_step\": 7, \"active\": 3}", F_STOP, 9, NULL },
        { T, "{\"start_step\": 7, \"active\": 1, \"warmup\": 2}", F_WARMUP, 2, NULL },
        { T, "{\"prof_dir\": \"p\", \"start_step\": 7, \"duration_ms\": 60000}", F_DURATION, 60000, NULL },
        { T, "{\"prof_dir\": \"p\", \"start_at_multiple_of\": 10}", F_MULTIPLE, 10, NULL },
        { T, "{\"prof_dir\": \"p\", \"backend\": \"host\"}", F_BACKEND, NPF_BACKEND_HOST, NULL },
        { T, "{\"prof_dir\": \"p\", \"ranks\": [1, 2]}", F_RANKS, 2, NULL },
        { T, "{\"is_rank\": true, \"rank_list\": [4, 5, 6]}", F_RANKS, 3, NULL },
        { T, "{\"rank_list\": [4, 5], \"is_rank\": true}", F_RANKS, 2, NULL },
        { T, "{\"prof_dir\": \"/data/prof\"}", F_PROF_DIR, 0, "/data/prof" },
        { T, "{\"prof_dir\": \"p\", \"activities\": [\"CPU\"]}", F_ACTIVITIES, NPF_ACT_CPU, NULL },
        { T, "{\"prof_dir\": \"p\", \"analyse\": true}", F_ANALYSE, NPF_ANALYSE_SYNC, NULL },
        { T, "{\"analyse\": true, \"async_mode\": true}", F_ANALYSE, NPF_ANALYSE_ASYNC, NULL },
        { T, "{\"prof_dir\": \"p\", \"record_shapes\": true}", F_FLAGS, DS | NPF_FLAG_RECORD_SHAPES, NULL },
        { T, "{\"prof_dir\": \"p\", \"profile_memory\": true}", F_FLAGS, DS | NPF_FLAG_PROFILE_MEMORY, NULL },
        { T, "{\"prof_dir\": \"p\", \"with_stack\": true}", F_FLAGS, DS | NPF_FLAG_WITH_STACK, NULL },
        { T, "{\"prof_dir\": \"p\", \"with_flops\": true}", F_FLAGS, DS | NPF_FLAG_WITH_FLOPS, NULL },
        { T, "{\"prof_dir\": \"p\", \"with_modules\": true}", F_FLAGS, DS | NPF_FLAG_WITH_MODULES, NULL },
        { T, "{\"metadata\": {\"run\": \"a1\", \"n\": 2}}", F_EXTRA, 0, "{\"metadata\":{\"n\":2,\"run\":\"a1\"}}" },

        /* torch_npu, experimental_config */
        { T, "{\"experimental_config\": {\"profiler_level\": \"Level2\"}}", F_LEVEL, NPF_LEVEL_2, NULL },
        { T, "{\"experimental_config\": {\"profiler_level\": \"Level_none\"}}", F_LEVEL, NPF_LEVEL_NONE, NULL },
        { T, "{\"experimental_config\": {\"aic_metrics\": \"Memory\"}}", F_AIC, NPF_AIC_MEMORY, NULL },
        { T, "{\"experimental_config\": {\"l2_cache\": true}}", F_FLAGS, DS | NPF_FLAG_L2_CACHE, NULL },
        { T, "{\"experimental_config\": {\"op_attr\": true}}", F_FLAGS, DS | NPF_FLAG_OP_ATTR, NULL },
        { T, "{\"experimental_config\": {\"gc_detect_threshold\": 2}}", F_GC_US, 2000, NULL },
        { T, "{\"experimental_config\": {\"data_simplification\": false}}", F_FLAGS, 0, NULL },
        { T, "{\"experimental_config\": {\"record_op_args\": true}}", F_FLAGS, DS | NPF_FLAG_RECORD_OP_ARGS, NULL },
        { T, "{\"experimental_config\": {\"export_type\": [\"text\", \"db\"]}}", F_EXPORT,
          NPF_EXPORT_TEXT | NPF_EXPORT_DB, NULL },
        { T, "{\"experimental_config\": {\"msprof_tx\": true}}", F_FLAGS, DS | NPF_FLAG_MSTX, NULL },
        { T, "{\"experimental_config\": {\"mstx\": true}}", F_FLAGS, DS | NPF_FLAG_MSTX, NULL },
        /* One switch, on when either is (experimental_config.py:130), in either order. */
        { T, "{\"experimental_config\": {\"msprof_tx\": true, \"mstx\": false}}", F_FLAGS, DS | NPF_FLAG_MSTX, NULL },
        { T, "{\"experimental_config\": {\"mstx\": true, \"msprof_tx\": false}}", F_FLAGS, DS | NPF_FLAG_MSTX, NULL },
        { T, "{\"experimental_config\": {\"msprof_tx\": false, \"mstx\": false}}", F_FLAGS, DS, NULL },
        { T, "{\"experimental_config\": {\"mstx_domain_include\": [\"x\"]}}", F_EXTRA, 0,
          "{\"mstx_domain_include\":[\"x\"]}" },
        { T, "{\"experimental_config\": {\"mstx_domain_exclude\": [\"y\"]}}", F_EXTRA, 0,
          "{\"mstx_domain_exclude\":[\"y\"]}" },
        { T, "{\"experimental_config\": {\"host_sys\": [\"mem\", \"disk\", \"network\"]}}", F_HOST_SYS,
          NPF_HOST_SYS_MEM | NPF_HOST_SYS_DISK | NPF_HOST_SYS_NETWORK, NULL },
        { T, "{\"experimental_config\": {\"sys_io\": true}}", F_FLAGS, DS | NPF_FLAG_SYS_IO, NULL },
        { T, "{\"experimental_config\": {\"sys_interconnection\": true}}", F_FLAGS,
          DS | NPF_FLAG_SYS_INTERCONNECTION, NULL },

        /* MindSpore */
        { M, "{\"start_step\": 3, \"stop_step\": 8}", F_START, 3, NULL },
        { M, "{\"start_step\": 3, \"stop_step\": 8}", F_STOP, 8, NULL },
        { M, "{\"start_step\": 3, \"stop_step\": 8}", F_COUNT, 6, NULL },
        { M, "{\"prof_path\": \"m\", \"duration_ms\": 100}", F_DURATION, 100, NULL },
        { M, "{\"prof_path\": \"m\", \"start_at_multiple_of\": 4}", F_MULTIPLE, 4, NULL },
        { M, "{\"prof_path\": \"m\", \"backend\": \"acl\"}", F_BACKEND, NPF_BACKEND_ACL, NULL },
        { M, "{\"prof_path\": \"m\", \"ranks\": \"0-3\"}", F_RANKS, 4, NULL },
        { M, "{\"prof_path\": \"./ms\"}", F_PROF_DIR, 0, "./ms" },
        { M, "{\"prof_path\": \"m\", \"activities\": 1}", F_ACTIVITIES, NPF_ACT_CPU, NULL },
        { M, "{\"prof_path\": \"m\", \"activities\": [\"NPU\"]}", F_ACTIVITIES, NPF_ACT_NPU, NULL },
        { M, "{\"prof_path\": \"m\", \"analyse\": true}", F_ANALYSE, NPF_ANALYSE_SYNC, NULL },
        { M, "{\"analyse_mode\": 1}", F_ANALYSE, NPF_ANALYSE_ASYNC, NULL },
        { M, "{\"profiler_level\": \"Level1\"}", F_LEVEL, NPF_LEVEL_1, NULL },
        { M, "{\"profiler_level\": 2}", F_LEVEL, NPF_LEVEL_2, NULL },
        { M, "{\"prof_path\": \"m\", \"aic_metrics\": 5}", F_AIC, NPF_AIC_RESOURCE_CONFLICT_RATIO, NULL },
        { M, "{\"prof_path\": \"m\", \"aic_metrics\": \"ArithmeticUtilization\"}", F_AIC,
          NPF_AIC_ARITHMETIC_UTILIZATION, NULL },
        { M, "{\"aicore_metrics\": \"L2Cache\"}", F_AIC, NPF_AIC_L2_CACHE, NULL },
        { M, "{\"aicore_metrics\": 0}", F_AIC, NPF_AIC_PIPE_UTILIZATION, NULL },
        { M, "{\"prof_path\": \"m\", \"record_shapes\": true}", F_FLAGS, DS | NPF_FLAG_RECORD_SHAPES, NULL },
        { M, "{\"prof_path\": \"m\", \"profile_memory\": true}", F_FLAGS, DS | NPF_FLAG_PROFILE_MEMORY, NULL },
        { M, "{\"prof_path\": \"m\", \"with_stack\": true}", F_FLAGS, DS | NPF_FLAG_WITH_STACK, NULL },
        { M, "{\"prof_path\": \"m\", \"l2_cache\": true}", F_FLAGS, DS | NPF_FLAG_L2_CACHE, NULL },
        { M, "{\"prof_path\": \"m\", \"mstx\": true}", F_FLAGS, DS | NPF_FLAG_MSTX, NULL },
        { M, "{\"prof_path\": \"m\", \"parallel_strategy\": true}", F_FLAGS, DS | NPF_FLAG_PARALLEL_STRATEGY, NULL },
        { M, "{\"prof_path\": \"m\", \"data_simplification\": false}", F_FLAGS, 0, NULL },
        { M, "{\"prof_path\": \"m\", \"sys_io\": true}", F_FLAGS, DS | NPF_FLAG_SYS_IO, NULL },
        { M, "{\"prof_path\": \"m\", \"sys_interconnection\": true}", F_FLAGS, DS | NPF_FLAG_SYS_INTERCONNECTION,
          NULL },
        { M, "{\"prof_path\": \"m\", \"export_type\": [\"db\"]}", F_EXPORT, NPF_EXPORT_DB, NULL },
        { M, "{\"prof_path\": \"m\", \"host_sys\": [\"cpu\"]}", F_HOST_SYS, NPF_HOST_SYS_CPU, NULL },
        { M, "{\"prof_path\": \"m\", \"mstx_domain_include\": [\"i\"]}", F_EXTRA, 0,
          "{\"mstx_domain_include\":[\"i\"]}" },
        { M, "{\"prof_path\": \"m\", \"mstx_domain_exclude\": [\"e\"]}", F_EXTRA, 0,
          "{\"mstx_domain_exclude\":[\"e\"]}" },
};

static int64_t field_value(const npf_shm_config_t *c, field_t f)
{
        const npf_shm_args_t *a = &c->args;

        switch (f) {
        case F_FLAGS: return a->flags;
        case F_LEVEL: return a->level;
        case F_AIC: return a->aic_metrics;
        case F_ACTIVITIES: return a->activities;
        case F_ANALYSE: return a->analyse_mode;
        case F_EXPORT: return a->export_type;
        case F_HOST_SYS: return a->host_sys;
        case F_BACKEND: return a->backend;
        case F_GC_US: return a->gc_detect_threshold_us;
        case F_DURATION: return (int64_t) a->duration_ms;
        case F_MULTIPLE: return (int64_t) a->start_at_multiple_of;
        case F_START: return a->start_step;
        case F_STOP: return a->stop_step;
        case F_COUNT: return (int64_t) a->step_count;
        case F_WARMUP: return (int64_t) a->warmup;
        case F_RANKS: return a->rank_filter == NPF_RANKS_LIST ? (int64_t) a->rank_count : -1;
        case F_PROF_DIR: return a->prof_dir_len;
        case F_EXTRA: return a->extra_len;
        }
        return INT64_MIN;
}

static void test_every_key_lands_in_its_field(void **state)
{
        (void) state;

        for (size_t i = 0; i < N_OF(key_cases); i++) {
                const key_case_t *k = &key_cases[i];
                result_t res;
                int64_t got;

                if (parse_valid(&res, k->json) != 0) {
                        dump_report(k->json, &res.r);
                        fail_msg("%s: a key of its own dialect gave a warning", k->json);
                }
                if (res.c.args.dialect != k->dialect || res.r.dialect != k->dialect)
                        fail_msg("%s: dialect %u (report %u), expected %u", k->json, res.c.args.dialect,
                                 res.r.dialect, k->dialect);
                got = field_value(&res.c, k->field);
                if (k->field == F_PROF_DIR) {
                        if (strcmp(res.c.prof_dir, k->want_str) != 0 || got != (int64_t) strlen(k->want_str))
                                fail_msg("%s: prof_dir \"%s\" (length %" PRId64 "), expected \"%s\"", k->json,
                                         res.c.prof_dir, got, k->want_str);
                } else if (k->field == F_EXTRA) {
                        if (strcmp(res.c.extra, k->want_str) != 0 || got != (int64_t) strlen(k->want_str))
                                fail_msg("%s: extra '%s' (length %" PRId64 "), expected '%s'", k->json, res.c.extra,
                                         got, k->want_str);
                } else if (got != k->want) {
                        fail_msg("%s: %s is %" PRId64 ", expected %" PRId64, k->json, field_names[k->field], got,
                                 k->want);
                }
        }
}

/* --- every key of every dialect: a wrongly typed value is an error at its key path ---- */

typedef struct bad_case {
        const char *prefix;             /* keys that set the dialect, each followed by ", " */
        bool experimental;              /* the key is inside experimental_config */
        const char *key;
        const char *bad;                /* the wrongly typed value, as JSON */
        const char *found;              /* what the message must say was found */
        const char *allowed;            /* and what it must say is allowed */
} bad_case_t;

#define TP "\"prof_dir\": \"t\", "
#define MP "\"prof_path\": \"m\", "

static const bad_case_t bad_cases[] = {
        /* native */
        { "", false, "start_step", "\"soon\"", "found the string \"soon\"", "\"next\"" },
        { "", false, "steps", "2.5", "found the real number 2.5", "an integer" },
        { "", false, "warmup", "\"1\"", "found the string \"1\"", "an integer" },
        { "", false, "duration_ms", "true", "found true", "milliseconds" },
        { "", false, "start_at_multiple_of", "[]", "found a list", "an integer" },
        { "", false, "backend", "1", "found 1", "\"acl\"" },
        { "", false, "ranks", "{}", "found an object", "\"all\"" },
        { "", false, "output_dir", "5", "found 5", "a directory path" },
        { "", false, "activities", "\"CPU\"", "found the string \"CPU\"", "a list of" },
        { "", false, "analyse", "\"fast\"", "found the string \"fast\"", "\"async\"" },
        { "", false, "level", "true", "found true", "\"Level1\"" },
        { "", false, "aic_metrics", "null", "found null", "\"PipeUtilization\"" },
        { "", false, "record_shapes", "\"yes\"", "found the string \"yes\"", "true or false" },
        { "", false, "profile_memory", "1", "found 1", "true or false" },
        { "", false, "with_stack", "null", "found null", "true or false" },
        { "", false, "with_flops", "0", "found 0", "true or false" },
        { "", false, "with_modules", "[]", "found a list", "true or false" },
        { "", false, "l2_cache", "{}", "found an object", "true or false" },
        { "", false, "op_attr", "\"true\"", "found the string \"true\"", "true or false" },
        { "", false, "mstx", "1.0", "found the real number 1", "true or false" },
        { "", false, "parallel_strategy", "1", "found 1", "true or false" },
        { "", false, "data_simplification", "\"no\"", "found the string \"no\"", "true or false" },
        { "", false, "record_op_args", "null", "found null", "true or false" },
        { "", false, "sys_io", "2", "found 2", "true or false" },
        { "", false, "sys_interconnection", "[true]", "found a list", "true or false" },
        { "", false, "export_type", "5", "found 5", "\"db\"" },
        { "", false, "host_sys", "\"cpu\"", "found the string \"cpu\"", "a list of" },
        { "", false, "mstx_domain_include", "\"d\"", "found the string \"d\"", "a list of strings" },
        { "", false, "mstx_domain_exclude", "{}", "found an object", "a list of strings" },
        { "", false, "gc_detect_threshold", "\"10\"", "found the string \"10\"", "null or milliseconds" },

        /* torch_npu, top level */
        { TP, false, "start_step", "\"next\"", "found the string \"next\"", "-1 for the next step" },
        { TP, false, "active", "\"4\"", "found the string \"4\"", "a step count from 1" },
        { TP, false, "warmup", "false", "found false", "a step count from 0" },
        { TP, false, "duration_ms", "\"1s\"", "found the string \"1s\"", "milliseconds" },
        { TP, false, "start_at_multiple_of", "1.5", "found the real number 1.5", "a step count" },
        { TP, false, "backend", "null", "found null", "\"host\"" },
        { TP, false, "ranks", "true", "found true", "a list of ranks" },
        { TP, false, "is_rank", "1", "found 1", "true or false" },
        { TP, false, "rank_list", "\"0,1\"", "found the string \"0,1\"", "a list of global rank ids" },
        { "\"active\": 1, ", false, "prof_dir", "[]", "found a list", "a directory path" },
        { TP, false, "activities", "{}", "found an object", "\"NPU\"" },
        { TP, false, "analyse", "\"async\"", "found the string \"async\"", "true or false" },
        { TP, false, "async_mode", "\"yes\"", "found the string \"yes\"", "true or false" },
        { TP, false, "record_shapes", "0", "found 0", "true or false" },
        { TP, false, "profile_memory", "\"on\"", "found the string \"on\"", "true or false" },
        { TP, false, "with_stack", "[]", "found a list", "true or false" },
        { TP, false, "with_flops", "1", "found 1", "true or false" },
        { TP, false, "with_modules", "null", "found null", "true or false" },
        { TP, false, "experimental_config", "[]", "found a list", "an object" },
        { TP, false, "metadata", "\"x\"", "found the string \"x\"", "an object" },

        /* torch_npu, experimental_config */
        { "", true, "profiler_level", "1", "found 1", "\"Level1\"" },
        { "", true, "aic_metrics", "0", "found 0", "\"PipeUtilization\"" },
        { "", true, "l2_cache", "\"on\"", "found the string \"on\"", "true or false" },
        { "", true, "op_attr", "1", "found 1", "true or false" },
        { "", true, "gc_detect_threshold", "true", "found true", "null or milliseconds" },
        { "", true, "data_simplification", "null", "found null", "true or false" },
        { "", true, "record_op_args", "[]", "found a list", "true or false" },
        { "", true, "export_type", "{}", "found an object", "\"text\"" },
        { "", true, "msprof_tx", "0", "found 0", "true or false" },
        { "", true, "mstx", "\"false\"", "found the string \"false\"", "true or false" },
        { "", true, "mstx_domain_include", "5", "found 5", "a list of strings" },
        { "", true, "mstx_domain_exclude", "\"d\"", "found the string \"d\"", "a list of strings" },
        { "", true, "host_sys", "\"cpu\"", "found the string \"cpu\"", "a list of" },
        { "", true, "sys_io", "1", "found 1", "true or false" },
        { "", true, "sys_interconnection", "{}", "found an object", "true or false" },

        /* MindSpore */
        { MP, false, "start_step", "\"next\"", "found the string \"next\"", "-1 to disable" },
        { "\"start_step\": 1, ", false, "stop_step", "1.0", "found the real number 1", "-1 to disable" },
        { MP, false, "duration_ms", "[]", "found a list", "milliseconds" },
        { MP, false, "start_at_multiple_of", "\"4\"", "found the string \"4\"", "a step count" },
        { MP, false, "backend", "true", "found true", "\"auto\"" },
        { MP, false, "ranks", "5", "found 5", "a string like \"0-7,16\"" },
        { "\"stop_step\": -1, ", false, "prof_path", "false", "found false", "a directory path" },
        { MP, false, "activities", "\"NPU\"", "found the string \"NPU\"", "a list of" },
        { MP, false, "analyse", "0", "found 0", "true or false" },
        { MP, false, "analyse_mode", "\"sync\"", "found the string \"sync\"", "0 for sync" },
        { MP, false, "profiler_level", "true", "found true", "\"Level0\"" },
        { MP, false, "aic_metrics", "{}", "found an object", "\"Memory\"" },
        { MP, false, "aicore_metrics", "[]", "found a list", "\"MemoryUB\"" },
        { MP, false, "record_shapes", "1", "found 1", "true or false" },
        { MP, false, "profile_memory", "null", "found null", "true or false" },
        { MP, false, "with_stack", "\"x\"", "found the string \"x\"", "true or false" },
        { MP, false, "l2_cache", "0", "found 0", "true or false" },
        { MP, false, "mstx", "[]", "found a list", "true or false" },
        { MP, false, "parallel_strategy", "{}", "found an object", "true or false" },
        { MP, false, "data_simplification", "1", "found 1", "true or false" },
        { MP, false, "sys_io", "null", "found null", "true or false" },
        { MP, false, "sys_interconnection", "0", "found 0", "true or false" },
        { MP, false, "export_type", "true", "found true", "\"text\"" },
        { MP, false, "host_sys", "{}", "found an object", "\"network\"" },
        { MP, false, "mstx_domain_include", "\"x\"", "found the string \"x\"", "a list of strings" },
        { MP, false, "mstx_domain_exclude", "1", "found 1", "a list of strings" },
};

static void test_every_key_rejects_a_wrong_type(void **state)
{
        (void) state;

        for (size_t i = 0; i < N_OF(bad_cases); i++) {
                const bad_case_t *b = &bad_cases[i];
                char text[256], key[128];
                result_t res;

                /* The bad value is always alone at the start of line 2, after two spaces. */
                if (b->experimental) {
                        snprintf(text, sizeof(text), "{%s\"experimental_config\": {\"%s\":\n  %s}}", b->prefix, b->key,
                                 b->bad);
                        snprintf(key, sizeof(key), "experimental_config.%s", b->key);
                } else {
                        snprintf(text, sizeof(text), "{%s\"%s\":\n  %s}", b->prefix, b->key, b->bad);
                        snprintf(key, sizeof(key), "%s", b->key);
                }
                check_diag(text, parse_one_error(&res, text), key, 2, 3, b->found, b->allowed);
        }
}

/* --- defaults and dialect detection -------------------------------------------------- */

static void test_defaults(void **state)
{
        (void) state;
        result_t res;
        const npf_shm_args_t *a = &res.c.args;

        assert_int_equal(parse_valid(&res, "{}"), 0);
        assert_int_equal(a->dialect, NPF_DIALECT_NATIVE);
        assert_int_equal(res.r.dialect, NPF_DIALECT_NATIVE);
        assert_int_equal(a->generation, 0);
        assert_int_equal(a->checksum, 0);
        assert_int_equal(a->published_ns, 0);
        assert_int_equal(a->enabled, 0);
        assert_int_equal(a->start_step, NPF_STEP_NONE);
        assert_int_equal(a->stop_step, NPF_STEP_NONE);
        assert_int_equal(a->step_count, 0);
        assert_int_equal(a->warmup, 0);
        assert_int_equal(a->start_at_multiple_of, 0);
        assert_int_equal(a->duration_ms, 0);
        assert_int_equal(a->gc_detect_threshold_us, -1);
        assert_int_equal(a->flags, NPF_FLAG_DATA_SIMPLIFICATION);
        assert_int_equal(a->level, NPF_LEVEL_0);
        assert_int_equal(a->aic_metrics, NPF_AIC_NONE);
        assert_int_equal(a->activities, NPF_ACT_CPU | NPF_ACT_NPU);
        assert_int_equal(a->analyse_mode, NPF_ANALYSE_OFF);
        assert_int_equal(a->export_type, NPF_EXPORT_TEXT);
        assert_int_equal(a->host_sys, 0);
        assert_int_equal(a->backend, NPF_BACKEND_AUTO);
        assert_int_equal(a->rank_filter, NPF_RANKS_ALL);
        assert_int_equal(a->rank_count, 0);
        assert_int_equal(a->prof_dir_len, 0);
        assert_int_equal(a->extra_len, 0);
        assert_string_equal(res.c.prof_dir, "");
        assert_string_equal(res.c.extra, "");
        for (size_t i = 0; i < sizeof(res.c.rank_bitmap); i++)
                assert_int_equal(res.c.rank_bitmap[i], 0);
}

static void test_dialect_from_exclusive_keys(void **state)
{
        (void) state;
        static const struct { const char *json; uint32_t dialect; } cases[] = {
                { "{\"active\": 2}", T },
                { "{\"is_rank\": false}", T },
                { "{\"rank_list\": []}", T },
                { "{\"prof_dir\": \"p\"}", T },
                { "{\"async_mode\": false}", T },
                { "{\"experimental_config\": {}}", T },
                { "{\"metadata\": {}}", T },
                { "{\"record_shapes\": true, \"active\": 2}", T },
                { "{\"stop_step\": -1}", M },
                { "{\"prof_path\": \"p\"}", M },
                { "{\"analyse_mode\": 0}", M },
                { "{\"profiler_level\": \"Level0\"}", M },
                { "{\"aicore_metrics\": \"Memory\"}", M },
                { "{\"with_stack\": true, \"prof_path\": \"p\"}", M },
                { "{\"steps\": 2, \"start_step\": 3}", N },
                { "{\"output_dir\": \"p\"}", N },
                { "{\"level\": \"Level0\"}", N },
                { "{\"op_attr\": true}", N },
                { "{\"record_op_args\": true}", N },
                { "{\"gc_detect_threshold\": null}", N },
                /* no exclusive key: native */
                { "{}", N },
                { "{\"start_step\": 3}", N },
                { "{\"record_shapes\": true, \"ranks\": \"all\", \"backend\": \"auto\"}", N },
        };

        for (size_t i = 0; i < N_OF(cases); i++) {
                result_t res;

                parse_valid(&res, cases[i].json);
                if (res.r.dialect != cases[i].dialect || res.c.args.dialect != cases[i].dialect)
                        fail_msg("%s: dialect %u, expected %u", cases[i].json, res.r.dialect, cases[i].dialect);
                if (res.r.n_warnings != 0) {
                        dump_report(cases[i].json, &res.r);
                        fail_msg("%s: unexpected warning", cases[i].json);
                }
        }
}

static void test_mixed_dialects_are_an_error(void **state)
{
        (void) state;
        result_t res;
        const char *t1 = "{\"prof_dir\": \"p\", \"prof_path\": \"q\"}";
        const char *t2 = "{\"steps\": 2,\n \"active\": 3}";
        const char *t3 = "{\"level\": \"Level1\", \"stop_step\": 4}";

        check_diag(t1, parse_one_error(&res, t1), "prof_path", 1, 32, "'prof_dir' makes this a torch_npu file",
                   "one dialect");
        assert_int_equal(res.r.dialect, 0);
        check_diag(t2, parse_one_error(&res, t2), "active", 2, 12, "'active' is a torch_npu key",
                   "'steps' makes this an npuprof file");
        check_diag(t3, parse_one_error(&res, t3), "stop_step", 1, 34, "MindSpore", "'level'");
}

static void test_other_dialect_key_is_a_warning(void **state)
{
        (void) state;
        result_t res;
        const char *t1 = "{\"prof_dir\": \"p\", \"l2_cache\": true}";
        const char *t2 = "{\"prof_path\": \"m\",\n  \"with_flops\": true}";
        const char *t3 = "{\"prof_path\": \"m\", \"warmup\": 3, \"start_step\": 2, \"stop_step\": 2}";

        assert_int_equal(parse_valid(&res, t1), 1);
        check_diag(t1, &res.r.warnings[0], "l2_cache", 1, 31, "inside experimental_config", "ignored");
        assert_int_equal(res.c.args.flags, DS);

        assert_int_equal(parse_valid(&res, t2), 1);
        check_diag(t2, &res.r.warnings[0], "with_flops", 2, 17, "'with_flops' is an npuprof or torch_npu key",
                   "mindspore");
        assert_int_equal(res.c.args.flags, DS);

        assert_int_equal(parse_valid(&res, t3), 1);
        check_diag(t3, &res.r.warnings[0], "warmup", 1, 30, "not read in a mindspore file", "ignored");
        assert_int_equal(res.c.args.warmup, 0);
        assert_int_equal(res.c.args.step_count, 1);
}

/* The native file's "auto" section: its values, its defaults, and its errors at their place. */
static void test_auto_section(void **state)
{
        (void) state;
        result_t res;
        npf_conf_auto_t a;
        const char *full = "{\"auto\": {\"on_slowdown\": {\"steps\": 7}, \"on_stall\": {\"after_s\": 120},\n"
                           "  \"cooldown_s\": 600, \"max_per_day\": 2}}";
        const char *defaults = "{\"auto\": {\"on_slowdown\": {}, \"on_stall\": {}}}";
        const char *bad_steps = "{\"auto\": {\"on_slowdown\": {\n  \"steps\": 0}}}";
        const char *bad_type = "{\"start_step\": 3, \"auto\": {\"on_stall\": 300}}";
        const char *nothing = "{\"auto\": {\"cooldown_s\": 5}}";
        const char *unknown = "{\"auto\": {\"on_slowdown\": {\"stepz\": 3}}}";
        const char *torch = "{\"prof_dir\": \"p\", \"auto\": {\"on_slowdown\": {}}}";

        memset(&a, SENTINEL, sizeof(a));
        assert_int_equal(npf_conf_parse_auto(full, strlen(full), &res.c, &a, &res.r), 0);
        assert_int_equal(a.slowdown_steps, 7);
        assert_int_equal(a.stall_after_ms, 120000);
        assert_int_equal(a.cooldown_ms, 600000);
        assert_int_equal(a.max_per_day, 2);
        assert_int_equal(res.c.args.enabled, 0);        /* no window of the person's: profiling off */

        assert_int_equal(npf_conf_parse_auto(defaults, strlen(defaults), &res.c, &a, &res.r), 0);
        assert_int_equal(a.slowdown_steps, NPF_CONF_AUTO_STEPS_DEFAULT);
        assert_int_equal(a.stall_after_ms, NPF_CONF_AUTO_STALL_S_DEFAULT * 1000u);
        assert_int_equal(a.cooldown_ms, NPF_CONF_AUTO_COOLDOWN_S_DEFAULT * 1000u);
        assert_int_equal(a.max_per_day, NPF_CONF_AUTO_PER_DAY_DEFAULT);

        /* Without the section, nothing happens by itself. */
        memset(&a, SENTINEL, sizeof(a));
        assert_int_equal(npf_conf_parse_auto("{\"start_step\": 1}", 17, &res.c, &a, &res.r), 0);
        assert_int_equal(a.slowdown_steps | a.max_per_day, 0);
        assert_int_equal(a.stall_after_ms | a.cooldown_ms, 0);

        check_diag(bad_steps, parse_one_error(&res, bad_steps), "auto.on_slowdown.steps", 2, 12, "0 is out of range",
                   "1 to 1000 steps");
        check_diag(bad_type, parse_one_error(&res, bad_type), "auto.on_stall", 1, 40, "expected an object",
                   "found 300");
        assert_int_equal(parse_valid(&res, nothing), 1);
        check_diag(nothing, &res.r.warnings[0], "auto", 1, 10, "neither on_slowdown nor on_stall", NULL);
        assert_int_equal(parse_valid(&res, unknown), 1);
        check_diag(unknown, &res.r.warnings[0], "auto.on_slowdown.stepz", 1, 36, "unknown key 'stepz'", "ignored");
        assert_int_equal(parse_valid(&res, torch), 1);
        check_diag(torch, &res.r.warnings[0], "auto", 1, 27, "'auto' is an npuprof key", "not read in a torch_npu file");
}

static void test_unknown_keys_are_warnings(void **state)
{
        (void) state;
        result_t res;
        const char *t1 = "{\"start_step\": 1, \"colour\": \"red\"}";
        const char *t2 =
                "{\n"
                "  \"experimental_config\": {\n"
                "    \"profiler_level\": \"Level0\",\n"
                "    \"shiny\": 1\n"
                "  }\n"
                "}";
        const char *t3 = "{\"prof_dir\": \"p\", \"msprof_tx\": true}";
        const char *t4 = "{\"experimental_config\": {\"with_stack\": true}}";

        assert_int_equal(parse_valid(&res, t1), 1);
        check_diag(t1, &res.r.warnings[0], "colour", 1, 29, "unknown key 'colour'", "ignored");
        assert_int_equal(res.c.args.start_step, 1);

        assert_int_equal(parse_valid(&res, t2), 1);
        check_diag(t2, &res.r.warnings[0], "experimental_config.shiny", 4, 14, "unknown key 'shiny'", "ignored");

        /* An experimental_config key at the top level of a torch_npu file. */
        assert_int_equal(parse_valid(&res, t3), 1);
        check_diag(t3, &res.r.warnings[0], "msprof_tx", 1, 32, "inside experimental_config", "ignored");
        assert_int_equal(res.c.args.flags, DS);

        /* A top-level key inside experimental_config. */
        assert_int_equal(parse_valid(&res, t4), 1);
        check_diag(t4, &res.r.warnings[0], "experimental_config.with_stack", 1, 40, "at the top level", "ignored");
        assert_int_equal(res.c.args.flags, DS);
}

/* Inside experimental_config, a key torch_npu reads nowhere is just unknown. */
static void test_experimental_key_of_no_torch_npu_level(void **state)
{
        (void) state;
        result_t res;
        const char *t = "{\"experimental_config\": {\"stop_step\": 5, \"prof_path\": \"p\", \"start_step\": 1}}";

        assert_int_equal(parse_valid(&res, t), 3);
        assert_int_equal(res.r.dialect, NPF_DIALECT_TORCH_NPU);
        check_diag(t, &res.r.warnings[0], "experimental_config.stop_step", 1, 39, "unknown key 'stop_step' ignored",
                   NULL);
        check_diag(t, &res.r.warnings[1], "experimental_config.prof_path", 1, 55, "unknown key 'prof_path' ignored",
                   NULL);
        /* start_step is a torch_npu key, only in the wrong place. */
        check_diag(t, &res.r.warnings[2], "experimental_config.start_step", 1, 74,
                   "torch_npu reads 'start_step' at the top level", "ignored");
        assert_int_equal(res.c.args.enabled, 0);
}

/* --- windows ------------------------------------------------------------------------- */

static void test_window_torch_npu(void **state)
{
        (void) state;

        check_window("{\"prof_dir\": \"p\"}", 0, NPF_STEP_NONE, NPF_STEP_NONE, 0, 0);
        check_window("{\"prof_dir\": \"p\", \"start_step\": 0, \"active\": 5}", 0, NPF_STEP_NONE, NPF_STEP_NONE, 0,
                     0);
        check_window("{\"start_step\": -1, \"active\": 3, \"warmup\": 2}", 1, NPF_STEP_NEXT, NPF_STEP_NONE, 5, 2);
        check_window("{\"start_step\": 100, \"active\": 3, \"warmup\": 2}", 1, 100, 104, 5, 2);
        check_window("{\"prof_dir\": \"p\", \"start_step\": 100}", 1, 100, 100, 1, 0);
        check_window("{\"start_step\": 101, \"active\": 3, \"start_at_multiple_of\": 50}", 1, 150, 152, 3, 0);
        check_window("{\"start_step\": 150, \"active\": 3, \"start_at_multiple_of\": 50}", 1, 150, 152, 3, 0);
        check_window("{\"start_step\": -1, \"active\": 3, \"start_at_multiple_of\": 50}", 1, NPF_STEP_NEXT,
                     NPF_STEP_NONE, 3, 0);
}

static void test_window_mindspore(void **state)
{
        (void) state;

        check_window("{\"prof_path\": \"m\"}", 0, NPF_STEP_NONE, NPF_STEP_NONE, 0, 0);
        check_window("{\"start_step\": -1, \"stop_step\": -1}", 0, NPF_STEP_NONE, NPF_STEP_NONE, 0, 0);
        check_window("{\"start_step\": 5, \"stop_step\": 5}", 1, 5, 5, 1, 0);
        check_window("{\"start_step\": 10, \"stop_step\": 14}", 1, 10, 14, 5, 0);
        check_window("{\"start_step\": 10, \"stop_step\": 14, \"start_at_multiple_of\": 8}", 1, 16, 20, 5, 0);
}

static void test_window_mindspore_errors(void **state)
{
        (void) state;
        result_t res;
        const char *zero_start = "{\"start_step\": 0, \"stop_step\": 5}";
        const char *zero_stop = "{\"start_step\": 1, \"stop_step\": 0}";
        const char *only_stop = "{\"start_step\": -1, \"stop_step\": 5}";
        const char *only_start = "{\"start_step\": 5, \"stop_step\": -1}";
        const char *reversed = "{\"start_step\": 9, \"stop_step\": 5}";
        const char *negative = "{\"start_step\": 1, \"stop_step\": -2}";

        check_diag(zero_start, parse_one_error(&res, zero_start), "start_step", 1, 16, "0 is not a step", "from 1");
        check_diag(zero_stop, parse_one_error(&res, zero_stop), "stop_step", 1, 32, "0 is not a step", "from 1");
        check_diag(only_stop, parse_one_error(&res, only_stop), "start_step", 1, 16,
                   "start_step is -1 and stop_step is 5", "both -1");
        check_diag(only_start, parse_one_error(&res, only_start), "stop_step", 1, 32,
                   "start_step is 5 and stop_step is -1", "both -1");
        check_diag(reversed, parse_one_error(&res, reversed), "stop_step", 1, 32, "stop_step 5 is before start_step 9",
                   NULL);
        check_diag(negative, parse_one_error(&res, negative), "stop_step", 1, 32, "-2 is out of range",
                   "-1 to disable");
}

static void test_window_native(void **state)
{
        (void) state;

        check_window("{}", 0, NPF_STEP_NONE, NPF_STEP_NONE, 0, 0);
        check_window("{\"steps\": 4, \"warmup\": 1}", 0, NPF_STEP_NONE, NPF_STEP_NONE, 0, 1);
        check_window("{\"start_step\": \"next\", \"steps\": 3, \"warmup\": 1}", 1, NPF_STEP_NEXT, NPF_STEP_NONE, 4, 1);
        check_window("{\"start_step\": -1}", 1, NPF_STEP_NEXT, NPF_STEP_NONE, 1, 0);
        check_window("{\"start_step\": 0, \"steps\": 2}", 1, 0, 1, 2, 0);
        check_window("{\"start_step\": 2000, \"steps\": 5, \"warmup\": 1}", 1, 2000, 2005, 6, 1);
        check_window("{\"start_step\": 2001, \"steps\": 5, \"start_at_multiple_of\": 100}", 1, 2100, 2104, 5, 0);
        check_window("{\"start_step\": 2000, \"steps\": 5, \"start_at_multiple_of\": 100}", 1, 2000, 2004, 5, 0);
        check_window("{\"start_step\": 0, \"start_at_multiple_of\": 100}", 1, 0, 0, 1, 0);
        check_window("{\"start_step\": 7, \"start_at_multiple_of\": 1}", 1, 7, 7, 1, 0);
        check_window("{\"start_step\": \"next\", \"start_at_multiple_of\": 100}", 1, NPF_STEP_NEXT, NPF_STEP_NONE, 1,
                     0);
}

static void test_window_duration(void **state)
{
        (void) state;
        result_t res;
        const char *mindspore = "{\"start_step\": 10, \"stop_step\": 14, \"duration_ms\": 500}";

        check_window("{\"start_step\": 50, \"duration_ms\": 1000}", 1, 50, NPF_STEP_NONE, 0, 0);
        check_window("{\"start_step\": \"next\", \"duration_ms\": 1000}", 1, NPF_STEP_NEXT, NPF_STEP_NONE, 0, 0);
        check_window("{\"start_step\": 51, \"duration_ms\": 1000, \"start_at_multiple_of\": 10}", 1, 60,
                     NPF_STEP_NONE, 0, 0);
        check_window("{\"prof_dir\": \"p\", \"start_step\": 100, \"duration_ms\": 2000}", 1, 100, NPF_STEP_NONE, 0, 0);
        check_window("{\"duration_ms\": 604800000}", 0, NPF_STEP_NONE, NPF_STEP_NONE, 0, 0);

        /* MindSpore: the duration bounds the window, and stop_step is said to be ignored. */
        assert_int_equal(parse_valid(&res, mindspore), 1);
        assert_int_equal(res.c.args.start_step, 10);
        assert_int_equal(res.c.args.stop_step, NPF_STEP_NONE);
        assert_int_equal(res.c.args.step_count, 0);
        assert_int_equal(res.c.args.duration_ms, 500);
        check_diag(mindspore, &res.r.warnings[0], "stop_step", 1, 33, "stop_step is ignored", "duration_ms");
}

static void test_window_steps_and_duration_is_an_error(void **state)
{
        (void) state;
        result_t res;
        const char *native = "{\"start_step\": 5, \"steps\": 2, \"duration_ms\": 100}";
        const char *torch = "{\"start_step\": 5, \"active\": 2, \"duration_ms\": 100}";

        check_diag(native, parse_one_error(&res, native), "duration_ms", 1, 46, "either steps or duration_ms",
                   "not both");
        check_diag(torch, parse_one_error(&res, torch), "duration_ms", 1, 47, "either active (steps) or duration_ms",
                   "not both");
}

static void test_window_limits(void **state)
{
        (void) state;
        result_t res;
        const char *past = "{\"start_step\": 1152921504606846976, \"steps\": 2}";
        const char *too_big = "{\"start_step\": 1152921504606846977}";
        const char *long_duration = "{\"duration_ms\": 604800001}";
        const char *zero_duration = "{\"duration_ms\": 0}";
        const char *zero_steps = "{\"steps\": 0}";
        const char *zero_active = "{\"active\": 0}";
        const char *negative_warmup = "{\"warmup\": -1}";
        const char *zero_multiple = "{\"start_at_multiple_of\": 0}";
        const char *native_start = "{\"start_step\": -2}";

        check_window("{\"start_step\": 1152921504606846975}", 1, NPF_STEP_MAX - 1, NPF_STEP_MAX - 1, 1, 0);
        check_diag(past, parse_one_error(&res, past), "start_step", 1, 16, "past step 1152921504606846976", NULL);
        check_diag(too_big, parse_one_error(&res, too_big), "start_step", 1, 16, "out of range", "\"next\"");
        check_diag(long_duration, parse_one_error(&res, long_duration), "duration_ms", 1, 17,
                   "604800001 is out of range", "604800000 (7 days)");
        check_diag(zero_duration, parse_one_error(&res, zero_duration), "duration_ms", 1, 17, "0 is out of range",
                   "from 1");
        check_diag(zero_steps, parse_one_error(&res, zero_steps), "steps", 1, 11, "0 is out of range",
                   "a step count from 1");
        check_diag(zero_active, parse_one_error(&res, zero_active), "active", 1, 12, "0 is out of range",
                   "a step count from 1");
        check_diag(negative_warmup, parse_one_error(&res, negative_warmup), "warmup", 1, 12, "-1 is out of range",
                   "a step count from 0");
        check_diag(zero_multiple, parse_one_error(&res, zero_multiple), "start_at_multiple_of", 1, 26,
                   "0 is out of range", "from 1");
        check_diag(native_start, parse_one_error(&res, native_start), "start_step", 1, 16, "-2 is out of range",
                   "\"next\"");
}

/* A native file that sets the window but not where it starts turns profiling off, and says so. */
static void test_native_window_without_start_warns(void **state)
{
        (void) state;
        result_t res;
        const char *steps = "{\"steps\": 4, \"warmup\": 1}";
        const char *warmup = "{\"warmup\": 1, \"duration_ms\": 100}";
        const char *duration = "{\"record_shapes\": true,\n \"duration_ms\": 100}";
        static const char *const quiet[] = {
                "{}",
                "{\"record_shapes\": true, \"start_at_multiple_of\": 10}",
                "{\"start_step\": 5, \"steps\": 2, \"warmup\": 1}",
                "{\"start_step\": \"next\", \"duration_ms\": 100}",
                /* torch_npu's own template has start_step 0 (never) with active 1. */
                "{\"prof_dir\": \"p\", \"start_step\": 0, \"active\": 1, \"warmup\": 0}",
                "{\"active\": 3, \"warmup\": 2}",
                "{\"prof_dir\": \"p\", \"duration_ms\": 100}",
        };

        /* Once, at the first such key, and the file stays valid with the window off. */
        assert_int_equal(parse_valid(&res, steps), 1);
        check_diag(steps, &res.r.warnings[0], "steps", 1, 11, "no start_step: profiling is off; add \"start_step\" "
                   "(a step, or \"next\")", NULL);
        assert_int_equal(res.c.args.enabled, 0);
        assert_int_equal(parse_valid(&res, warmup), 1);
        check_diag(warmup, &res.r.warnings[0], "warmup", 1, 12, "no start_step: profiling is off", NULL);
        assert_int_equal(parse_valid(&res, duration), 1);
        check_diag(duration, &res.r.warnings[0], "duration_ms", 2, 17, "no start_step: profiling is off", NULL);

        for (size_t i = 0; i < N_OF(quiet); i++) {
                if (parse_valid(&res, quiet[i]) != 0) {
                        dump_report(quiet[i], &res.r);
                        fail_msg("%s: unexpected warning", quiet[i]);
                }
        }
}

/* start_at_multiple_of keeps its rule, and says where it moved an absolute window. */
static void test_start_at_multiple_of_move_warns(void **state)
{
        (void) state;
        result_t res;
        const char *mindspore = "{\"start_step\": 3, \"stop_step\": 5, \"start_at_multiple_of\": 10}";
        const char *native = "{\"start_step\": 2001, \"steps\": 5, \"warmup\": 1, \"start_at_multiple_of\": 100}";
        const char *torch = "{\"start_step\": 101, \"active\": 3, \"start_at_multiple_of\": 50}";
        const char *timed = "{\"start_step\": 51, \"duration_ms\": 1000, \"start_at_multiple_of\": 10}";
        const char *single = "{\"start_step\": 7, \"start_at_multiple_of\": 5}";
        static const char *const quiet[] = {
                "{\"start_step\": 2000, \"steps\": 5, \"start_at_multiple_of\": 100}",
                "{\"start_step\": 0, \"start_at_multiple_of\": 100}",
                "{\"start_step\": 7, \"start_at_multiple_of\": 1}",
                "{\"start_step\": \"next\", \"start_at_multiple_of\": 100}",
                "{\"start_step\": -1, \"active\": 3, \"start_at_multiple_of\": 50}",
                "{\"start_step\": 20, \"stop_step\": 25, \"start_at_multiple_of\": 10}",
                "{\"prof_path\": \"m\", \"start_at_multiple_of\": 4}",
                "{\"prof_dir\": \"p\", \"start_at_multiple_of\": 10}",
        };

        assert_int_equal(parse_valid(&res, mindspore), 1);
        check_diag(mindspore, &res.r.warnings[0], "start_at_multiple_of", 1, 59,
                   "the window moves from steps 3..5 to 10..12 to start at a multiple of 10", NULL);
        assert_int_equal(res.c.args.start_step, 10);
        assert_int_equal(res.c.args.stop_step, 12);

        assert_int_equal(parse_valid(&res, native), 1);
        check_diag(native, &res.r.warnings[0], "start_at_multiple_of", 1, 71,
                   "the window moves from steps 2001..2006 to 2100..2105 to start at a multiple of 100", NULL);

        assert_int_equal(parse_valid(&res, torch), 1);
        check_diag(torch, &res.r.warnings[0], "start_at_multiple_of", 1, 58,
                   "the window moves from steps 101..103 to 150..152 to start at a multiple of 50", NULL);

        /* A window bounded by time has no last step to speak of; one of one step, only that step. */
        assert_int_equal(parse_valid(&res, timed), 1);
        check_diag(timed, &res.r.warnings[0], "start_at_multiple_of", 1, 65,
                   "the window moves from step 51 to step 60 to start at a multiple of 10", NULL);
        assert_int_equal(parse_valid(&res, single), 1);
        check_diag(single, &res.r.warnings[0], "start_at_multiple_of", 1, 43,
                   "the window moves from step 7 to step 10 to start at a multiple of 5", NULL);

        for (size_t i = 0; i < N_OF(quiet); i++) {
                if (parse_valid(&res, quiet[i]) != 0) {
                        dump_report(quiet[i], &res.r);
                        fail_msg("%s: unexpected warning", quiet[i]);
                }
        }
}

/* A window bounded by time that start_at_multiple_of pushes past the limit starts too late. */
static void test_timed_window_starts_too_late(void **state)
{
        (void) state;
        result_t res;
        const char *late =
                "{\"start_step\": 1152921504606846975, \"duration_ms\": 100, \"start_at_multiple_of\": 1000}";
        const char *stepped = "{\"start_step\": 1152921504606846975, \"start_at_multiple_of\": 1000}";
        const npf_conf_diag_t *d;

        d = parse_one_error(&res, late);
        check_diag(late, d, "start_step", 1, 16, "start is too late", "past step 1152921504606846976");
        if (strstr(d->message, "ends past"))
                fail_msg("%s: a window bounded by time has no end, but the error says \"%s\"", late, d->message);
        assert_int_equal(res.r.n_warnings, 0);
        /* Counted in steps, a window moved past the limit starts too late as well. */
        check_diag(stepped, parse_one_error(&res, stepped), "start_step", 1, 16, "start is too late", NULL);
}

/* --- level, aic_metrics, analyse, activities ---------------------------------------- */

static void test_aic_metrics_default_depends_on_level(void **state)
{
        (void) state;
        static const struct { const char *json; int32_t level, aic; } cases[] = {
                { "{}", NPF_LEVEL_0, NPF_AIC_NONE },
                { "{\"level\": \"Level0\"}", NPF_LEVEL_0, NPF_AIC_NONE },
                { "{\"level\": \"Level1\"}", NPF_LEVEL_1, NPF_AIC_PIPE_UTILIZATION },
                { "{\"level\": \"Level2\"}", NPF_LEVEL_2, NPF_AIC_PIPE_UTILIZATION },
                { "{\"level\": -1}", NPF_LEVEL_NONE, NPF_AIC_NONE },
                { "{\"level\": 1, \"aic_metrics\": \"AiCoreNone\"}", NPF_LEVEL_1, NPF_AIC_NONE },
                { "{\"level\": 2, \"aic_metrics\": \"Memory\"}", NPF_LEVEL_2, NPF_AIC_MEMORY },
                { "{\"level\": 0, \"aic_metrics\": \"MemoryUB\"}", NPF_LEVEL_0, NPF_AIC_MEMORY_UB },
                /* torch_npu's dynamic_profile: a missing aic_metrics is AiCoreNone at every level
                 * (_dynamic_profiler_config_context.py:263). */
                { "{\"experimental_config\": {\"profiler_level\": \"Level1\"}}", NPF_LEVEL_1, NPF_AIC_NONE },
                { "{\"experimental_config\": {\"profiler_level\": \"Level2\"}}", NPF_LEVEL_2, NPF_AIC_NONE },
                { "{\"experimental_config\": {\"profiler_level\": \"Level0\"}}", NPF_LEVEL_0, NPF_AIC_NONE },
                { "{\"experimental_config\": {\"profiler_level\": \"Level2\", \"aic_metrics\": \"MemoryAccess\"}}",
                  NPF_LEVEL_2, NPF_AIC_MEMORY_ACCESS },
                /* MindSpore's monitor: aicore_metrics defaults to -1, AiCoreNone (dynamic_profiler.py:60). */
                { "{\"profiler_level\": 1}", NPF_LEVEL_1, NPF_AIC_NONE },
                { "{\"profiler_level\": 0}", NPF_LEVEL_0, NPF_AIC_NONE },
                { "{\"profiler_level\": 2, \"aic_metrics\": -1}", NPF_LEVEL_2, NPF_AIC_NONE },
                { "{\"profiler_level\": \"Level1\", \"aicore_metrics\": 6}", NPF_LEVEL_1, NPF_AIC_L2_CACHE },
        };

        for (size_t i = 0; i < N_OF(cases); i++) {
                result_t res;

                parse_valid(&res, cases[i].json);
                if (res.c.args.level != cases[i].level || res.c.args.aic_metrics != cases[i].aic)
                        fail_msg("%s: level %d aic_metrics %d, expected %d and %d", cases[i].json, res.c.args.level,
                                 res.c.args.aic_metrics, cases[i].level, cases[i].aic);
        }
}

static void test_analyse_mode(void **state)
{
        (void) state;
        static const struct { const char *json; int32_t mode; } cases[] = {
                /* torch_npu: analyse and async_mode */
                { "{\"prof_dir\": \"p\"}", NPF_ANALYSE_OFF },
                { "{\"prof_dir\": \"p\", \"analyse\": false}", NPF_ANALYSE_OFF },
                { "{\"prof_dir\": \"p\", \"analyse\": true}", NPF_ANALYSE_SYNC },
                { "{\"analyse\": true, \"async_mode\": false}", NPF_ANALYSE_SYNC },
                { "{\"analyse\": true, \"async_mode\": true}", NPF_ANALYSE_ASYNC },
                { "{\"analyse\": false, \"async_mode\": true}", NPF_ANALYSE_OFF },
                /* MindSpore: analyse_mode integers */
                { "{\"analyse_mode\": -1}", NPF_ANALYSE_OFF },
                { "{\"analyse_mode\": 0}", NPF_ANALYSE_SYNC },
                { "{\"analyse_mode\": 1}", NPF_ANALYSE_ASYNC },
                { "{\"analyse_mode\": -1, \"analyse\": true}", NPF_ANALYSE_OFF },
                { "{\"prof_path\": \"m\", \"analyse\": true}", NPF_ANALYSE_SYNC },
                { "{\"prof_path\": \"m\"}", NPF_ANALYSE_OFF },
                /* native */
                { "{\"analyse\": false}", NPF_ANALYSE_OFF },
                { "{\"analyse\": \"async\"}", NPF_ANALYSE_ASYNC },
        };
        result_t res;
        const char *two = "{\"analyse_mode\": 2}";
        const char *minus_two = "{\"analyse_mode\": -2}";

        for (size_t i = 0; i < N_OF(cases); i++) {
                parse_valid(&res, cases[i].json);
                if (res.c.args.analyse_mode != cases[i].mode)
                        fail_msg("%s: analyse_mode %d, expected %d", cases[i].json, res.c.args.analyse_mode,
                                 cases[i].mode);
        }
        check_diag(two, parse_one_error(&res, two), "analyse_mode", 1, 18, "2 is out of range",
                   "-1 for off, 0 for sync, 1 for async");
        check_diag(minus_two, parse_one_error(&res, minus_two), "analyse_mode", 1, 18, "-2 is out of range", NULL);
}

/* MindSpore: analyse_mode wins over analyse false, and says so. */
static void test_analyse_false_with_analyse_mode_warns(void **state)
{
        (void) state;
        result_t res;
        const char *sync = "{\"analyse\": false, \"analyse_mode\": 0}";
        const char *async = "{\"analyse_mode\": 1,\n \"analyse\": false}";
        static const char *const quiet[] = {
                "{\"analyse\": false, \"analyse_mode\": -1}",
                "{\"analyse\": true, \"analyse_mode\": 0}",
                "{\"analyse_mode\": 1}",
                "{\"prof_path\": \"m\", \"analyse\": false}",
        };

        assert_int_equal(parse_valid(&res, sync), 1);
        assert_int_equal(res.c.args.analyse_mode, NPF_ANALYSE_SYNC);
        check_diag(sync, &res.r.warnings[0], "analyse_mode", 1, 36,
                   "analyse is false but analyse_mode asks for sync/async analysis; analyse_mode wins", NULL);
        assert_int_equal(parse_valid(&res, async), 1);
        assert_int_equal(res.c.args.analyse_mode, NPF_ANALYSE_ASYNC);
        check_diag(async, &res.r.warnings[0], "analyse_mode", 1, 18, "analyse_mode wins", NULL);

        for (size_t i = 0; i < N_OF(quiet); i++) {
                if (parse_valid(&res, quiet[i]) != 0) {
                        dump_report(quiet[i], &res.r);
                        fail_msg("%s: unexpected warning", quiet[i]);
                }
        }
}

static void test_activities(void **state)
{
        (void) state;
        static const struct { const char *json; uint32_t mask; } cases[] = {
                { "{\"prof_path\": \"m\", \"activities\": 0}", NPF_ACT_CPU | NPF_ACT_NPU },
                { "{\"prof_path\": \"m\", \"activities\": 1}", NPF_ACT_CPU },
                { "{\"prof_path\": \"m\", \"activities\": 2}", NPF_ACT_NPU },
                { "{\"activities\": [\"NPU\", \"CPU\"]}", NPF_ACT_CPU | NPF_ACT_NPU },
                { "{\"activities\": [\"NPU\", \"NPU\"]}", NPF_ACT_NPU },
        };
        result_t res;
        const char *three = "{\"prof_path\": \"m\", \"activities\": 3}";
        const char *native_int = "{\"activities\": 1}";
        const char *empty = "{\"activities\": []}";
        const char *unknown = "{\"activities\": [\"CPU\", \"GPU\"]}";

        for (size_t i = 0; i < N_OF(cases); i++) {
                parse_valid(&res, cases[i].json);
                if (res.c.args.activities != cases[i].mask)
                        fail_msg("%s: activities %u, expected %u", cases[i].json, res.c.args.activities,
                                 cases[i].mask);
        }
        check_diag(three, parse_one_error(&res, three), "activities", 1, 34, "3 is out of range",
                   "0 for CPU and NPU, 1 for CPU, 2 for NPU");
        /* Integers are MindSpore's encoding only. */
        check_diag(native_int, parse_one_error(&res, native_int), "activities", 1, 16, "found 1", "a list of");
        check_diag(empty, parse_one_error(&res, empty), "activities", 1, 16, "the list is empty", "at least one");
        check_diag(unknown, parse_one_error(&res, unknown), "activities[1]", 1, 24, "found the string \"GPU\"",
                   "\"CPU\", \"NPU\"");
}

static void test_export_type_and_host_sys_lists(void **state)
{
        (void) state;
        result_t res;
        const char *empty_export = "{\"export_type\": []}";
        const char *bad_host = "{\"experimental_config\": {\"host_sys\": [\"cpu\", \"gpu\"]}}";

        parse_valid(&res, "{\"host_sys\": []}");
        assert_int_equal(res.c.args.host_sys, 0);
        parse_valid(&res, "{\"host_sys\": [\"cpu\", \"mem\", \"disk\", \"network\", \"osrt\", \"numa\"]}");
        assert_int_equal(res.c.args.host_sys, NPF_HOST_SYS_CPU | NPF_HOST_SYS_MEM | NPF_HOST_SYS_DISK |
                                              NPF_HOST_SYS_NETWORK | NPF_HOST_SYS_OSRT | NPF_HOST_SYS_NUMA);
        check_diag(empty_export, parse_one_error(&res, empty_export), "export_type", 1, 17, "the list is empty", NULL);
        check_diag(bad_host, parse_one_error(&res, bad_host), "experimental_config.host_sys[1]", 1, 46,
                   "found the string \"gpu\"", "\"osrt\"");
}

/* --- ranks --------------------------------------------------------------------------- */

static void test_torch_npu_rank_list(void **state)
{
        (void) state;
        result_t res;
        const char *empty = "{\"is_rank\": true, \"rank_list\": []}";
        const char *no_list = "{\"is_rank\": true}";
        const char *bad_rank = "{\"is_rank\": true, \"rank_list\": [1, 70000]}";
        const char *both = "{\"is_rank\": true, \"rank_list\": [1], \"ranks\": \"2\"}";

        parse_valid(&res, "{\"is_rank\": true, \"rank_list\": [0, 3, 3, 65535]}");
        assert_int_equal(res.c.args.rank_filter, NPF_RANKS_LIST);
        assert_int_equal(res.c.args.rank_count, 3);
        assert_true(rank_set(&res.c, 0));
        assert_true(rank_set(&res.c, 3));
        assert_true(rank_set(&res.c, 65535));
        assert_false(rank_set(&res.c, 1));

        /* is_rank false: the list is not used, every rank collects. */
        parse_valid(&res, "{\"is_rank\": false, \"rank_list\": [1, 2]}");
        assert_int_equal(res.c.args.rank_filter, NPF_RANKS_ALL);
        assert_int_equal(res.c.args.rank_count, 0);

        check_diag(empty, parse_one_error(&res, empty), "rank_list", 1, 32, "is_rank is true but rank_list is empty",
                   "no rank would collect");
        check_diag(no_list, parse_one_error(&res, no_list), "is_rank", 1, 13, "there is no rank_list", NULL);
        check_diag(bad_rank, parse_one_error(&res, bad_rank), "rank_list[1]", 1, 36, "70000 is out of range",
                   "a rank from 0 to 65535");
        check_diag(both, parse_one_error(&res, both), "ranks", 1, 46, "either ranks or is_rank", NULL);
}

static void test_native_ranks(void **state)
{
        (void) state;
        result_t res;

        parse_valid(&res, "{\"ranks\": \"0-7,16\"}");
        assert_int_equal(res.c.args.rank_filter, NPF_RANKS_LIST);
        assert_int_equal(res.c.args.rank_count, 9);
        for (uint32_t r = 0; r <= 7; r++)
                assert_true(rank_set(&res.c, r));
        assert_false(rank_set(&res.c, 8));
        assert_false(rank_set(&res.c, 15));
        assert_true(rank_set(&res.c, 16));
        assert_false(rank_set(&res.c, 17));

        parse_valid(&res, "{\"ranks\": [0, \"4-5\", 9, 4, \" 20-21 \"]}");
        assert_int_equal(res.c.args.rank_filter, NPF_RANKS_LIST);
        assert_int_equal(res.c.args.rank_count, 6);
        assert_true(rank_set(&res.c, 0) && rank_set(&res.c, 4) && rank_set(&res.c, 5) && rank_set(&res.c, 9));

        parse_valid(&res, "{\"ranks\": \" 3 , 5,7 \"}");
        assert_int_equal(res.c.args.rank_count, 3);
        assert_true(rank_set(&res.c, 3) && rank_set(&res.c, 5) && rank_set(&res.c, 7));

        parse_valid(&res, "{\"ranks\": \"0-65535\"}");
        assert_int_equal(res.c.args.rank_filter, NPF_RANKS_LIST);
        assert_int_equal(res.c.args.rank_count, 65536);
        assert_true(rank_set(&res.c, 65535));

        parse_valid(&res, "{\"ranks\": \"all\"}");
        assert_int_equal(res.c.args.rank_filter, NPF_RANKS_ALL);
        assert_int_equal(res.c.args.rank_count, 0);
        parse_valid(&res, "{\"ranks\": \"*\"}");
        assert_int_equal(res.c.args.rank_filter, NPF_RANKS_ALL);
}

static void test_native_ranks_errors(void **state)
{
        (void) state;
        static const struct {
                const char *json;
                const char *key;
                uint32_t column;
                const char *want1, *want2;
        } cases[] = {
                { "{\"ranks\": \"7-0\"}", "ranks", 11, "\"7-0\" is out of range", "a range goes upwards" },
                { "{\"ranks\": \"65536\"}", "ranks", 11, "\"65536\" is out of range", "0 to 65535" },
                { "{\"ranks\": \"0-65536\"}", "ranks", 11, "\"0-65536\" is out of range", "0 to 65535" },
                { "{\"ranks\": \"abc\"}", "ranks", 11, "\"abc\" is not a rank", "like \"0-7\"" },
                { "{\"ranks\": \"1-2-3\"}", "ranks", 11, "\"1-2-3\" is not a rank", "like \"0-7\"" },
                { "{\"ranks\": \"-1\"}", "ranks", 11, "\"-1\" is not a rank", "like \"0-7\"" },
                { "{\"ranks\": \"+1\"}", "ranks", 11, "\"+1\" is not a rank", "like \"0-7\"" },
                { "{\"ranks\": \"0,,1\"}", "ranks", 11, "\"\" is not a rank", "like \"0-7\"" },
                { "{\"ranks\": \",1\"}", "ranks", 11, "\"\" is not a rank", "like \"0-7\"" },
                { "{\"ranks\": \"99999999999999999999\"}", "ranks", 11, "not a rank", NULL },
                { "{\"ranks\": \"\"}", "ranks", 11, "the rank list is empty", "\"all\"" },
                { "{\"ranks\": []}", "ranks", 11, "the rank list is empty", "\"all\"" },
                { "{\"ranks\": [1, -1]}", "ranks[1]", 15, "-1 is out of range", "a rank from 0 to 65535" },
                { "{\"ranks\": [1, 65536]}", "ranks[1]", 15, "65536 is out of range", "a rank from 0 to 65535" },
                { "{\"ranks\": [1, \"x\"]}", "ranks[1]", 15, "\"x\" is not a rank", NULL },
                { "{\"ranks\": [1.5]}", "ranks[0]", 12, "found the real number 1.5", "a rank from 0 to 65535" },
                { "{\"ranks\": [null]}", "ranks[0]", 12, "found null", "a rank from 0 to 65535" },
        };

        for (size_t i = 0; i < N_OF(cases); i++) {
                result_t res;

                check_diag(cases[i].json, parse_one_error(&res, cases[i].json), cases[i].key, 1, cases[i].column,
                           cases[i].want1, cases[i].want2);
        }
}

/* "next", "all" and "*" match in any letter case, as every other name does. */
static void test_next_and_all_in_any_case(void **state)
{
        (void) state;
        result_t res;
        static const char *const next[] = { "{\"start_step\": \"NEXT\"}", "{\"start_step\": \"Next\", \"steps\": 2}" };
        static const char *const all[] = { "{\"ranks\": \"ALL\"}", "{\"ranks\": \"All\"}", "{\"ranks\": \"aLl\"}" };

        for (size_t i = 0; i < N_OF(next); i++) {
                assert_int_equal(parse_valid(&res, next[i]), 0);
                assert_int_equal(res.c.args.enabled, 1);
                assert_int_equal(res.c.args.start_step, NPF_STEP_NEXT);
        }
        for (size_t i = 0; i < N_OF(all); i++) {
                assert_int_equal(parse_valid(&res, all[i]), 0);
                assert_int_equal(res.c.args.rank_filter, NPF_RANKS_ALL);
                assert_int_equal(res.c.args.rank_count, 0);
        }
}

/* "*" means what "all" means, so inside a list it is the same error. */
static void test_star_and_all_stand_alone_in_a_list(void **state)
{
        (void) state;
        result_t res;
        const char *star = "{\"ranks\": [0, \"*\"]}";
        const char *upper = "{\"ranks\": [\"0-3\", \"ALL\"]}";

        check_diag(star, parse_one_error(&res, star), "ranks[1]", 1, 15, "\"*\" stands alone", "\"ranks\": \"*\"");
        check_diag(upper, parse_one_error(&res, upper), "ranks[1]", 1, 19, "\"ALL\" stands alone",
                   "\"ranks\": \"ALL\"");
}

/* "0-" is half a range: it must not be read as rank 0. */
static void test_native_ranks_open_range_is_an_error(void **state)
{
        (void) state;
        result_t res;
        const char *t = "{\"ranks\": \"0-\"}";

        check_diag(t, parse_one_error(&res, t), "ranks", 1, 11, "\"0-\"", "like \"0-7\"");
}

/* A trailing comma leaves an empty element, as a leading one does. */
static void test_native_ranks_trailing_comma_is_an_error(void **state)
{
        (void) state;
        result_t res;
        const char *t = "{\"ranks\": \"0-7,\"}";

        check_diag(t, parse_one_error(&res, t), "ranks", 1, 11, "\"\" is not a rank", NULL);
}

/* "+5" is refused as a rank, so "0-+5" must be refused as a range. */
static void test_native_ranks_signed_range_end_is_an_error(void **state)
{
        (void) state;
        result_t res;
        const char *t = "{\"ranks\": \"0-+5\"}";

        check_diag(t, parse_one_error(&res, t), "ranks", 1, 11, "\"0-+5\" is not a rank", NULL);
}

/* --- strings, lists and the extra JSON ----------------------------------------------- */

static void test_prof_dir_limits(void **state)
{
        (void) state;
        result_t res;
        const char *empty = "{\"output_dir\": \"\"}";
        char *text = malloc(NPF_SHM_PATH_MAX + 64);
        size_t n;

        assert_non_null(text);
        check_diag(empty, parse_one_error(&res, empty), "output_dir", 1, 16, "the directory path is empty", NULL);

        /* The longest path that fits, NUL included. */
        n = (size_t) snprintf(text, 64, "{\"output_dir\": \"");
        memset(text + n, 'd', NPF_SHM_PATH_MAX - 1);
        strcpy(text + n + NPF_SHM_PATH_MAX - 1, "\"}");
        parse_valid(&res, text);
        assert_int_equal(res.c.args.prof_dir_len, NPF_SHM_PATH_MAX - 1);
        assert_int_equal(strlen(res.c.prof_dir), NPF_SHM_PATH_MAX - 1);

        /* One more byte does not. */
        memset(text + n, 'd', NPF_SHM_PATH_MAX);
        strcpy(text + n + NPF_SHM_PATH_MAX, "\"}");
        check_diag(text, parse_one_error(&res, text), "output_dir", 1, 16, "4096 bytes long", "at most 4095");
        free(text);
}

static void test_extra_json(void **state)
{
        (void) state;
        result_t res;
        const char *empty_element = "{\"mstx_domain_include\": [\"a\", \"\"]}";
        const char *number_element = "{\"prof_path\": \"m\", \"mstx_domain_exclude\": [7]}";
        char *big = malloc(NPF_SHM_EXTRA_MAX + 64);
        size_t n;

        assert_non_null(big);
        /* Empty lists and objects add nothing. */
        parse_valid(&res, "{\"mstx_domain_include\": [], \"mstx_domain_exclude\": []}");
        assert_int_equal(res.c.args.extra_len, 0);
        assert_string_equal(res.c.extra, "");
        parse_valid(&res, "{\"metadata\": {}}");
        assert_int_equal(res.c.args.extra_len, 0);

        /* Both lists: the include list wins, with a warning. */
        assert_int_equal(parse_valid(&res, "{\"mstx_domain_include\": [\"a\"], \"mstx_domain_exclude\": [\"b\"]}"), 1);
        assert_string_equal(res.c.extra, "{\"mstx_domain_include\":[\"a\"]}");
        assert_non_null(strstr(res.r.warnings[0].message, "the include list wins"));

        /* metadata and a domain list together, sorted, compact, ASCII. */
        parse_valid(&res, "{\"metadata\": {\"who\": \"\xc3\xa9\"}, \"experimental_config\": "
                          "{\"mstx_domain_include\": [\"z\"]}}");
        assert_string_equal(res.c.extra, "{\"metadata\":{\"who\":\"\\u00E9\"},\"mstx_domain_include\":[\"z\"]}");
        assert_int_equal(res.c.args.extra_len, strlen(res.c.extra));

        check_diag(empty_element, parse_one_error(&res, empty_element), "mstx_domain_include[1]", 1, 31,
                   "found the string \"\"", "a non-empty string");
        check_diag(number_element, parse_one_error(&res, number_element), "mstx_domain_exclude[0]", 1, 44,
                   "found 7", "a non-empty string");

        /* metadata that does not fit in the segment. */
        n = (size_t) snprintf(big, 64, "{\"metadata\": {\"k\": \"");
        memset(big + n, 'v', NPF_SHM_EXTRA_MAX);
        strcpy(big + n + NPF_SHM_EXTRA_MAX, "\"}}");
        check_diag(big, parse_one_error(&res, big), "metadata", 1, 14, "take 4117 bytes", "at most 4095 fit");
        free(big);
}

static void test_gc_detect_threshold(void **state)
{
        (void) state;
        result_t res;
        const char *negative = "{\"gc_detect_threshold\": -1}";
        const char *huge = "{\"experimental_config\": {\"gc_detect_threshold\": 1e10}}";

        parse_valid(&res, "{\"gc_detect_threshold\": 1000000000}");
        assert_int_equal(res.c.args.gc_detect_threshold_us, INT64_C(1000000000000));
        parse_valid(&res, "{\"experimental_config\": {\"gc_detect_threshold\": 0.25}}");
        assert_int_equal(res.c.args.gc_detect_threshold_us, 250);
        check_diag(negative, parse_one_error(&res, negative), "gc_detect_threshold", 1, 25, "found -1",
                   "from 0 to 1e9");
        check_diag(huge, parse_one_error(&res, huge), "experimental_config.gc_detect_threshold", 1, 49,
                   "found the real number 1e+10", "from 0 to 1e9");
}

/* --- error classes ------------------------------------------------------------------- */

static void test_error_json_syntax(void **state)
{
        (void) state;
        result_t res;
        const char *token =
                "{\n"
                "  \"start_step\": 10,\n"
                "  \"steps\": x\n"
                "}\n";
        const char *trailing_comma = "{\"steps\": 1,}";
        const char *scalar = "  42";
        const npf_conf_diag_t *d;

        /* The place is that of the offending character, as jansson's own column says. */
        check_diag(token, parse_one_error(&res, token), "", 3, 12, "JSON syntax error", "invalid token");
        assert_int_equal(res.r.dialect, 0);
        check_diag(trailing_comma, parse_one_error(&res, trailing_comma), "", 1, 13, "JSON syntax error",
                   "'}'");
        /* A scalar at the top level, after two blanks: on its first byte, or at worst its last. */
        d = parse_one_error(&res, scalar);
        assert_int_equal(d->line, 1);
        assert_in_range(d->column, 3, 4);
}

static void test_error_json_truncated(void **state)
{
        (void) state;
        result_t res;
        const char *text = "{\n  \"start_step\": 10,";
        const npf_conf_diag_t *d = parse_one_error(&res, text);

        /* At the end of the text: on the last byte, or just after it. */
        assert_string_equal(d->key, "");
        assert_int_equal(d->line, 2);
        assert_in_range(d->column, 19, 20);
        assert_non_null(strstr(d->message, "JSON syntax error"));
        assert_non_null(strstr(d->message, "end of file"));
}

static void test_error_duplicate_key(void **state)
{
        (void) state;
        result_t res;
        const char *text =
                "{\n"
                "  \"steps\": 1,\n"
                "  \"steps\": 2\n"
                "}\n";
        const npf_conf_diag_t *d = parse_one_error(&res, text);

        assert_string_equal(d->key, "");
        assert_non_null(strstr(d->message, "duplicate object key"));
        assert_non_null(strstr(d->message, "steps"));
        assert_int_equal(d->line, 3);
        /* On the second "steps", quotes included. */
        assert_in_range(d->column, 3, 9);
}

static void test_error_top_level_not_an_object(void **state)
{
        (void) state;
        static const struct { const char *json; uint32_t line, column; const char *found; } values[] = {
                { "[1, 2]", 1, 1, "found a list" },
                { "[]", 1, 1, "found a list" },
                { "\n  [{\"start_step\": 1}]", 2, 3, "found a list" },
                { "42", 1, 1, "found 42" },
                { "  \"text\"", 1, 3, "found the string \"text\"" },
                { "null", 1, 1, "found null" },
                { "true", 1, 1, "found true" },
        };

        for (size_t i = 0; i < N_OF(values); i++) {
                result_t res;

                check_diag(values[i].json, parse_one_error(&res, values[i].json), "", values[i].line,
                           values[i].column, "must be a JSON object", values[i].found);
                assert_int_equal(res.r.dialect, 0);
        }
}

static void test_error_empty_file(void **state)
{
        (void) state;
        static const char *const texts[] = { "", " ", "   \n\t\r\n  ", "\xef\xbb\xbf", "\xef\xbb\xbf \n" };

        for (size_t i = 0; i < N_OF(texts); i++) {
                result_t res;

                check_diag(texts[i], parse_one_error(&res, texts[i]), "", 0, 0, "the file is empty", NULL);
        }
}

static void test_error_file_too_big(void **state)
{
        (void) state;
        result_t res;
        const char *valid = "{\"start_step\": 3}";
        char *text = malloc(NPF_CONF_FILE_MAX + 1);

        assert_non_null(text);
        /* Exactly the cap: valid, with its trailing blanks. */
        memset(text, ' ', NPF_CONF_FILE_MAX + 1);
        memcpy(text, valid, strlen(valid));
        parse_len(&res, text, NPF_CONF_FILE_MAX);
        assert_int_equal(res.rc, 0);
        assert_int_equal(res.c.args.start_step, 3);

        /* One byte more: refused before it is parsed. */
        parse_invalid_len(&res, text, NPF_CONF_FILE_MAX + 1);
        assert_int_equal(res.r.n_errors, 1);
        check_diag("(1 MiB + 1)", &res.r.errors[0], "", 0, 0, "1048577 bytes", "at most 1048576");
        free(text);
}

static void test_error_not_utf8(void **state)
{
        (void) state;
        static const struct {
                const char *text;
                uint32_t line, column;
                const char *byte;
        } cases[] = {
                { "{\n  \"output_dir\": \"a\xff\"\n}", 2, 19, "byte 0xff" },
                { "{\"output_dir\": \"\xc0\x80\"}", 1, 17, "byte 0xc0" },          /* overlong NUL */
                { "{\"a\": \"\xe0\x80\xaf\"}", 1, 8, "byte 0xe0" },                 /* overlong '/' */
                { "{\"a\": \"\xf0\x80\x80\xaf\"}", 1, 8, "byte 0xf0" },             /* overlong, 4 bytes */
                { "{\n\"a\": \"x\xed\xa0\x80\"}", 2, 8, "byte 0xed" },              /* surrogate U+D800 */
                { "{\"a\": \"\xed\xbf\xbf\"}", 1, 8, "byte 0xed" },                 /* surrogate U+DFFF */
                { "{\"a\": \"\xf4\x90\x80\x80\"}", 1, 8, "byte 0xf4" },             /* above U+10FFFF */
                { "{\"a\": \"\x80\"}", 1, 8, "byte 0x80" },                         /* lone continuation */
                { "{\"a\": \"\xc3(\"}", 1, 8, "byte 0xc3" },                        /* cut sequence */
                { "{\"a\": \"\xe2\x82", 1, 8, "byte 0xe2" },                        /* cut by the end */
                { "{\"a\": \"\xf5\x80\x80\x80\"}", 1, 8, "byte 0xf5" },
        };

        for (size_t i = 0; i < N_OF(cases); i++) {
                result_t res;

                check_diag(cases[i].text, parse_one_error(&res, cases[i].text), "", cases[i].line, cases[i].column,
                           "not UTF-8", cases[i].byte);
        }
}

/* A raw NUL byte is a text error at its own place, wherever it is: jansson would see the end. */
static void test_error_nul_byte(void **state)
{
        (void) state;
        static const struct {
                const char *text;
                size_t len;
                uint32_t line, column;
        } cases[] = {
                { "{\"output_dir\": \"a\0b\"}", 22, 1, 18 },
                { "{\"start_step\": 1}\0", 18, 1, 18 },
                { "\0\0\0\0", 4, 1, 1 },
                { "{\n \"st\0art\": 1}", 15, 2, 5 },
        };

        for (size_t i = 0; i < N_OF(cases); i++) {
                result_t res;

                parse_invalid_len(&res, cases[i].text, cases[i].len);
                assert_int_equal(res.r.n_errors, 1);
                check_diag("(NUL)", &res.r.errors[0], "", cases[i].line, cases[i].column, "NUL byte (0x00)", NULL);
        }
}

/* The token a syntax error quotes shows its control characters, and \u0000 is said plainly. */
static void test_syntax_error_is_printable(void **state)
{
        (void) state;
        result_t res;

        check_diag("\\x01", parse_one_error(&res, "{\"start_step\": 1,\x01}"), "", 1, 18, "JSON syntax error",
                   "near '\\x01'");
        check_diag("\\f", parse_one_error(&res, "{\f}"), "", 1, 2, "JSON syntax error", "'\\x0c'");
        check_diag("\\u0000", parse_one_error(&res, "{\"output_dir\": \"a\\u0000\"}"), "", 1, 24,
                   "\\u0000 (NUL) is not allowed in a string", NULL);
        assert_null(strstr(res.r.errors[0].message, "JSON_ALLOW_NUL"));
}

/* Ranges set whole bytes of the bitmap: the bits at both ends, and a file of many full ranges. */
static void test_rank_ranges(void **state)
{
        (void) state;
        static const struct {
                const char *ranks;
                uint32_t first, last, count;
        } cases[] = {
                { "3-17", 3, 17, 15 }, { "8-15", 8, 15, 8 }, { "7-8", 7, 8, 2 }, { "0-6", 0, 6, 7 },
                { "9-9", 9, 9, 1 }, { "65528-65535", 65528, 65535, 8 }, { "1-65534", 1, 65534, 65534 },
        };
        char text[64];
        result_t res;

        for (size_t i = 0; i < N_OF(cases); i++) {
                snprintf(text, sizeof(text), "{\"ranks\": \"%s\"}", cases[i].ranks);
                parse_valid(&res, text);
                assert_int_equal(res.c.args.rank_count, cases[i].count);
                for (uint32_t r = 0; r < NPF_SHM_MAX_RANKS; r++)
                        if (rank_set(&res.c, r) != (r >= cases[i].first && r <= cases[i].last))
                                fail_msg("%s: rank %u is %s", cases[i].ranks, r, rank_set(&res.c, r) ? "set" : "not set");
        }

        /* 90000 full ranges and overlaps: counted once each. */
        size_t cap = 90000 * 11 + 64, used = 0;
        char *big = malloc(cap);
        assert_non_null(big);
        used += (size_t) snprintf(big, cap, "{\"ranks\": [\"5-9\"");
        for (int k = 0; k < 90000; k++)
                used += (size_t) snprintf(big + used, cap - used, ", \"0-65535\"");
        snprintf(big + used, cap - used, "]}");
        parse_valid(&res, big);
        assert_int_equal(res.c.args.rank_count, 65536);
        free(big);
}

/* The directory is confined as the daemon publishes it, and an escape is an error at its place. */
static void test_confine(void **state)
{
        (void) state;
        static const struct {
                const char *text;
                const char *key;
                uint32_t column;
                int rc;
                const char *want;
        } bad[] = {
                { "{\"output_dir\": \"../x\"}", "output_dir", 16, -EINVAL, "has a \"..\" component" },
                { "\xef\xbb\xbf{\"prof_dir\": \"/etc\"}", "prof_dir", 14, -EPERM, "/etc is outside the output root /o" },
                { "{\"prof_path\": \"/o2\", \"start_step\": 1, \"stop_step\": 2}", "prof_path", 15, -EPERM, "outside" },
        };
        result_t res;

        parse_valid(&res, "{\"output_dir\": \"a/./b/\"}");
        assert_int_equal(npf_conf_confine(&res.c, "", 0, "/o", &res.r), 0);
        assert_string_equal(res.c.prof_dir, "/o/a/b");
        assert_int_equal(res.c.args.prof_dir_len, 6);
        for (size_t i = 0; i < N_OF(bad); i++) {
                parse_valid(&res, bad[i].text);
                assert_int_equal(npf_conf_confine(&res.c, bad[i].text, strlen(bad[i].text), "/o", &res.r), bad[i].rc);
                assert_int_equal(res.r.n_errors, 1);
                check_diag(bad[i].text, &res.r.errors[0], bad[i].key, 1, bad[i].column, bad[i].want, NULL);
        }
}

static void test_utf8_and_bom_accepted(void **state)
{
        (void) state;
        result_t res;
        const char *bom_error = "\xef\xbb\xbf{\n  \"level\": 9\n}";

        /* é, €, U+10FFFF and an emoji. */
        parse_valid(&res, "{\"output_dir\": \"/d/\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf\xf0\x9f\x98\x80\"}");
        assert_string_equal(res.c.prof_dir, "/d/\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf\xf0\x9f\x98\x80");
        assert_int_equal(res.c.args.prof_dir_len, 16);

        parse_valid(&res, "\xef\xbb\xbf{\"start_step\": 5}");
        assert_int_equal(res.c.args.start_step, 5);

        /* After a byte-order mark, places are still right. */
        check_diag(bom_error, parse_one_error(&res, bom_error), "level", 2, 12, "9 is out of range", NULL);
}

static void test_error_wrong_type(void **state)
{
        (void) state;
        result_t res;
        const char *text =
                "{\n"
                "    \"start_step\": 100,\n"
                "    \"experimental_config\": {\n"
                "        \"profiler_level\": \"Level1\",\n"
                "        \"l2_cache\": \"yes\"\n"
                "    },\n"
                "    \"active\": 2\n"
                "}\n";

        check_diag(text, parse_one_error(&res, text), "experimental_config.l2_cache", 5, 21,
                   "expected true or false", "found the string \"yes\"");
        assert_int_equal(res.r.dialect, NPF_DIALECT_TORCH_NPU);
}

static void test_error_out_of_range(void **state)
{
        (void) state;
        result_t res;
        const char *text =
                "{\n"
                "  \"level\": 7,\n"
                "  \"duration_ms\": 0\n"
                "}";

        parse_invalid_len(&res, text, strlen(text));
        assert_int_equal(res.r.n_errors, 2);
        check_diag(text, find_diag(res.r.errors, res.r.n_errors, "level"), "level", 2, 12, "7 is out of range",
                   "from -1 to 2");
        check_diag(text, find_diag(res.r.errors, res.r.n_errors, "duration_ms"), "duration_ms", 3, 18,
                   "0 is out of range", "milliseconds from 1");
}

/* Slips users make in torch_npu files are warned about, not taken for a second dialect. */
static void test_torch_npu_slips_are_warnings(void **state)
{
        (void) state;
        result_t res;
        const char *t1 = "{\"prof_dir\": \"p\", \"profiler_level\": \"Level2\", \"op_attr\": true}";
        const char *t2 = "{\"start_step\": 5, \"stop_step\": 9, \"gc_detect_threshold\": 1, \"record_op_args\": true}";

        assert_int_equal(parse_valid(&res, t1), 2);
        assert_int_equal(res.r.dialect, NPF_DIALECT_TORCH_NPU);
        assert_int_equal(res.c.args.level, NPF_LEVEL_0);        /* ignored, not applied */
        check_diag(t1, find_diag(res.r.warnings, res.r.n_warnings, "profiler_level"), "profiler_level", 1, 37,
                   "inside experimental_config", "ignored");
        check_diag(t1, find_diag(res.r.warnings, res.r.n_warnings, "op_attr"), "op_attr", 1, 58,
                   "inside experimental_config", "ignored");
        /* Native-only switches do not make a MindSpore file native. */
        assert_int_equal(parse_valid(&res, t2), 2);
        assert_int_equal(res.r.dialect, NPF_DIALECT_MINDSPORE);
        assert_int_equal(res.c.args.start_step, 5);
        /* A MindSpore key torch_npu never reads is still a second dialect. */
        const char *t3 = "{\"prof_dir\": \"p\", \"analyse_mode\": 0}";
        check_diag(t3, parse_one_error(&res, t3), "analyse_mode", 1, 35, "MindSpore", "write one dialect");
}

static void test_window_at_the_step_limit(void **state)
{
        (void) state;
        result_t res;
        char text[128];

        /* The last step may be NPF_STEP_MAX itself, not one past it. */
        snprintf(text, sizeof(text), "{\"start_step\": %lld, \"steps\": 1}", (long long) NPF_STEP_MAX);
        parse_valid(&res, text);
        assert_int_equal(res.c.args.stop_step, NPF_STEP_MAX);
        snprintf(text, sizeof(text), "{\"start_step\": %lld, \"steps\": 2}", (long long) NPF_STEP_MAX);
        check_diag(text, parse_one_error(&res, text), "start_step", 1, 16, "ends past step", NULL);
}

static void test_located_warnings_and_rank_ids(void **state)
{
        (void) state;
        result_t res;
        const char *both = "{\"mstx_domain_include\": [\"a\"], \"mstx_domain_exclude\": [\"b\"]}";
        const char *all = "{\"ranks\": [0, \"all\"]}";
        const char *ids = "{\"prof_dir\": \"p\", \"is_rank\": false, \"rank_list\": [1, 70000]}";
        const char *half = "{\"stop_step\": 9}";

        assert_int_equal(parse_valid(&res, both), 1);
        check_diag(both, &res.r.warnings[0], "mstx_domain_exclude", 1, 55, "include list wins", NULL);
        assert_string_equal(res.c.extra, "{\"mstx_domain_include\":[\"a\"]}");
        check_diag(all, parse_one_error(&res, all), "ranks[1]", 1, 15, "\"all\" stands alone", NULL);
        /* A bad rank id is an error even while is_rank is off. */
        check_diag(ids, parse_one_error(&res, ids), "rank_list[1]", 1, 54, "70000 is out of range", NULL);
        /* The error points at the key that is in the file. */
        check_diag(half, parse_one_error(&res, half), "stop_step", 1, 15, "give both", NULL);
}

static void test_error_unknown_name(void **state)
{
        (void) state;
        result_t res;
        const char *aic = "{\"prof_dir\": \"./p\", \"experimental_config\": {\"aic_metrics\": \"PipeUtilisation\"}}";
        const char *level = "{\"level\": \"level3\"}";
        const char *backend = "{\n\t\"backend\": \"gpu\"\n}";
        const char *analyse = "{\"analyse\": \"Asink\"}";

        check_diag(aic, parse_one_error(&res, aic), "experimental_config.aic_metrics", 1, 60,
                   "found the string \"PipeUtilisation\"", "\"PipeUtilization\"");
        /* Names are matched in any letter case; an unknown one lists them all. */
        check_diag(level, parse_one_error(&res, level), "level", 1, 11, "found the string \"level3\"",
                   "expected one of \"Level_none\", \"LevelNone\", \"Level0\", \"Level1\", \"Level2\"");
        check_diag(backend, parse_one_error(&res, backend), "backend", 2, 13, "found the string \"gpu\"",
                   "\"auto\", \"acl\", \"host\"");
        check_diag(analyse, parse_one_error(&res, analyse), "analyse", 1, 13, "found the string \"Asink\"",
                   "\"off\", \"sync\", \"async\"");
}

static void test_failed_parse_leaves_config_untouched(void **state)
{
        (void) state;
        /* Errors found at each stage: text, JSON, dialect, keys, window, rank list. */
        static const char *const texts[] = {
                "{\"a\": \"\xff\"}",
                "{\"a\": }",
                "[]",
                "{\"steps\": 1, \"active\": 1}",
                "{\"level\": \"Level9\", \"output_dir\": \"/x\", \"start_step\": 5}",
                "{\"start_step\": 9, \"stop_step\": 5, \"prof_path\": \"/x\"}",
                "{\"is_rank\": true, \"rank_list\": [], \"prof_dir\": \"/x\"}",
                "{\"start_step\": 5, \"steps\": 2, \"duration_ms\": 100, \"ranks\": \"0-3\"}",
        };

        for (size_t i = 0; i < N_OF(texts); i++) {
                result_t res;

                parse_invalid_len(&res, texts[i], strlen(texts[i]));
        }
}

static void test_error_count_beyond_the_cap(void **state)
{
        (void) state;
        enum { COUNT = 40 };
        char text[512], *p = text;
        result_t res;
        json_t *j;

        /* {"ranks": ["x", "x", ...]}: element i starts at column 12 + 5 i. */
        p += sprintf(p, "{\"ranks\": [");
        for (int i = 0; i < COUNT; i++)
                p += sprintf(p, "%s\"x\"", i ? ", " : "");
        sprintf(p, "]}");
        parse_invalid_len(&res, text, strlen(text));
        assert_int_equal(res.r.n_errors, COUNT);
        assert_string_equal(res.r.errors[0].key, "ranks[0]");
        assert_int_equal(res.r.errors[0].column, 12);
        assert_string_equal(res.r.errors[31].key, "ranks[31]");
        assert_int_equal(res.r.errors[31].line, 1);
        assert_int_equal(res.r.errors[31].column, 12 + 5 * 31);
        assert_non_null(strstr(res.r.errors[31].message, "\"x\" is not a rank"));

        j = npf_conf_report_to_json(&res.r);
        assert_non_null(j);
        assert_int_equal(json_array_size(json_object_get(j, "errors")), NPF_CONF_DIAG_MAX);
        assert_int_equal(json_integer_value(json_object_get(j, "error_count")), COUNT);
        json_decref(j);
}

static void test_warning_count_beyond_the_cap(void **state)
{
        (void) state;
        enum { COUNT = 40 };
        char text[1024], *p = text;
        result_t res;

        p += sprintf(p, "{");
        for (int i = 0; i < COUNT; i++)
                p += sprintf(p, "%s\"u%02d\": 0", i ? ", " : "", i);
        sprintf(p, "}");
        assert_int_equal(parse_valid(&res, text), COUNT);
        assert_string_equal(res.r.warnings[0].key, "u00");
        assert_string_equal(res.r.warnings[31].key, "u31");
        assert_non_null(strstr(res.r.warnings[31].message, "unknown key 'u31'"));
        /* {"u00": 0, "u01": 0, ...: the value of key i starts at column 9 + 10 i. */
        assert_int_equal(res.r.warnings[31].column, 9 + 10 * 31);
}

/* --- loading files ------------------------------------------------------------------- */

typedef struct dir_fixture {
        char dir[64];
} dir_fixture_t;

static const char *const fixture_files[] = { "fifo", "big.json", "max.json", "good.json", "bad.json" };

static int dir_setup(void **state)
{
        dir_fixture_t *f = calloc(1, sizeof(*f));

        if (!f)
                return -1;
        snprintf(f->dir, sizeof(f->dir), "/tmp/npf-test-conf-XXXXXX");
        if (!mkdtemp(f->dir)) {
                free(f);
                return -1;
        }
        *state = f;
        return 0;
}

static int dir_teardown(void **state)
{
        dir_fixture_t *f = *state;
        char path[128];
        int r;

        for (size_t i = 0; i < N_OF(fixture_files); i++) {
                snprintf(path, sizeof(path), "%s/%s", f->dir, fixture_files[i]);
                unlink(path);
        }
        r = rmdir(f->dir);
        free(f);
        return r;
}

static void fixture_path(void **state, const char *name, char *buf, size_t len)
{
        const dir_fixture_t *f = *state;

        snprintf(buf, len, "%s/%s", f->dir, name);
}

static void write_file(const char *path, const char *data, size_t len)
{
        FILE *fp = fopen(path, "we");

        assert_non_null(fp);
        assert_int_equal(fwrite(data, 1, len, fp), len);
        assert_int_equal(fclose(fp), 0);
}

/* Load @path into a sentinel-filled result; expect @rc and, on failure, an untouched config. */
static void load_expect(result_t *res, const char *path, int rc)
{
        memset(res, SENTINEL, sizeof(*res));
        res->rc = npf_conf_load(path, NULL, &res->c, &res->r);
        if (res->rc != rc) {
                dump_report(path, &res->r);
                fail_msg("npf_conf_load(%s) returned %d, expected %d", path, res->rc, rc);
        }
        if (rc != 0) {
                assert_true(res->r.n_errors >= 1);
                assert_true(untouched(&res->c));
        }
}

static void test_load_directory(void **state)
{
        const dir_fixture_t *f = *state;
        result_t res;

        load_expect(&res, f->dir, -EINVAL);
        assert_int_equal(res.r.n_errors, 1);
        assert_non_null(strstr(res.r.errors[0].message, f->dir));
        assert_non_null(strstr(res.r.errors[0].message, "is a directory, not a regular file"));
        assert_int_equal(res.r.errors[0].line, 0);
}

static void on_alarm(int sig)
{
        (void) sig;
}

static void test_load_fifo_does_not_block(void **state)
{
        struct sigaction sa = { .sa_handler = on_alarm }, old;
        char path[128];
        result_t res;

        fixture_path(state, "fifo", path, sizeof(path));
        assert_int_equal(mkfifo(path, 0600), 0);
        /* If the open waited for a writer, the alarm would interrupt it (no SA_RESTART): -EINTR. */
        sigemptyset(&sa.sa_mask);
        assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
        alarm(5);
        memset(&res, SENTINEL, sizeof(res));
        res.rc = npf_conf_load(path, NULL, &res.c, &res.r);
        alarm(0);
        sigaction(SIGALRM, &old, NULL);
        assert_int_equal(res.rc, -EINVAL);
        assert_true(untouched(&res.c));
        assert_int_equal(res.r.n_errors, 1);
        assert_non_null(strstr(res.r.errors[0].message, path));
        assert_non_null(strstr(res.r.errors[0].message, "is a FIFO, not a regular file"));
}

static void test_load_missing_file(void **state)
{
        char path[128];
        result_t res;

        fixture_path(state, "none.json", path, sizeof(path));
        load_expect(&res, path, -ENOENT);
        assert_int_equal(res.r.n_errors, 1);
        assert_non_null(strstr(res.r.errors[0].message, "cannot open"));
        assert_non_null(strstr(res.r.errors[0].message, path));
        assert_non_null(strstr(res.r.errors[0].message, strerror(ENOENT)));
}

static void test_load_file_too_big(void **state)
{
        char path[128];
        result_t res;
        char *data = malloc(NPF_CONF_FILE_MAX + 1);

        assert_non_null(data);
        memset(data, ' ', NPF_CONF_FILE_MAX + 1);
        memcpy(data, "{\"start_step\": 4}", 17);

        fixture_path(state, "max.json", path, sizeof(path));
        write_file(path, data, NPF_CONF_FILE_MAX);
        load_expect(&res, path, 0);
        assert_int_equal(res.c.args.start_step, 4);

        fixture_path(state, "big.json", path, sizeof(path));
        write_file(path, data, NPF_CONF_FILE_MAX + 1);
        load_expect(&res, path, -EFBIG);
        assert_int_equal(res.r.n_errors, 1);
        assert_non_null(strstr(res.r.errors[0].message, path));
        assert_non_null(strstr(res.r.errors[0].message, "1048577 bytes"));
        assert_non_null(strstr(res.r.errors[0].message, "at most 1048576"));
        free(data);
}

static void test_load_good_and_bad_files(void **state)
{
        char path[128];
        result_t res;
        const char *bad = "{\n  \"start_step\": \"soon\"\n}\n";

        fixture_path(state, "good.json", path, sizeof(path));
        write_file(path, "{\"start_step\": 12, \"steps\": 2}\n", 31);
        load_expect(&res, path, 0);
        assert_int_equal(res.c.args.start_step, 12);
        assert_int_equal(res.c.args.stop_step, 13);
        assert_int_equal(res.r.n_errors, 0);

        fixture_path(state, "bad.json", path, sizeof(path));
        write_file(path, bad, strlen(bad));
        load_expect(&res, path, -EINVAL);
        check_diag(bad, &res.r.errors[0], "start_step", 2, 17, "found the string \"soon\"", "\"next\"");
}

/* --- the bundled examples ------------------------------------------------------------ */

static void test_examples_are_valid(void **state)
{
        (void) state;
        glob_t g;
        size_t seen = 0;

        assert_int_equal(glob("examples/configs/*.json", 0, NULL, &g), 0);
        assert_true(g.gl_pathc >= 4);
        for (size_t i = 0; i < g.gl_pathc; i++) {
                const char *path = g.gl_pathv[i];
                result_t res;
                uint32_t want = 0;

                load_expect(&res, path, 0);
                if (res.r.n_warnings) {
                        dump_report(path, &res.r);
                        fail_msg("%s: an example should not warn", path);
                }
                if (strstr(path, "/native.json") || strstr(path, "/minimal.json"))
                        want = NPF_DIALECT_NATIVE;
                else if (strstr(path, "/torch_npu.json"))
                        want = NPF_DIALECT_TORCH_NPU;
                else if (strstr(path, "/mindspore.json"))
                        want = NPF_DIALECT_MINDSPORE;
                if (want) {
                        assert_int_equal(res.c.args.dialect, want);
                        seen++;
                }
        }
        assert_int_equal(seen, 4);
        globfree(&g);
}

static void test_example_values(void **state)
{
        (void) state;
        result_t res;
        const npf_shm_args_t *a = &res.c.args;

        load_expect(&res, "examples/configs/native.json", 0);
        assert_int_equal(a->start_step, 2000);
        assert_int_equal(a->stop_step, 2005);
        assert_int_equal(a->step_count, 6);
        assert_int_equal(a->warmup, 1);
        assert_int_equal(a->aic_metrics, NPF_AIC_ARITHMETIC_UTILIZATION);
        assert_int_equal(a->analyse_mode, NPF_ANALYSE_ASYNC);
        assert_int_equal(a->rank_count, 9);
        assert_string_equal(res.c.prof_dir, "./prof_npuprof");

        load_expect(&res, "examples/configs/torch_npu.json", 0);
        assert_int_equal(a->start_step, 1000);
        assert_int_equal(a->stop_step, 1004);
        assert_int_equal(a->step_count, 5);
        assert_int_equal(a->level, NPF_LEVEL_1);
        assert_int_equal(a->flags, NPF_FLAG_PROFILE_MEMORY | NPF_FLAG_DATA_SIMPLIFICATION);
        assert_int_equal(a->rank_filter, NPF_RANKS_ALL);
        assert_int_equal(a->gc_detect_threshold_us, -1);

        load_expect(&res, "examples/configs/mindspore.json", 0);
        assert_int_equal(a->start_step, 10);
        assert_int_equal(a->stop_step, 14);
        assert_int_equal(a->analyse_mode, NPF_ANALYSE_OFF);
        assert_int_equal(a->aic_metrics, NPF_AIC_PIPE_UTILIZATION);
        assert_string_equal(res.c.prof_dir, "./prof_mindspore");

        load_expect(&res, "examples/configs/minimal.json", 0);
        assert_int_equal(a->start_step, 1000);
        assert_int_equal(a->stop_step, 1004);
}

static void test_broken_examples_are_invalid(void **state)
{
        (void) state;
        glob_t g;
        result_t res;

        assert_int_equal(glob("examples/configs/broken/*.json", 0, NULL, &g), 0);
        assert_true(g.gl_pathc >= 2);
        for (size_t i = 0; i < g.gl_pathc; i++) {
                load_expect(&res, g.gl_pathv[i], -EINVAL);
                assert_true(res.r.errors[0].line > 0);
        }
        globfree(&g);

        /* wrong-level.json: three errors, each at its place. */
        load_expect(&res, "examples/configs/broken/wrong-level.json", -EINVAL);
        assert_int_equal(res.r.n_errors, 3);
        check_diag("wrong-level.json", find_diag(res.r.errors, 3, "active"), "active", 4, 15, "0 is out of range",
                   NULL);
        check_diag("wrong-level.json", find_diag(res.r.errors, 3, "experimental_config.profiler_level"),
                   "experimental_config.profiler_level", 6, 27, "found the string \"Level3\"", "\"Level2\"");
        check_diag("wrong-level.json", find_diag(res.r.errors, 3, "experimental_config.aic_metrics"),
                   "experimental_config.aic_metrics", 7, 24, "found the string \"PipeUtilisation\"",
                   "\"PipeUtilization\"");

        load_expect(&res, "examples/configs/broken/half-written.json", -EINVAL);
        assert_int_equal(res.r.n_errors, 1);
        assert_non_null(strstr(res.r.errors[0].message, "end of file"));
        /* The end of the file: the last line, or the empty one after its newline. */
        assert_in_range(res.r.errors[0].line, 4, 5);
}

/* --- JSON output --------------------------------------------------------------------- */

static void test_conf_to_json(void **state)
{
        (void) state;
        result_t res;
        json_t *j, *w, *s;
        const char *text =
                "{\"start_step\": 2001, \"steps\": 5, \"warmup\": 1, \"start_at_multiple_of\": 100,"
                " \"level\": \"Level1\", \"aic_metrics\": \"ArithmeticUtilization\", \"activities\": [\"NPU\"],"
                " \"output_dir\": \"./out\", \"ranks\": \"0-7,16\", \"backend\": \"host\", \"analyse\": \"async\","
                " \"profile_memory\": true, \"export_type\": [\"text\", \"db\"], \"host_sys\": [\"cpu\", \"mem\"],"
                " \"gc_detect_threshold\": 2.5, \"mstx_domain_include\": [\"a\"]}";

        parse_valid(&res, text);
        j = npf_conf_to_json(&res.c);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "dialect")), "native");
        w = json_object_get(j, "window");
        assert_true(json_is_true(json_object_get(w, "enabled")));
        assert_int_equal(json_integer_value(json_object_get(w, "start_step")), 2100);
        assert_int_equal(json_integer_value(json_object_get(w, "stop_step")), 2105);
        assert_int_equal(json_integer_value(json_object_get(w, "warmup")), 1);
        assert_int_equal(json_integer_value(json_object_get(w, "steps")), 6);
        assert_int_equal(json_integer_value(json_object_get(w, "start_at_multiple_of")), 100);
        assert_true(json_is_null(json_object_get(w, "duration_ms")));
        assert_string_equal(json_string_value(json_object_get(j, "level")), "Level1");
        assert_string_equal(json_string_value(json_object_get(j, "aic_metrics")), "ArithmeticUtilization");
        assert_int_equal(json_array_size(json_object_get(j, "activities")), 1);
        assert_string_equal(json_string_value(json_array_get(json_object_get(j, "activities"), 0)), "NPU");
        assert_string_equal(json_string_value(json_object_get(j, "analyse")), "async");
        assert_int_equal(json_array_size(json_object_get(j, "export_type")), 2);
        assert_string_equal(json_string_value(json_array_get(json_object_get(j, "export_type"), 1)), "db");
        assert_int_equal(json_array_size(json_object_get(j, "host_sys")), 2);
        assert_string_equal(json_string_value(json_array_get(json_object_get(j, "host_sys"), 1)), "mem");
        assert_string_equal(json_string_value(json_object_get(j, "backend")), "host");
        assert_string_equal(json_string_value(json_object_get(j, "ranks")), "0-7,16");
        assert_string_equal(json_string_value(json_object_get(j, "prof_dir")), "./out");
        s = json_object_get(j, "switches");
        assert_true(json_is_true(json_object_get(s, "profile_memory")));
        assert_true(json_is_true(json_object_get(s, "data_simplification")));
        assert_true(json_is_false(json_object_get(s, "with_stack")));
        assert_float_equal(json_real_value(json_object_get(j, "gc_detect_threshold_ms")), 2.5, 1e-9);
        assert_string_equal(json_string_value(json_array_get(json_object_get(json_object_get(j, "extra"),
                                                                              "mstx_domain_include"), 0)), "a");
        json_decref(j);
}

static void test_conf_to_json_next_and_disabled(void **state)
{
        (void) state;
        result_t res;
        json_t *j, *w;

        parse_valid(&res, "{\"start_step\": -1, \"active\": 2, \"is_rank\": true, \"rank_list\": [3, 4, 5, 9]}");
        j = npf_conf_to_json(&res.c);
        assert_non_null(j);
        w = json_object_get(j, "window");
        assert_string_equal(json_string_value(json_object_get(j, "dialect")), "torch_npu");
        assert_string_equal(json_string_value(json_object_get(w, "start_step")), "next");
        assert_true(json_is_null(json_object_get(w, "stop_step")));
        assert_int_equal(json_integer_value(json_object_get(w, "steps")), 2);
        assert_string_equal(json_string_value(json_object_get(j, "ranks")), "3-5,9");
        assert_true(json_is_null(json_object_get(j, "gc_detect_threshold_ms")));
        assert_null(json_object_get(j, "extra"));
        json_decref(j);

        parse_valid(&res, "{\"prof_path\": \"m\", \"duration_ms\": 300}");
        j = npf_conf_to_json(&res.c);
        assert_non_null(j);
        w = json_object_get(j, "window");
        assert_string_equal(json_string_value(json_object_get(j, "dialect")), "mindspore");
        assert_true(json_is_false(json_object_get(w, "enabled")));
        assert_true(json_is_null(json_object_get(w, "start_step")));
        assert_true(json_is_null(json_object_get(w, "stop_step")));
        assert_int_equal(json_integer_value(json_object_get(w, "duration_ms")), 300);
        assert_string_equal(json_string_value(json_object_get(j, "ranks")), "all");
        json_decref(j);
}

static void test_report_to_json(void **state)
{
        (void) state;
        result_t res;
        json_t *j, *e;
        const char *invalid = "{\"start_step\": 9, \"stop_step\": 5, \"colour\": 1}";

        /* Invalid, with a warning. */
        parse_invalid_len(&res, invalid, strlen(invalid));
        j = npf_conf_report_to_json(&res.r);
        assert_non_null(j);
        assert_true(json_is_false(json_object_get(j, "valid")));
        assert_string_equal(json_string_value(json_object_get(j, "dialect")), "mindspore");
        assert_int_equal(json_array_size(json_object_get(j, "errors")), 1);
        assert_int_equal(json_integer_value(json_object_get(j, "error_count")), 1);
        e = json_array_get(json_object_get(j, "errors"), 0);
        assert_string_equal(json_string_value(json_object_get(e, "key")), "stop_step");
        assert_int_equal(json_integer_value(json_object_get(e, "line")), 1);
        assert_int_equal(json_integer_value(json_object_get(e, "column")), 32);
        assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "before start_step 9"));
        assert_int_equal(json_array_size(json_object_get(j, "warnings")), 1);
        assert_int_equal(json_integer_value(json_object_get(j, "warning_count")), 1);
        e = json_array_get(json_object_get(j, "warnings"), 0);
        assert_string_equal(json_string_value(json_object_get(e, "key")), "colour");
        assert_int_equal(json_integer_value(json_object_get(e, "column")), 45);
        json_decref(j);

        /* An error tied to no place: null line, column and key; no dialect. */
        parse_invalid_len(&res, "", 0);
        j = npf_conf_report_to_json(&res.r);
        assert_non_null(j);
        assert_true(json_is_false(json_object_get(j, "valid")));
        assert_true(json_is_null(json_object_get(j, "dialect")));
        e = json_array_get(json_object_get(j, "errors"), 0);
        assert_true(json_is_null(json_object_get(e, "line")));
        assert_true(json_is_null(json_object_get(e, "column")));
        assert_true(json_is_null(json_object_get(e, "key")));
        assert_string_equal(json_string_value(json_object_get(e, "message")), "the file is empty");
        json_decref(j);

        /* Valid. */
        parse_valid(&res, "{\"start_step\": 1, \"steps\": 3}");
        j = npf_conf_report_to_json(&res.r);
        assert_non_null(j);
        assert_true(json_is_true(json_object_get(j, "valid")));
        assert_string_equal(json_string_value(json_object_get(j, "dialect")), "native");
        assert_int_equal(json_array_size(json_object_get(j, "errors")), 0);
        assert_int_equal(json_array_size(json_object_get(j, "warnings")), 0);
        json_decref(j);
}

static void test_names(void **state)
{
        (void) state;

        assert_string_equal(npf_shm_dialect_name(NPF_DIALECT_NATIVE), "native");
        assert_string_equal(npf_shm_dialect_name(NPF_DIALECT_TORCH_NPU), "torch_npu");
        assert_string_equal(npf_shm_dialect_name(NPF_DIALECT_MINDSPORE), "mindspore");
        assert_string_equal(npf_shm_dialect_name(0), "unknown");
        assert_string_equal(npf_shm_level_name(NPF_LEVEL_NONE), "LevelNone");
        assert_string_equal(npf_shm_level_name(NPF_LEVEL_2), "Level2");
        assert_string_equal(npf_conf_aic_name(NPF_AIC_MEMORY_UB), "MemoryUB");
        assert_string_equal(npf_conf_aic_name(99), "invalid");
        assert_string_equal(npf_shm_backend_name(NPF_BACKEND_ACL), "acl");
        assert_string_equal(npf_conf_analyse_name(NPF_ANALYSE_OFF), "off");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_key_lands_in_its_field),
                cmocka_unit_test(test_every_key_rejects_a_wrong_type),
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_dialect_from_exclusive_keys),
                cmocka_unit_test(test_mixed_dialects_are_an_error),
                cmocka_unit_test(test_other_dialect_key_is_a_warning),
                cmocka_unit_test(test_auto_section),
                cmocka_unit_test(test_unknown_keys_are_warnings),
                cmocka_unit_test(test_experimental_key_of_no_torch_npu_level),
                cmocka_unit_test(test_window_torch_npu),
                cmocka_unit_test(test_window_mindspore),
                cmocka_unit_test(test_window_mindspore_errors),
                cmocka_unit_test(test_window_native),
                cmocka_unit_test(test_window_duration),
                cmocka_unit_test(test_window_steps_and_duration_is_an_error),
                cmocka_unit_test(test_window_limits),
                cmocka_unit_test(test_native_window_without_start_warns),
                cmocka_unit_test(test_start_at_multiple_of_move_warns),
                cmocka_unit_test(test_timed_window_starts_too_late),
                cmocka_unit_test(test_aic_metrics_default_depends_on_level),
                cmocka_unit_test(test_analyse_mode),
                cmocka_unit_test(test_analyse_false_with_analyse_mode_warns),
                cmocka_unit_test(test_activities),
                cmocka_unit_test(test_export_type_and_host_sys_lists),
                cmocka_unit_test(test_torch_npu_rank_list),
                cmocka_unit_test(test_native_ranks),
                cmocka_unit_test(test_native_ranks_errors),
                cmocka_unit_test(test_next_and_all_in_any_case),
                cmocka_unit_test(test_star_and_all_stand_alone_in_a_list),
                cmocka_unit_test(test_native_ranks_open_range_is_an_error),
                cmocka_unit_test(test_native_ranks_trailing_comma_is_an_error),
                cmocka_unit_test(test_native_ranks_signed_range_end_is_an_error),
                cmocka_unit_test(test_prof_dir_limits),
                cmocka_unit_test(test_extra_json),
                cmocka_unit_test(test_gc_detect_threshold),
                cmocka_unit_test(test_error_json_syntax),
                cmocka_unit_test(test_error_json_truncated),
                cmocka_unit_test(test_error_duplicate_key),
                cmocka_unit_test(test_error_top_level_not_an_object),
                cmocka_unit_test(test_error_empty_file),
                cmocka_unit_test(test_error_file_too_big),
                cmocka_unit_test(test_error_not_utf8),
                cmocka_unit_test(test_utf8_and_bom_accepted),
                cmocka_unit_test(test_error_nul_byte),
                cmocka_unit_test(test_syntax_error_is_printable),
                cmocka_unit_test(test_rank_ranges),
                cmocka_unit_test(test_confine),
                cmocka_unit_test(test_error_wrong_type),
                cmocka_unit_test(test_error_out_of_range),
                cmocka_unit_test(test_error_unknown_name),
                cmocka_unit_test(test_torch_npu_slips_are_warnings),
                cmocka_unit_test(test_window_at_the_step_limit),
                cmocka_unit_test(test_located_warnings_and_rank_ids),
                cmocka_unit_test(test_failed_parse_leaves_config_untouched),
                cmocka_unit_test(test_error_count_beyond_the_cap),
                cmocka_unit_test(test_warning_count_beyond_the_cap),
                cmocka_unit_test_setup_teardown(test_load_directory, dir_setup, dir_teardown),
                cmocka_unit_test_setup_teardown(test_load_fifo_does_not_block, dir_setup, dir_teardown),
                cmocka_unit_test_setup_teardown(test_load_missing_file, dir_setup, dir_teardown),
                cmocka_unit_test_setup_teardown(test_load_file_too_big, dir_setup, dir_teardown),
                cmocka_unit_test_setup_teardown(test_load_good_and_bad_files, dir_setup, dir_teardown),
                cmocka_unit_test(test_examples_are_valid),
                cmocka_unit_test(test_example_values),
                cmocka_unit_test(test_broken_examples_are_invalid),
                cmocka_unit_test(test_conf_to_json),
                cmocka_unit_test(test_conf_to_json_next_and_disabled),
                cmocka_unit_test(test_report_to_json),
                cmocka_unit_test(test_names),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
