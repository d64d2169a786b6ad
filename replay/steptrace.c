/* SPDX-License-Identifier: MIT */
/* step_trace_time.csv: a header of known names, then one row of numbers a step. */
#include "replay/steptrace.h"
#include "lib/array.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COLUMNS_MAX 64

enum col { C_STEP, C_COMPUTING, C_NOT_OVERLAPPED, C_OVERLAPPED, C_COMMUNICATION, C_FREE, C_STAGE, C_BUBBLE,
           C_PREPARING, C_OTHER };

static const char *const names[] = {
        [C_STEP] = "Step", [C_COMPUTING] = "Computing", [C_NOT_OVERLAPPED] = "Communication(Not Overlapped)",
        [C_OVERLAPPED] = "Overlapped", [C_COMMUNICATION] = "Communication", [C_FREE] = "Free",
        [C_STAGE] = "Stage", [C_BUBBLE] = "Bubble", [C_PREPARING] = "Preparing",
};

/* The fields of one line, split at commas, each trimmed of spaces, tabs and quotes. */
static size_t fields(char *line, char **ret, size_t max)
{
        size_t n = 0;

        for (char *p = line; n < max;) {
                char *comma = strchr(p, ',');
                char *end = comma ? comma : p + strlen(p);
                while (*p == ' ' || *p == '\t' || *p == '"')
                        p++;
                char *e = end;
                while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '"' || e[-1] == '\r' || e[-1] == '\n'))
                        e--;
                *e = '\0';
                ret[n++] = p;
                if (!comma)
                        break;
                p = comma + 1;
        }
        return n;
}

static enum col column(const char *name)
{
        for (size_t i = 0; i < C_OTHER; i++)
                if (!strcmp(name, names[i]))
                        return (enum col) i;
        return C_OTHER;
}

/* Microseconds to nanoseconds, rounded. */
static int to_ns(const char *s, int64_t *ret)
{
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (end == s || *end || errno || !isfinite(v) || fabs(v) > 9e12)
                return -EINVAL;
        *ret = (int64_t) llround(v * 1000.0);
        return 0;
}

int64_t npf_steptrace_load(const char *path, npf_dev_breakdown_t **ret, char *err)
{
        FILE *f = fopen(path, "re");
        npf_dev_breakdown_t *rows = NULL;
        enum col cols[COLUMNS_MAX];
        char *line = NULL, *v[COLUMNS_MAX];
        size_t cap = 0, cap_rows = 0, n_cols = 0, n = 0, n_rows = 0, bytes = 0;
        ssize_t len;
        int64_t r = 0;

        if (!f) {
                r = -errno;
                snprintf(err, NPF_STEPTRACE_ERR_MAX, "cannot open %.180s: %s", path, strerror(errno));
                return r;
        }
        for (size_t lineno = 1; (len = getline(&line, &cap, f)) >= 0; lineno++) {
                npf_dev_breakdown_t b = { .step = -1 };
                int64_t *slot[C_OTHER] = {
                        [C_COMPUTING] = &b.computing, [C_NOT_OVERLAPPED] = &b.not_overlapped,
                        [C_OVERLAPPED] = &b.overlapped, [C_COMMUNICATION] = &b.communication, [C_FREE] = &b.free,
                        [C_STAGE] = &b.stage, [C_BUBBLE] = &b.bubble, [C_PREPARING] = &b.preparing,
                };
                if ((bytes += (size_t) len) > NPF_STEPTRACE_BYTES_MAX) {
                        snprintf(err, NPF_STEPTRACE_ERR_MAX, "%.180s: larger than %zu MiB", path,
                                 NPF_STEPTRACE_BYTES_MAX >> 20);
                        r = -E2BIG;
                        goto out;
                }
                n = fields(line, v, COLUMNS_MAX);
                if (lineno == 1) {
                        bool step = false, computing = false;
                        /* A UTF-8 byte-order mark before the first name. */
                        if (!strncmp(v[0], "\xef\xbb\xbf", 3))
                                v[0] += 3;
                        for (n_cols = 0; n_cols < n; n_cols++) {
                                cols[n_cols] = column(v[n_cols]);
                                step |= cols[n_cols] == C_STEP;
                                computing |= cols[n_cols] == C_COMPUTING;
                        }
                        if (!step || !computing) {
                                snprintf(err, NPF_STEPTRACE_ERR_MAX,
                                         "%.180s: line 1: no Step and Computing columns: not a step_trace_time.csv", path);
                                r = -EINVAL;
                                goto out;
                        }
                        continue;
                }
                if (n == 1 && !v[0][0])
                        continue;               /* an empty line */
                for (size_t i = 0; i < n && i < n_cols; i++) {
                        if (cols[i] == C_STEP) {
                                char *end;
                                if (!v[i][0] || !strcmp(v[i], "None"))
                                        continue;
                                errno = 0;
                                b.step = strtoll(v[i], &end, 10);
                                if (*end || errno || b.step < 0)
                                        goto bad;
                        } else if (cols[i] != C_OTHER && v[i][0] && to_ns(v[i], slot[cols[i]]) < 0) {
                                goto bad;
                        }
                        continue;
                bad:
                        snprintf(err, NPF_STEPTRACE_ERR_MAX, "%.160s: line %zu: %s \"%.24s\" is not a number", path,
                                 lineno, names[cols[i]], v[i]);
                        r = -EINVAL;
                        goto out;
                }
                if (n_rows == NPF_STEPTRACE_ROWS_MAX) {
                        snprintf(err, NPF_STEPTRACE_ERR_MAX, "%.180s: more than %u steps", path, NPF_STEPTRACE_ROWS_MAX);
                        r = -E2BIG;
                        goto out;
                }
                if (npf_array_grow((void **) &rows, &cap_rows, n_rows + 1, sizeof(*rows), 64) < 0) {
                        r = -ENOMEM;
                        goto out;
                }
                rows[n_rows++] = b;
        }
        if (ferror(f)) {
                r = -EIO;
                snprintf(err, NPF_STEPTRACE_ERR_MAX, "cannot read %.180s", path);
                goto out;
        }
        if (n_cols == 0) {
                snprintf(err, NPF_STEPTRACE_ERR_MAX, "%.180s: the file is empty", path);
                r = -EINVAL;
                goto out;
        }
        *ret = rows;
        rows = NULL;
        r = (int64_t) n_rows;
out:
        free(rows);
        free(line);
        fclose(f);
        return r;
}
