/* SPDX-License-Identifier: MIT */
/*
 * What npuprof-replay reads, and how: a file is told to be a memory snapshot or a Chrome
 * trace from its first bytes, a window directory's inputs are its snapshots and traces, and
 * an input is mapped, never read into a buffer, whatever its size.
 */
#ifndef NPUPROF_REPLAY_INPUT_H
#define NPUPROF_REPLAY_INPUT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define NPF_INPUT_SNIFF_BYTES 65536u    /* bytes read to tell a snapshot from a trace */
#define NPF_INPUT_WINDOW_MAX 256u       /* inputs taken from one window directory */
#define NPF_INPUT_PROGRESS_EVERY ((size_t) 16 << 20)   /* how often a reader reports progress */

/* Called by every reader about every NPF_INPUT_PROGRESS_EVERY bytes of input, with the bytes
 * read so far and the input's size. */
typedef void (*npf_input_progress_cb)(void *userdata, size_t done, size_t total);

typedef enum npf_input_kind {
        NPF_INPUT_SNAPSHOT,
        NPF_INPUT_TRACE,
} npf_input_kind_t;

typedef struct npf_input {
        char path[PATH_MAX];
        npf_input_kind_t kind;
} npf_input_t;

/*
 * npf_input_sniff() - what the @len first bytes at @head belong to: a pickle (first byte
 * 0x80) or JSON with "segments", "device_traces" or "total_size" is a snapshot; JSON with
 * "traceEvents" or "ph" a trace (looked for first).
 * Return: 0 and the kind in @ret, or -ENOENT when it is neither.
 */
int npf_input_sniff(const void *head, size_t len, npf_input_kind_t *ret);

/* npf_input_sniff() on the file at @path. Return: as it, -ENODATA for an empty file, or -errno. */
int npf_input_classify(const char *path, npf_input_kind_t *ret);

/*
 * npf_input_window() - the snapshots and traces directly in the window directory @dir
 * (files named *.json, *.pkl or *.pickle, manifest.json and hidden files aside), sorted by
 * path, at most @max of them into @ret.
 * Return: their number, or -errno of reading @dir.
 */
int npf_input_window(const char *dir, npf_input_t *ret, size_t max);

/*
 * npf_input_map() - the regular, non-empty file at @path mapped read-only, for sequential
 * reading: its address in @ret_buf and its size in @ret_len; unmap it with
 * npf_input_unmap(). Return: 0, or a negative errno with a sentence in @err (@err_size
 * bytes) naming @path: "cannot open", "not a regular file", "the file is empty", "cannot map".
 */
int npf_input_map(const char *path, void **ret_buf, size_t *ret_len, char *err, size_t err_size);
void npf_input_unmap(void *buf, size_t len);

#endif /* NPUPROF_REPLAY_INPUT_H */
