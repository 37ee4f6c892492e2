/* quantize.c: round-to-nearest quantization of a float weight matrix into any
 * registry row's problem, and of activations per the row's activation format
 * (eval.h). Scales are rounded to their storage format first and the codes are
 * computed with the rounded scale, so each stored code is the nearest one under
 * the scale the kernel reads.
 *
 *   weights    symmetric: s = absmax / qmax per scale group, q = rne(w / s)
 *              zero points (uint4): s = (max - min) / 15, z = rne(-min / s)
 *              fp8 e4m3: s = absmax / 448, q = e4m3(w / s)
 *              MXFP4 (OCP MX v1.0): X = 2^(floor(log2 absmax) - 2) per block of
 *              32 (2: the exponent of e2m1's largest value 6 = 1.5 2^2), an e8m0
 *              code held to 1..254 (the codes the Marlin layout carries),
 *              q = e2m1(w / X), RNE, magnitudes past 6 saturated to 6
 *              NVFP4: global g = absmax(tensor) / (6 448) in f32; per block of
 *              16 s = ue4m3(absmax / 6 / g) (RNE, at most 448), q = e2m1(w /
 *              (s g)); with bf16 activations a nonzero s is raised to the
 *              smallest value the layout's scale lift carries beside the
 *              tensor's largest s (layout.h: s 2^s_pow2 < 2^16)
 *              QQQ two-level: s2 = absmax_channel / 127, w8 = rne(w / s2), then
 *              per group s = absmax(w8) / 7 (fp16), q = rne(w8 / s) + 8
 *   activations int8: s = absmax / 127 per tensor or token (asymmetric with a
 *              zero point: s = (max - min) / 255); fp8: s = absmax / 448 per
 *              tensor, token or token x 128-wide K block; f16/bf16: RNE.
 * Shapes are padded with zeros to the row's tiles (qv_quant_padded_shape). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal/eval.h"
#include "qvet/formats.h"

#include "eval_internal.h"

/* The largest magnitude a symmetric weight code takes (before w_mul). */
static double code_qmax(qv_fmt f)
{
    switch (f) {
    case QV_FMT_U4: case QV_FMT_I4: return 7.0;     /* int4: -8..7, symmetric use of +-7 */
    case QV_FMT_U8: case QV_FMT_I8: return 127.0;   /* int8: -128..127, symmetric use of +-127 */
    case QV_FMT_E4M3: return 448.0;                 /* e4m3fn's largest finite value */
    case QV_FMT_E2M1: return 6.0;                   /* e2m1's largest value */
    default: return 1.0;
    }
}

static int64_t round_up(int64_t x, int64_t step)
{
    return (x + step - 1) / step * step;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) { int64_t t = a % b; a = b; b = t; }
    return a;
}

void qv_quant_padded_shape(const qv_variant *v, int64_t k, int64_t n, int64_t *k_pad, int64_t *n_pad)
{
    int64_t step = v->k_tile > 0 ? v->k_tile : 1;
    if (v->g > 0) step = step / gcd64(step, v->g) * v->g;
    *k_pad = round_up(k, step);
    *n_pad = round_up(n, v->n_tile > 0 ? v->n_tile : 1);
}

/* Encodes a scale into sfmt and returns the value the kernel will read. */
static double put_scale(qv_fmt sfmt, void *buf, int64_t i, double s)
{
    switch (sfmt) {
    case QV_FMT_F16: {
        uint16_t c = qv_f64_to_f16(s);
        ((uint16_t *)buf)[i] = c;
        return qv_f16_to_f32(c);
    }
    case QV_FMT_BF16: {
        uint16_t c = qv_f64_to_bf16(s);
        ((uint16_t *)buf)[i] = c;
        return qv_bf16_to_f32(c);
    }
    case QV_FMT_E8M0:
    case QV_FMT_UE4M3: {
        uint32_t c = qv_encode(sfmt, s, QV_SAT_FINITE);
        ((uint8_t *)buf)[i] = (uint8_t)c;
        return qv_decode(sfmt, c);
    }
    default:
        ((float *)buf)[i] = (float)s;
        return (float)s;
    }
}

static double clampd(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* Stores the symmetric code of value w under scale s (w_mul folded in s). */
static void put_sym_code(const qv_variant *v, void *q, int64_t i, double w, double s)
{
    double r = s > 0 ? w / s : 0.0;
    switch (v->wfmt) {
    case QV_FMT_U4: ((uint8_t *)q)[i] = (uint8_t)(clampd(nearbyint(r), -8, 7) + 8); return;
    case QV_FMT_I4: ((int8_t *)q)[i] = (int8_t)clampd(nearbyint(r), -8, 7); return;
    case QV_FMT_U8: ((uint8_t *)q)[i] = (uint8_t)(clampd(nearbyint(r), -128, 127) + 128); return;
    case QV_FMT_I8: ((int8_t *)q)[i] = (int8_t)clampd(nearbyint(r), -128, 127); return;
    case QV_FMT_E4M3: ((uint8_t *)q)[i] = (uint8_t)qv_encode(QV_FMT_E4M3, r, QV_SAT_FINITE); return;
    case QV_FMT_E2M1: ((uint8_t *)q)[i] = (uint8_t)qv_encode(QV_FMT_E2M1, r, QV_SAT_FINITE); return;
    case QV_FMT_F16: ((uint16_t *)q)[i] = qv_f64_to_f16(w); return;
    case QV_FMT_BF16: ((uint16_t *)q)[i] = qv_f64_to_bf16(w); return;
    default: QV_ASSERT(0, "quantize: weight format not handled");
    }
}

/* Scale-group index of weight (kk, j) and the number of groups. */
static int64_t group_index(const qv_problem *p, int64_t kk, int64_t j)
{
    switch (p->v->scale_layout) {
    case QV_SCALE_NONE: case QV_SCALE_TENSOR: return 0;
    case QV_SCALE_CHANNEL: return j;
    case QV_SCALE_GROUP: case QV_SCALE_GROUP_CHANNEL: return (kk / p->g) * p->n + j;
    case QV_SCALE_BLOCK: return (kk / 128) * qv_problem_scale_cols(p) + j / 128; /* 128x128 blocks */
    }
    return 0;
}

static int64_t group_count(const qv_problem *p)
{
    switch (p->v->scale_layout) {
    case QV_SCALE_NONE: case QV_SCALE_TENSOR: return 1;
    default: return qv_problem_scale_rows(p) * qv_problem_scale_cols(p);
    }
}

/* NVFP4 with bf16 activations (layout.h): the kernel reads s 2^s_pow2 with
 * s_pow2 = 7 + j, j the smallest that lifts the smallest nonzero block scale
 * to 2 or more, and s 2^s_pow2 must stay below 2^16. The largest j that the
 * tensor's largest scale leaves room for sets the smallest scale carried,
 * 2^(-6 - j); nonzero scales below it are raised to it (their blocks then
 * quantize more coarsely), so every quantized tensor packs. gs: (ng) the
 * scale values, updated with the codes. */
static void nv_bf16_floor(qv_problem *p, double *gs, int64_t ng)
{
    double smax = 0;
    for (int64_t gi = 0; gi < ng; gi++) smax = fmax(smax, gs[gi]);
    int j = 0;
    while (j < 3 && ldexp(smax, 7 + j + 1) < 65536.0) j++;
    double lo = ldexp(1.0, -6 - j);
    for (int64_t gi = 0; gi < ng; gi++)
        if (gs[gi] > 0 && gs[gi] < lo) gs[gi] = put_scale(QV_FMT_UE4M3, p->scales, gi, lo);
}

qv_status qv_quantize_weights(const qv_variant *v, const float *w, int64_t n, int64_t k, int64_t m, qv_problem *p)
{
    int64_t kp, np_;
    qv_quant_padded_shape(v, k, n, &kp, &np_);
    QV_TRY(qv_problem_create(p, v, m, np_, kp));
    /* wk (kp, np_) = w^T zero-padded: the problem's logical (k, n) weight */
    double *wk = calloc((size_t)(kp * np_), sizeof(double));
    int64_t ng = group_count(p);
    double *gmax = calloc((size_t)ng, sizeof(double)), *gmin = calloc((size_t)ng, sizeof(double));
    double *gs = calloc((size_t)ng, sizeof(double));
    if (!wk || !gmax || !gmin || !gs) {
        free(wk); free(gmax); free(gmin); free(gs);
        qv_problem_destroy(p);
        return qv_fail(QV_ERR_NOMEM, "quantize: no memory for a %lldx%lld weight", (long long)kp, (long long)np_);
    }
    for (int64_t j = 0; j < n; j++)
        for (int64_t kk = 0; kk < k; kk++) wk[kk * np_ + j] = w[j * k + kk];
    if (v->act_order)
        for (int64_t kk = 0; kk < kp; kk++) p->g_idx[kk] = (int32_t)(kk / v->g); /* identity order */
    double wmul = v->arith.w_mul > 1 ? v->arith.w_mul : 1;

    if (v->scale_layout == QV_SCALE_GROUP_CHANNEL) {
        /* QQQ two-level: per-channel int8 first, then per-group int4 of the int8 values. */
        for (int64_t j = 0; j < np_; j++) {
            double a = 0;
            for (int64_t kk = 0; kk < kp; kk++) a = fmax(a, fabs(wk[kk * np_ + j]));
            double s2 = (float)(a > 0 ? a / 127.0 : 1.0);
            p->scales2[j] = (float)s2;
            for (int64_t kk = 0; kk < kp; kk++) wk[kk * np_ + j] = clampd(nearbyint(wk[kk * np_ + j] / s2), -127, 127);
        }
    }
    for (int64_t kk = 0; kk < kp; kk++)
        for (int64_t j = 0; j < np_; j++) {
            int64_t gi = group_index(p, kk, j);
            double x = wk[kk * np_ + j];
            gmax[gi] = fmax(gmax[gi], x);
            gmin[gi] = fmin(gmin[gi], x);
        }
    /* NVFP4's global scale: the tensor's absmax over e2m1's 6 times ue4m3's 448 */
    double g2 = 1.0;
    if (v->sfmt == QV_FMT_UE4M3 && p->scales2) {
        double tmax = 0;
        for (int64_t gi = 0; gi < ng; gi++) tmax = fmax(tmax, fmax(gmax[gi], -gmin[gi]));
        g2 = tmax > 0 ? (float)(tmax / (6.0 * 448.0)) : 1.0;
        for (int64_t j = 0; j < qv_problem_scale2_count(p); j++) p->scales2[j] = (float)g2;
    }
    for (int64_t gi = 0; gi < ng && v->scale_layout != QV_SCALE_NONE; gi++) {
        double s, amax = fmax(gmax[gi], -gmin[gi]);
        if (v->zero_point) s = (gmax[gi] - gmin[gi]) / 15.0; /* 15: the uint4 code range */
        else if (v->sfmt == QV_FMT_E8M0)
            /* 2 = floor(log2 6), the e2m1 exponent of the largest value; codes 1..254 */
            s = amax > 0 ? ldexp(1.0, (int)clampd(ilogb(amax) - 2, 1 - 127, 254 - 127)) : 1.0;
        else s = amax / (code_qmax(v->wfmt) * wmul * g2);
        if (!(s > 0)) s = 1.0; /* an all-zero group: any scale gives zero codes */
        qv_fmt sf = v->scale_layout == QV_SCALE_BLOCK ? QV_FMT_F32 : v->sfmt;
        gs[gi] = put_scale(sf, p->scales, gi, s);
        if (v->zero_point) {
            double z = clampd(nearbyint(-gmin[gi] / gs[gi]), 0, 15);
            p->zeros[gi] = (uint8_t)z;
        }
    }
    if (v->sfmt == QV_FMT_UE4M3 && v->afmt == QV_FMT_BF16) nv_bf16_floor(p, gs, ng);
    for (int64_t kk = 0; kk < kp; kk++)
        for (int64_t j = 0; j < np_; j++) {
            int64_t i = kk * np_ + j, gi = group_index(p, kk, j);
            double x = wk[i];
            if (v->zero_point)
                ((uint8_t *)p->q)[i] = (uint8_t)clampd(nearbyint(x / gs[gi]) + p->zeros[gi], 0, 15);
            else
                put_sym_code(v, p->q, i, x, v->scale_layout == QV_SCALE_NONE ? 1.0 : gs[gi] * wmul * g2);
        }
    free(wk); free(gmax); free(gmin); free(gs);
    return QV_OK;
}

typedef struct acts_job {
    qv_problem *p;
    const float *x;         /* (m, k_real) */
    int64_t k_real;
    double tmax, tmin;      /* per-tensor scale: the extremes of all of x (and 0) */
    double *rmax, *rmin;    /* per-tensor scale: (m) the extremes of each row, or NULL */
} acts_job;

/* The extremes of rows [lo, hi) of x, each started at 0 as the tensor's are. */
static void extreme_rows(void *vj, int64_t lo, int64_t hi)
{
    acts_job *j = vj;
    for (int64_t i = lo; i < hi; i++) {
        double mx = 0, mn = 0;
        for (int64_t kk = 0; kk < j->k_real; kk++) {
            mx = fmax(mx, j->x[i * j->k_real + kk]);
            mn = fmin(mn, j->x[i * j->k_real + kk]);
        }
        j->rmax[i] = mx;
        j->rmin[i] = mn;
    }
}

/* Codes of rows [lo, hi) in an f16 or bf16 activation format. */
static void half_rows(void *vj, int64_t lo, int64_t hi)
{
    const acts_job *j = vj;
    const qv_problem *p = j->p;
    uint16_t *a = p->a;
    int64_t k = p->k;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t kk = 0; kk < k; kk++) {
            float xv = kk < j->k_real ? j->x[i * j->k_real + kk] : 0.0f;
            a[i * k + kk] = p->v->afmt == QV_FMT_F16 ? qv_f32_to_f16(xv) : qv_f32_to_bf16(xv);
        }
}

/* Scales, zero points and int8 or e4m3 codes of rows [lo, hi). */
static void code_rows(void *vj, int64_t lo, int64_t hi)
{
    const acts_job *j = vj;
    qv_problem *p = j->p;
    const qv_variant *v = p->v;
    const float *x = j->x;
    int64_t k = p->k, k_real = j->k_real;
    int fp8 = v->afmt == QV_FMT_E4M3;
    double qmax = fp8 ? 448.0 : 127.0; /* e4m3 max finite; symmetric int8 */
    /* Scale blocks: tensor (1 x all), token (1 row x all K), token-block (1 row x 128 K). */
    int64_t kb = v->act_scale == QV_ASCALE_TOKEN_BLOCK ? 128 : k;
    int64_t nkb = (k + kb - 1) / kb;
    int per_tensor = v->act_scale == QV_ASCALE_TENSOR;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t b = 0; b < nkb; b++) {
            double mx = j->tmax, mn = j->tmin;
            if (!per_tensor) {
                mx = 0; mn = 0;
                for (int64_t kk = b * kb; kk < (b + 1) * kb && kk < k_real; kk++) {
                    mx = fmax(mx, x[i * k_real + kk]);
                    mn = fmin(mn, x[i * k_real + kk]);
                }
            }
            double s;
            int32_t azp = 0;
            if (v->azp != QV_AZP_NONE) {
                s = (mx - mn) / 255.0; /* 255: the int8 code range */
                if (!(s > 0)) s = 1.0;
                s = (float)s;
                azp = (int32_t)clampd(nearbyint(-128.0 - mn / s), -128, 127);
            } else {
                s = fmax(mx, -mn) / qmax;
                if (!(s > 0)) s = 1.0;
                s = (float)s;
            }
            if (per_tensor) { if (i == 0 && b == 0) { p->a_scale[0] = (float)s; if (p->azp) p->azp[0] = azp; } }
            else if (v->act_scale == QV_ASCALE_TOKEN_BLOCK) p->a_scale[b * p->m + i] = (float)s; /* MN-major */
            else { p->a_scale[i] = (float)s; if (p->azp) p->azp[i] = azp; }
            for (int64_t kk = b * kb; kk < (b + 1) * kb && kk < k; kk++) {
                double xv = kk < k_real ? x[i * k_real + kk] : 0.0;
                if (fp8) ((uint8_t *)p->a)[i * k + kk] = (uint8_t)qv_encode(QV_FMT_E4M3, xv / s, QV_SAT_FINITE);
                else ((int8_t *)p->a)[i * k + kk] = (int8_t)clampd(nearbyint(xv / s) + azp, -128, 127);
            }
        }
}

qv_status qv_quantize_acts(qv_problem *p, const float *x, int64_t m, int64_t k_real)
{
    const qv_variant *v = p->v;
    int64_t k = p->k;
    if (m != p->m || k_real > k) return qv_fail(QV_ERR_SHAPE, "quantize: activations (%lld, %lld) do not fit the problem (%lld, %lld)",
                                                (long long)m, (long long)k_real, (long long)p->m, (long long)k);
    acts_job j = {p, x, k_real, 0, 0, NULL, NULL};
    int64_t grain = ev_grain(m, EV_ROW_GRAIN);
    if (v->afmt == QV_FMT_F16 || v->afmt == QV_FMT_BF16) {
        ev_parallel_for(m, grain, half_rows, &j);
        return QV_OK;
    }
    if (v->act_scale == QV_ASCALE_TENSOR) {
        /* The extremes per row, then over the rows: max and min are exact, so
         * the order of combining does not matter. */
        j.rmax = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1));
        j.rmin = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1));
        if (!j.rmax || !j.rmin) {
            free(j.rmax); free(j.rmin);
            return qv_fail(QV_ERR_NOMEM, "quantize: no memory for %lld rows", (long long)m);
        }
        ev_parallel_for(m, grain, extreme_rows, &j);
        for (int64_t i = 0; i < m; i++) { j.tmax = fmax(j.tmax, j.rmax[i]); j.tmin = fmin(j.tmin, j.rmin[i]); }
        free(j.rmax); free(j.rmin);
        j.rmax = j.rmin = NULL;
    }
    ev_parallel_for(m, grain, code_rows, &j);
    return QV_OK;
}

qv_status qv_problem_weight_f32(const qv_problem *p, float *w_kn)
{
    const qv_variant *v = p->v;
    double wmul = v->arith.w_mul > 1 ? v->arith.w_mul : 1;
    for (int64_t kk = 0; kk < p->k; kk++)
        for (int64_t j = 0; j < p->n; j++) {
            double q = qv_problem_wq(p, kk, j) * wmul, s = qv_problem_scale(p, kk, j), w;
            double s2 = qv_problem_scale2(p, j); /* per channel (QQQ) or per tensor (NVFP4) */
            switch (v->arith.dequant) {
            case QV_DQ_MUL_RN: w = qv_decode(v->afmt, qv_encode(v->afmt, q * s, QV_SAT_NONE)); break;
            case QV_DQ_INT8_RNE: w = clampd(nearbyint(q * s), -128, 127); break;
            case QV_DQ_F32: {
                /* the scale product and the scaled value rounded to fp32, then the
                 * value to the activation format; s2 is in the product */
                double sf = qv_decode(QV_FMT_F32, qv_encode(QV_FMT_F32, s * s2, QV_SAT_NONE));
                double x = qv_decode(QV_FMT_F32, qv_encode(QV_FMT_F32, q * sf, QV_SAT_NONE));
                w = qv_decode(v->afmt, qv_encode(v->afmt, x, QV_SAT_NONE));
                s2 = 1.0;
                break;
            }
            default: w = q * s; break;
            }
            w *= s2;
            w_kn[kk * p->n + j] = (float)w;
        }
    return QV_OK;
}
