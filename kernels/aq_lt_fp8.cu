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
 * in the fp16 output type: the bug class of DESIGN §6 #4), and cached. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include <cublasLt.h>

#include "aq_lt_fp8.cuh"
#include "qvet/aq.h"

namespace {

/* cuBLASLt's workspace: 32 MiB, what NVIDIA recommends on Hopper and what the
 * benchmark's cuBLASLt baselines are measured with. */
constexpr size_t LT_WS_BYTES = (size_t)32 << 20;
/* Cached (mode, shape, alignment) algorithm choices; a bench or check touches a few dozen. */
constexpr int LT_CACHE = 64;
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

size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* The largest power of two <= 256 dividing the address: what cuBLASLt is told. */
unsigned align_of(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    unsigned r = 256;
    while (r > 1 && a % r) r >>= 1;
    return r;
}

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
        off += align256(kb * (size_t)n * 4);
        pl.off_sa = off;
        off += align256(kb * (size_t)pl.m4 * 4);
        if (pl.m4 != m) {
            pl.off_a = off;
            off += align256((size_t)pl.m4 * (size_t)k);
            pl.off_d = off;
            off += align256((size_t)pl.m4 * (size_t)n * 2);
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

/* ---- cuBLASLt: handle, operations, cached algorithm choices ------------------- */

struct lt_key {
    int mode, m, n, k;
    unsigned aw, aa, ad;   /* alignment of the weights, the activations and D */
};

struct lt_entry {
    lt_key key;
    bool found;        /* false: cuBLASLt has no algorithm; the mma kernel runs */
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
};

std::mutex g_mu;
cublasLtHandle_t g_lt = NULL;
cublasLtMatmulDesc_t g_desc[N_MODES] = {NULL, NULL, NULL};
lt_entry g_cache[LT_CACHE];
int g_ncache = 0, g_evict = 0;

qv_status lt_fail(cublasStatus_t s, const char *what)
{
    return qv_fail(QV_ERR_CUDA, "cuBLASLt fp8 %s: %s (status %d)", what, cublasLtGetStatusString(s), (int)s);
}

#define LT_TRY(call, what)                                                     \
    do {                                                                       \
        cublasStatus_t s_ = (call);                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) return lt_fail(s_, (what));           \
    } while (0)

/* The process's handle and one operation per mode: fp32 compute and scale,
 * W^T-op x A, the mode's scale interpretation for both operands, fast
 * accumulation off. The scale pointers are set at each launch. */
qv_status lt_init(int mode)
{
    if (g_desc[mode]) return QV_OK;
    if (!g_lt) LT_TRY(cublasLtCreate(&g_lt), "cublasLtCreate");
    cublasLtMatmulDesc_t d = NULL;
    LT_TRY(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
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
    cublasStatus_t s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &scale_mode[mode],
                                           sizeof scale_mode[mode]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &scale_mode[mode],
                                           sizeof scale_mode[mode]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulDescDestroy(d);
        return lt_fail(s, "matmul descriptor attributes");
    }
    g_desc[mode] = d;
    return QV_OK;
}

void entry_clear(lt_entry *e)
{
    if (e->la) cublasLtMatrixLayoutDestroy(e->la);
    if (e->lb) cublasLtMatrixLayoutDestroy(e->lb);
    if (e->ld) cublasLtMatrixLayoutDestroy(e->ld);
    e->la = e->lb = e->ld = NULL;
}

bool key_eq(const lt_key &a, const lt_key &b)
{
    return a.mode == b.mode && a.m == b.m && a.n == b.n && a.k == b.k && a.aw == b.aw && a.aa == b.aa &&
           a.ad == b.ad;
}

/* Layouts and the heuristic's first algorithm for key, created on first use. */
qv_status lt_lookup(const lt_key &key, lt_entry **out)
{
    for (int i = 0; i < g_ncache; i++)
        if (key_eq(g_cache[i].key, key)) {
            *out = &g_cache[i];
            return QV_OK;
        }
    lt_entry *e;
    if (g_ncache < LT_CACHE) {
        e = &g_cache[g_ncache++];
    } else {
        e = &g_cache[g_evict];
        g_evict = (g_evict + 1) % LT_CACHE;
        entry_clear(e);
    }
    e->key = key;
    e->found = false;
    e->la = e->lb = e->ld = NULL;
    /* A stale entry would be looked up again; it is marked unusable until filled. */
    e->key.m = -1;
    LT_TRY(cublasLtMatrixLayoutCreate(&e->la, CUDA_R_8F_E4M3, key.k, key.n, key.k), "layout of W");
    LT_TRY(cublasLtMatrixLayoutCreate(&e->lb, CUDA_R_8F_E4M3, key.k, key.m, key.k), "layout of A");
    LT_TRY(cublasLtMatrixLayoutCreate(&e->ld, CUDA_R_16F, key.n, key.m, key.n), "layout of D");
    cublasLtMatmulPreference_t pref = NULL;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "preference");
    const size_t wsb = LT_WS_BYTES;
    /* Split-K only through fp32 partials in the workspace, summed in a fixed
     * order: never in place (an order the hardware picks) and never in the
     * fp16 output type. */
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    const uint32_t aw = key.aw, aa = key.aa, ad = key.ad;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                            sizeof wsb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                 sizeof schemes);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw, sizeof aw);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &aa, sizeof aa);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulPreferenceDestroy(pref);
        return lt_fail(s, "preference attributes");
    }
    cublasLtMatmulHeuristicResult_t h;
    int count = 0;
    s = cublasLtMatmulAlgoGetHeuristic(g_lt, g_desc[key.mode], e->la, e->lb, e->ld, e->ld, pref, 1, &h, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    /* Any failure or no result means cuBLASLt does not take this shape: the
     * mma kernel does, with arithmetic inside the same declaration. */
    e->found = s == CUBLAS_STATUS_SUCCESS && count > 0 && h.state == CUBLAS_STATUS_SUCCESS;
    if (e->found) e->algo = h.algo;
    e->key = key;
    *out = e;
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
    /* A workspace sized for the mma kernel alone (the variable changed after
     * the size was asked for, or a caller's own rule) leaves the launch to it. */
    if (!a->workspace || a->workspace_bytes < ws_offset + pl.total) return QV_OK;

    const uintptr_t base_u = ((uintptr_t)a->workspace + ws_offset + 255) & ~(uintptr_t)255;
    uint8_t *base = (uint8_t *)base_u;
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
    LT_TRY(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws_ptr, sizeof ws_ptr),
           "weight scale pointer");
    LT_TRY(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &as_ptr, sizeof as_ptr),
           "activation scale pointer");
    lt_entry *e = NULL;
    QV_TRY(lt_lookup(lt_key{mode, pl.m4, p.n, p.k, align_of(p.b), align_of(a_ptr), align_of(d_ptr)}, &e));
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
    const cublasStatus_t s = cublasLtMatmul(g_lt, d, &one, p.b, e->la, a_ptr, e->lb, &zero, d_ptr, e->ld, d_ptr,
                                            e->ld, &e->algo, base, LT_WS_BYTES, st);
    if (s != CUBLAS_STATUS_SUCCESS) {
        /* cuBLASLt refused the call (its status, not a CUDA error) before
         * writing D: the shape goes to the mma kernel from now on. */
        e->found = false;
        QV_CUDA_TRY(cudaGetLastError(), "cublasLtMatmul fp8 launch");
        return QV_OK;
    }
    QV_CUDA_TRY(cudaGetLastError(), "cublasLtMatmul fp8 launch");
    if (padded)
        QV_CUDA_TRY(cudaMemcpyAsync(p.c, d_ptr, (size_t)p.m * (size_t)p.n * sizeof(__half), cudaMemcpyDeviceToDevice,
                                    st),
                    "copying the first M rows of the padded VEC128 output");
    g_runs++;
    *taken = true;
    return QV_OK;
}

extern "C" long long qv_aq_lt_fp8_runs(void) { return g_runs.load(); }
