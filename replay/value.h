/* SPDX-License-Identifier: MIT */
/*
 * The value tree a snapshot is read into: what a Python pickle or a JSON document holds
 * (None, booleans, integers, floats, strings, bytes, lists, tuples, dictionaries), in
 * 16-byte values, plus records: the small handles a reader puts in place of a container it
 * has already turned into something of its own.
 *
 * Readers build the tree bottom-up. Whenever a container is complete (it has been placed
 * into its parent, or it is the document's root), the tree's reduce callback may replace it
 * with a record; the container's items are then freed at once and every reference to the
 * container, including the pickle memo's, sees the record. This is what keeps a snapshot of
 * millions of trace entries within a small multiple of its file size: each entry lives as a
 * dictionary only until it has been read into an event.
 *
 * Strings are not copied when the reader can point into its input (a pickle's UTF-8 bytes
 * are the string); the caller keeps the input alive for as long as the tree.
 */
#ifndef NPUPROF_REPLAY_VALUE_H
#define NPUPROF_REPLAY_VALUE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum npf_vkind {
        NPF_V_NONE,
        NPF_V_BOOL,
        NPF_V_INT,      /* as.i; NPF_VF_UNSIGNED: as.u above INT64_MAX; NPF_VF_HUGE: wider than 64 bits */
        NPF_V_FLOAT,    /* as.f */
        NPF_V_STR,      /* as.s, len bytes of UTF-8, not NUL-terminated */
        NPF_V_BYTES,    /* as.s, len bytes */
        NPF_V_LIST,     /* as.c */
        NPF_V_TUPLE,    /* as.c */
        NPF_V_DICT,     /* as.c; items are key, value, key, value, ... */
        NPF_V_SET,      /* as.c */
        NPF_V_RECORD,   /* rkind says what, as.u which one: defined by the reader */
} npf_vkind_t;

#define NPF_VF_UNSIGNED 0x01u   /* NPF_V_INT: the value is as.u, greater than INT64_MAX */
#define NPF_VF_HUGE     0x02u   /* NPF_V_INT: does not fit in 64 bits; as.i holds its sign */

typedef struct npf_container npf_container_t;

typedef struct npf_value {
        uint8_t kind;           /* npf_vkind_t */
        uint8_t flags;          /* NPF_VF_* */
        uint16_t rkind;         /* NPF_V_RECORD: the reader's record kind */
        uint32_t len;           /* NPF_V_STR, NPF_V_BYTES: length in bytes */
        union {
                int64_t i;
                uint64_t u;
                double f;
                const char *s;
                npf_container_t *c;
        } as;
} npf_value_t;

_Static_assert(sizeof(npf_value_t) == 16, "values are 16 bytes");

typedef struct npf_vtree npf_vtree_t;

/*
 * npf_vtree_reduce_cb - called on every complete container, innermost first, one call at a
 * time but not always on the reader's thread (see npf_pickle_load()).
 * @v is the container (kind NPF_V_LIST, NPF_V_TUPLE, NPF_V_DICT or NPF_V_SET), valid for the
 * call only: it may be a temporary (see npf_vtree_complete_items()). To replace it, write
 * the replacement (usually an NPF_V_RECORD) into @ret and return 1; to keep it, return 0.
 * A negative errno aborts the read, with a sentence in @err (@err_size bytes).
 */
typedef int (*npf_vtree_reduce_cb)(void *userdata, const npf_value_t *v, npf_value_t *ret, char *err,
                                   size_t err_size);

/* A new, empty tree; @reduce may be NULL. Return: the tree, or NULL when out of memory. */
npf_vtree_t *npf_vtree_new(npf_vtree_reduce_cb reduce, void *userdata);

/* Frees the tree, every container and every string it copied. Accepts NULL; returns NULL. */
npf_vtree_t *npf_vtree_free(npf_vtree_t *t);

/* Bytes the tree holds now (containers, items, copied strings), for progress and benches. */
size_t npf_vtree_bytes(const npf_vtree_t *t);
/* The containers made so far, kept or reduced: a measure of the work of reading. */
size_t npf_vtree_containers_made(const npf_vtree_t *t);

/* --- building (readers) ------------------------------------------------------------------ */

/* A new empty container of @kind. Return: 0 and the value in @ret, or -ENOMEM. */
int npf_vtree_container(npf_vtree_t *t, npf_vkind_t kind, npf_value_t *ret);

/*
 * npf_vtree_append() - append @n values to the container @c (for a dict, @n is even: key, value, key, value...).
 * Items that are containers are complete from now on and are reduced here.
 * Return: 0, -ENOMEM, -E2BIG (more than UINT32_MAX items), or the reduce callback's error.
 */
int npf_vtree_append(npf_vtree_t *t, npf_value_t c, npf_value_t *items, size_t n, char *err, size_t err_size);

/*
 * npf_vtree_complete_items() - what a container of @kind holding @items (@n values, none of
 * them an incomplete container) becomes the moment it is complete, without building it
 * first: the reduce callback is offered a temporary holding @items; what it replaces it
 * with is in @ret, and a container it keeps is made then, complete, with those items.
 * Return: 0, -ENOMEM, -E2BIG, or the reduce callback's error.
 */
int npf_vtree_complete_items(npf_vtree_t *t, npf_vkind_t kind, npf_value_t *items, size_t n, npf_value_t *ret,
                             char *err, size_t err_size);

/* Reduces @v, the document's root, if it is a container. Return: as npf_vtree_append(). */
int npf_vtree_finish(npf_vtree_t *t, npf_value_t *v, char *err, size_t err_size);

/*
 * The memo: values a reader refers to again by number (a pickle's PUT and GET). Putting a
 * container there does not keep it alive past its reduction; getting one marks it shared,
 * and a shared container keeps its (small) header after it has been reduced.
 * Return: 0, or -ENOMEM, or -E2BIG (@idx beyond 2^32 - 2).
 */
int npf_vtree_memo_put(npf_vtree_t *t, uint64_t idx, npf_value_t v);
/* Room in the memo for slots up to @len - 1, so that putting them does not move it.
 * Return: 0, -ENOMEM, or -E2BIG. */
int npf_vtree_memo_reserve(npf_vtree_t *t, uint64_t len);
/* Maps the pages of memo slots @from to @to - 1, where they lie in the room reserved, so
 * that putting them later takes no page fault: the pickle reader does it while its lane
 * builds, and the lane's puts then go to memory already there. It writes nothing, and may
 * run while other slots are put. */
void npf_vtree_memo_prefault(const npf_vtree_t *t, uint64_t from, uint64_t to);
/* The number of memo slots in use, the next MEMOIZE index. */
uint64_t npf_vtree_memo_len(const npf_vtree_t *t);
/* npf_vtree_memo_put(), inline where @idx is the next slot, with room, and @v no container:
 * a snapshot's millions of entries put theirs so. */
static inline int npf_vtree_memo_push(npf_vtree_t *t, uint64_t idx, npf_value_t v);
/* Marks the container @v (if it is one) as referenced twice: it is never freed early. */
void npf_vtree_share(npf_value_t v);

/* A string copied into the tree. Return: 0 and the value in @ret, or -ENOMEM / -E2BIG. */
int npf_vtree_strdup(npf_vtree_t *t, npf_vkind_t kind, const char *s, size_t len, npf_value_t *ret);


/* --- reading ----------------------------------------------------------------------------- */

/* The reading functions below are inline: a snapshot of millions of entries calls them
 * tens of times per entry. What follows is the tree's layout; only value.c writes it. */
struct npf_container {
        union {
                struct {
                        npf_value_t *items;
                        uint32_t n, cap;
                } list;
                npf_value_t reduced_to;         /* when reduced */
                npf_container_t *next_free;     /* on the free list */
        } u;
        uint8_t kind;           /* npf_vkind_t */
        uint8_t complete;       /* placed into a parent: offered to the reduce callback */
        uint8_t reduced;
        uint8_t shared;         /* referenced from more than one place */
        uint32_t memo;          /* memo slot + 1, 0 when not in the memo */
};

#define NPF__MEMO_UNSET 0xffu   /* the kind of a memo slot never put */
#define NPF__ITEM_CLASSES 5     /* items arrays of 4, 8, 16, 32 and 64 values are recycled */

struct npf_vtree {
        npf_vtree_reduce_cb reduce;
        void *userdata;
        struct npf_vtree_slab *slabs;
        size_t slab_used;               /* containers handed out of the newest slab */
        npf_container_t *free_list;
        npf_value_t *free_items[NPF__ITEM_CLASSES];     /* each links to the next through its first value */
        struct npf_vtree_chunk *chunks; /* copied strings */
        npf_value_t *memo;
        uint64_t memo_len, memo_cap;
        size_t bytes;                   /* items arrays, slabs, chunks, memo */
        size_t containers_made;
};

/* The container kinds are contiguous: one comparison tells them. */
_Static_assert(NPF_V_TUPLE == NPF_V_LIST + 1 && NPF_V_DICT == NPF_V_LIST + 2 && NPF_V_SET == NPF_V_LIST + 3,
               "container kinds are contiguous");

static inline bool npf__value_is_container(npf_value_t v)
{
        return (unsigned) (v.kind - NPF_V_LIST) <= NPF_V_SET - NPF_V_LIST;
}

/* @v itself, or what it was reduced to. */
static inline npf_value_t npf_value_resolve(npf_value_t v)
{
        if (npf__value_is_container(v) && v.as.c->reduced)
                return v.as.c->u.reduced_to;
        return v;
}

/* Items of a container (dicts: pairs), 0 for anything else. */
static inline size_t npf_value_len(npf_value_t v)
{
        v = npf_value_resolve(v);
        if (!npf__value_is_container(v))
                return 0;
        return v.kind == NPF_V_DICT ? v.as.c->u.list.n / 2 : v.as.c->u.list.n;
}

/* The items of a container (a dict's are key, value, key, value...): npf_value_len() of them,
 * twice that for a dict; NULL when there are none. Resolve each before use. */
static inline const npf_value_t *npf_value_items(npf_value_t v)
{
        v = npf_value_resolve(v);
        return npf__value_is_container(v) ? v.as.c->u.list.items : NULL;
}

/* Item @i of a list, tuple or set; the kind NPF_V_NONE when out of range or not a sequence. */
static inline npf_value_t npf_value_at(npf_value_t v, size_t i)
{
        v = npf_value_resolve(v);
        if (!npf__value_is_container(v) || v.kind == NPF_V_DICT || i >= v.as.c->u.list.n)
                return (npf_value_t) { .kind = NPF_V_NONE };
        return npf_value_resolve(v.as.c->u.list.items[i]);
}

/* Key and value of pair @i of a dict. Return: false when out of range or not a dict. */
static inline bool npf_value_pair(npf_value_t v, size_t i, npf_value_t *ret_key, npf_value_t *ret_value)
{
        v = npf_value_resolve(v);
        if (v.kind != NPF_V_DICT || i >= v.as.c->u.list.n / 2)
                return false;
        *ret_key = npf_value_resolve(v.as.c->u.list.items[2 * i]);
        *ret_value = npf_value_resolve(v.as.c->u.list.items[2 * i + 1]);
        return true;
}

/* The memo slot @idx: what npf_vtree_memo_put() left there (or what that was reduced to),
 * now marked shared. Return: 0, or -ENOENT for a slot never put, with the kind NPF_V_NONE. */
static inline int npf_vtree_memo_get(npf_vtree_t *t, uint64_t idx, npf_value_t *ret)
{
        if (idx >= t->memo_len || t->memo[idx].kind == NPF__MEMO_UNSET) {
                *ret = (npf_value_t) { .kind = NPF_V_NONE };
                return -ENOENT;
        }
        npf_value_t v = t->memo[idx];
        if (npf__value_is_container(v))
                v.as.c->shared = 1;
        *ret = npf_value_resolve(v);
        return 0;
}

static inline int npf_vtree_memo_push(npf_vtree_t *t, uint64_t idx, npf_value_t v)
{
        if (idx == t->memo_len && idx < t->memo_cap && idx < UINT32_MAX - 1 && !npf__value_is_container(v)) {
                t->memo[idx] = v;
                t->memo_len = idx + 1;
                return 0;
        }
        return npf_vtree_memo_put(t, idx, v);
}

/* The value of the string key @key in dict @v. Return: false if @v is no dict or lacks it. */
bool npf_value_get(npf_value_t v, const char *key, npf_value_t *ret);

/* @v is a string equal to @s. */
static inline bool npf_value_streq(npf_value_t v, const char *s)
{
        size_t n = strlen(s);

        return v.kind == NPF_V_STR && v.len == n && memcmp(v.as.s, s, n) == 0;
}

/* @v as a signed or unsigned 64-bit integer (booleans are 0 and 1; floats are refused).
 * Return: false if it is no integer or does not fit. */
bool npf_value_int64(npf_value_t v, int64_t *ret);
bool npf_value_uint64(npf_value_t v, uint64_t *ret);

/* @v as a double: integers and floats. Return: false for anything else. */
bool npf_value_double(npf_value_t v, double *ret);

/* The Python name of @v's kind ("dict", "int", ...), for messages. */
const char *npf_value_kind_name(npf_value_t v);

#endif /* NPUPROF_REPLAY_VALUE_H */
