/* mma.cuh: the PTX wrappers of qvet's mma.sync kernels, in one header:
 * cp.async copies into shared memory (16 and 4 bytes), the L2 prefetch,
 * ldmatrix, the m16n8k16 fp16 / bf16 mma.sync with fp32 accumulators, the
 * m16n8k32 int8 one with int32 accumulators and the exact e4m3 -> fp16
 * conversion. Included by
 * kernels/wonly.cu, wonly_small_tile.cuh, dequant.cuh and aq_mma.cuh (the
 * activation-quantized kernels). Rule: each wrapper is one PTX instruction
 * with the exact semantics named in its comment; none of them rounds anything
 * the caller did not ask for. */
#ifndef QVET_KERNELS_MMA_CUH
#define QVET_KERNELS_MMA_CUH

#include <stdint.h>

/* 16-byte asynchronous copy global -> shared. When `valid` is false the source
 * size is 0: nothing is read and the 16 destination bytes are zero-filled, which
 * is how rows beyond M, columns past N and K tails become exact zeros without
 * touching memory. The caller still passes a valid address, so no out-of-range
 * pointer is ever formed. */
__device__ __forceinline__ void qv_cp_async16_s(uint32_t smem_dst, const void *gmem_src, bool valid)
{
    int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_dst), "l"(gmem_src),
                 "r"(src_bytes));
}

/* The same, to a generic pointer into shared memory (the _s form takes the
 * 32-bit shared address, for callers that keep one and add offsets to it). */
__device__ __forceinline__ void qv_cp_async16(void *smem_dst, const void *gmem_src, bool valid)
{
    qv_cp_async16_s((uint32_t)__cvta_generic_to_shared(smem_dst), gmem_src, valid);
}

/* 4-byte asynchronous copy global -> shared, through L1 (cp.async takes 4 or
 * 8 bytes only in its .ca form), in the same commit groups as
 * qv_cp_async16: for sources aligned to 4 bytes only (the FP4 rows' packed
 * bias, qv_gemm_args.bias_packed; the fp8 wgmma MoE kernel's block scales).
 * Both addresses must be 4-byte aligned. */
__device__ __forceinline__ void qv_cp_async4_s(uint32_t smem_dst, const void *gmem_src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_dst), "l"(gmem_src));
}

__device__ __forceinline__ void qv_cp_async4(void *smem_dst, const void *gmem_src)
{
    qv_cp_async4_s((uint32_t)__cvta_generic_to_shared(smem_dst), gmem_src);
}

__device__ __forceinline__ void qv_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/* Waits until at most N committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void qv_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Brings the 128-byte line holding gmem into L2 (no register result). */
__device__ __forceinline__ void qv_prefetch_l2(const void *gmem)
{
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(gmem));
}

/* Four 8x8 b16 matrices from shared memory: lanes 8i..8i+7 give the row
 * addresses of matrix i; register i of every lane receives matrix i's fragment
 * (row lane/4, columns 2*(lane%4)+{0,1}), which is the mma A-fragment order when
 * the matrices are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
 * (rows 8-15, k 8-15). Read as bytes, lane t receives bytes 4(t%4)..4(t%4)+3
 * of row t/4 of each matrix: exactly the int8 / e4m3 A and B fragments of
 * m16n8k32. */
__device__ __forceinline__ void qv_ldmatrix_x4(uint32_t r[4], const void *smem_row)
{
    unsigned addr = (unsigned)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* D = A (16x16, row) * B (16x8, col) + D with exact products and fp32
 * accumulation inside the tensor core. A fragment: a[0..3] as ldmatrix_x4 gives
 * it; B fragment: b[0] holds B[2*(lane%4)+{0,1}][lane/4], b[1] holds
 * B[2*(lane%4)+8+{0,1}][lane/4]; D: d[0..1] row lane/4, d[2..3] row lane/4+8,
 * columns 2*(lane%4)+{0,1}. IS_BF16 selects bf16 operands instead of fp16. */
template <bool IS_BF16>
__device__ __forceinline__ void qv_mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2]);

template <>
__device__ __forceinline__ void qv_mma_16816<false>(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ __forceinline__ void qv_mma_16816<true>(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* D = A (16x32 s8) * B (32x8 s8) + D, exact in int32 (no .satfinite: the
 * registry proves K*max|a|*max|w| < 2^31, so saturation never triggers and
 * wrap-around never happens). a[0..3]: rows g/g+8 x k 0-15/16-31; b[0]: k
 * 4(t%4)..+3 of column g, b[1]: the same k + 16 (g = lane/4, t = lane%4). */
__device__ __forceinline__ void qv_mma_s8_16832(int d[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Two e4m3 codes (low byte first) -> f16x2, exactly (every e4m3 value is an
 * fp16 value; NaN stays NaN). */
__device__ __forceinline__ uint32_t qv_e4m3x2_to_f16x2(uint32_t two_bytes)
{
    uint32_t r;
    unsigned short v = (unsigned short)two_bytes;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(r) : "h"(v));
    return r;
}

#endif
