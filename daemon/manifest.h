/* SPDX-License-Identifier: MIT */
/*
 * The manifest of a lost window. A rank writes its window's manifest.json when it closes
 * the window; a rank that died while collecting never does, so the daemon writes one for
 * it, through the rank's own writer (lib/manifest.h), with "status": "incomplete", so that
 * whoever finds the directory knows its data is partial and why.
 */
#ifndef NPUPROF_DAEMON_MANIFEST_H
#define NPUPROF_DAEMON_MANIFEST_H

#include "daemon/sweep.h"

/*
 * npf_manifest_write_lost() - write manifest.json into the window directory @dfd (opened
 * by npf_outroot_walk(), so that no link led to it) for the lost window @rec, saying
 * @reason. Written whole (lib/atomicfile.h), only where no manifest.json exists yet, and
 * following no link inside the directory. A daemon running as root gives the file to the
 * directory's owner.
 * Return: 0; -EEXIST when the directory already has a manifest; or -errno.
 * Context: the daemon's loop (a few small writes, two fsyncs).
 */
int npf_manifest_write_lost(int dfd, const npf_window_record_t *rec, const char *reason);

#endif /* NPUPROF_DAEMON_MANIFEST_H */
