/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for CANN's libmsprofiler.so, for the tests of the acl backend: it records
 * every call and answers as CANN does, with CANN's return codes, for the device it is told
 * it runs on. Built against CANN's real acl/acl_prof.h, so a prototype or constant of the
 * stand-in that is not CANN's is a compile error.
 *
 * Behaviour, from hicann/runtime 681ef76 (paths under src/dfx/msprof/collector/dvvp/):
 *   - every aclprof* call is in libmsprofiler.so (msprofiler/CMakeLists.txt:40-57);
 *     libascendcl.so reaches them as a dependency (the stand-in's libascendcl.so too);
 *   - aclprofInit: 100000 for a NULL or empty path, a length of 4096 or more or one that is
 *     not the path's (profimpl/adapter/src/msprofiler_acl_api.cpp:95-124); 100002 when a
 *     session is initialised (msprof/engine/src/prof_acl_mgr.cpp:537-542); 200006 on a
 *     helper host (msprofiler_acl_api.cpp:129-133);
 *   - aclprofFinalize: 0, initialised or not (msprofiler_acl_api.cpp:184-189);
 *   - aclprofSetConfig: 100000 for a type out of range or a value that is NULL, longer
 *     than 256 bytes or not @length long (msprofiler_acl_api.cpp:58-93); 200006 on a helper
 *     host (526-531); 100010 when the chip lacks every sampler the type needs
 *     (task_handle/src/prof_params_adapter.cpp:212-249) or the value is out of range
 *     (common/validation/param_validation.cpp:887-906, 1054-1067); never 200007;
 *   - aclprofCreateConfig: NULL for more than 64 devices, events, a device the driver does
 *     not have or one given twice, or no device without MSPROFTX (msprofiler/prof_acl_api.cpp:51-179);
 *   - aclprofStart: 100000 for an empty mask or a metric the chip lacks
 *     (prof_acl_mgr.cpp:3214-3238), 200007 for a bit outside PROF_SWITCH_SUPPORT
 *     (msprofiler/prof_api_common.h:28-32), 100010 when started again with another mask
 *     (msprofiler_acl_api.cpp:396-400);
 *   - aclprofStop: 0 when not initialised, 100010 for a mask other than the one started
 *     (prof_acl_mgr.cpp:3270-3297);
 *   - aclprofGetSupportedFeatures(V2): 100000 for NULL arguments or a *featuresData that is
 *     set; else CANN's static records (common/config/feature_manager.cpp:23-50): ATTR and
 *     AICORE_SHAPE, and with V2 on an Ascend910B MemoryAccess too.
 *
 * The device: $NPF_ACL_STUB_SOC names the chip (Ascend910B, the default; Ascend910;
 * Ascend310P, which has no sys_io sampler; Ascend310B, no interconnect sampler; helper, a
 * helper host) and $NPF_ACL_STUB_DEVICES the driver's device count (8).
 *
 * Every call appends one line, its name, arguments and result, to the file
 * $NPF_ACL_STUB_LOG names (nothing is recorded when it is unset):
 *
 *   aclprofInit path=/tmp/w length=6 -> 0
 *   aclprofSetConfig type=3 value=50 length=2 -> 0
 *   aclprofCreateConfig devices=[0] count=1 metrics=1 events=NULL mask=0x27 -> config#4
 *
 * $NPF_ACL_STUB_FAIL=FUNCTION:CODE[,FUNCTION:CODE...] makes FUNCTION return CODE (and
 * aclprofCreateConfig NULL) instead of what it would; $NPF_ACL_STUB_HOLD=FUNCTION:MS[,...]
 * makes FUNCTION take MS milliseconds, first recording "FUNCTION held for MS ms".
 *
 * Built with -DNPF_ACL_STUB_OLD_CANN, it is a CANN without aclprofSetConfig and the
 * feature calls.
 */
#include "stub-acl/stub.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include "acl/acl_prof.h"
#pragma GCC diagnostic pop

/* acl_prof.h:173 declares it without a prototype. */
int aclprofFinalize(void);
/* prof_acl_api.h:211-219 is C++; its Status is int32_t. */
int32_t aclprofGetSupportedFeatures(size_t *featuresSize, void **featuresData);
int32_t aclprofGetSupportedFeaturesV2(size_t *featuresSize, void **featuresData);

void npf_stub_record(const char *fmt, ...)
{
        const char *log = getenv("NPF_ACL_STUB_LOG");
        char line[8192];
        va_list ap;
        int n, fd;

        if (!log || !*log)
                return;
        va_start(ap, fmt);
        n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t) n > sizeof(line) - 2)
                n = (int) sizeof(line) - 2;
        line[n++] = '\n';
        fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return;
        if (write(fd, line, (size_t) n) != n) {
                /* A short record shows up as a mismatch in the test that reads it. */
        }
        close(fd);
}

/* The number the list in $@variable ("FUNCTION:N,...") gives @function; @found says whether it did. */
static int listed(const char *variable, const char *function, bool *found)
{
        const char *s = getenv(variable);
        size_t len = strlen(function);

        *found = false;
        while (s && *s) {
                if (strncmp(s, function, len) == 0 && s[len] == ':') {
                        *found = true;
                        return atoi(s + len + 1);
                }
                s = strchr(s, ',');
                if (s)
                        s++;
        }
        return 0;
}

bool npf_stub_injected(const char *function, int *ret_code)
{
        bool found;
        int ms = listed("NPF_ACL_STUB_HOLD", function, &found);

        if (ms > 0) {
                npf_stub_record("%s held for %d ms", function, ms);
                usleep((useconds_t) ms * 1000u);
        }
        int code = listed("NPF_ACL_STUB_FAIL", function, &found);

        if (found)
                *ret_code = code;
        return found;
}

/* The chip $NPF_ACL_STUB_SOC names. */
typedef struct soc {
        const char *name;
        bool helper;            /* a helper host: profiling calls are refused */
        bool sys_io, sys_interconnection, hardware_mem, host_sys;
        bool memory_access;     /* the MemoryAccess AI Core metric and feature */
} soc_t;

/* From profimpl/platform/ *_platform.cpp, the samplers each chip has. */
static const soc_t socs[] = {
        { "Ascend910B", false, true, true, true, true, true },
        { "Ascend910", false, true, true, true, true, false },
        { "Ascend310P", false, false, true, true, true, false },
        { "Ascend310B", false, true, false, true, true, false },
        { "helper", true, true, true, true, true, false },
};

static const soc_t *soc(void)
{
        const char *name = getenv("NPF_ACL_STUB_SOC");

        for (size_t i = 0; name && i < sizeof(socs) / sizeof(socs[0]); i++)
                if (strcmp(socs[i].name, name) == 0)
                        return &socs[i];
        return &socs[0];
}

static uint32_t device_count(void)
{
        const char *s = getenv("NPF_ACL_STUB_DEVICES");

        return s && *s ? (uint32_t) atoi(s) : 8;
}

/* The process-wide profiling state CANN keeps. */
static bool initialized;
static bool started;
static uint64_t started_mask;

/* PROF_SWITCH_SUPPORT of a release build (prof_api_common.h:28-32). */
static const uint64_t switch_support = 0x4000000C0100FBFFULL;

int aclprofInit(const char *profilerResultPath, size_t length)
{
        int r = ACL_SUCCESS;

        if (soc()->helper)
                r = ACL_ERROR_FEATURE_UNSUPPORTED;
        else if (!profilerResultPath || length == 0 || length >= 4096 || strlen(profilerResultPath) != length)
                r = ACL_ERROR_INVALID_PARAM;
        else if (initialized)
                r = ACL_ERROR_REPEAT_INITIALIZE;
        npf_stub_injected("aclprofInit", &r);
        if (r == ACL_SUCCESS)
                initialized = true;
        npf_stub_record("aclprofInit path=%s length=%zu -> %d", profilerResultPath ? profilerResultPath : "NULL",
                        length, r);
        return r;
}

int aclprofFinalize(void)
{
        int r = soc()->helper ? ACL_ERROR_FEATURE_UNSUPPORTED : ACL_SUCCESS;

        npf_stub_injected("aclprofFinalize", &r);
        if (r == ACL_SUCCESS)
                initialized = started = false;
        npf_stub_record("aclprofFinalize -> %d", r);
        return r;
}

#ifndef NPF_ACL_STUB_OLD_CANN
/* Digits only, from 1 to @max (param_validation.cpp:1054-1067). */
static bool frequency_ok(const char *value, long max)
{
        char *end;
        long v;

        if (!*value || strspn(value, "0123456789") != strlen(value))
                return false;
        v = strtol(value, &end, 10);
        return v >= 1 && v <= max;
}

/* cpu, mem, disk, network, osrt or numa, joined by "," (param_validation.cpp:887-906). */
static bool host_sys_ok(const char *value)
{
        static const char *const names[] = { "cpu", "mem", "disk", "network", "osrt", "numa" };
        const char *s = value;

        while (*s) {
                size_t len = strcspn(s, ",");
                bool known = false;

                for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                        known |= strlen(names[i]) == len && strncmp(names[i], s, len) == 0;
                if (!known)
                        return false;
                s += len;
                if (*s == ',' && !*++s)
                        return false;
        }
        return true;
}

int aclprofSetConfig(aclprofConfigType configType, const char *config, size_t configLength)
{
        const soc_t *c = soc();
        int r = ACL_SUCCESS;

        if (configType <= ACL_PROF_ARGS_MIN || configType >= ACL_PROF_ARGS_MAX || !config || configLength > 256 ||
            strlen(config) != configLength)
                r = ACL_ERROR_INVALID_PARAM;
        else if (c->helper)
                r = ACL_ERROR_FEATURE_UNSUPPORTED;
        else if (configType == ACL_PROF_SYS_IO_FREQ)
                r = c->sys_io && frequency_ok(config, 100) ? ACL_SUCCESS : ACL_ERROR_INVALID_PROFILING_CONFIG;
        else if (configType == ACL_PROF_SYS_INTERCONNECTION_FREQ)
                r = c->sys_interconnection && frequency_ok(config, 50) ? ACL_SUCCESS
                                                                       : ACL_ERROR_INVALID_PROFILING_CONFIG;
        else if (configType == ACL_PROF_SYS_HARDWARE_MEM_FREQ)
                r = c->hardware_mem && frequency_ok(config, 100) ? ACL_SUCCESS : ACL_ERROR_INVALID_PROFILING_CONFIG;
        else if (configType == ACL_PROF_HOST_SYS)
                r = c->host_sys && host_sys_ok(config) ? ACL_SUCCESS : ACL_ERROR_INVALID_PROFILING_CONFIG;
        npf_stub_injected("aclprofSetConfig", &r);
        npf_stub_record("aclprofSetConfig type=%d value=%.*s length=%zu -> %d", (int) configType,
                        config ? (int) configLength : 4, config ? config : "NULL", configLength, r);
        return r;
}

/* CANN's FeatureRecord (common/config/feature_manager.h:24-64), the vtable pointers NULL. */
typedef struct feature_info {
        const void *vptr;
        char compatibility[16], feature_version[16], affected_component[16], affected_component_version[16];
        char info_log[128];
} feature_info_t;

typedef struct feature_record {
        const void *vptr;
        char feature_name[64];
        feature_info_t info;
} feature_record_t;

_Static_assert(sizeof(feature_record_t) == 272, "CANN's FeatureRecord is 272 bytes");

#define FEATURE(name, version, log) { NULL, name, { NULL, "1", version, "all", "all", log } }
static feature_record_t features_v1[] = {
        FEATURE("ATTR", "2", "It not support feature: ATTR!"),
        FEATURE("AICORE_SHAPE", "1", "It not support feature: AICORE_SHAPE!"),
};
static feature_record_t features_910b[] = {
        FEATURE("ATTR", "2", "It not support feature: ATTR!"),
        FEATURE("MemoryAccess", "2", "It not support feature: MEMORY_ACCESS!"),
        FEATURE("AICORE_SHAPE", "1", "It not support feature: AICORE_SHAPE!"),
};
#undef FEATURE

static int32_t supported_features(const char *call, bool v2, size_t *featuresSize, void **featuresData)
{
        int r = ACL_SUCCESS;
        size_t n = 0;

        if (!featuresSize || !featuresData || *featuresData)
                r = ACL_ERROR_INVALID_PARAM;
        if (!npf_stub_injected(call, &r) && r == ACL_SUCCESS) {
                if (v2 && soc()->memory_access) {
                        *featuresData = features_910b;
                        n = sizeof(features_910b) / sizeof(features_910b[0]);
                } else {
                        *featuresData = features_v1;
                        n = sizeof(features_v1) / sizeof(features_v1[0]);
                }
                *featuresSize = n;
        }
        npf_stub_record("%s -> %d (%zu features)", call, r, n);
        return r;
}

int32_t aclprofGetSupportedFeatures(size_t *featuresSize, void **featuresData)
{
        return supported_features("aclprofGetSupportedFeatures", false, featuresSize, featuresData);
}

int32_t aclprofGetSupportedFeaturesV2(size_t *featuresSize, void **featuresData)
{
        return supported_features("aclprofGetSupportedFeaturesV2", true, featuresSize, featuresData);
}
#endif

/* The configurations handed out, recognised again by their address. */
struct aclprofConfig {
        unsigned id;
        uint64_t mask;
        aclprofAicoreMetrics metrics;
};

static struct aclprofConfig configs[64];
static unsigned configs_made;

static unsigned config_id(const aclprofConfig *config)
{
        uintptr_t p = (uintptr_t) config, first = (uintptr_t) configs;

        if (p < first || p >= first + sizeof(configs) || (p - first) % sizeof(configs[0]))
                return 0;
        return config->id;
}

aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums, aclprofAicoreMetrics aicoreMetrics,
                                   const aclprofAicoreEvents *aicoreEvents, uint64_t dataTypeConfig)
{
        char list[1024] = "";
        size_t used = 0;
        bool ok = !(deviceNums && !deviceIdList) && !aicoreEvents && deviceNums <= 64 &&
                  (deviceNums > 0 || (dataTypeConfig & ACL_PROF_MSPROFTX));
        aclprofConfig *c = NULL;
        int r;

        for (uint32_t i = 0; deviceIdList && i < deviceNums && i < 64; i++) {
                if (deviceIdList[i] >= device_count())
                        ok = false;
                for (uint32_t k = 0; k < i; k++)
                        ok &= deviceIdList[k] != deviceIdList[i];
                if (used < sizeof(list) - 16)
                        used += (size_t) snprintf(list + used, sizeof(list) - used, "%s%u", i ? "," : "",
                                                  deviceIdList[i]);
        }
        if (npf_stub_injected("aclprofCreateConfig", &r))
                ok = false;
        if (ok) {
                configs_made++;
                c = &configs[configs_made % (sizeof(configs) / sizeof(configs[0]))];
                *c = (aclprofConfig) { configs_made, dataTypeConfig, aicoreMetrics };
                npf_stub_record("aclprofCreateConfig devices=[%s] count=%u metrics=%d events=%s mask=0x%llx -> config#%u",
                                list, deviceNums, (int) aicoreMetrics, aicoreEvents ? "set" : "NULL",
                                (unsigned long long) dataTypeConfig, c->id);
        } else {
                npf_stub_record("aclprofCreateConfig devices=[%s] count=%u metrics=%d events=%s mask=0x%llx -> NULL",
                                list, deviceNums, (int) aicoreMetrics, aicoreEvents ? "set" : "NULL",
                                (unsigned long long) dataTypeConfig);
        }
        return c;
}

int aclprofStart(const aclprofConfig *profilerConfig)
{
        int r = ACL_SUCCESS;

        if (!config_id(profilerConfig) || profilerConfig->mask == 0)
                r = ACL_ERROR_INVALID_PARAM;
        else if (profilerConfig->mask & ~switch_support)
                r = ACL_ERROR_PROF_MODULES_UNSUPPORTED;
        else if (profilerConfig->metrics == ACL_AICORE_MEMORY_ACCESS && !soc()->memory_access)
                r = ACL_ERROR_INVALID_PARAM;
        else if (started && profilerConfig->mask != started_mask)
                r = ACL_ERROR_INVALID_PROFILING_CONFIG;
        npf_stub_injected("aclprofStart", &r);
        if (r == ACL_SUCCESS) {
                initialized = started = true;
                started_mask = profilerConfig->mask;
        }
        npf_stub_record("aclprofStart config#%u -> %d", config_id(profilerConfig), r);
        return r;
}

int aclprofStop(const aclprofConfig *profilerConfig)
{
        int r = ACL_SUCCESS;

        if (initialized && started && (!config_id(profilerConfig) || profilerConfig->mask != started_mask))
                r = ACL_ERROR_INVALID_PROFILING_CONFIG;
        npf_stub_injected("aclprofStop", &r);
        if (r == ACL_SUCCESS)
                started = false;
        npf_stub_record("aclprofStop config#%u -> %d", config_id(profilerConfig), r);
        return r;
}

int aclprofDestroyConfig(const aclprofConfig *profilerConfig)
{
        int r = config_id(profilerConfig) ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;

        npf_stub_injected("aclprofDestroyConfig", &r);
        npf_stub_record("aclprofDestroyConfig config#%u -> %d", config_id(profilerConfig), r);
        return r;
}
