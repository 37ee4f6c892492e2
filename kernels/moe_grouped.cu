/* moe_grouped.cu: the routed (mixture-of-experts) GEMM (docs/moe.md,
 * gpu_moe.h) in up to seven launches on one stream (nine with the paired
 * wgmma tiles, qv_moe_dev.pairs: a tile-list launch and two GEMMs; eleven
 * with the fitted ones, qv_moe_dev.fit: a tile-list launch and four):
 *
 *  1. k_moe_route: per token (one warp), the router scores in fp32 from the
 *     logits (softmax over E, sigmoid, or the logits themselves), the k
 *     largest (the lower expert first among equal scores), and the weights in
 *     fp32 as the route declares (renormalized, or a softmax over the k
 *     logits), times the routed scaling factor;
 *  2. k_moe_hist, k_moe_hist_scan and k_moe_scatter: the token sort (moe.h qv_moe_sort, the
 *     same slots in the same order): pairs (t, c) grouped by local expert,
 *     shared experts last, each segment padded with -1 to the GEMM's M block;
 *  3. k_moe_gather_slots (act_order, rw=in, and the W4A16 / FP4 wgmma kernel): the
 *     activations of every slot in sort order, a zero row for padding
 *     (act_order: in the column order of its expert's sorted rows; rw=in: a
 *     routed slot's row times its weight rounded to the activation format,
 *     each product rounded to it);
 *  4. k_moe_gemm_w4a16_mma (int4 "q+8" experts) or k_moe_gemm_fp4_mma
 *     (MXFP4 / NVFP4 experts): ONE grouped launch over (N tile, M block) for
 *     every expert: block y owns slots [y*BM, (y+1)*BM), all of one expert
 *     (block_expert[y]), whose Marlin-packed weights and scales it reads at
 *     that expert's offset; rows are gathered from A through the slots, a
 *     padding row is a zero row and is never written. It runs wonly.cu's
 *     main loop (wonly_mma.cuh: the same pipeline, dequant and fp32
 *     tensor-core accumulation, two warps along K reduced in a fixed order)
 *     with an expert dimension and no split-K. Each pair's fp32 product (its
 *     own epilogue included, but for an FP4 bias, which the combine adds)
 *     goes to row t*per + c of an fp32 buffer. For e4m3 experts with 128x128
 *     block scales (DeepSeek-V3) the same grouping drives
 *     k_moe_gemm_fp8_b128, the w8a8-fp8-block128 row's arithmetic
 *     (aq_gemm.cuh) over slots. With qv_moe_dev.wg (qv_moe_pick: prefill
 *     batches) the W4A16 and FP4 experts take the wgmma kernel instead
 *     (kernels/moe_wg.cu: the dense weight-only wgmma kernel over the
 *     gathered slots, 64-256 slots a tile, the same products to the same
 *     rows);
 *  5. k_moe_shared_gate (sgate=sigmoid): each token's shared-expert gates;
 *     k_moe_combine (k_moe_combine_staged for decode batches, computing
 *     the gates itself): per token and column, in choice order, the fp32
 *     product plus its expert's bias (FP4 experts with one), weighed as rw says (the
 *     router weight in fp32 on the product, rw=acc; both rounded to the
 *     output format, rw=out; weight 1 after rw=in's gather; a shared expert
 *     by its gate, or 1), summed in fp32 (sum=f32) or in the output format
 *     (sum=out), one RNE cast to the output at the end; a token with no local
 *     choice is 0.
 *
 * Nothing depends on which block runs first and no atomic decides an order,
 * so every launch gives the same bits.
 *
 * Every launch after the routing is a programmatic dependent of the one in
 * front (chained): it is launched while that kernel runs, and each of its
 * threads waits (griddepcontrol.wait) for that grid to finish, its writes
 * visible, before touching global memory. Since every kernel of the chain
 * waits so, each finishes after all those in front of it; what overlaps is
 * one kernel's launch with the tail of the one before (at a decode step the
 * kernels are each a few microseconds). The wgmma GEMMs over tile lists
 * overlap further (kernels/moe_wg.cu, wg_params.pdl_order): each one after
 * the first runs its tiles during the tail of the one in front and waits
 * for it only before ending. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "dequant.cuh"
#include "internal/gpu.h"
#include "internal/gpu_moe.h"
#include "internal/tuning.h"
#include "aq_mma.cuh"
#include "func_attr.cuh"
#include "mma.cuh"
#include "moe_common.cuh"
#include "qvet/formats.h"
#include "wonly_common.cuh"
#include "wonly_mma.cuh"

namespace {

/* ---- 1. routing ---------------------------------------------------------------- */

/* Logit j of row `row` as a float (exact: bf16 and f16 widen exactly). */
__device__ __forceinline__ float logit_at(const void *logits, int fmt, int64_t idx)
{
    if (fmt == QV_FMT_F32) return static_cast<const float *>(logits)[idx];
    const uint16_t c = static_cast<const uint16_t *>(logits)[idx];
    return fmt == QV_FMT_BF16 ? qv_h2<true>::to_float(c) : qv_h2<false>::to_float(c);
}

__device__ __forceinline__ bool route_softmax(int r) { return r == QV_ROUTE_SOFTMAX_TOPK || r == QV_ROUTE_SOFTMAX_TOPK_RENORM; }
__device__ __forceinline__ bool route_sigmoid(int r) { return r == QV_ROUTE_SIGMOID_TOPK || r == QV_ROUTE_SIGMOID_TOPK_RENORM; }

/* What the routing reads: the route's declared arithmetic (moe.h) and where
 * the logits and the selection bias are. */
struct route_args {
    const void *logits;
    int fmt, e, topk, route;
    float rsf;
    int groups, gtopk, gscore, gmask; /* groups = 0: no group limit (at most 32 groups) */
    float eps;                        /* renormalization: sum + eps */
    const float *sbias;               /* (e) selection bias, or NULL */
};

inline route_args route_args_of(const qv_moe_dev *d)
{
    return route_args{d->logits, d->logit_fmt, d->e, d->topk, d->route, d->rsf, d->groups, d->gtopk,
                      d->gscore, d->gmask, d->eps, d->score_bias};
}

/* The warp's largest (key, index) among the lanes' candidates (index -1:
 * none), the lower index among equal keys, with the candidate's weight
 * carried along: the same winner on every lane whatever the order of the
 * exchanges. */
__device__ __forceinline__ void warp_argmax(int &best, float &kb, float &wb)
{
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        const float ok = __shfl_xor_sync(0xffffffffu, kb, o);
        const float ow = __shfl_xor_sync(0xffffffffu, wb, o);
        const int ob = __shfl_xor_sync(0xffffffffu, best, o);
        if (ob >= 0 && (best < 0 || ok > kb || (ok == kb && ob < best))) best = ob, kb = ok, wb = ow;
    }
}

/* Token tok on one warp: lane l holds experts l, l+32, ..., l + 32 (NS - 1)
 * (NS = route_slots(e), e <= 1024, so one bit per slot in `taken`), each
 * expert's logit read and its score computed once, kept in registers across
 * the k selections, with its selection score (the score plus the selection
 * bias, and with groups the value of a group not kept). The fp32 arithmetic
 * is the CPU model's (reference/moe.c model_route) except the softmax
 * denominator's order of summation (lane partial sums, then a fixed
 * butterfly), which the declared bound allows (any order of E terms). A
 * group's score is the top-2 (or the largest) of its selection scores,
 * which no order of the exchanges changes, and lane g keeps group g's. Every
 * op is an explicit _rn so that no contraction changes a bit. */
template <int NS>
__device__ __forceinline__ void route_token(const route_args &ra, int tok, int lane, int32_t *ids, float *weights)
{
    const int e = ra.e, topk = ra.topk, route = ra.route;
    const int64_t row = (int64_t)tok * e;
    float key[NS]; /* the logits, then the scores; slot i holds expert lane + 32 i */
    float sk[NS];  /* the selection scores */
    float lmax = -INFINITY;
#pragma unroll
    for (int i = 0; i < NS; i++) {
        const int j = lane + 32 * i;
        key[i] = j < e ? logit_at(ra.logits, ra.fmt, row + j) : -INFINITY;
        if (j < e) lmax = fmaxf(lmax, key[i]);
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) lmax = fmaxf(lmax, __shfl_xor_sync(0xffffffffu, lmax, o));
    const bool sm = route_softmax(route), sg = route_sigmoid(route);
    if (sm) {
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < NS; i++)
            if (lane + 32 * i < e) {
                key[i] = expf(__fsub_rn(key[i], lmax));
                sum = __fadd_rn(sum, key[i]);
            }
#pragma unroll
        for (int o = 16; o; o >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, o));
#pragma unroll
        for (int i = 0; i < NS; i++)
            if (lane + 32 * i < e) key[i] = __fdiv_rn(key[i], sum);
    } else if (sg) {
#pragma unroll
        for (int i = 0; i < NS; i++)
            if (lane + 32 * i < e) key[i] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-key[i])));
    }
#pragma unroll
    for (int i = 0; i < NS; i++) {
        const int j = lane + 32 * i;
        sk[i] = ra.sbias && j < e ? __fadd_rn(key[i], ra.sbias[j]) : key[i];
    }
    if (ra.groups) {
        const int per = e / ra.groups;
        float my_gs = -INFINITY; /* lane g: group g's score */
        for (int g = 0; g < ra.groups; g++) {
            float a1 = -INFINITY, a2 = -INFINITY;
#pragma unroll
            for (int i = 0; i < NS; i++) {
                const int j = lane + 32 * i;
                if (j >= e || j / per != g) continue;
                if (sk[i] > a1) a2 = a1, a1 = sk[i];
                else if (sk[i] > a2) a2 = sk[i];
            }
#pragma unroll
            for (int o = 16; o; o >>= 1) {
                const float b1 = __shfl_xor_sync(0xffffffffu, a1, o), b2 = __shfl_xor_sync(0xffffffffu, a2, o);
                const float hi = fmaxf(a1, b1), lo = fmaxf(fminf(a1, b1), fmaxf(a2, b2));
                a1 = hi, a2 = lo;
            }
            if (lane == g) my_gs = ra.gscore == QV_GSCORE_MAX ? a1 : __fadd_rn(a1, a2);
        }
        uint32_t kept = 0; /* bit g: group g kept */
        for (int c = 0; c < ra.gtopk; c++) {
            int best = lane < ra.groups && !(kept >> lane & 1u) ? lane : -1;
            float kb = my_gs, wb = 0.0f;
            warp_argmax(best, kb, wb);
            kept |= 1u << best;
        }
#ifdef QV_MUTANT_gpu_moe_group_mask_zero
        /* Mutant (class 31, sglang #3705): the groups not kept scored 0.0 where -Inf
         * is declared. */
        const float fill = 0.0f;
#else
        const float fill = ra.gmask == QV_GMASK_ZERO ? 0.0f : -INFINITY;
#endif
#ifndef QV_MUTANT_gpu_moe_groups_ignored
        /* Mutant (class 31, vLLM #32058): the group limit lost. */
#pragma unroll
        for (int i = 0; i < NS; i++) {
            const int j = lane + 32 * i;
            if (j < e && !(kept >> (j / per) & 1u)) sk[i] = fill;
        }
#else
        (void)fill;
#endif
    }
    uint32_t taken = 0;  /* bit i: expert lane + 32 i chosen */
    int sel[QV_MOE_GPU_MAX_TOPK];
    float w[QV_MOE_GPU_MAX_TOPK];
    for (int c = 0; c < topk; c++) {
        int best = -1;
        float kb = 0.0f, wb = 0.0f;
#pragma unroll
        for (int i = 0; i < NS; i++) {
            const int j = lane + 32 * i;
            if (j >= e || (taken >> i & 1u)) continue;
            if (best < 0 || sk[i] > kb) best = j, kb = sk[i], wb = key[i];
        }
        warp_argmax(best, kb, wb);
        sel[c] = best;
#ifdef QV_MUTANT_gpu_moe_bias_in_weights
        /* Mutant (class 31, vLLM #12002): the weights from the selection scores. */
        w[c] = kb;
#else
        w[c] = wb;
#endif
        if ((best & 31) == lane) taken |= 1u << (best >> 5);
    }
    if (lane) return;
#ifdef QV_MUTANT_gpu_moe_topk_before_softmax
    /* Mutant (class 26, vLLM #43223): softmax-topk computed as top-k then softmax. */
    if (route == QV_ROUTE_TOPK_SOFTMAX || route == QV_ROUTE_SOFTMAX_TOPK) {
#else
    if (route == QV_ROUTE_TOPK_SOFTMAX) {
#endif
        const float m = logit_at(ra.logits, ra.fmt, row + sel[0]);
        float s = 0.0f;
        for (int c = 0; c < topk; c++) {
            w[c] = expf(__fsub_rn(logit_at(ra.logits, ra.fmt, row + sel[c]), m));
            s = __fadd_rn(s, w[c]);
        }
        for (int c = 0; c < topk; c++) w[c] = __fdiv_rn(w[c], s);
    } else if (route == QV_ROUTE_SOFTMAX_TOPK_RENORM || route == QV_ROUTE_SIGMOID_TOPK_RENORM) {
        float s = 0.0f;
        for (int c = 0; c < topk; c++) s = __fadd_rn(s, w[c]);
        if (ra.eps != 0.0f) s = __fadd_rn(s, ra.eps);
        for (int c = 0; c < topk; c++) w[c] = __fdiv_rn(w[c], s);
    }
    const float rsf = ra.rsf;
#if defined QV_MUTANT_gpu_moe_rsf_dropped
    /* Mutant (class 27, vLLM #43769): the routed scaling factor dropped. */
#elif defined QV_MUTANT_gpu_moe_rsf_twice
    /* Mutant (class 27, sglang #22513): the routed scaling factor applied twice. */
    if (rsf != 1.0f)
        for (int c = 0; c < topk; c++) w[c] = __fmul_rn(__fmul_rn(w[c], rsf), rsf);
#else
    if (rsf != 1.0f)
        for (int c = 0; c < topk; c++) w[c] = __fmul_rn(w[c], rsf);
#endif
    for (int c = 0; c < topk; c++) {
        ids[(int64_t)tok * topk + c] = sel[c];
        weights[(int64_t)tok * topk + c] = w[c];
    }
}

/* Slots a lane holds for e router experts (route_token). */
inline int route_slots(int e) { return e <= 32 ? 1 : e <= 64 ? 2 : e <= 128 ? 4 : e <= 256 ? 8 : 32; }

template <int NS>
__global__ void __launch_bounds__(128) k_moe_route(const route_args ra, int t, int32_t *ids, float *weights)
{
    /* The first of the chain: the sort may launch at once (it waits). */
    chain_release();
    const int tok = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (tok < t) route_token<NS>(ra, tok, threadIdx.x & 31, ids, weights);
}

/* ---- 2. the token sort ------------------------------------------------------------- */

struct sort_params {
    const int32_t *ids;         /* (t, topk) */
    const int32_t *expert_map;  /* (e) */
    int t, topk, per, e_local, nx, block;
    int *counts;                /* (nx) pairs per expert */
    int *expert_start;          /* (nx + 1) first slot of each segment; [nx] the padded total */
    int *block_expert;          /* (max_blocks) */
    int32_t *slot;              /* (max_slots) */
};

/* The local expert of choice c of token t (pair t * per + c, moe.h): routed
 * choice c < topk through the expert map, shared expert c - topk after the
 * local ones; -1 when another rank holds it. The sort, the GEMM and the
 * combine all take a pair's expert from here. */
__device__ __forceinline__ int pair_expert_tc(const int32_t *ids, const int32_t *expert_map, int topk, int e_local,
                                              int64_t t, int c)
{
#if defined QV_MUTANT_gpu_moe_expert_map_ignored
    /* Mutant (class 28, vLLM #51632): the router's expert id taken as the local
     * index (the expert map skipped): non-local experts land on local ones. */
    if (c < topk) {
        const int id = ids[t * topk + c];
        return id < e_local ? id : -1;
    }
    return e_local + c - topk;
#elif defined QV_MUTANT_gpu_moe_shared_dropped
    /* Mutant (class 28): the shared experts' pairs dropped. */
    return c < topk ? expert_map[ids[t * topk + c]] : -1;
#else
    return c < topk ? expert_map[ids[t * topk + c]] : e_local + c - topk;
#endif
}

__device__ __forceinline__ int pair_expert(const int32_t *ids, const int32_t *expert_map, int topk, int per,
                                           int e_local, int64_t i)
{
    return pair_expert_tc(ids, expert_map, topk, e_local, i / per, (int)(i % per));
}

/* The sort in chunks of 256 pairs (chunk c: pairs [256 c, 256 c + 256)),
 * three launches whose work grows with the pairs, not with pairs x experts:
 * k_moe_hist counts each chunk's pairs per expert, k_moe_hist_scan makes
 * each expert's chunk counts its offsets (the pairs of that expert in the
 * chunks before; up to kSortFuseChunks chunks the scatter sums them
 * itself, a launch fewer), k_moe_scatter puts each chunk's pairs at their expert's
 * start plus that offset plus the pairs of that expert before them in the
 * chunk. hist is (nx, chunks), expert-major. */
constexpr int kSortChunk = 256;
/* Experts a launch of either sort takes (their shared tables; qv_moe_launch
 * refuses more). */
constexpr int kSortExperts = 2048;
/* Up to this many chunks the scatter sums the chunk counts itself (one
 * launch fewer; beyond, each of its threads would read too many). */
constexpr int kSortFuseChunks = 32;

__global__ void __launch_bounds__(kSortChunk) k_moe_hist(const sort_params p, int *hist)
{
    __shared__ int s_cnt[kSortExperts];
    chain_wait();
    chain_release();
    const int c = blockIdx.x, chunks = gridDim.x, tid = threadIdx.x;
    for (int x = tid; x < p.nx; x += kSortChunk) s_cnt[x] = 0;
    __syncthreads();
    const int64_t i = (int64_t)c * kSortChunk + tid;
    if (i < (int64_t)p.t * p.per) {
        const int px = pair_expert(p.ids, p.expert_map, p.topk, p.per, p.e_local, i);
        if (px >= 0) atomicAdd(&s_cnt[px], 1); /* a count, not an order */
    }
    __syncthreads();
    for (int x = tid; x < p.nx; x += kSortChunk) hist[(int64_t)x * chunks + c] = s_cnt[x];
}

/* Warp w of block b takes expert 8 b + w: its chunk counts become exclusive
 * prefix sums in place, 256 chunks a round (8 a lane, loaded before the
 * scan), and its total is its pair count. */
__global__ void __launch_bounds__(256) k_moe_hist_scan(const sort_params p, int *hist, int chunks)
{
    chain_wait();
    chain_release();
    const int lane = threadIdx.x & 31, x = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (x >= p.nx) return;
    int *h = hist + (int64_t)x * chunks;
    int run = 0;
    for (int c0 = 0; c0 < chunks; c0 += 256) {
        int v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int c = c0 + j * 32 + lane;
            v[j] = c < chunks ? h[c] : 0;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int incl = warp_scan_incl(v[j], lane);
            const int c = c0 + j * 32 + lane;
            if (c < chunks) h[c] = run + incl - v[j];
            run += __shfl_sync(0xffffffffu, incl, 31);
        }
    }
    if (lane == 0) p.counts[x] = run;
}

/* Expert x's segment: its start, its blocks' expert and its padding slots
 * (-1), from its first slot and pair count. */
__device__ __forceinline__ void write_segment(const sort_params &p, int x, int start, int count)
{
    const int B = p.block, padded = (count + B - 1) / B * B;
    p.expert_start[x] = start;
    for (int b = 0; b < padded / B; b++) p.block_expert[start / B + b] = x;
    for (int j = count; j < padded; j++) p.slot[start + j] = -1;
}

/* The experts' first slots from their pair counts s_cnt[x] (each padded to
 * the block): a block scan, thread tid holding experts [tid E, tid E + E),
 * E = ceil(nx / 256). Calls each(x, count, start) for the thread's experts
 * in order (after reading s_cnt[x], so each may overwrite it) and returns
 * the padded total. Every thread of the block must call it. */
template <class F>
__device__ __forceinline__ int scan_segments(int *s_cnt, int nx, int B, int *s_warp, F &&each)
{
    const int tid = threadIdx.x, E = (nx + 255) / 256;
    int sum = 0;
    for (int q = 0; q < E; q++) {
        const int x = tid * E + q;
        if (x < nx) sum += (s_cnt[x] + B - 1) / B * B;
    }
    int slots;
    int run = block_scan256(sum, s_warp, tid & 31, tid >> 5, &slots);
    for (int q = 0; q < E; q++) {
        const int x = tid * E + q;
        if (x >= nx) break;
        const int count = s_cnt[x];
        each(x, count, run);
        run += (count + B - 1) / B * B;
    }
    return slots;
}

/* Block c places chunk c. Every block scans the experts' padded counts
 * (thread tid holding experts [tid E, tid E + E)) for their starts; block
 * x % chunks writes expert x's start, its blocks' expert and its padding.
 * Then each pair's slot: its expert's start, plus the chunk's offset, plus
 * that expert's pairs before it in the chunk: in a warp the lanes of one
 * expert (a match) rank by lane, and the warps take their experts' next
 * slots one after the other (warp order is pair order). With scanned 0
 * (at most kSortFuseChunks chunks, no k_moe_hist_scan launch) hist holds
 * the raw chunk counts and each thread sums its experts' rows itself, and
 * block x % chunks writes expert x's pair count. */
__global__ void __launch_bounds__(kSortChunk) k_moe_scatter(const sort_params p, const int *hist, int scanned)
{
    __shared__ int s_next[kSortExperts]; /* each expert's next slot in this chunk */
    __shared__ int s_cnt[kSortExperts];  /* each expert's pair count (thread-owned entries) */
    __shared__ int s_warp[8];
    chain_wait();
    chain_release();
    const int c = blockIdx.x, chunks = gridDim.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int E = (p.nx + kSortChunk - 1) / kSortChunk;
    for (int q = 0; q < E; q++) {
        const int x = tid * E + q;
        if (x >= p.nx) break;
        const int *h = hist + (int64_t)x * chunks;
        int count = 0, off = 0;
        if (scanned) {
            count = p.counts[x];
            off = h[c];
        } else {
            for (int j = 0; j < chunks; j++) {
                const int v = h[j];
                off += j < c ? v : 0;
                count += v;
            }
        }
        s_next[x] = off;
        s_cnt[x] = count;
    }
    const int slots = scan_segments(s_cnt, p.nx, p.block, s_warp, [&](int x, int count, int start) {
        s_next[x] += start;
        if (x % chunks == c) {
            if (!scanned) p.counts[x] = count;
            write_segment(p, x, start, count);
        }
    });
    if (c == 0 && tid == 0) p.expert_start[p.nx] = slots;
    __syncthreads();
    const int64_t i = (int64_t)c * kSortChunk + tid;
    const int px = i < (int64_t)p.t * p.per ? pair_expert(p.ids, p.expert_map, p.topk, p.per, p.e_local, i) : -1;
    const uint32_t same = __match_any_sync(0xffffffffu, px);
    const int leader = __ffs(same) - 1;
    for (int w = 0; w < 8; w++) {
        if (warp == w) {
            int base = 0;
            if (lane == leader && px >= 0) {
                base = s_next[px];
                s_next[px] = base + __popc(same);
            }
            base = __shfl_sync(0xffffffffu, base, leader);
            if (px >= 0) p.slot[base + __popc(same & ((1u << lane) - 1u))] = (int32_t)i;
        }
        __syncthreads();
    }
}

/* Decode steps: routing and sort in one block when the pairs fit its
 * shared memory (the experts always do: kSortExperts at most) */
constexpr int kSmallPairs = 256;
/* and at most two tokens a warp: the one block routes them one after the
 * other, where the routing kernel has a warp for each */
constexpr int kSmallTokens = 16;

/* Routing and the token sort of a decode step in one launch instead of
 * three: warp w routes tokens w, w + 8, ... (route_token, as k_moe_route);
 * then thread i takes pair i: its expert, each expert's count (shared-memory
 * atomics: the counts, not an order), each expert's padded start (a block
 * scan over the experts, thread i holding experts [i E, i E + E)), and the
 * pair's slot: its expert's start plus the pairs of that expert before it.
 * The same counts, slots, starts and block experts as the three-launch
 * sort. */
template <int NS>
__global__ void __launch_bounds__(256)
    k_moe_route_sort_small(const route_args ra, int32_t *ids_out, float *weights, const sort_params p)
{
    __shared__ int s_px[kSmallPairs];
    __shared__ int s_cnt[kSortExperts]; /* pairs per expert, then each expert's first slot */
    __shared__ int s_warp[8];
    /* The first of the chain: the GEMM may launch at once (it waits). */
    chain_release();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int tok = warp; tok < p.t; tok += 8)
        route_token<NS>(ra, tok, lane, ids_out, weights);
    for (int x = tid; x < p.nx; x += 256) s_cnt[x] = 0;
    __syncthreads(); /* the block's ids in global memory are visible to it */
    const int total = p.t * p.per;
    int px = -1;
    if (tid < total) {
        px = pair_expert(p.ids, p.expert_map, p.topk, p.per, p.e_local, tid);
        s_px[tid] = px;
        if (px >= 0) atomicAdd(&s_cnt[px], 1);
    }
    __syncthreads();
    const int slots = scan_segments(s_cnt, p.nx, p.block, s_warp, [&](int x, int count, int start) {
        p.counts[x] = count;
        write_segment(p, x, start, count);
        s_cnt[x] = start; /* thread tid alone reads and writes its experts' entries */
    });
    if (tid == 0) p.expert_start[p.nx] = slots;
    __syncthreads();
    if (px >= 0) {
        int rank = 0;
        for (int j = 0; j < tid; j++) rank += s_px[j] == px;
        p.slot[s_cnt[px] + rank] = tid;
    }
}

/* ---- 3. act_order or wgmma: the activations of each slot, in sort order -------------- */

constexpr int kGatherThreads = 256;
/* Slot rows a block of k_moe_gather_slots copies at a time: a warp each, or
 * with a permutation the whole block (the launch sizes its grid by it). */
__host__ __device__ constexpr int gather_rows_a_block(bool perm) { return perm ? 1 : kGatherThreads / 32; }

/* Row s of out (k halves, 16-byte aligned rows) for every used slot s: the
 * activations of the slot's token (pair slot[s], token pair / per), in
 * the column order perm[x] of its expert x with PERM, zeros for a padding
 * slot; a perm entry outside [0, k) reads as zero. Without PERM a warp per
 * row at a time (8 rows of a block in flight), 16 bytes a lane and step,
 * four steps' loads issued before their stores; with PERM, whose loads
 * wait on the perm entry before them, a block per row, 2 halves a thread
 * and step (a warp per row was 10 % slower on act_order's 64-token layer).
 * With pair_slot, each used slot's index at its pair (the combine's row of
 * the pair, when the GEMM writes products by slot). With in_weights (rw=in)
 * a routed slot's row is weighed on the way: each activation times the
 * pair's weight rounded to the activation format (bf16: 1, else f16), the
 * product rounded to it (exact in fp32 first: both have at most 11
 * significant bits); a shared expert's slot is copied as it is. */
__device__ __forceinline__ float round16(float x, int bf16)
{
    return bf16 ? __bfloat162float(__float2bfloat16_rn(x)) : __half2float(__float2half_rn(x));
}

__device__ __forceinline__ uint32_t weigh_h2(uint32_t x, float w, int bf16)
{
    if (bf16)
        return qv_h2<true>::pack(__fmul_rn(qv_h2<true>::to_float((uint16_t)(x & 0xFFFFu)), w),
                                 __fmul_rn(qv_h2<true>::to_float((uint16_t)(x >> 16)), w));
    return qv_h2<false>::pack(__fmul_rn(qv_h2<false>::to_float((uint16_t)(x & 0xFFFFu)), w),
                              __fmul_rn(qv_h2<false>::to_float((uint16_t)(x >> 16)), w));
}

__device__ __forceinline__ uint4 weigh_h8(uint4 x, float w, int bf16)
{
    return make_uint4(weigh_h2(x.x, w, bf16), weigh_h2(x.y, w, bf16), weigh_h2(x.z, w, bf16), weigh_h2(x.w, w, bf16));
}

template <bool PERM>
__global__ void __launch_bounds__(kGatherThreads)
    k_moe_gather_slots(const uint16_t *a, const int32_t *slot, const int *block_expert, const int *expert_start,
                       const int32_t *perm, uint16_t *out, int32_t *pair_slot, int nx, int per, int k, int block,
                       const float *in_weights, int topk, int bf16)
{
    /* The GEMM behind may launch now; its griddepcontrol.wait still waits
     * for this whole grid. */
    chain_wait();
    chain_release();
    constexpr int rows_a_block = gather_rows_a_block(PERM);
    const int used = expert_start[nx];
    const int lane = PERM ? threadIdx.x : threadIdx.x & 31, lanes = PERM ? kGatherThreads : 32;
    const int kv = k / 8; /* 16-byte pieces a row */
    for (int s = blockIdx.x * rows_a_block + threadIdx.x / lanes; s < used; s += gridDim.x * rows_a_block) {
        const int32_t sl = slot[s];
        uint16_t *dst = out + (int64_t)s * k;
        if (sl < 0) {
            for (int v = lane; v < kv; v += lanes) reinterpret_cast<uint4 *>(dst)[v] = make_uint4(0u, 0u, 0u, 0u);
            continue;
        }
        if (pair_slot && lane == 0) pair_slot[sl] = s;
        const uint16_t *src = a + (int64_t)(sl / per) * k;
        const int c = sl % per;
        const bool weigh = in_weights && c < topk;
        const float w = weigh ? round16(in_weights[(int64_t)(sl / per) * topk + c], bf16) : 1.0f;
        if constexpr (!PERM) {
            const uint4 *s4 = reinterpret_cast<const uint4 *>(src);
            uint4 *d4 = reinterpret_cast<uint4 *>(dst);
            int v = lane;
            if (weigh) {
                for (; v < kv; v += 32) d4[v] = weigh_h8(__ldg(s4 + v), w, bf16);
            } else {
                for (; v + 96 < kv; v += 128) {
                    const uint4 x0 = __ldg(s4 + v), x1 = __ldg(s4 + v + 32), x2 = __ldg(s4 + v + 64),
                                x3 = __ldg(s4 + v + 96);
                    d4[v] = x0, d4[v + 32] = x1, d4[v + 64] = x2, d4[v + 96] = x3;
                }
                for (; v < kv; v += 32) d4[v] = __ldg(s4 + v);
            }
        } else {
            const int32_t *px = perm + (int64_t)block_expert[s / block] * k;
            for (int j = 2 * lane; j < k; j += 2 * kGatherThreads) {
                const int p0 = px[j], p1 = px[j + 1];
                const uint32_t lo = (unsigned)p0 < (unsigned)k ? src[p0] : 0u;
                const uint32_t hi = (unsigned)p1 < (unsigned)k ? src[p1] : 0u;
                const uint32_t two = lo | hi << 16;
                *reinterpret_cast<uint32_t *>(dst + j) = weigh ? weigh_h2(two, w, bf16) : two;
            }
        }
    }
}

/* ---- 4. the grouped GEMM ----------------------------------------------------------------- */

struct gemm_params {
    const uint16_t *a;          /* (t, k) activations, or (max_slots, k) by slot when a_sorted */
    int a_sorted;
    const uint32_t *b;          /* (nx, k/16, 2n) packed weights */
    int64_t b_expert_words;     /* k/16 * 2n */
    const void *scales;         /* per expert s_expert elements (f16/bf16, or f32 in SC_TENSOR;
                                   FP4: bytes) */
    int64_t s_expert;
    const int32_t *slot;        /* (max_slots) */
    const int *block_expert;    /* (max_blocks) */
    const int *expert_start;    /* (nx + 1) */
    float *inter;               /* (parts, t * per, n) each pair's fp32 product, by K part */
    int64_t part_stride;        /* floats from one K part's products to the next's: t * per * n */
    int kt_part;                /* k16 tiles of K per part (blockIdx.z), a multiple of a stage's */
    int n, k, per, nx;
    int scale_mode, scale_fmt, g_shift, grp_single;
    const float *gscale;        /* WT_FP4_NV: (nx) each expert's f32 global scale, else NULL */
};

/* Expert x's scale array (16- or 32-bit scales; FP4's bytes: fp4_scales). */
__device__ __forceinline__ const void *expert_scales(const gemm_params &p, int x)
{
    const size_t es = p.scale_fmt == SF_F32 ? 4 : 2;
    return static_cast<const char *>(p.scales) + (size_t)x * (size_t)p.s_expert * es;
}

/* Expert x's FP4 scale bytes: (k/g, n) of them. */
__device__ __forceinline__ const void *fp4_scales(const gemm_params &p, int x)
{
    return static_cast<const unsigned char *>(p.scales) + (size_t)x * (size_t)p.s_expert;
}

/* One block of the grouped weight-only GEMM, for code family WT (WT_INT4
 * or WT_FP4_MX / WT_FP4_NV, whose group scales are always in the dequant):
 * slots [blockIdx.y * BM, + BM) of one expert x (1 kernel per family below),
 * over K part blockIdx.z: k16 tiles [z * kt_part, + kt_part) (one part but
 * for decode batches, whose few blocks would leave SMs idle; the combine adds
 * the parts' fp32 sums in increasing z, the red=f32 of the spec).
 * Epilogue, in fp32: the channel or tensor scale (WT_INT4, scale_mode), or
 * expert x's global scale (WT_FP4_NV), with one part only (qv_moe_launch);
 * an FP4 bias is the combine's. */
template <int WT, int MB, bool IS_BF16>
__device__ __forceinline__ void moe_gemm_mma(const gemm_params &p, unsigned char *smem)
{
    using L = stage_layout<WT, MB, false>;
    constexpr int BM = 16 * MB;

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int wn = warp % kWarpsN;
    const int n0 = blockIdx.x * kBN;
    const int base = blockIdx.y * BM; /* first slot of this block */
    chain_wait();
    chain_release();
    /* The grid covers the largest sort; blocks past this one's end have no rows. */
    if (base >= p.expert_start[p.nx]) return;
    const int x = p.block_expert[blockIdx.y];
    const int xs = moe_scale_expert(p.block_expert, blockIdx.y, x);
    const uint32_t *bx = p.b + (int64_t)x * p.b_expert_words;
    const void *sx = wt_is_fp4(WT) ? fp4_scales(p, xs) : expert_scales(p, xs);

    /* wonly.cu's main loop over the block's part of K on expert x's weights
     * and scales. */
    mma_operands o;
    o.a = p.a;
    o.b = bx;
    o.scales = sx;
    o.zeros = nullptr;
    o.n = p.n;
    o.k = p.k;
    o.kt_begin = blockIdx.z * p.kt_part;
    o.kt_end = min(o.kt_begin + p.kt_part, p.k / 16);
    o.grouped = p.scale_mode == SC_GROUP;
    o.g_shift = p.g_shift;
    o.grp_single = p.grp_single;
    o.unbias_h2 = 0u;
    /* Row r of the block is slot base + r: the activations of its token (or
     * its own row of the act_order gather); a padding slot is a zero row. */
    auto rows = [&](int row, bool used, bool &valid) {
        const int32_t sl = used ? p.slot[base + row] : -1;
        valid = sl >= 0;
        return p.a_sorted ? (int64_t)(base + row) : (int64_t)(sl / p.per);
    };
    float acc[MB][8][4];
    /* Warp wk = 0 of each active column adds wk = 1's sums and stores. */
    if (!wo_mma_mainloop<WT, MB, IS_BF16, L, mma_hooks>(smem, o, n0, rows, acc)) return;

    float *red = reinterpret_cast<float *>(smem);
    const void *sx_ep = expert_scales(p, x);
    /* NVFP4: the global scale of expert x (layout.h: it carries the units
     * the dequant left out, 2^(bias - s_pow2), so that y * G is the
     * declared y * g, one fp32 rounding) */
    const float gs = WT == WT_FP4_NV ? __ldg(p.gscale + x) : 1.0f;
    float *const inter = p.inter + blockIdx.z * p.part_stride;
    /* Every slot entry and epilogue scale this thread needs, read before its
     * first store (a load behind a store waits for it: read in the loop
     * below, each store waited for a load of its own). */
    int32_t slot_of[MB][2];
#pragma unroll
    for (int mt = 0; mt < MB; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) slot_of[mt][h] = p.slot[base + mt * 16 + (lane >> 2) + 8 * h];
    float s0[8], s1[8];
#pragma unroll
    for (int j8 = 0; j8 < 8; j8++) {
        const int col = n0 + wn * 64 + j8 * 8 + 2 * (lane & 3);
        s0[j8] = s1[j8] = 1.0f;
        if (p.scale_mode == SC_CHANNEL) {
            s0[j8] = load_scale(sx_ep, single_perm_index(col), p.scale_fmt);
            s1[j8] = load_scale(sx_ep, single_perm_index(col + 1), p.scale_fmt);
        } else if (p.scale_mode == SC_TENSOR) {
            s0[j8] = s1[j8] = load_scale(sx_ep, 0, p.scale_fmt);
        }
    }
#pragma unroll
    for (int mt = 0; mt < MB; mt++)
#pragma unroll
        for (int j8 = 0; j8 < 8; j8++) {
#pragma unroll
            for (int r = 0; r < 4; r++)
                acc[mt][j8][r] = acc[mt][j8][r] + red[red_index<MB>(wn, mt, j8, r, lane)];
            const int col = n0 + wn * 64 + j8 * 8 + 2 * (lane & 3);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int32_t sl;
                if (!moe_slot_row(slot_of[mt][h], &sl)) continue;
                float y0 = acc[mt][j8][2 * h], y1 = acc[mt][j8][2 * h + 1];
                if (p.scale_mode != SC_GROUP) {
                    y0 = y0 * s0[j8];
                    y1 = y1 * s1[j8];
                }
                if (WT == WT_FP4_NV) {
                    y0 = y0 * gs;
                    y1 = y1 * gs;
                }
                __stcg(reinterpret_cast<float2 *>(inter + (int64_t)sl * p.n + moe_out_col(col, p.n)),
                       make_float2(y0, y1));
            }
        }
}

/* The W4A16 experts: Marlin int4 "q+8" codes. 16- and 32-row blocks run two
 * blocks per SM (registers capped at 128), 64-row blocks one. */
template <int MB, bool IS_BF16>
__global__ void __launch_bounds__(kThreads, MB <= 2 ? 2 : 1) k_moe_gemm_w4a16_mma(const gemm_params p)
{
    extern __shared__ __align__(16) unsigned char smem[];
    moe_gemm_mma<WT_INT4, MB, IS_BF16>(p, smem);
}

/* The FP4 experts (WT_FP4_MX, WT_FP4_NV): e2m1 codes in the same words,
 * one scale byte per (group, column). */
template <int WT, int MB, bool IS_BF16>
__global__ void __launch_bounds__(kThreads, MB <= 2 ? 2 : 1) k_moe_gemm_fp4_mma(const gemm_params p)
{
    extern __shared__ __align__(16) unsigned char smem[];
    moe_gemm_mma<WT, MB, IS_BF16>(p, smem);
}

/* ---- 4b. the grouped fp8 block-128 GEMM ------------------------------------------------ */

/* DeepSeek-V3's expert arithmetic (the w8a8-fp8-block128 row's, kernels/
 * aq_gemm.cuh): e4m3 x e4m3 through exact fp16 conversion and fp16 mma.sync
 * with fp32 accumulation, one 128-K partial per stage promoted into the fp32
 * total as total + partial * (s_a[kt][token] * s_w[kt][col / 128]), three fp32
 * roundings, never contracted. A block owns BM slots (one expert) x 128
 * columns (one block-scale column): 4 warps of 32 columns each. */
constexpr int kF8Threads = 128;
constexpr int kF8BN = 128;
constexpr int kF8BK = 128;
static_assert(kF8BK == 128, "the tiles' rows are moe_swz128's 128 bytes");
constexpr int kF8NT = 4; /* n8 tiles per warp */

template <int MW> struct f8_stage {
    static constexpr int bm = 16 * MW;
    static constexpr int a_bytes = bm * kF8BK;
    static constexpr int b_bytes = kF8BN * kF8BK;
    static constexpr int bytes = a_bytes + b_bytes;
    static constexpr int stages = 4;
    static constexpr int total = stages * bytes;
};

template <int MW>
__global__ void __launch_bounds__(kF8Threads) k_moe_gemm_fp8_b128(const moe_f8_params p)
{
    using S = f8_stage<MW>;
    extern __shared__ __align__(128) uint8_t smem8[];
    const int tid = threadIdx.x, lane = tid & 31, wn = tid >> 5;
    const int n0 = blockIdx.x * kF8BN;
    const int base = blockIdx.y * S::bm;
    chain_wait();
    chain_release();
    if (base >= p.expert_start[p.nx]) return;
    const int x = p.block_expert[blockIdx.y];
    const int ktiles = (p.k + kF8BK - 1) / kF8BK, nbk = (p.n + 127) / 128;
    const int64_t N = p.n, K = p.k;
    const uint8_t *bx = p.b + (int64_t)x * N * K;
    const int xs = moe_scale_expert(p.block_expert, blockIdx.y, x);
    const float *wsx = p.w_scale + (int64_t)xs * ktiles * nbk;

    /* The token of each A row this thread copies (-1: padding, a zero row). */
    constexpr int a_iters = S::bm * 8 / kF8Threads;
    int64_t a_tok[a_iters];
#pragma unroll
    for (int i = 0; i < a_iters; i++) {
        const int32_t sl = p.slot[base + ((tid + i * kF8Threads) >> 3)];
        a_tok[i] = sl >= 0 ? sl / p.per : -1;
    }
    auto load_stage = [&](int s, int kt) {
        const int64_t k0 = (int64_t)kt * kF8BK;
        uint8_t *sa = smem8 + s * S::bytes;
        uint8_t *sb = sa + S::a_bytes;
#pragma unroll
        for (int i = 0; i < a_iters; i++) {
            const int idx = tid + i * kF8Threads, r = idx >> 3, c = idx & 7;
            const int64_t kk = k0 + 16 * c;
            const bool pred = a_tok[i] >= 0 && kk < K;
            qv_cp_async16(sa + moe_swz128(r, c), pred ? p.a + a_tok[i] * K + kk : p.a, pred);
        }
        for (int idx = tid; idx < kF8BN * 8; idx += kF8Threads) {
            const int r = idx >> 3, c = idx & 7;
            const int64_t col = n0 + r, kk = k0 + 16 * c;
            const bool pred = col < N && kk < K;
            qv_cp_async16(sb + moe_swz128(r, c), pred ? bx + col * K + kk : bx, pred);
        }
    };

    float acc[MW][kF8NT][4], part[MW][kF8NT][4];
#pragma unroll
    for (int i = 0; i < MW; i++)
#pragma unroll
        for (int t = 0; t < kF8NT; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][t][e] = 0.0f;
    /* The token of each accumulator row of this thread: rows 16 i + lane/4 + 8 hh. */
    int64_t r_tok[MW][2];
#pragma unroll
    for (int i = 0; i < MW; i++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int32_t sl = p.slot[base + i * 16 + (lane >> 2) + 8 * hh];
            r_tok[i][hh] = sl >= 0 ? sl / p.per : -1;
        }

#pragma unroll
    for (int s = 0; s < S::stages - 1; s++) {
        if (s < ktiles) load_stage(s, s);
        qv_cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        qv_cp_async_wait<S::stages - 2>();
        __syncthreads();
        /* refill the stage consumed in the previous iteration (everyone is past it) */
        const int nx = kt + S::stages - 1;
        if (nx < ktiles) load_stage(nx % S::stages, nx);
        qv_cp_async_commit();
        const uint8_t *sa = smem8 + (kt % S::stages) * S::bytes;
        const uint8_t *sb = sa + S::a_bytes;
#pragma unroll
        for (int i = 0; i < MW; i++)
#pragma unroll
            for (int t = 0; t < kF8NT; t++)
#pragma unroll
                for (int e = 0; e < 4; e++) part[i][t][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < kF8BK / 32; ks++) {
            uint32_t af[MW][4], ah[MW][8];
#pragma unroll
            for (int i = 0; i < MW; i++) {
                qv_ldmatrix_x4(af[i], sa + moe_swz128(i * 16 + (lane & 15), 2 * ks + (lane >> 4)));
                aq_e4m3_frag_a(af[i], ah[i]);
            }
            uint32_t bf[kF8NT][2];
#pragma unroll
            for (int pr = 0; pr < kF8NT / 2; pr++) {
                const int r = 8 * kF8NT * wn + 16 * pr + ((lane >> 4) << 3) + (lane & 7);
                uint32_t v[4];
                qv_ldmatrix_x4(v, sb + moe_swz128(r, 2 * ks + ((lane >> 3) & 1)));
                bf[2 * pr][0] = v[0];
                bf[2 * pr][1] = v[1];
                bf[2 * pr + 1][0] = v[2];
                bf[2 * pr + 1][1] = v[3];
            }
#pragma unroll
            for (int t = 0; t < kF8NT; t++) {
                uint32_t bh[4];
                aq_e4m3_frag_b(bf[t], bh);
#pragma unroll
                for (int i = 0; i < MW; i++) aq_mma_f16_k32(part[i][t], ah[i], bh);
            }
        }
        /* promotion with the block scales of K tile kt */
        const float sw = wsx[(int64_t)kt * nbk + n0 / 128];
#pragma unroll
        for (int i = 0; i < MW; i++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int64_t tok = r_tok[i][hh];
                const float s_ab = tok >= 0 ? __fmul_rn(p.a_scale[(int64_t)kt * p.t + tok], sw) : 0.0f;
#pragma unroll
                for (int t = 0; t < kF8NT; t++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        float &tot = acc[i][t][2 * hh + e];
                        tot = __fadd_rn(tot, __fmul_rn(part[i][t][2 * hh + e], s_ab));
                    }
            }
    }
    qv_cp_async_wait<0>();

    /* The rows' slot entries, read before the first store (as in
     * moe_gemm_mma). */
    int32_t slot_of[MW][2];
#pragma unroll
    for (int i = 0; i < MW; i++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) slot_of[i][hh] = p.slot[base + i * 16 + (lane >> 2) + 8 * hh];
#pragma unroll
    for (int i = 0; i < MW; i++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            int32_t sl;
            if (!moe_slot_row(slot_of[i][hh], &sl)) continue;
#pragma unroll
            for (int t = 0; t < kF8NT; t++) {
                const int col = n0 + 8 * kF8NT * wn + 8 * t + 2 * (lane & 3);
                if (col >= p.n) continue;
                __stcg(reinterpret_cast<float2 *>(p.inter + (int64_t)sl * N + col),
                       make_float2(acc[i][t][2 * hh], acc[i][t][2 * hh + 1]));
            }
        }
}

/* ---- 5. the combine ------------------------------------------------------------------------ */

constexpr int kCombineThreads = 256;
constexpr int kGateThreads = 128;

/* sgate: RN_a(sigmoid(RN_a(x[tok] . g[sx]))), token tok's gate of shared
 * expert sx, on every thread of a block of kGateThreads: the K products
 * summed in fp32 (each thread a strided part by fused multiply-adds, then a
 * fixed tree over the block, so the result is a function of the inputs
 * alone), rounded to the activation format, CUDA's expf (2 ulps, as the
 * spec's exp= declares) and an IEEE division, rounded again. part: the
 * block's kGateThreads / 32 floats of shared memory. */
__device__ __forceinline__ float shared_gate_value(const uint16_t *a, const uint16_t *g, int64_t tok, int sx, int k,
                                                   int bf16, float *part)
{
    const uint16_t *x = a + tok * k, *gv = g + (int64_t)sx * k;
    float z = 0.0f;
    for (int i = threadIdx.x; i < k; i += kGateThreads)
        z = bf16 ? fmaf(qv_h2<true>::to_float(x[i]), qv_h2<true>::to_float(gv[i]), z)
                 : fmaf(qv_h2<false>::to_float(x[i]), qv_h2<false>::to_float(gv[i]), z);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) z = __fadd_rn(z, __shfl_xor_sync(0xffffffffu, z, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = z;
    __syncthreads();
    float s = part[0];
    for (int w = 1; w < kGateThreads / 32; w++) s = __fadd_rn(s, part[w]);
    __syncthreads(); /* part is free again */
    const float za = round16(s, bf16);
    return round16(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-za))), bf16);
}

/* gate[t][sx] (shared_gate_value) for token blockIdx.x and shared expert
 * blockIdx.y. */
__global__ void __launch_bounds__(kGateThreads)
    k_moe_shared_gate(const uint16_t *a, const uint16_t *g, float *gate, int shared, int k, int bf16)
{
    chain_wait();
    __shared__ float part[kGateThreads / 32];
    const int tok = blockIdx.x, sx = blockIdx.y;
    const float v = shared_gate_value(a, g, tok, sx, k, bf16, part);
    if (threadIdx.x == 0) gate[(int64_t)tok * shared + sx] = v;
}

/* One term of out[t][col .. col + 3], pair c of token t in choice order,
 * added to y (J: the terms before it): the pair's fp32 product (the sum of
 * its `parts` K parts in increasing part, part(z) giving part z's four
 * columns) plus its expert's bias (FP4 experts: bias (nx, n) codes of
 * bias_fmt, an SF_*, in scale_perm_single order, or NULL for none), the
 * expert's epilogue ending there, then weighed as rw says: a routed pair by
 * its router weight, a shared one by its gate (w: either, or 1 for a shared
 * expert without gate, has_gate false); rw=in's routed pairs enter with
 * weight 1 (the gather weighed their input). The terms are summed in fp32
 * (sum=f32) or each rounded to the output format and added in it (sum=out:
 * an fp32 sum of two 16-bit values rounded to 16 bits is their correctly
 * rounded sum, since fp32 carries 24 >= 2 * 11 + 2 bits). */
template <bool IS_BF16, class Part>
__device__ __forceinline__ void combine_term(float (&y)[4], int J, const Part &part, int parts, int c, int x, float w,
                                             bool has_gate, const void *bias, int bias_fmt, int n, int col, int topk,
                                             int rw, int sum)
{
    const float4 v4 = part(0);
    float v[4] = {v4.x, v4.y, v4.z, v4.w};
    for (int z = 1; z < parts; z++) {
        const float4 u4 = part(z);
        float q[4] = {u4.x, u4.y, u4.z, u4.w};
#ifdef QV_MUTANT_gpu_moe_ksplit_f16_reduce
        /* Mutant (class 4, vLLM #6795): the K parts reduced in the 16-bit
         * output format: the running sum and the part rounded to it, and
         * their sum rounded again. */
        wo_round_pair<IS_BF16>(q[0], q[1]);
        wo_round_pair<IS_BF16>(q[2], q[3]);
        wo_round_pair<IS_BF16>(v[0], v[1]);
        wo_round_pair<IS_BF16>(v[2], v[3]);
#endif
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] = __fadd_rn(v[e], q[e]);
#ifdef QV_MUTANT_gpu_moe_ksplit_f16_reduce
        wo_round_pair<IS_BF16>(v[0], v[1]);
        wo_round_pair<IS_BF16>(v[2], v[3]);
#endif
    }
    float b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (bias) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            b[e] = load_scale(bias, (int64_t)x * n + single_perm_index(col + e), bias_fmt);
#ifndef QV_MUTANT_gpu_moe_bias_unweighted
            /* (Mutant QV_MUTANT_gpu_moe_bias_unweighted moves this addition after the weight.) */
            v[e] = __fadd_rn(v[e], b[e]);
#endif
        }
    }
    if (rw == QV_RW_OUT) {
        /* the product rounded, the weight rounded, their product rounded
         * (exact in fp32 before that rounding) */
        const bool weighed = c < topk || has_gate;
        const float wr = round16(w, IS_BF16);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float pr = round16(v[e], IS_BF16);
            v[e] = weighed ? round16(__fmul_rn(wr, pr), IS_BF16) : pr;
        }
    } else if (c >= topk && has_gate) {
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] = __fmul_rn(w, v[e]);
#ifdef QV_MUTANT_gpu_moe_weight_in_twice
    /* Mutant (class 32, vLLM #43694): with the weight on the expert's
     * input (rw=in, the gather), the product weighed by it again. */
    } else if (c < topk && (rw == QV_RW_ACC || rw == QV_RW_IN)) {
#else
    } else if (c < topk && rw == QV_RW_ACC) {
#endif
#ifdef QV_MUTANT_gpu_moe_weight_after_cast
        /* Mutant (class 25, vLLM #32002): the router weight applied after the
         * product is rounded to the output format. */
        wo_round_pair<IS_BF16>(v[0], v[1]);
        wo_round_pair<IS_BF16>(v[2], v[3]);
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] = __fmul_rn(v[e], w);
        wo_round_pair<IS_BF16>(v[0], v[1]);
        wo_round_pair<IS_BF16>(v[2], v[3]);
#else
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] = __fmul_rn(w, v[e]);
#endif
    }
#ifdef QV_MUTANT_gpu_moe_bias_unweighted
    /* Mutant (class 24, NeMo Automodel #2591): each expert's bias added
     * after its router weight, so every routed choice adds its whole
     * bias to the token. */
#pragma unroll
    for (int e = 0; e < 4; e++) v[e] = __fadd_rn(v[e], b[e]);
#endif
    if (sum == QV_MSUM_OUT) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float q = round16(v[e], IS_BF16);
            y[e] = J ? round16(__fadd_rn(y[e], q), IS_BF16) : q;
        }
    } else {
#pragma unroll
        for (int e = 0; e < 4; e++) y[e] = J ? __fadd_rn(y[e], v[e]) : v[e];
    }
}

/* Pair c of token tok's weight for combine_term: its router weight (c <
 * topk), its shared expert's gate (gate (t, per - topk)), or 1. */
__device__ __forceinline__ float combine_weight(const float *weights, const float *gate, int64_t tok, int c, int topk,
                                                int per)
{
    return c < topk ? weights[tok * topk + c] : gate ? gate[tok * (per - topk) + c - topk] : 1.0f;
}

/* Where pair `pair`'s product rows are in inter: row pair_slot[pair] (the
 * wgmma kernel's slot), or row pair. */
__device__ __forceinline__ int64_t combine_row(const int32_t *pair_slot, int64_t pair)
{
    return pair_slot ? pair_slot[pair] : pair;
}

/* The combine's launch arguments (both forms). */
struct combine_params {
    const float *inter;       /* parts x (rows, n) fp32 products, part_stride floats apart */
    const int32_t *pair_slot; /* (t * per), or NULL: pair p's row is p */
    int parts;
    int64_t part_stride;
    const int32_t *ids;       /* (t, topk) */
    const float *weights;     /* (t, topk) */
    const int32_t *expert_map;
    const void *bias;         /* (nx, n) codes of bias_fmt, or NULL */
    int bias_fmt;
    uint32_t *out;            /* (t, n) f16/bf16 pairs */
    int t, n, topk, per, e_local, rw, sum;
    const float *gate;        /* (t, per - topk), or NULL */
    /* the staged form's own gates (sgate, instead of gate): the activations
     * (t, k) of format a_bf16 and the shared experts' gate vectors
     * (per - topk, k), or NULL */
    const uint16_t *a, *gate_vec;
    int k, a_bf16;
};

/* out[t][col .. col + 3] for every token: each term (combine_term) read
 * where it lies, one cast at the end; a token with no local choice is 0.
 * Block (x, y): columns [1024 x, + 1024) of tokens y, y + gridDim.y, ...;
 * each thread four columns (n % 4 == 0: one float4 of each pair's row). The
 * form for many tokens, where the blocks keep the memory busy. */
template <bool IS_BF16>
__global__ void __launch_bounds__(kCombineThreads) k_moe_combine(const combine_params p)
{
    chain_wait();
    const int col = (blockIdx.x * kCombineThreads + threadIdx.x) * 4;
    if (col >= p.n) return;
    for (int tok = blockIdx.y; tok < p.t; tok += gridDim.y) {
        float y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        int J = 0;
        for (int c = 0; c < p.per; c++) {
            const int64_t pair = (int64_t)tok * p.per + c;
            const int x = pair_expert(p.ids, p.expert_map, p.topk, p.per, p.e_local, pair);
            if (x < 0) continue;
            const float *src = p.inter + combine_row(p.pair_slot, pair) * p.n + col;
            const auto part = [&](int z) {
                return __ldcg(reinterpret_cast<const float4 *>(src + z * p.part_stride));
            };
            combine_term<IS_BF16>(y, J, part, p.parts, c, x, combine_weight(p.weights, p.gate, tok, c, p.topk, p.per),
                                  p.gate != nullptr, p.bias, p.bias_fmt, p.n, col, p.topk, p.rw, p.sum);
            J++;
        }
        uint32_t *o = p.out + ((int64_t)tok * p.n + col) / 2;
        o[0] = qv_h2<IS_BF16>::pack(y[0], y[1]);
        o[1] = qv_h2<IS_BF16>::pack(y[2], y[3]);
    }
}

/* The staged form, for decode batches (t <= kStagedTokens, per * parts <=
 * kStageTerms): there k_moe_combine has a block or a few per token, each
 * thread reading its per x parts products one after the other behind the
 * id and map look-ups, so a token's few blocks wait on a chain of loads.
 * Here block (x, y) takes columns [64 x, + 64) of token y: its threads look
 * up the pairs' experts, rows and weights, then load every (pair, part)
 * row piece into shared memory at once, and 16 threads sum them as
 * combine_term says, in the same order: the same bits. With gate_vec the
 * block computes its token's shared gates itself (shared_gate_value, the
 * gate kernel's arithmetic) before waiting on the GEMM, since they read
 * the layer's inputs alone: one launch fewer, and that work off the chain. */
constexpr int kStagedTokens = 16;
constexpr int kStageCols = 64;
constexpr int kStageTerms = 96;
constexpr int kStageThreads = 128;
static_assert(kStageThreads == kGateThreads, "the staged combine computes gates as the gate kernel");

template <bool IS_BF16>
__global__ void __launch_bounds__(kStageThreads) k_moe_combine_staged(const combine_params p)
{
    constexpr int quads = kStageCols / 4;
    __shared__ float4 s_v[kStageTerms * quads];
    __shared__ int64_t s_row[kStageTerms]; /* -1: not a local pair */
    __shared__ int s_x[kStageTerms];
    __shared__ float s_w[kStageTerms];
    __shared__ float s_gate[kStageTerms];
    __shared__ float s_part[kGateThreads / 32];
    const int tok = blockIdx.y, col0 = blockIdx.x * kStageCols;
    if (p.gate_vec) {
        for (int sx = 0; sx < p.per - p.topk; sx++) {
            const float g = shared_gate_value(p.a, p.gate_vec, tok, sx, p.k, p.a_bf16, s_part);
            if (threadIdx.x == 0) s_gate[sx] = g;
        }
        __syncthreads();
    }
    chain_wait();
    for (int c = threadIdx.x; c < p.per; c += kStageThreads) {
        const int64_t pair = (int64_t)tok * p.per + c;
        const int x = pair_expert(p.ids, p.expert_map, p.topk, p.per, p.e_local, pair);
        s_x[c] = x;
        s_row[c] = x < 0 ? -1 : combine_row(p.pair_slot, pair);
        s_w[c] = x < 0                          ? 0.0f
                 : c >= p.topk && p.gate_vec ? s_gate[c - p.topk]
                                               : combine_weight(p.weights, p.gate, tok, c, p.topk, p.per);
    }
    __syncthreads();
    const int in_n = (p.n - col0) / 4; /* this block's quads within n */
    for (int i = threadIdx.x; i < p.per * p.parts * quads; i += kStageThreads) {
        const int q = i % quads, cz = i / quads, c = cz / p.parts, z = cz % p.parts;
        const int64_t row = s_row[c];
        if (row >= 0 && q < in_n)
            s_v[i] = __ldcg(reinterpret_cast<const float4 *>(p.inter + z * p.part_stride + row * p.n + col0 + 4 * q));
    }
    __syncthreads();
    const int q = threadIdx.x, col = col0 + 4 * q;
    if (q >= quads || q >= in_n) return;
    const bool has_gate = p.gate || p.gate_vec;
    float y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int J = 0;
    for (int c = 0; c < p.per; c++) {
        const int x = s_x[c];
        if (x < 0) continue;
        const float4 *terms = s_v + c * p.parts * quads + q;
        const auto part = [&](int z) { return terms[z * quads]; };
        combine_term<IS_BF16>(y, J, part, p.parts, c, x, s_w[c], has_gate, p.bias, p.bias_fmt, p.n, col, p.topk,
                              p.rw, p.sum);
        J++;
    }
    uint32_t *o = p.out + ((int64_t)tok * p.n + col) / 2;
    o[0] = qv_h2<IS_BF16>::pack(y[0], y[1]);
    o[1] = qv_h2<IS_BF16>::pack(y[2], y[3]);
}

size_t up256(size_t x) { return (x + 255) & ~(size_t)255; }

template <int WT, int MB, bool BF> qv_status launch_gemm(const gemm_params &g, dim3 grid, cudaStream_t stream)
{
    constexpr int smem = stage_layout<WT, MB, false>::total;
    void (*kernel)(gemm_params);
    if constexpr (WT == WT_INT4)
        kernel = k_moe_gemm_w4a16_mma<MB, BF>;
    else
        kernel = k_moe_gemm_fp4_mma<WT, MB, BF>;
    static std::atomic<uint64_t> attr_dev(0); /* the devices its attributes are set on */
    QV_TRY(qv_func_attr_once(attr_dev, [&]() -> qv_status {
        QV_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                    "cudaFuncSetAttribute (grouped GEMM shared memory)");
        QV_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         (int)cudaSharedmemCarveoutMaxShared),
                    "cudaFuncSetAttribute (grouped GEMM carveout)");
        return QV_OK;
    }));
    return launch_chained(kernel, grid, dim3(kThreads), smem, stream, "grouped GEMM launch", g);
}

template <int WT, bool BF> qv_status launch_gemm_mb(int mb, const gemm_params &g, dim3 grid, cudaStream_t stream)
{
    if (mb == 1) return launch_gemm<WT, 1, BF>(g, grid, stream);
    if (mb == 2) return launch_gemm<WT, 2, BF>(g, grid, stream);
    return launch_gemm<WT, 4, BF>(g, grid, stream);
}

/* The grouped weight-only GEMM of kind (QV_MOE_W4A16, _MXFP4 or _NVFP4). */
template <bool BF> qv_status launch_gemm_kind(int kind, int mb, const gemm_params &g, dim3 grid, cudaStream_t stream)
{
    if (kind == QV_MOE_MXFP4) return launch_gemm_mb<WT_FP4_MX, BF>(mb, g, grid, stream);
    if (kind == QV_MOE_NVFP4) return launch_gemm_mb<WT_FP4_NV, BF>(mb, g, grid, stream);
    return launch_gemm_mb<WT_INT4, BF>(mb, g, grid, stream);
}

template <int MW> qv_status launch_fp8(const moe_f8_params &f, dim3 grid, cudaStream_t stream)
{
    constexpr int smem = f8_stage<MW>::total;
    static std::atomic<uint64_t> attr_dev(0); /* the devices its attributes are set on */
    QV_TRY(qv_func_attr_once(attr_dev, [&]() -> qv_status {
        QV_CUDA_TRY(cudaFuncSetAttribute(k_moe_gemm_fp8_b128<MW>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                    "cudaFuncSetAttribute (grouped fp8 GEMM shared memory)");
        return QV_OK;
    }));
    return launch_chained(k_moe_gemm_fp8_b128<MW>, grid, dim3(kF8Threads), smem, stream, "grouped fp8 GEMM launch",
                          f);
}

/* The routing (small: with the decode step's sort, one block) for NS slots a
 * lane, the first launch of the chain. */
template <int NS>
qv_status launch_route_ns(bool small, const qv_moe_dev *d, int32_t *ids, float *weights, const sort_params &sp,
                          cudaStream_t stream)
{
    if (small)
        k_moe_route_sort_small<NS><<<1, 256, 0, stream>>>(route_args_of(d), ids, weights, sp);
    else
        k_moe_route<NS><<<(d->t + 3) / 4, 128, 0, stream>>>(route_args_of(d), d->t, ids, weights);
    QV_CUDA_TRY(cudaGetLastError(), small ? "routing and sort launch" : "routing kernel launch");
    return QV_OK;
}

qv_status launch_route(int ns, bool small, const qv_moe_dev *d, int32_t *ids, float *weights, const sort_params &sp,
                       cudaStream_t stream)
{
    switch (ns) {
    case 1: return launch_route_ns<1>(small, d, ids, weights, sp, stream);
    case 2: return launch_route_ns<2>(small, d, ids, weights, sp, stream);
    case 4: return launch_route_ns<4>(small, d, ids, weights, sp, stream);
    case 8: return launch_route_ns<8>(small, d, ids, weights, sp, stream);
    default: return launch_route_ns<32>(small, d, ids, weights, sp, stream);
    }
}

} /* namespace */

extern "C" qv_status qv_moe_pick(qv_moe_dev *d, const qv_launch_opts *o)
{
    qv_launch_ctx c;
    QV_TRY(qv_launch_ctx_get(o, &c));
    /* Mean rows per expert that receives any. */
    const int64_t pairs = (int64_t)d->t * (d->topk + d->shared);
    const int nx = d->e_local + d->shared;
    const int64_t busy = pairs < nx ? pairs : nx;
    const int64_t mean = busy ? pairs / busy : 0;
    const int min_rows = c.o->moe_wg_min_rows ? c.o->moe_wg_min_rows : c.t->moe_wg_min_rows;
    const bool fp8 = d->kind == QV_MOE_FP8_B128;
    d->pairs = 0;
    d->fit = 0;
    d->wg = min_rows != QV_OPT_OFF && mean >= min_rows && (fp8 ? qv_moe_fp8_wg_covers(d) : qv_moe_wg_covers(d));
    if (d->wg && fp8) {
        d->mb = 4; /* kernels/moe_fp8_wg.cu: 64-slot blocks */
    } else if (d->wg) {
        /* Wider slot tiles once most experts fill them (fewer padding
         * rows with the narrower below that). */
        const int rows256 =
            d->kind == QV_MOE_MXFP4 ? c.t->moe_wg_block256_rows_mxfp4 : c.t->moe_wg_block256_rows;
        int block = c.o->moe_wg_block                        ? c.o->moe_wg_block
                    : mean >= rows256                   ? 256
                    : mean >= c.t->moe_wg_block128_rows ? 128
                                                        : 64;
        /* Fit: the sort's blocks at 64 rows, an expert's last one to three
         * in one tile. Asked, wherever no other block is forced and pairs
         * are not asked; unset, in the tuning's range of mean rows per
         * expert, no block or pairs forced. */
        d->fit = c.o->moe_wg_fit == QV_OPT_ON
                     ? (!c.o->moe_wg_block || c.o->moe_wg_block == 64) && c.o->moe_wg_pairs != QV_OPT_ON
                     : !c.o->moe_wg_fit && !c.o->moe_wg_block && !c.o->moe_wg_pairs &&
                           c.t->moe_wg_fit_rows != QV_OPT_OFF && mean >= c.t->moe_wg_fit_rows &&
                           mean < c.t->moe_wg_fit_rows_end;
        /* Pairs, where the blocks are not fitted: the sort's blocks at 128
         * rows, two of an expert in one 256-slot tile. Asked, wherever no
         * other block is forced; unset, from the tuning's mean of rows per
         * expert on, no block forced. */
        d->pairs = !d->fit && (c.o->moe_wg_pairs == QV_OPT_ON
                                   ? !c.o->moe_wg_block || c.o->moe_wg_block == 128
                                   : !c.o->moe_wg_pairs && !c.o->moe_wg_block &&
                                         c.t->moe_wg_pairs_rows != QV_OPT_OFF && mean >= c.t->moe_wg_pairs_rows);
        if (d->fit) block = 64;
        if (d->pairs) block = 128;
        d->mb = block / 16;
    } else {
        /* The mma.sync kernel: 16-row blocks for decode-like batches,
         * 64-row blocks (the dequantized B reused by four m16 tiles) once
         * experts get more than 32 rows. */
        d->mb = mean <= 16 ? 1 : mean <= 32 ? 2 : 4;
    }
    d->ksplit = 1;
    if (qv_moe_ksplit_covers(d)) {
        /* Decode batches: a block streams its expert's (k, 256) weights
         * alone, so with fewer blocks than SMs some stay idle and the rest
         * hold one block where they take two (16- and 32-row blocks; one of
         * 64): parts enough to fill those places. Blocks that can hold rows:
         * one per busy expert and column block, plus one per full block of
         * pairs. (From as many blocks as SMs on, splitting made Mixtral's
         * one token 3 % slower on an H100.) */
        const int64_t n_blocks = (d->n + kBN - 1) / kBN;
        const int64_t blocks = n_blocks * (pairs / (16 * d->mb) + busy);
        const int64_t room = (int64_t)(d->mb <= 2 ? 2 : 1) * c.sms;
        int parts = 1;
        if (c.o->moe_ksplit) {
            parts = c.o->moe_ksplit;
        } else if (blocks > 0 && blocks < c.sms) {
            const int64_t want = (room + blocks - 1) / blocks, most = (d->k / 16) / 16;
            parts = (int)(want < most ? want : most);
            if (parts > QV_MOE_KSPLIT_MAX) parts = QV_MOE_KSPLIT_MAX;
            if (parts < 1) parts = 1;
        }
        d->ksplit = parts;
    }
    /* The combine's staged form where the plain one leaves most SMs idle
     * (the same bits either way); where the plain grid already spans the
     * GPU, the staged form's extra blocks and copies cost more than its
     * parallel loads save. */
    d->staged = (int64_t)((d->n + 4 * kCombineThreads - 1) / (4 * kCombineThreads)) * d->t * 2 <= c.sms;
    return QV_OK;
}

extern "C" int qv_moe_ksplit_covers(const qv_moe_dev *d)
{
    return !d->wg && (d->kind == QV_MOE_W4A16 || d->kind == QV_MOE_MXFP4) && d->scale_mode == SC_GROUP;
}

extern "C" int qv_moe_parts(const qv_moe_dev *d, int *kt_part)
{
    const int kt = d->k / 16;
    *kt_part = kt;
    if (d->ksplit <= 1 || kt < 1) return 1;
    /* Parts of whole stages (the main loop's kt ranges start on one). */
    constexpr int stage = wt_traits<WT_INT4>::ks;
    static_assert(wt_traits<WT_FP4_MX>::ks == stage, "the split's kinds share a stage depth");
    const int per = (kt + d->ksplit - 1) / d->ksplit;
    *kt_part = (per + stage - 1) / stage * stage;
    return (kt + *kt_part - 1) / *kt_part;
}

/* Whether d runs on the W4A16 / FP4 wgmma kernel, whose slots' activations
 * are gathered first (a_slots, as with act_order) and which writes each
 * slot's product to the slot's row (whole tiles through tensor-map stores;
 * the combine finds a pair's row through pair_slot). The other kernels write
 * the pair's row; the fp8 wgmma kernel reads A through the slots. The
 * workspace plan and the launch both ask it. */
static bool moe_by_slot(const qv_moe_dev *d) { return d->wg && d->kind != QV_MOE_FP8_B128; }
/* Whether the GEMM reads its activations by slot from a_slots (the slot
 * gather's copy): act_order's permuted rows, rw=in's weighed rows, and every
 * W4A16 / FP4 wgmma run. */
static bool moe_gathered(const qv_moe_dev *d) { return d->act_order || d->rw == QV_RW_IN || moe_by_slot(d); }

extern "C" void qv_moe_ws_plan(const qv_moe_dev *d, int mb, qv_moe_ws *w)
{
    const int per = d->topk + d->shared, nx = d->e_local + d->shared;
    const int64_t pairs = (int64_t)d->t * per;
    w->block = 16 * mb;
    /* sum of ceil(c_x / B) <= floor(pairs / B) + (experts with c_x % B != 0),
     * and those are at most min(nx, pairs): at a decode step of many experts
     * the grid's row blocks are the few that can hold rows, not one per
     * expert (Qwen3 at one token: 9, not 129). */
    const int64_t blocks = pairs / w->block + (pairs < nx ? pairs : nx) + 1;
    w->max_blocks = blocks > 0x7fffffff ? 0x7fffffff : (int)blocks;
    w->max_slots = blocks * w->block;
    size_t off = 0;
    w->ids = off, off += up256(sizeof(int32_t) * (size_t)d->t * d->topk);
    w->weights = off, off += up256(sizeof(float) * (size_t)d->t * d->topk);
    w->counts = off, off += up256(sizeof(int) * (size_t)nx);
    w->expert_start = off, off += up256(sizeof(int) * ((size_t)nx + 1));
    w->block_expert = off, off += up256(sizeof(int) * (size_t)blocks);
    w->slot = off, off += up256(sizeof(int32_t) * (size_t)w->max_slots);
    w->hist = off, off += up256(sizeof(int) * (size_t)nx * (size_t)((pairs + kSortChunk - 1) / kSortChunk));
    const bool by_slot = moe_by_slot(d);
    w->a_slots = off;
    if (moe_gathered(d)) off += up256(2 * (size_t)w->max_slots * (size_t)d->k);
    const int parts = d->ksplit > 1 ? d->ksplit : 1;
    const int64_t rows = by_slot && w->max_slots > pairs ? w->max_slots : pairs;
    w->inter = off, off += up256(sizeof(float) * (size_t)parts * (size_t)rows * (size_t)d->n);
    w->pair_slot = off;
    if (by_slot) off += up256(sizeof(int32_t) * (size_t)pairs);
    /* whole-expert tiles: the lists (kernels/moe_wg.cu) */
    w->tiles = off;
    if (d->pairs || d->fit)
        off += up256(sizeof(int) * qv_moe_tile_lists_ints(qv_moe_tile_blocks(d), w->max_blocks, nx));
    w->gate = off;
    if (d->sgate) off += up256(sizeof(float) * (size_t)d->t * (size_t)d->shared);
    w->bytes = off;
}

extern "C" qv_status qv_moe_launch(const qv_moe_dev *d, void *stream_v)
{
    const int per = d->topk + d->shared, nx = d->e_local + d->shared;
    if (d->topk < 1 || d->topk > QV_MOE_GPU_MAX_TOPK || d->e < d->topk || d->e > 1024)
        return qv_fail(QV_ERR_UNSUPPORTED, "grouped GEMM: topk=%d of e=%d router experts (the routing kernel takes "
                       "topk <= %d, e <= 1024)", d->topk, d->e, QV_MOE_GPU_MAX_TOPK);
    if (d->groups < 0 || d->groups > QV_MOE_GPU_MAX_GROUPS || (d->groups && (d->e % d->groups || d->gtopk < 1 ||
                                                                             d->gtopk > d->groups)))
        return qv_fail(QV_ERR_UNSUPPORTED, "grouped GEMM: groups=%d, gtopk=%d of e=%d router experts (the routing "
                       "kernel takes up to %d groups dividing e, 1 <= gtopk <= groups)", d->groups, d->gtopk, d->e,
                       QV_MOE_GPU_MAX_GROUPS);
    const bool fp8 = d->kind == QV_MOE_FP8_B128, mx = d->kind == QV_MOE_MXFP4, nv = d->kind == QV_MOE_NVFP4;
    if (d->kind != QV_MOE_W4A16 && !fp8 && !mx && !nv)
        return qv_fail(QV_ERR_USAGE, "grouped GEMM: unknown kind %d", d->kind);
    /* FP4: K in whole groups (the scale rows end there) */
    const int n_step = fp8 ? 16 : 64, k_step = mx ? 32 : 16;
    if (nx > kSortExperts)
        return qv_fail(QV_ERR_UNSUPPORTED, "grouped GEMM: %d local and shared experts (the token sort takes %d)", nx,
                       kSortExperts);
    if (nx < 1 || d->t < 1 || d->n < n_step || d->n % n_step || d->k < k_step || d->k % k_step)
        return qv_fail(QV_ERR_SHAPE, "grouped GEMM: t=%d n=%d k=%d with %d experts (n a multiple of %d, k of %d)", d->t,
                       d->n, d->k, nx, n_step, k_step);
    if (fp8 && (d->act_order || !d->a_scale))
        return qv_fail(QV_ERR_USAGE, "grouped fp8 GEMM: activation scales are needed, act_order is not taken");
    if ((mx || nv) && (d->act_order || d->scale_mode != SC_GROUP || d->grp_single || d->g_shift != (mx ? 1 : 0)))
        return qv_fail(QV_ERR_USAGE, "grouped FP4 GEMM: group scales in the dequant (g_shift %d), no act_order",
                       mx ? 1 : 0);
    if (nv && !d->gscale) return qv_fail(QV_ERR_USAGE, "grouped NVFP4 GEMM: the experts' global scales are NULL");
    if (d->rw != QV_RW_ACC && d->rw != QV_RW_OUT && d->rw != QV_RW_IN)
        return qv_fail(QV_ERR_USAGE, "grouped GEMM: unknown rw %d", d->rw);
    if (d->sum != QV_MSUM_F32 && d->sum != QV_MSUM_OUT)
        return qv_fail(QV_ERR_USAGE, "grouped GEMM: unknown sum %d", d->sum);
    if (d->rw == QV_RW_IN && fp8)
        return qv_fail(QV_ERR_USAGE, "grouped GEMM: rw=in weighs f16/bf16 activations, not e4m3");
    if (d->sgate && (fp8 || !d->shared_gate || d->rw == QV_RW_IN))
        return qv_fail(QV_ERR_USAGE, "grouped GEMM: a shared gate needs f16/bf16 activations, its vectors and rw=acc "
                       "or rw=out");
    if (d->bias && !(mx || nv))
        return qv_fail(QV_ERR_UNSUPPORTED, "grouped GEMM: a bias is taken with FP4 experts only");
    const int bias_bytes = d->bias_fmt == QV_FMT_F32 ? 4 : 2;
    if (d->bias && ((d->bias_fmt != QV_FMT_F16 && d->bias_fmt != QV_FMT_BF16 && d->bias_fmt != QV_FMT_F32) ||
                    ((uintptr_t)d->bias & (uintptr_t)(bias_bytes - 1))))
        return qv_fail(QV_ERR_USAGE, "grouped GEMM: the bias must be f16, bf16 or f32 codes, aligned to their size");
    if ((int64_t)d->t * per >= ((int64_t)1 << 31) / 2 || (int64_t)d->n * 2 * 16 >= ((int64_t)1 << 31))
        return qv_fail(QV_ERR_SHAPE, "grouped GEMM: t=%d with %d pairs a token is past the int32 slots", d->t, per);
    if (d->wg && fp8 ? d->mb != 4
        : d->wg      ? d->mb != 4 && d->mb != 8 && d->mb != 16
                     : d->mb != 1 && d->mb != 2 && d->mb != 4)
        return qv_fail(QV_ERR_USAGE, "grouped GEMM: mb=%d (%s)", d->mb,
                       d->wg && fp8 ? "4 on the fp8 wgmma kernel" : d->wg ? "4, 8 or 16 on wgmma" : "1, 2 or 4");
    if (d->ksplit > QV_MOE_KSPLIT_MAX || (d->ksplit > 1 && !qv_moe_ksplit_covers(d)))
        return qv_fail(QV_ERR_USAGE, "grouped GEMM: %d K parts (1 to %d, on the mma.sync kernel with every scale in "
                       "the dequant)", d->ksplit, QV_MOE_KSPLIT_MAX);
    if (d->wg && !fp8 && !qv_moe_wg_covers(d))
        return qv_fail(QV_ERR_UNSUPPORTED, "grouped GEMM: the wgmma kernel does not take kind %d with scale mode %d "
                       "(g_shift %d, act_order %d)", d->kind, d->scale_mode, d->g_shift, d->act_order);
    if (!d->logits || !d->expert_map || !d->a || !d->b || !d->scales || !d->out || !d->workspace ||
        (d->act_order && !d->perm))
        return qv_fail(QV_ERR_USAGE, "grouped GEMM: a device buffer is NULL");
    qv_moe_ws w;
    qv_moe_ws_plan(d, d->mb, &w);
    const int n_blocks = fp8 ? (d->n + kF8BN - 1) / kF8BN : (d->n + kBN - 1) / kBN;
    if (!d->wg && w.max_blocks > 65535)
        return qv_fail(QV_ERR_SHAPE, "grouped GEMM: t=%d needs up to %d row blocks (65535 at most)", d->t, w.max_blocks);
    cudaStream_t stream = (cudaStream_t)stream_v;
    unsigned char *ws = (unsigned char *)d->workspace;
    int32_t *ids = (int32_t *)(ws + w.ids);
    float *weights = (float *)(ws + w.weights);

    sort_params sp;
    sp.ids = ids;
    sp.expert_map = d->expert_map;
    sp.t = d->t;
    sp.topk = d->topk;
    sp.per = per;
    sp.e_local = d->e_local;
    sp.nx = nx;
    sp.block = w.block;
    sp.counts = (int *)(ws + w.counts);
    sp.expert_start = (int *)(ws + w.expert_start);
    sp.block_expert = (int *)(ws + w.block_expert);
    sp.slot = (int32_t *)(ws + w.slot);
    if (d->t <= kSmallTokens && (int64_t)d->t * per <= kSmallPairs) {
        QV_TRY(launch_route(route_slots(d->e), true, d, ids, weights, sp, stream));
    } else {
        QV_TRY(launch_route(route_slots(d->e), false, d, ids, weights, sp, stream));
        const int64_t chunks = ((int64_t)d->t * per + kSortChunk - 1) / kSortChunk;
        int *hist = (int *)(ws + w.hist);
        QV_TRY(launch_chained(k_moe_hist, dim3((unsigned)chunks), dim3(kSortChunk), 0, stream, "token count launch", sp,
                              hist));
        const bool scan = chunks > kSortFuseChunks;
        if (scan)
            QV_TRY(launch_chained(k_moe_hist_scan, dim3((unsigned)((nx + 7) / 8)), dim3(256), 0, stream,
                                  "token count scan launch", sp, hist, (int)chunks));
        QV_TRY(launch_chained(k_moe_scatter, dim3((unsigned)chunks), dim3(kSortChunk), 0, stream, "token sort launch", sp,
                              (const int *)hist, (int)scan));
    }

    /* act_order, and every W4A16 / FP4 wgmma run (the fp8 wgmma kernel reads
     * through the slots): the slots' activations in sort order
     * (max_slots, k), read by row instead of through the slots: a warp per
     * row (act_order: a block), four blocks per SM at most, which leaves
     * the GEMM behind room to start. */
    const bool by_slot = moe_by_slot(d), gathered = moe_gathered(d);
    int32_t *pair_slot = (int32_t *)(ws + w.pair_slot);
    if (gathered) {
        qv_launch_ctx c;
        QV_TRY(qv_launch_ctx_get(NULL, &c));
        const int rows_a_block = gather_rows_a_block(d->act_order), per_sm = 4;
        const int64_t need = (w.max_slots + rows_a_block - 1) / rows_a_block;
        const unsigned blocks = (unsigned)(need < per_sm * (int64_t)c.sms ? (need > 0 ? need : 1) : per_sm * c.sms);
        QV_TRY(launch_chained(d->act_order ? k_moe_gather_slots<true> : k_moe_gather_slots<false>, dim3(blocks),
                              dim3(kGatherThreads), 0, stream, "slot gather launch", (const uint16_t *)d->a, sp.slot,
                              sp.block_expert, sp.expert_start, d->act_order ? d->perm : nullptr,
                              (uint16_t *)(ws + w.a_slots), by_slot ? pair_slot : nullptr, nx, per, d->k, w.block,
                              d->rw == QV_RW_IN ? (const float *)weights : nullptr, d->topk, d->bf16));
    }

    float *inter = (float *)(ws + w.inter);
    int kt_part;
    const int parts = qv_moe_parts(d, &kt_part);
    const int64_t part_stride = (int64_t)d->t * per * d->n;
    const dim3 grid(n_blocks, w.max_blocks, parts);
    if (d->wg && fp8) {
        QV_TRY(qv_moe_fp8_wg_gemm(d, &w, stream));
    } else if (d->wg) {
        QV_TRY(qv_moe_wg_gemm(d, &w, stream));
    } else if (fp8) {
        moe_f8_params f;
        f.a = (const uint8_t *)d->a;
        f.a_scale = d->a_scale;
        f.b = (const uint8_t *)d->b;
        f.w_scale = (const float *)d->scales;
        f.slot = sp.slot;
        f.block_expert = sp.block_expert;
        f.expert_start = sp.expert_start;
        f.inter = inter;
        f.t = d->t;
        f.n = d->n;
        f.k = d->k;
        f.per = per;
        f.nx = nx;
        QV_TRY(d->mb == 1 ? launch_fp8<1>(f, grid, stream) : d->mb == 2 ? launch_fp8<2>(f, grid, stream)
                                                                        : launch_fp8<4>(f, grid, stream));
    } else {
        gemm_params g;
        g.a = gathered ? (const uint16_t *)(ws + w.a_slots) : (const uint16_t *)d->a;
        g.a_sorted = gathered;
        g.b = (const uint32_t *)d->b;
        g.b_expert_words = (int64_t)(d->k / 16) * 2 * d->n;
        g.scales = d->scales;
        g.scale_mode = d->scale_mode;
        g.scale_fmt = d->scale_mode == SC_TENSOR ? SF_F32 : d->bf16 ? SF_BF16 : SF_F16;
        g.s_expert = d->scale_mode == SC_TENSOR ? 1 : d->scale_mode == SC_CHANNEL || d->grp_single
                                                             ? d->n
                                                             : (int64_t)(d->k >> (d->g_shift + 4)) * d->n;
        g.g_shift = d->g_shift;
        g.grp_single = d->grp_single;
        g.gscale = nv ? d->gscale : nullptr;
        g.slot = sp.slot;
        g.block_expert = sp.block_expert;
        g.expert_start = sp.expert_start;
        g.inter = inter;
        g.part_stride = part_stride;
        g.kt_part = kt_part;
        g.n = d->n;
        g.k = d->k;
        g.per = per;
        g.nx = nx;
        QV_TRY(d->bf16 ? launch_gemm_kind<true>(d->kind, d->mb, g, grid, stream)
                       : launch_gemm_kind<false>(d->kind, d->mb, g, grid, stream));
    }

    const bool staged = d->staged && d->t <= kStagedTokens && (int64_t)per * parts <= kStageTerms;
    float *gate = d->sgate ? (float *)(ws + w.gate) : nullptr;
    const bool gated = gate && d->shared > 0;
    if (gated && !staged) {
        if (d->shared > 65535) return qv_fail(QV_ERR_SHAPE, "grouped GEMM: %d gated shared experts", d->shared);
        QV_TRY(launch_chained(k_moe_shared_gate, dim3((unsigned)d->t, (unsigned)d->shared), dim3(kGateThreads), 0,
                              stream, "shared gate launch", (const uint16_t *)d->a, (const uint16_t *)d->shared_gate,
                              gate, d->shared, d->k, d->bf16));
    }

    combine_params cp;
    cp.inter = inter;
    cp.pair_slot = by_slot ? (const int32_t *)pair_slot : nullptr;
    cp.parts = parts;
    cp.part_stride = part_stride;
    cp.ids = ids;
    cp.weights = weights;
    cp.expert_map = d->expert_map;
    cp.bias = d->bias;
    cp.bias_fmt = d->bias_fmt == QV_FMT_F32 ? SF_F32 : d->bias_fmt == QV_FMT_BF16 ? SF_BF16 : SF_F16;
    cp.out = (uint32_t *)d->out;
    cp.t = d->t;
    cp.n = d->n;
    cp.topk = d->topk;
    cp.per = per;
    cp.e_local = d->e_local;
    cp.rw = d->rw;
    cp.sum = d->sum;
    cp.a = (const uint16_t *)d->a;
    cp.k = d->k;
    cp.a_bf16 = d->bf16;
    /* the staged form computes its gates, the plain one reads the gate kernel's */
    cp.gate = gated && !staged ? (const float *)gate : nullptr;
    cp.gate_vec = gated && staged ? (const uint16_t *)d->shared_gate : nullptr;
#ifdef QV_MUTANT_gpu_moe_shared_gate_dropped
    /* Mutant (class 33, lmdeploy #3491): the gates computed, never applied. */
    cp.gate = nullptr;
    cp.gate_vec = nullptr;
#endif
    if (staged) {
        const dim3 sgrid((d->n + kStageCols - 1) / kStageCols, d->t);
        return launch_chained(d->out_bf16 ? k_moe_combine_staged<true> : k_moe_combine_staged<false>, sgrid,
                              dim3(kStageThreads), 0, stream, "combine launch", cp);
    }
    /* One block per 1024 columns and token, tokens strided past 65535. */
    const dim3 cgrid((d->n + 4 * kCombineThreads - 1) / (4 * kCombineThreads), d->t < 65535 ? d->t : 65535);
    return launch_chained(d->out_bf16 ? k_moe_combine<true> : k_moe_combine<false>, cgrid, dim3(kCombineThreads), 0,
                          stream, "combine launch", cp);
}
