/* t_truth.c: the exact references and the fast path.
 *   - fixed128 and MPFR (and int64 and MPFR for integer rows), and the digit
 *     GEMMs of the ozaki path, are independent exact computations: they agree
 *     bit for bit on y, y_rn and E (the epilogue finished in doubles where it
 *     can be, in MPFR elsewhere);
 *   - the dgemm fast path lies within its own certified term of the MPFR value;
 *   - a hand-derived case, path selection, and refusals.
 * Seeds: QVET_SEED (default 1) with the case index. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qvet/formats.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "support/cases.h"
#include "support/suite.h"

#define CASES_PER_VARIANT 12

/* The suite's seed: QVET_SEED, default 1. */
static uint64_t base_seed(void) { return case_seed(1); }

/* This suite's case seeds (its own salt: an arbitrary odd constant). */
static uint64_t mix(uint64_t a, uint64_t b) { return case_mix(a, b, 0x2545F4914F6CDD1Dull); }

static void make_case(const qv_variant *v, uint64_t s, qv_problem *p)
{
    int64_t m = 1 + (int64_t)(s % 4), n = v->n_tile;
    int64_t step = v->g > v->k_tile ? v->g : v->k_tile;
    int64_t k = step * (1 + (int64_t)((s >> 8) % 3)) * (step < 64 ? 8 : 1);
    case_fill(p, v, m, n, k, QV_PROBE_RANDOM, (qv_regime)((s >> 20) % QV_REGIME_COUNT), s);
}

static int same_double(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* a and b ((m, n) each) agree bit for bit on y, y_rn and E. */
static void assert_same_truth(const qv_variant *v, uint64_t seed, int c, const char *path, const qv_problem *p,
                              const ref_truth *a, const ref_truth *b)
{
    for (int64_t e = 0; e < p->m * p->n; e++) {
        ck_assert_msg(same_double(a->y[e], b->y[e]) && same_double(a->y_rn[e], b->y_rn[e]) &&
                          same_double(a->bound[e], b->bound[e]),
                      "%s seed=%llu case=%d element %lld: %s y=%.17g y_rn=%.17g E=%.17g, mpfr y=%.17g y_rn=%.17g E=%.17g",
                      v->name, (unsigned long long)seed, c, (long long)e, path, a->y[e], a->y_rn[e], a->bound[e],
                      b->y[e], b->y_rn[e], b->bound[e]);
    }
}

START_TEST(exact_paths_agree)
{
    const qv_variant *v = qv_registry_get(_i);
    const char *fast = v->arith.accum == QV_ACC_INT32 ? "int64" : "fixed128";
    uint64_t seed = base_seed();
    int compared = 0, compared_oz = 0;
    for (int c = 0; c < CASES_PER_VARIANT; c++) {
        uint64_t s = mix(seed, (uint64_t)_i * 1009 + (uint64_t)c);
        qv_problem p;
        make_case(v, s, &p);
        ref_truth a, b, z;
        ck_assert_int_eq(ref_truth_compute_path(&p, "mpfr", &b), QV_OK);
        qv_status st = ref_truth_compute_path(&p, "ozaki", &z);
        if (st == QV_OK) {
            assert_same_truth(v, seed, c, "ozaki", &p, &z, &b);
            compared_oz++;
            ref_truth_clear(&z);
        } else {
            ck_assert_int_eq(st, QV_ERR_UNSUPPORTED); /* too wide for the digits, or not finite */
        }
        st = ref_truth_compute_path(&p, fast, &a);
        if (st == QV_ERR_UNSUPPORTED) { /* exponent range beyond fixed point */
            ref_truth_clear(&b);
            qv_problem_destroy(&p);
            continue;
        }
        ck_assert_int_eq(st, QV_OK);
        assert_same_truth(v, seed, c, fast, &p, &a, &b);
        compared++;
        ref_truth_clear(&a);
        ref_truth_clear(&b);
        qv_problem_destroy(&p);
    }
    ck_assert_msg(compared >= CASES_PER_VARIANT / 2, "%s: only %d cases fit the %s path", v->name, compared, fast);
    ck_assert_msg(compared_oz >= CASES_PER_VARIANT / 2, "%s: only %d cases fit the ozaki path", v->name, compared_oz);
}
END_TEST

START_TEST(dgemm_within_its_term)
{
    const qv_variant *v = qv_registry_get(_i);
    uint64_t seed = base_seed();
    for (int c = 0; c < CASES_PER_VARIANT; c++) {
        uint64_t s = mix(seed, 50000 + (uint64_t)_i * 1009 + (uint64_t)c);
        qv_problem p;
        make_case(v, s, &p);
        ref_truth d, x;
        ck_assert_int_eq(ref_truth_compute_path(&p, "dgemm+cert", &d), QV_OK);
        ck_assert_int_eq(ref_truth_compute_path(&p, "mpfr", &x), QV_OK);
        for (int64_t e = 0; e < p.m * p.n; e++) {
            if (!isfinite(x.y[e])) {
                ck_assert(same_double(d.y[e], x.y[e]));
                continue;
            }
            /* E_dgemm - E_exact is the dgemm term, up to the epilogue terms'
             * dependence on |y| (at most 2^-22 |dy|). */
            double dy = fabs(d.y[e] - x.y[e]);
            double term = d.bound[e] - x.bound[e];
            ck_assert_msg(dy <= term + ldexp(dy, -22),
                          "%s seed=%llu case=%d element %lld: |dgemm - mpfr| = %.3g > its term %.3g", v->name,
                          (unsigned long long)seed, c, (long long)e, dy, term);
        }
        ref_truth_clear(&d);
        ref_truth_clear(&x);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* marlin-w4a16-ch-f16, 1 x 64 x 16: a = 1.5 everywhere, q = 8 + (kk % 8) - 4,
 * channel scale 2^-3: y[j] = 1.5 * 2^-3 * sum_kk ((kk % 8) - 4) = 1.5/8 * (2 * -4) = -1.5. */
START_TEST(hand_derived_case)
{
    const qv_variant *v = qv_variant_find("marlin-w4a16-ch-f16");
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, 1, 64, 16), QV_OK);
    uint16_t *a = p.a, *s = p.scales;
    uint8_t *q = p.q;
    for (int kk = 0; kk < 16; kk++) a[kk] = 0x3E00; /* 1.5 in f16 */
    for (int kk = 0; kk < 16; kk++)
        for (int j = 0; j < 64; j++) q[kk * 64 + j] = (uint8_t)(8 + (kk % 8) - 4);
    for (int j = 0; j < 64; j++) s[j] = 0x3000; /* 2^-3 in f16 */
    ref_truth t;
    case_truth(&p, &t);
    ck_assert_str_eq(t.path, "fixed128");
    /* G = 1.5 * 2 * (4+3+2+1+0+1+2+3) = 48 in accumulator units; alpha for K=16,
     * b=16: 2 * (17/16) * 16 * 2^-23; one epilogue multiply. */
    double alpha = 2.0 * (17.0 / 16.0) * 16.0 * ldexp(1.0, -23);
    double dacc = alpha * 48.0 * 0.125;
    for (int j = 0; j < 64; j++) {
        ck_assert_double_eq(t.y[j], -1.5);
        ck_assert_double_eq(t.y_rn[j], -1.5);
        ck_assert_msg(t.bound[j] >= dacc + ldexp(1.0, -24) * 1.5 && t.bound[j] <= 1.001 * (dacc + ldexp(1.0, -24) * (1.5 + dacc)) + 1e-30,
                      "E = %.17g", t.bound[j]);
    }
    case_release(&p, &t);
}
END_TEST

/* An exact value 2^-48 above an f16 rounding tie, whose epilogue product is
 * not a double: marlin-w8a16-ch-f16, channel scale F = 1023 2^-24 (the
 * largest f16 subnormal), and an exact sum acc = N 2^-24 with N = (2941 2^43
 * + 1) / 1023 (an integer: 2^10 = 1 mod 1023, so 2941 2^43 = 2941 * 8 = -1
 * mod 1023), so y = acc F = 2941/32 + 2^-48. 2941/32 = 91.90625 lies halfway
 * between the f16 values 91.875 (1470/16, even) and 91.9375; y, above it by
 * less than half a double ulp (2^-47), is the double 91.90625 and rounds up:
 * y_rn = 91.9375, where rounding the double alone would give the even
 * 91.875. acc is written as f16 activations times codes 129 (w = 1) and 192
 * (w = 64), 11 bits at a time; every path (the fixed128 and digit-GEMM ones
 * finish it in doubles with an fma, MPFR in MPFR) must give these values. */
START_TEST(epilogue_tie_in_doubles)
{
    const qv_variant *v = qv_variant_find("marlin-w8a16-ch-f16");
    const int64_t n = 64, k = 16;
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, 1, n, k), QV_OK);
    uint16_t *a = p.a, *sc = p.scales;
    uint8_t *q = p.q;
    memset(a, 0, sizeof(uint16_t) * (size_t)k);
    memset(q, 128, (size_t)(k * n)); /* w = 0 */
    for (int64_t j = 0; j < n; j++) sc[j] = 0x03FF; /* 1023 2^-24 */
    unsigned __int128 big = ((unsigned __int128)2941 << 43) + 1;
    ck_assert(big % 1023 == 0);
    uint64_t rest = (uint64_t)(big / 1023); /* N, in units of 2^-24 */
    int64_t kk = 0;
    while (rest) {
        int len = 64 - __builtin_clzll(rest);
        int shift = len > 11 ? len - 11 : 0;
        uint64_t chunk = rest >> shift; /* 11 bits: one f16 significand */
        rest -= chunk << shift;
        /* chunk 2^(shift - 24) as a times w: w = 64 keeps a within f16's range */
        int w_exp = shift - 24 > 4 ? 6 : 0;
        double av = ldexp((double)chunk, shift - 24 - w_exp);
        ck_assert_int_lt(kk, k);
        a[kk] = (uint16_t)qv_encode(QV_FMT_F16, av, QV_SAT_NONE);
        ck_assert(qv_decode(QV_FMT_F16, a[kk]) == av);
        for (int64_t j = 0; j < n; j++) q[kk * n + j] = (uint8_t)(128 + (1 << w_exp));
        kk++;
    }
    const char *paths[] = {"fixed128", "ozaki", "mpfr"};
    for (int pi = 0; pi < 3; pi++) {
        ref_truth t;
        ck_assert_int_eq(ref_truth_compute_path(&p, paths[pi], &t), QV_OK);
        for (int64_t j = 0; j < n; j++) {
            ck_assert_msg(t.y[j] == 2941.0 / 32.0, "%s: y = %.17g", paths[pi], t.y[j]);
            ck_assert_msg(t.y_rn[j] == 91.9375, "%s: y_rn = %.17g, not 91.9375 (the tie broken by the 2^-48)",
                          paths[pi], t.y_rn[j]);
        }
        ref_truth_clear(&t);
    }
    qv_problem_destroy(&p);
}
END_TEST

/* bf16 activations spanning 2^-100 .. 2^100 do not fit 128-bit fixed point:
 * the automatic choice falls back to MPFR, which keeps the tiny terms. */
START_TEST(wide_range_uses_mpfr)
{
    const qv_variant *v = qv_variant_find("cublas-bf16");
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, 1, 8, 8), QV_OK);
    uint16_t *a = p.a, *w = p.q;
    a[0] = (uint16_t)qv_encode(QV_FMT_BF16, ldexp(1.0, 100), QV_SAT_NONE);
    a[1] = (uint16_t)qv_encode(QV_FMT_BF16, ldexp(1.0, -100), QV_SAT_NONE);
    a[2] = (uint16_t)qv_encode(QV_FMT_BF16, -ldexp(1.0, 100), QV_SAT_NONE);
    for (int kk = 0; kk < 8; kk++)
        for (int j = 0; j < 8; j++) w[kk * 8 + j] = 0x3F80; /* 1.0 */
    ref_truth t;
    case_truth(&p, &t);
    ck_assert_str_eq(t.path, "mpfr");
    for (int j = 0; j < 8; j++) ck_assert_double_eq(t.y[j], ldexp(1.0, -100));
    ck_assert_int_eq(ref_truth_compute_path(&p, "fixed128", &t), QV_ERR_UNSUPPORTED);
    ck_assert_int_eq(ref_truth_compute_path(&p, "int64", &t), QV_ERR_UNSUPPORTED);
    ck_assert_int_eq(ref_truth_compute_path(&p, "bogus", &t), QV_ERR_USAGE);
    qv_problem_destroy(&p);
}
END_TEST

/* docs/design.md §9's large case takes the fast exact path (its time is a benchmark,
 * tools/verify-speed.sh and bench/RESULTS.md, not an assertion here: a loaded
 * machine must not fail a correct build). */
START_TEST(large_case_fast_path)
{
    double sec = ref_bench_verify(16, 4096, 4096);
    printf("certify 16x4096x4096 marlin-w4a16-g128-f16: %.3f s\n", sec);
    ck_assert_msg(sec > 0, "certifying took %.3f s", sec);
    qv_problem p;
    case_fill_row(&p, "marlin-w4a16-g128-f16", 16, 1024, 4096, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 1);
    ref_truth t, d;
    case_truth(&p, &t);
    ck_assert_str_eq(t.path, "ozaki");
    /* the exact digit-GEMM values lie within the fast path's certified term */
    ck_assert_int_eq(ref_truth_compute_path(&p, "dgemm+cert", &d), QV_OK);
    for (int64_t e = 0; e < p.m * p.n; e++)
        ck_assert_msg(fabs(d.y[e] - t.y[e]) <= d.bound[e] - t.bound[e] + 0x1p-50 * fabs(t.y[e]),
                      "element %lld: dgemm %.17g, exact %.17g, its term %.3g", (long long)e, d.y[e], t.y[e],
                      d.bound[e] - t.bound[e]);
    ref_truth_clear(&d);
    case_release(&p, &t);
}
END_TEST

int main(void)
{
    printf("t_truth: seed %llu (set QVET_SEED to replay)\n", (unsigned long long)base_seed());
    TCase *tc;
    Suite *s = suite_single("truth", "truth", 60, &tc);
    int nv = qv_registry_count();
    tcase_add_loop_test(tc, exact_paths_agree, 0, nv);
    tcase_add_loop_test(tc, dgemm_within_its_term, 0, nv);
    tcase_add_test(tc, hand_derived_case);
    tcase_add_test(tc, epilogue_tie_in_doubles);
    tcase_add_test(tc, wide_range_uses_mpfr);
    tcase_add_test(tc, large_case_fast_path);
    return suite_run(s);
}
