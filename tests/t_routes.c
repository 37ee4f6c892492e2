/* t_routes.c: the route tables (src/internal/route.h) against an independent
 * statement of the path rules, on the CPU (planning for the H200: the
 * options set sms and arch, so no CUDA call). The statement below is
 * written from docs/kernel-paths.md and docs/launch-options.md, with the
 * sm_90 numbers they give, as a table of paths per family in the order a
 * launch asks them; nothing in it calls the tables. For every registry row
 * with a kernel x the layers of the benchmark (Llama-2-7B, Llama-3-70B) and
 * tile-edge shapes x M from 1 to 4096 (every M to 300, then each power of
 * two and its neighbours) x option settings, the dispatcher must pick the
 * first path the statement allows, and the workspace query must return the
 * largest of the allowed paths' own workspaces. Every row of every table
 * must be picked somewhere on the grid. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "internal/route.h"
#include "qvet/gemm.h"
#include "qvet/variant.h"
#include "support/gpu.h"
#include "support/suite.h"

#define H200 .sms = 132, .arch = 90

/* ---- the statement of the rules ----------------------------------------- */

/* An M threshold as the docs state it: QV_OPT_OFF never, set the value,
 * unset the default. */
static int reaches(int m, int set, int dflt)
{
    if (set == QV_OPT_OFF) return 0;
    return m >= (set ? set : dflt);
}

static int is_group(const qv_variant *v)
{
    return v->scale_layout == QV_SCALE_GROUP || v->scale_layout == QV_SCALE_GROUP_CHANNEL;
}

/* The FP4 rows (e2m1 weights): MXFP4 has g = 32, NVFP4 g = 16. */
static int is_fp4(const qv_variant *v) { return v->wfmt == QV_FMT_E2M1; }

/* Weight-only wgmma: wo_wg_min_m; unset, 17, and 9 on layers of at least
 * 2^27 weights. Every Marlin row but 16-bit group scales of g = 16 (g >= 32
 * or one group; NVFP4's g = 16 byte scales included), N on 64 columns, K on
 * 16. */
static int want_wo_wg(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o)
{
    const int dflt = (int64_t)n * k >= ((int64_t)1 << 27) ? 9 : 17;
    if (!reaches(m, o->wo_wg_min_m, dflt)) return 0;
    if (n % 64 || k % 16 || (is_group(v) && v->g < 32 && v->g != k && !is_fp4(v))) return 0;
    return 1;
}

/* Small-M: wo_small unset or _M16_16 M <= 16; _M16_8, _SWAP, _SWAP2 M <= 8;
 * _NEVER never; every Marlin row, FP4 included. */
static int want_wo_small(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o)
{
    (void)v, (void)n, (void)k;
    switch (o->wo_small) {
    case QV_WO_SMALL_NEVER: return 0;
    case QV_WO_SMALL_DEFAULT:
    case QV_WO_SMALL_M16_16: return m <= 16;
    default: return m <= 8;
    }
}

/* Dequantize + cuBLAS: wo_dq_min_m; unset, 64. */
static int want_wo_dq(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o)
{
    (void)v, (void)n, (void)k;
    return reaches(m, o->wo_dq_min_m, 64);
}

static int want_always(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o)
{
    (void)v, (void)m, (void)n, (void)k, (void)o;
    return 1;
}

/* QQQ wgmma: aq_wg_min_m; unset, 17, and every M <= 16 on layers of at least
 * half a wave of the mma kernel's 256-column blocks: the wave is the SMs x
 * 3 blocks of its 16-row tile (aq_blocks_per_sm when set). Group rows need g
 * a multiple of 128 dividing K. */
static int want_aq_wg(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o)
{
    if (v->layout != QV_LAYOUT_QQQ_W4_CHANNEL && v->layout != QV_LAYOUT_QQQ_W4_GROUP) return 0;
    if (n % 64 || k % 16 || (is_group(v) && (v->g % 128 || k % v->g))) return 0;
    if (o->aq_wg_min_m) return reaches(m, o->aq_wg_min_m, 0);
    const int64_t wave = (int64_t)o->sms * (o->aq_blocks_per_sm ? o->aq_blocks_per_sm : 3);
    const int wide = m <= 16 && 2 * (((int64_t)n + 255) / 256) >= wave;
    return m >= 17 || wide;
}

/* cuBLASLt int8: the QQQ rows and the W8A8 int8 rows, aq_lt_min_m; unset, 128. */
static int want_aq_lt_i8(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o)
{
    (void)n, (void)k;
    if (v->afmt != QV_FMT_I8) return 0;
    return reaches(m, o->aq_lt_min_m, 128);
}

/* cuBLASLt fp8: the W8A8 e4m3 rows per tensor, per token x channel, and
 * 128x128 blocks at K % 128 == 0; aq_lt_fp8_min_m; unset, 1, 1 and 4. */
static int want_aq_lt_fp8(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o)
{
    (void)n;
    if (v->wfmt != QV_FMT_E4M3 || v->afmt != QV_FMT_E4M3) return 0;
    if (v->scale_layout == QV_SCALE_BLOCK && k % 128) return 0;
    return reaches(m, o->aq_lt_fp8_min_m, v->scale_layout == QV_SCALE_BLOCK ? 4 : 1);
}

typedef int (*want_fn)(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o);

/* The paths of each family in the order a launch asks them. */
static const struct want_path {
    const char *family; /* qv_variant.family */
    const char *table;  /* the route table that must hold the path */
    const char *path;   /* its row's name */
    want_fn allowed;
} kWant[] = {
    {"marlin", "marlin", "wgmma", want_wo_wg},
    {"marlin", "marlin", "small-m", want_wo_small},
    {"marlin", "marlin", "dq-cublas", want_wo_dq},
    {"marlin", "marlin", "mma", want_always},
    {"qqq", "aq", "wgmma", want_aq_wg},
    {"qqq", "aq", "cublaslt-i8", want_aq_lt_i8},
    {"qqq", "aq", "mma", want_always},
    {"w8a8", "aq", "cublaslt-i8", want_aq_lt_i8},
    {"w8a8", "aq", "cublaslt-fp8", want_aq_lt_fp8},
    {"w8a8", "aq", "mma", want_always},
    {"cublas", "cublas", "cublas", want_always},
};
#define N_WANT ((int)(sizeof kWant / sizeof kWant[0]))

/* ---- the grid ------------------------------------------------------------ */

/* (n, k): Llama-2-7B's qkv, o, gate_up, down; Llama-3-70B's; then shapes on
 * tile edges (one 64-column chunk, K below and off 128). */
static const int kShapes[][2] = {
    {12288, 4096}, {4096, 4096}, {22016, 4096}, {4096, 11008}, {10240, 8192}, {8192, 8192}, {57344, 8192},
    {8192, 28672}, {64, 128}, {192, 384}, {256, 256}, {128, 4096}, {64, 16}, {320, 208},
};
#define N_SHAPES ((int)(sizeof kShapes / sizeof kShapes[0]))

static const qv_launch_opts kOpts[] = {
    {H200},
    {H200, .wo_wg_min_m = 1},
    {H200, .wo_wg_min_m = 9},
    {H200, .wo_wg_min_m = 17},
    {H200, .wo_wg_min_m = 300},
    {H200, .wo_wg_min_m = QV_OPT_OFF},
    {H200, .wo_small = QV_WO_SMALL_NEVER},
    {H200, .wo_small = QV_WO_SMALL_M16_8},
    {H200, .wo_small = QV_WO_SMALL_M16_16},
    {H200, .wo_small = QV_WO_SMALL_SWAP},
    {H200, .wo_small = QV_WO_SMALL_SWAP2},
    {H200, .wo_dq_min_m = 1},
    {H200, .wo_dq_min_m = QV_OPT_OFF},
    {H200, .wo_wg_min_m = QV_OPT_OFF, .wo_dq_min_m = 32},
    {H200, .wo_wg_min_m = QV_OPT_OFF, .wo_small = QV_WO_SMALL_NEVER, .wo_dq_min_m = QV_OPT_OFF},
    {H200, .wo_wg_min_m = 4, .wo_small = QV_WO_SMALL_SWAP, .wo_dq_min_m = 2},
    {H200, .aq_wg_min_m = 1},
    {H200, .aq_wg_min_m = 64},
    {H200, .aq_wg_min_m = QV_OPT_OFF},
    {H200, .aq_wg_min_m = QV_OPT_OFF, .aq_lt_min_m = 1},
    {H200, .aq_lt_min_m = QV_OPT_OFF},
    {H200, .aq_lt_min_m = 300},
    {H200, .aq_lt_fp8_min_m = QV_OPT_OFF},
    {H200, .aq_lt_fp8_min_m = 64},
    {H200, .aq_lt_fp8_outer_min_m = QV_OPT_OFF, .aq_lt_fp8_blk_min_m = 1},
    {H200, .aq_blocks_per_sm = 1},
    {H200, .aq_blocks_per_sm = 2},
    {.sms = 66, .arch = 90},
    {.sms = 264, .arch = 90},
    {.sms = 132, .arch = 100},
};
#define N_OPTS ((int)(sizeof kOpts / sizeof kOpts[0]))

static int grid_m(int *ms)
{
    int n = 0;
    for (int m = 1; m <= 300; m++) ms[n++] = m;
    for (int p = 512; p <= 4096; p *= 2) ms[n++] = p - 1, ms[n++] = p, ms[n++] = p + 1;
    return n;
}

static const qv_route_row *row_named(const qv_route_table *t, const char *name)
{
    for (int i = 0; i < t->n_rows; i++)
        if (!strcmp(t->rows[i].name, name)) return &t->rows[i];
    return NULL;
}

/* How often each row of each table was picked on the grid. */
static long g_picked[8][16];

/* One registry row over the whole grid. */
START_TEST(dispatcher_matches_the_rules)
{
    const qv_variant *v = qv_registry_get(_i);
    const qv_route_table *t = qv_route_table_of(v);
    if (!v->gpu_kernel) {
        ck_assert_ptr_null(t);
        return;
    }
    ck_assert_msg(t != NULL, "%s: no route table", v->name);
    int ms[400];
    const int n_m = grid_m(ms);
    long checked = 0;
    for (int s = 0; s < N_SHAPES; s++) {
        const int n = kShapes[s][0], k = kShapes[s][1];
        if (qv_variant_check_shape(v, 1, n, k) != QV_OK) continue;
        for (int oi = 0; oi < N_OPTS; oi++) {
            const qv_launch_opts *o = &kOpts[oi];
            qv_launch_ctx c;
            ck_assert_int_eq(qv_launch_ctx_get(o, &c), QV_OK);
            for (int mi = 0; mi < n_m; mi++) {
                const int m = ms[mi];
                const char *first = NULL;
                size_t ws = 0;
                const qv_route_problem p = {v, m, n, k, v->g};
                for (int w = 0; w < N_WANT; w++) {
                    if (strcmp(kWant[w].family, v->family) || !kWant[w].allowed(v, m, n, k, o)) continue;
                    ck_assert_str_eq(t->name, kWant[w].table);
                    const qv_route_row *r = row_named(t, kWant[w].path);
                    ck_assert_msg(r != NULL, "table %s has no row %s", t->name, kWant[w].path);
                    if (!first) first = kWant[w].path;
                    const size_t rw = qv_route_path_workspace(r, &c, &p);
                    if (rw > ws) ws = rw;
                }
                ck_assert_msg(first != NULL, "%s: the rules leave m=%d n=%d k=%d without a path", v->name, m, n, k);
                const qv_route_row *got = NULL;
                ck_assert_msg(qv_route_query(v, m, n, k, o, &got) == QV_OK, "%s m=%d: %s", v->name, m, qv_errmsg());
                ck_assert_msg(!strcmp(got->name, first), "%s m=%d n=%d k=%d options #%d: %s, the rules say %s",
                              v->name, m, n, k, oi, got->name, first);
                const size_t got_ws = qv_gpu_workspace(v, m, n, k, o);
                ck_assert_msg(got_ws == ws, "%s m=%d n=%d k=%d options #%d: workspace %zu, the allowed paths' "
                              "largest %zu", v->name, m, n, k, oi, got_ws, ws);
                int nt = 0;
                const qv_route_table *all = qv_route_tables(&nt);
                g_picked[t - all][got - t->rows]++;
                checked++;
            }
        }
    }
    ck_assert_msg(checked > 0, "%s: no shape of the grid is legal for the row", v->name);
}
END_TEST

/* Run after the loop in the same process (main runs the suite unforked):
 * every row of every table was picked. */
START_TEST(every_row_is_reached)
{
    int nt = 0;
    const qv_route_table *all = qv_route_tables(&nt);
    for (int ti = 0; ti < nt; ti++)
        for (int i = 0; i < all[ti].n_rows; i++)
            ck_assert_msg(g_picked[ti][i] > 0, "route table %s, row %s: no problem of the grid takes it", all[ti].name,
                          all[ti].rows[i].name);
}
END_TEST

/* The tables' own promises: every row names its kernel and target, a row
 * that may decline is never the last of its table, and the last row of each
 * takes every M. */
START_TEST(tables_are_well_formed)
{
    int nt = 0;
    const qv_route_table *all = qv_route_tables(&nt);
    ck_assert_int_eq(nt, 3);
    for (int ti = 0; ti < nt; ti++) {
        const qv_route_table *t = &all[ti];
        ck_assert_int_ge(t->n_rows, 1);
        for (int i = 0; i < t->n_rows; i++) {
            const qv_route_row *r = &t->rows[i];
            ck_assert_ptr_nonnull(r->name);
            ck_assert_ptr_nonnull(r->kernel);
            ck_assert_msg(!strcmp(r->isa, "sm_90") || !strcmp(r->isa, "sm_90a"), "%s: isa %s", r->name, r->isa);
            ck_assert_ptr_nonnull(r->m_doc);
            ck_assert_ptr_nonnull(r->opts_doc);
            ck_assert_msg(!r->rule == !r->rule_doc, "%s: a rule and its words go together", r->name);
            if (i == t->n_rows - 1) {
                ck_assert_msg(!r->may_decline && !r->m_from && !r->m_to && !r->rule,
                              "table %s: its last row %s must take every problem", t->name, r->name);
            }
            for (int j = 0; j < i; j++) ck_assert_str_ne(t->rows[j].name, r->name);
        }
    }
}
END_TEST

/* Refused options reach the query as QV_ERR_USAGE naming the field; a row
 * without a kernel has no table. */
START_TEST(query_refusals)
{
    const qv_route_row *r = NULL;
    const qv_launch_opts bad = {H200, .aq_lt_min_m = -7};
    ck_assert_int_eq(qv_route_query(qv_variant_find("w8a8-i8-tensor"), 128, 4096, 4096, &bad, &r), QV_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "aq_lt_min_m"));
    const qv_launch_opts ok = {H200};
    qv_variant no_kernel = *qv_variant_find("marlin-w4a16-g128-f16");
    no_kernel.gpu_kernel = 0;
    ck_assert_int_eq(qv_route_query(&no_kernel, 1, 4096, 4096, &ok, &r), QV_ERR_UNSUPPORTED);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = suite_single("routes", "routes", 300, &tc);
    tcase_add_test(tc, tables_are_well_formed);
    tcase_add_test(tc, query_refusals);
    tcase_add_loop_test(tc, dispatcher_matches_the_rules, 0, qv_registry_count());
    tcase_add_test(tc, every_row_is_reached);
    /* every_row_is_reached reads what the loop counted: one process, as the
     * GPU suites run (no CUDA call is made here). */
    return gpu_suite_run(s);
}
