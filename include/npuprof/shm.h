/* SPDX-License-Identifier: MIT */
/*
 * The node's shared-memory segment: the ABI between npuprofd and the training ranks.
 *
 * A segment named NAME is two POSIX shared-memory objects:
 *
 *   /NAME.ctl    the control block. Only the daemon writes it; it is created with mode
 *                0644 and ranks map it read-only. It holds the published configuration
 *                (the packed window arguments) and the state of the configuration file.
 *   /NAME.ranks  the rank table. Each rank writes only its own slot: pid, step, heartbeat
 *                and window state. A slot is a hot entry (claim, step, heartbeat, the
 *                sequence of its window state), which the daemon reads at every sweep, and
 *                a cold entry (the window state), which it reads only when that moved. Mode 0666, so that ranks of any user can claim a slot,
 *                or 0660 with the group the daemon is given.
 *
 * Everything below is an ABI: fixed-width fields at the offsets asserted at the end of this
 * file. Any change of layout bumps NPF_SHM_ABI_VERSION; attach refuses other versions.
 *
 * Memory ordering, in one place
 * -----------------------------
 * Both the configuration and the file status are published with a seqlock (one writer, any
 * number of readers), as in Linux's include/linux/seqlock.h:
 *
 *   writer: seq = s + 1 (odd: write in progress); release fence; store the data;
 *           store-release seq = s + 2.
 *   reader: s = load-acquire seq, retry while odd; load the data; acquire fence;
 *           retry if seq != s.
 *
 * The data is copied word by word with relaxed atomic loads and stores, so concurrent
 * access is a race on atomics, not undefined behaviour. The configuration's sequence only
 * moves when a new configuration is published, and moves by two each time, so a stable
 * config_seq is always twice the generation: "changed since generation G?" is the single
 * acquire load of npf_shm_changed(). Slots use the same seqlock for their window state (its
 * sequence in the hot entry, the state in the cold one); the step and heartbeat words are
 * single relaxed stores that readers take as hints.
 *
 * Slots: a claimant opens the rank table anew (an open file description of its own, close-
 * on-exec) and takes an open-file-description write lock (F_OFD_SETLK) on the bytes of a
 * free slot's hot entry (its 128 bytes in slots[]; the cold entry is never locked); a slot
 * it cannot lock is another claimant's. Holding the lock, it stores
 * lock_tag = tag + 1, takes the slot by compare-and-swap of its 64-bit claim word from
 * (tag, 0) to (tag + 1, pid), fills it in, stores proc_start last (release; 0 means "still
 * claiming"), then takes the rank by compare-and-swap of the rank's index entry from 0 to
 * (tag + 1, slot). An entry whose tag differs from its slot's current tag is stale and may
 * be cleared by anyone; tags make every such compare-and-swap immune to ABA. The holder
 * keeps the lock until it has released the slot; the kernel drops it when the holder dies,
 * in whatever pid namespace it ran, and a forked child closes its copy (libnpuprof does so
 * at fork), so that the lock lives exactly as long as the holder.
 * A holder is alive while a write lock is held on its hot entry's bytes (F_OFD_GETLK; a
 * kernel that cannot tell counts as alive). Without one, a claim whose lock_tag is its tag was
 * made under a lock, and its holder is gone. Any other claim was made by a holder that
 * takes no lock (an older libnpuprof) and is judged by its pid, as before: gone only when
 * the pid does not exist (ESRCH) or the pid's start time differs; any other error reading
 * /proc counts as alive. A reclaimer swaps the claim word from (tag, pid) to (tag,
 * NPF_SLOT_RECLAIMING), clears the index entry (tag, slot), resets the slot and stores a
 * free claim word (tag, 0) last. A dead writer can leave a sequence odd; the next writer
 * rounds it up to even before writing, so parity is never inverted.
 *
 * The pid in the claim word is the holder's in its own pid namespace, which may not be the
 * reader's: a reader finds the holder's pid in its own namespace through /proc (the process
 * that started at proc_start and holds the slot's lock), never by the recorded pid alone.
 */
#ifndef NPUPROF_SHM_H
#define NPUPROF_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NPF_SHM_ABI_VERSION    3u
#define NPF_SHM_CTL_MAGIC      UINT64_C(0x4c5443464f52504e) /* "NPROFCTL" little-endian */
#define NPF_SHM_RANKS_MAGIC    UINT64_C(0x534b4e52464f524e) /* "NROFRNKS" little-endian */

#define NPF_SHM_NAME_DEFAULT   "npuprof"
#define NPF_SHM_NAME_MAX       200u     /* bytes of NAME, without the suffix */
#define NPF_SHM_PATH_MAX       4096u    /* prof_dir, including the NUL */
#define NPF_SHM_EXTRA_MAX      4096u    /* extra JSON, including the NUL */
#define NPF_SHM_MAX_RANKS      65536u   /* global rank ids 0 .. 65535 */
#define NPF_SHM_SLOTS          1024u    /* ranks on one node */
#define NPF_SHM_ERR_MAX        256u     /* message buffers of the API below */

#define NPF_STEP_NONE          INT64_C(-1)   /* no step: relative or time-bounded windows */
#define NPF_STEP_NEXT          INT64_C(-1)   /* start_step: the step after the rank reads it */
#define NPF_STEP_MAX           (INT64_C(1) << 60)

/* Which schema the configuration file was written in. */
enum {
        NPF_DIALECT_NATIVE    = 1,
        NPF_DIALECT_TORCH_NPU = 2,
        NPF_DIALECT_MINDSPORE = 3,
};

/* Boolean switches of both frameworks, bits of npf_shm_config_t.flags. */
enum {
        NPF_FLAG_RECORD_SHAPES       = 1u << 0,
        NPF_FLAG_PROFILE_MEMORY      = 1u << 1,
        NPF_FLAG_WITH_STACK          = 1u << 2,
        NPF_FLAG_WITH_FLOPS          = 1u << 3,
        NPF_FLAG_WITH_MODULES        = 1u << 4,
        NPF_FLAG_L2_CACHE            = 1u << 5,
        NPF_FLAG_OP_ATTR             = 1u << 6,
        NPF_FLAG_MSTX                = 1u << 7,
        NPF_FLAG_PARALLEL_STRATEGY   = 1u << 8,
        NPF_FLAG_DATA_SIMPLIFICATION = 1u << 9,
        NPF_FLAG_RECORD_OP_ARGS      = 1u << 10,
        NPF_FLAG_SYS_IO              = 1u << 11,
        NPF_FLAG_SYS_INTERCONNECTION = 1u << 12,
};

enum { NPF_LEVEL_NONE = -1, NPF_LEVEL_0 = 0, NPF_LEVEL_1 = 1, NPF_LEVEL_2 = 2 };

/* AI Core metrics, with MindSpore's integer encoding. */
enum {
        NPF_AIC_NONE = -1,
        NPF_AIC_PIPE_UTILIZATION = 0,
        NPF_AIC_ARITHMETIC_UTILIZATION = 1,
        NPF_AIC_MEMORY = 2,
        NPF_AIC_MEMORY_L0 = 3,
        NPF_AIC_MEMORY_UB = 4,
        NPF_AIC_RESOURCE_CONFLICT_RATIO = 5,
        NPF_AIC_L2_CACHE = 6,
        NPF_AIC_MEMORY_ACCESS = 7,
};

enum { NPF_ACT_CPU = 1u << 0, NPF_ACT_NPU = 1u << 1 };
enum { NPF_ANALYSE_OFF = -1, NPF_ANALYSE_SYNC = 0, NPF_ANALYSE_ASYNC = 1 };
enum { NPF_EXPORT_TEXT = 1u << 0, NPF_EXPORT_DB = 1u << 1 };
enum {
        NPF_HOST_SYS_CPU = 1u << 0,
        NPF_HOST_SYS_MEM = 1u << 1,
        NPF_HOST_SYS_DISK = 1u << 2,
        NPF_HOST_SYS_NETWORK = 1u << 3,
        NPF_HOST_SYS_OSRT = 1u << 4,
        NPF_HOST_SYS_NUMA = 1u << 5,
};
/* NPF_BACKEND_KINETO is never a rank's: the daemon records a libkineto process's windows with it. */
enum { NPF_BACKEND_AUTO = 0, NPF_BACKEND_ACL = 1, NPF_BACKEND_HOST = 2, NPF_BACKEND_KINETO = 3 };
enum { NPF_RANKS_ALL = 0, NPF_RANKS_LIST = 1 };

/*
 * The packed window arguments. A window covers the steps [start_step, stop_step]; its first
 * `warmup` steps are collected but discarded, as torch_npu's schedule does.
 */
typedef struct npf_shm_args {
        uint64_t generation;            /* copy of config_seq / 2 at publication */
        uint64_t checksum;              /* npf_shm_config_checksum() of the whole config */
        uint64_t published_ns;          /* CLOCK_REALTIME of publication */
        int64_t  start_step;            /* absolute, or NPF_STEP_NEXT */
        int64_t  stop_step;             /* inclusive; NPF_STEP_NONE if relative or timed */
        uint64_t step_count;            /* steps in the window, warmup included; 0 = timed */
        uint64_t warmup;
        uint64_t start_at_multiple_of;  /* 0 = off */
        uint64_t duration_ms;           /* 0 = off; else the window closes by time */
        int64_t  gc_detect_threshold_us;/* -1 = off */
        uint32_t enabled;               /* 0: profiling off, no window */
        uint32_t dialect;               /* NPF_DIALECT_* */
        uint32_t flags;                 /* NPF_FLAG_* */
        int32_t  level;                 /* NPF_LEVEL_* */
        int32_t  aic_metrics;           /* NPF_AIC_* */
        uint32_t activities;            /* NPF_ACT_* */
        int32_t  analyse_mode;          /* NPF_ANALYSE_* */
        uint32_t export_type;           /* NPF_EXPORT_* */
        uint32_t host_sys;              /* NPF_HOST_SYS_* */
        uint32_t backend;               /* NPF_BACKEND_* */
        uint32_t rank_filter;           /* NPF_RANKS_* */
        uint32_t rank_count;            /* ranks set in rank_bitmap */
        uint32_t prof_dir_len;          /* bytes before the NUL of prof_dir */
        uint32_t extra_len;             /* bytes before the NUL of extra */
        uint32_t root_len;              /* prof_dir's first bytes that are the output root;
                                           nothing below them may be a symbolic link. 0: unknown */
        uint8_t  reserved[52];
} npf_shm_args_t;

/* The published configuration: the arguments, then the variable-length parts. */
typedef struct npf_shm_config {
        npf_shm_args_t args;
        char     prof_dir[NPF_SHM_PATH_MAX];
        char     extra[NPF_SHM_EXTRA_MAX];  /* JSON object: metadata, mstx domains */
        uint8_t  rank_bitmap[NPF_SHM_MAX_RANKS / 8]; /* bit r set: global rank r collects */
} npf_shm_config_t;

/* State of the watched configuration file, as the daemon last read it. */
enum {
        NPF_FILE_UNKNOWN = 0,   /* not read yet */
        NPF_FILE_VALID   = 1,
        NPF_FILE_INVALID = 2,   /* the last good configuration stays in force */
        NPF_FILE_MISSING = 3,
};

typedef struct npf_shm_status {
        uint32_t file_state;            /* NPF_FILE_* */
        uint32_t line;                  /* of the first error, 1-based; 0 = none */
        uint32_t column;
        uint32_t error_count;           /* invalid versions of the file seen so far */
        uint64_t checked_ns;            /* CLOCK_REALTIME of the last read */
        uint64_t good_generation;       /* generation of the configuration in force */
        uint64_t changed_ns;            /* when file_state or the error last changed */
        uint8_t  reserved[24];
        char     path[1024];
        char     key[128];              /* key path of the first error, "" if none */
        char     message[512];
} npf_shm_status_t;

typedef struct npf_shm_ctl {
        uint64_t magic;                 /* NPF_SHM_CTL_MAGIC, stored last at creation */
        uint32_t abi_version;
        uint32_t ctl_size;              /* sizeof(npf_shm_ctl_t) */
        uint32_t config_size;
        uint32_t status_size;
        uint64_t created_ns;
        uint32_t daemon_pid;
        uint32_t reserved0;
        uint64_t daemon_heartbeat_ns;   /* CLOCK_MONOTONIC, relaxed */
        uint8_t  pad0[16];
        _Alignas(64) uint64_t config_seq;  /* seqlock of config: 2 * generation when even */
        uint8_t  pad1[56];
        _Alignas(64) uint64_t status_seq;  /* seqlock of status */
        uint8_t  pad2[56];
        _Alignas(64) npf_shm_config_t config;
        _Alignas(64) npf_shm_status_t status;
} npf_shm_ctl_t;

/* Window states of a slot. */
enum {
        NPF_WINDOW_IDLE = 0,
        NPF_WINDOW_ARMED,       /* waiting for its start step */
        NPF_WINDOW_COLLECTING,
        NPF_WINDOW_FLUSHING,
        NPF_WINDOW_DONE,
        NPF_WINDOW_MISSED,      /* already past start_step; state_step says where */
        NPF_WINDOW_FAILED,      /* message says why */
        NPF_WINDOW_FILTERED,    /* this rank is not in the rank list */
        NPF_WINDOW_LOST,        /* the rank died while collecting */
        NPF_WINDOW__COUNT,
};

/* A slot's window state, written by its rank under the slot's seqlock. */
typedef struct npf_shm_slot_state {
        uint64_t generation;            /* generation this window belongs to */
        uint32_t state;                 /* NPF_WINDOW_* */
        uint32_t backend;
        int64_t  window_start;
        int64_t  window_stop;
        int64_t  state_step;            /* step at which state was entered */
        uint64_t state_ns;              /* CLOCK_REALTIME of that */
        uint32_t rank;                  /* the slot's rank and owner pid when this was written: */
        uint32_t pid;                   /* kept with an ended window, as a slot is reused. 0: unknown */
        char     message[256];          /* why a window failed, NUL-terminated */
        char     output[128];           /* window directory, relative to prof_dir */
} npf_shm_slot_state_t;

#define NPF_SLOT_ENDED 4u

/*
 * A slot is two entries at the same index of two arrays: its hot entry (npf_shm_slot_t, in
 * slots[]), the words the daemon reads at every sweep, and its cold entry
 * (npf_shm_slot_cold_t, in cold[]), the window state, which it reads only when the hot
 * entry's seq moved. An idle table is swept without touching a byte of cold[], and a rank's
 * per-step stores stay on its own 128 bytes: two ranks never share a cache line, nor the
 * pair of lines an adjacent-line prefetcher fetches together.
 */
typedef struct npf_shm_slot {
        /*
         * Identity, written at claim. The claim word holds the owner's pid in its low 32 bits
         * (0 = free) and a tag in its high 32 bits that grows with every claim of the slot;
         * it changes only by compare-and-swap of all 64 bits, so a reclaimer can never free
         * a slot that was claimed again since it looked, even by a process with the same pid.
         */
        uint64_t claim;
        uint32_t rank;
        int32_t  local_device;          /* -1 = unknown */
        uint64_t proc_start;            /* /proc/PID/stat starttime; 0 while claiming */
        int64_t  step;                  /* last step seen, relaxed; -1 = none yet */
        uint64_t heartbeat_ns;          /* CLOCK_MONOTONIC of that step, relaxed */
        uint64_t claimed_ns;            /* CLOCK_REALTIME */
        /*
         * The tag of the last claim made under an open-file-description lock on this slot's
         * hot entry (its 128 bytes in slots[]). Writers that take no lock leave it alone,
         * and their claims, whose tags never equal it, are judged by pid.
         */
        uint32_t lock_tag;
        /*
         * A request for the holder's stacks (shm/slot.h, npf_slot_ask_stacks()): the daemon
         * adds one to stacks_asked and wakes the futex on it; the holder writes its threads'
         * stacks, stores stacks_error (0, or the positive errno of a failed write) and then,
         * last, stacks_done = the request it answered. A claim starts with stacks_asked equal
         * to stacks_done. A holder that does not know them never answers.
         */
        uint32_t stacks_asked;
        uint32_t stacks_done;
        int32_t  stacks_error;
        /* The seqlock of this slot's cold entry: it moves with every change of the window state. */
        _Alignas(64) uint64_t seq;
        /*
         * How many windows have ended in this slot (cold[].ended keeps the last
         * NPF_SLOT_ENDED), written under seq: here, so that a claimant looking for the least
         * used free slot reads hot entries alone.
         */
        uint64_t windows_ended;
        uint8_t  pad0[48];
} npf_shm_slot_t;

/* A slot's cold entry: written by its rank under the seq of its hot entry, read when seq moved. */
typedef struct npf_shm_slot_cold {
        npf_shm_slot_state_t st;        /* what the rank is doing now */
        /*
         * The last NPF_SLOT_ENDED windows that ended here (done, failed, missed, filtered),
         * window n at ended[n % NPF_SLOT_ENDED], n counted by the hot entry's windows_ended:
         * a rank moves on to the next generation at the very step a window ends, so the
         * daemon records from here every window the count says it has not seen.
         */
        npf_shm_slot_state_t ended[NPF_SLOT_ENDED];
        uint8_t  pad0[40];
} npf_shm_slot_cold_t;


#define NPF_SLOT_PID(claim) ((uint32_t) ((claim) & 0xffffffffu))
#define NPF_SLOT_TAG(claim) ((uint32_t) ((claim) >> 32))

/*
 * An entry of the rank index: 0, or the slot number + 1 in the low NPF_INDEX_SLOT_BITS
 * bits and the low bits of that claim's tag above them, so that an entry left by an
 * earlier claim of the same slot never equals a current one.
 */
#define NPF_INDEX_SLOT_BITS 11u
#define NPF_INDEX_ENTRY(slot, tag) ((((uint32_t) (tag)) << NPF_INDEX_SLOT_BITS) | ((uint32_t) (slot) + 1u))
#define NPF_INDEX_SLOT(entry) (((entry) & ((1u << NPF_INDEX_SLOT_BITS) - 1u)) - 1u)
#define NPF_INDEX_TAG(entry) ((entry) >> NPF_INDEX_SLOT_BITS)

typedef struct npf_shm_ranks {
        uint64_t magic;                 /* NPF_SHM_RANKS_MAGIC, stored last at creation */
        uint32_t abi_version;
        uint32_t header_size;
        uint32_t slot_count;
        uint32_t slot_size;
        uint32_t index_count;
        uint32_t cold_size;             /* sizeof(npf_shm_slot_cold_t) */
        uint64_t table_size;            /* sizeof(npf_shm_ranks_t) */
        uint8_t  pad0[88];
        /*
         * The hot entries first, right after the header, so that the first 33 pages of the
         * object are all a sweep reads; then the rank index, then the cold entries, from a
         * page of their own on: no page holds both cold bytes and anything else.
         */
        _Alignas(128) npf_shm_slot_t slots[NPF_SHM_SLOTS];
        uint32_t index[NPF_SHM_MAX_RANKS];      /* rank -> NPF_INDEX_ENTRY(); 0 = unclaimed */
        uint8_t  pad1[3968];
        _Alignas(64) npf_shm_slot_cold_t cold[NPF_SHM_SLOTS];
} npf_shm_ranks_t;

/* One rank's view of the configuration, as npf_shm_read_window() returns it. */
typedef struct npf_shm_window {
        npf_shm_args_t args;
        uint32_t selected;              /* the rank filter selects this rank */
        uint32_t reserved;
        char     prof_dir[NPF_SHM_PATH_MAX];
} npf_shm_window_t;

/* Handle on an opened segment; owned by the caller, freed with npf_shm_close(). */
typedef struct npf_shm npf_shm_t;

enum {
        NPF_SHM_WRITER = 1u << 0,       /* the daemon: map the control block writable */
        NPF_SHM_CREATE = 1u << 1,       /* with WRITER: create if absent, adopt if valid */
        NPF_SHM_RDONLY = 1u << 2,       /* an observer (npuprofctl): map the rank table read-only too */
};

/*
 * npf_shm_open() - open the segment @name.
 * With NPF_SHM_WRITER|NPF_SHM_CREATE, creates both objects or adopts a valid existing
 * segment of this ABI (generation, slots and windows are kept). Without NPF_SHM_WRITER,
 * maps the control block read-only and the rank table read-write (read-only too with
 * NPF_SHM_RDONLY).
 * A writer holds an open-file-description lock on the control block until it closes, so
 * a second writer of the same segment gets -EBUSY. Every handle keeps a close-on-exec
 * descriptor on the rank table, through which slot locks are asked about.
 * Return: 0, -ENOENT if absent, -EPROTO for another ABI or a damaged header (the
 * message in @err, of NPF_SHM_ERR_MAX bytes, says which), -EAGAIN while the daemon is
 * still creating it, -EBUSY if another writer holds it, -EPERM if a writer finds it owned
 * by another user, or another -errno.
 * Context: any thread; not async-signal-safe.
 */
int npf_shm_open(const char *name, unsigned flags, npf_shm_t **ret_shm, char *err);

/*
 * npf_shm_open_group() - npf_shm_open(), and with NPF_SHM_CREATE the rank table is given
 * group @ranks_group and mode 0660 (made so before anyone else can open it; an adopted one
 * is put so). (gid_t) -1 gives mode 0666, as npf_shm_open() does.
 * Return: as npf_shm_open(), or the -errno of fchown() when the group may not be given
 * (@err says so).
 */
int npf_shm_open_group(const char *name, unsigned flags, gid_t ranks_group, npf_shm_t **ret_shm, char *err);

/* Unmap and close. Accepts NULL; returns NULL. */
npf_shm_t *npf_shm_close(npf_shm_t *shm);

/*
 * The writer's defence against a rank table cut short: any user who may attach may also
 * truncate it. npf_shm_guard_ranks() watches its mapping for SIGBUS (lib/sigbus.h), so that
 * touching it past the new end costs a page of zeros, not the process; npf_shm_repair_ranks(),
 * at each sweep, gives a table that was cut short its size back and maps it again.
 * Return: guard 0 or a negative errno; repair 1 when it put the table right, 0 when nothing
 * was wrong, or a negative errno.
 */
int npf_shm_guard_ranks(npf_shm_t *shm);
int npf_shm_repair_ranks(npf_shm_t *shm);

/* Remove both objects of segment @name; mappings stay valid. Return: 0 or -errno. */
int npf_shm_unlink(const char *name);

/* Return: 0 if @name is a valid segment name, else -EINVAL with the reason in @err. */
int npf_shm_name_check(const char *name, char *err);

const npf_shm_ctl_t *npf_shm_ctl(const npf_shm_t *shm);
npf_shm_ranks_t *npf_shm_ranks(const npf_shm_t *shm);
bool npf_shm_adopted(const npf_shm_t *shm);

/*
 * npf_shm_publish_config() - publish @config as the next generation.
 * The generation, checksum and published_ns fields of @config are ignored and filled in.
 * Return: 0 and the new generation in @ret_generation, or -EPERM if not the writer,
 * -EINVAL if @config's lengths are out of bounds.
 * Context: the single writer (the daemon's loop thread).
 */
int npf_shm_publish_config(npf_shm_t *shm, const npf_shm_config_t *config, uint64_t *ret_generation);

/* Publish the state of the configuration file. Return: 0 or -EPERM. Context: the writer. */
int npf_shm_publish_status(npf_shm_t *shm, const npf_shm_status_t *status);

/* Store the daemon's pid and a heartbeat (CLOCK_MONOTONIC ns). Context: the writer. */
void npf_shm_heartbeat(npf_shm_t *shm, uint64_t now_ns);

/*
 * npf_shm_read_config() - copy the whole published configuration, untorn.
 * Return: the number of retries (>= 0), or -EBADMSG if the copy is not well-formed
 * (lengths, NUL terminators, checksum), -EAGAIN if no stable copy could be had, -ENOMEM.
 * @ret_config is written only on success.
 * Context: any thread of any process; lock-free, never blocks the writer.
 */
int npf_shm_read_config(const npf_shm_ctl_t *ctl, npf_shm_config_t *ret_config);

/*
 * npf_shm_read_window() - copy what rank @rank needs to run its window, untorn: the
 * arguments, prof_dir and whether the rank filter selects @rank. Cheaper than
 * npf_shm_read_config(): it copies only the bytes in use, straight into @window, which
 * is therefore scratch while reading and valid only when the call succeeds (a second
 * copy would cost a rank up to 80 ns).
 * Return: retries (>= 0), -EBADMSG or -EAGAIN as npf_shm_read_config().
 * Context: any thread; this is what a rank calls when npf_shm_changed() says so.
 */
int npf_shm_read_window(const npf_shm_ctl_t *ctl, uint32_t rank, npf_shm_window_t *window);

/*
 * npf_shm_read_extra() - copy the extra JSON of generation @generation, untorn and
 * NUL-terminated, into @buf of NPF_SHM_EXTRA_MAX bytes (scratch unless the call succeeds).
 * Return: retries (>= 0), -ESTALE when another generation is in force, -EBADMSG or -EAGAIN.
 * Context: any thread; a rank calls it once per window.
 */
int npf_shm_read_extra(const npf_shm_ctl_t *ctl, uint64_t generation, char *buf);

/* Copy the file status, untorn and NUL-checked, into @ret_status on success.
 * Return: retries, -EBADMSG or -EAGAIN. */
int npf_shm_read_status(const npf_shm_ctl_t *ctl, npf_shm_status_t *ret_status);

/* FNV-1a over @config with its checksum field taken as zero. */
uint64_t npf_shm_config_checksum(const npf_shm_config_t *config);

/* Return: true if bit @rank of @config's rank filter selects it. */
bool npf_shm_config_selects(const npf_shm_config_t *config, uint32_t rank);

/*
 * npf_shm_changed() - has a configuration other than generation @generation been
 * published (or is one being published)?
 * Return: true if so; then read it with npf_shm_read_window().
 * Context: the per-step fast path. One acquire load and one compare, no system call.
 */
static inline bool npf_shm_changed(const npf_shm_ctl_t *ctl, uint64_t generation)
{
        return atomic_load_explicit((_Atomic uint64_t *) &ctl->config_seq,
                                    memory_order_acquire) != generation << 1;
}

/*
 * npf_shm_slot_note_step() - record that the holder of @slot is at step @step.
 * Context: the slot's holder, on the per-step fast path: one relaxed store.
 */
static inline void npf_shm_slot_note_step(npf_shm_slot_t *slot, int64_t step)
{
        atomic_store_explicit((_Atomic int64_t *) &slot->step, step, memory_order_relaxed);
}

/*
 * npf_shm_generation() - the generation in force: the last one published, or the one
 * before while a publication is under way (config_seq is odd then).
 * Context: any reader of the control block.
 */
static inline uint64_t npf_shm_generation(const npf_shm_ctl_t *ctl)
{
        return atomic_load_explicit((_Atomic uint64_t *) &ctl->config_seq, memory_order_acquire) >> 1;
}

/*
 * The canonical names of the segment's enumerations, as the protocol, the logs and the
 * manifests say them: "native", "torch_npu", "mindspore"; "LevelNone" to "Level2"; "auto",
 * "acl", "host"; "idle" to "lost"; "valid", "invalid", "missing" (a file state). A value
 * outside its enumeration is "unknown" (a dialect, a file state) or "invalid".
 */
const char *npf_shm_dialect_name(uint32_t dialect);
const char *npf_shm_level_name(int32_t level);
const char *npf_shm_backend_name(uint32_t backend);
const char *npf_shm_window_state_name(uint32_t state);
const char *npf_shm_file_state_name(uint32_t file_state);

/* ABI layout. Offsets are part of the contract; a change bumps NPF_SHM_ABI_VERSION. */
_Static_assert(sizeof(npf_shm_args_t) == 192, "npf_shm_args_t size");
_Static_assert(sizeof(npf_shm_config_t) == 16576, "npf_shm_config_t size");
_Static_assert(offsetof(npf_shm_config_t, args) == 0, "abi");
_Static_assert(offsetof(npf_shm_args_t, generation) == 0, "abi");
_Static_assert(offsetof(npf_shm_args_t, checksum) == 8, "abi");
_Static_assert(offsetof(npf_shm_args_t, published_ns) == 16, "abi");
_Static_assert(offsetof(npf_shm_args_t, start_step) == 24, "abi");
_Static_assert(offsetof(npf_shm_args_t, stop_step) == 32, "abi");
_Static_assert(offsetof(npf_shm_args_t, step_count) == 40, "abi");
_Static_assert(offsetof(npf_shm_args_t, warmup) == 48, "abi");
_Static_assert(offsetof(npf_shm_args_t, start_at_multiple_of) == 56, "abi");
_Static_assert(offsetof(npf_shm_args_t, duration_ms) == 64, "abi");
_Static_assert(offsetof(npf_shm_args_t, gc_detect_threshold_us) == 72, "abi");
_Static_assert(offsetof(npf_shm_args_t, enabled) == 80, "abi");
_Static_assert(offsetof(npf_shm_args_t, dialect) == 84, "abi");
_Static_assert(offsetof(npf_shm_args_t, flags) == 88, "abi");
_Static_assert(offsetof(npf_shm_args_t, level) == 92, "abi");
_Static_assert(offsetof(npf_shm_args_t, aic_metrics) == 96, "abi");
_Static_assert(offsetof(npf_shm_args_t, activities) == 100, "abi");
_Static_assert(offsetof(npf_shm_args_t, analyse_mode) == 104, "abi");
_Static_assert(offsetof(npf_shm_args_t, export_type) == 108, "abi");
_Static_assert(offsetof(npf_shm_args_t, host_sys) == 112, "abi");
_Static_assert(offsetof(npf_shm_args_t, backend) == 116, "abi");
_Static_assert(offsetof(npf_shm_args_t, rank_filter) == 120, "abi");
_Static_assert(offsetof(npf_shm_args_t, rank_count) == 124, "abi");
_Static_assert(offsetof(npf_shm_args_t, prof_dir_len) == 128, "abi");
_Static_assert(offsetof(npf_shm_args_t, extra_len) == 132, "abi");
_Static_assert(offsetof(npf_shm_config_t, prof_dir) == 192, "abi");
_Static_assert(offsetof(npf_shm_config_t, extra) == 4288, "abi");
_Static_assert(offsetof(npf_shm_config_t, rank_bitmap) == 8384, "abi");

_Static_assert(sizeof(npf_shm_status_t) == 1728, "npf_shm_status_t size");
_Static_assert(offsetof(npf_shm_status_t, file_state) == 0, "abi");
_Static_assert(offsetof(npf_shm_status_t, line) == 4, "abi");
_Static_assert(offsetof(npf_shm_status_t, column) == 8, "abi");
_Static_assert(offsetof(npf_shm_status_t, error_count) == 12, "abi");
_Static_assert(offsetof(npf_shm_status_t, checked_ns) == 16, "abi");
_Static_assert(offsetof(npf_shm_status_t, good_generation) == 24, "abi");
_Static_assert(offsetof(npf_shm_status_t, changed_ns) == 32, "abi");
_Static_assert(offsetof(npf_shm_status_t, path) == 64, "abi");
_Static_assert(offsetof(npf_shm_status_t, key) == 1088, "abi");
_Static_assert(offsetof(npf_shm_status_t, message) == 1216, "abi");

_Static_assert(sizeof(npf_shm_ctl_t) == 18496, "npf_shm_ctl_t size");
_Static_assert(offsetof(npf_shm_ctl_t, magic) == 0, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, abi_version) == 8, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, ctl_size) == 12, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, config_size) == 16, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, status_size) == 20, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, created_ns) == 24, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, daemon_pid) == 32, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, daemon_heartbeat_ns) == 40, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, config_seq) == 64, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, status_seq) == 128, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, config) == 192, "abi");
_Static_assert(offsetof(npf_shm_ctl_t, status) == 16768, "abi");

_Static_assert(sizeof(npf_shm_slot_t) == 128, "npf_shm_slot_t size");
_Static_assert(_Alignof(npf_shm_slot_t) == 64, "abi");
_Static_assert(offsetof(npf_shm_slot_t, claim) == 0, "abi");
_Static_assert(offsetof(npf_shm_slot_t, rank) == 8, "abi");
_Static_assert(offsetof(npf_shm_slot_t, local_device) == 12, "abi");
_Static_assert(offsetof(npf_shm_slot_t, proc_start) == 16, "abi");
_Static_assert(offsetof(npf_shm_slot_t, step) == 24, "abi");
_Static_assert(offsetof(npf_shm_slot_t, heartbeat_ns) == 32, "abi");
_Static_assert(offsetof(npf_shm_slot_t, claimed_ns) == 40, "abi");
_Static_assert(offsetof(npf_shm_slot_t, lock_tag) == 48, "abi");
_Static_assert(offsetof(npf_shm_slot_t, stacks_asked) == 52, "abi");
_Static_assert(offsetof(npf_shm_slot_t, stacks_done) == 56, "abi");
_Static_assert(offsetof(npf_shm_slot_t, stacks_error) == 60, "abi");
_Static_assert(offsetof(npf_shm_slot_t, seq) == 64, "abi");
_Static_assert(offsetof(npf_shm_slot_t, windows_ended) == 72, "abi");
_Static_assert(NPF_SHM_SLOTS < (1u << NPF_INDEX_SLOT_BITS), "slot + 1 fits the index entry");
_Static_assert(sizeof(npf_shm_slot_cold_t) == 2240, "npf_shm_slot_cold_t size");
_Static_assert(offsetof(npf_shm_slot_cold_t, st) == 0, "abi");
_Static_assert(offsetof(npf_shm_slot_cold_t, ended) == 440, "abi");
_Static_assert(sizeof(((npf_shm_slot_cold_t *) 0)->ended) / sizeof(npf_shm_slot_state_t) == NPF_SLOT_ENDED, "abi");
_Static_assert(sizeof(npf_shm_slot_state_t) == 440, "npf_shm_slot_state_t size");
_Static_assert(offsetof(npf_shm_slot_state_t, generation) == 0, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, state) == 8, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, backend) == 12, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, window_start) == 16, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, window_stop) == 24, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, state_step) == 32, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, state_ns) == 40, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, rank) == 48, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, pid) == 52, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, message) == 56, "abi");
_Static_assert(offsetof(npf_shm_slot_state_t, output) == 312, "abi");

_Static_assert(offsetof(npf_shm_ranks_t, magic) == 0, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, abi_version) == 8, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, header_size) == 12, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, slot_count) == 16, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, slot_size) == 20, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, index_count) == 24, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, cold_size) == 28, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, table_size) == 32, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, slots) == 128, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, index) == 128 + 128 * 1024, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, cold) == 397312, "abi");
_Static_assert(offsetof(npf_shm_ranks_t, cold) % 4096 == 0, "cold entries start a page");
_Static_assert(sizeof(npf_shm_ranks_t) == 397312 + 2240 * 1024, "npf_shm_ranks_t size");
_Static_assert(NPF_SHM_SLOTS >= 256, "at least 256 ranks per node");

#endif /* NPUPROF_SHM_H */
