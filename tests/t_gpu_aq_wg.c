/* t_gpu_aq_wg.c: the Hopper wgmma kernel of the QQQ W4A8 rows
 * (kernels/qqq_wg.cu), which qv_launch_opts.aq_wg_min_m routes M >= its value
 * to (default 17); every case's launch options are data (qv_launch_opts).
 *
 * Witnesses, none of them the kernel's own output:
 *  - both QQQ rows (channelwise, per group) over M in {1, 16, 17, 33, 64, 65,
 *    128, 129, 300}, N in {64, 192, 320, 576} (one 64-column chunk, a partial
 *    warpgroup, past a block of 128 / 256 / 512 columns) and K on the k16 row
 *    (channelwise: 16, 144, 1040, a 16-row tail past 128-row stages) or the
 *    group (128, 384, 1152), with the exact, one-hot and random probes: the
 *    rows accumulate in exact int32 and end in one fixed fp32 epilogue, so
 *    every output is unique and must equal the CPU model (ref_model_run) bit
 *    for bit, and equal the mma kernel's output (aq_wg_min_m = QV_OPT_OFF) bit for
 *    bit; each in every block tile (aq_wg_tile, nine of them); every
 *    launch is asserted to have taken the path (qv_qqq_wg_runs) and runs
 *    twice on a poisoned output, bitwise identical, nothing written past it;
 *  - the stream-K tail: long K on a few blocks (aq_wg_blocks) so that
 *    tiles are cut into parts in several blocks, which qv_qqq_wg_tail_tiles
 *    must report, with the same bit-for-bit witnesses;
 *  - the epilogue's direct stores (C only 4-byte aligned; every other case
 *    runs the staged tensor-map stores): the output 4 bytes past a 16-byte
 *    boundary (gpu_launch_c_off4, a guard after it) in a 128- and a
 *    512-column tile and in a stream-K tail, bit for bit the model;
 *  - the published QQQ vectors in tests/data/golden (QVET_GOLDEN overrides the
 *    folder) forced through the path in every block tile: the real QQQ
 *    kernel's D bit for bit;
 *  - the schedule's tail and the route, derived by hand from the plan
 *    (Llama shapes, planned for the H200), and aq_wg_* fields out of range
 *    refused with a status naming the field before any CUDA call.
 * Without a CUDA device the suite prints exactly "SKIP: no CUDA device" and
 * runs only the checks that make no CUDA call. QVET_AQ_QUICK=1 keeps one shape
 * per row and tile (the compute-sanitizer run). Random cases come from (seed,
 * index); the seed is printed and QVET_SEED=<seed> replays it. */
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
static int g_quick;

static int g_rows[8];
static int g_nrows;

static int is_qqq_row(const qv_variant *v) { return !strcmp(v->family, "qqq"); }

/* The H200 (132 SMs, compute capability 9.0), for the plans below without a device. */
#define H200 .sms = 132, .arch = 90

/* Runs p twice under over (on the suite's base); `wg` says whether both
 * launches must have taken the wgmma path. */
static void run_path(const qv_problem *p, const qv_launch_opts *over, void *out, int wg, const char *label,
                     const char *path)
{
    const qv_launch_opts o = gpu_opts(over);
    const long long before = qv_qqq_wg_runs();
    gpu_run_twice(p, &o, out, label, path);
    const long long ran = qv_qqq_wg_runs() - before;
    ck_assert_msg(ran == (wg ? 2 : 0), "%s [%s]: %lld of 2 launches took the wgmma path, expected %d", label, path,
                  ran, wg ? 2 : 0);
}

/* First differing output of two (m, n) fp16 outputs, or -1. */
static int64_t first_diff(const uint16_t *x, const uint16_t *y, int64_t elems)
{
    for (int64_t e = 0; e < elems; e++)
        if (x[e] != y[e]) return e;
    return -1;
}

/* Every block tile (columns x tokens); the last is the largest. */
static const qv_wg_tile kTiles[] = {QV_WG_TILE_128X16, QV_WG_TILE_512X16,  QV_WG_TILE_128X32,
                                    QV_WG_TILE_512X32, QV_WG_TILE_128X64,  QV_WG_TILE_512X64,
                                    QV_WG_TILE_128X128, QV_WG_TILE_256X128, QV_WG_TILE_128X256};
static const char *const kTileNames[] = {"128x16", "512x16",  "128x32",  "512x32", "128x64",
                                         "512x64", "128x128", "256x128", "128x256"};
#define N_TILES ((int)(sizeof kTiles / sizeof kTiles[0]))

/* One problem: the mma kernel's output, then the wgmma kernel's in every
 * block tile (with `blocks` persistent blocks, 0 for the default), each
 * equal to the model and to the mma kernel bit for bit. Returns the tail
 * tiles seen in the largest tile's schedule. */
static int one_problem(const qv_variant *v, int64_t m, int64_t n, int64_t k, qv_probe_kind probe, qv_regime regime,
                       uint64_t seed, int blocks)
{
    qv_problem p;
    char label[192];
    gpu_problem_probe(&p, v, m, n, k, probe, regime, seed, label, sizeof label);
    const int64_t elems = m * n;
    const size_t ob = (size_t)qv_problem_out_bytes(&p);
    uint16_t *model = malloc(ob), *o_mma = malloc(ob), *o_wg = malloc(ob);
    ck_assert(model && o_mma && o_wg);
    ck_assert_msg(ref_model_run(&p, model) == QV_OK, "%s: model: %s", label, qv_errmsg());

    const qv_launch_opts mma = {.aq_wg_min_m = QV_OPT_OFF, .aq_lt_min_m = 2000000000};
    run_path(&p, &mma, o_mma, 0, label, "mma");
    int64_t d = first_diff(o_mma, model, elems);
    ck_assert_msg(d < 0, "%s: the mma kernel differs from the model at (%" PRId64 ", %" PRId64 "): 0x%04x vs 0x%04x",
                  label, d / n, d % n, d < 0 ? 0 : o_mma[d], d < 0 ? 0 : model[d]);
    int tail = 0;
    for (int t = 0; t < N_TILES; t++) {
        if (g_quick && t != 0 && t != N_TILES - 1) continue;
        const qv_launch_opts wg = {.aq_wg_min_m = 1, .aq_wg_tile = kTiles[t], .aq_wg_blocks = blocks};
        const qv_launch_opts wg_all = gpu_opts(&wg);
        const int tt = qv_qqq_wg_tail_tiles((int)m, (int)n, (int)k, &wg_all);
        ck_assert_int_ge(tt, 0);
        if (t == N_TILES - 1) tail = tt;
        char path[80];
        snprintf(path, sizeof path, "wgmma, tile %s, blocks %d (0: default), %d tail tiles", kTileNames[t], blocks,
                 tt);
        memset(o_wg, 0, ob);
        run_path(&p, &wg, o_wg, 1, label, path);
        d = first_diff(o_wg, model, elems);
        ck_assert_msg(d < 0, "%s [%s]: differs from the model at (%" PRId64 ", %" PRId64 "): 0x%04x vs 0x%04x",
                      label, path, d / n, d % n, d < 0 ? 0 : o_wg[d], d < 0 ? 0 : model[d]);
        ck_assert_msg(first_diff(o_wg, o_mma, elems) < 0, "%s [%s]: differs from the mma kernel", label, path);
    }
    free(model);
    free(o_mma);
    free(o_wg);
    qv_problem_destroy(&p);
    return tail;
}

static const int wg_m[] = {1, 16, 17, 33, 64, 65, 128, 129, 300};
#define N_WG_M ((int)(sizeof wg_m / sizeof wg_m[0]))

START_TEST(paths_equal)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    const int64_t ns[4] = {64, 192, 320, 576};
    const int64_t ks_ch[4] = {16, 144, 1040, 128}, ks_g[4] = {128, 384, 1152, 256};
    const qv_probe_kind probes[3] = {QV_PROBE_EXACT, QV_PROBE_ONEHOT, QV_PROBE_RANDOM};
    int cases = 0;
    for (int mi = 0; mi < N_WG_M; mi++)
        for (int pi = 0; pi < 3; pi++) {
            const int64_t m = wg_m[mi];
            if (g_quick && (m != 129 || pi != 2)) continue;
            const int64_t n = ns[(mi + pi) % 4];
            const int64_t k = (v->g > 0 ? ks_g : ks_ch)[(2 * mi + pi) % 4];
            if (qv_variant_check_shape(v, m, n, k) != QV_OK || !ref_probe_applies(v, probes[pi], m, n, k)) continue;
            const qv_regime regime = probes[pi] == QV_PROBE_RANDOM ? (qv_regime)(mi % QV_REGIME_COUNT)
                                                                    : QV_REGIME_LOGUNIFORM;
            one_problem(v, m, n, k, probes[pi], regime, g_seed + (uint64_t)g_rows[_i] * 1000 + (uint64_t)mi * 10 + pi,
                        0);
            cases++;
        }
    printf("%s: %d shapes x %d block tiles, wgmma == mma kernel == model, bit for bit\n", v->name, cases,
           g_quick ? 2 : N_TILES);
    ck_assert_msg(cases >= (g_quick ? 1 : 2 * N_WG_M), "%s: only %d legal shapes", v->name, cases);
}
END_TEST

/* Long K on 2 and 7 blocks: in the 128x256 tile, 3 tiles on 2 blocks (one
 * whole round, then the last tile shared) and 4 tiles on 7 blocks (every
 * tile shared), in parts that end and start inside other blocks' ranges. */
START_TEST(stream_k)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    static const int blocks[2] = {2, 7};
    int with_tail = 0;
    for (int bi = 0; bi < 2; bi++) {
        if (g_quick && bi) continue;
        const int64_t m = bi ? 300 : 70, n = bi ? 192 : 320, k = bi ? 2048 : 3072;
        with_tail += one_problem(v, m, n, k, QV_PROBE_RANDOM, (qv_regime)bi, g_seed + 77 + (uint64_t)bi, blocks[bi]) > 0;
    }
    ck_assert_msg(with_tail == (g_quick ? 1 : 2), "%s: only %d of the stream-K cases had a tail", v->name, with_tail);
    printf("%s: stream-K tails on %d block counts, bit for bit\n", v->name, with_tail);
}
END_TEST

/* The direct-store epilogue (C 4 bytes past a 16-byte boundary): M, N and K
 * tails in the 128x256 and 512x16 tiles, and a stream-K tail on 3 blocks. */
START_TEST(direct_store)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    static const struct {
        qv_launch_opts o; /* the wgmma kernel, a tile and (0: default) a block count */
        const char *tile;
        int64_t m, n, k_ch, k_g;
        qv_probe_kind probe;
    } cs[3] = {{{.aq_wg_min_m = 1, .aq_wg_tile = QV_WG_TILE_128X256}, "128x256", 70, 576, 1040, 384, QV_PROBE_EXACT},
               {{.aq_wg_min_m = 1, .aq_wg_tile = QV_WG_TILE_512X16}, "512x16", 5, 192, 144, 1152, QV_PROBE_ONEHOT},
               {{.aq_wg_min_m = 1, .aq_wg_tile = QV_WG_TILE_128X256, .aq_wg_blocks = 3}, "128x256", 257, 256, 3072,
                2048, QV_PROBE_RANDOM}};
    for (int c = 0; c < 3; c++) {
        const int64_t k = v->g > 0 ? cs[c].k_g : cs[c].k_ch;
        qv_problem p;
        char label[192];
        gpu_problem_probe(&p, v, cs[c].m, cs[c].n, k, cs[c].probe, QV_REGIME_LOGUNIFORM,
                          g_seed + 500 + (uint64_t)g_rows[_i] * 10 + (uint64_t)c, label, sizeof label);
        const size_t ob = (size_t)qv_problem_out_bytes(&p);
        uint16_t *model = malloc(ob), *out = malloc(ob);
        ck_assert(model && out);
        ck_assert_msg(ref_model_run(&p, model) == QV_OK, "%s: model: %s", label, qv_errmsg());
        const qv_launch_opts o = gpu_opts(&cs[c].o);
        if (cs[c].o.aq_wg_blocks) ck_assert_int_gt(qv_qqq_wg_tail_tiles((int)cs[c].m, (int)cs[c].n, (int)k, &o), 0);
        char path[80];
        snprintf(path, sizeof path, "wgmma, tile %s, C 4 bytes off", cs[c].tile);
        const long long before = qv_qqq_wg_runs();
        gpu_run_twice_with(&p, gpu_launch_c_off4, &o, out, label, path);
        ck_assert_msg(qv_qqq_wg_runs() - before == 2, "%s [%s]: not on the wgmma path", label, path);
        const int64_t d = first_diff(out, model, cs[c].m * cs[c].n);
        ck_assert_msg(d < 0, "%s [%s]: differs from the model at (%" PRId64 ", %" PRId64 "): 0x%04x vs 0x%04x", label,
                      path, d / cs[c].n, d % cs[c].n, d < 0 ? 0 : out[d], d < 0 ? 0 : model[d]);
        free(model);
        free(out);
        qv_problem_destroy(&p);
    }
    printf("%s: the direct-store epilogue, 3 cases, bit for bit\n", v->name);
}
END_TEST

static const char *const qqq_goldens[] = {"qqq_w4a8_k128_n256_g-1", "qqq_w4a8_k256_n256_g128"};

START_TEST(golden_qqq_wg)
{
    gpu_qqq_golden gq;
    gpu_qqq_golden_open(&gq, qqq_goldens[_i / N_TILES]);
    const char *tile = kTileNames[_i % N_TILES];
    const qv_launch_opts o = {.aq_wg_min_m = 1, .aq_wg_tile = kTiles[_i % N_TILES]};
    for (int mi = 0; mi < gq.n_ms; mi++) {
        const int m = gq.ms[mi];
        gpu_qqq_case c;
        gpu_qqq_case_load(&gq, m, &o, &c);
        uint16_t *out = malloc(sizeof(uint16_t) * (size_t)m * gq.n);
        ck_assert_ptr_nonnull(out);
        const long long before = qv_qqq_wg_runs();
        gpu_qqq_case_launch(&gq, &c, out);
        ck_assert_msg(qv_qqq_wg_runs() == before + 1, "%s m=%d: the launch did not take the wgmma path", gq.name, m);
        gpu_qqq_case_assert(&gq, &c, out, " (wgmma path)");
        printf("golden %s m=%d through the wgmma kernel (tile %s): equal to the real QQQ kernel bit for bit\n",
               gq.name, m, tile);
        free(out);
        gpu_qqq_case_free(&c);
    }
    gpu_qqq_golden_close(&gq);
}
END_TEST

/* ---- no CUDA call ------------------------------------------------------------- */

/* The tail of the schedule, derived by hand from the plan: 132 blocks; the
 * default tile has the tokens that hold M (16, 32, 64, 128, else 256) in its
 * wide form (512x16, 512x32, 512x64, 256x128, 128x256) unless that has fewer
 * than 115.5 tiles and fewer than 38 x 132 = 5016 tile-stages of 128 k, then
 * in its narrow form (128x16, 128x32, 128x64, 128x128); the last round of tiles (all of them when there
 * are fewer than blocks) is shared along K when it would keep fewer than 7/8
 * of the blocks (115.5) busy. */
/* The tail under o (planned for the H200). */
static int tail(int m, int n, int k, qv_launch_opts o) { return qv_qqq_wg_tail_tiles(m, n, k, &o); }

START_TEST(schedule)
{
    const qv_launch_opts dflt = {H200}, t512x64 = {H200, .aq_wg_tile = QV_WG_TILE_512X64},
                         t512x16 = {H200, .aq_wg_tile = QV_WG_TILE_512X16},
                         whole = {H200, .aq_wg_streamk = QV_OPT_OFF};
    /* Llama-3-70B qkv, N = 10240, K = 8192 (64 stages). M = 1024: 4 x 80 =
     * 320 wide tiles = 2 rounds + 56, 56 < 115.5: 56 shared. M = 129: 80 wide
     * tiles x 64 = 5120 >= 5016: wide, all 80 shared. M = 128: 40 wide tiles
     * x 64 = 2560: narrow, 80 tiles, all shared. M = 64: 20 wide tiles:
     * narrow, 80; forced to 512x64, 20. */
    ck_assert_int_eq(tail(1024, 10240, 8192, dflt), 56);
    ck_assert_int_eq(tail(129, 10240, 8192, dflt), 80);
    ck_assert_int_eq(tail(128, 10240, 8192, dflt), 80);
    ck_assert_int_eq(tail(64, 10240, 8192, dflt), 80);
    ck_assert_int_eq(tail(64, 10240, 8192, t512x64), 20);
    /* M = 16 and 32: the 16- and 32-token tiles, 20 wide (512-column) tiles x
     * 64 stages = 1280 < 5016: narrow, 80 tiles of 128 columns, all shared;
     * forced to 512x16, 20. */
    ck_assert_int_eq(tail(16, 10240, 8192, dflt), 80);
    ck_assert_int_eq(tail(32, 10240, 8192, dflt), 80);
    ck_assert_int_eq(tail(16, 10240, 8192, t512x16), 20);
    /* Llama-2-7B gate_up, N = 22016, K = 4096, M = 1024: 4 x 172 = 688 tiles
     * = 5 rounds + 28: 28 shared. M = 512: 2 x 172 = 344 = 2 rounds + 80. */
    ck_assert_int_eq(tail(1024, 22016, 4096, dflt), 28);
    ck_assert_int_eq(tail(512, 22016, 4096, dflt), 80);
    /* Llama-2-7B o, N = K = 4096 (32 stages), M = 256: 32 wide tiles x 32:
     * narrow, 2 x 32 = 64 tiles, all shared. */
    ck_assert_int_eq(tail(256, 4096, 4096, dflt), 64);
    /* 7/8 of the blocks or more stay whole: M = 1024, N = 15872 (124 tile
     * columns): 496 tiles = 3 rounds + 100, shared; N = 16384 (128): 512 =
     * 3 rounds + 116, 116 >= 115.5: whole. */
    ck_assert_int_eq(tail(1024, 15872, 4096, dflt), 100);
    ck_assert_int_eq(tail(1024, 16384, 4096, dflt), 0);
    /* One k128 stage has nothing to share. */
    ck_assert_int_eq(tail(129, 10240, 128, dflt), 0);
    ck_assert_int_eq(tail(1024, 10240, 8192, whole), 0);
    /* Fewer blocks planned: 2 blocks, 320 tiles = 160 whole rounds, no tail;
     * 3 blocks: 106 rounds + 2 tiles, 2 < 2.625: 2 shared. */
    const qv_launch_opts b2 = {H200, .aq_wg_blocks = 2}, b3 = {H200, .aq_wg_blocks = 3};
    ck_assert_int_eq(tail(1024, 10240, 8192, b2), 0);
    ck_assert_int_eq(tail(1024, 10240, 8192, b3), 2);
}
END_TEST

/* The route under o (planned for the H200). */
static int route_of(int group, int m, int n, int k, int g, qv_launch_opts o)
{
    return qv_qqq_wg_route(group, m, n, k, g, &o);
}

/* The route, derived by hand: from M = 17 the wgmma kernel; below, only
 * layers of at least half a wave of the mma kernel's 256-column blocks (132
 * SMs x 3 blocks / 2 = 198 blocks), which that kernel would not split along
 * K. A set aq_wg_min_m is the one threshold. */
START_TEST(route)
{
    const qv_launch_opts dflt = {H200};
    /* Llama-3-70B gate_up, N = 57344: 224 blocks */
    ck_assert_int_eq(route_of(0, 1, 57344, 8192, 0, dflt), 1);
    ck_assert_int_eq(route_of(1, 16, 57344, 8192, 128, dflt), 1);
    /* 198 blocks (N = 50688); 197 (N = 50432) not */
    ck_assert_int_eq(route_of(0, 8, 50688, 4096, 0, dflt), 1);
    ck_assert_int_eq(route_of(0, 8, 50432, 4096, 0, dflt), 0);
    ck_assert_int_eq(route_of(1, 16, 50688, 4096, 128, dflt), 1);
    ck_assert_int_eq(route_of(1, 16, 50432, 4096, 128, dflt), 0);
    /* Llama-2-7B gate_up (86 blocks), Llama-3-70B down (32): the mma kernel */
    ck_assert_int_eq(route_of(0, 16, 22016, 4096, 0, dflt), 0);
    ck_assert_int_eq(route_of(1, 1, 8192, 28672, 128, dflt), 0);
    ck_assert_int_eq(route_of(1, 17, 512, 256, 128, dflt), 1);
    const qv_launch_opts t17 = {H200, .aq_wg_min_m = 17}, off = {H200, .aq_wg_min_m = QV_OPT_OFF},
                         bad = {H200, .aq_wg_min_m = -7};
    ck_assert_int_eq(route_of(0, 16, 57344, 8192, 0, t17), 0);
    ck_assert_int_eq(route_of(0, 17, 57344, 8192, 0, t17), 1);
    ck_assert_int_eq(route_of(0, 1, 57344, 8192, 0, off), 0);
    ck_assert_int_eq(route_of(0, 1024, 57344, 8192, 0, off), 0);
    ck_assert_int_eq(route_of(0, 1, 57344, 8192, 0, bad), -1);
    /* The wide-layer rule counts the blocks per SM of the mma kernel's plan:
     * at 2 per SM half a wave is 132 blocks (N = 33792 has 132). */
    const qv_launch_opts bps2 = {H200, .aq_blocks_per_sm = 2};
    ck_assert_int_eq(route_of(0, 8, 33792, 4096, 0, bps2), 1);
    ck_assert_int_eq(route_of(0, 8, 33536, 4096, 0, bps2), 0);
}
END_TEST

START_TEST(option_refusals)
{
    const qv_variant *ch = qv_variant_find("qqq-w4a8-ch");
    ck_assert_ptr_nonnull(ch);
    qv_gemm_args a = gpu_placeholder_args(256, 128, 256);
    static const struct {
        qv_launch_opts o;
        const char *field;
    } bad[] = {
        {{H200, .aq_wg_min_m = -3}, "aq_wg_min_m"},
        {{H200, .aq_wg_min_m = 1, .aq_wg_tile = QV_WG_TILE_COUNT}, "aq_wg_tile"},
        {{H200, .aq_wg_min_m = 1, .aq_wg_tile = (qv_wg_tile)-1}, "aq_wg_tile"},
        {{H200, .aq_wg_min_m = 1, .aq_wg_blocks = -1}, "aq_wg_blocks"},
        {{H200, .aq_wg_min_m = 1, .aq_wg_blocks = QV_WG_BLOCKS_MAX + 1}, "aq_wg_blocks"},
        {{H200, .aq_wg_min_m = 1, .aq_wg_streamk = 2}, "aq_wg_streamk"},
        {{H200, .aq_wg_min_m = 1, .aq_wg_pdl = 2}, "aq_wg_pdl"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        a.opts = &bad[i].o;
        ck_assert_int_eq(qv_gpu_launch(ch, &a), QV_ERR_USAGE);
        ck_assert_msg(strstr(qv_errmsg(), bad[i].field) != NULL, "%s: message: %s", bad[i].field, qv_errmsg());
        /* ... and the tail query says so. */
        ck_assert_int_eq(qv_qqq_wg_tail_tiles(1024, 4096, 4096, &bad[i].o), -1);
    }
    /* The workspace holds the stream-K slots when the schedule has a tail
     * (M = 129 on N = 4096: 2 x 32 narrow 128x128 tiles, all shared): 2 x 132 tiles of 128 KiB. */
    const qv_launch_opts h200 = {H200};
    ck_assert_uint_ge(qv_gpu_workspace(ch, 129, 4096, 4096, &h200), (size_t)2 * 132 * 128 * 1024);
}
END_TEST

int main(void)
{
    g_quick = gpu_env_flag("QVET_AQ_QUICK");
    const int gpu = gpu_suite_start(&g_seed);
    g_nrows = gpu_registry_rows(is_qqq_row, g_rows, 8);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_aq_wg", gpu, g_seed, g_nrows, &tc);
    if (gpu) {
        tcase_add_loop_test(tc, paths_equal, 0, g_nrows);
        tcase_add_loop_test(tc, stream_k, 0, g_nrows);
        tcase_add_loop_test(tc, direct_store, 0, g_nrows);
        tcase_add_loop_test(tc, golden_qqq_wg, 0, N_TILES * (int)(sizeof qqq_goldens / sizeof qqq_goldens[0]));
    }
    tcase_add_test(tc, schedule);
    tcase_add_test(tc, option_refusals);
    tcase_add_test(tc, route);
    return gpu_suite_run(s);
}
