/* wonly_wg_kernel.cuh: the wgmma weight-only kernel as a template that two
 * translation units instantiate: kernels/wonly_wg.cu, the dense GEMM below,
 * and kernels/moe_wg.cu, the grouped GEMM of the routed layer (MOE, wg_moe:
 * the rows are slots of the token sort, every block of bx slots one
 * expert's, whose weights and scales the copies read at that expert's rows).
 *
 * The weight-only GEMM family from M = 17 on Hopper (sm_90a):
 * Y (m, n) = A (m, k) x W (k, n) with A in fp16/bf16 and W Marlin-packed
 * (int4 "q+8" or with zero points, int8 "q+128", fp8 e4m3, e2m1 with MXFP4
 * or NVFP4 block scales; layout.h), computed
 * as the transposed product Y^T (n, m) = W^T (n, k) . A^T (k, m) on wgmma:
 *  - the weights are the wgmma A operand, 64 output columns x 16 k per
 *    warpgroup, dequantized in registers straight from the packed words (the
 *    per-warp register fragment of wgmma's A is the m16n8k16 A fragment, and
 *    two n8 B fragments of a Marlin lane make one: kernels/dequant.cuh);
 *  - the activations are the wgmma B operand, 256, 128 or 64 tokens x 16 k read
 *    from shared memory through a matrix descriptor, K-major (K contiguous,
 *    no transpose) with the 128-byte swizzle.
 * The packed weights are read and dequantized once per 256 (128, 64) tokens,
 * never expanded to memory.
 *
 * Declared arithmetic (src/registry.c, rows of family "marlin"), as in
 * wonly.cu:
 *  - group scales (QV_DQ_MUL_RN): w = half((q - z) * s), one half-precision
 *    rounding with q - z exact (e4m3 codes in bf16: w = bf16(v 2^-120 * s
 *    2^120), the same product, with the code's bits moved into a bf16 and the
 *    layout's scale as stored: qv_dqfp8_bf16_moved);
 *  - tensor/channel scales (QV_DQ_EXACT + QV_EP_MUL_WSCALE): w = value(q)
 *    exactly, the fp32 result times the scale in fp32;
 *  - FP4 (MARLIN_FP4_MX, g = 32; MARLIN_FP4_NV, g = 16): the e2m1 code times
 *    its block scale byte with one rounding (wo_fp4_scale), then in the fp32
 *    epilogue NVFP4's global scale and the bias, each rounded in fp32, one
 *    rounding to the output (wo_fp4_epilogue: the helpers of wonly.cu and
 *    wonly_small.cu);
 *  - products summed by the tensor cores into fp32, k16 by k16 in increasing
 *    k (one accumulator per output, no split K); output cast RNE.
 *
 * Structure: a persistent grid (one block per SM) walks the output tiles
 * (tile_cfg, columns x tokens: 128x256, 256x128, 128x128, 512x64, 128x64,
 * 512x32, 128x32, 512x16 or 128x16, by M and the layer's size unless
 * qv_launch_opts.wo_wg_tile says: tile_pick),
 * tokens fastest, so the blocks working at one time share their weight
 * columns in L2. Each block is warp-specialized:
 *  - one producer warpgroup, of which one thread issues every copy (the
 *    others hand their registers to the consumers): per stage of
 *    64 k, tensor-map copies of the activations (swizzled by the copy engine),
 *    of the block's packed weights (its kKs k16 rows, in one to four boxes)
 *    and of its group scales and zero points, elements past M, N and K
 *    filled with zeros, all completing on the stage's "full" mbarrier; it
 *    runs up to kStages stages ahead, across tile boundaries, so the ring is
 *    already full when a tile starts (one copy per operand and stage keeps
 *    this thread's work per stage short: with one bulk copy per k16 row it
 *    is busy about three quarters of the time on the H200 and, with group
 *    scales, lets the consumers wait);
 *  - two consumer warpgroups, each the wgmma A operand of half the tile's
 *    columns: per k16 tile they read their lanes' packed words, dequantize
 *    and issue the wgmma, keeping two groups in flight while the next is
 *    prepared, and release a stage on its "empty" mbarrier (one arrival per
 *    thread) once the groups that read it have completed; after a tile's last
 *    stage, the epilogue writes the tile while the producer streams the next:
 *    through a staging area after the ring and tensor-map stores, which the
 *    copy engine finishes while the consumers start the next tile (with C
 *    only 4-byte aligned, direct stores from registers): wg_epilogue.cuh,
 *    with this file's arithmetic (wo_epi).
 * Each warp owns TPW quarters of a 64-column Marlin chunk: per k16 tile it
 * feeds quarter i as its 16 rows of the warpgroup's i-th m64 tile. */
#ifndef QVET_KERNELS_WONLY_WG_KERNEL_CUH
#define QVET_KERNELS_WONLY_WG_KERNEL_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "async_copy.cuh"
#include "dequant.cuh"
#include "internal/gpu.h"
#include "qvet/gemm.h"
#include "func_attr.cuh"
#include "moe_common.cuh"
#include "wg_common.cuh"
#include "wg_epilogue.cuh"
#include "wonly_common.cuh"
#include "wonly_small.cuh"

namespace {

constexpr int kKs = 4;                 /* k16 tiles per stage: 64 fp16 = one 128-byte swizzle row */
/* How a kernel applies its scales (a template parameter): SM_NONE, tensor
 * or channel scales in the epilogue; SM_ROW, group scales constant over a
 * stage (g >= 64, or k == g), made into registers once per stage; SM_TILE,
 * group scales of g = 32 (16-bit, or MXFP4's bytes), made into registers
 * before every other k16 tile; SM_TILE16, NVFP4's block scales of g = 16,
 * made into registers before every k16 tile (covers: the 16-bit g = 16 rows
 * take another kernel). */
constexpr int SM_NONE = 0, SM_ROW = 1, SM_TILE = 2, SM_TILE16 = 3;
constexpr int kMaxStages = 8;
/* wgmma groups (one per k16 tile) a warpgroup keeps queued while it builds
 * the next tile's fragments: 2 (default), 1 or 3 (-DQV_WG_INFLIGHT=n, for
 * comparisons: 3 gains nothing over 2 on the H200 and spills in the
 * 512-column tiles). Each queued group holds its fragment registers. */
#ifndef QV_WG_INFLIGHT
#define QV_WG_INFLIGHT 2
#endif
constexpr int kInFlight = QV_WG_INFLIGHT;
static_assert(kInFlight >= 1 && kInFlight <= 3, "one to three wgmma groups in flight");

/* A bool as a type, for the lambdas that take FAST (wo_fp4_scale) as a
 * literal. */
template <bool B> struct wg_bool {
    static constexpr bool value = B;
};

template <int WT> struct wt_traits {
    static constexpr bool four = wt_is_4bit(WT);
    static constexpr int lane_bytes = four ? 16 : 32;        /* packed bytes per lane per (k16, chunk) */
    static constexpr int chunk_bytes = 32 * lane_bytes;      /* one k16 x 64-column tile of codes */
    static_assert(chunk_bytes * 8 == 16 * 64 * (four ? 4 : 8), "a chunk is one k16 x 64-column tile");
};

/* Shared-memory byte layout (wg_layout): the ring's barriers (full[s],
 * empty[s]) in a 1024-byte header, then the stages, each the activations (bx
 * rows of 128 bytes), its kKs k16 rows of the block's packed weights in
 * segments, then, for group scales, up to kKs group rows of bn halves (FP4:
 * bn bytes; s_row) (S_BYTES at s_off) and of bn/8 zero-point words (Z_BYTES
 * at z_off): one box of the rows the stage touches (rows past K / g read as
 * zeros); after the ring, the epilogue's staging area. As many stages as
 * fit, at most kMaxStages. */
template <int WT, int TPW, int BX, bool GROUPED,
          int S_BYTES = GROUPED ? kKs * tile_cfg<TPW, BX>::bn * (wt_is_fp4(WT) ? 1 : 2) : 0,
          int Z_BYTES = GROUPED && WT == WT_INT4_ZP ? kKs * (tile_cfg<TPW, BX>::bn / 8) * 4 : 0>
struct stage_layout : wg_layout<tile_cfg<TPW, BX>, kKs, wt_traits<WT>::chunk_bytes, S_BYTES + Z_BYTES, kMaxStages> {
    static constexpr int s_row = tile_cfg<TPW, BX>::bn * (wt_is_fp4(WT) ? 1 : 2); /* one staged group row */
    static constexpr int s_off = stage_layout::tail_off;
    static constexpr int z_off = s_off + S_BYTES;
};

struct wg_params {
    const uint32_t *b;       /* Marlin-packed weights, (k/16, 2n) or (k/16, 4n) int32 */
    const void *scales;      /* packed scales: (k/g, n) group, (1, n) channel (f16/bf16), (1) tensor;
                                FP4: (k/g, n) bytes in QV_SORDER_GROUP64_FP8 order */
    const uint32_t *zeros;   /* packed zero points (k/g, n/8) int32, or NULL */
    void *c;                 /* (m, n) output, row-major, same format as A */
    int m, n, k;
    int scale_mode;          /* SC_* */
    int scale_fmt;           /* SF_*: storage of the epilogue scale */
    int g_shift;             /* log2(g / 16): the group of k16 tile kt is kt >> g_shift */
    int grp_single;          /* 1: group scales use the 32-wide channel permutation (k == g) */
    int s_rows;              /* group rows per stage (one per group its kKs k16 tiles touch), 0: none staged */
    int c_tma;               /* 1: C is 16-byte aligned and the epilogue stores it through c_map */
    int pdl;                 /* host: launched as a programmatic dependent of the kernel in front */
    float unbias_f32;        /* fp8: 2^-s_pow2, undoes the exponent bias folded into the scales; else 1 */
    uint32_t unbias_h2;      /* the same power of two as a half2 of the activation format */
    const float *gscale;     /* MARLIN_FP4_NV: (1) fp32 global scale G (qv_packed.scales2), else NULL */
    const void *bias;        /* FP4 rows with a bias: (n) bias_fmt codes in scale_perm_single order
                                (qv_packed.bias), else NULL */
    int bias_fmt;            /* SF_*: storage of the bias */
    int pdl_order;           /* MOE, a run of launches that read the same inputs and write disjoint
                                rows (tile lists): 0 alone, 1 the run's first, 2 one behind it */
    int *counters;           /* stream-K tail: one arrival counter per tail tile, zero between launches */
    float *partial;          /* stream-K tail: 2 x grid slots of one tile's fp32 accumulators */
};

/* The grouped GEMM's terms (MOE instances; the dense ones take a zeroed
 * one and never read it). Rows of A are slots of the token sort
 * (kernels/moe_grouped.cu): A is (max_slots, k), each slot's activations
 * gathered in sorted order, and the bx slots of token tile y all belong to
 * expert block_expert[y] (the sort pads every expert's segment to bx). The
 * weight and group-scale tensor maps hold every expert's rows one after
 * the other, expert x's k16 row r at row x * w_rows + r and its group row
 * q at x * s_rows_x + q (rows a stage reads past its expert's K are never
 * used: the consumers stop at K). The epilogue writes slot s's fp32
 * product to row s of the combine's buffer through c_map (a padding
 * slot's row holds the product of its zero row, and no pair reads it),
 * times expert x's channel or tensor scale (e_scales + x * e_stride
 * elements) or NVFP4 global scale (gscale[x]); an FP4 bias is the
 * combine's. With one group of K (grp_single) the dequant's scales are
 * expert x's row of e_scales too. Token tiles from expert_start[nx] on
 * hold no slot and are skipped by the producer and the consumers alike.
 * With a tile list (tiles: whole-expert tiles of the sort's blocks, paired
 * or fitted, kernels/moe_wg.cu), token tile y starts
 * at slot tiles[1 + y] for y < tiles[0] and the tiles past the count are
 * skipped; the sort's blocks are then 2^blk_shift slots, not bx. */
struct wg_moe {
    const int *block_expert;    /* (max_slots >> blk_shift) */
    const int *expert_start;    /* (nx + 1): [nx] the padded slot total */
    const void *e_scales;       /* SC_CHANNEL / SC_TENSOR: every expert's epilogue scales */
    int64_t e_stride;           /* their elements per expert */
    const int *tiles;           /* NULL, or the count then each token tile's first slot */
    int nx, w_rows, s_rows_x, blk_shift;
};

/* Token tile y's first slot, or -1 where the tile holds no slot. The sort's
 * and the lists' outputs are read from L2 (ld.global.cg): a launch behind
 * another in a run of tile lists (wg_params.pdl_order 2) reads them without
 * a wait of its own, and no line of an earlier launch's lists in an SM's L1
 * may stand for them. */
__device__ __forceinline__ int moe_tile_m0(const wg_moe &mo, int y, int bx)
{
    if (mo.tiles) return y < __ldcg(mo.tiles) ? __ldcg(mo.tiles + 1 + y) : -1;
    const int m0 = y * bx;
    return m0 < __ldcg(mo.expert_start + mo.nx) ? m0 : -1;
}

/* The expert of the sort's block y (from L2, as moe_tile_m0 reads). */
__device__ __forceinline__ int moe_block_expert(const wg_moe &mo, int y) { return __ldcg(mo.block_expert + y); }

/* The expert whose scales the sort's block y of expert x reads
 * (moe_common.cuh). */
__device__ __forceinline__ int moe_scale_expert(const wg_moe &mo, int y, int x)
{
    return ::moe_scale_expert(mo.block_expert, y, x);
}

/* The staging switches of this file's epilogue policies (wg_epilogue.cuh's
 * kSwizzled and kReadWait: wo_epi's staged form and moe_epi's fp32 one). */
struct wo_epi_switches {
#ifdef QV_MUTANT_gpu_wg_epi_swizzle_missing
    /* Mutant (class 3): the staged rows written without the 128-byte swizzle
     * the store's tensor map reads them with (a chunk's columns permuted). */
    static constexpr bool kSwizzled = false;
#else
    static constexpr bool kSwizzled = true;
#endif
#ifdef QV_MUTANT_gpu_wg_epi_no_read_wait
    /* Mutant (class 5): the staging area rewritten without waiting for the
     * stores of the round before to have read it. */
    static constexpr bool kReadWait = false;
#else
    static constexpr bool kReadWait = true;
#endif
};

/* The MOE instances' epilogue policy (wg_epilogue.cuh's wg_epilogue_f32):
 * y times expert x's channel or tensor scale (sx, as wonly_common.cuh's
 * epilogue_scale reads it) or NVFP4's global scale in fp32, to the slot's
 * row of p.inter (c_map). */
template <int WT> struct moe_epi : wo_epi_switches {
    const wg_params &p;
    const void *sx; /* expert x's epilogue scales (SC_CHANNEL, SC_TENSOR) */
    const float gs; /* WT_FP4_NV: expert x's global scale */
    __device__ __forceinline__ moe_epi(const wg_params &params, const void *s, float g) : p(params), sx(s), gs(g) {}
    __device__ __forceinline__ float direct_col(int col, bool) const
    {
        if (p.scale_mode == SC_CHANNEL) return load_scale(sx, single_perm_index(col), p.scale_fmt);
        if (p.scale_mode == SC_TENSOR) return load_scale(sx, 0, p.scale_fmt);
        return 1.0f;
    }
    __device__ __forceinline__ void direct_scale(float s, float &y0, float &y1) const
    {
        if (p.scale_mode != SC_GROUP) {
            y0 = y0 * s;
            y1 = y1 * s;
        }
        if (WT == WT_FP4_NV) {
            y0 = y0 * gs;
            y1 = y1 * gs;
        }
    }
    __device__ __forceinline__ int store_col(int col) const { return moe_out_col(col, p.n); }
};

/* D (64 x N, fp32) += A (64 x 16, registers) . B (16 x N, shared memory
 * through `desc_b`), wgmma m64nNk16 with fp32 accumulation, N = 16, 32, 64, 128
 * or 256 (the tile's tokens).
 * a[0..3]: this warp's 16 rows as the m16n8k16 A fragment; d[4j + {0,1}]: row
 * lane/4, tokens 8j + 2(lane%4) + {0,1}; d[4j + {2,3}]: the same tokens of
 * row lane/4 + 8. Operands after B: scale-d 1 (accumulate), imm-scale-a/b 1
 * (no negation), imm-trans-b 0 (B is K-major). */
template <int N, bool IS_BF16> struct wg_mma;

/* wg_mma<N, IS_BF16>: one wgmma.mma_async m64nNk16 of element type TYPE
 * ("f16" or "bf16") with the operands REGS and accumulator constraints DOPS. */
#define WG_MMA_SPEC(N, IS_BF16, TYPE, REGS, DOPS)                                                                    \
    template <> struct wg_mma<N, IS_BF16> {                                                                          \
        static __device__ __forceinline__ void run(float d[N / 2], const uint32_t a[4], uint64_t desc_b)             \
        {                                                                                                            \
            asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " REGS                    \
                         ", 1, 1, 1, 0;\n"                                                                           \
                         : DOPS                                                                                      \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));                                 \
        }                                                                                                            \
    };

WG_MMA_SPEC(16, false, "f16", WG_REGS16, WG_D16("+f"))
WG_MMA_SPEC(16, true, "bf16", WG_REGS16, WG_D16("+f"))
WG_MMA_SPEC(32, false, "f16", WG_REGS32, WG_D32("+f"))
WG_MMA_SPEC(32, true, "bf16", WG_REGS32, WG_D32("+f"))
WG_MMA_SPEC(64, false, "f16", WG_REGS64, WG_D64("+f"))
WG_MMA_SPEC(64, true, "bf16", WG_REGS64, WG_D64("+f"))
WG_MMA_SPEC(128, false, "f16", WG_REGS128, WG_D128("+f"))
WG_MMA_SPEC(128, true, "bf16", WG_REGS128, WG_D128("+f"))
WG_MMA_SPEC(192, false, "f16", WG_REGS192, WG_D192("+f"))
WG_MMA_SPEC(192, true, "bf16", WG_REGS192, WG_D192("+f"))
WG_MMA_SPEC(256, false, "f16", WG_REGS256, WG_D256("+f"))
WG_MMA_SPEC(256, true, "bf16", WG_REGS256, WG_D256("+f"))

#undef WG_MMA_SPEC

/* The group-scale registers of one warp's n8 tiles (half2 each, the scale in
 * both halves) and the zero-point constants of its 4-bit tiles with zero
 * points. */
template <int WT, bool IS_BF16, int TPW> struct grp_regs {
    uint32_t sc[2 * TPW];
    uint32_t zc[2 * TPW]; /* WT_INT4_ZP only: qv_dq4_one's constant */
};

/* Dequantizes this lane's packed words `bw` of one k16 tile into the A
 * fragments of its TPW m64 tiles: m64 tile i takes n8 tiles 2(q0+i) (rows
 * 0-7) and 2(q0+i)+1 (rows 8-15), fragment {lo tile k0-7, hi tile k0-7, lo
 * tile k8-15, hi tile k8-15}. 4-bit: word q holds n8 tiles 2q and 2q + 1;
 * 8-bit: word j8 holds n8 tile j8. FAST: wo_fp4_scale's one-multiply form
 * (MXFP4); BF16_PERM: qv_dqfp4_word's byte form for bf16 e2m1 codes. */
template <int WT, bool IS_BF16, int TPW, bool GROUPED, bool FAST = false, bool BF16_PERM = false>
__device__ __forceinline__ void dequant_tile(const uint32_t *bw, const grp_regs<WT, IS_BF16, TPW> &g,
                                             const uint32_t sym[2], uint32_t af[TPW][4])
{
#pragma unroll
    for (int jj = 0; jj < 2 * TPW; jj++) {
        uint32_t bf[2];
        if (WT == WT_INT4) {
            qv_dq4<IS_BF16>(bw[jj >> 1] >> (8 * (jj & 1)), sym, bf);
        } else if (WT == WT_INT4_ZP) {
            qv_dq4_one<IS_BF16>(bw[jj >> 1] >> (8 * (jj & 1)), g.zc[jj], bf);
        } else if (wt_is_fp4(WT)) {
            qv_dqfp4_word<IS_BF16, BF16_PERM>(bw[jj >> 1], jj & 1, bf);
            wo_fp4_scale<WT, IS_BF16, FAST>(g.sc[jj], bf);
        } else if (WT == WT_INT8) {
            qv_dq8<IS_BF16>(bw[jj], bf);
        } else if (IS_BF16 && GROUPED) {
            qv_dqfp8_bf16_moved(bw[jj], bf); /* 2^-120 v: the scales keep their 2^120 (set_scales) */
        } else {
            qv_dqfp8<IS_BF16>(bw[jj], bf);
        }
        if (GROUPED && !wt_is_fp4(WT)) {
            bf[0] = qv_h2<IS_BF16>::mul(bf[0], g.sc[jj]);
            bf[1] = qv_h2<IS_BF16>::mul(bf[1], g.sc[jj]);
        }
        af[jj >> 1][jj & 1] = bf[0];
        af[jj >> 1][2 + (jj & 1)] = bf[1];
    }
}

/* Turns TPW words of 16-bit group-scale codes (positions 2 q0 .. 2 q0 + 2
 * TPW - 1 of the lane's packed row, codes 2w and 2w + 1 in the low and high
 * half of word w) into the warp's scale registers, each code in both halves
 * by one byte permute (where a mask or shift and a multiply took two);
 * fp8 codes in fp16 also undo the exponent bias folded into the scales
 * (exact: s * 2^s_pow2 * 2^-s_pow2 = s, a half-precision value); in bf16 the
 * scales keep their 2^120 for the codes' moved bits (dequant_tile). */
template <int WT, bool IS_BF16, int TPW>
__device__ __forceinline__ void set_scales(grp_regs<WT, IS_BF16, TPW> &g, const uint32_t *words, uint32_t unbias_h2)
{
#pragma unroll
    for (int jj = 0; jj < 2 * TPW; jj++) {
        /* bytes 1:0 (jj even) or 3:2 (jj odd) into both halves */
        g.sc[jj] = __byte_perm(words[jj >> 1], 0, jj & 1 ? 0x3232 : 0x1010);
        if (WT == WT_FP8 && !IS_BF16) g.sc[jj] = qv_h2<IS_BF16>::mul(g.sc[jj], unbias_h2);
    }
}

/* The FP4 block-scale registers (wo_fp4_scale_reg, of the stage's FAST) of
 * the warp's n8 tiles j8 = 2 q0 + jj from the 8 packed bytes of the lane's
 * column lane/4 in a staged group row (QV_SORDER_GROUP64_FP8: the scale of
 * n8 tile j8 at byte 4 (j8 / 4) + [0,2,1,3][j8 % 4], words[0] bytes 0-3,
 * words[1] bytes 4-7). j8 depends on the warp, so the byte's place is known
 * only at run time: a byte permute and a mask, then the byte in both halves
 * (wo_fp4_byte_dup's d) by a multiply that ptxas folds into the register's
 * own arithmetic; NVFP4 bf16, whose widening takes three instructions,
 * widens the bytes of n8 tiles j8 and j8 + 1 in one register and spreads
 * each half by a byte permute. */
template <int WT, bool IS_BF16, int TPW, bool FAST>
__device__ __forceinline__ void set_scales_fp4(grp_regs<WT, IS_BF16, TPW> &g, const uint32_t *words, int q0)
{
#pragma unroll
    for (int jj = 0; jj < 2 * TPW; jj++) {
        const int j8 = 2 * q0 + jj;
        const int b = 4 * (j8 >> 2) + ((j8 & 1) << 1) + ((j8 >> 1) & 1);
        if (WT == WT_FP4_NV && IS_BF16) {
            /* n8 tiles j8 and j8 + 1 (jj even) at bytes b and b + 2: both
             * bytes widened at once, one in each half (wo_fp4_scale_reg's
             * arithmetic keeps the halves apart), then each half to both */
            if (jj % 2 == 0) {
                const uint32_t t = __byte_perm(words[0], words[1], (uint32_t)(b | (b + 2) << 8)) & 0x00FF00FFu;
                const uint32_t u = wo_fp4_scale_reg<WT, true>(t);
                g.sc[jj] = __byte_perm(u, 0u, 0x1010u);
                g.sc[jj + 1] = __byte_perm(u, 0u, 0x3232u);
            }
        } else {
            const uint32_t c = __byte_perm(words[0], words[1], (uint32_t)b) & 0xFFu;
            g.sc[jj] = wo_fp4_scale_reg<WT, IS_BF16, FAST>(c * 0x00010001u);
        }
    }
}

/* The zero-point constants (qv_dq4_one_const: one register per n8 tile,
 * where qv_dq4's two made ptxas rebuild them in every k16 tile, slower on
 * the H200) of the warp's n8 tiles j8 = 2 q0 + jj from the packed word zw of
 * column lane/4 (the nibble of n8 tile j8 sits at j8/2 + 4*(j8%2):
 * interleave [0,2,4,6,1,3,5,7]). */
template <int WT, bool IS_BF16, int TPW>
__device__ __forceinline__ void set_zeros(grp_regs<WT, IS_BF16, TPW> &g, uint32_t zw, int q0)
{
    if constexpr (WT == WT_INT4_ZP) {
#pragma unroll
        for (int jj = 0; jj < 2 * TPW; jj++) {
            const int j8 = 2 * q0 + jj;
#ifdef QV_MUTANT_gpu_wg_zp_mask_missing
            /* Mutant (class 10, AutoGPTQ #484): the zero-point nibble taken without & 0xF. */
            g.zc[jj] = qv_dq4_one_const<IS_BF16>(zw >> (4 * ((j8 >> 1) + 4 * (j8 & 1))));
#else
            g.zc[jj] = qv_dq4_one_const<IS_BF16>((zw >> (4 * ((j8 >> 1) + 4 * (j8 & 1)))) & 0xFu);
#endif
        }
    }
}

/* This kernel's part of the epilogue (wg_epilogue.cuh): fp32 accumulators,
 * y * s in fp32 (tensor or channel scales, epilogue_scale; group scales were
 * applied in the dequantization), or for FP4 y * G then + bias
 * (wo_fp4_epilogue; the column's factor is then its bias, G the same for
 * every column), and one rounding to the 16-bit output; the direct form
 * scales each lane's own column before the exchange. */
template <bool IS_BF16, bool GROUPED, bool FP4> struct wo_epi : wg_rows_identity, wo_epi_switches {
    using acc_t = float;
    using col_t = float;
    const wg_params &p;
    const float gs; /* FP4: the global scale (1 without one) */

    __device__ __forceinline__ wo_epi(const wg_params &params, float g) : p(params), gs(g) {}
    static __device__ __forceinline__ int parts_summed(int parts)
    {
#ifdef QV_MUTANT_gpu_wg_streamk_part_dropped
        /* Mutant (class 11, vLLM #13227): the last part of a shared tile, its
         * last K stages, is left out of the sum. */
        return parts - 1;
#else
        return parts;
#endif
    }
    /* FP4: the column's bias (0 without one or past N). */
    __device__ __forceinline__ float fp4_bias(bool ok, int col) const
    {
        return p.bias && ok ? load_scale(p.bias, single_perm_index(col), p.bias_fmt) : 0.0f;
    }
    __device__ __forceinline__ float col_scale(bool chunk_ok, int col) const
    {
        if (FP4) return fp4_bias(chunk_ok, col);
        return GROUPED || !chunk_ok ? 1.0f : epilogue_scale(p, col);
    }
    /* No token scales. */
    template <int NB> __device__ __forceinline__ void token_scales(float (&)[NB][2], int, int) const {}
    __device__ __forceinline__ uint32_t pack(float y0, float y1, float s, const float (&)[2]) const
    {
        direct_scale(s, y0, y1);
        return qv_h2<IS_BF16>::pack(y0, y1);
    }
    __device__ __forceinline__ col_t direct_col(int col, bool) const
    {
        if (FP4) return fp4_bias(true, col);
        return GROUPED ? 1.0f : epilogue_scale(p, col);
    }
    /* Two tokens of one column (FP4: one bias). */
    __device__ __forceinline__ void direct_scale(col_t s, float &y0, float &y1) const
    {
        if (FP4) {
            wo_fp4_epilogue<IS_BF16>(y0, y1, gs, p.bias != nullptr, s, s);
        } else if (!GROUPED) {
            y0 = y0 * s;
            y1 = y1 * s;
        }
    }
    __device__ __forceinline__ void direct_store(col_t, int tok, int cp, bool even, float y0, float y1,
                                                 float recv) const
    {
        *reinterpret_cast<uint32_t *>(static_cast<uint16_t *>(p.c) + (int64_t)tok * p.n + cp) =
            even ? qv_h2<IS_BF16>::pack(y0, recv) : qv_h2<IS_BF16>::pack(recv, y1);
    }
};

/* The persistent, warp-specialized kernel (see the file comment). One block
 * per SM: 240 registers per consumer thread, 128 of them its accumulators,
 * and most of the SM's shared memory for the ring. */
/* MOE: the schedule's tile index `tile` as the dense order's index (token
 * tiles fastest) of the tile it stands for: token tiles in bands of
 * kMoeBand slots, every column tile of a band before the next band, token
 * tiles fastest inside it. The blocks running at one time then share one
 * band's activations (kMoeBand x k halves) and each column tile's weights
 * in L2, where the dense order would stream every slot's activations once
 * per column tile (the slots of a prefill batch are many times the L2). */
constexpr int kMoeBand = 1024;
__host__ __device__ __forceinline__ int moe_raster(int tile, int tiles_m, int n_tiles, int band_m)
{
    const int per_band = band_m * n_tiles;
    const int band = tile / per_band;
    const int first = band * band_m;
    const int bm = tiles_m - first < band_m ? tiles_m - first : band_m;
    const int r = tile - band * per_band;
    return first + r % bm + r / bm * tiles_m;
}

template <int WT, bool IS_BF16, int TPW, int BX, int SM, bool MOE = false>
__global__ void __launch_bounds__(kThreads, 1)
    k_gemm_wonly_wgmma(const wg_params p, const wg_sched sc, const __grid_constant__ CUtensorMap a_map,
                       const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap s_map,
                       const __grid_constant__ CUtensorMap z_map, const __grid_constant__ CUtensorMap c_map,
                       const wg_moe mo)
{
    constexpr bool GROUPED = SM != SM_NONE;
    using T = wt_traits<WT>;
    using C = tile_cfg<TPW, BX>;
    using L = stage_layout<WT, TPW, BX, GROUPED>;
    constexpr int S = L::stages;
    const wg_block<L> b;
    const int n_chunks = p.n / 64;
    const int kt_total = p.k / 16;
    const int tiles_m = sc.tiles_m;
    const int s_rows = GROUPED ? p.s_rows : 0;
    b.init_ring();
    /* Programmatic dependent launch (launch_kernel): the grid may start
     * while the kernel in front runs (act_order: the permutation of A; else
     * whatever the stream ran last), and nothing in global memory is read or
     * written here before it has finished and its writes are visible. The
     * kernel behind this one may launch the same way as soon as every block
     * here runs. Without a kernel in front launched so, the wait returns at
     * once.
     * MOE tile lists (pdl_order) run otherwise: the run's first launch lets
     * the next one launch only once its own wait is over, when the kernels in
     * front (the gather, the lists) have ended; a launch behind it reads only
     * their outputs and writes other product rows, so it starts its tiles on
     * the SMs that the launch in front frees, without waiting for the rest of
     * that launch's tiles. Its block 0 waits for the launch in front before
     * ending (one thread of the producer's spare warps), so that the
     * combine, which waits for the run's last launch, finds every launch
     * ended. */
    const int order = MOE ? p.pdl_order : 0;
    if (order == 1) asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::);
    if (order == 0) asm volatile("griddepcontrol.wait;\n" ::: "memory");

    if (b.warp >= kConsumerWarps) {
        /* The producer: every stage of every tile of this block, in order,
         * each into the next slot once its consumers have released it. One
         * thread issues them all; its warpgroup hands its registers over. */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        if (b.warp != kConsumerWarps || b.lane != 0) {
            if (order == 2 && blockIdx.x == 0 && b.warp == kConsumerWarps + 1 && b.lane == 0)
                asm volatile("griddepcontrol.wait;\n" ::: "memory");
            return;
        }
        /* Every stage announces the same bytes: the tensor-map copies write
         * whole boxes, zeros past M, N and K included. */
        const uint32_t tx = L::a_bytes + L::w_bytes +
                            (uint32_t)s_rows * (L::s_row + (WT == WT_INT4_ZP ? (C::bn / 8) * 4 : 0));
        wg_ring_pos<S> pos;
        /* Stages s0 .. s1 - 1 of tile `tile`. */
        auto produce = [&](int tile, int s0, int s1) {
            if constexpr (MOE) tile = moe_raster(tile, tiles_m, sc.tiles / tiles_m, kMoeBand / C::bx);
            const int m0 = MOE ? moe_tile_m0(mo, tile % tiles_m, C::bx) : tile % tiles_m * C::bx;
            const int c0 = tile / tiles_m * C::chunks;
            /* The tile's first weight element (8 bytes) in a k16 row, its
             * first group-scale word (a pair of 16-bit scales, or four FP4
             * scale bytes) and zero-point word. */
            const int w_x = c0 * (T::chunk_bytes / 8), s_x = c0 * (L::s_row / C::chunks / 4), z_x = c0 * 8;
            /* MOE: the tile's expert's first k16 row and group row (a tile
             * past the sort's slots is skipped, as the consumers skip it). */
            int w_row0 = 0, s_row0 = 0;
            if constexpr (MOE) {
                if (m0 < 0) return;
                const int y = m0 >> mo.blk_shift, x = moe_block_expert(mo, y);
                w_row0 = x * mo.w_rows;
                s_row0 = moe_scale_expert(mo, y, x) * mo.s_rows_x;
            }
            for (int step = s0; step < s1; step++) {
                const int kt0 = step * kKs;
                const wg_stage_at at = wg_stage_in<L, kKs>(b, pos, tx, &a_map, &w_map, step, m0, w_x, w_row0);
                if (s_rows > 0) {
#ifdef QV_MUTANT_gpu_wg_group_index_shift
                    /* Mutant (class 18): a stage's group rows taken from the stage before it. */
                    const int grp = (kt0 >= kKs ? kt0 - kKs : 0) >> p.g_shift;
#else
                    const int grp = kt0 >> p.g_shift;
#endif
                    tma_load_2d(at.st + L::s_off, &s_map, s_x, s_row0 + grp, at.bar);
                    if (WT == WT_INT4_ZP) tma_load_2d(at.st + L::z_off, &z_map, z_x, grp, at.bar);
                }
                pos.advance();
            }
        };
        for (wg_pieces pc(sc, blockIdx.x); pc.next(sc);) produce(pc.tile, pc.s0, pc.s1);
        return;
    }

    /* The consumers. */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    /* This thread's warpgroup, its warp's chunk and first quarter-chunk q0
     * (4-bit words: m64 tile i takes n8 tiles 2 (q0 + i) and 2 (q0 + i) + 1
     * of the chunk). */
    const wg_consumer<TPW> th(b.tid, b.warp, b.lane);
    const int q0 = th.q0;
    /* This lane's bytes in a k16 row of the stage: TPW 4-bit words from word
     * q0, or 2 TPW 8-bit words from word 2 q0 (16 bytes per pair of m64 tiles). */
    const int lane_off = th.chunk_l * T::chunk_bytes + b.lane * T::lane_bytes + (T::four ? 4 * q0 : 8 * q0);
    /* The same bytes of k16 row 0 in the stage's segmented weight boxes. */
    const int w_lane = lane_off / L::seg_bytes * (kKs * L::seg_bytes) + lane_off % L::seg_bytes;
    /* This lane's group scales in a staged row: positions 8*(lane/4) + j8 of
     * the warp's chunk (scale_perm puts column 8*j8 + lane/4 there; FP4: all
     * eight bytes of the lane's column, set_scales_fp4); its zero-point word:
     * column lane/4 of the chunk's n8 tiles. */
    const int s_lane = wt_is_fp4(WT) ? th.chunk_l * 64 + 8 * (b.lane >> 2)
                                     : (th.chunk_l * 64 + 8 * (b.lane >> 2) + 2 * q0) * 2;
    const int z_lane = (th.chunk_l * 8 + (b.lane >> 2)) * 4;
    uint32_t sym[2]; /* "q+8" codes: zero point 8 */
    qv_dq4_consts<IS_BF16>(8u, sym);
    /* FP4: the global scale (1 without one, MX: an exact product). */
    const float gs = wt_is_fp4(WT) && p.gscale ? __ldg(p.gscale) : 1.0f;
    grp_regs<WT, IS_BF16, TPW> g;
#pragma unroll
    for (int jj = 0; jj < 2 * TPW; jj++) g.sc[jj] = 0;
    if (WT == WT_INT4_ZP)
#pragma unroll
        for (int jj = 0; jj < 2 * TPW; jj++) g.zc[jj] = 0;
    /* k == g: the tile's scale codes and zero-point word. */
    uint32_t tcode[TPW], tzero = 0;
#pragma unroll
    for (int w = 0; w < TPW; w++) tcode[w] = 0;

    float acc[TPW][C::bx / 2];
    wg_ring_reader<S> rd(b.full0, b.empty0);
    /* The activations' descriptor low word of the current slot, carried from
     * stage to stage (kCarryDesc: SM_NONE, SM_ROW): ptxas rebuilt a value made
     * from the slot inside every k16 tile (a multiply, an add, logic ops and
     * moves to uniform registers), and cannot rebuild a loop-carried one. The
     * g = 32 instances (SM_TILE) make it per stage: there the carried word
     * made ptxas spill inside the stage loop, and with their group rows
     * once per two tiles it makes no shorter code (cuobjdump); SM_TILE16
     * likewise.
     * Slots are whole swizzle atoms apart, so the low words of consecutive
     * slots differ by L::bytes / 16. */
    constexpr bool kCarryDesc = SM != SM_TILE && SM != SM_TILE16;
    static_assert(L::bytes % kSwizzleAtom == 0, "ring slots start on swizzle atoms");
    const uint32_t desc_ring = wg_desc_sw128_lo(b.ring + L::a_off);
    uint32_t desc_slot = desc_ring;
    for (wg_pieces pc(sc, blockIdx.x); pc.next(sc);) {
        const int tix = MOE ? moe_raster(pc.tile, tiles_m, sc.tiles / tiles_m, kMoeBand / C::bx) : pc.tile;
        wg_tile t = wg_tile_at<TPW, BX>(tix, tiles_m, n_chunks, th);
        const bool chunk_ok = t.chunk_ok;
        /* MOE: the tile's first slot, its expert x and the expert xs whose
         * scales it reads (the producer skips the same tiles). */
        int x = 0, xs = 0;
        if constexpr (MOE) {
            t.m0 = moe_tile_m0(mo, tix % tiles_m, C::bx);
            if (t.m0 < 0) continue;
            x = moe_block_expert(mo, t.m0 >> mo.blk_shift);
            xs = moe_scale_expert(mo, t.m0 >> mo.blk_shift, x);
        }
#pragma unroll
        for (int i = 0; i < TPW; i++)
#pragma unroll
            for (int r = 0; r < C::bx / 2; r++) acc[i][r] = 0.0f;
        if (GROUPED && p.grp_single && chunk_ok) {
            /* k == g: one group for all of K, its scales in the channel order,
             * read once per tile (codes 2w and 2w + 1 in word w). */
            const uint16_t *s16 = static_cast<const uint16_t *>(p.scales);
            if constexpr (MOE) s16 = static_cast<const uint16_t *>(mo.e_scales) + (size_t)xs * (size_t)mo.e_stride;
#pragma unroll
            for (int w = 0; w < TPW; w++) {
                const int col = (t.c0 + th.chunk_l) * 64 + 8 * (2 * q0 + 2 * w) + (b.lane >> 2);
                tcode[w] = (uint32_t)s16[single_perm_index(col)] | (uint32_t)s16[single_perm_index(col + 8)] << 16;
            }
            /* Its zero points keep the grouped layout: the word of column
             * lane/4 of the warp's chunk in the one group row. */
            if (WT == WT_INT4_ZP) tzero = p.zeros[(t.c0 + th.chunk_l) * 8 + (b.lane >> 2)];
        }

        const wg_part pt = wg_part_of(sc, pc);
        for (int step = pc.s0; step < pc.s1; step++) {
            const int kt0 = step * kKs;
            const int nk = kt_total - kt0 < kKs ? kt_total - kt0 : kKs;
            rd.wait();
            const unsigned char *st = b.ring + rd.pos.slot * L::bytes;
            if (t.wg_active) {
                /* This lane's words of k16 row u of the stage (zeros past K
                 * and for a chunk past N). With at most 16 words in the stage
                 * (8 beside the zero-point constants of four m64 tiles), every
                 * row's words are read at the start of the stage: one wait
                 * for shared memory per stage; else row by row. */
                constexpr int kWords = T::four ? TPW : 2 * TPW;
                constexpr bool kAllRows = kWords * kKs <= (WT == WT_INT4_ZP && TPW == 4 ? 8 : 16);
                auto load_row = [&](int u, uint32_t *w) {
                    ld_words<kWords>(st + L::w_off + w_lane + u * L::seg_bytes, chunk_ok && u < nk, w);
                };
                uint32_t bw[kAllRows ? kKs : 1][kWords];
                if constexpr (kAllRows) {
#pragma unroll
                    for (int u = 0; u < kKs; u++) load_row(u, bw[u]);
                }
                /* The descriptor's low word for the stage's activations (k16
                 * tile u: 32 bytes on, + 2 u): a 32-bit add per tile, where
                 * the 64-bit one took two instructions more and the whole
                 * descriptor was made again for each tile (10 instructions
                 * fewer per stage, faster on the H200). */
                const uint32_t desc_lo = kCarryDesc ? desc_slot : wg_desc_sw128_lo(st + L::a_off);
                /* Group scales (and zero points), read at the start of the
                 * stage so that the k16 tiles below have no branch between
                 * them (a reload under a test per k16 tile left ptxas a block
                 * per tile and the dequantization's latency in the open):
                 * SM_ROW, the stage's one group row (or, with
                 * k == g, the tile's constants), made into registers once;
                 * SM_TILE (g = 32), row r of k16 tiles 2r and 2r + 1, made
                 * into registers before tile 2r (with g = 16 or 32 in one
                 * instance, a row for every tile, made before each, was
                 * slower on the H200); SM_TILE16 (NVFP4, g = 16), row u
                 * before tile u. 2 TPW 16-bit codes per lane in TPW words;
                 * FP4, the lane's 8 scale bytes in two. */
                constexpr int kRows = SM == SM_TILE ? kKs / 2 : SM == SM_TILE16 ? kKs : 1;
                constexpr int kSw = wt_is_fp4(WT) ? 2 : TPW;
                uint32_t scw[kRows][kSw];
                uint32_t zw[WT == WT_INT4_ZP ? kRows : 1];
                if constexpr (GROUPED) {
                    const bool ld = !p.grp_single && chunk_ok;
#pragma unroll
                    for (int u = 0; u < kRows; u++) {
                        uint32_t v[kSw];
                        ld_words<kSw>(st + L::s_off + u * L::s_row + s_lane, ld, v);
#pragma unroll
                        for (int w = 0; w < kSw; w++) scw[u][w] = p.grp_single && !wt_is_fp4(WT) ? tcode[w] : v[w];
                        if constexpr (WT == WT_INT4_ZP) {
                            const uint32_t z =
                                ld ? *reinterpret_cast<const uint32_t *>(st + L::z_off + u * (C::bn / 8) * 4 + z_lane)
                                   : 0u;
                            zw[u] = p.grp_single ? tzero : z;
                        }
                    }
                }
                /* MXFP4: whether the stage's scale codes are all at most
                 * 127 (wo_fp4_mx_fast), for the stage's tiles to take the
                 * one-multiply form (FAST, a literal in each of the two
                 * copies of the tiles below). Only for f16 (bf16 saves one
                 * multiply of three, and its rows ran slower at M = 1024
                 * with the vote and the two copies on the H100), in the
                 * tiles whose accumulators leave room for both copies: one
                 * m64 tile per warp (128 columns, M > 128 by default) and
                 * 512x16 (four m64n16 tiles, 32 accumulators a lane; M <=
                 * 16 on large layers). The other wide tiles spill with
                 * both copies (ptxas, 512x32: 108 bytes of stores, where
                 * 512x16 takes 20). */
                constexpr bool kMxFast = WT == WT_FP4_MX && !IS_BF16 && (TPW == 1 || (TPW == 4 && BX == 16));
                bool mx_fast = false;
                if constexpr (kMxFast) {
                    uint32_t ored = 0;
#pragma unroll
                    for (int u = 0; u < kRows; u++)
#pragma unroll
                        for (int w = 0; w < kSw; w++) ored |= scw[u][w];
                    mx_fast = wo_fp4_mx_fast(ored);
                }
                /* The scale and zero-point registers from row u's codes. */
                auto use_row = [&](int u, auto fast) {
                    if constexpr (wt_is_fp4(WT))
                        set_scales_fp4<WT, IS_BF16, TPW, decltype(fast)::value>(g, scw[u], q0);
                    else
                        set_scales(g, scw[u], p.unbias_h2);
                    if constexpr (WT == WT_INT4_ZP) set_zeros(g, zw[u], q0);
                };
                if constexpr (SM == SM_ROW) use_row(0, wg_bool<false>{});
                /* k16 tile u of the stage. */
                auto k16 = [&](int u, auto fast) {
                    if constexpr (SM == SM_TILE)
                        if (u % 2 == 0) use_row(u / 2, fast);
#ifdef QV_MUTANT_gpu_wg_fp4_scale_stale
                    /* Mutant (class 23, CUTLASS #3596, #3615): NVFP4's block
                     * scales made into registers only before every other k16
                     * tile, so tiles 1 and 3 of a stage keep the scales of
                     * the tile before them (another group). */
                    if constexpr (SM == SM_TILE16)
                        if (u % 2 == 0) use_row(u, fast);
#else
                    if constexpr (SM == SM_TILE16) use_row(u, fast);
#endif
                    if constexpr (!kAllRows) load_row(u, bw[0]);
                    uint32_t af[TPW][4];
                    /* Dense MXFP4 bf16 tiles of more than 16 tokens take the
                     * e2m1 byte form (qv_dqfp4_word's BF16_PERM): on sm_90
                     * the default form's integer multiplies issue to the
                     * FMA-heavy pipe, as the two bf16 multiplies a register
                     * of wo_fp4_scale without FAST do, and these tiles ran
                     * 2-3 % slower with them at M = 1024 on the H100, where
                     * the 16-token tiles and the MOE instances ran faster. */
                    constexpr bool kBf16Perm = WT == WT_FP4_MX && !MOE && BX > 16;
                    dequant_tile<WT, IS_BF16, TPW, GROUPED, decltype(fast)::value, kBf16Perm>(bw[kAllRows ? u : 0], g,
                                                                                              sym, af);
                    /* kInFlight >= 2: the fragments were built while the
                     * kInFlight latest groups ran; now all but the latest
                     * kInFlight - 1 are done, and (u = kInFlight - 1) so is
                     * every group of the previous stage. */
                    if (kInFlight >= 2) {
                        wg_wait<kInFlight - 1>();
                        if (u == kInFlight - 1) rd.release_held();
                    }
                    wg_fence();
                    /* 32 bytes into each 128-byte row. */
                    const uint64_t desc = wg_desc_sw128_from_lo(desc_lo + (uint32_t)(u * 32 >> 4));
#pragma unroll
                    for (int i = 0; i < TPW; i++) wg_mma<C::bx, IS_BF16>::run(acc[i], af[i], desc);
                    wg_commit();
                    /* kInFlight = 1: the previous group is done once this one
                     * is queued, and (u = 0) every group of the previous stage. */
                    if (kInFlight == 1) {
                        wg_wait<1>();
                        if (u == 0) rd.release_held();
                    }
                };
                /* (A branch around the body, not a break: ptxas then keeps
                 * the wgmma groups asynchronous. Two copies of the loop, one
                 * without the test for whole stages, made ptxas serialize
                 * them.) */
                if (kMxFast && mx_fast) {
#pragma unroll
                    for (int u = 0; u < kKs; u++)
                        if (u < nk) k16(u, wg_bool<kMxFast>{});
                } else {
#pragma unroll
                    for (int u = 0; u < kKs; u++)
                        if (u < nk) k16(u, wg_bool<false>{});
                }
                /* A last stage too short to release the previous one. */
                rd.hold();
            } else {
                /* Nothing of the stage is read. */
                rd.skip();
            }
            rd.pos.advance();
            if (kCarryDesc) desc_slot = rd.pos.slot == 0 ? desc_ring : desc_slot + (uint32_t)(L::bytes >> 4);
        }
        rd.finish();
        if constexpr (MOE) {
            /* Whole tiles only (the host plans no stream-K tail). */
            const void *sx = static_cast<const char *>(mo.e_scales) +
                             (size_t)xs * (size_t)mo.e_stride * (p.scale_fmt == SF_F32 ? 4 : 2);
            const float gx = WT == WT_FP4_NV ? __ldg(p.gscale + x) : 1.0f;
            wg_epilogue_f32<TPW, BX, L>(moe_epi<WT>(p, sx, gx), acc, b, th, t, p.m, n_chunks, &c_map);
        } else {
            using Epi = wo_epi<IS_BF16, GROUPED, wt_is_fp4(WT)>;
            if (pt.parts > 0 && !wg_streamk_sum<Epi, TPW, BX>(acc, p, b, pc, pt, th.ct)) continue;
            wg_epilogue<TPW, BX, L>(Epi(p, gs), acc, b, th, t, p.m, n_chunks, p.c_tma, &c_map);
        }
    }
    /* The staging area's last stores done before the block leaves. */
    if (p.c_tma && (th.ct & 127) == 0) bulk_wait<0>();
}

} /* namespace */

#endif
