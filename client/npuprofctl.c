/* SPDX-License-Identifier: MIT */
/* npuprofctl: how a person talks to npuprof. */
#include "client/validate.h"
#include "npuprof/shm.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#define NPUPROF_VERSION "0.1.0"

static void usage(FILE *f)
{
        fputs("Usage: npuprofctl [--help] [--version] COMMAND [ARGS]\n"
              "\n"
              "Talk to npuprof, the per-node profiling control plane.\n"
              "\n"
              "Commands:\n"
              "  validate [--json] FILE...  check profiler_config.json files (native, torch_npu or\n"
              "                             MindSpore keys) and print the effective window and\n"
              "                             settings, or every error with line, column and key\n"
              "\n"
              "Exit status: 0 success, 1 an invalid file or a failed command, 2 a usage error.\n"
              "See npuprofctl(1) and profiler_config.json(5).\n",
              f);
}

static int cmd_validate(int argc, char **argv)
{
        static const struct option opts[] = {
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        bool json = false;
        int c;

        argv[0] = (char *) "npuprofctl validate";      /* getopt's messages name it */
        optind = 1;
        while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
                switch (c) {
                case 'j':
                        json = true;
                        break;
                case 'h':
                        printf("Usage: npuprofctl validate [--json] FILE...\n\n"
                               "Check each FILE. A valid one prints its dialect, window and settings (exit 0);\n"
                               "an invalid one prints every error as FILE:LINE:COLUMN: error: KEY: message\n"
                               "(exit 1). --json prints one object per file: valid, dialect, window\n"
                               "(start_step, stop_step, warmup), errors and warnings (message, line, column,\n"
                               "key), and the effective config.\n");
                        return 0;
                default:
                        return 2;
                }
        }
        if (optind >= argc) {
                fprintf(stderr, "npuprofctl validate: no FILE given\n");
                return 2;
        }
        return npf_cli_validate(argv + optind, argc - optind, json);
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
                usage(stdout);
                return 0;
        }
        if (strcmp(argv[1], "--version") == 0) {
                printf("npuprofctl %s (shm ABI %u)\n", NPUPROF_VERSION, NPF_SHM_ABI_VERSION);
                return 0;
        }
        if (strcmp(argv[1], "validate") == 0)
                return cmd_validate(argc - 1, argv + 1);
        fprintf(stderr, "npuprofctl: unknown command '%s' (see npuprofctl --help)\n", argv[1]);
        return 2;
}
