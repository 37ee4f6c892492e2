/* wonly_small_tile.cuh: the arithmetic of the M <= 16 weight-only kernel
 * (wonly_small.cu), apart from its ring, K loop and split-K sums: the weight
 * code families, the warp's share of a block (8 warps, one or two 64-column
 * Marlin chunks each), the math of one k16 tile (dequantization into mma
 * fragments and the m16n8k16 products) and the unpacking of one group row of
 * scales, zero points or FP4 block-scale bytes. Rule: every product and fp32
 * sum of a K slice is made here, so a K loop of another shape computes the
 * same bits. CUDA C++ only. */
#ifndef QVET_KERNELS_WONLY_SMALL_TILE_CUH
#define QVET_KERNELS_WONLY_SMALL_TILE_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "dequant.cuh"
#include "mma.cuh"
#include "wonly_common.cuh"

namespace {

/* The code families of wonly_common.cuh, and here two more, numbered after
 * them: 4-bit symmetric codes come in three kernels, WT_INT4 with channel or
 * tensor scales, WT_INT4_G with group scales, and WT_INT4_GF with group
 * scales of g >= 128 in fp16 on the swapped path, which dequantizes in the
 * one-fma form (small_g4_fma), so that each has only its own scale layout's
 * code (registers and schedule); 8-bit codes read the layout at run time.
 * The host picks WT_INT4_GF (launch_wt) where WT_INT4_G is the row's family.
 * The FP4 families (WT_FP4_MX, WT_FP4_NV) always have group scales: one
 * byte per (group, column), unpacked by wonly_common.cuh's helpers. */
enum { WT_INT4_G = 6, WT_INT4_GF = 7 };
static_assert((int)WT_INT4_G > (int)WT_FP4_NV && (int)WT_INT4_G > (int)WT_FP8 && (int)WT_INT4_G > (int)WT_INT4_ZP,
              "the small-M kernel's own code families are numbered apart from wonly_common.cuh's");

/* The code family of a Marlin weight-only row (host side). */
inline int small_weight_type(const qv_variant *v)
{
    switch (v->layout) {
    case QV_LAYOUT_MARLIN_W4: return v->scale_layout == QV_SCALE_GROUP ? (int)WT_INT4_G : (int)WT_INT4;
    case QV_LAYOUT_MARLIN_W4_ZP: return WT_INT4_ZP;
    case QV_LAYOUT_MARLIN_W8: return WT_INT8;
    case QV_LAYOUT_MARLIN_FP4_MX: return WT_FP4_MX;
    case QV_LAYOUT_MARLIN_FP4_NV: return WT_FP4_NV;
    default: return WT_FP8;
    }
}

constexpr int kWarps = 8; /* warps per block, one or two 64-column chunks each */
constexpr int kThreads = 32 * kWarps;

/* Per weight type: 16-byte words per lane per k16 tile and 64-column chunk
 * (4-bit, e2m1 included: one word holds the lane's fragments of the chunk's 8
 * n8 tiles; 8-bit: two words). */
__host__ __device__ constexpr bool four_bit(int wt)
{
    return wt == WT_INT4 || wt == WT_INT4_G || wt == WT_INT4_GF || wt == WT_INT4_ZP || wt_is_fp4(wt);
}
/* 4-bit symmetric codes with group scales (either kernel). */
__host__ __device__ constexpr bool group4(int wt) { return wt == WT_INT4_G || wt == WT_INT4_GF; }
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
 * -DQV_WO_SMALL_FAST_8BIT_GROUPED=0/1 (8-bit codes with them). On the H200
 * the straight line is faster for 4-bit codes (g = 32 as two halves
 * included) and for 8-bit codes without group scales; it pays only with
 * tiles free of branches on the scale layout and with the 4-bit kernels
 * split by scale layout (one kernel for both is slower). 8-bit stages with
 * group scales gain nothing from it, so they run row by row. */
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
 * half2 per n8 tile (FP4: the block scales of n8 tiles 2p and 2p + 1 in
 * the halves of sc[p], and for MX f16's two-multiply form their second
 * factors in sc[4 + p]: wo_fp4_lane_scale_pairs); zw, the lane's packed zero-point word per chunk; zc, with
 * one chunk per warp, each n8 tile's dequant constants (with two they are
 * rebuilt per tile, which keeps registers below 128). The one-constant form
 * of the wgmma kernel (qv_dq4_one) is slower here on the H200: this kernel
 * keeps the constants in registers, and the form costs a shift per tile. */
template <int CPW> struct small_group_regs {
    uint32_t sc[CPW][8];
    uint32_t zw[CPW];
    uint32_t zc[CPW == 1 ? 8 : 1][2];
    /* small_g4_fma kernels: -8 s per n8 tile (sc then holds s 2^20), and
     * whether the warp's columns run the one-fma form over the whole slice. */
    uint32_t c8[CPW][8];
    bool fma;
};

/* 4-bit codes with group scales in fp16, swapped, one or two chunks per
 * warp: the declared rn((q - 8) s) in one HFMA2 per pair of weights, where the general
 * form (qv_dq4 and a multiply) takes an HSUB2 or HFMA2 and an HMUL2. The
 * nibble q, masked into bits 4-7 of a half with every other bit zero, is the
 * subnormal q 2^-20 exactly; with S = s 2^20 and C = -8 s,
 * fma(q 2^-20, S, C) rounds the exact q s - 8 s = (q - 8) s once: the same
 * bits as rn((q - 8) s) (fp16 keeps subnormal operands, dequant.cuh), but for
 * the sign of a zero weight, which no fp32 sum started at +0 can carry to
 * its output. Exact only where S and C are: |s| <= 0x2BFF (65504 2^-20,
 * just below 2^-4). So at block start each warp checks every staged scale
 * of its 64 or 128 columns over the slice (small_g4_fma_prepare, a vote);
 * where all pass it rewrites them in place as S (exact), and each group row's C is S
 * times -2^-17 (exact: -8 s is representable), one HMUL2 per n8 tile; a warp
 * with any scale out of range (NaN and inf included) runs the general form
 * on the staged s. Only for group sizes >= 128: with a group row per ring
 * stage (g = 64) or per half stage (g = 32), C per group row and the check
 * cost what the form saves or more (on the H200, g >= 128 is faster with
 * it and g = 64 slower). The WT_INT4_GF kernels run only g >= 128, and the
 * other small-M kernels keep their machine code. With two chunks per warp
 * (two_chunks_pay) the same form runs in the WT_INT4_GF kernel of two chunks.
 * -DQV_WO_SMALL_G4_FMA=0 builds a launcher that never picks it
 * (measurements). */
#ifndef QV_WO_SMALL_G4_FMA
#define QV_WO_SMALL_G4_FMA 1
#endif
template <int WT, bool IS_BF16, bool SWAP, int CPW> __host__ __device__ constexpr bool small_g4_fma()
{
    return WT == WT_INT4_GF && !IS_BF16 && SWAP;
}
/* The one-fma form's check and rewrite of one warp's staged scales: rows
 * n_grp group rows of bn scales (fp16 codes), the warp's 64 columns from
 * local, and with two chunks per warp (CPW = 2) the next 64 too where the
 * warp's second chunk lies below N (two, else only the first: the scales
 * past N are not staged). Returns, for the whole warp, whether every scale
 * has |s| <= 0x2BFF; then each was replaced by s 2^20. The warp's columns are
 * its own (no other warp reads or writes them); the caller orders the rewrite
 * before its reads (__syncwarp). */
template <int CPW>
__device__ __forceinline__ bool small_g4_fma_prepare(unsigned char *rows, int n_grp, int bn, int local, bool two,
                                                     int lane)
{
    /* 8 pieces of 16 bytes per row of 64 columns. Per half, |s| + 0x5400
     * reaches bit 15 exactly when |s| > 0x2BFF (0x2BFF + 0x5400 = 0x7FFF),
     * and no half carries into the other (0x7FFF + 0x5400 < 0x10000). */
    const int lg = CPW == 2 && two ? 4 : 3; /* log2 of the pieces per row */
    const int n_pieces = n_grp << lg;
    auto piece = [&](int e) { return rows + ((e >> lg) * bn + local + (e & ((1 << lg) - 1)) * 8) * 2; };
    uint32_t over = 0;
    for (int e = lane; e < n_pieces; e += 32) {
        const uint4 v = *reinterpret_cast<const uint4 *>(piece(e));
        over |= ((v.x & 0x7FFF7FFFu) + 0x54005400u) | ((v.y & 0x7FFF7FFFu) + 0x54005400u) |
                ((v.z & 0x7FFF7FFFu) + 0x54005400u) | ((v.w & 0x7FFF7FFFu) + 0x54005400u);
    }
#ifdef QV_MUTANT_gpu_wo_small_g4_fma_unchecked
    /* Mutant (class 7): the one-fma form without its range check, so s 2^20
     * overflows to inf for |s| >= 2^-4 where the declared product is finite. */
    over = 0;
#endif
    if (!__all_sync(0xFFFFFFFFu, (over & 0x80008000u) == 0)) return false;
    for (int e = lane; e < n_pieces; e += 32) {
        uint4 *at = reinterpret_cast<uint4 *>(piece(e));
        uint4 v = *at;
        /* s 2^10 2^10: exact, |s| 2^20 <= 65504 */
        v.x = qv_h2<false>::mul(qv_h2<false>::mul(v.x, 0x64006400u), 0x64006400u);
        v.y = qv_h2<false>::mul(qv_h2<false>::mul(v.y, 0x64006400u), 0x64006400u);
        v.z = qv_h2<false>::mul(qv_h2<false>::mul(v.z, 0x64006400u), 0x64006400u);
        v.w = qv_h2<false>::mul(qv_h2<false>::mul(v.w, 0x64006400u), 0x64006400u);
        *at = v;
    }
    return true;
}

/* Whether every MXFP4 scale code of n_rows <= MAXR staged group rows (bn
 * bytes each, from rows) in the warp's CPW chunks is at most 127
 * (wo_fp4_mx_fast, a vote: every lane of the warp calls it): each lane reads
 * the 8 bytes of its column lane/4 in each chunk and row, those
 * small_load_group reads (an unrolled loop to MAXR, each row under its
 * test: a loop to n_rows cost a full stage about 20 instructions). */
template <int CPW, int MAXR>
__device__ __forceinline__ bool small_fp4_mx_fast(const unsigned char *rows, int n_rows, int bn, int warp, int lane)
{
    if (n_rows > MAXR) return false; /* the same for every lane */
    uint32_t ored = 0;
#pragma unroll
    for (int gi = 0; gi < MAXR; gi++)
#pragma unroll
        for (int c = 0; c < CPW; c++) {
            if (gi >= n_rows) break;
            const uint2 v = *reinterpret_cast<const uint2 *>(rows + gi * bn + (warp * CPW + c) * 64 + 8 * (lane >> 2));
            ored |= v.x | v.y;
        }
    return wo_fp4_mx_fast(ored);
}

/* Reads one group row into r: srow, the row's scales of the block's BN
 * columns (block-local packed order, 2 bytes each; FP4: 1 byte each);
 * zrow, its BN/8 packed zero-point words (WT_INT4_ZP only). single: the row
 * is stored in the channel order (a single group, k == g, layout.h; never
 * for FP4); unbias_h2: the fp8 scale factor (wo_set_scale_fields), 1
 * otherwise; fast, a literal at every call: MXFP4's registers for the
 * one-multiply form (wo_fp4_scale_reg's FAST: small_fp4_mx_fast found every
 * code of the stage at most 127). A small_g4_fma kernel whose warp runs the
 * one-fma form (r.fma) finds S = s 2^20 staged and adds C = -8 s.
 *
 * FP4 block scales, which byte feeds which register (l: the lane):
 *  - the lane's weight word of a chunk and k16 tile is the Marlin W4 word
 *    (layout.h, dequant.cuh): the B fragments of the chunk's n8 tiles j8 =
 *    0..7, column 8 j8 + l/4, k rows 2(l%4) + {0,1} (bf[0]) and + 8 (bf[1]);
 *  - small_tile_mma dequantizes and scales those fragments before either
 *    orientation uses them. m16: bf is the B operand of n8 tile j8 as it is.
 *    Swapped: {bf(2i)[0], bf(2i+1)[0], bf(2i)[1], bf(2i+1)[1]} is the A
 *    fragment of the 16 x 16 tile of W^T, whose A rows gid = l/4 and gid + 8
 *    are columns 16i + l/4 = 8(2i) + l/4 and 16i + 8 + l/4 = 8(2i+1) + l/4
 *    and whose A columns 2(l%4) + {0,1}, + 8 are those k rows: every
 *    register keeps the (column, k) of the B fragment it came from;
 *  - so in both orientations register pair bf of n8 tile j8 holds column
 *    8 j8 + l/4 of the chunk alone, and takes that column's block scale, as
 *    in wonly.cu: what the swap moves is where the products land (acc to Y,
 *    elem_row / elem_col in wonly_small.cu), which only the epilogue's
 *    per-column bias sees, read there per output column;
 *  - QV_SORDER_GROUP64_FP8 stores column 64(c/64) + (c%64)/8 + 8x, x = 4((c%8)/4)
 *    + [0,2,1,3][c%4], at byte c of a row: the chunk's bytes 8(l/4) .. 8(l/4)
 *    + 7 are the columns l/4 + 8x, byte b the column l/4 + 8(4(b/4) +
 *    [0,2,1,3][b%4]), i.e. n8 tile j8 = 4(b/4) + [0,2,1,3][b%4]: one 8-byte
 *    load at local + 8(l/4) of the staged row (local: the chunk's first
 *    column in the block; the staged row holds the block's BN columns in
 *    packed order), unpacked by wo_fp4_lane_scale_pairs, which puts byte b
 *    at exactly that j8 (half j8 % 2 of register j8 / 2). */
template <int WT, bool IS_BF16, bool SWAP, int CPW>
__device__ __forceinline__ void small_load_group(small_group_regs<CPW> &r, const unsigned char *srow,
                                                 const unsigned char *zrow, int warp, int lane, bool single,
                                                 uint32_t unbias_h2, const bool fast)
{
#pragma unroll
    for (int c = 0; c < CPW; c++) {
        const int local = (warp * CPW + c) * 64; /* the chunk's first column in the block */
        if constexpr (wt_is_fp4(WT)) {
            const uint2 sv = *reinterpret_cast<const uint2 *>(srow + local + 8 * (lane >> 2));
            if (WT == WT_FP4_MX && fast)
                wo_fp4_lane_scale_pairs<WT, IS_BF16, true>(sv, r.sc[c]);
            else
                wo_fp4_lane_scale_pairs<WT, IS_BF16, false>(sv, r.sc[c]);
            continue;
        }
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
        if constexpr (small_g4_fma<WT, IS_BF16, SWAP, CPW>()) {
            if (r.fma) {
                /* sc holds S = s 2^20; C = S (-2^-17) = -8 s (0x0080: fp16 2^-17) */
#pragma unroll
                for (int j8 = 0; j8 < 8; j8++) r.c8[c][j8] = qv_h2<IS_BF16>::mul(r.sc[c][j8], 0x80808080u);
            }
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
 * is the n16 pair of n8 tiles 2i, 2i+1 (rows 2*(lane%4) + {0,1}). F, a
 * literal too: a small_g4_fma kernel dequantizes in its one-fma form (only
 * where r.fma holds, with S in r.sc); an MXFP4 kernel scales in the
 * one-multiply form (wo_fp4_scale's FAST, with registers small_load_group
 * made for it). */
template <int WT, bool IS_BF16, bool SWAP, int CPW>
__device__ __forceinline__ void small_tile_mma(float (&acc)[CPW][SWAP ? 4 : 8][4], unsigned a_addr,
                                               const uint4 (&w)[small_traits<WT>::vecs * CPW],
                                               const small_group_regs<CPW> &r, const bool G, const bool F)
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
            if constexpr (wt_is_fp4(WT)) {
                /* e2m1 codes moved into x 2^-14 / x 2^-126, then times the
                 * block scale of column 8 j8 + lane/4 (small_load_group), one
                 * rounding, as wonly.cu. FP4 rows always have group scales:
                 * every caller passes G. */
                wo_dq_word<WT, IS_BF16>(bw, j8, r.zc[0], bf);
                const uint32_t s = r.sc[c][j8 >> 1], s2 = r.sc[c][4 + (j8 >> 1)];
                if (WT == WT_FP4_MX && F)
                    wo_fp4_scale_half<WT, IS_BF16, true>(s, s2, j8 & 1, bf);
                else
                    wo_fp4_scale_half<WT, IS_BF16, false>(s, s2, j8 & 1, bf);
                return;
            }
            if constexpr (small_g4_fma<WT, IS_BF16, SWAP, CPW>()) {
                if (G && F) {
                    /* the lo pair's nibbles (bits 0-3, or 8-11 for odd j8)
                     * and the hi pair's (4-7, 12-15) into bits 4-7 */
                    const uint32_t word = bw[j8 >> 1];
                    const uint32_t lo = (j8 & 1 ? word >> 4 : word << 4) & 0x00F000F0u;
                    const uint32_t hi = (j8 & 1 ? word >> 8 : word) & 0x00F000F0u;
                    bf[0] = qv_h2<IS_BF16>::fma(lo, r.sc[c][j8], r.c8[c][j8]);
                    bf[1] = qv_h2<IS_BF16>::fma(hi, r.sc[c][j8], r.c8[c][j8]);
                    return;
                }
            }
            if (WT == WT_INT4 || group4(WT)) {
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
