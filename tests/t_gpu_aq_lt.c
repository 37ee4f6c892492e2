/* t_gpu_aq_lt.c: the large-M path of the integer activation-quantized rows
 * (QQQ W4A8 channelwise and per group, W8A8 int8 with and without activation
 * zero point): cuBLASLt int8 IGMMA into int32, then the mma kernel's own fp32
 * epilogue (kernels/aq_lt.cu).
 *
 * Witnesses, none of them the path's own output:
 *  - every integer row of family "qqq" or "w8a8", over M below, at and above
 *    the default threshold, N with a short last chunk and K with a 16-wide
 *    tail: the same packed inputs through the mma kernel (aq_lt_min_m set
 *    past M), through cuBLASLt in one N chunk and in several (aq_lt_min_m
 *    = 1, aq_lt_chunk_mib small), each launched twice; the three outputs
 *    must be bitwise equal (int32 accumulation is exact, the epilogue is the
 *    same fp32 sequence), equal to the CPU model bit for bit, and the
 *    path counter (qv_aq_lt_runs) must show which path ran;
 *  - the published QQQ vectors in tests/data/golden (QVET_GOLDEN overrides the
 *    folder) forced through cuBLASLt (their M is at most 33): the real QQQ
 *    kernel's D bit for bit;
 *  - aq_lt_min_m or aq_lt_chunk_mib out of range is refused with a status
 *    naming the field before any CUDA call, and the workspace (planned for
 *    the H200) holds the path's region only where the options let it run.
 * Without a CUDA device the suite prints exactly "SKIP: no CUDA device" and
 * runs only the refusal checks. QVET_AQ_QUICK=1 keeps one shape per row (the
 * compute-sanitizer run). Random cases come from (seed, index); the seed is
 * printed and QVET_SEED=<seed> replays it. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/aq.h"
#include "qvet/gemm.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/variant.h"
#include "support/gpu.h"

static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */
/* QVET_AQ_QUICK=1: one shape per row (M = 129) and the goldens: the run under
 * compute-sanitizer. */
static int g_quick;

static int g_rows[64];
static int g_nrows;

/* The integer rows: QQQ, and W8A8 with int8 weights (the e4m3 rows' cuBLASLt
 * path is not bit-identical to their mma kernel: t_gpu_aq_lt_fp8 checks it). */
static int is_int_row(const qv_variant *v)
{
    return !strcmp(v->family, "qqq") || (!strcmp(v->family, "w8a8") && v->wfmt == QV_FMT_I8);
}

/* The launch options of a path: aq_lt_min_m and aq_lt_chunk_mib (0: the
 * table's budget), the QQQ rows' wgmma path (t_gpu_aq_wg) off, so that "mma"
 * here means aq_gemm.cuh's kernel. */
static qv_launch_opts lt_opts(int min_m, double chunk_mib)
{
    const qv_launch_opts over = {.aq_wg_min_m = QV_OPT_OFF, .aq_lt_min_m = min_m, .aq_lt_chunk_mib = chunk_mib};
    return gpu_opts(&over);
}

/* Runs p twice under o; `lt` says whether both launches must have taken
 * the cuBLASLt path. */
static void run_path(const qv_problem *p, const qv_launch_opts *o, void *out, int lt, const char *label,
                     const char *path)
{
    const long long before = qv_aq_lt_runs();
    gpu_run_twice(p, o, out, label, path);
    const long long ran = qv_aq_lt_runs() - before;
    ck_assert_msg(ran == (lt ? 2 : 0), "%s [%s]: %lld of 2 launches took the cuBLASLt path, expected %d", label,
                  path, ran, lt ? 2 : 0);
}

/* M on both sides of the default threshold (128) and past a 128-row tile. */
static const int lt_m[] = {1, 17, 127, 128, 129, 300};
#define N_LT_M ((int)(sizeof lt_m / sizeof lt_m[0]))

/* One row: every M, with N and K rotating over a single 64-column block, a
 * short last chunk (w8a8: N % 64 = 8) and the longer shapes, and K with and
 * without a tail past 128 (grouped rows: multiples of g). */
START_TEST(paths_equal)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    const int qqq = !strcmp(v->family, "qqq");
    const int64_t ns_qqq[3] = {64, 320, 192}, ns_i8[3] = {72, 320, 136};
    const int64_t ks_plain[3] = {144, 1040, 128}, ks_g[3] = {128, 1152, 384};
    int cases = 0;
    for (int mi = 0; mi < N_LT_M; mi++)
        for (int si = 0; si < 2; si++) {
            const int64_t m = lt_m[mi];
            if (g_quick && (m != 129 || si)) continue;
            const int64_t n = (qqq ? ns_qqq : ns_i8)[(mi + si) % 3];
            const int64_t k = (v->g > 0 ? ks_g : ks_plain)[(mi + 2 * si) % 3];
            if (qv_variant_check_shape(v, m, n, k) != QV_OK) continue;
            const qv_regime regime = (qv_regime)((mi + si) % QV_REGIME_COUNT);
            const uint64_t seed = g_seed + (uint64_t)g_rows[_i] * 1000 + (uint64_t)mi * 10 + (uint64_t)si;
            qv_problem p;
            char label[192];
            gpu_problem_probe(&p, v, m, n, k, QV_PROBE_RANDOM, regime, seed, label, sizeof label);
            const size_t ob = (size_t)qv_problem_out_bytes(&p);
            uint8_t *o_mma = malloc(ob), *o_lt = malloc(ob), *o_chunks = malloc(ob), *model = malloc(ob);
            ck_assert(o_mma && o_lt && o_chunks && model);

            /* The chunk size that gives 64-column chunks (the smallest): below
             * one column's bytes, so the plan rounds up to 64. */
            const qv_launch_opts mma = lt_opts(2000000000, 0), one = lt_opts(1, 0), chunks = lt_opts(1, 0.000001);
            run_path(&p, &mma, o_mma, 0, label, "mma");
            run_path(&p, &one, o_lt, 1, label, "cuBLASLt, one chunk");
            run_path(&p, &chunks, o_chunks, 1, label, "cuBLASLt, 64-column chunks");

            ck_assert_msg(ref_model_run(&p, model) == QV_OK, "%s: model: %s", label, qv_errmsg());
            qv_result r;
            ref_verify_bitexact(&p, model, o_mma, &r);
            ck_assert_msg(r.grade == QV_PASS, "%s: mma kernel vs model: %s", label, r.reason);
            const struct { const uint8_t *o; const char *what; } alt[2] = {{o_lt, "one chunk"},
                                                                           {o_chunks, "64-column chunks"}};
            for (int ai = 0; ai < 2; ai++) {
                int64_t first = -1;
                for (size_t e = 0; e + 1 < ob && first < 0; e += 2)
                    if (memcmp(alt[ai].o + e, o_mma + e, 2)) first = (int64_t)(e / 2);
                ck_assert_msg(first < 0,
                              "%s: cuBLASLt (%s) differs from the mma kernel, first at (%" PRId64 ", %" PRId64
                              "): 0x%04x vs 0x%04x",
                              label, alt[ai].what, first / n, first % n,
                              ((const uint16_t *)alt[ai].o)[first], ((const uint16_t *)o_mma)[first]);
            }
            free(o_mma);
            free(o_lt);
            free(o_chunks);
            free(model);
            qv_problem_destroy(&p);
            cases++;
        }
    printf("%s: %d shapes, mma == cuBLASLt (one chunk) == cuBLASLt (64-column chunks) == model, bit for bit\n",
           v->name, cases);
    ck_assert_msg(cases >= (g_quick ? 1 : N_LT_M), "%s: only %d legal shapes", v->name, cases);
}
END_TEST

/* ---- the published QQQ vectors through cuBLASLt ------------------------------ */

static const char *const qqq_goldens[] = {"qqq_w4a8_k128_n256_g-1", "qqq_w4a8_k256_n256_g128"};

/* _i: golden case x (one chunk, 64-column chunks). */
START_TEST(golden_qqq_lt)
{
    const int chunked = _i % 2;
    const qv_launch_opts o = lt_opts(1, chunked ? 0.000001 : 0);
    gpu_qqq_golden gq;
    gpu_qqq_golden_open(&gq, qqq_goldens[_i / 2]);
    for (int mi = 0; mi < gq.n_ms; mi++) {
        const int m = gq.ms[mi];
        gpu_qqq_case c;
        gpu_qqq_case_load(&gq, m, &o, &c);
        ck_assert_msg(c.ga.workspace_bytes > 0, "%s m=%d: no workspace for the cuBLASLt path", gq.name, m);
        uint16_t *out = malloc(sizeof(uint16_t) * (size_t)m * gq.n);
        ck_assert_ptr_nonnull(out);
        const long long before = qv_aq_lt_runs();
        gpu_qqq_case_launch(&gq, &c, out);
        ck_assert_msg(qv_aq_lt_runs() == before + 1, "%s m=%d: the launch did not take the cuBLASLt path", gq.name,
                      m);
        gpu_qqq_case_assert(&gq, &c, out, " (cuBLASLt path)");
        printf("golden %s m=%d through cuBLASLt (%s): equal to the real QQQ kernel bit for bit\n", gq.name, m,
               chunked ? "64-column chunks" : "one chunk");
        free(out);
        gpu_qqq_case_free(&c);
    }
    gpu_qqq_golden_close(&gq);
}
END_TEST

/* ---- refusals (no CUDA call happens before a refusal) ---------------------------- */

START_TEST(option_refusals)
{
    const qv_variant *i8 = qv_variant_find("w8a8-i8-tok-ch"), *ch = qv_variant_find("qqq-w4a8-ch");
    ck_assert_ptr_nonnull(i8);
    ck_assert_ptr_nonnull(ch);
    /* The refusal comes before anything is read. */
    qv_gemm_args a = gpu_placeholder_args(256, 128, 256);
    static const qv_launch_opts bad[] = {{.aq_lt_min_m = -5}, {.aq_lt_min_m = -2147483647},
                                         {.aq_lt_chunk_mib = -1}, {.aq_lt_chunk_mib = QV_OPT_OFF},
                                         {.aq_lt_chunk_mib = 2e6}};
    static const char *const field[] = {"aq_lt_min_m", "aq_lt_min_m", "aq_lt_chunk_mib", "aq_lt_chunk_mib",
                                        "aq_lt_chunk_mib"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        a.opts = &bad[i];
        ck_assert_int_eq(qv_gpu_launch(i8, &a), QV_ERR_USAGE);
        ck_assert_msg(strstr(qv_errmsg(), field[i]) != NULL, "message: %s", qv_errmsg());
        ck_assert_int_eq(qv_gpu_launch(ch, &a), QV_ERR_USAGE);
        ck_assert_uint_eq(qv_gpu_workspace(i8, 128, 4096, 4096, &bad[i]), 0);
    }
    /* The workspace grows by the cuBLASLt region from the threshold on and is a
     * function of the shape and the SM count otherwise (no CUDA call with the
     * H200's set). */
    const qv_launch_opts h200 = {.sms = 132, .arch = 90};
    ck_assert_uint_gt(qv_gpu_workspace(i8, 128, 4096, 4096, &h200),
                      qv_gpu_workspace(i8, 127, 4096, 4096, &h200) + (size_t)4096 * 128 * 4);
    ck_assert_uint_gt(qv_gpu_workspace(ch, 1024, 4096, 4096, &h200), (size_t)4096 * 4096);
    /* The path off: the mma kernel's region alone. */
    const qv_launch_opts off = {.sms = 132, .arch = 90, .aq_lt_min_m = QV_OPT_OFF};
    ck_assert_uint_lt(qv_gpu_workspace(i8, 128, 4096, 4096, &off) + (size_t)4096 * 128 * 4,
                      qv_gpu_workspace(i8, 128, 4096, 4096, &h200));
}
END_TEST

int main(void)
{
    g_quick = gpu_env_flag("QVET_AQ_QUICK");
    const int gpu = gpu_suite_start(&g_seed);
    g_nrows = gpu_registry_rows(is_int_row, g_rows, 64);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_aq_lt", gpu, g_seed, g_nrows, &tc);
    /* The GPU cases only with a device; the refusals (no CUDA call) always. */
    if (gpu) {
        tcase_add_loop_test(tc, paths_equal, 0, g_nrows);
        tcase_add_loop_test(tc, golden_qqq_lt, 0, 2 * (int)(sizeof qqq_goldens / sizeof qqq_goldens[0]));
    }
    tcase_add_test(tc, option_refusals);
    return gpu_suite_run(s);
}
