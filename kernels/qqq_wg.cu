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
 * that read it have completed. A tile ends in wg_epilogue.cuh (stream-K sum,
 * staged or direct stores) with this file's arithmetic (qwg_epi). */
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
#include "wg_epilogue.cuh"

namespace {

constexpr int kKs = 8;        /* k16 rows per stage: 128 int8 = one 128-byte swizzle row */
constexpr int kMaxStages = 8;
constexpr int kChunkBytes = 512; /* one k16 x 64-column tile of packed nibbles: 32 lanes x 16 bytes */

std::atomic<long long> g_runs(0);

/* Shared-memory byte layout (wg_layout): the ring's barriers in a 1024-byte
 * header, then the stages, each the activations (bx rows of 128 bytes), its
 * kKs k16 rows of the block's packed weights in segments, then, per group,
 * the stage's group row of bn fp16 scales (s_bytes at s_off); after the
 * ring, the epilogue's staging area. */
template <int TPW, int BX, bool GROUP, int S_BYTES = GROUP ? tile_cfg<TPW, BX>::bn * 2 : 0>
struct q_layout : wg_layout<tile_cfg<TPW, BX>, kKs, kChunkBytes, S_BYTES, kMaxStages> {
    static constexpr int s_bytes = S_BYTES;
    static constexpr int s_off = q_layout::tail_off;
    static_assert(s_off % 16 == 0, "the scales' copy lands on 16 bytes");
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

/* This kernel's part of the epilogue (wg_epilogue.cuh): int32 accumulators,
 * D = fp16_rne((float(acc) * s_w) * s_tok), each product RN, then RNE to
 * fp16 (aq_scale_out, aq_round_f16x2, aq_store_f16x2: the mma kernel's own
 * sequence), with the fp32 channel scales s_w (per group, the second-level
 * ones) in the 32-column permutation (aq_perm32_pos). */
template <bool GROUP> struct qwg_epi : wg_rows_identity {
    using acc_t = int;
    struct col_t {
        float s0, s1; /* columns cp and cp + 1 */
    };
    const aq_params &aq;
    const float *ws;

    __device__ __forceinline__ explicit qwg_epi(const aq_params &a)
        : aq(a), ws(GROUP ? a.w_scale2 : static_cast<const float *>(a.w_scale))
    {
    }
#ifdef QV_MUTANT_gpu_qwg_epi_rows_unswizzled
    /* Mutant (class 3): the staged rows written without the 128-byte swizzle
     * the store's tensor map reads them with. */
    static constexpr bool kSwizzled = false;
#else
    static constexpr bool kSwizzled = true;
#endif
    static constexpr bool kReadWait = true;
    static __device__ __forceinline__ int parts_summed(int parts)
    {
#ifdef QV_MUTANT_gpu_qwg_streamk_first_part_only
        /* Mutant (class 11): only the first part of a shared tile is summed. */
        return 1;
#else
        return parts;
#endif
    }
    __device__ __forceinline__ float col_scale(bool chunk_ok, int col) const
    {
        return chunk_ok ? ws[aq_perm32_pos(col)] : 0.0f;
    }
    template <int NB> __device__ __forceinline__ void token_scales(float (&sa)[NB][2], int tok0, int tq) const
    {
#pragma unroll
        for (int jb = 0; jb < NB; jb++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int tok = tok0 + 8 * jb + 2 * tq + e;
                sa[jb][e] = tok < aq.m ? aq.a_scale[tok] : 0.0f;
            }
    }
    __device__ __forceinline__ uint32_t pack(int a0, int a1, float sw, const float (&sa)[2]) const
    {
        const __half2 o = aq_round_f16x2(aq_scale_out(__int2float_rn(a0), sw, sa[0]),
                                         aq_scale_out(__int2float_rn(a1), sw, sa[1]));
        return *reinterpret_cast<const uint32_t *>(&o);
    }
    /* The direct form exchanges the int32 sums and scales both columns of
     * the pair with their own s_w. */
    __device__ __forceinline__ col_t direct_col(int col, bool even) const
    {
        const int cp = even ? col : col - 1;
        return {ws[aq_perm32_pos(cp)], ws[aq_perm32_pos(cp + 1)]};
    }
    __device__ __forceinline__ void direct_scale(const col_t &, int &, int &) const {}
    __device__ __forceinline__ void direct_store(const col_t &s, int tok, int cp, bool even, int y0, int y1,
                                                 int recv) const
    {
        const float sa = aq.a_scale[tok];
        const int v0 = even ? y0 : recv, v1 = even ? recv : y1;
        aq_store_f16x2(aq, tok, cp, aq_scale_out(__int2float_rn(v0), s.s0, sa),
                       aq_scale_out(__int2float_rn(v1), s.s1, sa));
    }
};

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
    const wg_block<L> b;
    const int m = p.aq.m, n = p.aq.n;
    const int n_chunks = n / 64;
    const int kt_total = p.aq.k / 16;
    const int tiles_m = sc.tiles_m;
    b.init_ring();
    /* Programmatic dependent launch (launch_kernel): this grid may start
     * while the kernel before it in the stream (in a W4A8 layer, the
     * activation quantizer, which allows dependents as soon as its blocks
     * run) is still running; nothing in global memory is read or written
     * before that kernel has finished and its writes are visible. */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");

    if (b.warp >= kConsumerWarps) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        if (b.warp != kConsumerWarps || b.lane != 0) return;
        /* Every stage announces the same bytes: the copies write whole boxes,
         * zeros past M, N and K included. */
        constexpr uint32_t tx = L::a_bytes + L::w_bytes + L::s_bytes;
        wg_ring_pos<S> pos;
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
                const wg_stage_at at = wg_stage_in<L, kKs>(b, pos, tx, &a_map, &w_map, step, m0, w_x);
                if constexpr (GROUP) {
                    tma_load_2d(at.st + L::s_off, &s_map, s_x, grp, at.bar);
#ifdef QV_MUTANT_gpu_qwg_group_row_stale
                    /* Mutant (class 18): every stage of a piece reads its first stage's group row. */
                    (void)grp_left;
#else
                    if (--grp_left == 0) grp++, grp_left = p.g_steps;
#endif
                }
                pos.advance();
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const wg_consumer<TPW> th(b.tid, b.warp, b.lane);
    const int lane_off = th.chunk_l * kChunkBytes + b.lane * 16 + 4 * th.q0;
    const int w_lane = lane_off / L::seg_bytes * (kKs * L::seg_bytes) + lane_off % L::seg_bytes;
    /* Its group scales in the staged row: positions 8 (lane/4) + 2 q0 .. of
     * the warp's chunk (scale_perm puts logical column 8 t + j of a chunk at
     * 8 j + t: n8 tile t's scale of column lane/4). */
    const int s_lane = (th.chunk_l * 64 + 8 * (b.lane >> 2) + 2 * th.q0) * 2;

    int acc[TPW][C::bx / 2];
    wg_ring_reader<S> rd(b.full0, b.empty0);
    for (wg_pieces pc(sc, blockIdx.x); pc.next(sc);) {
        const wg_tile t = wg_tile_at<TPW, BX>(pc.tile, tiles_m, n_chunks, th);
#pragma unroll
        for (int i = 0; i < TPW; i++)
#pragma unroll
            for (int r = 0; r < C::bx / 2; r++) acc[i][r] = 0;
        const wg_part pt = wg_part_of(sc, pc);
        for (int step = pc.s0; step < pc.s1; step++) {
            const int nk = kt_total - step * kKs < kKs ? kt_total - step * kKs : kKs;
            rd.wait();
            const unsigned char *st = b.ring + rd.pos.slot * L::bytes;
            if (t.wg_active) {
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
                    if (kk == 1) rd.release_held();
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
                rd.hold();
            } else {
                rd.skip();
            }
            rd.pos.advance();
        }
        rd.finish();
        if (pt.parts > 0 && !wg_streamk_sum<qwg_epi<GROUP>, TPW, BX>(acc, p, b, pc, pt, th.ct))
            continue;
        wg_epilogue<TPW, BX, L>(qwg_epi<GROUP>(p.aq), acc, b, th, t, m, n_chunks, p.c_tma, &c_map);
    }
    /* The staging area's last stores done before the block leaves. */
    if (p.c_tma && (th.ct & 127) == 0) bulk_wait<0>();
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
    /* A programmatic dependent of the stream's previous kernel (pdl_wanted):
     * the quantizer in front finishes while the blocks set up their ring. */
    return wg_launch<k_gemm_qqq_wgmma<TPW, BX, GROUP>>(sc, smem, pdl, stream,
                                                        "cudaFuncSetAttribute (QQQ wgmma kernel shared memory)",
                                                        "QQQ wgmma kernel launch", p, sc, a_map, w_map, s_map, c_map);
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
