/* SPDX-License-Identifier: MIT */
/*
 * `npuprof-replay cluster DIR...`: every rank*_start*_stop* window directory below DIR, one row
 * each: its rank, its median and p90 step time (the ProfilerStep#N spans of its trace) and
 * its peak memory (the replay of its snapshot), and the stragglers: the windows whose median
 * step time exceeds the median of all windows' medians by more than 10%.
 */
#ifndef NPUPROF_REPLAY_CLUSTER_H
#define NPUPROF_REPLAY_CLUSTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NPF_CLUSTER_WINDOWS_MAX 65536u
#define NPF_CLUSTER_DEPTH_MAX 6         /* directories below DIR searched for windows */
#define NPF_CLUSTER_STRAGGLER 1.10      /* a median step time above 110% of the median */

/*
 * npf_cluster_report() - the cluster report of the windows below @dir, as JSON.
 * Return: 0 and the report in @ret; -ENOENT (no window below @dir) or -errno of reading @dir,
 * with a sentence in @err (@err_size bytes). A window whose files cannot be read is a row
 * with an "error" and no figures.
 */
int npf_cluster_report(const char *dir, json_t **ret, char *err, size_t err_size);

/*
 * npf_cluster_report_dirs() - the same over @n_dirs directories, each a window directory
 * itself or one searched for windows; the report's "dir" is the first.
 * Return: as npf_cluster_report(), the error naming the directory that failed.
 */
int npf_cluster_report_dirs(const char *const *dirs, size_t n_dirs, json_t **ret, char *err, size_t err_size);

/* The report for people: one aligned row per window, stragglers marked. Return: 0 or -errno. */
int npf_cluster_text(FILE *f, const json_t *report);

/* ranks.svg from the report. Return: 0 or -errno. */
int npf_cluster_svg(FILE *f, const json_t *report);

#endif /* NPUPROF_REPLAY_CLUSTER_H */
