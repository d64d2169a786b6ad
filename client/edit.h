/* SPDX-License-Identifier: MIT */
/*
 * `npuprofctl start` and `stop`: edit the watched profiler_config.json in its own dialect,
 * keeping every key it has in its order, validate the result with the daemon's parser, and
 * replace the file atomically (a temporary file in the same directory, fsync, rename over,
 * fsync of the directory), keeping its mode.
 */
#ifndef NPUPROF_CLIENT_EDIT_H
#define NPUPROF_CLIENT_EDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define NPF_EDIT_ERR_MAX 512u           /* bytes of the message buffers below */

/* What `start` asks for. NULL strings and has_warmup false: keep what the file says. */
typedef struct npf_edit_start {
        int64_t at;                     /* the first step of the window */
        bool at_next;                   /* --at next: the step after a rank reads it */
        int64_t steps;                  /* steps in the window, warmup not included */
        bool has_warmup;
        int64_t warmup;
        const char *level;              /* Level0|Level1|Level2|Level_none, or -1..2 */
        const char *ranks;              /* "all", or ranks and ranges: "0-7,16" */
        const char *backend;            /* acl|host|auto */
} npf_edit_start_t;

/*
 * npf_edit_start_json() - set the window @a asks for in the parsed file @root, written in
 * @dialect (NPF_DIALECT_*), with that dialect's keys; other keys are kept.
 * Return: 0, or -EINVAL with the reason in @err (NPF_EDIT_ERR_MAX bytes) when the dialect
 * cannot say what @a asks (a warmup in a MindSpore file, say).
 */
int npf_edit_start_json(json_t *root, uint32_t dialect, const npf_edit_start_t *a, char *err);

/* npf_edit_stop_json() - turn profiling off in @root, in @dialect's way. */
void npf_edit_stop_json(json_t *root, uint32_t dialect);

/*
 * npf_edit_replace() - replace the file at @path by the @len bytes at @text: a temporary
 * file in the same directory with @mode (and @uid/@gid when they differ from ours and we
 * may set them), fsync, rename over @path, fsync of the directory. Nothing of @path is
 * touched when it fails.
 * Return: 0, or -errno with the reason in @err (NPF_EDIT_ERR_MAX bytes).
 */
int npf_edit_replace(const char *path, const char *text, size_t len, unsigned mode, unsigned uid, unsigned gid,
                     char *err);

/*
 * npf_cli_edit() - `start` (@a not NULL) or `stop` (@a NULL) on @config_path, or, when it
 * is NULL, on the file the daemon at @socket_path watches (its status' config.path).
 * Prints what was done (one JSON object with @json) on stdout, errors on stderr.
 * Return: the exit status: 0 written, 1 invalid or refused (the file untouched), 3 the
 * daemon could not be reached for the path.
 */
int npf_cli_edit(const char *socket_path, const char *config_path, const npf_edit_start_t *a, bool json);

#endif /* NPUPROF_CLIENT_EDIT_H */
