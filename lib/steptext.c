/* SPDX-License-Identifier: MIT */
#include "lib/steptext.h"

#include <inttypes.h>
#include <stdio.h>

const char *npf_step_text(int64_t step, char buf[NPF_STEP_TEXT_MAX])
{
        char digits[24];
        int n = snprintf(digits, sizeof(digits), "%" PRIu64, step < 0 ? (uint64_t) -(step + 1) + 1 : (uint64_t) step);
        size_t o = 0;

        if (step < 0)
                buf[o++] = '-';
        for (int i = 0; i < n; i++) {
                if (i > 0 && (n - i) % 3 == 0)
                        buf[o++] = ',';
                buf[o++] = digits[i];
        }
        buf[o] = '\0';
        return buf;
}
