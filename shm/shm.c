/* SPDX-License-Identifier: MIT */
/* The node's shared-memory segment: create, adopt, attach, publish and read. */
#include "npuprof/shm.h"
#include "seqlock.h"
#include "internal.h"
#include "lib/clock.h"
#include "lib/sigbus.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NPF__READ_RETRIES 1000

struct npf_shm {
        npf_shm_ctl_t *ctl;
        npf_shm_ranks_t *ranks;
        int lock_fd;                    /* the writer's: holds the one-writer lock, else -1 */
        int ranks_fd;                   /* the rank table: asks the kernel about slot locks */
        dev_t ranks_dev;                /* ... and which object that is */
        ino_t ranks_ino;
        char ranks_obj[NPF_SHM_NAME_MAX + 16];
        bool writer;
        bool adopted;
        int ranks_watch;                /* the daemon's: the rank table's lib/sigbus slot, else -1 */
};

void npf__set_err(char *err, const char *fmt, ...)
{
        va_list ap;

        if (!err)
                return;
        va_start(ap, fmt);
        vsnprintf(err, NPF_SHM_ERR_MAX, fmt, ap);
        va_end(ap);
}

int npf_shm_name_check(const char *name, char *err)
{
        size_t n = name ? strlen(name) : 0;

        if (n == 0 || n > NPF_SHM_NAME_MAX) {
                npf__set_err(err, "segment name must be 1 to %u bytes", NPF_SHM_NAME_MAX);
                return -EINVAL;
        }
        if (name[0] == '.') {
                npf__set_err(err, "segment name '%s' must not start with '.'", name);
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                if (!(c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') ||
                      (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
                        npf__set_err(err, "segment name '%s' may hold only letters, digits, '.', '_' and '-'", name);
                        return -EINVAL;
                }
        }
        return 0;
}

static void object_name(char *buf, size_t len, const char *name, const char *suffix)
{
        snprintf(buf, len, "/%s.%s", name, suffix);
}

/*
 * Check the magic and ABI version at the start of a mapped object; both objects begin with
 * them. Return: 0, -EAGAIN if the object is still being created, -EPROTO.
 */
static int header_check(const void *map, uint64_t want_magic, const char *what, const char *obj, char *err)
{
        const uint64_t *magic_word = map;
        uint64_t magic = atomic_load_explicit(npf__seq(magic_word), memory_order_acquire);
        uint32_t version = ((const npf_shm_ctl_t *) map)->abi_version;

        _Static_assert(offsetof(npf_shm_ranks_t, abi_version) == offsetof(npf_shm_ctl_t, abi_version),
                       "both objects start alike");
        if (magic == 0) {
                npf__set_err(err, "segment %s is still being created", obj);
                return -EAGAIN;
        }
        if (magic != want_magic) {
                npf__set_err(err, "%s is not an npuprof %s (bad magic)", obj, what);
                return -EPROTO;
        }
        if (version != NPF_SHM_ABI_VERSION) {
                npf__set_err(err, "segment %s has ABI version %u; this program speaks version %u", obj, version,
                             NPF_SHM_ABI_VERSION);
                return -EPROTO;
        }
        return 0;
}

static int ctl_check(const npf_shm_ctl_t *ctl, const char *obj, char *err)
{
        int r = header_check(ctl, NPF_SHM_CTL_MAGIC, "control block", obj, err);

        if (r == 0 && (ctl->ctl_size != sizeof(npf_shm_ctl_t) || ctl->config_size != sizeof(npf_shm_config_t) ||
                       ctl->status_size != sizeof(npf_shm_status_t))) {
                npf__set_err(err, "segment %s has ABI version %u but wrong sizes (control block %u bytes)", obj,
                             ctl->abi_version, ctl->ctl_size);
                r = -EPROTO;
        }
        return r;
}

static int ranks_check(const npf_shm_ranks_t *t, const char *obj, char *err)
{
        int r = header_check(t, NPF_SHM_RANKS_MAGIC, "rank table", obj, err);

        if (r == 0 && (t->table_size != sizeof(npf_shm_ranks_t) || t->slot_count != NPF_SHM_SLOTS ||
                       t->slot_size != sizeof(npf_shm_slot_t) || t->cold_size != sizeof(npf_shm_slot_cold_t) ||
                       t->index_count != NPF_SHM_MAX_RANKS || t->header_size != offsetof(npf_shm_ranks_t, slots))) {
                npf__set_err(err, "segment %s has ABI version %u but wrong sizes (%u slots)", obj, t->abi_version,
                             t->slot_count);
                r = -EPROTO;
        }
        return r;
}

static void ctl_init(npf_shm_ctl_t *ctl)
{
        ctl->abi_version = NPF_SHM_ABI_VERSION;
        ctl->ctl_size = sizeof(*ctl);
        ctl->config_size = sizeof(ctl->config);
        ctl->status_size = sizeof(ctl->status);
        ctl->created_ns = npf_clock_ns(CLOCK_REALTIME);
        ctl->daemon_pid = (uint32_t) getpid();
        atomic_store_explicit(npf__seq(&ctl->magic), NPF_SHM_CTL_MAGIC, memory_order_release);
}

static void ranks_init(npf_shm_ranks_t *r)
{
        r->abi_version = NPF_SHM_ABI_VERSION;
        r->header_size = offsetof(npf_shm_ranks_t, slots);
        r->slot_count = NPF_SHM_SLOTS;
        r->slot_size = sizeof(npf_shm_slot_t);
        r->cold_size = sizeof(npf_shm_slot_cold_t);
        r->index_count = NPF_SHM_MAX_RANKS;
        r->table_size = sizeof(*r);
        atomic_store_explicit(npf__seq(&r->magic), NPF_SHM_RANKS_MAGIC, memory_order_release);
}

/*
 * The object @obj of a segment, which this process would serve, belongs to another user:
 * say whose, and what to do, in @err; when it turns out to be this user's, say @r.
 */
static void foreign_err(const char *obj, int r, char *err)
{
        char path[NPF_SHM_NAME_MAX + 32];
        const char *dot = strrchr(obj, '.');
        int stem = dot ? (int) (dot - obj) : (int) strlen(obj);
        struct stat st;

        snprintf(path, sizeof(path), "/dev/shm%s", obj);
        if (stat(path, &st) < 0 || st.st_uid == geteuid()) {
                npf__set_err(err, "cannot open %s: %s", obj, strerror(-r));
                return;
        }
        npf__set_err(err, "%s belongs to another user (uid %u): give this daemon its own segment (--shm-name NAME), "
                     "run it as that user, or, if no job uses this one: rm /dev/shm%.*s.ctl /dev/shm%.*s.ranks", obj,
                     (unsigned) st.st_uid, stem, obj, stem, obj);
}

/*
 * Map one object @obj, the @what of a segment, of @size bytes. With @create, make it if
 * absent and report that in @ret_created, giving it mode @mode and, unless (gid_t) -1,
 * group @group (created readable by its owner alone until both are set); an adopted one is
 * put so. The mapping is writable when @writable. With @ret_fd the descriptor is kept open
 * and given there. Return: 0, or -errno with the reason in @err.
 */
static int map_object(const char *obj, const char *what, size_t size, bool writable, bool create, mode_t mode,
                      gid_t group, void **ret_map, bool *ret_created, int *ret_fd, char *err)
{
        bool created = false;
        struct stat st;
        int fd, r;

        for (int tries = 0;; tries++) {
                fd = shm_open(obj, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW, 0);
                if (fd >= 0 || errno != ENOENT || !create)
                        break;
                fd = shm_open(obj, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                              group == (gid_t) -1 ? mode : 0600);
                if (fd >= 0) {
                        created = true;
                        break;
                }
                if (errno != EEXIST || tries > 10)
                        break;
        }
        if (fd < 0) {
                r = -errno;
                goto fail;
        }

        if (fstat(fd, &st) < 0) {
                r = -errno;
                goto fail;
        }
        /* The daemon adopts only what it owns. */
        if (create && !created && st.st_uid != geteuid()) {
                r = -EPERM;
                goto fail;
        }
        if (create && group != (gid_t) -1 && st.st_gid != group && fchown(fd, (uid_t) -1, group) < 0) {
                r = -errno;
                npf__set_err(err, "cannot give %s group %u: %s", obj, (unsigned) group, strerror(-r));
                close(fd);
                return r;
        }
        /* The umask must not take away what ranks need, and an adopted object is put right. */
        if (create && (created || (st.st_mode & 07777) != mode) && fchmod(fd, mode) < 0) {
                r = -errno;
                goto fail;
        }
        /* Made now, or left empty by a creator that died: give it its size. */
        if (create && st.st_size == 0) {
                if (ftruncate(fd, (off_t) size) < 0) {
                        r = -errno;
                        goto fail;
                }
                created = true;
                st.st_size = (off_t) size;
        }
        if (!S_ISREG(st.st_mode) || (size_t) st.st_size < size) {
                /* Too small: being created (size 0) or not ours. */
                r = st.st_size == 0 ? -EAGAIN : -EPROTO;
                goto fail;
        }
        void *map = mmap(NULL, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
                r = -errno;
                goto fail;
        }
        if (ret_fd)
                *ret_fd = fd;
        else
                close(fd);
        *ret_map = map;
        *ret_created = created;
        return 0;
fail:
        if (fd >= 0)
                close(fd);
        if (r == -EAGAIN)
                npf__set_err(err, "segment %s is still being created", obj);
        else if (r == -EPROTO)
                npf__set_err(err, "%s is smaller than an ABI version %u %s", obj, NPF_SHM_ABI_VERSION, what);
        else if (r == -EPERM || (r == -EACCES && create))
                foreign_err(obj, r, err);
        else
                npf__set_err(err, "cannot open %s: %s", obj, strerror(-r));
        return r;
}

int npf_shm_open(const char *name, unsigned flags, npf_shm_t **ret_shm, char *err)
{
        return npf_shm_open_group(name, flags, (gid_t) -1, ret_shm, err);
}

int npf_shm_open_group(const char *name, unsigned flags, gid_t ranks_group, npf_shm_t **ret_shm, char *err)
{
        bool writer = flags & NPF_SHM_WRITER, create = writer && (flags & NPF_SHM_CREATE);
        char ctl_obj[NPF_SHM_NAME_MAX + 16], ranks_obj[NPF_SHM_NAME_MAX + 16];
        bool ctl_created = false, ranks_created = false;
        int lock_fd = -1, ranks_fd = -1;
        void *ctl = NULL, *ranks = NULL;
        npf_shm_t *shm;
        struct stat st;
        int r;

        r = npf_shm_name_check(name, err);
        if (r < 0)
                return r;
        object_name(ctl_obj, sizeof(ctl_obj), name, "ctl");
        object_name(ranks_obj, sizeof(ranks_obj), name, "ranks");

        r = map_object(ctl_obj, "control block", sizeof(npf_shm_ctl_t), writer, create, 0644, (gid_t) -1, &ctl,
                       &ctl_created, writer ? &lock_fd : NULL, err);
        if (r < 0)
                goto fail;
        /* One writer per segment: a second daemon on the same name would publish over the first. */
        if (writer) {
                struct flock lk = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
                if (fcntl(lock_fd, F_OFD_SETLK, &lk) < 0) {
                        r = errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
                        if (r == -EBUSY)
                                npf__set_err(err, "segment %s is already served by another daemon (pid %u): stop "
                                             "that one first, or give this one another segment name (npuprofd "
                                             "--shm-name)", ctl_obj, ((npf_shm_ctl_t *) ctl)->daemon_pid);
                        else
                                npf__set_err(err, "cannot lock %s: %s", ctl_obj, strerror(-r));
                        goto fail;
                }
        }
        /* A magic still zero means its creator died before finishing: make it anew. */
        if (create && atomic_load_explicit(npf__seq(&((npf_shm_ctl_t *) ctl)->magic), memory_order_acquire) == 0)
                ctl_created = true;
        if (ctl_created)
                ctl_init(ctl);
        r = ctl_check(ctl, ctl_obj, err);
        if (r < 0)
                goto fail;

        r = map_object(ranks_obj, "rank table", sizeof(npf_shm_ranks_t), !(flags & NPF_SHM_RDONLY), create,
                       ranks_group == (gid_t) -1 ? 0666 : 0660, ranks_group, &ranks, &ranks_created, &ranks_fd, err);
        if (r < 0)
                goto fail;
        if (create && atomic_load_explicit(npf__seq(&((npf_shm_ranks_t *) ranks)->magic), memory_order_acquire) == 0)
                ranks_created = true;
        if (ranks_created)
                ranks_init(ranks);
        r = ranks_check(ranks, ranks_obj, err);
        if (r < 0)
                goto fail;
        if (fstat(ranks_fd, &st) < 0) {
                r = -errno;
                npf__set_err(err, "cannot stat %s: %s", ranks_obj, strerror(-r));
                goto fail;
        }

        shm = calloc(1, sizeof(*shm));
        if (!shm) {
                r = -ENOMEM;
                goto fail;
        }
        shm->ctl = ctl;
        shm->ranks = ranks;
        shm->ranks_watch = -1;
        shm->lock_fd = lock_fd;
        shm->ranks_fd = ranks_fd;
        shm->ranks_dev = st.st_dev;
        shm->ranks_ino = st.st_ino;
        snprintf(shm->ranks_obj, sizeof(shm->ranks_obj), "%s", ranks_obj);
        shm->writer = writer;
        shm->adopted = writer && !ctl_created;
        *ret_shm = shm;
        return 0;
fail:
        if (lock_fd >= 0)
                close(lock_fd);
        if (ranks_fd >= 0)
                close(ranks_fd);
        if (ctl)
                munmap(ctl, sizeof(npf_shm_ctl_t));
        if (ranks)
                munmap(ranks, sizeof(npf_shm_ranks_t));
        return r;
}

npf_shm_t *npf_shm_close(npf_shm_t *shm)
{
        if (!shm)
                return NULL;
        npf_sigbus_unwatch(shm->ranks_watch);
        munmap(shm->ctl, sizeof(npf_shm_ctl_t));
        munmap(shm->ranks, sizeof(npf_shm_ranks_t));
        if (shm->lock_fd >= 0)
                close(shm->lock_fd);
        close(shm->ranks_fd);
        free(shm);
        return NULL;
}

int npf_shm_guard_ranks(npf_shm_t *shm)
{
        int r = npf_sigbus_install();

        if (r < 0)
                return r;
        if (shm->ranks_watch < 0)
                shm->ranks_watch = npf_sigbus_watch(shm->ranks, sizeof(npf_shm_ranks_t));
        return shm->ranks_watch < 0 ? shm->ranks_watch : 0;
}

int npf_shm_repair_ranks(npf_shm_t *shm)
{
        struct stat st;

        if (!npf_sigbus_take(shm->ranks_watch) &&
            (fstat(shm->ranks_fd, &st) < 0 || st.st_size >= (off_t) sizeof(npf_shm_ranks_t)))
                return 0;
        /* Its size back, and the file mapped again over the zeros a fault put there. */
        if (ftruncate(shm->ranks_fd, (off_t) sizeof(npf_shm_ranks_t)) < 0 ||
            mmap(shm->ranks, sizeof(npf_shm_ranks_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, shm->ranks_fd,
                 0) == MAP_FAILED)
                return -errno;
        return 1;
}

int npf_shm_unlink(const char *name)
{
        char obj[NPF_SHM_NAME_MAX + 16];
        int r, missing = 0;

        r = npf_shm_name_check(name, NULL);
        if (r < 0)
                return r;
        object_name(obj, sizeof(obj), name, "ctl");
        if (shm_unlink(obj) < 0) {
                if (errno != ENOENT)
                        return -errno;
                missing++;
        }
        object_name(obj, sizeof(obj), name, "ranks");
        if (shm_unlink(obj) < 0) {
                if (errno != ENOENT)
                        return -errno;
                missing++;
        }
        return missing == 2 ? -ENOENT : 0;
}

const npf_shm_ctl_t *npf_shm_ctl(const npf_shm_t *shm)
{
        return shm->ctl;
}

npf_shm_ranks_t *npf_shm_ranks(const npf_shm_t *shm)
{
        return shm->ranks;
}

bool npf_shm_adopted(const npf_shm_t *shm)
{
        return shm->adopted;
}

int npf__shm_ranks_fd(const npf_shm_t *shm)
{
        return shm->ranks_fd;
}

int npf__shm_ranks_reopen(const npf_shm_t *shm)
{
        struct stat st;
        int fd = shm_open(shm->ranks_obj, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
        int r = 0;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                r = -errno;
        else if (st.st_dev != shm->ranks_dev || st.st_ino != shm->ranks_ino)
                r = -ESTALE;
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

uint64_t npf_shm_config_checksum(const npf_shm_config_t *config)
{
        const uint64_t *w = (const uint64_t *) config;
        const size_t skip = offsetof(npf_shm_args_t, checksum) / 8;
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        for (size_t i = 0; i < sizeof(*config) / 8; i++) {
                h ^= i == skip ? 0 : w[i];
                h *= UINT64_C(0x100000001b3);
        }
        return h;
}

bool npf_shm_config_selects(const npf_shm_config_t *config, uint32_t rank)
{
        if (config->args.rank_filter == NPF_RANKS_ALL)
                return true;
        return rank < NPF_SHM_MAX_RANKS && (config->rank_bitmap[rank / 8] >> (rank % 8)) & 1;
}

/* Return: true if the string fields of @c are terminated within their arrays. */
static bool config_strings_ok(const npf_shm_config_t *c)
{
        return c->args.prof_dir_len < NPF_SHM_PATH_MAX && c->prof_dir[c->args.prof_dir_len] == '\0' &&
               c->args.extra_len < NPF_SHM_EXTRA_MAX && c->extra[c->args.extra_len] == '\0';
}

int npf_shm_publish_config(npf_shm_t *shm, const npf_shm_config_t *config, uint64_t *ret_generation)
{
        npf_shm_ctl_t *ctl;
        npf_shm_config_t *copy;
        uint64_t s;

        if (!shm->writer)
                return -EPERM;
        if (!config_strings_ok(config))
                return -EINVAL;
        copy = malloc(sizeof(*copy));
        if (!copy)
                return -ENOMEM;
        memcpy(copy, config, sizeof(*copy));

        ctl = shm->ctl;
        s = npf__seq_write_base(&ctl->config_seq);
        copy->args.generation = s / 2 + 1;
        copy->args.published_ns = npf_clock_ns(CLOCK_REALTIME);
        copy->args.checksum = npf_shm_config_checksum(copy);

        s = npf__seq_write_begin(&ctl->config_seq);
        npf__seq_copy_in(&ctl->config, copy, sizeof(*copy));
        npf__seq_write_end(&ctl->config_seq, s);

        if (ret_generation)
                *ret_generation = copy->args.generation;
        free(copy);
        return 0;
}

int npf_shm_publish_status(npf_shm_t *shm, const npf_shm_status_t *status)
{
        npf_shm_status_t copy = *status;
        npf_shm_ctl_t *ctl = shm->ctl;
        uint64_t s;

        if (!shm->writer)
                return -EPERM;
        copy.path[sizeof(copy.path) - 1] = '\0';
        copy.key[sizeof(copy.key) - 1] = '\0';
        copy.message[sizeof(copy.message) - 1] = '\0';

        s = npf__seq_write_begin(&ctl->status_seq);
        npf__seq_copy_in(&ctl->status, &copy, sizeof(copy));
        npf__seq_write_end(&ctl->status_seq, s);
        return 0;
}

void npf_shm_heartbeat(npf_shm_t *shm, uint64_t now_ns)
{
        if (!shm->writer)
                return;
        atomic_store_explicit((_Atomic uint32_t *) &shm->ctl->daemon_pid, (uint32_t) getpid(),
                              memory_order_relaxed);
        atomic_store_explicit(npf__seq(&shm->ctl->daemon_heartbeat_ns), now_ns, memory_order_relaxed);
}

int npf_shm_read_config(const npf_shm_ctl_t *ctl, npf_shm_config_t *ret_config)
{
        /* calloc: the compiler cannot see that the atomic word copy fills it all. */
        npf_shm_config_t *c = calloc(1, sizeof(*c));
        int r = -EAGAIN;

        if (!c)
                return -ENOMEM;
        for (int retries = 0; retries < NPF__READ_RETRIES; retries++) {
                uint64_t s = npf__seq_read_begin(&ctl->config_seq);
                if (s == UINT64_MAX)
                        break;
                npf__seq_copy_out(c, &ctl->config, sizeof(*c));
                if (npf__seq_read_retry(&ctl->config_seq, s))
                        continue;

                if (s == 0) {
                        /* Nothing published yet: profiling is off. */
                        memset(c, 0, sizeof(*c));
                } else if (!config_strings_ok(c) || c->args.generation != s / 2 ||
                           c->args.checksum != npf_shm_config_checksum(c)) {
                        r = -EBADMSG;
                        break;
                }
                memcpy(ret_config, c, sizeof(*c));
                r = retries;
                break;
        }
        free(c);
        return r;
}

int npf_shm_read_window(const npf_shm_ctl_t *ctl, uint32_t rank, npf_shm_window_t *window)
{
        const npf_shm_config_t *c = &ctl->config;
        npf_shm_window_t *w = window;

        for (int retries = 0; retries < NPF__READ_RETRIES; retries++) {
                uint64_t s = npf__seq_read_begin(&ctl->config_seq);
                if (s == UINT64_MAX)
                        return -EAGAIN;
                npf__seq_copy_out(&w->args, &c->args, sizeof(w->args));
                uint32_t len = w->args.prof_dir_len;
                bool len_ok = len < NPF_SHM_PATH_MAX;
                if (len_ok)
                        npf__seq_copy_out(w->prof_dir, c->prof_dir, npf__words(len + 1));
                uint64_t bits = 0;
                if (rank < NPF_SHM_MAX_RANKS)
                        npf__seq_copy_out(&bits, &c->rank_bitmap[rank / 64 * 8], 8);
                if (npf__seq_read_retry(&ctl->config_seq, s))
                        continue;

                if (s == 0) {
                        memset(&w->args, 0, sizeof(w->args));
                        w->selected = 0;
                        w->prof_dir[0] = '\0';
                        return retries;
                }
                if (!len_ok || w->prof_dir[len] != '\0' || w->args.generation != s / 2)
                        return -EBADMSG;
                /* The bitmap is bytes; the word holding bit @rank is read as it lies in memory. */
                const uint8_t *bytes = (const uint8_t *) &bits;
                w->selected = w->args.rank_filter == NPF_RANKS_ALL ||
                              (rank < NPF_SHM_MAX_RANKS && (bytes[rank / 8 % 8] >> (rank % 8)) & 1);
                w->reserved = 0;
                return retries;
        }
        return -EAGAIN;
}

int npf_shm_read_extra(const npf_shm_ctl_t *ctl, uint64_t generation, char *buf)
{
        const npf_shm_config_t *c = &ctl->config;
        uint64_t words[NPF_SHM_EXTRA_MAX / 8];
        const char *text = (const char *) words;

        _Static_assert(offsetof(npf_shm_args_t, extra_len) == offsetof(npf_shm_args_t, prof_dir_len) + 4 &&
                       offsetof(npf_shm_args_t, prof_dir_len) % 8 == 0, "the two lengths are one word");
        for (int retries = 0; retries < NPF__READ_RETRIES; retries++) {
                uint64_t s = npf__seq_read_begin(&ctl->config_seq);
                if (s == UINT64_MAX)
                        return -EAGAIN;
                if (s != generation * 2)
                        return -ESTALE;
                uint32_t lens[2];
                npf__seq_copy_out(lens, &c->args.prof_dir_len, sizeof(lens));
                uint32_t len = lens[1];
                bool len_ok = len < NPF_SHM_EXTRA_MAX;
                if (len_ok)
                        npf__seq_copy_out(words, c->extra, npf__words(len + 1));
                if (npf__seq_read_retry(&ctl->config_seq, s))
                        continue;
                if (!len_ok || text[len] != '\0')
                        return -EBADMSG;
                memcpy(buf, text, len + 1);
                return retries;
        }
        return -EAGAIN;
}

int npf_shm_read_status(const npf_shm_ctl_t *ctl, npf_shm_status_t *ret_status)
{
        npf_shm_status_t st = { 0 };

        for (int retries = 0; retries < NPF__READ_RETRIES; retries++) {
                uint64_t s = npf__seq_read_begin(&ctl->status_seq);
                if (s == UINT64_MAX)
                        return -EAGAIN;
                npf__seq_copy_out(&st, &ctl->status, sizeof(st));
                if (npf__seq_read_retry(&ctl->status_seq, s))
                        continue;
                if (!memchr(st.path, '\0', sizeof(st.path)) || !memchr(st.key, '\0', sizeof(st.key)) ||
                    !memchr(st.message, '\0', sizeof(st.message)) || st.file_state > NPF_FILE_MISSING)
                        return -EBADMSG;
                *ret_status = st;
                return retries;
        }
        return -EAGAIN;
}
