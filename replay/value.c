/* SPDX-License-Identifier: MIT */
/* The value tree: containers in slabs, items in growing arrays, reduction as they complete. */
#include "replay/value.h"
#include "replay/beside.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define is_container npf__value_is_container


#define SLAB_CONTAINERS 4096u
#define KIND_UNSET NPF__MEMO_UNSET
#define ARENA_CHUNK (256u * 1024u)

typedef struct npf_vtree_slab {
        struct npf_vtree_slab *next;
        npf_container_t c[SLAB_CONTAINERS];
} slab_t;

typedef struct npf_vtree_chunk {
        struct npf_vtree_chunk *next;
        size_t used, size;
        char data[];
} chunk_t;

npf_vtree_t *npf_vtree_new(npf_vtree_reduce_cb reduce, void *userdata)
{
        npf_vtree_t *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        t->reduce = reduce;
        t->userdata = userdata;
        t->slab_used = SLAB_CONTAINERS;
        return t;
}

/* The recycling class of an items array of @cap values, -1 when it is not recycled. */
static int item_class(size_t cap)
{
        if (cap < 4 || cap > (size_t) 4 << (NPF__ITEM_CLASSES - 1) || (cap & (cap - 1)))
                return -1;
        return __builtin_ctzll(cap) - 2;
}

/* A recycled array's first value links to the next one of its class. */
static npf_value_t *next_items(const npf_value_t *items)
{
        return (npf_value_t *) (uintptr_t) items[0].as.u;
}

/* Millions of small dictionaries and lists live for an instant each: their arrays are
 * kept for the next container instead of going back to malloc. */
static void items_release(npf_vtree_t *t, npf_value_t *items, size_t cap)
{
        int k = item_class(cap);

        if (!items)
                return;
        if (k < 0) {
                free(items);
                return;
        }
        items[0] = (npf_value_t) { .as.u = (uintptr_t) t->free_items[k] };
        t->free_items[k] = items;
}

/* @items (of @cap values, NULL when none) with room for @want. */
static npf_value_t *items_resize(npf_vtree_t *t, npf_value_t *items, size_t cap, size_t want, size_t used)
{
        int k = item_class(want);
        npf_value_t *p;

        if (k < 0 || !t->free_items[k]) {
                if (k < 0 && item_class(cap) < 0)
                        return realloc(items, want * sizeof(*p));
                if (!(p = malloc(want * sizeof(*p))))
                        return NULL;
        } else {
                p = t->free_items[k];
                t->free_items[k] = next_items(p);
        }
        if (used)
                memcpy(p, items, used * sizeof(*p));
        items_release(t, items, cap);
        return p;
}

static void free_items(npf_container_t *c)
{
        if (!c->reduced && c->kind != NPF_V_NONE)
                free(c->u.list.items);
}

npf_vtree_t *npf_vtree_free(npf_vtree_t *t)
{
        if (!t)
                return NULL;
        /* Containers on the free list have kind NONE: their items are already gone. */
        for (npf_container_t *c = t->free_list; c; c = c->u.next_free)
                c->kind = NPF_V_NONE;
        for (slab_t *s = t->slabs, *next; s; s = next) {
                size_t n = s == t->slabs ? t->slab_used : SLAB_CONTAINERS;
                next = s->next;
                for (size_t i = 0; i < n; i++)
                        free_items(&s->c[i]);
                free(s);
        }
        for (int k = 0; k < NPF__ITEM_CLASSES; k++)
                for (npf_value_t *p = t->free_items[k], *next; p; p = next) {
                        next = next_items(p);
                        free(p);
                }
        for (chunk_t *c = t->chunks, *next; c; c = next) {
                next = c->next;
                free(c);
        }
        free(t->memo);
        free(t);
        return NULL;
}

size_t npf_vtree_bytes(const npf_vtree_t *t)
{
        return t->bytes;
}

size_t npf_vtree_containers_made(const npf_vtree_t *t)
{
        return t->containers_made;
}

int npf_vtree_container(npf_vtree_t *t, npf_vkind_t kind, npf_value_t *ret)
{
        npf_container_t *c = t->free_list;

        if (c) {
                t->free_list = c->u.next_free;
        } else {
                if (t->slab_used == SLAB_CONTAINERS) {
                        slab_t *s = malloc(sizeof(*s));
                        if (!s)
                                return -ENOMEM;
                        s->next = t->slabs;
                        t->slabs = s;
                        t->slab_used = 0;
                        t->bytes += sizeof(*s);
                }
                c = &t->slabs->c[t->slab_used++];
        }
        *c = (npf_container_t) { .kind = (uint8_t) kind };
        *ret = (npf_value_t) { .kind = (uint8_t) kind, .as.c = c };
        t->containers_made++;
        return 0;
}



void npf_vtree_share(npf_value_t v)
{
        if (is_container(v))
                v.as.c->shared = 1;
}

/*
 * Offer the complete container @v to the reduce callback. A reduced container's items are
 * freed; unless something else still points at it, so is the container, its memo slot then
 * holding the replacement. @v becomes what the parent keeps.
 */
static int complete(npf_vtree_t *t, npf_value_t *v, char *err, size_t err_size)
{
        npf_container_t *c = v->as.c;
        npf_value_t repl;
        int r;

        if (c->complete || !t->reduce) {
                *v = npf_value_resolve(*v);
                return 0;
        }
        c->complete = 1;
        r = t->reduce(t->userdata, v, &repl, err, err_size);
        if (r <= 0)
                return r;
        t->bytes -= (size_t) c->u.list.cap * sizeof(npf_value_t);
        items_release(t, c->u.list.items, c->u.list.cap);
        bool memo_holds_c = c->memo && is_container(t->memo[c->memo - 1]) && t->memo[c->memo - 1].as.c == c;
        /* The memo hands out the replacement from now on, without a detour through @c. */
        if (memo_holds_c)
                t->memo[c->memo - 1] = repl;
        if (!c->shared && (!c->memo || memo_holds_c)) {
                c->kind = NPF_V_NONE;
                c->u.next_free = t->free_list;
                t->free_list = c;
        } else {
                c->reduced = 1;
                c->u.reduced_to = repl;
        }
        *v = repl;
        return 0;
}

int npf_vtree_append(npf_vtree_t *t, npf_value_t cv, npf_value_t *items, size_t n, char *err, size_t err_size)
{
        npf_container_t *c;
        int r;

        if (!is_container(cv))
                return -EINVAL;
        c = cv.as.c;
        if (c->reduced || c->kind == NPF_V_NONE) {
                snprintf(err, err_size, "a %s is added to after it was complete", npf_value_kind_name(cv));
                return -EINVAL;
        }
        if (n > UINT32_MAX - c->u.list.n)
                return -E2BIG;
        if (c->u.list.n + n > c->u.list.cap) {
                size_t cap = c->u.list.cap ? c->u.list.cap : 4;
                while (cap < c->u.list.n + n)
                        cap *= 2;
                if (cap > UINT32_MAX)
                        cap = UINT32_MAX;
                npf_value_t *p = items_resize(t, c->u.list.items, c->u.list.cap, cap, c->u.list.n);
                if (!p)
                        return -ENOMEM;
                t->bytes += (cap - c->u.list.cap) * sizeof(*p);
                c->u.list.items = p;
                c->u.list.cap = (uint32_t) cap;
        }
        if (n == 0)
                return 0;
        npf_value_t *dst = c->u.list.items + c->u.list.n;
        for (size_t i = 0; i < n; i++) {
                npf_value_t v = items[i];
                if (is_container(v)) {
                        /* A container placed into itself is still being built. */
                        if (v.as.c == c) {
                                v.as.c->shared = 1;
                        } else if ((r = complete(t, &v, err, err_size)) < 0) {
                                c->u.list.n += (uint32_t) i;
                                return r;
                        }
                }
                dst[i] = v;
        }
        c->u.list.n += (uint32_t) n;
        return 0;
}

int npf_vtree_complete_items(npf_vtree_t *t, npf_vkind_t kind, npf_value_t *items, size_t n, npf_value_t *ret,
                             char *err, size_t err_size)
{
        npf_container_t offered = { .kind = (uint8_t) kind, .complete = 1 };
        npf_value_t v = { .kind = (uint8_t) kind, .as.c = &offered };
        int r;

        if (n > UINT32_MAX)
                return -E2BIG;
        offered.u.list.items = items;
        offered.u.list.n = offered.u.list.cap = (uint32_t) n;
        if (t->reduce && (r = t->reduce(t->userdata, &v, ret, err, err_size)) != 0)
                return r < 0 ? r : 0;
        /* Kept: the container the opcodes would have built, complete as it would be. */
        if ((r = npf_vtree_container(t, kind, &v)) < 0 || (n && (r = npf_vtree_append(t, v, items, n, err, err_size)) < 0))
                return r;
        v.as.c->complete = 1;
        *ret = v;
        return 0;
}

int npf_vtree_finish(npf_vtree_t *t, npf_value_t *v, char *err, size_t err_size)
{
        return is_container(*v) ? complete(t, v, err, err_size) : 0;
}

int npf_vtree_memo_reserve(npf_vtree_t *t, uint64_t len)
{
        if (len > UINT32_MAX - 1)
                return -E2BIG;
        if (len > t->memo_cap) {
                uint64_t cap = t->memo_cap ? t->memo_cap : 1024;
                while (cap < len)
                        cap *= 2;
                npf_value_t *p = realloc(t->memo, cap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                t->bytes += (cap - t->memo_cap) * sizeof(*p);
                t->memo = p;
                t->memo_cap = cap;
        }
        return 0;
}

void npf_vtree_memo_prefault(const npf_vtree_t *t, uint64_t from, uint64_t to)
{
        if (to > t->memo_cap)
                to = t->memo_cap;
        if (from < to)
                npf_prefault(&t->memo[from], (to - from) * sizeof(*t->memo));
}

int npf_vtree_memo_put(npf_vtree_t *t, uint64_t idx, npf_value_t v)
{
        int r;

        if (idx >= UINT32_MAX - 1)
                return -E2BIG;
        if (idx >= t->memo_cap && (r = npf_vtree_memo_reserve(t, idx + 1)) < 0)
                return r;
        if (is_container(v)) {
                /* In two slots, or in one slot and a parent already: never freed early. */
                if (v.as.c->memo || v.as.c->complete)
                        v.as.c->shared = 1;
                v.as.c->memo = (uint32_t) idx + 1;
        }
        /* Slots are marked unset only up to the highest put: the room beyond stays untouched. */
        for (uint64_t i = t->memo_len; i < idx; i++)
                t->memo[i] = (npf_value_t) { .kind = KIND_UNSET };
        t->memo[idx] = v;
        if (idx >= t->memo_len)
                t->memo_len = idx + 1;
        return 0;
}

uint64_t npf_vtree_memo_len(const npf_vtree_t *t)
{
        return t->memo_len;
}

int npf_vtree_strdup(npf_vtree_t *t, npf_vkind_t kind, const char *s, size_t len, npf_value_t *ret)
{
        chunk_t *c = t->chunks;

        if (len > UINT32_MAX)
                return -E2BIG;
        if (!c || c->size - c->used < len) {
                size_t size = len > ARENA_CHUNK ? len : ARENA_CHUNK;
                c = malloc(sizeof(*c) + size);
                if (!c)
                        return -ENOMEM;
                c->used = 0;
                c->size = size;
                c->next = t->chunks;
                t->chunks = c;
                t->bytes += sizeof(*c) + size;
        }
        memcpy(c->data + c->used, s, len);
        *ret = (npf_value_t) { .kind = (uint8_t) kind, .len = (uint32_t) len, .as.s = c->data + c->used };
        c->used += len;
        return 0;
}

/* --- reading ------------------------------------------------------------------------------- */

bool npf_value_get(npf_value_t v, const char *key, npf_value_t *ret)
{
        v = npf_value_resolve(v);
        if (v.kind != NPF_V_DICT)
                return false;
        /* A later duplicate key wins, as in Python. */
        for (size_t i = v.as.c->u.list.n / 2; i-- > 0;) {
                if (npf_value_streq(npf_value_resolve(v.as.c->u.list.items[2 * i]), key)) {
                        *ret = npf_value_resolve(v.as.c->u.list.items[2 * i + 1]);
                        return true;
                }
        }
        return false;
}

bool npf_value_int64(npf_value_t v, int64_t *ret)
{
        if (v.kind == NPF_V_BOOL || (v.kind == NPF_V_INT && !v.flags)) {
                *ret = v.as.i;
                return true;
        }
        return false;
}

bool npf_value_uint64(npf_value_t v, uint64_t *ret)
{
        if (v.kind == NPF_V_INT && v.flags == NPF_VF_UNSIGNED) {
                *ret = v.as.u;
                return true;
        }
        if ((v.kind == NPF_V_BOOL || (v.kind == NPF_V_INT && !v.flags)) && v.as.i >= 0) {
                *ret = (uint64_t) v.as.i;
                return true;
        }
        return false;
}

bool npf_value_double(npf_value_t v, double *ret)
{
        switch (v.kind) {
        case NPF_V_FLOAT:
                *ret = v.as.f;
                return true;
        case NPF_V_INT:
                if (v.flags & NPF_VF_HUGE)
                        return false;
                *ret = v.flags & NPF_VF_UNSIGNED ? (double) v.as.u : (double) v.as.i;
                return true;
        default:
                return false;
        }
}

const char *npf_value_kind_name(npf_value_t v)
{
        static const char *const names[] = {
                [NPF_V_NONE] = "None",  [NPF_V_BOOL] = "bool",   [NPF_V_INT] = "int",
                [NPF_V_FLOAT] = "float", [NPF_V_STR] = "str",    [NPF_V_BYTES] = "bytes",
                [NPF_V_LIST] = "list",  [NPF_V_TUPLE] = "tuple", [NPF_V_DICT] = "dict",
                [NPF_V_SET] = "set",    [NPF_V_RECORD] = "record",
        };
        v = npf_value_resolve(v);
        return v.kind < sizeof(names) / sizeof(names[0]) ? names[v.kind] : "?";
}
