/* qqq.cu: QQQ W4A8 (int4 weights x int8 per-token activations, int8 tensor
 * cores) in the published HandH1998/QQQ layouts, channelwise and per group.
 * The launcher checks the row and the shape, then runs from M = 17 (and on
 * the widest layers below, qv_qqq_wg_wanted) the wgmma kernel of qqq_wg.cu,
 * else aq_gemm.cuh's mma kernel (or, with the wgmma path
 * off, the cuBLASLt path of aq_lt.cuh from M = 128); all three give the same
 * bits.
 * Arithmetic (registry rows qqq-w4a8-*, golden/README.md): channelwise sees
 * each nibble as 16*q in an int8 and scales by the stored s_ch = true/16; per
 * group re-rounds each weight to int8 as w8 = rne((q-8)*s_group) in one fp16
 * FMA; acc = A.w exact in int32; D = fp16_rne((float(acc) * s_ch) * s_tok). */
#include "aq_args.cuh"
#include "aq_gemm.cuh"
#include "aq_lt.cuh"
#include "qqq_wg.cuh"

/* The mma kernel's split-K region, then (M >= the cuBLASLt threshold) the
 * cuBLASLt path's region after it (aq_lt.cuh); at least the wgmma path's
 * (its counters are the same first bytes), whichever path the launch takes. */
extern "C" size_t qv_workspace_qqq(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts)
{
    qv_launch_ctx c;
    if (m < 1 || n < 1 || k < 1 || qv_launch_ctx_get(opts, &c) != QV_OK) return 0;
    const int kind = v->layout == QV_LAYOUT_QQQ_W4_GROUP ? AQ_B_QQQ_GROUP : AQ_B_QQQ_CH;
    const size_t lt = aq_lt_workspace(c, kind, false, m, n, k);
    const size_t mma = lt ? aq_lt_offset(c, kind, m, n, k) + lt : aq_plan_for(c, kind, m, n, k).workspace;
    const size_t wg = qv_qqq_wg_workspace(m, n, k, &c);
    return mma > wg ? mma : wg;
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
    aq_params p = aq_params_of(a);
    p.g = a->g;
    p.ascale = AQ_AS_TOKEN;
    p.w_scale2 = (const float *)a->scales2;
    p.wscale = AQ_WS_CHANNEL_PERM32;
    p.azpm = AQ_AZP_NONE;
    /* From aq_wg_min_m: the wgmma kernel, int8 weights made in registers. */
    if (qv_qqq_wg_takes(v, a->m, a->n, a->k, a->g, &c)) return qv_qqq_wg_launch(v, &p, a, &c);
    /* Large M: dequantize to int8 chunks, cuBLASLt int8 IGMMA, the same epilogue. */
    bool taken = false;
    const int kind = group ? AQ_B_QQQ_GROUP : AQ_B_QQQ_CH;
    QV_TRY(aq_lt_try(c, kind, p, a, aq_lt_offset(c, kind, p.m, p.n, p.k), &taken));
    if (taken) return QV_OK;
    return group ? aq_launch<AQ_B_QQQ_GROUP>(p, a, v->name, c) : aq_launch<AQ_B_QQQ_CH>(p, a, v->name, c);
}
