/* linear_gpu.c: the GPU backend (eval.h): every linear layer of the model runs
 * the variant's kernel through the GPU runner API (gpu.h). Weights are
 * quantized RTN on the host exactly as for the CPU backend (all layers at
 * once, on the thread pool), packed (qv_pack) and uploaded once per layer, at
 * qv_linear_backend_prepare or at the first call. Each call quantizes the
 * activations on the host (the same codes the CPU model sees; Q, K and V, and
 * gate and up, share one quantization of their common input), then on one
 * stream: copies them to the device, poisons the output from a device buffer
 * of poison codes, launches, checks the launch, copies the output back, and
 * waits once. Host staging buffers are pinned and allocated once per backend;
 * no call allocates device memory. Makes no CUDA call unless a device is
 * present. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/eval.h"
#include "internal/gpu.h"
#include "qvet/formats.h"
#include "qvet/layout.h"

#include "eval_internal.h"
#include "linear_common.h"

/* The device side of one linear layer. */
typedef struct gpu_lin {
    qv_gpu_problem gp;      /* device copies, sized for gp_m activation rows */
    int gp_m;               /* 0: not uploaded yet */
} gpu_lin;

typedef struct gpu_ctx {
    const qv_variant *v;
    qv_launch_opts opts;    /* every layer's launch options (their args point here) */
    ev_lins ls;             /* the quantized layers */
    gpu_lin *lin;           /* (n_layers * QV_LIN_COUNT), as ls.lin */
    /* Pinned host staging, sized for cap_m rows of the widest layer. */
    int cap_m;
    void *a_h;              /* (cap_m, ls.cap_k) activation codes of v->afmt */
    float *ascale_h;        /* (cap_m, ceil(ls.cap_k / 128)) activation scales */
    int32_t *azp_h;         /* (cap_m) activation zero points */
    void *out_h;            /* (cap_m, ls.cap_n) output codes of v->ofmt */
    void *poison_d;         /* device: (cap_m, ls.cap_n) poison codes of v->ofmt */
    ev_acts_stamp st;       /* what the staged activations hold */
    double acts_s, gemm_s;  /* wall time in activation quantization and in the GEMMs */
} gpu_ctx;

static void free_staging(gpu_ctx *c)
{
    if (c->a_h) cudaFreeHost(c->a_h);
    if (c->ascale_h) cudaFreeHost(c->ascale_h);
    if (c->azp_h) cudaFreeHost(c->azp_h);
    if (c->out_h) cudaFreeHost(c->out_h);
    if (c->poison_d) cudaFree(c->poison_d);
    c->a_h = c->ascale_h = NULL;
    c->azp_h = NULL;
    c->out_h = c->poison_d = NULL;
    c->cap_m = 0;
    c->st.x = NULL;
}

static void gpu_free_ctx(void *vctx)
{
    gpu_ctx *c = vctx;
    if (!c) return;
    if (c->lin)
        for (int i = 0; i < ev_lins_count(&c->ls); i++)
            if (c->lin[i].gp_m) qv_gpu_problem_free(&c->lin[i].gp);
    free_staging(c);
    free(c->lin);
    ev_lins_free(&c->ls);
    free(c);
}

/* Sizes the staging buffers for t rows (a no-op when they are large enough). */
static qv_status staging(gpu_ctx *c, int t)
{
    if (c->cap_m >= t) return QV_OK;
    free_staging(c);
    const qv_variant *v = c->v;
    size_t ak = (size_t)t * (size_t)c->ls.cap_k, on = (size_t)t * (size_t)c->ls.cap_n;
    size_t es = qv_fmt_storage_bytes(v->ofmt);
    QV_CUDA_TRY(cudaMallocHost(&c->a_h, ak * qv_fmt_storage_bytes(v->afmt)), "cudaMallocHost activations");
    memset(c->a_h, 0, ak * qv_fmt_storage_bytes(v->afmt));
    const size_t ascale_bytes = sizeof(float) * ev_ascale_floats(&c->ls, t);
    QV_CUDA_TRY(cudaMallocHost((void **)&c->ascale_h, ascale_bytes), "cudaMallocHost activation scales");
    QV_CUDA_TRY(cudaMallocHost((void **)&c->azp_h, sizeof(int32_t) * (size_t)t), "cudaMallocHost zero points");
    /* Uploaded once with the weights, before any call fills them. */
    memset(c->ascale_h, 0, ascale_bytes);
    memset(c->azp_h, 0, sizeof(int32_t) * (size_t)t);
    QV_CUDA_TRY(cudaMallocHost(&c->out_h, on * es), "cudaMallocHost output");
    QV_CUDA_TRY(cudaMalloc(&c->poison_d, on * es), "cudaMalloc poison codes");
    QV_TRY(qv_gpu_poison(c->poison_d, v->ofmt, (int64_t)on, NULL));
    c->cap_m = t;
    return QV_OK;
}

/* The per-call problem: layer i's weights with the staged activations of t rows. */
static qv_problem call_problem(const gpu_ctx *c, int i, int t)
{
    return ev_call_problem(&c->ls.lin[i], t, c->a_h, c->ascale_h, c->azp_h);
}

/* Uploads layer i packed for t activation rows (after staging(c, t)). */
static qv_status upload_packed(gpu_ctx *c, int i, int t, const qv_packed *pk)
{
    gpu_lin *L = &c->lin[i];
    if (L->gp_m) qv_gpu_problem_free(&L->gp);
    L->gp_m = 0;
    qv_problem pp = call_problem(c, i, t);
    QV_TRY(qv_gpu_problem_upload(&pp, pk, &c->opts, &L->gp));
    L->gp_m = t;
    return QV_OK;
}

/* Packs and uploads layer i for t activation rows (after staging(c, t)). */
static qv_status upload_layer(gpu_ctx *c, int i, int t)
{
    qv_problem pp = call_problem(c, i, t);
    qv_packed pk;
    memset(&pk, 0, sizeof pk);
    QV_TRY(qv_pack(&pp, &pk));
    qv_status st = upload_packed(c, i, t, &pk);
    qv_packed_destroy(&pk);
    return st;
}

/* Checks a CUDA call inside gpu_call: records the error and returns. */
#define GPU_TRY(call, what)                                                    \
    do {                                                                       \
        int rc_ = (int)(call);                                                 \
        if (rc_ != 0) return qv_cuda_fail(rc_, (what), __FILE__, __LINE__);    \
    } while (0)

static qv_status gpu_call(gpu_ctx *c, int layer, qv_llama_lin which, const float *x, int t, float *y)
{
    const qv_variant *v = c->v;
    const int li = layer * QV_LIN_COUNT + which;
    gpu_lin *L = &c->lin[li];
    QV_TRY(staging(c, t));
    qv_problem pp = call_problem(c, li, t);
    if (!ev_acts_reuse(&c->st, layer, which, x, t, pp.k)) {
        c->st.x = NULL;
        double t0 = ev_now();
        QV_TRY(qv_quantize_acts(&pp, x, t, c->ls.lin[li].k));
        c->acts_s += ev_now() - t0;
        ev_acts_stamp_set(&c->st, layer, which, x, t, pp.k);
    }
    if (L->gp_m != t) QV_TRY(upload_layer(c, li, t));
    double t1 = ev_now();
    qv_gemm_args *a = &L->gp.args;
    cudaStream_t s = (cudaStream_t)a->stream;
    size_t a_bytes = (size_t)t * (size_t)pp.k * qv_fmt_storage_bytes(v->afmt);
    GPU_TRY(cudaMemcpyAsync((void *)a->a, pp.a, a_bytes, cudaMemcpyHostToDevice, s), "upload activations");
    if (pp.a_scale)
        GPU_TRY(cudaMemcpyAsync((void *)a->a_scale, pp.a_scale, sizeof(float) * (size_t)qv_problem_ascale_count(&pp),
                                cudaMemcpyHostToDevice, s), "upload activation scales");
    if (pp.azp)
        GPU_TRY(cudaMemcpyAsync((void *)a->azp, pp.azp, sizeof(int32_t) * (size_t)(v->azp == QV_AZP_TOKEN ? t : 1),
                                cudaMemcpyHostToDevice, s), "upload activation zero points");
    size_t out_bytes = (size_t)t * (size_t)pp.n * qv_fmt_storage_bytes(v->ofmt);
    GPU_TRY(cudaMemcpyAsync(a->c, c->poison_d, out_bytes, cudaMemcpyDeviceToDevice, s), "poison the output");
    QV_TRY(qv_gpu_launch(v, a));
    GPU_TRY(cudaGetLastError(), "kernel launch");
    GPU_TRY(cudaMemcpyAsync(c->out_h, a->c, out_bytes, cudaMemcpyDeviceToHost, s), "download output");
    GPU_TRY(cudaStreamSynchronize(s), "kernel execution");
    ev_decode_out(v->ofmt, c->out_h, pp.n, t, c->ls.lin[li].n, y);
    c->gemm_s += ev_now() - t1;
    return QV_OK;
}

static void gpu_times(const void *vctx, double *acts_s, double *gemm_s)
{
    const gpu_ctx *c = vctx;
    *acts_s = c->acts_s;
    *gemm_s = c->gemm_s;
}

static qv_status gpu_run(void *vctx, const qv_llama *m, int layer, qv_llama_lin which, const float *x, int t, float *y)
{
    (void)m;
    return gpu_call(vctx, layer, which, x, t, y);
}

typedef struct pack_job {
    const gpu_ctx *c;
    int t;
    qv_packed *pk;          /* (n_layers * QV_LIN_COUNT) */
    qv_status *st;
    char (*msg)[256];       /* the message of each failed layer */
} pack_job;

/* Packs linear layers [lo, hi) for t rows. */
static void pack_layers(void *vj, int64_t lo, int64_t hi)
{
    const pack_job *j = vj;
    for (int64_t i = lo; i < hi; i++) {
        qv_problem pp = call_problem(j->c, (int)i, j->t);
        j->st[i] = qv_pack(&pp, &j->pk[i]);
        if (j->st[i] != QV_OK) snprintf(j->msg[i], sizeof j->msg[i], "%s", qv_errmsg());
    }
}

static qv_status gpu_prepare(void *vctx, int t)
{
    gpu_ctx *c = vctx;
    if (t < 1) return qv_fail(QV_ERR_USAGE, "prepare: no rows");
    QV_TRY(staging(c, t));
    int n_lin = ev_lins_count(&c->ls);
    qv_packed *pk = calloc((size_t)n_lin, sizeof *pk);
    qv_status *st = calloc((size_t)n_lin, sizeof *st);
    char (*msg)[256] = calloc((size_t)n_lin, sizeof *msg);
    qv_status bad = QV_OK;
    if (!pk || !st || !msg) bad = qv_fail(QV_ERR_NOMEM, "no memory");
    if (bad == QV_OK) {
        /* Packing is host work, layer by layer independent; the uploads follow in order. */
        pack_job j = {c, t, pk, st, msg};
        ev_parallel_for(n_lin, 1, pack_layers, &j);
    }
    for (int i = 0; i < n_lin && bad == QV_OK; i++) {
        if (st[i] != QV_OK) bad = qv_fail(st[i], "%s: layer %d: %s", c->v->name, i / QV_LIN_COUNT, msg[i]);
        else bad = upload_packed(c, i, t, &pk[i]);
    }
    for (int i = 0; pk && i < n_lin; i++) qv_packed_destroy(&pk[i]);
    free(pk); free(st); free(msg);
    return bad;
}

qv_status qv_linear_variant_gpu(const qv_variant *v, const qv_llama *m, const qv_launch_opts *opts,
                                qv_linear_backend *out)
{
    memset(out, 0, sizeof *out);
    qv_gpu_info info;
    if (!qv_gpu_info_get(&info)) return qv_fail(QV_ERR_NODEVICE, "no CUDA device: the GPU path needs one (use --cpu)");
    if (!v->gpu_kernel) return qv_fail(QV_ERR_UNSUPPORTED, "%s has no GPU kernel", v->name);
    gpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return qv_fail(QV_ERR_NOMEM, "no memory");
    c->v = v;
    if (opts) c->opts = *opts;
    qv_status bad = qv_launch_opts_check(opts);
    if (bad == QV_OK) bad = ev_lins_quantize(&c->ls, v, m);
    if (bad == QV_OK) {
        c->lin = calloc((size_t)ev_lins_count(&c->ls), sizeof *c->lin);
        if (!c->lin) bad = qv_fail(QV_ERR_NOMEM, "no memory");
    }
    if (bad != QV_OK) {
        gpu_free_ctx(c);
        return bad;
    }
    out->run = gpu_run;
    out->ctx = c;
    out->name = "gpu";
    out->prepare = gpu_prepare;
    out->times = gpu_times;
    out->release = gpu_free_ctx;
    return QV_OK;
}
