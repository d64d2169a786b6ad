/* SPDX-License-Identifier: MIT */
/*
 * The Chrome trace scanner, by hand rather than through jansson (STYLE.md, rule 14), for
 * one measured reason: speed. A kineto or torch_npu trace is hundreds of megabytes to
 * gigabytes, and jansson decodes one at 60 to 70 MB/s (33 MB/s at 200 MB) on the 2-core
 * machine this was measured on: every value becomes a json_t, every string is copied and
 * checked for UTF-8. This scanner reads the same real traces at 800 MB/s (kineto's, with
 * its args) to 1,000 MB/s (torch_npu's trace_view.json), whole or in 64 KiB chunks, with
 * the event callback doing nothing much: over ten times faster. It only tokenizes: it never
 * builds a tree, copies nothing but an element that straddles two chunks, and hands out raw
 * bytes. It is not a general JSON library: no writer, no tree, no decoding beyond
 * npf_evscan_unescape().
 *
 * How it reads. Between the elements of the events array and among the top-level keys, a
 * small state machine takes the input a byte at a time, so that it can stop anywhere. The
 * rest comes in units, each parsed at once by recursive descent over contiguous bytes: a
 * top-level key, a top-level value, one element of the events array. When a unit is not
 * complete at the end of a chunk, its bytes are copied into the carry buffer, and a tiny
 * resumable bracket counter (the finder) watches the next chunks for where it ends; the
 * unit is parsed from the carry buffer once it is complete, when it reaches its size limit,
 * or at the end of input. The parser's verdict on a prefix of a unit is always either its
 * verdict on the whole unit or "more is needed", and the finder's end of a unit is the
 * parser's end whenever the parser has found no error before it: so every event, error and
 * message is the same wherever the chunks were cut.
 *
 * Line and column of an error are found only when one happens: newlines are counted with
 * memchr() over each chunk once it is done with (up to the first byte of a unit still
 * carried, whose newlines are counted in the carry buffer once it is parsed).
 */
#include "replay/evscan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a parser below returns: done, the bytes end before the value does, or a syntax error. */
enum { OK, MORE, BAD };

#define TOO_DEEP "nested deeper than 128 levels"
_Static_assert(NPF_EVSCAN_DEPTH_MAX == 128, "TOO_DEEP names the limit");

/* The classes of bytes. */
enum {
        C_WS = 1,                       /* whitespace */
        C_NUM = 2,                      /* in a number token */
        C_NUM0 = 4,                     /* begins a number */
        C_LIT = 8,                      /* in a literal (true, false, null) */
        C_DIGIT = 16,
};

#define D (C_NUM | C_NUM0 | C_DIGIT)
#define A C_LIT
static const uint8_t cls[256] = {
        [' '] = C_WS, ['\t'] = C_WS, ['\n'] = C_WS, ['\r'] = C_WS,
        ['0'] = D, ['1'] = D, ['2'] = D, ['3'] = D, ['4'] = D, ['5'] = D, ['6'] = D, ['7'] = D, ['8'] = D, ['9'] = D,
        ['-'] = C_NUM | C_NUM0, ['+'] = C_NUM, ['.'] = C_NUM, ['e'] = C_NUM | A, ['E'] = C_NUM | A,
        ['a'] = A, ['b'] = A, ['c'] = A, ['d'] = A, ['f'] = A, ['g'] = A, ['h'] = A, ['i'] = A, ['j'] = A,
        ['k'] = A, ['l'] = A, ['m'] = A, ['n'] = A, ['o'] = A, ['p'] = A, ['q'] = A, ['r'] = A, ['s'] = A,
        ['t'] = A, ['u'] = A, ['v'] = A, ['w'] = A, ['x'] = A, ['y'] = A, ['z'] = A,
        ['A'] = A, ['B'] = A, ['C'] = A, ['D'] = A, ['F'] = A, ['G'] = A, ['H'] = A, ['I'] = A, ['J'] = A,
        ['K'] = A, ['L'] = A, ['M'] = A, ['N'] = A, ['O'] = A, ['P'] = A, ['Q'] = A, ['R'] = A, ['S'] = A,
        ['T'] = A, ['U'] = A, ['V'] = A, ['W'] = A, ['X'] = A, ['Y'] = A, ['Z'] = A,
};
#undef D
#undef A

static inline bool is(char c, unsigned cl)
{
        return cls[(uint8_t) c] & cl;
}

/* The kinds of JSON values. */
typedef enum kind {
        K_STRING,
        K_NUMBER,
        K_OBJECT,
        K_ARRAY,
        K_LITERAL,
} kind_t;

/* A value: a string's contents, or the raw text of any other. */
typedef struct tok {
        kind_t kind;
        const char *p;
        size_t n;
} tok_t;

/* A parse over contiguous bytes. */
typedef struct ctx {
        const char *end;                /* nothing at or past it is read */
        const char *err_at;             /* BAD: where */
        const char *what;               /* BAD: what was wrong there */
} ctx_t;

/* What the outer state machine waits for. */
typedef enum state {
        S_START,                        /* the document */
        S_KEY0,                         /* after the top-level '{': a key or '}' */
        S_KEY,                          /* after a top-level ',': a key */
        S_COLON,                        /* after a top-level key */
        S_VALUE,                        /* after its ':' */
        S_NEXT,                         /* after a top-level value: ',' or '}' */
        S_ELEM0,                        /* after the events' '[': an element or ']' */
        S_ELEM,                         /* after a ',' between elements */
        S_ELEM_NEXT,                    /* after an element: ',' or ']' */
        S_DONE,                         /* after the document: whitespace only */
} state_t;

/* The unit being carried across chunks. */
typedef enum unit {
        U_NONE,
        U_KEY,                          /* a top-level key */
        U_TOP,                          /* a top-level value */
        U_ELEM,                         /* an element of the events */
        U_SKIP,                         /* a top-level value over NPF_EVSCAN_TOP_MAX: only counted through */
} unit_t;

/* Where a unit ends, found a chunk at a time: strings and brackets, nothing else checked. */
typedef enum fkind {
        F_NUMBER,
        F_LITERAL,
        F_NEST,                         /* a string, an object or an array */
        F_ONE,                          /* any other byte: a unit of one */
} fkind_t;

typedef struct finder {
        fkind_t kind;
        size_t depth;                   /* brackets open */
        bool in_string, escape;
} finder_t;

struct npf_evscan {
        npf_evscan_event_cb on_event;
        npf_evscan_top_cb on_top;
        void *userdata;
        state_t state;
        int status;                     /* once nonzero, what every call returns */
        bool finished;
        bool bare;                      /* the document is the bare array */
        bool key_events;                /* the pending top-level value is traceEvents' */
        uint8_t bom;                    /* bytes of a UTF-8 byte order mark read */
        unsigned array_depth;           /* of the events array: 1 or 2 */
        size_t bytes;                   /* fed so far */
        const char *chunk;              /* during npf_evscan_feed(): the chunk, */
        size_t chunk_off;               /* and its offset in the input */
        unit_t unit;
        size_t unit_off;                /* of the carried unit's first byte */
        finder_t finder;
        char *carry;                    /* the carried unit's bytes so far */
        size_t carry_len, carry_cap;
        char *key;                      /* the last top-level key */
        size_t key_len, key_cap;
        size_t nl_pos;                  /* newlines are counted up to this offset, */
        uint64_t lines;                 /* this many, */
        size_t line_start;              /* the last one ending before this offset */
        uint64_t elements, events, malformed;
        bool events_array, truncated;
        uint32_t m_line, m_column;
        char first_malformed[NPF_EVSCAN_ERR_MAX];
        char err[NPF_EVSCAN_ERR_MAX];
};

/* --- tokens ------------------------------------------------------------------------------ */

static inline const char *ws(const char *p, const char *end)
{
        while (p < end && is(*p, C_WS))
                p++;
        return p;
}

/* The closing quote of the string whose contents begin at @p, or NULL when it is not before @end. */
static inline const char *string_end(const char *p, const char *end)
{
        const char *q = p;

        for (;;) {
                q = memchr(q, '"', (size_t) (end - q));
                if (!q)
                        return NULL;
                /* Escaped when an odd number of backslashes comes before it. */
                const char *b = q;
                while (b > p && b[-1] == '\\')
                        b--;
                if (((q - b) & 1) == 0)
                        return q;
                q++;
        }
}

static int bad(ctx_t *c, const char *at, const char *what)
{
        c->err_at = at;
        c->what = what;
        return BAD;
}

/* Whether [@p, @end) is a JSON number. */
static bool json_number(const char *p, const char *end)
{
        if (p < end && *p == '-')
                p++;
        if (p == end || !is(*p, C_DIGIT))
                return false;
        if (*p++ != '0')
                while (p < end && is(*p, C_DIGIT))
                        p++;
        if (p < end && *p == '.') {
                if (++p == end || !is(*p, C_DIGIT))
                        return false;
                while (p < end && is(*p, C_DIGIT))
                        p++;
        }
        if (p < end && (*p == 'e' || *p == 'E')) {
                if (++p < end && (*p == '+' || *p == '-'))
                        p++;
                if (p == end || !is(*p, C_DIGIT))
                        return false;
                while (p < end && is(*p, C_DIGIT))
                        p++;
        }
        return p == end;
}

/* [@p, @end) as "-"? digits, within int64_t. */
static bool to_int(const char *p, const char *end, int64_t *ret)
{
        uint64_t v = 0, limit = INT64_MAX;
        bool neg = false;

        if (p < end && *p == '-') {
                neg = true;
                limit = (uint64_t) INT64_MAX + 1;
                p++;
        }
        if (p == end)
                return false;
        for (; p < end; p++) {
                if (!is(*p, C_DIGIT))
                        return false;
                unsigned d = (unsigned) (*p - '0');
                if (v > (limit - d) / 10)
                        return false;
                v = v * 10 + d;
        }
        *ret = neg ? (int64_t) (0 - v) : (int64_t) v;
        return true;
}

/*
 * [@p, @end) as a number of microseconds ("-" or "+", digits with a point, an exponent),
 * turned exactly into nanoseconds rounded half away from zero: the decimal point is moved
 * over the digits, never through a double. Return: false when it is no such number, or
 * one beyond NPF_EVSCAN_TIME_MAX_NS.
 */
static bool us_to_ns(const char *p, const char *end, int64_t *ret)
{
        const uint64_t max = (uint64_t) NPF_EVSCAN_TIME_MAX_NS;
        const char *ip, *fp = p;
        size_t ni, nf = 0;
        int64_t e = 0;
        uint64_t v = 0;
        bool neg = false;

        if (p < end && (*p == '-' || *p == '+'))
                neg = *p++ == '-';
        for (ip = p; p < end && is(*p, C_DIGIT); p++)
                ;
        ni = (size_t) (p - ip);
        if (p < end && *p == '.') {
                for (fp = ++p; p < end && is(*p, C_DIGIT); p++)
                        ;
                nf = (size_t) (p - fp);
        }
        if (ni + nf == 0)
                return false;
        if (p < end && (*p == 'e' || *p == 'E')) {
                bool eneg = false;
                if (++p < end && (*p == '+' || *p == '-'))
                        eneg = *p++ == '-';
                if (p == end || !is(*p, C_DIGIT))
                        return false;
                for (; p < end && is(*p, C_DIGIT); p++)
                        if (e < 1000000)
                                e = e * 10 + (*p - '0');
                if (eneg)
                        e = -e;
        }
        if (p != end)
                return false;

        /* The digits before the point of nanoseconds, then the one after it to round. */
        size_t nd = ni + nf;
        int64_t point = (int64_t) ni + e + 3;
        for (int64_t i = 0; i < point; i++) {
                unsigned d = 0;
                if ((uint64_t) i < nd)
                        d = (unsigned) ((size_t) i < ni ? ip[i] : fp[i - (int64_t) ni]) - '0';
                else if (v == 0)
                        break;
                if (v > max / 10)
                        return false;
                v = v * 10 + d;
                if (v > max)
                        return false;
        }
        if (point >= 0 && (uint64_t) point < nd) {
                char r = (size_t) point < ni ? ip[point] : fp[point - (int64_t) ni];
                if (r >= '5' && ++v > max)
                        return false;
        }
        *ret = neg ? -(int64_t) v : (int64_t) v;
        return true;
}

static int object(ctx_t *c, const char **pp, unsigned depth);
static int array(ctx_t *c, const char **pp, unsigned depth);

/*
 * The value at *@pp (which is before c->end), inside a container at @depth; *@pp moves past
 * it. A number or a literal ends at the first byte that cannot be in it, so one that
 * touches c->end needs more bytes.
 */
static int value(ctx_t *c, const char **pp, unsigned depth, tok_t *ret)
{
        const char *p = *pp, *q = p, *end = c->end;
        int r;

        switch (*p) {
        case '"':
                if (!(q = string_end(p + 1, end)))
                        return MORE;
                *ret = (tok_t) { K_STRING, p + 1, (size_t) (q - p - 1) };
                *pp = q + 1;
                return OK;
        case '{':
        case '[':
                if ((r = *p == '{' ? object(c, &q, depth + 1) : array(c, &q, depth + 1)) != OK)
                        return r;
                *ret = (tok_t) { *p == '{' ? K_OBJECT : K_ARRAY, p, (size_t) (q - p) };
                *pp = q;
                return OK;
        }
        if (is(*p, C_NUM0)) {
                while (q < end && is(*q, C_NUM))
                        q++;
                if (q == end)
                        return MORE;
                if (!json_number(p, q))
                        return bad(c, p, "a malformed number");
                *ret = (tok_t) { K_NUMBER, p, (size_t) (q - p) };
        } else if (is(*p, C_LIT)) {
                while (q < end && is(*q, C_LIT))
                        q++;
                if (q == end)
                        return MORE;
                size_t n = (size_t) (q - p);
                if (!((n == 4 && (memcmp(p, "true", 4) == 0 || memcmp(p, "null", 4) == 0)) ||
                      (n == 5 && memcmp(p, "false", 5) == 0)))
                        return bad(c, p, "an unknown word where a value was expected");
                *ret = (tok_t) { K_LITERAL, p, n };
        } else {
                return bad(c, p, "a value expected");
        }
        *pp = q;
        return OK;
}

/* The object at *@pp, itself at @depth; *@pp moves past it. */
static int object(ctx_t *c, const char **pp, unsigned depth)
{
        const char *p = *pp, *q, *end = c->end;
        tok_t v;
        int r;

        if (depth > NPF_EVSCAN_DEPTH_MAX)
                return bad(c, p, TOO_DEEP);
        if ((p = ws(p + 1, end)) == end)
                return MORE;
        if (*p != '}')
                for (;;) {
                        if (*p != '"')
                                return bad(c, p, "a key string expected");
                        if (!(q = string_end(p + 1, end)))
                                return MORE;
                        if ((p = ws(q + 1, end)) == end)
                                return MORE;
                        if (*p != ':')
                                return bad(c, p, "':' expected after a key");
                        if ((p = ws(p + 1, end)) == end)
                                return MORE;
                        if ((r = value(c, &p, depth, &v)) != OK)
                                return r;
                        if ((p = ws(p, end)) == end)
                                return MORE;
                        if (*p == '}')
                                break;
                        if (*p != ',')
                                return bad(c, p, "',' or '}' expected in an object");
                        if ((p = ws(p + 1, end)) == end)
                                return MORE;
                }
        *pp = p + 1;
        return OK;
}

/* The array at *@pp, itself at @depth; *@pp moves past it. */
static int array(ctx_t *c, const char **pp, unsigned depth)
{
        const char *p = *pp, *end = c->end;
        tok_t v;
        int r;

        if (depth > NPF_EVSCAN_DEPTH_MAX)
                return bad(c, p, TOO_DEEP);
        if ((p = ws(p + 1, end)) == end)
                return MORE;
        if (*p != ']')
                for (;;) {
                        if ((r = value(c, &p, depth, &v)) != OK)
                                return r;
                        if ((p = ws(p, end)) == end)
                                return MORE;
                        if (*p == ']')
                                break;
                        if (*p != ',')
                                return bad(c, p, "',' or ']' expected in an array");
                        if ((p = ws(p + 1, end)) == end)
                                return MORE;
                }
        *pp = p + 1;
        return OK;
}

/* --- events --------------------------------------------------------------------------------- */

/* The fields whose value can be unusable; bits of a mask. */
enum {
        B_TS = 1,
        B_DUR = 2,
        B_PID = 4,
        B_TID = 8,
};

static void set_time(const tok_t *v, bool *has, int64_t *ns, unsigned *badmask, unsigned bit)
{
        *has = (v->kind == K_NUMBER || v->kind == K_STRING) && us_to_ns(v->p, v->p + v->n, ns);
        if (*has)
                *badmask &= ~bit;
        else
                *badmask |= bit;
}

static void set_key(const tok_t *v, bool *has, int64_t *num, npf_evscan_str_t *str, unsigned *badmask, unsigned bit)
{
        *str = (npf_evscan_str_t) { 0 };
        *has = (v->kind == K_NUMBER || v->kind == K_STRING) && to_int(v->p, v->p + v->n, num);
        if (!*has && v->kind == K_STRING)
                *str = (npf_evscan_str_t) { v->p, v->n };
        if (*has || v->kind == K_STRING)
                *badmask &= ~bit;
        else
                *badmask |= bit;
}

static npf_evscan_str_t str_of(const tok_t *v, kind_t kind)
{
        return v->kind == kind ? (npf_evscan_str_t) { v->p, v->n } : (npf_evscan_str_t) { 0 };
}

/* The member @k (@kn bytes) with value @v into @ev. */
static void field(npf_evscan_event_t *ev, const char *k, size_t kn, const tok_t *v, unsigned *badmask)
{
        switch (kn) {
        case 2:
                if (k[0] == 'p' && k[1] == 'h')
                        ev->ph = v->kind == K_STRING && v->n > 0 ? v->p[0] : 0;
                else if (k[0] == 't' && k[1] == 's')
                        set_time(v, &ev->has_ts, &ev->ts_ns, badmask, B_TS);
                else if (k[0] == 'i' && k[1] == 'd')
                        ev->id = v->kind == K_NUMBER ? (npf_evscan_str_t) { v->p, v->n } : str_of(v, K_STRING);
                break;
        case 3:
                if (memcmp(k, "pid", 3) == 0)
                        set_key(v, &ev->has_pid, &ev->pid, &ev->pid_str, badmask, B_PID);
                else if (memcmp(k, "tid", 3) == 0)
                        set_key(v, &ev->has_tid, &ev->tid, &ev->tid_str, badmask, B_TID);
                else if (memcmp(k, "dur", 3) == 0)
                        set_time(v, &ev->has_dur, &ev->dur_ns, badmask, B_DUR);
                else if (memcmp(k, "cat", 3) == 0)
                        ev->cat = str_of(v, K_STRING);
                break;
        case 4:
                if (memcmp(k, "name", 4) == 0)
                        ev->name = str_of(v, K_STRING);
                else if (memcmp(k, "args", 4) == 0)
                        ev->args = str_of(v, K_OBJECT);
                break;
        }
}

/* The event object at *@pp, itself at @depth, into @ev; *@pp moves past it. */
static int event(ctx_t *c, const char **pp, unsigned depth, npf_evscan_event_t *ev, unsigned *badmask)
{
        const char *p = *pp, *k, *q, *end = c->end;
        tok_t v;
        int r;

        if (depth > NPF_EVSCAN_DEPTH_MAX)
                return bad(c, p, TOO_DEEP);
        if ((p = ws(p + 1, end)) == end)
                return MORE;
        if (*p != '}')
                for (;;) {
                        if (*p != '"')
                                return bad(c, p, "a key string expected");
                        k = p + 1;
                        if (!(q = string_end(k, end)))
                                return MORE;
                        if ((p = ws(q + 1, end)) == end)
                                return MORE;
                        if (*p != ':')
                                return bad(c, p, "':' expected after a key");
                        if ((p = ws(p + 1, end)) == end)
                                return MORE;
                        if ((r = value(c, &p, depth, &v)) != OK)
                                return r;
                        field(ev, k, (size_t) (q - k), &v, badmask);
                        if ((p = ws(p, end)) == end)
                                return MORE;
                        if (*p == '}')
                                break;
                        if (*p != ',')
                                return bad(c, p, "',' or '}' expected in an object");
                        if ((p = ws(p + 1, end)) == end)
                                return MORE;
                }
        ev->raw = (npf_evscan_str_t) { *pp, (size_t) (p + 1 - *pp) };
        *pp = p + 1;
        return OK;
}

/* --- the finder ---------------------------------------------------------------------------- */

/* A finder for the unit whose first byte is @c (not yet run over it). */
static void finder_start(finder_t *f, char c)
{
        fkind_t kind = F_ONE;

        if (is(c, C_NUM0))
                kind = F_NUMBER;
        else if (is(c, C_LIT))
                kind = F_LITERAL;
        else if (c == '"' || c == '{' || c == '[')
                kind = F_NEST;
        *f = (finder_t) { .kind = kind };
}

/* Run @f over [@p, @end). Return: the end of what a parse of the unit must see (for a
 * number or a word, the byte after it, which is not part of it), or NULL when that is not
 * before @end. */
static const char *finder_run(finder_t *f, const char *p, const char *end)
{
        switch (f->kind) {
        case F_NUMBER:
        case F_LITERAL:
                while (p < end && is(*p, f->kind == F_NUMBER ? C_NUM : C_LIT))
                        p++;
                return p < end ? p + 1 : NULL;
        case F_ONE:
                return p < end ? p + 1 : NULL;
        case F_NEST:
                break;
        }
        for (; p < end; p++) {
                char c = *p;
                if (f->in_string) {
                        if (f->escape)
                                f->escape = false;
                        else if (c == '\\')
                                f->escape = true;
                        else if (c == '"') {
                                f->in_string = false;
                                if (f->depth == 0)
                                        return p + 1;
                        }
                } else if (c == '"') {
                        f->in_string = true;
                } else if (c == '{' || c == '[') {
                        f->depth++;
                } else if (c == '}' || c == ']') {
                        if (f->depth <= 1)
                                return p + 1;
                        f->depth--;
                }
        }
        return NULL;
}

/* --- places and messages --------------------------------------------------------------------- */

/* Count the newlines up to offset @upto, from @base, the bytes at offset @base_off. */
static void lines_count(npf_evscan_t *s, const char *base, size_t base_off, size_t upto)
{
        if (upto <= s->nl_pos)
                return;
        const char *p = base + (s->nl_pos - base_off), *end = base + (upto - base_off);
        while ((p = memchr(p, '\n', (size_t) (end - p)))) {
                s->lines++;
                s->line_start = base_off + (size_t) (++p - base);
        }
        s->nl_pos = upto;
}

/* The 1-based line and column of offset @off, which @base holds (at @base_off). */
static void place(npf_evscan_t *s, const char *base, size_t base_off, size_t off, uint64_t *ret_line,
                  uint64_t *ret_column)
{
        lines_count(s, base, base_off, off);
        *ret_line = s->lines + 1;
        *ret_column = off - s->line_start + 1;
}

static int fail(npf_evscan_t *s, int r, const char *base, size_t base_off, size_t off, const char *fmt, ...)
        __attribute__((format(printf, 6, 7)));
static int fail(npf_evscan_t *s, int r, const char *base, size_t base_off, size_t off, const char *fmt, ...)
{
        uint64_t line, column;
        va_list ap;
        int n;

        place(s, base, base_off, off, &line, &column);
        n = snprintf(s->err, sizeof(s->err), "line %" PRIu64 ", column %" PRIu64 ": ", line, column);
        va_start(ap, fmt);
        vsnprintf(s->err + n, sizeof(s->err) - (size_t) n, fmt, ap);
        va_end(ap);
        s->status = r;
        return r;
}

/* Count a malformed element (at offset @off); the first one is described with its place. */
static void malformed(npf_evscan_t *s, const char *base, size_t base_off, size_t off, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
static void malformed(npf_evscan_t *s, const char *base, size_t base_off, size_t off, const char *fmt, ...)
{
        uint64_t line, column;
        va_list ap;
        int n;

        if (s->malformed++ > 0)
                return;
        place(s, base, base_off, off, &line, &column);
        s->m_line = line > UINT32_MAX ? UINT32_MAX : (uint32_t) line;
        s->m_column = column > UINT32_MAX ? UINT32_MAX : (uint32_t) column;
        n = snprintf(s->first_malformed, sizeof(s->first_malformed), "line %" PRIu64 ", column %" PRIu64 ": ",
                     line, column);
        va_start(ap, fmt);
        vsnprintf(s->first_malformed + n, sizeof(s->first_malformed) - (size_t) n, fmt, ap);
        va_end(ap);
}

static const char *kind_name(kind_t k, const char *p)
{
        switch (k) {
        case K_STRING: return "a string";
        case K_NUMBER: return "a number";
        case K_OBJECT: return "an object";
        case K_ARRAY: return "an array";
        case K_LITERAL: break;
        }
        return *p == 'n' ? "null" : "a boolean";
}

/* --- units ------------------------------------------------------------------------------------ */

static size_t unit_cap(unit_t u)
{
        return u == U_ELEM ? NPF_EVSCAN_EVENT_MAX : NPF_EVSCAN_TOP_MAX;
}

static int grow(char **buf, size_t *cap, size_t need)
{
        if (need <= *cap)
                return 0;
        size_t c = *cap ? *cap : 4096;
        while (c < need)
                c *= 2;
        char *b = realloc(*buf, c);
        if (!b)
                return -ENOMEM;
        *buf = b;
        *cap = c;
        return 0;
}

/* An element of the events: an event handed over, or anything else counted and skipped. */
static int element(npf_evscan_t *s, ctx_t *c, const char *base, size_t base_off, const char **pp)
{
        const char *p = *pp;
        size_t off = base_off + (size_t) (p - base);
        int r;

        if (*p != '{') {
                tok_t v;
                if ((r = value(c, pp, s->array_depth, &v)) != OK)
                        return r;
                malformed(s, base, base_off, off, "element %" PRIu64 " of the events is %s, not an object; skipped",
                          s->elements, kind_name(v.kind, v.p));
                s->elements++;
                return OK;
        }

        npf_evscan_event_t ev;
        unsigned badmask = 0;
        memset(&ev, 0, sizeof(ev));
        if ((r = event(c, pp, s->array_depth + 1, &ev, &badmask)) != OK)
                return r;
        ev.offset = off;
        if (badmask)
                malformed(s, base, base_off, off, "event %" PRIu64 " has a \"%s\" that is not %s; handed over without it",
                          s->elements,
                          badmask & B_TS ? "ts" : badmask & B_DUR ? "dur" : badmask & B_PID ? "pid" : "tid",
                          badmask & (B_TS | B_DUR) ? "a number of microseconds within range" : "an integer or a string");
        s->elements++;
        s->events++;
        if (s->on_event && (r = s->on_event(s->userdata, &ev)) != 0) {
                snprintf(s->err, sizeof(s->err), "the event callback stopped the scan (%d)", r);
                s->status = r;
                return r;
        }
        return OK;
}

/*
 * Parse the unit @u at *@pp in @base (at offset @base_off), reading nothing at or past
 * @view. Return: 0 with *@pp past it and the state advanced, or with *@ret_more when
 * more bytes are needed; s->status (a negative errno or a callback's value) on failure.
 */
static int unit_parse(npf_evscan_t *s, unit_t u, const char *base, size_t base_off, const char **pp,
                      const char *view, bool *ret_more)
{
        ctx_t c = { .end = view };
        const char *p = *pp, *q = p;
        tok_t v;
        int r;

        *ret_more = false;
        switch (u) {
        case U_ELEM:
                r = element(s, &c, base, base_off, &q);
                if (s->status)
                        return s->status;
                if (r == OK)
                        s->state = S_ELEM_NEXT;
                break;
        case U_KEY:
                if ((r = value(&c, &q, 1, &v)) != OK)
                        break;
                if (grow(&s->key, &s->key_cap, v.n + 1) < 0)
                        return fail(s, -ENOMEM, base, base_off, base_off + (size_t) (p - base), "out of memory");
                memcpy(s->key, v.p, v.n);
                s->key_len = v.n;
                s->key_events = v.n == 11 && memcmp(v.p, "traceEvents", 11) == 0;
                if (s->key_events && s->events_array)
                        return fail(s, -EINVAL, base, base_off, base_off + (size_t) (p - base),
                                    "\"traceEvents\" appears twice");
                s->state = S_COLON;
                break;
        case U_TOP:
                if ((r = value(&c, &q, 1, &v)) != OK)
                        break;
                s->state = S_NEXT;
                if (s->on_top && (r = s->on_top(s->userdata, (npf_evscan_str_t) { s->key, s->key_len },
                                                (npf_evscan_str_t) { p, (size_t) (q - p) })) != 0) {
                        snprintf(s->err, sizeof(s->err), "the top-level callback stopped the scan (%d)", r);
                        s->status = r;
                        return r;
                }
                break;
        default:
                return fail(s, -EINVAL, base, base_off, base_off + (size_t) (p - base), "internal error: unit %d", u);
        }
        if (r == BAD)
                return fail(s, -EINVAL, base, base_off, base_off + (size_t) (c.err_at - base), "%s", c.what);
        if (r == MORE)
                *ret_more = true;
        else
                *pp = q;
        return 0;
}

static int too_big(npf_evscan_t *s, unit_t u, const char *base, size_t base_off, size_t off)
{
        size_t cap = unit_cap(u);
        bool mib = cap % ((size_t) 1 << 20) == 0;

        if (u == U_KEY)
                return fail(s, -E2BIG, base, base_off, off, "a top-level key of more than %zu %s; refused",
                            mib ? cap >> 20 : cap, mib ? "MiB" : "bytes");
        return fail(s, -E2BIG, base, base_off, off, "element %" PRIu64 " of the events is more than %zu %s; refused",
                    s->elements, mib ? cap >> 20 : cap, mib ? "MiB" : "bytes");
}

/* Skip through a top-level value too long to report, from *@pp. */
static void skip_from(npf_evscan_t *s, const char **pp, const char *end)
{
        const char *q = finder_run(&s->finder, *pp, end);

        if (q) {
                /* A number's or a word's end is the byte after it. */
                s->unit = U_NONE;
                s->state = S_NEXT;
                *pp = s->finder.kind == F_NUMBER || s->finder.kind == F_LITERAL ? q - 1 : q;
        } else {
                s->unit = U_SKIP;
                *pp = end;
        }
}

/*
 * Parse the carried unit, which is complete or at its size limit (or at the end of input,
 * @eof). Return: 0, with *@ret_more when it needs more bytes and @eof, and the number of
 * carried bytes after its end (the byte that ended a number) in *@ret_left; or s->status.
 */
static int carry_parse(npf_evscan_t *s, bool eof, bool *ret_more, size_t *ret_left)
{
        const char *q = s->carry, *end = s->carry + s->carry_len;
        bool more;
        int r;

        *ret_more = false;
        *ret_left = 0;
        if ((r = unit_parse(s, s->unit, s->carry, s->unit_off, &q, end, &more)) != 0)
                return r;
        if (more) {
                if (eof) {
                        *ret_more = true;
                        return 0;
                }
                if (s->carry_len < unit_cap(s->unit))
                        return fail(s, -EINVAL, s->carry, s->unit_off, s->unit_off,
                                    "internal error: a unit found complete is not");
                if (s->unit != U_TOP)
                        return too_big(s, s->unit, s->carry, s->unit_off, s->unit_off);
                /* Too long to report: skipped unchecked, the finder going on. */
                lines_count(s, s->carry, s->unit_off, s->unit_off + s->carry_len);
                s->unit = U_SKIP;
                s->carry_len = 0;
                return 0;
        }
        size_t used = (size_t) (q - s->carry);
        lines_count(s, s->carry, s->unit_off, s->unit_off + used);
        *ret_left = s->carry_len - used;
        s->unit = U_NONE;
        s->carry_len = 0;
        return 0;
}

/* Go on with the carried unit in the chunk's bytes from *@pp; *@pp moves past those taken. */
static int carry_more(npf_evscan_t *s, const char **pp, const char *end)
{
        while (s->unit != U_NONE) {
                const char *p = *pp;
                size_t left;
                bool more;
                int r;

                if (s->unit == U_SKIP) {
                        skip_from(s, pp, end);
                        return 0;
                }
                size_t room = unit_cap(s->unit) - s->carry_len;
                const char *lim = (size_t) (end - p) > room ? p + room : end;
                const char *q = finder_run(&s->finder, p, lim), *stop = q ? q : lim;
                size_t n = (size_t) (stop - p);

                if (grow(&s->carry, &s->carry_cap, s->carry_len + n) < 0)
                        return fail(s, -ENOMEM, s->carry, s->unit_off, s->unit_off, "out of memory");
                memcpy(s->carry + s->carry_len, p, n);
                s->carry_len += n;
                *pp = stop;
                if (!q && s->carry_len < unit_cap(s->unit))
                        return 0;
                if ((r = carry_parse(s, false, &more, &left)) != 0)
                        return r;
                /* What followed the unit came with this chunk: it is read again from there. */
                if (left > n)
                        return fail(s, -EINVAL, s->chunk, s->chunk_off, s->chunk_off + (size_t) (p - s->chunk),
                                    "internal error: a unit ends before its finder said");
                *pp = stop - left;
        }
        return 0;
}

/* The unit @u, which begins at *@pp in the chunk: parsed where it lies if it ends in the
 * chunk, else carried. *@pp moves past it, or to @end. */
static int unit_here(npf_evscan_t *s, unit_t u, const char **pp, const char *end)
{
        const char *p = *pp, *q = p;
        size_t cap = unit_cap(u);
        bool capped = (size_t) (end - p) > cap, more;
        int r;

        if ((r = unit_parse(s, u, s->chunk, s->chunk_off, &q, capped ? p + cap : end, &more)) != 0)
                return r;
        if (!more) {
                *pp = q;
                return 0;
        }
        size_t off = s->chunk_off + (size_t) (p - s->chunk);
        finder_start(&s->finder, *p);
        if (capped) {
                if (u != U_TOP)
                        return too_big(s, u, s->chunk, s->chunk_off, off);
                skip_from(s, pp, end);
                return 0;
        }
        /* The carry buffer's newlines are counted from its first byte. */
        lines_count(s, s->chunk, s->chunk_off, off);
        s->unit = u;
        s->unit_off = off;
        s->carry_len = 0;
        return carry_more(s, pp, end);
}

/* --- the document ------------------------------------------------------------------------------ */

static void events_begin(npf_evscan_t *s, unsigned depth)
{
        s->events_array = true;
        s->array_depth = depth;
        s->state = S_ELEM0;
}

static void events_end(npf_evscan_t *s)
{
        s->state = s->bare ? S_DONE : S_NEXT;
}

/* The elements of the events array and what is between them, from *@pp. */
static int elements(npf_evscan_t *s, const char **pp, const char *end)
{
        const char *p = *pp;
        int r = 0;

        for (;;) {
                if ((p = ws(p, end)) == end)
                        break;
                if (s->state == S_ELEM_NEXT) {
                        if (*p == ',') {
                                s->state = S_ELEM;
                                p++;
                                continue;
                        }
                        if (*p == ']') {
                                events_end(s);
                                p++;
                                break;
                        }
                        r = fail(s, -EINVAL, s->chunk, s->chunk_off, s->chunk_off + (size_t) (p - s->chunk),
                                 "',' or ']' expected after element %" PRIu64 " of the events", s->elements - 1);
                        break;
                }
                if (s->state == S_ELEM0 && *p == ']') {
                        events_end(s);
                        p++;
                        break;
                }
                if ((r = unit_here(s, U_ELEM, &p, end)) != 0 || s->unit != U_NONE)
                        break;
        }
        *pp = p;
        return r;
}

static int scan(npf_evscan_t *s, const char *p, const char *end)
{
        static const char bom[3] = "\xef\xbb\xbf";
        int r;

        while (p < end) {
                size_t off = s->chunk_off + (size_t) (p - s->chunk);

                if (s->state >= S_ELEM0 && s->state <= S_ELEM_NEXT) {
                        if ((r = elements(s, &p, end)) != 0)
                                return r;
                        if (s->unit != U_NONE)
                                return 0;
                        continue;
                }
                if (s->state == S_START && off < 3 && off == s->bom && *p == bom[off]) {
                        s->bom++;
                        p++;
                        continue;
                }
                if ((p = ws(p, end)) == end)
                        break;
                off = s->chunk_off + (size_t) (p - s->chunk);
                switch (s->state) {
                case S_START:
                        if (s->bom == 1 || s->bom == 2)
                                return fail(s, -EINVAL, s->chunk, s->chunk_off, off, "a byte order mark cut short");
                        if (*p == '{') {
                                s->state = S_KEY0;
                        } else if (*p == '[') {
                                s->bare = true;
                                events_begin(s, 1);
                        } else {
                                return fail(s, -ENOMSG, s->chunk, s->chunk_off, off,
                                            "the document is neither an object nor an array: not a Chrome trace");
                        }
                        p++;
                        break;
                case S_KEY0:
                        if (*p == '}') {
                                s->state = S_DONE;
                                p++;
                                break;
                        }
                        /* fall through */
                case S_KEY:
                        if (*p != '"')
                                return fail(s, -EINVAL, s->chunk, s->chunk_off, off, "a key string expected");
                        if ((r = unit_here(s, U_KEY, &p, end)) != 0)
                                return r;
                        break;
                case S_COLON:
                        if (*p != ':')
                                return fail(s, -EINVAL, s->chunk, s->chunk_off, off, "':' expected after a key");
                        s->state = S_VALUE;
                        p++;
                        break;
                case S_VALUE:
                        if (!s->key_events) {
                                if ((r = unit_here(s, U_TOP, &p, end)) != 0)
                                        return r;
                                break;
                        }
                        if (*p != '[')
                                return fail(s, -EINVAL, s->chunk, s->chunk_off, off,
                                            "\"traceEvents\" is not an array of events");
                        events_begin(s, 2);
                        p++;
                        break;
                case S_NEXT:
                        if (*p == ',')
                                s->state = S_KEY;
                        else if (*p == '}')
                                s->state = S_DONE;
                        else
                                return fail(s, -EINVAL, s->chunk, s->chunk_off, off, "',' or '}' expected after a value");
                        p++;
                        break;
                case S_DONE:
                        return fail(s, -EINVAL, s->chunk, s->chunk_off, off, "the document goes on after its end");
                default:
                        return fail(s, -EINVAL, s->chunk, s->chunk_off, off, "internal error: state %d", s->state);
                }
        }
        return 0;
}

/* --- the API ------------------------------------------------------------------------------------ */

npf_evscan_t *npf_evscan_new(npf_evscan_event_cb on_event, npf_evscan_top_cb on_top, void *userdata)
{
        npf_evscan_t *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->on_event = on_event;
        s->on_top = on_top;
        s->userdata = userdata;
        return s;
}

npf_evscan_t *npf_evscan_free(npf_evscan_t *s)
{
        if (s) {
                free(s->carry);
                free(s->key);
                free(s);
        }
        return NULL;
}

static int failed(const npf_evscan_t *s, char *err)
{
        if (err)
                snprintf(err, NPF_EVSCAN_ERR_MAX, "%s", s->err);
        return s->status;
}

int npf_evscan_feed(npf_evscan_t *s, const void *buf, size_t len, char *err)
{
        const char *p = buf, *end = p + len;
        int r = 0;

        if (s->status)
                return failed(s, err);
        if (s->finished) {
                snprintf(s->err, sizeof(s->err), "fed after the end of input");
                s->status = -EINVAL;
                return failed(s, err);
        }
        if (len == 0)
                return 0;
        s->chunk = p;
        s->chunk_off = s->bytes;
        s->bytes += len;
        if (s->unit != U_NONE)
                r = carry_more(s, &p, end);
        if (r == 0 && s->unit == U_NONE)
                r = scan(s, p, end);
        if (r == 0) {
                /* What is done with; the carried unit's newlines are counted in the carry buffer. */
                bool carried = s->unit == U_KEY || s->unit == U_TOP || s->unit == U_ELEM;
                lines_count(s, s->chunk, s->chunk_off, carried ? s->unit_off : s->bytes);
        }
        s->chunk = NULL;
        return r ? failed(s, err) : 0;
}

int npf_evscan_finish(npf_evscan_t *s, char *err)
{
        static const char *const expected[] = {
                [S_START] = "a JSON value",
                [S_KEY0] = "a key or '}'",
                [S_KEY] = "a key",
                [S_COLON] = "':'",
                [S_VALUE] = "a value",
                [S_NEXT] = "',' or '}'",
        };
        bool more = false;
        int r;

        if (s->status)
                return failed(s, err);
        if (s->finished)
                return 0;
        s->finished = true;
        if (s->unit == U_KEY || s->unit == U_TOP || s->unit == U_ELEM) {
                unit_t u = s->unit;
                size_t left;
                if ((r = carry_parse(s, true, &more, &left)) != 0)
                        return failed(s, err);
                if (more && u == U_ELEM) {
                        s->truncated = true;
                        return 0;
                }
                if (more) {
                        fail(s, -EINVAL, s->carry, s->unit_off, s->bytes, "the document ends inside a top-level %s",
                             u == U_KEY ? "key" : "value");
                        return failed(s, err);
                }
        }
        if (s->unit == U_SKIP) {
                fail(s, -EINVAL, NULL, s->bytes, s->bytes, "the document ends inside a top-level value");
                return failed(s, err);
        }
        switch (s->state) {
        case S_ELEM0:
        case S_ELEM:
        case S_ELEM_NEXT:
                s->truncated = true;
                return 0;
        case S_DONE:
                if (s->events_array)
                        return 0;
                snprintf(s->err, sizeof(s->err), "a JSON object without \"traceEvents\": not a Chrome trace");
                s->status = -ENOMSG;
                return failed(s, err);
        default:
                fail(s, -EINVAL, NULL, s->bytes, s->bytes, "the document ends where %s was expected",
                     s->state <= S_NEXT ? expected[s->state] : "more");
                return failed(s, err);
        }
}

void npf_evscan_stats(const npf_evscan_t *s, npf_evscan_stats_t *ret_stats)
{
        *ret_stats = (npf_evscan_stats_t) {
                .events = s->events,
                .malformed = s->malformed,
                .bytes = s->bytes,
                .events_array = s->events_array,
                .truncated = s->truncated,
                .malformed_line = s->m_line,
                .malformed_column = s->m_column,
        };
        memcpy(ret_stats->first_malformed, s->first_malformed, sizeof(ret_stats->first_malformed));
}

/* --- lookups ------------------------------------------------------------------------------------ */

/* Whether the raw key @k (@kn bytes) is @key, @klen bytes, once its escapes are decoded. */
static bool key_is(const char *k, size_t kn, const char *key, size_t klen)
{
        char buf[256];

        if (kn == klen && memcmp(k, key, klen) == 0)
                return true;
        if (!memchr(k, '\\', kn) || klen >= sizeof(buf))
                return false;
        size_t n = npf_evscan_unescape((npf_evscan_str_t) { k, kn }, buf, sizeof(buf));
        return n == klen && memcmp(buf, key, klen) == 0;
}

/* The last value of @key among the top-level members of @object. */
static bool lookup(npf_evscan_str_t object, const char *key, tok_t *ret)
{
        ctx_t c = { .end = object.p + object.n };
        const char *p = object.p, *end = c.end, *k, *q;
        size_t klen = strlen(key);
        bool found = false;
        tok_t v, last = { 0 };

        if (!p || object.n == 0 || *p != '{')
                return false;
        if ((p = ws(p + 1, end)) == end)
                return false;
        if (*p != '}')
                for (;;) {
                        if (*p != '"')
                                return false;
                        k = p + 1;
                        if (!(q = string_end(k, end)) || (p = ws(q + 1, end)) == end || *p != ':' ||
                            (p = ws(p + 1, end)) == end || value(&c, &p, 1, &v) != OK)
                                return false;
                        if (key_is(k, (size_t) (q - k), key, klen)) {
                                last = v;
                                found = true;
                        }
                        if ((p = ws(p, end)) == end)
                                return false;
                        if (*p == '}')
                                break;
                        if (*p != ',' || (p = ws(p + 1, end)) == end)
                                return false;
                }
        if (found)
                *ret = last;
        return found;
}

bool npf_evscan_get(npf_evscan_str_t object, const char *key, npf_evscan_str_t *ret_raw)
{
        tok_t v;

        if (!lookup(object, key, &v))
                return false;
        *ret_raw = (npf_evscan_str_t) { v.p, v.n };
        return true;
}

bool npf_evscan_get_int(npf_evscan_str_t object, const char *key, int64_t *ret_value)
{
        tok_t v;

        return lookup(object, key, &v) && (v.kind == K_NUMBER || v.kind == K_STRING) &&
               to_int(v.p, v.p + v.n, ret_value);
}

bool npf_evscan_get_double(npf_evscan_str_t object, const char *key, double *ret_value)
{
        char buf[128], *end;
        tok_t v;

        if (!lookup(object, key, &v) || (v.kind != K_NUMBER && v.kind != K_STRING) || v.n >= sizeof(buf))
                return false;
        /* Digits, signs, points and exponents only: no "inf", "nan", hex or spaces. */
        for (size_t i = 0; i < v.n; i++)
                if (!is(v.p[i], C_NUM))
                        return false;
        memcpy(buf, v.p, v.n);
        buf[v.n] = '\0';
        double d = strtod(buf, &end);
        if (end == buf || *end)
                return false;
        *ret_value = d;
        return true;
}

bool npf_evscan_eq(npf_evscan_str_t s, const char *lit)
{
        size_t n = strlen(lit);

        return s.p && s.n == n && memcmp(s.p, lit, n) == 0;
}

/* --- unescape ------------------------------------------------------------------------------------ */

static int hex4(const char *p, const char *end)
{
        int v = 0;

        if (end - p < 4)
                return -1;
        for (int i = 0; i < 4; i++) {
                char c = p[i];
                int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
                        c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
                if (d < 0)
                        return -1;
                v = v * 16 + d;
        }
        return v;
}

static size_t utf8_put(uint32_t cp, char *out)
{
        if (cp < 0x80) {
                out[0] = (char) cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char) (0xc0 | (cp >> 6));
                out[1] = (char) (0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char) (0xe0 | (cp >> 12));
                out[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
                out[2] = (char) (0x80 | (cp & 0x3f));
                return 3;
        }
        out[0] = (char) (0xf0 | (cp >> 18));
        out[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
        out[3] = (char) (0x80 | (cp & 0x3f));
        return 4;
}

/* The length of the valid UTF-8 sequence at @p, or 0 (for a NUL too). */
static size_t utf8_len(const uint8_t *p, const uint8_t *end)
{
        uint32_t cp;
        size_t n;

        if (p[0] < 0x80)
                return p[0] != 0;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                n = 2, cp = p[0] & 0x1f;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                n = 3, cp = p[0] & 0x0f;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                n = 4, cp = p[0] & 0x07;
        else
                return 0;
        if ((size_t) (end - p) < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
                return 0;
        return n;
}

size_t npf_evscan_unescape(npf_evscan_str_t s, char *buf, size_t size)
{
        const char *p = s.p, *end = s.p ? s.p + s.n : NULL;
        size_t n = 0, written = 0;
        bool full = false;

        while (p && p < end) {
                char tmp[4];
                const char *piece = tmp;
                size_t k;
                uint32_t cp = 0xfffd;

                if (*p != '\\') {
                        k = utf8_len((const uint8_t *) p, (const uint8_t *) end);
                        if (k > 0) {
                                piece = p;
                                p += k;
                        } else {
                                k = utf8_put(cp, tmp);
                                p++;
                        }
                } else {
                        char e = p + 1 < end ? p[1] : '\0';
                        p += p + 1 < end ? 2 : 1;
                        switch (e) {
                        case '"': case '\\': case '/': cp = (uint8_t) e; break;
                        case 'b': cp = '\b'; break;
                        case 'f': cp = '\f'; break;
                        case 'n': cp = '\n'; break;
                        case 'r': cp = '\r'; break;
                        case 't': cp = '\t'; break;
                        case 'u': {
                                int h = hex4(p, end);
                                if (h < 0)
                                        break;
                                p += 4;
                                if (h >= 0xd800 && h <= 0xdbff && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                                        int l = hex4(p + 2, end);
                                        if (l >= 0xdc00 && l <= 0xdfff) {
                                                cp = 0x10000 + (((uint32_t) h - 0xd800) << 10) + ((uint32_t) l - 0xdc00);
                                                p += 6;
                                                break;
                                        }
                                }
                                if (h != 0 && (h < 0xd800 || h > 0xdfff))
                                        cp = (uint32_t) h;
                                break;
                        }
                        default:
                                break;
                        }
                        k = utf8_put(cp, tmp);
                }
                if (!full && written + k < size) {
                        memcpy(buf + written, piece, k);
                        written += k;
                } else {
                        full = true;
                }
                n += k;
        }
        if (size > 0)
                buf[written] = '\0';
        return n;
}
