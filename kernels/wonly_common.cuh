/* wonly_common.cuh: what the weight-only kernels of wonly.cu (m16n8k16 mma),
 * wonly_small.cu (M <= 16), wonly_wg.cu (Hopper wgmma) and wonly_dq.cu
 * share: the weight code families and scale modes they instantiate, the FP4
 * dequantization, block scales and epilogue, the channel-scale permutation,
 * the scale load, and the host-side derivation of the scale fields of their
 * launch parameters from the registry row. CUDA C++ only (included by .cu
 * files). */
#ifndef QVET_KERNELS_WONLY_COMMON_CUH
#define QVET_KERNELS_WONLY_COMMON_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "dequant.cuh"
#include "qvet/status.h"
#include "qvet/variant.h"

namespace {

/* Weight code families the kernels instantiate: the two FP4 ones are e2m1
 * codes in the 4-bit words with one byte of block scale per (group, column)
 * (layout.h, MARLIN_FP4_MX and MARLIN_FP4_NV; every weight-only kernel). wonly_small_tile.cuh numbers two more
 * families of its own after these. */
enum { WT_INT4 = 0, WT_INT8 = 1, WT_FP8 = 2, WT_INT4_ZP = 3, WT_FP4_MX = 4, WT_FP4_NV = 5 };

/* 1 for the code families stored 8 per int32 word. */
__host__ __device__ constexpr bool wt_is_4bit(int wt)
{
    return wt == WT_INT4 || wt == WT_INT4_ZP || wt == WT_FP4_MX || wt == WT_FP4_NV;
}
__host__ __device__ constexpr bool wt_is_fp4(int wt) { return wt == WT_FP4_MX || wt == WT_FP4_NV; }
/* How the weight scale enters. */
enum { SC_GROUP = 0, SC_CHANNEL = 1, SC_TENSOR = 2 };
/* Storage of the epilogue scale. */
enum { SF_F16 = 0, SF_BF16 = 1, SF_F32 = 2 };

/* Packed word j8 of a thread's weights as two f16x2 / bf16x2 registers bf
 * (dequant.cuh), for the kernels that dequantize a whole k16 x 64 tile
 * (wonly.cu, wonly_dq.cu): 4-bit codes "q+8" (WT_INT4) or with the group's
 * zero-point constants zc (WT_INT4_ZP; qv_dq4_consts), 8-bit codes, e4m3
 * codes, e2m1 codes as x 2^-14 / x 2^-126 (WT_FP4_*; qv_dqfp4_word, which
 * wo_fp4_scale then multiplies by the block scale). bw: the thread's packed
 * words; a 4-bit word serves two consecutive j8 (the odd one shifted down 8
 * bits, or for FP4 its odd bytes picked), an 8-bit word one j8. */
template <int WT, bool IS_BF16>
__device__ __forceinline__ void wo_dq_word(const uint32_t *bw, int j8, const uint32_t zc[2], uint32_t bf[2])
{
    if (WT == WT_INT4) {
        uint32_t sym[2];
        qv_dq4_consts<IS_BF16>(8u, sym); /* "q+8" codes: zero point 8 */
        qv_dq4<IS_BF16>(bw[j8 >> 1] >> (8 * (j8 & 1)), sym, bf);
    } else if (WT == WT_INT4_ZP) {
        qv_dq4<IS_BF16>(bw[j8 >> 1] >> (8 * (j8 & 1)), zc, bf);
    } else if (wt_is_fp4(WT)) {
        qv_dqfp4_word<IS_BF16>(bw[j8 >> 1], j8 & 1, bf);
    } else if (WT == WT_INT8) {
        qv_dq8<IS_BF16>(bw[j8], bf);
    } else {
        qv_dqfp8<IS_BF16>(bw[j8], bf);
    }
}

/* Scale byte b (0..7) of the 8 bytes w0 (bytes 0-3), w1 (4-7) in both
 * halves of a word, d = c * 0x00010001 for the byte's value c. Every kernel
 * register of a block scale below is made from d by arithmetic that keeps
 * the two halves apart, and d is monotonic in c, so that a 32-bit min or max
 * of d is the min or max of c in both halves. For a b known at compile time
 * (an unrolled loop's index): one byte permute (byte 4 of the pair (w, 0) is
 * a zero; wonly_wg_kernel.cuh's set_scales_fp4 does the same with a b it learns at
 * run time). */
__device__ __forceinline__ uint32_t wo_fp4_byte_dup(uint32_t w0, uint32_t w1, int b)
{
    const uint32_t lane = (uint32_t)(b & 3);
    return __byte_perm(b < 4 ? w0 : w1, 0u, lane | 4u << 4 | lane << 8 | 4u << 12);
}
/* Whether every MXFP4 scale code of a warp's staged rows is at most 127
 * (scales up to 2^0), given the OR of the words the lane holds: then its
 * kernels take the one-multiply form of wo_fp4_scale (FAST). Real
 * checkpoints have no larger code: a block's scale is 2^(floor(log2 amax)
 * - 2), so a code of 128 means weights of 8 and more. Every lane of the warp
 * calls it (a vote). */
__device__ __forceinline__ bool wo_fp4_mx_fast(uint32_t ored)
{
#ifdef QV_MUTANT_gpu_wo_fp4_mx_fast_unchecked
    /* Mutant (class 7): the one-multiply form without its vote, so codes of
     * 128 and more get registers that do not hold their scale. */
    return true;
#endif
    return __all_sync(0xFFFFFFFFu, (ored & 0x80808080u) == 0u);
}

/* The FP4 block scale of one n8 tile as a kernel register, from its packed
 * byte c in both halves, d = c * 0x00010001 (wo_fp4_byte_dup; layout.h):
 *  - NV: the S0E5M3 byte read as the f16 it came from (bits 14..7), or
 *    widened into bf16 as vLLM's dequant_fp8_scales does (bit 7 to the top
 *    exponent bit, bits 6..3 to the low four, bits 2..0 to the top of the
 *    mantissa; exact for the bytes with bit 7 set, the only nonzero ones the
 *    layout gives bf16), as 16 c + 112 (c & 0x80);
 *  - MX bf16: the e8m0 code c as the bf16 2^(c-127) (c << 7), or with FAST
 *    (every code at most 127: wo_fp4_mx_fast) as 2^(c-1) = 2^126 2^(c-127),
 *    which wo_fp4_scale applies in one multiply to x 2^-126 (qv_dqfp4_word);
 *  - MX f16, whose range does not hold 2^(c-127): two f16 factors, A in the
 *    low half and B in the high one, that wo_fp4_scale applies one after the
 *    other to x 2^-14 (qv_dqfp4_word):
 *     - c <= 98: A = +0, B = 1. |x| 2^(c-127) <= 6 2^-29 is below half the
 *       smallest f16 subnormal, so it rounds to a signed zero, as x 2^-14 0
 *       is;
 *     - 99 <= c <= 128: A = 2^(c-113), B = 1. x 2^-14 A is the exact
 *       x 2^(c-127), rounded once;
 *     - 129 <= c <= 143: A = 2^15 makes 2x exactly, B = 2^(c-128) rounds
 *       once;
 *     - c >= 144 (255, NaN in e8m0, which layout.c refuses, included):
 *       |x| 2^(c-127) >= 2^16 overflows f16 for every nonzero x, and A =
 *       65504, B = 32800 take the smallest nonzero one, 2^-15, to 1.999 x
 *       32800 > 65520, so to Inf, while a zero stays a signed zero;
 *    as f16 codes, A = (clamp(c, 98, 128) - 98) 2^10 and B = (clamp(c, 128,
 *    143) - 113) 2^10: the clamps on d, a byte permute joining A's half of
 *    one and B's of the other, one multiply-add for both halves (each half's
 *    result lies in 0..0x7800, so the 32-bit arithmetic never mixes them).
 *    With FAST (c <= 127) B = 1 is left out: A alone, one multiply. */
template <int WT, bool IS_BF16, bool FAST = false> __device__ __forceinline__ uint32_t wo_fp4_scale_reg(uint32_t d)
{
    constexpr uint32_t k1 = 0x00010001u;
    if (WT == WT_FP4_NV) return IS_BF16 ? d * 16u + (d & 0x00800080u) * 112u : d << 7;
    if (IS_BF16) return FAST ? d * 128u + 0x3F003F00u : d << 7; /* 0x3F00: 126 << 7 */
    if (FAST) return max(d, 98u * k1) * 1024u - 98u * 1024u * k1;
    const uint32_t a = min(max(d, 98u * k1), 128u * k1);
    const uint32_t b = min(max(d, 128u * k1), 143u * k1);
    const uint32_t ab = __byte_perm(a, b, 0x7610u) * 1024u - (98u + 113u * 65536u) * 1024u;
    return d > 143u * k1 ? 0x78017BFFu : ab;
}

/* A lane's eight FP4 block scales, sc[j8] for column 8 j8 + lane/4 of its
 * 64-column chunk, from the chunk's 8 packed bytes at 8 (lane/4) (sv):
 * QV_SORDER_GROUP64_FP8 puts the scale of n8 tile 4 (b/4) + [0,2,1,3][b%4]
 * at byte b. */
template <int WT, bool IS_BF16> __device__ __forceinline__ void wo_fp4_lane_scales(uint2 sv, uint32_t sc[8])
{
#pragma unroll
    for (int b = 0; b < 8; b++)
        sc[4 * (b >> 2) + ((b & 1) << 1) + ((b >> 1) & 1)] =
            wo_fp4_scale_reg<WT, IS_BF16>(wo_fp4_byte_dup(sv.x, sv.y, b));
}

/* Two FP4 block scales per register, for a kernel whose n8 tiles 2p and
 * 2p + 1 are dequantized side by side (the small-M kernel): register p of a
 * lane's eight scale bytes (sv, as wo_fp4_lane_scales reads them) holds the
 * byte of n8 tile 2p in its low half and that of 2p + 1 in its high one,
 * which QV_SORDER_GROUP64_FP8 stores at bytes {0, 2}, {1, 3}, {4, 6}, {5, 7}:
 * t = (word >> 8 (p % 2)) & 0x00FF00FF, then each half made into its kernel
 * register as wo_fp4_scale_reg does (which serves NV and MX bf16 as it is;
 * MX f16's clamps take 16x2 min and max here), half the instructions of one
 * register per tile (a multiply names its half as an operand, .H0_H0 or
 * .H1_H1, for free). MX f16 without FAST needs two factors per tile: sc[p]
 * holds the A of both tiles, sc[4 + p] the B, and the codes from 144 on (A =
 * 65504, B = 32800) take e = max(min(c, 144), 143) - 143, 1 for them and 0
 * below, as A + 1023 e and B - 1023 e (0x7800 + 0x3FF, 0x7C00 - 0x3FF). */
template <int WT, bool IS_BF16, bool FAST = false>
__device__ __forceinline__ void wo_fp4_lane_scale_pairs(uint2 sv, uint32_t sc[8])
{
    constexpr uint32_t k1 = 0x00010001u;
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const uint32_t t = ((p < 2 ? sv.x : sv.y) >> (8 * (p & 1))) & 0x00FF00FFu;
        if (WT == WT_FP4_NV || IS_BF16) {
            sc[p] = wo_fp4_scale_reg<WT, IS_BF16, FAST>(t); /* its arithmetic keeps the halves apart */
        } else if (FAST) {
            sc[p] = __vmaxu2(t, 98u * k1) * 1024u - 98u * 1024u * k1;
        } else {
            const uint32_t a = __vminu2(__vmaxu2(t, 98u * k1), 128u * k1);
            const uint32_t b = __vminu2(__vmaxu2(t, 128u * k1), 144u * k1);
            const uint32_t e = __vmaxu2(__vminu2(t, 144u * k1), 143u * k1) - 143u * k1;
            sc[p] = a * 1024u - 98u * 1024u * k1 + e * 0x3FFu;
            sc[4 + p] = b * 1024u - 113u * 1024u * k1 - e * 0x3FFu;
        }
    }
}

/* wo_fp4_scale with the block scale in half h (0 low, 1 high) of s, and for
 * MX f16 without FAST the factor B in half h of s2 (wo_fp4_lane_scale_pairs):
 * the same products. */
template <int WT, bool IS_BF16, bool FAST = false>
__device__ __forceinline__ void wo_fp4_scale_half(uint32_t s, uint32_t s2, int h, uint32_t bf[2])
{
#pragma unroll
    for (int r = 0; r < 2; r++) {
        if (IS_BF16) {
            const __nv_bfloat162 sp = *reinterpret_cast<const __nv_bfloat162 *>(&s);
            const __nv_bfloat162 sh = h ? __high2bfloat162(sp) : __low2bfloat162(sp);
            uint32_t x = bf[r];
            /* 0x7E80 is bf16 2^126. */
            if (WT == WT_FP4_MX && !FAST) x = qv_h2<true>::mul(x, 0x7E807E80u);
            const __nv_bfloat162 v = __hmul2_rn(*reinterpret_cast<const __nv_bfloat162 *>(&x), sh);
            bf[r] = *reinterpret_cast<const uint32_t *>(&v);
        } else {
            const __half2 sp = *reinterpret_cast<const __half2 *>(&s);
            __half2 v = __hmul2_rn(*reinterpret_cast<const __half2 *>(&bf[r]), h ? __high2half2(sp) : __low2half2(sp));
            if (WT == WT_FP4_MX && !FAST) {
                const __half2 bp = *reinterpret_cast<const __half2 *>(&s2);
                v = __hmul2_rn(v, h ? __high2half2(bp) : __low2half2(bp));
            }
            bf[r] = *reinterpret_cast<const uint32_t *>(&v);
        }
    }
}

/* Multiplies the two registers bf of qv_dqfp4_word by their block scale s
 * (wo_fp4_scale_reg of the same FAST), one rounding to the activation
 * format:
 *  - NV: (x 2^-bias)(s 2^s_pow2) in one multiply, exact (layout.h; the
 *    global scale in the epilogue carries 2^(bias - s_pow2));
 *  - MX bf16: x 2^-126 times 2^126 (exact: x), then times 2^(c-127), which
 *    rounds only when it overflows to Inf; with FAST, x 2^-126 times
 *    2^(c-1) in one multiply, exact (no code above 127);
 *  - MX f16: x 2^-14 times the register's low half A, then times its high
 *    half B (wo_fp4_scale_reg): at most one of the two rounds, so the result
 *    is x 2^(c-127) rounded once to f16 (RN, overflow to Inf, subnormals
 *    kept), in two f16 multiplies (widening to fp32 would take five
 *    instructions); with FAST, times A alone. */
template <int WT, bool IS_BF16, bool FAST = false>
__device__ __forceinline__ void wo_fp4_scale(uint32_t s, uint32_t bf[2])
{
#pragma unroll
    for (int r = 0; r < 2; r++) {
        if (WT == WT_FP4_NV || (FAST && IS_BF16)) {
            bf[r] = qv_h2<IS_BF16>::mul(bf[r], s);
        } else if (IS_BF16) {
            /* 0x7E80 is bf16 2^126. */
            bf[r] = qv_h2<true>::mul(qv_h2<true>::mul(bf[r], 0x7E807E80u), s);
        } else {
            const __half2 ab = *reinterpret_cast<const __half2 *>(&s);
            __half2 v = __hmul2_rn(*reinterpret_cast<const __half2 *>(&bf[r]), __low2half2(ab));
            if (!FAST) v = __hmul2_rn(v, __high2half2(ab));
            bf[r] = *reinterpret_cast<const uint32_t *>(&v);
        }
    }
}

/* Two fp32 values rounded to the 16-bit activation format (RNE) and back,
 * in place: what the mutant switches use where a bug rounds an intermediate
 * to the output format (here and in moe_grouped.cu). */
template <bool IS_BF16> __device__ __forceinline__ void wo_round_pair(float &y0, float &y1)
{
    const uint32_t r = qv_h2<IS_BF16>::pack(y0, y1);
    y0 = qv_h2<IS_BF16>::to_float((uint16_t)(r & 0xFFFFu));
    y1 = qv_h2<IS_BF16>::to_float((uint16_t)(r >> 16));
}

/* The FP4 epilogue of two fp32 sums, in place: times the global scale g
 * (fp32, RN; 1 for MX, an exact product), then plus the bias (fp32, RN) when
 * there is one, b0 to y0 and b1 to y1; the caller rounds each once to the
 * output format. The two sums are any two outputs (wonly.cu: two columns of
 * one row; wonly_small.cu: two columns of one row, or in the swapped
 * orientation two rows of one column; wonly_wg.cu: two rows of one column),
 * each with its own bias. The mutant switches here reach all three kernels.
 * The intrinsics keep the two roundings: under -fmad=true the compiler would
 * fuse y * g + b into one fma. */
template <bool IS_BF16>
__device__ __forceinline__ void wo_fp4_epilogue(float &y0, float &y1, float g, bool has_bias, float b0, float b1)
{
#ifdef QV_MUTANT_gpu_wo_fp4_cast_before_global
    /* Mutant (class 22, vLLM #33972, #37135): the sum, in the units the
     * kernel accumulates in, cast to the 16-bit output before the fp32
     * global scale. */
    wo_round_pair<IS_BF16>(y0, y1);
#endif
    y0 = __fmul_rn(y0, g);
    y1 = __fmul_rn(y1, g);
    if (!has_bias) return;
#ifdef QV_MUTANT_gpu_wo_fp4_bias_after_cast
    /* Mutant (class 24, sglang #35020; vLLM's Marlin FP4 epilogue): the bias
     * added after the output cast, then rounded again. */
    wo_round_pair<IS_BF16>(y0, y1);
#endif
    y0 = __fadd_rn(y0, b0);
    y1 = __fadd_rn(y1, b1);
}

/* Packed word j8 dequantized (wo_dq_word) and scaled, in place in bf: FP4
 * codes times their block scale sc (wo_fp4_scale), other codes with group
 * scales times the f16/bf16 group scale sc (one rounding each), others as
 * they are (their scale waits for the epilogue). wonly_mma.cuh and
 * wonly_dq.cu; the small-M kernel keeps its own fused forms. */
template <int WT, bool IS_BF16>
__device__ __forceinline__ void wo_dq_word_scaled(const uint32_t *bw, int j8, const uint32_t zc[2], uint32_t sc,
                                                  bool grouped, uint32_t bf[2])
{
    wo_dq_word<WT, IS_BF16>(bw, j8, zc, bf);
    if (wt_is_fp4(WT)) {
        wo_fp4_scale<WT, IS_BF16>(sc, bf);
    } else if (grouped) {
        bf[0] = qv_h2<IS_BF16>::mul(bf[0], sc);
        bf[1] = qv_h2<IS_BF16>::mul(bf[1], sc);
    }
}

/* Packed index of logical column col for channelwise scales (scale_perm_single:
 * inside each 32 columns, position 8i + jj holds column 2i + {0,1,8,9,16,17,24,25}[jj]). */
__device__ __forceinline__ int64_t single_perm_index(int col)
{
    int c = col & 31;
    int i = (c & 7) >> 1;
    int jj = 2 * (c >> 3) + (c & 1);
    return (int64_t)(col & ~31) + 8 * i + jj;
}

/* Element idx of a scale array s (f16, bf16 or f32 codes as fmt, an SF_*, says). */
__device__ __forceinline__ float load_scale(const void *s, int64_t idx, int fmt)
{
    if (fmt == SF_F32) return static_cast<const float *>(s)[idx];
    uint16_t code = static_cast<const uint16_t *>(s)[idx];
    return fmt == SF_F16 ? qv_h2<false>::to_float(code) : qv_h2<true>::to_float(code);
}

/* The fp32 epilogue factor of column col for launch parameters p (fields
 * scales, scale_mode, scale_fmt, unbias_f32; wonly_wg.cu and wonly_small.cu):
 * the channel or tensor scale (times the exact power of two 2^-s_pow2 for fp8,
 * which restores the stored scale, layout.h MARLIN_FP8), or 1 for group
 * scales, which were applied in the dequant. wonly.cu keeps its own, which
 * carries a mutant switch of that kernel alone. */
template <typename P> __device__ __forceinline__ float epilogue_scale(const P &p, int col)
{
    if (p.scale_mode == SC_CHANNEL) return load_scale(p.scales, single_perm_index(col), p.scale_fmt) * p.unbias_f32;
    if (p.scale_mode == SC_TENSOR) return load_scale(p.scales, 0, p.scale_fmt) * p.unbias_f32;
    return 1.0f;
}

/* The WT_* code family of a Marlin layout, or -1 for another layout. */
inline int weight_type(const qv_variant *v)
{
    switch (v->layout) {
    case QV_LAYOUT_MARLIN_W4: return WT_INT4;
    case QV_LAYOUT_MARLIN_W4_ZP: return WT_INT4_ZP;
    case QV_LAYOUT_MARLIN_W8: return WT_INT8;
    case QV_LAYOUT_MARLIN_FP8: return WT_FP8;
    case QV_LAYOUT_MARLIN_FP4_MX: return WT_FP4_MX;
    case QV_LAYOUT_MARLIN_FP4_NV: return WT_FP4_NV;
    default: return -1;
    }
}

/* x rounded up to a multiple of 256 bytes: the alignment of every workspace
 * region (cudaMalloc's own). */
inline size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* Sets the scale fields of launch parameters p (a wo_params or wg_params:
 * scale_mode, scale_fmt, g_shift, grp_single, unbias_f32, unbias_h2) for row
 * v at depth k. */
template <typename P> inline void wo_set_scale_fields(P &p, const qv_variant *v, int k)
{
    p.scale_mode = v->scale_layout == QV_SCALE_GROUP     ? SC_GROUP
                   : v->scale_layout == QV_SCALE_CHANNEL ? SC_CHANNEL
                                                         : SC_TENSOR;
    p.scale_fmt = v->sfmt == QV_FMT_F32 ? SF_F32 : v->sfmt == QV_FMT_BF16 ? SF_BF16 : SF_F16;
    /* log2(g / 16): the group of k16 tile kt is kt >> g_shift. */
    p.g_shift = 0;
    if (v->scale_layout == QV_SCALE_GROUP)
        for (int t = v->g / 16; t > 1; t >>= 1) p.g_shift++;
    /* layout.h: a single group (g == K) is stored in the channel order,
     * except the FP4 layouts' bytes, always in QV_SORDER_GROUP64_FP8. */
    p.grp_single = v->scale_layout == QV_SCALE_GROUP && k == v->g && !wt_is_fp4(weight_type(v));
    /* layout.h, MARLIN_FP8: the packed scales hold s * 2^8 (f16 activations)
     * or s * 2^120 (bf16), for kernels whose bit-shift conversion of e4m3
     * yields value * 2^-8 (2^-120). These kernels convert e4m3 exactly (cvt),
     * so they multiply the scales by 2^-8 (2^-120) instead, which is exact.
     * 0x1C00 is fp16 2^-8, 0x0380 bf16 2^-120; 0x3C00 and 0x3F80 are 1. */
    const bool fp8 = v->layout == QV_LAYOUT_MARLIN_FP8, bf = v->afmt == QV_FMT_BF16;
    p.unbias_f32 = fp8 ? (bf ? 0x1p-120f : 0x1p-8f) : 1.0f;
    p.unbias_h2 = fp8 ? (bf ? 0x03800380u : 0x1C001C00u) : (bf ? 0x3F803F80u : 0x3C003C00u);
}

} /* namespace */

/* act_order: out[i][j] = a[i][perm[j]] for the (m, k) 16-bit activations a
 * (the sorted-row order of the packed weights), one element at a time from
 * global memory, on stream; checks the launch. Defined in wonly.cu, whose
 * path uses it; wonly_wg.cu where rows are too long to stage. */
qv_status wo_permute_cols_gather(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k,
                                 cudaStream_t stream);

#endif
