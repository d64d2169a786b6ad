/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the device readers and analyses: the input, written to a file of its
 * own, is read as a trace (trace_view.json or Kineto's), as step_trace_time.csv and as
 * communication.json, and, when it begins as SQLite files do, as a db export (the corpus
 * holds a small one); every timeline read is analysed and reported. Besides "no crash,
 * no leak, no UB" it checks what the report relies on: a failure has a known errno and a
 * terminated message; in every step computing, communication and free are not negative,
 * not overlapped is at most communication, and the parts never add up to more than the span
 * they come from; the temporal percentages add up to 100; a kernel's mean and p90 lie
 * within its longest; the rank object jansson can write (names stay UTF-8).
 */
#include "replay/commjson.h"
#include "replay/device-db.h"
#include "replay/device-trace.h"
#include "replay/device.h"
#include "replay/devreport.h"
#include "replay/steptrace.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(int r, const char *err, size_t size)
{
        if (r >= 0)
                return;
        if (r != -EINVAL && r != -ENOMSG && r != -E2BIG && r != -ENOMEM && r != -EIO)
                abort();
        if (!memchr(err, '\0', size) || !err[0])
                abort();
}

static void check_device(npf_device_t *d)
{
        npf_dev_breakdown_t *b;
        npf_dev_kernel_t *k;
        npf_dev_collective_t *c;
        npf_dev_temporal_t t;
        int64_t n;

        if ((n = npf_device_breakdown(d, &b)) < 0)
                abort();
        for (int64_t i = 0; i < n; i++) {
                const npf_dev_breakdown_t *s = &b[i];
                if (s->computing < 0 || s->communication < 0 || s->free < 0 || s->not_overlapped < 0 ||
                    s->not_overlapped > s->communication || s->overlapped != s->communication - s->not_overlapped ||
                    s->overlapped > s->computing || s->computing + s->not_overlapped + s->free != s->stage + s->bubble)
                        abort();
        }
        free(b);
        if (npf_device_temporal(d, &t) == 0) {
                if (t.idle < 0 || t.compute < 0 || t.non_compute < 0 || t.idle + t.compute + t.non_compute != t.span)
                        abort();
                if (t.span > 0 && fabs(t.idle_pct + t.compute_pct + t.non_compute_pct - 100.0) > 1e-6)
                        abort();
        }
        double o = npf_device_overlap_pct(d);
        if (o != -1 && (o < 0 || o > 100.0 + 1e-9))
                abort();
        if ((n = npf_device_kernels(d, &k)) < 0)
                abort();
        for (int64_t i = 0; i < n; i++)
                if (k[i].count == 0 || k[i].mean > k[i].max || k[i].p90 > k[i].max || k[i].total < k[i].max)
                        abort();
        free(k);
        if ((n = npf_device_collectives(d, &c)) < 0)
                abort();
        free(c);
        json_t *j = npf_devreport_rank(d, "fuzz", 8);
        char *dump = j ? json_dumps(j, 0) : NULL;
        char answer[512];
        if (!dump)
                abort();
        npf_devreport_answer(j, answer, sizeof(answer));
        /* steps.svg of it, in memory. */
        char *svg = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&svg, &len);
        json_t *device = json_pack("{s:[O]}", "ranks", j);
        if (!f || !device || npf_devreport_svg(f, "fuzz", device) != 0)
                abort();
        fclose(f);
        if (strlen(svg) != len)
                abort();
        free(svg);
        json_decref(device);
        free(dump);
        json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char path[] = "/tmp/fuzz-device-XXXXXX", err[NPF_DEVICE_TRACE_ERR_MAX];
        npf_dev_breakdown_t *rows;
        npf_device_t *d = NULL;
        int fd = mkstemp(path), r;
        int64_t n;

        if (fd < 0)
                abort();
        if (write(fd, data, size) != (ssize_t) size)
                abort();
        close(fd);

        memset(err, 'x', sizeof(err));
        r = npf_device_trace_load(path, NULL, NULL, &d, NULL, err);
        if (r == -ENOENT || r == -ENODATA)
                abort();
        check_err(r, err, sizeof(err));
        if (r == 0) {
                check_device(d);
                /* The same timeline with communication.json's links, as fwout reads them. */
                char cerr[NPF_COMMJSON_ERR_MAX];
                memset(cerr, 'x', sizeof(cerr));
                check_err((int) npf_commjson_load(path, d, cerr), cerr, sizeof(cerr));
                check_device(d);
                d = npf_device_free(d);
        }

        if (size >= 16 && !memcmp(data, "SQLite format 3", 16)) {
                char derr[NPF_DEVICE_DB_ERR_MAX];
                memset(derr, 'x', sizeof(derr));
                r = npf_device_db_load(path, &d, NULL, derr);
                if (r < 0 && (!memchr(derr, '\0', sizeof(derr)) || !derr[0]))
                        abort();
                if (r == 0) {
                        check_device(d);
                        d = npf_device_free(d);
                }
        }

        char serr[NPF_STEPTRACE_ERR_MAX];
        memset(serr, 'x', sizeof(serr));
        n = npf_steptrace_load(path, &rows, serr);
        check_err((int) n, serr, sizeof(serr));
        if (n >= 0) {
                json_t *j = npf_devreport_rank_steps(0, NPF_DEV_FW_TORCH_NPU, rows, (size_t) n, "fuzz");
                char answer[512];
                if (!j)
                        abort();
                npf_devreport_answer(j, answer, sizeof(answer));
                json_decref(j);
                free(rows);
        }
        unlink(path);
        return 0;
}
