/* wonly_route.h: which kernel qv_launch_wonly (kernels/wonly.cu) runs for a
 * weight-only problem under launch options, as the path numbers of the
 * weight-only route table (src/internal/route.h, src/gpu_routes.c). Plain C,
 * and no CUDA call when the options set sms and arch, so that CPU tests can
 * check the routing docs/kernel-paths.md documents without a device. */
#ifndef QVET_KERNELS_WONLY_ROUTE_H
#define QVET_KERNELS_WONLY_ROUTE_H

#include "qvet/gemm.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    QV_WO_PATH_WG = 1,    /* the sm_90a wgmma kernel (wonly_wg.cu) */
    QV_WO_PATH_SMALL = 2, /* the small-M kernel (wonly_small.cu) */
    QV_WO_PATH_DQ = 3,    /* dequantize + cuBLAS (wonly_dq.cu) */
    QV_WO_PATH_MMA = 4    /* the general mma kernel (wonly.cu) */
} qv_wo_path;

/* The path of an (m, n, k) problem of v under options o (NULL: the
 * defaults), the first row of the table that covers it (src/gpu_route.c),
 * in this order: the wgmma kernel when it takes M (o's
 * wo_wg_min_m; unset, M >= 17, and M >= 9 on layers of at least 2^27
 * weights), else the small-M kernel when o's wo_small takes M (unset,
 * M <= 16), else dequantize + cuBLAS from o's wo_dq_min_m (unset, 64), else
 * the mma kernel. v, m, n and k must be what qv_launch_wonly accepts (a
 * weight-only Marlin row, a legal shape: N % 64 == 0 and K % 16 == 0, which
 * the small-M and dequantize rows also require). A refused o returns QV_ERR_USAGE
 * with its message, and without a device o must set sms and arch
 * (qv_launch_ctx_get); no CUDA call then. */
qv_status qv_wonly_route(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts, qv_wo_path *path);

#ifdef __cplusplus
}
#endif

#endif
