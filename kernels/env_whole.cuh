/* env_whole.cuh: the kernel-path environment variables' parser, host code
 * shared by the kernel files (wg_common.cuh for both wgmma kernels,
 * wonly_small.cu): a value outside its range is a usage error that names the
 * variable, never a silent default. In an unnamed namespace, like the
 * kernels' other shared headers. */
#ifndef QVET_KERNELS_ENV_WHOLE_CUH
#define QVET_KERNELS_ENV_WHOLE_CUH

#include <stdlib.h>
#include <string.h>

#include "qvet/status.h"

namespace {

/* A whole number from lo to hi from environment variable `name` (dflt when
 * unset or empty; "off" gives 0 where off_ok); anything else is a usage
 * error naming `what`. */
qv_status env_whole(const char *name, long lo, long hi, long dflt, bool off_ok, const char *what, long *out)
{
    const char *s = getenv(name);
    *out = dflt;
    if (!s || !*s) return QV_OK;
    if (off_ok && !strcmp(s, "off")) {
        *out = 0;
        return QV_OK;
    }
    char *end = NULL;
    const long v = strtol(s, &end, 10);
    if (!end || *end != '\0' || v < lo || v > hi)
        return qv_fail(QV_ERR_USAGE, "%s=\"%s\": expected a whole number from %ld to %ld (%s)%s, or unset for %ld",
                       name, s, lo, hi, what, off_ok ? ", \"off\"" : "", dflt);
    *out = v;
    return QV_OK;
}

} /* namespace */

#endif
