/* SPDX-License-Identifier: MIT */
#include "replay/svg.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The page: every chart is this wide at least, its plots framed by these margins. */
#define PAGE_W 960
#define MARGIN_L 84
#define MARGIN_R 28
#define PLOT_W (PAGE_W - MARGIN_L - MARGIN_R)
#define HEAD_H 56               /* the chart's title and subtitle */
#define PANEL_HEAD_H 46         /* a panel's title and legend */
#define PLOT_H 260
#define PANEL_FOOT_H 52         /* tick labels and the axis' name */
#define PANEL_H (PANEL_HEAD_H + PLOT_H + PANEL_FOOT_H)
#define FONT "DejaVu Sans, Helvetica, Arial, sans-serif"
#define TEXT_MAX 120u           /* code points of one string from the input */
#define INK "#333333"
#define GREY "#777777"
#define GRID "#e6e6e6"
#define GRID_LINE "stroke=\"#000000\" stroke-opacity=\"0.1\""   /* visible on white and on fills */
#define WARN "#f28e2b"
#define WARN_DARK "#b85c00"
#define OOM_RED "#d62728"

static const struct {
        const char *fill, *line;
} palette[NPF_SVG_SERIES_MAX] = {
        { "#dbe9f6", "#2b7bba" },       /* blue: reserved */
        { "#fde0c5", "#e6550d" },       /* orange: active */
        { "#c9ead0", "#238b45" },       /* green: allocated */
        { "#e3e1f0", "#6a51a3" },       /* purple */
};

/* The output, and the first error a write met: once set, nothing more is written. */
typedef struct svg {
        FILE *f;
        int err;
} svg_t;

/* A number formatted for the page, returned by value so that it can sit inside a call. */
typedef struct num {
        char s[32];
} num_t;

/* An axis: ticks at 0, step, 2 step, ... up to top, labelled in multiples of unit. */
typedef struct axis {
        double step, top, unit;
        const char *unit_name;  /* NULL: counts, labelled "2k", "1.5M" */
} axis_t;

/* One pixel column of one series: the extremes met in it, in the order they came, and the last. */
typedef struct bucket {
        uint64_t lo, hi, last;
        size_t ilo, ihi;
} bucket_t;

typedef struct point {
        double x, y;
} point_t;

__attribute__((format(printf, 2, 3)))
static void out(svg_t *w, const char *fmt, ...)
{
        va_list ap;

        if (w->err)
                return;
        errno = 0;
        va_start(ap, fmt);
        if (vfprintf(w->f, fmt, ap) < 0)
                w->err = errno > 0 ? -errno : -EIO;
        va_end(ap);
}

/*
 * @v rounded to @dec decimals (0 to 3), written with digits only, whatever the locale: a
 * comma for a decimal point would break the SVG.
 */
static num_t fixed(double v, int dec)
{
        static const uint64_t scale[] = { 1, 10, 100, 1000 };
        num_t r;
        bool neg = v < 0;
        uint64_t q, p;

        if (dec < 0)
                dec = 0;
        if (dec > 3)
                dec = 3;
        p = scale[dec];
        if (!isfinite(v))
                v = 0;
        if (neg)
                v = -v;
        if (v > 1e15)
                v = 1e15;
        q = (uint64_t) (v * (double) p + 0.5);
        if (q == 0)
                neg = false;
        if (dec == 0)
                snprintf(r.s, sizeof(r.s), "%s%" PRIu64, neg ? "-" : "", q);
        else
                snprintf(r.s, sizeof(r.s), "%s%" PRIu64 ".%0*" PRIu64, neg ? "-" : "", q / p, dec, q % p);
        return r;
}

/* A coordinate: one decimal is a tenth of a pixel. */
static num_t px(double v)
{
        return fixed(v, 1);
}

/* @v with at most @dec decimals and no trailing zeros: "1.5", "2", "0.25". */
static num_t trimmed(double v, int dec)
{
        num_t r = fixed(v, dec);

        if (strchr(r.s, '.')) {
                size_t len = strlen(r.s);
                while (r.s[len - 1] == '0')
                        r.s[--len] = '\0';
                if (r.s[len - 1] == '.')
                        r.s[--len] = '\0';
        }
        return r;
}

/* @v with a comma every three digits: "41,233". */
static num_t count(uint64_t v)
{
        char digits[24];
        num_t r;
        size_t len = (size_t) snprintf(digits, sizeof(digits), "%" PRIu64, v), o = 0;

        for (size_t i = 0; i < len; i++) {
                if (i > 0 && (len - i) % 3 == 0)
                        r.s[o++] = ',';
                r.s[o++] = digits[i];
        }
        r.s[o] = '\0';
        return r;
}

char *npf_svg_format_count(uint64_t v, char *buf, size_t size)
{
        snprintf(buf, size, "%s", count(v).s);
        return buf;
}

/* A tick on a count axis: "0", "500", "2k", "1.5M". */
static num_t count_short(double v)
{
        static const char *const suffix[] = { "", "k", "M", "G", "T" };
        size_t i = 0;
        num_t r;

        while (i + 1 < sizeof(suffix) / sizeof(suffix[0]) && v >= 1000) {
                v /= 1000;
                i++;
        }
        snprintf(r.s, sizeof(r.s), "%.24s%s", trimmed(v, 2).s, suffix[i]);
        return r;
}

/* A duration for a label, about three significant digits: "850 us", "12.5 ms", "1.25 s". */
static num_t duration(double us)
{
        const char *unit = "us";
        num_t r;

        if (us >= 1e6) {
                us /= 1e6;
                unit = "s";
        } else if (us >= 1e3) {
                us /= 1e3;
                unit = "ms";
        }
        snprintf(r.s, sizeof(r.s), "%.24s %s", trimmed(us, us < 10 ? 2 : us < 100 ? 1 : 0).s, unit);
        return r;
}

static num_t bytes(uint64_t v)
{
        num_t r;

        npf_svg_format_bytes(v, r.s, sizeof(r.s));
        return r;
}

char *npf_svg_format_bytes(uint64_t v, char *buf, size_t size)
{
        static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        size_t i = 0;
        uint64_t div = 1;

        if (!buf || size == 0)
                return buf;
        if (v < 1024) {
                snprintf(buf, size, "%" PRIu64 " B", v);
                return buf;
        }
        /* Move up while the value rounded to a tenth would read 1024.0 or more. */
        while (i + 1 < sizeof(unit) / sizeof(unit[0]) && (double) v / (double) div >= 1023.95) {
                div *= 1024;
                i++;
        }
        snprintf(buf, size, "%s %s", fixed((double) v / (double) div, 1).s, unit[i]);
        return buf;
}

/*
 * Decode the UTF-8 character at @s into @ret_cp, U+FFFD for a malformed sequence.
 * Return: the bytes it took (at least 1; never past a NUL).
 */
static size_t utf8_next(const unsigned char *s, uint32_t *ret_cp)
{
        uint32_t v, min;
        size_t len;

        if (s[0] < 0x80) {
                *ret_cp = s[0];
                return 1;
        }
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                len = 2, v = s[0] & 0x1fu, min = 0x80;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                len = 3, v = s[0] & 0x0fu, min = 0x800;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                len = 4, v = s[0] & 0x07u, min = 0x10000;
        else {
                *ret_cp = 0xfffd;
                return 1;
        }
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80) {
                        *ret_cp = 0xfffd;
                        return i;
                }
                v = v << 6 | (s[i] & 0x3fu);
        }
        *ret_cp = v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff) ? 0xfffd : v;
        return len;
}

/* Code points of @s, at most TEXT_MAX + 1 (the ellipsis of a longer one). */
static size_t text_len(const char *s)
{
        size_t n = 0;
        uint32_t cp;

        for (const unsigned char *p = (const unsigned char *) s; *p && n <= TEXT_MAX; n++)
                p += utf8_next(p, &cp);
        return n;
}

/* About how wide @s is in a sans-serif font of @size pixels. */
static double text_width(const char *s, double size)
{
        return (double) text_len(s) * size * 0.6;
}

/*
 * @s cut to @max code points on a character boundary, with "…" when anything was left out.
 * Return: @buf, which must hold 4 * @max + 4 bytes.
 */
static char *cut(const char *s, size_t max, char *buf)
{
        const unsigned char *p = (const unsigned char *) s;
        size_t n = 0;
        uint32_t cp;

        while (*p && n < max) {
                p += utf8_next(p, &cp);
                n++;
        }
        memcpy(buf, s, (size_t) (p - (const unsigned char *) s));
        strcpy(buf + (p - (const unsigned char *) s), *p ? "\xe2\x80\xa6" : "");
        return buf;
}

/*
 * Write @s as XML text, fit for an attribute value too: markup characters escaped, control
 * characters and what XML cannot hold replaced, cut after TEXT_MAX code points with "…".
 */
static void out_text(svg_t *w, const char *s)
{
        char buf[512];
        size_t o = 0, n = 0;
        uint32_t cp;

        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                if (o > sizeof(buf) - 16) {
                        out(w, "%.*s", (int) o, buf);
                        o = 0;
                }
                if (n++ == TEXT_MAX) {
                        memcpy(buf + o, "\xe2\x80\xa6", 3);
                        o += 3;
                        break;
                }
                p += utf8_next(p, &cp);
                if (cp == '\t' || cp == '\n' || cp == '\r')
                        cp = ' ';
                else if (cp < 0x20 || cp == 0xfffe || cp == 0xffff)
                        cp = 0xfffd;
                const char *ent = cp == '&' ? "&amp;" : cp == '<' ? "&lt;" : cp == '>' ? "&gt;" :
                                  cp == '"' ? "&quot;" : cp == '\'' ? "&apos;" : NULL;
                if (ent) {
                        memcpy(buf + o, ent, strlen(ent));
                        o += strlen(ent);
                } else if (cp < 0x80) {
                        buf[o++] = (char) cp;
                } else if (cp < 0x800) {
                        buf[o++] = (char) (0xc0 | cp >> 6);
                        buf[o++] = (char) (0x80 | (cp & 0x3f));
                } else if (cp < 0x10000) {
                        buf[o++] = (char) (0xe0 | cp >> 12);
                        buf[o++] = (char) (0x80 | (cp >> 6 & 0x3f));
                        buf[o++] = (char) (0x80 | (cp & 0x3f));
                } else {
                        buf[o++] = (char) (0xf0 | cp >> 18);
                        buf[o++] = (char) (0x80 | (cp >> 12 & 0x3f));
                        buf[o++] = (char) (0x80 | (cp >> 6 & 0x3f));
                        buf[o++] = (char) (0x80 | (cp & 0x3f));
                }
        }
        out(w, "%.*s", (int) o, buf);
}

/* A <text> element at (@x, @y): @attrs are extra attributes, @s the untrusted text. */
static void text(svg_t *w, double x, double y, const char *attrs, const char *s)
{
        out(w, "<text x=\"%s\" y=\"%s\"%s%s>", px(x).s, px(y).s, *attrs ? " " : "", attrs);
        out_text(w, s);
        out(w, "</text>\n");
}

/* The smallest of 1, 2 or 5 times a power of ten that is at least @raw (> 0). */
static double nice_ge(double raw)
{
        double p = 1;

        if (!(raw > 0) || !isfinite(raw))
                return 1;
        while (p * 10 <= raw)
                p *= 10;
        while (p > raw)
                p /= 10;
        /* p <= raw < 10 p, give or take a rounding: the 1.0001 absorbs it. */
        if (p * 1.0001 >= raw)
                return p;
        if (2 * p * 1.0001 >= raw)
                return 2 * p;
        if (5 * p * 1.0001 >= raw)
                return 5 * p;
        return 10 * p;
}

/* The smallest multiple of @step at or above @v. */
static double ceil_to(double v, double step)
{
        double k = (double) (uint64_t) (v / step);

        if (k * step < v * 0.99999)
                k += 1;
        return k * step;
}

/* A y axis for bytes up to @max, in the largest 1024-based unit @max reaches. */
static axis_t byte_axis(uint64_t max)
{
        static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        double m = max ? (double) max : 1;
        axis_t a = { .unit = 1, .unit_name = unit[0] };

        for (size_t i = 1; i < sizeof(unit) / sizeof(unit[0]) && m >= a.unit * 1024; i++) {
                a.unit *= 1024;
                a.unit_name = unit[i];
        }
        a.step = nice_ge(m / a.unit / 6);
        if (a.unit == 1 && a.step < 1)
                a.step = 1;
        a.step *= a.unit;
        a.top = ceil_to(m * 1.02, a.step);      /* a little room above the highest line */
        return a;
}

size_t npf__svg_byte_ticks(uint64_t max, double *ret_ticks, size_t cap)
{
        axis_t a = byte_axis(max);
        size_t n = 0;

        for (double v = 0; v <= a.top * 1.00001; v = (double) ++n * a.step)
                if (n < cap)
                        ret_ticks[n] = v;
        return n;
}

/* An axis for durations spanning @span_us in about @parts steps, labelled in us, ms or s. */
static axis_t time_axis(double span_us, double parts)
{
        axis_t a = { .unit = 1, .unit_name = "us" };

        if (span_us >= 1e6)
                a.unit = 1e6, a.unit_name = "s";
        else if (span_us >= 1e3)
                a.unit = 1e3, a.unit_name = "ms";
        a.step = nice_ge(span_us / a.unit / parts) * a.unit;
        a.top = ceil_to(span_us > 0 ? span_us : a.step, a.step);
        return a;
}

/* An axis for event indices from 0 to @span: whole steps. */
static axis_t count_axis(double span)
{
        axis_t a = { .unit = 1, .unit_name = NULL };

        a.step = nice_ge(span / 8);
        if (a.step < 1)
                a.step = 1;
        a.top = ceil_to(span, a.step);
        return a;
}

/* The label of the tick at @v: "0", "1.5 GiB", "250 ms", "2k". */
static num_t tick_label(const axis_t *a, double v)
{
        num_t r;

        if (v <= 0)
                return trimmed(0, 0);
        if (!a->unit_name)
                return count_short(v);
        snprintf(r.s, sizeof(r.s), "%.24s %s", trimmed(v / a->unit, 2).s, a->unit_name);
        return r;
}

/* The chart's opening: the XML prolog, the page, its title @t and an optional subtitle. */
static void open_page(svg_t *w, double width, double height, const char *t, const char *subtitle)
{
        out(w, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%s\" height=\"%s\" "
               "viewBox=\"0 0 %s %s\" font-family=\"" FONT "\" font-size=\"12\" fill=\"" INK "\">\n<title>",
            px(width).s, px(height).s, px(width).s, px(height).s);
        out_text(w, t);
        out(w, "</title>\n<rect x=\"0\" y=\"0\" width=\"%s\" height=\"%s\" fill=\"#ffffff\"/>\n", px(width).s,
            px(height).s);
        text(w, 20, 30, "font-size=\"18\" font-weight=\"bold\"", t);
        if (subtitle && *subtitle)
                text(w, 20, 48, "fill=\"" GREY "\"", subtitle);
}

/* The end of the page; then the FILE's own verdict on everything written. */
static int close_page(svg_t *w)
{
        out(w, "</svg>\n");
        errno = 0;
        if (!w->err && fflush(w->f) != 0)
                w->err = errno > 0 ? -errno : -EIO;
        if (!w->err && ferror(w->f))
                w->err = -EIO;
        return w->err;
}

/* An empty plot area at (@x, @y) saying @what. */
static void empty_plot(svg_t *w, double x, double y, double width, double height, const char *what)
{
        out(w, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"#fafafa\" stroke=\"" GRID "\"/>\n",
            px(x).s, px(y).s, px(width).s, px(height).s);
        text(w, x + width / 2, y + height / 2, "text-anchor=\"middle\" font-size=\"16\" fill=\"" GREY "\"", what);
}

/* Horizontal gridlines and labels of the y axis @a over the plot at (@x, @y). */
static void y_axis(svg_t *w, const axis_t *a, double x, double y, double width, double height)
{
        for (size_t k = 0;; k++) {
                double v = (double) k * a->step;
                if (v > a->top * 1.00001)
                        break;
                double ty = y + height - v / a->top * height;
                out(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" " GRID_LINE "/>\n", px(x).s, px(ty).s,
                    px(x + width).s, px(ty).s);
                text(w, x - 8, ty + 4, "text-anchor=\"end\" fill=\"" GREY "\"", tick_label(a, v).s);
        }
}

/* The frame of a plot: the x axis line and the left axis line. */
static void plot_frame(svg_t *w, double x, double y, double width, double height)
{
        out(w, "<path d=\"M%s,%sV%sH%s\" fill=\"none\" stroke=\"" GREY "\" stroke-width=\"1\"/>\n", px(x).s,
            px(y).s, px(y + height).s, px(x + width).s);
}

/* A legend swatch at (@x, @y) followed by @label; returns the x after it. */
static double legend_item(svg_t *w, double x, double y, const char *fill, const char *stroke, const char *dash,
                          const char *label)
{
        if (fill)
                out(w, "<rect x=\"%s\" y=\"%s\" width=\"14\" height=\"10\" fill=\"%s\" stroke=\"%s\"/>\n", px(x).s,
                    px(y - 9).s, fill, stroke);
        else
                out(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"2\"%s%s%s/>\n",
                    px(x).s, px(y - 4).s, px(x + 14).s, px(y - 4).s, stroke, dash ? " stroke-dasharray=\"" : "",
                    dash ? dash : "", dash ? "\"" : "");
        text(w, x + 19, y, "", label);
        return x + 19 + text_width(label, 12) + 18;
}

/* --- the memory chart ------------------------------------------------------------------ */

/* Where one panel's points land: x is the event index or the time, mapped onto columns. */
typedef struct xmap {
        const double *time_us;  /* NULL: event indices */
        double x0, span;        /* the first x and the width of the data (never 0) */
        size_t cols;
} xmap_t;

static xmap_t xmap_make(const npf_svg_panel_t *p)
{
        xmap_t m = { .time_us = p->time_us, .x0 = 0, .span = p->n > 1 ? (double) (p->n - 1) : 1, .cols = PLOT_W };
        double lo = INFINITY, hi = -INFINITY;

        for (size_t i = 0; m.time_us && i < p->n; i++) {
                if (!isfinite(m.time_us[i])) {
                        m.time_us = NULL;
                        break;
                }
                if (m.time_us[i] < lo)
                        lo = m.time_us[i];
                if (m.time_us[i] > hi)
                        hi = m.time_us[i];
        }
        if (m.time_us) {
                m.x0 = lo;
                m.span = hi > lo ? hi - lo : 1;
        }
        return m;
}

/* The pixel column of the value @v on the x axis (an index or a time). */
static size_t xmap_col_of(const xmap_t *m, double v)
{
        double c = (v - m->x0) / m->span * (double) (m->cols - 1) + 0.5;

        if (!(c > 0))
                return 0;
        return c >= (double) m->cols ? m->cols - 1 : (size_t) c;
}

static size_t xmap_col(const xmap_t *m, size_t i)
{
        return xmap_col_of(m, m->time_us ? m->time_us[i] : (double) i);
}

/* The x of an axis value and the x of a column, in page pixels. */
static double xmap_px(const xmap_t *m, double v)
{
        return MARGIN_L + 0.5 + (v - m->x0) / m->span * (double) (m->cols - 1);
}

static double col_px(size_t c)
{
        return MARGIN_L + 0.5 + (double) c;
}

static double y_px(double v, const axis_t *a, double plot_y)
{
        return plot_y + PLOT_H - v / a->top * PLOT_H;
}

/*
 * Put each point of every series of @p into its pixel column: @b holds n_series times cols
 * buckets, @used says which columns got any point.
 */
static void bucket_points(const npf_svg_panel_t *p, const xmap_t *m, bucket_t *b, bool *used)
{
        for (size_t i = 0; i < p->n; i++) {
                size_t c = xmap_col(m, i);
                bool first = !used[c];

                used[c] = true;
                for (size_t s = 0; s < p->n_series; s++) {
                        bucket_t *k = &b[s * m->cols + c];
                        uint64_t v = p->series[s].y[i];
                        if (first || v < k->lo)
                                k->lo = v, k->ilo = i;
                        if (first || v > k->hi)
                                k->hi = v, k->ihi = i;
                        k->last = v;
                }
        }
}

/*
 * The outline of one series through its columns, at most three points a column: a step at
 * the height the previous column ended with when columns were skipped, then the column's
 * extremes in the order they happened. Return: the number of points in @pts.
 */
static size_t outline(const bucket_t *b, const bool *used, size_t cols, const axis_t *a, double plot_y,
                      point_t *pts)
{
        size_t n = 0, prev = SIZE_MAX;

        for (size_t c = 0; c < cols; c++) {
                if (!used[c])
                        continue;
                double x = col_px(c), ylo = y_px((double) b[c].lo, a, plot_y), yhi = y_px((double) b[c].hi, a, plot_y);
                if (prev != SIZE_MAX && c > prev + 1)
                        pts[n++] = (point_t) { x, y_px((double) b[prev].last, a, plot_y) };
                if (b[c].lo == b[c].hi)
                        pts[n++] = (point_t) { x, ylo };
                else if (b[c].ilo < b[c].ihi) {
                        pts[n++] = (point_t) { x, ylo };
                        pts[n++] = (point_t) { x, yhi };
                } else {
                        pts[n++] = (point_t) { x, yhi };
                        pts[n++] = (point_t) { x, ylo };
                }
                prev = c;
        }
        return n;
}

/* The points of @pts as path data, "M x,y L x,y ..." with repeated points left out. */
static void out_points(svg_t *w, const point_t *pts, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (i > 0 && pts[i].x == pts[i - 1].x && pts[i].y == pts[i - 1].y)
                        continue;
                out(w, "%s%s,%s", i == 0 ? "M" : "L", px(pts[i].x).s, px(pts[i].y).s);
        }
}

/* The x axis of a panel: vertical gridlines, tick labels and the axis' name. */
static void panel_x_axis(svg_t *w, const xmap_t *m, double plot_y)
{
        axis_t a = m->time_us ? time_axis(m->span, 8) : count_axis(m->span);

        for (size_t k = 0;; k++) {
                double v = (double) k * a.step;
                if (v > m->span * 1.00001 || k > 100)
                        break;
                double x = xmap_px(m, m->x0 + v);
                out(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" " GRID_LINE "/>\n", px(x).s,
                    px(plot_y).s, px(x).s, px(plot_y + PLOT_H).s);
                text(w, x, plot_y + PLOT_H + 17, "text-anchor=\"middle\" fill=\"" GREY "\"", tick_label(&a, v).s);
        }
        text(w, MARGIN_L + PLOT_W / 2.0, plot_y + PLOT_H + 38, "text-anchor=\"middle\"",
             m->time_us ? "time since the first event" : "event");
}

/* The default words of a peak marker: "peak 3.2 GiB allocated at event 41,233". */
static void peak_words(const npf_svg_panel_t *p, const xmap_t *m, char *buf, size_t size)
{
        size_t i = p->peak_index;
        uint64_t v = p->series[p->peak_series].y[i];
        const char *name = p->series[p->peak_series].name;
        char cut_name[4 * 40 + 4];

        snprintf(buf, size, "peak %s%s%s at ", bytes(v).s, name ? " " : "", name ? cut(name, 40, cut_name) : "");
        size_t o = strlen(buf);
        if (m->time_us)
                snprintf(buf + o, size - o, "%s (event %s)", duration(m->time_us[i] - m->x0).s, count(i).s);
        else
                snprintf(buf + o, size - o, "event %s", count(i).s);
}

/* The peak marker: a dot on the series, a dotted drop to the axis, and its words beside it. */
static void draw_peak(svg_t *w, const npf_svg_panel_t *p, const xmap_t *m, const axis_t *a, double plot_y,
                      size_t panel)
{
        char words[320];
        const char *label = p->peak_label;
        double x = col_px(xmap_col(m, p->peak_index));
        double y = y_px((double) p->series[p->peak_series].y[p->peak_index], a, plot_y);
        const char *colour = palette[p->peak_series].line;

        if (!label) {
                peak_words(p, m, words, sizeof(words));
                label = words;
        }
        double tw = text_width(label, 12) + 10;
        bool left = x + 10 + tw > MARGIN_L + PLOT_W;
        double tx = left ? x - 10 - tw : x + 10, ty = y - 10 < plot_y + 16 ? y + 22 : y - 10;

        out(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-dasharray=\"2 3\"/>\n", px(x).s,
            px(y).s, px(x).s, px(plot_y + PLOT_H).s, colour);
        out(w, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"18\" rx=\"3\" fill=\"#ffffff\" fill-opacity=\"0.9\" "
               "stroke=\"%s\" stroke-width=\"0.8\"/>\n",
            px(tx).s, px(ty - 13).s, px(tw).s, colour);
        text(w, tx + 5, ty, "font-weight=\"bold\"", label);
        out(w, "<circle id=\"p%zu-peak\" cx=\"%s\" cy=\"%s\" r=\"4.5\" fill=\"%s\" stroke=\"#ffffff\" "
               "stroke-width=\"1.5\"/>\n",
            panel, px(x).s, px(y).s, colour);
}

/* The marks (OOM events): one thin red line per pixel column that holds any. */
static int draw_marks(svg_t *w, const npf_svg_panel_t *p, const xmap_t *m, double plot_y, size_t panel)
{
        bool *seen = calloc(m->cols, sizeof(*seen));

        if (!seen)
                return -ENOMEM;
        out(w, "<path id=\"p%zu-marks\" d=\"", panel);
        for (size_t k = 0; k < p->n_marks; k++) {
                size_t c = xmap_col(m, p->marks[k]);
                if (seen[c])
                        continue;
                seen[c] = true;
                out(w, "M%s,%sV%s", px(col_px(c)).s, px(plot_y).s, px(plot_y + PLOT_H).s);
        }
        out(w, "\" fill=\"none\" stroke=\"" OOM_RED "\" stroke-width=\"1\" stroke-opacity=\"0.85\"/>\n");
        free(seen);
        return 0;
}

/* A panel's legend: each series with its largest value, then the marks with their count. */
static void panel_legend(svg_t *w, const npf_svg_panel_t *p, const bucket_t *b, const bool *used, size_t cols,
                         double y)
{
        double x = MARGIN_L;

        for (size_t s = 0; s < p->n_series; s++) {
                uint64_t max = 0;
                char name[4 * 40 + 4], label[sizeof(name) + 40];
                for (size_t c = 0; c < cols; c++)
                        if (used[c] && b[s * cols + c].hi > max)
                                max = b[s * cols + c].hi;
                cut(p->series[s].name ? p->series[s].name : "series", 40, name);
                snprintf(label, sizeof(label), "%s (max %s)", name, bytes(max).s);
                x = legend_item(w, x, y, palette[s].fill, palette[s].line, NULL, label);
        }
        if (p->n_marks > 0) {
                char name[4 * 40 + 4], label[sizeof(name) + 40];
                snprintf(label, sizeof(label), "%s (%s)", cut(p->marks_name ? p->marks_name : "OOM", 40, name),
                         count(p->n_marks).s);
                legend_item(w, x, y, NULL, OOM_RED, NULL, label);
        }
}

/* One panel whose top edge is at @y: header, plot, axes, marks and peak. */
static int draw_panel(svg_t *w, const npf_svg_panel_t *p, double y, size_t panel)
{
        xmap_t m = xmap_make(p);
        double plot_y = y + PANEL_HEAD_H;
        bucket_t *b = NULL;
        bool *used = NULL;
        point_t *pts = NULL;
        char sub[160];
        int r = -ENOMEM;

        if (p->title)
                text(w, MARGIN_L, y + 18, "font-size=\"14\" font-weight=\"bold\"", p->title);
        if (p->n == 0) {
                empty_plot(w, MARGIN_L, plot_y, PLOT_W, PLOT_H, "no events");
                return 0;
        }
        b = calloc(m.cols * p->n_series, sizeof(*b));
        used = calloc(m.cols, sizeof(*used));
        pts = calloc(3 * m.cols, sizeof(*pts));
        if (!b || !used || !pts)
                goto fail;
        bucket_points(p, &m, b, used);

        uint64_t max = 0;
        for (size_t k = 0; k < m.cols * p->n_series; k++)
                if (used[k % m.cols] && b[k].hi > max)
                        max = b[k].hi;
        axis_t a = byte_axis(max);

        snprintf(sub, sizeof(sub), "%s event%s%s%s%s", count(p->n).s, p->n == 1 ? "" : "s",
                 m.time_us ? " over " : "", m.time_us ? duration(m.span).s : "",
                 p->n > m.cols ? ", lowest and highest per pixel column" : "");
        text(w, MARGIN_L + PLOT_W, y + 18, "text-anchor=\"end\" fill=\"" GREY "\"", sub);
        panel_legend(w, p, b, used, m.cols, y + 38);

        /* Every fill first, the first series behind, then the grid over them; then every line. */
        for (size_t s = 0; s < p->n_series; s++) {
                size_t n = outline(b + s * m.cols, used, m.cols, &a, plot_y, pts);
                out(w, "<path id=\"p%zu-s%zu-area\" d=\"", panel, s);
                out_points(w, pts, n);
                out(w, "L%s,%sL%s,%sZ\" fill=\"%s\" stroke=\"none\"/>\n", px(pts[n - 1].x).s,
                    px(plot_y + PLOT_H).s, px(pts[0].x).s, px(plot_y + PLOT_H).s, palette[s].fill);
        }
        y_axis(w, &a, MARGIN_L, plot_y, PLOT_W, PLOT_H);
        panel_x_axis(w, &m, plot_y);
        out(w, "<text transform=\"translate(18,%s) rotate(-90)\" text-anchor=\"middle\">memory</text>\n",
            px(plot_y + PLOT_H / 2.0).s);
        for (size_t s = 0; s < p->n_series; s++) {
                size_t n = outline(b + s * m.cols, used, m.cols, &a, plot_y, pts);
                out(w, "<path id=\"p%zu-s%zu-line\" d=\"", panel, s);
                out_points(w, pts, n);
                out(w, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-linejoin=\"round\" "
                       "stroke-linecap=\"round\"/>\n",
                    palette[s].line);
        }
        if (p->n_marks > 0) {
                r = draw_marks(w, p, &m, plot_y, panel);
                if (r < 0)
                        goto fail;
        }
        plot_frame(w, MARGIN_L, plot_y, PLOT_W, PLOT_H);
        if (p->has_peak)
                draw_peak(w, p, &m, &a, plot_y, panel);
        r = 0;
fail:
        free(pts);
        free(used);
        free(b);
        return r;
}

/* Whether the panels follow the rules of npf_svg_panel_t. */
static bool panels_valid(const npf_svg_panel_t *panels, size_t n_panels)
{
        if (n_panels > 0 && !panels)
                return false;
        for (size_t k = 0; k < n_panels; k++) {
                const npf_svg_panel_t *p = &panels[k];
                if (p->n > 0 && (!p->series || p->n_series == 0 || p->n_series > NPF_SVG_SERIES_MAX))
                        return false;
                for (size_t s = 0; p->n > 0 && s < p->n_series; s++)
                        if (!p->series[s].y)
                                return false;
                if (p->has_peak && (p->peak_index >= p->n || p->peak_series >= p->n_series))
                        return false;
                if (p->n_marks > 0 && !p->marks)
                        return false;
                for (size_t i = 0; i < p->n_marks; i++)
                        if (p->marks[i] >= p->n)
                                return false;
        }
        return true;
}

int npf_svg_memory(FILE *f, const char *title, const npf_svg_panel_t *panels, size_t n_panels)
{
        svg_t w = { .f = f };
        double height = HEAD_H + (double) (n_panels > 0 ? n_panels : 1) * (PANEL_H + 10);

        if (n_panels > NPF_SVG_PANELS_MAX)
                return -E2BIG;
        if (!f || !panels_valid(panels, n_panels))
                return -EINVAL;
        open_page(&w, PAGE_W, height, title && *title ? title : "memory", NULL);
        if (n_panels == 0)
                empty_plot(&w, MARGIN_L, HEAD_H + PANEL_HEAD_H, PLOT_W, PLOT_H, "no events");
        for (size_t k = 0; k < n_panels; k++) {
                int r = draw_panel(&w, &panels[k], HEAD_H + (double) k * (PANEL_H + 10), k);
                if (r < 0)
                        return r;
        }
        return close_page(&w);
}

/* --- the cluster chart ----------------------------------------------------------------- */

enum { BAR_STEP, BAR_PEAK };

/* The value of @r's bar in panel @which, if it has one. */
static bool bar_value(const npf_svg_rank_t *r, int which, double *ret)
{
        if (which == BAR_STEP && r->has_step && isfinite(r->step_us) && r->step_us >= 0) {
                *ret = r->step_us;
                return true;
        }
        if (which == BAR_PEAK && r->has_peak) {
                *ret = (double) r->peak_bytes;
                return true;
        }
        return false;
}

/* A rank's label: its name, cut short, or its position in the array. */
typedef struct name {
        char s[4 * 20 + 4];
} name_t;

static name_t rank_name(const npf_svg_rank_t *r, size_t i)
{
        name_t n;

        if (r->name)
                cut(r->name, 20, n.s);
        else
                snprintf(n.s, sizeof(n.s), "%zu", i);
        return n;
}

/* A dashed level across the plot with its words at the right end. */
static void level(svg_t *w, double x, double width, double y, const char *colour, const char *dash,
                  const char *words)
{
        out(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1.5\" "
               "stroke-dasharray=\"%s\"/>\n",
            px(x).s, px(y).s, px(x + width).s, px(y).s, colour, dash);
        out(w, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"15\" fill=\"#ffffff\" fill-opacity=\"0.85\"/>\n",
            px(x + width - text_width(words, 11) - 8).s, px(y - 17).s, px(text_width(words, 11) + 6).s);
        char attrs[64];
        snprintf(attrs, sizeof(attrs), "text-anchor=\"end\" font-size=\"11\" fill=\"%s\"", colour);
        text(w, x + width - 4, y - 6, attrs, words);
}

/* One panel of bars, one per rank, its top edge at @y, its plot @width wide. */
static void bar_panel(svg_t *w, const npf_svg_rank_t *ranks, size_t n, int which, double y, double width,
                      double median_us, double threshold_us)
{
        double plot_y = y + PANEL_HEAD_H, max = 0, v, pitch = width / (double) (n ? n : 1);
        const char *base = which == BAR_STEP ? "#4c78a8" : "#54a24b";
        const char *what = which == BAR_STEP ? "median step time" : "peak memory";
        bool any = false;
        axis_t a;

        text(w, MARGIN_L, y + 18, "font-size=\"14\" font-weight=\"bold\"",
             which == BAR_STEP ? "median step time per rank" : "peak memory per rank");
        double lx = legend_item(w, MARGIN_L, y + 38, base, base, NULL, what);
        lx = legend_item(w, lx, y + 38, WARN, WARN_DARK, NULL, "straggler");
        for (size_t i = 0; i < n; i++)
                if (bar_value(&ranks[i], which, &v)) {
                        any = true;
                        max = v > max ? v : max;
                }
        if (!any) {
                empty_plot(w, MARGIN_L, plot_y, width, PLOT_H, n ? "not known for any rank" : "no ranks");
                return;
        }
        if (which == BAR_STEP) {
                char words[96];
                if (median_us > 0 && isfinite(median_us)) {
                        max = median_us > max ? median_us : max;
                        snprintf(words, sizeof(words), "median of all ranks %s", duration(median_us).s);
                        lx = legend_item(w, lx, y + 38, NULL, INK, "6 4", words);
                }
                if (threshold_us > 0 && isfinite(threshold_us)) {
                        max = threshold_us > max ? threshold_us : max;
                        snprintf(words, sizeof(words), "straggler above %s", duration(threshold_us).s);
                        legend_item(w, lx, y + 38, NULL, OOM_RED, "3 3", words);
                }
                a = time_axis(max * 1.02, 6);
        } else {
                a = byte_axis((uint64_t) max);
        }
        y_axis(w, &a, MARGIN_L, plot_y, width, PLOT_H);
        out(w, "<text transform=\"translate(18,%s) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
            px(plot_y + PLOT_H / 2.0).s, which == BAR_STEP ? "step time" : "memory");

        /* Label every k-th bar so that the labels do not overlap. */
        double name_w = 0;
        size_t n_slow = 0;
        for (size_t i = 0; i < n; i++) {
                double tw = text_width(rank_name(&ranks[i], i).s, 11);
                name_w = tw > name_w ? tw : name_w;
                n_slow += ranks[i].straggler;
        }
        size_t every = (size_t) ((name_w + 6) / pitch) + 1;

        for (size_t i = 0; i < n; i++) {
                const npf_svg_rank_t *r = &ranks[i];
                double cx = MARGIN_L + pitch * ((double) i + 0.5), bw = pitch * 0.7;
                bool has = bar_value(r, which, &v);
                if (bw < 1.5)
                        bw = r->straggler ? 1.5 : pitch;
                if (i % every == 0)
                        text(w, cx, plot_y + PLOT_H + 16, "text-anchor=\"middle\" font-size=\"11\" fill=\"" GREY "\"",
                             rank_name(r, i).s);
                if (!has) {
                        if (pitch >= 18)
                                text(w, cx, plot_y + PLOT_H - 5,
                                     "text-anchor=\"middle\" font-size=\"10\" fill=\"" GREY "\"", "n/a");
                        continue;
                }
                double top = plot_y + PLOT_H - v / a.top * PLOT_H;
                out(w, "<rect id=\"%s-%zu\" class=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\"%s>"
                       "<title>",
                    which == BAR_STEP ? "step" : "peak", i, r->straggler ? "bar straggler" : "bar", px(cx - bw / 2).s,
                    px(top).s, px(bw).s, px(plot_y + PLOT_H - top).s, r->straggler ? WARN : base,
                    r->straggler ? " stroke=\"" WARN_DARK "\" stroke-width=\"1\"" : "");
                out(w, "rank ");
                out_text(w, rank_name(r, i).s);
                out(w, ": %s</title></rect>\n", which == BAR_STEP ? duration(v).s : bytes((uint64_t) v).s);
                /* How far above the median a straggler is, and its name if the axis leaves it out. */
                if (which == BAR_STEP && r->straggler && median_us > 0 && isfinite(median_us) &&
                    (every == 1 || n_slow <= 24)) {
                        char words[sizeof(name_t) + 32];
                        bool named = i % every != 0;
                        double over = (v / median_us - 1) * 100;
                        /* Near the threshold, a tenth rounded up: a straggler never reads +10%. */
                        if (over < 20)
                                over = ceil(over * 10 - 1e-9) / 10;
                        snprintf(words, sizeof(words), "%s%s+%.24s%%", named ? rank_name(r, i).s : "",
                                 named ? " " : "", trimmed(over, over < 20 ? 1 : 0).s);
                        text(w, cx, top - 4, "text-anchor=\"middle\" font-size=\"10\" fill=\"" WARN_DARK "\"", words);
                }
        }
        if (which == BAR_STEP && median_us > 0 && isfinite(median_us))
                level(w, MARGIN_L, width, plot_y + PLOT_H - median_us / a.top * PLOT_H, INK, "6 4",
                      duration(median_us).s);
        if (which == BAR_STEP && threshold_us > 0 && isfinite(threshold_us))
                level(w, MARGIN_L, width, plot_y + PLOT_H - threshold_us / a.top * PLOT_H, OOM_RED, "3 3",
                      duration(threshold_us).s);
        plot_frame(w, MARGIN_L, plot_y, width, PLOT_H);
        text(w, MARGIN_L + width / 2, plot_y + PLOT_H + 38, "text-anchor=\"middle\"", "rank");
}

/* The subtitle: how many ranks, the median, and which ranks straggle (the first few by name). */
static void ranks_subtitle(const npf_svg_rank_t *ranks, size_t n, double median_us, char *buf, size_t size)
{
        size_t n_slow = 0, o;

        for (size_t i = 0; i < n; i++)
                n_slow += ranks[i].straggler;
        o = (size_t) snprintf(buf, size, "%s rank%s", count(n).s, n == 1 ? "" : "s");
        if (median_us > 0 && isfinite(median_us) && o < size)
                o += (size_t) snprintf(buf + o, size - o, ", median step %s", duration(median_us).s);
        if (o < size)
                o += (size_t) snprintf(buf + o, size - o, n_slow ? ", %zu straggler%s:" : ", no stragglers", n_slow,
                                       n_slow == 1 ? "" : "s");
        for (size_t i = 0, shown = 0; i < n && o < size; i++) {
                if (!ranks[i].straggler)
                        continue;
                if (shown++ == 8) {
                        snprintf(buf + o, size - o, " and %zu more", n_slow - 8);
                        break;
                }
                o += (size_t) snprintf(buf + o, size - o, "%s %s", shown > 1 ? "," : "", rank_name(&ranks[i], i).s);
        }
}

int npf_svg_ranks(FILE *f, const char *title, const npf_svg_rank_t *ranks, size_t n, double median_us,
                  double threshold_us)
{
        svg_t w = { .f = f };
        char sub[512];

        if (!f || (n > 0 && !ranks))
                return -EINVAL;
        if (n > NPF_SVG_RANKS_MAX)
                return -E2BIG;

        /* Wide enough for a readable bar per rank, up to a point; then bars get thin. */
        double width = (double) n * 22 > PLOT_W ? (double) n * 22 : PLOT_W;
        if (width > 1800)
                width = 1800;
        ranks_subtitle(ranks, n, median_us, sub, sizeof(sub));
        open_page(&w, MARGIN_L + width + MARGIN_R, HEAD_H + 2 * (PANEL_H + 10), title && *title ? title : "ranks", sub);
        bar_panel(&w, ranks, n, BAR_STEP, HEAD_H, width, median_us, threshold_us);
        bar_panel(&w, ranks, n, BAR_PEAK, HEAD_H + PANEL_H + 10, width, median_us, threshold_us);
        return close_page(&w);
}
