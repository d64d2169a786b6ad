/* SPDX-License-Identifier: MIT */
#include "daemon/log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <uv.h>

#define QUEUE_LINES 512         /* lines that may wait for the writer; more are dropped and counted */
#define BATCH_LINES 64          /* lines the writer takes from the queue at once */

typedef struct entry {
        int priority;
        int64_t generation, rank;
        struct timespec when;
        char msg[1024];
} entry_t;

static bool journal;
static const char *config = "";

/* The writer thread and the lines waiting for it: a ring, under @lock. */
static struct {
        bool running;
        bool stopping;
        uv_thread_t thread;
        uv_mutex_t lock;
        uv_cond_t more;         /* signalled when a line is queued, or on stop */
        entry_t ring[QUEUE_LINES];
        unsigned head, count;
        uint64_t dropped;       /* since the last line written */
} q;

/* JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd connected stderr to. */
static bool stderr_is_journal(void)
{
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(2, &st) < 0)
                return false;
        return st.st_dev == (dev_t) dev && st.st_ino == (ino_t) ino;
}

void npf_log_init(int target, const char *config_path)
{
        journal = target == NPF_LOG_JOURNAL || (target == NPF_LOG_AUTO && stderr_is_journal());
        config = config_path ? config_path : "";
}

bool npf_log_to_journal(void)
{
        return journal;
}

static void write_entry(const entry_t *e)
{
        static const char *const level[] = { "emerg", "alert", "crit", "error", "warning", "notice", "info", "debug" };
        char gen[32] = "", rk[32] = "";

        if (e->generation != NPF_LOG_NONE)
                snprintf(gen, sizeof(gen), "%" PRId64, e->generation);
        if (e->rank != NPF_LOG_NONE)
                snprintf(rk, sizeof(rk), "%" PRId64, e->rank);

        if (journal) {
                char f_msg[1100], f_prio[32], f_config[4200], f_gen[64], f_rank[64];
                struct iovec iov[6];
                int n = 0;
#define FIELD(buf, ...) (snprintf(buf, sizeof(buf), __VA_ARGS__), \
                         iov[n++] = (struct iovec) { .iov_base = buf, .iov_len = strlen(buf) })
                FIELD(f_msg, "MESSAGE=%s", e->msg);
                FIELD(f_prio, "PRIORITY=%d", e->priority);
                iov[n++] = (struct iovec) { .iov_base = (char *) "SYSLOG_IDENTIFIER=npuprofd", .iov_len = 26 };
                if (config[0])
                        FIELD(f_config, "NPUPROF_CONFIG=%s", config);
                if (gen[0])
                        FIELD(f_gen, "NPUPROF_GENERATION=%s", gen);
                if (rk[0])
                        FIELD(f_rank, "NPUPROF_RANK=%s", rk);
#undef FIELD
                sd_journal_sendv(iov, n);
                return;
        }
        /* RFC 3339 local time with its offset, so that nodes' logs in other zones read side by side. */
        struct tm tm;
        char when[32], zone[8];
        localtime_r(&e->when.tv_sec, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        strftime(zone, sizeof(zone), "%z", &tm);
        fprintf(stderr, "%s.%03ld%.3s:%.2s npuprofd %s: %s%s%s%s%s\n", when, e->when.tv_nsec / 1000000, zone,
                zone + 3, level[e->priority & 7], e->msg, gen[0] ? " generation=" : "", gen, rk[0] ? " rank=" : "", rk);
}

static void write_dropped(uint64_t dropped)
{
        entry_t e = { .priority = LOG_WARNING, .generation = NPF_LOG_NONE, .rank = NPF_LOG_NONE };

        clock_gettime(CLOCK_REALTIME, &e.when);
        snprintf(e.msg, sizeof(e.msg), "%" PRIu64 " log lines were dropped: the log did not take them fast enough",
                 dropped);
        write_entry(&e);
}

/* The writer: takes what is queued, a batch at a time, and writes it outside the lock. */
static void writer(void *arg)
{
        static entry_t batch[BATCH_LINES];

        (void) arg;
        uv_mutex_lock(&q.lock);
        for (;;) {
                while (q.count == 0 && !q.stopping)
                        uv_cond_wait(&q.more, &q.lock);
                if (q.count == 0 && q.stopping)
                        break;
                unsigned n = q.count < BATCH_LINES ? q.count : BATCH_LINES;
                for (unsigned i = 0; i < n; i++)
                        batch[i] = q.ring[(q.head + i) % QUEUE_LINES];
                q.head = (q.head + n) % QUEUE_LINES;
                q.count -= n;
                uint64_t dropped = q.count == 0 ? q.dropped : 0;
                if (dropped)
                        q.dropped = 0;
                uv_mutex_unlock(&q.lock);
                for (unsigned i = 0; i < n; i++)
                        write_entry(&batch[i]);
                if (dropped)
                        write_dropped(dropped);
                uv_mutex_lock(&q.lock);
        }
        uv_mutex_unlock(&q.lock);
}

int npf_log_start_writer(void)
{
        int r;

        if (q.running)
                return 0;
        /* The writer's localtime_r() reads the time zone; it is loaded once, here, first. */
        tzset();
        /* On failure, lines stay written where they are logged. */
        if ((r = uv_mutex_init(&q.lock)) < 0)
                return r;
        if ((r = uv_cond_init(&q.more)) < 0) {
                uv_mutex_destroy(&q.lock);
                return r;
        }
        if ((r = uv_thread_create(&q.thread, writer, NULL)) < 0) {
                uv_cond_destroy(&q.more);
                uv_mutex_destroy(&q.lock);
                return r;
        }
        q.running = true;
        return 0;
}

void npf_log_stop_writer(void)
{
        if (!q.running)
                return;
        uv_mutex_lock(&q.lock);
        q.stopping = true;
        uv_cond_signal(&q.more);
        uv_mutex_unlock(&q.lock);
        uv_thread_join(&q.thread);
        uv_cond_destroy(&q.more);
        uv_mutex_destroy(&q.lock);
        q.running = q.stopping = false;
        if (q.dropped)
                write_dropped(q.dropped);
        q.dropped = 0;
        fflush(stderr);
}

void npf_log(int priority, int64_t generation, int64_t rank, const char *fmt, ...)
{
        entry_t *e, direct;
        va_list ap;

        if (q.running) {
                uv_mutex_lock(&q.lock);
                if (q.count == QUEUE_LINES) {
                        q.dropped++;
                        uv_mutex_unlock(&q.lock);
                        return;
                }
                e = &q.ring[(q.head + q.count) % QUEUE_LINES];
        } else {
                e = &direct;
        }
        e->priority = priority;
        e->generation = generation;
        e->rank = rank;
        clock_gettime(CLOCK_REALTIME, &e->when);
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        if (!q.running) {
                write_entry(e);
                return;
        }
        q.count++;
        uv_cond_signal(&q.more);
        uv_mutex_unlock(&q.lock);
}

bool npf_log_once_new(npf_log_once_t *o, const char *problem)
{
        if (strncmp(o->last, problem, sizeof(o->last) - 1) == 0)
                return false;
        snprintf(o->last, sizeof(o->last), "%s", problem);
        return true;
}

bool npf_log_once_clear(npf_log_once_t *o)
{
        bool was = o->last[0] != '\0';

        o->last[0] = '\0';
        return was;
}

const char *npf_log_once_last(const npf_log_once_t *o)
{
        return o->last[0] ? o->last : NULL;
}
