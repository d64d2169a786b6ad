/* SPDX-License-Identifier: MIT */
/*
 * torch_npu's and MindSpore's communication.json: per step, per collective or p2p op (its
 * key "NAME@GROUP"), "Communication Bandwidth Info" gives the bytes and transfer time over
 * each link type (HCCS, PCIE, RDMA, SDMA, SIO). They become the timeline's links
 * (npf_device_add_link()), per group and link type; sizes are MB of 10^6 bytes and times
 * ms, as the file's own bandwidths (GB/s) show.
 */
#ifndef NPUPROF_REPLAY_COMMJSON_H
#define NPUPROF_REPLAY_COMMJSON_H

#include "replay/device.h"

#define NPF_COMMJSON_ERR_MAX 256u
#define NPF_COMMJSON_BYTES_MAX ((size_t) 1 << 30)

/*
 * npf_commjson_load() - add the links of the communication.json at @path to @d.
 * Return: the number of ops read; -EINVAL with the line, column and what is wrong in @err
 * (NPF_COMMJSON_ERR_MAX bytes) for broken JSON or a file of another shape; -E2BIG, -ENOMEM.
 */
int64_t npf_commjson_load(const char *path, npf_device_t *d, char *err);

#endif /* NPUPROF_REPLAY_COMMJSON_H */
