/* SPDX-License-Identifier: MIT */
#include "replay/split.h"
#include "replay/pickle-out.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t npf_split_pieces(const npf_snapshot_t *s, size_t slices, size_t max_entries)
{
        size_t most = 0, n;

        for (size_t d = 0; d < s->n_traces; d++)
                most = s->traces[d].n > most ? s->traces[d].n : most;
        n = slices ? slices : max_entries ? (most + max_entries - 1) / max_entries : 1;
        return n < 1 ? 1 : n > NPF_SPLIT_PIECES_MAX ? NPF_SPLIT_PIECES_MAX : n;
}

/* The first entry of share @k of @n entries cut into @pieces. */
static size_t share_start(size_t n, size_t k, size_t pieces)
{
        return (size_t) ((unsigned __int128) n * k / pieces);
}

/* The names a piece's pickle memoises its stacks and frames by (npf_pout_put()). */
#define NAME_STACK (UINT64_C(1) << 32)
#define NAME_FRAME (UINT64_C(2) << 32)

/* A stack of frames, written once in a piece and referred to after, as torch's own pickles
 * share a list between the entries of one tensor: a piece repeats the same few thousand. */
static void frames(npf_pout_t *p, const npf_snapshot_t *s, uint32_t stack)
{
        const uint32_t *ids;
        size_t n;

        if (npf_pout_get(p, NAME_STACK | stack))
                return;
        n = npf_intern_stack_get(s->intern, stack, &ids);
        npf_pout_list(p);
        for (size_t i = 0; i < n; i++) {
                const npf_frame_t *f = npf_intern_frame_get(s->intern, ids[i]);
                if (!f || npf_pout_get(p, NAME_FRAME | ids[i]))
                        continue;
                npf_pout_dict(p);
                npf_pout_str(p, "name");
                npf_pout_str(p, npf_intern_str(s->intern, f->name));
                npf_pout_str(p, "filename");
                npf_pout_str(p, npf_intern_str(s->intern, f->filename));
                npf_pout_str(p, "line");
                npf_pout_int(p, f->line);
                npf_pout_close_dict(p);
                npf_pout_put(p, NAME_FRAME | ids[i]);
        }
        npf_pout_close_list(p);
        npf_pout_put(p, NAME_STACK | stack);
}

static void block(npf_pout_t *p, const npf_snapshot_t *s, uint64_t addr, uint64_t size, uint64_t requested,
                  const char *state, uint32_t stack)
{
        npf_pout_dict(p);
        npf_pout_str(p, "address");
        npf_pout_uint(p, addr);
        npf_pout_str(p, "size");
        npf_pout_uint(p, size);
        npf_pout_str(p, "requested_size");
        npf_pout_uint(p, requested);
        npf_pout_str(p, "state");
        npf_pout_str(p, state);
        npf_pout_str(p, "frames");
        frames(p, s, stack);
        npf_pout_close_dict(p);
}

/* A segment's keys before its blocks; the caller writes the blocks and closes the list and the dict. */
typedef struct seg_head {
        int64_t device;
        uint64_t addr, total, stream, allocated, active, requested;
        const char *type;
        bool expandable;
        uint32_t stack;
} seg_head_t;

static void segment_open(npf_pout_t *p, const npf_snapshot_t *s, const seg_head_t *h)
{
        npf_pout_dict(p);
        npf_pout_str(p, "device");
        npf_pout_int(p, h->device);
        npf_pout_str(p, "address");
        npf_pout_uint(p, h->addr);
        npf_pout_str(p, "total_size");
        npf_pout_uint(p, h->total);
        npf_pout_str(p, "stream");
        npf_pout_uint(p, h->stream);
        npf_pout_str(p, "segment_type");
        npf_pout_str(p, h->type);
        npf_pout_str(p, "allocated_size");
        npf_pout_uint(p, h->allocated);
        npf_pout_str(p, "active_size");
        npf_pout_uint(p, h->active);
        npf_pout_str(p, "requested_size");
        npf_pout_uint(p, h->requested);
        npf_pout_str(p, "is_expandable");
        npf_pout_bool(p, h->expandable);
        npf_pout_str(p, "frames");
        frames(p, s, h->stack);
        npf_pout_str(p, "blocks");
        npf_pout_list(p);
}

/* What the device's segments at dump time say of a segment at @addr: its type and expandability. */
static const npf_segment_t *dump_segment(const npf_snapshot_t *s, int64_t device, uint64_t addr, bool *ret_expandable)
{
        const npf_segment_t *at = NULL;

        *ret_expandable = false;
        for (size_t i = 0; i < s->n_segments; i++) {
                if (s->segments[i].device != device)
                        continue;
                *ret_expandable |= s->segments[i].expandable;
                if (s->segments[i].addr == addr)
                        at = &s->segments[i];
        }
        return at;
}

/* The segments of @st, each with its blocks: the live ones, and inactive ones in the gaps. */
static void state_segments(npf_pout_t *p, const npf_snapshot_t *s, int64_t device, const npf_replay_state_t *st)
{
        size_t b = 0;

        for (size_t i = 0; i < st->n_segments; i++) {
                const npf_replay_range_t *g = &st->segments[i];
                uint64_t end = g->addr + g->size, cur = g->addr, allocated = 0, active = 0, requested = 0;
                bool expandable;
                const npf_segment_t *was = dump_segment(s, device, g->addr, &expandable);
                size_t first;

                while (b < st->n_blocks && st->live[b].life.addr < g->addr)
                        b++;
                for (first = b; b < st->n_blocks && st->live[b].life.addr < end; b++) {
                        const npf_replay_life_t *l = &st->live[b].life;
                        active += l->footprint;
                        requested += l->size;
                        if (!st->live[b].pending)
                                allocated += l->footprint;
                }
                segment_open(p, s, &(seg_head_t) {
                        .device = device, .addr = g->addr, .total = g->size, .stream = g->stream,
                        .allocated = allocated, .active = active, .requested = requested,
                        .type = was && was->type ? npf_intern_str(s->intern, was->type) : "large",
                        .expandable = expandable, .stack = was ? was->stack : 0,
                });
                for (size_t k = first; k < b; k++) {
                        const npf_replay_life_t *l = &st->live[k].life;
                        if (l->addr < cur)
                                continue;       /* overlapping a block before it: left out */
                        if (l->addr > cur)
                                block(p, s, cur, l->addr - cur, 0, "inactive", 0);
                        uint64_t size = l->footprint < end - l->addr ? l->footprint : end - l->addr;
                        block(p, s, l->addr, size, l->size,
                              st->live[k].pending ? "active_pending_free" : "active_allocated", l->stack);
                        cur = l->addr + size;
                }
                if (cur < end)
                        block(p, s, cur, end - cur, 0, "inactive", 0);
                npf_pout_close_list(p);
                npf_pout_close_dict(p);
        }
}

/* The dump-time segments of @device, as the snapshot has them. */
static void dump_segments(npf_pout_t *p, const npf_snapshot_t *s, int64_t device)
{
        for (size_t i = 0; i < s->n_segments; i++) {
                const npf_segment_t *g = &s->segments[i];
                if (g->device != device)
                        continue;
                segment_open(p, s, &(seg_head_t) {
                        .device = device, .addr = g->addr, .total = g->total, .stream = g->stream,
                        .allocated = g->allocated, .active = g->active, .requested = g->requested,
                        .type = g->type ? npf_intern_str(s->intern, g->type) : "large",
                        .expandable = g->expandable, .stack = g->stack,
                });
                for (size_t b = g->first_block; b < g->first_block + g->n_blocks; b++) {
                        const npf_block_t *k = &s->blocks[b];
                        block(p, s, k->addr, k->size, k->state == NPF_BLOCK_INACTIVE ? 0 : k->requested,
                              k->state == NPF_BLOCK_ALLOCATED      ? "active_allocated"
                              : k->state == NPF_BLOCK_PENDING_FREE ? "active_pending_free"
                                                                   : "inactive",
                              k->stack);
                }
                npf_pout_close_list(p);
                npf_pout_close_dict(p);
        }
}

static void event(npf_pout_t *p, const npf_snapshot_t *s, const npf_mem_event_t *e)
{
        npf_pout_dict(p);
        npf_pout_str(p, "action");
        npf_pout_str(p, npf_action_name(e->action));
        if (e->action == NPF_MEM_OOM) {
                npf_pout_str(p, "device_free");
                npf_pout_uint(p, e->addr);
        } else {
                npf_pout_str(p, "addr");
                npf_pout_uint(p, e->addr);
        }
        npf_pout_str(p, "size");
        npf_pout_uint(p, e->size);
        npf_pout_str(p, "stream");
        npf_pout_uint(p, e->stream);
        if (e->time_us != NPF_TIME_UNKNOWN) {
                npf_pout_str(p, "time_us");
                npf_pout_int(p, e->time_us);
        }
        npf_pout_str(p, "frames");
        frames(p, s, e->stack);
        npf_pout_close_dict(p);
}

int npf_split_piece(FILE *f, const npf_snapshot_t *s, npf_replay_t *const *replays, size_t n, size_t k,
                    size_t pieces, char *err)
{
        npf_replay_state_t **states = calloc(n + 1, sizeof(*states));
        npf_pout_t p;
        int r = 0;

        if (!states) {
                snprintf(err, NPF_SPLIT_ERR_MAX, "out of memory");
                return -ENOMEM;
        }
        /* Each traced device's state after the last entry of its share. */
        for (size_t d = 0; d < n && r == 0; d++) {
                if (!replays[d]->n)
                        continue;
                size_t end = share_start(replays[d]->n, k + 1, pieces);
                r = npf_replay_state_at(s, replays[d], (int64_t) end - 1, &states[d]);
        }
        if (r < 0) {
                snprintf(err, NPF_SPLIT_ERR_MAX, "the state of piece %zu: %s", k + 1, strerror(-r));
                goto out;
        }
        npf_pout_begin(&p, f);
        npf_pout_dict(&p);
        npf_pout_str(&p, "segments");
        npf_pout_list(&p);
        for (size_t d = 0; d < n; d++) {
                if (states[d])
                        state_segments(&p, s, replays[d]->device, states[d]);
                else
                        dump_segments(&p, s, replays[d]->device);
        }
        npf_pout_close_list(&p);
        npf_pout_str(&p, "device_traces");
        npf_pout_list(&p);
        for (size_t dev = 0; dev < s->n_traces; dev++) {
                const npf_device_trace_t *t = &s->traces[dev];
                npf_pout_list(&p);
                for (size_t i = share_start(t->n, k, pieces); i < share_start(t->n, k + 1, pieces); i++)
                        event(&p, s, &s->events[t->first + i]);
                npf_pout_close_list(&p);
        }
        npf_pout_close_list(&p);
        npf_pout_close_dict(&p);
        if ((r = npf_pout_end(&p)) < 0)
                snprintf(err, NPF_SPLIT_ERR_MAX, "%s", strerror(-r));
out:
        for (size_t d = 0; d < n; d++)
                npf_state_free(states[d]);
        free(states);
        return r;
}
