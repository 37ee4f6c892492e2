/* aq_gemm.cuh: one tiled tensor-core GEMM for the activation-quantized family
 * (int8 or e4m3 activations): QQQ W4A8 channelwise and per-group, W8A8 int8
 * (optional activation zero point) and W8A8 e4m3 (tensor, token x channel,
 * 128x128 blocks). Included by kernels/qqq.cu and kernels/w8a8.cu, which
 * instantiate the few tile configurations their dispatchers use. Rule: the
 * arithmetic is the registry row's declared model and nothing cheaper: int32
 * accumulation is exact, e4m3 partial sums are promoted to fp32 every 128 K,
 * split-K sums are exact (int32) or added in a fixed order (e4m3), so every
 * launch is bitwise identical, and the epilogue multiplies in fp32 in the
 * declared order before one RNE to fp16.
 *
 * Tiling: a block computes BM x BN outputs with WM x WN warps; each warp owns
 * 16*MW rows and 8*NT columns (NT = 8 or 4 n8 tiles: one QQQ 64-column chunk,
 * or half of one).
 * K advances 128 per stage through a cp.async pipeline of 3 or 4 stages.
 * Rows past M, columns past N and the K tail are zero-filled in shared memory
 * (never read from global memory) and never stored.
 * Split-K: the slices of an output tile run as one thread-block cluster
 * where the device holds all of a launch's clusters at once; each keeps its
 * partial tile in shared memory and block rank r sums the r-th part of the
 * tile over its peers through distributed shared memory (int32 exact, e4m3
 * fp32 in slice order). Otherwise integer paths add their slices' int32
 * results atomically into one sum (exact, so order-free), and e4m3 slices
 * write fp32 partials that the last slice adds in slice order: the same bits
 * either way. */
#ifndef QVET_AQ_GEMM_CUH
#define QVET_AQ_GEMM_CUH

#include <stdint.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "aq_mma.cuh"
#include "cluster.cuh"
#include "func_attr.cuh"
#include "internal/gpu.h"
#include "internal/tuning.h"
#include "qvet/gemm.h"

/* What the weight operand is and how it becomes an mma B fragment. */
enum aq_bkind {
    AQ_B_QQQ_CH = 0,   /* QQQ channelwise signed int4, seen as 16*q (int8 mma) */
    AQ_B_QQQ_GROUP,    /* QQQ per-group u4, re-rounded to int8 by the fp16 group scale */
    AQ_B_PLAIN_I8,     /* (n, k) row-major int8 */
    AQ_B_PLAIN_E4M3    /* (n, k) row-major e4m3 codes (fp32 accumulation, promoted) */
};

/* Scale addressing modes (uniform per launch, so runtime branches cost nothing). */
enum aq_wscale { AQ_WS_TENSOR = 0, AQ_WS_CHANNEL, AQ_WS_CHANNEL_PERM32, AQ_WS_BLOCK };
enum aq_ascale { AQ_AS_TENSOR = 0, AQ_AS_TOKEN, AQ_AS_TOKEN_BLOCK };
enum aq_azpm { AQ_AZP_NONE = 0, AQ_AZP_TENSOR, AQ_AZP_TOKEN };

#define AQ_BK 128     /* K per stage: one e4m3 promotion interval and one QQQ group */
/* Split-K bookkeeping at the start of the workspace: three arrays of ints, one
 * entry per output tile of a split launch (K is split only below half a wave
 * of tiles, SMs * blocks per SM / 2: 198 by default on the H200, 2112 at most
 * with 32 blocks per SM, and the wave is capped there on any device): arrivals
 * (every path), and for the integer paths entry tickets and "sum zeroed"
 * flags. */
#define AQ_SPLIT_TILES_MAX 2112
/* The most K slices one cluster sums (aq_params::cluster): 16, beyond sm_90's
 * portable 8, is the most the H200 schedules. */
#define AQ_CLUSTER_MAX 16
#define AQ_CTR_ARRIVE 0
#define AQ_CTR_ENTRY AQ_SPLIT_TILES_MAX
#define AQ_CTR_ZEROED (2 * AQ_SPLIT_TILES_MAX)

struct aq_params {
    int m, n, k, g;
    const uint8_t *a;        /* (m, k) int8 or e4m3 codes, row-major */
    const void *b;           /* packed weights: QQQ (k/16, 2n) int32, or plain (n, k) bytes */
    const float *a_scale;    /* (1), (m) or (m, ceil(k/128)) f32, per ascale */
    const void *w_scale;     /* f32 (1), (n) [perm32 for QQQ], (ceil(k/128), ceil(n/128));
                                QQQ group: (k/g, n) f16 in scale_perm order */
    const float *w_scale2;   /* QQQ group: (n) f32 channel scale in scale_perm_single order */
    const int32_t *azp;      /* (1) or (m) int32 activation zero point, or NULL */
    int wscale, ascale, azpm;
    __half *c;               /* (m, n) fp16 output, row-major */
    void *partial;           /* split-K: e4m3, (splits, m, n) f32 partials; integer paths,
                                one (m, n) int32 sum that every slice adds into; NULL when
                                splits = 1 */
    int *counters;           /* split-K: three arrays of AQ_SPLIT_TILES_MAX ints (AQ_CTR_*:
                                arrivals, entry tickets, "zeroed" flags), indexed by the
                                output tile blockIdx.y * gridDim.x + blockIdx.x; zero
                                between launches */
    int splits;              /* K-range slices (gridDim.z) */
    int kt_per_split;        /* 128-wide K tiles per slice */
    int cluster;             /* > 1: the splits slices of an output tile are one thread-block
                                cluster (dims 1 x 1 x splits) that sums them through
                                distributed shared memory; 0 or 1: partials and counters */
};

/* Logical column c -> position in a scale_perm_single (32-wide) block: c%32 =
 * 2i + j' with j' in {0,1,8,9,16,17,24,25} sits at 8i + 2(j'/8) + (j'&1). */
__device__ __forceinline__ int aq_perm32_pos(int c)
{
    int r = c & 31, i = (r & 7) >> 1, jp = r - 2 * i;
    return (c & ~31) + 8 * i + 2 * (jp >> 3) + (jp & 1);
}

/* The fp32 epilogue of one int32 or promoted-fp32 result: (acc * s_w) * s_a,
 * each product rounded (explicit __fmul_rn: never contracted), then RNE fp16
 * (overflow gives +-Inf: QV_SAT_NONE). */
__device__ __forceinline__ float aq_scale_out(float acc, float sw, float sa)
{
#ifdef QV_MUTANT_gpu_aq_epilogue_f16_cast_first
    /* Mutant (class 7, vLLM #33972): the accumulator is cast to fp16 before the scales. */
    acc = __half2float(__float2half_rn(acc));
#endif
    return __fmul_rn(__fmul_rn(acc, sw), sa);
}

__device__ __forceinline__ float aq_load_ws(const aq_params &p, int col)
{
    const float *ws = (const float *)p.w_scale;
    switch (p.wscale) {
    case AQ_WS_TENSOR: return ws[0];
    case AQ_WS_CHANNEL: return ws[col];
    default: return ws[aq_perm32_pos(col)]; /* AQ_WS_CHANNEL_PERM32 */
    }
}

__device__ __forceinline__ float aq_load_as(const aq_params &p, int row)
{
    return p.ascale == AQ_AS_TENSOR ? p.a_scale[0] : p.a_scale[row];
}

/* Two outputs, RNE to fp16 as declared (overflow gives +-Inf), packed low
 * half first: every activation-quantized kernel's last step. */
__device__ __forceinline__ __half2 aq_round_f16x2(float o0, float o1)
{
#ifdef QV_MUTANT_gpu_aq_output_truncation
    /* Mutant (class 17): the output cast truncates toward zero where RNE is declared. */
    return __halves2half2(__float2half_rz(o0), __float2half_rz(o1));
#else
    return __halves2half2(__float2half_rn(o0), __float2half_rn(o1));
#endif
}

/* Outputs (row, col) and (row, col + 1) rounded so, as one 4-byte store. */
__device__ __forceinline__ void aq_store_f16x2(const aq_params &p, int64_t row, int64_t col, float o0, float o1)
{
    *(__half2 *)(p.c + row * p.n + col) = aq_round_f16x2(o0, o1);
}

/* The epilogue of two adjacent outputs (row, col), (row, col+1) from their
 * accumulated values (int32, or the promoted fp32 total), per the row's
 * declared order: int32 -> fp32, * weight scale, * activation scale, each RN,
 * then RNE to fp16 (e4m3 blocks: scales were applied at each promotion). */
template <int KIND, typename T>
__device__ __forceinline__ void aq_finish(const aq_params &p, int64_t row, int64_t col, T v0, T v1)
{
    float o0, o1;
    if constexpr (KIND == AQ_B_PLAIN_E4M3) {
        if (p.wscale == AQ_WS_BLOCK) {
            o0 = v0;
            o1 = v1;
        } else {
            const float sa = aq_load_as(p, (int)row);
            o0 = aq_scale_out(v0, aq_load_ws(p, (int)col), sa);
            o1 = aq_scale_out(v1, aq_load_ws(p, (int)col + 1), sa);
        }
    } else {
#ifdef QV_MUTANT_gpu_aq_token_scale_per_channel
        /* Mutant (class 19): the per-token scale indexed by the output column (wrapped to M). */
        const float sa = aq_load_as(p, (int)(col % p.m));
#else
        const float sa = aq_load_as(p, (int)row);
#endif
        float s0, s1;
        if constexpr (KIND == AQ_B_QQQ_GROUP) {
            s0 = p.w_scale2[aq_perm32_pos((int)col)];
            s1 = p.w_scale2[aq_perm32_pos((int)col + 1)];
        } else {
            s0 = aq_load_ws(p, (int)col);
            s1 = aq_load_ws(p, (int)col + 1);
        }
        o0 = aq_scale_out(__int2float_rn(v0), s0, sa);
        o1 = aq_scale_out(__int2float_rn(v1), s1, sa);
    }
    aq_store_f16x2(p, row, col, o0, o1);
}

template <int KIND, int MW, int WM, int WN, int NT>
struct aq_cfg {
    static_assert(NT == 8 || NT == 4, "a warp owns 8 or 4 n8 tiles");
    static constexpr int threads = 32 * WM * WN;
    static constexpr int bm = 16 * MW * WM;
    static constexpr int bn = 8 * NT * WN;
    static constexpr int chunks = bn / 64;                       /* QQQ 64-column chunks */
    static_assert(bn % 64 == 0, "a block covers whole QQQ chunks");
    static constexpr bool qqq = KIND == AQ_B_QQQ_CH || KIND == AQ_B_QQQ_GROUP;
    static constexpr bool fp8 = KIND == AQ_B_PLAIN_E4M3;
    static constexpr int a_stage = bm * AQ_BK;                   /* bytes */
    static constexpr int b_stage = qqq ? bn * AQ_BK / 2 : bn * AQ_BK;
    /* QQQ per group: the stage's fp16 group-scale row of the block's columns
     * (a stage of 128 K lies inside one group, g being a multiple of 128). */
    static constexpr int s_stage = KIND == AQ_B_QQQ_GROUP ? bn * 2 : 0;
    /* cp.async depth: 4 stages, or 3 when a stage holds 32 KB and the block is
     * small enough (128 threads) that two of them could share an SM's 228 KB of
     * shared memory; the 256-thread e4m3 tile is register-bound to one block
     * per SM anyway and keeps the deeper pipeline. */
    static constexpr int stages = a_stage + b_stage >= 32768 && threads <= 128 ? 3 : 4;
    static constexpr int smem = stages * (a_stage + b_stage + s_stage);
};

/* Thread-block clusters along K: kernels/cluster.cuh. */

/* One more K slice's fp32 partial added to the running sum of an e4m3 split
 * (slices in slice order, RN, never contracted). */
__device__ __forceinline__ float aq_add_slice(float sum, float v)
{
#ifdef QV_MUTANT_gpu_aq_splitk_f16_reduce
    /* Mutant (class 4, vLLM #6795): the K slices are reduced in fp16. */
    return __half2float(__hadd(__float2half_rn(sum), __float2half_rn(v)));
#else
    return __fadd_rn(sum, v);
#endif
}

/* Swizzled byte offset of 16-byte chunk c (0..7) of row r in a 128-byte-row
 * tile: chunk c goes to c ^ (r % 8), so the 8 rows an ldmatrix reads hit 8
 * different 16-byte bank groups. */
__device__ __forceinline__ int aq_swz(int r, int c) { return r * AQ_BK + ((c ^ (r & 7)) << 4); }

template <int KIND, int MW, int WM, int WN, int NT>
__global__ void __launch_bounds__(32 * WM * WN)
k_gemm_aq_mma(const aq_params p)
{
    using C = aq_cfg<KIND, MW, WM, WN, NT>;
    extern __shared__ __align__(128) uint8_t aq_smem[];
    uint8_t *sa = aq_smem;
    uint8_t *sb = aq_smem + C::stages * C::a_stage;
    uint8_t *sg = sb + C::stages * C::b_stage;   /* QQQ per group: the scale rows */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int m0 = blockIdx.x * C::bm, n0 = blockIdx.y * C::bn;
    const int64_t M = p.m, N = p.n, K = p.k;
#ifdef QV_MUTANT_gpu_aq_k_tail_dropped
    /* Mutant (class 11, vLLM #13227, llama.cpp #8311): K tiles counted by floor; the tail is dropped. */
    const int ktiles = p.k / AQ_BK;
#else
    const int ktiles = (p.k + AQ_BK - 1) / AQ_BK;
#endif
    const int kt0 = blockIdx.z * p.kt_per_split;
    const int kt1 = min(ktiles, kt0 + p.kt_per_split);
    const int nkt = max(0, kt1 - kt0);
    const int wcol0 = n0 + 8 * NT * wn;      /* first column of this warp */
    const bool warp_n_live = wcol0 < p.n;    /* QQQ: N % 64 == 0, so a warp is all in or all out */
    /* QQQ: the warp's chunk inside the block and its half of it (NT = 4). */
    const int wchunk = 8 * NT * wn / 64, whalf = (8 * NT * wn % 64) / 32;

    /* Programmatic dependent launch (aq_launch_cfg): this grid may start while
     * the kernel before it in the stream (in a W8A8 / W4A8 layer, the
     * activation quantizer) is still running. Until griddepcontrol.wait
     * returns, nothing that kernel may write is read or written here; the only
     * memory operations are L2 prefetches of the block's first weight stages,
     * which cannot return stale data (every write lands in L2, and the copies
     * below read through L2 after the wait). */
    for (int st = 0; st < C::stages - 1 && kt0 + st < min(ktiles, kt0 + p.kt_per_split); st++) {
        const int64_t k0 = (int64_t)(kt0 + st) * AQ_BK;
        if constexpr (C::qqq) {
            /* 8 k16 rows of C::chunks * 512 contiguous bytes each: 128-byte lines */
            for (int i = tid; i < 8 * C::chunks * 4; i += C::threads) {
                const int64_t kb = k0 / 16 + i / (C::chunks * 4), chunk = n0 / 64 + (i % (C::chunks * 4)) / 4;
                if (kb >= K / 16 || chunk >= N / 64) continue;
                qv_prefetch_l2((const uint8_t *)p.b + kb * N * 8 + chunk * 512 + 128 * (i % 4));
            }
        } else {
            /* one 128-byte line per column of the block */
            for (int i = tid; i < C::bn; i += C::threads)
                if (n0 + i < N && k0 < K) qv_prefetch_l2((const uint8_t *)p.b + (n0 + i) * K + k0);
        }
    }
    asm volatile("griddepcontrol.wait;\n" ::: "memory");

    /* Issues the cp.async copies of K tile kt into stage s. */
    auto load_stage = [&](int s, int kt) {
        const int64_t k0 = (int64_t)kt * AQ_BK;
        uint8_t *sa_s = sa + s * C::a_stage;
        for (int i = tid; i < C::bm * 8; i += C::threads) {
            int r = i >> 3, c = i & 7;
            int64_t row = m0 + r, kk = k0 + 16 * c;
            bool pred = row < M && kk < K;
            const uint8_t *src = pred ? p.a + row * K + kk : p.a;
#ifdef QV_MUTANT_gpu_aq_padding_not_cleared
            /* Mutant (class 15, llama.cpp #10032): out-of-range chunks are skipped, not zero-filled. */
            if (pred)
#endif
            qv_cp_async16(sa_s + aq_swz(r, c), src, pred);
        }
        uint8_t *sb_s = sb + s * C::b_stage;
        if constexpr (C::qqq) {
            /* 8 k16 rows x C::chunks chunks of 64 columns x 32 lanes x 16 bytes. */
            const int4 *b4 = (const int4 *)p.b;
            const int64_t row_i4 = N / 2;    /* int4 per k16 row: 2N int32 / 4 */
            for (int i = tid; i < 8 * C::chunks * 32; i += C::threads) {
                int l = i & 31, cc = (i >> 5) % C::chunks, rr = i / (32 * C::chunks);
                int64_t kb = k0 / 16 + rr, chunk = n0 / 64 + cc;
                bool pred = kb < K / 16 && chunk < N / 64;
                const int4 *src = pred ? b4 + kb * row_i4 + chunk * 32 + l : b4;
                qv_cp_async16(sb_s + 16 * i, src, pred);
            }
            if constexpr (KIND == AQ_B_QQQ_GROUP) {
                /* the block's bn fp16 scales of group k0 / g, 8 per copy (N % 64 == 0,
                 * so a copy is all in or all out); fetched with the weights so that
                 * no scale load waits in the main loop */
                const uint8_t *srow = (const uint8_t *)p.w_scale + (k0 / p.g) * N * 2;
                for (int i = tid; i < C::bn / 8; i += C::threads) {
                    const int64_t col = n0 + 8 * i;
                    const bool pred = col < N;
                    qv_cp_async16(sg + s * C::s_stage + 16 * i, pred ? srow + 2 * col : srow, pred);
                }
            }
        } else {
            const uint8_t *b8 = (const uint8_t *)p.b;
            for (int i = tid; i < C::bn * 8; i += C::threads) {
                int r = i >> 3, c = i & 7;
                int64_t col = n0 + r, kk = k0 + 16 * c;
                bool pred = col < N && kk < K;
                const uint8_t *src = pred ? b8 + col * K + kk : b8;
#ifdef QV_MUTANT_gpu_aq_padding_not_cleared
                if (pred)
#endif
                qv_cp_async16(sb_s + aq_swz(r, c), src, pred);
            }
        }
    };

    /* Accumulators: int32 for the integer paths, fp32 running total plus the
     * current 128-K partial for e4m3. */
    typedef typename std::conditional<C::fp8, float, int>::type acc_t;
    acc_t acc[MW][NT][4];
    float part[C::fp8 ? MW : 1][NT][4];
    int colsum[NT];   /* azp: sum over this warp's K range of column (lane/4) of each n8 tile */
#pragma unroll
    for (int i = 0; i < MW; i++)
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][t][e] = 0;
#pragma unroll
    for (int t = 0; t < NT; t++) colsum[t] = 0;
    const bool want_colsum = !C::fp8 && p.azpm != AQ_AZP_NONE;

#pragma unroll
    for (int s = 0; s < C::stages - 1; s++) {
        if (s < nkt) load_stage(s, kt0 + s);
        qv_cp_async_commit();
    }

    /* Integer split-K: every slice adds its int32 results into one (m, n) sum
     * with atomic adds, which are exact, so the order in which slices arrive
     * does not change a bit of the result. The first slice of a tile to start
     * zeroes the tile's part of the sum while its first stages are in flight
     * (whatever another launch left in the workspace) and raises the tile's
     * flag; the other slices look at the flag only when they come to add. */
    const bool int_split = !C::fp8 && p.splits > 1 && p.cluster <= 1;
    const int tile = blockIdx.y * gridDim.x + blockIdx.x;
    if (int_split) {
        __shared__ int aq_ticket;
        if (tid == 0) aq_ticket = atomicAdd(&p.counters[AQ_CTR_ENTRY + tile], 1);
        __syncthreads();
        if (aq_ticket == 0) {
            int *sum = (int *)p.partial;
            const int rows = min(C::bm, p.m - m0), cols = min(C::bn, p.n - n0);
#ifndef QV_MUTANT_gpu_aq_split_sum_not_zeroed
            /* (Mutant QV_MUTANT_gpu_aq_split_sum_not_zeroed, class 6, marlin e7a312a, skips
             * this clearing but still raises the flag: a launch adds onto whatever the
             * previous one left in the workspace.) */
            for (int e = tid; e < rows * cols; e += C::threads)
                sum[(int64_t)(m0 + e / cols) * N + n0 + e % cols] = 0;
#else
            (void)sum;
            (void)rows;
            (void)cols;
#endif
            __threadfence();
            __syncthreads();
            if (tid == 0) atomicExch(&p.counters[AQ_CTR_ZEROED + tile], 1);
        }
    }

    for (int it = 0; it < nkt; it++) {
        qv_cp_async_wait<C::stages - 2>();
#ifndef QV_MUTANT_gpu_aq_missing_barrier
        /* (Mutant QV_MUTANT_gpu_aq_missing_barrier, class 5, vLLM #11493, drops this barrier:
         * warps then read a stage whose other threads' cp.async copies are still in flight.) */
        __syncthreads();
#endif
        /* Refill the stage consumed in the previous iteration (everyone is past it). */
        {
            int nx = it + C::stages - 1;
            if (nx < nkt) load_stage(nx % C::stages, kt0 + nx);
            qv_cp_async_commit();
        }
        const int s = it % C::stages;
        const uint8_t *sa_s = sa + s * C::a_stage;
        const uint8_t *sb_s = sb + s * C::b_stage;
        const int kt = kt0 + it;

        /* QQQ per group: the fp16 group scale of each of the warp's NT n8 tiles
         * at column lane/4, from the stage's scale row, as half2 pairs for the
         * dequantization. scale_perm puts logical column 8t + j of a 64-column
         * chunk at 8j + t, so the scales are one 16-byte load (NT = 8) or one
         * 8-byte load (NT = 4, tiles 4*whalf ..). */
        uint32_t gs2[NT];
        if constexpr (KIND == AQ_B_QQQ_GROUP) {
            uint4 v = make_uint4(0, 0, 0, 0);
            const uint8_t *src = sg + s * C::s_stage + 2 * ((wcol0 - 32 * whalf - n0) + 8 * (lane >> 2) + 4 * whalf);
            if constexpr (NT == 8) {
                v = *(const uint4 *)src;
            } else {
                const uint2 h = *(const uint2 *)src;
                v.x = h.x;
                v.y = h.y;
            }
            const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const uint32_t h = (w4[t >> 1] >> (16 * (t & 1))) & 0xffffu;
                gs2[t] = h | (h << 16);
            }
        }
        if constexpr (C::fp8) {
#pragma unroll
            for (int i = 0; i < MW; i++)
#pragma unroll
                for (int t = 0; t < NT; t++)
#pragma unroll
                    for (int e = 0; e < 4; e++) part[i][t][e] = 0.0f;
        }

#pragma unroll
        for (int ks = 0; ks < AQ_BK / 32; ks++) {
            uint32_t af[MW][4];
#pragma unroll
            for (int i = 0; i < MW; i++) {
                int r = (wm * MW + i) * 16 + (lane & 15);
                qv_ldmatrix_x4(af[i], sa_s + aq_swz(r, 2 * ks + (lane >> 4)));
            }
            uint32_t bf[NT][2];
            if constexpr (C::qqq) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int rr = 2 * ks + h;   /* k16 row inside the stage */
                    /* lane's 16 bytes of the chunk: word j holds n16 tile j (NT = 4
                     * takes words 2*whalf, 2*whalf+1, 8 bytes) */
                    const uint8_t *src = sb_s + 16 * ((rr * C::chunks + wchunk) * 32 + lane);
                    uint32_t w4[4];
                    if constexpr (NT == 8) {
                        const uint4 v = *(const uint4 *)src;
                        w4[0] = v.x, w4[1] = v.y, w4[2] = v.z, w4[3] = v.w;
                    } else {
                        const uint2 v = *(const uint2 *)(src + 8 * whalf);
                        w4[0] = v.x, w4[1] = v.y, w4[2] = 0, w4[3] = 0;
                    }
#pragma unroll
                    for (int j = 0; j < NT / 2; j++) {
                        if constexpr (KIND == AQ_B_QQQ_CH) {
                            bf[2 * j][h] = aq_qqq_ch_hi(w4[j]);
                            bf[2 * j + 1][h] = aq_qqq_ch_lo(w4[j]);
                        } else {
                            bf[2 * j][h] = aq_qqq_group_dq(w4[j], gs2[2 * j]);
                            bf[2 * j + 1][h] = aq_qqq_group_dq(w4[j] >> 8, gs2[2 * j + 1]);
                        }
                    }
                }
            } else {
#pragma unroll
                for (int pr = 0; pr < NT / 2; pr++) {
                    int r = 8 * NT * wn + 16 * pr + ((lane >> 4) << 3) + (lane & 7);
                    uint32_t v[4];
                    qv_ldmatrix_x4(v, sb_s + aq_swz(r, 2 * ks + ((lane >> 3) & 1)));
                    bf[2 * pr][0] = v[0];
                    bf[2 * pr][1] = v[1];
                    bf[2 * pr + 1][0] = v[2];
                    bf[2 * pr + 1][1] = v[3];
                }
            }
            if (want_colsum) {
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    colsum[t] = __dp4a((int)bf[t][0], 0x01010101, colsum[t]);
                    colsum[t] = __dp4a((int)bf[t][1], 0x01010101, colsum[t]);
                }
            }
            if constexpr (C::fp8) {
                /* convert each fragment once: A per row tile, B per column tile */
                uint32_t ah[MW][8];
#pragma unroll
                for (int i = 0; i < MW; i++) aq_e4m3_frag_a(af[i], ah[i]);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    uint32_t bh[4];
                    aq_e4m3_frag_b(bf[t], bh);
#pragma unroll
                    for (int i = 0; i < MW; i++) aq_mma_f16_k32(part[i][t], ah[i], bh);
                }
            } else {
#pragma unroll
                for (int i = 0; i < MW; i++)
#pragma unroll
                    for (int t = 0; t < NT; t++) qv_mma_s8_16832(acc[i][t], af[i], bf[t]);
            }
        }

        if constexpr (C::fp8) {
            /* Promotion: the 128-K partial joins the fp32 total. With 128x128
             * block scales the partial is scaled first: total = total + part *
             * (s_a[row][kt] * s_w[kt][col/128]), three fp32 roundings, never
             * contracted into an fma (the registry row's model). A warp's columns
             * lie in one 128-column block (8*NT of them, from a multiple of 8*NT). */
            const bool blk = p.wscale == AQ_WS_BLOCK;
            float sw = 0.0f;
#ifdef QV_MUTANT_gpu_aq_block_scale_n_floor
            /* Mutant (class 12, FBGEMM #6159, vLLM #49596): the weight block scales' row
             * stride by floor(N/128), the trailing partial column block not counted. */
            if (blk && warp_n_live) sw = ((const float *)p.w_scale)[(int64_t)kt * (N / 128) + wcol0 / 128];
#else
            if (blk && warp_n_live) sw = ((const float *)p.w_scale)[(int64_t)kt * ((N + 127) / 128) + wcol0 / 128];
#endif
#pragma unroll
            for (int i = 0; i < MW; i++) {
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    const int64_t row = m0 + (wm * MW + i) * 16 + (lane >> 2) + 8 * hh;
                    float s_ab = 0.0f;
#ifdef QV_MUTANT_gpu_aq_block_scale_token_major
                    /* Mutant (class 12): the activation scales read token-major, (M, K/128),
                     * where the row declares them MN-major, (K/128, M). */
                    if (blk && row < M) s_ab = __fmul_rn(p.a_scale[row * ktiles + kt], sw);
#else
                    /* MN-major (variant.h): the M tokens of K group kt contiguous. */
                    if (blk && row < M) s_ab = __fmul_rn(p.a_scale[(int64_t)kt * M + row], sw);
#endif
#pragma unroll
                    for (int t = 0; t < NT; t++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            float &tot = acc[i][t][2 * hh + e];
                            const float v = part[i][t][2 * hh + e];
                            tot = __fadd_rn(tot, blk ? __fmul_rn(v, s_ab) : v);
                        }
                }
            }
        }
    }
    qv_cp_async_wait<0>();

    /* Zero point: acc -= azp * colsum(B_q), exact in int32. colsum of column
     * lane/4 is complete after summing the 4 lanes that share it. */
    if constexpr (!C::fp8) if (want_colsum) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            colsum[t] += __shfl_xor_sync(0xffffffffu, colsum[t], 1);
            colsum[t] += __shfl_xor_sync(0xffffffffu, colsum[t], 2);
        }
        const int tq = lane & 3;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int cs0 = __shfl_sync(0xffffffffu, colsum[t], (2 * tq) * 4);
            int cs1 = __shfl_sync(0xffffffffu, colsum[t], (2 * tq + 1) * 4);
#pragma unroll
            for (int i = 0; i < MW; i++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    int64_t row = m0 + (wm * MW + i) * 16 + (lane >> 2) + 8 * hh;
                    int z = 0;
                    if (row < M) z = p.azpm == AQ_AZP_TENSOR ? p.azp[0] : p.azp[row];
                    /* unsigned arithmetic: wrap-around is defined, and the final
                     * value is in int32 range (registry proof), so it is exact */
                    acc[i][t][2 * hh] = (int)((unsigned)acc[i][t][2 * hh] - (unsigned)z * (unsigned)cs0);
                    acc[i][t][2 * hh + 1] = (int)((unsigned)acc[i][t][2 * hh + 1] - (unsigned)z * (unsigned)cs1);
                }
        }
    }

    /* Split-K in a cluster (p.cluster = p.splits slices of this output tile,
     * one block each): every block puts its partial tile in its own shared
     * memory (the ring, which the K loop no longer reads), and after a
     * cluster barrier block rank r sums the r-th of the tile's live column
     * pairs over the peers' tiles in rank (= slice) order, through
     * distributed shared memory, and applies the epilogue: no workspace, no
     * counters, no atomics. Integer sums are exact (unsigned adds wrap as the
     * atomic ones do; the total is in range, registry proof); e4m3 slices are
     * added in slice order 0, 1, .., as the last-block sum below does, so both
     * give the same bits. */
    if (p.cluster > 1) {
        constexpr int kRs = C::bn + 4; /* row stride in words: rows start 4 banks apart */
        static_assert(C::bm * kRs * 4 <= C::smem, "the partial tile fits the ring");
        acc_t *red = reinterpret_cast<acc_t *>(aq_smem);
        __syncthreads(); /* every warp is past its last read of the ring */
        if (warp_n_live) {
#pragma unroll
            for (int i = 0; i < MW; i++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    const int r = (wm * MW + i) * 16 + (lane >> 2) + 8 * hh;
                    if (m0 + r >= M) continue;
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        acc_t *dst = red + r * kRs + (wcol0 - n0) + 8 * t + 2 * (lane & 3);
                        dst[0] = acc[i][t][2 * hh];
                        dst[1] = acc[i][t][2 * hh + 1];
                    }
                }
        }
#ifndef QV_MUTANT_gpu_aq_cluster_missing_barrier
        /* (Mutant QV_MUTANT_gpu_aq_cluster_missing_barrier, class 5, vLLM #11493, drops this
         * barrier: blocks read their peers' tiles before the peers have written them.) */
        cluster_arrive();
        cluster_wait();
#endif
        const int nc = p.cluster;
        const unsigned rank = cluster_rank();
        const int rows = (int)min((int64_t)C::bm, M - m0), pairs = (int)min((int64_t)C::bn, N - n0) / 2;
        const int items = rows * pairs;
        const int e_end = (int)((rank + 1) * (unsigned)items / (unsigned)nc);
        const unsigned red_addr = (unsigned)__cvta_generic_to_shared(aq_smem);
        for (int e = (int)(rank * (unsigned)items / (unsigned)nc) + tid; e < e_end; e += C::threads) {
            const int r = e / pairs, c2 = 2 * (e % pairs);
            const unsigned addr = red_addr + 4u * (unsigned)(r * kRs + c2);
            uint2 v[AQ_CLUSTER_MAX];
#pragma unroll
            for (int q = 0; q < AQ_CLUSTER_MAX; q++)
                if (q < nc) v[q] = cluster_ld_peer_u2(addr, (unsigned)q);
            if constexpr (C::fp8) {
                float s0 = __uint_as_float(v[0].x), s1 = __uint_as_float(v[0].y);
#pragma unroll
                for (int q = 1; q < AQ_CLUSTER_MAX; q++)
                    if (q < nc) {
                        s0 = aq_add_slice(s0, __uint_as_float(v[q].x));
                        s1 = aq_add_slice(s1, __uint_as_float(v[q].y));
                    }
                aq_finish<KIND>(p, m0 + r, n0 + c2, s0, s1);
            } else {
                unsigned s0 = 0, s1 = 0;
#pragma unroll
                for (int q = 0; q < AQ_CLUSTER_MAX; q++)
                    if (q < nc) s0 += v[q].x, s1 += v[q].y;
                aq_finish<KIND>(p, m0 + r, n0 + c2, (int)s0, (int)s1);
            }
        }
        /* The peers have read this block's tile before it exits. */
        cluster_arrive();
        cluster_wait();
        return;
    }

    if (int_split) {
        /* the tile's sum is zeroed before any slice adds into it */
        if (tid == 0) {
            while (atomicAdd(&p.counters[AQ_CTR_ZEROED + tile], 0) == 0) __nanosleep(64);
            __threadfence();
        }
        __syncthreads();
    }
    const int tq = lane & 3;
    if (warp_n_live) {
#pragma unroll
        for (int i = 0; i < MW; i++) {
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int64_t row = m0 + (wm * MW + i) * 16 + (lane >> 2) + 8 * hh;
#ifndef QV_MUTANT_gpu_aq_rows_beyond_m
                /* (Mutant QV_MUTANT_gpu_aq_rows_beyond_m, class 20, llm-awq #113, drops this
                 * predicate: rows of the last M tile past M are stored.) */
                if (row >= M) continue;
#endif
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const int64_t col = wcol0 + 8 * t + 2 * tq;
                    if (col >= N) continue;
                    if (int_split) {
                        /* exact int32 adds into the tile's sum (wrap-around is defined for
                         * atomicAdd and the total is in range: registry proof) */
                        int *dst = (int *)p.partial + row * N + col;
                        atomicAdd(dst, (int)acc[i][t][2 * hh]);
                        atomicAdd(dst + 1, (int)acc[i][t][2 * hh + 1]);
                    } else if (p.splits > 1) {
                        /* the raw partial of this K slice; the last slice to finish sums them */
                        acc_t *dst = (acc_t *)p.partial + ((int64_t)blockIdx.z * M + row) * N + col;
                        dst[0] = acc[i][t][2 * hh];
                        dst[1] = acc[i][t][2 * hh + 1];
                    } else {
                        aq_finish<KIND>(p, row, col, acc[i][t][2 * hh], acc[i][t][2 * hh + 1]);
                    }
                }
            }
        }
    }
    if (p.splits == 1) return;

    /* Split-K: the last block of this output tile to arrive finishes the tile:
     * integer paths from the int32 sum, e4m3 by adding the fp32 slices in slice
     * order (RN additions in one fixed order, so every launch gives the same
     * bits). It also resets the tile's counters for the next launch. */
    __shared__ int aq_is_last;
    __threadfence();
    __syncthreads();
    int *counters = p.counters;
    if (tid == 0) {
        const int arrived = atomicAdd(&counters[AQ_CTR_ARRIVE + tile], 1);
        aq_is_last = arrived == p.splits - 1;
#ifndef QV_MUTANT_gpu_aq_lock_not_reset
        /* (Mutant QV_MUTANT_gpu_aq_lock_not_reset, class 6, marlin e7a312a, leaves the
         * counters set: the next launch never sees its last arrival.) */
        if (aq_is_last) {
            counters[AQ_CTR_ARRIVE + tile] = 0;
            if (int_split) {
                counters[AQ_CTR_ENTRY + tile] = 0;
                counters[AQ_CTR_ZEROED + tile] = 0;
            }
        }
#endif
    }
    __syncthreads();
    if (!aq_is_last) return;
    __threadfence();
    for (int e = tid; e < C::bm * C::bn / 2; e += C::threads) {
        const int64_t row = m0 + e / (C::bn / 2), col = n0 + 2 * (e % (C::bn / 2));
        if (row >= M || col >= N) continue;
        if constexpr (!C::fp8) {
            /* L2 reads (__ldcg): the atomic adds were done in L2 */
            const int *src = (const int *)p.partial + row * N + col;
            aq_finish<KIND>(p, row, col, __ldcg(src), __ldcg(src + 1));
        } else {
            const float *part_in = (const float *)p.partial;
            float v0 = 0.0f, v1 = 0.0f;
            for (int z = 0; z < p.splits; z++) {
                /* L2 reads (__ldcg): the partials were written by other SMs */
                const float *src = part_in + ((int64_t)z * M + row) * N + col;
                const float w0 = __ldcg(src), w1 = __ldcg(src + 1);
                if (z == 0) {
                    v0 = w0;
                    v1 = w1;
                } else {
                    v0 = aq_add_slice(v0, w0);
                    v1 = aq_add_slice(v1, w1);
                }
            }
            aq_finish<KIND>(p, row, col, v0, v1);
        }
    }
}

/* ---- host side: tile choice, split-K plan, launch ---------------------------- */

/* The three tile configurations the dispatcher uses (instantiated nowhere else):
 *   small  (m <= 16): 16 x 256 per block, 4 warps of 16 x 64; weight streaming;
 *   medium (m <= 64): 64 x 128, 4 warps of 32 x 64;
 *   large:           128 x 128: int8 4 warps of 64 x 64; QQQ 4 warps of 128 x 32
 *                    (each register-dequantized B fragment feeds 8 row tiles);
 *                    e4m3 8 warps of 32 x 64 (it keeps a running total and a
 *                    128-K partial). */
enum aq_tile { AQ_TILE_SMALL = 0, AQ_TILE_MEDIUM, AQ_TILE_LARGE };

/* The split-K plan fills one wave of resident blocks and no more: the
 * device's SMs (qv_launch_ctx.sms) times the blocks of the kind's tile one
 * SM holds, from the tile's shared memory (aq_cfg::smem plus 1 KB the system
 * reserves per block, out of the SM's, tuning.h: 228 KB on the H200): 3 of
 * QQQ's small and medium tiles (64-74 KB), 2 of the int8 and e4m3 ones
 * (96-102 KB), 2 of the large tiles. A second, partial wave makes the layers
 * it hits far slower on the H200 (ncu: a quarter of the DRAM bandwidth), and
 * counting 3 per SM for the int8 and e4m3 tiles too makes one. QQQ's small
 * tile plans for 3 per SM at every M <= 16: with the slices summed in
 * clusters (aq_launch_cfg) 3 is faster than 2 at M = 9-16. qqq-ch also plans
 * 2 per SM in the medium tile from M = 33, where 2 is as fast or faster on
 * the H200 (at M = 24-32 3 stays ahead), while qqq-g128 keeps 3 there. K is
 * split only when fewer than half a wave of tiles exist. No device query
 * beyond the SM count, so the workspace size is a function of (kind, m, n,
 * k) and the SM count; the options' aq_blocks_per_sm replaces the per-tile
 * count for comparisons. */
static_assert(AQ_CLUSTER_MAX == QV_AQ_CLUSTER_MAX, "the kernel's cluster sum holds the options' largest cluster");

#define AQ_BLOCK_SYS_SMEM 1024    /* what the system reserves per resident block */

/* Blocks of `smem` bytes one SM holds, at most 3. */
static inline int aq_resident(const qv_launch_ctx &c, int smem)
{
    return c.t->sm_smem_kib * 1024 / (smem + AQ_BLOCK_SYS_SMEM) < 3 ? 2 : 3;
}

template <int KIND> static inline int aq_kind_blocks_per_sm(const qv_launch_ctx &c, aq_tile tile)
{
    switch (tile) {
    case AQ_TILE_SMALL: return aq_resident(c, aq_cfg<KIND, 1, 1, 4, 8>::smem);
    case AQ_TILE_MEDIUM: return aq_resident(c, aq_cfg<KIND, 2, 2, 2, 8>::smem);
    default: return 2;
    }
}

static inline int aq_blocks_per_sm(const qv_launch_ctx &c, int kind, aq_tile tile, int m)
{
    if (c.o->aq_blocks_per_sm) return c.o->aq_blocks_per_sm;
    int dflt;
    switch (kind) {
    case AQ_B_QQQ_CH: dflt = aq_kind_blocks_per_sm<AQ_B_QQQ_CH>(c, tile); break;
    case AQ_B_QQQ_GROUP: dflt = aq_kind_blocks_per_sm<AQ_B_QQQ_GROUP>(c, tile); break;
    case AQ_B_PLAIN_I8: dflt = aq_kind_blocks_per_sm<AQ_B_PLAIN_I8>(c, tile); break;
    default: dflt = aq_kind_blocks_per_sm<AQ_B_PLAIN_E4M3>(c, tile); break;
    }
    if (kind == AQ_B_QQQ_CH && tile == AQ_TILE_MEDIUM && m > 32) dflt = 2;
    return dflt;
}

/* One wave of resident blocks of the kind's tile (aq_blocks_per_sm), at
 * most twice the counters area's tiles, so that a split launch (fewer tiles
 * than half a wave) always has a counter per tile. */
static inline int64_t aq_wave(const qv_launch_ctx &c, int kind, aq_tile tile, int m)
{
    const int64_t wave = (int64_t)c.sms * aq_blocks_per_sm(c, kind, tile, m);
    return wave < 2 * AQ_SPLIT_TILES_MAX ? wave : 2 * AQ_SPLIT_TILES_MAX;
}

/* Split-K partials never take more than this many bytes of workspace. */
#define AQ_SPLIT_BYTES_MAX ((size_t)256 << 20)
/* The workspace starts with the split-K counters (AQ_CTR_*: arrivals, entry
 * tickets, "sum zeroed" flags). Every launch leaves them zero and every other
 * buffer, of this kernel or of the cuBLASLt path (aq_lt.cuh), starts after
 * them, so one workspace zeroed once serves any sequence of M (gemm.h); the
 * integer paths' int32 sum needs no zero from the caller (its first slice
 * zeroes it). The partial region is sized for the e4m3 slices (splits x m x n
 * fp32) whatever the kind: the integer paths use its first m x n ints. */
#define AQ_COUNTERS_BYTES ((size_t)3 * AQ_SPLIT_TILES_MAX * sizeof(int))

struct aq_plan {
    aq_tile tile;
    int bm, bn;
    int splits, kt_per_split;
    size_t workspace;   /* bytes of split-K partials and tile counters (0 when splits == 1) */
};

static inline aq_plan aq_plan_for(const qv_launch_ctx &c, int kind, int m, int n, int k)
{
    aq_plan pl;
    pl.tile = m <= 16 ? AQ_TILE_SMALL : m <= 64 ? AQ_TILE_MEDIUM : AQ_TILE_LARGE;
    pl.bm = pl.tile == AQ_TILE_SMALL ? 16 : pl.tile == AQ_TILE_MEDIUM ? 64 : 128;
    pl.bn = pl.tile == AQ_TILE_SMALL ? 256 : 128;
    const int64_t blocks = (int64_t)((m + pl.bm - 1) / pl.bm) * ((n + pl.bn - 1) / pl.bn);
    const int ktiles = (k + AQ_BK - 1) / AQ_BK;
    const int64_t wave = aq_wave(c, kind, pl.tile, m);
    int64_t want = blocks >= wave / 2 ? 1 : wave / blocks;
    if (want > ktiles) want = ktiles;
    /* every slice gets at least 4 K tiles, so the pipeline fills */
    if (want > 1 && ktiles / want < 4) want = ktiles / 4 > 1 ? ktiles / 4 : 1;
    /* The options' aq_splits (tests, measurements): that many slices, at most one per K tile. */
    const int forced = c.o->aq_splits;
    if (forced > 0) want = forced < ktiles ? forced : ktiles;
    while (want > 1 && (size_t)want * (size_t)m * (size_t)n * 4 > AQ_SPLIT_BYTES_MAX) want--;
    pl.kt_per_split = (int)((ktiles + want - 1) / want);
    pl.splits = (ktiles + pl.kt_per_split - 1) / pl.kt_per_split;
    pl.workspace = pl.splits > 1 ? AQ_COUNTERS_BYTES + (size_t)pl.splits * (size_t)m * (size_t)n * 4 : 0;
    return pl;
}

/* Whether an M-row GEMM is launched as a programmatic dependent: for M up to
 * the options' aq_pdl_max_m (the tuning table's 8 unset; QV_OPT_OFF: never;
 * the kernel waits either way), and up to M = 16 when its split-K slices are
 * one cluster (`cluster`). Measured on the H200, quantizer + GEMM: small M
 * gains, while at M = 16-32 the quantizer's clusters hold most SMs and the
 * early GEMM blocks slow the layer; with the slices in clusters M = 9-16
 * gains too, but not with the workspace sum's long slices. */
static inline bool aq_pdl_wanted(const qv_launch_ctx &c, int m, bool cluster)
{
    const int set = c.o->aq_pdl_max_m;
    const int most = set == QV_OPT_OFF ? 0 : set ? set : c.t->aq_pdl_max_m;
    return m <= most || (cluster && most > 0 && m <= 16);
}

/* The largest cluster the split-K sum may use: the options' aq_cluster_max
 * (1: none, every split through the workspace's counters and atomics), or
 * the tuning table's. */
static inline int aq_cluster_max(const qv_launch_ctx &c)
{
    return c.o->aq_cluster_max ? c.o->aq_cluster_max : c.t->aq_cluster_max;
}

/* Slices longer than this many 128-K tiles keep the workspace sum where the
 * plan's 2 blocks per SM are not what the hardware places (aq_launch_cfg). */
#define kAqClusterLongTiles 16

/* bps: the blocks per SM the split-K plan counted on (aq_blocks_per_sm);
 * c: the launch's planning context. */
template <int KIND, int MW, int WM, int WN, int NT>
static qv_status aq_launch_cfg(aq_params p, cudaStream_t stream, int bps, const qv_launch_ctx &c)
{
    using C = aq_cfg<KIND, MW, WM, WN, NT>;
    void (*kern)(const aq_params) = k_gemm_aq_mma<KIND, MW, WM, WN, NT>;
    /* Raising the dynamic shared memory limit and allowing clusters past the
     * portable 8 once per instantiation and device is enough. */
    static std::atomic<uint64_t> attr_dev(0); /* the devices its attributes are set on */
    QV_TRY(qv_func_attr_once(attr_dev, [&]() -> qv_status {
        QV_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::smem),
                    "cudaFuncSetAttribute(k_gemm_aq_mma shared memory)");
        QV_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                    "cudaFuncSetAttribute(k_gemm_aq_mma cluster size)");
        return QV_OK;
    }));
    const int64_t gy = ((int64_t)p.n + C::bn - 1) / C::bn;
    if (gy > 65535 || p.splits > 65535)
        return qv_fail(QV_ERR_UNSUPPORTED, "N=%d needs %lld column blocks, above the grid limit 65535",
                       p.n, (long long)gy);
    dim3 grid((unsigned)(((int64_t)p.m + C::bm - 1) / C::bm), (unsigned)gy, (unsigned)p.splits);
    /* Up to aq_pdl_max_m rows, launched as a programmatic dependent of the
     * stream's previous kernel: the blocks start, prefetch weights and wait
     * (griddepcontrol.wait) while the activation quantizer in front finishes
     * (it allows dependents as soon as its blocks run), instead of starting
     * only after it has drained. */
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(C::threads);
    cfg.dynamicSmemBytes = C::smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    /* Split-K in clusters of the splits slices of a tile (the kernel's
     * distributed shared-memory sum) when the device runs all of the launch's
     * clusters at once; else the workspace's counters and atomics. Either way
     * every output bit is the same. The integer paths, whose sum is exact in
     * any order, take fewer slices (down to 2) when that makes every cluster
     * fit at once; e4m3, whose bits depend on the slices, keeps the plan's.
     * The device's count of concurrent clusters of each size is asked once
     * per instantiation. Clusters are placed a GPC at a time, so where the
     * plan counts on 2 blocks per SM but 3 fit, some SMs get 3 slices and
     * others fewer: long slices (more than kAqClusterLongTiles K tiles) then
     * keep the workspace sum, whose cost (m x n x splits atomic adds) is small
     * next to them (on the H200 the cluster sum is slower there and faster
     * for short slices). Asking for the shared memory of 2 per SM instead
     * costs the launches their clusters (fewer fit a GPC). */
    p.cluster = 1;
    const bool crowded = bps == 2 && aq_resident(c, C::smem) > 2;
    const int ktiles = (p.k + AQ_BK - 1) / AQ_BK;
    static int active[AQ_CLUSTER_MAX + 1];
    const int most = aq_cluster_max(c);
    const int s0 = C::fp8 ? (p.splits <= most ? p.splits : 0) : min(p.splits, most);
    for (int s = s0; s >= 2 && p.cluster == 1; s = C::fp8 ? 0 : s - 1) {
        const int kt = s == p.splits ? p.kt_per_split : (ktiles + s - 1) / s, sp = (ktiles + kt - 1) / kt;
        /* Fewer slices only while they stay short: fewer, longer slices in
         * clusters are slower on the H200 than the plan's slices through the
         * workspace (Llama-3-70B down, K = 28672). */
        if (sp < 2 || (kt > kAqClusterLongTiles && (crowded || s != p.splits))) continue;
        attr[1].id = cudaLaunchAttributeClusterDimension;
        attr[1].val.clusterDim.x = 1;
        attr[1].val.clusterDim.y = 1;
        attr[1].val.clusterDim.z = (unsigned)sp;
        cfg.numAttrs = 2;
        cfg.gridDim.z = (unsigned)sp;
        if (!active[sp]) {
            int n = 0;
            QV_CUDA_TRY(cudaOccupancyMaxActiveClusters(&n, kern, &cfg),
                        "cudaOccupancyMaxActiveClusters(k_gemm_aq_mma)");
            active[sp] = n > 0 ? n : -1;
        }
        if ((int64_t)grid.x * grid.y <= (int64_t)active[sp]) {
            p.cluster = p.splits = sp;
            p.kt_per_split = kt;
        }
    }
    if (p.cluster == 1) {
        cfg.numAttrs = 1;
        cfg.gridDim = grid;
    }
    attr[0].val.programmaticStreamSerializationAllowed = aq_pdl_wanted(c, p.m, p.cluster > 1);
    if (c.o->trace & QV_TRACE_AQ)
        fprintf(stderr, "aq mma plan: kind=%d m=%d n=%d k=%d tile=%dx%d grid=%ux%ux%u slice=%d tiles cluster=%d pdl=%d"
                " bps=%d\n", KIND, p.m, p.n, p.k, C::bm, C::bn, cfg.gridDim.x, cfg.gridDim.y, cfg.gridDim.z,
                p.kt_per_split, p.cluster, (int)attr[0].val.programmaticStreamSerializationAllowed, bps);
    QV_CUDA_TRY(cudaLaunchKernelEx(&cfg, kern, p), "launching k_gemm_aq_mma");
    QV_CUDA_TRY(cudaGetLastError(), "launching k_gemm_aq_mma");
    return QV_OK;
}

/* Runs KIND with the plan's tile and split; p.splits/kt_per_split/partial are
 * filled here from the plan and the caller's workspace. */
template <int KIND>
static qv_status aq_launch(aq_params p, const qv_gemm_args *a, const char *name, const qv_launch_ctx &c)
{
    const aq_plan pl = aq_plan_for(c, KIND, p.m, p.n, p.k);
    p.splits = pl.splits;
    p.kt_per_split = pl.kt_per_split;
    p.partial = NULL;
    if (pl.splits > 1) {
        if (!a->workspace || a->workspace_bytes < pl.workspace)
            return qv_fail(QV_ERR_USAGE, "%s: m=%d n=%d k=%d needs %zu bytes of workspace, got %zu", name,
                           p.m, p.n, p.k, pl.workspace, a->workspace ? a->workspace_bytes : (size_t)0);
        p.counters = (int *)a->workspace;
        p.partial = (unsigned char *)a->workspace + AQ_COUNTERS_BYTES;
    }
    cudaStream_t st = (cudaStream_t)a->stream;
    const int bps = aq_blocks_per_sm(c, KIND, pl.tile, p.m);
    switch (pl.tile) {
    case AQ_TILE_SMALL: return aq_launch_cfg<KIND, 1, 1, 4, 8>(p, st, bps, c);
    case AQ_TILE_MEDIUM: return aq_launch_cfg<KIND, 2, 2, 2, 8>(p, st, bps, c);
    default:
        /* QQQ dequantizes every B fragment in registers: 128 x 32 warp tiles
         * reuse each one for 8 row tiles. */
        if constexpr (KIND == AQ_B_PLAIN_E4M3) return aq_launch_cfg<KIND, 2, 4, 2, 8>(p, st, bps, c);
        else if constexpr (KIND == AQ_B_PLAIN_I8) return aq_launch_cfg<KIND, 4, 2, 2, 8>(p, st, bps, c);
        else return aq_launch_cfg<KIND, 8, 1, 4, 4>(p, st, bps, c);
    }
}

#endif
