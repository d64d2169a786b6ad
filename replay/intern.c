/* SPDX-License-Identifier: MIT */
/* Interning: three open-addressing tables of ids over three append-only stores. */
#include "replay/intern.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* An open-addressing set of ids; the caller compares an id with the key it looks for. */
typedef struct idtab {
        uint32_t *slots;        /* id + 1, 0 when empty */
        uint64_t *hashes;
        size_t cap, n;          /* cap is a power of two */
} idtab_t;

typedef struct { char *p; size_t len, cap; } bytes_t;

struct npf_intern {
        bytes_t chars;                  /* strings, each NUL-terminated */
        struct str { uint64_t off; uint64_t len; } *strs;       /* string id -> where in chars */
        size_t n_str, cap_str;
        idtab_t str_tab;

        npf_frame_t *frames;
        size_t n_frames, cap_frames;
        idtab_t frame_tab;

        uint32_t *stack_frames;         /* all stacks' frame ids, back to back */
        size_t n_stack_frames, cap_stack_frames;
        uint64_t *stack_off;            /* stack id -> offset; its length is the next offset */
        size_t n_stacks, cap_stacks;
        idtab_t stack_tab;
};

/* Eight bytes at a time, each word folded in with a multiply and its high half mixed down. */
static uint64_t hash_bytes(const void *p, size_t n)
{
        const unsigned char *s = p;
        uint64_t h = 0x9e3779b97f4a7c15u ^ n, w;

        for (; n >= 8; s += 8, n -= 8) {
                memcpy(&w, s, 8);
                h = (h ^ w) * 0xff51afd7ed558ccdu;
                h ^= h >> 32;
        }
        if (n) {
                w = 0;
                memcpy(&w, s, n);
                h = (h ^ w) * 0xc4ceb9fe1a85ec53u;
        }
        return h ^ (h >> 29);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
        if (need <= *cap)
                return 0;
        size_t c = *cap ? *cap : 64;
        while (c < need)
                c *= 2;
        void *q = realloc(*p, c * elem);
        if (!q)
                return -ENOMEM;
        *p = q;
        *cap = c;
        return 0;
}

typedef bool (*eq_fn)(const npf_intern_t *in, uint32_t id, const void *key);

/* The id equal to @key, or -1; @ret_slot is where it would go. */
static int64_t tab_find(const npf_intern_t *in, const idtab_t *t, uint64_t h, eq_fn eq, const void *key,
                        size_t *ret_slot)
{
        size_t mask = t->cap - 1;

        for (size_t i = h & mask;; i = (i + 1) & mask) {
                if (!t->slots[i]) {
                        *ret_slot = i;
                        return -1;
                }
                if (t->hashes[i] == h && eq(in, t->slots[i] - 1, key))
                        return t->slots[i] - 1;
        }
}

static int tab_insert(idtab_t *t, uint64_t h, uint32_t id, size_t slot)
{
        t->slots[slot] = id + 1;
        t->hashes[slot] = h;
        t->n++;
        if (t->n * 2 <= t->cap)
                return 0;
        /* Rehash into twice the room. */
        idtab_t g = { .cap = t->cap * 2, .n = t->n };
        g.slots = calloc(g.cap, sizeof(*g.slots));
        g.hashes = malloc(g.cap * sizeof(*g.hashes));
        if (!g.slots || !g.hashes) {
                free(g.slots);
                free(g.hashes);
                return -ENOMEM;
        }
        for (size_t i = 0; i < t->cap; i++) {
                if (!t->slots[i])
                        continue;
                size_t j = t->hashes[i] & (g.cap - 1);
                while (g.slots[j])
                        j = (j + 1) & (g.cap - 1);
                g.slots[j] = t->slots[i];
                g.hashes[j] = t->hashes[i];
        }
        free(t->slots);
        free(t->hashes);
        *t = g;
        return 0;
}

static int tab_init(idtab_t *t)
{
        t->cap = 1024;
        t->slots = calloc(t->cap, sizeof(*t->slots));
        t->hashes = malloc(t->cap * sizeof(*t->hashes));
        return t->slots && t->hashes ? 0 : -ENOMEM;
}

static void tab_fini(idtab_t *t)
{
        free(t->slots);
        free(t->hashes);
}

typedef struct { const char *s; size_t len; } str_key_t;
typedef struct { const uint32_t *frames; size_t n; } stack_key_t;

static bool str_eq(const npf_intern_t *in, uint32_t id, const void *key)
{
        const str_key_t *k = key;
        return in->strs[id].len == k->len && memcmp(in->chars.p + in->strs[id].off, k->s, k->len) == 0;
}

static bool frame_eq(const npf_intern_t *in, uint32_t id, const void *key)
{
        const npf_frame_t *f = key;
        const npf_frame_t *g = &in->frames[id];
        return f->name == g->name && f->filename == g->filename && f->line == g->line;
}

static bool stack_eq(const npf_intern_t *in, uint32_t id, const void *key)
{
        const stack_key_t *k = key;
        size_t n = in->stack_off[id + 1] - in->stack_off[id];
        return n == k->n && memcmp(in->stack_frames + in->stack_off[id], k->frames, n * sizeof(uint32_t)) == 0;
}

npf_intern_t *npf_intern_new(void)
{
        npf_intern_t *in = calloc(1, sizeof(*in));

        if (!in || tab_init(&in->str_tab) < 0 || tab_init(&in->frame_tab) < 0 || tab_init(&in->stack_tab) < 0 ||
            grow((void **) &in->stack_off, &in->cap_stacks, 2, sizeof(uint64_t)) < 0)
                return npf_intern_free(in);
        in->stack_off[0] = 0;
        in->stack_off[1] = 0;
        in->n_stacks = 1;
        /* The empty stack is id 0 without being in the table: lookups of n = 0 return it. */
        if (npf_intern_string(in, "", 0) != 0)
                return npf_intern_free(in);
        return in;
}

npf_intern_t *npf_intern_free(npf_intern_t *in)
{
        if (!in)
                return NULL;
        free(in->chars.p);
        free(in->strs);
        free(in->frames);
        free(in->stack_frames);
        free(in->stack_off);
        tab_fini(&in->str_tab);
        tab_fini(&in->frame_tab);
        tab_fini(&in->stack_tab);
        free(in);
        return NULL;
}

int64_t npf_intern_string(npf_intern_t *in, const char *s, size_t len)
{
        str_key_t k = { s, len };
        uint64_t h = hash_bytes(s, len);
        size_t slot;
        int64_t id = tab_find(in, &in->str_tab, h, str_eq, &k, &slot);

        if (id >= 0)
                return id;
        if (in->n_str >= UINT32_MAX - 1 || len > UINT32_MAX)
                return -E2BIG;
        if (grow((void **) &in->chars.p, &in->chars.cap, in->chars.len + len + 1, 1) < 0 ||
            grow((void **) &in->strs, &in->cap_str, in->n_str + 1, sizeof(*in->strs)) < 0)
                return -ENOMEM;
        memcpy(in->chars.p + in->chars.len, s, len);
        in->chars.p[in->chars.len + len] = '\0';
        in->strs[in->n_str] = (struct str) { in->chars.len, len };
        in->chars.len += len + 1;
        id = (int64_t) in->n_str++;
        return tab_insert(&in->str_tab, h, (uint32_t) id, slot) < 0 ? -ENOMEM : id;
}

int64_t npf_intern_frame(npf_intern_t *in, npf_frame_t f)
{
        uint64_t h = hash_bytes(&f, sizeof(f));
        size_t slot;
        int64_t id = tab_find(in, &in->frame_tab, h, frame_eq, &f, &slot);

        if (id >= 0)
                return id;
        if (in->n_frames >= UINT32_MAX - 1)
                return -E2BIG;
        if (grow((void **) &in->frames, &in->cap_frames, in->n_frames + 1, sizeof(npf_frame_t)) < 0)
                return -ENOMEM;
        in->frames[in->n_frames] = f;
        id = (int64_t) in->n_frames++;
        return tab_insert(&in->frame_tab, h, (uint32_t) id, slot) < 0 ? -ENOMEM : id;
}

int64_t npf_intern_stack(npf_intern_t *in, const uint32_t *frames, size_t n)
{
        stack_key_t k = { frames, n };
        uint64_t h;
        size_t slot;
        int64_t id;

        if (n == 0)
                return 0;
        h = hash_bytes(frames, n * sizeof(uint32_t));
        if ((id = tab_find(in, &in->stack_tab, h, stack_eq, &k, &slot)) >= 0)
                return id;
        if (in->n_stacks >= UINT32_MAX - 2)
                return -E2BIG;
        if (grow((void **) &in->stack_frames, &in->cap_stack_frames, in->n_stack_frames + n, sizeof(uint32_t)) < 0 ||
            grow((void **) &in->stack_off, &in->cap_stacks, in->n_stacks + 2, sizeof(uint64_t)) < 0)
                return -ENOMEM;
        memcpy(in->stack_frames + in->n_stack_frames, frames, n * sizeof(uint32_t));
        in->n_stack_frames += n;
        in->stack_off[in->n_stacks + 1] = in->n_stack_frames;
        id = (int64_t) in->n_stacks++;
        return tab_insert(&in->stack_tab, h, (uint32_t) id, slot) < 0 ? -ENOMEM : id;
}

size_t npf_intern_stacks(const npf_intern_t *in)
{
        return in->n_stacks;
}

const char *npf_intern_str(const npf_intern_t *in, uint32_t id)
{
        return id < in->n_str ? in->chars.p + in->strs[id].off : "";
}

const npf_frame_t *npf_intern_frame_get(const npf_intern_t *in, uint32_t id)
{
        return id < in->n_frames ? &in->frames[id] : NULL;
}

size_t npf_intern_stack_get(const npf_intern_t *in, uint32_t id, const uint32_t **ret_frames)
{
        if (id >= in->n_stacks) {
                *ret_frames = NULL;
                return 0;
        }
        size_t n = (size_t) (in->stack_off[id + 1] - in->stack_off[id]);
        *ret_frames = n ? in->stack_frames + in->stack_off[id] : NULL;
        return n;
}

size_t npf_intern_bytes(const npf_intern_t *in)
{
        return in->chars.cap + in->cap_str * sizeof(*in->strs) + in->cap_frames * sizeof(npf_frame_t) +
               in->cap_stack_frames * 4 + in->cap_stacks * 8 +
               (in->str_tab.cap + in->frame_tab.cap + in->stack_tab.cap) * 12;
}
