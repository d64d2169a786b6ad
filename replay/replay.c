/* SPDX-License-Identifier: MIT */
/* Undoing a device's trace: a hash map of live blocks and a sorted array of segments. */
#include "replay/replay.h"
#include "replay/beside.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- live blocks: address -> life, open addressing with backward-shift deletion ------------ */

#define PENDING (UINT64_C(1) << 63)

typedef struct slot {
        uint64_t addr;
        uint64_t life;          /* index + 1, | PENDING; 0: empty */
} slot_t;

typedef struct blockmap {
        slot_t *slots;
        size_t cap, n;
} blockmap_t;

static size_t hash_addr(uint64_t a)
{
        a ^= a >> 33;
        a *= UINT64_C(0xff51afd7ed558ccd);
        a ^= a >> 33;
        return (size_t) a;
}

static slot_t *map_find(const blockmap_t *m, uint64_t addr)
{
        size_t mask = m->cap - 1;

        if (!m->cap)
                return NULL;
        for (size_t i = hash_addr(addr) & mask;; i = (i + 1) & mask) {
                if (!m->slots[i].life)
                        return NULL;
                if (m->slots[i].addr == addr)
                        return &m->slots[i];
        }
}

static int map_grow(blockmap_t *m)
{
        blockmap_t g = { .cap = m->cap ? m->cap * 2 : 1024 };

        if (!(g.slots = calloc(g.cap, sizeof(*g.slots))))
                return -ENOMEM;
        for (size_t i = 0; i < m->cap; i++) {
                if (!m->slots[i].life)
                        continue;
                size_t j = hash_addr(m->slots[i].addr) & (g.cap - 1);
                while (g.slots[j].life)
                        j = (j + 1) & (g.cap - 1);
                g.slots[j] = m->slots[i];
        }
        g.n = m->n;
        free(m->slots);
        *m = g;
        return 0;
}

static int map_put(blockmap_t *m, uint64_t addr, uint64_t life)
{
        if ((m->n + 1) * 2 > m->cap && map_grow(m) < 0)
                return -ENOMEM;
        size_t mask = m->cap - 1, i = hash_addr(addr) & mask;
        while (m->slots[i].life)
                i = (i + 1) & mask;
        m->slots[i] = (slot_t) { addr, life };
        m->n++;
        return 0;
}

static void map_del(blockmap_t *m, slot_t *s)
{
        size_t mask = m->cap - 1, i = (size_t) (s - m->slots), j = i;

        /* Shift later members of the probe run back so that no lookup stops early. */
        for (;;) {
                j = (j + 1) & mask;
                if (!m->slots[j].life)
                        break;
                size_t home = hash_addr(m->slots[j].addr) & mask;
                if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
                        m->slots[i] = m->slots[j];
                        i = j;
                }
        }
        m->slots[i] = (slot_t) { 0 };
        m->n--;
}

/* Room in the array at @*p (@*cap elements of @size bytes) for element @n: doubled from
 * @first when full. Return: 0 or -ENOMEM. */
static int room(void **p, size_t *cap, size_t n, size_t size, size_t first)
{
        if (n < *cap)
                return 0;
        size_t c = *cap ? *cap * 2 : first;
        void *q = realloc(*p, c * size);
        if (!q)
                return -ENOMEM;
        *p = q;
        *cap = c;
        return 0;
}

/* --- segments: sorted by address ---------------------------------------------------------- */

typedef struct segs {
        npf_replay_range_t *v;
        size_t n, cap;
} segs_t;

/* The index of the first segment at or above @addr. */
static size_t seg_lower(const segs_t *s, uint64_t addr)
{
        size_t lo = 0, hi = s->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (s->v[mid].addr < addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static int seg_insert_at(segs_t *s, size_t i, npf_replay_range_t r)
{
        if (room((void **) &s->v, &s->cap, s->n, sizeof(*s->v), 64) < 0)
                return -ENOMEM;
        memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof(*s->v));
        s->v[i] = r;
        s->n++;
        return 0;
}

static void seg_remove_at(segs_t *s, size_t i)
{
        memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof(*s->v));
        s->n--;
}

/* The segment holding [addr, addr + size), or SIZE_MAX. */
static size_t seg_containing(const segs_t *s, uint64_t addr, uint64_t size)
{
        size_t i = seg_lower(s, addr + 1);

        if (i == 0)
                return SIZE_MAX;
        const npf_replay_range_t *g = &s->v[i - 1];
        return addr >= g->addr && addr - g->addr <= g->size && size <= g->size - (addr - g->addr) ? i - 1 : SIZE_MAX;
}

/* --- the undo ------------------------------------------------------------------------------- */

typedef struct undo {
        const npf_snapshot_t *snap;
        npf_replay_t *r;
        blockmap_t blocks;
        segs_t segs;
        npf_replay_life_t *lives;
        size_t n_lives, cap_lives;
        size_t *spare;                  /* unrecorded: lives no block holds any longer, for reuse */
        size_t n_spare, cap_spare;
        uint64_t allocated, requested, active, active_requested, reserved;     /* as npf_replay_t says */
        npf_rounding_t rounding;
        size_t inferred, unsized;
        bool strict, record;
        char *err;
} undo_t;

static int issue(undo_t *u, size_t index, const npf_mem_event_t *e, const char *fmt, ...)
{
        char what[112];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        if (u->strict) {
                snprintf(u->err, NPF_REPLAY_ERR_MAX, "device %" PRId64 ", event %zu (%s at 0x%" PRIx64 "): %s",
                         u->r->device, index, npf_action_name(e->action), e->addr, what);
                return -EINVAL;
        }
        if (!u->record)
                return 0;
        npf_replay_t *r = u->r;
        if (r->n_issues < NPF_REPLAY_ISSUES_KEPT) {
                if (!r->issues && !(r->issues = calloc(NPF_REPLAY_ISSUES_KEPT, sizeof(*r->issues))))
                        return -ENOMEM;
                npf_issue_t *is = &r->issues[r->n_issues];
                *is = (npf_issue_t) { .index = index, .action = e->action, .addr = e->addr };
                memcpy(is->what, what, sizeof(what));
        }
        r->n_issues++;
        return 0;
}

/*
 * A life to be kept (recorded), or one that lasts only while its block is live (not
 * recorded: npf_replay_state_at()'s undo wants the blocks live at one index, and a life
 * no block holds any longer is taken again instead of the undo growing an array as long
 * as the replay's).
 */
static int64_t new_life(undo_t *u, npf_replay_life_t l)
{
        if (!u->record && u->n_spare) {
                size_t id = u->spare[--u->n_spare];
                u->lives[id] = l;
                return (int64_t) id;
        }
        if (room((void **) &u->lives, &u->cap_lives, u->n_lives, sizeof(*u->lives), 1024) < 0)
                return -ENOMEM;
        u->lives[u->n_lives] = l;
        return (int64_t) u->n_lives++;
}

/* Life @id, held by no block now, for new_life() to take again: unrecorded undos only. */
static int drop_life(undo_t *u, size_t id)
{
        if (u->record)
                return 0;
        if (room((void **) &u->spare, &u->cap_spare, u->n_spare, sizeof(*u->spare), 256) < 0)
                return -ENOMEM;
        u->spare[u->n_spare++] = id;
        return 0;
}

/* A block live at dump time (or re-created by an undone free). */
static int add_block(undo_t *u, npf_replay_life_t l, bool pending)
{
        int64_t id = new_life(u, l);

        if (id < 0)
                return (int) id;
        if (map_find(&u->blocks, l.addr))
                return drop_life(u, (size_t) id) < 0 ? -ENOMEM : 1;
        if (map_put(&u->blocks, l.addr, ((uint64_t) id + 1) | (pending ? PENDING : 0)) < 0)
                return -ENOMEM;
        u->active += l.footprint;
        u->active_requested += l.size;
        if (!pending) {
                u->allocated += l.footprint;
                u->requested += l.size;
        }
        return 0;
}

static int add_segment(undo_t *u, npf_replay_range_t g, bool merge)
{
        size_t i = seg_lower(&u->segs, g.addr);
        int r;

        if ((i < u->segs.n && u->segs.v[i].addr < g.addr + g.size) ||
            (i > 0 && u->segs.v[i - 1].addr + u->segs.v[i - 1].size > g.addr))
                return 1;       /* overlaps */
        if ((r = seg_insert_at(&u->segs, i, g)) < 0)
                return r;
        u->reserved += g.size;
        if (!merge)
                return 0;
        npf_replay_range_t *v = u->segs.v;
        if (i + 1 < u->segs.n && v[i].addr + v[i].size == v[i + 1].addr && v[i].stream == v[i + 1].stream) {
                v[i].size += v[i + 1].size;
                seg_remove_at(&u->segs, i + 1);
        }
        if (i > 0 && v[i - 1].addr + v[i - 1].size == v[i].addr && v[i - 1].stream == v[i].stream) {
                v[i - 1].size += v[i].size;
                seg_remove_at(&u->segs, i);
        }
        return 0;
}

static int undo_event(undo_t *u, size_t i)
{
        const npf_mem_event_t *e = &u->r->events[i];
        npf_replay_life_t *l;
        slot_t *s;
        size_t k, life;
        int r;

        switch ((npf_mem_action_t) e->action) {
        case NPF_MEM_ALLOC:
                if (!(s = map_find(&u->blocks, e->addr)))
                        return issue(u, i, e, "alloc of a block that is not live later (never freed, not in the "
                                     "snapshot)");
                life = (s->life & ~PENDING) - 1;
                l = &u->lives[life];
                if (s->life & PENDING) {
                        if ((r = issue(u, i, e, "alloc of a block whose free was requested but never traced")) < 0)
                                return r;
                        l->free_requested = (int64_t) i;
                } else {
                        u->allocated -= l->footprint;
                        u->requested -= l->size;
                }
                u->active -= l->footprint;
                u->active_requested -= l->size;
                l->alloc = (int64_t) i;
                if (e->stack)
                        l->stack = e->stack;
                if (e->context)
                        l->context = e->context;
                map_del(&u->blocks, s);
                if (e->size && e->size != l->size &&
                    (r = issue(u, i, e, "alloc of %" PRIu64 " bytes for a block of %" PRIu64, e->size, l->size)) < 0)
                        return r;
                return drop_life(u, life);
        case NPF_MEM_FREE_REQUESTED:
                if (!(s = map_find(&u->blocks, e->addr)))
                        return issue(u, i, e, "free_requested of a block that is not live");
                if (!(s->life & PENDING))
                        return issue(u, i, e, "free_requested of a block that is allocated, not pending free");
                s->life &= ~PENDING;
                l = &u->lives[s->life - 1];
                l->free_requested = (int64_t) i;
                u->allocated += l->footprint;
                u->requested += l->size;
                return 0;
        case NPF_MEM_FREE_COMPLETED:
        case NPF_MEM_FREE: {
                bool completed = e->action == NPF_MEM_FREE_COMPLETED;
                npf_replay_life_t nl = {
                        /* The free's stack is where it was freed: the site is unknown until
                         * its alloc event, if it has one, says (torch_npu's gradients, made by
                         * the autograd engine, have none and would all be put down to zero_grad). */
                        .addr = e->addr, .size = e->size,
                        .footprint = npf_rounding_block_size(u->rounding, e->size), .stream = e->stream,
                        .context = e->context, .alloc = NPF_BEFORE_TRACE,
                        .free_requested = completed ? NPF_BEFORE_TRACE : (int64_t) i, .freed = (int64_t) i,
                };
                if ((r = add_block(u, nl, completed)) < 0)
                        return r;
                if (r > 0) {
                        if (u->record)
                                u->n_lives--;
                        return issue(u, i, e, "%s of a block that is still live after it", npf_action_name(e->action));
                }
                if (u->rounding == NPF_ROUNDING_UNKNOWN)
                        u->unsized++;
                else
                        u->inferred++;
                return 0;
        }
        case NPF_MEM_SEGMENT_FREE:
        case NPF_MEM_SEGMENT_UNMAP:
                if ((r = add_segment(u, (npf_replay_range_t) { e->addr, e->size, e->stream },
                                     e->action == NPF_MEM_SEGMENT_UNMAP)) > 0)
                        return issue(u, i, e, "%s of %" PRIu64 " bytes overlapping a live segment",
                                     npf_action_name(e->action), e->size);
                return r;
        case NPF_MEM_SEGMENT_ALLOC:
                k = seg_lower(&u->segs, e->addr);
                if (k == u->segs.n || u->segs.v[k].addr != e->addr)
                        return issue(u, i, e, "segment_alloc of a segment that does not exist later");
                u->reserved -= u->segs.v[k].size;
                if (u->segs.v[k].size != e->size)
                        r = issue(u, i, e, "segment_alloc of %" PRIu64 " bytes for a segment of %" PRIu64, e->size,
                                  u->segs.v[k].size);
                else
                        r = 0;
                seg_remove_at(&u->segs, k);
                return r;
        case NPF_MEM_SEGMENT_MAP: {
                if ((k = seg_containing(&u->segs, e->addr, e->size)) == SIZE_MAX)
                        return issue(u, i, e, "segment_map of %" PRIu64 " bytes outside every segment", e->size);
                npf_replay_range_t *g = &u->segs.v[k];
                uint64_t end = e->addr + e->size, g_end = g->addr + g->size;
                u->reserved -= e->size;
                if (g->addr == e->addr) {
                        g->addr = end;
                        g->size -= e->size;
                        if (g->size == 0)
                                seg_remove_at(&u->segs, k);
                } else if (g_end == end) {
                        g->size -= e->size;
                } else {
                        npf_replay_range_t tail = { end, g_end - end, g->stream };
                        g->size = e->addr - g->addr;
                        return seg_insert_at(&u->segs, k + 1, tail);
                }
                return 0;
        }
        default:
                return 0;
        }
}

/* The first event of a trace after torch_npu's leading workspace triples, which it adds. */
static int add_workspace(undo_t *u, bool count)
{
        const npf_mem_event_t *ev = u->r->events;
        size_t i = 0;
        int r;

        while (i + 2 < u->r->n && ev[i].action == NPF_MEM_WORKSPACE_SNAPSHOT &&
               ev[i + 1].action == NPF_MEM_SEGMENT_ALLOC && ev[i + 2].action == NPF_MEM_ALLOC) {
                const npf_mem_event_t *sa = &ev[i + 1], *a = &ev[i + 2];
                size_t k = seg_lower(&u->segs, sa->addr);
                if (k == u->segs.n || u->segs.v[k].addr != sa->addr) {
                        if ((r = add_segment(u, (npf_replay_range_t) { sa->addr, sa->size, sa->stream }, false)) < 0)
                                return r;
                        if (r == 0 && count) {
                                u->r->workspace_segments++;
                                u->r->workspace_bytes += sa->size;
                        }
                }
                if (!map_find(&u->blocks, a->addr)) {
                        npf_replay_life_t l = { .addr = a->addr, .size = sa->size, .footprint = sa->size,
                                         .stream = sa->stream, .stack = a->stack,
                                         .alloc = NPF_BEFORE_TRACE, .free_requested = NPF_AFTER_TRACE,
                                         .freed = NPF_AFTER_TRACE };
                        if ((r = add_block(u, l, false)) < 0)
                                return r;
                }
                i += 3;
        }
        if (count)
                u->r->workspace_events = i;
        return 0;
}

/* The state at dump time: the device's segments and live blocks, and the workspace. */
static int dump_state(undo_t *u, bool count)
{
        const npf_snapshot_t *s = u->snap;
        int r;

        for (size_t i = 0; i < s->n_segments; i++) {
                const npf_segment_t *g = &s->segments[i];
                if (g->device != u->r->device)
                        continue;
                if ((r = add_segment(u, (npf_replay_range_t) { g->addr, g->total, g->stream }, false)) < 0)
                        return r;
                if (r > 0 && (r = issue(u, 0, &(npf_mem_event_t) { .action = NPF_MEM_SNAPSHOT, .addr = g->addr },
                                        "segment %zu overlaps another segment in the snapshot", i)) < 0)
                        return r;
                for (size_t b = g->first_block; b < g->first_block + g->n_blocks; b++) {
                        const npf_block_t *blk = &s->blocks[b];
                        if (blk->state == NPF_BLOCK_INACTIVE)
                                continue;
                        bool pending = blk->state == NPF_BLOCK_PENDING_FREE;
                        npf_replay_life_t l = { .addr = blk->addr, .size = blk->requested, .footprint = blk->size,
                                         .stream = g->stream,
                                         .stack = blk->stack, .alloc = NPF_BEFORE_TRACE,
                                         .free_requested = pending ? NPF_BEFORE_TRACE : NPF_AFTER_TRACE,
                                         .freed = NPF_AFTER_TRACE };
                        if ((r = add_block(u, l, pending)) < 0)
                                return r;
                        if (r > 0 && count)
                                u->r->unheld++;
                }
        }
        return add_workspace(u, count);
}

static void undo_fini(undo_t *u)
{
        free(u->blocks.slots);
        free(u->segs.v);
        free(u->lives);
        free(u->spare);
}

/* --- the allocator's rounding ---------------------------------------------------------- */

uint64_t npf_rounding_block_size(npf_rounding_t rule, uint64_t size)
{
        switch (rule) {
        case NPF_ROUNDING_TORCH_NPU:
                /* torch_npu's NPUCachingAllocator: kMinBlockSize 512 past a 32-byte tail. */
                return (size + 32 + 511) / 512 * 512;
        case NPF_ROUNDING_PYTORCH:
                /* PyTorch's CUDACachingAllocator round_size(): kMinBlockSize 512. */
                return size < 512 ? 512 : (size + 511) / 512 * 512;
        default:
                return size;
        }
}

const char *npf_rounding_name(npf_rounding_t rule)
{
        return rule == NPF_ROUNDING_TORCH_NPU ? "torch_npu" : rule == NPF_ROUNDING_PYTORCH ? "pytorch" : NULL;
}

npf_rounding_t npf_replay_rounding(const npf_snapshot_t *s, size_t *ret_blocks, size_t *ret_obeying)
{
        size_t blocks = 0, npu = 0, pt = 0;

        for (size_t i = 0; i < s->n_blocks; i++) {
                const npf_block_t *b = &s->blocks[i];
                if (b->state == NPF_BLOCK_INACTIVE)
                        continue;
                blocks++;
                npu += b->size == npf_rounding_block_size(NPF_ROUNDING_TORCH_NPU, b->requested);
                pt += b->size == npf_rounding_block_size(NPF_ROUNDING_PYTORCH, b->requested);
        }
        if (ret_blocks)
                *ret_blocks = blocks;
        if (ret_obeying)
                *ret_obeying = npu >= pt ? npu : pt;
        if (npu == 0 && pt == 0)
                return NPF_ROUNDING_UNKNOWN;
        return npu >= pt ? NPF_ROUNDING_TORCH_NPU : NPF_ROUNDING_PYTORCH;
}

size_t npf_replay_devices(const npf_snapshot_t *s, int64_t **ret)
{
        size_t n = 0, cap = s->n_traces + s->n_segments + 1;
        int64_t *d = malloc(cap * sizeof(*d));

        if (!d) {
                *ret = NULL;
                return 0;
        }
        for (size_t i = 0; i < s->n_traces; i++)
                if (s->traces[i].n)
                        d[n++] = (int64_t) i;
        for (size_t i = 0; i < s->n_segments; i++) {
                bool seen = false;
                for (size_t j = 0; j < n && !seen; j++)
                        seen = d[j] == s->segments[i].device;
                if (!seen)
                        d[n++] = s->segments[i].device;
        }
        /* Few devices: insertion sort. */
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && d[j - 1] > d[j]; j--) {
                        int64_t t = d[j];
                        d[j] = d[j - 1];
                        d[j - 1] = t;
                }
        *ret = d;
        return n;
}

static void trace_of(const npf_snapshot_t *s, npf_replay_t *r)
{
        if (r->device >= 0 && (size_t) r->device < s->n_traces) {
                r->events = s->events + s->traces[r->device].first;
                r->n = s->traces[r->device].n;
        }
}

/*
 * The per-event counts are written once each, from the last event back, while the undo
 * runs on one core: their pages are mapped on another, from the same end and a piece at
 * a time ahead of it, so that the undo does not stop on a fault every 512 events.
 */
#define PREFAULT_EVENTS ((size_t) 16384)       /* 128 KiB of each of the four */

static void *prefault_counts(void *userdata)
{
        const npf_replay_t *r = userdata;
        uint64_t *const counts[] = { r->allocated, r->requested, r->active, r->reserved };

        for (size_t end = r->n; end > 0;) {
                size_t from = end > PREFAULT_EVENTS ? end - PREFAULT_EVENTS : 0;
                for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
                        npf_prefault(counts[k] + from, (end - from) * sizeof(uint64_t));
                end = from;
        }
        return NULL;
}

int npf_replay_run(const npf_snapshot_t *s, int64_t device, bool strict, npf_replay_t **ret, char *err)
{
        npf_replay_t *r = calloc(1, sizeof(*r));
        undo_t u = { .snap = s, .r = r, .strict = strict, .record = true, .err = err };
        npf_beside_t prefault = { .threaded = false };
        int e = -ENOMEM;

        if (!r)
                return -ENOMEM;
        r->device = device;
        trace_of(s, r);
        if (r->n && (!(r->allocated = malloc(r->n * sizeof(uint64_t))) ||
                     !(r->requested = malloc(r->n * sizeof(uint64_t))) ||
                     !(r->active = malloc(r->n * sizeof(uint64_t))) ||
                     !(r->reserved = malloc(r->n * sizeof(uint64_t)))))
                goto fail;
        if (r->n)
                npf_beside_start(&prefault, prefault_counts, r);
        r->rounding = u.rounding = npf_replay_rounding(s, &r->rounding_blocks, &r->rounding_obeying);
        if ((e = dump_state(&u, true)) < 0)
                goto fail;
        r->dump_allocated = u.allocated;
        r->dump_requested = u.requested;
        r->dump_active = u.active;
        r->dump_active_requested = u.active_requested;
        r->dump_reserved = u.reserved;
        r->dump_segments = u.segs.n;
        for (size_t i = r->n; i-- > 0;) {
                r->allocated[i] = u.allocated;
                r->requested[i] = u.requested;
                r->active[i] = u.active;
                r->reserved[i] = u.reserved;
                if ((e = undo_event(&u, i)) < 0)
                        goto fail;
        }
        r->start_allocated = u.allocated;
        r->start_requested = u.requested;
        r->start_active = u.active;
        r->start_active_requested = u.active_requested;
        r->start_reserved = u.reserved;
        r->inferred_sizes = u.inferred;
        r->unsized = u.unsized;
        r->lives = u.lives;
        r->n_lives = u.n_lives;
        u.lives = NULL;
        undo_fini(&u);
        npf_beside_wait(&prefault);
        *ret = r;
        return 0;
fail:
        if (e == -ENOMEM)
                snprintf(err, NPF_REPLAY_ERR_MAX, "out of memory");
        npf_beside_wait(&prefault);
        undo_fini(&u);
        npf_replay_free(r);
        return e;
}

npf_replay_t *npf_replay_free(npf_replay_t *r)
{
        if (!r)
                return NULL;
        free(r->allocated);
        free(r->requested);
        free(r->active);
        free(r->reserved);
        free(r->lives);
        free(r->issues);
        free(r);
        return NULL;
}

static int cmp_live(const void *a, const void *b)
{
        const npf_replay_live_t *x = a, *y = b;
        return x->life.addr < y->life.addr ? -1 : x->life.addr > y->life.addr;
}

static bool segment_event(const npf_mem_event_t *e)
{
        return e->action == NPF_MEM_SEGMENT_ALLOC || e->action == NPF_MEM_SEGMENT_FREE ||
               e->action == NPF_MEM_SEGMENT_MAP || e->action == NPF_MEM_SEGMENT_UNMAP;
}

/* Just after event @index, of @l: live (its free not undone yet, its alloc undone already,
 * the undo going back). */
static bool live_at(const npf_replay_life_t *l, int64_t index)
{
        return l->alloc <= index && l->freed > index;
}

/*
 * The state just after event @index: the trace undone again from dump time down to it, or,
 * @from_lives, only its segment events, the blocks then read from @r's lives (pending once
 * their free was requested).
 */
static int state_at(const npf_snapshot_t *s, const npf_replay_t *r, int64_t index, bool from_lives,
                    npf_replay_state_t **ret)
{
        npf_replay_t shadow = { .device = r->device, .events = r->events, .n = r->n };
        undo_t u = { .snap = s, .r = &shadow, .record = false, .rounding = r->rounding };
        npf_replay_state_t *st = NULL;
        size_t n = 0;
        int e;

        if (index < -1 || (index >= 0 && (size_t) index >= r->n))
                return -EINVAL;
        if ((e = dump_state(&u, false)) < 0)
                goto out;
        for (size_t i = r->n; i-- > (size_t) (index + 1);)
                if ((!from_lives || segment_event(&r->events[i])) && (e = undo_event(&u, i)) < 0)
                        goto out;
        for (size_t i = 0; from_lives && i < r->n_lives; i++)
                n += live_at(&r->lives[i], index);
        e = -ENOMEM;
        if (!(st = calloc(1, sizeof(*st))) || !(st->live = malloc(((from_lives ? n : u.blocks.n) + 1) * sizeof(*st->live))))
                goto out;
        for (size_t i = 0; from_lives && i < r->n_lives; i++) {
                const npf_replay_life_t *l = &r->lives[i];
                if (live_at(l, index))
                        st->live[st->n_blocks++] = (npf_replay_live_t) { *l, l->free_requested <= index };
        }
        for (size_t i = 0; !from_lives && i < u.blocks.cap; i++) {
                if (!u.blocks.slots[i].life)
                        continue;
                const npf_replay_life_t *l = &u.lives[(u.blocks.slots[i].life & ~PENDING) - 1];
                st->live[st->n_blocks++] = (npf_replay_live_t) { *l, (u.blocks.slots[i].life & PENDING) != 0 };
        }
        qsort(st->live, st->n_blocks, sizeof(*st->live), cmp_live);
        st->segments = u.segs.v;
        st->n_segments = u.segs.n;
        u.segs.v = NULL;
        *ret = st;
        st = NULL;
        e = 0;
out:
        undo_fini(&u);
        npf_state_free(st);
        return e;
}

int npf_replay_state_at(const npf_snapshot_t *s, const npf_replay_t *r, int64_t index, npf_replay_state_t **ret)
{
        return state_at(s, r, index, false, ret);
}

int npf_replay_footprint_at(const npf_snapshot_t *s, const npf_replay_t *r, int64_t index, npf_replay_state_t **ret)
{
        /* An inconsistency breaks the lives' account of which blocks were live when. */
        return state_at(s, r, index, r->n_issues == 0 && r->unheld == 0, ret);
}

npf_replay_state_t *npf_state_free(npf_replay_state_t *st)
{
        if (!st)
                return NULL;
        free(st->segments);
        free(st->live);
        free(st);
        return NULL;
}
