/* SPDX-License-Identifier: MIT */
/*
 * What the direct readers of test-pickle and fuzz-pickle share: the keys they ask the reader
 * for, and a complete container holding a dict's pairs or a list's items, as
 * npf_vtree_complete_items() offers one, so that each can hand a directly read dict or list
 * to the reduce function it also gives the batch path and the opcodes.
 */
#ifndef NPUPROF_TESTS_PICKLE_DIRECT_H
#define NPUPROF_TESTS_PICKLE_DIRECT_H

#include <stdint.h>
#include <string.h>

#include "replay/value.h"

/* The key number of @s (1 to 4), or 0 for a key the readers do not ask for. */
static inline unsigned npf_test_direct_key(const char *s, size_t len)
{
        static const char *const keys[] = { "action", "fail", "filename", "frames" };

        for (unsigned k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
                if (strlen(keys[k]) == len && memcmp(keys[k], s, len) == 0)
                        return k + 1;
        return 0;
}

/* A value of @kind whose container @c holds the @n values at @items (borrowed). */
static inline npf_value_t npf_test_container(npf_container_t *c, npf_vkind_t kind, const npf_value_t *items,
                                             size_t n)
{
        *c = (npf_container_t) { .kind = (uint8_t) kind, .complete = 1 };
        c->u.list.items = (npf_value_t *) items;
        c->u.list.n = c->u.list.cap = (uint32_t) n;
        return (npf_value_t) { .kind = (uint8_t) kind, .as.c = c };
}

#endif /* NPUPROF_TESTS_PICKLE_DIRECT_H */
