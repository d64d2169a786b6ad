/* SPDX-License-Identifier: MIT */
/*
 * Reading a snapshot: the value tree's reduce callback turns trace entries, frames, stacks
 * and blocks into records the moment they are complete, so that only the handful of
 * segment dictionaries are still a tree when the document ends.
 */
#include "replay/snapshot.h"
#include "replay/beside.h"
#include "replay/input.h"
#include "replay/jsontree.h"
#include "replay/pickle.h"
#include "replay/value.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum record_kind {
        R_EVENT = 1,
        R_FRAME,
        R_STACK,
        R_BLOCK,
};

#define SEEN_KEYS 256u             /* a power of two */
#define SEEN_KEYS_PROBE 8u

typedef struct loader {
        npf_snapshot_t *s;
        npf_intern_t *in;
        npf_mem_event_t *events;
        size_t n_events, cap_events;
        size_t prefault_from;           /* where the records after those reserved begin */
        npf_block_t *blocks;            /* as read; npf_snapshot_t.blocks is in segment order */
        bool *block_has_addr;
        size_t n_blocks, cap_blocks;
        uint32_t *frames;               /* scratch for a stack's frame ids */
        size_t cap_frames;
        struct seen_action {            /* the action strings are memoized: remember where */
                const char *s;
                uint32_t len;
                npf_mem_action_t kind;
        } seen_actions[16];
        size_t n_seen_actions;
        struct seen_key {               /* so are the keys: where each was last seen */
                const char *s;
                uint32_t len;
                uint8_t key;
        } seen_keys[SEEN_KEYS];
} loader_t;

/* The keys the reduce callback looks at. */
enum key {
        K_OTHER,
        K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_DEVICE_FREE, K_TIME_US, K_FRAMES, K_COMPILE_CONTEXT,
        K_USER_METADATA, K_FILENAME, K_LINE, K_STATE, K_NAME, K_ADDRESS, K_REQUESTED_SIZE, K_HISTORY,
        K__COUNT
};

static const char *const key_names[K__COUNT] = {
        [K_ACTION] = "action", [K_ADDR] = "addr", [K_SIZE] = "size", [K_STREAM] = "stream",
        [K_DEVICE_FREE] = "device_free", [K_TIME_US] = "time_us", [K_FRAMES] = "frames",
        [K_COMPILE_CONTEXT] = "compile_context", [K_USER_METADATA] = "user_metadata",
        [K_FILENAME] = "filename", [K_LINE] = "line", [K_STATE] = "state", [K_NAME] = "name",
        [K_ADDRESS] = "address", [K_REQUESTED_SIZE] = "requested_size", [K_HISTORY] = "history",
};

/* The values of the keys above in one dict, read in one pass; a later duplicate wins. */
typedef struct fields {
        const npf_value_t *v;   /* K__COUNT of them, by key */
        unsigned present;       /* 1 << key */
} fields_t;

_Static_assert(K__COUNT <= NPF_PICKLE_DIRECT_KEYS, "the keys are numbered for the pickle reader's direct path");

static bool field(const fields_t *f, enum key k, npf_value_t *ret)
{
        if (!(f->present & 1u << k))
                return false;
        *ret = f->v[k];
        return true;
}

/* The key named @s (@len bytes), K_OTHER for one not read. */
static enum key key_named(const char *s, size_t len)
{
        for (int i = K_OTHER + 1; i < K__COUNT; i++)
                if (strlen(key_names[i]) == len && memcmp(key_names[i], s, len) == 0)
                        return (enum key) i;
        return K_OTHER;
}

/* Which key @k is. A pickle names each key by the same bytes every time (the memo hands out
 * the first copy), so a string seen at the same address is not compared again; the few
 * addresses a snapshot uses are kept in a small open-addressed table. */
static enum key key_of(loader_t *l, npf_value_t k)
{
        if (k.kind != NPF_V_STR)
                return K_OTHER;
        size_t h = (size_t) (((uintptr_t) k.as.s * UINT64_C(0x9e3779b97f4a7c15)) >> 56);
        struct seen_key *c = NULL;
        for (size_t i = 0; i < SEEN_KEYS_PROBE; i++) {
                c = &l->seen_keys[(h + i) & (SEEN_KEYS - 1)];
                if (c->s == k.as.s && c->len == k.len)
                        return (enum key) c->key;
                if (!c->s)
                        break;
        }
        enum key key = key_named(k.as.s, k.len);
        *c = (struct seen_key) { k.as.s, k.len, (uint8_t) key };
        return key;
}

static const char *const action_names[NPF_MEM__COUNT] = {
        [NPF_MEM_ALLOC] = "alloc",
        [NPF_MEM_FREE_REQUESTED] = "free_requested",
        [NPF_MEM_FREE_COMPLETED] = "free_completed",
        [NPF_MEM_FREE] = "free",
        [NPF_MEM_SEGMENT_ALLOC] = "segment_alloc",
        [NPF_MEM_SEGMENT_FREE] = "segment_free",
        [NPF_MEM_SEGMENT_MAP] = "segment_map",
        [NPF_MEM_SEGMENT_UNMAP] = "segment_unmap",
        [NPF_MEM_OOM] = "oom",
        [NPF_MEM_SNAPSHOT] = "snapshot",
        [NPF_MEM_WORKSPACE_SNAPSHOT] = "workspace_snapshot",
        [NPF_MEM_UNKNOWN] = "unknown",
};

const char *npf_action_name(npf_mem_action_t a)
{
        return a < NPF_MEM__COUNT ? action_names[a] : "unknown";
}

static int say(char *err, int r, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(err, NPF_SNAPSHOT_ERR_MAX, fmt, ap);
        va_end(ap);
        return r;
}

static npf_value_t record(enum record_kind k, uint64_t id)
{
        return (npf_value_t) { .kind = NPF_V_RECORD, .rkind = (uint16_t) k, .as.u = id };
}

static bool is_record(npf_value_t v, enum record_kind k)
{
        return v.kind == NPF_V_RECORD && v.rkind == k;
}

static npf_mem_action_t action_of(loader_t *l, npf_value_t v)
{
        for (size_t i = 0; i < l->n_seen_actions; i++)
                if (l->seen_actions[i].s == v.as.s && l->seen_actions[i].len == v.len)
                        return l->seen_actions[i].kind;
        npf_mem_action_t a = NPF_MEM_UNKNOWN;
        for (int i = 0; i < NPF_MEM_UNKNOWN; i++)
                if (npf_value_streq(v, action_names[i]))
                        a = (npf_mem_action_t) i;
        if (l->n_seen_actions < sizeof(l->seen_actions) / sizeof(l->seen_actions[0]))
                l->seen_actions[l->n_seen_actions++] = (struct seen_action) { v.as.s, v.len, a };
        return a;
}

static int get_u64_other(npf_value_t v, const char *key, const char *what, size_t idx, uint64_t *ret, char *err);

/* A key's value as an unsigned integer; @what and @idx name the place in messages. */
static inline int get_u64(npf_value_t v, const char *key, const char *what, size_t idx, uint64_t *ret, char *err)
{
        if (v.kind == NPF_V_INT && !v.flags) {         /* nearly always */
                *ret = (uint64_t) v.as.i;
                return 0;
        }
        return get_u64_other(v, key, what, idx, ret, err);
}

static int get_u64_other(npf_value_t v, const char *key, const char *what, size_t idx, uint64_t *ret, char *err)
{
        int64_t i;

        if (npf_value_uint64(v, ret))
                return 0;
        /* Streams and pool ids may be negative handles: keep their bits. */
        if (npf_value_int64(v, &i)) {
                *ret = (uint64_t) i;
                return 0;
        }
        return say(err, -EINVAL, "%s %zu: %s is %s%s, not an integer", what, idx, key,
                   v.kind == NPF_V_INT ? "an integer wider than 64 bits" : "a ",
                   v.kind == NPF_V_INT ? "" : npf_value_kind_name(v));
}

static int intern_str(loader_t *l, npf_value_t v, const char *key, const char *what, size_t idx, uint32_t *ret,
                      char *err)
{
        if (v.kind == NPF_V_NONE) {
                *ret = 0;
                return 0;
        }
        if (v.kind != NPF_V_STR)
                return say(err, -EINVAL, "%s %zu: %s is a %s, not a str", what, idx, key, npf_value_kind_name(v));
        int64_t id = npf_intern_string(l->in, v.as.s, v.len);
        if (id < 0)
                return say(err, (int) id, "out of memory");
        *ret = (uint32_t) id;
        return 0;
}

/* A "frames" value: a stack record, an empty list, or None. */
static int stack_of(npf_value_t v, const char *what, size_t idx, uint32_t *ret, char *err)
{
        if (is_record(v, R_STACK)) {
                *ret = (uint32_t) v.as.u;
                return 0;
        }
        if (v.kind == NPF_V_NONE || ((v.kind == NPF_V_LIST || v.kind == NPF_V_TUPLE) && npf_value_len(v) == 0)) {
                *ret = 0;
                return 0;
        }
        return say(err, -EINVAL, "%s %zu: frames is a %s, not a list of frames", what, idx, npf_value_kind_name(v));
}

static int time_of(npf_value_t v, size_t idx, int64_t *ret, char *err)
{
        double d;

        if (npf_value_int64(v, ret))
                return 0;
        if (npf_value_double(v, &d) && d > -9.2e18 && d < 9.2e18) {
                *ret = (int64_t) d;
                return 0;
        }
        if (v.kind == NPF_V_NONE) {
                *ret = NPF_TIME_UNKNOWN;
                return 0;
        }
        return say(err, -EINVAL, "trace entry %zu: time_us is a %s, not a number", idx, npf_value_kind_name(v));
}

/* Room for @n events in all. Return: 0 or -ENOMEM. */
static int events_room(loader_t *l, size_t n)
{
        size_t cap = l->cap_events ? l->cap_events : 4096;

        if (n <= l->cap_events)
                return 0;
        while (cap < n)
                cap *= 2;
        npf_mem_event_t *p = realloc(l->events, cap * sizeof(*p));
        if (!p)
                return -ENOMEM;
        l->events = p;
        l->cap_events = cap;
        return 0;
}

static int reduce_event(loader_t *l, const fields_t *f, npf_value_t *ret, char *err)
{
        size_t idx = l->n_events;
        npf_mem_event_t e = { .time_us = NPF_TIME_UNKNOWN };
        npf_value_t v;
        int r;

        if (events_room(l, idx + 1) < 0)
                return say(err, -ENOMEM, "out of memory");
        e.action = (uint8_t) action_of(l, f->v[K_ACTION]);
        if (field(f, K_ADDR, &v) && (r = get_u64(v, "addr", "trace entry", idx, &e.addr, err)) < 0)
                return r;
        if (field(f, K_DEVICE_FREE, &v) && (r = get_u64(v, "device_free", "trace entry", idx, &e.addr, err)) < 0)
                return r;
        if (field(f, K_SIZE, &v) && (r = get_u64(v, "size", "trace entry", idx, &e.size, err)) < 0)
                return r;
        if (field(f, K_STREAM, &v) && (r = get_u64(v, "stream", "trace entry", idx, &e.stream, err)) < 0)
                return r;
        if (field(f, K_TIME_US, &v) && (r = time_of(v, idx, &e.time_us, err)) < 0)
                return r;
        if (field(f, K_FRAMES, &v) && (r = stack_of(v, "trace entry", idx, &e.stack, err)) < 0)
                return r;
        if (field(f, K_COMPILE_CONTEXT, &v) &&
            (r = intern_str(l, v, "compile_context", "trace entry", idx, &e.context, err)) < 0)
                return r;
        if (field(f, K_USER_METADATA, &v) &&
            (r = intern_str(l, v, "user_metadata", "trace entry", idx, &e.user, err)) < 0)
                return r;
        l->events[l->n_events++] = e;
        *ret = record(R_EVENT, idx);
        return 1;
}

static int reduce_frame(loader_t *l, const fields_t *f, npf_value_t *ret, char *err)
{
        npf_frame_t fr = { 0 };
        npf_value_t v;
        int64_t id;
        int r;

        if (field(f, K_NAME, &v) && (r = intern_str(l, v, "name", "frame", 0, &fr.name, err)) < 0)
                return r;
        if ((r = intern_str(l, f->v[K_FILENAME], "filename", "frame", 0, &fr.filename, err)) < 0)
                return r;
        if (!npf_value_int64(f->v[K_LINE], &fr.line))
                return say(err, -EINVAL, "a frame's line is a %s, not an int", npf_value_kind_name(f->v[K_LINE]));
        if ((id = npf_intern_frame(l->in, fr)) < 0)
                return say(err, (int) id, "out of memory");
        *ret = record(R_FRAME, (uint64_t) id);
        return 1;
}

/* A list's @n items at @items: a stack if every one is a frame. */
static int reduce_frames(loader_t *l, const npf_value_t *items, size_t n, npf_value_t *ret, char *err)
{
        int64_t id;

        if (n > l->cap_frames) {
                uint32_t *p = realloc(l->frames, n * sizeof(*p));
                if (!p)
                        return say(err, -ENOMEM, "out of memory");
                l->frames = p;
                l->cap_frames = n;
        }
        for (size_t i = 0; i < n; i++) {
                npf_value_t f = npf_value_resolve(items[i]);
                if (!is_record(f, R_FRAME))
                        return 0;       /* not a list of frames: leave it */
                l->frames[i] = (uint32_t) f.as.u;
        }
        if ((id = npf_intern_stack(l->in, l->frames, n)) < 0)
                return say(err, (int) id, "out of memory");
        *ret = record(R_STACK, (uint64_t) id);
        return 1;
}

static int reduce_stack(loader_t *l, npf_value_t list, npf_value_t *ret, char *err)
{
        return reduce_frames(l, npf_value_items(list), npf_value_len(list), ret, err);
}

static int reduce_block(loader_t *l, const fields_t *f, npf_value_t *ret, char *err)
{
        size_t idx = l->n_blocks;
        npf_block_t b = { 0 };
        bool has_addr = false;
        npf_value_t v;
        int r;

        if (idx == l->cap_blocks) {
                size_t cap = l->cap_blocks ? l->cap_blocks * 2 : 1024;
                npf_block_t *p = realloc(l->blocks, cap * sizeof(*p));
                if (!p)
                        return say(err, -ENOMEM, "out of memory");
                l->blocks = p;
                bool *q = realloc(l->block_has_addr, cap * sizeof(*q));
                if (!q)
                        return say(err, -ENOMEM, "out of memory");
                l->block_has_addr = q;
                l->cap_blocks = cap;
        }
        if ((field(f, K_ADDRESS, &v) || field(f, K_ADDR, &v)) && v.kind != NPF_V_NONE) {
                if ((r = get_u64(v, "address", "block", idx, &b.addr, err)) < 0)
                        return r;
                has_addr = true;
        }
        if ((r = get_u64(f->v[K_SIZE], "size", "block", idx, &b.size, err)) < 0)
                return r;
        b.requested = b.size;
        if (field(f, K_REQUESTED_SIZE, &v) &&
            (r = get_u64(v, "requested_size", "block", idx, &b.requested, err)) < 0)
                return r;
        if (field(f, K_STATE, &v)) {
                if (npf_value_streq(v, "active_allocated"))
                        b.state = NPF_BLOCK_ALLOCATED;
                else if (npf_value_streq(v, "active_pending_free") || npf_value_streq(v, "active_awaiting_free"))
                        b.state = NPF_BLOCK_PENDING_FREE;
                else if (npf_value_streq(v, "inactive"))
                        b.state = NPF_BLOCK_INACTIVE;
                else
                        return say(err, -EINVAL, "block %zu: state is not active_allocated, active_pending_free or "
                                   "inactive", idx);
        }
        if (field(f, K_FRAMES, &v) && (r = stack_of(v, "block", idx, &b.stack, err)) < 0)
                return r;
        /* Legacy snapshots keep the stack in the block's history, newest last. */
        if (b.stack == 0 && field(f, K_HISTORY, &v) && npf_value_len(v) > 0) {
                npf_value_t h = npf_value_at(v, npf_value_len(v) - 1), frames;
                if (npf_value_get(h, "frames", &frames) && (r = stack_of(frames, "block", idx, &b.stack, err)) < 0)
                        return r;
        }
        l->blocks[idx] = b;
        l->block_has_addr[idx] = has_addr;
        l->n_blocks++;
        *ret = record(R_BLOCK, idx);
        return 1;
}

/* What a dict is, by shape, since a container does not know where it sits: action (a str)
 * makes an entry; filename and line a frame; state and size a block. */
static int reduce_fields(loader_t *l, const fields_t *f, npf_value_t *ret, char *err)
{
#define HAS(k) (f->present & 1u << (k))
        if (HAS(K_ACTION) && f->v[K_ACTION].kind == NPF_V_STR)
                return reduce_event(l, f, ret, err);
        if (HAS(K_FILENAME) && HAS(K_LINE))
                return reduce_frame(l, f, ret, err);
        if (HAS(K_STATE) && HAS(K_SIZE))
                return reduce_block(l, f, ret, err);
#undef HAS
        return 0;
}

/* The reduce callback: a list of frames makes a stack; a dict's keys are read in one pass. */
static int reduce(void *userdata, const npf_value_t *v, npf_value_t *ret, char *err, size_t err_size)
{
        loader_t *l = userdata;
        npf_value_t by_key[K__COUNT];
        fields_t f = { by_key, 0 };

        (void) err_size;        /* every message here is at most NPF_SNAPSHOT_ERR_MAX <= err_size */
        if (v->kind == NPF_V_LIST || v->kind == NPF_V_TUPLE)
                return npf_value_len(*v) > 0 && is_record(npf_value_at(*v, 0), R_FRAME) ? reduce_stack(l, *v, ret, err)
                                                                                      : 0;
        if (v->kind != NPF_V_DICT)
                return 0;
        const npf_value_t *items = npf_value_items(*v);
        for (size_t i = 0, n = npf_value_len(*v); i < n; i++) {
                enum key key = key_of(l, npf_value_resolve(items[2 * i]));
                by_key[key] = npf_value_resolve(items[2 * i + 1]);
                f.present |= 1u << key;
        }
        return reduce_fields(l, &f, ret, err);
}

/* The pickle reader's direct path (npf_pickle_direct_t): a trace entry read without being
 * built, its keys numbered as key_of() numbers them. */
static unsigned direct_key(void *userdata, const char *s, size_t len)
{
        (void) userdata;
        return key_named(s, len);
}

/* A list of records: reduce() makes a stack of one whose first record is a frame. */
static int direct_list(void *userdata, const npf_value_t *items, size_t n, npf_value_t *ret, char *err,
                       size_t err_size)
{
        (void) err_size;
        return is_record(npf_value_resolve(items[0]), R_FRAME) ? reduce_frames(userdata, items, n, ret, err) : 0;
}

/* A batch's entries are events, blocks or segments: room for each to be an event. */
static int direct_reserve(void *userdata, size_t n)
{
        loader_t *l = userdata;

        if (events_room(l, l->n_events + n) < 0)
                return -ENOMEM;
        l->prefault_from = l->n_events + n;
        return 0;
}

static void direct_prefault(void *userdata, size_t n)
{
        const loader_t *l = userdata;
        size_t to = l->prefault_from + n < l->cap_events ? l->prefault_from + n : l->cap_events;

        if (l->prefault_from < to)
                npf_prefault(&l->events[l->prefault_from], (to - l->prefault_from) * sizeof(*l->events));
}

static int direct_dict(void *userdata, const npf_value_t *pairs, size_t n, const npf_value_t *by_key,
                       uint32_t present, npf_value_t *ret, char *err, size_t err_size)
{
        fields_t f = { by_key, present };

        (void) pairs;
        (void) n;
        (void) err_size;
        return reduce_fields(userdata, &f, ret, err);
}

/* --- the document ------------------------------------------------------------------------- */

static int read_segment(loader_t *l, npf_value_t d, size_t idx, npf_segment_t *seg, char *err)
{
        npf_snapshot_t *s = l->s;
        npf_value_t v, blocks;
        int r;

        if (d.kind != NPF_V_DICT)
                return say(err, -EINVAL, "segments[%zu] is a %s, not a dict", idx, npf_value_kind_name(d));
        *seg = (npf_segment_t) { .first_block = s->n_blocks };
        static const struct {
                const char *key;
                size_t off;
        } ints[] = {
                { "address", offsetof(npf_segment_t, addr) },
                { "total_size", offsetof(npf_segment_t, total) },
                { "allocated_size", offsetof(npf_segment_t, allocated) },
                { "active_size", offsetof(npf_segment_t, active) },
                { "requested_size", offsetof(npf_segment_t, requested) },
                { "stream", offsetof(npf_segment_t, stream) },
        };
        for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
                if (npf_value_get(d, ints[i].key, &v) &&
                    (r = get_u64(v, ints[i].key, "segment", idx, (uint64_t *) ((char *) seg + ints[i].off), err)) < 0)
                        return r;
        if (npf_value_get(d, "device", &v) && !npf_value_int64(v, &seg->device))
                return say(err, -EINVAL, "segment %zu: device is a %s, not an int", idx, npf_value_kind_name(v));
        if (npf_value_get(d, "segment_type", &v) && (r = intern_str(l, v, "segment_type", "segment", idx, &seg->type,
                                                                   err)) < 0)
                return r;
        if (npf_value_get(d, "is_expandable", &v))
                seg->expandable = v.kind == NPF_V_BOOL && v.as.i;
        if (npf_value_get(d, "frames", &v) && (r = stack_of(v, "segment", idx, &seg->stack, err)) < 0)
                return r;
        if (!npf_value_get(d, "blocks", &blocks))
                return 0;
        if (blocks.kind != NPF_V_LIST && blocks.kind != NPF_V_TUPLE)
                return say(err, -EINVAL, "segment %zu: blocks is a %s, not a list", idx, npf_value_kind_name(blocks));
        size_t n = npf_value_len(blocks);
        uint64_t addr = seg->addr;
        npf_block_t *p = realloc(s->blocks, (s->n_blocks + n + 1) * sizeof(*p));
        if (!p)
                return say(err, -ENOMEM, "out of memory");
        s->blocks = p;
        for (size_t i = 0; i < n; i++) {
                npf_value_t b = npf_value_at(blocks, i);
                if (!is_record(b, R_BLOCK))
                        return say(err, -EINVAL, "segment %zu: blocks[%zu] is a %s, not a block", idx, i,
                                   npf_value_kind_name(b));
                npf_block_t blk = l->blocks[b.as.u];
                /* A block without an address follows the one before it. */
                if (!l->block_has_addr[b.as.u])
                        blk.addr = addr;
                addr = blk.addr + blk.size;
                s->blocks[s->n_blocks++] = blk;
        }
        seg->n_blocks = n;
        return 0;
}

static int read_segments(loader_t *l, npf_value_t list, char *err)
{
        npf_snapshot_t *s = l->s;
        size_t n = npf_value_len(list);
        int r;

        if (list.kind != NPF_V_LIST && list.kind != NPF_V_TUPLE)
                return say(err, -EINVAL, "segments is a %s, not a list", npf_value_kind_name(list));
        if (!(s->segments = calloc(n + 1, sizeof(*s->segments))))
                return say(err, -ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
                if ((r = read_segment(l, npf_value_at(list, i), i, &s->segments[i], err)) < 0)
                        return r;
                s->n_segments++;
        }
        return 0;
}

/* Each device's entries, in order; copied unless they already lie back to back. */
static int read_traces(loader_t *l, npf_value_t traces, char *err)
{
        npf_snapshot_t *s = l->s;
        size_t nd = npf_value_len(traces), total = 0;
        bool in_place = true;
        size_t next = 0;

        if (traces.kind != NPF_V_LIST && traces.kind != NPF_V_TUPLE)
                return say(err, -EINVAL, "device_traces is a %s, not a list", npf_value_kind_name(traces));
        if (!(s->traces = calloc(nd + 1, sizeof(*s->traces))))
                return say(err, -ENOMEM, "out of memory");
        s->n_traces = nd;
        for (size_t d = 0; d < nd; d++) {
                npf_value_t t = npf_value_at(traces, d);
                size_t n = npf_value_len(t);
                if (t.kind != NPF_V_LIST && t.kind != NPF_V_TUPLE)
                        return say(err, -EINVAL, "device_traces[%zu] is a %s, not a list", d, npf_value_kind_name(t));
                for (size_t i = 0; i < n; i++) {
                        npf_value_t e = npf_value_at(t, i);
                        if (!is_record(e, R_EVENT))
                                return say(err, -EINVAL, "device_traces[%zu][%zu] is a %s, not a trace entry (a dict "
                                           "with an action)", d, i, npf_value_kind_name(e));
                        if (e.as.u != next + i)
                                in_place = false;
                }
                s->traces[d] = (npf_device_trace_t) { .first = total, .n = n };
                next += n;
                total += n;
        }
        if (in_place && total == l->n_events) {
                s->events = l->events;
                s->n_events = total;
                l->events = NULL;
                return 0;
        }
        if (!(s->events = malloc((total + 1) * sizeof(*s->events))))
                return say(err, -ENOMEM, "out of memory");
        for (size_t d = 0; d < nd; d++) {
                npf_value_t t = npf_value_at(traces, d);
                for (size_t i = 0; i < s->traces[d].n; i++)
                        s->events[s->traces[d].first + i] = l->events[npf_value_at(t, i).as.u];
        }
        s->n_events = total;
        return 0;
}

/* A small subtree as JSON (allocator_settings): records and bytes become null. */
static json_t *to_json(npf_value_t v, int depth)
{
        json_t *j;
        npf_value_t k, x;
        int64_t i;
        double f;

        if (depth > 16)
                return json_null();
        switch (v.kind) {
        case NPF_V_BOOL:
                return json_boolean(v.as.i);
        case NPF_V_INT:
                return npf_value_int64(v, &i) ? json_integer(i) : npf_value_double(v, &f) ? json_real(f) : json_null();
        case NPF_V_FLOAT:
                return json_real(v.as.f);
        case NPF_V_STR:
                return (j = json_stringn(v.as.s, v.len)) ? j : json_null();
        case NPF_V_LIST:
        case NPF_V_TUPLE:
        case NPF_V_SET:
                j = json_array();
                for (size_t n = 0; n < npf_value_len(v); n++)
                        json_array_append_new(j, to_json(npf_value_at(v, n), depth + 1));
                return j;
        case NPF_V_DICT:
                j = json_object();
                for (size_t n = 0; npf_value_pair(v, n, &k, &x); n++) {
                        char key[128];
                        if (k.kind == NPF_V_STR)
                                snprintf(key, sizeof(key), "%.*s", (int) (k.len < 127 ? k.len : 127), k.as.s);
                        else
                                snprintf(key, sizeof(key), "%s", npf_value_kind_name(k));
                        json_object_set_new(j, key, to_json(x, depth + 1));
                }
                return j;
        default:
                return json_null();
        }
}

static int read_document(loader_t *l, npf_value_t root, char *err)
{
        npf_snapshot_t *s = l->s;
        npf_value_t v;
        int r;

        if (root.kind == NPF_V_LIST) {
                s->legacy = true;
                return read_segments(l, root, err);
        }
        if (root.kind != NPF_V_DICT)
                return say(err, -EINVAL, "the document is a %s; a snapshot is a dict with segments and device_traces, "
                           "or a list of segments", npf_value_kind_name(root));
        if (!npf_value_get(root, "segments", &v) && !npf_value_get(root, "device_traces", &v))
                return say(err, -EINVAL, "the document is a dict without segments or device_traces: not a memory "
                           "snapshot");
        if (npf_value_get(root, "segments", &v) && (r = read_segments(l, v, err)) < 0)
                return r;
        if (npf_value_get(root, "device_traces", &v) && (r = read_traces(l, v, err)) < 0)
                return r;
        if (npf_value_get(root, "allocator_settings", &v) && v.kind == NPF_V_DICT)
                s->allocator_settings = to_json(v, 0);
        if (npf_value_get(root, "external_annotations", &v))
                s->n_annotations = npf_value_len(v);
        return 0;
}

int npf_snapshot_loadb(const void *buf, size_t len, npf_input_progress_cb progress, void *userdata,
                       npf_snapshot_t **ret, char *err)
{
        return npf_snapshot_loadb_flags(buf, len, 0, progress, userdata, ret, err);
}

int npf_snapshot_loadb_flags(const void *buf, size_t len, unsigned flags, npf_input_progress_cb progress,
                             void *userdata, npf_snapshot_t **ret, char *err)
{
        loader_t l = { 0 };
        npf_vtree_t *tree = NULL;
        npf_value_t root;
        const char *p = buf;
        size_t i = 0;
        int r;

        err[0] = '\0';
        if (!(l.s = calloc(1, sizeof(*l.s))) || !(l.in = npf_intern_new()) || !(tree = npf_vtree_new(reduce, &l))) {
                r = say(err, -ENOMEM, "out of memory");
                goto out;
        }
        l.s->intern = l.in;
        l.s->input_bytes = len;
        while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
                i++;
        if (i < len && (p[i] == '{' || p[i] == '[')) {
                l.s->format = "json";
                r = npf_jsontree_load(buf, len, tree, progress, userdata, &root, err, NPF_SNAPSHOT_ERR_MAX);
        } else if (len >= 2 && (unsigned char) p[0] == 0x80) {
                l.s->format = "pickle";
                /* A dict with an action (a str) is a trace entry, whatever else it holds. */
                const npf_pickle_direct_t direct = {
                        .key = direct_key, .dict = direct_dict, .list = direct_list, .reserve = direct_reserve,
                        .prefault = direct_prefault, .userdata = &l,
                        .required = 1u << K_ACTION, .strings = 1u << K_ACTION, .lists = 1u << K_FRAMES,
                };
                r = npf_pickle_load_direct(buf, len, tree, flags, &direct, progress, userdata, &root, err);
        } else {
                r = say(err, -EINVAL, "neither a pickle (it would start with byte 0x80) nor JSON");
        }
        if (r == 0)
                r = read_document(&l, root, err);
out:
        npf_vtree_free(tree);
        free(l.events);
        free(l.blocks);
        free(l.block_has_addr);
        free(l.frames);
        if (r < 0) {
                if (l.s && !l.s->intern)
                        npf_intern_free(l.in);
                npf_snapshot_free(l.s);
                return r;
        }
        *ret = l.s;
        return 0;
}

int npf_snapshot_load(const char *path, npf_input_progress_cb progress, void *userdata, npf_snapshot_t **ret,
                      char *err)
{
        void *map;
        size_t len;
        int r = npf_input_map(path, &map, &len, err, NPF_SNAPSHOT_ERR_MAX);

        if (r < 0)
                return r;
        r = npf_snapshot_loadb(map, len, progress, userdata, ret, err);
        npf_input_unmap(map, len);
        return r;
}

npf_snapshot_t *npf_snapshot_free(npf_snapshot_t *s)
{
        if (!s)
                return NULL;
        free(s->segments);
        free(s->blocks);
        free(s->events);
        free(s->traces);
        npf_intern_free(s->intern);
        json_decref(s->allocator_settings);
        free(s);
        return NULL;
}
