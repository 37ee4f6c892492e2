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

#include "internal/eval.h"
#include "qvet/formats.h"
#include "qvet/reference.h"

#include "eval_internal.h"
#include "linear_common.h"

typedef struct cpu_ctx {
    const qv_variant *v;
    int exact;
    ev_lins ls;             /* the quantized layers */
    float **w_eff;          /* fast path: (n_layers * QV_LIN_COUNT) of (k_pad, n_pad) dequantized weights */
    /* Per-call scratch, sized for cap_m rows of the widest layer. */
    int cap_m;
    void *a;                /* (cap_m, ls.cap_k) activation codes of v->afmt */
    float *a_scale;         /* activation scales: room for (ceil(ls.cap_k / 128), cap_m) */
    int32_t *azp;           /* (cap_m) activation zero points */
    float *a_f32;           /* fast path: (cap_m, ls.cap_k) dequantized activations */
    float *yy;              /* fast path: (cap_m, ls.cap_n) product before the output cast */
    ev_acts_stamp st;       /* what the scratch activations hold */
    double acts_s, gemm_s;  /* wall time in activation quantization and in the GEMMs */
} cpu_ctx;

static void free_scratch(cpu_ctx *c)
{
    free(c->a); free(c->a_scale); free(c->azp); free(c->a_f32); free(c->yy);
    c->a = NULL; c->a_scale = NULL; c->azp = NULL; c->a_f32 = NULL; c->yy = NULL;
    c->cap_m = 0;
    c->st.x = NULL;
}

/* Sizes the scratch for t rows (a no-op when it is large enough). */
static qv_status scratch(cpu_ctx *c, int t)
{
    if (c->cap_m >= t) return QV_OK;
    free_scratch(c);
    size_t ak = (size_t)t * (size_t)c->ls.cap_k, on = (size_t)t * (size_t)c->ls.cap_n;
    c->a = malloc(ak * qv_fmt_storage_bytes(c->v->afmt));
    c->a_scale = malloc(sizeof(float) * ev_ascale_floats(&c->ls, t));
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
    for (int64_t i = lo; i < hi; i++)
        for (int64_t kk = 0; kk < p->k; kk++) {
            double a = qv_problem_a(p, i, kk), s = 1.0;
            if (v->azp == QV_AZP_TOKEN) a -= p->azp[i];
            else if (v->azp == QV_AZP_TENSOR) a -= p->azp[0];
            switch (v->act_scale) {
            case QV_ASCALE_NONE: break;
            case QV_ASCALE_TENSOR: s = p->a_scale[0]; break;
            case QV_ASCALE_TOKEN: s = p->a_scale[i]; break;
            case QV_ASCALE_TOKEN_BLOCK: s = p->a_scale[(kk / EV_ASCALE_BLOCK) * p->m + i]; break; /* MN-major */
            }
            j->out[i * p->k + kk] = (float)(a * s);
        }
}

static qv_status cpu_run(void *vctx, const qv_llama *m, int layer, qv_llama_lin which, const float *x, int t, float *y)
{
    cpu_ctx *c = vctx;
    const int li = layer * QV_LIN_COUNT + which;
    const ev_lin *L = &c->ls.lin[li];
    (void)m;
    QV_TRY(scratch(c, t));
    qv_problem pp = ev_call_problem(L, t, c->a, c->a_scale, c->azp);
    int64_t np_ = pp.n, kp = pp.k;
    if (!ev_acts_reuse(&c->st, layer, which, x, t, kp)) {
        c->st.x = NULL;
        double t0 = ev_now();
        QV_TRY(qv_quantize_acts(&pp, x, t, L->k));
        if (!c->exact) {
            acts_job aj = {&pp, c->a_f32};
            ev_parallel_for(t, ev_grain(t, EV_ROW_GRAIN), acts_rows, &aj);
        }
        c->acts_s += ev_now() - t0;
        ev_acts_stamp_set(&c->st, layer, which, x, t, kp);
    }
    double t1 = ev_now();
    qv_status st = QV_OK;
    if (c->exact) {
        void *out = malloc((size_t)qv_problem_out_bytes(&pp));
        if (!out) return qv_fail(QV_ERR_NOMEM, "no memory for a layer output");
        st = ref_model_run(&pp, out);
        if (st == QV_OK) ev_decode_out(c->v->ofmt, out, np_, t, L->n, y);
        free(out);
    } else {
        /* yy (t, np) = a (t, kp) . w_eff (kp, np) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, (int)np_, (int)kp, 1.0f, c->a_f32, (int)kp,
                    c->w_eff[li], (int)np_, 0.0f, c->yy, (int)np_);
        ev_round_out(c->v->ofmt, c->yy, np_, t, L->n, y);
    }
    c->gemm_s += ev_now() - t1;
    return st;
}

static void cpu_free(cpu_ctx *c)
{
    if (!c) return;
    if (c->w_eff)
        for (int i = 0; i < ev_lins_count(&c->ls); i++) free(c->w_eff[i]);
    free(c->w_eff);
    ev_lins_free(&c->ls);
    free_scratch(c);
    free(c);
}

static qv_status cpu_prepare(void *vctx, int t) { return scratch(vctx, t); }

static void cpu_times(const void *vctx, double *acts_s, double *gemm_s)
{
    const cpu_ctx *c = vctx;
    *acts_s = c->acts_s;
    *gemm_s = c->gemm_s;
}

static void cpu_release(void *vctx) { cpu_free(vctx); }

/* The fast path's dequantized weights of linear layer i. */
static qv_status dequant_layer(void *vc, int64_t i)
{
    cpu_ctx *c = vc;
    const qv_problem *w = &c->ls.lin[i].w;
    c->w_eff[i] = malloc(sizeof(float) * (size_t)(w->k * w->n));
    return c->w_eff[i] ? qv_problem_weight_f32(w, c->w_eff[i]) : qv_fail(QV_ERR_NOMEM, "no memory");
}

qv_status qv_linear_variant_cpu(const qv_variant *v, const qv_llama *m, int exact, qv_linear_backend *out)
{
    memset(out, 0, sizeof *out);
    if (exact && !v->cpu_model) return qv_fail(QV_ERR_UNSUPPORTED, "%s has no CPU model", v->name);
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return qv_fail(QV_ERR_NOMEM, "no memory");
    c->v = v;
    c->exact = exact;
    qv_status bad = ev_lins_quantize(&c->ls, v, m);
    if (bad == QV_OK && !exact) {
        c->w_eff = calloc((size_t)ev_lins_count(&c->ls), sizeof *c->w_eff);
        bad = c->w_eff ? ev_parallel_try(ev_lins_count(&c->ls), dequant_layer, c, v->name, "layer", QV_LIN_COUNT)
                       : qv_fail(QV_ERR_NOMEM, "no memory");
    }
    if (bad != QV_OK) {
        cpu_free(c);
        return bad;
    }
    out->run = cpu_run;
    out->ctx = c;
    out->name = exact ? "cpu-model" : "cpu-fast";
    out->prepare = cpu_prepare;
    out->times = cpu_times;
    out->release = cpu_release;
    return QV_OK;
}
