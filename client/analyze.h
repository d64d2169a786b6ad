/* SPDX-License-Identifier: MIT */
/* `npuprofctl analyze`: run the npuprof-replay analyzer in the foreground, as npuprofd does. */
#ifndef NPUPROF_CLIENT_ANALYZE_H
#define NPUPROF_CLIENT_ANALYZE_H

#define NPF_EXIT_NO_ANALYZER 127        /* npuprof-replay could not be found or run */

/*
 * npf_cli_analyze() - parse `analyze PATH [-o OUTDIR] [--json] [--strict]` (@argv[0] is
 * "analyze") and replace this process with npuprof-replay: the one next to this program
 * (through /proc/self/exe), else the installed one.
 * Return: only when it could not run the analyzer: the exit status (0 after --help, 2 for
 * a usage error, NPF_EXIT_NO_ANALYZER).
 */
int npf_cli_analyze(int argc, char **argv);

#endif /* NPUPROF_CLIENT_ANALYZE_H */
