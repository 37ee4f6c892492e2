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
#include "ref_operands.h"

static const char *const probe_names[QV_PROBE_COUNT] = {
    [QV_PROBE_EXACT] = "exact",
    [QV_PROBE_ONEHOT] = "onehot",
    [QV_PROBE_RANDOM] = "random",
    [QV_PROBE_WITNESS_FP8_PROMOTE] = "witness-fp8-promote",
    [QV_PROBE_WITNESS_SPLITK] = "witness-splitk",
    [QV_PROBE_WITNESS_SCALE_OVERFLOW] = "witness-scale-overflow",
    [QV_PROBE_WITNESS_RNE_TIE] = "witness-rne-tie",
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

/* Sets the weight whose code value (qv_problem_wq without zero points) is v. */
static void set_w(qv_problem *p, int64_t kk, int64_t j, double v)
{
    qv_fmt f = p->v->wfmt;
    int64_t e = kk * p->n + j;
    switch (f) {
    case QV_FMT_U4: ((uint8_t *)p->q)[e] = (uint8_t)(v + 8); break;
    case QV_FMT_U8: ((uint8_t *)p->q)[e] = (uint8_t)(v + 128); break;
    case QV_FMT_I4:
    case QV_FMT_I8: ((int8_t *)p->q)[e] = (int8_t)v; break;
    default: put_code(f, p->q, e, enc(f, v)); break;
    }
}

/* A random weight code value of the format (full range). */
static double rand_wval(rng *r, qv_fmt f)
{
    switch (f) {
    case QV_FMT_U4: return (double)rng_int(r, -8, 7);
    case QV_FMT_I4: return (double)rng_int(r, -7, 7); /* QQQ's symmetric range */
    case QV_FMT_U8: return (double)rng_int(r, -128, 127);
    case QV_FMT_I8: return (double)rng_int(r, -127, 127);
    case QV_FMT_E4M3: {
        uint32_t c;
        do c = (uint32_t)rng_int(r, 0, 255);
        while ((c & 0x7F) == 0x7F); /* 0x7F/0xFF are NaN */
        return qv_decode(QV_FMT_E4M3, c);
    }
    default: return rng_normal(r);
    }
}

static void set_scale(qv_problem *p, int64_t i, double s)
{
    if (p->v->scale_layout == QV_SCALE_BLOCK || p->v->sfmt == QV_FMT_F32)
        ((float *)p->scales)[i] = (float)s;
    else
        put_code(p->v->sfmt, p->scales, i, enc(p->v->sfmt, s));
}

static int64_t n_scales(const qv_problem *p) { return qv_problem_scale_rows(p) * qv_problem_scale_cols(p); }

/* s rounded to `bits` significant bits (so products with small codes stay exact in fp32). */
static double round_bits(double s, int bits)
{
    return ref_round_fmt(s, bits - 1, -1022, 1e300, 1);
}

static void fill_g_idx(qv_problem *p, rng *r)
{
    if (!p->g_idx) return;
    for (int64_t kk = 0; kk < p->k; kk++) p->g_idx[kk] = (int32_t)(kk / p->g);
    for (int64_t kk = p->k - 1; kk > 0; kk--) {
        int64_t o = rng_int(r, 0, kk);
        int32_t t = p->g_idx[kk];
        p->g_idx[kk] = p->g_idx[o];
        p->g_idx[o] = t;
    }
}

/* Zero points: `fixed` everywhere, or drawn; a quarter of the drawn sets
 * avoid 0, as every GPTQ v1 checkpoint must (it stores z - 1 in four bits), so
 * the campaign's checkpoint route reads those cases through the v1 reader. */
static void fill_zeros(qv_problem *p, rng *r, int fixed)
{
    if (!p->zeros) return;
    int64_t nz = p->k / p->g * p->n;
    int lo = fixed < 0 && rng_int(r, 0, 3) == 0 ? 1 : 0;
    for (int64_t i = 0; i < nz; i++) p->zeros[i] = (uint8_t)(fixed >= 0 ? fixed : rng_int(r, lo, 15));
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

/* Sets every scale-like buffer to 1, zero points to 8 (so q - z = q - 8) and
 * g_idx to the identity grouping. */
static void unit_scales(qv_problem *p)
{
    for (int64_t i = 0; i < n_scales(p); i++) set_scale(p, i, 1.0);
    if (p->scales2)
        for (int64_t j = 0; j < p->n; j++) p->scales2[j] = 1.0f;
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = 1.0f;
    for (int64_t i = 0; i < azp_count(p); i++) p->azp[i] = 0;
    fill_zeros(p, NULL, 8);
    if (p->g_idx)
        for (int64_t kk = 0; kk < p->k; kk++) p->g_idx[kk] = (int32_t)(kk / p->g);
}

/* ---- exact ---------------------------------------------------------------- */

static qv_status fill_exact(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    int64_t m = p->m, n = p->n, k = p->k;
    if (v->arith.accum != QV_ACC_INT32 && k > 16384)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the exact probe keeps partial sums exact only for K <= 16384",
                       v->name);
    int fp8acc = v->arith.accum == QV_ACC_TC_FP8;
    int wide_w = v->wfmt == QV_FMT_U8 || v->wfmt == QV_FMT_E4M3;
    fill_g_idx(p, r);
    fill_zeros(p, r, -1);
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
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) {
            double w;
            if (v->wfmt == QV_FMT_E4M3 && fp8acc)
                w = (double)rng_int(r, -3, 3);
            else if (v->wfmt == QV_FMT_E4M3)
                w = (double)rng_int(r, 8, 15) / 8.0 * rng_pow2(r, -1, 1) * (rng_int(r, 0, 1) ? 1 : -1);
            else if (v->wfmt == QV_FMT_F16 || v->wfmt == QV_FMT_BF16)
                w = (double)rng_int(r, -4, 4) * colf[j];
            else
                w = rand_wval(r, v->wfmt);
            set_w(p, kk, j, w);
        }
    free(colf);
    /* Dequant scales 2^[-span, 0]: as wide as the exactness budget allows (at most
     * 2^8), i.e. K * |a| * 2^(row span) * |w| * 2^span < 2^24 quanta. */
    double wq = v->wfmt == QV_FMT_U8 ? 128 : v->wfmt == QV_FMT_E4M3 ? 60 : v->zero_point ? 15 : 8;
    double units = (double)k * amax * (wide_w ? 2.0 : 4.0) * wq;
    int span = 0;
    while (span < 8 && units * ldexp(1.0, span + 1) < 0x1p24) span++;
    /* Scales: powers of two, drawn per element so they differ per channel/group/token. */
    for (int64_t i = 0; i < n_scales(p); i++) {
        double s;
        if (v->scale_layout == QV_SCALE_BLOCK)
            s = rng_pow2(r, -2, 1); /* the fp32 sum over blocks stays below 2^24 quanta */
        else if (v->arith.dequant == QV_DQ_MUL_RN)
            s = rng_pow2(r, -span, 0);
        else if (v->arith.dequant == QV_DQ_INT8_RNE)
            s = rng_pow2(r, -2, 4); /* |q-8| * 16 <= 128 fits int8; 2^-2 and 2^-1 make ties for RNE */
        else
            s = rng_pow2(r, -12, -5); /* epilogue scales: exact at any power of two */
        set_scale(p, i, s);
    }
    if (p->scales2)
        for (int64_t j = 0; j < n; j++) p->scales2[j] = (float)rng_pow2(r, -12, -5);
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++)
        p->a_scale[i] = (float)(v->act_scale == QV_ASCALE_TOKEN_BLOCK ? rng_pow2(r, -2, 1) : rng_pow2(r, -10, -3));
    return QV_OK;
}

/* ---- one-hot -------------------------------------------------------------- */

static qv_status fill_onehot(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    int64_t m = p->m, n = p->n, k = p->k;
    fill_g_idx(p, r);
    fill_zeros(p, r, -1);
    for (int64_t i = 0; i < azp_count(p); i++) p->azp[i] = (int32_t)rng_int(r, -20, 20);
    int64_t off = rng_int(r, 0, k - 1);
    for (int64_t i = 0; i < m; i++) {
        /* Rows walk K with a stride coprime to most K (7919 is prime). */
        int64_t hot = (off + i * 7919) % k;
        for (int64_t kk = 0; kk < k; kk++) set_a(p, i, kk, (double)azp_of(p, i) + (kk == hot ? 1.0 : 0.0));
    }
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) set_w(p, kk, j, rand_wval(r, v->wfmt));
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
    if (p->scales2)
        for (int64_t j = 0; j < n; j++) p->scales2[j] = (float)round_bits(rng_logu(r, -12, -4), 12);
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = (float)rng_pow2(r, -4, 0);
    return QV_OK;
}

/* ---- random with a regime -------------------------------------------------- */

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
    fill_zeros(p, r, -1);
    for (int64_t i = 0; i < azp_count(p); i++) p->azp[i] = (int32_t)rng_int(r, -20, 20);
    /* Outlier channels: about 1 % of K, at least one. */
    int64_t n_out = regime == QV_REGIME_OUTLIER ? (k / 100 > 0 ? k / 100 : 1) : 0;
    char *outlier = calloc((size_t)k, 1);
    QV_ASSERT(outlier, "out of memory in the random probe");
    for (int64_t t = 0; t < n_out; t++) outlier[rng_int(r, 0, k - 1)] = 1;
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
                if (tiny) x *= 0x1p-8;
            }
            set_a(p, i, kk, x);
        }
    }
    free(outlier);
    for (int64_t kk = 0; kk < k; kk++) {
        double colw = 1.0;
        for (int64_t j = 0; j < n; j++) {
            if (v->wfmt == QV_FMT_F16 || v->wfmt == QV_FMT_BF16)
                colw = ldexp(1.0, -(int)(j % 3)); /* column magnitudes 1, 1/2, 1/4 */
            set_w(p, kk, j, rand_wval(r, v->wfmt) * colw);
        }
    }
    /* Scales: log-uniform over 2^8 per element. */
    double tiny_w = v->scale_layout == QV_SCALE_BLOCK || v->sfmt == QV_FMT_F32 ? 0x1p-40 : 0x1p-14;
    for (int64_t i = 0; i < n_scales(p); i++) {
        double s;
        if (v->arith.dequant == QV_DQ_INT8_RNE)
            s = rng_logu(r, 0, 4);
        else if (v->afmt == QV_FMT_I8 || v->afmt == QV_FMT_E4M3)
            s = rng_logu(r, -12, -4);
        else
            s = rng_logu(r, -10, -2);
        if (tiny && v->arith.dequant != QV_DQ_INT8_RNE) s *= tiny_w;
        set_scale(p, i, s);
    }
    if (p->scales2)
        for (int64_t j = 0; j < n; j++) p->scales2[j] = (float)(rng_logu(r, -12, -4) * (tiny ? 0x1p-40 : 1.0));
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++)
        p->a_scale[i] = (float)((v->act_scale == QV_ASCALE_TOKEN_BLOCK ? rng_logu(r, -8, 0) : rng_logu(r, -12, -4)) *
                                (tiny ? 0x1p-40 : 1.0));
    if (regime == QV_REGIME_ZERO_GROUP) {
        /* Zero scales for a quarter of the scale rows (whole groups), and one
         * activation row and one 16-wide K stripe of zeros. */
        int64_t rows = qv_problem_scale_rows(p), cols = qv_problem_scale_cols(p);
        for (int64_t gi = 0; gi < rows; gi++)
            if (rows == 1 ? 0 : rng_int(r, 0, 3) == 0)
                for (int64_t j = 0; j < cols; j++) set_scale(p, gi * cols + j, 0.0);
        if (rows == 1)
            for (int64_t j = 0; j < cols; j += 2) set_scale(p, j, 0.0);
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
    if (regime == QV_REGIME_NEAR_MAX) {
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
    for (int x = -448; x <= 448 && nv < cap; x++) {
        double val = x;
        int ok;
        switch (v->wfmt) {
        case QV_FMT_U4:
        case QV_FMT_I4: ok = x >= -8 && x <= 7; break;
        case QV_FMT_U8:
        case QV_FMT_I8: ok = x >= -128 && x <= 127; break;
        default: ok = representable(v->wfmt, val); break;
        }
        if (!ok) continue;
        double eff = v->arith.dequant == QV_DQ_INT8_RNE ? rint(val * s_group) : val * wmul;
        if (v->arith.dequant == QV_DQ_MUL_RN && !representable(v->afmt, eff)) continue;
        vals[nv++] = eff;
    }
    return nv;
}

/* The code value that dequantizes (unit scales) to accumulator value eff. */
static double code_for(const qv_variant *v, double s_group, double eff)
{
    if (v->arith.dequant == QV_DQ_INT8_RNE) return eff / s_group;
    if (v->arith.w_mul > 1) return eff / v->arith.w_mul;
    return eff;
}

static int act_ok(const qv_variant *v, double a) { return representable(v->afmt, a) && representable(v->afmt, -a); }

static qv_status fill_fp8_promote(qv_problem *p)
{
    unit_scales(p);
    /* Output scale 2^-5 keeps (65536 + K) / 32 inside fp16. */
    for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = 0x1p-5f;
    /* One product 2^16 alone in the first 128 K (its other products are 0), then
     * ones: every 128-K partial is exact in a 14-bit accumulator, so promotion
     * every 128 with any accumulator at least that wide gives the exact sum
     * 65536 + K - 128, while no promotion keeps 65536 (the ones vanish next to
     * 2^16). A kernel wider than declared is not flagged (DESIGN §3's sequence,
     * ones right after 2^16, loses 127 in a 14-bit accumulator and none in a
     * 24-bit one). */
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t kk = 0; kk < p->k; kk++) set_a(p, i, kk, kk == 0 ? 256.0 : kk < 128 ? 0.0 : 1.0);
    for (int64_t kk = 0; kk < p->k; kk++)
        for (int64_t j = 0; j < p->n; j++) set_w(p, kk, j, kk == 0 ? 256.0 : 1.0);
    return QV_OK;
}

static qv_status fill_splitk(qv_problem *p, rng *r)
{
    unit_scales(p);
    int64_t k = p->k;
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < p->n; j++) set_w(p, kk, j, rand_wval(r, p->v->wfmt));
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t kk = 0; kk < k; kk++) set_a(p, i, kk, 0.0);
    /* (-256)(-8) + 1*1 + 256*(-8) = 2049 - 2048 = 1: exact in fp32, 0 through fp16. */
    for (int64_t i = 0; i < p->m; i++) {
        set_a(p, i, 0, -256.0);
        set_a(p, i, 1, 1.0);
        set_a(p, i, k - 1, 256.0);
    }
    for (int64_t j = 0; j < p->n; j++) {
        set_w(p, 0, j, -8.0);
        set_w(p, 1, j, 1.0);
        set_w(p, k - 1, j, -8.0);
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
        for (int64_t j = 0; j < p->n; j++) p->scales2[j] = (float)s;
    else
        for (int64_t i = 0; i < qv_problem_ascale_count(p); i++) p->a_scale[i] = (float)s;
}

static int has_mul_step(const qv_variant *v)
{
    return has_step(v, QV_EP_MUL_WSCALE) || has_step(v, QV_EP_MUL_WSCALE2) || has_step(v, QV_EP_MUL_ASCALE);
}

static double sgroup_for(const qv_variant *v) { return v->arith.dequant == QV_DQ_INT8_RNE ? 16.0 : 1.0; }

static void set_group_scales(qv_problem *p, double s)
{
    if (p->v->arith.dequant == QV_DQ_INT8_RNE)
        for (int64_t i = 0; i < n_scales(p); i++) set_scale(p, i, s);
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

static qv_status fill_rne_tie(qv_problem *p, rng *r)
{
    const qv_variant *v = p->v;
    unit_scales(p);
    double sg = sgroup_for(v);
    set_group_scales(p, sg);
    double vals[1024];
    int nv = weight_values(v, sg, vals, 1024);
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
    if (!(has1 && has3 && hasm1 && hasm3) || (u != 1 && !has_mul_step(v)))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: no small weights for the RNE-tie witness", v->name);
    double big = v->ofmt == QV_FMT_F16 ? 2048 : 256; /* 2^(fraction bits + 1): ulp 2 above */
    double wbig = 0, abig = 0;
    int c = 0;
    for (int cc = 1; cc <= 32 && !c; cc *= 2)
        for (int t = 0; t < nv && !c; t++) {
            double tgt = big * u / cc;
            if (vals[t] == 0 || fmod(tgt, vals[t]) != 0) continue;
            double a = tgt / vals[t];
            if (act_ok(v, a)) {
                c = cc;
                wbig = vals[t];
                abig = a;
            }
        }
    if (!c || p->k < 2 * c + 1)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: K=%lld is too small for the RNE-tie witness", v->name,
                       (long long)p->k);
    if (u != 1) set_epilogue_factor(p, 1.0 / u);
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t kk = 0; kk < p->k; kk++)
            set_a(p, i, kk, kk < c ? abig : kk < 2 * c ? -abig : kk == 2 * c ? 1.0 : 0.0);
    for (int64_t j = 0; j < p->n; j++) {
        int neg = (int)rng_int(r, 0, 1);
        double small = rng_int(r, 0, 1) ? 3 * u : u;
        for (int64_t kk = 0; kk < p->k; kk++) {
            double eff = 0;
            if (kk < c) eff = neg ? 0 : wbig;
            else if (kk < 2 * c) eff = neg ? wbig : 0;
            else if (kk == 2 * c) eff = neg ? -small : small;
            set_w(p, kk, j, code_for(v, sg, eff));
        }
    }
    return QV_OK;
}

/* ---- dispatch ------------------------------------------------------------- */

int ref_probe_applies(const qv_variant *v, qv_probe_kind kind, int64_t m, int64_t n, int64_t k)
{
    switch (kind) {
    case QV_PROBE_EXACT: return v->arith.accum == QV_ACC_INT32 || k <= 16384;
    case QV_PROBE_ONEHOT:
    case QV_PROBE_RANDOM: return 1;
    case QV_PROBE_WITNESS_FP8_PROMOTE: return v->arith.accum == QV_ACC_TC_FP8 && k >= 2;
    case QV_PROBE_WITNESS_SPLITK: return v->arith.accum != QV_ACC_INT32 && k >= 3;
    case QV_PROBE_WITNESS_SCALE_OVERFLOW:
        return v->ofmt == QV_FMT_F16 && has_mul_step(v) && v->scale_layout != QV_SCALE_BLOCK && k >= 8;
    case QV_PROBE_WITNESS_RNE_TIE:
        /* Up to 4 equal products per sign plus one small one (QQQ's 16x weights). */
        return (v->ofmt == QV_FMT_F16 || v->ofmt == QV_FMT_BF16) && k >= 9;
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
    default: return qv_fail(QV_ERR_USAGE, "unknown probe kind %d", (int)kind);
    }
}
