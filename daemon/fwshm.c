/* SPDX-License-Identifier: MIT */
/* Legacy publishers: torch_npu's and MindSpore's hourly shared-memory objects. */
#include "daemon/fwshm.h"
#include "conf/fwshm.h"
#include "daemon/log.h"
#include "lib/clock.h"
#include "lib/shmopen.h"
#include "lib/sigbus.h"

#include <ctype.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 500u
#define SCAN_MS 2000u           /* /dev/shm and /proc/PID/maps */
#define NAME_MAX_ 64u
#define HOUR_DIGITS 10u         /* %Y%m%d%H */
#define OPENER_RETRY_MS 2000u   /* after the opener could not be reached */

typedef struct object {
        char name[NAME_MAX_];
        time_t hour;            /* the start of its hour, seconds since the epoch */
        int fd;                 /* -1 when it cannot be opened: @error says why */
        uint8_t *map;
        int watch;              /* its mapping's lib/sigbus slot: a job may cut the file short */
        int error;
        bool owned;             /* ours (created by a daemon of our uid): refreshed and removed by us */
        bool in_use;            /* owned and open elsewhere at the last look */
        uint32_t stamp;         /* torch_npu: the header last written */
        uint64_t body_gen;      /* the body it holds, 0 for none */
        bool blank;             /* created here and never written: no reader can hold its header */
        uint64_t withdrawn_ns;  /* CLOCK_MONOTONIC when its header was withdrawn for a rewrite, 0 */
        uint64_t refreshed_ns;  /* and of the last ctime refresh */
        size_t size;            /* bytes mapped */
        bool unlinked;          /* its name was removed (a job's unlink at exit): kept while mapped */
        bool via_opener;        /* its descriptor came from npuprof-shmopen */
        int refused;            /* the opener's answer when it would not open it, else 0... */
        dev_t refused_dev;      /* ...for this file, not asked about again */
        ino_t refused_ino;
        uid_t uid;              /* its owner and mode, as seen when it could not be opened */
        mode_t mode;
        dev_t dev;              /* the file itself, as /proc/PID/maps names it */
        ino_t ino;
} object_t;

typedef struct attached {
        pid_t pid;
        char command[32];
        char object[NAME_MAX_];
        dev_t dev;              /* the file it maps: one of ours, not a namesake in another /dev/shm */
        ino_t ino;
} attached_t;

typedef struct publisher {
        unsigned kind;
        const char *name, *prefix;
        object_t obj[NPF_FWSHM_OBJECTS_MAX];
        size_t n_obj;
        uint8_t *body;          /* the newest body, @body_len bytes (JSON, or the packed struct) */
        size_t body_len;
        uint64_t body_gen;      /* 0: nothing to publish yet */
        uint64_t bytes_gen;     /* the body_gen whose bytes @body are: torch_npu restamps a body unchanged */
        int64_t mtime_s;        /* torch_npu: the watched file's modification time of the newest body */
        char note[NPF_FWSHM_NOTE_MAX];
        attached_t procs[NPF_FWSHM_PROCESSES_MAX];
        size_t n_procs;
        uint64_t writes;
} publisher_t;

struct npf_fwshm {
        npf_fwshm_options_t opt;
        char shm_dir[256];
        uv_timer_t timer;
        uv_timer_t step_timer;  /* the packed layout's next store, while one is owed */
        uv_fs_event_t dir_event;        /* the shm directory: objects made or removed by jobs */
        bool packed_owed;       /* a packed object is still on its way to the newest struct */
        unsigned open_handles;  /* closed one by one on the way out; freed after the last */
        publisher_t pub[3];
        size_t n_pub;
        uint64_t scanned_ns;
        unsigned unreadable;    /* processes whose maps could not be read at the last scan */
        uint64_t publications;
        int opener_fd;          /* a connection to npuprof-shmopen, or -1 */
        int opener_error;       /* why the last connection failed, 0 when none did */
        uint64_t opener_retry_ns;       /* CLOCK_MONOTONIC: no new connection before */
        uint64_t opener_grants; /* descriptors it handed us */
};

static const struct kind {
        unsigned bit;
        const char *name, *prefix;
} kinds[] = {
        { NPF_FWSHM_TORCH_NPU, "torch_npu", "DynamicProfileNpuShm" },
        { NPF_FWSHM_MINDSPORE_JSON, "mindspore-json", "DynamicProfileShm" },
        { NPF_FWSHM_MINDSPORE_PACKED, "mindspore-packed", "DynamicProfileShm" },
};

int npf_fwshm_parse_kinds(const char *s, unsigned *ret, char *err, size_t err_len)
{
        unsigned mask = 0;

        while (*s) {
                size_t n = strcspn(s, ",");
                size_t k;
                for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
                        if (strlen(kinds[k].name) == n && strncmp(s, kinds[k].name, n) == 0)
                                break;
                if (k == sizeof(kinds) / sizeof(kinds[0])) {
                        snprintf(err, err_len, "'%.*s' is not a framework's segment: torch_npu, mindspore-json or "
                                 "mindspore-packed", (int) (n < 40 ? n : 40), s);
                        return -EINVAL;
                }
                mask |= kinds[k].bit;
                s += n + (s[n] == ',');
        }
        if ((mask & NPF_FWSHM_MINDSPORE_JSON) && (mask & NPF_FWSHM_MINDSPORE_PACKED)) {
                snprintf(err, err_len, "mindspore-json and mindspore-packed write the same object: choose one");
                return -EINVAL;
        }
        *ret = mask;
        return 0;
}

/* --- the hours ------------------------------------------------------------------------- */

static time_t wall_now(const npf_fwshm_t *l)
{
        return time(NULL) + (time_t) l->opt.clock_offset_s;
}

/*
 * The start of the local hour holding @t. No mktime() here: it reloads the time zone on
 * every call, under glibc's lock but racing in TSan's eyes with the log thread's
 * localtime_r(); localtime_r() alone only reads what tzset() set up at start.
 */
static time_t hour_of(time_t t)
{
        struct tm tm;

        localtime_r(&t, &tm);
        return t - tm.tm_min * 60 - tm.tm_sec;
}

/* @tm, a local time, as seconds since the epoch (mktime() without its tzset()). */
static time_t local_to_time(struct tm *tm)
{
        time_t guess = timegm(tm);
        struct tm at;

        localtime_r(&guess, &at);
        time_t t = guess - at.tm_gmtoff;
        localtime_r(&t, &at);
        return guess - at.tm_gmtoff;
}

/*
 * The name of @p's object for @hour, as a local hour, or with @utc as a UTC hour: torch_npu
 * releases before September 2025 name the object by the UTC hour (datetime.utcnow(),
 * _dynamic_profiler_monitor_shm.py in v2.5.1), later ones by the local hour, and where the
 * two differ torch_npu's objects are kept in both namings.
 */
static void object_name(const publisher_t *p, time_t hour, bool utc, char *buf, size_t len)
{
        struct tm tm;
        char digits[16];

        if (utc)
                gmtime_r(&hour, &tm);
        else
                localtime_r(&hour, &tm);
        strftime(digits, sizeof(digits), "%Y%m%d%H", &tm);
        snprintf(buf, len, "%s%s", p->prefix, digits);
}

/* The year, month, day and hour of @name (the publisher's prefix, then ten digits). */
static bool name_fields(const publisher_t *p, const char *name, struct tm *ret_tm)
{
        size_t n = strlen(p->prefix);
        struct tm tm = { .tm_isdst = -1 };

        if (strncmp(name, p->prefix, n) != 0 || strlen(name + n) != HOUR_DIGITS)
                return false;
        for (size_t i = 0; i < HOUR_DIGITS; i++)
                if (!isdigit((unsigned char) name[n + i]))
                        return false;
        if (sscanf(name + n, "%4d%2d%2d%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour) != 4)
                return false;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        *ret_tm = tm;
        return true;
}

/* The hour named by @name, read as a local hour, or -1. */
static time_t hour_of_name(const publisher_t *p, const char *name)
{
        struct tm tm;

        return name_fields(p, name, &tm) ? local_to_time(&tm) : -1;
}

/*
 * The hour whose jobs the object @name serves. A torch_npu name reads as a local hour and as
 * a UTC hour, and both readings of one name may be in use (at UTC+8, local hour 14 is UTC
 * hour 06, and UTC hour 14 comes eight hours later): the later of the readings not beyond
 * the next hour, else the earlier. Return: its start, or -1 for none of our names.
 */
static time_t served_hour(const npf_fwshm_t *l, const publisher_t *p, const char *name)
{
        time_t local = hour_of_name(p, name), now = wall_now(l), utc;
        struct tm tm;

        if (p->kind != NPF_FWSHM_TORCH_NPU || local == -1 || !name_fields(p, name, &tm))
                return local;
        utc = timegm(&tm);
        bool local_near = local <= hour_of(hour_of(now) + 3600), utc_near = utc <= now - now % 3600 + 3600;
        if (local_near && utc_near)
                return local > utc ? local : utc;
        if (local_near || utc_near)
                return local_near ? local : utc;
        return local < utc ? local : utc;
}

/* --- objects ------------------------------------------------------------------------------ */

/* The bytes of @p's objects: MindSpore's packed struct is its own size (28), the others 1 MiB. */
static size_t object_size(const publisher_t *p)
{
        return p->kind == NPF_FWSHM_MINDSPORE_PACKED ? NPF_FWSHM_MS_PACKED_SIZE : NPF_FWSHM_SIZE;
}

/* The object of that name, not one whose name a job has removed. */
static object_t *find(publisher_t *p, const char *name)
{
        for (size_t i = 0; i < p->n_obj; i++)
                if (!p->obj[i].unlinked && strcmp(p->obj[i].name, name) == 0)
                        return &p->obj[i];
        return NULL;
}

/* Mark the objects whose name is gone: a job unlinked it (torch_npu's creator at exit,
 * MindSpore's every job at the end of training). Return: whether any was. */
static bool note_unlinked(publisher_t *p)
{
        bool any = false;
        struct stat st;

        for (size_t i = 0; i < p->n_obj; i++) {
                object_t *o = &p->obj[i];
                if (o->fd < 0 || o->unlinked || fstat(o->fd, &st) < 0 || st.st_nlink > 0)
                        continue;
                o->unlinked = any = true;
                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "%s: %s was removed by a job; written on while mapped",
                        p->name, o->name);
        }
        return any;
}

static mode_t object_mode(const npf_fwshm_t *l)
{
        return l->opt.group == (gid_t) -1 ? 0666 : 0660;
}

/* The object at @fd, ours, gets this run's group (with --legacy-group) and mode. Return: 0 or -1
 * with errno set. */
static int set_group_and_mode(const npf_fwshm_t *l, int fd)
{
        if (l->opt.group != (gid_t) -1 && fchown(fd, (uid_t) -1, l->opt.group) < 0)
                return -1;
        return fchmod(fd, object_mode(l));
}

/*
 * A descriptor of @o from npuprof-shmopen: the object is a job's of another user, which this
 * unprivileged daemon may not open itself. Return: it, or -1 with errno set (EACCES while the
 * opener cannot be reached, what it answered when it refused: @o->refused).
 */
static int open_through_opener(npf_fwshm_t *l, object_t *o)
{
        char path[sizeof(l->shm_dir) + NAME_MAX_ + 2];
        uint64_t now = npf_clock_ns(CLOCK_MONOTONIC);
        struct stat named, got;
        bool remote;
        int fd, r;

        snprintf(path, sizeof(path), "%s/%s", l->shm_dir, o->name);
        if (fstatat(AT_FDCWD, path, &named, AT_SYMLINK_NOFOLLOW) < 0)
                return -1;
        if (o->refused && named.st_dev == o->refused_dev && named.st_ino == o->refused_ino) {
                errno = o->refused;     /* the same file: the same answer */
                return -1;
        }
        o->refused = 0;
        if (l->opener_fd < 0) {
                if (now < l->opener_retry_ns)
                        goto unreachable;
                if ((r = npf_shmopen_connect(l->opt.opener)) < 0) {
                        if (l->opener_error != -r)
                                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "the shm opener %s cannot be reached: "
                                        "%s", l->opt.opener, strerror(-r));
                        l->opener_error = -r;
                        l->opener_retry_ns = now + (uint64_t) OPENER_RETRY_MS * 1000000u;
                        goto unreachable;
                }
                l->opener_fd = r;
        }
        r = npf_shmopen_ask(l->opener_fd, o->name, &fd, &remote);
        /* What it handed over is the file of that name, regular and of one name only. */
        if (r == 0 && (fstat(fd, &got) < 0 || got.st_dev != named.st_dev || got.st_ino != named.st_ino ||
                       !S_ISREG(got.st_mode) || got.st_nlink != 1)) {
                close(fd);
                r = -EINVAL;
        }
        if (r == 0) {
                l->opener_error = 0;
                l->opener_grants++;
                o->via_opener = true;
                return fd;
        }
        if (remote) {
                o->refused = -r;
                o->refused_dev = named.st_dev;
                o->refused_ino = named.st_ino;
                errno = -r;
                return -1;
        }
        npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "the shm opener %s: %s", l->opt.opener, strerror(-r));
        close(l->opener_fd);
        l->opener_fd = -1;
        l->opener_error = -r;
        l->opener_retry_ns = now + (uint64_t) OPENER_RETRY_MS * 1000000u;
unreachable:
        errno = EACCES;
        return -1;
}

/* The owner and mode of @o, which could not be opened, for status to say whose it is. */
static void note_owner(const npf_fwshm_t *l, object_t *o)
{
        char path[sizeof(l->shm_dir) + NAME_MAX_ + 2];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", l->shm_dir, o->name);
        if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                o->uid = st.st_uid;
                o->mode = st.st_mode & 07777;
        } else {
                o->uid = (uid_t) -1;
                o->mode = 0;
        }
}

/* Open (creating it when @create) the object @name. A failure is kept in the object. */
static object_t *track(npf_fwshm_t *l, publisher_t *p, const char *name, time_t hour, bool create)
{
        object_t *o = find(p, name);
        char path[NAME_MAX_ + 1];
        struct stat st;
        bool created = false;
        int fd;

        if (o && o->hour < hour)
                o->hour = hour;         /* a torch_npu name of two hours, local and UTC: the later */
        if (o && o->fd >= 0)
                return o;
        if (!o) {
                if (p->n_obj == NPF_FWSHM_OBJECTS_MAX)
                        return NULL;
                o = &p->obj[p->n_obj++];
                *o = (object_t) { .hour = hour, .fd = -1, .watch = -1 };
                snprintf(o->name, sizeof(o->name), "%s", name);
        }
        snprintf(path, sizeof(path), "/%s", name);
        fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
        o->via_opener = false;
        if (fd < 0 && (errno == EACCES || errno == EPERM) && l->opt.opener)
                fd = open_through_opener(l, o);
        if (fd < 0 && errno == ENOENT && create) {
                fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                created = fd >= 0;
        }
        if (fd < 0) {
                o->error = errno;
                note_owner(l, o);
                return o;
        }
        if (created) {
                /* The mode and group are set here, not left to the umask. */
                if (set_group_and_mode(l, fd) < 0 || ftruncate(fd, (off_t) object_size(p)) < 0) {
                        o->error = errno;
                        shm_unlink(path);
                        close(fd);
                        return o;
                }
                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "%s: created %s", p->name, name);
        }
        /* MindSpore makes its object 28 bytes (DynamicProfilerArgs.SIZE): one a job made is adopted. */
        int e = fstat(fd, &st) < 0 ? errno : st.st_size < (off_t) object_size(p) ? EMSGSIZE : 0;
        if (e) {
                o->error = e;
                close(fd);
                return o;
        }
        void *map = mmap(NULL, object_size(p), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
                o->error = errno;
                close(fd);
                return o;
        }
        o->fd = fd;
        o->map = map;
        o->watch = npf_sigbus_watch(map, object_size(p));
        o->dev = st.st_dev;
        o->ino = st.st_ino;
        o->size = object_size(p);
        o->error = 0;
        o->owned = st.st_uid == geteuid();
        /* An object of ours left by an earlier run takes this run's group and mode. */
        if (!created && o->owned && set_group_and_mode(l, fd) < 0)
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "%s: cannot give %s this run's group and mode: %s",
                        p->name, name, strerror(errno));
        o->blank = created;
        o->refreshed_ns = npf_clock_ns(CLOCK_MONOTONIC);
        if (p->kind == NPF_FWSHM_TORCH_NPU) {
                uint32_t h;
                memcpy(&h, map, sizeof(h));
                o->stamp = le32toh(h);
        }
        if (!created)
                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "%s: adopted %s", p->name, name);
        return o;
}

static void untrack(publisher_t *p, object_t *o, bool unlink)
{
        char path[NAME_MAX_ + 1];

        if (unlink) {
                snprintf(path, sizeof(path), "/%s", o->name);
                shm_unlink(path);
        }
        npf_sigbus_unwatch(o->watch);
        if (o->map)
                munmap(o->map, o->size);
        if (o->fd >= 0)
                close(o->fd);
        *o = p->obj[--p->n_obj];
}

/*
 * Whether another process has the object @o open or mapped: a write lease is only granted
 * on a file no one else has open, and a mapping keeps its file open. Our own open file
 * does not count. Unknown (not ours, no leases here) is taken as in use.
 */
static bool open_elsewhere(object_t *o)
{
        if (fcntl(o->fd, F_SETLEASE, F_WRLCK) < 0)
                return true;
        fcntl(o->fd, F_SETLEASE, F_UNLCK);
        return false;
}

/* --- writing ---------------------------------------------------------------------------- */

/*
 * Withdraw what the object announces, the first half of a rewrite: its header says
 * "nothing" (a torch_npu timestamp of 0, older than every reader; an empty MindSpore
 * string; is_valid false), so a reader that looks now waits for its next poll. A reader
 * that accepted the old header a moment ago has NPF_FWSHM_SETTLE_MS to finish its read
 * before the body under it changes.
 */
static void withdraw(publisher_t *p, object_t *o, uint64_t now_ns)
{
        uint8_t *m = o->map;

        if (p->kind == NPF_FWSHM_TORCH_NPU)
                __atomic_store_n((uint32_t *) (void *) m, 0, __ATOMIC_RELEASE);
        else
                __atomic_store_n(&m[p->kind == NPF_FWSHM_MINDSPORE_JSON ? 0 : NPF_FWSHM_MS_PACKED_SIZE - 1], 0,
                                 __ATOMIC_RELEASE);
        o->withdrawn_ns = now_ns;
}

/*
 * The time stamp of torch_npu's header for a body of the file modified at @mtime_s, in an
 * object whose last stamp is @last. A job acts on a stamp later than the last it took,
 * which starts as its own start time (int(time.time()) in DynamicProfilerMonitor()), and
 * torch_npu's own monitor stamps the file's modification time in seconds (worker_func):
 * so does this, so that a job acts on what was saved after it started and on nothing
 * older. One stamp never announces two bodies: a save within the same second as the last,
 * or with an older time, takes the last stamp + 1.
 */
static uint32_t torch_npu_stamp(uint32_t last, int64_t mtime_s)
{
        if (mtime_s > (int64_t) last && mtime_s <= (int64_t) UINT32_MAX)
                return (uint32_t) mtime_s;
        return last < UINT32_MAX ? last + 1 : last;
}

/* The second half: the body, then (a release store) the header that announces it. */
static void write_body(publisher_t *p, object_t *o)
{
        uint8_t *m = o->map;

        switch (p->kind) {
        case NPF_FWSHM_TORCH_NPU: {
                uint32_t stamp = torch_npu_stamp(o->stamp, p->mtime_s);
                /* A save of the same body only restamps it: no reader can see it torn. */
                if (o->body_gen < p->bytes_gen) {
                        memcpy(m + 4, p->body, p->body_len);
                        memset(m + 4 + p->body_len, ' ', NPF_FWSHM_SIZE - 4 - p->body_len);
                }
                __atomic_store_n((uint32_t *) (void *) m, htole32(stamp), __ATOMIC_RELEASE);
                o->stamp = stamp;
                break;
        }
        case NPF_FWSHM_MINDSPORE_JSON:
                memcpy(m + 1, p->body + 1, p->body_len - 1);
                m[p->body_len] = 0;
                __atomic_store_n(&m[0], p->body[0], __ATOMIC_RELEASE);
                break;
        case NPF_FWSHM_MINDSPORE_PACKED:
                memcpy(m, p->body, NPF_FWSHM_MS_PACKED_SIZE - 1);
                __atomic_store_n(&m[NPF_FWSHM_MS_PACKED_SIZE - 1], p->body[NPF_FWSHM_MS_PACKED_SIZE - 1],
                                 __ATOMIC_RELEASE);
                break;
        }
        o->body_gen = p->body_gen;
        o->withdrawn_ns = 0;
        p->writes++;
}

/* The body of @c (NULL: broken file) in @p's format. Return: false when it stays as it is. */
static bool make_body(publisher_t *p, const npf_shm_config_t *c)
{
        uint8_t *body = NULL;
        size_t len = 0;

        if (p->kind == NPF_FWSHM_MINDSPORE_PACKED) {
                /* A broken file changes nothing a job reads: the last good struct stays valid. */
                if (!c || !(body = malloc(NPF_FWSHM_MS_PACKED_SIZE)))
                        return false;
                npf_fwshm_mindspore_packed(c, body, p->note);
                len = NPF_FWSHM_MS_PACKED_SIZE;
        } else {
                /* A broken file changes nothing a job reads: the last good one stays. torch_npu's
                 * own monitor would publish {"is_valid": false}, and a job that had not yet read
                 * the good one before it would never see it. */
                if (!c)
                        return false;
                json_t *j = p->kind == NPF_FWSHM_TORCH_NPU ? npf_fwshm_torch_npu_json(c, p->note)
                                                            : npf_fwshm_mindspore_json(c, p->note);
                char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
                json_decref(j);
                if (!s)
                        return false;
                len = strlen(s);
                if (len + 5 > NPF_FWSHM_SIZE) {
                        free(s);
                        snprintf(p->note, sizeof(p->note), "the configuration is over %u bytes in this format",
                                 NPF_FWSHM_SIZE - 5);
                        return false;
                }
                body = (uint8_t *) s;
        }
        if (p->body_gen && len == p->body_len && memcmp(body, p->body, len) == 0) {
                free(body);
                return false;
        }
        free(p->body);
        p->body = body;
        p->body_len = len;
        p->bytes_gen = ++p->body_gen;
        return true;
}

/* --- MindSpore's packed struct, a field at a time ----------------------------------------- */

/* The fields of "iiiiii????" that are not start_step, stop_step or is_valid: offset, size. */
static const struct { uint8_t off, size; } packed_args[] = {
        { 8, 4 }, { 12, 4 }, { 16, 4 }, { 20, 4 }, { 24, 1 }, { 25, 1 }, { 26, 1 },
};

enum { PACKED_START = 0, PACKED_STOP = 4, PACKED_VALID = NPF_FWSHM_MS_PACKED_SIZE - 1 };

static void packed_store(uint8_t *m, const uint8_t *want, size_t off, size_t size)
{
        if (size == 4) {
                int32_t v;
                memcpy(&v, want + off, sizeof(v));
                __atomic_store_n((int32_t *) (void *) (m + off), v, __ATOMIC_RELEASE);
        } else {
                __atomic_store_n(m + off, want[off], __ATOMIC_RELEASE);
        }
}

/*
 * One store towards @p's body in the packed object @o. MindSpore reads the struct in every
 * step_begin, step_end and step() and drops a step whose is_valid is false
 * (mindspore/profiler/dynamic_profiler.py, DynamicProfilerMonitorBase), so a valid
 * configuration is never withdrawn: an aligned store is atomic, and the object moves to the
 * new configuration one field at a time, NPF_FWSHM_PACKED_STEP_MS apart (far longer than
 * a reader's struct.unpack), in an order whose every stage is harmless. A start step that
 * changes is first set to -1 (nothing starts), then the profiler's arguments and the stop
 * step change, and the new start step comes last; a window already started closes at the
 * stop step it read when it started (step_end compares with _last_stop_step). An object no
 * job can trust yet (is_valid 0: just made by a job, or by us) is written whole, is_valid
 * last. Return: true while more stores are owed.
 */
static bool packed_step(publisher_t *p, object_t *o)
{
        uint8_t *m = o->map;
        const uint8_t *want = p->body;
        int32_t start, want_start;

        if (memcmp(m, want, NPF_FWSHM_MS_PACKED_SIZE) == 0)
                return false;
        if (__atomic_load_n(&m[PACKED_VALID], __ATOMIC_ACQUIRE) == 0) {
                memcpy(m, want, PACKED_VALID);
                __atomic_store_n(&m[PACKED_VALID], want[PACKED_VALID], __ATOMIC_RELEASE);
                return false;
        }
        memcpy(&start, m + PACKED_START, sizeof(start));
        memcpy(&want_start, want + PACKED_START, sizeof(want_start));
        bool stop_differs = memcmp(m + PACKED_STOP, want + PACKED_STOP, 4) != 0;
        size_t arg = 0;
        while (arg < sizeof(packed_args) / sizeof(packed_args[0]) &&
               memcmp(m + packed_args[arg].off, want + packed_args[arg].off, packed_args[arg].size) == 0)
                arg++;
        bool args_differ = arg < sizeof(packed_args) / sizeof(packed_args[0]);

        if (start != -1 && start != want_start && (args_differ || stop_differs)) {
                int32_t off = -1;
                __atomic_store_n((int32_t *) (void *) (m + PACKED_START), off, __ATOMIC_RELEASE);
        } else if (args_differ) {
                packed_store(m, want, packed_args[arg].off, packed_args[arg].size);
        } else if (stop_differs) {
                packed_store(m, want, PACKED_STOP, 4);
        } else if (start != want_start) {
                packed_store(m, want, PACKED_START, 4);
        } else {
                packed_store(m, want, PACKED_VALID, 1);
        }
        p->writes++;
        return memcmp(m, want, NPF_FWSHM_MS_PACKED_SIZE) != 0;
}

/* --- the scans -------------------------------------------------------------------------- */

static publisher_t *publisher_of_name(npf_fwshm_t *l, const char *name)
{
        for (size_t i = 0; i < l->n_pub; i++)
                if (hour_of_name(&l->pub[i], name) != -1)
                        return &l->pub[i];
        return NULL;
}

/*
 * Whether the file a process maps (@dev and @ino, as its maps line names them) is our object
 * @name: one we hold, its name maybe removed since, or the one of that name in our shm
 * directory. An object of the same name in another /dev/shm (a container's own) is not.
 */
static bool is_ours(const npf_fwshm_t *l, const publisher_t *p, const char *name, dev_t dev, ino_t ino)
{
        char path[sizeof(l->shm_dir) + NAME_MAX_ + 2];
        struct stat st;

        for (size_t i = 0; i < p->n_obj; i++)
                if (p->obj[i].fd >= 0 && p->obj[i].dev == dev && p->obj[i].ino == ino)
                        return true;
        snprintf(path, sizeof(path), "%s/%s", l->shm_dir, name);
        return stat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/* Who maps the objects: /proc/PID/maps of every process that may be read. */
static void scan_processes(npf_fwshm_t *l)
{
        DIR *proc = opendir("/proc");
        struct dirent *e;
        char path[64], *line = NULL;
        size_t cap = 0, dir_len = strlen(l->shm_dir);
        pid_t self = getpid();

        for (size_t i = 0; i < l->n_pub; i++)
                l->pub[i].n_procs = 0;
        l->unreadable = 0;
        while (proc && (e = readdir(proc))) {
                char *end;
                long pid = strtol(e->d_name, &end, 10);
                if (*end || pid <= 0 || pid == self)
                        continue;
                snprintf(path, sizeof(path), "/proc/%ld/maps", pid);
                FILE *f = fopen(path, "re");
                if (!f) {
                        l->unreadable += errno == EACCES || errno == EPERM;
                        continue;
                }
                ssize_t n;
                while ((n = getline(&line, &cap, f)) > 0) {
                        char *at = strstr(line, l->shm_dir);
                        if (!at || at[dir_len] != '/')
                                continue;
                        char *name = at + dir_len + 1;
                        name[strcspn(name, " \n")] = '\0';
                        publisher_t *p = publisher_of_name(l, name);
                        unsigned maj, min;
                        unsigned long ino;
                        /* start-end perms offset major:minor inode path, the numbers in hex but the inode */
                        if (!p || p->n_procs == NPF_FWSHM_PROCESSES_MAX ||
                            sscanf(line, "%*s %*s %*s %x:%x %lu", &maj, &min, &ino) != 3 ||
                            !is_ours(l, p, name, makedev(maj, min), (ino_t) ino))
                                continue;
                        attached_t *a = p->n_procs ? &p->procs[p->n_procs - 1] : NULL;
                        if (a && a->pid == (pid_t) pid && a->dev == makedev(maj, min) && a->ino == (ino_t) ino)
                                continue;       /* the same object, mapped in pieces */
                        a = &p->procs[p->n_procs++];
                        *a = (attached_t) { .pid = (pid_t) pid, .dev = makedev(maj, min), .ino = (ino_t) ino };
                        snprintf(a->object, sizeof(a->object), "%s", name);
                        snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
                        FILE *c = fopen(path, "re");
                        if (c && fgets(a->command, sizeof(a->command), c))
                                a->command[strcspn(a->command, "\n")] = '\0';
                        if (c)
                                fclose(c);
                }
                fclose(f);
        }
        free(line);
        if (proc)
                closedir(proc);
}

/* Whether a process maps the object that is file @dev, @ino. */
static bool mapped_by_someone(const publisher_t *p, dev_t dev, ino_t ino)
{
        for (size_t i = 0; i < p->n_procs; i++)
                if (p->procs[i].dev == dev && p->procs[i].ino == ino)
                        return true;
        return false;
}

/* Objects of our names that we do not track yet: made by jobs, or by an earlier daemon. */
static void scan_objects(npf_fwshm_t *l, time_t hour)
{
        DIR *d = opendir(l->shm_dir);
        struct dirent *e;

        while (d && (e = readdir(d))) {
                publisher_t *p = publisher_of_name(l, e->d_name);
                if (!p || find(p, e->d_name))
                        continue;
                time_t h = served_hour(l, p, e->d_name);
                struct stat st;
                /* Past hours are ours to remove, or someone's to keep publishing to. */
                if (h >= hour || (fstatat(dirfd(d), e->d_name, &st, 0) == 0 &&
                                  (mapped_by_someone(p, st.st_dev, st.st_ino) || st.st_uid == geteuid())))
                        track(l, p, e->d_name, h, false);
        }
        if (d)
                closedir(d);
}

/* --- the tick ----------------------------------------------------------------------------- */

/* One object's turn: write, refresh, or remove it. Return: false when it was let go of. */
static bool tend(npf_fwshm_t *l, publisher_t *p, object_t *o, time_t now, time_t hour, uint64_t now_ns, bool scan)
{
        if (o->fd >= 0 && npf_sigbus_take(o->watch)) {
                /* What was written past the new end went to memory of our own: let it go, and
                 * take it again at the next scan if it has its size back. */
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "%s: %s was cut short under the daemon (by whoever "
                        "may write it): let go of", p->name, o->name);
                untrack(p, o, false);
                return false;
        }
        if (o->fd < 0) {
                if (scan && o->hour < hour) {
                        untrack(p, o, false);
                        return false;
                }
                if (scan)
                        track(l, p, o->name, o->hour, false);   /* try again */
                return true;
        }
        if (p->body_gen && p->kind == NPF_FWSHM_MINDSPORE_PACKED) {
                /* Every tick: a job's own monitor process may have written the struct too. */
                if (packed_step(p, o))
                        l->packed_owed = true;
                else
                        o->body_gen = p->body_gen;
                o->blank = false;
        } else if (p->body_gen && o->body_gen != p->body_gen) {
                /* A body it holds already (a restamp) is announced anew at once. */
                if (o->blank || (!o->withdrawn_ns && o->body_gen >= p->bytes_gen) ||
                    (o->withdrawn_ns && now_ns - o->withdrawn_ns >= (uint64_t) NPF_FWSHM_SETTLE_MS * 1000000u))
                        write_body(p, o);
                else if (!o->withdrawn_ns)
                        withdraw(p, o, now_ns);
                o->blank = false;
        }
        if (o->owned && now_ns - o->refreshed_ns >= (uint64_t) l->opt.refresh_s * 1000000000u) {
                /* A change of mode, to the same mode, sets the change time. */
                fchmod(o->fd, object_mode(l));
                o->refreshed_ns = now_ns;
        }
        if (!scan || (o->hour + 3600 > now && !o->unlinked))
                return true;
        o->in_use = o->owned && !o->unlinked ? open_elsewhere(o) : !o->unlinked;
        if (mapped_by_someone(p, o->dev, o->ino) || (o->owned && o->in_use))
                return true;
        npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "%s: %s %s: %s and nothing maps it", p->name,
                o->owned && !o->unlinked ? "removed" : "let go of", o->name,
                o->unlinked ? "its name is gone" : "its hour is over");
        untrack(p, o, o->owned && !o->unlinked);
        return false;
}

static void on_packed_step(uv_timer_t *t);

/* The stores the packed objects still owe, NPF_FWSHM_PACKED_STEP_MS apart. */
static void packed_steps(npf_fwshm_t *l)
{
        if (l->packed_owed && !uv_is_active((uv_handle_t *) &l->step_timer))
                uv_timer_start(&l->step_timer, on_packed_step, NPF_FWSHM_PACKED_STEP_MS, 0);
}

static void on_packed_step(uv_timer_t *t)
{
        npf_fwshm_t *l = t->data;

        l->packed_owed = false;
        for (size_t i = 0; i < l->n_pub; i++) {
                publisher_t *p = &l->pub[i];
                if (p->kind != NPF_FWSHM_MINDSPORE_PACKED || !p->body_gen)
                        continue;
                for (size_t k = 0; k < p->n_obj; k++) {
                        object_t *o = &p->obj[k];
                        if (o->fd < 0)
                                continue;
                        if (packed_step(p, o))
                                l->packed_owed = true;
                        else
                                o->body_gen = p->body_gen;
                }
        }
        packed_steps(l);
}

/* torch_npu's objects of this UTC hour and the next. */
static void track_utc_hours(npf_fwshm_t *l, publisher_t *p, time_t now)
{
        char name[NAME_MAX_];

        for (time_t h = now - now % 3600; h <= now - now % 3600 + 3600; h += 3600) {
                object_name(p, h, true, name, sizeof(name));
                track(l, p, name, h, true);
        }
}

/*
 * One turn of every publisher; @force_scan looks at /dev/shm and the processes now (an
 * object was made or removed there). MindSpore's packed object is never made here: its
 * constructor refuses an object whose change time is over 30 s from its process's start, in
 * either direction (dynamic_profiler.py, _check_shm_for_killed), which no object kept for
 * jobs yet to come can promise; the one a job makes is adopted at once and written to.
 */
static void tick(npf_fwshm_t *l, bool force_scan)
{
        uint64_t now_ns = npf_clock_ns(CLOCK_MONOTONIC);
        time_t now = wall_now(l), hour = hour_of(now), next = hour_of(hour + 3600);
        bool scan = force_scan || now_ns - l->scanned_ns >= (uint64_t) SCAN_MS * 1000000u;
        char name[NAME_MAX_];

        if (scan) {
                scan_processes(l);
                scan_objects(l, hour);
                l->scanned_ns = now_ns;
        }
        for (size_t i = 0; i < l->n_pub; i++) {
                publisher_t *p = &l->pub[i];
                note_unlinked(p);
                if (p->kind != NPF_FWSHM_MINDSPORE_PACKED) {
                        object_name(p, hour, false, name, sizeof(name));
                        track(l, p, name, hour, true);
                        object_name(p, next, false, name, sizeof(name));
                        track(l, p, name, next, true);
                }
                if (p->kind == NPF_FWSHM_TORCH_NPU)
                        track_utc_hours(l, p, now);
                for (size_t k = 0; k < p->n_obj;)
                        k += tend(l, p, &p->obj[k], now, hour, now_ns, scan) ? 1 : 0;
        }
        packed_steps(l);
}

static void on_tick(uv_timer_t *t)
{
        tick(t->data, false);
}

/* An object of one of our names was made or removed in the shm directory: look now. */
static void on_dir_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
        npf_fwshm_t *l = h->data;

        (void) events;
        if (status < 0 || (filename && !publisher_of_name(l, filename)))
                return;
        tick(l, true);
}

int npf_fwshm_new(uv_loop_t *loop, const npf_fwshm_options_t *o, npf_fwshm_t **ret)
{
        npf_fwshm_t *l = calloc(1, sizeof(*l));

        if (!l)
                return -ENOMEM;
        l->opt = *o;
        l->opener_fd = -1;
        if (!l->opt.refresh_s)
                l->opt.refresh_s = NPF_FWSHM_REFRESH_S_DEFAULT;
        snprintf(l->shm_dir, sizeof(l->shm_dir), "%s", o->shm_dir ? o->shm_dir : "/dev/shm");
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
                if (o->kinds & kinds[k].bit)
                        l->pub[l->n_pub++] = (publisher_t) { .kind = kinds[k].bit, .name = kinds[k].name,
                                                             .prefix = kinds[k].prefix };
        /* A lease broken by an opener signals its holder; the lease is let go at once anyway. */
        signal(SIGIO, SIG_IGN);
        int r = npf_sigbus_install();
        if (r < 0)
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "cannot handle SIGBUS (%s): a job that cuts its object "
                        "short ends the daemon", strerror(-r));
        uv_timer_init(loop, &l->timer);
        l->timer.data = l;
        uv_timer_init(loop, &l->step_timer);
        l->step_timer.data = l;
        uv_fs_event_init(loop, &l->dir_event);
        l->dir_event.data = l;
        r = uv_fs_event_start(&l->dir_event, on_dir_event, l->shm_dir, 0);
        if (r < 0)
                npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "cannot watch %s (%s): objects that jobs make or "
                        "remove are seen within %u ms", l->shm_dir, uv_strerror(r), SCAN_MS);
        tick(l, true);
        uv_timer_start(&l->timer, on_tick, TICK_MS, TICK_MS);
        *ret = l;
        return 0;
}

void npf_fwshm_publish(npf_fwshm_t *l, const npf_shm_config_t *c, int64_t mtime_s)
{
        bool changed = false;

        for (size_t i = 0; i < l->n_pub; i++) {
                publisher_t *p = &l->pub[i];
                bool fresh = make_body(p, c);
                /* torch_npu's own monitor stamps every save anew, the same body or not: a job
                 * that started after the last one acts on the next, as it would there. */
                if (!fresh && c && p->kind == NPF_FWSHM_TORCH_NPU && p->body_gen && mtime_s != p->mtime_s) {
                        p->body_gen++;
                        fresh = true;
                }
                if (fresh && c)
                        p->mtime_s = mtime_s;
                if (!fresh)
                        continue;
                changed = true;
                if (l->pub[i].note[0])
                        npf_log(LOG_WARNING, NPF_LOG_NONE, NPF_LOG_NONE, "%s: %s", l->pub[i].name, l->pub[i].note);
        }
        if (changed) {
                l->publications++;
                tick(l, false);
        }
}

/*
 * Why a job's object @o is not driven, and what the operator can change, in a sentence:
 * the jobs that map it are listed beside it where their maps can be read.
 */
static const char *undriven_why(const npf_fwshm_t *l, const publisher_t *p, const object_t *o, char *buf, size_t len)
{
        char whose[64] = "";

        /* Under PrivateUsers=, every user but root and the daemon's own reads as the overflow uid. */
        if (o->uid == 65534)
                snprintf(whose, sizeof(whose), " (uid 65534: nobody's or another user's, mode %04o)",
                         (unsigned) o->mode);
        else if (o->uid != (uid_t) -1)
                snprintf(whose, sizeof(whose), " (uid %u, mode %04o)", (unsigned) o->uid, (unsigned) o->mode);
        if (o->error == EMSGSIZE)
                snprintf(buf, len, "%s%s is smaller than %s makes its objects (%zu bytes): not a %s object, left alone",
                         o->name, whose, p->name, object_size(p), p->name);
        else if (o->refused)
                snprintf(buf, len, "the shm opener refused %s%s: %s", o->name, whose, strerror(o->refused));
        else if ((o->error == EACCES || o->error == EPERM) && !l->opt.opener)
                snprintf(buf, len, "%s%s is a job's that user %u may not open, and no shm opener is set: run npuprofd "
                         "with --shm-opener and npuprof-shmopen.socket, or as the job's user", o->name, whose,
                         (unsigned) geteuid());
        else if ((o->error == EACCES || o->error == EPERM) && l->opener_error)
                snprintf(buf, len, "%s%s is a job's that user %u may not open, and the shm opener %s cannot be "
                         "reached (%s): systemctl enable --now npuprof-shmopen.socket", o->name, whose,
                         (unsigned) geteuid(), l->opt.opener, strerror(l->opener_error));
        else
                snprintf(buf, len, "%s%s cannot be opened: %s", o->name, whose, strerror(o->error));
        return buf;
}

json_t *npf_fwshm_status_json(const npf_fwshm_t *l)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < l->n_pub; i++) {
                const publisher_t *p = &l->pub[i];
                json_t *objs = json_array(), *procs = json_array();
                for (size_t k = 0; k < p->n_obj; k++) {
                        const object_t *o = &p->obj[k];
                        json_t *j = json_pack("{s:s, s:b, s:b, s:b}", "name", o->name, "owned", o->owned, "current",
                                              o->body_gen == p->body_gen && p->body_gen, "open_elsewhere", o->in_use);
                        if (o->fd < 0) {
                                char why[512];
                                json_object_set_new(j, "error", json_string(strerror(o->error)));
                                json_object_set_new(j, "why", json_string(undriven_why(l, p, o, why, sizeof(why))));
                                if (o->uid != (uid_t) -1)
                                        json_object_update_new(j, json_pack("{s:I, s:i}", "uid", (json_int_t) o->uid,
                                                                            "mode", (int) o->mode));
                        }
                        json_object_set_new(j, "via_opener", json_boolean(o->via_opener));
                        if (p->kind == NPF_FWSHM_TORCH_NPU)
                                json_object_set_new(j, "timestamp", json_integer(o->stamp));
                        json_array_append_new(objs, j);
                }
                for (size_t k = 0; k < p->n_procs; k++)
                        json_array_append_new(procs, json_pack("{s:i, s:s, s:s}", "pid", (int) p->procs[k].pid,
                                                               "command", p->procs[k].command, "object",
                                                               p->procs[k].object));
                json_array_append_new(a, json_pack("{s:s, s:o, s:o, s:s?, s:I}", "publisher", p->name, "objects", objs,
                                                   "processes", procs, "note", p->note[0] ? p->note : NULL,
                                                   "writes", (json_int_t) p->writes));
        }
        json_t *opener = json_pack("{s:s?, s:b, s:I}", "socket", l->opt.opener, "connected", l->opener_fd >= 0,
                                   "grants", (json_int_t) l->opener_grants);
        if (opener && l->opener_error)
                json_object_set_new(opener, "error", json_string(strerror(l->opener_error)));
        return json_pack("{s:o, s:I, s:o}", "publishers", a, "maps_unreadable", (json_int_t) l->unreadable,
                         "opener", opener);
}

static void on_handle_closed(uv_handle_t *h)
{
        npf_fwshm_t *l = h->data;

        if (--l->open_handles > 0)
                return;
        for (size_t i = 0; i < l->n_pub; i++) {
                publisher_t *p = &l->pub[i];
                while (p->n_obj)
                        untrack(p, &p->obj[p->n_obj - 1], false);
                free(p->body);
        }
        if (l->opener_fd >= 0)
                close(l->opener_fd);
        free(l);
}

/*
 * Stop. An object of ours that nothing else has open is removed, as the native segment
 * is: left behind, a later torch_npu job would poll it with no one writing, and a MindSpore
 * job would find a stale object. Those that jobs map stay, for them and the next daemon.
 */
void npf_fwshm_close(npf_fwshm_t *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n_pub; i++) {
                publisher_t *p = &l->pub[i];
                for (size_t k = 0; k < p->n_obj;) {
                        object_t *o = &p->obj[k];
                        if (o->fd >= 0 && o->owned && !o->unlinked && !open_elsewhere(o)) {
                                npf_log(LOG_INFO, NPF_LOG_NONE, NPF_LOG_NONE, "%s: removed %s: nothing has it open",
                                        p->name, o->name);
                                untrack(p, o, true);
                                continue;
                        }
                        k++;
                }
        }
        uv_timer_stop(&l->timer);
        uv_timer_stop(&l->step_timer);
        uv_fs_event_stop(&l->dir_event);
        l->open_handles = 3;
        uv_close((uv_handle_t *) &l->timer, on_handle_closed);
        uv_close((uv_handle_t *) &l->step_timer, on_handle_closed);
        uv_close((uv_handle_t *) &l->dir_event, on_handle_closed);
}
