/* aq_mma.cuh: the fragment helpers of the activation-quantized GEMM kernels
 * (QQQ W4A8, W8A8 int8 and fp8) over mma.cuh's PTX wrappers: the e4m3 k32
 * step through exact fp16 conversion, and QQQ's weight dequantization.
 * Included by kernels/aq_gemm.cuh and moe_grouped.cu. Rule: every helper states which
 * fragment layout it produces (PTX ISA "Matrix fragments for
 * mma.m16n8k32"), because the packed layouts of layout.h are defined by
 * those fragments. */
#ifndef QVET_AQ_MMA_CUH
#define QVET_AQ_MMA_CUH

#include <stdint.h>

#include <cuda_fp16.h>

#include "mma.cuh"

/* e4m3 on Hopper through mma.sync: each e4m3 code converts exactly to fp16
 * (cvt.rn.f16x2.e4m3x2, two codes per instruction) and two fp16 m16n8k16
 * products with fp32 accumulation do the k32 step. The fp16 fragment's k slots
 * (2t, 2t+1, 2t+8, 2t+9) take the real k (4t .. 4t+3) of the 8-bit fragment,
 * the same permutation for A and B, so every product pairs the right operands.
 * Converting once per fragment (not per instruction) is what makes this path
 * fast; its accumulator behaviour is measured by qv_aq_fp8_probe.
 *
 * 8-bit A fragment (a[0..3]: rows g, g+8 x k 4t.., then k 16+4t..) -> the A
 * fragments of two fp16 m16n8k16 instructions, h[0..3] and h[4..7]. */
__device__ __forceinline__ void aq_e4m3_frag_a(const uint32_t a[4], uint32_t h[8])
{
#pragma unroll
    for (int s = 0; s < 2; s++) {
        h[4 * s + 0] = qv_e4m3x2_to_f16x2(a[2 * s]);             /* row g,   real k 4t, 4t+1 */
        h[4 * s + 1] = qv_e4m3x2_to_f16x2(a[2 * s + 1]);         /* row g+8 */
        h[4 * s + 2] = qv_e4m3x2_to_f16x2(a[2 * s] >> 16);       /* row g,   real k 4t+2, 4t+3 */
        h[4 * s + 3] = qv_e4m3x2_to_f16x2(a[2 * s + 1] >> 16);   /* row g+8 */
    }
}

/* 8-bit B fragment (b[0]: k 4t.., b[1]: k 16+4t.., column g) -> h[0..1] and h[2..3]. */
__device__ __forceinline__ void aq_e4m3_frag_b(const uint32_t b[2], uint32_t h[4])
{
    h[0] = qv_e4m3x2_to_f16x2(b[0]);
    h[1] = qv_e4m3x2_to_f16x2(b[0] >> 16);
    h[2] = qv_e4m3x2_to_f16x2(b[1]);
    h[3] = qv_e4m3x2_to_f16x2(b[1] >> 16);
}

/* D = A x B + C over one converted k32 step: two fp16 m16n8k16 mma, fp32 C/D. */
__device__ __forceinline__ void aq_mma_f16_k32(float c[4], const uint32_t ha[8], const uint32_t hb[4])
{
#pragma unroll
    for (int s = 0; s < 2; s++) qv_mma_16816<false>(c, ha + 4 * s, hb + 2 * s);
}

/* The e4m3 x e4m3 k32 step on 8-bit fragments (converts both operands). */
__device__ __forceinline__ void aq_mma_e4m3(float c[4], const uint32_t a[4], const uint32_t b[2])
{
    uint32_t ha[8], hb[4];
    aq_e4m3_frag_a(a, ha);
    aq_e4m3_frag_b(b, hb);
    aq_mma_f16_k32(c, ha, hb);
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

/* QQQ per group: nibbles 0,1,4,5 of w (interleave [0,2,4,6,1,3,5,7], so rows
 * r0, r2, r1, r3 of the first n8 column block) become the int8 fragment
 * [w8(r0), w8(r1), w8(r2), w8(r3)] with w8 = rne((q - 8) * s) as ONE fp16
 * rounding, the published QQQ arithmetic (the registry row declares it):
 *  - 0x6400|q is the fp16 1024+q; subtracting 1032 (0x6408) gives q-8 exactly;
 *    for the nibble at bit 4 the fp16 is 1024+16q, and (x/16 - 72) with
 *    1/16 = 0x2c00, -72 = 0xd480 is again q-8 exactly;
 *  - fma(q-8, s, 1280) rounds once in fp16, where the spacing is 1 on
 *    [1024, 2048): the result is 1280 + rne((q-8)*s) (1280 = 0x6500 is even, so
 *    the tie rule is the one of rne alone);
 *  - the low byte of fp16 1024+j is j, so byte = (256 + w8) mod 256, which is
 *    w8's int8 code (QQQ adds 1152 and flips bit 7 afterwards: the same bits);
 *    prmt 0x6420 gathers bytes 0, 2, 4, 6. */
__device__ __forceinline__ uint32_t aq_qqq_group_dq(uint32_t w, uint32_t s2)
{
    const uint32_t lo = aq_lop3<(0xf0 & 0xcc) | 0xaa>(w, 0x000f000fu, 0x64006400u);
    const uint32_t hi = aq_lop3<(0xf0 & 0xcc) | 0xaa>(w, 0x00f000f0u, 0x64006400u);
    const uint32_t sub = 0x64086408u, mul = 0x2c002c00u, add = 0xd480d480u, magic = 0x65006500u;
    __half2 t0 = __hsub2(*reinterpret_cast<const __half2 *>(&lo), *reinterpret_cast<const __half2 *>(&sub));
    __half2 t1 = __hfma2(*reinterpret_cast<const __half2 *>(&hi), *reinterpret_cast<const __half2 *>(&mul),
                         *reinterpret_cast<const __half2 *>(&add));
    const __half2 s = *reinterpret_cast<const __half2 *>(&s2);
    t0 = __hfma2(t0, s, *reinterpret_cast<const __half2 *>(&magic));
    t1 = __hfma2(t1, s, *reinterpret_cast<const __half2 *>(&magic));
    uint32_t u0 = *reinterpret_cast<uint32_t *>(&t0), u1 = *reinterpret_cast<uint32_t *>(&t1), r;
    asm volatile("prmt.b32 %0, %1, %2, 0x6420;\n" : "=r"(r) : "r"(u0), "r"(u1));
    return r;
}

#endif
