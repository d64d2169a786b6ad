/* SPDX-License-Identifier: MIT */
/*
 * JSON text into a value tree, for the JSON form of memory snapshots. jansson decodes every
 * value; only the outer containers are walked here, so that jansson holds one element of
 * them at a time (a trace entry, a block) and never the whole document, which would take
 * eight times the file. Each element goes into the tree as it is decoded and is reduced
 * there, as a pickle's would be.
 */
#ifndef NPUPROF_REPLAY_JSONTREE_H
#define NPUPROF_REPLAY_JSONTREE_H

#include "replay/input.h"
#include "replay/value.h"

#include <jansson.h>
#include <stddef.h>

/* Walked here: lists at depths 0 to 3 (device_traces, a device's trace, segments, a
 * segment's blocks), objects at depths 0 to 2 (the root, a segment); a trace entry (an
 * object at depth 3) or a block (at depth 4) is one element. */
#define NPF_JSONTREE_WALK_LISTS 4u
#define NPF_JSONTREE_WALK_OBJECTS 3u

/*
 * npf_jsontree_load() - read the JSON document in @buf (@len bytes) into @tree.
 * Strings are copied into the tree, the same short string once; "\u0000" is kept in values
 * (not in keys, nor a raw NUL byte anywhere); integers are signed 64-bit, as jansson keeps
 * them; one element longer than 2 GiB is refused (jansson counts in an int). @progress (or
 * NULL) is called about every NPF_INPUT_PROGRESS_EVERY bytes.
 * Return: 0 and the root, reduced, in @ret; or -EINVAL with "line L, column C: what" in
 * @err (@err_size bytes), -ENOMEM, or the reduce callback's error with its sentence.
 */
int npf_jsontree_load(const void *buf, size_t len, npf_vtree_t *tree, npf_input_progress_cb progress,
                      void *userdata, npf_value_t *ret, char *err, size_t err_size);

/* @json, a decoded jansson value, into @tree: its containers complete and reduced, @ret not
 * (it is the caller's to append or finish). Return: as npf_jsontree_load(). */
int npf_jsontree_value(npf_vtree_t *tree, const json_t *json, npf_value_t *ret, char *err, size_t err_size);

#endif /* NPUPROF_REPLAY_JSONTREE_H */
