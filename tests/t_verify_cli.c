/* t_verify_cli.c: `qvet verify` as a user runs it: exit 0 for PASS, 1 for FAIL,
 * 2 for usage and input errors; --json carries the verdict, the bound ratio, the
 * ULP distance, NMSE, the worst element and the canonical spec. A row's spec
 * gives the row's verdict on the golden QQQ vectors; every array of every
 * format of the spec grammar loads in its documented convention, and a wrong
 * dtype, a wrong shape, an out-of-range code or a missing file is refused with
 * a one-line message naming the option (exit 2). Runs $(BUILD)/qvet next to
 * this test binary, from the repository root (golden vectors: tests/data/golden
 * or QVET_GOLDEN). */
#include <check.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal/campaign.h"
#include "internal/cli.h"
#include "qvet/array.h"
#include "qvet/formats.h"
#include "qvet/layout.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "qvet/spec.h"
#include "support/golden.h"
#include "support/run.h"

static char qvet[4096];
static char tmpdir[] = "/tmp/qvet_verify_cli_XXXXXX";
static char out_buf[65536];

/* Runs qvet with args (a shell fragment) and `redirect` for its stderr;
 * returns its exit status, what it printed in out_buf. */
static int run_with(const char *args, const char *redirect)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s %s", qvet, args, redirect);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, f);
    out_buf[n] = 0;
    int st = pclose(f);
    ck_assert_msg(WIFEXITED(st), "qvet did not exit normally: %s", cmd);
    return WEXITSTATUS(st);
}

/* Runs qvet with args; stdout in out_buf. */
static int run(const char *args) { return run_with(args, "2>/dev/null"); }

/* As run(), with stderr in out_buf after stdout. */
static int run_both(const char *args) { return run_with(args, "2>&1"); }

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

/* --jobs: the JSON of a generated case is the same bytes on 1, 2 and 3
 * threads. The shape (64 x 2048 x 64: 8 blocks of the verdict, 2 chunks and
 * 4 buckets of the bias monitor, 2^23 multiply-adds on the digit-GEMM path)
 * splits every threaded stage; one row finishes y in MPFR-free doubles
 * (marlin-w8a16-ch-f16: a channel scale in the epilogue), the other adds the
 * sums alone (marlin-w4a16-g128-f16), and one tampered element makes the
 * first and worst elements matter. A --jobs that is not a count from 1 to
 * 1024 exits 2 and names the option. */
START_TEST(jobs_same_bits)
{
    const char *rows[] = {"marlin-w4a16-g128-f16", "marlin-w8a16-ch-f16"};
    const int64_t m = 64, n = 2048, k = 128;
    static uint16_t out[64 * 2048];
    static char json1[sizeof out_buf];
    for (int r = 0; r < 2; r++) {
        const qv_variant *v = qv_variant_find(rows[r]);
        ck_assert_ptr_nonnull(v);
        qv_problem p;
        ck_assert_int_eq(qv_problem_create(&p, v, m, n, k), QV_OK);
        ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 4242 + (uint64_t)r), QV_OK);
        ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
        out[37 * n + 1001] = (uint16_t)qv_encode(QV_FMT_F16, qv_decode(QV_FMT_F16, out[37 * n + 1001]) * 0.5 + 1.0,
                                                 QV_SAT_NONE);
        save("A.npy", QV_DT_F2, m, k, p.a);
        save("Q.npy", QV_DT_U1, k, n, p.q);
        save("S.npy", QV_DT_F2, qv_problem_scale_rows(&p), qv_problem_scale_cols(&p), p.scales);
        save("C.npy", QV_DT_F2, m, n, out);
        char a[4096];
        for (int jobs = 1; jobs <= 3; jobs++) {
            snprintf(a, sizeof a, "verify %s --a %s/A.npy --q %s/Q.npy --scales %s/S.npy --out %s/C.npy --json --jobs %d",
                     v->name, tmpdir, tmpdir, tmpdir, tmpdir, jobs);
            ck_assert_int_eq(run(a), 1);
            ck_assert_msg(strstr(out_buf, "\"ref_path\":\"ozaki\"") != NULL, "%s: not the digit-GEMM path: %s",
                          v->name, out_buf);
            ck_assert_msg(strstr(out_buf, "\"worst\":{\"m\":37,\"n\":1001") != NULL, "%s: %s", v->name, out_buf);
            if (jobs == 1)
                snprintf(json1, sizeof json1, "%s", out_buf);
            else
                ck_assert_msg(!strcmp(json1, out_buf), "%s --jobs %d differs from --jobs 1:\n%s\n%s", v->name, jobs,
                              out_buf, json1);
        }
        qv_problem_destroy(&p);
    }
    const char *bad[] = {"0", "-2", "1025", "two", "3x", ""};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        char a[4096];
        snprintf(a, sizeof a, "verify marlin-w4a16-g128-f16 --a %s/A.npy --q %s/Q.npy --scales %s/S.npy --out %s/C.npy "
                 "--jobs '%s'", tmpdir, tmpdir, tmpdir, tmpdir, bad[b]);
        ck_assert_int_eq(run_both(a), 2);
        ck_assert_msg(strstr(out_buf, "--jobs") != NULL && strstr(out_buf, "not an integer in [1, 1024]") != NULL,
                      "--jobs '%s': %s", bad[b], out_buf);
    }
}
END_TEST

/* Every FP4 row through the CLI: a random case's CPU-model output passes
 * with the logical arrays and with the `qvet pack` folder of the row's
 * layout (its activation format, its bias in the folder); one element off
 * fails both ways; --bias beside an FP4 folder, a folder without the bias a
 * bias row adds, and a partial last scale block are refused. */
START_TEST(fp4_rows_logical_and_packed)
{
    const qv_variant *v = qv_registry_get(_i);
    if (!qv_layout_is_fp4(v->layout)) return;
    const int nv = v->layout == QV_LAYOUT_MARLIN_FP4_NV, bias = v->bias_fmt != QV_FMT_NONE;
    const qv_dtype hdt = v->afmt == QV_FMT_F16 ? QV_DT_F2 : QV_DT_U2;
    int64_t m = 3, n = 64, k = 4 * v->g;
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, m, n, k), QV_OK);
    ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 31 + (uint64_t)_i), QV_OK);
    uint16_t out[3 * 64];
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    save("A.npy", hdt, m, k, p.a);
    save("Q.npy", QV_DT_U1, k, n, p.q);
    save("S.npy", QV_DT_U1, k / v->g, n, p.scales);
    save("C.npy", hdt, m, n, out);
    if (nv) save("S2.npy", QV_DT_F4, 1, 1, p.scales2);
    uint16_t bcodes[64];
    for (int64_t j = 0; bias && j < n; j++) bcodes[j] = (uint16_t)qv_encode(v->bias_fmt, p.bias[j], QV_SAT_NONE);
    if (bias) save("B.npy", hdt, 1, n, bcodes);
    char s2[512] = "", bs[512] = "", a[4096];
    if (nv) snprintf(s2, sizeof s2, " --scales2 %s/S2.npy", tmpdir);
    if (bias) snprintf(bs, sizeof bs, " --bias %s/B.npy", tmpdir);
    snprintf(a, sizeof a, "verify %s --a %s/A.npy --q %s/Q.npy --scales %s/S.npy%s%s --out %s/C.npy", v->name, tmpdir,
             tmpdir, tmpdir, s2, bs, tmpdir);
    ck_assert_msg(run(a) == 0, "%s: %s", a, out_buf);
    snprintf(a, sizeof a, "pack %s --q %s/Q.npy --scales %s/S.npy%s%s --a %s -o %s/pk%d", qv_layout_name(v->layout),
             tmpdir, tmpdir, s2, bs, qv_fmt_get(v->afmt)->name, tmpdir, _i);
    ck_assert_msg(run(a) == 0, "%s", a);
    char pa[4096];
    snprintf(pa, sizeof pa, "verify %s --a %s/A.npy --packed %s/pk%d --out %s/C.npy", v->name, tmpdir, tmpdir, _i,
             tmpdir);
    ck_assert_msg(run(pa) == 0, "%s: %s", pa, out_buf);
    if (bias) {
        /* the bias is the folder's */
        snprintf(a, sizeof a, "%s%s", pa, bs);
        ck_assert_int_eq(run(a), 2);
    } else {
        /* a bias row reading a folder without one */
        const qv_variant *vb = NULL;
        for (int i = 0; i < qv_registry_count(); i++) {
            const qv_variant *w = qv_registry_get(i);
            if (w->layout == v->layout && w->afmt == v->afmt && w->bias_fmt != QV_FMT_NONE) vb = w;
        }
        ck_assert_ptr_nonnull(vb);
        snprintf(a, sizeof a, "verify %s --a %s/A.npy --packed %s/pk%d --out %s/C.npy", vb->name, tmpdir, tmpdir, _i,
                 tmpdir);
        ck_assert_int_eq(run(a), 2);
    }
    /* one element off by far more than its bound: FAIL both ways */
    out[n + 5] = (uint16_t)qv_encode(v->ofmt, qv_decode(v->ofmt, out[n + 5]) * 0.5 + 1.0, QV_SAT_NONE);
    save("C.npy", hdt, m, n, out);
    ck_assert_int_eq(run(pa), 1);
    /* a partial last scale block (MXFP4: K = 3 g / 2) */
    if (!nv) {
        save("A48.npy", hdt, m, 48, p.a);
        save("Q48.npy", QV_DT_U1, 48, n, p.q);
        save("S48.npy", QV_DT_U1, 1, n, p.scales);
        snprintf(a, sizeof a, "verify %s --a %s/A48.npy --q %s/Q48.npy --scales %s/S48.npy%s --out %s/C.npy", v->name,
                 tmpdir, tmpdir, tmpdir, bs, tmpdir);
        ck_assert_int_eq(run(a), 2);
    }
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

/* ---- specs ---- */

/* The canonical spec of the QQQ channelwise row (qvet list --spec). */
#define QQQ_CH_SPEC "w=i4,ws=f32/c,wmul=16,a=i8,as=f32/tok,acc=i32,out=f16"
#define QQQ_G128_SPEC "w=u4b8,ws=f16/g128,ws2=f32/c,dq=i8,a=i8,as=f32/tok,acc=i32,out=f16"

/* The golden QQQ vectors through the row's canonical spec: the same verdicts
 * as the row's name (PASS with logical scales, FAIL with the packed order),
 * and --json names the spec beside the variant. */
START_TEST(golden_spec_same_verdict)
{
    const qv_variant *row = qv_variant_find("qqq-w4a8-ch");
    char canon[QV_SPEC_MAX], a[4096], b[4600], extra[256];
    ck_assert_int_ge(qv_spec_format(row, canon, sizeof canon), 0);
    ck_assert_str_eq(canon, QQQ_CH_SPEC);
    const char *scales[] = {"s_channel_logical_1xn_f32", "s_channel_packed_f32"};
    for (int t = 0; t < 2; t++) {
        qqq_ch_args(a, sizeof a, scales[t], 16, 16, "--json");
        int rc_row = run(a);
        char row_out[sizeof out_buf];
        snprintf(row_out, sizeof row_out, "%s", out_buf);
        ck_assert_int_eq(rc_row, t == 0 ? 0 : 1);
        /* "verify qqq-w4a8-ch --a ..." becomes "verify --spec 'SPEC' --a ...". */
        snprintf(extra, sizeof extra, "verify --spec '%s' ", QQQ_CH_SPEC);
        snprintf(b, sizeof b, "%s%s", extra, a + strlen("verify qqq-w4a8-ch "));
        ck_assert_int_eq(run(b), rc_row);
        ck_assert_ptr_nonnull(strstr(out_buf, "\"spec\":\"" QQQ_CH_SPEC "\""));
        ck_assert_ptr_nonnull(strstr(out_buf, "\"variant\":\"" QQQ_CH_SPEC "\""));
        ck_assert_ptr_nonnull(strstr(row_out, "\"variant\":\"qqq-w4a8-ch\",\"spec\":\"" QQQ_CH_SPEC "\""));
        /* The verdict fields agree: everything after the shape. */
        ck_assert_str_eq(strstr(out_buf, "\"m\":"), strstr(row_out, "\"m\":"));
        /* The spec may also stand as the positional VARIANT. */
        snprintf(b, sizeof b, "verify '%s' %s", QQQ_CH_SPEC, a + strlen("verify qqq-w4a8-ch "));
        ck_assert_int_eq(run(b), rc_row);
    }
    /* The per-group row too: f16 group scales, f32 channel scales2. */
    const char *g = golden_root(), *cs = "qqq_w4a8_k256_n256_g128";
    const char *names[] = {"qqq-w4a8-g128", "--spec '" QQQ_G128_SPEC "'"};
    for (int t = 0; t < 2; t++) {
        snprintf(a, sizeof a,
                 "verify %s --a %s/%s/A_m16_int8.npy --a-scale %s/%s/s_token_m16_f32.npy --q %s/%s/q_logical_kxn_uint4.npy "
                 "--scales %s/%s/s_group_logical_gxn_f16.npy --scales2 %s/%s/s_channel_logical_1xn_f32.npy "
                 "--out %s/%s/D_qqq_kernel_m16_f16.npy",
                 names[t], g, cs, g, cs, g, cs, g, cs, g, cs, g, cs);
        ck_assert_msg(run(a) == 0, "%s", names[t]);
    }
    /* Both VARIANT and --spec, and --packed with a spec: usage errors. */
    qqq_ch_args(a, sizeof a, "s_channel_logical_1xn_f32", 16, 16, "--spec " QQQ_CH_SPEC);
    ck_assert_int_eq(run(a), 2);
}
END_TEST

/* The arrays of `qvet verify`, in its option order. */
enum { O_A, O_ASCALE, O_AZP, O_Q, O_SCALES, O_SCALES2, O_ZEROS, O_BIAS, O_GIDX, O_OUT, N_OPTS };
static const char *const opt_names[N_OPTS] = {"--a", "--a-scale", "--azp", "--q", "--scales", "--scales2",
                                              "--zeros", "--bias", "--g-idx", "--out"};

/* The .npy dtype of codes of format f, as the documentation states them:
 * bf16 '<u2', signed integer codes int8, every other code of 8 bits or fewer
 * uint8. Written here from the documentation, not from qvet's code. */
static qv_dtype doc_dtype(qv_fmt f)
{
    switch (f) {
    case QV_FMT_F16: return QV_DT_F2;
    case QV_FMT_BF16: return QV_DT_U2;
    case QV_FMT_F32: return QV_DT_F4;
    case QV_FMT_I32: return QV_DT_I4;
    case QV_FMT_I4:
    case QV_FMT_I8: return QV_DT_I1;
    default: return QV_DT_U1;
    }
}

/* One array as a .npy file: (d0) when d1 < 0, else (d0, d1). */
static void save_nd(const char *dir, const char *name, qv_dtype dt, int64_t d0, int64_t d1, const void *data)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    qv_array a;
    int64_t shape[2] = {d0, d1};
    ck_assert_int_eq(qv_array_create(&a, dt, d1 < 0 ? 1 : 2, shape), QV_OK);
    ck_assert_int_eq((int64_t)a.nbytes, (d1 < 0 ? d0 : d0 * d1) * (int64_t)qv_dtype_size(dt));
    if (a.nbytes) memcpy(a.data, data, a.nbytes);
    ck_assert_int_eq(qv_npy_save(path, &a), QV_OK);
    qv_array_destroy(&a);
}

/* Decoded values as codes of f in its storage (they were decoded from f). */
static void *encode(qv_fmt f, const float *vals, int64_t count)
{
    size_t es = qv_fmt_storage_bytes(f);
    unsigned char *buf = malloc((size_t)count * es + 1);
    ck_assert_ptr_nonnull(buf);
    for (int64_t i = 0; i < count; i++) {
        uint32_t code = f == QV_FMT_F32 ? 0 : qv_encode(f, vals[i], QV_SAT_NONE);
        if (f == QV_FMT_F32) memcpy(buf + (size_t)i * es, &vals[i], es);
        else memcpy(buf + (size_t)i * es, &code, es);
    }
    return buf;
}

/* A generated case of `spec` written into dir as the documented arrays: the
 * model's output in out.npy. has[i] says which options the spec takes, and
 * shape[i] / dtype[i] what each file holds. */
typedef struct spec_case {
    const qv_variant *v;
    int has[N_OPTS];
    qv_dtype dtype[N_OPTS];
    int64_t rows[N_OPTS], cols[N_OPTS]; /* cols < 0: a vector */
} spec_case;

static const char *const file_names[N_OPTS] = {"A.npy", "SA.npy", "AZP.npy", "Q.npy", "S.npy", "S2.npy",
                                               "Z.npy", "B.npy", "G.npy", "C.npy"};

static void write_spec_case(const char *spec, const char *dir, int64_t m, int64_t n, int64_t k, spec_case *sc)
{
    memset(sc, 0, sizeof *sc);
    ck_assert_msg(qv_spec_parse(spec, &sc->v) == QV_OK, "%s: %s", spec, qv_errmsg());
    const qv_variant *v = sc->v;
    qv_problem p;
    ck_assert_msg(qv_problem_create(&p, v, m, n, k) == QV_OK, "%s: %s", spec, qv_errmsg());
    ck_assert_msg(ref_probe_fill(&p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 1234) == QV_OK, "%s", qv_errmsg());
    void *out = malloc((size_t)qv_problem_out_bytes(&p));
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(ref_model_run(&p, out) == QV_OK, "%s: %s", spec, qv_errmsg());
    int64_t zr = qv_problem_zero_rows(&p), zc = qv_problem_zero_cols(&p);
    const void *data[N_OPTS] = {0};
    void *owned[N_OPTS] = {0};
#define PUT(o, dt, r, c, ptr) (sc->has[o] = 1, sc->dtype[o] = (dt), sc->rows[o] = (r), sc->cols[o] = (c), data[o] = (ptr))
    PUT(O_A, doc_dtype(v->afmt), m, k, p.a);
    if (p.a_scale) {
        if (v->act_scale == QV_ASCALE_TENSOR) PUT(O_ASCALE, QV_DT_F4, 1, -1, p.a_scale);
        else if (v->act_scale == QV_ASCALE_TOKEN) PUT(O_ASCALE, QV_DT_F4, m, 1, p.a_scale);
        else PUT(O_ASCALE, QV_DT_F4, (k + 127) / 128, m, p.a_scale);
    }
    if (p.azp) PUT(O_AZP, QV_DT_I4, v->azp == QV_AZP_TOKEN ? m : 1, -1, p.azp);
    PUT(O_Q, doc_dtype(v->wfmt), k, n, p.q);
    if (p.scales) PUT(O_SCALES, doc_dtype(v->sfmt), qv_problem_scale_rows(&p), qv_problem_scale_cols(&p), p.scales);
    if (p.scales2) {
        int64_t c2 = qv_problem_scale2_count(&p);
        owned[O_SCALES2] = encode(v->s2fmt, p.scales2, c2);
        PUT(O_SCALES2, doc_dtype(v->s2fmt), 1, c2, owned[O_SCALES2]);
    }
    if (p.zeros) PUT(O_ZEROS, doc_dtype(v->wfmt), zr, zc, p.zeros);
    if (p.zeros_f) {
        owned[O_ZEROS] = encode(v->sfmt, p.zeros_f, zr * zc);
        PUT(O_ZEROS, doc_dtype(v->sfmt), zr, zc, owned[O_ZEROS]);
    }
    if (p.bias) {
        owned[O_BIAS] = encode(v->bias_fmt, p.bias, n);
        PUT(O_BIAS, doc_dtype(v->bias_fmt), n, -1, owned[O_BIAS]);
    }
    if (p.g_idx) PUT(O_GIDX, QV_DT_I4, k, -1, p.g_idx);
    PUT(O_OUT, doc_dtype(v->ofmt), m, n, out);
#undef PUT
    for (int o = 0; o < N_OPTS; o++)
        if (sc->has[o]) save_nd(dir, file_names[o], sc->dtype[o], sc->rows[o], sc->cols[o], data[o]);
    for (int o = 0; o < N_OPTS; o++) free(owned[o]);
    free(out);
    qv_problem_destroy(&p);
}

/* Runs `verify ARGS` in this process, through the subcommand's own entry
 * (cli.h), with stdout and stderr captured, so that the many bad files below
 * cost no program start each. Returns what run_program would. */
static run_result verify_here(const char *const *args)
{
    int argc = 0;
    while (args[argc]) argc++;
    char outp[4200], errp[4200];
    snprintf(outp, sizeof outp, "%s/stdout.txt", tmpdir);
    snprintf(errp, sizeof errp, "%s/stderr.txt", tmpdir);
    fflush(stdout);
    fflush(stderr);
    int save_out = dup(1), save_err = dup(2);
    ck_assert(save_out >= 0 && save_err >= 0);
    ck_assert_ptr_nonnull(freopen(outp, "w", stdout));
    ck_assert_ptr_nonnull(freopen(errp, "w", stderr));
    run_result r;
    r.rc = qv_cmd_verify(argc, (char **)args);
    fflush(stdout);
    fflush(stderr);
    ck_assert_int_ge(dup2(save_out, 1), 0);
    ck_assert_int_ge(dup2(save_err, 2), 0);
    close(save_out);
    close(save_err);
    clearerr(stdout);
    clearerr(stderr);
    char *bufs[2] = {NULL, NULL};
    const char *paths[2] = {outp, errp};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(paths[i], "r");
        ck_assert_ptr_nonnull(f);
        bufs[i] = calloc(1, 1 << 16);
        ck_assert_ptr_nonnull(bufs[i]);
        size_t got = fread(bufs[i], 1, (1 << 16) - 1, f);
        bufs[i][got] = '\0';
        fclose(f);
    }
    r.out = bufs[0];
    r.err = bufs[1];
    return r;
}

/* Runs `qvet verify --spec SPEC` (in this process) with every array of sc;
 * option `swap` (or -1) takes `swap_path` instead (NULL: left out); `extra`
 * (or NULL) adds an option and its value. */
static run_result verify_spec_x(const spec_case *sc, const char *dir, int swap, const char *swap_path,
                                const char *const extra[2])
{
    static char paths[N_OPTS][4200];
    const char *args[2 * N_OPTS + 6];
    int n = 0;
    args[n++] = "verify";
    args[n++] = "--spec";
    args[n++] = sc->v->name;
    for (int o = 0; o < N_OPTS; o++) {
        const char *path = paths[o];
        snprintf(paths[o], sizeof paths[o], "%s/%s", dir, file_names[o]);
        if (o == swap) path = swap_path;
        else if (!sc->has[o]) continue;
        if (!path) continue;
        args[n++] = opt_names[o];
        args[n++] = path;
    }
    if (extra) {
        args[n++] = extra[0];
        args[n++] = extra[1];
    }
    args[n] = NULL;
    return verify_here(args);
}

static run_result verify_spec(const spec_case *sc, const char *dir, int swap, const char *swap_path)
{
    return verify_spec_x(sc, dir, swap, swap_path, NULL);
}

/* 1 when text is exactly one line. */
static int one_line(const char *text)
{
    const char *nl = strchr(text, '\n');
    return nl && nl[1] == '\0';
}

/* Specs whose arrays together take every format and shape convention of
 * `qvet verify`: activations f16, bf16, i8 and e4m3; weights in every code
 * format; scales f16, bf16, f32, e8m0 and ue4m3 per tensor, channel, group and
 * block; scales2 per tensor and channel (f32 and bf16); integer zero points
 * (u4, i4) and float ones; a bias in f16, bf16 and f32; activation scales per
 * tensor, token and 128-K block; activation zero points; g_idx; outputs f16,
 * bf16, f32 and i32. */
static const char *const loader_specs[] = {
    "w=u4b8,ws=f16/g32,ws2=f32/c,dq=i8,a=i8,as=f32/tok,acc=i32,out=f16",
    "w=u4,ws=bf16/g32,wz=int/g32,a=bf16,bias=bf16",
    "w=i4,ws=f16/g32,wz=int/g32,bias=f32",
    "w=u8,ws=f16/g32,wz=float/g32,dq=rn2",
    "w=u8b128,ws=f32/t,dq=exact,a=bf16,out=f32",
    "w=i8,ws=f32/c,a=i8,as=f32/t,az=i32/tok,acc=i32,out=f32",
    "w=i8,a=i8,az=i32/t,acc=i32",
    "w=e4m3,ws=f32/b128x64,a=e4m3,as=f32/tok-b128,acc=f8p128,out=bf16",
    "w=e5m2,ws=f32/c,a=e4m3,as=f32/tok,acc=f8p128,out=f16",
    "w=e2m1,ws=e8m0/g32,a=bf16",
    "w=e2m1,ws=ue4m3/g16,ws2=f32/t",
    "w=u4b8,ws=f16/g32,ws2=bf16/c",
    "w=bf16,a=bf16,bias=f16",
    "w=f16",
    "w=u4b8,ws=f16/g32,act=gidx",
};
#define N_LOADER_SPECS ((int)(sizeof loader_specs / sizeof loader_specs[0]))

/* Good files PASS; then, for every array the spec takes, a wrong dtype, a
 * wrong shape and a missing file each exit 2 with one line naming the option,
 * and a file the spec does not take is refused. */
START_TEST(spec_loaders_good_and_bad)
{
    const char *spec = loader_specs[_i];
    char dir[4096], bad[4200];
    snprintf(dir, sizeof dir, "%s/spec%d", tmpdir, _i);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    spec_case sc;
    write_spec_case(spec, dir, 3, 40, 64, &sc);
    run_result r = verify_spec(&sc, dir, -1, NULL);
    ck_assert_msg(r.rc == 0, "%s: rc %d\n%s%s", spec, r.rc, r.out, r.err);
    run_free(&r);
    snprintf(bad, sizeof bad, "%s/bad.npy", dir);
    for (int o = 0; o < N_OPTS; o++) {
        if (!sc.has[o]) continue;
        /* float64 is no format's dtype */
        double zeros[64 * 64] = {0};
        int64_t r0 = sc.rows[o], c0 = sc.cols[o];
        ck_assert(r0 * (c0 < 0 ? 1 : c0) <= 64 * 64);
        save_nd(dir, "bad.npy", QV_DT_F8, r0, c0, zeros);
        r = verify_spec(&sc, dir, o, bad);
        ck_assert_msg(r.rc == 2 && strstr(r.err, opt_names[o]) && strstr(r.err, "float64") && strstr(r.err, "needs") &&
                          one_line(r.err),
                      "%s %s float64: rc %d: %s", spec, opt_names[o], r.rc, r.err);
        run_free(&r);
        /* one row too many, in the right dtype */
        void *buf = calloc((size_t)((r0 + 1) * (c0 < 0 ? 1 : c0)), 8);
        save_nd(dir, "bad.npy", sc.dtype[o], r0 + 1, c0, buf);
        free(buf);
        r = verify_spec(&sc, dir, o, bad);
        /* A and C give M, N and K: their shapes are checked against each other. */
        const char *why = o == O_A || o == O_OUT ? "expected (M, K) and (M, N)" : "needs (";
        ck_assert_msg(r.rc == 2 && strstr(r.err, opt_names[o]) && strstr(r.err, why) && one_line(r.err),
                      "%s %s shape: rc %d: %s", spec, opt_names[o], r.rc, r.err);
        run_free(&r);
        /* a missing file */
        r = verify_spec(&sc, dir, o, "/nonexistent/missing.npy");
        ck_assert_msg(r.rc == 2 && strstr(r.err, opt_names[o]) && strstr(r.err, "missing.npy") && one_line(r.err),
                      "%s %s missing: rc %d: %s", spec, opt_names[o], r.rc, r.err);
        run_free(&r);
    }
    /* An array the spec has no place for. */
    for (int o = 0; o < N_OPTS; o++) {
        if (sc.has[o]) continue;
        r = verify_spec(&sc, dir, o, bad);
        ck_assert_msg(r.rc == 2 && strstr(r.err, opt_names[o]), "%s extra %s: rc %d: %s", spec, opt_names[o], r.rc,
                      r.err);
        run_free(&r);
    }
    /* A spec has no packed layout. */
    r = verify_spec_x(&sc, dir, -1, NULL, (const char *const[2]){"--packed", dir});
    ck_assert_msg(r.rc == 2 && strstr(r.err, "a spec has no packed layout"), "%s: rc %d: %s", spec, r.rc, r.err);
    run_free(&r);
}
END_TEST

/* Writes one value into element `at` of file `name` of sc (codes of one byte). */
static void poke_byte(const char *dir, const char *name, int64_t at, int value)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    qv_array a;
    ck_assert_int_eq(qv_npy_load(path, &a), QV_OK);
    ck_assert_int_eq(qv_dtype_size(a.dtype), 1);
    ((unsigned char *)a.data)[at] = (unsigned char)value;
    ck_assert_int_eq(qv_npy_save(path, &a), QV_OK);
    qv_array_destroy(&a);
}

/* Codes outside their format's range are refused, naming the element. */
START_TEST(out_of_range_codes)
{
    static const struct {
        const char *spec;
        int opt;
        int value;
        const char *name;
    } cases[] = {
        {"w=u4b8,ws=f16/g32", O_Q, 16, "Q.npy"},
        {"w=u4,ws=bf16/g32,wz=int/g32,a=bf16", O_ZEROS, 16, "Z.npy"},
        {"w=u4,ws=bf16/g32,wz=int/g32,a=bf16", O_Q, 200, "Q.npy"},
        {"w=i4,ws=f16/g32,wz=int/g32", O_Q, 0xF7 /* -9 */, "Q.npy"},
        {"w=i4,ws=f16/g32,wz=int/g32", O_ZEROS, 8, "Z.npy"},
        {"w=e2m1,ws=e8m0/g32,a=bf16", O_Q, 16, "Q.npy"},
        {"w=e2m1,ws=ue4m3/g16,ws2=f32/t", O_SCALES, 0x80, "S.npy"},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/range%zu", tmpdir, t);
        ck_assert_int_eq(mkdir(dir, 0777), 0);
        spec_case sc;
        write_spec_case(cases[t].spec, dir, 2, 16, 32, &sc);
        poke_byte(dir, cases[t].name, 5, cases[t].value);
        run_result r = verify_spec(&sc, dir, -1, NULL);
        ck_assert_msg(r.rc == 2 && strstr(r.err, opt_names[cases[t].opt]) && strstr(r.err, "outside") &&
                          strstr(r.err, "(0, 5)"),
                      "%s %s = %d: rc %d: %s", cases[t].spec, cases[t].name, cases[t].value, r.rc, r.err);
        run_free(&r);
    }
}
END_TEST

/* --bias present, absent, of the wrong length, and off by one unit: exit 0,
 * 2 (needs --bias), 2 (its shape) and 1 (a FAIL). */
START_TEST(bias_present_absent_mismatch)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/bias", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    spec_case sc;
    write_spec_case("w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,bias=f32,out=bf16", dir, 4, 24, 48, &sc);
    run_result r = verify_spec(&sc, dir, -1, NULL);
    ck_assert_msg(r.rc == 0, "rc %d: %s", r.rc, r.err);
    run_free(&r);
    r = verify_spec(&sc, dir, O_BIAS, NULL);
    ck_assert_msg(r.rc == 2 && strstr(r.err, "declares bias: give --bias"), "rc %d: %s", r.rc, r.err);
    run_free(&r);
    snprintf(path, sizeof path, "%s/B.npy", dir);
    qv_array b;
    ck_assert_int_eq(qv_npy_load(path, &b), QV_OK);
    /* (1, N) is accepted as well as (N,). */
    char row[4200];
    snprintf(row, sizeof row, "%s/B_row.npy", dir);
    save_nd(dir, "B_row.npy", QV_DT_F4, 1, 24, b.data);
    r = verify_spec(&sc, dir, O_BIAS, row);
    ck_assert_msg(r.rc == 0, "rc %d: %s", r.rc, r.err);
    run_free(&r);
    save_nd(dir, "B_short.npy", QV_DT_F4, 23, -1, b.data);
    snprintf(row, sizeof row, "%s/B_short.npy", dir);
    r = verify_spec(&sc, dir, O_BIAS, row);
    ck_assert_msg(r.rc == 2 && strstr(r.err, "--bias") && strstr(r.err, "(1, 24)"), "rc %d: %s", r.rc, r.err);
    run_free(&r);
    /* Column 7's bias moved by 1: the outputs of that column are far off. */
    ((float *)b.data)[7] += 1.0f;
    save_nd(dir, "B_off.npy", QV_DT_F4, 24, -1, b.data);
    snprintf(row, sizeof row, "%s/B_off.npy", dir);
    qv_array_destroy(&b);
    r = verify_spec(&sc, dir, O_BIAS, row);
    ck_assert_msg(r.rc == 1 && strstr(r.out, "FAIL"), "rc %d: %s%s", r.rc, r.out, r.err);
    run_free(&r);
    /* A spec without a bias refuses one. */
    char dir2[4096];
    snprintf(dir2, sizeof dir2, "%s/nobias", tmpdir);
    ck_assert_int_eq(mkdir(dir2, 0777), 0);
    write_spec_case("w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,out=bf16", dir2, 4, 24, 48, &sc);
    r = verify_spec(&sc, dir2, O_BIAS, path);
    ck_assert_msg(r.rc == 2 && strstr(r.err, "drop --bias"), "rc %d: %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

/* A campaign dump re-checks with `qvet verify --spec "$(cat spec)"`: the
 * arrays of its replay.txt's verify command, with the spec read from its
 * `spec` file, run through the shell, give exit 0 for the CPU model's output
 * of every loader spec. */
START_TEST(dump_rechecks_with_verify)
{
    const char *spec = loader_specs[_i];
    const qv_variant *v;
    ck_assert_int_eq(qv_spec_parse(spec, &v), QV_OK);
    qv_backend b;
    qv_backend_init(&b, QV_BACKEND_CPU);
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, 2, 24, 64), QV_OK);
    ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 99), QV_OK);
    char dir[4096], line[8192], cmd[8400];
    snprintf(dir, sizeof dir, "%s/dump%d", tmpdir, _i);
    ck_assert_int_eq(qv_case_dump(&b, &p, 0, dir, "qvet replay --seed 1 --case 1"), QV_OK);
    qv_problem_destroy(&p);
    snprintf(cmd, sizeof cmd, "%s/spec", dir);
    FILE *f = fopen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    line[strcspn(line, "\n")] = '\0';
    ck_assert_str_eq(line, v->name);
    /* The verify command of replay.txt, with this build's binary. */
    snprintf(cmd, sizeof cmd, "%s/replay.txt", dir);
    f = fopen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = !strncmp(line, "qvet verify --spec '", 20);
    fclose(f);
    ck_assert_msg(found, "no verify command in %s/replay.txt", dir);
    line[strcspn(line, "\n")] = '\0';
    /* Its arrays with the spec read back from the file, as the documentation says. */
    snprintf(cmd, sizeof cmd, "%s verify --spec \"$(cat %s/spec)\" %s >/dev/null", qvet, dir, strstr(line, "--a "));
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
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
    tcase_add_test(tc, jobs_same_bits);
    tcase_add_loop_test(tc, fp4_rows_logical_and_packed, 0, qv_registry_count());
    tcase_add_test(tc, block_row_mn_major_scales);
    tcase_add_test(tc, golden_spec_same_verdict);
    tcase_add_loop_test(tc, spec_loaders_good_and_bad, 0, N_LOADER_SPECS);
    tcase_add_test(tc, out_of_range_codes);
    tcase_add_test(tc, bias_present_absent_mismatch);
    tcase_add_loop_test(tc, dump_rechecks_with_verify, 0, N_LOADER_SPECS);
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
