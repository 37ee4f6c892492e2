/* golden.c: golden.h. */
#include "support/golden.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

const char *golden_root(void)
{
    const char *root = getenv("QVET_GOLDEN");
    return root && *root ? root : "tests/data/golden";
}

void golden_load(const char *cs, const char *name, qv_array *a)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s.npy", golden_root(), cs, name);
    qv_status st = qv_npy_load(path, a);
    ck_assert_msg(st == QV_OK, "cannot load %s: %s (set QVET_GOLDEN to the golden folder)", path, qv_errmsg());
}
