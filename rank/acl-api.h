/* SPDX-License-Identifier: MIT */
/*
 * The part of CANN's ACL API that the acl backend calls, declared with CANN's own names,
 * types and values, so that libnpuprof builds where CANN is not installed.
 *
 * From hicann/runtime 681ef76: include/external/acl/acl_prof.h (the aclprof* calls,
 * aclprofConfig, aclprofAicoreMetrics, aclprofConfigType, the data-type bits), acl_rt.h
 * (aclrtGetDevice, aclrtSynchronizeDevice*), acl_base_rt.h (aclError and its codes),
 * error_codes/rt_error_codes.h, and src/dfx/msprof/inc/toolchain/prof_acl_api.h
 * (aclprofGetSupportedFeatures*, which only C++ can include, so declared here for C).
 *
 * Built with NPF_ACL_CANN_HEADERS and CANN's include/external on the include path (the
 * tests do, where ../shared/testdata/cann exists), CANN's own headers come first and what
 * is declared here is checked against them: a prototype that differs is a conflicting
 * redeclaration, a data-type bit that differs is a macro redefinition (an error with
 * -Werror), an enumerator that differs fails a static assertion, and an error code that
 * differs is found by npf__acl_codes_check() (CANN's codes are `static const int`, which C
 * cannot compare at compile time).
 */
#ifndef NPUPROF_RANK_ACL_API_H
#define NPUPROF_RANK_ACL_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef NPF_ACL_CANN_HEADERS
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include "acl/acl_prof.h"
#include "acl/acl_rt.h"
#pragma GCC diagnostic pop
#endif

/* aclprofAicoreMetrics (acl_prof.h:55-66). */
#define NPF_ACL_AICORE_METRICS(X) \
        X(ACL_AICORE_ARITHMETIC_UTILIZATION, 0) \
        X(ACL_AICORE_PIPE_UTILIZATION, 1) \
        X(ACL_AICORE_MEMORY_BANDWIDTH, 2) \
        X(ACL_AICORE_L0B_AND_WIDTH, 3) \
        X(ACL_AICORE_RESOURCE_CONFLICT_RATIO, 4) \
        X(ACL_AICORE_MEMORY_UB, 5) \
        X(ACL_AICORE_L2_CACHE, 6) \
        X(ACL_AICORE_PIPE_EXECUTE_UTILIZATION, 7) \
        X(ACL_AICORE_MEMORY_ACCESS, 8) \
        X(ACL_AICORE_NONE, 0xFF)

/* The aclprofConfigType keys of aclprofSetConfig() the backend uses (acl_prof.h:82-100). */
#define NPF_ACL_CONFIG_TYPES(X) \
        X(ACL_PROF_SYS_HARDWARE_MEM_FREQ, 3) \
        X(ACL_PROF_SYS_IO_FREQ, 5) \
        X(ACL_PROF_SYS_INTERCONNECTION_FREQ, 6) \
        X(ACL_PROF_HOST_SYS, 8)

/* The aclError codes a profiling or device call can return, with what each means there
 * (acl_base_rt.h:64-137, rt_error_codes.h:21-23, 138). */
#define NPF_ACL_ERRORS(X) \
        X(ACL_ERROR_INVALID_PARAM, 100000, "a parameter is invalid") \
        X(ACL_ERROR_UNINITIALIZE, 100001, "ACL is not initialised: aclInit has not been called") \
        X(ACL_ERROR_REPEAT_INITIALIZE, 100002, "profiling is already initialised in this process, by the framework's own profiler?") \
        X(ACL_ERROR_INVALID_FILE, 100003, "invalid file") \
        X(ACL_ERROR_WRITE_FILE, 100004, "cannot write the result file") \
        X(ACL_ERROR_INVALID_FILE_SIZE, 100005, "invalid file size") \
        X(ACL_ERROR_PARSE_FILE, 100006, "cannot parse a file") \
        X(ACL_ERROR_FILE_MISSING_ATTR, 100007, "a file lacks an attribute") \
        X(ACL_ERROR_FILE_ATTR_INVALID, 100008, "a file attribute is invalid") \
        X(ACL_ERROR_INVALID_DUMP_CONFIG, 100009, "invalid dump configuration") \
        X(ACL_ERROR_INVALID_PROFILING_CONFIG, 100010, "this device or CANN does not take this profiling setting") \
        X(ACL_ERROR_INVALID_MODEL_ID, 100011, "invalid model id") \
        X(ACL_ERROR_OP_NOT_FOUND, 100024, "operator not found") \
        X(ACL_ERROR_REPEAT_SUBSCRIBE, 100033, "already subscribed") \
        X(ACL_ERROR_REPEAT_FINALIZE, 100037, "profiling was already finalized") \
        X(ACL_ERROR_COMPILING_STUB_MODE, 100039, "the runtime is a compile-only stub") \
        X(ACL_ERROR_PROF_ALREADY_RUN, 100042, "another profiling session is running (msprof command line, acl.json or a framework option)") \
        X(ACL_ERROR_PROF_NOT_RUN, 100043, "profiling is not initialised: aclprofInit did not succeed") \
        X(ACL_ERROR_PROF_REPEAT_SUBSCRIBE, 148046, "the model is already subscribed") \
        X(ACL_ERROR_PROF_API_CONFLICT, 148047, "conflicts with profiling started through another API") \
        X(ACL_ERROR_BAD_ALLOC, 200000, "out of memory") \
        X(ACL_ERROR_API_NOT_SUPPORT, 200001, "not supported by this runtime") \
        X(ACL_ERROR_INVALID_DEVICE, 200002, "invalid device id") \
        X(ACL_ERROR_MEMORY_ADDRESS_UNALIGNED, 200003, "unaligned memory address") \
        X(ACL_ERROR_RESOURCE_NOT_MATCH, 200004, "resources do not match") \
        X(ACL_ERROR_INVALID_RESOURCE_HANDLE, 200005, "invalid resource handle") \
        X(ACL_ERROR_FEATURE_UNSUPPORTED, 200006, "not supported here (a helper host?)") \
        X(ACL_ERROR_PROF_MODULES_UNSUPPORTED, 200007, "a requested profiling module is not supported on this device") \
        X(ACL_ERROR_STORAGE_OVER_LIMIT, 300000, "the profiling storage limit is exceeded") \
        X(ACL_ERROR_INTERNAL_ERROR, 500000, "internal error") \
        X(ACL_ERROR_FAILURE, 500001, "failure") \
        X(ACL_ERROR_GE_FAILURE, 500002, "graph engine failure") \
        X(ACL_ERROR_RT_FAILURE, 500003, "runtime failure") \
        X(ACL_ERROR_DRV_FAILURE, 500004, "driver failure") \
        X(ACL_ERROR_PROFILING_FAILURE, 500005, "profiling failure") \
        X(ACL_ERROR_RT_PARAM_INVALID, 107000, "a parameter is invalid") \
        X(ACL_ERROR_RT_INVALID_DEVICEID, 107001, "invalid device id") \
        X(ACL_ERROR_RT_CONTEXT_NULL, 107002, "no device is set in this thread") \
        X(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, 507046, "the device did not finish its work in time")

#define NPF_ACL_ENUMERATOR(name, value) name = (value),
#define NPF_ACL_CHECK_ENUMERATOR(name, value) \
        _Static_assert((name) == (value), #name " is not CANN's value");

#ifdef NPF_ACL_CANN_HEADERS
NPF_ACL_AICORE_METRICS(NPF_ACL_CHECK_ENUMERATOR)
NPF_ACL_CONFIG_TYPES(NPF_ACL_CHECK_ENUMERATOR)
#else
typedef int aclError;
typedef struct aclprofConfig aclprofConfig;
typedef struct aclprofAicoreEvents aclprofAicoreEvents;
typedef enum { NPF_ACL_AICORE_METRICS(NPF_ACL_ENUMERATOR) } aclprofAicoreMetrics;
typedef enum { ACL_PROF_ARGS_MIN = 0, NPF_ACL_CONFIG_TYPES(NPF_ACL_ENUMERATOR) ACL_PROF_ARGS_MAX = 17 } aclprofConfigType;

#define NPF_ACL_ERROR_ENUMERATOR(name, value, what) name = (value),
enum { ACL_SUCCESS = 0, NPF_ACL_ERRORS(NPF_ACL_ERROR_ENUMERATOR) };
#undef NPF_ACL_ERROR_ENUMERATOR
#endif

/* The data-type bits of aclprofCreateConfig(), written as acl_prof.h:26-43 writes them. */
#define ACL_PROF_ACL_API 0x0001ULL
#define ACL_PROF_TASK_TIME 0x0002ULL
#define ACL_PROF_AICORE_METRICS 0x0004ULL
#define ACL_PROF_AICPU 0x0008ULL
#define ACL_PROF_L2CACHE 0x0010ULL
#define ACL_PROF_HCCL_TRACE 0x0020ULL
#define ACL_PROF_MSPROFTX 0x0080ULL
#define ACL_PROF_RUNTIME_API 0x0100ULL
#define ACL_PROF_TASK_TIME_L0 0x0800ULL
#define ACL_PROF_TASK_MEMORY 0x1000ULL
#define ACL_PROF_OP_ATTR 0x4000ULL
#define ACL_PROF_AICORE_SHAPE 0x800000000ULL

/* libascendcl.so (acl_prof.h:162-245, acl_rt.h:1618-1659). */
aclError aclprofInit(const char *profilerResultPath, size_t length);
aclError aclprofFinalize(void);
aclError aclprofStart(const aclprofConfig *profilerConfig);
aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums, aclprofAicoreMetrics aicoreMetrics,
                                   const aclprofAicoreEvents *aicoreEvents, uint64_t dataTypeConfig);
aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig);
aclError aclprofStop(const aclprofConfig *profilerConfig);
aclError aclprofSetConfig(aclprofConfigType configType, const char *config, size_t configLength);
aclError aclrtGetDevice(int32_t *deviceId);
aclError aclrtSynchronizeDevice(void);
aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout);

/* libmsprofiler.so (prof_acl_api.h:211-219; its Status is int32_t). @featuresData is set to
 * an array of *@featuresSize feature records that CANN owns. */
int32_t aclprofGetSupportedFeatures(size_t *featuresSize, void **featuresData);
int32_t aclprofGetSupportedFeaturesV2(size_t *featuresSize, void **featuresData);

#endif /* NPUPROF_RANK_ACL_API_H */
