/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the configuration parser. Besides "no crash, no leak, no UB" it
 * checks what every caller relies on: a valid result is well-formed and publishable, an
 * invalid one has at least one error, and every message is terminated.
 */
#include "conf/conf.h"
#include "lib/jsonpos.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_diags(const npf_conf_diag_t *d, uint32_t n)
{
        for (uint32_t i = 0; i < n && i < NPF_CONF_DIAG_MAX; i++) {
                if (!memchr(d[i].message, '\0', sizeof(d[i].message)) || d[i].message[0] == '\0' ||
                    !memchr(d[i].key, '\0', sizeof(d[i].key)))
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static npf_shm_config_t c;
        static npf_conf_report_t r;
        int rc = npf_conf_parse((const char *) data, size, &c, &r);

        check_diags(r.errors, r.n_errors);
        check_diags(r.warnings, r.n_warnings);
        if (rc == 0) {
                const npf_shm_args_t *a = &c.args;
                if (r.n_errors != 0 || a->prof_dir_len >= NPF_SHM_PATH_MAX || c.prof_dir[a->prof_dir_len] ||
                    a->extra_len >= NPF_SHM_EXTRA_MAX || c.extra[a->extra_len])
                        abort();
                if (a->enabled && a->start_step != NPF_STEP_NEXT && a->stop_step != NPF_STEP_NONE &&
                    (a->stop_step < a->start_step || a->stop_step > NPF_STEP_MAX))
                        abort();
                if (a->level < NPF_LEVEL_NONE || a->level > NPF_LEVEL_2 || a->aic_metrics < NPF_AIC_NONE ||
                    a->aic_metrics > NPF_AIC_MEMORY_ACCESS || a->activities == 0 || a->export_type == 0)
                        abort();
                json_t *j = npf_conf_to_json(&c);
                if (!j)
                        abort();
                json_decref(j);
        } else if (rc == -EINVAL && r.n_errors == 0) {
                abort();
        }
        json_decref(npf_conf_report_to_json(&r));

        /* The locator must stay inside any text, valid JSON or not. */
        static const char *const path[] = { "experimental_config", "[1]", "profiler_level" };
        uint32_t line, column;
        for (size_t depth = 1; depth <= 3; depth++)
                npf_jsonpos_find((const char *) data, size, path, depth, &line, &column);
        return 0;
}
