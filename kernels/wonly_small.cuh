/* wonly_small.cuh: the small-M (M <= 16) path of the weight-only GEMM family,
 * kernels/wonly_small.cu, as seen by the dispatcher in kernels/wonly.cu.
 * Rule: the small-M path computes the same declared arithmetic as the general
 * kernel (src/registry.c rows of family "marlin") and is only entered after
 * qv_launch_wonly has validated the variant, the shape and the buffers. */
#ifndef QVET_KERNELS_WONLY_SMALL_CUH
#define QVET_KERNELS_WONLY_SMALL_CUH

#include <stddef.h>

#include "internal/tuning.h"
#include "qvet/gemm.h"
#include "qvet/variant.h"

/* The largest M the small-M kernel takes: one m16 tensor-core tile. */
#define QV_WO_SMALL_MAX_M 16
/* The largest M of the swapped orientation (M as the mma's 8 columns). */
#define QV_WO_SMALL_SWAP_MAX_M 8

/* Which M go to the small-M kernel is its row of the weight-only route
 * table (src/gpu_routes.c, row small-m): the options' wo_small chooses
 * (gemm.h, qv_wo_small_mode):
 *   QV_WO_SMALL_DEFAULT: every M <= 16, M <= 8 with the swapped mma, one or
 *     two 64-column chunks per warp where the plan says they pay
 *     (wonly_small.cu, two_chunks_pay);
 *   QV_WO_SMALL_M16_8: M <= 8, m16 mma orientation;
 *   QV_WO_SMALL_NEVER: never (the general kernel runs every M);
 *   QV_WO_SMALL_M16_16: M <= 16, m16 mma orientation;
 *   QV_WO_SMALL_SWAP: M <= 8 with the swapped mma (weights as the A
 *     operand), one 64-column chunk per warp;
 *   QV_WO_SMALL_SWAP2: as QV_WO_SMALL_SWAP, with two 64-column chunks per warp.
 * The options' wo_small_splits (tests) makes the small-M plan ask for that
 * many K slices (rounded to whole groups and to the longest slice that
 * fits); unset, the plan's cost model chooses. The workspace query and the
 * launch take the same options. */

/* Workspace bytes of the small-M path for an (m, n, k) problem of v, m <= 16,
 * under c, in every configuration wo_small can select; v, n and k already
 * checked by the caller. Its split-K counters sit at offset 0 in a region as
 * large as one counter per 64 columns, so a workspace shared with the general
 * kernel keeps both paths' counters at zero. */
size_t qv_wonly_small_workspace(const qv_variant *v, int m, int n, int k, const qv_launch_ctx *c);

/* Bytes at the start of a weight-only workspace that hold split-K arrival
 * counters: one int per 64 columns (this kernel: one per column tile and
 * cluster rank, at most n / 64 rounded up to a multiple of 16, within the
 * 64-int multiple reserved here) and at least QV_WO_COUNTERS_MIN (wonly.cu's
 * plan splits only problems of fewer tiles, and a wgmma kernel's grid has at
 * most that many blocks). Every path of
 * qv_launch_wonly leaves them zero and starts its other buffers after them, so
 * one workspace, zeroed once, serves any sequence of M (gemm.h). */
#define QV_WO_COUNTERS_MIN QV_WG_BLOCKS_MAX
static inline size_t qv_wonly_counters_bytes(int n)
{
    size_t c = ((size_t)n + 63) / 64;
    if (c < QV_WO_COUNTERS_MIN) c = QV_WO_COUNTERS_MIN;
    return (c * sizeof(int) + 255) & ~(size_t)255;
}

/* The small-M plan of an (m, n, k) problem of v, as a launch under options o
 * (wo_small, wo_small_splits, wo_small_cluster) would make it; host only, no
 * CUDA call with o's sms and arch set (tests: t_wonly_plan). Slice y of
 * the splits covers k16 tiles [b, e) with b = (y slice_q + min(y, slice_r))
 * slice_unit and e = min(k / 16, b + (slice_q + (y < slice_r)) slice_unit);
 * a block stages group_rows rows of group scales. */
typedef struct {
    int swap;            /* 1: M as the mma's columns (M <= 8), 0: the m16 orientation */
    int cpw;             /* 64-column chunks per warp: columns per block 512 x cpw */
    int n_blocks;        /* column blocks (grid x) */
    int splits;          /* K slices (grid y) */
    int cluster;         /* blocks per cluster along K */
    int tiles_per_split; /* k16 tiles of the longest slice */
    int slice_unit, slice_q, slice_r;
    int group_rows;      /* group-scale rows staged per block (0 without group scales) */
    int smem;            /* dynamic shared memory per block, bytes */
    size_t workspace;    /* workspace bytes this plan needs */
    size_t asked;        /* what qv_wonly_small_workspace asks callers for (every configuration) */
} qv_wo_small_plan_info;

/* 1 and *out filled for 1 <= m <= QV_WO_SMALL_MAX_M and valid options (and a
 * device or o's sms and arch to plan for), else 0. */
#ifdef __cplusplus
extern "C"
#endif
    int
    qv_wonly_small_plan_info(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o,
                             qv_wo_small_plan_info *out);

/* Launches the small-M kernel under c; the caller has checked v
 * (check_variant), the shape, g, the buffer pointers and their alignment.
 * Checks the workspace. */
qv_status qv_wonly_small_launch(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c);

#endif
