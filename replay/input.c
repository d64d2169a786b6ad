/* SPDX-License-Identifier: MIT */
/* Telling inputs apart, finding them in a window, mapping them. */
#include "replay/input.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static bool has(const void *head, size_t len, const char *s)
{
        return memmem(head, len, s, strlen(s)) != NULL;
}

int npf_input_sniff(const void *head, size_t len, npf_input_kind_t *ret)
{
        if (len >= 2 && *(const unsigned char *) head == 0x80) {
                *ret = NPF_INPUT_SNAPSHOT;
                return 0;
        }
        if (has(head, len, "\"traceEvents\"") || has(head, len, "\"ph\"")) {
                *ret = NPF_INPUT_TRACE;
                return 0;
        }
        if (has(head, len, "\"segments\"") || has(head, len, "\"device_traces\"") || has(head, len, "\"total_size\"")) {
                *ret = NPF_INPUT_SNAPSHOT;
                return 0;
        }
        return -ENOENT;
}

int npf_input_classify(const char *path, npf_input_kind_t *ret)
{
        char *head = malloc(NPF_INPUT_SNIFF_BYTES);
        ssize_t n;
        int fd, r;

        if (!head)
                return -ENOMEM;
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
                r = -errno;
                free(head);
                return r;
        }
        n = read(fd, head, NPF_INPUT_SNIFF_BYTES);
        r = n < 0 ? -errno : n == 0 ? -ENODATA : npf_input_sniff(head, (size_t) n, ret);
        close(fd);
        free(head);
        return r;
}

static int by_path(const void *a, const void *b)
{
        return strcmp(((const npf_input_t *) a)->path, ((const npf_input_t *) b)->path);
}

int npf_input_window(const char *dir, npf_input_t *ret, size_t max)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        size_t n = 0;

        if (!d)
                return -errno;
        while (n < max && (e = readdir(d))) {
                const char *dot = strrchr(e->d_name, '.');
                struct stat st;
                if (e->d_name[0] == '.' || !dot || strcmp(e->d_name, "manifest.json") == 0 ||
                    (strcmp(dot, ".json") != 0 && strcmp(dot, ".pkl") != 0 && strcmp(dot, ".pickle") != 0))
                        continue;
                if (snprintf(ret[n].path, sizeof(ret[n].path), "%s/%s", dir, e->d_name) >= (int) sizeof(ret[n].path))
                        continue;
                if (stat(ret[n].path, &st) < 0 || !S_ISREG(st.st_mode) || npf_input_classify(ret[n].path, &ret[n].kind) < 0)
                        continue;
                n++;
        }
        closedir(d);
        qsort(ret, n, sizeof(*ret), by_path);
        return (int) n;
}

int npf_input_map(const char *path, void **ret_buf, size_t *ret_len, char *err, size_t err_size)
{
        struct stat st;
        void *map;
        int fd, r;

        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
                r = -errno;
                snprintf(err, err_size, "cannot open %.180s: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                snprintf(err, err_size, "cannot stat %.180s: %s", path, strerror(-r));
                close(fd);
                return r;
        }
        if (!S_ISREG(st.st_mode) || st.st_size == 0) {
                snprintf(err, err_size, "%.180s: %s", path, S_ISREG(st.st_mode) ? "the file is empty" : "not a regular file");
                close(fd);
                return -EINVAL;
        }
        map = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        r = map == MAP_FAILED ? -errno : 0;
        close(fd);
        if (r < 0) {
                snprintf(err, err_size, "cannot map %.180s: %s", path, strerror(-r));
                return r;
        }
        /* The reader goes through the whole file once, front to back: its pages mapped in
         * one call (where the kernel can) instead of in a fault each, and read ahead. */
        (void) madvise(map, (size_t) st.st_size, MADV_POPULATE_READ);
        (void) madvise(map, (size_t) st.st_size, MADV_SEQUENTIAL);
        *ret_buf = map;
        *ret_len = (size_t) st.st_size;
        return 0;
}

void npf_input_unmap(void *buf, size_t len)
{
        if (buf)
                munmap(buf, len);
}
