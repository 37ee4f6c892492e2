/* status.c: thread-local error messages and the abort helper (status.h). */
#include "qvet/status.h"

#include <stdio.h>
#include <stdlib.h>

static _Thread_local char qv_msg[1024];

const char *qv_status_str(qv_status st)
{
    switch (st) {
    case QV_OK: return "ok";
    case QV_ERR_USAGE: return "usage error";
    case QV_ERR_IO: return "I/O error";
    case QV_ERR_FORMAT: return "format error";
    case QV_ERR_DTYPE: return "dtype error";
    case QV_ERR_SHAPE: return "shape error";
    case QV_ERR_RANGE: return "range error";
    case QV_ERR_UNSUPPORTED: return "unsupported";
    case QV_ERR_NOMEM: return "out of memory";
    case QV_ERR_CUDA: return "CUDA error";
    case QV_ERR_NODEVICE: return "no CUDA device";
    }
    return "unknown status";
}

qv_status qv_fail(qv_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(qv_msg, sizeof qv_msg, fmt, ap);
    va_end(ap);
    return st;
}

const char *qv_errmsg(void) { return qv_msg; }

int qv_status_exit_code(qv_status st)
{
    switch (st) {
    case QV_OK: return 0;
    case QV_ERR_CUDA:
    case QV_ERR_NOMEM:
    case QV_ERR_NODEVICE: return 3;
    default: return 2;
    }
}

void qv_abort(const char *expr, const char *file, int line, const char *hint)
{
    fprintf(stderr, "qvet: internal error: %s failed at %s:%d\n  hint: %s\n", expr,
            file, line, hint ? hint : "(none)");
    abort();
}
