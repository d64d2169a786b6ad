/* SPDX-License-Identifier: MIT */
#include "replay/svg-ranks.h"
#include "replay/svg.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

/* A straggler's bar. */
#define WARN "#f28e2b"
#define WARN_DARK "#b85c00"

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
                npf_svg_cut(r->name, 20, n.s);
        else
                snprintf(n.s, sizeof(n.s), "%zu", i);
        return n;
}

/* A dashed level across the plot with its words at the right end. */
static void level(npf_svg_t *w, double x, double width, double y, const char *colour, const char *dash,
                  const char *words)
{
        npf_svg_printf(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1.5\" "
                          "stroke-dasharray=\"%s\"/>\n",
                       npf_svg_px(x).s, npf_svg_px(y).s, npf_svg_px(x + width).s, npf_svg_px(y).s, colour, dash);
        npf_svg_printf(w, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"15\" fill=\"#ffffff\" "
                          "fill-opacity=\"0.85\"/>\n",
                       npf_svg_px(x + width - npf_svg_text_width(words, 11) - 8).s, npf_svg_px(y - 17).s,
                       npf_svg_px(npf_svg_text_width(words, 11) + 6).s);
        char attrs[64];
        snprintf(attrs, sizeof(attrs), "text-anchor=\"end\" font-size=\"11\" fill=\"%s\"", colour);
        npf_svg_text(w, x + width - 4, y - 6, attrs, words);
}

/* One panel of bars, one per rank, its top edge at @y, its plot @width wide. */
static void bar_panel(npf_svg_t *w, const npf_svg_rank_t *ranks, size_t n, int which, double y, double width,
                      double median_us, double threshold_us)
{
        double plot_y = y + NPF_SVG_PANEL_HEAD_H, max = 0, v, pitch = width / (double) (n ? n : 1);
        const char *base = which == BAR_STEP ? "#4c78a8" : "#54a24b";
        const char *what = which == BAR_STEP ? "median step time" : "peak memory";
        bool any = false;
        npf_svg_axis_t a;

        npf_svg_text(w, NPF_SVG_MARGIN_L, y + 18, "font-size=\"14\" font-weight=\"bold\"",
                     which == BAR_STEP ? "median step time per rank" : "peak memory per rank");
        double lx = npf_svg_legend_item(w, NPF_SVG_MARGIN_L, y + 38, base, base, NULL, what);
        lx = npf_svg_legend_item(w, lx, y + 38, WARN, WARN_DARK, NULL, "straggler");
        for (size_t i = 0; i < n; i++)
                if (bar_value(&ranks[i], which, &v)) {
                        any = true;
                        max = v > max ? v : max;
                }
        if (!any) {
                npf_svg_empty_plot(w, NPF_SVG_MARGIN_L, plot_y, width, NPF_SVG_PLOT_H,
                                   n ? "not known for any rank" : "no ranks");
                return;
        }
        if (which == BAR_STEP) {
                char words[96];
                if (median_us > 0 && isfinite(median_us)) {
                        max = median_us > max ? median_us : max;
                        snprintf(words, sizeof(words), "median of all ranks %s", npf_svg_duration(median_us).s);
                        lx = npf_svg_legend_item(w, lx, y + 38, NULL, NPF_SVG_INK, "6 4", words);
                }
                if (threshold_us > 0 && isfinite(threshold_us)) {
                        max = threshold_us > max ? threshold_us : max;
                        snprintf(words, sizeof(words), "straggler above %s", npf_svg_duration(threshold_us).s);
                        npf_svg_legend_item(w, lx, y + 38, NULL, NPF_SVG_RED, "3 3", words);
                }
                a = npf_svg_time_axis(max * 1.02, 6);
        } else {
                a = npf_svg_byte_axis((uint64_t) max);
        }
        npf_svg_y_axis(w, &a, NPF_SVG_MARGIN_L, plot_y, width, NPF_SVG_PLOT_H);
        npf_svg_printf(w, "<text transform=\"translate(18,%s) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
                       npf_svg_px(plot_y + NPF_SVG_PLOT_H / 2.0).s, which == BAR_STEP ? "step time" : "memory");

        /* Label every k-th bar so that the labels do not overlap. */
        double name_w = 0;
        size_t n_slow = 0;
        for (size_t i = 0; i < n; i++) {
                double tw = npf_svg_text_width(rank_name(&ranks[i], i).s, 11);
                name_w = tw > name_w ? tw : name_w;
                n_slow += ranks[i].straggler;
        }
        size_t every = (size_t) ((name_w + 6) / pitch) + 1;

        for (size_t i = 0; i < n; i++) {
                const npf_svg_rank_t *r = &ranks[i];
                double cx = NPF_SVG_MARGIN_L + pitch * ((double) i + 0.5), bw = pitch * 0.7;
                bool has = bar_value(r, which, &v);
                if (bw < 1.5)
                        bw = r->straggler ? 1.5 : pitch;
                if (i % every == 0)
                        npf_svg_text(w, cx, plot_y + NPF_SVG_PLOT_H + 16,
                                     "text-anchor=\"middle\" font-size=\"11\" fill=\"" NPF_SVG_GREY "\"",
                                     rank_name(r, i).s);
                if (!has) {
                        if (pitch >= 18)
                                npf_svg_text(w, cx, plot_y + NPF_SVG_PLOT_H - 5,
                                             "text-anchor=\"middle\" font-size=\"10\" fill=\"" NPF_SVG_GREY "\"",
                                             "n/a");
                        continue;
                }
                double top = plot_y + NPF_SVG_PLOT_H - v / a.top * NPF_SVG_PLOT_H;
                npf_svg_printf(w, "<rect id=\"%s-%zu\" class=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" "
                                  "fill=\"%s\"%s><title>",
                               which == BAR_STEP ? "step" : "peak", i, r->straggler ? "bar straggler" : "bar",
                               npf_svg_px(cx - bw / 2).s, npf_svg_px(top).s, npf_svg_px(bw).s,
                               npf_svg_px(plot_y + NPF_SVG_PLOT_H - top).s, r->straggler ? WARN : base,
                               r->straggler ? " stroke=\"" WARN_DARK "\" stroke-width=\"1\"" : "");
                npf_svg_printf(w, "rank ");
                npf_svg_escaped(w, rank_name(r, i).s);
                npf_svg_printf(w, ": %s</title></rect>\n",
                               which == BAR_STEP ? npf_svg_duration(v).s : npf_svg_bytes((uint64_t) v).s);
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
                                 named ? " " : "", npf_svg_trimmed(over, over < 20 ? 1 : 0).s);
                        npf_svg_text(w, cx, top - 4, "text-anchor=\"middle\" font-size=\"10\" fill=\"" WARN_DARK "\"",
                                     words);
                }
        }
        if (which == BAR_STEP && median_us > 0 && isfinite(median_us))
                level(w, NPF_SVG_MARGIN_L, width, plot_y + NPF_SVG_PLOT_H - median_us / a.top * NPF_SVG_PLOT_H,
                      NPF_SVG_INK, "6 4", npf_svg_duration(median_us).s);
        if (which == BAR_STEP && threshold_us > 0 && isfinite(threshold_us))
                level(w, NPF_SVG_MARGIN_L, width, plot_y + NPF_SVG_PLOT_H - threshold_us / a.top * NPF_SVG_PLOT_H,
                      NPF_SVG_RED, "3 3", npf_svg_duration(threshold_us).s);
        npf_svg_plot_frame(w, NPF_SVG_MARGIN_L, plot_y, width, NPF_SVG_PLOT_H);
        npf_svg_text(w, NPF_SVG_MARGIN_L + width / 2, plot_y + NPF_SVG_PLOT_H + 38, "text-anchor=\"middle\"", "rank");
}

/* The subtitle: how many ranks, the median, and which ranks straggle (the first few by name). */
static void ranks_subtitle(const npf_svg_rank_t *ranks, size_t n, double median_us, char *buf, size_t size)
{
        size_t n_slow = 0, o;

        for (size_t i = 0; i < n; i++)
                n_slow += ranks[i].straggler;
        o = (size_t) snprintf(buf, size, "%s rank%s", npf_svg_count(n).s, n == 1 ? "" : "s");
        if (median_us > 0 && isfinite(median_us) && o < size)
                o += (size_t) snprintf(buf + o, size - o, ", median step %s", npf_svg_duration(median_us).s);
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
        npf_svg_t w = { .f = f };
        char sub[512];

        if (!f || (n > 0 && !ranks))
                return -EINVAL;
        if (n > NPF_SVG_RANKS_MAX)
                return -E2BIG;

        /* Wide enough for a readable bar per rank, up to a point; then bars get thin. */
        double width = (double) n * 22 > NPF_SVG_PLOT_W ? (double) n * 22 : NPF_SVG_PLOT_W;
        if (width > 1800)
                width = 1800;
        ranks_subtitle(ranks, n, median_us, sub, sizeof(sub));
        npf_svg_open(&w, NPF_SVG_MARGIN_L + width + NPF_SVG_MARGIN_R, NPF_SVG_HEAD_H + 2 * (NPF_SVG_PANEL_H + 10),
                     title && *title ? title : "ranks", sub);
        bar_panel(&w, ranks, n, BAR_STEP, NPF_SVG_HEAD_H, width, median_us, threshold_us);
        bar_panel(&w, ranks, n, BAR_PEAK, NPF_SVG_HEAD_H + NPF_SVG_PANEL_H + 10, width, median_us, threshold_us);
        return npf_svg_close(&w);
}
