/* SPDX-License-Identifier: MIT */
/*
 * The data-only pickle machine: a stack, marks and the tree's memo; nothing is executed. The
 * opcodes are run here one by one, but for batches of flat dicts, which pickle-batch.c reads.
 */
#include "replay/pickle.h"
#include "replay/beside.h"
#include "replay/pickle-batch.h"
#include "replay/pickle-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef npf__pickle_vm_t vm_t;

/* The opcodes that name or call Python objects, refused, with what each would do. */
static const struct refused {
        uint8_t op;
        const char *name, *does;
} refused[] = {
        { 'c', "GLOBAL", "import a Python object" },
        { 0x93, "STACK_GLOBAL", "import a Python object" },
        { 'R', "REDUCE", "call a Python object" },
        { 'b', "BUILD", "set an object's state" },
        { 'i', "INST", "build a class instance" },
        { 'o', "OBJ", "build a class instance" },
        { 0x81, "NEWOBJ", "build a class instance" },
        { 0x92, "NEWOBJ_EX", "build a class instance" },
        { 0x82, "EXT1", "import a registered extension" },
        { 0x83, "EXT2", "import a registered extension" },
        { 0x84, "EXT4", "import a registered extension" },
        { 'P', "PERSID", "load a persistent object" },
        { 'Q', "BINPERSID", "load a persistent object" },
        { 0x97, "NEXT_BUFFER", "use an out-of-band buffer" },
        { 0x98, "READONLY_BUFFER", "use an out-of-band buffer" },
};

int npf__pickle_fail(vm_t *vm, int r, const char *fmt, ...)
{
        size_t off = (size_t) ((vm->op ? vm->op : vm->p) - vm->base);
        int n = snprintf(vm->err, NPF_PICKLE_ERR_MAX, "offset %zu: ", off);
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(vm->err + n, NPF_PICKLE_ERR_MAX - (size_t) n, fmt, ap);
        va_end(ap);
        return r;
}

static int truncated(vm_t *vm)
{
        return npf__pickle_fail(vm, -EINVAL,
                                "opcode 0x%02x runs past the end of the input (%zu bytes): truncated pickle", *vm->op,
                                (size_t) (vm->end - vm->base));
}

/* The next @n argument bytes of the current opcode, or NULL when the input ends first. */
static const uint8_t *take(vm_t *vm, uint64_t n)
{
        const uint8_t *p = vm->p;

        if (n > (uint64_t) (vm->end - vm->p))
                return NULL;
        vm->p += n;
        return p;
}

/* A text argument: the bytes up to the newline, which is consumed. */
static const uint8_t *take_line(vm_t *vm, size_t *ret_len)
{
        const uint8_t *nl = memchr(vm->p, '\n', (size_t) (vm->end - vm->p));
        const uint8_t *p = vm->p;

        if (!nl)
                return NULL;
        *ret_len = (size_t) (nl - p);
        vm->p = nl + 1;
        return p;
}

static int __attribute__((noinline)) push_grow(vm_t *vm, npf_value_t v)
{
        size_t cap = vm->stack_cap * 2;

        if (cap > NPF_PICKLE_STACK_MAX)
                cap = NPF_PICKLE_STACK_MAX;
        if (vm->sp == cap)
                return npf__pickle_fail(vm, -E2BIG, "more than %u values on the stack", NPF_PICKLE_STACK_MAX);
        npf_value_t *s = realloc(vm->stack, cap * sizeof(*s));
        if (!s)
                return -ENOMEM;
        vm->stack = s;
        vm->stack_cap = cap;
        vm->stack[vm->sp++] = v;
        return 0;
}

static inline int push(vm_t *vm, npf_value_t v)
{
        if (vm->sp == vm->stack_cap)
                return push_grow(vm, v);
        vm->stack[vm->sp++] = v;
        return 0;
}

/* The stack position of the innermost mark, which is removed. */
static int pop_mark(vm_t *vm, size_t *ret)
{
        if (vm->n_marks == 0)
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x needs a MARK and there is none", *vm->op);
        *ret = vm->marks[--vm->n_marks];
        return 0;
}

static int need(vm_t *vm, size_t n)
{
        size_t floor = vm->n_marks ? vm->marks[vm->n_marks - 1] : 0;

        if (vm->sp - floor < n)
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x needs %zu value(s) on the stack and finds %zu",
                                        *vm->op, n, vm->sp - floor);
        return 0;
}

static int append(vm_t *vm, npf_value_t c, npf_value_t *items, size_t n)
{
        int r = npf_vtree_append(vm->tree, c, items, n, vm->err, NPF_PICKLE_ERR_MAX);

        if (r == -ENOMEM)
                return npf__pickle_fail(vm, r, "out of memory");
        if (r == -E2BIG)
                return npf__pickle_fail(vm, r, "a container of more than 4294967295 items");
        return r;
}

/* APPEND(S), SETITEM(S), ADDITEMS: the values from @from on go into the container below. */
static int add_to_container(vm_t *vm, size_t from, npf_vkind_t k1, npf_vkind_t k2, bool pairs)
{
        npf_value_t c;
        size_t n = vm->sp - from;
        int r;

        if (from == 0)
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x finds no container to add to", *vm->op);
        c = npf_value_resolve(vm->stack[from - 1]);
        if (c.kind != k1 && c.kind != k2)
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x adds to a %s", *vm->op, npf_value_kind_name(c));
        if (pairs && n % 2)
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x finds a key without a value", *vm->op);
        if ((r = append(vm, c, vm->stack + from, n)) < 0)
                return r;
        vm->sp = from;
        return 0;
}

/* LIST, TUPLE(1-3), DICT, FROZENSET: a new container of the values from @from on. */
static int build(vm_t *vm, size_t from, npf_vkind_t kind)
{
        npf_value_t c;
        size_t n = vm->sp - from;
        int r;

        if (kind == NPF_V_DICT && n % 2)
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x finds a key without a value", *vm->op);
        if ((r = npf_vtree_container(vm->tree, kind, &c)) < 0 || (r = append(vm, c, vm->stack + from, n)) < 0)
                return r == -ENOMEM ? npf__pickle_fail(vm, r, "out of memory") : r;
        vm->sp = from;
        return push(vm, c);
}

static int push_container(vm_t *vm, npf_vkind_t kind)
{
        npf_value_t c;

        if (npf_vtree_container(vm->tree, kind, &c) < 0)
                return npf__pickle_fail(vm, -ENOMEM, "out of memory");
        return push(vm, c);
}

/* INT and LONG in text: decimal, or 00 and 01 for the booleans of protocol 0. */
static int text_int(vm_t *vm, const uint8_t *s, size_t len, bool is_long)
{
        char buf[64];
        char *endp;

        if (len > 0 && is_long && s[len - 1] == 'L')
                len--;
        if (!is_long && len == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1'))
                return push(vm, (npf_value_t) { .kind = NPF_V_BOOL, .as.i = s[1] == '1' });
        size_t sign = len > 0 && (s[0] == '-' || s[0] == '+');
        if (len == sign)
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x has an empty integer", *vm->op);
        for (size_t i = sign; i < len; i++)
                if (s[i] < '0' || s[i] > '9')
                        return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x has \"%.*s\", not an integer", *vm->op,
                                                (int) (len < 40 ? len : 40), (const char *) s);
        if (len >= sizeof(buf))         /* digits beyond any 64-bit integer */
                return push(vm, (npf_value_t) { .kind = NPF_V_INT, .flags = NPF_VF_HUGE, .as.i = s[0] == '-' ? -1 : 1 });
        memcpy(buf, s, len);
        buf[len] = '\0';
        errno = 0;
        long long i = strtoll(buf, &endp, 10);
        if (errno != ERANGE)
                return push(vm, (npf_value_t) { .kind = NPF_V_INT, .as.i = i });
        if (s[0] != '-') {
                errno = 0;
                unsigned long long u = strtoull(buf, &endp, 10);
                if (errno != ERANGE)
                        return push(vm, (npf_value_t) { .kind = NPF_V_INT, .flags = NPF_VF_UNSIGNED, .as.u = u });
        }
        return push(vm, (npf_value_t) { .kind = NPF_V_INT, .flags = NPF_VF_HUGE, .as.i = s[0] == '-' ? -1 : 1 });
}

static int text_float(vm_t *vm, const uint8_t *s, size_t len)
{
        char buf[128];
        char *endp;

        if (len == 0 || len >= sizeof(buf))
                return npf__pickle_fail(vm, -EINVAL, "opcode FLOAT has a number of %zu characters", len);
        memcpy(buf, s, len);
        buf[len] = '\0';
        double f = strtod(buf, &endp);
        if (*endp != '\0')
                return npf__pickle_fail(vm, -EINVAL, "opcode FLOAT has \"%s\", not a number", buf);
        return push(vm, (npf_value_t) { .kind = NPF_V_FLOAT, .as.f = f });
}

static int push_bytes(vm_t *vm, npf_vkind_t kind, uint64_t len)
{
        const uint8_t *s;

        if (len > UINT32_MAX)
                return npf__pickle_fail(vm, -E2BIG, "a string of %" PRIu64 " bytes (at most 4294967295)", len);
        if (!(s = take(vm, len)))
                return truncated(vm);
        return push(vm, (npf_value_t) { .kind = (uint8_t) kind, .len = (uint32_t) len, .as.s = (const char *) s });
}

/* STRING (protocol 0): a quoted Python 2 str; escapes are not decoded and are refused. */
static int text_string(vm_t *vm, const uint8_t *s, size_t len)
{
        if (len < 2 || (s[0] != '\'' && s[0] != '"') || s[len - 1] != s[0])
                return npf__pickle_fail(vm, -EINVAL, "opcode STRING has an unquoted argument");
        if (memchr(s, '\\', len))
                return npf__pickle_fail(vm, -EINVAL, "opcode STRING has escapes, which this reader does not decode");
        return push(vm, (npf_value_t) { .kind = NPF_V_STR, .len = (uint32_t) (len - 2), .as.s = (const char *) s + 1 });
}

/* UNICODE (protocol 0): raw-unicode-escape, decoded to UTF-8 in the tree. */
static int text_unicode(vm_t *vm, const uint8_t *s, size_t len)
{
        char *out = malloc(len * 4 + 1);
        size_t n = 0;
        npf_value_t v;
        int r;

        if (!out)
                return npf__pickle_fail(vm, -ENOMEM, "out of memory");
        for (size_t i = 0; i < len; i++) {
                uint32_t cp = s[i];
                if (s[i] == '\\' && i + 1 < len && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
                        unsigned digits = s[i + 1] == 'u' ? 4 : 8;
                        if (i + 2 + digits > len) {
                                free(out);
                                return npf__pickle_fail(vm, -EINVAL, "opcode UNICODE has a truncated escape");
                        }
                        cp = 0;
                        for (unsigned d = 0; d < digits; d++) {
                                uint8_t c = s[i + 2 + d];
                                int x = c >= '0' && c <= '9' ? c - '0'
                                        : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
                                if (x < 0) {
                                        free(out);
                                        return npf__pickle_fail(vm, -EINVAL, "opcode UNICODE has a bad escape");
                                }
                                cp = cp << 4 | (uint32_t) x;
                        }
                        if (cp > 0x10ffff) {
                                free(out);
                                return npf__pickle_fail(vm, -EINVAL, "opcode UNICODE has an escape beyond U+10FFFF");
                        }
                        i += 1 + digits;
                }
                if (cp < 0x80) {
                        out[n++] = (char) cp;
                } else if (cp < 0x800) {
                        out[n++] = (char) (0xc0 | cp >> 6);
                        out[n++] = (char) (0x80 | (cp & 0x3f));
                } else if (cp < 0x10000) {
                        out[n++] = (char) (0xe0 | cp >> 12);
                        out[n++] = (char) (0x80 | ((cp >> 6) & 0x3f));
                        out[n++] = (char) (0x80 | (cp & 0x3f));
                } else {
                        out[n++] = (char) (0xf0 | cp >> 18);
                        out[n++] = (char) (0x80 | ((cp >> 12) & 0x3f));
                        out[n++] = (char) (0x80 | ((cp >> 6) & 0x3f));
                        out[n++] = (char) (0x80 | (cp & 0x3f));
                }
        }
        r = npf_vtree_strdup(vm->tree, NPF_V_STR, out, n, &v);
        free(out);
        if (r < 0)
                return npf__pickle_fail(vm, r, "out of memory");
        return push(vm, v);
}

static int memo_put(vm_t *vm, uint64_t idx)
{
        int r;

        if (vm->sp == 0)
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x memoizes an empty stack", *vm->op);
        if (idx >= NPF_PICKLE_MEMO_MAX)
                return npf__pickle_fail(vm, -E2BIG, "memo index %" PRIu64 " (at most %u)", idx,
                                        NPF_PICKLE_MEMO_MAX - 1);
        /* The memo is an array: an index far beyond the opcodes the input holds is refused,
         * not allocated. Python's own pickler numbers its slots from 0. */
        if (idx > (uint64_t) (vm->end - vm->base))
                return npf__pickle_fail(vm, -EINVAL, "memo index %" PRIu64 " is larger than the input (%zu bytes)", idx,
                                        (size_t) (vm->end - vm->base));
        if ((r = npf_vtree_memo_put(vm->tree, idx, vm->stack[vm->sp - 1])) < 0)
                return npf__pickle_fail(vm, r, "out of memory");
        npf__pickle_keys_forget(vm, idx);
        return 0;
}

static inline int memo_get(vm_t *vm, uint64_t idx)
{
        npf_value_t v;

        if (npf_vtree_memo_get(vm->tree, idx, &v) < 0)
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x reads memo slot %" PRIu64 ", which was never set",
                                        *vm->op, idx);
        return push(vm, v);
}

static int text_memo(vm_t *vm, bool put)
{
        const uint8_t *s;
        size_t len;
        char buf[24], *endp;

        if (!(s = take_line(vm, &len)))
                return truncated(vm);
        if (len == 0 || len >= sizeof(buf))
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x has a bad memo index", *vm->op);
        memcpy(buf, s, len);
        buf[len] = '\0';
        unsigned long long idx = strtoull(buf, &endp, 10);
        if (*endp != '\0' || buf[0] == '-')
                return npf__pickle_fail(vm, -EINVAL, "opcode 0x%02x has a bad memo index", *vm->op);
        return put ? memo_put(vm, idx) : memo_get(vm, idx);
}

static int mark(vm_t *vm)
{
        if (vm->n_marks == NPF_PICKLE_DEPTH_MAX)
                return npf__pickle_fail(vm, -E2BIG, "more than %u open marks", NPF_PICKLE_DEPTH_MAX);
        if (vm->n_marks == vm->marks_cap) {
                size_t cap = vm->marks_cap ? vm->marks_cap * 2 : 64;
                size_t *m = realloc(vm->marks, cap * sizeof(*m));
                if (!m)
                        return npf__pickle_fail(vm, -ENOMEM, "out of memory");
                vm->marks = m;
                vm->marks_cap = cap;
        }
        vm->marks[vm->n_marks++] = vm->sp;
        return 0;
}

static int refuse(vm_t *vm, uint8_t op)
{
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
                if (refused[i].op == op)
                        return npf__pickle_fail(vm, -EPERM, "opcode %s (0x%02x) would %s; refused", refused[i].name, op,
                                                refused[i].does);
        return npf__pickle_fail(vm, -EINVAL, "unknown opcode 0x%02x: not a pickle, or a newer one", op);
}

/*
 * Runs the opcodes until STOP. Each opcode's handler ends in a dispatch of its own (GCC's
 * labels as values, as CPython's interpreter does): a snapshot is millions of the same few
 * sequences, and one indirect jump per handler lets the branch predictor learn which opcode
 * follows which. Return: 0 at STOP, or a negative errno.
 */
static int run(vm_t *vm, npf_input_progress_cb progress, void *userdata)
{
        const void *table[256];
        size_t next_progress = NPF_INPUT_PROGRESS_EVERY, from = 0, len;
        size_t size = (size_t) (vm->end - vm->base);
        const uint8_t *progress_at = vm->base + (size < NPF_INPUT_PROGRESS_EVERY ? size : NPF_INPUT_PROGRESS_EVERY);
        const uint8_t *a, *const end = vm->end;
        uint8_t op;
        int r;

        for (size_t i = 0; i < 256; i++)
                table[i] = &&op_refused;
        table[0x80] = &&op_proto;
        table[0x95] = &&op_frame;
        table['.'] = &&op_stop;
        table['('] = &&op_mark;
        table['0'] = &&op_pop;
        table['1'] = &&op_pop_mark;
        table['2'] = &&op_dup;
        table['N'] = &&op_none;
        table[0x88] = table[0x89] = &&op_bool;
        table['J'] = &&op_binint;
        table['K'] = &&op_binint1;
        table['M'] = &&op_binint2;
        table[0x8a] = table[0x8b] = &&op_long;
        table['I'] = table['L'] = &&op_text_int;
        table['F'] = &&op_text_float;
        table['G'] = &&op_binfloat;
        table['S'] = &&op_string;
        table['V'] = &&op_unicode;
        table['U'] = table[0x8c] = table['C'] = &&op_short_bytes;
        table['T'] = table['X'] = table['B'] = &&op_bytes4;
        table[0x8d] = table[0x8e] = table[0x96] = &&op_bytes8;
        table[']'] = table[')'] = table['}'] = table[0x8f] = &&op_empty;
        table['a'] = &&op_append;
        table['s'] = &&op_setitem;
        table['e'] = table['u'] = table[0x90] = &&op_add_marked;
        table['l'] = table['t'] = table['d'] = table[0x91] = &&op_build_marked;
        table[0x85] = table[0x86] = table[0x87] = &&op_tuple_n;
        table['h'] = table['j'] = &&op_get;
        table['q'] = &&op_binput;
        table['r'] = &&op_long_binput;
        table[0x94] = &&op_memoize;
        table['g'] = table['p'] = &&op_text_memo;

/* The next opcode; progress is reported, and the end of the input caught, off the fast path. */
#define DISPATCH()                                                                              \
        do {                                                                                    \
                if (vm->p >= progress_at)                                                       \
                        goto checkpoint;                                                        \
                vm->op = vm->p;                                                                 \
                op = *vm->p++;                                                                  \
                goto *table[op];                                                                \
        } while (0)
/* Ends a handler: stops on an error, dispatches otherwise. */
#define NEXT(expr)                                                                              \
        do {                                                                                    \
                if ((r = (expr)) < 0)                                                           \
                        return r;                                                               \
                DISPATCH();                                                                     \
        } while (0)
#define TAKE(n)                                                                                 \
        do {                                                                                    \
                if (!(a = take(vm, (n))))                                                       \
                        return truncated(vm);                                                   \
        } while (0)

        DISPATCH();
checkpoint:
        if (vm->p == vm->end) {
                vm->op = NULL;
                return npf__pickle_fail(vm, -EINVAL, "the input ends before STOP: truncated pickle");
        }
        if (progress && (size_t) (vm->p - vm->base) >= next_progress) {
                /* Never beside the reduce callback, nor past an error of a batch's. */
                if ((r = npf__pickle_batch_drain(vm)) < 0)
                        return r;
                progress(userdata, (size_t) (vm->p - vm->base), (size_t) (vm->end - vm->base));
                next_progress += NPF_INPUT_PROGRESS_EVERY;
        }
        progress_at = (size_t) (vm->end - vm->p) > NPF_INPUT_PROGRESS_EVERY ? vm->p + NPF_INPUT_PROGRESS_EVERY : vm->end;
        vm->op = vm->p;
        op = *vm->p++;
        goto *table[op];

op_proto:
        TAKE(1);
        if (*a > 5)
                return npf__pickle_fail(vm, -EINVAL, "pickle protocol %u is newer than 5, the newest this reader knows",
                                        *a);
        vm->proto = *a;
        DISPATCH();
op_frame: /* a length hint for buffering; it must not promise more than is there */
        TAKE(8);
        if (npf__pickle_le(a, 8) > (uint64_t) (vm->end - vm->p))
                return npf__pickle_fail(vm, -EINVAL, "FRAME of %" PRIu64 " bytes, only %zu left: truncated pickle",
                                        npf__pickle_le(a, 8), (size_t) (vm->end - vm->p));
        DISPATCH();
op_stop:
        if (vm->sp != 1 || vm->n_marks)
                return npf__pickle_fail(vm, -EINVAL,
                                        "STOP with %zu values and %zu marks on the stack (expected one value)", vm->sp,
                                        vm->n_marks);
        return 0;
op_mark:
        if (vm->batches && npf__pickle_batch_begins(vm, vm->p - 1) && (r = npf__pickle_batch_of_dicts(vm)) != 0) {
                if (r < 0)
                        return r;
                DISPATCH();
        }
        NEXT(mark(vm));
op_pop: /* a value, or the mark itself when none is above it (as Python does) */
        if (vm->n_marks && vm->sp == vm->marks[vm->n_marks - 1]) {
                vm->n_marks--;
                DISPATCH();
        }
        if ((r = need(vm, 1)) < 0)
                return r;
        vm->sp--;
        DISPATCH();
op_pop_mark:
        if ((r = pop_mark(vm, &from)) < 0)
                return r;
        vm->sp = from;
        DISPATCH();
op_dup:
        if ((r = need(vm, 1)) < 0)
                return r;
        npf_vtree_share(vm->stack[vm->sp - 1]);
        NEXT(push(vm, vm->stack[vm->sp - 1]));
op_none:
        NEXT(push(vm, (npf_value_t) { .kind = NPF_V_NONE }));
op_bool: /* NEWTRUE, NEWFALSE */
        NEXT(push(vm, (npf_value_t) { .kind = NPF_V_BOOL, .as.i = op == 0x88 }));
op_binint:
        TAKE(4);
        NEXT(push(vm, (npf_value_t) { .kind = NPF_V_INT, .as.i = (int32_t) (uint32_t) npf__pickle_le(a, 4) }));
op_binint1:
        TAKE(1);
        NEXT(push(vm, (npf_value_t) { .kind = NPF_V_INT, .as.i = a[0] }));
op_binint2:
        TAKE(2);
        NEXT(push(vm, (npf_value_t) { .kind = NPF_V_INT, .as.i = (int64_t) npf__pickle_le(a, 2) }));
op_long: { /* LONG1, LONG4 */
        TAKE(op == 0x8a ? 1 : 4);
        int64_t n = op == 0x8a ? (int64_t) a[0] : (int64_t) (int32_t) (uint32_t) npf__pickle_le(a, 4);
        if (n < 0)
                return npf__pickle_fail(vm, -EINVAL, "LONG4 with a negative length");
        TAKE((uint64_t) n);
        NEXT(push(vm, npf__pickle_long_value(a, (uint64_t) n)));
}
op_text_int: /* INT, LONG */
        if (!(a = take_line(vm, &len)))
                return truncated(vm);
        NEXT(text_int(vm, a, len, op == 'L'));
op_text_float:
        if (!(a = take_line(vm, &len)))
                return truncated(vm);
        NEXT(text_float(vm, a, len));
op_binfloat: /* big-endian */
        TAKE(8);
        NEXT(push(vm, npf__pickle_binfloat(a)));
op_string: /* STRING */
        if (!(a = take_line(vm, &len)))
                return truncated(vm);
        NEXT(text_string(vm, a, len));
op_unicode: /* UNICODE */
        if (!(a = take_line(vm, &len)))
                return truncated(vm);
        NEXT(text_unicode(vm, a, len));
op_short_bytes: /* SHORT_BINSTRING, SHORT_BINUNICODE, SHORT_BINBYTES */
        TAKE(1);
        NEXT(push_bytes(vm, op == 'C' ? NPF_V_BYTES : NPF_V_STR, a[0]));
op_bytes4: /* BINSTRING, BINUNICODE, BINBYTES */
        TAKE(4);
        if (op == 'T' && (int32_t) (uint32_t) npf__pickle_le(a, 4) < 0)
                return npf__pickle_fail(vm, -EINVAL, "BINSTRING with a negative length");
        NEXT(push_bytes(vm, op == 'B' ? NPF_V_BYTES : NPF_V_STR, npf__pickle_le(a, 4)));
op_bytes8: /* BINUNICODE8, BINBYTES8, BYTEARRAY8 */
        TAKE(8);
        NEXT(push_bytes(vm, op == 0x8d ? NPF_V_STR : NPF_V_BYTES, npf__pickle_le(a, 8)));
op_empty: /* EMPTY_LIST, EMPTY_TUPLE, EMPTY_DICT, EMPTY_SET */
        NEXT(push_container(vm, op == ']' ? NPF_V_LIST : op == ')' ? NPF_V_TUPLE : op == '}' ? NPF_V_DICT
                                                                                       : NPF_V_SET));
op_append:
        if ((r = need(vm, 2)) < 0)
                return r;
        NEXT(add_to_container(vm, vm->sp - 1, NPF_V_LIST, NPF_V_LIST, false));
op_setitem:
        if ((r = need(vm, 3)) < 0)
                return r;
        NEXT(add_to_container(vm, vm->sp - 2, NPF_V_DICT, NPF_V_DICT, true));
op_add_marked: /* APPENDS, SETITEMS, ADDITEMS */
        if ((r = pop_mark(vm, &from)) < 0)
                return r;
        if (op == 'e')
                NEXT(add_to_container(vm, from, NPF_V_LIST, NPF_V_LIST, false));
        if (op == 'u')
                NEXT(add_to_container(vm, from, NPF_V_DICT, NPF_V_DICT, true));
        NEXT(add_to_container(vm, from, NPF_V_SET, NPF_V_SET, false));
op_build_marked: /* LIST, TUPLE, DICT, FROZENSET */
        if ((r = pop_mark(vm, &from)) < 0)
                return r;
        NEXT(build(vm, from, op == 'l' ? NPF_V_LIST : op == 't' ? NPF_V_TUPLE : op == 'd' ? NPF_V_DICT
                                                                                     : NPF_V_SET));
op_tuple_n: /* TUPLE1, TUPLE2, TUPLE3 */
        if ((r = need(vm, (size_t) (op - 0x84))) < 0)
                return r;
        NEXT(build(vm, vm->sp - (size_t) (op - 0x84), NPF_V_TUPLE));
op_get: { /* BINGET, LONG_BINGET */
        /* Runs of memo reads (a stack's frames, a dict's keys) are read in a loop, the cursor in
         * a register and the width of each index chosen without a branch: which of the two
         * comes next follows the data. */
        const uint8_t *p = vm->p;
        for (;;) {
                bool wide = op == 'j';
                uint64_t idx;
                if (end - p >= 4) {
                        uint64_t w = npf__pickle_le(p, 4);
                        idx = wide ? w : w & 0xffu;
                        p += wide ? 4 : 1;
                } else {
                        vm->p = p;
                        TAKE(wide ? 4 : 1);
                        p = vm->p;
                        idx = npf__pickle_le(a, wide ? 4 : 1);
                }
                if ((r = memo_get(vm, idx)) < 0)
                        return r;
                if (p >= progress_at || (*p != 'h' && *p != 'j'))
                        break;
                vm->op = p;
                op = *p++;
        }
        vm->p = p;
        DISPATCH();
}
op_binput:
        TAKE(1);
        NEXT(memo_put(vm, a[0]));
op_long_binput:
        TAKE(4);
        NEXT(memo_put(vm, npf__pickle_le(a, 4)));
op_memoize:
        NEXT(memo_put(vm, npf_vtree_memo_len(vm->tree)));
op_text_memo: /* GET, PUT */
        NEXT(text_memo(vm, op == 'p'));
op_refused:
        return refuse(vm, op);
#undef TAKE
#undef NEXT
#undef DISPATCH
}

int npf_pickle_load(const void *buf, size_t len, npf_vtree_t *tree, unsigned flags, npf_input_progress_cb progress,
                    void *userdata, npf_value_t *ret, char *err)
{
        return npf_pickle_load_direct(buf, len, tree, flags, NULL, progress, userdata, ret, err);
}

int npf_pickle_load_direct(const void *buf, size_t len, npf_vtree_t *tree, unsigned flags,
                           const npf_pickle_direct_t *direct, npf_input_progress_cb progress, void *userdata,
                           npf_value_t *ret, char *err)
{
        vm_t vm = { .base = buf, .p = buf, .end = (const uint8_t *) buf + len, .tree = tree, .err = err,
                    .batches = !(flags & NPF_PICKLE_OPCODES_ONLY),
                    .direct = flags & NPF_PICKLE_NO_DIRECT ? NULL : direct };
        npf_value_t root;
        int r;

        err[0] = '\0';
        /* The stack exists from the start: a MARK then LIST on an empty stack is an empty list. */
        if (!(vm.stack = malloc(256 * sizeof(*vm.stack))))
                return -ENOMEM;
        vm.stack_cap = 256;
        r = run(&vm, progress, userdata);
        /* run() has waited for the lane on every way out; this ends its thread. */
        npf_lane_free(vm.lane);
        if (r == 0) {
                root = vm.stack[0];
                r = npf_vtree_finish(tree, &root, err, NPF_PICKLE_ERR_MAX);
        }
        free(vm.stack);
        free(vm.marks);
        npf__pickle_batch_free(vm.batch[0]);
        npf__pickle_batch_free(vm.batch[1]);
        if (r < 0)
                return r;
        *ret = root;
        return 0;
}
