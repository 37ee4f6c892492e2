/* wonly.cu: the weight-only GEMM family, Y (m, n) = A (m, k) x W (k, n), with
 * A in fp16/bf16 and W stored as Marlin-packed int4 (symmetric "q+8" or with
 * zero points), int8 ("q+128") or fp8 e4m3 codes (layout.h, docs/design.md §7).
 *
 * Declared arithmetic (src/registry.c, rows of family "marlin"):
 *  - group scales (QV_DQ_MUL_RN): w = half((q - z) * s), one half-precision
 *    rounding, with q - z exact;
 *  - tensor/channel scales (QV_DQ_EXACT + QV_EP_MUL_WSCALE): w = value(q)
 *    exactly, and the fp32 result is multiplied by the scale in fp32;
 *  - products summed by m16n8k16 tensor cores into fp32; partial sums of K
 *    slices (two warps of a block, then split-K blocks) added in fp32 in a fixed
 *    order, so every launch is bitwise identical; output cast RNE.
 *
 * Structure: a block of 8 warps computes a BM x 256 output tile (BM = 16, 32
 * or 64) over one K slice. 4 warps along N own 64 columns each (one Marlin
 * chunk: a lane's 16-byte load holds its B fragments for four 16x16 tiles); 2
 * warps along K split every pipeline stage between them. A, B, group scales
 * and zero points travel global -> shared through a cp.async ring (3 stages
 * for 32-row tiles, else 4). That main loop lives in wonly_mma.cuh, shared
 * with the grouped MoE GEMM.
 * Split-K: each slice writes fp32 partials to the workspace; the last block of
 * an output tile to arrive (a counter per tile) adds the partials of slices
 * 0..S-1 in that order, applies the epilogue, writes Y and resets the counter
 * to zero, so the workspace is ready for the next launch (gemm.h). */
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "dequant.cuh"
#include "func_attr.cuh"
#include "mma.cuh"
#include "internal/gpu.h"
#include "qvet/gemm.h"
#include "wonly_common.cuh"
#include "wonly_mma.cuh"
#include "wonly_small.cuh"
#include "wonly_dq.cuh"
#include "internal/route.h"
#include "wonly_wg.cuh"

namespace {

struct wo_params {
    const void *a;           /* (m, k) fp16/bf16 codes, row-major (sorted columns under act_order) */
    const uint32_t *b;       /* Marlin-packed weights, (k/16, 2n) or (k/16, 4n) int32 */
    const void *scales;      /* packed scales: (k/g, n) group, (1, n) channel (f16/bf16), (1) f32 tensor */
    const uint32_t *zeros;   /* packed zero points (k/g, n/8) int32, or NULL */
    void *c;                 /* (m, n) output, row-major, same format as A */
    float *partial;          /* (splits, m, n) fp32 split-K partials, when splits > 1 */
    int *counters;           /* (m_blocks, n_blocks) arrival counters, zero between launches */
    int m, n, k, g;
    int tiles_per_split;     /* k16 tiles per K slice */
    int splits;
    int scale_mode;          /* SC_* */
    int scale_fmt;           /* SF_*: storage of the epilogue scale */
    int g_shift;             /* log2(g / 16): the group of k16 tile kt is kt >> g_shift */
    int grp_single;          /* 1: group scales use the 32-wide channel permutation (k == g) */
    float unbias_f32;        /* fp8: 2^-s_pow2, undoes the exponent bias folded into the scales; else 1 */
    uint32_t unbias_h2;      /* the same power of two as a half2 of the activation format */
    const float *gscale;     /* MARLIN_FP4_NV: (1) fp32 global scale G (qv_packed.scales2), else NULL */
    const void *bias;        /* FP4 rows with a bias: (n) bias_fmt codes in scale_perm_single order
                                (qv_packed.bias), else NULL */
    int bias_fmt;            /* SF_*: storage of the bias */
};

/* The fp32 epilogue of column col: times the channel or tensor scale. */
__device__ __forceinline__ float epilogue_scale(const wo_params &p, int col)
{
    /* The product with the power of two 2^-s_pow2 is exact: it restores the
     * stored scale s (layout.h, MARLIN_FP8). */
    if (p.scale_mode == SC_CHANNEL)
#ifdef QV_MUTANT_gpu_wo_channel_scales_unpermuted
        /* Mutant (class 1, optimum-quanto PR #241): channel scales read in logical order. */
        return load_scale(p.scales, col, p.scale_fmt) * p.unbias_f32;
#else
        return load_scale(p.scales, single_perm_index(col), p.scale_fmt) * p.unbias_f32;
#endif
    if (p.scale_mode == SC_TENSOR) return load_scale(p.scales, 0, p.scale_fmt) * p.unbias_f32;
    return 1.0f;
}

/* The main loop's mutant switches of this kernel (wonly_mma.cuh): each
 * hides one member of mma_hooks, so the grouped MoE kernel, which shares the
 * loop, keeps the declared one. */
struct wo_hooks : mma_hooks {
#ifdef QV_MUTANT_gpu_wo_missing_barrier
    /* Mutant (class 5, vLLM #11493): the barrier after cp.async.wait_group dropped. */
    static constexpr bool stage_barrier = false;
#endif
#ifdef QV_MUTANT_gpu_wo_k_tail_dropped
    /* Mutant (class 11, vLLM #13227): the partial last stage of a K slice skipped. */
    static constexpr bool k_tail = false;
#endif
#ifdef QV_MUTANT_gpu_wo_fp4_scale_stale
    /* Mutant (class 23, CUTLASS #3596, #3615): the FP4 block scales
     * reloaded only at the first k16 tile of a warp's share of a stage, so
     * its other tiles keep the block scale of an earlier K tile. */
    static constexpr bool fp4_scale_every_tile = false;
#endif
#ifdef QV_MUTANT_gpu_wo_group_index_shift
    /* Mutant (class 18): the group of a k16 tile computed from the tile before it. */
    static __device__ __forceinline__ int scale_group(int kt, int g_shift) { return (kt > 0 ? kt - 1 : 0) >> g_shift; }
#endif
#if defined(QV_MUTANT_gpu_wo_zp_mask_missing)
    /* Mutant (class 10, AutoGPTQ #484): the zero-point nibble taken without & 0xF. */
    static __device__ __forceinline__ uint32_t zp_code(uint32_t zw, int j8)
    {
        return zw >> (4 * ((j8 >> 1) + 4 * (j8 & 1)));
    }
#elif defined(QV_MUTANT_gpu_wo_zp_off_by_one)
    /* Mutant (class 9, AutoGPTQ #325, vLLM #38966): GPTQ v1's +1 applied to v2 zero points. */
    static __device__ __forceinline__ uint32_t zp_code(uint32_t zw, int j8)
    {
        return ((zw >> (4 * ((j8 >> 1) + 4 * (j8 & 1)))) + 1) & 0xFu;
    }
#endif
};

/* 16- and 32-row tiles run two blocks per SM (registers capped at 128),
 * 64-row tiles one. */
template <int WT, int MB, bool IS_BF16>
__global__ void __launch_bounds__(kThreads, MB <= 2 ? 2 : 1) k_gemm_wonly_mma(const wo_params p)
{
    using L = stage_layout<WT, MB, true>;
    constexpr int BM = 16 * MB;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int s_is_last;

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int wn = warp % kWarpsN;
    const int wk = warp / kWarpsN;
    const int n0 = blockIdx.x * kBN;
    const int m0 = blockIdx.y * BM;
    const int n_chunks = p.n / 64;
    const bool warp_active = (n0 / 64 + wn) < n_chunks;
    const int kt_begin = blockIdx.z * p.tiles_per_split;

    mma_operands o;
    o.a = static_cast<const uint16_t *>(p.a);
    o.b = p.b;
    o.scales = p.scales;
    o.zeros = p.zeros;
    o.n = p.n;
    o.k = p.k;
    o.kt_begin = kt_begin;
    o.kt_end = min(p.k / 16, kt_begin + p.tiles_per_split);
    o.grouped = p.scale_mode == SC_GROUP;
    o.g_shift = p.g_shift;
    o.grp_single = p.grp_single;
    o.unbias_h2 = p.unbias_h2;
    /* Row r of the block is A's row m0 + r, a zero row past M. */
    auto rows = [&](int row, bool, bool &valid) {
        valid = m0 + row < p.m;
        return (int64_t)(m0 + row);
    };
    float acc[MB][8][4];
    wo_mma_mainloop<WT, MB, IS_BF16, L, wo_hooks>(smem, o, n0, rows, acc);

    /* Cross-warp K reduction in a fixed order: warp wk=0 adds wk=1's sums. */
    float *red = reinterpret_cast<float *>(smem);
    if (wk == 0 && warp_active) {
#pragma unroll
        for (int mt = 0; mt < MB; mt++)
#pragma unroll
            for (int j8 = 0; j8 < 8; j8++)
#pragma unroll
                for (int r = 0; r < 4; r++)
#ifdef QV_MUTANT_gpu_wo_splitk_f16_reduce
                    /* Mutant (class 4, vLLM #6795): the K slices of the two warps reduced in fp16. */
                    acc[mt][j8][r] = __half2float(__hadd(__float2half_rn(acc[mt][j8][r]),
                                                         __float2half_rn(red[red_index<MB>(wn, mt, j8, r, lane)])));
#else
                    acc[mt][j8][r] = acc[mt][j8][r] + red[red_index<MB>(wn, mt, j8, r, lane)];
#endif
    }

    if (p.splits > 1) {
        /* Write this slice's partials, then find out whether this block is the
         * last of its output tile to finish. */
        if (wk == 0 && warp_active) {
            float *part = p.partial + (int64_t)blockIdx.z * p.m * p.n;
#pragma unroll
            for (int mt = 0; mt < MB; mt++)
#pragma unroll
                for (int j8 = 0; j8 < 8; j8++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        int row = m0 + mt * 16 + (lane >> 2) + 8 * h;
                        int col = n0 + wn * 64 + j8 * 8 + 2 * (lane & 3);
                        if (row < p.m)
                            __stcg(reinterpret_cast<float2 *>(part + (int64_t)row * p.n + col),
                                   make_float2(acc[mt][j8][2 * h], acc[mt][j8][2 * h + 1]));
                    }
        }
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            int *cnt = p.counters + blockIdx.y * gridDim.x + blockIdx.x;
            int old = atomicAdd(cnt, 1);
            s_is_last = old == p.splits - 1;
            /* The last arrival resets the counter for the next launch. */
#ifndef QV_MUTANT_gpu_wo_lock_not_reset
            /* (Mutant QV_MUTANT_gpu_wo_lock_not_reset, class 6, marlin e7a312a, skips this reset.) */
            if (s_is_last) atomicExch(cnt, 0);
#endif
        }
        __syncthreads();
        if (!s_is_last) return;
        __threadfence();
        /* Sum slices 0..S-1 in that order: the result does not depend on which
         * block arrived last. */
        if (wk == 0 && warp_active) {
#pragma unroll
            for (int mt = 0; mt < MB; mt++)
#pragma unroll
                for (int j8 = 0; j8 < 8; j8++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        int row = m0 + mt * 16 + (lane >> 2) + 8 * h;
                        int col = n0 + wn * 64 + j8 * 8 + 2 * (lane & 3);
                        if (row >= p.m) continue;
                        float2 s = __ldcg(reinterpret_cast<const float2 *>(p.partial + (int64_t)row * p.n + col));
                        for (int z = 1; z < p.splits; z++) {
                            float2 v = __ldcg(reinterpret_cast<const float2 *>(
                                p.partial + ((int64_t)z * p.m + row) * p.n + col));
#ifdef QV_MUTANT_gpu_wo_splitk_f16_reduce
                            s.x = __half2float(__hadd(__float2half_rn(s.x), __float2half_rn(v.x)));
                            s.y = __half2float(__hadd(__float2half_rn(s.y), __float2half_rn(v.y)));
#else
                            s.x = s.x + v.x;
                            s.y = s.y + v.y;
#endif
                        }
                        acc[mt][j8][2 * h] = s.x;
                        acc[mt][j8][2 * h + 1] = s.y;
                    }
        }
    }

    /* FP4: the global scale (1 without one: an exact product) and the bias. */
    const float gs = wt_is_fp4(WT) && p.gscale ? __ldg(p.gscale) : 1.0f;
    if (wk == 0 && warp_active) {
#pragma unroll
        for (int mt = 0; mt < MB; mt++)
#pragma unroll
            for (int j8 = 0; j8 < 8; j8++) {
                int col = n0 + wn * 64 + j8 * 8 + 2 * (lane & 3);
                float s0 = epilogue_scale(p, col), s1 = epilogue_scale(p, col + 1);
                float b0 = 0.0f, b1 = 0.0f;
                if (wt_is_fp4(WT) && p.bias) {
                    b0 = load_scale(p.bias, single_perm_index(col), p.bias_fmt);
                    b1 = load_scale(p.bias, single_perm_index(col + 1), p.bias_fmt);
                }
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    int row = m0 + mt * 16 + (lane >> 2) + 8 * h;
#ifndef QV_MUTANT_gpu_wo_rows_beyond_m
                    /* (Mutant QV_MUTANT_gpu_wo_rows_beyond_m, class 20, llm-awq #113, drops this predicate.) */
                    if (row >= p.m) continue;
#endif
                    float y0 = acc[mt][j8][2 * h], y1 = acc[mt][j8][2 * h + 1];
                    if (p.scale_mode != SC_GROUP) {
#ifdef QV_MUTANT_gpu_wo_epilogue_f16_cast_first
                        /* Mutant (class 7, vLLM #33972): the fp32 sum cast to fp16 before the scale. */
                        if (!IS_BF16) {
                            y0 = __half2float(__float2half_rn(y0));
                            y1 = __half2float(__float2half_rn(y1));
                        }
#endif
                        y0 = y0 * s0;
                        y1 = y1 * s1;
                    }
                    if (wt_is_fp4(WT)) wo_fp4_epilogue<IS_BF16>(y0, y1, gs, p.bias != nullptr, b0, b1);
                    *reinterpret_cast<uint32_t *>(static_cast<uint16_t *>(p.c) + (int64_t)row * p.n + col) =
                        qv_h2<IS_BF16>::pack(y0, y1);
                }
            }
    }
}

/* act_order: out[i][j] = a[i][perm[j]], the activations in sorted-row order. */
__global__ void k_permute_cols(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k)
{
    int64_t total = (int64_t)m * k;
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = idx / k;
        int j = (int)(idx % k);
#ifdef QV_MUTANT_gpu_wo_act_order_a_unpermuted
        /* Mutant (class 13): A's columns are not permuted to the sorted-row order. */
        out[idx] = a[i * k + j];
        (void)perm;
#else
        out[idx] = a[i * k + perm[j]];
#endif
    }
}

/* ---- host side ---- */

/* The launch geometry of one shape; qv_workspace_wonly and the launch agree on
 * it because both call this. The split-K plan counts the device's SMs
 * (qv_launch_ctx.sms): the plan, and so the fp32 summation order and every
 * output bit, is a function of the shape and the SM count. */
struct geometry {
    int mb;           /* m16 tiles per block: 1, 2 or 4 */
    int m_blocks, n_blocks;
    int tiles_per_split, splits;
    size_t counters_off, aperm_off, partial_off, bytes;
};

geometry plan(const qv_launch_ctx &c, const qv_variant *v, int m, int n, int k)
{
    geometry g;
    int wt = weight_type(v);
    int ks = wt_is_4bit(wt) ? wt_traits<WT_INT4>::ks : wt_traits<WT_INT8>::ks;
    /* Rows per block: 16 up to M = 16, 32 up to M = 64 (two blocks per SM),
     * 64 beyond (one block per SM, the dequantized B reused by 4 m16 tiles). */
    g.mb = m <= 16 ? 1 : m <= 64 ? 2 : 4;
    g.m_blocks = (m + 16 * g.mb - 1) / (16 * g.mb);
    g.n_blocks = (n + kBN - 1) / kBN;
    int tiles = k / 16;
    /* Split K so that the blocks fill the SMs (two blocks per SM for the
     * 16-row tiles, whose resources let two share an SM) in as few, as full
     * waves as possible: the estimated time is waves x k16 tiles per slice,
     * and a tie keeps fewer slices (less partial-sum traffic). Each slice is
     * at least two pipeline stages long. Only problems of fewer tiles than
     * the counters area holds (one counter per tile) are split. */
    int64_t tiles_mn = (int64_t)g.m_blocks * g.n_blocks;
    int64_t slots = (int64_t)c.sms * (g.mb <= 2 ? 2 : 1);
    if (slots > QV_WO_COUNTERS_MIN) slots = QV_WO_COUNTERS_MIN;
    int max_splits = tiles_mn >= slots ? 1 : tiles / (2 * ks);
    if (max_splits > 64) max_splits = 64;
    int splits = 1;
    int64_t best = -1;
    for (int sp = 1; sp <= (max_splits > 1 ? max_splits : 1); sp++) {
        int64_t waves = (tiles_mn * sp + slots - 1) / slots;
        int64_t cost = waves * ((tiles + sp - 1) / sp);
        if (best < 0 || cost < best) best = cost, splits = sp;
    }
    g.tiles_per_split = (tiles + splits - 1) / splits;
    g.splits = (tiles + g.tiles_per_split - 1) / g.tiles_per_split;
    g.counters_off = 0;
    /* The counters area (internal/wonly_plan.h) is shared by every path of
     * qv_launch_wonly and every path leaves it zero, so one workspace can serve
     * any sequence of M: no other buffer may start inside it. */
    size_t off = qv_wonly_counters_bytes(n);
    g.aperm_off = off;
    if (v->act_order) off += align256((size_t)m * (size_t)k * 2);
    g.partial_off = off;
    if (g.splits > 1) off += (size_t)g.splits * (size_t)m * (size_t)n * sizeof(float);
    g.bytes = g.splits > 1 || v->act_order ? off : 0;
    return g;
}

template <int WT, int MB, bool BF>
qv_status launch_kernel(const wo_params &p, dim3 grid, cudaStream_t stream)
{
    constexpr int smem = stage_layout<WT, MB, true>::total;
    static std::atomic<uint64_t> attr_dev(0); /* the devices its attributes are set on */
    QV_TRY(qv_func_attr_once(attr_dev, [&]() -> qv_status {
        QV_CUDA_TRY(cudaFuncSetAttribute(k_gemm_wonly_mma<WT, MB, BF>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                    "cudaFuncSetAttribute (weight-only kernel shared memory)");
        /* Ask for the largest shared-memory carveout: left to itself the driver
         * may pick one that holds a single block, halving the occupancy the
         * 16- and 32-row tiles are sized for. */
        QV_CUDA_TRY(cudaFuncSetAttribute(k_gemm_wonly_mma<WT, MB, BF>,
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         (int)cudaSharedmemCarveoutMaxShared),
                    "cudaFuncSetAttribute (weight-only kernel carveout)");
        return QV_OK;
    }));
    k_gemm_wonly_mma<WT, MB, BF><<<grid, kThreads, smem, stream>>>(p);
    QV_CUDA_TRY(cudaGetLastError(), "weight-only kernel launch");
    return QV_OK;
}

template <int WT, bool BF>
qv_status launch_mb(int mb, const wo_params &p, dim3 grid, cudaStream_t stream)
{
    if (mb == 1) return launch_kernel<WT, 1, BF>(p, grid, stream);
    if (mb == 2) return launch_kernel<WT, 2, BF>(p, grid, stream);
    return launch_kernel<WT, 4, BF>(p, grid, stream);
}

template <bool BF>
qv_status launch_wt(int wt, int mb, const wo_params &p, dim3 grid, cudaStream_t stream)
{
    switch (wt) {
    case WT_INT4: return launch_mb<WT_INT4, BF>(mb, p, grid, stream);
    case WT_INT4_ZP: return launch_mb<WT_INT4_ZP, BF>(mb, p, grid, stream);
    case WT_INT8: return launch_mb<WT_INT8, BF>(mb, p, grid, stream);
    case WT_FP4_MX: return launch_mb<WT_FP4_MX, BF>(mb, p, grid, stream);
    case WT_FP4_NV: return launch_mb<WT_FP4_NV, BF>(mb, p, grid, stream);
    default: return launch_mb<WT_FP8, BF>(mb, p, grid, stream);
    }
}

/* The FP4 rows (layout.h, MARLIN_FP4_MX / _NV): block scales in the
 * dequantization with one rounding, e8m0 per 32 or ue4m3 per 16 with the
 * fp32 global scale, then in the fp32 epilogue the global scale (NV) and
 * the bias in that order, if any; nothing else. */
qv_status check_fp4(const qv_variant *v)
{
    const bool nv = v->layout == QV_LAYOUT_MARLIN_FP4_NV;
    const qv_ep_step *ep = v->arith.epilogue;
    int i = 0;
    const bool g_ok = nv ? ep[i++] == QV_EP_MUL_WSCALE2 : true;
    const bool b_ok = v->bias_fmt == QV_FMT_NONE || ep[i++] == QV_EP_ADD_BIAS;
    if (v->scale_layout != QV_SCALE_GROUP || v->arith.dequant != QV_DQ_MUL_RN || !g_ok || !b_ok ||
        ep[i] != QV_EP_END)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: FP4 rows need group scales in a mul-rn dequant, then the global "
                       "scale (NV) and the bias in the fp32 epilogue", v->name);
    if (nv ? v->sfmt != QV_FMT_UE4M3 || v->g != 16 || v->s2fmt != QV_FMT_F32 || v->s2_layout != QV_SCALE_TENSOR
           : v->sfmt != QV_FMT_E8M0 || v->g != 32 || v->s2_layout != QV_SCALE_NONE)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: FP4 scales must be e8m0 per 32 (MX) or ue4m3 per 16 with an f32 "
                       "global scale (NV)", v->name);
    if (v->bias_fmt != QV_FMT_NONE && v->bias_fmt != QV_FMT_F16 && v->bias_fmt != QV_FMT_BF16 &&
        v->bias_fmt != QV_FMT_F32)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the bias must be f16, bf16 or f32", v->name);
    return QV_OK;
}

/* The rows this kernel implements: anything else is refused, never computed. */
qv_status check_variant(const qv_variant *v)
{
    if (weight_type(v) < 0)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: layout %s is not a weight-only Marlin layout", v->name,
                       qv_layout_name(v->layout));
    bool w_ok = (v->layout == QV_LAYOUT_MARLIN_W4 && v->wfmt == QV_FMT_U4 && !v->zero_point) ||
                (v->layout == QV_LAYOUT_MARLIN_W4_ZP && v->wfmt == QV_FMT_U4 && v->zero_point) ||
                (v->layout == QV_LAYOUT_MARLIN_W8 && v->wfmt == QV_FMT_U8 && !v->zero_point) ||
                (v->layout == QV_LAYOUT_MARLIN_FP8 && v->wfmt == QV_FMT_E4M3 && !v->zero_point) ||
                (qv_layout_is_fp4(v->layout) && v->wfmt == QV_FMT_E2M1 && !v->zero_point && !v->act_order);
    if (!w_ok) return qv_fail(QV_ERR_UNSUPPORTED, "%s: weight format and layout do not match", v->name);
    if ((v->afmt != QV_FMT_F16 && v->afmt != QV_FMT_BF16) || v->ofmt != v->afmt)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: activations and output must both be f16 or both bf16",
                       v->name);
    if (v->act_scale != QV_ASCALE_NONE || v->azp != QV_AZP_NONE)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: activation scales are not part of weight-only GEMM", v->name);
    if (v->arith.accum != QV_ACC_TC_F32 || v->arith.out_sat != QV_SAT_NONE)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the kernel accumulates on fp16/bf16 tensor cores in fp32 "
                       "and casts without saturation", v->name);
    if (qv_layout_is_fp4(v->layout)) return check_fp4(v);
    if (v->bias_fmt != QV_FMT_NONE || v->s2_layout != QV_SCALE_NONE)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: a bias or a second-level scale needs an FP4 layout", v->name);
    if (v->scale_layout == QV_SCALE_GROUP) {
        if (v->arith.dequant != QV_DQ_MUL_RN || v->arith.epilogue[0] != QV_EP_END || v->g < 16 ||
            (v->g & (v->g - 1)))
            return qv_fail(QV_ERR_UNSUPPORTED, "%s: group scales need the mul-rn dequant, no epilogue "
                           "and g a power of two >= 16", v->name);
        if (v->sfmt != v->afmt)
            return qv_fail(QV_ERR_UNSUPPORTED, "%s: group scales must be stored like the activations", v->name);
    } else if (v->scale_layout == QV_SCALE_CHANNEL || v->scale_layout == QV_SCALE_TENSOR) {
        if (v->arith.dequant != QV_DQ_EXACT || v->arith.epilogue[0] != QV_EP_MUL_WSCALE ||
            v->arith.epilogue[1] != QV_EP_END || v->zero_point || v->act_order)
            return qv_fail(QV_ERR_UNSUPPORTED, "%s: channel/tensor scales need exact dequant and one fp32 "
                           "epilogue scale", v->name);
        if (v->sfmt != QV_FMT_F16 && v->sfmt != QV_FMT_BF16 && v->sfmt != QV_FMT_F32)
            return qv_fail(QV_ERR_UNSUPPORTED, "%s: unsupported scale storage", v->name);
    } else {
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: scale layout %s is not supported by the weight-only kernel",
                       v->name, qv_scale_layout_name(v->scale_layout));
    }
    return QV_OK;
}

bool aligned16(const void *ptr) { return ((uintptr_t)ptr & 15) == 0; }

} /* namespace */

qv_status wo_permute_cols_gather(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k,
                                 cudaStream_t stream)
{
    /* 256 threads per block; at most 4096 blocks, each then loops. */
    const int64_t total = (int64_t)m * k;
    const int blocks = (int)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
    k_permute_cols<<<blocks, 256, 0, stream>>>(a, perm, out, m, k);
    QV_CUDA_TRY(cudaGetLastError(), "act_order column permutation launch");
    return QV_OK;
}

extern "C" size_t qv_workspace_wonly(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts)
{
    qv_launch_ctx c;
    if (check_variant(v) != QV_OK || m < 1 || n < 1 || k < 16 || qv_launch_ctx_get(opts, &c) != QV_OK) return 0;
    const qv_route_problem p = {v, m, n, k, v->g};
    return qv_route_workspace(&c, &p);
}

/* Each path's own workspace (route.h): the wgmma, small-M and dequantize +
 * cuBLAS paths plan their own; the mma kernel's plan is below. */
extern "C" size_t qv_wonly_path_workspace(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p)
{
    switch (r->id) {
    case QV_ROUTE_WO_WG: return qv_wonly_wg_workspace(p->v, p->m, p->n, p->k, c);
    case QV_ROUTE_WO_SMALL: return qv_wonly_small_workspace(p->v, p->m, p->n, p->k, c);
    case QV_ROUTE_WO_DQ: return qv_wonly_dq_workspace(p->v, p->m, p->n, p->k, c);
    default: return plan(*c, p->v, p->m, p->n, p->k).bytes;
    }
}

/* The general mma kernel, for every problem the other paths leave. */
static qv_status launch_mma(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx &c)
{
    geometry g = plan(c, v, a->m, a->n, a->k);
    if (g.bytes > a->workspace_bytes || (g.bytes && !a->workspace))
        return qv_fail(QV_ERR_USAGE, "%s: workspace of %zu bytes given, %zu needed (qv_workspace_wonly)",
                       v->name, a->workspace_bytes, g.bytes);
    cudaStream_t stream = (cudaStream_t)a->stream;
    unsigned char *ws = (unsigned char *)a->workspace;

    wo_params p;
    p.a = a->a;
    if (v->act_order) {
        uint16_t *ap = (uint16_t *)(ws + g.aperm_off);
        QV_TRY(wo_permute_cols_gather((const uint16_t *)a->a, a->perm, ap, a->m, a->k, stream));
        p.a = ap;
    }
    p.b = (const uint32_t *)a->b;
    p.scales = a->scales;
    p.zeros = (const uint32_t *)a->zeros;
    p.c = a->c;
    p.partial = g.splits > 1 ? (float *)(ws + g.partial_off) : NULL;
    p.counters = g.splits > 1 ? (int *)(ws + g.counters_off) : NULL;
    p.m = a->m;
    p.n = a->n;
    p.k = a->k;
    p.g = v->scale_layout == QV_SCALE_GROUP ? v->g : 0;
    p.tiles_per_split = g.tiles_per_split;
    p.splits = g.splits;
    wo_set_scale_fields(p, v, a->k);
    p.gscale = v->s2_layout == QV_SCALE_TENSOR ? (const float *)a->scales2 : NULL;
    p.bias = v->bias_fmt != QV_FMT_NONE ? a->bias_packed : NULL;
    p.bias_fmt = v->bias_fmt == QV_FMT_F32 ? SF_F32 : v->bias_fmt == QV_FMT_BF16 ? SF_BF16 : SF_F16;
#ifdef QV_MUTANT_gpu_wo_fp8_unbias_missing
    /* Mutant (class 8, vLLM #47315): the exponent bias folded into the scales is never taken out. */
    p.unbias_f32 = 1.0f;
    p.unbias_h2 = v->afmt == QV_FMT_BF16 ? 0x3F803F80u : 0x3C003C00u;
#endif
    dim3 grid(g.n_blocks, g.m_blocks, g.splits);
    if (g.m_blocks > 65535)
        return qv_fail(QV_ERR_SHAPE, "%s: m=%d needs more than 65535 row blocks", v->name, a->m);
    int wt = weight_type(v);
    return v->afmt == QV_FMT_BF16 ? launch_wt<true>(wt, g.mb, p, grid, stream)
                                  : launch_wt<false>(wt, g.mb, p, grid, stream);
}

extern "C" qv_status qv_wonly_path_run(const qv_route_row *r, const qv_variant *v, const qv_gemm_args *a,
                                       const qv_launch_ctx *c, int *declined)
{
    *declined = 0;
    switch (r->id) {
    case QV_ROUTE_WO_WG: return qv_wonly_wg_launch(v, a, c);
    case QV_ROUTE_WO_SMALL: return qv_wonly_small_launch(v, a, c);
    case QV_ROUTE_WO_DQ: return qv_wonly_dq_launch(v, a, c);
    default: return launch_mma(v, a, *c);
    }
}

extern "C" qv_status qv_launch_wonly(const qv_variant *v, const qv_gemm_args *a)
{
    QV_TRY(check_variant(v));
    QV_TRY(qv_variant_check_shape(v, a->m, a->n, a->k));
    if (v->scale_layout == QV_SCALE_GROUP && a->g != v->g)
        return qv_fail(QV_ERR_SHAPE, "%s: g=%d in the arguments, the variant declares g=%d", v->name, a->g, v->g);
    if (!a->a || !a->b || !a->scales || !a->c || (v->zero_point && !a->zeros) || (v->act_order && !a->perm) ||
        (v->s2_layout != QV_SCALE_NONE && !a->scales2) || (v->bias_fmt != QV_FMT_NONE && !a->bias_packed))
        return qv_fail(QV_ERR_USAGE, "%s: a device buffer the variant needs is NULL", v->name);
    if (a->bias_packed && ((uintptr_t)a->bias_packed & 3))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the packed bias must be 4-byte aligned", v->name);
    if (!aligned16(a->a) || !aligned16(a->b) || !aligned16(a->scales) || (a->zeros && !aligned16(a->zeros)) ||
        ((uintptr_t)a->c & 3))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: A, B, scales and zeros must be 16-byte aligned, C 4-byte aligned",
                       v->name);
    if ((int64_t)a->n * 16 * qv_fmt_get(v->wfmt)->bits / 32 >= ((int64_t)1 << 31))
        return qv_fail(QV_ERR_SHAPE, "%s: N=%d gives packed B rows of 2^31 words or more", v->name, a->n);
    qv_launch_ctx c;
    QV_TRY(qv_launch_ctx_get(a->opts, &c));
    /* The first path of the route table that covers the problem. */
    return qv_route_launch(v, a, &c);
}
