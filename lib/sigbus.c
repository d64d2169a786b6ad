/* SPDX-License-Identifier: MIT */
#include "lib/sigbus.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct watched {
        atomic_uintptr_t addr;          /* 0: a free slot */
        atomic_size_t len;
        atomic_bool hit;
} watched[NPF_SIGBUS_WATCH_MAX];

static struct sigaction previous;
static atomic_bool installed;
static uintptr_t page_size;

static void on_sigbus(int sig, siginfo_t *si, void *context)
{
        uintptr_t at = (uintptr_t) si->si_addr;
        int saved = errno;

        (void) sig;
        (void) context;
        for (size_t i = 0; i < NPF_SIGBUS_WATCH_MAX; i++) {
                uintptr_t base = atomic_load(&watched[i].addr);
                if (!base || at < base || at - base >= atomic_load(&watched[i].len))
                        continue;
                /* The page past the file's end becomes zeros of our own; the access is retried. */
                void *page = (void *) (at & ~(page_size - 1));
                if (mmap(page, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
                    MAP_FAILED) {
                        atomic_store(&watched[i].hit, true);
                        errno = saved;
                        return;
                }
                break;
        }
        /* Not a watched mapping: the fault is retried under the disposition it had before. */
        sigaction(SIGBUS, &previous, NULL);
        errno = saved;
}

int npf_sigbus_install(void)
{
        struct sigaction sa;

        if (atomic_exchange(&installed, true))
                return 0;
        page_size = (uintptr_t) sysconf(_SC_PAGESIZE);
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, &previous) < 0) {
                atomic_store(&installed, false);
                return -errno;
        }
        return 0;
}

int npf_sigbus_watch(void *addr, size_t len)
{
        for (size_t i = 0; i < NPF_SIGBUS_WATCH_MAX; i++) {
                if (atomic_load(&watched[i].addr))
                        continue;
                atomic_store(&watched[i].hit, false);
                atomic_store(&watched[i].len, len);
                atomic_store(&watched[i].addr, (uintptr_t) addr);
                return (int) i;
        }
        return -ENOSPC;
}

void npf_sigbus_unwatch(int slot)
{
        if (slot >= 0 && (size_t) slot < NPF_SIGBUS_WATCH_MAX)
                atomic_store(&watched[slot].addr, 0);
}

bool npf_sigbus_take(int slot)
{
        return slot >= 0 && (size_t) slot < NPF_SIGBUS_WATCH_MAX && atomic_exchange(&watched[slot].hit, false);
}
