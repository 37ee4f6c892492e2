/* wonly_small.cu: the weight-only GEMM Y (m, n) = A (m, k) x W (k, n) for
 * M <= 16, built to stream the packed weights at memory bandwidth. Same
 * layouts (layout.h) and same declared arithmetic as kernels/wonly.cu:
 *  - group scales (QV_DQ_MUL_RN): w = half((q - z) * s), one half-precision
 *    rounding, q - z exact (dequant.cuh; e4m3 codes in bf16: the same
 *    product as v 2^-120 times the layout's scale, which carries 2^120,
 *    with the code's bits moved into a bf16: qv_dqfp8_bf16_moved);
 *  - tensor/channel scales (QV_DQ_EXACT + QV_EP_MUL_WSCALE): w = value(q)
 *    exactly, the fp32 result times the scale in fp32;
 *  - FP4 (MARLIN_FP4_MX / _NV): the e2m1 codes times their block scale byte
 *    with one rounding, then in the fp32 epilogue NVFP4's global scale and
 *    the bias, one rounding to the output (wonly_common.cuh's helpers, which
 *    wonly.cu runs too);
 *  - products summed by m16n8k16 tensor cores into fp32 (one tile holds every
 *    row: M <= 16 as the mma's rows, or M <= 8 as its columns); split-K
 *    partials added in fp32 in one fixed order (below) that depends on the
 *    shape alone, so every launch is bitwise identical; output cast RNE.
 *
 * Structure: a block of 8 warps covers 512 columns (1024 with two chunks per
 * warp) over one K slice; warp w owns one (or two adjacent) 64-column Marlin
 * chunks for the whole slice, so no two warps of a block share a column. The
 * block's weights arrive through a ring of kStages shared-memory stages filled
 * by bulk copies (cp.async.bulk, one per k16 row of the block's chunks, which
 * are contiguous in the Marlin layout) that complete on mbarriers: up to
 * 64 KiB per block in flight, and no per-load address arithmetic in the warps
 * that do the math. Thread 0 refills a stage's slot after a block barrier
 * that follows every warp's reads of it; for 8-bit codes (but bf16 with group
 * scales) the last warp done reading the slot refills it, with no block
 * barrier in the K loop (last_refill, step 3). The slice's A
 * rows (gathered through perm under act_order), group scales and zero points
 * are staged in shared memory once, at block start, while the first stages are
 * in flight. Launched as a programmatic dependent (step 1b), a block requests
 * its scales and its first one or two stages before it waits for the kernel
 * in front, and A only after.
 *
 * Split-K: the S slices of a column tile run as Q = S / C thread-block
 * clusters of C consecutive slices, C a power of two up to 8 that divides S
 * (C = 1: no clusters, every slice through the workspace). The plan's cost
 * model chooses S and C together, with the blocks the H200 runs at once in
 * clusters of C (on the H200 264 for C <= 2, 248 for 4, 240 for 8: tuning.h): a plan that needs a
 * second wave loses far more than the sum saves. qv_launch_opts.wo_small_cluster caps C. After the K loop
 * each block keeps its fp32 partial tile in its own shared memory; after
 * a cluster barrier block rank r sums part r of the tile (a C-th of its
 * outputs) over the C peers' tiles in rank order, through distributed shared
 * memory, with 8 loads in flight at once. With Q = 1 that sum is final and
 * goes through the epilogue to Y: no global round trip at all. With Q > 1 the
 * Q blocks of (tile, part) take tickets on a counter as their last stages
 * begin; each but the last ticket's writes its cluster's part sums to the
 * workspace and counts itself done, and the last ticket's keeps its own in
 * shared memory, waits for the Q - 1 others, resets the counter and adds the
 * Q cluster sums in order 0..Q-1 (taking the ticket a stage early moves the
 * atomic's round trip, and the last block's own store and fence, off the
 * layer's tail). Every output is thus ((s0 + s1) + ... + s(C-1)) per
 * cluster, then the Q cluster sums in order: fp32 RN adds in a fixed order.
 * (One last block summing slices 0..S-1 is far slower on the H200 at M = 16.)
 *
 * Configurations (qv_launch_opts.wo_small, internal/wonly_plan.h): by default M <= 8 runs
 * swapped (weights as the A operand, A^T as B: 4 mma per k16 tile and chunk
 * instead of 8, since at M = 1 the m16 orientation wastes 15 of 16 rows),
 * with one 64-column chunk per warp or, where the plan says it pays
 * (two_chunks_pay), two adjacent ones; 9 <= M <= 16 runs in the m16
 * orientation with one. QV_WO_SMALL_M16_8 runs M <= 8 in the m16
 * orientation, QV_WO_SMALL_SWAP only M <= 8 swapped with one chunk per warp,
 * QV_WO_SMALL_SWAP2 as QV_WO_SMALL_SWAP with two, QV_WO_SMALL_M16_16 every
 * M <= 16 in the m16 orientation, QV_WO_SMALL_NEVER nothing (the general
 * kernel). The options' wo_small_splits forces the number of K slices
 * (tests), wo_small_cluster the largest cluster, and the QV_TRACE_WO_SMALL
 * trace prints each launch's plan and the device's concurrent clusters
 * (measurements). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "async_copy.cuh"
#include "cluster.cuh"
#include "internal/gpu.h"
#include "internal/tuning.h"
#include "qvet/gemm.h"
#include "qvet/layout.h"
#include "func_attr.cuh"
#include "wonly_small.cuh"
#include "wonly_small_tile.cuh"

namespace {

/* Blocks per SM the kernel is built for (__launch_bounds__): 16 warps of at
 * most 128 registers fill the register file, and the split-K plan counts on it. */
constexpr int kBlocksPerSm = 2;
/* Longest K slice in k16 tiles: bounds the shared-memory copy of A (16 rows x
 * 2048 halves = 64 KiB; the plan halves it until the budget below holds) and of
 * the slice's group scales. */
constexpr int kMaxTilesPerSplit = 256;
/* The weight ring: kStages stages of kStageBytes, each filled by one bulk copy
 * per k16 row of the block's columns. 4 x 16 KiB in flight per block and two
 * blocks per SM is 128 KiB per SM, several times the bandwidth x latency
 * product of one SM's share of HBM (about 16 B/cycle x 1500 cycles). */
#ifndef QV_WO_SMALL_STAGES /* measurements: -DQV_WO_SMALL_STAGES=<s> -DQV_WO_SMALL_STAGE_KIB=<k> */
#define QV_WO_SMALL_STAGES 4
#endif
#ifndef QV_WO_SMALL_STAGE_KIB
#define QV_WO_SMALL_STAGE_KIB 16
#endif
constexpr int kStages = QV_WO_SMALL_STAGES;
/* Measurements only: -DQV_WO_SMALL_NO_MATH=1 builds a K loop that waits for
 * and refills every stage but reads none of it (wrong results): the ring's
 * own rate, without the math. */
#ifndef QV_WO_SMALL_NO_MATH
#define QV_WO_SMALL_NO_MATH 0
#endif
constexpr int kStageBytes = QV_WO_SMALL_STAGE_KIB * 1024;
static_assert(2 * kStages * 8 <= 128, "the 128-byte shared-memory header holds the ring's barriers (small_smem)");
/* Shared-memory budget of one block: two blocks per SM fit the H200's 227 KiB
 * (each block also takes 1 KiB of system shared memory). */
constexpr size_t kSmemBudget = 112 * 1024;
/* Clusters along K: 8 blocks is the portable cluster size of sm_90 and the
 * default largest (tuning.h); 16 (QV_WO_SMALL_CLUSTER_MAX, non-portable) is
 * the most the H200 schedules. Peers' tiles are summed kPeerBatch at a time
 * (that many 16-byte loads in flight per thread). */
constexpr int kPeerBatch = 8;

struct small_params {
    const uint16_t *a;       /* (m, k) fp16/bf16 codes, row-major, logical column order */
    const int32_t *perm;     /* act_order: (k) logical column of sorted row i; NULL otherwise */
    const uint4 *b;          /* Marlin-packed weights, (k/16, 2n) or (k/16, 4n) int32, as 16-byte words */
    const void *scales;      /* packed scales: (k/g, n) group, (1, n) channel (f16/bf16/f32), (1, 1) tensor */
    const uint32_t *zeros;   /* packed zero points (k/g, n/8) int32, or NULL */
    void *c;                 /* (m, n) output, row-major, same format as A */
    float *partial;          /* (splits / cluster, m, n) fp32 partials of the clusters, when splits > cluster */
    int *counters;           /* (n blocks x cluster) arrival counters, zero between launches */
    int m, n, k;
    int tiles_per_split;     /* k16 tiles of the longest K slice */
    int slice_unit;          /* k16 tiles per slicing unit: the group's (whole-group slices) or 1 */
    int slice_q, slice_r;    /* units per slice, and how many slices (the first) take one more */
    int splits;
    int cluster;             /* blocks per cluster along K (grid y), a divisor of splits, <= QV_WO_SMALL_CLUSTER_MAX */
    int pre_stages;          /* ring stages requested before griddepcontrol.wait (step 1b), 0 to kStages */
    int scale_mode;          /* SC_* */
    int scale_fmt;           /* SF_*: storage of the epilogue scale */
    int g_shift;             /* log2(g / 16): the group of k16 tile kt is kt >> g_shift */
    int grp_single;          /* 1: group scales use the 32-wide channel permutation (k == g) */
    int groups_max;          /* group rows of scales (and zero points) staged per block */
    float unbias_f32;        /* fp8: 2^-s_pow2, undoes the exponent bias folded into the scales; else 1 */
    uint32_t unbias_h2;      /* the same power of two as a half2 of the activation format */
    const float *gscale;     /* MARLIN_FP4_NV: (1) fp32 global scale G (qv_packed.scales2), else NULL */
    const void *bias;        /* FP4 rows with a bias: (n) bias_fmt codes in scale_perm_single order, 4-byte
                                aligned (qv_packed.bias), else NULL */
    int bias_fmt;            /* SF_*: storage of the bias */
#ifdef QV_WO_SMALL_TIMELINE
    unsigned long long *trace; /* kTracePoints global-timer stamps per block */
#endif
};

/* A build with -DQV_WO_SMALL_TIMELINE (measurements only: the stamps cost
 * registers the default build keeps for the K loop) has every block stamp the
 * global timer at its start, at its first stage of weights, at the end of its
 * K loop and at its exit; the QV_TRACE_WO_SMALL_TIMELINE trace prints each
 * launch's time line (print_timeline). */
enum { TR_START = 0, TR_FIRST, TR_LOOP, TR_END, kTracePoints };
#ifdef QV_WO_SMALL_TIMELINE
#define QV_WO_STAMP(point)                                                                        \
    do {                                                                                          \
        if (threadIdx.x == 0) {                                                                   \
            unsigned long long t_;                                                                \
            asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t_));                              \
            p.trace[((int64_t)blockIdx.y * gridDim.x + blockIdx.x) * kTracePoints + (point)] = t_; \
        }                                                                                         \
    } while (0)
#else
#define QV_WO_STAMP(point) ((void)0)
#endif

/* Shared-memory byte layout of one block, the same on host and device: the
 * ring's mbarriers in a 128-byte header (kStages "full", then kStages
 * "empty" for the last-warp refill); the
 * ring of kStages stages, each rows_per_stage k16 rows of the block's packed
 * weights in their global order (chunk, lane, word); A's rows 0..m-1 over the
 * slice, each padded by 16 bytes so that the 8 row addresses of an ldmatrix
 * fall on 8 different 16-byte bank groups (the row stride is an odd multiple of
 * 16 bytes); a 16-byte zero line that rows >= m read; then groups_max rows of bn
 * group scales (s_elem bytes each: 2, or FP4's 1-byte block scales) and of
 * bn/8 zero-point words (bn: the block's columns).
 * row_bytes: one k16 row of the block's weights (bn/64 chunks).
 * After the K loop the A rows and what follows them (extended if needed) hold
 * the block's split-K partial tile: m rows of bn fp32 at red_stride floats,
 * bn + 4 so that rows stay 16-byte aligned and the 4 rows of a half-warp's
 * 8-byte stores (m16 orientation) start 4 banks apart. Never the ring: no
 * bulk copy ever writes where the partial tile lives. Rows with channel or
 * tensor scales end with room for the block's bn epilogue factors (their
 * codes, or one fp32 tensor scale), staged with A at block start, so that no
 * global load of a scale sits in the epilogue after the last weights; FP4
 * rows end with their global scale and the block's bias codes, staged so
 * too. */
struct small_smem {
    int rows_per_stage, stage_bytes, ring_off, a_off, a_stride, zero_off, s_off, z_off, red_stride, e_off, bytes;
    __host__ __device__ small_smem(int m, int tiles_per_split, int groups_max, bool grouped, bool zp, int bn,
                                   int row_bytes, int s_elem, bool fp4)
    {
        rows_per_stage = kStageBytes / row_bytes;
        stage_bytes = rows_per_stage * row_bytes;
        ring_off = 128;
        a_off = ring_off + kStages * stage_bytes;
        a_stride = tiles_per_split * 32 + 16;
        zero_off = a_off + m * a_stride;
        s_off = zero_off + 16;
        z_off = s_off + (grouped ? groups_max * bn * s_elem : 0);
        bytes = z_off + (zp ? groups_max * (bn / 8) * 4 : 0);
        red_stride = bn + 4;
        const int red_end = a_off + m * red_stride * 4;
        if (bytes < red_end) bytes = red_end;
        /* Channel or tensor scales: the block's bn epilogue factors (at most
         * 4 bytes each), past everything above, so that the partial tile
         * never covers them. FP4: the global scale (fp32, in a 16-byte
         * line), then the block's bn bias codes (at most 4 bytes each). */
        e_off = (bytes + 15) & ~15;
        if (!grouped) bytes = e_off + bn * 4;
        if (fp4) bytes = e_off + 16 + bn * 4;
    }
};

/* The weight ring's mbarriers and bulk copies: kernels/async_copy.cuh. */

/* Thread-block clusters along K: kernels/cluster.cuh. */

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
    /* FP4: one byte of block scale per (group, column); k16 tiles per group
     * 1 (NV, g = 16) or 2 (MX, g = 32), the only group sizes check_fp4
     * (wonly.cu) lets through. */
    constexpr bool kFp4 = wt_is_fp4(WT);
    constexpr int kSElem = kFp4 ? 1 : 2; /* bytes per staged group scale */
    constexpr int kFp4Tpg = WT == WT_FP4_MX ? 2 : 1;
    constexpr int BN = 64 * kWarps * CPW;   /* columns per block */
    constexpr int VW = T::vecs * CPW;       /* 16-byte words per lane per k16 tile */
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int s_is_last;
    __shared__ int s_done[kStages]; /* warps done reading each ring slot (last_refill) */

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
    /* Slice y: slice_q units of slice_unit k16 tiles, one more for the
     * first slice_r slices, so that the S slices differ by at most one unit
     * (tiles_per_split is the longest). */
    const int slice = (int)blockIdx.y;
    const int kt_begin = (slice * p.slice_q + min(slice, p.slice_r)) * p.slice_unit;
    const int kt_end = min(p.k / 16, kt_begin + (p.slice_q + (slice < p.slice_r ? 1 : 0)) * p.slice_unit);
    const int nt = kt_end - kt_begin;
    const bool grouped = group4(WT) || kZp || kFp4 || (!T::four && p.scale_mode == SC_GROUP);
    /* One k16 row of the block's weights in shared memory, all BN / 64 chunks. */
    constexpr int kRowBytes = (BN / 64) * T::chunk_vecs * 16;
    constexpr int kRps = kStageBytes / kRowBytes; /* k16 rows per ring stage (small_smem) */
    const small_smem L(p.m, p.tiles_per_split, p.groups_max, grouped, kZp, BN, kRowBytes, kSElem, kFp4);
    QV_WO_STAMP(TR_START);

    /* 1. The weight ring. Stage s (k16 rows s*R .. s*R + R - 1 of the slice)
     * goes to slot s % kStages: one bulk copy per k16 row of the chunks below N
     * (a row of B is n_chunks chunks of chunk_vecs 16-byte words, so the block's
     * chunks of one row are contiguous), completing on barrier full[slot]. A
     * stage with a refill after it ends at a block barrier, after which thread
     * 0 refills its slot with stage s + kStages: the barrier orders every
     * warp's reads of the slot before the refill's bulk copies. The warps wait
     * for the same bytes anyway (full[slot]), so the barrier costs little:
     * it only holds a warp that would otherwise run ahead into data already
     * in flight. Thread 0 issues the first kStages stages while A, the scales
     * and the zero points are being staged. */
    const unsigned smem_base = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned bar_full = smem_base;
    const unsigned bar_empty = smem_base + 8 * kStages; /* last_refill: every warp done with a slot */
    const int rps = L.rows_per_stage;
    const int n_stages = (nt + rps - 1) / rps;
    const int blk_chunks = min(BN / 64, n_chunks - (int)blockIdx.x * (BN / 64));
    const unsigned row_copy = (unsigned)(blk_chunks * T::chunk_vecs * 16);
    const int64_t row_vecs = (int64_t)n_chunks * T::chunk_vecs;
    const uint4 *b_blk = p.b + (int64_t)kt_begin * row_vecs + (int64_t)blockIdx.x * (BN / 64) * T::chunk_vecs;
    auto issue_stage = [&](int st) {
        const uint64_t pol = l2_evict_first();
        const int slot = st % kStages;
        const int rows = min(rps, nt - st * rps);
        mbar_arrive_tx(bar_full + 8 * slot, rows * row_copy);
        for (int r = 0; r < rows; r++)
            bulk_copy_hint(smem_base + L.ring_off + slot * L.stage_bytes + r * kRowBytes,
                           b_blk + (int64_t)(st * rps + r) * row_vecs, row_copy, bar_full + 8 * slot, pol);
    };

    /* 1b. Programmatic dependent launch (launch_kernel): this grid may start
     * while the kernel before it in the stream (in a forward pass, the layer
     * before) still runs. Before griddepcontrol.wait, which returns once that
     * kernel has finished and its writes are visible (at once without a
     * kernel in front launched so), a block touches only what no kernel in
     * front writes (gemm.h's contract): the packed weights, group scales,
     * zero points and epilogue scales. The first p.pre_stages ring stages and
     * every scale are requested there, so that in a forward pass they stream
     * while the layer in front drains; A, the workspace and Y wait. The
     * kernel behind may launch once every block here is past its wait: its
     * own early reads then overlap this kernel alone, never the one before
     * it. */
    const int grp_begin = kt_begin >> p.g_shift;
    auto stage_scales = [&]() {
        if (grouped) {
            const int n_grp = ((kt_end - 1) >> p.g_shift) - grp_begin + 1;
            /* BN/8 pieces of 16 bytes per row of BN scales (FP4's bytes:
             * BN/16 pieces); a piece exists when its 8 (16) columns lie below
             * n (n is a multiple of 64). */
            constexpr int kPieceCols = 16 / kSElem;
            for (int c = tid; c < n_grp * (BN / kPieceCols); c += kThreads) {
                const int r = c / (BN / kPieceCols), ch = c % (BN / kPieceCols);
                if (n0 + ch * kPieceCols < p.n)
                    qv_cp_async16(smem + L.s_off + r * BN * kSElem + ch * 16,
                                  static_cast<const unsigned char *>(p.scales) +
                                      ((int64_t)(grp_begin + r) * p.n + n0 + ch * kPieceCols) * kSElem,
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
        } else if (p.scale_mode == SC_CHANNEL) {
            /* Channel scales: the block's codes as stored (positions n0 ..
             * n0 + bcols - 1: scale_perm_single permutes within 32
             * columns). A tensor scale: its one value, read by a thread of
             * warp 1 (thread 0 issues the weights). Either way the epilogue
             * finds its factors in shared memory (esc_at), with no global
             * load after the last weights. */
            const int es = p.scale_fmt == SF_F32 ? 4 : 2;
            const int pieces = blk_chunks * 64 * es / 16;
            for (int c = tid; c < pieces; c += kThreads)
                qv_cp_async16(smem + L.e_off + c * 16,
                              static_cast<const unsigned char *>(p.scales) + (int64_t)n0 * es + c * 16, true);
        } else if (tid == 32) {
            *reinterpret_cast<float *>(smem + L.e_off) = epilogue_scale(p, 0);
        }
    };
    const int first_stages = min(kStages, n_stages);
    const int pre = min(p.pre_stages, first_stages);
    if (tid == 0) {
        for (int i = 0; i < kStages; i++) mbar_init(bar_full + 8 * i, 1), mbar_init(bar_empty + 8 * i, kThreads), s_done[i] = 0;
        mbar_fence_init();
    }
    stage_scales();
    if (tid == 0)
        for (int st = 0; st < pre; st++) issue_stage(st);
#ifndef QV_WO_SMALL_PDL_NO_WAIT /* measurements only: the test's witness without the wait it checks */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
    asm volatile("griddepcontrol.launch_dependents;\n" ::);

    /* 2. Stage the slice's A rows while the first stages are in flight. The
     * scales (above) and a plain A are requested before the rest of the
     * weight stream: issued behind the first kStages stages of every block
     * they would wait for them in the memory queues (group scales issued
     * after them are slower on the H200). */
    const int a_chunks_row = nt * 2; /* 16-byte pieces of one A row in the slice */
    if (p.perm == NULL)
        for (int c = tid; c < p.m * a_chunks_row; c += kThreads) {
            const int row = c / a_chunks_row, ch = c % a_chunks_row;
            qv_cp_async16(smem + L.a_off + row * L.a_stride + ch * 16,
                          p.a + (int64_t)row * p.k + (int64_t)kt_begin * 16 + ch * 8, true);
        }
    if (tid == 0)
        for (int st = pre; st < first_stages; st++) issue_stage(st);
    if (p.perm != NULL) {
        /* act_order: sorted column i of A is logical column perm[i]. */
        uint16_t *as = reinterpret_cast<uint16_t *>(smem + L.a_off);
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
    if constexpr (kFp4) {
        /* FP4: the global scale (1 without one, MX: an exact product) and
         * the block's bias codes (positions n0 .. n0 + bcols - 1:
         * scale_perm_single permutes within 32 columns), for the epilogue.
         * After the wait: gemm.h lets a dependent read only b, scales and
         * zeros before it. 4-byte copies: the packed bias is only 4-byte
         * aligned (qv_launch_wonly), and n0 is a multiple of 512. */
        if (tid == kThreads - 1) {
            if (p.gscale)
                qv_cp_async4(smem + L.e_off, p.gscale);
            else
                *reinterpret_cast<float *>(smem + L.e_off) = 1.0f;
        }
        if (p.bias) {
            const int es = p.bias_fmt == SF_F32 ? 4 : 2;
            const int words = blk_chunks * 64 * es / 4;
            for (int c = tid; c < words; c += kThreads)
                qv_cp_async4(smem + L.e_off + 16 + 4 * c,
                             static_cast<const unsigned char *>(p.bias) + (int64_t)n0 * es + 4 * c);
        }
    }
    if (tid == 0) *reinterpret_cast<uint4 *>(smem + L.zero_off) = make_uint4(0, 0, 0, 0);
    qv_cp_async_commit();
    qv_cp_async_wait<0>();
    __syncthreads();

    /* The epilogue factor of column col (channel or tensor rows): the
     * staged code, decoded and times 2^-s_pow2 as epilogue_scale does. */
    auto esc_at = [&](int col) {
        if (p.scale_mode == SC_TENSOR) return *reinterpret_cast<const float *>(smem + L.e_off);
        return load_scale(smem + L.e_off, single_perm_index(col) - n0, p.scale_fmt) * p.unbias_f32;
    };
    /* FP4 rows: the epilogue of two fp32 sums y0, y1 of columns col0, col1,
     * in place (wo_fp4_epilogue): times the staged global scale, then plus
     * each column's staged bias code, read at its scale_perm_single
     * position within the block. */
    auto fp4_epilogue = [&](float &y0, float &y1, int col0, int col1) {
        const float gs = *reinterpret_cast<const float *>(smem + L.e_off);
        float b0 = 0.0f, b1 = 0.0f;
        if (p.bias) {
            b0 = load_scale(smem + L.e_off + 16, single_perm_index(col0) - n0, p.bias_fmt);
            b1 = load_scale(smem + L.e_off + 16, single_perm_index(col1) - n0, p.bias_fmt);
        }
        wo_fp4_epilogue<IS_BF16>(y0, y1, gs, p.bias != nullptr, b0, b1);
    };

    /* The lane's ldmatrix row address (rows >= m read the zero line). m16
     * orientation: A row lane%16, k half lane/16 (qv_ldmatrix_x4's matrix
     * order). Swapped: A row lane%8, k half (lane/8)%2 for an x2 load, whose
     * two matrices are exactly the mma B fragment of A^T (k 0-7 and k 8-15). */
    const int a_row = SWAP ? (lane & 7) : (lane & 15);
    const int a_half = SWAP ? ((lane >> 3) & 1) : (lane >> 4);
    const unsigned a_addr0 =
        a_row < p.m ? smem_base + L.a_off + a_row * L.a_stride + a_half * 16 : smem_base + L.zero_off;
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

    /* The current group's scales and zero points (small_load_group). */
    small_group_regs<CPW> grp_regs;
    int cur_grp = -1;

    /* The group scales (and zero points) of group grp, read from shared
     * memory into grp_regs (load_group); group_of_tile(tl) does so when k16
     * tile tl lies in a group other than the current one. Called before
     * compute_tile on grouped rows: per tile in the general loop, once per
     * stage when the stage lies in one group, or at its start and its middle
     * when each half of it is one group (g = 32 with 4-bit codes). */
    auto load_group = [&](int grp, const bool fast) {
        cur_grp = grp;
        small_load_group<WT, IS_BF16, SWAP, CPW>(grp_regs, smem + L.s_off + (grp - grp_begin) * BN * kSElem,
                                                 smem + L.z_off + (grp - grp_begin) * (BN / 8) * 4, warp, lane,
                                                 p.grp_single, p.unbias_h2, fast);
    };
    auto group_of_tile = [&](int tl, const bool fast) {
        const int grp = (kt_begin + tl) >> p.g_shift;
        if (grp != cur_grp) load_group(grp, fast);
    };

    /* One k16 tile (small_tile_mma): tl is its index in the slice, w the
     * lane's weight words; G and F, literals at every call: the group scales
     * multiply the fragments, in the one-fma form (small_g4_fma). (A generic
     * lambda with a compile-time tag here crashes the CUDA 13.0 front end.) */
    auto compute_tile = [&](int tl, const uint4 (&w)[VW], const bool G, const bool F) {
        small_tile_mma<WT, IS_BF16, SWAP, CPW>(acc, a_addr0 + tl * a_step, w, grp_regs, G, F);
    };
    /* The one-fma form (small_g4_fma; the host launches it for g >= 128):
     * the warp's staged scales checked and rewritten once for the slice. */
    constexpr bool kG4Fma = small_g4_fma<WT, IS_BF16, SWAP, CPW>();
    if constexpr (kG4Fma) {
        grp_regs.fma = false;
        if (active) {
            const int n_grp = ((kt_end - 1) >> p.g_shift) - grp_begin + 1;
            grp_regs.fma =
                small_g4_fma_prepare<CPW>(smem + L.s_off, n_grp, BN, warp * CPW * 64, chunk_on[CPW - 1], lane);
            __syncwarp();
        }
    }

    /* 3. The K loop: wait for each stage, run the warp's chunk(s) of its rows,
     * then (when a refill follows) the block barrier and thread 0's refill,
     * or, for last_refill, the refill by the last warp done with the slot:
     * no block barrier, so thread 0's refill is not on every stage's critical
     * path. On the H200 that is faster for 8-bit codes, except bf16 with
     * group scales, and not for 4-bit codes, so only those 8-bit rows use
     * it. Warps without a chunk below N still take every barrier and count
     * every slot. */
    const bool last_refill = !T::four && !(grouped && IS_BF16);
    /* Split-K through the workspace (Q = splits / cluster > 1, step 4):
     * thread 0 takes the block's ticket on its (column tile, part) counter
     * as its last stage begins, so that the atomic's round trip overlaps
     * that stage's math; the ticket's low 16 bits count arrivals. */
    const int sk_q = p.splits / p.cluster;
    int *const sk_cnt = p.counters + blockIdx.x * p.cluster + (p.cluster > 1 ? (int)cluster_rank() : 0);
    int ticket = 0;
    {
        const unsigned char *my_words = smem + L.ring_off + (warp * CPW * T::chunk_vecs + lane * T::vecs) * 16;
        for (int st = 0; st < n_stages; st++) {
            const int slot = st % kStages;
            if (st == n_stages - 1 && sk_q > 1 && tid == 0) ticket = atomicAdd(sk_cnt, 1);
            mbar_wait(bar_full + 8 * slot, (st / kStages) & 1);
            if (st == 0) QV_WO_STAMP(TR_FIRST);
            if (active && !QV_WO_SMALL_NO_MATH) {
                const int rows = min(rps, nt - st * rps);
                const unsigned char *stage = my_words + slot * L.stage_bytes;
                auto load_row = [&](int r, uint4 (&cur)[VW]) {
#pragma unroll
                    for (int v = 0; v < VW; v++)
                        cur[v] = *reinterpret_cast<const uint4 *>(stage + r * kRowBytes +
                                                                  ((v / T::vecs) * T::chunk_vecs + v % T::vecs) * 16);
                };
                /* A full stage in one group (or without group scales), or
                 * whose two halves are one group each: every row's words
                 * loaded first, then the rows' products, in one straight-line
                 * block, so that the shared-memory latency overlaps the first
                 * rows' math; the group scales are read before it, and for
                 * the second half in its middle (H). Otherwise row by row,
                 * the group scales checked per tile. Every call passes G and
                 * H as literals (compute_tile). */
                const int t0 = st * rps;
                const int g_first = (kt_begin + t0) >> p.g_shift, g_last = (kt_begin + t0 + rps - 1) >> p.g_shift;
                const bool one_group = g_first == g_last;
                const bool two_halves = g_last == g_first + 1 && ((kt_begin + t0 + rps / 2 - 1) >> p.g_shift) == g_first &&
                                        ((kt_begin + t0 + rps / 2) >> p.g_shift) == g_last;
                auto stage_line = [&](const bool G, const bool H) {
                    uint4 cur[kRps][VW];
#pragma unroll
                    for (int r = 0; r < kRps; r++) load_row(r, cur[r]);
                    if (G) group_of_tile(t0, false);
                    auto line = [&](const bool F) {
#pragma unroll
                        for (int r = 0; r < kRps; r++) {
                            if (G && H && r == kRps / 2) load_group(g_last, false);
                            compute_tile(t0 + r, cur[r], G, F);
                        }
                    };
                    /* the one-fma form where the warp's scales passed the check:
                     * not a choice, since its staged scales now hold S = s 2^20,
                     * which only that form reads (here and in stage_rows) */
                    if (kG4Fma && G && grp_regs.fma)
                        line(true);
                    else
                        line(false);
                };
                /* F: MXFP4's one-multiply form (the FP4 rows below). */
                auto stage_rows = [&](const bool G, const bool F) {
                    for (int r = 0; r < rows; r++) {
                        uint4 cur[VW];
                        load_row(r, cur);
                        if (G) group_of_tile(t0 + r, F);
                        if (kG4Fma && G && grp_regs.fma)
                            compute_tile(t0 + r, cur, G, true);
                        else
                            compute_tile(t0 + r, cur, G, F);
                    }
                };
                const bool full = rows == kRps;
                if (grouped) { /* every zero-point row and every FP4 row is grouped */
                    if constexpr (kFp4) {
                        /* FP4: a group of one or two k16 tiles, so no stage
                         * lies in one group. A full stage whose first tile
                         * starts a group (always: slices start on a group,
                         * make_plan, and stages hold an even number of
                         * tiles) runs as one straight line, every row's
                         * words loaded first, the scale bytes of each group
                         * read before its first row; a partial one row by
                         * row (stage_rows). MXFP4 whose stage has no scale
                         * code above 127 (small_fp4_mx_fast, over the
                         * groups of the stage's rows) takes the one-multiply
                         * form in either (F, a literal in each copy), and
                         * its registers serve no other stage. */
                        const bool line = full && (kt_begin + t0) % kFp4Tpg == 0;
                        const int g_end = (kt_begin + t0 + rows - 1) >> p.g_shift;
                        const bool mx_fast = WT == WT_FP4_MX && small_fp4_mx_fast<CPW, kRps / kFp4Tpg>(
                                                                    smem + L.s_off + (g_first - grp_begin) * BN,
                                                                    g_end - g_first + 1, BN, warp, lane);
                        auto fp4_line = [&](const bool F) {
                            uint4 cur[kRps][VW];
#pragma unroll
                            for (int r = 0; r < kRps; r++) load_row(r, cur[r]);
#pragma unroll
                            for (int r = 0; r < kRps; r++) {
                                if (r % kFp4Tpg == 0) load_group((kt_begin + t0 + r) / kFp4Tpg, F);
                                compute_tile(t0 + r, cur[r], true, F);
                            }
                        };
                        if (mx_fast) cur_grp = -1;
                        if (line && mx_fast)
                            fp4_line(true);
                        else if (line)
                            fp4_line(false);
                        else if (mx_fast)
                            stage_rows(true, true);
                        else
                            stage_rows(true, false);
                        if (mx_fast) cur_grp = -1;
                    } else if (stage_fast<WT>(true) && full && one_group)
                        stage_line(true, false);
                    else if (stage_fast<WT>(true) && kRps % 2 == 0 && full && two_halves)
                        stage_line(true, true);
                    else
                        stage_rows(true, false);
                } else {
                    if (stage_fast<WT>(false) && full)
                        stage_line(false, false);
                    else
                        stage_rows(false, false);
                }
            }
            if (st + kStages < n_stages) {
                if (last_refill) {
                    /* The last warp done with the slot refills it. Every
                     * thread arrives on empty[slot] after its reads of the
                     * slot (a release); lane 0 of the warp whose count is the
                     * last waits for that phase (an acquire: every warp has
                     * counted itself after its arrivals, so it rarely waits)
                     * and so orders all 256 threads' reads before its
                     * copies. No warp waits for the others unless the ring
                     * runs dry. */
                    mbar_arrive(bar_empty + 8 * slot);
                    __syncwarp();
                    if (lane == 0 && atomicAdd(&s_done[slot], 1) == kWarps - 1) {
                        s_done[slot] = 0;
                        mbar_wait(bar_empty + 8 * slot, (st / kStages) & 1);
                        fence_proxy_async();
                        issue_stage(st + kStages);
                    }
                } else {
                    __syncthreads();
                    if (tid == 0) {
                        fence_proxy_async();
                        issue_stage(st + kStages);
                    }
                }
            }
        }
    }
    QV_WO_STAMP(TR_LOOP);

    /* 4. Split-K. Each slice's partial tile goes to its block's shared memory
     * (over A, which the K loop no longer reads). The p.cluster = C
     * consecutive slices of a cluster exchange them through distributed
     * shared memory: block rank r
     * sums part r of the tile (the r-th C-th of its m x bcols outputs, in
     * 4-column pieces) over the peers' tiles in rank order 0..C-1. With one
     * cluster per column tile (splits == C) that sum is final. Otherwise
     * cluster q writes its sums of part r to partial[q], and the last of the
     * Q = splits / C blocks of (column tile, part r) to arrive (a counter for
     * each) adds partial[0..Q-1] in that order. Every output is therefore
     * ((s0 + s1) + ... + s(C-1)) per cluster of slices, then those Q sums in
     * order: one fixed order of fp32 additions whatever the timing. Rows >= m
     * and chunks past N have no partials. */
    if (p.splits > 1) {
        const int C = p.cluster;
        const int Q = p.splits / C;
        /* Read again rather than kept from sk_cnt's: a register less over the K loop. */
        const int rank = C > 1 ? (int)cluster_rank() : 0;
        const int q_idx = blockIdx.y / C;
        float *red = reinterpret_cast<float *>(smem + L.a_off);
        /* Element r of (chunk c, tile j) in the block's partial tile. */
        auto red_at = [&](int c, int j, int r) { return red + elem_row(r) * L.red_stride + elem_col(c, j, r) - n0; };
        if (tid == 0) s_is_last = Q > 1 && (ticket & 0xFFFF) == Q - 1;
        __syncthreads(); /* every warp is past its last read of A and the scales; s_is_last is set */
#pragma unroll
        for (int c = 0; c < CPW; c++)
            if (chunk_on[c])
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    if constexpr (SWAP) {
#pragma unroll
                        for (int r = 0; r < 4; r++)
                            if (elem_row(r) < p.m) *red_at(c, j, r) = acc[c][j][r];
                    } else {
                        /* Elements r = 2h and 2h + 1 are adjacent columns of one row. */
#pragma unroll
                        for (int h = 0; h < 2; h++)
                            if (elem_row(2 * h) < p.m)
                                *reinterpret_cast<float2 *>(red_at(c, j, 2 * h)) =
                                    make_float2(acc[c][j][2 * h], acc[c][j][2 * h + 1]);
                    }
                }
        if (C > 1) {
            cluster_arrive();
            cluster_wait();
        } else {
            __syncthreads();
        }

        const int bcols = blk_chunks * 64;
        const int qpr = bcols / 4; /* 4-column pieces per row */
        const int quads = p.m * qpr;
        const int e_begin = rank * quads / C, e_end = (rank + 1) * quads / C;
        const int64_t slice = (int64_t)p.m * p.n;
        uint16_t *out = static_cast<uint16_t *>(p.c);
        auto out_off = [&](int e) { return (int64_t)(e / qpr) * p.n + n0 + 4 * (e % qpr); };
        /* The epilogue of 4 outputs at out offset off (4 columns of one
         * row): the fp32 channel/tensor scale, or FP4's global scale and
         * bias, one rounding. */
        auto finish = [&](int64_t off, float4 sum) {
            float y4[4] = {sum.x, sum.y, sum.z, sum.w};
            if constexpr (kFp4) {
                const int col = (int)(off % p.n);
                fp4_epilogue(y4[0], y4[1], col, col + 1);
                fp4_epilogue(y4[2], y4[3], col + 2, col + 3);
            }
            uint16_t h[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int col = (int)(off % p.n) + i;
                float y = y4[i];
                if (p.scale_mode != SC_GROUP) y = y * esc_at(col);
                h[i] = (uint16_t)(qv_h2<IS_BF16>::pack(y, 0.0f) & 0xFFFFu);
            }
            *reinterpret_cast<uint2 *>(out + off) =
                make_uint2((uint32_t)h[0] | (uint32_t)h[1] << 16, (uint32_t)h[2] | (uint32_t)h[3] << 16);
        };
        auto add4 = [](float4 s, float4 v) {
            return make_float4(add_partial(s.x, v.x), add_partial(s.y, v.y), add_partial(s.z, v.z),
                               add_partial(s.w, v.w));
        };

        /* The cluster's sum of part r: the C peers' loads in flight, then
         * their adds in rank order. With Q > 1 it goes to partial[q_idx],
         * except in the block with the last ticket, which keeps it in its
         * own shared memory (the ring, idle now: every stage issued has been
         * waited for) for its sum of the Q cluster sums below. */
        const unsigned red_addr = smem_base + L.a_off;
        float4 *const own = reinterpret_cast<float4 *>(smem + L.ring_off);
        for (int e = e_begin + tid; e < e_end; e += kThreads) {
            const int red_idx = (e / qpr) * L.red_stride + 4 * (e % qpr);
            float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (C > 1) {
                for (int pr0 = 0; pr0 < C; pr0 += kPeerBatch) {
                    float4 v[kPeerBatch];
#pragma unroll
                    for (int b = 0; b < kPeerBatch; b++)
                        if (pr0 + b < C) v[b] = cluster_ld_peer_f4(red_addr + 4u * (unsigned)red_idx, (unsigned)(pr0 + b));
#pragma unroll
                    for (int b = 0; b < kPeerBatch; b++)
                        if (pr0 + b < C) sum = pr0 + b == 0 ? v[b] : add4(sum, v[b]);
                }
            } else {
                sum = *reinterpret_cast<const float4 *>(red + red_idx);
            }
            if (Q == 1)
                finish(out_off(e), sum);
            else if (s_is_last)
                own[e - e_begin] = sum;
            else
                __stcg(reinterpret_cast<float4 *>(p.partial + q_idx * slice + out_off(e)), sum);
        }
        /* This block no longer reads its peers' tiles. */
        if (C > 1) cluster_arrive();

        if (Q > 1 && !s_is_last) {
            /* Partial written: counted in the high 16 bits. */
            __threadfence();
            __syncthreads();
            if (tid == 0) atomicAdd(sk_cnt, 1 << 16);
        } else if (Q > 1) {
            /* The last ticket: once the other Q - 1 blocks have written
             * theirs (they took their tickets earlier, so this rarely waits),
             * it resets the counter for the next launch (gemm.h) and sums. */
            if (tid == 0) {
                while ((*reinterpret_cast<volatile int *>(sk_cnt) >> 16) != Q - 1) {
                }
                atomicExch(sk_cnt, 0);
            }
            __syncthreads();
            __threadfence();
            /* The clusters' sums 0..Q-1 of part r in that order, each thread
             * kU x 4 outputs with the loads of kZ clusters in flight before
             * their adds (16-byte loads): 1 x 16 when the part has no more
             * 4-output pieces than the block has threads (small M, where
             * the plan's Q reaches 16-33), else 2 x 8. */
            auto sum_parts = [&](auto u_tag, auto z_tag) {
                constexpr int kU = decltype(u_tag)::value, kZ = decltype(z_tag)::value;
                for (int e0 = e_begin + tid; e0 < e_end; e0 += kThreads * kU) {
                    float4 sum[kU];
                    int64_t off[kU];
                    bool on[kU];
#pragma unroll
                    for (int u = 0; u < kU; u++) {
                        const int e = e0 + u * kThreads;
                        on[u] = e < e_end;
                        off[u] = on[u] ? out_off(e) : 0;
                        sum[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    }
                    for (int z0 = 0; z0 < Q; z0 += kZ) {
                        float4 v[kU][kZ];
#pragma unroll
                        for (int u = 0; u < kU; u++)
#pragma unroll
                            for (int z = 0; z < kZ; z++)
                                if (on[u] && z0 + z < Q)
                                    v[u][z] = z0 + z == q_idx
                                                  ? own[e0 + u * kThreads - e_begin]
                                                  : __ldcg(reinterpret_cast<const float4 *>(
                                                        p.partial + (z0 + z) * slice + off[u]));
#pragma unroll
                        for (int u = 0; u < kU; u++)
#pragma unroll
                            for (int z = 0; z < kZ; z++)
                                if (on[u] && z0 + z < Q) sum[u] = z0 + z == 0 ? v[u][z] : add4(sum[u], v[u][z]);
                    }
#pragma unroll
                    for (int u = 0; u < kU; u++)
                        if (on[u]) finish(off[u], sum[u]);
                }
            };
            if (e_end - e_begin <= kThreads)
                sum_parts(std::integral_constant<int, 1>{}, std::integral_constant<int, 16>{});
            else
                sum_parts(std::integral_constant<int, 2>{}, std::integral_constant<int, 8>{});
        }
        /* The peers have read this block's tile before it exits. */
        if (C > 1) cluster_wait();
        QV_WO_STAMP(TR_END);
        return;
    }

    /* 5. Without split-K, the epilogue straight from the accumulators: the fp32
     * channel/tensor scale (FP4: the global scale and the bias, elements 2h
     * and 2h + 1 of a tile in one call, two columns of one row in the m16
     * orientation, two rows of one column swapped), one rounding, rows < m
     * and columns < n only. */
    uint16_t *out = static_cast<uint16_t *>(p.c);
    if constexpr (kFp4) {
#pragma unroll
        for (int c = 0; c < CPW; c++) {
            if (!chunk_on[c]) continue;
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r0 = 2 * h, r1 = 2 * h + 1;
                    const int col0 = elem_col(c, j, r0), col1 = elem_col(c, j, r1);
                    float y0 = acc[c][j][r0], y1 = acc[c][j][r1];
                    fp4_epilogue(y0, y1, col0, col1);
                    if (elem_row(r0) < p.m)
                        out[(int64_t)elem_row(r0) * p.n + col0] = (uint16_t)(qv_h2<IS_BF16>::pack(y0, 0.0f) & 0xFFFFu);
                    if (elem_row(r1) < p.m)
                        out[(int64_t)elem_row(r1) * p.n + col1] = (uint16_t)(qv_h2<IS_BF16>::pack(y1, 0.0f) & 0xFFFFu);
                }
        }
    } else {
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
                    if (p.scale_mode != SC_GROUP) y = y * esc_at(col);
                    out[(int64_t)row * p.n + col] = (uint16_t)(qv_h2<IS_BF16>::pack(y, 0.0f) & 0xFFFFu);
                }
        }
    }
    QV_WO_STAMP(TR_END);
}

/* ---- host side ---- */

/* The split-K plan counts the device's SMs (qv_launch_ctx.sms), so that the
 * plan, the fp32 summation order and every output bit depend on the shape and
 * the SM count alone (as in wonly.cu). */
/* Per-block fixed cost in k16 tiles for the plan: pipeline fill, staging of A
 * and the scales, and the split-K hand-off, roughly what 16 tiles of streaming
 * take; it keeps the plan from choosing many waves of very short slices. */
constexpr int kPlanFillTiles = 16;
/* Blocks that run at once in clusters of C, for the plan: kBlocksPerSm per
 * SM, less the slots the GPCs leave idle in clusters of 4, 8 and 16 (a
 * cluster must fit one GPC), from the tuning table: on the H200, what
 * cudaOccupancyMaxActiveClusters reports for this kernel (67-95 KiB of
 * shared memory per block), 132 clusters of 2 (all 264 slots), 62 of 4
 * (248), 30 of 8 (240); 16 (opt-in only): 224 assumed. At least one
 * cluster. */
int plan_slots(const qv_launch_ctx &ctx, int c)
{
    const int all = ctx.sms * kBlocksPerSm;
    const int idle = c <= 2 ? 0 : c == 4 ? ctx.t->wo_small_cluster_idle[0]
                                 : c == 8 ? ctx.t->wo_small_cluster_idle[1]
                                          : ctx.t->wo_small_cluster_idle[2];
    return all - idle > c ? all - idle : c;
}

struct small_plan {
    int n_blocks, tiles_per_split, splits, cluster, groups_max;
    int slice_unit, slice_q, slice_r; /* small_params' slicing of K */
    int smem;
    size_t partial_off, bytes;
};

/* Group rows one slice of at most tps tiles can touch: slices are whole
 * groups whenever a group fits in a slice (see make_plan). */
int groups_for(const qv_variant *v, int tps)
{
    if (v->scale_layout != QV_SCALE_GROUP) return 0;
    const int gt = v->g / 16;
    return gt <= tps ? (tps + gt - 1) / gt : 2;
}

/* The largest cluster: the options' wo_small_cluster (measurements), 1, 2,
 * 4, 8 or 16 (1: every slice's partials through the workspace); unset, the
 * tuning table's. */
int max_cluster(const qv_launch_ctx &ctx)
{
    return ctx.o->wo_small_cluster ? ctx.o->wo_small_cluster : ctx.t->wo_small_cluster;
}

/* 1 when `splits` K slices can run in clusters of c (a power of two) for
 * blocks of `chunks` 64-column chunks: c divides splits, and c exceeds chunks
 * only as the only cluster (no counters), so that the counters, one per
 * (block, part), stay within one per 64 columns (internal/wonly_plan.h). */
bool cluster_fits(int splits, int c, int chunks) { return splits % c == 0 && (c <= chunks || splits == c); }

/* The plan of one shape for blocks of 512 * cpw columns. The options'
 * wo_small_splits (tests) asks for that many K slices (at most one per
 * slicing unit, and more where the longest slice would not fit); unset, the
 * cost model chooses. */
small_plan make_plan(const qv_launch_ctx &ctx, const qv_variant *v, int m, int n, int k, int cpw)
{
    small_plan pl;
    const bool grouped = v->scale_layout == QV_SCALE_GROUP;
    const int gt = grouped ? v->g / 16 : 1;
    const int tiles = k / 16;
    const int bn = 64 * kWarps * cpw;
    /* One k16 row of a 64-column chunk: 512 bytes of 4-bit (and e2m1) codes,
     * 1 KiB of 8-bit ones. A staged group scale: 2 bytes, FP4's 1. */
    const bool fp4 = qv_layout_is_fp4(v->layout);
    const bool four = v->layout == QV_LAYOUT_MARLIN_W4 || v->layout == QV_LAYOUT_MARLIN_W4_ZP || fp4;
    const int row_bytes = (bn / 64) * (four ? 512 : 1024);
    const int s_elem = fp4 ? 1 : 2;
    pl.n_blocks = (n + bn - 1) / bn;
    /* The longest slice whose A rows and group scales fit the budget. */
    int tps_max = kMaxTilesPerSplit;
    while (tps_max > 1 &&
           (size_t)small_smem(m, tps_max, groups_for(v, tps_max), grouped, v->zero_point, bn, row_bytes, s_elem, fp4)
                   .bytes >
               kSmemBudget)
        tps_max /= 2;
    /* Slices are whole groups when a group fits in one, so a slice never
     * straddles more group rows than groups_for counts: the K range is cut
     * into U = `units` units of `unit` k16 tiles (a group, else one tile),
     * and S slices take U / S units each, the first U mod S one more, so
     * they differ by at most one unit and every S from 1 to U is possible.
     * (Slices of one length and a shorter last one left grouped rows few
     * slice counts: Llama-2-7B down has 86 groups of 128, cut so into 22,
     * 29 or 43 slices, none of which clusters of 4 or 8 can sum.)
     * The longest slice, tps k16 tiles, sizes the block's shared memory. */
    const int unit = grouped && gt <= tps_max ? gt : 1;
    const int units = (tiles + unit - 1) / unit;
    auto slice_tiles = [&](int sp) { return (units + sp - 1) / sp * unit; };
    int best_sp = 1, best_c = 1;
    const int forced = ctx.o->wo_small_splits;
    const int cmax = max_cluster(ctx);
    if (forced) {
        /* The largest cluster the forced slice count allows. */
        best_sp = forced < units ? forced : units;
        while (slice_tiles(best_sp) > tps_max) best_sp++;
        for (int c = 2; c <= cmax; c *= 2)
            if (cluster_fits(best_sp, c, bn / 64)) best_c = c;
    } else {
        /* Estimated time in 1/16 k16 tiles of one block's streaming, for
         * every slice count and every cluster size that divides it:
         * waves x (tiles per slice + fixed cost), the waves at the blocks
         * that run at once in clusters of C (plan_slots), plus the split-K
         * sums:
         *  - in a cluster of C slices, every block reads m x bn fp32 of its
         *    peers through distributed shared memory (about half the time of
         *    the same bytes from L2) and waits at two cluster barriers (about
         *    one tile);
         *  - with Q = splits / C > 1 clusters, the last block of each part
         *    reads Q x m x bn / C fp32 from L2 after a global hand-off (about
         *    two tiles);
         *  - without clusters, the last block sums all slices: m * splits / 8
         *    tiles per 512 columns (measured on the H200), twice that in the
         *    m16 orientation (M > QV_WO_SMALL_SWAP_MAX_M: counted once, the
         *    plan chose the workspace sum at M = 16 where clusters are faster).
         * Ties keep fewer slices, then smaller clusters. */
        int64_t best = -1;
        /* The plan is made at every launch and a launch's host time counts
         * whenever the GPU is faster, so the slice counts are visited by
         * longest slice: for each length T units, the counts lo .. hi that
         * give it (ceil(U / S) = T), of which only lo and the first multiple
         * of each cluster size can win (more slices of the same length only
         * add blocks): O(sqrt(U)) candidates. */
        for (int lo = 1, hi; lo <= units; lo = hi + 1) {
            const int t = (units + lo - 1) / lo;
            hi = t > 1 ? (units - 1) / (t - 1) : units;
            const int tps = t * unit;
            if (tps > tps_max) continue;
            int prev = 0;
            for (int step = 1; step <= cmax; step *= 2) {
                const int splits = (lo + step - 1) / step * step;
                if (splits > hi || splits == prev) continue;
                prev = splits;
                for (int c = 1; c <= cmax; c *= 2) {
                    if (!cluster_fits(splits, c, bn / 64)) continue;
                    const int q = splits / c;
                    const int64_t slots = plan_slots(ctx, c);
                    const int64_t waves = ((int64_t)pl.n_blocks * splits + slots - 1) / slots;
                    int64_t cost = 16 * waves * (tps + kPlanFillTiles);
                    if (c == 1)
                        cost += 16 * ((int64_t)splits * m * (bn / 512) / (m > QV_WO_SMALL_SWAP_MAX_M ? 4 : 8));
                    else
                        cost += (int64_t)m * (bn / 512) + 16 +
                                (q > 1 ? 2 * (int64_t)q * m * (bn / 512) / c + 32 : 0);
                    if (best < 0 || cost < best) best = cost, best_sp = splits, best_c = c;
                }
            }
        }
    }
    const int best_tps = slice_tiles(best_sp);
    pl.tiles_per_split = best_tps;
    pl.splits = best_sp;
    pl.slice_unit = unit;
    pl.slice_q = units / best_sp;
    pl.slice_r = units % best_sp;
    pl.cluster = best_c;
    pl.groups_max = groups_for(v, best_tps);
    const small_smem lay(m, best_tps, pl.groups_max, grouped, v->zero_point, bn, row_bytes, s_elem, fp4);
    pl.smem = lay.bytes;
    /* The split-K tile after the K loop (m x bn fp32) is not shortened by the
     * slice length: a ring built with a larger QV_WO_SMALL_STAGES x
     * QV_WO_SMALL_STAGE_KIB can leave no room for it at M = 16. */
    QV_ASSERT((size_t)pl.smem <= kSmemBudget,
              "small-M plan over its shared-memory budget (QV_WO_SMALL_STAGES x QV_WO_SMALL_STAGE_KIB too large)");
    /* Counters (with more than one cluster per column tile): one per (block,
     * part), n_blocks x cluster <= n / 64 rounded up to a multiple of bn / 64,
     * within the 64-int multiple that qv_wonly_counters_bytes reserves
     * (internal/wonly_plan.h). The partials start after the counters area every
     * path shares. */
    QV_ASSERT(pl.splits == pl.cluster ||
                  (size_t)pl.n_blocks * pl.cluster * sizeof(int) <= qv_wonly_counters_bytes(n),
              "small-M split-K counters exceed the reserved area (internal/wonly_plan.h)");
    pl.partial_off = qv_wonly_counters_bytes(n);
    const int q = pl.splits / pl.cluster;
    /* The last ticket's own cluster sums (m x bn / cluster fp32) stay in its
     * idle ring. */
    QV_ASSERT(q == 1 || (size_t)m * bn * 4 / pl.cluster <= (size_t)kStages * lay.stage_bytes,
              "small-M split-K: the last block's own sums exceed its ring");
    pl.bytes = pl.splits > 1 ? pl.partial_off + (q > 1 ? (size_t)q * (size_t)m * (size_t)n * sizeof(float) : 0) : 0;
    return pl;
}

#ifdef QV_WO_SMALL_TIMELINE
int cmp_u64(const void *a, const void *b)
{
    const unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return (x > y) - (x < y);
}

/* One launch's time line from its blocks' stamps (TR_*), on stderr: the span
 * from the first block's start to the last block's exit, then the median and
 * the largest of each block's start (after the first block's), wait for its
 * first stage, K loop after it, and split-K sum with epilogue, in µs. */
void print_timeline(const small_params &p, const unsigned long long *t, int blocks)
{
    unsigned long long t0 = t[TR_START], t1 = t[TR_END];
    for (int b = 0; b < blocks; b++) {
        if (t[b * kTracePoints + TR_START] < t0) t0 = t[b * kTracePoints + TR_START];
        if (t[b * kTracePoints + TR_END] > t1) t1 = t[b * kTracePoints + TR_END];
    }
    unsigned long long *d = (unsigned long long *)malloc(sizeof *d * (size_t)blocks);
    if (!d) return;
    fprintf(stderr, "wonly_small timeline: m=%d n=%d k=%d blocks=%d span=%.2f", p.m, p.n, p.k, blocks,
            (double)(t1 - t0) * 1e-3);
    static const char *const name[kTracePoints] = {"start", "first", "loop", "sum"};
    for (int ph = 0; ph < kTracePoints; ph++) {
        for (int b = 0; b < blocks; b++) {
            const unsigned long long *tb = t + b * kTracePoints;
            d[b] = ph == TR_START ? tb[TR_START] - t0 : tb[ph] - tb[ph - 1];
        }
        qsort(d, (size_t)blocks, sizeof *d, cmp_u64);
        fprintf(stderr, " %s=%.2f/%.2f", name[ph], (double)d[blocks / 2] * 1e-3, (double)d[blocks - 1] * 1e-3);
    }
    /* When the blocks' K loops end, from the first block's start: the
     * first, the median and the last (the layer's streaming tail). */
    for (int b = 0; b < blocks; b++) d[b] = t[b * kTracePoints + TR_LOOP] - t0;
    qsort(d, (size_t)blocks, sizeof *d, cmp_u64);
    fprintf(stderr, " loop_end=%.2f/%.2f/%.2f", (double)d[0] * 1e-3, (double)d[blocks / 2] * 1e-3,
            (double)d[blocks - 1] * 1e-3);
    fprintf(stderr, "\n");
    free(d);
}
#endif

/* trace: the launch options' QV_TRACE_* bits. */
template <int WT, bool BF, bool SWAP, int CPW>
qv_status launch_kernel(const small_params &p, dim3 grid, int smem, unsigned trace, cudaStream_t stream)
{
    static std::atomic<uint64_t> attr_dev(0); /* the devices its attributes are set on */
    QV_TRY(qv_func_attr_once(attr_dev, [&]() -> qv_status {
        QV_CUDA_TRY(cudaFuncSetAttribute(k_gemm_wonly_small<WT, BF, SWAP, CPW>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBudget),
                    "cudaFuncSetAttribute (small-M weight-only kernel shared memory)");
        /* Clusters of 16 (wo_small_cluster = 16) are beyond the portable 8. */
        QV_CUDA_TRY(cudaFuncSetAttribute(k_gemm_wonly_small<WT, BF, SWAP, CPW>,
                                         cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                    "cudaFuncSetAttribute (small-M weight-only kernel cluster size)");
        /* The largest carveout, so the two blocks per SM the plan counts on fit. */
        QV_CUDA_TRY(cudaFuncSetAttribute(k_gemm_wonly_small<WT, BF, SWAP, CPW>,
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         (int)cudaSharedmemCarveoutMaxShared),
                    "cudaFuncSetAttribute (small-M weight-only kernel carveout)");
        return QV_OK;
    }));
    /* Clusters of p.cluster consecutive K slices of one column tile. */
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kThreads, 1, 1);
    cfg.dynamicSmemBytes = (size_t)smem;
    cfg.stream = stream;
    /* A programmatic dependent of the kernel before it in the stream: the
     * blocks start as that kernel's blocks leave the SMs and wait for it
     * (step 1b). */
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = 1;
    attr[1].val.clusterDim.y = (unsigned)p.cluster;
    attr[1].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = p.cluster > 1 ? 2 : 1;
    /* QV_TRACE_WO_SMALL (measurements): the plan of each launch and how
     * many of its clusters the device runs at once, on stderr. */
    if (trace & (QV_TRACE_WO_SMALL | QV_TRACE_WO_SMALL_TIMELINE)) {
        int active = 0;
        if (p.cluster > 1)
            QV_CUDA_TRY(cudaOccupancyMaxActiveClusters(&active, k_gemm_wonly_small<WT, BF, SWAP, CPW>, &cfg),
                        "cudaOccupancyMaxActiveClusters (small-M weight-only kernel)");
        fprintf(stderr,
                "wonly_small plan: m=%d n=%d k=%d %s cpw=%d grid=%ux%u tiles/slice=%d cluster=%d smem=%d"
                " active_clusters=%d (%d blocks)\n",
                p.m, p.n, p.k, SWAP ? "swap" : "m16", CPW, grid.x, grid.y, p.tiles_per_split, p.cluster, smem,
                active, active * p.cluster);
    }
#ifdef QV_WO_SMALL_TIMELINE
    /* The launch's own parameters with a stamp buffer. */
    small_params pt = p;
    const int blocks = (int)(grid.x * grid.y);
    const size_t trace_bytes = sizeof(unsigned long long) * kTracePoints * (size_t)blocks;
    QV_CUDA_TRY(cudaMalloc((void **)&pt.trace, trace_bytes), "cudaMalloc (small-M time line)");
    cudaError_t rc = cudaLaunchKernelEx(&cfg, k_gemm_wonly_small<WT, BF, SWAP, CPW>, pt);
    if (rc == cudaSuccess) rc = cudaGetLastError();
    if (trace & QV_TRACE_WO_SMALL_TIMELINE) {
        unsigned long long *h = (unsigned long long *)malloc(trace_bytes);
        if (rc == cudaSuccess) rc = cudaStreamSynchronize(stream);
        if (rc == cudaSuccess && h) rc = cudaMemcpy(h, pt.trace, trace_bytes, cudaMemcpyDeviceToHost);
        if (rc == cudaSuccess && h) print_timeline(p, h, blocks);
        free(h);
    } else if (rc == cudaSuccess) {
        rc = cudaStreamSynchronize(stream);
    }
    const cudaError_t rf = cudaFree(pt.trace);
    if (rc == cudaSuccess) rc = rf;
    if (rc != cudaSuccess) return qv_cuda_fail((int)rc, "small-M weight-only kernel launch", __FILE__, __LINE__);
#else
    QV_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_gemm_wonly_small<WT, BF, SWAP, CPW>, p),
                "small-M weight-only kernel launch");
    QV_CUDA_TRY(cudaGetLastError(), "small-M weight-only kernel launch");
#endif
    return QV_OK;
}

/* The instance of weight type wt in orientation SWAP with CPW chunks a warp. */
template <bool BF, bool SWAP, int CPW>
qv_status launch_type(int wt, const small_params &p, dim3 grid, int smem, unsigned trace, cudaStream_t stream)
{
    switch (wt) {
    case WT_INT4: return launch_kernel<WT_INT4, BF, SWAP, CPW>(p, grid, smem, trace, stream);
    case WT_INT4_G: return launch_kernel<WT_INT4_G, BF, SWAP, CPW>(p, grid, smem, trace, stream);
    case WT_INT4_ZP: return launch_kernel<WT_INT4_ZP, BF, SWAP, CPW>(p, grid, smem, trace, stream);
    case WT_INT8: return launch_kernel<WT_INT8, BF, SWAP, CPW>(p, grid, smem, trace, stream);
    case WT_FP4_MX: return launch_kernel<WT_FP4_MX, BF, SWAP, CPW>(p, grid, smem, trace, stream);
    case WT_FP4_NV: return launch_kernel<WT_FP4_NV, BF, SWAP, CPW>(p, grid, smem, trace, stream);
    default: return launch_kernel<WT_FP8, BF, SWAP, CPW>(p, grid, smem, trace, stream);
    }
}

/* The instantiations: m16 and swapped orientations with one chunk per warp,
 * and the swapped one with two chunks per warp, for every weight type (FP4
 * included); and
 * the swapped fp16 ones with one or two chunks per warp in the one-fma form
 * for group scales with g >= 128 (WT_INT4_GF). */
template <bool BF>
qv_status launch_wt(int wt, bool swap, int cpw, const small_params &p, dim3 grid, int smem, unsigned trace,
                    cudaStream_t stream)
{
    if constexpr (!BF && QV_WO_SMALL_G4_FMA)
        if (swap && wt == WT_INT4_G && p.g_shift >= 3)
            return cpw == 2 ? launch_kernel<WT_INT4_GF, false, true, 2>(p, grid, smem, trace, stream)
                            : launch_kernel<WT_INT4_GF, false, true, 1>(p, grid, smem, trace, stream);
    if (swap && cpw == 2) return launch_type<BF, true, 2>(wt, p, grid, smem, trace, stream);
    if (swap) return launch_type<BF, true, 1>(wt, p, grid, smem, trace, stream);
    return launch_type<BF, false, 1>(wt, p, grid, smem, trace, stream);
}

/* Ring stages a block requests before it waits for the kernel in front
 * (step 1b; the scales always are): by default (the tuning table) one for
 * 4-bit codes and two for 8-bit ones. On the H200 the chained blocks of a
 * forward pass are then faster than with nothing requested before the wait,
 * most with 8-bit codes, and one layer timed alone is unchanged; more stages
 * ahead of A slow the layer alone and gain less in the chain (the requests
 * of the blocks that start early slow the last blocks of the layer in
 * front). The options' wo_small_pre (measurements), 1 to kStages or
 * QV_OPT_OFF for none, sets it for every row. */
int pre_stages(const qv_launch_ctx &ctx, bool four)
{
    const int set = ctx.o->wo_small_pre;
    if (set) return set == QV_OPT_OFF ? 0 : set;
    return four ? ctx.t->wo_small_pre_4bit : ctx.t->wo_small_pre_8bit;
}

} /* namespace */

size_t qv_wonly_small_workspace(const qv_variant *v, int m, int n, int k, const qv_launch_ctx *c)
{
    if (m < 1 || m > QV_WO_SMALL_MAX_M) return 0;
    /* Room for every configuration the options' wo_small can select (the
     * plan depends on its other fields and the SM count, not on the mode,
     * beyond the chunks per warp); two chunks per warp run only swapped,
     * M <= QV_WO_SMALL_SWAP_MAX_M. */
    const size_t one = make_plan(*c, v, m, n, k, 1).bytes;
    const size_t two = m <= QV_WO_SMALL_SWAP_MAX_M ? make_plan(*c, v, m, n, k, 2).bytes : 0;
    return one > two ? one : two;
}

/* Whether the default configuration gives an (m, n, k) problem of v two
 * chunks per warp (blocks of 1024 columns) in the swapped orientation. A
 * warp then runs two independent chunks per k16 row (one A fragment for
 * both) and a block copies twice the bytes per row; the price is half the
 * column blocks, which the plan makes up with more or longer K slices. The
 * two-chunk plan is taken when it fills at least three quarters of the block
 * slots and
 *  - needs no more K slices than the one-chunk plan, or
 *  - replaces a one-chunk plan that runs more than one wave of blocks, with
 *    slices of at least 64 k16 tiles, or
 *  - keeps slices of at least 128 tiles (K >= 2048 per block), for rows whose
 *    dequantization costs issue slots: not the 8-bit codes in fp16 without
 *    group scales, whose K loop already keeps up with the memory and which
 *    gain from two chunks only where they save a wave;
 * otherwise the extra slices (shorter, and more split-K sums) cost more than
 * the second chunk saves. Rows with zero points keep one chunk: their
 * dequant constants are rebuilt per tile with two (small_group_regs).
 * Measured on the H200 with every marlin row at M = 1..8: on the layers this
 * rule picks two chunks are faster or about even, on most others slower. */
static bool two_chunks_pay(const qv_launch_ctx &ctx, const qv_variant *v, const small_plan &one,
                           const small_plan &two)
{
    if (v->zero_point) return false;
    if (4 * (int64_t)two.n_blocks * two.splits < 3 * (int64_t)plan_slots(ctx, two.cluster)) return false;
    const bool one_waves = (int64_t)one.n_blocks * one.splits > plan_slots(ctx, one.cluster);
    const bool light = !four_bit(small_weight_type(v)) && v->afmt != QV_FMT_BF16 &&
                       v->scale_layout != QV_SCALE_GROUP;
    return two.splits <= one.splits || (one_waves && two.tiles_per_split >= 64) ||
           (!light && two.tiles_per_split >= 128);
}

/* The configuration the options' wo_small selects for an (m, n, k) problem
 * of v: the swapped orientation (M <= 8 by default) and the chunks per warp
 * (QV_WO_SMALL_SWAP2: two for every weight type; QV_WO_SMALL_SWAP: one;
 * unset: two_chunks_pay), and the plan for them (made once per launch: its
 * host time counts). */
static small_plan small_config(const qv_launch_ctx &ctx, const qv_variant *v, int m, int n, int k, bool *swap,
                               int *cpw)
{
    const qv_wo_small_mode mode = ctx.o->wo_small;
    *swap = (mode == QV_WO_SMALL_DEFAULT || mode == QV_WO_SMALL_SWAP || mode == QV_WO_SMALL_SWAP2) &&
            m <= QV_WO_SMALL_SWAP_MAX_M;
    *cpw = *swap && mode == QV_WO_SMALL_SWAP2 ? 2 : 1;
    const small_plan one = make_plan(ctx, v, m, n, k, *cpw);
    if (!*swap || mode != QV_WO_SMALL_DEFAULT) return one;
    const small_plan two = make_plan(ctx, v, m, n, k, 2);
    if (!two_chunks_pay(ctx, v, one, two)) return one;
    *cpw = 2;
    return two;
}

extern "C" int qv_wonly_small_plan_info(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o,
                                        qv_wo_small_plan_info *out)
{
    qv_launch_ctx c;
    if (m < 1 || m > QV_WO_SMALL_MAX_M || qv_launch_ctx_get(o, &c) != QV_OK) return 0;
    bool swap;
    int cpw;
    const small_plan pl = small_config(c, v, m, n, k, &swap, &cpw);
    out->swap = swap;
    out->cpw = cpw;
    out->n_blocks = pl.n_blocks;
    out->splits = pl.splits;
    out->cluster = pl.cluster;
    out->tiles_per_split = pl.tiles_per_split;
    out->slice_unit = pl.slice_unit;
    out->slice_q = pl.slice_q;
    out->slice_r = pl.slice_r;
    out->group_rows = pl.groups_max;
    out->smem = pl.smem;
    out->workspace = pl.bytes;
    out->asked = qv_wonly_small_workspace(v, m, n, k, &c);
    return 1;
}

qv_status qv_wonly_small_launch(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c)
{
    QV_ASSERT(a->m >= 1 && a->m <= QV_WO_SMALL_MAX_M, "qv_launch_wonly sends only M <= 16 here");
    const int wt = small_weight_type(v);
    bool swap;
    int cpw;
    const small_plan pl = small_config(*c, v, a->m, a->n, a->k, &swap, &cpw);
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
    p.slice_unit = pl.slice_unit;
    p.slice_q = pl.slice_q;
    p.slice_r = pl.slice_r;
    p.splits = pl.splits;
    p.cluster = pl.cluster;
    p.groups_max = pl.groups_max;
    p.pre_stages = pre_stages(*c, four_bit(wt));
    /* A build with fewer ring stages (-DQV_WO_SMALL_STAGES) than the range allows. */
    if (p.pre_stages > kStages)
        return qv_fail(QV_ERR_USAGE, "%s: qv_launch_opts.wo_small_pre = %d is more than the %d ring stages", v->name,
                       p.pre_stages, kStages);
    wo_set_scale_fields(p, v, a->k);
    p.gscale = v->s2_layout == QV_SCALE_TENSOR ? (const float *)a->scales2 : NULL;
    p.bias = v->bias_fmt != QV_FMT_NONE ? a->bias_packed : NULL;
    p.bias_fmt = v->bias_fmt == QV_FMT_F32 ? SF_F32 : v->bias_fmt == QV_FMT_BF16 ? SF_BF16 : SF_F16;
    /* The FP4 kernels place their group rows by k16 tiles per group: 1 (NV,
     * g = 16) or 2 (MX, g = 32), what check_fp4 lets through. */
    QV_ASSERT(!wt_is_fp4(wt) || p.g_shift == (wt == WT_FP4_MX ? 1 : 0), "FP4 rows have g = 16 (NV) or 32 (MX)");
    const bool bf = v->afmt == QV_FMT_BF16;
    const dim3 grid(pl.n_blocks, pl.splits, 1);
    if (pl.splits > 65535)
        return qv_fail(QV_ERR_SHAPE, "%s: k=%d needs more than 65535 K slices", v->name, a->k);
    cudaStream_t stream = (cudaStream_t)a->stream;
    return bf ? launch_wt<true>(wt, swap, cpw, p, grid, pl.smem, c->o->trace, stream)
              : launch_wt<false>(wt, swap, cpw, p, grid, pl.smem, c->o->trace, stream);
}
