/* qqq.cu: QQQ W4A8 (int4 weights x int8 per-token activations, int8 tensor
 * cores) in the published HandH1998/QQQ layouts, channelwise and per group.
 * The launcher checks the row and the shape, then runs the first path of the
 * activation-quantized route table (src/gpu_routes.c) that covers the
 * problem: from M = 17 (and on the widest layers below) the wgmma kernel of
 * qqq_wg.cu, else (with the wgmma path off, from M = 128) the cuBLASLt path
 * of aq_lt.cuh, else aq_gemm.cuh's mma kernel; all three give the same bits.
 * Arithmetic (registry rows qqq-w4a8-*, golden/README.md): channelwise sees
 * each nibble as 16*q in an int8 and scales by the stored s_ch = true/16; per
 * group re-rounds each weight to int8 as w8 = rne((q-8)*s_group) in one fp16
 * FMA; acc = A.w exact in int32; D = fp16_rne((float(acc) * s_ch) * s_tok). */
#include "aq_args.cuh"
#include "aq_gemm.cuh"
#include "aq_lt.cuh"
#include "qqq_wg.cuh"

#include "internal/route.h"

/* The parameters of a launch that qv_launch_qqq accepted. */
static aq_params qqq_params(const qv_gemm_args *a)
{
    aq_params p = aq_params_of(a);
    p.g = a->g;
    p.ascale = AQ_AS_TOKEN;
    p.w_scale2 = (const float *)a->scales2;
    p.wscale = AQ_WS_CHANNEL_PERM32;
    p.azpm = AQ_AZP_NONE;
    return p;
}

static int qqq_kind(const qv_variant *v) { return v->layout == QV_LAYOUT_QQQ_W4_GROUP ? AQ_B_QQQ_GROUP : AQ_B_QQQ_CH; }

extern "C" long long qv_qqq_mma_wave(const qv_variant *v, int m, const qv_launch_ctx *c)
{
    return aq_wave(*c, qqq_kind(v), AQ_TILE_SMALL, m);
}

/* Each path's workspace (route.h): the wgmma kernel's; the cuBLASLt path's
 * region after the mma kernel's split-K region (aq_lt.cuh); the mma
 * kernel's split-K region. The query's largest covers every path. */
extern "C" size_t qv_qqq_path_workspace(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p)
{
    const int kind = qqq_kind(p->v);
    switch (r->id) {
    case QV_ROUTE_AQ_WG: return qv_qqq_wg_workspace(p->m, p->n, p->k, c);
    case QV_ROUTE_AQ_LT_I8: {
        const size_t lt = aq_lt_workspace(*c, kind, false, p->m, p->n, p->k);
        return lt ? aq_lt_offset(*c, kind, p->m, p->n, p->k) + lt : 0;
    }
    default: return aq_plan_for(*c, kind, p->m, p->n, p->k).workspace;
    }
}

extern "C" size_t qv_workspace_qqq(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts)
{
    qv_launch_ctx c;
    if (m < 1 || n < 1 || k < 1 || qv_launch_ctx_get(opts, &c) != QV_OK) return 0;
    const qv_route_problem p = {v, m, n, k, v->g};
    return qv_route_workspace(&c, &p);
}

/* The wgmma kernel (int8 weights made in registers); cuBLASLt int8 IGMMA
 * over int8 chunks of the weights, the same epilogue, declined when
 * cuBLASLt has no algorithm for the shape; the mma kernel. */
extern "C" qv_status qv_qqq_path_run(const qv_route_row *r, const qv_variant *v, const qv_gemm_args *a,
                                     const qv_launch_ctx *c, int *declined)
{
    const aq_params p = qqq_params(a);
    const int kind = qqq_kind(v);
    *declined = 0;
    switch (r->id) {
    case QV_ROUTE_AQ_WG: return qv_qqq_wg_launch(v, &p, a, c);
    case QV_ROUTE_AQ_LT_I8: {
        bool taken = false;
        QV_TRY(aq_lt_try(*c, kind, p, a, aq_lt_offset(*c, kind, p.m, p.n, p.k), &taken));
        *declined = !taken;
        return QV_OK;
    }
    default:
        return kind == AQ_B_QQQ_GROUP ? aq_launch<AQ_B_QQQ_GROUP>(p, a, v->name, *c)
                                      : aq_launch<AQ_B_QQQ_CH>(p, a, v->name, *c);
    }
}

extern "C" qv_status qv_launch_qqq(const qv_variant *v, const qv_gemm_args *a)
{
    const bool group = v->layout == QV_LAYOUT_QQQ_W4_GROUP;
    if (v->layout != QV_LAYOUT_QQQ_W4_CHANNEL && !group)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the QQQ kernel reads only the qqq-w4-* layouts", v->name);
    if (v->afmt != QV_FMT_I8 || v->ofmt != QV_FMT_F16 || v->act_scale != QV_ASCALE_TOKEN)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the QQQ kernel needs int8 per-token activations and fp16 output",
                       v->name);
    QV_TRY(qv_variant_check_shape(v, a->m, a->n, a->k));
    /* The packed layout works in 16 x 64 tiles; K tails are zero-filled per 16. */
    if (a->n % 64 || a->k % 16)
        return qv_fail(QV_ERR_SHAPE, "%s: N=%d must be a multiple of 64 and K=%d of 16", v->name, a->n, a->k);
    if (group && (a->g <= 0 || a->g % AQ_BK || a->k % a->g))
        return qv_fail(QV_ERR_UNSUPPORTED,
                       "%s: group size g=%d: this kernel needs g a multiple of %d that divides K=%d", v->name,
                       a->g, AQ_BK, a->k);
    if (!a->a || !a->a_scale || !a->b || !a->scales || !a->c || (group && !a->scales2))
        return qv_fail(QV_ERR_USAGE, "%s: a device buffer is missing (a, a_scale, b, scales%s, c)", v->name,
                       group ? ", scales2" : "");
    qv_launch_ctx c;
    QV_TRY(qv_launch_ctx_get(a->opts, &c));
    /* The first path of the route table that covers the problem. */
    return qv_route_launch(v, a, &c);
}
