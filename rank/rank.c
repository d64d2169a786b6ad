/* SPDX-License-Identifier: MIT */
/*
 * The rank library: a training rank's side of the segment. The window state machine, per
 * generation:
 *
 *   idle ──(window for this rank)──> armed ──(start step)──> collecting ──(after stop)──>
 *   flushing ──> done
 *
 * with the outcomes missed (already past the start step when the configuration was read),
 * failed (the backend refused), filtered (this rank is not in the rank list). A generation
 * opens at most one window; a configuration published during a window is read once the
 * window is closed.
 *
 * Beside the training thread, each handle has a thread of its own, the stacks watcher: it
 * waits on the slot's request word for the daemon to ask for the process's stacks (a rank
 * that stopped stepping cannot answer from its steps) and writes them (rank/stacks.h). The
 * handle's mapping is the training thread's to change: attach() and npf_rank_close() take
 * watch_lock, under which alone the watcher reads the slot and the control block, and
 * npf_rank_close() joins the watcher before it unmaps anything. The per-step path takes no
 * lock.
 */
#include "npuprof/rank.h"
#include "lib/outroot.h"
#include "npuprof/protocol.h"
#include "rank/backend.h"
#include "rank/stacks.h"
#include "lib/clock.h"
#include "lib/manifest.h"
#include "shm/slot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ATTACH_RETRY_NS 1000000000u     /* a detached rank looks for the segment this often */
#define ATTACH_CHECK_STEPS 64u          /* ... checking the clock only every so many steps */
#define WATCH_WAIT_MS 1000u             /* the stacks watcher looks at its slot at least this often */
#define WATCH_JOIN_NS 10000000L         /* npf_rank_close() wakes the watcher this often until it ends */
/*
 * Anyone who may attach may write the rank table, and so ask: a handle writes its stacks at
 * most once a second, and at most this many times (then it answers EDQUOT).
 */
#define WATCH_INTERVAL_NS 1000000000u
#define WATCH_WRITES_MAX 256u

struct npf_rank {
        npf_rank_fast_t fast;           /* first: the inline npf_rank_step() reads it */
        char shm_name[NPF_SHM_NAME_MAX + 1];
        npf_shm_t *shm;
        npf_slot_lease_t lease;         /* the slot, while attached; fast.slot is lease.slot */
        int64_t rank;
        int32_t device;
        char backend_override[16];
        uint64_t next_attach_ns;
        uint32_t attach_countdown;
        pid_t pid;

        /* The window of generation win.args.generation. */
        npf_shm_window_t win;
        uint32_t state;
        int64_t start, stop;            /* stop NPF_STEP_NONE while timed */
        int64_t state_step;
        int64_t last_step;
        uint64_t opened_ns, opened_real_ns;
        const npf_backend_ops_t *backend;
        void *bstate;
        json_t *runtime;                /* the window's "runtime" in its manifest; NULL when none */
        char dir[NPF_SHM_PATH_MAX + 160];
        int dirfd;                      /* the window directory, from its creation to its manifest; else -1 */
        char message[256];
        char reason[256];               /* why the window opened, an automatic one's (its extra's "reason"); else "" */

        /* The stacks watcher. */
        pthread_mutex_t watch_lock;     /* fast.ctl, fast.slot, shm and lease change only under it */
        pthread_cond_t watch_cond;      /* a detached watcher waits on it for attach() or the end */
        pthread_t watcher;
        bool watching;                  /* the watcher runs: joined at npf_rank_close() */
        bool watch_stop;                /* under watch_lock */
        uint32_t stacks_written;        /* the watcher's */
        uint64_t stacks_written_ns;     /* the watcher's: CLOCK_MONOTONIC of the last */
};

static int64_t env_int(const char *name, int64_t fallback)
{
        const char *v = getenv(name);
        char *end;

        if (!v || !*v)
                return fallback;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        return errno || *end || x < 0 ? fallback : x;
}

static bool active(const npf_rank_t *h)
{
        return h->state == NPF_WINDOW_COLLECTING || h->state == NPF_WINDOW_FLUSHING;
}

/* Show the state in the slot, and keep the fast path's flag right. */
static void publish_state(npf_rank_t *h, uint32_t state, int64_t step)
{
        npf_shm_slot_state_t st = {
                .generation = h->win.args.generation,
                .state = state,
                .backend = h->backend == &npf_backend_acl ? NPF_BACKEND_ACL
                           : h->backend == &npf_backend_host ? NPF_BACKEND_HOST : NPF_BACKEND_AUTO,
                .window_start = h->start,
                .window_stop = h->stop,
                .state_step = step,
                .state_ns = npf_clock_ns(CLOCK_REALTIME),
        };

        h->state = state;
        h->state_step = step;
        h->fast.busy = state == NPF_WINDOW_ARMED || active(h);
        if (!h->fast.slot)
                return;
        snprintf(st.message, sizeof(st.message), "%s", h->message);
        const char *slash = strrchr(h->dir, '/');
        snprintf(st.output, sizeof(st.output), "%s", h->dir[0] && slash ? slash + 1 : "");
        npf_slot_set_state(npf_shm_ranks(h->shm), h->fast.slot, &st);
}

static void attach(npf_rank_t *h)
{
        char err[NPF_SHM_ERR_MAX];

        pthread_mutex_lock(&h->watch_lock);
        if (npf_shm_open(h->shm_name, 0, &h->shm, err) == 0) {
                if (npf_slot_claim(h->shm, (uint32_t) h->rank, h->device, &h->lease, err) == 0) {
                        h->fast.slot = h->lease.slot;
                        h->fast.generation = 0;
                        h->fast.ctl = npf_shm_ctl(h->shm);
                        publish_state(h, h->state, h->state_step);
                        pthread_cond_signal(&h->watch_cond);
                } else {
                        /* Someone holds our rank id (a previous incarnation still exiting?): try later. */
                        h->shm = npf_shm_close(h->shm);
                }
        }
        pthread_mutex_unlock(&h->watch_lock);
}

/* --- the stacks watcher ------------------------------------------------------------------- */

/*
 * Write this process's stacks for request @asked to <prof_dir>/stacks/rank<R>_pid<P>_<N>.txt,
 * confined below the output root as a window directory is (open_window()), under a
 * temporary name renamed into place, so that a reader finds the whole file or none.
 * Return: 0 or -errno.
 */
static int write_stacks_file(const npf_shm_window_t *win, int64_t rank, uint32_t pid, uint32_t asked)
{
        char msg[NPF_OUTROOT_ERR_MAX], err[NPF_STACKS_ERR_MAX], name[96];
        npf_atomicfile_t f;
        int dirfd, sdir, r;

        if (win->prof_dir[0] == '\0')
                return -ENOENT;
        size_t root_len = win->args.root_len ? win->args.root_len : win->args.prof_dir_len;
        dirfd = npf_outroot_walk(win->prof_dir, root_len, NPF_OUTROOT_CREATE, "the output directory", msg);
        if (dirfd < 0)
                return dirfd;
        r = mkdirat(dirfd, "stacks", 0755) < 0 && errno != EEXIST ? -errno : 0;
        sdir = r < 0 ? r : openat(dirfd, "stacks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sdir < 0 && r == 0)
                r = -errno;
        close(dirfd);
        if (r < 0)
                return r;
        snprintf(name, sizeof(name), "rank%" PRId64 "_pid%" PRIu32 "_%" PRIu32 ".txt", rank, pid, asked);
        r = npf_atomicfile_begin(&f, sdir, name, NULL, 0644, 0);
        if (r == 0) {
                r = npf_stacks_write(f.fd, err);
                if (r == 0)
                        r = npf_atomicfile_commit(&f, 0);
                else
                        npf_atomicfile_abort(&f);
        }
        close(sdir);
        return r;
}

/*
 * Answer request @asked of @slot: its stacks written, or why not. Called with watch_lock
 * held, which it drops while it writes; the answer goes to the slot only if the handle
 * still holds that claim.
 */
static void answer_stacks(npf_rank_t *h, npf_shm_slot_t *slot, uint32_t asked)
{
        npf_shm_window_t *win = malloc(sizeof(*win));
        uint32_t pid = NPF_SLOT_PID(npf_slot_claim_word(slot));
        uint64_t claim = h->lease.claim;
        int r = win ? npf_shm_read_window(h->fast.ctl, (uint32_t) h->rank, win) : -ENOMEM;

        pthread_mutex_unlock(&h->watch_lock);
        if (r >= 0 && h->stacks_written == WATCH_WRITES_MAX)
                r = -EDQUOT;
        else if (r >= 0) {
                r = write_stacks_file(win, h->rank, pid, asked);
                h->stacks_written++;
                h->stacks_written_ns = npf_clock_ns(CLOCK_MONOTONIC);
        }
        free(win);
        pthread_mutex_lock(&h->watch_lock);
        if (h->fast.slot == slot && h->lease.claim == claim)
                npf_slot_answer_stacks(slot, asked, r < 0 ? -r : 0);
}

static void *watch_stacks(void *arg)
{
        npf_rank_t *h = arg;

        pthread_mutex_lock(&h->watch_lock);
        while (!h->watch_stop) {
                npf_shm_slot_t *slot = h->fast.slot;

                if (!slot) {
                        pthread_cond_wait(&h->watch_cond, &h->watch_lock);
                        continue;
                }
                uint32_t asked = npf_slot_stacks_asked(slot), wait_ms = WATCH_WAIT_MS;
                if (asked != npf_slot_stacks_done(slot)) {
                        uint64_t since = npf_clock_ns(CLOCK_MONOTONIC) - h->stacks_written_ns;
                        if (h->stacks_written == 0 || since >= WATCH_INTERVAL_NS) {
                                answer_stacks(h, slot, asked);
                                continue;
                        }
                        /* Too soon after the last: answered once a second has passed (the newest request). */
                        wait_ms = (uint32_t) ((WATCH_INTERVAL_NS - since) / 1000000u) + 1;
                }
                /* The wait reads nothing here; npf_rank_close() wakes it and joins before it unmaps. */
                pthread_mutex_unlock(&h->watch_lock);
                npf_slot_wait_stacks(slot, asked, wait_ms);
                pthread_mutex_lock(&h->watch_lock);
        }
        pthread_mutex_unlock(&h->watch_lock);
        return NULL;
}

/*
 * Start the watcher with every signal blocked, from its first instruction: a job's signals
 * are for its own threads. No watcher (no thread could be made) costs only the answers.
 */
static void start_watcher(npf_rank_t *h)
{
        sigset_t all, old;

        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        h->watching = pthread_create(&h->watcher, NULL, watch_stacks, h) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        /* Named from here, so that it has its name from the moment npf_rank_open() returns. */
        if (h->watching)
                pthread_setname_np(h->watcher, "npuprof-stacks");
}

static void stop_watcher(npf_rank_t *h)
{
        npf_shm_slot_t *slot;

        if (!h->watching)
                return;
        pthread_mutex_lock(&h->watch_lock);
        h->watch_stop = true;
        slot = h->fast.slot;
        pthread_cond_signal(&h->watch_cond);
        pthread_mutex_unlock(&h->watch_lock);
        /* A wake that comes before the watcher waits is lost: it is sent again until the watcher ends. */
        for (;;) {
                struct timespec until;

                if (slot)
                        npf_slot_wake_stacks(slot);
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += WATCH_JOIN_NS;
                if (until.tv_nsec >= 1000000000L) {
                        until.tv_sec++;
                        until.tv_nsec -= 1000000000L;
                }
                if (pthread_timedjoin_np(h->watcher, NULL, &until) != ETIMEDOUT)
                        break;
        }
        h->watching = false;
}

static const npf_backend_ops_t *choose_backend(const npf_rank_t *h, uint32_t configured, char *err)
{
        const char *want = h->backend_override[0] ? h->backend_override
                           : configured == NPF_BACKEND_ACL ? "acl" : configured == NPF_BACKEND_HOST ? "host" : "auto";

        if (strcmp(want, "host") == 0)
                return &npf_backend_host;
        if (strcmp(want, "acl") == 0)
                return npf_backend_acl.probe(err) == 0 ? &npf_backend_acl : NULL;
        /* auto: the NPU runtime when it can be loaded, else the host. */
        return npf_backend_acl.probe(err) == 0 ? &npf_backend_acl : &npf_backend_host;
}

/*
 * The manifest, written last into the window directory, which is closed then.
 * Return: 0, or -errno with the reason in h->message.
 */
static int write_manifest(npf_rank_t *h, bool complete)
{
        npf_manifest_t m = {
                .rank = h->rank,
                .pid = h->pid,
                .generation = h->win.args.generation,
                .start_step = h->start,
                .stop_step = h->stop,
                .warmup = h->win.args.warmup,
                .last_step = h->last_step,
                .backend = h->backend ? h->backend->name : "none",
                .complete = complete,
                .started_unix_ms = (int64_t) (h->opened_real_ns / 1000000u),
                .ended_unix_ms = (int64_t) (npf_clock_ns(CLOCK_REALTIME) / 1000000u),
                .message = h->message,
                .runtime = h->runtime,
                .reason = h->reason,
        };
        npf_atomicfile_t f;
        int r = npf_manifest_write(&f, h->dirfd, &m, "tmp", 0);

        close(h->dirfd);
        h->dirfd = -1;
        if (r < 0) {
                /* The first reason stays first: a full disk that broke the trace breaks the manifest too. */
                size_t used = strlen(h->message);
                if (used)
                        snprintf(h->message + used, sizeof(h->message) - used, "; no manifest: %s", strerror(-r));
                else
                        snprintf(h->message, sizeof(h->message), "cannot write the manifest in %.160s: %s %s: %s",
                                 h->dir, f.step, npf_atomicfile_failed_name(&f), strerror(-r));
        }
        return r;
}

static void fail_window(npf_rank_t *h, int64_t step, const char *why)
{
        snprintf(h->message, sizeof(h->message), "%.255s", why);
        publish_state(h, NPF_WINDOW_FAILED, step);
}

/* Why the daemon opened this window by itself, when it did: "reason" in the generation's extra JSON. */
static void read_reason(npf_rank_t *h)
{
        char *extra = h->win.args.extra_len && h->fast.ctl ? malloc(NPF_SHM_EXTRA_MAX) : NULL;
        json_t *o = NULL;

        h->reason[0] = '\0';
        if (extra && npf_shm_read_extra(h->fast.ctl, h->win.args.generation, extra) >= 0)
                o = json_loads(extra, 0, NULL);
        const char *reason = json_string_value(json_object_get(o, "reason"));
        if (reason)
                snprintf(h->reason, sizeof(h->reason), "%s", reason);
        json_decref(o);
        free(extra);
}

static int open_window(npf_rank_t *h, int64_t step)
{
        char err[NPF_BACKEND_ERR_MAX] = "", msg[NPF_OUTROOT_ERR_MAX];

        _Static_assert(NPF_OUTROOT_ERR_MAX >= NPF_BACKEND_ERR_MAX + 64, "room for the backend's message");
        int r;

        h->backend = choose_backend(h, h->win.args.backend, err);
        if (!h->backend) {
                fail_window(h, step, err[0] ? err : "no backend can run here");
                return -ENODEV;
        }
        if (h->win.prof_dir[0] == '\0') {
                fail_window(h, step, "no output directory was published");
                return -EINVAL;
        }
        /* Below the output root, no link is followed: a link planted there cannot lead the output out. */
        size_t root_len = h->win.args.root_len ? h->win.args.root_len : h->win.args.prof_dir_len;
        int dirfd = npf_outroot_walk(h->win.prof_dir, root_len, NPF_OUTROOT_CREATE, "the output directory", msg);
        if (dirfd < 0) {
                fail_window(h, step, msg);
                return dirfd;
        }
        char leaf[160];
        if (h->stop == NPF_STEP_NONE)
                snprintf(leaf, sizeof(leaf), "rank%" PRId64 "_start%" PRId64 "_for%" PRIu64 "ms", h->rank, h->start,
                         h->win.args.duration_ms);
        else
                snprintf(leaf, sizeof(leaf), "rank%" PRId64 "_start%" PRId64 "_stop%" PRId64, h->rank, h->start, h->stop);
        /* The window directory is this window's alone: an earlier run's gets a numbered sibling. */
        size_t base = strlen(leaf);
        for (int n = 1;; n++) {
                r = mkdirat(dirfd, leaf, 0755) < 0 ? -errno : 0;
                if (r != -EEXIST || n == 100)
                        break;
                snprintf(leaf + base, sizeof(leaf) - base, ".%d", n);
        }
        snprintf(h->dir, sizeof(h->dir), "%s/%s", h->win.prof_dir, leaf);
        /* The manifest goes through this descriptor: the directory the walk confined, whatever moves since. */
        if (r == 0 && (h->dirfd = openat(dirfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                r = -errno;
        close(dirfd);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "cannot create %.200s: %s", h->dir, strerror(-r));
                fail_window(h, step, msg);
                return r;
        }
        /*
         * Open from the moment its directory exists, before the backend starts (which can take
         * long): a rank killed from here on has its window recorded lost and its directory given
         * a manifest by the daemon.
         */
        h->opened_ns = npf_clock_ns(CLOCK_MONOTONIC);
        h->opened_real_ns = npf_clock_ns(CLOCK_REALTIME);
        h->last_step = step;
        h->message[0] = '\0';
        read_reason(h);
        publish_state(h, NPF_WINDOW_COLLECTING, step);
        json_decref(h->runtime);
        h->runtime = json_object();
        npf_backend_window_t bw = {
                .dir = h->dir,
                .args = &h->win.args,
                .rank = h->rank,
                .local_device = h->device,
                .first_step = step,
                .last_step = h->stop,
                .runtime = h->runtime,
        };
        r = h->backend->window_open(&h->bstate, &bw, err);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "%s backend: %.200s", h->backend->name, err);
                snprintf(h->message, sizeof(h->message), "%.255s", msg);
                write_manifest(h, false);
                json_decref(h->runtime);
                h->runtime = NULL;
                publish_state(h, NPF_WINDOW_FAILED, step);
                return r;
        }
        return 0;
}

/*
 * Close the window at @step and publish its one outcome: done, or failed when @failed (a
 * step already failed, with its reason in h->message), the backend cannot close it, or the
 * manifest cannot be written. Return: 0, or the first -errno.
 */
static int close_window(npf_rank_t *h, int64_t step, bool complete, int failed)
{
        char err[NPF_BACKEND_ERR_MAX] = "";
        int r;

        publish_state(h, NPF_WINDOW_FLUSHING, step);
        r = h->backend->window_close(h->bstate, h->last_step, complete, err);
        h->bstate = NULL;
        if (r < 0 && failed == 0) {
                snprintf(h->message, sizeof(h->message), "%s backend: %.200s", h->backend->name, err);
                complete = false;
        } else if (!complete && !h->message[0]) {
                snprintf(h->message, sizeof(h->message), "the window was cut short at step %" PRId64, h->last_step);
        }
        if (failed < 0)
                r = failed;
        int m = write_manifest(h, complete);
        json_decref(h->runtime);
        h->runtime = NULL;
        if (r == 0)
                r = m;
        publish_state(h, r < 0 ? NPF_WINDOW_FAILED : NPF_WINDOW_DONE, step);
        return r;
}

/* A new generation was read at the start of @step: what does it mean for this rank? */
static void evaluate(npf_rank_t *h, int64_t step)
{
        const npf_shm_args_t *a = &h->win.args;

        h->dir[0] = h->message[0] = '\0';
        h->backend = NULL;
        h->start = h->stop = NPF_STEP_NONE;
        if (!a->enabled) {
                publish_state(h, NPF_WINDOW_IDLE, step);
                return;
        }
        if (!h->win.selected) {
                publish_state(h, NPF_WINDOW_FILTERED, step);
                return;
        }
        int64_t start = a->start_step;
        if (start == NPF_STEP_NEXT) {
                /*
                 * torch_npu's start_step -1 starts its profiler in the very dynamic_profile.step()
                 * that reads the file (torch_npu/profiler/dynamic_profile.py, step(): cfg_ctx.start()),
                 * which is where this step begins; npuprof's "next" is the step after.
                 */
                start = a->dialect == NPF_DIALECT_TORCH_NPU ? step : step + 1;
                uint64_t k = a->start_at_multiple_of;
                if (k > 1 && start % (int64_t) k)
                        start += (int64_t) k - start % (int64_t) k;
        }
        h->start = start;
        h->stop = a->duration_ms ? NPF_STEP_NONE : start + (int64_t) a->step_count - 1;
        if (step > start) {
                snprintf(h->message, sizeof(h->message), "read the configuration at step %" PRId64
                         ", after the start step %" PRId64, step, start);
                publish_state(h, NPF_WINDOW_MISSED, step);
                return;
        }
        publish_state(h, NPF_WINDOW_ARMED, step);
}

int npf_rank_step_call(npf_rank_t *h, int64_t step)
{
        int r = 0;

        if (!h)
                return -EINVAL;

        /* The fast path, as the inline npf_rank_step(): nothing changed and no window to run. */
        if (h->fast.ctl && !h->fast.busy && !npf_shm_changed(h->fast.ctl, h->fast.generation)) {
                npf_shm_slot_note_step(h->fast.slot, step);
                return 0;
        }
        /*
         * Detached: a countdown, then the clock, and only then a system call, so that a rank
         * with no daemon pays no more per step than an attached one. getpid() is a system call
         * (glibc caches no pid), so it comes after them.
         */
        if (!h->fast.ctl) {
                if (h->attach_countdown-- > 0)
                        return 0;
                h->attach_countdown = ATTACH_CHECK_STEPS;
                uint64_t now = npf_clock_ns(CLOCK_MONOTONIC);
                if (now < h->next_attach_ns)
                        return 0;
                h->next_attach_ns = now + ATTACH_RETRY_NS;
                /* A child of fork() has its parent's handle: the window and the slot are the parent's. */
                if (getpid() != h->pid)
                        return 0;
                attach(h);
                if (!h->fast.ctl)
                        return 0;
        } else if (getpid() != h->pid) {
                return 0;
        }
        /* The heartbeat says a rank with a window is alive and stepping: kept while one is armed or open. */
        npf_slot_step(h->fast.slot, step, npf_clock_ns(CLOCK_MONOTONIC));

        /* A new configuration is read now, unless a window is open: it waits for its close. */
        if (!active(h) && npf_shm_changed(h->fast.ctl, h->fast.generation)) {
                if (npf_shm_read_window(h->fast.ctl, (uint32_t) h->rank, &h->win) >= 0 &&
                    h->win.args.generation != h->fast.generation) {
                        h->fast.generation = h->win.args.generation;
                        evaluate(h, step);
                } else if (h->win.args.generation == h->fast.generation) {
                        /* Nothing new after all (a reader of a changing segment): stay. */
                }
        }

        switch (h->state) {
        case NPF_WINDOW_ARMED:
                /* Steps that jump over the whole window (a resumed checkpoint) miss it. */
                if (h->stop != NPF_STEP_NONE && step > h->stop) {
                        snprintf(h->message, sizeof(h->message), "stepped from %" PRId64 " to %" PRId64
                                 ", past the window", h->state_step, step);
                        publish_state(h, NPF_WINDOW_MISSED, step);
                } else if (step >= h->start) {
                        r = open_window(h, step);
                }
                break;
        case NPF_WINDOW_COLLECTING: {
                bool over = h->stop == NPF_STEP_NONE
                                    ? npf_clock_ns(CLOCK_MONOTONIC) - h->opened_ns >= h->win.args.duration_ms * 1000000u
                                    : step > h->stop;
                if (over) {
                        r = close_window(h, step, true, 0);
                        /* A configuration that came during the window is taken now. */
                        if (npf_shm_changed(h->fast.ctl, h->fast.generation))
                                return npf_rank_step_call(h, step) < 0 ? -EIO : r;
                        break;
                }
                char err[NPF_BACKEND_ERR_MAX] = "";
                r = h->backend->window_step(h->bstate, step, err);
                h->last_step = step;
                if (r < 0) {
                        /* The backend's reason is what the slot and the manifest say, not "cut short". */
                        snprintf(h->message, sizeof(h->message), "%s backend: %.200s", h->backend->name, err);
                        close_window(h, step, false, r);
                }
                break;
        }
        default:
                break;
        }
        return r;
}

int npf_rank_open(const npf_rank_options_t *opts, npf_rank_t **ret_rank, char *err)
{
        npf_rank_options_t o = opts ? *opts : (npf_rank_options_t) { .rank = -1, .local_device = -1 };
        const char *env_shm = getenv(NPF_ENV_SHM);
        const char *name = o.shm_name ? o.shm_name : env_shm && *env_shm ? env_shm : NPF_SHM_NAME_DEFAULT;
        npf_rank_t *h;

        if (npf_shm_name_check(name, err) < 0)
                return -EINVAL;
        int64_t rank = o.rank >= 0 ? o.rank : env_int("RANK", env_int("RANK_ID", 0));
        if (rank >= NPF_SHM_MAX_RANKS) {
                if (err)
                        snprintf(err, NPF_SHM_ERR_MAX, "rank %" PRId64 " is out of range (0 to %u)", rank,
                                 NPF_SHM_MAX_RANKS - 1);
                return -EINVAL;
        }
        if (o.backend && strcmp(o.backend, "acl") != 0 && strcmp(o.backend, "host") != 0 &&
            strcmp(o.backend, "auto") != 0) {
                if (err)
                        snprintf(err, NPF_SHM_ERR_MAX, "backend '%s': expected acl, host or auto", o.backend);
                return -EINVAL;
        }
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        snprintf(h->shm_name, sizeof(h->shm_name), "%s", name);
        h->rank = rank;
        h->device = o.local_device >= 0 ? o.local_device
                                        : (int32_t) env_int("LOCAL_RANK", env_int("ASCEND_DEVICE_ID", -1));
        if (o.backend && strcmp(o.backend, "auto") != 0)
                snprintf(h->backend_override, sizeof(h->backend_override), "%s", o.backend);
        h->pid = getpid();
        h->dirfd = -1;
        pthread_mutex_init(&h->watch_lock, NULL);
        pthread_cond_init(&h->watch_cond, NULL);
        h->state = NPF_WINDOW_IDLE;
        h->start = h->stop = h->state_step = NPF_STEP_NONE;

        /* A live process holding our rank id is an error now; no segment is not. */
        char e[NPF_SHM_ERR_MAX];
        if (npf_shm_open(h->shm_name, 0, &h->shm, e) == 0) {
                int r = npf_slot_claim(h->shm, (uint32_t) rank, h->device, &h->lease, e);
                if (r < 0) {
                        if (err)
                                snprintf(err, NPF_SHM_ERR_MAX, "%s", e);
                        npf_shm_close(h->shm);
                        pthread_cond_destroy(&h->watch_cond);
                        pthread_mutex_destroy(&h->watch_lock);
                        free(h);
                        return r;
                }
                h->fast.slot = h->lease.slot;
                h->fast.ctl = npf_shm_ctl(h->shm);
                publish_state(h, NPF_WINDOW_IDLE, NPF_STEP_NONE);
        }
        start_watcher(h);
        *ret_rank = h;
        return 0;
}

void npf_rank_close(npf_rank_t *h)
{
        if (!h)
                return;
        if (getpid() != h->pid) {
                npf_rank_close_after_fork(h);
                return;
        }
        stop_watcher(h);
        /* Closing its own window is all: the ACL runtime is process-wide, another rank's
         * window may still be open in it. */
        /* A job whose last step is the window's last has a complete window. */
        if (h->state == NPF_WINDOW_COLLECTING)
                close_window(h, h->last_step + 1, h->stop != NPF_STEP_NONE && h->last_step >= h->stop, 0);
        if (h->fast.slot)
                npf_slot_release(h->shm, &h->lease);
        npf_shm_close(h->shm);
        json_decref(h->runtime);
        pthread_cond_destroy(&h->watch_cond);
        pthread_mutex_destroy(&h->watch_lock);
        free(h);
}

int npf_rank_fail(npf_rank_t *h, const char *why)
{
        if (!h || !why)
                return -EINVAL;
        if (getpid() != h->pid)
                return -ENOENT;
        switch (h->state) {
        case NPF_WINDOW_ARMED:
                snprintf(h->message, sizeof(h->message), "%.255s", why);
                publish_state(h, NPF_WINDOW_FAILED, h->state_step);
                return 0;
        case NPF_WINDOW_COLLECTING:
                snprintf(h->message, sizeof(h->message), "%.255s", why);
                close_window(h, h->last_step, false, -ECANCELED);
                return 0;
        default:
                return -ENOENT;
        }
}

void npf_rank_close_after_fork(npf_rank_t *h)
{
        if (!h)
                return;
        /*
         * The slot, its lock and any open backend state are the parent's: drop the mappings only.
         * The watcher is a thread of the parent's, not the child's: nothing to join, and its lock,
         * which it may have held at the fork, is not destroyed.
         */
        npf_slot_abandon(&h->lease);
        if (h->dirfd >= 0)
                close(h->dirfd);
        npf_shm_close(h->shm);
        json_decref(h->runtime);
        free(h);
}

void npf_rank_info(const npf_rank_t *h, npf_rank_info_t *ret_info)
{
        npf_rank_info_t i = {
                .rank = h->rank,
                .local_device = h->device,
                .attached = h->fast.ctl != NULL,
                .state = h->state,
                .generation = h->fast.generation,
                .window_start = h->start,
                .window_stop = h->stop,
                .state_step = h->state_step,
        };

        snprintf(i.backend, sizeof(i.backend), "%s", h->backend ? h->backend->name : "");
        snprintf(i.output, sizeof(i.output), "%s", h->dir);
        snprintf(i.message, sizeof(i.message), "%s", h->message);
        *ret_info = i;
}
