/* SPDX-License-Identifier: MIT */
/*
 * The device timeline of a Chrome trace. Events arrive in the file's order and the metadata
 * that names a process may come after its events, so the scan keeps a 48-byte record of each
 * event that may matter and classifies them once the file is read.
 */
#include "lib/array.h"
#include "replay/device-trace.h"
#include "replay/evscan.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK ((size_t) 4 << 20)        /* bytes fed to the scanner at a time */
#define NONE INT64_MIN
#define STEP_PREFIX "ProfilerStep#"
#define MAX_PIDS 4096u
#define MAX_THREADS 65536u

enum what {
        REC_STEP,                       /* a ProfilerStep#N span of the host */
        REC_KERNEL,                     /* Kineto */
        REC_MEMORY,
        REC_NPU,                        /* no category: classified by its process at the end */
};

/* What a process is, from its process_name. */
enum pkind { P_UNKNOWN, P_HARDWARE, P_HCCL, P_CANN, P_OTHER };

typedef struct rec {
        int64_t ts, dur, pid, tid;
        int64_t link;                   /* connection_id or correlation, NONE */
        uint64_t bytes;
        uint32_t name;
        uint8_t what;
        uint8_t task_type;              /* REC_NPU: a task's "Task Type" (enum ttype), 0 for none */
        bool nccl;
} rec_t;

/* "Task Type" of an Ascend Hardware task. */
enum ttype { TT_NONE, TT_AI_CORE, TT_AI_VECTOR, TT_AI_CPU, TT_DSA, TT_MEMORY, TT_OTHER };

typedef struct proc {
        int64_t pid;
        uint8_t kind;
} proc_t;

typedef struct thread {
        int64_t pid, tid;
        uint32_t name;
        bool comm;                      /* an HCCL "Group N Communication" track */
} thread_t;

/* Host time of each launch by its connection id or correlation: open addressing. */
typedef struct launches {
        int64_t *keys, *ts;
        size_t cap, n;
} launches_t;

typedef struct loader {
        npf_device_t *d;
        rec_t *recs;
        size_t n_recs, cap_recs;
        proc_t *procs;
        size_t n_procs, last_proc;
        thread_t *threads;
        size_t n_threads, cap_threads;
        launches_t launches;
        int64_t rank;
        bool device_tracks;
        bool kernels, ascend;           /* Kineto's GPU kernels, Ascend Hardware tasks */
        char *err;
        int failed;                     /* the first -errno of a callback */
} loader_t;


static uint64_t mix(int64_t k)
{
        uint64_t h = (uint64_t) k * 0x9e3779b97f4a7c15u;
        return h ^ (h >> 31);
}

static int launches_put(launches_t *l, int64_t key, int64_t ts)
{
        if (key == NONE)
                return 0;
        if ((l->n + 1) * 2 > l->cap) {
                launches_t g = { .cap = l->cap ? l->cap * 2 : 4096 };
                if (!(g.keys = malloc(g.cap * sizeof(*g.keys))) || !(g.ts = malloc(g.cap * sizeof(*g.ts)))) {
                        free(g.keys);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < g.cap; i++)
                        g.keys[i] = NONE;
                for (size_t i = 0; i < l->cap; i++)
                        if (l->keys[i] != NONE)
                                launches_put(&g, l->keys[i], l->ts[i]);
                free(l->keys);
                free(l->ts);
                *l = g;
        }
        for (size_t i = mix(key) & (l->cap - 1);; i = (i + 1) & (l->cap - 1)) {
                if (l->keys[i] == key)
                        return 0;               /* the first call of an id is its launch */
                if (l->keys[i] == NONE) {
                        l->keys[i] = key;
                        l->ts[i] = ts;
                        l->n++;
                        return 0;
                }
        }
}

static int64_t launches_get(const launches_t *l, int64_t key)
{
        if (key == NONE || !l->cap)
                return NPF_DEVICE_NO_TIME;
        for (size_t i = mix(key) & (l->cap - 1);; i = (i + 1) & (l->cap - 1)) {
                if (l->keys[i] == key)
                        return l->ts[i];
                if (l->keys[i] == NONE)
                        return NPF_DEVICE_NO_TIME;
        }
}

static bool has_prefix(npf_evscan_str_t s, const char *prefix)
{
        size_t n = strlen(prefix);
        return s.p && s.n >= n && memcmp(s.p, prefix, n) == 0;
}

static bool contains_nocase(npf_evscan_str_t s, const char *needle)
{
        size_t n = strlen(needle);

        for (size_t i = 0; s.p && i + n <= s.n; i++)
                if (strncasecmp(s.p + i, needle, n) == 0)
                        return true;
        return false;
}

static int64_t intern(loader_t *l, npf_evscan_str_t s)
{
        char buf[1024];

        size_t n = npf_evscan_unescape(s, buf, sizeof(buf));

        /* A longer name (a CUDA kernel's whole signature) keeps its first bytes, cut at a
         * character's start so that it stays UTF-8. */
        if (n >= sizeof(buf)) {
                size_t i = n = sizeof(buf) - 1;
                while (i > 0 && n - i < 4 && ((unsigned char) buf[i - 1] & 0xc0) == 0x80)
                        i--;
                if (i > 0) {
                        unsigned char lead = (unsigned char) buf[i - 1];
                        size_t len = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
                        if (i - 1 + len > n)
                                n = i - 1;
                }
        }
        return npf_device_intern(l->d, buf, strnlen(buf, n));
}

static proc_t *proc_of(loader_t *l, int64_t pid)
{
        for (size_t i = 0; i < l->n_procs; i++)
                if (l->procs[i].pid == pid)
                        return &l->procs[i];
        return NULL;
}

static uint8_t proc_kind(loader_t *l, int64_t pid)
{
        /* Events come in runs of one process. */
        if (l->last_proc < l->n_procs && l->procs[l->last_proc].pid == pid)
                return l->procs[l->last_proc].kind;
        for (size_t i = 0; i < l->n_procs; i++) {
                if (l->procs[i].pid == pid) {
                        l->last_proc = i;
                        return l->procs[i].kind;
                }
        }
        return P_UNKNOWN;
}

static const thread_t *thread_of(const loader_t *l, int64_t pid, int64_t tid)
{
        for (size_t i = 0; i < l->n_threads; i++)
                if (l->threads[i].pid == pid && l->threads[i].tid == tid)
                        return &l->threads[i];
        return NULL;
}

static int metadata(loader_t *l, const npf_evscan_event_t *e)
{
        npf_evscan_str_t name;
        char buf[256];

        if (!e->has_pid || !e->args.p || !npf_evscan_get(e->args, "name", &name))
                return 0;
        npf_evscan_unescape(name, buf, sizeof(buf));
        if (npf_evscan_eq(e->name, "process_name")) {
                proc_t *p = proc_of(l, e->pid);
                uint8_t kind = !strcmp(buf, "Ascend Hardware") ? P_HARDWARE : !strcmp(buf, "HCCL") ? P_HCCL :
                               !strcmp(buf, "CANN") ? P_CANN : P_OTHER;
                if (p) {
                        p->kind = kind;
                        return 0;
                }
                if (l->n_procs == MAX_PIDS)
                        return 0;
                if (!l->procs && !(l->procs = malloc(MAX_PIDS * sizeof(*l->procs))))
                        return -ENOMEM;
                l->procs[l->n_procs++] = (proc_t) { e->pid, kind };
                if (kind == P_HARDWARE || kind == P_HCCL)
                        l->device_tracks = l->ascend = true;
        } else if (npf_evscan_eq(e->name, "thread_name") && e->has_tid) {
                size_t len = strlen(buf);
                int64_t id;
                if (l->n_threads == MAX_THREADS || thread_of(l, e->pid, e->tid))
                        return 0;
                if ((id = npf_device_intern(l->d, buf, len)) < 0)
                        return (int) id;
                if (npf_array_grow((void **) &l->threads, &l->cap_threads, l->n_threads + 1, sizeof(*l->threads), 256) < 0)
                        return -ENOMEM;
                l->threads[l->n_threads++] = (thread_t) {
                        e->pid, e->tid, (uint32_t) id,
                        len >= 13 && !strcmp(buf + len - 13, "Communication"),
                };
        }
        return 0;
}

static enum ttype task_type(npf_evscan_str_t s)
{
        static const struct { const char *name; enum ttype t; } types[] = {
                { "AI_CORE", TT_AI_CORE }, { "MIX_AIC", TT_AI_CORE },
                { "AI_VECTOR_CORE", TT_AI_VECTOR }, { "MIX_AIV", TT_AI_VECTOR }, { "AIV_SQE", TT_AI_VECTOR },
                { "AI_CPU", TT_AI_CPU }, { "DSA_SQE", TT_DSA },
                { "PCIE_DMA_SQE", TT_MEMORY }, { "SDMA_SQE", TT_MEMORY },
        };

        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                if (npf_evscan_eq(s, types[i].name))
                        return types[i].t;
        return has_prefix(s, "MEMCPY") ? TT_MEMORY : TT_OTHER;
}

/* The bytes of one element of a c10::ScalarType named as Kineto writes it ("Float"). */
static uint64_t dtype_size(npf_evscan_str_t s)
{
        static const struct { const char *name; unsigned size; } types[] = {
                { "Float", 4 }, { "Half", 2 }, { "BFloat16", 2 }, { "Double", 8 }, { "Int", 4 }, { "Long", 8 },
                { "Short", 2 }, { "Byte", 1 }, { "Char", 1 }, { "Bool", 1 }, { "ComplexFloat", 8 },
                { "ComplexDouble", 16 }, { "ComplexHalf", 4 }, { "QInt8", 1 }, { "QUInt8", 1 }, { "QInt32", 4 },
        };

        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                if (npf_evscan_eq(s, types[i].name))
                        return types[i].size;
        return has_prefix(s, "Float8") ? 1 : 0;
}

/* The bytes of one element of an HCCL data type ("FP32"). */
static uint64_t hccl_type_size(npf_evscan_str_t s)
{
        static const struct { const char *name; unsigned size; } types[] = {
                { "FP32", 4 }, { "FP16", 2 }, { "BFP16", 2 }, { "INT8", 1 }, { "UINT8", 1 }, { "INT16", 2 },
                { "UINT16", 2 }, { "INT32", 4 }, { "UINT32", 4 }, { "INT64", 8 }, { "UINT64", 8 }, { "FP64", 8 },
        };

        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                if (npf_evscan_eq(s, types[i].name))
                        return types[i].size;
        return 0;
}

static int keep(loader_t *l, const npf_evscan_event_t *e, enum what what, int64_t link)
{
        rec_t *r;
        int64_t name;

        if (npf_array_grow((void **) &l->recs, &l->cap_recs, l->n_recs + 1, sizeof(*l->recs), 256) < 0)
                return -ENOMEM;
        if ((name = intern(l, e->name)) < 0)
                return (int) name;
        r = &l->recs[l->n_recs++];
        *r = (rec_t) {
                .ts = e->ts_ns, .dur = e->has_dur && e->dur_ns > 0 ? e->dur_ns : 0,
                .pid = e->has_pid ? e->pid : 0, .tid = e->has_tid ? e->tid : 0,
                .link = link, .name = (uint32_t) name, .what = (uint8_t) what,
        };
        return 0;
}

static int64_t arg_int(npf_evscan_str_t args, const char *key)
{
        int64_t v;
        return args.p && npf_evscan_get_int(args, key, &v) ? v : NONE;
}

static int kineto_event(loader_t *l, const npf_evscan_event_t *e)
{
        npf_evscan_str_t dtype;
        int64_t link = arg_int(e->args, "correlation");
        bool nccl;
        int r;

        if (npf_evscan_eq(e->cat, "kernel")) {
                l->device_tracks = l->kernels = true;
                if ((r = keep(l, e, REC_KERNEL, link)) < 0)
                        return r;
                /* Communication: an NCCL kernel, "nccl" anywhere in its name, any case (HTA's
                 * rule, hta/utils/utils.py, is a name beginning with nccl or holding ncclKernel:
                 * the same kernels in PyTorch's traces). */
                if ((nccl = contains_nocase(e->name, "nccl"))) {
                        rec_t *k = &l->recs[l->n_recs - 1];
                        int64_t elems = arg_int(e->args, "In msg nelems");
                        k->nccl = true;
                        if (elems > 0 && npf_evscan_get(e->args, "dtype", &dtype))
                                k->bytes = (uint64_t) elems * dtype_size(dtype);
                }
                return 0;
        }
        if (npf_evscan_eq(e->cat, "gpu_memcpy") || npf_evscan_eq(e->cat, "gpu_memset")) {
                l->device_tracks = true;
                return keep(l, e, REC_MEMORY, link);
        }
        if (npf_evscan_eq(e->cat, "cuda_runtime") || npf_evscan_eq(e->cat, "cuda_driver"))
                return launches_put(&l->launches, link, e->ts_ns);
        return 0;
}

static int on_event(void *userdata, const npf_evscan_event_t *e)
{
        loader_t *l = userdata;
        npf_evscan_str_t tt;
        int r = 0;

        if (e->ph == 'M')
                r = metadata(l, e);
        else if (e->ph != 'X' || !e->has_ts)
                return 0;
        else if (has_prefix(e->name, STEP_PREFIX))
                r = npf_evscan_eq(e->cat, "gpu_user_annotation") ? 0 : keep(l, e, REC_STEP, NONE);
        else if (e->cat.p)
                r = kineto_event(l, e);
        else if (e->args.p) {
                /* NPU: a task (Task Type) or a call or op with a connection id. */
                int64_t link = arg_int(e->args, "connection_id");
                bool is_task = npf_evscan_get(e->args, "Task Type", &tt);
                uint8_t kind = proc_kind(l, e->has_pid ? e->pid : 0);
                if (is_task || link != NONE || kind == P_HCCL) {
                        npf_evscan_str_t dt;
                        int64_t count = arg_int(e->args, "count");
                        if ((r = keep(l, e, REC_NPU, link)) == 0 && is_task)
                                l->recs[l->n_recs - 1].task_type = (uint8_t) task_type(tt);
                        /* An HCCL op's elements and their type: the bytes it moved. */
                        if (r == 0 && count > 0 && npf_evscan_get(e->args, "data_type", &dt))
                                l->recs[l->n_recs - 1].bytes = (uint64_t) count * hccl_type_size(dt);
                }
        }
        if (r < 0)
                l->failed = r;
        return r;
}

static int on_top(void *userdata, npf_evscan_str_t key, npf_evscan_str_t raw)
{
        loader_t *l = userdata;
        json_t *info, *rank;

        if (!npf_evscan_eq(key, "distributedInfo") || !(info = json_loadb(raw.p, raw.n, 0, NULL)))
                return 0;
        rank = json_object_get(info, "rank");
        if (json_is_integer(rank) && json_integer_value(rank) >= 0)
                l->rank = json_integer_value(rank);
        json_decref(info);
        return 0;
}

static int step_id(const npf_device_t *d, uint32_t name, int64_t *ret)
{
        const char *s = npf_device_str(d, name) + strlen(STEP_PREFIX);
        char *end;
        long long v;

        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno || end == s || *end || v < 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* The tasks and steps of the records, now that every process is named. */
static int classify(loader_t *l)
{
        npf_device_t *d = l->d;
        int r;

        for (size_t i = 0; i < l->n_recs; i++) {
                const rec_t *k = &l->recs[i];
                if (k->what == REC_NPU && proc_kind(l, k->pid) == P_CANN &&
                    (r = launches_put(&l->launches, k->link, k->ts)) < 0)
                        return r;
        }
        for (size_t i = 0; i < l->n_recs; i++) {
                const rec_t *k = &l->recs[i];
                npf_dev_task_t t = {
                        .start = k->ts, .end = k->ts + k->dur, .launch = NPF_DEVICE_NO_TIME,
                        .name = k->name, .stream = (uint32_t) k->tid, .bytes = k->bytes,
                };
                int64_t id;
                switch (k->what) {
                case REC_STEP:
                        if (step_id(d, k->name, &id) == 0 && (r = npf_device_add_step(d, id, t.start, t.end)) < 0)
                                return r;
                        continue;
                case REC_KERNEL:
                        t.cls = k->nccl ? NPF_DEV_COMM : NPF_DEV_COMPUTE;
                        t.type = k->nccl ? NPF_DEV_TYPE_COMM : NPF_DEV_TYPE_KERNEL;
                        t.launch = launches_get(&l->launches, k->link);
                        break;
                case REC_MEMORY:
                        t.cls = NPF_DEV_MEMORY;
                        t.type = NPF_DEV_TYPE_MEMORY;
                        t.launch = launches_get(&l->launches, k->link);
                        break;
                default: {
                        uint8_t kind = proc_kind(l, k->pid);
                        const thread_t *th;
                        if (kind == P_HARDWARE && k->task_type != TT_NONE) {
                                static const uint8_t cls[] = {
                                        [TT_AI_CORE] = NPF_DEV_COMPUTE, [TT_AI_VECTOR] = NPF_DEV_COMPUTE,
                                        [TT_AI_CPU] = NPF_DEV_COMPUTE, [TT_DSA] = NPF_DEV_COMPUTE,
                                        [TT_MEMORY] = NPF_DEV_MEMORY, [TT_OTHER] = NPF_DEV_OTHER,
                                };
                                static const uint8_t type[] = {
                                        [TT_AI_CORE] = NPF_DEV_TYPE_AI_CORE, [TT_AI_VECTOR] = NPF_DEV_TYPE_AI_VECTOR,
                                        [TT_AI_CPU] = NPF_DEV_TYPE_AI_CPU, [TT_DSA] = NPF_DEV_TYPE_OTHER,
                                        [TT_MEMORY] = NPF_DEV_TYPE_MEMORY, [TT_OTHER] = NPF_DEV_TYPE_OTHER,
                                };
                                t.cls = cls[k->task_type];
                                t.type = type[k->task_type];
                                t.launch = launches_get(&l->launches, k->link);
                        } else if (kind == P_HCCL && (th = thread_of(l, k->pid, k->tid)) && th->comm) {
                                /* torch_npu places ops in steps by their start (device.h). */
                                t.cls = NPF_DEV_COMM;
                                t.type = NPF_DEV_TYPE_COMM;
                                t.group = th->name;
                                t.receive = !strncmp(npf_device_str(d, k->name), "hcom_receive", 12);
                        } else {
                                continue;
                        }
                }
                }
                if ((r = npf_device_add_task(d, &t)) < 0)
                        return r;
        }
        return 0;
}

/* Feeds the plain file @path to @s, mapped piece by piece; pages read are dropped behind. */
static int feed_plain(int fd, size_t size, npf_evscan_t *s, npf_input_progress_cb progress, void *userdata,
                      char *err)
{
        int r = 0;

        for (size_t off = 0; off < size && r == 0; off += CHUNK) {
                size_t len = size - off < CHUNK ? size - off : CHUNK;
                void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t) off);
                if (map == MAP_FAILED)
                        return -errno;
                (void) madvise(map, len, MADV_SEQUENTIAL);
                r = npf_evscan_feed(s, map, len, err);
                munmap(map, len);
                if (progress)
                        progress(userdata, off + len, size);
        }
        return r;
}

static int feed_gzip(int fd, size_t size, npf_evscan_t *s, npf_input_progress_cb progress, void *userdata,
                     char *err)
{
        z_stream z = { 0 };
        unsigned char *in = malloc(CHUNK), *out = malloc(CHUNK);
        size_t done = 0;
        int r = -ENOMEM, zr = Z_OK;

        if (!in || !out || inflateInit2(&z, 15 + 32) != Z_OK)
                goto out;
        r = 0;
        while (r == 0 && zr != Z_STREAM_END) {
                ssize_t got = read(fd, in, CHUNK);
                if (got < 0) {
                        r = -errno;
                        break;
                }
                if (got == 0) {
                        snprintf(err, NPF_EVSCAN_ERR_MAX, "the gzip stream ends early");
                        r = -EINVAL;
                        break;
                }
                done += (size_t) got;
                z.next_in = in;
                z.avail_in = (uInt) got;
                while (r == 0 && z.avail_in > 0 && zr != Z_STREAM_END) {
                        z.next_out = out;
                        z.avail_out = (uInt) CHUNK;
                        zr = inflate(&z, Z_NO_FLUSH);
                        if (zr != Z_OK && zr != Z_STREAM_END) {
                                snprintf(err, NPF_EVSCAN_ERR_MAX, "not a valid gzip stream (%s)",
                                         z.msg ? z.msg : "zlib error");
                                r = zr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
                                break;
                        }
                        r = npf_evscan_feed(s, out, CHUNK - z.avail_out, err);
                }
                if (progress)
                        progress(userdata, done, size);
        }
        inflateEnd(&z);
out:
        free(in);
        free(out);
        return r;
}

static bool gzipped(const char *path)
{
        size_t n = strlen(path);
        return n > 3 && !strcmp(path + n - 3, ".gz");
}

int npf_device_trace_load(const char *path, npf_input_progress_cb progress, void *userdata, npf_device_t **ret,
                          npf_device_trace_info_t *ret_info, char *err)
{
        loader_t l = { .rank = -1, .err = err };
        npf_evscan_stats_t st;
        npf_evscan_t *s = NULL;
        char msg[NPF_EVSCAN_ERR_MAX] = "";
        struct stat sb;
        int fd = -1, r;

        err[0] = '\0';
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &sb) < 0) {
                r = -errno;
                snprintf(err, NPF_DEVICE_TRACE_ERR_MAX, "cannot open %.200s: %s", path, strerror(-r));
                goto out;
        }
        if (!S_ISREG(sb.st_mode) || sb.st_size == 0) {
                snprintf(err, NPF_DEVICE_TRACE_ERR_MAX, "%.200s: %s", path,
                         S_ISREG(sb.st_mode) ? "the file is empty" : "not a regular file");
                r = -EINVAL;
                goto out;
        }
        r = -ENOMEM;
        if (!(l.d = npf_device_new()) || !(s = npf_evscan_new(on_event, on_top, &l)))
                goto out;
        r = gzipped(path) ? feed_gzip(fd, (size_t) sb.st_size, s, progress, userdata, msg) :
                            feed_plain(fd, (size_t) sb.st_size, s, progress, userdata, msg);
        if (r == 0)
                r = npf_evscan_finish(s, msg);
        if (r < 0 && l.failed == 0) {
                if (!err[0])
                        snprintf(err, NPF_DEVICE_TRACE_ERR_MAX, "%.200s: %s", path, msg[0] ? msg : strerror(-r));
                goto out;
        }
        if (l.failed < 0) {
                r = l.failed;
                snprintf(err, NPF_DEVICE_TRACE_ERR_MAX, "%.200s: %s", path, strerror(-r));
                goto out;
        }
        npf_evscan_stats(s, &st);
        if ((r = classify(&l)) < 0) {
                snprintf(err, NPF_DEVICE_TRACE_ERR_MAX, "%.200s: %s", path, strerror(-r));
                goto out;
        }
        npf_device_set_rank(l.d, l.rank, -1, l.kernels && !l.ascend ? NPF_DEV_FW_TORCH : NPF_DEV_FW_UNKNOWN);
        if (ret_info)
                *ret_info = (npf_device_trace_info_t) {
                        .events = st.events, .malformed = st.malformed, .truncated = st.truncated,
                        .device_tracks = l.device_tracks, .bytes = st.bytes,
                };
        *ret = l.d;
        l.d = NULL;
        r = 0;
out:
        if (fd >= 0)
                close(fd);
        npf_evscan_free(s);
        npf_device_free(l.d);
        free(l.recs);
        free(l.procs);
        free(l.threads);
        free(l.launches.keys);
        free(l.launches.ts);
        return r;
}
