/* SPDX-License-Identifier: MIT */
#include "conf/view.h"
#include "conf/conf.h"
#include "lib/clock.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

json_t *npf_view_config(const npf_shm_ctl_t *ctl)
{
        npf_shm_config_t *c = malloc(sizeof(*c));
        npf_shm_status_t st;
        json_t *o, *error = json_null(), *window;
        int r;

        if (!c)
                return NULL;
        r = npf_shm_read_config(ctl, c);
        if (r >= 0)
                r = npf_shm_read_status(ctl, &st);
        if (r < 0) {
                free(c);
                return json_pack("{s:s}", "unreadable", r == -EBADMSG ? "the segment holds a damaged configuration"
                                                                       : "the daemon is writing the segment");
        }
        if (st.file_state == NPF_FILE_INVALID || st.file_state == NPF_FILE_MISSING)
                error = json_pack("{s:s, s:o, s:o, s:o}", "message", st.message,
                                  "line", st.line ? json_integer(st.line) : json_null(),
                                  "column", st.column ? json_integer(st.column) : json_null(),
                                  "key", st.key[0] ? json_string(st.key) : json_null());
        json_t *ranks;
        if (c->args.generation) {
                json_t *full = npf_conf_to_json(c);
                window = json_incref(json_object_get(full, "window"));
                ranks = json_incref(json_object_get(full, "ranks"));
                json_decref(full);
        } else {
                window = json_pack("{s:b, s:n, s:n}", "enabled", 0, "start_step", "stop_step");
                ranks = json_string("all");
        }
        o = json_pack("{s:s, s:I, s:o, s:b, s:s, s:o, s:I, s:o, s:o, s:o}",
                      "path", st.path,
                      "generation", (json_int_t) c->args.generation,
                      "published_unix_ms", c->args.generation ? json_integer((json_int_t) (c->args.published_ns / 1000000u))
                                                              : json_null(),
                      "valid", st.file_state == NPF_FILE_VALID,
                      "state", npf_shm_file_state_name(st.file_state),
                      "error", error,
                      "error_count", (json_int_t) st.error_count,
                      "dialect", c->args.generation ? json_string(npf_shm_dialect_name(c->args.dialect)) : json_null(),
                      "window", window,
                      "ranks", ranks ? ranks : json_string("all"));
        free(c);
        return o;
}

const char *npf_view_rank_state(const npf_slot_view_t *v, uint64_t now_monotonic_ns, uint64_t stall_ms)
{
        if (v->st.state == NPF_WINDOW_COLLECTING && v->heartbeat_ns && now_monotonic_ns > v->heartbeat_ns &&
            now_monotonic_ns - v->heartbeat_ns > stall_ms * 1000000u)
                return "stalled";
        return npf_shm_window_state_name(v->st.state);
}

/* The rank table's columns, in the order of each row (include/npuprof/protocol.h). */
enum {
        COL_RANK, COL_PID, COL_STEP, COL_STATE, COL_STATE_STEP, COL_START_STEP, COL_STOP_STEP,
        COL_GENERATION, COL_HEARTBEAT_AGE_MS, COL_LOCAL_DEVICE, COL_MESSAGE, COL_OUTPUT, COL_STEP_TIME_MS,
        COL_STALLED, COL_STALLED_FOR_S, COL__COUNT,
};

static const char *const rank_columns[COL__COUNT] = {
        "rank", "pid", "step", "state", "state_step", "start_step", "stop_step",
        "generation", "heartbeat_age_ms", "local_device", "message", "output", "step_time_ms",
        "stalled", "stalled_for_s",
};

struct npf_rank_view {
        json_t *table;                  /* {"columns": [...], "rows": [...]} */
        json_t *rows;                   /* borrowed from table */
        json_t *row[NPF_SHM_SLOTS];     /* the row of each occupied slot, kept between refreshes */
        json_t *states[NPF_WINDOW__COUNT + 1];  /* state names, one value shared by every row */
        struct {
                uint64_t claim, seq;    /* what the row's window state was read at */
                uint32_t state;         /* the window state read then */
        } read[NPF_SHM_SLOTS];
        uint64_t order[NPF_SHM_SLOTS];  /* rank << 32 | slot of the rows, sorted */
};

npf_rank_view_t *npf_rank_view_new(void)
{
        npf_rank_view_t *rv = calloc(1, sizeof(*rv));
        json_t *columns = json_array();

        for (size_t i = 0; columns && i < COL__COUNT; i++)
                json_array_append_new(columns, json_string(rank_columns[i]));
        if (rv && columns)
                rv->table = json_pack("{s:o, s:[]}", "columns", columns, "rows");
        else
                json_decref(columns);
        if (!rv || !rv->table) {
                free(rv);
                return NULL;
        }
        rv->rows = json_object_get(rv->table, "rows");
        return rv;
}

void npf_rank_view_free(npf_rank_view_t *rv)
{
        if (!rv)
                return;
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++)
                json_decref(rv->row[i]);
        for (size_t k = 0; k < NPF_WINDOW__COUNT + 1; k++)
                json_decref(rv->states[k]);
        json_decref(rv->table);
        free(rv);
}

/* Column @col of @row holds @v, or null when not @known: changed in place where it can be. */
static void set_int(json_t *row, size_t col, bool known, int64_t v)
{
        json_t *cur = json_array_get(row, col);

        if (!known)
                json_array_set_new(row, col, json_null());
        else if (json_is_integer(cur))
                json_integer_set(cur, v);
        else
                json_array_set_new(row, col, json_integer(v));
}

/* Column @col of @row holds @v (>= 0) rounded to 1/@scale, or null when not @known. */
static void set_real(json_t *row, size_t col, bool known, double v, double scale)
{
        json_t *cur = json_array_get(row, col);
        double r = v >= 0 && v < 1e15 ? (double) (int64_t) (v * scale + 0.5) / scale : v;

        if (!known)
                json_array_set_new(row, col, json_null());
        else if (json_is_real(cur))
                json_real_set(cur, r);
        else
                json_array_set_new(row, col, json_real(r));
}

/* Column @col of @row holds text @s, or null when @s is empty or not UTF-8 (as a rank wrote it). */
static void set_text(json_t *row, size_t col, const char *s)
{
        json_t *cur = json_array_get(row, col);

        if (json_is_string(cur) && strcmp(json_string_value(cur), s) == 0)
                return;
        json_t *t = s[0] ? json_string(s) : NULL;
        json_array_set_new(row, col, t ? t : json_null());
}

/* The state column of @row names @state, a value @rv keeps once for all rows. */
static void set_state(npf_rank_view_t *rv, json_t *row, const char *state)
{
        size_t k = 0;

        while (k < NPF_WINDOW__COUNT + 1 && rv->states[k] && strcmp(json_string_value(rv->states[k]), state) != 0)
                k++;
        if (k == NPF_WINDOW__COUNT + 1) {       /* cannot be: a state name or "stalled" */
                set_text(row, COL_STATE, state);
                return;
        }
        if (!rv->states[k] && !(rv->states[k] = json_string(state))) {
                json_array_set_new(row, COL_STATE, json_null());
                return;
        }
        if (json_array_get(row, COL_STATE) != rv->states[k])
                json_array_set(row, COL_STATE, rv->states[k]);
}

/* The columns of @row that come from the slot's hot entry, and the daemon's judgement of it. */
static void fill_hot(npf_rank_view_t *rv, json_t *row, const npf_slot_view_t *v, uint32_t pid, uint64_t now,
                     const char *state, const npf_view_progress_t *pr)
{
        bool beats = v->heartbeat_ns && now >= v->heartbeat_ns;

        set_int(row, COL_RANK, true, v->rank);
        set_int(row, COL_PID, pid != 0, pid);
        set_int(row, COL_STEP, v->step >= 0, v->step);
        set_state(rv, row, state);
        set_int(row, COL_HEARTBEAT_AGE_MS, beats, beats ? (int64_t) ((now - v->heartbeat_ns) / 1000000u) : 0);
        set_int(row, COL_LOCAL_DEVICE, v->local_device >= 0, v->local_device);
        /* The progress the daemon judged of this claim, if of this one. */
        bool judged = pr && pr->known && pr->tag == v->tag;
        set_real(row, COL_STEP_TIME_MS, judged && pr->step_time_ms > 0, judged ? pr->step_time_ms : 0, 1e3);
        if (!judged)
                json_array_set_new(row, COL_STALLED, json_null());
        else if (json_boolean_value(json_array_get(row, COL_STALLED)) != pr->stalled ||
                 !json_is_boolean(json_array_get(row, COL_STALLED)))
                json_array_set_new(row, COL_STALLED, json_boolean(pr->stalled));
        set_real(row, COL_STALLED_FOR_S, judged && pr->stalled, judged ? pr->stalled_for_s : 0, 10);
}

/* The columns of @row that come from the slot's window state (its cold entry). */
static void fill_cold(json_t *row, const npf_slot_view_t *v)
{
        bool has_window = v->st.state != NPF_WINDOW_IDLE && v->st.state != NPF_WINDOW_FILTERED;

        set_int(row, COL_STATE_STEP, has_window, v->st.state_step);
        set_int(row, COL_START_STEP, has_window, v->st.window_start);
        set_int(row, COL_STOP_STEP, has_window, v->st.window_stop);
        set_int(row, COL_GENERATION, true, (json_int_t) v->st.generation);
        set_text(row, COL_MESSAGE, v->st.message);
        set_text(row, COL_OUTPUT, v->st.output);
}

static json_t *new_row(void)
{
        json_t *row = json_array();

        for (size_t i = 0; row && i < COL__COUNT; i++)
                if (json_array_append_new(row, json_null()) < 0) {
                        json_decref(row);
                        return NULL;
                }
        return row;
}

static int by_order(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return (x > y) - (x < y);
}

json_t *npf_rank_view_refresh(npf_rank_view_t *rv, const npf_shm_t *shm, uint64_t now_monotonic_ns,
                              uint64_t stall_ms, const bool *stalled, const npf_slot_holder_t *holders,
                              const npf_view_progress_t *progress)
{
        const npf_shm_ranks_t *table = npf_shm_ranks(shm);
        size_t n = 0;
        npf_slot_view_t v;

        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++) {
                uint64_t claim = npf_slot_claim_word(&table->slots[i]);
                /* A row whose window state did not move since it was read needs the hot entry alone. */
                bool again = rv->row[i] && claim == rv->read[i].claim && npf_slot_seq(&table->slots[i]) == rv->read[i].seq;
                bool shown = false;
                if (again) {
                        npf_slot_read_hot(table, i, &v);
                        v.st.state = rv->read[i].state;
                        shown = true;
                } else if (NPF_SLOT_PID(claim) != 0 && npf_slot_pread_current(shm, i, &v) == 0 && v.pid != 0 &&
                           v.pid != NPF_SLOT_RECLAIMING && v.rank < NPF_SHM_MAX_RANKS) {
                        if (!rv->row[i])
                                rv->row[i] = new_row();
                        shown = rv->row[i] != NULL;
                }
                if (!shown) {           /* free, being reclaimed, or not well-formed */
                        json_decref(rv->row[i]);
                        rv->row[i] = NULL;
                        continue;
                }
                if (!again) {
                        fill_cold(rv->row[i], &v);
                        rv->read[i].claim = claim;
                        rv->read[i].seq = v.seq;
                        rv->read[i].state = v.st.state;
                }
                const char *state = !stalled ? npf_view_rank_state(&v, now_monotonic_ns, stall_ms)
                                    : stalled[i] ? "stalled" : npf_shm_window_state_name(v.st.state);
                uint32_t pid = holders && holders[i].tag == v.tag && v.tag != 0 ? holders[i].pid
                                                                                  : npf_slot_pid_here(&v);
                fill_hot(rv, rv->row[i], &v, pid, now_monotonic_ns, state, progress ? &progress[i] : NULL);
                rv->order[n++] = (uint64_t) v.rank << 32 | i;
        }
        qsort(rv->order, n, sizeof(rv->order[0]), by_order);
        json_array_clear(rv->rows);
        for (size_t k = 0; k < n; k++)
                json_array_append(rv->rows, rv->row[rv->order[k] & 0xffffffffu]);
        return json_incref(rv->table);
}

json_t *npf_view_ranks(const npf_shm_t *shm, uint64_t now_monotonic_ns, uint64_t stall_ms,
                       const bool *stalled, const npf_slot_holder_t *holders)
{
        npf_rank_view_t *rv = npf_rank_view_new();
        json_t *t = rv ? npf_rank_view_refresh(rv, shm, now_monotonic_ns, stall_ms, stalled, holders, NULL) : NULL;

        npf_rank_view_free(rv);
        return t;
}

json_t *npf_view_table_objects(const json_t *table)
{
        json_t *columns = json_object_get(table, "columns"), *rows = json_object_get(table, "rows");
        json_t *list, *row, *name;
        size_t i, j;

        if (!json_is_array(columns) || !json_is_array(rows))
                return NULL;
        list = json_array();
        json_array_foreach(rows, i, row) {
                json_t *o = json_object();
                if (!json_is_array(row) || json_array_size(row) != json_array_size(columns)) {
                        json_decref(o);
                        json_decref(list);
                        return NULL;
                }
                json_array_foreach(columns, j, name) {
                        if (!json_is_string(name)) {
                                json_decref(o);
                                json_decref(list);
                                return NULL;
                        }
                        json_object_set(o, json_string_value(name), json_array_get(row, j));
                }
                json_array_append_new(list, o);
        }
        return list;
}
