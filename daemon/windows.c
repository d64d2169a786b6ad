/* SPDX-License-Identifier: MIT */
#include "daemon/windows.h"
#include "daemon/log.h"
#include "daemon/manifest.h"
#include "lib/outroot.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void npf_windows_note_prof_dir(npf_windows_t *w, uint64_t generation, const char *dir)
{
        struct npf_windows_prof_dir *p = &w->prof_dirs[w->head];

        free(p->dir);
        free(p->reason);
        p->reason = NULL;
        p->dir = strdup(dir);
        p->generation = p->dir ? generation : 0;
        w->head = (w->head + 1) % NPF_WINDOWS_PROF_DIRS;
}

void npf_windows_note_reason(npf_windows_t *w, uint64_t generation, const char *reason)
{
        for (unsigned i = 0; generation && i < NPF_WINDOWS_PROF_DIRS; i++)
                if (w->prof_dirs[i].generation == generation) {
                        free(w->prof_dirs[i].reason);
                        w->prof_dirs[i].reason = strdup(reason);
                }
}

static const char *reason_of(const npf_windows_t *w, uint64_t generation)
{
        for (unsigned i = 0; generation && i < NPF_WINDOWS_PROF_DIRS; i++)
                if (w->prof_dirs[i].generation == generation)
                        return w->prof_dirs[i].reason;
        return NULL;
}

/* Return: the prof_dir of @generation, or NULL when it is no longer (or was never) known. */
static const char *prof_dir_of(const npf_windows_t *w, uint64_t generation)
{
        for (unsigned i = 0; generation && i < NPF_WINDOWS_PROF_DIRS; i++)
                if (w->prof_dirs[i].generation == generation)
                        return w->prof_dirs[i].dir;
        return NULL;
}

/*
 * The absolute directory of a window whose rank named it @out (@len bytes at most, maybe
 * unterminated): an absolute @out as it is, a relative one below the prof_dir of
 * @generation. Return: a new string, or NULL when @out is empty, the prof_dir is no longer
 * known, or memory ran out.
 */
static char *window_dir(const npf_windows_t *w, uint64_t generation, const char *out, size_t len)
{
        size_t n = strnlen(out, len);
        const char *dir = n && out[0] != '/' ? prof_dir_of(w, generation) : NULL;
        char *full;

        if (n == 0 || (out[0] != '/' && !dir))
                return NULL;
        if (asprintf(&full, "%s%s%.*s", dir ? dir : "", dir && strcmp(dir, "/") != 0 ? "/" : "", (int) n, out) < 0)
                return NULL;
        return full;
}

json_t *npf_windows_history_json(const npf_windows_t *w, const npf_sweep_t *sweep, npf_analyze_t *analyze,
                                 size_t max)
{
        json_t *list = npf_sweep_history_json(sweep, max), *o;
        size_t i;

        json_array_foreach(list, i, o) {
                const npf_window_record_t *rec = npf_sweep_history_at(sweep, i);
                const char *out = json_string_value(json_object_get(o, "output"));
                char *full;
                json_t *analysis;

                if (!rec)
                        break;
                full = out && out[0] != '/' ? window_dir(w, rec->generation, out, strlen(out)) : NULL;
                analysis = npf_analyze_window_json(analyze, rec->id);
                if (full)
                        json_object_set_new(o, "output", json_string(full));
                free(full);
                json_object_set_new(o, "analysis", analysis ? analysis : json_null());
                const char *reason = reason_of(w, rec->generation);
                json_object_set_new(o, "reason", reason ? json_string(reason) : json_null());
        }
        return list;
}

/* mkdir -p @path's parent directories, mode 0755. Return: 0 or -errno. */
static int make_parents(const char *path)
{
        char *p = strdup(path);
        int r = 0;

        if (!p)
                return -ENOMEM;
        for (char *s = strchr(p + 1, '/'); s && r == 0; s = strchr(s + 1, '/')) {
                *s = '\0';
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        r = -errno;
                *s = '/';
        }
        free(p);
        return r;
}

/*
 * Where the analysis of the window directory @dir (under the output root, owned by @owner)
 * goes, and as whom it runs. Nothing is written into a window directory but as its owner:
 * a daemon running as root runs the analyzer as that user (@ret_uid, @ret_gid), into
 * @dir/analysis (NULL is returned). A daemon of another user writes under systemd's
 * StateDirectory=, STATE/analysis/ followed by @dir's path below the output root, its
 * parents made; as its own user ((uid_t) -1). A rank writes its directory as its own user,
 * usually 0755.
 * Return: 0 and the directory (NULL or a new string) in @ret_outdir, or -EPERM with no
 * StateDirectory= to write into, or -ENOMEM.
 */
static int analysis_outdir(const npf_windows_t *w, const char *dir, const struct stat *owner, char **ret_outdir,
                           uid_t *ret_uid, gid_t *ret_gid)
{
        const char *rel = dir + strlen(w->output_root);
        char *out;

        *ret_outdir = NULL;
        *ret_uid = (uid_t) -1;
        *ret_gid = (gid_t) -1;
        if (owner->st_uid == geteuid())
                return 0;
        if (geteuid() == 0) {
                *ret_uid = owner->st_uid;
                *ret_gid = owner->st_gid;
                return 0;
        }
        if (!w->state_dir)
                return -EPERM;
        while (*rel == '/')
                rel++;
        if (asprintf(&out, "%s/analysis/%s", w->state_dir, *rel ? rel : "root") < 0)
                return -ENOMEM;
        if (make_parents(out) < 0) {
                free(out);
                return -ENOMEM;
        }
        *ret_outdir = out;
        return 0;
}

/*
 * The directory of the window @rec, confined to the output root: a rank names its own
 * directory, and one outside the root is never touched. Return: 0 and the directory in
 * @confined (PATH_MAX bytes), or -errno with the reason in @err (NPF_OUTROOT_ERR_MAX bytes).
 */
static int confined_window_dir(const npf_windows_t *w, const npf_window_record_t *rec, char *confined, char *err)
{
        char *full = window_dir(w, rec->generation, rec->output, sizeof(rec->output));
        int r;

        if (!full) {
                snprintf(err, NPF_OUTROOT_ERR_MAX, strnlen(rec->output, sizeof(rec->output)) == 0
                                                           ? "the rank named no window directory"
                                                           : "the window's directory is relative to a prof_dir "
                                                             "no longer known");
                return -ENOENT;
        }
        r = npf_outroot_resolve(w->output_root, full, "the window directory", confined, PATH_MAX, err);
        free(full);
        return r;
}

/* Hand a window that ended done to the analyzer, or say why it cannot be analysed. */
static void analyze_window(const npf_windows_t *w, npf_analyze_t *analyze, const npf_window_record_t *rec)
{
        char confined[PATH_MAX], err[NPF_OUTROOT_ERR_MAX], why[NPF_OUTROOT_ERR_MAX + 16], *outdir;
        struct stat st;
        uid_t uid;
        gid_t gid;
        int r;

        if (!analyze)
                return;
        if (confined_window_dir(w, rec, confined, err) < 0) {
                /* A rank names its own directory: one outside the output root is never analysed. */
                snprintf(why, sizeof(why), "not analysed: %s", err);
                r = npf_analyze_refuse(analyze, rec->id, why);
        } else if (lstat(confined, &st) < 0 || !S_ISDIR(st.st_mode)) {
                snprintf(why, sizeof(why), "not analysed: %.200s is not a directory", confined);
                r = npf_analyze_refuse(analyze, rec->id, why);
        } else if (analysis_outdir(w, confined, &st, &outdir, &uid, &gid) < 0) {
                snprintf(why, sizeof(why), "not analysed: the window directory is uid %u's, and the daemon (uid %u) "
                         "writes into no other user's directory; give it a StateDirectory= to write into",
                         (unsigned) st.st_uid, (unsigned) geteuid());
                r = npf_analyze_refuse(analyze, rec->id, why);
        } else {
                r = npf_analyze_window(analyze, rec->id, confined, outdir, uid, gid);
                free(outdir);
        }
        if (r < 0 && r != -ECANCELED)
                npf_log(LOG_WARNING, (int64_t) rec->generation, (int64_t) rec->rank,
                        "rank %u: window %" PRId64 "..%" PRId64 ": cannot queue its analysis: %s", rec->rank,
                        rec->start_step, rec->stop_step, strerror(-r));
}

/* A lost window's directory gets the manifest its rank never wrote, marked incomplete. */
static void mark_incomplete(const npf_windows_t *w, const npf_window_record_t *rec)
{
        char confined[PATH_MAX], err[NPF_OUTROOT_ERR_MAX], reason[sizeof(rec->message) + 8];
        int dfd, r;

        /* Opened as ranks open it: no link below the output root, whoever planted one since. */
        if (confined_window_dir(w, rec, confined, err) < 0 ||
            (dfd = npf_outroot_walk(confined, strlen(w->output_root), NPF_OUTROOT_OPEN, "the window directory",
                                    err)) < 0) {
                npf_log(LOG_WARNING, (int64_t) rec->generation, (int64_t) rec->rank,
                        "rank %u: window %" PRId64 "..%" PRId64 ": no manifest written: %s", rec->rank,
                        rec->start_step, rec->stop_step, err);
                return;
        }
        if (rec->backend == NPF_BACKEND_KINETO)        /* a libkineto process's: its own reason */
                snprintf(reason, sizeof(reason), "lost: %s", rec->message);
        else
                snprintf(reason, sizeof(reason), "lost: the rank (pid %u) died while collecting, at step %" PRId64
                         "; the data is partial", rec->pid, rec->last_step);
        r = npf_manifest_write_lost(dfd, rec, reason);
        close(dfd);
        if (r < 0 && r != -EEXIST)
                npf_log(LOG_WARNING, (int64_t) rec->generation, (int64_t) rec->rank,
                        "rank %u: cannot write the manifest of the lost window in %s: %s", rec->rank, confined,
                        strerror(-r));
}

void npf_windows_ended(const npf_windows_t *w, npf_analyze_t *analyze, const npf_window_record_t *rec)
{
        npf_log(rec->outcome == NPF_WINDOW_DONE ? LOG_INFO : LOG_WARNING, (int64_t) rec->generation,
                (int64_t) rec->rank, "rank %u (pid %u): window %" PRId64 "..%" PRId64 " %s%s%s%s", rec->rank,
                rec->pid, rec->start_step, rec->stop_step, npf_shm_window_state_name(rec->outcome),
                rec->outcome == NPF_WINDOW_LOST && rec->backend != NPF_BACKEND_KINETO
                        ? ": the rank died while collecting; its output is kept" : "",
                rec->message[0] ? ": " : "", rec->message);
        if (rec->outcome == NPF_WINDOW_DONE)
                analyze_window(w, analyze, rec);
        else if (rec->outcome == NPF_WINDOW_LOST)
                mark_incomplete(w, rec);
}

void npf_windows_cluster(npf_windows_t *w, npf_analyze_t *analyze, const npf_sweep_t *sweep)
{
        const npf_window_record_t *rec;
        uint64_t gen = 0;
        char **dirs = NULL, parent[PATH_MAX], err[NPF_OUTROOT_ERR_MAX], *outdir = NULL, *where = NULL;
        size_t n = 0;
        struct stat st;
        uid_t uid;
        gid_t gid;
        int r;

        if (!analyze || sweep->by_state[NPF_WINDOW_ARMED] || sweep->by_state[NPF_WINDOW_COLLECTING] ||
            sweep->by_state[NPF_WINDOW_FLUSHING] || sweep->by_state[NPF_SWEEP_STALLED])
                return;
        /* The newest generation of the history, newest first, and its done windows. */
        for (size_t k = 0; (rec = npf_sweep_history_at(sweep, k)); k++)
                if (rec->generation > gen)
                        gen = rec->generation;
        if (gen <= w->clustered)
                return;
        if (!(dirs = calloc(NPF_SWEEP_HISTORY, sizeof(*dirs))))
                return;
        for (size_t k = 0; (rec = npf_sweep_history_at(sweep, k)) && n < NPF_ANALYZE_CLUSTER_MAX; k++) {
                char confined[PATH_MAX];
                if (rec->generation != gen || rec->outcome != NPF_WINDOW_DONE ||
                    confined_window_dir(w, rec, confined, err) < 0 || !(dirs[n] = strdup(confined)))
                        continue;
                n++;
        }
        w->clustered = gen;
        if (n < 2)
                goto out;
        /* Beside the first window, as its parent directory's owner. */
        snprintf(parent, sizeof(parent), "%s", dirs[0]);
        *strrchr(parent, '/') = '\0';
        if (lstat(parent, &st) < 0 || !S_ISDIR(st.st_mode) || strlen(parent) < strlen(w->output_root))
                goto out;
        if ((r = analysis_outdir(w, parent, &st, &where, &uid, &gid)) < 0) {
                npf_log(LOG_WARNING, (int64_t) gen, NPF_LOG_NONE, "the cluster analysis of generation %" PRIu64
                        " is not run: %s is uid %u's and the daemon writes into no other user's directory", gen, parent,
                        (unsigned) st.st_uid);
                goto out;
        }
        if (asprintf(&outdir, "%s/cluster-gen%" PRIu64, where ? where : parent, gen) < 0) {
                outdir = NULL;
                goto out;
        }
        if (where && mkdir(where, 0755) < 0 && errno != EEXIST)
                goto out;
        if ((r = npf_analyze_cluster(analyze, gen, (const char *const *) dirs, n, outdir, uid, gid)) < 0 && r != -ECANCELED)
                npf_log(LOG_WARNING, (int64_t) gen, NPF_LOG_NONE, "cannot queue the cluster analysis of generation %"
                        PRIu64 ": %s", gen, strerror(-r));
out:
        for (size_t i = 0; i < n; i++)
                free(dirs[i]);
        free(dirs);
        free(where);
        free(outdir);
}

json_t *npf_windows_clusters_json(const npf_sweep_t *sweep, npf_analyze_t *analyze)
{
        const npf_window_record_t *rec;
        json_t *list = json_array();
        uint64_t last = UINT64_MAX;

        /* Each generation once, newest first (the history is newest first). */
        for (size_t k = 0; (rec = npf_sweep_history_at(sweep, k)); k++) {
                json_t *an;
                if (rec->generation >= last)
                        continue;
                last = rec->generation;
                if ((an = npf_analyze_window_json(analyze, NPF_ANALYZE_CLUSTER_ID(rec->generation))))
                        json_array_append_new(list, json_pack("{s:I,s:o}", "generation", (json_int_t) rec->generation,
                                                              "analysis", an));
        }
        return list;
}

void npf_windows_analysis_logged(const npf_sweep_t *sweep, const npf_analysis_event_t *ev)
{
        const npf_window_record_t *rec = NULL;
        int64_t gen = NPF_LOG_NONE, rank = NPF_LOG_NONE;

        if (ev->window_id & NPF_ANALYZE_CLUSTER_ID(0)) {
                gen = (int64_t) (ev->window_id & ~NPF_ANALYZE_CLUSTER_ID(0));
                if (ev->state == NPF_ANALYSIS_RUNNING)
                        npf_log(LOG_INFO, gen, NPF_LOG_NONE, "analysing the cluster of generation %" PRId64 " (pid %d)",
                                gen, ev->pid);
                else if (ev->state == NPF_ANALYSIS_DONE)
                        npf_log(LOG_INFO, gen, NPF_LOG_NONE, "analysis of the cluster of generation %" PRId64
                                " done in %.1f s: %s", gen, ev->seconds, ev->report);
                else
                        npf_log(LOG_WARNING, gen, NPF_LOG_NONE, "analysis of the cluster of generation %" PRId64
                                " failed after %.1f s: %s", gen, ev->seconds, ev->reason);
                return;
        }

        for (size_t k = 0; (rec = npf_sweep_history_at(sweep, k)); k++)
                if (rec->id == ev->window_id) {
                        gen = (int64_t) rec->generation;
                        rank = rec->rank;
                        break;
                }
        if (ev->state == NPF_ANALYSIS_RUNNING)
                npf_log(LOG_INFO, gen, rank, "analysing %s (pid %d)", ev->dir, ev->pid);
        else if (ev->state == NPF_ANALYSIS_DONE)
                npf_log(LOG_INFO, gen, rank, "analysis of %s done in %.1f s: %s", ev->dir, ev->seconds, ev->report);
        else
                npf_log(LOG_WARNING, gen, rank, "analysis of %s failed after %.1f s: %s", ev->dir ? ev->dir : "?",
                        ev->seconds, ev->reason);
}

void npf_windows_clear(npf_windows_t *w)
{
        for (unsigned i = 0; i < NPF_WINDOWS_PROF_DIRS; i++) {
                free(w->prof_dirs[i].dir);
                free(w->prof_dirs[i].reason);
                w->prof_dirs[i] = (struct npf_windows_prof_dir) { 0 };
        }
}
