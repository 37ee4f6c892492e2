/* t_criteria.c: the field's usual criteria (src/criteria.c) on hand-computed
 * inputs, so the mutation report's "would have passed" columns are right. */
#include <check.h>
#include <math.h>

#include "qvet/result.h"

#include "support/suite.h"

START_TEST(identical_output_passes_everything)
{
    double ref[4] = {1, -2, 3, -4};
    qv_criteria c;
    qv_usual_criteria(ref, ref, 4, &c);
    ck_assert_double_eq(c.mean_rel, 0);
    ck_assert_double_eq_tol(c.cosine, 1, 1e-15);
    ck_assert_double_eq(c.nmse, 0);
    ck_assert(c.marlin_pass && c.vllm_pass && c.cosine_pass && c.nmse_pass);
}
END_TEST

START_TEST(one_percent_scale_error)
{
    /* C = 1.01 ref: mean_rel = 0.01 (Marlin's 1e-3 fails, vLLM's 0.04 passes),
     * cosine = 1 exactly in real arithmetic, NMSE = 1e-4 < 5e-4 passes. */
    double ref[4] = {1, -2, 3, -4}, out[4];
    for (int i = 0; i < 4; i++) out[i] = 1.01 * ref[i];
    qv_criteria c;
    qv_usual_criteria(out, ref, 4, &c);
    ck_assert_double_eq_tol(c.mean_rel, 0.01, 1e-12);
    ck_assert_double_eq_tol(c.nmse, 1e-4, 1e-12);
    ck_assert(!c.marlin_pass);
    ck_assert(c.vllm_pass);
    ck_assert(c.cosine_pass);
    ck_assert(c.nmse_pass);
}
END_TEST

START_TEST(swapped_pair_fails_all_but_loose)
{
    /* Swapping 1 and -4: |err| sum = 5+5 = 10 over |ref| sum 10: mean_rel = 1. */
    double ref[4] = {1, -2, 3, -4}, out[4] = {-4, -2, 3, 1};
    qv_criteria c;
    qv_usual_criteria(out, ref, 4, &c);
    ck_assert_double_eq_tol(c.mean_rel, 1.0, 1e-15);
    ck_assert_double_eq_tol(c.cosine, (-4.0 + 4 + 9 - 4) / 30.0, 1e-15);
    ck_assert_double_eq_tol(c.nmse, 50.0 / 30.0, 1e-15);
    ck_assert(!c.marlin_pass && !c.vllm_pass && !c.cosine_pass && !c.nmse_pass);
}
END_TEST

START_TEST(nan_never_passes)
{
    double ref[3] = {1, 2, 3}, out[3] = {1, NAN, 3};
    qv_criteria c;
    qv_usual_criteria(out, ref, 3, &c);
    ck_assert(!c.marlin_pass && !c.vllm_pass && !c.cosine_pass && !c.nmse_pass);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("criteria");
    TCase *tc = tcase_create("usual");
    tcase_add_test(tc, identical_output_passes_everything);
    tcase_add_test(tc, one_percent_scale_error);
    tcase_add_test(tc, swapped_pair_fails_all_but_loose);
    tcase_add_test(tc, nan_never_passes);
    suite_add_tcase(s, tc);
    return suite_run(s);
}
