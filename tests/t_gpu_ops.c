/* t_gpu_ops.c: the GPU testbed: every kernel path of every route table
 * (src/gpu_routes.c) as cases of data, run by one driver (GPU; prints "SKIP:
 * no CUDA device" and runs only its CPU checks where there is none).
 *
 * A case is registry rows (a glob) x the path it takes (a row of the
 * family's route table) x the launch options that make it take that path
 * (the defaults for the others; the QVET_* variables do not apply here) x a
 * shape x a probe. For every registry row the glob matches whose shape is
 * legal, the driver plans the case on the CPU (the H200's 132 SMs and
 * compute capability 9.0) and asserts that the dispatcher picks the case's
 * path; on a device it launches the problem twice with a poisoned output
 * (qv_gpu_run: same bits both times, nothing written past the output),
 * checks the output against the exact CPU model bit for bit or against the
 * certified bound (gpu_verdict), and checks that the path that ran is the
 * case's (qv_route_runs). Without a device the CPU half still runs, and
 * asserts that the cases reach every row of every route table. A new path
 * is a row in its table and cases here (CONTRIBUTING.md); the t_gpu_* suites
 * keep the special cases (published vectors, chains, shared workspaces,
 * scale edges). */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/route.h"
#include "qvet/gemm.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/variant.h"
#include "support/gpu.h"

/* The date the suite was written; QVET_SEED replaces it. Row r of case i
 * fills its probe from seed * 1000 + 10 i + r % 10. */
static uint64_t g_seed = 20261205;

/* The options that force each path (the defaults of the others stay). */
#define WO_WG {.wo_wg_min_m = 1}
#define WO_SMALL {.wo_wg_min_m = QV_OPT_OFF}
#define NO_WG {.wo_wg_min_m = QV_OPT_OFF}
#define WO_DQ {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_NEVER, .wo_dq_min_m = 1}
#define WO_MMA {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_NEVER, .wo_dq_min_m = QV_OPT_OFF}
/* The small-M kernel in each of its forms: swapped with one or two 64-column
 * chunks per warp (M <= 8), the m16 orientation (M <= 16). */
#define SMALL_SWAP {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_SWAP}
#define SMALL_SWAP2 {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_SWAP2}
#define SMALL_M16 {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_M16_16}
#define AQ_WG {.aq_wg_min_m = 1}
#define AQ_LT_I8 {.aq_wg_min_m = QV_OPT_OFF, .aq_lt_min_m = 1}
#define AQ_LT_FP8 {.aq_lt_fp8_min_m = 1}
#define AQ_MMA {.aq_wg_min_m = QV_OPT_OFF, .aq_lt_min_m = QV_OPT_OFF, .aq_lt_fp8_min_m = QV_OPT_OFF}
#define DEFAULTS {0}

#define EXACT QV_PROBE_EXACT
#define RANDOM QV_PROBE_RANDOM

/* A row that leaves out the trailing c_off4 has it zero, as C initializes
 * every member a positional initializer omits: -Wextra's warning on each of
 * them says nothing here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct op_case {
    const char *rows;     /* registry rows (a glob) */
    const char *path;     /* the route-table row the case takes */
    qv_launch_opts force; /* what makes it take it */
    int m, n, k;
    qv_probe_kind probe;
    int c_off4;           /* 1: the output 4 bytes past a 16-byte boundary (gpu_launch_c_off4) */
} kCases[] = {
    /* Weight-only. N = 192 and 320 end inside a 128- and 256-column tile;
     * K = 384 holds three 128-groups; N = 64, K = 128 is one chunk. */
    {"marlin-*", "wgmma", WO_WG, 1, 192, 384, EXACT},
    {"marlin-*", "wgmma", WO_WG, 16, 320, 384, EXACT},
    {"marlin-*", "wgmma", WO_WG, 129, 192, 384, RANDOM},
    {"marlin-*", "small-m", WO_SMALL, 1, 192, 384, EXACT},
    {"marlin-*", "small-m", WO_SMALL, 9, 64, 128, EXACT},
    {"marlin-*", "small-m", WO_SMALL, 16, 320, 384, RANDOM},
    {"marlin-*", "small-m", {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_SWAP}, 8, 192, 384, EXACT},
    {"marlin-*", "mma", {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_SWAP}, 9, 192, 384, EXACT},
    {"marlin-*", "dq-cublas", WO_DQ, 1, 192, 384, EXACT},
    {"marlin-*", "dq-cublas", WO_DQ, 65, 320, 384, RANDOM},
    {"marlin-*", "mma", WO_MMA, 1, 64, 128, EXACT},
    {"marlin-*", "mma", WO_MMA, 17, 192, 384, EXACT},
    {"marlin-*", "mma", WO_MMA, 65, 320, 384, RANDOM},
    /* The default thresholds on a layer below 2^27 weights: small-M to 16,
     * wgmma from 17; with wgmma off, mma to 63 and dequantize + cuBLAS from 64. */
    {"marlin-*", "small-m", DEFAULTS, 16, 256, 512, EXACT},
    {"marlin-*", "wgmma", DEFAULTS, 17, 256, 512, EXACT},
    {"marlin-*", "mma", {.wo_wg_min_m = QV_OPT_OFF}, 63, 256, 512, EXACT},
    {"marlin-*", "dq-cublas", {.wo_wg_min_m = QV_OPT_OFF}, 64, 256, 512, EXACT},
    /* A set wgmma threshold below 16 takes those M from the small-M kernel. */
    {"marlin-*", "small-m", {.wo_wg_min_m = 9}, 8, 192, 384, EXACT},
    {"marlin-*", "wgmma", {.wo_wg_min_m = 9}, 9, 192, 384, EXACT},

    /* FP4 (the small-M kernel to M = 16, wgmma from 17; with wgmma off, the
     * mma kernel to 63 and dequantize + cuBLAS from 64): K = 16 and 32 are
     * one group, K = 416 ends inside a pipeline or ring stage, K = 4096 at
     * M = 1 splits K; the probes at the values the Marlin FP4 preparation
     * treats apart (probe.h). The mma kernel below M = 17 only when the
     * options force it. */
    {"marlin-*fp4*", "mma", WO_MMA, 1, 64, 32, EXACT},
    {"marlin-*fp4*", "mma", WO_MMA, 1, 64, 4096, EXACT},
    {"marlin-*fp4*", "mma", WO_MMA, 16, 192, 416, QV_PROBE_FP4_CODES},
    {"marlin-*fp4*", "mma", NO_WG, 17, 320, 416, QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "mma", NO_WG, 63, 256, 512, RANDOM},
    {"marlin-*fp4*", "mma", WO_MMA, 129, 192, 384, RANDOM},
    {"marlin-*fp4*", "dq-cublas", NO_WG, 64, 256, 512, EXACT},
    {"marlin-*fp4*", "dq-cublas", NO_WG, 65, 320, 416, QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "dq-cublas", WO_DQ, 2, 192, 384, QV_PROBE_FP4_CODES},
    {"marlin-nvfp4*", "mma", WO_MMA, 3, 64, 16, QV_PROBE_FP4_GLOBAL_ONE},
    {"marlin-nvfp4*", "mma", NO_WG, 33, 192, 384, QV_PROBE_FP4_GLOBAL_TINY},
    {"marlin-nvfp4*", "mma", WO_MMA, 8, 320, 416, QV_PROBE_FP4_GLOBAL_HUGE},
    {"marlin-nvfp4*", "dq-cublas", NO_WG, 64, 192, 384, QV_PROBE_FP4_GLOBAL_ONE},
    {"marlin-nvfp4*", "dq-cublas", NO_WG, 100, 192, 384, QV_PROBE_FP4_GLOBAL_TINY},
    {"marlin-nvfp4*", "dq-cublas", NO_WG, 64, 320, 416, QV_PROBE_FP4_GLOBAL_HUGE},
    {"marlin-*fp4*-bias-*", "mma", WO_MMA, 5, 192, 384, QV_PROBE_WITNESS_BIAS},
    {"marlin-*fp4*-bias-*", "mma", NO_WG, 17, 192, 384, QV_PROBE_WITNESS_BIAS},
    {"marlin-*fp4*-bias-*", "dq-cublas", NO_WG, 64, 192, 384, QV_PROBE_WITNESS_BIAS},
    /* FP4 on the wgmma kernel: every tile (its columns x tokens, TPW 1, 2
     * and 4 m64 tiles per warp, 16 to 256 tokens), the stream-K tail (a
     * tile's K shared by blocks, fp32 parts summed in order) and its
     * absence, C only 4-byte aligned (the direct-store epilogue), K = 16 and
     * 32 (one group: the scales are still staged), K ending inside a stage;
     * the probes at the FP4 edges. */
    {"marlin-*fp4*", "wgmma", DEFAULTS, 17, 320, 416, QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "wgmma", DEFAULTS, 64, 256, 512, EXACT},
    {"marlin-*fp4*", "wgmma", DEFAULTS, 1024, 1088, 416, RANDOM},
    {"marlin-*fp4*", "wgmma", WO_WG, 1, 64, 32, EXACT},
    {"marlin-*fp4*", "wgmma", WO_WG, 3, 64, 16, QV_PROBE_FP4_CODES},
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_128X256}, 300, 192, 416, RANDOM},
    /* MXFP4 f16's one-multiply form runs in the 128-column tiles and in
     * 512x16, stage by stage: its ordinary rows there, its low and high rows
     * (codes 1 to 254) in the two-multiply copy of the same kernel. */
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_128X256}, 129, 320, 416,
     QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_512X16}, 16, 576, 416,
     QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_128X32}, 17, 192, 1024,
     QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_256X128}, 129, 320, 384, QV_PROBE_FP4_CODES},
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_512X64}, 65, 1088, 416, QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_512X16}, 16, 576, 4096, EXACT},
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_128X32}, 33, 192, 1024, RANDOM},
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_tile = QV_WG_TILE_128X16, .wo_wg_blocks = 7}, 16, 256, 4096,
     QV_PROBE_FP4_CODES},
    {"marlin-*fp4*", "wgmma", {.wo_wg_min_m = 1, .wo_wg_streamk = QV_OPT_OFF}, 100, 320, 1024, EXACT},
    {"marlin-nvfp4*", "wgmma", WO_WG, 17, 64, 16, QV_PROBE_FP4_GLOBAL_ONE},
    {"marlin-nvfp4*", "wgmma", WO_WG, 64, 192, 384, QV_PROBE_FP4_GLOBAL_TINY},
    {"marlin-nvfp4*", "wgmma", WO_WG, 129, 320, 416, QV_PROBE_FP4_GLOBAL_HUGE},
    {"marlin-*fp4*-bias-*", "wgmma", WO_WG, 9, 192, 384, QV_PROBE_WITNESS_BIAS},
    {"marlin-*fp4*-bias-*", "wgmma", DEFAULTS, 257, 320, 1024, QV_PROBE_WITNESS_BIAS},
    {"marlin-*fp4*", "wgmma", WO_WG, 70, 320, 416, QV_PROBE_FP4_SCALE_ENDS, 1},
    {"marlin-*fp4*-bias-*", "wgmma", WO_WG, 33, 192, 384, QV_PROBE_WITNESS_BIAS, 1},
    {"marlin-nvfp4*", "wgmma", WO_WG, 129, 192, 416, QV_PROBE_FP4_GLOBAL_HUGE, 1},
    /* FP4 on the small-M kernel, in each form at M = 1, 5, 8 (swapped, one
     * and two chunks per warp) and 1, 5, 8, 9, 16 (m16), every FP4 row (bias
     * on and off, f16 and bf16). N = 192 and 320 leave warps of a block
     * without a chunk (with two chunks, a warp with one); N = 1088 is a
     * second, partial block. K = 4096 splits K over clusters; forced slice
     * counts send the partials through the workspace alone (cluster 1) and
     * through both (6 slices in clusters of 2). K = 416 ends inside a ring
     * stage (its last rows one by one, the stages before in one line). */
    {"marlin-*fp4*", "small-m", SMALL_SWAP, 1, 192, 384, EXACT},
    {"marlin-*fp4*", "small-m", SMALL_SWAP, 1, 64, 4096, EXACT},
    {"marlin-*fp4*", "small-m", SMALL_SWAP, 5, 192, 416, QV_PROBE_FP4_CODES},
    {"marlin-*fp4*", "small-m", SMALL_SWAP, 8, 1088, 416, QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "small-m", SMALL_SWAP2, 1, 192, 512, QV_PROBE_FP4_CODES},
    {"marlin-*fp4*", "small-m", SMALL_SWAP2, 5, 1088, 384, EXACT},
    {"marlin-*fp4*", "small-m", SMALL_SWAP2, 8, 320, 416, QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "small-m", SMALL_SWAP2, 8, 192, 4096, RANDOM},
    {"marlin-*fp4*", "small-m", SMALL_M16, 1, 64, 32, EXACT},
    {"marlin-*fp4*", "small-m", SMALL_M16, 5, 192, 416, QV_PROBE_FP4_SCALE_ENDS},
    {"marlin-*fp4*", "small-m", SMALL_M16, 8, 320, 384, QV_PROBE_FP4_CODES},
    {"marlin-*fp4*", "small-m", SMALL_M16, 9, 1088, 416, EXACT},
    {"marlin-*fp4*", "small-m", SMALL_M16, 16, 192, 4096, EXACT},
    {"marlin-*fp4*", "small-m", SMALL_M16, 16, 320, 416, RANDOM},
    {"marlin-*fp4*", "small-m", DEFAULTS, 1, 64, 4096, QV_PROBE_FP4_CODES},
    {"marlin-*fp4*", "small-m", DEFAULTS, 16, 192, 416, QV_PROBE_FP4_CODES},
    {"marlin-*fp4*", "small-m", {.wo_small = QV_WO_SMALL_SWAP, .wo_small_splits = 5, .wo_small_cluster = 1}, 8,
     192, 1024, EXACT},
    {"marlin-*fp4*", "small-m", {.wo_small = QV_WO_SMALL_M16_16, .wo_small_splits = 6, .wo_small_cluster = 2}, 16,
     320, 1024, RANDOM},
    /* The NV global scale at 1 (block scales below 2^-6) and at both
     * extremes, and the bias witness, in both orientations. */
    {"marlin-nvfp4*", "small-m", SMALL_SWAP, 1, 64, 16, QV_PROBE_FP4_GLOBAL_ONE},
    {"marlin-nvfp4*", "small-m", SMALL_SWAP, 8, 192, 384, QV_PROBE_FP4_GLOBAL_TINY},
    {"marlin-nvfp4*", "small-m", SMALL_SWAP, 1, 320, 416, QV_PROBE_FP4_GLOBAL_HUGE},
    {"marlin-nvfp4*", "small-m", SMALL_SWAP2, 5, 1088, 416, QV_PROBE_FP4_GLOBAL_HUGE},
    {"marlin-nvfp4*", "small-m", SMALL_SWAP2, 8, 192, 1024, QV_PROBE_FP4_GLOBAL_ONE},
    {"marlin-nvfp4*", "small-m", SMALL_M16, 5, 64, 16, QV_PROBE_FP4_GLOBAL_TINY},
    {"marlin-nvfp4*", "small-m", SMALL_M16, 9, 192, 384, QV_PROBE_FP4_GLOBAL_ONE},
    {"marlin-nvfp4*", "small-m", SMALL_M16, 16, 320, 416, QV_PROBE_FP4_GLOBAL_HUGE},
    {"marlin-*fp4*-bias-*", "small-m", SMALL_SWAP, 5, 192, 384, QV_PROBE_WITNESS_BIAS},
    {"marlin-*fp4*-bias-*", "small-m", SMALL_SWAP2, 8, 1088, 384, QV_PROBE_WITNESS_BIAS},
    {"marlin-*fp4*-bias-*", "small-m", SMALL_M16, 9, 320, 1024, QV_PROBE_WITNESS_BIAS},
    {"marlin-*fp4*-bias-*", "small-m", SMALL_M16, 16, 192, 384, QV_PROBE_WITNESS_BIAS},

    /* Activation-quantized. QQQ needs N % 64 and per group K % 128; W8A8
     * N % 8 and K % 16 (the block row K % 128 for cuBLASLt). The cuBLASLt
     * cases keep to shapes its heuristic takes on the H200 (t_gpu_aq_lt's
     * int8 shapes; e4m3 with N % 16 == 0 and K % 128 == 0), so that a decline
     * shows as a failure. */
    {"qqq-*", "wgmma", AQ_WG, 1, 192, 384, EXACT},
    {"qqq-*", "wgmma", AQ_WG, 16, 320, 384, RANDOM},
    {"qqq-*", "wgmma", AQ_WG, 129, 192, 384, EXACT},
    {"qqq-*", "cublaslt-i8", AQ_LT_I8, 1, 192, 384, EXACT},
    {"qqq-*", "cublaslt-i8", AQ_LT_I8, 128, 320, 384, RANDOM},
    {"qqq-*", "mma", AQ_MMA, 1, 64, 128, EXACT},
    {"qqq-*", "mma", AQ_MMA, 65, 192, 384, EXACT},
    {"qqq-*", "mma", AQ_MMA, 129, 320, 384, RANDOM},
    {"qqq-*", "mma", DEFAULTS, 16, 256, 512, EXACT},
    {"qqq-*", "wgmma", DEFAULTS, 17, 256, 512, EXACT},
    {"qqq-*", "mma", {.aq_wg_min_m = QV_OPT_OFF}, 127, 320, 1152, EXACT},
    {"qqq-*", "cublaslt-i8", {.aq_wg_min_m = QV_OPT_OFF}, 128, 320, 1152, EXACT},
    {"w8a8-i8-*", "cublaslt-i8", AQ_LT_I8, 1, 72, 144, EXACT},
    {"w8a8-i8-*", "cublaslt-i8", AQ_LT_I8, 129, 320, 1040, RANDOM},
    {"w8a8-i8-*", "mma", DEFAULTS, 127, 320, 1040, EXACT},
    {"w8a8-i8-*", "cublaslt-i8", DEFAULTS, 128, 320, 1040, EXACT},
    {"w8a8-fp8-*", "cublaslt-fp8", AQ_LT_FP8, 1, 256, 512, EXACT},
    {"w8a8-fp8-*", "cublaslt-fp8", AQ_LT_FP8, 3, 272, 512, RANDOM},
    {"w8a8-fp8-*", "cublaslt-fp8", AQ_LT_FP8, 129, 256, 512, EXACT},
    {"w8a8-fp8-block128", "mma", DEFAULTS, 3, 256, 512, EXACT},
    {"w8a8-fp8-block128", "cublaslt-fp8", DEFAULTS, 4, 256, 512, EXACT},
    {"w8a8-*", "mma", AQ_MMA, 1, 72, 144, EXACT},
    {"w8a8-*", "mma", AQ_MMA, 17, 264, 512, EXACT},
    {"w8a8-*", "mma", AQ_MMA, 129, 256, 384, RANDOM},

    /* The cuBLAS baselines. */
    {"cublas-*", "cublas", DEFAULTS, 1, 72, 40, EXACT},
    {"cublas-*", "cublas", DEFAULTS, 17, 264, 136, RANDOM},
};
#pragma GCC diagnostic pop
#define N_CASES ((int)(sizeof kCases / sizeof kCases[0]))

static const qv_route_row *case_row(const struct op_case *c, const qv_variant *v);

/* Row v runs case c: a kernel, the glob, the case's path takes v's kind of
 * row (the FP4 rows take every weight-only path), a legal shape, the
 * probe applies. */
static int case_runs(const struct op_case *c, const qv_variant *v)
{
    return v->gpu_kernel && qv_variant_match(v, c->rows) && qv_route_covers_row(case_row(c, v), v) &&
           qv_variant_check_shape(v, c->m, c->n, c->k) == QV_OK && ref_probe_applies(v, c->probe, c->m, c->n, c->k);
}

/* The row of v's table the case names; fails the test when there is none. */
static const qv_route_row *case_row(const struct op_case *c, const qv_variant *v)
{
    const qv_route_table *t = qv_route_table_of(v);
    ck_assert_msg(t != NULL, "%s: no route table", v->name);
    for (int i = 0; i < t->n_rows; i++)
        if (!strcmp(t->rows[i].name, c->path)) return &t->rows[i];
    ck_assert_msg(0, "case %s -> %s: route table %s has no such path", c->rows, c->path, t->name);
    return NULL;
}

/* The case's options planned for the H200 without a device. */
static qv_launch_opts planned(const struct op_case *c)
{
    qv_launch_opts o = c->force;
    o.sms = 132;
    o.arch = 90;
    return o;
}

/* CPU: every case takes its path on every row it runs on, and runs on one. */
START_TEST(cases_take_their_paths)
{
    const struct op_case *c = &kCases[_i];
    const qv_launch_opts o = planned(c);
    int rows = 0;
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (!case_runs(c, v)) continue;
        const qv_route_row *want = case_row(c, v), *got = NULL;
        ck_assert_msg(qv_route_query(v, c->m, c->n, c->k, &o, &got) == QV_OK, "%s: %s", v->name, qv_errmsg());
        ck_assert_msg(got == want, "case %d, %s m=%d n=%d k=%d: the options take %s, not %s", _i, v->name, c->m, c->n,
                      c->k, got->name, want->name);
        rows++;
    }
    ck_assert_msg(rows > 0, "case %d (%s -> %s m=%d n=%d k=%d) runs on no registry row", _i, c->rows, c->path, c->m,
                  c->n, c->k);
}
END_TEST

/* CPU: the cases reach every row of every route table, a row with an M
 * threshold at two M at least (the edges around it). */
START_TEST(cases_cover_every_route)
{
    int nt = 0;
    const qv_route_table *t = qv_route_tables(&nt);
    for (int ti = 0; ti < nt; ti++)
        for (int ri = 0; ri < t[ti].n_rows; ri++) {
            const qv_route_row *r = &t[ti].rows[ri];
            int ms[N_CASES], n_ms = 0;
            for (int ci = 0; ci < N_CASES; ci++) {
                const struct op_case *c = &kCases[ci];
                int runs = 0;
                for (int i = 0; i < qv_registry_count() && !runs; i++) {
                    const qv_variant *v = qv_registry_get(i);
                    runs = case_runs(c, v) && qv_route_table_of(v) == &t[ti] && !strcmp(c->path, r->name);
                }
                int seen = !runs;
                for (int j = 0; j < n_ms && !seen; j++) seen = ms[j] == c->m;
                if (!seen) ms[n_ms++] = c->m;
            }
            ck_assert_msg(n_ms > 0, "route table %s, path %s: no case of tests/t_gpu_ops.c runs it", t[ti].name,
                          r->name);
            ck_assert_msg(!r->m_from || n_ms >= 2, "route table %s, path %s: one M only; add the M on both sides of "
                          "its threshold", t[ti].name, r->name);
        }
}
END_TEST

/* GPU: case _i on every row it runs on. */
START_TEST(case_on_device)
{
    const struct op_case *c = &kCases[_i];
    /* The case's options alone: each case states its path, so the suite's
     * QVET_* base (which the t_gpu_* suites apply) does not move it. */
    const qv_launch_opts opts = c->force;
    int failed = 0, rows = 0;
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (!case_runs(c, v)) continue;
        const qv_route_row *want = case_row(c, v);
        const uint64_t seed = g_seed * 1000u + 10u * (uint64_t)_i + (uint64_t)(rows % 10);
        qv_problem p;
        char label[256];
        gpu_problem_probe(&p, v, c->m, c->n, c->k, c->probe, QV_REGIME_LOGUNIFORM, seed, label, sizeof label);
        void *out = malloc((size_t)qv_problem_out_bytes(&p));
        ck_assert_ptr_nonnull(out);
        const long long before = qv_route_runs(want);
        gpu_run_twice_with(&p, c->c_off4 ? gpu_launch_c_off4 : NULL, &opts, out, label, c->path);
        ck_assert_msg(qv_route_runs(want) == before + 2, "%s: path %s ran %lld of the 2 launches", label, c->path,
                      qv_route_runs(want) - before);
        failed += !gpu_verdict(&p, c->probe, out, label, c->path);
        free(out);
        qv_problem_destroy(&p);
        rows++;
    }
    printf("case %d: %s on %s, m=%d n=%d k=%d %s%s: %d rows, %d failed\n", _i, c->rows, c->path, c->m, c->n, c->k,
           qv_probe_name(c->probe), c->c_off4 ? ", C 4 bytes off" : "", rows, failed);
    ck_assert_msg(failed == 0, "case %d: %d rows failed their verdict (see stderr)", _i, failed);
}
END_TEST

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_ops", gpu, g_seed, N_CASES, &tc);
    tcase_add_loop_test(tc, cases_take_their_paths, 0, N_CASES);
    tcase_add_test(tc, cases_cover_every_route);
    if (gpu) tcase_add_loop_test(tc, case_on_device, 0, N_CASES);
    return gpu_suite_run(s);
}
