/* SPDX-License-Identifier: MIT */
/*
 * Interned strings, frames and call stacks. A snapshot repeats the same few thousand frames
 * in millions of trace entries; each distinct string, frame and stack is kept once and named
 * by a 32-bit id. Id 0 is always the empty string, and the empty stack.
 */
#ifndef NPUPROF_REPLAY_INTERN_H
#define NPUPROF_REPLAY_INTERN_H

#include <stddef.h>
#include <stdint.h>

typedef struct npf_frame {
        uint32_t name;          /* string ids */
        uint32_t filename;
        int64_t line;
} npf_frame_t;

typedef struct npf_intern npf_intern_t;

/* Return: a new table holding the empty string and the empty stack, or NULL. */
npf_intern_t *npf_intern_new(void);
npf_intern_t *npf_intern_free(npf_intern_t *in);

/* The id of the string @s (@len bytes), added if new. Return: the id, or -ENOMEM / -E2BIG. */
int64_t npf_intern_string(npf_intern_t *in, const char *s, size_t len);
/* The id of the frame @f. */
int64_t npf_intern_frame(npf_intern_t *in, npf_frame_t f);
/* The id of the stack of @n frame ids at @frames, innermost first. */
int64_t npf_intern_stack(npf_intern_t *in, const uint32_t *frames, size_t n);

/* The NUL-terminated string @id ("" for an unknown id). */
const char *npf_intern_str(const npf_intern_t *in, uint32_t id);
/* The frame @id, NULL for an unknown id. */
const npf_frame_t *npf_intern_frame_get(const npf_intern_t *in, uint32_t id);
/* The frames of stack @id; their number in the return value (0 for an unknown id). */
size_t npf_intern_stack_get(const npf_intern_t *in, uint32_t id, const uint32_t **ret_frames);

/* The number of stacks: every stack id is below it. */
size_t npf_intern_stacks(const npf_intern_t *in);

/* Bytes held, for benches. */
size_t npf_intern_bytes(const npf_intern_t *in);

#endif /* NPUPROF_REPLAY_INTERN_H */
