/* gpu_moe.c: a routed problem (moe.h) on the GPU under qvet's rules
 * (gpu_moe.h): each expert packed in its kernel layout (Marlin W4 or FP4,
 * or plain (n, k) e4m3) and stacked, the upload, a poisoned output before
 * every launch, the grouped launch (kernels/moe_grouped.cu), every CUDA
 * call checked, the output, the routing
 * and optionally the token sort downloaded, and repeated launches compared
 * bit for bit. Safe on machines without a GPU (QV_ERR_NODEVICE). */
#include "internal/gpu_moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "internal/gpu.h"
#include "qvet/formats.h"
#include "qvet/layout.h"
#include "qvet/reference.h"

/* The kernel's scale modes (gpu_moe.h qv_moe_dev.scale_mode). */
enum { MODE_DEQUANT = 0, MODE_CHANNEL = 1, MODE_TENSOR = 2 };

/* Why the fp8 block-128 kernel does not run v, or NULL when it does. */
static const char *fp8_refusal(const qv_variant *v)
{
    if (v->afmt != QV_FMT_E4M3) return "the grouped fp8 kernel takes e4m3 activations";
    if (v->scale_layout != QV_SCALE_BLOCK || (v->block_k && v->block_k != 128) || (v->block_n && v->block_n != 128) ||
        v->sfmt != QV_FMT_F32)
        return "the grouped fp8 kernel takes f32 weight scales per 128 x 128 block";
    if (v->act_scale != QV_ASCALE_TOKEN_BLOCK) return "the grouped fp8 kernel takes f32 activation scales per token and 128 K";
    if (v->arith.accum != QV_ACC_TC_FP8 || v->arith.promote_nc != 128)
        return "the grouped fp8 kernel promotes its fp8 partial sums to fp32 every 128 K (acc=f8p128)";
    if (v->ofmt != QV_FMT_F16 && v->ofmt != QV_FMT_BF16) return "the grouped fp8 kernel writes f16 or bf16";
    if (v->zero_point != QV_ZP_NONE || v->azp != QV_AZP_NONE || v->bias_fmt != QV_FMT_NONE ||
        v->s2fmt != QV_FMT_NONE || v->act_order || v->arith.out_sat != QV_SAT_NONE ||
        (v->arith.epilogue[0] != QV_EP_END))
        return "the grouped fp8 kernel has no zero points, bias, second-level scales, act_order, epilogue or "
               "saturation";
    return NULL;
}

/* Why the W4A16 kernel does not run v, or NULL when it does. */
static const char *w4a16_refusal(const qv_variant *v)
{
    int h = v->afmt == QV_FMT_F16 || v->afmt == QV_FMT_BF16;
    if (v->wfmt != QV_FMT_U4 || v->zero_point != QV_ZP_NONE)
        return "the grouped kernels take int4 \"q+8\" weights (w=u4b8) without zero points, e2m1 or e4m3 weights";
    if (!h || v->ofmt != v->afmt) return "the grouped W4A16 kernel takes f16 or bf16 activations and the same output";
    if (v->act_scale != QV_ASCALE_NONE || v->azp != QV_AZP_NONE || v->bias_fmt != QV_FMT_NONE ||
        v->s2fmt != QV_FMT_NONE)
        return "the grouped W4A16 kernel has no activation scales, second-level scales or bias";
    if (v->arith.accum != QV_ACC_TC_F32 || v->arith.out_sat != QV_SAT_NONE)
        return "the grouped kernel accumulates on fp16/bf16 tensor cores into fp32 and casts without saturation";
    if (v->scale_layout == QV_SCALE_GROUP || (v->scale_layout == QV_SCALE_CHANNEL && v->arith.dequant == QV_DQ_MUL_RN)) {
        if (v->arith.dequant != QV_DQ_MUL_RN || v->arith.epilogue[0] != QV_EP_END || v->sfmt != v->afmt)
            return "scales in the dequant need dq=rn, no epilogue and scales stored like the activations";
        if (v->scale_layout == QV_SCALE_GROUP && (v->g < 16 || (v->g & (v->g - 1))))
            return "group scales need g a power of two >= 16";
    } else if (v->scale_layout == QV_SCALE_CHANNEL || v->scale_layout == QV_SCALE_TENSOR) {
        if (v->arith.dequant != QV_DQ_EXACT || v->arith.epilogue[0] != QV_EP_MUL_WSCALE ||
            v->arith.epilogue[1] != QV_EP_END)
            return "channel or tensor scales in the epilogue need dq=exact and one fp32 scale";
        if (v->scale_layout == QV_SCALE_CHANNEL ? v->sfmt != v->afmt : v->sfmt != QV_FMT_F32)
            return "epilogue scales are stored like the activations (channel) or as f32 (tensor)";
    } else {
        return "the grouped W4A16 kernel takes group, channel or tensor weight scales";
    }
    if (v->act_order && v->scale_layout != QV_SCALE_GROUP) return "act_order needs group scales";
    return NULL;
}

/* 1 for NVFP4 experts (ue4m3 block scales), 0 for MXFP4 (e8m0). */
static int is_nv(const qv_variant *v) { return v->sfmt == QV_FMT_UE4M3; }

/* Why the FP4 kernel does not run v, or NULL when it does: the dense FP4
 * rows' arithmetic (registry.c FP4_ROW; the kernel is wonly.cu's main loop):
 * e2m1 codes times an e8m0 scale per 32 (MX) or a ue4m3 scale per 16 with an
 * f32 global scale (NV), one rounding to the activation format, fp32
 * tensor-core sums, then the global scale and the bias in fp32. The experts'
 * layout is the spec's own (logical) or the matching Marlin FP4 one (a
 * registry row named as the expert). */
static const char *fp4_refusal(const qv_variant *v)
{
    const int nv = is_nv(v);
    if (v->scale_layout != QV_SCALE_GROUP || (nv ? v->sfmt != QV_FMT_UE4M3 || v->g != 16 : v->sfmt != QV_FMT_E8M0 ||
                                                                                               v->g != 32))
        return "the grouped FP4 kernel takes e8m0 scales per 32 (ws=e8m0/g32) or ue4m3 per 16 (ws=ue4m3/g16)";
    if (nv ? v->s2fmt != QV_FMT_F32 || v->s2_layout != QV_SCALE_TENSOR : v->s2_layout != QV_SCALE_NONE)
        return nv ? "NVFP4 experts need their f32 global scale (ws2=f32/t)" : "MXFP4 experts have no second-level scale";
    if ((v->afmt != QV_FMT_F16 && v->afmt != QV_FMT_BF16) || v->ofmt != v->afmt)
        return "the grouped FP4 kernel takes f16 or bf16 activations and the same output";
    if (v->zero_point != QV_ZP_NONE || v->act_order || v->act_scale != QV_ASCALE_NONE || v->azp != QV_AZP_NONE)
        return "the grouped FP4 kernel has no zero points, act_order or activation scales";
    if (v->bias_fmt != QV_FMT_NONE && v->bias_fmt != QV_FMT_F16 && v->bias_fmt != QV_FMT_BF16 &&
        v->bias_fmt != QV_FMT_F32)
        return "the grouped FP4 kernel takes an f16, bf16 or f32 bias";
    if (v->arith.accum != QV_ACC_TC_F32 || v->arith.out_sat != QV_SAT_NONE)
        return "the grouped kernel accumulates on fp16/bf16 tensor cores into fp32 and casts without saturation";
    const qv_ep_step *ep = v->arith.epilogue;
    int i = 0;
    const int g_ok = !nv || ep[i++] == QV_EP_MUL_WSCALE2;
    const int b_ok = v->bias_fmt == QV_FMT_NONE || ep[i++] == QV_EP_ADD_BIAS;
    if (v->arith.dequant != QV_DQ_MUL_RN || !g_ok || !b_ok || ep[i] != QV_EP_END)
        return "FP4 experts need the block scales in a dq=rn dequant, then the global scale (NV) and the bias in the "
               "fp32 epilogue, in that order";
    const qv_layout packed = nv ? QV_LAYOUT_MARLIN_FP4_NV : QV_LAYOUT_MARLIN_FP4_MX;
    if (v->layout != QV_LAYOUT_LOGICAL && v->layout != packed)
        return "FP4 experts are given by their spec or by a marlin FP4 row of the same format";
    /* layout.h: with bf16 the kernel sums in units of 2^(s_pow2 - 126) of
     * the declared values, whose fp32 sums leave the normal range where the
     * declared ones do not; the marlin-fp4-nv rows declare those units
     * (reference: ref_acc_pow2), a logical spec does not. With f16 the units
     * (2^-7) change no result. */
    if (nv && v->afmt == QV_FMT_BF16 && v->layout != packed)
        return "NVFP4 with bf16 activations sums in the kernel's own units (layout.h); name the row "
               "marlin-nvfp4a16-g16-bf16 or marlin-nvfp4a16-g16-bias-bf16 as the expert, whose arithmetic declares them";
    return NULL;
}

static int is_fp8(const qv_variant *v) { return v->wfmt == QV_FMT_E4M3; }
static int is_fp4(const qv_variant *v) { return v->wfmt == QV_FMT_E2M1; }

qv_status qv_gpu_moe_supported(const qv_moe_spec *s)
{
    const qv_variant *v = s->expert;
    const char *why = is_fp8(v) ? fp8_refusal(v) : is_fp4(v) ? fp4_refusal(v) : w4a16_refusal(v);
    if (!why && (s->rw == QV_RW_IN || s->sgate) && is_fp8(v))
        why = "rw=in and sgate=sigmoid weigh f16/bf16 activations, not e4m3";
    if (!why && s->topk > QV_MOE_GPU_MAX_TOPK) why = "the routing kernel keeps at most 32 choices a token";
    if (!why && s->groups > QV_MOE_GPU_MAX_GROUPS) why = "the routing kernel takes at most 32 expert groups";
    if (why) return qv_fail(QV_ERR_UNSUPPORTED, "%s: %s", s->text, why);
    return QV_OK;
}

static qv_status dev_alloc(qv_gpu_moe *g, size_t bytes, void **dev)
{
    QV_ASSERT(g->n_allocs < (int)(sizeof g->allocs / sizeof g->allocs[0]), "qv_gpu_moe holds a fixed number of buffers");
    QV_CUDA_TRY(cudaMalloc(dev, bytes ? bytes : 1), "cudaMalloc");
    g->allocs[g->n_allocs++] = *dev;
    return QV_OK;
}

static qv_status dev_upload(qv_gpu_moe *g, const void *host, size_t bytes, void **dev)
{
    QV_TRY(dev_alloc(g, bytes, dev));
    QV_CUDA_TRY(cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    return QV_OK;
}

void qv_gpu_moe_free(qv_gpu_moe *g)
{
    for (int i = 0; i < g->n_allocs; i++) cudaFree(g->allocs[i]);
    memset(g, 0, sizeof *g);
}

/* The kernel takes the group of each sorted row from its position (row / g),
 * so every group must hold exactly g rows, as GPTQ's act_order makes them. */
static qv_status check_groups(const qv_problem *w, int x)
{
    int64_t groups = w->k / w->g;
    int64_t *count = calloc((size_t)groups, sizeof *count);
    if (!count) return qv_fail(QV_ERR_NOMEM, "act_order group counts");
    qv_status st = QV_OK;
    for (int64_t i = 0; i < w->k && st == QV_OK; i++) {
        int32_t gi = w->g_idx[i];
        if (gi < 0 || gi >= groups)
            st = qv_fail(QV_ERR_RANGE, "expert %d: g_idx[%lld] = %d is outside [0, %lld)", x, (long long)i, gi,
                         (long long)groups);
        else
            count[gi]++;
    }
    for (int64_t i = 0; i < groups && st == QV_OK; i++)
        if (count[i] != w->g)
            st = qv_fail(QV_ERR_UNSUPPORTED,
                         "expert %d: group %lld holds %lld rows; the grouped kernel needs exactly g=%d rows per group",
                         x, (long long)i, (long long)count[i], w->g);
    free(count);
    return st;
}

/* The experts stacked expert-major, as the grouped launch reads them. */
typedef struct stacked {
    uint32_t *b;         /* (nx, ...) packed weights */
    void *scales;        /* (nx, ...) packed scales */
    int32_t *perm;       /* act_order: (nx, k), else NULL */
    float *gscale;       /* NVFP4: (nx) packed global scales, else NULL */
    void *bias;          /* FP4 with a bias: (nx, n) packed bias codes, else NULL */
    size_t b_bytes, s_bytes, bias_bytes;
} stacked;

static void stacked_free(stacked *k)
{
    free(k->b), free(k->scales), free(k->perm), free(k->gscale), free(k->bias);
    memset(k, 0, sizeof *k);
}

/* The layout each expert is packed in: what a row of the expert's arithmetic
 * would be (Marlin W4 or FP4, or (n, k) e4m3 with its block scales). */
static qv_layout expert_layout(const qv_variant *v)
{
    if (is_fp8(v)) return QV_LAYOUT_PLAIN_NK;
    if (is_fp4(v)) return is_nv(v) ? QV_LAYOUT_MARLIN_FP4_NV : QV_LAYOUT_MARLIN_FP4_MX;
    return QV_LAYOUT_MARLIN_W4;
}

/* Each expert packed (expert_layout), stacked expert-major into k: b,
 * scales, perm (nx, k), the FP4 global scales (nx) and biases (nx, n). */
static qv_status pack_experts(const qv_moe_problem *p, stacked *k)
{
    const qv_variant *ve = p->s->expert;
    qv_variant pv = *ve;
    pv.layout = expert_layout(ve);
    int nx = p->e_local + p->shared;
    memset(k, 0, sizeof *k);
    qv_status st = QV_OK;
    for (int x = 0; x < nx && st == QV_OK; x++) {
        qv_problem w = p->w[x];
        w.v = &pv;
        if (ve->act_order) {
            st = check_groups(&w, x);
            if (st != QV_OK) break;
        }
        qv_packed pk;
        st = qv_pack(&w, &pk);
        if (st != QV_OK) break;
        size_t bb = (size_t)(pk.b_rows * pk.b_cols) * sizeof(int32_t);
        size_t sb = (size_t)(pk.s_rows * pk.s_cols) * pk.s_elem;
        size_t biasb = (size_t)pk.bias_cols * pk.bias_elem;
        if (!x) {
            k->b = malloc(bb * (size_t)nx);
            k->scales = malloc(sb * (size_t)nx);
            if (ve->act_order) k->perm = malloc(sizeof(int32_t) * (size_t)(p->k * nx));
            if (pk.s2_cols && qv_layout_is_fp4(pv.layout)) k->gscale = malloc(sizeof(float) * (size_t)nx);
            if (biasb) k->bias = malloc(biasb * (size_t)nx);
            k->b_bytes = bb * (size_t)nx;
            k->s_bytes = sb * (size_t)nx;
            k->bias_bytes = biasb * (size_t)nx;
            if (!k->b || !k->scales || (ve->act_order && !k->perm) ||
                (pk.s2_cols && qv_layout_is_fp4(pv.layout) && !k->gscale) || (biasb && !k->bias))
                st = qv_fail(QV_ERR_NOMEM, "stacking %d experts", nx);
        }
        if (st == QV_OK) {
            memcpy((char *)k->b + bb * (size_t)x, pk.b, bb);
            memcpy((char *)k->scales + sb * (size_t)x, pk.scales, sb);
            if (ve->act_order) memcpy(k->perm + p->k * x, pk.perm, sizeof(int32_t) * (size_t)p->k);
            if (k->gscale) k->gscale[x] = ((const float *)pk.scales2)[0];
            if (k->bias) memcpy((char *)k->bias + biasb * (size_t)x, pk.bias, biasb);
        }
        qv_packed_destroy(&pk);
    }
    if (st != QV_OK) stacked_free(k);
    return st;
}

qv_status qv_gpu_moe_upload(const qv_moe_problem *p, const qv_launch_opts *opts, qv_gpu_moe *g)
{
    memset(g, 0, sizeof *g);
    const qv_moe_spec *s = p->s;
    const qv_variant *v = s->expert;
    QV_TRY(qv_gpu_moe_supported(s));
    qv_moe_dev *d = &g->d;
    d->t = (int)p->t, d->n = (int)p->n, d->k = (int)p->k, d->e = p->e, d->e_local = p->e_local;
    d->shared = p->shared, d->topk = s->topk, d->route = (int)s->route, d->rsf = s->rsf;
    d->groups = s->groups, d->gtopk = s->gtopk, d->gscore = (int)s->gscore, d->gmask = (int)s->gmask, d->eps = s->eps;
    d->logit_fmt = (int)s->logit_fmt;
    d->kind = is_fp8(v) ? QV_MOE_FP8_B128 : !is_fp4(v) ? QV_MOE_W4A16 : is_nv(v) ? QV_MOE_NVFP4 : QV_MOE_MXFP4;
    d->bf16 = v->afmt == QV_FMT_BF16;
    d->out_bf16 = v->ofmt == QV_FMT_BF16;
    d->act_order = v->act_order;
    d->bias_fmt = (int)v->bias_fmt;
    d->rw = (int)s->rw, d->sum = (int)s->sum;
    d->sgate = s->sgate && p->shared > 0;
    if (d->kind == QV_MOE_FP8_B128) {
        d->scale_mode = MODE_DEQUANT;
    } else if (is_fp4(v)) {
        /* layout.h: FP4 scales are always per group, in the GROUP64_FP8
         * order, a single group of K included */
        d->scale_mode = MODE_DEQUANT;
        d->g_shift = is_nv(v) ? 0 : 1;
    } else if (v->scale_layout == QV_SCALE_GROUP && p->k != v->g) {
        d->scale_mode = MODE_DEQUANT;
        for (int q = v->g / 16; q > 1; q >>= 1) d->g_shift++;
    } else if (v->scale_layout == QV_SCALE_GROUP || v->arith.dequant == QV_DQ_MUL_RN) {
        /* one group of K: stored in the channel order (layout.h) */
        d->scale_mode = MODE_DEQUANT;
        d->g_shift = 30;
        d->grp_single = 1;
    } else {
        d->scale_mode = v->scale_layout == QV_SCALE_CHANNEL ? MODE_CHANNEL : MODE_TENSOR;
    }
    QV_TRY(qv_moe_pick(d, opts));
    if (p->t > 0x7fffffff || p->n > 0x7fffffff || p->k > 0x7fffffff)
        return qv_fail(QV_ERR_SHAPE, "grouped GEMM: t, n and k must fit int32");

    stacked k;
    QV_TRY(pack_experts(p, &k));
    void *dv;
    qv_status st;
#define UP(host, bytes, field)                                                                                        \
    do {                                                                                                              \
        st = dev_upload(g, (host), (bytes), &dv);                                                                     \
        if (st != QV_OK) goto fail;                                                                                   \
        d->field = dv;                                                                                                \
    } while (0)
    UP(p->logits, (size_t)(p->t * p->e) * qv_fmt_storage_bytes(s->logit_fmt), logits);
    UP(p->expert_map, sizeof(int32_t) * (size_t)p->e, expert_map);
    if (s->sbias) UP(p->score_bias, sizeof(float) * (size_t)p->e, score_bias);
    UP(p->a, (size_t)(p->t * p->k) * qv_fmt_storage_bytes(v->afmt), a);
    if (d->kind == QV_MOE_FP8_B128) UP(p->a_scale, sizeof(float) * (size_t)(p->t * ((p->k + 127) / 128)), a_scale);
    UP(k.b, k.b_bytes, b);
    UP(k.scales, k.s_bytes, scales);
    if (k.perm) UP(k.perm, sizeof(int32_t) * (size_t)(p->k * (p->e_local + p->shared)), perm);
    if (k.gscale) UP(k.gscale, sizeof(float) * (size_t)(p->e_local + p->shared), gscale);
    if (k.bias) UP(k.bias, k.bias_bytes, bias);
    if (d->sgate) UP(p->shared_gate, (size_t)(p->shared * p->k) * qv_fmt_storage_bytes(v->afmt), shared_gate);
#undef UP
    g->out_bytes = (size_t)(p->t * p->n) * 2;
    st = dev_alloc(g, g->out_bytes + QV_GPU_GUARD_BYTES, &d->out);
    if (st != QV_OK) goto fail;
    qv_moe_ws_plan(d, d->mb, &g->ws);
    st = dev_alloc(g, g->ws.bytes, &d->workspace);
    if (st != QV_OK) goto fail;
    stacked_free(&k);
    return QV_OK;
fail:
    stacked_free(&k);
    qv_gpu_moe_free(g);
    return st;
}

/* Downloads the device's token sort into so (moe.h's form). */
static qv_status download_sort(const qv_gpu_moe *g, qv_moe_sorted *so, int *count_bad)
{
    memset(so, 0, sizeof *so);
    const qv_moe_dev *d = &g->d;
    int nx = d->e_local + d->shared;
    const unsigned char *ws = d->workspace;
    int *start = malloc(sizeof(int) * ((size_t)nx + 1));
    so->expert_start = malloc(sizeof(int64_t) * ((size_t)nx + 1));
    if (!start || !so->expert_start) {
        free(start);
        qv_moe_sorted_destroy(so);
        return qv_fail(QV_ERR_NOMEM, "token sort download");
    }
    cudaError_t rc = cudaMemcpy(start, ws + g->ws.expert_start, sizeof(int) * ((size_t)nx + 1), cudaMemcpyDeviceToHost);
    int total = rc == cudaSuccess ? start[nx] : 0;
    for (int x = 0; x <= nx; x++) so->expert_start[x] = start[x];
    free(start);
    so->block = g->ws.block;
    so->n_slots = total;
    so->slot = malloc(sizeof(int32_t) * (size_t)(total ? total : 1));
    so->block_expert = malloc(sizeof(int32_t) * (size_t)(total ? total / so->block : 1));
    if (rc == cudaSuccess && (!so->slot || !so->block_expert)) {
        qv_moe_sorted_destroy(so);
        return qv_fail(QV_ERR_NOMEM, "token sort download");
    }
    if (rc == cudaSuccess && total)
        rc = cudaMemcpy(so->slot, ws + g->ws.slot, sizeof(int32_t) * (size_t)total, cudaMemcpyDeviceToHost);
    if (rc == cudaSuccess && total)
        rc = cudaMemcpy(so->block_expert, ws + g->ws.block_expert, sizeof(int32_t) * (size_t)(total / so->block),
                        cudaMemcpyDeviceToHost);
    /* each expert's pair count (the workspace's, which callers such as the
     * bench read) against the used slots of its segment */
    int *count = rc == cudaSuccess ? malloc(sizeof(int) * (size_t)(nx ? nx : 1)) : NULL;
    if (rc == cudaSuccess && !count) {
        qv_moe_sorted_destroy(so);
        return qv_fail(QV_ERR_NOMEM, "token sort download");
    }
    if (rc == cudaSuccess && nx) rc = cudaMemcpy(count, ws + g->ws.counts, sizeof(int) * (size_t)nx, cudaMemcpyDeviceToHost);
    *count_bad = -1;
    for (int x = 0; rc == cudaSuccess && x < nx && *count_bad < 0; x++) {
        int used = 0;
        for (int64_t i = so->expert_start[x]; i < so->expert_start[x + 1] && i < total; i++) used += so->slot[i] >= 0;
        if (count[x] != used) *count_bad = x;
    }
    free(count);
    if (rc != cudaSuccess) {
        qv_moe_sorted_destroy(so);
        return qv_cuda_fail((int)rc, "token sort download", __FILE__, __LINE__);
    }
    return QV_OK;
}

/* Poison, launch, wait, download the output, ids and weights; count guard
 * bytes that lost their poison. */
static qv_status launch_once(qv_gpu_moe *g, qv_fmt of, void *out, int32_t *ids, float *weights, double *ms,
                             int64_t *guard_writes)
{
    const qv_moe_dev *d = &g->d;
    const int64_t count = (int64_t)d->t * d->n;
    QV_TRY(qv_gpu_poison_guarded(d->out, of, count));
    cudaEvent_t e0, e1;
    QV_CUDA_TRY(cudaEventCreate(&e0), "cudaEventCreate");
    QV_CUDA_TRY(cudaEventCreate(&e1), "cudaEventCreate");
    QV_CUDA_TRY(cudaEventRecord(e0, NULL), "cudaEventRecord");
    qv_status st = qv_moe_launch(d, NULL);
    if (st != QV_OK) {
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        return st;
    }
    QV_CUDA_TRY(cudaEventRecord(e1, NULL), "cudaEventRecord");
    QV_CUDA_TRY(cudaDeviceSynchronize(), "routed GEMM execution");
    float f = 0;
    QV_CUDA_TRY(cudaEventElapsedTime(&f, e0, e1), "cudaEventElapsedTime");
    *ms = f;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    const unsigned char *ws = d->workspace;
    size_t nk = sizeof(int32_t) * (size_t)d->t * (size_t)d->topk;
    QV_CUDA_TRY(cudaMemcpy(out, d->out, g->out_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy output to host");
    QV_CUDA_TRY(cudaMemcpy(ids, ws + g->ws.ids, nk, cudaMemcpyDeviceToHost), "cudaMemcpy ids to host");
    QV_CUDA_TRY(cudaMemcpy(weights, ws + g->ws.weights, nk, cudaMemcpyDeviceToHost), "cudaMemcpy weights to host");
    return qv_gpu_guard_count(d->out, of, count, guard_writes);
}

/* The first of `count` elements of es bytes where a and b differ, -1 if none. */
static int64_t first_diff(const void *a, const void *b, int64_t count, size_t es)
{
    for (int64_t i = 0; i < count; i++)
        if (memcmp((const char *)a + (size_t)i * es, (const char *)b + (size_t)i * es, es)) return i;
    return -1;
}

qv_status qv_gpu_moe_run(const qv_moe_problem *p, const qv_launch_opts *opts, int repeat, void *out, int32_t *ids,
                         float *weights, qv_moe_sorted *sorted, qv_gpu_moe_stats *st)
{
    qv_gpu_moe_stats tmp;
    if (!st) st = &tmp;
    memset(st, 0, sizeof *st);
    st->first_diff = -1;
    st->count_bad = -1;
    if (sorted) memset(sorted, 0, sizeof *sorted);
    QV_TRY(qv_gpu_moe_supported(p->s));
    QV_TRY(qv_moe_problem_check(p));
    if (!qv_gpu_info_get(NULL)) return qv_fail(QV_ERR_NODEVICE, "no CUDA device");
    qv_gpu_moe g;
    QV_TRY(qv_gpu_moe_upload(p, opts, &g));
    st->block = g.ws.block;
    st->pairs = g.d.pairs;
    st->fit = g.d.fit;
    st->wg = g.d.wg;
    int kt_part;
    st->parts = qv_moe_parts(&g.d, &kt_part);
    qv_fmt of = p->s->expert->ofmt;
    size_t nk = (size_t)(p->t * p->s->topk);
    size_t ob = g.out_bytes;
    int32_t *ids1 = malloc(sizeof(int32_t) * nk * 2);
    float *w1 = malloc(sizeof(float) * nk * 2);
    void *out2 = repeat > 1 ? malloc(ob) : NULL;
    qv_status s = QV_OK;
    if (!ids1 || !w1 || (repeat > 1 && !out2)) s = qv_fail(QV_ERR_NOMEM, "routed run buffers");
    if (s == QV_OK) s = launch_once(&g, of, out, ids1, w1, &st->ms, &st->guard_writes);
    if (s == QV_OK) st->launches = 1;
    for (int r = 1; r < repeat && s == QV_OK && !st->nondeterministic; r++) {
        s = launch_once(&g, of, out2, ids1 + nk, w1 + nk, &st->ms, &st->guard_writes);
        st->launches++;
        if (s != QV_OK) break;
        if (memcmp(out2, out, ob) || memcmp(ids1, ids1 + nk, sizeof(int32_t) * nk) ||
            memcmp(w1, w1 + nk, sizeof(float) * nk)) {
            st->nondeterministic = 1;
            st->first_diff = first_diff(out2, out, p->t * p->n, 2);
        }
    }
    if (s == QV_OK && ids) memcpy(ids, ids1, sizeof(int32_t) * nk);
    if (s == QV_OK && weights) memcpy(weights, w1, sizeof(float) * nk);
    if (s == QV_OK && sorted) s = download_sort(&g, sorted, &st->count_bad);
    free(ids1), free(w1), free(out2);
    qv_gpu_moe_free(&g);
    return s;
}

/* ---- a device plugin's routed launch ---------------------------------------------------- */

/* p's buffers on the device for a plugin taking device pointers: `p` and
 * its expert array `w` are host structs (the plugin reads the shape and the
 * spec from them) whose buffer pointers lead into one device allocation;
 * out (with its guard), ids and weights are device buffers too. */
typedef struct ext_mirror {
    qv_moe_problem p;
    qv_problem *w;
    void *arena;
    void *out;
    int32_t *ids;
    float *weights;
    size_t out_bytes;
} ext_mirror;

/* Each buffer of the mirror starts 256-byte aligned. */
static size_t ext_up(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

/* One buffer of the mirror: where its host bytes are and which mirror field
 * receives its device address. */
typedef struct ext_buf {
    const void *host;
    size_t bytes;
    void **field;
} ext_buf;

static void ext_free(ext_mirror *m)
{
    if (m->arena) cudaFree(m->arena);
    if (m->out) cudaFree(m->out);
    free(m->w);
    memset(m, 0, sizeof *m);
}

/* The buffers of one weight problem (problem.h's logical arrays, as plugin.h
 * lists them for a spec) into bufs[*n...]. */
static void ext_weight_bufs(const qv_problem *w, qv_problem *mw, ext_buf *bufs, int *n)
{
    const qv_variant *v = w->v;
    size_t nz = (size_t)(qv_problem_zero_rows(w) * qv_problem_zero_cols(w));
#define ADD(ptr, len, fld) bufs[(*n)++] = (ext_buf){(ptr), (ptr) ? (len) : 0, (void **)&mw->fld}
    ADD(w->q, (size_t)(w->k * w->n) * qv_fmt_storage_bytes(v->wfmt), q);
    ADD(w->scales, (size_t)(qv_problem_scale_rows(w) * qv_problem_scale_cols(w)) * qv_fmt_storage_bytes(v->sfmt),
        scales);
    ADD(w->scales2, (size_t)qv_problem_scale2_count(w) * sizeof(float), scales2);
    ADD(w->zeros, nz, zeros);
    ADD(w->zeros_f, nz * sizeof(float), zeros_f);
    ADD(w->bias, (size_t)w->n * sizeof(float), bias);
    ADD(w->g_idx, (size_t)w->k * sizeof(int32_t), g_idx);
#undef ADD
}

/* Uploads p into m: every input buffer through one host staging copy and
 * one device allocation, then out + guard, ids and weights. */
static qv_status ext_upload(const qv_moe_problem *p, ext_mirror *m)
{
    memset(m, 0, sizeof *m);
    const qv_variant *v = p->s->expert;
    const int nx = p->e_local + p->shared;
    m->p = *p;
    m->w = malloc(sizeof(qv_problem) * (size_t)(nx > 0 ? nx : 1));
    ext_buf *bufs = malloc(sizeof(ext_buf) * (size_t)(7 * nx + 7));
    if (!m->w || !bufs) {
        free(bufs);
        ext_free(m);
        return qv_fail(QV_ERR_NOMEM, "routed plugin mirror of %d experts", nx);
    }
    memcpy(m->w, p->w, sizeof(qv_problem) * (size_t)nx);
    m->p.w = m->w;
    /* the activations' scale counts are a (t, n, k) problem's */
    qv_problem act = {.v = v, .m = p->t, .n = p->n, .k = p->k, .g = v->g};
    int n = 0;
#define ADD(ptr, len, fld) bufs[n++] = (ext_buf){(ptr), (ptr) ? (len) : 0, (void **)&m->p.fld}
    ADD(p->logits, (size_t)(p->t * p->e) * qv_fmt_storage_bytes(p->s->logit_fmt), logits);
    ADD(p->expert_map, (size_t)p->e * sizeof(int32_t), expert_map);
    ADD(p->score_bias, (size_t)p->e * sizeof(float), score_bias);
    ADD(p->a, (size_t)(p->t * p->k) * qv_fmt_storage_bytes(v->afmt), a);
    ADD(p->a_scale, (size_t)qv_problem_ascale_count(&act) * sizeof(float), a_scale);
    ADD(p->azp, (size_t)(v->azp == QV_AZP_TOKEN ? p->t : 1) * sizeof(int32_t), azp);
    ADD(p->shared_gate, (size_t)(p->shared * p->k) * qv_fmt_storage_bytes(v->afmt), shared_gate);
#undef ADD
    for (int i = 0; i < nx; i++) ext_weight_bufs(&p->w[i], &m->w[i], bufs, &n);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += ext_up(bufs[i].bytes);
    unsigned char *stage = malloc(total ? total : 1);
    qv_status st = stage ? QV_OK : qv_fail(QV_ERR_NOMEM, "routed plugin staging buffer of %zu bytes", total);
    if (st == QV_OK && cudaMalloc(&m->arena, total ? total : 1) != cudaSuccess)
        st = qv_cuda_fail((int)cudaGetLastError(), "cudaMalloc routed plugin inputs", __FILE__, __LINE__);
    size_t off = 0;
    for (int i = 0; st == QV_OK && i < n; i++) {
        if (!bufs[i].bytes) {
            *bufs[i].field = NULL;
            continue;
        }
        memcpy(stage + off, bufs[i].host, bufs[i].bytes);
        *bufs[i].field = (unsigned char *)m->arena + off;
        off += ext_up(bufs[i].bytes);
    }
    if (st == QV_OK && cudaMemcpy(m->arena, stage, total, cudaMemcpyHostToDevice) != cudaSuccess)
        st = qv_cuda_fail((int)cudaGetLastError(), "cudaMemcpy routed plugin inputs", __FILE__, __LINE__);
    free(stage);
    free(bufs);
    /* out, its guard, then ids and weights, each part aligned */
    m->out_bytes = (size_t)(p->t * p->n) * qv_fmt_storage_bytes(v->ofmt);
    size_t ob = ext_up(m->out_bytes + QV_GPU_GUARD_BYTES);
    size_t nk = (size_t)(p->t * p->s->topk), ib = ext_up(nk * sizeof(int32_t));
    if (st == QV_OK && cudaMalloc(&m->out, ob + ib + nk * sizeof(float) + 1) != cudaSuccess)
        st = qv_cuda_fail((int)cudaGetLastError(), "cudaMalloc routed plugin outputs", __FILE__, __LINE__);
    if (st == QV_OK) {
        m->ids = (int32_t *)((unsigned char *)m->out + ob);
        m->weights = (float *)((unsigned char *)m->out + ob + ib);
    }
    if (st != QV_OK) ext_free(m);
    return st;
}

/* Poison the output (guard included), ids (-1) and weights (NaN); launch;
 * synchronize; download; count guard bytes that lost their poison. */
static qv_status ext_launch_once(ext_mirror *m, int (*launch)(const char *, const qv_moe_launch_args *),
                                 const char *variant, void *out,
                                 int32_t *ids, float *weights, int *rc, int64_t *guard_writes)
{
    const qv_fmt of = m->p.s->expert->ofmt;
    const size_t nk = (size_t)(m->p.t * m->p.s->topk);
    const int64_t count = m->p.t * m->p.n;
    QV_TRY(qv_gpu_poison_guarded(m->out, of, count));
    QV_CUDA_TRY(cudaMemset(m->ids, 0xff, nk * sizeof(int32_t)), "cudaMemset ids");
    QV_CUDA_TRY(cudaMemset(m->weights, 0xff, nk * sizeof(float)), "cudaMemset weights"); /* a NaN */
    const qv_moe_launch_args a = {.p = &m->p, .out = m->out, .topk_ids = m->ids, .topk_weights = m->weights};
    *rc = launch(variant, &a);
    QV_CUDA_TRY(cudaGetLastError(), "routed plugin launch");
    QV_CUDA_TRY(cudaDeviceSynchronize(), "routed plugin execution");
    if (*rc) return QV_OK;
    QV_CUDA_TRY(cudaMemcpy(out, m->out, m->out_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy output to host");
    QV_CUDA_TRY(cudaMemcpy(ids, m->ids, nk * sizeof(int32_t), cudaMemcpyDeviceToHost), "cudaMemcpy ids to host");
    QV_CUDA_TRY(cudaMemcpy(weights, m->weights, nk * sizeof(float), cudaMemcpyDeviceToHost),
                "cudaMemcpy weights to host");
    return qv_gpu_guard_count(m->out, of, count, guard_writes);
}

qv_status qv_gpu_moe_run_ext(const qv_moe_problem *p,
                             int (*launch)(const char *variant, const qv_moe_launch_args *args), const char *variant,
                             int repeat,
                             void *out, int32_t *ids, float *weights, int *rc, qv_gpu_moe_stats *st)
{
    memset(st, 0, sizeof *st);
    st->first_diff = -1;
    st->count_bad = -1;
    *rc = 0;
    QV_TRY(qv_moe_problem_check(p));
    if (!qv_gpu_info_get(NULL)) return qv_fail(QV_ERR_NODEVICE, "no CUDA device");
    ext_mirror m;
    QV_TRY(ext_upload(p, &m));
    const size_t nk = (size_t)(p->t * p->s->topk), ob = m.out_bytes;
    unsigned char *again = malloc(ob + nk * (sizeof(int32_t) + sizeof(float)) + 1);
    qv_status s = again ? QV_OK : qv_fail(QV_ERR_NOMEM, "routed plugin run buffers");
    if (s == QV_OK) s = ext_launch_once(&m, launch, variant, out, ids, weights, rc, &st->guard_writes);
    if (s == QV_OK && !*rc) st->launches = 1;
    for (int r = 1; r < repeat && s == QV_OK && !*rc && !st->nondeterministic; r++) {
        int32_t *ids2 = (int32_t *)(again + ob);
        float *w2 = (float *)(again + ob + nk * sizeof(int32_t));
        s = ext_launch_once(&m, launch, variant, again, ids2, w2, rc, &st->guard_writes);
        if (s != QV_OK || *rc) break;
        st->launches++;
        if (memcmp(again, out, ob) || memcmp(ids2, ids, nk * sizeof(int32_t)) ||
            memcmp(w2, weights, nk * sizeof(float))) {
            st->nondeterministic = 1;
            st->first_diff = first_diff(again, out, p->t * p->n, qv_fmt_storage_bytes(p->s->expert->ofmt));
        }
    }
    free(again);
    ext_free(&m);
    return s;
}
