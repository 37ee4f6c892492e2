/* w8a8.cu: W8A8 GEMMs on tensor cores, weights (n, k) row-major (plain-nk):
 *  - int8 x int8, exact int32 accumulation, per-tensor or per-token activation
 *    scale x per-tensor or per-channel weight scale, optional activation zero
 *    point (per tensor or per token): out = s_a*s_w*(A_q.B_q - azp*colsum(B_q));
 *  - e4m3 x e4m3 with fp32 promotion of the tensor-core partial sums every 128
 *    K (QV_AQ_FP8_PROMOTE_K), per-tensor, per-token x per-channel, or DeepSeek
 *    style 128x128 weight blocks x (token, 128-K group) activation scales
 *    applied at each promotion.
 * The launcher maps the registry row to aq_gemm.cuh's kernel, or at large M
 * to cuBLASLt: for int8 the bit-identical IGMMA path of aq_lt.cuh, for e4m3
 * the scaled fp8 path of aq_lt_fp8.cuh (the 14-bit promoted accumulator the
 * rows declare; the mma kernel's 24-bit one lies inside that declaration).
 * qv_aq_fp8_probe (aq.h) runs the mma kernel's e4m3 instruction chain on one
 * dot product, for the precision witness. */
#include "aq_args.cuh"
#include "aq_gemm.cuh"
#include "aq_lt.cuh"
#include "aq_lt_fp8.cuh"

#include "internal/aq.h"

/* The mma kernel's split-K region, then (at M >= the cuBLASLt thresholds)
 * the cuBLASLt path's region after it (aq_lt.cuh for int8, aq_lt_fp8.cuh for
 * e4m3). */
extern "C" size_t qv_workspace_w8a8(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts)
{
    qv_launch_ctx c;
    if (m < 1 || n < 1 || k < 1 || qv_launch_ctx_get(opts, &c) != QV_OK) return 0;
    const size_t lt = v->wfmt == QV_FMT_I8 ? aq_lt_workspace(c, AQ_B_PLAIN_I8, v->azp != QV_AZP_NONE, m, n, k)
                      : v->wfmt == QV_FMT_E4M3 ? aq_lt_fp8_workspace(c, v, m, n, k)
                                               : 0;
    const int kind = v->wfmt == QV_FMT_E4M3 ? AQ_B_PLAIN_E4M3 : AQ_B_PLAIN_I8;
    return lt ? aq_lt_offset(c, kind, m, n, k) + lt : aq_plan_for(c, kind, m, n, k).workspace;
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
    if (!a->a || !a->a_scale || !a->b || !a->scales || !a->c || (p.azpm != AQ_AZP_NONE && !a->azp))
        return qv_fail(QV_ERR_USAGE, "%s: a device buffer is missing (a, a_scale, b, scales, c%s)", v->name,
                       p.azpm != AQ_AZP_NONE ? ", azp" : "");
    qv_launch_ctx c;
    QV_TRY(qv_launch_ctx_get(a->opts, &c));
    bool taken = false;
    if (fp8) {
        /* Large M: cuBLASLt fp8 with its own scaling modes, when it takes the shape. */
        QV_TRY(aq_lt_fp8_try(c, p, a, aq_lt_offset(c, AQ_B_PLAIN_E4M3, p.m, p.n, p.k), &taken));
        return taken ? QV_OK : aq_launch<AQ_B_PLAIN_E4M3>(p, a, v->name, c);
    }
    /* Large M: cuBLASLt int8 IGMMA and the same epilogue, when it takes the shape. */
    QV_TRY(aq_lt_try(c, AQ_B_PLAIN_I8, p, a, aq_lt_offset(c, AQ_B_PLAIN_I8, p.m, p.n, p.k), &taken));
    return taken ? QV_OK : aq_launch<AQ_B_PLAIN_I8>(p, a, v->name, c);
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
