/* SPDX-License-Identifier: MIT */
/*
 * The charts of npuprof-replay, written as plain SVG 1.1 text: no script, no style sheet, no
 * font file, a white background, so that any browser or image viewer shows them as they are.
 *
 * npf_svg_memory() draws allocated, active and reserved bytes over the events (or over time),
 * one panel per device, stacked. A panel of millions of points is reduced to at most a few
 * points per horizontal pixel and series: each pixel column keeps the smallest and largest
 * value that fell into it, so a single-event spike is never lost. npf_svg_ranks() draws the
 * cluster report: per-rank median step time and peak memory, stragglers highlighted.
 *
 * Every string (titles, series names, rank names) is taken as untrusted: it is escaped,
 * invalid UTF-8 and control characters are replaced, and it is shortened when very long.
 * The writers only ever write to the FILE they are given; the caller opens and closes it.
 */
#ifndef NPUPROF_REPLAY_SVG_H
#define NPUPROF_REPLAY_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NPF_SVG_SERIES_MAX 4u           /* series in one memory panel */
#define NPF_SVG_PANELS_MAX 64u          /* panels (devices) in one memory chart */
#define NPF_SVG_RANKS_MAX 65536u        /* ranks in one cluster chart */
#define NPF_SVG_BYTES_MAX 24u           /* a buffer for npf_svg_format_bytes(), NUL included */

/* One line of a memory panel: @n values (the panel's n), in bytes. */
typedef struct npf_svg_series {
        const char *name;               /* "reserved", "active", "allocated" */
        const uint64_t *y;
} npf_svg_series_t;

/*
 * One panel of a memory chart, say one device. Series are drawn in order, the first one
 * behind the others: give "reserved" first, then "active", then "allocated".
 */
typedef struct npf_svg_panel {
        const char *title;              /* "device 0"; NULL: none */
        size_t n;                       /* points in every series; 0 draws "no events" */
        const double *time_us;          /* NULL: x is the event index; else the time of each point
                                         * in microseconds (any origin, any order); a non-finite
                                         * value makes the panel fall back to event indices */
        const npf_svg_series_t *series;
        size_t n_series;                /* 1 to NPF_SVG_SERIES_MAX when n > 0 */
        bool has_peak;                  /* false: no peak marker */
        size_t peak_series;             /* which series the peak marker belongs to */
        size_t peak_index;              /* the point to mark */
        const char *peak_label;         /* NULL: "peak 3.2 GiB allocated at event 41,233" */
        const size_t *marks;            /* point indices drawn as thin red vertical lines */
        size_t n_marks;
        const char *marks_name;         /* the legend's word for the marks; NULL: "OOM" */
} npf_svg_panel_t;

/* One bar of the cluster chart. */
typedef struct npf_svg_rank {
        const char *name;               /* the bar's label, "3"; NULL: its position in the array */
        double step_us;                 /* median step time, microseconds */
        uint64_t peak_bytes;            /* peak memory (allocated or reserved: the caller's choice) */
        bool has_step;                  /* false: no step time known, no bar */
        bool has_peak;                  /* false: no memory known, no bar */
        bool straggler;                 /* drawn in the warning colour */
} npf_svg_rank_t;

/*
 * npf_svg_memory() - write a memory chart of @n_panels panels stacked vertically, under
 * @title, to @f. No panel at all writes a chart that says "no events".
 * Return: 0; -EINVAL for an argument that breaks the rules above (NULL series or values,
 * no series, too many series, a peak or mark index out of range), found before anything is
 * written; -E2BIG for more than NPF_SVG_PANELS_MAX panels; -ENOMEM; or the -errno of a
 * failed write or of the final fflush() of @f.
 * Context: any thread; reentrant. Time linear in the points, memory in the chart's width.
 */
int npf_svg_memory(FILE *f, const char *title, const npf_svg_panel_t *panels, size_t n_panels);

/*
 * npf_svg_ranks() - write the cluster chart of @n ranks under @title to @f: one panel of
 * median step times with dashed lines at @median_us (the median of all ranks) and at
 * @threshold_us (above which a rank is a straggler), one panel of peak memory. Either line
 * is left out when its value is not a positive number. The caller decides which ranks are
 * stragglers.
 * Return: 0; -EINVAL (NULL @f, or NULL @ranks with @n > 0); -E2BIG for more than
 * NPF_SVG_RANKS_MAX ranks; or the -errno of a failed write or fflush() of @f.
 * Context: any thread; reentrant.
 */
int npf_svg_ranks(FILE *f, const char *title, const npf_svg_rank_t *ranks, size_t n, double median_us,
                  double threshold_us);

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

#endif /* NPUPROF_REPLAY_SVG_H */
