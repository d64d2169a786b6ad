/* SPDX-License-Identifier: MIT */
/* npuprofctl: how a person talks to npuprof. */
#include "client/analyze.h"
#include "client/edit.h"
#include "client/fleet.h"
#include "client/status.h"
#include "client/top.h"
#include "client/validate.h"
#include "lib/nearword.h"
#include "lib/outroot.h"
#include "npuprof/protocol.h"
#include "npuprof/shm.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>


static void usage(FILE *f)
{
        fputs("Usage: npuprofctl [--socket PATH] [--shm-name NAME] COMMAND [ARGS]\n"
              "\n"
              "Examples:\n"
              "  npuprofctl status                     the daemon, the file in force, the ranks and windows\n"
              "  npuprofctl start --at 1000 --steps 5  open a window on the job's ranks: steps 1000 to 1004\n"
              "  npuprofctl windows                    the windows that ended, where their data and reports are\n"
              "  npuprofctl fleet                      whether every node has the newest file (npuprofd --fleet-dir)\n"
              "\n"
              "Talk to npuprof, the per-node profiling control plane.\n"
              "\n"
              "Commands:\n"
              "  status [--json]            the daemon, the configuration in force (or what is wrong\n"
              "                             with the file), every rank and window, the analyses\n"
              "                             queued, running, done and failed; when the daemon\n"
              "                             cannot be reached, what the segment holds (exit 3)\n"
              "  ranks [--json]             the ranks attached to the segment, with their step times\n"
              "  top [--interval S] [--iterations N]\n"
              "                             the node's ranks refreshed every S seconds (default 1),\n"
              "                             like top(1): step, step time, lag behind the fastest\n"
              "                             rank, state; the job's step time, slowdown and stalls\n"
              "  windows [--json]           every window the daemon saw end, newest first: rank,\n"
              "                             generation, steps, outcome, analysis, directory,\n"
              "                             message, and the analysis's report or why it failed\n"
              "  start --at N --steps K [--warmup W] [--level L] [--ranks LIST] [--backend B]\n"
              "        [--config PATH] [--json]\n"
              "                             open a window of K steps at step N: edit the watched\n"
              "                             profiler_config.json in its own dialect, validated, atomically\n"
              "  stop [--config PATH] [--json]\n"
              "                             turn profiling off in that file\n"
              "  config                     the effective configuration in force, as JSON\n"
              "  reload                     make the daemon read its file now (root or its user);\n"
              "                             exit 1 if the file is invalid or missing\n"
              "  metrics                    Prometheus text exposition of the daemon's counters\n"
              "  validate [--json] [--output-root DIR] FILE...\n"
              "                             check profiler_config.json files (native, torch_npu or\n"
              "                             MindSpore keys) and print the effective window and\n"
              "                             settings, or every error with line, column and key\n"
              "  fleet [--fleet-dir DIR] [--json] [--wait [--timeout S]]\n"
              "                             every node's record in the fleet directory: who holds\n"
              "                             the newest version of the file, who lags, is stale,\n"
              "                             stopped or finds it invalid (exit 1 when any does)\n"
              "  analyze PATH [-o OUTDIR] [--json] [--strict]\n"
              "                             analyse a window directory, a memory snapshot or a trace\n"
              "                             now with npuprof-replay (report.json, report.txt,\n"
              "                             memory.svg); the exit status is the analyzer's\n"
              "\n"
              "Options:\n"
              "  --socket PATH     the daemon's control socket (default $NPUPROF_SOCKET, else\n"
              "                    " NPF_PROTO_SOCKET_DEFAULT ")\n"
              "  --shm-name NAME   the node's segment (default $NPUPROF_SHM, else " NPF_SHM_NAME_DEFAULT ")\n"
              "  --help, --version  (every command takes --help; all but top take --json)\n"
              "\n"
              "Exit status: 0 success, 1 an invalid file or a refused command, 2 a usage error,\n"
              "3 the daemon could not be reached; analyze exits with the analyzer's status.\n"
              "See npuprofctl(1) and profiler_config.json(5).\n",
              f);
}

/* What each daemon command does, for its --help. */
static const struct {
        const char *name, *usage, *what;
} commands[] = {
        { "status", "status [--json]", "the daemon, the configuration in force or what is wrong with the file,\n"
                                       "every rank, the windows and their analyses; exit 3 when the daemon\n"
                                       "cannot be reached" },
        { "ranks", "ranks [--json]", "the ranks attached to the node's segment, each with its step time, and\n"
                                     "the job's progress: its step time, a slowdown, the stalled ranks" },
        { "windows", "windows [--json]", "every window the daemon recorded, with its directory and outcome, and\n"
                                         "its analysis: queued, running, done (with the report's path) or failed\n"
                                         "(with the reason)" },
        { "config", "config [--json]", "the configuration in force, as JSON" },
        { "reload", "reload [--json]", "make the daemon read its file now (root or the daemon's user);\n"
                                       "exit 1 if the file is invalid" },
        { "metrics", "metrics [--json]", "the daemon's counters in Prometheus text format" },
};

/*
 * Parse a daemon command's options: --json and --help.
 * Return: 0, 1 when help was printed (exit 0), or 2 for a usage error.
 */
static int json_flag(int argc, char **argv, const char *name, bool *ret_json)
{
        static const struct option opts[] = { { "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
                                              { 0 } };
        char prog[64];
        int c;

        snprintf(prog, sizeof(prog), "npuprofctl %s", name);
        argv[0] = prog;         /* getopt's messages name the command */
        optind = 1;
        *ret_json = false;
        while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
                if (c == 'h') {
                        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                                if (strcmp(commands[i].name, name) == 0)
                                        printf("Usage: npuprofctl [--socket PATH] [--shm-name NAME] %s\n\n%s.\n",
                                               commands[i].usage, commands[i].what);
                        return 1;
                }
                if (c != 'j') {
                        fprintf(stderr, "see npuprofctl %s --help\n", name);
                        return 2;
                }
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
                { "output-root", required_argument, NULL, 'o' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        char root[NPF_SHM_PATH_MAX];
        const char *output_root = NULL;
        bool json = false;
        int c;

        argv[0] = (char *) "npuprofctl validate";      /* getopt's messages name it */
        optind = 1;
        while ((c = getopt_long(argc, argv, "jo:h", opts, NULL)) != -1) {
                switch (c) {
                case 'j':
                        json = true;
                        break;
                case 'o':
                        if (npf_outroot_normalize(optarg, root, sizeof(root)) < 0) {
                                fprintf(stderr, "npuprofctl validate: --output-root takes an absolute path without "
                                        "\"..\", not '%.64s'\n", optarg);
                                return 2;
                        }
                        output_root = root;
                        break;
                case 'h':
                        printf("Usage: npuprofctl validate [--json] [--output-root DIR] FILE...\n\n"
                               "Check each FILE. A valid one prints its dialect, window and settings (exit 0);\n"
                               "an invalid one prints every error as FILE:LINE:COLUMN: error: KEY: message\n"
                               "(exit 1). --json prints one object per file: valid, dialect, window\n"
                               "(start_step, stop_step, warmup), errors and warnings (message, line, column,\n"
                               "key), and the effective config. --output-root DIR also checks, as npuprofd\n"
                               "--output-root DIR does, that the file's directory stays under DIR.\n");
                        return 0;
                default:
                        fputs("see npuprofctl validate --help\n", stderr);
                        return 2;
                }
        }
        if (optind >= argc) {
                fprintf(stderr, "npuprofctl validate: no FILE given (see npuprofctl validate --help)\n");
                return 2;
        }
        return npf_cli_validate(argv + optind, argc - optind, json, output_root);
}

/* Parse a step or a count for @opt. Return: 0, or 2 (a usage error) with the reason printed. */
static int parse_int(const char *cmd, const char *opt, const char *s, int64_t *ret)
{
        char *end;

        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || *end) {
                fprintf(stderr, "npuprofctl %s: %s takes an integer, not '%s'\n", cmd, opt, s);
                return 2;
        }
        *ret = v;
        return 0;
}

static void edit_help(bool start)
{
        if (start)
                printf("Usage: npuprofctl start --at N --steps K [--warmup W] [--level L] [--ranks LIST]\n"
                       "                        [--backend B] [--config PATH] [--json]\n\n"
                       "Open a window of K steps at step N (N may be 'next'): set the keys of the file's\n"
                       "dialect (native: start_step, steps, warmup, level, ranks, backend; torch_npu:\n"
                       "start_step, active, warmup, experimental_config.profiler_level, is_rank and\n"
                       "rank_list; MindSpore: start_step, stop_step = N+K-1, profiler_level), keep every\n"
                       "other key, drop duration_ms, validate, and replace the file atomically. The file\n"
                       "is the one the daemon watches, or PATH. L: Level0, Level1, Level2, Level_none.\n"
                       "LIST: all, or ranks and ranges like 0-7,16. B: acl, host or auto.\n"
                       "Exit: 0 written, 1 invalid or refused (the file untouched), 2 usage, 3 the daemon\n"
                       "could not be reached for the path.\n");
        else
                printf("Usage: npuprofctl stop [--config PATH] [--json]\n\n"
                       "Turn profiling off in the file the daemon watches (or PATH), in its dialect:\n"
                       "native: remove start_step; torch_npu: start_step 0; MindSpore: start_step and\n"
                       "stop_step -1. Every other key is kept; the file is replaced atomically.\n");
}

/* `start` and `stop`. Return: the exit status. */
static int cmd_edit(int argc, char **argv, const char *socket_path)
{
        enum { OPT_AT = 256, OPT_STEPS, OPT_WARMUP, OPT_LEVEL, OPT_RANKS, OPT_BACKEND, OPT_CONFIG, OPT_JSON, OPT_HELP };
        static const struct option start_opts[] = {
                { "at", required_argument, NULL, OPT_AT },
                { "steps", required_argument, NULL, OPT_STEPS },
                { "warmup", required_argument, NULL, OPT_WARMUP },
                { "level", required_argument, NULL, OPT_LEVEL },
                { "ranks", required_argument, NULL, OPT_RANKS },
                { "backend", required_argument, NULL, OPT_BACKEND },
                { "config", required_argument, NULL, OPT_CONFIG },
                { "json", no_argument, NULL, OPT_JSON },
                { "help", no_argument, NULL, OPT_HELP },
                { 0 },
        };
        static const struct option stop_opts[] = {
                { "config", required_argument, NULL, OPT_CONFIG },
                { "json", no_argument, NULL, OPT_JSON },
                { "help", no_argument, NULL, OPT_HELP },
                { 0 },
        };
        bool start = strcmp(argv[0], "start") == 0, json = false, have_at = false, have_steps = false;
        const char *cmd = start ? "start" : "stop", *config = NULL;
        npf_conf_window_t a = { 0 };
        int c;

        argv[0] = (char *) (start ? "npuprofctl start" : "npuprofctl stop");   /* getopt's messages name it */
        optind = 1;
        while ((c = getopt_long(argc, argv, "", start ? start_opts : stop_opts, NULL)) != -1) {
                switch (c) {
                case OPT_AT:
                        have_at = true;
                        if (strcasecmp(optarg, "next") == 0)
                                a.at_next = true;
                        else if (parse_int(cmd, "--at", optarg, &a.at) != 0)
                                return 2;
                        break;
                case OPT_STEPS:
                        have_steps = true;
                        if (parse_int(cmd, "--steps", optarg, &a.steps) != 0)
                                return 2;
                        break;
                case OPT_WARMUP:
                        a.has_warmup = true;
                        if (parse_int(cmd, "--warmup", optarg, &a.warmup) != 0)
                                return 2;
                        break;
                case OPT_LEVEL: a.level = optarg; break;
                case OPT_RANKS: a.ranks = optarg; break;
                case OPT_BACKEND: a.backend = optarg; break;
                case OPT_CONFIG: config = optarg; break;
                case OPT_JSON: json = true; break;
                case OPT_HELP:
                        edit_help(start);
                        return 0;
                default:
                        fprintf(stderr, "see npuprofctl %s --help\n", cmd);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "npuprofctl %s: unexpected argument '%s'\n", cmd, argv[optind]);
                return 2;
        }
        if (start && (!have_at || !have_steps)) {
                fprintf(stderr, "npuprofctl start: --at N and --steps K are required (see npuprofctl start --help)\n");
                return 2;
        }
        if (config && !*config) {
                fprintf(stderr, "npuprofctl %s: --config takes a path\n", cmd);
                return 2;
        }
        return npf_cli_edit(socket_path, config, start ? &a : NULL, json);
}

/* Every command, for the nearest one to a word that is none. */
static const char *const command_names[] = {
        "status", "ranks", "top", "windows", "start", "stop", "config", "reload", "metrics", "validate", "fleet",
        "analyze", "help",
};

/* The command @word was likely meant to be, or NULL. */
static const char *nearest_command(const char *word)
{
        return npf_near_word(word, command_names, sizeof(command_names) / sizeof(command_names[0]));
}

/* After a usage error of @cmd: a global option among its arguments belongs before it. */
static void misplaced_options(const char *cmd, int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                const char *opt = strncmp(argv[i], "--socket", 8) == 0     ? "--socket PATH"
                                  : strncmp(argv[i], "--shm-name", 10) == 0 ? "--shm-name NAME"
                                                                            : NULL;
                if (opt) {
                        fprintf(stderr, "npuprofctl: %s goes before the command: npuprofctl %s %s ...\n", opt, opt,
                                cmd);
                        return;
                }
        }
}

/* Run the command @cmd, its arguments @cargv. Return: the exit status. */
static int run_command(const char *cmd, int cargc, char **cargv, const char *socket_path, const char *shm_name)
{
        char err[NPF_SHM_ERR_MAX];
        bool json;

        if (strcmp(cmd, "help") == 0) {
                usage(stdout);
                return 0;
        }
        if (strcmp(cmd, "validate") == 0)
                return cmd_validate(cargc, cargv);
        if (strcmp(cmd, "analyze") == 0)
                return npf_cli_analyze(cargc, cargv);
        /* Every other command talks to the daemon, and status reads the segment too. */
        if (strlen(socket_path) >= sizeof(((struct sockaddr_un *) 0)->sun_path)) {
                fprintf(stderr, "npuprofctl: the socket path %s is %zu bytes; a Unix socket path takes at most %zu\n",
                        socket_path, strlen(socket_path), sizeof(((struct sockaddr_un *) 0)->sun_path) - 1);
                return 2;
        }
        if (strcmp(cmd, "start") == 0 || strcmp(cmd, "stop") == 0)
                return cmd_edit(cargc, cargv, socket_path);
        if (strcmp(cmd, "fleet") == 0)
                return npf_cli_fleet(cargc, cargv, socket_path);
        if (strcmp(cmd, "top") == 0) {
                if (npf_shm_name_check(shm_name, err) < 0) {
                        fprintf(stderr, "npuprofctl: %s\n", err);
                        return 2;
                }
                return npf_cli_top(cargc, cargv, socket_path, shm_name);
        }
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
                if (strcmp(cmd, commands[i].name) != 0)
                        continue;
                int r = json_flag(cargc, cargv, cmd, &json);
                if (r != 0)
                        return r == 1 ? 0 : 2;
                if (strcmp(cmd, "status") != 0)
                        return npf_cli_command(socket_path, cmd, json);
                if (npf_shm_name_check(shm_name, err) < 0) {
                        fprintf(stderr, "npuprofctl: %s\n", err);
                        return 2;
                }
                return npf_cli_status(socket_path, shm_name, json);
        }
        const char *near = nearest_command(cmd);
        if (near)
                fprintf(stderr, "npuprofctl: unknown command '%s'; did you mean '%s'? (see npuprofctl --help)\n", cmd,
                        near);
        else
                fprintf(stderr, "npuprofctl: unknown command '%s' (see npuprofctl --help)\n", cmd);
        return 2;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 'S' },
                { "shm-name", required_argument, NULL, 'N' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { 0 },
        };
        const char *env_socket = getenv(NPF_ENV_SOCKET), *env_shm = getenv(NPF_ENV_SHM);
        const char *socket_path = env_socket && *env_socket ? env_socket : NPF_PROTO_SOCKET_DEFAULT;
        const char *shm_name = env_shm && *env_shm ? env_shm : NPF_SHM_NAME_DEFAULT;
        int c;

        argv[0] = (char *) "npuprofctl";
        /* "+": options end at the command; the command parses its own. */
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case 'S': socket_path = optarg; break;
                case 'N': shm_name = optarg; break;
                case 'h':
                        usage(stdout);
                        return 0;
                case 'V':
                        printf("npuprofctl %s (shm ABI %u, protocol %d)\n", NPUPROF_VERSION, NPF_SHM_ABI_VERSION,
                               NPF_PROTO_VERSION);
                        return 0;
                default:
                        fprintf(stderr, "see npuprofctl --help\n");
                        return 2;
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return 2;
        }
        /* Taken now: the command's own getopt moves optind. */
        const char *cmd = argv[optind];
        int cargc = argc - optind;
        char **cargv = argv + optind;
        int status = run_command(cmd, cargc, cargv, socket_path, shm_name);

        if (status == 2)
                misplaced_options(cmd, cargc, cargv);
        return status;
}
