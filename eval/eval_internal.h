/* eval_internal.h: helpers shared by the files of eval/ only. */
#ifndef QVET_EVAL_INTERNAL_H
#define QVET_EVAL_INTERNAL_H

#include <stdint.h>
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

/* A range [lo, hi) of a parallel loop (eval/parallel.c). */
typedef void (*ev_range_fn)(void *ctx, int64_t lo, int64_t hi);
/* Calls fn over [0, n) in ranges of `grain` indices spread over the thread
 * pool, and returns when all are done. fn must write disjoint results per
 * index, so the outcome does not depend on how [0, n) was split. */
void    ev_parallel_for(int64_t n, int64_t grain, ev_range_fn fn, void *ctx);
/* One fallible item of ev_parallel_try; its failure's message is kept. */
typedef qv_status (*ev_item_fn)(void *ctx, int64_t i);
/* Calls fn(ctx, i) for every i in [0, n) on the thread pool, one index per
 * range. Returns QV_OK, or the status of the lowest failing i with its message
 * prefixed "<who>: <unit> <i / per>" (e.g. "row: layer 3: ..."). */
qv_status ev_parallel_try(int64_t n, ev_item_fn fn, void *ctx, const char *who, const char *unit, int per);
/* Threads of the pool, the caller included (qv_eval_threads_request, default: online CPUs; at most
 * 64, parallel.c's EV_MAX_THREADS). */
int     ev_threads(void);
/* A grain for n indices: about 4 ranges per thread, at least min_grain. */
int64_t ev_grain(int64_t n, int64_t min_grain);
/* The smallest range of rows (tokens) handed to a thread: a row is dim to
 * vocab values of work, so 8 of them outweigh the cost of handing them out. */
#define EV_ROW_GRAIN 8

/* Fills b->lse, b->argmax and b->p from b->logits (eval/ppl_stats.c). */
struct qv_ppl_base;
void ev_ppl_base_stats(struct qv_ppl_base *b);

/* Monotonic wall-clock seconds (eval/parallel.c). */
double ev_now(void);

#endif
