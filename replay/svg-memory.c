/* SPDX-License-Identifier: MIT */
#include "replay/svg-memory.h"
#include "replay/svg.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The colours of the series, in their order. */
static const struct {
        const char *fill, *line;
} palette[NPF_SVG_SERIES_MAX] = {
        { "#dbe9f6", "#2b7bba" },       /* blue: reserved */
        { "#fde0c5", "#e6550d" },       /* orange: active */
        { "#c9ead0", "#238b45" },       /* green: allocated */
        { "#e3e1f0", "#6a51a3" },       /* purple */
};

/* One pixel column of one series: the extremes met in it, in the order they came, and the last. */
typedef struct bucket {
        uint64_t lo, hi, last;
        size_t ilo, ihi;
} bucket_t;

typedef struct point {
        double x, y;
} point_t;

/* Where one panel's points land: x is the event index or the time, mapped onto columns. */
typedef struct xmap {
        const double *time_us;  /* NULL: event indices */
        double x0, span;        /* the first x and the width of the data (never 0) */
        size_t cols;
} xmap_t;

static xmap_t xmap_make(const npf_svg_panel_t *p)
{
        xmap_t m = { .time_us = p->time_us, .x0 = 0, .span = p->n > 1 ? (double) (p->n - 1) : 1,
                     .cols = NPF_SVG_PLOT_W };
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
        return NPF_SVG_MARGIN_L + 0.5 + (v - m->x0) / m->span * (double) (m->cols - 1);
}

static double col_px(size_t c)
{
        return NPF_SVG_MARGIN_L + 0.5 + (double) c;
}

static double y_px(double v, const npf_svg_axis_t *a, double plot_y)
{
        return plot_y + NPF_SVG_PLOT_H - v / a->top * NPF_SVG_PLOT_H;
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
 * The outline of one series through its columns, at most four points a column: a step at
 * the height the previous column ended with when columns were skipped, the column's
 * extremes in the order they happened, then the value it ended with, so that whatever rose
 * and fell within one column is drawn inside it and never leans into the next (a spike of
 * microseconds in the first column of a 100 s chart is a line, not a triangle).
 * Return: the number of points in @pts.
 */
static size_t outline(const bucket_t *b, const bool *used, size_t cols, const npf_svg_axis_t *a, double plot_y,
                      point_t *pts)
{
        size_t n = 0, prev = SIZE_MAX;

        for (size_t c = 0; c < cols; c++) {
                if (!used[c])
                        continue;
                double x = col_px(c), ylo = y_px((double) b[c].lo, a, plot_y), yhi = y_px((double) b[c].hi, a, plot_y);
                if (prev != SIZE_MAX && c > prev + 1)
                        pts[n++] = (point_t) { x, y_px((double) b[prev].last, a, plot_y) };
                uint64_t ended_at;
                if (b[c].lo == b[c].hi) {
                        pts[n++] = (point_t) { x, ylo };
                        ended_at = b[c].lo;
                } else if (b[c].ilo < b[c].ihi) {
                        pts[n++] = (point_t) { x, ylo };
                        pts[n++] = (point_t) { x, yhi };
                        ended_at = b[c].hi;
                } else {
                        pts[n++] = (point_t) { x, yhi };
                        pts[n++] = (point_t) { x, ylo };
                        ended_at = b[c].lo;
                }
                if (b[c].last != ended_at)
                        pts[n++] = (point_t) { x, y_px((double) b[c].last, a, plot_y) };
                prev = c;
        }
        return n;
}

/* The points of @pts as path data, "M x,y L x,y ..." with repeated points left out. */
static void out_points(npf_svg_t *w, const point_t *pts, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (i > 0 && pts[i].x == pts[i - 1].x && pts[i].y == pts[i - 1].y)
                        continue;
                npf_svg_num_t x = npf_svg_px(pts[i].x), y = npf_svg_px(pts[i].y);
                char buf[2 * sizeof(x.s) + 2], *p = buf;
                size_t xl = strlen(x.s), yl = strlen(y.s);
                *p++ = i == 0 ? 'M' : 'L';
                memcpy(p, x.s, xl);
                p += xl;
                *p++ = ',';
                memcpy(p, y.s, yl);
                npf_svg_write(w, buf, (size_t) (p + yl - buf));
        }
}

/* The x axis of a panel: vertical gridlines, tick labels and the axis' name. */
static void panel_x_axis(npf_svg_t *w, const xmap_t *m, double plot_y)
{
        npf_svg_axis_t a = m->time_us ? npf_svg_time_axis(m->span, 8) : npf_svg_count_axis(m->span);

        for (size_t k = 0;; k++) {
                double v = (double) k * a.step;
                if (v > m->span * 1.00001 || k > 100)
                        break;
                double x = xmap_px(m, m->x0 + v);
                npf_svg_printf(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" " NPF_SVG_GRID_LINE "/>\n",
                               npf_svg_px(x).s, npf_svg_px(plot_y).s, npf_svg_px(x).s,
                               npf_svg_px(plot_y + NPF_SVG_PLOT_H).s);
                npf_svg_text(w, x, plot_y + NPF_SVG_PLOT_H + 17, "text-anchor=\"middle\" fill=\"" NPF_SVG_GREY "\"",
                             npf_svg_tick_label(&a, v).s);
        }
        npf_svg_text(w, NPF_SVG_MARGIN_L + NPF_SVG_PLOT_W / 2.0, plot_y + NPF_SVG_PLOT_H + 38, "text-anchor=\"middle\"",
                     m->time_us ? "time since the first event" : "event");
}

/* The default words of a peak marker: "peak 3.2 GiB allocated at event 41,233". */
static void peak_words(const npf_svg_panel_t *p, const xmap_t *m, char *buf, size_t size)
{
        size_t i = p->peak_index;
        uint64_t v = p->series[p->peak_series].y[i];
        const char *name = p->series[p->peak_series].name;
        char cut_name[4 * 40 + 4];

        snprintf(buf, size, "peak %s%s%s at ", npf_svg_bytes(v).s, name ? " " : "",
                 name ? npf_svg_cut(name, 40, cut_name) : "");
        size_t o = strlen(buf);
        if (m->time_us)
                snprintf(buf + o, size - o, "%s (event %s)", npf_svg_duration(m->time_us[i] - m->x0).s,
                         npf_svg_count(i).s);
        else
                snprintf(buf + o, size - o, "event %s", npf_svg_count(i).s);
}

/* The peak marker: a dot on the series, a dotted drop to the axis, and its words beside it. */
static void draw_peak(npf_svg_t *w, const npf_svg_panel_t *p, const xmap_t *m, const npf_svg_axis_t *a, double plot_y,
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
        double tw = npf_svg_text_width(label, 12) + 10;
        bool left = x + 10 + tw > NPF_SVG_MARGIN_L + NPF_SVG_PLOT_W;
        double tx = left ? x - 10 - tw : x + 10, ty = y - 10 < plot_y + 16 ? y + 22 : y - 10;

        npf_svg_printf(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-dasharray=\"2 3\"/>\n",
                       npf_svg_px(x).s, npf_svg_px(y).s, npf_svg_px(x).s, npf_svg_px(plot_y + NPF_SVG_PLOT_H).s,
                       colour);
        npf_svg_printf(w, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"18\" rx=\"3\" fill=\"#ffffff\" "
                          "fill-opacity=\"0.9\" stroke=\"%s\" stroke-width=\"0.8\"/>\n",
                       npf_svg_px(tx).s, npf_svg_px(ty - 13).s, npf_svg_px(tw).s, colour);
        npf_svg_text(w, tx + 5, ty, "font-weight=\"bold\"", label);
        npf_svg_printf(w, "<circle id=\"p%zu-peak\" cx=\"%s\" cy=\"%s\" r=\"4.5\" fill=\"%s\" stroke=\"#ffffff\" "
                          "stroke-width=\"1.5\"/>\n",
                       panel, npf_svg_px(x).s, npf_svg_px(y).s, colour);
}

/* The marks (OOM events): one thin red line per pixel column that holds any. */
static int draw_marks(npf_svg_t *w, const npf_svg_panel_t *p, const xmap_t *m, double plot_y, size_t panel)
{
        bool *seen = calloc(m->cols, sizeof(*seen));

        if (!seen)
                return -ENOMEM;
        npf_svg_printf(w, "<path id=\"p%zu-marks\" d=\"", panel);
        for (size_t k = 0; k < p->n_marks; k++) {
                size_t c = xmap_col(m, p->marks[k]);
                if (seen[c])
                        continue;
                seen[c] = true;
                npf_svg_printf(w, "M%s,%sV%s", npf_svg_px(col_px(c)).s, npf_svg_px(plot_y).s,
                               npf_svg_px(plot_y + NPF_SVG_PLOT_H).s);
        }
        npf_svg_printf(w, "\" fill=\"none\" stroke=\"" NPF_SVG_RED "\" stroke-width=\"1\" stroke-opacity=\"0.85\"/>\n");
        free(seen);
        return 0;
}

/* The steps' beginnings (ProfilerStep#N), on a panel over time: thin grey lines, one a column. */
static int draw_steps(npf_svg_t *w, const npf_svg_panel_t *p, const xmap_t *m, double plot_y, size_t panel)
{
        bool *seen = calloc(m->cols, sizeof(*seen));

        if (!seen)
                return -ENOMEM;
        npf_svg_printf(w, "<path id=\"p%zu-steps\" d=\"", panel);
        for (size_t k = 0; k < p->n_steps; k++) {
                double v = p->steps_at[k];
                if (!isfinite(v) || v < m->x0 || v > m->x0 + m->span)
                        continue;
                size_t c = xmap_col_of(m, v);
                if (seen[c])
                        continue;
                seen[c] = true;
                npf_svg_printf(w, "M%s,%sV%s", npf_svg_px(col_px(c)).s, npf_svg_px(plot_y).s,
                               npf_svg_px(plot_y + NPF_SVG_PLOT_H).s);
        }
        npf_svg_printf(w, "\" fill=\"none\" stroke=\"" NPF_SVG_GREY "\" stroke-width=\"0.8\" "
                          "stroke-dasharray=\"2 3\"/>\n");
        free(seen);
        return 0;
}

/* The steps a panel draws: only over time, where they can be placed. */
static bool has_steps(const npf_svg_panel_t *p, const xmap_t *m)
{
        return p->n_steps > 0 && m->time_us;
}

/* A panel's legend: each series with its largest value, then the marks with their count. */
/*
 * The earlier series that series @s lies on in some pixel column (the same lowest,
 * highest and last value there), which its line would hide: SIZE_MAX when none.
 */
static size_t covers(const bucket_t *b, const bool *used, size_t cols, size_t s)
{
        for (size_t t = 0; t < s; t++)
                for (size_t c = 0; c < cols; c++) {
                        const bucket_t *x = &b[s * cols + c], *y = &b[t * cols + c];
                        if (used[c] && x->lo == y->lo && x->hi == y->hi && x->last == y->last)
                                return t;
                }
        return SIZE_MAX;
}

/*
 * Series @s's legend label: its name, its highest value and, where it is drawn dashed over
 * an equal series, which; @terse leaves out "where equal".
 */
static void series_label(const npf_svg_panel_t *p, const bucket_t *b, const bool *used, size_t cols, size_t s,
                         bool terse, char *label, size_t size)
{
        uint64_t max = 0;
        size_t under = covers(b, used, cols, s);
        char name[4 * 40 + 4], under_name[sizeof(name)];

        for (size_t c = 0; c < cols; c++)
                if (used[c] && b[s * cols + c].hi > max)
                        max = b[s * cols + c].hi;
        npf_svg_cut(p->series[s].name ? p->series[s].name : "series", 40, name);
        if (under == SIZE_MAX)
                snprintf(label, size, "%s (max %s)", name, npf_svg_bytes(max).s);
        else
                snprintf(label, size, "%s (max %s; dashed over %s%s)", name, npf_svg_bytes(max).s,
                         npf_svg_cut(p->series[under].name ? p->series[under].name : "series", 40, under_name),
                         terse ? "" : " where equal");
}

static void panel_legend(npf_svg_t *w, const npf_svg_panel_t *p, const bucket_t *b, const bool *used, size_t cols,
                         bool steps, double y)
{
        char label[4 * 40 * 2 + 80], marks[4 * 40 + 40], name[4 * 40 + 4], step_label[64];
        double x = NPF_SVG_MARGIN_L, width = 0;
        bool terse;

        snprintf(marks, sizeof(marks), "%s (%s)", npf_svg_cut(p->marks_name ? p->marks_name : "OOM", 40, name),
                 npf_svg_count(p->n_marks).s);
        snprintf(step_label, sizeof(step_label), "ProfilerStep (%s)", npf_svg_count(p->n_steps).s);
        /* The whole legend within the page (items 18 px apart): "where equal" goes first where
         * it would not fit. */
        for (size_t s = 0; s < p->n_series; s++) {
                series_label(p, b, used, cols, s, false, label, sizeof(label));
                width += (s ? 18 : 0) + 19 + npf_svg_text_width(label, 12);
        }
        if (p->n_marks > 0)
                width += 18 + 19 + npf_svg_text_width(marks, 12);
        if (steps)
                width += 18 + 19 + npf_svg_text_width(step_label, 12);
        terse = width > NPF_SVG_PAGE_W - NPF_SVG_MARGIN_L - 8;
        for (size_t s = 0; s < p->n_series; s++) {
                series_label(p, b, used, cols, s, terse, label, sizeof(label));
                x = npf_svg_legend_item(w, x, y, palette[s].fill, palette[s].line, NULL, label);
        }
        if (p->n_marks > 0)
                x = npf_svg_legend_item(w, x, y, NULL, NPF_SVG_RED, NULL, marks);
        if (steps)
                npf_svg_legend_item(w, x, y, NULL, NPF_SVG_GREY, "2 3", step_label);
}

/* One panel whose top edge is at @y: header, plot, axes, marks and peak. */
static int draw_panel(npf_svg_t *w, const npf_svg_panel_t *p, double y, size_t panel)
{
        xmap_t m = xmap_make(p);
        double plot_y = y + NPF_SVG_PANEL_HEAD_H;
        bucket_t *b = NULL;
        bool *used = NULL;
        point_t *pts = NULL;
        char sub[160];
        int r = -ENOMEM;

        if (p->title)
                npf_svg_text(w, NPF_SVG_MARGIN_L, y + 18, "font-size=\"14\" font-weight=\"bold\"", p->title);
        if (p->n == 0) {
                npf_svg_empty_plot(w, NPF_SVG_MARGIN_L, plot_y, NPF_SVG_PLOT_W, NPF_SVG_PLOT_H, "no events");
                return 0;
        }
        b = calloc(m.cols * p->n_series, sizeof(*b));
        used = calloc(m.cols, sizeof(*used));
        pts = calloc(4 * m.cols, sizeof(*pts));
        if (!b || !used || !pts)
                goto fail;
        bucket_points(p, &m, b, used);

        uint64_t max = 0;
        for (size_t k = 0; k < m.cols * p->n_series; k++)
                if (used[k % m.cols] && b[k].hi > max)
                        max = b[k].hi;
        npf_svg_axis_t a = npf_svg_byte_axis(max);

        snprintf(sub, sizeof(sub), "%s event%s%s%s%s", npf_svg_count(p->n).s, p->n == 1 ? "" : "s",
                 m.time_us ? " over " : "", m.time_us ? npf_svg_duration(m.span).s : "",
                 p->n > m.cols ? ", lowest and highest per pixel column" : "");
        npf_svg_text(w, NPF_SVG_MARGIN_L + NPF_SVG_PLOT_W, y + 18, "text-anchor=\"end\" fill=\"" NPF_SVG_GREY "\"",
                     sub);
        panel_legend(w, p, b, used, m.cols, has_steps(p, &m), y + 38);

        /* Every fill first, the first series behind, then the grid over them; then every line. */
        for (size_t s = 0; s < p->n_series; s++) {
                size_t n = outline(b + s * m.cols, used, m.cols, &a, plot_y, pts);
                npf_svg_printf(w, "<path id=\"p%zu-s%zu-area\" d=\"", panel, s);
                out_points(w, pts, n);
                npf_svg_printf(w, "L%s,%sL%s,%sZ\" fill=\"%s\" stroke=\"none\"/>\n", npf_svg_px(pts[n - 1].x).s,
                               npf_svg_px(plot_y + NPF_SVG_PLOT_H).s, npf_svg_px(pts[0].x).s,
                               npf_svg_px(plot_y + NPF_SVG_PLOT_H).s, palette[s].fill);
        }
        npf_svg_y_axis(w, &a, NPF_SVG_MARGIN_L, plot_y, NPF_SVG_PLOT_W, NPF_SVG_PLOT_H);
        panel_x_axis(w, &m, plot_y);
        npf_svg_printf(w, "<text transform=\"translate(18,%s) rotate(-90)\" text-anchor=\"middle\">memory</text>\n",
                       npf_svg_px(plot_y + NPF_SVG_PLOT_H / 2.0).s);
        /* A line that lies on an earlier one is dashed, so that where they are equal both show. */
        for (size_t s = 0; s < p->n_series; s++) {
                size_t n = outline(b + s * m.cols, used, m.cols, &a, plot_y, pts);
                bool dashed = covers(b, used, m.cols, s) != SIZE_MAX;
                npf_svg_printf(w, "<path id=\"p%zu-s%zu-line\" d=\"", panel, s);
                out_points(w, pts, n);
                npf_svg_printf(w, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-linejoin=\"round\" "
                                  "stroke-linecap=\"round\"%s/>\n",
                               palette[s].line, dashed ? " stroke-dasharray=\"6 4\"" : "");
        }
        if (has_steps(p, &m) && (r = draw_steps(w, p, &m, plot_y, panel)) < 0)
                goto fail;
        if (p->n_marks > 0) {
                r = draw_marks(w, p, &m, plot_y, panel);
                if (r < 0)
                        goto fail;
        }
        npf_svg_plot_frame(w, NPF_SVG_MARGIN_L, plot_y, NPF_SVG_PLOT_W, NPF_SVG_PLOT_H);
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
                if (p->n_steps > 0 && !p->steps_at)
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
        npf_svg_t w = { .f = f };
        double height = NPF_SVG_HEAD_H + (double) (n_panels > 0 ? n_panels : 1) * (NPF_SVG_PANEL_H + 10);

        if (n_panels > NPF_SVG_PANELS_MAX)
                return -E2BIG;
        if (!f || !panels_valid(panels, n_panels))
                return -EINVAL;
        npf_svg_open(&w, NPF_SVG_PAGE_W, height, title && *title ? title : "memory", NULL);
        if (n_panels == 0)
                npf_svg_empty_plot(&w, NPF_SVG_MARGIN_L, NPF_SVG_HEAD_H + NPF_SVG_PANEL_HEAD_H, NPF_SVG_PLOT_W,
                                   NPF_SVG_PLOT_H, "no events");
        for (size_t k = 0; k < n_panels; k++) {
                int r = draw_panel(&w, &panels[k], NPF_SVG_HEAD_H + (double) k * (NPF_SVG_PANEL_H + 10), k);
                if (r < 0)
                        return r;
        }
        return npf_svg_close(&w);
}
