/* SPDX-License-Identifier: MIT */
/*
 * make bench: npuprof-replay's figures on a generated snapshot of millions of events.
 *   bench-replay SNAPSHOT.pkl NPUPROF-REPLAY PYTHON-BASELINE-EVENTS-PER-SECOND
 *                [OTHER-SNAPSHOT.pkl OTHER-TOOL ARG...]
 * Parse, replay, analyses and the writing of the report (report.txt, memory.svg and
 * report.json, to /dev/null) are timed separately in this process (the median of three runs
 * each); the whole program is then run as a user runs it (the median of five runs), and
 * its peak resident memory is set against the file's size. With OTHER-TOOL (MemSnapDump's replay,
 * bench/memsnapdump-replay.py), the whole program and the other tool are each run on
 * OTHER-SNAPSHOT.pkl, the file appended to the tool's arguments, as processes timed alike.
 */
#include "bench/stats.h"
#include "replay/analysis.h"
#include "replay/report.h"
#include "replay/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUNS 3
#define WHOLE_RUNS 5            /* of the whole program, on each snapshot */
#define OTHER_RUNS 3            /* of the other tool, seconds each */

/* @argv run as a process with stdout and stderr to /dev/null: its wall time in @ret_seconds
 * and its peak resident memory in @ret_maxrss (KiB). Return: whether it exited with 0. */
static bool run_timed(char *const *argv, double *ret_seconds, long *ret_maxrss)
{
        uint64_t t0 = npf_bench_now_ns();
        pid_t pid = fork();
        int status;
        struct rusage ru;

        if (pid < 0)
                return false;
        if (pid == 0) {
                int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                        _exit(127);
                execvp(argv[0], argv);
                _exit(127);
        }
        if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return false;
        *ret_seconds = (double) (npf_bench_now_ns() - t0) / 1e9;
        *ret_maxrss = ru.ru_maxrss;
        return true;
}

static void sort_doubles(double *v, int n)
{
        for (int i = 1; i < n; i++)
                for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
                        double x = v[k];
                        v[k] = v[k - 1];
                        v[k - 1] = x;
                }
}

/* npuprof-replay, the whole program, and the other tool on @snapshot, interleaved. */
static int versus(const char *replay, const char *snapshot, int argc, char **argv)
{
        double ours[WHOLE_RUNS], theirs[OTHER_RUNS];
        char out[] = "/tmp/npuprof-bench-versus-XXXXXX", cmd[128], err[NPF_SNAPSHOT_ERR_MAX];
        char *other[argc + 2];
        long rss;
        npf_snapshot_t *s;
        struct stat st;

        if (stat(snapshot, &st) < 0 || npf_snapshot_load(snapshot, NULL, NULL, &s, err) < 0 || !mkdtemp(out))
                return 1;
        size_t events = s->n_events;
        npf_snapshot_free(s);
        memcpy(other, argv, (size_t) argc * sizeof(*other));
        other[argc] = (char *) snapshot;
        other[argc + 1] = NULL;
        char *const mine[] = { (char *) replay, (char *) "-q", (char *) "-o", out, (char *) snapshot, NULL };
        for (int i = 0; i < WHOLE_RUNS; i++) {
                if (i < OTHER_RUNS && !run_timed(other, &theirs[i], &rss)) {
                        fprintf(stderr, "bench-replay: %s failed on %s (run it by hand to see why)\n", argv[0], snapshot);
                        return 1;
                }
                if (!run_timed(mine, &ours[i], &rss)) {
                        fprintf(stderr, "bench-replay: %s failed on %s\n", replay, snapshot);
                        return 1;
                }
        }
        snprintf(cmd, sizeof(cmd), "rm -rf %s", out);
        if (system(cmd) != 0)
                return 1;
        sort_doubles(ours, WHOLE_RUNS);
        sort_doubles(theirs, OTHER_RUNS);
        double a = npf_bench_median(ours, WHOLE_RUNS), b = npf_bench_median(theirs, OTHER_RUNS);
        printf("against MemSnapDump on one file, a generated snapshot of %zu events, %.1f MiB (medians of %d and %d "
               "runs):\n", events, (double) st.st_size / 1048576.0, WHOLE_RUNS, OTHER_RUNS);
        printf("  npuprof-replay, the whole program  %7.3f s\n", a);
        printf("  MemSnapDump, load and replay       %7.3f s\n", b);
        printf("  npuprof-replay takes 1/%.0f of MemSnapDump's time   (goal 1/100)\n", b / a);
        return 0;
}

/* What npuprof-replay writes besides timeline.csv, for one device of one snapshot. */
static int write_report(FILE *f, const char *path, const npf_snapshot_t *s, json_t *device, npf_replay_t *r)
{
        json_t *snap = json_pack("{s:s,s:I,s:s,s:I,s:[O]}", "file", path, "bytes", (json_int_t) s->input_bytes,
                                 "format", s->format, "events", (json_int_t) s->n_events, "devices", device);
        int rc = snap ? npf_report_snapshot_text(f, snap) : -ENOMEM;
        if (rc == 0)
                rc = npf_report_memory_svg(f, path, &r, 1, NULL, 0);
        if (rc == 0)
                rc = json_dumpf(snap, f, JSON_INDENT(1) | JSON_REAL_PRECISION(15)) < 0 ? -EIO : 0;
        json_decref(snap);
        return rc;
}

int main(int argc, char **argv)
{
        double parse[RUNS], replay[RUNS], analyse[RUNS], report[RUNS], timeline[RUNS];
        char err[512];
        size_t events = 0;
        struct stat st;

        if ((argc != 4 && argc < 6) || stat(argv[1], &st) < 0) {
                fprintf(stderr, "usage: bench-replay SNAPSHOT NPUPROF-REPLAY BASELINE-EVENTS-PER-SECOND "
                        "[OTHER-SNAPSHOT OTHER-TOOL ARG...]\n");
                return 2;
        }
        for (int run = 0; run < RUNS; run++) {
                npf_snapshot_t *s;
                npf_replay_t *r;
                uint64_t t0 = npf_bench_now_ns();
                if (npf_snapshot_load(argv[1], NULL, NULL, &s, err) < 0) {
                        fprintf(stderr, "bench-replay: %s\n", err);
                        return 1;
                }
                uint64_t t1 = npf_bench_now_ns();
                if (npf_replay_run(s, 0, false, &r, err) < 0) {
                        fprintf(stderr, "bench-replay: %s\n", err);
                        return 1;
                }
                uint64_t t2 = npf_bench_now_ns();
                npf_analysis_opts_t o = { .top = 20, .max_frames = 32 };
                json_t *j = npf_analysis_device(s, r, &o);
                uint64_t t3 = npf_bench_now_ns();
                FILE *null = fopen("/dev/null", "we");
                if (!null || write_report(null, argv[1], s, j, r) < 0) {
                        fprintf(stderr, "bench-replay: the report could not be written\n");
                        return 1;
                }
                uint64_t t4 = npf_bench_now_ns();
                npf_report_timeline(null, r);
                fclose(null);
                uint64_t t5 = npf_bench_now_ns();
                events = r->n;
                if (r->n_issues) {
                        fprintf(stderr, "bench-replay: %zu inconsistencies in a consistent trace\n", r->n_issues);
                        return 1;
                }
                parse[run] = (double) (t1 - t0) / 1e9;
                replay[run] = (double) (t2 - t1) / 1e9;
                analyse[run] = (double) (t3 - t2) / 1e9;
                report[run] = (double) (t4 - t3) / 1e9;
                timeline[run] = (double) (t5 - t4) / 1e9;
                json_decref(j);
                npf_replay_free(r);
                npf_snapshot_free(s);
        }
        double *figures[] = { parse, replay, analyse, report, timeline };
        for (size_t f = 0; f < sizeof(figures) / sizeof(figures[0]); f++)
                sort_doubles(figures[f], RUNS);
        double p = npf_bench_median(parse, RUNS), rp = npf_bench_median(replay, RUNS);
        double an = npf_bench_median(analyse, RUNS), rep = npf_bench_median(report, RUNS);
        double tl = npf_bench_median(timeline, RUNS), all = p + rp + an + rep;
        double ev = (double) events, baseline = atof(argv[3]);

        /* The program as a user runs it, with its peak RSS: the median of WHOLE_RUNS runs,
         * because one run of a second on a shared machine is as much the machine's figure. */
        char out[] = "/tmp/npuprof-bench-replay-XXXXXX";
        if (!mkdtemp(out))
                return 1;
        char *const whole_argv[] = { argv[2], (char *) "-q", (char *) "-o", out, argv[1], NULL };
        double wholes[WHOLE_RUNS];
        long maxrss = 0;
        for (int i = 0; i < WHOLE_RUNS; i++) {
                long rss;
                if (!run_timed(whole_argv, &wholes[i], &rss)) {
                        fprintf(stderr, "bench-replay: %s failed\n", argv[2]);
                        return 1;
                }
                maxrss = rss > maxrss ? rss : maxrss;
        }
        sort_doubles(wholes, WHOLE_RUNS);
        double whole = npf_bench_median(wholes, WHOLE_RUNS);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", out);
        if (system(cmd) != 0)
                return 1;

        printf("npuprof-replay on a generated snapshot: %.2f M events, %.1f MiB pickle (median of %d runs)\n",
               ev / 1e6, (double) st.st_size / 1048576.0, RUNS);
        printf("  parse                 %7.3f s  %6.2f M events/s\n", p, ev / p / 1e6);
        printf("  replay                %7.3f s  %6.2f M events/s   (goal 10)\n", rp, ev / rp / 1e6);
        printf("  analyses              %7.3f s  %6.2f M events/s\n", an, ev / an / 1e6);
        printf("  report (txt, svg, json) %5.3f s\n", rep);
        printf("  parse+replay+report   %7.3f s  %6.2f M events/s   (goal 2)\n", all, ev / all / 1e6);
        printf("  timeline.csv          %7.3f s  %6.2f M rows/s\n", tl, ev / tl / 1e6);
        printf("  whole program         %7.3f s  %6.2f M events/s   (goal 4; median of %d runs, all four files\n"
               "                                                     written; fastest %.3f s, slowest %.3f s)\n",
               whole, ev / whole / 1e6, WHOLE_RUNS, wholes[0], wholes[WHOLE_RUNS - 1]);
        printf("  peak RSS              %7.1f MiB = %.2f x the pickle   (goal 4)\n", (double) maxrss / 1024.0,
               (double) maxrss * 1024.0 / (double) st.st_size);
        if (baseline > 0)
                printf("  against a plain Python replay of the same file (bench/replay-baseline.py, %.0f events/s):\n"
                       "                          %.0fx for replay, %.0fx for parse+replay+report\n",
                       baseline, ev / rp / baseline, ev / all / baseline);
        if (argc > 4)
                return versus(argv[2], argv[4], argc - 5, argv + 5);
        return 0;
}
