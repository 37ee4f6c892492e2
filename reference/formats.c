/* formats.c: the element formats of formats.h, decoded exactly and encoded with
 * round-to-nearest-even from the real value, then saturated per qv_sat.
 *
 * Two paths. The generic path works on doubles: every code of every format is a
 * double exactly, and scaling by a power of two is exact, so rounding reduces to
 * rounding a double significand to an integer. The fast fp16/bf16 paths work on
 * bit patterns with integer arithmetic only (no _Float16, no FPU rounding mode),
 * and the tests check both against MPFR. */
#include "qvet/formats.h"

#include "qvet/status.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

/* x * 2^k, exact where the result is a normal double (as ldexp), by one
 * multiplication where 2^k itself is a normal double (the codecs' hot path:
 * ldexp is a library call), else through ldexp. Both round the same way
 * where the result leaves the normal range: one IEEE operation each. */
static inline double scale2(double x, int k)
{
    if (k < -1022 || k > 1023) return ldexp(x, k);
    const uint64_t b = (uint64_t)(k + 1023) << 52;
    double p;
    memcpy(&p, &b, sizeof p);
    return x * p;
}

/* ilogb of a finite nonzero x: from the exponent field where x is normal. */
static inline int ilogb_fast(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    const int ef = (int)(u >> 52 & 0x7ff);
    return ef ? ef - 1023 : ilogb(x);
}

/* How a float format spends its top codes. */
typedef enum fmt_special {
    SPECIAL_NONE = 0, /* every code is finite (e2m1) */
    SPECIAL_IEEE,     /* all-ones exponent: mantissa 0 is Inf, else NaN (f32, f16, bf16, e5m2) */
    SPECIAL_FN,       /* only the all-ones exponent and mantissa is NaN (e4m3fn, ue4m3) */
    SPECIAL_E8M0      /* code 0xFF is NaN, every other code 2^(code-127) */
} fmt_special;

/* Row of the table below: the public description plus what the codecs need. */
typedef struct fmt_row {
    qv_fmt_info info;
    fmt_special special;
    uint32_t nan_code; /* the canonical NaN every NaN input encodes to */
} fmt_row;

static const fmt_row fmt_table[QV_FMT_COUNT] = {
    /* "no such operand" (e.g. a variant without scales): a name for messages */
    [QV_FMT_NONE] = {.info = {.name = "none"}},
    [QV_FMT_F32] = {.info = {.name = "f32", .bits = 32, .exp_bits = 8, .man_bits = 23,
                             .bias = 127, .has_inf = 1, .has_nan = 1, .is_signed = 1,
                             .is_float = 1, .max_finite = FLT_MAX, .min_value = -FLT_MAX},
                    .special = SPECIAL_IEEE, .nan_code = 0x7FC00000u},
    [QV_FMT_F16] = {.info = {.name = "f16", .bits = 16, .exp_bits = 5, .man_bits = 10,
                             .bias = 15, .has_inf = 1, .has_nan = 1, .is_signed = 1,
                             .is_float = 1, .max_finite = 65504.0, .min_value = -65504.0},
                    .special = SPECIAL_IEEE, .nan_code = 0x7E00u},
    /* bf16 max: (2 - 2^-7) * 2^127 */
    [QV_FMT_BF16] = {.info = {.name = "bf16", .bits = 16, .exp_bits = 8, .man_bits = 7,
                              .bias = 127, .has_inf = 1, .has_nan = 1, .is_signed = 1,
                              .is_float = 1, .max_finite = 0x1.FEp127,
                              .min_value = -0x1.FEp127},
                     .special = SPECIAL_IEEE, .nan_code = 0x7FC0u},
    [QV_FMT_E4M3] = {.info = {.name = "e4m3", .bits = 8, .exp_bits = 4, .man_bits = 3,
                              .bias = 7, .has_inf = 0, .has_nan = 1, .is_signed = 1,
                              .is_float = 1, .max_finite = 448.0, .min_value = -448.0},
                     .special = SPECIAL_FN, .nan_code = 0x7Fu},
    [QV_FMT_E5M2] = {.info = {.name = "e5m2", .bits = 8, .exp_bits = 5, .man_bits = 2,
                              .bias = 15, .has_inf = 1, .has_nan = 1, .is_signed = 1,
                              .is_float = 1, .max_finite = 57344.0, .min_value = -57344.0},
                     .special = SPECIAL_IEEE, .nan_code = 0x7Eu},
    [QV_FMT_E2M1] = {.info = {.name = "e2m1", .bits = 4, .exp_bits = 2, .man_bits = 1,
                              .bias = 1, .has_inf = 0, .has_nan = 0, .is_signed = 1,
                              .is_float = 1, .max_finite = 6.0, .min_value = -6.0},
                     .special = SPECIAL_NONE, .nan_code = 0},
    [QV_FMT_E8M0] = {.info = {.name = "e8m0", .bits = 8, .exp_bits = 8, .man_bits = 0,
                              .bias = 127, .has_inf = 0, .has_nan = 1, .is_signed = 0,
                              .is_float = 1, .max_finite = 0x1p127, .min_value = 0x1p-127},
                     .special = SPECIAL_E8M0, .nan_code = 0xFFu},
    [QV_FMT_UE4M3] = {.info = {.name = "ue4m3", .bits = 8, .exp_bits = 4, .man_bits = 3,
                               .bias = 7, .has_inf = 0, .has_nan = 1, .is_signed = 0,
                               .is_float = 1, .max_finite = 448.0, .min_value = 0.0},
                      .special = SPECIAL_FN, .nan_code = 0x7Fu},
    [QV_FMT_I4] = {.info = {.name = "i4", .bits = 4, .is_signed = 1, .max_finite = 7.0,
                            .min_value = -8.0}},
    [QV_FMT_U4] = {.info = {.name = "u4b8", .bits = 4, .is_signed = 1, .max_finite = 7.0,
                            .min_value = -8.0}},
    [QV_FMT_I8] = {.info = {.name = "i8", .bits = 8, .is_signed = 1, .max_finite = 127.0,
                            .min_value = -128.0}},
    [QV_FMT_U8] = {.info = {.name = "u8b128", .bits = 8, .is_signed = 1, .max_finite = 127.0,
                            .min_value = -128.0}},
    [QV_FMT_UINT4] = {.info = {.name = "u4", .bits = 4, .is_signed = 0, .max_finite = 15.0,
                               .min_value = 0.0}},
    [QV_FMT_UINT8] = {.info = {.name = "u8", .bits = 8, .is_signed = 0, .max_finite = 255.0,
                               .min_value = 0.0}},
    [QV_FMT_I32] = {.info = {.name = "i32", .bits = 32, .is_signed = 1,
                             .max_finite = 2147483647.0, .min_value = -2147483648.0}},
};

/* The row of a format that has codes (QV_FMT_NONE has none to decode). */
static const fmt_row *row_of(qv_fmt f)
{
    QV_ASSERT(f > QV_FMT_NONE && f < QV_FMT_COUNT,
              "a qv_fmt outside 1..QV_FMT_COUNT-1 reached a codec in formats.c; check "
              "the caller's format field (QV_FMT_NONE means 'no such operand')");
    return &fmt_table[f];
}

const qv_fmt_info *qv_fmt_get(qv_fmt f)
{
    QV_ASSERT(f >= QV_FMT_NONE && f < QV_FMT_COUNT,
              "qv_fmt_get got a value outside the qv_fmt enum; check the caller's format field");
    return &fmt_table[f].info;
}

int qv_fmt_code_bits(qv_fmt f)
{
    switch (f) {
    case QV_FMT_U4:
    case QV_FMT_UINT4:
    case QV_FMT_I4:
    case QV_FMT_E2M1:
    case QV_FMT_U8:
    case QV_FMT_UINT8:
    case QV_FMT_I8:
    case QV_FMT_E4M3:
    case QV_FMT_E5M2:
    case QV_FMT_F16:
    case QV_FMT_BF16: return qv_fmt_get(f)->bits;
    default: return 0;
    }
}

qv_fmt qv_fmt_from_name(const char *name)
{
    if (name == NULL) return QV_FMT_NONE;
    for (int f = QV_FMT_NONE + 1; f < QV_FMT_COUNT; f++)
        if (strcmp(fmt_table[f].info.name, name) == 0) return (qv_fmt)f;
    return QV_FMT_NONE;
}

/* Bit casts through memcpy: the only aliasing-safe way in C. */
static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static float f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static uint64_t f64_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Rounds an integer significand m, shifted right by s bits (1 <= s <= 63), to
 * nearest with ties to even, branch-free: adding half-1 carries into bit s
 * exactly when the dropped bits exceed half, and adding the kept lowest bit
 * as well carries on an exact half only when that bit is odd. The callers keep
 * m + 2^(s-1) below 2^64 (resp. 2^32). */
static uint64_t shift_rne(uint64_t m, int s)
{
    return (m + ((UINT64_C(1) << (s - 1)) - 1) + ((m >> s) & 1)) >> s;
}

static uint32_t shift_rne32(uint32_t m, int s)
{
    return (m + ((1u << (s - 1)) - 1) + ((m >> s) & 1)) >> s;
}

/* ---- fast fp16 / bf16 paths ------------------------------------------- */

float qv_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
#ifdef QV_MUTANT_orc_f16_nan_as_inf
    /* Oracle mutant: the all-ones exponent read as Inf whatever the mantissa
     * (a decoder that tests the exponent field alone): f16 NaNs become Inf. */
    if (e == 0x1F) m = 0;
#endif
    if (e == 0x1F) /* Inf or NaN: keep the payload in the top mantissa bits */
        return f32_from_bits(sign | 0x7F800000u | (m << 13));
    if (e != 0) /* normal: rebias 15 -> 127, i.e. add 112 to the exponent field */
        return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
#ifdef QV_MUTANT_orc_f16_subnormal_flush
    /* Oracle mutant: f16 subnormals decoded as zero (a flush-to-zero decoder). */
    m = 0;
#endif
    /* zero or subnormal: m * 2^-24, exact in float (m < 2^10) */
    float a = (float)m * 0x1p-24f;
    return f32_from_bits(sign | f32_bits(a));
}

uint16_t qv_f32_to_f16(float x)
{
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7FFFFFFFu;
    if (u > 0x7F800000u) return 0x7E00u; /* NaN -> canonical quiet NaN */
    /* 0x477FF000 is 65520, the midpoint between 65504 and 2^16; it and
     * everything above (Inf included) round to Inf, as 65504 has an odd mantissa */
    if (u >= 0x477FF000u) return sign | 0x7C00u;
    if (u >= 0x38800000u) { /* |x| >= 2^-14: an f16 normal */
        /* rebias 127 -> 15 (subtract 112 << 23), then drop 13 mantissa bits;
         * a carry out of the mantissa correctly bumps the exponent */
        return sign | (uint16_t)shift_rne32(u - (112u << 23), 13);
    }
    uint32_t e = u >> 23;
    if (e < 102) return sign; /* |x| < 2^-25, at most half the smallest subnormal */
    /* |x| = m * 2^(e-150) and the f16 quantum is 2^-24: code = m >> (126-e);
     * e in 102..112 gives shifts 14..24 */
    uint32_t m = (u & 0x7FFFFFu) | 0x800000u;
    return sign | (uint16_t)shift_rne32(m, (int)(126 - e));
}

float qv_bf16_to_f32(uint16_t h)
{
#ifdef QV_MUTANT_orc_bf16_subnormal_flush
    /* Oracle mutant: bf16 subnormals decoded as zero (flush-to-zero). */
    if ((h & 0x7F80u) == 0) h &= 0x8000u;
#endif
#ifdef QV_MUTANT_orc_bf16_nan_as_inf
    /* Oracle mutant: the all-ones exponent read as Inf whatever the mantissa. */
    if ((h & 0x7F80u) == 0x7F80u) h &= 0xFF80u;
#endif
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t qv_f32_to_bf16(float x)
{
    uint32_t u = f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u; /* NaN -> canonical */
    /* bf16 is the top half of f32: round away the low 16 bits. Same exponent
     * range, so subnormals need nothing special, and a carry into the
     * exponent field turns the largest values into Inf exactly as RNE wants. */
    return (uint16_t)shift_rne32(u, 16);
}

uint16_t qv_f64_to_f16(double x)
{
    uint64_t u = f64_bits(x);
    uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
    u &= UINT64_C(0x7FFFFFFFFFFFFFFF);
    if (u > UINT64_C(0x7FF0000000000000)) return 0x7E00u;
    /* 65520 (see qv_f32_to_f16) as a double */
    if (u >= UINT64_C(0x40EFFE0000000000)) return sign | 0x7C00u;
    int e = (int)(u >> 52) - 1023; /* unbiased exponent; -1023 for zero/subnormal */
    if (e >= -14) /* normal: rebias 1023 -> 15, drop 42 of 52 mantissa bits */
        return sign | (uint16_t)shift_rne(u - ((uint64_t)(1023 - 15) << 52), 42);
    if (e < -25) return sign; /* below 2^-25, at most half the smallest subnormal */
    /* |x| = m * 2^(e-52), quantum 2^-24: code = m >> (28-e), shifts 43..53 */
    uint64_t m = (u & UINT64_C(0xFFFFFFFFFFFFF)) | (UINT64_C(1) << 52);
    return sign | (uint16_t)shift_rne(m, 28 - e);
}

uint16_t qv_f64_to_bf16(double x)
{
    uint64_t u = f64_bits(x);
    uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
    u &= UINT64_C(0x7FFFFFFFFFFFFFFF);
    if (u > UINT64_C(0x7FF0000000000000)) return 0x7FC0u;
    /* 0x1.FFp127, the midpoint between the bf16 max 0x1.FEp127 (odd mantissa)
     * and 2^128: it and everything above round to Inf */
    if (u >= UINT64_C(0x47EFF00000000000)) return sign | 0x7F80u;
    int e = (int)(u >> 52) - 1023;
    if (e >= -126) /* normal: rebias 1023 -> 127, drop 45 of 52 mantissa bits */
        return sign | (uint16_t)shift_rne(u - ((uint64_t)(1023 - 127) << 52), 45);
    if (e < -134) return sign; /* below 2^-134, half the smallest subnormal 2^-133 */
    /* quantum 2^-133: code = m * 2^(e-52+133) = m >> (-81-e), shifts 46..53 */
    uint64_t m = (u & UINT64_C(0xFFFFFFFFFFFFF)) | (UINT64_C(1) << 52);
    return sign | (uint16_t)shift_rne(m, -81 - e);
}

/* ---- generic float formats -------------------------------------------- */

/* Unbiased exponent of the lowest binade: 1-bias for IEEE-like formats (code
 * exponent 0 is subnormal), -bias for e8m0 (code 0 is 2^-127, no subnormals). */
static int fmt_emin(const fmt_row *r)
{
    return r->special == SPECIAL_E8M0 ? -r->info.bias : 1 - r->info.bias;
}

static double decode_float(const fmt_row *r, uint32_t code)
{
    const qv_fmt_info *fi = &r->info;
    code &= (fi->bits == 32) ? 0xFFFFFFFFu : ((1u << fi->bits) - 1);
    uint32_t man_mask = (1u << fi->man_bits) - 1;
    uint32_t exp_mask = (1u << fi->exp_bits) - 1;
    uint32_t sign_bit = 1u << (fi->bits - 1);
#ifdef QV_MUTANT_orc_ue4m3_sign_ignored
    /* Oracle mutant: the sign bit of an unsigned scale code ignored, so a
     * code that is no ue4m3 value decodes as its magnitude. */
    code &= ~sign_bit;
#endif
    if (!fi->is_signed && r->special != SPECIAL_E8M0 && (code & sign_bit))
        return NAN; /* ue4m3 codes with the sign bit set are not ue4m3 codes */
    int neg = fi->is_signed && (code & sign_bit);
    uint32_t e = (code >> fi->man_bits) & exp_mask;
    uint32_t m = code & man_mask;
    double v;
    switch (r->special) {
    case SPECIAL_E8M0:
#ifdef QV_MUTANT_orc_e8m0_nan_as_scale
        /* Oracle mutant: e8m0's NaN code 0xFF read as the scale 2^128. */
        return scale2(1.0, (int)code - fi->bias);
#endif
        return code == 0xFFu ? NAN : scale2(1.0, (int)code - fi->bias);
    case SPECIAL_IEEE:
#ifdef QV_MUTANT_orc_e5m2_inf_as_nan
        /* Oracle mutant: every all-ones exponent read as NaN: e5m2's Inf lost. */
        if (e == exp_mask) return NAN;
#endif
        if (e == exp_mask) return m ? NAN : (neg ? -INFINITY : INFINITY);
        break;
    case SPECIAL_FN:
#ifdef QV_MUTANT_orc_fn_nan_as_finite
        /* Oracle mutant: e4m3fn / ue4m3 read as IEEE-like formats without
         * specials: their NaN codes 0x7F and 0xFF decode as +-480. */
        break;
#endif
        if (e == exp_mask && m == man_mask) return NAN;
        break;
    case SPECIAL_NONE: break;
    }
#ifdef QV_MUTANT_orc_fp8_subnormal_flush
    /* Oracle mutant: subnormal codes of the 8- and 4-bit floats read as zero. */
    if (e == 0) m = 0;
#endif
    if (e == 0) /* zero or subnormal: m quanta of 2^(emin - man) */
        v = scale2((double)m, fmt_emin(r) - fi->man_bits);
    else
        v = scale2((double)(m | (1u << fi->man_bits)), (int)e - fi->bias - fi->man_bits);
#ifdef QV_MUTANT_orc_negative_zero_positive
    /* Oracle mutant: the sign of a zero dropped (-0 decodes as +0). */
    if (v == 0) return 0.0;
#endif
    return neg ? -v : v;
}

/* Rounds a >= 0 (finite) to nearest, ties to even, with `man` fraction bits and
 * no exponent below emin (subnormals) but no upper exponent limit. The result
 * is a double exactly: the significand has at most man+1 <= 24 bits. */
static double round_rne(double a, int man, int emin)
{
    if (a == 0) return 0;
    int e = ilogb_fast(a);
    if (e < emin) e = emin;
    /* scaling by a power of two is exact (the result stays below 2^(man+1)) */
    double s = scale2(a, man - e);
    double fl = floor(s);
    double frac = s - fl; /* exact: s and fl share the binade or fl is 0 */
    /* fl < 2^(man+1) <= 2^53: an integer its uint64_t holds exactly */
    if (frac > 0.5 || (frac == 0.5 && ((uint64_t)fl & 1u))) fl += 1;
    return scale2(fl, e - man);
}

/* Code of a representable value v >= 0 (a result of round_rne within range). */
static uint32_t magnitude_code(const fmt_row *r, double v)
{
    const qv_fmt_info *fi = &r->info;
    if (v == 0) return 0;
    int emin = fmt_emin(r);
    int e = ilogb_fast(v);
    if (e < emin) /* subnormal: exponent field 0 */
        return (uint32_t)scale2(v, fi->man_bits - emin);
    uint32_t m = (uint32_t)scale2(v, fi->man_bits - e) - (1u << fi->man_bits);
    return ((uint32_t)(e + fi->bias) << fi->man_bits) | m;
}

static uint32_t encode_float(const fmt_row *r, double x, qv_sat sat)
{
    const qv_fmt_info *fi = &r->info;
    if (isnan(x)) return r->nan_code;
    int neg = signbit(x) != 0;
    double a = fabs(x);
    double v = isinf(a) ? a : round_rne(a, fi->man_bits, fmt_emin(r));
    int clamp = sat == QV_SAT_FINITE || !fi->has_nan; /* e2m1 always clamps */
    if (v > fi->max_finite) {
        if (clamp) v = fi->max_finite;
        else if (fi->has_inf) /* Inf: all-ones exponent, zero mantissa */
            return (neg ? 1u << (fi->bits - 1) : 0) |
                   (((1u << fi->exp_bits) - 1) << fi->man_bits);
        else return r->nan_code;
    }
    if (!fi->is_signed) {
        /* unsigned scale formats: a value below the smallest code (a negative
         * nonzero for ue4m3; zero or negative or tiny for e8m0) */
        double lo = fi->min_value;
        if ((neg && v != 0) || v < lo) {
            if (!clamp) return r->nan_code;
            return magnitude_code(r, lo);
        }
        return magnitude_code(r, v);
    }
    return (neg ? 1u << (fi->bits - 1) : 0) | magnitude_code(r, v);
}

/* ---- integer formats -------------------------------------------------- */

static double round_int_clamped(double x, double lo, double hi)
{
    if (isnan(x)) return 0;
    if (x <= lo) return lo;
    if (x >= hi) return hi;
    double fl = floor(x);
    double frac = x - fl; /* exact: |x| < 2^31 here */
    if (frac > 0.5 || (frac == 0.5 && fmod(fl, 2.0) != 0)) fl += 1;
    return fl < lo ? lo : (fl > hi ? hi : fl);
}

/* The values of every code of the float formats of at most 8 bits (e2m1,
 * e4m3, e5m2, e8m0, ue4m3), filled once from decode_float, their definition
 * (t_formats checks every code against MPFR): index code & 0xFF, which
 * decode_float's own mask makes the same value for the narrower formats. */
static double small_values[QV_FMT_COUNT][256];
static pthread_once_t small_once = PTHREAD_ONCE_INIT;

static void small_fill(void)
{
    for (int f = QV_FMT_NONE + 1; f < QV_FMT_COUNT; f++) {
        const fmt_row *r = &fmt_table[f];
        if (!r->info.is_float || r->info.bits > 8) continue;
        for (uint32_t c = 0; c < 256; c++) small_values[f][c] = decode_float(r, c);
    }
}

double qv_decode(qv_fmt f, uint32_t code)
{
    const fmt_row *r = row_of(f);
    switch (f) {
    case QV_FMT_F32: return (double)f32_from_bits(code);
    case QV_FMT_F16: return (double)qv_f16_to_f32((uint16_t)code);
    case QV_FMT_BF16: return (double)qv_bf16_to_f32((uint16_t)code);
#ifdef QV_MUTANT_orc_i4_sign_by_8
    /* Oracle mutant: int4 sign-extended by 8 instead of 16 (-8..-1 read as 0..7). */
    case QV_FMT_I4: return (double)((int)(code & 0xFu) - (int)(code & 0x8u));
#else
    case QV_FMT_I4: return (double)((int)(code & 0xFu) - (int)((code & 0x8u) << 1));
#endif
    case QV_FMT_U4: return (double)((int)(code & 0xFu) - 8);
    case QV_FMT_I8: return (double)(int8_t)(uint8_t)code;
    case QV_FMT_U8: return (double)((int)(code & 0xFFu) - 128);
    case QV_FMT_UINT4: return (double)(code & 0xFu);
    case QV_FMT_UINT8: return (double)(code & 0xFFu);
    case QV_FMT_I32: return (double)(int32_t)code;
    default:
        if (r->info.bits <= 8) {
            pthread_once(&small_once, small_fill);
            return small_values[f][code & 0xFFu];
        }
        return decode_float(r, code);
    }
}

uint32_t qv_encode(qv_fmt f, double x, qv_sat sat)
{
    const fmt_row *r = row_of(f);
    const qv_fmt_info *fi = &r->info;
    double v;
    switch (f) {
    case QV_FMT_F16:
    case QV_FMT_BF16: {
        uint16_t h = f == QV_FMT_F16 ? qv_f64_to_f16(x) : qv_f64_to_bf16(x);
        uint16_t inf = f == QV_FMT_F16 ? 0x7C00u : 0x7F80u;
        /* RNE gave Inf for an overflow (or an Inf input); saturation turns it
         * into the largest finite code of the same sign, which is Inf - 1 */
        if (sat == QV_SAT_FINITE && (h & 0x7FFFu) == inf) h = (uint16_t)(h - 1);
        return h;
    }
    case QV_FMT_I4:
        v = round_int_clamped(x, fi->min_value, fi->max_finite);
        return (uint32_t)(int32_t)v & 0xFu;
    case QV_FMT_U4:
        return (uint32_t)(round_int_clamped(x, fi->min_value, fi->max_finite) + 8);
    case QV_FMT_I8:
        v = round_int_clamped(x, fi->min_value, fi->max_finite);
        return (uint32_t)(int32_t)v & 0xFFu;
    case QV_FMT_U8:
        return (uint32_t)(round_int_clamped(x, fi->min_value, fi->max_finite) + 128);
    case QV_FMT_UINT4:
    case QV_FMT_UINT8:
        return (uint32_t)round_int_clamped(x, fi->min_value, fi->max_finite);
    case QV_FMT_I32:
        return (uint32_t)(int32_t)round_int_clamped(x, fi->min_value, fi->max_finite);
    default: return encode_float(r, x, sat);
    }
}

double qv_trunc_bits(double x, int bits)
{
    if (x == 0.0 || !isfinite(x) || bits >= 53) return x;
    if (bits < 1) bits = 1;
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    /* A normal double has 53 significant bits (the implicit one and 52
     * stored), a subnormal one as many as its fraction's highest set bit
     * gives; clearing the low (significant - bits) of the magnitude
     * truncates toward zero. */
    int sig = 53;
    if ((u >> 52 & 0x7ff) == 0)
        for (sig = 52; sig > 0 && !(u >> (sig - 1) & 1u); sig--) continue;
    if (bits >= sig) return x;
    u &= ~((UINT64_C(1) << (sig - bits)) - 1);
    memcpy(&x, &u, sizeof x);
    return x;
}

double qv_ulp(qv_fmt f, double x)
{
    const fmt_row *r = row_of(f);
    const qv_fmt_info *fi = &r->info;
    if (!fi->is_float) return 1.0;
    if (isnan(x)) return NAN;
    double a = fabs(x);
    int emin = fmt_emin(r);
    int emax = ilogb_fast(fi->max_finite);
    int e = (a == 0) ? emin : (isinf(a) ? emax : ilogb_fast(a));
    if (e < emin) e = emin;
    if (e > emax) e = emax;
    return scale2(1.0, e - fi->man_bits);
}
