/* SPDX-License-Identifier: MIT */
/*
 * The stacks of every thread of this process, written as text: for a rank that stopped
 * stepping (a hang, in a collective say), which the daemon asks through the rank's slot to
 * write them. The process reads its own threads: no ptrace, no right over it is needed.
 *
 * Each thread is stopped in turn by NPF_STACKS_SIGNAL, a realtime signal sent with
 * tgkill(): its handler copies the interrupted registers and waits, the writer unwinds the
 * thread's stack with libdwfl (elfutils) from those registers, then lets it go on. The
 * names come from the symbol tables (and source lines from the debug information, where
 * there is some). An interpreter's own stacks (Python's faulthandler) follow: see
 * npf_stacks_set_interpreter() in include/npuprof/rank.h.
 */
#ifndef NPUPROF_RANK_STACKS_H
#define NPUPROF_RANK_STACKS_H

#include <signal.h>

/*
 * The signal that stops each thread while its stack is read: SIGRTMAX - 3. Its handler is
 * installed for the time of a write and the previous action put back after it, unless a
 * thread was sent the signal and did not take it: then the handler stays, doing nothing,
 * so that the signal still pending there later does not end the process (the default
 * action of a realtime signal). A thread that blocks the signal is not sent it.
 */
#define NPF_STACKS_SIGNAL (SIGRTMAX - 3)

#define NPF_STACKS_ANSWER_MS 500u       /* how long a thread may take to take the signal */
#define NPF_STACKS_HOLD_MS 3000u        /* at most this long a thread is held while its stack is read */
#define NPF_STACKS_FRAMES_MAX 128u      /* frames written per thread */
#define NPF_STACKS_THREADS_MAX 4096u    /* threads written */
#define NPF_STACKS_ERR_MAX 256u         /* bytes of the message buffer */

/*
 * npf_stacks_write() - write to @fd the stacks of every thread of this process but the
 * caller's: a header (pid, time, the number of threads), then for each thread its tid, its
 * name and state and its native frames, one a line,
 *
 *   #N 0xPC function+0xOFF (module) [file:line]
 *
 * ("??" for a function no symbol names, file:line where debug information has it); a
 * thread that blocks NPF_STACKS_SIGNAL, or does not take it within NPF_STACKS_ANSWER_MS, is
 * listed with that said. On an architecture other than x86_64 and aarch64 the threads are
 * listed without frames. Then, when an interpreter hook is set, the interpreter's stacks.
 * One write runs at a time in a process; others wait for it.
 * Return: 0, or the -errno of a failed write to @fd with a sentence in @err
 * (NPF_STACKS_ERR_MAX bytes). What could not be read is said in the output, not here.
 * Context: any thread that does not block other threads' progress on a lock it holds
 * (each thread is stopped in turn, possibly inside malloc); not async-signal-safe.
 */
int npf_stacks_write(int fd, char *err);

#endif /* NPUPROF_RANK_STACKS_H */
