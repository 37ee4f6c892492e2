/* eval_internal.h: helpers shared by the files of eval/ only. */
#ifndef QVET_EVAL_INTERNAL_H
#define QVET_EVAL_INTERNAL_H

#include <stdio.h>

#include "qvet/status.h"

/* Re-records the current error message with a prefix ("what: message") and
 * returns st; copies the message first, since qv_fail formats into the buffer
 * that qv_errmsg returns. */
static inline qv_status ev_prefix(qv_status st, const char *what)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", qv_errmsg());
    return qv_fail(st, "%s: %s", what, msg);
}

/* Releases a GPU backend's context (eval/linear_gpu.c). */
void ev_gpu_free_ctx(void *ctx);

#endif
