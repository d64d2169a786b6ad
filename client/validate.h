/* SPDX-License-Identifier: MIT */
/* `npuprofctl validate`: check profiler_config.json files and show what they mean. */
#ifndef NPUPROF_CLIENT_VALIDATE_H
#define NPUPROF_CLIENT_VALIDATE_H

#include <stdbool.h>

/*
 * Validate each of the @n files in @paths, printing to stdout: the effective settings of a
 * valid file, or every error (compiler style, "FILE:LINE:COLUMN: error: KEY: message"); with
 * @json, one JSON object per file. With @output_root (normal form, or NULL), a file whose
 * directory falls outside it is invalid, and a valid file shows the directory npuprofd would
 * publish. Return: 0 if every file is valid, 1 otherwise.
 */
int npf_cli_validate(char *const *paths, int n, bool json, const char *output_root);

#endif /* NPUPROF_CLIENT_VALIDATE_H */
