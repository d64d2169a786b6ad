/* SPDX-License-Identifier: MIT */
/*
 * Runtime backends of the rank library: what collects during a window. The rank library
 * drives them; a backend only collects and writes files into the window directory.
 *
 *   probe()         may this backend run here? (acl: can the CANN runtime be loaded)
 *   window_open()   at the start of the window's first step
 *   window_step()   at the start of each later step of the window
 *   window_close()  after the window's last step, or when it is cut short
 *   shutdown()      when the rank closes (acl: aclprofFinalize)
 *
 * Every function returns 0 or -errno; on failure it writes a readable reason into @err
 * (NPF_BACKEND_ERR_MAX bytes). A backend never prints.
 */
#ifndef NPUPROF_RANK_BACKEND_H
#define NPUPROF_RANK_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "npuprof/shm.h"

#define NPF_BACKEND_ERR_MAX 256

/* What a backend is told when a window opens. */
typedef struct npf_backend_window {
        const char *dir;                /* the window directory, created and empty */
        const npf_shm_args_t *args;     /* level, activities, aic_metrics, flags, ... */
        int64_t  rank;
        int32_t  local_device;          /* -1 when unknown: device 0 */
        int64_t  first_step;
        int64_t  last_step;             /* NPF_STEP_NONE for a timed window */
        /* An empty object, the window's "runtime" in its manifest: what the backend asked of
         * the runtime and what the runtime refused. The rank library owns it and keeps it until
         * the manifest is written, after window_close(); a backend may fill it until then. */
        json_t  *runtime;
} npf_backend_window_t;

typedef struct npf_backend_ops {
        const char *name;               /* "acl", "host" */
        int  (*probe)(char *err);
        int  (*window_open)(void **ret_state, const npf_backend_window_t *w, char *err);
        int  (*window_step)(void *state, int64_t step, char *err);
        /* @complete is false when the window was cut short. Frees @state whatever it returns. */
        int  (*window_close)(void *state, int64_t last_step, bool complete, char *err);
        void (*shutdown)(void);
} npf_backend_ops_t;

extern const npf_backend_ops_t npf_backend_host;
extern const npf_backend_ops_t npf_backend_acl;

#endif /* NPUPROF_RANK_BACKEND_H */
