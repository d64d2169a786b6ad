/* SPDX-License-Identifier: MIT */
/*
 * A rank's device timeline and its analyses. Every figure is a length of a union of
 * intervals: the intervals of a class are sorted by start and merged once, and the set
 * operations then walk the merged lists side by side.
 */
#include "lib/array.h"
#include "replay/device.h"
#include "replay/intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NO_STEP UINT32_MAX

typedef struct step {
        int64_t id, start, end;         /* the host's span */
        int64_t dev_start, dev_end;     /* the device range: see device.h */
} step_t;

struct npf_device {
        npf_intern_t *in;
        npf_dev_task_t *tasks;
        size_t n_tasks, cap_tasks;
        step_t *steps;
        size_t n_steps, cap_steps;
        npf_dev_link_t *links;
        size_t n_links, cap_links;
        int64_t rank, device, stage;
        npf_dev_framework_t framework;
};

typedef struct span {
        int64_t start, end;
} span_t;

/* A growable list of intervals, merged in place by merge(). */
typedef struct spans {
        span_t *v;
        size_t n, cap;
} spans_t;


/* @a + @b, held at INT64_MAX and INT64_MIN: sums of what a file says may be of any size. */
static int64_t sat_add(int64_t a, int64_t b)
{
        int64_t r;

        if (__builtin_add_overflow(a, b, &r))
                return b > 0 ? INT64_MAX : INT64_MIN;
        return r;
}

npf_device_t *npf_device_new(void)
{
        npf_device_t *d = calloc(1, sizeof(*d));

        if (!d || !(d->in = npf_intern_new())) {
                free(d);
                return NULL;
        }
        d->rank = d->device = d->stage = -1;
        return d;
}

npf_device_t *npf_device_free(npf_device_t *d)
{
        if (!d)
                return NULL;
        npf_intern_free(d->in);
        free(d->tasks);
        free(d->steps);
        free(d->links);
        free(d);
        return NULL;
}

int64_t npf_device_intern(npf_device_t *d, const char *s, size_t len)
{
        return npf_intern_string(d->in, s, len);
}

const char *npf_device_str(const npf_device_t *d, uint32_t id)
{
        return npf_intern_str(d->in, id);
}

int npf_device_add_task(npf_device_t *d, const npf_dev_task_t *t)
{
        npf_dev_task_t *p;

        if (d->n_tasks >= NPF_DEVICE_TASKS_MAX)
                return -E2BIG;
        if (npf_array_grow((void **) &d->tasks, &d->cap_tasks, d->n_tasks + 1, sizeof(*d->tasks), 64) < 0)
                return -ENOMEM;
        p = &d->tasks[d->n_tasks++];
        *p = *t;
        if (p->end < p->start)
                p->end = p->start;
        if (p->cls >= NPF_DEV_CLASSES)
                p->cls = NPF_DEV_OTHER;
        if (p->type >= NPF_DEV_TYPES)
                p->type = NPF_DEV_TYPE_OTHER;
        return 0;
}

int npf_device_add_step(npf_device_t *d, int64_t id, int64_t start, int64_t end)
{
        if (d->n_steps >= NPF_DEVICE_STEPS_MAX)
                return -E2BIG;
        if (npf_array_grow((void **) &d->steps, &d->cap_steps, d->n_steps + 1, sizeof(*d->steps), 64) < 0)
                return -ENOMEM;
        d->steps[d->n_steps++] = (step_t) { .id = id, .start = start, .end = end < start ? start : end };
        return 0;
}

int npf_device_add_link(npf_device_t *d, uint32_t group, uint32_t link, uint64_t bytes, int64_t time_ns,
                        uint64_t count)
{
        npf_dev_link_t *l;

        for (size_t i = 0; i < d->n_links; i++) {
                l = &d->links[i];
                if (l->group == group && l->link == link) {
                        l->bytes = l->bytes + bytes < l->bytes ? UINT64_MAX : l->bytes + bytes;
                        l->time_ns = sat_add(l->time_ns, time_ns);
                        l->count += count;
                        return 0;
                }
        }
        if (d->n_links >= 65536)
                return -E2BIG;
        if (npf_array_grow((void **) &d->links, &d->cap_links, d->n_links + 1, sizeof(*d->links), 64) < 0)
                return -ENOMEM;
        d->links[d->n_links++] = (npf_dev_link_t) { group, link, bytes, time_ns, count };
        return 0;
}

void npf_device_set_rank(npf_device_t *d, int64_t rank, int64_t device, npf_dev_framework_t framework)
{
        d->rank = rank;
        d->device = device;
        d->framework = framework;
}

void npf_device_set_stage(npf_device_t *d, int64_t stage)
{
        d->stage = stage;
}

int64_t npf_device_rank(const npf_device_t *d) { return d->rank; }
int64_t npf_device_device(const npf_device_t *d) { return d->device; }
int64_t npf_device_stage(const npf_device_t *d) { return d->stage; }
npf_dev_framework_t npf_device_framework(const npf_device_t *d) { return d->framework; }

const char *npf_device_framework_name(npf_dev_framework_t f)
{
        switch (f) {
        case NPF_DEV_FW_TORCH_NPU: return "torch_npu";
        case NPF_DEV_FW_MINDSPORE: return "mindspore";
        case NPF_DEV_FW_TORCH: return "torch";
        default: return "unknown";
        }
}

const char *npf_device_type_name(npf_dev_type_t t)
{
        static const char *const names[NPF_DEV_TYPES] = {
                [NPF_DEV_TYPE_AI_CORE] = "AI Core",
                [NPF_DEV_TYPE_AI_VECTOR] = "AI Vector",
                [NPF_DEV_TYPE_AI_CPU] = "AI CPU",
                [NPF_DEV_TYPE_KERNEL] = "compute",
                [NPF_DEV_TYPE_COMM] = "communication",
                [NPF_DEV_TYPE_MEMORY] = "memory",
                [NPF_DEV_TYPE_OTHER] = "other",
        };
        return (unsigned) t < NPF_DEV_TYPES ? names[t] : "other";
}

size_t npf_device_tasks(const npf_device_t *d, const npf_dev_task_t **ret)
{
        *ret = d->tasks;
        return d->n_tasks;
}

size_t npf_device_links(const npf_device_t *d, const npf_dev_link_t **ret)
{
        *ret = d->links;
        return d->n_links;
}

/* --- interval sets --------------------------------------------------------------------------- */

static int spans_add(spans_t *s, int64_t start, int64_t end)
{
        if (npf_array_grow((void **) &s->v, &s->cap, s->n + 1, sizeof(*s->v), 64) < 0)
                return -ENOMEM;
        s->v[s->n++] = (span_t) { start, end };
        return 0;
}

static int by_start(const void *a, const void *b)
{
        const span_t *x = a, *y = b;

        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return (x->end > y->end) - (x->end < y->end);
}

/* Sorts @s and merges what overlaps or touches (torch_npu's merge_continuous_intervals()). */
static void merge(spans_t *s)
{
        size_t n = 0;

        if (s->n < 2)
                return;
        qsort(s->v, s->n, sizeof(*s->v), by_start);
        for (size_t i = 1; i < s->n; i++) {
                if (s->v[i].start <= s->v[n].end) {
                        if (s->v[i].end > s->v[n].end)
                                s->v[n].end = s->v[i].end;
                } else {
                        s->v[++n] = s->v[i];
                }
        }
        s->n = n + 1;
}

static int64_t length(const spans_t *s)
{
        int64_t sum = 0;

        for (size_t i = 0; i < s->n; i++)
                sum += s->v[i].end - s->v[i].start;
        return sum;
}

/* The length of the intersection of two merged lists. */
static int64_t overlap(const spans_t *a, const spans_t *b)
{
        int64_t sum = 0;
        size_t i = 0, j = 0;

        while (i < a->n && j < b->n) {
                int64_t lo = a->v[i].start > b->v[j].start ? a->v[i].start : b->v[j].start;
                int64_t hi = a->v[i].end < b->v[j].end ? a->v[i].end : b->v[j].end;
                if (hi > lo)
                        sum += hi - lo;
                if (a->v[i].end < b->v[j].end)
                        i++;
                else
                        j++;
        }
        return sum;
}

/* The first start and last end of two merged lists, and the length of their union. */
static void hull(const spans_t *a, const spans_t *b, int64_t *ret_span, int64_t *ret_union)
{
        int64_t lo = INT64_MAX, hi = INT64_MIN;

        if (a->n) {
                lo = a->v[0].start;
                hi = a->v[a->n - 1].end;
        }
        if (b->n) {
                if (b->v[0].start < lo)
                        lo = b->v[0].start;
                if (b->v[b->n - 1].end > hi)
                        hi = b->v[b->n - 1].end;
        }
        *ret_span = a->n || b->n ? hi - lo : 0;
        *ret_union = length(a) + length(b) - overlap(a, b);
}

/* --- steps ------------------------------------------------------------------------------------- */

static int steps_by_start(const void *a, const void *b)
{
        const step_t *x = a, *y = b;

        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return (x->id > y->id) - (x->id < y->id);
}

/* The step (in @steps, sorted by start) whose host span holds @t, or NO_STEP. */
static uint32_t step_holding(const step_t *steps, size_t n, int64_t t)
{
        size_t lo = 0, hi = n;

        while (lo < hi) {               /* the last step starting at or before t */
                size_t mid = lo + (hi - lo) / 2;
                if (steps[mid].start <= t)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0 || t > steps[lo - 1].end)
                return NO_STEP;
        return (uint32_t) (lo - 1);
}

static bool counted(const npf_dev_task_t *t)
{
        return t->cls == NPF_DEV_COMPUTE || t->cls == NPF_DEV_COMM || t->cls == NPF_DEV_MEMORY;
}

/*
 * Which step each task belongs to (NO_STEP for none), into @of (n_tasks entries); fills the
 * device ranges of @steps (a sorted copy).
 */
static void assign(const npf_device_t *d, step_t *steps, size_t n, uint32_t *of)
{
        for (size_t s = 0; s < n; s++) {
                steps[s].dev_start = INT64_MAX;
                steps[s].dev_end = steps[s].end;
        }
        /* Every launched task spans the range, whatever its class (torch_npu's step range
         * is that of all the tasks of its node-level calls); only counted ones are figures. */
        for (size_t i = 0; i < d->n_tasks; i++) {
                const npf_dev_task_t *t = &d->tasks[i];
                of[i] = NO_STEP;
                if (t->launch == NPF_DEVICE_NO_TIME)
                        continue;
                if ((of[i] = step_holding(steps, n, t->launch)) == NO_STEP)
                        continue;
                step_t *s = &steps[of[i]];
                if (t->start < s->dev_start)
                        s->dev_start = t->start;
                if (t->end > s->dev_end)
                        s->dev_end = t->end;
        }
        for (size_t s = 0; s < n; s++)
                if (steps[s].dev_start == INT64_MAX)
                        steps[s].dev_start = steps[s].start;
        /* The rest by their start, in the first step whose device range holds it. */
        for (size_t i = 0; i < d->n_tasks; i++) {
                const npf_dev_task_t *t = &d->tasks[i];
                if (!counted(t) || t->launch != NPF_DEVICE_NO_TIME)
                        continue;
                for (size_t s = 0; s < n; s++) {
                        if (steps[s].dev_start <= t->start && t->start < steps[s].dev_end) {
                                of[i] = (uint32_t) s;
                                break;
                        }
                }
        }
}

typedef struct classes {
        spans_t compute, comm, memory;
} classes_t;

static void classes_clear(classes_t *c)
{
        c->compute.n = c->comm.n = c->memory.n = 0;
}

static void classes_free(classes_t *c)
{
        free(c->compute.v);
        free(c->comm.v);
        free(c->memory.v);
}

static int classes_add(classes_t *c, const npf_dev_task_t *t)
{
        switch (t->cls) {
        case NPF_DEV_COMPUTE: return spans_add(&c->compute, t->start, t->end);
        case NPF_DEV_COMM: return spans_add(&c->comm, t->start, t->end);
        case NPF_DEV_MEMORY: return spans_add(&c->memory, t->start, t->end);
        default: return 0;
        }
}

/* One step's figures from its classes (merged here) and summed receives. */
static void figures(classes_t *c, int64_t bubble, npf_dev_breakdown_t *b)
{
        int64_t span, both;

        merge(&c->compute);
        merge(&c->comm);
        merge(&c->memory);
        b->computing = length(&c->compute);
        b->communication = length(&c->comm);
        b->overlapped = overlap(&c->comm, &c->compute);
        b->not_overlapped = b->communication - b->overlapped;
        b->memory = length(&c->memory);
        hull(&c->compute, &c->comm, &span, &both);
        b->free = span - both;
        b->bubble = bubble;
        b->stage = span - bubble;
}

/* The first start of compute or communication (merged lists), or INT64_MAX. */
static int64_t first_task(const classes_t *c)
{
        int64_t t = INT64_MAX;

        if (c->compute.n)
                t = c->compute.v[0].start;
        if (c->comm.n && c->comm.v[0].start < t)
                t = c->comm.v[0].start;
        return t;
}

int64_t npf_device_breakdown(const npf_device_t *d, npf_dev_breakdown_t **ret)
{
        npf_dev_breakdown_t *out = NULL;
        classes_t c = { 0 };
        step_t *steps = NULL;
        uint32_t *of = NULL;
        size_t *first = NULL, *next = NULL, n = d->n_steps, n_out = 0;
        int64_t r = -ENOMEM;

        if (n) {
                if (!(steps = malloc(n * sizeof(*steps))))
                        goto fail;
                memcpy(steps, d->steps, n * sizeof(*steps));
                qsort(steps, n, sizeof(*steps), steps_by_start);
        }
        if (!(of = malloc((d->n_tasks + 1) * sizeof(*of))) || !(out = calloc(n + 1, sizeof(*out))) ||
            !(first = malloc((n + 1) * sizeof(*first))) || !(next = malloc((d->n_tasks + 1) * sizeof(*next))))
                goto fail;
        assign(d, steps, n, of);
        /* The tasks of each step as a list (the last list holds those of no step). */
        for (size_t s = 0; s <= n; s++)
                first[s] = SIZE_MAX;
        for (size_t i = d->n_tasks; i-- > 0;) {
                size_t s = of[i] == NO_STEP ? n : of[i];
                if (!counted(&d->tasks[i]))
                        continue;
                next[i] = first[s];
                first[s] = i;
        }
        for (size_t s = 0; s <= n; s++) {
                npf_dev_breakdown_t *b = &out[n_out];
                int64_t bubble = 0;
                /* Tasks of no step make a row only where there are no steps at all. */
                if (s == n && (n > 0 || first[s] == SIZE_MAX))
                        break;
                classes_clear(&c);
                for (size_t i = first[s]; i != SIZE_MAX; i = next[i]) {
                        const npf_dev_task_t *t = &d->tasks[i];
                        if (classes_add(&c, t) < 0)
                                goto fail;
                        if (t->cls == NPF_DEV_COMM && t->receive)
                                bubble = sat_add(bubble, t->end - t->start);
                        b->tasks++;
                }
                figures(&c, bubble, b);
                if (s < n) {
                        int64_t f = first_task(&c);
                        b->step = steps[s].id;
                        b->host_ns = steps[s].end - steps[s].start;
                        b->preparing = f == INT64_MAX ? 0 : f - steps[s].start;
                } else {
                        b->step = -1;
                }
                n_out++;
        }
        *ret = out;
        out = NULL;
        r = (int64_t) n_out;
fail:
        classes_free(&c);
        free(out);
        free(steps);
        free(of);
        free(first);
        free(next);
        return r;
}

/* --- the whole window, as Holistic Trace Analysis sees it ------------------------------------ */

/*
 * The window HTA analyses (facebookresearch/HolisticTraceAnalysis, hta/common/trace.py,
 * the last-step filter): with two steps or more, only the tasks launched before the last
 * step begins, which drops the tasks of the last step and those whose launch is not in the
 * trace. Return: the start of the last step, or INT64_MAX when every task counts.
 */
static int64_t hta_cut(const npf_device_t *d)
{
        int64_t last = INT64_MIN, first_id = 0;
        bool two = false;

        for (size_t i = 0; i < d->n_steps; i++) {
                if (i == 0)
                        first_id = d->steps[i].id;
                else if (d->steps[i].id != first_id)
                        two = true;
                if (d->steps[i].start > last)
                        last = d->steps[i].start;
        }
        return two ? last : INT64_MAX;
}

static bool in_hta_window(const npf_dev_task_t *t, int64_t cut)
{
        return counted(t) && (cut == INT64_MAX || (t->launch != NPF_DEVICE_NO_TIME && t->launch < cut));
}

/*
 * HTA's times are whole microseconds: where any timestamp has a fraction, each event is
 * rounded inwards, its start up and its end down (hta/common/trace_parser.py).
 */
static bool fractional(const npf_device_t *d, int64_t cut)
{
        for (size_t i = 0; i < d->n_tasks; i++)
                if (in_hta_window(&d->tasks[i], cut) && d->tasks[i].start % 1000 != 0)
                        return true;
        return false;
}

static int hta_add(spans_t *s, const npf_dev_task_t *t, bool round)
{
        int64_t start = t->start, end = t->end;

        if (round) {
                start = start >= 0 ? (start + 999) / 1000 * 1000 : -(-start / 1000 * 1000);
                end = end >= 0 ? end / 1000 * 1000 : -((-end + 999) / 1000 * 1000);
                if (end < start)
                        end = start;
        }
        return spans_add(s, start, end);
}

/* The compute, communication and all counted tasks of HTA's window, merged. */
static int hta_spans(const npf_device_t *d, spans_t *all, spans_t *compute, spans_t *comm)
{
        int64_t cut = hta_cut(d);
        bool round = fractional(d, cut);

        for (size_t i = 0; i < d->n_tasks; i++) {
                const npf_dev_task_t *t = &d->tasks[i];
                if (!in_hta_window(t, cut))
                        continue;
                if (hta_add(all, t, round) < 0 || (t->cls == NPF_DEV_COMPUTE && hta_add(compute, t, round) < 0) ||
                    (t->cls == NPF_DEV_COMM && hta_add(comm, t, round) < 0))
                        return -ENOMEM;
        }
        merge(all);
        merge(compute);
        merge(comm);
        return 0;
}

/* hta/analyzers/breakdown_analysis.py, get_temporal_breakdown(). */
int npf_device_temporal(const npf_device_t *d, npf_dev_temporal_t *ret)
{
        spans_t all = { 0 }, compute = { 0 }, comm = { 0 };
        npf_dev_temporal_t t = { 0 };
        int r;

        if ((r = hta_spans(d, &all, &compute, &comm)) < 0)
                goto fail;
        r = -ENODATA;
        if (!all.n)
                goto fail;
        t.span = all.v[all.n - 1].end - all.v[0].start;
        t.compute = length(&compute);
        t.idle = t.span - length(&all);
        t.non_compute = t.span - t.compute - t.idle;
        if (t.span > 0) {
                t.idle_pct = 100.0 * (double) t.idle / (double) t.span;
                t.compute_pct = 100.0 * (double) t.compute / (double) t.span;
                t.non_compute_pct = 100.0 * (double) t.non_compute / (double) t.span;
        }
        *ret = t;
        r = 0;
fail:
        free(all.v);
        free(compute.v);
        free(comm.v);
        return r;
}

/* hta/analyzers/communication_analysis.py, get_comm_comp_overlap(). */
double npf_device_overlap_pct(const npf_device_t *d)
{
        spans_t all = { 0 }, compute = { 0 }, comm = { 0 };
        double pct = -1;

        if (hta_spans(d, &all, &compute, &comm) == 0 && length(&comm) > 0)
                pct = 100.0 * (double) overlap(&comm, &compute) / (double) length(&comm);
        free(all.v);
        free(compute.v);
        free(comm.v);
        return pct;
}

/* --- kernels and collectives --------------------------------------------------------------- */

typedef struct keyed {
        uint64_t key;                   /* what groups it: (name, type) or (op, group) */
        int64_t dur;
        uint32_t task;
} keyed_t;

static int by_key_dur(const void *a, const void *b)
{
        const keyed_t *x = a, *y = b;

        if (x->key != y->key)
                return x->key < y->key ? -1 : 1;
        return (x->dur > y->dur) - (x->dur < y->dur);
}

static int kernels_by_total(const void *a, const void *b)
{
        const npf_dev_kernel_t *x = a, *y = b;

        if (x->total != y->total)
                return x->total > y->total ? -1 : 1;
        return (x->name > y->name) - (x->name < y->name);
}

int64_t npf_device_kernels(const npf_device_t *d, npf_dev_kernel_t **ret)
{
        keyed_t *k = malloc((d->n_tasks + 1) * sizeof(*k));
        npf_dev_kernel_t *out = NULL;
        size_t n = 0, n_out = 0;

        if (!k)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_tasks; i++) {
                const npf_dev_task_t *t = &d->tasks[i];
                if (counted(t))
                        k[n++] = (keyed_t) { (uint64_t) t->name << 8 | t->type, t->end - t->start, (uint32_t) i };
        }
        qsort(k, n, sizeof(*k), by_key_dur);
        if (!(out = calloc(n + 1, sizeof(*out)))) {
                free(k);
                return -ENOMEM;
        }
        for (size_t i = 0, j; i < n; i = j) {
                npf_dev_kernel_t *o = &out[n_out++];
                for (j = i; j < n && k[j].key == k[i].key; j++)
                        o->total = sat_add(o->total, k[j].dur);
                o->name = (uint32_t) (k[i].key >> 8);
                o->type = (uint8_t) (k[i].key & 0xff);
                o->count = j - i;
                o->mean = o->total / (int64_t) o->count;
                o->max = k[j - 1].dur;
                /* Nearest rank: the smallest duration with 90% of them at or below it. */
                o->p90 = k[i + (size_t) ((o->count * 9 + 9) / 10) - 1].dur;
        }
        free(k);
        qsort(out, n_out, sizeof(*out), kernels_by_total);
        *ret = out;
        return (int64_t) n_out;
}

/* The op type of a collective's name: "hcom_allReduce__586_0_1" is "hcom_allReduce", an
 * NCCL kernel's name loses its argument list. */
static size_t op_type_len(const char *name)
{
        const char *cut;

        if (!strncmp(name, "hcom_", 5) && (cut = strstr(name + 5, "__")))
                return (size_t) (cut - name);
        if ((cut = strchr(name, '(')))
                return (size_t) (cut - name);
        return strlen(name);
}

static int collectives_by_total(const void *a, const void *b)
{
        const npf_dev_collective_t *x = a, *y = b;

        if (x->total != y->total)
                return x->total > y->total ? -1 : 1;
        return (x->name > y->name) - (x->name < y->name);
}

int64_t npf_device_collectives(npf_device_t *d, npf_dev_collective_t **ret)
{
        keyed_t *k = malloc((d->n_tasks + 1) * sizeof(*k));
        npf_dev_collective_t *out = NULL;
        size_t n = 0, n_out = 0;
        int64_t r = -ENOMEM;

        if (!k)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_tasks; i++) {
                const npf_dev_task_t *t = &d->tasks[i];
                const char *name = npf_intern_str(d->in, t->name);
                char type[1024];
                int64_t op;
                if (t->cls != NPF_DEV_COMM)
                        continue;
                /* A copy: interning may move the table's strings, @name among them. */
                size_t len = op_type_len(name);
                len = len < sizeof(type) ? len : sizeof(type) - 1;
                memcpy(type, name, len);
                if ((op = npf_intern_string(d->in, type, len)) < 0) {
                        r = op;
                        goto fail;
                }
                k[n++] = (keyed_t) { (uint64_t) op << 32 | t->group, t->end - t->start, (uint32_t) i };
        }
        qsort(k, n, sizeof(*k), by_key_dur);
        if (!(out = calloc(n + 1, sizeof(*out))))
                goto fail;
        for (size_t i = 0, j; i < n; i = j) {
                npf_dev_collective_t *o = &out[n_out++];
                for (j = i; j < n && k[j].key == k[i].key; j++) {
                        uint64_t b = d->tasks[k[j].task].bytes;
                        o->total = sat_add(o->total, k[j].dur);
                        o->bytes = o->bytes + b < o->bytes ? UINT64_MAX : o->bytes + b;
                }
                o->name = (uint32_t) (k[i].key >> 32);
                o->group = (uint32_t) k[i].key;
                o->count = j - i;
                o->max = k[j - 1].dur;
        }
        qsort(out, n_out, sizeof(*out), collectives_by_total);
        *ret = out;
        out = NULL;
        r = (int64_t) n_out;
fail:
        free(out);
        free(k);
        return r;
}
