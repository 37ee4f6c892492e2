/* t_gpu_campaign.c: the campaign's device-pointer path on the GPU: the path a
 * QV_PLUGIN_DEVICE plugin takes (qv_gpu_run with a forwarding launch). A launch
 * function that forwards to qvet's own kernels passes generated cases and
 * repeats them bit for bit; one that leaves the last output row unwritten is
 * caught (poison) and shrunk to a case that still fails. Without a CUDA device
 * the suite prints exactly "SKIP: no CUDA device" and makes no CUDA call; it
 * runs with fork disabled so no CUDA context crosses a fork. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "internal/campaign.h"
#include "internal/gpu.h"
#include "support/gpu.h"

/* The date the suite was written; QVET_SEED replaces it. */
static uint64_t g_seed = 20261129;

static int drop_last_row;

/* A device-pointer "plugin" launch: qvet's own kernel for the row, optionally
 * told one row fewer than the output has. */
static int forward_launch(const char *variant, const qv_gemm_args *args)
{
    const qv_variant *v = qv_variant_find(variant);
    if (!v || !v->gpu_kernel) return 1;
    qv_gemm_args a = *args;
    if (drop_last_row && a.m > 1) a.m -= 1;
    return qv_gpu_launch(v, &a) != QV_OK;
}

static const char *only[QV_GEN_MAX_VARIANTS];

static qv_backend device_backend(const char *glob)
{
    qv_backend b;
    qv_backend_init(&b, QV_BACKEND_DEVICE_FN);
    snprintf(b.name, sizeof b.name, "plugin:forward");
    int n = 0;
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (v->gpu_kernel && qv_variant_match(v, glob)) only[n++] = v->name;
    }
    b.launch = forward_launch;
    b.only = only;
    b.n_only = n;
    return b;
}

START_TEST(forwarded_kernels_pass_and_repeat)
{
    drop_last_row = 0;
    qv_backend b = device_backend(NULL);
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, NULL, &b), QV_OK);
    for (int64_t j = 0; j < 30; j++) {
        qv_case c;
        qv_gen_case(&gen, g_seed, j, &c);
        qv_problem p;
        ck_assert_int_eq(qv_case_build(&c, &p), QV_OK);
        int unique = ref_probe_is_unique(c.probe);
        qv_outcome o1, o2;
        ck_assert_int_eq(qv_case_run(&b, &p, unique, &o1), QV_OK);
        ck_assert_msg(o1.res.grade != QV_FAIL, "seed %llu case %lld (%s %lld x %lld x %lld): %s",
                      (unsigned long long)g_seed, (long long)j, c.v->name, (long long)c.m, (long long)c.n,
                      (long long)c.k, o1.res.reason);
        ck_assert_int_eq(qv_case_run(&b, &p, unique, &o2), QV_OK);
        ck_assert(memcmp(o1.out, o2.out, (size_t)qv_problem_out_bytes(&p)) == 0);
        qv_outcome_clear(&o1);
        qv_outcome_clear(&o2);
        qv_problem_destroy(&p);
    }
}
END_TEST

START_TEST(unwritten_row_caught_and_shrunk)
{
    drop_last_row = 1;
    qv_backend b = device_backend("w8a8-i8-tok-ch");
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, NULL, &b), QV_OK);
    int found = 0;
    for (int64_t j = 0; j < 20 && !found; j++) {
        qv_case c;
        qv_gen_case(&gen, g_seed, j, &c);
        if (c.m < 2) continue;
        qv_problem p;
        ck_assert_int_eq(qv_case_build(&c, &p), QV_OK);
        int unique = ref_probe_is_unique(c.probe);
        qv_outcome o;
        ck_assert_int_eq(qv_case_run(&b, &p, unique, &o), QV_OK);
        ck_assert_int_eq(o.res.grade, QV_FAIL);
        ck_assert_int_eq(o.res.n_unwritten, p.n);
        qv_outcome_clear(&o);
        qv_problem small;
        qv_shrunk sh;
        ck_assert_int_eq(qv_shrink(&b, &p, unique, 120, &small, &sh), QV_OK);
        ck_assert(sh.m <= p.m && sh.n <= p.n && sh.k <= p.k);
        ck_assert_int_eq(qv_case_run(&b, &small, unique, &o), QV_OK);
        ck_assert_int_eq(o.res.grade, QV_FAIL);
        qv_outcome_clear(&o);
        qv_problem_destroy(&small);
        qv_problem_destroy(&p);
        found = 1;
    }
    ck_assert(found);
    drop_last_row = 0;
}
END_TEST

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    /* The rows the first test forwards to: every row with a kernel. */
    const qv_backend all = device_backend(NULL);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_campaign", gpu, g_seed, all.n_only, &tc);
    if (gpu) {
        tcase_add_test(tc, forwarded_kernels_pass_and_repeat);
        tcase_add_test(tc, unwritten_row_caught_and_shrunk);
    }
    return gpu_suite_run(s);
}
