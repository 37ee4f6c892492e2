/* t_gpu_wonly.c: the weight-only kernel family (Marlin W4A16 with channel,
 * group, zero-point and act_order scales, W8A16 int8, FP8 weight-only) and the
 * cuBLAS baseline on the GPU.
 *
 * Witnesses, none of them the kernel's own output:
 *  - every registry row of family "marlin" (but the FP4 rows, which
 *    tests/t_gpu_ops.c runs) or "cublas" with a launch, over the
 *    edge set of M x shapes on the tiles and at the smallest legal step past
 *    them (and past the kernel's 256-column block, its 128- and 64-row K stages
 *    and its split-K slices), K/g in {1, 3, 5, ceil(1152/g)}, with three probes:
 *      exact   small-integer activations and power-of-two scales that differ
 *              per channel and group: every partial sum is exact in fp32, so the
 *              output is unique and must equal the CPU model (ref_model_run)
 *              bit for bit;
 *      one-hot one activation of 1 per row: the output is one dequantized
 *              weight (times the epilogue scale), bit for bit, which checks the
 *              packing, interleave, scale permutations and zero points element
 *              by element;
 *      random  full-range codes and log-uniform scales in three regimes
 *              (normal, tiny, large): ref_verify against the certified truth
 *              must not FAIL;
 *    every case launches twice and must be bitwise identical, with nothing
 *    written past the output (the runner's guard zone);
 *  - one real layer shape per row (M = 33, N = K = 4096) with random data;
 *  - M <= 16 on every weight-only path (qv_launch_opts.wo_small: the small-M kernel in
 *    each configuration, and the general kernel), the same inputs and the
 *    same checks;
 *  - M <= 16 with group scales on both sides of 2^-4, where the small-M
 *    kernel's 4-bit fp16 rows switch dequantization forms (small_m_scale_edges);
 *  - the small-M kernel's two chunks per warp where the default takes them on
 *    its own, Llama-3-70B gate_up at M = 1, for one row of each two-chunk
 *    kernel family (small_m_two_chunk_layer);
 *  - the NVFP4 rows with a bias where their global scale's and bias's two
 *    fp32 roundings meet a tie that one fma would not (hand-derived bits, on
 *    the mma, small-M and dequantize + cuBLAS paths; bug_20261205_nvfp4_bias_fused);
 *  - refusals: illegal N and K, a missing workspace, mismatched g (no launch).
 * QVET_WONLY_QUICK=1 runs three small cases per row instead, for the
 * compute-sanitizer passes; QVET_WONLY_QUICK=2 only the small-M split-K
 * cluster cases, =3 only the scale-edge cases, =4 only the two-chunk
 * real-layer cases; QVET_WONLY_ROWS=<text> only
 * the rows whose name contains it. Without a CUDA device the suite prints
 * exactly "SKIP: no CUDA device" and runs only the checks that make no CUDA
 * call: the refusals, the fills of its rows (rows_fillable) and the CPU model
 * and routing of the NVFP4 bias tie. Random cases come from (seed, index);
 * the seed is printed and QVET_SEED=<seed> replays it. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/gpu.h"
#include "internal/wonly_plan.h"
#include "qvet/formats.h"
#include "qvet/gemm.h"
#include "qvet/layout.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/variant.h"
#include "support/gpu.h"
#include "support/wonly.h"

static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */
static int g_gpu;                  /* a device is present (gpu_suite_start) */

/* ---- the rows under test --------------------------------------------------- */

static int g_rows[64];
static int g_nrows;

/* QVET_WONLY_ROWS=<text> keeps only the rows whose name contains it (a
 * sanitizer pass on one row); unset, every row but the FP4 ones, which
 * tests/t_gpu_ops.c runs on every path with the probes of reference/probe.c
 * (and tests/t_gpu_fp4.c in every register form). */
static int keep_row(const qv_variant *v)
{
    const char *only = getenv("QVET_WONLY_ROWS");
    if (only && *only && !strstr(v->name, only)) return 0;
    if (v->wfmt == QV_FMT_E2M1) return 0;
    return !strcmp(v->family, "marlin") || !strcmp(v->family, "cublas");
}

/* Shapes: N on the row's tile, at one tile past the kernel's 256-column block,
 * at the block, and past two blocks; K a multiple of g with K/g in {1, 3, 5,
 * ceil(1152/g)} (grouped rows) or on the K tile, past a 4-bit stage (128) and long enough
 * for several split-K slices. Large M keeps N and K small so the CPU truth
 * stays fast. */
static void shape_for(const qv_variant *v, int idx, int64_t m, int64_t *n, int64_t *k)
{
    const int64_t nt = v->n_tile;
    const int64_t ns[4] = {nt, 256 + nt, 256 > nt ? 256 : nt, 512 + nt};
    int64_t ks[4];
    if (v->g > 0) {
        ks[0] = v->g, ks[1] = 3 * v->g, ks[2] = 5 * v->g, ks[3] = v->g * ((1152 + v->g - 1) / v->g);
    } else {
        const int64_t kt = v->k_tile;
        ks[0] = kt, ks[1] = 3 * kt, ks[2] = 128 + kt, ks[3] = 1024 + kt;
    }
    *n = ns[idx % 4];
    *k = ks[(idx / 4 + idx) % 4];
    if (m > 64) {
        if (*n > 320) *n = 256 + nt;
        if (*k > 640) *k = ks[2];
    }
}

/* ---- one case ----------------------------------------------------------------- */

/* One case under launch options o (NULL: the suite's base), launched twice,
 * with its verdicts; returns 1 when it passed. */
static int one_case(const qv_variant *v, int64_t m, int64_t n, int64_t k, int probe, int regime, uint64_t idx,
                    const qv_launch_opts *o)
{
    return wonly_one_case(v, m, n, k, probe, regime, g_seed, idx, 0, o);
}

/* One registry row over the whole edge set of M, every probe. */
START_TEST(registry_edges)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    int failed = 0, cases = 0;
    for (int mi = 0; mi < GPU_N_EDGE_M; mi++)
        for (int probe = 0; probe < PROBE_COUNT; probe++) {
            int64_t n, k;
            const int64_t m = gpu_edge_m[mi];
            shape_for(v, mi * PROBE_COUNT + probe, m, &n, &k);
            const int regime = probe == PROBE_RANDOM ? mi % REG_COUNT : REG_NORMAL;
            const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + (uint64_t)mi * 10 + (uint64_t)probe;
            failed += !one_case(v, m, n, k, probe, regime, idx, NULL);
            cases++;
        }
    printf("%s: %d edge cases, %d failed\n", v->name, cases, failed);
    ck_assert_msg(failed == 0, "%s: %d of %d cases failed (see stderr)", v->name, failed, cases);
}
END_TEST

/* A real layer shape: many split-K slices and 64-bit partial offsets in use. */
START_TEST(registry_real)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 99999;
    ck_assert_msg(one_case(v, 33, 4096, 4096, PROBE_RANDOM, REG_NORMAL, idx, NULL), "%s: real shape failed", v->name);
    ck_assert_msg(one_case(v, 1, 4096, 4096, PROBE_EXACT, REG_NORMAL, idx + 1, NULL), "%s: real shape failed", v->name);
}
END_TEST

/* The sanitizer pass (QVET_WONLY_QUICK=1, for compute-sanitizer memcheck and
 * racecheck, which slow kernels a hundredfold): per row one case for each
 * row tile (16, 32 and 64 rows), with split-K and an N tail. */
START_TEST(registry_quick)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    const int64_t kq = v->g > 0 ? 3 * v->g : 528;
    const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 88888;
    ck_assert_msg(one_case(v, 5, 320, kq, PROBE_EXACT, REG_NORMAL, idx, NULL), "%s: quick case failed", v->name);
    ck_assert_msg(one_case(v, 70, 320, kq, PROBE_ONEHOT, REG_NORMAL, idx + 1, NULL), "%s: quick case failed", v->name);
    ck_assert_msg(one_case(v, 33, 320, kq, PROBE_EXACT, REG_NORMAL, idx + 2, NULL), "%s: quick case failed", v->name);
}
END_TEST

/* ---- path options --------------------------------------------------------------- */

/* The H200's SM count and architecture, for the workspace sizes below to be
 * a function of the shape alone, whatever the device. */
#define H200 .sms = 132, .arch = 90

/* Options for the large-M path's cases: wo_dq_min_m, wo_dq_chunk_mib and
 * wo_dq_splitk as given (0: unset), with the wgmma path (which the
 * dispatcher asks first, from M = 17 by default) off. */
static qv_launch_opts dq_opts(int min_m, double chunk_mib, int splitk)
{
    const qv_launch_opts o = {.wo_wg_min_m = QV_OPT_OFF, .wo_dq_min_m = min_m, .wo_dq_chunk_mib = chunk_mib,
                              .wo_dq_splitk = splitk};
    return o;
}

/* The small-M kernel (M <= 16, kernels/wonly_small.cu) in each of its
 * configurations and the general kernel on the same inputs (the options'
 * wo_small selects them); each must pass the same check. The shapes
 * cross the small-M kernel's 512-column block (N = 576) and split K into many
 * slices, the last one partial (257 k16 tiles
 * for channel and tensor rows; 32 groups for grouped rows, whose slices hold
 * whole groups); M runs over the row positions of its m16 tile. Exact and
 * one-hot probes compare bit for bit with the CPU model, random ones go
 * through the certified truth. */
static const struct {
    int m, probe, regime;
} small_m[] = {{1, PROBE_EXACT, REG_NORMAL},  {5, PROBE_RANDOM, REG_NORMAL}, {8, PROBE_ONEHOT, REG_NORMAL},
               {9, PROBE_EXACT, REG_NORMAL},  {12, PROBE_RANDOM, REG_TINY},  {16, PROBE_RANDOM, REG_LARGE}};
#define N_SMALL_M ((int)(sizeof small_m / sizeof small_m[0]))

START_TEST(small_m_both_paths)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    if (strcmp(v->family, "marlin") != 0) return; /* the cuBLAS rows have one path */
    const int64_t n = 576, k = v->g > 0 ? 32 * (int64_t)v->g : 4112;
    int failed = 0, cases = 0;
    /* wo_small (internal/wonly_plan.h): QV_WO_SMALL_M16_8 the small-M
     * kernel up to M = 8 in the m16 orientation, _SWAP and _SWAP2 its
     * swapped-mma configurations (M <= 8; _SWAP is what the default runs
     * there), _M16_16 the small-M kernel at every M <= 16 in the m16
     * orientation (what the default runs for 9 <= M <= 16), _NEVER the
     * general kernel. Above M = 8 only _M16_16 and _NEVER differ. */
    static const qv_launch_opts paths[] = {{.wo_small = QV_WO_SMALL_M16_8},
                                           {.wo_small = QV_WO_SMALL_SWAP},
                                           {.wo_small = QV_WO_SMALL_SWAP2},
                                           {.wo_small = QV_WO_SMALL_M16_16},
                                           {.wo_small = QV_WO_SMALL_NEVER}};
    for (int mi = 0; mi < N_SMALL_M; mi++)
        for (int path = 0; path < 5; path++) {
            const int m_le8 = small_m[mi].m <= 8;
            if (m_le8 ? path == 3 : path < 3) continue; /* the same kernel as another path */
            const int probe = small_m[mi].probe, regime = small_m[mi].regime;
            /* The same index on every path: the same inputs. */
            const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 77000 + (uint64_t)mi;
            if (!one_case(v, small_m[mi].m, n, k, probe, regime, idx, &paths[path])) {
                fprintf(stderr, "  (wo_small=%d)\n", (int)paths[path].wo_small);
                failed++;
            }
            cases++;
        }
    printf("%s: %d small-M cases on all paths, %d failed\n", v->name, cases, failed);
    ck_assert_msg(failed == 0, "%s: %d of %d small-M cases failed (see stderr)", v->name, failed, cases);
}
END_TEST

/* ---- refusals (no CUDA call) ------------------------------------------------------ */

/* The suite's premise, without a device: wonly_fill fills every row the
 * device half runs (it aborts on a weight format it does not write). */
START_TEST(rows_fillable)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    int64_t n, k;
    shape_for(v, 0, 1, &n, &k);
    qv_problem p;
    ck_assert_msg(qv_problem_create(&p, v, 1, n, k) == QV_OK, "%s: %s", v->name, qv_errmsg());
    for (int probe = 0; probe < PROBE_COUNT; probe++) wonly_fill(&p, probe, REG_NORMAL, g_seed, (uint64_t)_i);
    qv_problem_destroy(&p);
}
END_TEST

START_TEST(refusals)
{
    const qv_variant *w4 = qv_variant_find("marlin-w4a16-g128-f16");
    const qv_variant *cb = qv_variant_find("cublas-f16");
    ck_assert_ptr_nonnull(w4);
    ck_assert_ptr_nonnull(cb);
    /* Non-NULL placeholders: every refusal below happens before any use. */
    static _Alignas(16) uint64_t dummy[8];
    qv_gemm_args a;
    memset(&a, 0, sizeof a);
    a.a = dummy, a.b = dummy, a.scales = dummy, a.c = dummy;
    a.m = 4, a.n = 96, a.k = 256, a.g = 128;
    ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_SHAPE); /* N not a multiple of 64 */
    a.n = 128, a.k = 200;
    ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_SHAPE); /* K not a multiple of 16 */
    a.k = 192;
    ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_SHAPE); /* g = 128 does not divide K */
    a.k = 256, a.g = 64;
    ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_SHAPE); /* g disagrees with the row */
    a.g = 128, a.m = 1, a.n = 64, a.k = 8192;
    const qv_launch_opts h200 = {H200};
    a.opts = &h200;
    ck_assert_msg(qv_workspace_wonly(w4, 1, 64, 8192, &h200) > 0, "a split-K shape needs a workspace");
    ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_USAGE); /* workspace missing */
    a.b = NULL;
    ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_USAGE); /* B missing */
    ck_assert_int_eq(qv_launch_wonly(cb, &a), QV_ERR_UNSUPPORTED); /* not a weight-only row */
    a.b = dummy;
    ck_assert_int_eq(qv_launch_cublas(w4, &a), QV_ERR_UNSUPPORTED); /* not a cuBLAS row */
    /* A bad wo_small_pre (the small-M kernel's ring stages requested before
     * its wait, 1 to 4 or QV_OPT_OFF) is a usage error naming the field,
     * found before any CUDA call; so is any other field out of range. */
    {
        a.workspace = dummy;
        a.workspace_bytes = qv_workspace_wonly(w4, a.m, a.n, a.k, &h200);
        static const qv_launch_opts bad[] = {{H200, .wo_small_pre = 5}, {H200, .wo_small_pre = -2},
                                             {H200, .wo_small_cluster = 3}, {H200, .wo_small_splits = -1}};
        static const char *const field[] = {"wo_small_pre", "wo_small_pre", "wo_small_cluster", "wo_small_splits"};
        for (int i = 0; i < 4; i++) {
            a.opts = &bad[i];
            ck_assert_int_eq(qv_launch_wonly(w4, &a), QV_ERR_USAGE);
            ck_assert_msg(strstr(qv_errmsg(), field[i]) != NULL, "%s", qv_errmsg());
        }
        a.opts = &h200;
        a.workspace = NULL;
        a.workspace_bytes = 0;
    }
    a.n = 12;
    ck_assert_int_eq(qv_launch_cublas(cb, &a), QV_ERR_SHAPE);

    /* Workspace sizing needs no device: small M splits K (fp32 partials and
     * counters), a 1024-row problem fills the SMs without splitting on the
     * mma kernel, and an act_order row always holds its permuted copy of A
     * (m*k halves). The large-M path (M >= wo_dq_min_m) holds the
     * dequantized fp16 weights: all n*k of them unchunked, else two chunk
     * buffers of whole 256-column groups of at most wo_dq_chunk_mib MiB
     * (24 MiB / (2 bytes * 4096) = 3072 columns), plus an fp32 chunk of the
     * product (m * 3072 floats) for channel scales; past a few KiB kept for
     * the other paths' arrival counters. */
    const qv_variant *act = qv_variant_find("marlin-w4a16-g128-act-f16");
    const qv_variant *ch = qv_variant_find("marlin-w8a16-ch-f16");
    ck_assert_ptr_nonnull(act);
    ck_assert_ptr_nonnull(ch);
    ck_assert_msg(qv_workspace_wonly(w4, 1, 4096, 4096, &h200) >= 2 * 4096 * sizeof(float),
                  "M=1 on a 4096 x 4096 layer splits K into at least two fp32 slices");
    qv_launch_opts e = dq_opts(1000000000, 0, 0);
    e.sms = 132, e.arch = 90;
    ck_assert_uint_eq(qv_workspace_wonly(w4, 1024, 4096, 4096, &e), 0);
    const size_t kib64 = (size_t)64 << 10;
    e = dq_opts(64, QV_OPT_OFF, 0);
    e.sms = 132, e.arch = 90;
    const size_t whole = qv_workspace_wonly(w4, 1024, 4096, 4096, &e);
    ck_assert_msg(whole >= (size_t)4096 * 4096 * 2 && whole < (size_t)4096 * 4096 * 2 + kib64,
                  "unchunked: n*k halves, got %zu bytes", whole);
    e = dq_opts(64, 24, 0);
    e.sms = 132, e.arch = 90;
    const size_t chunked = qv_workspace_wonly(w4, 1024, 4096, 4096, &e);
    ck_assert_msg(chunked >= (size_t)2 * 3072 * 4096 * 2 && chunked < (size_t)2 * 3072 * 4096 * 2 + kib64,
                  "24 MiB chunks: two buffers of 3072 columns, got %zu bytes", chunked);
    ck_assert_uint_eq(qv_workspace_wonly(ch, 1024, 4096, 4096, &e), chunked + (size_t)1024 * 3072 * 4);
    /* k = 28672: 24 MiB hold only 438 columns, but a chunk keeps at least
     * M = 1024 columns (A is re-read once per chunk). */
    const size_t longk = qv_workspace_wonly(w4, 1024, 8192, 28672, &e);
    ck_assert_msg(longk >= (size_t)2 * 1024 * 28672 * 2 && longk < (size_t)2 * 1024 * 28672 * 2 + kib64,
                  "k = 28672: two buffers of 1024 columns, got %zu bytes", longk);
    /* Split K: 1024 x 1024 is 8 x 8 tiles of 128 x 128, so 4 slices reach the
     * 132 SMs, each with an fp32 (m, 1024) product. */
    e = dq_opts(64, 24, QV_OPT_ON);
    e.sms = 132, e.arch = 90;
    ck_assert_uint_eq(qv_workspace_wonly(w4, 1024, 8192, 28672, &e), longk + (size_t)4 * 1024 * 1024 * 4);
    ck_assert_msg(qv_workspace_wonly(act, 1024, 4096, 4096, &h200) >= (size_t)1024 * 4096 * 2,
                  "act_order keeps A's permuted copy in the workspace");
    ck_assert_uint_eq(qv_workspace_wonly(cb, 1, 4096, 4096, &h200), 0); /* not a weight-only row */
}
END_TEST

/* ---- the large-M path: dequantize + cuBLAS (kernels/wonly_dq.cu) ------------------ */

/* K for the large-M cases: on the row's group (K/g in {1, 3, 5, 4}) or, for
 * channel/tensor rows, on the K tile and off the 128-row dequant tile; the
 * last (32 k16 rows for g = 128 and channel rows) splits into 4 slices. */
static int64_t dq_k(const qv_variant *v, int which)
{
    static const int64_t mult[4] = {1, 3, 5, 4};
    static const int64_t plain[4] = {16, 144, 1040, 512};
    return v->g > 0 ? v->g * mult[which] : plain[which];
}

/* One marlin row through the large-M path (wo_dq_min_m = 1) at M on and off
 * 16/64-row edges, with 256-column chunks (wo_dq_chunk_mib = 0.01) that
 * leave a 64-column last chunk and reuse both ping-pong buffers (N = 832:
 * 256 + 256 + 256 + 64), the default chunking and none, with and without
 * split K (wo_dq_splitk: 2 or 4 slices where K allows), each with the
 * exact, one-hot and random probes through the verifier; one_case also checks
 * that two launches are bitwise identical and that nothing lands past the
 * output. */
START_TEST(dq_path)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    if (strcmp(v->family, "marlin")) return; /* the cuBLAS rows have no large-M path */
    /* chunk: wo_dq_chunk_mib (0 unset, QV_OPT_OFF one chunk); splitk: wo_dq_splitk. */
    static const struct {
        int64_t m, n;
        int kw;
        double chunk;
        int splitk;
    } cases[] = {
        {64, 832, 1, 0.01, 0}, {65, 576, 2, 0.01, QV_OPT_ON},       {100, 64, 3, 0.01, QV_OPT_ON},
        {129, 320, 1, 0, 0},   {257, 320, 0, QV_OPT_OFF, 0}, {72, 320, 3, 0, QV_OPT_ON},
    };
    int failed = 0, runs = 0;
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        const qv_launch_opts e = dq_opts(1, cases[c].chunk, cases[c].splitk);
        for (int probe = 0; probe < PROBE_COUNT; probe++) {
            const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 70000 + (uint64_t)c * 10 + (uint64_t)probe;
            const int regime = probe == PROBE_RANDOM ? c % REG_COUNT : REG_NORMAL;
            failed += !one_case(v, cases[c].m, cases[c].n, dq_k(v, cases[c].kw), probe, regime, idx, &e);
            runs++;
        }
    }
    printf("%s: %d large-M path cases, %d failed\n", v->name, runs, failed);
    ck_assert_msg(failed == 0, "%s: %d of %d large-M path cases failed (see stderr)", v->name, failed, runs);
}
END_TEST

/* The same inputs through the mma kernel (wo_dq_min_m = 10^9) and the
 * large-M path (wo_dq_min_m = 1), without and with split K, at the same M:
 * all must pass the verifier, bit for bit against the model on the exact
 * probe. */
START_TEST(dq_vs_mma)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    if (strcmp(v->family, "marlin")) return;
    static const int64_t ms[2] = {65, 128};
    int failed = 0;
    for (int mi = 0; mi < 2; mi++)
        for (int probe = 0; probe < PROBE_COUNT; probe += PROBE_RANDOM) {
            qv_problem p;
            ck_assert_msg(qv_problem_create(&p, v, ms[mi], 320, dq_k(v, 3)) == QV_OK, "%s: %s", v->name, qv_errmsg());
            const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 77000 + (uint64_t)mi * 10 + (uint64_t)probe;
            wonly_fill(&p, probe, REG_NORMAL, g_seed, idx);
            static const int min_m[3] = {1000000000, 1, 1};
            static const int splitk[3] = {0, 0, QV_OPT_ON};
            static const char *const names[3] = {"mma", "dequant+cuBLAS", "dequant+cuBLAS split-K"};
            for (int path = 0; path < 3; path++) {
                char label[200];
                snprintf(label, sizeof label, "%s m=%" PRId64 " n=320 k=%" PRId64 " %s via %s seed=%" PRIu64
                         " case=%" PRIu64, v->name, ms[mi], dq_k(v, 3), wonly_probe_names[probe], names[path],
                         g_seed, idx);
                const qv_launch_opts e = dq_opts(min_m[path], 0.01, splitk[path]);
                failed += !wonly_run_case(&p, probe, label, 0, &e);
            }
            qv_problem_destroy(&p);
        }
    ck_assert_msg(failed == 0, "%s: %d runs failed on one of the three paths (see stderr)", v->name, failed);
}
END_TEST

/* The small-M kernel's split-K sums (kernels/wonly_small.cu): the K slices of
 * a column tile are summed in clusters of C = 1, 2, 4 or 8 blocks (the largest
 * power of two up to 8 dividing the slice count) through distributed shared
 * memory, and with Q = slices / C > 1 clusters the Q cluster sums go through
 * global memory. The options' wo_small_splits forces the slice count (slices of
 * whole groups, or of k16 tiles for channel and tensor rows, that differ by
 * at most one group or tile), so that each row runs C = 1, 2,
 * 4 and 8 with Q = 1 and Q > 1, in both mma orientations, on column tiles
 * that are whole (N = 576: 512 + 64), a single 64-column chunk (N = 64) and
 * a partial last block (N = 1088), with every probe: exact and one-hot bit
 * for bit against the CPU model (each slice counted once, in its place),
 * random against the certified truth (the fixed summation order within the
 * declared bound), and two launches bitwise identical. The cases cap the
 * cluster at 8 (wo_small_cluster; the forced slice count then takes the
 * largest cluster that divides it), one at 16 (16 slices: one cluster of 16,
 * non-portable), one leaves the default. Channel and tensor rows
 * have 257 k16 tiles (K = 4112): 8 slices give C = 8, Q = 1; 16 C = 8, Q = 2;
 * 24 C = 8, Q = 3; 12 C = 4, Q = 3; 6 C = 2, Q = 3; 5 C = 1, Q = 5; 4 (at
 * M = 8, whose 65-tile slices fit) C = 4, Q = 1. Grouped rows have 32 groups:
 * 8, 16 and 4 slices are of equal length, 24 of one or two groups, 12 of two
 * or three, 6 of five or six and 5 of six or seven (slices of different
 * lengths in one launch); 24 and 12 slices give C = 8, Q = 3 and C = 4,
 * Q = 3. */
#define M16 QV_WO_SMALL_M16_16
#define SWAP QV_WO_SMALL_SWAP
static const struct {
    int m, n, probe, regime;
    qv_launch_opts o; /* wo_small (0: the default), wo_small_splits, wo_small_cluster (0: the default) */
} cluster_cases[] = {
    {16, 576, PROBE_EXACT, REG_NORMAL, {.wo_small = M16, .wo_small_splits = 8, .wo_small_cluster = 8}},
    {16, 576, PROBE_RANDOM, REG_LARGE, {.wo_small = M16, .wo_small_splits = 16, .wo_small_cluster = 8}},
    {16, 64, PROBE_ONEHOT, REG_NORMAL, {.wo_small = M16, .wo_small_splits = 12, .wo_small_cluster = 8}},
    {12, 1088, PROBE_EXACT, REG_NORMAL, {.wo_small = M16, .wo_small_splits = 24, .wo_small_cluster = 8}},
    {8, 576, PROBE_RANDOM, REG_NORMAL, {.wo_small = SWAP, .wo_small_splits = 16, .wo_small_cluster = 8}},
    {5, 1088, PROBE_EXACT, REG_NORMAL, {.wo_small = QV_WO_SMALL_SWAP2, .wo_small_splits = 6, .wo_small_cluster = 8}},
    {1, 576, PROBE_EXACT, REG_NORMAL, {.wo_small = SWAP, .wo_small_splits = 24, .wo_small_cluster = 8}},
    {3, 64, PROBE_RANDOM, REG_TINY, {.wo_small_splits = 5, .wo_small_cluster = 8}},
    {16, 576, PROBE_RANDOM, REG_NORMAL, {.wo_small = M16, .wo_small_splits = 6, .wo_small_cluster = 8}},
    {8, 576, PROBE_EXACT, REG_NORMAL, {.wo_small = SWAP, .wo_small_splits = 4, .wo_small_cluster = 8}},
    {16, 576, PROBE_EXACT, REG_NORMAL, {.wo_small = M16, .wo_small_splits = 16, .wo_small_cluster = 16}},
    {4, 1088, PROBE_EXACT, REG_NORMAL, {.wo_small_splits = 24}},
};
#undef M16
#undef SWAP
#define N_CLUSTER_CASES ((int)(sizeof cluster_cases / sizeof cluster_cases[0]))

START_TEST(small_m_cluster_sums)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    if (strcmp(v->family, "marlin") != 0) return; /* the cuBLAS rows have one path */
    const int64_t k = v->g > 0 ? 32 * (int64_t)v->g : 4112;
    int failed = 0;
    for (int ci = 0; ci < N_CLUSTER_CASES; ci++) {
        const qv_launch_opts *o = &cluster_cases[ci].o;
        const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 66000 + (uint64_t)ci;
        if (!one_case(v, cluster_cases[ci].m, cluster_cases[ci].n, k, cluster_cases[ci].probe,
                      cluster_cases[ci].regime, idx, o)) {
            fprintf(stderr, "  (wo_small=%d wo_small_splits=%d wo_small_cluster=%d)\n", (int)o->wo_small,
                    o->wo_small_splits, o->wo_small_cluster);
            failed++;
        }
    }
    printf("%s: %d split-K cluster cases, %d failed\n", v->name, N_CLUSTER_CASES, failed);
    ck_assert_msg(failed == 0, "%s: %d of %d split-K cluster cases failed (see stderr)", v->name, failed,
                  N_CLUSTER_CASES);
}
END_TEST

/* Group scales on both sides of 2^-4 (wonly_fill_scale_edges): the
 * small-M kernel's swapped fp16 kernels with 4-bit codes and g >= 128 take
 * their one-fma dequantization in a warp whose 64 columns have every scale of
 * the K slice below it, the general form in the others; subnormal scales, the
 * largest scale in range (65504 2^-20) and the smallest out of it (2^-4),
 * negative scales. Every grouped marlin row at M = 1, 5, 8 (swapped) and 16
 * (m16 orientation), N = 576, eight groups, with K in its default slices, in
 * eight (wo_small_splits: one group each, so that group rows 0 and 4
 * run the one-fma form in every warp, 1, 2, 5 and 6 in all warps but one, 3
 * and 7 in none) and in three (slices of two and three groups); one-hot bit
 * for bit against the CPU model (each row reads one weight of another group
 * row), random through the certified truth. M = 1, 5 and 8 run again with two
 * chunks per warp (wo_small = QV_WO_SMALL_SWAP2): warps of 128 columns, and a last
 * warp with one chunk below N (N = 576 is nine chunks). */
START_TEST(small_m_scale_edges)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    if (strcmp(v->family, "marlin") != 0 || v->g <= 0) return;
    static const int ms[4] = {1, 5, 8, 16};
    static const int splits[3] = {0, 8, 3};                                    /* 0: the plan's */
    static const qv_wo_small_mode paths[2] = {QV_WO_SMALL_DEFAULT, QV_WO_SMALL_SWAP2};
    int failed = 0, cases = 0;
    for (int ps = 0; ps < 6; ps++) {
        const int path = ps / 3, sp = ps % 3;
        const qv_launch_opts o = {.wo_small = paths[path], .wo_small_splits = splits[sp]};
        for (int mi = 0; mi < 4; mi++)
            for (int probe = PROBE_ONEHOT; probe <= PROBE_RANDOM; probe++) {
                if (path && ms[mi] > 8) continue; /* QV_WO_SMALL_SWAP2 is QV_WO_SMALL_SWAP only up to M = 8 */
                const int64_t m = ms[mi], n = 576, k = 8 * (int64_t)v->g;
                const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 55000 + (uint64_t)mi * 10 + (uint64_t)probe;
                qv_problem p;
                ck_assert_msg(qv_problem_create(&p, v, m, n, k) == QV_OK, "%s: %s", v->name, qv_errmsg());
                wonly_fill(&p, probe, REG_NORMAL, g_seed, idx);
                wonly_fill_scale_edges(&p, probe, g_seed, idx);
                char label[200];
                snprintf(label, sizeof label,
                         "%s m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " %s/scale-edges splits=%d path=%s seed=%" PRIu64
                         " case=%" PRIu64,
                         v->name, m, n, k, wonly_probe_names[probe], splits[sp], path ? "swap2" : "default", g_seed,
                         idx);
                failed += !wonly_run_case(&p, probe, label, 0, &o);
                cases++;
                qv_problem_destroy(&p);
            }
    }
    printf("%s: %d scale-edge cases, %d failed\n", v->name, cases, failed);
    ck_assert_msg(failed == 0, "%s: %d of %d scale-edge cases failed (see stderr)", v->name, failed, cases);
}
END_TEST

/* The default's two chunks per warp (kernels/wonly_small.cu,
 * two_chunks_pay) at the one real layer where it takes them, Llama-3-70B
 * gate_up (N = 57344, K = 8192), M = 1: no shape small enough for the other
 * tests makes the default choose them, and the plans it makes there (56
 * column blocks of 1024 columns, K in 4 slices summed through the workspace)
 * run nowhere else in the suite. One row per two-chunk kernel family (4-bit
 * channel, 4-bit group scales in the one-fma form, 8-bit int in bf16, fp8
 * with group scales in bf16), the exact probe bit for bit against the CPU
 * model; the plan is checked to be the two-chunk one first, so that the case
 * cannot silently fall back to one chunk. About 30 s of CPU work per row. */
static const char *const kTwoChunkRows[] = {"marlin-w4a16-ch-f16", "marlin-w4a16-g128-f16", "marlin-w8a16-ch-bf16",
                                            "marlin-fp8a16-g128-bf16"};

START_TEST(small_m_two_chunk_layer)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    int listed = 0;
    for (size_t i = 0; i < sizeof kTwoChunkRows / sizeof kTwoChunkRows[0]; i++)
        listed |= !strcmp(v->name, kTwoChunkRows[i]);
    if (!listed) return;
    const int64_t m = 1, n = 57344, k = 8192;
    const qv_launch_opts o = gpu_opts(NULL);
    qv_wo_small_plan_info pl;
    ck_assert_int_eq(qv_wonly_small_plan_info(v, (int)m, (int)n, (int)k, &o, &pl), 1);
    ck_assert_msg(pl.swap && pl.cpw == 2, "%s: the default plan at m=1 n=57344 k=8192 has %d chunk(s) per warp",
                  v->name, pl.cpw);
    const uint64_t idx = (uint64_t)g_rows[_i] * 100000 + 44000;
    const int ok = one_case(v, m, n, k, PROBE_EXACT, REG_NORMAL, idx, &o);
    printf("%s: Llama-3-70B gate_up at M = 1 with two chunks per warp (%dx%d blocks, %d per cluster): %s\n", v->name,
           pl.n_blocks, pl.splits, pl.cluster, ok ? "ok" : "FAILED");
    ck_assert_msg(ok, "%s: the two-chunk real-layer case failed (see stderr)", v->name);
}
END_TEST

/* ---- NVFP4's global scale and bias: two fp32 roundings ---------------------------- */

/* The NVFP4 rows with a bias declare y g rounded in fp32, then plus the bias
 * rounded in fp32 (ep=ws2:bias), then the one cast; a kernel that fuses
 * y g + b into one fma (what -fmad=true makes of a plain y * g + b) rounds
 * once and differs at these ties. One product per output element, so the sum y is exact; in column 0, with a bias of 2^-24:
 *   f16:  a = 17, w = 2 (e2m1) x 64 (ue4m3), g = 987377 2^-31: y g =
 *         17 2^7 987377 2^-31 = 16785409 2^-24 = 1 + 2^-11 + 2^-24, halfway
 *         between two f32 values: 1 + 2^-11 (even); plus 2^-24, halfway
 *         again: 1 + 2^-11, which f16 rounds to 1 (0x3C00, the even one).
 *         Fused: 1 + 2^-11 + 2^-23 exactly, which f16 rounds to 1 + 2^-10.
 *   bf16: a = 9, w = 4 x 64, g = 1871417 2^-32: y g = 9 2^8 1871417 2^-32 =
 *         16842753 2^-24 = 1 + 2^-8 + 2^-24: 1 + 2^-8, then 1 (0x3F80).
 *         Fused: 1 + 2^-8 + 2^-23, which bf16 rounds to 1 + 2^-7.
 * Every other element is +0. The CPU model is held to these bits on any
 * machine; on a device, the three paths of the rows (mma; dequantize +
 * cuBLAS; small-M),
 * planned for the H200 first so that each case takes its path. */
static const struct {
    const char *row;
    double a, w, g;
    uint16_t want; /* output (0, 0) */
} kBiasTie[] = {
    {"marlin-nvfp4a16-g16-bias-f16", 17.0, 2.0, 987377.0 * 0x1p-31, 0x3C00},
    {"marlin-nvfp4a16-g16-bias-bf16", 9.0, 4.0, 1871417.0 * 0x1p-32, 0x3F80},
};
#define N_BIAS_TIE ((int)(sizeof kBiasTie / sizeof kBiasTie[0]))

static void expect_bias_tie(const uint16_t *out, int64_t n, uint16_t want, const char *who)
{
    for (int64_t j = 0; j < n; j++)
        ck_assert_msg(out[j] == (j ? 0 : want), "%s: output (0, %lld) is 0x%04x, not 0x%04x", who, (long long)j,
                      out[j], j ? 0 : want);
}

START_TEST(bug_20261205_nvfp4_bias_fused)
{
    const qv_variant *v = qv_variant_find(kBiasTie[_i].row);
    ck_assert_ptr_nonnull(v);
    const int64_t m = 1, n = 64, k = 16;
    qv_problem p;
    ck_assert_msg(qv_problem_create(&p, v, m, n, k) == QV_OK, "%s: %s", v->name, qv_errmsg());
    ((uint16_t *)p.a)[0] = (uint16_t)qv_encode(v->afmt, kBiasTie[_i].a, QV_SAT_NONE);
    ((uint8_t *)p.q)[0] = (uint8_t)qv_encode(QV_FMT_E2M1, kBiasTie[_i].w, QV_SAT_NONE);
    ((uint8_t *)p.scales)[0] = (uint8_t)qv_encode(QV_FMT_UE4M3, 64.0, QV_SAT_NONE);
    p.scales2[0] = (float)kBiasTie[_i].g;
    p.bias[0] = 0x1p-24f;
    uint16_t *out = malloc((size_t)qv_problem_out_bytes(&p));
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(ref_model_run(&p, out) == QV_OK, "%s: model: %s", v->name, qv_errmsg());
    expect_bias_tie(out, n, kBiasTie[_i].want, "CPU model");
    static const qv_launch_opts paths[3] = {
        {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_NEVER, .wo_dq_min_m = QV_OPT_OFF},
        {.wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_NEVER, .wo_dq_min_m = 1},
        {.wo_wg_min_m = QV_OPT_OFF, .wo_dq_min_m = QV_OPT_OFF}};
    static const qv_wo_path want_path[3] = {QV_WO_PATH_MMA, QV_WO_PATH_DQ, QV_WO_PATH_SMALL};
    static const char *const path_name[3] = {"mma", "dq-cublas", "small-m"};
    static const char *const who[3] = {"mma kernel", "dequantize + cuBLAS", "small-M kernel"};
    for (int t = 0; t < 3; t++) {
        qv_launch_opts planned = paths[t];
        planned.sms = 132, planned.arch = 90;
        qv_wo_path path = (qv_wo_path)0;
        ck_assert_int_eq(qv_wonly_route(v, (int)m, (int)n, (int)k, &planned, &path), QV_OK);
        ck_assert_int_eq(path, want_path[t]);
        if (!g_gpu) continue;
        const qv_launch_opts o = gpu_opts(&paths[t]);
        char label[96];
        snprintf(label, sizeof label, "%s m=1 n=64 k=16, the bias tie", v->name);
        gpu_run_twice(&p, &o, out, label, path_name[t]);
        expect_bias_tie(out, n, kBiasTie[_i].want, who[t]);
    }
    free(out);
    qv_problem_destroy(&p);
}
END_TEST

/* quick: 0 the whole suite, 1 the sanitizer pass (registry_quick), 2 the
 * small-M split-K cluster cases only (small_m_cluster_sums), 3 the scale-edge
 * cases only (small_m_scale_edges), 4 the two-chunk real-layer cases only
 * (small_m_two_chunk_layer). */
static Suite *wonly_suite(int gpu, int quick)
{
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_wonly", gpu, g_seed, g_nrows, &tc);
    tcase_add_test(tc, refusals);
    tcase_add_loop_test(tc, rows_fillable, 0, g_nrows);
    tcase_add_loop_test(tc, bug_20261205_nvfp4_bias_fused, 0, N_BIAS_TIE);
    if (gpu && quick == 2) {
        tcase_add_loop_test(tc, small_m_cluster_sums, 0, g_nrows);
    } else if (gpu && quick == 3) {
        tcase_add_loop_test(tc, small_m_scale_edges, 0, g_nrows);
    } else if (gpu && quick == 4) {
        tcase_add_loop_test(tc, small_m_two_chunk_layer, 0, g_nrows);
    } else if (gpu && quick) {
        tcase_add_loop_test(tc, registry_quick, 0, g_nrows);
    } else if (gpu) {
        tcase_add_loop_test(tc, registry_edges, 0, g_nrows);
        tcase_add_loop_test(tc, registry_real, 0, g_nrows);
        tcase_add_loop_test(tc, small_m_both_paths, 0, g_nrows);
        tcase_add_loop_test(tc, small_m_cluster_sums, 0, g_nrows);
        tcase_add_loop_test(tc, small_m_scale_edges, 0, g_nrows);
        tcase_add_loop_test(tc, small_m_two_chunk_layer, 0, g_nrows);
    }
    if (gpu && !quick) {
        TCase *dq = tcase_create("gpu_large_m");
        tcase_set_timeout(dq, 900);
        tcase_add_loop_test(dq, dq_path, 0, g_nrows);
        tcase_add_loop_test(dq, dq_vs_mma, 0, g_nrows);
        suite_add_tcase(s, dq);
    }
    return s;
}

int main(void)
{
    const int gpu = gpu_suite_start(&g_seed);
    g_gpu = gpu;
    g_nrows = gpu_registry_rows(keep_row, g_rows, 64);
    const char *q = getenv("QVET_WONLY_QUICK");
    const int quick = q && *q >= '1' && *q <= '4' ? *q - '0' : 0;
    return gpu_suite_run(wonly_suite(gpu, quick));
}
