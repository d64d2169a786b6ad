/* SPDX-License-Identifier: MIT */
#include "lib/nearword.h"

#include <string.h>

/* The edit distance of @a and @b (Damerau's: a swap of neighbours counts one), or 99 for
 * words over 31 bytes. */
static unsigned distance(const char *a, const char *b)
{
        size_t n = strlen(a), m = strlen(b);
        unsigned d[32][32];

        if (n > 31 || m > 31)
                return 99;
        for (size_t i = 0; i <= n; i++)
                d[i][0] = (unsigned) i;
        for (size_t j = 0; j <= m; j++)
                d[0][j] = (unsigned) j;
        for (size_t i = 1; i <= n; i++)
                for (size_t j = 1; j <= m; j++) {
                        unsigned v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
                        if (d[i - 1][j] + 1 < v)
                                v = d[i - 1][j] + 1;
                        if (d[i][j - 1] + 1 < v)
                                v = d[i][j - 1] + 1;
                        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                                v = d[i - 2][j - 2] + 1;
                        d[i][j] = v;
                }
        return d[n][m];
}

const char *npf_near_word(const char *word, const char *const *names, size_t n)
{
        const char *best = NULL;
        size_t len = strlen(word), begun = 0;
        unsigned best_d = 3;

        for (size_t i = 0; i < n; i++)
                if (len > 0 && strncmp(names[i], word, len) == 0) {
                        best = names[i];
                        begun++;
                }
        if (begun == 1)
                return best;
        best = NULL;
        for (size_t i = 0; i < n; i++) {
                unsigned d = distance(word, names[i]);
                if (d < best_d && d < len) {
                        best = names[i];
                        best_d = d;
                }
        }
        return best;
}
