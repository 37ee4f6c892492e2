/* aq_lt_fp8.cu: the cuBLASLt path of the W8A8 e4m3 rows (aq_lt_fp8.cuh).
 *
 * cuBLASLt runs the TN form fp8 needs, in column-major terms:
 *   D (n x m, ld n, f16) = W^T-op (k x n, ld k) x A^T (k x m, ld k),
 * i.e. row-major D (m, n) = A (m, k) x W (n, k)^T with the plain-nk weights
 * as they are. Matrix "A" of cuBLASLt is our weights, "B" our activations, so
 * A's scale is the weight scale and B's the activation scale:
 *   - w8a8-fp8-tensor:   SCALAR_32F x SCALAR_32F, both pointers used as they are;
 *   - w8a8-fp8-tok-ch:   OUTER_VEC_32F x OUTER_VEC_32F: the (n) channel scales
 *                        and the (m) token scales, as they are;
 *   - w8a8-fp8-block128: VEC128_32F x VEC128_32F, whose scale tensors are
 *                        k-block-major (index kb * rows + row, measured on the
 *                        H200): k_aq_lt_fp8_block_scales writes the weights'
 *                        (kb, n) expansion of the (kb, n/128) blocks and the
 *                        transpose of the (m, kb) activation scales into the
 *                        workspace at every launch. cuBLASLt takes VEC128
 *                        only at M % 4 == 0; other M run on M rounded up to 4
 *                        through padded copies of A and D in the workspace.
 *                        BLK128x128_32F itself is not usable there (refused
 *                        at the Llama shapes, wrong on a small one); the
 *                        expansion is the same arithmetic: each 128-K partial
 *                        times s_a(token, kb) * s_w(n, kb).
 * fp32 compute and scale type, alpha 1, beta 0, fast accumulation explicitly off.
 * The algorithm of each (mode, m, n, k, alignments) is chosen once by the
 * heuristic, with the split-K reduction restricted to fp32 partials in the
 * workspace (no in-place reduction: its order is the hardware's; no reduction
 * in the fp16 output type: the bug class of DESIGN §6 #4), and cached
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
#include "qvet/aq.h"

namespace {

/* The scale expansion kernel: 256 threads per block, a common choice for an
 * element-wise copy (bandwidth, not occupancy, bounds it). */
constexpr int SX_THREADS = 256;
/* The largest grid y dimension CUDA allows: K blocks of the expansion grid. */
constexpr int GRID_Y_MAX = 65535;
/* The K width of one scale block and of one promotion. */
constexpr int KB = 128;

/* The three scaling modes this path runs (index into the descriptors). */
enum lt_mode { MODE_TENSOR = 0, MODE_OUTER, MODE_VEC128, N_MODES };

std::atomic<long long> g_runs(0);

/* The default threshold of each mode (aq.h). */
const int k_default_min_m[N_MODES] = {QV_AQ_LT_FP8_MIN_M_TENSOR, QV_AQ_LT_FP8_MIN_M_TOK_CH, QV_AQ_LT_FP8_MIN_M_BLOCK};

/* QVET_AQ_LT_FP8_MIN_M: false when set to anything but a whole number >= 1
 * (digits only) or "off" (INT_MAX: no M reaches it); unset, the mode's default. */
bool env_min_m(int mode, int *out)
{
    const char *s = getenv("QVET_AQ_LT_FP8_MIN_M");
    *out = k_default_min_m[mode];
    if (!s || !*s) return true;
    if (!strcmp(s, "off")) {
        *out = INT_MAX;
        return true;
    }
    if (*s < '0' || *s > '9') return false; /* strtol would skip spaces and take a sign */
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (*end || errno || v < 1 || v > INT_MAX) return false;
    *out = (int)v;
    return true;
}

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
    size_t off_sw;   /* VEC128: (kb, n) f32 weight scales */
    size_t off_sa;   /* VEC128: (kb, m4) f32 activation scales */
    size_t off_a;    /* VEC128 with m4 > m: (m4, k) e4m3 activations, rows past m zero */
    size_t off_d;    /* VEC128 with m4 > m: (m4, n) f16 output */
    size_t total;    /* region bytes including 256 of alignment slack */
};

lt_plan plan_for(bool block, int m, int n, int k)
{
    lt_plan pl;
    size_t off = LT_WS_BYTES;
    pl.m4 = block ? vec128_m(m) : m;
    pl.off_sw = pl.off_sa = pl.off_a = pl.off_d = off;
    if (block) {
        const size_t kb = (size_t)k / KB;
        off += lt_align256(kb * (size_t)n * 4);
        pl.off_sa = off;
        off += lt_align256(kb * (size_t)pl.m4 * 4);
        if (pl.m4 != m) {
            pl.off_a = off;
            off += lt_align256((size_t)pl.m4 * (size_t)k);
            pl.off_d = off;
            off += lt_align256((size_t)pl.m4 * (size_t)n * 2);
        }
    }
    pl.total = off + 256;
    return pl;
}

/* ---- device kernel --------------------------------------------------------- */

/* The VEC128 scale tensors from the rows' block scales: w_scale (kb, ceil(n/128))
 * f32 row-major, a_scale (m, kb) f32 row-major -> sw (kb, n) f32 with
 * sw[b n + j] = w_scale[b ceil(n/128) + j/128], and sa (kb, m4) f32 with
 * sa[b m4 + i] = a_scale[i kb + b] for i < m and 0 for the padding rows
 * m <= i < m4. Pure copies: no value changes. Grid (ceil((n + m4) /
 * SX_THREADS), kb): block row b writes K block b, thread x column j = x of sw,
 * then row i = x - n of sa; 32-bit index arithmetic within a K block
 * (n + m4 < 2^31, the launcher's rule). */
__global__ void __launch_bounds__(SX_THREADS)
k_aq_lt_fp8_block_scales(const float *w_scale, const float *a_scale, int m, int m4, int n, int kb, float *sw,
                         float *sa)
{
    const int x = (int)blockIdx.x * SX_THREADS + (int)threadIdx.x, b = (int)blockIdx.y;
    const int nb = (n + KB - 1) / KB;
    if (x < n) {
        sw[(int64_t)b * n + x] = w_scale[(int64_t)b * nb + x / KB];
    } else if (x - n < m4) {
        const int i = x - n;
        sa[(int64_t)b * m4 + i] = i < m ? a_scale[(int64_t)i * kb + b] : 0.0f;
    }
}

/* ---- cuBLASLt: one operation per mode, cached algorithm choices ------------- */

/* e4m3 weights and activations, f16 D. Split-K only through fp32 partials in
 * the workspace, summed in a fixed order: never in place (an order the
 * hardware picks) and never in the fp16 output type. */
lt_cache g_lt = {"cuBLASLt fp8", CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16F, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE};
std::mutex g_mu;
cublasLtMatmulDesc_t g_desc[N_MODES] = {NULL, NULL, NULL};

/* The mode's operation: fp32 compute and scale, W^T-op x A, the mode's scale
 * interpretation for both operands, fast accumulation off. The scale
 * pointers are set at each launch. */
qv_status lt_init(int mode)
{
    if (g_desc[mode]) return QV_OK;
    cublasLtMatmulDesc_t d = NULL;
    QV_TRY(lt_desc_create(&g_lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, &d));
    static const int32_t scale_mode[N_MODES] = {CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
                                                CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                                                CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F};
#ifdef QV_MUTANT_gpu_lt_fp8_fast_accum
    /* Mutant (class 16, DeepSeek-V3 §3.3.2): cuBLASLt's fast accumulation, the
     * ~14-bit tensor-core sum over all of K without promotion to fp32. */
    const int8_t fast = 1;
#else
    const int8_t fast = 0;
#endif
    cublasStatus_t s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &scale_mode[mode],
                                                      sizeof scale_mode[mode]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &scale_mode[mode],
                                           sizeof scale_mode[mode]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulDescDestroy(d);
        return lt_fail(&g_lt, s, "matmul descriptor attributes");
    }
    g_desc[mode] = d;
    return QV_OK;
}

} /* namespace */

size_t aq_lt_fp8_workspace(const qv_variant *v, int m, int n, int k)
{
    if (m < 1 || n < 1 || k < 1) return 0;
    int wscale, ascale;
    row_scales(v, &wscale, &ascale);
    const int mode = mode_for(wscale, ascale, k);
    if (mode < 0) return 0;
    int min_m;
    /* A malformed variable falls back to the default here; the launch reports it. */
    if (!env_min_m(mode, &min_m)) min_m = k_default_min_m[mode];
    if (m < min_m) return 0;
    return plan_for(mode == MODE_VEC128, m, n, k).total;
}

extern "C" int qv_aq_lt_fp8_default_min_m(const qv_variant *v)
{
    int wscale, ascale;
    row_scales(v, &wscale, &ascale);
    /* The mode alone (K = 128 passes VEC128's shape rule). */
    const int mode = mode_for(wscale, ascale, KB);
    return mode < 0 ? 0 : k_default_min_m[mode];
}

qv_status aq_lt_fp8_try(const aq_params &p, const qv_gemm_args *a, size_t ws_offset, const char *name, bool *taken)
{
    *taken = false;
    const int mode = mode_for(p.wscale, p.ascale, p.k);
    int min_m;
    /* The variable is checked whatever the shape, before any CUDA call. */
    if (!env_min_m(mode < 0 ? MODE_TENSOR : mode, &min_m))
        return qv_fail(QV_ERR_USAGE, "%s: QVET_AQ_LT_FP8_MIN_M=\"%s\" is neither a whole number >= 1 nor \"off\"",
                       name, getenv("QVET_AQ_LT_FP8_MIN_M"));
    if (mode < 0 || p.m < min_m) return QV_OK;
    const bool block = mode == MODE_VEC128;
    const lt_plan pl = plan_for(block, p.m, p.n, p.k);
    const bool padded = pl.m4 != p.m;
    /* The expansion grid: K blocks along y, n + m4 columns in 32-bit indices. */
    if (block && (p.k / KB > GRID_Y_MAX || (int64_t)p.n + pl.m4 > INT_MAX - SX_THREADS)) return QV_OK;
    uint8_t *base = lt_region(a, ws_offset, pl.total);
    if (!base) return QV_OK;

    float *sw = (float *)(base + pl.off_sw), *sa = (float *)(base + pl.off_sa);
    /* The GEMM's activations and output: the caller's, or (M rounded up to 4)
     * the workspace's padded copies. */
    const void *a_ptr = padded ? (const void *)(base + pl.off_a) : (const void *)p.a;
    void *d_ptr = padded ? (void *)(base + pl.off_d) : (void *)p.c;

    /* The scale tensors cuBLASLt reads: the rows' own, or (VEC128) the
     * workspace copies k_aq_lt_fp8_block_scales writes below. */
    const void *ws_ptr = block ? (const void *)sw : p.w_scale;
    const void *as_ptr = block ? (const void *)sa : (const void *)p.a_scale;

    std::lock_guard<std::mutex> lock(g_mu);
    QV_TRY(lt_init(mode));
    cublasLtMatmulDesc_t d = g_desc[mode];
    cublasStatus_t ls = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws_ptr, sizeof ws_ptr);
    if (ls != CUBLAS_STATUS_SUCCESS) return lt_fail(&g_lt, ls, "weight scale pointer");
    ls = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &as_ptr, sizeof as_ptr);
    if (ls != CUBLAS_STATUS_SUCCESS) return lt_fail(&g_lt, ls, "activation scale pointer");
    const lt_key key = {mode, pl.m4, p.n, p.k, lt_align_of(p.b), lt_align_of(a_ptr), lt_align_of(d_ptr)};
    lt_entry *e = NULL;
    QV_TRY(lt_lookup(&g_lt, d, key, &e));
    if (!e->found) return QV_OK;

    cudaStream_t st = (cudaStream_t)a->stream;
    if (block) {
        const int kb = p.k / KB;
        const dim3 grid((unsigned)(((int64_t)p.n + pl.m4 + SX_THREADS - 1) / SX_THREADS), (unsigned)kb);
        k_aq_lt_fp8_block_scales<<<grid, SX_THREADS, 0, st>>>((const float *)p.w_scale, p.a_scale, p.m, pl.m4, p.n,
                                                                kb, sw, sa);
        QV_CUDA_TRY(cudaGetLastError(), "launching k_aq_lt_fp8_block_scales");
    }
    if (padded) {
        /* A's m rows, then zero rows up to m4 (their outputs are never copied out). */
        uint8_t *a4 = base + pl.off_a;
        QV_CUDA_TRY(cudaMemcpyAsync(a4, p.a, (size_t)p.m * (size_t)p.k, cudaMemcpyDeviceToDevice, st),
                    "copying A into the padded VEC128 operand");
        QV_CUDA_TRY(cudaMemsetAsync(a4 + (size_t)p.m * (size_t)p.k, 0, (size_t)(pl.m4 - p.m) * (size_t)p.k, st),
                    "zeroing the padding rows of A");
    }
    /* fp32 alpha = 1, beta = 0: D is the scaled product, C is never read. */
    const float one = 1.0f, zero = 0.0f;
    bool ran;
    QV_TRY(lt_matmul(&g_lt, d, e, &one, p.b, a_ptr, &zero, d_ptr, base, st, &ran));
    /* Refused before writing D: the shape goes to the mma kernel from now on. */
    if (!ran) return QV_OK;
    if (padded)
        QV_CUDA_TRY(cudaMemcpyAsync(p.c, d_ptr, (size_t)p.m * (size_t)p.n * sizeof(__half), cudaMemcpyDeviceToDevice,
                                    st),
                    "copying the first M rows of the padded VEC128 output");
    g_runs++;
    *taken = true;
    return QV_OK;
}

extern "C" long long qv_aq_lt_fp8_runs(void) { return g_runs.load(); }
