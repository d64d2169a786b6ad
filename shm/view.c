/* SPDX-License-Identifier: MIT */
#include "shm/view.h"
#include "conf/conf.h"
#include "shm/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *file_state_name(uint32_t s)
{
        switch (s) {
        case NPF_FILE_VALID: return "valid";
        case NPF_FILE_INVALID: return "invalid";
        case NPF_FILE_MISSING: return "missing";
        default: return "unknown";
        }
}

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
                      "state", file_state_name(st.file_state),
                      "error", error,
                      "error_count", (json_int_t) st.error_count,
                      "dialect", c->args.generation ? json_string(npf_conf_dialect_name(c->args.dialect)) : json_null(),
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

static int by_rank(const void *a, const void *b)
{
        int64_t x = json_integer_value(json_object_get(*(json_t *const *) a, "rank"));
        int64_t y = json_integer_value(json_object_get(*(json_t *const *) b, "rank"));

        return (x > y) - (x < y);
}

static json_t *rank_json(const npf_slot_view_t *v, uint64_t now, const char *state)
{
        bool has_window = v->st.state != NPF_WINDOW_IDLE && v->st.state != NPF_WINDOW_FILTERED;
        json_t *window = has_window ? json_pack("{s:I, s:I}", "start_step", (json_int_t) v->st.window_start,
                                                "stop_step", (json_int_t) v->st.window_stop)
                                    : json_null();

        return json_pack("{s:I, s:I, s:o, s:s, s:o, s:I, s:o, s:o, s:o, s:o, s:o}",
                         "rank", (json_int_t) v->rank,
                         "pid", (json_int_t) v->pid,
                         "step", v->step < 0 ? json_null() : json_integer(v->step),
                         "state", state,
                         "heartbeat_age_ms", v->heartbeat_ns && now >= v->heartbeat_ns
                                                     ? json_integer((json_int_t) ((now - v->heartbeat_ns) / 1000000u))
                                                     : json_null(),
                         "generation", (json_int_t) v->st.generation,
                         "window", window,
                         "local_device", v->local_device < 0 ? json_null() : json_integer(v->local_device),
                         "state_step", has_window ? json_integer(v->st.state_step) : json_null(),
                         "message", v->st.message[0] ? json_string(v->st.message) : json_null(),
                         "output", v->st.output[0] ? json_string(v->st.output) : json_null());
}

json_t *npf_view_ranks(const npf_shm_ranks_t *table, uint64_t now_monotonic_ns, uint64_t stall_ms,
                       const bool *stalled)
{
        json_t *a = json_array();
        npf_slot_view_t v;

        if (!a)
                return NULL;
        for (uint32_t i = 0; i < NPF_SHM_SLOTS; i++) {
                if (NPF_SLOT_PID(atomic_load_explicit((_Atomic uint64_t *) &table->slots[i].claim, memory_order_relaxed)) == 0)
                        continue;
                if (npf_slot_read(table, i, &v) < 0 || v.pid == 0 || v.pid == NPF_SLOT_RECLAIMING ||
                    v.rank >= NPF_SHM_MAX_RANKS)
                        continue;       /* free, being reclaimed, or not well-formed */
                const char *state = !stalled ? npf_view_rank_state(&v, now_monotonic_ns, stall_ms)
                                    : stalled[i] ? "stalled" : npf_shm_window_state_name(v.st.state);
                json_array_append_new(a, rank_json(&v, now_monotonic_ns, state));
        }
        /* Sort by rank: jansson arrays have no sort, so sort a copy of the pointers. */
        size_t n = json_array_size(a);
        json_t **items = calloc(n ? n : 1, sizeof(*items));
        if (!items)
                return a;
        for (size_t i = 0; i < n; i++)
                items[i] = json_incref(json_array_get(a, i));
        qsort(items, n, sizeof(*items), by_rank);
        json_array_clear(a);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, items[i]);
        free(items);
        return a;
}
