/* problem.c: one GEMM problem in logical form (problem.h): allocation of the
 * buffers a variant needs, deep copies, and exact value accessors. */
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/problem.h"

size_t qv_fmt_storage_bytes(qv_fmt f)
{
    switch (f) {
    case QV_FMT_NONE: return 0;
    case QV_FMT_F16:
    case QV_FMT_BF16: return 2;
    case QV_FMT_F32:
    case QV_FMT_I32: return 4;
    default: return 1; /* every <= 8-bit code is stored in one byte */
    }
}

int64_t qv_problem_scale_rows(const qv_problem *p)
{
    return qv_gran_rows(p->v->scale_layout, p->g, p->v->block_k, p->k);
}

int64_t qv_problem_scale_cols(const qv_problem *p)
{
    return qv_gran_cols(p->v->scale_layout, p->v->block_n, p->n);
}

int64_t qv_problem_scale2_count(const qv_problem *p)
{
    return p->v->s2_layout == QV_SCALE_CHANNEL ? p->n : p->v->s2_layout == QV_SCALE_TENSOR ? 1 : 0;
}

int64_t qv_problem_zero_rows(const qv_problem *p)
{
    const qv_variant *v = p->v;
    return v->zero_point ? qv_gran_rows(v->zp_layout, v->zp_g, v->zp_bk, p->k) : 0;
}

int64_t qv_problem_zero_cols(const qv_problem *p)
{
    const qv_variant *v = p->v;
    return v->zero_point ? qv_gran_cols(v->zp_layout, v->zp_bn, p->n) : 0;
}

int64_t qv_problem_ascale_count(const qv_problem *p)
{
    switch (p->v->act_scale) {
    case QV_ASCALE_NONE: return 0;
    case QV_ASCALE_TENSOR: return 1;
    case QV_ASCALE_TOKEN: return p->m;
    case QV_ASCALE_TOKEN_BLOCK: return p->m * ((p->k + 127) / 128);
    }
    return 0;
}

static int64_t azp_count(const qv_problem *p)
{
    switch (p->v->azp) {
    case QV_AZP_NONE: return 0;
    case QV_AZP_TENSOR: return 1;
    case QV_AZP_TOKEN: return p->m;
    }
    return 0;
}

int64_t qv_problem_out_bytes(const qv_problem *p)
{
    return p->m * p->n * (int64_t)qv_fmt_storage_bytes(p->v->ofmt);
}

/* Byte sizes of every buffer, in the order of the struct. */
typedef struct buf_sizes {
    size_t a, a_scale, azp, q, scales, scales2, zeros, zeros_f, bias, g_idx;
} buf_sizes;

static buf_sizes sizes_of(const qv_problem *p)
{
    const qv_variant *v = p->v;
    buf_sizes s;
    s.a = (size_t)(p->m * p->k) * qv_fmt_storage_bytes(v->afmt);
    s.a_scale = (size_t)qv_problem_ascale_count(p) * sizeof(float);
    s.azp = (size_t)azp_count(p) * sizeof(int32_t);
    s.q = (size_t)(p->k * p->n) * qv_fmt_storage_bytes(v->wfmt);
    s.scales = (size_t)(qv_problem_scale_rows(p) * qv_problem_scale_cols(p)) * qv_fmt_storage_bytes(v->sfmt);
    s.scales2 = (size_t)qv_problem_scale2_count(p) * sizeof(float);
    size_t nz = (size_t)(qv_problem_zero_rows(p) * qv_problem_zero_cols(p));
    s.zeros = v->zero_point == QV_ZP_INT ? nz : 0;
    s.zeros_f = v->zero_point == QV_ZP_FLOAT ? nz * sizeof(float) : 0;
    s.bias = v->bias_fmt != QV_FMT_NONE ? (size_t)p->n * sizeof(float) : 0;
    s.g_idx = v->act_order ? (size_t)p->k * sizeof(int32_t) : 0;
    return s;
}

/* calloc of n bytes, or NULL for n == 0; *fail set on allocation failure. */
static void *zalloc(size_t n, int *fail)
{
    if (!n) return NULL;
    void *x = calloc(1, n);
    if (!x) *fail = 1;
    return x;
}

qv_status qv_problem_create(qv_problem *p, const qv_variant *v, int64_t m, int64_t n, int64_t k)
{
    memset(p, 0, sizeof *p);
    QV_ASSERT(v != NULL, "qv_problem_create needs a registry row");
    QV_TRY(qv_variant_check_shape(v, m, n, k));
    /* m*k and k*n in bytes must fit a size_t with room for 4-byte elements. */
    if ((double)m * (double)k * 4.0 > 9.0e18 || (double)k * (double)n * 4.0 > 9.0e18 ||
        (double)m * (double)n * 4.0 > 9.0e18)
        return qv_fail(QV_ERR_NOMEM, "%s: m=%lld n=%lld k=%lld is too large to allocate", v->name,
                       (long long)m, (long long)n, (long long)k);
    p->v = v;
    p->m = m;
    p->n = n;
    p->k = k;
    p->g = v->g;
    buf_sizes s = sizes_of(p);
    int fail = 0;
    p->a = zalloc(s.a, &fail);
    p->a_scale = zalloc(s.a_scale, &fail);
    p->azp = zalloc(s.azp, &fail);
    p->q = zalloc(s.q, &fail);
    p->scales = zalloc(s.scales, &fail);
    p->scales2 = zalloc(s.scales2, &fail);
    p->zeros = zalloc(s.zeros, &fail);
    p->zeros_f = zalloc(s.zeros_f, &fail);
    p->bias = zalloc(s.bias, &fail);
    p->g_idx = zalloc(s.g_idx, &fail);
    if (fail) {
        qv_problem_destroy(p);
        return qv_fail(QV_ERR_NOMEM, "%s: out of memory for m=%lld n=%lld k=%lld", v->name,
                       (long long)m, (long long)n, (long long)k);
    }
    /* act_order: the identity grouping until a generator draws one. */
    if (p->g_idx)
        for (int64_t kk = 0; kk < k; kk++) p->g_idx[kk] = (int32_t)(kk / p->g);
    return QV_OK;
}

void qv_problem_destroy(qv_problem *p)
{
    if (!p) return;
    free(p->a);
    free(p->a_scale);
    free(p->azp);
    free(p->q);
    free(p->scales);
    free(p->scales2);
    free(p->zeros);
    free(p->zeros_f);
    free(p->bias);
    free(p->g_idx);
    memset(p, 0, sizeof *p);
}

qv_status qv_problem_clone(qv_problem *dst, const qv_problem *src)
{
    QV_TRY(qv_problem_create(dst, src->v, src->m, src->n, src->k));
    buf_sizes s = sizes_of(src);
    if (s.a) memcpy(dst->a, src->a, s.a);
    if (s.a_scale) memcpy(dst->a_scale, src->a_scale, s.a_scale);
    if (s.azp) memcpy(dst->azp, src->azp, s.azp);
    if (s.q) memcpy(dst->q, src->q, s.q);
    if (s.scales) memcpy(dst->scales, src->scales, s.scales);
    if (s.scales2) memcpy(dst->scales2, src->scales2, s.scales2);
    if (s.zeros) memcpy(dst->zeros, src->zeros, s.zeros);
    if (s.zeros_f) memcpy(dst->zeros_f, src->zeros_f, s.zeros_f);
    if (s.bias) memcpy(dst->bias, src->bias, s.bias);
    if (s.g_idx) memcpy(dst->g_idx, src->g_idx, s.g_idx);
    return QV_OK;
}

/* Code i of a buffer holding `f` codes, widened to uint32. */
static uint32_t code_at(qv_fmt f, const void *buf, int64_t i)
{
    switch (qv_fmt_storage_bytes(f)) {
    case 1: return ((const uint8_t *)buf)[i];
    case 2: return ((const uint16_t *)buf)[i];
    default: return ((const uint32_t *)buf)[i];
    }
}

/* Value of a stored code; integer formats stored signed in a byte (I4, I8) are
 * sign-extended from the byte first. */
static double value_of(qv_fmt f, const void *buf, int64_t i)
{
    if (f == QV_FMT_I8 || f == QV_FMT_I4) return (double)((const int8_t *)buf)[i];
    if (f == QV_FMT_F32) return (double)((const float *)buf)[i];
    if (f == QV_FMT_I32) return (double)((const int32_t *)buf)[i];
    return qv_decode(f, code_at(f, buf, i));
}

double qv_problem_a(const qv_problem *p, int64_t i, int64_t kk)
{
    return value_of(p->v->afmt, p->a, i * p->k + kk);
}

int64_t qv_problem_group(const qv_problem *p, int64_t kk)
{
    return p->g_idx ? p->g_idx[kk] : p->g > 0 ? kk / p->g : 0;
}

/* Index of the zero point of weight (kk, j); grouped zero points share the
 * weight scales' g_idx (act_order needs them at the scales' group size). */
static int64_t zero_index(const qv_problem *p, int64_t kk, int64_t j)
{
    const qv_variant *v = p->v;
    int64_t grp = v->zp_layout == QV_SCALE_GROUP ? (p->g_idx ? p->g_idx[kk] : kk / v->zp_g) : 0;
    return qv_gran_index(v->zp_layout, v->zp_bk, v->zp_bn, p->n, kk, j, grp);
}

/* The unbiased code of a format whose integer zero point replaces its bias:
 * u4b8 and u8b128 codes are read as the unsigned code, i4/i8 as signed. */
static double zp_code(qv_fmt f, const void *buf, int64_t i)
{
    if (f == QV_FMT_I4 || f == QV_FMT_I8) return (double)((const int8_t *)buf)[i];
    return (double)((const uint8_t *)buf)[i];
}

/* With integer zero points the code value is q - z (the integer the scale
 * multiplies); otherwise the format's value (u4b8: q-8, u8b128: q-128, e4m3:
 * its real value). The kernel-side multiplier arith.w_mul is not included. */
double qv_problem_wq(const qv_problem *p, int64_t kk, int64_t j)
{
    const qv_variant *v = p->v;
    int64_t i = kk * p->n + j;
    if (v->zero_point == QV_ZP_INT && p->zeros)
        return zp_code(v->wfmt, p->q, i) - zp_code(v->wfmt, p->zeros, zero_index(p, kk, j));
    return value_of(v->wfmt, p->q, i);
}

double qv_problem_zero_f(const qv_problem *p, int64_t kk, int64_t j)
{
    if (p->v->zero_point != QV_ZP_FLOAT || !p->zeros_f) return 0.0;
    return (double)p->zeros_f[zero_index(p, kk, j)];
}

double qv_problem_scale2(const qv_problem *p, int64_t j)
{
    switch (p->v->s2_layout) {
    case QV_SCALE_TENSOR: return (double)p->scales2[0];
    case QV_SCALE_CHANNEL: return (double)p->scales2[j];
    default: return 1.0;
    }
}

/* The first-level weight scale of w[kk][j] (for GROUP_CHANNEL the group scale;
 * the channel scale is scales2[j]); 1 for variants without weight scales. */
double qv_problem_scale(const qv_problem *p, int64_t kk, int64_t j)
{
    const qv_variant *v = p->v;
    if (v->scale_layout == QV_SCALE_NONE) return 1.0;
    int64_t grp = v->scale_layout == QV_SCALE_GROUP || v->scale_layout == QV_SCALE_GROUP_CHANNEL
                      ? qv_problem_group(p, kk) : 0;
    return value_of(v->sfmt, p->scales, qv_gran_index(v->scale_layout, v->block_k, v->block_n, p->n, kk, j, grp));
}
