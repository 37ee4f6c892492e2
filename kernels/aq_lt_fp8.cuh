/* aq_lt_fp8.cuh: the cuBLASLt path of the W8A8 e4m3 rows: e4m3 x e4m3 with
 * fp32 compute and cuBLASLt's own scaling modes (per-tensor scalars, per-token
 * x per-channel outer vectors, or one scale per 128 K per row for the 128x128
 * weight blocks), the default promoted accumulation (never fast accumulation),
 * D written directly as fp16; or for per token x channel at small M, cuBLASLt
 * per tensor into an fp32 D and the two scales applied after. Included by
 * kernels/w8a8.cu, which runs it for the problems its row of the
 * activation-quantized route table covers (src/gpu_routes.c). Rule: the path runs only where cuBLASLt takes the shape and
 * keeps the registry row's declared arithmetic (a 14-bit accumulator promoted
 * to fp32 every 128 K, split-K partials summed in fp32, never in fp16, never
 * in place); otherwise it launches nothing and the mma kernel runs.
 *
 * Workspace: the launcher places this path's region after the mma kernel's
 * split-K region (aq_lt_offset), so the split-K counters stay untouched.
 *
 * Launch options (qv_launch_opts; unset, the tuning table's, tuning.h):
 *   aq_lt_fp8_min_m        smallest M that takes this path (QV_OPT_OFF: never;
 *                          the tuning table has one per scaling; the route
 *                          table reads it);
 *   aq_lt_fp8_blk_min_m, aq_lt_fp8_outer_min_m  the M from which the block
 *                          row and the per-token x channel row take their
 *                          second form (aq_lt_fp8.cu describes both). */
#ifndef QVET_AQ_LT_FP8_CUH
#define QVET_AQ_LT_FP8_CUH

#include <stddef.h>

#include "aq_gemm.cuh"
#include "internal/aq.h"

/* Bytes of this path's workspace region for e4m3 row v at (m, n, k); 0 when
 * the path cannot take the shape (block
 * rows need K % 128 == 0; for M % 4 != 0 the region also holds the padded
 * operand and output). */
size_t aq_lt_fp8_workspace(const qv_launch_ctx &c, const qv_variant *v, int m, int n, int k);

/* Runs p (aq_params of an e4m3 row, filled by the launcher) through cuBLASLt
 * when the scaling modes are one of the three above,
 * cuBLASLt has an algorithm for the shape and alignments, and a->workspace
 * holds the region at byte offset `ws_offset`, under c. *taken tells whether
 * it ran; when it did not, nothing was written to the output and the caller
 * runs the mma kernel. */
qv_status aq_lt_fp8_try(const qv_launch_ctx &c, const aq_params &p, const qv_gemm_args *a, size_t ws_offset,
                        bool *taken);

#endif
