/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for CANN's libascendcl.so, for the tests of the acl backend: the device calls
 * of acl/acl_rt.h, and through its dependency on the stand-in libmsprofiler.so every
 * aclprof* call, as a program that dlopens libascendcl.so finds them. Built against CANN's
 * real acl/acl_rt.h.
 *
 * Behaviour, from hicann/runtime 681ef76:
 *   - aclrtGetDevice: 100000 for NULL; the logical device set in this thread, else
 *     ACL_ERROR_RT_CONTEXT_NULL (src/acl/aclrt_impl/device.cpp:131-142). The stand-in's
 *     thread has the device $NPF_ACL_STUB_SET_DEVICE, and none when it is unset.
 *   - aclrtSynchronizeDeviceWithTimeout: 107000 (ACL_ERROR_RT_PARAM_INVALID) for a timeout
 *     of 0 or below -1 (device.cpp:168-184); both it and aclrtSynchronizeDevice give
 *     ACL_ERROR_RT_CONTEXT_NULL with no device set (device.cpp:159-166); else 0.
 * Each call is recorded in the log of libmsprofiler.c, and can be failed or held the same way.
 * Built with -DNPF_ACL_STUB_OLD_CANN, it is a CANN without aclrtSynchronizeDeviceWithTimeout.
 */
#include "stub-acl/stub.h"

#include <stdint.h>
#include <stdlib.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include "acl/acl_rt.h"
#pragma GCC diagnostic pop

static int set_device(int32_t *ret_device)
{
        const char *s = getenv("NPF_ACL_STUB_SET_DEVICE");

        if (!s || !*s)
                return ACL_ERROR_RT_CONTEXT_NULL;
        *ret_device = (int32_t) atoi(s);
        return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t *deviceId)
{
        int32_t d = -1;
        int r = deviceId ? set_device(&d) : ACL_ERROR_INVALID_PARAM;

        npf_stub_injected("aclrtGetDevice", &r);
        if (r == ACL_SUCCESS)
                *deviceId = d;
        if (r == ACL_SUCCESS)
                npf_stub_record("aclrtGetDevice -> 0 (device %d)", (int) d);
        else
                npf_stub_record("aclrtGetDevice -> %d", r);
        return r;
}

aclError aclrtSynchronizeDevice(void)
{
        int32_t d;
        int r = set_device(&d);

        npf_stub_injected("aclrtSynchronizeDevice", &r);
        npf_stub_record("aclrtSynchronizeDevice -> %d", r);
        return r;
}

#ifndef NPF_ACL_STUB_OLD_CANN
aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)
{
        int32_t d;
        int r = timeout == 0 || timeout < -1 ? ACL_ERROR_RT_PARAM_INVALID : set_device(&d);

        npf_stub_injected("aclrtSynchronizeDeviceWithTimeout", &r);
        npf_stub_record("aclrtSynchronizeDeviceWithTimeout timeout=%d -> %d", (int) timeout, r);
        return r;
}
#endif
