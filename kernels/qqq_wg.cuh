/* qqq_wg.cuh: the Hopper path of the QQQ W4A8 rows, kernels/qqq_wg.cu (a
 * persistent wgmma GEMM that makes the int8 weights in registers), as seen by
 * the launcher in kernels/qqq.cu. Rule: the path computes the rows' declared
 * arithmetic, the same function as aq_gemm.cuh's kernel bit for bit; it is
 * entered only after qv_launch_qqq has validated the row, the shape, g and
 * the buffers. Its counters (qv_qqq_wg_runs, qv_qqq_wg_tail_tiles) are in
 * src/internal/aq.h. */
#ifndef QVET_KERNELS_QQQ_WG_CUH
#define QVET_KERNELS_QQQ_WG_CUH

#include <stddef.h>

#include "aq_gemm.cuh"
#include "qvet/gemm.h"
#include "qvet/status.h"
#include "qvet/variant.h"

/* Workspace bytes of the path under c: 0, or when the schedule has a
 * stream-K tail the family's counter area (AQ_COUNTERS_BYTES, zero between
 * launches) and 2 x grid int32 partial tiles of 128 KiB. No CUDA call. */
extern "C" size_t qv_qqq_wg_workspace(int m, int n, int k, const qv_launch_ctx *c);

/* Runs the problem on the wgmma kernel under c: ap holds the launcher's
 * filled epilogue fields (aq_params_of, per-token scales, the perm32 channel
 * scales and for per-group rows the fp16 group table and the channel scales
 * in w_scale2). Checks the cover, the alignment the tensor maps need and
 * the workspace; c's options' aq_wg_tile (the block's columns x tokens;
 * unset: by M and the layer's size), aq_wg_blocks (unset: one per SM) and
 * aq_wg_streamk shape the schedule, and aq_wg_pdl the launch. */
extern "C" qv_status qv_qqq_wg_launch(const qv_variant *v, const aq_params *ap, const qv_gemm_args *a,
                                      const qv_launch_ctx *c);

#endif
