/* SPDX-License-Identifier: MIT */
/*
 * The configuration in force, said in the frameworks' own dynamic-profiling formats, for
 * jobs that read torch_npu's or MindSpore's shared memory instead of npuprof's segment:
 *
 *  - torch_npu: the JSON of dynamic_profile's profiler_config.json, with "is_valid";
 *  - MindSpore, JSON: the JSON of DynamicProfilerMonitor's configuration file;
 *  - MindSpore, packed (release 2.5): the 28-byte native-endian struct "iiiiii????".
 *
 * Whatever dialect the watched file is written in, each format gets its own dialect
 * ("Level_none" for torch_npu, "LevelNone" for MindSpore). What a format cannot say (a
 * window that starts at the next step for MindSpore, a window bounded by time, a rank list
 * for MindSpore) is published as the nearest thing it can say, and named in @ret_note. One
 * torch_npu body serves every release, each profiling the same iterations with it, save a
 * window at the next step, which releases before September 2025 cannot start (also named).
 */
#ifndef NPUPROF_CONF_FWSHM_H
#define NPUPROF_CONF_FWSHM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npuprof/shm.h"

#define NPF_FWSHM_MS_PACKED_SIZE 28u
#define NPF_FWSHM_NOTE_MAX 160u

/*
 * The JSON for torch_npu (@c NULL: the file is broken, {"is_valid": false}). Return: a new
 * object, or NULL when out of memory. @ret_note (NPF_FWSHM_NOTE_MAX bytes) says what could
 * not be said, "" when nothing.
 */
json_t *npf_fwshm_torch_npu_json(const npf_shm_config_t *c, char *ret_note);

/* The JSON for MindSpore's JSON layout; @c must not be NULL. As above. */
json_t *npf_fwshm_mindspore_json(const npf_shm_config_t *c, char *ret_note);

/*
 * The packed struct of MindSpore 2.5 into @out, in this machine's byte order, with
 * is_valid false when @c is NULL (and every other field zero).
 */
void npf_fwshm_mindspore_packed(const npf_shm_config_t *c, uint8_t out[NPF_FWSHM_MS_PACKED_SIZE],
                                 char *ret_note);

#endif /* NPUPROF_CONF_FWSHM_H */
