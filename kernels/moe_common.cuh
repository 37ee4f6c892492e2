/* moe_common.cuh: where the routed layer's grouped GEMMs (kernels/moe_grouped.cu's
 * mma.sync and fp8 kernels, the wgmma kernel's MOE epilogue in
 * wonly_wg_kernel.cuh) store a slot's products, one definition for all three,
 * with the mutant switches of that step (mutants/catalogue.tsv, class 29). */
#ifndef QVET_KERNELS_MOE_COMMON_CUH
#define QVET_KERNELS_MOE_COMMON_CUH

#include <stdint.h>

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

#endif
