/* t_verify.c: the verdict (ref_verify).
 *   - the real QQQ kernel's published outputs (golden/, logical inputs) PASS for
 *     both QQQ rows and every M, and FAIL when two output columns are swapped,
 *     the channel scales are permuted (the packed order used as logical), or the
 *     group scales are shifted by one group;
 *   - a tampered element FAILs and the result names its (m, n); a poisoned
 *     element is "never written"; a NaN is counted; a zero reference norm is
 *     refused when the caller asks for a non-vacuous case.
 * Run from the repository root (golden vectors: tests/data/golden, or QVET_GOLDEN). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/array.h"
#include "qvet/formats.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "support/cases.h"
#include "support/golden.h"
#include "support/suite.h"

typedef enum mutation { MUT_NONE, MUT_SWAP_COLUMNS, MUT_PERMUTED_CHANNEL, MUT_SHIFTED_GROUP } mutation;

/* Verifies the QQQ kernel output of golden case `cs` for m rows, after `mut`. */
static qv_grade golden_qqq(int grouped, int m, mutation mut, qv_result *res)
{
    const char *cs = grouped ? "qqq_w4a8_k256_n256_g128" : "qqq_w4a8_k128_n256_g-1";
    const qv_variant *v = qv_variant_find(grouped ? "qqq-w4a8-g128" : "qqq-w4a8-ch");
    int64_t k = grouped ? 256 : 128, n = 256;
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, m, n, k), QV_OK);
    char name[64];
    qv_array a, st, d, q, sc, s2;
    snprintf(name, sizeof name, "A_m%d_int8", m);
    golden_load(cs, name, &a);
    snprintf(name, sizeof name, "s_token_m%d_f32", m);
    golden_load(cs, name, &st);
    snprintf(name, sizeof name, "D_qqq_kernel_m%d_f16", m);
    golden_load(cs, name, &d);
    golden_load(cs, grouped ? "q_logical_kxn_uint4" : "q_logical_kxn_int4", &q);
    ck_assert_int_eq((int)a.nbytes, m * (int)k);
    ck_assert_int_eq((int)q.nbytes, (int)(k * n));
    memcpy(p.a, a.data, a.nbytes);
    memcpy(p.a_scale, st.data, (size_t)m * 4);
    memcpy(p.q, q.data, q.nbytes);
    if (grouped) {
        golden_load(cs, mut == MUT_PERMUTED_CHANNEL ? "s_channel_packed_f32" : "s_channel_logical_1xn_f32", &s2);
        golden_load(cs, "s_group_logical_gxn_f16", &sc);
        memcpy(p.scales2, s2.data, (size_t)n * 4);
        memcpy(p.scales, sc.data, sc.nbytes);
        if (mut == MUT_SHIFTED_GROUP) {
            /* Group g reads group g+1's scales (bug class 18). */
            int64_t ng = k / 128;
            uint16_t *s = p.scales, *src = sc.data;
            for (int64_t gi = 0; gi < ng; gi++) memcpy(s + gi * n, src + ((gi + 1) % ng) * n, (size_t)n * 2);
        }
        qv_array_destroy(&s2);
    } else {
        golden_load(cs, mut == MUT_PERMUTED_CHANNEL ? "s_channel_packed_f32" : "s_channel_logical_1xn_f32", &sc);
        memcpy(p.scales, sc.data, (size_t)n * 4);
    }
    uint16_t *out = d.data;
    if (mut == MUT_SWAP_COLUMNS) {
        /* Swap the first two columns whose outputs differ in some row. */
        int64_t j2 = 1;
        for (; j2 < n; j2++) {
            int differ = 0;
            for (int i = 0; i < m; i++) differ |= out[i * n] != out[i * n + j2];
            if (differ) break;
        }
        ck_assert_int_lt(j2, n);
        for (int i = 0; i < m; i++) {
            uint16_t t = out[i * n];
            out[i * n] = out[i * n + j2];
            out[i * n + j2] = t;
        }
    }
    ref_truth t;
    case_truth(&p, &t);
    ck_assert_str_eq(t.path, "int64");
    ref_verify(&p, &t, out, res);
    ref_truth_clear(&t);
    qv_array_destroy(&a);
    qv_array_destroy(&st);
    qv_array_destroy(&d);
    qv_array_destroy(&q);
    qv_array_destroy(&sc);
    qv_problem_destroy(&p);
    return res->grade;
}

static const int golden_ms[] = {1, 7, 16, 33};

START_TEST(golden_qqq_pass)
{
    for (int grouped = 0; grouped < 2; grouped++)
        for (int i = 0; i < 4; i++) {
            qv_result r;
            qv_grade g = golden_qqq(grouped, golden_ms[i], MUT_NONE, &r);
            printf("golden qqq %s m=%d: %s max_ulp=%g max_err/E=%.3g nmse=%.3g %s\n", grouped ? "g128" : "ch",
                   golden_ms[i], qv_grade_name(g), r.max_ulp, r.max_err_over_bound, r.nmse, r.reason);
            ck_assert_msg(g != QV_FAIL, "golden QQQ %s m=%d: %s", grouped ? "g128" : "ch", golden_ms[i], r.reason);
            /* The README: within half an fp16 ulp of the exact value, so the
             * output is the correctly rounded one. */
            ck_assert_double_eq(r.max_ulp, 0.0);
        }
}
END_TEST

START_TEST(golden_qqq_mutations_fail)
{
    for (int grouped = 0; grouped < 2; grouped++)
        for (int i = 0; i < 4; i++) {
            qv_result r;
            ck_assert_msg(golden_qqq(grouped, golden_ms[i], MUT_SWAP_COLUMNS, &r) == QV_FAIL,
                          "column swap passed (grouped=%d m=%d)", grouped, golden_ms[i]);
            ck_assert_msg(golden_qqq(grouped, golden_ms[i], MUT_PERMUTED_CHANNEL, &r) == QV_FAIL,
                          "permuted channel scales passed (grouped=%d m=%d)", grouped, golden_ms[i]);
            if (grouped)
                ck_assert_msg(golden_qqq(grouped, golden_ms[i], MUT_SHIFTED_GROUP, &r) == QV_FAIL,
                              "shifted group scales passed (m=%d)", golden_ms[i]);
        }
}
END_TEST

/* Code one step above x in a 16-bit sign-magnitude format (toward +Inf). */
static uint16_t code_above(uint16_t c)
{
    if (c == 0x8000 || c == 0x0000) return 0x0001;
    return (c & 0x8000) ? (uint16_t)(c - 1) : (uint16_t)(c + 1);
}

/* For every row: model output passes, and one tampered element fails by name. */
START_TEST(tamper_names_element)
{
    const qv_variant *v = qv_registry_get(_i);
    int64_t m = 5, n = v->n_tile * 2, k = v->g > 0 ? v->g * 2 : 256;
    qv_problem p;
    case_fill(&p, v, m, n, k, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 100 + (uint64_t)_i);
    uint16_t *out = malloc((size_t)qv_problem_out_bytes(&p));
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    ref_truth t;
    case_truth(&p, &t);
    qv_result r;
    ref_verify(&p, &t, out, &r);
    ck_assert_msg(r.grade != QV_FAIL, "%s: untampered model output fails: %s", v->name, r.reason);
    int64_t e = (int64_t)(_i * 37) % (m * n);
    uint16_t saved = out[e];
    /* One code above RN(y + E), the top of the allowed interval. */
    out[e] = code_above((uint16_t)qv_encode(v->ofmt, t.y[e] + t.bound[e], v->arith.out_sat));
    ref_verify(&p, &t, out, &r);
    ck_assert_msg(r.grade == QV_FAIL, "%s: tampered element passed", v->name);
    ck_assert_int_eq(r.worst_m, e / n);
    ck_assert_int_eq(r.worst_n, e % n);
    ck_assert_int_eq(r.n_fail + r.n_inf, 1);
    out[e] = (uint16_t)ref_poison_code(v->ofmt);
    ref_verify(&p, &t, out, &r);
    ck_assert_int_eq(r.grade, QV_FAIL);
    ck_assert_int_eq(r.n_unwritten, 1);
    ck_assert_ptr_nonnull(strstr(r.reason, "never written"));
    out[e] = v->ofmt == QV_FMT_F16 ? 0x7E00 : 0x7FC0; /* a canonical NaN */
    ref_verify(&p, &t, out, &r);
    ck_assert_int_eq(r.grade, QV_FAIL);
    ck_assert_int_eq(r.n_nan, 1);
    out[e] = saved;
    free(out);
    case_release(&p, &t);
}
END_TEST

START_TEST(vacuous_refused)
{
    qv_problem p;
    case_fill_row(&p, "marlin-w4a16-g128-f16", 2, 64, 128, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 3);
    memset(p.a, 0, 2 * 128 * 2); /* all activations +0 */
    uint16_t out[128];
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    ref_truth t;
    case_truth(&p, &t);
    qv_result r;
    ref_verify(&p, &t, out, &r);
    ck_assert_int_eq(r.grade, QV_PASS);
    ck_assert_ptr_nonnull(strstr(r.reason, "vacuous"));
    ref_verify_opts o = {.require_nonvacuous = 1};
    ref_verify_ex(&p, &t, out, &o, &r);
    ck_assert_int_eq(r.grade, QV_FAIL);
    ck_assert_ptr_nonnull(strstr(r.reason, "vacuous comparison: zero reference norm"));
    /* Any nonzero output is wrong when y = 0 exactly. */
    out[3] = 0x0001;
    ref_verify(&p, &t, out, &r);
    ck_assert_int_eq(r.grade, QV_FAIL);
    case_release(&p, &t);
}
END_TEST

/* A systematic bias inside the bound is MARGINAL (not PASS, not FAIL); where
 * the bound is below the output rounding (exact int32 rows), rounding upward
 * instead of RNE is a FAIL (bug class 17). */
START_TEST(bias_is_marginal)
{
    qv_problem p;
    case_fill_row(&p, "marlin-w4a16-g128-f16", 16, 64, 256, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 11);
    ref_truth t;
    case_truth(&p, &t);
    uint16_t *out = malloc(16 * 64 * 2);
    for (int e = 0; e < 16 * 64; e++) out[e] = (uint16_t)qv_encode(QV_FMT_F16, t.y[e] + 0.3 * t.bound[e], QV_SAT_NONE);
    qv_result r;
    ref_verify(&p, &t, out, &r);
    printf("biased output: %s z=%.3g p99=%.3g %s\n", qv_grade_name(r.grade), r.bias_z, r.p99_err_over_bound,
           r.reason);
    ck_assert_int_eq(r.grade, QV_MARGINAL);
    case_release(&p, &t);

    case_fill_row(&p, "w8a8-i8-tok-ch", 16, 64, 256, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 11);
    case_truth(&p, &t);
    for (int e = 0; e < 16 * 64; e++) {
        uint16_t c = (uint16_t)qv_encode(QV_FMT_F16, t.y[e], QV_SAT_NONE);
        if (qv_decode(QV_FMT_F16, c) < t.y[e]) c = code_above(c);
        out[e] = c;
    }
    ref_verify(&p, &t, out, &r);
    ck_assert_int_eq(r.grade, QV_FAIL);
    free(out);
    case_release(&p, &t);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = suite_single("verify", "verify", 60, &tc);
    tcase_add_test(tc, golden_qqq_pass);
    tcase_add_test(tc, golden_qqq_mutations_fail);
    tcase_add_loop_test(tc, tamper_names_element, 0, qv_registry_count());
    tcase_add_test(tc, vacuous_refused);
    tcase_add_test(tc, bias_is_marginal);
    return suite_run(s);
}
