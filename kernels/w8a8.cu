/* w8a8.cu: W8A8 GEMMs on tensor cores, weights (n, k) row-major (plain-nk):
 *  - int8 x int8, exact int32 accumulation, per-tensor or per-token activation
 *    scale x per-tensor or per-channel weight scale, optional activation zero
 *    point (per tensor or per token): out = s_a*s_w*(A_q.B_q - azp*colsum(B_q));
 *  - e4m3 x e4m3 with fp32 promotion of the tensor-core partial sums every 128
 *    K (QV_AQ_FP8_PROMOTE_K), per-tensor, per-token x per-channel, or DeepSeek
 *    style 128x128 weight blocks x (token, 128-K group) activation scales
 *    applied at each promotion.
 * The launcher runs the first path of the activation-quantized route table
 * (src/gpu_routes.c) that covers the problem: aq_gemm.cuh's kernel, or from
 * the table's M on cuBLASLt: for int8 the bit-identical IGMMA path of
 * aq_lt.cuh, for e4m3 the scaled fp8 path of aq_lt_fp8.cuh (the 14-bit promoted accumulator the
 * rows declare; the mma kernel's 24-bit one lies inside that declaration).
 * qv_aq_fp8_probe (aq.h) runs the mma kernel's e4m3 instruction chain on one
 * dot product, for the precision witness. */
#include "aq_args.cuh"
#include "aq_gemm.cuh"
#include "aq_lt.cuh"
#include "aq_lt_fp8.cuh"

#include "internal/aq.h"
#include "internal/route.h"

static int w8a8_kind(const qv_variant *v) { return v->wfmt == QV_FMT_E4M3 ? AQ_B_PLAIN_E4M3 : AQ_B_PLAIN_I8; }

/* Each path's workspace (route.h): a cuBLASLt path's region after the mma
 * kernel's split-K region (aq_lt.cuh for int8, aq_lt_fp8.cuh for e4m3); the
 * mma kernel's split-K region. */
extern "C" size_t qv_w8a8_path_workspace(const qv_route_row *r, const qv_launch_ctx *c, const qv_route_problem *p)
{
    const qv_variant *v = p->v;
    const int kind = w8a8_kind(v);
    size_t lt = 0;
    switch (r->id) {
    case QV_ROUTE_AQ_LT_I8: lt = aq_lt_workspace(*c, AQ_B_PLAIN_I8, v->azp != QV_AZP_NONE, p->m, p->n, p->k); break;
    case QV_ROUTE_AQ_LT_FP8: lt = aq_lt_fp8_workspace(*c, v, p->m, p->n, p->k); break;
    default: return aq_plan_for(*c, kind, p->m, p->n, p->k).workspace;
    }
    return lt ? aq_lt_offset(*c, kind, p->m, p->n, p->k) + lt : 0;
}

extern "C" size_t qv_workspace_w8a8(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts)
{
    qv_launch_ctx c;
    if (m < 1 || n < 1 || k < 1 || qv_launch_ctx_get(opts, &c) != QV_OK) return 0;
    const qv_route_problem p = {v, m, n, k, v->g};
    return qv_route_workspace(&c, &p);
}

/* The kernel's parameters of a launch of v; QV_ERR_UNSUPPORTED for a row
 * this family does not run. */
static qv_status w8a8_params(const qv_variant *v, const qv_gemm_args *a, aq_params *out)
{
    const bool fp8 = v->wfmt == QV_FMT_E4M3;
    aq_params p = aq_params_of(a);
    switch (v->act_scale) {
    case QV_ASCALE_TENSOR: p.ascale = AQ_AS_TENSOR; break;
    case QV_ASCALE_TOKEN: p.ascale = AQ_AS_TOKEN; break;
    case QV_ASCALE_TOKEN_BLOCK: p.ascale = AQ_AS_TOKEN_BLOCK; break;
    default: return qv_fail(QV_ERR_UNSUPPORTED, "%s: W8A8 needs an activation scale", v->name);
    }
    switch (v->scale_layout) {
    case QV_SCALE_TENSOR: p.wscale = AQ_WS_TENSOR; break;
    case QV_SCALE_CHANNEL: p.wscale = AQ_WS_CHANNEL; break;
    case QV_SCALE_BLOCK: p.wscale = AQ_WS_BLOCK; break;
    default: return qv_fail(QV_ERR_UNSUPPORTED, "%s: W8A8 weight scales are tensor, channel or block", v->name);
    }
    if ((p.wscale == AQ_WS_BLOCK) != (p.ascale == AQ_AS_TOKEN_BLOCK) || (p.wscale == AQ_WS_BLOCK && !fp8))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: 128x128 weight blocks go with (token, 128-K) activation scales, e4m3 only",
                       v->name);
    switch (v->azp) {
    case QV_AZP_NONE: p.azpm = AQ_AZP_NONE; break;
    case QV_AZP_TENSOR: p.azpm = AQ_AZP_TENSOR; break;
    case QV_AZP_TOKEN: p.azpm = AQ_AZP_TOKEN; break;
    }
    if (fp8 && p.azpm != AQ_AZP_NONE)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: activation zero points are int8 only", v->name);
    p.azp = a->azp;
    *out = p;
    return QV_OK;
}

/* cuBLASLt int8 IGMMA and the same epilogue, or cuBLASLt fp8 with its own
 * scaling modes, each declined when cuBLASLt has no algorithm for the shape
 * (or, for the block rows, no scales2); the mma kernel. */
extern "C" qv_status qv_w8a8_path_run(const qv_route_row *r, const qv_variant *v, const qv_gemm_args *a,
                                      const qv_launch_ctx *c, int *declined)
{
    aq_params p;
    QV_TRY(w8a8_params(v, a, &p));
    const int kind = w8a8_kind(v);
    const size_t lt_off = aq_lt_offset(*c, kind, p.m, p.n, p.k);
    bool taken = false;
    *declined = 0;
    switch (r->id) {
    case QV_ROUTE_AQ_LT_I8:
        QV_TRY(aq_lt_try(*c, AQ_B_PLAIN_I8, p, a, lt_off, &taken));
        *declined = !taken;
        return QV_OK;
    case QV_ROUTE_AQ_LT_FP8:
        QV_TRY(aq_lt_fp8_try(*c, p, a, lt_off, &taken));
        *declined = !taken;
        return QV_OK;
    default:
        return kind == AQ_B_PLAIN_E4M3 ? aq_launch<AQ_B_PLAIN_E4M3>(p, a, v->name, *c)
                                       : aq_launch<AQ_B_PLAIN_I8>(p, a, v->name, *c);
    }
}

extern "C" qv_status qv_launch_w8a8(const qv_variant *v, const qv_gemm_args *a)
{
    const bool fp8 = v->wfmt == QV_FMT_E4M3;
    if (v->layout != QV_LAYOUT_PLAIN_NK || v->afmt != v->wfmt || (v->wfmt != QV_FMT_I8 && !fp8) ||
        v->ofmt != QV_FMT_F16)
        return qv_fail(QV_ERR_UNSUPPORTED,
                       "%s: the W8A8 kernel reads int8 x int8 or e4m3 x e4m3 in the plain-nk layout, fp16 out",
                       v->name);
    QV_TRY(qv_variant_check_shape(v, a->m, a->n, a->k));
    /* n8 output tiles and 16-byte K chunks are the kernel's predication units. */
    if (a->n % 8 || a->k % 16)
        return qv_fail(QV_ERR_SHAPE, "%s: N=%d must be a multiple of 8 and K=%d of 16", v->name, a->n, a->k);
    aq_params p;
    QV_TRY(w8a8_params(v, a, &p));
    if (!a->a || !a->a_scale || !a->b || !a->scales || !a->c || (p.azpm != AQ_AZP_NONE && !a->azp))
        return qv_fail(QV_ERR_USAGE, "%s: a device buffer is missing (a, a_scale, b, scales, c%s)", v->name,
                       p.azpm != AQ_AZP_NONE ? ", azp" : "");
    qv_launch_ctx c;
    QV_TRY(qv_launch_ctx_get(a->opts, &c));
    /* The first path of the route table that covers the problem. */
    return qv_route_launch(v, a, &c);
}

/* One warp: lanes 0..3 hold row 0 of A and column 0 of B (fragment layout of
 * aq_mma_e4m3), every other element is 0; D[0][0] lands in lane 0's c[0].
 * a, b: (k) e4m3 codes; out: (1) f32. */
__global__ void k_aq_fp8_probe(const uint8_t *a, const uint8_t *b, int k, int chain, float c_init, float *out)
{
    const int lane = threadIdx.x, tq = lane & 3;
    const bool row0 = lane < 4;
    float total = 0.0f, c[4] = {c_init, 0.0f, 0.0f, 0.0f};
    int in_chain = 0;
    for (int k0 = 0; k0 < k; k0 += 32) {
        uint32_t af[4] = {0, 0, 0, 0}, bf[2] = {0, 0};
        if (row0) {
            af[0] = *(const uint32_t *)(a + k0 + 4 * tq);
            af[2] = *(const uint32_t *)(a + k0 + 16 + 4 * tq);
            bf[0] = *(const uint32_t *)(b + k0 + 4 * tq);
            bf[1] = *(const uint32_t *)(b + k0 + 16 + 4 * tq);
        }
        aq_mma_e4m3(c, af, bf);
        if (++in_chain == chain || k0 + 32 >= k) {
            total = __fadd_rn(total, c[0]);
            c[0] = c[1] = c[2] = c[3] = 0.0f;
            in_chain = 0;
        }
    }
    if (lane == 0) *out = total;
}

extern "C" qv_status qv_aq_fp8_probe(const uint8_t *a, const uint8_t *b, int k, int chain, float c_init,
                                     float *out)
{
    if (k < 32 || k % 32 || chain < 1)
        return qv_fail(QV_ERR_USAGE, "fp8 probe: k=%d must be a positive multiple of 32, chain=%d >= 1", k, chain);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        cudaGetLastError();
        return qv_fail(QV_ERR_NODEVICE, "fp8 probe: no CUDA device");
    }
    uint8_t *da = NULL, *db = NULL;
    float *dout = NULL;
    qv_status st = QV_OK;
#define PROBE_TRY(call, what)                                                  \
    do {                                                                       \
        cudaError_t rc_ = (call);                                              \
        if (rc_ != cudaSuccess) {                                              \
            st = qv_cuda_fail((int)rc_, (what), __FILE__, __LINE__);           \
            goto done;                                                         \
        }                                                                      \
    } while (0)
    PROBE_TRY(cudaMalloc((void **)&da, (size_t)k), "cudaMalloc probe A");
    PROBE_TRY(cudaMalloc((void **)&db, (size_t)k), "cudaMalloc probe B");
    PROBE_TRY(cudaMalloc((void **)&dout, sizeof(float)), "cudaMalloc probe out");
    PROBE_TRY(cudaMemcpy(da, a, (size_t)k, cudaMemcpyHostToDevice), "cudaMemcpy probe A");
    PROBE_TRY(cudaMemcpy(db, b, (size_t)k, cudaMemcpyHostToDevice), "cudaMemcpy probe B");
    k_aq_fp8_probe<<<1, 32>>>(da, db, k, chain, c_init, dout);
    PROBE_TRY(cudaGetLastError(), "launching k_aq_fp8_probe");
    PROBE_TRY(cudaMemcpy(out, dout, sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy probe out");
#undef PROBE_TRY
done:
    cudaFree(da);
    cudaFree(db);
    cudaFree(dout);
    return st;
}
