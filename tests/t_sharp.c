/* t_sharp.c: the oracle is sharp. A verifier's worst bug is a lax oracle: a
 * bound, a rounding window or a verdict path that quietly accepts more than the
 * declared arithmetic allows. Each test here fixes an input whose exact value y
 * and bound E are derived by hand from the declared arithmetic (docs/spec.md,
 * docs/design.md §3), never read back from the code under test, and checks:
 *   - declared: an output that a legal implementation of the declared
 *     arithmetic produces (an adversarial order or truncation the model
 *     allows, computed here in plain C float arithmetic) is not FAILed, and
 *     its error is printed as a fraction of E (the bound's measured factor);
 *   - cheaper: the output of the next cheaper arithmetic (fp16 instead of fp32
 *     accumulation, truncation instead of RNE, no fp8 promotion, a cast before
 *     the epilogue) FAILs;
 *   - edge: E equals its hand derivation (within 2^-16), outputs beyond 1.125 E
 *     (and one output code further) from y FAIL on both sides and
 *     0.875 E from y do not: the reference's E is the declared one, neither
 *     looser (a bound loosened by 2 passes the first) nor tighter;
 * for every accumulator (acc=f32, fma32, i32, f8pN, f8fast), the reductions,
 * the segment-scale, epilogue and bias terms, fp32 underflow and the
 * dequantization; NaN and Inf operands, the exact digit-GEMM path and the fast
 * dgemm path's own term. Bounds whose factor is above 2 are listed with their
 * factor in reference/README.md ("Sharpness").
 * Then every verdict path on hand-built truths (Inf and NaN of either sign
 * where the model is finite, the model's own NaN and Inf, the poison, the last
 * element, the rounding window at ties and near codes, the bit-exact
 * comparison), the statistical monitors one at a time (p99, signed bias of
 * either sign, NMSE), the campaign's own checks on a host kernel
 * (nondeterminism, a unique probe's bits, a refused launch, an operand the
 * reference decodes differently), and the generator's coverage (g_idx
 * permutations, one group, the scale regimes, the witnesses in the fixed suite
 * and the fuzz). Seeds are fixed: every value here is a constant. */
#include <check.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/campaign.h"
#include "qvet/formats.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "qvet/spec.h"
#include "support/suite.h"

#define U24 0x1p-24
#define U23 0x1p-23

/* ---- problems written by hand ------------------------------------------------ */

static const qv_variant *spec(const char *text)
{
    const qv_variant *v = NULL;
    ck_assert_msg(qv_spec_parse(text, &v) == QV_OK, "spec '%s' refused: %s", text, qv_errmsg());
    return v;
}

static void mk(qv_problem *p, const char *text, int64_t m, int64_t n, int64_t k)
{
    ck_assert_msg(qv_problem_create(p, spec(text), m, n, k) == QV_OK, "%s %lldx%lldx%lld: %s", text, (long long)m,
                  (long long)n, (long long)k, qv_errmsg());
}

/* The stored code of value x in format f (x must be representable). */
static uint32_t code(qv_fmt f, double x)
{
    uint32_t c = qv_encode(f, x, QV_SAT_NONE);
    ck_assert_msg(qv_decode(f, c) == x, "%a is not a %s value", x, qv_fmt_get(f)->name);
    return c;
}

static void put(qv_fmt f, void *buf, int64_t i, double x)
{
    if (f == QV_FMT_I8 || f == QV_FMT_I4) {
        ck_assert(x == rint(x) && x >= -128 && x <= 127);
        ((int8_t *)buf)[i] = (int8_t)x;
    } else if (f == QV_FMT_U4) {
        ck_assert(x == rint(x) && x >= -8 && x <= 7);
        ((uint8_t *)buf)[i] = (uint8_t)(x + 8);
    } else if (f == QV_FMT_F32) {
        ck_assert((double)(float)x == x);
        ((float *)buf)[i] = (float)x;
    } else if (qv_fmt_storage_bytes(f) == 2) {
        ((uint16_t *)buf)[i] = (uint16_t)code(f, x);
    } else {
        ((uint8_t *)buf)[i] = (uint8_t)code(f, x);
    }
}

static void set_a(qv_problem *p, int64_t i, int64_t kk, double x) { put(p->v->afmt, p->a, i * p->k + kk, x); }
static void set_w(qv_problem *p, int64_t kk, int64_t j, double x) { put(p->v->wfmt, p->q, kk * p->n + j, x); }
static void set_s(qv_problem *p, int64_t i, double s) { put(p->v->sfmt, p->scales, i, s); }

/* out: (m, n) codes of p's output format; element e set to value x, rounded
 * to nearest even (the caller picks x on purpose; e.g. one code past a bound). */
static void out_set(const qv_problem *p, void *out, int64_t e, double x)
{
    qv_fmt f = p->v->ofmt;
    uint32_t c = qv_encode(f, x, QV_SAT_NONE);
    if (f == QV_FMT_F32 || f == QV_FMT_I32)
        ((uint32_t *)out)[e] = c;
    else
        ((uint16_t *)out)[e] = (uint16_t)c;
}

static void out_code(const qv_problem *p, void *out, int64_t e, uint32_t c)
{
    if (qv_fmt_storage_bytes(p->v->ofmt) == 4)
        ((uint32_t *)out)[e] = c;
    else
        ((uint16_t *)out)[e] = (uint16_t)c;
}

static void *out_alloc(const qv_problem *p) { return calloc(1, (size_t)qv_problem_out_bytes(p)); }

static qv_grade grade(const qv_problem *p, const ref_truth *t, const void *out, qv_result *r)
{
    ref_verify(p, t, out, r);
    return r->grade;
}

/* The output one code past y + d (d > 0) or y - d (d < 0), in p's output
 * format: the first code whose value lies strictly beyond it, then one more
 * (so that it also lies beyond the rounded bound RN(y + E) for any E < d). */
static double code_past(const qv_problem *p, double y, double d)
{
    qv_fmt f = p->v->ofmt;
    double x = y + d;
    double c = qv_decode(f, qv_encode(f, x, QV_SAT_NONE));
    if (d > 0 && c <= x) c += qv_ulp(f, c);
    if (d < 0 && c >= x) c -= qv_ulp(f, c);
    return d > 0 ? c + qv_ulp(f, c) : c - qv_ulp(f, c);
}

/* The output code nearest y + d toward y (|d| < E keeps it inside [y-E, y+E]). */
static double code_within(const qv_problem *p, double y, double d)
{
    qv_fmt f = p->v->ofmt;
    double x = y + d;
    double c = qv_decode(f, qv_encode(f, x, QV_SAT_NONE));
    if (d > 0 && c > x) c -= qv_ulp(f, c);
    if (d < 0 && c < x) c += qv_ulp(f, c);
    return c;
}

/* The reference's E of element e is the hand-derived E_cf (the small terms of
 * y's double representation and fp32 underflow are inside 2^-16 relative), and
 * the verdict follows it: y +- 1.125 E_cf past one output code FAILs, y +-
 * 0.875 E_cf does not. Every other element of out holds the correctly rounded
 * value. */
static void edge(const char *what, const qv_problem *p, const ref_truth *t, int64_t e, double e_cf)
{
    double y = t->y[e];
    ck_assert_msg(t->bound[e] >= e_cf && t->bound[e] <= e_cf * (1 + 0x1p-16) + 0x1p-140,
                  "%s: E = %.17g, the declared arithmetic gives %.17g (ratio %.9g)", what, t->bound[e], e_cf,
                  t->bound[e] / e_cf);
    void *out = out_alloc(p);
    for (int64_t i = 0; i < p->m * p->n; i++) out_set(p, out, i, t->y_rn[i]);
    qv_result r;
    const double far[2] = {1.125 * e_cf, -1.125 * e_cf}, near[2] = {0.875 * e_cf, -0.875 * e_cf};
    for (int s = 0; s < 2; s++) {
        out_set(p, out, e, code_past(p, y, far[s]));
        ck_assert_msg(grade(p, t, out, &r) == QV_FAIL, "%s: an output %s y by 1.125 E (%.9g, y = %.17g, E = %.9g) "
                      "passes: the bound is looser than declared", what, s ? "below" : "above",
                      code_past(p, y, far[s]), y, e_cf);
        out_set(p, out, e, code_within(p, y, near[s]));
        ck_assert_msg(grade(p, t, out, &r) != QV_FAIL, "%s: an output %s y by 0.875 E fails: %s", what,
                      s ? "below" : "above", r.reason);
    }
    free(out);
}

/* Grades the output whose element e is x (the others correctly rounded). */
static qv_grade grade_one(const qv_problem *p, const ref_truth *t, int64_t e, double x, qv_result *r)
{
    void *out = out_alloc(p);
    for (int64_t i = 0; i < p->m * p->n; i++) out_set(p, out, i, t->y_rn[i]);
    out_set(p, out, e, x);
    qv_grade g = grade(p, t, out, r);
    free(out);
    return g;
}

/* A legal output of the declared arithmetic must pass; prints E over its error. */
static void declared(const char *what, const qv_problem *p, const ref_truth *t, int64_t e, double x)
{
    qv_result r;
    ck_assert_msg(grade_one(p, t, e, x, &r) != QV_FAIL, "%s: the declared arithmetic's output %.17g (y = %.17g, "
                  "E = %.9g) fails: %s", what, x, t->y[e], t->bound[e], r.reason);
    double err = fabs(x - t->y[e]);
    printf("sharp: %-44s E = %-12.6g error = %-12.6g E/error = %.3f\n", what, t->bound[e], err, t->bound[e] / err);
}

static void cheaper(const char *what, const qv_problem *p, const ref_truth *t, int64_t e, double x)
{
    qv_result r;
    ck_assert_msg(grade_one(p, t, e, x, &r) == QV_FAIL, "%s: the cheaper arithmetic's output %.17g (y = %.17g, "
                  "E = %.9g) passes", what, x, t->y[e], t->bound[e]);
}

static void truth(const qv_problem *p, ref_truth *t)
{
    ck_assert_msg(ref_truth_compute(p, t) == QV_OK, "%s: %s", p->v->name, qv_errmsg());
}

/* x truncated toward zero to `bits` significant bits. */
static double trunc_bits(double x, int bits)
{
    if (x == 0.0 || !isfinite(x)) return x;
    double q = ldexp(1.0, ilogb(x) - bits + 1);
    return trunc(x / q) * q;
}

/* x rounded to nearest even with `bits` significant bits, no exponent limits
 * (an accumulator register of that width). */
static double rn_bits(double x, int bits)
{
    if (x == 0.0 || !isfinite(x)) return x;
    double q = ldexp(1.0, ilogb(x) - bits + 1);
    return rint(x / q) * q;
}

/* The fp32 tensor core as adversarially as docs/design.md §3 allows: each block of 16
 * products is aligned to the largest exponent among them and the accumulator,
 * every product truncated at that quantum (2^(emax - 23)), the block's sum
 * truncated to 24 bits. p: (k) the exact products in K order. */
static double tc_truncating(const double *p, int64_t k)
{
    double acc = 0;
    for (int64_t b0 = 0; b0 < k; b0 += 16) {
        int emax = acc != 0 ? ilogb(acc) : -1000;
        for (int64_t kk = b0; kk < b0 + 16 && kk < k; kk++)
            if (p[kk] != 0 && ilogb(p[kk]) > emax) emax = ilogb(p[kk]);
        double q = ldexp(1.0, emax - 23), s = trunc(acc / q) * q;
        for (int64_t kk = b0; kk < b0 + 16 && kk < k; kk++) s += trunc(p[kk] / q) * q;
        acc = trunc_bits(s, 24);
    }
    return acc;
}

/* A narrow accumulator of `bits` bits that truncates after every addition,
 * promoted into an fp32 sum every nc products (nc = k: never). */
static double narrow_sum(const double *p, int64_t k, int bits, int64_t nc)
{
    float total = 0;
    for (int64_t b0 = 0; b0 < k; b0 += nc) {
        double part = 0;
        for (int64_t kk = b0; kk < b0 + nc && kk < k; kk++) part = trunc_bits(part + p[kk], bits);
        total = total + (float)part;
    }
    return total;
}

/* The products a_k w_k of element (0, j) as the accumulator sees them (no scales). */
static void products(const qv_problem *p, int64_t j, double *prod)
{
    for (int64_t kk = 0; kk < p->k; kk++) prod[kk] = qv_problem_a(p, 0, kk) * qv_problem_wq(p, kk, j);
}

/* ---- accumulators ---------------------------------------------------------- */

/* acc=f32: one product 1024 (32 x 32), then 255 products (1 - 2^-11) 2^-13,
 * each just below the quantum 2^-13 of the accumulator at 2^10. The
 * truncating tensor core drops every one of them (error 255 (1 - 2^-11)
 * 2^-13 = 0.031) against E = 2 (1 + 1/16) 256 2^-23 G = 0.066: the bound's
 * factor is 2.13 (reference/README.md). An fp16 accumulator is the cheaper
 * arithmetic: on 2048 then 255 products 1 - 2^-11 it keeps 2048 (each is
 * below half its ulp 2). */
START_TEST(acc_f32)
{
    const int64_t k = 256;
    qv_problem p;
    mk(&p, "w=f16,out=f32", 1, 2, k);
    for (int64_t kk = 0; kk < k; kk++) {
        set_a(&p, 0, kk, kk ? 1 - 0x1p-11 : 32);
        set_w(&p, kk, 0, kk ? 0x1p-13 : 32);
        set_w(&p, kk, 1, kk ? 1 : 64); /* column 1: 2048, then 255 products 1 - 2^-11 */
    }
    ref_truth t;
    truth(&p, &t);
    double g0 = 1024 + (double)(k - 1) * (1 - 0x1p-11) * 0x1p-13;
    ck_assert(t.y[0] == g0);
    double *prod = malloc(sizeof(double) * (size_t)k);
    products(&p, 0, prod);
    double tc = tc_truncating(prod, k);
    ck_assert(tc == 1024.0);
    declared("acc=f32 (tensor core, truncating alignment)", &p, &t, 0, tc);
    edge("acc=f32", &p, &t, 0, 2 * (1 + 1.0 / 16) * (double)k * U23 * g0);
    /* column 1 in an fp16 accumulator (11 bits, RNE) */
    products(&p, 1, prod);
    double h = 0;
    for (int64_t kk = 0; kk < k; kk++) h = rn_bits(h + prod[kk], 11);
    ck_assert(h == 2048.0 && t.y[1] > 2048.0 + 200);
    cheaper("acc=f32 against an fp16 accumulator", &p, &t, 1, h);
    free(prod);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* acc=fma32: 1, then 255 products (1 - 2^-11) 2^-24, each below half the ulp
 * of 1: fmaf keeps 1, an error of 255 (1 - 2^-11) 2^-24 against E = gamma_256
 * G = 256 2^-24 G / (1 - 256 2^-24): the bound's factor is 1.004. Truncation
 * where RN is declared is the cheaper arithmetic: with products (1 - 2^-11)
 * 2^-23 (above half an ulp, so RN rounds them up) it drops them all, nearly
 * twice E. */
START_TEST(acc_fma32)
{
    const int64_t k = 256;
    qv_problem p;
    mk(&p, "w=f16,acc=fma32,out=f32", 1, 2, k);
    for (int64_t kk = 0; kk < k; kk++) {
        set_a(&p, 0, kk, kk ? 1 - 0x1p-11 : 1);
        set_w(&p, kk, 0, kk ? 0x1p-24 : 1);
        set_w(&p, kk, 1, kk ? 0x1p-23 : 1);
    }
    ref_truth t;
    truth(&p, &t);
    double *prod = malloc(sizeof(double) * (size_t)k);
    const double gamma = (double)k * U24 / (1 - (double)k * U24);
    for (int j = 0; j < 2; j++) {
        products(&p, j, prod);
        double g = 0;
        for (int64_t kk = 0; kk < k; kk++) g += prod[kk];
        ck_assert(t.y[j] == g);
        float acc = 0, rz = 0;
        for (int64_t kk = 0; kk < k; kk++) {
            acc = fmaf((float)qv_problem_a(&p, 0, kk), (float)qv_problem_wq(&p, kk, j), acc);
            rz = (float)trunc_bits((double)rz + prod[kk], 24);
        }
        edge(j ? "acc=fma32 (ulp-sized products)" : "acc=fma32", &p, &t, j, gamma * g);
        if (j == 0) {
            ck_assert(acc == 1.0f);
            declared("acc=fma32 (fmaf, products below half an ulp)", &p, &t, 0, acc);
        } else {
            ck_assert(rz == 1.0f);
            declared("acc=fma32 (fmaf, products above half an ulp)", &p, &t, 1, acc);
            cheaper("acc=fma32 against a truncating fp32 sum", &p, &t, 1, rz);
        }
    }
    free(prod);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* acc=i32 is exact: 66576 products 127 x 127 and one 1 make the odd y =
 * 1073804305 (above 2^30, as far as K * 128^2 < 2^31 allows). Its only correct
 * int32 output is y (E is the reference's own 2^-50 |y|), one off either way
 * FAILs, and so does the fp32 accumulation of the same products. */
START_TEST(acc_i32)
{
    const int64_t k = 66577;
    qv_problem p;
    mk(&p, "w=i8,a=i8,acc=i32", 1, 1, k);
    for (int64_t kk = 0; kk < k; kk++) {
        set_a(&p, 0, kk, kk < k - 1 ? 127 : 1);
        set_w(&p, kk, 0, kk < k - 1 ? 127 : 1);
    }
    ref_truth t;
    truth(&p, &t);
    double y = 66576.0 * 16129.0 + 1.0;
    ck_assert(t.y[0] == y && !strcmp(t.path, "int64"));
    float f = 0;
    for (int64_t kk = 0; kk < k; kk++) f += (float)(qv_problem_a(&p, 0, kk) * qv_problem_wq(&p, kk, 0));
    ck_assert((double)f != y);
    qv_result r;
    ck_assert_msg(grade_one(&p, &t, 0, y, &r) == QV_PASS, "acc=i32: the exact sum: %s", r.reason);
    edge("acc=i32", &p, &t, 0, 0x1p-50 * y);
    cheaper("acc=i32 against an fp32 accumulator", &p, &t, 0, (double)(int32_t)f);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* The fp8 bound of docs/spec.md, written from its definition: per promotion
 * block B of the products p (K order), M_B = sum |p|, spacing 2^(floor(log2
 * M_B) - bits + 1), 2 sum min(spacing, |p|); plus one fp32 promotion per block
 * (2^-23 of the block's magnitude and error). */
static double fp8_accum_bound(const double *p, int64_t k, int bits, int64_t nc)
{
    double d = 0, mag = 0;
    int64_t blocks = 0;
    for (int64_t b0 = 0; b0 < k; b0 += nc, blocks++) {
        double mb = 0, e = 0;
        for (int64_t kk = b0; kk < b0 + nc && kk < k; kk++) mb += fabs(p[kk]);
        double sp = ldexp(1.0, ilogb(mb) - bits + 1);
        for (int64_t kk = b0; kk < b0 + nc && kk < k; kk++) e += fmin(sp, fabs(p[kk]));
        d += 2 * e;
        mag += mb;
    }
    return d + (double)blocks * U23 * (mag + d);
}

/* docs/design.md §3's witness, e4m3 with unit scales and an f32 output: 2^16, then
 * 1023 ones (K = 1024). acc=f8p128: the 14-bit accumulator promoted every 128
 * loses the 127 ones of the first block (the H200's cuBLASLt result, E =
 * 298: factor 2.35); fast accumulation (65536) FAILs. acc=f8fast: 65536
 * passes (E = 2062: factor 2.02); an 11-bit accumulator on 2048 then ones
 * (which the 14 bits keep) FAILs. Epilogue: two fp32 multiplies by 1. */
static void fp8_case(const char *text, int promoted)
{
    const int64_t k = 1024;
    qv_problem p;
    mk(&p, text, 1, 2, k);
    for (int64_t kk = 0; kk < k; kk++) {
        set_a(&p, 0, kk, kk ? 1 : 256);
        set_w(&p, kk, 0, kk ? 1 : 256);
        set_w(&p, kk, 1, kk ? 1 : 8);
    }
    set_s(&p, 0, 1.0);
    p.a_scale[0] = 1.0f;
    ref_truth t;
    truth(&p, &t);
    ck_assert(t.y[0] == 65536.0 + 1023.0 && t.y[1] == 2048.0 + 1023.0);
    double prod[1024];
    for (int j = 0; j < 2; j++) {
        products(&p, j, prod);
        double d = fp8_accum_bound(prod, k, 14, promoted ? 128 : k);
        edge(promoted ? "acc=f8p128" : "acc=f8fast", &p, &t, j, d + 2 * U24 * (t.y[j] + d));
    }
    products(&p, 0, prod);
    if (promoted) {
        double x = narrow_sum(prod, k, 14, 128);
        ck_assert(x == t.y[0] - 127.0);
        declared("acc=f8p128 (14 bits, promoted every 128)", &p, &t, 0, x);
        cheaper("acc=f8p128 against fast accumulation", &p, &t, 0, narrow_sum(prod, k, 14, k));
    } else {
        double x = narrow_sum(prod, k, 14, k);
        ck_assert(x == 65536.0);
        declared("acc=f8fast (14 bits, never promoted)", &p, &t, 0, x);
        products(&p, 1, prod);
        ck_assert(narrow_sum(prod, k, 14, k) == t.y[1]);
        cheaper("acc=f8fast against an 11-bit accumulator", &p, &t, 1, narrow_sum(prod, k, 11, k));
    }
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}

START_TEST(acc_f8p128) { fp8_case("w=e4m3,ws=f32/t,a=e4m3,as=f32/t,acc=f8p128,out=f32", 1); }
END_TEST

START_TEST(acc_f8fast) { fp8_case("w=e4m3,ws=f32/t,a=e4m3,as=f32/t,acc=f8fast,out=f32", 0); }
END_TEST

/* ---- reductions --------------------------------------------------------------- */

/* red=f32 with an fp32 accumulator: docs/design.md §3's split-K witness at K = 3,
 * (-256)(-8) + 1 + 256 (-8) = 1. Two K slices summed in fp32 and reduced in
 * fp32 give 1 exactly; reduced in fp16 (vLLM #6795) 2049 rounds to 2048 and
 * the result is 0, which FAILs. red=none has the same E: alpha covers every
 * order of the K - 1 fp32 additions. */
START_TEST(red_f32)
{
    const char *texts[2] = {"w=f16,out=f32", "w=f16,red=none,out=f32"};
    double bound[2];
    for (int s = 0; s < 2; s++) {
        qv_problem p;
        mk(&p, texts[s], 1, 1, 3);
        static const double a[3] = {-256, 1, 256}, w[3] = {-8, 1, -8};
        for (int kk = 0; kk < 3; kk++) {
            set_a(&p, 0, kk, a[kk]);
            set_w(&p, kk, 0, w[kk]);
        }
        ref_truth t;
        truth(&p, &t);
        ck_assert(t.y[0] == 1.0);
        edge(s ? "red=none" : "red=f32", &p, &t, 0, 2 * (1 + 1.0 / 16) * 3 * U23 * 4097);
        float lo = 2048.0f + 1.0f, hi = -2048.0f;
        qv_result r;
        ck_assert(grade_one(&p, &t, 0, lo + hi, &r) == QV_PASS);
        if (!s) cheaper("red=f32 against an fp16 reduction", &p, &t, 0, rn_bits(rn_bits(lo, 11) + hi, 11));
        bound[s] = t.bound[0];
        ref_truth_clear(&t);
        qv_problem_destroy(&p);
    }
    ck_assert(bound[0] == bound[1]);
}
END_TEST


/* ---- scale terms: adversarial fp32 renderings found by a fixed search ---------- */

static uint64_t sm_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A float in [1, 1 + 2^-8) with a random fraction, times 2^e: a product
 * with it stays at the bottom of its binade, where one rounding costs the
 * most relative to the value. */
static double rand_scale(uint64_t *s, int e) { return ldexp(1.0 + (double)(sm_next(s) >> 49) * 0x1p-23, e); }

/* Activations and weights of column 0 whose int32 dot product is `target`
 * (>= 0): products 127 x 127, then 127 x r, then r x 1. Returns K. */
static int64_t int_sum_k(int64_t target)
{
    return target / 16129 + (target % 16129) / 127 + ((target % 127) != 0);
}

static void fill_int_sum(qv_problem *p, int64_t target)
{
    int64_t kk = 0, big = target / 16129, mid = (target % 16129) / 127, last = target % 127;
    for (int64_t t = 0; t < big; t++, kk++) {
        set_a(p, 0, kk, 127);
        set_w(p, kk, 0, 127);
    }
    for (int64_t t = 0; t < mid; t++, kk++) {
        set_a(p, 0, kk, 127);
        set_w(p, kk, 0, 1);
    }
    if (last) {
        set_a(p, 0, kk, (double)last);
        set_w(p, kk++, 0, 1);
    }
    ck_assert_int_eq(kk, p->k);
}

/* A chain x_0 = fl(y0), x_i = fl(x_(i-1) s_i) of fp32 multiplies with each s_i
 * chosen from 4096 candidates near 2^e_i to push the error further in the
 * direction of the first rounding. s: (n) out; returns the fp32 result; *exact
 * receives y0 prod s_i rounded to a double. */
static double worst_chain(double y0, const int *e, int n, double *s, double *exact)
{
    mpfr_t x, t;
    mpfr_inits2(400, x, t, (mpfr_ptr)0);
    mpfr_set_d(x, y0, MPFR_RNDN);
    float f = (float)y0;
    double dir = (double)f < y0 ? -1 : 1;
    uint64_t seed = 0x5eed;
    for (int i = 0; i < n; i++) {
        double best = -INFINITY;
        for (int c = 0; c < 4096; c++) {
            double sc = rand_scale(&seed, e[i]);
            float fc = (float)((double)f * sc); /* the product of two floats is exact in a double */
            mpfr_mul_d(t, x, sc, MPFR_RNDN);
            mpfr_sub_d(t, t, (double)fc, MPFR_RNDN);
            mpfr_neg(t, t, MPFR_RNDN);
            double dev = dir * mpfr_get_d(t, MPFR_RNDN); /* (fc - exact) in the chosen direction */
            if (dev > best) {
                best = dev;
                s[i] = sc;
            }
        }
        mpfr_mul_d(x, x, s[i], MPFR_RNDN);
        f = (float)((double)f * s[i]);
    }
    *exact = mpfr_get_d(x, MPFR_RNDN);
    mpfr_clears(x, t, (mpfr_ptr)0);
    return f;
}

/* Epilogue terms: an odd int32 sum above 2^24 with many significant bits
 * (its conversion to fp32 ties to even: an error of 1), then the channel scale, the token scale and the tensor
 * scale, each an fp32 multiply: E = 4 u |y| (u = 2^-24), and the search finds
 * scales whose roundings all add up. The cheaper arithmetic: the accumulator
 * cast to f16 before the scales (vLLM #33972) overflows to Inf. */
START_TEST(epilogue_terms)
{
    const int64_t y0 = 19246351;
    qv_problem p;
    mk(&p, "w=i8,ws=f32/c,ws2=f32/t,a=i8,as=f32/tok,acc=i32,out=f32", 1, 1, int_sum_k(y0));
    fill_int_sum(&p, y0);
    const int e[3] = {-20, -4, -3};
    double sc[3], exact;
    double x = worst_chain((double)y0, e, 3, sc, &exact);
    set_s(&p, 0, sc[0]);
    p.a_scale[0] = (float)sc[1];
    p.scales2[0] = (float)sc[2];
    ref_truth t;
    truth(&p, &t);
    ck_assert(t.y[0] == exact);
    edge("epilogue: 4 fp32 steps", &p, &t, 0, 4 * U24 * fabs(exact));
    declared("epilogue: 4 fp32 steps", &p, &t, 0, x);
    double h = rn_bits((double)(float)y0, 11); /* 2^24 as an f16 is past 65504: Inf */
    cheaper("epilogue against the f16 cast first", &p, &t, 0, h > 65504 ? INFINITY : h * sc[0] * sc[1] * sc[2]);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* The bias term: the same sum and a channel scale (y1 = fl(fl(y0) s), two
 * roundings), then a bias that cancels all but 2^-8 of it: y2 = y1 + b is
 * exact (Sterbenz), so E = 2 u |y1| + u (|y2| + 2 u |y1|), relative to the sum
 * and not to its operands (which would give about 4 u |y1|). A dropped bias
 * (sglang #35020) FAILs. */
START_TEST(bias_term)
{
    const int64_t y0 = 19246351;
    qv_problem p;
    mk(&p, "w=i8,ws=f32/c,a=i8,acc=i32,bias=f32,out=f32", 1, 1, int_sum_k(y0));
    fill_int_sum(&p, y0);
    const int e[1] = {-20};
    double sc[1], y1;
    double x1 = worst_chain((double)y0, e, 1, sc, &y1);
    set_s(&p, 0, sc[0]);
    double b = (double)(float)(-y1 * (1 - 0x1p-8));
    p.bias[0] = (float)b;
    double x2 = (double)(float)(x1 + b);
    ck_assert(x2 == x1 + b);
    ref_truth t;
    truth(&p, &t);
    double y2 = t.y[0];
    ck_assert(fabs(y2 - (y1 + b)) <= 0x1p-40 * fabs(y1));
    edge("bias: after 2 fp32 steps", &p, &t, 0, 2 * U24 * fabs(y1) + U24 * (fabs(y2) + 2 * U24 * fabs(y1)));
    declared("bias: after 2 fp32 steps", &p, &t, 0, x2);
    cheaper("bias dropped", &p, &t, 0, x1);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* Segment terms: 128x128 weight block scales and per-token 128-K activation
 * scales over four segments of 128: each int32 partial P_s (below 2^24, so
 * its conversion to fp32 is exact) times fl(sa sw) is rounded and added to an
 * fp32 total. E = 2 u sum_s sigma_s m_s (the scale product and the product)
 * + 4 u sum_s sigma_s m_s (the fp32 total over 4 segments), sigma_s = |sa
 * sw|, m_s = sum |a w| of the segment. Partials 1, 1, 2, 4 (times X) keep every running
 * total at the bottom of its binade, where a rounding costs the most relative
 * to it; the search picks the scale pairs (within 2^-8 of powers of two) that
 * push the total furthest. A total kept in bf16 FAILs. */
START_TEST(segment_terms)
{
    const int64_t k = 512, seg = 128;
    qv_problem p;
    mk(&p, "w=i8,ws=f32/b128x128,a=i8,as=f32/tok-b128,acc=i32,out=f32", 1, 1, k);
    /* partial s: 2^(s-1) (s >= 1) times that of segment 0, 127 x 127 x 32 + 101 x 127 */
    double part[4] = {0};
    for (int64_t kk = 0; kk < k; kk++) {
        int sg = (int)(kk / seg), r = (int)(kk % seg), reps = sg < 2 ? 1 : 1 << (sg - 1);
        int on = r < 33 * reps;
        double a = !on ? 0 : r % 33 == 32 ? 101 : 127;
        set_a(&p, 0, kk, a);
        set_w(&p, kk, 0, 127);
        part[sg] += a * 127;
    }
    mpfr_t ex, tt;
    mpfr_inits2(400, ex, tt, (mpfr_ptr)0);
    mpfr_set_zero(ex, 1);
    float total = 0;
    double sum_sm = 0;
    uint64_t seed = 0xb10c;
    for (int sg = 0; sg < 4; sg++) {
        double best = -INFINITY, bsa = 1, bsw = 1;
        for (int c = 0; c < 8192; c++) {
            double sa = 0x1p-7 * (1 + (double)(sm_next(&seed) >> 49) * 0x1p-23);
            double sw = 0x1p-9 * (1 + (double)(sm_next(&seed) >> 49) * 0x1p-23);
            float tc = total + (float)(part[sg] * (double)(float)(sa * sw));
            mpfr_set_d(tt, part[sg], MPFR_RNDN);
            mpfr_mul_d(tt, tt, sa, MPFR_RNDN);
            mpfr_mul_d(tt, tt, sw, MPFR_RNDN);
            mpfr_add(tt, tt, ex, MPFR_RNDN);
            mpfr_d_sub(tt, (double)tc, tt, MPFR_RNDN);
            double dev = -mpfr_get_d(tt, MPFR_RNDN); /* push the total below the exact sum */
            if (dev > best) {
                best = dev;
                bsa = sa;
                bsw = sw;
            }
        }
        ((float *)p.scales)[sg] = (float)bsw;
        p.a_scale[sg] = (float)bsa; /* (k/128, m) MN-major with m = 1 */
        mpfr_set_d(tt, part[sg], MPFR_RNDN);
        mpfr_mul_d(tt, tt, bsa, MPFR_RNDN);
        mpfr_mul_d(tt, tt, bsw, MPFR_RNDN);
        mpfr_add(ex, ex, tt, MPFR_RNDN);
        total = total + (float)(part[sg] * (double)(float)(bsa * bsw));
        sum_sm += bsa * bsw * part[sg];
    }
    double exact = mpfr_get_d(ex, MPFR_RNDN);
    mpfr_clears(ex, tt, (mpfr_ptr)0);
    ref_truth t;
    truth(&p, &t);
    ck_assert(fabs(t.y[0] - exact) <= 0x1p-52 * fabs(exact));
    edge("segments: 4 x 128, scales per segment", &p, &t, 0, (2 + 4) * U24 * sum_sm);
    declared("segments: 4 x 128, scales per segment", &p, &t, 0, total);
    double b = 0;
    for (int sg = 0; sg < 4; sg++)
        b = rn_bits(b + rn_bits(part[sg] * (double)(float)((double)p.a_scale[sg] * ((float *)p.scales)[sg]), 8), 8);
    cheaper("segments summed in bf16", &p, &t, 0, b);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* ---- the dequantization -------------------------------------------------------- */

/* dq=rn: u4b8 codes 5 times the f16 scale 1.5 - 2^-10 is 7.4951171875,
 * which one f16 rounding takes to 7.49609375 (up). Sixteen of them with unit
 * activations: y = 119.9375. A kernel that keeps the exact product (fp32
 * dequantization) or truncates it is off by 0.0156 or 0.0625 against E =
 * 2 (1 + 1/16) 16 2^-23 G = 0.00049. */
START_TEST(dequant_rn)
{
    qv_problem p;
    mk(&p, "w=u4b8,ws=f16/g16,out=f32", 1, 1, 16);
    const double s = 1.5 - 0x1p-10;
    for (int kk = 0; kk < 16; kk++) {
        set_a(&p, 0, kk, 1);
        set_w(&p, kk, 0, 5);
    }
    set_s(&p, 0, s);
    ref_truth t;
    truth(&p, &t);
    ck_assert(t.y[0] == 16 * 7.49609375);
    qv_result r;
    ck_assert_msg(grade_one(&p, &t, 0, t.y[0], &r) == QV_PASS, "dq=rn: %s", r.reason);
    edge("dq=rn", &p, &t, 0, 2 * (1 + 1.0 / 16) * 16 * U23 * t.y[0]);
    cheaper("dq=rn against an exact (fp32) dequantization", &p, &t, 0, 16 * 5 * s);
    cheaper("dq=rn against a truncated dequantization", &p, &t, 0, 16 * trunc_bits(5 * s, 11));
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* dq=i8 (QQQ): rne((q - 8) s) with s = 2.5 and q - 8 = 1, 3, 5, 7 is 2, 8, 12,
 * 18 (ties to even); rounding ties away gives 3, 8, 13, 18 and truncation 2,
 * 7, 12, 17. The int32 sum of four of each is exact: 160, 168 and 152. */
START_TEST(dequant_i8)
{
    qv_problem p;
    mk(&p, "w=u4b8,ws=f16/g16,dq=i8,a=i8,acc=i32,out=f32", 1, 1, 16);
    for (int kk = 0; kk < 16; kk++) {
        set_a(&p, 0, kk, 1);
        set_w(&p, kk, 0, 1 + 2 * (kk % 4));
    }
    set_s(&p, 0, 2.5);
    ref_truth t;
    truth(&p, &t);
    ck_assert(t.y[0] == 160.0);
    qv_result r;
    ck_assert_msg(grade_one(&p, &t, 0, 160.0, &r) == QV_PASS, "dq=i8: %s", r.reason);
    edge("dq=i8", &p, &t, 0, U24 * 160.0);
    cheaper("dq=i8 against ties away from zero", &p, &t, 0, 168.0);
    cheaper("dq=i8 against truncation", &p, &t, 0, 152.0);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* dq=f32 (torchao's NVFP4 emulation): w = bf16(f32(value(q) f32(s s2))),
 * e2m1 codes, ue4m3 scales, fp32 second-level scales per column:
 *   column 0: q = 1, s = 1.5, s2 = 5614251 2^-23: s s2 = 1 + 2^-8 + 2^-24, an
 *     fp32 tie that goes to the even 1 + 2^-8, a bf16 tie that goes to 1.
 *     One rounding of the exact product, to bf16, gives 1 + 2^-7.
 *   column 1: q = 3, s = 1, the same s2: 3 s2 = 2 + 2^-7 + 2^-23, an fp32 tie
 *     that goes to 2 + 2^-7, a bf16 tie that goes to 2. One rounding of the
 *     exact product gives 2 + 2^-6.
 *   column 2: q = 3, s = 1.375, s2 = 1537117 2^-21: s s2 = 1 + 2^-7 - 2^-24,
 *     an fp32 tie that goes to the even 1 + 2^-7; 3 times that is 3 + 3 2^-7,
 *     exact in fp32 and a bf16 tie that goes to the even 3 + 2^-5. With the
 *     scale product left unrounded, 3 s s2 lies 3/4 of an fp32 ulp below the
 *     tie, rounds to the fp32 value below it, and that to bf16 3 + 2^-6.
 * Sixteen unit activations: y = 16, 32 and 48.5, E = 2 (1 + 1/16) 16 2^-23 G
 * with G = y and no epilogue rounding (ws2 is in the dequantization). The
 * cheaper arithmetics FAIL: one rounding of the product (16.125, 32.25), the
 * scale product unrounded (48.25), and the global scale in the epilogue after
 * a bf16 dequantization of q s (the fp32 products 24 s2, 48 s2 and 66 s2:
 * ties at 16 + 2^-4 and 32 + 2^-3 go to the even 16.0625 and 32.125). */
START_TEST(dequant_f32)
{
    qv_problem p;
    mk(&p, "w=e2m1,ws=ue4m3/g16,ws2=f32/c,dq=f32,a=bf16,out=f32", 1, 3, 16);
    const double s2a = 5614251 * 0x1p-23, s2b = 1537117 * 0x1p-21;
    ck_assert(1.5 * s2a == 1 + 0x1p-8 + 0x1p-24 && 3 * s2a == 2 + 0x1p-7 + 0x1p-23);
    ck_assert(1.375 * s2b == 1 + 0x1p-7 - 0x1p-24);
    for (int kk = 0; kk < 16; kk++) {
        set_a(&p, 0, kk, 1);
        set_w(&p, kk, 0, 1);
        set_w(&p, kk, 1, 3);
        set_w(&p, kk, 2, 3);
    }
    set_s(&p, 0, 1.5);
    set_s(&p, 1, 1);
    set_s(&p, 2, 1.375);
    put(QV_FMT_F32, p.scales2, 0, s2a);
    put(QV_FMT_F32, p.scales2, 1, s2a);
    put(QV_FMT_F32, p.scales2, 2, s2b);
    ref_truth t;
    truth(&p, &t);
    ck_assert_msg(t.y[0] == 16.0 && t.y[1] == 32.0 && t.y[2] == 48.5,
                  "y = %.17g, %.17g, %.17g; the declared math gives 16, 32 and 48.5", t.y[0], t.y[1], t.y[2]);
    qv_result r;
    for (int j = 0; j < 3; j++) {
        char what[32];
        snprintf(what, sizeof what, "dq=f32 (column %d)", j);
        ck_assert_msg(grade_one(&p, &t, j, t.y[j], &r) == QV_PASS, "%s: %s", what, r.reason);
        edge(what, &p, &t, j, 2 * (1 + 1.0 / 16) * 16 * U23 * t.y[j]);
    }
    cheaper("dq=f32 against one rounding of the product", &p, &t, 0, 16 * (1 + 0x1p-7));
    cheaper("dq=f32 against one rounding of the product", &p, &t, 1, 16 * (2 + 0x1p-6));
    cheaper("dq=f32 against an unrounded scale product", &p, &t, 2, 16 * (3 + 0x1p-6));
    /* the global scale in the epilogue: 16 q s exact in fp32, then one fp32 multiply */
    const float ep[3] = {24.0f * (float)s2a, 48.0f * (float)s2a, 66.0f * (float)s2b};
    ck_assert(ep[0] == 16.0625f && ep[1] == 32.125f);
    for (int j = 0; j < 3; j++) cheaper("dq=f32 against the global scale in the epilogue", &p, &t, j, ep[j]);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* ---- the fast path's own term ------------------------------------------------- */

/* The digit-GEMM path is exact: K = 4096 products whose large terms cancel
 * in pairs (activations +1, then the small ones near 2^-18, then -1 on the
 * same weights, so that the small products meet a large partial sum).
 * Activations span 26 bits (2^0 to 2^-25) and so
 * do weights (2^13 to 2^-13, 8-bit significands): 52 bits of digit products
 * plus 12 of K do not fit one digit GEMM's 53, so the path must split them;
 * one GEMM would round the sums' low bits and break the cancellation. y and
 * y_rn equal the MPFR path's. */
START_TEST(ozaki_exact)
{
    const int64_t m = 1, n = 8, k = 4096, half = 2000;
    qv_problem p;
    mk(&p, "w=bf16,a=bf16,out=f32", m, n, k);
    uint64_t seed = 0x02a1c1;
    for (int64_t kk = 0; kk < k; kk++)
        set_a(&p, 0, kk, kk < half ? 1 : kk >= k - half ? -1 : ldexp(128 + (double)(sm_next(&seed) >> 57), -25));
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) {
            double w = ldexp(128 + (double)(sm_next(&seed) >> 57), (int)(sm_next(&seed) % 19) - 13);
            set_w(&p, kk, j, kk >= k - half ? qv_problem_wq(&p, kk - (k - half), j) : w);
        }
    ref_truth o, x;
    ck_assert_int_eq(ref_truth_compute_path(&p, "ozaki", &o), QV_OK);
    ck_assert_int_eq(ref_truth_compute_path(&p, "mpfr", &x), QV_OK);
    for (int64_t e = 0; e < m * n; e++)
        ck_assert_msg(o.y[e] == x.y[e] && o.y_rn[e] == x.y_rn[e], "element %lld: ozaki y %.17g (y_rn %.9g), "
                      "mpfr %.17g (%.9g)", (long long)e, o.y[e], o.y_rn[e], x.y[e], x.y_rn[e]);
    ref_truth_clear(&o);
    ref_truth_clear(&x);
    qv_problem_destroy(&p);
}
END_TEST

/* 2^60, 62 ones, -2^60 in bf16: dgemm in double loses the ones that meet
 * +-2^60 in its partial sums. Its certified term (K + 2) 2^-53 G covers the
 * loss: |y_dgemm - y_mpfr| is at most E_dgemm - E_mpfr. */
START_TEST(dgemm_term)
{
    const int64_t k = 64;
    qv_problem p;
    mk(&p, "w=bf16,a=bf16,out=f32", 1, 1, k);
    for (int64_t kk = 0; kk < k; kk++) {
        set_a(&p, 0, kk, kk == 0 ? 0x1p60 : kk == k - 1 ? -0x1p60 : 1);
        set_w(&p, kk, 0, 1);
    }
    ref_truth d, x;
    ck_assert_int_eq(ref_truth_compute_path(&p, "dgemm+cert", &d), QV_OK);
    ck_assert_int_eq(ref_truth_compute_path(&p, "mpfr", &x), QV_OK);
    ck_assert(x.y[0] == 62.0);
    double dy = fabs(d.y[0] - x.y[0]), term = d.bound[0] - x.bound[0];
    printf("sharp: dgemm+cert y = %.17g (exact 62), its term %.6g\n", d.y[0], term);
    ck_assert_msg(dy > 0, "dgemm summed this case exactly: the witness shows nothing");
    ck_assert_msg(dy <= term, "|dgemm - exact| = %.6g exceeds the dgemm term %.6g", dy, term);
    ck_assert(term >= (double)(k + 2) * 0x1p-53 * 0x1p61);
    ref_truth_clear(&d);
    ref_truth_clear(&x);
    qv_problem_destroy(&p);
}
END_TEST

/* dq=exact group scales multiply partial sums: 2 groups of 64, unit
 * activations, q - 8 = 1, scales 2 and 4: y = 64 * 2 + 64 * 4 = 384, and E =
 * 2 u sum sigma m (scale and product per segment) + 2 u sum sigma m (the fp32
 * total over 2 segments). A kernel that drops the group scales gives 128. */
START_TEST(segment_group_exact)
{
    qv_problem p;
    mk(&p, "w=u4b8,ws=f16/g64,dq=exact,a=i8,acc=i32,out=f32", 1, 1, 128);
    for (int kk = 0; kk < 128; kk++) {
        set_a(&p, 0, kk, 1);
        set_w(&p, kk, 0, 1);
    }
    set_s(&p, 0, 2);
    set_s(&p, 1, 4);
    ref_truth t;
    truth(&p, &t);
    ck_assert_msg(t.y[0] == 384.0, "y = %.17g, the declared math gives 384", t.y[0]);
    edge("segments: dq=exact groups", &p, &t, 0, 4 * U24 * 384.0);
    cheaper("group scales dropped", &p, &t, 0, 128.0);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* fp32 underflow: bf16 products near 2^-140 lie below fp32's normal range,
 * where every rounding of an fma loop loses up to half of 2^-149 whatever the
 * values' size: E holds (K + 2) 2^-149 for that (a relative bound alone would
 * be about 2^-150 here). Products A W 2^-154 with W = 129 and A = 15 mod 32
 * are 15/32 of a quantum 2^-149 past the grid: fmaf drops that much at every
 * step, and its output passes. */
START_TEST(underflow_term)
{
    const int64_t k = 16;
    qv_problem p;
    mk(&p, "w=bf16,a=bf16,acc=fma32,out=f32", 1, 1, k);
    for (int64_t kk = 0; kk < k; kk++) {
        set_a(&p, 0, kk, 0x1p-107 * (double)(143 + 32 * (kk % 4)));
        set_w(&p, kk, 0, 0x1p-47 * 129);
    }
    ref_truth t;
    truth(&p, &t);
    double g = 0;
    float acc = 0;
    for (int64_t kk = 0; kk < k; kk++) {
        double a = qv_problem_a(&p, 0, kk), w = qv_problem_wq(&p, kk, 0);
        g += a * w;
        acc = fmaf((float)a, (float)w, acc);
    }
    ck_assert(t.y[0] == g && g < 0x1p-126);
    const double gamma = (double)k * U24 / (1 - (double)k * U24);
    edge("fp32 underflow (fma32)", &p, &t, 0, gamma * g + (double)(k + 2) * 0x1p-149);
    declared("fp32 underflow (fma32, fmaf)", &p, &t, 0, acc);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* NVFP4 with bf16 activations (marlin-fp4-nv): a kernel reading the layout
 * sums the declared products times 2^(s_pow2 - 126) (layout.h), so its fp32
 * partial sums are subnormal where the declared ones are not, and E charges
 * their underflow in those units: (K + 2) 2^-149 2^(126 - s_pow2) |g|. Here
 * every block scale is 2^-9 (s_pow2 = 10: the units are 2^-116 of the
 * declared ones) and g = 1; column 0 sums one product 2^-25 (2^-141 in the
 * kernel's units) and 63 products 31 2^-37 (1.9375 quanta of 2^-149 there),
 * y = 2^-25 + 1953 2^-37. A tensor core that truncates at its alignment
 * keeps one quantum of each small product and loses 63 x 0.9375 quanta =
 * 59.06 2^-33 in the output's units, against E = 66 2^-33 and the rest: it
 * passes (E / error 1.12), while a bound in the declared units (2^-116 of
 * that) would fail it. One that flushed fp32 subnormals to zero returns 0
 * and fails. */
START_TEST(fp4_kernel_units)
{
    const int64_t k = 64;
    const qv_variant *v = qv_variant_find("marlin-nvfp4a16-g16-bf16");
    ck_assert_ptr_nonnull(v);
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, 1, 64, k), QV_OK);
    for (int64_t i = 0; i < qv_problem_scale_rows(&p) * qv_problem_scale_cols(&p); i++) set_s(&p, i, 0x1p-9);
    p.scales2[0] = 1.0f;
    for (int64_t kk = 0; kk < k; kk++) {
        set_a(&p, 0, kk, kk ? 31 * 0x1p-28 : 0x1p-16);
        for (int64_t j = 0; j < p.n; j++) set_w(&p, kk, j, j == 0 ? 1.0 : 0.0);
    }
    ref_truth t;
    truth(&p, &t);
    const double y = 0x1p-25 + 1953 * 0x1p-37, g = y; /* every product positive: G = y */
    ck_assert(t.y[0] == y);
    /* the truncating tensor core in the kernel's units: blocks of 16, each
     * product truncated at max(2^(emax - 23), 2^-149) */
    double acc = 0;
    for (int64_t b0 = 0; b0 < k; b0 += 16) {
        int emax = acc != 0 ? ilogb(acc) : -1000;
        double pk[16];
        for (int64_t kk = b0; kk < b0 + 16; kk++) {
            pk[kk - b0] = ldexp(qv_problem_a(&p, 0, kk) * qv_problem_wq(&p, kk, 0) * qv_problem_scale(&p, kk, 0), -116);
            if (ilogb(pk[kk - b0]) > emax) emax = ilogb(pk[kk - b0]);
        }
        double q = ldexp(1.0, emax - 23 < -149 ? -149 : emax - 23), sum = trunc(acc / q) * q;
        for (int i = 0; i < 16; i++) sum += trunc(pk[i] / q) * q;
        acc = sum;
    }
    ck_assert(acc == 0x1p-141 + 63 * 0x1p-149);
    float x = (float)acc * 0x1p116f; /* the global scale the packed operand holds: 1 times 2^116 */
    const double e_cf = 2 * (1 + 1.0 / 16) * (double)k * U23 * g + (double)(k + 2) * 0x1p-33;
    edge("fp4 kernel units (nvfp4 bf16)", &p, &t, 0, e_cf + U24 * (y + e_cf));
    declared("fp4 kernel units (truncating tensor core)", &p, &t, 0, qv_decode(QV_FMT_BF16, qv_encode(QV_FMT_BF16, x, QV_SAT_NONE)));
    cheaper("fp4 kernel units with fp32 subnormals flushed", &p, &t, 0, 0.0);
    /* the CPU model sums in the same units */
    uint16_t *out = out_alloc(&p);
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    qv_result r;
    ck_assert_msg(grade(&p, &t, out, &r) != QV_FAIL, "the CPU model fails: %s", r.reason);
    free(out);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* NaN and Inf operands: an Inf weight makes the column's y that Inf, a NaN
 * weight or Inf * 0 makes it NaN (E = 0 there), and an output that carries
 * them passes. */
START_TEST(nonfinite_operands)
{
    qv_problem p;
    mk(&p, "w=f16", 1, 4, 3);
    const double a[3] = {1, 2, 0};
    for (int kk = 0; kk < 3; kk++) {
        set_a(&p, 0, kk, a[kk]);
        for (int j = 0; j < 4; j++) set_w(&p, kk, j, 0.5);
    }
    ((uint16_t *)p.q)[0 * 4 + 0] = 0x7C00; /* +Inf x 1 */
    ((uint16_t *)p.q)[1 * 4 + 1] = 0xFC00; /* -Inf x 2 */
    ((uint16_t *)p.q)[0 * 4 + 2] = 0x7E00; /* NaN */
    ((uint16_t *)p.q)[2 * 4 + 3] = 0x7C00; /* +Inf x 0 */
    ref_truth t;
    truth(&p, &t);
    ck_assert(t.y[0] == INFINITY && t.y[1] == -INFINITY && isnan(t.y[2]) && isnan(t.y[3]));
    uint16_t out[4] = {0x7C00, 0xFC00, 0x7E00, 0xFE01};
    qv_result r;
    ck_assert_msg(grade(&p, &t, out, &r) != QV_FAIL, "the model's own NaN and Inf fail: %s", r.reason);
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* ---- verdict paths, on hand-built truths ---------------------------------------- */

typedef struct synth {
    qv_problem p;
    ref_truth t;
    void *out;
} synth;

static const char *const out_specs[4] = {"w=f16", "w=bf16,a=bf16", "w=f16,out=f32", "w=i8,a=i8,acc=i32"};

/* An m x n output of spec `text` whose truth is y (every element) with bound
 * E, and an output holding RN(y). */
static void synth_make(synth *s, const char *text, int64_t m, int64_t n, double y, double e)
{
    mk(&s->p, text, m, n, 1);
    memset(&s->t, 0, sizeof s->t);
    s->t.m = m;
    s->t.n = n;
    s->t.y = malloc(sizeof(double) * (size_t)(m * n));
    s->t.bound = malloc(sizeof(double) * (size_t)(m * n));
    s->t.y_rn = malloc(sizeof(double) * (size_t)(m * n));
    s->t.path = "hand-built";
    s->t.why = "hand-built";
    s->out = out_alloc(&s->p);
    for (int64_t i = 0; i < m * n; i++) {
        s->t.y[i] = y;
        s->t.bound[i] = e;
        s->t.y_rn[i] = isfinite(y) ? qv_decode(s->p.v->ofmt, qv_encode(s->p.v->ofmt, y, QV_SAT_NONE)) : y;
        out_set(&s->p, s->out, i, s->t.y_rn[i]);
    }
}

static void synth_free(synth *s)
{
    ref_truth_clear(&s->t);
    qv_problem_destroy(&s->p);
    free(s->out);
}

static qv_grade synth_grade(synth *s, qv_result *r) { return grade(&s->p, &s->t, s->out, r); }

/* A NaN code other than the canonical one: negative, another payload. */
static uint32_t nan_other(qv_fmt f) { return f == QV_FMT_F32 ? 0xFFC00001u : f == QV_FMT_F16 ? 0xFE01u : 0xFFC1u; }

/* A NaN or Inf of either sign where the model is finite FAILs, in every
 * float output format, and is counted as such. */
START_TEST(verdict_nonfinite_outputs)
{
    for (int f = 0; f < 3; f++) {
        synth s;
        synth_make(&s, out_specs[f], 2, 3, 1.5, 0.01);
        qv_result r;
        ck_assert_int_eq(synth_grade(&s, &r), QV_PASS);
        qv_fmt of = s.p.v->ofmt;
        const double vals[3] = {INFINITY, -INFINITY, NAN};
        for (int64_t e = 0; e < 6; e += 5)
            for (int v = 0; v < 4; v++) {
                if (v < 3)
                    out_set(&s.p, s.out, e, vals[v]);
                else
                    out_code(&s.p, s.out, e, nan_other(of));
                ck_assert_msg(synth_grade(&s, &r) == QV_FAIL, "%s: %s at element %lld where y = 1.5 passes",
                              qv_fmt_get(of)->name, v == 0 ? "+Inf" : v == 1 ? "-Inf" : "NaN", (long long)e);
                ck_assert_int_eq(r.n_inf + r.n_nan, 1);
                ck_assert_int_eq(v < 2 ? r.n_inf : r.n_nan, 1);
                out_set(&s.p, s.out, e, 1.5);
            }
        synth_free(&s);
    }
}
END_TEST

/* The model's own NaN and Inf: the output must be that NaN (any NaN code) or
 * that Inf; the other Inf, a NaN for an Inf, an Inf for a NaN or a finite
 * value FAIL. */
START_TEST(verdict_model_nonfinite)
{
    for (int f = 0; f < 3; f++) {
        const double ys[3] = {INFINITY, -INFINITY, NAN};
        for (int yi = 0; yi < 3; yi++) {
            synth s;
            synth_make(&s, out_specs[f], 1, 2, ys[yi], 0.0);
            qv_result r;
            ck_assert_msg(synth_grade(&s, &r) != QV_FAIL, "%s: the model's own %g fails: %s",
                          qv_fmt_get(s.p.v->ofmt)->name, ys[yi], r.reason);
            const double wrong[4] = {INFINITY, -INFINITY, NAN, 65504};
            for (int w = 0; w < 4; w++) {
                if ((w == 2 && isnan(ys[yi])) || (w < 2 && wrong[w] == ys[yi])) continue;
                out_set(&s.p, s.out, 1, wrong[w]);
                ck_assert_msg(synth_grade(&s, &r) == QV_FAIL, "%s: %g where the model has %g passes",
                              qv_fmt_get(s.p.v->ofmt)->name, wrong[w], ys[yi]);
            }
            if (isnan(ys[yi])) {
                out_code(&s.p, s.out, 1, nan_other(s.p.v->ofmt));
                ck_assert_msg(synth_grade(&s, &r) != QV_FAIL, "another NaN code for the model's NaN fails: %s",
                              r.reason);
            }
            synth_free(&s);
        }
    }
}
END_TEST

/* Inf is correct where y + E reaches the overflow threshold (65520 in f16),
 * and wrong one code below it. */
START_TEST(verdict_inf_at_overflow)
{
    synth s;
    synth_make(&s, out_specs[0], 1, 1, 65400, 200);
    qv_result r;
    out_set(&s.p, s.out, 0, INFINITY);
    ck_assert_msg(synth_grade(&s, &r) != QV_FAIL, "Inf with y + E = 65600 fails: %s", r.reason);
    synth_free(&s);
    synth_make(&s, out_specs[0], 1, 1, 65400, 100);
    out_set(&s.p, s.out, 0, INFINITY);
    ck_assert_int_eq(synth_grade(&s, &r), QV_FAIL);
    synth_free(&s);
}
END_TEST

/* The poison code is "never written" in every output format (int32 too),
 * and every element is looked at: the first, a middle one and the last. */
START_TEST(verdict_poison_and_every_element)
{
    for (int f = 0; f < 4; f++) {
        synth s;
        synth_make(&s, out_specs[f], 3, 5, 24, f == 3 ? 0x1p-40 : 0.01);
        qv_result r;
        ck_assert_int_eq(synth_grade(&s, &r), QV_PASS);
        const int64_t es[3] = {0, 7, 14};
        for (int i = 0; i < 3; i++) {
            out_code(&s.p, s.out, es[i], ref_poison_code(s.p.v->ofmt));
            ck_assert_int_eq(synth_grade(&s, &r), QV_FAIL);
            ck_assert_int_eq(r.n_unwritten, 1);
            ck_assert_ptr_nonnull(strstr(r.reason, "never written"));
            out_set(&s.p, s.out, es[i], 26);
            ck_assert_msg(synth_grade(&s, &r) == QV_FAIL, "%s: element %lld off by 2 passes",
                          qv_fmt_get(s.p.v->ofmt)->name, (long long)es[i]);
            ck_assert_int_eq(r.worst_m * 5 + r.worst_n, es[i]);
            out_set(&s.p, s.out, es[i], 24);
        }
        synth_free(&s);
    }
}
END_TEST

/* The rounding window is RN of y +- E: with E = 0 it holds the correctly
 * rounded y alone, at ties (2049 -> 2048, 2051 -> 2052 in f16), next to a
 * code (1 + 2^-12 -> 1) and on the negative side; the neighbours FAIL. */
START_TEST(window_is_round_to_nearest)
{
    const double ys[5] = {2049, 2051, 1 + 0x1p-12, -(1 + 0x1p-12), -2049};
    const double rn[5] = {2048, 2052, 1, -1, -2048};
    for (int i = 0; i < 5; i++) {
        synth s;
        synth_make(&s, out_specs[0], 1, 1, ys[i], 0.0);
        qv_result r;
        ck_assert(s.t.y_rn[0] == rn[i]);
        ck_assert_msg(synth_grade(&s, &r) == QV_PASS, "RN(%g) = %g fails: %s", ys[i], rn[i], r.reason);
        for (int d = -1; d <= 1; d += 2) {
            out_set(&s.p, s.out, 0, rn[i] + d * qv_ulp(QV_FMT_F16, rn[i] + d * 0x1p-20));
            ck_assert_msg(synth_grade(&s, &r) == QV_FAIL, "y = %g with E = 0: the code %s RN(y) passes", ys[i],
                          d > 0 ? "above" : "below");
        }
        synth_free(&s);
    }
}
END_TEST

/* The bit-exact comparison compares codes: one flipped bit in the last
 * element FAILs, so does -0 for +0, and the poison where a NaN is expected;
 * another NaN code for an expected NaN passes. */
START_TEST(bitexact_codes)
{
    qv_problem p;
    mk(&p, "w=f16", 2, 3, 1);
    uint16_t want[6] = {0x3C00, 0x0000, 0x7E00, 0xBC00, 0x4000, 0x4248}, got[6];
    qv_result r;
    memcpy(got, want, sizeof got);
    ref_verify_bitexact(&p, want, got, &r);
    ck_assert_int_eq(r.grade, QV_PASS);
    got[5] ^= 1;
    ref_verify_bitexact(&p, want, got, &r);
    ck_assert_int_eq(r.grade, QV_FAIL);
    memcpy(got, want, sizeof got);
    got[1] = 0x8000;
    ref_verify_bitexact(&p, want, got, &r);
    ck_assert_msg(r.grade == QV_FAIL, "-0 passes for +0");
    memcpy(got, want, sizeof got);
    got[2] = 0xFE01;
    ref_verify_bitexact(&p, want, got, &r);
    ck_assert_int_eq(r.grade, QV_PASS);
    got[2] = (uint16_t)ref_poison_code(QV_FMT_F16);
    ref_verify_bitexact(&p, want, got, &r);
    ck_assert_int_eq(r.grade, QV_FAIL);
    qv_problem_destroy(&p);
}
END_TEST

/* ---- the statistical monitors, one at a time --------------------------------- */

/* 1000 f32 outputs of y in [1, 2) with E = 2^-10 y; `mode` places the errors. */
static void monitor_case(synth *s, uint64_t seed)
{
    synth_make(s, out_specs[2], 10, 100, 1.0, 0.0);
    for (int64_t e = 0; e < 1000; e++) {
        double y = 1 + (double)(sm_next(&seed) >> 11) * 0x1p-53;
        s->t.y[e] = y;
        s->t.bound[e] = 0x1p-10 * y;
        s->t.y_rn[e] = (float)y;
        out_set(&s->p, s->out, e, (float)y);
    }
}

/* p99 alone: 2 % of the elements spend 0.9 E, alternating in sign (no bias,
 * NMSE far below its limit): MARGINAL; 0.9 % of them is not. */
START_TEST(monitor_p99)
{
    for (int frac = 0; frac < 2; frac++) {
        synth s;
        monitor_case(&s, 7);
        int count = frac ? 20 : 9;
        for (int i = 0; i < count; i++) {
            int64_t e = i * 47;
            out_set(&s.p, s.out, e, s.t.y[e] + (i % 2 ? -0.9 : 0.9) * s.t.bound[e]);
        }
        qv_result r;
        qv_grade g = synth_grade(&s, &r);
        if (frac) {
            ck_assert_msg(g == QV_MARGINAL && strstr(r.reason, "p99"), "2 %% at 0.9 E: %s %s", qv_grade_name(g),
                          r.reason);
        } else {
            ck_assert_msg(g == QV_PASS, "0.9 %% at 0.9 E: %s %s", qv_grade_name(g), r.reason);
        }
        synth_free(&s);
    }
}
END_TEST

/* A signed bias of either sign, 0.3 E on every element: MARGINAL by the
 * z-score alone (p99 0.3, NMSE a fifth of its limit). */
START_TEST(monitor_bias_either_sign)
{
    for (int sign = -1; sign <= 1; sign += 2) {
        synth s;
        monitor_case(&s, 11);
        for (int64_t e = 0; e < 1000; e++) out_set(&s.p, s.out, e, s.t.y[e] + sign * 0.3 * s.t.bound[e]);
        qv_result r;
        qv_grade g = synth_grade(&s, &r);
        ck_assert_msg(g == QV_MARGINAL && strstr(r.reason, "bias"), "bias %+d * 0.3 E: %s %s (z = %g)", sign,
                      qv_grade_name(g), r.reason, r.bias_z);
        synth_free(&s);
    }
}
END_TEST

/* NMSE alone: f16 outputs one ulp from representable y of alternating sign
 * with E = 1.1 ulp: p99 = 0.45, z = 0, NMSE = ulp^2 > 4 (ulp^2/12 + E^2/9) =
 * 0.87 ulp^2 per element. */
START_TEST(monitor_nmse)
{
    synth s;
    synth_make(&s, out_specs[0], 4, 100, 1.0, 0.0);
    const double ulp = 0x1p-10;
    for (int64_t e = 0; e < 400; e++) {
        double y = 1 + (double)(e % 400) * ulp; /* distinct f16 values in [1, 1.4) */
        s.t.y[e] = y;
        s.t.y_rn[e] = y;
        s.t.bound[e] = 1.1 * ulp;
        out_set(&s.p, s.out, e, y + (e % 2 ? -ulp : ulp));
    }
    qv_result r;
    qv_grade g = synth_grade(&s, &r);
    ck_assert_msg(g == QV_MARGINAL && strstr(r.reason, "NMSE"), "one ulp everywhere with E = 1.1 ulp: %s %s",
                  qv_grade_name(g), r.reason);
    synth_free(&s);
}
END_TEST

/* ---- the campaign's own checks, on a kernel under test on host pointers ---------- */

enum { HOST_RIGHT, HOST_NONDET, HOST_ONE_CODE, HOST_REFUSE };
static int host_mode, host_calls;
static const qv_problem *host_p;

/* cublas-f16 on host pointers: the CPU model's output (it is the declared
 * arithmetic), then the injected fault. */
static int host_kernel(const char *variant, const qv_gemm_args *x)
{
    (void)variant;
    if (host_mode == HOST_REFUSE) return 1;
    if (ref_model_run(host_p, x->c) != QV_OK) return 2;
    uint16_t *c = x->c;
    if (host_mode == HOST_ONE_CODE) c[0] = (uint16_t)(c[0] + 1);             /* one code away, inside E */
    if (host_mode == HOST_NONDET && host_calls++ % 2 == 1) c[0] ^= 1; /* the second launch differs */
    return 0;
}

static const char *const host_only[] = {"cublas-f16"};

/* Runs p on the host kernel in `mode`; returns the outcome's grade and reason. */
static qv_grade host_run(const qv_problem *p, int mode, int unique, char *reason, size_t len)
{
    qv_backend b;
    qv_backend_init(&b, QV_BACKEND_HOST_FN);
    snprintf(b.name, sizeof b.name, "sharp-host");
    b.launch = host_kernel;
    b.only = host_only;
    b.n_only = 1;
    b.repeat = 2;
    host_mode = mode;
    host_calls = 0;
    host_p = p;
    qv_outcome o;
    ck_assert_int_eq(qv_case_run(&b, p, unique, &o), QV_OK);
    qv_grade g = o.res.grade;
    snprintf(reason, len, "%s", o.res.reason);
    qv_outcome_clear(&o);
    return g;
}

/* An exact probe of cublas-f16 at K = 1024: E is several output ulps, so an
 * output one code off passes the bound and only the unique output's bits
 * catch it; two launches that differ FAIL as nondeterministic; a refused
 * launch FAILs as a backend error. */
START_TEST(campaign_checks)
{
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, qv_variant_find("cublas-f16"), 16, 64, 1024), QV_OK);
    ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_EXACT, QV_REGIME_LOGUNIFORM, 5), QV_OK);
    char why[256];
    ck_assert_msg(host_run(&p, HOST_RIGHT, 1, why, sizeof why) == QV_PASS, "the declared arithmetic: %s", why);
    /* the off-by-one-code output is inside the bound */
    uint16_t *out = malloc((size_t)qv_problem_out_bytes(&p));
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    out[0] = (uint16_t)(out[0] + 1);
    ref_truth t;
    truth(&p, &t);
    qv_result r;
    ck_assert_msg(grade(&p, &t, out, &r) != QV_FAIL, "one code off fails the bound already: %s", r.reason);
    ref_truth_clear(&t);
    free(out);
    ck_assert_msg(host_run(&p, HOST_ONE_CODE, 1, why, sizeof why) == QV_FAIL && strstr(why, "unique"),
                  "one code off a unique output passes: %s", why);
    ck_assert_msg(host_run(&p, HOST_NONDET, 1, why, sizeof why) == QV_FAIL && strstr(why, "nondeterministic"),
                  "two differing launches pass: %s", why);
    ck_assert_msg(host_run(&p, HOST_REFUSE, 0, why, sizeof why) == QV_FAIL && strstr(why, "backend error"),
                  "a refused launch passes: %s", why);
    qv_problem_destroy(&p);
}
END_TEST

/* The reference's decoding is checked on every case: a u4 code above 15 is
 * no code (the reference reads NaN, the problem's accessor its low nibble),
 * and the case FAILs as refused instead of passing a NaN against a NaN. */
START_TEST(campaign_operands_checked)
{
    qv_problem p;
    mk(&p, "w=u4b8,ws=f16/g16,out=f32", 1, 2, 16);
    for (int kk = 0; kk < 16; kk++) {
        set_a(&p, 0, kk, 1);
        set_w(&p, kk, 0, 3);
        set_w(&p, kk, 1, -2);
    }
    set_s(&p, 0, 0.5);
    set_s(&p, 1, 0.25);
    ((uint8_t *)p.q)[0] = 0x1B;
    qv_backend b;
    qv_backend_init(&b, QV_BACKEND_CPU);
    qv_outcome o;
    ck_assert_int_eq(qv_case_run(&b, &p, 0, &o), QV_OK);
    ck_assert_msg(o.res.grade == QV_FAIL && strstr(o.res.reason, "refused"), "a u4 code 0x1B: %s %s",
                  qv_grade_name(o.res.grade), o.res.reason);
    qv_outcome_clear(&o);
    qv_problem_destroy(&p);
}
END_TEST

/* ---- the generator's coverage --------------------------------------------------- */

static qv_backend cpu_backend(void)
{
    qv_backend b;
    qv_backend_init(&b, QV_BACKEND_CPU);
    return b;
}

/* act_order rows: the fuzz and the fixed suite draw g_idx as a permutation
 * (not sorted) whenever there are two groups or more. */
START_TEST(coverage_g_idx)
{
    qv_backend b = cpu_backend();
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, "marlin-w4a16-g128-act-f16", &b), QV_OK);
    int seen = 0;
    for (int64_t j = 0; j < 40; j++) {
        qv_case c;
        qv_gen_case(&gen, 3, j, &c);
        if (c.k / c.v->g < 2 || c.probe >= QV_PROBE_WITNESS_FP8_PROMOTE) continue;
        qv_problem p;
        ck_assert_int_eq(qv_case_build(&c, &p), QV_OK);
        int sorted = 1;
        for (int64_t kk = 1; kk < p.k; kk++) sorted &= p.g_idx[kk] >= p.g_idx[kk - 1];
        ck_assert_msg(!sorted, "fuzz case %lld (K = %lld, %s): g_idx is sorted", (long long)j, (long long)p.k,
                      qv_probe_name(c.probe));
        seen++;
        qv_problem_destroy(&p);
    }
    ck_assert_int_ge(seen, 5);
}
END_TEST

/* Grouped rows: the fuzz's edge shapes draw one group (K = g) and odd
 * group counts (before the CPU cap halves anything). */
START_TEST(coverage_one_group)
{
    qv_backend b = cpu_backend();
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, "marlin-w4a16-g128-f16", &b), QV_OK);
    int one = 0, odd = 0;
    for (int64_t j = 0; j < 300; j++) {
        qv_case c;
        qv_gen_case(&gen, 3, j, &c);
        if (c.shape_class != QV_SHAPE_EDGE) continue;
        int64_t groups = c.k0 / c.v->g;
        one += groups == 1;
        odd += groups >= 3 && groups % 2 == 1;
    }
    ck_assert_msg(one >= 5 && odd >= 5, "300 fuzz cases: %d edge shapes with one group, %d with an odd count >= 3",
                  one, odd);
}
END_TEST

/* The fuzz draws every probe kind that applies and every regime. */
START_TEST(coverage_fuzz_probes_regimes)
{
    qv_backend b = cpu_backend();
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, "w8a8-*", &b), QV_OK);
    int probes[QV_PROBE_COUNT] = {0}, regimes[QV_REGIME_COUNT] = {0};
    for (int64_t j = 0; j < 600; j++) {
        qv_case c;
        qv_gen_case(&gen, 3, j, &c);
        probes[c.probe]++;
        if (c.probe == QV_PROBE_RANDOM) regimes[c.regime]++;
    }
    /* no w8a8 row has a bias or e2m1 weights */
    for (int k = 0; k < QV_PROBE_COUNT; k++)
        if (k != QV_PROBE_WITNESS_BIAS && k < QV_PROBE_FP4_CODES)
            ck_assert_msg(probes[k] > 0, "600 fuzz cases never draw probe %s", qv_probe_name((qv_probe_kind)k));
    for (int r = 0; r < QV_REGIME_COUNT; r++)
        ck_assert_msg(regimes[r] > 0, "600 fuzz cases never draw regime %s", qv_regime_name((qv_regime)r));
    /* the FP4 rows draw the FP4 probes and the bias witness */
    ck_assert_int_eq(qv_gen_init(&gen, "marlin-*fp4a16-*", &b), QV_OK);
    memset(probes, 0, sizeof probes);
    for (int64_t j = 0; j < 600; j++) {
        qv_case c;
        qv_gen_case(&gen, 3, j, &c);
        probes[c.probe]++;
    }
    for (int k = QV_PROBE_FP4_CODES; k < QV_PROBE_COUNT; k++)
        ck_assert_msg(probes[k] > 0, "600 FP4 fuzz cases never draw probe %s", qv_probe_name((qv_probe_kind)k));
    ck_assert_int_gt(probes[QV_PROBE_WITNESS_BIAS], 0);
}
END_TEST

/* The fixed suite runs every witness of docs/design.md §3 on the rows it applies to. */
START_TEST(coverage_suite_witnesses)
{
    static const struct {
        const char *row;
        qv_probe_kind probe;
    } want[] = {
        {"w8a8-fp8-tok-ch", QV_PROBE_WITNESS_FP8_PROMOTE}, {"marlin-w4a16-g128-f16", QV_PROBE_WITNESS_SPLITK},
        {"w8a8-i8-tok-ch", QV_PROBE_WITNESS_SCALE_OVERFLOW}, {"w8a8-i8-tok-ch", QV_PROBE_WITNESS_RNE_TIE},
        {"qqq-w4a8-ch", QV_PROBE_WITNESS_RNE_TIE},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const qv_variant *v = qv_variant_find(want[i].row);
        int found = 0;
        for (int j = 0; j < qv_suite_count(v, QV_CPU_CAP_CHECK); j++) {
            qv_case c;
            qv_suite_case(v, QV_CPU_CAP_CHECK, 1, j, &c);
            found |= c.probe == want[i].probe;
        }
        ck_assert_msg(found, "the fixed suite of %s has no %s", want[i].row, qv_probe_name(want[i].probe));
    }
}
END_TEST

/* The random probe's regimes do what they say, on marlin-w4a16-g128-f16
 * (4 x 64 x 256): log-uniform scales span at least 2^4; tiny makes most
 * outputs f16 subnormals; near-max takes row 0 past 2^14; outlier makes some
 * activation channel 20 times the typical one; zero-group zeroes an
 * activation row. */
START_TEST(coverage_regimes)
{
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-f16");
    for (int rg = 0; rg < QV_REGIME_COUNT; rg++) {
        qv_problem p;
        ck_assert_int_eq(qv_problem_create(&p, v, 4, 64, 256), QV_OK);
        ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_RANDOM, (qv_regime)rg, 21), QV_OK);
        ref_truth t;
        truth(&p, &t);
        const char *name = qv_regime_name((qv_regime)rg);
        int64_t ns = qv_problem_scale_rows(&p) * qv_problem_scale_cols(&p);
        double smin = INFINITY, smax = 0;
        for (int64_t i = 0; i < ns; i++) {
            double sv = qv_decode(QV_FMT_F16, ((uint16_t *)p.scales)[i]);
            if (sv > 0) smin = fmin(smin, sv);
            smax = fmax(smax, sv);
        }
        if (rg == QV_REGIME_LOGUNIFORM) ck_assert_msg(smax >= 16 * smin, "%s: scales span %g", name, smax / smin);
        if (rg == QV_REGIME_TINY) {
            int sub = 0;
            for (int64_t e = 0; e < 4 * 64; e++) sub += fabs(t.y[e]) < 0x1p-14;
            ck_assert_msg(sub >= 200, "%s: %d of 256 outputs below 2^-14", name, sub);
        }
        if (rg == QV_REGIME_NEAR_MAX) {
            double mx = 0;
            for (int64_t j = 0; j < 64; j++) mx = fmax(mx, fabs(t.y[j]));
            ck_assert_msg(mx > 16384 && mx <= 65504, "%s: row 0 peaks at %g", name, mx);
        }
        if (rg == QV_REGIME_OUTLIER) {
            double col[256], sorted[256];
            for (int64_t kk = 0; kk < 256; kk++) {
                col[kk] = 0;
                for (int64_t i = 0; i < 4; i++) col[kk] += fabs(qv_problem_a(&p, i, kk));
                sorted[kk] = col[kk];
            }
            for (int a = 1; a < 256; a++)
                for (int b2 = a; b2 > 0 && sorted[b2] < sorted[b2 - 1]; b2--) {
                    double x = sorted[b2];
                    sorted[b2] = sorted[b2 - 1];
                    sorted[b2 - 1] = x;
                }
            ck_assert_msg(sorted[255] >= 20 * sorted[128], "%s: the largest channel is %g, the median %g", name,
                          sorted[255], sorted[128]);
        }
        if (rg == QV_REGIME_ZERO_GROUP) {
            int zero_row = 0;
            for (int64_t i = 0; i < 4; i++) {
                int all = 1;
                for (int64_t kk = 0; kk < 256; kk++) all &= qv_problem_a(&p, i, kk) == 0;
                zero_row |= all;
            }
            ck_assert_msg(zero_row, "%s: no zero activation row", name);
        }
        ref_truth_clear(&t);
        qv_problem_destroy(&p);
    }
}
END_TEST

static Suite *sharp_suite(void)
{
    Suite *s = suite_create("sharp");
    TCase *tb = tcase_create("bounds");
    tcase_set_timeout(tb, 60);
    tcase_add_test(tb, acc_f32);
    tcase_add_test(tb, acc_fma32);
    tcase_add_test(tb, acc_i32);
    tcase_add_test(tb, acc_f8p128);
    tcase_add_test(tb, acc_f8fast);
    tcase_add_test(tb, red_f32);
    tcase_add_test(tb, epilogue_terms);
    tcase_add_test(tb, bias_term);
    tcase_add_test(tb, segment_terms);
    tcase_add_test(tb, dequant_rn);
    tcase_add_test(tb, dequant_i8);
    tcase_add_test(tb, dequant_f32);
    tcase_add_test(tb, dgemm_term);
    tcase_add_test(tb, ozaki_exact);
    tcase_add_test(tb, segment_group_exact);
    tcase_add_test(tb, underflow_term);
    tcase_add_test(tb, fp4_kernel_units);
    tcase_add_test(tb, nonfinite_operands);
    suite_add_tcase(s, tb);
    TCase *tv = tcase_create("verdict");
    tcase_add_test(tv, verdict_nonfinite_outputs);
    tcase_add_test(tv, verdict_model_nonfinite);
    tcase_add_test(tv, verdict_inf_at_overflow);
    tcase_add_test(tv, verdict_poison_and_every_element);
    tcase_add_test(tv, window_is_round_to_nearest);
    tcase_add_test(tv, bitexact_codes);
    tcase_add_test(tv, monitor_p99);
    tcase_add_test(tv, monitor_bias_either_sign);
    tcase_add_test(tv, monitor_nmse);
    suite_add_tcase(s, tv);
    TCase *tc = tcase_create("campaign");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, campaign_checks);
    tcase_add_test(tc, campaign_operands_checked);
    tcase_add_test(tc, coverage_g_idx);
    tcase_add_test(tc, coverage_one_group);
    tcase_add_test(tc, coverage_fuzz_probes_regimes);
    tcase_add_test(tc, coverage_suite_witnesses);
    tcase_add_test(tc, coverage_regimes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return suite_run(sharp_suite()); }
