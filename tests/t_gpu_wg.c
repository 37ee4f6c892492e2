/* t_gpu_wg.c: the Hopper wgmma kernel of the weight-only family
 * (kernels/wonly_wg.cu), which qv_launch_opts.wo_wg_min_m routes M >= its
 * value to; every case's launch options are data (qv_launch_opts).
 *
 * Witnesses, none of them the kernel's own output:
 *  - every registry row of family "marlin" (FP4 with its global scale and
 *    bias, tests/support/wonly.c) over M in {1, 7, 63, 64, 65, 100, 129, 200,
 *    1024}, N in {64, 192, 576, 4096} (one 64-column chunk, a partial
 *    warpgroup, one chunk past a block of 512 or 256 columns, a real width)
 *    and K on the
 *    k16 tile or the group, past the 64-row stage (K = 48, 3g) and long
 *    (4096, 4112 / 4096 + g: a partial last stage), with three probes:
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
 *    each in every block tile (wo_wg_tile: 256x128, 512x64, 128x256,
 *    128x128, 128x64, 512x32, 128x32, 512x16, 128x16);
 *    every case asserts that the wgmma path takes it, launches twice on an
 *    output poisoned before each launch (qv_gpu_run) and must be bitwise
 *    identical, with nothing written past the output (the runner's guard);
 *  - the epilogue's two forms: tensor-map stores through shared memory (C
 *    16-byte aligned, every case above) and direct stores from registers
 *    (C only 4-byte aligned: the same cases with the output 4 bytes past a
 *    16-byte boundary, a guard after it checked for stray writes);
 *  - wo_wg_min_m: unset takes M >= 17 (every row, 9 on large layers), a
 *    set value every row from it, QV_OPT_OFF never, a value out of range
 *    (or a bad wo_wg_tile, wo_wg_blocks, wo_wg_streamk) is a usage error
 *    naming the field before any CUDA call, the schedule's tail derived by
 *    hand, and act_order's workspace holds A's sorted copy (planned for the
 *    H200, no CUDA call).
 * QVET_WG_QUICK=1 runs two small cases per row instead, and QVET_WG_ROWS=<glob>
 * only the rows it matches, for the compute-sanitizer passes. Without a CUDA device the suite prints exactly
 * "SKIP: no CUDA device" and runs only the checks that make no CUDA call.
 * Random cases come from (seed, index); the seed is printed and
 * QVET_SEED=<seed> replays it. */
#include <check.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "internal/gpu.h"
#include "internal/wonly_plan.h"
#include "qvet/gemm.h"
#include "qvet/layout.h"
#include "qvet/variant.h"
#include "support/gpu.h"
#include "support/wonly.h"

static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */

/* ---- the rows under test --------------------------------------------------- */

static int g_rows[64];
static int g_nrows;

/* Every marlin row (the wgmma kernel covers them all), or those
 * QVET_WG_ROWS (an fnmatch pattern) names: the sanitizer passes run one or
 * two rows. */
static int keep_row(const qv_variant *v)
{
    const char *pat = getenv("QVET_WG_ROWS");
    if (pat && *pat && fnmatch(pat, v->name, 0) != 0) return 0;
    return !strcmp(v->family, "marlin");
}

/* ---- one case ----------------------------------------------------------------- */

/* Every M to the wgmma kernel (wo_wg_min_m = 1), M <= 16 kept away from the
 * small-M kernel, which the dispatcher asks first (wo_small never): the
 * options of every case here, with a tile and a grid where they say. */
#define TO_WG .wo_wg_min_m = 1, .wo_small = QV_WO_SMALL_NEVER

/* One case through the wgmma path (asserted) under o, launched twice, with
 * its verdicts and, on a bit-exact mismatch, where in the tile it lies. */
static int one_case(const qv_variant *v, int64_t m, int64_t n, int64_t k, int probe, int regime, uint64_t idx,
                    const qv_launch_opts *o)
{
    return wonly_one_case(v, m, n, k, probe, regime, g_seed, idx, WONLY_WG, o);
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

/* Every block tile (wo_wg_tile), columns x tokens. */
#define N_TILES 9
static const qv_wg_tile token_tiles[N_TILES] = {QV_WG_TILE_256X128, QV_WG_TILE_512X64, QV_WG_TILE_128X256,
                                                QV_WG_TILE_128X128, QV_WG_TILE_128X64, QV_WG_TILE_512X32,
                                                QV_WG_TILE_128X32,  QV_WG_TILE_512X16, QV_WG_TILE_128X16};

START_TEST(registry_shapes)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int failed = 0;
    for (int t = 0; t < N_TILES; t++) {
        const qv_launch_opts o = {TO_WG, .wo_wg_tile = token_tiles[t]};
        for (int c = 0; c < N_CASES; c++) {
            const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 60000 + (uint64_t)c;
            if (!one_case(v, cases[c].m, cases[c].n, k_for(v, cases[c].kw), cases[c].probe, cases[c].regime, idx,
                          &o)) {
                fprintf(stderr, "  (wo_wg_tile=%d)\n", (int)token_tiles[t]);
                failed++;
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%s: %d wgmma cases, %d failed (%.1f s)\n", v->name, N_TILES * N_CASES, failed,
           (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec));
    ck_assert_msg(failed == 0, "%s: %d of %d wgmma cases failed (see stderr)", v->name, failed, N_TILES * N_CASES);
}
END_TEST

/* The stream-K tail: with the persistent grid planned on 2, 3 or 7 blocks
 * (wo_wg_blocks), these shapes leave a last round the schedule shares
 * along K, or (7 blocks) have fewer tiles than blocks and share all of them
 * (asserted, qv_wonly_wg_tail_tiles), so their tail tiles are summed from 2
 * to 17 parts; K = 1040 (65 k16 tiles: a partial last stage) or 8g. */
static const struct {
    int64_t m, n;
    int probe;
} sk_cases[] = {{257, 256, PROBE_RANDOM}, {130, 384, PROBE_EXACT}, {257, 256, PROBE_ONEHOT}};
#define N_SK ((int)(sizeof sk_cases / sizeof sk_cases[0]))

START_TEST(stream_k_tail)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    static const int blocks[3] = {2, 3, 7};
    const int64_t k = v->g > 0 ? 8 * v->g : 1040;
    int failed = 0, tails = 0;
    for (int t = 0; t < N_TILES; t++) {
        for (int bl = 0; bl < 3; bl++) {
            const qv_launch_opts over = {TO_WG, .wo_wg_tile = token_tiles[t], .wo_wg_blocks = blocks[bl]};
            const qv_launch_opts o = gpu_opts(&over);
            for (int c = 0; c < N_SK; c++) {
                const int tail = qv_wonly_wg_tail_tiles(v, (int)sk_cases[c].m, (int)sk_cases[c].n, (int)k, &o);
                ck_assert_int_ge(tail, 0);
                if (tail == 0) continue;
                tails++;
                const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 70000 + (uint64_t)(100 * t + 10 * bl + c);
                if (!one_case(v, sk_cases[c].m, sk_cases[c].n, k, sk_cases[c].probe, REG_NORMAL, idx, &o)) {
                    fprintf(stderr, "  (wo_wg_tile=%d wo_wg_blocks=%d)\n", (int)token_tiles[t], blocks[bl]);
                    failed++;
                }
            }
        }
    }
    printf("%s: %d stream-K tail cases, %d failed\n", v->name, tails, failed);
    /* Every token tile reaches the tail with two of the three grids. */
    ck_assert_int_ge(tails, 2 * N_TILES);
    ck_assert_msg(failed == 0, "%s: %d of %d stream-K tail cases failed (see stderr)", v->name, failed, tails);
}
END_TEST

/* The sanitizer pass (QVET_WG_QUICK=1): per row one block with an M tail and
 * an N tail past the first warpgroup, and one K tail. */
START_TEST(registry_quick)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 50000;
    for (int t = 0; t < N_TILES; t++) {
        const qv_launch_opts o = {TO_WG, .wo_wg_tile = token_tiles[t]};
        ck_assert_msg(one_case(v, 70, 576, k_for(v, 1), PROBE_EXACT, REG_NORMAL, idx, &o),
                      "%s: quick case failed (tile %d)", v->name, (int)token_tiles[t]);
        ck_assert_msg(one_case(v, 5, 192, v->g > 0 ? 5 * v->g : 272, PROBE_ONEHOT, REG_NORMAL, idx + 1, &o),
                      "%s: quick case failed (tile %d)", v->name, (int)token_tiles[t]);
    }
    /* And one stream-K tail (the partial slots, counters and in-order sum):
     * 128x256 tiles make 2 x 2 of them for 3 blocks (the default tile for
     * this shape, 128x128, makes 6, a tail-free 2 rounds). */
    const qv_launch_opts over = {TO_WG, .wo_wg_blocks = 3, .wo_wg_tile = QV_WG_TILE_128X256};
    const qv_launch_opts sk = gpu_opts(&over);
    const int64_t k = v->g > 0 ? 8 * v->g : 1040;
    ck_assert_int_gt(qv_wonly_wg_tail_tiles(v, 257, 256, (int)k, &sk), 0);
    ck_assert_msg(one_case(v, 257, 256, k, PROBE_EXACT, REG_NORMAL, idx + 2, &sk), "%s: quick stream-K case failed",
                  v->name);
}
END_TEST

/* ---- C only 4-byte aligned: the direct-store epilogue ------------------------ */

/* One case through the wgmma path by `launch` (the 4-byte offset output,
 * the counters' check), launched twice, against the same witnesses as
 * one_case. */
static int launched_case(const qv_variant *v, int64_t m, int64_t n, int64_t k, int probe, uint64_t idx,
                         qv_launch_fn launch, const char *how, const qv_launch_opts *over)
{
    static const qv_probe_kind kinds[PROBE_COUNT] = {QV_PROBE_EXACT, QV_PROBE_ONEHOT, QV_PROBE_RANDOM};
    const qv_launch_opts o = gpu_opts(over);
    qv_wo_path path = (qv_wo_path)0;
    ck_assert_int_eq(qv_wonly_route(v, (int)m, (int)n, (int)k, &o, &path), QV_OK);
    ck_assert_msg(path == QV_WO_PATH_WG, "%s: the wgmma path does not take m=%d", v->name, (int)m);
    qv_problem p;
    ck_assert_msg(qv_problem_create(&p, v, m, n, k) == QV_OK, "%s: %s", v->name, qv_errmsg());
    wonly_fill(&p, probe, REG_NORMAL, g_seed, idx);
    char label[200];
    snprintf(label, sizeof label, "%s m=%d n=%d k=%d %s, %s (seed %llu case %llu)", v->name, (int)m, (int)n, (int)k,
             wonly_probe_names[probe], how, (unsigned long long)g_seed, (unsigned long long)idx);
    void *out = malloc((size_t)qv_problem_out_bytes(&p));
    ck_assert_ptr_nonnull(out);
    qv_gpu_stats st;
    const qv_status s = qv_gpu_run(&p, launch, &o, 2, out, &st);
    ck_assert_msg(s == QV_OK, "%s: %s", label, qv_errmsg());
    int ok = !st.nondeterministic && st.guard_writes == 0;
    if (!ok) fprintf(stderr, "FAIL %s: two launches differ or the guard was written\n", label);
    if (!gpu_verdict(&p, kinds[probe], out, label, NULL)) ok = 0;
    free(out);
    qv_problem_destroy(&p);
    return ok;
}

static int off4_case(const qv_variant *v, int64_t m, int64_t n, int64_t k, int probe, uint64_t idx,
                     const qv_launch_opts *o)
{
    return launched_case(v, m, n, k, probe, idx, gpu_launch_c_off4, "C 4 bytes off", o);
}

/* The direct stores in a 128-column tile (one chunk per warpgroup) and a
 * 512-column one (four), with M, N and K tails, and in the stream-K tail. */
START_TEST(direct_store_epilogue)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 80000;
    static const qv_launch_opts tiles[2] = {{TO_WG, .wo_wg_tile = QV_WG_TILE_128X256},
                                            {TO_WG, .wo_wg_tile = QV_WG_TILE_512X16}};
    for (int t = 0; t < 2; t++) {
        ck_assert_msg(off4_case(v, 70, 576, k_for(v, 1), PROBE_EXACT, idx + 10 * t, &tiles[t]), "%s: tile %d",
                      v->name, (int)tiles[t].wo_wg_tile);
        ck_assert_msg(off4_case(v, 5, 192, k_for(v, 3), PROBE_ONEHOT, idx + 10 * t + 1, &tiles[t]), "%s: tile %d",
                      v->name, (int)tiles[t].wo_wg_tile);
    }
    const qv_launch_opts over = {TO_WG, .wo_wg_blocks = 3, .wo_wg_tile = QV_WG_TILE_128X256};
    const qv_launch_opts sk = gpu_opts(&over);
    const int64_t k = v->g > 0 ? 8 * v->g : 1040;
    ck_assert_int_gt(qv_wonly_wg_tail_tiles(v, 257, 256, (int)k, &sk), 0);
    ck_assert_msg(off4_case(v, 257, 256, k, PROBE_RANDOM, idx + 30, &over), "%s: stream-K tail", v->name);
}
END_TEST

/* ---- act_order: the permutation of A in front of the GEMM ------------------- */

/* A launch after which the workspace's counters area (split-K tickets) must
 * read zero again, as gemm.h promises the caller who zeroed it once
 * (wonly_counters_zero). */
static qv_status launch_counters_back(const qv_variant *v, const qv_gemm_args *args)
{
    QV_TRY(qv_gpu_launch(v, args));
    QV_CUDA_TRY(cudaGetLastError(), "kernel launch");
    QV_CUDA_TRY(cudaDeviceSynchronize(), "kernel execution");
    return wonly_counters_zero(v->name, args->workspace, args->workspace_bytes, args->n);
}

/* The act_order rows' permutation kernel stages M / 132 rows per block (the H200's SMs)
 * (rounded up) by a loop of loads, or, where those rows pass 204800 bytes,
 * as many as two blocks per SM hold by one bulk copy; rows too long for a
 * block take the per-element gather. The shapes take each way with a last
 * block of fewer rows: M = 1001 at K = 4096 (8 rows a block, 64 KiB, the
 * last block one row), M = 997 at K = 11008 (8 rows, 172 KiB, the last
 * block five), M = 515 at K = 28672 (4 rows would be 224 KiB: bulk copies
 * of two rows, the last one), M = 64 at K = 28672 (one row a block) and
 * M = 17 at K = 102528 (a row of 205056 bytes: the gather). The exact
 * probe's sums change with any column of A taken out of place; after each
 * launch the workspace's counters area must read zero again. */
START_TEST(act_order_permutation)
{
    static const char *const names[2] = {"marlin-w4a16-g128-act-f16", "marlin-w4a16-g128-act-bf16"};
    static const struct {
        int64_t m, k;
    } shapes[] = {{1001, 4096}, {997, 11008}, {515, 28672}, {64, 28672}, {17, 102528}};
    static const qv_launch_opts to_wg = {TO_WG};
    int ran = 0;
    for (int r = 0; r < 2; r++) {
        const qv_variant *v = qv_variant_find(names[r]);
        ck_assert_ptr_nonnull(v);
        if (!keep_row(v)) continue;
        for (int c = 0; c < (int)(sizeof shapes / sizeof shapes[0]); c++) {
            const uint64_t idx = 90000 + 10 * (uint64_t)r + (uint64_t)c;
            ck_assert_msg(launched_case(v, shapes[c].m, 64, shapes[c].k, PROBE_EXACT, idx, launch_counters_back,
                                        "counters checked", &to_wg),
                          "%s m=%d k=%d: act_order case failed", v->name, (int)shapes[c].m, (int)shapes[c].k);
            ran++;
        }
    }
    printf("act_order permutation: %d cases\n", ran);
}
END_TEST

/* ---- the switch (no CUDA call) ------------------------------------------------ */

/* Planning for the H200 (132 SMs, compute capability 9.0): no CUDA call. */
#define H200 .sms = 132, .arch = 90

/* Whether the wgmma kernel takes the problem under o (the dispatcher asks it
 * first, so it is taken exactly when qv_wonly_route says so). */
static int wg_takes(const qv_variant *v, int m, int n, int k, qv_launch_opts o)
{
    qv_wo_path path = (qv_wo_path)0;
    ck_assert_msg(qv_wonly_route(v, m, n, k, &o, &path) == QV_OK, "%s: %s", v->name, qv_errmsg());
    return path == QV_WO_PATH_WG;
}

static int tail_tiles(const qv_variant *v, int m, int n, int k, qv_launch_opts o)
{
    return qv_wonly_wg_tail_tiles(v, m, n, k, &o);
}

/* The suite's premise, without a device: the wgmma path takes every row the
 * device half runs, at the first shape direct_store_epilogue asserts it on. */
START_TEST(rows_take_wgmma)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    const qv_launch_opts o = {H200, TO_WG, .wo_wg_tile = QV_WG_TILE_128X256};
    ck_assert_msg(wg_takes(v, 70, 576, (int)k_for(v, 1), o), "%s: the wgmma path does not take it", v->name);
}
END_TEST

/* Without a device too: wonly_fill fills every row of the suite (FP4's codes,
 * block scales, global scale and bias included) in each probe and regime,
 * and the packer takes the result. */
START_TEST(rows_fillable)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    qv_problem p;
    ck_assert_msg(qv_problem_create(&p, v, 3, 192, k_for(v, 1)) == QV_OK, "%s: %s", v->name, qv_errmsg());
    for (int probe = 0; probe < PROBE_COUNT; probe++)
        for (int regime = 0; regime < REG_COUNT; regime++) {
            wonly_fill(&p, probe, regime, g_seed, (uint64_t)_i);
            qv_packed pk;
            ck_assert_msg(qv_pack(&p, &pk) == QV_OK, "%s %s %s: %s", v->name, wonly_probe_names[probe],
                          wonly_regime_names[regime], qv_errmsg());
            qv_packed_destroy(&pk);
        }
    qv_problem_destroy(&p);
}
END_TEST

START_TEST(switch_and_refusals)
{
    const qv_variant *w4 = qv_variant_find("marlin-w4a16-g128-f16");
    const qv_variant *act = qv_variant_find("marlin-w4a16-g128-act-f16");
    ck_assert_ptr_nonnull(w4);
    ck_assert_ptr_nonnull(act);
    const qv_launch_opts dflt = {H200};

    /* Unset: the default, every row from M = 17 ... */
    ck_assert_int_eq(wg_takes(w4, 17, 4096, 4096, dflt), 1);
    ck_assert_int_eq(wg_takes(w4, 16, 4096, 4096, dflt), 0);
    /* ... and from M = 9 on layers of 2^27 weights or more (Llama-3-70B
     * down: 8192 x 28672 = 1.75 x 2^27; qkv: 10240 x 8192 = 0.625 x 2^27). */
    ck_assert_int_eq(wg_takes(w4, 9, 8192, 28672, dflt), 1);
    ck_assert_int_eq(wg_takes(w4, 8, 8192, 28672, dflt), 0);
    ck_assert_int_eq(wg_takes(w4, 16, 10240, 8192, dflt), 0);
    /* ... with or without group scales, at every M above. */
    const qv_variant *ch = qv_variant_find("marlin-w4a16-ch-f16");
    ck_assert_ptr_nonnull(ch);
    ck_assert_int_eq(wg_takes(ch, 1024, 4096, 4096, dflt), 1);
    ck_assert_int_eq(wg_takes(w4, 512, 4096, 4096, dflt), 1);
    ck_assert_int_eq(wg_takes(w4, 8192, 4096, 4096, dflt), 1);
    ck_assert_int_eq(wg_takes(ch, 16, 4096, 4096, dflt), 0);
    /* QV_OPT_OFF: never. */
    const qv_launch_opts off = {H200, .wo_wg_min_m = QV_OPT_OFF};
    ck_assert_int_eq(wg_takes(ch, 1024, 4096, 4096, off), 0);

    /* A threshold: M below it stays off, M at it is taken, on every layer. */
    const qv_launch_opts t64 = {H200, .wo_wg_min_m = 64};
    ck_assert_int_eq(wg_takes(w4, 63, 4096, 4096, t64), 0);
    ck_assert_int_eq(wg_takes(w4, 16, 8192, 28672, t64), 0);
    ck_assert_int_eq(wg_takes(w4, 64, 4096, 4096, t64), 1);
    /* act_order: A's sorted copy (m * k halves) after the counter area. */
    ck_assert_msg(qv_workspace_wonly(act, 1024, 4096, 4096, &t64) >= (size_t)1024 * 4096 * 2,
                  "act_order keeps A's permuted copy in the workspace");
    /* The wgmma path alone (dequantize + cuBLAS off): nothing for a tail-free
     * schedule (4096 x 4096 at M = 1024: 4 x 32 = 128 wide tiles, one round
     * on 132 blocks, at least 7/8 of them busy), A's sorted copy under
     * act_order. */
    const qv_launch_opts wg_only = {H200, .wo_dq_min_m = QV_OPT_OFF};
    ck_assert_uint_eq(qv_workspace_wonly(w4, 1024, 4096, 4096, &wg_only), 0);
    ck_assert_uint_ge(qv_workspace_wonly(act, 1000, 4096, 4096, &wg_only), (size_t)1000 * 4096 * 2);

    /* Options out of range: a usage error naming the field, from the launch
     * too, before any CUDA call (the buffers are host placeholders). */
    static const qv_launch_opts bad[] = {{H200, .wo_wg_min_m = -3}, {H200, .wo_wg_min_m = -2147483647},
                                         {H200, .wo_wg_tile = QV_WG_TILE_COUNT},
                                         {H200, .wo_wg_tile = (qv_wg_tile)-1},
                                         {H200, .wo_wg_blocks = QV_WG_BLOCKS_MAX + 1},
                                         {H200, .wo_wg_blocks = -3},
                                         {H200, .wo_wg_streamk = 2}};
    static const char *const field[] = {"wo_wg_min_m", "wo_wg_min_m", "wo_wg_tile", "wo_wg_tile",
                                        "wo_wg_blocks", "wo_wg_blocks", "wo_wg_streamk"};
    static _Alignas(16) uint64_t dummy[8];
    qv_gemm_args a;
    memset(&a, 0, sizeof a);
    a.a = dummy, a.b = dummy, a.scales = dummy, a.c = dummy;
    a.m = 100, a.n = 128, a.k = 256, a.g = 128;
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        qv_wo_path path;
        ck_assert_int_eq(qv_wonly_route(w4, 1024, 4096, 4096, &bad[i], &path), QV_ERR_USAGE);
        ck_assert_msg(strstr(qv_errmsg(), field[i]) != NULL, "message names the field: %s", qv_errmsg());
        a.opts = &bad[i];
        ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_USAGE);
        ck_assert_msg(strstr(qv_errmsg(), field[i]) != NULL, "message names the field: %s", qv_errmsg());
        ck_assert_int_eq(qv_wonly_wg_tail_tiles(w4, 1024, 4096, 4096, &bad[i]), -1);
    }
    /* The schedule (no CUDA call), derived by hand: the default tile has the
     * tokens that hold M (16, 32, 64, 128, else 256) in its wide form
     * (512x16, 512x32, 512x64, 256x128, 128x256) unless that has fewer than
     * 115.5 tiles and fewer than 38 x 132 = 5016 tile-stages of 64 k, then
     * its narrow form (128x16, 128x32, 128x64, 128x128). Llama-3-70B qkv at M = 1024: 4 x 80 = 320 wide tiles on 132
     * blocks, two whole rounds and a tail of 56 tiles shared along K; o's
     * 4 x 64 = 256 tiles leave 124 for the last round, which stays whole;
     * Llama-2-7B o at M = 256: 32 wide tiles x 64 stages = 2048, so 2 x 32
     * narrow tiles, all shared, unless K is one stage. */
    ck_assert_int_eq(tail_tiles(w4, 1024, 10240, 8192, dflt), 56);
    ck_assert_int_eq(tail_tiles(w4, 1024, 8192, 8192, dflt), 0);
    ck_assert_int_eq(tail_tiles(w4, 256, 4096, 4096, dflt), 64);
    ck_assert_int_eq(tail_tiles(w4, 256, 4096, 64, dflt), 0);
    /* The tokens follow M: qkv at M = 64 has 1 x 20 wide tiles x 128 stages
     * = 2560, so 1 x 80 narrow 128x64 tiles (20 when 512x64 is forced); at
     * M = 128 1 x 40 wide 256x128 tiles x 128 = 5120, wide; at M = 129 1 x 80
     * 128x256 tiles; each fewer than 7/8 of 132 and so all shared. */
    const qv_launch_opts t512x64 = {H200, .wo_wg_tile = QV_WG_TILE_512X64},
                         t512x16 = {H200, .wo_wg_tile = QV_WG_TILE_512X16};
    ck_assert_int_eq(tail_tiles(w4, 64, 10240, 8192, dflt), 80);
    ck_assert_int_eq(tail_tiles(w4, 64, 10240, 8192, t512x64), 20);
    ck_assert_int_eq(tail_tiles(w4, 128, 10240, 8192, dflt), 40);
    ck_assert_int_eq(tail_tiles(w4, 129, 10240, 8192, dflt), 80);
    /* Up to M = 32 the tokens are 32, up to 16 they are 16 (512x32 and
     * 512x16 wide, 128x32 and 128x16 narrow): qkv at M = 32 and 16 has 20
     * wide tiles x 128 stages = 2560, so 80 narrow ones (20 with 512x16
     * forced); gate_up (N = 57344) at M = 16 has 112 wide tiles, fewer than
     * 115.5 but 112 x 128 = 14336 stages, so it stays wide, all shared. */
    ck_assert_int_eq(tail_tiles(w4, 32, 10240, 8192, dflt), 80);
    ck_assert_int_eq(tail_tiles(w4, 16, 10240, 8192, dflt), 80);
    ck_assert_int_eq(tail_tiles(w4, 16, 10240, 8192, t512x16), 20);
    ck_assert_int_eq(tail_tiles(w4, 16, 57344, 8192, dflt), 112);
    ck_assert_int_eq(tail_tiles(w4, 17, 57344, 8192, dflt), 112);
    /* The stream-K tail off: none, whatever the shape. */
    const qv_launch_opts whole = {H200, .wo_wg_streamk = QV_OPT_OFF};
    ck_assert_int_eq(tail_tiles(w4, 1024, 10240, 8192, whole), 0);
    ck_assert_int_eq(tail_tiles(w4, 16, 57344, 8192, whole), 0);
}
END_TEST

/* quick: the sanitizer pass (registry_quick) instead of the whole set. */
static Suite *wg_suite(int gpu, int quick)
{
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_wg", gpu, g_seed, g_nrows, &tc);
    tcase_add_test(tc, switch_and_refusals);
    tcase_add_loop_test(tc, rows_take_wgmma, 0, g_nrows);
    tcase_add_loop_test(tc, rows_fillable, 0, g_nrows);
    if (gpu) tcase_add_loop_test(tc, direct_store_epilogue, 0, g_nrows);
    if (gpu && quick)
        tcase_add_loop_test(tc, registry_quick, 0, g_nrows);
    else if (gpu) {
        tcase_add_loop_test(tc, registry_shapes, 0, g_nrows);
        tcase_add_loop_test(tc, stream_k_tail, 0, g_nrows);
        tcase_add_test(tc, act_order_permutation);
    }
    return s;
}

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    g_nrows = gpu_registry_rows(keep_row, g_rows, 64);
    const char *q = getenv("QVET_WG_QUICK");
    return gpu_suite_run(wg_suite(gpu, q && *q == '1'));
}
