/* SPDX-License-Identifier: MIT */
/*
 * The writer of the dialects: a window, or profiling off, set in a parsed
 * profiler_config.json in the file's own dialect, with the keys conf/conf.c reads for it.
 * Every other key of the file is kept, in its order.
 */
#ifndef NPUPROF_CONF_WRITE_H
#define NPUPROF_CONF_WRITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define NPF_CONF_WRITE_ERR_MAX 512u     /* bytes of the message buffers below */

/* A window to write. NULL strings and has_warmup false: keep what the file says. */
typedef struct npf_conf_window {
        int64_t at;                     /* the first step of the window */
        bool at_next;                   /* the step after a rank reads it */
        int64_t steps;                  /* steps in the window, warmup not included */
        bool has_warmup;
        int64_t warmup;
        const char *level;              /* as npf_conf_level_parse() reads it */
        const char *ranks;              /* as npf_conf_ranks_parse() reads it */
        const char *backend;            /* acl|host|auto */
} npf_conf_window_t;

/*
 * npf_conf_write_window() - set the window @w in the parsed file @root, written in
 * @dialect (NPF_DIALECT_*).
 * Return: 0, or -EINVAL with the reason in @err (NPF_CONF_WRITE_ERR_MAX bytes) when the
 * dialect cannot say what @w asks (a warmup in a MindSpore file, say) or @w's ranks are
 * not a rank list.
 */
int npf_conf_write_window(json_t *root, uint32_t dialect, const npf_conf_window_t *w, char *err);

/* npf_conf_write_off() - turn profiling off in @root, in @dialect's way. */
void npf_conf_write_off(json_t *root, uint32_t dialect);

#endif /* NPUPROF_CONF_WRITE_H */
