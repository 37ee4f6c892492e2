/* moe_common.cuh: where the routed layer's grouped GEMMs (kernels/moe_grouped.cu's
 * mma.sync and fp8 kernels, kernels/moe_fp8_wg.cu, the wgmma kernel's MOE
 * epilogue in wonly_wg_kernel.cuh) store a slot's products, one definition for
 * all, with the mutant switches of that step (mutants/catalogue.tsv, class
 * 29); and the chain the grouped launch's kernels form (moe_grouped.cu). */
#ifndef QVET_KERNELS_MOE_COMMON_CUH
#define QVET_KERNELS_MOE_COMMON_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "func_attr.cuh"
#include "internal/gpu.h"

/* ---- the chain: every launch after the routing a programmatic dependent of
 * the one in front ---- */

/* Waits until the kernel in front has finished and its writes are visible
 * (a no-op for a kernel launched without the attribute). */
__device__ __forceinline__ void chain_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

/* Lets the next kernel of the chain launch once every block of this grid has
 * passed here (or exited). */
__device__ __forceinline__ void chain_release() { asm volatile("griddepcontrol.launch_dependents;\n" ::); }

/* Launches kernel k as a programmatic dependent of the kernel in front in
 * the stream (its threads call chain_wait first). */
template <class... KArgs, class... Args>
static qv_status launch_chained(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                const char *what, const Args &...args)
{
    return qv_launch_pdl(k, grid, block, smem, stream, true, what, args...);
}

/* ---- the grouped fp8 block-128 GEMMs (moe_grouped.cu's mma.sync kernel,
 * moe_fp8_wg.cu's wgmma one) ---- */

struct moe_f8_params {
    const uint8_t *a;      /* (t, k) e4m3 activations */
    const float *a_scale;  /* (ceil(k/128), t) */
    const uint8_t *b;      /* (nx, n, k) e4m3 weights */
    const float *w_scale;  /* (nx, ceil(k/128), ceil(n/128)) */
    const int32_t *slot;
    const int *block_expert;
    const int *expert_start;
    float *inter;          /* (t * per, n) */
    int t, n, k, per, nx;
};

/* The expert whose block scales slot block y reads: its own, x =
 * block_expert[y]. */
__device__ __forceinline__ int moe_scale_expert(const int *block_expert, int y, int x)
{
#ifdef QV_MUTANT_gpu_moe_prev_block_scale
    /* Mutant (class 23, CUTLASS #3596): the scales of the previous block's
     * group (expert) reused for this block (the weights stay its own). */
    return y > 0 ? block_expert[y - 1] : x;
#else
    (void)block_expert, (void)y;
    return x;
#endif
}

/* Byte offset of 16-byte chunk c (0..7) of row r of a tile of 128-byte rows,
 * the chunk index XOR the row's index in its 8-row atom: wgmma's 128-byte
 * swizzle (the tile on a 1024-byte boundary), and a layout where the 8 rows
 * an ldmatrix reads hit 8 bank groups. */
__device__ __forceinline__ int moe_swz128(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

/* ---- a slot's products ---- */

/* The row of the fp32 products that slot value sl (a pair t * per + c, or -1
 * for padding) writes: true with *row = sl, or false for a padding slot,
 * which is never written. */
__device__ __forceinline__ bool moe_slot_row(int32_t sl, int32_t *row)
{
#ifdef QV_MUTANT_gpu_moe_padding_written
    /* Mutant (class 29, llama.cpp #17089): a block's padding rows are
     * written too, to pair 0's row. */
    *row = sl < 0 ? 0 : sl;
    return true;
#else
    *row = sl;
    return sl >= 0;
#endif
}

/* The column of an n-column row that a tile's product of column col is
 * written to: col. */
__device__ __forceinline__ int moe_out_col(int col, int n)
{
#ifdef QV_MUTANT_gpu_moe_wrong_columns
    /* Mutant (class 29): the columns of a tile written 64 columns on
     * (wrapping at N). */
    return (col + 64) % n;
#else
    (void)n;
    return col;
#endif
}

/* The inclusive prefix sum of v over a warp's lanes (lane order). */
__device__ __forceinline__ int warp_scan_incl(int v, int lane)
{
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
    }
    return v;
}

/* The exclusive prefix sum of v over a 256-thread block (thread order) and,
 * in *total, the block's sum: a warp scan, the warps' sums through s_warp
 * (8 ints), one barrier, which every thread must reach. */
__device__ __forceinline__ int block_scan256(int v, int *s_warp, int lane, int warp, int *total)
{
    const int incl = warp_scan_incl(v, lane);
    if (lane == 31) s_warp[warp] = incl;
    __syncthreads();
    int run = incl - v, all = 0;
    for (int w = 0; w < 8; w++) {
        if (w < warp) run += s_warp[w];
        all += s_warp[w];
    }
    *total = all;
    return run;
}

#endif
