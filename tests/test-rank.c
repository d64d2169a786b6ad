/* SPDX-License-Identifier: MIT */
/*
 * The rank library's window state machine. Each test plays the daemon: it creates a private
 * segment as its writer, publishes configurations parsed from profiler_config.json text with
 * an absolute prof_dir under a private temporary directory, drives ranks through
 * npf_rank_step(), and checks what the rank says (npf_rank_info()), what its slot shows to
 * the daemon, and the files it leaves: the window directory, manifest.json and trace.json.
 * The ACL cases load the recording stand-in stub-acl/libascendcl.so built next to this
 * binary, and are skipped when it is not there.
 */
#include "npuprof/rank.h"
#include "conf/conf.h"
#include "shm/slot.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <setjmp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define MAX_HANDLES 64

typedef struct fixture {
        char name[64];                  /* private segment */
        char tmp[64];                   /* private directory, removed at teardown */
        char prof_dir[128];             /* tmp/prof: what the daemon publishes */
        npf_shm_t *writer;              /* the daemon's side; NULL until the segment exists */
        npf_rank_t *h[MAX_HANDLES];     /* closed at teardown when still open */
} fixture_t;

/* What a check had loaded when an assertion jumped out of it; freed at teardown. */
static json_t *held_json;
static int *held_seen;

static void drop_json(json_t *j)
{
        assert_ptr_equal(j, held_json);
        json_decref(j);
        held_json = NULL;
}

static void create_segment(fixture_t *f)
{
        char err[NPF_SHM_ERR_MAX];

        assert_int_equal(npf_shm_open(f->name, NPF_SHM_WRITER | NPF_SHM_CREATE, &f->writer, err), 0);
}

static int setup_common(void **state, bool segment)
{
        static int n;
        fixture_t *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        snprintf(f->name, sizeof(f->name), "npftest-rank-%d-%d", (int) getpid(), n++);
        npf_shm_unlink(f->name);
        snprintf(f->tmp, sizeof(f->tmp), "/tmp/npftest-rank-XXXXXX");
        assert_non_null(mkdtemp(f->tmp));
        snprintf(f->prof_dir, sizeof(f->prof_dir), "%s/prof", f->tmp);
        if (segment)
                create_segment(f);
        *state = f;
        return 0;
}

static int setup(void **state)
{
        return setup_common(state, true);
}

/* No daemon yet: the segment does not exist. */
static int setup_detached(void **state)
{
        return setup_common(state, false);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void) st;
        (void) type;
        (void) ftw;
        remove(path);
        return 0;
}

static int teardown(void **state)
{
        fixture_t *f = *state;

        for (int i = 0; i < MAX_HANDLES; i++)
                npf_rank_close(f->h[i]);
        unsetenv("NPUPROF_ACL_LIB");
        unsetenv("NPUPROF_MSPROFILER_LIB");
        unsetenv("NPF_ACL_STUB_LOG");
        unsetenv("NPF_ACL_STUB_FAIL");
        unsetenv("NPF_ACL_STUB_SOC");
        unsetenv("NPF_ACL_STUB_SET_DEVICE");
        npf_shm_close(f->writer);
        npf_shm_unlink(f->name);
        nftw(f->tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        json_decref(held_json);
        held_json = NULL;
        free(held_seen);
        held_seen = NULL;
        free(f);
        return 0;
}

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Parse @json as the daemon would and publish it with @prof_dir. Return: the generation. */
static uint64_t publish_dir(fixture_t *f, const char *json, const char *prof_dir)
{
        npf_shm_config_t *c = calloc(1, sizeof(*c));
        npf_conf_report_t *report = calloc(1, sizeof(*report));
        uint64_t generation = 0;

        assert_non_null(c);
        assert_non_null(report);
        if (npf_conf_parse(json, strlen(json), c, report) != 0)
                fail_msg("%s: %s", json, report->errors[0].message);
        assert_true(strlen(prof_dir) < sizeof(c->prof_dir));
        snprintf(c->prof_dir, sizeof(c->prof_dir), "%s", prof_dir);
        c->args.prof_dir_len = (uint32_t) strlen(prof_dir);
        assert_int_equal(npf_shm_publish_config(f->writer, c, &generation), 0);
        free(report);
        free(c);
        return generation;
}

static uint64_t publish(fixture_t *f, const char *json)
{
        return publish_dir(f, json, f->prof_dir);
}

/* Open rank @rank on the fixture's segment with backend @backend into f->h[@i]. */
static npf_rank_t *open_rank(fixture_t *f, int i, int64_t rank, const char *backend)
{
        npf_rank_options_t o = { .shm_name = f->name, .rank = rank, .local_device = 0, .backend = backend };
        char err[NPF_SHM_ERR_MAX] = "";
        int r = npf_rank_open(&o, &f->h[i], err);

        if (r != 0)
                fail_msg("npf_rank_open(rank %" PRId64 "): %d %s", rank, r, err);
        return f->h[i];
}

static npf_rank_info_t info_of(const npf_rank_t *h)
{
        npf_rank_info_t i;

        npf_rank_info(h, &i);
        return i;
}

/* Step @h through @from .. @to, each step returning 0. */
static void steps(npf_rank_t *h, int64_t from, int64_t to)
{
        for (int64_t s = from; s <= to; s++)
                assert_int_equal(npf_rank_step(h, s), 0);
}

static void assert_state(const npf_rank_t *h, uint32_t state, int64_t state_step)
{
        npf_rank_info_t i = info_of(h);

        if (i.state != state || i.state_step != state_step)
                fail_msg("rank %" PRId64 ": %s at step %" PRId64 ", expected %s at step %" PRId64 " (%s)", i.rank,
                         npf_shm_window_state_name(i.state), i.state_step, npf_shm_window_state_name(state),
                         state_step, i.message);
}

/* The slot index of rank @rank in the daemon's table. */
static uint32_t slot_index(fixture_t *f, uint32_t rank)
{
        const npf_shm_ranks_t *t = npf_shm_ranks(f->writer);
        uint32_t e = __atomic_load_n(&t->index[rank], __ATOMIC_ACQUIRE);

        assert_int_not_equal(e, 0);
        return NPF_INDEX_SLOT(e);
}

/* What the daemon reads in the slot at @index. */
static npf_slot_view_t slot_at(fixture_t *f, uint32_t index)
{
        npf_slot_view_t v;

        assert_int_equal(npf_slot_read(npf_shm_ranks(f->writer), index, &v), 0);
        return v;
}

static npf_slot_view_t slot_of(fixture_t *f, uint32_t rank)
{
        npf_slot_view_t v = slot_at(f, slot_index(f, rank));

        assert_int_equal(v.rank, rank);
        assert_int_equal(v.pid, (uint32_t) getpid());
        return v;
}

static void assert_slot(fixture_t *f, uint32_t rank, uint64_t generation, uint32_t state, int64_t state_step)
{
        npf_slot_view_t v = slot_of(f, rank);

        if (v.st.generation != generation || v.st.state != state || v.st.state_step != state_step)
                fail_msg("slot of rank %u: generation %" PRIu64 " %s at step %" PRId64 ", expected generation %" PRIu64
                         " %s at step %" PRId64, rank, v.st.generation, npf_shm_window_state_name(v.st.state),
                         v.st.state_step, generation, npf_shm_window_state_name(state), state_step);
}

static bool exists(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0;
}

static void window_dir(fixture_t *f, char *buf, size_t size, const char *leaf)
{
        snprintf(buf, size, "%s/%s", f->prof_dir, leaf);
}

/* Number of entries in f->prof_dir, 0 if it does not exist. */
static int count_windows(fixture_t *f)
{
        char cmd[256];
        int n = 0;

        snprintf(cmd, sizeof(cmd), "ls -A '%s' 2>/dev/null | wc -l", f->prof_dir);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        assert_int_equal(fscanf(p, "%d", &n), 1);
        pclose(p);
        return n;
}

/*
 * Check @dir/manifest.json: @status, the window, the backend, and every file listed with
 * its size on disk. @stop and @last may be NPF_STEP_NONE for null.
 */
static json_t *check_manifest(const char *dir, int64_t rank, const char *status, int64_t start, int64_t stop,
                              int64_t last, const char *backend)
{
        char path[512];
        json_error_t je;

        snprintf(path, sizeof(path), "%s/manifest.json", dir);
        json_t *m = held_json = json_load_file(path, 0, &je);
        if (!m)
                fail_msg("%s: %s", path, je.text);
        assert_string_equal(json_string_value(json_object_get(m, "status")), status);
        assert_int_equal(json_integer_value(json_object_get(m, "rank")), rank);
        assert_int_equal(json_integer_value(json_object_get(m, "pid")), getpid());
        assert_string_equal(json_string_value(json_object_get(m, "backend")), backend);
        json_t *w = json_object_get(m, "window");
        assert_true(json_is_object(w));
        assert_int_equal(json_integer_value(json_object_get(w, "start_step")), start);
        if (stop == NPF_STEP_NONE)
                assert_true(json_is_null(json_object_get(w, "stop_step")));
        else
                assert_int_equal(json_integer_value(json_object_get(w, "stop_step")), stop);
        if (last == NPF_STEP_NONE)
                assert_true(json_is_null(json_object_get(w, "last_step")));
        else
                assert_int_equal(json_integer_value(json_object_get(w, "last_step")), last);
        json_t *files = json_object_get(m, "files"), *file;
        size_t i;
        bool trace = false;
        assert_true(json_is_array(files));
        json_array_foreach(files, i, file) {
                const char *name = json_string_value(json_object_get(file, "name"));
                struct stat st;
                assert_non_null(name);
                snprintf(path, sizeof(path), "%s/%s", dir, name);
                assert_int_equal(stat(path, &st), 0);
                assert_int_equal(json_integer_value(json_object_get(file, "size")), st.st_size);
                trace |= strcmp(name, "trace.json") == 0;
        }
        if (strcmp(backend, "host") == 0)
                assert_true(trace);
        /* Written last and atomically: no temporary is left behind. */
        snprintf(path, sizeof(path), "%s/.manifest.json.tmp", dir);
        assert_false(exists(path));
        return m;       /* still held: the caller drops it with drop_json() */
}

/* The ProfilerStep#N spans of @dir/trace.json must be exactly @first .. @last, once each. */
static void check_trace(const char *dir, int64_t first, int64_t last)
{
        char path[512];
        json_error_t je;
        json_t *ev;
        size_t i;
        int64_t n = last - first + 1;
        int *seen = held_seen = calloc((size_t) n, sizeof(int));

        assert_non_null(seen);
        snprintf(path, sizeof(path), "%s/trace.json", dir);
        json_t *t = held_json = json_load_file(path, 0, &je);
        if (!t)
                fail_msg("%s: line %d: %s", path, je.line, je.text);
        json_t *events = json_object_get(t, "traceEvents");
        assert_true(json_is_array(events));
        json_array_foreach(events, i, ev) {
                const char *name = json_string_value(json_object_get(ev, "name"));
                const char *ph = json_string_value(json_object_get(ev, "ph"));
                long long step;
                char tail;
                if (!name || !ph || strcmp(ph, "X") != 0 || strncmp(name, "ProfilerStep#", 13) != 0)
                        continue;
                assert_int_equal(sscanf(name + 13, "%lld%c", &step, &tail), 1);
                if (step < first || step > last)
                        fail_msg("%s: ProfilerStep#%lld outside the window %" PRId64 "..%" PRId64, path, step, first,
                                 last);
                seen[step - first]++;
        }
        for (int64_t s = 0; s < n; s++)
                if (seen[s] != 1)
                        fail_msg("%s: ProfilerStep#%" PRId64 " appears %d times", path, first + s, seen[s]);
        json_decref(t);
        free(seen);
        held_json = NULL;
        held_seen = NULL;
}

static void check_done_window(fixture_t *f, int64_t rank, int64_t start, int64_t stop)
{
        char leaf[128], dir[512];

        snprintf(leaf, sizeof(leaf), "rank%" PRId64 "_start%" PRId64 "_stop%" PRId64, rank, start, stop);
        window_dir(f, dir, sizeof(dir), leaf);
        drop_json(check_manifest(dir, rank, "complete", start, stop, stop, "host"));
        check_trace(dir, start, stop);
}

/* --- idle, armed, collecting, done ------------------------------------------------- */

static void test_idle_when_off(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        /* Nothing published yet. */
        assert_true(info_of(h).attached);
        steps(h, 1, 2);
        assert_state(h, NPF_WINDOW_IDLE, NPF_STEP_NONE);

        /* A configuration without start_step: profiling is off. */
        uint64_t g = publish(f, "{\"steps\": 5, \"backend\": \"host\"}");
        steps(h, 3, 20);
        assert_state(h, NPF_WINDOW_IDLE, 3);
        npf_rank_info_t i = info_of(h);
        assert_int_equal(i.generation, g);
        assert_string_equal(i.output, "");
        assert_int_equal(i.window_start, NPF_STEP_NONE);
        assert_slot(f, 0, g, NPF_WINDOW_IDLE, 3);
        assert_int_equal(slot_of(f, 0).step, 20);
        assert_int_equal(count_windows(f), 0);
}

static void test_armed_before_start(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 2, "host");

        steps(h, 1, 3);
        uint64_t g = publish(f, "{\"start_step\": 10, \"steps\": 3}");
        steps(h, 4, 4);
        assert_state(h, NPF_WINDOW_ARMED, 4);
        steps(h, 5, 9);
        /* Still armed, and still since the step at which it read the configuration. */
        assert_state(h, NPF_WINDOW_ARMED, 4);
        npf_rank_info_t i = info_of(h);
        assert_int_equal(i.generation, g);
        assert_int_equal(i.window_start, 10);
        assert_int_equal(i.window_stop, 12);
        assert_string_equal(i.output, "");
        npf_slot_view_t v = slot_of(f, 2);
        assert_int_equal(v.st.state, NPF_WINDOW_ARMED);
        assert_int_equal(v.st.state_step, 4);
        assert_int_equal(v.st.window_start, 10);
        assert_int_equal(v.st.window_stop, 12);
        assert_int_equal(v.step, 9);
        assert_int_equal(count_windows(f), 0);
}

static void test_collecting_from_start_step(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");
        char dir[512];

        uint64_t g = publish(f, "{\"start_step\": 10, \"steps\": 3}");
        steps(h, 1, 9);
        assert_state(h, NPF_WINDOW_ARMED, 1);
        window_dir(f, dir, sizeof(dir), "rank0_start10_stop12");
        assert_false(exists(dir));

        steps(h, 10, 10);
        assert_state(h, NPF_WINDOW_COLLECTING, 10);
        npf_rank_info_t i = info_of(h);
        assert_string_equal(i.output, dir);
        assert_string_equal(i.backend, "host");
        assert_true(exists(dir));
        npf_slot_view_t v = slot_of(f, 0);
        assert_int_equal(v.st.generation, g);
        assert_int_equal(v.st.state, NPF_WINDOW_COLLECTING);
        assert_int_equal(v.st.state_step, 10);
        assert_int_equal(v.st.backend, NPF_BACKEND_HOST);
        assert_string_equal(v.st.output, "rank0_start10_stop12");

        /* Collecting through the stop step, and the manifest only once it is closed. */
        steps(h, 11, 12);
        assert_state(h, NPF_WINDOW_COLLECTING, 10);
        char path[600];
        snprintf(path, sizeof(path), "%s/manifest.json", dir);
        assert_false(exists(path));
}

static void test_done_after_stop_step(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 1, "host");
        char dir[512];

        uint64_t g = publish(f, "{\"start_step\": 10, \"steps\": 3}");
        steps(h, 1, 12);
        assert_state(h, NPF_WINDOW_COLLECTING, 10);
        steps(h, 13, 13);
        assert_state(h, NPF_WINDOW_DONE, 13);
        npf_rank_info_t i = info_of(h);
        assert_string_equal(i.message, "");
        window_dir(f, dir, sizeof(dir), "rank1_start10_stop12");
        assert_string_equal(i.output, dir);

        json_t *m = check_manifest(dir, 1, "complete", 10, 12, 12, "host");
        assert_int_equal(json_integer_value(json_object_get(m, "generation")), g);
        assert_true(json_is_string(json_object_get(m, "host")));
        assert_true(json_integer_value(json_object_get(m, "ended_unix_ms")) >=
                    json_integer_value(json_object_get(m, "started_unix_ms")));
        drop_json(m);
        check_trace(dir, 10, 12);

        npf_slot_view_t v = slot_of(f, 1);
        assert_int_equal(v.st.generation, g);
        assert_int_equal(v.st.state, NPF_WINDOW_DONE);
        assert_int_equal(v.st.state_step, 13);
        assert_string_equal(v.st.output, "rank1_start10_stop12");
        assert_string_equal(v.st.message, "");
        assert_int_equal(count_windows(f), 1);
}

/* --- the outcomes ------------------------------------------------------------------ */

static void test_missed_when_read_after_start(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        steps(h, 1, 14);
        uint64_t g = publish(f, "{\"start_step\": 10, \"steps\": 3}");
        steps(h, 15, 15);
        assert_state(h, NPF_WINDOW_MISSED, 15);
        npf_rank_info_t i = info_of(h);
        assert_non_null(strstr(i.message, "step 15"));
        assert_non_null(strstr(i.message, "10"));
        npf_slot_view_t v = slot_of(f, 0);
        assert_int_equal(v.st.generation, g);
        assert_int_equal(v.st.state, NPF_WINDOW_MISSED);
        assert_int_equal(v.st.state_step, 15);
        assert_int_equal(v.st.window_start, 10);
        assert_string_equal(v.st.message, i.message);

        /* A missed window is not opened late. */
        steps(h, 16, 30);
        assert_state(h, NPF_WINDOW_MISSED, 15);
        assert_int_equal(count_windows(f), 0);
}

/* Read exactly at the start step: not missed, collecting from that very step. */
static void test_read_at_start_step_collects(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        steps(h, 1, 9);
        publish(f, "{\"start_step\": 10, \"steps\": 2}");
        steps(h, 10, 10);
        assert_state(h, NPF_WINDOW_COLLECTING, 10);
        steps(h, 11, 12);
        assert_state(h, NPF_WINDOW_DONE, 12);
        check_done_window(f, 0, 10, 11);
}

static void test_filtered_and_selected(void **state)
{
        fixture_t *f = *state;
        npf_shm_config_t *c = calloc(1, sizeof(*c));
        npf_conf_report_t *report = calloc(1, sizeof(*report));
        const char *json = "{\"start_step\": 5, \"steps\": 2, \"ranks\": \"1,3\"}";

        /* What the daemon publishes for that list: a list filter and its bitmap. */
        assert_int_equal(npf_conf_parse(json, strlen(json), c, report), 0);
        assert_int_equal(c->args.rank_filter, NPF_RANKS_LIST);
        assert_int_equal(c->args.rank_count, 2);
        assert_int_equal(c->rank_bitmap[0], (1u << 1) | (1u << 3));
        free(report);
        free(c);

        for (int r = 0; r < 4; r++)
                open_rank(f, r, r, "host");
        uint64_t g = publish(f, json);
        for (int r = 0; r < 4; r++)
                steps(f->h[r], 1, 1);
        assert_state(f->h[0], NPF_WINDOW_FILTERED, 1);
        assert_state(f->h[1], NPF_WINDOW_ARMED, 1);
        assert_state(f->h[2], NPF_WINDOW_FILTERED, 1);
        assert_state(f->h[3], NPF_WINDOW_ARMED, 1);
        assert_slot(f, 0, g, NPF_WINDOW_FILTERED, 1);
        assert_slot(f, 1, g, NPF_WINDOW_ARMED, 1);
        assert_slot(f, 2, g, NPF_WINDOW_FILTERED, 1);
        assert_slot(f, 3, g, NPF_WINDOW_ARMED, 1);

        for (int r = 0; r < 4; r++)
                steps(f->h[r], 2, 10);
        assert_state(f->h[0], NPF_WINDOW_FILTERED, 1);
        assert_state(f->h[1], NPF_WINDOW_DONE, 7);
        assert_state(f->h[2], NPF_WINDOW_FILTERED, 1);
        assert_state(f->h[3], NPF_WINDOW_DONE, 7);
        check_done_window(f, 1, 5, 6);
        check_done_window(f, 3, 5, 6);
        assert_int_equal(count_windows(f), 2);
}

/* The ACL runtime cannot be loaded: failed, and the message says why. */
static void test_failed_when_backend_refuses(void **state)
{
        fixture_t *f = *state;
        const char *missing = "/nonexistent/npuprof-test/libascendcl.so";

        assert_int_equal(setenv("NPUPROF_ACL_LIB", missing, 1), 0);
        npf_rank_t *h = open_rank(f, 0, 0, "acl");
        uint64_t g = publish(f, "{\"start_step\": 3, \"steps\": 2}");
        steps(h, 1, 2);
        assert_state(h, NPF_WINDOW_ARMED, 1);
        assert_true(npf_rank_step(h, 3) < 0);
        assert_state(h, NPF_WINDOW_FAILED, 3);
        npf_rank_info_t i = info_of(h);
        assert_non_null(strstr(i.message, missing));
        npf_slot_view_t v = slot_of(f, 0);
        assert_int_equal(v.st.generation, g);
        assert_int_equal(v.st.state, NPF_WINDOW_FAILED);
        assert_int_equal(v.st.state_step, 3);
        assert_non_null(strstr(v.st.message, missing));

        /* The training loop carries on; the rank does not retry every step. */
        steps(h, 4, 20);
        assert_state(h, NPF_WINDOW_FAILED, 3);
}

/* The host backend cannot create the window directory: failed, with the reason. */
static void test_failed_when_directory_refused(void **state)
{
        fixture_t *f = *state;
        char file[128], prof[160];

        snprintf(file, sizeof(file), "%s/not-a-directory", f->tmp);
        FILE *fp = fopen(file, "w");
        assert_non_null(fp);
        fclose(fp);
        snprintf(prof, sizeof(prof), "%s/prof", file);

        npf_rank_t *h = open_rank(f, 0, 0, "host");
        publish_dir(f, "{\"start_step\": 2, \"steps\": 2}", prof);
        steps(h, 1, 1);
        assert_true(npf_rank_step(h, 2) < 0);
        assert_state(h, NPF_WINDOW_FAILED, 2);
        npf_rank_info_t i = info_of(h);
        assert_non_null(strstr(i.message, "not-a-directory"));
        assert_non_null(strstr(i.message, strerror(ENOTDIR)));
        assert_non_null(strstr(slot_of(f, 0).st.message, strerror(ENOTDIR)));
        steps(h, 3, 6);
        assert_state(h, NPF_WINDOW_FAILED, 2);
}

/*
 * The recording stand-in for libascendcl.so, built next to this test as
 * stub-acl/libascendcl.so; without it the ACL cases are skipped. Sets the environment the
 * acl backend reads, with the call log in f->tmp/acl.log. Return: the log's path.
 */
static const char *use_acl_stub(fixture_t *f, const char *fail)
{
        static char log[128];
        char exe[512], lib[600];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

        assert_true(n > 0);
        exe[n] = '\0';
        *strrchr(exe, '/') = '\0';
        snprintf(lib, sizeof(lib), "%s/stub-acl/libascendcl.so", exe);
        if (!exists(lib)) {
                print_message("no %s: ACL windows not tested\n", lib);
                skip();
        }
        snprintf(log, sizeof(log), "%s/acl.log", f->tmp);
        assert_int_equal(setenv("NPUPROF_ACL_LIB", lib, 1), 0);
        assert_int_equal(setenv("NPUPROF_MSPROFILER_LIB", "", 1), 0);
        assert_int_equal(setenv("NPF_ACL_STUB_LOG", log, 1), 0);
        if (fail)
                assert_int_equal(setenv("NPF_ACL_STUB_FAIL", fail, 1), 0);
        return log;
}

/* Whether the ACL call log holds a call to @call. */
static bool acl_called(const char *log, const char *call)
{
        char line[8192];
        bool found = false;
        FILE *fp = fopen(log, "r");

        if (!fp)
                return false;
        while (!found && fgets(line, sizeof(line), fp))
                found = strncmp(line, call, strlen(call)) == 0 && line[strlen(call)] == ' ';
        fclose(fp);
        return found;
}

/* An ACL window starts its session at the first step and stops it after the last. */
static void test_acl_window_done(void **state)
{
        fixture_t *f = *state;
        const char *log = use_acl_stub(f, NULL);
        char dir[512];

        npf_rank_t *h = open_rank(f, 0, 0, "acl");
        uint64_t g = publish(f, "{\"start_step\": 3, \"steps\": 2}");
        steps(h, 1, 2);
        assert_state(h, NPF_WINDOW_ARMED, 1);
        assert_false(acl_called(log, "aclprofStart"));
        steps(h, 3, 3);
        assert_state(h, NPF_WINDOW_COLLECTING, 3);
        assert_true(acl_called(log, "aclprofInit"));
        assert_true(acl_called(log, "aclprofStart"));
        steps(h, 4, 4);
        assert_false(acl_called(log, "aclprofStop"));
        steps(h, 5, 5);
        assert_state(h, NPF_WINDOW_DONE, 5);
        assert_true(acl_called(log, "aclprofStop"));
        assert_true(acl_called(log, "aclprofFinalize"));
        assert_string_equal(info_of(h).backend, "acl");
        npf_slot_view_t v = slot_of(f, 0);
        assert_int_equal(v.st.generation, g);
        assert_int_equal(v.st.backend, NPF_BACKEND_ACL);
        window_dir(f, dir, sizeof(dir), "rank0_start3_stop4");
        drop_json(check_manifest(dir, 0, "complete", 3, 4, 4, "acl"));
}

/* The runtime refuses to start: failed at the start step, the ACL error in the slot. */
static void test_acl_failed_at_start(void **state)
{
        fixture_t *f = *state;
        char dir[512];

        use_acl_stub(f, "aclprofStart:500000");
        npf_rank_t *h = open_rank(f, 0, 0, "acl");
        publish(f, "{\"start_step\": 3, \"steps\": 2}");
        steps(h, 1, 2);
        assert_true(npf_rank_step(h, 3) < 0);
        assert_state(h, NPF_WINDOW_FAILED, 3);
        assert_non_null(strstr(info_of(h).message, "aclprofStart failed: 500000"));
        assert_non_null(strstr(slot_of(f, 0).st.message, "aclprofStart failed: 500000"));
        window_dir(f, dir, sizeof(dir), "rank0_start3_stop4");
        json_t *m = check_manifest(dir, 0, "incomplete", 3, 4, 3, "acl");
        assert_non_null(strstr(json_string_value(json_object_get(m, "message")), "aclprofStart failed"));
        drop_json(m);
        steps(h, 4, 10);
        assert_state(h, NPF_WINDOW_FAILED, 3);
}

/* A sampler the device lacks costs its data, not the window: the manifest says what CANN refused. */
static void test_acl_refused_sampler_in_manifest(void **state)
{
        fixture_t *f = *state;
        char dir[512];

        use_acl_stub(f, NULL);
        assert_int_equal(setenv("NPF_ACL_STUB_SOC", "Ascend310P", 1), 0);
        assert_int_equal(setenv("NPF_ACL_STUB_SET_DEVICE", "0", 1), 0);
        npf_rank_t *h = open_rank(f, 0, 0, "acl");
        publish(f, "{\"start_step\": 3, \"steps\": 2, \"sys_io\": true}");
        steps(h, 1, 5);
        assert_state(h, NPF_WINDOW_DONE, 5);
        window_dir(f, dir, sizeof(dir), "rank0_start3_stop4");
        json_t *m = check_manifest(dir, 0, "complete", 3, 4, 4, "acl");
        json_t *runtime = json_object_get(m, "runtime");
        json_t *refused = json_array_get(json_object_get(runtime, "refused"), 0);
        assert_string_equal(json_string_value(json_object_get(refused, "setting")), "sys_io");
        assert_int_equal(json_integer_value(json_object_get(refused, "code")), 100010);
        assert_string_equal(json_string_value(json_object_get(refused, "name")), "ACL_ERROR_INVALID_PROFILING_CONFIG");
        assert_string_equal(json_string_value(json_object_get(runtime, "data_types")), "0x801");
        assert_int_equal(json_integer_value(json_object_get(runtime, "device")), 0);
        drop_json(m);
}

/* A framework's error fails the open window: closed, incomplete, its message everywhere. */
static void test_fail_open_window(void **state)
{
        fixture_t *f = *state;
        char dir[512];

        npf_rank_t *h = open_rank(f, 0, 0, "host");
        publish(f, "{\"start_step\": 3, \"steps\": 4}");
        steps(h, 1, 4);
        assert_state(h, NPF_WINDOW_COLLECTING, 3);
        assert_int_equal(npf_rank_fail(h, "torch: RuntimeError: the profiler broke"), 0);
        assert_state(h, NPF_WINDOW_FAILED, 4);
        assert_string_equal(info_of(h).message, "torch: RuntimeError: the profiler broke");
        assert_string_equal(slot_of(f, 0).st.message, "torch: RuntimeError: the profiler broke");
        window_dir(f, dir, sizeof(dir), "rank0_start3_stop6");
        json_t *m = check_manifest(dir, 0, "incomplete", 3, 6, 4, "host");
        assert_string_equal(json_string_value(json_object_get(m, "message")), "torch: RuntimeError: the profiler broke");
        drop_json(m);
        /* The generation opens nothing more; a second failure has nothing to fail. */
        steps(h, 5, 9);
        assert_state(h, NPF_WINDOW_FAILED, 4);
        assert_int_equal(npf_rank_fail(h, "again"), -ENOENT);
}

/* An armed window fails before it opens: no directory, and it never opens. */
static void test_fail_armed_window(void **state)
{
        fixture_t *f = *state;
        char dir[512];

        npf_rank_t *h = open_rank(f, 0, 0, "host");
        assert_int_equal(npf_rank_fail(h, "nothing yet"), -ENOENT);
        publish(f, "{\"start_step\": 5, \"steps\": 2}");
        steps(h, 1, 2);
        assert_state(h, NPF_WINDOW_ARMED, 1);
        assert_int_equal(npf_rank_fail(h, "torch_npu: cannot build the profiler"), 0);
        assert_state(h, NPF_WINDOW_FAILED, 1);
        steps(h, 3, 8);
        assert_state(h, NPF_WINDOW_FAILED, 1);
        window_dir(f, dir, sizeof(dir), "rank0_start5_stop6");
        assert_false(exists(dir));
        assert_int_equal(npf_rank_fail(NULL, "x"), -EINVAL);
}

/* The runtime refuses to stop: failed at the closing step, the manifest incomplete. */
static void test_acl_failed_at_close(void **state)
{
        fixture_t *f = *state;
        char dir[512];

        use_acl_stub(f, "aclprofStop:500000");
        npf_rank_t *h = open_rank(f, 0, 0, "acl");
        publish(f, "{\"start_step\": 3, \"steps\": 2}");
        steps(h, 1, 4);
        assert_state(h, NPF_WINDOW_COLLECTING, 3);
        assert_true(npf_rank_step(h, 5) < 0);
        assert_state(h, NPF_WINDOW_FAILED, 5);
        assert_non_null(strstr(info_of(h).message, "aclprofStop failed"));
        assert_non_null(strstr(slot_of(f, 0).st.message, "aclprofStop failed"));
        window_dir(f, dir, sizeof(dir), "rank0_start3_stop4");
        json_t *m = check_manifest(dir, 0, "incomplete", 3, 4, 4, "acl");
        assert_non_null(strstr(json_string_value(json_object_get(m, "message")), "aclprofStop failed"));
        drop_json(m);
}

/* --- generations ---------------------------------------------------------------- */

static void test_one_window_per_generation(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        /* "next" would open again at any later step if the rank re-read the generation. */
        uint64_t g = publish(f, "{\"start_step\": \"next\", \"steps\": 2}");
        steps(h, 1, 1);
        assert_state(h, NPF_WINDOW_ARMED, 1);
        steps(h, 2, 4);
        assert_state(h, NPF_WINDOW_DONE, 4);
        steps(h, 5, 200);
        assert_state(h, NPF_WINDOW_DONE, 4);
        assert_int_equal(info_of(h).generation, g);
        assert_slot(f, 0, g, NPF_WINDOW_DONE, 4);
        assert_int_equal(count_windows(f), 1);
        check_done_window(f, 0, 2, 3);

        /* An absolute window that is over does not reopen either. */
        g = publish(f, "{\"start_step\": 210, \"steps\": 1}");
        steps(h, 201, 300);
        assert_state(h, NPF_WINDOW_DONE, 211);
        assert_int_equal(count_windows(f), 2);
        check_done_window(f, 0, 210, 210);
        assert_slot(f, 0, g, NPF_WINDOW_DONE, 211);
}

static void test_new_generation_waits_for_close(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        uint64_t g1 = publish(f, "{\"start_step\": 5, \"steps\": 5}");
        steps(h, 1, 6);
        assert_state(h, NPF_WINDOW_COLLECTING, 5);

        uint64_t g2 = publish(f, "{\"start_step\": 20, \"steps\": 2}");
        assert_true(g2 > g1);
        steps(h, 7, 9);
        /* Still the first window, of the first generation, in the rank and in its slot. */
        assert_state(h, NPF_WINDOW_COLLECTING, 5);
        npf_rank_info_t i = info_of(h);
        assert_int_equal(i.generation, g1);
        assert_int_equal(i.window_start, 5);
        assert_int_equal(i.window_stop, 9);
        npf_slot_view_t v = slot_of(f, 0);
        assert_int_equal(v.st.generation, g1);
        assert_int_equal(v.st.state, NPF_WINDOW_COLLECTING);

        /* The window closes at step 10 and the new configuration is read at that step. */
        steps(h, 10, 10);
        check_done_window(f, 0, 5, 9);
        assert_state(h, NPF_WINDOW_ARMED, 10);
        i = info_of(h);
        assert_int_equal(i.generation, g2);
        assert_int_equal(i.window_start, 20);
        assert_int_equal(i.window_stop, 21);
        assert_slot(f, 0, g2, NPF_WINDOW_ARMED, 10);

        steps(h, 11, 22);
        assert_state(h, NPF_WINDOW_DONE, 22);
        check_done_window(f, 0, 20, 21);
        assert_int_equal(count_windows(f), 2);
}

/* An armed window is not open yet: a new generation replaces it at once. */
static void test_new_generation_replaces_armed(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        publish(f, "{\"start_step\": 20, \"steps\": 2}");
        steps(h, 1, 4);
        assert_state(h, NPF_WINDOW_ARMED, 1);
        uint64_t g2 = publish(f, "{\"start_step\": 8, \"steps\": 1}");
        steps(h, 5, 5);
        assert_state(h, NPF_WINDOW_ARMED, 5);
        assert_int_equal(info_of(h).window_start, 8);
        assert_slot(f, 0, g2, NPF_WINDOW_ARMED, 5);
        steps(h, 6, 25);
        assert_state(h, NPF_WINDOW_DONE, 9);
        check_done_window(f, 0, 8, 8);
        assert_int_equal(count_windows(f), 1);
}

/*
 * A rank whose step numbers jump over the whole window (a resumed checkpoint, a loop that
 * calls npf_rank_step() every few iterations) never ran any of its steps: it missed it, and
 * no directory named for steps 10..12 may hold step 20.
 */
static void test_step_jumping_past_window_missed(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");
        char dir[512];

        publish(f, "{\"start_step\": 10, \"steps\": 3}");
        steps(h, 1, 1);
        assert_state(h, NPF_WINDOW_ARMED, 1);
        npf_rank_step(h, 20);
        steps(h, 21, 25);
        window_dir(f, dir, sizeof(dir), "rank0_start10_stop12");
        if (exists(dir))
                fail_msg("%s was written although the rank jumped from step 1 to step 20", dir);
        assert_state(h, NPF_WINDOW_MISSED, 20);
        assert_non_null(strstr(info_of(h).message, "20"));
}

/* A configuration that arrives during a window and names a step the window outlasts. */
static void test_new_generation_missed_after_close(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        publish(f, "{\"start_step\": 5, \"steps\": 5}");
        steps(h, 1, 6);
        uint64_t g2 = publish(f, "{\"start_step\": 8, \"steps\": 2}");
        steps(h, 7, 10);
        check_done_window(f, 0, 5, 9);
        assert_state(h, NPF_WINDOW_MISSED, 10);
        assert_slot(f, 0, g2, NPF_WINDOW_MISSED, 10);
        assert_non_null(strstr(info_of(h).message, "step 10"));
}

/* Warmup steps are part of the window: collected, named in the directory and the trace. */
static void test_warmup_in_window(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        publish(f, "{\"start_step\": 10, \"warmup\": 1, \"steps\": 2}");
        steps(h, 1, 9);
        assert_int_equal(info_of(h).window_stop, 12);
        steps(h, 10, 13);
        assert_state(h, NPF_WINDOW_DONE, 13);
        check_done_window(f, 0, 10, 12);
}

/* torch_npu's own file: start_step 0 means off, -1 the step after the rank reads it. */
static void test_torch_npu_start_step(void **state)
{
        fixture_t *f = *state;
        static const char *const off =
                "{\"activities\": [\"CPU\", \"NPU\"], \"prof_dir\": \"./prof\", \"analyse\": false,"
                " \"record_shapes\": false, \"profile_memory\": false, \"with_stack\": false,"
                " \"with_flops\": false, \"with_modules\": false, \"active\": 1, \"warmup\": 0,"
                " \"start_step\": 0, \"is_rank\": false, \"rank_list\": []}";
        static const char *const next =
                "{\"activities\": [\"CPU\", \"NPU\"], \"prof_dir\": \"./prof\", \"analyse\": false,"
                " \"record_shapes\": false, \"profile_memory\": false, \"with_stack\": false,"
                " \"with_flops\": false, \"with_modules\": false, \"active\": 2, \"warmup\": 0,"
                " \"start_step\": -1, \"is_rank\": false, \"rank_list\": []}";
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        publish(f, off);
        steps(h, 1, 10);
        assert_state(h, NPF_WINDOW_IDLE, 1);
        assert_int_equal(count_windows(f), 0);

        /* -1: torch_npu starts in the very step() that reads the file (dynamic_profile.py:110-124). */
        publish(f, next);
        steps(h, 11, 11);
        assert_state(h, NPF_WINDOW_COLLECTING, 11);
        steps(h, 12, 13);
        assert_state(h, NPF_WINDOW_DONE, 13);
        check_done_window(f, 0, 11, 12);
}

/* --- start_at_multiple_of and duration_ms --------------------------------------------- */

static void test_start_at_multiple_of(void **state)
{
        fixture_t *f = *state;
        /* The step at which each rank reads the configuration, and where its window opens. */
        static const struct { int64_t read, start; } r[] = {
                { 3, 10 }, { 5, 10 }, { 9, 10 }, { 10, 20 }, { 12, 20 },
        };
        const int n = (int) (sizeof(r) / sizeof(r[0]));

        for (int k = 0; k < n; k++) {
                open_rank(f, k, k, "host");
                steps(f->h[k], 1, r[k].read - 1);
        }
        publish(f, "{\"start_step\": \"next\", \"steps\": 2, \"start_at_multiple_of\": 10}");
        for (int k = 0; k < n; k++) {
                steps(f->h[k], r[k].read, r[k].read);
                assert_state(f->h[k], NPF_WINDOW_ARMED, r[k].read);
                npf_rank_info_t i = info_of(f->h[k]);
                assert_int_equal(i.window_start, r[k].start);
                assert_int_equal(i.window_stop, r[k].start + 1);
                assert_slot(f, (uint32_t) k, i.generation, NPF_WINDOW_ARMED, r[k].read);
                assert_int_equal(slot_of(f, (uint32_t) k).st.window_start, r[k].start);
        }
        for (int k = 0; k < n; k++) {
                steps(f->h[k], r[k].read + 1, r[k].start - 1);
                assert_state(f->h[k], NPF_WINDOW_ARMED, r[k].read);
                steps(f->h[k], r[k].start, r[k].start);
                assert_state(f->h[k], NPF_WINDOW_COLLECTING, r[k].start);
                steps(f->h[k], r[k].start + 1, 30);
                assert_state(f->h[k], NPF_WINDOW_DONE, r[k].start + 2);
                check_done_window(f, k, r[k].start, r[k].start + 1);
        }
        assert_int_equal(count_windows(f), n);
}

/* An absolute start that is already a multiple does not move; one that is not does. */
static void test_start_at_multiple_of_absolute(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");

        publish(f, "{\"start_step\": 13, \"steps\": 2, \"start_at_multiple_of\": 10}");
        steps(h, 1, 1);
        npf_rank_info_t i = info_of(h);
        assert_int_equal(i.window_start, 20);
        assert_int_equal(i.window_stop, 21);
        steps(h, 2, 25);
        assert_state(h, NPF_WINDOW_DONE, 22);
        check_done_window(f, 0, 20, 21);
}

static void test_duration_ms(void **state)
{
        fixture_t *f = *state;
        const uint64_t duration_ns = 40 * 1000000u;
        npf_rank_t *h = open_rank(f, 0, 0, "host");
        char dir[512];

        publish(f, "{\"start_step\": 3, \"duration_ms\": 40}");
        steps(h, 1, 2);
        assert_state(h, NPF_WINDOW_ARMED, 1);
        npf_rank_info_t i = info_of(h);
        assert_int_equal(i.window_start, 3);
        assert_int_equal(i.window_stop, NPF_STEP_NONE);

        uint64_t before_open = now_ns();
        steps(h, 3, 3);
        uint64_t after_open = now_ns();
        assert_state(h, NPF_WINDOW_COLLECTING, 3);
        window_dir(f, dir, sizeof(dir), "rank0_start3_for40ms");
        assert_string_equal(info_of(h).output, dir);
        assert_string_equal(slot_of(f, 0).st.output, "rank0_start3_for40ms");
        assert_int_equal(slot_of(f, 0).st.window_stop, NPF_STEP_NONE);

        /*
         * The window closes at the first step at which the duration has elapsed. Only
         * inequalities that the clock cannot break are asserted: a rank still collecting
         * after a step cannot have seen the duration elapse, so the step began less than the
         * duration after the window opened; a rank that closed at a step saw it elapse, so
         * the step ended at least the duration after the window began to open.
         */
        int64_t s = 4;
        for (;; s++) {
                if (s > 5000)
                        fail_msg("the timed window did not close within 5000 steps");
                usleep(2000);
                uint64_t t0 = now_ns();
                assert_int_equal(npf_rank_step(h, s), 0);
                uint64_t t1 = now_ns();
                i = info_of(h);
                if (i.state == NPF_WINDOW_COLLECTING) {
                        assert_true(t0 - after_open < duration_ns);
                        continue;
                }
                assert_int_equal(i.state, NPF_WINDOW_DONE);
                assert_true(t1 - before_open >= duration_ns);
                break;
        }
        assert_state(h, NPF_WINDOW_DONE, s);
        drop_json(check_manifest(dir, 0, "complete", 3, NPF_STEP_NONE, s - 1, "host"));
        check_trace(dir, 3, s - 1);
        steps(h, s + 1, s + 50);
        assert_state(h, NPF_WINDOW_DONE, s);
        assert_int_equal(count_windows(f), 1);
}

/* --- close, detach, claims ---------------------------------------------------------- */

static void test_close_during_window_incomplete(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 4, "host");
        char dir[512];

        publish(f, "{\"start_step\": 2, \"steps\": 10}");
        steps(h, 1, 5);
        assert_state(h, NPF_WINDOW_COLLECTING, 2);
        uint32_t index = slot_index(f, 4);
        npf_rank_close(h);
        f->h[0] = NULL;

        window_dir(f, dir, sizeof(dir), "rank4_start2_stop11");
        json_t *m = check_manifest(dir, 4, "incomplete", 2, 11, 5, "host");
        assert_non_null(strstr(json_string_value(json_object_get(m, "message")), "cut short"));
        drop_json(m);
        check_trace(dir, 2, 5);

        /* The released slot still tells the daemon where the window went and why it is short. */
        npf_slot_view_t v = slot_at(f, index);
        assert_int_equal(v.pid, 0);
        assert_string_equal(v.st.output, "rank4_start2_stop11");
        assert_non_null(strstr(v.st.message, "cut short"));
        assert_true(v.st.state != NPF_WINDOW_COLLECTING && v.st.state != NPF_WINDOW_FLUSHING);
}

/*
 * A training loop that ends right after the window's stop step closes the rank before it
 * could step past it: every step of the window ran, so the window is complete.
 */
static void test_close_after_stop_step_complete(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");
        char dir[512];

        publish(f, "{\"start_step\": 2, \"steps\": 3}");
        steps(h, 1, 4);         /* the loop's last step is the window's last step */
        assert_state(h, NPF_WINDOW_COLLECTING, 2);
        npf_rank_close(h);
        f->h[0] = NULL;
        window_dir(f, dir, sizeof(dir), "rank0_start2_stop4");
        check_trace(dir, 2, 4);
        drop_json(check_manifest(dir, 0, "complete", 2, 4, 4, "host"));
}

typedef struct {
        npf_shm_slot_t *slot;
        pid_t joiner;           /* the thread that calls ask_stacks() */
        atomic_bool joining;    /* set by it just before pthread_join() */
        uint32_t asked;
        int error;              /* the answer's */
        const char *failed;     /* or why none came */
} asker_t;

/*
 * Return: whether thread @tid of this process waits in futex(2) on a word of the calling
 * thread's descriptor, as pthread_join() of the calling thread does (glibc waits on the
 * joined thread's tid word): not on a lock taken on the way there. The number and first
 * argument from /proc/PID/task/TID/syscall (proc(5)).
 */
static bool in_join_of_self(pid_t tid)
{
        char path[64], line[128] = "";
        unsigned long long uaddr = 0;
        long nr = -1;

        snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int) tid);
        FILE *in = fopen(path, "re");
        if (!in)
                return false;
        bool read = fgets(line, sizeof(line), in) && sscanf(line, "%ld %llx", &nr, &uaddr) == 2;
        fclose(in);
        return read && nr == SYS_futex && uaddr - (uintptr_t) pthread_self() < 4096u;
}

static void *ask_when_joined(void *arg)
{
        asker_t *a = arg;
        uint64_t t0 = now_ns();

        while (!atomic_load(&a->joining) || !in_join_of_self(a->joiner)) {
                if (now_ns() - t0 > 10000000000u) {
                        a->failed = "the asking thread did not wait in pthread_join() within 10 s";
                        return NULL;
                }
                usleep(100);
        }
        if (npf_slot_ask_stacks(a->slot, &a->asked) != 0) {
                a->failed = "npf_slot_ask_stacks() refused";
                return NULL;
        }
        while (!npf_slot_stacks_answered(a->slot, a->asked, &a->error)) {
                if (now_ns() - t0 > 10000000000u) {
                        a->failed = "no answer within 10 s";
                        return NULL;
                }
                usleep(1000);
        }
        return NULL;
}

/*
 * Ask rank @rank for its stacks as the daemon does, and wait for the answer. The request is
 * made by a thread of its own once this one waits in pthread_join(), so that this thread
 * takes the signal inside a blocking call: TSan defers a signal that lands in a thread's own
 * code and hands the handler, later, the registers of where it landed, no longer its stack
 * (compiler-rt, tsan_interceptors_posix.cpp, rtl_generic_sighandler()).
 * Return: the answer's error.
 */
static int ask_stacks(fixture_t *f, uint32_t rank, uint32_t *ret_asked)
{
        asker_t a = { .slot = &npf_shm_ranks(f->writer)->slots[slot_index(f, rank)], .joiner = gettid() };
        pthread_t t;

        assert_int_equal(pthread_create(&t, NULL, ask_when_joined, &a), 0);
        atomic_store(&a.joining, true);
        assert_int_equal(pthread_join(t, NULL), 0);
        if (a.failed)
                fail_msg("rank %u, request %u: %s", rank, a.asked, a.failed);
        *ret_asked = a.asked;
        return a.error;
}

/* Return: how many threads of this process are named @name. */
static int threads_named(const char *name)
{
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        int n = 0;

        assert_non_null(d);
        while ((e = readdir(d))) {
                char path[300], comm[32] = "";
                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
                FILE *c = fopen(path, "re");
                if (c && fgets(comm, sizeof(comm), c) && strncmp(comm, name, strlen(name)) == 0 &&
                    comm[strlen(name)] == '\n')
                        n++;
                if (c)
                        fclose(c);
        }
        closedir(d);
        return n;
}

/*
 * The stacks file of request @asked: its whole text, which names this thread, caught in
 * ask_stacks()'s pthread_join(), and the writer, and ends as a whole one does.
 */
static void check_stacks_file(fixture_t *f, int64_t rank, uint32_t asked)
{
        char path[512], head[64];
        struct stat st;

        snprintf(path, sizeof(path), "%s/stacks/rank%" PRId64 "_pid%d_%u.txt", f->prof_dir, rank, (int) getpid(),
                 asked);
        if (stat(path, &st) != 0)
                fail_msg("no %s", path);
        FILE *in = fopen(path, "re");
        assert_non_null(in);
        char *text = calloc(1, (size_t) st.st_size + 1);
        assert_non_null(text);
        assert_int_equal(fread(text, 1, (size_t) st.st_size, in), (size_t) st.st_size);
        fclose(in);
        snprintf(head, sizeof(head), "\nthread %d \"", (int) getpid());
        char *mine = strstr(text, head), *next = mine ? strstr(mine + 1, "\nthread ") : NULL;
        if (next)
                *next = '\0';          /* this thread's section alone */
        bool caught = mine && strstr(mine, " ask_stacks+0x") && strstr(mine, "pthread_join");
        if (next)
                *next = '\n';
        if (!caught || !strstr(text, "(npuprof-stacks), which writes this") ||
            !strstr(text, "\nend of the stacks of process"))
                fail_msg("%s does not name this thread in ask_stacks()'s pthread_join(), and the writer, or is cut short:\n%s",
                         path, text);
        free(text);
}

/* Return: the entries of f->prof_dir/stacks, names joined by spaces, into @buf. */
static const char *stacks_entries(fixture_t *f, char *buf, size_t size)
{
        char dir[256];
        DIR *d;
        struct dirent *e;

        snprintf(dir, sizeof(dir), "%s/stacks", f->prof_dir);
        buf[0] = '\0';
        d = opendir(dir);
        assert_non_null(d);
        while ((e = readdir(d))) {
                size_t used = strlen(buf);
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
                    snprintf(buf + used, size - used, "%s%s", used ? " " : "", e->d_name) >= (int) (size - used))
                        fail_msg("too many entries in %s: %s", dir, buf);
        }
        closedir(d);
        return buf;
}

static void test_detached_start(void **state)
{
        fixture_t *f = *state;
        npf_rank_options_t o = { .shm_name = f->name, .rank = 7, .local_device = -1, .backend = "host" };
        char err[NPF_SHM_ERR_MAX] = "";
        int64_t s;

        /* No daemon: opening succeeds, detached, and steps cost the loop nothing but 0. */
        assert_int_equal(npf_rank_open(&o, &f->h[0], err), 0);
        npf_rank_t *h = f->h[0];
        assert_false(info_of(h).attached);
        for (s = 1; s <= 1000; s++)
                assert_int_equal(s % 2 ? npf_rank_step(h, s) : npf_rank_step_call(h, s), 0);
        assert_false(info_of(h).attached);
        assert_state(h, NPF_WINDOW_IDLE, NPF_STEP_NONE);

        /* The daemon starts and publishes a window that starts at the next step. */
        create_segment(f);
        uint64_t g = publish(f, "{\"start_step\": \"next\", \"steps\": 3}");
        uint64_t t0 = now_ns();
        while (!info_of(h).attached) {
                if (now_ns() - t0 > 3000000000u)
                        fail_msg("the rank did not attach within 3 s of the segment appearing (step %" PRId64 ")", s);
                usleep(500);
                assert_int_equal(npf_rank_step(h, ++s), 0);
        }
        int64_t attached_at = s;

        /* Attached: it claimed its slot and follows the configuration from there. */
        npf_slot_view_t v = slot_of(f, 7);
        assert_int_equal(v.step, attached_at);
        assert_state(h, NPF_WINDOW_ARMED, attached_at);
        assert_int_equal(info_of(h).generation, g);
        assert_int_equal(info_of(h).window_start, attached_at + 1);
        steps(h, attached_at + 1, attached_at + 4);
        assert_state(h, NPF_WINDOW_DONE, attached_at + 4);
        assert_slot(f, 7, g, NPF_WINDOW_DONE, attached_at + 4);
        check_done_window(f, 7, attached_at + 1, attached_at + 3);

        /* Its watcher, which waited for the attach, answers requests for its stacks. */
        uint32_t asked;
        assert_int_equal(ask_stacks(f, 7, &asked), 0);
        check_stacks_file(f, 7, asked);
}

/* A segment that exists but was never given a configuration: attached and idle. */
static void test_detached_close_leaves_no_segment(void **state)
{
        fixture_t *f = *state;
        npf_rank_options_t o = { .shm_name = f->name, .rank = 0, .local_device = -1, .backend = "host" };
        char err[NPF_SHM_ERR_MAX] = "";

        assert_int_equal(npf_rank_open(&o, &f->h[0], err), 0);
        assert_int_equal(npf_rank_step(f->h[0], 1), 0);
        /* npf_rank_close() of a detached handle touches no segment. */
        npf_rank_close(f->h[0]);
        f->h[0] = NULL;
        assert_int_equal(npf_shm_open(f->name, 0, &f->writer, err), -ENOENT);
        f->writer = NULL;
}

static void test_open_rejects_bad_options(void **state)
{
        fixture_t *f = *state;
        npf_rank_options_t o = { .shm_name = f->name, .rank = NPF_SHM_MAX_RANKS, .local_device = -1 };
        char err[NPF_SHM_ERR_MAX] = "";
        npf_rank_t *h = NULL;

        assert_int_equal(npf_rank_open(&o, &h, err), -EINVAL);
        assert_non_null(strstr(err, "65536"));
        o.rank = 0;
        o.backend = "gpu";
        assert_int_equal(npf_rank_open(&o, &h, err), -EINVAL);
        assert_non_null(strstr(err, "gpu"));
        o.backend = NULL;
        o.shm_name = "bad/name";
        assert_int_equal(npf_rank_open(&o, &h, err), -EINVAL);
        assert_null(h);
}

/* A child of fork() frees its inherited handle without touching the parent's slot. */
static void test_close_after_fork(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");
        int status;

        uint64_t g = publish(f, "{\"start_step\": 5, \"steps\": 2}");
        steps(h, 1, 2);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                npf_rank_options_t o = { .shm_name = f->name, .rank = 1, .local_device = -1, .backend = "host" };
                char err[NPF_SHM_ERR_MAX];
                npf_rank_t *own;

                npf_rank_close_after_fork(h);
#if defined(__SANITIZE_THREAD__)
                /*
                 * A handle of its own starts its stacks watcher, a thread, in a child of a process
                 * with threads (the parent's watcher). ThreadSanitizer cannot: its registry keeps the
                 * parent's threads, and the child's thread, on the stack glibc reclaimed from the
                 * parent's watcher, has that thread's id ("dup thread with used id"), or dies first
                 * (die_after_fork). glibc can; the other builds test it.
                 */
                (void) o;
                (void) err;
                (void) own;
                _exit(0);
#else
                if (npf_rank_open(&o, &own, err) != 0)
                        _exit(2);
                npf_rank_close(own);
                _exit(0);
#endif
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);

        /* The parent's slot is untouched and its window runs. */
        assert_slot(f, 0, g, NPF_WINDOW_ARMED, 1);
        steps(h, 3, 7);
        assert_state(h, NPF_WINDOW_DONE, 7);
        check_done_window(f, 0, 5, 6);
}

/* A child that steps and closes its parent's handle mid-window leaves the window alone. */
static void test_child_never_touches_parent_window(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");
        int status;

        publish(f, "{\"start_step\": 3, \"steps\": 3}");
        steps(h, 1, 4);
        assert_state(h, NPF_WINDOW_COLLECTING, 3);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                /* What careless code does: step on and close the inherited handle. */
                npf_rank_step_call(h, 5);
                npf_rank_step_call(h, 9);
                npf_rank_close(h);
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_state(h, NPF_WINDOW_COLLECTING, 3);
        steps(h, 5, 7);
        assert_state(h, NPF_WINDOW_DONE, 6);
        check_done_window(f, 0, 3, 5);
}

static void test_same_rank_twice_busy(void **state)
{
        fixture_t *f = *state;
        npf_rank_options_t o = { .shm_name = f->name, .rank = 5, .local_device = -1, .backend = "host" };
        char err[NPF_SHM_ERR_MAX] = "";
        npf_rank_t *second = NULL;

        npf_rank_t *h = open_rank(f, 0, 5, "host");
        assert_int_equal(npf_rank_open(&o, &second, err), -EBUSY);
        assert_null(second);
        assert_non_null(strstr(err, "rank 5"));
        char pid[32];
        snprintf(pid, sizeof(pid), "%d", (int) getpid());
        assert_non_null(strstr(err, pid));

        /* The first handle still owns the slot and works. */
        publish(f, "{\"start_step\": 2, \"steps\": 1}");
        steps(h, 1, 3);
        assert_state(h, NPF_WINDOW_DONE, 3);
        assert_int_equal(slot_of(f, 5).st.state, NPF_WINDOW_DONE);

        /* Once it is closed, the rank id is free again. */
        npf_rank_close(h);
        f->h[0] = NULL;
        assert_int_equal(npf_rank_open(&o, &f->h[1], err), 0);
        assert_int_equal(slot_of(f, 5).pid, (uint32_t) getpid());
}

static void test_64_ranks_same_step(void **state)
{
        fixture_t *f = *state;
        const int n = 64;
        uint64_t g = 0;

        for (int r = 0; r < n; r++)
                open_rank(f, r, r, "host");
        /* All in lockstep; the daemon publishes while the ranks are at step 5. */
        for (int64_t s = 1; s <= 25; s++) {
                if (s == 5)
                        g = publish(f, "{\"start_step\": \"next\", \"steps\": 3, \"start_at_multiple_of\": 20}");
                for (int r = 0; r < n; r++)
                        assert_int_equal(npf_rank_step(f->h[r], s), 0);
                for (int r = 0; r < n; r++) {
                        npf_slot_view_t v = slot_of(f, (uint32_t) r);
                        uint32_t want = s < 5 ? NPF_WINDOW_IDLE
                                        : s < 20 ? NPF_WINDOW_ARMED
                                        : s <= 22 ? NPF_WINDOW_COLLECTING : NPF_WINDOW_DONE;
                        if (v.st.state != want)
                                fail_msg("rank %d at step %" PRId64 ": %s, expected %s", r, s,
                                         npf_shm_window_state_name(v.st.state), npf_shm_window_state_name(want));
                        if (s >= 5) {
                                assert_int_equal(v.st.generation, g);
                                assert_int_equal(v.st.window_start, 20);
                                assert_int_equal(v.st.window_stop, 22);
                        }
                        if (s >= 20 && s <= 22)
                                assert_int_equal(v.st.state_step, 20);
                }
        }
        for (int r = 0; r < n; r++) {
                assert_state(f->h[r], NPF_WINDOW_DONE, 23);
                check_done_window(f, r, 20, 22);
        }
        assert_int_equal(count_windows(f), n);
}

/* --- the fast path ------------------------------------------------------------------ */

static void test_fast_path_when_nothing_changes(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 0, "host");
        const npf_rank_fast_t *fast = (const npf_rank_fast_t *) h;

        steps(h, 1, 1);
        assert_int_equal(fast->busy, 0);
        uint64_t g = publish(f, "{\"start_step\": 3, \"steps\": 2}");
        steps(h, 2, 2);
        assert_int_equal(fast->busy, 1);        /* armed: the slow path watches the step */
        steps(h, 3, 3);
        assert_int_equal(fast->busy, 1);        /* collecting */
        steps(h, 4, 5);
        assert_state(h, NPF_WINDOW_DONE, 5);
        assert_int_equal(fast->busy, 0);
        assert_int_equal(fast->generation, g);
        assert_false(npf_shm_changed(fast->ctl, fast->generation));

        for (int64_t s = 6; s <= 10000; s++)
                assert_int_equal(npf_rank_step(h, s), 0);
        assert_int_equal(slot_of(f, 0).step, 10000);
        uint64_t heartbeat = slot_of(f, 0).heartbeat_ns;
        assert_int_equal(npf_rank_step_call(h, 10000), 0);
        assert_int_equal(slot_of(f, 0).heartbeat_ns, heartbeat);   /* no clock read either */
        assert_state(h, NPF_WINDOW_DONE, 5);
        assert_int_equal(fast->busy, 0);
        assert_int_equal(count_windows(f), 1);

        /* A new generation takes the slow path at once. */
        uint64_t g2 = publish(f, "{\"start_step\": \"next\", \"steps\": 1}");
        assert_true(npf_shm_changed(fast->ctl, fast->generation));
        assert_int_equal(npf_rank_step(h, 10001), 0);
        assert_int_equal(fast->generation, g2);
        assert_state(h, NPF_WINDOW_ARMED, 10001);
        assert_int_equal(fast->busy, 1);
        assert_int_equal(npf_rank_step(h, 10002), 0);
        assert_int_equal(npf_rank_step(h, 10003), 0);
        assert_state(h, NPF_WINDOW_DONE, 10003);
        assert_int_equal(fast->busy, 0);
        check_done_window(f, 0, 10002, 10002);
}

/* --- stacks asked for through the slot ------------------------------------------------------- */

/*
 * A rank that does not step answers a request for its stacks from its watcher thread: the
 * file under prof_dir/stacks, named by rank, pid and request, whole, nothing else beside
 * it; each request its own file; closing joins the watcher at once.
 */
static void test_stacks_on_request(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 3, "host");
        uint32_t asked, again;
        char names[256], want[256];

        publish(f, "{\"start_step\": 100000, \"steps\": 2}");
        steps(h, 1, 5);
        assert_int_equal(threads_named("npuprof-stacks"), 1);
        /* Nothing more is asked of the training thread: it stays where it is, as a hung rank does. */
        assert_int_equal(ask_stacks(f, 3, &asked), 0);
        check_stacks_file(f, 3, asked);
        /* Asked again at once: answered, but no sooner than a second after the first. */
        uint64_t t1 = now_ns();
        assert_int_equal(ask_stacks(f, 3, &again), 0);
        assert_true(now_ns() - t1 > 800000000u);
        assert_int_equal(again, asked + 1);
        check_stacks_file(f, 3, again);
        snprintf(want, sizeof(want), "rank3_pid%d_%u.txt rank3_pid%d_%u.txt", (int) getpid(), asked, (int) getpid(),
                 again);
        stacks_entries(f, names, sizeof(names));
        if (strcmp(names, want) != 0) {
                /* readdir's order is the file system's: the other way round will do. */
                snprintf(want, sizeof(want), "rank3_pid%d_%u.txt rank3_pid%d_%u.txt", (int) getpid(), again,
                         (int) getpid(), asked);
                assert_string_equal(names, want);
        }
        /* The stacks did not disturb the loop. */
        steps(h, 6, 8);
        assert_state(h, NPF_WINDOW_ARMED, 1);

        /* The watcher waits on the futex for up to a second; closing wakes it and joins it at once. */
        uint64_t t0 = now_ns();
        npf_rank_close(h);
        f->h[0] = NULL;
        assert_true(now_ns() - t0 < 500000000u);
        assert_int_equal(threads_named("npuprof-stacks"), 0);
}

/* With no output directory published, the request is answered with ENOENT, and nothing is written. */
static void test_stacks_without_configuration(void **state)
{
        fixture_t *f = *state;
        uint32_t asked;

        open_rank(f, 0, 4, "host");
        assert_int_equal(ask_stacks(f, 4, &asked), ENOENT);
        assert_false(exists(f->prof_dir));
}

/* A claim starts with no request outstanding, whatever an earlier holder of its slot left. */
static void test_stacks_new_claim_starts_answered(void **state)
{
        fixture_t *f = *state;
        npf_rank_t *h = open_rank(f, 0, 5, "host");
        uint32_t index = slot_index(f, 5), asked, later;
        npf_shm_slot_t *slot = &npf_shm_ranks(f->writer)->slots[index];

        publish(f, "{\"start_step\": 100000, \"steps\": 2}");
        assert_int_equal(ask_stacks(f, 5, &asked), 0);
        npf_rank_close(h);
        f->h[0] = NULL;
        /* Asked of a slot nobody answers any more: unanswered. */
        assert_int_equal(npf_slot_ask_stacks(slot, &later), 0);
        assert_false(npf_slot_stacks_answered(slot, later, NULL));
        h = open_rank(f, 0, 5, "host");
        assert_int_equal(slot_index(f, 5), index);
        assert_int_equal(npf_slot_stacks_asked(slot), npf_slot_stacks_done(slot));
        assert_false(npf_slot_stacks_answered(slot, later, NULL));
        uint32_t next;
        assert_int_equal(ask_stacks(f, 5, &next), 0);
        check_stacks_file(f, 5, next);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_idle_when_off, setup, teardown),
                cmocka_unit_test_setup_teardown(test_armed_before_start, setup, teardown),
                cmocka_unit_test_setup_teardown(test_collecting_from_start_step, setup, teardown),
                cmocka_unit_test_setup_teardown(test_done_after_stop_step, setup, teardown),
                cmocka_unit_test_setup_teardown(test_missed_when_read_after_start, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_at_start_step_collects, setup, teardown),
                cmocka_unit_test_setup_teardown(test_filtered_and_selected, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_when_backend_refuses, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_when_directory_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_acl_window_done, setup, teardown),
                cmocka_unit_test_setup_teardown(test_acl_failed_at_start, setup, teardown),
                cmocka_unit_test_setup_teardown(test_acl_failed_at_close, setup, teardown),
                cmocka_unit_test_setup_teardown(test_acl_refused_sampler_in_manifest, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fail_open_window, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fail_armed_window, setup, teardown),
                cmocka_unit_test_setup_teardown(test_one_window_per_generation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_generation_waits_for_close, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_generation_replaces_armed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_generation_missed_after_close, setup, teardown),
                cmocka_unit_test_setup_teardown(test_step_jumping_past_window_missed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_warmup_in_window, setup, teardown),
                cmocka_unit_test_setup_teardown(test_torch_npu_start_step, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_at_multiple_of, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_at_multiple_of_absolute, setup, teardown),
                cmocka_unit_test_setup_teardown(test_duration_ms, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_during_window_incomplete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_after_stop_step_complete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_detached_start, setup_detached, teardown),
                cmocka_unit_test_setup_teardown(test_detached_close_leaves_no_segment, setup_detached, teardown),
                cmocka_unit_test_setup_teardown(test_open_rejects_bad_options, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_after_fork, setup, teardown),
                cmocka_unit_test_setup_teardown(test_child_never_touches_parent_window, setup, teardown),
                cmocka_unit_test_setup_teardown(test_same_rank_twice_busy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_64_ranks_same_step, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fast_path_when_nothing_changes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stacks_on_request, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stacks_without_configuration, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stacks_new_claim_starts_answered, setup, teardown),
        };
        return cmocka_run_group_tests_name("rank", tests, NULL, NULL);
}
