/* SPDX-License-Identifier: MIT */
#include "daemon/notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

static void on_watchdog(uv_timer_t *t)
{
        npf_notify_t *n = t->data;

        sd_notify(0, "WATCHDOG=1");
        if (n->tick_cb)
                n->tick_cb(n->data);
}

int npf_notify_init(npf_notify_t *n, uv_loop_t *loop)
{
        uint64_t usec = 0;
        int r;

        memset(n->status, 0, sizeof(n->status));
        r = uv_timer_init(loop, &n->watchdog);
        if (r < 0)
                return r;
        n->watchdog.data = n;
        if (sd_watchdog_enabled(0, &usec) <= 0)
                usec = 0;
        n->watchdog_usec = usec;
        if (usec == 0)
                return 0;
        uint64_t half_ms = usec / 2000 ? usec / 2000 : 1;
        return uv_timer_start(&n->watchdog, on_watchdog, half_ms, half_ms);
}

void npf_notify_ready(npf_notify_t *n)
{
        (void) n;
        sd_notify(0, "READY=1");
}

void npf_notify_reloading(npf_notify_t *n)
{
        struct timespec ts;

        (void) n;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
                   (unsigned long long) ts.tv_sec * 1000000ull + (unsigned long long) ts.tv_nsec / 1000);
}

void npf_notify_stopping(npf_notify_t *n)
{
        (void) n;
        sd_notify(0, "STOPPING=1");
}

void npf_notify_status(npf_notify_t *n, const char *fmt, ...)
{
        char buf[sizeof(n->status)];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (strcmp(buf, n->status) == 0)
                return;
        memcpy(n->status, buf, sizeof(buf));
        sd_notifyf(0, "STATUS=%s", buf);
}

void npf_notify_close(npf_notify_t *n, uv_close_cb close_cb)
{
        uv_timer_stop(&n->watchdog);
        uv_close((uv_handle_t *) &n->watchdog, close_cb);
}
