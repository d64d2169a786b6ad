/* SPDX-License-Identifier: MIT */
/*
 * The frameworks' segments: the configuration in force, written into the shared memory
 * that unmodified torch_npu (dynamic_profile) and MindSpore (DynamicProfilerMonitor) jobs
 * poll, so that the node's daemon drives them instead of their own polling processes
 * (npuprofd --legacy, for the frameworks' own formats).
 *
 * Their objects are named after the local hour (DynamicProfileNpuShm2026112114), and
 * torch_npu's also after the UTC hour, as its releases before September 2025 name them. Every
 * tick the publisher keeps torch_npu's objects of this hour and the next one, adopts any
 * object of its names that already exists (MindSpore's packed one only ever so: see
 * tick()), writes the newest configuration into every object it can open, refreshes the
 * change time of the objects it owns (torch_npu drops a segment whose ctime is older than
 * its start), lists the processes that map them from /proc/PID/maps, and removes an object
 * of a past hour once nothing has it open. The shm directory is watched: an object a job
 * makes is adopted, and one a job removes replaced, at once.
 *
 * Readers cannot see a torn configuration. A torch_npu rewrite first withdraws the header
 * (the object then announces nothing), waits NPF_FWSHM_SETTLE_MS so that a reader that
 * took the old header a moment before has read the body under it, writes the new body, and
 * only then stores the header that announces it (a release store). Configurations
 * published faster than that are coalesced into the newest one. MindSpore's packed struct
 * is never withdrawn: it changes a field at a time (packed_step()).
 */
#ifndef NPUPROF_DAEMON_FWSHM_H
#define NPUPROF_DAEMON_FWSHM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "npuprof/shm.h"

#define NPF_FWSHM_SIZE (1u << 20)              /* bytes of every object, as the frameworks make them */
#define NPF_FWSHM_SETTLE_MS 500u
#define NPF_FWSHM_PACKED_STEP_MS 2u            /* between two stores into MindSpore's packed struct */
#define NPF_FWSHM_REFRESH_S_DEFAULT 30u        /* the older releases drop a segment 60 s old */
#define NPF_FWSHM_OBJECTS_MAX 16u              /* per publisher: this hour, the next, and past ones */
#define NPF_FWSHM_PROCESSES_MAX 256u           /* attached processes listed per publisher */

enum {
        NPF_FWSHM_TORCH_NPU        = 1u << 0,
        NPF_FWSHM_MINDSPORE_JSON   = 1u << 1,
        NPF_FWSHM_MINDSPORE_PACKED = 1u << 2,
};

typedef struct npf_fwshm_options {
        unsigned kinds;                 /* NPF_FWSHM_* */
        gid_t group;                    /* of the objects created, mode 0660; (gid_t) -1: mode 0666 */
        unsigned refresh_s;             /* ctime refresh period */
        int64_t clock_offset_s;         /* added to the wall clock that names the hours: for tests */
        const char *shm_dir;            /* where POSIX shared memory lives: "/dev/shm" */
        const char *opener;             /* npuprof-shmopen's socket, for a job's object we may not
                                         * open (lib/shmopen.h); NULL: none */
} npf_fwshm_options_t;

typedef struct npf_fwshm npf_fwshm_t;

/*
 * npf_fwshm_parse_kinds() - "torch_npu,mindspore-json" into NPF_FWSHM_* bits. The two
 * MindSpore layouts share one object name and cannot both be on.
 * Return: 0, or -EINVAL with the reason in @err (@err_len bytes).
 */
int npf_fwshm_parse_kinds(const char *s, unsigned *ret, char *err, size_t err_len);

/* Start the publishers of @o->kinds on @loop. Return: 0, or a negative errno. */
int npf_fwshm_new(uv_loop_t *loop, const npf_fwshm_options_t *o, npf_fwshm_t **ret);

/*
 * npf_fwshm_publish() - the configuration now in force, read from the watched file as
 * modified at @mtime_s (seconds since the epoch, its st_mtime: torch_npu's header), or NULL
 * when the file is broken (every layout keeps the last good one). Written at once where no
 * body was written in the last NPF_FWSHM_SETTLE_MS, else when that time is up.
 */
void npf_fwshm_publish(npf_fwshm_t *l, const npf_shm_config_t *c, int64_t mtime_s);

/* Each publisher, its objects and the processes that map them, for `npuprofctl status`. */
json_t *npf_fwshm_status_json(const npf_fwshm_t *l);

/* Stop; the objects jobs map stay for them and for the next daemon, ours that nothing has
 * open are removed. Accepts NULL. */
void npf_fwshm_close(npf_fwshm_t *l);

#endif /* NPUPROF_DAEMON_FWSHM_H */
