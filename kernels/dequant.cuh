/* dequant.cuh: turning Marlin-packed weight words into mma B fragments, for the
 * weight-only kernels (kernels/wonly.cu). Rule: every conversion of a code to a
 * half-precision value is exact (integers below 2^11 in fp16, below 2^8 in
 * bf16, e4m3 in both); the only rounding is the declared one, a single
 * half-precision multiply by the group scale (QV_DQ_MUL_RN).
 *
 * Fragment facts (docs/design.md §7, include/qvet/layout.h): for one 16-row k tile
 * and one 64-column chunk, lane l owns the B fragments of the eight n8 tiles
 * j8 = 0..7 (columns 8*j8 + l/4) at k rows r0 = 2*(l%4) + {0,1} ("lo" pair, mma
 * register b[0]) and r0 + 8 + {0,1} ("hi" pair, register b[1]).
 *  - 4-bit: the lane reads 4 words; word j8/2 holds n8 tiles 2*(j8/2) and
 *    2*(j8/2)+1 in its low and high byte of each half. Nibble order in a word is
 *    [t0 k0, t0 k8, t1 k0, t1 k8, t0 k1, t0 k9, t1 k1, t1 k9] (the interleave
 *    [0,2,4,6,1,3,5,7]), so nibbles i and i+4 form one k pair.
 *  - 8-bit: the lane reads 8 words; word j8 holds bytes [k0, k8, k1, k9] (the
 *    interleave [0,2,1,3]), so bytes 0,2 are the lo pair and bytes 1,3 the hi pair. */
#ifndef QVET_KERNELS_DEQUANT_CUH
#define QVET_KERNELS_DEQUANT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "mma.cuh"

/* (a & mask) | magic in one instruction: lop3 with the truth table of
 * (A & B) | C, which is 0xF0 & 0xCC | 0xAA = 0xEA. */
__device__ __forceinline__ uint32_t qv_lop3_and_or(uint32_t a, uint32_t mask, uint32_t magic)
{
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(magic));
    return r;
}

/* (a & mask) | (b & ~mask) in one instruction: lop3 with the truth table
 * 0xF0 & 0xCC | 0xAA & ~0xCC = 0xE2. */
__device__ __forceinline__ uint32_t qv_lop3_select(uint32_t a, uint32_t mask, uint32_t b)
{
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xE2;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(b));
    return r;
}

/* (a & mask) ^ magic in one instruction: lop3 with the truth table of
 * (A & B) ^ C, which is 0xF0 & 0xCC ^ 0xAA = 0x6A. */
__device__ __forceinline__ uint32_t qv_lop3_and_xor(uint32_t a, uint32_t mask, uint32_t magic)
{
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0x6A;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(magic));
    return r;
}

/* Half-precision arithmetic on packed pairs held as raw 32-bit registers. Each
 * is one IEEE operation, round to nearest even, subnormals kept. */
template <bool IS_BF16> struct qv_h2;

template <> struct qv_h2<false> {
    static __device__ __forceinline__ uint32_t sub(uint32_t a, uint32_t b)
    {
        __half2 r = __hsub2(*reinterpret_cast<__half2 *>(&a), *reinterpret_cast<__half2 *>(&b));
        return *reinterpret_cast<uint32_t *>(&r);
    }
    static __device__ __forceinline__ uint32_t mul(uint32_t a, uint32_t b)
    {
        __half2 r = __hmul2_rn(*reinterpret_cast<__half2 *>(&a), *reinterpret_cast<__half2 *>(&b));
        return *reinterpret_cast<uint32_t *>(&r);
    }
    static __device__ __forceinline__ uint32_t fma(uint32_t a, uint32_t b, uint32_t c)
    {
        __half2 r = __hfma2(*reinterpret_cast<__half2 *>(&a), *reinterpret_cast<__half2 *>(&b),
                            *reinterpret_cast<__half2 *>(&c));
        return *reinterpret_cast<uint32_t *>(&r);
    }
    /* Broadcasts one 16-bit code to both halves. */
    static __device__ __forceinline__ uint32_t dup(uint32_t code16) { return code16 * 0x00010001u; }
    static __device__ __forceinline__ float to_float(uint16_t c)
    {
        return __half2float(__ushort_as_half(c));
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __half2 r = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&r);
    }
};

template <> struct qv_h2<true> {
    static __device__ __forceinline__ uint32_t sub(uint32_t a, uint32_t b)
    {
        __nv_bfloat162 r = __hsub2(*reinterpret_cast<__nv_bfloat162 *>(&a),
                                   *reinterpret_cast<__nv_bfloat162 *>(&b));
        return *reinterpret_cast<uint32_t *>(&r);
    }
    static __device__ __forceinline__ uint32_t mul(uint32_t a, uint32_t b)
    {
        __nv_bfloat162 r = __hmul2_rn(*reinterpret_cast<__nv_bfloat162 *>(&a),
                                      *reinterpret_cast<__nv_bfloat162 *>(&b));
        return *reinterpret_cast<uint32_t *>(&r);
    }
    static __device__ __forceinline__ uint32_t dup(uint32_t code16) { return code16 * 0x00010001u; }
    static __device__ __forceinline__ float to_float(uint16_t c)
    {
        return __bfloat162float(__ushort_as_bfloat16(c));
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __nv_bfloat162 r = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&r);
    }
};

/* The constant that the codes' magic leaves above q - z, in both halves:
 * fp16 0x6400 is 1024, whose ulp is 1, so 1024 + z; bf16 0x4300 is 128, whose
 * ulp is 1, so 128 + z. */
template <bool IS_BF16>
__device__ __forceinline__ uint32_t qv_dq4_one_const(uint32_t z)
{
    return qv_h2<IS_BF16>::dup((IS_BF16 ? 0x4300u : 0x6400u) + z);
}

/* The two constants that turn 4-bit codes with zero point z into q - z
 * (qv_dq4), computed once per group: c[0] = qv_dq4_one_const(z); in fp16,
 * c[1] = -(64 + z) is built from fp16 64 = 0x5400, whose ulp is 1/16, as
 * 0x5400 + 16z with the sign bit 0x8000; in bf16 both are 128 + z. */
template <bool IS_BF16>
__device__ __forceinline__ void qv_dq4_consts(uint32_t z, uint32_t c[2])
{
    c[0] = qv_dq4_one_const<IS_BF16>(z);
    c[1] = IS_BF16 ? c[0] : qv_h2<false>::dup(0x8000u | (0x5400u + 16u * z));
}

/* 4-bit codes -> the exact integer value q - z of n8 tile j8's two fragment
 * registers. `w` is word j8/2 already shifted right by 8*(j8%2), so the wanted
 * nibbles sit at bits 0-3/16-19 (lo pair) and 4-7/20-23 (hi pair); `c` comes
 * from qv_dq4_consts. */
template <bool IS_BF16>
__device__ __forceinline__ void qv_dq4(uint32_t w, const uint32_t c[2], uint32_t b[2]);

template <>
__device__ __forceinline__ void qv_dq4<false>(uint32_t w, const uint32_t c[2], uint32_t b[2])
{
    /* OR-ing a nibble into the mantissa of fp16 1024 (0x6400) gives 1024 + q
     * exactly; a nibble at bits 4-7 gives 1024 + 16q. */
    const uint32_t magic = 0x64006400u;
    uint32_t lo = qv_lop3_and_or(w, 0x000F000Fu, magic);
    uint32_t hi = qv_lop3_and_or(w, 0x00F000F0u, magic);
    /* lo - (1024 + z) = q - z exactly. */
    b[0] = qv_h2<false>::sub(lo, c[0]);
    /* hi * (1/16) - (64 + z) = q - z: the product is exact (a power of two)
     * and the fma rounds an integer below 2^11 only, so it is exact too.
     * 0x2C00 is fp16 1/16. */
    b[1] = qv_h2<false>::fma(hi, 0x2C002C00u, c[1]);
}

template <>
__device__ __forceinline__ void qv_dq4<true>(uint32_t w, const uint32_t c[2], uint32_t b[2])
{
    /* OR-ing a nibble into the mantissa of bf16 128 (0x4300) gives 128 + q
     * exactly. A nibble at bits 4-7 would overflow bf16's 7-bit mantissa, so
     * the hi pair is shifted down first. */
    const uint32_t magic = 0x43004300u;
    uint32_t lo = qv_lop3_and_or(w, 0x000F000Fu, magic);
    uint32_t hi = qv_lop3_and_or(w >> 4, 0x000F000Fu, magic);
    b[0] = qv_h2<true>::sub(lo, c[0]);
    b[1] = qv_h2<true>::sub(hi, c[1]);
}

/* 4-bit codes with zero point z -> q - z as qv_dq4, from one constant c =
 * qv_dq4_one_const(z) (1024 + z in fp16, 128 + z in bf16, in both halves): the
 * hi pair is shifted down to the lo pair's bits first, so both pairs take the
 * same subtraction. In fp16 one shift more per call than qv_dq4 and half its
 * constants' registers, which a kernel that keeps a group's constants in
 * registers across its k16 tiles (kernels/wonly_wg.cu) no longer rebuilds
 * in each tile; in bf16 the same instructions as qv_dq4. */
template <bool IS_BF16>
__device__ __forceinline__ void qv_dq4_one(uint32_t w, uint32_t c, uint32_t b[2])
{
    const uint32_t magic = IS_BF16 ? 0x43004300u : 0x64006400u;
    uint32_t lo = qv_lop3_and_or(w, 0x000F000Fu, magic);
    uint32_t hi = qv_lop3_and_or(w >> 4, 0x000F000Fu, magic);
    b[0] = qv_h2<IS_BF16>::sub(lo, c);
    b[1] = qv_h2<IS_BF16>::sub(hi, c);
}

/* 8-bit "q+128" codes of word j8 -> exact q - 128 for both registers. */
template <bool IS_BF16>
__device__ __forceinline__ void qv_dq8(uint32_t w, uint32_t b[2]);

template <>
__device__ __forceinline__ void qv_dq8<false>(uint32_t w, uint32_t b[2])
{
    /* byte_perm 0x5250 builds halves 0x64bb from bytes 0 and 2 (1024 + code,
     * exact), 0x5351 from bytes 1 and 3; 0x6480 is fp16 1152 = 1024 + 128. */
    uint32_t lo = __byte_perm(w, 0x64646464u, 0x5250);
    uint32_t hi = __byte_perm(w, 0x64646464u, 0x5351);
    b[0] = qv_h2<false>::sub(lo, 0x64806480u);
    b[1] = qv_h2<false>::sub(hi, 0x64806480u);
}

template <>
__device__ __forceinline__ void qv_dq8<true>(uint32_t w, uint32_t b[2])
{
    /* bf16 holds 128 + x exactly for x < 128 (0x4300 | x: ulp 1 in [128,
     * 256)), but not 128 + code for codes up to 255. So the low 7 bits of a
     * code go into the mantissa of 128, and its bit 7 picks the subtrahend:
     * 256 (0x4380) without it, 128 (0x4300) with it: (128 + low7) - 256 =
     * code - 128 and (128 + low7) - 128 = low7 = code - 128, exact integers of
     * magnitude at most 128, so the subtraction is exact too. The lo pair
     * (bytes 0 and 2) sits in the low bytes of the word's halves already, the
     * hi pair (bytes 1 and 3) one byte up. */
    const uint32_t w8 = w >> 8;
    const uint32_t lo = qv_lop3_and_or(w, 0x007F007Fu, 0x43004300u);
    const uint32_t lo_sub = qv_lop3_and_xor(w, 0x00800080u, 0x43804380u);
    const uint32_t hi = qv_lop3_and_or(w8, 0x007F007Fu, 0x43004300u);
    const uint32_t hi_sub = qv_lop3_and_xor(w8, 0x00800080u, 0x43804380u);
    b[0] = qv_h2<true>::sub(lo, lo_sub);
    b[1] = qv_h2<true>::sub(hi, hi_sub);
}

/* e4m3 codes of word j8 -> their exact values in fp16 or bf16. */
template <bool IS_BF16>
__device__ __forceinline__ void qv_dqfp8(uint32_t w, uint32_t b[2])
{
    /* byte_perm 0x0020 puts bytes 0 and 2 (k0, k1) in the low 16 bits, 0x0031
     * bytes 1 and 3 (k8, k9). */
    uint32_t lo = qv_e4m3x2_to_f16x2(__byte_perm(w, 0, 0x0020));
    uint32_t hi = qv_e4m3x2_to_f16x2(__byte_perm(w, 0, 0x0031));
    if (IS_BF16) {
        /* Every e4m3 value is exact in fp32 and in bf16 (3 mantissa bits,
         * exponents 2^-9..2^8). */
        __half2 l = *reinterpret_cast<__half2 *>(&lo), h = *reinterpret_cast<__half2 *>(&hi);
        b[0] = qv_h2<true>::pack(__low2float(l), __high2float(l));
        b[1] = qv_h2<true>::pack(__low2float(h), __high2float(h));
    } else {
        b[0] = lo;
        b[1] = hi;
    }
}

/* The e2m1 codes of a packed 4-bit word w -> x 2^-14 in fp16 or x 2^-126
 * in bf16, in qv_dq4's placement for word j8 = 2 (j8 / 2) + odd: b[0]
 * holds nibbles 0 and 4 (odd: 2 and 6) in its low and high half, b[1]
 * nibbles 1 and 5 (odd: 3 and 7). Bits alone move, as vLLM's Marlin FP4
 * dequant does: the code's sign (bit 3) goes to bit 15 and its e e m bits
 * to the two lowest exponent bits and the top mantissa bit (bits 11-9 in
 * fp16, 8-6 in bf16), which read them with bias 15 (127) instead of e2m1's
 * 1. Exact for every code: 0.5 becomes the subnormal 2^-15 (2^-127), -0
 * stays -0. The caller's scale multiplication undoes the power of two.
 *
 * fp16 goes byte by byte, so that the two register pairs of a word (odd 0
 * and 1) share every step but the byte permutes: a half's high byte is
 * s00eem0 and its low byte 0, made for the four even nibbles (the low one
 * of each byte) in t and the odd ones in t2, each a select of the shifted
 * word's e e m bits and the signs masked once (sg), then placed over zero
 * low bytes: 10 instructions for a word's four registers, where
 * per-register shifts and masks take 16. The sign mask sits in constant
 * memory: as an immediate, ptxas rewrites the and into the selects and
 * the word costs 11 again. bf16: per 16-bit lane u holds one nibble
 * (isolated by the mask; odd takes the word shifted down a byte), and one
 * multiply places two copies of it, one shifted to the sign bit (x 2^12, or
 * x 2^8 for the high nibble of a byte) and one to bits 8-6 (x 2^6, or x
 * 2^2); the copies do not overlap, so the multiply carries nothing, and the
 * last mask keeps bit 15 and bits 8-6: 13 instructions for the four
 * registers, where per-register shifts and masks take 17. (The same
 * multiply cannot serve fp16: its copies would overlap at bit 12.) With
 * BF16_PERM, bf16 takes the byte form instead: a half's high byte
 * s000000e (the sign and the code's high exponent bit) and its low byte
 * em000000, made for the even nibbles (he, le) and the odd ones (ho, lo),
 * then paired by byte permutes: 15 instructions, none of them a multiply,
 * for a kernel whose multiply pipe is the one that binds (the caller says
 * which).
 * Each form gives the same bits as the shifts and masks for all 2^32 words
 * and both odd (an exhaustive comparison on the CPU). t_gpu_fp4 runs every
 * code at every nibble of a word on the device through the default forms,
 * in both formats; t_gpu_wg's dense MXFP4 bf16 rows above 16 tokens run
 * the BF16_PERM one. */
static __constant__ uint32_t qv_fp4_sign_mask = 0x88888888u;
template <bool IS_BF16, bool BF16_PERM = false>
__device__ __forceinline__ void qv_dqfp4_word(uint32_t w, int odd, uint32_t b[2])
{
    if (IS_BF16 && BF16_PERM) {
        const uint32_t he = (w << 4 & 0x80808080u) | (w >> 2 & 0x01010101u), le = w << 6 & 0xC0C0C0C0u;
        const uint32_t ho = (w & 0x80808080u) | (w >> 6 & 0x01010101u), lo = w << 2 & 0xC0C0C0C0u;
        /* bytes 0 and 2 (odd: 1 and 3): low byte from l, high byte from h */
        const uint32_t sel = odd ? 0x7351u : 0x6240u;
        b[0] = __byte_perm(le, he, sel);
        b[1] = __byte_perm(lo, ho, sel);
    } else if (IS_BF16) {
        const uint32_t u = odd ? w >> 8 : w;
        b[0] = (u & 0x000F000Fu) * 0x1040u & 0x81C081C0u;
        b[1] = (u & 0x00F000F0u) * 0x104u & 0x81C081C0u;
    } else {
        const uint32_t sg = w & qv_fp4_sign_mask;
        const uint32_t t = qv_lop3_select(w << 1, 0x0E0E0E0Eu, sg << 4);
        const uint32_t t2 = qv_lop3_select(w >> 3, 0x0E0E0E0Eu, sg);
        /* bytes 0 and 2 (odd: 1 and 3) as high bytes over zero low bytes */
        const uint32_t sel = odd ? 0x3414u : 0x2404u;
        b[0] = __byte_perm(t, 0u, sel);
        b[1] = __byte_perm(t2, 0u, sel);
    }
}

/* e4m3 codes of word j8 -> bf16 values 2^-120 times theirs, by moving bits
 * alone: the code's exponent and fraction bits go
 * to bf16 bits 4-10, which reads them with bias 127 instead of 7, and its
 * sign to bit 15: five or six instructions per word, where qv_dqfp8 takes
 * ten. Exact for every code but NaN: a zero exponent field gives
 * the bf16 subnormal m 2^-129 = 2^-120 (m 2^-9). Only for a caller that
 * multiplies by a scale carrying 2^120 (the Marlin fp8 layout's bf16 scales,
 * qv_layout_scale_pow2) in one bf16 rounding, which gives rn(v s) from exact
 * operands (bf16 arithmetic keeps subnormal inputs: t_gpu_wg's one-hot
 * probes, whose outputs are single weights bit for bit, cover the zero-exponent
 * codes). The NaN codes 0x7F and
 * 0xFF become +-480 2^-120, as in Marlin's kernel; no quantizer makes them. */
__device__ __forceinline__ void qv_dqfp8_bf16_moved(uint32_t w, uint32_t b[2])
{
    /* lo pair, bytes 0 and 2: fraction and exponent from w << 4, signs from w << 8 */
    b[0] = (w << 8 & 0x80008000u) | (w << 4 & 0x07F007F0u);
    /* hi pair, bytes 1 and 3: the signs are in place */
    b[1] = (w & 0x80008000u) | (w >> 4 & 0x07F007F0u);
}

#endif
