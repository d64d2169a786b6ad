/* SPDX-License-Identifier: MIT */
/*
 * A streaming scanner of Chrome Trace Event Format documents: kineto's *.pt.trace.json,
 * torch_npu's trace_view.json, the host backend's trace.json. The input is fed in chunks of
 * any size (a gzipped trace is inflated piecewise); each element of the events array is
 * handed to a callback as it is read, its fields as raw bytes of the input, and nothing is
 * kept once the callback returns: memory does not grow with the input.
 *
 * What is read: the object form {"traceEvents": [...], ...}, traceEvents anywhere among the
 * keys, every other top-level key reported with its raw value; and the bare array form
 * [{...}, ...]. The events array may lack its closing bracket and what follows (a writer
 * that died): the end of input anywhere inside the array is a truncation, not an error.
 * An element that is not an object is skipped and counted as malformed. In an event,
 * unknown keys are skipped, and of duplicate keys the last wins. Keys are compared as raw
 * bytes: a key written with escapes ("n\u0061me") is not the key it spells.
 *
 * What is checked: the JSON grammar (tokens, numbers, nesting, commas and colons), except
 * inside strings: their escapes are not checked here (npf_evscan_unescape() turns a bad one
 * into U+FFFD) and raw control characters are let through. Nesting deeper than
 * NPF_EVSCAN_DEPTH_MAX, an event longer than NPF_EVSCAN_EVENT_MAX bytes and a top-level key
 * longer than NPF_EVSCAN_TOP_MAX are refused. A top-level value longer than
 * NPF_EVSCAN_TOP_MAX is skipped by counting its brackets, unchecked and unreported. Where
 * the input is cut into chunks never changes what is reported: every event, count, error
 * and message is the same as with the whole input in one chunk.
 *
 * Times: "ts" and "dur" are microseconds, as an integer, a decimal or exponent number, or
 * a string holding one ("1736408883674584.732"); they are converted from their decimal
 * digits, exactly, to integer nanoseconds rounded half away from zero. pid and tid are
 * integers, or strings: a string holding an integer is that integer.
 */
#ifndef NPUPROF_REPLAY_EVSCAN_H
#define NPUPROF_REPLAY_EVSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NPF_EVSCAN_ERR_MAX 256u                         /* bytes of the message buffers */
/* The two limits in bytes can be set lower when building, so that a fuzzer reaches them. */
#ifndef NPF_EVSCAN_EVENT_MAX
#define NPF_EVSCAN_EVENT_MAX ((size_t) 16 << 20)        /* bytes of one element of the events */
#endif
#ifndef NPF_EVSCAN_TOP_MAX
#define NPF_EVSCAN_TOP_MAX ((size_t) 1 << 20)           /* bytes of a reported top-level value */
#endif
#define NPF_EVSCAN_DEPTH_MAX 128u                       /* nesting, the document itself being 1 */
#define NPF_EVSCAN_TIME_MAX_NS INT64_C(3000000000000000000)   /* |ts| and dur: 3e15 us, 95 years */

typedef struct npf_evscan npf_evscan_t;

/* Raw bytes of the input: a string's between its quotes, escapes not decoded; p is NULL
 * when absent. Not NUL-terminated. */
typedef struct npf_evscan_str {
        const char *p;
        size_t n;
} npf_evscan_str_t;

/*
 * One element of the events array that is an object. A field that is absent, or whose
 * value has another type than the one described, is reported absent (p NULL, has_ false, ph 0).
 */
typedef struct npf_evscan_event {
        char ph;                        /* the first byte of "ph", 0 when absent or "" */
        npf_evscan_str_t name, cat;
        bool has_pid, has_tid;          /* an integer, or a string holding one ("-"? digits) */
        int64_t pid, tid;
        npf_evscan_str_t pid_str, tid_str;      /* a string that holds no integer */
        bool has_ts, has_dur;
        int64_t ts_ns, dur_ns;          /* within +-NPF_EVSCAN_TIME_MAX_NS */
        npf_evscan_str_t args;          /* the raw text of the "args" object, braces included */
        npf_evscan_str_t id;            /* "id": a number's text or a string's contents */
        npf_evscan_str_t raw;           /* the whole event, braces included */
        size_t offset;                  /* of the event's '{' in the whole input */
} npf_evscan_event_t;

/* Called for each event; the pointers in @ev are valid during the call only. A nonzero
 * return stops the scan: npf_evscan_feed() and npf_evscan_finish() then return it. */
typedef int (*npf_evscan_event_cb)(void *userdata, const npf_evscan_event_t *ev);

/* Called for each top-level key other than traceEvents, in the order of the document, with
 * its raw contents (@key) and the raw JSON text of its value (@raw_value: a string keeps its
 * quotes), valid during the call only. A value longer than NPF_EVSCAN_TOP_MAX is not
 * reported. A nonzero return stops the scan, as for the event callback. */
typedef int (*npf_evscan_top_cb)(void *userdata, npf_evscan_str_t key, npf_evscan_str_t raw_value);

typedef struct npf_evscan_stats {
        uint64_t events;                /* objects handed to the event callback */
        uint64_t malformed;             /* elements that are not objects (skipped), and events
                                           with a ts, dur, pid or tid that is present but not
                                           usable (handed over with that field absent) */
        uint64_t bytes;                 /* fed so far */
        bool events_array;              /* the events array has begun */
        bool truncated;                 /* the input ended inside the events array */
        uint32_t malformed_line;        /* 1-based, of the first malformed element; 0 if none */
        uint32_t malformed_column;      /* in bytes */
        char first_malformed[NPF_EVSCAN_ERR_MAX];       /* "line L, column C: event N ...", or "" */
} npf_evscan_stats_t;

/*
 * npf_evscan_new() - a scanner at the start of a document. @on_event and @on_top may be
 * NULL. Return: the scanner (free it with npf_evscan_free()), or NULL when out of memory.
 */
npf_evscan_t *npf_evscan_new(npf_evscan_event_cb on_event, npf_evscan_top_cb on_top, void *userdata);

/*
 * npf_evscan_feed() - scan the next @len bytes of the document at @buf, calling back for
 * each event and top-level key completed in them. Only an element that straddles the end
 * of @buf is copied, into a buffer of the scanner's own.
 * Return: 0; -EINVAL for a syntax error, with "line L, column C: ..." in @err (as bytes of
 * the whole input), -ENOMSG for a document that is neither an object nor an array (not a
 * Chrome trace), -E2BIG for an event or key over its limit, -ENOMEM; the nonzero value of a
 * callback that stopped the scan. @err (NPF_EVSCAN_ERR_MAX bytes, or NULL) is filled on
 * every failure. Once it has failed, the scanner returns the same again for every call.
 * Context: the callbacks run inside it; they must not call the scanner.
 */
int npf_evscan_feed(npf_evscan_t *s, const void *buf, size_t len, char *err);

/*
 * npf_evscan_finish() - the end of input. An end inside the events array (the array's
 * closing bracket missing, or the last element cut short) is a truncation: 0, and
 * npf_evscan_stats() says truncated.
 * Return: 0; -EINVAL when the document ends anywhere else before it is complete or is
 * broken in its last element, -ENOMSG for an object without "traceEvents", or as
 * npf_evscan_feed(); a sentence in @err (or NULL) on failure.
 */
int npf_evscan_finish(npf_evscan_t *s, char *err);

/* The counts so far into @ret_stats. Context: any time, in a callback too. */
void npf_evscan_stats(const npf_evscan_t *s, npf_evscan_stats_t *ret_stats);

/* Frees @s and the buffers it holds. Accepts NULL; returns NULL. */
npf_evscan_t *npf_evscan_free(npf_evscan_t *s);

/*
 * Lookups in the raw text of a JSON object, such as an event's args: the whole object is
 * read each time (of duplicate keys the last wins), and nothing outside it.
 */

/*
 * npf_evscan_get() - the value of the top-level key @key of @object (compared after
 * decoding escapes): a string's raw contents, between its quotes; any other value's raw
 * JSON text. Of duplicate keys the last wins. Return: whether there is one, and it in
 * @ret_raw; false too when @object is not well-formed up to it.
 */
bool npf_evscan_get(npf_evscan_str_t object, const char *key, npf_evscan_str_t *ret_raw);

/* npf_evscan_get() of an integer, or of a string holding one ("-"? digits), that fits in
 * int64_t. Return: whether there is one, and it in @ret_value. */
bool npf_evscan_get_int(npf_evscan_str_t object, const char *key, int64_t *ret_value);

/* npf_evscan_get() of a number, or of a string holding a decimal or exponent number
 * (strtod(), so within 127 bytes; no "inf", "nan" or hex). Return: whether there is one,
 * and it in @ret_value. */
bool npf_evscan_get_double(npf_evscan_str_t object, const char *key, double *ret_value);

/*
 * npf_evscan_unescape() - the raw string contents @s decoded into @buf (@size bytes): the
 * JSON escapes \" \\ \/ \b \f \n \r \t and \uXXXX, surrogate pairs included, to UTF-8. A
 * bad escape, a lone surrogate, \u0000, a raw NUL and a byte that is not part of valid
 * UTF-8 each become U+FFFD, so that the result is valid UTF-8 without NUL. @buf is always
 * NUL-terminated when @size > 0, and cut at a character boundary.
 * Return: the length of the whole decoded string, as snprintf() counts it: @size or more
 * when @buf holds only a part of it.
 */
size_t npf_evscan_unescape(npf_evscan_str_t s, char *buf, size_t size);

/* Whether @s is present and its raw bytes are those of the C string @lit. */
bool npf_evscan_eq(npf_evscan_str_t s, const char *lit);

#endif /* NPUPROF_REPLAY_EVSCAN_H */
