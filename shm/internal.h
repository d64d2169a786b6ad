/* SPDX-License-Identifier: MIT */
/* What the files of the shm module share with each other and nobody else. */
#ifndef NPUPROF_SHM_INTERNAL_H
#define NPUPROF_SHM_INTERNAL_H

#include <stdint.h>

/* Write a message into @err, a buffer of NPF_SHM_ERR_MAX bytes; NULL @err is ignored. */
void npf__set_err(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* NPUPROF_SHM_INTERNAL_H */
