/* ref_parallel.h: blocks of independent work on a few threads (parallel.c).
 * Included by reference/ (truth, verify, operands, ozaki). Rule: the work is cut into blocks
 * whose number and extent never depend on the thread count, and each block
 * writes only its own slots, so results are the same bits on any number of
 * threads; whatever is combined across blocks is combined in block order by
 * the caller afterwards. */
#ifndef QVET_REF_PARALLEL_H
#define QVET_REF_PARALLEL_H

#include <stdint.h>

/* Calls fn(ctx, b) once for every block b in [0, nblocks), on up to `jobs`
 * threads (the calling one included; jobs <= 1 runs them in order here). */
void ref_parallel_for(int64_t nblocks, int jobs, void (*fn)(void *ctx, int64_t b), void *ctx);

#endif
