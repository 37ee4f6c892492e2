/* t_seed_scenario.c: the seed bug as a named regression (docs/design.md §5, §6 class
 * 1). Marlin's fp8 W8A16 path ran with channelwise scales that were never
 * permuted (scale_perm_single), and its tests passed because every channel
 * repeated one scale. Here the buggy packing is built explicitly: qv_pack's
 * output with the channel scales put back in logical order while the packed
 * operand still declares the scale_perm_single order the kernel reads. The
 * "kernel" is the CPU model run on what a kernel would see (ref_unpack of the
 * packed operand); the verdict is qvet's (ref_truth_compute + ref_verify on the
 * original problem). Expected, for marlin-fp8a16-ch-f16 and -bf16:
 *   - one scale repeated in every channel: the bug is invisible (PASS);
 *   - distinct log-uniform scales: qvet FAILs;
 *   - the correct packing PASSes both (control).
 * Each case prints one line "seed scenario: ..." with its verdict and the
 * field's usual criteria; tools/mutants.py copies those lines into kill.md. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/layout.h"
#include "qvet/probe.h"
#include "qvet/reference.h"

#include "support/suite.h"

#define SEED 20261129ull /* the date of the regression; case i uses SEED + i */
#define M 16             /* one Marlin row tile */
#define N 256            /* 8 scale_perm_single blocks of 32 channels */
#define K 256

static const char *const variants[] = {"marlin-fp8a16-ch-f16", "marlin-fp8a16-ch-bf16"};

/* Sets every channel scale to the first one: the tests that hid the bug. */
static void repeat_one_scale(qv_problem *p)
{
    size_t es = qv_fmt_storage_bytes(p->v->sfmt);
    for (int64_t j = 1; j < p->n; j++) memcpy((char *)p->scales + (size_t)j * es, p->scales, es);
}

/* The bug: the packed channel scales (pk->scales, (1, n), already holding the
 * fp8 exponent fold) put back in logical order, while pk->s_order still says
 * scale_perm_single, which is the order the kernel reads. */
static void unpermute_scales(qv_packed *pk)
{
    ck_assert_int_eq(pk->s_order, QV_SORDER_CHANNEL32);
    int perm[32];
    qv_scale_perm_single(perm); /* packed[32b + i] = logical[32b + perm[i]] */
    size_t es = pk->s_elem;
    int64_t cols = pk->s_cols;
    char *tmp = malloc((size_t)cols * es);
    ck_assert_ptr_nonnull(tmp);
    for (int64_t c = 0; c < cols; c++)
        memcpy(tmp + (size_t)(c - c % 32 + perm[c % 32]) * es, (char *)pk->scales + (size_t)c * es, es);
    memcpy(pk->scales, tmp, (size_t)cols * es);
    free(tmp);
}

/* Runs problem p through (buggy or correct) packing, the decoder and the CPU
 * model; grades the output against p's truth. Prints one report line. */
static qv_grade run_case(const qv_problem *p, int buggy, const char *scales_kind, qv_result *res)
{
    qv_packed pk;
    ck_assert_int_eq(qv_pack(p, &pk), QV_OK);
    if (buggy) unpermute_scales(&pk);
    qv_problem d;
    ck_assert_int_eq(qv_problem_clone(&d, p), QV_OK);
    ck_assert_int_eq(ref_unpack(&pk, &d), QV_OK);
    qv_packed_destroy(&pk);

    size_t es = qv_fmt_storage_bytes(p->v->ofmt);
    void *out = malloc((size_t)(p->m * p->n) * es);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(ref_model_run(&d, out), QV_OK);
    qv_problem_destroy(&d);

    ref_truth t;
    ck_assert_int_eq(ref_truth_compute(p, &t), QV_OK);
    ref_verify(p, &t, out, res);

    int64_t count = p->m * p->n;
    double *c = malloc((size_t)count * sizeof *c);
    ck_assert_ptr_nonnull(c);
    for (int64_t e = 0; e < count; e++) {
        uint32_t code = 0;
        memcpy(&code, (char *)out + (size_t)e * es, es); /* little-endian */
        c[e] = qv_decode(p->v->ofmt, code);
    }
    qv_criteria cr;
    qv_usual_criteria(c, t.y_rn, count, &cr);
    printf("seed scenario: %s, %s scales, %s packing: qvet %s (max err/E %.3g); "
           "Marlin %s, vLLM %s, cosine %s, NMSE %s (mean rel %.3g)\n",
           p->v->name, scales_kind, buggy ? "unpermuted (bug)" : "correct", qv_grade_name(res->grade),
           res->max_err_over_bound, cr.marlin_pass ? "passes" : "fails", cr.vllm_pass ? "passes" : "fails",
           cr.cosine_pass ? "passes" : "fails", cr.nmse_pass ? "passes" : "fails", cr.mean_rel);
    fflush(stdout);
    free(c);
    free(out);
    ref_truth_clear(&t);
    return res->grade;
}

/* A random problem of the variant (log-uniform, distinct channel scales). */
static void make_problem(qv_problem *p, const char *name, uint64_t seed)
{
    const qv_variant *v = qv_variant_find(name);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(qv_problem_create(p, v, M, N, K), QV_OK);
    ck_assert_int_eq(ref_probe_fill(p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, seed), QV_OK);
}

START_TEST(bug_20261129_fp8_channel_scales_unpermuted)
{
    uint64_t seed = SEED + (uint64_t)_i;
    printf("seed %llu, %s\n", (unsigned long long)seed, variants[_i]);
    qv_problem p;
    qv_result res;
    make_problem(&p, variants[_i], seed);
    /* Distinct scales: qvet sees the bug. */
    ck_assert_int_eq(run_case(&p, 1, "distinct", &res), QV_FAIL);
    ck_assert_int_gt(res.n_fail, 0);
    /* One scale repeated in every channel: the permutation has nothing to move. */
    repeat_one_scale(&p);
    ck_assert_int_eq(run_case(&p, 1, "repeated", &res), QV_PASS);
    qv_problem_destroy(&p);
}
END_TEST

START_TEST(correct_packing_passes_both)
{
    uint64_t seed = SEED + (uint64_t)_i;
    printf("seed %llu, %s\n", (unsigned long long)seed, variants[_i]);
    qv_problem p;
    qv_result res;
    make_problem(&p, variants[_i], seed);
    ck_assert_int_eq(run_case(&p, 0, "distinct", &res), QV_PASS);
    repeat_one_scale(&p);
    ck_assert_int_eq(run_case(&p, 0, "repeated", &res), QV_PASS);
    qv_problem_destroy(&p);
}
END_TEST

static Suite *seed_suite(void)
{
    Suite *s = suite_create("seed_scenario");
    TCase *t = tcase_create("fp8_channel_scales");
    int nv = (int)(sizeof variants / sizeof variants[0]);
    tcase_add_loop_test(t, bug_20261129_fp8_channel_scales_unpermuted, 0, nv);
    tcase_add_loop_test(t, correct_packing_passes_both, 0, nv);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return suite_run(seed_suite());
}
