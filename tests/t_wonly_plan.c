/* t_wonly_plan.c: the plans of the small-M weight-only kernel
 * (kernels/wonly_small.cu, qv_wonly_small_plan_info) and the schedules of the
 * wgmma weight-only kernel (kernels/wonly_wg.cu, qv_wonly_wg_sched_info), on
 * the CPU, under launch options given as data (qv_launch_opts, planning for
 * the H200: 132 SMs, compute capability 9.0, so no CUDA call). Small-M plans:
 * for every marlin row, every M from 1 to 16, each configuration wo_small
 * selects, the layer shapes of
 * docs/design.md §8 and edge shapes, by the cost model and with forced slice
 * counts and cluster caps. The GPU suite t_gpu_wonly runs the kernel on small
 * shapes; the benchmark runs the real layers without checking their outputs,
 * so the plans of the real layers are checked here, against the contract the
 * kernel relies on:
 *  - the K slices (slice y: k16 tiles from (y q + min(y, r)) u, q + 1 units
 *    for the first r slices, q for the rest, the last one ending at K)
 *    cover the K range exactly once, in order, none empty, none longer than
 *    the longest slice the block's shared memory was sized for;
 *  - with group scales, slices of whole groups where the unit is a group, and
 *    no slice touching more group rows than the block stages (a slice that
 *    did would read scales past the rows staged in shared memory);
 *  - grid and clusters: column blocks of 512 x cpw columns covering N, at
 *    most 65535 slices, clusters a power of two up to 16 that divides the
 *    slice count, no larger than the block's 64-column chunks unless it is
 *    the only cluster (one counter per (block, rank) within the reserved
 *    counters area);
 *  - resources: at most 113 KiB of shared memory per block (two blocks per
 *    H200 SM: 228 KiB, 1 KiB reserved per block), a workspace no larger than
 *    the one qv_wonly_small_workspace asks callers for, and none without
 *    split-K.
 * The default's choice between one and two chunks per warp is re-derived
 * from the two plans it chooses between (default_chunks).
 * wgmma schedules, for every marlin row the kernel covers, M from 1 to 4096,
 * the same shapes, every tile (wo_wg_tile), persistent grids of 1 to 264
 * blocks (wo_wg_blocks) and the stream-K tail on and off (wo_wg_streamk):
 * the tiles cover M and N, the whole tiles run in
 * whole rounds of the grid, the tail's units (k64 stages of the last tiles)
 * are split over its blocks in nonempty ranges that cover them exactly once,
 * within the 32-bit range the kernel computes them in, and the workspace holds
 * the tail's partial tiles and act_order's sorted A. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/wonly_plan.h"
#include "qvet/variant.h"
#include "support/gpu.h"
#include "support/suite.h"

/* docs/design.md §8: (N, K) of Llama-2-7B's and Llama-3-70B's four linear layers. */
static const int kLayers[][2] = {{12288, 4096}, {4096, 4096},   {22016, 4096},  {4096, 11008},
                                 {10240, 8192}, {8192, 8192},   {57344, 8192},  {8192, 28672}};
#define N_LAYERS ((int)(sizeof kLayers / sizeof kLayers[0]))

/* Edge shapes: one 64-column chunk, a block and a chunk, a partial second
 * block of two-chunk warps; K from one k16 tile (or one group) to a long
 * odd number of tiles. */
static const int kEdgeN[] = {64, 576, 1088, 4160};
static const int kEdgeK[] = {16, 32, 48, 128, 144, 1040, 4112, 12304};
#define N_EDGE_N ((int)(sizeof kEdgeN / sizeof kEdgeN[0]))
#define N_EDGE_K ((int)(sizeof kEdgeK / sizeof kEdgeK[0]))
#define N_SHAPES (N_LAYERS + N_EDGE_N * N_EDGE_K)

/* Shape i of N_SHAPES for row v: the layers, then each edge N x edge K, K
 * as 1 to 25 whole groups for grouped rows. */
static void shape_at(const qv_variant *v, int i, int *n, int *k)
{
    if (i < N_LAYERS) {
        *n = kLayers[i][0], *k = kLayers[i][1];
        return;
    }
    const int e = i - N_LAYERS;
    *n = kEdgeN[e % N_EDGE_N];
    *k = v->g > 0 ? v->g * (1 + (kEdgeK[e / N_EDGE_N] / 16) % 25) : kEdgeK[e / N_EDGE_N];
}

/* The H200 the defaults were measured on, set so that planning asks no device. */
#define H200 .sms = 132, .arch = 90

/* The marlin rows (registry indices, in registry order). */
static int is_marlin(const qv_variant *v) { return !strcmp(v->family, "marlin"); }
static int g_rows[64], g_nrows;

static int failures;
static int quiet; /* checks_can_fail: the broken plans are expected */

#define PLAN_CHECK(cond, ...)                                                                                      \
    do {                                                                                                           \
        if (!(cond)) {                                                                                             \
            if (!quiet && failures < 20) {                                                                         \
                fprintf(stderr, "%s m=%d n=%d k=%d: ", v->name, m, n, k);                                          \
                fprintf(stderr, __VA_ARGS__);                                                                      \
                fprintf(stderr, "\n");                                                                             \
            }                                                                                                      \
            failures++;                                                                                            \
            return;                                                                                                \
        }                                                                                                          \
    } while (0)

/* Every property above for plan p of one problem; counts a failure and
 * returns at the first broken one. */
static void check_info(const qv_variant *v, int m, int n, int k, const qv_wo_small_plan_info *pp)
{
    const qv_wo_small_plan_info p = *pp;
    const int tiles = k / 16;
    const int bn = 512 * p.cpw;
    PLAN_CHECK(p.swap == 0 || m <= QV_WO_SMALL_SWAP_MAX_M, "swapped orientation at M > 8");
    PLAN_CHECK(p.cpw == 1 || (p.cpw == 2 && p.swap), "two chunks per warp outside the swapped orientation");
    PLAN_CHECK(p.n_blocks == (n + bn - 1) / bn, "%d column blocks of %d for N", p.n_blocks, bn);
    PLAN_CHECK(p.splits >= 1 && p.splits <= 65535 && p.splits <= tiles, "%d slices for %d k16 tiles", p.splits,
               tiles);
    PLAN_CHECK(p.slice_unit >= 1 && p.slice_q >= 1 && p.slice_r >= 0 && p.slice_r < p.splits,
               "slicing unit %d, q %d, r %d", p.slice_unit, p.slice_q, p.slice_r);
    PLAN_CHECK(p.tiles_per_split >= 1 && p.tiles_per_split <= 256, "longest slice %d tiles", p.tiles_per_split);

    /* The slices, as the kernel computes them from (q, r, unit). */
    const int gt = v->scale_layout == QV_SCALE_GROUP ? v->g / 16 : 0;
    int next = 0, longest = 0;
    for (int y = 0; y < p.splits; y++) {
        const int b = (y * p.slice_q + (y < p.slice_r ? y : p.slice_r)) * p.slice_unit;
        int e = b + (p.slice_q + (y < p.slice_r ? 1 : 0)) * p.slice_unit;
        if (e > tiles) e = tiles;
        PLAN_CHECK(b == next, "slice %d starts at tile %d, the previous ended at %d", y, b, next);
        PLAN_CHECK(e > b, "slice %d of %d is empty (%d..%d)", y, p.splits, b, e);
        PLAN_CHECK(e - b <= p.tiles_per_split, "slice %d has %d tiles, the block holds %d", y, e - b,
                   p.tiles_per_split);
        if (e - b > longest) longest = e - b;
        if (gt > 0) {
            const int rows = (e - 1) / gt - b / gt + 1;
            PLAN_CHECK(rows <= p.group_rows, "slice %d (%d..%d) touches %d group rows, %d staged", y, b, e, rows,
                       p.group_rows);
            PLAN_CHECK(p.slice_unit == 1 || p.slice_unit == gt, "unit of %d tiles with groups of %d",
                       p.slice_unit, gt);
            PLAN_CHECK(p.slice_unit == 1 || b % gt == 0, "slice %d starts inside a group (tile %d)", y, b);
        } else {
            PLAN_CHECK(p.group_rows == 0 && p.slice_unit == 1, "group rows %d, unit %d without group scales",
                       p.group_rows, p.slice_unit);
        }
        next = e;
    }
    PLAN_CHECK(next == tiles, "the slices end at tile %d of %d", next, tiles);
    PLAN_CHECK(longest == p.tiles_per_split, "the longest slice has %d tiles, the plan says %d", longest,
               p.tiles_per_split);

    /* Clusters along K. */
    const int c = p.cluster;
    PLAN_CHECK(c == 1 || c == 2 || c == 4 || c == 8 || c == 16, "cluster of %d", c);
    PLAN_CHECK(p.splits % c == 0, "cluster of %d for %d slices", c, p.splits);
    PLAN_CHECK(c <= bn / 64 || p.splits == c, "cluster of %d over %d chunks with %d slices", c, bn / 64,
               p.splits);
    if (p.splits != c)
        PLAN_CHECK((size_t)p.n_blocks * (size_t)c * sizeof(int) <= qv_wonly_counters_bytes(n),
                   "%d counters past the reserved area", p.n_blocks * c);

    /* Resources. */
    PLAN_CHECK(p.smem > 64 * 1024 && p.smem <= 113 * 1024, "%d bytes of shared memory per block", p.smem);
    PLAN_CHECK(p.workspace <= p.asked, "workspace %zu past the %zu asked for", p.workspace, p.asked);
    PLAN_CHECK(p.splits > 1 || p.workspace == 0, "workspace %zu without split-K", p.workspace);
}

/* The plan a launch under o would make, checked. */
static void check_plan(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o)
{
    qv_wo_small_plan_info p;
    memset(&p, 0xFF, sizeof p);
    PLAN_CHECK(qv_wonly_small_plan_info(v, m, n, k, o, &p) == 1, "no plan for M <= 16");
    check_info(v, m, n, k, &p);
}

/* Every row, M and shape the row takes, under o. */
static void sweep(int *plans, const qv_launch_opts *o)
{
    for (int r = 0; r < g_nrows; r++) {
        const qv_variant *v = qv_registry_get(g_rows[r]);
        for (int m = 1; m <= QV_WO_SMALL_MAX_M; m++)
            for (int i = 0; i < N_SHAPES; i++) {
                int n, k;
                shape_at(v, i, &n, &k);
                if (qv_variant_check_shape(v, m, n, k) != QV_OK) continue;
                check_plan(v, m, n, k, o);
                (*plans)++;
            }
    }
}

/* The cost model's plans in each configuration wo_small selects. */
START_TEST(model_plans)
{
    static const qv_wo_small_mode modes[] = {QV_WO_SMALL_DEFAULT, QV_WO_SMALL_M16_8, QV_WO_SMALL_M16_16,
                                             QV_WO_SMALL_SWAP, QV_WO_SMALL_SWAP2};
    int plans = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        const qv_launch_opts o = {H200, .wo_small = modes[i]};
        const int before = failures;
        sweep(&plans, &o);
        if (failures > before) fprintf(stderr, "  (wo_small=%d)\n", (int)modes[i]);
    }
    printf("model_plans: %d plans, %d broken\n", plans, failures);
    ck_assert_int_gt(plans, 10000);
    ck_assert_msg(failures == 0, "%d small-M plans break the kernel's contract (see stderr)", failures);
}
END_TEST

/* The plans keep the kernel's contract on devices with other SM counts (the
 * plans count the device's SMs: 114 and 148 as on other Hopper parts, 16 as
 * on a small one), by the cost model and with a forced slice count; and the
 * wgmma schedules on as many blocks (at most 264, the counters area). */
static void sweep_wg(int blocks, int tail, int *scheds, const qv_launch_opts *o);

START_TEST(other_sm_counts)
{
    static const int sms[] = {16, 114, 148, 300};
    int plans = 0, scheds = 0;
    for (size_t i = 0; i < sizeof sms / sizeof sms[0]; i++) {
        const qv_launch_opts o = {.sms = sms[i], .arch = 90};
        const qv_launch_opts forced = {.sms = sms[i], .arch = 90, .wo_small_splits = 7};
        const int before = failures;
        sweep(&plans, &o);
        sweep(&plans, &forced);
        sweep_wg(sms[i] < 264 ? sms[i] : 264, 1, &scheds, &o);
        if (failures > before) fprintf(stderr, "  (sms=%d)\n", sms[i]);
    }
    printf("other_sm_counts: %d plans, %d schedules, %d broken\n", plans, scheds, failures);
    ck_assert_int_gt(plans, 10000);
    ck_assert_msg(failures == 0, "%d plans break the kernel's contract on other SM counts (see stderr)", failures);
}
END_TEST

/* The default's chunks per warp at M <= 8 (two_chunks_pay,
 * kernels/wonly_small.cu), re-derived from the two plans it chooses between,
 * as "swap" (one chunk) and "swap2" (two) make them: two chunks exactly when
 * the row has no zero points, the two-chunk plan fills at least three
 * quarters of the H200's block slots for its cluster size (264 for clusters
 * up to 2, 248 for 4, 240 for 8), and it needs no more K slices than the
 * one-chunk plan, or the one-chunk plan runs more than one wave and the
 * two-chunk slices are at least 64 k16 tiles, or they are at least 128 tiles
 * and the row is not an 8-bit fp16 row without group scales (e2m1 codes
 * are 4-bit, and grouped); the default's
 * plan is then the chosen configuration's. Above M = 8 one chunk. Both
 * choices occur (Llama-3-70B gate_up at M = 1 takes two chunks for
 * w4a16-ch-f16, its qkv one; zero-point rows never two). */
static int slots_for(int c) { return c <= 2 ? 264 : c == 4 ? 248 : c == 8 ? 240 : 224; }

static int two_expected(const qv_variant *v, const qv_wo_small_plan_info *one, const qv_wo_small_plan_info *two)
{
    const int four = v->layout == QV_LAYOUT_MARLIN_W4 || v->layout == QV_LAYOUT_MARLIN_W4_ZP || v->wfmt == QV_FMT_E2M1;
    const int light = !four && v->afmt != QV_FMT_BF16 && v->scale_layout != QV_SCALE_GROUP;
    if (v->zero_point || 4L * two->n_blocks * two->splits < 3L * slots_for(two->cluster)) return 0;
    const int one_waves = (long)one->n_blocks * one->splits > slots_for(one->cluster);
    return two->splits <= one->splits || (one_waves && two->tiles_per_split >= 64) ||
           (!light && two->tiles_per_split >= 128);
}

static void plan_in(qv_wo_small_mode mode, const qv_variant *v, int m, int n, int k, qv_wo_small_plan_info *p)
{
    const qv_launch_opts o = {H200, .wo_small = mode};
    memset(p, 0xFF, sizeof *p);
    ck_assert_int_eq(qv_wonly_small_plan_info(v, m, n, k, &o, p), 1);
}

/* One problem's default plan against the rule; PLAN_CHECK counts a failure
 * and returns. */
static void check_default(const qv_variant *v, int m, int n, int k, int *checked, int *twos)
{
    qv_wo_small_plan_info one, two, def;
    plan_in(QV_WO_SMALL_DEFAULT, v, m, n, k, &def);
    if (m > QV_WO_SMALL_SWAP_MAX_M) {
        PLAN_CHECK(def.cpw == 1 && !def.swap, "default above M = 8: cpw %d swap %d", def.cpw, def.swap);
        return;
    }
    plan_in(QV_WO_SMALL_SWAP, v, m, n, k, &one);
    plan_in(QV_WO_SMALL_SWAP2, v, m, n, k, &two);
    const int want = two_expected(v, &one, &two);
    const qv_wo_small_plan_info *w = want ? &two : &one;
    (*checked)++;
    *twos += want;
    PLAN_CHECK(def.swap && def.cpw == (want ? 2 : 1), "default cpw %d, the rule says %d", def.cpw, want ? 2 : 1);
    PLAN_CHECK(def.n_blocks == w->n_blocks && def.splits == w->splits && def.cluster == w->cluster &&
                   def.tiles_per_split == w->tiles_per_split,
               "default plan %dx%d (cluster %d) is not the chosen configuration's %dx%d (cluster %d)", def.n_blocks,
               def.splits, def.cluster, w->n_blocks, w->splits, w->cluster);
}

START_TEST(default_chunks)
{
    failures = 0;
    int checked = 0, twos = 0;
    for (int r = 0; r < g_nrows; r++) {
        const qv_variant *v = qv_registry_get(g_rows[r]);
        for (int m = 1; m <= QV_WO_SMALL_MAX_M; m++)
            for (int i = 0; i < N_SHAPES; i++) {
                int n, k;
                shape_at(v, i, &n, &k);
                if (qv_variant_check_shape(v, m, n, k) != QV_OK) continue;
                check_default(v, m, n, k, &checked, &twos);
            }
    }
    const qv_launch_opts h200 = {H200};
    qv_wo_small_plan_info p;
    const qv_variant *ch = qv_variant_find("marlin-w4a16-ch-f16"), *zp = qv_variant_find("marlin-w4a16-g128-zp-f16");
    ck_assert_ptr_nonnull(ch);
    ck_assert_ptr_nonnull(zp);
    ck_assert_int_eq(qv_wonly_small_plan_info(ch, 1, 57344, 8192, &h200, &p), 1);
    ck_assert_int_eq(p.cpw, 2);
    ck_assert_int_eq(qv_wonly_small_plan_info(ch, 1, 10240, 8192, &h200, &p), 1);
    ck_assert_int_eq(p.cpw, 1);
    ck_assert_int_eq(qv_wonly_small_plan_info(zp, 1, 57344, 8192, &h200, &p), 1);
    ck_assert_int_eq(p.cpw, 1);
    printf("default_chunks: %d swapped plans, %d with two chunks, %d broken\n", checked, twos, failures);
    ck_assert_int_gt(twos, 0);
    ck_assert_int_lt(twos, checked);
    ck_assert_msg(failures == 0, "%d default small-M plans disagree with the two-chunk rule (see stderr)", failures);
}
END_TEST

/* Forced slice counts and cluster caps, as the tests and measurements set them
 * (wo_small_splits rounds to whole groups and to a slice that fits). */
START_TEST(forced_plans)
{
    static const int splits[] = {1, 2, 3, 5, 7, 16, 24, 33, 64, 1000, 70000};
    static const int caps[] = {0, 1, 2, 16};
    int plans = 0;
    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++)
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
            const qv_launch_opts o = {H200, .wo_small_splits = splits[s], .wo_small_cluster = caps[c]};
            const int before = failures;
            sweep(&plans, &o);
            if (failures > before)
                fprintf(stderr, "  (wo_small_splits=%d wo_small_cluster=%d)\n", splits[s], caps[c]);
        }
    printf("forced_plans: %d plans, %d broken\n", plans, failures);
    ck_assert_int_gt(plans, 100000);
    ck_assert_msg(failures == 0, "%d forced small-M plans break the kernel's contract (see stderr)", failures);
}
END_TEST

/* The checks can fail: plans broken by hand (one slice fewer, a group row
 * fewer staged, a cluster that does not divide, too much shared memory, a
 * longest slice understated) are each caught; M outside 1..16 has no plan. */
START_TEST(checks_can_fail)
{
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-f16");
    ck_assert_ptr_nonnull(v);
    const qv_launch_opts h200 = {H200};
    qv_wo_small_plan_info p, bad;
    quiet = 1;
    ck_assert_int_eq(qv_wonly_small_plan_info(v, 17, 8192, 28672, &h200, &p), 0);
    ck_assert_int_eq(qv_wonly_small_plan_info(v, 0, 8192, 28672, &h200, &p), 0);
    const int m = 4, n = 8192, k = 28672;
    ck_assert_int_eq(qv_wonly_small_plan_info(v, m, n, k, &h200, &p), 1);
    ck_assert_int_gt(p.splits, 2);
    int before = failures;
    check_info(v, m, n, k, &p);
    ck_assert_int_eq(failures, before);

    bad = p, bad.splits--; /* the last slice's tiles uncovered */
    check_info(v, m, n, k, &bad);
    ck_assert_int_eq(failures, ++before);
    bad = p, bad.group_rows--; /* a slice reads a scale row not staged */
    check_info(v, m, n, k, &bad);
    ck_assert_int_eq(failures, ++before);
    bad = p, bad.cluster = 3;
    check_info(v, m, n, k, &bad);
    ck_assert_int_eq(failures, ++before);
    bad = p, bad.smem = 114 * 1024;
    check_info(v, m, n, k, &bad);
    ck_assert_int_eq(failures, ++before);
    bad = p, bad.tiles_per_split--; /* a slice longer than the block holds */
    check_info(v, m, n, k, &bad);
    ck_assert_int_eq(failures, ++before);
    bad = p, bad.slice_r = bad.splits; /* r must stay below the slice count */
    check_info(v, m, n, k, &bad);
    ck_assert_int_eq(failures, ++before);
    failures = 0;
}
END_TEST

/* ---- the wgmma kernel's schedules ---------------------------------------- */

/* Every property of schedule p of one problem on `blocks` planned blocks,
 * the tail allowed or not; counts a failure and returns at the first broken
 * one. */
static void check_sched(const qv_variant *v, int m, int n, int k, int blocks, int tail,
                        const qv_wo_wg_sched_info *pp)
{
    const qv_wo_wg_sched_info p = *pp;
    PLAN_CHECK(p.tile_cols % 128 == 0 && p.tile_cols <= 512 && p.tile_tokens >= 16 && p.tile_tokens <= 256,
               "tile %dx%d", p.tile_cols, p.tile_tokens);
    PLAN_CHECK(p.tiles_m == (m + p.tile_tokens - 1) / p.tile_tokens, "%d token tiles for M", p.tiles_m);
    const int col_tiles = (n / 64 + p.tile_cols / 64 - 1) / (p.tile_cols / 64);
    PLAN_CHECK(p.tiles == p.tiles_m * col_tiles, "%d tiles, %d x %d expected", p.tiles, p.tiles_m, col_tiles);
    PLAN_CHECK(p.n_steps == (k / 16 + 3) / 4, "%d k64 stages for K", p.n_steps);
    PLAN_CHECK(p.grid >= 1 && p.grid <= blocks, "grid of %d on %d blocks", p.grid, blocks);
    PLAN_CHECK(p.dp_tiles >= 0 && p.sk_tiles >= 0 && p.dp_tiles + p.sk_tiles == p.tiles,
               "%d whole and %d tail tiles of %d", p.dp_tiles, p.sk_tiles, p.tiles);
    if (p.sk_tiles == 0) {
        PLAN_CHECK(p.grid == (p.tiles < blocks ? p.tiles : blocks), "grid %d for %d whole tiles", p.grid, p.tiles);
        return;
    }
    PLAN_CHECK(tail, "a tail with wo_wg_streamk off");
    PLAN_CHECK(p.n_steps >= 2, "a tail over one stage");
    PLAN_CHECK(p.dp_tiles % p.grid == 0, "%d whole tiles are not whole rounds of %d blocks", p.dp_tiles, p.grid);
    PLAN_CHECK(p.dp_tiles > 0 || p.grid == blocks, "all tiles in the tail on %d of %d blocks", p.grid, blocks);
    const long long units = (long long)p.sk_tiles * p.n_steps;
    PLAN_CHECK((long long)p.grid * units < (1LL << 31), "grid x units %lld past 32 bits", (long long)p.grid * units);
    PLAN_CHECK(p.sk_grid >= 1 && p.sk_grid <= p.grid && p.sk_grid <= units, "%d tail blocks for %lld units",
               p.sk_grid, units);
    /* Block b's units, as the kernel computes them (32-bit products). */
    int prev = 0;
    for (int b = 0; b < p.sk_grid; b++) {
        const int u = (int)units;
        const int start = b * u / p.sk_grid, end = (b + 1) * u / p.sk_grid;
        PLAN_CHECK(start == prev && end > start, "tail block %d: units %d..%d after %d", b, start, end, prev);
        prev = end;
    }
    PLAN_CHECK(prev == units, "the tail's ranges end at %d of %lld units", prev, units);
    size_t need = qv_wonly_counters_bytes(n) + (size_t)2 * (size_t)p.grid * 128 * 1024;
    if (v->act_order) need += (size_t)m * (size_t)k * 2;
    PLAN_CHECK(p.workspace >= need, "workspace %zu, the tail and sorted A need %zu", p.workspace, need);
}

static const int kWgM[] = {1, 8, 9, 16, 17, 31, 32, 33, 64, 65, 128, 129, 256, 257, 512, 1024, 4096};

/* Every covered row, M and shape under o. */
static void sweep_wg(int blocks, int tail, int *scheds, const qv_launch_opts *o)
{
    for (int r = 0; r < g_nrows; r++) {
        const qv_variant *v = qv_registry_get(g_rows[r]);
        for (size_t mi = 0; mi < sizeof kWgM / sizeof kWgM[0]; mi++) {
            const int m = kWgM[mi];
            for (int i = 0; i < N_SHAPES; i++) {
                int n, k;
                shape_at(v, i, &n, &k);
                if (qv_variant_check_shape(v, m, n, k) != QV_OK) continue;
                qv_wo_wg_sched_info p;
                if (!qv_wonly_wg_sched_info(v, m, n, k, o, &p)) continue; /* not covered */
                check_sched(v, m, n, k, blocks, tail, &p);
                (*scheds)++;
            }
        }
    }
}

START_TEST(wg_schedules)
{
    static const int blocks[] = {0, 1, 7, 131, 264};
    int scheds = 0;
    for (int t = QV_WG_TILE_DEFAULT; t < QV_WG_TILE_COUNT; t++)
        for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
            for (int tail = 0; tail < 2; tail++) {
                const qv_launch_opts o = {H200, .wo_wg_tile = (qv_wg_tile)t, .wo_wg_blocks = blocks[b],
                                          .wo_wg_streamk = tail ? 0 : QV_OPT_OFF};
                const int before = failures;
                /* unset: one block per SM, the H200's 132 */
                sweep_wg(blocks[b] ? blocks[b] : 132, tail, &scheds, &o);
                if (failures > before)
                    fprintf(stderr, "  (wo_wg_tile=%d wo_wg_blocks=%d wo_wg_streamk=%s)\n", t, blocks[b],
                            tail ? "(unset)" : "off");
            }
    printf("wg_schedules: %d schedules, %d broken\n", scheds, failures);
    ck_assert_int_gt(scheds, 100000);
    ck_assert_msg(failures == 0, "%d wgmma schedules break the kernel's contract (see stderr)", failures);
}
END_TEST

/* Schedules broken by hand are caught: a tail range left out, a round of
 * whole tiles cut short, a grid past the blocks, a tail with no room. */
START_TEST(wg_checks_can_fail)
{
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-f16");
    ck_assert_ptr_nonnull(v);
    quiet = 1;
    const qv_launch_opts h200 = {H200};
    qv_wo_wg_sched_info p, bad;
    /* Llama-3-70B qkv at M = 1024: whole rounds and a tail. */
    ck_assert_int_eq(qv_wonly_wg_sched_info(v, 1024, 10240, 8192, &h200, &p), 1);
    ck_assert_int_gt(p.sk_tiles, 0);
    ck_assert_int_gt(p.dp_tiles, 0);
    int before = failures;
    check_sched(v, 1024, 10240, 8192, 132, 1, &p);
    ck_assert_int_eq(failures, before);
    bad = p, bad.sk_grid = p.grid + 1;
    check_sched(v, 1024, 10240, 8192, 132, 1, &bad);
    ck_assert_int_eq(failures, ++before);
    bad = p, bad.dp_tiles--, bad.sk_tiles++;
    check_sched(v, 1024, 10240, 8192, 132, 1, &bad);
    ck_assert_int_eq(failures, ++before);
    bad = p, bad.grid = 133;
    check_sched(v, 1024, 10240, 8192, 132, 1, &bad);
    ck_assert_int_eq(failures, ++before);
    bad = p, bad.workspace = 0;
    check_sched(v, 1024, 10240, 8192, 132, 1, &bad);
    ck_assert_int_eq(failures, ++before);
    check_sched(v, 1024, 10240, 8192, 132, 0, &p); /* a tail that was turned off */
    ck_assert_int_eq(failures, ++before);
    ck_assert_int_eq(qv_wonly_wg_sched_info(v, 0, 10240, 8192, &h200, &p), 0);
    failures = 0;
}
END_TEST

int main(void)
{
    g_nrows = gpu_registry_rows(is_marlin, g_rows, 64);
    if (g_nrows < 22) {
        fprintf(stderr, "t_wonly_plan: %d marlin rows in the registry, 22 expected\n", g_nrows);
        return EXIT_FAILURE;
    }
    TCase *tc;
    Suite *s = suite_single("wonly_plan", "plan", 300, &tc);
    tcase_add_test(tc, model_plans);
    tcase_add_test(tc, forced_plans);
    tcase_add_test(tc, default_chunks);
    tcase_add_test(tc, checks_can_fail);
    tcase_add_test(tc, wg_schedules);
    tcase_add_test(tc, wg_checks_can_fail);
    tcase_add_test(tc, other_sm_counts);
    return suite_run(s);
}
