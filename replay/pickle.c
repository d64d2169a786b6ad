/* SPDX-License-Identifier: MIT */
/* The data-only pickle machine: a stack, marks and the tree's memo; nothing is executed. */
#include "replay/pickle.h"
#include "replay/beside.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct vm {
        const uint8_t *base, *p, *end;
        const uint8_t *op;                      /* the opcode being run */
        npf_vtree_t *tree;
        npf_value_t *stack;
        size_t sp, stack_cap;
        size_t *marks;
        size_t n_marks, marks_cap;
        int proto;
        char *err;
        bool batches;                           /* the batch fast path is taken */
        struct batch *batch[2];                 /* its buffers, made on first use: one read, */
        struct batch *building;                 /* the other built on the lane, or NULL */
        npf_lane_t *lane;
        bool lane_tried;
} vm_t;

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

static int fail(vm_t *vm, int r, const char *fmt, ...)
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
        return fail(vm, -EINVAL, "opcode 0x%02x runs past the end of the input (%zu bytes): truncated pickle",
                    *vm->op, (size_t) (vm->end - vm->base));
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

static inline uint64_t load64(const uint8_t *p)
{
        uint64_t v;

        memcpy(&v, p, sizeof(v));
        return v;
}

/* An unsigned integer of @n (at most 8) little-endian bytes. */
static inline uint64_t le(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        uint32_t w;

        if (n == 8)
                return le64toh(load64(p));
        if (n == 4) {
                memcpy(&w, p, sizeof(w));
                return le32toh(w);
        }
        for (unsigned i = n; i-- > 0;)
                v = v << 8 | p[i];
        return v;
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
                return fail(vm, -E2BIG, "more than %u values on the stack", NPF_PICKLE_STACK_MAX);
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
                return fail(vm, -EINVAL, "opcode 0x%02x needs a MARK and there is none", *vm->op);
        *ret = vm->marks[--vm->n_marks];
        return 0;
}

static int need(vm_t *vm, size_t n)
{
        size_t floor = vm->n_marks ? vm->marks[vm->n_marks - 1] : 0;

        if (vm->sp - floor < n)
                return fail(vm, -EINVAL, "opcode 0x%02x needs %zu value(s) on the stack and finds %zu", *vm->op,
                            n, vm->sp - floor);
        return 0;
}

static int append(vm_t *vm, npf_value_t c, npf_value_t *items, size_t n)
{
        int r = npf_vtree_append(vm->tree, c, items, n, vm->err, NPF_PICKLE_ERR_MAX);

        if (r == -ENOMEM)
                return fail(vm, r, "out of memory");
        if (r == -E2BIG)
                return fail(vm, r, "a container of more than 4294967295 items");
        return r;
}

/* APPEND(S), SETITEM(S), ADDITEMS: the values from @from on go into the container below. */
static int add_to_container(vm_t *vm, size_t from, npf_vkind_t k1, npf_vkind_t k2, bool pairs)
{
        npf_value_t c;
        size_t n = vm->sp - from;
        int r;

        if (from == 0)
                return fail(vm, -EINVAL, "opcode 0x%02x finds no container to add to", *vm->op);
        c = npf_value_resolve(vm->stack[from - 1]);
        if (c.kind != k1 && c.kind != k2)
                return fail(vm, -EINVAL, "opcode 0x%02x adds to a %s", *vm->op, npf_value_kind_name(c));
        if (pairs && n % 2)
                return fail(vm, -EINVAL, "opcode 0x%02x finds a key without a value", *vm->op);
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
                return fail(vm, -EINVAL, "opcode 0x%02x finds a key without a value", *vm->op);
        if ((r = npf_vtree_container(vm->tree, kind, &c)) < 0 || (r = append(vm, c, vm->stack + from, n)) < 0)
                return r == -ENOMEM ? fail(vm, r, "out of memory") : r;
        vm->sp = from;
        return push(vm, c);
}

static int push_container(vm_t *vm, npf_vkind_t kind)
{
        npf_value_t c;

        if (npf_vtree_container(vm->tree, kind, &c) < 0)
                return fail(vm, -ENOMEM, "out of memory");
        return push(vm, c);
}

/* The 8 big-endian bytes of BINFLOAT at @p. */
static npf_value_t binfloat_value(const uint8_t *p)
{
        npf_value_t v = { .kind = NPF_V_FLOAT };
        uint64_t u = be64toh(load64(p));

        memcpy(&v.as.f, &u, sizeof(v.as.f));
        return v;
}

/* An integer of @n little-endian two's-complement bytes (LONG1, LONG4). */
static npf_value_t long_value(const uint8_t *p, uint64_t n)
{
        npf_value_t v = { .kind = NPF_V_INT };
        bool negative = n > 0 && (p[n - 1] & 0x80);

        if (n == 0)
                return v;
        if (n <= 8) {
                uint64_t u = le(p, (unsigned) n);
                if (negative && n < 8)
                        u |= ~UINT64_C(0) << (8 * n);
                v.as.i = (int64_t) u;
                return v;
        }
        /* Wider: it fits if every byte above the eighth is a sign extension. */
        uint8_t ext = negative ? 0xff : 0x00;
        for (uint64_t i = 8; i < n; i++) {
                if (p[i] != ext) {
                        v.flags = NPF_VF_HUGE;
                        v.as.i = negative ? -1 : 1;
                        return v;
                }
        }
        v.as.u = le(p, 8);
        if (!negative && (v.as.u >> 63))
                v.flags = NPF_VF_UNSIGNED;
        else if (negative && !(v.as.u >> 63)) {
                v.flags = NPF_VF_HUGE;
                v.as.i = -1;
        }
        return v;
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
                return fail(vm, -EINVAL, "opcode 0x%02x has an empty integer", *vm->op);
        for (size_t i = sign; i < len; i++)
                if (s[i] < '0' || s[i] > '9')
                        return fail(vm, -EINVAL, "opcode 0x%02x has \"%.*s\", not an integer", *vm->op,
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
                return fail(vm, -EINVAL, "opcode FLOAT has a number of %zu characters", len);
        memcpy(buf, s, len);
        buf[len] = '\0';
        double f = strtod(buf, &endp);
        if (*endp != '\0')
                return fail(vm, -EINVAL, "opcode FLOAT has \"%s\", not a number", buf);
        return push(vm, (npf_value_t) { .kind = NPF_V_FLOAT, .as.f = f });
}

static int push_bytes(vm_t *vm, npf_vkind_t kind, uint64_t len)
{
        const uint8_t *s;

        if (len > UINT32_MAX)
                return fail(vm, -E2BIG, "a string of %" PRIu64 " bytes (at most 4294967295)", len);
        if (!(s = take(vm, len)))
                return truncated(vm);
        return push(vm, (npf_value_t) { .kind = (uint8_t) kind, .len = (uint32_t) len, .as.s = (const char *) s });
}

/* STRING (protocol 0): a quoted Python 2 str; escapes are not decoded and are refused. */
static int text_string(vm_t *vm, const uint8_t *s, size_t len)
{
        if (len < 2 || (s[0] != '\'' && s[0] != '"') || s[len - 1] != s[0])
                return fail(vm, -EINVAL, "opcode STRING has an unquoted argument");
        if (memchr(s, '\\', len))
                return fail(vm, -EINVAL, "opcode STRING has escapes, which this reader does not decode");
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
                return fail(vm, -ENOMEM, "out of memory");
        for (size_t i = 0; i < len; i++) {
                uint32_t cp = s[i];
                if (s[i] == '\\' && i + 1 < len && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
                        unsigned digits = s[i + 1] == 'u' ? 4 : 8;
                        if (i + 2 + digits > len) {
                                free(out);
                                return fail(vm, -EINVAL, "opcode UNICODE has a truncated escape");
                        }
                        cp = 0;
                        for (unsigned d = 0; d < digits; d++) {
                                uint8_t c = s[i + 2 + d];
                                int x = c >= '0' && c <= '9' ? c - '0'
                                        : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
                                if (x < 0) {
                                        free(out);
                                        return fail(vm, -EINVAL, "opcode UNICODE has a bad escape");
                                }
                                cp = cp << 4 | (uint32_t) x;
                        }
                        if (cp > 0x10ffff) {
                                free(out);
                                return fail(vm, -EINVAL, "opcode UNICODE has an escape beyond U+10FFFF");
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
                return fail(vm, r, "out of memory");
        return push(vm, v);
}

static int memo_put(vm_t *vm, uint64_t idx)
{
        int r;

        if (vm->sp == 0)
                return fail(vm, -EINVAL, "opcode 0x%02x memoizes an empty stack", *vm->op);
        if (idx >= NPF_PICKLE_MEMO_MAX)
                return fail(vm, -E2BIG, "memo index %" PRIu64 " (at most %u)", idx, NPF_PICKLE_MEMO_MAX - 1);
        /* The memo is an array: an index far beyond the opcodes the input holds is refused,
         * not allocated. Python's own pickler numbers its slots from 0. */
        if (idx > (uint64_t) (vm->end - vm->base))
                return fail(vm, -EINVAL, "memo index %" PRIu64 " is larger than the input (%zu bytes)", idx,
                            (size_t) (vm->end - vm->base));
        if ((r = npf_vtree_memo_put(vm->tree, idx, vm->stack[vm->sp - 1])) < 0)
                return fail(vm, r, "out of memory");
        return 0;
}

static inline int memo_get(vm_t *vm, uint64_t idx)
{
        npf_value_t v;

        if (npf_vtree_memo_get(vm->tree, idx, &v) < 0)
                return fail(vm, -EINVAL, "opcode 0x%02x reads memo slot %" PRIu64 ", which was never set", *vm->op,
                            idx);
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
                return fail(vm, -EINVAL, "opcode 0x%02x has a bad memo index", *vm->op);
        memcpy(buf, s, len);
        buf[len] = '\0';
        unsigned long long idx = strtoull(buf, &endp, 10);
        if (*endp != '\0' || buf[0] == '-')
                return fail(vm, -EINVAL, "opcode 0x%02x has a bad memo index", *vm->op);
        return put ? memo_put(vm, idx) : memo_get(vm, idx);
}

static int mark(vm_t *vm)
{
        if (vm->n_marks == NPF_PICKLE_DEPTH_MAX)
                return fail(vm, -E2BIG, "more than %u open marks", NPF_PICKLE_DEPTH_MAX);
        if (vm->n_marks == vm->marks_cap) {
                size_t cap = vm->marks_cap ? vm->marks_cap * 2 : 64;
                size_t *m = realloc(vm->marks, cap * sizeof(*m));
                if (!m)
                        return fail(vm, -ENOMEM, "out of memory");
                vm->marks = m;
                vm->marks_cap = cap;
        }
        vm->marks[vm->n_marks++] = vm->sp;
        return 0;
}

/*
 * The batch fast path. Python writes a list of dicts (a device's trace entries, a segment's
 * blocks) in batches of up to 1,000:
 *     MARK (EMPTY_DICT MEMOIZE MARK (key value)* SETITEMS)* APPENDS
 * the keys strings, the values numbers, strings or lists (a stack of frames), the lists'
 * items memo references or flat dicts (the frames themselves). Such a batch is read here in
 * one loop, and what it holds is handed to the reduce callback from there instead of being
 * pushed value by value and built in the tree first.
 *
 * The result is the one of the opcodes run one by one: the callback is offered the same
 * containers with the same items in the same order (an entry's frames as its lists' APPENDS
 * completes them, then its lists as its SETITEMS does, then the entries as the batch's
 * APPENDS places them), and the memo ends the same. Reading first and building after is
 * exact because nothing read depends on what is built: a memo reference to a string the
 * batch memoized is served from the batch; one to a frame or a stack it read becomes an
 * alias of what that becomes, built before anything that holds the alias, as the opcodes
 * have it; anything else the batch does not know leaves it to the opcodes, before anything
 * is done.
 *
 * A batch is built on a lane (beside.h) while the reader reads the next one, and the two
 * share the tree so: the lane alone uses the tree's allocator and reduce callback, and
 * writes the memo only above the slots set before the batch it builds (in room reserved
 * beforehand: the memo does not move); the reader reads the memo only below them, and takes
 * what the batch being built memoized from that batch (a string at once, a container once
 * it is built). Before an opcode runs one by one, the reader waits for the lane.
 */
#define BATCH_SLOTS_MAX (1u << 20)      /* memo slots one batch may set */
#define BATCH_VALUES_MAX (1u << 22)     /* values, dicts or lists one batch may hold */
#define BATCH_GROUPS_MAX 8u             /* Python's batches read before the lane builds them */
#define BATCH_CONTAINER ((uint8_t) 0xfe) /* the kind of a slot the batch sets to a container */
#define BATCH_ALIAS ((uint8_t) 0xfd)    /* a list item that is one of the batch's containers */
#define BATCH_DEFERRED ((uint8_t) 0xfc) /* a container of the batch still being built, by its slot */

enum batch_ref { REF_VALUE, REF_ENTRY, REF_DICT, REF_LIST };

/* Where a memo get is: which of the batch's containers it may refer to (see batch_get()). */
enum batch_at { AT_KEY, AT_ENTRY_VALUE, AT_ITEM };

/* A memo put of the batch, made when it is built: the value, or where it will be. */
struct batch_put {
        uint64_t slot;
        uint32_t ref;           /* enum batch_ref */
        uint32_t index;         /* into entries, dicts or lists */
        npf_value_t value;      /* REF_VALUE */
};

/* A dict of the batch (an entry) or of one of its lists (a frame). */
struct batch_dict {
        uint32_t first, n;              /* its pairs: pairs[first .. first + 2n), of a frame fpairs[] */
        uint32_t at;                    /* a frame: its place in items[] */
        uint32_t first_list, n_lists;   /* an entry: its lists */
        uint32_t first_dict, n_dicts;   /* and its frames */
};

struct batch_list {
        uint32_t first, n;              /* its items: items[first .. first + n) */
        uint32_t at;                    /* its place in pairs[] */
};

typedef struct batch {
        npf_value_t *pairs;             /* the entries' keys and values */
        npf_value_t *fpairs;            /* the frames' */
        npf_value_t *items;             /* the lists' */
        npf_value_t *done;              /* what each entry became */
        npf_value_t *local;             /* the slots the batch puts, from first_slot: a string, or
                                         * a BATCH_CONTAINER: rkind the enum batch_ref, as.u which */
        struct batch_dict *entries, *dicts;
        struct batch_list *lists;
        struct batch_put *puts;
        size_t n_pairs, n_fpairs, n_items, n_local, n_entries, n_dicts, n_lists, n_puts;
        size_t cap_pairs, cap_fpairs, cap_items, cap_done, cap_local, cap_entries, cap_dicts, cap_lists, cap_puts;
        uint64_t first_slot;            /* the memo's length when the batch began */
        uint64_t memo_len;              /* and as the batch's puts leave it */
        uint64_t old_slots;             /* slots below are in the tree's memo, and the lane does not
                                         * write them while this batch is read */
        const npf_value_t *memo;        /* the tree's memo, which does not move while the batch is read */
        size_t n_deferred;              /* gets of what the batch before builds */
        struct batch_group {            /* MARK ... APPENDS: Python's batches of 1,000 */
                size_t end;             /* n_entries after it */
                size_t appends;         /* the offset of its APPENDS, for messages */
        } groups[BATCH_GROUPS_MAX];
        size_t n_groups;
        /* Handed to the lane: */
        npf_vtree_t *tree;
        npf_value_t list;               /* what the APPENDS add to */
        size_t at;                      /* the APPENDS being built */
        int rc;
        char err[NPF_PICKLE_ERR_MAX];
} batch_t;

/* How far a batch has been read: where a group that cannot be read is undone to. */
typedef struct batch_mark {
        size_t n_pairs, n_fpairs, n_items, n_local, n_entries, n_dicts, n_lists, n_puts;
        uint64_t memo_len;
} batch_mark_t;

static batch_mark_t batch_mark(const batch_t *b)
{
        return (batch_mark_t) { b->n_pairs, b->n_fpairs, b->n_items, b->n_local, b->n_entries, b->n_dicts,
                                b->n_lists, b->n_puts, b->memo_len };
}

static void batch_undo(batch_t *b, const batch_mark_t *m)
{
        b->n_pairs = m->n_pairs;
        b->n_fpairs = m->n_fpairs;
        b->n_items = m->n_items;
        b->n_local = m->n_local;
        b->n_entries = m->n_entries;
        b->n_dicts = m->n_dicts;
        b->n_lists = m->n_lists;
        b->n_puts = m->n_puts;
        b->memo_len = m->memo_len;
}

/* At @p, a MARK that opens a group: a dict (or a FRAME before one) follows. */
static inline bool batch_begins(const vm_t *vm, const uint8_t *p)
{
        return vm->end - p >= 2 && p[0] == '(' && (p[1] == '}' || p[1] == 0x95);
}

static bool __attribute__((noinline)) batch_grow(void **array, size_t *cap, size_t n, size_t size)
{
        size_t want = *cap ? *cap : 256;

        if (n > BATCH_VALUES_MAX)
                return false;
        while (want < n)
                want *= 2;
        void *p = realloc(*array, want * size);
        if (!p)
                return false;   /* left to the opcodes, which will say it */
        *array = p;
        *cap = want;
        return true;
}

/* Room for @n elements of @size bytes in @*array. Return: false if there is none. */
static inline bool batch_room(void **array, size_t *cap, size_t n, size_t size)
{
        return n <= *cap || batch_grow(array, cap, n, size);
}

/* Room for one more element in array @what of @b. */
#define ROOM(b, what) batch_room((void **) &(b)->what, &(b)->cap_##what, (b)->n_##what + 1, sizeof(*(b)->what))

/* FRAME opcodes: Python's framer puts them before a value. Each is checked as the opcodes
 * would. Return: the input after them, or NULL to leave the batch. */
static inline const uint8_t *batch_frames(const vm_t *vm, const uint8_t *q)
{
        if (q < vm->end && *q != 0x95)
                return q;
        while (q < vm->end && *q == 0x95) {
                if (vm->end - q < 9 || le(q + 1, 8) > (uint64_t) (vm->end - q - 9))
                        return NULL;
                q += 9;
        }
        return q == vm->end ? NULL : q;
}

/* The memo index of the opcode at @q, if it is @op1 (a 1-byte index) or @op4 (4 bytes).
 * Return: the input after it, or NULL. */
static inline const uint8_t *memo_index(const vm_t *vm, const uint8_t *q, uint8_t op1, uint8_t op4, uint64_t *ret)
{
        if (*q == op1 && vm->end - q >= 2) {
                *ret = q[1];
                return q + 2;
        }
        if (*q == op4 && vm->end - q >= 5) {
                *ret = le(q + 1, 4);
                return q + 5;
        }
        return NULL;
}

/* A memo put at @q, if there is one (MEMOIZE, BINPUT, LONG_BINPUT), of the value @ref
 * @index (@value for REF_VALUE), as memo_put() would accept it. Return: the input after it
 * (@q when there is none), or NULL to leave the batch. */
static const uint8_t *batch_put(const vm_t *vm, batch_t *b, const uint8_t *q, enum batch_ref ref, size_t index,
                                npf_value_t value)
{
        const uint8_t *after;
        uint64_t slot;

        if (q == vm->end)
                return q;
        if (*q == 0x94) {
                slot = b->memo_len;
                q += 1;
        } else if ((after = memo_index(vm, q, 'q', 'r', &slot))) {
                q = after;
        } else {
                return q;
        }
        /* A slot past those set before the batch, and set once: only the batch reads it. */
        if (slot < b->first_slot || slot - b->first_slot < b->n_local || slot - b->first_slot >= BATCH_SLOTS_MAX ||
            slot >= NPF_PICKLE_MEMO_MAX || slot > (uint64_t) (vm->end - vm->base) || !ROOM(b, puts) ||
            !batch_room((void **) &b->local, &b->cap_local, slot - b->first_slot + 1, sizeof(*b->local)))
                return NULL;
        for (; b->n_local <= slot - b->first_slot; b->n_local++)
                b->local[b->n_local] = (npf_value_t) { .kind = NPF__MEMO_UNSET };
        b->local[slot - b->first_slot] = ref == REF_VALUE ? value
                                         : (npf_value_t) { .kind = BATCH_CONTAINER, .rkind = (uint16_t) ref, .as.u = index };
        b->puts[b->n_puts++] = (struct batch_put) { .slot = slot, .ref = ref, .index = (uint32_t) index,
                                                    .value = value };
        if (slot >= b->memo_len)
                b->memo_len = slot + 1;
        return q;
}

/*
 * A memo get (BINGET, LONG_BINGET) of a value set before the batch (a container only if it
 * is complete: nothing the batch does changes it), or of a string the batch memoized. As a
 * value of an entry or an item of a list (@at), also a frame the batch read, or a list of
 * the batch (of an earlier entry, for an item): a BATCH_ALIAS of it, because by the time the
 * opcodes complete the container that holds the get, they have completed what it refers to,
 * and so will batch_build(). A slot of the batch before, still being built, is served from
 * that batch: a string at once, a container as a BATCH_DEFERRED.
 * Return: the input after it, or NULL to leave the batch.
 */
static inline const uint8_t *batch_get(vm_t *vm, batch_t *b, const uint8_t *q, npf_value_t *ret,
                                       enum batch_at at)
{
        uint64_t slot;

        if (!(q = memo_index(vm, q, 'h', 'j', &slot)))
                return NULL;
        /* Nearly always: a key, a string or a frame set long before. The memo holds every slot
         * below old_slots (see batch_read()), and the lane writes only above them. */
        if (slot < b->old_slots) {
                const npf_value_t *m = &b->memo[slot];
                if (m->kind == NPF__MEMO_UNSET)
                        return NULL;
                if (!npf__value_is_container(*m)) {
                        *ret = *m;
                        return q;
                }
                /* A container only if complete: nothing built now changes it. The opcodes mark
                 * it shared when they get it; so does this, once it is taken. */
                *ret = npf_value_resolve(*m);
                if (npf__value_is_container(*ret) && !ret->as.c->complete)
                        return NULL;
                npf_vtree_share(*m);
                return q;
        }
        if (slot < b->first_slot) {
                /* Set by the batch before, whose memo puts are made when it is built: a string
                 * now, a container once it is (see batch_resolve()). */
                const batch_t *p = vm->building;
                if (slot - p->first_slot >= p->n_local || p->local[slot - p->first_slot].kind == NPF__MEMO_UNSET)
                        return NULL;
                *ret = p->local[slot - p->first_slot];
                if (ret->kind == BATCH_CONTAINER) {
                        *ret = (npf_value_t) { .kind = BATCH_DEFERRED, .as.u = slot };
                        b->n_deferred++;
                }
                return q;
        }
        if (slot - b->first_slot >= b->n_local)
                return NULL;
        *ret = b->local[slot - b->first_slot];
        if (ret->kind == NPF__MEMO_UNSET)
                return NULL;
        if (ret->kind != BATCH_CONTAINER)
                return q;
        if (at == AT_KEY || (ret->rkind != REF_DICT && (ret->rkind != REF_LIST ||
                                                        (at == AT_ITEM && ret->as.u >= b->entries[b->n_entries].first_list))))
                return NULL;
        ret->kind = BATCH_ALIAS;
        return q;
}

/* A number, None, a boolean, a string (and its memo put) or a memo get @at. Return: as batch_get(). */
static const uint8_t *batch_scalar(vm_t *vm, batch_t *b, const uint8_t *q, npf_value_t *ret, enum batch_at at)
{
        const uint8_t *end = vm->end;
        uint8_t op = *q++;
        uint64_t u;

        switch (op) {
        case 'h':
        case 'j':
                return batch_get(vm, b, q - 1, ret, at);
        case 'K':
                if (end - q < 1)
                        return NULL;
                *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = q[0] };
                return q + 1;
        case 'M':
                if (end - q < 2)
                        return NULL;
                *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = (int64_t) le(q, 2) };
                return q + 2;
        case 'J':
                if (end - q < 4)
                        return NULL;
                *ret = (npf_value_t) { .kind = NPF_V_INT, .as.i = (int32_t) (uint32_t) le(q, 4) };
                return q + 4;
        case 0x8a: /* LONG1 */
                if (end - q < 1 || end - q - 1 < q[0])
                        return NULL;
                *ret = long_value(q + 1, q[0]);
                return q + 1 + q[0];
        case 'G':
                if (end - q < 8)
                        return NULL;
                *ret = binfloat_value(q);
                return q + 8;
        case 'N':
                *ret = (npf_value_t) { .kind = NPF_V_NONE };
                return q;
        case 0x88:
        case 0x89:
                *ret = (npf_value_t) { .kind = NPF_V_BOOL, .as.i = op == 0x88 };
                return q;
        case 0x8c: /* SHORT_BINUNICODE */
        case 'X':  /* BINUNICODE */
                if (end - q < (op == 0x8c ? 1 : 4))
                        return NULL;
                u = op == 0x8c ? q[0] : le(q, 4);
                q += op == 0x8c ? 1 : 4;
                if (u > (uint64_t) (end - q) || u > UINT32_MAX)
                        return NULL;
                *ret = (npf_value_t) { .kind = NPF_V_STR, .len = (uint32_t) u, .as.s = (const char *) q };
                return batch_put(vm, b, q + u, REF_VALUE, 0, *ret);
        default:
                return NULL;
        }
}

/* A frame's key and value; @q at the key. Return: as batch_get(). */
static const uint8_t *batch_frame_pair(vm_t *vm, batch_t *b, const uint8_t *q)
{
        if (!batch_room((void **) &b->fpairs, &b->cap_fpairs, b->n_fpairs + 2, sizeof(*b->fpairs)) ||
            !(q = batch_scalar(vm, b, q, &b->fpairs[b->n_fpairs], AT_KEY)) || !(q = batch_frames(vm, q)))
                return NULL;
        b->n_fpairs += 2;
        return batch_scalar(vm, b, q, &b->fpairs[b->n_fpairs - 1], AT_KEY);
}

/* A frame: a dict of scalars in a list, @q at its EMPTY_DICT. Return: as batch_get(). */
static const uint8_t *batch_frame(vm_t *vm, batch_t *b, const uint8_t *q)
{
        struct batch_dict *d;

        if (!ROOM(b, dicts) || !ROOM(b, items))
                return NULL;
        d = &b->dicts[b->n_dicts];
        *d = (struct batch_dict) { .first = (uint32_t) b->n_fpairs, .at = (uint32_t) b->n_items };
        b->items[b->n_items++] = (npf_value_t) { .kind = NPF_V_DICT };    /* made when the batch is built */
        if (!(q = batch_put(vm, b, q + 1, REF_DICT, b->n_dicts, (npf_value_t) { 0 })) || q == vm->end || *q++ != '(')
                return NULL;
        while ((q = batch_frames(vm, q)) && *q != 'u')
                if (!(q = batch_frame_pair(vm, b, q)))
                        return NULL;
        if (!q)
                return NULL;
        d->n = (uint32_t) (b->n_fpairs - d->first) / 2;
        b->n_dicts++;
        return q + 1;
}

/* A list item: a memo get or a frame. Return: as batch_get(). */
static const uint8_t *batch_item(vm_t *vm, batch_t *b, const uint8_t *q)
{
        if (*q == '}')
                return batch_frame(vm, b, q);
        if (!ROOM(b, items) || !(q = batch_get(vm, b, q, &b->items[b->n_items], AT_ITEM)))
                return NULL;
        b->n_items++;
        return q;
}

/* A list, @q after its EMPTY_LIST: MARK items APPENDS, one item and APPEND, or nothing.
 * Return: as batch_get(). */
static const uint8_t *batch_list(vm_t *vm, batch_t *b, const uint8_t *q)
{
        struct batch_list *l;
        const uint8_t *r, *after;
        npf_value_t v;

        if (!ROOM(b, lists))
                return NULL;
        l = &b->lists[b->n_lists];
        *l = (struct batch_list) { .first = (uint32_t) b->n_items, .at = (uint32_t) b->n_pairs - 1 };
        if (!(q = batch_put(vm, b, q, REF_LIST, b->n_lists, (npf_value_t) { 0 })) || !(r = batch_frames(vm, q)))
                return NULL;
        if (*r == '(') {
                for (q = r + 1; (q = batch_frames(vm, q)) && *q != 'e';)
                        if (!(q = batch_item(vm, b, q)))
                                return NULL;
                if (!q)
                        return NULL;
                q++;
        } else if (*r == '}' || ((*r == 'h' || *r == 'j') && (after = batch_get(vm, b, r, &v, AT_ITEM)) && after < vm->end &&
                                 *after == 'a')) {
                if (!(q = batch_item(vm, b, r)) || q == vm->end || *q++ != 'a')
                        return NULL;
        }       /* else the empty list, and @q what follows it */
        l->n = (uint32_t) (b->n_items - l->first);
        b->n_lists++;
        return q;
}

/* An entry of the batch, @q at its EMPTY_DICT: MARK pairs SETITEMS or a pair and SETITEM,
 * a value a scalar or a list. Return: as batch_get(). */
static const uint8_t *batch_entry(vm_t *vm, batch_t *b, const uint8_t *q)
{
        struct batch_dict *e;
        bool single = false;            /* one pair and SETITEM, no MARK */

        if (!ROOM(b, entries))
                return NULL;
        e = &b->entries[b->n_entries];
        *e = (struct batch_dict) { .first = (uint32_t) b->n_pairs, .first_list = (uint32_t) b->n_lists,
                                   .first_dict = (uint32_t) b->n_dicts };
        if (!(q = batch_put(vm, b, q + 1, REF_ENTRY, b->n_entries, (npf_value_t) { 0 })) || !(q = batch_frames(vm, q)))
                return NULL;
        if (*q == '(')
                q++;
        else
                single = true;
        while ((q = batch_frames(vm, q)) && *q != (single ? 's' : 'u')) {
                if (single && b->n_pairs > e->first)
                        return NULL;
                if (!batch_room((void **) &b->pairs, &b->cap_pairs, b->n_pairs + 2, sizeof(*b->pairs)) ||
                    !(q = batch_scalar(vm, b, q, &b->pairs[b->n_pairs], AT_KEY)) || !(q = batch_frames(vm, q)))
                        return NULL;
                b->n_pairs += 2;
                if (*q == ']') {
                        b->pairs[b->n_pairs - 1] = (npf_value_t) { .kind = NPF_V_LIST };  /* made when built */
                        q = batch_list(vm, b, q + 1);
                } else {
                        q = batch_scalar(vm, b, q, &b->pairs[b->n_pairs - 1], AT_ENTRY_VALUE);
                }
                if (!q)
                        return NULL;
        }
        if (!q || (single && b->n_pairs == e->first))
                return NULL;
        e->n = (uint32_t) (b->n_pairs - e->first) / 2;
        e->n_lists = (uint32_t) (b->n_lists - e->first_list);
        e->n_dicts = (uint32_t) (b->n_dicts - e->first_dict);
        b->n_entries++;
        return q + 1;
}

/* An error of batch_build() as the opcodes word it: the tree's with the offset of APPENDS,
 * the reduce callback's as it is. */
static int batch_fail(batch_t *b, int r)
{
        if (r == -ENOMEM || r == -E2BIG)
                snprintf(b->err, sizeof(b->err), "offset %zu: %s", b->at,
                         r == -ENOMEM ? "out of memory" : "a container of more than 4294967295 items");
        return r;
}

static int batch_complete(batch_t *b, npf_vkind_t kind, npf_value_t *items, size_t n, npf_value_t *ret)
{
        int r = npf_vtree_complete_items(b->tree, kind, items, n, ret, b->err, sizeof(b->err));

        return r < 0 ? batch_fail(b, r) : 0;
}

/* The @n values at @v with every BATCH_ALIAS replaced by what it refers to, built by now. */
static void batch_unalias(const batch_t *b, npf_value_t *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (v[i].kind == BATCH_ALIAS)
                        v[i] = v[i].rkind == REF_DICT ? b->items[b->dicts[v[i].as.u].at] : b->pairs[b->lists[v[i].as.u].at];
}

/* @v + @i, where @v may be NULL for want of anything read into it (and @i then 0). */
static npf_value_t *batch_at(npf_value_t *v, size_t i)
{
        return v ? v + i : NULL;
}

/*
 * Makes what was read, in the order of the opcodes, and APPENDS it into the list; the memo
 * puts are batch_put_memo()'s. Both run on the lane while the reader reads the next batch:
 * they use the tree's allocator and its reduce callback, which nothing else does meanwhile,
 * and write nothing the reader reads (memo slots below the batch's, which the reserved room
 * keeps in place; the containers of earlier slots).
 */
static int batch_build(batch_t *b)
{
        size_t from = 0;
        int r;

        for (size_t g = 0; g < b->n_groups; from = b->groups[g++].end) {
                b->at = b->groups[g].appends;
                for (size_t k = from; k < b->groups[g].end; k++) {
                        struct batch_dict *e = &b->entries[k];
                        for (uint32_t i = e->first_dict; i < e->first_dict + e->n_dicts; i++)
                                if ((r = batch_complete(b, NPF_V_DICT, batch_at(b->fpairs, b->dicts[i].first),
                                                        2 * b->dicts[i].n, &b->items[b->dicts[i].at])) < 0)
                                        return r;
                        for (uint32_t i = e->first_list; i < e->first_list + e->n_lists; i++) {
                                npf_value_t *items = batch_at(b->items, b->lists[i].first);
                                batch_unalias(b, items, b->lists[i].n);
                                if ((r = batch_complete(b, NPF_V_LIST, items, b->lists[i].n,
                                                        &b->pairs[b->lists[i].at])) < 0)
                                        return r;
                        }
                }
                for (size_t k = from; k < b->groups[g].end; k++) {
                        npf_value_t *pairs = batch_at(b->pairs, b->entries[k].first);
                        batch_unalias(b, pairs, 2 * b->entries[k].n);
                        if ((r = batch_complete(b, NPF_V_DICT, pairs, 2 * b->entries[k].n, &b->done[k])) < 0)
                                return r;
                }
                r = npf_vtree_append(b->tree, b->list, b->done + from, b->groups[g].end - from, b->err,
                                     sizeof(b->err));
                if (r < 0)
                        return batch_fail(b, r);
        }
        return 0;
}

/* The memo puts of the built batch @b, in their order, into room reserved before. */
static int batch_put_memo(batch_t *b)
{
        for (size_t i = 0; i < b->n_puts; i++) {
                const struct batch_put *p = &b->puts[i];
                npf_value_t v = p->ref == REF_ENTRY ? b->done[p->index]
                                : p->ref == REF_DICT ? b->items[b->dicts[p->index].at]
                                : p->ref == REF_LIST ? b->pairs[b->lists[p->index].at] : p->value;
                int r = npf_vtree_memo_put(b->tree, p->slot, v);
                if (r < 0)
                        return batch_fail(b, r);
        }
        return 0;
}

static void batch_build_on_lane(void *arg)
{
        batch_t *b = arg;

        if ((b->rc = batch_build(b)) == 0)
                b->rc = batch_put_memo(b);
}

/* Waits for the batch on the lane, if any: the tree is then as if the opcodes had read
 * everything so far. Return: 0, or the batch's error. */
static int batch_drain(vm_t *vm)
{
        batch_t *b = vm->building;

        if (!b)
                return 0;
        npf_lane_wait(vm->lane);
        vm->building = NULL;
        if (b->rc < 0)
                memcpy(vm->err, b->err, NPF_PICKLE_ERR_MAX);
        return b->rc;
}

/* The BATCH_DEFERRED values of @b, from the memo now that the batch before is built.
 * Return: false if one is not what the batch may hold (it is then left to the opcodes). */
static bool batch_resolve(vm_t *vm, batch_t *b)
{
        npf_value_t *arrays[] = { b->pairs, b->fpairs, b->items };
        size_t counts[] = { b->n_pairs, b->n_fpairs, b->n_items };

        for (size_t a = 0; a < 3; a++)
                for (size_t i = 0; i < counts[a]; i++) {
                        npf_value_t *v = &arrays[a][i];
                        if (v->kind == BATCH_DEFERRED &&
                            (npf_vtree_memo_get(vm->tree, v->as.u, v) < 0 ||
                             (npf__value_is_container(*v) && !v->as.c->complete)))
                                return false;
                }
        return true;
}

/* @vm->p is just after a MARK: reads the groups that follow, as many as there are (up to
 * BATCH_GROUPS_MAX), and hands them to the lane. Return: 1 when it did, 0 to leave the
 * MARK to the opcodes, or a negative errno. */
static int batch_read(vm_t *vm)
{
        batch_t **slot = &vm->batch[vm->building == vm->batch[0]];     /* the one not being built */
        batch_t *b = *slot;
        const uint8_t *q = vm->p, *after = NULL;
        npf_value_t list;
        int r;

        /* Into a list still being built, with room for the marks the opcodes would open. */
        if (vm->sp == 0 || vm->n_marks + 4 > NPF_PICKLE_DEPTH_MAX)
                return 0;
        list = vm->stack[vm->sp - 1];
        if (list.kind != NPF_V_LIST || list.as.c->reduced)
                return 0;
        if (!b && !(b = *slot = calloc(1, sizeof(*b))))
                return 0;
        b->first_slot = b->memo_len = vm->building ? vm->building->memo_len : npf_vtree_memo_len(vm->tree);
        batch_undo(b, &(batch_mark_t) { .memo_len = b->memo_len });      /* empty */
        b->n_deferred = b->n_groups = 0;
        b->old_slots = vm->building ? vm->building->first_slot : b->first_slot;
        b->memo = vm->tree->memo;
        for (;;) {
                batch_mark_t m = batch_mark(b);
                while ((q = batch_frames(vm, q)) && *q == '}')
                        if (!(q = batch_entry(vm, b, q)))
                                break;
                /* The stack the opcodes would need is at most what the batch holds. */
                if (!q || *q != 'e' || b->n_entries == m.n_entries ||
                    vm->sp + b->n_entries + b->n_pairs + b->n_fpairs + b->n_items > NPF_PICKLE_STACK_MAX ||
                    !batch_room((void **) &b->done, &b->cap_done, b->n_entries, sizeof(*b->done))) {
                        batch_undo(b, &m);
                        break;
                }
                b->groups[b->n_groups++] = (struct batch_group) { .end = b->n_entries, .appends = (size_t) (q - vm->base) };
                after = ++q;
                if (b->n_groups == BATCH_GROUPS_MAX || !batch_begins(vm, q))
                        break;
                q++;
        }
        if (b->n_groups == 0)
                return 0;
        if ((r = batch_drain(vm)) < 0)
                return r;
        if (b->n_deferred && !batch_resolve(vm, b))
                return 0;
        if ((r = npf_vtree_memo_reserve(vm->tree, b->memo_len)) < 0)
                return fail(vm, r, r == -ENOMEM ? "out of memory" : "too many memo slots");
        if (!vm->lane_tried) {
                vm->lane = npf_lane_new();
                vm->lane_tried = true;
        }
        b->tree = vm->tree;
        b->list = list;
        vm->building = b;
        npf_lane_run(vm->lane, batch_build_on_lane, b);
        vm->p = after;
        return 1;
}

/* The batch fast path at a MARK: a batch read and handed to the lane, and while the next
 * opcodes begin another batch, no waiting for it. Anything else waits: the opcodes use the
 * tree. Return: as batch_read(). */
static int batch_of_dicts(vm_t *vm)
{
        int r = batch_read(vm);
        const uint8_t *p = vm->p;

        if (r == 1 && batch_begins(vm, p))
                return 1;
        int d = batch_drain(vm);
        return d < 0 ? d : r;
}

static void batch_free(batch_t *b)
{
        if (!b)
                return;
        free(b->pairs);
        free(b->fpairs);
        free(b->items);
        free(b->done);
        free(b->local);
        free(b->entries);
        free(b->dicts);
        free(b->lists);
        free(b->puts);
        free(b);
}

static int refuse(vm_t *vm, uint8_t op)
{
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
                if (refused[i].op == op)
                        return fail(vm, -EPERM, "opcode %s (0x%02x) would %s; refused", refused[i].name, op,
                                    refused[i].does);
        return fail(vm, -EINVAL, "unknown opcode 0x%02x: not a pickle, or a newer one", op);
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
                return fail(vm, -EINVAL, "the input ends before STOP: truncated pickle");
        }
        if (progress && (size_t) (vm->p - vm->base) >= next_progress) {
                /* Never beside the reduce callback, nor past an error of a batch's. */
                if ((r = batch_drain(vm)) < 0)
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
                return fail(vm, -EINVAL, "pickle protocol %u is newer than 5, the newest this reader knows", *a);
        vm->proto = *a;
        DISPATCH();
op_frame: /* a length hint for buffering; it must not promise more than is there */
        TAKE(8);
        if (le(a, 8) > (uint64_t) (vm->end - vm->p))
                return fail(vm, -EINVAL, "FRAME of %" PRIu64 " bytes, only %zu left: truncated pickle", le(a, 8),
                            (size_t) (vm->end - vm->p));
        DISPATCH();
op_stop:
        if (vm->sp != 1 || vm->n_marks)
                return fail(vm, -EINVAL, "STOP with %zu values and %zu marks on the stack (expected one value)",
                            vm->sp, vm->n_marks);
        return 0;
op_mark:
        if (vm->batches && batch_begins(vm, vm->p - 1) && (r = batch_of_dicts(vm)) != 0) {
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
        NEXT(push(vm, (npf_value_t) { .kind = NPF_V_INT, .as.i = (int32_t) (uint32_t) le(a, 4) }));
op_binint1:
        TAKE(1);
        NEXT(push(vm, (npf_value_t) { .kind = NPF_V_INT, .as.i = a[0] }));
op_binint2:
        TAKE(2);
        NEXT(push(vm, (npf_value_t) { .kind = NPF_V_INT, .as.i = (int64_t) le(a, 2) }));
op_long: { /* LONG1, LONG4 */
        TAKE(op == 0x8a ? 1 : 4);
        int64_t n = op == 0x8a ? (int64_t) a[0] : (int64_t) (int32_t) (uint32_t) le(a, 4);
        if (n < 0)
                return fail(vm, -EINVAL, "LONG4 with a negative length");
        TAKE((uint64_t) n);
        NEXT(push(vm, long_value(a, (uint64_t) n)));
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
        NEXT(push(vm, binfloat_value(a)));
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
        if (op == 'T' && (int32_t) (uint32_t) le(a, 4) < 0)
                return fail(vm, -EINVAL, "BINSTRING with a negative length");
        NEXT(push_bytes(vm, op == 'B' ? NPF_V_BYTES : NPF_V_STR, le(a, 4)));
op_bytes8: /* BINUNICODE8, BINBYTES8, BYTEARRAY8 */
        TAKE(8);
        NEXT(push_bytes(vm, op == 0x8d ? NPF_V_STR : NPF_V_BYTES, le(a, 8)));
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
                        uint64_t w = le(p, 4);
                        idx = wide ? w : w & 0xffu;
                        p += wide ? 4 : 1;
                } else {
                        vm->p = p;
                        TAKE(wide ? 4 : 1);
                        p = vm->p;
                        idx = le(a, wide ? 4 : 1);
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
        NEXT(memo_put(vm, le(a, 4)));
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
        vm_t vm = { .base = buf, .p = buf, .end = (const uint8_t *) buf + len, .tree = tree, .err = err,
                    .batches = !(flags & NPF_PICKLE_OPCODES_ONLY) };
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
        batch_free(vm.batch[0]);
        batch_free(vm.batch[1]);
        if (r < 0)
                return r;
        *ret = root;
        return 0;
}
