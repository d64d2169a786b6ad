/* SPDX-License-Identifier: MIT */
/* Framework outputs: a bounded walk, then a look inside each output found. */
#include "replay/fwout.h"
#include "replay/commjson.h"
#include "replay/device-db.h"
#include "replay/device-trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define OUTPUT_DIR "ASCEND_PROFILER_OUTPUT"

typedef struct walk {
        npf_fwout_t *v;
        size_t n, max;
        time_t now;
        int settle_s;
} walk_t;

static bool ends_with(const char *s, const char *suffix)
{
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && !strcmp(s + n - m, suffix);
}

static bool is_dir(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The latest modification below @path (depth-bounded), into *@latest. */
static void newest(const char *path, int depth, time_t *latest)
{
        struct dirent *e;
        DIR *d;

        if (depth > 6 || !(d = opendir(path)))
                return;
        while ((e = readdir(d))) {
                char sub[PATH_MAX];
                struct stat st;
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
                    snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) >= (int) sizeof(sub) || lstat(sub, &st) < 0)
                        continue;
                if (st.st_mtime > *latest)
                        *latest = st.st_mtime;
                if (S_ISDIR(st.st_mode))
                        newest(sub, depth + 1, latest);
        }
        closedir(d);
}

/* The rank of profiler_info_N.json in @dir: its rank_id, else N. */
static int64_t rank_of(const char *dir)
{
        struct dirent *e;
        int64_t rank = -1;
        DIR *d = opendir(dir);

        while (d && (e = readdir(d))) {
                char path[PATH_MAX + NAME_MAX + 2];
                long long n;
                int end = 0;
                json_t *info;
                if (sscanf(e->d_name, "profiler_info_%lld.json%n", &n, &end) != 1 || e->d_name[end])
                        continue;
                rank = n;
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                if ((info = json_load_file(path, 0, NULL))) {
                        json_t *id = json_object_get(info, "rank_id");
                        if (json_is_integer(id) && json_integer_value(id) >= 0)
                                rank = json_integer_value(id);
                        json_decref(info);
                }
                break;
        }
        if (d)
                closedir(d);
        return rank;
}

/* The rank's pipeline stage from @dir/profiler_metadata.json (npf_fwout_find()), or -1. */
static int64_t stage_of(const char *dir, int64_t rank)
{
        char path[PATH_MAX + 32];
        const char *channel;
        json_t *meta, *groups, *g;
        int64_t stage = -1;

        if (rank < 0 || snprintf(path, sizeof(path), "%s/profiler_metadata.json", dir) >= (int) sizeof(path) ||
            !(meta = json_load_file(path, 0, NULL)))
                return -1;
        groups = json_object_get(meta, "parallel_group_info");
        json_object_foreach (groups, channel, g) {
                const char *name = json_string_value(json_object_get(g, "group_name"));
                const json_t *ranks = json_object_get(g, "global_ranks"), *x;
                size_t i;
                if (!name || strncmp(name, "pp", 2))
                        continue;
                json_array_foreach (ranks, i, x) {
                        if (json_integer_value(x) != rank)
                                continue;
                        json_t *gr = json_object_get(g, "group_rank");
                        stage = json_is_integer(gr) && json_integer_value(gr) >= 0 ? json_integer_value(gr) : (int64_t) i;
                        break;
                }
                if (stage >= 0)
                        break;
        }
        json_decref(meta);
        return stage;
}

static void look_inside(walk_t *w, npf_fwout_t *f)
{
        char out[PATH_MAX + 32];
        struct dirent *e;
        bool any = false;
        DIR *d;

        f->changed = 0;
        newest(f->dir, 0, &f->changed);
        f->rank = rank_of(f->dir);
        f->stage = stage_of(f->dir, f->rank);
        f->framework = ends_with(f->dir, "_ascend_ms") ? NPF_DEV_FW_MINDSPORE : NPF_DEV_FW_TORCH_NPU;
        snprintf(out, sizeof(out), "%s/" OUTPUT_DIR, f->dir);
        if ((d = opendir(out))) {
                while ((e = readdir(d))) {
                        if (!strcmp(e->d_name, "trace_view.json"))
                                f->trace = any = true;
                        else if (!strcmp(e->d_name, "communication.json"))
                                f->comm = true;
                        else if (!strcmp(e->d_name, "step_trace_time.csv"))
                                any = snprintf(f->steps_csv, sizeof(f->steps_csv), "%s", e->d_name) > 0;
                        else if ((!strncmp(e->d_name, "ascend_pytorch_profiler", 23) ||
                                  !strncmp(e->d_name, "ascend_mindspore_profiler", 25)) && ends_with(e->d_name, ".db"))
                                any = snprintf(f->db, sizeof(f->db), "%s", e->d_name) > 0;
                }
                closedir(d);
        }
        /* Settled with no output, raw data or none: nothing more will come. */
        f->state = w->now - f->changed < w->settle_s ? NPF_FWOUT_PARSING : any ? NPF_FWOUT_READY : NPF_FWOUT_RAW;
}

static void add(walk_t *w, const char *path, npf_fwout_kind_t kind)
{
        npf_fwout_t *f;

        if (w->n == w->max)
                return;
        f = &w->v[w->n++];
        memset(f, 0, sizeof(*f));
        snprintf(f->dir, sizeof(f->dir), "%s", path);
        f->kind = kind;
        f->rank = f->stage = -1;
        if (kind == NPF_FWOUT_ASCEND) {
                look_inside(w, f);
        } else {
                f->framework = NPF_DEV_FW_TORCH;
                f->state = NPF_FWOUT_READY;
        }
}

static int search(walk_t *w, const char *dir, int depth)
{
        struct dirent *e;
        char sub[PATH_MAX];
        DIR *d = opendir(dir);

        if (!d)
                return -errno;
        if (snprintf(sub, sizeof(sub), "%s/" OUTPUT_DIR, dir) < (int) sizeof(sub) && is_dir(sub)) {
                closedir(d);
                add(w, dir, NPF_FWOUT_ASCEND);
                return 0;
        }
        while ((e = readdir(d))) {
                struct stat st;
                if (e->d_name[0] == '.' || !strcmp(e->d_name, "analysis") ||
                    snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name) >= (int) sizeof(sub) || lstat(sub, &st) < 0)
                        continue;
                if (S_ISREG(st.st_mode) && (ends_with(e->d_name, ".pt.trace.json") ||
                                            ends_with(e->d_name, ".pt.trace.json.gz")))
                        add(w, sub, NPF_FWOUT_KINETO);
                else if (S_ISDIR(st.st_mode) && (ends_with(e->d_name, "_ascend_pt") || ends_with(e->d_name, "_ascend_ms")))
                        add(w, sub, NPF_FWOUT_ASCEND);
                else if (S_ISDIR(st.st_mode) && depth < NPF_FWOUT_DEPTH_MAX)
                        search(w, sub, depth + 1);
        }
        closedir(d);
        return 0;
}

static int by_rank_path(const void *a, const void *b)
{
        const npf_fwout_t *x = a, *y = b;

        if (x->rank != y->rank)
                return x->rank < y->rank ? -1 : 1;
        return strcmp(x->dir, y->dir);
}

int npf_fwout_find(const char *dir, time_t now, int settle_s, npf_fwout_t *ret, size_t max)
{
        walk_t w = { .v = ret, .max = max, .now = now, .settle_s = settle_s };
        int r = search(&w, dir, 0);

        if (r < 0)
                return r;
        qsort(ret, w.n, sizeof(*ret), by_rank_path);
        return (int) w.n;
}

const char *npf_fwout_offline_command(const npf_fwout_t *f, char *buf, size_t size)
{
        char parent[PATH_MAX];
        const char *slash;

        snprintf(parent, sizeof(parent), "%s", f->dir);
        if ((slash = strrchr(parent, '/')))
                parent[slash - parent] = '\0';
        if (f->framework == NPF_DEV_FW_MINDSPORE)
                snprintf(buf, size, "python3 -c 'from mindspore import Profiler; Profiler.offline_analyse(\"%s\")'",
                         f->dir);
        else
                snprintf(buf, size, "python3 -c 'from torch_npu.profiler.profiler import analyse; analyse(\"%s\")'",
                         slash ? parent : ".");
        return buf;
}

int npf_fwout_load(const npf_fwout_t *f, npf_device_t **ret, char *err)
{
        char path[PATH_MAX + NAME_MAX + 32], why[NPF_DEVICE_DB_ERR_MAX + NPF_DEVICE_TRACE_ERR_MAX];
        npf_device_t *d = NULL;
        int r;

        if (f->kind == NPF_FWOUT_KINETO) {
                r = npf_device_trace_load(f->dir, NULL, NULL, &d, NULL, why);
        } else if (f->db[0]) {
                snprintf(path, sizeof(path), "%s/" OUTPUT_DIR "/%s", f->dir, f->db);
                r = npf_device_db_load(path, &d, NULL, why);
        } else if (f->trace) {
                snprintf(path, sizeof(path), "%s/" OUTPUT_DIR "/trace_view.json", f->dir);
                r = npf_device_trace_load(path, NULL, NULL, &d, NULL, why);
                if (r == 0 && f->comm) {
                        char cerr[NPF_COMMJSON_ERR_MAX];
                        snprintf(path, sizeof(path), "%s/" OUTPUT_DIR "/communication.json", f->dir);
                        /* A broken communication.json costs the links, not the timeline. */
                        (void) npf_commjson_load(path, d, cerr);
                }
        } else {
                snprintf(err, NPF_FWOUT_ERR_MAX, "%.300s: no trace_view.json and no db export", f->dir);
                return -ENOENT;
        }
        if (r < 0) {
                snprintf(err, NPF_FWOUT_ERR_MAX, "%.500s", why);
                return r;
        }
        if (f->kind == NPF_FWOUT_ASCEND || npf_device_rank(d) < 0)
                npf_device_set_rank(d, f->rank >= 0 ? f->rank : npf_device_rank(d), npf_device_device(d),
                                    f->kind == NPF_FWOUT_ASCEND ? f->framework : NPF_DEV_FW_TORCH);
        if (f->stage >= 0)
                npf_device_set_stage(d, f->stage);
        *ret = d;
        return 0;
}
