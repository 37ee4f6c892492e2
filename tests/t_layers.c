/* t_layers.c: the libraries' layers. The examples a user's program follows
 * (examples/verify_buffers.c and verify_moe.c, linked against libqvet_cpu.a
 * alone) run and grade a correct output PASS and a wrong one FAIL at the
 * element (or the routing of the token) it changed;
 * qv_verify gives the verdict of ref_truth_compute + ref_verify; every
 * registry row with gpu_kernel = 1 reaches a launcher through the GPU
 * library's table by its family, and a spec reaches none. Needs no GPU. */
#include <check.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "qvet/gemm.h"
#include "qvet/qvet.h"

#include "support/run.h"
#include "support/suite.h"

#define SEED 20261204ull /* the date the suite was written */

/* BUILD/examples/NAME, from this binary's path BUILD/tests/t_layers. */
static const char *example_of(const char *name)
{
    static char bin[4200];
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(bin, sizeof bin, "build/examples/%s", name);
        return bin;
    }
    self[n] = '\0';
    snprintf(bin, sizeof bin, "%s/../examples/%s", dirname(self), name);
    return bin;
}
static const char *example_path(void) { return example_of("verify_buffers"); }

/* The routed example: its own layer passes; scoring the groups not kept 0.0
 * where -Inf is declared fails the first token whose biased scores are all
 * below 0 (token 3), on its routing. */
START_TEST(moe_example_verdicts)
{
    run_result r = run_program(example_of("verify_moe"), (const char *[]){NULL});
    ck_assert_msg(r.rc == 0 && !strncmp(r.out, "PASS", 4), "exit %d; stdout: %s stderr: %s", r.rc, r.out, r.err);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    r = run_program(example_of("verify_moe"), (const char *[]){"mask0", NULL});
    ck_assert_msg(r.rc == 1, "exit %d; stdout: %s stderr: %s", r.rc, r.out, r.err);
    ck_assert_msg(strstr(r.out, "FAIL: routing: token 3 took expert") != NULL, "stdout: %s", r.out);
    ck_assert_msg(strstr(r.out, "not among the 2 groups kept") != NULL, "stdout: %s", r.out);
    run_free(&r);
}
END_TEST

START_TEST(example_passes_a_correct_output)
{
    run_result r = run_program(example_path(), (const char *[]){NULL});
    ck_assert_msg(r.rc == 0, "exit %d; stdout: %s stderr: %s", r.rc, r.out, r.err);
    ck_assert_msg(!strncmp(r.out, "PASS", 4), "stdout: %s", r.out);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
}
END_TEST

/* `wrong` adds 1 to C[0][5] of the 8 x 64 output: exactly that element fails. */
START_TEST(example_fails_a_wrong_output)
{
    run_result r = run_program(example_path(), (const char *[]){"wrong", NULL});
    ck_assert_msg(r.rc == 1, "exit %d; stdout: %s stderr: %s", r.rc, r.out, r.err);
    ck_assert_msg(!strncmp(r.out, "FAIL: 1 of 512 elements fail; first at (0, 5)", 45), "stdout: %s", r.out);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
}
END_TEST

/* qv_verify on a registry row's random probe, with the CPU model's output and
 * with one element moved past its bound: the verdicts and counts of the
 * reference's two calls. */
START_TEST(qv_verify_is_truth_and_verdict)
{
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-f16");
    ck_assert_ptr_nonnull(v);
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, 4, 64, 256), QV_OK);
    ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, SEED), QV_OK);
    uint16_t out[4 * 64];
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    ref_truth t;
    ck_assert_int_eq(ref_truth_compute(&p, &t), QV_OK);
    for (int wrong = 0; wrong < 2; wrong++) {
        /* (1, 6) moved to y + 2E + 2 ulps: past the output rounding of y + E */
        if (wrong) out[70] = qv_f64_to_f16(t.y[70] + 2 * t.bound[70] + 2 * qv_ulp(QV_FMT_F16, t.y[70]));
        qv_result a, b;
        ck_assert_int_eq(qv_verify(&p, out, &a), QV_OK);
        ref_verify(&p, &t, out, &b);
        ck_assert_int_eq(a.grade, wrong ? QV_FAIL : QV_PASS);
        ck_assert_int_eq(a.grade, b.grade);
        ck_assert_int_eq(a.n_fail, wrong);
        ck_assert_int_eq(a.n_fail, b.n_fail);
        ck_assert_str_eq(a.reason, b.reason);
    }
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

START_TEST(every_kernel_row_has_a_launcher)
{
    int rows = 0;
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        const qv_launcher *l = qv_gpu_launcher(v);
        ck_assert_msg((l != NULL) == (v->gpu_kernel != 0), "%s: gpu_kernel %d, launcher %p", v->name, v->gpu_kernel,
                      (const void *)l);
        if (!l) continue;
        rows++;
        ck_assert_str_eq(l->family, v->family);
        ck_assert_ptr_nonnull(l->launch);
    }
    ck_assert_int_gt(rows, 0);
}
END_TEST

START_TEST(a_spec_has_no_launcher)
{
    const qv_variant *v;
    ck_assert_int_eq(qv_spec_parse("w=u4b8,ws=f16/g128,a=f16", &v), QV_OK);
    ck_assert_int_eq(v->gpu_kernel, 0);
    ck_assert_ptr_null(qv_gpu_launcher(v));
    qv_gemm_args args;
    memset(&args, 0, sizeof args);
    ck_assert_int_eq(qv_gpu_launch(v, &args), QV_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(qv_errmsg(), "has no GPU kernel") != NULL, "%s", qv_errmsg());
    ck_assert_uint_eq(qv_gpu_workspace(v, 16, 4096, 4096, NULL), 0);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = suite_single("layers", "layers", 60, &tc);
    tcase_add_test(tc, example_passes_a_correct_output);
    tcase_add_test(tc, example_fails_a_wrong_output);
    tcase_add_test(tc, moe_example_verdicts);
    tcase_add_test(tc, qv_verify_is_truth_and_verdict);
    tcase_add_test(tc, every_kernel_row_has_a_launcher);
    tcase_add_test(tc, a_spec_has_no_launcher);
    return suite_run(s);
}
