/* qqq_wg.cu: QQQ W4A8 from M = qv_launch_opts.aq_wg_min_m on Hopper (sm_90a), channelwise
 * and per group, in the published QQQ layouts (layout.h QQQ_W4_*): Y (m, n) =
 * A (m, k) x W (k, n) with A int8 per token, computed as the transposed
 * product Y^T = W^T . A^T on integer wgmma (m64nNk32, s8 x s8 -> s32):
 *  - the weights are the wgmma A operand, 64 output columns x 32 k per
 *    warpgroup, made into int8 in registers straight from the packed words:
 *    wgmma's register A fragment of one warp is the m16n8k32 A fragment, whose
 *    four registers are the 8-bit B fragments of a QQQ lane's two n8 tiles
 *    (rows g and g + 8) in two consecutive k16 rows;
 *  - the activations are the wgmma B operand, 256, 128, 64, 32 or 16 tokens x 32 k
 *    read from shared memory through a matrix descriptor, K-major with the
 *    128-byte swizzle (one 128-byte row holds a stage's 128 k).
 * No int8 copy of the weights is ever written (the cuBLASLt path of aq_lt.cu
 * writes one per launch).
 *
 * Declared arithmetic (registry rows qqq-w4a8-*, golden/README.md), the same
 * function as aq_gemm.cuh's kernel, bit for bit:
 *  - channelwise: each nibble seen as 16 q in an int8 (aq_qqq_ch_hi/lo);
 *  - per group: w8 = rne((q - 8) s_group) in one fp16 FMA (aq_qqq_group_dq);
 *  - acc = A . w8 exact in int32 (the registry bounds K max|a| max|w| below
 *    2^31), stream-K parts added as int32, so the order never matters;
 *  - D = fp16_rne((float(acc) * s_ch) * s_tok), each product RN
 *    (aq_scale_out).
 *
 * Structure: wg_common.cuh's persistent grid, one producer warpgroup (one
 * thread issues every tensor-map copy: a stage's 128 k of activations, its
 * 8 k16 rows of packed weights, and for per-group rows the stage's one group
 * row of fp16 scales, since g is a multiple of 128) and two consumer
 * warpgroups, each the A operand of half the tile's columns: per k32 step
 * they read their lanes' words of two k16 rows, make the int8 fragments and
 * issue the wgmma, two groups in flight, releasing a stage once the groups
 * that read it have completed. */
#include <atomic>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aq_gemm.cuh"
#include "async_copy.cuh"
#include "func_attr.cuh"
#include "qqq_wg.cuh"
#include "internal/gpu.h"
#include "wg_common.cuh"

namespace {

constexpr int kKs = 8;        /* k16 rows per stage: 128 int8 = one 128-byte swizzle row */
constexpr int kMaxStages = 8;
constexpr int kChunkBytes = 512; /* one k16 x 64-column tile of packed nibbles: 32 lanes x 16 bytes */

std::atomic<long long> g_runs(0);

/* Shared-memory byte layout: the ring's barriers in a 1024-byte header, then
 * the stages. A stage holds the activations (bx rows of 128 bytes, on a
 * swizzle atom), then its kKs k16 rows of the block's packed weights cut into
 * segments of at most 2 KiB (byte b of k16 row u at (b / seg_bytes) kKs
 * seg_bytes + u seg_bytes + b % seg_bytes, one tensor-map box per segment),
 * then, per group, the stage's group row of bn fp16 scales. After the ring,
 * the epilogue's staging area (wg_common.cuh, wg_epi_area). */
template <int TPW, int BX, bool GROUP> struct q_layout {
    using C = tile_cfg<TPW, BX>;
    static constexpr int a_bytes = C::bx * 128;
    static constexpr int row_bytes = C::chunks * kChunkBytes;
    using G = wg_segments<row_bytes, kChunkBytes>;
    static constexpr int seg_bytes = G::seg_bytes;
    static constexpr int n_seg = G::n_seg;
    static constexpr int w_bytes = kKs * row_bytes;
    static constexpr int s_bytes = GROUP ? C::bn * 2 : 0;
    static constexpr int a_off = 0;
    static constexpr int w_off = a_off + a_bytes;
    static constexpr int s_off = w_off + w_bytes;
    using E = wg_epi_area<C>;
    static constexpr int epi_rows = E::rows;
    static constexpr int epi_chunk_bytes = E::chunk_bytes;
    using R = wg_ring<s_off + s_bytes, kMaxStages, E::bytes>;
    static constexpr int bytes = R::bytes;
    static constexpr int header = R::header;
    static constexpr int stages = R::stages;
    static constexpr int epi_off = R::extra_off;
    static constexpr int total = R::total;
};

struct qwg_params {
    aq_params aq;            /* shape, scales (aq_finish's fields), output */
    const uint32_t *b;       /* QQQ-packed weights, (k/16, 2n) int32 */
    int g_steps;             /* per group: stages per group (g / 128) */
    int *counters;           /* stream-K tail: one arrival counter per tail tile, zero between launches */
    int *partial;            /* stream-K tail: 2 x grid slots of one tile's int32 accumulators */
    int c_tma;               /* 1: C is 16-byte aligned and the epilogue stores it through c_map */
};

/* D (64 x N, int32) += A (64 x 32 int8, registers) . B (32 x N int8, shared
 * memory through desc_b), wgmma m64nNk32, exact (no .satfinite: the registry's
 * bound keeps every sum inside int32). a[0..3]: this warp's 16 rows as the
 * m16n8k32 A fragment (rows g, g + 8 x k 4t..4t+3, then the same rows x k
 * 16 + 4t..); d as in the fp32 form: d[4j + {0,1}] row lane/4, tokens 8j +
 * 2(lane%4) + {0,1}; d[4j + {2,3}] row lane/4 + 8. */
template <int N> struct wg_mma_s8;

#define WG_MMA_S8_SPEC(N, REGS, DOPS)                                                                                \
    template <> struct wg_mma_s8<N> {                                                                                \
        static __device__ __forceinline__ void run(int d[N / 2], const uint32_t a[4], uint64_t desc_b)               \
        {                                                                                                            \
            asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k32.s32.s8.s8 " REGS ", 1;\n"                      \
                         : DOPS                                                                                      \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));                                 \
        }                                                                                                            \
    };

WG_MMA_S8_SPEC(16, WG_REGS16, WG_D16("+r"))
WG_MMA_S8_SPEC(32, WG_REGS32, WG_D32("+r"))
WG_MMA_S8_SPEC(64, WG_REGS64, WG_D64("+r"))
WG_MMA_S8_SPEC(128, WG_REGS128, WG_D128("+r"))
WG_MMA_S8_SPEC(256, WG_REGS256, WG_D256("+r"))

#undef WG_MMA_S8_SPEC

/* The int8 A fragments of this warp's TPW m64 tiles for one k32 step, from
 * its lanes' words w0 (k16 row 2kk) and w1 (row 2kk + 1): m64 tile i takes
 * word i, whose first n8 tile is rows 0-7 and second rows 8-15. Per group,
 * gs[2i], gs[2i + 1] are those n8 tiles' fp16 scales (both halves). */
template <int TPW, bool GROUP>
__device__ __forceinline__ void qqq_frags(const uint32_t *w0, const uint32_t *w1, const uint32_t *gs,
                                          uint32_t af[TPW][4])
{
#pragma unroll
    for (int i = 0; i < TPW; i++) {
        if constexpr (GROUP) {
            af[i][0] = aq_qqq_group_dq(w0[i], gs[2 * i]);
            af[i][1] = aq_qqq_group_dq(w0[i] >> 8, gs[2 * i + 1]);
            af[i][2] = aq_qqq_group_dq(w1[i], gs[2 * i]);
            af[i][3] = aq_qqq_group_dq(w1[i] >> 8, gs[2 * i + 1]);
        } else {
#ifdef QV_MUTANT_gpu_qwg_nibble_order_swapped
            /* Mutant (class 3): the two n8 tiles of a word taken in the other order. */
            af[i][0] = aq_qqq_ch_lo(w0[i]);
            af[i][1] = aq_qqq_ch_hi(w0[i]);
#else
            af[i][0] = aq_qqq_ch_hi(w0[i]);
            af[i][1] = aq_qqq_ch_lo(w0[i]);
#endif
            af[i][2] = aq_qqq_ch_hi(w1[i]);
            af[i][3] = aq_qqq_ch_lo(w1[i]);
        }
    }
}

/* The persistent, warp-specialized kernel (see the file comment). */
template <int TPW, int BX, bool GROUP>
__global__ void __launch_bounds__(kThreads, 1)
    k_gemm_qqq_wgmma(const qwg_params p, const wg_sched sc, const __grid_constant__ CUtensorMap a_map,
                     const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap s_map,
                     const __grid_constant__ CUtensorMap c_map)
{
    using C = tile_cfg<TPW, BX>;
    using L = q_layout<TPW, BX, GROUP>;
    constexpr int S = L::stages;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);
    const uint32_t pad = (kSwizzleAtom - (raw_addr & (kSwizzleAtom - 1))) & (kSwizzleAtom - 1);
    unsigned char *smem = smem_raw + pad;
    const uint32_t smem_addr = raw_addr + pad;
    const uint32_t full0 = smem_addr, empty0 = smem_addr + 8 * S;
    unsigned char *ring = smem + L::header;
    const uint32_t ring_addr = smem_addr + L::header;

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int m = p.aq.m, n = p.aq.n;
    const int n_chunks = n / 64;
    const int kt_total = p.aq.k / 16;
    const int n_steps = sc.n_steps;
    const int tiles_m = sc.tiles_m;

    if (tid == 0) {
        for (int s = 0; s < S; s++) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 32 * kConsumerWarps);
        }
        mbar_fence_init();
    }
    __syncthreads();
    /* Programmatic dependent launch (launch_kernel): this grid may start
     * while the kernel before it in the stream (in a W4A8 layer, the
     * activation quantizer, which allows dependents as soon as its blocks
     * run) is still running; nothing in global memory is read or written
     * before that kernel has finished and its writes are visible. */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");

    if (warp >= kConsumerWarps) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        if (warp != kConsumerWarps || lane != 0) return;
        /* Every stage announces the same bytes: the copies write whole boxes,
         * zeros past M, N and K included. */
        constexpr uint32_t tx = L::a_bytes + L::w_bytes + L::s_bytes;
        uint32_t slot = 0, phase = 0;
        for (wg_pieces pc(sc, blockIdx.x); pc.next(sc);) {
            const int m0 = pc.tile % tiles_m * C::bx;
            const int c0 = pc.tile / tiles_m * C::chunks;
            const int w_x = c0 * (kChunkBytes / 8), s_x = c0 * 32;
            /* The stage's group row step / g_steps, kept as a running
             * quotient (a division per stage needs more than the producer's
             * 24 registers). */
            int grp = GROUP ? pc.s0 / p.g_steps : 0, grp_left = GROUP ? p.g_steps - (pc.s0 - grp * p.g_steps) : 0;
#pragma unroll 1
            for (int step = pc.s0; step < pc.s1; step++) {
                mbar_wait(empty0 + 8 * slot, phase ^ 1);
                const uint32_t st = ring_addr + slot * L::bytes, bar = full0 + 8 * slot;
                mbar_arrive_tx(bar, tx);
                tma_load_2d(st + L::a_off, &a_map, step * 128, m0, bar);
#pragma unroll
                for (int j = 0; j < L::n_seg; j++)
                    tma_load_2d(st + L::w_off + j * kKs * L::seg_bytes, &w_map, w_x + j * (L::seg_bytes / 8),
                                step * kKs, bar);
                if constexpr (GROUP) {
                    tma_load_2d(st + L::s_off, &s_map, s_x, grp, bar);
#ifdef QV_MUTANT_gpu_qwg_group_row_stale
                    /* Mutant (class 18): every stage of a piece reads its first stage's group row. */
                    (void)grp_left;
#else
                    if (--grp_left == 0) grp++, grp_left = p.g_steps;
#endif
                }
                if (++slot == S) slot = 0, phase ^= 1;
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const int wgi = warp >> 2;
    const int chunk_l = warp * TPW / 4;     /* this warp's chunk inside the block */
    const int q0 = warp * TPW % 4;          /* its first word (pair of n8 tiles) of the chunk */
    const int lane_off = chunk_l * kChunkBytes + lane * 16 + 4 * q0;
    const int w_lane = lane_off / L::seg_bytes * (kKs * L::seg_bytes) + lane_off % L::seg_bytes;
    /* Its group scales in the staged row: positions 8 (lane/4) + 2 q0 .. of
     * the warp's chunk (scale_perm puts logical column 8 t + j of a chunk at
     * 8 j + t: n8 tile t's scale of column lane/4). */
    const int s_lane = (chunk_l * 64 + 8 * (lane >> 2) + 2 * q0) * 2;

    int acc[TPW][C::bx / 2];
    uint32_t slot = 0, phase = 0;
    const int ct = tid;
    /* Whether this block's part of a shared tile arrived last: one flag per
     * tail piece (a block has at most two, j = 0 and 1), so that no flag is
     * written again while a consumer may still read it. */
    volatile int *last_flags = reinterpret_cast<volatile int *>(smem + 512);
    for (wg_pieces pc(sc, blockIdx.x); pc.next(sc);) {
        const int tile = pc.tile;
        const int m0 = tile % tiles_m * C::bx;
        const int c0 = tile / tiles_m * C::chunks;
        const bool wg_active = c0 + TPW * wgi < n_chunks;
        const bool chunk_ok = c0 + chunk_l < n_chunks;
#pragma unroll
        for (int i = 0; i < TPW; i++)
#pragma unroll
            for (int r = 0; r < C::bx / 2; r++) acc[i][r] = 0;

        int sk_first = 0, sk_parts = 0, sk_j0 = 0;
        if (pc.sk_t >= 0 && (pc.s0 > 0 || pc.s1 < n_steps)) {
            const int u0 = pc.sk_t * n_steps;
            sk_first = sc.owner(u0);
            sk_parts = sc.owner(u0 + n_steps - 1) - sk_first + 1;
            sk_j0 = sc.unit_start(sk_first) < u0 ? 1 : 0;
        }
        int pend = -1;
        for (int step = pc.s0; step < pc.s1; step++) {
            const int nk = kt_total - step * kKs < kKs ? kt_total - step * kKs : kKs;
            mbar_wait(full0 + 8 * slot, phase);
            const unsigned char *st = ring + slot * L::bytes;
            if (wg_active) {
                /* This lane's TPW words of k16 row u (the copy engine wrote
                 * zeros past K and for a chunk past N, so no test): all eight
                 * rows at the start of the stage for one m64 tile per
                 * warpgroup, else two rows per k32 step (with 16 words held
                 * across the stage, ptxas had too few registers left to keep
                 * two steps' fragments apart and serialized the wgmma,
                 * warning C7520). */
                constexpr bool kAllRows = TPW == 1;
                auto load_row = [&](int u, uint32_t *w) {
                    ld_words<TPW>(st + L::w_off + w_lane + u * L::seg_bytes, true, w);
                };
                uint32_t bw[kAllRows ? kKs : 2][TPW];
                if constexpr (kAllRows) {
#pragma unroll
                    for (int u = 0; u < kKs; u++) load_row(u, bw[u]);
                }
                uint32_t gs[2 * TPW];
                if constexpr (GROUP) {
                    uint32_t v[TPW];
                    ld_words<TPW>(st + L::s_off + s_lane, true, v);
#pragma unroll
                    for (int w = 0; w < TPW; w++) {
                        gs[2 * w] = (v[w] & 0xFFFFu) | v[w] << 16;
                        gs[2 * w + 1] = (v[w] >> 16) | (v[w] & 0xFFFF0000u);
                    }
                } else {
#pragma unroll
                    for (int w = 0; w < 2 * TPW; w++) gs[w] = 0;
                }
                /* The descriptor's low word for the stage's activations
                 * (k32 tile kk: 32 bytes on, + 2 kk; wg_desc_sw128_lo). */
                const uint32_t desc_lo = wg_desc_sw128_lo(st + L::a_off);
                auto k32 = [&](int kk) {
                    uint32_t af[TPW][4];
                    if constexpr (kAllRows) {
                        qqq_frags<TPW, GROUP>(bw[2 * kk], bw[2 * kk + 1], gs, af);
                    } else {
                        load_row(2 * kk, bw[0]);
                        load_row(2 * kk + 1, bw[1]);
                        qqq_frags<TPW, GROUP>(bw[0], bw[1], gs, af);
                    }
                    /* Every fragment made before the fence: the channelwise
                     * ones are two logic operations each, and ptxas otherwise
                     * moved some between the TPW wgmma of one step, which made
                     * it serialize them (warning C7520). */
#pragma unroll
                    for (int i = 0; i < TPW; i++)
                        asm volatile("" : "+r"(af[i][0]), "+r"(af[i][1]), "+r"(af[i][2]), "+r"(af[i][3]));
                    /* The fragments were made while the two latest groups ran;
                     * now all but the latest are done, and (kk = 1) so is every
                     * group of the previous stage. */
                    wg_wait<1>();
                    if (kk == 1 && pend >= 0) {
                        mbar_arrive(empty0 + 8 * pend);
                        pend = -1;
                    }
                    wg_fence();
                    /* 32 bytes (k) into each 128-byte row per k32 step. */
                    const uint64_t desc = wg_desc_sw128_from_lo(desc_lo + (uint32_t)(kk * 32 >> 4));
#pragma unroll
                    for (int i = 0; i < TPW; i++) wg_mma_s8<C::bx>::run(acc[i], af[i], desc);
                    wg_commit();
                };
                /* k32 steps with any row inside K (a 16-row tail is its step's
                 * first row; the second reads as zeros on both operands). */
#pragma unroll
                for (int kk = 0; kk < kKs / 2; kk++)
                    if (2 * kk < nk) k32(kk);
                if (pend >= 0) {
                    wg_wait<0>();
                    mbar_arrive(empty0 + 8 * pend);
                }
                pend = (int)slot;
            } else {
                mbar_arrive(empty0 + 8 * slot);
            }
            if (++slot == S) slot = 0, phase ^= 1;
        }
        wg_wait<0>();
        if (pend >= 0) mbar_arrive(empty0 + 8 * pend);

        if (sk_parts > 0) {
            /* A part of a tail tile: its int32 accumulators to its slot; the
             * last part to arrive adds all of them (exact) and writes the tile. */
            const int parts = sk_parts;
            int4 *slot_mine = reinterpret_cast<int4 *>(p.partial + (int64_t)(2 * blockIdx.x + pc.j) * kTileFloats);
            constexpr int kQ = C::bx / 8;
#pragma unroll
            for (int q = 0; q < TPW * kQ; q++)
                slot_mine[q * 256 + ct] = make_int4(acc[q / kQ][4 * (q % kQ)], acc[q / kQ][4 * (q % kQ) + 1],
                                                    acc[q / kQ][4 * (q % kQ) + 2], acc[q / kQ][4 * (q % kQ) + 3]);
            __threadfence();
            consumers_bar();
            if (ct == 0) last_flags[pc.j] = atomicAdd(&p.counters[pc.sk_t], 1) == parts - 1;
            consumers_bar();
            if (!last_flags[pc.j]) continue;
            __threadfence();
            const int4 *src0 = reinterpret_cast<const int4 *>(p.partial) + ct;
#ifdef QV_MUTANT_gpu_qwg_streamk_first_part_only
            /* Mutant (class 11): only the first part of a shared tile is summed. */
            const int n_sum = 1;
#else
            const int n_sum = parts;
#endif
#pragma unroll 1
            for (int i = 0; i < n_sum; i++) {
                const int slot_i = i == 0 ? 2 * sk_first + sk_j0 : 2 * (sk_first + i);
                const int4 *src = src0 + (int64_t)slot_i * (kTileFloats / 4);
                if (i == 0) {
#pragma unroll
                    for (int q = 0; q < TPW * kQ; q++) {
                        const int4 v = __ldcg(src + q * 256);
                        acc[q / kQ][4 * (q % kQ)] = v.x, acc[q / kQ][4 * (q % kQ) + 1] = v.y;
                        acc[q / kQ][4 * (q % kQ) + 2] = v.z, acc[q / kQ][4 * (q % kQ) + 3] = v.w;
                    }
                } else {
#pragma unroll
                    for (int q = 0; q < TPW * kQ; q++) {
                        const int4 v = __ldcg(src + q * 256);
                        acc[q / kQ][4 * (q % kQ)] += v.x, acc[q / kQ][4 * (q % kQ) + 1] += v.y;
                        acc[q / kQ][4 * (q % kQ) + 2] += v.z, acc[q / kQ][4 * (q % kQ) + 3] += v.w;
                    }
                }
            }
            if (ct == 0) p.counters[pc.sk_t] = 0;
        }
        const float *ws = GROUP ? p.aq.w_scale2 : static_cast<const float *>(p.aq.w_scale);
        if (p.c_tma) {
            /* Epilogue through the staging area, as the weight-only kernel's
             * (kernels/wonly_wg.cu): rounds of R tokens, each warp's 16 TPW
             * columns of the round written as transposed 8 x 8 matrices
             * (stmatrix) on the 128-byte swizzle, one tensor-map store per
             * chunk issued by one thread of the warpgroup. The values are the
             * direct form's: (float(acc) * s_w) * s_tok, each product RN, then
             * RNE to fp16 (aq_scale_out, aq_round_f16x2). */
            constexpr int R = L::epi_rows, kRounds = C::bx / R, kMats = R / 8 * 2 * TPW;
            static_assert(kMats % 4 == 0, "whole stmatrix.x4 groups");
            const uint32_t epi_wg = smem_addr + L::epi_off + TPW * wgi * L::epi_chunk_bytes;
            const uint32_t epi_warp = smem_addr + L::epi_off + chunk_l * L::epi_chunk_bytes;
            const bool lead = (ct & 127) == 0;
            const int gq = lane >> 2, tq = lane & 3;
            float sw[TPW][2];
#pragma unroll
            for (int i = 0; i < TPW; i++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    sw[i][h] = chunk_ok ? ws[aq_perm32_pos((c0 + chunk_l) * 64 + 16 * (q0 + i) + 8 * h + gq)] : 0.0f;
#pragma unroll
            for (int r = 0; r < kRounds; r++) {
                if (m0 + r * R >= m) break; /* the tile's rows past M (uniform over the block) */
                /* This lane's two tokens of each 8-token block of the round. */
                float sa[R / 8][2];
#pragma unroll
                for (int jb = 0; jb < R / 8; jb++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int tok = m0 + r * R + 8 * jb + 2 * tq + e;
                        sa[jb][e] = tok < m ? p.aq.a_scale[tok] : 0.0f;
                    }
                if (lead) bulk_wait_read<0>();
                consumers_bar();
                if (wg_active) { /* a warpgroup wholly past N writes nothing */
#pragma unroll
                    for (int q = 0; q < kMats; q += 4) {
                        uint32_t v[4];
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int mat = q + e, jb = mat / (2 * TPW), i = mat / 2 % TPW, h = mat % 2;
                            const int j = r * (R / 8) + jb;
                            const __half2 o = aq_round_f16x2(
                                aq_scale_out(__int2float_rn(acc[i][4 * j + 2 * h]), sw[i][h], sa[jb][0]),
                                aq_scale_out(__int2float_rn(acc[i][4 * j + 2 * h + 1]), sw[i][h], sa[jb][1]));
                            v[e] = *reinterpret_cast<const uint32_t *>(&o);
                        }
                        const int mat_l = q + (lane >> 3);
                        const int row = mat_l / (2 * TPW) * 8 + (lane & 7);
                        const int unit = 2 * (q0 + mat_l / 2 % TPW) + mat_l % 2;
#ifdef QV_MUTANT_gpu_qwg_epi_rows_unswizzled
                        /* Mutant (class 3): the staged rows written without the 128-byte swizzle
                         * the store's tensor map reads them with. */
                        stmatrix_x4_trans(epi_warp + row * 128 + (unit << 4), v);
#else
                        stmatrix_x4_trans(epi_warp + row * 128 + ((unit ^ (lane & 7)) << 4), v);
#endif
                    }
                }
                fence_proxy_async();
                consumers_bar();
                if (lead && wg_active) {
#pragma unroll
                    for (int c = 0; c < TPW; c++)
                        if (c0 + TPW * wgi + c < n_chunks)
                            tma_store_2d(&c_map, (c0 + TPW * wgi + c) * 64, m0 + r * R, epi_wg + c * L::epi_chunk_bytes);
                    bulk_commit();
                }
            }
            continue;
        }
        if (!wg_active || !chunk_ok) continue;

        /* Epilogue with direct stores (C only 4-byte aligned): row 16w + lane/4 (+8) of m64 tile i is column 64 chunk +
         * 16 (q0 + i) + lane/4 (+8); accumulator 4j + 2h + e holds token 8j +
         * 2 (lane%4) + e. After one exchange with lane ^ 4 (the neighbouring
         * column), the even-column lane writes both columns of its even token
         * and the odd-column lane both of its odd token: (float(acc) * s_w) *
         * s_tok, each product RN, then RNE to fp16 (aq_scale_out,
         * aq_store_f16x2: the mma kernel's own sequence). */
        const int gq = lane >> 2, tq = lane & 3;
        const bool even = (gq & 1) == 0;
#pragma unroll
        for (int i = 0; i < TPW; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int col = (c0 + chunk_l) * 64 + 16 * (q0 + i) + 8 * h + gq;
                const int cp = even ? col : col - 1;
                const float sw0 = ws[aq_perm32_pos(cp)], sw1 = ws[aq_perm32_pos(cp + 1)];
#pragma unroll
                for (int j = 0; j < C::bx / 8; j++) {
                    const int y0 = acc[i][4 * j + 2 * h], y1 = acc[i][4 * j + 2 * h + 1];
                    const int recv = __shfl_xor_sync(0xFFFFFFFFu, even ? y1 : y0, 4);
                    const int tok = m0 + 8 * j + 2 * tq + (even ? 0 : 1);
                    if (tok < m) {
                        const float sa = p.aq.a_scale[tok];
                        const int v0 = even ? y0 : recv, v1 = even ? recv : y1;
                        aq_store_f16x2(p.aq, tok, cp, aq_scale_out(__int2float_rn(v0), sw0, sa),
                                       aq_scale_out(__int2float_rn(v1), sw1, sa));
                    }
                }
            }
    }
    /* The staging area's last stores done before the block leaves. */
    if (p.c_tma && (ct & 127) == 0) bulk_wait<0>();
}

/* ---- host side ---- */

/* Whether the kernel covers the problem: a QQQ row qv_launch_qqq accepts (it
 * checks the rest), N on the 64-column chunk, K on the k16 row, per group g a
 * multiple of 128 dividing K, and a grid within CUDA's limits. The launch
 * refuses what it does not cover; the route table's wgmma row
 * (src/gpu_routes.c) states the same cover. */
bool covers(const qv_variant *v, int m, int n, int k, int g)
{
    const bool group = v->layout == QV_LAYOUT_QQQ_W4_GROUP;
    if (!group && v->layout != QV_LAYOUT_QQQ_W4_CHANNEL) return false;
    if (m < 1 || n < 64 || n % 64 || k < 16 || k % 16) return false;
    if (group && (g <= 0 || g % 128 || k % g)) return false;
    return (n + 255) / 256 <= 65535 && ((int64_t)m + 63) / 64 * (n / 128 + 1) < ((int64_t)1 << 31);
}

/* Whether an M-row launch is a programmatic dependent: the options'
 * aq_wg_pdl, QV_OPT_OFF never, QV_OPT_ON always; unset up to the tuning
 * table's aq_wg_pdl_max_m (on the H200, with the quantizer in front, the
 * early launch is faster up to M = 128 and not reliably at M = 1024, slower
 * on Llama-2-7B). */
bool pdl_wanted(const qv_launch_ctx &c, int m)
{
    const int set = c.o->aq_wg_pdl;
    return set ? set == QV_OPT_ON : m <= c.t->aq_wg_pdl_max_m;
}

/* The workspace: the activation-quantized family's counters at 0 (every path
 * of the family keeps them zero between launches; this kernel uses the
 * first sk_tiles of the arrival counters), then the stream-K partial slots. */
struct qwg_plan {
    int tile; /* index into kTiles */
    wg_sched sc;
    size_t partial_off, bytes;
};

/* The tile (the default's narrow form below the tuning table's
 * aq_wg_narrow_stages k128 stages per block: on the H200 its tile is within
 * a few percent of the fastest one at nearly every point, every Llama-2-7B
 * and Llama-3-70B layer, both QQQ rows, M = 16-1024, each tile forced) and
 * the schedule the options give. */
qwg_plan plan(const qv_launch_ctx &c, int m, int n, int k)
{
    qwg_plan pl;
    pl.tile = tile_pick(c, c.o->aq_wg_tile, m, n, k, kKs, c.t->aq_wg_narrow_stages);
    pl.sc = plan_grid(c, c.o->aq_wg_blocks, c.o->aq_wg_streamk, m, n, k, kTiles[pl.tile], kKs);
    pl.partial_off = AQ_COUNTERS_BYTES;
    pl.bytes = pl.sc.sk_tiles > 0 ? AQ_COUNTERS_BYTES + (size_t)2 * pl.sc.grid * kTileFloats * sizeof(int) : 0;
    return pl;
}

template <int TPW, int BX, bool GROUP>
qv_status launch_kernel(const qwg_params &p, const wg_sched &sc, bool pdl, cudaStream_t stream)
{
    using C = tile_cfg<TPW, BX>;
    using L = q_layout<TPW, BX, GROUP>;
    constexpr int smem = L::total;
    static_assert(smem <= kSmemMax, "the ring fits one block's shared memory");
    const int m = p.aq.m, n = p.aq.n, k = p.aq.k;
    /* A (m, k) int8: boxes of 128 k (the swizzle's row) x bx tokens; the
     * packed weights k / 16 rows of n / 64 chunks in 8-byte elements, boxes
     * of kKs rows x one segment; per group the (k / g, n) fp16 scales as
     * pairs, boxes of one row x bn / 2 pairs. Every base is 16-byte aligned
     * (qv_launch_qqq checks) and every row a multiple of 16 bytes. */
    CUtensorMap a_map, w_map, s_map, c_map;
    memset(&s_map, 0, sizeof s_map);
    memset(&c_map, 0, sizeof c_map);
    QV_TRY(make_map_2d(&a_map, p.aq.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, (uint64_t)k, (uint64_t)m, (uint64_t)k, 128,
                       C::bx, CU_TENSOR_MAP_SWIZZLE_128B, "A"));
    const uint64_t row = (uint64_t)(n / 64) * kChunkBytes;
    QV_TRY(make_map_2d(&w_map, p.b, CU_TENSOR_MAP_DATA_TYPE_UINT64, 8, row / 8, (uint64_t)(k / 16), row,
                       L::seg_bytes / 8, kKs, CU_TENSOR_MAP_SWIZZLE_NONE, "packed weights"));
    if (GROUP)
        QV_TRY(make_map_2d(&s_map, p.aq.w_scale, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, (uint64_t)n / 2,
                           (uint64_t)(k / p.aq.g), (uint64_t)n * 2, C::bn / 2, 1, CU_TENSOR_MAP_SWIZZLE_NONE,
                           "group scales"));
    /* C (m, n) fp16 for the epilogue's stores: boxes of 64 columns (128
     * bytes) x epi_rows tokens, 128-byte swizzle (only with C 16-byte
     * aligned: c_tma). */
    if (p.c_tma)
        QV_TRY(make_map_2d(&c_map, p.aq.c, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (uint64_t)n, (uint64_t)m, (uint64_t)n * 2,
                           64, L::epi_rows, CU_TENSOR_MAP_SWIZZLE_128B, "C"));
    static std::atomic<uint64_t> attr_dev(0); /* the devices its attributes are set on */
    QV_TRY(qv_func_attr_once(attr_dev, [&]() -> qv_status {
        QV_CUDA_TRY(cudaFuncSetAttribute(k_gemm_qqq_wgmma<TPW, BX, GROUP>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                    "cudaFuncSetAttribute (QQQ wgmma kernel shared memory)");
        return QV_OK;
    }));
    /* A programmatic dependent of the stream's previous kernel (pdl_wanted):
     * the blocks set up their ring while the quantizer in front finishes,
     * then wait for it (griddepcontrol.wait). */
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = pdl;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)sc.grid);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = (size_t)smem;
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    QV_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_gemm_qqq_wgmma<TPW, BX, GROUP>, p, sc, a_map, w_map, s_map, c_map),
                "QQQ wgmma kernel launch");
    QV_CUDA_TRY(cudaGetLastError(), "QQQ wgmma kernel launch");
    return QV_OK;
}

/* Tile kTiles[I], its shape taken from the table. */
template <int I, bool GROUP>
qv_status launch_form(const qwg_params &p, const wg_sched &sc, bool pdl, cudaStream_t stream)
{
    static_assert(I < kNTiles, "a tile of the table");
    return launch_kernel<kTiles[I].tpw, kTiles[I].bx, GROUP>(p, sc, pdl, stream);
}

template <bool GROUP>
qv_status launch_tile(int tile, const qwg_params &p, const wg_sched &sc, bool pdl, cudaStream_t stream)
{
    switch (tile) {
    case 0: return launch_form<0, GROUP>(p, sc, pdl, stream);
    case 1: return launch_form<1, GROUP>(p, sc, pdl, stream);
    case 2: return launch_form<2, GROUP>(p, sc, pdl, stream);
    case 3: return launch_form<3, GROUP>(p, sc, pdl, stream);
    case 4: return launch_form<4, GROUP>(p, sc, pdl, stream);
    case 5: return launch_form<5, GROUP>(p, sc, pdl, stream);
    case 6: return launch_form<6, GROUP>(p, sc, pdl, stream);
    case 7: return launch_form<7, GROUP>(p, sc, pdl, stream);
    default: return launch_form<8, GROUP>(p, sc, pdl, stream);
    }
}

} /* namespace */

extern "C" size_t qv_qqq_wg_workspace(int m, int n, int k, const qv_launch_ctx *c)
{
    if (m < 1 || n < 64 || k < 16) return 0;
    return plan(*c, m, n, k).bytes;
}

extern "C" int qv_qqq_wg_tail_tiles(int m, int n, int k, const qv_launch_opts *o)
{
    qv_launch_ctx c;
    if (qv_launch_ctx_get(o, &c) != QV_OK) return -1;
    return plan(c, m, n, k).sc.sk_tiles;
}

extern "C" long long qv_qqq_wg_runs(void) { return g_runs.load(); }

extern "C" qv_status qv_qqq_wg_launch(const qv_variant *v, const aq_params *ap, const qv_gemm_args *a,
                                      const qv_launch_ctx *c)
{
    const bool group = v->layout == QV_LAYOUT_QQQ_W4_GROUP;
    if (!covers(v, a->m, a->n, a->k, a->g))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: m=%d n=%d k=%d g=%d is not covered by the QQQ wgmma kernel", v->name,
                       a->m, a->n, a->k, a->g);
    const uintptr_t align = (uintptr_t)a->a | (uintptr_t)a->b | (group ? (uintptr_t)a->scales : 0);
    if (align & 15)
        return qv_fail(QV_ERR_USAGE, "%s: the QQQ wgmma kernel needs A, the packed weights and the group scales "
                       "16-byte aligned", v->name);
    const qwg_plan pl = plan(*c, a->m, a->n, a->k);
    if (pl.bytes > a->workspace_bytes || (pl.bytes && !a->workspace))
        return qv_fail(QV_ERR_USAGE, "%s: workspace of %zu bytes given, %zu needed (qv_workspace_qqq)", v->name,
                       a->workspace_bytes, pl.bytes);
    qwg_params p;
    p.aq = *ap;
    p.b = (const uint32_t *)a->b;
    p.g_steps = group ? a->g / 128 : 1;
    p.counters = (int *)a->workspace + AQ_CTR_ARRIVE;
    p.partial = pl.sc.sk_tiles > 0 ? (int *)((unsigned char *)a->workspace + pl.partial_off) : NULL;
    /* The tensor-map stores need a 16-byte aligned C (qv_launch_qqq asks for 4 bytes). */
    p.c_tma = ((uintptr_t)p.aq.c & 15) == 0;
    cudaStream_t stream = (cudaStream_t)a->stream;
    const bool pdl = pdl_wanted(*c, a->m);
    QV_TRY(group ? launch_tile<true>(pl.tile, p, pl.sc, pdl, stream)
                 : launch_tile<false>(pl.tile, p, pl.sc, pdl, stream));
    g_runs++;
    return QV_OK;
}
