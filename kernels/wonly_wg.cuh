/* wonly_wg.cuh: the Hopper large-M path of the weight-only GEMM family,
 * kernels/wonly_wg.cu: a wgmma GEMM that dequantizes the Marlin-packed weights
 * in registers, as seen by the dispatcher in kernels/wonly.cu (and by
 * tests/t_gpu_wg.c, which asks whether a problem takes it; plain C for that).
 * Rule: the path computes each row's declared arithmetic (src/registry.c rows
 * of family "marlin"), the same function as the mma kernel; it is only
 * entered after qv_launch_wonly has validated the variant, the shape and the
 * buffers, and only when QVET_WO_WG_MIN_M asks for it. */
#ifndef QVET_KERNELS_WONLY_WG_CUH
#define QVET_KERNELS_WONLY_WG_CUH

#include <stddef.h>

#include "qvet/gemm.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether an (m, n, k) problem of v takes the wgmma path: *take = 1 when the
 * environment variable QVET_WO_WG_MIN_M holds a whole number >= 1, m is at
 * least that number and the kernel covers v and the shape; 0 otherwise (the
 * path is off while the variable is unset or empty). A value that is not a
 * whole number >= 1 returns QV_ERR_USAGE with a message. Read at every call
 * (tests and benchmarks switch it in one process); no CUDA call. v must
 * already be a weight-only Marlin row that qv_launch_wonly accepts. */
qv_status qv_wonly_wg_wanted(const qv_variant *v, int m, int n, int k, int *take);

/* Workspace bytes of this path: the arrival-counter area every weight-only
 * path keeps (wonly_small.cuh) and, for act_order rows, A's columns in sorted
 * order, (m, k) halves. 0 for rows without act_order. No CUDA call. */
size_t qv_wonly_wg_workspace(const qv_variant *v, int m, int n, int k);

/* Runs Y = A x W on the wgmma kernel. The caller (qv_launch_wonly) has checked
 * v, the shape, g and the buffers; this checks the workspace and refuses
 * (QV_ERR_UNSUPPORTED) any problem qv_wonly_wg_wanted would not take. The
 * environment variable QVET_WO_WG_TOKENS picks the block's token tile: 128
 * (unset or "128": 256 columns x 128 tokens) or "64" (512 columns x 64
 * tokens); any other value returns QV_ERR_USAGE before any CUDA call. */
qv_status qv_wonly_wg_launch(const qv_variant *v, const qv_gemm_args *a);

#ifdef __cplusplus
}
#endif

#endif
