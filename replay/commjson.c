/* SPDX-License-Identifier: MIT */
/* communication.json, through jansson: a file of a few MB at most, one per rank. */
#include "replay/commjson.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static double number(const json_t *o, const char *key)
{
        const json_t *v = json_object_get(o, key);
        double x = json_is_number(v) ? json_number_value(v) : 0;
        return isfinite(x) && x > 0 && x < 1e15 ? x : 0;
}

/* The links of one op: @name is "hcom_allReduce__586_0_1@17522688603477080586". */
static int op_links(npf_device_t *d, const char *name, const json_t *op)
{
        const json_t *bw = json_object_get(op, "Communication Bandwidth Info"), *info;
        const char *at = strrchr(name, '@'), *link;
        int64_t group = npf_device_intern(d, at ? at + 1 : "", at ? strlen(at + 1) : 0), id;
        int r;

        if (group < 0)
                return (int) group;
        json_object_foreach ((json_t *) bw, link, info) {
                double mb = number(info, "Transit Size(MB)"), ms = number(info, "Transit Time(ms)");
                if (mb <= 0 && ms <= 0)
                        continue;
                if ((id = npf_device_intern(d, link, strlen(link))) < 0)
                        return (int) id;
                if ((r = npf_device_add_link(d, (uint32_t) group, (uint32_t) id, (uint64_t) llround(mb * 1e6),
                                             (int64_t) llround(ms * 1e6), 1)) < 0)
                        return r;
        }
        return 0;
}

int64_t npf_commjson_load(const char *path, npf_device_t *d, char *err)
{
        json_error_t je;
        json_t *root, *step, *kind, *op;
        const char *sname, *kname, *oname;
        struct stat st;
        int64_t n = 0;
        int r = 0;

        if (stat(path, &st) == 0 && (size_t) st.st_size > NPF_COMMJSON_BYTES_MAX) {
                snprintf(err, NPF_COMMJSON_ERR_MAX, "%.180s: larger than %zu MiB", path, NPF_COMMJSON_BYTES_MAX >> 20);
                return -E2BIG;
        }
        if (!(root = json_load_file(path, JSON_REJECT_DUPLICATES, &je))) {
                snprintf(err, NPF_COMMJSON_ERR_MAX, "%.100s: line %d, column %d: %.100s", path, je.line, je.column, je.text);
                return json_error_code(&je) == json_error_out_of_memory ? -ENOMEM : -EINVAL;
        }
        if (!json_is_object(root)) {
                snprintf(err, NPF_COMMJSON_ERR_MAX, "%.180s: not an object of steps: not a communication.json", path);
                json_decref(root);
                return -EINVAL;
        }
        json_object_foreach (root, sname, step) {
                json_object_foreach (step, kname, kind) {
                        if (strcmp(kname, "collective") && strcmp(kname, "p2p"))
                                continue;
                        json_object_foreach (kind, oname, op) {
                                /* Each step's totals repeat what its ops say. */
                                if (!strncmp(oname, "Total Op Info", 13) || !json_is_object(op))
                                        continue;
                                if ((r = op_links(d, oname, op)) < 0)
                                        goto out;
                                n++;
                        }
                }
        }
out:
        json_decref(root);
        if (r < 0) {
                snprintf(err, NPF_COMMJSON_ERR_MAX, "%.180s: %s", path, strerror(-r));
                return r;
        }
        return n;
}
