/* SPDX-License-Identifier: MIT */
/*
 * `npuprofctl start` and `stop`: edit the watched profiler_config.json in its own dialect
 * (conf/write.h), validate the result with the daemon's parser, and replace the file whole
 * (lib/atomicfile.h), keeping its mode and owner.
 */
#ifndef NPUPROF_CLIENT_EDIT_H
#define NPUPROF_CLIENT_EDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf/write.h"

#define NPF_EDIT_ERR_MAX NPF_CONF_WRITE_ERR_MAX         /* bytes of the message buffers below */

/*
 * npf_edit_replace() - replace the file at @path by the @len bytes at @text: a temporary
 * file in the same directory with @mode (and @uid/@gid when they differ from ours and we
 * may set them), fsync, rename over @path, fsync of the directory. Nothing of @path is
 * touched when it fails.
 * Return: 0, or -errno with the reason in @err (NPF_EDIT_ERR_MAX bytes).
 */
int npf_edit_replace(const char *path, const char *text, size_t len, unsigned mode, unsigned uid, unsigned gid,
                     char *err);

/*
 * npf_cli_edit() - `start` (@a not NULL) or `stop` (@a NULL) on @config_path, or, when it
 * is NULL, on the file the daemon at @socket_path watches (its status' config.path).
 * Prints what was done (one JSON object with @json) on stdout, errors on stderr.
 * Return: the exit status: 0 written, 1 invalid or refused (the file untouched), 3 the
 * daemon could not be reached for the path.
 */
int npf_cli_edit(const char *socket_path, const char *config_path, const npf_conf_window_t *a, bool json);

#endif /* NPUPROF_CLIENT_EDIT_H */
