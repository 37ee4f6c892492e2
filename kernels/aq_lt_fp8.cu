/* aq_lt_fp8.cu: the cuBLASLt path of the W8A8 e4m3 rows (aq_lt_fp8.cuh).
 *
 * cuBLASLt runs the TN form fp8 needs, in column-major terms:
 *   D (n x m, ld n, f16) = W^T-op (k x n, ld k) x A^T (k x m, ld k),
 * i.e. row-major D (m, n) = A (m, k) x W (n, k)^T with the plain-nk weights
 * as they are. Matrix "A" of cuBLASLt is our weights, "B" our activations, so
 * A's scale is the weight scale and B's the activation scale:
 *   - w8a8-fp8-tensor:   SCALAR_32F x SCALAR_32F, both pointers used as they are;
 *   - w8a8-fp8-tok-ch, two forms of one arithmetic:
 *                        * below aq_lt_fp8_outer_min_m rows, two steps:
 *                          cuBLASLt per tensor with unit scales into an fp32
 *                          D in the workspace (the same promoted
 *                          accumulator), then k_aq_lt_fp8_outer_scales
 *                          multiplies by the channel and then the token
 *                          scale in fp32, the order the row declares, and
 *                          rounds to fp16: cuBLASLt's outer-vector kernels
 *                          are much slower than its per-tensor ones at
 *                          M <= 64 on the H200;
 *                        * from it on, OUTER_VEC_32F x OUTER_VEC_32F: the (n)
 *                          channel scales and the (m) token scales, as they
 *                          are;
 *   - w8a8-fp8-block128, two forms of one arithmetic (each 128-K partial
 *                        times s_a(token, kb) * s_w(n, kb)), both reading the
 *                        weights' scales from the packed scales2, where the
 *                        packer put the two layouts cuBLASLt reads (layout.h,
 *                        qv_block_scales2_cols; without scales2 the mma kernel
 *                        runs), and the activations' (K/128, M) scales as
 *                        they are (variant.h: MN-major, the layout cuBLASLt's
 *                        VEC128 reads, index kb * rows + row, measured on the
 *                        H200):
 *                        * below aq_lt_fp8_blk_min_m rows (the tuning
 *                          table's: more on layers of N, K <= 8192), VEC128_32F x
 *                          VEC128_32F: the weights' (kb, n) form;
 *                        * from it on, BLK128x128_32F for the weights x
 *                          VEC128_32F for the activations: the (nb,
 *                          roundup(kb, 4)) form, per 128-row block of W its K
 *                          blocks contiguous, padded to a multiple of 4 (on
 *                          the H200 its outputs equal the other form's up to
 *                          the summation order, tools/probe-blk128.cu);
 *                          cuBLASLt's BLK128x128 kernels are faster at
 *                          M >= 256 and slower at M <= 64 on the H200.
 *                        Nothing runs in front of cuBLASLt when M % 4 == 0.
 *                        cuBLASLt takes VEC128 only at M % 4 == 0; other M run
 *                        on M rounded up to 4 through padded copies of A, of
 *                        the activation scales (zero columns) and of D in the
 *                        workspace.
 * fp32 compute and scale type, alpha 1, beta 0, fast accumulation explicitly off.
 * The algorithm of each (mode, m, n, k, alignments) is chosen once by the
 * heuristic, with the split-K reduction restricted to fp32 partials in the
 * workspace (no in-place reduction: its order is the hardware's; no reduction
 * in the fp16 output type: the bug class of docs/design.md §6 #4), and cached
 * (lt_cache.cuh). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include <cublasLt.h>

#include "aq_lt_fp8.cuh"
#include "lt_cache.cuh"
#include "internal/aq.h"

namespace {

/* The two-step form's scale kernel: 256 threads per block, a common choice
 * for an element-wise pass (bandwidth, not occupancy, bounds it). */
constexpr int SX_THREADS = 256;
/* The largest grid y dimension CUDA allows: rows of the scale kernel's grid. */
constexpr int GRID_Y_MAX = 65535;
/* The K width of one scale block and of one promotion. */
constexpr int KB = 128;

/* The scaling modes this path runs (index into the descriptors): per
 * tensor, outer vectors, VEC128 for both operands, and 128x128 blocks for
 * the weights with VEC128 for the activations. */
enum lt_mode { MODE_TENSOR = 0, MODE_OUTER, MODE_VEC128, MODE_BLK, MODE_UNIT, N_MODES };
/* MODE_UNIT is the first step of per token x channel's two-step form: per
 * tensor scaling with both scales 1, D in fp32 (its own lt_cache). */

std::atomic<long long> g_runs(0), g_blk_runs(0), g_two_step_runs(0);

/* The unit scale of MODE_UNIT, a device constant (cuBLASLt reads scale
 * factors through device pointers). */
__device__ const float g_unit_scale = 1.0f;

/* An M threshold option: QV_OPT_OFF is INT_MAX (no M reaches it), unset
 * `dflt`. */
int threshold(int set, int dflt) { return set == QV_OPT_OFF ? INT_MAX : set ? set : dflt; }

/* The default smallest M of the block rows' BLK128x128 form on an N x K
 * layer: from about M = 128 it is the faster form on the H200
 * (tools/probe-blk128.cu), but on layers with N and K at most 8192 (the o
 * projections of both models) VEC128 stays faster up to M = 255. */
int blk_default_min_m(const qv_launch_ctx &c, int n, int k)
{
    const int small = c.t->aq_lt_fp8_blk_small_nk;
    return n <= small && k <= small ? c.t->aq_lt_fp8_blk_min_m_small : c.t->aq_lt_fp8_blk_min_m;
}

/* The smallest M of the block rows' BLK128x128 form (below it, VEC128). */
int blk_min_m(const qv_launch_ctx &c, int n, int k)
{
    return threshold(c.o->aq_lt_fp8_blk_min_m, blk_default_min_m(c, n, k));
}

/* Whether the block row takes the BLK128x128 form at M, from blk_min_m on:
 * at M = 128 and from M = 193. On the H200 VEC128 is at least as fast at
 * M = 160 and 192, and slower at M = 128 and from M = 224. */
bool blk_form_wanted(int m, int blk_min_m)
{
    return m >= blk_min_m && (m % 128 == 0 || m > 192);
}

/* The smallest M of per token x channel's outer-vector form (below it, the
 * two-step form): the two steps are faster on the H200 below M = 128 (1.1-1.6x
 * at M <= 64), the outer vectors from M = 128. */
int outer_min_m(const qv_launch_ctx &c) { return threshold(c.o->aq_lt_fp8_outer_min_m, c.t->aq_lt_fp8_outer_min_m); }

/* The mode of a (weight scale, activation scale) pair of aq_gemm.cuh, or -1
 * when this path has none for it. VEC128 needs K a multiple of 128: how
 * cuBLASLt scales a partial last K block was not measured. */
int mode_for(int wscale, int ascale, int k)
{
    if (wscale == AQ_WS_TENSOR && ascale == AQ_AS_TENSOR) return MODE_TENSOR;
    if (wscale == AQ_WS_CHANNEL && ascale == AQ_AS_TOKEN) return MODE_OUTER;
    if (wscale == AQ_WS_BLOCK && ascale == AQ_AS_TOKEN_BLOCK && k % KB == 0) return MODE_VEC128;
    return -1;
}

/* The aq_gemm.cuh scale modes of an e4m3 registry row (-1 for any other). */
void row_scales(const qv_variant *v, int *wscale, int *ascale)
{
    *wscale = v->scale_layout == QV_SCALE_TENSOR ? AQ_WS_TENSOR
              : v->scale_layout == QV_SCALE_CHANNEL ? AQ_WS_CHANNEL
              : v->scale_layout == QV_SCALE_BLOCK ? AQ_WS_BLOCK
                                                  : -1;
    *ascale = v->act_scale == QV_ASCALE_TENSOR ? AQ_AS_TENSOR
              : v->act_scale == QV_ASCALE_TOKEN ? AQ_AS_TOKEN
              : v->act_scale == QV_ASCALE_TOKEN_BLOCK ? AQ_AS_TOKEN_BLOCK
                                                      : -1;
    if (v->wfmt != QV_FMT_E4M3 || v->afmt != QV_FMT_E4M3) *wscale = *ascale = -1;
}

/* VEC128's M: cuBLASLt takes the mode only when M is a multiple of 4 (H200:
 * M = 1, 2, 7, 31 declined; 4, 16, 32, 64, 300 taken), as a 16-byte pitch of
 * the (K/128, M) activation scale tensor would require. Other M run on
 * M rounded up to 4: a padded copy of A, zero rows added, and D through the
 * workspace, whose first M rows are copied to the output. */
int vec128_m(int m) { return (m + 3) & ~3; }

/* One launch's workspace layout (byte offsets from the region's 256-aligned base). */
struct lt_plan {
    int m4;          /* the GEMM's M: m, or for VEC128 m rounded up to 4 */
    size_t off_d32;  /* the two-step form: (m, n) f32 D of its first step */
    size_t off_sa;   /* VEC128 with m4 > m: (kb, m4) f32 activation scales, columns past m zero */
    size_t off_a;    /* VEC128 with m4 > m: (m4, k) e4m3 activations, rows past m zero */
    size_t off_d;    /* VEC128 with m4 > m: (m4, n) f16 output */
    size_t total;    /* region bytes including 256 of alignment slack */
};

lt_plan plan_for(bool block, bool two_step, int m, int n, int k)
{
    lt_plan pl;
    size_t off = LT_WS_BYTES;
    pl.m4 = block ? vec128_m(m) : m;
    pl.off_sa = pl.off_a = pl.off_d = pl.off_d32 = off;
    if (two_step) off += lt_align256((size_t)m * (size_t)n * 4);
    if (block && pl.m4 != m) {
        pl.off_sa = off;
        off += lt_align256((size_t)(k / KB) * (size_t)pl.m4 * 4);
        pl.off_a = off;
        off += lt_align256((size_t)pl.m4 * (size_t)k);
        pl.off_d = off;
        off += lt_align256((size_t)pl.m4 * (size_t)n * 2);
    }
    pl.total = off + 256;
    return pl;
}

/* ---- device kernel --------------------------------------------------------- */

/* The second step of per token x channel's two-step form: c[i n + j] =
 * f16_rn((d[i n + j] * w_scale[j]) * a_scale[i]), each product one fp32 RN
 * rounding, in the order of the row's epilogue (MUL_WSCALE, then MUL_ASCALE;
 * fp16 RNE, no saturation). Grid (ceil(n / SX_THREADS), min(m, GRID_Y_MAX)):
 * thread x is column j, block row y rows y, y + gridDim.y, ... (coalesced
 * along each row). */
__global__ void __launch_bounds__(SX_THREADS)
k_aq_lt_fp8_outer_scales(const float *__restrict__ d, const float *__restrict__ w_scale,
                         const float *__restrict__ a_scale, int m, int n, __half *__restrict__ c)
{
    const int j = (int)blockIdx.x * SX_THREADS + (int)threadIdx.x;
    if (j >= n) return;
    const float sw = w_scale[j];
    for (int i = (int)blockIdx.y; i < m; i += (int)gridDim.y) {
        const int64_t e = (int64_t)i * n + j;
#ifdef QV_MUTANT_gpu_lt_fp8_two_step_scale_swap
        /* Mutant (class 19): the token scale indexed by the column, the
         * channel scale by the row (wrapped): the two vectors swapped. */
        c[e] = __float2half_rn(__fmul_rn(__fmul_rn(d[e], w_scale[i % n]), a_scale[j % m]));
#else
        c[e] = __float2half_rn(__fmul_rn(__fmul_rn(d[e], sw), a_scale[i]));
#endif
    }
}

/* ---- cuBLASLt: one operation per mode, cached algorithm choices ------------- */

/* e4m3 weights and activations, f16 D. Split-K only through fp32 partials in
 * the workspace, summed in a fixed order: never in place (an order the
 * hardware picks) and never in the fp16 output type. */
lt_cache g_lt = {"cuBLASLt fp8", CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16F, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE};
/* MODE_UNIT's: the same operands and reduction rule, D in fp32. */
lt_cache g_lt32 = {"cuBLASLt fp8 (fp32 D)", CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_32F,
                   CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE};
lt_cache *cache_of(int mode) { return mode == MODE_UNIT ? &g_lt32 : &g_lt; }
std::mutex g_mu;
cublasLtMatmulDesc_t g_desc[N_MODES] = {NULL, NULL, NULL, NULL, NULL};

/* The mode's operation: fp32 compute and scale, W^T-op x A, the mode's scale
 * interpretation for both operands, fast accumulation off. The scale
 * pointers are set at each launch. */
qv_status lt_init(int mode)
{
    if (g_desc[mode]) return QV_OK;
    cublasLtMatmulDesc_t d = NULL;
    QV_TRY(lt_desc_create(cache_of(mode), CUBLAS_COMPUTE_32F, CUDA_R_32F, &d));
    /* cuBLASLt's A (our weights) and B (our activations) per mode. */
    static const int32_t a_mode[N_MODES] = {
        CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
        CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
        CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
    static const int32_t b_mode[N_MODES] = {
        CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
        CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
        CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
#ifdef QV_MUTANT_gpu_lt_fp8_fast_accum
    /* Mutant (class 16, DeepSeek-V3 §3.3.2): cuBLASLt's fast accumulation, the
     * ~14-bit tensor-core sum over all of K without promotion to fp32. */
    const int8_t fast = 1;
#else
    const int8_t fast = 0;
#endif
    cublasStatus_t s =
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode[mode], sizeof a_mode[mode]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode[mode], sizeof b_mode[mode]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
    if (mode == MODE_UNIT && s == CUBLAS_STATUS_SUCCESS) {
        /* Both scales 1, for good: the descriptor's pointers never change. */
        void *unit = NULL;
        const cudaError_t ce = cudaGetSymbolAddress(&unit, g_unit_scale);
        if (ce != cudaSuccess) {
            cublasLtMatmulDescDestroy(d);
            return qv_cuda_fail((int)ce, "cudaGetSymbolAddress(g_unit_scale)", __FILE__, __LINE__);
        }
        s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &unit, sizeof unit);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &unit, sizeof unit);
    }
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulDescDestroy(d);
        return lt_fail(cache_of(mode), s, "matmul descriptor attributes");
    }
    g_desc[mode] = d;
    return QV_OK;
}

} /* namespace */

size_t aq_lt_fp8_workspace(const qv_launch_ctx &c, const qv_variant *v, int m, int n, int k)
{
    if (m < 1 || n < 1 || k < 1) return 0;
    int wscale, ascale;
    row_scales(v, &wscale, &ascale);
    const int mode = mode_for(wscale, ascale, k);
    if (mode < 0) return 0;
    /* Block rows: the VEC128 form's region, which also holds the BLK128x128
     * form's; per token x channel below outer_min_m: the two-step form's D. */
    return plan_for(mode == MODE_VEC128, mode == MODE_OUTER && m < outer_min_m(c), m, n, k).total;
}

extern "C" int qv_aq_lt_fp8_blk_default_min_m(int n, int k, const qv_launch_opts *o)
{
    qv_launch_ctx c;
    if (qv_launch_ctx_get(o, &c) != QV_OK) return -1;
    return blk_default_min_m(c, n, k);
}

extern "C" int qv_aq_lt_fp8_blk_form(int m, int n, int k, const qv_launch_opts *o)
{
    qv_launch_ctx c;
    if (qv_launch_ctx_get(o, &c) != QV_OK) return -1;
    return blk_form_wanted(m, blk_min_m(c, n, k));
}

qv_status aq_lt_fp8_try(const qv_launch_ctx &c, const aq_params &p, const qv_gemm_args *a, size_t ws_offset,
                        bool *taken)
{
    *taken = false;
    int mode = mode_for(p.wscale, p.ascale, p.k);
    if (mode < 0) return QV_OK;
    const bool block = mode == MODE_VEC128;
    /* Per token x channel below outer_min_m: the two-step form, whose first
     * step is MODE_UNIT (its own cache, fp32 D). */
    const bool two_step = mode == MODE_OUTER && p.m < outer_min_m(c);
    if (two_step) mode = MODE_UNIT;
    const lt_plan pl = plan_for(block, two_step, p.m, p.n, p.k);
    const bool padded = pl.m4 != p.m;
    const int kb = p.k / KB;
    /* Block rows read the weights' scales in the layouts the packer derived
     * (scales2); without them the mma kernel runs. */
    if (block && !a->scales2) return QV_OK;
    uint8_t *base = lt_region(a, ws_offset, pl.total);
    if (!base) return QV_OK;

    /* The GEMM's activations, activation scales and output: the caller's, or
     * (M rounded up to 4) the workspace's padded copies. */
    const void *a_ptr = padded ? (const void *)(base + pl.off_a) : (const void *)p.a;
    void *d_ptr = padded ? (void *)(base + pl.off_d) : two_step ? (void *)(base + pl.off_d32) : (void *)p.c;
    const void *as_ptr = padded ? (const void *)(base + pl.off_sa) : (const void *)p.a_scale;

    std::lock_guard<std::mutex> lock(g_mu);
    /* Block rows from blk_min_m: the BLK128x128 form where cuBLASLt has an
     * algorithm for it, else the VEC128 form. */
    lt_entry *e = NULL;
    for (int form = block && blk_form_wanted(p.m, blk_min_m(c, p.n, p.k)) ? MODE_BLK : mode;; form = mode) {
        QV_TRY(lt_init(form));
        cublasLtMatmulDesc_t d = g_desc[form];
        if (form != MODE_UNIT) {
            /* The weights' scales: the row's own, or the block form's part of scales2. */
            const float *s2 = (const float *)a->scales2;
            const void *ws_ptr = form == MODE_VEC128 ? (const void *)s2
                                 : form == MODE_BLK  ? (const void *)(s2 + (size_t)kb * (size_t)p.n)
                                                     : p.w_scale;
            cublasStatus_t ls =
                cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws_ptr, sizeof ws_ptr);
            if (ls != CUBLAS_STATUS_SUCCESS) return lt_fail(&g_lt, ls, "weight scale pointer");
            ls = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &as_ptr, sizeof as_ptr);
            if (ls != CUBLAS_STATUS_SUCCESS) return lt_fail(&g_lt, ls, "activation scale pointer");
        }
        const lt_key key = {form, pl.m4, p.n, p.k, lt_align_of(p.b), lt_align_of(a_ptr), lt_align_of(d_ptr)};
        QV_TRY(lt_lookup(cache_of(form), d, key, c.o->trace, &e));
        if (e->found || form == mode) {
            mode = form;
            break;
        }
    }
    if (!e->found) return QV_OK;

    cudaStream_t st = (cudaStream_t)a->stream;
    if (padded) {
        /* The activation scales: (kb, m) into (kb, m4), the padding columns
         * zero; A's m rows, then zero rows up to m4 (their outputs are never
         * copied out). */
        uint8_t *sa4 = base + pl.off_sa;
        QV_CUDA_TRY(cudaMemsetAsync(sa4, 0, (size_t)kb * (size_t)pl.m4 * 4, st), "zeroing the padded activation scales");
#ifdef QV_MUTANT_gpu_lt_fp8_scales_unpadded
        /* Mutant (class 12): the (kb, m) activation scales copied as they are,
         * with a row pitch of m, where cuBLASLt reads a pitch of m rounded up to 4. */
        QV_CUDA_TRY(cudaMemcpyAsync(sa4, p.a_scale, (size_t)kb * (size_t)p.m * 4, cudaMemcpyDeviceToDevice, st),
                    "copying the activation scales");
#else
        QV_CUDA_TRY(cudaMemcpy2DAsync(sa4, (size_t)pl.m4 * 4, p.a_scale, (size_t)p.m * 4, (size_t)p.m * 4,
                                      (size_t)kb, cudaMemcpyDeviceToDevice, st),
                    "copying the activation scales into the padded VEC128 tensor");
#endif
        uint8_t *a4 = base + pl.off_a;
        QV_CUDA_TRY(cudaMemcpyAsync(a4, p.a, (size_t)p.m * (size_t)p.k, cudaMemcpyDeviceToDevice, st),
                    "copying A into the padded VEC128 operand");
        QV_CUDA_TRY(cudaMemsetAsync(a4 + (size_t)p.m * (size_t)p.k, 0, (size_t)(pl.m4 - p.m) * (size_t)p.k, st),
                    "zeroing the padding rows of A");
    }
    /* fp32 alpha = 1, beta = 0: D is the scaled product, C is never read. */
    const float one = 1.0f, zero = 0.0f;
    bool ran;
    QV_TRY(lt_matmul(cache_of(mode), g_desc[mode], e, &one, p.b, a_ptr, &zero, d_ptr, base, st, &ran));
    /* Refused before writing D: the shape goes to the mma kernel from now on. */
    if (!ran) return QV_OK;
    if (two_step) {
        /* The scales, in the row's order, and the fp16 output. */
        const dim3 grid((unsigned)((p.n + SX_THREADS - 1) / SX_THREADS), (unsigned)(p.m < GRID_Y_MAX ? p.m : GRID_Y_MAX));
        k_aq_lt_fp8_outer_scales<<<grid, SX_THREADS, 0, st>>>((const float *)d_ptr, (const float *)p.w_scale,
                                                               p.a_scale, p.m, p.n, (__half *)p.c);
        QV_CUDA_TRY(cudaGetLastError(), "launching k_aq_lt_fp8_outer_scales");
        g_two_step_runs++;
    }
    if (padded)
        QV_CUDA_TRY(cudaMemcpyAsync(p.c, d_ptr, (size_t)p.m * (size_t)p.n * sizeof(__half), cudaMemcpyDeviceToDevice,
                                    st),
                    "copying the first M rows of the padded VEC128 output");
    g_runs++;
    if (mode == MODE_BLK) g_blk_runs++;
    *taken = true;
    return QV_OK;
}

extern "C" long long qv_aq_lt_fp8_runs(void) { return g_runs.load(); }

extern "C" long long qv_aq_lt_fp8_blk_runs(void) { return g_blk_runs.load(); }

extern "C" long long qv_aq_lt_fp8_two_step_runs(void) { return g_two_step_runs.load(); }
