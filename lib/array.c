/* SPDX-License-Identifier: MIT */
#include "lib/array.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int npf_array_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
        size_t c = *cap ? *cap : (first ? first : 1);
        void *q;

        if (need <= *cap)
                return 0;
        while (c < need) {
                if (c > SIZE_MAX / 2)
                        return -ENOMEM;
                c *= 2;
        }
        if (!(q = reallocarray(*p, c, elem)))
                return -ENOMEM;
        *p = q;
        *cap = c;
        return 0;
}
