/* SPDX-License-Identifier: MIT */
#include "lib/outroot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Append the components of @path to the normal path in @buf (@used bytes so far, "" or
 * starting with "/"), one "/" before each. Return: 0, -EINVAL for a ".." component, or
 * -ENAMETOOLONG when the result (with its NUL) would exceed @size bytes.
 */
static int append_components(char *buf, size_t *used, size_t size, const char *path)
{
        const char *s = path;

        while (*s) {
                while (*s == '/')
                        s++;
                size_t n = strcspn(s, "/");
                if (n == 0)
                        break;
                if (n == 1 && s[0] == '.') {
                        s += n;
                        continue;
                }
                if (n == 2 && s[0] == '.' && s[1] == '.')
                        return -EINVAL;
                if (*used + 1 + n + 1 > size)
                        return -ENAMETOOLONG;
                buf[(*used)++] = '/';
                memcpy(buf + *used, s, n);
                *used += n;
                buf[*used] = '\0';
                s += n;
        }
        return 0;
}

int npf_outroot_normalize(const char *path, char *ret, size_t size)
{
        char buf[4096];
        size_t used = 0;
        int r;

        if (!path || path[0] != '/')
                return -EINVAL;
        buf[0] = '\0';
        r = append_components(buf, &used, size < sizeof(buf) ? size : sizeof(buf), path);
        if (r < 0)
                return r;
        if (used == 0) {
                if (size < 2)
                        return -ENAMETOOLONG;
                memcpy(ret, "/", 2);
                return 0;
        }
        memcpy(ret, buf, used + 1);
        return 0;
}

/* Return: true if the normal path @p is @root or below it. */
static bool within(const char *root, const char *p)
{
        size_t n = strlen(root);

        if (strcmp(root, "/") == 0)
                return p[0] == '/';
        return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int npf_outroot_resolve(const char *root, const char *prof_dir, const char *key, char *ret, size_t size,
                        char *err)
{
        char buf[8192];
        size_t used = 0, cap = size < sizeof(buf) ? size : sizeof(buf);
        int r;

        buf[0] = '\0';
        /* A relative directory starts from the root; "/" as the root adds no component of its own. */
        if (prof_dir[0] != '/') {
                r = append_components(buf, &used, sizeof(buf), root);
                if (r < 0) {
                        snprintf(err, NPF_OUTROOT_ERR_MAX, "the output root %s is not in normal form", root);
                        return -EINVAL;
                }
        }
        r = append_components(buf, &used, sizeof(buf), prof_dir);
        if (r == -EINVAL) {
                snprintf(err, NPF_OUTROOT_ERR_MAX, "%s %.200s has a \"..\" component: it must stay under the output root %s",
                         key, prof_dir, root);
                return r;
        }
        if (used == 0) {
                buf[0] = '/';
                buf[1] = '\0';
                used = 1;
        }
        if (r == -ENAMETOOLONG || used + 1 > cap) {
                snprintf(err, NPF_OUTROOT_ERR_MAX, "%s %.64s%s is too long under the output root: at most %zu bytes "
                         "are allowed in all (root %.160s)", key, prof_dir, strlen(prof_dir) > 64 ? "..." : "",
                         cap ? cap - 1 : 0, root);
                return -ENAMETOOLONG;
        }
        if (!within(root, buf)) {
                snprintf(err, NPF_OUTROOT_ERR_MAX, "%s %.200s is outside the output root %s", key, prof_dir, root);
                return -EPERM;
        }
        memcpy(ret, buf, used + 1);
        return 0;
}

/* mkdir -p of the absolute @path (shorter than 4096 bytes), each component 0755. */
static void make_dirs(const char *path)
{
        char buf[4096];

        if (mkdir(path, 0755) == 0 || errno != ENOENT)
                return;
        snprintf(buf, sizeof(buf), "%s", path);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                (void) mkdir(buf, 0755);
                *p = '/';
        }
        (void) mkdir(buf, 0755);
}

/* The directory @name in @fd is a symbolic link: say where it leads. */
static int refuse_link(int fd, const char *name, const char *dir, size_t end, const char *key, char *err)
{
        char target[64];
        ssize_t n = readlinkat(fd, name, target, sizeof(target) - 1);

        target[n > 0 ? n : 0] = '\0';
        snprintf(err, NPF_OUTROOT_ERR_MAX, "%s %.80s reaches through the symbolic link %.*s (-> %s%s): nothing below "
                 "the output root may be a link", key, dir, (int) (end > 80 ? 80 : end), dir, target,
                 n >= (ssize_t) sizeof(target) - 1 ? "..." : "");
        return -ELOOP;
}

int npf_outroot_walk(const char *dir, size_t root_len, npf_outroot_walk_mode_t mode, const char *key, char *err)
{
        bool create = mode == NPF_OUTROOT_CREATE, check = mode == NPF_OUTROOT_CHECK;
        char root[4096], name[256];
        size_t len = strlen(dir);
        int fd, r;

        if (dir[0] != '/' || root_len == 0 || root_len > len || root_len >= sizeof(root) ||
            (dir[root_len] != '\0' && dir[root_len] != '/' && root_len != 1)) {
                snprintf(err, NPF_OUTROOT_ERR_MAX, "%s %.200s does not start with its output root", key, dir);
                return -EINVAL;
        }
        memcpy(root, dir, root_len);
        root[root_len] = '\0';
        /* The root, and the way to it, are the operator's: links are followed, and a rank may create it. */
        if (create)
                make_dirs(root);
        fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                if (check && (r == -ENOENT || r == -EACCES))
                        return 0;
                snprintf(err, NPF_OUTROOT_ERR_MAX, "the output root %.200s: %s", root, strerror(-r));
                return r;
        }
        for (const char *s = dir + root_len; *s;) {
                while (*s == '/')
                        s++;
                size_t n = strcspn(s, "/");
                if (n == 0)
                        break;
                if (n >= sizeof(name)) {
                        close(fd);
                        snprintf(err, NPF_OUTROOT_ERR_MAX, "%s %.200s has a component longer than %zu bytes", key,
                                 dir, sizeof(name) - 1);
                        return -ENAMETOOLONG;
                }
                memcpy(name, s, n);
                name[n] = '\0';
                s += n;
                if (strcmp(name, "..") == 0) {
                        close(fd);
                        snprintf(err, NPF_OUTROOT_ERR_MAX, "%s %.200s has a \"..\" component", key, dir);
                        return -EINVAL;
                }
                if (create && mkdirat(fd, name, 0755) < 0 && errno != EEXIST) {
                        r = -errno;
                        close(fd);
                        snprintf(err, NPF_OUTROOT_ERR_MAX, "cannot create %.*s: %s", (int) (s - dir > 200 ? 200 : s - dir),
                                 dir, strerror(-r));
                        return r;
                }
                int next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0) {
                        struct stat st;
                        r = -errno;
                        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                                r = refuse_link(fd, name, dir, (size_t) (s - dir), key, err);
                        else if (check && (r == -ENOENT || r == -EACCES))
                                r = 0;
                        else if (r == -ENOTDIR)
                                snprintf(err, NPF_OUTROOT_ERR_MAX, "%s %.200s: %.*s is not a directory", key, dir,
                                         (int) (s - dir > 200 ? 200 : s - dir), dir);
                        else
                                snprintf(err, NPF_OUTROOT_ERR_MAX, "%s %.200s: cannot open %.*s: %s", key, dir,
                                         (int) (s - dir > 200 ? 200 : s - dir), dir, strerror(-r));
                        close(fd);
                        return r;
                }
                close(fd);
                fd = next;
        }
        if (check) {
                close(fd);
                return 0;
        }
        return fd;
}
