/* SPDX-License-Identifier: MIT */
#include "daemon/manifest.h"
#include "conf/conf.h"
#include "lib/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int npf_manifest_write_lost(int dfd, const npf_window_record_t *rec, const char *reason)
{
        npf_manifest_t m = {
                .rank = rec->rank,
                .pid = rec->pid ? (int64_t) rec->pid : -1,
                .generation = rec->generation,
                .start_step = rec->start_step,
                .stop_step = rec->stop_step,
                .warmup = -1,
                .last_step = rec->last_step,
                .backend = rec->backend == NPF_BACKEND_AUTO ? "none" : npf_shm_backend_name(rec->backend),
                .complete = false,
                .started_unix_ms = rec->state_ns ? (int64_t) (rec->state_ns / 1000000u) : -1,
                .ended_unix_ms = (int64_t) (rec->ended_ns / 1000000u),
                .message = reason,
                .written_by = "npuprofd",
        };
        npf_atomicfile_t f;

        /* One there already (or a link): nothing to list or write; the rename would refuse it anyway. */
        if (faccessat(dfd, "manifest.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return -EEXIST;
        /* Never over a manifest the rank wrote after all; every file of a window is its rank's. */
        return npf_manifest_write(&f, dfd, &m, "npuprofd.tmp", NPF_ATOMICFILE_NOREPLACE | NPF_ATOMICFILE_DIR_OWNER);
}
