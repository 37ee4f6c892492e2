/* t_gpu_wonly_chain.c: weight-only GEMMs launched back to back on one
 * stream, each reading the output of the one before, as a forward pass runs a
 * model's layers. The small-M kernel (kernels/wonly_small.cu) and the wgmma
 * kernel (kernels/wonly_wg.cu) are launched as programmatic dependents of the
 * kernel in front: their blocks start and set up while it finishes (the
 * small-M kernel's also request their first weights and scales), and neither
 * may read its activations, write its output or touch the workspace (the
 * split-K counters and partials, act_order's permuted A) before that kernel
 * has finished.
 *
 * Witness: three layers with the same packed weights (N = K), A0 -> Y1 -> Y2
 * -> Y3, all three outputs poisoned on the stream just before the three
 * launches, one workspace for all of them; the outputs must equal, bit for
 * bit, the same three GEMMs run one at a time with the device drained before
 * and after each (no overlap possible). A layer that read its A early would
 * multiply poison (NaN) or a part of the layer before; one that took a
 * split-K ticket early would break the sums of the layer before. The outputs
 * run alone must be finite and free of poison, or the witness could not tell
 * (A0 is scaled down until three layers run alone stay finite). Every marlin row, at M = 1 and 5 (the swapped small-M kernel), 12
 * and 16 (its m16 orientation), 40 (the wgmma kernel), 16 on the wgmma kernel
 * (wo_wg_min_m = 9), and the three layers on small-M / wgmma / small-M
 * (M = 16): each four times, under the defaults, with the small-M split-K
 * sums through the workspace (wo_small_cluster = 1), with no weights
 * requested before the small-M kernel's wait (wo_small_pre = QV_OPT_OFF),
 * and with its whole ring requested before it (4): every layer's launch
 * options given as data. QVET_WONLY_ROWS=<text> keeps only
 * the rows whose name contains it. Without a CUDA device the suite prints
 * exactly "SKIP: no CUDA device" and checks only that the rows exist. */
#include <check.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/gpu.h"
#include "qvet/formats.h"
#include "qvet/gemm.h"
#include "qvet/layout.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/variant.h"
#include "support/gpu.h"
#include "support/rand.h"
#include "support/wonly.h"

#define CHAIN_NK 2048
#define LAYERS 3
/* The repeats' settings: the defaults; the small-M kernel's K slices summed
 * through the workspace; no weights requested before the wait; the whole
 * ring requested before it. */
#define REPEATS 4
static const qv_launch_opts kRepeat[REPEATS] = {
    {0}, {.wo_small_cluster = 1}, {.wo_small_pre = QV_OPT_OFF}, {.wo_small_pre = 4}};

static uint64_t g_seed = 20261203u;
static int g_rows[64];
static int g_nrows;

/* The marlin rows (QVET_WONLY_ROWS: those whose name contains the text) but
 * the FP4 ones (tests/t_gpu_ops.c runs them). */
static int keep_row(const qv_variant *v)
{
    const char *only = getenv("QVET_WONLY_ROWS");
    if (only && *only && !strstr(v->name, only)) return 0;
    return !strcmp(v->family, "marlin") && v->wfmt != QV_FMT_E2M1;
}

/* The configurations: M, and wo_wg_min_m per layer (0: unset, the default
 * routing: at N = K = 2048 the small-M kernel up to M = 16, the wgmma kernel
 * from 17). */
static const struct {
    int m;
    int wg_min_m[LAYERS];
    const char *what;
} cfgs[] = {
    {1, {0, 0, 0}, "small-M swapped"},
    {5, {0, 0, 0}, "small-M swapped"},
    {12, {0, 0, 0}, "small-M m16"},
    {16, {0, 0, 0}, "small-M m16"},
    {40, {0, 0, 0}, "wgmma"},
    {16, {9, 9, 9}, "wgmma"},
    {16, {0, 9, 0}, "small-M, wgmma, small-M"},
};

/* The launch options of layer l of configuration ci in repeat rep: the
 * suite's base, the repeat's setting and the layer's threshold. */
static qv_launch_opts layer_opts(int ci, int rep, int l)
{
    qv_launch_opts over = kRepeat[rep];
    over.wo_wg_min_m = cfgs[ci].wg_min_m[l];
    return gpu_opts(&over);
}
#define NCFG ((int)(sizeof cfgs / sizeof cfgs[0]))

/* 1 when every code of the (count) fp16 / bf16 codes at h is finite. */
static int all_finite(const uint16_t *h, size_t count, qv_fmt fmt)
{
    const uint16_t emask = fmt == QV_FMT_BF16 ? 0x7f80 : 0x7c00;
    for (size_t i = 0; i < count; i++)
        if ((h[i] & emask) == emask) return 0;
    return 1;
}

/* Launches layer l of the chain under o: A is A0 or the output before, C its own. */
static void launch_layer(const qv_variant *v, qv_gemm_args a, const void *a0, uint16_t *const y[LAYERS], int l,
                         const qv_launch_opts *o, const char *label)
{
    a.a = l == 0 ? a0 : y[l - 1];
    a.c = y[l];
    a.opts = o;
    const qv_status st = qv_gpu_launch(v, &a);
    ck_assert_msg(st == QV_OK, "%s: layer %d launch: %s", label, l + 1, qv_errmsg());
}

/* A0's codes: values in (-2^amp, 2^amp) from (seed, stream 7). */
static void fill_a0(uint16_t *h0, size_t count, qv_fmt afmt, uint64_t seed, int amp)
{
    for (size_t i = 0; i < count; i++) {
        const double u = test_rnd_unit(seed, 7, 2 * i), w = test_rnd_unit(seed, 7, 2 * i + 1);
        const float x = (float)ldexp(u + w - 1.0, amp);
        h0[i] = afmt == QV_FMT_BF16 ? qv_f32_to_bf16(x) : qv_f32_to_f16(x);
    }
}

/* The three layers one at a time, the device drained before and after
 * each, behind a poison of every output. */
static void run_alone(const qv_variant *v, qv_gemm_args a, const void *a0, uint16_t *const y[LAYERS], size_t count,
                      cudaStream_t st, const qv_launch_opts lo[LAYERS], const char *label)
{
    for (int l = 0; l < LAYERS; l++) ck_assert(qv_gpu_poison(y[l], v->ofmt, (int64_t)count, st) == QV_OK);
    for (int l = 0; l < LAYERS; l++) {
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
        launch_layer(v, a, a0, y, l, &lo[l], label);
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    }
}

/* One configuration of one row; returns the number of repeats that differ. */
static int one_chain(const qv_variant *v, int ci, uint64_t seed)
{
    const int m = cfgs[ci].m, n = CHAIN_NK, k = CHAIN_NK;
    char label[256];
    qv_problem p;
    gpu_problem_probe(&p, v, m, n, k, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, seed, label, sizeof label);
    qv_packed pk;
    qv_gpu_problem gp;
    gpu_problem_load(&p, NULL, &pk, &gp, label);

    /* A0: values in (-2^e, 2^e), in the activation format; e from -5 down
     * by 4 until three layers run alone stay finite (8-bit weights with
     * fp16 outputs grow by up to ~2^7 a layer). */
    const size_t count = (size_t)m * n, bytes = count * sizeof(uint16_t);
    uint16_t *h0 = malloc(bytes);
    ck_assert_ptr_nonnull(h0);
    int amp = -5;
    fill_a0(h0, count, v->afmt, seed, amp);
    void *a0 = gpu_dev_copy(h0, bytes);
    uint16_t *y[LAYERS];
    for (int l = 0; l < LAYERS; l++) ck_assert_int_eq(cudaMalloc((void **)&y[l], bytes), cudaSuccess);

    /* One workspace for the three layers, as large as any layer's path asks
     * in either repeat. */
    size_t ws_bytes = 0;
    for (int rep = 0; rep < REPEATS; rep++)
        for (int l = 0; l < LAYERS; l++) {
            const qv_launch_opts o = layer_opts(ci, rep, l);
            const size_t b = qv_gpu_workspace(v, m, n, k, &o);
            if (b > ws_bytes) ws_bytes = b;
        }
    void *ws = NULL;
    if (ws_bytes) {
        ck_assert_int_eq(cudaMalloc(&ws, ws_bytes), cudaSuccess);
        ck_assert_int_eq(cudaMemset(ws, 0, ws_bytes), cudaSuccess);
    }

    cudaStream_t st;
    ck_assert_int_eq(cudaStreamCreate(&st), cudaSuccess);
    qv_gemm_args a = gp.args;
    a.stream = st;
    a.workspace = ws;
    a.workspace_bytes = ws_bytes;
    uint16_t *chained = malloc(LAYERS * bytes), *alone = malloc(LAYERS * bytes);
    ck_assert_ptr_nonnull(chained);
    ck_assert_ptr_nonnull(alone);
    int differ = 0;
    for (int rep = 0; rep < REPEATS; rep++) {
        qv_launch_opts lo[LAYERS];
        for (int l = 0; l < LAYERS; l++) lo[l] = layer_opts(ci, rep, l);

        /* the layers one at a time, the device drained around each (until
         * they stay finite, on the first repeat) */
        for (;;) {
            run_alone(v, a, a0, y, count, st, lo, label);
            for (int l = 0; l < LAYERS; l++)
                ck_assert_int_eq(cudaMemcpy(alone + l * count, y[l], bytes, cudaMemcpyDeviceToHost), cudaSuccess);
            if (rep > 0 || all_finite(alone, LAYERS * count, v->ofmt) || amp <= -17) break;
            amp -= 4;
            fill_a0(h0, count, v->afmt, seed, amp);
            ck_assert_int_eq(cudaMemcpy(a0, h0, bytes, cudaMemcpyHostToDevice), cudaSuccess);
        }

        /* the chain: three poisons, then three launches, nothing in between */
        for (int l = 0; l < LAYERS; l++) ck_assert(qv_gpu_poison(y[l], v->ofmt, (int64_t)count, st) == QV_OK);
        for (int l = 0; l < LAYERS; l++) launch_layer(v, a, a0, y, l, &lo[l], label);
        ck_assert_int_eq(cudaStreamSynchronize(st), cudaSuccess);
        for (int l = 0; l < LAYERS; l++)
            ck_assert_int_eq(cudaMemcpy(chained + l * count, y[l], bytes, cudaMemcpyDeviceToHost), cudaSuccess);

        ck_assert_msg(all_finite(alone, LAYERS * count, v->ofmt),
                      "%s: an output run alone is not finite: the witness cannot tell poison from it", label);
        for (int l = 0; l < LAYERS; l++)
            if (memcmp(chained + l * count, alone + l * count, bytes) != 0) {
                size_t i = 0;
                while (chained[l * count + i] == alone[l * count + i]) i++;
                fprintf(stderr,
                        "FAIL %s (%s), repeat %d: chained layer %d differs from it run alone at output %zu "
                        "(0x%04x, alone 0x%04x)\n",
                        label, cfgs[ci].what, rep, l + 1, i, chained[l * count + i], alone[l * count + i]);
                differ++;
                break;
            }
    }

    /* every path leaves the workspace's counters zero */
    if (ws_bytes) {
        ck_assert_msg(wonly_counters_zero(label, ws, ws_bytes, n) == QV_OK, "%s", qv_errmsg());
        ck_assert_int_eq(cudaFree(ws), cudaSuccess);
    }
    ck_assert_int_eq(cudaStreamDestroy(st), cudaSuccess);
    for (int l = 0; l < LAYERS; l++) ck_assert_int_eq(cudaFree(y[l]), cudaSuccess);
    ck_assert_int_eq(cudaFree(a0), cudaSuccess);
    free(h0);
    free(chained);
    free(alone);
    gpu_problem_unload(&pk, &gp);
    qv_problem_destroy(&p);
    return differ;
}

START_TEST(chain)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    ck_assert_msg(v->ofmt == v->afmt, "%s: output format differs from the activations'", v->name);
    int differ = 0;
    for (int ci = 0; ci < NCFG; ci++) differ += one_chain(v, ci, g_seed * 1000u + (uint64_t)g_rows[_i] * 16u + ci);
    printf("%s: %d chains of %d layers (%d configurations x %d repeats), %d differ\n", v->name, NCFG * REPEATS,
           LAYERS, NCFG, REPEATS, differ);
    ck_assert_msg(differ == 0, "%s: %d chained runs differ from the layers run alone (see stderr)", v->name, differ);
}
END_TEST

/* Without a device too: the rows exist (every weight-only kind of docs/design.md §2). */
START_TEST(rows_exist)
{
    ck_assert_msg(g_nrows >= 22, "%d marlin rows with a launch, expected 22", g_nrows);
}
END_TEST

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    g_nrows = gpu_registry_rows(keep_row, g_rows, 64);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_wonly_chain", gpu, g_seed, g_nrows, &tc);
    if (gpu) tcase_add_loop_test(tc, chain, 0, g_nrows);
    if (!getenv("QVET_WONLY_ROWS")) tcase_add_test(tc, rows_exist);
    return gpu_suite_run(s);
}
