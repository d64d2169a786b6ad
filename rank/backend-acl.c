/* SPDX-License-Identifier: MIT */
/*
 * The ACL backend: CANN's profiling API (aclprof*), loaded with dlopen() so that libnpuprof
 * neither links against nor needs CANN where there is none. It drives CANN as torch_npu
 * does for the same settings (Ascend/pytorch 9e73e708, torch_npu/csrc/profiler/
 * profiler_mgr.cpp, feature_mgr.cpp, npu_profiler.cpp and the Python of torch_npu/profiler), so a
 * file gives the same data-type mask, AI Core metric and samplers under npuprof as under
 * torch_npu's own dynamic_profile.
 *
 * A window is one CANN profiling session:
 *
 *   window_open    aclprofInit(dir)
 *                  aclprofGetSupportedFeaturesV2 (or V1), when libmsprofiler.so has it
 *                  aclprofSetConfig(...) for each sampler asked for; a refusal costs its
 *                  data, not the window, and is recorded in the manifest
 *                  aclrtGetDevice (the device the process uses)
 *                  aclprofCreateConfig({device}, 1, metric, NULL, mask)  aclprofStart
 *   window_step    nothing: CANN collects on its own between Start and Stop
 *   window_close   aclrtSynchronizeDeviceWithTimeout (or aclrtSynchronizeDevice), so
 *                  the tail of the device's work is in the window; then aclprofStop,
 *                  aclprofDestroyConfig, aclprofFinalize
 *   shutdown       the window_close sequence, when a window is still open; else nothing
 *
 * aclprofFinalize() is called when each window closes: aclprofInit() binds the result
 * directory for the whole session, every window has a directory of its own, CANN refuses a
 * second aclprofInit() until the first session is finalized, and finalizing is what
 * flushes the collected data, which must be on disk before the rank writes the manifest.
 *
 * CANN's profiling state is process-wide, so at most one ACL window is open per process; a
 * second window_open() gets -EBUSY. shutdown() acts on that one window whichever rank handle
 * opened it: the rank library calls it once, when its last handle closes.
 *
 * Libraries: $NPUPROF_ACL_LIB, else "libascendcl.so", must provide the six aclprof* calls
 * of the sequence; aclrtGetDevice and aclrtSynchronizeDevice* are used where it has them.
 * aclprofSetConfig and aclprofGetSupportedFeatures* come from $NPUPROF_MSPROFILER_LIB,
 * else "libmsprofiler.so" when it loads, as torch_npu takes them
 * (torch_npu/csrc/framework/interface/MsProfilerInterface.cpp:10-20); aclprofSetConfig
 * also from the ACL library. Set NPUPROF_MSPROFILER_LIB to "" to skip libmsprofiler.so.
 * Both are opened RTLD_NODELETE: closing the handle after a window never unmaps a runtime
 * that has started threads.
 */
#include "rank/backend.h"
#include "rank/acl-api.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct acl_lib {
        void *acl;
        void *msprof;                   /* NULL when libmsprofiler.so is not used */
        __typeof__(aclprofInit) *init;
        __typeof__(aclprofCreateConfig) *create_config;
        __typeof__(aclprofStart) *start;
        __typeof__(aclprofStop) *stop;
        __typeof__(aclprofDestroyConfig) *destroy_config;
        __typeof__(aclprofFinalize) *finalize;
        /* Optional: NULL where this CANN lacks them. */
        __typeof__(aclprofSetConfig) *set_config;
        __typeof__(aclprofGetSupportedFeatures) *get_features;
        const char *get_features_name;
        __typeof__(aclrtGetDevice) *get_device;
        __typeof__(aclrtSynchronizeDeviceWithTimeout) *sync_timeout;
        __typeof__(aclrtSynchronizeDevice) *sync;
} acl_lib_t;

/* The features torch_npu asks CANN about (feature_mgr.cpp:12-21). */
enum {
        FEATURE_ATTR = 1u << 0,
        FEATURE_MEMORY_ACCESS = 1u << 1,
        FEATURE_AICORE_SHAPE = 1u << 2,
};

typedef struct acl_window {
        acl_lib_t lib;
        aclprofConfig *config;          /* NULL once destroyed */
        bool initialized;               /* aclprofInit succeeded, aclprofFinalize is owed */
        bool started;                   /* aclprofStart succeeded, aclprofStop is owed */
        json_t *runtime;                /* the manifest's "runtime", borrowed from the rank */
        int  shutdown_error;            /* what shutdown() met when it closed this window */
        char shutdown_msg[NPF_BACKEND_ERR_MAX];
} acl_window_t;

/* The one window CANN's process-wide profiling state allows, and the lock that guards it. */
static pthread_mutex_t acl_lock = PTHREAD_MUTEX_INITIALIZER;
static acl_window_t *acl_open_window;

typedef struct acl_code {
        int code;
        const char *name;
        const char *what;
} acl_code_t;

#define ACL_CODE_ENTRY(name, value, what) { (value), #name, (what) },
static const acl_code_t acl_codes[] = { NPF_ACL_ERRORS(ACL_CODE_ENTRY) };
#undef ACL_CODE_ENTRY

static void set_err(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(char *err, const char *fmt, ...)
{
        va_list ap;

        if (!err)
                return;
        va_start(ap, fmt);
        vsnprintf(err, NPF_BACKEND_ERR_MAX, fmt, ap);
        va_end(ap);
}

static const acl_code_t *acl_code_find(int code)
{
        for (size_t i = 0; i < sizeof(acl_codes) / sizeof(acl_codes[0]); i++)
                if (acl_codes[i].code == code)
                        return &acl_codes[i];
        return NULL;
}

/* CANN's name of @code ("ACL_ERROR_INVALID_PARAM"), or NULL for a code npuprof does not know. */
const char *npf__acl_code_name(int code);
const char *npf__acl_code_name(int code)
{
        const acl_code_t *c = acl_code_find(code);

        return c ? c->name : NULL;
}

#ifdef NPF_ACL_CANN_HEADERS
/* The first code of ours that is not CANN's value of its name, or NULL. */
const char *npf__acl_codes_check(void);
const char *npf__acl_codes_check(void)
{
#define ACL_CODE_CHECK(name, value, what) if ((name) != (value)) return #name;
        NPF_ACL_ERRORS(ACL_CODE_CHECK)
#undef ACL_CODE_CHECK
        return NULL;
}
#endif

/* The errno a failed ACL call becomes. */
static int acl_errno(int code)
{
        switch (code) {
        case ACL_ERROR_INVALID_PARAM: case ACL_ERROR_INVALID_PROFILING_CONFIG: case ACL_ERROR_INVALID_DEVICE:
        case ACL_ERROR_RT_INVALID_DEVICEID:
                return -EINVAL;
        case ACL_ERROR_REPEAT_INITIALIZE: case ACL_ERROR_PROF_ALREADY_RUN: case ACL_ERROR_PROF_API_CONFLICT:
                return -EBUSY;
        case ACL_ERROR_BAD_ALLOC:
                return -ENOMEM;
        case ACL_ERROR_API_NOT_SUPPORT: case ACL_ERROR_FEATURE_UNSUPPORTED: case ACL_ERROR_PROF_MODULES_UNSUPPORTED:
        case ACL_ERROR_COMPILING_STUB_MODE:
                return -ENOTSUP;
        case ACL_ERROR_STORAGE_OVER_LIMIT:
                return -ENOSPC;
        default:
                return -EIO;
        }
}

/* "aclprofStart failed: 100000 ACL_ERROR_INVALID_PARAM (a parameter is invalid)". */
static int acl_fail(char *err, const char *call, int code)
{
        const acl_code_t *c = acl_code_find(code);

        if (c)
                set_err(err, "%s failed: %d %s (%s)", call, code, c->name, c->what);
        else if (code >= 100000 && code < 200000)
                set_err(err, "%s failed: %d (unknown ACL error code: a parameter or usage error)", call, code);
        else if (code >= 200000 && code < 300000)
                set_err(err, "%s failed: %d (unknown ACL error code: a resource or support error)", call, code);
        else if (code >= 500000 && code < 600000)
                set_err(err, "%s failed: %d (unknown ACL error code: an internal error)", call, code);
        else
                set_err(err, "%s failed: %d (unknown ACL error code)", call, code);
        return acl_errno(code);
}

/* The AI Core metric names of acl_prof.h, for the manifest. */
static const char *metric_name(aclprofAicoreMetrics m)
{
#define METRIC_NAME(name, value) case name: return #name;
        switch (m) {
        NPF_ACL_AICORE_METRICS(METRIC_NAME)
        default:
                return "unknown";
        }
#undef METRIC_NAME
}

/* NPF_AIC_* to aclprofAicoreMetrics, as torch_npu's npu_metrics_map_ (profiler_mgr.cpp:22-32). */
static int aic_to_acl(int32_t aic, aclprofAicoreMetrics *ret_metric)
{
        aclprofAicoreMetrics m;

        switch (aic) {
        case NPF_AIC_NONE:                      m = ACL_AICORE_NONE; break;
        case NPF_AIC_PIPE_UTILIZATION:          m = ACL_AICORE_PIPE_UTILIZATION; break;
        case NPF_AIC_ARITHMETIC_UTILIZATION:    m = ACL_AICORE_ARITHMETIC_UTILIZATION; break;
        case NPF_AIC_MEMORY:                    m = ACL_AICORE_MEMORY_BANDWIDTH; break;
        case NPF_AIC_MEMORY_L0:                 m = ACL_AICORE_L0B_AND_WIDTH; break;
        case NPF_AIC_MEMORY_UB:                 m = ACL_AICORE_MEMORY_UB; break;
        case NPF_AIC_RESOURCE_CONFLICT_RATIO:   m = ACL_AICORE_RESOURCE_CONFLICT_RATIO; break;
        case NPF_AIC_L2_CACHE:                  m = ACL_AICORE_L2_CACHE; break;
        case NPF_AIC_MEMORY_ACCESS:             m = ACL_AICORE_MEMORY_ACCESS; break;
        default:
                return -EINVAL;
        }
        *ret_metric = m;
        return 0;
}

/* What torch_npu would send CANN for these settings. */
typedef struct acl_plan {
        uint64_t mask;
        aclprofAicoreMetrics metric;
        /* Settings asked for that are not sent: their name and why. */
        size_t n_dropped;
        struct { const char *setting, *why; } dropped[4];
} acl_plan_t;

static void plan_drop(acl_plan_t *p, const char *setting, const char *why)
{
        if (p->n_dropped < sizeof(p->dropped) / sizeof(p->dropped[0]))
                p->dropped[p->n_dropped++] = (__typeof__(p->dropped[0])) { setting, why };
}

/*
 * The data-type mask and AI Core metric, as torch_npu computes them: first the resets of
 * _ExperimentalConfig._check_params() (torch_npu/profiler/experimental_config.py), then
 * ProfilerMgr::PrepareProfilerConfig() and PrepareProfilerAicMetrics() (profiler_mgr.cpp).
 * @features are the FEATURE_* CANN reports.
 */
static int plan_of(const npf_shm_args_t *a, unsigned features, acl_plan_t *ret_plan)
{
        acl_plan_t p = { 0 };
        aclprofAicoreMetrics asked;
        bool tx = (a->flags & NPF_FLAG_MSTX) != 0;

        /* The levels (profiler_mgr.h:14-17). */
        switch (a->level) {
        case NPF_LEVEL_NONE:
                p.mask = 0;
                break;
        case NPF_LEVEL_0:
                p.mask = ACL_PROF_TASK_TIME_L0 | ACL_PROF_ACL_API;
                break;
        case NPF_LEVEL_1:
                p.mask = ACL_PROF_TASK_TIME | ACL_PROF_ACL_API | ACL_PROF_HCCL_TRACE | ACL_PROF_AICORE_METRICS;
                break;
        case NPF_LEVEL_2:
                p.mask = ACL_PROF_TASK_TIME | ACL_PROF_ACL_API | ACL_PROF_HCCL_TRACE | ACL_PROF_AICORE_METRICS |
                         ACL_PROF_RUNTIME_API | ACL_PROF_AICPU;
                break;
        default:
                return -EINVAL;
        }
        if (aic_to_acl(a->aic_metrics, &asked) < 0)
                return -EINVAL;

        /* No AI Core metric at Level0 and Level_none (experimental_config.py:178-185). */
        if (a->level <= NPF_LEVEL_0 && asked != ACL_AICORE_NONE) {
                plan_drop(&p, "aic_metrics", "no AI Core metric below Level1, as torch_npu");
                asked = ACL_AICORE_NONE;
        }
        /* Level_none collects mstx, asked for or not (experimental_config.py:205-210). */
        if (a->level == NPF_LEVEL_NONE)
                tx = true;
        /* op_attr only goes with the db export (experimental_config.py:263-265). */
        bool op_attr = (a->flags & NPF_FLAG_OP_ATTR) != 0;
        if (op_attr && !(a->export_type & NPF_EXPORT_DB)) {
                plan_drop(&p, "op_attr", "op_attr needs export_type db, as torch_npu");
                op_attr = false;
        }

        /* profiler_mgr.cpp:136-138: the metric's bit where one is asked for. */
        if (asked != ACL_AICORE_NONE)
                p.mask |= ACL_PROF_AICORE_METRICS;
        if (a->flags & NPF_FLAG_L2_CACHE)                       /* 139-141 */
                p.mask |= ACL_PROF_L2CACHE;
        if (tx)                                                 /* 142-144 */
                p.mask |= ACL_PROF_MSPROFTX;
        if (a->flags & NPF_FLAG_PROFILE_MEMORY)                 /* 145-146 */
                p.mask |= ACL_PROF_TASK_MEMORY;
        if (op_attr)                                            /* 155-157 */
                p.mask |= ACL_PROF_OP_ATTR;
        /* 158-164: operator shapes on the device at Level0, where CANN supports them. */
        if (a->level == NPF_LEVEL_0 && (a->flags & NPF_FLAG_RECORD_SHAPES)) {
                if (features & FEATURE_AICORE_SHAPE)
                        p.mask |= ACL_PROF_AICORE_SHAPE;
                else
                        plan_drop(&p, "record_shapes", "CANN does not report the AICORE_SHAPE feature");
        }
        /* 378-384: OP_ATTR only where CANN reports the ATTR feature. */
        if ((p.mask & ACL_PROF_OP_ATTR) && !(features & FEATURE_ATTR)) {
                p.mask &= ~ACL_PROF_OP_ATTR;
                plan_drop(&p, "op_attr", "CANN does not report the ATTR feature");
        }
        /* 46-58: MemoryAccess falls back to PipeUtilization where the device lacks it. */
        p.metric = asked;
        if (asked == ACL_AICORE_MEMORY_ACCESS && !(features & FEATURE_MEMORY_ACCESS)) {
                p.metric = ACL_AICORE_PIPE_UTILIZATION;
                plan_drop(&p, "aic_metrics", "CANN does not report the MemoryAccess feature: PipeUtilization instead");
        }
        *ret_plan = p;
        return 0;
}

/* The aclprofSetConfig() calls a window needs, in torch_npu's order and with its values. */
typedef struct set_config {
        aclprofConfigType type;
        const char *name;
        char value[64];
} set_config_t;

enum { SET_CONFIG_MAX = 4 };

static size_t set_configs_of(const npf_shm_args_t *a, set_config_t ret[SET_CONFIG_MAX])
{
        /* experimental_config.py:77-83, the HostSystem names. */
        static const struct { uint32_t bit; const char *name; } host[] = {
                { NPF_HOST_SYS_CPU, "cpu" }, { NPF_HOST_SYS_MEM, "mem" }, { NPF_HOST_SYS_DISK, "disk" },
                { NPF_HOST_SYS_NETWORK, "network" }, { NPF_HOST_SYS_OSRT, "osrt" }, { NPF_HOST_SYS_NUMA, "numa" },
        };
        size_t n = 0;

        if (a->flags & NPF_FLAG_PROFILE_MEMORY)                 /* profiler_mgr.cpp:145-152 */
                ret[n++] = (set_config_t) { ACL_PROF_SYS_HARDWARE_MEM_FREQ, "profile_memory", "50" };
        if (a->host_sys) {                                      /* 170-184: the names joined by "," */
                set_config_t *s = &ret[n++];

                *s = (set_config_t) { ACL_PROF_HOST_SYS, "host_sys", "" };
                for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
                        if (!(a->host_sys & host[i].bit))
                                continue;
                        if (s->value[0])
                                strcat(s->value, ",");
                        strcat(s->value, host[i].name);
                }
        }
        if (a->flags & NPF_FLAG_SYS_IO)                         /* 186-193 */
                ret[n++] = (set_config_t) { ACL_PROF_SYS_IO_FREQ, "sys_io", "100" };
        if (a->flags & NPF_FLAG_SYS_INTERCONNECTION)            /* 194-203 */
                ret[n++] = (set_config_t) { ACL_PROF_SYS_INTERCONNECTION_FREQ, "sys_interconnection", "50" };
        return n;
}

/*
 * A feature record of aclprofGetSupportedFeatures*: CANN's FeatureRecord, a C++ struct with
 * a virtual destructor, and so a vtable pointer, in it and in its FeatureInfo
 * (hicann/runtime src/dfx/msprof/collector/dvvp/common/config/feature_manager.h:24-64;
 * torch_npu reads the same layout, feature_mgr.h:25-64).
 */
typedef struct acl_feature_info {
        const void *vptr;
        char compatibility[16];
        char feature_version[16];
        char affected_component[16];
        char affected_component_version[16];
        char info_log[128];
} acl_feature_info_t;

typedef struct acl_feature_record {
        const void *vptr;
        char feature_name[64];
        acl_feature_info_t info;
} acl_feature_record_t;

_Static_assert(sizeof(void *) != 8 || sizeof(acl_feature_record_t) == 272, "CANN's FeatureRecord is 272 bytes");
_Static_assert(sizeof(void *) != 8 || offsetof(acl_feature_record_t, info) == 72, "FeatureRecord.info at 72");

/* A fixed-size field as a string, read no further than its size. */
static bool field_is(const char *field, size_t size, const char *want)
{
        size_t len = strlen(want);

        return len < size && strncmp(field, want, size) == 0;
}

static bool field_empty(const char *field)
{
        return field[0] == '\0';
}

/*
 * The FEATURE_* bits CANN reports, decided as torch_npu's FeatureMgr does: a record counts
 * when its component is "all" or "PTA" and its component version "all" or "master"
 * (feature_mgr.cpp:87-95), no field is empty (73-80), and its version is torch_npu's "1",
 * or a later one marked compatible (97-117). @ret_names lists the features found.
 */
static unsigned features_of(const acl_lib_t *lib, json_t *ret_names)
{
        static const struct { const char *name; unsigned bit; } known[] = {
                { "ATTR", FEATURE_ATTR }, { "MemoryAccess", FEATURE_MEMORY_ACCESS },
                { "AICORE_SHAPE", FEATURE_AICORE_SHAPE },
        };
        const acl_feature_record_t *r;
        size_t n = 0;
        void *data = NULL;
        unsigned bits = 0;

        if (!lib->get_features || lib->get_features(&n, &data) != ACL_SUCCESS || !data)
                return 0;
        r = data;
        for (size_t i = 0; i < n && i < 64; i++, r++) {
                const acl_feature_info_t *f = &r->info;

                if (!field_is(f->affected_component, sizeof(f->affected_component), "all") &&
                    !field_is(f->affected_component, sizeof(f->affected_component), "PTA"))
                        continue;
                if (!field_is(f->affected_component_version, sizeof(f->affected_component_version), "all") &&
                    !field_is(f->affected_component_version, sizeof(f->affected_component_version), "master"))
                        continue;
                if (field_empty(f->compatibility) || field_empty(f->feature_version) || field_empty(f->info_log))
                        continue;
                /* torch_npu compares the versions as strings against its own "1". */
                int cmp = strncmp("1", f->feature_version, sizeof(f->feature_version));
                if (cmp > 0 || (cmp < 0 && !field_is(f->compatibility, sizeof(f->compatibility), "1")))
                        continue;
                for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
                        if (!field_is(r->feature_name, sizeof(r->feature_name), known[k].name) ||
                            (bits & known[k].bit))
                                continue;
                        bits |= known[k].bit;
                        json_array_append_new(ret_names, json_string(known[k].name));
                }
        }
        return bits;
}

/*
 * The device to profile: the one the runtime has set for this thread (aclrtGetDevice, as
 * torch_npu's c10_npu::GetDevice, torch_npu/csrc/core/npu/NPUFunctions.cpp:196-221), else
 * the rank's local device as a logical id among $ASCEND_RT_VISIBLE_DEVICES, else 0.
 * Return: 0, or -EINVAL when the local device is not one the process can see.
 */
static int device_of(const acl_lib_t *lib, int32_t local, uint32_t *ret_device, const char **ret_from, char *err)
{
        const char *visible = getenv("ASCEND_RT_VISIBLE_DEVICES");
        int32_t d = -1;

        if (lib->get_device && lib->get_device(&d) == ACL_SUCCESS && d >= 0) {
                *ret_device = (uint32_t) d;
                *ret_from = "aclrtGetDevice";
                return 0;
        }
        if (local < 0) {
                *ret_device = 0;
                *ret_from = "default";
                return 0;
        }
        if (visible && *visible) {
                /* A local device below the count is already an index into the list (torchrun's
                 * set_device(LOCAL_RANK)); a physical id that is in the list is its index. */
                int32_t count = 0, index = -1;
                for (const char *s = visible; *s; ) {
                        char *end;
                        long v = strtol(s, &end, 10);
                        if (end == s)
                                break;
                        if (v == local && index < 0)
                                index = count;
                        count++;
                        s = *end == ',' ? end + 1 : end;
                        if (*end != ',')
                                break;
                }
                if (local < count) {
                        *ret_device = (uint32_t) local;
                        *ret_from = "local device";
                        return 0;
                }
                if (index >= 0) {
                        *ret_device = (uint32_t) index;
                        *ret_from = "local device in ASCEND_RT_VISIBLE_DEVICES";
                        return 0;
                }
                set_err(err, "the local device %" PRId32 " is not one of the %" PRId32
                        " devices ASCEND_RT_VISIBLE_DEVICES=%.64s makes visible", local, count, visible);
                return -EINVAL;
        }
        *ret_device = (uint32_t) local;
        *ret_from = "local device";
        return 0;
}

static void *lib_sym(void *handle, const char *path, const char *name, char *err)
{
        void *p;

        dlerror();
        p = dlsym(handle, name);
        if (!p)
                set_err(err, "%s has no %s: not a CANN runtime, or one too old for npuprof", path, name);
        return p;
}

static void *lib_optional(void *handle, const char *name)
{
        dlerror();
        return handle ? dlsym(handle, name) : NULL;
}

static void lib_unload(acl_lib_t *lib)
{
        if (lib->msprof)
                dlclose(lib->msprof);
        if (lib->acl)
                dlclose(lib->acl);
        *lib = (acl_lib_t) { 0 };
}

/* Load the ACL runtime and, when available, libmsprofiler.so; every required symbol or an error. */
static int lib_load(acl_lib_t *ret_lib, char *err)
{
        const int mode = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
        const char *path = getenv("NPUPROF_ACL_LIB");
        const char *mspath = getenv("NPUPROF_MSPROFILER_LIB");
        bool explicit_path = path && *path;
        acl_lib_t lib = { 0 };
        void *p;

        if (!explicit_path)
                path = "libascendcl.so";
        lib.acl = dlopen(path, mode);
        if (!lib.acl) {
                const char *why = dlerror();

                set_err(err, "cannot load the CANN runtime %s%s: %s", path,
                        explicit_path ? " ($NPUPROF_ACL_LIB)" : " (set NPUPROF_ACL_LIB or source CANN's set_env.sh)",
                        why ? why : "unknown error");
                return -ENOENT;
        }

#define LOAD(field, name) \
        do { \
                if (!(p = lib_sym(lib.acl, path, #name, err))) \
                        goto fail; \
                lib.field = (__typeof__(name) *) p; \
        } while (0)
        LOAD(init, aclprofInit);
        LOAD(create_config, aclprofCreateConfig);
        LOAD(start, aclprofStart);
        LOAD(stop, aclprofStop);
        LOAD(destroy_config, aclprofDestroyConfig);
        LOAD(finalize, aclprofFinalize);
#undef LOAD
        lib.get_device = (__typeof__(aclrtGetDevice) *) lib_optional(lib.acl, "aclrtGetDevice");
        lib.sync_timeout = (__typeof__(aclrtSynchronizeDeviceWithTimeout) *)
                lib_optional(lib.acl, "aclrtSynchronizeDeviceWithTimeout");
        lib.sync = (__typeof__(aclrtSynchronizeDevice) *) lib_optional(lib.acl, "aclrtSynchronizeDevice");

        /* An explicit libmsprofiler.so must load; the default one is optional. */
        if (!mspath || *mspath) {
                const char *name = mspath ? mspath : "libmsprofiler.so";

                lib.msprof = dlopen(name, mode);
                if (!lib.msprof && mspath) {
                        const char *why = dlerror();

                        set_err(err, "cannot load %s ($NPUPROF_MSPROFILER_LIB): %s", name,
                                why ? why : "unknown error");
                        goto fail;
                }
        }
        /* libmsprofiler.so's, else the ACL library's (which depends on it); the features V2
         * first, then V1 (MsProfilerInterface.cpp:61-75). */
        static const char *const feature_calls[] = { "aclprofGetSupportedFeaturesV2", "aclprofGetSupportedFeatures" };
        for (size_t i = 0; i < 2 && !lib.get_features; i++) {
                lib.get_features_name = feature_calls[i];
                lib.get_features = (__typeof__(aclprofGetSupportedFeatures) *) lib_optional(lib.msprof, feature_calls[i]);
                if (!lib.get_features)
                        lib.get_features = (__typeof__(aclprofGetSupportedFeatures) *)
                                lib_optional(lib.acl, feature_calls[i]);
        }
        lib.set_config = (__typeof__(aclprofSetConfig) *) lib_optional(lib.msprof, "aclprofSetConfig");
        if (!lib.set_config)
                lib.set_config = (__typeof__(aclprofSetConfig) *) lib_optional(lib.acl, "aclprofSetConfig");
        *ret_lib = lib;
        return 0;

fail:
        lib_unload(&lib);
        return -ENOENT;
}

static int acl_probe(char *err)
{
        acl_lib_t lib;
        int r;

        r = lib_load(&lib, err);
        if (r < 0)
                return r;
        lib_unload(&lib);
        return 0;
}

/* A setting CANN refused (@code) or could not be asked for (@code 0), in the manifest. */
static void note_refused(json_t *runtime, const char *setting, const char *call, int code, const char *why)
{
        json_t *list = json_object_get(runtime, "refused");
        const acl_code_t *c = code ? acl_code_find(code) : NULL;

        if (!list) {
                list = json_array();
                json_object_set_new(runtime, "refused", list);
        }
        json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:o, s:s?}", "setting", setting, "call", call,
                                              "code", code ? json_integer(code) : json_null(),
                                              "name", c ? json_string(c->name) : json_null(),
                                              "what", c ? c->what : why));
}

/*
 * The timeout of aclrtSynchronizeDeviceWithTimeout(), as torch_npu takes it: the seconds of
 * $ACL_DEVICE_SYNC_TIMEOUT in milliseconds, else -1, none
 * (torch_npu/csrc/core/npu/register/OptionsManager.cpp:211-221, AclInterface.cpp:1031-1054).
 */
static int32_t sync_timeout_ms(void)
{
        const char *s = getenv("ACL_DEVICE_SYNC_TIMEOUT");
        char *end;
        long v;

        if (!s || !*s)
                return -1;
        v = strtol(s, &end, 10);
        return v > 0 && v <= INT32_MAX / 1000 ? (int32_t) (v * 1000) : -1;
}

/*
 * Synchronize the device, then stop, destroy and finalize what @w holds, each step only when
 * owed; every step runs even when an earlier one failed. A failed synchronization costs the
 * tail of the data, not the window: it is noted in the manifest. Return: 0, or the errno of
 * the first failure (@err says it, followed by later failures when they fit). Context:
 * acl_lock held.
 */
static int window_teardown(acl_window_t *w, char *err)
{
        int r = 0;
        aclError e;
        char more[NPF_BACKEND_ERR_MAX];

        if (w->started) {
                /* torch_npu synchronizes the device before it stops (profiler_interface.py:165-170). */
                const char *call = w->lib.sync_timeout ? "aclrtSynchronizeDeviceWithTimeout" : "aclrtSynchronizeDevice";
                e = w->lib.sync_timeout ? w->lib.sync_timeout(sync_timeout_ms())
                    : w->lib.sync ? w->lib.sync() : ACL_SUCCESS;
                if (e != ACL_SUCCESS && w->runtime)
                        note_refused(w->runtime, "synchronize", call, e, NULL);
        }
#define STEP(call, expr) \
        do { \
                e = (expr); \
                if (e != ACL_SUCCESS) { \
                        if (r == 0) { \
                                r = acl_fail(err, call, e); \
                        } else if (err) { \
                                size_t len = strlen(err); \
                                acl_fail(more, call, e); \
                                snprintf(err + len, NPF_BACKEND_ERR_MAX - len, "; %s", more); \
                        } \
                } \
        } while (0)
        if (w->started) {
                w->started = false;
                STEP("aclprofStop", w->lib.stop(w->config));
        }
        if (w->config) {
                aclprofConfig *config = w->config;

                w->config = NULL;
                STEP("aclprofDestroyConfig", w->lib.destroy_config(config));
        }
        if (w->initialized) {
                w->initialized = false;
                STEP("aclprofFinalize", w->lib.finalize());
        }
#undef STEP
        return r;
}

static int acl_window_open(void **ret_state, const npf_backend_window_t *win, char *err)
{
        const npf_shm_args_t *a = win->args;
        set_config_t sets[SET_CONFIG_MAX];
        size_t nsets;
        uint32_t device;
        const char *device_from;
        acl_plan_t plan;
        aclError e;
        acl_window_t *w;
        json_t *features;
        int r;

        if (!(a->activities & NPF_ACT_NPU)) {
                set_err(err, "the acl backend collects NPU activity only, and this window's activities "
                        "leave NPU out: add NPU, or choose the host backend");
                return -EINVAL;
        }
        if (plan_of(a, 0, &plan) < 0) {
                if (a->level < NPF_LEVEL_NONE || a->level > NPF_LEVEL_2)
                        set_err(err, "unknown profiler level %" PRId32, a->level);
                else
                        set_err(err, "unknown AI Core metric %" PRId32, a->aic_metrics);
                return -EINVAL;
        }
        if (win->local_device < -1) {
                set_err(err, "invalid local device %" PRId32, win->local_device);
                return -EINVAL;
        }
        nsets = set_configs_of(a, sets);

        w = calloc(1, sizeof(*w));
        if (!w) {
                set_err(err, "out of memory");
                return -ENOMEM;
        }
        w->runtime = win->runtime;

        pthread_mutex_lock(&acl_lock);
        if (acl_open_window) {
                set_err(err, "an ACL window is already open in this process; CANN profiles one session at a time");
                r = -EBUSY;
                goto fail;
        }
        r = lib_load(&w->lib, err);
        if (r < 0)
                goto fail;

        e = w->lib.init(win->dir, strlen(win->dir));
        if (e != ACL_SUCCESS) {
                r = acl_fail(err, "aclprofInit", e);
                goto fail;
        }
        w->initialized = true;

        /* torch_npu asks for the features right after aclprofInit (profiler_mgr.cpp:74-79). */
        features = json_array();
        plan_of(a, features_of(&w->lib, features), &plan);

        /* A sampler this device lacks costs its data, not the window: torch_npu logs what
         * aclprofSetConfig returns and carries on (profiler_mgr.cpp:148-151, 179-182, 189-202),
         * and so does a CANN without aclprofSetConfig (MsProfilerInterface.cpp:48-59). */
        for (size_t i = 0; i < nsets; i++) {
                if (!w->lib.set_config) {
                        note_refused(w->runtime, sets[i].name, "aclprofSetConfig", 0,
                                     "this CANN has no aclprofSetConfig");
                        continue;
                }
                e = w->lib.set_config(sets[i].type, sets[i].value, strlen(sets[i].value));
                if (e != ACL_SUCCESS)
                        note_refused(w->runtime, sets[i].name, "aclprofSetConfig", e, NULL);
        }

        r = device_of(&w->lib, win->local_device, &device, &device_from, err);
        if (r < 0) {
                json_decref(features);
                goto fail;
        }
        if (w->runtime) {
                char mask[32];

                snprintf(mask, sizeof(mask), "0x%" PRIx64, plan.mask);
                json_object_set_new(w->runtime, "device", json_integer(device));
                json_object_set_new(w->runtime, "device_from", json_string(device_from));
                json_object_set_new(w->runtime, "data_types", json_string(mask));
                json_object_set_new(w->runtime, "aic_metrics", json_string(metric_name(plan.metric)));
                json_object_set_new(w->runtime, "features", w->lib.get_features ? json_incref(features) : json_null());
                for (size_t i = 0; i < plan.n_dropped; i++) {
                        json_t *list = json_object_get(w->runtime, "dropped");
                        if (!list) {
                                list = json_array();
                                json_object_set_new(w->runtime, "dropped", list);
                        }
                        json_array_append_new(list, json_pack("{s:s, s:s}", "setting", plan.dropped[i].setting,
                                                              "why", plan.dropped[i].why));
                }
        }
        json_decref(features);

        w->config = w->lib.create_config(&device, 1, plan.metric, NULL, plan.mask);
        if (!w->config) {
                set_err(err, "aclprofCreateConfig failed: it returned no configuration for device %" PRIu32
                        ", AI Core metric %s, data types 0x%" PRIx64, device, metric_name(plan.metric), plan.mask);
                r = -EINVAL;
                goto fail;
        }

        e = w->lib.start(w->config);
        if (e != ACL_SUCCESS) {
                r = acl_fail(err, "aclprofStart", e);
                goto fail;
        }
        w->started = true;

        acl_open_window = w;
        pthread_mutex_unlock(&acl_lock);
        *ret_state = w;
        return 0;

fail:
        /* The cleanup the calls made so far require; the first error stays the one reported. */
        window_teardown(w, NULL);
        pthread_mutex_unlock(&acl_lock);
        lib_unload(&w->lib);
        free(w);
        return r;
}

static int acl_window_step(void *state, int64_t step, char *err)
{
        (void) state;
        (void) step;
        (void) err;
        return 0;
}

static int acl_window_close(void *state, int64_t last_step, bool complete, char *err)
{
        acl_window_t *w = state;
        int r;

        (void) last_step;
        (void) complete;        /* CANN flushes what it has either way; the manifest says which */
        if (!w)
                return 0;

        pthread_mutex_lock(&acl_lock);
        if (acl_open_window == w) {
                acl_open_window = NULL;
                r = window_teardown(w, err);
        } else {
                /* shutdown() already closed it. */
                r = w->shutdown_error;
                if (r < 0)
                        set_err(err, "%s", w->shutdown_msg);
        }
        pthread_mutex_unlock(&acl_lock);

        lib_unload(&w->lib);
        free(w);
        return r;
}

/* Finalize the window still open, if any; its window_close() then only frees it. The
 * manifest's runtime object may be gone by now, so nothing is noted in it. */
static void acl_shutdown(void)
{
        acl_window_t *w;

        pthread_mutex_lock(&acl_lock);
        w = acl_open_window;
        if (w) {
                acl_open_window = NULL;
                w->runtime = NULL;
                w->shutdown_error = window_teardown(w, w->shutdown_msg);
        }
        pthread_mutex_unlock(&acl_lock);
}

const npf_backend_ops_t npf_backend_acl = {
        .name = "acl",
        .probe = acl_probe,
        .window_open = acl_window_open,
        .window_step = acl_window_step,
        .window_close = acl_window_close,
        .shutdown = acl_shutdown,
};
