/* SPDX-License-Identifier: MIT */
#include "client/analyze.h"
#include "lib/proc.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef NPF_ANALYZER_PATH
#define NPF_ANALYZER_PATH "/usr/local/bin/npuprof-replay"
#endif

static void help(void)
{
        printf("Usage: npuprofctl analyze PATH [-o OUTDIR] [--json] [--strict]\n\n"
               "Analyse PATH now, in the foreground, with npuprof-replay: a window directory\n"
               "(rank<R>_start<S>_stop<E>), a memory snapshot (pickle or JSON) or a trace.\n"
               "report.json, report.txt, memory.svg (and timeline.csv for a snapshot) are written\n"
               "into OUTDIR, by default PATH/analysis for a window directory.\n"
               "  -o, --output OUTDIR  where the report goes\n"
               "  --json               also print report.json on stdout\n"
               "  --strict             an inconsistency in the replay is an error\n"
               "The analyzer is the npuprof-replay next to npuprofctl, else %s.\n"
               "Exit: the analyzer's: 0 report written, 1 PATH could not be analysed (the reason is\n"
               "on stderr), 2 usage, 3 out of memory; %d when npuprof-replay cannot be run.\n",
               NPF_ANALYZER_PATH, NPF_EXIT_NO_ANALYZER);
}

int npf_cli_analyze(int argc, char **argv)
{
        static const struct option opts[] = {
                { "output", required_argument, NULL, 'o' },
                { "json", no_argument, NULL, 'j' },
                { "strict", no_argument, NULL, 's' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        const char *outdir = NULL;
        bool json = false, strict = false;
        char path[PATH_MAX];
        char *args[8];
        int c, n = 0;

        argv[0] = (char *) "npuprofctl analyze";       /* getopt's messages name it */
        optind = 1;
        while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
                switch (c) {
                case 'o': outdir = optarg; break;
                case 'j': json = true; break;
                case 's': strict = true; break;
                case 'h':
                        help();
                        return 0;
                default:
                        fputs("see npuprofctl analyze --help\n", stderr);
                        return 2;
                }
        }
        if (optind != argc - 1) {
                fprintf(stderr, optind >= argc ? "npuprofctl analyze: no PATH given\n"
                                               : "npuprofctl analyze: one PATH at a time\n");
                return 2;
        }
        if (outdir && !*outdir) {
                fprintf(stderr, "npuprofctl analyze: -o takes a directory\n");
                return 2;
        }
        if (npf_proc_sibling("npuprof-replay", path, sizeof(path)) < 0)
                snprintf(path, sizeof(path), "%s", NPF_ANALYZER_PATH);
        args[n++] = path;
        if (outdir) {
                args[n++] = (char *) "-o";
                args[n++] = (char *) outdir;
        }
        if (json)
                args[n++] = (char *) "--json";
        if (strict)
                args[n++] = (char *) "--strict";
        /* A PATH that looks like an option is made into one that does not. */
        char dotted[PATH_MAX];
        if (argv[optind][0] == '-') {
                if ((size_t) snprintf(dotted, sizeof(dotted), "./%s", argv[optind]) >= sizeof(dotted)) {
                        fprintf(stderr, "npuprofctl analyze: the path is too long\n");
                        return 2;
                }
                args[n++] = dotted;
        } else {
                args[n++] = argv[optind];
        }
        args[n] = NULL;
        fflush(stdout);
        execv(path, args);
        fprintf(stderr, "npuprofctl analyze: cannot run %s: %s\n", path, strerror(errno));
        return NPF_EXIT_NO_ANALYZER;
}
