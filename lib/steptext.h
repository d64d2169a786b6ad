/* SPDX-License-Identifier: MIT */
/* A step number as people read it in logs, status and the fleet view: "41,002". */
#ifndef NPUPROF_LIB_STEPTEXT_H
#define NPUPROF_LIB_STEPTEXT_H

#include <stdint.h>

#define NPF_STEP_TEXT_MAX 32u   /* INT64_MIN with its commas, and the NUL */

/* @step with a comma between thousands, into @buf. Return: @buf. */
const char *npf_step_text(int64_t step, char buf[NPF_STEP_TEXT_MAX]);

#endif /* NPUPROF_LIB_STEPTEXT_H */
