/* SPDX-License-Identifier: MIT */
#include "daemon/manifest.h"
#include "conf/conf.h"
#include "lib/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MANIFEST "manifest.json"
#define MANIFEST_TMP ".manifest.json.npuprofd.tmp"

/* The regular files in the directory @dfd, as the rank lists them: [{name, size}]. */
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

static json_t *manifest_json(int dfd, const npf_window_record_t *rec, const char *reason)
{
        char host[256] = "";

        gethostname(host, sizeof(host) - 1);
        return json_pack("{s:I, s:o, s:s, s:I, s:{s:I, s:o, s:o, s:o}, s:s, s:o, s:s, s:o, s:I, s:s, s:s}",
                         "rank", (json_int_t) rec->rank,
                         "pid", rec->pid ? json_integer((json_int_t) rec->pid) : json_null(),
                         "host", host,
                         "generation", (json_int_t) rec->generation,
                         "window", "start_step", (json_int_t) rec->start_step,
                         "stop_step", rec->stop_step == NPF_STEP_NONE ? json_null() : json_integer(rec->stop_step),
                         "warmup", json_null(),
                         "last_step", rec->last_step >= rec->start_step ? json_integer(rec->last_step) : json_null(),
                         "backend", rec->backend == NPF_BACKEND_AUTO ? "none" : npf_conf_backend_name(rec->backend),
                         "files", list_files(dfd),
                         "status", "incomplete",
                         "started_unix_ms", rec->state_ns ? json_integer((json_int_t) (rec->state_ns / 1000000u))
                                                          : json_null(),
                         "ended_unix_ms", (json_int_t) (rec->ended_ns / 1000000u),
                         "message", reason,
                         "written_by", "npuprofd");
}

int npf_manifest_write_lost(int dfd, const npf_window_record_t *rec, const char *reason)
{
        int fd = -1, r = 0;
        json_t *m = NULL;
        struct stat st;

        if (faccessat(dfd, MANIFEST, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
                r = -EEXIST;
                goto out;
        }
        m = manifest_json(dfd, rec, reason);
        if (!m) {
                r = -ENOMEM;
                goto out;
        }
        /* A temporary left by an earlier daemon that died here is ours to replace. */
        unlinkat(dfd, MANIFEST_TMP, 0);
        fd = openat(dfd, MANIFEST_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
                r = -errno;
                goto out;
        }
        /* Every file of a window is its rank's: a daemon running as root gives it to the directory's owner. */
        if (geteuid() == 0 && (fstat(dfd, &st) < 0 || fchown(fd, st.st_uid, st.st_gid) < 0))
                r = -errno;
        if (r == 0 && json_dumpfd(m, fd, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
                r = -EIO;
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        /* Never over a manifest the rank wrote after all. */
        if (r == 0 && renameat2(dfd, MANIFEST_TMP, dfd, MANIFEST, RENAME_NOREPLACE) < 0)
                r = -errno;
        if (r < 0)
                unlinkat(dfd, MANIFEST_TMP, 0);
out:
        json_decref(m);
        return r;
}
