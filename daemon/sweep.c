/* SPDX-License-Identifier: MIT */
#include "daemon/sweep.h"
#include "shm/slot.h"
#include "shm/view.h"

#include <string.h>
#include <time.h>

static uint64_t realtime_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static bool is_outcome(uint32_t state)
{
        return state == NPF_WINDOW_DONE || state == NPF_WINDOW_FAILED || state == NPF_WINDOW_MISSED ||
               state == NPF_WINDOW_FILTERED || state == NPF_WINDOW_LOST;
}

static void record(npf_sweep_t *s, const npf_slot_view_t *v, uint32_t outcome, npf_sweep_record_cb cb, void *data)
{
        npf_window_record_t *rec = &s->history[s->head];

        memset(rec, 0, sizeof(*rec));
        rec->rank = v->rank;
        rec->pid = v->pid;
        rec->generation = v->st.generation;
        rec->start_step = v->st.window_start;
        rec->stop_step = v->st.window_stop;
        rec->outcome = outcome;
        rec->ended_ns = realtime_ns();
        memcpy(rec->output, v->st.output, sizeof(rec->output));
        memcpy(rec->message, v->st.message, sizeof(rec->message));
        s->head = (s->head + 1) % NPF_SWEEP_HISTORY;
        if (s->count < NPF_SWEEP_HISTORY)
                s->count++;
        s->outcomes[outcome]++;
        if (cb)
                cb(rec, data);
}

void npf_sweep_run(npf_sweep_t *s, npf_shm_ranks_t *table, uint64_t now_ns, npf_sweep_record_cb cb, void *data)
{
        npf_slot_view_t v;

        s->attached = 0;
        memset(s->by_state, 0, sizeof(s->by_state));
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++) {
                if (NPF_SLOT_PID(atomic_load_explicit((_Atomic uint64_t *) &table->slots[i].claim, memory_order_relaxed)) == 0) {
                        /* A rank that closed right after its window left the outcome in its free slot. */
                        /* (The first sweep of a daemon only notes what earlier daemons saw.) */
                        if (npf_slot_read(table, i, &v) == 0 && v.pid == 0 && s->primed && is_outcome(v.st.state) &&
                            (s->seen[i].tag != v.tag || s->seen[i].generation != v.st.generation ||
                             s->seen[i].state != v.st.state)) {
                                v.rank = table->slots[i].rank;
                                /* The owner's pid went with its claim; the sweep saw it if it saw that claim. */
                                if (s->seen[i].tag == v.tag)
                                        v.pid = s->seen[i].pid;
                                record(s, &v, v.st.state, cb, data);
                        }
                        s->seen[i].tag = v.tag;
                        s->seen[i].generation = v.st.generation;
                        s->seen[i].state = v.st.state;
                        continue;
                }
                if (npf_slot_reclaim(table, i, &v) == 1) {
                        s->reclaimed++;
                        /* A window open when its rank died is lost; its output stays on disk. */
                        bool open = v.st.state == NPF_WINDOW_COLLECTING || v.st.state == NPF_WINDOW_FLUSHING;
                        if (open)
                                record(s, &v, NPF_WINDOW_LOST, cb, data);
                        else if (is_outcome(v.st.state) && (s->seen[i].tag != v.tag || s->seen[i].generation != v.st.generation ||
                                                            s->seen[i].state != v.st.state))
                                record(s, &v, v.st.state, cb, data);
                        /* The reclaimed slot is idle now, under the same tag: nothing more to record. */
                        s->seen[i].tag = v.tag;
                        s->seen[i].generation = 0;
                        s->seen[i].state = NPF_WINDOW_IDLE;
                        continue;
                }
                if (npf_slot_read(table, i, &v) < 0 || v.pid == 0 || v.pid == NPF_SLOT_RECLAIMING)
                        continue;
                s->attached++;
                const char *shown = npf_view_rank_state(&v, now_ns, s->stall_ms);
                s->by_state[strcmp(shown, "stalled") == 0 ? NPF_SWEEP_STALLED : v.st.state]++;

                /* Count each window's outcome once: per slot owner, generation and state. */
                if (is_outcome(v.st.state) &&
                    (s->seen[i].tag != v.tag || s->seen[i].generation != v.st.generation ||
                     s->seen[i].state != v.st.state))
                        record(s, &v, v.st.state, cb, data);
                s->seen[i].tag = v.tag;
                s->seen[i].pid = v.pid;
                s->seen[i].generation = v.st.generation;
                s->seen[i].state = v.st.state;
        }
        s->primed = true;
}

/* Text a rank wrote into a fixed buffer: up to its NUL or the buffer's end; null if empty or not UTF-8. */
static json_t *text_or_null(const char *buf, size_t size)
{
        size_t n = strnlen(buf, size);
        json_t *t = n ? json_stringn(buf, n) : NULL;

        return t ? t : json_null();
}

json_t *npf_sweep_history_json(const npf_sweep_t *s, size_t max)
{
        json_t *a = json_array();

        for (uint32_t k = 0; a && k < s->count && k < max; k++) {
                const npf_window_record_t *r = &s->history[(s->head + NPF_SWEEP_HISTORY - 1 - k) % NPF_SWEEP_HISTORY];
                json_array_append_new(a, json_pack("{s:I, s:o, s:I, s:I, s:I, s:s, s:I, s:o, s:o}",
                                                   "rank", (json_int_t) r->rank,
                                                   "pid", r->pid ? json_integer((json_int_t) r->pid) : json_null(),
                                                   "generation", (json_int_t) r->generation,
                                                   "start_step", (json_int_t) r->start_step,
                                                   "stop_step", (json_int_t) r->stop_step,
                                                   "outcome", npf_shm_window_state_name(r->outcome),
                                                   "ended_unix_ms", (json_int_t) (r->ended_ns / 1000000u),
                                                   "output", text_or_null(r->output, sizeof(r->output)),
                                                   "message", text_or_null(r->message, sizeof(r->message))));
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
