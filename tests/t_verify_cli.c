/* t_verify_cli.c: `qvet verify` as a user runs it: exit 0 for PASS, 1 for FAIL,
 * 2 for usage and input errors; --json carries the verdict, the bound ratio, the
 * ULP distance, NMSE and the worst element. Runs $(BUILD)/qvet next to this test
 * binary, from the repository root (golden vectors: tests/data/golden or QVET_GOLDEN). */
#include <check.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qvet/array.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "support/golden.h"

static char qvet[4096];
static char tmpdir[] = "/tmp/qvet_verify_cli_XXXXXX";
static char out_buf[65536];

/* Runs qvet with args (a shell fragment); returns its exit status, stdout in out_buf. */
static int run(const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", qvet, args);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, f);
    out_buf[n] = 0;
    int st = pclose(f);
    ck_assert_msg(WIFEXITED(st), "qvet did not exit normally: %s", cmd);
    return WEXITSTATUS(st);
}

static void qqq_ch_args(char *buf, size_t len, const char *scales_name, int m_a, int m_out, const char *extra)
{
    const char *g = golden_root();
    snprintf(buf, len,
             "verify qqq-w4a8-ch --a %s/qqq_w4a8_k128_n256_g-1/A_m%d_int8.npy "
             "--a-scale %s/qqq_w4a8_k128_n256_g-1/s_token_m%d_f32.npy "
             "--q %s/qqq_w4a8_k128_n256_g-1/q_logical_kxn_int4.npy "
             "--scales %s/qqq_w4a8_k128_n256_g-1/%s.npy "
             "--out %s/qqq_w4a8_k128_n256_g-1/D_qqq_kernel_m%d_f16.npy %s",
             g, m_a, g, m_a, g, g, scales_name, g, m_out, extra);
}

START_TEST(golden_pass_and_fail)
{
    char a[4096];
    qqq_ch_args(a, sizeof a, "s_channel_logical_1xn_f32", 16, 16, "");
    ck_assert_int_eq(run(a), 0);
    ck_assert_ptr_nonnull(strstr(out_buf, "PASS"));
    qqq_ch_args(a, sizeof a, "s_channel_logical_1xn_f32", 33, 33, "--json");
    ck_assert_int_eq(run(a), 0);
    const char *keys[] = {"\"verdict\":\"PASS\"", "\"max_err_over_bound\":", "\"max_ulp\":", "\"nmse\":",
                          "\"worst\":{\"m\":"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(out_buf, keys[i]) != NULL, "JSON lacks %s: %s", keys[i], out_buf);
    ck_assert_int_eq(out_buf[0], '{');
    /* Channel scales in the packed (permuted) order: the seed bug's shape. */
    qqq_ch_args(a, sizeof a, "s_channel_packed_f32", 16, 16, "--json");
    ck_assert_int_eq(run(a), 1);
    ck_assert_ptr_nonnull(strstr(out_buf, "\"verdict\":\"FAIL\""));
}
END_TEST

START_TEST(usage_and_input_errors)
{
    char a[4096];
    ck_assert_int_eq(run("verify"), 2);
    ck_assert_int_eq(run("verify --help"), 0);
    ck_assert_ptr_nonnull(strstr(out_buf, "usage: qvet verify"));
    ck_assert_int_eq(run("verify no-such-variant --a x.npy --out y.npy"), 2);
    ck_assert_int_eq(run("verify qqq-w4a8-ch --bogus"), 2);
    qqq_ch_args(a, sizeof a, "s_channel_logical_1xn_f32", 16, 7, ""); /* M differs */
    ck_assert_int_eq(run(a), 2);
    qqq_ch_args(a, sizeof a, "no_such_file", 16, 16, "");
    ck_assert_int_eq(run(a), 2);
    qqq_ch_args(a, sizeof a, "A_m16_int8", 16, 16, ""); /* int8 where f32 scales belong */
    ck_assert_int_eq(run(a), 2);
    qqq_ch_args(a, sizeof a, "s_channel_logical_1xn_f32", 16, 16, "--path bogus"); /* no such reference path */
    ck_assert_int_eq(run(a), 2);
    qqq_ch_args(a, sizeof a, "s_channel_logical_1xn_f32", 16, 16, "--zeros /dev/null");
    ck_assert_int_eq(run(a), 2);
}
END_TEST

static void save(const char *name, qv_dtype dt, int64_t d0, int64_t d1, const void *data)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    qv_array a;
    int64_t shape[2] = {d0, d1};
    ck_assert_int_eq(qv_array_create(&a, dt, 2, shape), QV_OK);
    memcpy(a.data, data, a.nbytes);
    ck_assert_int_eq(qv_npy_save(path, &a), QV_OK);
    qv_array_destroy(&a);
}

/* A generated W4A16 g128 case: the model's output passes, one tampered element
 * fails and the JSON names it; the packed weights give the same verdict. */
START_TEST(generated_case_and_tamper)
{
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-f16");
    int64_t m = 3, n = 128, k = 256;
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, m, n, k), QV_OK);
    ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 77), QV_OK);
    uint16_t out[3 * 128];
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    save("A.npy", QV_DT_F2, m, k, p.a);
    save("Q.npy", QV_DT_U1, k, n, p.q);
    save("S.npy", QV_DT_F2, k / 128, n, p.scales);
    save("C.npy", QV_DT_F2, m, n, out);
    char a[4096];
    snprintf(a, sizeof a, "verify %s --a %s/A.npy --q %s/Q.npy --scales %s/S.npy --out %s/C.npy", v->name, tmpdir,
             tmpdir, tmpdir, tmpdir);
    ck_assert_int_eq(run(a), 0);
    /* Half the value of element (2, 77): far outside any bound. */
    out[2 * n + 77] = (uint16_t)qv_encode(QV_FMT_F16, qv_decode(QV_FMT_F16, out[2 * n + 77]) * 0.5 + 1.0, QV_SAT_NONE);
    save("C.npy", QV_DT_F2, m, n, out);
    snprintf(a, sizeof a, "verify %s --a %s/A.npy --q %s/Q.npy --scales %s/S.npy --out %s/C.npy --json", v->name,
             tmpdir, tmpdir, tmpdir, tmpdir);
    ck_assert_int_eq(run(a), 1);
    ck_assert_msg(strstr(out_buf, "\"worst\":{\"m\":2,\"n\":77") != NULL, "worst element not named: %s", out_buf);
    /* The same weights through qvet pack and the reference's decoder. */
    snprintf(a, sizeof a, "pack marlin-w4 --q %s/Q.npy --scales %s/S.npy -o %s/pk", tmpdir, tmpdir, tmpdir);
    ck_assert_int_eq(run(a), 0);
    snprintf(a, sizeof a, "verify %s --a %s/A.npy --packed %s/pk --out %s/C.npy", v->name, tmpdir, tmpdir, tmpdir);
    ck_assert_int_eq(run(a), 1);
    snprintf(a, sizeof a, "verify %s --a %s/A.npy --packed %s/pk --q %s/Q.npy --out %s/C.npy", v->name, tmpdir, tmpdir,
             tmpdir, tmpdir);
    ck_assert_int_eq(run(a), 2);
    qv_problem_destroy(&p);
}
END_TEST

/* The 128x128-block fp8 row through the CLI: its activation scales are
 * (ceil(K/128), M), MN-major. The model's output passes with them; the same
 * numbers in the token-major (M, ceil(K/128)) shape are refused as a shape
 * error, and token-major contents in the MN-major shape give a FAIL (the
 * verifier reads the layout, not just the shape). */
START_TEST(block_row_mn_major_scales)
{
    const qv_variant *v = qv_variant_find("w8a8-fp8-block128");
    ck_assert_ptr_nonnull(v);
    enum { M = 5, N = 136, K = 384, KB = 3, NB = 2 };
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, M, N, K), QV_OK);
    ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 91), QV_OK);
    /* Distinct scales per (group, token), so a transposed read cannot agree. */
    for (int b = 0; b < KB; b++)
        for (int i = 0; i < M; i++) p.a_scale[b * M + i] = (float)(0.25 * (1 + b + KB * i));
    static uint16_t out[M * N];
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    save("A8.npy", QV_DT_U1, M, K, p.a);
    save("Q8.npy", QV_DT_U1, K, N, p.q);
    save("S8.npy", QV_DT_F4, KB, NB, p.scales);
    save("SA.npy", QV_DT_F4, KB, M, p.a_scale);
    save("C8.npy", QV_DT_F2, M, N, out);
    float tok[M * KB];
    for (int b = 0; b < KB; b++)
        for (int i = 0; i < M; i++) tok[i * KB + b] = p.a_scale[b * M + i];
    save("SA_tok.npy", QV_DT_F4, M, KB, tok);
    save("SA_tok_as_mn.npy", QV_DT_F4, KB, M, tok);
    char a[4096];
    const char *names[] = {"SA.npy", "SA_tok.npy", "SA_tok_as_mn.npy"};
    const int want[] = {0, 2, 1};
    for (int t = 0; t < 3; t++) {
        snprintf(a, sizeof a, "verify %s --a %s/A8.npy --a-scale %s/%s --q %s/Q8.npy --scales %s/S8.npy --out %s/C8.npy",
                 v->name, tmpdir, tmpdir, names[t], tmpdir, tmpdir, tmpdir);
        ck_assert_msg(run(a) == want[t], "%s: exit status, expected %d", names[t], want[t]);
    }
    qv_problem_destroy(&p);
}
END_TEST

int main(int argc, char **argv)
{
    (void)argc;
    char self[4096];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(qvet, sizeof qvet, "%s/../qvet", dirname(self));
    if (access(qvet, X_OK) != 0) {
        fprintf(stderr, "t_verify_cli: %s not found: build it first (make BUILD=... all)\n", qvet);
        return EXIT_FAILURE;
    }
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("verify_cli");
    TCase *tc = tcase_create("verify_cli");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, golden_pass_and_fail);
    tcase_add_test(tc, usage_and_input_errors);
    tcase_add_test(tc, generated_case_and_tamper);
    tcase_add_test(tc, block_row_mn_major_scales);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "t_verify_cli: could not remove %s\n", tmpdir);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
