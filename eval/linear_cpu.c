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

/* A per-call problem: the stored weights with fresh activation buffers for t rows. */
static qv_status acts_problem(const qv_problem *w, int t, qv_problem *pp)
{
    *pp = *w;
    pp->m = t;
    qv_problem tmp;
    QV_TRY(qv_problem_create(&tmp, w->v, t, w->n, w->k));
    pp->a = tmp.a; pp->a_scale = tmp.a_scale; pp->azp = tmp.azp;
    tmp.a = NULL; tmp.a_scale = NULL; tmp.azp = NULL;
    qv_problem_destroy(&tmp);
    return QV_OK;
}

static void acts_free(qv_problem *pp)
{
    free(pp->a);
    free(pp->a_scale);
    free(pp->azp);
}

/* Dequantized activations (t, k) f32 of a problem's activation codes. */
static void acts_f32(const qv_problem *p, float *out)
{
    const qv_variant *v = p->v;
    int64_t nkb = (p->k + 127) / 128; /* 128: the token-block width of QV_ASCALE_TOKEN_BLOCK */
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t kk = 0; kk < p->k; kk++) {
            double a = qv_problem_a(p, i, kk), s = 1.0;
            if (v->azp == QV_AZP_TOKEN) a -= p->azp[i];
            else if (v->azp == QV_AZP_TENSOR) a -= p->azp[0];
            switch (v->act_scale) {
            case QV_ASCALE_NONE: break;
            case QV_ASCALE_TENSOR: s = p->a_scale[0]; break;
            case QV_ASCALE_TOKEN: s = p->a_scale[i]; break;
            case QV_ASCALE_TOKEN_BLOCK: s = p->a_scale[i * nkb + kk / 128]; break;
            }
            out[i * p->k + kk] = (float)(a * s);
        }
}

static qv_status cpu_run(void *vctx, const qv_llama *m, int layer, qv_llama_lin which, const float *x, int t, float *y)
{
    cpu_ctx *c = vctx;
    cpu_lin *L = &c->lin[layer * QV_LIN_COUNT + which];
    qv_problem pp;
    QV_TRY(acts_problem(&L->w, t, &pp));
    qv_status st = qv_quantize_acts(&pp, x, t, L->k);
    int64_t np_ = pp.n, kp = pp.k;
    if (st == QV_OK && c->exact) {
        void *out = malloc((size_t)qv_problem_out_bytes(&pp));
        if (!out) st = qv_fail(QV_ERR_NOMEM, "no memory for a layer output");
        else st = ref_model_run(&pp, out);
        if (st == QV_OK)
            for (int i = 0; i < t; i++)
                for (int j = 0; j < L->n; j++) y[(size_t)i * L->n + j] = out_value(c->v->ofmt, out, (int64_t)i * np_ + j);
        free(out);
    } else if (st == QV_OK) {
        float *a = malloc(sizeof(float) * (size_t)(t * kp)), *yy = malloc(sizeof(float) * (size_t)(t * np_));
        if (!a || !yy) st = qv_fail(QV_ERR_NOMEM, "no memory for a layer output");
        else {
            acts_f32(&pp, a);
            /* yy (t, np) = a (t, kp) . w_eff (kp, np) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, (int)np_, (int)kp, 1.0f, a, (int)kp, L->w_eff,
                        (int)np_, 0.0f, yy, (int)np_);
            for (int i = 0; i < t; i++)
                for (int j = 0; j < L->n; j++) y[(size_t)i * L->n + j] = out_round(c->v->ofmt, yy[(size_t)i * np_ + j]);
        }
        free(a);
        free(yy);
    }
    acts_free(&pp);
    (void)m;
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
    free(c->lin);
    free(c);
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
    c->lin = calloc((size_t)c->n_layers * QV_LIN_COUNT, sizeof *c->lin);
    if (!c->lin) { cpu_free(c); return qv_fail(QV_ERR_NOMEM, "no memory"); }
    for (int l = 0; l < c->n_layers; l++)
        for (int w = 0; w < QV_LIN_COUNT; w++) {
            cpu_lin *L = &c->lin[l * QV_LIN_COUNT + w];
            qv_llama_lin_shape(&m->c, (qv_llama_lin)w, &L->k, &L->n);
            qv_status st = qv_quantize_weights(v, m->layers[l].w[w], L->n, L->k, 1, &L->w);
            if (st == QV_OK && !exact) {
                L->w_eff = malloc(sizeof(float) * (size_t)(L->w.k * L->w.n));
                st = L->w_eff ? qv_problem_weight_f32(&L->w, L->w_eff) : qv_fail(QV_ERR_NOMEM, "no memory");
            }
            if (st != QV_OK) {
                char what[160];
                snprintf(what, sizeof what, "%s: layer %d", v->name, l);
                cpu_free(c);
                return ev_prefix(st, what);
            }
        }
    out->run = cpu_run;
    out->ctx = c;
    out->name = exact ? "cpu-model" : "cpu-fast";
    return QV_OK;
}

void qv_linear_backend_free(qv_linear_backend *lb)
{
    if (!lb || !lb->ctx) return;
    if (lb->run == cpu_run) cpu_free(lb->ctx);
    else ev_gpu_free_ctx(lb->ctx);
    memset(lb, 0, sizeof *lb);
}
