/* wonly_wg.cuh: the Hopper large-M path of the weight-only GEMM family,
 * kernels/wonly_wg.cu: a wgmma GEMM that dequantizes the Marlin-packed weights
 * in registers, as seen by the weight-only launcher in kernels/wonly.cu; its
 * schedule queries for the suites are in internal/wonly_plan.h. Plain C.
 * Rule: the path computes each row's declared arithmetic (src/registry.c rows
 * of family "marlin"), the same function as the mma kernel; it is only
 * entered after qv_launch_wonly has validated the variant, the shape and the
 * buffers, for the problems its row of the route table covers
 * (src/gpu_routes.c: from qv_launch_opts.wo_wg_min_m, default 17). */
#ifndef QVET_KERNELS_WONLY_WG_CUH
#define QVET_KERNELS_WONLY_WG_CUH

#include <stddef.h>

#include "internal/tuning.h"
#include "internal/wonly_plan.h"
#include "qvet/gemm.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Workspace bytes of this path: the arrival-counter area every weight-only
 * path keeps (internal/wonly_plan.h), for act_order rows A's columns in sorted
 * order, (m, k) halves, and when the schedule has a stream-K tail its fp32
 * partial tiles (2 per block of the grid, 128 KiB each). 0 when none of these
 * is needed. No CUDA call. */
size_t qv_wonly_wg_workspace(const qv_variant *v, int m, int n, int k, const qv_launch_ctx *c);

/* Runs Y = A x W on the wgmma kernel under c. The caller (qv_launch_wonly)
 * has checked v, the shape, g and the buffers; this checks the workspace and
 * refuses (QV_ERR_UNSUPPORTED) any problem the kernel does not cover. c's
 * options pick the block's tile (wo_wg_tile; unset, the tokens that hold M,
 * 16, 32, 64, 128, else 256, in the wide form unless the layer is too small
 * for it: wg_common.cuh, tile_default), the persistent grid's blocks
 * (wo_wg_blocks; unset, one per SM) and the stream-K tail (wo_wg_streamk). */
qv_status qv_wonly_wg_launch(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c);

#ifdef __cplusplus
}
#endif

#endif
