/* SPDX-License-Identifier: MIT */
/* libFuzzer: the snapshot reader, then the replay and the analyses of whatever it accepted. */
#include "replay/analysis.h"
#include "replay/snapshot.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char err[NPF_SNAPSHOT_ERR_MAX > NPF_REPLAY_ERR_MAX ? NPF_SNAPSHOT_ERR_MAX : NPF_REPLAY_ERR_MAX];
        npf_analysis_opts_t o = { .top = 4, .max_frames = 4 };
        npf_snapshot_t *s;
        int64_t *devices;

        if (npf_snapshot_loadb(data, size, NULL, NULL, &s, err) < 0)
                return 0;
        size_t nd = npf_replay_devices(s, &devices);
        for (size_t k = 0; k < nd && k < 4; k++) {
                npf_replay_t *r;
                npf_replay_state_t *st;
                if (npf_replay_run(s, devices[k], k % 2 == 1, &r, err) < 0)
                        continue;
                json_decref(npf_analysis_device(s, r, &o));
                if (npf_replay_state_at(s, r, r->n ? (int64_t) r->n / 2 : -1, &st) == 0)
                        npf_state_free(st);
                npf_replay_free(r);
        }
        free(devices);
        npf_snapshot_free(s);
        return 0;
}
