/* SPDX-License-Identifier: MIT */
#include "daemon/sweep.h"
#include "lib/proc.h"
#include "shm/slot.h"
#include "lib/clock.h"

#include <string.h>
#include <time.h>

static bool is_outcome(uint32_t state)
{
        return state == NPF_WINDOW_DONE || state == NPF_WINDOW_FAILED || state == NPF_WINDOW_MISSED ||
               state == NPF_WINDOW_FILTERED || state == NPF_WINDOW_LOST;
}

/* The next entry of the history, emptied and numbered. */
static npf_window_record_t *history_next(npf_sweep_t *s)
{
        npf_window_record_t *rec = &s->history[s->head];

        memset(rec, 0, sizeof(*rec));
        rec->id = ++s->recorded;
        rec->ended_ns = npf_clock_ns(CLOCK_REALTIME);
        return rec;
}

/* @rec, the history's newest, is complete: count it and hand it on. */
static void history_push(npf_sweep_t *s, const npf_window_record_t *rec, npf_sweep_record_cb cb, void *data)
{
        s->head = (s->head + 1) % NPF_SWEEP_HISTORY;
        if (s->count < NPF_SWEEP_HISTORY)
                s->count++;
        s->outcomes[rec->outcome < NPF_WINDOW__COUNT ? rec->outcome : NPF_WINDOW_LOST]++;
        if (cb)
                cb(rec, data);
}

void npf_sweep_record(npf_sweep_t *s, const npf_window_record_t *rec, npf_sweep_record_cb cb, void *data)
{
        npf_window_record_t *slot = history_next(s);
        uint64_t id = slot->id, ended = slot->ended_ns;

        *slot = *rec;
        slot->id = id;
        slot->ended_ns = ended;
        history_push(s, slot, cb, data);
}

static void record(npf_sweep_t *s, const npf_slot_view_t *v, uint32_t outcome, npf_sweep_record_cb cb, void *data)
{
        npf_window_record_t *rec = history_next(s);

        rec->rank = v->rank;
        rec->pid = v->pid;
        rec->generation = v->st.generation;
        rec->start_step = v->st.window_start;
        rec->stop_step = v->st.window_stop;
        rec->outcome = outcome;
        rec->state_ns = v->st.state_ns;
        rec->last_step = v->step;
        rec->backend = v->st.backend;
        memcpy(rec->output, v->st.output, sizeof(rec->output));
        memcpy(rec->message, v->st.message, sizeof(rec->message));
        history_push(s, rec, cb, data);
}

/* Whether the rank in slot @i, live and read as @v, has been silent too long; @gap: time since the last sweep. */
static bool judge_stalled(npf_sweep_t *s, uint32_t i, const npf_slot_view_t *v, uint64_t gap)
{
        if (v->st.state != NPF_WINDOW_COLLECTING || !v->heartbeat_ns || v->heartbeat_ns != s->seen[i].heartbeat ||
            v->tag != s->seen[i].tag) {
                s->seen[i].heartbeat = v->heartbeat_ns;
                s->seen[i].quiet_ns = 0;
                return false;
        }
        s->seen[i].quiet_ns += gap;
        return s->seen[i].quiet_ns > s->stall_ms * 1000000u;
}

/*
 * The processes a reclaim pass found alive, so that /proc is read once per process and
 * not once per rank: one process may hold many ranks (a thread or a device each).
 */
typedef struct alive_proc {
        uint32_t pid;
        uint64_t start;
} alive_proc_t;

typedef struct alive_procs {
        uint32_t n;
        alive_proc_t p[64];
} alive_procs_t;

/*
 * Whether the process (@pid, @start), a rank that takes no lock, is known to run, asking
 * /proc once per process; false leaves the judgement (a claim still starting, a pid gone or
 * reused) to npf_slot_reclaim().
 */
static bool known_running(alive_procs_t *a, uint32_t pid, uint64_t start)
{
        for (uint32_t k = 0; k < a->n; k++)
                if (a->p[k].pid == pid && a->p[k].start == start)
                        return true;
        if (start == 0 || npf_proc_check((pid_t) pid, start) != NPF_PROC_ALIVE)
                return false;
        if (a->n < sizeof(a->p) / sizeof(a->p[0]))
                a->p[a->n++] = (alive_proc_t) { .pid = pid, .start = start };
        return true;
}

/*
 * The pid, as the daemon sees it, of the holder of the claim of tag @tag in slot @i, which
 * recorded @recorded (in its own pid namespace): as looked up, else as recorded.
 */
static uint32_t pid_here(const npf_sweep_t *s, uint32_t i, uint32_t tag, uint32_t recorded)
{
        return s->holder[i].tag == tag && tag != 0 ? s->holder[i].pid : recorded;
}

void npf_sweep_run(npf_sweep_t *s, npf_shm_t *shm, uint64_t now_ns, npf_sweep_record_cb cb, void *data)
{
        npf_shm_ranks_t *table = npf_shm_ranks(shm);
        alive_procs_t alive = { .n = 0 };
        bool look = false;
        uint64_t gap = s->last_ns && now_ns > s->last_ns ? now_ns - s->last_ns : 0;
        npf_slot_view_t v;
        bool reclaim = !s->primed || now_ns - s->reclaim_ns >= NPF_SWEEP_RECLAIM_MS * 1000000ull;

        if (reclaim)
                s->reclaim_ns = now_ns;
        if (s->gap_max_ms && gap > s->gap_max_ms * 1000000u)
                gap = s->gap_max_ms * 1000000u;
        s->last_ns = now_ns;
        s->attached = 0;
        if (s->progress)
                npf_progress_begin(s->progress, now_ns);
        memset(s->by_state, 0, sizeof(s->by_state));
        memset(s->stalled, 0, sizeof(s->stalled));
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++) {
                uint64_t claim = npf_slot_claim_word(&table->slots[i]);

                /*
                 * A rank that died with its window open lost it; its output stays on disk. A
                 * rank that holds its slot's lock is asked about by the lock alone.
                 */
                if (reclaim && NPF_SLOT_PID(claim) != 0) {
                        uint64_t start = npf_slot_proc_start(&table->slots[i]);
                        if ((npf_slot_guarded(&table->slots[i], claim) ||
                             !known_running(&alive, NPF_SLOT_PID(claim), start)) &&
                            npf_slot_reclaim(shm, i, &v) == 1) {
                                s->reclaimed++;
                                v.pid = pid_here(s, i, v.tag, v.pid);
                                if (v.st.state == NPF_WINDOW_COLLECTING || v.st.state == NPF_WINDOW_FLUSHING)
                                        record(s, &v, NPF_WINDOW_LOST, cb, data);
                        }
                }
                /*
                 * A slot's cold entry (its window state) is read only when its sequence moved
                 * or it was claimed anew since the last sweep read it; else its hot entry is
                 * all there is to read, and a free one holds nothing new at all. At the first
                 * sweep, a slot never claimed whose state was never written (claim and
                 * sequence still 0) holds nothing either.
                 */
                uint64_t seq = npf_slot_seq(&table->slots[i]);
                bool unchanged = seq == s->seen[i].seq && claim == s->seen[i].claim;
                if (unchanged && NPF_SLOT_PID(claim) == 0)
                        continue;
                if (unchanged) {
                        memset(&v.st, 0, sizeof(v.st));
                        npf_slot_read_hot(table, i, &v);
                        v.st.state = s->seen[i].state;
                        v.windows_ended = s->seen[i].ended;
                } else if (npf_slot_pread_current(shm, i, &v) < 0 ||
                           (v.windows_ended != s->seen[i].ended && npf_slot_pread(shm, i, &v) < 0)) {
                        /* Torn by its writer this time: what progress knows of it stands. */
                        if (s->progress && NPF_SLOT_PID(claim) != 0)
                                npf_progress_unread(s->progress, i);
                        s->seen[i].seq = UINT64_MAX;
                        continue;
                } else {
                        /* The claim word read before the state: a claim made since is read again next time. */
                        s->seen[i].claim = claim;
                        s->seen[i].seq = v.seq;
                        s->seen[i].state = v.st.state;
                }
                /* A window that opened and closed between two sweeps slowed the steps between them. */
                bool window_ended = v.windows_ended != s->seen[i].ended;
                /*
                 * A window ended here since the last sweep: the slot kept it apart even if the
                 * rank moved on at once, or closed and left. (A daemon's first sweep only notes
                 * what earlier daemons recorded.)
                 */
                if (v.windows_ended != s->seen[i].ended) {
                        uint64_t from = s->seen[i].ended;
                        /* The pid the slot's last claim recorded, while held or since released. */
                        uint32_t recorded = v.pid != 0 && v.pid != NPF_SLOT_RECLAIMING ? v.pid
                                            : s->seen[i].tag == v.tag ? s->seen[i].pid : 0;
                        /* More than the slot keeps ended since the last sweep: the oldest are only counted. */
                        if (v.windows_ended < from || v.windows_ended - from > NPF_SLOT_ENDED) {
                                if (s->primed && v.windows_ended > from)
                                        s->unrecorded += v.windows_ended - from - NPF_SLOT_ENDED;
                                from = v.windows_ended > NPF_SLOT_ENDED ? v.windows_ended - NPF_SLOT_ENDED : 0;
                        }
                        for (uint64_t n = from; s->primed && n < v.windows_ended; n++) {
                                npf_slot_view_t ended = v;
                                ended.st = v.ended[n % NPF_SLOT_ENDED];
                                if (!is_outcome(ended.st.state))
                                        continue;
                                /* The slot may have passed to another rank since: the record names its own. */
                                if (ended.st.pid != 0) {
                                        ended.rank = ended.st.rank;
                                        ended.pid = ended.st.pid;
                                } else {
                                        ended.pid = recorded;
                                }
                                if (ended.pid == recorded)
                                        ended.pid = pid_here(s, i, v.tag, recorded);
                                record(s, &ended, ended.st.state, cb, data);
                        }
                        s->seen[i].ended = v.windows_ended;
                }
                if (v.pid == 0 || v.pid == NPF_SLOT_RECLAIMING)
                        continue;
                s->stalled[i] = judge_stalled(s, i, &v, gap);
                if (s->progress)
                        npf_progress_sample(s->progress, &(npf_progress_sample_t) {
                                .slot = i, .tag = v.tag, .rank = v.rank, .step = v.step,
                                .windowed = window_ended || v.st.state == NPF_WINDOW_COLLECTING ||
                                            v.st.state == NPF_WINDOW_FLUSHING });
                s->seen[i].tag = v.tag;
                s->seen[i].pid = v.pid;
                s->attached++;
                s->by_state[s->stalled[i] ? NPF_SWEEP_STALLED : v.st.state]++;
                /* A new claim: whose it is, as the daemon sees it, is looked up once. */
                s->look[i] = s->holder[i].tag != v.tag;
                look |= s->look[i];
        }
        if (look) {
                npf_slot_find_holders(shm, s->look, s->holder);
                memset(s->look, 0, sizeof(s->look));
        }
        if (s->progress)
                npf_progress_end(s->progress);
        s->primed = true;
        s->runs++;
}

/* Text a rank wrote into a fixed buffer: up to its NUL or the buffer's end; null if empty or not UTF-8. */
static json_t *text_or_null(const char *buf, size_t size)
{
        size_t n = strnlen(buf, size);
        json_t *t = n ? json_stringn(buf, n) : NULL;

        return t ? t : json_null();
}

const npf_window_record_t *npf_sweep_history_at(const npf_sweep_t *s, size_t k)
{
        return k < s->count ? &s->history[(s->head + NPF_SWEEP_HISTORY - 1 - k) % NPF_SWEEP_HISTORY] : NULL;
}

json_t *npf_sweep_history_json(const npf_sweep_t *s, size_t max)
{
        json_t *a = json_array();

        for (uint32_t k = 0; a && k < s->count && k < max; k++) {
                const npf_window_record_t *r = npf_sweep_history_at(s, k);
                json_array_append_new(a, json_pack("{s:o, s:o, s:I, s:I, s:I, s:s, s:I, s:o, s:o, s:s}",
                                                   "rank", r->rank < NPF_SHM_MAX_RANKS ? json_integer(r->rank)
                                                                                       : json_null(),
                                                   "pid", r->pid ? json_integer((json_int_t) r->pid) : json_null(),
                                                   "generation", (json_int_t) r->generation,
                                                   "start_step", (json_int_t) r->start_step,
                                                   "stop_step", (json_int_t) r->stop_step,
                                                   "outcome", npf_shm_window_state_name(r->outcome),
                                                   "ended_unix_ms", (json_int_t) (r->ended_ns / 1000000u),
                                                   "output", text_or_null(r->output, sizeof(r->output)),
                                                   "message", text_or_null(r->message, sizeof(r->message)),
                                                   "backend", npf_shm_backend_name(r->backend)));
        }
        return a;
}

json_t *npf_sweep_outcomes_json(const npf_sweep_t *s)
{
        static const uint32_t outcomes[] = { NPF_WINDOW_DONE, NPF_WINDOW_FAILED, NPF_WINDOW_MISSED,
                                             NPF_WINDOW_FILTERED, NPF_WINDOW_LOST };
        json_t *o = json_object();

        for (size_t i = 0; o && i < sizeof(outcomes) / sizeof(outcomes[0]); i++)
                json_object_set_new(o, npf_shm_window_state_name(outcomes[i]),
                                    json_integer((json_int_t) s->outcomes[outcomes[i]]));
        return o;
}
