/* operands_check.c: the reference's decoding (ref_operands_create) checked
 * against an independent decoding built only from problem.h's accessors and
 * the format codec (reference.h: ref_operands_check). The truth and the CPU
 * model share ref_operands_create, so a bug there would move both alike and
 * no verdict could see it; this check is what makes it visible. */
#include <math.h>
#include <mpfr.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/reference.h"
#include "qvet/spec.h"
#include "ref_operands.h"

/* Equal as decoded values: the same double, or both NaN. */
static int same(double x, double y) { return x == y || (isnan(x) && isnan(y)); }

/* RN to format f of the exact sum x + y, through MPFR: the exact sum at 2200
 * bits (any two doubles), then a double rounded to odd, then the codec. */
static double round_sum_mpfr(qv_fmt f, double x, double y)
{
    double s = x + y;
    if (!isfinite(s) || s - x == y) return qv_decode(f, qv_encode(f, s, QV_SAT_NONE));
    mpfr_t t;
    mpfr_init2(t, 2200);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_add_d(t, t, y, MPFR_RNDN); /* exact at 2200 bits */
    double d = mpfr_get_d(t, MPFR_RNDZ);
    if (mpfr_cmp_d(t, d) != 0) {
        uint64_t b;
        memcpy(&b, &d, sizeof b);
        b |= 1u;
        memcpy(&d, &b, sizeof d);
    }
    mpfr_clear(t);
    return qv_decode(f, qv_encode(f, d, QV_SAT_NONE));
}

/* The first-level scale multiplies in the dequantization. */
static int scale_in_dequant(const qv_variant *v)
{
    qv_dequant d = v->arith.dequant;
    return v->scale_layout != QV_SCALE_NONE &&
           (d == QV_DQ_MUL_RN || d == QV_DQ_MUL_RN2 || d == QV_DQ_INT8_RNE || d == QV_DQ_F32);
}

/* The value the accumulator multiplies for weight (kk, j), from the row's
 * declared dequantization (variant.h), with the segment scales when fold. */
static double expect_w(const qv_problem *p, int64_t kk, int64_t j, int fold)
{
    const qv_variant *v = p->v;
    qv_scale_layout sl = v->scale_layout;
    double q = qv_problem_wq(p, kk, j); /* q - z with integer zero points, else the code's value */
    int in_dq = scale_in_dequant(v);
    double s = in_dq ? qv_problem_scale(p, kk, j) : 1.0;
    double z = qv_problem_zero_f(p, kk, j);
    double w;
    switch (v->arith.dequant) {
    case QV_DQ_MUL_RN:
        /* One rounding to the activation format (a fused q * s + z with a float
         * zero point), round to nearest even, Inf past its range. */
        w = v->zero_point == QV_ZP_FLOAT ? round_sum_mpfr(v->afmt, q * s, z)
                                         : qv_decode(v->afmt, qv_encode(v->afmt, q * s, QV_SAT_NONE));
        break;
    case QV_DQ_MUL_RN2:
        w = round_sum_mpfr(v->afmt, qv_decode(v->afmt, qv_encode(v->afmt, q * s, QV_SAT_NONE)), z);
        break;
    case QV_DQ_F32: {
        /* The scale product s s2 rounded to fp32, the value times it rounded to
         * fp32, then to the activation format: each through the codec. */
        double sf = qv_decode(QV_FMT_F32, qv_encode(QV_FMT_F32, s * qv_problem_scale2(p, j), QV_SAT_NONE));
        double x = qv_decode(QV_FMT_F32, qv_encode(QV_FMT_F32, q * sf, QV_SAT_NONE));
        w = qv_decode(v->afmt, qv_encode(v->afmt, x, QV_SAT_NONE));
        break;
    }
    case QV_DQ_INT8_RNE: {
        /* The product rounded to an integer, ties to even, then held to int8. */
        double r = nearbyint(q * s);
        w = fmin(fmax(r, -128.0), 127.0);
        break;
    }
    case QV_DQ_EXACT: w = q * (v->arith.w_mul > 1 ? v->arith.w_mul : 1); break;
    default: w = q; break;
    }
    if (fold && !in_dq && (sl == QV_SCALE_GROUP || sl == QV_SCALE_GROUP_CHANNEL || sl == QV_SCALE_BLOCK))
        w *= qv_problem_scale(p, kk, j);
    return w;
}

/* The activation zero point of row i, 0 when none. */
static double azp_of(const qv_problem *p, int64_t i)
{
    switch (p->v->azp) {
    case QV_AZP_TOKEN: return p->azp[i];
    case QV_AZP_TENSOR: return p->azp[0];
    default: return 0.0;
    }
}

/* The activation (i, kk) the accumulator multiplies, with block-128 scales when fold. */
static double expect_a(const qv_problem *p, int64_t i, int64_t kk, int fold)
{
    double a = qv_problem_a(p, i, kk) - azp_of(p, i);
    if (fold && p->v->act_scale == QV_ASCALE_TOKEN_BLOCK) {
        a *= p->a_scale[(kk / 128) * p->m + i]; /* a_scale is (ceil(k/128), m), MN-major */
    }
    return a;
}

static int has_step(const qv_variant *v, qv_ep_step s)
{
    for (int i = 0; i < QV_EP_MAX && v->arith.epilogue[i] != QV_EP_END; i++)
        if (v->arith.epilogue[i] == s) return 1;
    return 0;
}

static qv_status compare(const qv_problem *p, const ref_operands *op)
{
    const qv_variant *v = p->v;
    const ref_operands o = *op;
    int fold = o.folded;
    qv_status st = QV_OK;
    for (int64_t kk = 0; kk < p->k && st == QV_OK; kk++)
        for (int64_t j = 0; j < p->n && st == QV_OK; j++) {
            double want = expect_w(p, kk, j, fold), got = o.w[kk * p->n + j];
            if (!same(want, got))
                st = qv_fail(QV_ERR_RANGE, "%s: the reference decodes weight (%lld, %lld) as %.17g; its codes and "
                             "scales give %.17g", v->name, (long long)kk, (long long)j, got, want);
        }
    for (int64_t i = 0; i < p->m && st == QV_OK; i++)
        for (int64_t kk = 0; kk < p->k && st == QV_OK; kk++) {
            double want = expect_a(p, i, kk, fold), got = o.a[i * p->k + kk];
            if (!same(want, got))
                st = qv_fail(QV_ERR_RANGE, "%s: the reference decodes activation (%lld, %lld) as %.17g; its code, "
                             "zero point and scale give %.17g", v->name, (long long)i, (long long)kk, got, want);
        }
    int ws = has_step(v, QV_EP_MUL_WSCALE), ws2 = has_step(v, QV_EP_MUL_WSCALE2), as = has_step(v, QV_EP_MUL_ASCALE);
    int bias = has_step(v, QV_EP_ADD_BIAS);
    for (int64_t j = 0; j < p->n && st == QV_OK; j++) {
        /* MUL_WSCALE multiplies by the tensor or channel scale of column j. */
        double s1 = !ws ? 1.0
                    : v->scale_layout == QV_SCALE_TENSOR || v->scale_layout == QV_SCALE_CHANNEL
                        ? qv_problem_scale(p, 0, j)
                        : o.col_s1[j];
        double s2 = ws2 ? qv_problem_scale2(p, j) : 1.0;
        double b = bias ? (double)p->bias[j] : 0.0;
        if (!same(s1, o.col_s1[j]) || !same(s2, o.col_s2[j]) || !same(b, o.bias[j]))
            st = qv_fail(QV_ERR_RANGE, "%s: the reference's epilogue scales and bias of column %lld are %.17g, "
                         "%.17g, %.17g; the problem's are %.17g, %.17g, %.17g", v->name, (long long)j, o.col_s1[j],
                         o.col_s2[j], o.bias[j], s1, s2, b);
    }
    for (int64_t i = 0; i < p->m && st == QV_OK; i++) {
        double s = !as ? 1.0 : p->a_scale[v->act_scale == QV_ASCALE_TOKEN ? i : 0];
        if (!same(s, o.row_s[i]))
            st = qv_fail(QV_ERR_RANGE, "%s: the reference's activation scale of row %lld is %.17g; the problem's is "
                         "%.17g", v->name, (long long)i, o.row_s[i], s);
    }
    return st;
}

static qv_status check_fold(const qv_problem *p, int fold)
{
    ref_operands o;
    QV_TRY(ref_operands_create(p, fold, &o));
    qv_status st = compare(p, &o);
    ref_operands_destroy(&o);
    return st;
}

qv_status ref_operands_check(const qv_problem *p)
{
    QV_TRY(check_fold(p, 0));
    return qv_spec_segment(p->v) > 0 ? check_fold(p, 1) : QV_OK;
}

qv_status ref_operands_check_made(const qv_problem *p, const ref_operands *o)
{
    /* Both forms are checked, as ref_operands_check does: folded operands
     * stand for the second, and the unfolded ones are then made here. */
    if (o->folded) QV_TRY(check_fold(p, 0));
    QV_TRY(compare(p, o));
    return o->folded || qv_spec_segment(p->v) <= 0 ? QV_OK : check_fold(p, 1);
}
