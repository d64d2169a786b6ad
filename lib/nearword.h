/* SPDX-License-Identifier: MIT */
/* The word a person likely meant when they typed one that is none: "stauts" is "status". */
#ifndef NPUPROF_LIB_NEARWORD_H
#define NPUPROF_LIB_NEARWORD_H

#include <stddef.h>

/*
 * The one of @names (@n of them) that @word begins, when only one does; else the nearest
 * within two edits (an insertion, a deletion, a change, or a swap of neighbours counts one)
 * and fewer edits than @word has letters. Return: that name, or NULL.
 */
const char *npf_near_word(const char *word, const char *const *names, size_t n);

#endif /* NPUPROF_LIB_NEARWORD_H */
