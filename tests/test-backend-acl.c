/* SPDX-License-Identifier: MIT */
/*
 * The acl backend against the CANN stand-in (tests/stub-acl/), both built against CANN's
 * real headers: the exact call sequence; the data-type mask, AI Core metric and samplers of
 * every level, switch and metric of the three dialects, each row of the table as torch_npu
 * computes it for the same settings; samplers the device lacks, a CANN without
 * aclprofSetConfig or the feature list, the device the process uses; the library and symbol
 * errors, and every injected failure with the cleanup it requires.
 *
 * The stand-in's path comes from $NPF_ACL_STUB, else from NPF_ACL_STUB_DEFAULT given at
 * build time; its libmsprofiler.so is beside it, and an older CANN's in old/. CANN keeps its
 * profiling state for the process, so each test ends with that state finalized.
 */
#include "rank/backend.h"
#include "rank/acl-api.h"
#include "conf/conf.h"

#include <dlfcn.h>
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

const char *npf__acl_code_name(int code);
const char *npf__acl_codes_check(void);

typedef struct fixture {
        char root[64];                  /* the mkdtemp directory */
        char log[PATH_MAX];
        char dir[PATH_MAX];             /* the window directory */
        char dir2[PATH_MAX];            /* a second one */
        char stub[PATH_MAX];            /* the stand-in libascendcl.so */
        char msprof[PATH_MAX];          /* its libmsprofiler.so */
        char old_stub[PATH_MAX];        /* an older CANN's, without aclprofSetConfig */
        char old_msprof[PATH_MAX];
        npf_shm_args_t args;
        npf_backend_window_t win;
        void *state;
        char err[NPF_BACKEND_ERR_MAX];
} fixture_t;

static void beside(char *out, size_t size, const char *lib, const char *name)
{
        const char *slash = strrchr(lib, '/');

        snprintf(out, size, "%.*s/%s", (int) (slash - lib), lib, name);
}

static int setup(void **state)
{
        fixture_t *f = calloc(1, sizeof(*f));
        const char *stub = getenv("NPF_ACL_STUB");

        assert_non_null(f);
        if (!stub || !*stub)
                stub = NPF_ACL_STUB_DEFAULT;
        if (!*stub)
                fail_msg("set NPF_ACL_STUB to the stand-in libascendcl.so (make check does)");
        if (!realpath(stub, f->stub))
                fail_msg("the stand-in %s does not exist: build it first (make check does)", stub);
        beside(f->msprof, sizeof(f->msprof), f->stub, "libmsprofiler.so");
        beside(f->old_stub, sizeof(f->old_stub), f->stub, "old/libascendcl.so");
        beside(f->old_msprof, sizeof(f->old_msprof), f->stub, "old/libmsprofiler.so.1");

        snprintf(f->root, sizeof(f->root), "/tmp/npf-acl-XXXXXX");
        assert_non_null(mkdtemp(f->root));
        snprintf(f->log, sizeof(f->log), "%s/calls.log", f->root);
        snprintf(f->dir, sizeof(f->dir), "%s/rank0_start10_stop12", f->root);
        snprintf(f->dir2, sizeof(f->dir2), "%s/rank0_start20_stop22", f->root);
        assert_int_equal(mkdir(f->dir, 0755), 0);
        assert_int_equal(mkdir(f->dir2, 0755), 0);

        /* A CANN as it is installed, on an Ascend910B, in a process that has set device 0. */
        setenv("NPUPROF_ACL_LIB", f->stub, 1);
        setenv("NPUPROF_MSPROFILER_LIB", f->msprof, 1);
        setenv("NPF_ACL_STUB_LOG", f->log, 1);
        setenv("NPF_ACL_STUB_SET_DEVICE", "0", 1);
        unsetenv("NPF_ACL_STUB_SOC");
        unsetenv("NPF_ACL_STUB_FAIL");
        unsetenv("ASCEND_RT_VISIBLE_DEVICES");

        f->args.enabled = 1;
        f->args.level = NPF_LEVEL_0;
        f->args.aic_metrics = NPF_AIC_NONE;
        f->args.activities = NPF_ACT_CPU | NPF_ACT_NPU;
        f->args.export_type = NPF_EXPORT_TEXT;
        f->win = (npf_backend_window_t) {
                .dir = f->dir, .args = &f->args, .rank = 0, .local_device = 0,
                .first_step = 10, .last_step = 12, .runtime = json_object(),
        };
        *state = f;
        return 0;
}

/* CANN's session ended, as a test that injected a failed aclprofFinalize may leave it. */
static void finalize_cann(const char *lib)
{
        void *cann = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        int (*finalize)(void) = cann ? (int (*)(void)) dlsym(cann, "aclprofFinalize") : NULL;

        assert_non_null(finalize);
        assert_int_equal(finalize(), 0);
        dlclose(cann);
}

static int teardown(void **state)
{
        fixture_t *f = *state;

        npf_backend_acl.shutdown();     /* a test that failed midway leaves nothing open */
        unsetenv("NPF_ACL_STUB_FAIL");
        unsetenv("NPF_ACL_STUB_LOG");
        unsetenv("NPF_ACL_STUB_SOC");
        finalize_cann(f->stub);
        unsetenv("NPF_ACL_STUB_SOC");
        unsetenv("NPF_ACL_STUB_SET_DEVICE");
        unsetenv("NPUPROF_ACL_LIB");
        unsetenv("NPUPROF_MSPROFILER_LIB");
        unsetenv("ASCEND_RT_VISIBLE_DEVICES");
        unsetenv("ACL_DEVICE_SYNC_TIMEOUT");
        json_decref(f->win.runtime);
        unlink(f->log);
        rmdir(f->dir);
        rmdir(f->dir2);
        rmdir(f->root);
        free(f);
        return 0;
}

static void clear_log(const fixture_t *f)
{
        unlink(f->log);
}

/*
 * The recorded calls, with each configuration the stand-in made named by the order it was
 * made in: the first config#N becomes config#C, the second config#D, and so on; a config
 * the stand-in never made stays a number (0 for none).
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

/* The lines of a window that CANN accepts whole, in torch_npu's order. */
#define L_INIT    "aclprofInit path=%s length=%zu -> 0\n"
#define L_FEAT    "aclprofGetSupportedFeaturesV2 -> 0 (3 features)\n"
#define L_DEV0    "aclrtGetDevice -> 0 (device 0)\n"
#define L_START   "aclprofStart config#C -> 0\n"
#define L_CLOSE   "aclrtSynchronizeDeviceWithTimeout timeout=-1 -> 0\n" \
                  "aclprofStop config#C -> 0\n" \
                  "aclprofDestroyConfig config#C -> 0\n" \
                  "aclprofFinalize -> 0\n"
#define L_CREATE(mask) "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=" mask " -> config#C\n"

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

/* The complete sequence of one window on @device with @metrics and @mask, no sampler asked. */
static void assert_window(const fixture_t *f, unsigned device, int metrics, unsigned long long mask)
{
        assert_calls(f,
                     L_INIT L_FEAT
                     "aclrtGetDevice -> 0 (device %u)\n"
                     "aclprofCreateConfig devices=[%u] count=1 metrics=%d events=NULL mask=0x%llx -> config#C\n"
                     L_START L_CLOSE,
                     f->dir, strlen(f->dir), device, device, metrics, mask);
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

/* @j as compact JSON, its keys sorted, is @want. */
static void assert_json(const json_t *j, const char *want)
{
        char *got = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);

        assert_non_null(got);
        assert_string_equal(got, want);
        free(got);
}

/* The manifest's "runtime" object. */
static void assert_runtime(const fixture_t *f, const char *want)
{
        assert_json(f->win.runtime, want);
}

/* --- the declarations and codes are CANN's ------------------------------------------- */

static void test_error_codes_are_canns(void **state)
{
        (void) state;
        /* Compiled with CANN's acl_base_rt.h: its constants, our names for them. */
        assert_null(npf__acl_codes_check());
        assert_string_equal(npf__acl_code_name(ACL_ERROR_INVALID_PARAM), "ACL_ERROR_INVALID_PARAM");
        assert_string_equal(npf__acl_code_name(ACL_ERROR_INVALID_PROFILING_CONFIG), "ACL_ERROR_INVALID_PROFILING_CONFIG");
        assert_string_equal(npf__acl_code_name(ACL_ERROR_FEATURE_UNSUPPORTED), "ACL_ERROR_FEATURE_UNSUPPORTED");
        assert_string_equal(npf__acl_code_name(ACL_ERROR_PROF_MODULES_UNSUPPORTED), "ACL_ERROR_PROF_MODULES_UNSUPPORTED");
        assert_string_equal(npf__acl_code_name(ACL_ERROR_RT_CONTEXT_NULL), "ACL_ERROR_RT_CONTEXT_NULL");
        assert_null(npf__acl_code_name(42));
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

        /* A library that is not CANN's. */
        setenv("NPUPROF_ACL_LIB", "libm.so.6", 1);
        assert_int_equal(npf_backend_acl.probe(f->err), -ENOENT);
        assert_string_equal(f->err, "libm.so.6 has no aclprofInit: not a CANN runtime, or one too old for npuprof");
        open_fails(f, -ENOENT, "libm.so.6 has no aclprofInit: not a CANN runtime, or one too old for npuprof");
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

/* --- the table: the same file gives torch_npu's mask and metric ---------------------- */

/*
 * Each row is a configuration file of one dialect, the chip, and what torch_npu sends CANN
 * for the same settings: the AI Core metric of aclprofCreateConfig and its data-type mask.
 * The bits: ACL_API 0x1, TASK_TIME 0x2, AICORE_METRICS 0x4, AICPU 0x8, L2CACHE 0x10,
 * HCCL_TRACE 0x20, MSPROFTX 0x80, RUNTIME_API 0x100, TASK_TIME_L0 0x800, TASK_MEMORY 0x1000,
 * OP_ATTR 0x4000, AICORE_SHAPE 0x800000000 (acl_prof.h:26-43). torch_npu's levels
 * (profiler_mgr.h:14-17): Level_none 0, Level0 0x801, Level1 0x27, Level2 0x12f.
 * Citations are to Ascend/pytorch 9e73e708: PM torch_npu/csrc/profiler/profiler_mgr.cpp,
 * EC torch_npu/profiler/experimental_config.py, CC torch_npu/profiler/_dynamic_profiler/
 * _dynamic_profiler_config_context.py.
 */
typedef struct mask_row {
        const char *json;
        const char *soc;                /* NULL: Ascend910B */
        int metric;
        unsigned long long mask;
        const char *why;
} mask_row_t;

#define TN(exp) "{\"start_step\": 10, \"experimental_config\": " exp "}"
#define MS(keys) "{\"start_step\": 10, \"stop_step\": 12, " keys "}"
#define NV(keys) "{\"start_step\": 10, \"steps\": 3, " keys "}"

static const mask_row_t mask_rows[] = {
        /* torch_npu's dialect */
        { "{\"start_step\": 10}", NULL, 0xFF, 0x801,
          "no experimental_config: _ExperimentalConfig() is Level0, its PipeUtilization reset to none (EC 89-90, 178-185)" },
        { TN("{}"), NULL, 0xFF, 0x801, "profiler_level Level0, aic_metrics AiCoreNone by default (CC 261-263)" },
        { TN("{\"profiler_level\": \"Level_none\"}"), NULL, 0xFF, 0x80,
          "Level_none is 0 (profiler_mgr.h:14); mstx forced on (EC 205-210), so MSPROFTX (PM 142-144)" },
        { TN("{\"profiler_level\": \"Level0\"}"), NULL, 0xFF, 0x801, "Level0 (profiler_mgr.h:15)" },
        { TN("{\"profiler_level\": \"Level1\"}"), NULL, 0xFF, 0x27, "Level1 (profiler_mgr.h:16), no metric (CC 263)" },
        { TN("{\"profiler_level\": \"Level2\"}"), NULL, 0xFF, 0x12f, "Level2 (profiler_mgr.h:17)" },
        { TN("{\"profiler_level\": \"Level0\", \"aic_metrics\": \"PipeUtilization\"}"), NULL, 0xFF, 0x801,
          "no metric at Level0 (EC 178-185)" },
        { TN("{\"profiler_level\": \"Level_none\", \"aic_metrics\": \"L2Cache\"}"), NULL, 0xFF, 0x80,
          "no metric at Level_none (EC 178-185)" },
        { TN("{\"profiler_level\": \"Level1\", \"aic_metrics\": \"PipeUtilization\"}"), NULL, 1, 0x27,
          "the metric and its bit (PM 22-32, 135-138)" },
        { TN("{\"profiler_level\": \"Level1\", \"aic_metrics\": \"ArithmeticUtilization\"}"), NULL, 0, 0x27, "PM 24" },
        { TN("{\"profiler_level\": \"Level2\", \"aic_metrics\": \"Memory\"}"), NULL, 2, 0x12f, "PM 25" },
        { TN("{\"profiler_level\": \"Level2\", \"aic_metrics\": \"MemoryL0\"}"), NULL, 3, 0x12f, "PM 26" },
        { TN("{\"profiler_level\": \"Level2\", \"aic_metrics\": \"ResourceConflictRatio\"}"), NULL, 4, 0x12f, "PM 27" },
        { TN("{\"profiler_level\": \"Level2\", \"aic_metrics\": \"MemoryUB\"}"), NULL, 5, 0x12f, "PM 28" },
        { TN("{\"profiler_level\": \"Level2\", \"aic_metrics\": \"L2Cache\"}"), NULL, 6, 0x12f, "PM 29" },
        { TN("{\"profiler_level\": \"Level1\", \"aic_metrics\": \"MemoryAccess\"}"), NULL, 8, 0x27,
          "MemoryAccess where CANN reports it (PM 46-58; V2 on Ascend910B)" },
        { TN("{\"profiler_level\": \"Level1\", \"aic_metrics\": \"MemoryAccess\"}"), "Ascend910", 1, 0x27,
          "MemoryAccess unsupported: PipeUtilization at Level1 and above (PM 46-58), its bit kept (PM 136-138)" },
        { TN("{\"profiler_level\": \"Level1\", \"aic_metrics\": \"AiCoreNone\"}"), NULL, 0xFF, 0x27,
          "AiCoreNone adds no bit, Level1 has it already (PM 136)" },
        { TN("{\"l2_cache\": true}"), NULL, 0xFF, 0x811, "PM 139-141" },
        { TN("{\"msprof_tx\": true}"), NULL, 0xFF, 0x881, "msprof_tx (EC 130; PM 142-144)" },
        { TN("{\"mstx\": true}"), NULL, 0xFF, 0x881, "mstx (EC 130; PM 142-144)" },
        { TN("{\"msprof_tx\": true, \"mstx\": false}"), NULL, 0xFF, 0x881, "msprof_tx or mstx (EC 130)" },
        { TN("{\"op_attr\": true, \"export_type\": \"db\"}"), NULL, 0xFF, 0x4801,
          "OP_ATTR where CANN reports ATTR (PM 155-157, 378-384)" },
        { TN("{\"op_attr\": true, \"export_type\": [\"text\", \"db\"]}"), NULL, 0xFF, 0x4801, "EC 263" },
        { TN("{\"op_attr\": true}"), NULL, 0xFF, 0x801, "op_attr is dropped with the text export (EC 263-265)" },
        { TN("{\"profiler_level\": \"Level2\", \"l2_cache\": true, \"mstx\": true}"), NULL, 0xFF, 0x1bf,
          "Level2 | L2CACHE | MSPROFTX" },
        { "{\"start_step\": 10, \"record_shapes\": true}", NULL, 0xFF, 0x800000801ULL,
          "AICORE_SHAPE at Level0 where CANN reports it (PM 158-164)" },
        { "{\"start_step\": 10, \"record_shapes\": true, \"experimental_config\": {\"profiler_level\": \"Level1\"}}",
          NULL, 0xFF, 0x27, "AICORE_SHAPE only at Level0 (PM 158)" },
        { "{\"start_step\": 10, \"with_stack\": true, \"with_flops\": true, \"with_modules\": true}", NULL, 0xFF,
          0x801, "the framework's switches are not CANN's" },
        /* MindSpore's dialect, the same settings as torch_npu would take them */
        { MS("\"profiler_level\": 0"), NULL, 0xFF, 0x801, "Level0" },
        { MS("\"profiler_level\": 1"), NULL, 0xFF, 0x27, "Level1, aicore_metrics -1 by default" },
        { MS("\"profiler_level\": 2"), NULL, 0xFF, 0x12f, "Level2" },
        { MS("\"profiler_level\": -1"), NULL, 0xFF, 0x80, "Level_none: MSPROFTX (EC 205-210)" },
        { MS("\"profiler_level\": 1, \"aicore_metrics\": 0"), NULL, 1, 0x27, "PipeUtilization" },
        { MS("\"profiler_level\": 1, \"aicore_metrics\": 1"), NULL, 0, 0x27, "ArithmeticUtilization" },
        { MS("\"profiler_level\": 2, \"aicore_metrics\": 2"), NULL, 2, 0x12f, "Memory" },
        { MS("\"profiler_level\": 2, \"aicore_metrics\": 3"), NULL, 3, 0x12f, "MemoryL0" },
        { MS("\"profiler_level\": 2, \"aicore_metrics\": 4"), NULL, 5, 0x12f, "MemoryUB" },
        { MS("\"profiler_level\": 2, \"aicore_metrics\": 5"), NULL, 4, 0x12f, "ResourceConflictRatio" },
        { MS("\"profiler_level\": 2, \"aicore_metrics\": 6"), NULL, 6, 0x12f, "L2Cache" },
        { MS("\"profiler_level\": 0, \"aicore_metrics\": 0"), NULL, 0xFF, 0x801, "no metric at Level0 (EC 178-185)" },
        { MS("\"profiler_level\": 0, \"mstx\": true, \"l2_cache\": true"), NULL, 0xFF, 0x891, "MSPROFTX | L2CACHE" },
        { MS("\"profiler_level\": 0, \"profile_memory\": true"), NULL, 0xFF, 0x1801, "TASK_MEMORY (PM 145-146)" },
        /* npuprof's own dialect */
        { NV("\"level\": \"Level0\""), NULL, 0xFF, 0x801, "Level0" },
        { NV("\"level\": \"Level1\""), NULL, 1, 0x27, "a native file keeps torch's PipeUtilization default above Level0" },
        { NV("\"level\": \"Level2\", \"aic_metrics\": \"MemoryAccess\""), "Ascend910", 1, 0x12f,
          "MemoryAccess unsupported: PipeUtilization (PM 46-58)" },
        { NV("\"level\": \"Level0\", \"aic_metrics\": \"MemoryUB\""), NULL, 0xFF, 0x801, "no metric at Level0" },
        { NV("\"level\": -1"), NULL, 0xFF, 0x80, "Level_none: MSPROFTX" },
        { NV("\"level\": \"Level0\", \"op_attr\": true, \"export_type\": [\"db\"]"), NULL, 0xFF, 0x4801, "OP_ATTR" },
        { NV("\"level\": \"Level0\", \"record_shapes\": true"), NULL, 0xFF, 0x800000801ULL, "AICORE_SHAPE" },
        { NV("\"level\": \"Level0\", \"profile_memory\": true, \"l2_cache\": true, \"mstx\": true"), NULL, 0xFF,
          0x1891, "TASK_MEMORY | L2CACHE | MSPROFTX" },
};

#undef TN
#undef MS
#undef NV

/* The aclprofCreateConfig line of the window @row's file opens. */
static void mask_row_check(fixture_t *f, const mask_row_t *row)
{
        npf_shm_config_t c;
        npf_conf_report_t report;
        char want[512], *got, *line, *end;

        if (npf_conf_parse(row->json, strlen(row->json), &c, &report) < 0)
                fail_msg("%s: not a valid file: %s", row->json, report.errors[0].message);
        f->args = c.args;
        f->args.activities |= NPF_ACT_NPU;
        if (row->soc)
                setenv("NPF_ACL_STUB_SOC", row->soc, 1);
        else
                unsetenv("NPF_ACL_STUB_SOC");
        clear_log(f);
        run_window(f);
        snprintf(want, sizeof(want), "aclprofCreateConfig devices=[0] count=1 metrics=%d events=NULL mask=0x%llx ->",
                 row->metric, row->mask);
        got = calls(f);
        line = strstr(got, "aclprofCreateConfig");
        assert_non_null(line);
        end = strchr(line, '>');
        assert_non_null(end);
        end[1] = '\0';
        if (strcmp(line, want) != 0)
                fail_msg("%s on %s (%s):\n  got  %s\n  want %s", row->json, row->soc ? row->soc : "Ascend910B",
                         row->why, line, want);
        free(got);
        json_object_clear(f->win.runtime);
}

static void test_mask_table(void **state)
{
        fixture_t *f = *state;

        for (size_t i = 0; i < sizeof(mask_rows) / sizeof(mask_rows[0]); i++)
                mask_row_check(f, &mask_rows[i]);
}

static void test_unknown_level_refused(void **state)
{
        fixture_t *f = *state;

        f->args.level = 3;
        open_fails(f, -EINVAL, "unknown profiler level 3");
        assert_no_calls(f);
}

static void test_unknown_metric_refused(void **state)
{
        fixture_t *f = *state;

        f->args.aic_metrics = 8;
        open_fails(f, -EINVAL, "unknown AI Core metric 8");
        assert_no_calls(f);
}

/* --- what the manifest says ----------------------------------------------------------- */

static void test_runtime_says_what_was_asked(void **state)
{
        fixture_t *f = *state;

        f->args.level = NPF_LEVEL_1;
        f->args.aic_metrics = NPF_AIC_MEMORY_ACCESS;
        run_window(f);
        assert_runtime(f, "{\"aic_metrics\":\"ACL_AICORE_MEMORY_ACCESS\",\"data_types\":\"0x27\",\"device\":0,"
                       "\"device_from\":\"aclrtGetDevice\",\"features\":[\"ATTR\",\"MemoryAccess\",\"AICORE_SHAPE\"]}");
}

static void test_runtime_says_what_was_dropped(void **state)
{
        fixture_t *f = *state;

        setenv("NPF_ACL_STUB_SOC", "Ascend910", 1);
        f->args.level = NPF_LEVEL_2;
        f->args.aic_metrics = NPF_AIC_MEMORY_ACCESS;
        f->args.flags = NPF_FLAG_OP_ATTR;
        run_window(f);
        assert_runtime(f, "{\"aic_metrics\":\"ACL_AICORE_PIPE_UTILIZATION\",\"data_types\":\"0x12f\",\"device\":0,"
                       "\"device_from\":\"aclrtGetDevice\",\"dropped\":["
                       "{\"setting\":\"op_attr\",\"why\":\"op_attr needs export_type db, as torch_npu\"},"
                       "{\"setting\":\"aic_metrics\",\"why\":\"CANN does not report the MemoryAccess feature: "
                       "PipeUtilization instead\"}],\"features\":[\"ATTR\",\"AICORE_SHAPE\"]}");
}

/* --- samplers: what CANN refuses costs its data, not the window ------------------------ */

static void test_samplers_in_torch_npus_order(void **state)
{
        fixture_t *f = *state;

        f->args.flags = NPF_FLAG_PROFILE_MEMORY | NPF_FLAG_SYS_IO | NPF_FLAG_SYS_INTERCONNECTION;
        f->args.host_sys = NPF_HOST_SYS_CPU | NPF_HOST_SYS_MEM | NPF_HOST_SYS_OSRT | NPF_HOST_SYS_NUMA;
        run_window(f);
        /* profiler_mgr.cpp:145-153 hardware memory, then host_sys, then 186-203 I/O and interconnect. */
        assert_calls(f,
                     L_INIT L_FEAT
                     "aclprofSetConfig type=3 value=50 length=2 -> 0\n"
                     "aclprofSetConfig type=8 value=cpu,mem,osrt,numa length=17 -> 0\n"
                     "aclprofSetConfig type=5 value=100 length=3 -> 0\n"
                     "aclprofSetConfig type=6 value=50 length=2 -> 0\n"
                     L_DEV0 L_CREATE("0x1801") L_START L_CLOSE,
                     f->dir, strlen(f->dir));
        assert_null(json_object_get(f->win.runtime, "refused"));
}

static void test_device_without_io_sampler(void **state)
{
        fixture_t *f = *state;

        /* An Ascend310P has no NIC or RoCE sampler: CANN says 100010, the window goes on. */
        setenv("NPF_ACL_STUB_SOC", "Ascend310P", 1);
        f->args.flags = NPF_FLAG_SYS_IO | NPF_FLAG_SYS_INTERCONNECTION;
        run_window(f);
        assert_calls(f,
                     L_INIT "aclprofGetSupportedFeaturesV2 -> 0 (2 features)\n"
                     "aclprofSetConfig type=5 value=100 length=3 -> 100010\n"
                     "aclprofSetConfig type=6 value=50 length=2 -> 0\n"
                     L_DEV0 L_CREATE("0x801") L_START L_CLOSE,
                     f->dir, strlen(f->dir));
        assert_json(json_object_get(f->win.runtime, "refused"),
                    "[{\"call\":\"aclprofSetConfig\",\"code\":100010,\"name\":\"ACL_ERROR_INVALID_PROFILING_CONFIG\","
                    "\"setting\":\"sys_io\",\"what\":\"this device or CANN does not take this profiling setting\"}]");
}

static void test_device_without_interconnect_sampler(void **state)
{
        fixture_t *f = *state;
        json_t *refused;

        setenv("NPF_ACL_STUB_SOC", "Ascend310B", 1);
        f->args.flags = NPF_FLAG_SYS_IO | NPF_FLAG_SYS_INTERCONNECTION;
        run_window(f);
        refused = json_object_get(f->win.runtime, "refused");
        assert_int_equal(json_array_size(refused), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(refused, 0), "setting")),
                            "sys_interconnection");
        assert_int_equal(json_integer_value(json_object_get(json_array_get(refused, 0), "code")), 100010);
}

static void test_any_set_config_error_is_carried_on(void **state)
{
        fixture_t *f = *state;
        static const int codes[] = { 100000, 100010, 200006, 500005 };

        /* torch_npu logs what aclprofSetConfig returns and carries on, whatever it is. */
        f->args.flags = NPF_FLAG_PROFILE_MEMORY;
        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
                char fail[64];
                json_t *r;

                snprintf(fail, sizeof(fail), "aclprofSetConfig:%d", codes[i]);
                setenv("NPF_ACL_STUB_FAIL", fail, 1);
                json_object_clear(f->win.runtime);
                run_window(f);
                r = json_array_get(json_object_get(f->win.runtime, "refused"), 0);
                assert_string_equal(json_string_value(json_object_get(r, "setting")), "profile_memory");
                assert_int_equal(json_integer_value(json_object_get(r, "code")), codes[i]);
                assert_string_equal(json_string_value(json_object_get(r, "name")), npf__acl_code_name(codes[i]));
        }
}

static void test_helper_host_refuses_profiling(void **state)
{
        fixture_t *f = *state;

        /* On a helper host CANN refuses the session itself (msprofiler_acl_api.cpp:129-133). */
        setenv("NPF_ACL_STUB_SOC", "helper", 1);
        open_fails(f, -ENOTSUP, "aclprofInit failed: 200006 ACL_ERROR_FEATURE_UNSUPPORTED "
                   "(not supported here (a helper host?))");
        assert_calls(f, "aclprofInit path=%s length=%zu -> 200006\n", f->dir, strlen(f->dir));
}

static void test_cann_without_set_config(void **state)
{
        fixture_t *f = *state;

        /* An older CANN: no aclprofSetConfig, no feature list, no synchronize with a timeout. */
        setenv("NPUPROF_ACL_LIB", f->old_stub, 1);
        setenv("NPUPROF_MSPROFILER_LIB", f->old_msprof, 1);
        f->args.flags = NPF_FLAG_PROFILE_MEMORY | NPF_FLAG_SYS_IO | NPF_FLAG_OP_ATTR | NPF_FLAG_RECORD_SHAPES;
        f->args.export_type = NPF_EXPORT_DB;
        run_window(f);
        assert_calls(f,
                     L_INIT L_DEV0 L_CREATE("0x1801") L_START
                     "aclrtSynchronizeDevice -> 0\n"
                     "aclprofStop config#C -> 0\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 0\n",
                     f->dir, strlen(f->dir));
        assert_runtime(f, "{\"aic_metrics\":\"ACL_AICORE_NONE\",\"data_types\":\"0x1801\",\"device\":0,"
                       "\"device_from\":\"aclrtGetDevice\",\"dropped\":["
                       "{\"setting\":\"record_shapes\",\"why\":\"CANN does not report the AICORE_SHAPE feature\"},"
                       "{\"setting\":\"op_attr\",\"why\":\"CANN does not report the ATTR feature\"}],"
                       "\"features\":null,\"refused\":["
                       "{\"call\":\"aclprofSetConfig\",\"code\":null,\"name\":null,\"setting\":\"profile_memory\","
                       "\"what\":\"this CANN has no aclprofSetConfig\"},"
                       "{\"call\":\"aclprofSetConfig\",\"code\":null,\"name\":null,\"setting\":\"sys_io\","
                       "\"what\":\"this CANN has no aclprofSetConfig\"}]}");
}

static void test_calls_found_through_libascendcl(void **state)
{
        fixture_t *f = *state;

        /* With NPUPROF_MSPROFILER_LIB="", libascendcl.so's dependency answers. */
        setenv("NPUPROF_MSPROFILER_LIB", "", 1);
        f->args.flags = NPF_FLAG_RECORD_SHAPES | NPF_FLAG_PROFILE_MEMORY;
        run_window(f);
        assert_calls(f,
                     L_INIT L_FEAT
                     "aclprofSetConfig type=3 value=50 length=2 -> 0\n"
                     L_DEV0 L_CREATE("0x800001801") L_START L_CLOSE,
                     f->dir, strlen(f->dir));
}

/* --- the device ------------------------------------------------------------------------- */

static void test_device_the_runtime_has_set(void **state)
{
        fixture_t *f = *state;

        setenv("NPF_ACL_STUB_SET_DEVICE", "3", 1);
        f->win.local_device = 5;        /* LOCAL_RANK says otherwise: the runtime knows */
        run_window(f);
        assert_window(f, 3, 0xFF, 0x801);
}

/* No device set in the thread: aclrtGetDevice says ACL_ERROR_RT_CONTEXT_NULL. */
static void device_from_local(fixture_t *f, const char *visible, int32_t local, unsigned want, const char *from)
{
        unsetenv("NPF_ACL_STUB_SET_DEVICE");
        if (visible)
                setenv("ASCEND_RT_VISIBLE_DEVICES", visible, 1);
        else
                unsetenv("ASCEND_RT_VISIBLE_DEVICES");
        f->win.local_device = local;
        clear_log(f);
        json_object_clear(f->win.runtime);
        open_ok(f);
        close_ok(f);
        assert_int_equal(json_integer_value(json_object_get(f->win.runtime, "device")), want);
        assert_string_equal(json_string_value(json_object_get(f->win.runtime, "device_from")), from);
}

static void test_device_from_local_rank(void **state)
{
        fixture_t *f = *state;
        char *got;

        device_from_local(f, NULL, 5, 5, "local device");
        got = calls(f);
        assert_non_null(strstr(got, "aclrtGetDevice -> 107002\n"));
        assert_non_null(strstr(got, "aclprofCreateConfig devices=[5] "));
        /* Without a device CANN cannot synchronize: noted, the window goes on. */
        assert_non_null(strstr(got, "aclrtSynchronizeDeviceWithTimeout timeout=-1 -> 107002\n"));
        free(got);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(
                json_object_get(f->win.runtime, "refused"), 0), "code")), 107002);

        device_from_local(f, NULL, -1, 0, "default");
        device_from_local(f, "4,5,6,7", 1, 1, "local device");
        device_from_local(f, "6", 6, 0, "local device in ASCEND_RT_VISIBLE_DEVICES");
        device_from_local(f, "2,6", 6, 1, "local device in ASCEND_RT_VISIBLE_DEVICES");
}

static void test_device_not_visible_fails(void **state)
{
        fixture_t *f = *state;

        unsetenv("NPF_ACL_STUB_SET_DEVICE");
        setenv("ASCEND_RT_VISIBLE_DEVICES", "0,1", 1);
        f->win.local_device = 5;
        open_fails(f, -EINVAL, "the local device 5 is not one of the 2 devices ASCEND_RT_VISIBLE_DEVICES=0,1 "
                   "makes visible");
        assert_calls(f, L_INIT L_FEAT "aclrtGetDevice -> 107002\naclprofFinalize -> 0\n", f->dir, strlen(f->dir));
}

static void test_device_the_driver_lacks(void **state)
{
        fixture_t *f = *state;

        /* CANN checks the id against the driver's device count (prof_acl_api.cpp:84-120). */
        setenv("NPF_ACL_STUB_SET_DEVICE", "9", 1);
        open_fails(f, -EINVAL, "aclprofCreateConfig failed: it returned no configuration for device 9, "
                   "AI Core metric ACL_AICORE_NONE, data types 0x801");
}

/* --- activities ------------------------------------------------------------------------- */

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
        run_window(f);
        assert_window(f, 0, 0xFF, 0x801);
}

/* --- the window's life ---------------------------------------------------------------- */

static void test_open_starts_and_steps_call_nothing(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        assert_int_equal(npf_backend_acl.window_step(f->state, 11, f->err), 0);
        assert_calls(f, L_INIT L_FEAT L_DEV0 L_CREATE("0x801") L_START, f->dir, strlen(f->dir));
        close_ok(f);
}

static void test_synchronize_before_stop(void **state)
{
        fixture_t *f = *state;
        char *got, *sync, *stop;

        open_ok(f);
        got = calls(f);
        assert_null(strstr(got, "Synchronize"));
        free(got);
        close_ok(f);
        /* The device's last work is in the window: synchronize, then stop (profiler_interface.py:165-170). */
        got = calls(f);
        sync = strstr(got, "aclrtSynchronizeDeviceWithTimeout timeout=-1 -> 0\n");
        stop = strstr(got, "aclprofStop ");
        assert_non_null(sync);
        assert_non_null(stop);
        assert_true(sync < stop);
        free(got);
}

static void test_synchronize_timeout_as_torch_npu(void **state)
{
        fixture_t *f = *state;
        char *got;

        /* ACL_DEVICE_SYNC_TIMEOUT, in seconds, as torch_npu reads it (OptionsManager.cpp:211-221). */
        setenv("ACL_DEVICE_SYNC_TIMEOUT", "30", 1);
        run_window(f);
        unsetenv("ACL_DEVICE_SYNC_TIMEOUT");
        got = calls(f);
        assert_non_null(strstr(got, "aclrtSynchronizeDeviceWithTimeout timeout=30000 -> 0\n"));
        free(got);
}

static void test_cut_short_window_closes_alike(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        assert_int_equal(npf_backend_acl.window_close(f->state, 10, false, f->err), 0);
        assert_window(f, 0, 0xFF, 0x801);
}

static void test_each_window_inits_and_finalizes(void **state)
{
        fixture_t *f = *state;

        run_window(f);
        f->win.dir = f->dir2;
        run_window(f);
        assert_calls(f,
                     L_INIT L_FEAT L_DEV0 L_CREATE("0x801") L_START L_CLOSE
                     L_INIT L_FEAT L_DEV0
                     "aclprofCreateConfig devices=[0] count=1 metrics=255 events=NULL mask=0x801 -> config#D\n"
                     "aclprofStart config#D -> 0\n"
                     "aclrtSynchronizeDeviceWithTimeout timeout=-1 -> 0\n"
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
        assert_window(f, 0, 0xFF, 0x801);
}

static void test_shutdown_finalizes_open_window(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        npf_backend_acl.shutdown();
        assert_window(f, 0, 0xFF, 0x801);
        /* Closing it afterwards only frees it. */
        close_ok(f);
        assert_window(f, 0, 0xFF, 0x801);
}

static void test_shutdown_without_window_calls_nothing(void **state)
{
        fixture_t *f = *state;

        npf_backend_acl.shutdown();
        run_window(f);
        npf_backend_acl.shutdown();
        assert_window(f, 0, 0xFF, 0x801);
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

/* --- the stand-in answers as CANN does ------------------------------------------------ */

static void test_cann_refuses_a_second_init(void **state)
{
        fixture_t *f = *state;
        void *cann = dlopen(f->stub, RTLD_NOW | RTLD_LOCAL);
        int (*init)(const char *, size_t), (*finalize)(void);

        /* The framework's own profiler holds CANN's session: CANN refuses a second one. */
        assert_non_null(cann);
        init = (int (*)(const char *, size_t)) dlsym(cann, "aclprofInit");
        finalize = (int (*)(void)) dlsym(cann, "aclprofFinalize");
        assert_non_null(init);
        assert_non_null(finalize);
        assert_int_equal(init(f->dir2, strlen(f->dir2)), 0);
        clear_log(f);
        open_fails(f, -EBUSY, "aclprofInit failed: 100002 ACL_ERROR_REPEAT_INITIALIZE (profiling is already "
                   "initialised in this process, by the framework's own profiler?)");
        assert_calls(f, "aclprofInit path=%s length=%zu -> 100002\n", f->dir, strlen(f->dir));
        assert_int_equal(finalize(), 0);
        dlclose(cann);
        run_window(f);
}

/* CANN's own answers, which the backend relies on the stand-in to give. */
static void test_cann_answers_as_cann(void **state)
{
        fixture_t *f = *state;
        void *cann = dlopen(f->stub, RTLD_NOW | RTLD_LOCAL);
        __typeof__(aclprofSetConfig) *set_config;
        __typeof__(aclprofCreateConfig) *create_config;
        __typeof__(aclprofStart) *start;
        __typeof__(aclprofDestroyConfig) *destroy_config;
        uint32_t device = 0;
        aclprofConfig *c;

        assert_non_null(cann);
        set_config = (__typeof__(aclprofSetConfig) *) dlsym(cann, "aclprofSetConfig");
        create_config = (__typeof__(aclprofCreateConfig) *) dlsym(cann, "aclprofCreateConfig");
        start = (__typeof__(aclprofStart) *) dlsym(cann, "aclprofStart");
        destroy_config = (__typeof__(aclprofDestroyConfig) *) dlsym(cann, "aclprofDestroyConfig");
        assert_true(set_config && create_config && start && destroy_config);
        /* Bad input is 100000; a value out of range or an unknown host item is 100010. */
        assert_int_equal(set_config(ACL_PROF_ARGS_MIN, "1", 1), ACL_ERROR_INVALID_PARAM);
        assert_int_equal(set_config(ACL_PROF_SYS_IO_FREQ, "100", 2), ACL_ERROR_INVALID_PARAM);
        assert_int_equal(set_config(ACL_PROF_SYS_IO_FREQ, "101", 3), ACL_ERROR_INVALID_PROFILING_CONFIG);
        assert_int_equal(set_config(ACL_PROF_HOST_SYS, "cpu,gpu", 7), ACL_ERROR_INVALID_PROFILING_CONFIG);
        assert_int_equal(set_config(ACL_PROF_HOST_SYS, "cpu,numa", 8), ACL_SUCCESS);
        /* A data-type bit outside PROF_SWITCH_SUPPORT is refused at the start: 200007. */
        c = create_config(&device, 1, ACL_AICORE_NONE, NULL, 0x400);
        assert_non_null(c);
        assert_int_equal(start(c), ACL_ERROR_PROF_MODULES_UNSUPPORTED);
        assert_int_equal(destroy_config(c), ACL_SUCCESS);
        /* A device the driver does not have makes no configuration. */
        device = 8;
        assert_null(create_config(&device, 1, ACL_AICORE_NONE, NULL, 0x801));
        dlclose(cann);
}

/* --- injected failures ----------------------------------------------------------------- */

static void test_init_failure_stops_everything(void **state)
{
        fixture_t *f = *state;

        setenv("NPF_ACL_STUB_FAIL", "aclprofInit:100000", 1);
        open_fails(f, -EINVAL, "aclprofInit failed: 100000 ACL_ERROR_INVALID_PARAM (a parameter is invalid)");
        assert_calls(f, "aclprofInit path=%s length=%zu -> 100000\n", f->dir, strlen(f->dir));
}

static void test_create_config_failure_finalizes(void **state)
{
        fixture_t *f = *state;

        f->args.level = NPF_LEVEL_1;
        setenv("NPF_ACL_STUB_SET_DEVICE", "2", 1);
        setenv("NPF_ACL_STUB_FAIL", "aclprofCreateConfig:1", 1);
        open_fails(f, -EINVAL, "aclprofCreateConfig failed: it returned no configuration for device 2, "
                   "AI Core metric ACL_AICORE_NONE, data types 0x27");
        assert_calls(f,
                     L_INIT L_FEAT
                     "aclrtGetDevice -> 0 (device 2)\n"
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
                     L_INIT L_FEAT L_DEV0 L_CREATE("0x801")
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
                     L_INIT L_FEAT L_DEV0 L_CREATE("0x801")
                     "aclprofStart config#C -> 148047\n"
                     "aclprofDestroyConfig config#C -> 0\n"
                     "aclprofFinalize -> 500001\n",
                     f->dir, strlen(f->dir));
}

static void test_synchronize_failure_is_noted(void **state)
{
        fixture_t *f = *state;

        open_ok(f);
        setenv("NPF_ACL_STUB_FAIL", "aclrtSynchronizeDeviceWithTimeout:507046", 1);
        close_ok(f);
        assert_json(json_object_get(f->win.runtime, "refused"),
                    "[{\"call\":\"aclrtSynchronizeDeviceWithTimeout\",\"code\":507046,"
                    "\"name\":\"ACL_ERROR_RT_STREAM_SYNC_TIMEOUT\",\"setting\":\"synchronize\","
                    "\"what\":\"the device did not finish its work in time\"}]");
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
                     L_INIT L_FEAT L_DEV0 L_CREATE("0x801") L_START
                     "aclrtSynchronizeDeviceWithTimeout timeout=-1 -> 0\n"
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
                     L_INIT L_FEAT L_DEV0 L_CREATE("0x801") L_START
                     "aclrtSynchronizeDeviceWithTimeout timeout=-1 -> 0\n"
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
                T(test_error_codes_are_canns),
                T(test_probe_loads_the_runtime_without_calls),
                T(test_probe_missing_library_names_path),
                T(test_open_missing_library_fails_without_calls),
                T(test_default_library_name),
                T(test_missing_symbol_is_named),
                T(test_explicit_msprofiler_must_load),
                T(test_mask_table),
                T(test_unknown_level_refused),
                T(test_unknown_metric_refused),
                T(test_runtime_says_what_was_asked),
                T(test_runtime_says_what_was_dropped),
                T(test_samplers_in_torch_npus_order),
                T(test_device_without_io_sampler),
                T(test_device_without_interconnect_sampler),
                T(test_any_set_config_error_is_carried_on),
                T(test_helper_host_refuses_profiling),
                T(test_cann_without_set_config),
                T(test_calls_found_through_libascendcl),
                T(test_device_the_runtime_has_set),
                T(test_device_from_local_rank),
                T(test_device_not_visible_fails),
                T(test_device_the_driver_lacks),
                T(test_cpu_only_activities_refused),
                T(test_npu_only_activities),
                T(test_open_starts_and_steps_call_nothing),
                T(test_synchronize_before_stop),
                T(test_synchronize_timeout_as_torch_npu),
                T(test_cut_short_window_closes_alike),
                T(test_each_window_inits_and_finalizes),
                T(test_second_open_window_refused),
                T(test_shutdown_finalizes_open_window),
                T(test_shutdown_without_window_calls_nothing),
                T(test_shutdown_failure_reported_by_close),
                T(test_cann_refuses_a_second_init),
                T(test_cann_answers_as_cann),
                T(test_init_failure_stops_everything),
                T(test_create_config_failure_finalizes),
                T(test_start_failure_destroys_and_finalizes),
                T(test_start_failure_keeps_first_error),
                T(test_synchronize_failure_is_noted),
                T(test_stop_failure_still_destroys_and_finalizes),
                T(test_destroy_failure_still_finalizes),
                T(test_finalize_failure_reported),
                T(test_close_reports_every_failure),
                T(test_unknown_code_is_still_readable),
        };
#undef T
        return cmocka_run_group_tests_name("backend-acl", tests, NULL, NULL);
}
