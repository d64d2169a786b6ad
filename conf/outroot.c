/* SPDX-License-Identifier: MIT */
#include "conf/outroot.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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
