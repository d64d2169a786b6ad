/* SPDX-License-Identifier: MIT */
#include "conf/write.h"
#include "conf/conf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The ranks @list selects, as torch_npu's rank_list: a JSON array of rank ids.
 * Return: a new reference, or NULL with the reason in @err.
 */
static json_t *rank_array(const npf_shm_config_t *c, char *err)
{
        json_t *a = json_array();

        for (uint32_t r = 0; a && r < NPF_SHM_MAX_RANKS; r++)
                if (npf_shm_config_selects(c, r) && json_array_append_new(a, json_integer(r)) < 0) {
                        json_decref(a);
                        a = NULL;
                }
        if (!a)
                snprintf(err, NPF_CONF_WRITE_ERR_MAX, "out of memory");
        return a;
}

/* The level as @dialect writes it: MindSpore an integer, the others torch_npu's names. */
static json_t *level_json(const char *level, uint32_t dialect)
{
        int32_t v;

        if (npf_conf_level_parse(level, &v) < 0)
                return json_string(level);      /* the parser says what is allowed */
        if (dialect == NPF_DIALECT_MINDSPORE)
                return json_integer(v);
        return json_string(npf_conf_level_spelling(v));
}

/* torch_npu's ranks: is_rank and rank_list, or npuprof's own "ranks" where the file has it. */
static int torch_npu_ranks(json_t *root, const char *ranks, char *err)
{
        npf_shm_config_t *c;
        char why[NPF_CONF_MSG_MAX];
        json_t *list;

        if (json_object_get(root, "ranks"))
                return json_object_set_new(root, "ranks", json_string(ranks));
        if (!(c = calloc(1, sizeof(*c)))) {
                snprintf(err, NPF_CONF_WRITE_ERR_MAX, "out of memory");
                return -ENOMEM;
        }
        if (npf_conf_ranks_parse(ranks, c, why) < 0) {
                snprintf(err, NPF_CONF_WRITE_ERR_MAX, "ranks %s: %s", ranks, why);
                free(c);
                return -EINVAL;
        }
        if (c->args.rank_filter == NPF_RANKS_ALL) {
                free(c);
                return json_object_set_new(root, "is_rank", json_false());
        }
        list = rank_array(c, err);
        free(c);
        if (!list)
                return -ENOMEM;
        json_object_set_new(root, "is_rank", json_true());
        return json_object_set_new(root, "rank_list", list);
}

int npf_conf_write_window(json_t *root, uint32_t dialect, const npf_conf_window_t *w, char *err)
{
        /* The window is given in steps: a time bound would contradict it. */
        json_object_del(root, "duration_ms");

        switch (dialect) {
        case NPF_DIALECT_MINDSPORE: {
                int64_t stop;
                if (w->at_next) {
                        snprintf(err, NPF_CONF_WRITE_ERR_MAX, "a MindSpore file has no \"next\" step: start at a "
                                 "step from 1");
                        return -EINVAL;
                }
                if (w->has_warmup) {
                        snprintf(err, NPF_CONF_WRITE_ERR_MAX, "a MindSpore file has no warmup: leave it out, or "
                                 "start the window earlier");
                        return -EINVAL;
                }
                if (__builtin_add_overflow(w->at, w->steps - 1, &stop)) {
                        snprintf(err, NPF_CONF_WRITE_ERR_MAX, "a window from step %" PRId64 " of %" PRId64
                                 " steps ends past the last step", w->at, w->steps);
                        return -EINVAL;
                }
                json_object_set_new(root, "start_step", json_integer(w->at));
                json_object_set_new(root, "stop_step", json_integer(stop));
                if (w->level)
                        json_object_set_new(root, "profiler_level", level_json(w->level, dialect));
                if (w->ranks)
                        json_object_set_new(root, "ranks", json_string(w->ranks));
                break;
        }
        case NPF_DIALECT_TORCH_NPU:
                /* torch_npu/profiler/dynamic_profile.py reads start_step 0 as "never". */
                if (!w->at_next && w->at == 0) {
                        snprintf(err, NPF_CONF_WRITE_ERR_MAX, "torch_npu reads start_step 0 as \"never\": start at "
                                 "a step from 1, or next");
                        return -EINVAL;
                }
                json_object_set_new(root, "start_step", json_integer(w->at_next ? -1 : w->at));
                json_object_set_new(root, "active", json_integer(w->steps));
                if (w->has_warmup)
                        json_object_set_new(root, "warmup", json_integer(w->warmup));
                if (w->level) {
                        json_t *x = json_object_get(root, "experimental_config");
                        if (x && !json_is_object(x)) {
                                snprintf(err, NPF_CONF_WRITE_ERR_MAX, "experimental_config is not an object: "
                                         "cannot set its profiler_level");
                                return -EINVAL;
                        }
                        if (!x) {
                                x = json_object();
                                json_object_set_new(root, "experimental_config", x);
                        }
                        json_object_set_new(x, "profiler_level", level_json(w->level, dialect));
                }
                if (w->ranks && torch_npu_ranks(root, w->ranks, err) < 0)
                        return -EINVAL;
                break;
        default:
                json_object_set_new(root, "start_step", w->at_next ? json_string("next") : json_integer(w->at));
                json_object_set_new(root, "steps", json_integer(w->steps));
                if (w->has_warmup)
                        json_object_set_new(root, "warmup", json_integer(w->warmup));
                if (w->level)
                        json_object_set_new(root, "level", level_json(w->level, dialect));
                if (w->ranks)
                        json_object_set_new(root, "ranks", json_string(w->ranks));
                break;
        }
        if (w->backend)
                json_object_set_new(root, "backend", json_string(w->backend));
        return 0;
}

void npf_conf_write_off(json_t *root, uint32_t dialect)
{
        switch (dialect) {
        case NPF_DIALECT_MINDSPORE:
                json_object_set_new(root, "start_step", json_integer(-1));
                json_object_set_new(root, "stop_step", json_integer(-1));
                break;
        case NPF_DIALECT_TORCH_NPU:
                json_object_set_new(root, "start_step", json_integer(0));
                break;
        default:
                json_object_del(root, "start_step");
                break;
        }
}
