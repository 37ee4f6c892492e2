/* wonly_small.cuh: the small-M (M <= 16) path of the weight-only GEMM family,
 * kernels/wonly_small.cu, as seen by the dispatcher in kernels/wonly.cu.
 * Rule: the small-M path computes the same declared arithmetic as the general
 * kernel (src/registry.c rows of family "marlin") and is only entered after
 * qv_launch_wonly has validated the variant, the shape and the buffers. */
#ifndef QVET_KERNELS_WONLY_SMALL_CUH
#define QVET_KERNELS_WONLY_SMALL_CUH

#include <stddef.h>

#include "qvet/gemm.h"
#include "qvet/variant.h"

/* The largest M the small-M kernel takes: one m16 tensor-core tile. */
#define QV_WO_SMALL_MAX_M 16
/* The largest M of the swapped orientation (M as the mma's 8 columns). */
#define QV_WO_SMALL_SWAP_MAX_M 8

/* 1 when a problem of M rows goes to the small-M kernel. The environment
 * variable QVET_WO_SMALL chooses, read at every call so that tests and
 * benchmarks can switch in one process:
 *   unset or an unknown value: every M <= 16, M <= 8 with the swapped mma;
 *   "1": M <= 8, m16 mma orientation;
 *   "0": never (the general kernel runs every M);
 *   "16": M <= 16, m16 mma orientation;
 *   "swap": M <= 8 with the swapped mma (weights as the A operand);
 *   "swap2": as "swap", with two 64-column chunks per warp for 4-bit weights.
 * QVET_WO_SMALL_SPLITS=<s> (tests) makes the small-M plan ask for s K slices
 * (rounded to whole groups and to the longest slice that fits); unset or 0
 * leaves the choice to the plan's cost model. Both the workspace size and the
 * launch read it, so it must not change between the two. */
int qv_wonly_small_wanted(int m);

/* Workspace bytes of the small-M path for an (m, n, k) problem of v, m <= 16;
 * v, n and k already checked by the caller. Its split-K counters sit at offset
 * 0 in a region as large as one counter per 64 columns, so a workspace shared
 * with the general kernel keeps both paths' counters at zero. */
size_t qv_wonly_small_workspace(const qv_variant *v, int m, int n, int k);

/* Bytes at the start of a weight-only workspace that hold split-K arrival
 * counters: one int per 64 columns (this kernel: one per column tile and
 * cluster rank, at most n / 64 rounded up to a multiple of 16, within the
 * 64-int multiple reserved here) and at least 264 (wonly.cu's
 * plan splits only problems of fewer than 2 x 132 tiles). Every path of
 * qv_launch_wonly leaves them zero and starts its other buffers after them, so
 * one workspace, zeroed once, serves any sequence of M (gemm.h). */
static inline size_t qv_wonly_counters_bytes(int n)
{
    size_t c = ((size_t)n + 63) / 64;
    if (c < 264) c = 264;
    return (c * sizeof(int) + 255) & ~(size_t)255;
}

/* Launches the small-M kernel; the caller has checked v (check_variant), the
 * shape, g, the buffer pointers and their alignment. Checks the workspace. */
qv_status qv_wonly_small_launch(const qv_variant *v, const qv_gemm_args *a);

#endif
