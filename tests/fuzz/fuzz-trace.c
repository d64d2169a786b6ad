/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the Chrome trace reader and its reports. Besides "no crash, no
 * leak, no UB" it checks what the callers rely on: a failure has a known errno and a
 * terminated message, a success gives a report that jansson can write (names stay UTF-8),
 * a text report, steps in order with the figures inside their range, and for every
 * operator 0 <= self <= total (a moment is the self time of one span at most, and it lies
 * inside an outermost span of that name); every thread says whether it is a device's, and
 * malformed elements are described, with their place, exactly when there are some.
 * The scanner's size limits are lowered when building this (Makefile), so that it reaches them.
 */
#include "replay/trace.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ops(const json_t *list)
{
        const json_t *e;
        size_t i;

        json_array_foreach(list, i, e) {
                double self = json_real_value(json_object_get(e, "self_us"));
                double total = json_real_value(json_object_get(e, "total_us"));
                if (!json_is_string(json_object_get(e, "name")) || self < 0 || self > total)
                        abort();
        }
}

static void check(const npf_trace_t *t)
{
        const npf_trace_step_t *s;
        npf_trace_step_stats_t st;
        size_t n = npf_trace_steps(t, &s);

        npf_trace_step_stats(t, &st);
        if (st.n != n)
                abort();
        for (size_t i = 0; i < n; i++)
                if (s[i].dur_us < 0 || s[i].step < 0 || (i > 0 && s[i].step < s[i - 1].step) || s[i].dur_us > st.max_us)
                        abort();
        if (n && (st.median_us > st.p90_us || st.p90_us > st.max_us))
                abort();

        json_t *j = npf_trace_report_json(t, 8), *th;
        size_t i;
        if (!j)
                abort();
        check_ops(json_object_get(j, "top_self"));
        check_ops(json_object_get(j, "top_total"));
        json_array_foreach(json_object_get(j, "threads"), i, th)
                if (!json_is_boolean(json_object_get(th, "device")))
                        abort();
        const char *m = json_string_value(json_object_get(j, "first_malformed"));
        if ((json_integer_value(json_object_get(j, "malformed")) > 0) != (m != NULL) ||
            (m && strncmp(m, "line ", 5) != 0))
                abort();
        char *dump = json_dumps(j, 0);
        if (!dump)
                abort();
        free(dump);
        json_decref(j);

        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f || npf_trace_report_text(t, f, 8) != 0)
                abort();
        fclose(f);
        if (strlen(text) != len)
                abort();
        free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char err[NPF_TRACE_ERR_MAX];
        npf_trace_t *t = NULL;
        int r;

        memset(err, 'x', sizeof(err));
        r = npf_trace_load(data, size, NULL, NULL, &t, err);
        if (r == 0) {
                if (!t)
                        abort();
                check(t);
                npf_trace_free(t);
        } else if ((r != -EINVAL && r != -ENOMSG && r != -E2BIG && r != -ENOMEM) || t ||
                   !memchr(err, '\0', sizeof(err)) || err[0] == '\0') {
                abort();
        }
        return 0;
}
