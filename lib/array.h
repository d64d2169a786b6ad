/* SPDX-License-Identifier: MIT */
/*
 * Growable arrays: room for @need elements, doubled as they come, so that appending one at a
 * time costs amortised O(1) and the size of every allocation is checked for overflow.
 */
#ifndef NPUPROF_LIB_ARRAY_H
#define NPUPROF_LIB_ARRAY_H

#include <stddef.h>

/*
 * npf_array_grow() - make the array at *@p, of *@cap elements of @elem bytes, hold @need
 * at least: *@cap doubles from @first (or its old value) until it does; the array moves
 * with realloc(3). Nothing changes when it already holds @need.
 * Return: 0, or -ENOMEM (the array and *@cap are then as they were).
 * Context: any; reentrant.
 */
int npf_array_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first);

#endif /* NPUPROF_LIB_ARRAY_H */
