/* SPDX-License-Identifier: MIT */
#include "daemon/daemon.h"
#include "daemon/analyze.h"
#include "daemon/autowin.h"
#include "daemon/fleet.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/keptfile.h"
#include "daemon/kineto.h"
#include "daemon/notify.h"
#include "daemon/progress.h"
#include "lib/steptext.h"
#include "daemon/server.h"
#include "daemon/sweep.h"
#include "daemon/watch.h"
#include "daemon/windows.h"
#include "npuprof/protocol.h"
#include "lib/clock.h"
#include "conf/view.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RELOAD_WAITERS_MAX 32
#define NPF_IDLE_SWEEP_MS 10000u        /* with no rank and no watchdog: look for new ranks */
#define NPF_VIEW_KEEP_MS  30000u        /* the rank table kept as JSON this long after the last request for it */
#define PROGRESS_LINES_MAX 8u           /* ranks' progress stalls logged one by one per sweep; the rest counted */

typedef struct daemon {
        npf_daemon_options_t opt;
        uv_loop_t *loop;
        npf_shm_t *shm;
        npf_watch_t *watch;
        npf_server_t *server;
        npf_analyze_t *analyze;         /* NULL once stopping */
        npf_fwshm_t *fwshm;            /* the frameworks' segments; NULL without --legacy, and once stopping */
        npf_kineto_t *kineto;           /* libkineto's endpoint; NULL when off or not to be had, and once stopping */
        char kineto_off[256];           /* why there is none */
        npf_kept_file_t *metrics;       /* NULL without --metrics-file, and once stopping */
        npf_fleet_t *fleet;             /* the node's fleet record; NULL without --fleet-dir, and once stopping */
        char *state_dir;                /* $STATE_DIRECTORY's first, from systemd; may be NULL */
        npf_notify_t notify;
        npf_sweep_t sweep;
        npf_progress_t *progress;       /* the ranks' progress, fed by the sweep */
        unsigned progress_lines, progress_unsaid;       /* rank lines logged in this sweep, and left out */
        char *metrics_steady;           /* the steady part of the metrics text last written */
        npf_rank_view_t *rank_view;     /* the rank table as `status` and `ranks` show it */
        uint64_t view_used_ns;          /* CLOCK_MONOTONIC of its last use; 0: empty */
        uv_timer_t sweep_timer;
        uv_signal_t sighup, sigterm, sigint;
        uint64_t started_ns;            /* CLOCK_MONOTONIC */
        uint64_t started_real_ns;       /* CLOCK_REALTIME */
        uint64_t published_ns;          /* CLOCK_REALTIME of the generation in force; 0: none */
        uint64_t reloads;
        npf_shm_status_t status;        /* what was last published of the file */
        uint64_t read_hash, read_mtime_ns;      /* of the file as last read (watch) */
        uint64_t in_force_hash;         /* of the bytes whose configuration is in force */
        uint64_t invalid_hash;          /* the broken version last counted */
        npf_log_once_t file_problem;    /* the file's problem last logged */
        bool ready;
        bool reloading;
        npf_request_t *reload_waiters[RELOAD_WAITERS_MAX];
        unsigned n_reload_waiters;
        /* Requests that came before the file was first read (socket activation): answered after. */
        struct early { npf_request_t *req; npf_command_t command; npf_peer_t peer; } early[RELOAD_WAITERS_MAX];
        unsigned n_early;
        bool stopping;
        npf_windows_t windows;          /* where windows' output is, and what becomes of them */
        npf_autowin_t *autowin;         /* windows that open themselves, stacks of stalled ranks */
        npf_shm_config_t *person;       /* the file's configuration last published; NULL: none this run */
        bool slowdown_began;            /* the last sweep found a slowdown: slowdown_event says it */
        npf_progress_event_t slowdown_event;
} daemon_t;

static uint64_t generation_in_force(const daemon_t *d)
{
        return npf_shm_generation(npf_shm_ctl(d->shm));
}

static void update_notify_status(daemon_t *d)
{
        uint32_t open = d->sweep.by_state[NPF_WINDOW_COLLECTING] + d->sweep.by_state[NPF_WINDOW_FLUSHING] +
                        d->sweep.by_state[NPF_SWEEP_STALLED];
        const char *file = d->status.file_state == NPF_FILE_VALID     ? "config valid"
                           : d->status.file_state == NPF_FILE_INVALID ? "config INVALID, last good in force"
                           : d->status.file_state == NPF_FILE_MISSING ? "config MISSING, last good in force"
                                                                      : "config not read yet";

        uint32_t stalled = d->progress ? npf_progress_stalled(d->progress) : 0;
        char progress[96] = "";

        /* What the on-call engineer looks for first in `systemctl status`: ranks stuck, a job slowed. */
        if (stalled)
                snprintf(progress, sizeof(progress), ", %" PRIu32 " rank%s in a progress stall", stalled,
                         stalled == 1 ? "" : "s");
        if (d->progress && npf_progress_slowing(d->progress))
                snprintf(progress + strlen(progress), sizeof(progress) - strlen(progress), ", a slowdown");
        npf_notify_status(&d->notify, "generation %" PRIu64 ", %s, %u rank%s attached, %u window%s open%s",
                          generation_in_force(d), file, d->sweep.attached, d->sweep.attached == 1 ? "" : "s", open,
                          open == 1 ? "" : "s", progress);
}

/* The window of @c in words, for the log. */
static void describe_window(const npf_shm_config_t *c, char *buf, size_t len)
{
        const npf_shm_args_t *a = &c->args;

        if (!a->enabled)
                snprintf(buf, len, "no window (profiling off)");
        else if (a->duration_ms)
                snprintf(buf, len, "window from step %s%" PRId64 " for %" PRIu64 " ms",
                         a->start_step == NPF_STEP_NEXT ? "next" : "", a->start_step == NPF_STEP_NEXT ? 0 : a->start_step,
                         a->duration_ms);
        else if (a->start_step == NPF_STEP_NEXT)
                snprintf(buf, len, "window of %" PRIu64 " steps from the next step", a->step_count);
        else
                snprintf(buf, len, "window steps %" PRId64 "..%" PRId64, a->start_step, a->stop_step);
}

/* Note when the configuration in force was published, as the segment says. */
static void note_published(daemon_t *d)
{
        npf_shm_config_t *c = malloc(sizeof(*c));

        if (c && npf_shm_read_config(npf_shm_ctl(d->shm), c) >= 0 && c->args.generation) {
                d->published_ns = c->args.published_ns;
                if (d->kineto)
                        npf_kineto_publish(d->kineto, c);
        }
        free(c);
}

/*
 * Return: true if @c differs from the file's configuration last published (generations
 * aside): the one this daemon published, or at its start the segment's. An automatic
 * window in force is not the file's: the file read again unchanged does not replace it.
 */
static bool differs_from_published(daemon_t *d, const npf_shm_config_t *c)
{
        npf_shm_config_t *cur = malloc(sizeof(*cur)), *cand = malloc(sizeof(*cand));
        bool differs = true;

        if (cur && d->person)
                memcpy(cur, d->person, sizeof(*cur));
        if (cur && cand && (d->person || npf_shm_read_config(npf_shm_ctl(d->shm), cur) >= 0) &&
            cur->args.generation > 0) {
                memcpy(cand, c, sizeof(*cand));
                cur->args.generation = cand->args.generation = 0;
                cur->args.checksum = cand->args.checksum = 0;
                cur->args.published_ns = cand->args.published_ns = 0;
                differs = memcmp(cur, cand, sizeof(*cur)) != 0;
        }
        free(cur);
        free(cand);
        return differs;
}

static void finish_reload(daemon_t *d)
{
        json_t *result = json_pack("{s:I, s:b, s:s}", "generation", (json_int_t) generation_in_force(d), "valid",
                                   d->status.file_state == NPF_FILE_VALID, "state",
                                   d->status.file_state == NPF_FILE_VALID     ? "valid"
                                   : d->status.file_state == NPF_FILE_MISSING ? "missing"
                                                                              : "invalid");

        for (unsigned i = 0; i < d->n_reload_waiters; i++)
                npf_server_reply(d->reload_waiters[i], json_incref(result));
        json_decref(result);
        d->n_reload_waiters = 0;
        if (d->reloading) {
                d->reloading = false;
                npf_notify_ready(&d->notify);
        }
}

static void on_request(npf_request_t *req, npf_command_t command, json_t *request, const npf_peer_t *peer,
                       void *data);

static char *metrics_text(daemon_t *d, size_t *ret_steady);

/*
 * The metrics file is written when the steady part of its text changed: what moves at
 * every sweep (ranks' steps, the sweeps counted) waits for the file's interval.
 */
static void metrics_update(daemon_t *d)
{
        size_t steady;
        char *text;

        if (!d->metrics)
                return;
        text = metrics_text(d, &steady);
        if (!text)
                return;
        if (d->metrics_steady && strlen(d->metrics_steady) == steady &&
            memcmp(d->metrics_steady, text, steady) == 0) {
                free(text);
                return;
        }
        free(d->metrics_steady);
        d->metrics_steady = strndup(text, steady);
        npf_kept_file_put(d->metrics, text);
}

/* What the metrics file and the fleet record hold may have changed: each writes if it did. */
static void note_change(daemon_t *d)
{
        metrics_update(d);
        npf_fleet_update(d->fleet);
}

static void on_config(npf_watch_t *w, const npf_watch_result_t *res, void *data)
{
        daemon_t *d = data;
        npf_shm_status_t *st = &d->status;
        uint32_t old_state = st->file_state, old_line = st->line, old_column = st->column;
        char old_message[sizeof(st->message)];

        (void) w;
        memcpy(old_message, st->message, sizeof(old_message));
        snprintf(st->path, sizeof(st->path), "%s", d->opt.config_path);
        st->checked_ns = npf_clock_ns(CLOCK_REALTIME);
        d->read_hash = res->content_hash;
        d->read_mtime_ns = res->mtime_ns;

        if (res->rc == 0) {
                bool fresh = differs_from_published(d, res->config);
                if (fresh) {
                        uint64_t gen;
                        char what[160];
                        if (npf_shm_publish_config(d->shm, res->config, &gen) == 0) {
                                note_published(d);
                                if (!d->person)
                                        d->person = malloc(sizeof(*d->person));
                                if (d->person) {
                                        memcpy(d->person, res->config, sizeof(*d->person));
                                        d->person->args.generation = gen;
                                }
                                d->in_force_hash = res->content_hash;
                                npf_windows_note_prof_dir(&d->windows, gen, res->config->prof_dir);
                                describe_window(res->config, what, sizeof(what));
                                npf_log(LOG_NOTICE, (int64_t) gen, NPF_LOG_NONE, "published generation %" PRIu64
                                        " (%s dialect): %s", gen, npf_shm_dialect_name(res->config->args.dialect), what);
                        }
                } else {
                        d->in_force_hash = res->content_hash;   /* the same configuration, maybe other bytes */
                }
                npf_autowin_configured(d->autowin, res->config, res->autow, fresh, st->checked_ns);
                if (d->fwshm)
                        npf_fwshm_publish(d->fwshm, res->config, res->mtime_s);
                if (old_state != NPF_FILE_VALID && old_state != NPF_FILE_UNKNOWN)
                        npf_log(LOG_NOTICE, (int64_t) generation_in_force(d), NPF_LOG_NONE,
                                "%s is valid again", d->opt.config_path);
                /* Warnings are said once per version of the file: when it is published or becomes valid. */
                bool say = fresh || old_state != NPF_FILE_VALID;
                for (uint32_t i = 0; say && i < res->report->n_warnings && i < NPF_CONF_DIAG_MAX; i++)
                        npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "%s:%u:%u: warning: %s: %s", d->opt.config_path,
                                res->report->warnings[i].line, res->report->warnings[i].column,
                                res->report->warnings[i].key, res->report->warnings[i].message);
                st->file_state = NPF_FILE_VALID;
                st->line = st->column = 0;
                st->key[0] = st->message[0] = '\0';
                npf_log_once_clear(&d->file_problem);
        } else {
                const npf_conf_diag_t *e = res->report->n_errors ? &res->report->errors[0] : NULL;
                if (d->fwshm)
                        npf_fwshm_publish(d->fwshm, NULL, 0);
                st->file_state = res->rc == -ENOENT ? NPF_FILE_MISSING : NPF_FILE_INVALID;
                st->line = e ? e->line : 0;
                st->column = e ? e->column : 0;
                snprintf(st->key, sizeof(st->key), "%s", e ? e->key : "");
                snprintf(st->message, sizeof(st->message), "%s", e ? e->message : strerror(-res->rc));
                /* Count each broken version once, however often it is read. */
                if (old_state != st->file_state || res->content_hash != d->invalid_hash) {
                        st->error_count++;
                        d->invalid_hash = res->content_hash;
                }
                char problem[sizeof(d->file_problem.last)];
                snprintf(problem, sizeof(problem), "%u:%u:%u:%s:%s", st->file_state, st->line, st->column, st->key,
                         st->message);
                if (npf_log_once_new(&d->file_problem, problem)) {
                        if (st->line)
                                npf_log(LOG_WARNING, (int64_t) generation_in_force(d), NPF_LOG_NONE,
                                        "%s:%u:%u: %s%s%s (%u error%s); generation %" PRIu64 " stays in force",
                                        d->opt.config_path, st->line, st->column, st->key, st->key[0] ? ": " : "",
                                        st->message, res->report->n_errors, res->report->n_errors == 1 ? "" : "s",
                                        generation_in_force(d));
                        else
                                npf_log(LOG_WARNING, (int64_t) generation_in_force(d), NPF_LOG_NONE,
                                        "%s: %s; generation %" PRIu64 " stays in force", d->opt.config_path,
                                        st->message, generation_in_force(d));
                }
        }
        st->good_generation = generation_in_force(d);
        if (old_state != st->file_state || old_line != st->line || old_column != st->column ||
            strcmp(old_message, st->message) != 0)
                st->changed_ns = st->checked_ns;
        npf_shm_publish_status(d->shm, st);
        update_notify_status(d);
        note_change(d);

        if (!d->ready) {
                d->ready = true;
                npf_notify_ready(&d->notify);
                for (unsigned i = 0; i < d->n_early; i++)
                        on_request(d->early[i].req, d->early[i].command, NULL, &d->early[i].peer, d);
                d->n_early = 0;
        }
        finish_reload(d);
}

static void on_window_recorded(const npf_window_record_t *rec, void *data)
{
        daemon_t *d = data;

        npf_windows_ended(&d->windows, d->analyze, rec);
}

/* A libkineto process's window ended: into the node's history, as a rank's. */
static void on_kineto_window(const npf_window_record_t *rec, void *data)
{
        daemon_t *d = data;

        npf_sweep_record(&d->sweep, rec, on_window_recorded, d);
        note_change(d);
}

/* What the watch of progress tells: stalls and slowdowns, begun and over, into the log. */
static void on_progress(const npf_progress_event_t *ev, void *data)
{
        daemon_t *d = data;
        char step[32], since[32];
        bool rank_line = ev->kind == NPF_PROGRESS_STALL_BEGAN || ev->kind == NPF_PROGRESS_STALL_ENDED ||
                         ev->kind == NPF_PROGRESS_STALL_GONE;

        if (rank_line && d->progress_lines >= PROGRESS_LINES_MAX) {
                d->progress_unsaid++;
                return;
        }
        d->progress_lines += rank_line;
        npf_step_text(ev->step, step);
        npf_step_text(ev->since_step, since);
        switch (ev->kind) {
        case NPF_PROGRESS_STALL_BEGAN:
                if (ev->step_time_s > 0)
                        npf_log(LOG_WARNING, NPF_LOG_NONE, ev->rank, "progress stall: rank %" PRIu32 " has made no step "
                                "for %.1f s, at step %s (its step time %.3g s)", ev->rank, ev->seconds, step,
                                ev->step_time_s);
                else
                        npf_log(LOG_WARNING, NPF_LOG_NONE, ev->rank, "progress stall: rank %" PRIu32 " has made no step "
                                "for %.1f s, at step %s", ev->rank, ev->seconds, step);
                break;
        case NPF_PROGRESS_STALL_ENDED:
                npf_log(LOG_NOTICE, NPF_LOG_NONE, ev->rank, "progress stall over: rank %" PRIu32 " stepped again, "
                        "to step %s, after %.1f s", ev->rank, step, ev->seconds);
                break;
        case NPF_PROGRESS_STALL_GONE:
                npf_log(LOG_NOTICE, NPF_LOG_NONE, ev->rank, "progress stall over: rank %" PRIu32 " left, stalled at "
                        "step %s for %.1f s", ev->rank, step, ev->seconds);
                break;
        case NPF_PROGRESS_STALLS:
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "progress: %s", ev->message);
                break;
        case NPF_PROGRESS_SLOWDOWN_BEGAN:
                /* Its automatic window, after the sweep: the counts of ranks by state are whole then. */
                d->slowdown_began = true;
                d->slowdown_event = *ev;
                d->slowdown_event.message = NULL;
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "slowdown since step %s: the job's step time is "
                        "%.3g ms, %.2fx its baseline of %.3g ms (seen at step %s)", since, ev->step_time_s * 1e3,
                        ev->factor, ev->baseline_s * 1e3, step);
                break;
        case NPF_PROGRESS_SLOWDOWN_ENDED:
                if (ev->gone)
                        npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "slowdown since step %s is over: the job's "
                                "ranks left", since);
                else
                        npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "slowdown since step %s is over at step %s: "
                                "the step time is back to %.3g ms (baseline %.3g ms)", since, step,
                                ev->step_time_s * 1e3, ev->baseline_s * 1e3);
                break;
        }
}

static void on_analysis(const npf_analysis_event_t *ev, void *data)
{
        daemon_t *d = data;

        npf_windows_analysis_logged(&d->sweep, ev);
        note_change(d);
}

static void on_sweep_timer(uv_timer_t *t);

/* Ranks of the node in a window, armed, open or flushing: an automatic one waits. */
static bool windows_open(const daemon_t *d)
{
        return d->sweep.by_state[NPF_WINDOW_ARMED] + d->sweep.by_state[NPF_WINDOW_COLLECTING] +
               d->sweep.by_state[NPF_WINDOW_FLUSHING] + d->sweep.by_state[NPF_SWEEP_STALLED] > 0;
}

/* What the sweep found for the windows that open themselves (daemon/autowin.h). */
static void auto_after_sweep(daemon_t *d)
{
        uint64_t now = npf_clock_ns(CLOCK_REALTIME);

        if (d->slowdown_began)
                npf_autowin_slowdown(d->autowin, d->progress, &d->slowdown_event, windows_open(d), now);
        d->slowdown_began = false;
        npf_autowin_sweep(d->autowin, npf_shm_ranks(d->shm), d->progress, d->person ? d->person->prof_dir : NULL,
                          windows_open(d), now);
}

/* Publish an automatic window (npf_autowin_publish_fn). */
static uint64_t publish_auto(const npf_shm_config_t *c, const char *reason, void *data)
{
        daemon_t *d = data;
        uint64_t gen;

        if (npf_shm_publish_config(d->shm, c, &gen) < 0)
                return 0;
        note_published(d);
        npf_windows_note_prof_dir(&d->windows, gen, c->prof_dir);
        npf_windows_note_reason(&d->windows, gen, reason);
        update_notify_status(d);
        return gen;
}

/*
 * The rank table as the last sweep judged it (stalled or not, the pids it found), read again
 * now: for a request, through the view kept between requests (a row per rank changed in
 * place, 0.7 MiB with 1,024 ranks, which `npuprofctl top` refreshes every second); for the
 * fleet record, made afresh and freed (@kept false).
 */
static json_t *rank_table(daemon_t *d, bool kept)
{
        npf_rank_view_t *rv = kept ? d->rank_view : npf_rank_view_new();
        json_t *t = rv ? npf_rank_view_refresh(rv, d->shm, npf_clock_ns(CLOCK_MONOTONIC), d->opt.stall_ms,
                                               d->sweep.stalled, d->sweep.holder, npf_progress_view(d->progress))
                       : NULL;

        if (kept)
                d->view_used_ns = npf_clock_ns(CLOCK_MONOTONIC);
        else
                npf_rank_view_free(rv);
        return t;
}

/* The view kept for requests, given back once none asked for NPF_VIEW_KEEP_MS: an unwatched daemon holds no table. */
static void release_view(daemon_t *d)
{
        npf_rank_view_t *fresh;

        if (!d->view_used_ns || npf_clock_ns(CLOCK_MONOTONIC) - d->view_used_ns < NPF_VIEW_KEEP_MS * 1000000ull ||
            !(fresh = npf_rank_view_new()))
                return;
        npf_rank_view_free(d->rank_view);
        d->rank_view = fresh;
        d->view_used_ns = 0;
        /* Its thousands of small blocks are spread over the heap: give their pages back. */
        malloc_trim(0);
}

/*
 * Sweep the rank table. While ranks are attached the sweep runs every poll interval; with
 * none, it costs an idle node no wake-up of its own: the watchdog tick sweeps (or, without
 * a watchdog, a slow timer), and every status request does; with a fleet record, at least
 * every interval of the record.
 */
static void sweep(daemon_t *d)
{
        uint32_t before = d->sweep.attached;
        uint64_t period;

        d->progress_lines = d->progress_unsaid = 0;
        int r = npf_shm_repair_ranks(d->shm);
        if (r != 0)
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "the rank table was cut short (by a user who may "
                        "attach ranks): %s", r > 0 ? "its size is back, the slots past the cut are empty"
                                                   : strerror(-r));
        npf_sweep_run(&d->sweep, d->shm, npf_clock_ns(CLOCK_MONOTONIC), on_window_recorded, d);
        if (d->kineto)
                npf_kineto_sweep(d->kineto);
        if (!d->stopping)
                auto_after_sweep(d);
        if (d->progress_unsaid)
                npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "progress: %u more ranks' stalls began or ended "
                        "(npuprofctl status names them)", d->progress_unsaid);
        npf_windows_cluster(&d->windows, d->analyze, &d->sweep);
        release_view(d);
        npf_shm_heartbeat(d->shm, npf_clock_ns(CLOCK_MONOTONIC));
        if (before != d->sweep.attached)
                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "%u rank%s attached", d->sweep.attached,
                        d->sweep.attached == 1 ? "" : "s");
        update_notify_status(d);
        note_change(d);

        if (d->stopping)
                return;
        period = d->sweep.attached ? d->opt.poll_ms : d->notify.watchdog_usec ? 0 : NPF_IDLE_SWEEP_MS;
        /* A fleet record is as fresh as its interval: new ranks are looked for that often too. */
        if (!d->sweep.attached && d->fleet && (!period || d->opt.fleet_interval_ms < period))
                period = d->opt.fleet_interval_ms;
        if (period != uv_timer_get_repeat(&d->sweep_timer) || !uv_is_active((uv_handle_t *) &d->sweep_timer)) {
                uv_timer_stop(&d->sweep_timer);
                if (period)
                        uv_timer_start(&d->sweep_timer, on_sweep_timer, period, period);
        }
}

static void on_sweep_timer(uv_timer_t *t)
{
        sweep(t->data);
}

static void on_watchdog_tick(void *data)
{
        sweep(data);
}

static void start_reload(daemon_t *d, const char *why)
{
        d->reloads++;
        if (!d->reloading) {
                d->reloading = true;
                npf_notify_reloading(&d->notify);
        }
        npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "reloading %s (%s)", d->opt.config_path, why);
        note_change(d);
        npf_watch_reload(d->watch);
}

/* --- commands ------------------------------------------------------------------------ */

/* The analyzer's settings and counts (status, windows); while stopping, the settings only. */
static json_t *analysis_summary(const daemon_t *d)
{
        json_t *o = d->analyze ? npf_analyze_summary_json(d->analyze) : NULL;

        return o ? o : json_pack("{s:b}", "enabled", false);
}


static json_t *status_json(daemon_t *d)
{
        json_t *config = npf_view_config(npf_shm_ctl(d->shm));
        json_t *windows = npf_sweep_outcomes_json(&d->sweep);

        json_object_set_new(config, "path", json_string(d->opt.config_path));
        json_object_set_new(windows, "recent", npf_windows_history_json(&d->windows, &d->sweep, d->analyze, NPF_PROTO_STATUS_RECENT));
        json_t *o = json_pack("{s:{s:I, s:s, s:I, s:I, s:I, s:b, s:b, s:I, s:s, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:o, s:o}, "
                              "s:{s:s, s:b}, s:o, s:o, s:o, s:o, s:I, s:o}",
                              "daemon",
                              "pid", (json_int_t) getpid(),
                              "version", NPUPROF_VERSION,
                              "uptime_s", (json_int_t) ((npf_clock_ns(CLOCK_MONOTONIC) - d->started_ns) / 1000000000u),
                              "started_unix_ms", (json_int_t) (d->started_real_ns / 1000000u),
                              "uid", (json_int_t) getuid(),
                              "socket_activated", npf_server_activated(d->server),
                              "inotify", d->opt.inotify,
                              "poll_interval_ms", (json_int_t) d->opt.poll_ms,
                              "output_root", d->opt.output_root,
                              "stall_timeout_ms", (json_int_t) d->opt.stall_ms,
                              "clients",
                              "open", (json_int_t) npf_server_clients(d->server),
                              "max", (json_int_t) npf_server_clients_max(d->server),
                              "evicted", (json_int_t) npf_server_evicted(d->server),
                              "shared_answers", (json_int_t) npf_server_shared(d->server),
                              "idle_timeout_ms", (json_int_t) d->opt.idle_ms,
                              "metrics_file", d->metrics ? npf_kept_file_status_json(d->metrics) : json_null(),
                              "fleet", d->fleet ? npf_fleet_status_json(d->fleet) : json_null(),
                              "shm", "name", d->opt.shm_name, "adopted", npf_shm_adopted(d->shm),
                              "config", config,
                              "ranks", rank_table(d, true),
                              "windows", windows,
                              "analysis", analysis_summary(d),
                              "reloads", (json_int_t) d->reloads,
                              "legacy", d->fwshm ? npf_fwshm_status_json(d->fwshm) : json_null());
        json_object_set_new(o, "kineto", d->kineto ? npf_kineto_status_json(d->kineto)
                                         : json_pack("{s:s}", "off", d->kineto_off));
        json_t *self = json_object_get(o, "daemon");
        json_object_set_new(self, "stall_after_s", json_real((double) d->opt.progress.stall_after_ms / 1000.0));
        json_object_set_new(self, "stall_factor", json_integer(d->opt.progress.stall_factor));
        json_object_set_new(self, "slowdown_pct", json_integer(d->opt.progress.slowdown_pct));
        json_object_set_new(self, "slowdown_steps", json_integer(d->opt.progress.slowdown_steps));
        json_object_set_new(o, "progress", npf_progress_json(d->progress));
        json_object_set_new(o, "auto", npf_autowin_json(d->autowin));
        return o;
}

/* The node as its fleet record tells it (daemon/fleet.h). */
static void fleet_node(void *data, npf_fleet_node_t *n)
{
        daemon_t *d = data;

        n->stopping = d->stopping;
        n->started_real_ns = d->started_real_ns;
        n->config_path = d->opt.config_path;
        n->file = &d->status;
        n->read_hash = d->read_hash;
        n->read_mtime_ns = d->read_mtime_ns;
        n->generation = generation_in_force(d);
        n->in_force_hash = d->in_force_hash;
        n->published_ns = d->published_ns;
        n->ranks = rank_table(d, false);
        n->outcomes = npf_sweep_outcomes_json(&d->sweep);
        n->recent = npf_windows_history_json(&d->windows, &d->sweep, d->analyze, NPF_FLEET_RECENT);
        n->analysis = analysis_summary(d);
        n->progress = d->progress ? npf_progress_json(d->progress) : NULL;
        n->autowin = d->autowin ? npf_autowin_json(d->autowin) : NULL;
}

/* The metrics text of the daemon as it is now (daemon/metrics.h); its steady part's length in @ret_steady. */
static char *metrics_text(daemon_t *d, size_t *ret_steady)
{
        json_t *analysis = analysis_summary(d), *legacy = d->fwshm ? npf_fwshm_status_json(d->fwshm) : NULL;
        npf_metrics_t m = {
                .up = !d->stopping,
                .started_real_ns = d->started_real_ns,
                .generation = generation_in_force(d),
                .published_ns = d->published_ns,
                .file = &d->status,
                .reloads = d->reloads,
                .sweep = &d->sweep,
                .progress = d->progress,
                .autowin = d->autowin,
                .analysis = analysis,
                .legacy = legacy,
                .kineto = d->kineto,
                .has_file = d->opt.metrics_path != NULL,
                .file_errors = d->opt.metrics_path ? npf_kept_file_errors(d->metrics) : 0,
        };
        char *text = npf_metrics_text(&m, ret_steady);

        json_decref(analysis);
        json_decref(legacy);
        return text;
}

/* The file's text at its interval, whatever moved: its steady part is noted as written. */
static char *metrics_text_cb(void *data)
{
        daemon_t *d = data;
        size_t steady;
        char *text = metrics_text(d, &steady);

        if (text) {
                free(d->metrics_steady);
                d->metrics_steady = strndup(text, steady);
        }
        return text;
}

static json_t *metrics_json(daemon_t *d)
{
        char *text = metrics_text(d, NULL);
        json_t *r = text ? json_pack("{s:s}", "text", text) : NULL;

        free(text);
        return r;
}

static void on_request(npf_request_t *req, npf_command_t command, json_t *request, const npf_peer_t *peer, void *data)
{
        daemon_t *d = data;

        (void) request;
        if (d->stopping) {
                npf_server_reply_error(req, "the daemon is stopping");
                return;
        }
        if (npf_command_privileged(command) && peer->uid != 0 && peer->uid != getuid()) {
                npf_server_reply_error(req, "%s is for root and the daemon's own user (uid %u); you are uid %u",
                                       npf_command_name(command), (unsigned) getuid(), (unsigned) peer->uid);
                return;
        }
        if (!d->ready && d->n_early < RELOAD_WAITERS_MAX) {
                struct early *e = &d->early[d->n_early++];
                e->req = req;
                e->peer = *peer;
                e->command = command;
                return;
        }
        switch (command) {
        case NPF_COMMAND_STATUS:
                sweep(d);
                npf_server_reply(req, status_json(d));
                break;
        case NPF_COMMAND_RANKS:
                sweep(d);
                npf_server_reply(req, json_pack("{s:o, s:o}", "ranks", rank_table(d, true), "progress",
                                                npf_progress_json(d->progress)));
                break;
        case NPF_COMMAND_CONFIG: {
                npf_shm_config_t *c = malloc(sizeof(*c));
                if (c && npf_shm_read_config(npf_shm_ctl(d->shm), c) >= 0 && c->args.generation)
                        npf_server_reply(req, json_pack("{s:I, s:o}", "generation", (json_int_t) c->args.generation,
                                                        "config", npf_conf_to_json(c)));
                else
                        npf_server_reply(req, json_pack("{s:I, s:n}", "generation", (json_int_t) 0, "config"));
                free(c);
                break;
        }
        case NPF_COMMAND_WINDOWS:
                sweep(d);
                npf_server_reply(req, json_pack("{s:o, s:o, s:o, s:o}", "windows", npf_windows_history_json(&d->windows, &d->sweep, d->analyze, NPF_SWEEP_HISTORY),
                                                "outcomes", npf_sweep_outcomes_json(&d->sweep),
                                                "analysis", analysis_summary(d),
                                                "clusters", npf_windows_clusters_json(&d->sweep, d->analyze)));
                break;
        case NPF_COMMAND_METRICS:
                sweep(d);
                npf_server_reply(req, metrics_json(d));
                break;
        case NPF_COMMAND_RELOAD: {
                if (d->n_reload_waiters >= RELOAD_WAITERS_MAX) {
                        npf_server_reply_error(req, "too many reloads waiting; try again");
                        return;
                }
                d->reload_waiters[d->n_reload_waiters++] = req;
                char why[64];
                snprintf(why, sizeof(why), "asked by uid %u, pid %d", (unsigned) peer->uid, (int) peer->pid);
                start_reload(d, why);
                break;
        }
        default:
                npf_server_reply_error(req, "command %d is not served", (int) command);
                break;
        }
}

/* --- life cycle ---------------------------------------------------------------------- */

static void on_closed(uv_handle_t *h)
{
        (void) h;
}

static void stop(daemon_t *d, const char *why)
{
        if (d->stopping)
                return;
        d->stopping = true;
        /* Their last writes say npuprof_up 0 and "stopped", with the counts as they are, before
         * anything closes. */
        npf_kept_file_close(d->metrics);
        d->metrics = NULL;
        npf_fleet_close(d->fleet);
        d->fleet = NULL;
        npf_notify_stopping(&d->notify);
        npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "stopping (%s)", why);
        for (unsigned i = 0; i < d->n_reload_waiters; i++)
                npf_server_reply_error(d->reload_waiters[i], "the daemon is stopping");
        d->n_reload_waiters = 0;
        for (unsigned i = 0; i < d->n_early; i++)
                npf_server_reply_error(d->early[i].req, "the daemon is stopping");
        d->n_early = 0;
        npf_server_close(d->server);
        npf_watch_close(d->watch);
        npf_analyze_close(d->analyze);
        d->analyze = NULL;
        npf_fwshm_close(d->fwshm);
        d->fwshm = NULL;
        npf_kineto_close(d->kineto);
        d->kineto = NULL;
        uv_timer_stop(&d->sweep_timer);
        uv_close((uv_handle_t *) &d->sweep_timer, on_closed);
        npf_notify_close(&d->notify, on_closed);
        uv_close((uv_handle_t *) &d->sighup, on_closed);
        uv_close((uv_handle_t *) &d->sigterm, on_closed);
        uv_close((uv_handle_t *) &d->sigint, on_closed);
}

static void on_signal(uv_signal_t *h, int signum)
{
        daemon_t *d = h->data;

        if (signum == SIGHUP)
                start_reload(d, "SIGHUP");
        else
                stop(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* On the way out: keep the segment while ranks use it, remove it when none do. */
static void release_segment(daemon_t *d)
{
        npf_sweep_run(&d->sweep, d->shm, npf_clock_ns(CLOCK_MONOTONIC), on_window_recorded, d);
        if (d->sweep.attached > 0) {
                npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "left segment %s in place: %u rank%s attached",
                        d->opt.shm_name, d->sweep.attached, d->sweep.attached == 1 ? "" : "s");
        } else {
                npf_shm_unlink(d->opt.shm_name);
                npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "removed segment %s: no rank attached", d->opt.shm_name);
        }
        d->shm = npf_shm_close(d->shm);
}

int npf_daemon_run(const npf_daemon_options_t *opt)
{
        daemon_t *d = calloc(1, sizeof(*d));
        char err[NPF_SHM_ERR_MAX > 256 ? NPF_SHM_ERR_MAX : 256];
        int r, status = 1;

        if (!d)
                return 1;
        d->opt = *opt;
        d->windows.output_root = d->opt.output_root;
        d->sweep.stall_ms = opt->stall_ms;
        d->sweep.gap_max_ms = 2 * (uint64_t) opt->poll_ms;
        d->loop = uv_default_loop();
        d->started_ns = npf_clock_ns(CLOCK_MONOTONIC);
        d->started_real_ns = npf_clock_ns(CLOCK_REALTIME);
        npf_log_init(opt->log_target, opt->config_path);
        /* The loop never waits on the log; without a writer thread it still logs, at once. */
        npf_log_start_writer();

        d->rank_view = npf_rank_view_new();
        npf_progress_options_t progress = opt->progress;
        /* A gap this long between sweeps is no timing of steps: the daemon stopped, or its VM paused. */
        progress.gap_max_ms = 4 * (uint64_t) opt->poll_ms > 1000 ? 4 * (uint64_t) opt->poll_ms : 1000;
        if (!d->rank_view || npf_progress_new(&progress, on_progress, d, &d->progress) < 0) {
                npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "out of memory");
                goto out;
        }
        d->sweep.progress = d->progress;
        npf_autowin_options_t autowin = {
                .fleet_dir = opt->fleet_dir, .node = opt->node_name, .poll_ms = opt->poll_ms,
                .publish = publish_auto, .data = d,
        };
        if (npf_autowin_new(&autowin, &d->autowin) < 0) {
                npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "out of memory");
                goto out;
        }
        r = npf_shm_open_group(opt->shm_name, NPF_SHM_WRITER | NPF_SHM_CREATE, opt->rank_group, &d->shm, err);
        if (r < 0) {
                npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "cannot open segment %s: %s", opt->shm_name, err);
                goto out;
        }
        if ((r = npf_shm_guard_ranks(d->shm)) < 0)
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "cannot watch the rank table for SIGBUS (%s): a user "
                        "who cuts it short ends the daemon", strerror(-r));
        /* Ranks that died while no daemon ran are found, and their windows logged, now. */
        npf_sweep_run(&d->sweep, d->shm, npf_clock_ns(CLOCK_MONOTONIC), on_window_recorded, d);
        if (npf_shm_adopted(d->shm)) {
                npf_shm_config_t *c = malloc(sizeof(*c));
                if (c && npf_shm_read_config(npf_shm_ctl(d->shm), c) >= 0 && c->args.generation) {
                        npf_windows_note_prof_dir(&d->windows, c->args.generation, c->prof_dir);
                        d->published_ns = c->args.published_ns;
                }
                free(c);
                npf_shm_read_status(npf_shm_ctl(d->shm), &d->status);
                npf_log(LOG_NOTICE, (int64_t) generation_in_force(d), NPF_LOG_NONE,
                        "adopted segment %s at generation %" PRIu64 " with %u rank%s attached", opt->shm_name,
                        generation_in_force(d), d->sweep.attached, d->sweep.attached == 1 ? "" : "s");
        } else {
                npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "created segment %s", opt->shm_name);
        }
        npf_shm_heartbeat(d->shm, npf_clock_ns(CLOCK_MONOTONIC));

        const char *state = getenv("STATE_DIRECTORY");
        if (state && state[0] == '/')
                d->state_dir = strndup(state, strcspn(state, ":"));
        d->windows.state_dir = d->state_dir;
        r = npf_analyze_new(d->loop, &opt->analyze, on_analysis, d, &d->analyze);
        if (r < 0) {
                npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "cannot set up the analysis queue: %s", strerror(-r));
                goto out;
        }
        d->notify.tick_cb = on_watchdog_tick;
        d->notify.data = d;
        r = npf_notify_init(&d->notify, d->loop);
        if (r < 0) {
                npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "cannot start the watchdog timer: %s", uv_strerror(r));
                goto out;
        }
        npf_server_limits_t limits = { .clients_max = opt->clients_max, .idle_ms = opt->idle_ms };
        r = npf_server_start(d->loop, opt->socket_path, opt->socket_group, &limits, on_request, d, &d->server, err);
        if (r < 0) {
                npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "control socket: %s", err);
                goto out;
        }
        if (opt->kineto) {
                npf_kineto_options_t ko = {
                        .socket_dir = opt->kineto_socket_dir, .group = opt->rank_group, .node = opt->node_name,
                        .ended = on_kineto_window, .data = d,
                };
                char why[256];
                if ((r = npf_kineto_new(d->loop, &ko, &d->kineto, why, sizeof(why))) < 0) {
                        /* On by default where the endpoint can be had: another daemon may serve it. */
                        snprintf(d->kineto_off, sizeof(d->kineto_off), "%s", why);
                        npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "libkineto's endpoint: %s; PyTorch jobs "
                                "started with KINETO_USE_DAEMON=1 are not served by this daemon", why);
                } else {
                        note_published(d);
                }
        } else {
                snprintf(d->kineto_off, sizeof(d->kineto_off), "--no-kineto");
        }
        if (opt->fwshm.kinds && (r = npf_fwshm_new(d->loop, &opt->fwshm, &d->fwshm)) < 0) {
                npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "cannot start the publishers of the frameworks' segments: %s", strerror(-r));
                goto out;
        }
        r = npf_watch_start(d->loop, opt->config_path, opt->poll_ms, opt->inotify, opt->output_root, on_config, d,
                            &d->watch);
        if (r < 0) {
                npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "cannot watch %s: %s", opt->config_path, uv_strerror(r));
                goto out;
        }
        if (opt->metrics_path) {
                r = npf_kept_file_new(d->loop, opt->metrics_path, "the metrics file", opt->metrics_interval_ms,
                                      metrics_text_cb, d, &d->metrics);
                if (r < 0) {
                        npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "cannot keep the metrics file %s: %s",
                                opt->metrics_path, strerror(-r));
                        goto out;
                }
                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "metrics written to %s on every change and every %.3g s",
                        opt->metrics_path, (double) opt->metrics_interval_ms / 1000.0);
        }
        if (opt->fleet_dir) {
                r = npf_fleet_new(d->loop, opt->fleet_dir, opt->node_name, opt->fleet_interval_ms, fleet_node, d,
                                  &d->fleet);
                if (r < 0) {
                        npf_log(LOG_ERR, NPF_LOG_NONE, NPF_LOG_NONE, "cannot keep the fleet record in %s: %s",
                                opt->fleet_dir, strerror(-r));
                        goto out;
                }
                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "fleet record %s/%s.json written on every change and "
                        "every %.3g s", opt->fleet_dir, opt->node_name, (double) opt->fleet_interval_ms / 1000.0);
        }
        uv_timer_init(d->loop, &d->sweep_timer);
        d->sweep_timer.data = d;
        sweep(d);
        uv_signal_t *sigs[] = { &d->sighup, &d->sigterm, &d->sigint };
        int signums[] = { SIGHUP, SIGTERM, SIGINT };
        for (int i = 0; i < 3; i++) {
                uv_signal_init(d->loop, sigs[i]);
                sigs[i]->data = d;
                uv_signal_start(sigs[i], on_signal, signums[i]);
        }
        npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE,
                "npuprofd %s watching %s (poll %u ms%s), segment %s, socket %s", NPUPROF_VERSION,
                opt->config_path, opt->poll_ms, opt->inotify ? " and inotify" : ", no inotify", opt->shm_name,
                npf_server_activated(d->server) ? "passed by systemd" : opt->socket_path);
        if (opt->analyze.jobs) {
                char mem[32] = "no";
                if (opt->analyze.memory_bytes)
                        npf_analyze_format_bytes(opt->analyze.memory_bytes, mem, sizeof(mem));
                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE,
                        "finished windows are analysed by %s, %u at a time, niced by %d, time limit %" PRIu64
                        " s, %s memory limit", opt->analyze.analyzer, opt->analyze.jobs, opt->analyze.nice,
                        opt->analyze.timeout_s, mem);
        } else {
                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "finished windows are not analysed (--analyze-jobs 0)");
        }
        uv_run(d->loop, UV_RUN_DEFAULT);
        release_segment(d);
        status = 0;
out:
        if (status != 0) {
                /* A failed start: close what was opened, let the loop finish, keep the segment. */
                d->stopping = true;
                npf_kept_file_close(d->metrics);
                d->metrics = NULL;
                if (d->server)
                        npf_server_close(d->server);
                if (d->watch)
                        npf_watch_close(d->watch);
                npf_analyze_close(d->analyze);
                d->analyze = NULL;
                npf_fwshm_close(d->fwshm);
                d->fwshm = NULL;
                npf_kineto_close(d->kineto);
                d->kineto = NULL;
                if (d->notify.watchdog.type == UV_TIMER)
                        npf_notify_close(&d->notify, on_closed);
                uv_run(d->loop, UV_RUN_DEFAULT);
                /* A segment this start made and never published into is not left behind. */
                if (d->shm && !npf_shm_adopted(d->shm) && generation_in_force(d) == 0)
                        npf_shm_unlink(opt->shm_name);
                d->shm = npf_shm_close(d->shm);
        }
        uv_loop_close(d->loop);
        npf_windows_clear(&d->windows);
        free(d->state_dir);
        npf_rank_view_free(d->rank_view);
        npf_progress_free(d->progress);
        npf_autowin_free(d->autowin);
        free(d->person);
        free(d->metrics_steady);
        free(d);
        npf_log_stop_writer();
        return status;
}
