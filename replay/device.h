/* SPDX-License-Identifier: MIT */
/*
 * A rank's device timeline, whichever profiler wrote it (torch_npu's or MindSpore's text or
 * db export, Kineto's trace), and what it says: where each step's time went on the device,
 * the device's temporal breakdown, how much communication computation hid, the kernels and
 * the collectives.
 *
 * The readers (device-trace.h, device-db.h) fill it with:
 *   tasks:  what the device ran, each with its class: compute (AI Core, AI Vector, AI CPU,
 *           a CUDA kernel), communication (an HCCL op on its group's track, an NCCL kernel),
 *           memory (memcpy, memset) or other (events, notifies, placeholders). On NPUs the
 *           HCCL op is the communication interval and its tasks on the streams are "other",
 *           as msprof counts them; on GPUs the NCCL kernel is both.
 *   steps:  the host's ProfilerStep#N spans.
 *   links:  bytes and transfer time of collectives per group and link type.
 *
 * The per-step breakdown follows torch_npu (Ascend/pytorch,
 * torch_npu/profiler/analysis/prof_view/prof_db_parse/_trace_step_time_db_parser.py,
 * generate_view(), and prof_common_func/_time_range_calculator.py): for the tasks of a step,
 *   computing          the length of the union of its compute tasks
 *   communication      the length of the union of its communication tasks
 *   not_overlapped     communication minus computing (compute_pipeline_overlap(), which is
 *                      the set difference of the two unions)
 *   overlapped         communication - not_overlapped
 *   free               the span of the union of both, less its length: the device idle
 *                      between its first and last task of the step
 *   bubble             the summed length of pipeline receives (hcom_receive*)
 *   stage              that span less bubble
 *   preparing          the first compute or communication task's start less the host step's
 * A task belongs to the step whose host span holds the call that launched it (torch_npu's
 * _step_info_db_parser.py: the CANN API within the ProfilerStep span, through its connection
 * id); a task whose launch is unknown belongs to the step whose device range holds its start.
 * A step's device range is from the first start of its tasks launched in it (else its host
 * start) to the later of its host end and their last end.
 */
#ifndef NPUPROF_REPLAY_DEVICE_H
#define NPUPROF_REPLAY_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NPF_DEVICE_TASKS_MAX (1u << 30)
#define NPF_DEVICE_STEPS_MAX (1u << 20)
#define NPF_DEVICE_NO_TIME INT64_MIN    /* a launch time that is not known */

typedef enum npf_dev_class {
        NPF_DEV_COMPUTE,
        NPF_DEV_COMM,
        NPF_DEV_MEMORY,
        NPF_DEV_OTHER,
        NPF_DEV_CLASSES
} npf_dev_class_t;

/* The kernel table's kinds: the accelerator's units on NPUs, the class on GPUs. */
typedef enum npf_dev_type {
        NPF_DEV_TYPE_AI_CORE,           /* AI_CORE, MIX_AIC */
        NPF_DEV_TYPE_AI_VECTOR,         /* AI_VECTOR_CORE, MIX_AIV, AIV */
        NPF_DEV_TYPE_AI_CPU,
        NPF_DEV_TYPE_KERNEL,            /* a GPU's compute kernel */
        NPF_DEV_TYPE_COMM,              /* HCCL op, NCCL kernel */
        NPF_DEV_TYPE_MEMORY,            /* memcpy, memset */
        NPF_DEV_TYPE_OTHER,
        NPF_DEV_TYPES
} npf_dev_type_t;

typedef enum npf_dev_framework {
        NPF_DEV_FW_UNKNOWN,
        NPF_DEV_FW_TORCH_NPU,
        NPF_DEV_FW_MINDSPORE,
        NPF_DEV_FW_TORCH,               /* Kineto: PyTorch on GPUs */
} npf_dev_framework_t;

/* One thing the device ran. Times are nanoseconds on the trace's clock. */
typedef struct npf_dev_task {
        int64_t start, end;
        int64_t launch;                 /* host time of the launching call, or NPF_DEVICE_NO_TIME */
        uint32_t name;                  /* npf_device_intern() ids */
        uint32_t group;                 /* communication: the group's name; 0 otherwise */
        uint32_t stream;
        uint8_t cls;                    /* npf_dev_class_t */
        uint8_t type;                   /* npf_dev_type_t */
        bool receive;                   /* a pipeline receive: counts as bubble */
        uint64_t bytes;                 /* communication: bytes the op moved, 0 when unknown */
} npf_dev_task_t;

/* Bytes moved by collectives over one link type of one group (communication.json's
 * "Communication Bandwidth Info", the db's COMMUNICATION_TASK_INFO, NCCL kernels' args). */
typedef struct npf_dev_link {
        uint32_t group, link;           /* link: "HCCS", "RDMA", "SDMA", "PCIE", "NVLink", ... */
        uint64_t bytes;
        int64_t time_ns;                /* transfer time */
        uint64_t count;                 /* transfers */
} npf_dev_link_t;

/* Where one step's time went on the device, nanoseconds (see the top of this file). */
typedef struct npf_dev_breakdown {
        int64_t step;                   /* N of ProfilerStep#N; -1 for a window without steps */
        int64_t computing, communication, not_overlapped, overlapped, free, bubble, stage, preparing;
        int64_t memory;                 /* the union of memory tasks, beside the rest */
        int64_t host_ns;                /* the host step's length, 0 without steps */
        uint64_t tasks;                 /* the step's tasks */
} npf_dev_breakdown_t;

/* The whole window's temporal breakdown, as Holistic Trace Analysis defines it. */
typedef struct npf_dev_temporal {
        int64_t span, idle, compute, non_compute;       /* ns */
        double idle_pct, compute_pct, non_compute_pct;  /* of span */
} npf_dev_temporal_t;

/* The kernels of one name and kind. */
typedef struct npf_dev_kernel {
        uint32_t name;
        uint8_t type;                   /* npf_dev_type_t */
        uint64_t count;
        int64_t total, mean, p90, max;  /* ns */
} npf_dev_kernel_t;

/* The collectives of one op type and group. */
typedef struct npf_dev_collective {
        uint32_t name;                  /* the op's type: "allReduce", "ncclDevKernel_AllReduce_Sum_f32_RING_LL" */
        uint32_t group;
        uint64_t count, bytes;
        int64_t total, max;             /* ns */
} npf_dev_collective_t;

typedef struct npf_device npf_device_t;

/* Return: an empty timeline, or NULL when out of memory. */
npf_device_t *npf_device_new(void);
/* Frees @d. Accepts NULL; returns NULL. */
npf_device_t *npf_device_free(npf_device_t *d);

/* The id of the string @s (@len bytes). Return: the id (0 is ""), or -ENOMEM / -E2BIG. */
int64_t npf_device_intern(npf_device_t *d, const char *s, size_t len);
/* The string of @id ("" for an unknown one). */
const char *npf_device_str(const npf_device_t *d, uint32_t id);

/* Adds a task; one that ends before it starts is clipped to zero length. Return: 0, -ENOMEM, -E2BIG. */
int npf_device_add_task(npf_device_t *d, const npf_dev_task_t *t);
/* Adds the host step @id spanning [@start, @end]. Return: 0, -ENOMEM, -E2BIG. */
int npf_device_add_step(npf_device_t *d, int64_t id, int64_t start, int64_t end);
/* Adds @bytes moved in @time_ns (@count transfers) over @link in @group, summed per pair. */
int npf_device_add_link(npf_device_t *d, uint32_t group, uint32_t link, uint64_t bytes, int64_t time_ns,
                        uint64_t count);

/* Who the timeline is: rank -1, device -1 and stage -1 when not known. */
void npf_device_set_rank(npf_device_t *d, int64_t rank, int64_t device, npf_dev_framework_t framework);
void npf_device_set_stage(npf_device_t *d, int64_t stage);
int64_t npf_device_rank(const npf_device_t *d);
int64_t npf_device_device(const npf_device_t *d);
int64_t npf_device_stage(const npf_device_t *d);
npf_dev_framework_t npf_device_framework(const npf_device_t *d);
const char *npf_device_framework_name(npf_dev_framework_t f);    /* "torch_npu", "mindspore", "torch", "unknown" */
const char *npf_device_type_name(npf_dev_type_t t);              /* "AI Core", "AI Vector", ... */

size_t npf_device_tasks(const npf_device_t *d, const npf_dev_task_t **ret);
size_t npf_device_links(const npf_device_t *d, const npf_dev_link_t **ret);

/*
 * npf_device_breakdown() - the per-step breakdown (see the top of this file), in step
 * order; one entry with step -1 for a window whose tasks lie outside every step (or that has
 * none). Return: their number and a new array in @ret (free() it), or -ENOMEM.
 */
int64_t npf_device_breakdown(const npf_device_t *d, npf_dev_breakdown_t **ret);

/*
 * npf_device_temporal() - HTA's temporal breakdown of the window into @ret (Holistic Trace
 * Analysis, hta/analyzers/breakdown_analysis.py): over the span from the first task's start
 * to the last one's end, idle is what no task covers, compute what a compute task covers,
 * and non-compute the rest. HTA's window: with two steps or more, the tasks launched before
 * the last step begins; times rounded inwards to whole microseconds where the trace has
 * fractions (hta/common/trace.py and trace_parser.py).
 * Return: 0, or -ENODATA when there are no compute, communication or memory tasks.
 */
int npf_device_temporal(const npf_device_t *d, npf_dev_temporal_t *ret);

/*
 * npf_device_overlap_pct() - the share of the union of communication tasks that compute
 * tasks cover, in HTA's window (hta/analyzers/communication_analysis.py,
 * get_comm_comp_overlap()). Return: a percentage, or -1 without communication.
 */
double npf_device_overlap_pct(const npf_device_t *d);

/* The kernels (compute, communication and memory tasks by name and kind), most total time
 * first. Return: their number and a new array in @ret, or -ENOMEM. */
int64_t npf_device_kernels(const npf_device_t *d, npf_dev_kernel_t **ret);

/* The collectives by op type and group, most total time first; the op types' names are
 * interned into @d. Return: as npf_device_kernels(). */
int64_t npf_device_collectives(npf_device_t *d, npf_dev_collective_t **ret);

#endif /* NPUPROF_REPLAY_DEVICE_H */
