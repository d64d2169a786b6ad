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

static bool journal;
static const char *config = "";

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

void npf_log(int priority, int64_t generation, int64_t rank, const char *fmt, ...)
{
        static const char *const level[] = { "emerg", "alert", "crit", "error", "warning", "notice", "info", "debug" };
        char msg[1024], gen[32] = "", rk[32] = "";
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (generation != NPF_LOG_NONE)
                snprintf(gen, sizeof(gen), "%" PRId64, generation);
        if (rank != NPF_LOG_NONE)
                snprintf(rk, sizeof(rk), "%" PRId64, rank);

        if (journal) {
                char f_msg[1100], f_prio[32], f_config[4200], f_gen[64], f_rank[64];
                struct iovec iov[6];
                int n = 0;
#define FIELD(buf, ...) (snprintf(buf, sizeof(buf), __VA_ARGS__), \
                         iov[n++] = (struct iovec) { .iov_base = buf, .iov_len = strlen(buf) })
                FIELD(f_msg, "MESSAGE=%s", msg);
                FIELD(f_prio, "PRIORITY=%d", priority);
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
        struct timespec ts;
        struct tm tm;
        char when[32];
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        fprintf(stderr, "%s.%03ld npuprofd %s: %s%s%s%s%s\n", when, ts.tv_nsec / 1000000,
                level[priority & 7], msg, gen[0] ? " generation=" : "", gen, rk[0] ? " rank=" : "", rk);
}
