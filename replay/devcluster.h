/* SPDX-License-Identifier: MIT */
/*
 * The cluster's device analysis: which rank is slow, and why. From every rank's per-step
 * breakdown (devreport.h's rank objects):
 *
 *   stages   pipeline stages, from communication_group.json's "p2p" lists where
 *            msprof-analyze left one (its legacy stage list: Ascend/msprof-analyze,
 *            cluster_analyse/analysis/stage_group_analysis.py), else each rank's "stage",
 *            else one stage of all ranks. Each stage's row per step is the largest of its
 *            ranks' figures, column by column, as msprof-analyze's cluster_step_trace_time.csv
 *            gives it (analysis/step_trace_time_analysis.py), with its worst rank.
 *   slow     within a stage, a rank whose median computing, free or preparing time a step
 *   ranks    exceeds its peers' median by more than NPF_DEVCLUSTER_SLOW of the stage's
 *            median step while it waits less in communication than they do: in synchronous
 *            training every rank's step lasts as long as the slowest's, so the slow rank is
 *            the one the others wait for, not the one with the longest step. The cause is
 *            the part with the largest excess; without one, a rank whose own communication
 *            not overlapped exceeds its peers' by as much has cause "communication". Across
 *            stages, the stage whose worst rank computes more than the others' by as much,
 *            while they wait in pipeline receives (bubble), is slow: its worst rank, cause
 *            "computing", scope "stage". msprof-analyze's advisor flags a spread of a column
 *            (max - min over 5% of the mean of all ranks' steps: slow_rank_analyzer.py) and
 *            names the rank with the most of it, whether or not the others wait for it.
 *   slow     per link type (HCCS, SDMA, RDMA, PCIE, ...), a rank whose bandwidth is below
 *   links    NPF_DEVCLUSTER_LINK of the median of all ranks' (msprof-analyze's advisor, on
 *            SDMA and RDMA only, names the lowest once the spread passes 5% of the mean).
 */
#ifndef NPUPROF_REPLAY_DEVCLUSTER_H
#define NPUPROF_REPLAY_DEVCLUSTER_H

#include <jansson.h>
#include <stdio.h>

#define NPF_DEVCLUSTER_SLOW 0.05        /* of a stage's median step */
#define NPF_DEVCLUSTER_LINK 0.80        /* of the median bandwidth of a link type */

/*
 * npf_devcluster() - the cluster's device object: {"ranks": @ranks, "stages": [...],
 * "slow_ranks": [...], "slow_links": [...], "answer": "..."}. @stages is an array of
 * arrays of ranks, or NULL. Return: a new reference, or NULL when out of memory.
 */
json_t *npf_devcluster(json_t *ranks, const json_t *stages);

/* The same for people: the answer, the stages and the slow ranks and links. Return: 0 or -EIO. */
int npf_devcluster_text(FILE *f, const json_t *device);

#endif /* NPUPROF_REPLAY_DEVCLUSTER_H */
