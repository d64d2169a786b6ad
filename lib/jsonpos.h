/* SPDX-License-Identifier: MIT */
/*
 * Where a value stands in JSON text. jansson reports line and column for syntax errors
 * only; this finds them for a key path in text that jansson has already accepted, so that
 * every configuration error can point at its place in the file.
 */
#ifndef NPUPROF_LIB_JSONPOS_H
#define NPUPROF_LIB_JSONPOS_H

#include <stddef.h>
#include <stdint.h>

/*
 * npf_jsonpos_find() - the place of the value at @path in @text.
 * @path is a sequence of @depth components: an object key, or "[N]" for element N of an
 * array. Return: 0 and the 1-based line and column (bytes) of the value, or -ENOENT.
 * Context: any; it never reads outside @text, whatever @text holds.
 */
int npf_jsonpos_find(const char *text, size_t len, const char *const *path, size_t depth,
                     uint32_t *ret_line, uint32_t *ret_column);

/* The 1-based line and column of byte @offset of @text. */
void npf_jsonpos_line_column(const char *text, size_t len, size_t offset, uint32_t *ret_line,
                             uint32_t *ret_column);

#endif /* NPUPROF_LIB_JSONPOS_H */
