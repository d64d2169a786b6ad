/* SPDX-License-Identifier: MIT */
#include "client/progress.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define TIME_MAX_MS (86400.0 * 1000 * 366)      /* a year: beyond it a value is nonsense, shown "-" */

/* A JSON number in @v as a double that is finite and not negative. Return: whether it is one. */
static bool nonneg_number(const json_t *v, double *ret)
{
        double x;

        if (!json_is_number(v))
                return false;
        x = json_number_value(v);
        if (!isfinite(x) || x < 0 || x > TIME_MAX_MS)
                return false;
        *ret = x;
        return true;
}

const char *npf_cli_step_time(const json_t *ms, bool spaced, char buf[NPF_CLI_TIME_MAX])
{
        const char *sp = spaced ? " " : "";
        double x;

        if (!nonneg_number(ms, &x))
                snprintf(buf, NPF_CLI_TIME_MAX, "-");
        else if (x < 9.995)
                snprintf(buf, NPF_CLI_TIME_MAX, "%.2f%sms", x, sp);
        else if (x < 999.95)
                snprintf(buf, NPF_CLI_TIME_MAX, "%.1f%sms", x, sp);
        else if (x < 59995)
                snprintf(buf, NPF_CLI_TIME_MAX, "%.2f%ss", x / 1000, sp);
        else {
                long long s = (long long) (x / 1000 + 0.5);
                snprintf(buf, NPF_CLI_TIME_MAX, "%lldm%02llds", s / 60, s % 60);
        }
        return buf;
}

const char *npf_cli_duration(double s, char buf[NPF_CLI_TIME_MAX])
{
        long long t = (long long) (s + 0.5);

        if (t >= 86400)
                snprintf(buf, NPF_CLI_TIME_MAX, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
        else if (t >= 3600)
                snprintf(buf, NPF_CLI_TIME_MAX, "%lldh%02lldm", t / 3600, t % 3600 / 60);
        else if (t >= 60)
                snprintf(buf, NPF_CLI_TIME_MAX, "%lldm%02llds", t / 60, t % 60);
        else
                snprintf(buf, NPF_CLI_TIME_MAX, "%llds", t);
        return buf;
}

bool npf_cli_rank_stalled(const json_t *rank)
{
        return json_is_true(json_object_get(rank, "stalled"));
}

void npf_cli_print_stalled(FILE *f, const json_t *rank)
{
        char buf[NPF_CLI_TIME_MAX];
        double s;

        if (!npf_cli_rank_stalled(rank))
                return;
        fputs("  STALLED", f);
        if (nonneg_number(json_object_get(rank, "stalled_for_s"), &s))
                fprintf(f, " for %s", npf_cli_duration(s, buf));
}

void npf_cli_print_text(FILE *f, const char *s)
{
        for (; s && *s; s++)
                fputc((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

/* "17, 18, ... (N more)": the stalled ranks of @list (integers; others skipped). Return: how many. */
static size_t print_rank_list(FILE *f, const json_t *list, bool print)
{
        size_t i, n = 0;
        json_t *r;

        json_array_foreach(list, i, r) {
                if (!json_is_integer(r))
                        continue;
                if (print && n < NPF_CLI_STALLED_LISTED)
                        fprintf(f, "%s%lld", n ? ", " : "", (long long) json_integer_value(r));
                n++;
        }
        if (print && n > NPF_CLI_STALLED_LISTED)
                fprintf(f, " and %zu more", n - NPF_CLI_STALLED_LISTED);
        return n;
}

/* The stalled ranks: the progress's list, else those of @ranks marked stalled. Return: a new array. */
static json_t *stalled_ranks(const json_t *progress, const json_t *ranks)
{
        json_t *listed = json_object_get(progress, "stalled_ranks"), *out, *r;
        size_t i;

        if (json_is_array(listed))
                return json_incref(listed);
        out = json_array();
        json_array_foreach(ranks, i, r)
                if (npf_cli_rank_stalled(r) && json_is_integer(json_object_get(r, "rank")))
                        json_array_append(out, json_object_get(r, "rank"));
        return out;
}

void npf_cli_print_progress(FILE *f, const json_t *progress, const json_t *ranks)
{
        static const char indent[] = "          ";
        json_t *slow = json_object_get(progress, "slowdown"), *stalled;
        char a[NPF_CLI_TIME_MAX], b[NPF_CLI_TIME_MAX];
        double factor;
        size_t n;

        fprintf(f, "progress: step time %s\n", npf_cli_step_time(json_object_get(progress, "step_time_ms"), true, a));
        if (json_is_object(slow)) {
                json_t *since = json_object_get(slow, "since_step");
                fprintf(f, "%sslowdown", indent);
                if (json_is_integer(since))
                        fprintf(f, " since step %lld", (long long) json_integer_value(since));
                if (nonneg_number(json_object_get(slow, "factor"), &factor)) {
                        fprintf(f, ": %.2fx", factor);
                        if (json_is_number(json_object_get(slow, "baseline_ms")))
                                fprintf(f, " the baseline %s",
                                        npf_cli_step_time(json_object_get(slow, "baseline_ms"), true, b));
                }
                fputc('\n', f);
        }
        stalled = stalled_ranks(progress, ranks);
        n = print_rank_list(f, stalled, false);
        if (n > 0) {
                fprintf(f, "%sstalled: ", indent);
                if (n > 1)
                        fprintf(f, "%zu ranks: ", n);
                else
                        fprintf(f, "rank ");
                print_rank_list(f, stalled, true);
                fputc('\n', f);
        }
        json_decref(stalled);
        if (json_is_string(json_object_get(progress, "message")) &&
            *json_string_value(json_object_get(progress, "message"))) {
                fputs(indent, f);
                npf_cli_print_text(f, json_string_value(json_object_get(progress, "message")));
                fputc('\n', f);
        }
}
