/* SPDX-License-Identifier: MIT */
/*
 * What the two libraries of the CANN stand-in share: the call log and the injected results,
 * both kept by libmsprofiler.so, which libascendcl.so depends on as CANN's does.
 */
#ifndef NPUPROF_TESTS_STUB_ACL_STUB_H
#define NPUPROF_TESTS_STUB_ACL_STUB_H

#include <stdbool.h>

/* Append one line to the file $NPF_ACL_STUB_LOG names. */
void npf_stub_record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Hold @function for the time $NPF_ACL_STUB_HOLD gives it; then, when $NPF_ACL_STUB_FAIL
 * names it, set *@ret_code to the code given there and return true. */
bool npf_stub_injected(const char *function, int *ret_code);

#endif /* NPUPROF_TESTS_STUB_ACL_STUB_H */
