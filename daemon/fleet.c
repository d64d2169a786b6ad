/* SPDX-License-Identifier: MIT */
#include "daemon/fleet.h"
#include "daemon/keptfile.h"
#include "lib/clock.h"
#include "npuprof/protocol.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct npf_fleet {
        npf_kept_file_t *file;
        char *dir, *node, *path;
        uint64_t interval_ms;
        npf_fleet_node_fn node_fn;
        void *data;
        char *key;                      /* what the record last queued held, steps and times aside */
};

static const char *const rank_states[] = { NPF_PROTO_RANK_STATES };
#define RANK_STATES (sizeof(rank_states) / sizeof(rank_states[0]))
#define VOLATILE_MAX 4096               /* bytes of the steps and times, added after the size is known */

bool npf_fleet_node_name_ok(const char *name)
{
        size_t n = strlen(name);

        if (n == 0 || n >= NPF_FLEET_NODE_MAX || name[0] == '.')
                return false;
        return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static json_t *hash_json(uint64_t h)
{
        char hex[17];

        snprintf(hex, sizeof(hex), "%016" PRIx64, h);
        return json_string(hex);
}

static json_int_t unix_ms(uint64_t ns)
{
        return (json_int_t) (ns / 1000000u);
}

/* Where @name is in the columns of conf/view's rank table, or -1. */
static int column_of(const json_t *table, const char *name)
{
        const json_t *columns = json_object_get(table, "columns");
        size_t i;
        json_t *c;

        json_array_foreach(columns, i, c)
                if (json_is_string(c) && strcmp(json_string_value(c), name) == 0)
                        return (int) i;
        return -1;
}

/* The ranks by state, each with its count and the range of their steps. */
struct state_summary { uint32_t count; bool stepped; int64_t step_min, step_max; };

static void summarise_ranks(const json_t *table, struct state_summary sum[RANK_STATES], uint32_t *ret_attached)
{
        int col_state = column_of(table, "state"), col_step = column_of(table, "step");
        const json_t *rows = json_object_get(table, "rows");
        size_t i;
        json_t *row;

        *ret_attached = 0;
        if (col_state < 0 || col_step < 0)
                return;
        json_array_foreach(rows, i, row) {
                const char *state = json_string_value(json_array_get(row, (size_t) col_state));
                json_t *step = json_array_get(row, (size_t) col_step);
                for (size_t s = 0; state && s < RANK_STATES; s++) {
                        if (strcmp(state, rank_states[s]) != 0)
                                continue;
                        struct state_summary *ss = &sum[s];
                        ss->count++;
                        if (json_is_integer(step)) {
                                int64_t v = json_integer_value(step);
                                ss->step_min = ss->stepped && ss->step_min < v ? ss->step_min : v;
                                ss->step_max = ss->stepped && ss->step_max > v ? ss->step_max : v;
                                ss->stepped = true;
                        }
                        break;
                }
                (*ret_attached)++;
        }
}

/* One rank of the table, as the record's progress takes it. */
typedef struct lag { int64_t rank, step; double stalled_for_s; } lag_t;

static int by_step_then_rank(const void *a, const void *b)
{
        const lag_t *x = a, *y = b;

        if (x->step != y->step)
                return x->step < y->step ? -1 : 1;
        return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The node's progress, steady part: what moves with every step is added by progress_moving(). */
typedef struct progress_sum {
        uint32_t known, n_stalled, n_stepping, n_laggards;
        int64_t step_min, step_max, stepping_min, stepping_max;
        lag_t stalled[NPF_FLEET_LAGGARDS], laggards[NPF_FLEET_LAGGARDS];
} progress_sum_t;

/* Keep the @max worst of @all (@n of them, sorted in place) in @out. Return: how many are kept. */
static uint32_t worst(lag_t *all, uint32_t n, lag_t *out, uint32_t max)
{
        uint32_t k = n < max ? n : max;

        qsort(all, n, sizeof(*all), by_step_then_rank);
        memcpy(out, all, k * sizeof(*out));
        return k;
}

static void summarise_progress(const json_t *table, progress_sum_t *ret)
{
        int col_rank = column_of(table, "rank"), col_step = column_of(table, "step");
        int col_stalled = column_of(table, "stalled"), col_for = column_of(table, "stalled_for_s");
        const json_t *rows = json_object_get(table, "rows");
        size_t n = json_array_size(rows), i;
        lag_t *stalled = calloc(n ? n : 1, sizeof(*stalled)), *stepping = calloc(n ? n : 1, sizeof(*stepping));
        json_t *row;

        memset(ret, 0, sizeof(*ret));
        if (!stalled || !stepping || col_rank < 0 || col_step < 0)
                goto out;
        json_array_foreach(rows, i, row) {
                json_t *step = json_array_get(row, (size_t) col_step);
                if (!json_is_integer(step))
                        continue;
                lag_t l = { .rank = json_integer_value(json_array_get(row, (size_t) col_rank)),
                            .step = json_integer_value(step) };
                ret->step_min = ret->known && ret->step_min < l.step ? ret->step_min : l.step;
                ret->step_max = ret->known && ret->step_max > l.step ? ret->step_max : l.step;
                ret->known++;
                if (col_stalled >= 0 && json_is_true(json_array_get(row, (size_t) col_stalled))) {
                        l.stalled_for_s = col_for >= 0 ? json_number_value(json_array_get(row, (size_t) col_for)) : 0;
                        stalled[ret->n_stalled++] = l;
                } else {
                        ret->stepping_min = ret->n_stepping && ret->stepping_min < l.step ? ret->stepping_min : l.step;
                        ret->stepping_max = ret->n_stepping && ret->stepping_max > l.step ? ret->stepping_max : l.step;
                        stepping[ret->n_stepping++] = l;
                }
        }
        /* Laggards: ranks still stepping, NPF_FLEET_LAG_STEPS or more behind the node's fastest. */
        uint32_t n_lag = 0;
        for (uint32_t k = 0; k < ret->n_stepping; k++)
                if (ret->step_max - stepping[k].step >= NPF_FLEET_LAG_STEPS)
                        stepping[n_lag++] = stepping[k];
        ret->n_laggards = n_lag;
        worst(stepping, n_lag, ret->laggards, NPF_FLEET_LAGGARDS);
        worst(stalled, ret->n_stalled, ret->stalled, NPF_FLEET_LAGGARDS);
out:
        free(stalled);
        free(stepping);
}

static uint32_t listed(uint32_t n)
{
        return n < NPF_FLEET_LAGGARDS ? n : NPF_FLEET_LAGGARDS;
}

/*
 * The record's progress less what moves every step: which ranks are stalled, at which
 * step (a stalled rank's step stays), whether a slowdown is on and since when.
 */
static json_t *progress_steady(const progress_sum_t *ps, const json_t *progress)
{
        const json_t *slow = json_object_get(progress, "slowdown");
        json_t *stalled = json_array();

        for (uint32_t k = 0; stalled && k < listed(ps->n_stalled); k++)
                json_array_append_new(stalled, json_pack("{s:I, s:I}", "rank", (json_int_t) ps->stalled[k].rank,
                                                         "step", (json_int_t) ps->stalled[k].step));
        return json_pack("{s:I, s:o, s:I, s:{s:I}, s:o}", "ranks", (json_int_t) ps->known,
                         "stalled", stalled ? stalled : json_array(),
                         "stalled_more", (json_int_t) (ps->n_stalled - listed(ps->n_stalled)),
                         "stepping", "count", (json_int_t) ps->n_stepping,
                         "slowdown", json_is_object(slow) ? json_pack("{s:O}", "since_step",
                                                                      json_object_get(slow, "since_step"))
                                                          : json_null());
}

static json_t *step_or_null(bool known, int64_t step)
{
        return known ? json_integer(step) : json_null();
}

/* Add to the record's @o what moves every step: the steps, the step time, the laggards. */
static void progress_moving(json_t *o, const progress_sum_t *ps, const json_t *progress)
{
        const json_t *slow = json_object_get(progress, "slowdown"), *st = json_object_get(progress, "step_time_ms");
        json_t *stepping = json_object_get(o, "stepping"), *stalled = json_object_get(o, "stalled"), *lag = json_array();

        json_object_set_new(o, "step_min", step_or_null(ps->known, ps->step_min));
        json_object_set_new(o, "step_max", step_or_null(ps->known, ps->step_max));
        json_object_set_new(o, "step_time_ms", json_is_number(st) ? json_copy((json_t *) st) : json_null());
        if (json_is_object(slow))
                json_object_set(json_object_get(o, "slowdown"), "factor", json_object_get(slow, "factor"));
        json_object_set_new(stepping, "step_min", step_or_null(ps->n_stepping, ps->stepping_min));
        json_object_set_new(stepping, "step_max", step_or_null(ps->n_stepping, ps->stepping_max));
        for (uint32_t k = 0; k < json_array_size(stalled); k++)
                json_object_set_new(json_array_get(stalled, k), "stalled_for_s", json_real(ps->stalled[k].stalled_for_s));
        for (uint32_t k = 0; lag && k < listed(ps->n_laggards); k++)
                json_array_append_new(lag, json_pack("{s:I, s:I}", "rank", (json_int_t) ps->laggards[k].rank, "step",
                                                     (json_int_t) ps->laggards[k].step));
        json_object_set_new(o, "laggards", lag ? lag : json_array());
        json_object_set_new(o, "laggards_more", json_integer(ps->n_laggards - listed(ps->n_laggards)));
}

/* The newest windows, each as the record says it: fewer keys than the protocol's history. */
static json_t *recent_json(const json_t *history)
{
        static const char *const keys[] = { "rank", "generation", "start_step", "stop_step", "outcome", "output",
                                            "ended_unix_ms", "reason" };
        json_t *out = json_array(), *w;
        size_t i;

        json_array_foreach(history, i, w) {
                json_t *o = json_object();
                if (i >= NPF_FLEET_RECENT || !o) {
                        json_decref(o);
                        break;
                }
                for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
                        json_t *v = json_object_get(w, keys[k]);
                        json_object_set(o, keys[k], v ? v : json_null());
                }
                json_array_append_new(out, o);
        }
        return out;
}

static json_t *analysis_json(const json_t *summary)
{
        static const char *const keys[] = { "queued", "running", "done", "failed" };
        json_t *o = json_object();

        for (size_t k = 0; o && k < sizeof(keys) / sizeof(keys[0]); k++) {
                json_t *v = json_object_get(summary, keys[k]);
                json_object_set_new(o, keys[k], json_integer(json_is_integer(v) ? json_integer_value(v) : 0));
        }
        return o;
}

/* What the daemon did by itself, as the record says it: the counts and the last, no stack paths. */
static json_t *auto_json(const json_t *autowin)
{
        static const char *const keys[] = { "windows", "stacks_asked", "last" };
        json_t *o = json_object();

        for (size_t k = 0; o && k < sizeof(keys) / sizeof(keys[0]); k++) {
                json_t *v = json_object_get(autowin, keys[k]);
                json_object_set(o, keys[k], v ? v : json_null());
        }
        return o;
}

static json_t *file_json(const npf_fleet_node_t *n)
{
        const npf_shm_status_t *st = n->file;
        json_t *error = json_null();

        if (st->file_state == NPF_FILE_INVALID || st->file_state == NPF_FILE_MISSING)
                error = json_pack("{s:I, s:I, s:s, s:s}", "line", (json_int_t) st->line, "column",
                                  (json_int_t) st->column, "key", st->key, "message", st->message);
        return json_pack("{s:s, s:s, s:o, s:I, s:I, s:o}", "path", n->config_path, "state",
                         npf_shm_file_state_name(st->file_state), "hash", hash_json(n->read_hash), "mtime_ns",
                         (json_int_t) n->read_mtime_ns, "checked_unix_ms", (json_int_t) 0, "error",
                         error ? error : json_null());
}

json_t *npf_fleet_record_json(const char *node, uint64_t interval_ms, npf_fleet_node_t *n, uint64_t now_ns,
                              char **ret_key)
{
        struct state_summary sum[RANK_STATES] = { 0 };
        progress_sum_t *ps = malloc(sizeof(*ps));
        const npf_shm_status_t *file = n->file;
        json_t *record = NULL, *states = json_object(), *recent;
        uint32_t attached;
        char *text = NULL;

        if (ret_key)
                *ret_key = NULL;
        summarise_ranks(n->ranks, sum, &attached);
        if (ps)
                summarise_progress(n->ranks, ps);
        for (size_t s = 0; states && s < RANK_STATES; s++)
                if (sum[s].count)
                        json_object_set_new(states, rank_states[s], json_pack("{s:I}", "count",
                                                                             (json_int_t) sum[s].count));
        recent = recent_json(n->recent);
        record = json_pack("{s:i, s:s, s:s, s:I, s:f, s:{s:I, s:s, s:I}, s:o, s:{s:I, s:o, s:I}, s:{s:I, s:o}, "
                           "s:{s:O, s:o}, s:o, s:o, s:o}",
                           "format", NPF_FLEET_FORMAT,
                           "node", node,
                           "state", n->stopping ? "stopped" : "running",
                           "written_unix_ms", (json_int_t) 0,   /* set last: not part of the key */
                           "interval_s", (double) interval_ms / 1000.0,
                           "daemon",
                           "pid", (json_int_t) getpid(),
                           "version", NPUPROF_VERSION,
                           "started_unix_ms", unix_ms(n->started_real_ns),
                           "file", file_json(n),
                           "in_force",
                           "generation", (json_int_t) n->generation,
                           "hash", n->generation ? hash_json(n->in_force_hash) : json_null(),
                           "published_unix_ms", (json_int_t) (n->generation ? unix_ms(n->published_ns) : 0),
                           "ranks", "attached", (json_int_t) attached, "states", states ? states : json_object(),
                           "windows", "outcomes", n->outcomes ? n->outcomes : json_null(), "recent",
                           recent ? recent : json_array(),
                           "analysis", analysis_json(n->analysis),
                           "progress", ps ? progress_steady(ps, n->progress) : NULL,
                           "auto", n->autowin ? auto_json(n->autowin) : json_null());
        json_decref(n->autowin);
        json_decref(n->ranks);
        json_decref(n->outcomes);
        json_decref(n->recent);
        json_decref(n->analysis);
        if (!record) {
                json_decref(n->progress);
                free(ps);
                memset(n, 0, sizeof(*n));
                return NULL;
        }

        /* Paths make the size: the oldest windows go first until the record fits. */
        json_t *windows = json_object_get(json_object_get(record, "windows"), "recent");
        while ((text = json_dumps(record, JSON_COMPACT)) && strlen(text) + VOLATILE_MAX > NPF_FLEET_RECORD_MAX &&
               json_array_size(windows) > 0) {
                free(text);
                json_array_remove(windows, json_array_size(windows) - 1);
        }
        free(text);
        if (ret_key)
                *ret_key = json_dumps(record, JSON_COMPACT | JSON_SORT_KEYS);

        /* What moves every step or every read: written at the interval, never a change of its own. */
        json_t *so = json_object_get(json_object_get(record, "ranks"), "states");
        for (size_t s = 0; s < RANK_STATES; s++) {
                json_t *o = json_object_get(so, rank_states[s]);
                if (!o)
                        continue;
                json_object_set_new(o, "step_min", sum[s].stepped ? json_integer(sum[s].step_min) : json_null());
                json_object_set_new(o, "step_max", sum[s].stepped ? json_integer(sum[s].step_max) : json_null());
        }
        json_object_set_new(json_object_get(record, "file"), "checked_unix_ms",
                            json_integer(unix_ms(file->checked_ns)));
        progress_moving(json_object_get(record, "progress"), ps, n->progress);
        json_decref(n->progress);
        free(ps);
        memset(n, 0, sizeof(*n));
        json_object_set_new(record, "written_unix_ms", json_integer(unix_ms(now_ns)));
        return record;
}

/* The record now, as text for the file; its key is kept to tell the next change. */
static char *record_text(npf_fleet_t *f)
{
        npf_fleet_node_t n = { 0 };
        json_t *record;
        char *key, *text;

        f->node_fn(f->data, &n);
        record = npf_fleet_record_json(f->node, f->interval_ms, &n, npf_clock_ns(CLOCK_REALTIME), &key);
        text = record ? json_dumps(record, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(record);
        if (!text || !key) {
                free(text);
                free(key);
                return NULL;
        }
        free(f->key);
        f->key = key;
        return text;
}

static char *record_text_cb(void *data)
{
        return record_text(data);
}

int npf_fleet_new(uv_loop_t *loop, const char *dir, const char *node, uint64_t interval_ms, npf_fleet_node_fn fn,
                  void *data, npf_fleet_t **ret_fleet)
{
        npf_fleet_t *f = calloc(1, sizeof(*f));
        int r;

        if (!f)
                return -ENOMEM;
        f->dir = strdup(dir);
        f->node = strdup(node);
        if (f->dir && f->node && asprintf(&f->path, "%s/%s.json", strcmp(dir, "/") ? dir : "", node) < 0)
                f->path = NULL;
        f->interval_ms = interval_ms;
        f->node_fn = fn;
        f->data = data;
        r = f->path ? npf_kept_file_new(loop, f->path, "the fleet record", interval_ms, record_text_cb, f, &f->file)
                    : -ENOMEM;
        if (r < 0) {
                free(f->dir);
                free(f->node);
                free(f->path);
                free(f);
                return r;
        }
        *ret_fleet = f;
        return 0;
}

void npf_fleet_update(npf_fleet_t *f)
{
        char *before, *text;

        if (!f)
                return;
        before = f->key ? strdup(f->key) : NULL;
        text = record_text(f);
        if (text && (!before || !f->key || strcmp(before, f->key) != 0))
                npf_kept_file_put(f->file, text);
        else
                free(text);
        free(before);
}

json_t *npf_fleet_status_json(const npf_fleet_t *f)
{
        json_t *o = npf_kept_file_status_json(f->file);

        json_object_set_new(o, "dir", json_string(f->dir));
        json_object_set_new(o, "node", json_string(f->node));
        return o;
}

void npf_fleet_close(npf_fleet_t *f)
{
        if (!f)
                return;
        /* The keeper's last write asks the daemon once more, which says it is stopping. */
        npf_kept_file_close(f->file);
        free(f->dir);
        free(f->node);
        free(f->path);
        free(f->key);
        free(f);
}
