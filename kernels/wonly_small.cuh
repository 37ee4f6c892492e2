/* wonly_small.cuh: the small-M (M <= 16) path of the weight-only GEMM family,
 * kernels/wonly_small.cu, as seen by the dispatcher in kernels/wonly.cu.
 * Rule: the small-M path computes the same declared arithmetic as the general
 * kernel (src/registry.c rows of family "marlin") and is only entered after
 * qv_launch_wonly has validated the variant, the shape and the buffers. */
#ifndef QVET_KERNELS_WONLY_SMALL_CUH
#define QVET_KERNELS_WONLY_SMALL_CUH

#include <stddef.h>

#include "internal/tuning.h"
#include "internal/wonly_plan.h"
#include "qvet/gemm.h"
#include "qvet/variant.h"

/* QV_WO_SMALL_MAX_M, the options that choose which M come here (wo_small),
 * the counters area at the start of the workspace and the plan query
 * (qv_wonly_small_plan_info) are host declarations: internal/wonly_plan.h. */

/* Workspace bytes of the small-M path for an (m, n, k) problem of v, m <= 16,
 * under c, in every configuration wo_small can select; v, n and k already
 * checked by the caller. Its split-K counters sit at offset 0 in a region as
 * large as one counter per 64 columns, so a workspace shared with the general
 * kernel keeps both paths' counters at zero. */
size_t qv_wonly_small_workspace(const qv_variant *v, int m, int n, int k, const qv_launch_ctx *c);

/* Launches the small-M kernel under c; the caller has checked v
 * (check_variant), the shape, g, the buffer pointers and their alignment.
 * Checks the workspace. */
qv_status qv_wonly_small_launch(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c);

#endif
