/* t_gpu_ws.c: one workspace serves every M (GPU; prints "SKIP: no CUDA device"
 * and runs only the CPU-side premise where there is none).
 *
 * gemm.h's contract: the caller zeroes a launch's workspace once and the
 * kernels leave it as they found it, so an inference engine can size one
 * workspace for its largest M and reuse it for every call. A row can have
 * several paths behind one launch (weight-only: the wgmma kernel, the small-M
 * kernel, the mma kernel, dequantize + cuBLAS; activation-quantized: the QQQ
 * wgmma kernel, the mma kernel and the cuBLASLt paths), and the split-K ones keep arrival counters in the
 * workspace; a path whose buffers covered another's counters would leave them
 * non-zero, and the next split launch would finish a tile early or never (the
 * bug class of Marlin's lock reset, docs/design.md §6). Each row runs a sequence of M
 * that walks through its paths on one workspace, each step with the exact
 * probe and bit for bit against the CPU model. */
#include <check.h>
#include <cuda_runtime.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/gpu.h"
#include "qvet/gemm.h"
#include "qvet/layout.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/variant.h"
#include "support/gpu.h"

/* The date the suite was written; QVET_SEED replaces it. Step s of case i
 * fills its probe from seed * 100 + 10 i + s. */
static uint64_t g_seed = 20261129;

/* A row, its (n, k) and the sequence of M run through one workspace.
 * Weight-only, under the default paths: 8192 columns give the small-M kernel
 * 128 counters, and K = 8192 makes it split K (M = 1 and 5 swapped, 9 and 16
 * in the m16 orientation); M = 32 and 64 take the wgmma kernel, whose few
 * tiles it shares along K (stream-K) through the same workspace.
 * Activation-quantized: M = 1 and 5 split K over 1024 columns (8 tiles of
 * 128) on the mma kernel; 16 splits too and its partials cover where M = 1
 * keeps nothing; 128 takes the QQQ rows' wgmma kernel and the int8 row's
 * cuBLASLt path; the e4m3 row runs cuBLASLt fp8 at every M. */
#define NSTEPS 7
static const struct ws_case {
    const char *row;
    int64_t n, k;
    int64_t m[NSTEPS];
} cases[] = {
    {"marlin-w4a16-ch-f16", 8192, 8192, {16, 1, 64, 5, 32, 1, 9}},
    {"marlin-fp8a16-g128-bf16", 8192, 8192, {16, 1, 64, 5, 32, 1, 9}},
    {"w8a8-i8-tok-ch-azp", 1024, 4096, {1, 128, 1, 16, 128, 5, 1}},
    {"qqq-w4a8-ch", 1024, 4096, {1, 128, 1, 16, 128, 5, 1}},
    {"qqq-w4a8-g128", 1024, 4096, {1, 128, 1, 16, 128, 5, 1}},
    {"w8a8-fp8-tok-ch", 1024, 4096, {1, 128, 1, 16, 128, 5, 1}},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

START_TEST(shared_workspace)
{
    const struct ws_case *c = &cases[_i];
    const int64_t n = c->n, k = c->k;
    const int64_t *seq_m = c->m;
    const qv_variant *v = qv_variant_find(c->row);
    ck_assert_msg(v != NULL, "no row %s", c->row);
    const qv_launch_opts base = gpu_opts(NULL);
    size_t ws_bytes = 0;
    for (int s = 0; s < NSTEPS; s++) {
        size_t b = qv_gpu_workspace(v, (int)seq_m[s], (int)n, (int)k, &base);
        if (b > ws_bytes) ws_bytes = b;
    }
    ck_assert_msg(ws_bytes > 0, "%s: no workspace at n=%" PRId64 " k=%" PRId64 ": nothing splits K", v->name, n, k);
    void *ws = NULL;
    ck_assert_int_eq(cudaMalloc(&ws, ws_bytes), cudaSuccess);
    ck_assert_int_eq(cudaMemset(ws, 0, ws_bytes), cudaSuccess);
    int failed = 0;
    for (int s = 0; s < NSTEPS; s++) {
        const uint64_t seed = g_seed * 100u + (uint64_t)_i * 10u + (uint64_t)s;
        qv_problem p;
        ck_assert_msg(qv_problem_create(&p, v, seq_m[s], n, k) == QV_OK, "%s: %s", v->name, qv_errmsg());
        ck_assert_msg(ref_probe_fill(&p, QV_PROBE_EXACT, QV_REGIME_LOGUNIFORM, seed) == QV_OK, "%s: probe: %s",
                      v->name, qv_errmsg());
        qv_packed pk;
        qv_gpu_problem gp;
        gpu_problem_load(&p, &base, &pk, &gp, v->name);
        qv_gemm_args a = gp.args;
        a.workspace = ws;
        a.workspace_bytes = ws_bytes;
        ck_assert(qv_gpu_poison(a.c, v->ofmt, seq_m[s] * n, NULL) == QV_OK);
        ck_assert_msg(qv_gpu_launch(v, &a) == QV_OK, "%s m=%" PRId64 ": launch: %s", v->name, seq_m[s], qv_errmsg());
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
        const size_t ob = (size_t)qv_problem_out_bytes(&p);
        void *out = malloc(ob), *model = malloc(ob);
        ck_assert_ptr_nonnull(out);
        ck_assert_ptr_nonnull(model);
        ck_assert_int_eq(cudaMemcpy(out, a.c, ob, cudaMemcpyDeviceToHost), cudaSuccess);
        ck_assert_msg(ref_model_run(&p, model) == QV_OK, "%s: model: %s", v->name, qv_errmsg());
        qv_result r;
        ref_verify_bitexact(&p, model, out, &r);
        if (r.grade != QV_PASS) {
            fprintf(stderr, "FAIL %s m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " step %d of a shared workspace "
                    "(exact probe, seed %" PRIu64 "): %s\n", v->name, seq_m[s], n, k, s, seed, r.reason);
            failed++;
        }
        free(out);
        free(model);
        gpu_problem_unload(&pk, &gp);
        qv_problem_destroy(&p);
    }
    ck_assert_int_eq(cudaFree(ws), cudaSuccess);
    printf("%s: %d launches of M = %" PRId64 ", %" PRId64 ", %" PRId64 ", ... through one workspace, %d failed\n",
           v->name, NSTEPS, seq_m[0], seq_m[1], seq_m[2], failed);
    ck_assert_msg(failed == 0, "%s: %d steps of the shared-workspace sequence failed (see stderr)", v->name, failed);
}
END_TEST

/* The premise of the GPU test, checked everywhere (planned for the H200's
 * 132 SMs, compute capability 9.0: no CUDA call): the first step of every
 * sequence splits K, so its workspace holds a counters area and at least two
 * fp32/int32 slices of that step's output. */
START_TEST(split_premise)
{
    const struct ws_case *c = &cases[_i];
    const qv_variant *v = qv_variant_find(c->row);
    ck_assert_msg(v != NULL && v->gpu_kernel && qv_gpu_launcher(v)->workspace != NULL, "no row %s with a workspace",
                  c->row);
    const qv_launch_opts h200 = {.sms = 132, .arch = 90};
    const size_t b = qv_gpu_workspace(v, (int)c->m[0], (int)c->n, (int)c->k, &h200);
    ck_assert_msg(b >= 1024 + 2 * (size_t)c->m[0] * (size_t)c->n * 4,
                  "%s: workspace at m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " is %zu bytes: K is not split", v->name,
                  c->m[0], c->n, c->k, b);
}
END_TEST

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_ws", gpu, g_seed, NCASES, &tc);
    tcase_add_loop_test(tc, split_premise, 0, NCASES);
    if (gpu) tcase_add_loop_test(tc, shared_workspace, 0, NCASES);
    return gpu_suite_run(s);
}
