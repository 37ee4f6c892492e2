/* aq_lt.cuh: the large-M path of the integer activation-quantized rows (QQQ
 * W4A8 channelwise and per group, W8A8 int8 with or without activation zero
 * point): cuBLASLt int8 x int8 -> int32 GEMM (IGMMA) followed by the fp32
 * epilogue of aq_gemm.cuh. Included by kernels/qqq.cu and kernels/w8a8.cu,
 * which run it for the problems its row of the activation-quantized route
 * table covers (src/gpu_routes.c: from aq_lt_min_m, after QQQ's wgmma path,
 * before the mma kernel). Rule: int32 accumulation is exact, so
 * the path gives the same bits as k_gemm_aq_mma on every input; it runs only
 * where cuBLASLt takes the shape, and otherwise leaves the launch to the mma
 * kernel, never to a different arithmetic.
 *
 * Workspace: the launchers place this path's region after the mma kernel's
 * split-K region (aq_plan_for), so neither path ever writes the other's
 * buffers (the split-K arrival counters must stay zero between launches).
 *
 * Launch options (qv_launch_opts; unset, the tuning table's, tuning.h):
 *   aq_lt_min_m      smallest M that takes this path (QV_OPT_OFF: never; the
 *                    route table reads it);
 *   aq_lt_chunk_mib  MiB of one N chunk's int8 weights plus its int32
 *                    products. Unset: the table's, widened where needed so a
 *                    chunk has one wave of output tiles; set: exactly this
 *                    budget (at least 64 columns), which is how the suite
 *                    forces small chunks. */
#ifndef QVET_AQ_LT_CUH
#define QVET_AQ_LT_CUH

#include <stddef.h>

#include "aq_gemm.cuh"

/* Bytes of this path's workspace region for KIND (AQ_B_QQQ_CH, AQ_B_QQQ_GROUP
 * or AQ_B_PLAIN_I8) under c, with or without the zero-point column sums (0
 * for an empty shape). */
size_t aq_lt_workspace(const qv_launch_ctx &c, int kind, bool azp, int m, int n, int k);

/* Runs p through cuBLASLt under c when the shape and pointers suit an int8 IGMMA algorithm and a->workspace holds the region at
 * byte offset `ws_offset`. *taken tells whether it ran; when it did not,
 * nothing was launched and the caller runs the mma kernel. p: the launcher's
 * filled parameters (the epilogue reads its scale modes and pointers). */
qv_status aq_lt_try(const qv_launch_ctx &c, int kind, const aq_params &p, const qv_gemm_args *a, size_t ws_offset,
                    bool *taken);

/* The byte offset of this path's region: the mma plan's bytes rounded up to
 * 256, never inside the split-K counters that start every workspace. */
static inline size_t aq_lt_offset(const qv_launch_ctx &c, int kind, int m, int n, int k)
{
    size_t w = aq_plan_for(c, kind, m, n, k).workspace;
    if (w < AQ_COUNTERS_BYTES) w = AQ_COUNTERS_BYTES;
    return (w + 255) & ~(size_t)255;
}

#endif
