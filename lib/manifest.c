/* SPDX-License-Identifier: MIT */
#include "lib/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST "manifest.json"

/* The regular files in the directory @dfd but the manifest and hidden ones: [{name, size}]. */
static json_t *list_files(int dfd)
{
        json_t *files = json_array();
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *e;

        if (!d && fd >= 0)
                close(fd);
        while (d && files && (e = readdir(d))) {
                struct stat st;
                if (e->d_name[0] == '.' || strcmp(e->d_name, MANIFEST) == 0)
                        continue;
                if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
                        json_array_append_new(files, json_pack("{s:s, s:I}", "name", e->d_name, "size",
                                                               (json_int_t) st.st_size));
        }
        if (d)
                closedir(d);
        return files;
}

static json_t *known(int64_t v)
{
        return v < 0 ? json_null() : json_integer((json_int_t) v);
}

static json_t *manifest_json(int dfd, const npf_manifest_t *m)
{
        char host[256] = "";

        gethostname(host, sizeof(host) - 1);
        json_t *o = json_pack("{s:I, s:o, s:s, s:I, s:{s:I, s:o, s:o, s:o}, s:s, s:o, s:s, s:o, s:I, s:o}",
                              "rank", (json_int_t) m->rank, "pid", known(m->pid), "host", host,
                              "generation", (json_int_t) m->generation,
                              "window", "start_step", (json_int_t) m->start_step, "stop_step", known(m->stop_step),
                              "warmup", known(m->warmup),
                              "last_step", m->last_step >= m->start_step ? json_integer(m->last_step) : json_null(),
                              "backend", m->backend, "files", list_files(dfd),
                              "status", m->complete ? "complete" : "incomplete",
                              "started_unix_ms", known(m->started_unix_ms),
                              "ended_unix_ms", (json_int_t) m->ended_unix_ms,
                              "message", m->message && m->message[0] ? json_string(m->message) : json_null());
        if (o && m->runtime && json_object_size(m->runtime) > 0)
                json_object_set(o, "runtime", m->runtime);
        if (o && m->written_by)
                json_object_set_new(o, "written_by", json_string(m->written_by));
        if (o && m->reason && m->reason[0])
                json_object_set_new(o, "reason", json_string(m->reason));
        return o;
}

int npf_manifest_write(npf_atomicfile_t *f, int dfd, const npf_manifest_t *m, const char *tag, unsigned flags)
{
        json_t *o = manifest_json(dfd, m);
        char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        int r;

        json_decref(o);
        if (!text) {
                *f = (npf_atomicfile_t) { .dfd = dfd, .fd = -1, .step = "write" };
                return -ENOMEM;
        }
        r = npf_atomicfile_write(f, dfd, MANIFEST, tag, 0644, flags, text, strlen(text));
        free(text);
        return r;
}
