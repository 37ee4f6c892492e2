/* suite.h: running a CPU suite the usual Check way (each test forked, normal
 * output). Included by t_npy and t_safetensors; linked into every test binary
 * from tests/support/. GPU suites use gpu_suite_run (gpu.h), which does not
 * fork. */
#ifndef QVET_TEST_SUITE_H
#define QVET_TEST_SUITE_H

#include <check.h>

/* Runs every test of s, frees it, and returns main's exit status:
 * EXIT_SUCCESS when every test passed, else EXIT_FAILURE. */
int suite_run(Suite *s);

#endif
