/* SPDX-License-Identifier: MIT */
/*
 * The memory chart of npuprof-replay (memory.svg), written with the SVG writer of svg.h:
 * allocated, active and reserved bytes over the events (or over time), one panel per
 * device, stacked. A panel of millions of points is reduced to at most a few points per
 * horizontal pixel and series: each pixel column keeps the smallest and largest value that
 * fell into it, so a single-event spike is never lost. Titles and series names are
 * untrusted text, escaped and shortened by the writer.
 */
#ifndef NPUPROF_REPLAY_SVG_MEMORY_H
#define NPUPROF_REPLAY_SVG_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NPF_SVG_SERIES_MAX 4u           /* series in one memory panel */
#define NPF_SVG_PANELS_MAX 64u          /* panels (devices) in one memory chart */

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
        const double *steps_at;         /* where the window's steps begin, in time_us's terms (drawn only
                                         * on a panel over time), as thin grey lines */
        size_t n_steps;
} npf_svg_panel_t;

/*
 * npf_svg_memory() - write a memory chart of @n_panels panels stacked vertically, under
 * @title, to @f. No panel at all writes a chart that says "no events".
 * Return: 0; -EINVAL for an argument that breaks the rules above (NULL series or values,
 * no series, too many series, a peak or mark index out of range, steps without their
 * places), found before anything is
 * written; -E2BIG for more than NPF_SVG_PANELS_MAX panels; -ENOMEM; or the -errno of a
 * failed write or of the final fflush() of @f.
 * Context: any thread; reentrant. Time linear in the points, memory in the chart's width.
 */
int npf_svg_memory(FILE *f, const char *title, const npf_svg_panel_t *panels, size_t n_panels);

#endif /* NPUPROF_REPLAY_SVG_MEMORY_H */
