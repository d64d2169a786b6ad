/* SPDX-License-Identifier: MIT */
/*
 * libnpuprof: the part of npuprof that runs inside every training process.
 *
 *   npf_rank_t *h;
 *   npf_rank_open(NULL, &h);                    // once, at start; never fails for lack of a daemon
 *   for (step = 1; ...; step++) {
 *           npf_rank_step(h, step);             // at the start of every step (inline)
 *           train_one_step();
 *   }
 *   npf_rank_close(h);
 *
 * The rank reads the node's segment: when the daemon publishes a window, the rank opens it
 * on its runtime backend at exactly the start step and closes it after the stop step,
 * writing <prof_dir>/rank<R>_start<S>_stop<E>/ with the backend's files and a
 * manifest.json written last. Its slot in the rank table shows its step and window state.
 *
 * Thread-safety: a handle belongs to one thread at a time; call npf_rank_step() from the
 * training loop's thread. Different handles (ranks of one process) are independent. Each
 * handle also runs a thread of its own, "npuprof-stacks", that writes the process's stacks
 * when the daemon asks (see npf_stacks_set_interpreter()); npf_rank_close() joins it.
 * fork(): a child must not use its parent's handle; it may npf_rank_open() its own, and
 * should call npf_rank_close_after_fork() on the inherited one to free it without touching
 * the slot, which stays the parent's. A child that does neither still never keeps its
 * parent's slot: the descriptor holding the slot's lock is closed in the child at fork, so
 * the slot is freed when the parent dies, whatever its children do.
 */
#ifndef NPUPROF_RANK_H
#define NPUPROF_RANK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "npuprof/shm.h"

typedef struct npf_rank npf_rank_t;

typedef struct npf_rank_options {
        const char *shm_name;           /* NULL: $NPUPROF_SHM, else "npuprof" */
        int64_t rank;                   /* < 0: $RANK, else $RANK_ID, else 0 */
        int32_t local_device;           /* < 0: $LOCAL_RANK, else $ASCEND_DEVICE_ID, else -1 */
        const char *backend;            /* NULL: as the configuration says ("auto" by default) */
} npf_rank_options_t;

/* The fast-path part of a handle, first in it; read by the inline npf_rank_step(). */
typedef struct npf_rank_fast {
        const npf_shm_ctl_t *ctl;       /* NULL while detached */
        npf_shm_slot_t *slot;
        uint64_t generation;            /* the generation last read */
        uint32_t busy;                  /* a window is armed, open or waiting: take the slow path */
        uint32_t reserved;
} npf_rank_fast_t;

/* What a rank is doing, for bindings and tests. Strings are NUL-terminated. */
typedef struct npf_rank_info {
        int64_t  rank;
        int32_t  local_device;
        bool     attached;
        uint32_t state;                 /* NPF_WINDOW_* */
        uint64_t generation;
        int64_t  window_start;
        int64_t  window_stop;           /* NPF_STEP_NONE while a timed window is open */
        int64_t  state_step;
        char     backend[16];
        char     output[NPF_SHM_PATH_MAX + 160];  /* the window directory, "" if none */
        char     message[256];
} npf_rank_info_t;

/*
 * npf_rank_open() - attach to the node's segment and claim this rank's slot.
 * With no segment (no daemon yet), the handle starts detached and retries attaching at
 * most once a second from npf_rank_step(). @opts may be NULL.
 * Return: 0 and the handle in @ret_rank; -EBUSY if a live process holds this rank id
 * (@err, of NPF_SHM_ERR_MAX bytes, names it), -EINVAL for a bad option, -ENOMEM.
 * Context: once per rank, before the training loop.
 */
int npf_rank_open(const npf_rank_options_t *opts, npf_rank_t **ret_rank, char *err);

/*
 * npf_rank_step_call() - npf_rank_step() as a real function, for callers that cannot inline
 * a header (Python through ctypes, other languages). Same contract; a call costs a few ns.
 */
int npf_rank_step_call(npf_rank_t *h, int64_t step);

/* Close an open window (its manifest says `incomplete` if it was cut short) and release. */
void npf_rank_close(npf_rank_t *h);

/*
 * npf_rank_fail() - end the window armed or open now as `failed`, with @why (a framework's
 * error, say) as its message in the slot, npf_rank_info() and the manifest. An open window
 * is closed on its backend first and its manifest says `incomplete`; the generation opens
 * no other window on this rank. Return: 0; -ENOENT when no window is armed or open;
 * -EINVAL for a NULL argument. Context: the training loop's thread, between steps.
 */
int npf_rank_fail(npf_rank_t *h, const char *why);

/* Free the handle a child inherited through fork() without touching the parent's slot. */
void npf_rank_close_after_fork(npf_rank_t *h);

/* Fill @ret_info with what the rank is doing. */
void npf_rank_info(const npf_rank_t *h, npf_rank_info_t *ret_info);

/*
 * npf_stacks_set_interpreter() - how an interpreter in this process has its own stacks
 * written: to have them, the library points @fd at the output and raises @signo on its
 * own thread; the interpreter's handler of @signo writes every thread's stacks to @fd
 * (Python: faulthandler.register(signo, file=fd, all_threads=True)). Between two writes @fd
 * points at /dev/null. @signo 0 (or an invalid one, or @fd < 0) turns the hook off.
 *
 * While a handle is attached, a thread of the library ("npuprof-stacks", every signal
 * blocked) waits for the daemon to ask, through the rank's slot, for the process's stacks
 * (a rank that stopped stepping), and writes every other thread's native frames, then the
 * interpreter's stacks, to <prof_dir>/stacks/rank<R>_pid<P>_<N>.txt. Each thread is
 * stopped in turn by signal SIGRTMAX - 3 while its stack is read.
 * Context: any thread, at any time; the last call wins.
 */
void npf_stacks_set_interpreter(int signo, int fd);

/*
 * npf_rank_step() - the start of step @step: open, advance or close the window.
 * Return: 0, or a negative errno when the backend failed (the window is then `failed`,
 * the training loop carries on; nothing needs doing).
 * Context: the training loop's thread, once per step. Inline: when nothing changed and no
 * window is armed or open it is one acquire load and a compare and a relaxed store of the
 * step, no call and no system call. The heartbeat (a clock read) is kept only while a
 * window is armed or open.
 */
static inline int npf_rank_step(npf_rank_t *h, int64_t step)
{
        npf_rank_fast_t *f = (npf_rank_fast_t *) h;

        if (__builtin_expect(f->ctl && !f->busy && !npf_shm_changed(f->ctl, f->generation), 1)) {
                npf_shm_slot_note_step(f->slot, step);
                return 0;
        }
        return npf_rank_step_call(h, step);
}

#endif /* NPUPROF_RANK_H */
