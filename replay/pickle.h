/* SPDX-License-Identifier: MIT */
/*
 * A reader of Python pickles that only builds data. It understands protocols 2 to 5 (and the
 * data opcodes of 0 and 1): None, booleans, integers of every width, floats, strings, bytes,
 * lists, tuples, dictionaries, sets, the memo and frames. Every opcode that would name a
 * class or call one (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX,
 * EXT1/2/4, PERSID, BINPERSID, the out-of-band buffers) is refused with its name and offset,
 * and nothing in the input is ever executed or trusted: every length is checked against
 * what is left of the input, the stack and memo have fixed caps.
 */
#ifndef NPUPROF_REPLAY_PICKLE_H
#define NPUPROF_REPLAY_PICKLE_H

#include "replay/input.h"
#include "replay/value.h"

#include <stddef.h>

#define NPF_PICKLE_ERR_MAX 256u                 /* bytes of the message buffers below */
#define NPF_PICKLE_STACK_MAX (1u << 24)         /* values on the stack, marks included */
#define NPF_PICKLE_MEMO_MAX (1u << 28)          /* memo slots */
#define NPF_PICKLE_DEPTH_MAX 4096u              /* open marks */

/* npf_pickle_load() @flags. */
#define NPF_PICKLE_OPCODES_ONLY 0x1u    /* run every opcode one by one, without the fast path for
                                         * batches of dicts: for tests that compare the two */

/*
 * npf_pickle_load() - read the pickle in @buf (@len bytes) into @tree.
 * Strings and bytes in the result point into @buf, which must outlive @tree. Containers are
 * reduced by the tree's callback as they complete; a batch of flat dicts (trace entries,
 * blocks) is read by a fast path whose result is the same (only an out-of-memory error may
 * name another offset), with the reduce callback called on a thread of the reader's while
 * it reads on: never two calls at once, nor one beside @progress. @progress may be NULL.
 * Return: 0 and the root value in @ret; or -EINVAL (a malformed or truncated pickle),
 * -EPERM (an opcode that would run code), -E2BIG (a cap exceeded), -ENOMEM, or the reduce
 * callback's error; a sentence in @err (NPF_PICKLE_ERR_MAX bytes) names the opcode and its
 * byte offset, such as "offset 17: opcode GLOBAL (c) would import a Python object; refused".
 * Context: any; reentrant (the state is on the heap and in @tree).
 */
int npf_pickle_load(const void *buf, size_t len, npf_vtree_t *tree, unsigned flags, npf_input_progress_cb progress,
                    void *userdata, npf_value_t *ret, char *err);

#endif /* NPUPROF_REPLAY_PICKLE_H */
