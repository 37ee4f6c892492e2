/* suite.h: running a CPU suite the usual Check way (each test forked, normal
 * output). Included by the CPU suites that need no runner setting of their own
 * (t_formats and t_status set the fork mode themselves); linked into every
 * test binary from tests/support/. GPU suites use gpu_suite_run (gpu.h), which
 * does not fork. */
#ifndef QVET_TEST_SUITE_H
#define QVET_TEST_SUITE_H

#include <check.h>

/* A new suite `name` holding one test case `tcase` (already added) whose tests
 * time out after timeout_s seconds; *tc receives the case, for the caller to
 * add its tests to. Used by the CPU suites with a single case. */
Suite *suite_single(const char *name, const char *tcase, double timeout_s, TCase **tc);

/* Runs every test of s, frees it, and returns main's exit status:
 * EXIT_SUCCESS when every test passed, else EXIT_FAILURE. */
int suite_run(Suite *s);

#endif
