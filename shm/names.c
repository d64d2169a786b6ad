/* SPDX-License-Identifier: MIT */
/* The canonical names of the segment's enumerations, beside the ABI that defines them. */
#include "npuprof/shm.h"

const char *npf_shm_dialect_name(uint32_t dialect)
{
        static const char *const names[] = {
                [NPF_DIALECT_NATIVE] = "native",
                [NPF_DIALECT_TORCH_NPU] = "torch_npu",
                [NPF_DIALECT_MINDSPORE] = "mindspore",
        };

        return dialect < sizeof(names) / sizeof(names[0]) && names[dialect] ? names[dialect] : "unknown";
}

const char *npf_shm_level_name(int32_t level)
{
        static const char *const names[] = {
                [NPF_LEVEL_NONE + 1] = "LevelNone",
                [NPF_LEVEL_0 + 1] = "Level0",
                [NPF_LEVEL_1 + 1] = "Level1",
                [NPF_LEVEL_2 + 1] = "Level2",
        };

        return level >= NPF_LEVEL_NONE && level <= NPF_LEVEL_2 ? names[level + 1] : "invalid";
}

const char *npf_shm_backend_name(uint32_t backend)
{
        static const char *const names[] = {
                [NPF_BACKEND_AUTO] = "auto",
                [NPF_BACKEND_ACL] = "acl",
                [NPF_BACKEND_HOST] = "host",
                [NPF_BACKEND_KINETO] = "kineto",
        };

        return backend < sizeof(names) / sizeof(names[0]) ? names[backend] : "invalid";
}

const char *npf_shm_window_state_name(uint32_t state)
{
        static const char *const names[NPF_WINDOW__COUNT] = {
                [NPF_WINDOW_IDLE] = "idle",
                [NPF_WINDOW_ARMED] = "armed",
                [NPF_WINDOW_COLLECTING] = "collecting",
                [NPF_WINDOW_FLUSHING] = "flushing",
                [NPF_WINDOW_DONE] = "done",
                [NPF_WINDOW_MISSED] = "missed",
                [NPF_WINDOW_FAILED] = "failed",
                [NPF_WINDOW_FILTERED] = "filtered",
                [NPF_WINDOW_LOST] = "lost",
        };

        return state < NPF_WINDOW__COUNT ? names[state] : "invalid";
}

const char *npf_shm_file_state_name(uint32_t file_state)
{
        switch (file_state) {
        case NPF_FILE_VALID: return "valid";
        case NPF_FILE_INVALID: return "invalid";
        case NPF_FILE_MISSING: return "missing";
        default: return "unknown";
        }
}
