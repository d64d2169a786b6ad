/* SPDX-License-Identifier: MIT */
/* The cluster's device analysis, on the ranks' report objects: medians, stages, the rules. */
#include "replay/devcluster.h"
#include "replay/devreport.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The figures of a rank that the rules read: medians over its steps, microseconds. */
enum part { COMPUTING, NOT_OVERLAPPED, FREE, BUBBLE, PREPARING, PARTS };

static const char *const keys[PARTS] = {
        [COMPUTING] = "computing_us", [NOT_OVERLAPPED] = "communication_not_overlapped_us", [FREE] = "free_us",
        [BUBBLE] = "bubble_us", [PREPARING] = "preparing_us",
};
static const char *const causes[PARTS] = {
        [COMPUTING] = "computing", [NOT_OVERLAPPED] = "communication", [FREE] = "free", [BUBBLE] = "bubble",
        [PREPARING] = "preparing",
};
static const char *const cause_words[PARTS] = {
        [COMPUTING] = "computes", [NOT_OVERLAPPED] = "communicates", [FREE] = "leaves the device idle",
        [BUBBLE] = "waits in pipeline receives", [PREPARING] = "prepares (host before the device)",
};

typedef struct rank {
        const json_t *obj;
        int64_t id;
        size_t stage;
        double v[PARTS];
        double span;                    /* computing + not overlapped (receives in it) + free */
} rank_t;

static void rank_medians(rank_t *r)
{
        const json_t *steps = json_object_get(r->obj, "steps");

        r->span = 0;
        for (int p = 0; p < PARTS; p++) {
                r->v[p] = npf_devreport_steps_median(steps, keys[p]);
                if (p == COMPUTING || p == NOT_OVERLAPPED || p == FREE)
                        r->span += r->v[p];
        }
}

/* The median of part @p over the ranks of @stage but @except (SIZE_MAX: none). */
static double peers(const rank_t *rk, size_t n, size_t stage, size_t except, int p, size_t *ret_n)
{
        double *v = malloc((n + 1) * sizeof(*v)), m;
        size_t k = 0;

        if (!v)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (rk[i].stage == stage && i != except)
                        v[k++] = p < 0 ? rk[i].span : rk[i].v[p];
        m = npf_devreport_median(v, k);
        free(v);
        if (ret_n)
                *ret_n = k;
        return m;
}

static json_t *slow_rank(const rank_t *rk, size_t n, size_t i, int cause, double peer, double waited, const char *scope)
{
        json_t *waiting = json_array();

        for (size_t j = 0; j < n; j++)
                if (j != i && (!strcmp(scope, "stage") ? rk[j].stage != rk[i].stage : rk[j].stage == rk[i].stage))
                        json_array_append_new(waiting, json_integer(rk[j].id));
        return json_pack("{s:I,s:I,s:s,s:s,s:f,s:f,s:f,s:f,s:f,s:o}", "rank", (json_int_t) rk[i].id, "stage",
                         (json_int_t) rk[i].stage, "cause", causes[cause], "scope", scope, "value_us", rk[i].v[cause],
                         "peer_median_us", peer, "excess_us", rk[i].v[cause] - peer, "ratio",
                         peer > 0 ? rk[i].v[cause] / peer : 0.0, "others_wait_us", waited, "waiting_ranks", waiting);
}

/* The rules within each stage, then across stages. */
static void find_slow(const rank_t *rk, size_t n, size_t n_stages, json_t *out)
{
        for (size_t i = 0; i < n; i++) {
                size_t np;
                double span = peers(rk, n, rk[i].stage, SIZE_MAX, -1, NULL), limit = NPF_DEVCLUSTER_SLOW * span;
                double wait = peers(rk, n, rk[i].stage, i, NOT_OVERLAPPED, &np), best = 0;
                int cause = -1;
                if (np == 0 || span <= 0)
                        continue;
                for (int p = 0; p < PARTS; p++) {
                        double excess = rk[i].v[p] - peers(rk, n, rk[i].stage, i, p, NULL);
                        if ((p == COMPUTING || p == FREE || p == PREPARING) && excess > limit && excess > best &&
                            rk[i].v[NOT_OVERLAPPED] < wait) {
                                best = excess;
                                cause = p;
                        }
                }
                if (cause < 0 && rk[i].v[NOT_OVERLAPPED] - wait > limit)
                        cause = NOT_OVERLAPPED;
                if (cause >= 0)
                        json_array_append_new(out, slow_rank(rk, n, i, cause, peers(rk, n, rk[i].stage, i, cause, NULL),
                                                             cause == NOT_OVERLAPPED ? 0 : wait - rk[i].v[NOT_OVERLAPPED],
                                                             "rank"));
        }
        if (n_stages < 2)
                return;
        /* Across stages: each stage's worst computing rank against the other stages' worst. */
        size_t *worst = calloc(n_stages, sizeof(*worst)), slowest = 0, k = 0;
        double *comp = calloc(n_stages, sizeof(*comp)), *bubble = calloc(n_stages, sizeof(*bubble));
        double *others = calloc(2 * n_stages, sizeof(*others)), *others_bubble = others + n_stages, span = 0;
        if (!worst || !comp || !bubble || !others)
                goto out;
        for (size_t s = 0; s < n_stages; s++)
                worst[s] = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
                size_t s = rk[i].stage;
                if (worst[s] == SIZE_MAX || rk[i].v[COMPUTING] > rk[worst[s]].v[COMPUTING])
                        worst[s] = i;
                if (rk[i].v[BUBBLE] > bubble[s])
                        bubble[s] = rk[i].v[BUBBLE];
        }
        for (size_t s = 0; s < n_stages; s++) {
                comp[s] = worst[s] == SIZE_MAX ? 0 : rk[worst[s]].v[COMPUTING];
                if (comp[s] > comp[slowest])
                        slowest = s;
                if (worst[s] != SIZE_MAX && rk[worst[s]].span > span)
                        span = rk[worst[s]].span;
        }
        for (size_t s = 0; s < n_stages; s++)
                if (s != slowest && worst[s] != SIZE_MAX) {
                        others[k] = comp[s];
                        others_bubble[k++] = bubble[s];
                }
        double m = npf_devreport_median(others, k), mb = npf_devreport_median(others_bubble, k);
        if (k > 0 && comp[slowest] - m > NPF_DEVCLUSTER_SLOW * span && mb > bubble[slowest])
                json_array_append_new(out, slow_rank(rk, n, worst[slowest], COMPUTING, m, mb - bubble[slowest], "stage"));
out:
        free(worst);
        free(comp);
        free(bubble);
        free(others);
}

/* Each stage's rows: per step, the largest figure of its ranks, column by column. */
static json_t *stage_rows(const rank_t *rk, size_t n, size_t stage)
{
        json_t *steps = json_object(), *ranks = json_array(), *out = json_array(), *row;
        const char *step;
        size_t worst = SIZE_MAX;
        static const char *const cols[] = { "computing_us", "communication_not_overlapped_us", "overlapped_us",
                                            "communication_us", "free_us", "stage_us", "bubble_us", "preparing_us" };

        for (size_t i = 0; i < n; i++) {
                const json_t *s;
                size_t k;
                if (rk[i].stage != stage)
                        continue;
                json_array_append_new(ranks, json_integer(rk[i].id));
                if (worst == SIZE_MAX || rk[i].v[COMPUTING] > rk[worst].v[COMPUTING])
                        worst = i;
                json_array_foreach (json_object_get(rk[i].obj, "steps"), k, s) {
                        char key[32];
                        snprintf(key, sizeof(key), "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(s, "step")));
                        if (!(row = json_object_get(steps, key))) {
                                row = json_pack("{s:O}", "step", json_object_get(s, "step"));
                                json_object_set_new(steps, key, row);
                        }
                        for (size_t c = 0; c < sizeof(cols) / sizeof(cols[0]); c++) {
                                double v = json_number_value(json_object_get(s, cols[c]));
                                json_t *have = json_object_get(row, cols[c]);
                                if (!have || v > json_number_value(have))
                                        json_object_set_new(row, cols[c], json_real(v));
                        }
                }
        }
        json_object_foreach (steps, step, row)
                json_array_append(out, row);
        json_decref(steps);
        return json_pack("{s:I,s:o,s:o,s:o}", "stage", (json_int_t) stage, "ranks", ranks, "worst_rank",
                         worst == SIZE_MAX ? json_null() : json_integer(rk[worst].id), "steps", out);
}

/* Bandwidth per rank and link type, and the ranks far below the median of theirs. */
static void find_slow_links(const rank_t *rk, size_t n, json_t *out)
{
        json_t *types = json_object(), *list;
        const char *type;

        for (size_t i = 0; i < n; i++) {
                const json_t *l;
                size_t k;
                json_t *per = json_object();            /* link -> [bytes, time] of this rank */
                json_array_foreach (json_object_get(rk[i].obj, "links"), k, l) {
                        const char *link = json_string_value(json_object_get(l, "link"));
                        json_t *acc;
                        if (!link)
                                continue;
                        if (!(acc = json_object_get(per, link)))
                                json_object_set_new(per, link, acc = json_pack("[f,f]", 0.0, 0.0));
                        json_array_set_new(acc, 0, json_real(json_number_value(json_array_get(acc, 0)) +
                                                             json_number_value(json_object_get(l, "bytes"))));
                        json_array_set_new(acc, 1, json_real(json_number_value(json_array_get(acc, 1)) +
                                                             json_number_value(json_object_get(l, "time_us"))));
                }
                json_t *acc;
                const char *link;
                json_object_foreach (per, link, acc) {
                        double t = json_number_value(json_array_get(acc, 1));
                        if (t <= 0)
                                continue;
                        if (!(list = json_object_get(types, link)))
                                json_object_set_new(types, link, list = json_array());
                        json_array_append_new(list, json_pack("{s:I,s:f}", "rank", (json_int_t) rk[i].id, "gbps",
                                                              json_number_value(json_array_get(acc, 0)) / t / 1e3));
                }
                json_decref(per);
        }
        json_object_foreach (types, type, list) {
                size_t m = json_array_size(list), k;
                double *v = malloc((m + 1) * sizeof(*v)), med;
                json_t *e;
                if (!v || m < 2) {
                        free(v);
                        continue;
                }
                json_array_foreach (list, k, e)
                        v[k] = json_number_value(json_object_get(e, "gbps"));
                med = npf_devreport_median(v, m);
                free(v);
                json_array_foreach (list, k, e) {
                        double bw = json_number_value(json_object_get(e, "gbps"));
                        if (med > 0 && bw < NPF_DEVCLUSTER_LINK * med)
                                json_array_append_new(out, json_pack("{s:O,s:s,s:f,s:f,s:f}", "rank",
                                                                     json_object_get(e, "rank"), "link", type,
                                                                     "bandwidth_gbps", bw, "median_gbps", med,
                                                                     "ratio", bw / med));
                }
        }
        json_decref(types);
}

static void answer(json_t *device, size_t n)
{
        const json_t *slow = json_object_get(device, "slow_ranks"), *s;
        char buf[1024] = "";
        size_t len = 0, i;

        if (n == 0) {
                json_object_set_new(device, "answer", json_string("no rank with device data"));
                return;
        }
        json_array_foreach (slow, i, s) {
                int cause;
                for (cause = 0; cause < PARTS; cause++)
                        if (!strcmp(json_string_value(json_object_get(s, "cause")), causes[cause]))
                                break;
                if (cause == PARTS || len >= sizeof(buf) - 1)
                        break;
                bool stage = !strcmp(json_string_value(json_object_get(s, "scope")), "stage");
                double wait = json_number_value(json_object_get(s, "others_wait_us"));
                int w = snprintf(buf + len, sizeof(buf) - len, "%srank %" JSON_INTEGER_FORMAT " %s %.1fx its %s "
                                 "(+%.1f ms a step)", len ? "; " : "", json_integer_value(json_object_get(s, "rank")),
                                 cause_words[cause], json_number_value(json_object_get(s, "ratio")),
                                 stage ? "the other stages' slowest" : "stage peers",
                                 json_number_value(json_object_get(s, "excess_us")) / 1e3);
                if (w > 0 && (len += (size_t) w) < sizeof(buf) && wait > 0)
                        w = snprintf(buf + len, sizeof(buf) - len, ": %zu rank(s) wait for it, %.1f ms a step%s",
                                     json_array_size(json_object_get(s, "waiting_ranks")), wait / 1e3,
                                     stage ? " in pipeline receives" : " in communication");
                if (w > 0)
                        len += (size_t) w;
        }
        if (!len)
                snprintf(buf, sizeof(buf), "no slow rank: within each stage every rank's computing, free and preparing "
                         "time are within %.0f%% of a step of its peers'", 100 * NPF_DEVCLUSTER_SLOW);
        json_object_set_new(device, "answer", json_string(buf));
}

json_t *npf_devcluster(json_t *ranks, const json_t *stages)
{
        size_t n = json_array_size(ranks), n_stages = 1, i;
        rank_t *rk = calloc(n + 1, sizeof(*rk));
        json_t *device = NULL, *st = json_array(), *slow = json_array(), *links = json_array(), *r;

        if (!rk || !st || !slow || !links)
                goto fail;
        json_array_foreach (ranks, i, r) {
                const json_t *stage = json_object_get(r, "stage"), *g, *x;
                size_t gi, k;
                rk[i].obj = r;
                rk[i].id = json_integer_value(json_object_get(r, "rank"));
                rk[i].stage = json_is_integer(stage) && json_integer_value(stage) >= 0 ? (size_t) json_integer_value(stage) : 0;
                json_array_foreach (stages, gi, g)
                        json_array_foreach (g, k, x)
                                if (json_integer_value(x) == rk[i].id)
                                        rk[i].stage = gi;
                if (rk[i].stage >= 65536)
                        rk[i].stage = 0;
                if (rk[i].stage + 1 > n_stages)
                        n_stages = rk[i].stage + 1;
                rank_medians(&rk[i]);
        }
        for (size_t s = 0; s < n_stages; s++) {
                bool any = false;
                for (i = 0; i < n; i++)
                        any |= rk[i].stage == s;
                if (any)
                        json_array_append_new(st, stage_rows(rk, n, s));
        }
        find_slow(rk, n, n_stages, slow);
        find_slow_links(rk, n, links);
        device = json_pack("{s:O,s:o,s:o,s:o}", "ranks", ranks, "stages", st, "slow_ranks", slow, "slow_links", links);
        st = slow = links = NULL;
        if (device)
                answer(device, n);
fail:
        json_decref(st);
        json_decref(slow);
        json_decref(links);
        free(rk);
        return device;
}

int npf_devcluster_text(FILE *f, const json_t *device)
{
        const json_t *x, *y;
        size_t i, k;

        fprintf(f, "\nDevice: %s\n", json_string_value(json_object_get(device, "answer")));
        json_array_foreach (json_object_get(device, "stages"), i, x) {
                fprintf(f, "\n  stage %" JSON_INTEGER_FORMAT ": ranks", json_integer_value(json_object_get(x, "stage")));
                json_array_foreach (json_object_get(x, "ranks"), k, y)
                        fprintf(f, " %" JSON_INTEGER_FORMAT, json_integer_value(y));
                fprintf(f, "; most computing: rank %" JSON_INTEGER_FORMAT "\n",
                        json_integer_value(json_object_get(x, "worst_rank")));
                fprintf(f, "  %8s %12s %14s %12s %12s %12s (the largest of its ranks, us)\n", "step", "computing",
                        "comm not ovl", "free", "bubble", "stage");
                json_array_foreach (json_object_get(x, "steps"), k, y)
                        fprintf(f, "  %8" JSON_INTEGER_FORMAT " %12.1f %14.1f %12.1f %12.1f %12.1f\n",
                                json_integer_value(json_object_get(y, "step")),
                                json_number_value(json_object_get(y, "computing_us")),
                                json_number_value(json_object_get(y, "communication_not_overlapped_us")),
                                json_number_value(json_object_get(y, "free_us")),
                                json_number_value(json_object_get(y, "bubble_us")),
                                json_number_value(json_object_get(y, "stage_us")));
        }
        json_array_foreach (json_object_get(device, "slow_links"), i, x)
                fprintf(f, "\n  slow link: rank %" JSON_INTEGER_FORMAT " %s at %.2f GB/s, %.0f%% of the median %.2f GB/s\n",
                        json_integer_value(json_object_get(x, "rank")), json_string_value(json_object_get(x, "link")),
                        json_number_value(json_object_get(x, "bandwidth_gbps")),
                        100 * json_number_value(json_object_get(x, "ratio")),
                        json_number_value(json_object_get(x, "median_gbps")));
        return ferror(f) ? -EIO : 0;
}
