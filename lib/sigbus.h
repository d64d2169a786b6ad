/* SPDX-License-Identifier: MIT */
/*
 * Mappings of files that others may cut short under us. A shared-memory object that another
 * user can write (a job's own, or the rank table every rank opens) can be truncated at any
 * time, and touching the mapping past its new end raises SIGBUS, which would end the
 * process. Watched mappings are spared that: the handler maps a page of anonymous memory
 * over the faulting one (as systemd's sigbus.c does for the journal), notes the hit, and the
 * access goes on; the owner of the mapping takes the note and lets the mapping go or puts it
 * right. A fault anywhere else is what it was: the previous disposition takes it.
 *
 * Context: watch, unwatch and take from one thread, the one that touches the mappings.
 */
#ifndef NPUPROF_LIB_SIGBUS_H
#define NPUPROF_LIB_SIGBUS_H

#include <stdbool.h>
#include <stddef.h>

#define NPF_SIGBUS_WATCH_MAX 64u

/* Install the handler (once; later calls do nothing). Return: 0 or a negative errno. */
int npf_sigbus_install(void);

/* Watch @len bytes at @addr. Return: a slot for the others, or -ENOSPC. */
int npf_sigbus_watch(void *addr, size_t len);

/* Stop watching @slot (< 0: nothing), before its mapping is unmapped. */
void npf_sigbus_unwatch(int slot);

/* Whether a fault hit @slot since the last call (the note is cleared). */
bool npf_sigbus_take(int slot);

#endif /* NPUPROF_LIB_SIGBUS_H */
