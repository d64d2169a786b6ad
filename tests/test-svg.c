/* SPDX-License-Identifier: MIT */
/* The charts: well-formed SVG, peaks kept through downsampling, axes, escaping, the rank chart,
 * the device chart. */
#include "replay/svg-memory.h"
#include "replay/svg-ranks.h"
#include "replay/svg-steps.h"
#include "replay/svg.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define KiB 1024ull
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)
#define TiB (1024ull * GiB)

/* --- helpers ------------------------------------------------------------------------- */

/* An SVG as written to memory, NUL-terminated. */
typedef struct doc {
        char *text;
        size_t len;
        int rc;
} doc_t;

static doc_t memory_chart(const char *title, const npf_svg_panel_t *panels, size_t n_panels)
{
        doc_t d = { 0 };
        FILE *f = open_memstream(&d.text, &d.len);

        assert_non_null(f);
        d.rc = npf_svg_memory(f, title, panels, n_panels);
        assert_int_equal(fclose(f), 0);
        return d;
}

static doc_t rank_chart(const char *title, const npf_svg_rank_t *ranks, size_t n, double median, double threshold)
{
        doc_t d = { 0 };
        FILE *f = open_memstream(&d.text, &d.len);

        assert_non_null(f);
        d.rc = npf_svg_ranks(f, title, ranks, n, median, threshold);
        assert_int_equal(fclose(f), 0);
        return d;
}

static doc_t steps_chart(const char *title, const npf_svg_steps_rank_t *ranks, size_t n)
{
        doc_t d = { 0 };
        FILE *f = open_memstream(&d.text, &d.len);

        assert_non_null(f);
        d.rc = npf_svg_steps(f, title, ranks, n);
        assert_int_equal(fclose(f), 0);
        return d;
}

/*
 * Parse @d with Python's XML parser (expat) and return what it read: the root's tag, the
 * <title>, then the text of every <text> element, one per line. The parse failing fails the
 * test with the parser's words.
 */
static char *xml_read(const doc_t *d)
{
        static const char script[] =
                "import sys, xml.dom.minidom as m\n"
                "d = m.parse(sys.argv[1])\n"
                "r = d.documentElement\n"
                "t = lambda e: ''.join(c.data for c in e.childNodes if c.nodeType == c.TEXT_NODE)\n"
                "print(r.tagName, r.getAttribute('xmlns'))\n"
                "print(t(r.getElementsByTagName('title')[0]))\n"
                "for e in r.getElementsByTagName('text'): print(t(e))\n";
        char path[] = "/tmp/test-svg-XXXXXX", cmd[256], *got = NULL;
        size_t got_len = 0;
        int fd = mkstemp(path);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, d->text, d->len), (ssize_t) d->len);
        close(fd);
        snprintf(cmd, sizeof(cmd), "PYTHONIOENCODING=utf-8 python3 -c \"$NPF_XML_SCRIPT\" %s 2>&1", path);
        setenv("NPF_XML_SCRIPT", script, 1);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        FILE *o = open_memstream(&got, &got_len);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                fwrite(buf, 1, n, o);
        fclose(o);
        int status = pclose(p);
        unlink(path);
        if (status != 0)
                fail_msg("the SVG is not well-formed XML: %s", got);
        if (strncmp(got, "svg http://www.w3.org/2000/svg\n", 31) != 0)
                fail_msg("the root is not an SVG element: %.200s", got);
        return got;
}

/* Whether @what is one of the lines @xml_read() returned. */
static bool has_line(const char *lines, const char *what)
{
        size_t len = strlen(what);

        for (const char *p = lines; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, what, len) == 0 && (p[len] == '\n' || p[len] == '\0'))
                        return true;
        return false;
}

static void expect_line(const char *lines, const char *what)
{
        if (!has_line(lines, what))
                fail_msg("no text \"%s\" in the chart; its texts are:\n%s", what, lines);
}

#define TEXTS(...) ((const char *const[]) { __VA_ARGS__, NULL })

/*
 * @d was written without error and parses; every one of @want (NULL-terminated) is a text
 * of it and none of @absent (NULL: no list) is. Frees @d's text.
 */
static void expect_texts(doc_t *d, const char *const *want, const char *const *absent)
{
        char *lines;

        assert_int_equal(d->rc, 0);
        lines = xml_read(d);
        for (; *want; want++)
                expect_line(lines, *want);
        for (; absent && *absent; absent++)
                if (has_line(lines, *absent))
                        fail_msg("the chart says \"%s\"; its texts are:\n%s", *absent, lines);
        free(lines);
        free(d->text);
        d->text = NULL;
}

/* The value of the attribute @attr of the element whose id is @id, or NULL. */
static char *attr_of(const char *svg, const char *id, const char *attr)
{
        char key[128];
        const char *e, *end, *a;

        snprintf(key, sizeof(key), "id=\"%s\"", id);
        e = strstr(svg, key);
        if (!e)
                return NULL;
        while (e > svg && *e != '<')
                e--;
        end = strchr(e, '>');
        snprintf(key, sizeof(key), " %s=\"", attr);
        a = strstr(e, key);
        if (!a || a > end)
                return NULL;
        a += strlen(key);
        return strndup(a, strcspn(a, "\""));
}

/* The points of the path with id @id ("M x,y L x,y ..."): how many, and the smallest y. */
static size_t path_points(const char *svg, const char *id, double *ret_min_y)
{
        char *d = attr_of(svg, id, "d");
        size_t n = 0;
        double min_y = 1e9;

        if (!d)
                fail_msg("no path with id %s", id);
        for (char *p = d; *p;) {
                if (*p != 'M' && *p != 'L') {
                        p++;
                        continue;
                }
                char *end;
                strtod(p + 1, &end);
                assert_int_equal(*end, ',');
                double y = strtod(end + 1, &p);
                min_y = y < min_y ? y : min_y;
                n++;
        }
        free(d);
        *ret_min_y = min_y;
        return n;
}

/* Occurrences of @what in @s. */
static size_t occurrences(const char *s, const char *what)
{
        size_t n = 0;

        for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
                n++;
        return n;
}

/* Whether @q is 1, 2 or 5 times a power of ten. */
static bool is_nice(double q)
{
        for (double p = 1e-3; p <= 1e6; p *= 10)
                for (int k = 0; k < 3; k++) {
                        double v = (double) ((const int[]) { 1, 2, 5 })[k] * p;
                        if (q > v * 0.999999 && q < v * 1.000001)
                                return true;
                }
        return false;
}

/* --- numbers, byte formatting and ticks ------------------------------------------------ */

/* npf_svg_px() of @v, written by printf: the same rounding (half up, at most 1e15, 0 for what
 * is not finite, no "-0.0"), digits from printf. */
static void px_by_printf(double v, char *buf, size_t size)
{
        double a = isfinite(v) ? fabs(v) : 0;
        uint64_t q = (uint64_t) ((a > 1e15 ? 1e15 : a) * 10.0 + 0.5);

        snprintf(buf, size, "%s%" PRIu64 ".%" PRIu64, v < 0 && q ? "-" : "", q / 10, q % 10);
}

static void test_numbers(void **state)
{
        static const double some[] = { 0, -0.0, 0.04, -0.04, 0.05, -0.06, 0.95, 9.95, 99.96, 145.25, -145.25,
                                       123456789.123, 1e15, 2e15, 1e300, -1e300, NAN, INFINITY, -INFINITY };
        char want[64];

        (void) state;
        for (size_t i = 0; i < sizeof(some) / sizeof(some[0]); i++) {
                px_by_printf(some[i], want, sizeof(want));
                if (strcmp(npf_svg_px(some[i]).s, want) != 0)
                        fail_msg("npf_svg_px(%g): got \"%s\", expected \"%s\"", some[i], npf_svg_px(some[i]).s, want);
        }
        /* Every tenth from -1000 to 1000, and a spread of larger values up to the limit. */
        for (int64_t k = -10000; k <= 10000; k++) {
                double v = (double) k / 10.0;
                px_by_printf(v, want, sizeof(want));
                assert_string_equal(npf_svg_px(v).s, want);
        }
        for (double v = 0.37; v < 1e15; v *= 1.37) {
                px_by_printf(v, want, sizeof(want));
                assert_string_equal(npf_svg_px(v).s, want);
                px_by_printf(-v, want, sizeof(want));
                assert_string_equal(npf_svg_px(-v).s, want);
        }
        assert_string_equal(npf_svg_px(-0.04).s, "0.0");
        assert_string_equal(npf_svg_px(1e300).s, "1000000000000000.0");
        assert_string_equal(npf_svg_trimmed(2.5, 2).s, "2.5");
        assert_string_equal(npf_svg_trimmed(2.0, 2).s, "2");
        assert_string_equal(npf_svg_trimmed(0.25, 2).s, "0.25");
        assert_string_equal(npf_svg_trimmed(-0.125, 3).s, "-0.125");
        assert_string_equal(npf_svg_trimmed(1234.5678, 0).s, "1235");
}

static void expect_bytes(uint64_t v, const char *want)
{
        char buf[NPF_SVG_BYTES_MAX];

        if (strcmp(npf_svg_format_bytes(v, buf, sizeof(buf)), want) != 0)
                fail_msg("%" PRIu64 " bytes: got \"%s\", expected \"%s\"", v, buf, want);
}

static void test_format_bytes(void **state)
{
        char small[6];

        (void) state;
        expect_bytes(0, "0 B");
        expect_bytes(1, "1 B");
        expect_bytes(1023, "1023 B");
        expect_bytes(1024, "1.0 KiB");
        expect_bytes(1536, "1.5 KiB");
        expect_bytes(MiB + MiB / 2, "1.5 MiB");
        expect_bytes(2 * GiB, "2.0 GiB");
        expect_bytes(3 * TiB + TiB / 5, "3.2 TiB");
        expect_bytes(1000 * GiB, "1000.0 GiB");
        expect_bytes(MiB - 1, "1.0 MiB");          /* 1023.999 KiB rounds up into the next unit */
        expect_bytes(1023 * KiB, "1023.0 KiB");
        expect_bytes(UINT64_MAX, "16.0 EiB");
        assert_string_equal(npf_svg_format_bytes(2 * GiB, small, sizeof(small)), "2.0 G");
}

static void test_byte_ticks_nice(void **state)
{
        static const uint64_t maxes[] = { 0, 1, 7, 1000, 1023, 1024, 5000, 999999, 3 * GiB + 2 * MiB,
                                          5 * GiB, 40 * GiB, 7 * TiB, UINT64_C(1) << 62, UINT64_MAX };
        (void) state;

        for (size_t k = 0; k < N_OF(maxes); k++) {
                double t[32], m = maxes[k] ? (double) maxes[k] : 1;
                size_t n = npf__svg_byte_ticks(maxes[k], t, N_OF(t));
                if (n < 3 || n > 12)
                        fail_msg("max %" PRIu64 ": %zu ticks", maxes[k], n);
                assert_true(t[0] == 0);
                double step = t[1];
                for (size_t i = 1; i < n; i++)
                        assert_true(t[i] - t[i - 1] > step * 0.999999 && t[i] - t[i - 1] < step * 1.000001);
                assert_true(t[n - 1] >= m);
                assert_true(t[n - 2] < m * 1.05);
                /* The step is a nice number of some 1024-based unit, the largest the maximum reaches. */
                double unit = 1;
                while (unit * 1024 <= m && unit < (double) (UINT64_C(1) << 60))
                        unit *= 1024;
                if (!is_nice(step / unit))
                        fail_msg("max %" PRIu64 ": a step of %g bytes is %g units of %g", maxes[k], step,
                                 step / unit, unit);
        }
}

/* --- the memory chart ------------------------------------------------------------------ */

static void test_well_formed_with_panels(void **state)
{
        enum { N = 3000 };
        uint64_t *res = calloc(N, sizeof(*res)), *act = calloc(N, sizeof(*act)), *alc = calloc(N, sizeof(*alc));
        double *t = calloc(N, sizeof(*t));
        size_t marks[] = { 10, 2000 };

        (void) state;
        for (size_t i = 0; i < N; i++) {
                alc[i] = GiB + (i % 97) * MiB;
                act[i] = alc[i] + 64 * MiB;
                res[i] = 2 * GiB;
                t[i] = 1.7e15 + (double) i * 100;
        }
        npf_svg_series_t s[] = { { "reserved", res }, { "active", act }, { "allocated", alc } };
        npf_svg_panel_t p[] = {
                { .title = "device 0", .n = N, .series = s, .n_series = 3, .has_peak = true, .peak_series = 2,
                  .peak_index = 96, .marks = marks, .n_marks = 2 },
                { .title = "device 1", .n = N, .time_us = t, .series = s, .n_series = 3 },
                { .title = "device 2", .n = 0 },
        };
        doc_t d = memory_chart("rank 0", p, N_OF(p));
        /* Scripts, style sheets and outside references have no place in it. */
        assert_null(strstr(d.text, "<script"));
        assert_null(strstr(d.text, "<style"));
        assert_null(strstr(d.text, "href"));
        assert_non_null(strstr(d.text, "fill=\"#ffffff\""));
        expect_texts(&d,
                     TEXTS("rank 0", "device 0", "device 2", "no events", "event", "time since the first event",
                           "reserved (max 2.0 GiB)", "allocated (max 1.1 GiB)", "OOM (2)"),
                     NULL);
        free(res);
        free(act);
        free(alc);
        free(t);
}

static void test_peak_label(void **state)
{
        enum { N = 50000 };
        uint64_t *y = calloc(N, sizeof(*y));

        (void) state;
        for (size_t i = 0; i < N; i++)
                y[i] = 512 * MiB + i * KiB;
        y[41233] = 3 * GiB + GiB / 5;
        npf_svg_series_t s[] = { { "allocated", y } };
        npf_svg_panel_t p = { .n = N, .series = s, .n_series = 1, .has_peak = true, .peak_index = 41233 };
        doc_t d = memory_chart("memory", &p, 1);
        /* The y axis ends at 4 GiB, in steps of 1 GiB. */
        expect_texts(&d, TEXTS("peak 3.2 GiB allocated at event 41,233", "1 GiB", "4 GiB"), TEXTS("5 GiB"));

        p.peak_label = "highest <allocated> & \"friends\"";
        d = memory_chart("memory", &p, 1);
        expect_texts(&d, TEXTS("highest <allocated> & \"friends\""), TEXTS("peak 3.2 GiB allocated at event 41,233"));
        free(y);
}

/* A single-point spike among five million points survives downsampling, wherever it is. */
static void test_downsample_keeps_spike(void **state)
{
        enum { N = 5000000 };
        static const size_t spikes[] = { 3141593, N - 1, 0 };
        uint64_t *y = calloc(N, sizeof(*y));

        (void) state;
        assert_non_null(y);
        for (size_t k = 0; k < N_OF(spikes); k++) {
                for (size_t i = 0; i < N; i++)
                        y[i] = GiB + (i % 1000) * MiB / 4;
                y[spikes[k]] = 3 * GiB;
                npf_svg_series_t s[] = { { "allocated", y } };
                npf_svg_panel_t p = { .n = N, .series = s, .n_series = 1, .has_peak = true,
                                      .peak_index = spikes[k] };
                doc_t d = memory_chart("five million", &p, 1);
                assert_int_equal(d.rc, 0);

                double min_y, area_min_y;
                size_t n = path_points(d.text, "p0-s0-line", &min_y);
                size_t n_area = path_points(d.text, "p0-s0-area", &area_min_y);
                char *cy = attr_of(d.text, "p0-peak", "cy");
                assert_non_null(cy);
                if (min_y != strtod(cy, NULL))
                        fail_msg("spike at %zu: the line's highest point is at y=%g, the peak at y=%s", spikes[k],
                                 min_y, cy);
                assert_true(area_min_y == min_y);
                /* About two points per pixel column, never one per event. */
                if (n < 800 || n > 3000 || n_area > 3002)
                        fail_msg("%zu points in the line, %zu in the area", n, n_area);
                free(cy);
                if (k == 0)
                        expect_texts(&d,
                                     TEXTS("peak 3.0 GiB allocated at event 3,141,593",
                                           "5,000,000 events, lowest and highest per pixel column", "1M", "5M"),
                                     NULL);
                free(d.text);
        }
        free(y);
}

/*
 * A spike of microseconds in the first pixel column of a chart of 100 s rises and falls in
 * that column: the line goes up and straight back down at the same x, and nowhere is it a
 * ramp into the next column. The same for a spike in a column of the middle.
 */
static void test_spike_in_one_column_is_no_ramp(void **state)
{
        enum { N = 2000 };
        static const size_t at[] = { 1, 1001 };
        uint64_t *y = calloc(N, sizeof(*y));
        double *t = calloc(N, sizeof(*t));

        (void) state;
        assert_non_null(y);
        assert_non_null(t);
        for (size_t k = 0; k < N_OF(at); k++) {
                for (size_t i = 0; i < N; i++) {
                        y[i] = 64 * MiB;
                        t[i] = (double) i * 50000.0;    /* every 50 ms: 100 s in all */
                }
                y[at[k]] = 464 * MiB;                   /* 400 MiB more for 4 us */
                t[at[k]] = t[at[k] - 1] + 2;
                t[at[k] + 1] = t[at[k]] + 4;
                npf_svg_series_t s[] = { { "allocated", y } };
                npf_svg_panel_t p = { .n = N, .time_us = t, .series = s, .n_series = 1, .has_peak = true,
                                      .peak_index = at[k] };
                doc_t d = memory_chart("spike", &p, 1);
                assert_int_equal(d.rc, 0);
                char *path = attr_of(d.text, "p0-s0-line", "d");
                assert_non_null(path);
                double xs[4 * 1000], ys[4 * 1000], top = 1e9;
                size_t n = 0, peak = 0;
                for (char *q = path; *q && n < N_OF(xs);) {
                        if (*q != 'M' && *q != 'L') {
                                q++;
                                continue;
                        }
                        xs[n] = strtod(q + 1, &q);
                        ys[n] = strtod(q + 1, &q);
                        if (ys[n] < top)
                                top = ys[n], peak = n;
                        n++;
                }
                free(path);
                /* Up and down at the one x of the column, then level at the height before it. */
                assert_true(peak > 0 && peak + 1 < n);
                if (xs[peak - 1] != xs[peak] || xs[peak + 1] != xs[peak] || ys[peak + 1] != ys[peak - 1])
                        fail_msg("spike at %zu: (%g,%g) (%g,%g) (%g,%g): not straight up and down", at[k], xs[peak - 1],
                                 ys[peak - 1], xs[peak], ys[peak], xs[peak + 1], ys[peak + 1]);
                for (size_t i = 0; i + 1 < n; i++)
                        if (xs[i + 1] != xs[i] && ys[i + 1] != ys[i] && (i == peak || i + 1 == peak))
                                fail_msg("spike at %zu: a ramp from (%g,%g) to (%g,%g)", at[k], xs[i], ys[i], xs[i + 1],
                                         ys[i + 1]);
                free(d.text);
        }
        free(y);
        free(t);
}

/* active equal to allocated would hide it: its line is dashed where it lies on it, and the legend says so. */
static void test_equal_series_both_show(void **state)
{
        uint64_t allocated[] = { 100 * MiB, 300 * MiB, 200 * MiB }, active[] = { 100 * MiB, 300 * MiB, 250 * MiB },
                 reserved[] = { 512 * MiB, 512 * MiB, 512 * MiB };
        npf_svg_series_t s[] = { { "allocated", allocated }, { "active", active }, { "reserved", reserved } };
        npf_svg_panel_t p = { .n = 3, .series = s, .n_series = 3 };

        (void) state;
        doc_t d = memory_chart("equal", &p, 1);
        assert_int_equal(d.rc, 0);
        char *dash = attr_of(d.text, "p0-s1-line", "stroke-dasharray");
        assert_non_null(dash);
        free(dash);
        assert_null(attr_of(d.text, "p0-s0-line", "stroke-dasharray"));
        assert_null(attr_of(d.text, "p0-s2-line", "stroke-dasharray"));
        /* Whole lines: reserved, on nothing, says nothing of it. */
        expect_texts(&d, TEXTS("active (max 300.0 MiB; dashed over allocated where equal)", "reserved (max 512.0 MiB)"),
                     NULL);

        /* Never equal: solid. */
        active[0] = 150 * MiB;
        active[1] = 350 * MiB;
        d = memory_chart("unequal", &p, 1);
        assert_null(attr_of(d.text, "p0-s1-line", "stroke-dasharray"));
        expect_texts(&d, TEXTS("active (max 350.0 MiB)"), NULL);
}

/* Where steps begin, on a panel over time: a grey line each (none outside the data), and their count. */
static void test_step_marks(void **state)
{
        uint64_t y[] = { 100 * MiB, 300 * MiB, 200 * MiB, 250 * MiB };
        double t[] = { 1000, 2000, 3000, 4000 }, at[] = { 1000, 2500, 3500, 99999 };
        npf_svg_series_t s[] = { { "rss", y } };
        npf_svg_panel_t p = { .n = 4, .time_us = t, .series = s, .n_series = 1, .steps_at = at, .n_steps = 4 };

        (void) state;
        doc_t d = memory_chart("steps", &p, 1);
        assert_int_equal(d.rc, 0);
        char *path = attr_of(d.text, "p0-steps", "d");
        assert_non_null(path);
        assert_int_equal(occurrences(path, "M"), 3);    /* the fourth is past the data */
        free(path);
        expect_texts(&d, TEXTS("ProfilerStep (4)"), NULL);

        /* Over event indices the steps have no place: none is drawn, none said. */
        p.time_us = NULL;
        d = memory_chart("indices", &p, 1);
        assert_null(strstr(d.text, "p0-steps"));
        assert_null(strstr(d.text, "ProfilerStep"));
        free(d.text);

        /* Steps without their places are refused before anything is written. */
        p.time_us = t;
        p.steps_at = NULL;
        d = memory_chart("refused", &p, 1);
        assert_int_equal(d.rc, -EINVAL);
        free(d.text);
}

/* A few points are drawn as steps: each value holds until the next event. */
static void test_few_points_are_steps(void **state)
{
        uint64_t y[] = { 100, 300, 200 };
        npf_svg_series_t s[] = { { "allocated", y } };
        npf_svg_panel_t p = { .n = 3, .series = s, .n_series = 1, .has_peak = true, .peak_index = 1 };
        double min_y;

        (void) state;
        doc_t d = memory_chart("three", &p, 1);
        assert_int_equal(d.rc, 0);
        /* 100; then up to 300 at event 1 after a step; then down to 200 at event 2 after a step. */
        assert_int_equal(path_points(d.text, "p0-s0-line", &min_y), 5);
        char *cy = attr_of(d.text, "p0-peak", "cy");
        assert_true(min_y == strtod(cy, NULL));
        free(cy);
        expect_texts(&d, TEXTS("peak 300 B allocated at event 1", "3 events"), NULL);
}

static void test_event_ticks(void **state)
{
        enum { N = 10001 };
        uint64_t *y = calloc(N, sizeof(*y));
        npf_svg_series_t s[] = { { "allocated", y } };
        npf_svg_panel_t p = { .n = N, .series = s, .n_series = 1 };

        (void) state;
        doc_t d = memory_chart("ticks", &p, 1);
        expect_texts(&d, TEXTS("0", "2k", "4k", "10k", "event"), TEXTS("3k"));
        free(y);
}

static void test_time_ticks(void **state)
{
        enum { N = 101 };
        uint64_t y[N];
        double t[N];
        npf_svg_series_t s[] = { { "allocated", y } };
        npf_svg_panel_t p = { .n = N, .time_us = t, .series = s, .n_series = 1, .has_peak = true,
                              .peak_index = 50 };

        (void) state;
        for (size_t i = 0; i < N; i++) {
                y[i] = i * MiB;
                t[i] = 5e15 + (double) i * 25000;    /* 2.5 s in all, from an epoch origin */
        }
        y[50] = GiB;
        doc_t d = memory_chart("seconds", &p, 1);
        expect_texts(&d,
                     TEXTS("time since the first event", "0.5 s", "2.5 s",
                           "peak 1.0 GiB allocated at 1.25 s (event 50)", "101 events over 2.5 s"),
                     NULL);

        for (size_t i = 0; i < N; i++)
                t[i] = 1000 + (double) i * 400;     /* 40 ms */
        d = memory_chart("milliseconds", &p, 1);
        expect_texts(&d, TEXTS("5 ms", "40 ms"), NULL);

        /* An unknown time anywhere: the events are the axis. */
        t[7] = NAN;
        d = memory_chart("no time", &p, 1);
        expect_texts(&d, TEXTS("event", "peak 1.0 GiB allocated at event 50"), TEXTS("time since the first event"));
}

static void test_marks(void **state)
{
        enum { N = 1000000 };
        uint64_t *y = calloc(N, sizeof(*y));
        /* 10 and 11 fall into one pixel column; 500000 is given twice. */
        size_t marks[] = { 10, 11, 500000, 500000, N - 1 };
        npf_svg_series_t s[] = { { "allocated", y } };
        npf_svg_panel_t p = { .n = N, .series = s, .n_series = 1, .marks = marks, .n_marks = N_OF(marks),
                              .marks_name = "out of memory" };

        (void) state;
        doc_t d = memory_chart("marks", &p, 1);
        assert_int_equal(d.rc, 0);
        char *path = attr_of(d.text, "p0-marks", "d");
        assert_non_null(path);
        assert_int_equal(occurrences(path, "M"), 3);
        free(path);
        expect_texts(&d, TEXTS("out of memory (5)"), NULL);
        free(y);
}

static void test_escaping(void **state)
{
        uint64_t y[] = { 1, 2 };
        char long_name[400];
        npf_svg_series_t s[] = { { "<b>&\"all'ocated\"", y }, { "bad \xff\xfe utf-8 \x01 here", y },
                                 { long_name, y } };
        npf_svg_panel_t p = { .title = "</text><script>alert(1)</script>", .n = 2, .series = s, .n_series = 3,
                              .has_peak = true, .peak_index = 1 };

        (void) state;
        memset(long_name, 'x', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = '\0';
        doc_t d = memory_chart("a < b & \"c\"", &p, 1);
        assert_int_equal(d.rc, 0);
        assert_null(strstr(d.text, "<script"));
        assert_null(strstr(d.text, "<b>"));
        assert_non_null(strstr(d.text, "a &lt; b &amp; &quot;c&quot;"));
        char *lines = xml_read(&d);
        expect_line(lines, "a < b & \"c\"");
        expect_line(lines, "</text><script>alert(1)</script>");
        expect_line(lines, "<b>&\"all'ocated\" (max 2 B)");
        expect_line(lines, "peak 2 B <b>&\"all'ocated\" at event 1");
        /* Its values are the first series': the name of the series it lies on is escaped too
         * (without "where equal": with the long name, the legend would not fit the page). */
        expect_line(lines, "bad \xef\xbf\xbd\xef\xbf\xbd utf-8 \xef\xbf\xbd here (max 2 B; dashed over "
                           "<b>&\"all'ocated\")");
        /* A very long name is cut, with an ellipsis. */
        assert_null(strstr(lines, long_name));
        assert_non_null(strstr(lines, "xxxxxxxxxx\xe2\x80\xa6"));
        free(lines);
        free(d.text);
}

static void test_no_events(void **state)
{
        npf_svg_panel_t p = { .title = "device 0", .n = 0 };

        (void) state;
        doc_t d = memory_chart("nothing", NULL, 0);
        expect_texts(&d, TEXTS("nothing", "no events"), NULL);
        d = memory_chart(NULL, &p, 1);
        expect_texts(&d, TEXTS("device 0", "no events"), NULL);
}

/* A bad argument is refused before anything is written. */
static void expect_refused(const npf_svg_panel_t *p, size_t n_panels, int rc)
{
        doc_t d = memory_chart("refused", p, n_panels);

        assert_int_equal(d.rc, rc);
        assert_int_equal(d.len, 0);
        free(d.text);
}

static void test_invalid(void **state)
{
        uint64_t y[] = { 1, 2, 3 };
        size_t bad_mark = 3;
        npf_svg_series_t s[] = { { "a", y }, { "b", y }, { "c", y }, { "d", y }, { "e", y } };
        npf_svg_series_t no_values[] = { { "a", NULL } };
        npf_svg_panel_t ok = { .n = 3, .series = s, .n_series = 1, .has_peak = true, .peak_index = 2 }, p;
        npf_svg_panel_t many[NPF_SVG_PANELS_MAX + 1];

        (void) state;
        assert_int_equal(npf_svg_memory(NULL, "x", &ok, 1), -EINVAL);
        expect_refused(NULL, 1, -EINVAL);
        p = ok, p.peak_index = 3;
        expect_refused(&p, 1, -EINVAL);
        p = ok, p.peak_series = 1;
        expect_refused(&p, 1, -EINVAL);
        p = ok, p.n_series = 0;
        expect_refused(&p, 1, -EINVAL);
        p = ok, p.n_series = 5;
        expect_refused(&p, 1, -EINVAL);
        p = ok, p.series = NULL;
        expect_refused(&p, 1, -EINVAL);
        p = ok, p.series = no_values;
        expect_refused(&p, 1, -EINVAL);
        p = ok, p.marks = &bad_mark, p.n_marks = 1;
        expect_refused(&p, 1, -EINVAL);
        p = ok, p.marks = NULL, p.n_marks = 1;
        expect_refused(&p, 1, -EINVAL);
        p = ok, p.n = 0;        /* a peak in a panel with no points */
        expect_refused(&p, 1, -EINVAL);
        for (size_t i = 0; i < N_OF(many); i++)
                many[i] = ok;
        expect_refused(many, N_OF(many), -E2BIG);
        p = ok, p.n_series = 4;
        doc_t d = memory_chart("four series", &p, 1);
        assert_int_equal(d.rc, 0);
        free(d.text);
        assert_int_equal(npf_svg_ranks(NULL, "x", NULL, 0, 1, 1), -EINVAL);
        assert_int_equal(npf_svg_ranks(stdout, "x", NULL, 1, 1, 1), -EINVAL);
        assert_int_equal(npf_svg_ranks(stdout, "x", (npf_svg_rank_t[1]) { 0 }, NPF_SVG_RANKS_MAX + 1, 1, 1),
                         -E2BIG);
}

/* A write that fails is the caller's error, with its errno. */
static void test_write_error(void **state)
{
        enum { N = 100000 };
        uint64_t *y = calloc(N, sizeof(*y));
        npf_svg_series_t s[] = { { "allocated", y } };
        npf_svg_panel_t p = { .n = N, .series = s, .n_series = 1 };
        npf_svg_rank_t r = { .name = "0", .step_us = 100, .has_step = true };
        FILE *f = fopen("/dev/full", "w");

        (void) state;
        assert_non_null(f);
        assert_int_equal(npf_svg_memory(f, "full", &p, 1), -ENOSPC);
        fclose(f);
        f = fopen("/dev/full", "w");
        assert_int_equal(npf_svg_ranks(f, "full", &r, 1, 100, 110), -ENOSPC);
        fclose(f);
        free(y);
}

/* --- the rank chart -------------------------------------------------------------------- */

static void test_ranks_stragglers(void **state)
{
        enum { N = 10 };
        npf_svg_rank_t r[N];
        char names[N][16];

        (void) state;
        for (size_t i = 0; i < N; i++) {
                snprintf(names[i], sizeof(names[i]), "%zu", i);
                r[i] = (npf_svg_rank_t) { .name = names[i], .step_us = 100000 + (double) i * 100,
                                          .peak_bytes = 20 * GiB + i * GiB, .has_step = true, .has_peak = true };
        }
        r[2].step_us = 130000, r[2].straggler = true;
        r[7].step_us = 112000, r[7].straggler = true;
        r[4].has_step = false;
        r[6].name = "<six> & \"6\"";     /* an even rank: every other label is shown */
        doc_t d = rank_chart("cluster", r, N, 100450, 110495);
        assert_int_equal(d.rc, 0);

        for (size_t i = 0; i < N; i++) {
                char id[32];
                snprintf(id, sizeof(id), "step-%zu", i);
                char *cls = attr_of(d.text, id, "class");
                if (i == 4) {
                        assert_null(cls);
                } else {
                        assert_non_null(cls);
                        assert_string_equal(cls, r[i].straggler ? "bar straggler" : "bar");
                }
                free(cls);
                snprintf(id, sizeof(id), "peak-%zu", i);
                cls = attr_of(d.text, id, "class");
                assert_non_null(cls);
                assert_string_equal(cls, r[i].straggler ? "bar straggler" : "bar");
                free(cls);
        }
        assert_int_equal(occurrences(d.text, "class=\"bar straggler\""), 4);
        expect_texts(&d,
                     TEXTS("cluster", "10 ranks, median step 100 ms, 2 stragglers: 2, 7", "median of all ranks 100 ms",
                           "straggler above 110 ms", "+29%", "<six> & \"6\"", "n/a", "30 GiB"),
                     NULL);
}

static void test_ranks_empty_and_many(void **state)
{
        enum { N = 5000 };
        npf_svg_rank_t *r = calloc(N, sizeof(*r));

        (void) state;
        doc_t d = rank_chart(NULL, NULL, 0, 0, 0);
        expect_texts(&d, TEXTS("no ranks", "0 ranks, no stragglers"), NULL);

        /* Thousands of ranks: still one bar each, the stragglers all there, the labels thinned. */
        for (size_t i = 0; i < N; i++)
                r[i] = (npf_svg_rank_t) { .step_us = 1000 + (double) (i % 7), .peak_bytes = GiB, .has_step = true,
                                          .has_peak = true, .straggler = i % 1000 == 999 };
        d = rank_chart("many", r, N, 1003, 1103.3);
        assert_int_equal(d.rc, 0);
        assert_int_equal(occurrences(d.text, "class=\"bar straggler\""), 10);
        assert_int_equal(occurrences(d.text, "class=\"bar\""), 2 * (N - 5));
        char *lines = xml_read(&d);
        expect_line(lines, "5,000 ranks, median step 1 ms, 5 stragglers: 999, 1999, 2999, 3999, 4999");
        assert_true(occurrences(lines, "\n") < 1000);
        free(lines);
        free(d.text);
        free(r);
}


/* --- the device chart ------------------------------------------------------------------ */

#define EN_DASH "\xe2\x80\x93"

/* The number in the attribute @attr of the element @id; the element must exist. */
static double num_attr(const char *svg, const char *id, const char *attr)
{
        char *v = attr_of(svg, id, attr);
        double x;

        if (!v)
                fail_msg("no %s of an element with id %s", attr, id);
        x = strtod(v, NULL);
        free(v);
        return x;
}

/* Whether @got / @want is within 1% of 1. */
static void expect_ratio(double got, double want, const char *what)
{
        if (!(want > 0) || !(got > want * 0.99 && got < want * 1.01))
                fail_msg("%s: %g, expected %g within 1%%", what, got, want);
}

/* The part @part of bar @j: the height of its rect; 0 when none is drawn. */
static double part_height(const char *svg, size_t j, const char *part)
{
        char id[64];
        char *v;
        double h;

        snprintf(id, sizeof(id), "bar-%zu-%s", j, part);
        v = attr_of(svg, id, "height");
        h = v ? strtod(v, NULL) : 0;
        free(v);
        return h;
}

/* torch_npu's own figures for step 50 of a real 2-rank job: one bar, its parts in proportion. */
static void test_steps_one_rank(void **state)
{
        npf_svg_step_t s = { .label = "step 50", .computing_us = 8873.756, .not_overlapped_us = 101963.203,
                             .free_us = 25744.05, .bubble_us = 0 };
        npf_svg_steps_rank_t r = { .name = "rank 0", .steps = &s, .n_steps = 1 };

        (void) state;
        doc_t d = steps_chart("device", &r, 1);
        assert_int_equal(d.rc, 0);
        assert_int_equal(occurrences(d.text, "<g id=\"bar-"), 1);
        /* The four parts' swatches, no overlap's: nothing was overlapped. */
        assert_int_equal(occurrences(d.text, "width=\"14\" height=\"10\""), 4);
        double computing = part_height(d.text, 0, "computing"), comm = part_height(d.text, 0, "communication"),
               idle = part_height(d.text, 0, "free");
        expect_ratio(computing / comm, 8873.756 / 101963.203, "computing / communication");
        expect_ratio(idle / comm, 25744.05 / 101963.203, "free / communication");
        assert_true(part_height(d.text, 0, "bubble") == 0);
        assert_null(strstr(d.text, "bar-0-overlapped"));
        /* Stacked in order, each on the one below, on the axis. */
        double y_comp = num_attr(d.text, "bar-0-computing", "y"), y_comm = num_attr(d.text, "bar-0-communication", "y"),
               y_free = num_attr(d.text, "bar-0-free", "y");
        assert_true(fabs(y_comm + comm - y_comp) < 0.01);
        assert_true(fabs(y_free + idle - y_comm) < 0.01);
        assert_true(fabs(y_comp + computing - (NPF_SVG_HEAD_H + NPF_SVG_PANEL_HEAD_H + NPF_SVG_PLOT_H)) < 0.01);
        char *lines = xml_read(&d);
        /* The legend says each part once. */
        static const char *const words[] = { "computing", "communication not overlapped", "idle (free)",
                                             "pipeline bubble" };
        for (size_t i = 0; i < N_OF(words); i++) {
                char line[64];
                snprintf(line, sizeof(line), "\n%s\n", words[i]);
                if (occurrences(lines, line) != 1)
                        fail_msg("\"%s\" is in the chart %zu times; its texts are:\n%s", words[i],
                                 occurrences(lines, line), lines);
        }
        expect_line(lines, "rank 0, step 50: 137 ms, 75% communication not overlapped, 19% idle, 6% computing");
        expect_line(lines, "step 50");
        expect_line(lines, "137 ms");
        expect_line(lines, "75%");
        free(lines);
        free(d.text);

        /* Overlapped communication: hatched at the top of the computing, never taller, and in the legend. */
        s.overlapped_us = 4436.878;
        d = steps_chart("device", &r, 1);
        assert_int_equal(occurrences(d.text, "width=\"14\" height=\"10\""), 5);
        expect_ratio(part_height(d.text, 0, "overlapped") / part_height(d.text, 0, "computing"), 0.5, "overlapped");
        assert_true(num_attr(d.text, "bar-0-overlapped", "y") == num_attr(d.text, "bar-0-computing", "y"));
        s.overlapped_us = 1e9;
        free(d.text);
        d = steps_chart("device", &r, 1);
        assert_true(part_height(d.text, 0, "overlapped") == part_height(d.text, 0, "computing"));
        expect_texts(&d, TEXTS("overlapped communication"), NULL);
}

/* Eight ranks, a bar each of its median step; the slow rank outlined and its note told. */
static void test_steps_cluster(void **state)
{
        enum { N = 8, STEPS = 3 };
        npf_svg_step_t steps[N][STEPS];
        npf_svg_steps_rank_t r[N];
        char names[N][16];

        (void) state;
        for (size_t i = 0; i < N; i++) {
                snprintf(names[i], sizeof(names[i]), "rank %zu", i);
                for (size_t k = 0; k < STEPS; k++)
                        steps[i][k] = (npf_svg_step_t) { .computing_us = 30000, .not_overlapped_us = 20000,
                                                          .free_us = 5000, .bubble_us = i < 4 ? 8000 : 0 };
                r[i] = (npf_svg_steps_rank_t) { .name = names[i], .steps = steps[i], .n_steps = STEPS };
        }
        /* The median, not the mean: one long step does not move rank 2's bar. */
        steps[2][1].computing_us = 900000;
        steps[2][2].computing_us = 10000;
        steps[5][0].computing_us = steps[5][1].computing_us = steps[5][2].computing_us = 51000;
        r[5].slow = true;
        r[5].note = "computes 1.7x its stage peers";
        doc_t d = steps_chart("cluster", r, N);
        assert_int_equal(d.rc, 0);
        assert_int_equal(occurrences(d.text, "<g id=\"bar-"), N);
        for (size_t i = 0; i < N; i++) {
                char id[32];
                snprintf(id, sizeof(id), "bar-%zu", i);
                char *cls = attr_of(d.text, id, "class");
                assert_non_null(cls);
                assert_string_equal(cls, i == 5 ? "bar slow" : "bar");
                free(cls);
        }
        assert_non_null(strstr(d.text, "id=\"bar-5-slow\""));
        assert_int_equal(occurrences(d.text, "-slow\""), 1);
        expect_ratio(part_height(d.text, 2, "computing") / part_height(d.text, 2, "communication"), 1.5,
                     "rank 2's median computing / communication");
        expect_ratio(part_height(d.text, 5, "computing") / part_height(d.text, 0, "computing"), 1.7,
                     "rank 5's computing / rank 0's");
        assert_true(part_height(d.text, 3, "bubble") > 0);
        assert_true(part_height(d.text, 4, "bubble") == 0);
        expect_texts(&d,
                     TEXTS("cluster", "8 ranks, 24 steps, 1 slow: rank 5", "median step of each rank", "slow rank",
                           "slow", "rank 5: computes 1.7x its stage peers", "rank 0", "rank 7", "rank"),
                     TEXTS("rank 4: computes 1.7x its stage peers"));

        /* A rank without steps has no bar; no rank with steps, no plot. */
        r[3].n_steps = 0;
        r[3].steps = NULL;
        d = steps_chart("cluster", r, N);
        assert_null(strstr(d.text, "id=\"bar-3\""));
        expect_texts(&d, TEXTS("n/a", "8 ranks, 21 steps (1 rank without), 1 slow: rank 5"), NULL);
        for (size_t i = 0; i < N; i++)
                r[i].n_steps = 0;
        d = steps_chart("cluster", r, N);
        expect_texts(&d, TEXTS("no steps on any rank"), TEXTS("n/a"));
}

/* Many steps: binned into runs, each bar the runs' medians, labelled with its range; small files. */
static void test_steps_binned(void **state)
{
        enum { N = 10000 };
        npf_svg_step_t *s = calloc(NPF_SVG_STEPS_MAX, sizeof(*s));
        char (*labels)[24] = calloc(NPF_SVG_STEPS_MAX, sizeof(*labels));
        npf_svg_steps_rank_t r = { .name = "rank 1", .steps = s, .n_steps = N };

        (void) state;
        assert_non_null(s);
        assert_non_null(labels);
        for (size_t i = 0; i < NPF_SVG_STEPS_MAX; i++) {
                snprintf(labels[i], sizeof(labels[i]), "step %zu", i + 50);
                /* In each run of 25 the computing goes 1000 to 3400 us: its median is 2200. */
                s[i] = (npf_svg_step_t) { .label = labels[i], .computing_us = 1000 + (double) (i % 25) * 100,
                                          .not_overlapped_us = 1000, .free_us = 500, .overlapped_us = 100 };
        }
        s[20].computing_us = 1e7;       /* an outlier above the median, which leaves it out */
        doc_t d = steps_chart(NULL, &r, 1);
        assert_int_equal(d.rc, 0);
        assert_int_equal(occurrences(d.text, "<g id=\"bar-"), N / 25);
        if (d.len > 2000000)
                fail_msg("%zu bytes for %d steps", d.len, N);
        expect_ratio(part_height(d.text, 0, "computing") / part_height(d.text, 0, "communication"), 2.2,
                     "bar 0's median computing / communication");
        expect_ratio(part_height(d.text, 399, "computing") / part_height(d.text, 0, "computing"), 1,
                     "the last bar's computing / the first's");
        assert_non_null(strstr(d.text, "<title>step 10025" EN_DASH "10049 (median of 25 steps): "));
        char *lines = xml_read(&d);
        expect_line(lines, "step 50" EN_DASH "74");
        expect_line(lines, "device time of each step: a bar the median of 25 steps");
        expect_line(lines, "rank 1, 10,000 steps, median step 3.7 ms: 59% computing, 27% communication not overlapped, "
                           "14% idle");
        /* The axis' labels are thinned out: far fewer than the bars. */
        assert_true(occurrences(lines, EN_DASH) < 60);
        free(lines);
        free(d.text);

        /* At the cap, still 400 bars at most and under 2 MB; past it, refused. */
        r.n_steps = NPF_SVG_STEPS_MAX;
        d = steps_chart(NULL, &r, 1);
        assert_int_equal(d.rc, 0);
        assert_true(occurrences(d.text, "<g id=\"bar-") <= NPF_SVG_STEPS_BARS);
        assert_true(occurrences(d.text, "<g id=\"bar-") >= NPF_SVG_STEPS_BARS - 1);
        if (d.len > 2000000)
                fail_msg("%zu bytes at the cap", d.len);
        expect_texts(&d, TEXTS("device time of each step: a bar the median of 164 steps", "step 50" EN_DASH "213"),
                     NULL);
        r.n_steps = NPF_SVG_STEPS_MAX + 1;
        d = steps_chart(NULL, &r, 1);
        assert_int_equal(d.rc, -E2BIG);
        assert_int_equal(d.len, 0);
        free(d.text);

        /* Ranks past NPF_SVG_STEPS_BARS are binned too, a run with a slow rank outlined. */
        enum { RANKS = 1000 };
        npf_svg_steps_rank_t *ranks = calloc(RANKS, sizeof(*ranks));
        assert_non_null(ranks);
        for (size_t i = 0; i < RANKS; i++)
                ranks[i] = (npf_svg_steps_rank_t) { .name = labels[i], .steps = s + i, .n_steps = 1, .slow = i == 500 };
        d = steps_chart(NULL, ranks, RANKS);
        assert_int_equal(d.rc, 0);
        assert_int_equal(occurrences(d.text, "<g id=\"bar-"), 334);
        assert_int_equal(occurrences(d.text, "class=\"bar slow\""), 1);
        expect_texts(&d, TEXTS("median step of each rank: a bar the median of 3 ranks", "step 548" EN_DASH "550 slow",
                               "step 550: slow"),
                     NULL);
        free(ranks);
        free(labels);
        free(s);
}

/* Labels, names, notes and the title are the input's: escaped, repaired, cut short. */
static void test_steps_hostile(void **state)
{
        enum { LONG = 10 * 1024 };
        char *long_label = malloc(LONG + 1);
        npf_svg_step_t s[] = { { .label = "</text><script>alert(1)</script>", .computing_us = 100 },
                               { .label = "bad \xff\xfe\x01 utf-8", .computing_us = 200 },
                               { .label = long_label, .computing_us = 300 } };
        npf_svg_steps_rank_t r[] = { { .name = "<b>&\"r'0\"", .steps = s, .n_steps = 3, .slow = true,
                                       .note = "<script>note & \xc3\x28</script>" },
                                     { .name = long_label, .steps = s, .n_steps = 3, .note = long_label } };

        (void) state;
        memset(long_label, 'x', LONG);
        long_label[LONG] = '\0';
        doc_t d = steps_chart("a < b & \"c\"", r, 1);
        assert_int_equal(d.rc, 0);
        assert_null(strstr(d.text, "<script"));
        assert_null(strstr(d.text, "<b>"));
        assert_null(strstr(d.text, long_label + LONG - 130));  /* no run of 130 x */
        assert_true(d.len < 20000);
        char *lines = xml_read(&d);
        expect_line(lines, "a < b & \"c\"");
        expect_line(lines, "</text><script>alert\xe2\x80\xa6");
        expect_line(lines, "bad \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd utf-8");
        expect_line(lines, "xxxxxxxxxxxxxxxxxxxx\xe2\x80\xa6");
        expect_line(lines, "<b>&\"r'0\": <script>note & \xef\xbf\xbd(</script>");
        free(lines);
        free(d.text);

        d = steps_chart(long_label, r, 2);
        assert_int_equal(d.rc, 0);
        assert_true(d.len < 20000);
        lines = xml_read(&d);
        expect_line(lines, "2 ranks, 6 steps, 1 slow: <b>&\"r'0\"");
        expect_line(lines, "<b>&\"r'0\"");
        assert_non_null(strstr(lines, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\xe2\x80\xa6: xxxx"));
        free(lines);
        free(d.text);
        free(long_label);
}

/* What is not a number, infinite or negative is drawn as 0, and the SVG stays sound. */
static void test_steps_not_numbers(void **state)
{
        npf_svg_step_t s[] = { { .label = "a", .computing_us = 1000, .not_overlapped_us = NAN, .free_us = -500,
                                 .bubble_us = INFINITY, .overlapped_us = -INFINITY },
                               { .label = "b", .computing_us = 1000, .not_overlapped_us = 1000, .free_us = -0.0,
                                 .bubble_us = 500, .overlapped_us = NAN },
                               { .label = "c", .computing_us = NAN, .not_overlapped_us = -1, .free_us = -INFINITY } };
        npf_svg_steps_rank_t r = { .name = "rank 0", .steps = s, .n_steps = N_OF(s) };

        (void) state;
        doc_t d = steps_chart("not numbers", &r, 1);
        assert_int_equal(d.rc, 0);
        assert_null(strstr(d.text, "nan"));
        assert_null(strstr(d.text, "inf"));
        assert_null(strstr(d.text, "=\"-"));
        /* a: computing alone; b: its computing as tall as a's, then communication and bubble; c: nothing. */
        assert_true(part_height(d.text, 0, "computing") > 0);
        assert_true(part_height(d.text, 0, "communication") == 0);
        assert_true(part_height(d.text, 0, "free") == 0 && part_height(d.text, 0, "bubble") == 0);
        assert_true(part_height(d.text, 0, "overlapped") == 0);
        assert_true(part_height(d.text, 1, "computing") == part_height(d.text, 0, "computing"));
        expect_ratio(part_height(d.text, 1, "bubble") / part_height(d.text, 1, "computing"), 0.5, "b's bubble");
        assert_null(strstr(d.text, "bar-2-"));
        free(xml_read(&d));
        free(d.text);

        /* Values too large to mean anything still make a sound chart. */
        s[1].bubble_us = 1e300;
        s[1].free_us = DBL_MAX;
        d = steps_chart("huge", &r, 1);
        assert_int_equal(d.rc, 0);
        assert_null(strstr(d.text, "inf"));
        assert_null(strstr(d.text, "e+"));
        assert_true(part_height(d.text, 1, "bubble") > 100);
        free(xml_read(&d));
        free(d.text);

        /* Nothing to draw at all: said so. */
        r.steps = s + 2;
        r.n_steps = 1;
        d = steps_chart("nothing", &r, 1);
        expect_texts(&d, TEXTS("no device time in any step", "rank 0, c, no device time"), NULL);
}

static void test_steps_empty_and_invalid(void **state)
{
        npf_svg_step_t s = { .computing_us = 1 };
        npf_svg_steps_rank_t r[2] = { { .name = "rank 0" }, { .name = "rank 1", .steps = &s, .n_steps = 1 } };
        doc_t d;

        (void) state;
        d = steps_chart(NULL, NULL, 0);
        expect_texts(&d, TEXTS("device time per step", "no ranks"), NULL);
        d = steps_chart(NULL, r, 1);
        expect_texts(&d, TEXTS("rank 0, 0 steps", "no steps"), NULL);

        /* Without labels or names, a bar is labelled with its position. */
        d = steps_chart(NULL, r + 1, 1);
        expect_texts(&d, TEXTS("rank 1, 1 step: 1 us, 100% computing", "0", "step"), NULL);
        npf_svg_steps_rank_t unnamed[2] = { { .steps = &s, .n_steps = 1 }, { .steps = &s, .n_steps = 1 } };
        d = steps_chart(NULL, unnamed, 2);
        expect_texts(&d, TEXTS("device time per rank", "0", "1", "rank"), NULL);

        /* Refused before anything is written. */
        assert_int_equal(npf_svg_steps(NULL, "x", r, 1), -EINVAL);
        d = steps_chart("x", NULL, 1);
        assert_int_equal(d.rc, -EINVAL);
        assert_int_equal(d.len, 0);
        free(d.text);
        r[0].n_steps = 3;       /* and no steps */
        d = steps_chart("x", r, 2);
        assert_int_equal(d.rc, -EINVAL);
        assert_int_equal(d.len, 0);
        free(d.text);
        r[0].steps = &s;
        r[0].n_steps = NPF_SVG_STEPS_MAX + 1;
        d = steps_chart("x", r, 2);
        assert_int_equal(d.rc, -E2BIG);
        assert_int_equal(d.len, 0);
        free(d.text);
        d = steps_chart("x", r, NPF_SVG_STEPS_MAX + 1);
        assert_int_equal(d.rc, -E2BIG);
        assert_int_equal(d.len, 0);
        free(d.text);

        /* A write that fails: the FILE's errno. */
        FILE *f = fopen("/dev/full", "w");
        assert_non_null(f);
        r[0].n_steps = 1;
        assert_int_equal(npf_svg_steps(f, "full", r, 2), -ENOSPC);
        fclose(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_numbers),
                cmocka_unit_test(test_format_bytes),
                cmocka_unit_test(test_byte_ticks_nice),
                cmocka_unit_test(test_well_formed_with_panels),
                cmocka_unit_test(test_peak_label),
                cmocka_unit_test(test_downsample_keeps_spike),
                cmocka_unit_test(test_spike_in_one_column_is_no_ramp),
                cmocka_unit_test(test_equal_series_both_show),
                cmocka_unit_test(test_step_marks),
                cmocka_unit_test(test_few_points_are_steps),
                cmocka_unit_test(test_event_ticks),
                cmocka_unit_test(test_time_ticks),
                cmocka_unit_test(test_marks),
                cmocka_unit_test(test_escaping),
                cmocka_unit_test(test_no_events),
                cmocka_unit_test(test_invalid),
                cmocka_unit_test(test_write_error),
                cmocka_unit_test(test_ranks_stragglers),
                cmocka_unit_test(test_ranks_empty_and_many),
                cmocka_unit_test(test_steps_one_rank),
                cmocka_unit_test(test_steps_cluster),
                cmocka_unit_test(test_steps_binned),
                cmocka_unit_test(test_steps_hostile),
                cmocka_unit_test(test_steps_not_numbers),
                cmocka_unit_test(test_steps_empty_and_invalid),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
