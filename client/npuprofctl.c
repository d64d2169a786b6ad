/* SPDX-License-Identifier: MIT */
/* npuprofctl: how a person talks to npuprof. */
#include "client/status.h"
#include "client/validate.h"
#include "npuprof/protocol.h"
#include "npuprof/shm.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void usage(FILE *f)
{
        fputs("Usage: npuprofctl [--socket PATH] [--shm-name NAME] COMMAND [ARGS]\n"
              "\n"
              "Talk to npuprof, the per-node profiling control plane.\n"
              "\n"
              "Commands:\n"
              "  status [--json]            the daemon, the configuration in force (or what is wrong\n"
              "                             with the file), every rank and window; when the daemon\n"
              "                             cannot be reached, what the segment holds (exit 3)\n"
              "  ranks [--json]             the ranks attached to the segment\n"
              "  config                     the effective configuration in force, as JSON\n"
              "  reload                     make the daemon read its file now (root or its user)\n"
              "  metrics                    Prometheus text exposition of the daemon's counters\n"
              "  validate [--json] FILE...  check profiler_config.json files (native, torch_npu or\n"
              "                             MindSpore keys) and print the effective window and\n"
              "                             settings, or every error with line, column and key\n"
              "\n"
              "Options:\n"
              "  --socket PATH     the daemon's control socket (default $NPUPROF_SOCKET, else\n"
              "                    " NPF_PROTO_SOCKET_DEFAULT ")\n"
              "  --shm-name NAME   the node's segment (default $NPUPROF_SHM, else " NPF_SHM_NAME_DEFAULT ")\n"
              "  --help, --version\n"
              "\n"
              "Exit status: 0 success, 1 an invalid file or a refused command, 2 a usage error,\n"
              "3 the daemon could not be reached. See npuprofctl(1) and profiler_config.json(5).\n",
              f);
}

/* Parse a command's only option, --json. Return: 0, or 2 for a usage error. */
static int json_flag(int argc, char **argv, const char *name, bool *ret_json)
{
        static const struct option opts[] = { { "json", no_argument, NULL, 'j' }, { 0 } };
        char prog[64];
        int c;

        snprintf(prog, sizeof(prog), "npuprofctl %s", name);
        argv[0] = prog;         /* getopt's messages name the command */
        optind = 1;
        *ret_json = false;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (c != 'j')
                        return 2;
                *ret_json = true;
        }
        if (optind < argc) {
                fprintf(stderr, "npuprofctl %s: unexpected argument '%s'\n", name, argv[optind]);
                return 2;
        }
        return 0;
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
        const char *env_socket = getenv(NPF_ENV_SOCKET), *env_shm = getenv(NPF_ENV_SHM);
        const char *socket_path = env_socket && *env_socket ? env_socket : NPF_PROTO_SOCKET_DEFAULT;
        const char *shm_name = env_shm && *env_shm ? env_shm : NPF_SHM_NAME_DEFAULT;
        char err[NPF_SHM_ERR_MAX];
        bool json;
        int i = 1;

        for (; i < argc && argv[i][0] == '-'; i++) {
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        usage(stdout);
                        return 0;
                } else if (strcmp(argv[i], "--version") == 0) {
                        printf("npuprofctl %s (shm ABI %u, protocol %d)\n", NPUPROF_VERSION, NPF_SHM_ABI_VERSION,
                               NPF_PROTO_VERSION);
                        return 0;
                } else if ((strcmp(argv[i], "--socket") == 0 || strcmp(argv[i], "--shm-name") == 0) && i + 1 < argc) {
                        *(argv[i][2] == 's' && argv[i][3] == 'o' ? &socket_path : &shm_name) = argv[i + 1];
                        i++;
                } else {
                        fprintf(stderr, "npuprofctl: unknown option '%s' (see npuprofctl --help)\n", argv[i]);
                        return 2;
                }
        }
        if (i >= argc) {
                usage(stderr);
                return 2;
        }
        if (npf_shm_name_check(shm_name, err) < 0) {
                fprintf(stderr, "npuprofctl: %s\n", err);
                return 2;
        }
        const char *cmd = argv[i];
        int cargc = argc - i;
        char **cargv = argv + i;

        if (strcmp(cmd, "help") == 0) {
                usage(stdout);
                return 0;
        }
        if (strcmp(cmd, "validate") == 0)
                return cmd_validate(cargc, cargv);
        if (strcmp(cmd, "status") == 0 || strcmp(cmd, "ranks") == 0 || strcmp(cmd, "config") == 0 ||
            strcmp(cmd, "reload") == 0 || strcmp(cmd, "metrics") == 0) {
                if (json_flag(cargc, cargv, cmd, &json) != 0)
                        return 2;
                if (strcmp(cmd, "status") == 0)
                        return npf_cli_status(socket_path, shm_name, json);
                return npf_cli_command(socket_path, cmd, json);
        }
        fprintf(stderr, "npuprofctl: unknown command '%s' (see npuprofctl --help)\n", cmd);
        return 2;
}
