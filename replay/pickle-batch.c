/* SPDX-License-Identifier: MIT */
#include "replay/pickle-batch.h"
#include "replay/beside.h"
#include "replay/pickle-internal.h"
#include "replay/pickle.h"
#include "replay/value.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef npf__pickle_vm_t vm_t;
typedef npf__pickle_batch_t batch_t;

/*
 * The pickle reader's batch fast path. Python writes a list of dicts (a device's trace
 * entries, a segment's blocks) in batches of up to 1,000:
 *     MARK (EMPTY_DICT MEMOIZE MARK (key value)* SETITEMS)* APPENDS
 * the keys strings, the values numbers, strings or lists (a stack of frames), the lists'
 * items memo references or flat dicts (the frames themselves). Such a batch is read here in
 * one loop, and what it holds is handed to the reduce callback from there instead of being
 * pushed value by value and built in the tree first.
 *
 * The result is the one of the opcodes run one by one: the callback is offered the same
 * containers with the same items in the same order (an entry's frames as its lists' APPENDS
 * completes them, then its lists as its SETITEMS does, then the entries as the batch's
 * APPENDS places them), and the memo ends the same. Reading first and building after is
 * exact because nothing read depends on what is built: a memo reference to a string the
 * batch memoized is served from the batch; one to a frame or a stack it read becomes an
 * alias of what that becomes, built before anything that holds the alias, as the opcodes
 * have it; anything else the batch does not know leaves it to the opcodes, before anything
 * is done.
 *
 * A batch is built on a lane (beside.h) while the reader reads the next one, and the two
 * share the tree so: the lane alone uses the tree's allocator and reduce callback, and
 * writes the memo only above the slots set before the batch it builds (in room reserved
 * beforehand: the memo does not move); the reader reads the memo only below them, and takes
 * what the batch being built memoized from that batch (a string at once, a container once
 * it is built). Before an opcode runs one by one, the reader waits for the lane.
 */
#define BATCH_SLOTS_MAX (1u << 20)      /* memo slots one batch may set */
#define BATCH_VALUES_MAX (1u << 22)     /* values, dicts or lists one batch may hold */
/* Python's batches read before the lane builds them. Two keep the batch's arrays (about
 * 600 bytes an entry, twice over) a few MiB, in cache while the lane builds them and cheap
 * to fault in on a small file; more batches a hand-over would only add fresh memory. */
#define BATCH_GROUPS_MAX 2u
#define BATCH_CONTAINER ((uint8_t) 0xfe) /* the kind of a slot the batch sets to a container */
#define BATCH_ALIAS ((uint8_t) 0xfd)    /* a list item that is one of the batch's containers */
#define BATCH_DEFERRED ((uint8_t) 0xfc) /* a container of the batch still being built, by its slot */

enum batch_ref { REF_VALUE, REF_ENTRY, REF_DICT, REF_LIST };

/* Where a memo get is: which of the batch's containers it may refer to (see batch_get()). */
enum batch_at { AT_KEY, AT_ENTRY_VALUE, AT_ITEM };

/* A memo put of the batch, made when it is built: the value, or where it will be. */
struct batch_put {
        uint64_t slot;
        uint32_t ref;           /* enum batch_ref */
        uint32_t index;         /* into entries, dicts or lists */
        npf_value_t value;      /* REF_VALUE */
};

/* A dict of the batch (an entry) or of one of its lists (a frame). */
struct batch_dict {
        uint32_t first, n;              /* its pairs: pairs[first .. first + 2n), of a frame fpairs[] */
        uint32_t at;                    /* a frame: its place in items[] */
        uint32_t first_list, n_lists;   /* an entry: its lists */
        uint32_t first_dict, n_dicts;   /* and its frames */
        bool plain;                     /* an entry whose pairs and lists' items hold no alias */
};

struct batch_list {
        uint32_t first, n;              /* its items: items[first .. first + n) */
        uint32_t at;                    /* its place in pairs[] */
};

struct npf__pickle_batch {
        npf_value_t *pairs;             /* the entries' keys and values */
        npf_value_t *fpairs;            /* the frames' */
        npf_value_t *items;             /* the lists' */
        npf_value_t *done;              /* what each entry became */
        npf_value_t *local;             /* the slots the batch puts, from first_slot: a string, or
                                         * a BATCH_CONTAINER: rkind the enum batch_ref, as.u which */
        struct batch_dict *entries, *dicts;
        struct batch_list *lists;
        struct batch_put *puts;
        size_t n_pairs, n_fpairs, n_items, n_local, n_entries, n_dicts, n_lists, n_puts;
        size_t cap_pairs, cap_fpairs, cap_items, cap_done, cap_local, cap_entries, cap_dicts, cap_lists, cap_puts;
        uint64_t first_slot;            /* the memo's length when the batch began */
        uint64_t memo_len;              /* and as the batch's puts leave it */
        uint64_t old_slots;             /* slots below are in the tree's memo, and the lane does not
                                         * write them while this batch is read */
        const npf_value_t *memo;        /* the tree's memo, which does not move while the batch is read */
        size_t n_deferred;              /* gets of what the batch before builds */
        struct batch_group {            /* MARK ... APPENDS: Python's batches of 1,000 */
                size_t end;             /* n_entries after it */
                size_t appends;         /* the offset of its APPENDS, for messages */
                bool direct;            /* its dicts go to the caller's direct reader */
        } groups[BATCH_GROUPS_MAX];
        size_t n_groups;
        /* Handed to the lane: */
        const npf_pickle_direct_t *direct;
        npf_vtree_t *tree;
        npf_value_t list;               /* what the APPENDS add to */
        size_t at;                      /* the APPENDS being built */
        int rc;
        char err[NPF_PICKLE_ERR_MAX];
};

/* How far a batch has been read: where a group that cannot be read is undone to. */
typedef struct batch_mark {
        size_t n_pairs, n_fpairs, n_items, n_local, n_entries, n_dicts, n_lists, n_puts;
        uint64_t memo_len;
} batch_mark_t;

static batch_mark_t batch_mark(const batch_t *b)
{
        return (batch_mark_t) { b->n_pairs, b->n_fpairs, b->n_items, b->n_local, b->n_entries, b->n_dicts,
                                b->n_lists, b->n_puts, b->memo_len };
}

static void batch_undo(batch_t *b, const batch_mark_t *m)
{
        b->n_pairs = m->n_pairs;
        b->n_fpairs = m->n_fpairs;
        b->n_items = m->n_items;
        b->n_local = m->n_local;
        b->n_entries = m->n_entries;
        b->n_dicts = m->n_dicts;
        b->n_lists = m->n_lists;
        b->n_puts = m->n_puts;
        b->memo_len = m->memo_len;
}

static bool __attribute__((noinline)) batch_grow(void **array, size_t *cap, size_t n, size_t size)
{
        size_t want = *cap ? *cap : 256;

        if (n > BATCH_VALUES_MAX)
                return false;
        while (want < n)
                want *= 2;
        void *p = realloc(*array, want * size);
        if (!p)
                return false;   /* left to the opcodes, which will say it */
        *array = p;
        *cap = want;
        return true;
}

/* Room for @n elements of @size bytes in @*array. Return: false if there is none. */
static inline bool batch_room(void **array, size_t *cap, size_t n, size_t size)
{
        return n <= *cap || batch_grow(array, cap, n, size);
}

/* Room for one more element in array @what of @b. */
#define ROOM(b, what) batch_room((void **) &(b)->what, &(b)->cap_##what, (b)->n_##what + 1, sizeof(*(b)->what))

/* FRAME opcodes: Python's framer puts them before a value. Each is checked as the opcodes
 * would. Return: the input after them, or NULL to leave the batch. */
static inline const uint8_t *batch_frames(const vm_t *vm, const uint8_t *q)
{
        if (q < vm->end && *q != 0x95)
                return q;
        while (q < vm->end && *q == 0x95) {
                if (vm->end - q < 9 || npf__pickle_le(q + 1, 8) > (uint64_t) (vm->end - q - 9))
                        return NULL;
                q += 9;
        }
        return q == vm->end ? NULL : q;
}

/* The memo index of the opcode at @q, if it is @op1 (a 1-byte index) or @op4 (4 bytes).
 * Return: the input after it, or NULL. */
static inline const uint8_t *memo_index(const vm_t *vm, const uint8_t *q, uint8_t op1, uint8_t op4, uint64_t *ret)
{
        if (*q == op1 && vm->end - q >= 2) {
                *ret = q[1];
                return q + 2;
        }
        if (*q == op4 && vm->end - q >= 5) {
                *ret = npf__pickle_le(q + 1, 4);
                return q + 5;
        }
        return NULL;
}

/* A memo put at @q, if there is one (MEMOIZE, BINPUT, LONG_BINPUT), of the value @ref
 * @index (@value for REF_VALUE), as memo_put() would accept it. Return: the input after it
 * (@q when there is none), or NULL to leave the batch. */
static const uint8_t *batch_put(const vm_t *vm, batch_t *b, const uint8_t *q, enum batch_ref ref, size_t index,
                                npf_value_t value)
{
        const uint8_t *after;
        uint64_t slot;

        if (q == vm->end)
                return q;
        if (*q == 0x94) {
                slot = b->memo_len;
                q += 1;
        } else if ((after = memo_index(vm, q, 'q', 'r', &slot))) {
                q = after;
        } else {
                return q;
        }
        /* A slot past those set before the batch, and set once: only the batch reads it. */
        if (slot < b->first_slot || slot - b->first_slot < b->n_local || slot - b->first_slot >= BATCH_SLOTS_MAX ||
            slot >= NPF_PICKLE_MEMO_MAX || slot > (uint64_t) (vm->end - vm->base) || !ROOM(b, puts) ||
            !batch_room((void **) &b->local, &b->cap_local, slot - b->first_slot + 1, sizeof(*b->local)))
                return NULL;
        for (; b->n_local <= slot - b->first_slot; b->n_local++)
                b->local[b->n_local] = (npf_value_t) { .kind = NPF__MEMO_UNSET };
        b->local[slot - b->first_slot] = ref == REF_VALUE ? value
                                         : (npf_value_t) { .kind = BATCH_CONTAINER, .rkind = (uint16_t) ref, .as.u = index };
        b->puts[b->n_puts++] = (struct batch_put) { .slot = slot, .ref = ref, .index = (uint32_t) index,
                                                    .value = value };
        if (slot >= b->memo_len)
                b->memo_len = slot + 1;
        return q;
}

/*
 * A memo get (BINGET, LONG_BINGET) of a value set before the batch (a container only if it
 * is complete: nothing the batch does changes it), or of a string the batch memoized. As a
 * value of an entry or an item of a list (@at), also a frame the batch read, or a list of
 * the batch (of an earlier entry, for an item): a BATCH_ALIAS of it, because by the time the
 * opcodes complete the container that holds the get, they have completed what it refers to,
 * and so will batch_build(). A slot of the batch before, still being built, is served from
 * that batch: a string at once, a container as a BATCH_DEFERRED.
 * Return: the input after it, or NULL to leave the batch.
 */
static inline const uint8_t *batch_get(vm_t *vm, batch_t *b, const uint8_t *q, npf_value_t *ret,
                                       enum batch_at at)
{
        uint64_t slot;

        if (!(q = memo_index(vm, q, 'h', 'j', &slot)))
                return NULL;
        /* Nearly always: a key, a string or a frame set long before. The memo holds every slot
         * below old_slots (see batch_read()), and the lane writes only above them. */
        if (slot < b->old_slots) {
                const npf_value_t *m = &b->memo[slot];
                if (m->kind == NPF__MEMO_UNSET)
                        return NULL;
                if (!npf__value_is_container(*m)) {
                        *ret = *m;
                        return q;
                }
                /* A container only if complete: nothing built now changes it. The opcodes mark
                 * it shared when they get it; so does this, once it is taken. */
                *ret = npf_value_resolve(*m);
                if (npf__value_is_container(*ret) && !ret->as.c->complete)
                        return NULL;
                npf_vtree_share(*m);
                return q;
        }
        if (slot < b->first_slot) {
                /* Set by the batch before, whose memo puts are made when it is built: a string
                 * now, a container once it is (see batch_resolve()). */
                const batch_t *p = vm->building;
                if (slot - p->first_slot >= p->n_local || p->local[slot - p->first_slot].kind == NPF__MEMO_UNSET)
                        return NULL;
                *ret = p->local[slot - p->first_slot];
                if (ret->kind == BATCH_CONTAINER) {
                        *ret = (npf_value_t) { .kind = BATCH_DEFERRED, .as.u = slot };
                        b->n_deferred++;
                }
                return q;
        }
        if (slot - b->first_slot >= b->n_local)
                return NULL;
        *ret = b->local[slot - b->first_slot];
        if (ret->kind == NPF__MEMO_UNSET)
                return NULL;
        if (ret->kind != BATCH_CONTAINER)
                return q;
        if (at == AT_KEY || (ret->rkind != REF_DICT && (ret->rkind != REF_LIST ||
                                                        (at == AT_ITEM && ret->as.u >= b->entries[b->n_entries].first_list))))
                return NULL;
        ret->kind = BATCH_ALIAS;
        return q;
}

/* A number, None, a boolean, a string (and its memo put) or a memo get @at. Return: as batch_get(). */
static const uint8_t *batch_scalar(vm_t *vm, batch_t *b, const uint8_t *q, npf_value_t *ret, enum batch_at at)
{
        const uint8_t *end = vm->end;
        uint8_t op = *q++;
        uint64_t u;

        switch (op) {
        case 'h':
        case 'j':
                return batch_get(vm, b, q - 1, ret, at);
        case 'K':
                if (end - q < 1)
                        return NULL;
                *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = q[0] };
                return q + 1;
        case 'M':
                if (end - q < 2)
                        return NULL;
                *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = (int64_t) npf__pickle_le(q, 2) };
                return q + 2;
        case 'J':
                if (end - q < 4)
                        return NULL;
                *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = (int32_t) (uint32_t) npf__pickle_le(q, 4) };
                return q + 4;
        case 0x8a: /* LONG1 */
                if (end - q < 1 || end - q - 1 < q[0])
                        return NULL;
                *ret = npf__pickle_long_value(q + 1, q[0]);
                return q + 1 + q[0];
        case 'G':
                if (end - q < 8)
                        return NULL;
                *ret = npf__pickle_binfloat(q);
                return q + 8;
        case 'N':
                *ret = (npf_value_t) { .kind = NPF_V_NONE };
                return q;
        case 0x88:
        case 0x89:
                *ret = (npf_value_t) { .kind = NPF_V_BOOL, .as.i = op == 0x88 };
                return q;
        case 0x8c: /* SHORT_BINUNICODE */
        case 'X':  /* BINUNICODE */
                if (end - q < (op == 0x8c ? 1 : 4))
                        return NULL;
                u = op == 0x8c ? q[0] : npf__pickle_le(q, 4);
                q += op == 0x8c ? 1 : 4;
                if (u > (uint64_t) (end - q) || u > UINT32_MAX)
                        return NULL;
                *ret = (npf_value_t) { .kind = NPF_V_STR, .len = (uint32_t) u, .as.s = (const char *) q };
                return batch_put(vm, b, q + u, REF_VALUE, 0, *ret);
        default:
                return NULL;
        }
}

/* A frame's key and value; @q at the key. Return: as batch_get(). */
static const uint8_t *batch_frame_pair(vm_t *vm, batch_t *b, const uint8_t *q)
{
        if (!batch_room((void **) &b->fpairs, &b->cap_fpairs, b->n_fpairs + 2, sizeof(*b->fpairs)) ||
            !(q = batch_scalar(vm, b, q, &b->fpairs[b->n_fpairs], AT_KEY)) || !(q = batch_frames(vm, q)))
                return NULL;
        b->n_fpairs += 2;
        return batch_scalar(vm, b, q, &b->fpairs[b->n_fpairs - 1], AT_KEY);
}

/* A frame: a dict of scalars in a list, @q at its EMPTY_DICT. Return: as batch_get(). */
static const uint8_t *batch_frame(vm_t *vm, batch_t *b, const uint8_t *q)
{
        struct batch_dict *d;

        if (!ROOM(b, dicts) || !ROOM(b, items))
                return NULL;
        d = &b->dicts[b->n_dicts];
        *d = (struct batch_dict) { .first = (uint32_t) b->n_fpairs, .at = (uint32_t) b->n_items };
        b->items[b->n_items++] = (npf_value_t) { .kind = NPF_V_DICT };    /* made when the batch is built */
        if (!(q = batch_put(vm, b, q + 1, REF_DICT, b->n_dicts, (npf_value_t) { 0 })) || q == vm->end || *q++ != '(')
                return NULL;
        while ((q = batch_frames(vm, q)) && *q != 'u')
                if (!(q = batch_frame_pair(vm, b, q)))
                        return NULL;
        if (!q)
                return NULL;
        d->n = (uint32_t) (b->n_fpairs - d->first) / 2;
        b->n_dicts++;
        return q + 1;
}

/* A list item: a memo get or a frame. Return: as batch_get(). */
static const uint8_t *batch_item(vm_t *vm, batch_t *b, const uint8_t *q)
{
        if (*q == '}')
                return batch_frame(vm, b, q);
        if (!ROOM(b, items) || !(q = batch_get(vm, b, q, &b->items[b->n_items], AT_ITEM)))
                return NULL;
        b->n_items++;
        return q;
}

/* A list, @q after its EMPTY_LIST: MARK items APPENDS, one item and APPEND, or nothing.
 * Return: as batch_get(). */
static const uint8_t *batch_list(vm_t *vm, batch_t *b, const uint8_t *q)
{
        struct batch_list *l;
        const uint8_t *r, *after;
        npf_value_t v;

        if (!ROOM(b, lists))
                return NULL;
        l = &b->lists[b->n_lists];
        *l = (struct batch_list) { .first = (uint32_t) b->n_items, .at = (uint32_t) b->n_pairs - 1 };
        if (!(q = batch_put(vm, b, q, REF_LIST, b->n_lists, (npf_value_t) { 0 })) || !(r = batch_frames(vm, q)))
                return NULL;
        if (*r == '(') {
                for (q = r + 1; (q = batch_frames(vm, q)) && *q != 'e';)
                        if (!(q = batch_item(vm, b, q)))
                                return NULL;
                if (!q)
                        return NULL;
                q++;
        } else if (*r == '}' || ((*r == 'h' || *r == 'j') && (after = batch_get(vm, b, r, &v, AT_ITEM)) && after < vm->end &&
                                 *after == 'a')) {
                if (!(q = batch_item(vm, b, r)) || q == vm->end || *q++ != 'a')
                        return NULL;
        }       /* else the empty list, and @q what follows it */
        l->n = (uint32_t) (b->n_items - l->first);
        b->n_lists++;
        return q;
}

/* The entry @e, read up to its SETITEMS (or SETITEM) at @q, counted. Return: the input after it. */
static const uint8_t *entry_end(batch_t *b, struct batch_dict *e, const uint8_t *q)
{
        e->n = (uint32_t) (b->n_pairs - e->first) / 2;
        e->n_lists = (uint32_t) (b->n_lists - e->first_list);
        e->n_dicts = (uint32_t) (b->n_dicts - e->first_dict);
        b->n_entries++;
        return q + 1;
}

/* An entry of the batch, @q at its EMPTY_DICT: MARK pairs SETITEMS or a pair and SETITEM,
 * a value a scalar or a list. Return: as batch_get(). */
static const uint8_t *batch_entry(vm_t *vm, batch_t *b, const uint8_t *q)
{
        struct batch_dict *e;
        bool single = false;            /* one pair and SETITEM, no MARK */

        if (!ROOM(b, entries))
                return NULL;
        e = &b->entries[b->n_entries];
        *e = (struct batch_dict) { .first = (uint32_t) b->n_pairs, .first_list = (uint32_t) b->n_lists,
                                   .first_dict = (uint32_t) b->n_dicts };
        if (!(q = batch_put(vm, b, q + 1, REF_ENTRY, b->n_entries, (npf_value_t) { 0 })) || !(q = batch_frames(vm, q)))
                return NULL;
        if (*q == '(')
                q++;
        else
                single = true;
        while ((q = batch_frames(vm, q)) && *q != (single ? 's' : 'u')) {
                if (single && b->n_pairs > e->first)
                        return NULL;
                if (!batch_room((void **) &b->pairs, &b->cap_pairs, b->n_pairs + 2, sizeof(*b->pairs)) ||
                    !(q = batch_scalar(vm, b, q, &b->pairs[b->n_pairs], AT_KEY)) || !(q = batch_frames(vm, q)))
                        return NULL;
                b->n_pairs += 2;
                if (*q == ']') {
                        b->pairs[b->n_pairs - 1] = (npf_value_t) { .kind = NPF_V_LIST };  /* made when built */
                        q = batch_list(vm, b, q + 1);
                } else {
                        q = batch_scalar(vm, b, q, &b->pairs[b->n_pairs - 1], AT_ENTRY_VALUE);
                }
                if (!q)
                        return NULL;
        }
        if (!q || (single && b->n_pairs == e->first))
                return NULL;
        return entry_end(b, e, q);
}

/*
 * The direct reader's dicts. Where every dict of a group has the shape the caller's direct
 * reader takes (npf_pickle_direct_t), the group is read here, tighter than by batch_entry():
 * keys are memo reads of strings set before the batch (their numbers remembered by slot),
 * values scalars or lists of records, no frame dict inline. A key's number rides in the
 * rkind of its str in pairs[], which a str does not use, until the dict is built.
 */

/* The memo index of BINGET or LONG_BINGET at @q, where 5 bytes are left. Return: the input
 * after it, or NULL for any other opcode. */
static inline const uint8_t *direct_index(const uint8_t *q, uint64_t *ret)
{
        if (*q == 'h') {
                *ret = q[1];
                return q + 2;
        }
        if (*q == 'j') {
                *ret = npf__pickle_le(q + 1, 4);
                return q + 5;
        }
        return NULL;
}

/* A key at @q, a str, with its number: nearly always a memo read of a str set before the
 * batch, whose number is remembered by slot (the opcodes forget it when they set the slot
 * again). Return: the input after it, or NULL. */
static inline const uint8_t *direct_key_get(vm_t *vm, batch_t *b, const uint8_t *q, npf_value_t *ret)
{
        const uint8_t *after;
        uint64_t slot;

        if (vm->end - q < 5)
                return NULL;
        if (!(after = direct_index(q, &slot)) || slot >= b->old_slots) {
                /* A str of its own (and its memo put), or one this batch or the batch being
                 * built put: the first ones. A slot is set once by the batches, the same
                 * bytes each time one is read again, and the opcodes forget what they set. */
                if (!(after = batch_scalar(vm, b, q, ret, AT_KEY)) || ret->kind != NPF_V_STR)
                        return NULL;
                unsigned n = vm->direct->key(vm->direct->userdata, ret->as.s, ret->len);
                ret->rkind = (uint16_t) (n < NPF_PICKLE_DIRECT_KEYS ? n : 0);
                if (direct_index(q, &slot))
                        vm->keys[slot % NPF__PICKLE_KEYS] = (struct npf__pickle_key) { slot + 1, *ret };
                return after;
        }
        q = after;
        struct npf__pickle_key *c = &vm->keys[slot % NPF__PICKLE_KEYS];
        if (c->slot != slot + 1) {
                npf_value_t k = b->memo[slot];
                if (k.kind != NPF_V_STR)
                        return NULL;
                unsigned n = vm->direct->key(vm->direct->userdata, k.as.s, k.len);
                k.rkind = (uint16_t) (n < NPF_PICKLE_DIRECT_KEYS ? n : 0);
                *c = (struct npf__pickle_key) { slot + 1, k };
        }
        *ret = c->key;
        return q;
}

/* MEMOIZE of the container @ref @index at @q, if there is one; else as batch_put(). */
static inline const uint8_t *direct_put(const vm_t *vm, batch_t *b, const uint8_t *q, enum batch_ref ref,
                                        size_t index)
{
        /* MEMOIZE sets the next slot, which no slot of the batch is above. */
        if (q < vm->end && *q == 0x94 && b->n_local < BATCH_SLOTS_MAX && b->memo_len < NPF_PICKLE_MEMO_MAX &&
            b->memo_len <= (uint64_t) (vm->end - vm->base) && b->n_puts < b->cap_puts && b->n_local < b->cap_local) {
                b->local[b->n_local++] = (npf_value_t) { .kind = BATCH_CONTAINER, .rkind = (uint16_t) ref,
                                                         .as.u = index };
                b->puts[b->n_puts++] = (struct batch_put) { .slot = b->memo_len++, .ref = ref, .index = (uint32_t) index };
                return q + 1;
        }
        return batch_put(vm, b, q, ref, index, (npf_value_t) { 0 });
}

/* A list as a value of a dict for the direct reader, @q after its EMPTY_LIST: memo reads of
 * records, nearly always, or what batch_list() takes. Return: as batch_get(). */
static const uint8_t *direct_list(vm_t *vm, batch_t *b, const uint8_t *q)
{
        const uint8_t *end = vm->end, *r, *after;
        struct batch_list *l;
        uint64_t slot;
        bool marked, single;

        if (!ROOM(b, lists))
                return NULL;
        l = &b->lists[b->n_lists];
        *l = (struct batch_list) { .first = (uint32_t) b->n_items, .at = (uint32_t) b->n_pairs - 1 };
        if (!(q = direct_put(vm, b, q, REF_LIST, b->n_lists)) || !(r = batch_frames(vm, q)))
                return NULL;
        marked = *r == '(';
        /* One item and APPEND; a memo read not followed by APPEND is the next key. */
        single = end - r >= 6 && (after = direct_index(r, &slot)) && *after == 'a';
        if (marked || single || *r == '}') {
                for (q = marked ? r + 1 : r;;) {
                        if (!ROOM(b, items))
                                return NULL;
                        /* Nearly always: a frame read before the batch, in the memo as a record. */
                        if (end - q >= 5 && (after = direct_index(q, &slot)) && slot < b->old_slots &&
                            b->memo[slot].kind == NPF_V_RECORD) {
                                b->items[b->n_items++] = b->memo[slot];
                                q = after;
                        } else {
                                if (marked && q < end && *q == 0x95 && !(q = batch_frames(vm, q)))
                                        return NULL;
                                if (q == end)
                                        return NULL;
                                if (marked && *q == 'e')
                                        break;
                                if (!(q = batch_item(vm, b, q)))
                                        return NULL;
                        }
                        if (!marked)
                                break;
                }
                if (q == end || *q != (marked ? 'e' : 'a'))
                        return NULL;
                q++;
        }       /* else the empty list, and @q what follows it */
        l->n = (uint32_t) (b->n_items - l->first);
        b->n_lists++;
        return q;
}

/* A value of a dict for the direct reader, not a list: BININT1, BININT2, BININT, a LONG1 of
 * up to 7 bytes that is not negative, or a memo read of a str set before the batch, at once;
 * anything else as batch_scalar() reads it. Return: as batch_get(). */
static inline const uint8_t *direct_scalar(vm_t *vm, batch_t *b, const uint8_t *q, npf_value_t *ret)
{
        const uint8_t *after;
        uint64_t slot;

        if (vm->end - q >= 10) {
                switch (*q) {
                case 'K':
                        *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = q[1] };
                        return q + 2;
                case 'M':
                        *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = (int64_t) npf__pickle_le(q + 1, 2) };
                        return q + 3;
                case 'J':
                        *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = (int32_t) (uint32_t) npf__pickle_le(q + 1, 4) };
                        return q + 5;
                case 0x8a:
                        if (q[1] >= 1 && q[1] <= 7 && !(q[1 + q[1]] & 0x80)) {
                                /* The 8 bytes at q + 2, of which the first q[1] are the number. */
                                uint64_t u = npf__pickle_le(q + 2, 8) & (~UINT64_C(0) >> (64 - 8 * q[1]));
                                *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = (int64_t) u };
                                return q + 2 + q[1];
                        }
                        break;
                case 'h':
                case 'j':
                        if ((after = direct_index(q, &slot)) && slot < b->old_slots &&
                            b->memo[slot].kind == NPF_V_STR) {
                                *ret = b->memo[slot];
                                return after;
                        }
                        break;
                }
        }
        return batch_scalar(vm, b, q, ret, AT_KEY);
}

static const uint8_t *direct_entry_slow(vm_t *vm, batch_t *b, const uint8_t *q);

#define FAST_PAIRS 64u                  /* room direct_entry_fast() asks for */
#define FAST_ITEMS 256u

/*
 * The direct reader's dict as Python writes nearly every trace entry, read in one loop with
 * its state in registers: EMPTY_DICT MEMOIZE MARK, keys read from the memo, values BININT1,
 * BININT2, BININT, a short LONG1 that is not negative, a memo read of a str, or a list
 * (EMPTY_LIST MEMOIZE MARK, memo reads of records, APPENDS), then SETITEMS; no FRAME. What
 * it reads is what direct_entry() would read. Return: the input after the dict, or NULL,
 * having read nothing, for direct_entry() to read it.
 */
static const uint8_t *direct_entry_fast(vm_t *vm, batch_t *b, const uint8_t *q)
{
        const npf_pickle_direct_t *d = vm->direct;
        const uint8_t *const end = vm->end;
        const npf_value_t *const memo = b->memo;
        const uint64_t old = b->old_slots;
        npf_value_t *const pairs = b->pairs, *const items = b->items;
        size_t n_pairs = b->n_pairs, n_items = b->n_items;
        const size_t first_pair = n_pairs, pairs_end = n_pairs + 2 * FAST_PAIRS, items_end = n_items + FAST_ITEMS;
        uint64_t slot, dict_slot = b->memo_len;
        uint32_t present = 0;
        bool list = false;

        if (end - q < 3 || q[1] != 0x94 || q[2] != '(' || b->n_local + 2 > BATCH_SLOTS_MAX ||
            dict_slot + 2 > NPF_PICKLE_MEMO_MAX || dict_slot + 2 > (uint64_t) (end - vm->base))
                return NULL;
        for (q += 3;;) {
                /* Every opcode below and its argument fit in the 10 bytes checked here. */
                if (end - q < 10 || n_pairs == pairs_end)
                        return NULL;
                if (*q == 'u')
                        break;
                /* The key: its str and number, remembered by slot. */
                if (!(q = direct_index(q, &slot)))
                        return NULL;
                const struct npf__pickle_key *c = &vm->keys[slot % NPF__PICKLE_KEYS];
                if (c->slot != slot + 1 || end - q < 10)
                        return NULL;
                unsigned k = c->key.rkind;
                npf_value_t *v = &pairs[n_pairs + 1];
                pairs[n_pairs] = c->key;
                n_pairs += 2;
                present |= UINT32_C(1) << k;
                switch (*q) {
                case 'K':
                        *v = (npf_value_t) { .kind = NPF_V_INT, .as.i = q[1] };
                        q += 2;
                        break;
                case 'M':
                        *v = (npf_value_t) { .kind = NPF_V_INT, .as.i = (int64_t) npf__pickle_le(q + 1, 2) };
                        q += 3;
                        break;
                case 'J':
                        *v = (npf_value_t) { .kind = NPF_V_INT, .as.i = (int32_t) (uint32_t) npf__pickle_le(q + 1, 4) };
                        q += 5;
                        break;
                case 0x8a:
                        if (q[1] < 1 || q[1] > 7 || (q[1 + q[1]] & 0x80))
                                return NULL;
                        *v = (npf_value_t) { .kind = NPF_V_INT,
                                             .as.u = npf__pickle_le(q + 2, 8) & (~UINT64_C(0) >> (64 - 8 * q[1])) };
                        q += 2 + q[1];
                        break;
                case 'h':
                case 'j': {
                        const uint8_t *get = q;
                        q = direct_index(q, &slot);
                        if (slot < old && memo[slot].kind == NPF_V_STR)
                                *v = memo[slot];
                        /* A str this batch or the one being built put: the first ones. */
                        else if (slot < old || !(q = batch_get(vm, b, get, v, AT_KEY)) || v->kind != NPF_V_STR)
                                return NULL;
                        break;
                }
                case ']':
                        if (list || !(d->lists >> k & 1) || q[1] != 0x94)
                                return NULL;
                        list = true;
                        *v = (npf_value_t) { .kind = NPF_V_LIST };
                        b->lists[b->n_lists] = (struct batch_list) { .first = (uint32_t) n_items,
                                                                     .at = (uint32_t) (n_pairs - 1) };
                        if (q[2] != '(') {
                                /* The empty list, before the next key or SETITEMS. */
                                if (q[2] != 'h' && q[2] != 'j' && q[2] != 'u')
                                        return NULL;
                                if (q[2] != 'u' && *direct_index(q + 2, &slot) == 'a')
                                        return NULL;    /* one item and APPEND */
                                b->lists[b->n_lists].n = 0;
                                q += 2;
                                break;
                        }
                        for (q += 3;;) {
                                const uint8_t *next;
                                if (end - q < 5 || n_items == items_end)
                                        return NULL;
                                if (!(next = direct_index(q, &slot)))
                                        break;
                                if (slot >= old || memo[slot].kind != NPF_V_RECORD)
                                        return NULL;
                                items[n_items++] = memo[slot];
                                q = next;
                        }
                        if (*q++ != 'e')
                                return NULL;
                        b->lists[b->n_lists].n = (uint32_t) (n_items - b->lists[b->n_lists].first);
                        break;
                default:
                        return NULL;
                }
                if ((d->strings >> k & 1) && v->kind != NPF_V_STR)
                        return NULL;
        }
        if (n_pairs == first_pair || (present & d->required) != d->required)
                return NULL;
        /* Read: the dict's memo put, then its list's. */
        b->entries[b->n_entries] = (struct batch_dict) { .first = (uint32_t) first_pair,
                                                         .n = (uint32_t) (n_pairs - first_pair) / 2,
                                                         .first_list = (uint32_t) b->n_lists, .n_lists = list,
                                                         .first_dict = (uint32_t) b->n_dicts, .plain = true };
        b->local[b->n_local++] = (npf_value_t) { .kind = BATCH_CONTAINER, .rkind = REF_ENTRY, .as.u = b->n_entries };
        b->puts[b->n_puts++] = (struct batch_put) { .slot = b->memo_len++, .ref = REF_ENTRY,
                                                    .index = (uint32_t) b->n_entries };
        if (list) {
                b->local[b->n_local++] = (npf_value_t) { .kind = BATCH_CONTAINER, .rkind = REF_LIST, .as.u = b->n_lists };
                b->puts[b->n_puts++] = (struct batch_put) { .slot = b->memo_len++, .ref = REF_LIST,
                                                            .index = (uint32_t) b->n_lists };
                b->n_lists++;
        }
        b->n_entries++;
        b->n_pairs = n_pairs;
        b->n_items = n_items;
        return q + 1;
}

/* Room for direct_entry_fast() to read a dict. Return: false if there is none. */
static bool direct_room(batch_t *b)
{
        return ROOM(b, entries) && ROOM(b, lists) &&
               batch_room((void **) &b->puts, &b->cap_puts, b->n_puts + 2, sizeof(*b->puts)) &&
               batch_room((void **) &b->local, &b->cap_local, b->n_local + 2, sizeof(*b->local)) &&
               batch_room((void **) &b->pairs, &b->cap_pairs, b->n_pairs + 2 * FAST_PAIRS, sizeof(*b->pairs)) &&
               batch_room((void **) &b->items, &b->cap_items, b->n_items + FAST_ITEMS, sizeof(*b->items));
}

/* A dict for the direct reader, @q at its EMPTY_DICT. Return: as batch_get(). */
static const uint8_t *direct_entry(vm_t *vm, batch_t *b, const uint8_t *q)
{
        const uint8_t *fast;

        if (direct_room(b) && (fast = direct_entry_fast(vm, b, q)))
                return fast;
        return direct_entry_slow(vm, b, q);
}

/* A dict for the direct reader, @q at its EMPTY_DICT, in any of the shapes it takes.
 * Return: as batch_get(). */
static const uint8_t *direct_entry_slow(vm_t *vm, batch_t *b, const uint8_t *q)
{
        const npf_pickle_direct_t *d = vm->direct;
        struct batch_dict *e;
        uint32_t present = 0;
        bool single;

        if (!ROOM(b, entries))
                return NULL;
        e = &b->entries[b->n_entries];
        *e = (struct batch_dict) { .first = (uint32_t) b->n_pairs, .first_list = (uint32_t) b->n_lists,
                                   .first_dict = (uint32_t) b->n_dicts };
        if (!(q = direct_put(vm, b, q + 1, REF_ENTRY, b->n_entries)) || !(q = batch_frames(vm, q)))
                return NULL;
        single = *q != '(';
        q += !single;
        for (;;) {
                if (q < vm->end && *q == 0x95 && !(q = batch_frames(vm, q)))
                        return NULL;
                if (q == vm->end)
                        return NULL;
                if (*q == (single ? 's' : 'u'))
                        break;
                if ((single && b->n_pairs > e->first) ||
                    !batch_room((void **) &b->pairs, &b->cap_pairs, b->n_pairs + 2, sizeof(*b->pairs)))
                        return NULL;
                npf_value_t *kv = &b->pairs[b->n_pairs];
                if (!(q = direct_key_get(vm, b, q, kv)) || !(q = batch_frames(vm, q)))
                        return NULL;
                unsigned k = kv->rkind;
                b->n_pairs += 2;
                if (*q == ']') {
                        if (!(d->lists >> k & 1))
                                return NULL;
                        kv[1] = (npf_value_t) { .kind = NPF_V_LIST };      /* made when built */
                        q = direct_list(vm, b, q + 1);
                } else if ((d->lists >> k & 1) && (*q == 'h' || *q == 'j')) {
                        /* A list read before, as the frames of an earlier entry (torch shares
                         * them between an entry and the next), or what it became. */
                        q = batch_get(vm, b, q, &kv[1], AT_ENTRY_VALUE);
                } else {
                        q = direct_scalar(vm, b, q, &kv[1]);
                        if (q && (kv[1].kind > NPF_V_BYTES || ((d->strings >> k & 1) && kv[1].kind != NPF_V_STR)))
                                return NULL;    /* a container, or not the str it must be */
                }
                if (!q)
                        return NULL;
                present |= UINT32_C(1) << k;
        }
        if ((single && b->n_pairs == e->first) || (present & d->required) != d->required)
                return NULL;
        return entry_end(b, e, q);
}

/* An error of batch_build() as the opcodes word it: the tree's with the offset of APPENDS,
 * the reduce callback's as it is. */
static int batch_fail(batch_t *b, int r)
{
        if (r == -ENOMEM || r == -E2BIG)
                snprintf(b->err, sizeof(b->err), "offset %zu: %s", b->at,
                         r == -ENOMEM ? "out of memory" : "a container of more than 4294967295 items");
        return r;
}

static int batch_complete(batch_t *b, npf_vkind_t kind, npf_value_t *items, size_t n, npf_value_t *ret)
{
        int r = npf_vtree_complete_items(b->tree, kind, items, n, ret, b->err, sizeof(b->err));

        return r < 0 ? batch_fail(b, r) : 0;
}

/* The @n values at @v with every BATCH_ALIAS replaced by what it refers to, built by now. */
static void batch_unalias(const batch_t *b, npf_value_t *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (v[i].kind == BATCH_ALIAS)
                        v[i] = v[i].rkind == REF_DICT ? b->items[b->dicts[v[i].as.u].at] : b->pairs[b->lists[v[i].as.u].at];
}

/* @v + @i, where @v may be NULL for want of anything read into it (and @i then 0). */
static npf_value_t *batch_at(npf_value_t *v, size_t i)
{
        return v ? v + i : NULL;
}

/* What the direct reader keeps: the container the opcodes would have built, of @kind with
 * the @n values at @items, complete and not offered again. */
static int direct_kept(batch_t *b, npf_vkind_t kind, npf_value_t *items, size_t n, npf_value_t *ret)
{
        npf_value_t c;
        int r;

        if ((r = npf_vtree_container(b->tree, kind, &c)) < 0 ||
            (n && (r = npf_vtree_append(b->tree, c, items, n, b->err, sizeof(b->err))) < 0))
                return batch_fail(b, r);
        c.as.c->complete = 1;
        *ret = c;
        return 0;
}

/* A list of the direct reader's, the @n values at @items: what the caller's reader makes
 * of it, or the list itself, complete, where it keeps it. */
static int direct_build_list(batch_t *b, npf_value_t *items, size_t n, npf_value_t *ret)
{
        int r;

        if (n == 0 || !b->direct->list)
                return batch_complete(b, NPF_V_LIST, items, n, ret);
        r = b->direct->list(b->direct->userdata, items, n, ret, b->err, sizeof(b->err));
        return r != 0 ? (r < 0 ? batch_fail(b, r) : 0) : direct_kept(b, NPF_V_LIST, items, n, ret);
}

/* A dict of the direct reader's, its @n pairs at @pairs (each key's number in its rkind):
 * what the caller's reader makes of it, or the dict itself, complete, where it keeps it. */
static int direct_build(batch_t *b, npf_value_t *pairs, size_t n, bool plain, npf_value_t *ret)
{
        npf_value_t by_key[NPF_PICKLE_DIRECT_KEYS];
        uint32_t present = 0;
        int r;

        if (!plain)
                batch_unalias(b, pairs, 2 * n);
        for (size_t i = 0; i < n; i++) {
                unsigned k = pairs[2 * i].rkind;
                pairs[2 * i].rkind = 0;
                by_key[k] = pairs[2 * i + 1];
                present |= UINT32_C(1) << k;
        }
        r = b->direct->dict(b->direct->userdata, pairs, n, by_key, present, ret, b->err, sizeof(b->err));
        return r != 0 ? (r < 0 ? batch_fail(b, r) : 0) : direct_kept(b, NPF_V_DICT, pairs, 2 * n, ret);
}

/*
 * Makes what was read, in the order of the opcodes, and APPENDS it into the list; the memo
 * puts are batch_put_memo()'s. Both run on the lane while the reader reads the next batch:
 * they use the tree's allocator and its reduce callback, which nothing else does meanwhile,
 * and write nothing the reader reads (memo slots below the batch's, which the reserved room
 * keeps in place; the containers of earlier slots).
 */
static int batch_build(batch_t *b)
{
        size_t from = 0;
        int r;

        for (size_t g = 0; g < b->n_groups; from = b->groups[g++].end) {
                b->at = b->groups[g].appends;
                for (size_t k = from; k < b->groups[g].end; k++) {
                        struct batch_dict *e = &b->entries[k];
                        for (uint32_t i = e->first_dict; i < e->first_dict + e->n_dicts; i++)
                                if ((r = batch_complete(b, NPF_V_DICT, batch_at(b->fpairs, b->dicts[i].first),
                                                        2 * b->dicts[i].n, &b->items[b->dicts[i].at])) < 0)
                                        return r;
                        for (uint32_t i = e->first_list; i < e->first_list + e->n_lists; i++) {
                                npf_value_t *items = batch_at(b->items, b->lists[i].first);
                                if (!e->plain)
                                        batch_unalias(b, items, b->lists[i].n);
                                if (b->groups[g].direct)
                                        r = direct_build_list(b, items, b->lists[i].n, &b->pairs[b->lists[i].at]);
                                else
                                        r = batch_complete(b, NPF_V_LIST, items, b->lists[i].n,
                                                           &b->pairs[b->lists[i].at]);
                                if (r < 0)
                                        return r;
                        }
                }
                for (size_t k = from; k < b->groups[g].end; k++) {
                        npf_value_t *pairs = batch_at(b->pairs, b->entries[k].first);
                        if (b->groups[g].direct)
                                r = direct_build(b, pairs, b->entries[k].n, b->entries[k].plain, &b->done[k]);
                        else {
                                batch_unalias(b, pairs, 2 * b->entries[k].n);
                                r = batch_complete(b, NPF_V_DICT, pairs, 2 * b->entries[k].n, &b->done[k]);
                        }
                        if (r < 0)
                                return r;
                }
                r = npf_vtree_append(b->tree, b->list, b->done + from, b->groups[g].end - from, b->err,
                                     sizeof(b->err));
                if (r < 0)
                        return batch_fail(b, r);
        }
        return 0;
}

/* The memo puts of the built batch @b, in their order, into room reserved before. */
static int batch_put_memo(batch_t *b)
{
        for (size_t i = 0; i < b->n_puts; i++) {
                const struct batch_put *p = &b->puts[i];
                npf_value_t v = p->ref == REF_ENTRY ? b->done[p->index]
                                : p->ref == REF_DICT ? b->items[b->dicts[p->index].at]
                                : p->ref == REF_LIST ? b->pairs[b->lists[p->index].at] : p->value;
                int r = npf_vtree_memo_push(b->tree, p->slot, v);
                if (r < 0)
                        return batch_fail(b, r);
        }
        return 0;
}

static void batch_build_on_lane(void *arg)
{
        batch_t *b = arg;

        if ((b->rc = batch_build(b)) == 0)
                b->rc = batch_put_memo(b);
}

int npf__pickle_batch_drain(vm_t *vm)
{
        batch_t *b = vm->building;

        if (!b)
                return 0;
        npf_lane_wait(vm->lane);
        vm->building = NULL;
        if (b->rc < 0)
                memcpy(vm->err, b->err, NPF_PICKLE_ERR_MAX);
        return b->rc;
}

/* The BATCH_DEFERRED values of @b, from the memo now that the batch before is built.
 * Return: false if one is not what the batch may hold (it is then left to the opcodes). */
static bool batch_resolve(vm_t *vm, batch_t *b)
{
        npf_value_t *arrays[] = { b->pairs, b->fpairs, b->items };
        size_t counts[] = { b->n_pairs, b->n_fpairs, b->n_items };

        for (size_t a = 0; a < 3; a++)
                for (size_t i = 0; i < counts[a]; i++) {
                        npf_value_t *v = &arrays[a][i];
                        if (v->kind == BATCH_DEFERRED &&
                            (npf_vtree_memo_get(vm->tree, v->as.u, v) < 0 ||
                             (npf__value_is_container(*v) && !v->as.c->complete)))
                                return false;
                }
        return true;
}

/* @vm->p is just after a MARK: reads the groups that follow, as many as there are (up to
 * BATCH_GROUPS_MAX), and hands them to the lane. Return: 1 when it did, 0 to leave the
 * MARK to the opcodes, or a negative errno. */
static int batch_read(vm_t *vm)
{
        batch_t **slot = &vm->batch[vm->building == vm->batch[0]];     /* the one not being built */
        batch_t *b = *slot;
        const uint8_t *q = vm->p, *after = NULL;
        npf_value_t list;
        int r;

        /* Into a list still being built, with room for the marks the opcodes would open. */
        if (vm->sp == 0 || vm->n_marks + 4 > NPF_PICKLE_DEPTH_MAX)
                return 0;
        list = vm->stack[vm->sp - 1];
        if (list.kind != NPF_V_LIST || list.as.c->reduced)
                return 0;
        if (!b && !(b = *slot = calloc(1, sizeof(*b))))
                return 0;
        b->first_slot = b->memo_len = vm->building ? vm->building->memo_len : npf_vtree_memo_len(vm->tree);
        batch_undo(b, &(batch_mark_t) { .memo_len = b->memo_len });      /* empty */
        b->n_deferred = b->n_groups = 0;
        b->old_slots = vm->building ? vm->building->first_slot : b->first_slot;
        b->memo = vm->tree->memo;
        for (;;) {
                batch_mark_t m = batch_mark(b);
                const uint8_t *start = q;
                bool direct = false;
                if (vm->direct) {
                        while ((q = batch_frames(vm, q)) && *q == '}')
                                if (!(q = direct_entry(vm, b, q)))
                                        break;
                        direct = q && *q == 'e' && b->n_entries > m.n_entries;
                        if (!direct) {
                                batch_undo(b, &m);
                                q = start;
                        }
                }
                while (!direct && (q = batch_frames(vm, q)) && *q == '}')
                        if (!(q = batch_entry(vm, b, q)))
                                break;
                /* The stack the opcodes would need is at most what the batch holds. */
                if (!q || *q != 'e' || b->n_entries == m.n_entries ||
                    vm->sp + b->n_entries + b->n_pairs + b->n_fpairs + b->n_items > NPF_PICKLE_STACK_MAX ||
                    !batch_room((void **) &b->done, &b->cap_done, b->n_entries, sizeof(*b->done))) {
                        batch_undo(b, &m);
                        break;
                }
                b->groups[b->n_groups++] = (struct batch_group) { .end = b->n_entries, .appends = (size_t) (q - vm->base),
                                                                  .direct = direct };
                after = ++q;
                if (b->n_groups == BATCH_GROUPS_MAX || !npf__pickle_batch_begins(vm, q))
                        break;
                q++;
        }
        if (b->n_groups == 0)
                return 0;
        /* While the lane still builds the batch before, the pages this one's memo slots and
         * records will fill: the faults are the reader's, which would only wait. */
        if (vm->building) {
                npf_vtree_memo_prefault(vm->tree, b->first_slot, b->memo_len);
                if (vm->direct && vm->direct->prefault)
                        vm->direct->prefault(vm->direct->userdata, b->n_entries);
        }
        if ((r = npf__pickle_batch_drain(vm)) < 0)
                return r;
        if (b->n_deferred && !batch_resolve(vm, b))
                return 0;
        if ((r = npf_vtree_memo_reserve(vm->tree, b->memo_len)) < 0)
                return npf__pickle_fail(vm, r, r == -ENOMEM ? "out of memory" : "too many memo slots");
        if (vm->direct && vm->direct->reserve && (r = vm->direct->reserve(vm->direct->userdata, b->n_entries)) < 0)
                return npf__pickle_fail(vm, r, "out of memory");
        if (!vm->lane_tried) {
                vm->lane = npf_lane_new();
                vm->lane_tried = true;
        }
        b->tree = vm->tree;
        b->direct = vm->direct;
        b->list = list;
        vm->building = b;
        npf_lane_run(vm->lane, batch_build_on_lane, b);
        vm->p = after;
        return 1;
}

int npf__pickle_batch_of_dicts(vm_t *vm)
{
        int r = batch_read(vm);
        const uint8_t *p = vm->p;

        if (r == 1 && npf__pickle_batch_begins(vm, p))
                return 1;
        int d = npf__pickle_batch_drain(vm);
        return d < 0 ? d : r;
}

batch_t *npf__pickle_batch_free(batch_t *b)
{
        if (!b)
                return NULL;
        free(b->pairs);
        free(b->fpairs);
        free(b->items);
        free(b->done);
        free(b->local);
        free(b->entries);
        free(b->dicts);
        free(b->lists);
        free(b->puts);
        free(b);
        return NULL;
}
