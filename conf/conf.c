/* SPDX-License-Identifier: MIT */
/*
 * profiler_config.json parser. One table lists every key, the dialects that read it and its
 * parser; dialect detection, unknown-key warnings and the parsing all come from it.
 */
#include "conf.h"
#include "lib/jsonpos.h"
#include "lib/outroot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Dialect bits of the key table. */
enum {
        IN_NATIVE = 1u << 0,
        IN_TORCH_NPU = 1u << 1,         /* top level */
        IN_MINDSPORE = 1u << 2,
        IN_ALL = IN_NATIVE | IN_TORCH_NPU | IN_MINDSPORE,       /* npuprof's extensions and common keys */
};

#define DURATION_MS_MAX (INT64_C(7) * 24 * 3600 * 1000)
#define GC_THRESHOLD_MS_MAX 1e9
#define PATH_DEPTH 4

/* A key path: "experimental_config", "host_sys", [2]. An index is kept as a number. */
typedef struct path {
        const char *key[PATH_DEPTH];    /* NULL: the component is index[k] */
        size_t index[PATH_DEPTH];
        size_t n;
} path_t;

typedef struct parse {
        const char *text;
        size_t len;
        npf_conf_report_t *report;
        npf_shm_config_t *c;
        uint32_t dialect;
        json_t *extra;                  /* metadata and mstx domain lists */
        path_t extra_at[3];             /* where each came from: metadata, include, exclude */

        bool has_start_key, has_stop_key;       /* present in the file, valid or not */
        const char *first_length_key;   /* the first of steps, warmup and duration_ms in the file */
        bool has_start, has_stop, has_steps, has_active, has_duration, has_aic, has_analyse, has_analyse_mode;
        int64_t start, stop, steps, active, warmup;
        bool start_next;
        bool analyse, async_mode;
        bool is_rank;
        bool ranks_set;
        unsigned tx_keys;               /* torch_npu's msprof_tx and mstx that are true: TX_* */
        json_t *rank_list;              /* borrowed, parsed at the end */
        path_t rank_list_at;
        npf_conf_auto_t au;             /* the "auto" section */
} parse_t;

typedef struct key_desc key_desc_t;
typedef void (*key_parse_fn)(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k);

struct key_desc {
        const char *name;
        unsigned dialects;              /* D_* that read the key */
        unsigned marks;                 /* the D_* it identifies, 0 if shared */
        key_parse_fn parse;
        uint32_t arg;                   /* the flag bit of a switch */
};

typedef struct name_value {
        const char *name;
        int32_t value;
} name_value_t;

static const name_value_t level_names[] = {
        { "Level_none", NPF_LEVEL_NONE }, { "LevelNone", NPF_LEVEL_NONE },
        { "Level0", NPF_LEVEL_0 }, { "Level1", NPF_LEVEL_1 }, { "Level2", NPF_LEVEL_2 },
        { NULL, 0 },
};

static const name_value_t aic_names[] = {
        { "AiCoreNone", NPF_AIC_NONE },
        { "PipeUtilization", NPF_AIC_PIPE_UTILIZATION },
        { "ArithmeticUtilization", NPF_AIC_ARITHMETIC_UTILIZATION },
        { "Memory", NPF_AIC_MEMORY },
        { "MemoryL0", NPF_AIC_MEMORY_L0 },
        { "MemoryUB", NPF_AIC_MEMORY_UB },
        { "ResourceConflictRatio", NPF_AIC_RESOURCE_CONFLICT_RATIO },
        { "L2Cache", NPF_AIC_L2_CACHE },
        { "MemoryAccess", NPF_AIC_MEMORY_ACCESS },
        { NULL, 0 },
};

static const name_value_t activity_names[] = { { "CPU", NPF_ACT_CPU }, { "NPU", NPF_ACT_NPU }, { NULL, 0 } };
static const name_value_t export_names[] = { { "text", NPF_EXPORT_TEXT }, { "db", NPF_EXPORT_DB }, { NULL, 0 } };
static const name_value_t host_sys_names[] = {
        { "cpu", NPF_HOST_SYS_CPU }, { "mem", NPF_HOST_SYS_MEM }, { "disk", NPF_HOST_SYS_DISK },
        { "network", NPF_HOST_SYS_NETWORK }, { "osrt", NPF_HOST_SYS_OSRT }, { "numa", NPF_HOST_SYS_NUMA },
        { NULL, 0 },
};
static const name_value_t backend_names[] = {
        { "auto", NPF_BACKEND_AUTO }, { "acl", NPF_BACKEND_ACL }, { "host", NPF_BACKEND_HOST }, { NULL, 0 },
};
static const name_value_t analyse_names[] = {
        { "off", NPF_ANALYSE_OFF }, { "sync", NPF_ANALYSE_SYNC }, { "async", NPF_ANALYSE_ASYNC }, { NULL, 0 },
};
static const name_value_t flag_names[] = {
        { "record_shapes", NPF_FLAG_RECORD_SHAPES },
        { "profile_memory", NPF_FLAG_PROFILE_MEMORY },
        { "with_stack", NPF_FLAG_WITH_STACK },
        { "with_flops", NPF_FLAG_WITH_FLOPS },
        { "with_modules", NPF_FLAG_WITH_MODULES },
        { "l2_cache", NPF_FLAG_L2_CACHE },
        { "op_attr", NPF_FLAG_OP_ATTR },
        { "mstx", NPF_FLAG_MSTX },
        { "parallel_strategy", NPF_FLAG_PARALLEL_STRATEGY },
        { "data_simplification", NPF_FLAG_DATA_SIMPLIFICATION },
        { "record_op_args", NPF_FLAG_RECORD_OP_ARGS },
        { "sys_io", NPF_FLAG_SYS_IO },
        { "sys_interconnection", NPF_FLAG_SYS_INTERCONNECTION },
        { NULL, 0 },
};

/* The entry of @t that names @s, in any letter case, or NULL. */
static const name_value_t *find_name(const name_value_t *t, const char *s)
{
        for (; t->name; t++)
                if (strcasecmp(s, t->name) == 0)
                        return t;
        return NULL;
}

static const char *name_of(const name_value_t *t, int32_t value)
{
        for (; t->name; t++)
                if (t->value == value)
                        return t->name;
        return "invalid";
}

const char *npf_conf_level_spelling(int32_t level)
{
        return name_of(level_names, level);
}

int npf_conf_level_parse(const char *s, int32_t *ret_level)
{
        static const name_value_t more[] = {
                { "none", NPF_LEVEL_NONE }, { "-1", NPF_LEVEL_NONE }, { "0", NPF_LEVEL_0 }, { "1", NPF_LEVEL_1 },
                { "2", NPF_LEVEL_2 }, { NULL, 0 },
        };
        const name_value_t *e = find_name(level_names, s);

        if (!e && !(e = find_name(more, s)))
                return -EINVAL;
        *ret_level = e->value;
        return 0;
}

const char *npf_conf_aic_name(int32_t aic_metrics)
{
        return name_of(aic_names, aic_metrics);
}

const char *npf_conf_analyse_name(int32_t analyse_mode)
{
        return name_of(analyse_names, analyse_mode);
}

/* --- key paths and diagnostics ------------------------------------------------------- */

static path_t path_key(const path_t *at, const char *key)
{
        path_t p = at ? *at : (path_t) { .n = 0 };

        if (p.n < PATH_DEPTH)
                p.key[p.n++] = key;
        return p;
}

static path_t path_index(const path_t *at, size_t i)
{
        path_t p = *at;

        if (p.n < PATH_DEPTH) {
                p.key[p.n] = NULL;
                p.index[p.n++] = i;
        }
        return p;
}

/* Spell @at's components as strings ("[2]" for an index) into @bufs, pointed at by @ret. */
static void path_components(const path_t *at, char bufs[PATH_DEPTH][24], const char *ret[PATH_DEPTH])
{
        for (size_t k = 0; k < at->n; k++) {
                if (at->key[k]) {
                        ret[k] = at->key[k];
                } else {
                        snprintf(bufs[k], sizeof(bufs[k]), "[%zu]", at->index[k]);
                        ret[k] = bufs[k];
                }
        }
}

static void path_string(const path_t *at, char *buf, size_t len)
{
        char bufs[PATH_DEPTH][24];
        const char *c[PATH_DEPTH];
        size_t used = 0;

        buf[0] = '\0';
        if (!at)
                return;
        path_components(at, bufs, c);
        for (size_t k = 0; k < at->n && used < len; k++) {
                const char *sep = (k == 0 || !at->key[k]) ? "" : ".";
                int n = snprintf(buf + used, len - used, "%s%s", sep, c[k]);
                if (n < 0)
                        break;
                used += (size_t) n;
        }
}

static void vdiag(parse_t *p, bool error, const path_t *at, const char *fmt, va_list ap)
{
        npf_conf_report_t *r = p->report;
        uint32_t *count = error ? &r->n_errors : &r->n_warnings;
        npf_conf_diag_t *d;

        if (*count >= NPF_CONF_DIAG_MAX) {
                (*count)++;
                return;
        }
        d = &(error ? r->errors : r->warnings)[*count];
        (*count)++;
        memset(d, 0, sizeof(*d));
        path_string(at, d->key, sizeof(d->key));
        vsnprintf(d->message, sizeof(d->message), fmt, ap);
        if (at && at->n > 0) {
                char bufs[PATH_DEPTH][24];
                const char *c[PATH_DEPTH];
                path_components(at, bufs, c);
                npf_jsonpos_find(p->text, p->len, c, at->n, &d->line, &d->column);
        }
}

static void error_at(parse_t *p, const path_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void error_at(parse_t *p, const path_t *at, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vdiag(p, true, at, fmt, ap);
        va_end(ap);
}

static void warn_at(parse_t *p, const path_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warn_at(parse_t *p, const path_t *at, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vdiag(p, false, at, fmt, ap);
        va_end(ap);
}

/* Say what a JSON value is, for "found ..." in messages. */
static const char *describe(const json_t *v, char *buf, size_t len)
{
        switch (json_typeof(v)) {
        case JSON_INTEGER: snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
        case JSON_REAL: snprintf(buf, len, "the real number %g", json_real_value(v)); break;
        case JSON_STRING: snprintf(buf, len, "the string \"%.60s\"", json_string_value(v)); break;
        case JSON_TRUE: snprintf(buf, len, "true"); break;
        case JSON_FALSE: snprintf(buf, len, "false"); break;
        case JSON_NULL: snprintf(buf, len, "null"); break;
        case JSON_OBJECT: snprintf(buf, len, "an object"); break;
        case JSON_ARRAY: snprintf(buf, len, "a list"); break;
        default: snprintf(buf, len, "a value"); break;
        }
        return buf;
}

#define FOUND(v) describe((v), (char[96]) { 0 }, 96)

/* --- value parsers ------------------------------------------------------------------- */

/* An integer in [min, max]. Return: true and the value in @ret, else an error is reported. */
static bool get_int(parse_t *p, const path_t *at, json_t *v, int64_t min, int64_t max, const char *allowed,
                    int64_t *ret)
{
        if (!json_is_integer(v)) {
                error_at(p, at, "expected an integer (%s), found %s", allowed, FOUND(v));
                return false;
        }
        json_int_t x = json_integer_value(v);
        if (x < min || x > max) {
                error_at(p, at, "%" JSON_INTEGER_FORMAT " is out of range: allowed %s", x, allowed);
                return false;
        }
        *ret = x;
        return true;
}

static bool get_bool(parse_t *p, const path_t *at, json_t *v, bool *ret)
{
        if (!json_is_boolean(v)) {
                error_at(p, at, "expected true or false, found %s", FOUND(v));
                return false;
        }
        *ret = json_is_true(v);
        return true;
}

static void list_names(const name_value_t *t, char *buf, size_t len)
{
        size_t used = 0;

        buf[0] = '\0';
        for (; t->name && used < len; t++) {
                int n = snprintf(buf + used, len - used, "%s\"%s\"", used ? ", " : "", t->name);
                if (n < 0)
                        break;
                used += (size_t) n;
        }
}

/* A name of @t, in any letter case, or else an error listing the names (and @also). */
static bool get_name_or(parse_t *p, const path_t *at, json_t *v, const name_value_t *t, const char *also,
                        int32_t *ret)
{
        char names[320];

        const name_value_t *e = json_is_string(v) ? find_name(t, json_string_value(v)) : NULL;

        if (e) {
                *ret = e->value;
                return true;
        }
        list_names(t, names, sizeof(names));
        error_at(p, at, "expected one of %s%s, found %s", names, also, FOUND(v));
        return false;
}

static bool get_name(parse_t *p, const path_t *at, json_t *v, const name_value_t *t, int32_t *ret)
{
        return get_name_or(p, at, v, t, "", ret);
}

/* A list of names of @t, OR-ed into a mask; a lone name is taken as a list of one. */
static bool get_name_mask(parse_t *p, const path_t *at, json_t *v, const name_value_t *t, bool allow_single,
                          bool allow_empty, uint32_t *ret)
{
        uint32_t mask = 0;
        int32_t bit;
        bool ok = true;
        size_t i;
        json_t *e;

        if (allow_single && json_is_string(v)) {
                if (!get_name(p, at, v, t, &bit))
                        return false;
                *ret = (uint32_t) bit;
                return true;
        }
        if (!json_is_array(v)) {
                char names[320];
                list_names(t, names, sizeof(names));
                error_at(p, at, "expected a list of %s, found %s", names, FOUND(v));
                return false;
        }
        json_array_foreach(v, i, e) {
                path_t ai = path_index(at, i);
                if (get_name(p, &ai, e, t, &bit))
                        mask |= (uint32_t) bit;
                else
                        ok = false;
        }
        if (ok && !allow_empty && mask == 0) {
                error_at(p, at, "the list is empty: at least one value is needed");
                return false;
        }
        if (ok)
                *ret = mask;
        return ok;
}

/* A name of @t, or for dialects in @int_dialects an integer from @min to @max. */
static bool get_enum(parse_t *p, const path_t *at, json_t *v, const name_value_t *t, unsigned int_dialects,
                     int64_t min, int64_t max, int32_t *ret)
{
        bool ints = int_dialects & (1u << (p->dialect - 1));
        char allowed[64] = "";

        if (ints)
                snprintf(allowed, sizeof(allowed), ", or an integer from %" PRId64 " to %" PRId64, min, max);
        if (ints && json_is_integer(v)) {
                int64_t x;
                if (!get_int(p, at, v, min, max, allowed + 5, &x))
                        return false;
                *ret = (int32_t) x;
                return true;
        }
        return get_name_or(p, at, v, t, allowed, ret);
}

static void parse_switch(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        bool on;

        if (!get_bool(p, at, v, &on))
                return;
        if (on)
                p->c->args.flags |= k->arg;
        else
                p->c->args.flags &= ~k->arg;
}

/*
 * torch_npu's msprof_tx and mstx are one switch, on when either is true
 * (experimental_config.py:130, msprof_tx=self._msprof_tx or self._mstx): a later false one
 * does not clear an earlier true one, as torch_npu's own template has both false.
 */
enum { TX_MSPROF_TX = 1u << 0, TX_MSTX = 1u << 1 };

static void parse_tx(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        bool on;

        if (!get_bool(p, at, v, &on))
                return;
        if (on)
                p->tx_keys |= k->arg;
        else
                p->tx_keys &= ~k->arg;
        if (p->tx_keys)
                p->c->args.flags |= NPF_FLAG_MSTX;
        else
                p->c->args.flags &= ~NPF_FLAG_MSTX;
}

static void parse_start_step(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        int64_t x;

        p->has_start_key = true;
        switch (p->dialect) {
        case NPF_DIALECT_MINDSPORE:
                if (json_is_integer(v) && json_integer_value(v) == 0) {
                        error_at(p, at, "0 is not a step: MindSpore counts steps from 1 (-1 disables profiling)");
                        return;
                }
                if (!get_int(p, at, v, -1, NPF_STEP_MAX, "-1 to disable, or a step from 1", &x))
                        return;
                break;
        case NPF_DIALECT_TORCH_NPU:
                if (!get_int(p, at, v, -1, NPF_STEP_MAX, "-1 for the next step, 0 for never, or a step from 1", &x))
                        return;
                break;
        default:
                if (json_is_string(v) && strcasecmp(json_string_value(v), "next") == 0) {
                        x = -1;
                        break;
                }
                if (!get_int(p, at, v, -1, NPF_STEP_MAX, "a step from 0, or -1 or \"next\" for the next step", &x))
                        return;
                break;
        }
        p->has_start = true;
        p->start = x;
}

static void parse_stop_step(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        p->has_stop_key = true;
        if (json_is_integer(v) && json_integer_value(v) == 0) {
                error_at(p, at, "0 is not a step: MindSpore counts steps from 1 (-1 disables profiling)");
                return;
        }
        if (get_int(p, at, v, -1, NPF_STEP_MAX, "-1 to disable, or a step from 1", &p->stop))
                p->has_stop = true;
}

/* Note the first key that says how long the window is, for a file that never says where it starts. */
static void note_length_key(parse_t *p, const key_desc_t *k)
{
        if (!p->first_length_key)
                p->first_length_key = k->name;
}

static void parse_steps(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        note_length_key(p, k);
        if (get_int(p, at, v, 1, NPF_STEP_MAX, "a step count from 1", &p->steps))
                p->has_steps = true;
}

static void parse_active(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        if (get_int(p, at, v, 1, NPF_STEP_MAX, "a step count from 1", &p->active))
                p->has_active = true;
}

static void parse_warmup(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        note_length_key(p, k);
        get_int(p, at, v, 0, NPF_STEP_MAX, "a step count from 0", &p->warmup);
}

static void parse_duration(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        int64_t x;

        note_length_key(p, k);
        if (get_int(p, at, v, 1, DURATION_MS_MAX, "milliseconds from 1 to 604800000 (7 days)", &x)) {
                p->c->args.duration_ms = (uint64_t) x;
                p->has_duration = true;
        }
}

static void parse_multiple(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        int64_t x;

        if (get_int(p, at, v, 1, NPF_STEP_MAX, "a step count from 1", &x))
                p->c->args.start_at_multiple_of = (uint64_t) x;
}

static void parse_backend(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        int32_t b;

        if (get_name(p, at, v, backend_names, &b))
                p->c->args.backend = (uint32_t) b;
}

static void parse_dir(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        if (!json_is_string(v)) {
                error_at(p, at, "expected a directory path, found %s", FOUND(v));
                return;
        }
        size_t n = json_string_length(v);
        if (n == 0) {
                error_at(p, at, "the directory path is empty");
                return;
        }
        if (n >= NPF_SHM_PATH_MAX) {
                error_at(p, at, "the directory path is %zu bytes long; at most %u are allowed", n,
                         NPF_SHM_PATH_MAX - 1);
                return;
        }
        memcpy(p->c->prof_dir, json_string_value(v), n + 1);
        p->c->args.prof_dir_len = (uint32_t) n;
}

static void parse_activities(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        uint32_t mask;

        if (json_is_integer(v) && p->dialect == NPF_DIALECT_MINDSPORE) {
                static const uint32_t codes[] = { NPF_ACT_CPU | NPF_ACT_NPU, NPF_ACT_CPU, NPF_ACT_NPU };
                int64_t x;
                if (get_int(p, at, v, 0, 2, "0 for CPU and NPU, 1 for CPU, 2 for NPU", &x))
                        p->c->args.activities = codes[x];
                return;
        }
        if (get_name_mask(p, at, v, activity_names, false, false, &mask))
                p->c->args.activities = mask;
}

static void parse_level(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        int32_t level;

        if (get_enum(p, at, v, level_names, IN_NATIVE | IN_MINDSPORE, NPF_LEVEL_NONE, NPF_LEVEL_2, &level))
                p->c->args.level = level;
}

static void parse_aic(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        int32_t aic;

        if (get_enum(p, at, v, aic_names, IN_NATIVE | IN_MINDSPORE, NPF_AIC_NONE, NPF_AIC_MEMORY_ACCESS, &aic)) {
                p->c->args.aic_metrics = aic;
                p->has_aic = true;
        }
}

static void parse_analyse(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        int32_t mode;

        if (p->dialect == NPF_DIALECT_NATIVE && !json_is_boolean(v)) {
                if (get_name_or(p, at, v, analyse_names, ", or true or false", &mode)) {
                        p->analyse = mode != NPF_ANALYSE_OFF;
                        p->async_mode = mode == NPF_ANALYSE_ASYNC;
                        p->has_analyse = true;
                }
                return;
        }
        if (get_bool(p, at, v, &p->analyse))
                p->has_analyse = true;
}

static void parse_async_mode(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        get_bool(p, at, v, &p->async_mode);
}

static void parse_analyse_mode(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        int64_t x;

        if (get_int(p, at, v, -1, 1, "-1 for off, 0 for sync, 1 for async", &x)) {
                p->c->args.analyse_mode = (int32_t) x;
                p->has_analyse_mode = true;
        }
}

static void parse_export_type(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        uint32_t mask;

        if (get_name_mask(p, at, v, export_names, true, false, &mask))
                p->c->args.export_type = mask;
}

static void parse_host_sys(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        uint32_t mask;

        if (get_name_mask(p, at, v, host_sys_names, false, true, &mask))
                p->c->args.host_sys = mask;
}

static void parse_string_list(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        size_t i;
        json_t *e;
        bool ok = true;

        if (!json_is_array(v)) {
                error_at(p, at, "expected a list of strings, found %s", FOUND(v));
                return;
        }
        json_array_foreach(v, i, e) {
                path_t ai = path_index(at, i);
                if (!json_is_string(e) || json_string_length(e) == 0) {
                        error_at(p, &ai, "expected a non-empty string, found %s", FOUND(e));
                        ok = false;
                }
        }
        if (ok && json_array_size(v) > 0) {
                json_object_set(p->extra, k->name, v);
                p->extra_at[strcmp(k->name, "mstx_domain_include") == 0 ? 1 : 2] = *at;
        }
}

static void parse_gc_threshold(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        if (json_is_null(v)) {
                p->c->args.gc_detect_threshold_us = -1;
                return;
        }
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > GC_THRESHOLD_MS_MAX) {
                error_at(p, at, "expected null or milliseconds from 0 to 1e9, found %s", FOUND(v));
                return;
        }
        p->c->args.gc_detect_threshold_us = (int64_t) (json_number_value(v) * 1000.0);
}

static void parse_metadata(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        if (!json_is_object(v)) {
                error_at(p, at, "expected an object of user metadata, found %s", FOUND(v));
                return;
        }
        if (json_object_size(v) > 0) {
                json_object_set(p->extra, "metadata", v);
                p->extra_at[0] = *at;
        }
}

static void parse_is_rank(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        get_bool(p, at, v, &p->is_rank);
}

static void parse_rank_list(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        if (!json_is_array(v)) {
                error_at(p, at, "expected a list of global rank ids, found %s", FOUND(v));
                return;
        }
        p->rank_list = v;
        p->rank_list_at = *at;
}

/*
 * Select ranks @a to @b (inclusive, both valid rank ids) in the bitmap. Whole bytes are set
 * at once, so that a file full of "0-65535" costs its size, not 65536 steps an item;
 * rank_count is counted once the bitmap is complete (count_ranks()).
 */
static void set_ranks(npf_shm_config_t *c, int64_t a, int64_t b)
{
        for (; a <= b && a % 8; a++)
                c->rank_bitmap[a / 8] |= (uint8_t) (1u << (a % 8));
        if (b - a + 1 >= 8) {
                memset(&c->rank_bitmap[a / 8], 0xff, (size_t) (b - a + 1) / 8);
                a += (b - a + 1) / 8 * 8;
        }
        for (; a <= b; a++)
                c->rank_bitmap[a / 8] |= (uint8_t) (1u << (a % 8));
}

static void set_rank(npf_shm_config_t *c, int64_t r)
{
        set_ranks(c, r, r);
}

static uint32_t count_ranks(const npf_shm_config_t *c)
{
        uint32_t n = 0;

        for (size_t i = 0; i < sizeof(c->rank_bitmap); i++)
                n += (uint32_t) __builtin_popcount(c->rank_bitmap[i]);
        return n;
}

/* One "A" or "A-B" of a ranks string. Return: true if it was well-formed and in range. */
static bool parse_rank_range(parse_t *p, const path_t *at, const char *s, size_t n)
{
        char buf[48], *end;
        long long a, b;

        if (n == 0 || n >= sizeof(buf)) {
                error_at(p, at, "\"%.*s\" is not a rank or a range of ranks like \"0-7\"", (int) (n < 40 ? n : 40), s);
                return false;
        }
        memcpy(buf, s, n);
        buf[n] = '\0';
        errno = 0;
        a = strtoll(buf, &end, 10);
        b = a;
        bool digits = buf[0] >= '0' && buf[0] <= '9';
        if (end != buf && *end == '-') {
                digits = digits && end[1] >= '0' && end[1] <= '9';
                b = strtoll(end + 1, &end, 10);
        }
        if (errno || !digits || *end) {
                error_at(p, at, "\"%s\" is not a rank or a range of ranks like \"0-7\"", buf);
                return false;
        }
        if (a < 0 || b >= (long long) NPF_SHM_MAX_RANKS || a > b) {
                error_at(p, at, "\"%s\" is out of range: ranks are 0 to %u, and a range goes upwards", buf,
                         NPF_SHM_MAX_RANKS - 1);
                return false;
        }
        set_ranks(p->c, a, b);
        return true;
}

static bool parse_rank_string(parse_t *p, const path_t *at, const char *s)
{
        bool ok = true;

        for (;;) {
                while (*s == ' ')
                        s++;
                size_t n = strcspn(s, ",");
                size_t t = n;
                while (t > 0 && s[t - 1] == ' ')
                        t--;
                ok = parse_rank_range(p, at, s, t) && ok;       /* an empty item is an error */
                s += n;
                if (*s != ',')
                        return ok;
                s++;
        }
}

/* "all" in any letter case, or "*": every rank. */
static bool is_all_ranks(const char *s)
{
        return strcasecmp(s, "all") == 0 || strcmp(s, "*") == 0;
}

int npf_conf_ranks_parse(const char *s, npf_shm_config_t *ret_config, char *err)
{
        npf_conf_report_t *report = calloc(1, sizeof(*report));
        npf_shm_config_t *c = calloc(1, sizeof(*c));
        parse_t p = { .text = "", .report = report, .c = c };
        int r = -ENOMEM;

        if (!report || !c) {
                snprintf(err, NPF_CONF_MSG_MAX, "out of memory");
                goto out;
        }
        r = 0;
        if (is_all_ranks(s))
                c->args.rank_filter = NPF_RANKS_ALL;
        else if (!*s)
                error_at(&p, NULL, "the rank list is empty: no rank would collect (use \"all\")");
        else if (parse_rank_string(&p, NULL, s))
                c->args.rank_filter = NPF_RANKS_LIST;
        if (report->n_errors) {
                snprintf(err, NPF_CONF_MSG_MAX, "%s", report->errors[0].message);
                r = -EINVAL;
                goto out;
        }
        ret_config->args.rank_filter = c->args.rank_filter;
        ret_config->args.rank_count = count_ranks(c);
        memcpy(ret_config->rank_bitmap, c->rank_bitmap, sizeof(c->rank_bitmap));
out:
        free(report);
        free(c);
        return r;
}

static void parse_ranks(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        size_t i;
        json_t *e;

        p->ranks_set = true;
        if (json_is_string(v) && is_all_ranks(json_string_value(v)))
                return;
        p->c->args.rank_filter = NPF_RANKS_LIST;
        if (json_is_string(v)) {
                if (json_string_length(v) == 0)
                        error_at(p, at, "the rank list is empty: no rank would collect (use \"all\")");
                else
                        parse_rank_string(p, at, json_string_value(v));
                return;
        }
        if (!json_is_array(v)) {
                error_at(p, at, "expected \"all\", a string like \"0-7,16\" or a list of ranks, found %s", FOUND(v));
                return;
        }
        if (json_array_size(v) == 0)
                error_at(p, at, "the rank list is empty: no rank would collect (use \"all\")");
        json_array_foreach(v, i, e) {
                path_t ai = path_index(at, i);
                int64_t r;
                if (json_is_string(e) && is_all_ranks(json_string_value(e)))
                        error_at(p, &ai, "\"%s\" stands alone: write \"ranks\": \"%s\"", json_string_value(e),
                                 json_string_value(e));
                else if (json_is_string(e))
                        parse_rank_string(p, &ai, json_string_value(e));
                else if (get_int(p, &ai, e, 0, NPF_SHM_MAX_RANKS - 1, "a rank from 0 to 65535", &r))
                        set_rank(p->c, r);
        }
}

static void parse_experimental(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k);
static void parse_auto(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k);

/* Keys of the top level. A key with a `marks` dialect tells which dialect the file is in. */
static const key_desc_t top_keys[] = {
        { "start_step", IN_ALL, 0, parse_start_step, 0 },
        { "stop_step", IN_MINDSPORE, IN_MINDSPORE, parse_stop_step, 0 },
        { "steps", IN_NATIVE, IN_NATIVE, parse_steps, 0 },
        { "active", IN_TORCH_NPU, IN_TORCH_NPU, parse_active, 0 },
        { "warmup", IN_NATIVE | IN_TORCH_NPU, 0, parse_warmup, 0 },
        { "duration_ms", IN_ALL, 0, parse_duration, 0 },
        { "start_at_multiple_of", IN_ALL, 0, parse_multiple, 0 },
        { "backend", IN_ALL, 0, parse_backend, 0 },
        { "ranks", IN_ALL, 0, parse_ranks, 0 },
        { "is_rank", IN_TORCH_NPU, IN_TORCH_NPU, parse_is_rank, 0 },
        { "rank_list", IN_TORCH_NPU, IN_TORCH_NPU, parse_rank_list, 0 },
        { "output_dir", IN_NATIVE, IN_NATIVE, parse_dir, 0 },
        { "prof_dir", IN_TORCH_NPU, IN_TORCH_NPU, parse_dir, 0 },
        { "prof_path", IN_MINDSPORE, IN_MINDSPORE, parse_dir, 0 },
        { "activities", IN_ALL, 0, parse_activities, 0 },
        { "analyse", IN_ALL, 0, parse_analyse, 0 },
        { "async_mode", IN_TORCH_NPU, IN_TORCH_NPU, parse_async_mode, 0 },
        { "analyse_mode", IN_MINDSPORE, IN_MINDSPORE, parse_analyse_mode, 0 },
        { "level", IN_NATIVE, IN_NATIVE, parse_level, 0 },
        { "profiler_level", IN_MINDSPORE, IN_MINDSPORE, parse_level, 0 },
        { "aic_metrics", IN_NATIVE | IN_MINDSPORE, 0, parse_aic, 0 },
        { "aicore_metrics", IN_MINDSPORE, IN_MINDSPORE, parse_aic, 0 },
        { "record_shapes", IN_ALL, 0, parse_switch, NPF_FLAG_RECORD_SHAPES },
        { "profile_memory", IN_ALL, 0, parse_switch, NPF_FLAG_PROFILE_MEMORY },
        { "with_stack", IN_ALL, 0, parse_switch, NPF_FLAG_WITH_STACK },
        { "with_flops", IN_NATIVE | IN_TORCH_NPU, 0, parse_switch, NPF_FLAG_WITH_FLOPS },
        { "with_modules", IN_NATIVE | IN_TORCH_NPU, 0, parse_switch, NPF_FLAG_WITH_MODULES },
        { "l2_cache", IN_NATIVE | IN_MINDSPORE, 0, parse_switch, NPF_FLAG_L2_CACHE },
        { "op_attr", IN_NATIVE, 0, parse_switch, NPF_FLAG_OP_ATTR },
        { "mstx", IN_NATIVE | IN_MINDSPORE, 0, parse_switch, NPF_FLAG_MSTX },
        { "parallel_strategy", IN_NATIVE | IN_MINDSPORE, 0, parse_switch, NPF_FLAG_PARALLEL_STRATEGY },
        { "data_simplification", IN_NATIVE | IN_MINDSPORE, 0, parse_switch, NPF_FLAG_DATA_SIMPLIFICATION },
        { "record_op_args", IN_NATIVE, 0, parse_switch, NPF_FLAG_RECORD_OP_ARGS },
        { "sys_io", IN_NATIVE | IN_MINDSPORE, 0, parse_switch, NPF_FLAG_SYS_IO },
        { "sys_interconnection", IN_NATIVE | IN_MINDSPORE, 0, parse_switch, NPF_FLAG_SYS_INTERCONNECTION },
        { "export_type", IN_NATIVE | IN_MINDSPORE, 0, parse_export_type, 0 },
        { "host_sys", IN_NATIVE | IN_MINDSPORE, 0, parse_host_sys, 0 },
        { "mstx_domain_include", IN_NATIVE | IN_MINDSPORE, 0, parse_string_list, 0 },
        { "mstx_domain_exclude", IN_NATIVE | IN_MINDSPORE, 0, parse_string_list, 0 },
        { "gc_detect_threshold", IN_NATIVE, 0, parse_gc_threshold, 0 },
        { "experimental_config", IN_TORCH_NPU, IN_TORCH_NPU, parse_experimental, 0 },
        { "metadata", IN_TORCH_NPU, IN_TORCH_NPU, parse_metadata, 0 },
        { "auto", IN_NATIVE, 0, parse_auto, 0 },
        { NULL, 0, 0, NULL, 0 },
};

/* Keys of torch_npu's experimental_config. */
static const key_desc_t experimental_keys[] = {
        { "profiler_level", IN_TORCH_NPU, 0, parse_level, 0 },
        { "aic_metrics", IN_TORCH_NPU, 0, parse_aic, 0 },
        { "l2_cache", IN_TORCH_NPU, 0, parse_switch, NPF_FLAG_L2_CACHE },
        { "op_attr", IN_TORCH_NPU, 0, parse_switch, NPF_FLAG_OP_ATTR },
        { "gc_detect_threshold", IN_TORCH_NPU, 0, parse_gc_threshold, 0 },
        { "data_simplification", IN_TORCH_NPU, 0, parse_switch, NPF_FLAG_DATA_SIMPLIFICATION },
        { "record_op_args", IN_TORCH_NPU, 0, parse_switch, NPF_FLAG_RECORD_OP_ARGS },
        { "export_type", IN_TORCH_NPU, 0, parse_export_type, 0 },
        { "msprof_tx", IN_TORCH_NPU, 0, parse_tx, TX_MSPROF_TX },
        { "mstx", IN_TORCH_NPU, 0, parse_tx, TX_MSTX },
        { "mstx_domain_include", IN_TORCH_NPU, 0, parse_string_list, 0 },
        { "mstx_domain_exclude", IN_TORCH_NPU, 0, parse_string_list, 0 },
        { "host_sys", IN_TORCH_NPU, 0, parse_host_sys, 0 },
        { "sys_io", IN_TORCH_NPU, 0, parse_switch, NPF_FLAG_SYS_IO },
        { "sys_interconnection", IN_TORCH_NPU, 0, parse_switch, NPF_FLAG_SYS_INTERCONNECTION },
        { NULL, 0, 0, NULL, 0 },
};

static const key_desc_t *find_key(const key_desc_t *table, const char *name)
{
        for (; table->name; table++)
                if (strcmp(table->name, name) == 0)
                        return table;
        return NULL;
}

static const char *dialects_text(unsigned mask)
{
        switch (mask) {
        case IN_NATIVE: return "an npuprof";
        case IN_TORCH_NPU: return "a torch_npu";
        case IN_MINDSPORE: return "a MindSpore";
        case IN_NATIVE | IN_TORCH_NPU: return "an npuprof or torch_npu";
        case IN_NATIVE | IN_MINDSPORE: return "an npuprof or MindSpore";
        default: return "another dialect's";
        }
}

static void parse_object(parse_t *p, const path_t *at, json_t *obj, const key_desc_t *table)
{
        unsigned mine = 1u << (p->dialect - 1);
        const char *name;
        json_t *v;

        json_object_foreach(obj, name, v) {
                path_t kp = path_key(at, name);
                const key_desc_t *k = find_key(table, name), *tk;
                bool read_here = k && (k->dialects & mine);

                if (!read_here && table == top_keys && p->dialect == NPF_DIALECT_TORCH_NPU &&
                    find_key(experimental_keys, name))
                        warn_at(p, &kp, "torch_npu reads '%s' inside experimental_config, not at the top level; ignored",
                                name);
                else if (!k && table == experimental_keys && (tk = find_key(top_keys, name)) &&
                         (tk->dialects & IN_TORCH_NPU))
                        warn_at(p, &kp, "torch_npu reads '%s' at the top level, not in experimental_config; ignored", name);
                else if (!k)
                        warn_at(p, &kp, "unknown key '%s' ignored", name);
                else if (!read_here)
                        warn_at(p, &kp, "'%s' is %s key, not read in a %s file; ignored", name,
                                dialects_text(k->dialects), npf_shm_dialect_name(p->dialect));
                else
                        k->parse(p, &kp, v, k);
        }
}

static void parse_experimental(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        if (!json_is_object(v)) {
                error_at(p, at, "expected an object, found %s", FOUND(v));
                return;
        }
        parse_object(p, at, v, experimental_keys);
}

/* --- the "auto" section ------------------------------------------------------------- */

#define AUTO_SECONDS_MAX (INT64_C(7) * 24 * 3600)

static bool get_object(parse_t *p, const path_t *at, json_t *v)
{
        if (json_is_object(v))
                return true;
        error_at(p, at, "expected an object, found %s", FOUND(v));
        return false;
}

static void parse_auto_steps(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        int64_t x;

        (void) k;
        if (get_int(p, at, v, 1, 1000, "1 to 1000 steps", &x))
                p->au.slowdown_steps = (uint32_t) x;
}

static void parse_auto_after(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        int64_t x;

        (void) k;
        if (get_int(p, at, v, 1, AUTO_SECONDS_MAX, "1 to 604800 seconds", &x))
                p->au.stall_after_ms = (uint64_t) x * 1000u;
}

static void parse_auto_cooldown(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        int64_t x;

        (void) k;
        if (get_int(p, at, v, 0, AUTO_SECONDS_MAX, "0 to 604800 seconds", &x))
                p->au.cooldown_ms = (uint64_t) x * 1000u;
}

static void parse_auto_per_day(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        int64_t x;

        (void) k;
        if (get_int(p, at, v, 0, 1000, "0 to 1000", &x))
                p->au.max_per_day = (uint32_t) x;
}

static const key_desc_t on_slowdown_keys[] = {
        { "steps", IN_NATIVE, 0, parse_auto_steps, 0 },
        { NULL, 0, 0, NULL, 0 },
};

static const key_desc_t on_stall_keys[] = {
        { "after_s", IN_NATIVE, 0, parse_auto_after, 0 },
        { NULL, 0, 0, NULL, 0 },
};

static void parse_on_slowdown(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        if (!get_object(p, at, v))
                return;
        p->au.slowdown_steps = NPF_CONF_AUTO_STEPS_DEFAULT;
        parse_object(p, at, v, on_slowdown_keys);
}

static void parse_on_stall(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        if (!get_object(p, at, v))
                return;
        p->au.stall_after_ms = (uint64_t) NPF_CONF_AUTO_STALL_S_DEFAULT * 1000u;
        parse_object(p, at, v, on_stall_keys);
}

static const key_desc_t auto_keys[] = {
        { "on_slowdown", IN_NATIVE, 0, parse_on_slowdown, 0 },
        { "on_stall", IN_NATIVE, 0, parse_on_stall, 0 },
        { "cooldown_s", IN_NATIVE, 0, parse_auto_cooldown, 0 },
        { "max_per_day", IN_NATIVE, 0, parse_auto_per_day, 0 },
        { NULL, 0, 0, NULL, 0 },
};

static void parse_auto(parse_t *p, const path_t *at, json_t *v, const key_desc_t *k)
{
        (void) k;
        if (!get_object(p, at, v))
                return;
        p->au.cooldown_ms = (uint64_t) NPF_CONF_AUTO_COOLDOWN_S_DEFAULT * 1000u;
        p->au.max_per_day = NPF_CONF_AUTO_PER_DAY_DEFAULT;
        parse_object(p, at, v, auto_keys);
        if (json_object_size(v) > 0 && !p->au.slowdown_steps && !p->au.stall_after_ms)
                warn_at(p, at, "neither on_slowdown nor on_stall is given: nothing happens by itself");
}

json_t *npf_conf_auto_json(const npf_conf_auto_t *a)
{
        if (!a || (!a->slowdown_steps && !a->stall_after_ms))
                return json_null();
        return json_pack("{s:o, s:o, s:I, s:I}",
                         "on_slowdown", a->slowdown_steps ? json_pack("{s:I}", "steps", (json_int_t) a->slowdown_steps)
                                                          : json_null(),
                         "on_stall", a->stall_after_ms ? json_pack("{s:I}", "after_s",
                                                                   (json_int_t) (a->stall_after_ms / 1000u))
                                                       : json_null(),
                         "cooldown_s", (json_int_t) (a->cooldown_ms / 1000u),
                         "max_per_day", (json_int_t) a->max_per_day);
}

/* --- dialect, defaults and the window ------------------------------------------------ */

/*
 * Tell the dialect from the keys that mark one. A torch_npu file may carry a MindSpore
 * marker that torch_npu reads in experimental_config (profiler_level at the top level, a
 * common slip); that is warned about later, not taken as a second dialect.
 * Return: false, with the error reported, if the file mixes dialects.
 */
static bool detect_dialect(parse_t *p, json_t *root)
{
        static const uint32_t dialect_of[3] = { NPF_DIALECT_NATIVE, NPF_DIALECT_TORCH_NPU, NPF_DIALECT_MINDSPORE };
        const char *seen[3] = { NULL, NULL, NULL };
        const char *ms_strict = NULL;   /* a MindSpore marker torch_npu does not read */
        const char *name;
        json_t *v;

        json_object_foreach(root, name, v) {
                const key_desc_t *k = find_key(top_keys, name);
                for (int d = 0; k && d < 3; d++)
                        if (k->marks == (1u << d) && !seen[d])
                                seen[d] = name;
                if (k && k->marks == IN_MINDSPORE && !find_key(experimental_keys, name) && !ms_strict)
                        ms_strict = name;
        }
        const char *conflict = NULL, *with = NULL;
        if (seen[0] && (seen[1] || seen[2])) {
                conflict = seen[1] ? seen[1] : seen[2];
                with = seen[0];
        } else if (seen[1] && ms_strict) {
                conflict = ms_strict;
                with = seen[1];
        }
        if (conflict) {
                path_t kp = path_key(NULL, conflict);
                const key_desc_t *ck = find_key(top_keys, conflict), *wk = find_key(top_keys, with);
                error_at(p, &kp, "'%s' is %s key, but '%s' makes this %s file: write one dialect", conflict,
                         dialects_text(ck->marks), with, dialects_text(wk->marks));
                return false;
        }
        p->dialect = NPF_DIALECT_NATIVE;
        for (int d = 2; d >= 0; d--)
                if (seen[d])
                        p->dialect = dialect_of[d];
        return true;
}

static void set_defaults(parse_t *p)
{
        npf_shm_args_t *a = &p->c->args;

        a->dialect = p->dialect;
        a->start_step = NPF_STEP_NONE;
        a->stop_step = NPF_STEP_NONE;
        a->gc_detect_threshold_us = -1;
        a->flags = NPF_FLAG_DATA_SIMPLIFICATION;
        a->level = NPF_LEVEL_0;
        a->aic_metrics = NPF_AIC_NONE;
        a->activities = NPF_ACT_CPU | NPF_ACT_NPU;
        a->analyse_mode = NPF_ANALYSE_OFF;
        a->export_type = NPF_EXPORT_TEXT;
        a->backend = NPF_BACKEND_AUTO;
        a->rank_filter = NPF_RANKS_ALL;
        p->start = p->dialect == NPF_DIALECT_TORCH_NPU ? 0 : -1;
        p->stop = -1;
        p->steps = 1;
        p->active = 1;
}

static const path_t *top(const char *key, path_t *buf)
{
        *buf = path_key(NULL, key);
        return buf;
}

/* Turn the steps read into the window, per the dialect's rules. */
static void resolve_window(parse_t *p)
{
        npf_shm_args_t *a = &p->c->args;
        path_t kp;
        int64_t count = 0;

        switch (p->dialect) {
        case NPF_DIALECT_TORCH_NPU:
                a->enabled = p->start != 0;
                p->start_next = p->start == -1;
                count = p->warmup + p->active;
                if (p->has_duration && p->has_active)
                        error_at(p, top("duration_ms", &kp), "give either active (steps) or duration_ms, not both");
                break;
        case NPF_DIALECT_MINDSPORE:
                if ((p->start == -1) != (p->stop == -1)) {
                        const char *key = p->start == -1 && p->has_start_key ? "start_step"
                                          : p->stop == -1 && p->has_stop_key ? "stop_step"
                                          : p->has_start_key ? "start_step" : "stop_step";
                        error_at(p, top(key, &kp),
                                 "start_step is %" PRId64 " and stop_step is %" PRId64
                                 ": give both a step from 1, or both -1 to disable profiling",
                                 p->start, p->stop);
                        return;
                }
                if (p->start > p->stop) {
                        error_at(p, top("stop_step", &kp), "stop_step %" PRId64 " is before start_step %" PRId64,
                                 p->stop, p->start);
                        return;
                }
                a->enabled = p->start != -1;
                count = p->stop - p->start + 1;
                if (p->has_duration && a->enabled)
                        warn_at(p, top("stop_step", &kp), "stop_step is ignored: duration_ms bounds the window");
                break;
        default:
                a->enabled = p->has_start;
                p->start_next = p->start == -1;
                count = p->warmup + p->steps;
                if (p->has_duration && p->has_steps)
                        error_at(p, top("duration_ms", &kp), "give either steps or duration_ms, not both");
                /* torch_npu's template has start_step 0 with active 1, so only a native file is told. */
                else if (!p->has_start_key && p->first_length_key)
                        warn_at(p, top(p->first_length_key, &kp),
                                "no start_step: profiling is off; add \"start_step\" (a step, or \"next\")");
                break;
        }

        a->warmup = (uint64_t) p->warmup;
        if (!a->enabled) {
                a->step_count = 0;
                return;
        }
        a->step_count = p->has_duration ? 0 : (uint64_t) count;
        if (p->start_next) {
                a->start_step = NPF_STEP_NEXT;
                return;
        }
        int64_t start = p->start;
        uint64_t k = a->start_at_multiple_of;
        if (k > 1 && start % (int64_t) k)
                start += (int64_t) k - start % (int64_t) k;
        if (start > NPF_STEP_MAX) {
                error_at(p, top("start_step", &kp), "the start is too late: step %" PRId64 " moved to a multiple of %"
                         PRIu64 " is past step %" PRId64, p->start, k, NPF_STEP_MAX);
                return;
        }
        if (!p->has_duration && count - 1 > NPF_STEP_MAX - start) {
                error_at(p, top("start_step", &kp), "the window ends past step %" PRId64, NPF_STEP_MAX);
                return;
        }
        if (start != p->start && (p->has_duration || count == 1))
                warn_at(p, top("start_at_multiple_of", &kp), "the window moves from step %" PRId64 " to step %"
                        PRId64 " to start at a multiple of %" PRIu64, p->start, start, k);
        else if (start != p->start)
                warn_at(p, top("start_at_multiple_of", &kp), "the window moves from steps %" PRId64 "..%" PRId64
                        " to %" PRId64 "..%" PRId64 " to start at a multiple of %" PRIu64, p->start,
                        p->start + count - 1, start, start + count - 1, k);
        a->start_step = start;
        a->stop_step = p->has_duration ? NPF_STEP_NONE : start + count - 1;
}

static void resolve(parse_t *p)
{
        npf_shm_args_t *a = &p->c->args;
        path_t kp;

        resolve_window(p);

        if (p->dialect == NPF_DIALECT_TORCH_NPU)
                a->analyse_mode = !p->analyse ? NPF_ANALYSE_OFF : p->async_mode ? NPF_ANALYSE_ASYNC : NPF_ANALYSE_SYNC;
        else if (!p->has_analyse_mode)
                a->analyse_mode = !p->analyse ? NPF_ANALYSE_OFF : p->async_mode ? NPF_ANALYSE_ASYNC : NPF_ANALYSE_SYNC;
        else if (p->has_analyse && !p->analyse && a->analyse_mode != NPF_ANALYSE_OFF)
                warn_at(p, top("analyse_mode", &kp),
                        "analyse is false but analyse_mode asks for sync/async analysis; analyse_mode wins");

        /*
         * A native file collects pipe utilization by default above Level0, as torch_npu's
         * _ExperimentalConfig() does when built in code (experimental_config.py:90). A torch_npu
         * or MindSpore file without the key collects none: torch_npu's dynamic_profile reads a
         * missing aic_metrics as AiCoreNone (_dynamic_profiler_config_context.py:263), MindSpore's
         * monitor as -1, AiCoreNone (mindspore/profiler/dynamic_profiler.py:60, 210-211).
         */
        if (!p->has_aic && a->level >= NPF_LEVEL_1 && p->dialect == NPF_DIALECT_NATIVE)
                a->aic_metrics = NPF_AIC_PIPE_UTILIZATION;

        if (p->rank_list) {
                size_t i;
                json_t *e;
                json_array_foreach(p->rank_list, i, e) {
                        path_t ai = path_index(&p->rank_list_at, i);
                        int64_t r;
                        if (get_int(p, &ai, e, 0, NPF_SHM_MAX_RANKS - 1, "a rank from 0 to 65535", &r) && p->is_rank &&
                            !p->ranks_set)
                                set_rank(p->c, r);
                }
        }
        if (p->is_rank) {
                if (p->ranks_set)
                        error_at(p, top("ranks", &kp), "give either ranks or is_rank with rank_list, not both");
                else if (!p->rank_list)
                        error_at(p, top("is_rank", &kp), "is_rank is true but there is no rank_list: no rank would collect");
                else if (json_array_size(p->rank_list) == 0)
                        error_at(p, &p->rank_list_at, "is_rank is true but rank_list is empty: no rank would collect");
                else
                        a->rank_filter = NPF_RANKS_LIST;
        }
        a->rank_count = count_ranks(p->c);

        json_t *inc = json_object_get(p->extra, "mstx_domain_include");
        if (inc && json_object_get(p->extra, "mstx_domain_exclude")) {
                warn_at(p, &p->extra_at[2], "mstx_domain_include and mstx_domain_exclude are both set: "
                        "the include list wins and this one is ignored");
                json_object_del(p->extra, "mstx_domain_exclude");
        }
        if (json_object_size(p->extra) > 0) {
                char *s = json_dumps(p->extra, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
                size_t n = s ? strlen(s) : 0;
                if (!s)
                        error_at(p, NULL, "out of memory");
                else if (n >= NPF_SHM_EXTRA_MAX)
                        error_at(p, &p->extra_at[json_object_get(p->extra, "metadata") ? 0
                                                 : json_object_get(p->extra, "mstx_domain_include") ? 1 : 2],
                                 "metadata and mstx domain lists take %zu bytes; at most %u fit", n,
                                 NPF_SHM_EXTRA_MAX - 1);
                else {
                        memcpy(p->c->extra, s, n + 1);
                        a->extra_len = (uint32_t) n;
                }
                free(s);
        }
}

/* --- text checks and entry points ---------------------------------------------------- */

/* Return: the offset of the first byte that is not valid UTF-8, or @len. */
static size_t utf8_invalid_at(const unsigned char *s, size_t len)
{
        size_t i = 0;

        while (i < len) {
                unsigned char c = s[i];
                size_t need;
                uint32_t cp;
                if (c < 0x80) {
                        i++;
                        continue;
                } else if (c >= 0xc2 && c <= 0xdf) {
                        need = 1;
                        cp = c & 0x1f;
                } else if (c >= 0xe0 && c <= 0xef) {
                        need = 2;
                        cp = c & 0x0f;
                } else if (c >= 0xf0 && c <= 0xf4) {
                        need = 3;
                        cp = c & 0x07;
                } else {
                        return i;
                }
                if (len - i <= need)
                        return i;
                for (size_t k = 1; k <= need; k++) {
                        if ((s[i + k] & 0xc0) != 0x80)
                                return i;
                        cp = cp << 6 | (s[i + k] & 0x3f);
                }
                if ((need == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
                    (need == 3 && (cp < 0x10000 || cp > 0x10ffff)))
                        return i;
                i += need + 1;
        }
        return len;
}

static void error_at_offset(parse_t *p, size_t offset, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void error_at_offset(parse_t *p, size_t offset, const char *fmt, ...)
{
        va_list ap;
        uint32_t n = p->report->n_errors;

        va_start(ap, fmt);
        vdiag(p, true, NULL, fmt, ap);
        va_end(ap);
        if (n < NPF_CONF_DIAG_MAX)
                npf_jsonpos_line_column(p->text, p->len, offset, &p->report->errors[n].line,
                                        &p->report->errors[n].column);
}

/* @s with control characters spelled "\x01", so that the token a parser quotes can be seen. */
static void printable(const char *s, char *buf, size_t size)
{
        size_t used = 0;

        for (; *s && used + 5 < size; s++) {
                unsigned char c = (unsigned char) *s;
                if (c < 0x20 || c == 0x7f)
                        used += (size_t) snprintf(buf + used, size - used, "\\x%02x", c);
                else
                        buf[used++] = (char) c;
        }
        buf[used] = '\0';
}

int npf_conf_parse(const char *text, size_t len, npf_shm_config_t *ret_config, npf_conf_report_t *report)
{
        return npf_conf_parse_auto(text, len, ret_config, NULL, report);
}

int npf_conf_parse_auto(const char *text, size_t len, npf_shm_config_t *ret_config, npf_conf_auto_t *ret_auto,
                        npf_conf_report_t *report)
{
        parse_t p = { .text = text, .len = len, .report = report };
        json_error_t jerr;
        json_t *root = NULL;
        int r = -EINVAL;

        memset(report, 0, sizeof(*report));
        if (len > NPF_CONF_FILE_MAX) {
                error_at(&p, NULL, "the file is %zu bytes; at most %u are read", len, NPF_CONF_FILE_MAX);
                return -EINVAL;
        }
        /* A byte-order mark is what some editors write first; it is not JSON. */
        if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
                text += 3;
                len -= 3;
                p.text = text;
                p.len = len;
        }
        size_t bad = utf8_invalid_at((const unsigned char *) text, len);
        if (bad < len) {
                error_at_offset(&p, bad, "the file is not UTF-8: byte 0x%02x cannot start or continue a character",
                                (unsigned char) text[bad]);
                return -EINVAL;
        }
        const char *nul = memchr(text, '\0', len);
        if (nul) {
                error_at_offset(&p, (size_t) (nul - text), "the file holds a NUL byte (0x00), which JSON text never does");
                return -EINVAL;
        }
        size_t blank = 0;
        while (blank < len && strchr(" \t\r\n", text[blank]) && text[blank])
                blank++;
        if (blank == len) {
                error_at(&p, NULL, "the file is empty");
                return -EINVAL;
        }

        root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (!root) {
                /*
                 * jansson's position counts the bytes it consumed, the offending one included;
                 * a file that ends too soon is reported where it ends.
                 */
                size_t at = json_error_code(&jerr) == json_error_premature_end_of_input ? len
                            : jerr.position > 0 ? (size_t) jerr.position - 1 : 0;
                char what[sizeof(jerr.text) * 4];
                if (json_error_code(&jerr) == json_error_null_character)
                        snprintf(what, sizeof(what), "\\u0000 (NUL) is not allowed in a string");
                else
                        printable(jerr.text, what, sizeof(what));
                error_at_offset(&p, at, "JSON syntax error: %s", what);
                return -EINVAL;
        }
        if (!json_is_object(root)) {
                error_at_offset(&p, blank, "the configuration must be a JSON object, found %s", FOUND(root));
                goto out;
        }
        if (!detect_dialect(&p, root))
                goto out;
        report->dialect = p.dialect;

        p.c = calloc(1, sizeof(*p.c));
        p.extra = json_object();
        if (!p.c || !p.extra) {
                r = -ENOMEM;
                goto out;
        }
        set_defaults(&p);
        parse_object(&p, NULL, root, top_keys);
        if (report->n_errors == 0)
                resolve(&p);
        if (report->n_errors == 0) {
                memcpy(ret_config, p.c, sizeof(*p.c));
                if (ret_auto)
                        *ret_auto = p.au;
                r = 0;
        }
out:
        free(p.c);
        json_decref(p.extra);
        json_decref(root);
        return r;
}

int npf_conf_confine(npf_shm_config_t *config, const char *text, size_t len, const char *root,
                     npf_conf_report_t *report)
{
        static const char *const keys[] = {
                [NPF_DIALECT_NATIVE] = "output_dir",
                [NPF_DIALECT_TORCH_NPU] = "prof_dir",
                [NPF_DIALECT_MINDSPORE] = "prof_path",
        };
        uint32_t dialect = config->args.dialect;
        const char *key = dialect < sizeof(keys) / sizeof(keys[0]) && keys[dialect] ? keys[dialect] : "prof_dir";
        char dir[NPF_SHM_PATH_MAX], err[NPF_OUTROOT_ERR_MAX];
        int r;

        r = npf_outroot_resolve(root, config->prof_dir, key, dir, sizeof(dir), err);
        if (r == 0)
                r = npf_outroot_walk(dir, strlen(root), NPF_OUTROOT_CHECK, key, err);
        if (r == 0) {
                size_t n = strlen(dir);
                memset(config->prof_dir, 0, sizeof(config->prof_dir));
                memcpy(config->prof_dir, dir, n + 1);
                config->args.prof_dir_len = (uint32_t) n;
                config->args.root_len = (uint32_t) strlen(root);
                return 0;
        }
        /* Places count from the byte after a byte-order mark, as npf_conf_parse() says them. */
        if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
                text += 3;
                len -= 3;
        }
        parse_t p = { .text = text, .len = len, .report = report };
        path_t kp = path_key(NULL, key);
        report->n_errors = 0;
        error_at(&p, &kp, "%s", err);
        return r;
}

static const char *file_kind(mode_t mode)
{
        if (S_ISDIR(mode)) return "a directory";
        if (S_ISFIFO(mode)) return "a FIFO";
        if (S_ISSOCK(mode)) return "a socket";
        if (S_ISCHR(mode)) return "a character device";
        if (S_ISBLK(mode)) return "a block device";
        return "not a regular file";
}

int npf_conf_read(const char *path, char **ret_text, size_t *ret_len, struct stat *ret_st, npf_conf_report_t *report)
{
        parse_t p = { .report = report };
        struct stat st;
        char *buf = NULL;
        size_t used = 0;
        int fd, r;

        memset(report, 0, sizeof(*report));
        /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                r = -errno;
                error_at(&p, NULL, "cannot open %s: %s", path, strerror(errno));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                error_at(&p, NULL, "cannot stat %s: %s", path, strerror(errno));
                goto fail;
        }
        if (!S_ISREG(st.st_mode)) {
                r = -EINVAL;
                error_at(&p, NULL, "%s is %s, not a regular file", path, file_kind(st.st_mode));
                goto fail;
        }
        if ((uint64_t) st.st_size > NPF_CONF_FILE_MAX) {
                r = -EFBIG;
                error_at(&p, NULL, "%s is %jd bytes; at most %u are read", path, (intmax_t) st.st_size,
                         NPF_CONF_FILE_MAX);
                goto fail;
        }
        buf = malloc(NPF_CONF_FILE_MAX + 1);
        if (!buf) {
                r = -ENOMEM;
                error_at(&p, NULL, "out of memory");
                goto fail;
        }
        /* Read one byte past the cap, so that a file that grew since fstat is caught. */
        for (;;) {
                ssize_t n = read(fd, buf + used, NPF_CONF_FILE_MAX + 1 - used);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        error_at(&p, NULL, "cannot read %s: %s", path, strerror(errno));
                        goto fail;
                }
                if (n == 0)
                        break;
                used += (size_t) n;
                if (used > NPF_CONF_FILE_MAX) {
                        r = -EFBIG;
                        error_at(&p, NULL, "%s is over %u bytes; at most that is read", path, NPF_CONF_FILE_MAX);
                        goto fail;
                }
        }
        close(fd);
        *ret_text = buf;
        *ret_len = used;
        if (ret_st)
                *ret_st = st;
        return 0;
fail:
        free(buf);
        close(fd);
        return r;
}

int npf_conf_load(const char *path, const char *output_root, npf_shm_config_t *ret_config,
                  npf_conf_report_t *report)
{
        char *text;
        size_t len;
        int r;

        r = npf_conf_read(path, &text, &len, NULL, report);
        if (r < 0)
                return r;
        r = npf_conf_parse(text, len, ret_config, report);
        if (r == 0 && output_root)
                r = npf_conf_confine(ret_config, text, len, output_root, report);
        free(text);
        return r;
}

static void withhold_diags(npf_conf_diag_t *diags, uint32_t n, const char *what, const char *path, uint32_t mode)
{
        for (uint32_t i = 0; i < n && i < NPF_CONF_DIAG_MAX; i++) {
                diags[i].key[0] = '\0';
                snprintf(diags[i].message, sizeof(diags[i].message),
                         "%s not shown: %.200s (mode %04o) is not readable by others; "
                         "`npuprofctl validate` shows it to who may read the file", what, path, mode & 07777u);
        }
}

void npf_conf_withhold(npf_conf_report_t *report, const char *path, uint32_t mode)
{
        withhold_diags(report->errors, report->n_errors, "the error", path, mode);
        withhold_diags(report->warnings, report->n_warnings, "the warning", path, mode);
}

/* --- output -------------------------------------------------------------------------- */

static json_t *mask_names(uint32_t mask, const name_value_t *t)
{
        json_t *a = json_array();

        for (; a && t->name; t++)
                if (mask & (uint32_t) t->value)
                        json_array_append_new(a, json_string(t->name));
        return a;
}

json_t *npf_conf_mask_json(const char *key, uint32_t mask)
{
        return mask_names(mask, strcmp(key, "activities") == 0    ? activity_names
                                : strcmp(key, "export_type") == 0 ? export_names
                                                                   : host_sys_names);
}

static json_t *step_or_null(int64_t step)
{
        return step < 0 ? json_null() : json_integer(step);
}

/* The rank filter as "0-7,16". */
static json_t *ranks_string(const npf_shm_config_t *c)
{
        char *buf;
        size_t used = 0, cap = 16 * 1024;
        json_t *s;

        if (c->args.rank_filter == NPF_RANKS_ALL)
                return json_string("all");
        buf = malloc(cap);
        if (!buf)
                return NULL;
        buf[0] = '\0';
        for (uint32_t r = 0; r < NPF_SHM_MAX_RANKS; r++) {
                if (!npf_shm_config_selects(c, r))
                        continue;
                uint32_t end = r;
                while (end + 1 < NPF_SHM_MAX_RANKS && npf_shm_config_selects(c, end + 1))
                        end++;
                int n = end == r ? snprintf(buf + used, cap - used, "%s%u", used ? "," : "", r)
                                 : snprintf(buf + used, cap - used, "%s%u-%u", used ? "," : "", r, end);
                if (n < 0 || (size_t) n >= cap - used)
                        break;
                used += (size_t) n;
                r = end;
        }
        s = json_string(buf);
        free(buf);
        return s;
}

json_t *npf_conf_to_json(const npf_shm_config_t *c)
{
        const npf_shm_args_t *a = &c->args;
        json_t *o, *window, *switches, *extra = NULL;

        switches = json_object();
        for (const name_value_t *f = flag_names; switches && f->name; f++)
                json_object_set_new(switches, f->name, json_boolean(a->flags & (uint32_t) f->value));
        window = json_pack("{s:b, s:o, s:o, s:I, s:I, s:o, s:o}",
                           "enabled", a->enabled != 0,
                           "start_step", a->enabled && a->start_step == NPF_STEP_NEXT ? json_string("next")
                                                                                       : step_or_null(a->start_step),
                           "stop_step", step_or_null(a->stop_step),
                           "warmup", (json_int_t) a->warmup,
                           "steps", (json_int_t) a->step_count,
                           "start_at_multiple_of", a->start_at_multiple_of ? json_integer((json_int_t) a->start_at_multiple_of) : json_null(),
                           "duration_ms", a->duration_ms ? json_integer((json_int_t) a->duration_ms) : json_null());
        if (a->extra_len > 0)
                extra = json_loads(c->extra, 0, NULL);
        o = json_pack("{s:s, s:o, s:s, s:s, s:o, s:s, s:o, s:o, s:s, s:o, s:s%, s:o, s:o}",
                      "dialect", npf_shm_dialect_name(a->dialect),
                      "window", window,
                      "level", npf_shm_level_name(a->level),
                      "aic_metrics", npf_conf_aic_name(a->aic_metrics),
                      "activities", mask_names(a->activities, activity_names),
                      "analyse", npf_conf_analyse_name(a->analyse_mode),
                      "export_type", mask_names(a->export_type, export_names),
                      "host_sys", mask_names(a->host_sys, host_sys_names),
                      "backend", npf_shm_backend_name(a->backend),
                      "ranks", ranks_string(c),
                      "prof_dir", c->prof_dir, (size_t) a->prof_dir_len,
                      "switches", switches,
                      "gc_detect_threshold_ms", a->gc_detect_threshold_us < 0 ? json_null()
                                                : json_real((double) a->gc_detect_threshold_us / 1000.0));
        if (o && extra)
                json_object_set_new(o, "extra", extra);
        else
                json_decref(extra);
        return o;
}

static json_t *diags_to_json(const npf_conf_diag_t *d, uint32_t n)
{
        json_t *a = json_array();

        for (uint32_t i = 0; a && i < n && i < NPF_CONF_DIAG_MAX; i++)
                json_array_append_new(a, json_pack("{s:s, s:o, s:o, s:o}", "message", d[i].message,
                                                   "line", d[i].line ? json_integer(d[i].line) : json_null(),
                                                   "column", d[i].column ? json_integer(d[i].column) : json_null(),
                                                   "key", d[i].key[0] ? json_string(d[i].key) : json_null()));
        return a;
}

json_t *npf_conf_report_to_json(const npf_conf_report_t *report)
{
        return json_pack("{s:b, s:o, s:o, s:o, s:I, s:I}",
                         "valid", report->n_errors == 0,
                         "dialect", report->dialect ? json_string(npf_shm_dialect_name(report->dialect)) : json_null(),
                         "errors", diags_to_json(report->errors, report->n_errors),
                         "warnings", diags_to_json(report->warnings, report->n_warnings),
                         "error_count", (json_int_t) report->n_errors,
                         "warning_count", (json_int_t) report->n_warnings);
}
