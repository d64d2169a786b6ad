/* SPDX-License-Identifier: MIT */
/*
 * The output root: the only tree under which window output may be written. A
 * configuration's prof_dir is resolved against it before the configuration is published,
 * so that ranks, which create their window directories under the published prof_dir, never
 * write anywhere else, whatever the file asks for.
 *
 * The resolution is lexical: "." components and repeated or trailing slashes are
 * collapsed, and a ".." component is refused outright (it is never folded away). Then the
 * file system is asked: nothing below the root may be a symbolic link, so that a link
 * planted inside the root cannot lead a rank's output out of it. The daemon checks what
 * exists when it publishes; each rank walks the same path again, one directory at a time
 * without following links, when it creates its window directory. The root itself, and the
 * path to it, are the operator's and resolved as usual.
 */
#ifndef NPUPROF_LIB_OUTROOT_H
#define NPUPROF_LIB_OUTROOT_H

#include <stdbool.h>
#include <stddef.h>

#define NPF_OUTROOT_ERR_MAX 320u        /* bytes of the message buffers below */

/*
 * npf_outroot_normalize() - the lexical normal form of the absolute path @path.
 * Return: 0 and the path in @ret (@size bytes) with "." components, repeated slashes and a
 * trailing slash removed ("/" stays "/"); -EINVAL if @path is not absolute or has a ".."
 * component; -ENAMETOOLONG if the result does not fit in @size bytes. @ret is written only
 * on success.
 * Context: any; reentrant.
 */
int npf_outroot_normalize(const char *path, char *ret, size_t size);

/*
 * npf_outroot_resolve() - where a configuration's @prof_dir lands under @root.
 * @root must be in normal form (npf_outroot_normalize()). An empty @prof_dir is @root
 * itself; a relative one is taken below @root; an absolute one must be @root or below it.
 * @key is the name the file gives the directory ("prof_dir", "prof_path", "output_dir"),
 * used in messages.
 * Return: 0 and the absolute, normal directory in @ret (@size bytes, NUL-terminated); or
 * -EINVAL (a ".." component), -EPERM (outside @root) or -ENAMETOOLONG (the result does not
 * fit in @size bytes), with a sentence in @err (NPF_OUTROOT_ERR_MAX bytes) such as
 * "prof_dir /etc is outside the output root /var/lib/npuprof/output". @ret is written only
 * on success.
 * Context: any; reentrant.
 */
int npf_outroot_resolve(const char *root, const char *prof_dir, const char *key, char *ret, size_t size,
                        char *err);

/* What npf_outroot_walk() does with the directories it walks. */
typedef enum npf_outroot_walk_mode {
        NPF_OUTROOT_CHECK,      /* what exists: stop, content, where one is missing or closed */
        NPF_OUTROOT_OPEN,       /* all of them must exist */
        NPF_OUTROOT_CREATE,     /* create the missing ones (mode 0755), the root too */
} npf_outroot_walk_mode_t;

/*
 * npf_outroot_walk() - walk the directories of @dir below its first @root_len bytes (the
 * output root) without following symbolic links, as @mode says. @dir is normal and
 * absolute (npf_outroot_resolve()); @key names it in messages. NPF_OUTROOT_CHECK stops,
 * content, at the first directory that does not exist or that this process may not look
 * into: a rank will walk it again.
 * Return: with NPF_OUTROOT_OPEN or NPF_OUTROOT_CREATE, an O_PATH descriptor of @dir, which
 * the caller closes; with NPF_OUTROOT_CHECK, 0.
 * Or -ELOOP (a symbolic link below the root), -ENOTDIR (something else than a directory),
 * -EINVAL (a ".." component, or @root_len is not a component boundary of @dir), or another
 * -errno, with a sentence in @err (NPF_OUTROOT_ERR_MAX bytes) such as "prof_dir /r/job/x
 * reaches through the symbolic link /r/job (-> /etc): nothing below the output root may be
 * a link".
 * Context: any; reentrant.
 */
int npf_outroot_walk(const char *dir, size_t root_len, npf_outroot_walk_mode_t mode, const char *key, char *err);

#endif /* NPUPROF_LIB_OUTROOT_H */
