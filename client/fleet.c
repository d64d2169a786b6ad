/* SPDX-License-Identifier: MIT */
#include "client/fleet.h"
#include "client/ipc.h"
#include "client/progress.h"
#include "client/status.h"
#include "lib/clock.h"
#include "lib/steptext.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WAIT_POLL_MS 250

/* --- one record ------------------------------------------------------------------------ */

json_t *npf_fleet_parse(const char *name, const char *bytes, size_t len, int64_t now_ms, char *why, size_t why_len)
{
        json_error_t e;
        json_t *r = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, &e);
        json_int_t format = 0, written = 0, mtime = 0, generation = 0, attached = 0;
        const char *node = NULL, *state = NULL, *path = NULL, *fstate = NULL, *hash = NULL;
        json_t *error = NULL, *states = NULL, *wins = NULL, *recent = NULL;
        double interval = 0;
        size_t stem = strlen(name) - strlen(".json");

        if (!r) {
                if (len == 0)
                        snprintf(why, why_len, "empty");
                else if (e.position >= (int) len)
                        snprintf(why, why_len, "truncated: %s at line %d, column %d", e.text, e.line, e.column);
                else
                        snprintf(why, why_len, "not JSON: %s at line %d, column %d", e.text, e.line, e.column);
                return NULL;
        }
        if (json_unpack(r, "{s:I}", "format", &format) < 0 || format != NPF_FLEET_FORMAT) {
                snprintf(why, why_len, "not a record of format %d (format %s)", NPF_FLEET_FORMAT,
                         json_is_integer(json_object_get(r, "format")) ? "other" : "missing");
                if (json_is_integer(json_object_get(r, "format")))
                        snprintf(why, why_len, "a record of format %lld; this npuprofctl reads format %d",
                                 (long long) format, NPF_FLEET_FORMAT);
                json_decref(r);
                return NULL;
        }
        if (json_unpack_ex(r, &e, 0, "{s:s, s:s, s:I, s:F, s:{s:s, s:s, s:s, s:I, s:o}, s:{s:I}, s:{s:I, s:o}, "
                           "s:{s:o, s:o}}",
                           "node", &node, "state", &state, "written_unix_ms", &written, "interval_s", &interval,
                           "file", "path", &path, "state", &fstate, "hash", &hash, "mtime_ns", &mtime, "error", &error,
                           "in_force", "generation", &generation,
                           "ranks", "attached", &attached, "states", &states,
                           "windows", "outcomes", &wins, "recent", &recent) < 0) {
                snprintf(why, why_len, "not a whole record: %s", e.text);
                json_decref(r);
                return NULL;
        }
        if (strlen(node) != stem || strncmp(node, name, stem) != 0) {
                snprintf(why, why_len, "the record of node '%.64s', not of '%.*s'", node, (int) stem, name);
        } else if (strcmp(state, "running") != 0 && strcmp(state, "stopped") != 0) {
                snprintf(why, why_len, "state '%.32s' is neither running nor stopped", state);
        } else if (!json_is_object(states) || !json_is_object(wins) || !json_is_array(recent) ||
                   (!json_is_null(error) && !json_is_object(error))) {
                snprintf(why, why_len, "ranks.states, windows.outcomes, windows.recent or file.error has the wrong type");
        } else if (!(interval > 0 && interval <= 86400)) {
                snprintf(why, why_len, "interval_s %g is not from 0 to a day", interval);
        } else if (written > now_ms + NPF_FLEET_FUTURE_MS) {
                snprintf(why, why_len, "written %.0f s in the future (is this node's clock or its clock right?)",
                         (double) (written - now_ms) / 1000.0);
        } else {
                return r;
        }
        json_decref(r);
        return NULL;
}

/* Read DIR/@name, at most NPF_FLEET_RECORD_MAX bytes. Return: the record, or NULL with @why. */
static json_t *read_record(int dfd, const char *name, int64_t now_ms, char *why, size_t why_len)
{
        /* O_NONBLOCK: a FIFO planted in the directory must not hang the reader. */
        int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        static char buf[NPF_FLEET_RECORD_MAX + 1];
        struct stat st;
        size_t len = 0;
        ssize_t n;

        if (fd < 0) {
                snprintf(why, why_len, "cannot be opened: %s", errno == ELOOP ? "a symbolic link" : strerror(errno));
                return NULL;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                snprintf(why, why_len, "not a regular file");
                close(fd);
                return NULL;
        }
        while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        snprintf(why, why_len, "cannot be read: %s", strerror(errno));
                        close(fd);
                        return NULL;
                }
                len += (size_t) n;
        }
        close(fd);
        if (len > NPF_FLEET_RECORD_MAX) {
                snprintf(why, why_len, "larger than a record's %d KiB", NPF_FLEET_RECORD_MAX / 1024);
                return NULL;
        }
        return npf_fleet_parse(name, buf, len, now_ms, why, why_len);
}

/* --- the fleet --------------------------------------------------------------------------- */

/* The newest version of one configuration file, and the generation its holders give it. */
typedef struct version {
        const char *path, *hash;
        json_int_t mtime_ns;
        json_int_t generation;          /* -1: its holders give it different generations */
        unsigned nodes;
} version_t;

static int cmp_name(const void *a, const void *b)
{
        const json_t *x = *(json_t *const *) a, *y = *(json_t *const *) b;

        return strcmp(json_string_value(json_object_get(x, "node")), json_string_value(json_object_get(y, "node")));
}

static const char *file_key(const json_t *record, const char *key)
{
        return json_string_value(json_object_get(json_object_get(record, "file"), key));
}

static json_int_t file_mtime(const json_t *record)
{
        return json_integer_value(json_object_get(json_object_get(record, "file"), "mtime_ns"));
}

static version_t *version_of(version_t *v, size_t n, const char *path)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i].path, path) == 0)
                        return &v[i];
        return NULL;
}

static bool same_version(const json_t *record, const version_t *v)
{
        return file_mtime(record) == v->mtime_ns && strcmp(file_key(record, "hash"), v->hash) == 0;
}

/* The ranks of a record summed up: attached, collecting, the range of their steps. */
static json_t *ranks_summary(const json_t *record)
{
        const json_t *ranks = json_object_get(record, "ranks");
        json_t *states = json_object_get(ranks, "states"), *s, *min = json_null(), *max = json_null();
        json_int_t collecting = 0, stalled = 0;
        const char *state;

        json_object_foreach(states, state, s) {
                json_t *lo = json_object_get(s, "step_min"), *hi = json_object_get(s, "step_max");
                json_int_t count = json_integer_value(json_object_get(s, "count"));
                if (strcmp(state, "collecting") == 0 || strcmp(state, "flushing") == 0)
                        collecting += count;
                if (strcmp(state, "stalled") == 0)
                        stalled += count;
                if (json_is_integer(lo) && (json_is_null(min) || json_integer_value(lo) < json_integer_value(min)))
                        min = lo;
                if (json_is_integer(hi) && (json_is_null(max) || json_integer_value(hi) > json_integer_value(max)))
                        max = hi;
        }
        return json_pack("{s:O, s:I, s:I, s:O, s:O}", "attached", json_object_get(ranks, "attached"), "collecting",
                         collecting, "stalled", stalled, "step_min", min, "step_max", max);
}

/* --- who is behind --------------------------------------------------------------------- */

static json_int_t int_at(const json_t *o, const char *key)
{
        return json_integer_value(json_object_get(o, key));
}

/* Behind first: stalled ranks, then by how far behind, then by node and rank. */
static int cmp_behind(const void *a, const void *b)
{
        const json_t *x = *(json_t *const *) a, *y = *(json_t *const *) b;
        int sx = json_is_true(json_object_get(x, "stalled")), sy = json_is_true(json_object_get(y, "stalled"));
        int c;

        if (sx != sy)
                return sy - sx;
        if (int_at(x, "behind") != int_at(y, "behind"))
                return int_at(x, "behind") > int_at(y, "behind") ? -1 : 1;
        if ((c = strcmp(json_string_value(json_object_get(x, "node")), json_string_value(json_object_get(y, "node")))))
                return c;
        return (int_at(x, "rank") > int_at(y, "rank")) - (int_at(x, "rank") < int_at(y, "rank"));
}

/* A progress record's, or NULL when the record has none or not an object. */
static const json_t *progress_of(const json_t *record)
{
        const json_t *p = json_object_get(record, "progress");

        return json_is_object(p) && json_is_integer(json_object_get(p, "step_max")) ? p : NULL;
}

/* "rank 17 on node-03", "ranks 17 on node-03 and 4 on node-07", "... and 3 more" of @who (n > 0). */
static void say_who(FILE *f, json_t *const *who, size_t n, size_t total)
{
        size_t named = n < 4 ? n : 4;

        fprintf(f, "rank%s ", total > 1 ? "s" : "");
        for (size_t i = 0; i < named; i++)
                fprintf(f, "%s%lld on %s", i == 0 ? "" : i + 1 == total ? " and " : ", ", (long long) int_at(who[i], "rank"),
                        json_string_value(json_object_get(who[i], "node")));
        if (named < total)
                fprintf(f, " and %zu more", total - named);
}

static void say_range(FILE *f, json_int_t lo, json_int_t hi)
{
        char a[32], b[32];

        if (lo == hi)
                fprintf(f, "%s", npf_step_text(lo, a));
        else
                fprintf(f, "%s to %s", npf_step_text(lo, a), npf_step_text(hi, b));
}

/*
 * The sentence about the fleet's stalled ranks, from @stalled (sorted lowest step first,
 * @n_stalled of them listed, @total in all), @known ranks with a step in the fresh records,
 * @stepping of them not stalled, in @step_lo..@step_hi, the fleet's highest step @top.
 * Return: a malloc'd sentence.
 */
static char *stall_sentence(json_t **stalled, size_t n_stalled, size_t total, json_int_t known, json_int_t stepping,
                            json_int_t step_lo, json_int_t step_hi, json_int_t top)
{
        char *text = NULL, d[NPF_CLI_TIME_MAX];
        size_t len = 0, n_low = 0;
        json_int_t low = int_at(stalled[0], "step"), o_lo = top, quiet_s = 0;
        FILE *f = open_memstream(&text, &len);

        if (!f)
                return NULL;
        for (size_t i = 0; i < n_stalled; i++) {
                double q = json_number_value(json_object_get(stalled[i], "stalled_for_s"));
                quiet_s = q > (double) quiet_s ? (json_int_t) q : quiet_s;
                if (int_at(stalled[i], "step") == low)
                        n_low++;
                else if (int_at(stalled[i], "step") < o_lo)
                        o_lo = int_at(stalled[i], "step");
        }
        npf_cli_duration((double) quiet_s, d);
        if (stepping == 0 && n_low == total && total == (size_t) known) {
                fprintf(f, "all %lld ranks have made no step for %s, all at step ", (long long) known, d);
                say_range(f, low, low);
                fprintf(f, ": none is behind another");
        } else if (stepping == 0) {
                /* Every rank is stalled: in synchronous training those at the lowest step hold up the others. */
                json_int_t others = known - (json_int_t) n_low;
                say_who(f, stalled, n_low, n_low);
                fprintf(f, " %s at step ", n_low == 1 ? "is" : "are");
                say_range(f, low, low);
                fprintf(f, ", the %lld other%s at ", (long long) others, others == 1 ? "" : "s");
                say_range(f, o_lo, top);
                fprintf(f, ": they wait for %s (no step for %s)", n_low == 1 ? "it" : "them", d);
        } else {
                say_who(f, stalled, n_stalled, total);
                fprintf(f, " %s stalled at step ", total == 1 ? "is" : "are");
                say_range(f, low, int_at(stalled[n_stalled - 1], "step"));
                fprintf(f, " (no step for %s), %s the %lld other%s at ", d, int_at(stalled[n_stalled - 1], "step") < step_lo
                        ? "behind" : "while", (long long) stepping, stepping == 1 ? "" : "s");
                say_range(f, step_lo, step_hi);
                fprintf(f, ", which still step");
        }
        fclose(f);
        return text;
}

/*
 * The fleet's progress from @records (sorted by node; @fresh[i] says whether record i is
 * running and not stale): {step_max, ranks: [{node, rank, step, behind, stalled,
 * stalled_for_s}, ...], more, stalled, message, unjudged: [node, ...]}.
 */
static json_t *behind_json(json_t *const *records, const bool *fresh, size_t n)
{
        json_t *top_record = NULL, *list = json_array(), *unjudged = json_array(), *stalled = json_array();
        json_int_t top = 0, more = 0, n_stalled = 0, known = 0, stepping = 0, s_lo = 0, s_hi = 0;
        bool any = false;

        for (size_t i = 0; i < n; i++) {
                const json_t *p = progress_of(records[i]);
                if (!fresh[i]) {
                        if (p && json_integer_value(json_object_get(json_object_get(records[i], "ranks"), "attached")))
                                json_array_append_new(unjudged, json_copy(json_object_get(records[i], "node")));
                        continue;
                }
                if (!p)
                        continue;
                const json_t *sp = json_object_get(p, "stepping");
                if (!any || int_at(p, "step_max") > top) {
                        top = int_at(p, "step_max");
                        top_record = records[i];
                }
                if (int_at(sp, "count") > 0 && json_is_integer(json_object_get(sp, "step_min"))) {
                        s_lo = stepping && s_lo < int_at(sp, "step_min") ? s_lo : int_at(sp, "step_min");
                        s_hi = stepping && s_hi > int_at(sp, "step_max") ? s_hi : int_at(sp, "step_max");
                        stepping += int_at(sp, "count");
                }
                known += int_at(p, "ranks");
                any = true;
        }
        /* The top node's steps move on after it wrote them: a node that wrote earlier is allowed the difference. */
        const json_t *tp = top_record ? progress_of(top_record) : NULL;
        double top_ms = json_number_value(json_object_get(tp, "step_time_ms"));
        bool top_moves = tp && top_ms > 0 && int_at(json_object_get(tp, "stepping"), "step_max") == top;
        json_int_t top_written = int_at(top_record, "written_unix_ms");

        for (size_t i = 0; any && i < n; i++) {
                const json_t *p = progress_of(records[i]), *sp = json_object_get(p, "stepping"), *r;
                const char *node = json_string_value(json_object_get(records[i], "node"));
                json_int_t written = int_at(records[i], "written_unix_ms");
                json_int_t expect = top - (top_moves && written < top_written
                                           ? (json_int_t) ((double) (top_written - written) / top_ms) : 0);
                size_t k;
                if (!fresh[i] || !p)
                        continue;
                json_array_foreach(json_object_get(p, "stalled"), k, r) {
                        json_t *e = json_pack("{s:s, s:I, s:I, s:I, s:b, s:O}", "node", node, "rank", int_at(r, "rank"),
                                              "step", int_at(r, "step"), "behind",
                                              top > int_at(r, "step") ? top - int_at(r, "step") : 0, "stalled", 1,
                                              "stalled_for_s", json_object_get(r, "stalled_for_s") ?
                                              json_object_get(r, "stalled_for_s") : json_null());
                        json_array_append(list, e);
                        json_array_append_new(stalled, e);
                }
                n_stalled += (json_int_t) json_array_size(json_object_get(p, "stalled")) + int_at(p, "stalled_more");
                more += int_at(p, "stalled_more");
                /*
                 * The whole node behind the fleet: its ranks said as one, and counted there; those
                 * behind its own fastest are still named apart, for they are further behind.
                 */
                bool whole = int_at(sp, "count") > 0 && expect - int_at(sp, "step_max") >= NPF_FLEET_LAG_STEPS;
                if (whole)
                        json_array_append_new(list, json_pack("{s:s, s:n, s:I, s:I, s:I, s:I, s:b, s:n}", "node", node,
                                                              "rank", "ranks", int_at(sp, "count"), "step",
                                                              int_at(sp, "step_max"), "step_min", int_at(sp, "step_min"),
                                                              "behind", top - int_at(sp, "step_max"), "stalled", 0,
                                                              "stalled_for_s"));
                json_array_foreach(json_object_get(p, "laggards"), k, r)
                        if (expect - int_at(r, "step") >= NPF_FLEET_LAG_STEPS)
                                json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:I, s:b, s:n}", "node", node,
                                                                      "rank", int_at(r, "rank"), "step", int_at(r, "step"),
                                                                      "behind", top - int_at(r, "step"), "stalled", 0,
                                                                      "stalled_for_s"));
                if (!whole)
                        more += int_at(p, "laggards_more");
        }

        /* Worst first, at most NPF_FLEET_LAGGARDS. */
        size_t total = json_array_size(list);
        json_t **sorted = calloc(total ? total : 1, sizeof(*sorted)), *ranks = json_array();
        for (size_t i = 0; sorted && i < total; i++)
                sorted[i] = json_array_get(list, i);
        if (sorted)
                qsort(sorted, total, sizeof(*sorted), cmp_behind);
        for (size_t i = 0; sorted && i < total; i++)
                if (i < NPF_FLEET_LAGGARDS)
                        json_array_append(ranks, sorted[i]);
                else
                        more++;
        free(sorted);

        /* The stalled ranks, lowest step first, for the sentence. */
        size_t ns = json_array_size(stalled);
        json_t **low = calloc(ns ? ns : 1, sizeof(*low));
        char *message = NULL;
        for (size_t i = 0; low && i < ns; i++)
                low[i] = json_array_get(stalled, i);
        if (low && ns) {
                for (size_t i = 1; i < ns; i++)         /* insertion sort by step, stable in node order */
                        for (size_t j = i; j > 0 && int_at(low[j], "step") < int_at(low[j - 1], "step"); j--) {
                                json_t *t = low[j];
                                low[j] = low[j - 1];
                                low[j - 1] = t;
                        }
                message = stall_sentence(low, ns, (size_t) n_stalled, known, stepping, s_lo, s_hi, top);
        }
        free(low);
        json_t *o = json_pack("{s:o, s:o, s:I, s:I, s:o, s:o}", "step_max", any ? json_integer(top) : json_null(),
                              "ranks", ranks, "more", more, "stalled", n_stalled,
                              "message", message ? json_string(message) : json_null(), "unjudged", unjudged);
        free(message);
        json_decref(list);
        json_decref(stalled);
        return o;
}

json_t *npf_fleet_judge(const char *dir, int64_t now_ms)
{
        json_t *unreadable = json_array(), *records = json_array();
        DIR *d = opendir(dir);
        struct dirent *de;
        char why[256];

        if (!d) {
                int e = errno;
                json_decref(unreadable);
                json_decref(records);
                errno = e;
                return NULL;
        }
        while ((de = readdir(d))) {
                size_t n = strlen(de->d_name);
                if (de->d_name[0] == '.' || n <= strlen(".json") || strcmp(de->d_name + n - 5, ".json") != 0)
                        continue;
                json_t *r = read_record(dirfd(d), de->d_name, now_ms, why, sizeof(why));
                if (r)
                        json_array_append_new(records, r);
                else
                        json_array_append_new(unreadable, json_pack("{s:s, s:s}", "file", de->d_name, "reason", why));
        }
        closedir(d);

        /* Sorted by node name, so that the table and every list read in one order. */
        size_t n = json_array_size(records);
        json_t **sorted = calloc(n ? n : 1, sizeof(*sorted));
        version_t *newest = calloc(n ? n : 1, sizeof(*newest));
        size_t n_versions = 0;
        for (size_t i = 0; i < n; i++)
                sorted[i] = json_array_get(records, i);
        qsort(sorted, n, sizeof(*sorted), cmp_name);

        /* The newest version of each file: the latest mtime, the greater hash between equals. */
        for (size_t i = 0; i < n; i++) {
                const char *path = file_key(sorted[i], "path"), *hash = file_key(sorted[i], "hash");
                json_int_t mtime = file_mtime(sorted[i]);
                version_t *v = version_of(newest, n_versions, path);
                if (!v) {
                        v = &newest[n_versions++];
                        *v = (version_t) { .path = path, .hash = hash, .mtime_ns = mtime };
                } else if (mtime > v->mtime_ns || (mtime == v->mtime_ns && strcmp(hash, v->hash) > 0)) {
                        v->hash = hash;
                        v->mtime_ns = mtime;
                }
        }
        for (size_t i = 0; i < n; i++) {
                version_t *v = version_of(newest, n_versions, file_key(sorted[i], "path"));
                json_int_t g = json_integer_value(json_object_get(json_object_get(sorted[i], "in_force"), "generation"));
                if (!same_version(sorted[i], v))
                        continue;
                v->generation = v->nodes++ == 0 || v->generation == g ? g : -1;
        }

        json_t *nodes = json_array(), *lagging = json_array(), *stale = json_array(), *stopped = json_array(),
               *invalid = json_array(), *versions = json_array();
        bool *fresh = calloc(n ? n : 1, sizeof(*fresh));
        for (size_t i = 0; i < n; i++) {
                json_t *r = sorted[i];
                const char *node = json_string_value(json_object_get(r, "node"));
                json_int_t written = json_integer_value(json_object_get(r, "written_unix_ms"));
                double interval_s = json_real_value(json_object_get(r, "interval_s"));
                json_int_t age = now_ms > written ? now_ms - written : 0;
                bool is_stopped = strcmp(json_string_value(json_object_get(r, "state")), "stopped") == 0;
                bool is_stale = !is_stopped && (double) age > NPF_FLEET_STALE_INTERVALS * interval_s * 1000.0;
                bool is_lagging = !same_version(r, version_of(newest, n_versions, file_key(r, "path"))) ||
                                  strcmp(file_key(r, "state"), "unknown") == 0;
                /* "unknown": not read yet (a daemon just started), which is lagging, not invalid. */
                bool is_invalid = strcmp(file_key(r, "state"), "invalid") == 0 ||
                                  strcmp(file_key(r, "state"), "missing") == 0;
                json_t *file = json_object_get(r, "file");

                if (fresh)
                        fresh[i] = !is_stale && !is_stopped;
                if (is_lagging)
                        json_array_append_new(lagging, json_string(node));
                if (is_stale)
                        json_array_append_new(stale, json_string(node));
                if (is_stopped)
                        json_array_append_new(stopped, json_string(node));
                if (is_invalid)
                        json_array_append_new(invalid, json_string(node));
                json_array_append_new(nodes, json_pack(
                        "{s:s, s:s, s:O, s:O, s:{s:O, s:O, s:O, s:O, s:O}, s:I, s:f, s:b, s:b, s:b, s:b, s:o, s:O, "
                        "s:O, s:O, s:O}",
                        "node", node,
                        "state", json_string_value(json_object_get(r, "state")),
                        "generation", json_object_get(json_object_get(r, "in_force"), "generation"),
                        "daemon", json_object_get(r, "daemon"),
                        "file", "path", json_object_get(file, "path"), "state", json_object_get(file, "state"),
                        "hash", json_object_get(file, "hash"), "mtime_ns", json_object_get(file, "mtime_ns"),
                        "error", json_object_get(file, "error"),
                        "age_ms", age,
                        "interval_s", interval_s,
                        "lagging", is_lagging, "stale", is_stale, "stopped", is_stopped, "invalid", is_invalid,
                        "ranks", ranks_summary(r),
                        "windows", json_object_get(json_object_get(r, "windows"), "outcomes"),
                        "recent", json_object_get(json_object_get(r, "windows"), "recent"),
                        "analysis", json_object_get(r, "analysis") ? json_object_get(r, "analysis") : json_null(),
                        "progress", progress_of(r) ? json_object_get(r, "progress") : json_null()));
        }
        json_t *behind = fresh ? behind_json(sorted, fresh, n) : NULL;
        free(fresh);
        for (size_t i = 0; i < n_versions; i++)
                json_array_append_new(versions, json_pack("{s:s, s:s, s:I, s:I, s:o}", "path", newest[i].path, "hash",
                                                          newest[i].hash, "mtime_ns", newest[i].mtime_ns, "nodes",
                                                          (json_int_t) newest[i].nodes, "generation",
                                                          newest[i].generation >= 0 ? json_integer(newest[i].generation)
                                                                                   : json_null()));
        json_t *fleet = json_pack("{s:s, s:o, s:O, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "dir", dir, "nodes", nodes,
                                  "generation", n_versions == 1 ? json_object_get(json_array_get(versions, 0), "generation")
                                                                : json_null(),
                                  "newest", versions, "lagging", lagging, "stale", stale, "stopped", stopped,
                                  "invalid", invalid, "unreadable", unreadable,
                                  "behind", behind ? behind : json_null());
        free(sorted);
        free(newest);
        json_decref(records);
        return fleet;
}

int npf_fleet_verdict(const json_t *fleet)
{
        static const char *const lists[] = { "lagging", "stale", "stopped", "invalid" };

        if (json_array_size(json_object_get(fleet, "nodes")) == 0)
                return 1;
        for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
                if (json_array_size(json_object_get(fleet, lists[i])) > 0)
                        return 1;
        return 0;
}

/* --- the table --------------------------------------------------------------------------- */

static void format_age(json_int_t ms, char *buf, size_t len)
{
        if (ms < 10000)
                snprintf(buf, len, "%.1fs", (double) ms / 1000.0);
        else if (ms < 120000)
                snprintf(buf, len, "%llds", (long long) ms / 1000);
        else if (ms < 7200000)
                snprintf(buf, len, "%lldm", (long long) ms / 60000);
        else
                snprintf(buf, len, "%lldh", (long long) ms / 3600000);
}

static void format_utc(json_int_t ns, char *buf, size_t len)
{
        time_t t = (time_t) (ns / 1000000000);
        struct tm tm;

        if (ns <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
                snprintf(buf, len, "never read");
}

/* The names in @list, comma-separated, at most @max of them. */
static void print_names(const json_t *list, size_t max)
{
        size_t i;
        json_t *s;

        json_array_foreach(list, i, s) {
                if (i == max) {
                        printf(", and %zu more", json_array_size(list) - max);
                        break;
                }
                printf("%s%s", i ? ", " : "", json_string_value(s));
        }
}

/* Who is behind the fleet's highest step, worst first, and the sentence about stalled ranks. */
static void print_behind_ranks(const json_t *behind)
{
        const json_t *ranks = json_object_get(behind, "ranks"), *message = json_object_get(behind, "message");
        char a[32], b[32], d[NPF_CLI_TIME_MAX];
        size_t i;
        json_t *r;

        if (json_array_size(ranks))
                printf("behind the fleet's highest step, %s:\n", npf_step_text(int_at(behind, "step_max"), a));
        json_array_foreach(ranks, i, r) {
                const char *node = json_string_value(json_object_get(r, "node"));
                if (json_is_integer(json_object_get(r, "rank")))
                        printf("  rank %lld on %s at step %s, %s behind", (long long) int_at(r, "rank"), node,
                               npf_step_text(int_at(r, "step"), a), npf_step_text(int_at(r, "behind"), b));
                else
                        printf("  %s: its %lld ranks at steps %s to %s, %lld or more behind", node,
                               (long long) int_at(r, "ranks"), npf_step_text(int_at(r, "step_min"), a),
                               npf_step_text(int_at(r, "step"), b), (long long) int_at(r, "behind"));
                if (json_is_true(json_object_get(r, "stalled")))
                        printf(", STALLED%s%s", json_is_number(json_object_get(r, "stalled_for_s")) ? " for " : "",
                               json_is_number(json_object_get(r, "stalled_for_s"))
                                       ? npf_cli_duration(json_number_value(json_object_get(r, "stalled_for_s")), d) : "");
                printf("\n");
        }
        if (int_at(behind, "more"))
                printf("  and %lld more\n", (long long) int_at(behind, "more"));
        if (json_is_string(message)) {
                printf("stalled: ");
                npf_cli_print_text(stdout, json_string_value(message));
                printf("\n");
        }
        if (json_array_size(json_object_get(behind, "unjudged"))) {
                printf("progress not judged, the record stale or stopped: ");
                print_names(json_object_get(behind, "unjudged"), 8);
                printf("\n");
        }
}

static void print_fleet(const json_t *fleet)
{
        const json_t *nodes = json_object_get(fleet, "nodes"), *versions = json_object_get(fleet, "newest");
        static const char *const lists[] = { "lagging", "stale", "stopped", "invalid" };
        size_t i;
        json_t *n, *v;

        if (json_array_size(nodes))
                printf("%-20s %-8s %5s  %-8s %-8s %9s %-17s %-11s %6s  %s\n", "NODE", "STATE", "GEN", "VERSION",
                       "FILE", "RANKS", "STEPS", "WINDOWS", "AGE", "");
        json_array_foreach(nodes, i, n) {
                const json_t *file = json_object_get(n, "file"), *ranks = json_object_get(n, "ranks");
                const json_t *wins = json_object_get(n, "windows"), *error = json_object_get(file, "error");
                char steps[48] = "-", age[16], rk[32], win[48];
                format_age(json_integer_value(json_object_get(n, "age_ms")), age, sizeof(age));
                if (json_is_integer(json_object_get(ranks, "step_min")))
                        snprintf(steps, sizeof(steps), "%lld..%lld",
                                 (long long) json_integer_value(json_object_get(ranks, "step_min")),
                                 (long long) json_integer_value(json_object_get(ranks, "step_max")));
                snprintf(rk, sizeof(rk), "%lld/%lld", (long long) json_integer_value(json_object_get(ranks, "collecting")),
                         (long long) json_integer_value(json_object_get(ranks, "attached")));
                snprintf(win, sizeof(win), "%lld/%lld/%lld", (long long) json_integer_value(json_object_get(wins, "done")),
                         (long long) json_integer_value(json_object_get(wins, "failed")),
                         (long long) json_integer_value(json_object_get(wins, "lost")));
                printf("%-20s %-8s %5lld  %-8.8s %-8s %9s %-17s %-11s %6s ", json_string_value(json_object_get(n, "node")),
                       json_string_value(json_object_get(n, "state")),
                       (long long) json_integer_value(json_object_get(n, "generation")),
                       json_string_value(json_object_get(file, "hash")), json_string_value(json_object_get(file, "state")),
                       rk, steps, win, age);
                if (json_is_true(json_object_get(n, "lagging")))
                        printf(" LAGGING");
                if (json_is_true(json_object_get(n, "stale")))
                        printf(" STALE");
                if (json_is_true(json_object_get(n, "stopped")))
                        printf(" STOPPED");
                if (json_is_object(error))
                        printf(" %lld:%lld: %s%s%s", (long long) json_integer_value(json_object_get(error, "line")),
                               (long long) json_integer_value(json_object_get(error, "column")),
                               json_string_value(json_object_get(error, "key")),
                               *json_string_value(json_object_get(error, "key")) ? ": " : "",
                               json_string_value(json_object_get(error, "message")));
                printf("\n");
        }
        json_array_foreach(versions, i, v) {
                char when[32];
                format_utc(json_integer_value(json_object_get(v, "mtime_ns")), when, sizeof(when));
                printf("newest: %s version %.8s, modified %s, held by %lld of %zu node%s", json_string_value(json_object_get(v, "path")),
                       json_string_value(json_object_get(v, "hash")), when,
                       (long long) json_integer_value(json_object_get(v, "nodes")), json_array_size(nodes),
                       json_array_size(nodes) == 1 ? "" : "s");
                if (json_is_integer(json_object_get(v, "generation")))
                        printf(" as generation %lld", (long long) json_integer_value(json_object_get(v, "generation")));
                printf("\n");
        }
        print_behind_ranks(json_object_get(fleet, "behind"));
        json_array_foreach(json_object_get(fleet, "unreadable"), i, v)
                printf("unreadable: %s: %s\n", json_string_value(json_object_get(v, "file")),
                       json_string_value(json_object_get(v, "reason")));
        if (json_array_size(nodes) == 0) {
                printf("%s: no node keeps a record here\n", json_string_value(json_object_get(fleet, "dir")));
                return;
        }
        printf("%zu node%s: ", json_array_size(nodes), json_array_size(nodes) == 1 ? "" : "s");
        if (npf_fleet_verdict(fleet) == 0) {
                printf("every node agrees\n");
                return;
        }
        for (size_t k = 0; k < sizeof(lists) / sizeof(lists[0]); k++) {
                const json_t *list = json_object_get(fleet, lists[k]);
                printf("%s%zu %s", k ? "; " : "", json_array_size(list), lists[k]);
                if (json_array_size(list)) {
                        printf(" (");
                        print_names(list, 8);
                        printf(")");
                }
        }
        printf("\n");
}

/* --- the command ------------------------------------------------------------------------- */

static void fleet_help(void)
{
        printf("Usage: npuprofctl fleet [--fleet-dir DIR] [--json] [--wait [--timeout S]]\n\n"
               "Every node's record in DIR, the directory the daemons keep them in (npuprofd\n"
               "--fleet-dir; default: the local daemon's): a line per node with its state, the\n"
               "generation in force, the version of the file it read and whether it is valid,\n"
               "ranks collecting/attached, the range of their steps, windows done/failed/lost\n"
               "and the record's age. A node is LAGGING when it read another version of the file\n"
               "than the newest (the latest modified) any node read, STALE when its record is\n"
               "older than %d of its intervals, STOPPED when its daemon stopped, and invalid when\n"
               "it finds the file invalid or missing. Under the table, the ranks behind the\n"
               "fleet's highest step (stalled ranks first, then the furthest behind; at most %d)\n"
               "and, when ranks are stalled, one sentence saying which the others wait for; a\n"
               "stale or stopped record blames nobody. --json: {dir, nodes, generation, newest,\n"
               "lagging, stale, stopped, invalid, unreadable, behind}. --wait: read DIR again until every\n"
               "node agrees, printing who is still behind, at most S seconds with --timeout.\n"
               "Exit: 0 every node agrees, 1 one does not (or --wait timed out), 2 usage, 3 DIR\n"
               "cannot be read.\n", NPF_FLEET_STALE_INTERVALS, NPF_FLEET_LAGGARDS);
}

/* The fleet directory the daemon on @socket_path keeps its record in, into @buf. Return: 0, or 3. */
static int daemon_fleet_dir(const char *socket_path, char *buf, size_t len)
{
        json_t *reply = NULL;
        char err[256];
        const char *dir;

        int r = npf_ipc_call(socket_path, "status", NPF_IPC_TIMEOUT_MS, &reply, err);
        if (r < 0) {
                char fix[NPF_IPC_FIX_MAX];
                const char *how = npf_ipc_fix(r, socket_path, fix);
                fprintf(stderr, "npuprofctl fleet: no --fleet-dir, and the daemon that would name it is not "
                        "reachable: %s%s%s\n", err, how ? "; " : "", how ? how : "");
                return NPF_EXIT_UNREACHABLE;
        }
        dir = json_string_value(json_object_get(
                json_object_get(json_object_get(json_object_get(reply, "result"), "daemon"), "fleet"), "dir"));
        if (!dir) {
                fprintf(stderr, "npuprofctl fleet: the daemon on %s keeps no fleet record (npuprofd --fleet-dir); "
                        "give --fleet-dir DIR\n", socket_path);
                json_decref(reply);
                return NPF_EXIT_UNREACHABLE;
        }
        snprintf(buf, len, "%s", dir);
        json_decref(reply);
        return 0;
}

/* One line naming who is behind and why, when it differs from @last (updated). */
static void print_behind(const json_t *fleet, char **last)
{
        static const char *const lists[] = { "lagging", "stale", "stopped", "invalid" };
        char *line = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&line, &len);

        if (!f)
                return;
        fprintf(f, "waiting for");
        if (json_array_size(json_object_get(fleet, "nodes")) == 0)
                fprintf(f, " a first record");
        for (size_t k = 0, said = 0; k < sizeof(lists) / sizeof(lists[0]); k++) {
                const json_t *list = json_object_get(fleet, lists[k]);
                size_t i;
                json_t *s;
                if (!json_array_size(list))
                        continue;
                fprintf(f, "%s %zu %s:", said++ ? ";" : "", json_array_size(list), lists[k]);
                json_array_foreach(list, i, s)
                        fprintf(f, "%s %s", i ? "," : "", json_string_value(s));
        }
        fclose(f);
        if (!*last || strcmp(*last, line) != 0) {
                printf("%s\n", line);
                fflush(stdout);
                free(*last);
                *last = line;
        } else {
                free(line);
        }
}

int npf_cli_fleet(int argc, char **argv, const char *socket_path)
{
        enum { OPT_DIR = 256, OPT_JSON, OPT_WAIT, OPT_TIMEOUT, OPT_HELP };
        static const struct option opts[] = {
                { "fleet-dir", required_argument, NULL, OPT_DIR },
                { "json", no_argument, NULL, OPT_JSON },
                { "wait", no_argument, NULL, OPT_WAIT },
                { "timeout", required_argument, NULL, OPT_TIMEOUT },
                { "help", no_argument, NULL, OPT_HELP },
                { 0 },
        };
        char daemon_dir[4096], *end, *last = NULL;
        const char *dir = NULL;
        bool json = false, wait = false;
        double timeout_s = -1;
        int c, status;

        argv[0] = (char *) "npuprofctl fleet";         /* getopt's messages name it */
        optind = 1;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case OPT_DIR: dir = optarg; break;
                case OPT_JSON: json = true; break;
                case OPT_WAIT: wait = true; break;
                case OPT_TIMEOUT:
                        errno = 0;
                        timeout_s = strtod(optarg, &end);
                        if (errno || end == optarg || *end || !(timeout_s >= 0 && timeout_s <= 1e9)) {
                                fprintf(stderr, "npuprofctl fleet: --timeout takes seconds, not '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case OPT_HELP:
                        fleet_help();
                        return 0;
                default:
                        fputs("see npuprofctl fleet --help\n", stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "npuprofctl fleet: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }
        if (timeout_s >= 0 && !wait) {
                fprintf(stderr, "npuprofctl fleet: --timeout goes with --wait\n");
                return 2;
        }
        if (!dir) {
                if ((status = daemon_fleet_dir(socket_path, daemon_dir, sizeof(daemon_dir))) != 0)
                        return status;
                dir = daemon_dir;
        }

        uint64_t deadline = npf_clock_ns(CLOCK_MONOTONIC) + (uint64_t) (timeout_s * 1e9);
        json_t *fleet;
        for (;;) {
                fleet = npf_fleet_judge(dir, (int64_t) (npf_clock_ns(CLOCK_REALTIME) / 1000000u));
                if (!fleet) {
                        fprintf(stderr, "npuprofctl fleet: cannot read %s: %s\n", dir, strerror(errno));
                        free(last);
                        return NPF_EXIT_UNREACHABLE;
                }
                status = npf_fleet_verdict(fleet);
                if (!wait || status == 0 || (timeout_s >= 0 && npf_clock_ns(CLOCK_MONOTONIC) >= deadline))
                        break;
                if (!json)
                        print_behind(fleet, &last);
                json_decref(fleet);
                nanosleep(&(struct timespec) { .tv_nsec = WAIT_POLL_MS * 1000000L }, NULL);
        }
        free(last);
        if (json) {
                char *s = json_dumps(fleet, JSON_COMPACT);
                if (s)
                        puts(s);
                free(s);
        } else {
                print_fleet(fleet);
        }
        json_decref(fleet);
        return status;
}
