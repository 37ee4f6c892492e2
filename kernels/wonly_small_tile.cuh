/* wonly_small_tile.cuh: the arithmetic of the M <= 16 weight-only kernel
 * (wonly_small.cu), apart from its ring, K loop and split-K sums: the weight
 * code families, the warp's share of a block (8 warps, one or two 64-column
 * Marlin chunks each), the math of one k16 tile (dequantization into mma
 * fragments and the m16n8k16 products) and the unpacking of one group row of
 * scales and zero points. Rule: every product and fp32 sum of a K slice is
 * made here, so a K loop of another shape computes the same bits. CUDA C++
 * only. */
#ifndef QVET_KERNELS_WONLY_SMALL_TILE_CUH
#define QVET_KERNELS_WONLY_SMALL_TILE_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "dequant.cuh"
#include "mma.cuh"
#include "wonly_common.cuh"

namespace {

/* The code families of wonly_common.cuh, and here a fifth: 4-bit symmetric
 * codes come in two kernels, WT_INT4 with channel or tensor scales and
 * WT_INT4_G with group scales, so that each has only its own scale layout's
 * code (registers and schedule); 8-bit codes read the layout at run time. */
enum { WT_INT4_G = 4 };

/* The code family of a Marlin weight-only row (host side). */
inline int small_weight_type(const qv_variant *v)
{
    switch (v->layout) {
    case QV_LAYOUT_MARLIN_W4: return v->scale_layout == QV_SCALE_GROUP ? (int)WT_INT4_G : (int)WT_INT4;
    case QV_LAYOUT_MARLIN_W4_ZP: return WT_INT4_ZP;
    case QV_LAYOUT_MARLIN_W8: return WT_INT8;
    default: return WT_FP8;
    }
}

constexpr int kWarps = 8; /* warps per block, one or two 64-column chunks each */
constexpr int kThreads = 32 * kWarps;

/* Per weight type: 16-byte words per lane per k16 tile and 64-column chunk
 * (4-bit: one word holds the lane's fragments of the chunk's 8 n8 tiles; 8-bit:
 * two words). */
__host__ __device__ constexpr bool four_bit(int wt) { return wt == WT_INT4 || wt == WT_INT4_G || wt == WT_INT4_ZP; }
template <int WT> struct small_traits {
    static constexpr bool four = four_bit(WT);
    static constexpr int vecs = four ? 1 : 2;
    static constexpr int chunk_vecs = 32 * vecs; /* 16-byte words per (k16 tile, 64-column chunk) */
};

/* Whether a full ring stage runs as one straight line of its tiles (the K
 * loop) for weight type WT with (g) or without group scales; otherwise its
 * rows run one by one. Build-time switches for measurements:
 * -DQV_WO_SMALL_FAST_GROUPED=0/1 (4-bit codes with group scales),
 * -DQV_WO_SMALL_FAST_8BIT=0/1 (8-bit codes without them),
 * -DQV_WO_SMALL_FAST_8BIT_GROUPED=0/1 (8-bit codes with them). Same-run A/Bs
 * on the H200 (2026-12-02, bench/RESULTS.md eleventh round, Llama-3-70B
 * block, µs):
 *  - against the build whose tiles still branched on the scale layout:
 *    w4a16-g128-f16 M = 1 210.5 -> 180.2, M = 16 276.4 -> 247.0;
 *    w4a16-ch-f16 157.9 -> 153.5 and 226.6 -> 219.9; fp8a16-tensor-f16 8-bit
 *    stages in one line M = 16 308.9 -> 305.4;
 *  - g = 32 in two halves, with the 4-bit kernels split by scale layout:
 *    w4a16-g32-f16 M = 1 214.8 -> 202.5 (the other rows within 1.5 %; in one
 *    kernel with the channel-scale rows those lost 1-2 %);
 *  - 8-bit stages with group scales in one line: -2 to +1 %, so off. */
#ifndef QV_WO_SMALL_FAST_GROUPED
#define QV_WO_SMALL_FAST_GROUPED 1
#endif
#ifndef QV_WO_SMALL_FAST_8BIT
#define QV_WO_SMALL_FAST_8BIT 1
#endif
#ifndef QV_WO_SMALL_FAST_8BIT_GROUPED
#define QV_WO_SMALL_FAST_8BIT_GROUPED 0
#endif
template <int WT> __host__ __device__ constexpr bool stage_fast(bool g)
{
    return small_traits<WT>::four ? !g || QV_WO_SMALL_FAST_GROUPED
                                  : g ? QV_WO_SMALL_FAST_8BIT_GROUPED : QV_WO_SMALL_FAST_8BIT;
}

/* The zero point of n8 tile j8 from the lane's packed zero-point word: nibble
 * j8/2 + 4*(j8%2) (interleave [0,2,4,6,1,3,5,7], layout.h). */
__device__ __forceinline__ uint32_t zero_nibble(uint32_t zw, int j8)
{
    return (zw >> (4 * ((j8 >> 1) + 4 * (j8 & 1)))) & 0xFu;
}

/* The running split-K sum plus the next slice's partial, in fp32. */
__device__ __forceinline__ float add_partial(float s, float v)
{
#ifdef QV_MUTANT_gpu_wo_small_splitk_f16_reduce
    /* Mutant (class 4, vLLM #6795): the split-K partials added in fp16. */
    return __half2float(__hadd(__float2half_rn(s), __float2half_rn(v)));
#else
    return s + v;
#endif
}

/* The group registers of a warp with CPW chunks: sc, the group scales as one
 * half2 per n8 tile; zw, the lane's packed zero-point word per chunk; zc, with
 * one chunk per warp, each n8 tile's dequant constants (with two they are
 * rebuilt per tile, which keeps registers below 128). The one-constant form
 * of the wgmma kernel (qv_dq4_one) ran 0.5-1.5 % slower here (H200,
 * 2026-12-02, M <= 16, both zero-point rows): this kernel keeps the
 * constants in registers, and the form costs a shift per tile. */
template <int CPW> struct small_group_regs {
    uint32_t sc[CPW][8];
    uint32_t zw[CPW];
    uint32_t zc[CPW == 1 ? 8 : 1][2];
};

/* Reads one group row into r: srow, the row's scales of the block's BN
 * columns (block-local column order, 2 bytes each); zrow, its BN/8 packed
 * zero-point words (WT_INT4_ZP only). single: the row is stored in the channel
 * order (a single group, k == g, layout.h); unbias_h2: the fp8 scale factor
 * (wo_set_scale_fields), 1 otherwise. */
template <int WT, bool IS_BF16, int CPW>
__device__ __forceinline__ void small_load_group(small_group_regs<CPW> &r, const unsigned char *srow,
                                                 const unsigned char *zrow, int warp, int lane, bool single,
                                                 uint32_t unbias_h2)
{
#pragma unroll
    for (int c = 0; c < CPW; c++) {
        const int local = (warp * CPW + c) * 64; /* the chunk's first column in the block */
        /* scale_perm puts column 8*j8 + lane/4 of a chunk at position
         * 8*(lane/4) + j8: one 16-byte vector per lane. A single group
         * (k == g) is stored in the channel order instead. */
#ifdef QV_MUTANT_gpu_wo_small_scale_perm
        /* Mutant (class 2): scale_perm_single read where scale_perm was stored. */
        single = true;
#endif
        if (!single) {
            const uint4 sv = *reinterpret_cast<const uint4 *>(srow + (local + 8 * (lane >> 2)) * 2);
            const uint32_t s4[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
            for (int j8 = 0; j8 < 8; j8++)
                r.sc[c][j8] = qv_h2<IS_BF16>::dup((s4[j8 >> 1] >> (16 * (j8 & 1))) & 0xFFFFu);
        } else {
            const uint16_t *s16 = reinterpret_cast<const uint16_t *>(srow);
#pragma unroll
            for (int j8 = 0; j8 < 8; j8++)
                r.sc[c][j8] = qv_h2<IS_BF16>::dup(s16[single_perm_index(local + 8 * j8 + (lane >> 2))]);
        }
        if (WT == WT_FP8 && !IS_BF16) {
            /* Exact: s * 2^s_pow2 * 2^-s_pow2 = s, a half-precision value.
             * bf16 scales keep their 2^120 for the codes' moved bits
             * (small_tile_mma). */
#pragma unroll
            for (int j8 = 0; j8 < 8; j8++) r.sc[c][j8] = qv_h2<IS_BF16>::mul(r.sc[c][j8], unbias_h2);
        }
        if (WT == WT_INT4_ZP) {
            r.zw[c] = *reinterpret_cast<const uint32_t *>(zrow + (local / 8 + (lane >> 2)) * 4);
            if constexpr (CPW == 1) {
#pragma unroll
                for (int j8 = 0; j8 < 8; j8++) qv_dq4_consts<IS_BF16>(zero_nibble(r.zw[0], j8), r.zc[j8]);
            }
        }
    }
}

/* One k16 tile of a warp's CPW chunks into acc. a_addr: the lane's ldmatrix
 * row address of A in shared memory (m16 orientation: A row lane%16, k half
 * lane/16; swapped: A row lane%8, k half (lane/8)%2); w: the lane's weight
 * words of the tile (small_traits::vecs per chunk); G: the group scales in r
 * multiply the fragments. Every caller passes G as a literal, so that once
 * inlined a tile's code has no branch on the scale layout: ptxas schedules
 * only within a basic block, and the K loops run several tiles as one
 * straight line. SWAP (M <= 8): the weights are the mma's A operand and A^T
 * its B operand, so one m16n8k16 covers 16 columns x 8 rows and a k16 tile of
 * a 64-column chunk takes 4 mma instead of 8. Accumulators: m16 orientation,
 * acc[c][j8] is n8 tile j8 (rows lane/4 and lane/4 + 8); swapped, acc[c][i]
 * is the n16 pair of n8 tiles 2i, 2i+1 (rows 2*(lane%4) + {0,1}). */
template <int WT, bool IS_BF16, bool SWAP, int CPW>
__device__ __forceinline__ void small_tile_mma(float (&acc)[CPW][SWAP ? 4 : 8][4], unsigned a_addr,
                                               const uint4 (&w)[small_traits<WT>::vecs * CPW],
                                               const small_group_regs<CPW> &r, const bool G)
{
    using T = small_traits<WT>;
    uint32_t af[4];
    if constexpr (SWAP)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(af[0]), "=r"(af[1])
                     : "r"(a_addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(af[0]), "=r"(af[1]), "=r"(af[2]), "=r"(af[3])
                     : "r"(a_addr));
    /* The chunks' products; G: group scales multiply the fragments (zero
     * points come only with group scales, the AWQ rows). */
#pragma unroll
    for (int c = 0; c < CPW; c++) {
        const uint4 *wc = w + c * T::vecs;
        const uint32_t bw[8] = {wc[0].x, wc[0].y, wc[0].z, wc[0].w,
                                T::vecs > 1 ? wc[T::vecs - 1].x : 0u, T::vecs > 1 ? wc[T::vecs - 1].y : 0u,
                                T::vecs > 1 ? wc[T::vecs - 1].z : 0u, T::vecs > 1 ? wc[T::vecs - 1].w : 0u};
        /* The B fragment of n8 tile j8: the exact codes, times the group
         * scale with one rounding (dequant.cuh). */
        auto dequant = [&](int j8, uint32_t bf[2]) {
            if (WT == WT_INT4 || WT == WT_INT4_G) {
                uint32_t sym[2];
                qv_dq4_consts<IS_BF16>(8u, sym); /* "q+8" codes: zero point 8 */
                qv_dq4<IS_BF16>(bw[j8 >> 1] >> (8 * (j8 & 1)), sym, bf);
            } else if (WT == WT_INT4_ZP) {
                if constexpr (CPW == 1) {
                    qv_dq4<IS_BF16>(bw[j8 >> 1] >> (8 * (j8 & 1)), r.zc[j8], bf);
                } else {
                    uint32_t zk[2];
                    qv_dq4_consts<IS_BF16>(zero_nibble(r.zw[c], j8), zk);
                    qv_dq4<IS_BF16>(bw[j8 >> 1] >> (8 * (j8 & 1)), zk, bf);
                }
            } else if (WT == WT_INT8) {
                qv_dq8<IS_BF16>(bw[j8], bf);
            } else if (IS_BF16 && G) {
                qv_dqfp8_bf16_moved(bw[j8], bf); /* 2^-120 v: the scales keep their 2^120 */
            } else {
                qv_dqfp8<IS_BF16>(bw[j8], bf);
            }
            if (G) {
                bf[0] = qv_h2<IS_BF16>::mul(bf[0], r.sc[c][j8]);
                bf[1] = qv_h2<IS_BF16>::mul(bf[1], r.sc[c][j8]);
            }
        };
        if constexpr (SWAP) {
            /* Y^T = W^T A^T: the B fragments of n8 tiles 2i and 2i+1 are, in
             * the order {lo 2i, lo 2i+1, hi 2i, hi 2i+1}, the mma A fragment
             * of the 16 x 16 tile of W^T (rows = the 16 columns, cols = k);
             * af is the B fragment of A^T. Products and fp32 sums per output
             * element are those of the m16 orientation. */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint32_t b0[2], b1[2];
                dequant(2 * i, b0);
                dequant(2 * i + 1, b1);
                const uint32_t wa[4] = {b0[0], b1[0], b0[1], b1[1]};
                qv_mma_16816<IS_BF16>(acc[c][i], wa, af);
            }
        } else {
#pragma unroll
            for (int j8 = 0; j8 < 8; j8++) {
                uint32_t bf[2];
                dequant(j8, bf);
                qv_mma_16816<IS_BF16>(acc[c][j8], af, bf);
            }
        }
    }
}

} /* namespace */

#endif
