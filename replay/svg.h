/* SPDX-License-Identifier: MIT */
/*
 * The writer that npuprof-replay's charts (svg-memory.h, svg-ranks.h) are drawn with: plain
 * SVG 1.1 text, no script, no style sheet, no font file, a white background, so that any
 * browser or image viewer shows a chart as it is. It writes the page, text, numbers and the
 * pieces both charts have: axes and their ticks, gridlines, legends, an empty plot.
 *
 * Every string given as text (titles, series names, rank names) is taken as untrusted: it is
 * escaped, invalid UTF-8 and control characters are replaced, and it is shortened when very
 * long. Numbers are written with digits and a point whatever the locale. The writer only
 * ever writes to the FILE it is given; the caller opens and closes it.
 */
#ifndef NPUPROF_REPLAY_SVG_H
#define NPUPROF_REPLAY_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NPF_SVG_BYTES_MAX 24u           /* a buffer for npf_svg_format_bytes(), NUL included */

/* The page: every chart is this wide at least, its plots framed by these margins. */
#define NPF_SVG_PAGE_W 960
#define NPF_SVG_MARGIN_L 84
#define NPF_SVG_MARGIN_R 28
#define NPF_SVG_PLOT_W (NPF_SVG_PAGE_W - NPF_SVG_MARGIN_L - NPF_SVG_MARGIN_R)
#define NPF_SVG_HEAD_H 56               /* the chart's title and subtitle */
#define NPF_SVG_PANEL_HEAD_H 46         /* a panel's title and legend */
#define NPF_SVG_PLOT_H 260
#define NPF_SVG_PANEL_FOOT_H 52         /* tick labels and the axis' name */
#define NPF_SVG_PANEL_H (NPF_SVG_PANEL_HEAD_H + NPF_SVG_PLOT_H + NPF_SVG_PANEL_FOOT_H)

/* The colours both charts use. */
#define NPF_SVG_INK "#333333"
#define NPF_SVG_GREY "#777777"
#define NPF_SVG_GRID_LINE "stroke=\"#000000\" stroke-opacity=\"0.1\""     /* visible on white and on fills */
#define NPF_SVG_RED "#d62728"

/* A document being written: the output, and the first error a write met. Once the error is
 * set, nothing more is written. Initialise as { .f = f }. */
typedef struct npf_svg {
        FILE *f;
        int err;
} npf_svg_t;

/* A number formatted for the page, returned by value so that it can sit inside a call. */
typedef struct npf_svg_num {
        char s[32];
} npf_svg_num_t;

/* An axis: ticks at 0, step, 2 step, ... up to top, labelled in multiples of unit. */
typedef struct npf_svg_axis {
        double step, top, unit;
        const char *unit_name;  /* NULL: counts, labelled "2k", "1.5M" */
} npf_svg_axis_t;

/*
 * npf_svg_format_bytes() - @v bytes for a person, 1024-based with one decimal: "0 B",
 * "1023 B", "1.0 KiB", "1.5 MiB", "2.0 GiB", "3.2 TiB", up to EiB.
 * Return: @buf, holding the text cut to @size bytes (NPF_SVG_BYTES_MAX is always enough).
 * Context: any; reentrant.
 */
char *npf_svg_format_bytes(uint64_t v, char *buf, size_t size);

/* npf_svg_format_count() - @v with a comma every three digits, "41,233", cut to @size
 * bytes (24 is always enough). Return: @buf. Context: any; reentrant. */
char *npf_svg_format_count(uint64_t v, char *buf, size_t size);

/*
 * npf__svg_byte_ticks() - the y axis a memory chart uses for values up to @max bytes: 0 and
 * then equal steps of 1, 2 or 5 times a power of ten of one unit (B, KiB, MiB, ...), the
 * last tick at or above @max. Exposed for the tests.
 * Return: the number of ticks, of which at most @cap are stored in @ret_ticks.
 * Context: any; reentrant.
 */
size_t npf__svg_byte_ticks(uint64_t max, double *ret_ticks, size_t cap);

/*
 * The writer. Every function below writes to @w, and does nothing once a write has failed;
 * npf_svg_close() returns the first error. Every one may be called on any thread, on a
 * document of its own.
 */

/* npf_svg_write() - write @len bytes of markup at @s as they are. */
void npf_svg_write(npf_svg_t *w, const char *s, size_t len);

/* npf_svg_printf() - write the markup of @fmt as it is: nothing in it is escaped. */
__attribute__((format(printf, 2, 3)))
void npf_svg_printf(npf_svg_t *w, const char *fmt, ...);

/* npf_svg_escaped() - write the untrusted @s as XML text, fit for an attribute value too:
 * markup characters escaped, control characters and what XML cannot hold replaced, cut
 * after 120 code points with "…". */
void npf_svg_escaped(npf_svg_t *w, const char *s);

/* npf_svg_text() - a <text> element at (@x, @y): @attrs are extra attributes, @s the
 * untrusted text. */
void npf_svg_text(npf_svg_t *w, double x, double y, const char *attrs, const char *s);

/* npf_svg_open() - the chart's opening: the XML prolog, the page of @width by @height, its
 * title @t and, unless NULL or empty, a @subtitle. */
void npf_svg_open(npf_svg_t *w, double width, double height, const char *t, const char *subtitle);

/* npf_svg_close() - the end of the page, then the FILE's own verdict on everything written.
 * Return: 0, or the -errno of the first failed write or of the final fflush(). */
int npf_svg_close(npf_svg_t *w);

/* npf_svg_empty_plot() - an empty plot area at (@x, @y) saying @what. */
void npf_svg_empty_plot(npf_svg_t *w, double x, double y, double width, double height, const char *what);

/* npf_svg_y_axis() - horizontal gridlines and labels of the y axis @a over the plot at (@x, @y). */
void npf_svg_y_axis(npf_svg_t *w, const npf_svg_axis_t *a, double x, double y, double width, double height);

/* npf_svg_plot_frame() - the frame of a plot: the x axis line and the left axis line. */
void npf_svg_plot_frame(npf_svg_t *w, double x, double y, double width, double height);

/* npf_svg_legend_item() - a legend swatch at (@x, @y), a box of @fill and @stroke or, with
 * @fill NULL, a line of @stroke dashed as @dash (NULL: solid), followed by @label.
 * Return: the x after it. */
double npf_svg_legend_item(npf_svg_t *w, double x, double y, const char *fill, const char *stroke, const char *dash,
                           const char *label);

/* Numbers for the page. Each returns its text by value, to be used as npf_svg_px(x).s. */

/* npf_svg_px() - a coordinate: one decimal is a tenth of a pixel. */
npf_svg_num_t npf_svg_px(double v);

/* npf_svg_trimmed() - @v with at most @dec (0 to 3) decimals and no trailing zeros: "1.5",
 * "2", "0.25". */
npf_svg_num_t npf_svg_trimmed(double v, int dec);

/* npf_svg_count() - @v with a comma every three digits: "41,233". */
npf_svg_num_t npf_svg_count(uint64_t v);

/* npf_svg_duration() - a duration for a label, about three significant digits: "850 us",
 * "12.5 ms", "1.25 s". */
npf_svg_num_t npf_svg_duration(double us);

/* npf_svg_bytes() - as npf_svg_format_bytes(). */
npf_svg_num_t npf_svg_bytes(uint64_t v);

/* npf_svg_cut() - @s cut to @max code points on a character boundary, with "…" when anything
 * was left out. Return: @buf, which must hold 4 * @max + 4 bytes. */
char *npf_svg_cut(const char *s, size_t max, char *buf);

/* npf_svg_text_width() - about how wide @s is in a sans-serif font of @size pixels. */
double npf_svg_text_width(const char *s, double size);

/* Axes: ticks at 1, 2 or 5 times a power of ten of their unit. */

/* npf_svg_byte_axis() - a y axis for bytes up to @max, in the largest 1024-based unit @max
 * reaches, with a little room above @max. */
npf_svg_axis_t npf_svg_byte_axis(uint64_t max);

/* npf_svg_time_axis() - an axis for durations spanning @span_us in about @parts steps,
 * labelled in us, ms or s. */
npf_svg_axis_t npf_svg_time_axis(double span_us, double parts);

/* npf_svg_count_axis() - an axis for event indices from 0 to @span: whole steps. */
npf_svg_axis_t npf_svg_count_axis(double span);

/* npf_svg_tick_label() - the label of the tick at @v of @a: "0", "1.5 GiB", "250 ms", "2k". */
npf_svg_num_t npf_svg_tick_label(const npf_svg_axis_t *a, double v);

#endif /* NPUPROF_REPLAY_SVG_H */
