/* SPDX-License-Identifier: MIT */
/*
 * A device timeline from torch_npu's db export (ascend_pytorch_profiler_N.db) or MindSpore's
 * (ascend_mindspore_profiler_N.db), the same msprof schema family, read with SQLite opened
 * read-only (mode=ro, not immutable: the framework may still be writing it) in one read
 * transaction. Ids in the tables name strings of STRING_IDS and the ENUM_* tables.
 *
 *   TASK                     every task the device ran, on its streamId:
 *     compute                  its globalTaskId is in COMPUTE_TASK_INFO (as torch_npu's
 *                              _trace_step_time_db_parser.py takes it); name: that table's
 *                              name; kind: its taskType (AI_CORE, MIX_AIC: AI Core;
 *                              AI_VECTOR_CORE, MIX_AIV, AIV: AI Vector; AI_CPU), else, where
 *                              that says N/A (level0), TASK's own (KERNEL_AICORE, KERNEL_AIVEC,
 *                              KERNEL_AICPU, ...), else other
 *     memory                   one whose taskType names MEMCPY, MEMSET, SDMA or PCIE_DMA,
 *                              unless it is an HCCL op's (in COMMUNICATION_TASK_INFO)
 *     other                    the rest, the HCCL ops' tasks among them (device.h)
 *                            Non-compute tasks are named by their taskType ("MEMCPY_ASYNC").
 *                            launch: the start of the CANN_API row of type 10000 (node level)
 *                            with its connectionId (_step_info_db_parser.py), for every class
 *   COMMUNICATION_OP         communication: one task per op, named by opName, in its
 *                            groupName; no launch (torch_npu takes an op into the step whose
 *                            device range holds its start); receive: opName hcom_receive*;
 *                            bytes: those of its transfers (below)
 *   COMMUNICATION_TASK_INFO  the links: transfers as msprof's communication parser counts
 *                            them for communication.json's "Communication Bandwidth Info"
 *                            (msprof, analysis/msparser/cluster/communication_parser.py,
 *                            is_transit_sdma_event() and get_communication_bandwidth_info_type()):
 *                            Memcpy and Reduce_Inline tasks of transportType SDMA whose
 *                            linkType is not ON_CHIP, on link "HCCS" (HCCS, HCCS_SW), "PCIE"
 *                            or "SIO", else "SDMA"; and RDMA_SEND_PAYLOAD tasks of transportType
 *                            RDMA, on "RDMA". Bytes: size (a negative one, level0's -1, is
 *                            not known: 0); time: the TASK's endNs - startNs.
 *                            msprof's own "SDMA" figure is the sum of HCCS, PCIE, SIO and
 *                            SDMA here; its RDMA time spans each payload's whole
 *                            send-and-notify sequence, here the payload tasks' own time.
 *   STEP_TIME                the host's ProfilerStep#N spans (id N)
 *   RANK_DEVICE_MAP          rank and device (rankId -1: unknown); the device, where absent,
 *                            from TASK's deviceId. The framework from the file's name, else
 *                            torch_npu where a PYTORCH_API table is there.
 * Only TASK must be there; without another table what it gives is missing (without CANN_API
 * no task has a launch, without STRING_IDS or the ENUM_HCCL_* tables names are empty and
 * there are no links). A value
 * of the wrong type (text or a blob where an integer belongs, NULL in a time) is an error,
 * as is a time outside [0, NPF_DEVICE_DB_TIME_MAX]. Every time is nanoseconds.
 */
#ifndef NPUPROF_REPLAY_DEVICE_DB_H
#define NPUPROF_REPLAY_DEVICE_DB_H

#include "replay/device.h"

#include <stdint.h>

#define NPF_DEVICE_DB_ERR_MAX 320u
#define NPF_DEVICE_DB_TIME_MAX (INT64_C(1) << 62)  /* ns: the year 2116 since the epoch */
#define NPF_DEVICE_DB_NAME_MAX 1024u               /* bytes of a name; longer ones end in "..." */
#define NPF_DEVICE_DB_STRINGS_MAX (UINT64_C(1) << 30)  /* bytes of STRING_IDS held while loading */
#define NPF_DEVICE_DB_BUSY_MS 5000                 /* how long to wait for the writer's lock */

/* What the reader saw besides the timeline. */
typedef struct npf_device_db_info {
        uint64_t tasks;                 /* TASK rows */
        uint64_t compute;               /* of them compute */
        uint64_t launched;              /* of them with a node-level launch */
        uint64_t comm_ops;              /* COMMUNICATION_OP rows */
        uint64_t transfers;             /* COMMUNICATION_TASK_INFO rows counted in the links */
        uint64_t steps;                 /* STEP_TIME rows */
        char missing[160];              /* the optional tables absent, "CANN_API, STEP_TIME", or "" */
} npf_device_db_info_t;

/*
 * npf_device_db_load() - the device timeline of the db export at @path (see the top of this
 * file). Return: 0, the timeline in @ret_device (npf_device_free() it) and what was seen in
 * @ret_info (may be NULL); -EINVAL for a file that is not SQLite, is damaged, lacks TASK or
 * holds a value it cannot be, -E2BIG past a cap (NPF_DEVICE_TASKS_MAX, ...), -EBUSY when
 * the writer held its lock past NPF_DEVICE_DB_BUSY_MS, -EIO, -ENOMEM, -errno of stat(2);
 * a sentence naming the file in @err (NPF_DEVICE_DB_ERR_MAX bytes) in every case.
 * Context: any; reentrant.
 */
int npf_device_db_load(const char *path, npf_device_t **ret_device, npf_device_db_info_t *ret_info, char *err);

#endif /* NPUPROF_REPLAY_DEVICE_DB_H */
