/* SPDX-License-Identifier: MIT */
/* npuprofctl's commands that talk to the daemon: status, ranks, windows, config, reload, metrics. */
#ifndef NPUPROF_CLIENT_STATUS_H
#define NPUPROF_CLIENT_STATUS_H

#include <stdbool.h>

#define NPF_EXIT_UNREACHABLE 3

/*
 * npf_cli_status() - show the daemon, the configuration in force (or what is wrong with
 * the file), every rank and the windows. When the daemon cannot be reached, say so, show
 * what segment @shm_name holds (read-only), and return NPF_EXIT_UNREACHABLE.
 * Return: the exit status.
 */
int npf_cli_status(const char *socket_path, const char *shm_name, bool json);

/*
 * `ranks`, `windows`, `config`, `reload` and `metrics`. With @json, one JSON object on
 * stdout, an {"error": ...} one when the command fails.
 * Return: the exit status (1: refused, 3: unreachable).
 */
int npf_cli_command(const char *socket_path, const char *command, bool json);

#endif /* NPUPROF_CLIENT_STATUS_H */
