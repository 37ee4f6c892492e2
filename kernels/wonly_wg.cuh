/* wonly_wg.cuh: the Hopper large-M path of the weight-only GEMM family,
 * kernels/wonly_wg.cu: a wgmma GEMM that dequantizes the Marlin-packed weights
 * in registers, as seen by the dispatcher in kernels/wonly.cu (and by
 * tests/t_gpu_wg.c, which asks whether a problem takes it; plain C for that).
 * Rule: the path computes each row's declared arithmetic (src/registry.c rows
 * of family "marlin"), the same function as the mma kernel; it is only
 * entered after qv_launch_wonly has validated the variant, the shape and the
 * buffers, from the M that QVET_WO_WG_MIN_M sets (default 17). */
#ifndef QVET_KERNELS_WONLY_WG_CUH
#define QVET_KERNELS_WONLY_WG_CUH

#include <stddef.h>

#include "qvet/gemm.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether an (m, n, k) problem of v takes the wgmma path: *take = 1 when m
 * is at least the threshold and the kernel covers v and the shape; 0
 * otherwise. The environment variable QVET_WO_WG_MIN_M sets the threshold for
 * every row: a whole number >= 1, or "off" (never); unset or empty, the
 * default takes M >= 17, and M >= 9 on layers of at least 2^27 weights
 * (n x k); any other value returns QV_ERR_USAGE with a message. Read at
 * every call (tests and benchmarks switch it in one process); no CUDA call.
 * qv_wonly_route (wonly_route.h) asks this before the small-M kernel, so a
 * threshold at or below 16 takes those M from it. v must already be a
 * weight-only Marlin row that qv_launch_wonly accepts. */
qv_status qv_wonly_wg_wanted(const qv_variant *v, int m, int n, int k, int *take);

/* Workspace bytes of this path: the arrival-counter area every weight-only
 * path keeps (wonly_small.cuh), for act_order rows A's columns in sorted
 * order, (m, k) halves, and when the schedule has a stream-K tail its fp32
 * partial tiles (2 per block of the grid, 128 KiB each). 0 when none of these
 * is needed. No CUDA call. */
size_t qv_wonly_wg_workspace(const qv_variant *v, int m, int n, int k);

/* The tiles of an (m, n, k) problem of v that the kernel's schedule shares
 * over every block along K (its "stream-K" tail; 0 when the last round of
 * whole tiles is kept), for the environment as it is now
 * (QVET_WO_WG_TILE, QVET_WO_WG_BLOCKS); -1 when either variable is bad.
 * No CUDA call. Tests use it to know that a case reaches the tail. */
int qv_wonly_wg_tail_tiles(const qv_variant *v, int m, int n, int k);

/* The schedule of an (m, n, k) problem of v on this kernel, for the
 * environment as it is now (QVET_WO_WG_TILE, QVET_WO_WG_BLOCKS,
 * QVET_WO_WG_STREAMK); no CUDA call (tests: t_wonly_plan). The tiles are
 * tile_cols x tile_tokens; tiles_m of them along M, n_steps k64 stages each.
 * The first dp_tiles tiles run whole, tile t on block t mod grid; the last
 * sk_tiles are cut into sk_tiles x n_steps units (unit x: stage x mod n_steps
 * of tail tile x / n_steps), block b < sk_grid taking units
 * [b U / sk_grid, (b + 1) U / sk_grid), U = sk_tiles x n_steps. */
typedef struct {
    int tile_cols, tile_tokens;
    int tiles, tiles_m, n_steps, grid, dp_tiles, sk_tiles, sk_grid;
    size_t workspace;
} qv_wo_wg_sched_info;

/* 1 and *out filled when the kernel covers the problem and the environment is
 * valid, else 0. */
int qv_wonly_wg_sched_info(const qv_variant *v, int m, int n, int k, qv_wo_wg_sched_info *out);

/* Runs Y = A x W on the wgmma kernel. The caller (qv_launch_wonly) has checked
 * v, the shape, g and the buffers; this checks the workspace and refuses
 * (QV_ERR_UNSUPPORTED) any problem qv_wonly_wg_wanted would not take. The
 * environment variable QVET_WO_WG_TILE picks the block's tile, columns x
 * tokens: "128x256", "256x128", "128x128", "512x64", "128x64", "512x32",
 * "128x32", "512x16" or "128x16"; unset or empty, the tokens that hold M
 * (16, 32, 64, 128, else 256) in the wide form unless the layer is too small
 * for it (wg_common.cuh, tile_default); and
 * QVET_WO_WG_BLOCKS the persistent grid's
 * blocks (unset: 132, else 1 to 264); any other value of either returns
 * QV_ERR_USAGE before any CUDA call. */
qv_status qv_wonly_wg_launch(const qv_variant *v, const qv_gemm_args *a);

#ifdef __cplusplus
}
#endif

#endif
