/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer: the snapshot reader, then the replay and the analyses of whatever it accepted.
 * A pickle is read three ways, by the pickle reader's direct path for trace entries, by its
 * batch fast path alone and by its opcodes one by one: the snapshots must be the same, or
 * the errors.
 */
#include "replay/analysis.h"
#include "replay/pickle.h"
#include "replay/snapshot.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void differ(const char *what)
{
        fprintf(stderr, "the snapshot reader's paths differ: %s\n", what);
        abort();
}

/* The string @id of both, the same. */
static void same_string(const npf_snapshot_t *a, const npf_snapshot_t *b, uint32_t id)
{
        if (strcmp(npf_intern_str(a->intern, id), npf_intern_str(b->intern, id)) != 0)
                differ("a string");
}

/* Everything the replay and the analyses read of @a and @b, interned ids included. */
static void same_snapshot(const npf_snapshot_t *a, const npf_snapshot_t *b)
{
        if (a->n_segments != b->n_segments || a->n_blocks != b->n_blocks || a->n_events != b->n_events ||
            a->n_traces != b->n_traces || a->legacy != b->legacy || a->n_annotations != b->n_annotations ||
            strcmp(a->format, b->format) != 0 || !a->allocator_settings != !b->allocator_settings ||
            (a->allocator_settings && !json_equal(a->allocator_settings, b->allocator_settings)))
                differ("the counts");
        for (size_t i = 0; i < a->n_segments; i++) {
                const npf_segment_t *x = &a->segments[i], *y = &b->segments[i];
                if (x->addr != y->addr || x->total != y->total || x->allocated != y->allocated ||
                    x->active != y->active || x->requested != y->requested || x->stream != y->stream ||
                    x->device != y->device || x->stack != y->stack || x->type != y->type ||
                    x->first_block != y->first_block || x->n_blocks != y->n_blocks || x->expandable != y->expandable)
                        differ("a segment");
                same_string(a, b, x->type);
        }
        for (size_t i = 0; i < a->n_blocks; i++) {
                const npf_block_t *x = &a->blocks[i], *y = &b->blocks[i];
                if (x->addr != y->addr || x->size != y->size || x->requested != y->requested || x->stack != y->stack ||
                    x->state != y->state)
                        differ("a block");
        }
        for (size_t i = 0; i < a->n_traces; i++)
                if (a->traces[i].first != b->traces[i].first || a->traces[i].n != b->traces[i].n)
                        differ("a trace");
        for (size_t i = 0; i < a->n_events; i++) {
                const npf_mem_event_t *x = &a->events[i], *y = &b->events[i];
                if (x->addr != y->addr || x->size != y->size || x->stream != y->stream || x->time_us != y->time_us ||
                    x->stack != y->stack || x->context != y->context || x->user != y->user || x->action != y->action)
                        differ("an event");
                same_string(a, b, x->context);
                same_string(a, b, x->user);
        }
        if (npf_intern_stacks(a->intern) != npf_intern_stacks(b->intern))
                differ("the number of stacks");
        for (uint32_t id = 0; id < npf_intern_stacks(a->intern); id++) {
                const uint32_t *fa, *fb;
                size_t n = npf_intern_stack_get(a->intern, id, &fa);
                if (n != npf_intern_stack_get(b->intern, id, &fb) || (n && memcmp(fa, fb, n * sizeof(*fa)) != 0))
                        differ("a stack");
        }
        for (uint32_t id = 0;; id++) {
                const npf_frame_t *x = npf_intern_frame_get(a->intern, id), *y = npf_intern_frame_get(b->intern, id);
                if (!x != !y)
                        differ("the number of frames");
                if (!x)
                        break;
                if (x->name != y->name || x->filename != y->filename || x->line != y->line)
                        differ("a frame");
                same_string(a, b, x->name);
                same_string(a, b, x->filename);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const unsigned flags[] = { 0, NPF_PICKLE_NO_DIRECT, NPF_PICKLE_OPCODES_ONLY };
        char err[3][NPF_SNAPSHOT_ERR_MAX > NPF_REPLAY_ERR_MAX ? NPF_SNAPSHOT_ERR_MAX : NPF_REPLAY_ERR_MAX];
        npf_analysis_opts_t o = { .top = 4, .max_frames = 4 };
        npf_snapshot_t *s[3] = { NULL };
        int rc[3];
        int64_t *devices;

        for (int k = 0; k < 3; k++)
                rc[k] = npf_snapshot_loadb_flags(data, size, flags[k], NULL, NULL, &s[k], err[k]);
        for (int k = 1; k < 3; k++) {
                if (rc[k] != rc[0] || (rc[0] < 0 && strcmp(err[k], err[0]) != 0)) {
                        fprintf(stderr, "%d \"%s\" / %d \"%s\"\n", rc[0], rc[0] < 0 ? err[0] : "", rc[k],
                                rc[k] < 0 ? err[k] : "");
                        differ("the results");
                }
                if (rc[0] == 0)
                        same_snapshot(s[0], s[k]);
                npf_snapshot_free(s[k]);
        }
        if (rc[0] < 0)
                return 0;
        size_t nd = npf_replay_devices(s[0], &devices);
        for (size_t k = 0; k < nd && k < 4; k++) {
                npf_replay_t *r;
                npf_replay_state_t *st;
                if (npf_replay_run(s[0], devices[k], k % 2 == 1, &r, err[0]) < 0)
                        continue;
                json_decref(npf_analysis_device(s[0], r, &o));
                if (npf_replay_state_at(s[0], r, r->n ? (int64_t) r->n / 2 : -1, &st) == 0)
                        npf_state_free(st);
                npf_replay_free(r);
        }
        free(devices);
        npf_snapshot_free(s[0]);
        return 0;
}
