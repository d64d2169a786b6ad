/* SPDX-License-Identifier: MIT */
#include "lib/atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNIQUE_TRIES 100

static int fail(npf_atomicfile_t *f, const char *step, int r)
{
        f->step = step;
        return r;
}

/* Create the temporary @f->tmp; a leftover of the same name is removed first. */
static int create_named(npf_atomicfile_t *f, unsigned mode)
{
        if (unlinkat(f->dfd, f->tmp, 0) < 0 && errno != ENOENT)
                return fail(f, "remove", -errno);
        f->fd = openat(f->dfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        return f->fd < 0 ? fail(f, "create", -errno) : 0;
}

/* Create a temporary whose name no other write uses: ".NAME.XXXXXXXX", random. */
static int create_unique(npf_atomicfile_t *f, unsigned mode)
{
        for (int i = 0; i < UNIQUE_TRIES; i++) {
                uint32_t x;
                if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != sizeof(x))
                        x = (uint32_t) getpid() * 2654435761u + (uint32_t) i;
                if (snprintf(f->tmp, sizeof(f->tmp), ".%s.%08x", f->name, x) >= (int) sizeof(f->tmp))
                        return fail(f, "create", -ENAMETOOLONG);
                f->fd = openat(f->dfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (f->fd >= 0)
                        return 0;
                if (errno != EEXIST)
                        return fail(f, "create", -errno);
        }
        return fail(f, "create", -EEXIST);
}

int npf_atomicfile_begin(npf_atomicfile_t *f, int dfd, const char *name, const char *tag, unsigned mode,
                         unsigned flags)
{
        struct stat st;
        int r;

        *f = (npf_atomicfile_t) { .dfd = dfd, .fd = -1 };
        if (snprintf(f->name, sizeof(f->name), "%s", name) >= (int) sizeof(f->name) || strchr(name, '/'))
                return fail(f, "create", -EINVAL);
        if (tag) {
                if (snprintf(f->tmp, sizeof(f->tmp), ".%s.%s", name, tag) >= (int) sizeof(f->tmp))
                        return fail(f, "create", -ENAMETOOLONG);
                r = create_named(f, mode);
        } else {
                r = create_unique(f, mode);
        }
        if (r < 0)
                return r;
        if (((flags & NPF_ATOMICFILE_DIR_OWNER) && geteuid() == 0 &&
             (fstat(dfd, &st) < 0 || fchown(f->fd, st.st_uid, st.st_gid) < 0)) ||
            ((flags & NPF_ATOMICFILE_EXACT_MODE) && fchmod(f->fd, mode & 07777) < 0)) {
                r = -errno;
                npf_atomicfile_abort(f);
                return fail(f, "create", r);
        }
        return 0;
}

int npf_atomicfile_append(npf_atomicfile_t *f, const void *data, size_t len)
{
        const char *p = data;

        for (size_t done = 0; done < len;) {
                ssize_t n = write(f->fd, p + done, len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return fail(f, "write", -errno);
                done += (size_t) n;
        }
        return 0;
}

int npf_atomicfile_commit(npf_atomicfile_t *f, unsigned flags)
{
        int r = 0, dir;

        if (fsync(f->fd) < 0)
                r = fail(f, "sync", -errno);
        /* A network file system may report a failed write only when the file is closed. */
        if (close(f->fd) < 0 && r == 0)
                r = fail(f, "write", -errno);
        f->fd = -1;
        if (r == 0 && renameat2(f->dfd, f->tmp, f->dfd, f->name, (flags & NPF_ATOMICFILE_NOREPLACE) ? RENAME_NOREPLACE : 0) < 0)
                r = fail(f, "rename over", -errno);
        if (r < 0) {
                unlinkat(f->dfd, f->tmp, 0);
                return r;
        }
        /* The rename is durable once the directory is (@dfd may be an O_PATH descriptor). */
        dir = openat(f->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0 || fsync(dir) < 0)
                r = fail(f, "sync the directory", -errno);
        if (dir >= 0)
                close(dir);
        return r;
}

void npf_atomicfile_abort(npf_atomicfile_t *f)
{
        if (f->fd < 0)
                return;
        close(f->fd);
        f->fd = -1;
        unlinkat(f->dfd, f->tmp, 0);
}

int npf_atomicfile_write(npf_atomicfile_t *f, int dfd, const char *name, const char *tag, unsigned mode,
                         unsigned flags, const void *data, size_t len)
{
        int r = npf_atomicfile_begin(f, dfd, name, tag, mode, flags);

        if (r == 0 && (r = npf_atomicfile_append(f, data, len)) < 0)
                npf_atomicfile_abort(f);
        return r < 0 ? r : npf_atomicfile_commit(f, flags);
}

const char *npf_atomicfile_failed_name(const npf_atomicfile_t *f)
{
        if (f->step && strcmp(f->step, "rename over") == 0)
                return f->name;
        if (f->step && strcmp(f->step, "sync the directory") == 0)
                return ".";
        return f->tmp;
}
