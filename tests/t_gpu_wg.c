/* t_gpu_wg.c: the Hopper wgmma kernel of the weight-only family
 * (kernels/wonly_wg.cu), which QVET_WO_WG_MIN_M routes M >= its value to.
 *
 * Witnesses, none of them the kernel's own output:
 *  - every registry row of family "marlin" over M in {1, 63, 64, 65, 200,
 *    1024}, N in {64, 192, 576, 4096} (one 64-column chunk, a partial
 *    warpgroup, one chunk past a block of 512 or 256 columns, a real width)
 *    and K on the k16 tile or the group, past the 64-row stage (K = 48, 3g)
 *    and long (4096, 4112 / 4096 + g: a partial last stage), with three probes:
 *      exact   small-integer activations and power-of-two scales that differ
 *              per channel and group: every partial sum is exact in fp32, so
 *              the output is unique and must equal the CPU model
 *              (ref_model_run) bit for bit;
 *      one-hot one activation of 1 per row: the output is one dequantized
 *              weight (times the epilogue scale), bit for bit, which checks
 *              the register fragments, scale permutations and zero points
 *              element by element;
 *      random  full-range codes and log-uniform scales in three regimes
 *              (normal, tiny, large): ref_verify against the certified truth
 *              (tensor-core fp32 accumulation in blocks of 16) must not FAIL;
 *    each in both token tiles (QVET_WO_WG_TOKENS = 128 and 64);
 *    every case asserts that the wgmma path takes it, launches twice on an
 *    output poisoned before each launch (qv_gpu_run) and must be bitwise
 *    identical, with nothing written past the output (the runner's guard);
 *  - QVET_WO_WG_MIN_M: unset leaves the path off, a bad value (or a bad
 *    QVET_WO_WG_TOKENS) is a usage error before any CUDA call, and
 *    act_order's workspace holds A's sorted copy (no CUDA call).
 * QVET_WG_QUICK=1 runs two small cases per row instead, and QVET_WG_ROWS=<glob>
 * only the rows it matches, for the compute-sanitizer passes. Without a CUDA device the suite prints exactly
 * "SKIP: no CUDA device" and runs only the checks that make no CUDA call.
 * Random cases come from (seed, index); the seed is printed and
 * QVET_SEED=<seed> replays it. */
#include <check.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../kernels/wonly_wg.cuh"
#include "qvet/formats.h"
#include "qvet/gemm.h"
#include "qvet/gpu.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/variant.h"
#include "support/rand.h"

static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */

static uint64_t rnd(uint64_t stream, uint64_t i) { return test_rnd(g_seed, stream, i); }

static int64_t rnd_int(uint64_t stream, uint64_t i, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd(stream, i) % (uint64_t)(hi - lo + 1));
}

static double rnd_unit(uint64_t stream, uint64_t i) { return (double)(rnd(stream, i) >> 11) * 0x1p-53; }

/* ---- the rows under test --------------------------------------------------- */

static int g_rows[64];
static int g_nrows;

/* Every marlin row, or those QVET_WG_ROWS (an fnmatch pattern) names: the
 * sanitizer passes run one or two rows. */
static void collect_rows(void)
{
    const char *pat = getenv("QVET_WG_ROWS");
    g_nrows = 0;
    for (int i = 0; i < qv_registry_count() && g_nrows < 64; i++) {
        const qv_variant *v = qv_registry_get(i);
        if (pat && *pat && fnmatch(pat, v->name, 0) != 0) continue;
        if (v->launch && !strcmp(v->family, "marlin")) g_rows[g_nrows++] = i;
    }
}

/* ---- fills ------------------------------------------------------------------ */

enum probe { PROBE_EXACT = 0, PROBE_ONEHOT, PROBE_RANDOM };
static const char *const probe_names[] = {"exact", "one-hot", "random"};
enum regime { REG_NORMAL = 0, REG_TINY, REG_LARGE };
static const char *const regime_names[] = {"normal", "tiny", "large"};

static uint32_t enc(qv_fmt f, double x) { return qv_encode(f, x, QV_SAT_FINITE); }

/* A random finite e4m3 code (0x7F / 0xFF are NaN). */
static uint8_t e4m3_random(uint64_t s, uint64_t i)
{
    uint8_t c = (uint8_t)rnd(s, i);
    return (c & 0x7F) == 0x7F ? (uint8_t)(c - 1) : c;
}

static void put(qv_fmt f, void *buf, int64_t i, double x)
{
    if (f == QV_FMT_F32)
        ((float *)buf)[i] = (float)x;
    else
        ((uint16_t *)buf)[i] = (uint16_t)enc(f, x);
}

/* Scale exponent window [lo, hi]. Exact probes keep 4 bits of spread so that
 * every partial sum stays exact in fp32 (4 bits of spread + 13 of K = 4112 +
 * 5 of |a * (q - z)| < 24); the tiny regime reaches fp16 subnormal products
 * (bf16: 2^-40 lower); fp8 rows keep scales below 2^7 so the packer's
 * exponent-bias folding (x 2^8 in fp16) cannot overflow. */
static void scale_window(const qv_variant *v, int probe, int regime, double *lo, double *hi)
{
    const int bf = v->afmt == QV_FMT_BF16;
    *lo = -6, *hi = 0;
    if (probe != PROBE_RANDOM) *lo = -4;
    if (regime == REG_TINY) *lo -= bf ? 40 : 14, *hi -= bf ? 40 : 14;
    if (regime == REG_LARGE) *lo += 4, *hi += 6;
}

/* Fills every buffer of p for the probe; `idx` makes the case's random stream. */
static void fill_problem(qv_problem *p, int probe, int regime, uint64_t idx)
{
    const qv_variant *v = p->v;
    const int64_t m = p->m, n = p->n, k = p->k;
    const uint64_t s = idx * 16;

    for (int64_t i = 0; i < m; i++)
        for (int64_t kk = 0; kk < k; kk++) {
            const uint64_t e = (uint64_t)(i * k + kk);
            double x;
            if (probe == PROBE_EXACT)
                x = (double)rnd_int(s + 1, e, -3, 3);
            else if (probe == PROBE_ONEHOT)
                x = kk == (i * 7 + 3) % k;
            else
                x = (rnd(s + 7, e) & 1 ? -1 : 1) * exp2(-2.0 + 3.0 * rnd_unit(s + 1, e));
            ((uint16_t *)p->a)[e] = (uint16_t)enc(v->afmt, x);
        }

    for (int64_t e = 0; e < k * n; e++) {
        switch (v->wfmt) {
        case QV_FMT_U4: ((uint8_t *)p->q)[e] = (uint8_t)rnd_int(s + 2, (uint64_t)e, 0, 15); break;
        case QV_FMT_U8: ((uint8_t *)p->q)[e] = (uint8_t)rnd_int(s + 2, (uint64_t)e, 0, 255); break;
        case QV_FMT_E4M3:
            ((uint8_t *)p->q)[e] = probe == PROBE_EXACT
                                       ? (uint8_t)enc(QV_FMT_E4M3, (double)rnd_int(s + 2, (uint64_t)e, -4, 4))
                                       : e4m3_random(s + 2, (uint64_t)e);
            break;
        default: ck_abort_msg("%s: unexpected weight format", v->name);
        }
    }

    double lo, hi;
    scale_window(v, probe, regime, &lo, &hi);
    if (p->scales) {
        const int64_t cnt = qv_problem_scale_rows(p) * qv_problem_scale_cols(p);
        for (int64_t e = 0; e < cnt; e++) {
            double x = probe == PROBE_RANDOM ? exp2(lo + (hi - lo) * rnd_unit(s + 3, (uint64_t)e))
                                             : ldexp(1.0, (int)rnd_int(s + 3, (uint64_t)e, (int64_t)lo, (int64_t)hi));
            put(v->sfmt, p->scales, e, x);
        }
    }
    if (p->zeros) {
        const int64_t cnt = (k / p->g) * n;
        for (int64_t e = 0; e < cnt; e++) p->zeros[e] = (uint8_t)rnd_int(s + 4, (uint64_t)e, 0, 15);
    }
    /* act_order: a random permutation of balanced groups, as GPTQ's desc_act
     * produces: g_idx[perm[i]] = i / g. */
    if (p->g_idx) {
        int64_t *perm = malloc(sizeof(int64_t) * (size_t)k);
        ck_assert_ptr_nonnull(perm);
        for (int64_t i = 0; i < k; i++) perm[i] = i;
        for (int64_t i = k - 1; i > 0; i--) {
            int64_t j = rnd_int(s + 5, (uint64_t)i, 0, i), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int64_t i = 0; i < k; i++) p->g_idx[perm[i]] = (int32_t)(i / p->g);
        free(perm);
    }
}

/* ---- one case ----------------------------------------------------------------- */

/* After a bit-exact mismatch: which column positions inside a 64-column chunk
 * and which token positions inside a 64-token tile differ ('x'), the first
 * mismatches, and for the first one the columns of the same chunk whose
 * model value the kernel wrote there (a permuted fragment shows as another
 * column). Both outputs are (m, n) 16-bit codes. */
static void diagnose(const qv_problem *p, const uint16_t *out, const uint16_t *model)
{
    char cols[65], toks[65];
    memset(cols, '.', 64), memset(toks, '.', 64);
    cols[64] = toks[64] = '\0';
    int shown = 0;
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            const int64_t e = i * p->n + j;
            if (out[e] == model[e]) continue;
            cols[j % 64] = 'x', toks[i % 64] = 'x';
            if (shown++ >= 4) continue;
            fprintf(stderr, "  (%" PRId64 ", %" PRId64 "): out 0x%04x model 0x%04x; model has it at columns", i, j,
                    out[e], model[e]);
            const int64_t c0 = j / 64 * 64;
            int found = 0;
            for (int64_t jj = c0; jj < c0 + 64 && found < 6; jj++)
                if (model[i * p->n + jj] == out[e]) fprintf(stderr, " %" PRId64, jj), found++;
            fprintf(stderr, "%s\n", found ? "" : " (none)");
        }
    fprintf(stderr, "  columns mod 64 differing: %s\n  tokens mod 64 differing:  %s\n", cols, toks);
}

/* Runs p twice on the GPU, then checks the verdicts; returns 1 when it passed. */
static int run_case(qv_problem *p, int probe, const char *label)
{
    int take = 0;
    ck_assert_int_eq(qv_wonly_wg_wanted(p->v, (int)p->m, (int)p->n, (int)p->k, &take), QV_OK);
    ck_assert_msg(take, "%s: the wgmma path does not take this case", label);
    const size_t ob = (size_t)qv_problem_out_bytes(p);
    void *out = malloc(ob), *model = malloc(ob);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(model);
    qv_gpu_stats st;
    qv_status s = qv_gpu_run(p, NULL, 2, out, &st);
    ck_assert_msg(s == QV_OK, "%s: qv_gpu_run: %s", label, qv_errmsg());
    int ok = 1;
    if (st.nondeterministic) {
        fprintf(stderr, "FAIL %s: two launches differ, first at element %" PRId64 "\n", label, st.first_diff);
        ok = 0;
    }
    if (st.guard_writes) {
        fprintf(stderr, "FAIL %s: %" PRId64 " bytes written past the output\n", label, st.guard_writes);
        ok = 0;
    }
    qv_result r;
    if (probe != PROBE_RANDOM) {
        ck_assert_msg(ref_model_run(p, model) == QV_OK, "%s: model: %s", label, qv_errmsg());
        ref_verify_bitexact(p, model, out, &r);
        if (r.grade != QV_PASS) {
            fprintf(stderr, "FAIL %s (bit-exact vs model): %s\n", label, r.reason);
            diagnose(p, out, model);
            ok = 0;
        }
    } else {
        ref_truth t;
        ck_assert_msg(ref_truth_compute(p, &t) == QV_OK, "%s: truth: %s", label, qv_errmsg());
        ref_verify(p, &t, out, &r);
        ref_truth_clear(&t);
        if (r.grade == QV_FAIL) {
            fprintf(stderr, "FAIL %s (truth): %s\n", label, r.reason);
            ok = 0;
        }
    }
    free(out);
    free(model);
    return ok;
}

static int one_case(const qv_variant *v, int64_t m, int64_t n, int64_t k, int probe, int regime, uint64_t idx)
{
    qv_problem p;
    ck_assert_msg(qv_problem_create(&p, v, m, n, k) == QV_OK, "%s: %s", v->name, qv_errmsg());
    fill_problem(&p, probe, regime, idx);
    char label[200];
    snprintf(label, sizeof label,
             "%s m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " %s/%s seed=%" PRIu64 " case=%" PRIu64, v->name, m, n,
             k, probe_names[probe], regime_names[regime], g_seed, idx);
    int ok = run_case(&p, probe, label);
    qv_problem_destroy(&p);
    return ok;
}

/* K of kind `kw` for the row: on the group for grouped rows (K/g = 1, 3,
 * 4096/g, 4096/g + 1), else 16, 48, 4096 and 4112 (257 k16 tiles: one tile in
 * the last 64-row stage). */
static int64_t k_for(const qv_variant *v, int kw)
{
    if (v->g > 0) {
        const int64_t mult[4] = {1, 3, 4096 / v->g, 4096 / v->g + 1};
        return v->g * mult[kw];
    }
    static const int64_t plain[4] = {16, 48, 4096, 4112};
    return plain[kw];
}

/* The shapes of one row: M on and off the 64-token tile, N from one chunk to a
 * real width, K from one tile to a partial last stage. The CPU truth costs
 * M x N x K, so large M goes with small N and K and the reverse. */
static const struct {
    int64_t m, n;
    int kw, probe, regime;
} cases[] = {
    {1, 64, 0, PROBE_EXACT, REG_NORMAL},      {63, 192, 1, PROBE_ONEHOT, REG_NORMAL},
    {64, 4096, 0, PROBE_RANDOM, REG_NORMAL},  {65, 192, 3, PROBE_EXACT, REG_NORMAL},
    {200, 576, 1, PROBE_RANDOM, REG_TINY},    {1024, 192, 0, PROBE_ONEHOT, REG_NORMAL},
    {1024, 64, 1, PROBE_RANDOM, REG_LARGE},   {129, 64, 2, PROBE_EXACT, REG_NORMAL},
    {7, 4096, 2, PROBE_RANDOM, REG_NORMAL},   {1, 192, 3, PROBE_RANDOM, REG_LARGE},
    {100, 4096, 1, PROBE_EXACT, REG_NORMAL},  {65, 576, 3, PROBE_ONEHOT, REG_NORMAL},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* QVET_WO_WG_MIN_M=1 sends every M to the wgmma kernel, QVET_WO_SMALL=0 keeps
 * M <= 16 away from the small-M kernel, which the dispatcher asks first. */
static void route_to_wg(void)
{
    ck_assert_int_eq(setenv("QVET_WO_WG_MIN_M", "1", 1), 0);
    ck_assert_int_eq(setenv("QVET_WO_SMALL", "0", 1), 0);
}

/* Both token tiles (QVET_WO_WG_TOKENS): 128 tokens x 256 columns and 64 x 512. */
static const char *const token_tiles[2] = {"128", "64"};

START_TEST(registry_shapes)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    route_to_wg();
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int failed = 0;
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(setenv("QVET_WO_WG_TOKENS", token_tiles[t], 1), 0);
        for (int c = 0; c < N_CASES; c++) {
            const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 60000 + (uint64_t)c;
            if (!one_case(v, cases[c].m, cases[c].n, k_for(v, cases[c].kw), cases[c].probe, cases[c].regime, idx)) {
                fprintf(stderr, "  (QVET_WO_WG_TOKENS=%s)\n", token_tiles[t]);
                failed++;
            }
        }
    }
    ck_assert_int_eq(unsetenv("QVET_WO_WG_TOKENS"), 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%s: %d wgmma cases, %d failed (%.1f s)\n", v->name, 2 * N_CASES, failed,
           (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec));
    ck_assert_msg(failed == 0, "%s: %d of %d wgmma cases failed (see stderr)", v->name, failed, 2 * N_CASES);
}
END_TEST

/* The sanitizer pass (QVET_WG_QUICK=1): per row one block with an M tail and
 * an N tail past the first warpgroup, and one K tail. */
START_TEST(registry_quick)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    route_to_wg();
    const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 50000;
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(setenv("QVET_WO_WG_TOKENS", token_tiles[t], 1), 0);
        ck_assert_msg(one_case(v, 70, 576, k_for(v, 1), PROBE_EXACT, REG_NORMAL, idx), "%s: quick case failed (%s tokens)",
                      v->name, token_tiles[t]);
        ck_assert_msg(one_case(v, 5, 192, v->g > 0 ? 5 * v->g : 272, PROBE_ONEHOT, REG_NORMAL, idx + 1),
                      "%s: quick case failed (%s tokens)", v->name, token_tiles[t]);
    }
    ck_assert_int_eq(unsetenv("QVET_WO_WG_TOKENS"), 0);
}
END_TEST

/* ---- the switch (no CUDA call) ------------------------------------------------ */

START_TEST(switch_and_refusals)
{
    const qv_variant *w4 = qv_variant_find("marlin-w4a16-g128-f16");
    const qv_variant *act = qv_variant_find("marlin-w4a16-g128-act-f16");
    ck_assert_ptr_nonnull(w4);
    ck_assert_ptr_nonnull(act);
    const char *old = getenv("QVET_WO_WG_MIN_M");
    char *saved = old ? strdup(old) : NULL;
    int take = 1;

    /* Unset or empty: the path is off at every M. */
    ck_assert_int_eq(unsetenv("QVET_WO_WG_MIN_M"), 0);
    ck_assert_int_eq(qv_wonly_wg_wanted(w4, 1024, 4096, 4096, &take), QV_OK);
    ck_assert_int_eq(take, 0);
    ck_assert_int_eq(setenv("QVET_WO_WG_MIN_M", "", 1), 0);
    ck_assert_int_eq(qv_wonly_wg_wanted(w4, 1024, 4096, 4096, &take), QV_OK);
    ck_assert_int_eq(take, 0);

    /* A threshold: M below it stays off, M at it is taken. */
    ck_assert_int_eq(setenv("QVET_WO_WG_MIN_M", "64", 1), 0);
    ck_assert_int_eq(qv_wonly_wg_wanted(w4, 63, 4096, 4096, &take), QV_OK);
    ck_assert_int_eq(take, 0);
    ck_assert_int_eq(qv_wonly_wg_wanted(w4, 64, 4096, 4096, &take), QV_OK);
    ck_assert_int_eq(take, 1);
    /* act_order: A's sorted copy (m * k halves) after the counter area. */
    ck_assert_msg(qv_workspace_wonly(act, 1024, 4096, 4096) >= (size_t)1024 * 4096 * 2,
                  "act_order keeps A's permuted copy in the workspace");
    ck_assert_uint_eq(qv_wonly_wg_workspace(w4, 1024, 4096, 4096), 0);
    ck_assert_uint_ge(qv_wonly_wg_workspace(act, 1000, 4096, 4096), (size_t)1000 * 4096 * 2);

    /* Bad values: a usage error with a message, from the launch too, before
     * any CUDA call (the buffers are host placeholders). */
    static const char *const bad[] = {"0", "-3", "64x", "abc", "1.5"};
    static _Alignas(16) uint64_t dummy[8];
    qv_gemm_args a;
    memset(&a, 0, sizeof a);
    a.a = dummy, a.b = dummy, a.scales = dummy, a.c = dummy;
    a.m = 100, a.n = 128, a.k = 256, a.g = 128;
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        ck_assert_int_eq(setenv("QVET_WO_WG_MIN_M", bad[i], 1), 0);
        ck_assert_int_eq(qv_wonly_wg_wanted(w4, 1024, 4096, 4096, &take), QV_ERR_USAGE);
        ck_assert_msg(strstr(qv_errmsg(), "QVET_WO_WG_MIN_M") != NULL, "message names the variable: %s",
                      qv_errmsg());
        ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_USAGE);
    }
    /* A token tile other than 64 or 128: a usage error, before any CUDA call. */
    ck_assert_int_eq(setenv("QVET_WO_WG_MIN_M", "64", 1), 0);
    ck_assert_int_eq(setenv("QVET_WO_WG_TOKENS", "96", 1), 0);
    ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_USAGE);
    ck_assert_msg(strstr(qv_errmsg(), "QVET_WO_WG_TOKENS") != NULL, "message names the variable: %s", qv_errmsg());
    ck_assert_int_eq(unsetenv("QVET_WO_WG_TOKENS"), 0);

    if (saved) {
        ck_assert_int_eq(setenv("QVET_WO_WG_MIN_M", saved, 1), 0);
        free(saved);
    } else {
        ck_assert_int_eq(unsetenv("QVET_WO_WG_MIN_M"), 0);
    }
}
END_TEST

static Suite *wg_suite(int gpu, int quick)
{
    Suite *s = suite_create("gpu_wg");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, switch_and_refusals);
    if (gpu && quick)
        tcase_add_loop_test(tc, registry_quick, 0, g_nrows);
    else if (gpu)
        tcase_add_loop_test(tc, registry_shapes, 0, g_nrows);
    suite_add_tcase(s, tc);
    return s;
}

/* A device is looked for through the driver's files first, so that a machine
 * without one never sees a CUDA call. */
static int have_device(void)
{
    if (access("/dev/nvidia0", F_OK) != 0 && access("/dev/nvidiactl", F_OK) != 0) return 0;
    return qv_gpu_info_get(NULL);
}

int main(void)
{
    const char *env = getenv("QVET_SEED");
    if (env && *env) g_seed = strtoull(env, NULL, 0);
    int gpu = have_device();
    if (!gpu) printf("SKIP: no CUDA device\n");
    collect_rows();
    if (gpu)
        printf("t_gpu_wg: seed %" PRIu64 " (QVET_SEED=%" PRIu64 " replays), %d rows\n", g_seed, g_seed, g_nrows);
    const char *q = getenv("QVET_WG_QUICK");
    SRunner *sr = srunner_create(wg_suite(gpu, q && *q == '1'));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
