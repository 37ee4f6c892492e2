/* wonly_small.cu: the weight-only GEMM Y (m, n) = A (m, k) x W (k, n) for
 * M <= 16, built to stream the packed weights at memory bandwidth. Same
 * layouts (layout.h) and same declared arithmetic as kernels/wonly.cu:
 *  - group scales (QV_DQ_MUL_RN): w = half((q - z) * s), one half-precision
 *    rounding, q - z exact (dequant.cuh);
 *  - tensor/channel scales (QV_DQ_EXACT + QV_EP_MUL_WSCALE): w = value(q)
 *    exactly, the fp32 result times the scale in fp32;
 *  - products summed by m16n8k16 tensor cores into fp32 (one tile holds every
 *    row: M <= 16 as the mma's rows, or M <= 8 as its columns); split-K
 *    partials added in fp32, slices 0..S-1 in that order, so every launch is
 *    bitwise identical; output cast RNE.
 *
 * Structure: a block of 8 warps covers 512 columns (1024 with two chunks per
 * warp) over one K slice of at most 64 k16 tiles; warp w owns one (or two
 * adjacent) 64-column Marlin chunks for the whole slice, so no two warps of a
 * block share a column and no intra-block reduction exists. Each lane's B
 * fragments of one k16 tile and chunk are one (4-bit) or two (8-bit) 16-byte
 * words, loaded straight into registers with non-caching loads `depth` tiles
 * ahead of their use: a warp always has 4 KiB of weights in flight, and nothing
 * waits on shared memory or a barrier inside the K loop. The slice's A rows
 * (gathered through perm under act_order), group scales and zero points are
 * staged in shared memory once, at block start, while the first weight loads
 * are in flight. Split-K: every slice writes fp32 partials; the last block of a
 * column tile to arrive (a counter per tile) adds slices 0..S-1 in order,
 * applies the epilogue, writes Y and resets the counter.
 *
 * Configurations (QVET_WO_SMALL, wonly_small.cuh): by default M <= 8 with
 * K >= 8192, swapped (weights as the A operand, A^T as B: 4 mma per k16 tile
 * and chunk instead of 8, since at M = 1 the m16 orientation wastes 15 of 16
 * rows). "1" runs M <= 8 in the m16 orientation (A's rows as the mma's rows),
 * "swap" runs every M <= 8 swapped, and
 * "swap2" also gives each warp two adjacent chunks for 4-bit weights, so a
 * warp's loads of one k16 row are 1 KiB contiguous as they are for 8-bit
 * weights. "16" takes M <= 16 in the m16 orientation. Measured on the H200
 * (2026-11-29, bench/RESULTS.md): swapped, the Llama-3-70B block at M = 1 takes
 * w4a16-ch 276 us (general kernel 281), fp8a16-ch 335 us (363); Llama-2-7B
 * w4a16-ch 116 us (107); at M = 16 the general kernel is faster on both. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dequant.cuh"
#include "mma.cuh"
#include "qvet/gemm.h"
#include "qvet/gpu.h"
#include "wonly_small.cuh"

namespace {

/* Weight code families, how the scale enters, and the epilogue scale's storage
 * (the same meanings as in wonly.cu). */
enum { WT_INT4 = 0, WT_INT8 = 1, WT_FP8 = 2, WT_INT4_ZP = 3 };
enum { SC_GROUP = 0, SC_CHANNEL = 1, SC_TENSOR = 2 };
enum { SF_F16 = 0, SF_BF16 = 1, SF_F32 = 2 };

constexpr int kWarps = 8;            /* warps per block, one or two 64-column chunks each */
constexpr int kThreads = 32 * kWarps;
/* Blocks per SM the kernel is built for (__launch_bounds__): 16 warps of at
 * most 128 registers fill the register file, and the split-K plan counts on it. */
constexpr int kBlocksPerSm = 2;
/* Longest K slice in k16 tiles: bounds the shared-memory copy of A (16 rows x
 * 1024 halves = 32 KiB) and of the slice's group scales. */
constexpr int kMaxTilesPerSplit = 64;
/* Shared-memory budget of one block: two blocks per SM fit the H200's 227 KiB. */
constexpr size_t kSmemBudget = 96 * 1024;

/* Per weight type: 16-byte words per lane per k16 tile (4-bit: the lane's four
 * tiles' fragments in 4 words; 8-bit: 8 words), and the prefetch depth in k16
 * tiles, chosen so a warp has 4 KiB of weights in flight (8 x 512 B or 4 x 1 KiB). */
template <int WT> struct small_traits {
    static constexpr bool four = WT == WT_INT4 || WT == WT_INT4_ZP;
    static constexpr int vecs = four ? 1 : 2;
    static constexpr int depth = four ? 8 : 4;
    static constexpr int chunk_vecs = 32 * vecs;  /* 16-byte words per (k16 tile, 64-column chunk) */
};

struct small_params {
    const uint16_t *a;       /* (m, k) fp16/bf16 codes, row-major, logical column order */
    const int32_t *perm;     /* act_order: (k) logical column of sorted row i; NULL otherwise */
    const uint4 *b;          /* Marlin-packed weights, (k/16, 2n) or (k/16, 4n) int32, as 16-byte words */
    const void *scales;      /* packed scales: (k/g, n) group, (1, n) channel (f16/bf16/f32), (1, 1) tensor */
    const uint32_t *zeros;   /* packed zero points (k/g, n/8) int32, or NULL */
    void *c;                 /* (m, n) output, row-major, same format as A */
    float *partial;          /* (splits, m, n) fp32 split-K partials, when splits > 1 */
    int *counters;           /* (n blocks) arrival counters, zero between launches */
    int m, n, k;
    int tiles_per_split;     /* k16 tiles per K slice */
    int splits;
    int scale_mode;          /* SC_* */
    int scale_fmt;           /* SF_*: storage of the epilogue scale */
    int g_shift;             /* log2(g / 16): the group of k16 tile kt is kt >> g_shift */
    int grp_single;          /* 1: group scales use the 32-wide channel permutation (k == g) */
    int groups_max;          /* group rows of scales (and zero points) staged per block */
    float unbias_f32;        /* fp8: 2^-s_pow2, undoes the exponent bias folded into the scales; else 1 */
    uint32_t unbias_h2;      /* the same power of two as a half2 of the activation format */
};

/* Shared-memory byte layout of one block, the same on host and device: A's
 * rows 0..m-1 over the slice, each padded by 16 bytes so that the 8 row
 * addresses of an ldmatrix fall on 8 different 16-byte bank groups (the row
 * stride is an odd multiple of 16 bytes); a 16-byte zero line that rows >= m
 * read; then groups_max rows of bn group scales and of bn/8 zero-point words
 * (bn: the block's columns). */
struct small_smem {
    int a_stride, zero_off, s_off, z_off, bytes;
    __host__ __device__ small_smem(int m, int tiles_per_split, int groups_max, bool grouped, bool zp, int bn)
    {
        a_stride = tiles_per_split * 32 + 16;
        zero_off = m * a_stride;
        s_off = zero_off + 16;
        z_off = s_off + (grouped ? groups_max * bn * 2 : 0);
        bytes = z_off + (zp ? groups_max * (bn / 8) * 4 : 0);
    }
};

/* 16 bytes from global memory through the non-coherent path, not kept in L1:
 * every weight byte is read once per launch, so caching it would only evict A
 * and the scales. src: one 16-byte word of the packed weights (16-byte
 * aligned), which nothing writes during the kernel (B is an input). */
__device__ __forceinline__ uint4 ld_stream16(const uint4 *src)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(src));
    return v;
}

/* Packed index of logical column col for scale_perm_single (layout.h,
 * QV_SORDER_CHANNEL32): inside each 32 columns, position 8i + jj holds column
 * 2i + {0,1,8,9,16,17,24,25}[jj]. */
__device__ __forceinline__ int single_perm_index(int col)
{
    int c = col & 31;
    int i = (c & 7) >> 1;
    int jj = 2 * (c >> 3) + (c & 1);
    return (col & ~31) + 8 * i + jj;
}

/* Element idx of a scale array s (f16, bf16 or f32 codes as fmt says). */
__device__ __forceinline__ float load_scale(const void *s, int64_t idx, int fmt)
{
    if (fmt == SF_F32) return static_cast<const float *>(s)[idx];
    uint16_t code = static_cast<const uint16_t *>(s)[idx];
    return fmt == SF_F16 ? qv_h2<false>::to_float(code) : qv_h2<true>::to_float(code);
}

/* The fp32 epilogue factor of column col: the channel or tensor scale (times
 * the exact power of two 2^-s_pow2 for fp8, which restores the stored scale),
 * or 1 for group scales, which were applied in the dequant. */
__device__ __forceinline__ float epilogue_scale(const small_params &p, int col)
{
    if (p.scale_mode == SC_CHANNEL) return load_scale(p.scales, single_perm_index(col), p.scale_fmt) * p.unbias_f32;
    if (p.scale_mode == SC_TENSOR) return load_scale(p.scales, 0, p.scale_fmt) * p.unbias_f32;
    return 1.0f;
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

/* SWAP (M <= 8): the weights are the mma's A operand and A^T its B operand,
 * so one m16n8k16 covers 16 columns x 8 rows and a k16 tile of a 64-column
 * chunk takes 4 mma instead of 8 (the m16 orientation wastes 16 - M of its 16
 * rows). CPW: 64-column chunks per warp (1 or 2); with 2, a warp's loads of one
 * k16 row are 1 KiB contiguous for 4-bit weights, as they are for 8-bit ones. */
template <int WT, bool IS_BF16, bool SWAP, int CPW>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) k_gemm_wonly_small(const small_params p)
{
    using T = small_traits<WT>;
    constexpr bool kZp = WT == WT_INT4_ZP;
    constexpr int BN = 64 * kWarps * CPW;   /* columns per block */
    constexpr int depth = T::depth / CPW;   /* k16 tiles in flight: still 4 KiB per warp */
    constexpr int VW = T::vecs * CPW;       /* 16-byte words per lane per k16 tile */
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int s_is_last;

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int n0 = blockIdx.x * BN;
    const int n_chunks = p.n / 64;
    const int chunk0 = (blockIdx.x * kWarps + warp) * CPW; /* the warp's first chunk */
    const bool active = chunk0 < n_chunks;
    bool chunk_on[CPW];
#pragma unroll
    for (int c = 0; c < CPW; c++) chunk_on[c] = chunk0 + c < n_chunks;
    const int kt_begin = blockIdx.y * p.tiles_per_split;
    const int kt_end = min(p.k / 16, kt_begin + p.tiles_per_split);
    const int nt = kt_end - kt_begin;
    const bool grouped = p.scale_mode == SC_GROUP;
    const small_smem L(p.m, p.tiles_per_split, p.groups_max, grouped, kZp, BN);

    /* 1. The first `depth` tiles of this warp's weight stream, issued before
     * anything else so their latency overlaps the staging below. A k16 row of B
     * is n_chunks chunks of chunk_vecs 16-byte words; the lane's words of tile
     * kt, chunk c are at row kt, chunk chunk0 + c, position lane * vecs. Words
     * of a chunk past N stay zero and their results are never stored. */
    const int64_t row_vecs = (int64_t)n_chunks * T::chunk_vecs;
    const uint4 *bp = p.b + (int64_t)kt_begin * row_vecs + (int64_t)chunk0 * T::chunk_vecs + lane * T::vecs;
    uint4 buf[depth][VW];
#pragma unroll
    for (int j = 0; j < depth; j++)
#pragma unroll
        for (int v = 0; v < VW; v++) {
            if (CPW > 1) buf[j][v] = make_uint4(0, 0, 0, 0);
            if (chunk_on[v / T::vecs] && j < nt)
                buf[j][v] = ld_stream16(bp + j * row_vecs + (v / T::vecs) * T::chunk_vecs + v % T::vecs);
        }

    /* 2. Stage the slice's A rows, group scales and zero points. */
    const int a_chunks_row = nt * 2; /* 16-byte pieces of one A row in the slice */
    if (p.perm == NULL) {
        for (int c = tid; c < p.m * a_chunks_row; c += kThreads) {
            const int row = c / a_chunks_row, ch = c % a_chunks_row;
            qv_cp_async16(smem + row * L.a_stride + ch * 16,
                          p.a + (int64_t)row * p.k + (int64_t)kt_begin * 16 + ch * 8, true);
        }
    } else {
        /* act_order: sorted column i of A is logical column perm[i]. */
        uint16_t *as = reinterpret_cast<uint16_t *>(smem);
        for (int e = tid; e < p.m * nt * 16; e += kThreads) {
            const int row = e / (nt * 16), col = e % (nt * 16);
#ifdef QV_MUTANT_gpu_wo_small_act_order_unpermuted
            /* Mutant (class 13): A's columns not permuted to the sorted-row order. */
            as[row * (L.a_stride / 2) + col] = p.a[(int64_t)row * p.k + kt_begin * 16 + col];
#else
            as[row * (L.a_stride / 2) + col] = p.a[(int64_t)row * p.k + p.perm[kt_begin * 16 + col]];
#endif
        }
    }
    const int grp_begin = kt_begin >> p.g_shift;
    if (grouped) {
        const int n_grp = ((kt_end - 1) >> p.g_shift) - grp_begin + 1;
        /* BN/8 pieces of 16 bytes per row of BN scales; a piece exists when its
         * 8 columns lie below n (n is a multiple of 64). */
        for (int c = tid; c < n_grp * (BN / 8); c += kThreads) {
            const int r = c / (BN / 8), ch = c % (BN / 8);
            if (n0 + ch * 8 < p.n)
                qv_cp_async16(smem + L.s_off + r * BN * 2 + ch * 16,
                              static_cast<const uint16_t *>(p.scales) + (int64_t)(grp_begin + r) * p.n + n0 + ch * 8,
                              true);
        }
        if (kZp) {
            /* BN/32 pieces of 4 words per row of BN/8 zero-point words. */
            for (int c = tid; c < n_grp * (BN / 32); c += kThreads) {
                const int r = c / (BN / 32), ch = c % (BN / 32);
                if (n0 / 8 + ch * 4 < p.n / 8)
                    qv_cp_async16(smem + L.z_off + r * (BN / 8) * 4 + ch * 16,
                                  p.zeros + (int64_t)(grp_begin + r) * (p.n / 8) + n0 / 8 + ch * 4, true);
            }
        }
    }
    if (tid == 0) *reinterpret_cast<uint4 *>(smem + L.zero_off) = make_uint4(0, 0, 0, 0);
    qv_cp_async_commit();
    qv_cp_async_wait<0>();
    __syncthreads();

    /* The lane's ldmatrix row address (rows >= m read the zero line). m16
     * orientation: A row lane%16, k half lane/16 (qv_ldmatrix_x4's matrix
     * order). Swapped: A row lane%8, k half (lane/8)%2 for an x2 load, whose
     * two matrices are exactly the mma B fragment of A^T (k 0-7 and k 8-15). */
    const int a_row = SWAP ? (lane & 7) : (lane & 15);
    const int a_half = SWAP ? ((lane >> 3) & 1) : (lane >> 4);
    const unsigned smem_base = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned a_addr0 = a_row < p.m ? smem_base + a_row * L.a_stride + a_half * 16 : smem_base + L.zero_off;
    const unsigned a_step = a_row < p.m ? 32u : 0u;

    /* Accumulators of chunk c: m16 orientation, acc[c][j8] is n8 tile j8 (rows
     * lane/4 and lane/4 + 8); swapped, acc[c][i] is the n16 pair of n8 tiles
     * 2i, 2i+1 (rows 2*(lane%4) + {0,1}). elem_row / elem_col map them to Y. */
    constexpr int NT = SWAP ? 4 : 8;
    float acc[CPW][NT][4];
#pragma unroll
    for (int c = 0; c < CPW; c++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[c][j][r] = 0.0f;
    auto elem_row = [&](int r) { return SWAP ? 2 * (lane & 3) + (r & 1) : (lane >> 2) + 8 * (r >> 1); };
    auto elem_col = [&](int c, int j, int r) {
        const int base = (chunk0 + c) * 64;
        return SWAP ? base + 16 * j + 8 * (r >> 1) + (lane >> 2) : base + 8 * j + 2 * (lane & 3) + (r & 1);
    };

    uint32_t sc[CPW][8];     /* group scales of the current group, one half2 per n8 tile */
    /* Zero points of the current group: the lane's packed word per chunk, and
     * with one chunk per warp also its constants (qv_dq4_consts), cached; with
     * two the constants are rebuilt per tile, which keeps registers below 128. */
    uint32_t zw[CPW];
    uint32_t zc[CPW == 1 ? 8 : 1][2];
    int cur_grp = -1;

    /* One k16 tile: tl is its index in the slice, w the lane's weight words. */
    auto compute_tile = [&](int tl, const uint4 (&w)[VW]) {
        uint32_t af[4];
        {
            const unsigned addr = a_addr0 + tl * a_step;
            if constexpr (SWAP)
                asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                             : "=r"(af[0]), "=r"(af[1])
                             : "r"(addr));
            else
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(af[0]), "=r"(af[1]), "=r"(af[2]), "=r"(af[3])
                             : "r"(addr));
        }
        if (grouped) {
            const int grp = (kt_begin + tl) >> p.g_shift;
            if (grp != cur_grp) {
                cur_grp = grp;
                const unsigned char *srow = smem + L.s_off + (grp - grp_begin) * BN * 2;
#pragma unroll
                for (int c = 0; c < CPW; c++) {
                    const int local = (warp * CPW + c) * 64; /* the chunk's first column in the block */
                    /* scale_perm puts column 8*j8 + lane/4 of a chunk at position
                     * 8*(lane/4) + j8: one 16-byte vector per lane. A single group
                     * (k == g) is stored in the channel order instead. */
#ifdef QV_MUTANT_gpu_wo_small_scale_perm
                    /* Mutant (class 2): scale_perm_single read where scale_perm was stored. */
                    const bool single = true;
#else
                    const bool single = p.grp_single;
#endif
                    if (!single) {
                        const uint4 sv = *reinterpret_cast<const uint4 *>(srow + (local + 8 * (lane >> 2)) * 2);
                        const uint32_t s4[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
                        for (int j8 = 0; j8 < 8; j8++)
                            sc[c][j8] = qv_h2<IS_BF16>::dup((s4[j8 >> 1] >> (16 * (j8 & 1))) & 0xFFFFu);
                    } else {
                        const uint16_t *s16 = reinterpret_cast<const uint16_t *>(srow);
#pragma unroll
                        for (int j8 = 0; j8 < 8; j8++)
                            sc[c][j8] = qv_h2<IS_BF16>::dup(s16[single_perm_index(local + 8 * j8 + (lane >> 2))]);
                    }
                    if (WT == WT_FP8) {
                        /* Exact: s * 2^s_pow2 * 2^-s_pow2 = s, a half-precision value. */
#pragma unroll
                        for (int j8 = 0; j8 < 8; j8++) sc[c][j8] = qv_h2<IS_BF16>::mul(sc[c][j8], p.unbias_h2);
                    }
                    if (kZp) {
                        zw[c] = *reinterpret_cast<const uint32_t *>(
                            smem + L.z_off + (grp - grp_begin) * (BN / 8) * 4 + (local / 8 + (lane >> 2)) * 4);
                        if constexpr (CPW == 1) {
#pragma unroll
                            for (int j8 = 0; j8 < 8; j8++) qv_dq4_consts<IS_BF16>(zero_nibble(zw[0], j8), zc[j8]);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int c = 0; c < CPW; c++) {
            const uint4 *wc = w + c * T::vecs;
            const uint32_t bw[8] = {wc[0].x, wc[0].y, wc[0].z, wc[0].w,
                                    T::vecs > 1 ? wc[T::vecs - 1].x : 0u, T::vecs > 1 ? wc[T::vecs - 1].y : 0u,
                                    T::vecs > 1 ? wc[T::vecs - 1].z : 0u, T::vecs > 1 ? wc[T::vecs - 1].w : 0u};
            /* The B fragment of n8 tile j8: the exact codes, times the group
             * scale with one rounding (dequant.cuh). */
            auto dequant = [&](int j8, uint32_t bf[2]) {
                if (WT == WT_INT4) {
                    uint32_t sym[2];
                    qv_dq4_consts<IS_BF16>(8u, sym); /* "q+8" codes: zero point 8 */
                    qv_dq4<IS_BF16>(bw[j8 >> 1] >> (8 * (j8 & 1)), sym, bf);
                } else if (WT == WT_INT4_ZP) {
                    if constexpr (CPW == 1) {
                        qv_dq4<IS_BF16>(bw[j8 >> 1] >> (8 * (j8 & 1)), zc[j8], bf);
                    } else {
                        uint32_t zk[2];
                        qv_dq4_consts<IS_BF16>(zero_nibble(zw[c], j8), zk);
                        qv_dq4<IS_BF16>(bw[j8 >> 1] >> (8 * (j8 & 1)), zk, bf);
                    }
                } else if (WT == WT_INT8) {
                    qv_dq8<IS_BF16>(bw[j8], bf);
                } else {
                    qv_dqfp8<IS_BF16>(bw[j8], bf);
                }
                if (grouped) {
                    bf[0] = qv_h2<IS_BF16>::mul(bf[0], sc[c][j8]);
                    bf[1] = qv_h2<IS_BF16>::mul(bf[1], sc[c][j8]);
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
    };

    /* 3. The K loop: slot j of the ring holds tile t + j; it is consumed, then
     * refilled with tile t + j + depth before the consumed tile's math, so
     * `depth` tiles stay in flight. */
    if (active) {
        for (int t = 0; t < nt; t += depth) {
#pragma unroll
            for (int j = 0; j < depth; j++) {
                if (t + j < nt) {
                    uint4 cur[VW];
#pragma unroll
                    for (int v = 0; v < VW; v++) cur[v] = buf[j][v];
                    if (t + j + depth < nt)
#pragma unroll
                        for (int v = 0; v < VW; v++)
                            if (chunk_on[v / T::vecs])
                                buf[j][v] = ld_stream16(bp + (int64_t)(t + j + depth) * row_vecs +
                                                        (v / T::vecs) * T::chunk_vecs + v % T::vecs);
                    compute_tile(t + j, cur);
                }
            }
        }
    }

    /* 4. Split-K: publish this slice's partials; the last block of the tile sums them. */
    if (p.splits > 1) {
        float *part = p.partial + (int64_t)blockIdx.y * p.m * p.n;
#pragma unroll
        for (int c = 0; c < CPW; c++)
            if (chunk_on[c])
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int r = 0; r < 4; r++)
                        if (elem_row(r) < p.m)
                            __stcg(part + (int64_t)elem_row(r) * p.n + elem_col(c, j, r), acc[c][j][r]);
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            int *cnt = p.counters + blockIdx.x;
            const int old = atomicAdd(cnt, 1);
            s_is_last = old == p.splits - 1;
            /* The last arrival resets the counter for the next launch (gemm.h). */
            if (s_is_last) atomicExch(cnt, 0);
        }
        __syncthreads();
        if (!s_is_last) return;
        __threadfence();
        /* Slices 0..S-1 added in that order, whichever block arrived last. Two
         * slices' loads are issued before their adds, so the sum waits for one
         * L2 round trip per two slices, not one per load. Rows >= m and chunks
         * past N have no partials. */
        const int64_t slice = (int64_t)p.m * p.n;
#pragma unroll
        for (int c = 0; c < CPW; c++) {
            if (!chunk_on[c]) continue;
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    if (elem_row(r) < p.m)
                        acc[c][j][r] = __ldcg(p.partial + (int64_t)elem_row(r) * p.n + elem_col(c, j, r));
            for (int z = 1; z < p.splits; z += 2) {
                float v[2][NT][4];
#pragma unroll
                for (int u = 0; u < 2; u++)
#pragma unroll
                    for (int j = 0; j < NT; j++)
#pragma unroll
                        for (int r = 0; r < 4; r++)
                            if (z + u < p.splits && elem_row(r) < p.m)
                                v[u][j][r] = __ldcg(p.partial + (z + u) * slice + (int64_t)elem_row(r) * p.n +
                                                    elem_col(c, j, r));
#pragma unroll
                for (int u = 0; u < 2; u++)
#pragma unroll
                    for (int j = 0; j < NT; j++)
#pragma unroll
                        for (int r = 0; r < 4; r++)
                            if (z + u < p.splits && elem_row(r) < p.m)
                                acc[c][j][r] = add_partial(acc[c][j][r], v[u][j][r]);
            }
        }
    }

    /* 5. Epilogue: the fp32 channel/tensor scale, one rounding, rows < m and
     * columns < n only. */
    uint16_t *out = static_cast<uint16_t *>(p.c);
#pragma unroll
    for (int c = 0; c < CPW; c++) {
        if (!chunk_on[c]) continue;
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int row = elem_row(r), col = elem_col(c, j, r);
                if (row >= p.m) continue;
                float y = acc[c][j][r];
                if (p.scale_mode != SC_GROUP) y = y * epilogue_scale(p, col);
                out[(int64_t)row * p.n + col] = (uint16_t)(qv_h2<IS_BF16>::pack(y, 0.0f) & 0xFFFFu);
            }
    }
}

/* ---- host side ---- */

/* The split-K plan assumes the H200's 132 SMs instead of asking the device, so
 * that the plan, the fp32 summation order and every output bit depend on the
 * shape alone (as in wonly.cu). */
constexpr int kPlanSms = 132;
/* Per-block fixed cost in k16 tiles for the plan: pipeline fill, staging of A
 * and the scales, and the split-K hand-off, roughly what 8 tiles of streaming
 * take; it keeps the plan from choosing many waves of very short slices. */
constexpr int kPlanFillTiles = 8;

struct small_plan {
    int n_blocks, tiles_per_split, splits, groups_max;
    int smem;
    size_t partial_off, bytes;
};

int weight_type(const qv_variant *v)
{
    switch (v->layout) {
    case QV_LAYOUT_MARLIN_W4: return WT_INT4;
    case QV_LAYOUT_MARLIN_W4_ZP: return WT_INT4_ZP;
    case QV_LAYOUT_MARLIN_W8: return WT_INT8;
    default: return WT_FP8;
    }
}

/* Group rows one slice of tps tiles can touch: slices start at multiples of
 * the group length whenever a group fits in a slice (see make_plan). */
int groups_for(const qv_variant *v, int tps)
{
    if (v->scale_layout != QV_SCALE_GROUP) return 0;
    const int gt = v->g / 16;
    return gt <= tps ? (tps + gt - 1) / gt : 2;
}

/* The plan of one shape for blocks of 512 * cpw columns. */
small_plan make_plan(const qv_variant *v, int m, int n, int k, int cpw)
{
    small_plan pl;
    const bool grouped = v->scale_layout == QV_SCALE_GROUP;
    const int gt = grouped ? v->g / 16 : 1;
    const int tiles = k / 16;
    const int bn = 64 * kWarps * cpw;
    pl.n_blocks = (n + bn - 1) / bn;
    /* The longest slice whose A rows and group scales fit the budget. */
    int tps_max = kMaxTilesPerSplit;
    while (tps_max > 1 &&
           (size_t)small_smem(m, tps_max, groups_for(v, tps_max), grouped, v->zero_point, bn).bytes > kSmemBudget)
        tps_max /= 2;
    /* Estimated time = waves x (tiles per slice + fixed cost); ties keep fewer
     * slices. Slices are whole groups when a group fits in one, so a slice
     * never straddles more group rows than groups_for counts. */
    const int64_t slots = (int64_t)kPlanSms * kBlocksPerSm;
    int64_t best = -1;
    int best_tps = tiles;
    for (int sp = 1; sp <= tiles; sp++) {
        int tps = (tiles + sp - 1) / sp;
        if (grouped && gt <= tps_max) tps = (tps + gt - 1) / gt * gt;
        if (tps > tps_max) continue;
        const int splits = (tiles + tps - 1) / tps;
        const int64_t waves = ((int64_t)pl.n_blocks * splits + slots - 1) / slots;
        const int64_t cost = waves * (tps + kPlanFillTiles);
        if (best < 0 || cost < best) best = cost, best_tps = tps;
    }
    pl.tiles_per_split = best_tps;
    pl.splits = (tiles + best_tps - 1) / best_tps;
    pl.groups_max = groups_for(v, best_tps);
    pl.smem = small_smem(m, best_tps, pl.groups_max, grouped, v->zero_point, bn).bytes;
    /* Counters: one per 64 columns reserved (wonly_small.cuh), this path uses
     * one per block. */
    /* After the counters area every path shares (wonly_small.cuh). */
    pl.partial_off = qv_wonly_counters_bytes(n);
    pl.bytes = pl.splits > 1 ? pl.partial_off + (size_t)pl.splits * (size_t)m * (size_t)n * sizeof(float) : 0;
    return pl;
}

template <int WT, bool BF, bool SWAP, int CPW>
qv_status launch_kernel(const small_params &p, dim3 grid, int smem, cudaStream_t stream)
{
    static bool attr_set = false;
    if (!attr_set) {
        QV_CUDA_TRY(cudaFuncSetAttribute(k_gemm_wonly_small<WT, BF, SWAP, CPW>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBudget),
                    "cudaFuncSetAttribute (small-M weight-only kernel shared memory)");
        /* The largest carveout, so the two blocks per SM the plan counts on fit. */
        QV_CUDA_TRY(cudaFuncSetAttribute(k_gemm_wonly_small<WT, BF, SWAP, CPW>,
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         (int)cudaSharedmemCarveoutMaxShared),
                    "cudaFuncSetAttribute (small-M weight-only kernel carveout)");
        attr_set = true;
    }
    k_gemm_wonly_small<WT, BF, SWAP, CPW><<<grid, kThreads, smem, stream>>>(p);
    QV_CUDA_TRY(cudaGetLastError(), "small-M weight-only kernel launch");
    return QV_OK;
}

/* The instantiations: m16 and swapped orientations with one chunk per warp,
 * and the swapped one with two chunks per warp for 4-bit weights. */
template <bool BF>
qv_status launch_wt(int wt, bool swap, int cpw, const small_params &p, dim3 grid, int smem, cudaStream_t stream)
{
    if (swap && cpw == 2) {
        if (wt == WT_INT4) return launch_kernel<WT_INT4, BF, true, 2>(p, grid, smem, stream);
        return launch_kernel<WT_INT4_ZP, BF, true, 2>(p, grid, smem, stream);
    }
    if (swap) {
        switch (wt) {
        case WT_INT4: return launch_kernel<WT_INT4, BF, true, 1>(p, grid, smem, stream);
        case WT_INT4_ZP: return launch_kernel<WT_INT4_ZP, BF, true, 1>(p, grid, smem, stream);
        case WT_INT8: return launch_kernel<WT_INT8, BF, true, 1>(p, grid, smem, stream);
        default: return launch_kernel<WT_FP8, BF, true, 1>(p, grid, smem, stream);
        }
    }
    switch (wt) {
    case WT_INT4: return launch_kernel<WT_INT4, BF, false, 1>(p, grid, smem, stream);
    case WT_INT4_ZP: return launch_kernel<WT_INT4_ZP, BF, false, 1>(p, grid, smem, stream);
    case WT_INT8: return launch_kernel<WT_INT8, BF, false, 1>(p, grid, smem, stream);
    default: return launch_kernel<WT_FP8, BF, false, 1>(p, grid, smem, stream);
    }
}

/* QVET_WO_SMALL (wonly_small.cuh): which path and configuration run. */
enum { MODE_OFF = 0, MODE_AUTO, MODE_M16, MODE_ALL16, MODE_SWAP, MODE_SWAP2 };

/* The K from which the default (MODE_AUTO) sends M <= 8 to the swapped kernel:
 * on the H200 it beat the general kernel on every Llama-3-70B block (K = 8192
 * and 28672: by 2-15 %) and lost on Llama-2-7B (K = 4096 and 11008: by 1.5-15 %),
 * measured 2026-11-29 at M = 1, 4, 8 (bench/RESULTS.md). */
constexpr int kAutoMinK = 8192;

int small_mode(void)
{
    const char *s = getenv("QVET_WO_SMALL");
    if (!s) return MODE_AUTO;
    if (!strcmp(s, "0")) return MODE_OFF;
    if (!strcmp(s, "1")) return MODE_M16;
    if (!strcmp(s, "16")) return MODE_ALL16;
    if (!strcmp(s, "swap")) return MODE_SWAP;
    if (!strcmp(s, "swap2")) return MODE_SWAP2;
    return MODE_AUTO;
}

} /* namespace */

int qv_wonly_small_wanted(int m, int k)
{
    const int mode = small_mode();
    if (mode == MODE_OFF || m < 1) return 0;
    if (mode == MODE_AUTO && k < kAutoMinK) return 0;
    return m <= (mode == MODE_ALL16 ? QV_WO_SMALL_MAX_M : QV_WO_SMALL_DEFAULT_MAX_M);
}

size_t qv_wonly_small_workspace(const qv_variant *v, int m, int n, int k)
{
    if (m < 1 || m > QV_WO_SMALL_MAX_M) return 0;
    /* Room for every configuration QVET_WO_SMALL can select. */
    const size_t one = make_plan(v, m, n, k, 1).bytes, two = make_plan(v, m, n, k, 2).bytes;
    return one > two ? one : two;
}

qv_status qv_wonly_small_launch(const qv_variant *v, const qv_gemm_args *a)
{
    QV_ASSERT(a->m >= 1 && a->m <= QV_WO_SMALL_MAX_M, "qv_launch_wonly sends only M <= 16 here");
    const int wt = weight_type(v);
    const int mode = small_mode();
    const bool swap = (mode == MODE_AUTO || mode == MODE_SWAP || mode == MODE_SWAP2) && a->m <= 8;
    const int cpw = swap && mode == MODE_SWAP2 && (wt == WT_INT4 || wt == WT_INT4_ZP) ? 2 : 1;
    const small_plan pl = make_plan(v, a->m, a->n, a->k, cpw);
    if (pl.bytes > a->workspace_bytes || (pl.bytes && !a->workspace))
        return qv_fail(QV_ERR_USAGE, "%s: workspace of %zu bytes given, %zu needed (qv_workspace_wonly)", v->name,
                       a->workspace_bytes, pl.bytes);
    unsigned char *ws = (unsigned char *)a->workspace;
    small_params p;
    p.a = (const uint16_t *)a->a;
    p.perm = v->act_order ? a->perm : NULL;
    p.b = (const uint4 *)a->b;
    p.scales = a->scales;
    p.zeros = (const uint32_t *)a->zeros;
    p.c = a->c;
    p.partial = pl.splits > 1 ? (float *)(ws + pl.partial_off) : NULL;
    p.counters = pl.splits > 1 ? (int *)ws : NULL;
    p.m = a->m;
    p.n = a->n;
    p.k = a->k;
    p.tiles_per_split = pl.tiles_per_split;
    p.splits = pl.splits;
    p.scale_mode = v->scale_layout == QV_SCALE_GROUP ? SC_GROUP
                   : v->scale_layout == QV_SCALE_CHANNEL ? SC_CHANNEL : SC_TENSOR;
    p.scale_fmt = v->sfmt == QV_FMT_F32 ? SF_F32 : v->sfmt == QV_FMT_BF16 ? SF_BF16 : SF_F16;
    p.g_shift = 0;
    if (v->scale_layout == QV_SCALE_GROUP)
        for (int t = v->g / 16; t > 1; t >>= 1) p.g_shift++;
    /* layout.h: a single group (g == K) is stored in the channel order. */
    p.grp_single = v->scale_layout == QV_SCALE_GROUP && a->k == v->g;
    p.groups_max = pl.groups_max;
    /* layout.h, MARLIN_FP8: the packed scales hold s * 2^8 (f16) or s * 2^120
     * (bf16); the e4m3 conversion here is exact (cvt), so the scales are
     * multiplied by 2^-8 (2^-120), exactly. 0x1C00 is fp16 2^-8, 0x0380 bf16
     * 2^-120, 0x3C00 / 0x3F80 are 1.0. */
    const bool fp8 = v->layout == QV_LAYOUT_MARLIN_FP8, bf = v->afmt == QV_FMT_BF16;
    p.unbias_f32 = fp8 ? (bf ? 0x1p-120f : 0x1p-8f) : 1.0f;
    p.unbias_h2 = fp8 ? (bf ? 0x03800380u : 0x1C001C00u) : (bf ? 0x3F803F80u : 0x3C003C00u);
    const dim3 grid(pl.n_blocks, pl.splits, 1);
    if (pl.splits > 65535)
        return qv_fail(QV_ERR_SHAPE, "%s: k=%d needs more than 65535 K slices", v->name, a->k);
    cudaStream_t stream = (cudaStream_t)a->stream;
    return bf ? launch_wt<true>(wt, swap, cpw, p, grid, pl.smem, stream)
              : launch_wt<false>(wt, swap, cpw, p, grid, pl.smem, stream);
}
