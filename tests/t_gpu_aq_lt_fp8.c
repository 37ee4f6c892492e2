/* t_gpu_aq_lt_fp8.c: the cuBLASLt path of the W8A8 e4m3 rows
 * (kernels/aq_lt_fp8.cu): cuBLASLt fp8 with its scaling modes (per tensor,
 * outer vectors or per tensor into fp32 with the scales after, VEC128 from
 * the expanded 128x128 blocks), promoted accumulation, fp16 D.
 *
 * Witnesses, none of them the path's own output:
 *  - every e4m3 row of family "w8a8", on a table of shapes with M from the edge
 *    set (1, 2, 4, 7, 17, 31, 33, 36, 64, 129, 300), N and K at the smallest legal
 *    values (8, 16), on and past 128 (K tails of 16 for the rows that allow
 *    them), with the exact, one-hot, random and fp8-promotion probes of
 *    reference/probe.c, each through the path (aq_lt_fp8_min_m = 1) and
 *    through the mma kernel (aq_lt_fp8_min_m = QV_OPT_OFF), and for the block row
 *    also through cuBLASLt's BLK128x128 form at every M
 *    (aq_lt_fp8_blk_min_m = 1; qv_aq_lt_fp8_blk_runs shows it ran, and
 *    that the default runs the VEC128 form below qv_aq_lt_fp8_blk_default_min_m and
 *    BLK128x128 from it on): unique probes must
 *    equal the CPU model bit for bit, random ones must PASS ref_verify against
 *    the certified truth; every run launches twice into a poisoned output and
 *    must be bitwise identical with nothing written past the output; the path
 *    counter (qv_aq_lt_fp8_runs) shows which path ran;
 *  - the accumulator: at the default threshold, docs/design.md §3's sequence (2^16,
 *    then K-1 ones) must give the 14-bit promoted value the rows declare,
 *    (65536 + K - 128) / 32, which differs from the exact sum and from
 *    unpromoted (fast) accumulation, and the promotion witness of probe.c must
 *    give the exact sum on both paths;
 *  - per token x channel's two forms: each forced at every shape and probe
 *    (aq_lt_fp8_outer_min_m = QV_OPT_OFF: two steps, cuBLASLt per tensor into
 *    fp32 and the scales after; = 1: cuBLASLt's outer vectors), through the
 *    same verdicts, and at the default two steps exactly below the tuned
 *    threshold, 128 (qv_aq_lt_fp8_two_step_runs);
 *  - the default thresholds of the tuning table (per scaling): M one below
 *    the row's runs the mma kernel, the first M at or above it that cuBLASLt
 *    takes the path;
 *  - aq_lt_fp8_min_m, aq_lt_fp8_blk_min_m or aq_lt_fp8_outer_min_m out of
 *    range is refused with a status naming the field before any CUDA call,
 *    and the workspace (planned for the H200) grows by the path's region
 *    exactly where the options let the path run.
 * Without a CUDA device the suite prints exactly "SKIP: no CUDA device" and
 * runs only the refusal and workspace checks. Random cases come from (seed,
 * index); the seed is printed and QVET_SEED=<seed> replays it. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/aq.h"
#include "qvet/formats.h"
#include "qvet/gemm.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/variant.h"
#include "support/gpu.h"

static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */

static int g_rows[16];
static int g_nrows;

/* The e4m3 W8A8 rows. */
static int is_e4m3_row(const qv_variant *v) { return !strcmp(v->family, "w8a8") && v->wfmt == QV_FMT_E4M3; }

/* The launch options of a path: aq_lt_fp8_min_m, aq_lt_fp8_blk_min_m and
 * aq_lt_fp8_outer_min_m (0: unset, the tuned default; QV_OPT_OFF: never),
 * over the suite's base. */
static qv_launch_opts fp8_opts(int min_m, int blk_min_m, int outer_min_m)
{
    const qv_launch_opts over = {.aq_lt_fp8_min_m = min_m, .aq_lt_fp8_blk_min_m = blk_min_m,
                                 .aq_lt_fp8_outer_min_m = outer_min_m};
    return gpu_opts(&over);
}

/* The H200 (132 SMs, compute capability 9.0), for the plans below without a device. */
#define H200 .sms = 132, .arch = 90

/* The per-token x per-channel row, whose two forms this suite tells apart. */
static int is_tok_ch(const qv_variant *v)
{
    return v->scale_layout == QV_SCALE_CHANNEL && v->act_scale == QV_ASCALE_TOKEN;
}

/* The path's own rule (kernels/aq_lt_fp8.cu): block rows need whole 128-K
 * blocks (any M: cuBLASLt's VEC128 takes M % 4 == 0 only, so other M run
 * padded to a multiple of 4 through the workspace). */
static int eligible(const qv_variant *v, int64_t k) { return v->scale_layout != QV_SCALE_BLOCK || k % 128 == 0; }

/* Runs p twice under o into `out`; returns how many of the two launches
 * took the cuBLASLt path (0 or 2: both see the same shape). */
static int run_twice(const qv_problem *p, qv_launch_opts o, void *out, const char *label, const char *path)
{
    const long long before = qv_aq_lt_fp8_runs();
    gpu_run_twice(p, &o, out, label, path);
    const long long ran = qv_aq_lt_fp8_runs() - before;
    ck_assert_msg(ran == 0 || ran == 2, "%s [%s]: %lld of 2 launches took the cuBLASLt path", label, path, ran);
    return (int)ran;
}

/* Shapes: M from the edge set; N at the smallest legal 8, past 128 by 8 and
 * 136, and on 128/256; K at the smallest legal 16, 128, past 128 by 16, long
 * (8 blocks and a tail; 32 blocks). Block rows refuse K % 128 != 0 on this
 * path (the mma kernel runs them, which the test checks too). */
static const struct lt_shape {
    int64_t m, n, k;
} shapes[] = {
    {1, 8, 16},     {1, 264, 1040},  {2, 136, 128},  {4, 136, 1152}, {7, 8, 4096},     {17, 72, 144},
    {31, 256, 256}, {33, 264, 1152}, {36, 8, 384},   {64, 128, 512}, {129, 136, 272}, {300, 64, 1024},
    {130, 272, 384}, {132, 384, 640},
};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* Where cuBLASLt's heuristic is known to take the mode (measured on the H200:
 * with N a multiple of 16 and whole 128-K blocks every mode took every M,
 * VEC128 every multiple of 4); elsewhere it may decline, and the mma kernel
 * runs. */
static int must_take(const qv_variant *v, int64_t n, int64_t k)
{
    return eligible(v, k) && n % 16 == 0 && k % 128 == 0;
}

START_TEST(paths_verified)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    static const qv_probe_kind probes[] = {QV_PROBE_EXACT, QV_PROBE_ONEHOT, QV_PROBE_RANDOM,
                                           QV_PROBE_WITNESS_FP8_PROMOTE};
    const int blk = v->scale_layout == QV_SCALE_BLOCK, tc = is_tok_ch(v);
    int cases = 0, failed = 0, taken = 0, declined = 0, blk_taken = 0, blk_default = 0, vec_default = 0;
    int two_forced = 0, outer_forced = 0, two_default = 0, outer_default = 0;
    for (int si = 0; si < N_SHAPES; si++)
        for (int pi = 0; pi < (int)(sizeof probes / sizeof probes[0]); pi++) {
            const int64_t m = shapes[si].m, n = shapes[si].n, k = shapes[si].k;
            const qv_probe_kind probe = probes[pi];
            if (qv_variant_check_shape(v, m, n, k) != QV_OK || !ref_probe_applies(v, probe, m, n, k)) continue;
            if (probe == QV_PROBE_WITNESS_FP8_PROMOTE && k <= 128) continue; /* one block: nothing to separate */
            const qv_regime regime =
                probe == QV_PROBE_RANDOM ? (qv_regime)(si % QV_REGIME_COUNT) : QV_REGIME_LOGUNIFORM;
            const uint64_t seed = g_seed + (uint64_t)g_rows[_i] * 1000 + (uint64_t)si * 10 + (uint64_t)pi;
            qv_problem p;
            char label[192];
            gpu_problem_probe(&p, v, m, n, k, probe, regime, seed, label, sizeof label);
            const size_t ob = (size_t)qv_problem_out_bytes(&p);
            uint8_t *o_lt = malloc(ob), *o_mma = malloc(ob);
            ck_assert(o_lt && o_mma);

            ck_assert_msg(run_twice(&p, fp8_opts(QV_OPT_OFF, 0, 0), o_mma, label, "mma") == 0,
                          "%s: aq_lt_fp8_min_m off took the path", label);
            const long long blk_before = qv_aq_lt_fp8_blk_runs(), two_before = qv_aq_lt_fp8_two_step_runs();
            const int ran = run_twice(&p, fp8_opts(1, 0, 0), o_lt, label, "cuBLASLt");
            /* Per token x channel's default form: the two steps below the
             * tuned aq_lt_fp8_outer_min_m (128 on the H200), the outer vectors
             * from it on; no other row runs two steps. */
            const long long two_ran = qv_aq_lt_fp8_two_step_runs() - two_before;
            ck_assert_msg(two_ran == (ran && tc && m < 128 ? 2 : 0),
                          "%s: %lld two-step launches at the default", label, two_ran);
            if (ran && tc) {
                if (two_ran) two_default++; else outer_default++;
            }
            if (tc) {
                /* Each form forced at this M, through the same model. */
                for (int f = 0; f < 2; f++) {
                    uint8_t *o_f = malloc(ob);
                    ck_assert_ptr_nonnull(o_f);
                    const long long t0 = qv_aq_lt_fp8_two_step_runs();
                    const int ran_f = run_twice(&p, fp8_opts(1, 0, f ? QV_OPT_OFF : 1), o_f, label,
                                                f ? "cuBLASLt two steps" : "cuBLASLt outer vectors");
                    const long long t = qv_aq_lt_fp8_two_step_runs() - t0;
                    ck_assert_msg(t == (f && ran_f ? 2 : 0), "%s: %lld of 2 launches ran two steps (forced %s)",
                                  label, t, f ? "two steps" : "outer vectors");
                    if (must_take(v, n, k)) ck_assert_msg(ran_f == 2, "%s: cuBLASLt declined the form", label);
                    if (ran_f) {
                        if (f) two_forced++; else outer_forced++;
                    }
                    failed += !gpu_verdict(&p, probe, o_f, label,
                                           !ran_f ? "mma (declined)" : f ? "cuBLASLt two steps"
                                                                         : "cuBLASLt outer vectors");
                    free(o_f);
                }
            }
            /* The block row's default form: BLK128x128 only from the tuned
             * aq_lt_fp8_blk_min_m on, both launches (VEC128 where cuBLASLt
             * declines BLK128x128). */
            const long long blk_ran = qv_aq_lt_fp8_blk_runs() - blk_before;
            if (ran && blk) {
                const qv_launch_opts dflt = fp8_opts(1, 0, 0);
                const int want_blk = qv_aq_lt_fp8_blk_form((int)m, (int)n, (int)k, &dflt);
                ck_assert_msg(blk_ran == 0 || (blk_ran == 2 && want_blk), "%s: %lld BLK128x128 launches at the default",
                              label, blk_ran);
                if (want_blk && must_take(v, n, k))
                    ck_assert_msg(blk_ran == 2, "%s: the default did not take the BLK128x128 form", label);
                if (blk_ran) blk_default++; else vec_default++;
            }
            if (blk && eligible(v, k)) {
                /* The BLK128x128 form at this M, through the same model. */
                uint8_t *o_blk = malloc(ob);
                ck_assert_ptr_nonnull(o_blk);
                const long long b0 = qv_aq_lt_fp8_blk_runs();
                const int ran_b = run_twice(&p, fp8_opts(1, 1, 0), o_blk, label, "cuBLASLt BLK128x128");
                const long long b = qv_aq_lt_fp8_blk_runs() - b0;
                ck_assert_msg(b == 0 || b == 2, "%s: %lld of 2 launches ran BLK128x128", label, b);
                if (must_take(v, n, k)) ck_assert_msg(ran_b == 2, "%s: cuBLASLt declined the block form", label);
                if (b) blk_taken++;
                failed += !gpu_verdict(&p, probe, o_blk, label,
                                       b ? "cuBLASLt BLK128x128" : ran_b ? "cuBLASLt VEC128" : "mma (declined)");
                free(o_blk);
            }
            if (!eligible(v, k))
                ck_assert_msg(ran == 0, "%s: the VEC128 path took a shape its rule refuses", label);
            else if (must_take(v, n, k))
                ck_assert_msg(ran == 2, "%s: cuBLASLt declined a shape it is known to take", label);
            if (ran) {
                taken++;
            } else if (eligible(v, k) && pi == 0) {
                declined++;
                printf("%s m=%" PRId64 " n=%" PRId64 " k=%" PRId64 ": cuBLASLt declined, the mma kernel ran\n",
                       v->name, m, n, k);
            }
            failed += !gpu_verdict(&p, probe, o_mma, label, "mma");
            failed += !gpu_verdict(&p, probe, o_lt, label, ran ? "cuBLASLt" : "mma (declined)");
            cases++;
            free(o_lt);
            free(o_mma);
            qv_problem_destroy(&p);
        }
    printf("%s: %d cases x 2 paths, %d through cuBLASLt, %d shapes declined, %d verdicts failed\n", v->name, cases,
           taken, declined, failed);
    ck_assert_msg(taken > 0, "%s: no case took the cuBLASLt path", v->name);
    if (tc) {
        printf("%s: forced: %d cases in two steps, %d through outer vectors; at the default: %d / %d\n", v->name,
               two_forced, outer_forced, two_default, outer_default);
        ck_assert_msg(two_forced > 0 && outer_forced > 0 && two_default > 0 && outer_default > 0,
                      "%s: the two forms were not both exercised (%d / %d forced, %d / %d default)", v->name,
                      two_forced, outer_forced, two_default, outer_default);
    }
    if (blk) {
        printf("%s: BLK128x128 form forced: %d cases; at the default: %d BLK128x128, %d VEC128\n", v->name, blk_taken,
               blk_default, vec_default);
        ck_assert_msg(blk_taken > 0 && blk_default > 0 && vec_default > 0,
                      "%s: the block forms were not both exercised (%d forced, %d / %d default)", v->name, blk_taken,
                      blk_default, vec_default);
    }
    ck_assert_msg(failed == 0, "%s: %d verdicts failed (see stderr)", v->name, failed);
}
END_TEST

/* ---- the accumulator ----------------------------------------------------------- */

static uint16_t f16(double x) { return (uint16_t)qv_encode(QV_FMT_F16, x, QV_SAT_NONE); }

/* _i: row x K in {1024, 4096}. M = 32, past every row's default threshold and
 * a multiple of 4 (no variable set), so the default reaches the path. */
START_TEST(accumulator_declared)
{
    const qv_variant *v = qv_registry_get(g_rows[_i / 2]);
    const int64_t m = 32, n = 128, k = _i % 2 ? 4096 : 1024;
    const qv_launch_opts base = gpu_opts(NULL);
    ck_assert_int_le(qv_aq_lt_fp8_default_min_m(v, (int)n, (int)k, &base), m);
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, m, n, k), QV_OK);
    ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_WITNESS_FP8_PROMOTE, QV_REGIME_LOGUNIFORM, g_seed), QV_OK);
    const size_t ob = (size_t)qv_problem_out_bytes(&p);
    uint16_t *out = malloc(ob);
    ck_assert_ptr_nonnull(out);
    char label[128];
    /* Every value below is (sum of products) x 2^-5, the probe's output scale. */
    const uint16_t exact_w = f16((65536.0 + (double)k - 128.0) / 32.0);
    const uint16_t exact_d = f16((65536.0 + (double)k - 1.0) / 32.0);
    const uint16_t promoted14_d = f16((65536.0 + (double)k - 128.0) / 32.0);
    const uint16_t fast = f16(65536.0 / 32.0);
    /* The hand values must be three different codes, or nothing is separated. */
    ck_assert(exact_d != promoted14_d && promoted14_d != fast && exact_d != fast);

    snprintf(label, sizeof label, "%s m=%" PRId64 " k=%" PRId64 " promotion witness", v->name, m, k);
    ck_assert_msg(run_twice(&p, fp8_opts(0, 0, 0), out, label, "default") == 2,
                  "%s: M = the default threshold did not take the path", label);
    for (int64_t e = 0; e < m * n; e++)
        ck_assert_msg(out[e] == exact_w, "%s: element %" PRId64 " is 0x%04x, the exact sum is 0x%04x", label, e,
                      out[e], exact_w);
    ck_assert_int_eq(run_twice(&p, fp8_opts(QV_OPT_OFF, 0, 0), out, label, "mma"), 0);
    for (int64_t e = 0; e < m * n; e++)
        ck_assert_msg(out[e] == exact_w, "%s [mma]: element %" PRId64 " is 0x%04x, the exact sum is 0x%04x", label, e,
                      out[e], exact_w);

    /* docs/design.md §3's sequence: the probe's zeros between 2^16 and K = 128 become ones. */
    const uint8_t one = (uint8_t)qv_encode(QV_FMT_E4M3, 1.0, QV_SAT_FINITE);
    for (int64_t i = 0; i < m; i++)
        for (int64_t kk = 1; kk < 128; kk++) ((uint8_t *)p.a)[i * k + kk] = one;
    snprintf(label, sizeof label, "%s m=%" PRId64 " k=%" PRId64 " docs/design.md §3 sequence", v->name, m, k);
    uint16_t *model = malloc(ob);
    ck_assert_ptr_nonnull(model);
    ck_assert_int_eq(ref_model_run(&p, model), QV_OK);
    ck_assert_msg(model[0] == promoted14_d, "%s: the row's model gives 0x%04x, the 14-bit promoted value is 0x%04x",
                  label, model[0], promoted14_d);
    ck_assert_int_eq(run_twice(&p, fp8_opts(0, 0, 0), out, label, "default"), 2);
    for (int64_t e = 0; e < m * n; e++)
        ck_assert_msg(out[e] == promoted14_d,
                      "%s: element %" PRId64 " is 0x%04x; declared (14 bits, promoted every 128) 0x%04x, exact "
                      "0x%04x, unpromoted 0x%04x",
                      label, e, out[e], promoted14_d, exact_d, fast);
    ck_assert_int_eq(run_twice(&p, fp8_opts(QV_OPT_OFF, 0, 0), out, label, "mma"), 0);
    printf("%s: cuBLASLt %.2f (declared), mma kernel %.2f; exact %.2f, unpromoted %.2f\n", label,
           qv_decode(QV_FMT_F16, promoted14_d), qv_decode(QV_FMT_F16, out[0]), qv_decode(QV_FMT_F16, exact_d),
           qv_decode(QV_FMT_F16, fast));
    /* The mma kernel keeps at least the declared width: never the unpromoted value. */
    for (int64_t e = 0; e < m * n; e++)
        ck_assert_msg(out[e] == exact_d || out[e] == promoted14_d, "%s [mma]: element %" PRId64 " is 0x%04x", label, e,
                      out[e]);
    free(model);
    free(out);
    qv_problem_destroy(&p);
}
END_TEST

/* The row's default threshold (the tuning table): one M below it runs the
 * mma kernel, M at it cuBLASLt (exact probe, bit for bit against the model
 * both times). */
START_TEST(default_threshold)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    const int64_t n = 256, k = 512;
    const qv_launch_opts base = gpu_opts(NULL);
    const int t = qv_aq_lt_fp8_default_min_m(v, (int)n, (int)k, &base);
    ck_assert_int_ge(t, 1);
    for (int d = 1; d >= 0; d--) {
        if (d && t == 1) continue; /* no M below the threshold */
        const int64_t m = d ? t - 1 : t;
        qv_problem p;
        ck_assert_int_eq(qv_problem_create(&p, v, m, n, k), QV_OK);
        ck_assert_int_eq(ref_probe_fill(&p, QV_PROBE_EXACT, QV_REGIME_LOGUNIFORM, g_seed + (uint64_t)d), QV_OK);
        void *out = malloc((size_t)qv_problem_out_bytes(&p));
        ck_assert_ptr_nonnull(out);
        char label[128];
        snprintf(label, sizeof label, "%s m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " exact (default threshold %d)",
                 v->name, m, n, k, t);
        const int ran = run_twice(&p, fp8_opts(0, 0, 0), out, label, "default");
        ck_assert_msg(ran == (d ? 0 : 2), "%s: %d launches took the path, expected %d", label, ran, d ? 0 : 2);
        ck_assert(gpu_verdict(&p, QV_PROBE_EXACT, out, label, d ? "mma" : "cuBLASLt"));
        free(out);
        qv_problem_destroy(&p);
    }
}
END_TEST

/* ---- refusals and workspace (no CUDA call) --------------------------------------- */

START_TEST(option_refusals)
{
    ck_assert_int_gt(g_nrows, 0);
    /* The refusal comes before anything is read. */
    qv_gemm_args a = gpu_placeholder_args(256, 128, 256);
    static const int bad[] = {-2, -5, -2147483647};
    for (int r = 0; r < g_nrows; r++) {
        const qv_variant *v = qv_registry_get(g_rows[r]);
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            const qv_launch_opts o[3] = {{H200, .aq_lt_fp8_min_m = bad[i]},
                                         {H200, .aq_lt_fp8_blk_min_m = bad[i]},
                                         {H200, .aq_lt_fp8_outer_min_m = bad[i]}};
            static const char *const field[3] = {"aq_lt_fp8_min_m", "aq_lt_fp8_blk_min_m", "aq_lt_fp8_outer_min_m"};
            for (int f = 0; f < 3; f++) {
                a.opts = &o[f];
                ck_assert_msg(qv_gpu_launch(v, &a) == QV_ERR_USAGE, "%s: %s = %d accepted", v->name, field[f],
                              bad[i]);
                ck_assert_msg(strstr(qv_errmsg(), field[f]) != NULL, "message: %s", qv_errmsg());
            }
        }
    }
    const qv_launch_opts h200 = {H200};
    /* The per-token x channel threshold (aq.h), one number at every layer
     * size since its two-step form (the Llama layers the bench measures, and
     * the edge of the size tiers it had before). */
    const qv_variant *tc_row = qv_variant_find("w8a8-fp8-tok-ch");
    ck_assert_ptr_nonnull(tc_row);
    static const int tiers[][2] = {{12288, 4096}, {4096, 11008}, {4096, 16383}, {4096, 16384}, {8192, 8192},
                                   {22016, 4096}, {10240, 8192}, {8192, 28672}, {57344, 8192}};
    for (size_t i = 0; i < sizeof tiers / sizeof tiers[0]; i++)
        ck_assert_msg(qv_aq_lt_fp8_default_min_m(tc_row, tiers[i][0], tiers[i][1], &h200) == 1,
                      "w8a8-fp8-tok-ch n=%d k=%d: threshold %d, the H200's row says 1", tiers[i][0], tiers[i][1],
                      qv_aq_lt_fp8_default_min_m(tc_row, tiers[i][0], tiers[i][1], &h200));
    /* The block row's BLK128x128 threshold by layer size (the H200's row):
     * 256 with N and K at most 8192, else 128. */
    ck_assert_int_eq(qv_aq_lt_fp8_blk_default_min_m(4096, 4096, &h200), 256);
    ck_assert_int_eq(qv_aq_lt_fp8_blk_default_min_m(8192, 8192, &h200), 256);
    ck_assert_int_eq(qv_aq_lt_fp8_blk_default_min_m(4096, 11008, &h200), 128);
    ck_assert_int_eq(qv_aq_lt_fp8_blk_default_min_m(12288, 4096, &h200), 128);
    ck_assert_int_eq(qv_aq_lt_fp8_blk_default_min_m(8193, 128, &h200), 128);
    /* The form by M: 128, then from 193. */
    ck_assert(!qv_aq_lt_fp8_blk_form(127, 12288, 4096, &h200) && qv_aq_lt_fp8_blk_form(128, 12288, 4096, &h200));
    ck_assert(!qv_aq_lt_fp8_blk_form(129, 12288, 4096, &h200) && !qv_aq_lt_fp8_blk_form(192, 12288, 4096, &h200));
    ck_assert(qv_aq_lt_fp8_blk_form(193, 12288, 4096, &h200) && qv_aq_lt_fp8_blk_form(320, 12288, 4096, &h200));
    ck_assert(qv_aq_lt_fp8_blk_form(256, 4096, 4096, &h200) && !qv_aq_lt_fp8_blk_form(128, 4096, 4096, &h200));
    ck_assert(!qv_aq_lt_fp8_blk_form(255, 4096, 4096, &h200) && qv_aq_lt_fp8_blk_form(300, 4096, 4096, &h200));
    /* A set threshold replaces the default at every layer size; off never. */
    const qv_launch_opts blk64 = {H200, .aq_lt_fp8_blk_min_m = 64}, blk_off = {H200, .aq_lt_fp8_blk_min_m = QV_OPT_OFF};
    ck_assert(qv_aq_lt_fp8_blk_form(256, 4096, 4096, &blk64) && !qv_aq_lt_fp8_blk_form(64, 4096, 4096, &blk64));
    ck_assert(qv_aq_lt_fp8_blk_form(128, 4096, 4096, &blk64) && !qv_aq_lt_fp8_blk_form(4096, 4096, 4096, &blk_off));
    /* The other scalings, and rows of no e4m3 W8A8 scaling. */
    ck_assert_int_eq(qv_aq_lt_fp8_default_min_m(qv_variant_find("w8a8-fp8-tensor"), 57344, 8192, &h200), 1);
    ck_assert_int_eq(qv_aq_lt_fp8_default_min_m(qv_variant_find("w8a8-fp8-block128"), 57344, 8192, &h200), 4);
    ck_assert_int_eq(qv_aq_lt_fp8_default_min_m(qv_variant_find("w8a8-fp8-block128"), 256, 512, &h200), 4);
    ck_assert_int_eq(qv_aq_lt_fp8_default_min_m(qv_variant_find("qqq-w4a8-ch"), 256, 512, &h200), 0);
    ck_assert_int_eq(qv_aq_lt_fp8_default_min_m(tc_row, 0, 512, &h200), 0);
    /* The workspace holds cuBLASLt's 32 MiB from the row's threshold on (for
     * block rows only at K % 128 == 0), nothing of it below or with "off"; at
     * these shapes the mma kernel's own split-K region is far smaller. */
    const size_t lt_ws = (size_t)32 << 20;
    for (int r = 0; r < g_nrows; r++) {
        const qv_variant *v = qv_registry_get(g_rows[r]);
        const int t = qv_aq_lt_fp8_default_min_m(v, 512, 512, &h200);
        const int blk = v->scale_layout == QV_SCALE_BLOCK;
        ck_assert_int_ge(t, 1);
        ck_assert_int_le(t, 32);
        if (t > 1) ck_assert_uint_lt(qv_gpu_workspace(v, t - 1, 512, 512, &h200), lt_ws);
        ck_assert_uint_ge(qv_gpu_workspace(v, 32, 512, 512, &h200), lt_ws);
        ck_assert_uint_ge(qv_gpu_workspace(v, 1024, 512, 4096, &h200), lt_ws);
        const size_t tail = qv_gpu_workspace(v, 1024, 512, 4096 + 16, &h200);
        ck_assert_msg(blk ? tail < lt_ws : tail >= lt_ws, "%s: workspace %zu at K = 4112", v->name, tail);
        const qv_launch_opts off = {H200, .aq_lt_fp8_min_m = QV_OPT_OFF}, one = {H200, .aq_lt_fp8_min_m = 1},
                             t64 = {H200, .aq_lt_fp8_min_m = 64};
        ck_assert_uint_lt(qv_gpu_workspace(v, 1024, 512, 512, &off), lt_ws);
        ck_assert_uint_ge(qv_gpu_workspace(v, 4, 512, 512, &one), lt_ws);
        ck_assert_uint_lt(qv_gpu_workspace(v, 32, 512, 512, &t64), lt_ws);
    }
    /* The block row's region holds nothing past cuBLASLt's workspace at M %
     * 4 == 0 (the weights' scales come packed in scales2, the activations'
     * as they are); for M % 4 != 0 also the padded (K/128, M4) activation
     * scales, (M4, K) activations and (M4, N) f16 output, M4 = M rounded up
     * to 4. Measured against the mma kernel's workspace alone. */
    const qv_variant *brow = qv_variant_find("w8a8-fp8-block128");
    ck_assert_ptr_nonnull(brow);
    const qv_launch_opts off = {H200, .aq_lt_fp8_min_m = QV_OPT_OFF};
    const size_t mma_1024 = qv_gpu_workspace(brow, 1024, 8192, 8192, &off),
                 mma_1023 = qv_gpu_workspace(brow, 1023, 8192, 8192, &off);
    const size_t lt_1024 = qv_gpu_workspace(brow, 1024, 8192, 8192, &h200) - mma_1024,
                 lt_1023 = qv_gpu_workspace(brow, 1023, 8192, 8192, &h200) - mma_1023;
    ck_assert_uint_ge(lt_1024, lt_ws);
    ck_assert_uint_le(lt_1024, lt_ws + 65536); /* alignment of the two regions only */
    ck_assert_uint_ge(lt_1023, lt_ws + (size_t)64 * 1024 * 4 + (size_t)1024 * 8192 * (1 + 2));
    /* Per token x channel: below the tuned aq_lt_fp8_outer_min_m (128) the
     * region also holds the two-step form's (M, N) fp32 D; with the option
     * at 1 (outer vectors at every M) it does not, with QV_OPT_OFF (two steps
     * at every M) it does at any M. */
    const qv_launch_opts outer_off = {H200, .aq_lt_fp8_outer_min_m = QV_OPT_OFF},
                         outer_1 = {H200, .aq_lt_fp8_outer_min_m = 1};
    const size_t two_64 = qv_gpu_workspace(tc_row, 64, 57344, 8192, &h200),
                 two_4096 = qv_gpu_workspace(tc_row, 4096, 57344, 8192, &outer_off);
    const size_t outer_64 = qv_gpu_workspace(tc_row, 64, 57344, 8192, &outer_1),
                 outer_4096 = qv_gpu_workspace(tc_row, 4096, 57344, 8192, &outer_1);
    ck_assert_uint_ge(outer_64, lt_ws);
    ck_assert_uint_eq(two_64 - outer_64, (size_t)64 * 57344 * 4);
    ck_assert_uint_eq(two_4096 - outer_4096, (size_t)4096 * 57344 * 4);
    ck_assert_uint_eq(qv_gpu_workspace(tc_row, 4096, 57344, 8192, &h200), outer_4096);
    ck_assert_uint_eq(qv_gpu_workspace(tc_row, 127, 57344, 8192, &h200) -
                          qv_gpu_workspace(tc_row, 127, 57344, 8192, &outer_1),
                      (size_t)127 * 57344 * 4);
}
END_TEST

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    g_nrows = gpu_registry_rows(is_e4m3_row, g_rows, 16);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_aq_lt_fp8", gpu, g_seed, g_nrows, &tc);
    /* The GPU cases only with a device; the refusal and workspace checks (no
     * CUDA call) always. */
    if (gpu) {
        tcase_add_loop_test(tc, paths_verified, 0, g_nrows);
        tcase_add_loop_test(tc, accumulator_declared, 0, 2 * g_nrows);
        tcase_add_loop_test(tc, default_threshold, 0, g_nrows);
    }
    tcase_add_test(tc, option_refusals);
    return gpu_suite_run(s);
}
