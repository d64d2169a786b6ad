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
#define NPF_PICKLE_NO_DIRECT 0x2u       /* the fast path without a caller's direct reader of dicts
                                         * (npf_pickle_load_direct()), for the same tests */

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

#define NPF_PICKLE_DIRECT_KEYS 32u      /* key numbers a direct reader gives, 0 included */

/*
 * A caller's reader of one shape of flat dict, the millions of a snapshot's trace entries:
 * in a batch of dicts, a dict whose keys are strings, whose values are numbers, strings,
 * None, booleans or, under @lists keys, lists (of records or of flat dicts: the frames of a
 * stack) or a list read before, and that has the @required keys, with a str under each of
 * the @strings keys it has, is handed to @dict as it is read, without being built: by key
 * number, besides its pairs. What its lists hold, then its lists, go first, as they complete,
 * to the reduce callback (a list to @list, where there is one), as the opcodes would have
 * it. Anything else is read as it would be without a direct reader.
 */
typedef struct npf_pickle_direct {
        /* The number of the key @s (@len bytes), below NPF_PICKLE_DIRECT_KEYS; 0 for any key
         * the caller does not read, whose value must then be no list. Called for a key as
         * it is read, nearly always once for each memo slot that names one; pure. */
        unsigned (*key)(void *userdata, const char *s, size_t len);
        /*
         * What the reduce callback would do with the dict: @pairs its @n keys and values, in
         * order, each list as it was reduced; @by_key[k] the value of key number k (the last
         * when it repeats) for each bit k of @present, the other slots undefined.
         * Return: 1 with the record in @ret, 0 to keep the dict, or a negative errno with a
         * sentence in @err (@err_size bytes). Called on the lane, as the reduce callback is.
         */
        int (*dict)(void *userdata, const npf_value_t *pairs, size_t n, const npf_value_t *by_key, uint32_t present,
                    npf_value_t *ret, char *err, size_t err_size);
        /* What the reduce callback would do with a list of the @n values at @items (n > 0,
         * each to be resolved), as @dict returns; NULL: the reduce callback is offered it. */
        int (*list)(void *userdata, const npf_value_t *items, size_t n, npf_value_t *ret, char *err, size_t err_size);
        /*
         * The lane's pages mapped by the reader, which waits on it otherwise. @reserve: room
         * for the records of @n more dicts (each makes at most one), so that making them moves
         * nothing; called before a batch of @n is handed to the lane, while the lane is idle.
         * Return: 0 or -ENOMEM. @prefault: npf_prefault() of the room the @n dicts after those
         * reserved will fill, as far as it is reserved; called while the lane builds, so it
         * reads only what @reserve wrote. Either may be NULL.
         */
        int (*reserve)(void *userdata, size_t n);
        void (*prefault)(void *userdata, size_t n);
        uint32_t required, strings, lists;      /* bit k: key number k */
        void *userdata;
} npf_pickle_direct_t;

/* npf_pickle_load() with a direct reader of dicts; @direct may be NULL. Context: as npf_pickle_load(). */
int npf_pickle_load_direct(const void *buf, size_t len, npf_vtree_t *tree, unsigned flags,
                           const npf_pickle_direct_t *direct, npf_input_progress_cb progress, void *userdata,
                           npf_value_t *ret, char *err);

#endif /* NPUPROF_REPLAY_PICKLE_H */
