/* SPDX-License-Identifier: MIT */
/*
 * The acl backend against a recording stand-in of libascendcl.so: the exact aclprof* call
 * sequence, device, data-type masks and AI Core metrics for every level and switch, the
 * library and symbol errors, and every injected failure with the cleanup it requires.
 *
 * The stub's path comes from $NPF_ACL_STUB, else from NPF_ACL_STUB_DEFAULT given at build
 * time; libmsprofiler.so is looked for next to it.
 */
#include "rank/backend.h"

#include <errno.h>
#include <limits.h>
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

#ifndef NPF_ACL_STUB_DEFAULT
#define NPF_ACL_STUB_DEFAULT ""
#endif

typedef struct fixture {
        char root[64];                  /* the mkdtemp directory */
        char log[PATH_MAX];
        char dir[PATH_MAX];             /* the window directory */
        char dir2[PATH_MAX];            /* a second one */
        char stub[PATH_MAX];            /* the stub libascendcl.so */
        char msprof[PATH_MAX];          /* the stub libmsprofiler.so */
        npf_shm_args_t args;
        npf_backend_window_t win;
        void *state;
        char err[NPF_BACKEND_ERR_MAX];
} fixture_t;

static int setup(void **state)
{
        fixture_t *f = calloc(1, sizeof(*f));
        const char *stub = getenv("NPF_ACL_STUB");
        char *slash;

        assert_non_null(f);
        if (!stub || !*stub)
                stub = NPF_ACL_STUB_DEFAULT;
        if (!*stub)
                fail_msg("set NPF_ACL_STUB to the stub libascendcl.so (make check does)");
        if (!realpath(stub, f->stub))
                fail_msg("the stub %s does not exist: build it first (make check does)", stub);
        snprintf(f->msprof, sizeof(f->msprof), "%s", f->stub);
        slash = strrchr(f->msprof, '/');
        snprintf(slash + 1, sizeof(f->msprof) - (size_t) (slash + 1 - f->msprof), "libmsprofiler.so");

        snprintf(f->root, sizeof(f->root), "/tmp/npf-acl-XXXXXX");
        assert_non_null(mkdtemp(f->root));
        snprintf(f->log, sizeof(f->log), "%s/calls.log", f->root);
        snprintf(f->dir, sizeof(f->dir), "%s/rank0_start10_stop12", f->root);
        snprintf(f->dir2, sizeof(f->dir2), "%s/rank0_start20_stop22", f->root);
        assert_int_equal(mkdir(f->dir, 0755), 0);
        assert_int_equal(mkdir(f->dir2, 0755), 0);

        setenv("NPUPROF_ACL_LIB", f->stub, 1);
        setenv("NPUPROF_MSPROFILER_LIB", "", 1);   /* none unless a test says so */
        setenv("NPF_ACL_STUB_LOG", f->log, 1);
        unsetenv("NPF_ACL_STUB_FAIL");

        f->args.enabled = 1;
        f->args.level = NPF_LEVEL_NONE;
        f->args.aic_metrics = NPF_AIC_NONE;
        f->args.activities = NPF_ACT_CPU | NPF_ACT_NPU;
        f->win = (npf_backend_window_t) {
                .dir = f->dir, .args = &f->args, .rank = 0, .local_device = 0,
                .first_step = 10, .last_step = 12,
        };
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fixture_t *f = *state;

        npf_backend_acl.shutdown();     /* a test that failed midway leaves nothing open */
        unsetenv("NPF_ACL_STUB_FAIL");
        unsetenv("NPF_ACL_STUB_LOG");
        unsetenv("NPUPROF_ACL_LIB");
        unsetenv("NPUPROF_MSPROFILER_LIB");
        unlink(f->log);
        rmdir(f->dir);
        rmdir(f->dir2);
        rmdir(f->root);
        free(f);
        return 0;
}

/*
 * The recorded calls, with each configuration the stub made named by the order it was
 * made in: the first config#N becomes config#C, the second config#D, and so on; a config
 * the stub never made stays a number (0 for none).
 */
static char *calls(const fixture_t *f)
{
        unsigned ids[16];
        size_t nids = 0, len = 0, cap;
        char *in, *out, *p;
        FILE *fp = fopen(f->log, "re");

        if (!fp)
                return strdup("");
        in = calloc(1, 1 << 16);
        assert_non_null(in);
        len = fread(in, 1, (1 << 16) - 1, fp);
        fclose(fp);
        in[len] = '\0';

        for (p = in; (p = strstr(p, "-> config#")) && nids < 16; p++)
                ids[nids++] = (unsigned) strtoul(p + 10, NULL, 10);

        cap = len + 1;
        out = calloc(1, cap);
        assert_non_null(out);
        len = 0;
        for (p = in; *p; ) {
                if (strncmp(p, "config#", 7) == 0) {
                        char *end;
                        unsigned id = (unsigned) strtoul(p + 7, &end, 10);
                        size_t i;

                        for (i = 0; i < nids && ids[i] != id; i++)
                                ;
                        if (i < nids && end > p + 7) {
                                len += (size_t) sprintf(out + len, "config#%c", (char) ('C' + i));
                                p = end;
                                continue;
                        }
                }
                out[len++] = *p++;
        }
        out[len] = '\0';
        free(in);
        return out;
}

static void assert_calls(const fixture_t *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void assert_calls(const fixture_t *f, const char *fmt, ...)
{
        char want[8192];
        char *got = calls(f);
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(want, sizeof(want), fmt, ap);
        va_end(ap);
        assert_string_equal(got, want);
        free(got);
}

static void assert_no_calls(const fixture_t *f)
{
        assert_calls(f, "%s", "");
}

static void open_ok(fixture_t *f)
{
        f->err[0] = '\0';
        f->state = NULL;
        assert_int_equal(npf_backend_acl.window_open(&f->state, &f->win, f->err), 0);
        assert_non_null(f->state);
        assert_string_equal(f->err, "");
}

static void close_ok(fixture_t *f)
{
        f->err[0] = '\0';
        assert_int_equal(npf_backend_acl.window_close(f->state, 12, true, f->err), 0);
        assert_string_equal(f->err, "");
        f->state = NULL;
}

/* A whole window, open, its later steps and close, as the rank library drives it. */
static void run_window(fixture_t *f)
{
        open_ok(f);
        assert_int_equal(npf_backend_acl.window_step(f->state, 11, f->err), 0);
        assert_int_equal(npf_backend_acl.window_step(f->state, 12, f->err), 0);
        close_ok(f);
}

/* The complete sequence of one window on @device with @metrics and @mask. */
static void assert_window(const fixture_t *f, unsigned device, int metrics, unsigned long long mask)
{
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[%u] count=1 metrics=%d events=NULL mask=0x%llx -> config#C\n"
                     "aclprofStart config#C -> 0\n"
                     "aclprofStop config#C -> 0\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir), device, metrics, mask);
}

/* window_open fails with @want_errno and @want_err. */
static void open_fails(fixture_t *f, int want_errno, const char *want_err)
{
        void *st = (void *) &st;

        f->err[0] = '\0';
        assert_int_equal(npf_backend_acl.window_open(&st, &f->win, f->err), want_errno);
        assert_ptr_equal(st, (void *) &st);     /* ret_state untouched on failure */
        assert_string_equal(f->err, want_err);
}

/* --- loading ------------------------------------------------------------------------- */

static void test_probe_loads_the_runtime_without_calls(void **state)
{
        fixture_t *f = *state;

        assert_string_equal(npf_backend_acl.name, "acl");
        assert_int_equal(npf_backend_acl.probe(f->err), 0);
        assert_no_calls(f);
}

static void test_probe_missing_library_names_path(void **state)
{
        fixture_t *f = *state;
        char path[PATH_MAX + 32];

        snprintf(path, sizeof(path), "%s/no-such/libascendcl.so", f->root);
        setenv("NPUPROF_ACL_LIB", path, 1);
        assert_int_equal(npf_backend_acl.probe(f->err), -ENOENT);
        assert_non_null(strstr(f->err, "cannot load the CANN runtime"));
        assert_non_null(strstr(f->err, path));
        assert_non_null(strstr(f->err, "NPUPROF_ACL_LIB"));
}

static void test_open_missing_library_fails_without_calls(void **state)
{
        fixture_t *f = *state;
        char path[PATH_MAX + 32];
        void *st = NULL;

        snprintf(path, sizeof(path), "%s/no-such/libascendcl.so", f->root);
        setenv("NPUPROF_ACL_LIB", path, 1);
        assert_int_equal(npf_backend_acl.window_open(&st, &f->win, f->err), -ENOENT);
        assert_null(st);
        assert_non_null(strstr(f->err, path));
        assert_no_calls(f);
}

static void test_default_library_name(void **state)
{
        fixture_t *f = *state;

        /* With no override the name is libascendcl.so, found (here: not) by the loader. */
        unsetenv("NPUPROF_ACL_LIB");
        if (npf_backend_acl.probe(f->err) == 0)
                skip();         /* a CANN runtime is installed on this machine */
        assert_non_null(strstr(f->err, "libascendcl.so"));
        assert_non_null(strstr(f->err, "set NPUPROF_ACL_LIB"));
}

static void test_missing_symbol_is_named(void **state)
{
        fixture_t *f = *state;
        char want[PATH_MAX + 128];

        /* The stub libmsprofiler.so has aclprofSetConfig only. */
        setenv("NPUPROF_ACL_LIB", f->msprof, 1);
        assert_int_equal(npf_backend_acl.probe(f->err), -ENOENT);
        snprintf(want, sizeof(want), "%s has no aclprofInit: not a CANN runtime, or one too old for npuprof",
                 f->msprof);
        assert_string_equal(f->err, want);
        open_fails(f, -ENOENT, want);
        assert_no_calls(f);
}

static void test_explicit_msprofiler_must_load(void **state)
{
        fixture_t *f = *state;
        char path[PATH_MAX + 32];

        snprintf(path, sizeof(path), "%s/no-such/libmsprofiler.so", f->root);
        setenv("NPUPROF_MSPROFILER_LIB", path, 1);
        assert_int_equal(npf_backend_acl.probe(f->err), -ENOENT);
        assert_non_null(strstr(f->err, path));
        assert_non_null(strstr(f->err, "NPUPROF_MSPROFILER_LIB"));
}

/* --- levels ---------------------------------------------------------------------------- */

static void test_level_none(void **state)
{
        fixture_t *f = *state;

        f->args.level = NPF_LEVEL_NONE;
        run_window(f);
        assert_window(f, 0, 0xFF, 0x0);
}

static void test_level0(void **state)
{
        fixture_t *f = *state;

        f->args.level = NPF_LEVEL_0;
        run_window(f);
        assert_window(f, 0, 0xFF, 0x801);       /* TASK_TIME_L0 | ACL_API */
}

static void test_level1(void **state)
{
        fixture_t *f = *state;

        f->args.level = NPF_LEVEL_1;
        run_window(f);
        assert_window(f, 0, 0xFF, 0x27);        /* TASK_TIME | ACL_API | HCCL_TRACE | AICORE_METRICS */
}

static void test_level2(void **state)
{
        fixture_t *f = *state;

        f->args.level = NPF_LEVEL_2;
        run_window(f);
        assert_window(f, 0, 0xFF, 0x12f);       /* Level1 | RUNTIME_API | AICPU */
}

static void test_level1_with_metric(void **state)
{
        fixture_t *f = *state;

        f->args.level = NPF_LEVEL_1;
        f->args.aic_metrics = NPF_AIC_PIPE_UTILIZATION;
        run_window(f);
        assert_window(f, 0, 1, 0x27);
}

static void test_unknown_level_refused(void **state)
{
        fixture_t *f = *state;

        f->args.level = 3;
        open_fails(f, -EINVAL, "unknown profiler level 3");
        assert_no_calls(f);
}

/* --- switches -------------------------------------------------------------------------- */

static void test_switch_l2_cache(void **state)
{
        fixture_t *f = *state;

        f->args.flags = NPF_FLAG_L2_CACHE;
        run_window(f);
        assert_window(f, 0, 0xFF, 0x10);
}

static void test_switch_mstx(void **state)
{
        fixture_t *f = *state;

        f->args.flags = NPF_FLAG_MSTX;
        run_window(f);
        assert_window(f, 0, 0xFF, 0x80);
}

static void test_switch_op_attr(void **state)
{
        fixture_t *f = *state;

        f->args.flags = NPF_FLAG_OP_ATTR;
        run_window(f);
        assert_window(f, 0, 0xFF, 0x4000);
}

static void test_switch_profile_memory(void **state)
{
        fixture_t *f = *state;

        /* TASK_MEMORY, and hardware memory sampling at 50 Hz as torch_npu asks for it. */
        f->args.flags = NPF_FLAG_PROFILE_MEMORY;
        run_window(f);
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofSetConfig type=3 value=50 length=2 lib=libascendcl -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x1000 -> config#C\n"
                     "aclprofStart config#C -> 0\n"
                     "aclprofStop config#C -> 0\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir));
}

static void test_switches_combine_with_level(void **state)
{
        fixture_t *f = *state;

        f->args.level = NPF_LEVEL_0;
        f->args.flags = NPF_FLAG_L2_CACHE | NPF_FLAG_MSTX | NPF_FLAG_OP_ATTR |
                        NPF_FLAG_RECORD_SHAPES | NPF_FLAG_WITH_STACK;   /* the last two: not ACL's */
        run_window(f);
        assert_window(f, 0, 0xFF, 0x4891);
}

static void test_system_samplers_through_msprofiler(void **state)
{
        fixture_t *f = *state;

        setenv("NPUPROF_MSPROFILER_LIB", f->msprof, 1);
        f->args.flags = NPF_FLAG_SYS_IO | NPF_FLAG_SYS_INTERCONNECTION;
        f->args.host_sys = NPF_HOST_SYS_CPU | NPF_HOST_SYS_MEM | NPF_HOST_SYS_OSRT;
        run_window(f);
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofSetConfig type=5 value=100 length=3 lib=libmsprofiler -> 0\n"
                     "aclprofSetConfig type=6 value=50 length=2 lib=libmsprofiler -> 0\n"
                     "aclprofSetConfig type=8 value=cpu,mem,osrt length=12 lib=libmsprofiler -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#C\n"
                     "aclprofStart config#C -> 0\n"
                     "aclprofStop config#C -> 0\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir));
}

/* --- AI Core metrics: npuprof's (MindSpore's) numbers to CANN's ---------------------- */

static void check_aic(fixture_t *f, int32_t aic, int acl)
{
        f->args.aic_metrics = aic;
        run_window(f);
        assert_window(f, 0, acl, aic == NPF_AIC_NONE ? 0x0 : 0x4);
}

#define AIC_TEST(name, npf, acl) \
        static void test_aic_##name(void **state) { check_aic(*state, npf, acl); }
AIC_TEST(none, NPF_AIC_NONE, 0xFF)
AIC_TEST(pipe_utilization, NPF_AIC_PIPE_UTILIZATION, 1)
AIC_TEST(arithmetic_utilization, NPF_AIC_ARITHMETIC_UTILIZATION, 0)
AIC_TEST(memory, NPF_AIC_MEMORY, 2)
AIC_TEST(memory_l0, NPF_AIC_MEMORY_L0, 3)
AIC_TEST(memory_ub, NPF_AIC_MEMORY_UB, 5)
AIC_TEST(resource_conflict_ratio, NPF_AIC_RESOURCE_CONFLICT_RATIO, 4)
AIC_TEST(l2_cache, NPF_AIC_L2_CACHE, 6)
AIC_TEST(memory_access, NPF_AIC_MEMORY_ACCESS, 8)

static void test_aic_unknown_refused(void **state)
{
        fixture_t *f = *state;

        f->args.aic_metrics = 8;
        open_fails(f, -EINVAL, "unknown AI Core metric 8");
        assert_no_calls(f);
}

/* --- device and activities -------------------------------------------------------------- */

static void test_local_device_is_profiled(void **state)
{
        fixture_t *f = *state;

        f->win.local_device = 5;
        run_window(f);
        assert_window(f, 5, 0xFF, 0x0);
}

static void test_unknown_device_is_device0(void **state)
{
        fixture_t *f = *state;

        f->win.local_device = -1;
        run_window(f);
        assert_window(f, 0, 0xFF, 0x0);
}

static void test_cpu_only_activities_refused(void **state)
{
        fixture_t *f = *state;
        static const char want[] = "the acl backend collects NPU activity only, and this window's activities "
                                   "leave NPU out: add NPU, or choose the host backend";

        f->args.activities = NPF_ACT_CPU;
        open_fails(f, -EINVAL, want);
        f->args.activities = 0;
        open_fails(f, -EINVAL, want);
        assert_no_calls(f);
}

static void test_npu_only_activities(void **state)
{
        fixture_t *f = *state;

        f->args.activities = NPF_ACT_NPU;
        f->args.level = NPF_LEVEL_0;
        run_window(f);
        assert_window(f, 0, 0xFF, 0x801);
}

/* --- the window's life ---------------------------------------------------------------- */

static void test_open_starts_and_steps_call_nothing(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        assert_int_equal(npf_backend_acl.window_step(f->state, 11, f->err), 0);
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#C\n"
                     "aclprofStart config#C -> 0\n",
                     f->dir, strlen(f->dir));
        close_ok(f);
}

static void test_cut_short_window_closes_alike(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        assert_int_equal(npf_backend_acl.window_close(f->state, 10, false, f->err), 0);
        assert_window(f, 0, 0xFF, 0x0);
}

static void test_each_window_inits_and_finalizes(void **state)
{
        fixture_t *f = *state;

        run_window(f);
        f->win.dir = f->dir2;
        run_window(f);
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#C\n"
                     "aclprofStart config#C -> 0\n"
                     "aclprofStop config#C -> 0\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 0\n"
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#D\n"
                     "aclprofStart config#D -> 0\n"
                     "aclprofStop config#D -> 0\n"
                     "aclprofDestroyConfig config#D -> 0\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir), f->dir2, strlen(f->dir2));
}

static void test_second_open_window_refused(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        f->win.dir = f->dir2;
        open_fails(f, -EBUSY, "an ACL window is already open in this process; CANN profiles one session at a time");
        f->win.dir = f->dir;
        close_ok(f);
        assert_window(f, 0, 0xFF, 0x0);
}

static void test_shutdown_finalizes_open_window(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        npf_backend_acl.shutdown();
        assert_window(f, 0, 0xFF, 0x0);
        /* Closing it afterwards only frees it. */
        close_ok(f);
        assert_window(f, 0, 0xFF, 0x0);
}

static void test_shutdown_without_window_calls_nothing(void **state)
{
        fixture_t *f = *state;

        npf_backend_acl.shutdown();
        run_window(f);
        npf_backend_acl.shutdown();
        assert_window(f, 0, 0xFF, 0x0);
}

static void test_shutdown_failure_reported_by_close(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        setenv("NPF_ACL_STUB_FAIL", "aclprofFinalize:500005", 1);
        npf_backend_acl.shutdown();
        assert_int_equal(npf_backend_acl.window_close(f->state, 12, false, f->err), -EIO);
        assert_string_equal(f->err, "aclprofFinalize failed: 500005 ACL_ERROR_PROFILING_FAILURE (profiling failure)");
}

/* --- injected failures ----------------------------------------------------------------- */

static void test_init_failure_stops_everything(void **state)
{
        fixture_t *f = *state;

        setenv("NPF_ACL_STUB_FAIL", "aclprofInit:100000", 1);
        open_fails(f, -EINVAL, "aclprofInit failed: 100000 ACL_ERROR_INVALID_PARAM (a parameter is invalid)");
        assert_calls(f, "aclprofInit path=%s length=%zu -> 100000\n", f->dir, strlen(f->dir));
}

static void test_init_repeat_says_who(void **state)
{
        fixture_t *f = *state;

        setenv("NPF_ACL_STUB_FAIL", "aclprofInit:100002", 1);
        open_fails(f, -EBUSY, "aclprofInit failed: 100002 ACL_ERROR_REPEAT_INITIALIZE (profiling is already "
                   "initialised in this process, by the framework's own profiler?)");
        assert_calls(f, "aclprofInit path=%s length=%zu -> 100002\n", f->dir, strlen(f->dir));
}

static void test_set_config_failure_finalizes(void **state)
{
        fixture_t *f = *state;

        f->args.flags = NPF_FLAG_PROFILE_MEMORY;
        setenv("NPF_ACL_STUB_FAIL", "aclprofSetConfig:100043", 1);
        open_fails(f, -EIO, "aclprofSetConfig(profile_memory) failed: 100043 ACL_ERROR_PROF_NOT_RUN "
                   "(profiling is not initialised: aclprofInit did not succeed)");
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofSetConfig type=3 value=50 length=2 lib=libascendcl -> 100043\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir));
}

static void test_set_config_unsupported_is_tolerated(void **state)
{
        fixture_t *f = *state;

        f->args.flags = NPF_FLAG_SYS_IO;
        setenv("NPF_ACL_STUB_FAIL", "aclprofSetConfig:200007", 1);
        run_window(f);
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofSetConfig type=5 value=100 length=3 lib=libascendcl -> 200007\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#C\n"
                     "aclprofStart config#C -> 0\n"
                     "aclprofStop config#C -> 0\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir));
}

static void test_create_config_failure_finalizes(void **state)
{
        fixture_t *f = *state;

        f->args.level = NPF_LEVEL_1;
        f->win.local_device = 2;
        setenv("NPF_ACL_STUB_FAIL", "aclprofCreateConfig:1", 1);
        open_fails(f, -EINVAL, "aclprofCreateConfig failed: it returned no configuration for device 2, "
                   "AI Core metrics 255, data types 0x27");
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[2] count=1 metrics=255 events=NULL mask=0x27 -> NULL\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir));
}

static void test_start_failure_destroys_and_finalizes(void **state)
{
        fixture_t *f = *state;

        setenv("NPF_ACL_STUB_FAIL", "aclprofStart:100000", 1);
        open_fails(f, -EINVAL, "aclprofStart failed: 100000 ACL_ERROR_INVALID_PARAM (a parameter is invalid)");
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#C\n"
                     "aclprofStart config#C -> 100000\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir));
        /* Nothing stays open: the next window may open. */
        unsetenv("NPF_ACL_STUB_FAIL");
        open_ok(f);
        close_ok(f);
}

static void test_start_failure_keeps_first_error(void **state)
{
        fixture_t *f = *state;

        setenv("NPF_ACL_STUB_FAIL", "aclprofStart:148047,aclprofFinalize:500001", 1);
        open_fails(f, -EBUSY, "aclprofStart failed: 148047 ACL_ERROR_PROF_API_CONFLICT "
                   "(conflicts with profiling started through another API)");
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#C\n"
                     "aclprofStart config#C -> 148047\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 500001\n",
                     f->dir, strlen(f->dir));
}

static void test_stop_failure_still_destroys_and_finalizes(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        setenv("NPF_ACL_STUB_FAIL", "aclprofStop:100043", 1);
        assert_int_equal(npf_backend_acl.window_close(f->state, 12, true, f->err), -EIO);
        assert_string_equal(f->err, "aclprofStop failed: 100043 ACL_ERROR_PROF_NOT_RUN "
                            "(profiling is not initialised: aclprofInit did not succeed)");
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#C\n"
                     "aclprofStart config#C -> 0\n"
                     "aclprofStop config#C -> 100043\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir));
}

static void test_destroy_failure_still_finalizes(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        setenv("NPF_ACL_STUB_FAIL", "aclprofDestroyConfig:100000", 1);
        assert_int_equal(npf_backend_acl.window_close(f->state, 12, true, f->err), -EINVAL);
        assert_string_equal(f->err, "aclprofDestroyConfig failed: 100000 ACL_ERROR_INVALID_PARAM "
                            "(a parameter is invalid)");
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#C\n"
                     "aclprofStart config#C -> 0\n"
                     "aclprofStop config#C -> 0\n"
                     "aclprofDestroyConfig config#C -> 100000\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir));
}

static void test_finalize_failure_reported(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        setenv("NPF_ACL_STUB_FAIL", "aclprofFinalize:300000", 1);
        assert_int_equal(npf_backend_acl.window_close(f->state, 12, true, f->err), -ENOSPC);
        assert_string_equal(f->err, "aclprofFinalize failed: 300000 ACL_ERROR_STORAGE_OVER_LIMIT "
                            "(the profiling storage limit is exceeded)");
        assert_calls(f,
                     "aclprofInit path=%s length=%zu -> 0\n"
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x0 -> config#C\n"
                     "aclprofStart config#C -> 0\n"
                     "aclprofStop config#C -> 0\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 300000\n",
                     f->dir, strlen(f->dir));
}

static void test_close_reports_every_failure(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        setenv("NPF_ACL_STUB_FAIL", "aclprofStop:500003,aclprofFinalize:500005", 1);
        assert_int_equal(npf_backend_acl.window_close(f->state, 12, true, f->err), -EIO);
        assert_string_equal(f->err, "aclprofStop failed: 500003 ACL_ERROR_RT_FAILURE (runtime failure); "
                            "aclprofFinalize failed: 500005 ACL_ERROR_PROFILING_FAILURE (profiling failure)");
}

static void test_unknown_code_is_still_readable(void **state)
{
        fixture_t *f = *state;

        setenv("NPF_ACL_STUB_FAIL", "aclprofStart:507011", 1);
        open_fails(f, -EIO, "aclprofStart failed: 507011 (unknown ACL error code: an internal error)");
        setenv("NPF_ACL_STUB_FAIL", "aclprofStart:42", 1);
        open_fails(f, -EIO, "aclprofStart failed: 42 (unknown ACL error code)");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        const struct CMUnitTest tests[] = {
                T(test_probe_loads_the_runtime_without_calls),
                T(test_probe_missing_library_names_path),
                T(test_open_missing_library_fails_without_calls),
                T(test_default_library_name),
                T(test_missing_symbol_is_named),
                T(test_explicit_msprofiler_must_load),
                T(test_level_none),
                T(test_level0),
                T(test_level1),
                T(test_level2),
                T(test_level1_with_metric),
                T(test_unknown_level_refused),
                T(test_switch_l2_cache),
                T(test_switch_mstx),
                T(test_switch_op_attr),
                T(test_switch_profile_memory),
                T(test_switches_combine_with_level),
                T(test_system_samplers_through_msprofiler),
                T(test_aic_none),
                T(test_aic_pipe_utilization),
                T(test_aic_arithmetic_utilization),
                T(test_aic_memory),
                T(test_aic_memory_l0),
                T(test_aic_memory_ub),
                T(test_aic_resource_conflict_ratio),
                T(test_aic_l2_cache),
                T(test_aic_memory_access),
                T(test_aic_unknown_refused),
                T(test_local_device_is_profiled),
                T(test_unknown_device_is_device0),
                T(test_cpu_only_activities_refused),
                T(test_npu_only_activities),
                T(test_open_starts_and_steps_call_nothing),
                T(test_cut_short_window_closes_alike),
                T(test_each_window_inits_and_finalizes),
                T(test_second_open_window_refused),
                T(test_shutdown_finalizes_open_window),
                T(test_shutdown_without_window_calls_nothing),
                T(test_shutdown_failure_reported_by_close),
                T(test_init_failure_stops_everything),
                T(test_init_repeat_says_who),
                T(test_set_config_failure_finalizes),
                T(test_set_config_unsupported_is_tolerated),
                T(test_create_config_failure_finalizes),
                T(test_start_failure_destroys_and_finalizes),
                T(test_start_failure_keeps_first_error),
                T(test_stop_failure_still_destroys_and_finalizes),
                T(test_destroy_failure_still_finalizes),
                T(test_finalize_failure_reported),
                T(test_close_reports_every_failure),
                T(test_unknown_code_is_still_readable),
        };
#undef T
        return cmocka_run_group_tests_name("backend-acl", tests, NULL, NULL);
}
