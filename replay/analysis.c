/* SPDX-License-Identifier: MIT */
/* The per-device analyses of a replayed snapshot, as JSON. */
#include "replay/analysis.h"
#include "replay/beside.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *u64(uint64_t v)
{
        return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t) v);
}

static json_t *hex(uint64_t v)
{
        char buf[24];

        snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
        return json_string(buf);
}

static json_t *count_bytes(size_t count, uint64_t bytes)
{
        return json_pack("{s:I,s:o}", "count", (json_int_t) count, "bytes", u64(bytes));
}

/* An event index in JSON: null before or after the trace. */
static json_t *index_json(int64_t i)
{
        return i < 0 || i == NPF_AFTER_TRACE ? json_null() : json_integer(i);
}

static json_t *time_of(const npf_replay_t *r, int64_t i)
{
        if (i < 0 || (size_t) i >= r->n || r->events[i].time_us == NPF_TIME_UNKNOWN)
                return json_null();
        return json_integer(r->events[i].time_us);
}

json_t *npf_analysis_stack(const npf_snapshot_t *s, uint32_t stack, size_t max_frames)
{
        const uint32_t *ids;
        size_t n = npf_intern_stack_get(s->intern, stack, &ids);
        json_t *a = json_array();

        for (size_t i = 0; a && i < n && i < max_frames; i++) {
                const npf_frame_t *f = npf_intern_frame_get(s->intern, ids[i]);
                if (f)
                        json_array_append_new(a, json_pack("{s:s,s:s,s:I}", "name", npf_intern_str(s->intern, f->name),
                                                           "filename", npf_intern_str(s->intern, f->filename),
                                                           "line", (json_int_t) f->line));
        }
        return a;
}

/* --- ranking ---------------------------------------------------------------------------------- */

/* Indices into the lives at @lives, largest first (qsort_r keeps this reentrant). */
static int by_size_desc(const void *a, const void *b, void *lives)
{
        const npf_replay_life_t *x = (const npf_replay_life_t *) lives + *(const size_t *) a;
        const npf_replay_life_t *y = (const npf_replay_life_t *) lives + *(const size_t *) b;
        if (x->size != y->size)
                return x->size < y->size ? 1 : -1;
        return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static json_t *life_json(const npf_snapshot_t *s, const npf_replay_t *r, const npf_replay_life_t *l,
                         const npf_analysis_opts_t *o)
{
        json_t *j = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "addr", hex(l->addr), "size", u64(l->size),
                              "block_size", u64(l->footprint), "stream",
                              u64(l->stream), "allocated_at", index_json(l->alloc), "free_requested_at",
                              index_json(l->free_requested), "allocated_time_us", time_of(r, l->alloc), "frames",
                              npf_analysis_stack(s, l->stack, o->max_frames));
        if (j && l->context)
                json_object_set_new(j, "compile_context", json_string(npf_intern_str(s->intern, l->context)));
        return j;
}

/* The lives chosen by @keep, their count and bytes, and the @o->top largest. */
static json_t *ranked(const npf_snapshot_t *s, const npf_replay_t *r, const npf_analysis_opts_t *o,
                      bool (*keep)(const npf_replay_life_t *l, int64_t at), int64_t at, size_t **ret_idx, size_t *ret_n)
{
        size_t *idx = malloc((r->n_lives + 1) * sizeof(*idx)), n = 0;
        uint64_t bytes = 0, requested = 0;
        json_t *blocks, *j;

        if (!idx)
                return NULL;
        for (size_t i = 0; i < r->n_lives; i++)
                if (keep(&r->lives[i], at)) {
                        idx[n++] = i;
                        bytes += r->lives[i].footprint;
                        requested += r->lives[i].size;
                }
        qsort_r(idx, n, sizeof(*idx), by_size_desc, r->lives);
        blocks = json_array();
        for (size_t i = 0; i < n && i < o->top; i++)
                json_array_append_new(blocks, life_json(s, r, &r->lives[idx[i]], o));
        j = json_pack("{s:I,s:o,s:o,s:o}", "count", (json_int_t) n, "bytes", u64(bytes), "requested", u64(requested),
                      "blocks", blocks);
        if (ret_idx) {
                *ret_idx = idx;
                *ret_n = n;
        } else {
                free(idx);
        }
        return j;
}

static bool allocated_at(const npf_replay_life_t *l, int64_t at)
{
        return l->alloc <= at && l->free_requested > at;
}

/* @first: the first event after torch_npu's workspace triples, whose blocks are no leak. */
static bool leaked(const npf_replay_life_t *l, int64_t first)
{
        return l->alloc >= first && l->free_requested == NPF_AFTER_TRACE;
}

/* --- call sites --------------------------------------------------------------------------- */

typedef struct site {
        uint32_t stack;
        size_t count;
        uint64_t bytes;
        double byte_events;     /* bytes times events alive: can exceed 2^64 */
} site_t;

static int by_weight_desc(const void *a, const void *b)
{
        const site_t *x = a, *y = b;
        if (x->byte_events != y->byte_events)
                return x->byte_events < y->byte_events ? 1 : -1;
        return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static int by_bytes_desc(const void *a, const void *b)
{
        const site_t *x = a, *y = b;
        if (x->bytes != y->bytes)
                return x->bytes < y->bytes ? 1 : -1;
        return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* The lives at @idx (@n of them) grouped by allocation stack, ranked by @cmp. */
static json_t *sites(const npf_snapshot_t *s, const npf_replay_t *r, const size_t *idx, size_t n,
                     int (*cmp)(const void *, const void *), const npf_analysis_opts_t *o)
{
        /* Stack ids are dense: one slot each, then only the sites that occur. */
        size_t n_stacks = npf_intern_stacks(s->intern) + 1;
        site_t *v = calloc(n_stacks, sizeof(*v));
        size_t m = 0;
        json_t *a = json_array();

        if (!v || !a) {
                free(v);
                json_decref(a);
                return NULL;
        }
        for (size_t i = 0; i < n; i++) {
                const npf_replay_life_t *l = &r->lives[idx ? idx[i] : i];
                int64_t from = l->alloc < 0 ? 0 : l->alloc;
                int64_t to = l->free_requested == NPF_AFTER_TRACE ? (int64_t) r->n : l->free_requested;
                site_t *x = &v[l->stack < n_stacks ? l->stack : n_stacks - 1];
                x->count++;
                x->bytes += l->size;
                x->byte_events += (double) l->size * (double) (to > from ? to - from : 0);
        }
        for (size_t k = 0; k < n_stacks; k++)
                if (v[k].count) {
                        v[m] = v[k];
                        v[m++].stack = (uint32_t) k;
                }
        qsort(v, m, sizeof(*v), cmp);
        for (size_t i = 0; i < m && i < o->top; i++)
                json_array_append_new(a, json_pack("{s:I,s:o,s:f,s:o}", "count", (json_int_t) v[i].count, "bytes",
                                                   u64(v[i].bytes), "byte_events", v[i].byte_events, "frames",
                                                   npf_analysis_stack(s, v[i].stack, o->max_frames)));
        free(v);
        return a;
}

/* The most of @start (before the first event) and the @n values at @v (after each), and
 * in @ret_index the first event after which it was reached, -1 for @start. */
static uint64_t peak_of(const uint64_t *v, size_t n, uint64_t start, int64_t *ret_index)
{
        uint64_t best = start;

        *ret_index = -1;
        for (size_t i = 0; i < n; i++)
                if (v[i] > best) {
                        best = v[i];
                        *ret_index = (int64_t) i;
                }
        return best;
}

/* --- the static plan ------------------------------------------------------------------------ */

typedef struct span {
        uint32_t from, to;      /* [from, to): positions, 0 before the first event */
} span_t;

typedef struct partition {
        uint64_t size;
        span_t *spans;          /* sorted, disjoint */
        size_t n, cap;
        size_t hint;            /* where fits() last looked: tensors of one size come by start */
} partition_t;

typedef struct tensor {
        uint64_t size;
        span_t span;
} tensor_t;

#define RADIX_BITS 11u
#define RADIX (1u << RADIX_BITS)
#define DIGITS ((64u + RADIX_BITS - 1) / RADIX_BITS)    /* of one 64-bit key */

/* Digit @d of the sort keys of @t: the start's first, then the inverted size's. */
static size_t tensor_digit(const tensor_t *t, unsigned d)
{
        uint64_t key = d < DIGITS ? (uint64_t) t->span.from : ~t->size;

        return (size_t) (key >> (d % DIGITS * RADIX_BITS)) & (RADIX - 1);
}

/*
 * Largest first, earliest first among equals: a stable radix sort, least significant digit
 * first, on the start and then on the inverted size. Only the digits in which the tensors
 * differ are sorted on (a start has two or three, a size three or four, of six each): one
 * pass finds them, one counts them all, and one per digit places the tensors, from @t into
 * @scratch (room for @n) and back.
 * Return: 0 and the sorted array (@t's or @scratch's) in @ret, or -ENOMEM.
 */
static int sort_tensors(tensor_t *t, tensor_t *scratch, size_t n, tensor_t **ret)
{
        size_t (*count)[RADIX] = calloc(2 * DIGITS, sizeof(*count));
        tensor_t *from = t, *to = scratch;
        uint64_t from_differs = 0, size_differs = 0;
        unsigned digit[2 * DIGITS], nd = 0;

        if (!count)
                return -ENOMEM;
        for (size_t i = 1; i < n; i++) {
                from_differs |= (uint64_t) (from[i].span.from ^ from[0].span.from);
                size_differs |= from[i].size ^ from[0].size;
        }
        for (unsigned d = 0; d < 2 * DIGITS; d++)
                if ((d < DIGITS ? from_differs : size_differs) >> (d % DIGITS * RADIX_BITS) & (RADIX - 1))
                        digit[nd++] = d;
        for (size_t i = 0; i < n; i++)
                for (unsigned k = 0; k < nd; k++)
                        count[k][tensor_digit(&from[i], digit[k])]++;
        for (unsigned k = 0; k < nd; k++) {
                size_t at = 0;
                for (size_t b = 0; b < RADIX; b++) {
                        size_t c = count[k][b];
                        count[k][b] = at;
                        at += c;
                }
                for (size_t i = 0; i < n; i++)
                        to[count[k][tensor_digit(&from[i], digit[k])]++] = from[i];
                tensor_t *x = from;
                from = to;
                to = x;
        }
        free(count);
        *ret = from;
        return 0;
}

/* Where @t would go in @p's spans, or SIZE_MAX when it overlaps one. The search gallops
 * from where the last one ended: the tensors of one size come by start, so it is nearly
 * always a step or two further on. */
static size_t fits(partition_t *p, span_t t)
{
        size_t n = p->n, h = p->hint < n ? p->hint : n, lo = 0, hi = h;

        /* Every span before lo ends by t.from; the first that does not is at most hi. */
        if (h == 0 || p->spans[h - 1].to <= t.from) {
                size_t step = 1;
                for (lo = h; lo + step <= n && p->spans[lo + step - 1].to <= t.from; step *= 2)
                        lo += step;
                hi = lo + step - 1 < n ? lo + step - 1 : n;
        }
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (p->spans[mid].to <= t.from)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        p->hint = lo;
        return lo < p->n && p->spans[lo].from < t.to ? SIZE_MAX : lo;
}

/*
 * Which partitions hold a span touching each bucket of W positions: a bit matrix that lets
 * first-fit skip, 64 partitions at a time, every partition busy in a bucket the tensor covers
 * whole, and take at once the first one idle in every bucket it touches. Only partitions
 * busy in an edge bucket need their spans searched.
 */
typedef struct occupancy {
        uint64_t *bits;         /* [word][bucket]: a word's buckets are contiguous */
        uint32_t *open;         /* [bucket]: the first word with a partition idle in it */
        size_t buckets, words, width;
} occupancy_t;

static int occupancy_grow(occupancy_t *o, size_t partitions)
{
        size_t words = o->words ? o->words : 1;

        while (words * 64 < partitions)
                words *= 2;
        if (words == o->words)
                return 0;
        if (words > SIZE_MAX / o->buckets / sizeof(uint64_t))
                return -ENOMEM;
        uint64_t *b = realloc(o->bits, words * o->buckets * sizeof(*b));
        if (!b)
                return -ENOMEM;
        memset(b + o->words * o->buckets, 0, (words - o->words) * o->buckets * sizeof(*b));
        o->bits = b;
        o->words = words;
        return 0;
}

static void occupancy_mark(occupancy_t *o, size_t p, span_t sp)
{
        size_t word = p / 64;
        uint64_t *row = o->bits + word * o->buckets;

        for (size_t k = (size_t) sp.from / o->width; k <= (size_t) (sp.to - 1) / o->width; k++) {
                row[k] |= UINT64_C(1) << (p % 64);
                /* Only the word just filled can move open[k]: the others' cells, a row apart
                 * in memory, are read only then. */
                if (o->open[k] != word || row[k] != ~UINT64_C(0))
                        continue;
                while (o->open[k] < o->words && o->bits[o->open[k] * o->buckets + k] == ~UINT64_C(0))
                        o->open[k]++;
        }
}

/* The first of @np partitions where @sp fits, @np when none; its insertion point in @ret_at. */
static size_t first_fit(const occupancy_t *o, partition_t *parts, size_t np, span_t sp, size_t *ret_at)
{
        size_t w = o->width;
        size_t first = (size_t) sp.from / w, last = (size_t) (sp.to - 1) / w;
        /* Buckets wholly inside the span: a partition busy in one of them conflicts. */
        size_t full_from = ((size_t) sp.from + w - 1) / w, full_to = (size_t) sp.to / w;   /* [full_from, full_to) */
        size_t start = 0;

        /* Every partition of a word below open[k] is busy in bucket k: a span covering k whole
         * fits none of them (many blocks alive through the whole trace fill words so). */
        for (size_t k = full_from; k < full_to; k++)
                start = o->open[k] > start ? o->open[k] : start;
        for (size_t word = start; word * 64 < np; word++) {
                const uint64_t *row = o->bits + word * o->buckets;
                uint64_t valid = np - word * 64 >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << (np - word * 64)) - 1;
                uint64_t full = 0, edge = row[first] | row[last];
                /* Eight buckets at a time, until every partition of the word is known busy. */
                size_t k = full_from;
                for (; k + 8 <= full_to && (full & valid) != valid; k += 8)
                        full |= row[k] | row[k + 1] | row[k + 2] | row[k + 3] |
                                row[k + 4] | row[k + 5] | row[k + 6] | row[k + 7];
                for (; k < full_to && (full & valid) != valid; k++)
                        full |= row[k];
                uint64_t idle = ~(full | edge) & valid, check = edge & ~full & valid;
                /* Partitions before the first idle one that may still fit, in order. */
                uint64_t before = idle ? (idle & -idle) - 1 : valid;
                for (uint64_t c = check & before; c; c &= c - 1) {
                        size_t p = word * 64 + (size_t) __builtin_ctzll(c), at = fits(&parts[p], sp);
                        if (at != SIZE_MAX) {
                                *ret_at = at;
                                return p;
                        }
                }
                if (idle) {
                        size_t p = word * 64 + (size_t) __builtin_ctzll(idle);
                        *ret_at = fits(&parts[p], sp);
                        return p;
                }
        }
        *ret_at = 0;
        return np;
}

/* The most bytes live at once over the positions 0 (before the first event) to n (after
 * the last) of @n_events, from the spans of the @nt tensors at @t; @delta has room for
 * n + 2 values. */
static uint64_t peak_live(const tensor_t *t, size_t nt, size_t n_events, int64_t *delta)
{
        uint64_t peak = 0;
        int64_t live = 0;

        memset(delta, 0, (n_events + 2) * sizeof(*delta));
        for (size_t i = 0; i < nt; i++) {
                delta[t[i].span.from] += (int64_t) t[i].size;
                delta[t[i].span.to] -= (int64_t) t[i].size;
        }
        for (size_t i = 0; i <= n_events; i++) {
                live += delta[i];
                if ((uint64_t) live > peak)
                        peak = (uint64_t) live;
        }
        return peak;
}

int npf_plan_lifetimes(const npf_replay_t *r, npf_plan_t *ret)
{
        tensor_t *t, *sorted;
        partition_t *parts = NULL;
        occupancy_t occ = { .width = 1 };
        size_t nt = 0, np = 0, cap = 0;
        npf_plan_t plan = { 0 };
        int e = -ENOMEM;

        /* Positions in 32 bits: a tensor and a span take 16 and 8 bytes, which the sort and
         * the search move and read hundreds of thousands of times. */
        if (r->n + 1 >= UINT32_MAX)
                return -E2BIG;
        /* With no inconsistency, the bytes live at each position are the bytes requested and
         * not yet freed after the event before it, which the replay counted (as it does the
         * blocks live, npf_replay_footprint_at()): their most is read there. Otherwise a
         * sweep over the spans finds it. One scratch array, fresh memory being dear: the
         * sweep's deltas, then the sort's second array. */
        bool counted = r->n_issues == 0 && r->unheld == 0;
        size_t scratch_size = !counted && (r->n + 2) * sizeof(int64_t) > (r->n_lives + 1) * sizeof(tensor_t)
                                      ? (r->n + 2) * sizeof(int64_t) : (r->n_lives + 1) * sizeof(tensor_t);
        void *scratch = malloc(scratch_size);
        if (!(t = malloc((r->n_lives + 1) * sizeof(*t))) || !scratch) {
                free(t);
                free(scratch);
                return -ENOMEM;
        }
        for (size_t i = 0; i < r->n_lives; i++) {
                const npf_replay_life_t *l = &r->lives[i];
                int64_t from = l->alloc < 0 ? 0 : l->alloc + 1;
                int64_t to = l->free_requested == NPF_AFTER_TRACE ? (int64_t) r->n + 1 : l->free_requested + 1;
                if (l->size && to > from)
                        t[nt++] = (tensor_t) { l->size, { (uint32_t) from, (uint32_t) to } };
        }
        int64_t peak_at;
        plan.peak_live_bytes = counted ? peak_of(r->requested, r->n, r->start_requested, &peak_at)
                                       : peak_live(t, nt, r->n, scratch);
        /* Positions 0 (before the first event) to n + 1, in about one bucket per 64 tensors,
         * from 64 to 16 Ki of them (the plan is the same whatever the width). A span is
         * marked bucket by bucket, and the blocks alive through a whole trace are hundreds:
         * a bucket per position made them most of a short trace's analysis (40 ms of a
         * 59,000-event snapshot, 4 ms in 230 buckets), while on the bench's 2 million events
         * (700,000 tensors) 8 Ki buckets of 256 positions take a quarter less time than 64. */
        size_t most = nt / 64 < 64 ? 64 : nt / 64 > 16384 ? 16384 : nt / 64;
        while ((r->n + 2) / occ.width > most)
                occ.width *= 2;
        occ.buckets = (r->n + 2) / occ.width + 1;
        occ.open = calloc(occ.buckets, sizeof(*occ.open));
        if (!occ.open)
                goto out;
        if (sort_tensors(t, scratch, nt, &sorted) < 0)
                goto out;
        for (size_t i = 0; i < nt; i++) {
                size_t at, p = first_fit(&occ, parts, np, sorted[i].span, &at);
                if (p == np) {
                        if (np == cap) {
                                cap = cap ? cap * 2 : 64;
                                partition_t *q = realloc(parts, cap * sizeof(*q));
                                if (!q)
                                        goto out;
                                parts = q;
                        }
                        if (occupancy_grow(&occ, np + 1) < 0)
                                goto out;
                        parts[np++] = (partition_t) { .size = sorted[i].size };
                        plan.plan_bytes += sorted[i].size;
                        at = 0;
                }
                partition_t *pp = &parts[p];
                if (pp->n == pp->cap) {
                        size_t c = pp->cap ? pp->cap * 2 : 8;
                        span_t *q = realloc(pp->spans, c * sizeof(*q));
                        if (!q)
                                goto out;
                        pp->spans = q;
                        pp->cap = c;
                }
                memmove(pp->spans + at + 1, pp->spans + at, (pp->n - at) * sizeof(span_t));
                pp->spans[at] = sorted[i].span;
                pp->n++;
                occupancy_mark(&occ, p, sorted[i].span);
        }
        plan.partitions = np;
        plan.tensors = nt;
        *ret = plan;
        e = 0;
out:
        for (size_t p = 0; p < np; p++)
                free(parts[p].spans);
        free(parts);
        free(occ.bits);
        free(occ.open);
        free(scratch);
        free(t);
        return e;
}

/* --- the per-device report ------------------------------------------------------------------ */

/* The plan takes most of a device's analysis time and reads only the lifetimes and the
 * requested counts: it runs beside the rest. */
typedef struct plan_job {
        const npf_replay_t *r;
        npf_plan_t plan;
        int result;
} plan_job_t;

static void *plan_job_run(void *userdata)
{
        plan_job_t *job = userdata;

        job->result = npf_plan_lifetimes(job->r, &job->plan);
        return NULL;
}

static json_t *peak_json(const npf_replay_t *r, const uint64_t *v, uint64_t start, int64_t *ret_index)
{
        uint64_t best = peak_of(v, r->n, start, ret_index);
        int64_t at = *ret_index;

        return json_pack("{s:o,s:o,s:o,s:s?}", "bytes", u64(best), "index", index_json(at), "time_us", time_of(r, at),
                         "action", at >= 0 ? npf_action_name(r->events[at].action) : NULL);
}

/* Moves the @k-th smallest of @n values to v[k], smaller ones before it, larger after
 * (Hoare's selection, median of three): a median and a p99 without sorting a million. */
static void select_nth(int64_t *v, size_t n, size_t k)
{
        size_t lo = 0, hi = n - 1;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int64_t a = v[lo], b = v[mid], c = v[hi];
                int64_t pivot = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
                size_t i = lo, j = hi;
                while (i <= j) {
                        while (v[i] < pivot)
                                i++;
                        while (v[j] > pivot)
                                j--;
                        if (i <= j) {
                                int64_t x = v[i];
                                v[i] = v[j];
                                v[j] = x;
                                i++;
                                if (j == 0)
                                        break;
                                j--;
                        }
                }
                if (k <= j)
                        hi = j;
                else if (k >= i)
                        lo = i;
                else
                        return;
        }
}

/* count, median, p99 and max of @n values (reordered here). */
static json_t *distribution(int64_t *v, size_t n)
{
        if (n == 0)
                return json_pack("{s:i,s:n,s:n,s:n}", "count", 0, "median", "p99", "max");
        size_t median = (n - 1) / 2, p99 = (size_t) ((double) (n - 1) * 0.99 + 0.5);
        int64_t max = v[0];
        for (size_t i = 1; i < n; i++)
                if (v[i] > max)
                        max = v[i];
        select_nth(v, n, median);
        int64_t m = v[median];
        /* Everything from the median on is at least it: the p99 is among them. */
        select_nth(v + median, n - median, p99 - median);
        return json_pack("{s:I,s:I,s:I,s:I}", "count", (json_int_t) n, "median", (json_int_t) m, "p99",
                         (json_int_t) v[p99], "max", (json_int_t) max);
}

static json_t *free_delay(const npf_replay_t *r)
{
        int64_t *ev = malloc((r->n_lives + 1) * sizeof(*ev)), *us = malloc((r->n_lives + 1) * sizeof(*us));
        size_t n = 0, nt = 0, pending = 0;
        json_t *j = NULL;

        if (ev && us) {
                for (size_t i = 0; i < r->n_lives; i++) {
                        const npf_replay_life_t *l = &r->lives[i];
                        if (l->free_requested >= 0 && l->free_requested != NPF_AFTER_TRACE &&
                            l->freed == NPF_AFTER_TRACE) {
                                pending++;
                                continue;
                        }
                        if (l->free_requested < 0 || l->free_requested == NPF_AFTER_TRACE ||
                            l->freed == NPF_AFTER_TRACE || r->events[l->freed].action != NPF_MEM_FREE_COMPLETED)
                                continue;
                        ev[n++] = l->freed - l->free_requested;
                        int64_t a = r->events[l->free_requested].time_us, b = r->events[l->freed].time_us;
                        if (a != NPF_TIME_UNKNOWN && b != NPF_TIME_UNKNOWN)
                                us[nt++] = b - a;
                }
                j = json_pack("{s:o,s:o,s:I}", "events", distribution(ev, n), "time_us",
                              nt ? distribution(us, nt) : json_null(), "pending_at_dump", (json_int_t) pending);
        }
        free(ev);
        free(us);
        return j;
}

static json_t *fragmentation(const npf_snapshot_t *s, const npf_replay_t *r, int64_t at)
{
        npf_replay_state_t *st;
        uint64_t free_bytes = 0, largest = 0, reserved = 0;

        if (npf_replay_footprint_at(s, r, at, &st) < 0)
                return NULL;
        /* Free ranges: each segment minus the live blocks in it, both sorted by address. */
        size_t b = 0;
        for (size_t i = 0; i < st->n_segments; i++) {
                const npf_replay_range_t *g = &st->segments[i];
                uint64_t cur = g->addr, end = g->addr + g->size;
                reserved += g->size;
                while (b < st->n_blocks && st->live[b].life.addr < g->addr)
                        b++;
                for (; b < st->n_blocks && st->live[b].life.addr < end; b++) {
                        const npf_replay_life_t *l = &st->live[b].life;
                        if (l->addr > cur) {
                                uint64_t gap = l->addr - cur;
                                free_bytes += gap;
                                if (gap > largest)
                                        largest = gap;
                        }
                        if (l->addr + l->footprint > cur)
                                cur = l->addr + l->footprint;
                }
                if (end > cur) {
                        free_bytes += end - cur;
                        if (end - cur > largest)
                                largest = end - cur;
                }
        }
        uint64_t allocated = at < 0 ? r->start_allocated : r->allocated[at];
        json_t *j = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:f,s:I}", "index", index_json(at), "reserved", u64(reserved),
                              "allocated", u64(allocated), "unallocated",
                              u64(reserved > allocated ? reserved - allocated : 0), "free_bytes", u64(free_bytes),
                              "largest_free", u64(largest), "largest_free_ratio",
                              free_bytes ? (double) largest / (double) free_bytes : 1.0, "segments",
                              (json_int_t) st->n_segments);
        npf_state_free(st);
        return j;
}

typedef struct stream_total {
        uint64_t stream, alloc_bytes, segment_bytes;
        size_t allocs, segments;
} stream_total_t;

static json_t *streams(const npf_replay_t *r)
{
        stream_total_t *v = NULL;
        size_t n = 0;
        json_t *a = json_array();

        for (size_t i = 0; i < r->n; i++) {
                const npf_mem_event_t *e = &r->events[i];
                bool alloc = e->action == NPF_MEM_ALLOC;
                bool seg = e->action == NPF_MEM_SEGMENT_ALLOC || e->action == NPF_MEM_SEGMENT_MAP;
                if (!alloc && !seg)
                        continue;
                size_t k;
                for (k = 0; k < n && v[k].stream != e->stream; k++)
                        ;
                if (k == n) {
                        if (n == 64)    /* more streams than anyone reads: the rest are not listed */
                                continue;
                        stream_total_t *p = realloc(v, (n + 1) * sizeof(*p));
                        if (!p)
                                break;
                        v = p;
                        v[n++] = (stream_total_t) { .stream = e->stream };
                }
                if (alloc) {
                        v[k].allocs++;
                        v[k].alloc_bytes += e->size;
                } else {
                        v[k].segments++;
                        v[k].segment_bytes += e->size;
                }
        }
        for (size_t k = 0; k < n; k++)
                json_array_append_new(a, json_pack("{s:o,s:I,s:o,s:I,s:o}", "stream", hex(v[k].stream), "allocs",
                                                   (json_int_t) v[k].allocs, "alloc_bytes", u64(v[k].alloc_bytes),
                                                   "segment_allocs", (json_int_t) v[k].segments, "segment_bytes",
                                                   u64(v[k].segment_bytes)));
        free(v);
        return a;
}

json_t *npf_analysis_device(const npf_snapshot_t *s, const npf_replay_t *r, const npf_analysis_opts_t *o)
{
        size_t actions[NPF_MEM__COUNT] = { 0 };
        uint64_t action_bytes[NPF_MEM__COUNT] = { 0 };
        json_t *d = json_object(), *acts = json_object(), *oom = json_array(), *issues = json_array();
        bool timed = false;
        int64_t first_time = INT64_MAX;
        int64_t peak_alloc, peak_active, peak_reserved;
        size_t *leak_idx = NULL, n_leaks = 0;
        plan_job_t job = { .r = r };
        npf_beside_t planner;

        if (!d || !acts || !oom || !issues)
                goto fail;
        npf_beside_start(&planner, plan_job_run, &job);
        for (size_t i = 0; i < r->n; i++) {
                const npf_mem_event_t *e = &r->events[i];
                actions[e->action]++;
                action_bytes[e->action] += e->size;
                if (e->time_us != NPF_TIME_UNKNOWN) {
                        timed = true;
                        if (e->time_us < first_time)
                                first_time = e->time_us;
                }
                if (e->action == NPF_MEM_OOM && json_array_size(oom) < o->top)
                        json_array_append_new(oom, json_pack("{s:I,s:o,s:o,s:o,s:o}", "index", (json_int_t) i, "size",
                                                             u64(e->size), "device_free", u64(e->addr), "time_us",
                                                             time_of(r, (int64_t) i), "frames",
                                                             npf_analysis_stack(s, e->stack, o->max_frames)));
        }
        for (int a = 0; a < NPF_MEM__COUNT; a++)
                if (actions[a])
                        json_object_set_new(acts, npf_action_name(a), json_integer((json_int_t) actions[a]));
        for (size_t i = 0; i < r->n_issues && i < NPF_REPLAY_ISSUES_KEPT; i++)
                json_array_append_new(issues, json_pack("{s:I,s:s,s:o,s:s}", "index", (json_int_t) r->issues[i].index,
                                                        "action", npf_action_name(r->issues[i].action), "addr",
                                                        hex(r->issues[i].addr), "what", r->issues[i].what));

        json_object_set_new(d, "device", json_integer(r->device));
        json_object_set_new(d, "events", json_integer((json_int_t) r->n));
        json_object_set_new(d, "timed", json_boolean(timed));
        json_object_set_new(d, "first_time_us", timed ? json_integer(first_time) : json_null());
        json_object_set_new(d, "actions", acts);
        json_object_set_new(d, "start", json_pack("{s:o,s:o,s:o,s:o,s:o}", "allocated", u64(r->start_allocated),
                                                  "requested", u64(r->start_requested), "active", u64(r->start_active),
                                                  "active_requested", u64(r->start_active_requested), "reserved",
                                                  u64(r->start_reserved)));
        json_object_set_new(d, "dump", json_pack("{s:o,s:o,s:o,s:o,s:o,s:I}", "allocated", u64(r->dump_allocated),
                                                 "requested", u64(r->dump_requested), "active", u64(r->dump_active),
                                                 "active_requested", u64(r->dump_active_requested), "reserved",
                                                 u64(r->dump_reserved), "segments", (json_int_t) r->dump_segments));
        int64_t peak_requested;
        json_object_set_new(d, "peak", json_pack("{s:o,s:o,s:o,s:o}",
                                                 "allocated", peak_json(r, r->allocated, r->start_allocated, &peak_alloc),
                                                 "requested", peak_json(r, r->requested, r->start_requested, &peak_requested),
                                                 "active", peak_json(r, r->active, r->start_active, &peak_active),
                                                 "reserved", peak_json(r, r->reserved, r->start_reserved, &peak_reserved)));
        /* The allocator's rounding: what the blocks hold beyond what was asked, at the allocated peak and at dump. */
        uint64_t pa = peak_alloc < 0 ? r->start_allocated : r->allocated[peak_alloc];
        uint64_t pr = peak_alloc < 0 ? r->start_requested : r->requested[peak_alloc];
        json_object_set_new(d, "rounding", json_pack("{s:s?,s:I,s:I,s:I,s:I,s:{s:o,s:o,s:o},s:{s:o,s:o,s:o}}",
                                                     "rule", npf_rounding_name(r->rounding),
                                                     "live_blocks", (json_int_t) r->rounding_blocks,
                                                     "obeying", (json_int_t) r->rounding_obeying,
                                                     "inferred", (json_int_t) r->inferred_sizes,
                                                     "unsized", (json_int_t) r->unsized,
                                                     "at_peak", "allocated", u64(pa), "requested", u64(pr),
                                                     "waste", u64(pa > pr ? pa - pr : 0),
                                                     "at_dump", "allocated", u64(r->dump_allocated), "requested",
                                                     u64(r->dump_requested), "waste",
                                                     u64(r->dump_allocated > r->dump_requested
                                                             ? r->dump_allocated - r->dump_requested : 0)));
        json_object_set_new(d, "live_at_peak", ranked(s, r, o, allocated_at, peak_alloc, NULL, NULL));
        json_t *leaks = ranked(s, r, o, leaked, (int64_t) r->workspace_events, &leak_idx, &n_leaks);
        if (leaks)
                json_object_set_new(leaks, "sites", sites(s, r, leak_idx, n_leaks, by_bytes_desc, o));
        json_object_set_new(d, "leaks", leaks);
        free(leak_idx);

        size_t ghosts_freed = 0, ghosts_alive = 0;
        uint64_t ghost_freed_bytes = 0, ghost_alive_bytes = 0;
        for (size_t i = 0; i < r->n_lives; i++) {
                const npf_replay_life_t *l = &r->lives[i];
                if (l->alloc != NPF_BEFORE_TRACE)
                        continue;
                if (l->free_requested == NPF_AFTER_TRACE && l->freed == NPF_AFTER_TRACE) {
                        ghosts_alive++;
                        ghost_alive_bytes += l->size;
                } else {
                        ghosts_freed++;
                        ghost_freed_bytes += l->size;
                }
        }
        json_object_set_new(d, "ghosts", json_pack("{s:I,s:o,s:o,s:o}", "count", (json_int_t) (ghosts_freed + ghosts_alive),
                                                   "bytes", u64(ghost_freed_bytes + ghost_alive_bytes),
                                                   "freed_in_trace", count_bytes(ghosts_freed, ghost_freed_bytes),
                                                   "alive_throughout", count_bytes(ghosts_alive, ghost_alive_bytes)));
        json_object_set_new(d, "fragmentation", fragmentation(s, r, peak_alloc));
        json_object_set_new(d, "segment_churn",
                            json_pack("{s:o,s:o,s:o,s:o}",
                                      "segment_alloc", count_bytes(actions[NPF_MEM_SEGMENT_ALLOC], action_bytes[NPF_MEM_SEGMENT_ALLOC]),
                                      "segment_free", count_bytes(actions[NPF_MEM_SEGMENT_FREE], action_bytes[NPF_MEM_SEGMENT_FREE]),
                                      "segment_map", count_bytes(actions[NPF_MEM_SEGMENT_MAP], action_bytes[NPF_MEM_SEGMENT_MAP]),
                                      "segment_unmap", count_bytes(actions[NPF_MEM_SEGMENT_UNMAP], action_bytes[NPF_MEM_SEGMENT_UNMAP])));
        json_object_set_new(d, "streams", streams(r));
        json_object_set_new(d, "free_delay", free_delay(r));
        json_object_set_new(d, "top_sites", sites(s, r, NULL, r->n_lives, by_weight_desc, o));
        npf_beside_wait(&planner);
        if (job.result == 0) {
                const npf_plan_t plan = job.plan;
                uint64_t peak_reserved_bytes = peak_reserved < 0 ? r->start_reserved : r->reserved[peak_reserved];
                json_object_set_new(d, "plan", json_pack("{s:o,s:o,s:f,s:o,s:f,s:I,s:I}",
                        "plan_bytes", u64(plan.plan_bytes), "peak_live_bytes", u64(plan.peak_live_bytes),
                        "plan_over_peak_live", plan.peak_live_bytes ? (double) plan.plan_bytes / (double) plan.peak_live_bytes : 1.0,
                        "peak_reserved_bytes", u64(peak_reserved_bytes),
                        "peak_reserved_over_plan", plan.plan_bytes ? (double) peak_reserved_bytes / (double) plan.plan_bytes : 0.0,
                        "partitions", (json_int_t) plan.partitions, "tensors", (json_int_t) plan.tensors));
        }
        json_object_set_new(d, "oom", oom);
        json_object_set_new(d, "workspace", count_bytes(r->workspace_segments, r->workspace_bytes));
        json_object_set_new(d, "inconsistencies", json_pack("{s:I,s:o}", "count", (json_int_t) r->n_issues, "items", issues));
        return d;
fail:
        json_decref(d);
        json_decref(acts);
        json_decref(oom);
        json_decref(issues);
        return NULL;
}
