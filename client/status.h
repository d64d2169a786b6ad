/* SPDX-License-Identifier: MIT */
/* npuprofctl's commands that talk to the daemon: status, ranks, windows, config, reload, metrics. */
#ifndef NPUPROF_CLIENT_STATUS_H
#define NPUPROF_CLIENT_STATUS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#define NPF_EXIT_UNREACHABLE 3

/*
 * npf_cli_status() - show the daemon, the configuration in force (or what is wrong with
 * the file), every rank and the windows. When the daemon cannot be reached, say so, show
 * what segment @shm_name holds (read-only), and return NPF_EXIT_UNREACHABLE.
 * Return: the exit status.
 */
int npf_cli_status(const char *socket_path, const char *shm_name, bool json);

/*
 * npf_cli_print_window() - the window of a configuration (config.window of the reply) in
 * words on @f, as the window: line of status has it: "steps 1000..1004", "none
 * (profiling off)", "from the next step, 5 steps", "from step 10 for 500 ms".
 */
void npf_cli_print_window(FILE *f, const json_t *w);

/*
 * npf_cli_segment_view() - what segment @shm_name holds, read directly and read-only, for
 * when the daemon does not answer: {name, config, ranks (an object per rank)}, or
 * {name, error, fix} when it cannot be opened (fix, what a person can do, only where there
 * is something to say).
 * Return: a new reference (NULL if out of memory).
 */
json_t *npf_cli_segment_view(const char *shm_name);

/*
 * `ranks`, `windows`, `config`, `reload` and `metrics`. With @json, one JSON object on
 * stdout, an {"error": ...} one when the command fails.
 * Return: the exit status (1: refused, 3: unreachable).
 */
int npf_cli_command(const char *socket_path, const char *command, bool json);

#endif /* NPUPROF_CLIENT_STATUS_H */
