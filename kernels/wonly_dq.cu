/* wonly_dq.cu: the weight-only family at large M, Y (m, n) = A (m, k) x W (k, n),
 * by dequantizing the Marlin-packed W into fp16/bf16 and running cuBLAS's
 * tensor-core GEMM (as vLLM's AWQ path does above 256 tokens). qv_launch_wonly
 * (kernels/wonly.cu) dispatches here from the M that qv_launch_opts.wo_dq_min_m sets.
 *
 * Declared arithmetic, the same as the mma kernel's (src/registry.c, family
 * "marlin"; the dequantization is the one of kernels/dequant.cuh, bit for bit):
 *  - group scales (QV_DQ_MUL_RN): w = half((q - z) * s), q - z exact, one
 *    half-precision multiply; cuBLAS sums the products in fp32 and rounds the
 *    fp32 result once to the output format (alpha = 1, beta = 0);
 *  - channel/tensor scales (QV_DQ_EXACT + QV_EP_MUL_WSCALE): w = value(q)
 *    exactly; cuBLAS writes the fp32 sums, and k_wo_dq_epilogue multiplies
 *    each by the fp32 scale and rounds once (RNE), as the mma kernel's epilogue;
 *  - split K (qv_launch_opts.wo_dq_splitk): cuBLAS writes the fp32 sums of S equal K
 *    slices (one strided-batched call), and k_wo_dq_epilogue adds them in
 *    slice order 0..S-1 in fp32 before the scale and the single rounding;
 *  - act_order: A's columns are gathered into the sorted-row order of the
 *    packed W (k_wo_dq_permute_cols), the same product in another K order.
 * cuBLAS is told to keep every reduction in fp32 and to use no atomics, so the
 * summation is fp32 throughout and two identical launches are bitwise equal.
 *
 * Chunks: W can be dequantized and multiplied in chunks of columns sized to
 * stay in L2 (wo_dq_chunk_mib), two chunk buffers ping-ponging: chunk i+1
 * is dequantized on a side stream while cuBLAS multiplies chunk i on the
 * caller's stream (wo_dq_overlap = QV_OPT_OFF keeps everything on one
 * stream). On the H200, 24 and 48 MiB chunks are slower than one chunk at
 * every M: a chunk's GEMM has too few output tiles to fill 132 SMs (M = 32 x
 * 1536 columns is 12 tiles of 128 x 128). So the default (tuning.h) is one
 * chunk (the whole fp16 W in the workspace, written to DRAM and read back),
 * and wo_dq_splitk splits each chunk's K to refill the SMs. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "cublas_handle.cuh"
#include "func_attr.cuh"
#include "dequant.cuh"
#include "internal/gpu.h"
#include "internal/tuning.h"
#include "internal/wonly_plan.h"
#include "qvet/gemm.h"
#include "wonly_common.cuh"
#include "wonly_dq.cuh"

namespace {

constexpr int kDqThreads = 256;             /* 8 warps, one k16 row of the tile each */
constexpr int kDqRows = 16 * (kDqThreads / 32); /* k rows per dequant tile: 128 */
/* Split-K plan: the output tiles should fill the device's SMs
 * (qv_launch_ctx.sms, as kernels/wonly.cu's plan), so that the split and
 * hence every output bit is a function of the shape and the SM count; at
 * most 64 slices, each at least 128 k long. */
constexpr int kMaxSplits = 64;
constexpr int kMinSliceK = 128;
/* Shared-memory words per dequantized column: 128 halves (64 words) plus 4
 * words of padding, so that the 32 lanes' 4-byte stores of one n8 tile (8
 * columns x 4 k pairs) land in 32 different banks, and columns stay 16-byte
 * aligned for the vector reads. */
constexpr int kColWords = kDqRows / 2 + 4;

struct dq_params {
    const uint32_t *b;     /* Marlin-packed weights, (k/16, 16n*bits/32) int32 (layout.h) */
    const void *scales;    /* group scales (k/g, n) in GROUP64 order (CHANNEL32 when g == k), f16/bf16 */
    const uint32_t *zeros; /* packed zero points (k/g, n/8) int32, or NULL */
    uint16_t *w;           /* (nc, k) f16/bf16 codes: column n0 + j of W at w[j*k .. j*k + k-1] */
    int n, k;
    int c0;                /* first 64-column chunk of this launch: n0 / 64 */
    int g_shift;           /* log2(g / 16): the group of k16 row kt is kt >> g_shift */
    int grp_single;        /* 1: group scales use the 32-wide channel permutation (k == g) */
    bool grouped;
    uint32_t unbias_h2;    /* fp8: 2^-s_pow2 as a half2 of the activation format; else 1.0 */
};

/* One block dequantizes a 128 (k) x 64 (n) tile: 64-column Marlin chunk
 * c0 + blockIdx.x, k16 rows 8*blockIdx.y .. 8*blockIdx.y + 7. Warp w decodes k16
 * row 8*blockIdx.y + w exactly as the mma kernel decodes its B fragments (lane
 * l: n8 tiles j8 = 0..7, column 8*j8 + l/4, k rows 2*(l%4) + {0,1, 8,9}), into
 * a column-major shared tile; then the block writes every column's run of up to
 * 128 k values with 16-byte stores. */
template <int WT, bool IS_BF16>
__global__ void __launch_bounds__(kDqThreads) k_wo_dq_dequant(const dq_params p)
{
    __shared__ __align__(16) uint32_t tile[64 * kColWords];
    constexpr bool four = wt_is_4bit(WT);
    /* int32 words per (k16 row, 64-column chunk): 16 x 64 codes of 4 or 8 bits. */
    constexpr int chunk_words = four ? 128 : 256;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int gid = lane >> 2, tig = lane & 3;
    const int c = p.c0 + blockIdx.x;
    const int kt = blockIdx.y * (kDqRows / 16) + warp;
    const int k_tiles = p.k / 16;

    if (kt < k_tiles) {
        const int64_t row_words = (int64_t)(p.n / 64) * chunk_words;
        const uint4 *src = reinterpret_cast<const uint4 *>(p.b + kt * row_words + (int64_t)c * chunk_words) +
                           lane * (four ? 1 : 2);
        uint32_t bw[8];
        const uint4 v0 = __ldg(src);
        bw[0] = v0.x, bw[1] = v0.y, bw[2] = v0.z, bw[3] = v0.w;
        if (!four) {
            const uint4 v1 = __ldg(src + 1);
            bw[4] = v1.x, bw[5] = v1.y, bw[6] = v1.z, bw[7] = v1.w;
        }

        uint32_t sc[8];
        uint32_t zc[8][2];
        if (p.grouped) {
#ifdef QV_MUTANT_gpu_wo_dq_group_index_shift
            /* Mutant (class 18): the group of a k16 row computed from the row before it. */
            const int64_t grp = (kt > 0 ? kt - 1 : 0) >> p.g_shift;
#else
            const int64_t grp = kt >> p.g_shift;
#endif
            const uint16_t *srow = static_cast<const uint16_t *>(p.scales) + grp * p.n;
            if (wt_is_fp4(WT)) {
                /* One byte per column, GROUP64_FP8: the chunk's 8 bytes at 8*gid. */
                const unsigned char *srow8 = static_cast<const unsigned char *>(p.scales) + grp * p.n;
                wo_fp4_lane_scales<WT, IS_BF16>(__ldg(reinterpret_cast<const uint2 *>(srow8 + 64 * c + 8 * gid)), sc);
            } else if (!p.grp_single) {
                /* GROUP64: positions 64c + 8*gid + j8 hold column 64c + 8*j8 + gid. */
                const uint4 sv = __ldg(reinterpret_cast<const uint4 *>(srow + 64 * c + 8 * gid));
                const uint32_t s4[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
                for (int j8 = 0; j8 < 8; j8++) sc[j8] = qv_h2<IS_BF16>::dup((s4[j8 >> 1] >> (16 * (j8 & 1))) & 0xFFFFu);
            } else {
#pragma unroll
                for (int j8 = 0; j8 < 8; j8++)
                    sc[j8] = qv_h2<IS_BF16>::dup(__ldg(srow + single_perm_index(64 * c + 8 * j8 + gid)));
            }
            if (WT == WT_FP8) {
                /* Exact: s * 2^s_pow2 * 2^-s_pow2 = s, a half-precision value. */
#pragma unroll
                for (int j8 = 0; j8 < 8; j8++) sc[j8] = qv_h2<IS_BF16>::mul(sc[j8], p.unbias_h2);
            }
            if (WT == WT_INT4_ZP) {
                /* Zero point of n8 tile j8 of this gid: word 8c + gid of the group's
                 * row, nibble j8/2 + 4*(j8%2) (interleave [0,2,4,6,1,3,5,7]). */
                const uint32_t zw = __ldg(p.zeros + grp * (p.n / 8) + 8 * c + gid);
#pragma unroll
                for (int j8 = 0; j8 < 8; j8++) {
#ifdef QV_MUTANT_gpu_wo_dq_zero_point_off_by_one
                    /* Mutant (class 9, AutoGPTQ #325, vLLM #38966): GPTQ v1's +1 applied to v2 zero points. */
                    const uint32_t z = ((zw >> (4 * ((j8 >> 1) + 4 * (j8 & 1)))) + 1) & 0xFu;
#else
                    const uint32_t z = (zw >> (4 * ((j8 >> 1) + 4 * (j8 & 1)))) & 0xFu;
#endif
                    qv_dq4_consts<IS_BF16>(z, zc[j8]);
                }
            }
        }

#pragma unroll
        for (int j8 = 0; j8 < 8; j8++) {
            uint32_t bf[2];
            wo_dq_word_scaled<WT, IS_BF16>(bw, j8, zc[j8], sc[j8], p.grouped, bf);
            /* Column 8*j8 + gid; k rows 16*warp + 2*tig + {0,1} (bf[0]) and + 8 + {0,1} (bf[1]). */
            uint32_t *col = tile + (8 * j8 + gid) * kColWords + warp * 8 + tig;
            col[0] = bf[0];
            col[4] = bf[1];
        }
    }
    __syncthreads();

    /* Every column's run of k values: 16 vectors of 8 halves for a full tile,
     * fewer for the last K tile (K is a multiple of 16, so of 8). */
    const int k0 = blockIdx.y * kDqRows;
    const int k_valid = min(kDqRows, p.k - k0);
#pragma unroll
    for (int i = 0; i < 64 * (kDqRows / 8) / kDqThreads; i++) {
        const int e = threadIdx.x + i * kDqThreads;
        const int col = e / (kDqRows / 8), part = e % (kDqRows / 8);
        if (part * 8 >= k_valid) continue;
        const uint4 v = *reinterpret_cast<const uint4 *>(tile + col * kColWords + part * 4);
        const int64_t out_col = (int64_t)blockIdx.x * 64 + col;
        *reinterpret_cast<uint4 *>(p.w + out_col * p.k + k0 + part * 8) = v;
    }
}

/* Epilogue of one chunk: c[row][n0 + j] = round(sum_t y_t[row][j] * s), the
 * fp32 sums of the K slices t = 0..splits-1 added in that order, then times s
 * = the channel (or tensor) scale times the fp8 unbias 2^-s_pow2 (an exact
 * product) unless the scales are grouped, one fp32 multiply and one RNE cast,
 * as kernels/wonly.cu's epilogue. FP4 rows: times the global scale (NV),
 * then plus the bias, each in fp32, before the one cast. A thread owns 4 consecutive columns (their
 * scales loaded once) and the rows blockIdx.y, blockIdx.y + gridDim.y, ... */
template <bool IS_BF16>
__global__ void k_wo_dq_epilogue(const float *y,      /* (splits, m, nc) fp32 sums, row-major (ld nc) */
                                 int splits,
                                 const void *scales,  /* (1, n) CHANNEL32 order f16/bf16/f32, (1, 1), or unused */
                                 uint16_t *c,         /* (m, n) output, row-major; columns n0 .. n0+nc-1 */
                                 int m, int n, int n0, int nc,
                                 int mode,            /* 0: grouped (no scale), 1: channel, 2: tensor */
                                 int sfmt, float unbias,
                                 const float *gscale, /* FP4 NV: (1) fp32 global scale, else NULL */
                                 const void *bias,    /* FP4: (n) bias codes in CHANNEL32 order, or NULL */
                                 int bfmt)            /* SF_*: the bias's storage */
{
    const int j = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (j >= nc) return;
    float s[4];
#pragma unroll
    for (int t = 0; t < 4; t++)
        s[t] = mode == 1 ? load_scale(scales, single_perm_index(n0 + j + t), sfmt) * unbias
               : mode == 2 ? load_scale(scales, 0, sfmt) * unbias : 1.0f;
    const float g = gscale ? __ldg(gscale) : 1.0f;
    float bb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (bias)
#pragma unroll
        for (int t = 0; t < 4; t++) bb[t] = load_scale(bias, single_perm_index(n0 + j + t), bfmt);
    const int64_t slice = (int64_t)m * nc;
    for (int64_t row = blockIdx.y; row < m; row += gridDim.y) {
        float4 v = *reinterpret_cast<const float4 *>(y + row * nc + j);
        for (int t = 1; t < splits; t++) {
            const float4 u = *reinterpret_cast<const float4 *>(y + t * slice + row * nc + j);
            v.x = v.x + u.x;
            v.y = v.y + u.y;
            v.z = v.z + u.z;
            v.w = v.w + u.w;
        }
        /* The scale, the global scale and the bias as separate fp32
         * roundings, as declared: the intrinsics keep -fmad=true from fusing
         * a product with the bias. */
        if (mode != 0) {
            v.x = __fmul_rn(v.x, s[0]);
            v.y = __fmul_rn(v.y, s[1]);
            v.z = __fmul_rn(v.z, s[2]);
            v.w = __fmul_rn(v.w, s[3]);
        }
        if (gscale) {
            v.x = __fmul_rn(v.x, g);
            v.y = __fmul_rn(v.y, g);
            v.z = __fmul_rn(v.z, g);
            v.w = __fmul_rn(v.w, g);
        }
        if (bias) {
            v.x = __fadd_rn(v.x, bb[0]);
            v.y = __fadd_rn(v.y, bb[1]);
            v.z = __fadd_rn(v.z, bb[2]);
            v.w = __fadd_rn(v.w, bb[3]);
        }
        /* Two 4-byte stores: gemm.h promises C only 4-byte alignment. */
        uint32_t *dst = reinterpret_cast<uint32_t *>(c + row * n + n0 + j);
        dst[0] = qv_h2<IS_BF16>::pack(v.x, v.y);
        dst[1] = qv_h2<IS_BF16>::pack(v.z, v.w);
    }
}

/* act_order: out[i][j] = a[i][perm[j]], the activations in the packed W's
 * sorted-row order. Row i is blockIdx.y; columns are strided over blockIdx.x. */
__global__ void k_wo_dq_permute_cols(const uint16_t *a,    /* (m, k) f16/bf16 codes, row-major */
                                     const int32_t *perm,  /* (k) logical column of sorted column j */
                                     uint16_t *out,        /* (m, k) f16/bf16 codes, row-major */
                                     int k)
{
    const int64_t row = (int64_t)blockIdx.y * k;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < k; j += gridDim.x * blockDim.x)
        out[row + j] = a[row + perm[j]];
}

/* ---- host side ---- */

/* The side stream that dequantizes the next chunk, and the events that order
 * it against the caller's stream, created on first use. */
struct side_stream {
    cudaStream_t s;
    cudaEvent_t start;      /* the caller's stream reached this launch */
    cudaEvent_t dq_done[2]; /* chunk buffer b holds its chunk */
    cudaEvent_t mm_done[2]; /* cuBLAS finished reading chunk buffer b */
};

qv_status side_get(side_stream **out)
{
    /* Per thread: two threads' launches recording and waiting on the same
     * events would order one's work by the other's (a wait on a buffer's
     * event re-recorded by another thread does not cover this thread's
     * reads). Per device: a stream and its events belong to one. */
    static thread_local side_stream sides[kQvDevices];
    static thread_local uint64_t made = 0;
    int dev = 0;
    QV_TRY(qv_current_device(&dev, "dequantize + cuBLAS overlap"));
    side_stream &ss = sides[dev];
    *out = &ss;
    if (made >> dev & 1) return QV_OK;
    /* Non-blocking: the side stream never synchronizes implicitly with the
     * legacy default stream; the events below order it explicitly. */
    QV_CUDA_TRY(cudaStreamCreateWithFlags(&ss.s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (dequant stream)");
    QV_CUDA_TRY(cudaEventCreateWithFlags(&ss.start, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    for (int b = 0; b < 2; b++) {
        QV_CUDA_TRY(cudaEventCreateWithFlags(&ss.dq_done[b], cudaEventDisableTiming), "cudaEventCreateWithFlags");
        QV_CUDA_TRY(cudaEventCreateWithFlags(&ss.mm_done[b], cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
    made |= (uint64_t)1 << dev;
    return QV_OK;
}

/* The workspace layout of one launch; qv_wonly_dq_workspace and the launch
 * agree on it because both call this. */
struct dq_plan {
    int cols;        /* columns per chunk: a multiple of 256, or n */
    int chunks;      /* ceil(n / cols) */
    int nbuf;        /* chunk buffers: 2 when chunked (ping-pong), else 1 */
    int splits;      /* K slices of each chunk's GEMM (1: no split) */
    bool epilogue;   /* fp32 product + k_wo_dq_epilogue: channel/tensor scales, a global scale,
                        a bias or splits > 1 */
    size_t aperm_off, buf_off[2], y_off, bytes;
};

/* The chunk size: the options' wo_dq_chunk_mib (QV_OPT_OFF: one chunk), or
 * the tuning table's (0: one chunk, the fastest setting at every M on the
 * H200; see the note on chunks above). */
double chunk_mib(const qv_launch_ctx &c)
{
    const double set = c.o->wo_dq_chunk_mib;
    if (set == (double)QV_OPT_OFF) return 0.0;
    return set != 0.0 ? set : c.t->wo_dq_chunk_mib;
}

dq_plan make_plan(const qv_launch_ctx &c, const qv_variant *v, int m, int n, int k)
{
    dq_plan p;
    const double mib = chunk_mib(c);
    /* A chunk is whole 256-column groups (cuBLAS's widest tile side). Every
     * chunk's GEMM reads all of A (m x k halves) again, so a chunk has at
     * least m columns: A's traffic then stays below that of the chunks
     * themselves, even where k is so long that such a chunk outgrows L2.
     * 0 turns chunking off. */
    int64_t cols = (int64_t)(mib * 1048576.0) / (2 * (int64_t)k) / 256 * 256;
    const int64_t cols_min = ((int64_t)m + 255) / 256 * 256;
    if (cols < cols_min) cols = cols_min;
    if (mib == 0 || cols >= n) cols = n;
    p.cols = (int)cols;
    p.chunks = (int)((n + cols - 1) / cols);
    p.nbuf = p.chunks > 1 ? 2 : 1;
    /* Split K (wo_dq_splitk, off by default) while a chunk's 128 x 128
     * output tiles do not fill the SMs, in equal slices of whole k16 rows. */
    p.splits = 1;
    if (c.o->wo_dq_splitk == QV_OPT_ON) {
        const int64_t tiles = ((int64_t)m + 127) / 128 * ((cols + 127) / 128);
        while (tiles * p.splits < c.sms && 2 * p.splits <= kMaxSplits && (k / 16) % (2 * p.splits) == 0 &&
               k / (2 * p.splits) >= kMinSliceK)
            p.splits *= 2;
    }
    p.epilogue = v->scale_layout != QV_SCALE_GROUP || p.splits > 1 || v->s2_layout != QV_SCALE_NONE ||
                 v->bias_fmt != QV_FMT_NONE;
    /* The workspace starts with the other paths' split-K arrival counters
     * (internal/wonly_plan.h), which must stay zero between launches (gemm.h) when
     * one workspace serves several M (as in `qvet bench`): this path never
     * writes them. */
    size_t off = qv_wonly_counters_bytes(n);
    p.aperm_off = off;
    if (v->act_order) off += align256((size_t)m * (size_t)k * 2);
    for (int b = 0; b < 2; b++) {
        p.buf_off[b] = off;
        if (b < p.nbuf) off += align256((size_t)cols * (size_t)k * 2);
    }
    p.y_off = off;
    if (p.epilogue) off += align256((size_t)p.splits * (size_t)m * (size_t)cols * sizeof(float));
    p.bytes = off;
    return p;
}

template <bool BF>
qv_status launch_dequant(int wt, const dq_params &dp, dim3 grid, cudaStream_t s)
{
    switch (wt) {
    case WT_INT4: k_wo_dq_dequant<WT_INT4, BF><<<grid, kDqThreads, 0, s>>>(dp); break;
    case WT_INT4_ZP: k_wo_dq_dequant<WT_INT4_ZP, BF><<<grid, kDqThreads, 0, s>>>(dp); break;
    case WT_INT8: k_wo_dq_dequant<WT_INT8, BF><<<grid, kDqThreads, 0, s>>>(dp); break;
    case WT_FP4_MX: k_wo_dq_dequant<WT_FP4_MX, BF><<<grid, kDqThreads, 0, s>>>(dp); break;
    case WT_FP4_NV: k_wo_dq_dequant<WT_FP4_NV, BF><<<grid, kDqThreads, 0, s>>>(dp); break;
    default: k_wo_dq_dequant<WT_FP8, BF><<<grid, kDqThreads, 0, s>>>(dp); break;
    }
    QV_CUDA_TRY(cudaGetLastError(), "weight-only dequantize kernel launch");
    return QV_OK;
}

} /* namespace */

size_t qv_wonly_dq_workspace(const qv_variant *v, int m, int n, int k, const qv_launch_ctx *c)
{
    return make_plan(*c, v, m, n, k).bytes;
}

qv_status qv_wonly_dq_launch(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c)
{
    const dq_plan pl = make_plan(*c, v, a->m, a->n, a->k);
    if (pl.bytes > a->workspace_bytes || !a->workspace)
        return qv_fail(QV_ERR_USAGE, "%s: workspace of %zu bytes given, %zu needed (qv_workspace_wonly)", v->name,
                       a->workspace_bytes, pl.bytes);
    /* CUDA's grid.y limit (65535) bounds the act_order gather's rows and the
     * dequant's 128-row K tiles. */
    if ((v->act_order && a->m > 65535) || (a->k + kDqRows - 1) / kDqRows > 65535)
        return qv_fail(QV_ERR_SHAPE, "%s: m=%d, k=%d exceed the large-M path's grid (act_order m <= 65535, "
                       "k <= %d)", v->name, a->m, a->k, 65535 * kDqRows);
    const bool bf = v->afmt == QV_FMT_BF16, fp8 = v->layout == QV_LAYOUT_MARLIN_FP8;
    cudaStream_t s0 = (cudaStream_t)a->stream;
    unsigned char *ws = (unsigned char *)a->workspace;
    qv_status st;
    cublasHandle_t h = qv_cublas_handle(&st);
    if (!h) return st;
    cublasStatus_t cs = cublasSetStream(h, s0);
    if (cs != CUBLAS_STATUS_SUCCESS) return qv_fail(QV_ERR_CUDA, "cublasSetStream: %s", qv_cublas_msg(cs));

    const void *a_sorted = a->a;
    if (v->act_order) {
        uint16_t *ap = (uint16_t *)(ws + pl.aperm_off);
        /* One row per grid row; enough 256-thread blocks to cover k once, at
         * most 64 (16384 columns; the loop strides over the rest, and m rows
         * already give the grid thousands of blocks). */
        dim3 grid((unsigned)((a->k + 255) / 256 < 64 ? (a->k + 255) / 256 : 64), (unsigned)a->m);
        k_wo_dq_permute_cols<<<grid, 256, 0, s0>>>((const uint16_t *)a->a, a->perm, ap, a->k);
        QV_CUDA_TRY(cudaGetLastError(), "act_order column permutation launch");
        a_sorted = ap;
    }

    const bool overlap = pl.chunks > 1 && c->o->wo_dq_overlap != QV_OPT_OFF;
    side_stream *ss = NULL;
    if (overlap) {
        QV_TRY(side_get(&ss));
        QV_CUDA_TRY(cudaEventRecord(ss->start, s0), "cudaEventRecord (dequant fork)");
        QV_CUDA_TRY(cudaStreamWaitEvent(ss->s, ss->start, 0), "cudaStreamWaitEvent (dequant fork)");
    }

    dq_params dp;
    dp.b = (const uint32_t *)a->b;
    dp.scales = a->scales;
    dp.zeros = (const uint32_t *)a->zeros;
    dp.n = a->n;
    dp.k = a->k;
    dp.grouped = v->scale_layout == QV_SCALE_GROUP;
    dp.g_shift = 0;
    if (dp.grouped)
        for (int t = v->g / 16; t > 1; t >>= 1) dp.g_shift++;
    /* layout.h: a single group (g == K) is stored in the channel order (not
     * the FP4 bytes). */
    dp.grp_single = dp.grouped && a->k == v->g && !wt_is_fp4(weight_type(v));
    /* layout.h, MARLIN_FP8: the packed scales hold s * 2^8 (f16) or s * 2^120
     * (bf16); multiplying by 2^-8 (2^-120) restores s exactly, as
     * kernels/wonly.cu does. 0x1C00 is fp16 2^-8, 0x0380 bf16 2^-120, 0x3C00
     * fp16 1.0 and 0x3F80 bf16 1.0. */
    dp.unbias_h2 = fp8 ? (bf ? 0x03800380u : 0x1C001C00u) : (bf ? 0x3F803F80u : 0x3C003C00u);
    const float unbias = fp8 ? (bf ? 0x1p-120f : 0x1p-8f) : 1.0f;
    const int wt = weight_type(v);
    const cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f, beta = 0.0f;
    const int sfmt = v->sfmt == QV_FMT_F32 ? SF_F32 : v->sfmt == QV_FMT_BF16 ? SF_BF16 : SF_F16;
    const float *gscale = v->s2_layout == QV_SCALE_TENSOR ? (const float *)a->scales2 : NULL;
    const void *bias = v->bias_fmt != QV_FMT_NONE ? a->bias_packed : NULL;
    const int bfmt = v->bias_fmt == QV_FMT_F32 ? SF_F32 : v->bias_fmt == QV_FMT_BF16 ? SF_BF16 : SF_F16;

    for (int ci = 0; ci < pl.chunks; ci++) {
        const int b = ci % pl.nbuf;
        const int n0 = ci * pl.cols;
        const int nc = a->n - n0 < pl.cols ? a->n - n0 : pl.cols;
        uint16_t *wbuf = (uint16_t *)(ws + pl.buf_off[b]);
        dp.w = wbuf;
        dp.c0 = n0 / 64;
        dim3 grid((unsigned)(nc / 64), (unsigned)((a->k + kDqRows - 1) / kDqRows));
        cudaStream_t sd = overlap ? ss->s : s0;
        /* Chunk buffer b was last read by the GEMM of chunk ci - 2. */
        if (overlap && ci >= 2)
            QV_CUDA_TRY(cudaStreamWaitEvent(sd, ss->mm_done[b], 0), "cudaStreamWaitEvent (buffer reuse)");
        QV_TRY(bf ? launch_dequant<true>(wt, dp, grid, sd) : launch_dequant<false>(wt, dp, grid, sd));
        if (overlap) {
            QV_CUDA_TRY(cudaEventRecord(ss->dq_done[b], sd), "cudaEventRecord (chunk dequantized)");
            QV_CUDA_TRY(cudaStreamWaitEvent(s0, ss->dq_done[b], 0), "cudaStreamWaitEvent (chunk dequantized)");
        }
        /* Column-major view: Y^T[n0 .. n0+nc) (nc x m) = Wc (nc x k, the chunk
         * buffer (nc, k) row-major, ld k) x A^T (k x m, ld k). Group rows
         * without a split write the output directly (ld n); otherwise cuBLAS
         * writes fp32 (ld nc), slice t of K (k/S long, from column t*k/S of
         * both operands) to y + t*m*nc. */
        float *y = pl.epilogue ? (float *)(ws + pl.y_off) : NULL;
        if (pl.splits == 1) {
            void *dst = pl.epilogue ? (void *)y : (void *)((uint16_t *)a->c + n0);
            cs = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, nc, a->m, a->k, &alpha, wbuf, t, a->k, a_sorted, t,
                              a->k, &beta, dst, pl.epilogue ? CUDA_R_32F : t, pl.epilogue ? nc : a->n,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        } else {
            const int ks = a->k / pl.splits;
            cs = cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, nc, a->m, ks, &alpha, wbuf, t, a->k, ks,
                                            a_sorted, t, a->k, ks, &beta, y, CUDA_R_32F, nc,
                                            (long long)a->m * nc, pl.splits, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT);
        }
        if (cs != CUBLAS_STATUS_SUCCESS)
            return qv_fail(QV_ERR_CUDA, "%s: cuBLAS GEMM (m=%d, n=%d of %d, k=%d, %d K slices): %s", v->name,
                           a->m, nc, a->n, a->k, pl.splits, qv_cublas_msg(cs));
        QV_CUDA_TRY(cudaGetLastError(), "cuBLAS GEMM launch (weight-only large M)");
        if (pl.epilogue) {
            /* 128 threads own 512 columns; one grid row per output row, up
             * to CUDA's grid.y limit (the kernel strides over the rest). */
            const dim3 blocks((unsigned)((nc / 4 + 127) / 128), (unsigned)(a->m < 65535 ? a->m : 65535));
            const int mode = v->scale_layout == QV_SCALE_CHANNEL ? 1 : v->scale_layout == QV_SCALE_TENSOR ? 2 : 0;
            if (bf)
                k_wo_dq_epilogue<true><<<blocks, 128, 0, s0>>>(y, pl.splits, a->scales, (uint16_t *)a->c, a->m,
                                                               a->n, n0, nc, mode, sfmt, unbias, gscale, bias,
                                                               bfmt);
            else
                k_wo_dq_epilogue<false><<<blocks, 128, 0, s0>>>(y, pl.splits, a->scales, (uint16_t *)a->c, a->m,
                                                                a->n, n0, nc, mode, sfmt, unbias, gscale, bias,
                                                                bfmt);
            QV_CUDA_TRY(cudaGetLastError(), "weight-only epilogue kernel launch");
        }
        if (overlap) QV_CUDA_TRY(cudaEventRecord(ss->mm_done[b], s0), "cudaEventRecord (chunk multiplied)");
    }
    return QV_OK;
}
