/* model.c: the CPU model of every registry row and spec (reference.h:
 * ref_model_run), a plain C rendering of the declared arithmetic:
 *   - dequantization with the declared rounding (ref_operands.h);
 *   - accumulation: INT32 exactly (int64, equal to int32 since the registry
 *     proves no overflow); TC_F32 as one fp32 sum in K order (the products of
 *     fp16/bf16/fp8/int codes are exact in fp32, so each step is one RN addition;
 *     split-K fp32 reduction is one more order of the same additions); FMA_F32 as
 *     fmaf; TC_FP8 as an accumulator of acc_bits significant bits, promoted into
 *     an fp32 sum every promote_nc products (never when 0): below 24 bits it
 *     truncates after every product, at 24 bits each addition is one fp32 RN
 *     rounding;
 *   - scales that vary along K and multiply partial sums (qv_spec_segment:
 *     group or block weight scales with dq=exact, per-128-K activation scales):
 *     each segment summed as above (an int32 partial converted to fp32), times
 *     its scale product (scale_a * scale_b first, in fp32), added into an fp32
 *     total;
 *   - a kernel reading marlin-fp4-nv sums in its own units (ref_acc_pow2:
 *     every weight 2^e times the declared one, the global scale 2^-e times),
 *     so the model does too: the results are the declared ones but where
 *     the fp32 partial sums fall below 2^-126 in those units;
 *   - the epilogue steps in order, each an fp32 RN operation (a bias too);
 *   - the output cast: RNE, then the declared saturation; an int32 output is
 *     the exact sum. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "ref_operands.h"

#ifdef QV_MUTANT_cpu_k_tail_dropped
/* Mutant (class 11, vLLM #13227, llama.cpp #8311): the dot products stop at
 * the last whole 64-wide K tile and drop the tail. */
#define K_END(k) ((k) - (k) % 64)
#else
#define K_END(k) (k)
#endif

/* The fp32 sum of a[kk]*w[kk] in K order; products are exact in fp32 for every
 * TC_F32 row (<= 22 significant bits), so a*w + acc is one RN addition. */
/* a: (k) fp32 activations; w0..w3: (k) fp32 weights of four columns; acc: (4) out. */
static void dot4_f32(const float *a, const float *w0, const float *w1, const float *w2, const float *w3,
                     int64_t k, float acc[4])
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t kk = 0; kk < K_END(k); kk++) {
        float av = a[kk];
        s0 += av * w0[kk];
        s1 += av * w1[kk];
        s2 += av * w2[kk];
        s3 += av * w3[kk];
    }
    acc[0] = s0;
    acc[1] = s1;
    acc[2] = s2;
    acc[3] = s3;
}

/* a, w: (k) fp32 operands, contiguous along K. */
static float dot_f32(const float *a, const float *w, int64_t k, int fused)
{
#ifdef QV_MUTANT_cpu_splitk_f16_reduce
    /* Mutant (class 4, vLLM #6795): two K slices, each summed in fp32, reduced in fp16. */
    float lo = 0, hi = 0;
    for (int64_t kk = 0; kk < k / 2; kk++) lo = fused ? fmaf(a[kk], w[kk], lo) : lo + a[kk] * w[kk];
    for (int64_t kk = k / 2; kk < k; kk++) hi = fused ? fmaf(a[kk], w[kk], hi) : hi + a[kk] * w[kk];
    return (float)ref_round_to(QV_FMT_F16, ref_round_to(QV_FMT_F16, lo, 0) + ref_round_to(QV_FMT_F16, hi, 0), 0);
#else
    float s = 0;
    for (int64_t kk = 0; kk < K_END(k); kk++) s = fused ? fmaf(a[kk], w[kk], s) : s + a[kk] * w[kk];
    return s;
#endif
}

/* qv_trunc_bits(x, bits) for 1 <= bits < 53, a normal x's low 53 - bits
 * significand bits cleared here (the fp8 sum below truncates after every
 * product); zero, subnormals and non-finite values go to qv_trunc_bits. */
static inline double trunc_bits(double x, int bits)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    const uint64_t e = u >> 52 & 0x7ff;
    if (e == 0 || e == 0x7ff) return qv_trunc_bits(x, bits);
    u &= ~((UINT64_C(1) << (53 - bits)) - 1);
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The fp8 tensor-core sum of products k0..k1-1 with promotion (see the file
 * comment): blocks of nc products in an acc_bits accumulator, each promoted
 * into an fp32 sum. a: activation values of row i; wt: weight values of
 * column j (exact in fp32, so each product is exact in a double). */
static float sum_fp8(const qv_arith *ar, const double *a, const float *wt, int64_t k0, int64_t k1, int64_t nc,
                     int bits)
{
    float acc = 0;
    for (int64_t b0 = k0; b0 < k1; b0 += nc) {
        int64_t b1 = b0 + nc < k1 ? b0 + nc : k1;
        float pf;
        if (bits >= 24) {
            /* An fp32-wide accumulator: each exact e4m3 product (<= 8 significant
             * bits, so exact in fp32) is added with one fp32 RN rounding. */
            float part = 0;
            for (int64_t kk = b0; kk < b1; kk++) part = part + (float)(a[kk] * (double)wt[kk]);
            pf = part;
        } else {
            /* A narrower accumulator truncates after each addition; the partial
             * stays exact in a double (< 24-bit values plus e4m3 products). */
            double part = 0;
            for (int64_t kk = b0; kk < b1; kk++) part = trunc_bits(part + a[kk] * (double)wt[kk], bits);
            pf = (float)part; /* exact: bits < 24 */
        }
        acc = acc + pf;
    }
    (void)ar;
    return acc;
}

/* sum_fp8 on four columns w[0..3] at once: the same operations per column
 * in the same order (so the same bits), four independent chains for the
 * processor to overlap. */
static void sum_fp8_4(const double *a, const float *const w[4], int64_t k0, int64_t k1, int64_t nc, int bits,
                      float out[4])
{
    float acc[4] = {0, 0, 0, 0};
    for (int64_t b0 = k0; b0 < k1; b0 += nc) {
        int64_t b1 = b0 + nc < k1 ? b0 + nc : k1;
        if (bits >= 24) {
            float part[4] = {0, 0, 0, 0};
            for (int64_t kk = b0; kk < b1; kk++) {
                const double av = a[kk];
                for (int t = 0; t < 4; t++) part[t] = part[t] + (float)(av * (double)w[t][kk]);
            }
            for (int t = 0; t < 4; t++) acc[t] = acc[t] + part[t];
        } else {
            double part[4] = {0, 0, 0, 0};
            for (int64_t kk = b0; kk < b1; kk++) {
                const double av = a[kk];
                for (int t = 0; t < 4; t++) part[t] = trunc_bits(part[t] + av * (double)w[t][kk], bits);
            }
            for (int t = 0; t < 4; t++) acc[t] = acc[t] + (float)part[t];
        }
    }
    for (int t = 0; t < 4; t++) out[t] = acc[t];
}

/* The promotion interval and accumulator width of a TC_FP8 sum over k0..k1-1. */
static void fp8_accum(const qv_arith *ar, int64_t k0, int64_t k1, int64_t *nc, int *bits)
{
    *nc = ar->promote_nc > 0 ? ar->promote_nc : k1 - k0;
    *bits = ar->acc_bits > 0 ? ar->acc_bits : 14;
#ifdef QV_MUTANT_cpu_fp8_no_promotion
    /* Mutant (class 16, DeepSeek-V3 §3.3.2): no promotion; the whole K (or
     * scale block) stays in the ~14-bit tensor-core accumulator. */
    *nc = k1 - k0;
    *bits = 14;
#endif
}

/* The model's accumulation of products k0..k1-1 of row a (values, and as
 * fp32 in af) and column wf, as an fp32 value; for int32 accumulators also
 * the sum's exact value in *isum. */
static float sum_range(const qv_variant *v, const double *a, const float *af, const float *wf, int64_t k0, int64_t k1,
                       int64_t *isum)
{
    const qv_arith *ar = &v->arith;
    switch (ar->accum) {
    case QV_ACC_INT32: {
        int64_t s = 0;
        for (int64_t kk = k0; kk < k1; kk++) s += (int64_t)a[kk] * (int64_t)wf[kk];
        *isum = s;
        return (float)s; /* int -> fp32 RN (C's conversion rounds to nearest) */
    }
    case QV_ACC_TC_FP8: {
        int64_t nc;
        int bits;
        fp8_accum(ar, k0, k1, &nc, &bits);
        return sum_fp8(ar, a, wf, k0, k1, nc, bits);
    }
    default:
        return dot_f32(af + k0, wf + k0, k1 - k0, ar->accum == QV_ACC_FMA_F32);
    }
}

/* sum_range on four columns w[0..3] of a TC_F32 or TC_FP8 row, the same bits
 * per column. */
static void sum_range4(const qv_variant *v, const double *a, const float *af, const float *const w[4], int64_t k0,
                       int64_t k1, float out[4])
{
    if (v->arith.accum == QV_ACC_TC_FP8) {
        int64_t nc;
        int bits;
        fp8_accum(&v->arith, k0, k1, &nc, &bits);
        sum_fp8_4(a, w, k0, k1, nc, bits, out);
    } else {
        dot4_f32(af + k0, w[0] + k0, w[1] + k0, w[2] + k0, w[3] + k0, k1 - k0, out);
    }
}

/* The scales that multiply segment sg's partial of element (i, j), in fp32:
 * the activation's per-128-K scale times the weight's group or block scale,
 * product first (each exact in fp32). */
static float segment_scale(const qv_problem *p, int64_t i, int64_t j, int64_t kk)
{
    const qv_variant *v = p->v;
    float sa = v->act_scale == QV_ASCALE_TOKEN_BLOCK ? p->a_scale[(kk / 128) * p->m + i] : 1.0f;
    float sw = 1.0f;
    qv_scale_layout l = v->scale_layout;
    if (l == QV_SCALE_GROUP || l == QV_SCALE_GROUP_CHANNEL) {
        sw = (float)qv_problem_scale(p, kk, j);
    } else if (l == QV_SCALE_BLOCK) {
        int64_t bk = v->block_k > 0 ? v->block_k : 128, bn = v->block_n > 0 ? v->block_n : 128;
        int64_t nb = (p->n + bn - 1) / bn;
#ifdef QV_MUTANT_cpu_block_scale_n_floor
        /* Mutant (class 12, FBGEMM #6159, vLLM #49596): the N block count by floor
         * division drops the trailing partial block (wrong weight-scale row stride). */
        nb = p->n / bn;
#endif
        int64_t idx = (kk / bk) * nb + j / bn;
        uint32_t c = 0;
        size_t es = qv_fmt_storage_bytes(v->sfmt);
        memcpy(&c, (const char *)p->scales + (size_t)idx * es, es); /* little-endian */
        sw = (float)qv_decode(v->sfmt, c);
    }
    return sa * sw;
}

/* The epilogue steps in order, in fp32, from the accumulated value. */
static float epilogue(const qv_variant *v, const ref_operands *o, int64_t i, int64_t j, float x)
{
#ifdef QV_MUTANT_cpu_epilogue_f16_cast_first
    /* Mutant (class 7, vLLM #33972): the accumulator is cast to the f16 output before the scales. */
    if (v->ofmt == QV_FMT_F16) x = (float)ref_round_to(QV_FMT_F16, x, 0);
#endif
    for (int st = 0; st < QV_EP_MAX && v->arith.epilogue[st] != QV_EP_END; st++) {
        switch (v->arith.epilogue[st]) {
        case QV_EP_MUL_WSCALE: x = x * (float)o->col_s1[j]; break;
        case QV_EP_MUL_WSCALE2:
#ifdef QV_MUTANT_cpu_fp4_global_scale_cast_first
            /* Mutant (class 22, vLLM #33972, #37135): the accumulator cast to
             * the 16-bit output before the fp32 global scale (NVFP4: in the
             * kernel's units, 2^-7 (f16) or 2^-116..2^-119 (bf16) of the
             * declared sum: f16 overflows to Inf, bf16 keeps 8 bits). */
            if (v->s2_layout == QV_SCALE_TENSOR) x = (float)ref_round_to(v->ofmt, x, 0);
#endif
            x = x * (float)o->col_s2[j];
            break;
#ifdef QV_MUTANT_cpu_token_scale_per_channel
        /* Mutant (class 19): the per-token scale indexed by the output column (wrapped to M). */
        case QV_EP_MUL_ASCALE: x = x * (float)o->row_s[j % o->m]; break;
#else
        case QV_EP_MUL_ASCALE: x = x * (float)o->row_s[i]; break;
#endif
#ifdef QV_MUTANT_cpu_bias_after_cast
        /* Mutant (class 24, sglang #35020; vLLM's Marlin FP4 epilogue): the
         * bias added after the output cast, in the output format: two
         * roundings where the row declares one after an fp32 addition. */
        case QV_EP_ADD_BIAS:
            x = (float)ref_round_to(v->ofmt, ref_round_to(v->ofmt, x, 0) + o->bias[j], 0);
            break;
#else
        case QV_EP_ADD_BIAS: x = x + (float)o->bias[j]; break;
#endif
        default: break; /* SUB_AZP is folded exactly; TO_F32 happened already */
        }
    }
    return x;
}

/* out: (m, n) output codes in v->ofmt; e: flat index. */
static void store(const qv_variant *v, void *out, int64_t e, float x)
{
    qv_sat sat = v->arith.out_sat;
#ifdef QV_MUTANT_cpu_output_truncation
    /* Mutant (class 17): the output cast truncates toward zero where RNE is declared. */
    x = (float)qv_trunc_bits(x, v->ofmt == QV_FMT_BF16 ? 8 : v->ofmt == QV_FMT_F16 ? 11 : 24);
#endif
    uint32_t c = qv_encode(v->ofmt, (double)x, sat);
    if (v->ofmt == QV_FMT_F32)
        ((uint32_t *)out)[e] = c;
    else
        ((uint16_t *)out)[e] = (uint16_t)c;
}

qv_status ref_model_run(const qv_problem *p, void *out)
{
    const qv_variant *v = p->v;
    if (v->ofmt != QV_FMT_F16 && v->ofmt != QV_FMT_BF16 && v->ofmt != QV_FMT_F32 && v->ofmt != QV_FMT_I32)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: no CPU model for output format %s", v->name,
                       qv_fmt_get(v->ofmt)->name);
    ref_operands o;
    QV_TRY(ref_operands_create(p, 0, &o));
    int64_t m = p->m, n = p->n, k = p->k;
    /* The kernel's accumulator units (marlin-fp4-nv): each weight times 2^e
     * is exact (a nonzero one stays at or above 2^-126: the layout lifts the
     * scales for that), the global scale times 2^-e is the f32 value the
     * packed operand holds. */
    int e_acc = ref_acc_pow2(p);
    if (e_acc) {
        for (int64_t i = 0; i < k * n; i++) o.w[i] = ldexp(o.w[i], e_acc);
        for (int64_t j = 0; j < n; j++) o.col_s2[j] = ldexp(o.col_s2[j], -e_acc);
    }
    float *af = malloc(sizeof(float) * (size_t)(m * k));
    float *wf = malloc(sizeof(float) * (size_t)(n * k));
    if (!af || !wf) {
        free(af);
        free(wf);
        ref_operands_destroy(&o);
        return qv_fail(QV_ERR_NOMEM, "%s: out of memory in the CPU model", v->name);
    }
    /* (k, n) -> (n, k) so every dot product reads both operands contiguously;
     * the operands are fp16/bf16/fp8/int values, exact in fp32. */
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) wf[j * k + kk] = (float)o.w[kk * n + j];
    for (int64_t i = 0; i < m * k; i++) af[i] = (float)o.a[i];
    qv_accum acc = v->arith.accum;
    int64_t seg = o.seg;
    for (int64_t i = 0; i < m; i++) {
        const double *a = o.a + i * k;
        const float *ar = af + i * k;
        int64_t j = 0;
        /* four columns at a time for the tensor cores' fp32 and fp8 sums
         * (each column's operations as below, in the same order) */
#ifdef QV_MUTANT_cpu_splitk_f16_reduce
        if (0) /* every column through the split dot_f32 */
#else
        if (acc == QV_ACC_TC_F32 || acc == QV_ACC_TC_FP8)
#endif
            for (; j + 4 <= n; j += 4) {
                const float *const w4[4] = {wf + j * k, wf + (j + 1) * k, wf + (j + 2) * k, wf + (j + 3) * k};
                float x4[4];
                if (!seg) {
                    sum_range4(v, a, ar, w4, 0, k, x4);
                } else {
                    for (int t = 0; t < 4; t++) x4[t] = 0;
                    for (int64_t k0 = 0; k0 < k; k0 += seg) {
                        int64_t k1 = k0 + seg < k ? k0 + seg : k;
                        float part[4];
                        sum_range4(v, a, ar, w4, k0, k1, part);
                        for (int t = 0; t < 4; t++) x4[t] = x4[t] + part[t] * segment_scale(p, i, j + t, k0);
                    }
                }
                for (int t = 0; t < 4; t++) store(v, out, i * n + j + t, epilogue(v, &o, i, j + t, x4[t]));
            }
        for (; j < n; j++) {
            const float *wr = wf + j * k;
            int64_t isum = 0;
            float x;
            if (!seg) {
                x = sum_range(v, a, ar, wr, 0, k, &isum);
            } else {
                /* each segment's partial (an int32 sum converted to fp32) times its
                 * scales, added into an fp32 total */
                x = 0;
                for (int64_t k0 = 0; k0 < k; k0 += seg) {
                    int64_t k1 = k0 + seg < k ? k0 + seg : k;
                    float part = sum_range(v, a, ar, wr, k0, k1, &isum);
                    x = x + part * segment_scale(p, i, j, k0);
                }
            }
            if (v->ofmt == QV_FMT_I32)
                ((int32_t *)out)[i * n + j] = (int32_t)isum; /* the exact sum; the registry proves it fits */
            else
                store(v, out, i * n + j, epilogue(v, &o, i, j, x));
        }
    }
    free(af);
    free(wf);
    ref_operands_destroy(&o);
    return QV_OK;
}
