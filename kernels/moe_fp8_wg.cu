/* moe_fp8_wg.cu: the grouped fp8 block-128 GEMM of prefill batches on wgmma
 * (sm_90a), DeepSeek-V3-style experts (gpu_moe.h QV_MOE_FP8_B128): the same
 * token sort, slots and products as kernels/moe_grouped.cu's mma.sync kernel
 * (k_moe_gemm_fp8_b128), on the e4m3 tensor cores that Hopper has only
 * through wgmma (an e4m3 mma.sync compiles to conversions and fp16 products).
 *
 * Block (x, y): weight columns [64 x, 64 x + 64) of slot block y (64 slots,
 * all of expert block_expert[y]); one warpgroup computes the transposed tile
 * D^T (64 columns x 64 slots) = W_x^T . A_slots^T with wgmma m64n64k32
 * e4m3 x e4m3 -> f32, both operands from shared memory, K-major with the
 * 128-byte swizzle:
 *  - the weights (expert x's (n, k) row-major e4m3, a column's K contiguous)
 *    are the A operand, 64 rows of 128 bytes a stage;
 *  - the activations of the block's slots (the slot's token's row, a zero
 *    row for padding) are the B operand, 64 rows of 128 bytes a stage;
 * both copied 16 bytes at a time (cp.async) to the swizzled places, 4 stages.
 *
 * Declared arithmetic (acc=f8p128, the w8a8-fp8-block128 row's): each stage
 * is 128 K, one promotion interval: its four k32 products accumulate in the
 * tensor core's narrow accumulator from zero (`part`), then
 * total = total + part * (s_a[kb][token] * s_w[kb][col / 128]), three fp32
 * roundings in that order, never contracted. The weights' 64 columns lie in
 * one 128-column scale block.
 *
 * The D fragment (PTX ISA "wgmma register fragments", m64nNk32 .f32): warp w,
 * lane l holds d[4j + {0,1}] = rows 16 w + l/4, slots 8 j + 2 (l%4) + {0,1},
 * and d[4j + {2,3}] = rows 16 w + l/4 + 8, the same slots. */
#include <atomic>

#include <cuda_runtime.h>
#include <stdint.h>

#include "func_attr.cuh"
#include "internal/gpu.h"
#include "internal/gpu_moe.h"
#include "mma.cuh"
#include "moe_common.cuh"
#include "wg_common.cuh"

namespace {

constexpr int kFwThreads = 128;            /* one warpgroup */
constexpr int kFwBN = 64;                  /* weight columns a block: the wgmma M */
constexpr int kFwBX = 64;                  /* slots a block: the wgmma N, the sort's block */
constexpr int kFwBK = 128;                 /* K a stage: one promotion interval, one 128-byte row */
constexpr int kFwStages = 4;
constexpr int kFwTile = 64 * kFwBK;        /* one operand's stage: 64 rows of 128 bytes */
constexpr int kFwStageBytes = 2 * kFwTile; /* weights, then activations */
constexpr int kFwSmem = kFwStages * kFwStageBytes + kSwizzleAtom; /* + room to align the ring to 1024 */
static_assert(kFwTile % kSwizzleAtom == 0, "every tile starts on a swizzle atom");
static_assert(kFwBK == 128, "the tiles' rows are moe_swz128's 128 bytes");

/* D (64 x 64, fp32) = A (64 x 32 e4m3) . B (32 x 64 e4m3) (+ D when acc),
 * both through descriptors; no negation. */
__device__ __forceinline__ void fw_mma(float d[32], uint64_t desc_a, uint64_t desc_b, bool acc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
                 "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n"
                 : WG_D64("+f")
                 : "l"(desc_a), "l"(desc_b), "r"((int)acc));
}

__global__ void __launch_bounds__(kFwThreads) k_moe_gemm_fp8_wg(const moe_f8_params p)
{
    extern __shared__ __align__(16) uint8_t fw_smem_raw[];
    uint8_t *ring = reinterpret_cast<uint8_t *>(
        (reinterpret_cast<uintptr_t>(fw_smem_raw) + (kSwizzleAtom - 1)) & ~(uintptr_t)(kSwizzleAtom - 1));
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n0 = blockIdx.x * kFwBN;
    const int base = blockIdx.y * kFwBX;
    chain_wait();
    chain_release();
    if (base >= p.expert_start[p.nx]) return;
    const int x = p.block_expert[blockIdx.y];
    const int xs = moe_scale_expert(p.block_expert, blockIdx.y, x);
    const int ktiles = (p.k + kFwBK - 1) / kFwBK, nbk = (p.n + 127) / 128;
    const int64_t K = p.k;
    const uint8_t *bx = p.b + (int64_t)x * p.n * K;
    const float *wsx = p.w_scale + (int64_t)xs * ktiles * nbk + n0 / 128;

    /* The stage's block scales travel with its tiles (same cp.async groups):
     * the activation scale of each of the 64 slots (thread tid < 64 copies
     * slot tid's; a padding slot copies token 0's, which scales only that
     * slot's zero row, never stored) and the weights' scale of the 64
     * columns (thread 64). */
    __shared__ __align__(16) float s_sa[kFwStages][kFwBX];
    __shared__ float s_sw[kFwStages];

    /* The copies: thread tid takes chunks tid + 128 i (i < 4) of each tile:
     * row r_i = tid / 8 + 16 i, 16-byte chunk c = tid % 8 (the same for every
     * i), so one K offset and one bounds test a stage, and one swizzled
     * offset in each tile plus 2048 i. The weight rows are 16 i columns apart
     * (every column < N: the grid has N / 64 column blocks); each activation
     * row is its slot's token row (a_ok bit i clear: a zero row). The stages
     * are copied in increasing order, so each source advances by one stage a
     * copy (k_next: the K offset of the next stage to copy). */
    constexpr int kIters = 64 * 8 / kFwThreads;
    const int c16 = 16 * (tid & 7);
    const uint32_t ring_s = (uint32_t)__cvta_generic_to_shared(ring) + moe_swz128(tid >> 3, tid & 7);
    const uint8_t *w_src[kIters], *a_src[kIters];
    unsigned a_ok = 0;
#pragma unroll
    for (int i = 0; i < kIters; i++) {
        const int32_t sl = p.slot[base + (tid >> 3) + 16 * i];
        a_ok |= (sl >= 0 ? 1u : 0u) << i;
        a_src[i] = p.a + (int64_t)(sl >= 0 ? sl / p.per : 0) * K + c16;
        w_src[i] = bx + (int64_t)(n0 + (tid >> 3) + 16 * i) * K + c16;
    }
    const float *sa_src = p.a_scale, *sw_src = wsx;
    if (tid < kFwBX) {
        const int32_t sl = p.slot[base + tid];
        sa_src += sl >= 0 ? sl / p.per : 0;
    }
    const uint32_t sa_s = (uint32_t)__cvta_generic_to_shared(&s_sa[0][tid < kFwBX ? tid : 0]);
    const uint32_t sw_s = (uint32_t)__cvta_generic_to_shared(&s_sw[0]);
    int64_t k_next = 0;
    auto load_stage = [&](int s) {
        const uint32_t dw = ring_s + s * kFwStageBytes, da = dw + kFwTile;
        const bool kin = k_next + c16 < K;
        const int64_t ko = kin ? k_next : 0;
#pragma unroll
        for (int i = 0; i < kIters; i++) {
            qv_cp_async16_s(dw + 2048 * i, w_src[i] + ko, kin);
            qv_cp_async16_s(da + 2048 * i, a_src[i] + ko, kin && (a_ok >> i & 1));
        }
        if (tid < kFwBX) qv_cp_async4_s(sa_s + s * kFwBX * 4, sa_src);
        if (tid == kFwBX) qv_cp_async4_s(sw_s + s * 4, sw_src);
        k_next += kFwBK;
        sa_src += p.t;
        sw_src += nbk;
    };

    float acc[32], part[32];
#pragma unroll
    for (int r = 0; r < 32; r++) acc[r] = 0.0f, part[r] = 0.0f;

#pragma unroll
    for (int s = 0; s < kFwStages - 1; s++) {
        if (s < ktiles) load_stage(s);
        qv_cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        qv_cp_async_wait<kFwStages - 2>();
        /* this thread's copies of stage kt, made through the generic proxy,
         * visible to wgmma's reads through the async proxy; then everyone's */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        /* refill the stage consumed in the previous iteration (its wgmma
         * completed there, and every thread is past it) */
        const int nx = kt + kFwStages - 1;
        if (nx < ktiles) load_stage(nx % kFwStages);
        qv_cp_async_commit();
        const int cur = kt % kFwStages;
        const uint8_t *st = ring + cur * kFwStageBytes;
        const uint32_t lo_w = wg_desc_sw128_lo(st), lo_a = wg_desc_sw128_lo(st + kFwTile);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < kFwBK / 32; kk++)
            fw_mma(part, wg_desc_sw128_from_lo(lo_w + 2 * kk), wg_desc_sw128_from_lo(lo_a + 2 * kk), kk > 0);
        wg_commit();
        /* the stage's scales, read while the tensor cores run: s_a s_w for
         * each of this thread's slots 8 j + 2 (lane % 4) + u (q = 2 j + u),
         * one fp32 rounding. A padding slot's (token 0's scale) multiplies
         * its zero row's products and is never stored. */
        const float sw = s_sw[cur];
        float s_ab[16];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float2 sa = *reinterpret_cast<const float2 *>(&s_sa[cur][8 * j + 2 * (lane & 3)]);
            s_ab[2 * j] = __fmul_rn(sa.x, sw);
            s_ab[2 * j + 1] = __fmul_rn(sa.y, sw);
        }
        wg_wait<0>();
        /* promotion with the block scales of K tile kt */
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[4 * j + e] = __fadd_rn(acc[4 * j + e], __fmul_rn(part[4 * j + e], s_ab[2 * j + (e & 1)]));
    }
    qv_cp_async_wait<0>();

    /* the slot entries again, before the first store */
    const int r0 = 16 * warp + (lane >> 2);
    int32_t slot_of[16];
#pragma unroll
    for (int q = 0; q < 16; q++) slot_of[q] = p.slot[base + 8 * (q >> 1) + 2 * (lane & 3) + (q & 1)];
#pragma unroll
    for (int q = 0; q < 16; q++) {
        int32_t sl;
        if (!moe_slot_row(slot_of[q], &sl)) continue;
        float *row = p.inter + (int64_t)sl * p.n;
        const int j = q >> 1, u = q & 1;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int col = n0 + r0 + 8 * h;
            if (col < p.n) __stcg(row + moe_out_col(col, p.n), acc[4 * j + 2 * h + u]);
        }
    }
}

std::atomic<long long> g_runs(0);

} /* namespace */

extern "C" int qv_moe_fp8_wg_covers(const qv_moe_dev *d)
{
    return d->kind == QV_MOE_FP8_B128 && d->n >= kFwBN && d->n % kFwBN == 0 && d->k >= 16 && d->k % 16 == 0;
}

extern "C" qv_status qv_moe_fp8_wg_gemm(const qv_moe_dev *d, const qv_moe_ws *w, void *stream_v)
{
    if (!qv_moe_fp8_wg_covers(d))
        return qv_fail(QV_ERR_UNSUPPORTED, "grouped fp8 wgmma GEMM: kind %d, n=%d k=%d is not covered (n a "
                       "multiple of %d, k of 16)", d->kind, d->n, d->k, kFwBN);
    if (w->block != kFwBX)
        return qv_fail(QV_ERR_USAGE, "grouped fp8 wgmma GEMM: the sort's block is %d rows (%d)", w->block, kFwBX);
    if (w->max_blocks > 65535)
        return qv_fail(QV_ERR_SHAPE, "grouped fp8 wgmma GEMM: t=%d needs up to %d row blocks (65535 at most)", d->t,
                       w->max_blocks);
    unsigned char *ws = (unsigned char *)d->workspace;
    moe_f8_params f;
    f.a = (const uint8_t *)d->a;
    f.a_scale = d->a_scale;
    f.b = (const uint8_t *)d->b;
    f.w_scale = (const float *)d->scales;
    f.slot = (const int32_t *)(ws + w->slot);
    f.block_expert = (const int *)(ws + w->block_expert);
    f.expert_start = (const int *)(ws + w->expert_start);
    f.inter = (float *)(ws + w->inter);
    f.t = d->t;
    f.n = d->n;
    f.k = d->k;
    f.per = d->topk + d->shared;
    f.nx = d->e_local + d->shared;
    static std::atomic<uint64_t> attr_dev(0); /* the devices its attributes are set on */
    QV_TRY(qv_func_attr_once(attr_dev, [&]() -> qv_status {
        QV_CUDA_TRY(cudaFuncSetAttribute(k_moe_gemm_fp8_wg, cudaFuncAttributeMaxDynamicSharedMemorySize, kFwSmem),
                    "cudaFuncSetAttribute (grouped fp8 wgmma GEMM shared memory)");
        return QV_OK;
    }));
    g_runs.fetch_add(1);
    return launch_chained(k_moe_gemm_fp8_wg, dim3(d->n / kFwBN, w->max_blocks), dim3(kFwThreads), kFwSmem,
                          (cudaStream_t)stream_v, "grouped fp8 wgmma GEMM launch", f);
}

extern "C" long long qv_moe_fp8_wg_runs(void) { return g_runs.load(); }
