/* lt_cache.cu: the cuBLASLt operation, algorithm cache and call shared by the
 * two cuBLASLt paths of the activation-quantized rows (lt_cache.cuh). */
#include <stdio.h>
#include <stdlib.h>

#include "lt_cache.cuh"
#include "internal/aq.h"
#include "internal/gpu.h"

#define LT_TRY(c, call, what)                                                  \
    do {                                                                       \
        cublasStatus_t s_ = (call);                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) return lt_fail((c), s_, (what));      \
    } while (0)

qv_status lt_fail(const lt_cache *c, cublasStatus_t s, const char *what)
{
    return qv_fail(QV_ERR_CUDA, "%s %s: %s (status %d)", c->label, what, cublasLtGetStatusString(s), (int)s);
}

qv_status lt_desc_create(lt_cache *c, cublasComputeType_t compute, cudaDataType_t scale,
                         cublasLtMatmulDesc_t *out)
{
    if (!c->handle) {
        int dev = 0;
        QV_CUDA_TRY(cudaGetDevice(&dev), "cudaGetDevice");
        LT_TRY(c, cublasLtCreate(&c->handle), "cublasLtCreate");
        c->dev1 = dev + 1;
    }
    cublasLtMatmulDesc_t d = NULL;
    LT_TRY(c, cublasLtMatmulDescCreate(&d, compute, scale), "matmul descriptor");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasStatus_t s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulDescDestroy(d);
        return lt_fail(c, s, "matmul descriptor transposes");
    }
    *out = d;
    return QV_OK;
}

static bool key_eq(const lt_key &a, const lt_key &b)
{
    return a.op == b.op && a.m == b.m && a.n == b.n && a.k == b.k && a.aw == b.aw && a.aa == b.aa && a.ad == b.ad;
}

static void entry_clear(lt_entry *e)
{
    if (e->lw) cublasLtMatrixLayoutDestroy(e->lw);
    if (e->la) cublasLtMatrixLayoutDestroy(e->la);
    if (e->ld) cublasLtMatrixLayoutDestroy(e->ld);
    e->lw = e->la = e->ld = NULL;
}

qv_status lt_lookup(lt_cache *c, cublasLtMatmulDesc_t desc, const lt_key &key, unsigned trace, lt_entry **out)
{
    int dev = 0;
    QV_CUDA_TRY(cudaGetDevice(&dev), "cudaGetDevice");
    if (dev + 1 != c->dev1) {
        static lt_entry declined; /* found == false, never filled */
        *out = &declined;
        return QV_OK;
    }
    for (int i = 0; i < c->count; i++)
        if (key_eq(c->entry[i].key, key)) {
            *out = &c->entry[i];
            return QV_OK;
        }
    lt_entry *e;
    if (c->count < LT_CACHE) {
        e = &c->entry[c->count++];
    } else {
        e = &c->entry[c->evict];
        c->evict = (c->evict + 1) % LT_CACHE;
        entry_clear(e);
    }
    e->key = key;
    e->found = false;
    e->lw = e->la = e->ld = NULL;
    /* A stale entry would be looked up again; it is marked unusable until filled. */
    e->key.m = -1;
    LT_TRY(c, cublasLtMatrixLayoutCreate(&e->lw, c->tw, key.k, key.n, key.k), "layout of W");
    LT_TRY(c, cublasLtMatrixLayoutCreate(&e->la, c->ta, key.k, key.m, key.k), "layout of A");
    LT_TRY(c, cublasLtMatrixLayoutCreate(&e->ld, c->td, key.n, key.m, key.n), "layout of D");
    cublasLtMatmulPreference_t pref = NULL;
    LT_TRY(c, cublasLtMatmulPreferenceCreate(&pref), "preference");
    const size_t wsb = LT_WS_BYTES;
    const uint32_t schemes = c->schemes, aw = key.aw, aa = key.aa, ad = key.ad;
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
        return lt_fail(c, s, "preference attributes");
    }
    cublasLtMatmulHeuristicResult_t h;
    int count = 0;
    s = cublasLtMatmulAlgoGetHeuristic(c->handle, desc, e->lw, e->la, e->ld, e->ld, pref, 1, &h, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    /* Any failure or no result means cuBLASLt does not take this shape: the
     * mma kernel does, with arithmetic inside the row's declaration. */
    e->found = s == CUBLAS_STATUS_SUCCESS && count > 0 && h.state == CUBLAS_STATUS_SUCCESS;
    if (e->found) e->algo = h.algo;
    if (trace & QV_TRACE_LT) {
        char label[96];
        snprintf(label, sizeof label, "%s op %d (align %u/%u/%u)", c->label, key.op, key.aw, key.aa, key.ad);
        qv_lt_trace_algo(label, key.m, key.n, key.k, e->found ? &h.algo : NULL, e->found ? h.workspaceSize : 0,
                         e->found ? h.wavesCount : 0.0f);
    }
    e->key = key;
    *out = e;
    return QV_OK;
}

extern "C" void qv_lt_trace_algo(const char *label, int m, int n, int k, const void *algo, size_t ws_bytes,
                                 float waves)
{
    if (!algo) {
        fprintf(stderr, "cuBLASLt algo: %s m=%d n=%d k=%d: none\n", label, m, n, k);
        return;
    }
    const cublasLtMatmulAlgo_t *a = static_cast<const cublasLtMatmulAlgo_t *>(algo);
    static const struct {
        cublasLtMatmulAlgoConfigAttributes_t attr;
        const char *name;
    } fields[] = {{CUBLASLT_ALGO_CONFIG_ID, "id"},
                  {CUBLASLT_ALGO_CONFIG_TILE_ID, "tile"},
                  {CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages"},
                  {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "splitk"},
                  {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "reduction"},
                  {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "swizzle"},
                  {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, "custom"},
                  {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, "cluster"},
                  {CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, "inner"}};
    fprintf(stderr, "cuBLASLt algo: %s m=%d n=%d k=%d:", label, m, n, k);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        /* 32-bit fields, or the 16-bit shape ids: the size must match. */
        uint32_t v32 = 0;
        uint16_t v16 = 0;
        size_t got = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(a, fields[i].attr, &v32, sizeof v32, &got) == CUBLAS_STATUS_SUCCESS)
            fprintf(stderr, " %s=%u", fields[i].name, (unsigned)v32);
        else if (cublasLtMatmulAlgoConfigGetAttribute(a, fields[i].attr, &v16, sizeof v16, &got) ==
                 CUBLAS_STATUS_SUCCESS)
            fprintf(stderr, " %s=%u", fields[i].name, (unsigned)v16);
    }
    fprintf(stderr, " workspace=%zu waves=%.2f\n", ws_bytes, (double)waves);
}

qv_status lt_matmul(lt_cache *c, cublasLtMatmulDesc_t desc, lt_entry *e, const void *alpha, const void *w,
                    const void *a, const void *beta, void *d, void *ws, cudaStream_t st, bool *ran)
{
    const cublasStatus_t s =
        cublasLtMatmul(c->handle, desc, alpha, w, e->lw, a, e->la, beta, d, e->ld, d, e->ld, &e->algo, ws,
                       LT_WS_BYTES, st);
    /* A refused call is cuBLASLt's status; a launch failure is CUDA's. */
    *ran = s == CUBLAS_STATUS_SUCCESS;
    if (!*ran) e->found = false;
    const cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "%s matmul launch", c->label);
        return qv_cuda_fail((int)ce, what, __FILE__, __LINE__);
    }
    return QV_OK;
}

uint8_t *lt_region(const qv_gemm_args *a, size_t ws_offset, size_t total)
{
    if (!a->workspace || a->workspace_bytes < ws_offset + total) return NULL;
    return (uint8_t *)(((uintptr_t)a->workspace + ws_offset + 255) & ~(uintptr_t)255);
}
