/* gpu_route.c: the one dispatcher of the route tables (route.h): whether a
 * row covers a problem, the first row that does, the launch through the
 * family's path runner, the workspace over every covering row, and the count
 * of launches each row ran. Knows no family: the tables and runners come
 * from src/gpu_routes.c. Host C; no CUDA call of its own. */
#include <limits.h>

#include "internal/route.h"
#include "internal/wonly_plan.h"

/* value is one of the enum values in the set `bits` (0: any). */
static int in_set(uint32_t bits, int value) { return !bits || (value >= 0 && value < 32 && (bits >> value) & 1u); }

static int flag_ok(qv_route_flag f, int value)
{
    return f == QV_ROUTE_EITHER || (f == QV_ROUTE_YES) == (value != 0);
}

int qv_route_covers_row(const qv_route_row *r, const qv_variant *v)
{
    return in_set(r->layouts, (int)v->layout) && in_set(r->wfmts, (int)v->wfmt) && in_set(r->afmts, (int)v->afmt) &&
           in_set(r->scales, (int)v->scale_layout) && in_set(r->act_scales, (int)v->act_scale) &&
           flag_ok(r->zero_points, v->zero_point != QV_ZP_NONE) && flag_ok(r->act_order, v->act_order);
}

/* Group scales (one level, or with a channel scale after them): g at least
 * g_min unless one group spans K, and a multiple of g_mult dividing K. */
static int group_ok(const qv_route_row *r, const qv_route_problem *p)
{
    const qv_scale_layout s = p->v->scale_layout;
    if (s != QV_SCALE_GROUP && s != QV_SCALE_GROUP_CHANNEL) return 1;
    if (r->g_min && p->g < r->g_min && p->g != p->k) return 0;
    if (r->g_mult && (p->g <= 0 || p->g % r->g_mult || p->k % p->g)) return 0;
    return 1;
}

static int dim_ok(int x, int min, int mult) { return x >= min && (!mult || x % mult == 0); }

int qv_route_covers(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p)
{
    if (p->m < 1 || !qv_route_covers_row(r, p->v) || !group_ok(r, p)) return 0;
    if (!dim_ok(p->n, r->n_min, r->n_mult) || !dim_ok(p->k, r->k_min, r->k_mult)) return 0;
    if (r->rule && !r->rule(c, p)) return 0;
    const int from = r->m_from ? r->m_from(c, p) : 1;
    const int to = r->m_to ? r->m_to(c, p) : INT_MAX;
    if (from != QV_ROUTE_OFF && p->m >= from && p->m <= to) return 1;
    return r->m_also && r->m_also(c, p);
}

const qv_route_row *qv_route_pick(const qv_route_table *t, const qv_launch_ctx *c, const qv_route_problem *p,
                              const qv_route_row *after)
{
    for (int i = after ? (int)(after - t->rows) + 1 : 0; i < t->n_rows; i++)
        if (qv_route_covers(&t->rows[i], c, p)) return &t->rows[i];
    return NULL;
}

/* Launch counts, one per row of every table (route.h: qv_route_runs). */
#define MAX_TABLES 8
#define MAX_ROWS 16
static long long g_runs[MAX_TABLES][MAX_ROWS];

static long long *runs_of(const qv_route_row *r)
{
    int n = 0;
    const qv_route_table *t = qv_route_tables(&n);
    for (int i = 0; i < n && i < MAX_TABLES; i++)
        if (r >= t[i].rows && r < t[i].rows + t[i].n_rows && r - t[i].rows < MAX_ROWS)
            return &g_runs[i][r - t[i].rows];
    QV_ASSERT(0, "a route row outside every table (src/gpu_routes.c)");
    return NULL;
}

long long qv_route_runs(const qv_route_row *r) { return __atomic_load_n(runs_of(r), __ATOMIC_RELAXED); }

qv_status qv_route_launch(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c)
{
    const qv_route_table *t = qv_route_table_of(v);
    const qv_route_run_fn run = qv_route_runner(v);
    if (!t || !run) return qv_fail(QV_ERR_UNSUPPORTED, "%s has no route table", v ? v->name : "(null)");
    const qv_route_problem p = {v, a->m, a->n, a->k, a->g};
    for (const qv_route_row *r = qv_route_pick(t, c, &p, NULL); r; r = qv_route_pick(t, c, &p, r)) {
        int declined = 0;
        QV_TRY(run(r, v, a, c, &declined));
        QV_ASSERT(!declined || r->may_decline, "a route row declined a problem but declares may_decline = 0");
        if (!declined) {
            __atomic_fetch_add(runs_of(r), 1, __ATOMIC_RELAXED);
            return QV_OK;
        }
    }
    return qv_fail(QV_ERR_UNSUPPORTED, "%s: no path of route table %s takes m=%d n=%d k=%d", v->name, t->name, a->m,
                   a->n, a->k);
}

size_t qv_route_path_workspace(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p)
{
    const qv_route_ws_fn ws = qv_route_workspacer(p->v);
    return ws ? ws(r, c, p) : 0;
}

size_t qv_route_workspace(const qv_launch_ctx *c, const qv_route_problem *p)
{
    const qv_route_table *t = qv_route_table_of(p->v);
    size_t bytes = 0;
    for (const qv_route_row *r = t ? qv_route_pick(t, c, p, NULL) : NULL; r; r = qv_route_pick(t, c, p, r)) {
        const size_t w = qv_route_path_workspace(r, c, p);
        if (w > bytes) bytes = w;
    }
    return bytes;
}

qv_status qv_route_query(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts, const qv_route_row **r)
{
    const qv_route_table *t = qv_route_table_of(v);
    if (!t) return qv_fail(QV_ERR_UNSUPPORTED, "%s has no route table", v ? v->name : "(null)");
    qv_launch_ctx c;
    QV_TRY(qv_launch_ctx_get(opts, &c));
    const qv_route_problem p = {v, m, n, k, v->g};
    *r = qv_route_pick(t, &c, &p, NULL);
    if (!*r) return qv_fail(QV_ERR_UNSUPPORTED, "%s: no path of route table %s takes m=%d n=%d k=%d", v->name, t->name,
                            m, n, k);
    return QV_OK;
}

qv_status qv_wonly_route(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts, qv_wo_path *path)
{
    const qv_route_row *r = NULL;
    QV_TRY(qv_route_query(v, m, n, k, opts, &r));
    *path = (qv_wo_path)r->id;
    return QV_OK;
}
