/* probe.c: deterministic input generators (probe.h).
 *
 * Exact probe limits (why the ranges below keep every partial sum exact): in the
 * fp32 accumulator all products are integer multiples of the smallest product
 * quantum, and the sum of their magnitudes stays below 2^24 quanta for K <= 16384
 * (e.g. W4: |a| <= 3 (1 above K = 4096) times 2^[-1,1], |q-8| <= 8 times 2^[-3,0]:
 * 768 quanta per product); in the fp8 accumulator every 128-product partial is an
 * integer below 128*9 < 2^14; integer rows keep |acc| <= 2^24 so TO_F32 is
 * exact; every scale is a power of two, so each epilogue multiply is exact. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "qvet/spec.h"
#include "ref_operands.h"

static const char *const probe_names[QV_PROBE_COUNT] = {
    [QV_PROBE_EXACT] = "exact",
    [QV_PROBE_ONEHOT] = "onehot",
    [QV_PROBE_RANDOM] = "random",
    [QV_PROBE_WITNESS_FP8_PROMOTE] = "witness-fp8-promote",
    [QV_PROBE_WITNESS_SPLITK] = "witness-splitk",
    [QV_PROBE_WITNESS_SCALE_OVERFLOW] = "witness-scale-overflow",
    [QV_PROBE_WITNESS_RNE_TIE] = "witness-rne-tie",
    [QV_PROBE_WITNESS_BIAS] = "witness-bias",
    [QV_PROBE_FP4_CODES] = "fp4-codes",
    [QV_PROBE_FP4_SCALE_ENDS] = "fp4-scale-ends",
    [QV_PROBE_FP4_GLOBAL_ONE] = "fp4-global-one",
    [QV_PROBE_FP4_GLOBAL_TINY] = "fp4-global-tiny",
    [QV_PROBE_FP4_GLOBAL_HUGE] = "fp4-global-huge",
};
static const char *const regime_names[QV_REGIME_COUNT] = {
    [QV_REGIME_LOGUNIFORM] = "loguniform", [QV_REGIME_TINY] = "tiny", [QV_REGIME_NEAR_MAX] = "near-max",
    [QV_REGIME_ZERO_GROUP] = "zero-group", [QV_REGIME_OUTLIER] = "outlier",
};

const char *qv_probe_name(qv_probe_kind kind)
{
    return (kind >= 0 && kind < QV_PROBE_COUNT) ? probe_names[kind] : "?";
}

qv_probe_kind qv_probe_from_name(const char *name)
{
    for (int i = 0; i < QV_PROBE_COUNT; i++)
        if (name && !strcmp(name, probe_names[i])) return (qv_probe_kind)i;
    return QV_PROBE_COUNT;
}

const char *qv_regime_name(qv_regime r) { return (r >= 0 && r < QV_REGIME_COUNT) ? regime_names[r] : "?"; }

qv_regime qv_regime_from_name(const char *name)
{
    for (int i = 0; i < QV_REGIME_COUNT; i++)
        if (name && !strcmp(name, regime_names[i])) return (qv_regime)i;
    return QV_REGIME_COUNT;
}

int ref_probe_is_unique(qv_probe_kind kind) { return kind != QV_PROBE_RANDOM; }

/* ---- randomness: splitmix64, a pure function of the seed ------------------ */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull); /* splitmix64 constants */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unif(rng *r) { return (double)(rng_next(r) >> 11) * 0x1p-53; }

static int64_t rng_int(rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static double rng_pow2(rng *r, int lo, int hi) { return ldexp(1.0, (int)rng_int(r, lo, hi)); }

/* 2^U(lo, hi): log-uniform, continuous. */
static double rng_logu(rng *r, double lo, double hi) { return exp2(lo + (hi - lo) * rng_unif(r)); }

/* About N(0, 1): a centred sum of four uniforms scaled to unit variance; built
 * from + and * only so it is identical on every libm. */
static double rng_normal(rng *r)
{
    double s = rng_unif(r) + rng_unif(r) + rng_unif(r) + rng_unif(r) - 2.0;
    return s * 1.7320508075688772; /* sqrt(3): four uniforms have variance 1/3 */
}

/* ---- setters in the problem's storage formats ---------------------------- */

static int is_float_fmt(qv_fmt f) { return f == QV_FMT_F16 || f == QV_FMT_BF16 || f == QV_FMT_F32; }

/* Encodes value x in format f (RNE; e4m3 saturating so a probe never makes NaN). */
static uint32_t enc(qv_fmt f, double x) { return qv_encode(f, x, QV_SAT_FINITE); }

static int representable(qv_fmt f, double x)
{
    if (f == QV_FMT_I8) return x == rint(x) && x >= -128 && x <= 127;
    return qv_decode(f, enc(f, x)) == x;
}

/* buf: codes of format f (2 bytes for 16-bit formats, else 1); i: flat index. */
static void put_code(qv_fmt f, void *buf, int64_t i, uint32_t code)
{
    if (qv_fmt_storage_bytes(f) == 2)
        ((uint16_t *)buf)[i] = (uint16_t)code;
    else
        ((uint8_t *)buf)[i] = (uint8_t)code;
}

static void set_a(qv_problem *p, int64_t i, int64_t kk, double x)
{
    qv_fmt f = p->v->afmt;
    int64_t e = i * p->k + kk;
    if (f == QV_FMT_I8) {
        double c = x > 127 ? 127 : x < -128 ? -128 : rint(x);
        ((int8_t *)p->a)[e] = (int8_t)c;
    } else {
        put_code(f, p->a, e, enc(f, x));
    }
}

static double get_a(const qv_problem *p, int64_t i, int64_t kk) { return qv_problem_a(p, i, kk); }

/* The zero point that makes q - z the code's plain value: the bias of the
 * biased and unsigned codes (8 or 128), 0 for signed ones. */
static int unit_zero(qv_fmt f)
{
    return f == QV_FMT_U4 || f == QV_FMT_UINT4 ? 8 : f == QV_FMT_U8 || f == QV_FMT_UINT8 ? 128 : 0;
}

/* Sets the weight whose value, under unit zero points (unit_zero) where the
 * row has integer zero points, is v: codes are v plus the bias they carry. */
static void set_w(qv_problem *p, int64_t kk, int64_t j, double v)
{
    qv_fmt f = p->v->wfmt;
    int zp = p->v->zero_point == QV_ZP_INT;
    int64_t e = kk * p->n + j;
    switch (f) {
    case QV_FMT_U4: ((uint8_t *)p->q)[e] = (uint8_t)(v + 8); break;
    case QV_FMT_U8: ((uint8_t *)p->q)[e] = (uint8_t)(v + 128); break;
    case QV_FMT_UINT4:
    case QV_FMT_UINT8: ((uint8_t *)p->q)[e] = (uint8_t)(v + (zp ? unit_zero(f) : 0)); break;
    case QV_FMT_I4:
    case QV_FMT_I8: ((int8_t *)p->q)[e] = (int8_t)v; break;
    default: put_code(f, p->q, e, enc(f, v)); break;
    }
}

/* The float code formats: e2m1, e4m3, e5m2. */
static int float_code_fmt(qv_fmt f) { return f == QV_FMT_E2M1 || f == QV_FMT_E4M3 || f == QV_FMT_E5M2; }

/* A random finite code of the float code formats, every one equally likely:
 * e2m1's 16; e4m3's and e5m2's 256 but the NaN codes (e4m3: S.1111.111) and
 * e5m2's Inf and NaN (S.11111.xx), drawn again. */
static uint32_t rand_float_code(rng *r, qv_fmt f)
{
    if (f == QV_FMT_E2M1) return (uint32_t)rng_int(r, 0, 15);
    uint32_t c;
    do c = (uint32_t)rng_int(r, 0, 255);
    while (f == QV_FMT_E4M3 ? (c & 0x7Fu) == 0x7Fu : (c & 0x7Cu) == 0x7Cu);
    return c;
}

/* A random weight code value of the format (full range), as set_w takes it. */
static double rand_wval_zp(rng *r, qv_fmt f, int zp)
{
    switch (f) {
    case QV_FMT_U4: return (double)rng_int(r, -8, 7);
    case QV_FMT_UINT4: return (double)rng_int(r, 0, 15) - (zp ? 8 : 0);
    case QV_FMT_I4: return (double)rng_int(r, -7, 7); /* QQQ's symmetric range */
    case QV_FMT_U8: return (double)rng_int(r, -128, 127);
    case QV_FMT_UINT8: return (double)rng_int(r, 0, 255) - (zp ? 128 : 0);
    case QV_FMT_I8: return (double)rng_int(r, -127, 127);
    case QV_FMT_E2M1:
    case QV_FMT_E4M3:
    case QV_FMT_E5M2: return qv_decode(f, rand_float_code(r, f));
    default: return rng_normal(r);
    }
}
#define rand_wval(r, f) rand_wval_zp((r), (f), p->v->zero_point == QV_ZP_INT)

/* set_w(p, kk, j, rand_wval(r, f) * colw) with the same draws: a float code
 * format's value (colw 1) is stored as the code it was decoded from, which
 * is what encoding it again gives (-0 included), without that encoding. */
static void set_w_rand(qv_problem *p, rng *r, int64_t kk, int64_t j, double colw)
{
    const qv_fmt f = p->v->wfmt;
    if (colw == 1.0 && float_code_fmt(f))
        put_code(f, p->q, kk * p->n + j, rand_float_code(r, f));
    else
        set_w(p, kk, j, rand_wval(r, f) * colw);
}

static void set_scale(qv_problem *p, int64_t i, double s)
{
    if (p->v->sfmt == QV_FMT_F32)
        ((float *)p->scales)[i] = (float)s;
    else
        put_code(p->v->sfmt, p->scales, i, enc(p->v->sfmt, s));
}

static int64_t n_scales(const qv_problem *p) { return qv_problem_scale_rows(p) * qv_problem_scale_cols(p); }

/* Second-level scales: each the value nearest s in ws2's format (held decoded). */
static void set_scale2(qv_problem *p, int64_t j, double s)
{
    p->scales2[j] = (float)qv_decode(p->v->s2fmt, enc(p->v->s2fmt, s));
}

static int64_t n_scales2(const qv_problem *p) { return qv_problem_scale2_count(p); }
static int64_t n_zeros(const qv_problem *p) { return qv_problem_zero_rows(p) * qv_problem_zero_cols(p); }

/* Float zero points: the value nearest z in the weight scale's format. */
static void set_zero_f(qv_problem *p, int64_t i, double z)
{
    p->zeros_f[i] = (float)qv_decode(p->v->sfmt, qv_encode(p->v->sfmt, z, QV_SAT_FINITE));
}

/* Biases: the value nearest b in the bias format. */
static void set_bias(qv_problem *p, int64_t j, double b)
{
    p->bias[j] = (float)qv_decode(p->v->bias_fmt, qv_encode(p->v->bias_fmt, b, QV_SAT_FINITE));
}

/* s rounded to `bits` significant bits (so products with small codes stay exact in fp32). */
static double round_bits(double s, int bits)
{
    return ref_round_fmt(s, bits - 1, -1022, 1e300, 1);
}

static void fill_g_idx(qv_problem *p, rng *r)
{
    if (!p->g_idx) return;
    for (int64_t kk = 0; kk < p->k; kk++) p->g_idx[kk] = (int32_t)(kk / p->g);
#ifdef QV_MUTANT_orc_probe_g_idx_sorted
    /* Oracle mutant: g_idx left sorted (act_order never permutes anything). */
    return;
#endif
    for (int64_t kk = p->k - 1; kk > 0; kk--) {
        int64_t o = rng_int(r, 0, kk);
        int32_t t = p->g_idx[kk];
        p->g_idx[kk] = p->g_idx[o];
        p->g_idx[o] = t;
    }
}

/* Integer zero points: the unit zero everywhere (unit = 1), or drawn; a
 * quarter of the drawn sets of u4 codes avoid 0, as every GPTQ v1 checkpoint
 * must (it stores z - 1 in four bits), so the campaign's checkpoint route
 * reads those cases through the v1 reader. Float zero points: 0 (unit), or
 * drawn by the probe itself. */
static void fill_zeros(qv_problem *p, rng *r, int unit)
{
    if (p->zeros_f)
        for (int64_t i = 0; i < n_zeros(p); i++) p->zeros_f[i] = 0.0f;
    if (!p->zeros) return;
    qv_fmt f = p->v->wfmt;
    const qv_fmt_info *fi = qv_fmt_get(f);
    int64_t nz = n_zeros(p);
    int lo = (int)fi->min_value, hi = (int)fi->max_finite;
    if (f == QV_FMT_U4 || f == QV_FMT_U8) {
        lo = 0; /* the biased formats' codes: their zero point replaces the bias */
        hi = f == QV_FMT_U4 ? 15 : 255;
    }
    if (!unit && lo == 0 && hi == 15 && rng_int(r, 0, 3) == 0) lo = 1;
    for (int64_t i = 0; i < nz; i++) {
        int z = unit ? unit_zero(f) : (int)rng_int(r, lo, hi);
        if (f == QV_FMT_I4 || f == QV_FMT_I8)
            ((int8_t *)p->zeros)[i] = (int8_t)z;
        else
            p->zeros[i] = (uint8_t)z;
    }
}

static int64_t azp_count(const qv_problem *p)
{
    return p->v->azp == QV_AZP_TOKEN ? p->m : p->v->azp == QV_AZP_TENSOR ? 1 : 0;
}

static int64_t azp_of(const qv_problem *p, int64_t i)
{
    return p->v->azp == QV_AZP_NONE ? 0 : p->azp[p->v->azp == QV_AZP_TOKEN ? i : 0];
}

static int has_step(const qv_variant *v, qv_ep_step s)
{
    for (int i = 0; i < QV_EP_MAX && v->arith.epilogue[i] != QV_EP_END; i++)
        if (v->arith.epilogue[i] == s) return 1;
    return 0;
}

/* Sets every scale-like buffer to 1, zero points to the codes' bias
 * (unit_zero: 8 for u4, 128 for u8, so q - z = q - 8 or q - 128) and g_idx to
 * the identity grouping. */
static void unit_scales(qv_problem *p)
{
    for (int64_t i = 0; i < n_scales(p); i++) set_scale(p, i, 1.0);
    for (int64_t j = 0; j < n_scales2(p); j++) p->scales2[j] = 1.0f;
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = 1.0f;
    for (int64_t i = 0; i < azp_count(p); i++) p->azp[i] = 0;
    if (p->bias)
        for (int64_t j = 0; j < p->n; j++) p->bias[j] = 0.0f;
    fill_zeros(p, NULL, 1);
    if (p->g_idx)
        for (int64_t kk = 0; kk < p->k; kk++) p->g_idx[kk] = (int32_t)(kk / p->g);
}

/* The dequantization multiplies by the scale and rounds to the activation
 * format (dq=rn, rn2 or f32). */
static int dq_rounds_to_act(const qv_variant *v)
{
    qv_dequant d = v->arith.dequant;
    return d == QV_DQ_MUL_RN || d == QV_DQ_MUL_RN2 || d == QV_DQ_F32;
}

/* The bias is the epilogue's last step. */
static int bias_last(const qv_variant *v)
{
    int last = QV_EP_END;
    for (int i = 0; i < QV_EP_MAX && v->arith.epilogue[i] != QV_EP_END; i++) last = v->arith.epilogue[i];
    return last == QV_EP_ADD_BIAS;
}

/* ---- exact ---------------------------------------------------------------- */

/* Lowest set bit of a finite nonzero double, as a power of two. */
static double quantum_of(double x)
{
    int e;
    double m = frexp(fabs(x), &e); /* x = m 2^e, m in [0.5, 1) with 53 bits */
    int64_t im = (int64_t)ldexp(m, 53);
    return ldexp(1.0, e - 53 + __builtin_ctzll((unsigned long long)im));
}

/* Biases of the exact probe: for column j, c * q where q is the smallest
 * quantum of the column's exact pre-bias values (so every x + b is exact in
 * fp32) and c a small integer; 0 where no such bias is exact in the bias
 * format or keeps the sums within fp32's 24 bits. */
static void exact_biases(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    ref_operands o;
    for (int64_t j = 0; j < p->n; j++) p->bias[j] = 0.0f;
    if (ref_operands_create(p, 1, &o) != QV_OK) return;
    int64_t m = p->m, n = p->n, k = p->k;
    for (int64_t j = 0; j < n; j++) {
        double q = INFINITY, mag = 0;
        double *x = malloc(sizeof(double) * (size_t)m);
        QV_ASSERT(x, "out of memory in the exact probe");
        for (int64_t i = 0; i < m; i++) {
            double acc = 0;
            for (int64_t kk = 0; kk < k; kk++) acc += o.a[i * k + kk] * o.w[kk * n + j];
            for (int st = 0; st < QV_EP_MAX && v->arith.epilogue[st] != QV_EP_ADD_BIAS &&
                            v->arith.epilogue[st] != QV_EP_END; st++)
                acc *= ref_ep_factor(&o, v->arith.epilogue[st], i, j);
            x[i] = acc;
            if (acc != 0) q = fmin(q, quantum_of(acc));
            mag = fmax(mag, fabs(acc));
        }
        if (!isfinite(q)) q = 1.0; /* every value 0 */
        int c = (int)rng_int(r, 1, 8) * (rng_int(r, 0, 1) ? 1 : -1);
        double b = c * q;
        int ok = qv_decode(v->bias_fmt, qv_encode(v->bias_fmt, b, QV_SAT_NONE)) == b;
        for (int64_t i = 0; i < m && ok; i++) ok = (double)(float)(x[i] + b) == x[i] + b && fabs(x[i] + b) < 0x1p24 * q;
        if (ok) p->bias[j] = (float)b;
        free(x);
    }
    ref_operands_destroy(&o);
}

static qv_status fill_exact(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    int64_t m = p->m, n = p->n, k = p->k;
    if (v->arith.accum != QV_ACC_INT32 && k > 16384)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the exact probe keeps partial sums exact only for K <= 16384",
                       v->name);
    int fp8acc = v->arith.accum == QV_ACC_TC_FP8;
    int wide_w = v->wfmt == QV_FMT_U8 || v->wfmt == QV_FMT_E4M3 || v->wfmt == QV_FMT_UINT8 || v->wfmt == QV_FMT_E5M2;
    /* K-varying scales that multiply partial sums (qv_spec_segment) */
    int seg_w = qv_spec_segment(v) > 0 && !dq_rounds_to_act(v) && v->arith.dequant != QV_DQ_INT8_RNE &&
                v->scale_layout != QV_SCALE_TENSOR && v->scale_layout != QV_SCALE_CHANNEL;
    fill_g_idx(p, r);
    fill_zeros(p, r, 0);
    /* Activations: small integers, times a per-token power of two for float rows. */
    int amax = fp8acc ? 3 : v->afmt == QV_FMT_I8 ? (k <= 8192 ? 7 : 1) : (wide_w || k > 4096 ? 1 : 3);
    for (int64_t i = 0; i < azp_count(p); i++) p->azp[i] = (int32_t)(k <= 8192 ? rng_int(r, -3, 3) : 0);
    for (int64_t i = 0; i < m; i++) {
        double rowf = is_float_fmt(v->afmt) ? rng_pow2(r, wide_w ? 0 : -1, 1) : 1.0;
        for (int64_t kk = 0; kk < k; kk++)
            set_a(p, i, kk, (double)rng_int(r, -amax, amax) * rowf + (double)azp_of(p, i));
    }
    /* Weights: full code ranges where exact; restricted values for fp8 and fp16/bf16. */
    double *colf = malloc(sizeof(double) * (size_t)n);
    QV_ASSERT(colf, "out of memory in the exact probe");
    for (int64_t j = 0; j < n; j++) colf[j] = rng_pow2(r, -2, 0);
    /* fp8 weights of an fp8 sum: -3..3, stored as their codes (enc of each
     * value once, not once a weight: routed rows fill every expert). */
    const int fp8_small = (v->wfmt == QV_FMT_E4M3 || v->wfmt == QV_FMT_E5M2) && fp8acc;
    uint32_t small_code[7] = {0};
    for (int c = 0; fp8_small && c < 7; c++) small_code[c] = enc(v->wfmt, (double)(c - 3));
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) {
            double w;
            if (fp8_small) {
                put_code(v->wfmt, p->q, kk * n + j, small_code[rng_int(r, -3, 3) + 3]);
                continue;
            } else if (v->wfmt == QV_FMT_E4M3)
                w = (double)rng_int(r, 8, 15) / 8.0 * rng_pow2(r, -1, 1) * (rng_int(r, 0, 1) ? 1 : -1);
            else if (v->wfmt == QV_FMT_E5M2)
                w = (double)rng_int(r, 4, 7) / 4.0 * rng_pow2(r, -1, 1) * (rng_int(r, 0, 1) ? 1 : -1);
            else if (v->wfmt == QV_FMT_F16 || v->wfmt == QV_FMT_BF16)
                w = (double)rng_int(r, -4, 4) * colf[j];
            else
                w = rand_wval(r, v->wfmt);
            set_w(p, kk, j, w);
        }
    free(colf);
    /* Dequant scales 2^[-span, 0]: as wide as the exactness budget allows (at most
     * 2^8), i.e. K * |a| * 2^(row span) * |w| * 2^span < 2^24 quanta. */
    /* wq: the largest |weight| in units of the weights' smallest quantum */
    double wq = v->wfmt == QV_FMT_U8      ? 128
                : v->wfmt == QV_FMT_UINT8 ? 255
                : v->wfmt == QV_FMT_E4M3  ? 60
                : v->wfmt == QV_FMT_E5M2  ? 28
                : v->wfmt == QV_FMT_E2M1  ? 12
                : v->zero_point || v->wfmt == QV_FMT_UINT4 ? 15
                                          : 8;
    double units = (double)k * amax * (wide_w ? 2.0 : 4.0) * wq;
    int span = 0;
    /* a float zero point adds up to 4 quanta of 2^-span to (q - b) s: one bit less */
    int span_max = v->zero_point == QV_ZP_FLOAT ? 7 : v->afmt == QV_FMT_E4M3 ? 3 : 8;
    while (span < span_max && units * ldexp(1.0, span + 1) < 0x1p24) span++;
    /* scales that ue4m3 holds: 2^-9 and up */
    int ep_lo = v->sfmt == QV_FMT_UE4M3 ? -9 : -12;
    /* Scales: powers of two, drawn per element so they differ per channel/group/token. */
    for (int64_t i = 0; i < n_scales(p); i++) {
        double s;
        if (v->scale_layout == QV_SCALE_BLOCK || seg_w)
            s = rng_pow2(r, -2, 1); /* the fp32 sum over blocks stays below 2^24 quanta */
        else if (dq_rounds_to_act(v))
            s = rng_pow2(r, -span, 0);
        else if (v->arith.dequant == QV_DQ_INT8_RNE)
            s = rng_pow2(r, -2, 4); /* |q-8| * 16 <= 128 fits int8; 2^-2 and 2^-1 make ties for RNE */
        else
            s = rng_pow2(r, ep_lo, -5); /* epilogue scales: exact at any power of two */
        set_scale(p, i, s);
    }
#ifdef QV_MUTANT_orc_probe_exact_scales_one
    /* Oracle mutant: the exact probe's scales all 1 (one value repeated). */
    for (int64_t i = 0; i < n_scales(p); i++) set_scale(p, i, 1.0);
#endif
    /* float zero points: small multiples of the smallest scale, so that
     * (q - b) s + z stays exact in the activation format */
    for (int64_t i = 0; p->zeros_f && i < n_zeros(p); i++) set_zero_f(p, i, (double)rng_int(r, -4, 4) * ldexp(1.0, -span));
    for (int64_t j = 0; j < n_scales2(p); j++) set_scale2(p, j, rng_pow2(r, v->s2fmt == QV_FMT_UE4M3 ? -9 : -12, -5));
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++)
        p->a_scale[i] = (float)(v->act_scale == QV_ASCALE_TOKEN_BLOCK ? rng_pow2(r, -2, 1) : rng_pow2(r, -10, -3));
    if (p->bias) exact_biases(p, r);
    return QV_OK;
}

/* Float zero points of either sign near the scales' magnitudes, and biases of
 * either sign over 2^8 (2^-8 smaller in the tiny regime), drawn only for
 * specs that have them. */
static void random_zeros_bias(qv_problem *p, rng *r, int tiny)
{
    for (int64_t i = 0; p->zeros_f && i < n_zeros(p); i++)
        set_zero_f(p, i, (2.0 * rng_unif(r) - 1.0) * 8.0 * rng_logu(r, -10, -2) * (tiny ? 0x1p-14 : 1.0));
    for (int64_t j = 0; p->bias && j < p->n; j++)
        set_bias(p, j, rng_normal(r) * rng_logu(r, -8, 0) * (tiny ? 0x1p-8 : 1.0));
}

/* ---- one-hot -------------------------------------------------------------- */

static qv_status fill_onehot(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    int64_t m = p->m, n = p->n, k = p->k;
    fill_g_idx(p, r);
    fill_zeros(p, r, 0);
    for (int64_t i = 0; i < azp_count(p); i++) p->azp[i] = (int32_t)rng_int(r, -20, 20);
    int64_t off = rng_int(r, 0, k - 1);
    for (int64_t i = 0; i < m; i++) {
        /* Rows walk K with a stride coprime to most K (7919 is prime). */
        int64_t hot = (off + i * 7919) % k;
        for (int64_t kk = 0; kk < k; kk++) set_a(p, i, kk, (double)azp_of(p, i) + (kk == hot ? 1.0 : 0.0));
    }
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) set_w_rand(p, r, kk, j, 1.0);
    for (int64_t i = 0; i < n_scales(p); i++) {
        double s;
        if (v->arith.dequant == QV_DQ_INT8_RNE)
            s = rng_logu(r, 0, 4); /* |q-8| * s <= 128 stays in int8 */
        else if (v->scale_layout == QV_SCALE_BLOCK || v->sfmt == QV_FMT_F32)
            s = round_bits(rng_logu(r, -10, -2), 12); /* 12 bits: products stay exact in fp32 */
        else
            s = rng_logu(r, -10, -2);
        set_scale(p, i, s);
    }
    for (int64_t j = 0; j < n_scales2(p); j++) set_scale2(p, j, round_bits(rng_logu(r, -12, -4), 12));
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = (float)rng_pow2(r, -4, 0);
    for (int64_t i = 0; p->zeros_f && i < n_zeros(p); i++)
        set_zero_f(p, i, (2.0 * rng_unif(r) - 1.0) * 8.0 * rng_logu(r, -10, -2));
    /* The output stays unique: a bias exact in the fp32 sum when it comes
     * last, none where scales of up to 12 bits would multiply the sum after it. */
    if (p->bias) {
        if (bias_last(v))
            exact_biases(p, r);
        else
            for (int64_t j = 0; j < n; j++) p->bias[j] = 0.0f;
    }
    return QV_OK;
}

/* ---- random with a regime -------------------------------------------------- */

/* The row of the scales that covers weight row kk. */
static int64_t scale_row_of(const qv_problem *p, int64_t kk)
{
    const qv_variant *v = p->v;
    switch (v->scale_layout) {
    case QV_SCALE_GROUP:
    case QV_SCALE_GROUP_CHANNEL: return qv_problem_group(p, kk);
    case QV_SCALE_BLOCK: return kk / (v->block_k > 0 ? v->block_k : 128);
    default: return 0;
    }
}

/* Exact y of row 0 (truth of a one-row copy) to size the near-max regime. */
static double row0_max(const qv_problem *p)
{
    ref_operands o;
    if (ref_operands_create(p, 1, &o) != QV_OK) return 0;
    double mx = 0;
    for (int64_t j = 0; j < p->n; j++) {
        double s = 0;
        for (int64_t kk = 0; kk < p->k; kk++) s += o.a[kk] * o.w[kk * p->n + j];
        s *= o.col_s1[j] * o.col_s2[j] * o.row_s[0];
        if (fabs(s) > mx && isfinite(s)) mx = fabs(s);
    }
    ref_operands_destroy(&o);
    return mx;
}

static qv_status fill_random(qv_problem *p, qv_regime regime, rng *r)
{
    const qv_variant *v = p->v;
    int64_t m = p->m, n = p->n, k = p->k;
    int tiny = regime == QV_REGIME_TINY;
    fill_g_idx(p, r);
    fill_zeros(p, r, 0);
    for (int64_t i = 0; i < azp_count(p); i++) p->azp[i] = (int32_t)rng_int(r, -20, 20);
    /* Outlier channels: about 1 % of K, at least one. */
    int64_t n_out = regime == QV_REGIME_OUTLIER ? (k / 100 > 0 ? k / 100 : 1) : 0;
    char *outlier = calloc((size_t)k, 1);
    QV_ASSERT(outlier, "out of memory in the random probe");
    for (int64_t t = 0; t < n_out; t++) outlier[rng_int(r, 0, k - 1)] = 1;
#ifdef QV_MUTANT_orc_probe_outlier_none
    /* Oracle mutant: the outlier regime marks no channel. */
    memset(outlier, 0, (size_t)k);
#endif
    for (int64_t i = 0; i < m; i++) {
        double tok = rng_logu(r, -2, 2); /* per-token magnitude of float activations */
        for (int64_t kk = 0; kk < k; kk++) {
            double x;
            if (v->afmt == QV_FMT_I8) {
                int64_t lim = regime == QV_REGIME_OUTLIER ? (outlier[kk] ? 127 : 10) : 127;
                x = (double)rng_int(r, -lim, lim);
                if (outlier[kk] && rng_int(r, 0, 1)) x = x < 0 ? -127 + rng_int(r, 0, 27) : 100 + rng_int(r, 0, 27);
                x += (double)azp_of(p, i);
                if (x > 127) x = 127;
                if (x < -128) x = -128;
            } else if (v->afmt == QV_FMT_E4M3) {
                x = rng_normal(r) * (regime == QV_REGIME_OUTLIER ? 1.0 : rng_logu(r, 0, 6));
                if (outlier[kk]) x *= 100.0;
            } else {
                x = rng_normal(r) * tok;
                if (outlier[kk]) x *= 100.0;
#ifdef QV_MUTANT_orc_probe_tiny_unscaled
                /* Oracle mutant: the tiny regime's activations left at their usual size. */
                tiny = 0;
#endif
                if (tiny) x *= 0x1p-8;
            }
            set_a(p, i, kk, x);
        }
    }
    free(outlier);
    if (float_code_fmt(v->wfmt) && qv_fmt_storage_bytes(v->wfmt) == 1) {
        /* set_w_rand's codes, in its order, straight into the code bytes */
        uint8_t *q = p->q;
        for (int64_t e = 0; e < k * n; e++) q[e] = (uint8_t)rand_float_code(r, v->wfmt);
    } else {
        for (int64_t kk = 0; kk < k; kk++) {
            double colw = 1.0;
            for (int64_t j = 0; j < n; j++) {
                if (v->wfmt == QV_FMT_F16 || v->wfmt == QV_FMT_BF16)
                    colw = ldexp(1.0, -(int)(j % 3)); /* column magnitudes 1, 1/2, 1/4 */
                set_w_rand(p, r, kk, j, colw);
            }
        }
    }
    /* Scales: log-uniform over 2^8 per element. The tiny regime takes them
     * 2^-40 down where f32 holds them, 2^-14 for the 16-bit formats and e8m0,
     * and 2^-4 for ue4m3, whose range ends at 2^-9: then about half are zero
     * or subnormal and the rest its smallest normals. */
    double tiny_w = v->scale_layout == QV_SCALE_BLOCK || v->sfmt == QV_FMT_F32 ? 0x1p-40
                    : v->sfmt == QV_FMT_UE4M3                                   ? 0x1p-4
                                                                                : 0x1p-14;
    for (int64_t i = 0; i < n_scales(p); i++) {
        double s;
        if (v->arith.dequant == QV_DQ_INT8_RNE)
            s = rng_logu(r, 0, 4);
        else if (v->afmt == QV_FMT_I8 || v->afmt == QV_FMT_E4M3)
            s = rng_logu(r, -12, -4);
        else
            s = rng_logu(r, -10, -2);
#ifdef QV_MUTANT_orc_probe_scales_narrow
        /* Oracle mutant: scales drawn over 2^0.5 instead of 2^8 (nearly one value). */
        s = exp2(-6 + 0.5 * rng_unif(r));
#endif
#ifdef QV_MUTANT_orc_probe_tiny_unscaled
        /* Oracle mutant: the tiny regime's scales left at their usual size. */
        tiny_w = 1.0;
#endif
        if (tiny && v->arith.dequant != QV_DQ_INT8_RNE) s *= tiny_w;
        set_scale(p, i, s);
    }
    for (int64_t j = 0; j < n_scales2(p); j++) set_scale2(p, j, rng_logu(r, -12, -4) * (tiny ? 0x1p-40 : 1.0));
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++)
        p->a_scale[i] = (float)((v->act_scale == QV_ASCALE_TOKEN_BLOCK ? rng_logu(r, -8, 0) : rng_logu(r, -12, -4)) *
                                (tiny ? 0x1p-40 : 1.0));
    random_zeros_bias(p, r, tiny);
#ifdef QV_MUTANT_orc_probe_zero_group_none
    /* Oracle mutant: the zero-group regime zeroes nothing. */
    if (0) {
#else
    if (regime == QV_REGIME_ZERO_GROUP) {
#endif
        /* Zero scales for a quarter of the scale rows (whole groups), and one
         * activation row and one 16-wide K stripe of zeros. A scale format
         * without zero (e8m0) zeroes the group's weights instead. */
        int64_t rows = qv_problem_scale_rows(p), cols = qv_problem_scale_cols(p);
        int no_zero = v->sfmt != QV_FMT_NONE && qv_fmt_get(v->sfmt)->min_value > 0;
        for (int64_t gi = 0; gi < rows; gi++)
            if (rows == 1 ? 0 : rng_int(r, 0, 3) == 0) {
                if (!no_zero)
                    for (int64_t j = 0; j < cols; j++) set_scale(p, gi * cols + j, 0.0);
                else
                    for (int64_t kk = 0; kk < k; kk++)
                        for (int64_t j = 0; j < n && scale_row_of(p, kk) == gi; j++) set_w(p, kk, j, 0.0);
            }
        if (rows == 1)
            for (int64_t j = 0; j < cols; j += 2) {
                if (!no_zero)
                    set_scale(p, j, 0.0);
                else
                    for (int64_t kk = 0; kk < k; kk++) set_w(p, kk, j, 0.0);
            }
        int64_t zr = rng_int(r, 0, m - 1), k0 = rng_int(r, 0, (k - 1) / 16) * 16;
        for (int64_t kk = 0; kk < k; kk++) set_a(p, zr, kk, (double)azp_of(p, zr));
        for (int64_t i = 0; i < m; i++)
            for (int64_t kk = k0; kk < k0 + 16 && kk < k; kk++) set_a(p, i, kk, (double)azp_of(p, i));
        /* A group of zero weights in every column (the int and fp8 rows' "zero group"). */
        int64_t gk = rng_int(r, 0, (k - 1) / 16) * 16;
        for (int64_t kk = gk; kk < gk + 16 && kk < k; kk++)
            for (int64_t j = 0; j < n; j++)
                if (!p->zeros) set_w(p, kk, j, 0.0);
    }
#ifdef QV_MUTANT_orc_probe_near_max_noop
    /* Oracle mutant: the near-max regime rescales nothing. */
    if (0) {
#else
    if (regime == QV_REGIME_NEAR_MAX) {
#endif
        /* Scale by a power of two so row 0 peaks at about 3/4 of the fp16 maximum. */
        double mx = row0_max(p);
        if (mx > 0) {
            int sh = (int)floor(log2(49152.0 / mx)); /* 49152 = 0.75 * 65536 */
            double f = ldexp(1.0, sh);
            if (qv_problem_ascale_count(p) > 0)
                for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = (float)(p->a_scale[i] * f);
            else
                for (int64_t i = 0; i < m; i++)
                    for (int64_t kk = 0; kk < k; kk++) set_a(p, i, kk, get_a(p, i, kk) * f);
        }
    }
    return QV_OK;
}

/* ---- witnesses ------------------------------------------------------------ */

/* Integer weight values the accumulator can see with unit scales (with the
 * INT8_RNE group scale `s_group`), each times w_mul; vals: (cap) output. */
static int weight_values(const qv_variant *v, double s_group, double *vals, int cap)
{
    int nv = 0;
    double wmul = v->arith.w_mul > 1 ? v->arith.w_mul : 1;
    if (v->wfmt == QV_FMT_E2M1) {
        /* the 16 codes' values (0.5 and 1.5 are no integers), times the group scale */
        for (uint32_t c = 0; c < 16 && nv < cap; c++) {
            double eff = qv_decode(QV_FMT_E2M1, c) * s_group;
            if (dq_rounds_to_act(v) && !representable(v->afmt, eff)) continue;
            vals[nv++] = eff;
        }
        return nv;
    }
    for (int x = -448; x <= 448 && nv < cap; x++) {
        double val = x;
        int ok;
        int zp = v->zero_point == QV_ZP_INT;
        switch (v->wfmt) {
        case QV_FMT_U4:
        case QV_FMT_I4: ok = x >= -8 && x <= 7; break;
        case QV_FMT_U8:
        case QV_FMT_I8: ok = x >= -128 && x <= 127; break;
        case QV_FMT_UINT4: ok = zp ? x >= -8 && x <= 7 : x >= 0 && x <= 15; break;
        case QV_FMT_UINT8: ok = zp ? x >= -128 && x <= 127 : x >= 0 && x <= 255; break;
        default: ok = representable(v->wfmt, val); break;
        }
        if (!ok) continue;
        double eff = v->arith.dequant == QV_DQ_INT8_RNE ? rint(val * s_group) : val * wmul;
        if (dq_rounds_to_act(v) && !representable(v->afmt, eff)) continue;
        vals[nv++] = eff;
    }
    return nv;
}

/* e2m1 weights with their block scale in the dequantization: the witnesses
 * set every block scale to 2, so that the weights the accumulator sees
 * include 1 and 3 (0.5 and 1.5 times 2) and need no epilogue factor. */
static int fp4_group_witness(const qv_variant *v)
{
    return v->wfmt == QV_FMT_E2M1 && v->scale_layout == QV_SCALE_GROUP && dq_rounds_to_act(v);
}

/* The code value that dequantizes (unit scales) to accumulator value eff. */
static double code_for(const qv_variant *v, double s_group, double eff)
{
    if (v->arith.dequant == QV_DQ_INT8_RNE || fp4_group_witness(v)) return eff / s_group;
    if (v->arith.w_mul > 1) return eff / v->arith.w_mul;
    return eff;
}

static int act_ok(const qv_variant *v, double a) { return representable(v->afmt, a) && representable(v->afmt, -a); }

static int has_mul_step(const qv_variant *v)
{
    return has_step(v, QV_EP_MUL_WSCALE) || has_step(v, QV_EP_MUL_WSCALE2) || has_step(v, QV_EP_MUL_ASCALE);
}

static double sgroup_for(const qv_variant *v)
{
    return v->arith.dequant == QV_DQ_INT8_RNE ? 16.0 : fp4_group_witness(v) ? 2.0 : 1.0;
}

/* The accumulator can see weight value x under unit scales. */
static int has_weight(const qv_variant *v, double x)
{
    double vals[1024];
    int nv = weight_values(v, sgroup_for(v), vals, 1024);
    for (int t = 0; t < nv; t++)
        if (vals[t] == x) return 1;
    return 0;
}

static qv_status fill_fp8_promote(qv_problem *p)
{
    int64_t nc = p->v->arith.promote_nc;
    unit_scales(p);
    /* Output scale 2^-5 keeps (65536 + K) / 32 inside fp16. */
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = 0x1p-5f;
    /* One product 2^16 alone in the first 128 K (its other products are 0), then
     * ones: every 128-K partial is exact in a 14-bit accumulator, so promotion
     * every 128 with any accumulator at least that wide gives the exact sum
     * 65536 + K - 128, while no promotion keeps 65536 (the ones vanish next to
     * 2^16). A kernel wider than declared is not flagged (docs/design.md §3's sequence,
     * ones right after 2^16, loses 127 in a 14-bit accumulator and none in a
     * 24-bit one). */
#ifdef QV_MUTANT_orc_probe_fp8_witness_no_ones
    /* Oracle mutant: the witness without its ones: nothing for promotion to keep. */
    nc = p->k;
#endif
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t kk = 0; kk < p->k; kk++) set_a(p, i, kk, kk == 0 ? 256.0 : kk < nc ? 0.0 : 1.0);
    for (int64_t kk = 0; kk < p->k; kk++)
        for (int64_t j = 0; j < p->n; j++) set_w(p, kk, j, kk == 0 ? 256.0 : 1.0);
    return QV_OK;
}

/* Sets every block scale to s where the witnesses need it (sgroup_for). */
static void set_group_scales(qv_problem *p, double s)
{
    if (p->v->arith.dequant == QV_DQ_INT8_RNE || fp4_group_witness(p->v))
        for (int64_t i = 0; i < n_scales(p); i++) set_scale(p, i, s);
}

static qv_status fill_splitk(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    unit_scales(p);
    double sg = sgroup_for(v);
    set_group_scales(p, sg);
    int64_t k = p->k;
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < p->n; j++) set_w_rand(p, r, kk, j, 1.0);
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t kk = 0; kk < k; kk++) set_a(p, i, kk, 0.0);
    /* (-256)(-8) + 1*1 + 256*(-8) = 2049 - 2048 = 1: exact in fp32, 0 through fp16. */
    for (int64_t i = 0; i < p->m; i++) {
        set_a(p, i, 0, -256.0);
        set_a(p, i, 1, 1.0);
        set_a(p, i, k - 1, 256.0);
#ifdef QV_MUTANT_orc_probe_splitk_no_cancellation
        /* Oracle mutant: the 256 x -8 that cancels 2048 left out: y = 2049,
         * whose f16 output 2048 is also what an fp16 reduction gives. */
        set_a(p, i, k - 1, 0.0);
#endif
    }
    for (int64_t j = 0; j < p->n; j++) {
        set_w(p, 0, j, code_for(v, sg, -8.0));
        set_w(p, 1, j, code_for(v, sg, 1.0));
        set_w(p, k - 1, j, code_for(v, sg, -8.0));
    }
    return QV_OK;
}

/* Puts factor s into the first epilogue scale the row has. */
static void set_epilogue_factor(qv_problem *p, double s)
{
    const qv_variant *v = p->v;
    if (has_step(v, QV_EP_MUL_WSCALE))
        for (int64_t i = 0; i < n_scales(p); i++) set_scale(p, i, s);
    else if (has_step(v, QV_EP_MUL_WSCALE2))
        for (int64_t j = 0; j < n_scales2(p); j++) set_scale2(p, j, s);
    else
        for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = (float)s;
}



static qv_status fill_scale_overflow(qv_problem *p)
{
    const qv_variant *v = p->v;
    unit_scales(p);
    double sg = sgroup_for(v);
    set_group_scales(p, sg);
    double vals[1024];
    int nv = weight_values(v, sg, vals, 1024);
    double wbig = 0, abig = 0;
    for (int t = 0; t < nv; t++)
        if (fabs(vals[t]) > fabs(wbig)) wbig = vals[t];
    /* The largest activation magnitude that is a clean power-of-two-ish value. */
    const double cands[] = {2048, 1024, 448, 256, 127, 64};
    for (size_t t = 0; t < sizeof cands / sizeof cands[0] && !abig; t++)
        if (act_ok(v, cands[t])) abig = cands[t];
    if (wbig < 0) abig = -abig;
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t kk = 0; kk < p->k; kk++) set_a(p, i, kk, kk < 8 ? abig : 0.0);
    for (int64_t kk = 0; kk < p->k; kk++)
        for (int64_t j = 0; j < p->n; j++) set_w(p, kk, j, kk < 8 ? code_for(v, sg, wbig) : 0.0);
    double acc = 8.0 * fabs(abig * wbig); /* > 65504, exact in fp32 and int32 */
    set_epilogue_factor(p, ldexp(1.0, 13 - (int)ceil(log2(acc))));
    return QV_OK;
}

/* The parts of a sum big * u + small * u with big = 2^(fraction bits + 1) of
 * the output (its codes 2 apart there): c products abig * wbig adding to big * u
 * and one small weight u or 3u (u the smallest positive accumulator weight);
 * an epilogue factor 1/u brings it to big + 1 or big + 3, halfway between two
 * codes. Returns 0 when the row's weights or K cannot make it. */
typedef struct tie_parts {
    double u, wbig, abig, sg;
    int c;
} tie_parts;

static int find_tie_parts(const qv_problem *p, tie_parts *tp)
{
    const qv_variant *v = p->v;
    tp->sg = sgroup_for(v);
    double vals[1024];
    int nv = weight_values(v, tp->sg, vals, 1024);
    /* u: the smallest positive accumulator weight; the epilogue divides it out. */
    double u = INFINITY;
    for (int t = 0; t < nv; t++)
        if (vals[t] > 0 && vals[t] < u) u = vals[t];
    int has3 = 0, has1 = 0, hasm3 = 0, hasm1 = 0;
    for (int t = 0; t < nv; t++) {
        has1 |= vals[t] == u;
        has3 |= vals[t] == 3 * u;
        hasm1 |= vals[t] == -u;
        hasm3 |= vals[t] == -3 * u;
    }
    if (!(has1 && has3 && hasm1 && hasm3) || (u != 1 && !has_mul_step(v))) return 0;
    double big = v->ofmt == QV_FMT_F16 ? 2048 : 256; /* 2^(fraction bits + 1): ulp 2 above */
    tp->c = 0;
    for (int cc = 1; cc <= 32 && !tp->c; cc *= 2)
        for (int t = 0; t < nv && !tp->c; t++) {
            double tgt = big * u / cc;
            if (vals[t] == 0 || fmod(tgt, vals[t]) != 0) continue;
            double a = tgt / vals[t];
            if (act_ok(v, a)) {
                tp->c = cc;
                tp->wbig = vals[t];
                tp->abig = a;
            }
        }
    tp->u = u;
    return tp->c && p->k >= 2 * tp->c + 1;
}

static qv_status fill_rne_tie(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    unit_scales(p);
    tie_parts tp;
    if (!find_tie_parts(p, &tp))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: no weights or K for the RNE-tie witness", v->name);
    set_group_scales(p, tp.sg);
    if (tp.u != 1) set_epilogue_factor(p, 1.0 / tp.u);
    int c = tp.c;
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t kk = 0; kk < p->k; kk++)
            set_a(p, i, kk, kk < c ? tp.abig : kk < 2 * c ? -tp.abig : kk == 2 * c ? 1.0 : 0.0);
    for (int64_t j = 0; j < p->n; j++) {
        int neg = (int)rng_int(r, 0, 1);
        double small = rng_int(r, 0, 1) ? 3 * tp.u : tp.u;
        for (int64_t kk = 0; kk < p->k; kk++) {
            double eff = 0;
            if (kk < c) eff = neg ? 0 : tp.wbig;
            else if (kk < 2 * c) eff = neg ? tp.wbig : 0;
            else if (kk == 2 * c) eff = neg ? -small : small;
            set_w(p, kk, j, code_for(v, tp.sg, eff));
        }
    }
    return QV_OK;
}


/* big + 1 (or -(big + 1)) before the bias, halfway between two output codes,
 * and a bias of +-1 on the side that makes big + 2 exact: the declared fp32
 * addition gives big + 2; a cast first (big, ties to even) then the bias
 * gives big + 1 and so big again, and so does a dropped bias. */
static qv_status fill_bias(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    unit_scales(p);
    tie_parts tp;
    if (!find_tie_parts(p, &tp))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: no weights or K for the bias witness", v->name);
    set_group_scales(p, tp.sg);
    if (tp.u != 1) set_epilogue_factor(p, 1.0 / tp.u);
    int c = tp.c;
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t kk = 0; kk < p->k; kk++) set_a(p, i, kk, kk < c ? tp.abig : kk == c ? 1.0 : 0.0);
    for (int64_t j = 0; j < p->n; j++) {
        int neg = (int)rng_int(r, 0, 1);
        for (int64_t kk = 0; kk < p->k; kk++) {
            double eff = kk < c ? (neg ? -tp.wbig : tp.wbig) : kk == c ? (neg ? -tp.u : tp.u) : 0;
            set_w(p, kk, j, code_for(v, tp.sg, eff));
        }
        set_bias(p, j, neg ? -1.0 : 1.0);
    }
    return QV_OK;
}

/* ---- FP4 ------------------------------------------------------------------ */

/* Stores byte code c as scale i (e8m0 and ue4m3 scales are one byte each). */
static void set_scale_code(qv_problem *p, int64_t i, uint8_t c) { ((uint8_t *)p->scales)[i] = c; }

static int half_fmt(qv_fmt f) { return f == QV_FMT_F16 || f == QV_FMT_BF16; }

/* e2m1 weights, their block scale applied in the dequantization (dq=rn, or
 * dq=f32 with the second-level scale, if any, in the fp32 scale product). */
static int fp4_weights(const qv_variant *v)
{
    return v->wfmt == QV_FMT_E2M1 && v->scale_layout == QV_SCALE_GROUP &&
           (v->arith.dequant == QV_DQ_MUL_RN || v->arith.dequant == QV_DQ_F32) && half_fmt(v->afmt);
}

/* The e2m1 weights of an NVFP4 row: ue4m3 block scales and an f32 global
 * scale per tensor, multiplied in the fp32 epilogue (the global-scale
 * probes are about that epilogue step: with dq=f32 the global scale is in
 * the dequantization, where fp4-codes and fp4-scale-ends reach it). */
static int nvfp4_weights(const qv_variant *v)
{
    return fp4_weights(v) && v->sfmt == QV_FMT_UE4M3 && v->s2_layout == QV_SCALE_TENSOR &&
           v->s2fmt == QV_FMT_F32 && has_step(v, QV_EP_MUL_WSCALE2) && half_fmt(v->ofmt);
}

/* A bias the output stays unique with: exact in the fp32 sum when it comes
 * last, none otherwise. */
static void unique_bias(qv_problem *p, rng *r)
{
    if (!p->bias) return;
    if (bias_last(p->v))
        exact_biases(p, r);
    else
        for (int64_t j = 0; j < p->n; j++) p->bias[j] = 0.0f;
}

/* fp4-codes: weight (kk, j) holds code (kk + j + off) % 16, so that every
 * column holds all 16 codes (K >= 16), -0 (code 8) among them, and so does
 * every run of 16 columns of a row; activation row i is one-hot at k = (hot
 * + i) % K, times a power of two. Output (i, j) is then one dequantized
 * weight times powers of two (and an exact bias): a code read as another
 * value shows as itself. Block scales are powers of two from 2^-6 to 2^2,
 * drawn per element, at which every e2m1 value is exact in f16 and bf16. */
static qv_status fill_fp4_codes(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    int64_t m = p->m, n = p->n, k = p->k;
    unit_scales(p);
    fill_g_idx(p, r);
    int64_t off = rng_int(r, 0, 15), hot = rng_int(r, 0, k - 1);
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) ((uint8_t *)p->q)[kk * n + j] = (uint8_t)((kk + j + off) % 16);
    for (int64_t i = 0; i < m; i++) {
        double f = is_float_fmt(v->afmt) ? rng_pow2(r, -1, 1) : 1.0;
        for (int64_t kk = 0; kk < k; kk++) set_a(p, i, kk, kk == (hot + i) % k ? f : 0.0);
    }
    for (int64_t i = 0; i < n_scales(p); i++) set_scale(p, i, rng_pow2(r, -6, 2));
    for (int64_t j = 0; j < n_scales2(p); j++) set_scale2(p, j, rng_pow2(r, -8, -2));
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = (float)rng_pow2(r, -4, 0);
    unique_bias(p, r);
    return QV_OK;
}

/* The exponent t of activations c 2^t that bring a block scale of at most
 * 2^-e_max back near 1, within what f16 (c 2^t with |c| <= 3 from 2^-22 to
 * 2^14: subnormal quanta of 2^-24 and below 65504) or bf16 (2^-127 to
 * 2^125) holds. */
static int act_exponent(qv_fmt afmt, int e_max)
{
    int lo = afmt == QV_FMT_BF16 ? -127 : -22, hi = afmt == QV_FMT_BF16 ? 125 : 14;
    int t = -e_max;
    return t < lo ? lo : t > hi ? hi : t;
}

/* fp4-scale-ends: block scales at the ends of their format's range, by
 * group row: a low-end row, a high-end row and an ordinary one, in turn,
 * each column of an end row taking one of the end's two codes in turn.
 *   e8m0, bf16: low 1 and 2 (2^-126, 2^-125), high 253 and 254, with the
 *     weights there at most 1.5 in magnitude (1.5 2^127 is bf16's); f16:
 *     low 1 (every weight rounds to +-0 in f16: the declared underflow) and
 *     104 (2^-23, the smallest at which 0.5 stays an f16 value), high 141
 *     and 142. In the last column the high rows hold code 254 and weights
 *     +-2, which overflow to +-Inf in the dequantization (dq=rn): that
 *     column's outputs are Inf or NaN, as the declared arithmetic gives.
 *   ue4m3: low the smallest subnormal 2^-9 and 7 2^-9 (and 0 in every 8th
 *     column), high 416 and 448. bf16 cannot hold both ends in one operand
 *     (the lift that the low end needs, 2^3, pushes 448 2^10 past the
 *     S0E5M3 byte), so a bf16 case takes one end by its seed: the low one,
 *     or the high one with 2^-6 (no lift) as its smallest scale.
 * Every activation of a group's K rows is c 2^t, c in -3..3 (-1..1 past K
 * = 1024), with 2^t the reciprocal of the row's largest scale where the
 * activation format holds it, so that every product stays within a few
 * binades of 1 and every partial sum is exact. */
static qv_status fill_fp4_scale_ends(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    int64_t m = p->m, n = p->n, k = p->k;
    int64_t rows = qv_problem_scale_rows(p);
    const int mx = v->sfmt == QV_FMT_E8M0, bf = v->afmt == QV_FMT_BF16;
    unit_scales(p);
    fill_g_idx(p, r);
    /* bf16 NVFP4 holds one end at a time: 1 = the low end, 2 = the high end */
    int nv_end = !mx && bf ? 1 + (int)rng_int(r, 0, 1) : 0;
    uint8_t lo[2], hi[2];
    if (mx) {
        lo[0] = 1, lo[1] = bf ? 2 : 104;
        hi[0] = bf ? 253 : 141, hi[1] = bf ? 254 : 142;
    } else {
        lo[0] = nv_end == 2 ? 0x08 : 0x01, lo[1] = nv_end == 2 ? 0x09 : 0x07; /* 2^-6, 1.125 2^-6; 2^-9, 7 2^-9 */
        hi[0] = 0x7D, hi[1] = 0x7E;                                         /* 416, 448 */
    }
    /* class of each group row: 0 low, 1 high, 2 ordinary (powers of two
     * 2^-4..1); bf16 NVFP4's low case has no high rows */
    int *cls = malloc(sizeof(int) * (size_t)(rows > 0 ? rows : 1));
    int *t = malloc(sizeof(int) * (size_t)(rows > 0 ? rows : 1));
    QV_ASSERT(cls && t, "out of memory in the fp4-scale-ends probe");
    int64_t over = n - 1; /* MX: the column whose high rows overflow */
    for (int64_t gi = 0; gi < rows; gi++) {
        cls[gi] = (int)(gi % 3);
        if (nv_end == 1 && cls[gi] == 1) cls[gi] = 2;
        double smax = 0;
        for (int64_t j = 0; j < n; j++) {
            uint8_t c;
            if (cls[gi] == 0) c = (!mx && j % 8 == 7) ? 0 : lo[j % 2];
            else if (cls[gi] == 1) c = mx && j == over ? 254 : hi[j % 2];
            else c = mx ? (uint8_t)rng_int(r, 123, 127) : (uint8_t)(rng_int(r, 3, 7) << 3); /* 2^-4 .. 1 */
            set_scale_code(p, gi * n + j, c);
            double sv = qv_decode(v->sfmt, c);
            if (!(mx && j == over && cls[gi] == 1) && sv > smax) smax = sv;
        }
        t[gi] = act_exponent(v->afmt, smax > 0 ? ilogb(smax) : 0);
    }
    int cmax = k > 1024 ? 1 : 3;
    for (int64_t i = 0; i < m; i++)
        for (int64_t kk = 0; kk < k; kk++)
            set_a(p, i, kk, (double)rng_int(r, -cmax, cmax) * ldexp(1.0, t[scale_row_of(p, kk)]));
    for (int64_t kk = 0; kk < k; kk++) {
        int high = cls[scale_row_of(p, kk)] == 1;
        for (int64_t j = 0; j < n; j++) {
            /* e2m1 code: sign bit 3, magnitude index 0..7 (0, .5, 1, 1.5, 2, 3, 4, 6) */
            uint32_t mag = (uint32_t)rng_int(r, 0, mx && high ? 3 : 7), sign = (uint32_t)rng_int(r, 0, 1) << 3;
            if (mx && high && j == over) mag = 4; /* 2 2^127 and 2 2^15 overflow bf16 and f16 */
            ((uint8_t *)p->q)[kk * n + j] = (uint8_t)(sign | mag);
        }
    }
    free(cls);
    free(t);
    for (int64_t j = 0; j < n_scales2(p); j++) set_scale2(p, j, rng_pow2(r, -4, 0));
    unique_bias(p, r);
    return QV_OK;
}

/* The NVFP4 global-scale probes, each with the block scales and
 * activations that make its global scale matter, every partial sum exact:
 *   fp4-global-one: g = 1 and every block scale a ue4m3 subnormal (below
 *     2^-6: the checkpoints whose bf16 bytes vLLM #34577 found read 2^-112
 *     too small before the lift), activations c 2^7;
 *   fp4-global-tiny: block scales 256..448 and positive weights and
 *     activations (c 16, c = 1..3), so that the sum before the global scale
 *     passes 2^23 at K = 1024 (2^16 in an f16 kernel's units, which are 2^-7
 *     of the declared ones: an fp16 cast before the global scale gives Inf,
 *     vLLM #33972); g = 2^-24 (f16 out) or 2^-120 (bf16 out);
 *   fp4-global-huge: block scales 2^-6..2^-4 (2^-6 always among them: no
 *     lift) and tiny activations; g = 2^8 with bf16, the largest power of
 *     two whose rewrite g 2^(126 - 7) stays in f32 (2^127), while the
 *     kernel's accumulator holds the sums as fp32 subnormals (activations
 *     c 2^-8); g = 2^32 with f16, activations f16 subnormals c 2^-24. */
static qv_status fill_fp4_global(qv_problem *p, qv_probe_kind kind, rng *r)
{
    const qv_variant *v = p->v;
    int64_t m = p->m, n = p->n, k = p->k;
    const int bf = v->afmt == QV_FMT_BF16;
    unit_scales(p);
    fill_g_idx(p, r);
    double g;
    int tiny = kind == QV_PROBE_FP4_GLOBAL_TINY, huge = kind == QV_PROBE_FP4_GLOBAL_HUGE;
    for (int64_t i = 0; i < n_scales(p); i++) {
        uint8_t c = tiny ? (uint8_t)rng_int(r, 0x78, 0x7E)      /* 256 .. 448 */
                    : huge ? (uint8_t)rng_int(r, 0x08, 0x18) /* 2^-6 .. 2^-4 */
                           : (uint8_t)rng_int(r, 0x01, 0x07); /* the subnormals 2^-9 .. 7 2^-9 */
        if (i == 0 && !tiny) c = huge ? 0x08 : 0x01;
        set_scale_code(p, i, c);
    }
    int cmax = k > 1024 ? 1 : 3;
    for (int64_t i = 0; i < m; i++)
        for (int64_t kk = 0; kk < k; kk++) {
            double a;
            if (tiny) a = 16.0 * (double)rng_int(r, 1, 3);
            else if (huge) a = (double)rng_int(r, -(bf ? cmax : 1), bf ? cmax : 1) * (bf ? 0x1p-8 : 0x1p-24);
            else a = (double)rng_int(r, -cmax, cmax) * 0x1p7;
            set_a(p, i, kk, a);
        }
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) {
            uint32_t mag = (uint32_t)rng_int(r, 0, 7), sign = tiny ? 0 : (uint32_t)rng_int(r, 0, 1) << 3;
            ((uint8_t *)p->q)[kk * n + j] = (uint8_t)(sign | mag);
        }
    if (tiny) g = v->ofmt == QV_FMT_BF16 ? 0x1p-120 : 0x1p-24;
    else if (huge) g = bf ? 0x1p8 : 0x1p32;
    else g = 1.0;
    for (int64_t j = 0; j < n_scales2(p); j++) set_scale2(p, j, g);
    unique_bias(p, r);
    return QV_OK;
}

/* ---- dispatch ------------------------------------------------------------- */

int ref_probe_applies(const qv_variant *v, qv_probe_kind kind, int64_t m, int64_t n, int64_t k)
{
    switch (kind) {
    case QV_PROBE_EXACT: return v->arith.accum == QV_ACC_INT32 || k <= 16384;
    case QV_PROBE_ONEHOT:
    case QV_PROBE_RANDOM: return 1;
    case QV_PROBE_WITNESS_FP8_PROMOTE:
#ifdef QV_MUTANT_orc_probe_fp8_witness_never_applies
        /* Oracle mutant: the promotion witness applies to no row. */
        return 0;
#endif
        /* unique only under promotion; 2^16 needs w = a = 256 */
        return v->arith.accum == QV_ACC_TC_FP8 && v->arith.promote_nc > 0 && v->arith.promote_nc <= 4096 &&
               k >= 2 && has_weight(v, 256.0) && act_ok(v, 256.0);
    case QV_PROBE_WITNESS_SPLITK:
        return v->arith.accum != QV_ACC_INT32 && k >= 3 && has_weight(v, -8.0) && has_weight(v, 1.0) &&
               act_ok(v, 256.0) && act_ok(v, 1.0);
    case QV_PROBE_WITNESS_SCALE_OVERFLOW:
        return v->ofmt == QV_FMT_F16 && has_mul_step(v) && v->scale_layout != QV_SCALE_BLOCK && k >= 8;
    case QV_PROBE_WITNESS_RNE_TIE:
    case QV_PROBE_WITNESS_BIAS: {
        /* c (1 to 32, find_tie_parts) equal products per sign plus one small one
         * (QQQ's 16x weights take c = 4); K >= 9 is a first filter. */
        if (!(v->ofmt == QV_FMT_F16 || v->ofmt == QV_FMT_BF16) || k < 9) return 0;
        if (kind == QV_PROBE_WITNESS_BIAS && !(v->bias_fmt != QV_FMT_NONE && bias_last(v))) return 0;
        qv_problem probe_p = {.v = v, .m = m, .n = n, .k = k, .g = v->g};
        tie_parts tp;
        return find_tie_parts(&probe_p, &tp);
    }
    /* every code in every column needs K >= 16; the sums of the others stay
     * exact up to the exact probe's K */
    case QV_PROBE_FP4_CODES: return v->wfmt == QV_FMT_E2M1 && k >= 16;
    case QV_PROBE_FP4_SCALE_ENDS:
        return fp4_weights(v) && (v->sfmt == QV_FMT_E8M0 || v->sfmt == QV_FMT_UE4M3) && k <= 16384;
    case QV_PROBE_FP4_GLOBAL_ONE:
    case QV_PROBE_FP4_GLOBAL_TINY:
    case QV_PROBE_FP4_GLOBAL_HUGE: return nvfp4_weights(v) && k <= 16384;
    default: return 0;
    }
}

qv_status ref_probe_fill(qv_problem *p, qv_probe_kind kind, qv_regime regime, uint64_t seed)
{
    QV_ASSERT(p && p->v && p->a && p->q, "ref_probe_fill needs a problem from qv_problem_create");
    if (kind < 0 || kind >= QV_PROBE_COUNT) return qv_fail(QV_ERR_USAGE, "unknown probe kind %d", (int)kind);
    if (kind == QV_PROBE_RANDOM && (regime < 0 || regime >= QV_REGIME_COUNT))
        return qv_fail(QV_ERR_USAGE, "unknown scale regime %d", (int)regime);
    if (!ref_probe_applies(p->v, kind, p->m, p->n, p->k))
        return qv_fail(QV_ERR_UNSUPPORTED, "probe %s does not apply to %s at m=%lld n=%lld k=%lld",
                       qv_probe_name(kind), p->v->name, (long long)p->m, (long long)p->n, (long long)p->k);
    /* Mix the kind into the seed so different probes of one seed differ. */
    rng r = {seed * 0x100000001B3ull + (uint64_t)kind * 0x9E3779B97F4A7C15ull + (uint64_t)regime};
    switch (kind) {
    case QV_PROBE_EXACT: return fill_exact(p, &r);
    case QV_PROBE_ONEHOT: return fill_onehot(p, &r);
    case QV_PROBE_RANDOM: return fill_random(p, regime, &r);
    case QV_PROBE_WITNESS_FP8_PROMOTE: return fill_fp8_promote(p);
    case QV_PROBE_WITNESS_SPLITK: return fill_splitk(p, &r);
    case QV_PROBE_WITNESS_SCALE_OVERFLOW: return fill_scale_overflow(p);
    case QV_PROBE_WITNESS_RNE_TIE: return fill_rne_tie(p, &r);
    case QV_PROBE_WITNESS_BIAS: return fill_bias(p, &r);
    case QV_PROBE_FP4_CODES: return fill_fp4_codes(p, &r);
    case QV_PROBE_FP4_SCALE_ENDS: return fill_fp4_scale_ends(p, &r);
    case QV_PROBE_FP4_GLOBAL_ONE:
    case QV_PROBE_FP4_GLOBAL_TINY:
    case QV_PROBE_FP4_GLOBAL_HUGE: return fill_fp4_global(p, kind, &r);
    default: return qv_fail(QV_ERR_USAGE, "unknown probe kind %d", (int)kind);
    }
}
