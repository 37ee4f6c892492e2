/* golden.h: the published vectors of tests/data/golden for the suites that
 * check against them (t_layout, t_npy, t_pack_cli, t_verify, t_verify_cli,
 * t_gpu_aq, and through gpu.h's QQQ cases t_gpu_aq_lt); linked into every test binary
 * from tests/support/.
 * $QVET_GOLDEN names another folder (the GPU machine keeps a copy beside the
 * build). */
#ifndef QVET_TEST_GOLDEN_H
#define QVET_TEST_GOLDEN_H

#include "qvet/array.h"

/* The golden folder: $QVET_GOLDEN when set and not empty, else tests/data/golden
 * (the suites run from the repository root). */
const char *golden_root(void);
/* Loads <root>/<cs>/<name>.npy into a; a failure fails the test with the
 * loader's message. */
void golden_load(const char *cs, const char *name, qv_array *a);

#endif
