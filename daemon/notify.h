/* SPDX-License-Identifier: MIT */
/*
 * sd_notify from the daemon: READY, STATUS (sent only when it changes), RELOADING with
 * MONOTONIC_USEC, STOPPING, and WATCHDOG=1 at half of WATCHDOG_USEC from a timer of the
 * event loop itself, so that a stuck loop stops petting the watchdog.
 */
#ifndef NPUPROF_DAEMON_NOTIFY_H
#define NPUPROF_DAEMON_NOTIFY_H

#include <stdint.h>
#include <uv.h>

typedef struct npf_notify {
        uv_timer_t watchdog;
        uint64_t watchdog_usec;         /* 0 when systemd asked for no watchdog */
        void (*tick_cb)(void *data);    /* also run at every watchdog tick, may be NULL */
        void *data;
        char status[256];
} npf_notify_t;

/* Start the watchdog timer on @loop if systemd asked for one. Return: 0 or -errno. */
int npf_notify_init(npf_notify_t *n, uv_loop_t *loop);

void npf_notify_ready(npf_notify_t *n);
void npf_notify_reloading(npf_notify_t *n);
void npf_notify_stopping(npf_notify_t *n);

/* Send STATUS=@fmt... unless it is the same as the last one sent. */
void npf_notify_status(npf_notify_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Close the timer; the struct may be freed in @close_cb. */
void npf_notify_close(npf_notify_t *n, uv_close_cb close_cb);

#endif /* NPUPROF_DAEMON_NOTIFY_H */
