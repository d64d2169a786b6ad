/* SPDX-License-Identifier: MIT */
/*
 * A device timeline from a Chrome trace: torch_npu's and MindSpore's trace_view.json, or a
 * Kineto trace (*.pt.trace.json, also gzipped) of PyTorch on GPUs. The file is scanned once
 * (evscan.h), a gzipped one inflated piece by piece, and only the events the timeline needs
 * are kept:
 *
 *   NPU (processes named by "M" metadata)
 *     "Ascend Hardware"      tasks on their streams, by args "Task Type": AI_CORE, MIX_AIC
 *                            (AI Core), AI_VECTOR_CORE, MIX_AIV (AI Vector), AI_CPU and DSA_SQE
 *                            are compute, as kernel_details.csv lists them; PCIE_DMA_SQE,
 *                            SDMA_SQE and MEMCPY* memory; the HCCL tasks and events other
 *     "HCCL"                 the ops on each "Group N Communication" track: communication
 *     "CANN"                 the API calls whose connection id names a task's launch
 *   GPU (Kineto's categories)
 *     "kernel"               compute, or communication for NCCL kernels ("nccl" in the name)
 *     "gpu_memcpy", "gpu_memset"   memory
 *     "cuda_runtime", "cuda_driver"  the launches, through args "correlation"
 *   Both: ProfilerStep#N spans of the host (never a GPU stream's copy of the annotation).
 *
 * Kineto's "distributedInfo" gives the rank; an NCCL kernel's bytes are its "In msg nelems"
 * times the size of its "dtype".
 */
#ifndef NPUPROF_REPLAY_DEVICE_TRACE_H
#define NPUPROF_REPLAY_DEVICE_TRACE_H

#include "replay/device.h"
#include "replay/input.h"

#define NPF_DEVICE_TRACE_ERR_MAX 320u

/* What the reader saw besides the timeline. */
typedef struct npf_device_trace_info {
        uint64_t events;                /* elements of the events array */
        uint64_t malformed;             /* skipped */
        bool truncated;                 /* the file ended inside the events */
        bool device_tracks;             /* it had device processes or kernels at all */
        uint64_t bytes;                 /* JSON bytes read (inflated, for .gz) */
} npf_device_trace_info_t;

/*
 * npf_device_trace_load() - the device timeline of the trace at @path (".gz": gzipped).
 * @progress may be NULL. Return: 0, the timeline in @ret (npf_device_free() it) and what was
 * seen in @ret_info (may be NULL); -EINVAL for a document that is not JSON or a broken gzip
 * stream, -ENOMSG for JSON that is no trace, -E2BIG past a cap, -ENOMEM, -errno of reading
 * @path; a sentence naming the file in @err (NPF_DEVICE_TRACE_ERR_MAX bytes) in every case.
 * A trace with no device tracks loads as an empty timeline (info.device_tracks false).
 * Context: any; reentrant.
 */
int npf_device_trace_load(const char *path, npf_input_progress_cb progress, void *userdata, npf_device_t **ret,
                          npf_device_trace_info_t *ret_info, char *err);

#endif /* NPUPROF_REPLAY_DEVICE_TRACE_H */
