/* linear_common.c: linear_common.h, and the backend-independent calls of eval.h
 * (qv_linear_backend_prepare, _times, _free). */
#include "linear_common.h"

#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"

#include "eval_internal.h"

typedef struct quant_job {
    ev_lins *ls;
    const qv_llama *m;
} quant_job;

/* Quantizes linear layer i (index = layer * QV_LIN_COUNT + which). */
static qv_status quant_layer(void *vj, int64_t i)
{
    const quant_job *j = vj;
    ev_lin *L = &j->ls->lin[i];
    int l = (int)(i / QV_LIN_COUNT), w = (int)(i % QV_LIN_COUNT);
    qv_llama_lin_shape(&j->m->c, (qv_llama_lin)w, &L->k, &L->n);
    return qv_quantize_weights(j->ls->v, j->m->layers[l].w[w], L->n, L->k, 1, &L->w);
}

qv_status ev_lins_quantize(ev_lins *ls, const qv_variant *v, const qv_llama *m)
{
    memset(ls, 0, sizeof *ls);
    ls->v = v;
    ls->n_layers = m->c.n_layers;
    const int n_lin = ev_lins_count(ls);
    ls->lin = calloc((size_t)n_lin, sizeof *ls->lin);
    if (!ls->lin) return qv_fail(QV_ERR_NOMEM, "no memory");
    quant_job j = {ls, m};
    qv_status bad = ev_parallel_try(n_lin, quant_layer, &j, v->name, "layer", QV_LIN_COUNT);
    if (bad != QV_OK) {
        ev_lins_free(ls);
        return bad;
    }
    for (int i = 0; i < n_lin; i++) {
        if (ls->lin[i].w.k > ls->cap_k) ls->cap_k = ls->lin[i].w.k;
        if (ls->lin[i].w.n > ls->cap_n) ls->cap_n = ls->lin[i].w.n;
    }
    return QV_OK;
}

void ev_lins_free(ev_lins *ls)
{
    if (ls->lin)
        for (int i = 0; i < ev_lins_count(ls); i++) qv_problem_destroy(&ls->lin[i].w);
    free(ls->lin);
    memset(ls, 0, sizeof *ls);
}

int ev_lins_count(const ev_lins *ls) { return ls->n_layers * QV_LIN_COUNT; }

size_t ev_ascale_floats(const ev_lins *ls, int t)
{
    return (size_t)t * (size_t)((ls->cap_k + EV_ASCALE_BLOCK - 1) / EV_ASCALE_BLOCK);
}

qv_problem ev_call_problem(const ev_lin *L, int t, void *a, float *a_scale, int32_t *azp)
{
    qv_problem pp = L->w;
    pp.m = t;
    pp.a = a;
    pp.a_scale = pp.v->act_scale != QV_ASCALE_NONE ? a_scale : NULL;
    pp.azp = pp.v->azp != QV_AZP_NONE ? azp : NULL;
    return pp;
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

int ev_acts_reuse(const ev_acts_stamp *s, int layer, qv_llama_lin which, const float *x, int t, int64_t k)
{
    const int follower = which == QV_LIN_K || which == QV_LIN_V || which == QV_LIN_UP;
    return follower && s->x == x && s->layer == layer && s->group == input_group(which) && s->m == t && s->k == k;
}

void ev_acts_stamp_set(ev_acts_stamp *s, int layer, qv_llama_lin which, const float *x, int t, int64_t k)
{
    s->x = x;
    s->layer = layer;
    s->group = input_group(which);
    s->m = t;
    s->k = k;
}

typedef struct out_job {
    qv_fmt ofmt;
    int products;           /* 1: out holds f32 products to round to ofmt */
    const void *out;        /* (t, n_pad) codes of ofmt, or f32 products */
    int64_t n_pad;
    int n;
    float *y;               /* (t, n) */
} out_job;

/* Rounds an f32 to the output format and back (the kernel's output cast). */
static float out_round(qv_fmt f, float x)
{
    switch (f) {
    case QV_FMT_F16: return qv_f16_to_f32(qv_f32_to_f16(x));
    case QV_FMT_BF16: return qv_bf16_to_f32(qv_f32_to_bf16(x));
    default: return x;
    }
}

/* Output rows [lo, hi) as f32: the codes decoded, or the products rounded. */
static void out_rows(void *vj, int64_t lo, int64_t hi)
{
    const out_job *j = vj;
    for (int64_t i = lo; i < hi; i++) {
        float *yi = j->y + (size_t)i * j->n;
        int64_t base = i * j->n_pad;
        if (j->products) {
            for (int c = 0; c < j->n; c++) yi[c] = out_round(j->ofmt, ((const float *)j->out)[base + c]);
            continue;
        }
        switch (j->ofmt) {
        case QV_FMT_F16:
            for (int c = 0; c < j->n; c++) yi[c] = qv_f16_to_f32(((const uint16_t *)j->out)[base + c]);
            break;
        case QV_FMT_BF16:
            for (int c = 0; c < j->n; c++) yi[c] = qv_bf16_to_f32(((const uint16_t *)j->out)[base + c]);
            break;
        default:
            memcpy(yi, (const float *)j->out + base, sizeof(float) * (size_t)j->n);
            break;
        }
    }
}

void ev_decode_out(qv_fmt f, const void *out, int64_t n_pad, int t, int n, float *y)
{
    out_job j = {f, 0, out, n_pad, n, y};
    ev_parallel_for(t, ev_grain(t, EV_ROW_GRAIN), out_rows, &j);
}

void ev_round_out(qv_fmt f, const float *yy, int64_t n_pad, int t, int n, float *y)
{
    out_job j = {f, 1, yy, n_pad, n, y};
    ev_parallel_for(t, ev_grain(t, EV_ROW_GRAIN), out_rows, &j);
}

/* The backend-independent calls (eval.h) go through the backend's own
 * operations, so this file needs neither backend. */
void qv_linear_backend_times(const qv_linear_backend *lb, double *acts_s, double *gemm_s)
{
    *acts_s = *gemm_s = 0;
    if (lb && lb->ctx && lb->times) lb->times(lb->ctx, acts_s, gemm_s);
}

qv_status qv_linear_backend_prepare(qv_linear_backend *lb, int t)
{
    if (!lb || !lb->ctx) return qv_fail(QV_ERR_USAGE, "prepare: no backend");
    return lb->prepare ? lb->prepare(lb->ctx, t) : QV_OK;
}

void qv_linear_backend_free(qv_linear_backend *lb)
{
    if (!lb || !lb->ctx) return;
    if (lb->release) lb->release(lb->ctx);
    memset(lb, 0, sizeof *lb);
}
