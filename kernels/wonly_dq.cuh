/* wonly_dq.cuh: the large-M path of the weight-only family, private to
 * kernels/: the Marlin-packed weights are dequantized into fp16/bf16 chunks of
 * the workspace and multiplied by cuBLAS (kernels/wonly_dq.cu). Included by
 * kernels/wonly.cu, whose qv_launch_wonly / qv_workspace_wonly dispatch here.
 * Rule: the path computes each row's declared arithmetic (src/registry.c), the
 * same function as the mma kernel; only the fp32 summation order differs. */
#ifndef QVET_KERNELS_WONLY_DQ_CUH
#define QVET_KERNELS_WONLY_DQ_CUH

#include <stddef.h>

#include "internal/tuning.h"
#include "qvet/gemm.h"

/* Workspace bytes of this path for v at (m, n, k): act_order's sorted copy of
 * A, the dequantized chunk buffers and, for channel/tensor scales, the fp32
 * product of one chunk. No CUDA call; v, m, n, k already validated. */
size_t qv_wonly_dq_workspace(const qv_variant *v, int m, int n, int k, const qv_launch_ctx *c);

/* Runs Y = A x W through this path. `v` and `a` are validated by
 * qv_launch_wonly (variant, shape, g, non-NULL and aligned buffers); this
 * checks the workspace size itself. */
qv_status qv_wonly_dq_launch(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c);

#endif
