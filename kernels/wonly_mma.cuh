/* wonly_mma.cuh: the main loop of the weight-only m16n8k16 mma GEMM, shared
 * by the dense kernel (wonly.cu, k_gemm_wonly_mma) and the grouped MoE kernel
 * (moe_grouped.cu, k_moe_gemm_w4a16_mma and k_moe_gemm_fp4_mma): the block
 * geometry, the shared-memory stage layout, the cp.async ring, the dequant of
 * Marlin-packed weights and the mma issue, up to the two K warps' sums meeting
 * in shared memory. Rule: the caller decides only where A's rows come from,
 * which B, scales and zero points it reads and what its mutant hooks do. */
#ifndef QVET_KERNELS_WONLY_MMA_CUH
#define QVET_KERNELS_WONLY_MMA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "dequant.cuh"
#include "mma.cuh"
#include "wonly_common.cuh"

namespace {

constexpr int kThreads = 256;  /* 8 warps */
constexpr int kWarpsN = 4;     /* warps along N, 64 columns each (one Marlin chunk) */
constexpr int kWarpsK = 2;     /* warps along K inside a stage */
constexpr int kBN = 64 * kWarpsN;
/* cp.async ring depth: stages-1 in flight while one is used. 32-row tiles
 * keep 3 so that two blocks fit in one SM's 227 KiB of shared memory. */
template <int MB> struct ring {
    static constexpr int stages = MB == 2 ? 3 : 4;
};

/* k16 tiles each warp handles per stage: 4 for 4-bit and 2 for 8-bit weights,
 * so a stage always holds 16 KiB of packed B for the block. */
template <int WT> struct wt_traits {
    static constexpr bool four = wt_is_4bit(WT);
    static constexpr int bits = four ? 4 : 8;
    static constexpr int kpw = four ? 4 : 2;
    static constexpr int ks = kpw * kWarpsK;                /* k16 tiles per stage */
    static constexpr int lane_bytes = bits * 4;              /* B bytes per lane per k16 tile */
    static constexpr int chunk_words = 16 * 64 * bits / 32;  /* int32 words per (k16, 64 cols) */
};

/* Shared-memory byte layout of one stage. ZP_ROW: the stage carries a row of
 * packed zero points per k16 tile (wonly.cu keeps it for every code family,
 * so that all of them share one layout; the grouped kernel has none). */
template <int WT, int MB, bool ZP_ROW> struct stage_layout {
    static constexpr int ks = wt_traits<WT>::ks;
    static constexpr int a_row_bytes = ks * 16 * 2;
    static constexpr int a_bytes = 16 * MB * a_row_bytes;
    static constexpr int b_bytes = ks * kWarpsN * 32 * wt_traits<WT>::lane_bytes;
    static constexpr int s_row = wt_is_fp4(WT) ? kBN : kBN * 2; /* bytes of one k16 tile's scale row */
    static constexpr int s_bytes = ks * s_row;             /* one fp16/bf16 (FP4: byte) scale row per k16 tile */
    static constexpr int z_bytes = ZP_ROW ? ks * (kBN / 8) * 4 : 0; /* one packed zero-point row per k16 tile */
    static constexpr int a_off = 0;
    static constexpr int b_off = a_off + a_bytes;
    static constexpr int s_off = b_off + b_bytes;
    static constexpr int z_off = s_off + s_bytes;
    static constexpr int bytes = z_off + z_bytes;
    static constexpr int red_bytes = kWarpsN * MB * 8 * 4 * 32 * 4; /* cross-warp K reduction */
    static constexpr int stages = ring<MB>::stages;
    static constexpr int total = (stages * bytes > red_bytes) ? stages * bytes : red_bytes;
};

/* Float index of (warp column wn, m16 tile mt, n8 tile j8, accumulator r,
 * lane) in the cross-warp K reduction area (the ring's shared memory). */
template <int MB> __device__ __forceinline__ int red_index(int wn, int mt, int j8, int r, int lane)
{
    return (((wn * MB + mt) * 8 + j8) * 4 + r) * 32 + lane;
}

/* The main loop as it is declared. A kernel passes a struct derived from this
 * one whose members hide the ones it mutates (mutants/README.md: a switch
 * stays in the kernel file it was placed in). */
struct mma_hooks {
    static constexpr bool stage_barrier = true;           /* the barrier after cp.async.wait_group */
    static constexpr bool k_tail = true;                  /* the partial last stage of a K slice is computed */
    static constexpr bool fp4_scale_every_tile = true;    /* FP4 block scales reloaded at every group change */
    /* The scale group of k16 tile kt. */
    static __device__ __forceinline__ int scale_group(int kt, int g_shift) { return kt >> g_shift; }
    /* Zero point of n8 tile j8 from a packed word: packed position j8 sits at
     * nibble j8/2 + 4*(j8%2) (interleave [0,2,4,6,1,3,5,7]). */
    static __device__ __forceinline__ uint32_t zp_code(uint32_t zw, int j8)
    {
        return (zw >> (4 * ((j8 >> 1) + 4 * (j8 & 1)))) & 0xFu;
    }
};

/* What one block's main loop reads, for one (K slice of one) GEMM. */
struct mma_operands {
    const uint16_t *a;         /* fp16/bf16 codes; row r of the block is at a_row(r) * k (row source) */
    const uint32_t *b;         /* Marlin-packed weights of this GEMM, (k/16, 2n) or (k/16, 4n) int32 */
    const void *scales;        /* group scales of this GEMM: (k/g, n) f16/bf16 (FP4: bytes), or NULL */
    const uint32_t *zeros;     /* (k/g, n/8) packed zero points (WT_INT4_ZP), else NULL */
    int n, k;
    int kt_begin, kt_end;      /* the block's k16 tiles [kt_begin, kt_end) */
    bool grouped;              /* scale_mode == SC_GROUP: scales in the dequant */
    int g_shift;               /* log2(g / 16) */
    int grp_single;            /* 1: one group stored in the channel permutation */
    uint32_t unbias_h2;        /* fp8: the exponent bias folded into the scales (wo_set_scale_fields) */
};

/* The main loop of a block of kThreads threads owning the 16 MB x kBN output
 * tile at column n0 over k16 tiles [o.kt_begin, o.kt_end): fills acc with the
 * fp32 sums of this thread's warp (wk = 0 or 1: the first or second half of
 * every stage's k16 tiles, see compute_stage) and leaves warp wk = 1's sums in shared
 * memory at red_index for warp wk = 0 to add (smem is free for that once this
 * returns: every copy has landed and every thread is past the barrier).
 * rows(row, used, valid) gives the A row of the block's row `row` (0..BM-1)
 * and sets valid (false: a zero row, nothing is read); `used` is false for
 * the threads whose copy slot is past the tile (their row is not read). */
template <int WT, int MB, bool IS_BF16, class L, class H, class Rows>
__device__ __forceinline__ bool wo_mma_mainloop(unsigned char *smem, const mma_operands &o, int n0, Rows rows,
                                                float (&acc)[MB][8][4])
{
    using T = wt_traits<WT>;
    constexpr int BM = 16 * MB;

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int wn = warp % kWarpsN;
    const int wk = warp / kWarpsN;
    const int n_chunks = o.n / 64;
    const bool warp_active = (n0 / 64 + wn) < n_chunks;
    const int kt_begin = o.kt_begin;
    const int kt_end = o.kt_end;
    const int n_steps = (kt_end - kt_begin + T::ks - 1) / T::ks;
    const bool grouped = o.grouped;
    const uint16_t *a16 = o.a;
    const int tid = threadIdx.x;

    /* Each thread's share of every stage's copies is fixed for the whole K
     * loop, so the offsets are computed once here; per stage only the k16 tile
     * index moves. A: BM rows x ks*2 chunks of 16 bytes, the chunk index
     * XOR-swizzled with the row so ldmatrix's 8 row addresses hit 8 different
     * banks. B: each lane's bytes of each (k16 tile, warp column chunk), in
     * order, so a warp reads 512 contiguous bytes. Scales: one row of 256
     * columns (32 chunks) per k16 tile; zero points: 32 words (8 chunks). */
    constexpr int a_chunks_row = T::ks * 2;
    constexpr int a_total = BM * a_chunks_row;
    constexpr int a_iters = (a_total + kThreads - 1) / kThreads;
    constexpr int b_parts = T::lane_bytes / 16;
    constexpr int b_total = T::ks * kWarpsN * 32 * b_parts;
    constexpr int b_iters = b_total / kThreads;
    static_assert(b_total % kThreads == 0, "B copies divide evenly among the threads");
    const int64_t b_row_words = (int64_t)n_chunks * T::chunk_words;
    int64_t a_src[a_iters];
    int a_dst[a_iters], a_tile[a_iters];
    bool a_valid[a_iters], a_used[a_iters];
#pragma unroll
    for (int i = 0; i < a_iters; i++) {
        const int c = tid + i * kThreads;
        const int row = c / a_chunks_row, ch = c % a_chunks_row;
        a_used[i] = c < a_total;
        bool valid;
        const int64_t arow = rows(row, a_used[i], valid);
        a_valid[i] = valid;
        a_src[i] = a_valid[i] ? arow * o.k + ch * 8 : 0;
        a_dst[i] = L::a_off + row * L::a_row_bytes + ((ch ^ (row & 7)) * 16);
        a_tile[i] = ch / 2;
    }
    int b_src[b_iters];  /* < 2^31: the launchers refuse N with 16 * N * bits / 32 >= 2^31 */
    int b_tile[b_iters];
    bool b_valid[b_iters];
#pragma unroll
    for (int i = 0; i < b_iters; i++) {
        const int c = tid + i * kThreads;
        const int part = c % b_parts, ln = (c / b_parts) % 32, w = (c / b_parts / 32) % kWarpsN;
        const int chunk = n0 / 64 + w;
        b_tile[i] = c / b_parts / 32 / kWarpsN;
        b_valid[i] = chunk < n_chunks;
        b_src[i] = chunk * T::chunk_words + ln * (T::lane_bytes / 4) + part * 4;
    }
    /* A scale row of 256 columns is 32 chunks of 16 bytes (fp16/bf16), or 16
     * (FP4's bytes). */
    constexpr int s_chunks = L::s_row / 16;
    const int s_tile = tid / s_chunks, s_ch = tid % s_chunks;
    const bool s_used = grouped && tid < T::ks * s_chunks && n0 / 64 + s_ch / (s_chunks / 4) < n_chunks;
    const int z_tile = tid / 8, z_ch = tid % 8;
    const bool z_used = grouped && WT == WT_INT4_ZP && tid < T::ks * 8 && n0 / 64 + z_ch / 2 < n_chunks;

    /* Issues the copies of pipeline step `step` into ring slot `slot`. */
    auto load_stage = [&](int step, int slot) {
        unsigned char *st = smem + slot * L::bytes;
        const int kt0 = kt_begin + step * T::ks;
#pragma unroll
        for (int i = 0; i < a_iters; i++)
            if (a_used[i] && kt0 + a_tile[i] < kt_end)
                qv_cp_async16(st + a_dst[i], a_valid[i] ? a16 + a_src[i] + (int64_t)kt0 * 16 : a16, a_valid[i]);
        const uint32_t *brow = o.b + (int64_t)kt0 * b_row_words;
#pragma unroll
        for (int i = 0; i < b_iters; i++)
            if (b_valid[i] && kt0 + b_tile[i] < kt_end)
                qv_cp_async16(st + L::b_off + (tid + i * kThreads) * 16,
                              brow + (int64_t)b_tile[i] * b_row_words + b_src[i], true);
        if (s_used && kt0 + s_tile < kt_end) {
            const int64_t grp = H::scale_group(kt0 + s_tile, o.g_shift);
            qv_cp_async16(st + L::s_off + tid * 16,
                          static_cast<const unsigned char *>(o.scales) +
                              (grp * o.n + n0) * (L::s_row / kBN) + s_ch * 16, true);
        }
        if (z_used && kt0 + z_tile < kt_end) {
            const int64_t grp = (kt0 + z_tile) >> o.g_shift;
            qv_cp_async16(st + L::z_off + tid * 16, o.zeros + grp * (o.n / 8) + n0 / 8 + z_ch * 4, true);
        }
    };

#pragma unroll
    for (int i = 0; i < MB; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.0f;

#pragma unroll
    for (int s = 0; s < L::stages - 1; s++) {
        if (s < n_steps) load_stage(s, s);
        qv_cp_async_commit();
    }

    uint32_t sc[8];         /* group scales of the current group, one half2 per n8 tile */
    uint32_t zc[8][2];      /* zero-point constants of the current group (qv_dq4_consts) */
    int cur_grp = -1;
    /* One warp's share of one stage: k16 tiles wk*kpw .. wk*kpw+kpw-1. */
    auto compute_stage = [&](const unsigned char *st, int kt0, auto full) {
#pragma unroll
        for (int uu = 0; uu < T::kpw; uu++) {
            const int u = wk * T::kpw + uu;
            if (!decltype(full)::value && kt0 + u >= kt_end) break;
            uint32_t af[MB][4];
#pragma unroll
            for (int mt = 0; mt < MB; mt++) {
                int row = mt * 16 + (lane & 15);
                int ch = u * 2 + (lane >> 4);
                qv_ldmatrix_x4(af[mt], st + L::a_off + row * L::a_row_bytes + ((ch ^ (row & 7)) * 16));
            }
            const uint4 *bsrc = reinterpret_cast<const uint4 *>(
                st + L::b_off + ((u * kWarpsN + wn) * 32 + lane) * T::lane_bytes);
            uint32_t bw[T::lane_bytes / 4];
#pragma unroll
            for (int q = 0; q < T::lane_bytes / 16; q++) {
                uint4 v = bsrc[q];
                bw[4 * q] = v.x;
                bw[4 * q + 1] = v.y;
                bw[4 * q + 2] = v.z;
                bw[4 * q + 3] = v.w;
            }
            /* Group scales of this lane's eight n8 tiles, reloaded only when the
             * group changes: positions 8*(lane/4)+j8 of the warp's 64-column
             * chunk (scale_perm puts column 8*j8 + lane/4 there), unless k == g
             * uses the channel permutation. */
            if (grouped) {
                const int grp = (kt0 + u) >> o.g_shift;
                if (grp != cur_grp && (H::fp4_scale_every_tile || !wt_is_fp4(WT) || uu == 0)) {
                    cur_grp = grp;
                    if (wt_is_fp4(WT)) {
                        /* One byte per column: the chunk's 8 bytes at 8 (lane/4). */
                        const uint2 sv = *reinterpret_cast<const uint2 *>(st + L::s_off + u * L::s_row + wn * 64 +
                                                                          8 * (lane >> 2));
                        wo_fp4_lane_scales<WT, IS_BF16>(sv, sc);
                    } else if (!o.grp_single) {
                        uint4 sv = *reinterpret_cast<const uint4 *>(st + L::s_off + u * kBN * 2 +
                                                                  (wn * 64 + 8 * (lane >> 2)) * 2);
                        uint32_t s4[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
                        for (int j8 = 0; j8 < 8; j8++)
                            sc[j8] = qv_h2<IS_BF16>::dup((s4[j8 >> 1] >> (16 * (j8 & 1))) & 0xFFFFu);
                    } else {
                        const uint16_t *srow = reinterpret_cast<const uint16_t *>(st + L::s_off + u * kBN * 2);
#pragma unroll
                        for (int j8 = 0; j8 < 8; j8++)
                            sc[j8] = qv_h2<IS_BF16>::dup(srow[single_perm_index(wn * 64 + 8 * j8 + (lane >> 2))]);
                    }
                    if (WT == WT_FP8) {
                        /* Exact: s * 2^s_pow2 * 2^-s_pow2 = s, a half-precision value. */
#pragma unroll
                        for (int j8 = 0; j8 < 8; j8++) sc[j8] = qv_h2<IS_BF16>::mul(sc[j8], o.unbias_h2);
                    }
                    if (WT == WT_INT4_ZP) {
                        const uint32_t zw = *reinterpret_cast<const uint32_t *>(
                            st + L::z_off + u * (kBN / 8) * 4 + (wn * 8 + (lane >> 2)) * 4);
#pragma unroll
                        for (int j8 = 0; j8 < 8; j8++) qv_dq4_consts<IS_BF16>(H::zp_code(zw, j8), zc[j8]);
                    }
                }
            }
#pragma unroll
            for (int j8 = 0; j8 < 8; j8++) {
                uint32_t bf[2];
                wo_dq_word_scaled<WT, IS_BF16>(bw, j8, zc[j8], sc[j8], grouped, bf);
#pragma unroll
                for (int mt = 0; mt < MB; mt++) qv_mma_16816<IS_BF16>(acc[mt][j8], af[mt], bf);
            }
        }
    };

    for (int step = 0; step < n_steps; step++) {
        qv_cp_async_wait<L::stages - 2>();
        if (H::stage_barrier) __syncthreads();
        /* The slot refilled here was read in step-1, which every warp finished
         * before the barrier above. */
        int next = step + L::stages - 1;
        if (next < n_steps) load_stage(next, next % L::stages);
        qv_cp_async_commit();

        const unsigned char *st = smem + (step % L::stages) * L::bytes;
        const int kt0 = kt_begin + step * T::ks;
        if (!warp_active) continue;
        /* Full stages run without per-tile bounds checks, so the compiler can
         * issue all of a warp's shared-memory loads of the stage up front; only
         * a slice's last stage can be partial. */
        if (kt0 + T::ks <= kt_end)
            compute_stage(st, kt0, std::true_type());
        else if (H::k_tail)
            compute_stage(st, kt0, std::false_type());
    }
    qv_cp_async_wait<0>();
    __syncthreads();

    /* Cross-warp K reduction in a fixed order: warp wk=0 adds wk=1's sums. */
    float *red = reinterpret_cast<float *>(smem);
    if (wk == 1 && warp_active) {
#pragma unroll
        for (int mt = 0; mt < MB; mt++)
#pragma unroll
            for (int j8 = 0; j8 < 8; j8++)
#pragma unroll
                for (int r = 0; r < 4; r++) red[red_index<MB>(wn, mt, j8, r, lane)] = acc[mt][j8][r];
    }
    __syncthreads();
    return wk == 0 && warp_active;
}

} /* namespace */

#endif
