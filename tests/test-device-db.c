/* SPDX-License-Identifier: MIT */
/*
 * The db export reader: a hand-made export whose breakdown is worked out by hand below; the
 * six real exports of shared/testdata (torch_npu on two Ascend 910B, levels 0 to 2, both
 * ranks), whose breakdown must be torch_npu's own StepTraceTime in analysis.db beside them,
 * and their tasks, links and ranks as the sqlite3 queries in the comments count them; then
 * hostile files: empty, random, cut short, without TASK, with text, NULLs and huge values
 * where integers belong, duplicated keys, an odd name, a writer holding its lock.
 */
#include "replay/device-db.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/tmpdir.h"

#ifndef NPF_PROFILER_OUTPUTS
#define NPF_PROFILER_OUTPUTS "../shared/testdata/profiler_outputs"
#endif
#define ALEXNET NPF_PROFILER_OUTPUTS "/torch_npu-2rank-alexnet/db"

/* What a test holds when an assertion jumps out of it; freed at teardown. */
static npf_device_t *held;
static npf_dev_breakdown_t *rows;

static int setup(void **state)
{
        return tmpdir_setup(state);
}

static int teardown(void **state)
{
        held = npf_device_free(held);
        free(rows);
        rows = NULL;
        return tmpdir_teardown(state);
}

/* @dir/@name into @buf. */
static const char *path_in(char *buf, size_t size, const char *dir, const char *name)
{
        snprintf(buf, size, "%s/%s", dir, name);
        return buf;
}

/* A new SQLite database at @path made by @sql. */
static void make_db(const char *path, const char *sql)
{
        sqlite3 *db = NULL;
        char *msg = NULL;

        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
        if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
                fail_msg("making %s: %s", path, msg);
        assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

static void write_file(const char *path, const void *buf, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, buf, len), (ssize_t) len);
        assert_int_equal(close(fd), 0);
}

/* Loads @path, which must succeed. */
static npf_device_t *load(const char *path, npf_device_db_info_t *info)
{
        char err[NPF_DEVICE_DB_ERR_MAX];
        npf_device_t *d = NULL;
        int r = npf_device_db_load(path, &d, info, err);

        if (r != 0)
                fail_msg("npf_device_db_load(%s): %d (%s): %s", path, r, strerror(-r), err);
        held = npf_device_free(held);
        held = d;
        return d;
}

/* Loads @path, which must fail with @expected and a message holding @message. */
static void load_fails(const char *path, int expected, const char *message)
{
        char err[NPF_DEVICE_DB_ERR_MAX];
        npf_device_t *d = NULL;
        int r = npf_device_db_load(path, &d, NULL, err);

        if (r != expected || !strstr(err, message))
                fail_msg("npf_device_db_load(%s): %d (%s), \"%s\"; expected %d and \"%s\"", path, r, strerror(-r), err,
                         expected, message);
        assert_null(d);
}

static const npf_dev_breakdown_t *breakdown(const npf_device_t *d, int64_t expected_rows)
{
        npf_dev_breakdown_t *b = NULL;

        free(rows);
        rows = NULL;
        assert_int_equal(npf_device_breakdown(d, &b), expected_rows);
        rows = b;
        return b;
}

/* The task named @name, which must be there once. */
static const npf_dev_task_t *task_named(const npf_device_t *d, const char *name)
{
        const npf_dev_task_t *t, *found = NULL;
        size_t n = npf_device_tasks(d, &t);

        for (size_t i = 0; i < n; i++) {
                if (!strcmp(npf_device_str(d, t[i].name), name)) {
                        if (found)
                                fail_msg("two tasks named %s", name);
                        found = &t[i];
                }
        }
        if (!found)
                fail_msg("no task named %s", name);
        return found;
}

static const npf_dev_link_t *link_of(const npf_device_t *d, const char *group, const char *link)
{
        const npf_dev_link_t *l;
        size_t n = npf_device_links(d, &l);

        for (size_t i = 0; i < n; i++)
                if (!strcmp(npf_device_str(d, l[i].group), group) && !strcmp(npf_device_str(d, l[i].link), link))
                        return &l[i];
        return NULL;
}

/* --- a hand-made export ---------------------------------------------------------------------- */

/*
 * The tables as torch_npu writes them (same columns, fewer of the ones not read), holding:
 *   step 7, host [1000, 10000]
 *   node-level launches (CANN_API type 10000): conn 1 at 1100, 2 at 1200, 4 at 12000; conn 3
 *   is an HCCL-level call (type 5500), no launch
 *   TASK  g1 [2000, 3000] conn 1  MatMul, AI_CORE (COMPUTE_TASK_INFO) on stream 5
 *         g2 [2500, 4000] conn 2  Add, AI_VECTOR_CORE
 *         g3 [4500, 4600] no conn MEMCPY_ASYNC: memory
 *         g4 [5000, 5100] conn 1  EVENT_RECORD: other
 *         g5 [6000, 6500] conn 3  SDMA, an HCCL task: other, not memory
 *         g6 [13000, 14000] conn 4  MatMul again, launched after the step: in no step
 *   COMMUNICATION_OP  op 1 allReduce [3500, 7000], op 2 hcom_receive [7500, 8000], in group0
 *   COMMUNICATION_TASK_INFO (op 1)  g5 Memcpy SDMA/HCCS 1000 bytes; g99 (no TASK row)
 *         Reduce_Inline SDMA/INVALID_TYPE 24 bytes; g5 Notify_Wait LOCAL; g5 Memcpy
 *         SDMA/ON_CHIP 500 bytes (a local copy)
 * Worked out for step 7:
 *   computing       [2000, 4000]                                    2000
 *   communication   [3500, 7000] + [7500, 8000]                     4000
 *   overlapped      [3500, 4000]                                     500
 *   not_overlapped  4000 - 500                                      3500
 *   free            span [2000, 8000] 6000 less the union 5500       500
 *   bubble          the receive                                      500
 *   stage           6000 - 500                                      5500
 *   preparing       2000 - 1000                                     1000
 *   memory          g3 (start 4500 in the device range [2000, 10000)) 100
 *   tasks           g1, g2, g3, op 1, op 2                             5
 * Links: group0 HCCS 1000 bytes in 500 ns (g5), group0 SDMA 24 bytes in 0 ns (g99 has no
 * TASK row); op 1 moved 1024 bytes.
 */
static const char hand_sql[] =
        "CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);"
        "INSERT INTO STRING_IDS VALUES (1, 'MatMul'), (2, 'AI_CORE'), (3, 'KERNEL_AICORE'), (4, 'MEMCPY_ASYNC'),"
        " (5, 'hcom_allReduce__1_0_1'), (6, 'group0'), (7, 'hcom_receive__2_0_1'), (8, 'EVENT_RECORD'),"
        " (9, 'Memcpy'), (10, 'AI_VECTOR_CORE'), (11, 'Add'), (12, 'SDMA'), (13, 'Reduce_Inline'),"
        " (14, 'Notify_Wait'), (15, 'KERNEL_AIVEC');"
        "CREATE TABLE ENUM_HCCL_TRANSPORT_TYPE (id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO ENUM_HCCL_TRANSPORT_TYPE VALUES (0, 'SDMA'), (1, 'RDMA'), (2, 'LOCAL'), (65535, 'INVALID_TYPE');"
        "CREATE TABLE ENUM_HCCL_LINK_TYPE (id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO ENUM_HCCL_LINK_TYPE VALUES (0, 'ON_CHIP'), (1, 'HCCS'), (2, 'PCIE'), (4, 'SIO'),"
        " (65535, 'INVALID_TYPE');"
        "CREATE TABLE ENUM_HCCL_RDMA_TYPE (id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO ENUM_HCCL_RDMA_TYPE VALUES (1, 'RDMA_SEND_PAYLOAD'), (65535, 'INVALID_TYPE');"
        "CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,"
        " globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER,"
        " taskId INTEGER, modelId INTEGER);"
        "INSERT INTO TASK VALUES (2000, 3000, 5, 1, 1, 0, 3, 0, 5, 1, 0), (2500, 4000, 5, 2, 2, 0, 15, 0, 6, 2, 0),"
        " (4500, 4600, 5, NULL, 3, 0, 4, 0, 5, 3, 0), (5000, 5100, 5, 1, 4, 0, 8, 0, 5, 4, 0),"
        " (6000, 6500, 5, 3, 5, 0, 12, 0, 7, 5, 0), (13000, 14000, 5, 4, 6, 0, 3, 0, 5, 6, 0);"
        "CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockDim INTEGER,"
        " mixBlockDim INTEGER, taskType INTEGER, opType INTEGER);"
        "INSERT INTO COMPUTE_TASK_INFO VALUES (1, 1, 8, 0, 2, 0), (11, 2, 8, 0, 10, 0), (1, 6, 8, 0, 2, 0);"
        "CREATE TABLE CANN_API (startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER,"
        " connectionId INTEGER PRIMARY KEY, name INTEGER);"
        "INSERT INTO CANN_API VALUES (1100, 1150, 10000, 1, 1, 0), (1200, 1250, 10000, 1, 2, 0),"
        " (1300, 1350, 5500, 1, 3, 0), (12000, 12050, 10000, 1, 4, 0);"
        "CREATE TABLE COMMUNICATION_OP (opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER,"
        " groupName INTEGER, opId INTEGER PRIMARY KEY, relay INTEGER, retry INTEGER, dataType INTEGER,"
        " algType INTEGER, count NUMERIC, opType INTEGER);"
        "INSERT INTO COMMUNICATION_OP VALUES (5, 3500, 7000, 3, 6, 1, 0, 0, 0, 0, 256, 0),"
        " (7, 7500, 8000, 3, 6, 2, 0, 0, 0, 0, 256, 0);"
        "CREATE TABLE COMMUNICATION_TASK_INFO (name INTEGER, globalTaskId INTEGER, taskType INTEGER,"
        " planeId INTEGER, groupName INTEGER, notifyId INTEGER, rdmaType INTEGER, srcRank INTEGER,"
        " dstRank INTEGER, transportType INTEGER, size INTEGER, dataType INTEGER, linkType INTEGER, opId INTEGER);"
        "INSERT INTO COMMUNICATION_TASK_INFO VALUES (5, 5, 9, 0, 6, 0, 65535, 0, 1, 0, 1000, 0, 1, 1),"
        " (5, 99, 13, 0, 6, 0, 65535, 0, 1, 0, 24, 0, 65535, 1),"
        " (5, 5, 14, 0, 6, 0, 65535, 0, 1, 2, 0, 0, 65535, 1),"
        " (5, 5, 9, 0, 6, 0, 65535, 0, 0, 0, 500, 0, 0, 1);"
        "CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);"
        "INSERT INTO STEP_TIME VALUES (7, 1000, 10000);"
        "CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);"
        "INSERT INTO RANK_DEVICE_MAP VALUES (3, 5);";

/* The hand-made export at @dir/@name, then @more SQL run on it. */
static const char *make_hand(char *buf, size_t size, const char *dir, const char *name, const char *more)
{
        path_in(buf, size, dir, name);
        make_db(buf, hand_sql);
        if (more)
                make_db(buf, more);
        return buf;
}

static void test_hand_made(void **state)
{
        tmpdir_t *tmp = *state;
        npf_device_db_info_t info;
        char path[256];
        const npf_dev_task_t *t;

        npf_device_t *d = load(make_hand(path, sizeof(path), tmp->path, "ascend_mindspore_profiler_3.db", NULL),
                               &info);
        assert_int_equal(info.tasks, 6);
        assert_int_equal(info.compute, 3);
        assert_int_equal(info.launched, 4);            /* g1, g2, g4 and g6; g5's call is HCCL-level */
        assert_int_equal(info.comm_ops, 2);
        assert_int_equal(info.transfers, 2);
        assert_int_equal(info.steps, 1);
        assert_string_equal(info.missing, "");
        assert_int_equal(npf_device_rank(d), 3);
        assert_int_equal(npf_device_device(d), 5);
        assert_int_equal(npf_device_framework(d), NPF_DEV_FW_MINDSPORE);

        t = task_named(d, "Add");
        assert_int_equal(t->cls, NPF_DEV_COMPUTE);
        assert_int_equal(t->type, NPF_DEV_TYPE_AI_VECTOR);
        assert_int_equal(t->launch, 1200);
        assert_int_equal(t->stream, 6);
        t = task_named(d, "MEMCPY_ASYNC");
        assert_int_equal(t->cls, NPF_DEV_MEMORY);
        assert_int_equal(t->type, NPF_DEV_TYPE_MEMORY);
        assert_true(t->launch == NPF_DEVICE_NO_TIME);
        t = task_named(d, "EVENT_RECORD");
        assert_int_equal(t->cls, NPF_DEV_OTHER);
        assert_int_equal(t->launch, 1100);
        t = task_named(d, "SDMA");
        assert_int_equal(t->cls, NPF_DEV_OTHER);
        assert_true(t->launch == NPF_DEVICE_NO_TIME);
        t = task_named(d, "hcom_allReduce__1_0_1");
        assert_int_equal(t->cls, NPF_DEV_COMM);
        assert_int_equal(t->type, NPF_DEV_TYPE_COMM);
        assert_string_equal(npf_device_str(d, t->group), "group0");
        assert_true(t->launch == NPF_DEVICE_NO_TIME);
        assert_false(t->receive);
        assert_int_equal(t->bytes, 1024);
        t = task_named(d, "hcom_receive__2_0_1");
        assert_true(t->receive);
        assert_int_equal(t->bytes, 0);

        const npf_dev_link_t *l = link_of(d, "group0", "HCCS");
        assert_non_null(l);
        assert_int_equal(l->bytes, 1000);
        assert_int_equal(l->time_ns, 500);
        assert_int_equal(l->count, 1);
        assert_non_null(l = link_of(d, "group0", "SDMA"));
        assert_int_equal(l->bytes, 24);
        assert_int_equal(l->time_ns, 0);
        assert_int_equal(npf_device_links(d, &l), 2);

        const npf_dev_breakdown_t *b = breakdown(d, 1);
        assert_int_equal(b->step, 7);
        assert_int_equal(b->computing, 2000);
        assert_int_equal(b->communication, 4000);
        assert_int_equal(b->overlapped, 500);
        assert_int_equal(b->not_overlapped, 3500);
        assert_int_equal(b->free, 500);
        assert_int_equal(b->bubble, 500);
        assert_int_equal(b->stage, 5500);
        assert_int_equal(b->preparing, 1000);
        assert_int_equal(b->memory, 100);
        assert_int_equal(b->host_ns, 9000);
        assert_int_equal(b->tasks, 5);
}

/* Only TASK: the tasks, no names, no launches, no steps, and the absent tables named. */
static void test_only_task(void **state)
{
        tmpdir_t *tmp = *state;
        npf_device_db_info_t info;
        char path[256];

        make_db(path_in(path, sizeof(path), tmp->path, "msprof_1.db"),
                "CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,"
                " globalTaskId INTEGER, taskType INTEGER, streamId INTEGER);"
                "INSERT INTO TASK VALUES (100, 200, 2, 1, 1, 3, 4), (300, 400, 2, NULL, NULL, NULL, NULL);");
        npf_device_t *d = load(path, &info);
        assert_int_equal(info.tasks, 2);
        assert_int_equal(info.compute, 0);
        assert_int_equal(info.launched, 0);
        assert_string_equal(info.missing, "STRING_IDS, COMPUTE_TASK_INFO, CANN_API, COMMUNICATION_OP, "
                                          "COMMUNICATION_TASK_INFO, STEP_TIME, RANK_DEVICE_MAP");
        assert_int_equal(npf_device_rank(d), -1);
        assert_int_equal(npf_device_device(d), 2);     /* TASK's deviceId */
        assert_int_equal(npf_device_framework(d), NPF_DEV_FW_UNKNOWN);
        const npf_dev_task_t *t;
        assert_int_equal(npf_device_tasks(d, &t), 2);
        assert_int_equal(t[0].cls, NPF_DEV_OTHER);
        assert_string_equal(npf_device_str(d, t[0].name), "");
        assert_int_equal(t[0].stream, 4);
        /* Nothing is compute, communication or memory. */
        npf_dev_temporal_t tb;
        assert_int_equal(npf_device_temporal(d, &tb), -ENODATA);
}

/* --- the real exports ------------------------------------------------------------------------ */

typedef struct real {
        int level, rank;
} real_t;

static const real_t reals[] = { { 0, 0 }, { 0, 1 }, { 1, 0 }, { 1, 1 }, { 2, 0 }, { 2, 1 } };

static const char *real_path(char *buf, size_t size, const real_t *r, const char *file)
{
        snprintf(buf, size, ALEXNET "/level%d/rank%d_ascend_pt/ASCEND_PROFILER_OUTPUT/%s", r->level, r->rank, file);
        return buf;
}

static const char *real_db(char *buf, size_t size, const real_t *r)
{
        char file[64];

        snprintf(file, sizeof(file), "ascend_pytorch_profiler_%d.db", r->rank);
        return real_path(buf, size, r, file);
}

static void skip_without_testdata(void)
{
        struct stat sb;

        if (stat(ALEXNET, &sb) < 0) {
                print_message("skipped: %s absent\n", ALEXNET);
                skip();
        }
}

/* @ours (ns) against torch_npu's @theirs (us): within 1%, or 1 us where theirs is 0. */
static bool close_to(int64_t ours, double theirs)
{
        double us = (double) ours / 1e3;

        if (theirs == 0)
                return fabs(us) <= 1;
        return fabs(us - theirs) <= fabs(theirs) * 0.01;
}

/*
 * Every real export's breakdown against torch_npu's StepTraceTime for the same step, read from
 * analysis.db beside it: SELECT computing, ... FROM StepTraceTime WHERE step = '50'.
 */
static void test_real_breakdowns(void **state)
{
        static const char *const fields[] = { "computing", "communication", "communication_not_overlapped",
                                              "overlapped", "free", "bubble", "stage", "preparing" };
        (void) state;

        skip_without_testdata();
        for (size_t k = 0; k < sizeof(reals) / sizeof(reals[0]); k++) {
                char path[512], step[32], line[512];
                sqlite3_stmt *st = NULL;
                sqlite3 *db = NULL;
                size_t n = 0;
                bool ok = true;

                npf_device_t *d = load(real_db(path, sizeof(path), &reals[k]), NULL);
                const npf_dev_breakdown_t *b = breakdown(d, 1);
                const int64_t ours[] = { b->computing, b->communication, b->not_overlapped, b->overlapped,
                                         b->free, b->bubble, b->stage, b->preparing };

                assert_int_equal(b->step, 50);
                assert_int_equal(sqlite3_open_v2(real_path(path, sizeof(path), &reals[k], "analysis.db"), &db,
                                                 SQLITE_OPEN_READONLY, NULL),
                                 SQLITE_OK);
                assert_int_equal(sqlite3_prepare_v2(db,
                                                    "SELECT computing, communication, communication_not_overlapped,"
                                                    " overlapped, free, bubble, stage, preparing"
                                                    " FROM StepTraceTime WHERE step = ?",
                                                    -1, &st, NULL),
                                 SQLITE_OK);
                snprintf(step, sizeof(step), "%" PRId64, b->step);
                sqlite3_bind_text(st, 1, step, -1, SQLITE_TRANSIENT);
                assert_int_equal(sqlite3_step(st), SQLITE_ROW);
                n = (size_t) snprintf(line, sizeof(line), "level%d/rank%d step %s (ours/torch_npu, us):",
                                      reals[k].level, reals[k].rank, step);
                for (int f = 0; f < 8; f++) {
                        double theirs = sqlite3_column_double(st, f);
                        if (!close_to(ours[f], theirs)) {
                                print_message("level%d/rank%d: %s is %.3f us, torch_npu's %.3f us\n", reals[k].level,
                                              reals[k].rank, fields[f], (double) ours[f] / 1e3, theirs);
                                ok = false;
                        }
                        if (n < sizeof(line))
                                n += (size_t) snprintf(line + n, sizeof(line) - n, " %s %.3f/%.3f", fields[f],
                                                       (double) ours[f] / 1e3, theirs);
                }
                print_message("%s\n", line);
                sqlite3_finalize(st);
                sqlite3_close(db);
                if (!ok)
                        fail_msg("level%d/rank%d: the breakdown is not torch_npu's", reals[k].level, reals[k].rank);
        }
}

/*
 * What the real exports hold, as sqlite3 counts it in each:
 *   tasks      SELECT count(*) FROM TASK                                  550 (level0), 552
 *   compute    SELECT count(*) FROM COMPUTE_TASK_INFO                     187
 *   launched   SELECT count(*) FROM TASK WHERE connectionId IN
 *                (SELECT connectionId FROM CANN_API WHERE type = 10000)   500
 *   memory     the MEMCPY_ASYNC tasks not in COMMUNICATION_TASK_INFO       24 (the SDMA ones are)
 *   kinds      SELECT s.value, count(*) FROM TASK t JOIN COMPUTE_TASK_INFO c USING (globalTaskId)
 *                JOIN STRING_IDS s ON s.id = c.taskType GROUP BY 1
 *              levels 1, 2: AI_CORE 23, AI_VECTOR_CORE 149, MIX_AIV 13, DSA_SQE 2; level0 says
 *              N/A, so TASK's own (s.id = t.taskType): KERNEL_AICORE 31, KERNEL_AIVEC 149,
 *              MIX_AIV 5, STARS_COMMON 2
 *   rank       SELECT * FROM RANK_DEVICE_MAP                              rank N, device N
 */
static void test_real_contents(void **state)
{
        (void) state;

        skip_without_testdata();
        for (size_t k = 0; k < sizeof(reals) / sizeof(reals[0]); k++) {
                size_t count[NPF_DEV_CLASSES] = { 0 }, kinds[NPF_DEV_TYPES] = { 0 };
                npf_device_db_info_t info;
                const npf_dev_task_t *t;
                char path[512];

                npf_device_t *d = load(real_db(path, sizeof(path), &reals[k]), &info);
                size_t n = npf_device_tasks(d, &t);
                for (size_t i = 0; i < n; i++) {
                        count[t[i].cls]++;
                        if (t[i].cls == NPF_DEV_COMPUTE)
                                kinds[t[i].type]++;
                }
                assert_int_equal(info.tasks, reals[k].level ? 552 : 550);
                assert_int_equal(n, info.tasks + 4);
                assert_int_equal(info.compute, 187);
                assert_int_equal(info.launched, 500);
                assert_int_equal(info.comm_ops, 4);
                assert_int_equal(info.steps, 1);
                assert_string_equal(info.missing, "");
                assert_int_equal(count[NPF_DEV_COMPUTE], 187);
                assert_int_equal(count[NPF_DEV_COMM], 4);
                assert_int_equal(count[NPF_DEV_MEMORY], 24);
                assert_int_equal(kinds[NPF_DEV_TYPE_AI_CORE], reals[k].level ? 23 : 31);
                assert_int_equal(kinds[NPF_DEV_TYPE_AI_VECTOR], reals[k].level ? 162 : 154);
                assert_int_equal(kinds[NPF_DEV_TYPE_OTHER], 2);
                assert_int_equal(npf_device_rank(d), reals[k].rank);
                assert_int_equal(npf_device_device(d), reals[k].rank);
                assert_int_equal(npf_device_framework(d), NPF_DEV_FW_TORCH_NPU);
        }
}

/*
 * level1 rank0's links, as msprof counts them:
 *   SELECT g.value, l.name, sum(i.size), sum(t.endNs - t.startNs), count(*)
 *   FROM COMMUNICATION_TASK_INFO i JOIN STRING_IDS g ON g.id = i.groupName
 *   JOIN STRING_IDS k ON k.id = i.taskType JOIN ENUM_HCCL_TRANSPORT_TYPE p ON p.id = i.transportType
 *   JOIN ENUM_HCCL_LINK_TYPE l ON l.id = i.linkType JOIN TASK t ON t.globalTaskId = i.globalTaskId
 *   WHERE p.name = 'SDMA' AND k.value IN ('Memcpy', 'Reduce_Inline') AND l.name <> 'ON_CHIP'
 *   GROUP BY 1, 2;
 *   90.91.105.46%enp189s0f0_60000_0_1736410538306028|HCCS|427596096|28570060|56
 * (analysis.db's CommAnalyzerBandwidth: HCCS 28.647232 + 117.440512 + 264.241152 + 17.2672 MB.)
 * The first op, hcom_allReduce__210_0_1, moved 28647232 of those bytes. Level0 records no
 * link types (N/A): no links.
 */
static void test_real_links(void **state)
{
        static const char group[] = "90.91.105.46%enp189s0f0_60000_0_1736410538306028";
        const npf_dev_link_t *l;
        char path[512];
        (void) state;

        skip_without_testdata();
        npf_device_t *d = load(real_db(path, sizeof(path), &reals[2]), NULL);
        assert_int_equal(npf_device_links(d, &l), 1);
        assert_non_null(l = link_of(d, group, "HCCS"));
        assert_int_equal(l->bytes, 427596096);
        assert_int_equal(l->time_ns, 28570060);
        assert_int_equal(l->count, 56);
        const npf_dev_task_t *t = task_named(d, "hcom_allReduce__210_0_1");
        assert_int_equal(t->bytes, 28647232);
        assert_string_equal(npf_device_str(d, t->group), group);

        d = load(real_db(path, sizeof(path), &reals[0]), NULL);
        assert_int_equal(npf_device_links(d, &l), 0);
}

/* --- hostile files --------------------------------------------------------------------------- */

static void test_not_sqlite(void **state)
{
        tmpdir_t *tmp = *state;
        unsigned char junk[8192];
        char path[256];

        write_file(path_in(path, sizeof(path), tmp->path, "empty.db"), "", 0);
        load_fails(path, -EINVAL, "empty.db: empty file: not an SQLite database");

        srand(7);
        for (size_t i = 0; i < sizeof(junk); i++)
                junk[i] = (unsigned char) rand();
        write_file(path_in(path, sizeof(path), tmp->path, "random.db"), junk, sizeof(junk));
        load_fails(path, -EINVAL, "random.db: not an SQLite database");

        /* SQLite's header and then nothing of the rest. */
        memcpy(junk, "SQLite format 3", 16);
        write_file(path_in(path, sizeof(path), tmp->path, "header.db"), junk, 100);
        load_fails(path, -EINVAL, "header.db: ");

        load_fails(path_in(path, sizeof(path), tmp->path, "absent.db"), -ENOENT, "absent.db: cannot open");
        load_fails(tmp->path, -EINVAL, "not a regular file");
}

/* The first half of a real export's bytes. */
static void test_truncated(void **state)
{
        tmpdir_t *tmp = *state;
        char path[512], cut[256];
        struct stat sb;

        skip_without_testdata();
        real_db(path, sizeof(path), &reals[2]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &sb), 0);
        size_t half = (size_t) sb.st_size / 2;
        char *buf = malloc(half);
        assert_non_null(buf);
        assert_int_equal(read(fd, buf, half), (ssize_t) half);
        close(fd);
        write_file(path_in(cut, sizeof(cut), tmp->path, "ascend_pytorch_profiler_0.db"), buf, half);
        free(buf);
        load_fails(cut, -EINVAL, "ascend_pytorch_profiler_0.db: reading ");
        load_fails(cut, -EINVAL, "the file is damaged or cut short");
}

static void test_no_task(void **state)
{
        tmpdir_t *tmp = *state;
        char path[256];

        make_db(path_in(path, sizeof(path), tmp->path, "ascend_pytorch_profiler_0.db"),
                "CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);"
                "CREATE VIEW TASK AS SELECT 1 AS startNs;");
        load_fails(path, -EINVAL,
                   "ascend_pytorch_profiler_0.db: no TASK table: not a torch_npu or MindSpore db export");
}

/* Values where integers belong: each an error naming the table, row and column. */
static void test_wrong_types(void **state)
{
        static const struct {
                const char *sql, *message;
        } cases[] = {
                { "UPDATE TASK SET startNs = 'soon' WHERE globalTaskId = 2",
                  "TASK row 2: startNs is text \"soon\", not an integer" },
                { "UPDATE TASK SET endNs = NULL WHERE globalTaskId = 3", "TASK row 3: endNs is NULL, not a time" },
                { "UPDATE TASK SET endNs = x'00ff' WHERE globalTaskId = 1", "TASK row 1: endNs is a blob" },
                { "UPDATE TASK SET startNs = 2.5 WHERE globalTaskId = 1",
                  "TASK row 1: startNs is 2.5, not an integer" },
                { "UPDATE TASK SET startNs = 9000000000000000000 WHERE globalTaskId = 1",
                  "TASK row 1: startNs 9000000000000000000 is out of range" },
                { "UPDATE TASK SET startNs = -5 WHERE globalTaskId = 1", "TASK row 1: startNs -5 is out of range" },
                { "UPDATE TASK SET streamId = 'seven' WHERE globalTaskId = 1", "TASK row 1: streamId is text" },
                { "UPDATE CANN_API SET startNs = 'then' WHERE connectionId = 2",
                  "TASK row 2: CANN_API.startNs is text \"then\"" },
                { "UPDATE COMPUTE_TASK_INFO SET taskType = 'AI_CORE' WHERE globalTaskId = 1",
                  "TASK row 1: COMPUTE_TASK_INFO.taskType is text" },
                { "UPDATE COMMUNICATION_OP SET endNs = 'later' WHERE opId = 2",
                  "COMMUNICATION_OP row 2: endNs is text \"later\"" },
                { "UPDATE COMMUNICATION_TASK_INFO SET size = 'big' WHERE globalTaskId = 99",
                  "COMMUNICATION_TASK_INFO row 2: size is text \"big\", not an integer" },
                { "UPDATE STEP_TIME SET id = 'fifty'", "STEP_TIME row 1: id is text \"fifty\", not an integer" },
                { "UPDATE STEP_TIME SET id = NULL", "STEP_TIME row 1: id is NULL" },
                { "DROP TABLE STRING_IDS; CREATE TABLE STRING_IDS (id TEXT, value TEXT);"
                  "INSERT INTO STRING_IDS VALUES ('one', 'MatMul')",
                  "STRING_IDS row 1: id is text \"one\"" },
                { "UPDATE RANK_DEVICE_MAP SET rankId = 'zero'", "RANK_DEVICE_MAP row 1: rankId is text" },
                { "ALTER TABLE TASK DROP COLUMN streamId", "reading TASK: no such column: t.streamId" },
        };
        tmpdir_t *tmp = *state;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char path[256], name[64];
                snprintf(name, sizeof(name), "wrong-%zu.db", i);
                load_fails(make_hand(path, sizeof(path), tmp->path, name, cases[i].sql), -EINVAL, cases[i].message);
        }
}

/* What is odd but fits: numbers as text or whole reals, NULLs where they may be, the largest times. */
static void test_odd_but_fine(void **state)
{
        tmpdir_t *tmp = *state;
        char path[256];

        npf_device_t *d = load(make_hand(path, sizeof(path), tmp->path, "odd.db",
                                         "UPDATE STEP_TIME SET id = '7';"
                                         "UPDATE TASK SET startNs = '2000', endNs = 3000.0 WHERE globalTaskId = 1;"
                                         "UPDATE TASK SET streamId = NULL, taskType = NULL WHERE globalTaskId = 4;"
                                         "UPDATE COMMUNICATION_OP SET groupName = 12345 WHERE opId = 2;"
                                         "UPDATE COMMUNICATION_TASK_INFO SET size = -1 WHERE globalTaskId = 99;"),
                               NULL);
        const npf_dev_breakdown_t *b = breakdown(d, 1);
        assert_int_equal(b->step, 7);
        assert_int_equal(b->computing, 2000);
        assert_int_equal(b->stage, 5500);
        assert_string_equal(npf_device_str(d, task_named(d, "hcom_receive__2_0_1")->group), "");
        assert_int_equal(task_named(d, "hcom_allReduce__1_0_1")->bytes, 1000);  /* -1: not known */
        assert_int_equal(link_of(d, "group0", "SDMA")->bytes, 0);

        /* Times at NPF_DEVICE_DB_TIME_MAX, of a step and all of its tasks, load and add up. */
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "UPDATE STEP_TIME SET startNs = 0, endNs = %" PRId64 ";"
                 "UPDATE TASK SET startNs = 0, endNs = %" PRId64 ";"
                 "UPDATE CANN_API SET startNs = 1;"
                 "UPDATE COMMUNICATION_OP SET startNs = 0, endNs = %" PRId64 ";",
                 NPF_DEVICE_DB_TIME_MAX, NPF_DEVICE_DB_TIME_MAX, NPF_DEVICE_DB_TIME_MAX / 4);
        d = load(make_hand(path, sizeof(path), tmp->path, "huge.db", sql), NULL);
        b = breakdown(d, 1);
        assert_int_equal(b->computing, NPF_DEVICE_DB_TIME_MAX);
        assert_int_equal(b->communication, NPF_DEVICE_DB_TIME_MAX / 4);
        assert_int_equal(b->bubble, NPF_DEVICE_DB_TIME_MAX / 4);
        const npf_dev_link_t *l = link_of(d, "group0", "HCCS");
        assert_non_null(l);
        assert_int_equal(l->time_ns, NPF_DEVICE_DB_TIME_MAX);
}

/* Keys that repeat, in tables without their primary keys: no task is counted twice. */
static void test_duplicate_keys(void **state)
{
        tmpdir_t *tmp = *state;
        npf_device_db_info_t info;
        char path[256];

        npf_device_t *d = load(make_hand(path, sizeof(path), tmp->path, "dup.db",
                                         "CREATE TABLE c2 AS SELECT * FROM COMPUTE_TASK_INFO;"
                                         "DROP TABLE COMPUTE_TASK_INFO;"
                                         "CREATE TABLE COMPUTE_TASK_INFO AS SELECT * FROM c2 UNION ALL"
                                         " SELECT * FROM c2 UNION ALL SELECT * FROM c2;"
                                         "CREATE TABLE a2 AS SELECT * FROM CANN_API; DROP TABLE CANN_API;"
                                         "CREATE TABLE CANN_API AS SELECT * FROM a2 UNION ALL SELECT * FROM a2;"
                                         "CREATE TABLE s2 AS SELECT * FROM STRING_IDS; DROP TABLE STRING_IDS;"
                                         "CREATE TABLE STRING_IDS AS SELECT * FROM s2 UNION ALL"
                                         " SELECT id, 'other' FROM s2;"),
                               &info);
        assert_int_equal(info.tasks, 6);
        assert_int_equal(info.compute, 3);
        assert_int_equal(info.launched, 4);
        assert_non_null(task_named(d, "Add"));
        assert_int_equal(breakdown(d, 1)->computing, 2000);
}

/* A name SQLite's URIs would misread, and a writer in the middle of a transaction. */
static void test_odd_name_and_writer(void **state)
{
        tmpdir_t *tmp = *state;
        npf_device_db_info_t info;
        sqlite3 *writer = NULL;
        char path[256];

        make_hand(path, sizeof(path), tmp->path, "a?mode=rw#b%20c.db", NULL);
        load(path, &info);
        assert_int_equal(info.tasks, 6);

        /* It holds a RESERVED lock with a row not yet committed: the reader sees the file as it was. */
        assert_int_equal(sqlite3_open_v2(path, &writer, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_exec(writer,
                                      "BEGIN IMMEDIATE; INSERT INTO TASK (startNs, endNs) VALUES (1, 2);",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        load(path, &info);
        assert_int_equal(info.tasks, 6);
        assert_int_equal(sqlite3_exec(writer, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(writer);
        load(path, &info);
        assert_int_equal(info.tasks, 7);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_hand_made, setup, teardown),
                cmocka_unit_test_setup_teardown(test_only_task, setup, teardown),
                cmocka_unit_test_setup_teardown(test_real_breakdowns, setup, teardown),
                cmocka_unit_test_setup_teardown(test_real_contents, setup, teardown),
                cmocka_unit_test_setup_teardown(test_real_links, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_sqlite, setup, teardown),
                cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_task, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrong_types, setup, teardown),
                cmocka_unit_test_setup_teardown(test_odd_but_fine, setup, teardown),
                cmocka_unit_test_setup_teardown(test_duplicate_keys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_odd_name_and_writer, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
