/* SPDX-License-Identifier: MIT */
#include "daemon/autowin.h"
#include "daemon/log.h"
#include "lib/atomicfile.h"
#include "lib/clock.h"
#include "lib/steptext.h"
#include "shm/slot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DAY_NS (UINT64_C(24) * 3600 * 1000000000)
#define MS_NS UINT64_C(1000000)
#define BUDGET_KEPT 1024u               /* > the most max_per_day allows */
#define PROPOSAL_MAX 4096               /* bytes of one proposal */
#define PROPOSAL_FRESH_NS (UINT64_C(600) * 1000000000)  /* an older proposal is not taken */
#define STACKS_ANSWER_NS (UINT64_C(30) * 1000000000)    /* a rank that has not answered by then will not */

enum { KIND_SLOWDOWN, KIND_STALL, KIND__COUNT };
static const char *const kind_names[KIND__COUNT] = { "slowdown", "stall" };

/* When the last ones of a kind were made, CLOCK_REALTIME, a ring. */
typedef struct budget {
        uint64_t at[BUDGET_KEPT];
        unsigned head, count;
} budget_t;

enum { STACKS_ASKED, STACKS_WRITTEN, STACKS_FAILED, STACKS_UNANSWERED, STACKS_GONE };
static const char *const stacks_state_names[] = { "asked", "written", "failed", "unanswered", "gone" };

typedef struct stacks_request {
        uint32_t slot, tag, rank, pid, asked;
        uint64_t asked_ns;
        int state, error;
        uint32_t file;                  /* the request the file is named by: a rank asked twice answers the newest */
        char *prof_dir;                 /* where the rank writes them: path() */
} stacks_request_t;

/* The file request @n of @q's rank is written to, as libnpuprof names it: a new string, or NULL. */
static char *path(const stacks_request_t *q, uint32_t n)
{
        char *s;

        return q->prof_dir && asprintf(&s, "%s/stacks/rank%" PRIu32 "_pid%" PRIu32 "_%" PRIu32 ".txt", q->prof_dir,
                                       q->rank, q->pid, n) >= 0 ? s : NULL;
}

struct npf_autowin {
        char *fleet_dir, *node;
        unsigned poll_ms;
        npf_autowin_publish_fn publish;
        void *data;

        npf_conf_auto_t policy;
        npf_shm_config_t *person;       /* the file's configuration in force; NULL: none yet */
        uint64_t person_ns;             /* CLOCK_REALTIME it was published; 0: before this daemon */
        budget_t budget[KIND__COUNT];
        uint64_t windows, stacks_asked;

        uint32_t next_proposal;         /* the first number not read yet */
        uint64_t looked_ns;

        json_t *last;                   /* the last one made here: {kind, reason, ...}; NULL: none */

        /* Stall captures: the ranks asked in the current one, and until when it takes ranks in. */
        uint64_t capture_until_ns;
        struct { uint32_t tag; int64_t step; } asked_for[NPF_SHM_SLOTS];
        bool refused_said;              /* a capture the budget refused was logged */
        stacks_request_t requests[NPF_AUTOWIN_STACKS_KEPT];
        unsigned req_head, req_count;
};

/* --- budgets ------------------------------------------------------------------------- */

static void budget_note(budget_t *b, uint64_t at_ns)
{
        b->at[b->head] = at_ns;
        b->head = (b->head + 1) % BUDGET_KEPT;
        if (b->count < BUDGET_KEPT)
                b->count++;
}

static unsigned budget_used(const budget_t *b, uint64_t now_ns)
{
        unsigned n = 0;

        for (unsigned i = 0; i < b->count; i++)
                if (b->at[i] + DAY_NS > now_ns)
                        n++;
        return n;
}

static uint64_t budget_last(const budget_t *b)
{
        uint64_t last = 0;

        for (unsigned i = 0; i < b->count; i++)
                if (b->at[i] > last)
                        last = b->at[i];
        return last;
}

/* When the next of a kind may be made: 0 at once, UINT64_MAX never (max_per_day 0). */
static uint64_t budget_next(const budget_t *b, const npf_conf_auto_t *policy, uint64_t now_ns)
{
        uint64_t last = budget_last(b), next = last ? last + policy->cooldown_ms * MS_NS : 0;

        if (policy->max_per_day == 0)
                return UINT64_MAX;
        if (budget_used(b, now_ns) >= policy->max_per_day) {
                /* The day's budget frees up when the oldest of the last max_per_day is a day old. */
                uint64_t oldest = UINT64_MAX;
                unsigned newer;
                for (unsigned i = 0; i < b->count; i++) {
                        newer = 0;
                        for (unsigned j = 0; j < b->count; j++)
                                newer += b->at[j] >= b->at[i];
                        if (newer == policy->max_per_day && b->at[i] < oldest)
                                oldest = b->at[i];
                }
                if (oldest != UINT64_MAX && oldest + DAY_NS > next)
                        next = oldest + DAY_NS;
        }
        return next > now_ns ? next : 0;
}

/* Return: true if one of @kind may be made now; else false with why in @why. */
static bool budget_allows(const npf_autowin_t *a, int kind, uint64_t now_ns, char *why, size_t len)
{
        const budget_t *b = &a->budget[kind];
        uint64_t next = budget_next(b, &a->policy, now_ns);

        if (!next)
                return true;
        if (next == UINT64_MAX)
                snprintf(why, len, "max_per_day is 0");
        else if (budget_used(b, now_ns) >= a->policy.max_per_day)
                snprintf(why, len, "%u in the last 24 hours, at most %" PRIu32 " (max_per_day); the next in %.0f s",
                         budget_used(b, now_ns), a->policy.max_per_day, (double) (next - now_ns) / 1e9);
        else
                snprintf(why, len, "cooling down for %.0f s more (cooldown_s %" PRIu64 ")",
                         (double) (next - now_ns) / 1e9, a->policy.cooldown_ms / 1000u);
        return false;
}

/* --- the window ---------------------------------------------------------------------- */

static void note_last(npf_autowin_t *a, int kind, const char *reason, uint64_t generation, int64_t start_step,
                      uint64_t now_ns)
{
        json_decref(a->last);
        a->last = json_pack("{s:s, s:s, s:o, s:o, s:I}", "kind", kind_names[kind], "reason", reason,
                            "generation", generation ? json_integer((json_int_t) generation) : json_null(),
                            "start_step", start_step >= 0 ? json_integer(start_step) : json_null(),
                            "unix_ms", (json_int_t) (now_ns / MS_NS));
}

/*
 * Open the window of @steps steps from @start on this node's ranks, for @reason.
 * Return: the generation, or 0 (logged why).
 */
static uint64_t open_window(npf_autowin_t *a, int64_t start, uint32_t steps, const char *reason)
{
        npf_shm_config_t *c = malloc(sizeof(*c));
        json_t *extra = NULL;
        char *text = NULL;
        uint64_t gen = 0;

        if (!c)
                goto out;
        memcpy(c, a->person, sizeof(*c));
        npf_shm_args_t *args = &c->args;
        args->enabled = 1;
        args->start_step = start;
        args->stop_step = start + (int64_t) steps - 1;
        args->step_count = steps;
        args->warmup = 0;
        args->start_at_multiple_of = 0;
        args->duration_ms = 0;
        args->rank_filter = NPF_RANKS_ALL;
        args->rank_count = 0;
        memset(c->rank_bitmap, 0, sizeof(c->rank_bitmap));

        /* The reason rides in the extra JSON, which each rank's manifest carries. */
        if (args->extra_len)
                extra = json_loadb(c->extra, args->extra_len, 0, NULL);
        if (!json_is_object(extra)) {
                json_decref(extra);
                extra = json_object();
        }
        json_object_set_new(extra, "reason", json_string(reason));
        text = json_dumps(extra, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
        if (!text || strlen(text) >= NPF_SHM_EXTRA_MAX) {
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "automatic window not opened: its metadata and "
                        "reason take more than %u bytes", NPF_SHM_EXTRA_MAX - 1);
                goto out;
        }
        memset(c->extra, 0, sizeof(c->extra));
        memcpy(c->extra, text, strlen(text));
        args->extra_len = (uint32_t) strlen(text);
        gen = a->publish(c, reason, a->data);
out:
        free(text);
        json_decref(extra);
        free(c);
        return gen;
}

/* Why a window cannot open on this node now, or NULL. */
static const char *window_refused(const npf_autowin_t *a, bool windows_open)
{
        if (!a->person)
                return "no configuration is in force";
        if (!a->policy.slowdown_steps)
                return "this node's configuration asks for no automatic window (auto.on_slowdown)";
        if (windows_open)
                return "a window is armed or open on this node, and a person's window wins";
        return NULL;
}

/* Take the proposal @o (number @number): open its window here unless it cannot be. */
static void take_proposal(npf_autowin_t *a, const npf_progress_t *p, json_t *o, uint32_t number, bool windows_open,
                          uint64_t now_ns)
{
        json_int_t start = json_integer_value(json_object_get(o, "start_step"));
        json_int_t steps = json_integer_value(json_object_get(o, "steps"));
        json_int_t at_ms = json_integer_value(json_object_get(o, "proposed_unix_ms"));
        const char *reason = json_string_value(json_object_get(o, "reason"));
        const char *kind = json_string_value(json_object_get(o, "kind"));
        int64_t here = npf_progress_fastest_step(p);
        const char *refused;
        char s_start[32], s_here[32];

        if (!reason || !kind || strcmp(kind, "slowdown") != 0 || start < 0 || start > NPF_STEP_MAX ||
            steps < 1 || steps > 1000 || at_ms <= 0) {
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "%s/%s/%08" PRIu32 ".json is not a proposal of "
                        "npuprofd's; ignored", a->fleet_dir, NPF_AUTOWIN_PROPOSALS_DIR, number);
                return;
        }
        budget_note(&a->budget[KIND_SLOWDOWN], (uint64_t) at_ms * MS_NS);
        npf_step_text(start, s_start);
        npf_step_text(here, s_here);
        if ((uint64_t) at_ms * MS_NS + PROPOSAL_FRESH_NS < now_ns)
                refused = "it is over ten minutes old";
        else if ((uint64_t) at_ms * MS_NS < a->person_ns)
                refused = "the configuration file was edited since, and a person's edit wins";
        else
                refused = window_refused(a, windows_open);
        if (!refused && here >= start)
                refused = "this node's ranks are past its first step already";
        if (refused) {
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "automatic window at step %s not opened here "
                        "(%s; the fastest rank is at step %s): %s", s_start, reason, s_here, refused);
                return;
        }
        uint64_t gen = open_window(a, start, (uint32_t) steps, reason);
        if (!gen)
                return;
        a->windows++;
        note_last(a, KIND_SLOWDOWN, reason, gen, start, now_ns);
        npf_log(LOG_NOTICE, (int64_t) gen, NPF_LOG_NONE, "automatic window of %" JSON_INTEGER_FORMAT " step%s "
                "from step %s on every rank, generation %" PRIu64 " (%s)", steps, steps == 1 ? "" : "s", s_start,
                gen, reason);
}

/*
 * The proposals' directory, made if need be. Return: a descriptor or -errno. (Paths, not
 * openat(): ThreadSanitizer sees descriptors made by open() only; see tests/tsan.supp.)
 */
static int proposals_dir(const npf_autowin_t *a)
{
        char path[PATH_MAX];
        int fd;

        if (snprintf(path, sizeof(path), "%s/%s", a->fleet_dir, NPF_AUTOWIN_PROPOSALS_DIR) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        if (mkdir(path, 0777) < 0 && errno != EEXIST)
                return -errno;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Read proposal @number. Return: 1 and it in @ret, 0 when there is none, or -errno. */
static int read_proposal(const npf_autowin_t *a, uint32_t number, json_t **ret)
{
        char path[PATH_MAX], buf[PROPOSAL_MAX];
        ssize_t n;
        int fd;

        if (snprintf(path, sizeof(path), "%s/%s/%08" PRIu32 ".json", a->fleet_dir, NPF_AUTOWIN_PROPOSALS_DIR,
                     number) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        n = read(fd, buf, sizeof(buf));
        close(fd);
        if (n < 0)
                return -errno;
        *ret = json_loadb(buf, (size_t) n, 0, NULL);
        if (!json_is_object(*ret)) {
                json_decref(*ret);
                *ret = json_object();
        }
        return 1;
}

/* Take the fleet's proposals made since the last look. */
static void look_for_proposals(npf_autowin_t *a, const npf_progress_t *p, bool windows_open, uint64_t now_ns)
{
        json_t *o;

        if (!a->fleet_dir)
                return;
        while (read_proposal(a, a->next_proposal, &o) > 0) {
                take_proposal(a, p, o, a->next_proposal, windows_open, now_ns);
                json_decref(o);
                a->next_proposal++;
        }
}

/*
 * The proposals made before this daemon started are the fleet's budget, not windows to
 * open: count them, and start reading after the last.
 */
static void count_old_proposals(npf_autowin_t *a)
{
        json_t *o;

        a->next_proposal = 1;
        while (read_proposal(a, a->next_proposal, &o) > 0) {
                json_int_t at_ms = json_integer_value(json_object_get(o, "proposed_unix_ms"));
                if (at_ms > 0)
                        budget_note(&a->budget[KIND_SLOWDOWN], (uint64_t) at_ms * MS_NS);
                json_decref(o);
                a->next_proposal++;
        }
}

/* Write proposal @o as the next number. Return: 0, -EEXIST when another node's took it, or -errno. */
static int propose(npf_autowin_t *a, json_t *o)
{
        npf_atomicfile_t f;
        char name[32], tag[64];
        char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        int dfd = proposals_dir(a), r;

        if (dfd < 0 || !text) {
                free(text);
                if (dfd >= 0)
                        close(dfd);
                return dfd < 0 ? dfd : -ENOMEM;
        }
        snprintf(name, sizeof(name), "%08" PRIu32 ".json", a->next_proposal);
        snprintf(tag, sizeof(tag), "%s.%ld", a->node, (long) getpid());
        r = npf_atomicfile_write(&f, dfd, name, tag, 0644, NPF_ATOMICFILE_NOREPLACE, text, strlen(text));
        close(dfd);
        free(text);
        return r;
}

void npf_autowin_slowdown(npf_autowin_t *a, const npf_progress_t *p, const npf_progress_event_t *ev,
                          bool windows_open, uint64_t now_ns)
{
        const char *refused = window_refused(a, windows_open);
        char why[160], reason[NPF_AUTOWIN_REASON_MAX], since[32], s_start[32];
        int64_t here = npf_progress_fastest_step(p);
        double step_s = npf_progress_step_time(p);

        if (!a->policy.slowdown_steps)
                return;
        if (!refused && (here < 0 || step_s <= 0))
                refused = "the job's step is not known";
        if (!refused && !budget_allows(a, KIND_SLOWDOWN, now_ns, why, sizeof(why)))
                refused = why;
        npf_step_text(ev->since_step, since);
        if (refused) {
                npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "slowdown since step %s: no automatic window: %s",
                        since, refused);
                return;
        }

        /* Two sweeps of every daemon and a second, at the job's step time, and never fewer than a few steps. */
        double latency_s = (2.0 * a->poll_ms + (a->fleet_dir ? NPF_AUTOWIN_LOOK_MS + 1000.0 : 500.0)) / 1000.0;
        int64_t margin = (int64_t) (latency_s / step_s) + 2;   /* rounded up, and one more */
        if (margin < NPF_AUTOWIN_MARGIN_STEPS_MIN)
                margin = NPF_AUTOWIN_MARGIN_STEPS_MIN;
        int64_t start = here + margin;

        snprintf(reason, sizeof(reason), "auto: slowdown since step %s: step time %.3g ms, %.2fx the baseline of "
                 "%.3g ms (seen by %s)", since, ev->step_time_s * 1e3, ev->factor, ev->baseline_s * 1e3, a->node);
        npf_step_text(start, s_start);
        if (!a->fleet_dir) {
                budget_note(&a->budget[KIND_SLOWDOWN], now_ns);
                uint64_t gen = open_window(a, start, a->policy.slowdown_steps, reason);
                if (!gen)
                        return;
                a->windows++;
                note_last(a, KIND_SLOWDOWN, reason, gen, start, now_ns);
                npf_log(LOG_NOTICE, (int64_t) gen, NPF_LOG_NONE, "automatic window of %" PRIu32 " step%s from step "
                        "%s on every rank, generation %" PRIu64 " (%s)", a->policy.slowdown_steps,
                        a->policy.slowdown_steps == 1 ? "" : "s", s_start, gen, reason);
                return;
        }
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:f}", "kind", "slowdown", "node", a->node,
                              "reason", reason, "start_step", (json_int_t) start, "steps",
                              (json_int_t) a->policy.slowdown_steps, "proposed_unix_ms", (json_int_t) (now_ns / MS_NS),
                              "since_step", (json_int_t) ev->since_step, "factor", ev->factor, "step_time_ms",
                              ev->step_time_s * 1e3, "baseline_ms", ev->baseline_s * 1e3);
        int r = o ? propose(a, o) : -ENOMEM;
        json_decref(o);
        if (r == -EEXIST)
                npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "slowdown since step %s: another node proposed an "
                        "automatic window first; this node takes that one", since);
        else if (r < 0)
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "slowdown since step %s: cannot propose an automatic "
                        "window in %s/%s: %s", since, a->fleet_dir, NPF_AUTOWIN_PROPOSALS_DIR, strerror(-r));
        else
                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "slowdown since step %s: proposed an automatic window "
                        "from step %s to the fleet (%s/%s/%08" PRIu32 ".json)", since, s_start, a->fleet_dir,
                        NPF_AUTOWIN_PROPOSALS_DIR, a->next_proposal);
        /* The proposal, ours or the winner's, is taken as every node takes it: at once, here. */
        a->looked_ns = 0;
        look_for_proposals(a, p, windows_open, now_ns);
}

/* --- stacks of stalled ranks --------------------------------------------------------- */

static stacks_request_t *new_request(npf_autowin_t *a)
{
        stacks_request_t *q = &a->requests[a->req_head];

        free(q->prof_dir);
        memset(q, 0, sizeof(*q));
        a->req_head = (a->req_head + 1) % NPF_AUTOWIN_STACKS_KEPT;
        if (a->req_count < NPF_AUTOWIN_STACKS_KEPT)
                a->req_count++;
        return q;
}

static void ask_stacks(npf_autowin_t *a, npf_shm_ranks_t *ranks, const npf_progress_rank_t *r, uint32_t tag,
                       const char *prof_dir, uint64_t now_ns)
{
        npf_shm_slot_t *slot = &ranks->slots[r->slot];
        uint32_t pid = NPF_SLOT_PID(atomic_load_explicit((_Atomic uint64_t *) &slot->claim, memory_order_acquire));
        uint32_t asked;
        char step[32];

        if (npf_slot_ask_stacks(slot, &asked) < 0)
                return;
        stacks_request_t *q = new_request(a);
        q->slot = r->slot;
        q->tag = tag;
        q->rank = r->rank;
        q->pid = pid;
        q->asked = asked;
        q->asked_ns = now_ns;
        q->state = STACKS_ASKED;
        q->file = asked;
        q->prof_dir = strdup(prof_dir);
        a->stacks_asked++;
        npf_step_text(r->step, step);
        char *file = path(q, asked);
        npf_log(LOG_NOTICE, NPF_LOG_NONE, r->rank, "progress stall: rank %" PRIu32 " asked for its stacks, stalled "
                "at step %s for %.0f s (into %s)", r->rank, step, r->stalled_for_s, file ? file : prof_dir);
        free(file);
}

/* Note what the ranks asked made of it. */
static void check_requests(npf_autowin_t *a, const npf_shm_ranks_t *ranks, uint64_t now_ns)
{
        for (unsigned i = 0; i < a->req_count; i++) {
                stacks_request_t *q = &a->requests[i];
                const npf_shm_slot_t *slot = &ranks->slots[q->slot];
                uint64_t claim;
                int error = 0;

                if (q->state != STACKS_ASKED)
                        continue;
                claim = atomic_load_explicit((_Atomic uint64_t *) &slot->claim, memory_order_acquire);
                if (npf_slot_stacks_answered(slot, q->asked, &error)) {
                        q->state = error ? STACKS_FAILED : STACKS_WRITTEN;
                        q->file = npf_slot_stacks_done(slot);
                } else if (NPF_SLOT_TAG(claim) != q->tag || NPF_SLOT_PID(claim) == 0)
                        q->state = STACKS_GONE;
                else if (q->asked_ns + STACKS_ANSWER_NS < now_ns)
                        q->state = STACKS_UNANSWERED;
                else
                        continue;
                q->error = error;
                char *file = path(q, q->file);
                if (q->state == STACKS_WRITTEN)
                        npf_log(LOG_NOTICE, NPF_LOG_NONE, q->rank, "rank %" PRIu32 " wrote its stacks: %s", q->rank,
                                file ? file : "");
                else if (q->state == STACKS_FAILED)
                        npf_log(LOG_WARNING, NPF_LOG_NONE, q->rank, "rank %" PRIu32 " could not write its stacks to %s: "
                                "%s", q->rank, file ? file : "", strerror(error));
                else if (q->state == STACKS_UNANSWERED)
                        npf_log(LOG_WARNING, NPF_LOG_NONE, q->rank, "rank %" PRIu32 " did not write its stacks within "
                                "30 s (a libnpuprof without the stacks thread?)", q->rank);
                else
                        npf_log(LOG_NOTICE, NPF_LOG_NONE, q->rank, "rank %" PRIu32 " left before writing its stacks",
                                q->rank);
                free(file);
        }
}

static void capture_stalls(npf_autowin_t *a, npf_shm_ranks_t *ranks, const npf_progress_t *p, const char *prof_dir,
                           uint64_t now_ns)
{
        npf_progress_rank_t r;
        uint32_t cursor = 0;
        char why[160];

        while (npf_progress_next(p, &cursor, &r)) {
                if (!r.stalled || r.stalled_for_s * 1000.0 < (double) a->policy.stall_after_ms ||
                    r.slot >= NPF_SHM_SLOTS)
                        continue;
                uint64_t claim = atomic_load_explicit((_Atomic uint64_t *) &ranks->slots[r.slot].claim,
                                                      memory_order_acquire);
                uint32_t tag = NPF_SLOT_TAG(claim);
                if (a->asked_for[r.slot].tag == tag && a->asked_for[r.slot].step == r.step)
                        continue;       /* asked in this stall already */
                if (now_ns >= a->capture_until_ns) {
                        if (!budget_allows(a, KIND_STALL, now_ns, why, sizeof(why))) {
                                if (!a->refused_said)
                                        npf_log(LOG_NOTICE, NPF_LOG_NONE, NPF_LOG_NONE, "progress stall: no stacks "
                                                "asked for: %s", why);
                                a->refused_said = true;
                                return;
                        }
                        budget_note(&a->budget[KIND_STALL], now_ns);
                        a->capture_until_ns = now_ns + NPF_AUTOWIN_STACKS_GRACE_MS * MS_NS;
                        a->refused_said = false;
                        note_last(a, KIND_STALL, "auto: progress stall", 0, r.step, now_ns);
                }
                a->asked_for[r.slot].tag = tag;
                a->asked_for[r.slot].step = r.step;
                ask_stacks(a, ranks, &r, tag, prof_dir, now_ns);
        }
}

void npf_autowin_sweep(npf_autowin_t *a, npf_shm_ranks_t *ranks, const npf_progress_t *p, const char *prof_dir,
                       bool windows_open, uint64_t now_ns)
{
        if (a->fleet_dir && now_ns >= a->looked_ns + NPF_AUTOWIN_LOOK_MS * MS_NS) {
                a->looked_ns = now_ns;
                look_for_proposals(a, p, windows_open, now_ns);
        }
        if (a->policy.stall_after_ms && prof_dir && prof_dir[0])
                capture_stalls(a, ranks, p, prof_dir, now_ns);
        check_requests(a, ranks, now_ns);
}

/* --- the rest ------------------------------------------------------------------------ */

void npf_autowin_configured(npf_autowin_t *a, const npf_shm_config_t *person, const npf_conf_auto_t *policy,
                            bool published, uint64_t now_ns)
{
        if (published)
                a->person_ns = now_ns;
        if (!a->person)
                a->person = malloc(sizeof(*a->person));
        if (a->person)
                memcpy(a->person, person, sizeof(*a->person));
        a->policy = *policy;
}

int npf_autowin_new(const npf_autowin_options_t *opt, npf_autowin_t **ret)
{
        npf_autowin_t *a = calloc(1, sizeof(*a));

        if (!a)
                return -ENOMEM;
        a->fleet_dir = opt->fleet_dir ? strdup(opt->fleet_dir) : NULL;
        a->node = strdup(opt->node ? opt->node : "this node");
        a->poll_ms = opt->poll_ms;
        a->publish = opt->publish;
        a->data = opt->data;
        a->next_proposal = 1;
        if ((opt->fleet_dir && !a->fleet_dir) || !a->node) {
                npf_autowin_free(a);
                return -ENOMEM;
        }
        if (a->fleet_dir)
                count_old_proposals(a);
        *ret = a;
        return 0;
}

npf_autowin_t *npf_autowin_free(npf_autowin_t *a)
{
        if (!a)
                return NULL;
        for (unsigned i = 0; i < NPF_AUTOWIN_STACKS_KEPT; i++)
                free(a->requests[i].prof_dir);
        json_decref(a->last);
        free(a->person);
        free(a->fleet_dir);
        free(a->node);
        free(a);
        return NULL;
}

uint64_t npf_autowin_windows(const npf_autowin_t *a)
{
        return a ? a->windows : 0;
}

uint64_t npf_autowin_stacks(const npf_autowin_t *a)
{
        return a ? a->stacks_asked : 0;
}

static json_t *budget_json(const npf_autowin_t *a, int kind, uint64_t now_ns)
{
        uint64_t next = budget_next(&a->budget[kind], &a->policy, now_ns);

        return json_pack("{s:I, s:I, s:o}", "used", (json_int_t) budget_used(&a->budget[kind], now_ns),
                         "max_per_day", (json_int_t) a->policy.max_per_day, "next_unix_ms",
                         next == UINT64_MAX ? json_null() : json_integer((json_int_t) ((next ? next : now_ns) / MS_NS)));
}

json_t *npf_autowin_json(const npf_autowin_t *a)
{
        uint64_t now_ns = npf_clock_ns(CLOCK_REALTIME);
        json_t *stacks = json_array();

        /* Newest first. */
        for (unsigned k = 0; k < a->req_count; k++) {
                const stacks_request_t *q =
                        &a->requests[(a->req_head + NPF_AUTOWIN_STACKS_KEPT - 1 - k) % NPF_AUTOWIN_STACKS_KEPT];
                char *file = path(q, q->file);
                json_array_append_new(stacks, json_pack("{s:I, s:I, s:I, s:I, s:o, s:s, s:o}", "rank",
                                                        (json_int_t) q->rank, "pid", (json_int_t) q->pid, "asked",
                                                        (json_int_t) q->asked, "asked_unix_ms",
                                                        (json_int_t) (q->asked_ns / MS_NS), "path",
                                                        file ? json_string(file) : json_null(), "state",
                                                        stacks_state_names[q->state], "error",
                                                        q->error ? json_string(strerror(q->error)) : json_null()));
                free(file);
        }
        return json_pack("{s:o, s:I, s:I, s:o, s:{s:o, s:o}, s:o, s:o}", "policy", npf_conf_auto_json(&a->policy),
                         "windows", (json_int_t) a->windows, "stacks_asked", (json_int_t) a->stacks_asked, "last",
                         a->last ? json_incref(a->last) : json_null(), "budget", "slowdown",
                         budget_json(a, KIND_SLOWDOWN, now_ns), "stall", budget_json(a, KIND_STALL, now_ns), "stacks",
                         stacks, "proposals", a->fleet_dir ? json_sprintf("%s/%s", a->fleet_dir,
                                                                          NPF_AUTOWIN_PROPOSALS_DIR)
                                                           : json_null());
}
