/* SPDX-License-Identifier: MIT */
/* report.txt for snapshots, timeline.csv and memory.svg. */
#include "replay/report.h"
#include "replay/svg-memory.h"
#include "replay/svg.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *npf_report_bytes(uint64_t v, char *buf)
{
        return npf_svg_format_bytes(v, buf, NPF_SVG_BYTES_MAX);
}

static uint64_t num(const json_t *o, const char *key)
{
        json_int_t v = json_integer_value(json_object_get(o, key));
        return v < 0 ? 0 : (uint64_t) v;
}

static void frames_text(FILE *f, const json_t *frames, size_t max, const char *indent)
{
        size_t i;
        json_t *fr;

        if (json_array_size(frames) == 0) {
                fprintf(f, "%s(no call stack recorded)\n", indent);
                return;
        }
        json_array_foreach (frames, i, fr) {
                if (i == max) {
                        fprintf(f, "%s... %zu more frames\n", indent, json_array_size(frames) - max);
                        break;
                }
                fprintf(f, "%s%s (%s:%" JSON_INTEGER_FORMAT ")\n", indent,
                        json_string_value(json_object_get(fr, "name")),
                        json_string_value(json_object_get(fr, "filename")),
                        json_integer_value(json_object_get(fr, "line")));
        }
}

/*
 * " at +12.3 s (2026-01-14 09:46:27.920 UTC)": the time @t_us of an event as an offset
 * from @first_us, the device's first recorded time, and as a date where it is one (a trace
 * times its events in microseconds since the epoch; a count from elsewhere gets no date).
 */
static void time_words(FILE *f, int64_t t_us, int64_t first_us)
{
        char day[24], date[48] = "";
        time_t secs = (time_t) (t_us / 1000000);
        struct tm tm;

        if (t_us >= INT64_C(946684800000000) && gmtime_r(&secs, &tm)) {     /* from 2000 on */
                strftime(day, sizeof(day), "%Y-%m-%d %H:%M:%S", &tm);
                snprintf(date, sizeof(date), " (%s.%03d UTC)", day, (int) (t_us / 1000 % 1000));
        }
        fprintf(f, " at +%s%s", npf_svg_duration((double) (t_us - first_us)).s, date);
}

static void peak_line(FILE *f, const char *what, const json_t *p, const json_t *first)
{
        char b[24], idx[32];
        const json_t *i = json_object_get(p, "index"), *t = json_object_get(p, "time_us");

        fprintf(f, "  Peak %-10s %12s", what, npf_report_bytes(num(p, "bytes"), b));
        if (json_is_integer(i))
                fprintf(f, " after event %s (%s)", npf_svg_format_count((uint64_t) json_integer_value(i), idx, sizeof(idx)),
                        json_string_value(json_object_get(p, "action")));
        else
                fprintf(f, " before the first event");
        if (json_is_integer(t) && json_is_integer(first))
                time_words(f, json_integer_value(t), json_integer_value(first));
        fputc('\n', f);
}

static void blocks_text(FILE *f, const json_t *list, size_t max)
{
        size_t i;
        json_t *b;
        char sz[24], idx[32];

        json_array_foreach (json_object_get(list, "blocks"), i, b) {
                if (i == max)
                        break;
                const json_t *at = json_object_get(b, "allocated_at");
                fprintf(f, "    %10s  %s  %s %s\n", npf_report_bytes(num(b, "size"), sz),
                        json_string_value(json_object_get(b, "addr")),
                        json_is_integer(at) ? "allocated at event" : "allocated before the trace",
                        json_is_integer(at) ? npf_svg_format_count((uint64_t) json_integer_value(at), idx, sizeof(idx)) : "");
                frames_text(f, json_object_get(b, "frames"), 6, "                  ");
        }
}

static void sites_text(FILE *f, const json_t *sites, size_t max, bool weight)
{
        size_t i;
        json_t *s;
        char sz[24];

        json_array_foreach (sites, i, s) {
                if (i == max)
                        break;
                fprintf(f, "    %10s in %" JSON_INTEGER_FORMAT " block(s)", npf_report_bytes(num(s, "bytes"), sz),
                        json_integer_value(json_object_get(s, "count")));
                if (weight)
                        fprintf(f, ", %.3g byte-events", json_real_value(json_object_get(s, "byte_events")));
                fputc('\n', f);
                frames_text(f, json_object_get(s, "frames"), 6, "                  ");
        }
}

static void device_text(FILE *f, const json_t *d)
{
        char a[24], b[24], c[24], n[32];
        const json_t *acts = json_object_get(d, "actions"), *v, *x;
        const char *key;

        fprintf(f, "\nDevice %" JSON_INTEGER_FORMAT ": %s events", json_integer_value(json_object_get(d, "device")),
                npf_svg_format_count(num(d, "events"), n, sizeof(n)));
        const char *sep = " (";
        json_object_foreach ((json_t *) acts, key, v) {
                fprintf(f, "%s%s %" JSON_INTEGER_FORMAT, sep, key, json_integer_value(v));
                sep = ", ";
        }
        fprintf(f, "%s%s\n", *sep == ',' ? ")" : "", json_is_true(json_object_get(d, "timed")) ? "" : "; no times recorded");

        x = json_object_get(d, "peak");
        peak_line(f, "allocated", json_object_get(x, "allocated"), json_object_get(d, "first_time_us"));
        peak_line(f, "requested", json_object_get(x, "requested"), json_object_get(d, "first_time_us"));
        peak_line(f, "active", json_object_get(x, "active"), json_object_get(d, "first_time_us"));
        peak_line(f, "reserved", json_object_get(x, "reserved"), json_object_get(d, "first_time_us"));
        x = json_object_get(d, "start");
        fprintf(f, "  Before the trace allocated %s (requested %s), active %s, reserved %s\n",
                npf_report_bytes(num(x, "allocated"), a), npf_report_bytes(num(x, "requested"), n),
                npf_report_bytes(num(x, "active"), b), npf_report_bytes(num(x, "reserved"), c));
        x = json_object_get(d, "dump");
        fprintf(f, "  At dump time     allocated %s (requested %s), active %s, reserved %s in %" PRIu64 " segment(s)\n",
                npf_report_bytes(num(x, "allocated"), a), npf_report_bytes(num(x, "requested"), n),
                npf_report_bytes(num(x, "active"), b), npf_report_bytes(num(x, "reserved"), c), num(x, "segments"));
        x = json_object_get(d, "rounding");
        const char *rule = json_string_value(json_object_get(x, "rule"));
        fprintf(f, "  Rounding waste   %s at the allocated peak, %s at dump time",
                npf_report_bytes(num(json_object_get(x, "at_peak"), "waste"), a),
                npf_report_bytes(num(json_object_get(x, "at_dump"), "waste"), b));
        if (rule)
                fprintf(f, " (%s's rule, which %" PRIu64 " of %" PRIu64 " live blocks obey; %" PRIu64
                        " re-created block size(s) inferred by it)\n", rule, num(x, "obeying"), num(x, "live_blocks"),
                        num(x, "inferred"));
        else
                fprintf(f, " (no live block to tell the allocator's rule by: %" PRIu64
                        " re-created block(s) counted at their requested size)\n", num(x, "unsized"));
        x = json_object_get(d, "workspace");
        if (num(x, "count"))
                fprintf(f, "  Workspace (torch_npu) %s in %" PRIu64 " segment(s), counted as allocated\n",
                        npf_report_bytes(num(x, "bytes"), a), num(x, "count"));

        x = json_object_get(d, "live_at_peak");
        fprintf(f, "\n  Live at the allocated peak: %" PRIu64 " block(s), %s; the largest:\n", num(x, "count"),
                npf_report_bytes(num(x, "bytes"), a));
        blocks_text(f, x, 10);

        x = json_object_get(d, "leaks");
        fprintf(f, "\n  Never freed (allocated in the trace, live at dump): %" PRIu64 " block(s), %s\n",
                num(x, "count"), npf_report_bytes(num(x, "bytes"), a));
        if (num(x, "count")) {
                fprintf(f, "  by call site:\n");
                sites_text(f, json_object_get(x, "sites"), 5, false);
        }

        x = json_object_get(d, "ghosts");
        fprintf(f, "\n  Ghost blocks (allocated before tracing began): %" PRIu64 ", %s; %" PRIu64
                " freed in the trace (%s), %" PRIu64 " live throughout (%s)\n",
                num(x, "count"), npf_report_bytes(num(x, "bytes"), a),
                num(json_object_get(x, "freed_in_trace"), "count"),
                npf_report_bytes(num(json_object_get(x, "freed_in_trace"), "bytes"), b),
                num(json_object_get(x, "alive_throughout"), "count"),
                npf_report_bytes(num(json_object_get(x, "alive_throughout"), "bytes"), c));

        x = json_object_get(d, "fragmentation");
        if (x) {
                uint64_t res = num(x, "reserved"), un = num(x, "unallocated");
                fprintf(f, "\n  Fragmentation at the allocated peak: reserved %s, allocated %s, unallocated %s (%.1f%%)\n",
                        npf_report_bytes(res, a), npf_report_bytes(num(x, "allocated"), b), npf_report_bytes(un, c),
                        res ? 100.0 * (double) un / (double) res : 0.0);
                if (num(x, "free_bytes") == 0)
                        fprintf(f, "    no free range in the segments\n");
                else
                        fprintf(f, "    free ranges in the segments %s, the largest %s (%.1f%% of free memory)\n",
                                npf_report_bytes(num(x, "free_bytes"), a), npf_report_bytes(num(x, "largest_free"), b),
                                100.0 * json_real_value(json_object_get(x, "largest_free_ratio")));
        }

        x = json_object_get(d, "segment_churn");
        fprintf(f, "\n  Segment churn:");
        sep = " ";
        json_object_foreach ((json_t *) x, key, v) {
                fprintf(f, "%s%s %" PRIu64 " (%s)", sep, key, num(v, "count"), npf_report_bytes(num(v, "bytes"), a));
                sep = ", ";
        }
        fputc('\n', f);

        size_t i;
        json_array_foreach (json_object_get(d, "streams"), i, v) {
                if (i == 0)
                        fprintf(f, "\n  %-20s %10s %12s %10s %12s\n", "stream", "allocs", "bytes", "segments", "bytes");
                fprintf(f, "  %-20s %10" PRIu64 " %12s %10" PRIu64 " %12s\n",
                        json_string_value(json_object_get(v, "stream")), num(v, "allocs"),
                        npf_report_bytes(num(v, "alloc_bytes"), a), num(v, "segment_allocs"),
                        npf_report_bytes(num(v, "segment_bytes"), b));
        }

        x = json_object_get(d, "free_delay");
        const json_t *ev = json_object_get(x, "events"), *us = json_object_get(x, "time_us");
        fprintf(f, "\n  free_requested -> free_completed: %" PRIu64 " frees", num(ev, "count"));
        if (num(ev, "count"))
                fprintf(f, ", %" PRIu64 " events apart at the median, %" PRIu64 " at p99, %" PRIu64 " at most",
                        num(ev, "median"), num(ev, "p99"), num(ev, "max"));
        if (json_is_object(us) && num(us, "count"))
                fprintf(f, "; %" PRIu64 " us median, %" PRIu64 " us p99, %" PRIu64 " us max", num(us, "median"),
                        num(us, "p99"), num(us, "max"));
        fprintf(f, "; %" PRIu64 " still pending at dump\n", num(x, "pending_at_dump"));

        fprintf(f, "\n  Call sites holding the most memory the longest (bytes x events alive):\n");
        sites_text(f, json_object_get(d, "top_sites"), 5, true);

        x = json_object_get(d, "plan");
        if (x)
                fprintf(f, "\n  Static plan: a first-fit planner places these %" PRIu64 " lifetimes in %s (%" PRIu64
                        " partitions); the most live at once was %s (plan / peak live = %.2fx); the peak reservation "
                        "%s is %.2fx the plan\n",
                        num(x, "tensors"), npf_report_bytes(num(x, "plan_bytes"), a), num(x, "partitions"),
                        npf_report_bytes(num(x, "peak_live_bytes"), b),
                        json_real_value(json_object_get(x, "plan_over_peak_live")),
                        npf_report_bytes(num(x, "peak_reserved_bytes"), c),
                        json_real_value(json_object_get(x, "peak_reserved_over_plan")));

        json_array_foreach (json_object_get(d, "oom"), i, v)
                fprintf(f, "%s    event %" PRIu64 ": %s requested, %s free on the device\n",
                        i == 0 ? "\n  Out-of-memory events:\n" : "", num(v, "index"),
                        npf_report_bytes(num(v, "size"), a), npf_report_bytes(num(v, "device_free"), b));

        x = json_object_get(d, "inconsistencies");
        if (num(x, "count") == 0) {
                fprintf(f, "\n  Inconsistencies: none\n");
        } else {
                fprintf(f, "\n  Inconsistencies: %" PRIu64 " (the replay carried on)\n", num(x, "count"));
                json_array_foreach (json_object_get(x, "items"), i, v) {
                        if (i == 10)
                                break;
                        fprintf(f, "    event %" PRIu64 " %s %s: %s\n", num(v, "index"),
                                json_string_value(json_object_get(v, "action")),
                                json_string_value(json_object_get(v, "addr")),
                                json_string_value(json_object_get(v, "what")));
                }
        }
}

int npf_report_snapshot_text(FILE *f, const json_t *snap)
{
        size_t i;
        json_t *d;
        char b[24];

        fprintf(f, "Memory snapshot %s (%s, %s%s)\n", json_string_value(json_object_get(snap, "file")),
                npf_report_bytes(num(snap, "bytes"), b), json_string_value(json_object_get(snap, "format")),
                json_is_true(json_object_get(snap, "legacy")) ? ", legacy list of segments" : "");
        json_array_foreach (json_object_get(snap, "devices"), i, d)
                device_text(f, d);
        return ferror(f) ? -EIO : 0;
}

/* The decimal digits of @v. */
static unsigned dec_digits(uint64_t v)
{
        static const uint64_t pow10[20] = {
                1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
                1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
                100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
                1000000000000000000ull, 10000000000000000000ull,
        };
        /* 1233/4096 is log10(2): the digits of 2^k, give or take one, which the table settles. */
        unsigned d = (64 - (unsigned) __builtin_clzll(v | 1)) * 1233 >> 12;

        if (v < 10)
                return 1;
        return d + (d < 20 && v >= pow10[d]);
}

/*
 * @v, below 10^8, as its eight decimal digits (leading zeros kept), in the bytes of a
 * word as it lies in memory, first digit first. Each step splits every lane of the word in two
 * at once, dividing by a multiply and a shift exact for the lane's range: two halves of
 * four digits (by 10^4), four pairs (x * 10486 >> 20 is x / 100 below 10^4), eight digits
 * (x * 103 >> 10 is x / 10 below 100).
 */
static uint64_t eight_digits(uint32_t v)
{
        uint64_t x = (uint64_t) (v / 10000) | (uint64_t) (v % 10000) << 32;
        uint64_t hundreds = (x * 10486) >> 20 & UINT64_C(0x0000007f0000007f);

        x = hundreds | (x - hundreds * 100) << 16;
        uint64_t tens = (x * 103) >> 10 & UINT64_C(0x000f000f000f000f);
        x = tens | (x - tens * 10) << 8;
        return htole64(x + UINT64_C(0x3030303030303030));
}

/* @v below 10^8 in decimal at @p, without leading zeros; 8 bytes are written. The end returned. */
static char *put_dec8(char *p, uint32_t v)
{
        unsigned n = dec_digits(v);
        uint64_t x = htole64(le64toh(eight_digits(v)) >> (8 * (8 - n)));

        memcpy(p, &x, 8);
        return p + n;
}

/* @v in decimal at @p, eight digits at a time; up to 7 bytes past the end are written, and
 * the end returned. */
static char *put_dec(char *p, uint64_t v)
{
        if (v < 100000000)
                return put_dec8(p, (uint32_t) v);
        uint64_t x;
        if (v < UINT64_C(10000000000000000)) {
                p = put_dec8(p, (uint32_t) (v / 100000000));
        } else {
                p = put_dec8(p, (uint32_t) (v / UINT64_C(10000000000000000)));
                x = eight_digits((uint32_t) (v / 100000000 % 100000000));
                memcpy(p, &x, 8);
                p += 8;
        }
        x = eight_digits((uint32_t) (v % 100000000));
        memcpy(p, &x, 8);
        return p + 8;
}

/* @v in lower-case hexadecimal at @p; the end returned. */
static char *put_hex(char *p, uint64_t v)
{
        unsigned n = (67 - (unsigned) __builtin_clzll(v | 1)) / 4;

        for (unsigned i = n; i-- > 0; v >>= 4)
                p[i] = "0123456789abcdef"[v & 15];
        return p + n;
}

static char *put_i64(char *p, int64_t v)
{
        if (v < 0)
                *p++ = '-';
        return put_dec(p, v < 0 ? (uint64_t) 0 - (uint64_t) v : (uint64_t) v);
}

/* A number's text, kept while the rows repeat it (a stream, the reserved bytes). */
typedef struct cached {
        uint64_t v;
        uint8_t len;
        bool set;
        char s[22];
} cached_t;

static char *put_cached(char *p, cached_t *c, uint64_t v, bool hex)
{
        if (!c->set || c->v != v) {
                c->v = v;
                c->set = true;
                c->len = (uint8_t) ((hex ? put_hex(c->s, v) : put_dec(c->s, v)) - c->s);
        }
        memcpy(p, c->s, sizeof(c->s));          /* whole: a fixed size copies fastest */
        return p + c->len;
}

/* The leading digits of a column's numbers, all but the last eight, kept while the rows
 * repeat them: a time in microseconds or a count of bytes changes in its last digits. */
typedef struct leading {
        uint64_t hi;            /* the last number / 10^8; 0: none kept */
        uint8_t len;
        char s[8];
} leading_t;

static char *put_dec_column(char *p, leading_t *c, uint64_t v)
{
        if (v < 100000000 || v >= UINT64_C(10000000000000000))
                return put_dec(p, v);
        uint64_t hi = v / 100000000, x;
        if (hi != c->hi) {
                c->hi = hi;
                c->len = (uint8_t) (put_dec8(c->s, (uint32_t) hi) - c->s);
        }
        memcpy(p, c->s, sizeof(c->s));
        p += c->len;
        x = eight_digits((uint32_t) (v - hi * 100000000));
        memcpy(p, &x, 8);
        return p + 8;
}

/* One row per event, formatted by hand: printf's cost was most of the time of a
 * two-million-row file. */
size_t npf_report_timeline_rows(char *buf, size_t size, const npf_replay_t *r, size_t *index)
{
        char device[24], *p = buf;
        size_t dlen = (size_t) (put_i64(device, r->device) - device), i = *index;
        cached_t stream = { 0 }, reserved = { 0 };
        leading_t allocated = { 0 }, requested = { 0 }, active = { 0 }, time = { 0 };

        device[dlen++] = ',';
        /* Every number of a row is at most 20 characters and its action at most 18, with room
         * left for put_cached()'s whole copies: NPF_REPORT_TIMELINE_ROW_MAX bounds a row. */
        for (; i < r->n && (size_t) (buf + size - p) >= NPF_REPORT_TIMELINE_ROW_MAX; i++) {
                const npf_mem_event_t *e = &r->events[i];
                const char *action = npf_action_name(e->action);
                size_t alen = strlen(action);

                memcpy(p, device, dlen);
                p = put_dec(p + dlen, i);
                *p++ = ',';
                memcpy(p, action, alen);
                p += alen;
                memcpy(p, ",0x", 3);
                p = put_hex(p + 3, e->addr);
                *p++ = ',';
                p = put_dec(p, e->size);
                memcpy(p, ",0x", 3);
                p = put_cached(p + 3, &stream, e->stream, true);
                *p++ = ',';
                p = put_dec_column(p, &allocated, r->allocated[i]);
                *p++ = ',';
                p = put_dec_column(p, &requested, r->requested[i]);
                *p++ = ',';
                p = put_dec_column(p, &active, r->active[i]);
                *p++ = ',';
                p = put_cached(p, &reserved, r->reserved[i], false);
                *p++ = ',';
                if (e->time_us >= 0)
                        p = put_dec_column(p, &time, (uint64_t) e->time_us);
                else if (e->time_us != NPF_TIME_UNKNOWN)
                        p = put_i64(p, e->time_us);
                *p++ = '\n';
        }
        *index = i;
        return (size_t) (p - buf);
}

int npf_report_timeline(FILE *f, const npf_replay_t *r)
{
        size_t size = (size_t) 1 << 20, i = 0;
        char *buf = malloc(size);

        if (!buf)
                return -ENOMEM;
        while (i < r->n) {
                size_t n = npf_report_timeline_rows(buf, size, r, &i);
                if (fwrite_unlocked(buf, 1, n, f) != n)
                        break;
        }
        free(buf);
        return ferror(f) ? -EIO : 0;
}

int npf_report_memory_svg(FILE *f, const char *title, npf_replay_t *const *replays, size_t n,
                          npf_trace_t *const *traces, size_t n_traces)
{
        size_t all = n + n_traces, n_steps = 0;
        double *steps_at = NULL;
        npf_svg_panel_t *panels = calloc(all + 1, sizeof(*panels));
        npf_svg_series_t *series = calloc(4 * all + 1, sizeof(*series));
        char (*titles)[48] = calloc(all + 1, sizeof(*titles));
        size_t **marks = calloc(all + 1, sizeof(*marks));
        double **times = calloc(all + 1, sizeof(*times));
        int r = -ENOMEM;

        if (!panels || !series || !titles || !marks || !times)
                goto out;
        if (n > NPF_SVG_PANELS_MAX)
                n = NPF_SVG_PANELS_MAX;
        for (size_t k = 0; k < n; k++) {
                const npf_replay_t *rp = replays[k];
                npf_svg_panel_t *p = &panels[k];
                size_t peak = 0, nm = 0;
                bool timed = rp->n > 0;
                for (size_t i = 0; i < rp->n; i++) {
                        if (rp->allocated[i] > rp->allocated[peak])
                                peak = i;
                        timed &= rp->events[i].time_us != NPF_TIME_UNKNOWN;
                        nm += rp->events[i].action == NPF_MEM_OOM;
                }
                if (nm && (marks[k] = malloc(nm * sizeof(size_t)))) {
                        nm = 0;
                        for (size_t i = 0; i < rp->n; i++)
                                if (rp->events[i].action == NPF_MEM_OOM)
                                        marks[k][nm++] = i;
                }
                if (timed && (times[k] = malloc(rp->n * sizeof(double))))
                        for (size_t i = 0; i < rp->n; i++)
                                times[k][i] = (double) rp->events[i].time_us;
                snprintf(titles[k], sizeof(titles[k]), "device %" PRId64, rp->device);
                /* Drawn in this order: allocated (the allocator's bytes) over what the program requested. */
                series[4 * k] = (npf_svg_series_t) { "reserved", rp->reserved };
                series[4 * k + 1] = (npf_svg_series_t) { "active", rp->active };
                series[4 * k + 2] = (npf_svg_series_t) { "allocated", rp->allocated };
                series[4 * k + 3] = (npf_svg_series_t) { "requested", rp->requested };
                *p = (npf_svg_panel_t) {
                        .title = titles[k], .n = rp->n, .time_us = times[k], .series = &series[4 * k],
                        .n_series = 4, .has_peak = rp->n > 0, .peak_series = 2, .peak_index = peak,
                        .marks = marks[k], .n_marks = marks[k] ? nm : 0,
                };
        }
        /* The process's resident memory over the window, where a trace sampled it (the host backend's steps). */
        size_t np = n;
        for (size_t k = 0; k < n_traces && np < NPF_SVG_PANELS_MAX; k++) {
                const double *t;
                const uint64_t *bytes;
                size_t m = npf_trace_rss(traces[k], &t, &bytes), peak = 0;
                if (m == 0)
                        continue;
                for (size_t i = 1; i < m; i++)
                        if (bytes[i] > bytes[peak])
                                peak = i;
                snprintf(titles[np], sizeof(titles[np]), "process resident memory");
                series[4 * np] = (npf_svg_series_t) { "rss", bytes };
                panels[np] = (npf_svg_panel_t) {
                        .title = titles[np], .n = m, .time_us = t, .series = &series[4 * np], .n_series = 1,
                        .has_peak = true, .peak_index = peak,
                };
                np++;
        }
        /* Where the window's steps begin, from the first trace that has them: marked on every panel over time. */
        for (size_t k = 0; k < n_traces && !n_steps; k++) {
                const npf_trace_step_t *st;
                size_t m = npf_trace_steps(traces[k], &st);
                if (m && (steps_at = malloc(m * sizeof(*steps_at)))) {
                        for (size_t i = 0; i < m; i++)
                                steps_at[i] = st[i].start_us;
                        n_steps = m;
                }
        }
        for (size_t k = 0; k < np; k++) {
                panels[k].steps_at = steps_at;
                panels[k].n_steps = n_steps;
        }
        r = npf_svg_memory(f, title, panels, np);
out:
        for (size_t k = 0; marks && times && k < n; k++) {
                free(marks[k]);
                free(times[k]);
        }
        free(marks);
        free(times);
        free(steps_at);
        free(titles);
        free(series);
        free(panels);
        return r;
}
