/* SPDX-License-Identifier: MIT */
/* The device section: JSON first, and the text rendered from the JSON, so the two agree. */
#include "replay/devreport.h"
#include "replay/svg-steps.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define US(ns) ((double) (ns) / 1000.0)

/* The parts of a step that add up to its device span, in the order they are told; the
 * communication not overlapped less the pipeline receives (bubble), which it holds. */
static const char *const parts[] = { "computing_us", "communication_not_overlapped_us", "free_us", "bubble_us" };
static const char *const part_words[] = { "computing", "communication not overlapped", "idle (free)",
                                          "pipeline bubble" };

static json_t *step_json(const npf_dev_breakdown_t *b)
{
        return json_pack("{s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "step", (json_int_t) b->step,
                         "computing_us", US(b->computing), "communication_us", US(b->communication),
                         "communication_not_overlapped_us", US(b->not_overlapped), "overlapped_us", US(b->overlapped),
                         "free_us", US(b->free), "bubble_us", US(b->bubble), "preparing_us", US(b->preparing),
                         "stage_us", US(b->stage), "memory_us", US(b->memory));
}

static json_t *steps_json(const npf_dev_breakdown_t *rows, size_t n)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, step_json(&rows[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

json_t *npf_devreport_rank_steps(int64_t rank, npf_dev_framework_t fw, const npf_dev_breakdown_t *rows, size_t n,
                                 const char *source)
{
        json_t *steps = steps_json(rows, n);

        if (!steps)
                return NULL;
        return json_pack("{s:I,s:n,s:s,s:n,s:s,s:o,s:n,s:n,s:[],s:[],s:[]}", "rank", (json_int_t) rank, "device",
                         "framework", npf_device_framework_name(fw), "stage", "source", source, "steps", steps,
                         "temporal", "comm_comp_overlap_pct", "kernels", "collectives", "links");
}

static json_t *kernels_json(const npf_device_t *d, size_t top)
{
        npf_dev_kernel_t *k;
        int64_t n = npf_device_kernels(d, &k);
        json_t *a;

        if (n < 0 || !(a = json_array())) {
                if (n >= 0)
                        free(k);
                return NULL;
        }
        for (int64_t i = 0; i < n && (size_t) i < top; i++)
                json_array_append_new(a, json_pack("{s:s,s:s,s:I,s:f,s:f,s:f,s:f}", "name", npf_device_str(d, k[i].name),
                                                   "type", npf_device_type_name(k[i].type), "count", (json_int_t) k[i].count,
                                                   "total_us", US(k[i].total), "mean_us", US(k[i].mean), "p90_us",
                                                   US(k[i].p90), "max_us", US(k[i].max)));
        free(k);
        return a;
}

static json_t *collectives_json(npf_device_t *d, size_t top)
{
        npf_dev_collective_t *c;
        int64_t n = npf_device_collectives(d, &c);
        json_t *a;

        if (n < 0 || !(a = json_array())) {
                if (n >= 0)
                        free(c);
                return NULL;
        }
        for (int64_t i = 0; i < n && (size_t) i < top; i++) {
                json_t *bw = c[i].bytes && c[i].total > 0 ? json_real((double) c[i].bytes / (double) c[i].total) : json_null();
                json_array_append_new(a, json_pack("{s:s,s:s,s:I,s:f,s:f,s:I,s:o}", "name", npf_device_str(d, c[i].name),
                                                   "group", npf_device_str(d, c[i].group), "count", (json_int_t) c[i].count,
                                                   "total_us", US(c[i].total), "max_us", US(c[i].max), "bytes",
                                                   (json_int_t) c[i].bytes, "algbw_gbps", bw));
        }
        free(c);
        return a;
}

static json_t *links_json(const npf_device_t *d)
{
        const npf_dev_link_t *l;
        size_t n = npf_device_links(d, &l);
        json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++) {
                /* Bytes per nanosecond are GB/s. */
                json_t *bw = l[i].time_ns > 0 ? json_real((double) l[i].bytes / (double) l[i].time_ns) : json_null();
                json_array_append_new(a, json_pack("{s:s,s:s,s:I,s:f,s:I,s:o}", "group", npf_device_str(d, l[i].group),
                                                   "link", npf_device_str(d, l[i].link), "bytes", (json_int_t) l[i].bytes,
                                                   "time_us", US(l[i].time_ns), "transfers", (json_int_t) l[i].count,
                                                   "bandwidth_gbps", bw));
        }
        return a;
}

json_t *npf_devreport_rank(npf_device_t *d, const char *source, size_t top)
{
        npf_dev_breakdown_t *rows;
        npf_dev_temporal_t t;
        int64_t n = npf_device_breakdown(d, &rows);
        double overlap = npf_device_overlap_pct(d);
        json_t *o, *temporal = json_null();

        if (n < 0)
                return NULL;
        if (npf_device_temporal(d, &t) == 0)
                temporal = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "span_us", US(t.span), "idle_us", US(t.idle),
                                     "compute_us", US(t.compute), "non_compute_us", US(t.non_compute), "idle_pct",
                                     t.idle_pct, "compute_pct", t.compute_pct, "non_compute_pct", t.non_compute_pct);
        o = npf_devreport_rank_steps(npf_device_rank(d), npf_device_framework(d), rows, (size_t) n, source);
        free(rows);
        if (!o) {
                json_decref(temporal);
                return NULL;
        }
        if (npf_device_device(d) >= 0)
                json_object_set_new(o, "device", json_integer(npf_device_device(d)));
        if (npf_device_stage(d) >= 0)
                json_object_set_new(o, "stage", json_integer(npf_device_stage(d)));
        json_object_set_new(o, "temporal", temporal);
        json_object_set_new(o, "comm_comp_overlap_pct", overlap >= 0 ? json_real(overlap) : json_null());
        json_object_set_new(o, "kernels", kernels_json(d, top));
        json_object_set_new(o, "collectives", collectives_json(d, top));
        json_object_set_new(o, "links", links_json(d));
        return o;
}

static double num(const json_t *o, const char *key)
{
        return json_number_value(json_object_get(o, key));
}

static int by_double(const void *a, const void *b)
{
        double x = *(const double *) a, y = *(const double *) b;
        return (x > y) - (x < y);
}

double npf_devreport_median(double *v, size_t n)
{
        if (n == 0)
                return 0;
        qsort(v, n, sizeof(*v), by_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double npf_devreport_steps_median(const json_t *steps, const char *key)
{
        size_t n = json_array_size(steps), i;
        double *v = malloc((n + 1) * sizeof(*v)), m;
        json_t *s;

        if (!v)
                return 0;
        json_array_foreach (steps, i, s)
                v[i] = num(s, key);
        m = npf_devreport_median(v, n);
        free(v);
        return m;
}

/* "1.5 ms" */
static const char *dur(double us, char *buf, size_t size)
{
        if (us >= 1e6)
                snprintf(buf, size, "%.2f s", us / 1e6);
        else if (us >= 1e3)
                snprintf(buf, size, "%.1f ms", us / 1e3);
        else
                snprintf(buf, size, "%.1f us", us);
        return buf;
}

const char *npf_devreport_answer(const json_t *rank, char *buf, size_t size)
{
        const json_t *steps = json_object_get(rank, "steps"), *temporal = json_object_get(rank, "temporal");
        size_t n = json_array_size(steps), best = 0;
        double v[4], span = 0;
        char when[64], a[24], b[24];

        if (n == 0) {
                snprintf(buf, size, "no device activity in this window");
                return buf;
        }
        for (size_t i = 0; i < 4; i++)
                v[i] = npf_devreport_steps_median(steps, parts[i]);
        /* Pipeline receives are communication too: told apart, they are not counted twice. */
        v[1] = v[1] > v[3] ? v[1] - v[3] : 0;
        for (size_t i = 0; i < 4; i++) {
                span += v[i];
                if (v[i] > v[best])
                        best = i;
        }
        if (n == 1 && json_integer_value(json_object_get(json_array_get(steps, 0), "step")) >= 0)
                snprintf(when, sizeof(when), "step %" JSON_INTEGER_FORMAT,
                         json_integer_value(json_object_get(json_array_get(steps, 0), "step")));
        else if (n == 1)
                snprintf(when, sizeof(when), "the window");
        else
                snprintf(when, sizeof(when), "the median of %zu steps", n);
        if (span <= 0) {
                snprintf(buf, size, "%s: no compute or communication on the device", when);
                return buf;
        }
        int len = snprintf(buf, size, "%s: %.0f%% of the device's step is %s (%s of %s)", when, 100.0 * v[best] / span,
                           part_words[best], dur(v[best], a, sizeof(a)), dur(span, b, sizeof(b)));
        if (json_is_object(temporal) && len > 0 && (size_t) len < size) {
                double overlap = num(rank, "comm_comp_overlap_pct");
                int more = snprintf(buf + len, size - (size_t) len, "; over the window the device was idle %.1f%%, "
                                    "computing %.1f%%, communicating or copying %.1f%%", num(temporal, "idle_pct"),
                                    num(temporal, "compute_pct"), num(temporal, "non_compute_pct"));
                if (more > 0 && (size_t) (len += more) < size && json_is_number(json_object_get(rank, "comm_comp_overlap_pct")))
                        snprintf(buf + len, size - (size_t) len, "; computation hid %.0f%% of communication", overlap);
        }
        return buf;
}

static void rank_text(FILE *f, const json_t *r, size_t top)
{
        const json_t *steps = json_object_get(r, "steps"), *x;
        char answer[512], a[24], b[24];
        size_t i;

        fprintf(f, "\nRank %" JSON_INTEGER_FORMAT " (%s", json_integer_value(json_object_get(r, "rank")),
                json_string_value(json_object_get(r, "framework")));
        if (json_is_integer(json_object_get(r, "stage")))
                fprintf(f, ", stage %" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(r, "stage")));
        fprintf(f, "): %s\n  %s\n", json_string_value(json_object_get(r, "source")),
                npf_devreport_answer(r, answer, sizeof(answer)));
        if (json_array_size(steps)) {
                fprintf(f, "\n  %8s %12s %14s %12s %12s %12s %12s %12s\n", "step", "computing", "comm not ovl",
                        "overlapped", "free", "bubble", "preparing", "stage");
                json_array_foreach (steps, i, x)
                        fprintf(f, "  %8" JSON_INTEGER_FORMAT " %12.1f %14.1f %12.1f %12.1f %12.1f %12.1f %12.1f\n",
                                json_integer_value(json_object_get(x, "step")), num(x, "computing_us"),
                                num(x, "communication_not_overlapped_us"), num(x, "overlapped_us"), num(x, "free_us"),
                                num(x, "bubble_us"), num(x, "preparing_us"), num(x, "stage_us"));
                fprintf(f, "  (microseconds)\n");
        }
        if (json_array_size(json_object_get(r, "kernels"))) {
                fprintf(f, "\n  %-14s %8s %11s %11s %11s  %s\n", "kernels: type", "count", "total", "mean", "p90", "name");
                json_array_foreach (json_object_get(r, "kernels"), i, x) {
                        char c[24];
                        if (i >= top)
                                break;
                        fprintf(f, "  %-14s %8" JSON_INTEGER_FORMAT " %11s %11s %11s  %.80s\n",
                                json_string_value(json_object_get(x, "type")), json_integer_value(json_object_get(x, "count")),
                                dur(num(x, "total_us"), a, sizeof(a)), dur(num(x, "mean_us"), b, sizeof(b)),
                                dur(num(x, "p90_us"), c, sizeof(c)), json_string_value(json_object_get(x, "name")));
                }
        }
        if (json_array_size(json_object_get(r, "collectives"))) {
                fprintf(f, "\n  %-40s %8s %11s %12s  %s\n", "collectives: op", "count", "total", "bytes", "group");
                json_array_foreach (json_object_get(r, "collectives"), i, x)
                        fprintf(f, "  %-40.40s %8" JSON_INTEGER_FORMAT " %11s %12" JSON_INTEGER_FORMAT "  %.40s\n",
                                json_string_value(json_object_get(x, "name")), json_integer_value(json_object_get(x, "count")),
                                dur(num(x, "total_us"), a, sizeof(a)), json_integer_value(json_object_get(x, "bytes")),
                                json_string_value(json_object_get(x, "group")));
        }
        if (json_array_size(json_object_get(r, "links"))) {
                fprintf(f, "\n  %-8s %14s %11s %10s  %s\n", "links", "bytes", "time", "GB/s", "group");
                json_array_foreach (json_object_get(r, "links"), i, x)
                        fprintf(f, "  %-8s %14" JSON_INTEGER_FORMAT " %11s %10.2f  %.40s\n",
                                json_string_value(json_object_get(x, "link")), json_integer_value(json_object_get(x, "bytes")),
                                dur(num(x, "time_us"), a, sizeof(a)), num(x, "bandwidth_gbps"),
                                json_string_value(json_object_get(x, "group")));
        }
}

int npf_devreport_text(FILE *f, const json_t *device, size_t top)
{
        const json_t *x;
        size_t i;

        fprintf(f, "\nDevice\n");
        json_array_foreach (json_object_get(device, "ranks"), i, x)
                rank_text(f, x, top);
        json_array_foreach (json_object_get(device, "not_analysed"), i, x)
                fprintf(f, "\n%s: %s\n", json_string_value(json_object_get(x, "dir")),
                        json_string_value(json_object_get(x, "why")));
        return ferror(f) ? -EIO : 0;
}

int npf_devreport_svg(FILE *f, const char *title, const json_t *device)
{
        const json_t *ranks = json_object_get(device, "ranks"), *r, *s, *x;
        size_t n = json_array_size(ranks), i, k, total = 0;
        npf_svg_steps_rank_t *rk = calloc(n + 1, sizeof(*rk));
        npf_svg_step_t *steps;
        char (*names)[32] = calloc(n + 1, sizeof(*names)), (*notes)[96] = calloc(n + 1, sizeof(*notes));
        int ret = -ENOMEM;

        json_array_foreach (ranks, i, r)
                total += json_array_size(json_object_get(r, "steps"));
        steps = calloc(total + 1, sizeof(*steps));
        if (!rk || !steps || !names || !notes)
                goto out;
        total = 0;
        json_array_foreach (ranks, i, r) {
                const json_t *list = json_object_get(r, "steps");
                int64_t id = json_integer_value(json_object_get(r, "rank"));
                size_t n_steps = json_array_size(list);
                if (i == NPF_SVG_STEPS_MAX)
                        break;          /* the chart's ranks: the first of them */
                snprintf(names[i], sizeof(names[i]), "rank %" PRId64, id);
                /* A window of more steps than a chart holds: its first ones, and it says so. */
                if (n_steps > NPF_SVG_STEPS_MAX) {
                        snprintf(notes[i], sizeof(notes[i]), "the first %u of its %zu steps", NPF_SVG_STEPS_MAX, n_steps);
                        n_steps = NPF_SVG_STEPS_MAX;
                }
                rk[i] = (npf_svg_steps_rank_t) { .name = names[i], .steps = steps + total, .n_steps = n_steps,
                                                 .note = notes[i][0] ? notes[i] : NULL };
                json_array_foreach (list, k, s) {
                        if (k == n_steps)
                                break;
                        double bubble = num(s, "bubble_us"), not_ovl = num(s, "communication_not_overlapped_us");
                        /* Receives are inside the communication not overlapped: drawn once. */
                        steps[total++] = (npf_svg_step_t) {
                                .computing_us = num(s, "computing_us"),
                                .not_overlapped_us = not_ovl > bubble ? not_ovl - bubble : 0,
                                .free_us = num(s, "free_us"), .bubble_us = bubble,
                                .overlapped_us = num(s, "overlapped_us"),
                        };
                }
                json_array_foreach (json_object_get(device, "slow_ranks"), k, x) {
                        if (json_integer_value(json_object_get(x, "rank")) != id)
                                continue;
                        const char *cause = json_string_value(json_object_get(x, "cause"));
                        const char *scope = json_string_value(json_object_get(x, "scope"));
                        rk[i].slow = true;
                        snprintf(notes[i], sizeof(notes[i]), "%s %.1fx its %s", cause ? cause : "slow", num(x, "ratio"),
                                 scope && !strcmp(scope, "stage") ? "other stages" : "stage peers");
                        rk[i].note = notes[i];
                }
        }
        ret = npf_svg_steps(f, title, rk, n < NPF_SVG_STEPS_MAX ? n : NPF_SVG_STEPS_MAX);
out:
        free(rk);
        free(steps);
        free(names);
        free(notes);
        return ret;
}
