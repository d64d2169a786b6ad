/* SPDX-License-Identifier: MIT */
#include "conf/kineto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct text {
        char *buf;
        size_t len, used;
        bool full;
} text_t;

static void put(text_t *t, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (t->full)
                return;
        va_start(ap, fmt);
        n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t) n >= t->len - t->used)
                t->full = true;
        else
                t->used += (size_t) n;
}

/* Whether libkineto's parser reads @s back as it is: no newline, '#' (a comment) or '=' (AbstractConfig.cpp:69-72, 134-182). */
static bool sayable(const char *s)
{
        return s[strcspn(s, "\r\n#=")] == '\0';
}

static int refuse(char *err, size_t len, const char *fmt, ...)
{
        va_list ap;

        if (err && len) {
                va_start(ap, fmt);
                vsnprintf(err, len, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

/* Where libkineto inserts "_<pid>" in @path: before the first ".pt.trace.json", else the first ".json"; NULL: nowhere. */
static const char *pid_at(const char *path)
{
        const char *at = strstr(path, ".pt.trace.json");

        return at ? at : strstr(path, ".json");
}

int npf_kineto_trace_name(const char *log_file, int32_t pid, char *buf, size_t len)
{
        const char *at = pid_at(log_file);
        int n = at ? snprintf(buf, len, "%.*s_%" PRId32 "%s", (int) (at - log_file), log_file, pid, at)
                   : snprintf(buf, len, "%s", log_file);

        return n < 0 || (size_t) n >= len ? -ENAMETOOLONG : 0;
}

int npf_kineto_config_text(const npf_shm_args_t *a, const npf_kineto_target_t *t, char *buf, size_t len,
                           char *err, size_t err_len)
{
        text_t out = { .buf = buf, .len = len };
        const char *at = pid_at(t->log_file);
        const char *bad = !sayable(t->log_file) ? t->log_file : !sayable(t->trace_id) ? t->trace_id
                          : !sayable(t->group_id) ? t->group_id : NULL;

        if (bad)
                return refuse(err, err_len, "'%s' holds a newline, '#' or '=', which libkineto cannot read", bad);
        if (t->log_file[0] != '/')
                return refuse(err, err_len, "the trace file '%s' is not an absolute path", t->log_file);
        /* libkineto inserts the pid at the first ".pt.trace.json", else ".json": it must be the name's end. */
        if (!at || strcmp(at, strncmp(at, ".pt.trace.json", 14) == 0 ? ".pt.trace.json" : ".json") != 0)
                return refuse(err, err_len, "libkineto would not name '%s' per process: its first \".json\" must "
                              "end it", t->log_file);
        if (len)
                buf[0] = '\0';

        /* As `dyno gputrace` lays it out (gputrace.rs:30-51): the file, the window, the switches. */
        put(&out, "ACTIVITIES_LOG_FILE=%s\n", t->log_file);
        if (a->duration_ms) {
                put(&out, "PROFILE_START_TIME=%" PRIu64 "\n", t->start_unix_ms);
                put(&out, "ACTIVITIES_DURATION_MSECS=%" PRIu64 "\n", a->duration_ms);
        } else {
                uint64_t steps = a->step_count > a->warmup ? a->step_count - a->warmup : 1;
                int64_t start = a->start_step == NPF_STEP_NEXT ? 0 : a->start_step + (int64_t) a->warmup;
                put(&out, "PROFILE_START_ITERATION=%" PRId64 "\n", start);
                if (a->start_at_multiple_of)
                        put(&out, "PROFILE_START_ITERATION_ROUNDUP=%" PRIu64 "\n", a->start_at_multiple_of);
                put(&out, "ACTIVITIES_WARMUP_ITERATIONS=%" PRIu64 "\n", a->warmup);
                put(&out, "ACTIVITIES_ITERATIONS=%" PRIu64 "\n", steps);
        }
        put(&out, "PROFILE_REPORT_INPUT_SHAPES=%s\n", a->flags & NPF_FLAG_RECORD_SHAPES ? "true" : "false");
        put(&out, "PROFILE_PROFILE_MEMORY=%s\n", a->flags & NPF_FLAG_PROFILE_MEMORY ? "true" : "false");
        put(&out, "PROFILE_WITH_STACK=%s\n", a->flags & NPF_FLAG_WITH_STACK ? "true" : "false");
        put(&out, "PROFILE_WITH_FLOPS=%s\n", a->flags & NPF_FLAG_WITH_FLOPS ? "true" : "false");
        put(&out, "PROFILE_WITH_MODULES=%s\n", a->flags & NPF_FLAG_WITH_MODULES ? "true" : "false");
        put(&out, "REQUEST_TRACE_ID=%s\n", t->trace_id);
        put(&out, "REQUEST_GROUP_TRACE_ID=%s\n", t->group_id);
        /*
         * Names every libkineto since PyTorch 2.0 knows (libkineto/include/ActivityType.h:80-110):
         * an unknown one stops the parse. Last, so that nothing after it is lost if one were.
         */
        if ((a->activities & (NPF_ACT_CPU | NPF_ACT_NPU)) == NPF_ACT_CPU)
                put(&out, "ACTIVITY_TYPES=cpu_op,user_annotation,cpu_instant_event,python_function\n");
        else if ((a->activities & (NPF_ACT_CPU | NPF_ACT_NPU)) == NPF_ACT_NPU)
                put(&out, "ACTIVITY_TYPES=kernel,gpu_memcpy,gpu_memset,gpu_user_annotation,cuda_runtime\n");
        if (out.full)
                return -ENOSPC;
        return (int) out.used;
}
