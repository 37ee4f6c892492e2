/* route.h: the route tables of the GPU families: which kernel path a launch
 * of a registry row takes. Included by the families' launchers (kernels/),
 * src/gpu_route.c (the one dispatcher), src/gpu_routes.c (the tables), the
 * CLI's `qvet list --paths` and the suites. Rule: a path is chosen here and
 * nowhere else: a launch runs the first row of its family's table that
 * covers the problem under the options, and the workspace query returns the
 * largest workspace of every row that covers it. Plain C for gcc and nvcc. */
#ifndef QVET_ROUTE_H
#define QVET_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "internal/tuning.h"
#include "qvet/gemm.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One problem as the routes see it: a row at (m, n, k) with group size g
 * (the launch's qv_gemm_args.g, the row's own g for a query). */
typedef struct qv_route_problem {
    const qv_variant *v;
    int m, n, k, g;
} qv_route_problem;

/* An M bound of a path under a planning context: the smallest M it takes,
 * or QV_ROUTE_OFF when the options turn it off; or the largest M. */
#define QV_ROUTE_OFF 0
typedef int (*qv_route_m_fn)(const qv_launch_ctx *c, const qv_route_problem *p);
/* A rule that data fields cannot state (a grid limit, a layer's width): 1
 * when it holds. */
typedef int (*qv_route_rule_fn)(const qv_launch_ctx *c, const qv_route_problem *p);

/* A set of enum values (qv_layout, qv_fmt, qv_scale_layout, qv_act_scale) as
 * bits; 0 in a row: any value. */
#define QV_ROUTE_BIT(e) (1u << (unsigned)(e))

/* Yes / no / either, for a row's boolean properties. */
typedef enum qv_route_flag { QV_ROUTE_EITHER = 0, QV_ROUTE_YES, QV_ROUTE_NO } qv_route_flag;

/* One path of a family: what it covers and from which M. A problem is
 * covered when every field holds; zero fields hold for everything. */
typedef struct qv_route_row {
    int id;               /* the family's path number (its launcher switches on it) */
    const char *name;     /* "wgmma", "small-m", ... (qvet list --paths, the suites) */
    const char *kernel;   /* the source file of the path */
    const char *isa;      /* the target its object is built for: "sm_90a" (wgmma) or "sm_90" */
    /* The rows it covers. */
    uint32_t layouts;     /* QV_ROUTE_BIT(qv_layout) */
    uint32_t wfmts;       /* QV_ROUTE_BIT(qv_fmt) of the weight codes */
    uint32_t afmts;       /* QV_ROUTE_BIT(qv_fmt) of the activations */
    uint32_t scales;      /* QV_ROUTE_BIT(qv_scale_layout) of the first-level weight scale */
    uint32_t act_scales;  /* QV_ROUTE_BIT(qv_act_scale) */
    qv_route_flag zero_points, act_order;
    int g_min;            /* group scales: g at least this, unless g == K (one group) */
    int g_mult;           /* group scales: g a multiple of this that divides K */
    /* The shapes it covers. */
    int n_min, n_mult, k_min, k_mult;
    qv_route_rule_fn rule; /* one more condition, NULL none; rule_doc says it in words */
    const char *rule_doc;
    /* The M it takes: from m_from (NULL: 1) to m_to (NULL: no bound), and
     * where m_also holds (NULL: nowhere) even below m_from. */
    qv_route_m_fn m_from, m_to;
    qv_route_rule_fn m_also;
    const char *m_doc;    /* the M rule in words, with the sm_90 defaults */
    const char *opts_doc; /* the qv_launch_opts fields that move, force or forbid it */
    int may_decline;      /* the launch may hand the problem to the next row that covers it
                             (cuBLASLt without an algorithm for the shape) */
} qv_route_row;

/* A family's table: its rows in the order a launch asks them. */
typedef struct qv_route_table {
    const char *name;     /* "marlin", "aq", "cublas" */
    const char *doc;      /* one line: whose rows, and the family's launcher */
    const qv_route_row *rows;
    int n_rows;
} qv_route_table;

/* A family's path runner: launches row r's path for v (validated by the
 * family's launcher) under c; *declined = 1 when the path hands the problem
 * on (r->may_decline) without having launched anything. */
typedef qv_status (*qv_route_run_fn)(const qv_route_row *r, const qv_variant *v, const qv_gemm_args *a,
                                     const qv_launch_ctx *c, int *declined);
/* A family's path workspace: the bytes row r's path needs for p under c. */
typedef size_t (*qv_route_ws_fn)(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p);

/* The tables, every one (for listings and suites), and for v's family its
 * path runner and workspace (src/gpu_routes.c; NULL when v has none). */
const qv_route_table *qv_route_tables(int *count);
/* The table of v's family (qv_variant.family), NULL when v has no kernel
 * (gpu_kernel = 0) or its family has no table. */
const qv_route_table *qv_route_table_of(const qv_variant *v);
qv_route_run_fn qv_route_runner(const qv_variant *v);
qv_route_ws_fn qv_route_workspacer(const qv_variant *v);

/* 1 when row r covers v's properties, whatever the shape and M (listings). */
int qv_route_covers_row(const qv_route_row *r, const qv_variant *v);
/* 1 when row r covers p under c: v's properties, the shape, the rule and M. */
int qv_route_covers(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p);
/* The first row of t after `after` (NULL: from the first) that covers p
 * under c; NULL when none does. */
const qv_route_row *qv_route_pick(const qv_route_table *t, const qv_launch_ctx *c, const qv_route_problem *p,
                              const qv_route_row *after);

/* The launch of a family's launcher, after it validated v and a: runs the
 * path of the first row that covers the problem (g from a), then the next
 * one that covers it while paths decline; counts the row that ran. */
qv_status qv_route_launch(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c);
/* The largest workspace over every row that covers p under c. */
size_t qv_route_workspace(const qv_launch_ctx *c, const qv_route_problem *p);
/* The workspace of row r alone for p under c (its path's own plan). */
size_t qv_route_path_workspace(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p);

/* The row an (m, n, k) problem of v takes under opts (NULL: the defaults),
 * g the row's: QV_OK and *r; QV_ERR_UNSUPPORTED when v has no route table
 * or no row covers the problem; QV_ERR_USAGE for refused options; without a
 * device, opts must set sms and arch (no CUDA call then). */
qv_status qv_route_query(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts, const qv_route_row **r);

/* Launches in this process that row r's path ran (and did not decline). No
 * CUDA call. */
long long qv_route_runs(const qv_route_row *r);

/* The families' path runners and workspaces (kernels/): each switches on
 * r->id over its own paths. */
qv_status qv_wonly_path_run(const qv_route_row *r, const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c,
                            int *declined);
size_t qv_wonly_path_workspace(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p);
qv_status qv_qqq_path_run(const qv_route_row *r, const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c,
                          int *declined);
size_t qv_qqq_path_workspace(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p);
qv_status qv_w8a8_path_run(const qv_route_row *r, const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c,
                           int *declined);
size_t qv_w8a8_path_workspace(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p);
qv_status qv_cublas_path_run(const qv_route_row *r, const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c,
                             int *declined);
/* The wave of QQQ's mma kernel (blocks of its 16-row tile resident at once)
 * for an M-row problem of v under c: the wide-layer rule of the QQQ wgmma
 * row counts it (kernels/qqq.cu). */
long long qv_qqq_mma_wave(const qv_variant *v, int m, const qv_launch_ctx *c);

/* Path numbers, per family. */
enum { QV_ROUTE_WO_WG = 1, QV_ROUTE_WO_SMALL, QV_ROUTE_WO_DQ, QV_ROUTE_WO_MMA };
enum { QV_ROUTE_AQ_WG = 1, QV_ROUTE_AQ_LT_I8, QV_ROUTE_AQ_LT_FP8, QV_ROUTE_AQ_MMA };
enum { QV_ROUTE_CUBLAS = 1 };

#ifdef __cplusplus
}
#endif
#endif
