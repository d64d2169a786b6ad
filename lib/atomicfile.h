/* SPDX-License-Identifier: MIT */
/*
 * Files replaced whole. A reader finds at a name the old file or the new one, never a part
 * of either, and a file reported written survives a crash. One rule for every writer: the
 * bytes go to a temporary in the same directory, which is synced and renamed over the
 * name; then the directory is synced, so that the rename is durable too.
 *
 * The temporary is ".NAME.TAG" in the directory. TAG is the writer's, so that two writers
 * of one name never share a temporary; a leftover of the same TAG (a writer killed between
 * creating and renaming it) is removed first, never followed. A NULL TAG gives each write
 * a temporary of its own, for a file that several processes may write at once.
 */
#ifndef NPUPROF_LIB_ATOMICFILE_H
#define NPUPROF_LIB_ATOMICFILE_H

#include <limits.h>
#include <stddef.h>

#define NPF_ATOMICFILE_NOREPLACE 1u     /* never over an existing name: -EEXIST */
#define NPF_ATOMICFILE_DIR_OWNER 2u     /* run as root, give the file to the directory's owner */
#define NPF_ATOMICFILE_EXACT_MODE 4u    /* the mode as given, whatever the umask */

/* One replacement under way. The caller's storage; its fields are read-only to the caller. */
typedef struct npf_atomicfile {
        int dfd;                        /* the directory; the caller's, never closed here */
        int fd;                         /* the temporary, open for writing; -1 once committed or aborted */
        const char *step;               /* what failed: "remove", "create", "write", "sync", "rename over",
                                           "sync the directory"; NULL while nothing has */
        char name[NAME_MAX + 1];
        char tmp[NAME_MAX + 1];
} npf_atomicfile_t;

/*
 * npf_atomicfile_begin() - create the temporary for @name in the directory @dfd, with
 * @mode (less the umask, unless NPF_ATOMICFILE_EXACT_MODE) and @flags' owner. Write through @f->fd or
 * npf_atomicfile_append(), then npf_atomicfile_commit() or npf_atomicfile_abort().
 * Return: 0, or -errno with @f->step set and nothing left behind.
 */
int npf_atomicfile_begin(npf_atomicfile_t *f, int dfd, const char *name, const char *tag, unsigned mode,
                         unsigned flags);

/* Write all @len bytes at @data to the temporary. Return: 0, or -errno with @f->step "write". */
int npf_atomicfile_append(npf_atomicfile_t *f, const void *data, size_t len);

/*
 * npf_atomicfile_commit() - sync and close the temporary, rename it over the name
 * (NPF_ATOMICFILE_NOREPLACE: only where the name is free), sync the directory.
 * Return: 0; or -errno with @f->step set. Before the rename, the temporary is removed and
 * the name is as it was; a failure of "sync the directory" comes after the rename.
 */
int npf_atomicfile_commit(npf_atomicfile_t *f, unsigned flags);

/* Remove the temporary and leave the name as it was. Accepts a committed or aborted @f. */
void npf_atomicfile_abort(npf_atomicfile_t *f);

/* The three above for @len bytes at @data. Return: 0, or -errno with @f->step set. */
int npf_atomicfile_write(npf_atomicfile_t *f, int dfd, const char *name, const char *tag, unsigned mode,
                         unsigned flags, const void *data, size_t len);

/*
 * The object of the failed step, for a message: the temporary's name, or the file's for
 * "rename over", or "." for "sync the directory". Return: a string owned by @f.
 */
const char *npf_atomicfile_failed_name(const npf_atomicfile_t *f);

#endif /* NPUPROF_LIB_ATOMICFILE_H */
