/* SPDX-License-Identifier: MIT */
#include "replay/svg-steps.h"
#include "replay/svg.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_MAX 20u           /* code points of a bar's label, and of each end of a range */
#define NAME_MAX_CP 40u         /* code points of a name in the subtitle and the notes */
#define NOTE_MAX_CP 100u
#define SUB_NAME_MAX 24u        /* code points of the rank's name in a one-rank subtitle */
#define NOTES_MAX 8u            /* notes listed under the plot */
#define VALUE_MAX 1e15          /* microseconds: 31 years; more is drawn as this */
#define BAR_W_MAX 64.0
#define WIDTH_MAX 1800.0
#define NOTE_H 18.0
#define SLOW_DARK "#a51c1d"
#define HATCH "steps-hatch"

/* The parts of a step, stacked in this order from the bottom, then the overlap drawn inside
 * the computing. The words are report.txt's. */
enum { COMPUTING, COMM, FREE, BUBBLE, N_PARTS, OVERLAPPED = N_PARTS, N_VALUES };

static const char *const part_words[N_VALUES] = { "computing", "communication not overlapped", "idle (free)",
                                                  "pipeline bubble", "overlapped communication" };
static const char *const part_id[N_VALUES] = { "computing", "communication", "free", "bubble", "overlapped" };
static const char *const part_fill[N_PARTS] = { "#4c78a8", "#f58518", "#cfcfcf", "#b279a2" };
static const char *const part_ink[N_PARTS] = { "#ffffff", "#ffffff", NPF_SVG_INK, "#ffffff" };

/* A step (one rank) or a rank's median step (a cluster). */
typedef struct item {
        double v[N_VALUES];
        bool has;               /* false: a rank without steps */
        bool slow;
} item_t;

/* A bar: one item, or the medians of a run of them. */
typedef struct bar {
        double v[N_VALUES];
        size_t first, last;     /* the items it stands for */
        size_t n_has;           /* of which have values */
        bool slow;
} bar_t;

typedef struct chart {
        const npf_svg_steps_rank_t *ranks;
        size_t n;
        bool cluster;           /* a bar per rank, not per step */
        item_t *items;
        size_t n_items;
        bar_t *bars;
        size_t n_bars, per_bar;
        double *scratch;        /* room for the values of the largest median taken */
} chart_t;

/* An item's label, and a bar's: one item's, or a range "step 50–74". */
typedef struct name {
        char s[4 * LABEL_MAX + 4];
} name_t;

typedef struct label {
        char s[2 * sizeof(name_t) + 4];
} label_t;

/* A value to draw: what is not a number, infinite or negative is 0; a huge one is cut. */
static double clean(double v)
{
        if (!isfinite(v) || v <= 0)
                return 0;
        return v < VALUE_MAX ? v : VALUE_MAX;
}

static int by_double(const void *a, const void *b)
{
        double x = *(const double *) a, y = *(const double *) b;

        return (x > y) - (x < y);
}

/* The median of the @n (> 0) values at @v, which it sorts: the mean of the middle two of an
 * even count, as report.json's medians. */
static double median_of(double *v, size_t n)
{
        if (n == 1)
                return v[0];
        qsort(v, n, sizeof(*v), by_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Part @p of step @s, as it is drawn. */
static double step_value(const npf_svg_step_t *s, size_t p)
{
        switch (p) {
        case COMPUTING: return clean(s->computing_us);
        case COMM: return clean(s->not_overlapped_us);
        case FREE: return clean(s->free_us);
        case BUBBLE: return clean(s->bubble_us);
        default: return clean(s->overlapped_us);
        }
}

/* The label of item @i, cut short: its own, or its position in the array. */
static name_t item_label(const chart_t *c, size_t i)
{
        const char *s = c->cluster ? c->ranks[i].name : c->ranks[0].steps[i].label;
        name_t l;

        if (s)
                npf_svg_cut(s, LABEL_MAX, l.s);
        else
                snprintf(l.s, sizeof(l.s), "%zu", i);
        return l;
}

static bool is_digit(char ch)
{
        return ch >= '0' && ch <= '9';
}

/*
 * The label of bar @b: its item's, or "first–last" with what both begin with said once,
 * never cutting a number or a character: "step 50" to "step 74" is "step 50–74".
 */
static label_t bar_label(const chart_t *c, const bar_t *b)
{
        name_t first = item_label(c, b->first), last;
        label_t l;
        size_t p = 0;

        if (b->first == b->last) {
                memcpy(l.s, first.s, sizeof(first.s));
                return l;
        }
        last = item_label(c, b->last);
        while (first.s[p] && first.s[p] == last.s[p])
                p++;
        if (!last.s[p])         /* the same label twice: say both */
                p = 0;
        while (p > 0 && (((unsigned char) last.s[p] & 0xc0) == 0x80 || is_digit(first.s[p - 1])))
                p--;
        snprintf(l.s, sizeof(l.s), "%s\xe2\x80\x93%s", first.s, last.s + p);
        return l;
}

static double bar_total(const bar_t *b)
{
        return b->v[COMPUTING] + b->v[COMM] + b->v[FREE] + b->v[BUBBLE];
}

/* The items: the steps of the one rank, or each rank's median step. */
static void fill_items(chart_t *c)
{
        for (size_t i = 0; i < c->n_items; i++) {
                item_t *it = &c->items[i];
                if (!c->cluster) {
                        for (size_t p = 0; p < N_VALUES; p++)
                                it->v[p] = step_value(&c->ranks[0].steps[i], p);
                        it->has = true;
                        continue;
                }
                const npf_svg_steps_rank_t *r = &c->ranks[i];
                it->slow = r->slow;
                it->has = r->n_steps > 0;
                for (size_t p = 0; it->has && p < N_VALUES; p++) {
                        for (size_t s = 0; s < r->n_steps; s++)
                                c->scratch[s] = step_value(&r->steps[s], p);
                        it->v[p] = median_of(c->scratch, r->n_steps);
                }
        }
}

/* The bars: an item each, or past NPF_SVG_STEPS_BARS the medians of runs of them. */
static void fill_bars(chart_t *c)
{
        for (size_t j = 0; j < c->n_bars; j++) {
                bar_t *b = &c->bars[j];
                b->first = j * c->per_bar;
                b->last = b->first + c->per_bar - 1 < c->n_items ? b->first + c->per_bar - 1 : c->n_items - 1;
                for (size_t i = b->first; i <= b->last; i++) {
                        b->slow |= c->items[i].slow;
                        b->n_has += c->items[i].has;
                }
                for (size_t p = 0; b->n_has && p < N_VALUES; p++) {
                        size_t k = 0;
                        for (size_t i = b->first; i <= b->last; i++)
                                if (c->items[i].has)
                                        c->scratch[k++] = c->items[i].v[p];
                        b->v[p] = median_of(c->scratch, k);
                }
        }
}

/* Per part, the median over all steps of the one rank, for the subtitle. */
static void rank_medians(const chart_t *c, double *ret_v)
{
        for (size_t p = 0; p < N_VALUES; p++) {
                for (size_t i = 0; i < c->n_items; i++)
                        c->scratch[i] = c->items[i].v[p];
                ret_v[p] = c->n_items ? median_of(c->scratch, c->n_items) : 0;
        }
}

/*
 * "rank 3, 120 steps, median step 137 ms: 75% communication not overlapped, 19% idle, 6% computing";
 * of one step, "rank 3, step 50: 137 ms, 75% ...". The parts' words are short, to fit.
 */
static void one_rank_subtitle(const chart_t *c, char *buf, size_t size)
{
        static const char *const words[N_PARTS] = { "computing", "communication not overlapped", "idle", "bubble" };
        const npf_svg_steps_rank_t *r = &c->ranks[0];
        char name[4 * SUB_NAME_MAX + 4] = "";
        double v[N_VALUES], total = 0;
        size_t o, order[N_PARTS] = { COMPUTING, COMM, FREE, BUBBLE };

        if (r->name)
                npf_svg_cut(r->name, SUB_NAME_MAX, name);
        if (r->n_steps == 1 && r->steps[0].label)
                o = (size_t) snprintf(buf, size, "%s%s%s", name, *name ? ", " : "", item_label(c, 0).s);
        else if (r->n_steps == 1)
                o = (size_t) snprintf(buf, size, "%s%s1 step", name, *name ? ", " : "");
        else
                o = (size_t) snprintf(buf, size, "%s%s%s steps", name, *name ? ", " : "", npf_svg_count(r->n_steps).s);
        if (r->n_steps == 0 || o >= size)
                return;
        rank_medians(c, v);
        for (size_t p = 0; p < N_PARTS; p++)
                total += v[p];
        if (total <= 0) {
                snprintf(buf + o, size - o, ", no device time");
                return;
        }
        /* The largest part first. */
        for (size_t i = 1; i < N_PARTS; i++)
                for (size_t k = i; k > 0 && v[order[k]] > v[order[k - 1]]; k--) {
                        size_t t = order[k];
                        order[k] = order[k - 1];
                        order[k - 1] = t;
                }
        o += (size_t) snprintf(buf + o, size - o, r->n_steps == 1 ? ": %s," : ", median step %s:",
                               npf_svg_duration(total).s);
        for (size_t i = 0, shown = 0; i < N_PARTS && o < size; i++) {
                double pct = v[order[i]] / total * 100;
                if (pct < 0.5)
                        continue;
                o += (size_t) snprintf(buf + o, size - o, "%s %s%% %s", shown++ ? "," : "", npf_svg_trimmed(pct, 0).s,
                                       words[order[i]]);
        }
}

/* "8 ranks, 960 steps, 1 slow: rank 3" */
static void cluster_subtitle(const chart_t *c, char *buf, size_t size)
{
        size_t steps = 0, n_slow = 0, none = 0, o;

        for (size_t i = 0; i < c->n; i++) {
                steps += c->ranks[i].n_steps;
                n_slow += c->ranks[i].slow;
                none += c->ranks[i].n_steps == 0;
        }
        o = (size_t) snprintf(buf, size, "%s ranks, %s step%s", npf_svg_count(c->n).s, npf_svg_count(steps).s,
                              steps == 1 ? "" : "s");
        if (none && o < size)
                o += (size_t) snprintf(buf + o, size - o, " (%s rank%s without)", npf_svg_count(none).s,
                                       none == 1 ? "" : "s");
        if (o < size)
                o += (size_t) snprintf(buf + o, size - o, n_slow ? ", %s slow:" : ", no slow ranks",
                                       npf_svg_count(n_slow).s);
        for (size_t i = 0, shown = 0; i < c->n && o < size; i++) {
                if (!c->ranks[i].slow)
                        continue;
                if (shown++ == 8) {
                        snprintf(buf + o, size - o, " and %zu more", n_slow - 8);
                        break;
                }
                o += (size_t) snprintf(buf + o, size - o, "%s %s", shown > 1 ? "," : "", item_label(c, i).s);
        }
}

/* The ranks that are slow or have a note: a line each under the plot, up to NOTES_MAX. */
static size_t noted(const chart_t *c)
{
        size_t k = 0;

        for (size_t i = 0; i < c->n; i++)
                k += c->ranks[i].slow || c->ranks[i].note;
        return k;
}

static void notes(npf_svg_t *w, const chart_t *c, double y)
{
        size_t k = noted(c), shown = 0;

        for (size_t i = 0; i < c->n && shown < NOTES_MAX; i++) {
                const npf_svg_steps_rank_t *r = &c->ranks[i];
                char name[4 * NAME_MAX_CP + 4], note[4 * NOTE_MAX_CP + 4], line[sizeof(name) + sizeof(note) + 8];
                if (!r->slow && !r->note)
                        continue;
                if (r->name)
                        npf_svg_cut(r->name, NAME_MAX_CP, name);
                else
                        snprintf(name, sizeof(name), "%zu", i);
                npf_svg_cut(r->note ? r->note : "slow", NOTE_MAX_CP, note);
                snprintf(line, sizeof(line), "%s: %s", name, note);
                if (r->slow)
                        npf_svg_printf(w, "<rect x=\"%s\" y=\"%s\" width=\"10\" height=\"10\" fill=\"none\" "
                                          "stroke=\"" NPF_SVG_RED "\" stroke-width=\"2\"/>\n",
                                       npf_svg_px(NPF_SVG_MARGIN_L + 1).s, npf_svg_px(y - 9).s);
                npf_svg_text(w, NPF_SVG_MARGIN_L + 18, y, r->slow ? "class=\"note\" fill=\"" SLOW_DARK "\"" :
                                                                     "class=\"note\" fill=\"" NPF_SVG_GREY "\"",
                             line);
                y += NOTE_H;
                shown++;
        }
        if (k > shown) {
                char more[64];
                snprintf(more, sizeof(more), "and %s more", npf_svg_count(k - shown).s);
                npf_svg_text(w, NPF_SVG_MARGIN_L + 18, y, "fill=\"" NPF_SVG_GREY "\"", more);
        }
}

/* @v rounded to a tenth of a pixel, as it is written. */
static double tenth(double v)
{
        return (double) (int64_t) (v * 10 + (v < 0 ? -0.5 : 0.5)) / 10;
}

/* The bar's tooltip: its label, how many it stands for, each part, the note of a slow rank. */
static void bar_title(npf_svg_t *w, const chart_t *c, const bar_t *b)
{
        bool run = b->first != b->last;
        /* A run is the median of its steps or ranks; a rank alone, the median of its steps. */
        const char *what = run && c->cluster ? "rank" : "step";
        size_t of = run ? b->n_has : c->cluster ? c->ranks[b->first].n_steps : 1;

        npf_svg_printf(w, "<title>");
        npf_svg_escaped(w, bar_label(c, b).s);
        if (run || c->cluster)
                npf_svg_printf(w, " (median of %s %s%s)", npf_svg_count(of).s, what, of == 1 ? "" : "s");
        npf_svg_printf(w, ": %s", npf_svg_duration(bar_total(b)).s);
        for (size_t p = 0; p < N_VALUES; p++)
                npf_svg_printf(w, "%s%s %s", p == 0 ? " = " : p == OVERLAPPED ? "; " : " + ", part_words[p],
                               npf_svg_duration(b->v[p]).s);
        /* A run's slow ranks by name, the first few. */
        for (size_t i = b->first, shown = 0; c->cluster && run && b->slow && i <= b->last; i++) {
                if (!c->ranks[i].slow)
                        continue;
                if (shown++ == 3) {
                        npf_svg_printf(w, ", \xe2\x80\xa6");
                        break;
                }
                npf_svg_printf(w, "%s", shown == 1 ? "; slow: " : ", ");
                npf_svg_escaped(w, item_label(c, i).s);
        }
        if (c->cluster && !run && (c->ranks[b->first].slow || c->ranks[b->first].note)) {
                npf_svg_printf(w, "; %s", c->ranks[b->first].slow ? "slow" : "note");
                if (c->ranks[b->first].note) {
                        npf_svg_printf(w, ": ");
                        npf_svg_escaped(w, c->ranks[b->first].note);
                }
        }
        npf_svg_printf(w, "</title>\n");
}

/* One bar at @cx, @bw wide, on the baseline @base, @scale pixels a microsecond. Return: its top. */
static double bar(npf_svg_t *w, const chart_t *c, size_t j, double cx, double bw, double base, double scale)
{
        const bar_t *b = &c->bars[j];
        double total = bar_total(b), lower = base, cum = 0, x = cx - bw / 2, top_computing = base;

        npf_svg_printf(w, "<g id=\"bar-%zu\" class=\"%s\">", j, b->slow ? "bar slow" : "bar");
        bar_title(w, c, b);
        for (size_t p = 0; p < N_PARTS; p++) {
                cum += b->v[p];
                double upper = tenth(base - cum * scale);
                if (p == COMPUTING)
                        top_computing = upper;
                if (lower - upper < 0.05)
                        continue;
                npf_svg_printf(w, "<rect id=\"bar-%zu-%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" "
                                  "fill=\"%s\"/>\n",
                               j, part_id[p], npf_svg_px(x).s, npf_svg_px(upper).s, npf_svg_px(bw).s,
                               npf_svg_px(lower - upper).s, part_fill[p]);
                /* Its share, where there is room. */
                if (bw >= 34 && lower - upper >= 14 && total > 0) {
                        char attrs[96], pct[40];
                        snprintf(attrs, sizeof(attrs), "text-anchor=\"middle\" font-size=\"10\" fill=\"%s\"",
                                 part_ink[p]);
                        snprintf(pct, sizeof(pct), "%s%%", npf_svg_trimmed(b->v[p] / total * 100, 0).s);
                        npf_svg_text(w, cx, (lower + upper) / 2 + 3.5, attrs, pct);
                }
                lower = upper;
        }
        /* The communication that computing hid, hatched at the top of the computing, under
         * the communication it did not hide. */
        double ov = b->v[OVERLAPPED] < b->v[COMPUTING] ? b->v[OVERLAPPED] : b->v[COMPUTING];
        double ov_low = tenth(top_computing + ov * scale);
        if (bw >= 6 && ov_low - top_computing >= 0.05)
                npf_svg_printf(w, "<rect id=\"bar-%zu-overlapped\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" "
                                  "fill=\"url(#" HATCH ")\"/>\n",
                               j, npf_svg_px(x).s, npf_svg_px(top_computing).s, npf_svg_px(bw).s,
                               npf_svg_px(ov_low - top_computing).s);
        double top = tenth(base - total * scale);
        if (b->slow)
                npf_svg_printf(w, "<rect id=\"bar-%zu-slow\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" "
                                  "fill=\"none\" stroke=\"" NPF_SVG_RED "\" stroke-width=\"2\"/>\n",
                               j, npf_svg_px(x - 1).s, npf_svg_px(top - 1).s, npf_svg_px(bw + 2).s,
                               npf_svg_px(base - top + 1).s);
        npf_svg_printf(w, "</g>\n");
        return top;
}

/* The word "slow" over bar @j, whose top is at @top, on white over whatever bars it crosses,
 * inside the plot @width wide; with the bar's label before it when @named. */
static void slow_label(npf_svg_t *w, const chart_t *c, size_t j, double cx, double top, double width, bool named)
{
        label_t l = bar_label(c, &c->bars[j]);
        char words[sizeof(l.s) + 8];

        snprintf(words, sizeof(words), "%s%sslow", named ? l.s : "", named ? " " : "");
        double tw = npf_svg_text_width(words, 10), tx = cx;
        if (tx - tw / 2 < NPF_SVG_MARGIN_L)
                tx = NPF_SVG_MARGIN_L + tw / 2;
        if (tx + tw / 2 > NPF_SVG_MARGIN_L + width)
                tx = NPF_SVG_MARGIN_L + width - tw / 2;
        npf_svg_printf(w, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"13\" fill=\"#ffffff\" "
                          "fill-opacity=\"0.85\"/>\n",
                       npf_svg_px(tx - tw / 2 - 2).s, npf_svg_px(top - 15).s, npf_svg_px(tw + 4).s);
        npf_svg_text(w, tx, top - 5, "text-anchor=\"middle\" font-size=\"10\" fill=\"" SLOW_DARK "\"", words);
}

/* The plot of bars, its panel's top edge at @y, @width wide. */
static void plot(npf_svg_t *w, const chart_t *c, double y, double width)
{
        double plot_y = y + NPF_SVG_PANEL_HEAD_H, base = plot_y + NPF_SVG_PLOT_H, max = 0, lx;
        double pitch = width / (double) (c->n_bars ? c->n_bars : 1);
        const char *unit = c->cluster ? "rank" : "step";
        bool any = false, overlap = false, slow = false;
        char head[128];

        for (size_t j = 0; j < c->n_bars; j++) {
                const bar_t *b = &c->bars[j];
                if (!b->n_has)
                        continue;
                any = true;
                max = bar_total(b) > max ? bar_total(b) : max;
                overlap |= b->v[OVERLAPPED] > 0 && b->v[COMPUTING] > 0;
                slow |= b->slow;
        }

        /* The panel's head: what a bar is, then the legend. */
        if (c->per_bar > 1)
                snprintf(head, sizeof(head), "%s of each %s: a bar the median of %s %ss", c->cluster ? "median step" :
                         "device time", unit, npf_svg_count(c->per_bar).s, unit);
        else
                snprintf(head, sizeof(head), "%s of each %s", c->cluster ? "median step" : "device time", unit);
        npf_svg_text(w, NPF_SVG_MARGIN_L, y + 18, "font-size=\"14\" font-weight=\"bold\"", head);
        if (slow && c->cluster)
                npf_svg_legend_item(w, NPF_SVG_MARGIN_L + npf_svg_text_width(head, 14) * 1.1 + 24, y + 18, "#ffffff",
                                    NPF_SVG_RED, NULL, "slow rank");
        lx = NPF_SVG_MARGIN_L;
        for (size_t p = 0; p < N_PARTS; p++)
                lx = npf_svg_legend_item(w, lx, y + 38, part_fill[p], part_fill[p], NULL, part_words[p]);
        if (overlap)
                npf_svg_legend_item(w, lx, y + 38, "url(#" HATCH ")", part_fill[COMPUTING], NULL,
                                    part_words[OVERLAPPED]);

        if (!any || max <= 0) {
                npf_svg_empty_plot(w, NPF_SVG_MARGIN_L, plot_y, width, NPF_SVG_PLOT_H,
                                   c->n == 0                ? "no ranks" :
                                   !any && c->cluster       ? "no steps on any rank" :
                                   !any                     ? "no steps" :
                                                              "no device time in any step");
                return;
        }

        /* Totals above the bars where they fit, and room for them under the top. */
        bool totals = pitch >= 56;
        npf_svg_axis_t a = npf_svg_time_axis(max * (totals ? 1.1 : 1.02), 6);
        double scale = NPF_SVG_PLOT_H / a.top;
        npf_svg_y_axis(w, &a, NPF_SVG_MARGIN_L, plot_y, width, NPF_SVG_PLOT_H);
        npf_svg_printf(w, "<text transform=\"translate(18,%s) rotate(-90)\" text-anchor=\"middle\">"
                          "device time</text>\n",
                       npf_svg_px(plot_y + NPF_SVG_PLOT_H / 2.0).s);

        /* Label every k-th bar so that the labels do not overlap. */
        double label_w = 0;
        size_t n_slow = 0;
        for (size_t j = 0; j < c->n_bars; j++) {
                double tw = npf_svg_text_width(bar_label(c, &c->bars[j]).s, 11);
                label_w = tw > label_w ? tw : label_w;
                n_slow += c->bars[j].slow;
        }
        size_t every = (size_t) ((label_w + 6) / pitch) + 1;

        for (size_t j = 0; j < c->n_bars; j++) {
                const bar_t *b = &c->bars[j];
                double cx = NPF_SVG_MARGIN_L + pitch * ((double) j + 0.5), bw = pitch * 0.7;
                if (bw > BAR_W_MAX)
                        bw = BAR_W_MAX;
                if (bw < 1.5)
                        bw = pitch;
                if (j % every == 0)
                        npf_svg_text(w, cx, base + 16,
                                     "text-anchor=\"middle\" font-size=\"11\" fill=\"" NPF_SVG_GREY "\"",
                                     bar_label(c, b).s);
                if (!b->n_has) {
                        if (pitch >= 18)
                                npf_svg_text(w, cx, base - 5,
                                             "text-anchor=\"middle\" font-size=\"10\" fill=\"" NPF_SVG_GREY "\"",
                                             "n/a");
                        continue;
                }
                double top = bar(w, c, j, cx, bw, base, scale);
                if (totals)
                        npf_svg_text(w, cx, top - 5, "text-anchor=\"middle\" font-size=\"10\"",
                                     npf_svg_duration(bar_total(b)).s);
        }
        /* A slow rank's word over its bar, with its name where the axis leaves it out: after
         * all bars, so that none covers it. */
        for (size_t j = 0; c->cluster && (every == 1 || n_slow <= 24) && j < c->n_bars; j++)
                if (c->bars[j].slow && c->bars[j].n_has)
                        slow_label(w, c, j, NPF_SVG_MARGIN_L + pitch * ((double) j + 0.5),
                                   tenth(base - bar_total(&c->bars[j]) * scale) - (totals ? 12 : 0), width,
                                   j % every != 0);
        npf_svg_plot_frame(w, NPF_SVG_MARGIN_L, plot_y, width, NPF_SVG_PLOT_H);
        npf_svg_text(w, NPF_SVG_MARGIN_L + width / 2, base + 38, "text-anchor=\"middle\"", unit);
}

/* The arguments' faults, found before anything is written. */
static int check(FILE *f, const npf_svg_steps_rank_t *ranks, size_t n)
{
        if (!f || (n > 0 && !ranks))
                return -EINVAL;
        if (n > NPF_SVG_STEPS_MAX)
                return -E2BIG;
        for (size_t i = 0; i < n; i++) {
                if (!ranks[i].steps && ranks[i].n_steps > 0)
                        return -EINVAL;
                if (ranks[i].n_steps > NPF_SVG_STEPS_MAX)
                        return -E2BIG;
        }
        return 0;
}

int npf_svg_steps(FILE *f, const char *title, const npf_svg_steps_rank_t *ranks, size_t n)
{
        chart_t c = { .ranks = ranks, .n = n, .cluster = n > 1, .per_bar = 1 };
        npf_svg_t w = { .f = f };
        size_t scratch = 1;
        char sub[640];
        int r = check(f, ranks, n);

        if (r < 0)
                return r;
        c.n_items = c.cluster ? n : n == 1 ? ranks[0].n_steps : 0;
        if (c.n_items > NPF_SVG_STEPS_BARS)
                c.per_bar = (c.n_items + NPF_SVG_STEPS_BARS - 1) / NPF_SVG_STEPS_BARS;
        c.n_bars = (c.n_items + c.per_bar - 1) / c.per_bar;
        for (size_t i = 0; i < n; i++)
                scratch = ranks[i].n_steps > scratch ? ranks[i].n_steps : scratch;
        scratch = c.per_bar > scratch ? c.per_bar : scratch;
        c.items = calloc(c.n_items + 1, sizeof(*c.items));
        c.bars = calloc(c.n_bars + 1, sizeof(*c.bars));
        c.scratch = malloc(scratch * sizeof(*c.scratch));
        if (!c.items || !c.bars || !c.scratch) {
                r = -ENOMEM;
                goto out;
        }
        fill_items(&c);
        fill_bars(&c);

        /* Wide enough for a readable bar each, up to a point; then bars get thin. */
        double width = (double) c.n_bars * 22 > NPF_SVG_PLOT_W ? (double) c.n_bars * 22 : NPF_SVG_PLOT_W;
        if (width > WIDTH_MAX)
                width = WIDTH_MAX;
        size_t k = noted(&c), lines = k > NOTES_MAX ? NOTES_MAX + 1 : k;
        double notes_y = NPF_SVG_HEAD_H + NPF_SVG_PANEL_H + 6;

        if (c.cluster)
                cluster_subtitle(&c, sub, sizeof(sub));
        else if (n == 1)
                one_rank_subtitle(&c, sub, sizeof(sub));
        else
                snprintf(sub, sizeof(sub), "0 ranks");
        npf_svg_open(&w, NPF_SVG_MARGIN_L + width + NPF_SVG_MARGIN_R, notes_y + (double) lines * NOTE_H + 10,
                     title && *title ? title : c.cluster ? "device time per rank" : "device time per step", sub);
        npf_svg_printf(&w, "<defs><pattern id=\"" HATCH "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
                           "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"%s\"/>"
                           "<rect width=\"2.5\" height=\"6\" fill=\"%s\"/></pattern></defs>\n",
                       part_fill[COMPUTING], part_fill[COMM]);
        plot(&w, &c, NPF_SVG_HEAD_H, width);
        notes(&w, &c, notes_y + 12);
        r = npf_svg_close(&w);
out:
        free(c.items);
        free(c.bars);
        free(c.scratch);
        return r;
}
