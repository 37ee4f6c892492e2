/* operands.c: decoding a problem into accumulator-level operands (ref_operands.h)
 * and the rounding helpers and accumulation constants the reference shares. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/spec.h"
#include "ref_operands.h"
#include "ref_parallel.h"

/* 2^e for -1022 <= e <= 1023, from its bits. */
static inline double pow2_bits(int e)
{
    uint64_t b = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

double ref_round_fmt(double x, int man_bits, int emin, double maxf, int sat)
{
    if (!isfinite(x) || x == 0.0) return x;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int ef = (int)((bits >> 52) & 0x7FF);
    int e = ef ? ef - 1023 : ilogb(x); /* ilogb from the exponent field of a normal double */
#ifdef QV_MUTANT_orc_round_no_subnormal
    /* Oracle mutant: no subnormal range: tiny values keep man_bits bits. */
    (void)emin;
#else
    if (e < emin) e = emin; /* subnormals share the quantum of the smallest normal binade */
#endif
    int qe = e - man_bits;
    double r;
    if (qe > -1022 && qe < 1022 && man_bits <= 50) {
        /* x 2^-qe is exact (a power-of-two scaling that stays normal) and below
         * 2^(man_bits + 1) <= 2^51 in magnitude, where adding and subtracting
         * 1.5 2^52 rounds it to nearest-even (-ffp-contract=off keeps both
         * operations); the result keeps t's sign, as rint's does. */
        double t = x * pow2_bits(-qe);
#ifdef QV_MUTANT_orc_round_ties_away
        /* Oracle mutant: round() (ties away from zero) where RNE is declared. */
        double i = round(t);
#else
        const double magic = 0x1.8p52;
        double i = copysign((t + magic) - magic, t);
#endif
        r = i * pow2_bits(qe);
    } else {
        double quantum = ldexp(1.0, qe);
        /* x / quantum is exact (a power-of-two scaling of a double that stays
         * normal) and rint rounds it to nearest-even in the default rounding mode. */
#ifdef QV_MUTANT_orc_round_ties_away
        r = round(x / quantum) * quantum;
#else
        r = rint(x / quantum) * quantum;
#endif
    }
    if (fabs(r) > maxf) return sat ? copysign(maxf, x) : copysign(INFINITY, x);
    return r;
}

double ref_round_to(qv_fmt f, double x, int sat)
{
    switch (f) {
    /* 10 fraction bits, smallest normal 2^-14, max 65504 */
    case QV_FMT_F16: return ref_round_fmt(x, 10, -14, 65504.0, sat);
    /* 7 fraction bits, fp32's exponent range */
    case QV_FMT_BF16: return ref_round_fmt(x, 7, -126, 0x1.FEp127, sat);
    case QV_FMT_F32: return ref_round_fmt(x, 23, -126, FLT_MAX, sat);
    /* e4m3fn: 3 fraction bits, smallest normal 2^-6, max 448, no Inf (overflow is NaN) */
    case QV_FMT_E4M3: {
        double r = ref_round_fmt(x, 3, -6, 448.0, 1);
        return (!sat && isfinite(x) && fabs(x) >= 464.0) ? NAN : r; /* 464 = 448 + half an ulp */
    }
    default: return qv_decode(f, qv_encode(f, x, sat ? QV_SAT_FINITE : QV_SAT_NONE));
    }
}

double ref_alpha(const qv_variant *v, int64_t k)
{
    const qv_arith *ar = &v->arith;
    /* Tensor-core alignment blocks are at least 16 products wide when the row
     * does not say (the fp16/bf16/fp8 mma k dimension is 16 or 32). */
    double b = ar->block_b > 0 ? ar->block_b : 16.0;
    const double u23 = ldexp(1.0, -23), u24 = ldexp(1.0, -24);
    switch (ar->accum) {
#ifdef QV_MUTANT_orc_alpha_i32_nonzero
    /* Oracle mutant: the exact int32 accumulator bounded as an fp32 sum. */
    case QV_ACC_INT32: return (double)k * u24;
#else
    case QV_ACC_INT32: return 0.0;
#endif
#ifdef QV_MUTANT_orc_alpha_tc_f32_x8
    /* Oracle mutant: the fp16/bf16 tensor-core constant 8 times the declared one. */
    case QV_ACC_TC_F32: return 8 * 2.0 * (1.0 + 1.0 / b) * (double)k * u23;
#elif defined QV_MUTANT_orc_alpha_tc_block_ignored
    /* Oracle mutant: the alignment block taken as one product wide: 2 (1 + 1). */
    case QV_ACC_TC_F32: return 2.0 * 2.0 * (double)k * u23;
#else
    case QV_ACC_TC_F32: return 2.0 * (1.0 + 1.0 / b) * (double)k * u23;
#endif
    case QV_ACC_TC_FP8: {
        int64_t nc = ar->promote_nc > 0 ? ar->promote_nc : k; /* 0: never promoted */
        int bits = ar->acc_bits > 0 ? ar->acc_bits : 14;
        /* A bits-wide significand loses up to 2^(1-bits) relative per addition. */
        double uacc = ldexp(1.0, 1 - bits);
        return 2.0 * (1.0 + 1.0 / b) * (double)nc * uacc + (double)((k + nc - 1) / nc) * u23;
    }
    case QV_ACC_FMA_F32: {
#ifdef QV_MUTANT_orc_alpha_fma32_as_tc
        /* Oracle mutant: the fma loop given the tensor core's constant. */
        return 2.0 * (1.0 + 1.0 / b) * (double)k * u23;
#endif
        /* gamma_K = K u / (1 - K u), the classical recursive-summation constant. */
#ifdef QV_MUTANT_orc_alpha_fma32_u23
        /* Oracle mutant: the unit roundoff of a truncating sum (2^-23) in gamma_K. */
        double ku = (double)k * u23;
#else
        double ku = (double)k * u24;
#endif
        return ku < 0.5 ? ku / (1.0 - ku) : INFINITY;
    }
    }
    return INFINITY;
}

int ref_acc_pow2(const qv_problem *p)
{
    const qv_variant *v = p->v;
    if (v->layout != QV_LAYOUT_MARLIN_FP4_NV || v->sfmt != QV_FMT_UE4M3 || !p->scales) return 0;
    /* 14 and 126: 2^(e - 1) - 2^(2 - 1) for the 5 and 8 exponent bits of f16
     * and bf16, the bias difference the e2m1 bit move leaves out */
    int bias = v->afmt == QV_FMT_BF16 ? 126 : 14;
    int s_pow2 = 7;
    if (v->afmt == QV_FMT_BF16) {
        const uint8_t *sc = p->scales;
        double lo = INFINITY;
        for (int64_t i = 0; i < qv_problem_scale_rows(p) * qv_problem_scale_cols(p); i++) {
            double x = qv_decode(QV_FMT_UE4M3, sc[i]);
            if (x > 0 && x < lo) lo = x;
        }
        while (isfinite(lo) && ldexp(lo, s_pow2) < 2.0) s_pow2++;
    }
    return s_pow2 - bias;
}

/* 1 when one of x (n) is a NaN or an Inf: its exponent field all ones; a
 * loop without an early exit, over blocks, so it runs at memory speed. */
static int any_nonfinite(const double *x, int64_t n)
{
    const uint64_t ex = UINT64_C(0x7FF) << 52;
    for (int64_t i0 = 0; i0 < n; i0 += 4096) {
        int64_t i1 = i0 + 4096 < n ? i0 + 4096 : n;
        uint64_t bad = 0;
        for (int64_t i = i0; i < i1; i++) {
            uint64_t b;
            memcpy(&b, &x[i], sizeof b);
            bad |= (b & ex) == ex;
        }
        if (bad) return 1;
    }
    return 0;
}

/* Value of element i of buf, a scale buffer of f codes (F32 stored as float). */
static double scale_value(qv_fmt f, const void *buf, int64_t i)
{
    if (f == QV_FMT_F32) return ((const float *)buf)[i];
    if (f == QV_FMT_F16) return qv_f16_to_f32(((const uint16_t *)buf)[i]);
    if (f == QV_FMT_BF16) return qv_bf16_to_f32(((const uint16_t *)buf)[i]);
    return qv_decode(f, ((const uint8_t *)buf)[i]);
}

/* tab: (256) the values of every byte-stored code of format f. */
static void byte_table(qv_fmt f, double tab[256])
{
    for (int c = 0; c < 256; c++) {
        if (f == QV_FMT_I8 || f == QV_FMT_I4)
            tab[c] = (double)(int8_t)c; /* signed codes are stored sign-extended in a byte */
#ifdef QV_MUTANT_orc_operands_i4_unsigned
        /* Oracle mutant: int4 codes read as unsigned bytes (-1 becomes 255). */
        if (f == QV_FMT_I4) tab[c] = c;
#endif
        else if (f == QV_FMT_U4)
            tab[c] = c < 16 ? c - 8.0 : NAN; /* codes above 15 are invalid */
        else if (f == QV_FMT_UINT4 || f == QV_FMT_E2M1)
            tab[c] = c < 16 ? qv_decode(f, (uint32_t)c) : NAN;
        else
            tab[c] = qv_decode(f, (uint32_t)c);
    }
}

/* The code of a format whose integer zero point replaces its bias, as the
 * integer the zero point is subtracted from: unsigned for u4b8/u8b128/u4/u8,
 * signed for i4/i8 (stored sign-extended in a byte). */
static double zp_code(qv_fmt f, uint8_t byte)
{
    return (f == QV_FMT_I4 || f == QV_FMT_I8) ? (double)(int8_t)byte : (double)byte;
}

double ref_round_sum(qv_fmt f, double x, double y, int sat)
{
    /* TwoSum: hi + lo == x + y exactly (no overflow for the finite values here). */
    double hi = x + y;
    if (!isfinite(hi) || !isfinite(x) || !isfinite(y)) return ref_round_to(f, hi, sat);
    double bp = hi - x, lo = (x - (hi - bp)) + (y - bp);
    if (lo != 0.0) {
        /* Round to odd at 53 bits: truncate x + y toward zero, then set the
         * last bit; RN to any format of at most 51 significand bits is then
         * the RN of the exact sum. */
        double t = ((lo > 0) == (hi > 0)) ? hi : nextafter(hi, 0.0);
        uint64_t b;
        memcpy(&b, &t, sizeof b);
        b |= 1u;
        memcpy(&hi, &b, sizeof hi);
    }
    return ref_round_to(f, hi, sat);
}

static void decode_acts(const qv_problem *p, int fold_block, ref_operands *o)
{
    const qv_variant *v = p->v;
    int64_t mk = p->m * p->k;
    if (v->afmt == QV_FMT_F16 || v->afmt == QV_FMT_BF16) {
        const uint16_t *a = p->a;
        for (int64_t i = 0; i < mk; i++)
            o->a[i] = v->afmt == QV_FMT_F16 ? qv_f16_to_f32(a[i]) : qv_bf16_to_f32(a[i]);
    } else {
        double tab[256];
        byte_table(v->afmt, tab);
        const uint8_t *a = p->a;
        for (int64_t i = 0; i < mk; i++) o->a[i] = tab[a[i]];
    }
#ifdef QV_MUTANT_orc_operands_azp_ignored
    /* Oracle mutant: the activation zero point never subtracted. */
    if (0)
#else
    if (v->azp != QV_AZP_NONE)
#endif
        for (int64_t i = 0; i < p->m; i++) {
            double z = p->azp[v->azp == QV_AZP_TOKEN ? i : 0];
            for (int64_t kk = 0; kk < p->k; kk++) o->a[i * p->k + kk] -= z;
        }
    if (fold_block && v->act_scale == QV_ASCALE_TOKEN_BLOCK) {
        /* one activation scale per 128-wide K group, MN-major: (k/128, m) */
        for (int64_t i = 0; i < p->m; i++)
#ifdef QV_MUTANT_orc_operands_ascale_token_major
            /* Oracle mutant: the (k/128, m) activation scales read token-major. */
            for (int64_t kk = 0; kk < p->k; kk++) o->a[i * p->k + kk] *= p->a_scale[i * ((p->k + 127) / 128) + kk / 128];
#else
            for (int64_t kk = 0; kk < p->k; kk++) o->a[i * p->k + kk] *= p->a_scale[(kk / 128) * p->m + i];
#endif
    }
}

static int64_t group_row(const qv_problem *p, int64_t kk)
{
#ifdef QV_MUTANT_cpu_dequant_group_shift
    /* Mutant (class 18): the group of row kk taken from row kk + 1, so the last
     * row of every group reads the next group's scale (the truth shares this
     * decoding; only ref_operands_check sees it). */
    if (!p->g_idx) return (kk + 1) / p->g % (p->k / p->g);
#endif
    return p->g_idx ? p->g_idx[kk] : kk / p->g;
}

/* Index into the scales of the entry that covers w[kk][j]. */
static int64_t scale_index(const qv_problem *p, int64_t kk, int64_t j)
{
    const qv_variant *v = p->v;
    qv_scale_layout l = v->scale_layout;
    int64_t grp = (l == QV_SCALE_GROUP || l == QV_SCALE_GROUP_CHANNEL) ? group_row(p, kk) : 0;
    return qv_gran_index(l, v->block_k, v->block_n, p->n, kk, j, grp);
}

/* Index into the zero points of the entry that covers w[kk][j] (grouped zero
 * points follow g_idx like the scales). */
static int64_t zero_index(const qv_problem *p, int64_t kk, int64_t j)
{
    const qv_variant *v = p->v;
    int64_t grp = v->zp_layout == QV_SCALE_GROUP ? (p->g_idx ? p->g_idx[kk] : kk / v->zp_g) : 0;
    return qv_gran_index(v->zp_layout, v->zp_bk, v->zp_bn, p->n, kk, j, grp);
}

/* The dequantization applies the first-level scale (rather than a partial
 * sum or the epilogue). */
static int scale_in_dequant(const qv_variant *v)
{
    qv_dequant d = v->arith.dequant;
    return v->scale_layout != QV_SCALE_NONE &&
           (d == QV_DQ_MUL_RN || d == QV_DQ_MUL_RN2 || d == QV_DQ_INT8_RNE || d == QV_DQ_F32);
}

/* The factor the dequantization multiplies (value(q) - z) by, from the
 * first-level scale s of a weight in column j: s, or with dq=f32 the fp32
 * product RN_f32(s * s2[j]) (s2 = 1 without a second-level scale). s * s2
 * is exact in a double: two values of at most 24 significant bits, within
 * 2^+-300. */
static double dq_factor(const qv_problem *p, double s, int64_t j)
{
    if (p->v->arith.dequant != QV_DQ_F32) return s;
#ifdef QV_MUTANT_orc_operands_f32_scale_unrounded
    /* Oracle mutant: the scale product s * s2 kept exact, not rounded to fp32. */
    return s * qv_problem_scale2(p, j);
#else
    return ref_round_to(QV_FMT_F32, s * qv_problem_scale2(p, j), 0);
#endif
}

/* The dequantized weight of an exact product x = (value(q) - z) * factor
 * under dq=rn (one rounding to the activation format) or dq=f32 (to fp32,
 * then to the activation format); overflow gives Inf, as the multiply does. */
static double round_product(const qv_variant *v, double x)
{
    if (v->arith.dequant == QV_DQ_F32) x = ref_round_to(QV_FMT_F32, x, 0);
    return ref_round_to(v->afmt, x, 0);
}

typedef struct w4_lookup {
    const qv_problem *p;
    const double *dq; /* (k/g, n, 16) */
    double *w;        /* (k, n) */
    int *bad;         /* (blocks) 1 where a block met a code above 15 */
} w4_lookup;

/* Rows of W per block of the table lookup (ref_parallel_for). */
#define W4_ROWS 64

static void w4_lookup_rows(void *ctx, int64_t b)
{
    const w4_lookup *wl = ctx;
    const qv_problem *p = wl->p;
    int64_t n = p->n, k1 = (b + 1) * W4_ROWS < p->k ? (b + 1) * W4_ROWS : p->k;
    const uint8_t *qb = p->q;
    int bad = 0;
    for (int64_t kk = b * W4_ROWS; kk < k1; kk++) {
        const double *row = wl->dq + group_row(p, kk) * n * 16;
        const uint8_t *qr = qb + kk * n;
        double *wr = wl->w + kk * n;
        for (int64_t j = 0; j < n; j++) {
            bad |= qr[j] > 15;
            wr[j] = qr[j] < 16 ? row[j * 16 + qr[j]] : NAN; /* > 15: invalid code */
        }
    }
    wl->bad[b] = bad;
}

/* u4 codes with grouped scales (dq=rn or f32): the 16 dequantized values of
 * every (group, column) pair, computed once (k/g * n * 16 roundings instead of
 * k * n), then looked up in blocks of W4_ROWS rows on `jobs` threads. s: (k/g,
 * n) scales as doubles; tab: (256) code values; fills o->w. Returns 0 (nothing done)
 * when the table cannot be allocated; *finite says whether every value
 * written is finite (every table entry is, and no code passes 15). */
static int decode_w4_table(const qv_problem *p, const double *s, const double *tab, int jobs, ref_operands *o,
                           int *finite)
{
    const qv_variant *v = p->v;
    int64_t n = p->n, k = p->k, ng = k / p->g;
    double *dq = malloc(sizeof(double) * 16 * (size_t)(ng * n));
    int64_t nblk = (k + W4_ROWS - 1) / W4_ROWS;
    int *bad = malloc(sizeof(int) * (size_t)nblk);
    if (!dq || !bad) {
        free(dq);
        free(bad);
        return 0;
    }
    int fin = 1;
    for (int64_t gi = 0; gi < ng; gi++)
        for (int64_t j = 0; j < n; j++) {
            double sc = dq_factor(p, s[gi * n + j], j);
            double z = v->zero_point ? (double)p->zeros[gi * n + j] : 0.0;
            double *d = dq + (gi * n + j) * 16;
            for (int c = 0; c < 16; c++) {
                double val = v->zero_point ? (double)c - z : tab[c];
                d[c] = round_product(v, val * sc);
                fin &= isfinite(d[c]) != 0;
            }
        }
    w4_lookup wl = {.p = p, .dq = dq, .w = o->w, .bad = bad};
    ref_parallel_for(nblk, jobs, w4_lookup_rows, &wl);
    for (int64_t b = 0; b < nblk; b++) fin &= !bad[b];
    free(dq);
    free(bad);
    *finite = fin;
    return 1;
}

/* s: the scales as doubles, (rows, cols) per the row's layout; fills o->w (k, n).
 * Returns 1 when every value written is known to be finite, 0 when unknown. */
static int decode_weights(const qv_problem *p, const double *s, int fold_block, int jobs, ref_operands *o)
{
    const qv_variant *v = p->v;
    const qv_arith *ar = &v->arith;
    int64_t n = p->n, k = p->k;
    double tab[256];
    int wide = v->wfmt == QV_FMT_F16 || v->wfmt == QV_FMT_BF16;
    if (!wide) byte_table(v->wfmt, tab);
    const uint8_t *qb = p->q;
    const uint16_t *qh = p->q;
    double wmul = ar->w_mul > 1 ? ar->w_mul : 1.0;
    int afmt_sat = 0; /* the dequant multiply is an fp16/bf16 multiply: overflow gives Inf */
    int zp_grouped = v->zero_point == QV_ZP_NONE ||
                     (v->zero_point == QV_ZP_INT && v->zp_layout == QV_SCALE_GROUP && v->zp_g == p->g);
    if ((ar->dequant == QV_DQ_MUL_RN || ar->dequant == QV_DQ_F32) &&
        (v->wfmt == QV_FMT_U4 || v->wfmt == QV_FMT_UINT4) && v->scale_layout == QV_SCALE_GROUP && zp_grouped) {
        int finite;
        if (decode_w4_table(p, s, tab, jobs, o, &finite)) return finite;
    }
    int in_dq = scale_in_dequant(v);
    int fold = fold_block && o->seg > 0 && !in_dq && v->scale_layout != QV_SCALE_NONE &&
               v->scale_layout != QV_SCALE_TENSOR && v->scale_layout != QV_SCALE_CHANNEL;
    for (int64_t kk = 0; kk < k; kk++) {
        for (int64_t j = 0; j < n; j++) {
            int64_t i = kk * n + j;
            double val;
            if (wide)
                val = v->wfmt == QV_FMT_F16 ? qv_f16_to_f32(qh[i]) : qv_bf16_to_f32(qh[i]);
            else if (v->zero_point == QV_ZP_INT)
                val = zp_code(v->wfmt, qb[i]) - zp_code(v->wfmt, p->zeros[zero_index(p, kk, j)]);
            else
                val = tab[qb[i]];
            double sc = in_dq ? dq_factor(p, s[scale_index(p, kk, j)], j) : 1.0;
            double z = v->zero_point == QV_ZP_FLOAT ? (double)p->zeros_f[zero_index(p, kk, j)] : 0.0;
            double w;
            switch (ar->dequant) {
            case QV_DQ_MUL_RN:
                /* (q - z) * s is exact in a double (<= 9 + 24 bits); with a float
                 * zero point the fused q * s + z, then one rounding. */
#ifdef QV_MUTANT_orc_operands_float_zero_two_roundings
                /* Oracle mutant: the product rounded before the float zero point
                 * is added (two roundings where one fused rounding is declared). */
                w = v->zero_point == QV_ZP_FLOAT ? ref_round_sum(v->afmt, ref_round_to(v->afmt, val * sc, afmt_sat), z, afmt_sat)
                                                 : ref_round_to(v->afmt, val * sc, afmt_sat);
#else
                w = v->zero_point == QV_ZP_FLOAT ? ref_round_sum(v->afmt, val * sc, z, afmt_sat)
                                                 : ref_round_to(v->afmt, val * sc, afmt_sat);
#endif
                break;
            case QV_DQ_MUL_RN2:
                /* the product rounded to the activation format, then the sum */
                w = ref_round_sum(v->afmt, ref_round_to(v->afmt, val * sc, afmt_sat), z, afmt_sat);
                break;
            case QV_DQ_F32:
                /* (q - z) times the fp32 factor is exact in a double (at most 11 + 24
                 * bits); rounded to fp32, then to the activation format */
                w = round_product(v, val * sc);
                break;
            case QV_DQ_INT8_RNE: {
                /* One fp16 FMA whose rounding lands on integers: rne of the exact
                 * product, then the int8 range. */
                double r = rint(val * sc);
                w = r > 127.0 ? 127.0 : r < -128.0 ? -128.0 : r;
                break;
            }
#ifdef QV_MUTANT_orc_operands_wmul_ignored
            /* Oracle mutant: the kernel-side code multiplier (QQQ's 16) left out. */
            case QV_DQ_EXACT: (void)wmul; w = val; break;
#else
            case QV_DQ_EXACT: w = val * wmul; break;
#endif
            default: w = val; break;
            }
            if (fold) w *= s[scale_index(p, kk, j)]; /* segment scales: folded for the truth */
            o->w[i] = w;
        }
    }
    return 0;
}

double ref_ep_factor(const ref_operands *o, qv_ep_step st, int64_t i, int64_t j)
{
    switch (st) {
    case QV_EP_MUL_WSCALE: return o->col_s1[j];
    case QV_EP_MUL_WSCALE2: return o->col_s2[j];
    case QV_EP_MUL_ASCALE: return o->row_s[i];
    default: return 1.0;
    }
}

void ref_segment_scales(const qv_problem *p, int64_t i, int64_t j, int64_t sg, double *sa, double *sw)
{
    const qv_variant *v = p->v;
    int seg = qv_spec_segment(v);
    int64_t kk = sg * seg;
    *sa = v->act_scale == QV_ASCALE_TOKEN_BLOCK ? (double)p->a_scale[(kk / 128) * p->m + i] : 1.0;
    *sw = 1.0;
    if (!scale_in_dequant(v) && v->scale_layout != QV_SCALE_NONE && v->scale_layout != QV_SCALE_TENSOR &&
        v->scale_layout != QV_SCALE_CHANNEL)
        *sw = scale_value(v->sfmt, p->scales, scale_index(p, kk, j));
}

/* The (k, n) weights are a case's one large allocation (a 28672 x 8192
 * layer is 1.9 GB of doubles), and fresh pages cost the kernel a clearing on
 * first touch, for every case of a campaign. A thread that asked for it
 * (ref_keep_weight_buffer: the campaign's workers) keeps the largest buffer
 * it handed back, up to its cap, for its next case; the thread's exit frees
 * it. Every byte of w is written by the decoding before it is read, so a
 * reused buffer's old contents never show. Other threads keep nothing. */
static _Thread_local size_t keep_cap;

void ref_keep_weight_buffer(size_t max_bytes) { keep_cap = max_bytes; }

typedef struct kept_buf {
    void *p;
    size_t bytes;
} kept_buf;

static pthread_key_t keep_key;
static pthread_once_t keep_once = PTHREAD_ONCE_INIT;
static int keep_ok;

static void keep_release(void *x)
{
    kept_buf *k = x;
    free(k->p);
    free(k);
}

static void keep_init(void) { keep_ok = pthread_key_create(&keep_key, keep_release) == 0; }

static kept_buf *kept(void)
{
    pthread_once(&keep_once, keep_init);
    if (!keep_ok) return NULL;
    kept_buf *k = pthread_getspecific(keep_key);
    if (!k && (k = calloc(1, sizeof *k)) && pthread_setspecific(keep_key, k) != 0) {
        free(k);
        k = NULL;
    }
    return k;
}

/* A buffer of at least `bytes`; *got: the bytes it holds. */
static void *wbuf_take(size_t bytes, size_t *got)
{
    kept_buf *k = keep_cap ? kept() : NULL;
    if (k && k->p && k->bytes >= bytes) {
        void *p = k->p;
        *got = k->bytes;
        k->p = NULL;
        k->bytes = 0;
        return p;
    }
    *got = bytes;
    return malloc(bytes ? bytes : 1);
}

static void wbuf_give(void *p, size_t bytes)
{
    kept_buf *k = p && bytes <= keep_cap ? kept() : NULL;
    if (!k || bytes <= k->bytes) {
        free(p);
        return;
    }
    free(k->p);
    k->p = p;
    k->bytes = bytes;
}

qv_status ref_operands_create(const qv_problem *p, int fold_block, ref_operands *o)
{
    return ref_operands_create_jobs(p, fold_block, 1, o);
}

qv_status ref_operands_create_jobs(const qv_problem *p, int fold_block, int jobs, ref_operands *o)
{
    const qv_variant *v = p->v;
    memset(o, 0, sizeof *o);
    o->m = p->m;
    o->n = p->n;
    o->k = p->k;
    o->seg = qv_spec_segment(v);
    o->folded = fold_block && o->seg > 0;
    o->a = malloc(sizeof(double) * (size_t)(p->m * p->k));
    o->w = wbuf_take(sizeof(double) * (size_t)(p->k * p->n), &o->w_bytes);
    o->col_s1 = malloc(sizeof(double) * (size_t)p->n);
    o->col_s2 = malloc(sizeof(double) * (size_t)p->n);
    o->row_s = malloc(sizeof(double) * (size_t)p->m);
    o->bias = malloc(sizeof(double) * (size_t)p->n);
    int64_t ns = qv_problem_scale_rows(p) * qv_problem_scale_cols(p);
    double *s = malloc(sizeof(double) * (size_t)(ns > 0 ? ns : 1));
    if (!o->a || !o->w || !o->col_s1 || !o->col_s2 || !o->row_s || !o->bias || !s) {
        free(s);
        ref_operands_destroy(o);
        return qv_fail(QV_ERR_NOMEM, "%s: out of memory decoding m=%lld n=%lld k=%lld", v->name,
                       (long long)p->m, (long long)p->n, (long long)p->k);
    }
    for (int64_t i = 0; i < ns; i++) s[i] = scale_value(v->sfmt, p->scales, i);
    if (ns <= 0) s[0] = 1.0;
    decode_acts(p, fold_block, o);
    int w_finite = decode_weights(p, s, fold_block, jobs, o);
    for (int64_t j = 0; j < p->n; j++) {
        o->col_s1[j] = o->col_s2[j] = 1.0;
        o->bias[j] = 0.0;
    }
    for (int64_t i = 0; i < p->m; i++) o->row_s[i] = 1.0;
    for (int st = 0; st < QV_EP_MAX && v->arith.epilogue[st] != QV_EP_END; st++) {
        switch (v->arith.epilogue[st]) {
        case QV_EP_SUB_AZP: break; /* exact in int32; folded into the activations */
        case QV_EP_TO_F32: o->ep_ops++; break;
        case QV_EP_MUL_WSCALE:
            o->ep_ops++;
            for (int64_t j = 0; j < p->n; j++)
                o->col_s1[j] = v->scale_layout == QV_SCALE_TENSOR ? s[0] : s[j];
            break;
        case QV_EP_MUL_WSCALE2:
#ifdef QV_MUTANT_orc_ep_ops_ws2_uncounted
            /* Oracle mutant: the second-level scale's fp32 multiply left out of E. */
#else
            o->ep_ops++;
#endif
#ifdef QV_MUTANT_orc_operands_scale2_ignored
            /* Oracle mutant: the second-level scales read as 1 (left out of y). */
#else
            for (int64_t j = 0; j < p->n; j++) o->col_s2[j] = qv_problem_scale2(p, j);
#endif
            break;
        case QV_EP_MUL_ASCALE:
            o->ep_ops++;
            for (int64_t i = 0; i < p->m; i++)
                o->row_s[i] = p->a_scale[v->act_scale == QV_ASCALE_TOKEN ? i : 0];
            break;
        case QV_EP_ADD_BIAS:
            o->ep_ops++;
            for (int64_t j = 0; j < p->n; j++) o->bias[j] = p->bias[j];
            break;
        default: break;
        }
    }
    int64_t mk = p->m * p->k, kn = p->k * p->n;
    if (o->seg && !o->folded) {
        /* the segment scales are operands too: a non-finite one makes the sums so */
        for (int64_t i = 0; i < ns && !o->nonfinite; i++) o->nonfinite |= !isfinite(s[i]);
        for (int64_t i = 0; v->act_scale == QV_ASCALE_TOKEN_BLOCK && i < qv_problem_ascale_count(p); i++)
            o->nonfinite |= !isfinite(p->a_scale[i]);
    }
    free(s);
#ifdef QV_MUTANT_orc_ep_ops_doubled
    /* Oracle mutant: every epilogue rounding counted twice (E's epilogue part doubled). */
    o->ep_ops *= 2;
#endif
    o->nonfinite |= any_nonfinite(o->a, mk) || (!w_finite && any_nonfinite(o->w, kn));
    for (int64_t j = 0; j < p->n && !o->nonfinite; j++)
        o->nonfinite |= !isfinite(o->col_s1[j]) || !isfinite(o->col_s2[j]) || !isfinite(o->bias[j]);
    for (int64_t i = 0; i < p->m && !o->nonfinite; i++) o->nonfinite |= !isfinite(o->row_s[i]);
    return QV_OK;
}

void ref_operands_destroy(ref_operands *o)
{
    free(o->a);
    wbuf_give(o->w, o->w_bytes);
    free(o->col_s1);
    free(o->col_s2);
    free(o->row_s);
    free(o->bias);
    memset(o, 0, sizeof *o);
}
