/* SPDX-License-Identifier: MIT */
#include "replay/svg.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define FONT "DejaVu Sans, Helvetica, Arial, sans-serif"
#define TEXT_MAX 120u           /* code points of one string from the input */
#define GRID "#e6e6e6"

void npf_svg_write(npf_svg_t *w, const char *s, size_t len)
{
        if (w->err)
                return;
        errno = 0;
        if (fwrite_unlocked(s, 1, len, w->f) != len)
                w->err = errno > 0 ? -errno : -EIO;
}

void npf_svg_printf(npf_svg_t *w, const char *fmt, ...)
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
static npf_svg_num_t fixed(double v, int dec)
{
        static const uint64_t scale[] = { 1, 10, 100, 1000 };
        npf_svg_num_t r;
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
        /* By hand, from the end: a chart's paths are thousands of these, and snprintf's
         * cost was most of drawing one. */
        char *end = r.s + sizeof(r.s), *d = end;
        *--d = '\0';
        for (int k = 0; k < dec; k++, q /= 10)
                *--d = (char) ('0' + q % 10);
        if (dec > 0)
                *--d = '.';
        do
                *--d = (char) ('0' + q % 10);
        while (q /= 10);
        if (neg)
                *--d = '-';
        memmove(r.s, d, (size_t) (end - d));
        return r;
}

npf_svg_num_t npf_svg_px(double v)
{
        return fixed(v, 1);
}

npf_svg_num_t npf_svg_trimmed(double v, int dec)
{
        npf_svg_num_t r = fixed(v, dec);

        if (strchr(r.s, '.')) {
                size_t len = strlen(r.s);
                while (r.s[len - 1] == '0')
                        r.s[--len] = '\0';
                if (r.s[len - 1] == '.')
                        r.s[--len] = '\0';
        }
        return r;
}

npf_svg_num_t npf_svg_count(uint64_t v)
{
        char digits[24];
        npf_svg_num_t r;
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
        snprintf(buf, size, "%s", npf_svg_count(v).s);
        return buf;
}

/* A tick on a count axis: "0", "500", "2k", "1.5M". */
static npf_svg_num_t count_short(double v)
{
        static const char *const suffix[] = { "", "k", "M", "G", "T" };
        size_t i = 0;
        npf_svg_num_t r;

        while (i + 1 < sizeof(suffix) / sizeof(suffix[0]) && v >= 1000) {
                v /= 1000;
                i++;
        }
        snprintf(r.s, sizeof(r.s), "%.24s%s", npf_svg_trimmed(v, 2).s, suffix[i]);
        return r;
}

npf_svg_num_t npf_svg_duration(double us)
{
        const char *unit = "us";
        npf_svg_num_t r;

        if (us >= 1e6) {
                us /= 1e6;
                unit = "s";
        } else if (us >= 1e3) {
                us /= 1e3;
                unit = "ms";
        }
        snprintf(r.s, sizeof(r.s), "%.24s %s", npf_svg_trimmed(us, us < 10 ? 2 : us < 100 ? 1 : 0).s, unit);
        return r;
}

npf_svg_num_t npf_svg_bytes(uint64_t v)
{
        npf_svg_num_t r;

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

double npf_svg_text_width(const char *s, double size)
{
        return (double) text_len(s) * size * 0.6;
}

/*
 * @s cut to @max code points on a character boundary, with "…" when anything was left out.
 * Return: @buf, which must hold 4 * @max + 4 bytes.
 */
char *npf_svg_cut(const char *s, size_t max, char *buf)
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

void npf_svg_escaped(npf_svg_t *w, const char *s)
{
        char buf[512];
        size_t o = 0, n = 0;
        uint32_t cp;

        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                if (o > sizeof(buf) - 16) {
                        npf_svg_printf(w, "%.*s", (int) o, buf);
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
        npf_svg_printf(w, "%.*s", (int) o, buf);
}

void npf_svg_text(npf_svg_t *w, double x, double y, const char *attrs, const char *s)
{
        npf_svg_printf(w, "<text x=\"%s\" y=\"%s\"%s%s>", npf_svg_px(x).s, npf_svg_px(y).s, *attrs ? " " : "", attrs);
        npf_svg_escaped(w, s);
        npf_svg_printf(w, "</text>\n");
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

npf_svg_axis_t npf_svg_byte_axis(uint64_t max)
{
        static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        double m = max ? (double) max : 1;
        npf_svg_axis_t a = { .unit = 1, .unit_name = unit[0] };

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
        npf_svg_axis_t a = npf_svg_byte_axis(max);
        size_t n = 0;

        for (double v = 0; v <= a.top * 1.00001; v = (double) ++n * a.step)
                if (n < cap)
                        ret_ticks[n] = v;
        return n;
}

npf_svg_axis_t npf_svg_time_axis(double span_us, double parts)
{
        npf_svg_axis_t a = { .unit = 1, .unit_name = "us" };

        if (span_us >= 1e6)
                a.unit = 1e6, a.unit_name = "s";
        else if (span_us >= 1e3)
                a.unit = 1e3, a.unit_name = "ms";
        a.step = nice_ge(span_us / a.unit / parts) * a.unit;
        a.top = ceil_to(span_us > 0 ? span_us : a.step, a.step);
        return a;
}

npf_svg_axis_t npf_svg_count_axis(double span)
{
        npf_svg_axis_t a = { .unit = 1, .unit_name = NULL };

        a.step = nice_ge(span / 8);
        if (a.step < 1)
                a.step = 1;
        a.top = ceil_to(span, a.step);
        return a;
}

npf_svg_num_t npf_svg_tick_label(const npf_svg_axis_t *a, double v)
{
        npf_svg_num_t r;

        if (v <= 0)
                return npf_svg_trimmed(0, 0);
        if (!a->unit_name)
                return count_short(v);
        snprintf(r.s, sizeof(r.s), "%.24s %s", npf_svg_trimmed(v / a->unit, 2).s, a->unit_name);
        return r;
}

void npf_svg_open(npf_svg_t *w, double width, double height, const char *t, const char *subtitle)
{
        npf_svg_printf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                          "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%s\" height=\"%s\" "
                          "viewBox=\"0 0 %s %s\" font-family=\"" FONT "\" font-size=\"12\" "
                          "fill=\"" NPF_SVG_INK "\">\n<title>",
                       npf_svg_px(width).s, npf_svg_px(height).s, npf_svg_px(width).s, npf_svg_px(height).s);
        npf_svg_escaped(w, t);
        npf_svg_printf(w, "</title>\n<rect x=\"0\" y=\"0\" width=\"%s\" height=\"%s\" fill=\"#ffffff\"/>\n",
                       npf_svg_px(width).s, npf_svg_px(height).s);
        npf_svg_text(w, 20, 30, "font-size=\"18\" font-weight=\"bold\"", t);
        if (subtitle && *subtitle)
                npf_svg_text(w, 20, 48, "fill=\"" NPF_SVG_GREY "\"", subtitle);
}

int npf_svg_close(npf_svg_t *w)
{
        npf_svg_printf(w, "</svg>\n");
        errno = 0;
        if (!w->err && fflush(w->f) != 0)
                w->err = errno > 0 ? -errno : -EIO;
        if (!w->err && ferror(w->f))
                w->err = -EIO;
        return w->err;
}

void npf_svg_empty_plot(npf_svg_t *w, double x, double y, double width, double height, const char *what)
{
        npf_svg_printf(w, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"#fafafa\" stroke=\"" GRID "\"/>\n",
                       npf_svg_px(x).s, npf_svg_px(y).s, npf_svg_px(width).s, npf_svg_px(height).s);
        npf_svg_text(w, x + width / 2, y + height / 2,
                     "text-anchor=\"middle\" font-size=\"16\" fill=\"" NPF_SVG_GREY "\"", what);
}

void npf_svg_y_axis(npf_svg_t *w, const npf_svg_axis_t *a, double x, double y, double width, double height)
{
        for (size_t k = 0;; k++) {
                double v = (double) k * a->step;
                if (v > a->top * 1.00001)
                        break;
                double ty = y + height - v / a->top * height;
                npf_svg_printf(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" " NPF_SVG_GRID_LINE "/>\n",
                               npf_svg_px(x).s, npf_svg_px(ty).s, npf_svg_px(x + width).s, npf_svg_px(ty).s);
                npf_svg_text(w, x - 8, ty + 4, "text-anchor=\"end\" fill=\"" NPF_SVG_GREY "\"",
                             npf_svg_tick_label(a, v).s);
        }
}

void npf_svg_plot_frame(npf_svg_t *w, double x, double y, double width, double height)
{
        npf_svg_printf(w, "<path d=\"M%s,%sV%sH%s\" fill=\"none\" stroke=\"" NPF_SVG_GREY "\" stroke-width=\"1\"/>\n",
                       npf_svg_px(x).s, npf_svg_px(y).s, npf_svg_px(y + height).s, npf_svg_px(x + width).s);
}

double npf_svg_legend_item(npf_svg_t *w, double x, double y, const char *fill, const char *stroke, const char *dash,
                           const char *label)
{
        if (fill)
                npf_svg_printf(w, "<rect x=\"%s\" y=\"%s\" width=\"14\" height=\"10\" fill=\"%s\" stroke=\"%s\"/>\n",
                               npf_svg_px(x).s, npf_svg_px(y - 9).s, fill, stroke);
        else
                npf_svg_printf(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" "
                                  "stroke-width=\"2\"%s%s%s/>\n",
                               npf_svg_px(x).s, npf_svg_px(y - 4).s, npf_svg_px(x + 14).s, npf_svg_px(y - 4).s, stroke,
                               dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
        npf_svg_text(w, x + 19, y, "", label);
        return x + 19 + npf_svg_text_width(label, 12) + 18;
}
