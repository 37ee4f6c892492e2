/* wonly_plan.h: the host-side queries of the weight-only GEMM family: which
 * kernel qv_launch_wonly (kernels/wonly.cu) runs for a problem, the small-M
 * and wgmma kernels' plans, and the workspace layout every path shares.
 * Included by kernels/wonly_small.cuh and kernels/wonly_wg.cuh (the kernels
 * see these declarations from here), src/gpu_route.c, src/gpu_routes.c and
 * the suites. Rule: plain C for gcc and nvcc, no CUDA type; with the
 * options' sms and arch set no query makes a CUDA call, so that CPU tests
 * can check the routing and the plans without a device. */
#ifndef QVET_WONLY_PLAN_H
#define QVET_WONLY_PLAN_H

#include <stddef.h>

#include "internal/tuning.h"
#include "qvet/gemm.h"
#include "qvet/status.h"
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
 * launch (kernels/wonly_small.cuh) take the same options. */

/* Bytes at the start of a weight-only workspace that hold split-K arrival
 * counters: one int per 64 columns (the small-M kernel: one per column tile
 * and cluster rank, at most n / 64 rounded up to a multiple of 16, within the
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
int qv_wonly_small_plan_info(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o,
                             qv_wo_small_plan_info *out);

/* The tiles of an (m, n, k) problem of v that the wgmma kernel's schedule
 * shares over every block along K (its "stream-K" tail; 0 when the last round
 * of whole tiles is kept), under options o (wo_wg_tile, wo_wg_blocks,
 * wo_wg_streamk); -1 when o is refused or there is no device to plan for
 * (qv_launch_ctx_get). Tests use it to know that a case reaches the tail. */
int qv_wonly_wg_tail_tiles(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o);

/* The schedule of an (m, n, k) problem of v on the wgmma kernel under options o
 * (wo_wg_tile, wo_wg_blocks, wo_wg_streamk; with o's sms and arch set, no
 * CUDA call: tests/t_wonly_plan.c). The tiles are tile_cols x tile_tokens;
 * tiles_m of them along M, n_steps k64 stages each. The first dp_tiles tiles
 * run whole, tile t on block t mod grid; the last sk_tiles are cut into
 * sk_tiles x n_steps units (unit x: stage x mod n_steps of tail tile x /
 * n_steps), block b < sk_grid taking units [b U / sk_grid, (b + 1) U /
 * sk_grid), U = sk_tiles x n_steps. */
typedef struct {
    int tile_cols, tile_tokens;
    int tiles, tiles_m, n_steps, grid, dp_tiles, sk_tiles, sk_grid;
    size_t workspace;
} qv_wo_wg_sched_info;

/* 1 and *out filled when the wgmma kernel covers the problem and o is valid
 * (and a device or o's sms and arch say what to plan for), else 0. */
int qv_wonly_wg_sched_info(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o,
                           qv_wo_wg_sched_info *out);

#ifdef __cplusplus
}
#endif

#endif
