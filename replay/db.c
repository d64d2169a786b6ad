/* SPDX-License-Identifier: MIT */
#include "replay/db.h"
#include "lib/atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char schema[] =
        "CREATE TABLE devices(device INTEGER PRIMARY KEY, events INTEGER NOT NULL, rounding TEXT,"
        " inferred_sizes INTEGER NOT NULL);"
        "CREATE TABLE frames(id INTEGER PRIMARY KEY, name TEXT NOT NULL, filename TEXT NOT NULL, line INTEGER);"
        "CREATE TABLE stack_frames(stack INTEGER NOT NULL, depth INTEGER NOT NULL,"
        " frame INTEGER NOT NULL REFERENCES frames(id), PRIMARY KEY(stack, depth)) WITHOUT ROWID;"
        "CREATE TABLE events(device INTEGER NOT NULL, idx INTEGER NOT NULL, action TEXT NOT NULL,"
        " addr INTEGER NOT NULL, size INTEGER NOT NULL, stream INTEGER NOT NULL, allocated INTEGER NOT NULL,"
        " requested INTEGER NOT NULL, active INTEGER NOT NULL, reserved INTEGER NOT NULL, time_us INTEGER,"
        " stack INTEGER, PRIMARY KEY(device, idx)) WITHOUT ROWID;"
        "CREATE TABLE blocks(device INTEGER NOT NULL, addr INTEGER NOT NULL, size INTEGER NOT NULL,"
        " block_size INTEGER NOT NULL, stream INTEGER NOT NULL, alloc_idx INTEGER, free_requested_idx INTEGER,"
        " free_idx INTEGER, stack INTEGER);"
        "CREATE TABLE segments(device INTEGER NOT NULL, addr INTEGER NOT NULL, total INTEGER NOT NULL,"
        " allocated INTEGER NOT NULL, requested INTEGER NOT NULL, stream INTEGER NOT NULL,"
        " expandable INTEGER NOT NULL);"
        "CREATE INDEX blocks_by_device_addr ON blocks(device, addr);";

typedef struct db {
        sqlite3 *db;
        char *err;
} db_t;

static int fail(db_t *d, const char *what)
{
        snprintf(d->err, NPF_DB_ERR_MAX, "%s: %s", what, d->db ? sqlite3_errmsg(d->db) : "out of memory");
        return -EIO;
}

static int prepare(db_t *d, const char *sql, sqlite3_stmt **ret)
{
        return sqlite3_prepare_v2(d->db, sql, -1, ret, NULL) == SQLITE_OK ? 0 : fail(d, "prepare");
}

/* Run @st with its bindings, and reset it for the next row. */
static int step(db_t *d, sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);

        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return rc == SQLITE_DONE ? 0 : fail(d, "insert");
}

/* An event index of a life, or NULL before the first event and after the last. */
static void bind_idx(sqlite3_stmt *st, int col, int64_t idx)
{
        if (idx == NPF_BEFORE_TRACE || idx == NPF_AFTER_TRACE)
                sqlite3_bind_null(st, col);
        else
                sqlite3_bind_int64(st, col, idx);
}

static void bind_stack(sqlite3_stmt *st, int col, uint32_t stack)
{
        if (stack)
                sqlite3_bind_int64(st, col, stack);
        else
                sqlite3_bind_null(st, col);
}

static int write_frames(db_t *d, const npf_intern_t *in)
{
        sqlite3_stmt *fr = NULL, *sf = NULL;
        int r = prepare(d, "INSERT OR IGNORE INTO frames VALUES (?, ?, ?, ?)", &fr);

        if (r == 0)
                r = prepare(d, "INSERT INTO stack_frames VALUES (?, ?, ?)", &sf);
        for (uint32_t id = 1; r == 0 && id < npf_intern_stacks(in); id++) {
                const uint32_t *frames;
                size_t n = npf_intern_stack_get(in, id, &frames);
                for (size_t k = 0; r == 0 && k < n; k++) {
                        const npf_frame_t *f = npf_intern_frame_get(in, frames[k]);
                        if (!f)
                                continue;
                        sqlite3_bind_int64(fr, 1, frames[k]);
                        sqlite3_bind_text(fr, 2, npf_intern_str(in, f->name), -1, SQLITE_STATIC);
                        sqlite3_bind_text(fr, 3, npf_intern_str(in, f->filename), -1, SQLITE_STATIC);
                        sqlite3_bind_int64(fr, 4, f->line);
                        if ((r = step(d, fr)) < 0)
                                break;
                        sqlite3_bind_int64(sf, 1, id);
                        sqlite3_bind_int64(sf, 2, (sqlite3_int64) k);
                        sqlite3_bind_int64(sf, 3, frames[k]);
                        r = step(d, sf);
                }
        }
        sqlite3_finalize(fr);
        sqlite3_finalize(sf);
        return r;
}

static int write_device(db_t *d, const npf_replay_t *rp, sqlite3_stmt *ev, sqlite3_stmt *bl, sqlite3_stmt *dv)
{
        int r = 0;

        sqlite3_bind_int64(dv, 1, rp->device);
        sqlite3_bind_int64(dv, 2, (sqlite3_int64) rp->n);
        if (npf_rounding_name(rp->rounding))
                sqlite3_bind_text(dv, 3, npf_rounding_name(rp->rounding), -1, SQLITE_STATIC);
        sqlite3_bind_int64(dv, 4, (sqlite3_int64) rp->inferred_sizes);
        if ((r = step(d, dv)) < 0)
                return r;
        for (size_t i = 0; r == 0 && i < rp->n; i++) {
                const npf_mem_event_t *e = &rp->events[i];
                sqlite3_bind_int64(ev, 1, rp->device);
                sqlite3_bind_int64(ev, 2, (sqlite3_int64) i);
                sqlite3_bind_text(ev, 3, npf_action_name(e->action), -1, SQLITE_STATIC);
                sqlite3_bind_int64(ev, 4, (sqlite3_int64) e->addr);
                sqlite3_bind_int64(ev, 5, (sqlite3_int64) e->size);
                sqlite3_bind_int64(ev, 6, (sqlite3_int64) e->stream);
                sqlite3_bind_int64(ev, 7, (sqlite3_int64) rp->allocated[i]);
                sqlite3_bind_int64(ev, 8, (sqlite3_int64) rp->requested[i]);
                sqlite3_bind_int64(ev, 9, (sqlite3_int64) rp->active[i]);
                sqlite3_bind_int64(ev, 10, (sqlite3_int64) rp->reserved[i]);
                if (e->time_us != NPF_TIME_UNKNOWN)
                        sqlite3_bind_int64(ev, 11, e->time_us);
                bind_stack(ev, 12, e->stack);
                r = step(d, ev);
        }
        for (size_t i = 0; r == 0 && i < rp->n_lives; i++) {
                const npf_replay_life_t *l = &rp->lives[i];
                sqlite3_bind_int64(bl, 1, rp->device);
                sqlite3_bind_int64(bl, 2, (sqlite3_int64) l->addr);
                sqlite3_bind_int64(bl, 3, (sqlite3_int64) l->size);
                sqlite3_bind_int64(bl, 4, (sqlite3_int64) l->footprint);
                sqlite3_bind_int64(bl, 5, (sqlite3_int64) l->stream);
                bind_idx(bl, 6, l->alloc);
                bind_idx(bl, 7, l->free_requested);
                bind_idx(bl, 8, l->freed);
                bind_stack(bl, 9, l->stack);
                r = step(d, bl);
        }
        return r;
}

static int write_all(db_t *d, const npf_snapshot_t *s, npf_replay_t *const *replays, size_t n)
{
        sqlite3_stmt *ev = NULL, *bl = NULL, *dv = NULL, *sg = NULL;
        int r;

        /*
         * A file built once in one transaction, in a temporary that npf_atomicfile_commit()
         * syncs and renames into place: it needs no journal and no sync of its own.
         */
        if (sqlite3_exec(d->db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;", NULL, NULL, NULL) !=
                    SQLITE_OK ||
            sqlite3_exec(d->db, schema, NULL, NULL, NULL) != SQLITE_OK)
                return fail(d, "create the tables");
        if ((r = prepare(d, "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", &ev)) < 0 ||
            (r = prepare(d, "INSERT INTO blocks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", &bl)) < 0 ||
            (r = prepare(d, "INSERT INTO devices VALUES (?, ?, ?, ?)", &dv)) < 0 ||
            (r = prepare(d, "INSERT INTO segments VALUES (?, ?, ?, ?, ?, ?, ?)", &sg)) < 0)
                goto out;
        for (size_t k = 0; r == 0 && k < n; k++)
                r = write_device(d, replays[k], ev, bl, dv);
        for (size_t i = 0; r == 0 && i < s->n_segments; i++) {
                const npf_segment_t *g = &s->segments[i];
                sqlite3_bind_int64(sg, 1, g->device);
                sqlite3_bind_int64(sg, 2, (sqlite3_int64) g->addr);
                sqlite3_bind_int64(sg, 3, (sqlite3_int64) g->total);
                sqlite3_bind_int64(sg, 4, (sqlite3_int64) g->allocated);
                sqlite3_bind_int64(sg, 5, (sqlite3_int64) g->requested);
                sqlite3_bind_int64(sg, 6, (sqlite3_int64) g->stream);
                sqlite3_bind_int(sg, 7, g->expandable);
                r = step(d, sg);
        }
        if (r == 0)
                r = write_frames(d, s->intern);
        if (r == 0 && sqlite3_exec(d->db, "COMMIT;", NULL, NULL, NULL) != SQLITE_OK)
                r = fail(d, "commit");
out:
        sqlite3_finalize(ev);
        sqlite3_finalize(bl);
        sqlite3_finalize(dv);
        sqlite3_finalize(sg);
        return r;
}

int npf_db_write(const char *path, const npf_snapshot_t *s, npf_replay_t *const *replays, size_t n, char *err)
{
        char *dcopy = strdup(path), *bcopy = strdup(path), *tmp = NULL;
        db_t d = { .err = err };
        npf_atomicfile_t f;
        int dfd = -1, r;

        if (!dcopy || !bcopy) {
                r = -ENOMEM;
                snprintf(err, NPF_DB_ERR_MAX, "out of memory");
                goto out;
        }
        const char *dir = dirname(dcopy), *base = basename(bcopy);
        if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                r = -errno;
                snprintf(err, NPF_DB_ERR_MAX, "cannot open %s: %s", dir, strerror(errno));
                goto out;
        }
        /* SQLite builds the database in the temporary that lib/atomicfile made, which then puts it in place. */
        if ((r = npf_atomicfile_begin(&f, dfd, base, "tmp", 0644, 0)) < 0) {
                snprintf(err, NPF_DB_ERR_MAX, "cannot %s %s/%s: %s", f.step, dir, npf_atomicfile_failed_name(&f),
                         strerror(-r));
                goto out;
        }
        if (asprintf(&tmp, "%s/%s", dir, f.tmp) < 0) {
                tmp = NULL;
                r = -ENOMEM;
                snprintf(err, NPF_DB_ERR_MAX, "out of memory");
        } else if (sqlite3_open_v2(tmp, &d.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
                r = fail(&d, tmp);
        } else {
                r = write_all(&d, s, replays, n);
        }
        if (d.db && sqlite3_close(d.db) != SQLITE_OK && r == 0)
                r = fail(&d, "close");
        if (r < 0) {
                npf_atomicfile_abort(&f);
        } else if ((r = npf_atomicfile_commit(&f, 0)) < 0) {
                snprintf(err, NPF_DB_ERR_MAX, "cannot %s %s/%s: %s", f.step, dir, npf_atomicfile_failed_name(&f),
                         strerror(-r));
        }
out:
        if (dfd >= 0)
                close(dfd);
        free(tmp);
        free(dcopy);
        free(bcopy);
        return r;
}
