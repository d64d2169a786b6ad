/* SPDX-License-Identifier: MIT */
/*
 * The db export's tables into a device timeline (device-db.h). No query joins on a key that
 * might repeat, so a hostile file cannot make a join multiply its rows: strings and enums are
 * read whole into sorted maps, and the lookups SQLite does (compute tasks and launches by id)
 * join the table itself only where the key is its rowid, else a derived table grouped by it.
 * Every value is checked for its type and range as it is read (col_int() and its callers).
 */
#include "lib/array.h"
#include "replay/device-db.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* The longest value SQLite hands back: a row over it is an error, not an allocation. */
#define VALUE_MAX (16 << 20)

/* The tables, as torch_npu names them (prof_common_func/_constant.py, DbConstant). */
enum {
        T_TASK,
        T_COMPUTE_TASK_INFO,
        T_CANN_API,
        T_COMMUNICATION_OP,
        T_COMMUNICATION_TASK_INFO,
        T_STEP_TIME,
        T_STRING_IDS,
        T_RANK_DEVICE_MAP,
        T_ENUM_HCCL_TRANSPORT_TYPE,
        T_ENUM_HCCL_LINK_TYPE,
        T_ENUM_HCCL_RDMA_TYPE,
        T_PYTORCH_API,
        T_COUNT
};

static const char *const table_names[T_COUNT] = {
        [T_TASK] = "TASK",
        [T_COMPUTE_TASK_INFO] = "COMPUTE_TASK_INFO",
        [T_CANN_API] = "CANN_API",
        [T_COMMUNICATION_OP] = "COMMUNICATION_OP",
        [T_COMMUNICATION_TASK_INFO] = "COMMUNICATION_TASK_INFO",
        [T_STEP_TIME] = "STEP_TIME",
        [T_STRING_IDS] = "STRING_IDS",
        [T_RANK_DEVICE_MAP] = "RANK_DEVICE_MAP",
        [T_ENUM_HCCL_TRANSPORT_TYPE] = "ENUM_HCCL_TRANSPORT_TYPE",
        [T_ENUM_HCCL_LINK_TYPE] = "ENUM_HCCL_LINK_TYPE",
        [T_ENUM_HCCL_RDMA_TYPE] = "ENUM_HCCL_RDMA_TYPE",
        [T_PYTORCH_API] = "PYTORCH_API",
};

/* An id of STRING_IDS or an ENUM_* table and its text, in the map's buffer. */
typedef struct str_ent {
        int64_t id;
        uint64_t off;
        uint32_t len;
        uint32_t interned;              /* its npf_device_intern() id, UINT32_MAX until asked */
} str_ent_t;

typedef struct str_map {
        str_ent_t *v;
        size_t n, cap;
        char *buf;
        size_t len, cap_buf;
} str_map_t;

/* A number by an id: the times of HCCL tasks by globalTaskId, bytes by opId. */
typedef struct id_val {
        int64_t id;
        int64_t val;
} id_val_t;

typedef struct id_vals {
        id_val_t *v;
        size_t n, cap;
} id_vals_t;

/* A (group, link) pair's transfers, summed here so that no sum can overflow. */
typedef struct link_sum {
        uint32_t group, link;
        uint64_t bytes, count;
        int64_t time_ns;
} link_sum_t;

typedef struct loader {
        sqlite3 *db;
        const char *name;               /* the file's name, for messages */
        char *err;
        npf_device_t *d;
        npf_device_db_info_t info;
        bool has[T_COUNT];
        str_map_t strings, transports, links, rdmas;
        id_vals_t task_times, op_bytes;
        link_sum_t *sums;
        size_t n_sums, cap_sums;
        int64_t task_device;            /* the first TASK row's deviceId, -1 if none */
} loader_t;


/* The length of the well-formed UTF-8 sequence at @s (not a control character), or 0. */
static size_t utf8_len(const unsigned char *s)
{
        size_t n;
        unsigned cp;

        if (s[0] >= 0x20 && s[0] < 0x7f)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                n = 2, cp = s[0] & 0x1fu;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                n = 3, cp = s[0] & 0x0fu;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                n = 4, cp = s[0] & 0x07u;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3fu);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
                return 0;
        return n;
}

/* Replaces in @s what is not printable UTF-8 (SQLite's messages quote the file's bytes) with '?'. */
static void printable(char *s)
{
        unsigned char *p = (unsigned char *) s;

        while (*p) {
                size_t n = utf8_len(p);
                if (n) {
                        p += n;
                } else {
                        *p++ = '?';
                }
        }
}

/* A sentence naming the file into the caller's buffer. Return: @r. */
__attribute__((format(printf, 3, 4))) static int fail(loader_t *L, int r, const char *fmt, ...)
{
        int n = snprintf(L->err, NPF_DEVICE_DB_ERR_MAX, "%s: ", L->name);
        va_list ap;

        if (n >= 0 && (size_t) n < NPF_DEVICE_DB_ERR_MAX) {
                va_start(ap, fmt);
                vsnprintf(L->err + n, NPF_DEVICE_DB_ERR_MAX - (size_t) n, fmt, ap);
                va_end(ap);
        }
        printable(L->err);
        return r;
}

/* SQLite's result code as a negative errno. */
static int sqlite_errno(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_NOMEM: return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED: return -EBUSY;
        case SQLITE_IOERR: return -EIO;
        case SQLITE_PERM:
        case SQLITE_AUTH: return -EACCES;
        case SQLITE_TOOBIG: return -E2BIG;
        default: return -EINVAL;        /* NOTADB, CORRUPT, ERROR (no such column), ... */
        }
}

/* What went wrong in SQLite while doing @what. */
static int sql_fail(loader_t *L, int rc, const char *what)
{
        int code = L->db ? sqlite3_extended_errcode(L->db) : rc;
        const char *msg = L->db ? sqlite3_errmsg(L->db) : sqlite3_errstr(rc);

        if ((rc & 0xff) == SQLITE_NOTADB || (code & 0xff) == SQLITE_NOTADB)
                return fail(L, -EINVAL, "not an SQLite database (%s)", msg);
        if ((rc & 0xff) == SQLITE_CORRUPT)
                return fail(L, -EINVAL, "%s: %s: the file is damaged or cut short", what, msg);
        return fail(L, sqlite_errno(rc), "%s: %s", what, msg);
}

static int prepare(loader_t *L, const char *sql, const char *what, sqlite3_stmt **ret)
{
        int rc = sqlite3_prepare_v2(L->db, sql, -1, ret, NULL);

        return rc == SQLITE_OK ? 0 : sql_fail(L, rc, what);
}

/* The next row of @st: 1, 0 at the end, or an error. */
static int next_row(loader_t *L, sqlite3_stmt *st, const char *what)
{
        int rc = sqlite3_step(st);

        if (rc == SQLITE_ROW)
                return 1;
        if (rc == SQLITE_DONE)
                return 0;
        return sql_fail(L, rc, what);
}

/* --- values ---------------------------------------------------------------------------------- */

/* @s (a value of the file) quoted into @buf, cut and with what cannot be printed as '?'. */
static const char *quote(const unsigned char *s, int len, char *buf, size_t size)
{
        size_t n = 0;

        for (int i = 0; s && i < len && n + 4 < size; i++)
                buf[n++] = s[i] >= 0x20 && s[i] < 0x7f ? (char) s[i] : '?';
        if (s && (size_t) len > n && n + 4 <= size)
                buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
        buf[n] = '\0';
        return buf;
}

/* The name of column @col of @st's result, as the query names it. */
static const char *col_name(sqlite3_stmt *st, int col)
{
        const char *name = sqlite3_column_name(st, col);

        return name ? name : "a column";
}

/*
 * Column @col of row @row of @table as an integer into @ret: an INTEGER, a REAL that is a
 * whole number, or TEXT that is one in decimal. Return: 0, 1 for NULL, or -EINVAL.
 */
static int col_int(loader_t *L, sqlite3_stmt *st, int col, const char *table, uint64_t row, int64_t *ret)
{
        const char *name = col_name(st, col);
        char q[40];

        switch (sqlite3_column_type(st, col)) {
        case SQLITE_INTEGER:
                *ret = sqlite3_column_int64(st, col);
                return 0;
        case SQLITE_NULL:
                return 1;
        case SQLITE_FLOAT: {
                double v = sqlite3_column_double(st, col);
                if (isfinite(v) && v == floor(v) && v >= -9.2e18 && v <= 9.2e18) {
                        *ret = (int64_t) v;
                        return 0;
                }
                return fail(L, -EINVAL, "%s row %" PRIu64 ": %s is %g, not an integer", table, row, name, v);
        }
        case SQLITE_TEXT: {
                const char *s = (const char *) sqlite3_column_text(st, col);
                char *end;
                errno = 0;
                long long v = s ? strtoll(s, &end, 10) : 0;
                if (s && end != s && *end == '\0' && errno == 0) {
                        *ret = v;
                        return 0;
                }
                return fail(L, -EINVAL, "%s row %" PRIu64 ": %s is text \"%s\", not an integer", table, row, name,
                            quote((const unsigned char *) s, sqlite3_column_bytes(st, col), q, sizeof(q)));
        }
        default:
                return fail(L, -EINVAL, "%s row %" PRIu64 ": %s is a blob, not an integer", table, row, name);
        }
}

/* An integer that may be NULL (then @dflt) and must lie in [@lo, @hi]. */
static int col_range(loader_t *L, sqlite3_stmt *st, int col, const char *table, uint64_t row, int64_t lo,
                     int64_t hi, int64_t dflt, int64_t *ret)
{
        int64_t v;
        int r = col_int(L, st, col, table, row, &v);

        if (r < 0)
                return r;
        if (r == 1) {
                *ret = dflt;
                return 0;
        }
        if (v < lo || v > hi)
                return fail(L, -EINVAL, "%s row %" PRIu64 ": %s %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                            table, row, col_name(st, col), v, lo, hi);
        *ret = v;
        return 0;
}

/* A time in nanoseconds; NULL is NPF_DEVICE_NO_TIME where it is not @required. */
static int col_time(loader_t *L, sqlite3_stmt *st, int col, const char *table, uint64_t row, bool required,
                    int64_t *ret)
{
        if (required && sqlite3_column_type(st, col) == SQLITE_NULL)
                return fail(L, -EINVAL, "%s row %" PRIu64 ": %s is NULL, not a time", table, row, col_name(st, col));
        return col_range(L, st, col, table, row, 0, NPF_DEVICE_DB_TIME_MAX, NPF_DEVICE_NO_TIME, ret);
}

/* --- string maps ----------------------------------------------------------------------------- */

static int by_id(const void *a, const void *b)
{
        const str_ent_t *x = a, *y = b;

        if (x->id != y->id)
                return x->id < y->id ? -1 : 1;
        return (x->off > y->off) - (x->off < y->off);     /* the first row of an id wins */
}

/* Reads (id, text) rows of @table into @m, sorted by id. */
static int map_load(loader_t *L, int table, const char *sql, str_map_t *m)
{
        const char *tname = table_names[table];
        sqlite3_stmt *st = NULL;
        uint64_t row = 0;
        char what[64];
        int r;

        if (!L->has[table])
                return 0;
        snprintf(what, sizeof(what), "reading %s", tname);
        if ((r = prepare(L, sql, what, &st)) < 0)
                return r;
        while ((r = next_row(L, st, what)) == 1) {
                const unsigned char *s = sqlite3_column_text(st, 1);
                size_t len = (size_t) sqlite3_column_bytes(st, 1);
                int64_t id;
                row++;
                if ((r = col_int(L, st, 0, tname, row, &id)) != 0) {
                        if (r == 1)
                                continue;       /* a string no row can name */
                        break;
                }
                if (!s && sqlite3_column_type(st, 1) != SQLITE_NULL) {
                        r = fail(L, -ENOMEM, "out of memory reading %s", tname);
                        break;
                }
                if (m->n >= NPF_DEVICE_TASKS_MAX || m->len + len > NPF_DEVICE_DB_STRINGS_MAX) {
                        r = fail(L, -E2BIG, "%s holds more than %u strings or %" PRIu64 " bytes", tname,
                                 NPF_DEVICE_TASKS_MAX, NPF_DEVICE_DB_STRINGS_MAX);
                        break;
                }
                if (npf_array_grow((void **) &m->v, &m->cap, m->n + 1, sizeof(*m->v), 64) < 0 ||
                    npf_array_grow((void **) &m->buf, &m->cap_buf, m->len + len + 1, 1, 64) < 0) {
                        r = fail(L, -ENOMEM, "out of memory reading %s", tname);
                        break;
                }
                if (len)
                        memcpy(m->buf + m->len, s, len);
                m->v[m->n++] = (str_ent_t) { id, m->len, (uint32_t) len, UINT32_MAX };
                m->len += len;
                m->buf[m->len++] = '\0';
        }
        sqlite3_finalize(st);
        if (r < 0)
                return r;
        if (m->n > 1)
                qsort(m->v, m->n, sizeof(*m->v), by_id);
        return 0;
}

static str_ent_t *map_find(const str_map_t *m, int64_t id)
{
        size_t lo = 0, hi = m->n;

        while (lo < hi) {               /* the first entry of @id */
                size_t mid = lo + (hi - lo) / 2;
                if (m->v[mid].id < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < m->n && m->v[lo].id == id ? &m->v[lo] : NULL;
}

/* The text of @id in @m ("" for an unknown one or NULL), and its length. */
static const char *map_str(const str_map_t *m, int64_t id, bool known, size_t *ret_len)
{
        const str_ent_t *e = known ? map_find(m, id) : NULL;

        *ret_len = e ? e->len : 0;
        return e ? m->buf + e->off : "";
}

static bool str_is(const char *s, size_t len, const char *word)
{
        return len == strlen(word) && memcmp(s, word, len) == 0;
}

/* Interns @s (@len bytes), cut to NPF_DEVICE_DB_NAME_MAX bytes on a character's boundary. */
static int intern(loader_t *L, const char *s, size_t len, uint32_t *ret)
{
        char cut[NPF_DEVICE_DB_NAME_MAX];
        int64_t id;

        if (len > NPF_DEVICE_DB_NAME_MAX) {
                size_t n = NPF_DEVICE_DB_NAME_MAX - 3;
                while (n > 0 && ((unsigned char) s[n] & 0xc0) == 0x80)
                        n--;            /* not inside a UTF-8 sequence */
                memcpy(cut, s, n);
                memcpy(cut + n, "...", 3);
                s = cut;
                len = n + 3;
        }
        if ((id = npf_device_intern(L->d, s, len)) < 0)
                return fail(L, (int) id, "cannot keep the name \"%.40s\": %s", s, strerror((int) -id));
        *ret = (uint32_t) id;
        return 0;
}

/* The interned name of @id in @m (0, "", for an unknown one or NULL). */
static int map_intern(loader_t *L, str_map_t *m, int64_t id, bool known, uint32_t *ret)
{
        str_ent_t *e = known ? map_find(m, id) : NULL;
        int r;

        if (!e) {
                *ret = 0;
                return 0;
        }
        if (e->interned == UINT32_MAX && (r = intern(L, m->buf + e->off, e->len, &e->interned)) < 0)
                return r;
        *ret = e->interned;
        return 0;
}

/* --- numbers by id --------------------------------------------------------------------------- */

static int id_vals_add(loader_t *L, id_vals_t *a, int64_t id, int64_t val)
{
        if (npf_array_grow((void **) &a->v, &a->cap, a->n + 1, sizeof(*a->v), 64) < 0)
                return fail(L, -ENOMEM, "out of memory");
        a->v[a->n++] = (id_val_t) { id, val };
        return 0;
}

static int by_val_id(const void *a, const void *b)
{
        const id_val_t *x = a, *y = b;

        return (x->id > y->id) - (x->id < y->id);
}

static int64_t sat_add(int64_t a, int64_t b)
{
        int64_t s;

        return __builtin_add_overflow(a, b, &s) ? INT64_MAX : s;
}

/* Sorts @a by id; with @sum, the values of one id are summed into one entry. */
static void id_vals_sort(id_vals_t *a, bool sum)
{
        size_t n = 0;

        if (a->n < 2)
                return;
        qsort(a->v, a->n, sizeof(*a->v), by_val_id);
        if (!sum)
                return;
        for (size_t i = 1; i < a->n; i++) {
                if (a->v[i].id == a->v[n].id)
                        a->v[n].val = sat_add(a->v[n].val, a->v[i].val);
                else
                        a->v[++n] = a->v[i];
        }
        a->n = n + 1;
}

static const id_val_t *id_vals_find(const id_vals_t *a, int64_t id)
{
        size_t lo = 0, hi = a->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (a->v[mid].id < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < a->n && a->v[lo].id == id ? &a->v[lo] : NULL;
}

/* --- the file -------------------------------------------------------------------------------- */

/*
 * @path as an SQLite URI opening it read-only: "file:" and the path with every byte that is
 * not plainly safe percent-encoded ('?', '#' and '%' would otherwise end or escape it).
 */
static char *uri_of(const char *path)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t len = strlen(path);
        char *u = malloc(len * 3 + sizeof("file://?mode=ro"));
        char *p = u;

        if (!u)
                return NULL;
        /* An absolute path gets an empty authority, so "//x" is never taken for a host. */
        strcpy(p, path[0] == '/' ? "file://" : "file:");
        p += strlen(p);
        for (const unsigned char *s = (const unsigned char *) path; *s; s++) {
                if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                    strchr("/-._~", *s)) {
                        *p++ = (char) *s;
                } else {
                        *p++ = '%';
                        *p++ = hex[*s >> 4];
                        *p++ = hex[*s & 15];
                }
        }
        strcpy(p, "?mode=ro");
        return u;
}

/* Opens @path read-only (not immutable: it may still be being written) and starts a read transaction. */
static int open_db(loader_t *L, const char *path)
{
        struct stat sb;
        char *uri;
        int fd, rc;

        /* Opened here first for errno's word on it (SQLite's would be "unable to open"). */
        if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
                return fail(L, -errno, "cannot open: %s", strerror(errno));
        rc = fstat(fd, &sb) < 0 ? -errno : 0;
        close(fd);
        if (rc < 0)
                return fail(L, rc, "cannot stat: %s", strerror(-rc));
        if (!S_ISREG(sb.st_mode))
                return fail(L, -EINVAL, "not a regular file");
        if (sb.st_size == 0)
                return fail(L, -EINVAL, "empty file: not an SQLite database");
        if (!(uri = uri_of(path)))
                return fail(L, -ENOMEM, "out of memory");
        rc = sqlite3_open_v2(uri, &L->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
        free(uri);
        if (rc != SQLITE_OK)
                return sql_fail(L, rc, "cannot open");
        /* Nothing in the file may run code of its own or ask for more than a value's worth. */
        sqlite3_db_config(L->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
        sqlite3_db_config(L->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
        sqlite3_db_config(L->db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, NULL);
        sqlite3_db_config(L->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, NULL);
        sqlite3_limit(L->db, SQLITE_LIMIT_LENGTH, VALUE_MAX);
        sqlite3_busy_timeout(L->db, NPF_DEVICE_DB_BUSY_MS);
        /* No mmap: a file cut short under a mapping would end the process with SIGBUS. */
        if ((rc = sqlite3_exec(L->db, "PRAGMA mmap_size=0; PRAGMA cell_size_check=ON; BEGIN", NULL, NULL, NULL)) !=
            SQLITE_OK)
                return sql_fail(L, rc, "cannot begin reading");
        return 0;
}

/* Which of the tables are there (names are case-insensitive in SQLite, as here). */
static int find_tables(loader_t *L)
{
        sqlite3_stmt *st = NULL;
        int r;

        if ((r = prepare(L, "SELECT name FROM sqlite_master WHERE type = 'table'", "reading the schema", &st)) < 0)
                return r;
        while ((r = next_row(L, st, "reading the schema")) == 1) {
                const char *name = (const char *) sqlite3_column_text(st, 0);
                for (int t = 0; name && t < T_COUNT; t++)
                        if (!strcasecmp(name, table_names[t]))
                                L->has[t] = true;
        }
        sqlite3_finalize(st);
        if (r < 0)
                return r;
        if (!L->has[T_TASK])
                return fail(L, -EINVAL, "no TASK table: not a torch_npu or MindSpore db export");
        /* The optional tables whose absence changes what the timeline holds. */
        static const int optional[] = { T_STRING_IDS, T_COMPUTE_TASK_INFO, T_CANN_API, T_COMMUNICATION_OP,
                                        T_COMMUNICATION_TASK_INFO, T_STEP_TIME, T_RANK_DEVICE_MAP };
        for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) {
                size_t n = strlen(L->info.missing);
                if (!L->has[optional[i]])
                        snprintf(L->info.missing + n, sizeof(L->info.missing) - n, "%s%s", n ? ", " : "",
                                 table_names[optional[i]]);
        }
        return 0;
}

/* --- tasks ----------------------------------------------------------------------------------- */

typedef struct kind_name {
        const char *name;
        npf_dev_type_t type;
} kind_name_t;

/* Compute kinds by COMPUTE_TASK_INFO's taskType, and by TASK's where that is N/A (level0). */
static const kind_name_t compute_kinds[] = {
        { "AI_CORE", NPF_DEV_TYPE_AI_CORE },          { "MIX_AIC", NPF_DEV_TYPE_AI_CORE },
        { "KERNEL_AICORE", NPF_DEV_TYPE_AI_CORE },    { "KERNEL_MIX_AIC", NPF_DEV_TYPE_AI_CORE },
        { "AI_VECTOR_CORE", NPF_DEV_TYPE_AI_VECTOR }, { "MIX_AIV", NPF_DEV_TYPE_AI_VECTOR },
        { "AIV", NPF_DEV_TYPE_AI_VECTOR },            { "KERNEL_AIVEC", NPF_DEV_TYPE_AI_VECTOR },
        { "KERNEL_MIX_AIV", NPF_DEV_TYPE_AI_VECTOR }, { "AI_CPU", NPF_DEV_TYPE_AI_CPU },
        { "KERNEL_AICPU", NPF_DEV_TYPE_AI_CPU },
};

static bool compute_kind(const char *s, size_t len, npf_dev_type_t *ret)
{
        for (size_t i = 0; i < sizeof(compute_kinds) / sizeof(compute_kinds[0]); i++) {
                if (str_is(s, len, compute_kinds[i].name)) {
                        *ret = compute_kinds[i].type;
                        return true;
                }
        }
        return false;
}

/* A task that moves memory, by TASK's taskType ("MEMCPY_ASYNC", "SDMA", "PCIE_DMA", ...). */
static bool memory_kind(const char *s, size_t len)
{
        static const char *const words[] = { "MEMCPY", "MEMSET", "SDMA", "PCIE_DMA" };

        for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
                size_t wl = strlen(words[w]);
                for (size_t i = 0; i + wl <= len; i++)
                        if (!strncasecmp(s + i, words[w], wl))
                                return true;
        }
        return false;
}

/* The columns of the task query. */
enum { TQ_START, TQ_END, TQ_STREAM, TQ_TYPE, TQ_COMPUTE, TQ_CNAME, TQ_CTYPE, TQ_LAUNCH, TQ_HCCL, TQ_GID, TQ_DEVICE };

/* The task's kind and name: compute, memory or other (device-db.h). */
static int classify(loader_t *L, sqlite3_stmt *st, uint64_t row, bool hccl, npf_dev_task_t *t)
{
        int64_t type, cname, ctype;
        int rt, rn, rc;
        npf_dev_type_t kind;
        const char *ts, *cs;
        size_t tl, cl;

        if ((rt = col_int(L, st, TQ_TYPE, "TASK", row, &type)) < 0)
                return rt;
        ts = map_str(&L->strings, type, rt == 0, &tl);
        if (!sqlite3_column_int(st, TQ_COMPUTE)) {
                if (!hccl && memory_kind(ts, tl)) {
                        t->cls = NPF_DEV_MEMORY;
                        t->type = NPF_DEV_TYPE_MEMORY;
                }
                return map_intern(L, &L->strings, type, rt == 0, &t->name);
        }
        /* torch_npu's _get_compute_data_in_step(): a task of COMPUTE_TASK_INFO is compute. */
        if ((rn = col_int(L, st, TQ_CNAME, "TASK", row, &cname)) < 0)
                return rn;
        if ((rc = col_int(L, st, TQ_CTYPE, "TASK", row, &ctype)) < 0)
                return rc;
        cs = map_str(&L->strings, ctype, rc == 0, &cl);
        t->cls = NPF_DEV_COMPUTE;
        t->type = compute_kind(cs, cl, &kind) || compute_kind(ts, tl, &kind) ? kind : NPF_DEV_TYPE_OTHER;
        L->info.compute++;
        return map_intern(L, &L->strings, cname, rn == 0, &t->name);
}

static int add_task_row(loader_t *L, sqlite3_stmt *st, uint64_t row)
{
        npf_dev_task_t t = { .cls = NPF_DEV_OTHER, .type = NPF_DEV_TYPE_OTHER };
        bool hccl = sqlite3_column_int(st, TQ_HCCL) != 0;
        int64_t stream, device, gid;
        int r;

        if ((r = col_time(L, st, TQ_START, "TASK", row, true, &t.start)) < 0 ||
            (r = col_time(L, st, TQ_END, "TASK", row, true, &t.end)) < 0 ||
            (r = col_time(L, st, TQ_LAUNCH, "TASK", row, false, &t.launch)) < 0 ||
            (r = col_range(L, st, TQ_STREAM, "TASK", row, 0, UINT32_MAX, 0, &stream)) < 0 ||
            (r = col_range(L, st, TQ_DEVICE, "TASK", row, -1, INT32_MAX, -1, &device)) < 0 ||
            (r = classify(L, st, row, hccl, &t)) < 0)
                return r;
        t.stream = (uint32_t) stream;
        if (L->task_device < 0)
                L->task_device = device;
        if (t.launch != NPF_DEVICE_NO_TIME)
                L->info.launched++;
        /* The transfer times of the links, by the HCCL task's id. */
        if (hccl) {
                if ((r = col_int(L, st, TQ_GID, "TASK", row, &gid)) < 0)
                        return r;
                if (r == 0 && (r = id_vals_add(L, &L->task_times, gid, t.end > t.start ? t.end - t.start : 0)) < 0)
                        return r;
        }
        if ((r = npf_device_add_task(L->d, &t)) < 0)
                return fail(L, r, r == -E2BIG ? "more than %u tasks" : "out of memory at %u tasks",
                            r == -E2BIG ? NPF_DEVICE_TASKS_MAX : (unsigned) L->info.tasks);
        L->info.tasks++;
        return 0;
}

/*
 * Whether @column is @table's INTEGER PRIMARY KEY, the rowid itself: unique whatever else the
 * file holds, so that a join on it finds at most one row. As torch_npu writes them,
 * COMPUTE_TASK_INFO.globalTaskId and CANN_API.connectionId are.
 */
static int rowid_key(loader_t *L, const char *table, const char *column, bool *ret)
{
        static const char sql[] =
                "SELECT (SELECT count(*) FROM pragma_table_info(?1) WHERE pk > 0) = 1"
                " AND EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE pk = 1 AND name = ?2 COLLATE NOCASE"
                " AND upper(type) = 'INTEGER')"
                " AND NOT EXISTS (SELECT 1 FROM pragma_index_list(?1) WHERE origin = 'pk')";
        sqlite3_stmt *st = NULL;
        int r;

        if ((r = prepare(L, sql, "reading the schema", &st)) < 0)
                return r;
        sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
        if ((r = next_row(L, st, "reading the schema")) == 1) {
                *ret = sqlite3_column_int(st, 0) != 0;
                r = 0;
        } else if (r == 0) {
                *ret = false;
        }
        sqlite3_finalize(st);
        return r;
}

/*
 * TASK, each row with what COMPUTE_TASK_INFO says of it, the start of the node-level (type
 * 10000) CANN_API call of its connectionId (_step_info_db_parser.py, get_api_data_in_time_range()
 * and get_task_info_from_api()), and whether it is an HCCL op's (COMMUNICATION_TASK_INFO).
 * A table keyed by its rowid is joined as it is; one whose key might repeat through a derived
 * table grouped by it (five times slower), so that no row of TASK comes out twice. A missing
 * optional table is an empty derived table of the same columns.
 */
static int load_tasks(loader_t *L)
{
        const char *compute = "(SELECT 0 AS globalTaskId, 0 AS name, 0 AS taskType WHERE 0)",
                   *api = "(SELECT 0 AS connectionId, 0 AS startNs, 10000 AS type WHERE 0)",
                   *hccl = "(SELECT 0 AS globalTaskId WHERE 0)";
        bool unique;
        char sql[1536];
        sqlite3_stmt *st = NULL;
        uint64_t row = 0;
        int r;

        if (L->has[T_COMPUTE_TASK_INFO]) {
                if ((r = rowid_key(L, "COMPUTE_TASK_INFO", "globalTaskId", &unique)) < 0)
                        return r;
                compute = unique ? "COMPUTE_TASK_INFO"
                                 : "(SELECT globalTaskId, min(name) AS name, min(taskType) AS taskType"
                                   " FROM COMPUTE_TASK_INFO WHERE globalTaskId IS NOT NULL GROUP BY globalTaskId)";
        }
        if (L->has[T_CANN_API]) {
                if ((r = rowid_key(L, "CANN_API", "connectionId", &unique)) < 0)
                        return r;
                api = unique ? "CANN_API"
                             : "(SELECT connectionId, min(startNs) AS startNs, 10000 AS type FROM CANN_API"
                               " WHERE type = 10000 AND connectionId IS NOT NULL GROUP BY connectionId)";
        }
        if (L->has[T_COMMUNICATION_TASK_INFO])
                hccl = "(SELECT DISTINCT globalTaskId FROM COMMUNICATION_TASK_INFO WHERE globalTaskId IS NOT NULL)";
        snprintf(sql, sizeof(sql),
                 "SELECT t.startNs, t.endNs, t.streamId, t.taskType, c.globalTaskId IS NOT NULL,"
                 " c.name AS \"COMPUTE_TASK_INFO.name\", c.taskType AS \"COMPUTE_TASK_INFO.taskType\","
                 " a.startNs AS \"CANN_API.startNs\", h.globalTaskId IS NOT NULL, t.globalTaskId, t.deviceId"
                 " FROM TASK t"
                 " LEFT JOIN %s c ON c.globalTaskId = t.globalTaskId"
                 " LEFT JOIN %s a ON a.connectionId = t.connectionId AND a.type = 10000"
                 " LEFT JOIN %s h ON h.globalTaskId = t.globalTaskId",
                 compute, api, hccl);
        if ((r = prepare(L, sql, "reading TASK", &st)) < 0)
                return r;
        while ((r = next_row(L, st, "reading TASK")) == 1)
                if ((r = add_task_row(L, st, ++row)) < 0)
                        break;
        sqlite3_finalize(st);
        if (r < 0)
                return r;
        id_vals_sort(&L->task_times, false);
        return 0;
}

/* --- links ----------------------------------------------------------------------------------- */

/* One more transfer; summed per (group, link) by link_sums_merge() once all are read. */
static int link_sum_add(loader_t *L, uint32_t group, uint32_t link, int64_t bytes, int64_t time_ns)
{
        if (npf_array_grow((void **) &L->sums, &L->cap_sums, L->n_sums + 1, sizeof(*L->sums), 64) < 0)
                return fail(L, -ENOMEM, "out of memory");
        L->sums[L->n_sums++] = (link_sum_t) { group, link, (uint64_t) bytes, 1, time_ns };
        return 0;
}

static int by_group_link(const void *a, const void *b)
{
        const link_sum_t *x = a, *y = b;

        if (x->group != y->group)
                return x->group < y->group ? -1 : 1;
        return (x->link > y->link) - (x->link < y->link);
}

/* The transfers summed per (group, link), the sums saturating, into the timeline. */
static int link_sums_merge(loader_t *L)
{
        size_t n = 0;
        int r;

        if (L->n_sums > 1)
                qsort(L->sums, L->n_sums, sizeof(*L->sums), by_group_link);
        for (size_t i = 1; i < L->n_sums; i++) {
                link_sum_t *s = &L->sums[n];
                if (!by_group_link(&L->sums[i], s)) {
                        s->bytes = (uint64_t) sat_add((int64_t) s->bytes, (int64_t) L->sums[i].bytes);
                        s->time_ns = sat_add(s->time_ns, L->sums[i].time_ns);
                        s->count++;
                } else {
                        L->sums[++n] = L->sums[i];
                }
        }
        if (L->n_sums)
                L->n_sums = n + 1;
        for (size_t i = 0; i < L->n_sums; i++) {
                const link_sum_t *s = &L->sums[i];
                if ((r = npf_device_add_link(L->d, s->group, s->link, s->bytes, s->time_ns, s->count)) < 0)
                        return fail(L, r, r == -E2BIG ? "more than %zu groups and link types" : "out of memory",
                                    i);
        }
        return 0;
}

/*
 * The link a transfer counts on, as msprof's communication parser sorts them
 * (communication_parser.py, is_transit_sdma_event(), get_communication_bandwidth_info_type()
 * and op_bandwidth_parser()), or NULL for a task that moves nothing over a link.
 */
static const char *transfer_link(const char *task, size_t task_len, const char *transport, size_t transport_len,
                                 const char *link, size_t link_len, const char *rdma, size_t rdma_len)
{
        if (str_is(transport, transport_len, "SDMA")) {
                if (!str_is(task, task_len, "Memcpy") && !str_is(task, task_len, "Reduce_Inline"))
                        return NULL;
                if (str_is(link, link_len, "ON_CHIP"))
                        return NULL;    /* a local copy */
                if (str_is(link, link_len, "HCCS") || str_is(link, link_len, "HCCS_SW"))
                        return "HCCS";
                if (str_is(link, link_len, "PCIE"))
                        return "PCIE";
                if (str_is(link, link_len, "SIO"))
                        return "SIO";
                return "SDMA";          /* RESERVED, INVALID_TYPE, N/A */
        }
        if (str_is(transport, transport_len, "RDMA") && str_is(rdma, rdma_len, "RDMA_SEND_PAYLOAD"))
                return "RDMA";
        return NULL;
}

enum { CQ_OP, CQ_GROUP, CQ_TYPE, CQ_TRANSPORT, CQ_LINK, CQ_RDMA, CQ_SIZE, CQ_GID };

static int add_transfer_row(loader_t *L, sqlite3_stmt *st, uint64_t row)
{
        static const char table[] = "COMMUNICATION_TASK_INFO";
        int64_t v[CQ_GID + 1], size;
        int known[CQ_GID + 1], r;
        const char *s[CQ_RDMA + 1], *link;
        size_t len[CQ_RDMA + 1];
        const id_val_t *time;
        uint32_t group, link_id;

        for (int c = 0; c <= CQ_GID; c++) {
                if (c == CQ_SIZE)
                        continue;
                if ((r = col_int(L, st, c, table, row, &v[c])) < 0)
                        return r;
                known[c] = r == 0;
        }
        /* A negative size (level0 writes -1) is one not known. */
        if ((r = col_int(L, st, CQ_SIZE, table, row, &size)) < 0)
                return r;
        if (r == 1 || size < 0)
                size = 0;
        s[CQ_TYPE] = map_str(&L->strings, v[CQ_TYPE], known[CQ_TYPE], &len[CQ_TYPE]);
        s[CQ_TRANSPORT] = map_str(&L->transports, v[CQ_TRANSPORT], known[CQ_TRANSPORT], &len[CQ_TRANSPORT]);
        s[CQ_LINK] = map_str(&L->links, v[CQ_LINK], known[CQ_LINK], &len[CQ_LINK]);
        s[CQ_RDMA] = map_str(&L->rdmas, v[CQ_RDMA], known[CQ_RDMA], &len[CQ_RDMA]);
        if (!(link = transfer_link(s[CQ_TYPE], len[CQ_TYPE], s[CQ_TRANSPORT], len[CQ_TRANSPORT], s[CQ_LINK],
                                   len[CQ_LINK], s[CQ_RDMA], len[CQ_RDMA])))
                return 0;
        if ((r = map_intern(L, &L->strings, v[CQ_GROUP], known[CQ_GROUP], &group)) < 0 ||
            (r = intern(L, link, strlen(link), &link_id)) < 0)
                return r;
        /* A transfer whose task TASK lacks counts its bytes in no time. */
        time = known[CQ_GID] ? id_vals_find(&L->task_times, v[CQ_GID]) : NULL;
        if ((r = link_sum_add(L, group, link_id, size, time ? time->val : 0)) < 0)
                return r;
        if (known[CQ_OP] && (r = id_vals_add(L, &L->op_bytes, v[CQ_OP], size)) < 0)
                return r;
        L->info.transfers++;
        return 0;
}

static int load_links(loader_t *L)
{
        sqlite3_stmt *st = NULL;
        uint64_t row = 0;
        int r;

        if (!L->has[T_COMMUNICATION_TASK_INFO])
                return 0;
        if ((r = prepare(L,
                         "SELECT opId, groupName, taskType, transportType, linkType, rdmaType, size, globalTaskId"
                         " FROM COMMUNICATION_TASK_INFO",
                         "reading COMMUNICATION_TASK_INFO", &st)) < 0)
                return r;
        while ((r = next_row(L, st, "reading COMMUNICATION_TASK_INFO")) == 1)
                if ((r = add_transfer_row(L, st, ++row)) < 0)
                        break;
        sqlite3_finalize(st);
        if (r < 0 || (r = link_sums_merge(L)) < 0)
                return r;
        id_vals_sort(&L->op_bytes, true);
        return 0;
}

/* --- communication ops, steps, rank ---------------------------------------------------------- */

/* COMMUNICATION_OP: what torch_npu's _get_communication_data_in_step() takes, one task each. */
static int load_ops(loader_t *L)
{
        static const char table[] = "COMMUNICATION_OP";
        sqlite3_stmt *st = NULL;
        uint64_t row = 0;
        int r;

        if (!L->has[T_COMMUNICATION_OP])
                return 0;
        if ((r = prepare(L, "SELECT opName, startNs, endNs, groupName, opId FROM COMMUNICATION_OP",
                         "reading COMMUNICATION_OP", &st)) < 0)
                return r;
        while ((r = next_row(L, st, "reading COMMUNICATION_OP")) == 1) {
                npf_dev_task_t t = { .launch = NPF_DEVICE_NO_TIME, .cls = NPF_DEV_COMM, .type = NPF_DEV_TYPE_COMM };
                int64_t name, group, op;
                int rn, rg, ro;
                const id_val_t *bytes;
                row++;
                if ((r = col_time(L, st, 1, table, row, true, &t.start)) < 0 ||
                    (r = col_time(L, st, 2, table, row, true, &t.end)) < 0 ||
                    (r = rn = col_int(L, st, 0, table, row, &name)) < 0 ||
                    (r = rg = col_int(L, st, 3, table, row, &group)) < 0 ||
                    (r = ro = col_int(L, st, 4, table, row, &op)) < 0 ||
                    (r = map_intern(L, &L->strings, name, rn == 0, &t.name)) < 0 ||
                    (r = map_intern(L, &L->strings, group, rg == 0, &t.group)) < 0)
                        break;
                /* Pipeline receives are the bubble (_get_communication_data_in_step()). */
                t.receive = !strncmp(npf_device_str(L->d, t.name), "hcom_receive", 12);
                if (ro == 0 && (bytes = id_vals_find(&L->op_bytes, op)))
                        t.bytes = (uint64_t) bytes->val;
                if ((r = npf_device_add_task(L->d, &t)) < 0) {
                        r = fail(L, r, r == -E2BIG ? "more than %u tasks" : "out of memory at %u tasks",
                                 r == -E2BIG ? NPF_DEVICE_TASKS_MAX : (unsigned) L->info.tasks);
                        break;
                }
                L->info.comm_ops++;
        }
        sqlite3_finalize(st);
        return r;
}

/* STEP_TIME: the host's ProfilerStep#N spans, as _step_info_db_parser.py's save_step_time() wrote them. */
static int load_steps(loader_t *L)
{
        static const char table[] = "STEP_TIME";
        sqlite3_stmt *st = NULL;
        uint64_t row = 0;
        int r;

        if (!L->has[T_STEP_TIME])
                return 0;
        if ((r = prepare(L, "SELECT id, startNs, endNs FROM STEP_TIME", "reading STEP_TIME", &st)) < 0)
                return r;
        while ((r = next_row(L, st, "reading STEP_TIME")) == 1) {
                int64_t id, start, end;
                row++;
                if ((r = col_time(L, st, 1, table, row, true, &start)) < 0 ||
                    (r = col_time(L, st, 2, table, row, true, &end)) < 0)
                        break;
                if (sqlite3_column_type(st, 0) == SQLITE_NULL) {
                        r = fail(L, -EINVAL, "%s row %" PRIu64 ": id is NULL, not a step number", table, row);
                        break;
                }
                if ((r = col_range(L, st, 0, table, row, 0, INT64_MAX, 0, &id)) < 0)
                        break;
                if ((r = npf_device_add_step(L->d, id, start, end)) < 0) {
                        r = fail(L, r, r == -E2BIG ? "more than %u steps" : "out of memory", NPF_DEVICE_STEPS_MAX);
                        break;
                }
                L->info.steps++;
        }
        sqlite3_finalize(st);
        return r;
}

/* RANK_DEVICE_MAP's first row (-1: unknown), the framework from the file's name. */
static int load_rank(loader_t *L)
{
        static const char table[] = "RANK_DEVICE_MAP";
        int64_t rank = -1, device = -1;
        npf_dev_framework_t fw = NPF_DEV_FW_UNKNOWN;
        sqlite3_stmt *st = NULL;
        int r = 0;

        if (L->has[T_RANK_DEVICE_MAP]) {
                if ((r = prepare(L, "SELECT rankId, deviceId FROM RANK_DEVICE_MAP LIMIT 1", "reading RANK_DEVICE_MAP",
                                 &st)) < 0)
                        return r;
                if ((r = next_row(L, st, "reading RANK_DEVICE_MAP")) == 1 &&
                    (r = col_range(L, st, 0, table, 1, -1, INT32_MAX, -1, &rank)) == 0)
                        r = col_range(L, st, 1, table, 1, -1, INT32_MAX, -1, &device);
                sqlite3_finalize(st);
                if (r < 0)
                        return r;
        }
        if (device < 0)
                device = L->task_device;
        if (!strncmp(L->name, "ascend_pytorch_profiler", 23) || L->has[T_PYTORCH_API])
                fw = NPF_DEV_FW_TORCH_NPU;
        else if (!strncmp(L->name, "ascend_mindspore_profiler", 25))
                fw = NPF_DEV_FW_MINDSPORE;
        npf_device_set_rank(L->d, rank, device, fw);
        return 0;
}

static void map_free(str_map_t *m)
{
        free(m->v);
        free(m->buf);
}

int npf_device_db_load(const char *path, npf_device_t **ret_device, npf_device_db_info_t *ret_info, char *err)
{
        const char *slash = strrchr(path, '/');
        loader_t L = { .name = slash && slash[1] ? slash + 1 : path, .err = err, .task_device = -1 };
        int r;

        err[0] = '\0';
        if ((r = open_db(&L, path)) < 0)
                goto out;
        if (!(L.d = npf_device_new())) {
                r = fail(&L, -ENOMEM, "out of memory");
                goto out;
        }
        if ((r = find_tables(&L)) < 0 ||
            (r = map_load(&L, T_STRING_IDS, "SELECT id, value FROM STRING_IDS", &L.strings)) < 0 ||
            (r = map_load(&L, T_ENUM_HCCL_TRANSPORT_TYPE, "SELECT id, name FROM ENUM_HCCL_TRANSPORT_TYPE",
                          &L.transports)) < 0 ||
            (r = map_load(&L, T_ENUM_HCCL_LINK_TYPE, "SELECT id, name FROM ENUM_HCCL_LINK_TYPE", &L.links)) < 0 ||
            (r = map_load(&L, T_ENUM_HCCL_RDMA_TYPE, "SELECT id, name FROM ENUM_HCCL_RDMA_TYPE", &L.rdmas)) < 0 ||
            (r = load_tasks(&L)) < 0 || (r = load_links(&L)) < 0 || (r = load_ops(&L)) < 0 ||
            (r = load_steps(&L)) < 0 || (r = load_rank(&L)) < 0)
                goto out;
        if ((r = sqlite3_exec(L.db, "COMMIT", NULL, NULL, NULL)) != SQLITE_OK) {
                r = sql_fail(&L, r, "cannot end reading");
                goto out;
        }
        *ret_device = L.d;
        L.d = NULL;
        if (ret_info)
                *ret_info = L.info;
        r = 0;
out:
        sqlite3_close(L.db);            /* a read transaction still open ends with it */
        npf_device_free(L.d);
        map_free(&L.strings);
        map_free(&L.transports);
        map_free(&L.links);
        map_free(&L.rdmas);
        free(L.task_times.v);
        free(L.op_bytes.v);
        free(L.sums);
        return r;
}
