/* linear_cpu.c: the CPU backend that runs a model's linear layers through a
 * variant (eval.h). At creation every linear weight is quantized RTN into a
 * problem of the variant (shapes padded to its tiles). Each call quantizes the
 * activations per the variant, then either
 *   exact: runs the variant's CPU model (reference.h ref_model_run), which
 *          computes the declared arithmetic and output rounding, or
 *   fast:  multiplies the dequantized operands with sgemm and rounds the
 *          result to the output format: the declared math up to the order and
 *          precision of accumulation, about 10^3 times faster. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/eval.h"
#include "qvet/formats.h"
#include "qvet/reference.h"

#include "eval_internal.h"

typedef struct cpu_lin {
    qv_problem w;       /* weights quantized, m = 1 (activations are per call) */
    float *w_eff;       /* fast path: (k_pad, n_pad) dequantized weights, else NULL */
    int n, k;           /* the layer's real n_out, n_in */
} cpu_lin;

typedef struct cpu_ctx {
    const qv_variant *v;
    int exact;
    int n_layers;
    cpu_lin *lin;       /* (n_layers * QV_LIN_COUNT) */
    /* Per-call scratch, sized for cap_m rows of the widest layer. */
    int cap_m;
    int64_t cap_k, cap_n;   /* padded k and n of the widest layers */
    void *a;                /* (cap_m, cap_k) activation codes of v->afmt */
    float *a_scale;         /* (cap_m, ceil(cap_k / 128)) activation scales */
    int32_t *azp;           /* (cap_m) activation zero points */
    float *a_f32;           /* fast path: (cap_m, cap_k) dequantized activations */
    float *yy;              /* fast path: (cap_m, cap_n) product before the output cast */
    /* What the scratch activations hold: the input x of layer `layer`'s input
     * group (Q/K/V, O, gate/up, down) for t rows, padded to k. */
    const float *st_x;
    int st_layer, st_group, st_m;
    int64_t st_k;
    double acts_s, gemm_s;  /* wall time in activation quantization and in the GEMMs */
} cpu_ctx;

static float out_value(qv_fmt f, const void *buf, int64_t i)
{
    switch (f) {
    case QV_FMT_F16: return qv_f16_to_f32(((const uint16_t *)buf)[i]);
    case QV_FMT_BF16: return qv_bf16_to_f32(((const uint16_t *)buf)[i]);
    default: return ((const float *)buf)[i];
    }
}

/* Rounds an f32 to the output format and back (the kernel's output cast). */
static float out_round(qv_fmt f, float x)
{
    switch (f) {
    case QV_FMT_F16: return qv_f16_to_f32(qv_f32_to_f16(x));
    case QV_FMT_BF16: return qv_bf16_to_f32(qv_f32_to_bf16(x));
    default: return x;
    }
}

/* 128: the token-block width of QV_ASCALE_TOKEN_BLOCK, the finest activation
 * scale layout, so (m, ceil(k/128)) scales cover every layout. */
#define ASCALE_BLOCK 128

static void free_scratch(cpu_ctx *c)
{
    free(c->a); free(c->a_scale); free(c->azp); free(c->a_f32); free(c->yy);
    c->a = NULL; c->a_scale = NULL; c->azp = NULL; c->a_f32 = NULL; c->yy = NULL;
    c->cap_m = 0;
    c->st_x = NULL;
}

/* Sizes the scratch for t rows (a no-op when it is large enough). */
static qv_status scratch(cpu_ctx *c, int t)
{
    if (c->cap_m >= t) return QV_OK;
    free_scratch(c);
    size_t ak = (size_t)t * (size_t)c->cap_k, on = (size_t)t * (size_t)c->cap_n;
    c->a = malloc(ak * qv_fmt_storage_bytes(c->v->afmt));
    c->a_scale = malloc(sizeof(float) * (size_t)t * (size_t)((c->cap_k + ASCALE_BLOCK - 1) / ASCALE_BLOCK));
    c->azp = malloc(sizeof(int32_t) * (size_t)t);
    if (!c->exact) {
        c->a_f32 = malloc(sizeof(float) * ak);
        c->yy = malloc(sizeof(float) * on);
    }
    if (!c->a || !c->a_scale || !c->azp || (!c->exact && (!c->a_f32 || !c->yy))) {
        free_scratch(c);
        return qv_fail(QV_ERR_NOMEM, "no memory for the activations of %d tokens", t);
    }
    c->cap_m = t;
    return QV_OK;
}

/* The per-call problem: the layer's weights with the scratch activations of t rows. */
static qv_problem call_problem(const cpu_ctx *c, const cpu_lin *L, int t)
{
    qv_problem pp = L->w;
    pp.m = t;
    pp.a = c->a;
    pp.a_scale = c->v->act_scale != QV_ASCALE_NONE ? c->a_scale : NULL;
    pp.azp = c->v->azp != QV_AZP_NONE ? c->azp : NULL;
    return pp;
}

typedef struct acts_job {
    const qv_problem *p;
    float *out;             /* (m, k) */
} acts_job;

/* Dequantized activations of rows [lo, hi) of a problem's activation codes. */
static void acts_rows(void *vj, int64_t lo, int64_t hi)
{
    const acts_job *j = vj;
    const qv_problem *p = j->p;
    const qv_variant *v = p->v;
    int64_t nkb = (p->k + ASCALE_BLOCK - 1) / ASCALE_BLOCK;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t kk = 0; kk < p->k; kk++) {
            double a = qv_problem_a(p, i, kk), s = 1.0;
            if (v->azp == QV_AZP_TOKEN) a -= p->azp[i];
            else if (v->azp == QV_AZP_TENSOR) a -= p->azp[0];
            switch (v->act_scale) {
            case QV_ASCALE_NONE: break;
            case QV_ASCALE_TENSOR: s = p->a_scale[0]; break;
            case QV_ASCALE_TOKEN: s = p->a_scale[i]; break;
            case QV_ASCALE_TOKEN_BLOCK: s = p->a_scale[i * nkb + kk / ASCALE_BLOCK]; break;
            }
            j->out[i * p->k + kk] = (float)(a * s);
        }
}

typedef struct out_job {
    qv_fmt ofmt;
    int exact;
    const void *out;        /* exact: (t, n_pad) codes; fast: (t, n_pad) f32 products */
    int64_t n_pad;
    int n;
    float *y;               /* (t, n) */
} out_job;

/* Output rows [lo, hi) as f32: the codes decoded, or the products rounded. */
static void out_rows(void *vj, int64_t lo, int64_t hi)
{
    const out_job *j = vj;
    for (int64_t i = lo; i < hi; i++)
        for (int c = 0; c < j->n; c++) {
            int64_t at = i * j->n_pad + c;
            j->y[(size_t)i * j->n + c] = j->exact ? out_value(j->ofmt, j->out, at)
                                                  : out_round(j->ofmt, ((const float *)j->out)[at]);
        }
}

/* The input group of a linear layer: the layers of one group read the same input. */
static int input_group(qv_llama_lin which)
{
    switch (which) {
    case QV_LIN_Q: case QV_LIN_K: case QV_LIN_V: return 0;
    case QV_LIN_O: return 1;
    case QV_LIN_GATE: case QV_LIN_UP: return 2;
    default: return 3;
    }
}

static qv_status cpu_run(void *vctx, const qv_llama *m, int layer, qv_llama_lin which, const float *x, int t, float *y)
{
    cpu_ctx *c = vctx;
    cpu_lin *L = &c->lin[layer * QV_LIN_COUNT + which];
    (void)m;
    QV_TRY(scratch(c, t));
    qv_problem pp = call_problem(c, L, t);
    int64_t np_ = pp.n, kp = pp.k;
    int group = input_group(which);
    /* K and V reuse the codes of Q, up those of gate (the same input); only
     * the second and third layer of a group reuse, so a stale input (a forward
     * pass that stopped part way) is never reused. */
    int follower = which == QV_LIN_K || which == QV_LIN_V || which == QV_LIN_UP;
    if (!(follower && c->st_x == x && c->st_layer == layer && c->st_group == group && c->st_m == t &&
          c->st_k == kp)) {
        c->st_x = NULL;
        double t0 = ev_now();
        QV_TRY(qv_quantize_acts(&pp, x, t, L->k));
        if (!c->exact) {
            acts_job aj = {&pp, c->a_f32};
            ev_parallel_for(t, ev_grain(t, EV_ROW_GRAIN), acts_rows, &aj);
        }
        c->acts_s += ev_now() - t0;
        c->st_x = x;
        c->st_layer = layer;
        c->st_group = group;
        c->st_m = t;
        c->st_k = kp;
    }
    out_job oj = {c->v->ofmt, c->exact, NULL, np_, L->n, y};
    double t1 = ev_now();
    qv_status st = QV_OK;
    if (c->exact) {
        void *out = malloc((size_t)qv_problem_out_bytes(&pp));
        if (!out) return qv_fail(QV_ERR_NOMEM, "no memory for a layer output");
        st = ref_model_run(&pp, out);
        oj.out = out;
        if (st == QV_OK) ev_parallel_for(t, ev_grain(t, EV_ROW_GRAIN), out_rows, &oj);
        free(out);
    } else {
        /* yy (t, np) = a (t, kp) . w_eff (kp, np) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, (int)np_, (int)kp, 1.0f, c->a_f32, (int)kp,
                    L->w_eff, (int)np_, 0.0f, c->yy, (int)np_);
        oj.out = c->yy;
        ev_parallel_for(t, ev_grain(t, EV_ROW_GRAIN), out_rows, &oj);
    }
    c->gemm_s += ev_now() - t1;
    return st;
}

static void cpu_free(cpu_ctx *c)
{
    if (!c) return;
    if (c->lin)
        for (int i = 0; i < c->n_layers * QV_LIN_COUNT; i++) {
            qv_problem_destroy(&c->lin[i].w);
            free(c->lin[i].w_eff);
        }
    free_scratch(c);
    free(c->lin);
    free(c);
}

typedef struct quant_job {
    cpu_ctx *c;
    const qv_llama *m;
} quant_job;

/* Quantizes linear layer i (index = layer * QV_LIN_COUNT + which), and for the
 * fast path dequantizes it again. */
static qv_status quant_layer(void *vj, int64_t i)
{
    const quant_job *j = vj;
    cpu_lin *L = &j->c->lin[i];
    int l = (int)(i / QV_LIN_COUNT), w = (int)(i % QV_LIN_COUNT);
    qv_llama_lin_shape(&j->m->c, (qv_llama_lin)w, &L->k, &L->n);
    qv_status st = qv_quantize_weights(j->c->v, j->m->layers[l].w[w], L->n, L->k, 1, &L->w);
    if (st == QV_OK && !j->c->exact) {
        L->w_eff = malloc(sizeof(float) * (size_t)(L->w.k * L->w.n));
        st = L->w_eff ? qv_problem_weight_f32(&L->w, L->w_eff) : qv_fail(QV_ERR_NOMEM, "no memory");
    }
    return st;
}

qv_status qv_linear_variant_cpu(const qv_variant *v, const qv_llama *m, int exact, qv_linear_backend *out)
{
    memset(out, 0, sizeof *out);
    if (exact && !v->cpu_model) return qv_fail(QV_ERR_UNSUPPORTED, "%s has no CPU model", v->name);
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return qv_fail(QV_ERR_NOMEM, "no memory");
    c->v = v;
    c->exact = exact;
    c->n_layers = m->c.n_layers;
    int n_lin = c->n_layers * QV_LIN_COUNT;
    c->lin = calloc((size_t)n_lin, sizeof *c->lin);
    if (!c->lin) {
        cpu_free(c);
        return qv_fail(QV_ERR_NOMEM, "no memory");
    }
    quant_job j = {c, m};
    qv_status bad = ev_parallel_try(n_lin, quant_layer, &j, v->name, "layer", QV_LIN_COUNT);
    if (bad != QV_OK) { cpu_free(c); return bad; }
    for (int i = 0; i < n_lin; i++) {
        if (c->lin[i].w.k > c->cap_k) c->cap_k = c->lin[i].w.k;
        if (c->lin[i].w.n > c->cap_n) c->cap_n = c->lin[i].w.n;
    }
    out->run = cpu_run;
    out->ctx = c;
    out->name = exact ? "cpu-model" : "cpu-fast";
    return QV_OK;
}

void qv_linear_backend_times(const qv_linear_backend *lb, double *acts_s, double *gemm_s)
{
    *acts_s = *gemm_s = 0;
    if (!lb || !lb->ctx) return;
    if (lb->run == cpu_run) {
        const cpu_ctx *c = lb->ctx;
        *acts_s = c->acts_s;
        *gemm_s = c->gemm_s;
        return;
    }
    ev_gpu_times(lb->ctx, acts_s, gemm_s);
}

qv_status qv_linear_backend_prepare(qv_linear_backend *lb, int t)
{
    if (!lb || !lb->ctx) return qv_fail(QV_ERR_USAGE, "prepare: no backend");
    if (lb->run == cpu_run) return scratch(lb->ctx, t);
    return ev_gpu_prepare(lb->ctx, t);
}

void qv_linear_backend_free(qv_linear_backend *lb)
{
    if (!lb || !lb->ctx) return;
    if (lb->run == cpu_run) cpu_free(lb->ctx);
    else ev_gpu_free_ctx(lb->ctx);
    memset(lb, 0, sizeof *lb);
}
