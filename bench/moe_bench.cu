/* moe_bench.cu: `qvet bench --variant 'moe-*'`: the routed rows' grouped
 * launch (kernels/moe_grouped.cu: routing, token sort, one grouped W4A16,
 * FP4 or fp8 GEMM, combine) against cuBLAS fp16 on the same experts in the
 * same run.
 *
 * Per routed row with a GPU kernel, at its model's expert GEMM (the row's n,
 * k, experts, top-k) and each token count T:
 *   - "grouped": qv_moe_launch, the whole routed layer from the logits to
 *     the (T, n) output (W4A16, MXFP4/NVFP4 or fp8 block-128 experts);
 *   - "cuBLAS loop": one cuBLAS fp16 GEMM per expert that receives tokens,
 *     on the token counts our routing gave (read back once), launched back
 *     to back: the GEMMs alone, no routing, gather or combine, which only
 *     favours the baseline; timed side by side with "grouped" (bench.h,
 *     qv_bench_time_pair);
 *   - "cuBLAS grouped": the same GEMMs as one cublasGemmGroupedBatchedEx
 *     (cuBLAS 12.5 and later), "n/a" where cuBLAS refuses it.
 * Buffers are filled with random codes on the device (the kernels' speed
 * does not depend on the values; correctness is t_gpu_moe's and `qvet check
 * --gpu`'s). The experts' weights are read once per launch, and every row's
 * total (hundreds of MB) is past the 60 MB L2. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/bench.h"
#include "internal/gpu.h"
#include "internal/gpu_moe.h"
#include "moe_bench.h"
#include "qvet/formats.h"
#include "qvet/gemm.h"
#include "qvet/moe.h"
#include "qvet/variant.h"

namespace {

const int kDefaultTokens[] = {1, 8, 64, 512, 4096};
constexpr double kWaitUs = 500.0; /* queue mode, as cmd_bench.c */
constexpr int kBatch = 10;
constexpr int kWarmup = 5;

int row_selected(const qv_moe_row *r, const char *const *globs, int n)
{
    if (!r->gpu_kernel) return 0;
    for (int i = 0; i < n; i++)
        if (fnmatch(globs[i], r->name, 0) == 0) return 1;
    return 0;
}

/* The device buffers of one row at one T. */
struct moe_setup {
    qv_moe_dev d;
    qv_moe_ws ws;
    void *allocs[20];
    int n_allocs;
    /* the cuBLAS baselines */
    const qv_variant *ref;     /* cublas-f16 or cublas-bf16 */
    int active, *m_of;         /* experts with tokens, their token counts */
    uint16_t *w16, *a16, *c16; /* (nx, n, k) weights, (pairs, k) gathered activations, (pairs, n) products,
                                  in the row's output format (f16 or bf16) */
    const void **dW, **dX;     /* device pointer arrays of the grouped call: weights, activations */
    void **dY;                 /* and products */
    cublasHandle_t h;
};

qv_status dalloc(moe_setup *s, size_t bytes, void **p)
{
    QV_CUDA_TRY(cudaMalloc(p, bytes ? bytes : 1), "cudaMalloc");
    s->allocs[s->n_allocs++] = *p;
    return QV_OK;
}

void setup_free(moe_setup *s)
{
    for (int i = 0; i < s->n_allocs; i++) cudaFree(s->allocs[i]);
    free(s->m_of);
    s->n_allocs = 0;
    s->m_of = NULL;
}

qv_status launch_grouped(void *ctx, int iter, void *stream)
{
    (void)iter;
    return qv_moe_launch(&static_cast<moe_setup *>(ctx)->d, stream);
}

/* Expert x's GEMM of the loop: Y (m_x, n) = A (m_x, k) W_x (k, n), the
 * cublas-f16 row's layout (W stored (n, k)). */
qv_status launch_loop(void *ctx, int iter, void *stream)
{
    (void)iter;
    moe_setup *s = static_cast<moe_setup *>(ctx);
    const qv_moe_dev &d = s->d;
    int64_t row = 0;
    for (int x = 0; x < d.e_local + d.shared; x++) {
        const int m = s->m_of[x];
        if (!m) continue;
        qv_gemm_args a;
        memset(&a, 0, sizeof a);
        a.m = m, a.n = d.n, a.k = d.k;
        a.a = s->a16 + row * d.k;
        a.b = s->w16 + (int64_t)x * d.n * d.k;
        a.c = s->c16 + row * d.n;
        a.stream = stream;
        QV_TRY(qv_gpu_launch(s->ref, &a));
        row += m;
    }
    return QV_OK;
}

qv_status launch_cublas_grouped(void *ctx, int iter, void *stream)
{
    (void)iter;
    moe_setup *s = static_cast<moe_setup *>(ctx);
    const qv_moe_dev &d = s->d;
    const int g = s->active;
    cublasOperation_t ta[1024], tb[1024];
    int mm[1024], nn[1024], kk[1024], lda[1024], ldb[1024], ldc[1024], size[1024];
    float alpha[1024], beta[1024];
    int i = 0;
    for (int x = 0; x < d.e_local + d.shared; x++) {
        if (!s->m_of[x]) continue;
        /* Column-major view (kernels/cublas.cu): Y^T (n x m) = W (n x k, ld k)^T-view x A^T (k x m). */
        ta[i] = CUBLAS_OP_T, tb[i] = CUBLAS_OP_N;
        mm[i] = d.n, nn[i] = s->m_of[x], kk[i] = d.k;
        lda[i] = d.k, ldb[i] = d.k, ldc[i] = d.n;
        alpha[i] = 1.0f, beta[i] = 0.0f, size[i] = 1;
        i++;
    }
    cublasStatus_t st = cublasSetStream(s->h, (cudaStream_t)stream);
    if (st == CUBLAS_STATUS_SUCCESS) {
        const cudaDataType_t t = d.out_bf16 ? CUDA_R_16BF : CUDA_R_16F;
        st = cublasGemmGroupedBatchedEx(s->h, ta, tb, mm, nn, kk, alpha, s->dW, t, lda, s->dX, t, ldb, beta, s->dY, t,
                                        ldc, g, size, CUBLAS_COMPUTE_32F);
    }
    if (st != CUBLAS_STATUS_SUCCESS) return qv_fail(QV_ERR_CUDA, "cublasGemmGroupedBatchedEx: status %d", (int)st);
    QV_CUDA_TRY(cudaGetLastError(), "cublasGemmGroupedBatchedEx launch");
    return QV_OK;
}

/* Buffers of row r at T tokens, one routed launch, and the baselines' token
 * counts from its sort. */
qv_status setup(const qv_moe_row *r, const qv_moe_spec *s, int T, uint64_t seed, const qv_launch_opts *launch,
                moe_setup *m)
{
    memset(m, 0, sizeof *m);
    const qv_variant *v = s->expert;
    qv_moe_dev &d = m->d;
    d.t = T, d.n = (int)r->n, d.k = (int)r->k, d.e = r->experts, d.e_local = r->experts, d.shared = r->shared;
    d.topk = s->topk, d.route = (int)s->route, d.rsf = s->rsf, d.logit_fmt = (int)s->logit_fmt;
    d.groups = s->groups, d.gtopk = s->gtopk, d.gscore = (int)s->gscore, d.gmask = (int)s->gmask, d.eps = s->eps;
    const bool fp8 = v->wfmt == QV_FMT_E4M3, fp4 = v->wfmt == QV_FMT_E2M1, nv = fp4 && v->sfmt == QV_FMT_UE4M3;
    d.kind = fp8 ? QV_MOE_FP8_B128 : !fp4 ? QV_MOE_W4A16 : nv ? QV_MOE_NVFP4 : QV_MOE_MXFP4;
    d.bf16 = v->afmt == QV_FMT_BF16;
    d.out_bf16 = v->ofmt == QV_FMT_BF16;
    d.act_order = v->act_order;
    d.bias_fmt = (int)v->bias_fmt;
    d.rw = (int)s->rw, d.sum = (int)s->sum, d.sgate = s->sgate && d.shared > 0;
    if (fp8) {
        d.scale_mode = 0;
    } else if (fp4) {
        d.scale_mode = 0, d.g_shift = nv ? 0 : 1;
    } else if (v->scale_layout == QV_SCALE_GROUP) {
        d.scale_mode = 0;
        for (int q = v->g / 16; q > 1; q >>= 1) d.g_shift++;
    } else if (v->arith.dequant == QV_DQ_MUL_RN) {
        d.scale_mode = 0, d.g_shift = 30, d.grp_single = 1;
    } else {
        d.scale_mode = v->scale_layout == QV_SCALE_CHANNEL ? 1 : 2;
    }
    QV_TRY(qv_moe_pick(&d, launch));
    qv_moe_ws_plan(&d, d.mb, &m->ws);
    const int nx = d.e_local + d.shared;
    /* the baselines' format: the row's output format */
    const qv_fmt af = d.out_bf16 ? QV_FMT_BF16 : QV_FMT_F16;
    const int64_t groups = v->scale_layout == QV_SCALE_GROUP ? d.k / v->g : 1;
    const int64_t kb = (d.k + 127) / 128, nb = (d.n + 127) / 128;
    void *p;
    QV_TRY(dalloc(m, sizeof(float) * (size_t)T * d.e, &p));
    d.logits = p;
    QV_TRY(qv_bench_fill(p, (int64_t)T * d.e, QV_FMT_F32, seed, 0.0f, 4.0f, 1, NULL));
    if (s->sbias) {
        /* a selection bias of up to 1/4 either way */
        QV_TRY(dalloc(m, sizeof(float) * (size_t)d.e, &p));
        d.score_bias = (const float *)p;
        QV_TRY(qv_bench_fill(p, d.e, QV_FMT_F32, seed + 1, 0.0f, 0.25f, 1, NULL));
    }
    QV_TRY(dalloc(m, sizeof(int32_t) * (size_t)d.e, &p));
    d.expert_map = (const int32_t *)p;
    int32_t *host = (int32_t *)malloc(sizeof(int32_t) * (size_t)(d.k > d.e ? d.k : d.e) * (size_t)nx);
    if (!host) return qv_fail(QV_ERR_NOMEM, "bench host buffer");
    for (int i = 0; i < d.e; i++) host[i] = i;
    cudaError_t ce = cudaMemcpy(p, host, sizeof(int32_t) * (size_t)d.e, cudaMemcpyHostToDevice);
    if (ce == cudaSuccess && d.act_order) {
        /* a valid permutation per expert: the identity (the gather's cost does not depend on it) */
        for (int x = 0; x < nx; x++)
            for (int j = 0; j < d.k; j++) host[(int64_t)x * d.k + j] = j;
        qv_status st = dalloc(m, sizeof(int32_t) * (size_t)d.k * nx, &p);
        if (st != QV_OK) {
            free(host);
            return st;
        }
        d.perm = (const int32_t *)p;
        ce = cudaMemcpy(p, host, sizeof(int32_t) * (size_t)d.k * nx, cudaMemcpyHostToDevice);
    }
    free(host);
    QV_CUDA_TRY(ce, "cudaMemcpy (expert map, perm)");
    if (fp8) {
        QV_TRY(dalloc(m, (size_t)T * d.k, &p));
        d.a = p;
        QV_TRY(qv_bench_fill(p, (int64_t)T * d.k, QV_FMT_E4M3, seed + 1, 0, 0, 0, NULL));
        QV_TRY(dalloc(m, sizeof(float) * (size_t)(kb * T), &p));
        d.a_scale = (const float *)p;
        QV_TRY(qv_bench_fill(p, kb * T, QV_FMT_F32, seed + 6, 1e-3f, 1e-2f, 0, NULL));
        QV_TRY(dalloc(m, (size_t)nx * d.n * d.k, &p));
        d.b = p;
        QV_TRY(qv_bench_fill(p, (int64_t)nx * d.n * d.k, QV_FMT_E4M3, seed + 2, 0, 0, 0, NULL));
        QV_TRY(dalloc(m, sizeof(float) * (size_t)(nx * kb * nb), &p));
        d.scales = p;
        QV_TRY(qv_bench_fill(p, nx * kb * nb, QV_FMT_F32, seed + 3, 1e-3f, 1e-2f, 0, NULL));
    } else {
        QV_TRY(dalloc(m, 2 * (size_t)T * d.k, &p));
        d.a = p;
        QV_TRY(qv_bench_fill(p, (int64_t)T * d.k, af, seed + 1, 0.5f, 1.0f, 1, NULL));
        if (d.sgate) {
            QV_TRY(dalloc(m, 2 * (size_t)d.shared * d.k, &p));
            d.shared_gate = p;
            QV_TRY(qv_bench_fill(p, (int64_t)d.shared * d.k, af, seed + 9, 0.5f, 1.0f, 1, NULL));
        }
        const int64_t b_words = (int64_t)nx * (d.k / 16) * 2 * d.n;
        QV_TRY(dalloc(m, 4 * (size_t)b_words, &p));
        d.b = p;
        QV_TRY(qv_bench_fill(p, b_words, QV_FMT_I32, seed + 2, 0, 0, 0, NULL));
        const int64_t n_sc = d.scale_mode == 2 ? nx : (int64_t)nx * groups * d.n;
        if (fp4) {
            /* scale bytes of one value (e8m0 127 = 1; NV 0xB0 = the S0E5M3
             * byte of 1 * 2^7), global scales 1 and a bias: the kernels' speed
             * does not depend on the values */
            QV_TRY(dalloc(m, (size_t)n_sc, &p));
            d.scales = p;
            QV_CUDA_TRY(cudaMemset(p, nv ? 0xB0 : 127, (size_t)n_sc), "cudaMemset (FP4 scales)");
            if (nv) {
                QV_TRY(dalloc(m, sizeof(float) * (size_t)nx, &p));
                d.gscale = (const float *)p;
                QV_TRY(qv_bench_fill(p, nx, QV_FMT_F32, seed + 7, 1.0f, 1.0f, 0, NULL));
            }
            if (v->bias_fmt != QV_FMT_NONE) {
                QV_TRY(dalloc(m, qv_fmt_storage_bytes(v->bias_fmt) * (size_t)nx * d.n, &p));
                d.bias = p;
                QV_TRY(qv_bench_fill(p, (int64_t)nx * d.n, v->bias_fmt, seed + 8, 1e-3f, 1e-2f, 1, NULL));
            }
        } else {
            QV_TRY(dalloc(m, (d.scale_mode == 2 ? 4 : 2) * (size_t)n_sc, &p));
            d.scales = p;
            QV_TRY(qv_bench_fill(p, n_sc, d.scale_mode == 2 ? QV_FMT_F32 : af, seed + 3, 1e-3f, 1e-2f, 0, NULL));
        }
    }
    QV_TRY(dalloc(m, 2 * (size_t)T * d.n, &p));
    d.out = p;
    QV_TRY(dalloc(m, m->ws.bytes, &p));
    d.workspace = p;
    QV_TRY(qv_moe_launch(&d, NULL));
    QV_CUDA_TRY(cudaDeviceSynchronize(), "routed launch");

    /* the baselines: each expert's token count from the sort */
    m->m_of = (int *)calloc((size_t)nx, sizeof(int));
    if (!m->m_of) return qv_fail(QV_ERR_NOMEM, "bench counts");
    QV_CUDA_TRY(cudaMemcpy(m->m_of, (char *)d.workspace + m->ws.counts, sizeof(int) * (size_t)nx,
                           cudaMemcpyDeviceToHost),
                "cudaMemcpy counts");
    int64_t pairs = 0;
    for (int x = 0; x < nx; x++) pairs += m->m_of[x], m->active += m->m_of[x] > 0;
    if (pairs > (int64_t)T * (d.topk + d.shared))
        return qv_fail(QV_ERR_CUDA, "the sort's counts hold %lld pairs, more than %d tokens make", (long long)pairs,
                       T);
    m->ref = qv_variant_find(d.out_bf16 ? "cublas-bf16" : "cublas-f16");
    if (!m->ref) return qv_fail(QV_ERR_USAGE, "the registry has no cuBLAS row to compare with");
    QV_TRY(dalloc(m, 2 * (size_t)nx * d.n * d.k, &p));
    m->w16 = (uint16_t *)p;
    QV_TRY(qv_bench_fill(p, (int64_t)nx * d.n * d.k, af, seed + 4, 1e-3f, 1e-2f, 1, NULL));
    QV_TRY(dalloc(m, 2 * (size_t)pairs * d.k, &p));
    m->a16 = (uint16_t *)p;
    QV_TRY(qv_bench_fill(p, pairs * d.k, af, seed + 5, 0.5f, 1.0f, 1, NULL));
    QV_TRY(dalloc(m, 2 * (size_t)pairs * d.n, &p));
    m->c16 = (uint16_t *)p;
    /* the grouped call's pointer arrays, in the order of the loop */
    const void *hW[1024], *hX[1024];
    void *hY[1024];
    if (m->active > 1024) return qv_fail(QV_ERR_UNSUPPORTED, "more than 1024 experts with tokens");
    int64_t row = 0;
    for (int x = 0, i = 0; x < nx; x++) {
        if (!m->m_of[x]) continue;
        hW[i] = m->w16 + (int64_t)x * d.n * d.k;
        hX[i] = m->a16 + row * d.k;
        hY[i] = m->c16 + row * d.n;
        row += m->m_of[x], i++;
    }
    QV_TRY(dalloc(m, sizeof(void *) * 1024, &p));
    m->dW = (const void **)p;
    QV_TRY(dalloc(m, sizeof(void *) * 1024, &p));
    m->dX = (const void **)p;
    QV_TRY(dalloc(m, sizeof(void *) * 1024, &p));
    m->dY = (void **)p;
    const size_t pb = sizeof(void *) * (size_t)m->active;
    QV_CUDA_TRY(cudaMemcpy((void *)m->dW, hW, pb, cudaMemcpyHostToDevice), "cudaMemcpy (weight pointers)");
    QV_CUDA_TRY(cudaMemcpy((void *)m->dX, hX, pb, cudaMemcpyHostToDevice), "cudaMemcpy (activation pointers)");
    QV_CUDA_TRY(cudaMemcpy((void *)m->dY, hY, pb, cudaMemcpyHostToDevice), "cudaMemcpy (product pointers)");
    return QV_OK;
}

} /* namespace */

extern "C" int qv_moe_bench_selected(const char *const *globs, int n)
{
    for (int i = 0; i < qv_moe_row_count(); i++)
        if (row_selected(qv_moe_row_get(i), globs, n)) return 1;
    return 0;
}

extern "C" void qv_moe_bench_plan(const char *const *globs, int n, const int *tokens, int n_tok, int runs)
{
    if (!tokens) tokens = kDefaultTokens, n_tok = (int)(sizeof kDefaultTokens / sizeof kDefaultTokens[0]);
    int rows = 0;
    for (int i = 0; i < qv_moe_row_count(); i++) {
        const qv_moe_row *r = qv_moe_row_get(i);
        if (!row_selected(r, globs, n)) continue;
        printf("%-26s routed layer (routing, sort, grouped GEMM, combine), experts of %lld x %lld\n", r->name,
               (long long)r->n, (long long)r->k);
        rows++;
    }
    printf("%d routed row(s) x %d token counts (", rows, n_tok);
    for (int t = 0; t < n_tok; t++) printf("%s%d", t ? "," : "", tokens[t]);
    printf("): %d timings of %d + %d launches, the routed layer side\n"
           "by side with a loop of cuBLAS expert GEMMs in its 16-bit format, then cuBLAS's grouped GEMM alone\n",
           3 * rows * n_tok, kWarmup, runs);
}

extern "C" int qv_moe_bench(const char *const *globs, int n, const int *tokens, int n_tok, int runs, int no_queue,
                            FILE *jf, const qv_launch_opts *launch)
{
    if (!tokens) tokens = kDefaultTokens, n_tok = (int)(sizeof kDefaultTokens / sizeof kDefaultTokens[0]);
    qv_gpu_info gi;
    if (!qv_gpu_info_get(&gi)) {
        fprintf(stderr, "qvet bench: no CUDA device\n");
        return 3;
    }
    cublasHandle_t h = NULL;
    cublasStatus_t cs = cublasCreate(&h);
    if (cs != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "qvet bench: cublasCreate: status %d\n", (int)cs);
        return 3;
    }
    qv_status st = no_queue ? QV_OK : qv_bench_queue(kWaitUs, kBatch);
    printf("device: %s; routed rows: the grouped launch (routing + sort + grouped GEMM + combine) against\n"
           "cuBLAS GEMMs of the same experts and token counts in the row's 16-bit format (GEMMs only), median\n"
           "of %d runs\n",
           gi.name, runs);
    printf("%-28s %6s %10s %11s %12s %7s %14s %7s\n", "row", "T", "block", "grouped us", "cuBLAS loop", "ratio",
           "cuBLAS grouped", "ratio");
    int rc = 0;
    for (int i = 0; i < qv_moe_row_count() && st == QV_OK; i++) {
        const qv_moe_row *r = qv_moe_row_get(i);
        if (!row_selected(r, globs, n)) continue;
        const qv_moe_spec *s;
        st = qv_moe_row_spec(r, &s);
        for (int ti = 0; ti < n_tok && st == QV_OK; ti++) {
            moe_setup m;
            st = setup(r, s, tokens[ti], 0x5EED0000ull + (uint64_t)(i * 64 + ti), launch, &m);
            m.h = h;
            qv_bench_timing tg, tl, tc;
            if (st == QV_OK)
                st = qv_bench_time_pair(launch_grouped, &m, launch_loop, &m, kWarmup, runs, NULL, &tg, &tl);
            int have_grouped = 0;
            if (st == QV_OK) {
                qv_status gs = qv_bench_time(launch_cublas_grouped, &m, kWarmup, runs, NULL, &tc);
                have_grouped = gs == QV_OK;
                if (!have_grouped) {
                    cudaGetLastError();
                    fprintf(stderr, "qvet bench: %s T=%d: cuBLAS grouped: %s\n", r->name, tokens[ti], qv_errmsg());
                }
            }
            if (st == QV_OK) {
                int kt_part;
                const int parts = qv_moe_parts(&m.d, &kt_part);
                char path[16];
                if (m.d.wg) snprintf(path, sizeof path, m.d.pairs ? "wg+pr" : "wgmma");
                else if (parts > 1) snprintf(path, sizeof path, "mma k%d", parts);
                else snprintf(path, sizeof path, "mma");
                printf("%-28s %6d %3d %-6s %11.1f %12.1f %6.2fx", r->name, tokens[ti], m.ws.block, path,
                       tg.median_us, tl.median_us, tl.median_us / tg.median_us);
                if (have_grouped)
                    printf(" %14.1f %6.2fx\n", tc.median_us, tc.median_us / tg.median_us);
                else
                    printf(" %14s %7s\n", "n/a", "");
                fflush(stdout);
                if (jf) {
                    fprintf(jf,
                            "{\"kind\":\"bench\",\"variant\":\"%s\",\"model\":null,\"layer\":\"experts\",\"m\":%d,"
                            "\"n\":%d,\"k\":%d,\"median_us\":%.3f,\"p10_us\":%.3f,\"p90_us\":%.3f,\"runs\":%d,"
                            "\"path\":\"%s\",\"block\":%d,\"parts\":%d,\"cublas_loop_us\":%.3f,"
                            "\"cublas_grouped_us\":",
                            r->name, tokens[ti], (int)r->n, (int)r->k, tg.median_us, tg.p10_us, tg.p90_us, tg.runs,
                            m.d.wg ? (m.d.pairs ? "wgmma-pairs" : "wgmma") : "mma", m.ws.block, parts,
                            tl.median_us);
                    if (have_grouped)
                        fprintf(jf, "%.3f}\n", tc.median_us);
                    else
                        fputs("null}\n", jf);
                }
            }
            setup_free(&m);
        }
    }
    if (st != QV_OK) {
        fprintf(stderr, "qvet bench: %s\n", qv_errmsg());
        rc = qv_status_exit_code(st);
    }
    cublasDestroy(h);
    if (jf) fflush(jf);
    return rc;
}
