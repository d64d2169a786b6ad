/* SPDX-License-Identifier: MIT */
/*
 * The manifest of a lost window. A rank writes its window's manifest.json when it closes
 * the window; a rank that died while collecting never does, so the daemon writes one for
 * it, with the rank's own layout (rank/rank.c) and "status": "incomplete", so that whoever
 * finds the directory knows its data is partial and why.
 */
#ifndef NPUPROF_DAEMON_MANIFEST_H
#define NPUPROF_DAEMON_MANIFEST_H

#include "daemon/sweep.h"

/*
 * npf_manifest_write_lost() - write @dir/manifest.json for the lost window @rec, saying
 * @reason. Written atomically (a temporary renamed into place), and only where no
 * manifest.json exists yet. No symbolic link is followed, in @dir's path or inside it.
 * Return: 0; -EEXIST when the directory already has a manifest; or -errno (-ELOOP when a
 * component of @dir is a symbolic link).
 * Context: the daemon's loop (a few small writes, one fsync).
 */
int npf_manifest_write_lost(const char *dir, const npf_window_record_t *rec, const char *reason);

#endif /* NPUPROF_DAEMON_MANIFEST_H */
