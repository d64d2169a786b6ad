/* SPDX-License-Identifier: MIT */
/*
 * The progress of the ranks and of the job, as `status`, `ranks` and `top` show it: each
 * rank's step time and whether it is stalled (ranks[].step_time_ms, .stalled,
 * .stalled_for_s of the daemon's reply) and the job's step time, slowdown, stalled ranks and
 * message (its "progress" object). A daemon from before these keys, the segment read
 * directly, or a reply with a value of another type, gives nothing here but "unknown",
 * shown as "-": never an error.
 */
#ifndef NPUPROF_CLIENT_PROGRESS_H
#define NPUPROF_CLIENT_PROGRESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#define NPF_CLI_TIME_MAX 32             /* bytes of a formatted step time or duration */
#define NPF_CLI_STALLED_LISTED 16       /* stalled ranks named on the progress line; the rest counted */

/*
 * npf_cli_step_time() - the step time @ms (a JSON number of milliseconds) for a person, in
 * @buf: "0.85ms", "41.2ms", "1.53s", "2m05s"; with @spaced a space before the unit
 * ("41.2 ms"), for prose. "-" when @ms is not a number, is negative or absurdly large.
 * Return: @buf.
 */
const char *npf_cli_step_time(const json_t *ms, bool spaced, char buf[NPF_CLI_TIME_MAX]);

/* npf_cli_duration() - @s seconds (>= 0) as "42s", "5m07s", "3h02m" or "2d04h", in @buf. Return: @buf. */
const char *npf_cli_duration(double s, char buf[NPF_CLI_TIME_MAX]);

/* Return: whether rank object @rank says it is stalled (its "stalled" is true). */
bool npf_cli_rank_stalled(const json_t *rank);

/*
 * npf_cli_print_stalled() - after a stalled rank's row, "  STALLED" and, when the reply says
 * how long, " for 5m02s", on @f; nothing for a rank that is not stalled.
 */
void npf_cli_print_stalled(FILE *f, const json_t *rank);

/*
 * npf_cli_print_text() - @s on @f with each control character (a newline, an escape) as
 * '?': text from a rank or a daemon can neither break a line nor drive the terminal.
 */
void npf_cli_print_text(FILE *f, const char *s);

/*
 * npf_cli_print_progress() - the job's progress on @f, under the rank table:
 *   progress: step time 41.2 ms
 *             slowdown since step 41000: 1.34x the baseline 41.0 ms
 *             stalled: 2 ranks: 17, 18
 *             MESSAGE
 * @progress is the reply's "progress" (any value; NULL when there is none); @ranks its rank
 * objects, where the stalled ranks are found when @progress does not list them. The first
 * line is always printed ("step time -" when unknown); the others only when they say
 * something.
 */
void npf_cli_print_progress(FILE *f, const json_t *progress, const json_t *ranks);

#endif /* NPUPROF_CLIENT_PROGRESS_H */
