/* SPDX-License-Identifier: MIT */
/*
 * profiler_config.json: parse and validate the native, torch_npu and MindSpore dialects into
 * the one canonical structure that the daemon publishes, npf_shm_config_t. The schema is
 * documented in docs/profiler_config.json.5.
 *
 * Nothing here prints or is fatal: every problem becomes a diagnostic with the key path, the
 * line and column of the value in the file, and a message saying what was found and what is
 * allowed.
 */
#ifndef NPUPROF_CONF_H
#define NPUPROF_CONF_H

#include <jansson.h>
#include <stdint.h>
#include <sys/stat.h>

#include "npuprof/shm.h"

#define NPF_CONF_FILE_MAX   (1u << 20)  /* bytes */
#define NPF_CONF_DIAG_MAX   32u         /* diagnostics kept of each kind */
#define NPF_CONF_MSG_MAX    320u        /* bytes of one diagnostic's message */

typedef struct npf_conf_diag {
        uint32_t line;                  /* 1-based; 0 when not tied to a place */
        uint32_t column;                /* 1-based, in bytes */
        char     key[128];              /* key path, "experimental_config.profiler_level" */
        char     message[NPF_CONF_MSG_MAX];
} npf_conf_diag_t;

/* Everything said about one file. Filled in by npf_conf_parse() whatever it returns. */
typedef struct npf_conf_report {
        uint32_t dialect;               /* NPF_DIALECT_*, 0 if it could not be told */
        uint32_t n_errors;              /* all errors found; the first NPF_CONF_DIAG_MAX kept */
        uint32_t n_warnings;
        npf_conf_diag_t errors[NPF_CONF_DIAG_MAX];
        npf_conf_diag_t warnings[NPF_CONF_DIAG_MAX];
} npf_conf_report_t;

/*
 * The native file's "auto" section: what the daemon does by itself when the ranks' progress
 * says so (docs/profiler_config.json.5, AUTOMATIC WINDOWS). All zero: nothing.
 */
typedef struct npf_conf_auto {
        uint32_t slowdown_steps;        /* on_slowdown.steps: a window this long on a slowdown; 0: none */
        uint32_t max_per_day;           /* of each kind, in any 24 hours */
        uint64_t stall_after_ms;        /* on_stall.after_s: stacks of ranks stalled this long; 0: none */
        uint64_t cooldown_ms;           /* after one of a kind, none of it for this long */
} npf_conf_auto_t;

#define NPF_CONF_AUTO_STEPS_DEFAULT 5u
#define NPF_CONF_AUTO_STALL_S_DEFAULT 300u
#define NPF_CONF_AUTO_COOLDOWN_S_DEFAULT 3600u
#define NPF_CONF_AUTO_PER_DAY_DEFAULT 4u

/*
 * npf_conf_parse() - parse the @len bytes at @text.
 * Return: 0 and the configuration in @ret_config when the file is valid (warnings may be
 * reported); -EINVAL when it is not, with every error in @report. @ret_config is written
 * only on success; its generation, checksum and published_ns are left zero.
 * Context: any thread; reentrant.
 */
int npf_conf_parse(const char *text, size_t len, npf_shm_config_t *ret_config, npf_conf_report_t *report);

/* npf_conf_parse(), and the "auto" section into @ret_auto (written only on success). */
int npf_conf_parse_auto(const char *text, size_t len, npf_shm_config_t *ret_config, npf_conf_auto_t *ret_auto,
                        npf_conf_report_t *report);

/* @a as the file says it: null when it asks for nothing, else {on_slowdown, on_stall, cooldown_s, max_per_day}. */
json_t *npf_conf_auto_json(const npf_conf_auto_t *a);

/*
 * npf_conf_read() - read the file at @path, refusing what is not a regular file or is over
 * NPF_CONF_FILE_MAX bytes. Return: 0 and a malloc'd buffer (not NUL-terminated) in
 * @ret_text of @ret_len bytes, and the file's fstat() as it was opened (its mode, its
 * modification time) in @ret_st unless it is NULL; or -errno with the reason as an error
 * in @report (a reason that quotes nothing of the file).
 */
int npf_conf_read(const char *path, char **ret_text, size_t *ret_len, struct stat *ret_st, npf_conf_report_t *report);

/*
 * npf_conf_withhold() - replace every message and key of @report, which may quote the
 * file's content, by one that quotes nothing: for a file that not everybody may read,
 * whose diagnostics are shown to everybody. Lines, columns and counts are kept.
 */
void npf_conf_withhold(npf_conf_report_t *report, const char *path, uint32_t mode);

/*
 * npf_conf_load() - read and parse the file at @path and, with @output_root (normal form,
 * or NULL), confine its directory there as npf_conf_confine() does.
 * Refuses what is not a regular file, over NPF_CONF_FILE_MAX bytes, or not UTF-8.
 * Return: as npf_conf_parse() and npf_conf_confine(), or -errno when the file cannot be
 * read, with the reason as an error in @report.
 */
int npf_conf_load(const char *path, const char *output_root, npf_shm_config_t *ret_config,
                  npf_conf_report_t *report);

/*
 * npf_conf_confine() - put the directory of @config, a valid configuration just parsed from
 * the @len bytes at @text, under the output root @root (in npf_outroot_normalize() form),
 * as the daemon publishes it.
 * Return: 0 with prof_dir rewritten to the absolute directory; or -EINVAL (a ".."
 * component), -EPERM (outside @root) or -ENAMETOOLONG, with the reason as the one error of
 * @report, at the directory's key and its place in @text. @config is left as it was then.
 * Context: any thread; reentrant.
 */
int npf_conf_confine(npf_shm_config_t *config, const char *text, size_t len, const char *root,
                     npf_conf_report_t *report);

/*
 * npf_conf_to_json() - the effective configuration @config as a JSON object, in
 * npuprof's own terms (names, not numbers). Return: a new reference, or NULL if out of
 * memory.
 */
json_t *npf_conf_to_json(const npf_shm_config_t *config);

/* The report as JSON: valid, dialect, errors and warnings (each message, line, column, key). */
json_t *npf_conf_report_to_json(const npf_conf_report_t *report);

/* The names of the bits of @mask, for the key @key: "activities", "export_type" or "host_sys". */
json_t *npf_conf_mask_json(const char *key, uint32_t mask);

/*
 * npf_conf_level_parse() - the profiler level @s names: a name the files use (Level_none,
 * LevelNone, Level0, Level1, Level2, in any letter case), "none", or -1 to 2.
 * Return: 0 and the level (NPF_LEVEL_*) in @ret_level, or -EINVAL.
 */
int npf_conf_level_parse(const char *s, int32_t *ret_level);

/* The level as torch_npu's files spell it: Level_none, Level0, Level1, Level2. */
const char *npf_conf_level_spelling(int32_t level);

/*
 * npf_conf_ranks_parse() - the ranks a string selects as the "ranks" key reads it: "all"
 * or "*" (every rank), or ranks and ranges like "0-7,16".
 * Return: 0 and the selection in @ret_config's rank_filter, rank_bitmap and rank_count; or
 * -EINVAL with the parser's message in @err (NPF_CONF_MSG_MAX bytes).
 */
int npf_conf_ranks_parse(const char *s, npf_shm_config_t *ret_config, char *err);

const char *npf_conf_aic_name(int32_t aic_metrics);
const char *npf_conf_analyse_name(int32_t analyse_mode);

#endif /* NPUPROF_CONF_H */
