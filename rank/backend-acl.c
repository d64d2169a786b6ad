/* SPDX-License-Identifier: MIT */
/*
 * The ACL backend: CANN's profiling API (aclprof*), loaded with dlopen() so that libnpuprof
 * neither links against nor needs CANN where there is none.
 *
 * A window is one CANN profiling session:
 *
 *   window_open    aclprofInit(dir) [aclprofSetConfig ...] aclprofCreateConfig({device}, 1,
 *                  metrics, NULL, mask) aclprofStart(config)
 *   window_step    nothing: CANN collects on its own between Start and Stop
 *   window_close   aclprofStop(config) aclprofDestroyConfig(config) aclprofFinalize()
 *   shutdown       the window_close sequence, when a window is still open; else nothing
 *
 * aclprofFinalize() is called when each window closes, not once when the rank closes as
 * the issue first placed it. aclprofInit() binds the result directory for the whole session,
 * every window has a directory of its own, and CANN refuses a second aclprofInit() until the
 * first session is finalized (ACL_ERROR_REPEAT_INITIALIZE); aclprofFinalize() is also what
 * flushes the collected data, which must be on disk before the rank writes the manifest. So
 * shutdown() has work only when a window is still open: it stops and finalizes it.
 *
 * CANN's profiling state is process-wide, so at most one ACL window is open per process; a
 * second window_open() gets -EBUSY. shutdown() acts on that one window whichever rank handle
 * opened it: the rank library calls it once, when its last handle closes.
 *
 * Libraries: $NPUPROF_ACL_LIB, else "libascendcl.so", must provide the six aclprof* calls
 * of the sequence. aclprofSetConfig() (hardware memory, I/O, interconnect and host-system
 * sampling) comes from $NPUPROF_MSPROFILER_LIB, else "libmsprofiler.so" when it loads, else
 * from the ACL library itself; it is needed only when a switch asks for one of those. Set
 * NPUPROF_MSPROFILER_LIB to "" to skip libmsprofiler.so. Both are opened RTLD_NODELETE:
 * closing the handle after a window never unmaps a runtime that has started threads.
 */
#include "rank/backend.h"

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

/* CANN's documented values (acl/acl_prof.h, acl/acl_base.h), written here so that building
 * libnpuprof needs no CANN headers. aclError is an int; enums are passed as int. */
typedef int acl_error_t;

#define ACL_PROF_ACL_API          UINT64_C(0x0001)
#define ACL_PROF_TASK_TIME        UINT64_C(0x0002)
#define ACL_PROF_AICORE_METRICS   UINT64_C(0x0004)
#define ACL_PROF_AICPU            UINT64_C(0x0008)
#define ACL_PROF_L2CACHE          UINT64_C(0x0010)
#define ACL_PROF_HCCL_TRACE       UINT64_C(0x0020)
#define ACL_PROF_MSPROFTX         UINT64_C(0x0080)
#define ACL_PROF_RUNTIME_API      UINT64_C(0x0100)
#define ACL_PROF_TASK_TIME_L0     UINT64_C(0x0800)
#define ACL_PROF_TASK_MEMORY      UINT64_C(0x1000)
#define ACL_PROF_OP_ATTR          UINT64_C(0x4000)

/* aclprofAicoreMetrics. */
enum {
        ACL_AICORE_ARITHMETIC_UTILIZATION = 0,
        ACL_AICORE_PIPE_UTILIZATION = 1,
        ACL_AICORE_MEMORY_BANDWIDTH = 2,
        ACL_AICORE_L0B_AND_WIDTH = 3,
        ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4,
        ACL_AICORE_MEMORY_UB = 5,
        ACL_AICORE_L2_CACHE = 6,
        ACL_AICORE_PIPE_EXECUTE_UTILIZATION = 7,
        ACL_AICORE_MEMORY_ACCESS = 8,
        ACL_AICORE_NONE = 0xFF,
};

/* aclprofConfigType, the keys of aclprofSetConfig() this backend uses. */
enum {
        ACL_PROF_SYS_HARDWARE_MEM_FREQ = 3,
        ACL_PROF_SYS_IO_FREQ = 5,
        ACL_PROF_SYS_INTERCONNECTION_FREQ = 6,
        ACL_PROF_HOST_SYS = 8,
};

#define ACL_SUCCESS                       0
#define ACL_ERROR_PROF_MODULES_UNSUPPORTED 200007

typedef acl_error_t (*acl_init_fn)(const char *path, size_t length);
typedef void *(*acl_create_config_fn)(uint32_t *devices, uint32_t count, int metrics,
                                      const void *events, uint64_t mask);
typedef acl_error_t (*acl_config_fn)(const void *config);
typedef acl_error_t (*acl_finalize_fn)(void);
typedef acl_error_t (*acl_set_config_fn)(int type, const char *value, size_t length);

typedef struct acl_lib {
        void *acl;
        void *msprof;                   /* NULL when libmsprofiler.so is not used */
        acl_init_fn init;
        acl_create_config_fn create_config;
        acl_config_fn start;
        acl_config_fn stop;
        acl_config_fn destroy_config;
        acl_finalize_fn finalize;
        acl_set_config_fn set_config;   /* NULL when neither library has it */
} acl_lib_t;

typedef struct acl_window {
        acl_lib_t lib;
        void *config;                   /* the aclprofConfig; NULL once destroyed */
        bool initialized;               /* aclprofInit succeeded, aclprofFinalize is owed */
        bool started;                   /* aclprofStart succeeded, aclprofStop is owed */
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

/* The ACL error codes, each with what it means for a profiling call. */
static const acl_code_t acl_codes[] = {
        { 100000, "ACL_ERROR_INVALID_PARAM", "a parameter is invalid" },
        { 100001, "ACL_ERROR_UNINITIALIZE", "ACL is not initialised: aclInit has not been called" },
        { 100002, "ACL_ERROR_REPEAT_INITIALIZE", "profiling is already initialised in this process, by the framework's own profiler?" },
        { 100003, "ACL_ERROR_INVALID_FILE", "invalid file" },
        { 100004, "ACL_ERROR_WRITE_FILE", "cannot write the result file" },
        { 100005, "ACL_ERROR_INVALID_FILE_SIZE", "invalid file size" },
        { 100006, "ACL_ERROR_PARSE_FILE", "cannot parse a file" },
        { 100007, "ACL_ERROR_FILE_MISSING_ATTR", "a file lacks an attribute" },
        { 100008, "ACL_ERROR_FILE_ATTR_INVALID", "a file attribute is invalid" },
        { 100009, "ACL_ERROR_INVALID_DUMP_CONFIG", "invalid dump configuration" },
        { 100010, "ACL_ERROR_INVALID_PROFILING_CONFIG", "invalid profiling configuration" },
        { 100011, "ACL_ERROR_INVALID_MODEL_ID", "invalid model id" },
        { 100024, "ACL_ERROR_OP_NOT_FOUND", "operator not found" },
        { 100033, "ACL_ERROR_REPEAT_SUBSCRIBE", "already subscribed" },
        { 100037, "ACL_ERROR_REPEAT_FINALIZE", "profiling was already finalized" },
        { 100039, "ACL_ERROR_COMPILING_STUB_MODE", "the runtime is a compile-only stub" },
        { 100042, "ACL_ERROR_PROF_ALREADY_RUN", "another profiling session is running (msprof command line, acl.json or a framework option)" },
        { 100043, "ACL_ERROR_PROF_NOT_RUN", "profiling is not initialised: aclprofInit did not succeed" },
        { 148046, "ACL_ERROR_PROF_REPEAT_SUBSCRIBE", "the model is already subscribed" },
        { 148047, "ACL_ERROR_PROF_API_CONFLICT", "conflicts with profiling started through another API" },
        { 200000, "ACL_ERROR_BAD_ALLOC", "out of memory" },
        { 200001, "ACL_ERROR_API_NOT_SUPPORT", "not supported by this runtime" },
        { 200002, "ACL_ERROR_INVALID_DEVICE", "invalid device id" },
        { 200003, "ACL_ERROR_MEMORY_ADDRESS_UNALIGNED", "unaligned memory address" },
        { 200004, "ACL_ERROR_RESOURCE_NOT_MATCH", "resources do not match" },
        { 200005, "ACL_ERROR_INVALID_RESOURCE_HANDLE", "invalid resource handle" },
        { 200006, "ACL_ERROR_FEATURE_UNSUPPORTED", "feature not supported on this device" },
        { 200007, "ACL_ERROR_PROF_MODULES_UNSUPPORTED", "a requested profiling module is not supported on this device" },
        { 300000, "ACL_ERROR_STORAGE_OVER_LIMIT", "the profiling storage limit is exceeded" },
        { 500000, "ACL_ERROR_INTERNAL_ERROR", "internal error" },
        { 500001, "ACL_ERROR_FAILURE", "failure" },
        { 500002, "ACL_ERROR_GE_FAILURE", "graph engine failure" },
        { 500003, "ACL_ERROR_RT_FAILURE", "runtime failure" },
        { 500004, "ACL_ERROR_DRV_FAILURE", "driver failure" },
        { 500005, "ACL_ERROR_PROFILING_FAILURE", "profiling failure" },
};

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

/* The errno a failed ACL call becomes. */
static int acl_errno(int code)
{
        switch (code) {
        case 100000: case 100010: case 200002:
                return -EINVAL;
        case 100002: case 100042: case 148047:
                return -EBUSY;
        case 200000:
                return -ENOMEM;
        case 200001: case 200006: case 200007: case 100039:
                return -ENOTSUP;
        case 300000:
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

/* NPF_AIC_* (MindSpore's encoding) to aclprofAicoreMetrics. Every npuprof metric has an
 * equal in CANN; CANN's PIPE_EXECUTE_UTILIZATION has none in npuprof and is never asked. */
static int aic_to_acl(int32_t aic, int *ret_metrics)
{
        int m;

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
        *ret_metrics = m;
        return 0;
}

/* The data-type mask, as torch_npu builds it from the level and the switches. */
static int mask_of(const npf_shm_args_t *a, uint64_t *ret_mask)
{
        uint64_t m;

        switch (a->level) {
        case NPF_LEVEL_NONE:
                m = 0;
                break;
        case NPF_LEVEL_0:
                m = ACL_PROF_TASK_TIME_L0 | ACL_PROF_ACL_API;
                break;
        case NPF_LEVEL_1:
                m = ACL_PROF_TASK_TIME | ACL_PROF_ACL_API | ACL_PROF_HCCL_TRACE | ACL_PROF_AICORE_METRICS;
                break;
        case NPF_LEVEL_2:
                m = ACL_PROF_TASK_TIME | ACL_PROF_ACL_API | ACL_PROF_HCCL_TRACE | ACL_PROF_AICORE_METRICS |
                    ACL_PROF_RUNTIME_API | ACL_PROF_AICPU;
                break;
        default:
                return -EINVAL;
        }
        if (a->flags & NPF_FLAG_L2_CACHE)
                m |= ACL_PROF_L2CACHE;
        if (a->flags & NPF_FLAG_MSTX)
                m |= ACL_PROF_MSPROFTX;
        if (a->flags & NPF_FLAG_OP_ATTR)
                m |= ACL_PROF_OP_ATTR;
        if (a->flags & NPF_FLAG_PROFILE_MEMORY)
                m |= ACL_PROF_TASK_MEMORY;
        if (a->aic_metrics != NPF_AIC_NONE)
                m |= ACL_PROF_AICORE_METRICS;
        *ret_mask = m;
        return 0;
}

/* The aclprofSetConfig() calls a window needs, with the values torch_npu uses. */
typedef struct set_config {
        int type;
        const char *name;
        char value[64];
} set_config_t;

enum { SET_CONFIG_MAX = 4 };

static size_t set_configs_of(const npf_shm_args_t *a, set_config_t ret[SET_CONFIG_MAX])
{
        static const struct { uint32_t bit; const char *name; } host[] = {
                { NPF_HOST_SYS_CPU, "cpu" }, { NPF_HOST_SYS_MEM, "mem" }, { NPF_HOST_SYS_DISK, "disk" },
                { NPF_HOST_SYS_NETWORK, "network" }, { NPF_HOST_SYS_OSRT, "osrt" },
        };
        size_t n = 0;

        if (a->flags & NPF_FLAG_PROFILE_MEMORY)
                ret[n++] = (set_config_t) { ACL_PROF_SYS_HARDWARE_MEM_FREQ, "profile_memory", "50" };
        if (a->flags & NPF_FLAG_SYS_IO)
                ret[n++] = (set_config_t) { ACL_PROF_SYS_IO_FREQ, "sys_io", "100" };
        if (a->flags & NPF_FLAG_SYS_INTERCONNECTION)
                ret[n++] = (set_config_t) { ACL_PROF_SYS_INTERCONNECTION_FREQ, "sys_interconnection", "50" };
        if (a->host_sys) {
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
        return n;
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

static void lib_unload(acl_lib_t *lib)
{
        if (lib->msprof)
                dlclose(lib->msprof);
        if (lib->acl)
                dlclose(lib->acl);
        *lib = (acl_lib_t) { 0 };
}

/* Load the ACL runtime and, when available, libmsprofiler.so; every symbol or an error. */
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

#define LOAD(field, name, type) \
        do { \
                if (!(p = lib_sym(lib.acl, path, name, err))) \
                        goto fail; \
                lib.field = (type) p; \
        } while (0)
        LOAD(init, "aclprofInit", acl_init_fn);
        LOAD(create_config, "aclprofCreateConfig", acl_create_config_fn);
        LOAD(start, "aclprofStart", acl_config_fn);
        LOAD(stop, "aclprofStop", acl_config_fn);
        LOAD(destroy_config, "aclprofDestroyConfig", acl_config_fn);
        LOAD(finalize, "aclprofFinalize", acl_finalize_fn);
#undef LOAD

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
                if (lib.msprof) {
                        dlerror();
                        lib.set_config = (acl_set_config_fn) dlsym(lib.msprof, "aclprofSetConfig");
                }
        }
        if (!lib.set_config) {
                dlerror();
                lib.set_config = (acl_set_config_fn) dlsym(lib.acl, "aclprofSetConfig");
        }
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

/*
 * Stop, destroy and finalize what @w holds, each step only when owed; every step runs even
 * when an earlier one failed. Return: 0, or the errno of the first failure (@err says it,
 * followed by later failures when they fit). Context: acl_lock held.
 */
static int window_teardown(acl_window_t *w, char *err)
{
        int r = 0;
        acl_error_t e;
        char more[NPF_BACKEND_ERR_MAX];

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
                void *config = w->config;

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
        uint64_t mask;
        int metrics, r;
        acl_error_t e;
        acl_window_t *w;

        if (!(a->activities & NPF_ACT_NPU)) {
                set_err(err, "the acl backend collects NPU activity only, and this window's activities "
                        "leave NPU out: add NPU, or choose the host backend");
                return -EINVAL;
        }
        if (aic_to_acl(a->aic_metrics, &metrics) < 0) {
                set_err(err, "unknown AI Core metric %" PRId32, a->aic_metrics);
                return -EINVAL;
        }
        if (mask_of(a, &mask) < 0) {
                set_err(err, "unknown profiler level %" PRId32, a->level);
                return -EINVAL;
        }
        if (win->local_device < -1) {
                set_err(err, "invalid local device %" PRId32, win->local_device);
                return -EINVAL;
        }
        device = win->local_device < 0 ? 0 : (uint32_t) win->local_device;
        nsets = set_configs_of(a, sets);

        w = calloc(1, sizeof(*w));
        if (!w) {
                set_err(err, "out of memory");
                return -ENOMEM;
        }

        pthread_mutex_lock(&acl_lock);
        if (acl_open_window) {
                set_err(err, "an ACL window is already open in this process; CANN profiles one session at a time");
                r = -EBUSY;
                goto fail;
        }
        r = lib_load(&w->lib, err);
        if (r < 0)
                goto fail;
        if (nsets > 0 && !w->lib.set_config) {
                set_err(err, "%s needs aclprofSetConfig, which neither libmsprofiler.so nor the ACL runtime "
                        "provides", sets[0].name);
                r = -ENOTSUP;
                goto fail;
        }

        e = w->lib.init(win->dir, strlen(win->dir));
        if (e != ACL_SUCCESS) {
                r = acl_fail(err, "aclprofInit", e);
                goto fail;
        }
        w->initialized = true;

        /* As torch_npu does, a sampler this device lacks costs its data, not the window. */
        for (size_t i = 0; i < nsets; i++) {
                e = w->lib.set_config(sets[i].type, sets[i].value, strlen(sets[i].value));
                if (e != ACL_SUCCESS && e != ACL_ERROR_PROF_MODULES_UNSUPPORTED) {
                        char call[64];

                        snprintf(call, sizeof(call), "aclprofSetConfig(%s)", sets[i].name);
                        r = acl_fail(err, call, e);
                        goto fail;
                }
        }

        w->config = w->lib.create_config(&device, 1, metrics, NULL, mask);
        if (!w->config) {
                set_err(err, "aclprofCreateConfig failed: it returned no configuration for device %" PRIu32
                        ", AI Core metrics %d, data types 0x%" PRIx64, device, metrics, mask);
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

/* Finalize the window still open, if any; its window_close() then only frees it. */
static void acl_shutdown(void)
{
        acl_window_t *w;

        pthread_mutex_lock(&acl_lock);
        w = acl_open_window;
        if (w) {
                acl_open_window = NULL;
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
