/* aq_bench.c: speed of the activation-quantized family against its baselines
 * (DESIGN.md §8-§9), side by side in one run on the same shapes:
 *   - cuBLAS fp16 (cublasGemmEx, fp32 compute, like torch.matmul on a Linear);
 *   - cuBLASLt fp8 W8A8 (e4m3 x e4m3, per-tensor scales, fp16 out, the default
 *     promoted accumulation) and cuBLASLt int8 W8A8 (int8 x int8 -> int32);
 *   - our rows qqq-w4a8-ch, qqq-w4a8-g128, w8a8-i8-tok-ch, w8a8-fp8-tok-ch and
 *     w8a8-fp8-block128, each timed alone and with the per-token activation
 *     quantization (qv_act_quant, fp16 -> int8 / e4m3) that must precede it;
 *   - the device copy bandwidth, for the weight-read floor.
 * Every point is the median of 50 event-timed launches after 5 warm-ups
 * (bench.h), rotating copies of the weights so they exceed the 60 MB L2 twice.
 * The table sums the four linear layers of one block (qkv, o, gate_up, down) of
 * Llama-2-7B and Llama-3-70B, as DESIGN.md §8 does. Buffers hold random codes:
 * speed does not depend on the values, and correctness is t_gpu_aq's job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "qvet/aq.h"
#include "qvet/bench.h"
#include "qvet/gemm.h"
#include "qvet/gpu.h"
#include "qvet/variant.h"

#define AQB_WARMUP 5
#define AQB_RUNS 50
#define AQB_L2_BYTES ((size_t)60 << 20) /* H200 L2: weights rotate past twice this */
#define AQB_MAX_COPIES 16
#define AQB_LT_WORKSPACE ((size_t)32 << 20) /* cuBLASLt's recommended workspace on Hopper */

typedef struct aqb_layer {
    const char *name;
    int n, k;
} aqb_layer;

typedef struct aqb_model {
    const char *name;
    aqb_layer layers[4];
} aqb_model;

static const aqb_model aqb_models[] = {
    {"llama2-7b", {{"qkv", 12288, 4096}, {"o", 4096, 4096}, {"gate_up", 22016, 4096}, {"down", 4096, 11008}}},
    {"llama3-70b", {{"qkv", 10240, 8192}, {"o", 8192, 8192}, {"gate_up", 57344, 8192}, {"down", 8192, 28672}}},
};
static const int aqb_m[] = {1, 16, 64, 1024};

/* The columns of the table. */
enum {
    COL_F16 = 0, COL_LT_FP8, COL_LT_I8, COL_QQQ_CH, COL_QQQ_G, COL_I8, COL_FP8, COL_FP8_BLK, COL_ACT_I8,
    COL_ACT_FP8, N_COLS
};
static const char *const col_names[N_COLS] = {"cublas-f16", "lt-fp8", "lt-i8", "qqq-ch", "qqq-g128",
                                              "i8-tok-ch", "fp8-tok-ch", "fp8-blk128", "actq-i8", "actq-fp8"};
/* Registry rows behind the kernel columns. */
static const char *const col_rows[N_COLS] = {NULL, NULL, NULL, "qqq-w4a8-ch", "qqq-w4a8-g128", "w8a8-i8-tok-ch",
                                             "w8a8-fp8-tok-ch", "w8a8-fp8-block128", NULL, NULL};

/* One timed thing: a closure over device buffers with rotating weights. */
typedef struct aqb_ctx {
    int col;
    const qv_variant *v;
    qv_gemm_args args;          /* weights pointer replaced per launch */
    void *w[AQB_MAX_COPIES];    /* weight copies */
    void *s[AQB_MAX_COPIES];    /* weight scale copies (our rows) */
    int copies;
    int m, n, k;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    void *lt_ws;
    const float *fone;          /* device 1.0f (cuBLASLt fp8 scale pointers) */
    const void *x16;            /* (m, k) fp16 activations for act quant */
} aqb_ctx;

static qv_status aqb_launch(void *vctx, int iter, void *stream)
{
    aqb_ctx *c = vctx;
    const int i = iter % c->copies;
    cudaStream_t st = (cudaStream_t)stream;
    switch (c->col) {
    case COL_F16: {
        const float one = 1.0f, zero = 0.0f;
        /* Y (m, n) row-major = X (m, k) x W (n, k)^T: column-major W^T-op form. */
        cublasStatus_t s = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, c->n, c->m, c->k, &one, c->w[i],
                                        CUDA_R_16F, c->k, c->args.a, CUDA_R_16F, c->k, &zero, c->args.c,
                                        CUDA_R_16F, c->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        return s == CUBLAS_STATUS_SUCCESS ? QV_OK : qv_fail(QV_ERR_CUDA, "cublasGemmEx: status %d", (int)s);
    }
    case COL_LT_FP8: {
        const float one = 1.0f, zero = 0.0f;
        cublasStatus_t s = cublasLtMatmul(c->lt, c->op, &one, c->w[i], c->la, c->args.a, c->lb, &zero, c->args.c,
                                          c->lc, c->args.c, c->lc, &c->algo, c->lt_ws, AQB_LT_WORKSPACE, st);
        return s == CUBLAS_STATUS_SUCCESS ? QV_OK : qv_fail(QV_ERR_CUDA, "cublasLtMatmul fp8: status %d", (int)s);
    }
    case COL_LT_I8: {
        const int32_t one = 1, zero = 0;
        cublasStatus_t s = cublasLtMatmul(c->lt, c->op, &one, c->w[i], c->la, c->args.a, c->lb, &zero, c->args.c,
                                          c->lc, c->args.c, c->lc, &c->algo, c->lt_ws, AQB_LT_WORKSPACE, st);
        return s == CUBLAS_STATUS_SUCCESS ? QV_OK : qv_fail(QV_ERR_CUDA, "cublasLtMatmul int8: status %d", (int)s);
    }
    case COL_ACT_I8: return qv_act_quant(QV_FMT_F16, QV_FMT_I8, c->m, c->k, c->x16, (void *)c->args.a, (float *)c->args.a_scale, stream);
    case COL_ACT_FP8:
        return qv_act_quant(QV_FMT_F16, QV_FMT_E4M3, c->m, c->k, c->x16, (void *)c->args.a, (float *)c->args.a_scale, stream);
    default: {
        qv_gemm_args a = c->args;
        a.b = c->w[i];
        a.scales = c->s[i];
        a.stream = stream;
        return c->v->launch(c->v, &a);
    }
    }
}

/* Bytes of packed weights (codes only) of a column's format for an n x k layer. */
static size_t weight_bytes(int col, int n, int k)
{
    const size_t nk = (size_t)n * (size_t)k;
    switch (col) {
    case COL_F16: return 2 * nk;
    case COL_QQQ_CH:
    case COL_QQQ_G: return nk / 2;
    case COL_ACT_I8:
    case COL_ACT_FP8: return 0;
    default: return nk;
    }
}

#define LT_TRY(call, what)                                                     \
    do {                                                                       \
        cublasStatus_t s_ = (call);                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) return qv_fail(QV_ERR_CUDA, "%s: cuBLASLt status %d", (what), (int)s_); \
    } while (0)

/* cuBLASLt descriptors for D (m, n) = X (m, k) x W (n, k)^T in the TN form fp8
 * and int8 need: column-major A = W^T-op (k x n, ld k), B = X (k x m, ld k). */
static qv_status lt_setup(aqb_ctx *c, int fp8)
{
    const cudaDataType_t ab = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_8I, cd = fp8 ? CUDA_R_16F : CUDA_R_32I;
    const cublasComputeType_t ct = fp8 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32I;
    const cudaDataType_t scale_t = fp8 ? CUDA_R_32F : CUDA_R_32I;
    LT_TRY(cublasLtMatmulDescCreate(&c->op, ct, scale_t), "matmul desc");
    const cublasOperation_t tA = CUBLAS_OP_T, nB = CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA), "transa");
    LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSB, &nB, sizeof nB), "transb");
    if (fp8) {
        /* Per-tensor scales; fast accumulation stays off (the promoted default). */
        LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &c->fone, sizeof c->fone),
               "a scale");
        LT_TRY(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &c->fone, sizeof c->fone),
               "b scale");
    }
    LT_TRY(cublasLtMatrixLayoutCreate(&c->la, ab, c->k, c->n, c->k), "layout A");
    LT_TRY(cublasLtMatrixLayoutCreate(&c->lb, ab, c->k, c->m, c->k), "layout B");
    LT_TRY(cublasLtMatrixLayoutCreate(&c->lc, cd, c->n, c->m, c->n), "layout C");
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "preference");
    size_t wsb = AQB_LT_WORKSPACE;
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb),
           "workspace pref");
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(c->lt, c->op, c->la, c->lb, c->lc, c->lc, pref, 1, &h, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found < 1)
        return qv_fail(QV_ERR_UNSUPPORTED, "cuBLASLt has no %s algorithm for m=%d n=%d k=%d", fp8 ? "fp8" : "int8",
                       c->m, c->n, c->k);
    c->algo = h.algo;
    return QV_OK;
}

static void lt_teardown(aqb_ctx *c)
{
    if (c->la) cublasLtMatrixLayoutDestroy(c->la);
    if (c->lb) cublasLtMatrixLayoutDestroy(c->lb);
    if (c->lc) cublasLtMatrixLayoutDestroy(c->lc);
    if (c->op) cublasLtMatmulDescDestroy(c->op);
    c->la = c->lb = c->lc = NULL;
    c->op = NULL;
}

/* Shared device buffers sized for the largest layer and M. */
typedef struct aqb_bufs {
    void *a, *x16, *c, *as, *ws, *lt_ws, *fone, *scales2;
    size_t ws_bytes;
} aqb_bufs;

static qv_status alloc_fill(void **p, size_t bytes, qv_fmt fmt, uint64_t seed, float lo, float hi)
{
    QV_CUDA_TRY(cudaMalloc(p, bytes), "cudaMalloc (bench)");
    const size_t es = fmt == QV_FMT_F32 || fmt == QV_FMT_I32 ? 4 : fmt == QV_FMT_F16 ? 2 : 1;
    return qv_bench_fill(*p, (int64_t)(bytes / es), fmt, seed, lo, hi, 0, NULL);
}

/* Times one column on one layer at one M; *us = median. */
static qv_status time_point(int col, int m, const aqb_layer *L, const aqb_bufs *b, cublasHandle_t blas,
                            cublasLtHandle_t lt, double *us)
{
    aqb_ctx c;
    memset(&c, 0, sizeof c);
    c.col = col, c.m = m, c.n = L->n, c.k = L->k, c.blas = blas, c.lt = lt, c.lt_ws = b->lt_ws;
    c.fone = b->fone, c.x16 = b->x16;
    if (col_rows[col]) c.v = qv_variant_find(col_rows[col]);
    const size_t wb = weight_bytes(col, L->n, L->k);
    c.copies = wb ? (int)((2 * AQB_L2_BYTES + wb - 1) / wb) : 1;
    if (c.copies > AQB_MAX_COPIES) c.copies = AQB_MAX_COPIES;
    if (c.copies < 1) c.copies = 1;
    qv_status st = QV_OK;
    /* Scale layout of our rows: QQQ group (k/128, n) f16; block (k/128, n/128) f32; else (n) f32. */
    size_t sb = (size_t)L->n * 4;
    qv_fmt sf = QV_FMT_F32;
    float slo = 1e-3f, shi = 1e-2f;
    if (col == COL_QQQ_G) sb = (size_t)(L->k / 128) * L->n * 2, sf = QV_FMT_F16, slo = 0.5f, shi = 8.0f;
    if (col == COL_FP8_BLK) sb = (size_t)((L->k + 127) / 128) * ((L->n + 127) / 128) * 4;
    for (int i = 0; st == QV_OK && i < c.copies && wb; i++) {
        qv_fmt wf = col == COL_F16 ? QV_FMT_F16 : col == COL_LT_FP8 || col == COL_FP8 || col == COL_FP8_BLK ? QV_FMT_E4M3 : QV_FMT_I8;
        st = alloc_fill(&c.w[i], wb, wf, 100 + (uint64_t)i, -1.0f, 1.0f);
        if (st == QV_OK && c.v) st = alloc_fill(&c.s[i], sb, sf, 200 + (uint64_t)i, slo, shi);
    }
    c.args.m = m, c.args.n = L->n, c.args.k = L->k, c.args.g = c.v ? c.v->g : 0;
    c.args.a = col == COL_F16 ? b->x16 : b->a;
    c.args.a_scale = b->as;
    c.args.scales2 = b->scales2;
    c.args.c = b->c;
    c.args.workspace = b->ws;
    c.args.workspace_bytes = b->ws_bytes;
    if (st == QV_OK && (col == COL_LT_FP8 || col == COL_LT_I8)) st = lt_setup(&c, col == COL_LT_FP8);
    if (st == QV_OK && c.v && c.v->workspace && c.v->workspace(c.v, m, L->n, L->k) > b->ws_bytes)
        st = qv_fail(QV_ERR_NOMEM, "bench workspace too small");
    qv_bench_timing t;
    if (st == QV_OK) st = qv_bench_time(aqb_launch, &c, AQB_WARMUP, AQB_RUNS, NULL, &t);
    if (st == QV_OK) *us = t.median_us;
    lt_teardown(&c);
    for (int i = 0; i < c.copies; i++) {
        cudaFree(c.w[i]);
        cudaFree(c.s[i]);
    }
    return st;
}

int qv_aq_bench(void)
{
    qv_gpu_info gi;
    if (!qv_gpu_info_get(&gi)) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
    double bw = 0;
    qv_bench_timing ct;
    if (qv_bench_copy_bandwidth((size_t)1 << 30, 20, &bw, &ct) != QV_OK) {
        fprintf(stderr, "aq bench: %s\n", qv_errmsg());
        return 3;
    }
    printf("aq bench on %s (driver %d, runtime %d): copy bandwidth %.2f TB/s (read + write)\n", gi.name, gi.driver,
           gi.runtime, bw / 1e12);

    aqb_bufs b;
    memset(&b, 0, sizeof b);
    const int mmax = 1024, kmax = 28672, nmax = 57344;
    b.ws_bytes = (size_t)256 << 20; /* aq_gemm.cuh caps split-K partials at 256 MiB */
    qv_status st = alloc_fill(&b.a, (size_t)mmax * kmax, QV_FMT_I8, 1, -1, 1);
    if (st == QV_OK) st = alloc_fill(&b.x16, (size_t)mmax * kmax * 2, QV_FMT_F16, 2, 0.01f, 4.0f);
    if (st == QV_OK) st = alloc_fill(&b.as, (size_t)mmax * (kmax / 128) * 4, QV_FMT_F32, 3, 1e-3f, 1e-2f);
    if (st == QV_OK) st = alloc_fill(&b.scales2, (size_t)nmax * 4, QV_FMT_F32, 4, 1e-3f, 1e-2f);
    if (st == QV_OK) st = alloc_fill(&b.fone, 4, QV_FMT_F32, 5, 1.0f, 1.0f);
    if (st == QV_OK && cudaMalloc(&b.c, (size_t)mmax * nmax * 4) != cudaSuccess) st = qv_fail(QV_ERR_CUDA, "cudaMalloc out");
    if (st == QV_OK && cudaMalloc(&b.ws, b.ws_bytes) != cudaSuccess) st = qv_fail(QV_ERR_CUDA, "cudaMalloc ws");
    if (st == QV_OK && cudaMalloc(&b.lt_ws, AQB_LT_WORKSPACE) != cudaSuccess) st = qv_fail(QV_ERR_CUDA, "cudaMalloc lt ws");
    cublasHandle_t blas = NULL;
    cublasLtHandle_t lt = NULL;
    if (st == QV_OK && (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS))
        st = qv_fail(QV_ERR_CUDA, "cublasCreate / cublasLtCreate");
    if (st != QV_OK) {
        fprintf(stderr, "aq bench: %s\n", qv_errmsg());
        return 3;
    }

    /* tot[model][m][col]: µs summed over the block's four layers. */
    static double tot[2][4][N_COLS];
    int fails = 0;
    for (int mi = 0; mi < 2; mi++)
        for (int xi = 0; xi < 4; xi++)
            for (int col = 0; col < N_COLS; col++) {
                double sum = 0;
                for (int li = 0; li < 4; li++) {
                    double us = NAN;
                    qv_status s = time_point(col, aqb_m[xi], &aqb_models[mi].layers[li], &b, blas, lt, &us);
                    if (s != QV_OK) {
                        fprintf(stderr, "aq bench: %s %s m=%d %s: %s\n", aqb_models[mi].name,
                                aqb_models[mi].layers[li].name, aqb_m[xi], col_names[col], qv_errmsg());
                        fails++;
                    }
                    sum += us;
                }
                tot[mi][xi][col] = sum;
            }

    /* The table: block totals in µs; "+aq" adds the activation quantization. */
    printf("\nblock time, us (median of %d, weights rotated past L2); +aq = with activation quantization\n", AQB_RUNS);
    printf("%-11s %5s %8s %7s %7s | %7s %7s %7s %7s %7s | %6s %6s | %7s %7s %7s %7s\n", "model", "M", "f16",
           "lt-fp8", "lt-i8", "qqq-ch", "qqq-g", "i8", "fp8", "fp8blk", "aq-i8", "aq-f8", "ch+aq", "g+aq", "fp8+aq",
           "f16/fp8");
    for (int mi = 0; mi < 2; mi++)
        for (int xi = 0; xi < 4; xi++) {
            const double *t = tot[mi][xi];
            const double fp8aq = t[COL_FP8] + t[COL_ACT_FP8];
            printf("%-11s %5d %8.1f %7.1f %7.1f | %7.1f %7.1f %7.1f %7.1f %7.1f | %6.1f %6.1f | %7.1f %7.1f %7.1f "
                   "%7.2f\n",
                   aqb_models[mi].name, aqb_m[xi], t[COL_F16], t[COL_LT_FP8], t[COL_LT_I8], t[COL_QQQ_CH],
                   t[COL_QQQ_G], t[COL_I8], t[COL_FP8], t[COL_FP8_BLK], t[COL_ACT_I8], t[COL_ACT_FP8],
                   t[COL_QQQ_CH] + t[COL_ACT_I8], t[COL_QQQ_G] + t[COL_ACT_I8], fp8aq, t[COL_F16] / fp8aq);
        }
    printf("ratios at M=1024: cuBLAS f16 / ours (incl. act quant): ");
    for (int mi = 0; mi < 2; mi++) {
        const double *t = tot[mi][3];
        printf("%s qqq-ch %.2f qqq-g %.2f i8 %.2f fp8 %.2f; ", aqb_models[mi].name,
               t[COL_F16] / (t[COL_QQQ_CH] + t[COL_ACT_I8]), t[COL_F16] / (t[COL_QQQ_G] + t[COL_ACT_I8]),
               t[COL_F16] / (t[COL_I8] + t[COL_ACT_I8]), t[COL_F16] / (t[COL_FP8] + t[COL_ACT_FP8]));
    }
    printf("\n");
    cublasLtDestroy(lt);
    cublasDestroy(blas);
    cudaFree(b.a);
    cudaFree(b.x16);
    cudaFree(b.as);
    cudaFree(b.scales2);
    cudaFree(b.fone);
    cudaFree(b.c);
    cudaFree(b.ws);
    cudaFree(b.lt_ws);
    return fails ? 1 : 0;
}
