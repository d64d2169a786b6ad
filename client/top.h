/* SPDX-License-Identifier: MIT */
/*
 * `npuprofctl top`: the node's ranks, refreshed like top(1). Each refresh asks the daemon
 * for its status and shows a header (the daemon, the configuration in force, the ranks'
 * steps, the job's progress: client/progress.h) and a row per rank: RANK, PID, STEP,
 * STEP TIME, LAG (steps behind the fastest rank), STATE, the ranks furthest behind first.
 * On a terminal each refresh is drawn over the last (plain ANSI sequences, no curses), as
 * many rows as the terminal has lines; anywhere else every refresh is printed whole, one
 * after the other, with a blank line between two. A daemon that does not answer is said
 * so, what the segment holds is shown, and the next refresh tries again.
 */
#ifndef NPUPROF_CLIENT_TOP_H
#define NPUPROF_CLIENT_TOP_H

#define NPF_TOP_INTERVAL_MIN 0.1        /* seconds between two refreshes, at the least */
#define NPF_TOP_INTERVAL_MAX 86400.0    /* and at the most */

/*
 * npf_cli_top() - `top [--interval SECONDS] [--iterations N]` (@argv[0] "top"), asking the
 * daemon on @socket_path, reading segment @shm_name (a checked name) when it does not answer.
 * Runs until N refreshes were shown, or until SIGINT, SIGTERM or SIGHUP.
 * Return: the exit status, that of the last refresh shown: 0 the daemon answered, 1 it
 * refused, 3 it could not be reached; 1 when a refresh could not be written (stdout a
 * closed pipe); 2 for a usage error; 128 + the signal when one ended it before its first
 * refresh was shown.
 */
int npf_cli_top(int argc, char **argv, const char *socket_path, const char *shm_name);

#endif /* NPUPROF_CLIENT_TOP_H */
