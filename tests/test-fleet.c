/* SPDX-License-Identifier: MIT */
/*
 * The fleet record, written by daemon/fleet and read by client/fleet: its size bound, what
 * counts as a change, every way a file in the directory can fail to be a record, and the
 * verdict over a directory of records.
 */
#include "client/fleet.h"
#include "daemon/fleet.h"
#include "npuprof/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmpdir.h"

#define NOW_NS UINT64_C(1800000000000000000)
#define NOW_MS ((int64_t) (NOW_NS / 1000000u))

static npf_shm_status_t file_status = { .file_state = NPF_FILE_VALID, .checked_ns = NOW_NS - 1000000000u };

/* A rank table as conf/view makes it: @n ranks, rank r in @states[r % n_states] at step 100 + r. */
static json_t *rank_table(unsigned n, const char *const *states, size_t n_states)
{
        json_t *rows = json_array();

        for (unsigned r = 0; r < n; r++)
                json_array_append_new(rows, json_pack("[I, I, I, s, n, n, n, I, I, I, n, n]", (json_int_t) r,
                                                      (json_int_t) (1000 + r), (json_int_t) (100 + r),
                                                      states[r % n_states], (json_int_t) 1, (json_int_t) 5,
                                                      (json_int_t) r));
        return json_pack("{s:[s, s, s, s, s, s, s, s, s, s, s, s], s:o}", "columns", "rank", "pid", "step", "state",
                         "state_step", "start_step", "stop_step", "generation", "heartbeat_age_ms", "local_device",
                         "message", "output", "rows", rows);
}

/* @n windows that ended, each with an output directory of @path_len bytes. */
static json_t *history(unsigned n, size_t path_len)
{
        json_t *a = json_array();
        char *dir = malloc(path_len + 1);

        memset(dir, 'd', path_len);
        dir[0] = '/';
        dir[path_len] = '\0';
        for (unsigned i = 0; i < n; i++)
                json_array_append_new(a, json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:n}", "rank", (json_int_t) i,
                                                   "generation", (json_int_t) 2, "start_step", (json_int_t) 10,
                                                   "stop_step", (json_int_t) 12, "outcome", "done", "output", dir,
                                                   "ended_unix_ms", (json_int_t) NOW_MS, "message"));
        free(dir);
        return a;
}

static npf_fleet_node_t node_of(unsigned ranks, const char *const *states, size_t n_states, unsigned windows,
                                size_t path_len)
{
        return (npf_fleet_node_t) {
                .started_real_ns = NOW_NS - 60 * UINT64_C(1000000000),
                .config_path = "/shared/profiler_config.json",
                .file = &file_status,
                .read_hash = 0xfeedu,
                .read_mtime_ns = NOW_NS - 5 * UINT64_C(1000000000),
                .generation = 2,
                .in_force_hash = 0xfeedu,
                .published_ns = NOW_NS - 4 * UINT64_C(1000000000),
                .ranks = rank_table(ranks, states, n_states),
                .outcomes = json_pack("{s:i, s:i, s:i, s:i, s:i}", "done", (int) windows, "failed", 0, "missed", 0,
                                      "filtered", 0, "lost", 0),
                .recent = history(windows, path_len),
                .analysis = json_pack("{s:i, s:i, s:i, s:i, s:b}", "queued", 1, "running", 0, "done", 3, "failed", 0,
                                      "enabled", 1),
        };
}

static const char *const collecting[] = { "collecting" };

/* The record of @node as the daemon writes it, as text. */
static char *record_text(const char *node, npf_fleet_node_t *n, uint64_t now_ns, char **key)
{
        json_t *r = npf_fleet_record_json(node, 10000, n, now_ns, key);
        char *text;

        assert_non_null(r);
        text = json_dumps(r, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        json_decref(r);
        assert_non_null(text);
        return text;
}

static void test_record_round_trip(void **state)
{
        static const char *const states[] = { "collecting", "idle", "stalled" };
        npf_fleet_node_t n = node_of(9, states, 3, 2, 40);
        char *text = record_text("node-7", &n, NOW_NS, NULL), why[256] = "";
        json_t *r = npf_fleet_parse("node-7.json", text, strlen(text), NOW_MS, why, sizeof(why));
        (void) state;

        assert_non_null(r);
        assert_string_equal(why, "");
        json_t *st = json_object_get(json_object_get(r, "ranks"), "states");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "ranks"), "attached")), 9);
        /* Ranks 0, 3, 6 collect at steps 100, 103, 106; 1, 4, 7 idle; 2, 5, 8 stalled. */
        assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "collecting"), "count")), 3);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "collecting"), "step_min")), 100);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "collecting"), "step_max")), 106);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "stalled"), "step_max")), 108);
        assert_null(json_object_get(st, "armed"));      /* a state without ranks is left out */
        assert_string_equal(json_string_value(json_object_get(json_object_get(r, "file"), "hash")), "000000000000feed");
        assert_string_equal(json_string_value(json_object_get(r, "state")), "running");
        assert_int_equal(json_integer_value(json_object_get(r, "written_unix_ms")), NOW_MS);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "analysis"), "queued")), 1);
        assert_null(json_object_get(json_object_get(r, "analysis"), "enabled"));
        json_decref(r);
        free(text);
}

/* However many ranks and however long the paths, a record stays under its bound. */
static void test_record_bounded(void **state)
{
        static const char *const states[] = { NPF_PROTO_RANK_STATES };
        /* Outputs longer than any path, so that five of them would not fit. */
        npf_fleet_node_t n = node_of(NPF_SHM_SLOTS, states, sizeof(states) / sizeof(states[0]), 64, 16000);
        char *text = record_text("big", &n, NOW_NS, NULL), why[256];
        json_t *r = npf_fleet_parse("big.json", text, strlen(text), NOW_MS, why, sizeof(why));
        (void) state;

        assert_true(strlen(text) <= NPF_FLEET_RECORD_MAX);
        assert_non_null(r);
        size_t recent = json_array_size(json_object_get(json_object_get(r, "windows"), "recent"));
        assert_true(recent >= 1 && recent < NPF_FLEET_RECENT);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "ranks"), "attached")), NPF_SHM_SLOTS);
        json_decref(r);
        free(text);

        /* With short paths every one of the newest NPF_FLEET_RECENT is kept, and no more. */
        n = node_of(4, states, 1, 64, 30);
        text = record_text("small", &n, NOW_NS, NULL);
        r = npf_fleet_parse("small.json", text, strlen(text), NOW_MS, why, sizeof(why));
        assert_non_null(r);
        assert_int_equal(json_array_size(json_object_get(json_object_get(r, "windows"), "recent")), NPF_FLEET_RECENT);
        json_decref(r);
        free(text);
}

/* Steps and times move without being a change; a rank changing state, or the file, is one. */
static void test_record_key(void **state)
{
        static const char *const two[] = { "collecting", "idle" };
        npf_fleet_node_t a = node_of(4, collecting, 1, 1, 20), b = node_of(4, collecting, 1, 1, 20);
        char *ka, *kb, *kc, *kd;
        (void) state;

        free(record_text("n", &a, NOW_NS, &ka));
        json_integer_set(json_array_get(json_array_get(json_object_get(b.ranks, "rows"), 2), 2), 5000);
        free(record_text("n", &b, NOW_NS + 7 * UINT64_C(1000000000), &kb));
        assert_string_equal(ka, kb);

        npf_fleet_node_t c = node_of(4, two, 2, 1, 20);
        free(record_text("n", &c, NOW_NS, &kc));
        assert_string_not_equal(ka, kc);

        npf_fleet_node_t d = node_of(4, collecting, 1, 1, 20);
        d.read_hash = 0xbeefu;
        free(record_text("n", &d, NOW_NS, &kd));
        assert_string_not_equal(ka, kd);
        free(ka);
        free(kb);
        free(kc);
        free(kd);
}

/*
 * A rank table with progress: @n ranks at step 1000, ranks from 10 on 1000 - r (behind),
 * ranks 3 and 7 (when @n > 7) stalled at 500 and 400; every rank stalled with @all_stalled.
 */
static json_t *progress_table(unsigned n, bool all_stalled)
{
        json_t *rows = json_array();

        for (unsigned r = 0; r < n; r++) {
                bool stalled = all_stalled || (n > 7 && (r == 3 || r == 7));
                json_int_t step = r == 3 && n > 7 ? 500 : r == 7 && n > 7 ? 400 : r >= 10 ? 1000 - (json_int_t) r : 1000;
                json_array_append_new(rows, json_pack("[I, I, s, f, b, f]", (json_int_t) r, step, "idle", 41.5,
                                                      stalled, stalled ? 12.5 : 0.0));
        }
        return json_pack("{s:[s, s, s, s, s, s], s:o}", "columns", "rank", "step", "state", "step_time_ms", "stalled",
                         "stalled_for_s", "rows", rows);
}

static json_t *progress_reply(double factor)
{
        return json_pack("{s:f, s:o, s:[], s:I, s:n}", "step_time_ms", 41.5, "slowdown",
                         factor > 0 ? json_pack("{s:I, s:f, s:f}", "since_step", (json_int_t) 900, "factor", factor,
                                                "baseline_ms", 32.0)
                                    : json_null(),
                         "stalled_ranks", "fastest_step", (json_int_t) 1000, "message");
}

static json_int_t at(const json_t *o, const char *key)
{
        return json_integer_value(json_object_get(o, key));
}

/* The record of @n written as node @node and read back, which must succeed; its text in @ret_text. */
static json_t *round_trip(const char *node, npf_fleet_node_t *n, char **ret_text)
{
        char name[80], why[256] = "";
        json_t *r;

        *ret_text = record_text(node, n, NOW_NS, NULL);
        snprintf(name, sizeof(name), "%s.json", node);
        r = npf_fleet_parse(name, *ret_text, strlen(*ret_text), NOW_MS, why, sizeof(why));
        if (!r)
                fail_msg("%s: %s", node, why);
        return r;
}

/* The record's progress: the node's step range, step time, slowdown, stalled ranks and laggards. */
static void test_record_progress(void **state)
{
        npf_fleet_node_t n = node_of(1, collecting, 1, 0, 20);
        char *text;
        (void) state;

        json_decref(n.ranks);
        n.ranks = progress_table(40, false);
        n.progress = progress_reply(1.3);
        json_t *r = round_trip("p", &n, &text);
        json_t *p = json_object_get(r, "progress");
        assert_int_equal(at(p, "ranks"), 40);
        assert_int_equal(at(p, "step_min"), 400);
        assert_int_equal(at(p, "step_max"), 1000);
        assert_true(json_real_value(json_object_get(p, "step_time_ms")) == 41.5);
        assert_int_equal(at(json_object_get(p, "slowdown"), "since_step"), 900);
        assert_true(json_real_value(json_object_get(json_object_get(p, "slowdown"), "factor")) == 1.3);
        /* Stalled: the lowest step first. */
        json_t *st = json_object_get(p, "stalled");
        assert_int_equal(json_array_size(st), 2);
        assert_int_equal(at(json_array_get(st, 0), "rank"), 7);
        assert_int_equal(at(json_array_get(st, 0), "step"), 400);
        assert_true(json_real_value(json_object_get(json_array_get(st, 0), "stalled_for_s")) == 12.5);
        assert_int_equal(at(json_array_get(st, 1), "rank"), 3);
        assert_int_equal(at(p, "stalled_more"), 0);
        assert_int_equal(at(json_object_get(p, "stepping"), "count"), 38);
        assert_int_equal(at(json_object_get(p, "stepping"), "step_min"), 961);
        assert_int_equal(at(json_object_get(p, "stepping"), "step_max"), 1000);
        /* Laggards: ranks 10 to 39 (steps 990 to 961), worst first, NPF_FLEET_LAGGARDS of them. */
        json_t *lag = json_object_get(p, "laggards");
        assert_int_equal(json_array_size(lag), NPF_FLEET_LAGGARDS);
        assert_int_equal(at(json_array_get(lag, 0), "rank"), 39);
        assert_int_equal(at(json_array_get(lag, 0), "step"), 961);
        assert_int_equal(at(json_array_get(lag, NPF_FLEET_LAGGARDS - 1), "rank"), 39 - NPF_FLEET_LAGGARDS + 1);
        assert_int_equal(at(p, "laggards_more"), 30 - NPF_FLEET_LAGGARDS);
        json_decref(r);
        free(text);

        /* No ranks, no progress known: nulls and empty lists, still a record. */
        n = node_of(0, collecting, 1, 0, 20);
        r = round_trip("q", &n, &text);
        p = json_object_get(r, "progress");
        assert_true(json_is_null(json_object_get(p, "step_max")) && json_is_null(json_object_get(p, "slowdown")) &&
                    json_is_null(json_object_get(p, "step_time_ms")));
        assert_int_equal(json_array_size(json_object_get(p, "laggards")), 0);
        json_decref(r);
        free(text);
}

/* Every slot stalled: the lists stay bounded, the record under its bound. */
static void test_record_progress_bounded(void **state)
{
        npf_fleet_node_t n = node_of(1, collecting, 1, NPF_FLEET_RECENT, 4000);
        char *text;
        (void) state;

        json_decref(n.ranks);
        n.ranks = progress_table(NPF_SHM_SLOTS, true);
        n.progress = progress_reply(2.0);
        json_t *r = round_trip("b", &n, &text);
        assert_true(strlen(text) <= NPF_FLEET_RECORD_MAX);
        json_t *p = json_object_get(r, "progress");
        assert_int_equal(json_array_size(json_object_get(p, "stalled")), NPF_FLEET_LAGGARDS);
        assert_int_equal(at(p, "stalled_more"), NPF_SHM_SLOTS - NPF_FLEET_LAGGARDS);
        assert_int_equal(at(json_array_get(json_object_get(p, "stalled"), 0), "step"), 1000 - ((json_int_t) NPF_SHM_SLOTS - 1));
        assert_int_equal(at(json_object_get(p, "stepping"), "count"), 0);
        assert_true(json_is_null(json_object_get(json_object_get(p, "stepping"), "step_min")));
        json_decref(r);
        free(text);
}

/* Steps, the step time and the factor move without being a change; a stall or a slowdown begun is one. */
static void test_record_progress_key(void **state)
{
        npf_fleet_node_t a = node_of(1, collecting, 1, 0, 20), b, c, d;
        char *ka, *kb, *kc, *kd;
        (void) state;

        b = node_of(1, collecting, 1, 0, 20);
        c = node_of(1, collecting, 1, 0, 20);
        d = node_of(1, collecting, 1, 0, 20);
        json_decref(a.ranks);
        json_decref(b.ranks);
        json_decref(c.ranks);
        json_decref(d.ranks);
        a.ranks = progress_table(40, false);
        a.progress = progress_reply(1.3);
        b.ranks = progress_table(40, false);
        b.progress = progress_reply(1.5);
        /* Every rank that steps moved on 3 steps; the laggards are others now. */
        json_t *row;
        size_t i;
        json_array_foreach(json_object_get(b.ranks, "rows"), i, row)
                if (i != 3 && i != 7)
                        json_integer_set(json_array_get(row, 1), json_integer_value(json_array_get(row, 1)) + 3 + (i % 5));
        c.ranks = progress_table(40, true);
        c.progress = progress_reply(1.3);
        d.ranks = progress_table(40, false);
        d.progress = progress_reply(0);
        free(record_text("n", &a, NOW_NS, &ka));
        free(record_text("n", &b, NOW_NS + UINT64_C(1000000000), &kb));
        free(record_text("n", &c, NOW_NS, &kc));
        free(record_text("n", &d, NOW_NS, &kd));
        assert_string_equal(ka, kb);
        assert_string_not_equal(ka, kc);
        assert_string_not_equal(ka, kd);
        free(ka);
        free(kb);
        free(kc);
        free(kd);
}

/* parse @text as the file @name; it must be refused with a reason containing @reason. */
static void refused(const char *name, const char *text, const char *reason)
{
        char why[256] = "";
        json_t *r = npf_fleet_parse(name, text, strlen(text), NOW_MS, why, sizeof(why));

        if (r || !strstr(why, reason))
                fail_msg("%s: expected a refusal saying '%s', got %s '%s'", name, reason, r ? "a record" : "", why);
}

/* @text with the first @from replaced by @to. */
static char *edited(const char *text, const char *from, const char *to)
{
        const char *at = strstr(text, from);
        char *out;

        assert_non_null(at);
        assert_true(asprintf(&out, "%.*s%s%s", (int) (at - text), text, to, at + strlen(from)) > 0);
        return out;
}

static void test_parse_refuses(void **state)
{
        npf_fleet_node_t n = node_of(2, collecting, 1, 1, 20);
        char *good = record_text("n1", &n, NOW_NS, NULL), *t;
        char future[64];
        (void) state;

        refused("n1.json", "", "empty");
        t = strndup(good, strlen(good) / 2);
        refused("n1.json", t, "truncated");
        free(t);
        refused("n1.json", "{\"format\": 1,, }", "not JSON");
        refused("n1.json", "[1, 2, 3]", "format missing");
        json_t *r = npf_fleet_parse("n1.json", good, strlen(good), NOW_MS, future, sizeof(future));
        assert_non_null(r);             /* the record itself is taken */
        json_decref(r);
        t = edited(good, "\"format\": 1", "\"format\": 2");
        refused("n1.json", t, "a record of format 2");
        free(t);
        refused("n2.json", good, "the record of node 'n1', not of 'n2'");
        t = edited(good, "\"interval_s\"", "\"interval\"");
        refused("n1.json", t, "not a whole record");
        free(t);
        t = edited(good, "\"state\": \"running\"", "\"state\": \"dancing\"");
        refused("n1.json", t, "neither running nor stopped");
        free(t);
        t = edited(good, "\"mtime_ns\"", "\"mtime\"");
        refused("n1.json", t, "mtime_ns");
        free(t);
        snprintf(future, sizeof(future), "\"written_unix_ms\": %lld", (long long) (NOW_MS + 3600 * 1000));
        char now[64];
        snprintf(now, sizeof(now), "\"written_unix_ms\": %lld", (long long) NOW_MS);
        t = edited(good, now, future);
        refused("n1.json", t, "in the future");
        free(t);
        t = edited(good, "\"format\": 1,", "\"format\": 1, \"format\": 1,");
        refused("n1.json", t, "duplicate");
        free(t);
        free(good);
}

static void put(const tmpdir_t *d, const char *name, const char *text)
{
        int fd = openat(d->fd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        close(fd);
}

/* Write the record of @node into @d as the daemon would, at @written_ns, reading version @hash. */
static void put_node(const tmpdir_t *d, const char *node, uint64_t hash, uint64_t mtime_ns, uint64_t written_ns,
                     uint32_t file_state, bool stopping)
{
        npf_shm_status_t st = file_status;
        npf_fleet_node_t n = node_of(2, collecting, 1, 1, 20);
        char name[80], *text;

        st.file_state = file_state;
        n.file = &st;
        n.read_hash = hash;
        n.read_mtime_ns = mtime_ns;
        n.stopping = stopping;
        text = record_text(node, &n, written_ns, NULL);
        snprintf(name, sizeof(name), "%s.json", node);
        put(d, name, text);
        free(text);
}

static const char *list(const json_t *fleet, const char *key)
{
        static char out[256];
        size_t i;
        json_t *s;

        out[0] = '\0';
        json_array_foreach(json_object_get(fleet, key), i, s)
                snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? " " : "",
                         json_is_string(s) ? json_string_value(s)
                                           : json_string_value(json_object_get(s, "file")));
        return out;
}

static void test_judge(void **state)
{
        const tmpdir_t *d = *state;
        uint64_t old = NOW_NS - 100 * UINT64_C(1000000000), new = NOW_NS - 10 * UINT64_C(1000000000);
        json_t *fleet;

        fleet = npf_fleet_judge(d->path, NOW_MS);
        assert_non_null(fleet);
        assert_int_equal(npf_fleet_verdict(fleet), 1);          /* no node at all: nothing agrees */
        json_decref(fleet);

        put_node(d, "a", 0x2, new, NOW_NS, NPF_FILE_VALID, false);
        put_node(d, "b", 0x2, new, NOW_NS, NPF_FILE_VALID, false);
        put_node(d, "c", 0x2, new, NOW_NS, NPF_FILE_VALID, false);
        fleet = npf_fleet_judge(d->path, NOW_MS);
        assert_int_equal(npf_fleet_verdict(fleet), 0);
        assert_int_equal(json_integer_value(json_object_get(fleet, "generation")), 2);
        assert_string_equal(list(fleet, "lagging"), "");
        json_decref(fleet);

        /* b read the old version; c's record is 31 s old at a 10 s interval; d stopped; e finds it
         * invalid; f has read nothing yet. */
        put_node(d, "b", 0x1, old, NOW_NS, NPF_FILE_VALID, false);
        put_node(d, "c", 0x2, new, NOW_NS - 31 * UINT64_C(1000000000), NPF_FILE_VALID, false);
        put_node(d, "d", 0x2, new, NOW_NS - 60 * UINT64_C(1000000000), NPF_FILE_VALID, true);
        put_node(d, "e", 0x3, new - 1, NOW_NS, NPF_FILE_INVALID, false);
        /* f has not read the file yet (its daemon just started): lagging, not invalid. */
        put_node(d, "f", 0, 0, NOW_NS, NPF_FILE_UNKNOWN, false);
        /* Files that are not records, and files that are not looked at. */
        put(d, "trunc.json", "{\"format\": 1, \"node\": \"tr");
        put(d, "garbage.json", "\x7f" "ELF binary");
        put(d, ".f.json", "hidden: a daemon's temporary");
        put(d, "notes.txt", "not a record's name");
        char *huge = malloc(NPF_FLEET_RECORD_MAX + 100);
        memset(huge, ' ', NPF_FLEET_RECORD_MAX + 99);
        huge[NPF_FLEET_RECORD_MAX + 99] = '\0';
        put(d, "huge.json", huge);
        free(huge);
        assert_int_equal(mkfifoat(d->fd, "fifo.json", 0644), 0);
        assert_int_equal(symlinkat("/etc/passwd", d->fd, "link.json"), 0);
        assert_int_equal(mkdirat(d->fd, "dir.json", 0755), 0);

        fleet = npf_fleet_judge(d->path, NOW_MS);
        assert_non_null(fleet);
        assert_int_equal(npf_fleet_verdict(fleet), 1);
        assert_int_equal(json_array_size(json_object_get(fleet, "nodes")), 6);
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(fleet, "nodes"), 0), "node")), "a");
        assert_string_equal(list(fleet, "lagging"), "b e f");
        assert_string_equal(list(fleet, "stale"), "c");
        assert_string_equal(list(fleet, "stopped"), "d");
        assert_string_equal(list(fleet, "invalid"), "e");
        json_t *unreadable = json_object_get(fleet, "unreadable");
        assert_int_equal(json_array_size(unreadable), 6);
        size_t i;
        json_t *u;
        json_array_foreach(unreadable, i, u) {
                const char *file = json_string_value(json_object_get(u, "file"));
                const char *why = json_string_value(json_object_get(u, "reason"));
                const char *want = strcmp(file, "trunc.json") == 0     ? "truncated"
                                   : strcmp(file, "garbage.json") == 0 ? "not JSON"
                                   : strcmp(file, "huge.json") == 0    ? "larger than"
                                   : strcmp(file, "fifo.json") == 0    ? "not a regular file"
                                   : strcmp(file, "link.json") == 0    ? "symbolic link"
                                   : strcmp(file, "dir.json") == 0     ? "not a regular file"
                                                                       : "?";
                if (!strstr(why, want))
                        fail_msg("%s: '%s' does not say '%s'", file, why, want);
        }
        /* The newest version of the file is what a, c and d read. */
        json_t *newest = json_array_get(json_object_get(fleet, "newest"), 0);
        assert_string_equal(json_string_value(json_object_get(newest, "hash")), "0000000000000002");
        assert_int_equal(json_integer_value(json_object_get(newest, "nodes")), 3);
        json_decref(fleet);

        errno = 0;
        assert_null(npf_fleet_judge("/nonexistent/fleet", NOW_MS));
        assert_int_equal(errno, ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_record_round_trip),
                cmocka_unit_test(test_record_bounded),
                cmocka_unit_test(test_record_key),
                cmocka_unit_test(test_record_progress),
                cmocka_unit_test(test_record_progress_bounded),
                cmocka_unit_test(test_record_progress_key),
                cmocka_unit_test(test_parse_refuses),
                cmocka_unit_test_setup_teardown(test_judge, tmpdir_setup, tmpdir_teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
