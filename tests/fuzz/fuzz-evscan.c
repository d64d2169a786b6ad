/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the Chrome trace scanner. The input is scanned whole, a byte at a
 * time, and in chunks whose sizes come from a hash of the input; all three must report the
 * same events (every field), top-level keys, counts, return value and message. During each
 * callback it checks what callers rely on: an event's raw text is the input's at its
 * offset, every string of it lies inside that text, times are within range; the lookups in
 * args stay inside args; npf_evscan_unescape() gives NUL-terminated, valid UTF-8 of the
 * length it says. Some inputs have a callback stop the scan after a few events or keys.
 * It is built with the size limits lowered (see the Makefile) so that inputs reach them.
 */
#include "replay/evscan.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STOP 77

/* What a scan reported, serialized. */
typedef struct out {
        uint8_t *p;
        size_t n, cap;
        const uint8_t *data;            /* the input */
        size_t size;
        uint64_t events, tops;
        uint64_t stop_after;            /* events after which the scan is stopped; 0: never */
        uint64_t stop_top;              /* top-level keys after which it is; 0: never */
} out_t;

static void put(out_t *o, const void *p, size_t n)
{
        if (o->n + n > o->cap) {
                size_t c = o->cap ? o->cap : 4096;
                while (c < o->n + n)
                        c *= 2;
                o->p = realloc(o->p, c);
                if (!o->p)
                        abort();
                o->cap = c;
        }
        memcpy(o->p + o->n, p, n);
        o->n += n;
}

static void put_str(out_t *o, npf_evscan_str_t s)
{
        uint8_t present = s.p != NULL;

        put(o, &present, 1);
        put(o, &s.n, sizeof(s.n));
        if (s.p)
                put(o, s.p, s.n);
}

static bool inside(npf_evscan_str_t s, npf_evscan_str_t in)
{
        return !s.p || (s.p >= in.p && s.n <= in.n && s.p + s.n <= in.p + in.n);
}

/* Whether @s (@n bytes) is valid UTF-8 without NUL. */
static bool utf8_ok(const unsigned char *s, size_t n)
{
        for (size_t i = 0; i < n;) {
                unsigned char c = s[i];
                size_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 :
                           c >= 0xf0 && c <= 0xf4 ? 4 : 0;
                if (c == 0 || k == 0 || i + k > n)
                        return false;
                for (size_t j = 1; j < k; j++)
                        if ((s[i + j] & 0xc0) != 0x80)
                                return false;
                if (k == 3 && ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] >= 0xa0)))
                        return false;
                if (k == 4 && ((c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] >= 0x90)))
                        return false;
                i += k;
        }
        return true;
}

static void check_unescape(npf_evscan_str_t s)
{
        char small[7], big[512];
        size_t n = npf_evscan_unescape(s, big, sizeof(big)), m = npf_evscan_unescape(s, small, sizeof(small));
        size_t len = strlen(big);

        if (m != n || (n < sizeof(big) && len != n) || len >= sizeof(big) || !utf8_ok((unsigned char *) big, len))
                abort();
        if (strlen(small) >= sizeof(small) || !utf8_ok((unsigned char *) small, strlen(small)) ||
            strncmp(small, big, strlen(small)) != 0)
                abort();
}

static void check_args(npf_evscan_str_t args)
{
        static const char *const keys[] = { "name", "a", "Input Dims", "" };
        npf_evscan_str_t v;
        int64_t i;
        double d;

        if (args.n < 2 || args.p[0] != '{' || args.p[args.n - 1] != '}')
                abort();
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
                if (npf_evscan_get(args, keys[k], &v) && !inside(v, args))
                        abort();
                npf_evscan_get_int(args, keys[k], &i);
                npf_evscan_get_double(args, keys[k], &d);
        }
}

static int on_event(void *userdata, const npf_evscan_event_t *ev)
{
        out_t *o = userdata;
        const npf_evscan_str_t *strs[] = { &ev->name, &ev->cat, &ev->pid_str, &ev->tid_str, &ev->args, &ev->id };

        if (!ev->raw.p || ev->offset >= o->size || ev->raw.n > o->size - ev->offset ||
            memcmp(ev->raw.p, o->data + ev->offset, ev->raw.n) != 0 || ev->raw.p[0] != '{')
                abort();
        for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
                if (!inside(*strs[i], ev->raw))
                        abort();
                put_str(o, *strs[i]);
        }
        if ((ev->has_pid && ev->pid_str.p) || (ev->has_tid && ev->tid_str.p))
                abort();
        if ((ev->has_ts && (ev->ts_ns > NPF_EVSCAN_TIME_MAX_NS || ev->ts_ns < -NPF_EVSCAN_TIME_MAX_NS)) ||
            (ev->has_dur && (ev->dur_ns > NPF_EVSCAN_TIME_MAX_NS || ev->dur_ns < -NPF_EVSCAN_TIME_MAX_NS)))
                abort();
        if (ev->name.p)
                check_unescape(ev->name);
        if (ev->args.p)
                check_args(ev->args);
        struct {
                int64_t pid, tid, ts, dur;
                size_t offset;
                char ph;
                bool has_pid, has_tid, has_ts, has_dur;
        } f = {
                ev->has_pid ? ev->pid : 0, ev->has_tid ? ev->tid : 0, ev->has_ts ? ev->ts_ns : 0,
                ev->has_dur ? ev->dur_ns : 0, ev->offset, ev->ph, ev->has_pid, ev->has_tid, ev->has_ts, ev->has_dur,
        };
        put(o, &f.pid, sizeof(f.pid));
        put(o, &f.tid, sizeof(f.tid));
        put(o, &f.ts, sizeof(f.ts));
        put(o, &f.dur, sizeof(f.dur));
        put(o, &f.offset, sizeof(f.offset));
        put(o, &f.ph, 1);
        put(o, &f.has_pid, 1);
        put(o, &f.has_tid, 1);
        put(o, &f.has_ts, 1);
        put(o, &f.has_dur, 1);
        put_str(o, ev->raw);
        return ++o->events == o->stop_after ? STOP : 0;
}

static int on_top(void *userdata, npf_evscan_str_t key, npf_evscan_str_t value)
{
        out_t *o = userdata;

        if (!key.p || !value.p || value.n == 0 || value.n > NPF_EVSCAN_TOP_MAX || value.n > o->size)
                abort();
        check_unescape(key);
        put(o, "T", 1);
        put_str(o, key);
        put_str(o, value);
        return ++o->tops == o->stop_top ? STOP : 0;
}

static uint64_t next(uint64_t *x)
{
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        return *x;
}

/* Scan @data in chunks: all of it (@mode 0), a byte at a time (1), or sized by @seed (2). */
static void scan(const uint8_t *data, size_t size, int mode, uint64_t seed, uint64_t stop_after, uint64_t stop_top,
                 out_t *o)
{
        char err[NPF_EVSCAN_ERR_MAX];
        npf_evscan_stats_t st;
        npf_evscan_t *s;
        int r = 0;

        o->n = 0;
        o->events = 0;
        o->tops = 0;
        o->stop_after = stop_after;
        o->stop_top = stop_top;
        o->data = data;
        o->size = size;
        if (!(s = npf_evscan_new(on_event, on_top, o)))
                abort();
        memset(err, 'x', sizeof(err));
        for (size_t at = 0; at < size && r == 0;) {
                size_t n = mode == 0 ? size : mode == 1 ? 1 : 1 + next(&seed) % (next(&seed) & 1 ? 9 : 700);
                if (n > size - at)
                        n = size - at;
                /* A chunk of its own, gone after the call: nothing may point into it later. */
                uint8_t *piece = malloc(n);
                if (!piece)
                        abort();
                memcpy(piece, data + at, n);
                r = npf_evscan_feed(s, piece, n, err);
                free(piece);
                at += n;
        }
        if (r == 0)
                r = npf_evscan_finish(s, err);
        else if (npf_evscan_finish(s, NULL) != r)
                abort();
        npf_evscan_stats(s, &st);
        npf_evscan_free(s);

        if (r != 0 && r != -EINVAL && r != -ENOMSG && r != -E2BIG && r != STOP)
                abort();
        if (r != 0 && (!memchr(err, '\0', sizeof(err)) || err[0] == '\0'))
                abort();
        if (st.events != o->events || (r == 0 && st.bytes != size) || st.bytes > size ||
            (st.truncated && !st.events_array) || !memchr(st.first_malformed, '\0', sizeof(st.first_malformed)) ||
            (st.malformed > 0) != (st.first_malformed[0] != '\0') || (st.malformed > 0) != (st.malformed_line > 0))
                abort();
        put(o, &r, sizeof(r));
        if (r != 0)
                put(o, err, strlen(err));
        put(o, &st.events, sizeof(st.events));
        put(o, &st.malformed, sizeof(st.malformed));
        put(o, &st.truncated, sizeof(st.truncated));
        put(o, &st.events_array, sizeof(st.events_array));
        put(o, &st.malformed_line, sizeof(st.malformed_line));
        put(o, &st.malformed_column, sizeof(st.malformed_column));
        put(o, st.first_malformed, strlen(st.first_malformed));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static out_t whole, cut;
        uint64_t h = 1469598103934665603u;      /* FNV-1a of the input: the chunk sizes, the stop */

        for (size_t i = 0; i < size; i++)
                h = (h ^ data[i]) * 1099511628211u;
        uint64_t stop_after = (h & 7) == 0 ? 1 + (h >> 3) % 4 : 0;
        uint64_t stop_top = (h & 0x38) == 0 ? 1 + (h >> 6) % 3 : 0;

        scan(data, size, 0, 0, stop_after, stop_top, &whole);
        for (int mode = 1; mode <= 2; mode++) {
                scan(data, size, mode, h | 1, stop_after, stop_top, &cut);
                if (cut.n != whole.n || memcmp(cut.p, whole.p, whole.n) != 0)
                        abort();
        }
        return 0;
}
