/* gpu_routes.c: the route table of each GPU family (route.h), rows as
 * designated initializers in the order a launch asks them, and the M bounds
 * they name. A threshold reads the launch options first (QV_OPT_OFF: the
 * path is off; a set value: the one threshold) and else the tuning table's
 * row (tuning.h); docs/kernel-paths.md gives the measurements behind each
 * default. Host C; no CUDA call. */
#include <stdint.h>
#include <string.h>

#include "internal/aq.h"
#include "internal/route.h"
#include "internal/wonly_plan.h"

_Static_assert(QV_ROUTE_WO_WG == (int)QV_WO_PATH_WG && QV_ROUTE_WO_SMALL == (int)QV_WO_PATH_SMALL &&
                   QV_ROUTE_WO_DQ == (int)QV_WO_PATH_DQ && QV_ROUTE_WO_MMA == (int)QV_WO_PATH_MMA,
               "qv_wonly_route answers with the weight-only table's path numbers");

/* An M threshold: QV_OPT_OFF off, set the one value, unset `dflt`. */
static int threshold(int set, int dflt) { return set == QV_OPT_OFF ? QV_ROUTE_OFF : set ? set : dflt; }

/* ---- weight-only Marlin rows (family "marlin", kernels/wonly.cu) ---------- */

/* The wgmma kernel from wo_wg_min_m, the one threshold for every layer;
 * unset, the tuning row's, measured on the H200 against the mma kernel (much
 * slower at M = 32 and 64) and dequantize + cuBLAS (slower at M = 512 and
 * 1024): at M <= 16 the small-M and mma kernels are faster, except on layers
 * of at least wo_wg_large_weights weights (n x k) from wo_wg_large_min_m:
 * with its 16-token tiles the kernel beats the mma kernel at M = 16 on each
 * of them (Llama-3-70B gate_up and down) and loses on most smaller ones.
 * It is asked before the small-M kernel, so that the large layers' lower
 * default (and a set value at or below 16) takes those M from it. */
static int wo_wg_from(const qv_launch_ctx *c, const qv_route_problem *p)
{
    const int dflt = (int64_t)p->n * p->k >= c->t->wo_wg_large_weights ? c->t->wo_wg_large_min_m : c->t->wo_wg_min_m;
    return threshold(c->o->wo_wg_min_m, dflt);
}

/* Its grid: N / 256 column blocks within CUDA's grid, and the schedule's
 * tiles ((M / 16) x (N / 128 + 1) at most) within an int; group scales of g
 * = 16 only as NVFP4's block scales (its 16-bit ones stage a row per two k16
 * tiles at most; g_min lets g = 16 through to this rule). */
static int wo_wg_grid(const qv_launch_ctx *c, const qv_route_problem *p)
{
    (void)c;
    if (p->v->scale_layout == QV_SCALE_GROUP && p->g < 32 && p->g != p->k &&
        p->v->layout != QV_LAYOUT_MARLIN_FP4_NV)
        return 0;
    return (p->n + 255) / 256 <= 65535 && ((int64_t)p->m + 15) / 16 * (p->n / 128 + 1) < ((int64_t)1 << 31);
}

static int wo_small_from(const qv_launch_ctx *c, const qv_route_problem *p)
{
    (void)p;
    return c->o->wo_small == QV_WO_SMALL_NEVER ? QV_ROUTE_OFF : 1;
}

/* M <= 16 by default and in the m16 form asked for M <= 16; the other forms
 * (m16 to 8, swapped) M <= 8. */
static int wo_small_to(const qv_launch_ctx *c, const qv_route_problem *p)
{
    (void)p;
    const qv_wo_small_mode mode = c->o->wo_small;
    return mode == QV_WO_SMALL_DEFAULT || mode == QV_WO_SMALL_M16_16 ? QV_WO_SMALL_MAX_M : QV_WO_SMALL_SWAP_MAX_M;
}

/* Dequantize + cuBLAS from wo_dq_min_m; unset, the tuning row's, measured on
 * the H200 with one chunk: at M = 32 the mma kernel is still faster on the
 * Llama-3-70B block (not on Llama-2-7B), at M = 128 this path is faster on
 * both. */
static int wo_dq_from(const qv_launch_ctx *c, const qv_route_problem *p)
{
    (void)p;
    return threshold(c->o->wo_dq_min_m, c->t->wo_dq_min_m);
}

#define MARLIN_LAYOUTS                                                                                   \
    (QV_ROUTE_BIT(QV_LAYOUT_MARLIN_W4) | QV_ROUTE_BIT(QV_LAYOUT_MARLIN_W4_ZP) |                          \
     QV_ROUTE_BIT(QV_LAYOUT_MARLIN_W8) | QV_ROUTE_BIT(QV_LAYOUT_MARLIN_FP8))
#define F16_BF16 (QV_ROUTE_BIT(QV_FMT_F16) | QV_ROUTE_BIT(QV_FMT_BF16))
/* The FP4 layouts: every weight-only path. */
#define FP4_LAYOUTS (QV_ROUTE_BIT(QV_LAYOUT_MARLIN_FP4_MX) | QV_ROUTE_BIT(QV_LAYOUT_MARLIN_FP4_NV))

static const qv_route_row kMarlin[] = {
    {
        .id = QV_ROUTE_WO_WG,
        .name = "wgmma",
        .kernel = "kernels/wonly_wg.cu",
        .isa = "sm_90a",
        .layouts = MARLIN_LAYOUTS | FP4_LAYOUTS,
        .afmts = F16_BF16,
        .scales = QV_ROUTE_BIT(QV_SCALE_TENSOR) | QV_ROUTE_BIT(QV_SCALE_CHANNEL) | QV_ROUTE_BIT(QV_SCALE_GROUP),
        .g_min = 16,
        .n_min = 64, .n_mult = 64, .k_min = 16, .k_mult = 16,
        .rule = wo_wg_grid,
        .rule_doc = "g >= 32, g = K or NVFP4; N/256 <= 65535 and (M/16)(N/128+1) < 2^31 (its grid)",
        .m_from = wo_wg_from,
        .m_doc = "M >= wo_wg_min_m; unset, M >= 17, and M >= 9 on layers of at least 2^27 weights (sm_90)",
        .opts_doc = "wo_wg_min_m (QV_OPT_OFF: never; 1: every M); shaped by wo_wg_tile, wo_wg_blocks, "
                    "wo_wg_streamk",
    },
    {
        .id = QV_ROUTE_WO_SMALL,
        .name = "small-m",
        .kernel = "kernels/wonly_small.cu",
        .isa = "sm_90",
        .layouts = MARLIN_LAYOUTS | FP4_LAYOUTS,
        .afmts = F16_BF16,
        .n_min = 64, .n_mult = 64, .k_min = 16, .k_mult = 16,
        .m_from = wo_small_from,
        .m_to = wo_small_to,
        .m_doc = "M <= 16 (wo_small unset or QV_WO_SMALL_M16_16), M <= 8 (_M16_8, _SWAP, _SWAP2)",
        .opts_doc = "wo_small (QV_WO_SMALL_NEVER: never); shaped by wo_small_cluster, wo_small_splits, "
                    "wo_small_pre",
    },
    {
        .id = QV_ROUTE_WO_DQ,
        .name = "dq-cublas",
        .kernel = "kernels/wonly_dq.cu",
        .isa = "sm_90",
        .layouts = MARLIN_LAYOUTS | FP4_LAYOUTS,
        .afmts = F16_BF16,
        .n_min = 64, .n_mult = 64, .k_min = 16, .k_mult = 16,
        .m_from = wo_dq_from,
        .m_doc = "M >= wo_dq_min_m; unset, M >= 64 (sm_90)",
        .opts_doc = "wo_dq_min_m (QV_OPT_OFF: never; 1: every M); shaped by wo_dq_chunk_mib, wo_dq_splitk, "
                    "wo_dq_overlap",
    },
    {
        .id = QV_ROUTE_WO_MMA,
        .name = "mma",
        .kernel = "kernels/wonly.cu",
        .isa = "sm_90",
        .layouts = MARLIN_LAYOUTS | FP4_LAYOUTS,
        .afmts = F16_BF16,
        .m_doc = "every M",
        .opts_doc = "none: taken by every problem the rows above leave",
    },
};

/* ---- activation-quantized rows (families "qqq" and "w8a8", kernels/qqq.cu, w8a8.cu) */

static int aq_wg_from(const qv_launch_ctx *c, const qv_route_problem *p)
{
    (void)p;
    return threshold(c->o->aq_wg_min_m, c->t->aq_wg_min_m);
}

/* Below the default threshold (the tuning row's aq_wg_min_m: on the H200,
 * from M = 24 on the kernel beats the mma kernel on every layer of both
 * Llama blocks, both rows, in its default tile; at M = 16 it loses on
 * several layers), the layers so wide that the mma kernel's plan does not
 * split K (at least half a wave of its 256-column blocks): it then runs one
 * slice per block over whole K, on SMs holding one or two of them, while the
 * wgmma kernel's persistent schedule shares the last round of tiles along
 * K: on the H200 the wgmma kernel, in 16-token tiles, is then faster at
 * every M <= 16 (Llama-3-70B gate_up: N = 57344, 224 blocks). Every narrower
 * Llama layer (its K split) stays on the mma kernel, which is faster there
 * at M = 1-8. A set aq_wg_min_m is the one threshold. */
static int aq_wg_wide(const qv_launch_ctx *c, const qv_route_problem *p)
{
    if (c->o->aq_wg_min_m || p->m > 16) return 0;
    const int64_t blocks = ((int64_t)p->n + 255) / 256;
    return 2 * blocks >= qv_qqq_mma_wave(p->v, p->m, c);
}

/* Its grid: N / 256 column blocks within CUDA's grid, the schedule's tiles
 * within an int. */
static int aq_wg_grid(const qv_launch_ctx *c, const qv_route_problem *p)
{
    (void)c;
    return (p->n + 255) / 256 <= 65535 && ((int64_t)p->m + 63) / 64 * (p->n / 128 + 1) < ((int64_t)1 << 31);
}

/* cuBLASLt int8 from aq_lt_min_m; unset, the tuning row's (M = 128 is where
 * the mma kernel switches to its largest tile; cuBLASLt int8 alone already
 * beats the int8 mma kernel at M = 64 on the H200, but this path adds the
 * epilogue pass, and for QQQ the dequantization, to it). */
static int aq_lt_from(const qv_launch_ctx *c, const qv_route_problem *p)
{
    (void)p;
    return threshold(c->o->aq_lt_min_m, c->t->aq_lt_min_m);
}

/* cuBLASLt's fp8 scalings: per tensor x per tensor, per channel x per
 * token, 128x128 blocks x (token, 128 K) at K % 128 == 0. */
static int aq_lt_fp8_scaling(const qv_launch_ctx *c, const qv_route_problem *p)
{
    (void)c;
    const qv_variant *v = p->v;
    return (v->scale_layout == QV_SCALE_TENSOR && v->act_scale == QV_ASCALE_TENSOR) ||
           (v->scale_layout == QV_SCALE_CHANNEL && v->act_scale == QV_ASCALE_TOKEN) ||
           (v->scale_layout == QV_SCALE_BLOCK && v->act_scale == QV_ASCALE_TOKEN_BLOCK && p->k % 128 == 0);
}

/* cuBLASLt fp8 from aq_lt_fp8_min_m; unset, the tuning row's number of the
 * row's scaling, at every shape: where cuBLASLt was faster than the mma
 * kernel on the H200 (qvet bench), per tensor and per token x channel (in
 * two steps) at every M, 128x128 blocks from M = 4 (the mma kernel is faster
 * at M = 1). */
static int aq_lt_fp8_default(const qv_launch_ctx *c, const qv_variant *v)
{
    const qv_scale_layout s = v->scale_layout;
    return s == QV_SCALE_TENSOR ? c->t->aq_lt_fp8_min_m_tensor
           : s == QV_SCALE_CHANNEL ? c->t->aq_lt_fp8_min_m_tok_ch
                                   : c->t->aq_lt_fp8_min_m_block;
}

static int aq_lt_fp8_from(const qv_launch_ctx *c, const qv_route_problem *p)
{
    return threshold(c->o->aq_lt_fp8_min_m, aq_lt_fp8_default(c, p->v));
}

#define QQQ_LAYOUTS (QV_ROUTE_BIT(QV_LAYOUT_QQQ_W4_CHANNEL) | QV_ROUTE_BIT(QV_LAYOUT_QQQ_W4_GROUP))

static const qv_route_row kAq[] = {
    {
        .id = QV_ROUTE_AQ_WG,
        .name = "wgmma",
        .kernel = "kernels/qqq_wg.cu",
        .isa = "sm_90a",
        .layouts = QQQ_LAYOUTS,
        .g_mult = 128,
        .n_min = 64, .n_mult = 64, .k_min = 16, .k_mult = 16,
        .rule = aq_wg_grid,
        .rule_doc = "N/256 <= 65535 and (M/64)(N/128+1) < 2^31 (its grid)",
        .m_from = aq_wg_from,
        .m_also = aq_wg_wide,
        .m_doc = "M >= aq_wg_min_m; unset, M >= 17, and every M <= 16 on layers of at least half a wave of "
                 "the mma kernel's 256-column blocks (N >= 50688 on the H200) (sm_90)",
        .opts_doc = "aq_wg_min_m (QV_OPT_OFF: never; set: the one threshold); shaped by aq_wg_tile, "
                    "aq_wg_blocks, aq_wg_streamk, aq_wg_pdl",
    },
    {
        .id = QV_ROUTE_AQ_LT_I8,
        .name = "cublaslt-i8",
        .kernel = "kernels/aq_lt.cu",
        .isa = "sm_90",
        .layouts = QQQ_LAYOUTS | QV_ROUTE_BIT(QV_LAYOUT_PLAIN_NK),
        .wfmts = QV_ROUTE_BIT(QV_FMT_I8) | QV_ROUTE_BIT(QV_FMT_I4) | QV_ROUTE_BIT(QV_FMT_U4),
        .afmts = QV_ROUTE_BIT(QV_FMT_I8),
        .m_from = aq_lt_from,
        .m_doc = "M >= aq_lt_min_m; unset, M >= 128 (sm_90)",
        .opts_doc = "aq_lt_min_m (QV_OPT_OFF: never); shaped by aq_lt_chunk_mib",
        .may_decline = 1,
    },
    {
        .id = QV_ROUTE_AQ_LT_FP8,
        .name = "cublaslt-fp8",
        .kernel = "kernels/aq_lt_fp8.cu",
        .isa = "sm_90",
        .layouts = QV_ROUTE_BIT(QV_LAYOUT_PLAIN_NK),
        .wfmts = QV_ROUTE_BIT(QV_FMT_E4M3),
        .afmts = QV_ROUTE_BIT(QV_FMT_E4M3),
        .rule = aq_lt_fp8_scaling,
        .rule_doc = "scales tensor x tensor, channel x token, or 128x128 blocks x (token, 128 K) with K % 128 = 0",
        .m_from = aq_lt_fp8_from,
        .m_doc = "M >= aq_lt_fp8_min_m; unset, M >= 1 per tensor and per token x channel, M >= 4 for 128x128 "
                 "blocks (sm_90)",
        .opts_doc = "aq_lt_fp8_min_m (QV_OPT_OFF: never); its forms by aq_lt_fp8_blk_min_m, "
                    "aq_lt_fp8_outer_min_m",
        .may_decline = 1,
    },
    {
        .id = QV_ROUTE_AQ_MMA,
        .name = "mma",
        .kernel = "kernels/aq_gemm.cuh",
        .isa = "sm_90",
        .m_doc = "every M",
        .opts_doc = "none: taken by every problem the rows above leave; shaped by aq_blocks_per_sm, "
                    "aq_splits, aq_cluster_max, aq_pdl_max_m",
    },
};

/* ---- the cuBLAS baselines (family "cublas", kernels/cublas.cu) ------------- */

static const qv_route_row kCublas[] = {
    {
        .id = QV_ROUTE_CUBLAS,
        .name = "cublas",
        .kernel = "kernels/cublas.cu",
        .isa = "sm_90",
        .layouts = QV_ROUTE_BIT(QV_LAYOUT_PLAIN_NK),
        .afmts = F16_BF16,
        .scales = QV_ROUTE_BIT(QV_SCALE_NONE),
        .m_doc = "every M",
        .opts_doc = "none",
    },
};

#define ROWS(a) (a), (int)(sizeof(a) / sizeof((a)[0]))

static const qv_route_table kTables[] = {
    {"marlin", "weight-only Marlin rows (family marlin): qv_launch_wonly, kernels/wonly.cu", ROWS(kMarlin)},
    {"aq", "activation-quantized rows (families qqq and w8a8): qv_launch_qqq, qv_launch_w8a8", ROWS(kAq)},
    {"cublas", "the cuBLAS baselines (family cublas): qv_launch_cublas", ROWS(kCublas)},
};

const qv_route_table *qv_route_tables(int *count)
{
    *count = (int)(sizeof kTables / sizeof kTables[0]);
    return kTables;
}

/* Which table each family's rows use, and the family's runners. */
typedef struct family_routes {
    const char *family;
    const qv_route_table *table;
    qv_route_run_fn run;
    qv_route_ws_fn workspace; /* NULL: no workspace */
} family_routes;

static const family_routes kFamilies[] = {
    {"marlin", &kTables[0], qv_wonly_path_run, qv_wonly_path_workspace},
    {"qqq", &kTables[1], qv_qqq_path_run, qv_qqq_path_workspace},
    {"w8a8", &kTables[1], qv_w8a8_path_run, qv_w8a8_path_workspace},
    {"cublas", &kTables[2], qv_cublas_path_run, NULL},
};

static const family_routes *family_of(const qv_variant *v)
{
    if (!v || !v->gpu_kernel) return NULL;
    for (size_t i = 0; i < sizeof kFamilies / sizeof kFamilies[0]; i++)
        if (!strcmp(kFamilies[i].family, v->family)) return &kFamilies[i];
    return NULL;
}

const qv_route_table *qv_route_table_of(const qv_variant *v)
{
    const family_routes *f = family_of(v);
    return f ? f->table : NULL;
}

qv_route_run_fn qv_route_runner(const qv_variant *v)
{
    const family_routes *f = family_of(v);
    return f ? f->run : NULL;
}

qv_route_ws_fn qv_route_workspacer(const qv_variant *v)
{
    const family_routes *f = family_of(v);
    return f ? f->workspace : NULL;
}

/* The activation-quantized table's row of path id. */
static const qv_route_row *aq_row(int id)
{
    for (size_t i = 0; i < sizeof kAq / sizeof kAq[0]; i++)
        if (kAq[i].id == id) return &kAq[i];
    QV_ASSERT(0, "a path number of the activation-quantized table (route.h)");
    return NULL;
}

int qv_qqq_wg_route(int group, int m, int n, int k, int g, const qv_launch_opts *o)
{
    const qv_variant *v = qv_variant_find(group ? "qqq-w4a8-g128" : "qqq-w4a8-ch");
    qv_launch_ctx c;
    if (!v || qv_launch_ctx_get(o, &c) != QV_OK) return -1;
    const qv_route_problem p = {v, m, n, k, g};
    return qv_route_covers(aq_row(QV_ROUTE_AQ_WG), &c, &p);
}

int qv_aq_lt_fp8_default_min_m(const struct qv_variant *v, int n, int k, const qv_launch_opts *o)
{
    /* The row's scaling alone (K = 128 passes the block scaling's K rule). */
    const qv_route_problem p = {v, 1, n, 128, v->g};
    const qv_route_row *r = aq_row(QV_ROUTE_AQ_LT_FP8);
    if (n < 1 || k < 1 || !qv_route_covers_row(r, v) || !r->rule(NULL, &p)) return 0;
    qv_launch_ctx c;
    if (qv_launch_ctx_get(o, &c) != QV_OK) return -1;
    return aq_lt_fp8_default(&c, v);
}
