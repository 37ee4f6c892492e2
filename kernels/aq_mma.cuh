/* aq_mma.cuh: PTX helpers of the activation-quantized GEMM kernels (QQQ W4A8,
 * W8A8 int8 and fp8): cp.async with zero fill, ldmatrix, the int8 and e4m3
 * mma.sync instructions and QQQ's weight dequantization. Included by
 * kernels/aq_gemm.cuh only. Rule: every helper states which fragment layout it
 * produces (PTX ISA "Matrix fragments for mma.m16n8k32"), because the packed
 * layouts of layout.h are defined by those fragments. */
#ifndef QVET_AQ_MMA_CUH
#define QVET_AQ_MMA_CUH

#include <stdint.h>

#include <cuda_fp16.h>

/* Copies 16 bytes global -> shared asynchronously; when `pred` is false the 16
 * shared bytes are zero-filled and nothing is read (src-size 0), which is how
 * rows past M, columns past N and K tails become exact zeros. The caller still
 * passes a valid address so no out-of-range pointer is ever formed. */
__device__ __forceinline__ void aq_cp_async16(void *smem, const void *gmem, bool pred)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    int src_bytes = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}

__device__ __forceinline__ void aq_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/* Waits until at most n committed groups are still in flight. */
template <int n>
__device__ __forceinline__ void aq_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(n));
}

/* Four 8x8 b16 matrices (each 8 rows of 16 bytes) from shared memory; lane l
 * gives the row address for matrix l/8. Thread t receives bytes 4(t%4)..4(t%4)+3
 * of row t/4 of each matrix: exactly the int8/e4m3 A and B fragments. */
__device__ __forceinline__ void aq_ldsm4(uint32_t r[4], const void *smem)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* D = A(16x32 s8) * B(32x8 s8) + C, exact in int32 (no .satfinite: the
 * registry proves K*max|a|*max|w| < 2^31, so saturation never triggers and
 * wrap-around never happens). a[0..3]: rows g/g+8 x k 0-15/16-31; b[0]: k
 * 4(t%4)..+3 of column g, b[1]: the same k + 16 (g = lane/4, t = lane%4). */
__device__ __forceinline__ void aq_mma_s8(int c[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* The e4m3 x e4m3 tensor-core product with fp32 C/D, same fragments as above.
 * Its internal accumulator keeps fewer bits than fp32 (measured by the
 * precision-witness probe, see w8a8.cu), which is why the kernel promotes. */
__device__ __forceinline__ void aq_mma_e4m3(float c[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* lop3 with an explicit truth table, so (a & b) | c is one instruction. */
template <int lut>
__device__ __forceinline__ uint32_t aq_lop3(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t r;
    asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c), "n"(lut));
    return r;
}

/* QQQ channelwise: a packed word holds 8 signed nibbles in the interleave
 * [4,0,5,1,6,2,7,3], so the high nibble of byte i is row i of the first n8
 * column block and the low nibble row i of the second. Masking the high
 * nibbles leaves each as 16*q inside an int8 (exact; the stored channel scale
 * is the true one divided by 16). */
__device__ __forceinline__ uint32_t aq_qqq_ch_hi(uint32_t w) { return w & 0xF0F0F0F0u; }
__device__ __forceinline__ uint32_t aq_qqq_ch_lo(uint32_t w) { return (w << 4) & 0xF0F0F0F0u; }

/* QQQ per group: nibbles 0,1,4,5 of w (interleave [0,2,4,6,1,3,5,7], so values
 * v0,v2,v1,v3 of four consecutive k rows) become the int8 fragment
 * [w8(v0), w8(v1), w8(v2), w8(v3)] with w8 = rne((q - 8) * s) as ONE fp16
 * rounding:
 *  - 0x6400|q is the fp16 1024+q; subtracting 1032 (0x6408) gives q-8 exactly;
 *    for the nibble at bit 4 the fp16 is 1024+16q, and (x/16 - 72) with
 *    1/16 = 0x2c00, -72 = 0xd480 is again q-8 exactly;
 *  - fma(q-8, s, 1152) rounds once in fp16, where the spacing is 1 on
 *    [1024, 2048): the result is 1152 + rne((q-8)*s);
 *  - the low byte of fp16 1024+j is j, so byte = 128 + w8; xor 0x80 gives the
 *    int8 w8 (prmt 0x6420 gathers bytes 0, 2, 4, 6).
 * This is the published QQQ arithmetic; the registry row declares it. */
__device__ __forceinline__ uint32_t aq_qqq_group_dq(uint32_t w, uint32_t s2)
{
    const uint32_t lo = aq_lop3<(0xf0 & 0xcc) | 0xaa>(w, 0x000f000fu, 0x64006400u);
    const uint32_t hi = aq_lop3<(0xf0 & 0xcc) | 0xaa>(w, 0x00f000f0u, 0x64006400u);
    const uint32_t sub = 0x64086408u, mul = 0x2c002c00u, add = 0xd480d480u, magic = 0x64806480u;
    __half2 t0 = __hsub2(*reinterpret_cast<const __half2 *>(&lo), *reinterpret_cast<const __half2 *>(&sub));
    __half2 t1 = __hfma2(*reinterpret_cast<const __half2 *>(&hi), *reinterpret_cast<const __half2 *>(&mul),
                         *reinterpret_cast<const __half2 *>(&add));
    const __half2 s = *reinterpret_cast<const __half2 *>(&s2);
    t0 = __hfma2(t0, s, *reinterpret_cast<const __half2 *>(&magic));
    t1 = __hfma2(t1, s, *reinterpret_cast<const __half2 *>(&magic));
    uint32_t u0 = *reinterpret_cast<uint32_t *>(&t0), u1 = *reinterpret_cast<uint32_t *>(&t1), r;
    asm volatile("prmt.b32 %0, %1, %2, 0x6420;\n" : "=r"(r) : "r"(u0), "r"(u1));
    return r ^ 0x80808080u;
}

#endif
