/* aq_bench.c: the activation-quantized family's parts of `qvet bench`
 * (aq_bench.h): cuBLASLt W8A8 baselines (fp8 e4m3 -> f16 with the default
 * promoted accumulation and per-tensor, per-token x per-channel or per-128-K
 * scales, or 128x128 weight blocks with per-128-K activation scales; int8 ->
 * int32) and the per-token activation quantizer alone.
 * Buffers hold random codes (scales hold 1.0): speed does not depend on the
 * values, and correctness is the GPU suites' job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "aq_bench.h"
#include "internal/aq.h"
#include "internal/gpu.h"
#include "qvet/gemm.h"

#define LT_L2_TWICE ((size_t)120 << 20)    /* twice the H200's 60 MB L2: weights rotate past it */
#define LT_MAX_COPIES 64
#define LT_WORKSPACE ((size_t)32 << 20)    /* cuBLASLt's recommended workspace on Hopper */
#define LT_KB 128                          /* K per VEC128 scale */

/* One cuBLASLt problem: descriptors for one M, weights (and their scales) rotating. */
typedef struct lt_ctx {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int fp8;
    qv_bench_lt_scale scale; /* fp8: how both operands are scaled */
    void *w[LT_MAX_COPIES];  /* (n, k) int8 / e4m3 weights, row-major (column-major k x n) */
    void *sw[LT_MAX_COPIES]; /* fp8: weight scales of copy i, f32: (1), (n), (ceil(k/128), n), or
                                (ceil(n/128), ceil(k/128) rounded up to 4) for 128x128 blocks */
    int copies;
    unsigned trace;         /* the launch options' QV_TRACE_* bits */
    const void *a;          /* (m, k) int8 / e4m3 activations, row-major */
    const void *sa;         /* fp8: activation scales, (1), (m) or (ceil(k/128), m) f32 */
    void *c;                /* (m, n) f16 or int32 output, row-major */
    void *ws;               /* LT_WORKSPACE bytes */
} lt_ctx;

static const char *const lt_scale_names[] = {"fp8", "fp8 tok-ch", "fp8 block", "fp8 blk128"};

static qv_status lt_fail(cublasStatus_t s, const char *what)
{
    return qv_fail(QV_ERR_CUDA, "cuBLASLt %s: status %d", what, (int)s);
}

#define LT_TRY(call, what)                                                     \
    do {                                                                       \
        cublasStatus_t s_ = (call);                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) return lt_fail(s_, (what));           \
    } while (0)

static qv_status lt_launch(void *vctx, int iter, void *stream)
{
    lt_ctx *c = vctx;
    const float fone = 1.0f, fzero = 0.0f;
    const int32_t ione = 1, izero = 0;
    const void *alpha = c->fp8 ? (const void *)&fone : (const void *)&ione;
    const void *beta = c->fp8 ? (const void *)&fzero : (const void *)&izero;
    const int copy = iter % c->copies;
    if (c->fp8) {
        /* The copy's own weight scales, as a row's packed scales rotate with its weights. */
        const void *sw = c->sw[copy];
        LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw, sizeof sw),
               "a scale");
    }
    cublasStatus_t s = cublasLtMatmul(c->lt, c->op, alpha, c->w[copy], c->la, c->a, c->lb, beta, c->c, c->lc, c->c,
                                      c->lc, &c->algo, c->ws, LT_WORKSPACE, (cudaStream_t)stream);
    return s == CUBLAS_STATUS_SUCCESS ? QV_OK : lt_fail(s, c->fp8 ? "matmul fp8" : "matmul int8");
}

static void lt_teardown(lt_ctx *c)
{
    if (c->la) cublasLtMatrixLayoutDestroy(c->la);
    if (c->lb) cublasLtMatrixLayoutDestroy(c->lb);
    if (c->lc) cublasLtMatrixLayoutDestroy(c->lc);
    if (c->op) cublasLtMatmulDescDestroy(c->op);
    c->la = c->lb = c->lc = NULL;
    c->op = NULL;
}

/* Descriptors of D (m, n) = X (m, k) x W (n, k)^T in the TN form that fp8 and
 * int8 need: column-major A = W with op T (k x n, ld k), B = X (k x m, ld k),
 * D column-major n x m (ld n), i.e. row-major (m, n). fp8: both operands
 * scaled in c->scale's mode from c->sw[0] and c->sa, fast accumulation off. */
static qv_status lt_setup(lt_ctx *c, int m, int n, int k)
{
    const cudaDataType_t ab = c->fp8 ? CUDA_R_8F_E4M3 : CUDA_R_8I, cd = c->fp8 ? CUDA_R_16F : CUDA_R_32I;
    const cublasComputeType_t ct = c->fp8 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32I;
    const cudaDataType_t scale_t = c->fp8 ? CUDA_R_32F : CUDA_R_32I;
    LT_TRY(cublasLtMatmulDescCreate(&c->op, ct, scale_t), "matmul desc");
    const cublasOperation_t tA = CUBLAS_OP_T, nB = CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA), "transa");
    LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSB, &nB, sizeof nB), "transb");
    if (c->fp8) {
        /* cuBLASLt's A (the weights) and B (the activations) per scaling. */
        static const int32_t a_modes[] = {
            CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
            CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F};
        static const int32_t b_modes[] = {
            CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
            CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F};
        const int32_t amode = a_modes[c->scale], bmode = b_modes[c->scale];
        const int8_t fast = 0;
        LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &amode, sizeof amode),
               "a scale mode");
        LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bmode, sizeof bmode),
               "b scale mode");
        LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast),
               "fast accumulation off");
        LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &c->sw[0],
                                              sizeof c->sw[0]),
               "a scale");
        LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &c->sa, sizeof c->sa),
               "b scale");
    }
    LT_TRY(cublasLtMatrixLayoutCreate(&c->la, ab, (uint64_t)k, (uint64_t)n, k), "layout A");
    LT_TRY(cublasLtMatrixLayoutCreate(&c->lb, ab, (uint64_t)k, (uint64_t)m, k), "layout B");
    LT_TRY(cublasLtMatrixLayoutCreate(&c->lc, cd, (uint64_t)n, (uint64_t)m, n), "layout C");
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "preference");
    size_t wsb = LT_WORKSPACE;
    cublasStatus_t s =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    if (s == CUBLAS_STATUS_SUCCESS && c->fp8 && c->scale != QV_BENCH_LT_TENSOR) {
        /* Split K only through fp32 partials in the workspace, as the e4m3
         * rows' own cuBLASLt path (kernels/aq_lt_fp8.cu) must: the like for
         * like of w8a8-fp8-tok-ch and -block128. */
        const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                 sizeof schemes);
    }
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(c->lt, c->op, c->la, c->lb, c->lc, c->lc, pref, 1, &h, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found < 1)
        return qv_fail(QV_ERR_UNSUPPORTED, "cuBLASLt has no %s algorithm for m=%d n=%d k=%d",
                       c->fp8 ? lt_scale_names[c->scale] : "int8", m, n, k);
    c->algo = h.algo;
    char label[64];
    snprintf(label, sizeof label, "baseline %s", c->fp8 ? lt_scale_names[c->scale] : "int8");
    if (c->trace & QV_TRACE_LT) qv_lt_trace_algo(label, m, n, k, &h.algo, h.workspaceSize, h.wavesCount);
    return QV_OK;
}

/* cudaMalloc through a list freed together: weights and their scales per
 * copy, plus a handful of shared buffers. */
typedef struct ab_pool {
    void *p[2 * LT_MAX_COPIES + 8];
    int n;
} ab_pool;

static qv_status ab_alloc(ab_pool *pool, size_t bytes, void **out)
{
    QV_ASSERT(pool->n < (int)(sizeof pool->p / sizeof pool->p[0]), "benchmark allocation list is full");
    QV_CUDA_TRY(cudaMalloc(out, bytes), "cudaMalloc (benchmark buffer)");
    pool->p[pool->n++] = *out;
    return QV_OK;
}

static void ab_free(ab_pool *pool)
{
    for (int i = 0; i < pool->n; i++) cudaFree(pool->p[i]);
    pool->n = 0;
}

/* Scale elements of one operand with `rows` rows (weights: w != 0). */
static int64_t lt_scale_count(qv_bench_lt_scale scale, int w, int64_t rows, int k)
{
    const int64_t kb = (k + LT_KB - 1) / LT_KB;
    switch (scale) {
    case QV_BENCH_LT_OUTER: return rows;
    case QV_BENCH_LT_VEC128: return kb * rows;
    case QV_BENCH_LT_BLK: return w ? (rows + LT_KB - 1) / LT_KB * ((kb + 3) / 4 * 4) : kb * rows;
    default: return 1;
    }
}

/* Both baselines' one implementation: fp8 != 0 with `scale`, or int8. */
static qv_status lt_layer(int fp8, qv_bench_lt_scale scale, int n, int k, const int *ms, int n_m, int warmup,
                          int runs, const qv_launch_opts *opts, qv_bench_timing *t, int *ok)
{
    lt_ctx c;
    memset(&c, 0, sizeof c);
    c.fp8 = fp8;
    c.scale = scale;
    c.trace = opts ? opts->trace : 0;
    for (int i = 0; i < n_m; i++) ok[i] = 0;
    int m_max = 1;
    for (int i = 0; i < n_m; i++) m_max = ms[i] > m_max ? ms[i] : m_max;
    const size_t wb = (size_t)n * (size_t)k; /* one byte per code */
    const int64_t nsw = lt_scale_count(scale, 1, n, k), nsa = lt_scale_count(scale, 0, m_max, k);
    c.copies = (int)((LT_L2_TWICE + wb - 1) / wb);
    if (c.copies > LT_MAX_COPIES) c.copies = LT_MAX_COPIES;
    const qv_fmt code = fp8 ? QV_FMT_E4M3 : QV_FMT_I8;
    ab_pool pool = {.n = 0};
    void *sa = NULL;
    qv_status st = QV_OK;
    for (int i = 0; i < c.copies && st == QV_OK; i++) {
        st = ab_alloc(&pool, wb, &c.w[i]);
        if (st == QV_OK) st = qv_bench_fill(c.w[i], (int64_t)wb, code, 300 + (uint64_t)i, 0, 0, 0, NULL);
        if (fp8 && st == QV_OK) st = ab_alloc(&pool, (size_t)nsw * sizeof(float), &c.sw[i]);
        if (fp8 && st == QV_OK) st = qv_bench_fill(c.sw[i], nsw, QV_FMT_F32, 400 + (uint64_t)i, 1.0f, 1.0f, 0, NULL);
    }
    void *a = NULL;
    if (st == QV_OK) st = ab_alloc(&pool, (size_t)m_max * (size_t)k, &a);
    if (st == QV_OK) st = qv_bench_fill(a, (int64_t)m_max * k, code, 299, 0, 0, 0, NULL);
    if (st == QV_OK) st = ab_alloc(&pool, (size_t)m_max * (size_t)n * 4, &c.c); /* int32 or f16 */
    if (st == QV_OK) st = ab_alloc(&pool, LT_WORKSPACE, &c.ws);
    if (fp8 && st == QV_OK) st = ab_alloc(&pool, (size_t)nsa * sizeof(float), &sa);
    if (fp8 && st == QV_OK) st = qv_bench_fill(sa, nsa, QV_FMT_F32, 298, 1.0f, 1.0f, 0, NULL);
    if (st == QV_OK && cudaDeviceSynchronize() != cudaSuccess)
        st = qv_cuda_fail((int)cudaGetLastError(), "cuBLASLt baseline buffer fills", __FILE__, __LINE__);
    if (st == QV_OK && cublasLtCreate(&c.lt) != CUBLAS_STATUS_SUCCESS)
        st = qv_fail(QV_ERR_CUDA, "cublasLtCreate failed");
    c.a = a;
    c.sa = sa;
    for (int i = 0; i < n_m && st == QV_OK; i++) {
        qv_status ps = lt_setup(&c, ms[i], n, k);
        if (ps == QV_OK) ps = qv_bench_time(lt_launch, &c, warmup, runs, NULL, &t[i]);
        if (ps == QV_OK)
            ok[i] = 1;
        else
            fprintf(stderr, "qvet bench: cublaslt-%s m=%d n=%d k=%d: %s\n", fp8 ? lt_scale_names[scale] : "int8",
                    ms[i], n, k, qv_errmsg());
        lt_teardown(&c);
    }
    if (c.lt) cublasLtDestroy(c.lt);
    ab_free(&pool);
    return st;
}

qv_status qv_bench_lt_layer(int fp8, int n, int k, const int *ms, int n_m, int warmup, int runs,
                            const qv_launch_opts *opts, qv_bench_timing *t, int *ok)
{
    return lt_layer(fp8, QV_BENCH_LT_TENSOR, n, k, ms, n_m, warmup, runs, opts, t, ok);
}

qv_status qv_bench_lt_fp8_layer(qv_bench_lt_scale scale, int n, int k, const int *ms, int n_m, int warmup, int runs,
                                const qv_launch_opts *opts, qv_bench_timing *t, int *ok)
{
    QV_ASSERT(scale >= QV_BENCH_LT_TENSOR && scale <= QV_BENCH_LT_BLK, "unknown cuBLASLt fp8 scaling mode");
    return lt_layer(1, scale, n, k, ms, n_m, warmup, runs, opts, t, ok);
}

typedef struct actq_ctx {
    qv_fmt qfmt;
    int rows, cols;
    const void *x; /* (rows, cols) f16 */
    void *q;       /* (rows, cols) codes */
    float *s;      /* (rows) scales */
    const qv_launch_opts *opts;
} actq_ctx;

static qv_status actq_launch(void *vctx, int iter, void *stream)
{
    actq_ctx *c = vctx;
    return qv_act_quant(QV_FMT_F16, c->qfmt, c->rows, c->cols, c->x, c->q, c->s, stream, c->opts);
}

#define AQB_BATCH 20      /* launches per queued batch */
#define AQB_WAIT_US 500.0 /* the wait in front of a batch (qv_bench_wait): longer than the
                           * host takes to submit AQB_BATCH launches, no power drawn */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median GPU time per launch of batches queued behind a sleeping wait of
 * AQB_WAIT_US (qv_bench_wait: as queue mode, without heating the GPU as a
 * memset would); us_buf: `runs` doubles of scratch. */
static qv_status time_queued(actq_ctx *c, int runs, double *us_buf, double *median)
{
    cudaEvent_t e0 = NULL, e1 = NULL;
    QV_CUDA_TRY(cudaEventCreate(&e0), "cudaEventCreate");
    cudaError_t rc = cudaEventCreate(&e1);
    qv_status st = rc == cudaSuccess ? QV_OK : qv_cuda_fail((int)rc, "cudaEventCreate", __FILE__, __LINE__);
    for (int r = 0; r < runs && st == QV_OK; r++) {
        st = qv_bench_wait(AQB_WAIT_US, NULL);
        if (st != QV_OK) break;
        rc = cudaEventRecord(e0, NULL);
        for (int b = 0; b < AQB_BATCH && rc == cudaSuccess && st == QV_OK; b++) st = actq_launch(c, b, NULL);
        if (rc == cudaSuccess && st == QV_OK) rc = cudaEventRecord(e1, NULL);
        if (rc == cudaSuccess && st == QV_OK) rc = cudaEventSynchronize(e1);
        float ms = 0;
        if (rc == cudaSuccess && st == QV_OK) rc = cudaEventElapsedTime(&ms, e0, e1);
        if (rc != cudaSuccess && st == QV_OK) st = qv_cuda_fail((int)rc, "queued act-quant batch", __FILE__, __LINE__);
        us_buf[r] = 1000.0 * ms / AQB_BATCH;
    }
    if (st == QV_OK) {
        qsort(us_buf, (size_t)runs, sizeof us_buf[0], cmp_double);
        *median = us_buf[runs / 2];
    }
    cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return st;
}

qv_status qv_bench_act_quant(qv_fmt qfmt, const int *rows_list, int n, int cols, int warmup, int runs,
                             const qv_launch_opts *opts, qv_bench_timing *t, double *queued_us)
{
    int r_max = 1;
    for (int i = 0; i < n; i++) r_max = rows_list[i] > r_max ? rows_list[i] : r_max;
    const size_t count = (size_t)r_max * (size_t)cols;
    ab_pool pool = {.n = 0};
    actq_ctx c = {qfmt, 0, cols, NULL, NULL, NULL, opts};
    void *x = NULL, *q = NULL, *s = NULL;
    double *us_buf = malloc(sizeof(double) * (size_t)runs);
    qv_status st = us_buf ? QV_OK : qv_fail(QV_ERR_NOMEM, "benchmark: %d timings", runs);
    if (st == QV_OK) st = ab_alloc(&pool, count * 2, &x);
    if (st == QV_OK) st = ab_alloc(&pool, count, &q);
    if (st == QV_OK) st = ab_alloc(&pool, (size_t)r_max * sizeof(float), &s);
    /* Activation magnitudes of a hidden state, up to 4 (any nonzero values do). */
    if (st == QV_OK) st = qv_bench_fill(x, (int64_t)count, QV_FMT_F16, 297, 0.01f, 4.0f, 1, NULL);
    c.x = x, c.q = q, c.s = s;
    for (int i = 0; i < n && st == QV_OK; i++) {
        c.rows = rows_list[i];
        st = qv_bench_time(actq_launch, &c, warmup, runs, NULL, &t[i]);
        if (st == QV_OK) st = time_queued(&c, runs, us_buf, &queued_us[i]);
    }
    free(us_buf);
    ab_free(&pool);
    return st;
}
