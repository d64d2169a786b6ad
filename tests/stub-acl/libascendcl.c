/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for CANN's libascendcl.so, for the tests of the acl backend: a recorder.
 *
 * Every aclprof* call appends one line, its name, its arguments and its result, to the file
 * $NPF_ACL_STUB_LOG names (nothing is recorded when it is unset):
 *
 *   aclprofInit path=/tmp/w length=6 -> 0
 *   aclprofSetConfig type=3 value=50 length=2 lib=libascendcl -> 0
 *   aclprofCreateConfig devices=[0] count=1 metrics=1 events=NULL mask=0x27 -> config#4
 *   aclprofStart config#4 -> 0
 *
 * $NPF_ACL_STUB_FAIL=FUNCTION:CODE[,FUNCTION:CODE...] makes FUNCTION return CODE (and
 * aclprofCreateConfig return NULL); every other call returns 0.
 * $NPF_ACL_STUB_HOLD=FUNCTION:MS[,...] makes FUNCTION take MS milliseconds, as a real runtime
 * can; it first records "FUNCTION held for MS ms", so that a test can act while it runs.
 *
 * Built as libascendcl.so with all seven calls, and with -DNPF_ACL_STUB_MSPROFILER as
 * libmsprofiler.so with aclprofSetConfig only (its lines say lib=libmsprofiler).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef NPF_ACL_STUB_MSPROFILER
#define STUB_LIB "libmsprofiler"
#else
#define STUB_LIB "libascendcl"
#endif

int aclprofSetConfig(int type, const char *value, size_t length);
#ifndef NPF_ACL_STUB_MSPROFILER
int aclprofInit(const char *path, size_t length);
void *aclprofCreateConfig(uint32_t *devices, uint32_t count, int metrics, const void *events, uint64_t mask);
int aclprofStart(const void *config);
int aclprofStop(const void *config);
int aclprofDestroyConfig(const void *config);
int aclprofFinalize(void);
#endif

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
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

/* The number the list in $@variable ("FUNCTION:N,...") gives @function, else 0. */
static int listed(const char *variable, const char *function)
{
        const char *s = getenv(variable);
        size_t len = strlen(function);

        while (s && *s) {
                if (strncmp(s, function, len) == 0 && s[len] == ':')
                        return atoi(s + len + 1);
                s = strchr(s, ',');
                if (s)
                        s++;
        }
        return 0;
}

/* The code $NPF_ACL_STUB_FAIL names for @function, after the time $NPF_ACL_STUB_HOLD gives it. */
static int injected(const char *function)
{
        int ms = listed("NPF_ACL_STUB_HOLD", function);

        if (ms > 0) {
                record("%s held for %d ms", function, ms);
                usleep((useconds_t) ms * 1000u);
        }
        return listed("NPF_ACL_STUB_FAIL", function);
}

int aclprofSetConfig(int type, const char *value, size_t length)
{
        int r = injected("aclprofSetConfig");

        record("aclprofSetConfig type=%d value=%.*s length=%zu lib=" STUB_LIB " -> %d",
               type, value ? (int) length : 4, value ? value : "NULL", length, r);
        return r;
}

#ifndef NPF_ACL_STUB_MSPROFILER
/* Configurations handed out, recognised again by their address. */
typedef struct stub_config {
        unsigned id;
} stub_config_t;

static stub_config_t configs[64];
static unsigned configs_made;

static unsigned config_id(const void *config)
{
        uintptr_t p = (uintptr_t) config, first = (uintptr_t) configs;

        if (p < first || p >= first + sizeof(configs) || (p - first) % sizeof(configs[0]))
                return 0;
        return ((const stub_config_t *) config)->id;
}

int aclprofInit(const char *path, size_t length)
{
        int r = injected("aclprofInit");

        record("aclprofInit path=%s length=%zu -> %d", path ? path : "NULL", length, r);
        return r;
}

void *aclprofCreateConfig(uint32_t *devices, uint32_t count, int metrics, const void *events, uint64_t mask)
{
        char list[1024] = "";
        size_t used = 0;
        stub_config_t *c = NULL;

        for (uint32_t i = 0; devices && i < count && used < sizeof(list) - 16; i++)
                used += (size_t) snprintf(list + used, sizeof(list) - used, "%s%u", i ? "," : "", devices[i]);
        if (!injected("aclprofCreateConfig")) {
                configs_made++;
                c = &configs[configs_made % (sizeof(configs) / sizeof(configs[0]))];
                c->id = configs_made;
        }
        if (c)
                record("aclprofCreateConfig devices=[%s] count=%u metrics=%d events=%s mask=0x%llx -> config#%u",
                       list, count, metrics, events ? "set" : "NULL", (unsigned long long) mask, c->id);
        else
                record("aclprofCreateConfig devices=[%s] count=%u metrics=%d events=%s mask=0x%llx -> NULL",
                       list, count, metrics, events ? "set" : "NULL", (unsigned long long) mask);
        return c;
}

int aclprofStart(const void *config)
{
        int r = injected("aclprofStart");

        record("aclprofStart config#%u -> %d", config_id(config), r);
        return r;
}

int aclprofStop(const void *config)
{
        int r = injected("aclprofStop");

        record("aclprofStop config#%u -> %d", config_id(config), r);
        return r;
}

int aclprofDestroyConfig(const void *config)
{
        int r = injected("aclprofDestroyConfig");

        record("aclprofDestroyConfig config#%u -> %d", config_id(config), r);
        return r;
}

int aclprofFinalize(void)
{
        int r = injected("aclprofFinalize");

        record("aclprofFinalize -> %d", r);
        return r;
}
#endif
