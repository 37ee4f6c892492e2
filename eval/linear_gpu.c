/* linear_gpu.c: the GPU backend (eval.h): every linear layer of the model runs
 * the variant's kernel through the GPU runner API (gpu.h). Weights are
 * quantized RTN on the host exactly as for the CPU backend, packed (qv_pack)
 * and uploaded once per layer; each call quantizes the activations on the host
 * (the same codes the CPU model sees), copies them to the device, poisons the
 * output, launches, checks the launch, and reads the output back. Makes no CUDA
 * call unless a device is present. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/eval.h"
#include "qvet/formats.h"
#include "qvet/gpu.h"
#include "qvet/layout.h"

#include "eval_internal.h"

typedef struct gpu_lin {
    qv_problem w;           /* weights quantized, m = 1 */
    qv_gpu_problem gp;      /* device copies, sized for gp_m activation rows */
    int gp_m;               /* 0: not uploaded yet */
    int n, k;               /* the layer's real n_out, n_in */
} gpu_lin;

typedef struct gpu_ctx {
    const qv_variant *v;
    int n_layers;
    gpu_lin *lin;           /* (n_layers * QV_LIN_COUNT) */
} gpu_ctx;

void ev_gpu_free_ctx(void *vctx)
{
    gpu_ctx *c = vctx;
    if (!c) return;
    if (c->lin)
        for (int i = 0; i < c->n_layers * QV_LIN_COUNT; i++) {
            if (c->lin[i].gp_m) qv_gpu_problem_free(&c->lin[i].gp);
            qv_problem_destroy(&c->lin[i].w);
        }
    free(c->lin);
    free(c);
}

static float out_value(qv_fmt f, const void *buf, int64_t i)
{
    switch (f) {
    case QV_FMT_F16: return qv_f16_to_f32(((const uint16_t *)buf)[i]);
    case QV_FMT_BF16: return qv_bf16_to_f32(((const uint16_t *)buf)[i]);
    default: return ((const float *)buf)[i];
    }
}

/* (Re)uploads the layer for t activation rows. pp: the per-call problem. */
static qv_status upload_layer(gpu_lin *L, const qv_problem *pp, int t)
{
    if (L->gp_m) qv_gpu_problem_free(&L->gp);
    L->gp_m = 0;
    qv_packed pk;
    memset(&pk, 0, sizeof pk);
    QV_TRY(qv_pack(pp, &pk));
    qv_status st = qv_gpu_problem_upload(pp, &pk, &L->gp);
    qv_packed_destroy(&pk);
    if (st == QV_OK) L->gp_m = t;
    return st;
}

/* Checks a CUDA call inside gpu_call: records the error and leaves through `done`. */
#define GPU_TRY(call, what)                                                    \
    do {                                                                       \
        int rc_ = (int)(call);                                                 \
        if (rc_ != 0) { st = qv_cuda_fail(rc_, (what), __FILE__, __LINE__); goto done; } \
    } while (0)

static qv_status gpu_call(gpu_ctx *c, gpu_lin *L, const float *x, int t, float *y)
{
    const qv_variant *v = c->v;
    qv_problem pp = L->w, tmp;
    pp.m = t;
    QV_TRY(qv_problem_create(&tmp, v, t, L->w.n, L->w.k));
    pp.a = tmp.a; pp.a_scale = tmp.a_scale; pp.azp = tmp.azp;
    void *out = NULL;
    qv_status st = qv_quantize_acts(&pp, x, t, L->k);
    if (st == QV_OK && L->gp_m != t) st = upload_layer(L, &pp, t);
    if (st != QV_OK) goto done;
    qv_gemm_args *a = &L->gp.args;
    size_t a_bytes = (size_t)t * (size_t)pp.k * qv_fmt_storage_bytes(v->afmt);
    GPU_TRY(cudaMemcpy((void *)a->a, pp.a, a_bytes, cudaMemcpyHostToDevice), "upload activations");
    if (pp.a_scale)
        GPU_TRY(cudaMemcpy((void *)a->a_scale, pp.a_scale, sizeof(float) * (size_t)qv_problem_ascale_count(&pp),
                               cudaMemcpyHostToDevice), "upload activation scales");
    if (pp.azp)
        GPU_TRY(cudaMemcpy((void *)a->azp, pp.azp, sizeof(int32_t) * (size_t)(v->azp == QV_AZP_TOKEN ? t : 1),
                               cudaMemcpyHostToDevice), "upload activation zero points");
    if ((st = qv_gpu_poison(a->c, v->ofmt, (int64_t)t * pp.n, a->stream)) != QV_OK) goto done;
    if ((st = v->launch(v, a)) != QV_OK) goto done;
    GPU_TRY(cudaGetLastError(), "kernel launch");
    GPU_TRY(cudaDeviceSynchronize(), "kernel execution");
    size_t out_bytes = (size_t)t * (size_t)pp.n * qv_fmt_storage_bytes(v->ofmt);
    out = malloc(out_bytes);
    if (!out) { st = qv_fail(QV_ERR_NOMEM, "no memory for a layer output"); goto done; }
    GPU_TRY(cudaMemcpy(out, a->c, out_bytes, cudaMemcpyDeviceToHost), "download output");
    for (int i = 0; i < t; i++)
        for (int j = 0; j < L->n; j++) y[(size_t)i * L->n + j] = out_value(v->ofmt, out, (int64_t)i * pp.n + j);
done:
    free(out);
    free(tmp.a); free(tmp.a_scale); free(tmp.azp);
    return st;
}

static qv_status gpu_run(void *vctx, const qv_llama *m, int layer, qv_llama_lin which, const float *x, int t, float *y)
{
    gpu_ctx *c = vctx;
    (void)m;
    return gpu_call(c, &c->lin[layer * QV_LIN_COUNT + which], x, t, y);
}

qv_status qv_linear_variant_gpu(const qv_variant *v, const qv_llama *m, qv_linear_backend *out)
{
    memset(out, 0, sizeof *out);
    qv_gpu_info info;
    if (!qv_gpu_info_get(&info)) return qv_fail(QV_ERR_NODEVICE, "no CUDA device: the GPU path needs one (use --cpu)");
    if (!v->launch) return qv_fail(QV_ERR_UNSUPPORTED, "%s has no GPU kernel", v->name);
    gpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return qv_fail(QV_ERR_NOMEM, "no memory");
    c->v = v;
    c->n_layers = m->c.n_layers;
    c->lin = calloc((size_t)c->n_layers * QV_LIN_COUNT, sizeof *c->lin);
    if (!c->lin) { ev_gpu_free_ctx(c); return qv_fail(QV_ERR_NOMEM, "no memory"); }
    for (int l = 0; l < c->n_layers; l++)
        for (int w = 0; w < QV_LIN_COUNT; w++) {
            gpu_lin *L = &c->lin[l * QV_LIN_COUNT + w];
            qv_llama_lin_shape(&m->c, (qv_llama_lin)w, &L->k, &L->n);
            qv_status st = qv_quantize_weights(v, m->layers[l].w[w], L->n, L->k, 1, &L->w);
            if (st != QV_OK) {
                char what[160];
                snprintf(what, sizeof what, "%s: layer %d", v->name, l);
                ev_gpu_free_ctx(c);
                return ev_prefix(st, what);
            }
        }
    out->run = gpu_run;
    out->ctx = c;
    out->name = "gpu";
    return QV_OK;
}
