/* SPDX-License-Identifier: MIT */
#include "daemon/watch.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define READS_TO_AGREE_MAX 8

struct npf_watch {
        uv_loop_t *loop;
        char *path, *dir, *base, *dir_base;
        char *root;                     /* the output root, normal form; NULL: no confinement */
        uv_fs_poll_t poll;
        uv_fs_event_t event;
        uv_timer_t settle;
        uv_timer_t reread;              /* a file that changed while it was read is read again after it */
        uv_work_t work;
        bool inotify;
        bool closing;
        /* The directory inotify watches. One removed or renamed away leaves the watch on the old
         * directory (or on none), and the one made in its place, maybe with the same inode
         * number, is not watched: either is found (an event on the directory itself, a new
         * inode at a reading) and the watch is set anew on the path. */
        uint64_t watched_dev, watched_ino;
        bool dir_moved;                 /* the watched directory was deleted or moved */
        int open_handles;
        npf_watch_cb cb;
        void *data;

        /* The read in flight, and what to do after it. */
        bool busy;
        bool again;                     /* an event came during the read: read once more */
        bool deliver_any;               /* deliver even an invalid result */
        bool again_deliver_any;
        uint64_t reads;

        /* Filled by the work function, consumed on the loop. */
        uint64_t dir_dev, dir_ino;
        int rc;
        uint64_t hash;
        int64_t mtime_s;                /* of the reading that agreed with the one before */
        uint64_t mtime_ns;
        npf_shm_config_t config;
        npf_conf_auto_t autow;
        npf_conf_report_t report;
};

static uint64_t fnv64(const char *p, size_t n)
{
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        for (size_t i = 0; i < n; i++) {
                h ^= (unsigned char) p[i];
                h *= UINT64_C(0x100000001b3);
        }
        return h;
}

/* Thread pool: read until two consecutive reads agree, then parse. */
static void read_work(uv_work_t *req)
{
        npf_watch_t *w = req->data;
        char *prev = NULL, *text = NULL;
        size_t prev_len = 0, len = 0;
        struct stat st = { 0 }, dir_st;
        int r = 0;

        w->dir_dev = w->dir_ino = 0;
        if (stat(w->dir, &dir_st) == 0) {
                w->dir_dev = dir_st.st_dev;
                w->dir_ino = dir_st.st_ino;
        }

        for (int i = 0; i < READS_TO_AGREE_MAX; i++) {
                r = npf_conf_read(w->path, &text, &len, &st, &w->report);
                if (r < 0)
                        break;
                if (prev && prev_len == len && memcmp(prev, text, len) == 0)
                        break;
                free(prev);
                prev = text;
                prev_len = len;
                text = NULL;
                if (i > 0)
                        nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        }
        free(prev);
        if (r < 0) {
                /* A file that cannot be read is told apart from another by why (its size, its kind). */
                const char *why = w->report.n_errors ? w->report.errors[0].message : "";
                w->rc = r;
                w->hash = fnv64(why, strlen(why));
                w->mtime_ns = 0;
                return;
        }
        if (!text) {
                /* Never agreed: the file is changing under us; the next event reads again. */
                w->rc = -EAGAIN;
                w->hash = 0;
                return;
        }
        w->hash = fnv64(text, len);
        w->mtime_s = (int64_t) st.st_mtim.tv_sec;
        w->mtime_ns = (uint64_t) st.st_mtim.tv_sec * 1000000000u + (uint64_t) st.st_mtim.tv_nsec;
        w->rc = npf_conf_parse_auto(text, len, &w->config, &w->autow, &w->report);
        if (w->rc == 0 && w->root)
                w->rc = npf_conf_confine(&w->config, text, len, w->root, &w->report) < 0 ? -EINVAL : 0;
        /* What the daemon says of the file is shown to every local user: never a private file's bytes. */
        if (!(st.st_mode & S_IROTH))
                npf_conf_withhold(&w->report, w->path, (uint32_t) st.st_mode);
        free(text);
}

static void start_read(npf_watch_t *w, bool deliver_any);
static void on_settled(uv_timer_t *t);
static void on_reread(uv_timer_t *t);
static void on_event(uv_fs_event_t *h, const char *filename, int events, int status);

static void maybe_free(npf_watch_t *w)
{
        if (!w->closing || w->open_handles > 0 || w->busy)
                return;
        free(w->path);
        free(w->dir);
        free(w->base);
        free(w->dir_base);
        free(w->root);
        free(w);
}

/* Watch the directory that is there now (found by the last read), if it may not be the one watched. */
static void rewatch_dir(npf_watch_t *w)
{
        bool other = w->dir_ino != w->watched_ino || w->dir_dev != w->watched_dev;

        if (!w->inotify || !w->dir_ino || (!other && !w->dir_moved))
                return;
        if (w->watched_ino || w->dir_moved) {
                uv_fs_event_stop(&w->event);
                if (uv_fs_event_start(&w->event, on_event, w->dir, 0) < 0)
                        return;         /* gone again: the poll brings the next try */
        }
        w->dir_moved = false;
        w->watched_dev = w->dir_dev;
        w->watched_ino = w->dir_ino;
}

static void read_done(uv_work_t *req, int status)
{
        npf_watch_t *w = req->data;
        bool deliver_any = w->deliver_any;

        w->busy = false;
        w->reads++;
        if (w->closing || status == UV_ECANCELED) {
                maybe_free(w);
                return;
        }
        rewatch_dir(w);
        if (w->again) {
                /* The file moved on while we read it: this reading is already old. A reading that
                 * was to be delivered whatever it found (the first, a reload) still is. It is read
                 * again a moment later, so that a file rewritten without pause is not read
                 * without pause: events until then join that reading. */
                w->again_deliver_any = w->again_deliver_any || deliver_any;
                w->again = false;
                uv_timer_start(&w->reread, on_reread, NPF_WATCH_REREAD_MS, 0);
                return;
        }
        if (w->rc == -EAGAIN) {
                /* Reads never agreed: the file is being written. A reading someone waits for
                 * (the first, a reload) is tried again once it has settled. */
                if (deliver_any)
                        uv_timer_start(&w->settle, on_settled, NPF_WATCH_SETTLE_MS, 0);
                return;
        }
        if (w->rc == 0 || deliver_any) {
                npf_watch_result_t res = {
                        .rc = w->rc,
                        .config = w->rc == 0 ? &w->config : NULL,
                        .autow = w->rc == 0 ? &w->autow : NULL,
                        .report = &w->report,
                        .content_hash = w->hash,
                        .mtime_s = w->mtime_s,
                        .mtime_ns = w->mtime_ns,
                };
                uv_timer_stop(&w->settle);
                w->cb(w, &res, w->data);
                return;
        }
        /* Invalid or missing: let it settle before anybody is told. */
        uv_timer_start(&w->settle, on_settled, NPF_WATCH_SETTLE_MS, 0);
}

static void start_read(npf_watch_t *w, bool deliver_any)
{
        if (w->closing)
                return;
        if (w->busy || uv_is_active((uv_handle_t *) &w->reread)) {
                w->again = true;
                w->again_deliver_any = w->again_deliver_any || deliver_any;
                return;
        }
        w->busy = true;
        w->deliver_any = deliver_any;
        w->again_deliver_any = false;
        w->work.data = w;
        if (uv_queue_work(w->loop, &w->work, read_work, read_done) < 0)
                w->busy = false;
}

static void on_settled(uv_timer_t *t)
{
        start_read(t->data, true);
}

static void on_reread(uv_timer_t *t)
{
        npf_watch_t *w = t->data;
        bool any = w->again_deliver_any;

        w->again = false;
        start_read(w, any);
}

static void on_poll(uv_fs_poll_t *h, int status, const uv_stat_t *prev, const uv_stat_t *curr)
{
        (void) status;
        (void) prev;
        (void) curr;
        start_read(h->data, false);
}

static void on_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
        npf_watch_t *w = h->data;

        (void) events;
        if (status < 0)
                return;
        /* An event on the directory itself (deleted, moved) comes with its own name, or none;
         * a file of the same name inside it only costs a needless new watch. */
        if (!filename || strcmp(filename, w->dir_base) == 0) {
                w->dir_moved = true;
                start_read(w, false);
        } else if (strcmp(filename, w->base) == 0) {
                start_read(w, false);
        }
}

static void on_handle_closed(uv_handle_t *h)
{
        npf_watch_t *w = h->data;

        w->open_handles--;
        maybe_free(w);
}

int npf_watch_start(uv_loop_t *loop, const char *path, unsigned poll_ms, bool inotify, const char *output_root,
                    npf_watch_cb cb, void *data, npf_watch_t **ret_watch)
{
        npf_watch_t *w = calloc(1, sizeof(*w));
        char *d = NULL, *b = NULL;
        int r = -ENOMEM;

        if (!w)
                return -ENOMEM;
        w->path = strdup(path);
        d = strdup(path);
        b = strdup(path);
        w->root = output_root ? strdup(output_root) : NULL;
        if (!w->path || !d || !b || (output_root && !w->root))
                goto fail;
        w->dir = strdup(dirname(d));
        w->base = strdup(basename(b));
        if (!w->dir || !w->base)
                goto fail;
        const char *slash = strrchr(w->dir, '/');
        w->dir_base = strdup(slash && slash[1] ? slash + 1 : w->dir);
        if (!w->dir_base)
                goto fail;
        w->loop = loop;
        w->cb = cb;
        w->data = data;
        w->inotify = inotify;

        uv_timer_init(loop, &w->settle);
        w->settle.data = w;
        uv_timer_init(loop, &w->reread);
        w->reread.data = w;
        uv_fs_poll_init(loop, &w->poll);
        w->poll.data = w;
        w->open_handles = 3;
        r = uv_fs_poll_start(&w->poll, on_poll, path, poll_ms);
        if (r < 0)
                goto fail_handles;
        if (inotify) {
                uv_fs_event_init(loop, &w->event);
                w->event.data = w;
                w->open_handles++;
                r = uv_fs_event_start(&w->event, on_event, w->dir, 0);
                if (r < 0)
                        goto fail_handles;
        }
        free(d);
        free(b);
        *ret_watch = w;
        start_read(w, true);
        return 0;

fail_handles:
        free(d);
        free(b);
        npf_watch_close(w);
        return r;
fail:
        free(d);
        free(b);
        free(w->root);
        free(w->path);
        free(w->dir);
        free(w->base);
        free(w->dir_base);
        free(w);
        return r;
}

void npf_watch_reload(npf_watch_t *w)
{
        start_read(w, true);
}

void npf_watch_close(npf_watch_t *w)
{
        if (w->closing)
                return;
        w->closing = true;
        if (w->busy)
                uv_cancel((uv_req_t *) &w->work);
        uv_close((uv_handle_t *) &w->settle, on_handle_closed);
        uv_close((uv_handle_t *) &w->reread, on_handle_closed);
        uv_close((uv_handle_t *) &w->poll, on_handle_closed);
        if (w->inotify)
                uv_close((uv_handle_t *) &w->event, on_handle_closed);
}

uint64_t npf_watch_reads(const npf_watch_t *w)
{
        return w->reads;
}
