/* SPDX-License-Identifier: MIT */
/* The configuration in torch_npu's and MindSpore's own formats. */
#include "conf/fwshm.h"
#include "conf/conf.h"

#include <stdio.h>
#include <string.h>

/* The window in a framework's terms: first and last step, or off. */
typedef struct window {
        bool on;
        int64_t start;          /* -1: the next step (torch_npu only) */
        int64_t warmup, active; /* torch_npu */
        int64_t stop;           /* MindSpore, inclusive */
} window_t;

static void note(char *ret_note, const char *what, const char *format)
{
        if (ret_note && !ret_note[0])
                snprintf(ret_note, NPF_FWSHM_NOTE_MAX, "%s cannot be said in %s's format: published as off", what,
                         format);
}

static window_t window_of(const npf_shm_args_t *a, bool next_allowed, int64_t max_step, const char *format,
                          char *ret_note)
{
        window_t w = { 0 };

        if (!a->enabled)
                return w;
        if (a->step_count == 0) {
                note(ret_note, "a window bounded by time (duration_ms)", format);
                return w;
        }
        if (a->start_step == NPF_STEP_NEXT && !next_allowed) {
                note(ret_note, "a window that starts at the next step", format);
                return w;
        }
        int64_t last = a->start_step == NPF_STEP_NEXT ? 0 : a->start_step + (int64_t) a->step_count - 1;
        if (last > max_step) {
                note(ret_note, "a window past step 2147483647", format);
                return w;
        }
        w.on = true;
        w.start = a->start_step == NPF_STEP_NEXT ? -1 : a->start_step;
        w.warmup = (int64_t) a->warmup;
        w.active = (int64_t) (a->step_count - a->warmup);
        w.stop = last;
        return w;
}

static json_t *flag(const npf_shm_args_t *a, uint32_t bit)
{
        return json_boolean(a->flags & bit);
}

/* An item of the extra JSON (metadata, mstx domains), or @fallback. */
static json_t *extra(json_t *x, const char *key, json_t *fallback)
{
        json_t *v = x ? json_object_get(x, key) : NULL;

        if (!v)
                return fallback;
        json_decref(fallback);
        return json_incref(v);
}

static json_t *extra_of(const npf_shm_config_t *c)
{
        return c->args.extra_len ? json_loads(c->extra, 0, NULL) : NULL;
}

static json_t *gc_threshold(const npf_shm_args_t *a)
{
        return a->gc_detect_threshold_us < 0 ? json_null() : json_real((double) a->gc_detect_threshold_us / 1000.0);
}

/*
 * A window that starts at the next step, in torch_npu's terms. Both releases in
 * shared/testdata/frameworks act alike on a window at an absolute step S: step() counts
 * first (dynamic_profile.py:88 on master, :73 in v2.5.1), starts the profiler when the count
 * is S (:117, :93) with schedule(wait=0, warmup, active, repeat=1) (:175, :136), steps it
 * once per call and stops it warmup + active calls later (:101-109, :82-92); the schedule
 * (Schedule.__call__, scheduler.py:51-76 on master, :35-55 in v2.5.1) warms up the first
 * warmup of the iterations and records the rest, ProfilerStep#S on. Only master has a
 * relative start: start_step -1 starts its profiler in the very call that reads the object
 * (_dynamic_profiler_config_context.py:373, dynamic_profile.py:117), the step a torch_npu
 * file's -1 names, while a native window starts at the step after it: one more warmup step
 * makes master record the native window's own iterations, its profiler open one step early.
 * v2.5.1 sets a start_step below 0 to 0 (_dynamic_profiler_config_context.py:68-71) and
 * never starts on it, as on an explicit 0: one body serves both releases, whether they read
 * one object or one each, and each does with it what it would do with a body of its own.
 */
static void torch_npu_next(const npf_shm_args_t *a, window_t *w, char *ret_note)
{
        if (!w->on || w->start != -1)
                return;
        if (a->dialect != NPF_DIALECT_TORCH_NPU)
                w->warmup++;
        if (ret_note && !ret_note[0])
                snprintf(ret_note, NPF_FWSHM_NOTE_MAX, "torch_npu v2.5.1 and older (UTC-hour objects) cannot start a "
                         "window at the next step: their jobs do not collect it");
}

json_t *npf_fwshm_torch_npu_json(const npf_shm_config_t *c, char *ret_note)
{
        if (ret_note)
                ret_note[0] = '\0';
        if (!c)
                return json_pack("{s:b}", "is_valid", false);

        const npf_shm_args_t *a = &c->args;
        window_t w = window_of(a, true, NPF_STEP_MAX, "torch_npu", ret_note);
        json_t *x = extra_of(c), *ranks = json_array();

        torch_npu_next(a, &w, ret_note);
        /* torch_npu's own template is off: start_step 0, one active step. */
        if (!w.on)
                w = (window_t) { .start = 0, .active = 1 };
        for (uint32_t r = 0; ranks && a->rank_filter == NPF_RANKS_LIST && r < NPF_SHM_MAX_RANKS; r++)
                if (npf_shm_config_selects(c, r))
                        json_array_append_new(ranks, json_integer(r));
        json_t *experimental = json_pack(
                "{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                "profiler_level", a->level == NPF_LEVEL_NONE ? "Level_none" : npf_shm_level_name(a->level),
                "aic_metrics", npf_conf_aic_name(a->aic_metrics),
                "l2_cache", flag(a, NPF_FLAG_L2_CACHE),
                "op_attr", flag(a, NPF_FLAG_OP_ATTR),
                "gc_detect_threshold", gc_threshold(a),
                "data_simplification", flag(a, NPF_FLAG_DATA_SIMPLIFICATION),
                "record_op_args", flag(a, NPF_FLAG_RECORD_OP_ARGS),
                "export_type", npf_conf_mask_json("export_type", a->export_type),
                "msprof_tx", flag(a, NPF_FLAG_MSTX),
                "host_sys", npf_conf_mask_json("host_sys", a->host_sys),
                "mstx_domain_include", extra(x, "mstx_domain_include", json_array()),
                "mstx_domain_exclude", extra(x, "mstx_domain_exclude", json_array()),
                "sys_io", flag(a, NPF_FLAG_SYS_IO),
                "sys_interconnection", flag(a, NPF_FLAG_SYS_INTERCONNECTION));
        json_t *o = json_pack(
                "{s:o, s:s%, s:b, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:b, s:o, s:b, s:o, s:o, s:b}",
                "activities", npf_conf_mask_json("activities", a->activities),
                "prof_dir", c->prof_dir, (size_t) a->prof_dir_len,
                "analyse", a->analyse_mode != NPF_ANALYSE_OFF,
                "record_shapes", flag(a, NPF_FLAG_RECORD_SHAPES),
                "profile_memory", flag(a, NPF_FLAG_PROFILE_MEMORY),
                "with_stack", flag(a, NPF_FLAG_WITH_STACK),
                "with_flops", flag(a, NPF_FLAG_WITH_FLOPS),
                "with_modules", flag(a, NPF_FLAG_WITH_MODULES),
                "active", (json_int_t) w.active,
                "warmup", (json_int_t) w.warmup,
                "start_step", (json_int_t) w.start,
                "is_rank", a->rank_filter == NPF_RANKS_LIST,
                "rank_list", ranks,
                "async_mode", a->analyse_mode == NPF_ANALYSE_ASYNC,
                "experimental_config", experimental,
                "metadata", extra(x, "metadata", json_object()),
                "is_valid", true);
        json_decref(x);
        return o;
}

json_t *npf_fwshm_mindspore_json(const npf_shm_config_t *c, char *ret_note)
{
        const npf_shm_args_t *a = &c->args;

        if (ret_note)
                ret_note[0] = '\0';
        window_t w = window_of(a, false, NPF_STEP_MAX, "MindSpore", ret_note);
        if (w.on && a->rank_filter == NPF_RANKS_LIST && ret_note && !ret_note[0])
                snprintf(ret_note, NPF_FWSHM_NOTE_MAX, "MindSpore's format has no rank list: every rank collects");
        json_t *x = extra_of(c);
        json_t *o = json_pack(
                "{s:I, s:I, s:s, s:s, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:o, s:s%, s:o, s:o, s:o, "
                "s:o, s:o}",
                "start_step", (json_int_t) (w.on ? w.start : -1),
                "stop_step", (json_int_t) (w.on ? w.stop : -1),
                "aic_metrics", npf_conf_aic_name(a->aic_metrics),
                "profiler_level", npf_shm_level_name(a->level),
                "analyse_mode", (int) a->analyse_mode,
                "activities", npf_conf_mask_json("activities", a->activities),
                "export_type", npf_conf_mask_json("export_type", a->export_type),
                "profile_memory", flag(a, NPF_FLAG_PROFILE_MEMORY),
                "mstx", flag(a, NPF_FLAG_MSTX),
                "parallel_strategy", flag(a, NPF_FLAG_PARALLEL_STRATEGY),
                "with_stack", flag(a, NPF_FLAG_WITH_STACK),
                "data_simplification", flag(a, NPF_FLAG_DATA_SIMPLIFICATION),
                "l2_cache", flag(a, NPF_FLAG_L2_CACHE),
                "analyse", a->analyse_mode != NPF_ANALYSE_OFF,
                "record_shapes", flag(a, NPF_FLAG_RECORD_SHAPES),
                "prof_path", c->prof_dir, (size_t) a->prof_dir_len,
                "mstx_domain_include", extra(x, "mstx_domain_include", json_array()),
                "mstx_domain_exclude", extra(x, "mstx_domain_exclude", json_array()),
                "host_sys", npf_conf_mask_json("host_sys", a->host_sys),
                "sys_io", flag(a, NPF_FLAG_SYS_IO),
                "sys_interconnection", flag(a, NPF_FLAG_SYS_INTERCONNECTION));
        json_decref(x);
        return o;
}

void npf_fwshm_mindspore_packed(const npf_shm_config_t *c, uint8_t out[NPF_FWSHM_MS_PACKED_SIZE], char *ret_note)
{
        /* struct.pack("iiiiii????"): six ints, then four bools, no padding. */
        int32_t ints[6] = { 0 };
        uint8_t bools[4] = { 0 };

        if (ret_note)
                ret_note[0] = '\0';
        if (c) {
                const npf_shm_args_t *a = &c->args;
                window_t w = window_of(a, false, INT32_MAX, "MindSpore", ret_note);
                uint32_t both = NPF_ACT_CPU | NPF_ACT_NPU;
                ints[0] = (int32_t) (w.on ? w.start : -1);
                ints[1] = (int32_t) (w.on ? w.stop : -1);
                ints[2] = a->aic_metrics;
                ints[3] = a->level;
                ints[4] = a->analyse_mode;
                ints[5] = (a->activities & both) == both ? 0 : a->activities & NPF_ACT_CPU ? 1 : 2;
                bools[0] = (a->flags & NPF_FLAG_PARALLEL_STRATEGY) != 0;
                bools[1] = (a->flags & NPF_FLAG_WITH_STACK) != 0;
                bools[2] = (a->flags & NPF_FLAG_DATA_SIMPLIFICATION) != 0;
                bools[3] = 1;
        }
        memcpy(out, ints, sizeof(ints));
        memcpy(out + sizeof(ints), bools, sizeof(bools));
}
