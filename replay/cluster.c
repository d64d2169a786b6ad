/* SPDX-License-Identifier: MIT */
/* The cross-rank report: a walk for window directories, then one row per window. */
#include "replay/cluster.h"
#include "replay/input.h"
#include "replay/replay.h"
#include "replay/report.h"
#include "replay/snapshot.h"
#include "replay/svg-ranks.h"
#include "replay/trace.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct window {
        char dir[PATH_MAX];
        long long rank, start, stop;
} window_t;

typedef struct walk {
        window_t *v;
        size_t n, cap;
} walk_t;

static bool window_name(const char *name, window_t *w)
{
        int end = 0;

        if (sscanf(name, "rank%lld_start%lld_stop%lld%n", &w->rank, &w->start, &w->stop, &end) != 3)
                return false;
        /* rank3_start10_stop15, or with the ".N" a rank adds on a name collision. */
        return name[end] == '\0' || name[end] == '.';
}

static int find_windows(walk_t *w, const char *dir, int depth)
{
        DIR *d;
        struct dirent *e;

        if (depth > NPF_CLUSTER_DEPTH_MAX || !(d = opendir(dir)))
                return depth == 0 ? -errno : 0;
        while ((e = readdir(d))) {
                window_t win;
                struct stat st;
                char path[PATH_MAX];
                if (e->d_name[0] == '.' ||
                    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int) sizeof(path) ||
                    lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                if (window_name(e->d_name, &win)) {
                        if (w->n == NPF_CLUSTER_WINDOWS_MAX)
                                break;
                        if (w->n == w->cap) {
                                size_t cap = w->cap ? w->cap * 2 : 64;
                                window_t *p = realloc(w->v, cap * sizeof(*p));
                                if (!p) {
                                        closedir(d);
                                        return -ENOMEM;
                                }
                                w->v = p;
                                w->cap = cap;
                        }
                        snprintf(win.dir, sizeof(win.dir), "%s", path);
                        w->v[w->n++] = win;
                } else if (strcmp(e->d_name, "analysis") != 0) {
                        find_windows(w, path, depth + 1);
                }
        }
        closedir(d);
        return 0;
}

static int by_rank(const void *a, const void *b)
{
        const window_t *x = a, *y = b;
        if (x->rank != y->rank)
                return x->rank < y->rank ? -1 : 1;
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return strcmp(x->dir, y->dir);
}

/* The peak allocated and reserved bytes over the devices of the snapshot at @path. */
static int snapshot_peaks(const char *path, uint64_t *ret_alloc, uint64_t *ret_reserved, char *err)
{
        npf_snapshot_t *s;
        int64_t *devices;
        uint64_t pa = 0, pr = 0;
        int r;

        if ((r = npf_snapshot_load(path, NULL, NULL, &s, err)) < 0)
                return r;
        size_t nd = npf_replay_devices(s, &devices);
        for (size_t k = 0; k < nd && r == 0; k++) {
                npf_replay_t *rp;
                if ((r = npf_replay_run(s, devices[k], false, &rp, err)) < 0)
                        break;
                pa = rp->start_allocated > pa ? rp->start_allocated : pa;
                pr = rp->start_reserved > pr ? rp->start_reserved : pr;
                for (size_t i = 0; i < rp->n; i++) {
                        pa = rp->allocated[i] > pa ? rp->allocated[i] : pa;
                        pr = rp->reserved[i] > pr ? rp->reserved[i] : pr;
                }
                npf_replay_free(rp);
        }
        free(devices);
        npf_snapshot_free(s);
        if (r == 0) {
                *ret_alloc = pa;
                *ret_reserved = pr;
        }
        return r;
}

/*
 * The window's manifest.json, for why it opened when it opened by itself (npuprofd(8)): a
 * regular file only, never waited on. Return: a new reference, or NULL.
 */
static json_t *read_manifest(const char *dir)
{
        char path[PATH_MAX];
        struct stat st;
        json_t *o = NULL;
        FILE *f;
        int fd;

        if (snprintf(path, sizeof(path), "%s/manifest.json", dir) >= (int) sizeof(path))
                return NULL;
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(f = fdopen(fd, "r"))) {
                close(fd);
                return NULL;
        }
        o = json_loadf(f, 0, NULL);
        fclose(f);
        return o;
}

/* One window's row: step times from its first trace with steps, peaks from its snapshots. */
static json_t *window_row(const window_t *w)
{
        json_t *row = json_pack("{s:s,s:I,s:I,s:I}", "dir", w->dir, "rank", (json_int_t) w->rank, "start_step",
                                (json_int_t) w->start, "stop_step", (json_int_t) w->stop);
        char err[NPF_SNAPSHOT_ERR_MAX + NPF_TRACE_ERR_MAX];
        npf_input_t *in = calloc(NPF_INPUT_WINDOW_MAX, sizeof(*in));
        bool have_steps = false, have_peak = false, have_trace = false, have_rss = false;
        uint64_t pa = 0, pr = 0, rss = 0;
        int n;

        if (!in || (n = npf_input_window(w->dir, in, NPF_INPUT_WINDOW_MAX)) < 0) {
                json_object_set_new(row, "error", json_string(in ? strerror(-n) : "out of memory"));
                free(in);
                return row;
        }
        for (int i = 0; i < n; i++) {
                const char *name = strrchr(in[i].path, '/') + 1;
                if (in[i].kind == NPF_INPUT_SNAPSHOT) {
                        uint64_t a = 0, r = 0;
                        if (snapshot_peaks(in[i].path, &a, &r, err) < 0) {
                                json_object_set_new(row, "error", json_sprintf("%s: %s", name, err));
                                continue;
                        }
                        pa = a > pa ? a : pa;
                        pr = r > pr ? r : pr;
                        have_peak = true;
                } else if (!have_steps) {
                        npf_trace_t *t;
                        npf_trace_step_stats_t st;
                        if (npf_trace_load_file(in[i].path, NULL, NULL, &t, err) < 0) {
                                json_object_set_new(row, "error", json_sprintf("%s: %s", name, err));
                                continue;
                        }
                        npf_trace_step_stats(t, &st);
                        const double *times;
                        const uint64_t *bytes;
                        size_t m = npf_trace_rss(t, &times, &bytes);
                        for (size_t k = 0; k < m; k++)
                                rss = bytes[k] > rss ? bytes[k] : rss;
                        have_rss |= m > 0;
                        npf_trace_free(t);
                        have_trace = true;
                        if (st.n) {
                                have_steps = true;
                                json_object_set_new(row, "steps", json_integer((json_int_t) st.n));
                                json_object_set_new(row, "step_median_us", json_real(st.median_us));
                                json_object_set_new(row, "step_p90_us", json_real(st.p90_us));
                                json_object_set_new(row, "step_max_us", json_real(st.max_us));
                        }
                }
        }
        free(in);
        json_t *manifest = read_manifest(w->dir);
        const char *reason = json_string_value(json_object_get(manifest, "reason"));
        if (reason)
                json_object_set_new(row, "reason", json_string(reason));
        json_decref(manifest);
        if (!have_trace && !have_peak && !json_object_get(row, "error"))
                json_object_set_new(row, "error", json_string("no readable trace or snapshot in the window"));
        if (have_peak) {
                json_object_set_new(row, "peak_allocated", json_integer((json_int_t) pa));
                json_object_set_new(row, "peak_reserved", json_integer((json_int_t) pr));
        }
        /* A host window's memory: its process's resident memory, sampled by its trace. */
        if (have_rss)
                json_object_set_new(row, "peak_rss", json_integer((json_int_t) rss));
        return row;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* @dir itself when it is a window directory, else the windows below it. */
static int find_in(walk_t *w, const char *dir)
{
        const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
        window_t win;
        struct stat st;

        if (window_name(base, &win) && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
                if (w->n == w->cap) {
                        size_t cap = w->cap ? w->cap * 2 : 64;
                        window_t *p = realloc(w->v, cap * sizeof(*p));
                        if (!p)
                                return -ENOMEM;
                        w->v = p;
                        w->cap = cap;
                }
                snprintf(win.dir, sizeof(win.dir), "%s", dir);
                w->v[w->n++] = win;
                return 0;
        }
        return find_windows(w, dir, 0);
}

int npf_cluster_report(const char *dir, json_t **ret, char *err, size_t err_size)
{
        return npf_cluster_report_dirs(&dir, 1, ret, err, err_size);
}

/* The directory that holds all of @dirs (their longest common prefix cut at a '/'), or the
 * one directory given: what the report names as the cluster's. */
static void common_dir(const char *const *dirs, size_t n_dirs, char *buf, size_t size)
{
        size_t len = n_dirs ? strlen(dirs[0]) : 0;

        for (size_t i = 1; i < n_dirs; i++) {
                size_t k = 0;
                while (k < len && dirs[i][k] == dirs[0][k])
                        k++;
                if (k < len || (dirs[i][k] && dirs[i][k] != '/')) {
                        while (k > 0 && dirs[0][k - 1] != '/')
                                k--;
                        len = k > 1 ? k - 1 : k;
                }
        }
        if (len == 0 && n_dirs > 1)
                snprintf(buf, size, ".");
        else
                snprintf(buf, size, "%.*s", (int) len, n_dirs ? dirs[0] : "");
}

int npf_cluster_report_dirs(const char *const *dirs, size_t n_dirs, json_t **ret, char *err, size_t err_size)
{
        walk_t w = { 0 };
        char common[4096];
        const char *dir = n_dirs ? dirs[0] : "";
        json_t *rows, *stragglers, *report;
        double *medians;
        size_t nm = 0;
        int r = 0;

        for (size_t i = 0; i < n_dirs && r >= 0; i++)
                if ((r = find_in(&w, dirs[i])) < 0)
                        dir = dirs[i];
        if (r < 0 || w.n == 0) {
                snprintf(err, err_size, "%s: %s", dir,
                         r < 0 ? strerror(-r) : "no rank*_start*_stop* window directory below it");
                free(w.v);
                return r < 0 ? r : -ENOENT;
        }
        common_dir(dirs, n_dirs, common, sizeof(common));
        dir = common;
        qsort(w.v, w.n, sizeof(*w.v), by_rank);
        rows = json_array();
        stragglers = json_array();
        medians = malloc(w.n * sizeof(*medians));
        if (!rows || !stragglers || !medians) {
                json_decref(rows);
                json_decref(stragglers);
                free(medians);
                free(w.v);
                return -ENOMEM;
        }
        for (size_t i = 0; i < w.n; i++) {
                json_t *row = window_row(&w.v[i]);
                json_t *m = json_object_get(row, "step_median_us");
                if (m)
                        medians[nm++] = json_real_value(m);
                json_array_append_new(rows, row);
        }
        double median = 0, threshold = 0;
        if (nm) {
                qsort(medians, nm, sizeof(*medians), cmp_double);
                median = nm % 2 ? medians[nm / 2] : (medians[nm / 2 - 1] + medians[nm / 2]) / 2;
                threshold = median * NPF_CLUSTER_STRAGGLER;
        }
        size_t i;
        json_t *row, *reasons = json_array();
        json_array_foreach (rows, i, row) {
                json_t *m = json_object_get(row, "step_median_us"), *reason = json_object_get(row, "reason");
                bool known = !reason;
                for (size_t k = 0; !known && k < json_array_size(reasons); k++)
                        known = json_equal(json_array_get(reasons, k), reason);
                if (!known)
                        json_array_append(reasons, reason);
                bool slow = m && json_real_value(m) > threshold;
                json_object_set_new(row, "straggler", json_boolean(slow));
                if (slow)
                        json_array_append_new(stragglers, json_pack("{s:O,s:O,s:f}", "rank", json_object_get(row, "rank"),
                                                                    "dir", json_object_get(row, "dir"), "over_median",
                                                                    median > 0 ? json_real_value(m) / median : 0.0));
        }
        report = json_pack("{s:s,s:s,s:i,s:s,s:I,s:o,s:o,s:f,s:o,s:o,s:o}", "tool", "npuprof-replay", "kind", "cluster",
                           "schema", 1, "dir", dir, "windows_found", (json_int_t) w.n, "median_step_us",
                           nm ? json_real(median) : json_null(), "threshold_us", nm ? json_real(threshold) : json_null(),
                           "straggler_factor", NPF_CLUSTER_STRAGGLER, "stragglers", stragglers, "windows", rows,
                           "reasons", reasons ? reasons : json_array());
        free(medians);
        free(w.v);
        if (!report)
                return -ENOMEM;
        *ret = report;
        return 0;
}

static const char *us_text(double us, char *buf, size_t size)
{
        if (us >= 1e6)
                snprintf(buf, size, "%.2f s", us / 1e6);
        else if (us >= 1e3)
                snprintf(buf, size, "%.2f ms", us / 1e3);
        else
                snprintf(buf, size, "%.1f us", us);
        return buf;
}

/* A host window's peak resident memory, "1.2 MiB rss", into @buf (24 bytes); "-" without one. */
static const char *rss_text(const json_t *row, char *buf)
{
        const json_t *rss = json_object_get(row, "peak_rss");
        char b[24];

        if (!rss)
                return "-";
        snprintf(buf, 24, "%.15s rss", npf_report_bytes((uint64_t) json_integer_value(rss), b));
        return buf;
}

int npf_cluster_text(FILE *f, const json_t *report)
{
        char a[32], b[32], c[24], d[24];
        size_t i;
        json_t *row;
        const json_t *m = json_object_get(report, "median_step_us");

        fprintf(f, "Cluster %s: %" JSON_INTEGER_FORMAT " window(s)", json_string_value(json_object_get(report, "dir")),
                json_integer_value(json_object_get(report, "windows_found")));
        if (json_is_real(m))
                fprintf(f, "; median step %s, stragglers above %s (+10%%): %zu\n", us_text(json_real_value(m), a, sizeof(a)),
                        us_text(json_real_value(json_object_get(report, "threshold_us")), b, sizeof(b)),
                        json_array_size(json_object_get(report, "stragglers")));
        else
                fprintf(f, "; no ProfilerStep spans in any trace\n");
        json_array_foreach(json_object_get(report, "reasons"), i, row)
                fprintf(f, "Opened by itself: %s\n", json_string_value(row));
        fprintf(f, "\n%6s %10s %12s %12s %12s %12s  %s\n", "rank", "steps", "median step", "p90 step", "peak alloc",
                "peak reserv", "window");
        json_array_foreach (json_object_get(report, "windows"), i, row) {
                const json_t *med = json_object_get(row, "step_median_us"), *pa = json_object_get(row, "peak_allocated");
                fprintf(f, "%6" JSON_INTEGER_FORMAT " %10" JSON_INTEGER_FORMAT " %12s %12s %12s %12s  %s%s%s%s\n",
                        json_integer_value(json_object_get(row, "rank")),
                        json_integer_value(json_object_get(row, "steps")),
                        med ? us_text(json_real_value(med), a, sizeof(a)) : "-",
                        med ? us_text(json_real_value(json_object_get(row, "step_p90_us")), b, sizeof(b)) : "-",
                        pa ? npf_report_bytes((uint64_t) json_integer_value(pa), c) : rss_text(row, c),
                        pa ? npf_report_bytes((uint64_t) json_integer_value(json_object_get(row, "peak_reserved")), d) : "-",
                        json_string_value(json_object_get(row, "dir")),
                        json_is_true(json_object_get(row, "straggler")) ? "  STRAGGLER" : "",
                        json_object_get(row, "error") ? "  error: " : "",
                        json_object_get(row, "error") ? json_string_value(json_object_get(row, "error")) : "");
        }
        return ferror(f) ? -EIO : 0;
}

int npf_cluster_svg(FILE *f, const json_t *report)
{
        const json_t *rows = json_object_get(report, "windows");
        size_t n = json_array_size(rows), i;
        npf_svg_rank_t *ranks = calloc(n + 1, sizeof(*ranks));
        char (*names)[32] = calloc(n + 1, sizeof(*names));
        json_t *row;
        int r = -ENOMEM;

        if (ranks && names) {
                json_array_foreach (rows, i, row) {
                        const json_t *med = json_object_get(row, "step_median_us");
                        const json_t *pa = json_object_get(row, "peak_allocated");
                        if (!pa)
                                pa = json_object_get(row, "peak_rss");  /* a host window: its process's */
                        snprintf(names[i], sizeof(names[i]), "%" JSON_INTEGER_FORMAT,
                                 json_integer_value(json_object_get(row, "rank")));
                        ranks[i] = (npf_svg_rank_t) {
                                .name = names[i], .step_us = med ? json_real_value(med) : 0, .has_step = med != NULL,
                                .peak_bytes = pa ? (uint64_t) json_integer_value(pa) : 0, .has_peak = pa != NULL,
                                .straggler = json_is_true(json_object_get(row, "straggler")),
                        };
                }
                r = npf_svg_ranks(f, json_string_value(json_object_get(report, "dir")), ranks, n,
                                  json_real_value(json_object_get(report, "median_step_us")),
                                  json_real_value(json_object_get(report, "threshold_us")));
        }
        free(ranks);
        free(names);
        return r;
}
