/* SPDX-License-Identifier: MIT */
#include "daemon/keptfile.h"
#include "daemon/log.h"
#include "lib/atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One write in the thread pool: it owns its text; @error is its outcome, as -errno. */
typedef struct write_job {
        uv_work_t work;
        npf_kept_file_t *file;
        char *text;
        int error;
        char what[PATH_MAX + 32];       /* the step that failed */
} write_job_t;

struct npf_kept_file {
        uv_timer_t timer;
        char *path, *dir, *name;        /* the file, its directory and its name in it */
        const char *what;               /* the file in the log's words */
        npf_kept_text_fn text_fn;
        void *data;
        char *written;                  /* the text of the last write queued */
        char *pending;                  /* a text waiting for the write in flight */
        bool busy;                      /* a write is in flight */
        bool failing;                   /* the last write failed: changes wait for the interval */
        bool closing, timer_closed;
        uint64_t interval_ms;
        uint64_t writes, errors;
        int last_error;
        npf_log_once_t failure;         /* the failure last logged */
};

/* Replace the file at m->path by @text. Return: 0, or -errno with the step in @what. */
static int replace_file(const npf_kept_file_t *m, const char *text, char *what, size_t what_len)
{
        npf_atomicfile_t f;
        int dfd = open(m->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

        if (dfd < 0) {
                r = -errno;
                snprintf(what, what_len, "open %s", m->dir);
                return r;
        }
        /* 0644 whatever the umask: the collector reads it as another user. */
        r = npf_atomicfile_write(&f, dfd, m->name, "tmp", 0644, NPF_ATOMICFILE_EXACT_MODE, text, strlen(text));
        if (r < 0)
                snprintf(what, what_len, "%s %s/%s", f.step, m->dir, npf_atomicfile_failed_name(&f));
        close(dfd);
        return r;
}

static void on_work(uv_work_t *w)
{
        write_job_t *job = w->data;

        job->error = replace_file(job->file, job->text, job->what, sizeof(job->what));
}

static void maybe_free(npf_kept_file_t *m)
{
        if (!m->closing || m->busy || !m->timer_closed)
                return;
        free(m->path);
        free(m->dir);
        free(m->name);
        free(m->written);
        free(m->pending);
        free(m);
}

static void queue_write(npf_kept_file_t *m, char *text);

static void on_written(uv_work_t *w, int status)
{
        write_job_t *job = w->data;
        npf_kept_file_t *m = job->file;
        int error = status < 0 ? status : job->error;

        m->busy = false;
        if (error < 0) {
                char problem[sizeof(m->failure.last)];
                m->errors++;
                m->last_error = error;
                m->failing = true;
                snprintf(problem, sizeof(problem), "%s: %s", job->what, strerror(-error));
                if (npf_log_once_new(&m->failure, problem))
                        npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE,
                                "cannot write %s %s: %s (tried again every %.3g s)", m->what, m->path,
                                problem, (double) m->interval_ms / 1000.0);
        } else {
                m->writes++;
                m->last_error = 0;
                m->failing = false;
                if (npf_log_once_clear(&m->failure))
                        npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "%s %s is written again", m->what,
                                m->path);
        }
        free(job->text);
        free(job);
        if (m->pending) {
                char *next = m->pending;
                m->pending = NULL;
                queue_write(m, next);
        }
        maybe_free(m);
}

/* Write @text (taken over): now, or after the write in flight. */
static void queue_write(npf_kept_file_t *m, char *text)
{
        write_job_t *job;
        char *copy = strdup(text);

        if (m->busy) {
                free(copy);
                free(m->pending);
                m->pending = text;
                return;
        }
        job = calloc(1, sizeof(*job));
        if (!job || !copy) {
                free(job);
                free(copy);
                free(text);
                m->errors++;
                m->last_error = -ENOMEM;
                return;
        }
        free(m->written);
        m->written = copy;
        job->work.data = job;
        job->file = m;
        job->text = text;
        if (uv_queue_work(m->timer.loop, &job->work, on_work, on_written) < 0) {
                free(job->text);
                free(job);
                m->errors++;
                return;
        }
        m->busy = true;
}

static void write_now(npf_kept_file_t *m)
{
        char *text = m->text_fn(m->data);

        if (text)
                queue_write(m, text);
}

static void on_interval(uv_timer_t *t)
{
        write_now(t->data);
}

int npf_kept_file_new(uv_loop_t *loop, const char *path, const char *what, uint64_t interval_ms,
                      npf_kept_text_fn text, void *data, npf_kept_file_t **ret_file)
{
        npf_kept_file_t *m = calloc(1, sizeof(*m));
        const char *base = strrchr(path, '/');

        if (!m)
                return -ENOMEM;
        if (!base || !base[1]) {
                free(m);
                return -EINVAL;
        }
        /* Its temporary is DIR/.NAME.tmp: hidden, and not *.prom or *.json, which the readers take. */
        m->path = strdup(path);
        m->dir = base == path ? strdup("/") : strndup(path, (size_t) (base - path));
        m->name = strdup(base + 1);
        if (!m->path || !m->dir || !m->name) {
                free(m->path);
                free(m->dir);
                free(m->name);
                free(m);
                return -ENOMEM;
        }
        m->what = what;
        m->text_fn = text;
        m->data = data;
        m->interval_ms = interval_ms;
        uv_timer_init(loop, &m->timer);
        m->timer.data = m;
        uv_timer_start(&m->timer, on_interval, interval_ms, interval_ms);
        write_now(m);
        *ret_file = m;
        return 0;
}

void npf_kept_file_update(npf_kept_file_t *m)
{
        char *text;

        if (!m || m->closing || m->failing)
                return;
        text = m->text_fn(m->data);
        if (!text)
                return;
        const char *latest = m->pending ? m->pending : m->written;
        if (latest && strcmp(text, latest) == 0)
                free(text);
        else
                queue_write(m, text);
}

void npf_kept_file_put(npf_kept_file_t *m, char *text)
{
        if (!m || m->closing || m->failing || !text)
                free(text);
        else
                queue_write(m, text);
}

uint64_t npf_kept_file_errors(const npf_kept_file_t *m)
{
        return m ? m->errors : 0;
}

json_t *npf_kept_file_status_json(const npf_kept_file_t *m)
{
        const char *failure = npf_log_once_last(&m->failure);

        return json_pack("{s:s, s:f, s:I, s:I, s:o}", "path", m->path, "interval_s", (double) m->interval_ms / 1000.0,
                         "writes", (json_int_t) m->writes, "errors", (json_int_t) m->errors, "last_error",
                         m->last_error ? json_string(failure ? failure : strerror(-m->last_error)) : json_null());
}

static void on_timer_closed(uv_handle_t *h)
{
        npf_kept_file_t *m = h->data;

        m->timer_closed = true;
        maybe_free(m);
}

void npf_kept_file_close(npf_kept_file_t *m)
{
        if (!m || m->closing)
                return;
        write_now(m);
        m->closing = true;
        uv_timer_stop(&m->timer);
        uv_close((uv_handle_t *) &m->timer, on_timer_closed);
}
