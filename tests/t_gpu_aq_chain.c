/* t_gpu_aq_chain.c: the pair every W8A8 / W4A8 layer runs, activation
 * quantization (qv_act_quant) followed by the GEMM on one stream, with the
 * GEMM launched as a programmatic dependent of the quantizer (the mma kernel
 * of kernels/aq_gemm.cuh, and QQQ's wgmma kernel, kernels/qqq_wg.cu, at M =
 * 40): its blocks start while the quantizer runs, prefetch weights (mma
 * kernel) or set up their ring (wgmma kernel), and must not read the
 * activation codes or scales before the quantizer has finished writing them.
 *
 * Witness: on a stream, the codes and scales are first poisoned
 * (cudaMemsetAsync), then quantized from fp16, then multiplied; the output
 * must equal, bit for bit, the same GEMM launched again on the same codes
 * after the device has drained (no overlap possible). A GEMM that read early
 * would multiply poison (0x5a codes, NaN scales) and differ. Each pair runs
 * three times, on the per-token rows whose small-M GEMMs take the mma kernel
 * (M = 1, 4, 16, 40; K = 4096 splits K, so the split-K sums run under the
 * overlap too: in a cluster, and in the second repeat through the workspace,
 * aq_cluster_max = 1), with the dependent launch
 * forced at every M (aq_pdl_max_m = 100000; by default it stops at 8).
 * Without a CUDA device the suite prints exactly "SKIP: no CUDA device" and
 * checks only that the rows it needs exist with per-token activations. */
#include <check.h>
#include <cuda_runtime.h>
#include <inttypes.h>
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

static const char *const rows[] = {"qqq-w4a8-ch", "qqq-w4a8-g128", "w8a8-i8-tok-ch", "w8a8-fp8-tok-ch"};
#define NROWS ((int)(sizeof rows / sizeof rows[0]))
static const int ms[] = {1, 4, 16, 40};
#define NMS ((int)(sizeof ms / sizeof ms[0]))
#define CHAIN_N 4096
#define CHAIN_K 4096
#define REPEATS 3

static uint64_t g_seed = 20261129u;

/* Every row the suite runs exists, quantizes its activations per token from
 * a floating-point input (int8 or e4m3 codes) and writes fp16. */
START_TEST(rows_exist)
{
    for (int r = 0; r < NROWS; r++) {
        const qv_variant *v = qv_variant_find(rows[r]);
        ck_assert_msg(v != NULL, "no row %s", rows[r]);
        ck_assert_msg(v->act_scale == QV_ASCALE_TOKEN, "%s: activations are not scaled per token", rows[r]);
        ck_assert_msg(v->afmt == QV_FMT_I8 || v->afmt == QV_FMT_E4M3, "%s: activations are not int8 or e4m3",
                      rows[r]);
        ck_assert_msg(v->gpu_kernel, "%s: no launch", rows[r]);
    }
}
END_TEST

START_TEST(quantize_then_gemm)
{
    const qv_variant *v = qv_variant_find(rows[_i / NMS]);
    ck_assert_ptr_nonnull(v);
    const int m = ms[_i % NMS], n = CHAIN_N, k = CHAIN_K;
    const uint64_t seed = g_seed * 100u + (uint64_t)_i;
    char label[256];
    qv_problem p;
    gpu_problem_probe(&p, v, m, n, k, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, seed, label, sizeof label);
    qv_packed pk;
    qv_gpu_problem gp;
    /* Every M of the suite through the dependent launch (aq_pdl_max_m); the
     * second repeat sums split-K slices through the workspace. */
    const qv_launch_opts over[REPEATS] = {
        {.aq_pdl_max_m = 100000}, {.aq_pdl_max_m = 100000, .aq_cluster_max = 1}, {.aq_pdl_max_m = 100000}};
    qv_launch_opts opts[REPEATS];
    for (int rep = 0; rep < REPEATS; rep++) opts[rep] = gpu_opts(&over[rep]);
    /* One workspace for both repeats (their splits are the same plan's). */
    gpu_problem_load(&p, &opts[0], &pk, &gp, label);
    ck_assert_uint_ge(gp.args.workspace_bytes, qv_gpu_workspace(v, m, n, k, &opts[1]));

    /* fp16 activations spanning a few binades, some negative */
    const size_t nx = (size_t)m * (size_t)k;
    uint16_t *x = malloc(nx * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < nx; i++)
        x[i] = qv_f32_to_f16((float)(8.0 * (test_rnd_unit(seed, 1, i) - 0.5)));
    void *dx = gpu_dev_copy(x, nx * sizeof *x);

    cudaStream_t st;
    ck_assert_int_eq(cudaStreamCreate(&st), cudaSuccess);
    qv_gemm_args a = gp.args;
    a.stream = st;
    const size_t ob = gp.out_bytes;
    unsigned char *chained = malloc(ob), *alone = malloc(ob);
    ck_assert_ptr_nonnull(chained);
    ck_assert_ptr_nonnull(alone);
    int differ = 0;
    for (int rep = 0; rep < REPEATS; rep++) {
        a.opts = &opts[rep];
        /* the pair, as a layer runs it, behind a poison of its inputs */
        ck_assert_int_eq(cudaMemsetAsync((void *)a.a, 0x5a, nx, st), cudaSuccess);
        ck_assert_int_eq(cudaMemsetAsync((void *)a.a_scale, 0xff, (size_t)m * sizeof(float), st), cudaSuccess);
        ck_assert(qv_gpu_poison(a.c, v->ofmt, (int64_t)m * n, st) == QV_OK);
        ck_assert_msg(qv_act_quant(QV_FMT_F16, v->afmt, m, k, dx, (void *)a.a, (float *)a.a_scale, st, a.opts) == QV_OK,
                      "%s: act quant: %s", label, qv_errmsg());
        ck_assert_msg(qv_gpu_launch(v, &a) == QV_OK, "%s: launch: %s", label, qv_errmsg());
        ck_assert_int_eq(cudaStreamSynchronize(st), cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(chained, a.c, ob, cudaMemcpyDeviceToHost), cudaSuccess);

        /* the GEMM alone on the codes now in place */
        ck_assert(qv_gpu_poison(a.c, v->ofmt, (int64_t)m * n, st) == QV_OK);
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
        ck_assert_msg(qv_gpu_launch(v, &a) == QV_OK, "%s: launch: %s", label, qv_errmsg());
        ck_assert_int_eq(cudaStreamSynchronize(st), cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(alone, a.c, ob, cudaMemcpyDeviceToHost), cudaSuccess);
        if (memcmp(chained, alone, ob) != 0) {
            size_t i = 0;
            while (chained[i] == alone[i]) i++;
            fprintf(stderr, "FAIL %s, repeat %d: the chained GEMM differs from the GEMM alone from byte %zu\n",
                    label, rep, i);
            differ++;
        }
    }
    printf("%s: quantize + GEMM on one stream, %d repeats, %d differ\n", label, REPEATS, differ);
    ck_assert_msg(differ == 0, "%s: %d chained runs differ from the GEMM alone (see stderr)", label, differ);

    ck_assert_int_eq(cudaStreamDestroy(st), cudaSuccess);
    ck_assert_int_eq(cudaFree(dx), cudaSuccess);
    free(x);
    free(chained);
    free(alone);
    gpu_problem_unload(&pk, &gp);
    qv_problem_destroy(&p);
}
END_TEST

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_aq_chain", gpu, g_seed, NROWS, &tc);
    if (gpu) tcase_add_loop_test(tc, quantize_then_gemm, 0, NROWS * NMS);
    tcase_add_test(tc, rows_exist);
    return gpu_suite_run(s);
}
