/* problem.h: one GEMM problem in logical form, on the host. Included by the
 * reference, the packers, the generator, the GPU runner and `qvet verify`.
 * Rule: it holds the same quantized bits a kernel reads, never unquantized
 * weights; Y = A (m,k) x W (k,n) where W is dequantized from q by the variant's
 * declared arithmetic. */
#ifndef QVET_PROBLEM_H
#define QVET_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qv_problem {
    const qv_variant *v;
    int64_t m, n, k;
    int g;              /* copy of v->g (0 when not grouped) */

    /* Activations, (m, k) row-major codes in v->afmt: uint16_t bits for F16/BF16,
     * int8_t for I8, uint8_t codes for E4M3. */
    void *a;
    float *a_scale;     /* v->act_scale: (1), (m) or (ceil(k/128), m) MN-major; NULL for NONE */
    int32_t *azp;       /* v->azp: (1) or (m); NULL for NONE */

    /* Weights, (k, n) row-major stored codes in v->wfmt: uint8_t for U4 (0..15),
     * U8 (0..255) and E4M3; int8_t for I4 (-8..7) and I8; uint16_t for F16/BF16. */
    void *q;
    /* Scales per v->scale_layout, codes in v->sfmt (uint16_t bits for F16/BF16,
     * float for F32, uint8_t codes for E8M0/UE4M3): tensor (1,1), channel (1,n),
     * group (k/g,n), block (ceil(k/bk),ceil(n/bn)). */
    void *scales;
    float *scales2;     /* v->s2_layout: (1) or (1, n) second-level scales, their values
                           decoded from v->s2fmt (exact in f32); else NULL */
    uint8_t *zeros;     /* QV_ZP_INT: codes like q (one byte each; I4/I8 as int8_t) per
                           v->zp_layout, e.g. (k/g, n); w = (q - z) * s; else NULL */
    float *zeros_f;     /* QV_ZP_FLOAT: zero points per v->zp_layout, their values decoded
                           from v->sfmt (exact in f32); w = value(q) * s + z; else NULL */
    float *bias;        /* v->bias_fmt: (n) per-column bias, values decoded (exact in f32); else NULL */
    int32_t *g_idx;     /* act_order: (k) group of logical row k, in [0, k/g); else NULL */
} qv_problem;

/* Allocates every buffer the variant needs for (m, n, k), zeroed; checks the
 * shape first (qv_variant_check_shape). */
qv_status qv_problem_create(qv_problem *p, const qv_variant *v, int64_t m, int64_t n, int64_t k);
void      qv_problem_destroy(qv_problem *p);
/* Deep copy (for shrinking and mutation). */
qv_status qv_problem_clone(qv_problem *dst, const qv_problem *src);

/* Element sizes and counts of each buffer, for I/O and copies. */
size_t  qv_fmt_storage_bytes(qv_fmt f);     /* 1 for <= 8-bit codes, 2 for 16-bit, 4 for f32/i32 */
int64_t qv_problem_scale_rows(const qv_problem *p);
int64_t qv_problem_scale_cols(const qv_problem *p);
int64_t qv_problem_scale2_count(const qv_problem *p);  /* 0, 1 or n */
int64_t qv_problem_zero_rows(const qv_problem *p);
int64_t qv_problem_zero_cols(const qv_problem *p);
int64_t qv_problem_ascale_count(const qv_problem *p);
int64_t qv_problem_out_bytes(const qv_problem *p);  /* m * n * storage(ofmt) */

/* Value accessors (exact, as doubles). */
double qv_problem_a(const qv_problem *p, int64_t i, int64_t kk);      /* activation value (unscaled code value) */
double qv_problem_wq(const qv_problem *p, int64_t kk, int64_t j);     /* weight code value (u4b8: q-8, ...);
                                                                         q - z with integer zero points */
double qv_problem_scale(const qv_problem *p, int64_t kk, int64_t j);  /* the scale that applies to w[kk][j] */
double qv_problem_zero_f(const qv_problem *p, int64_t kk, int64_t j); /* its float zero point (0 if none) */
double qv_problem_scale2(const qv_problem *p, int64_t j);             /* second-level scale of column j (1 if none) */
int64_t qv_problem_group(const qv_problem *p, int64_t kk);            /* group of row kk: g_idx[kk] or kk / g */

#ifdef __cplusplus
}
#endif
#endif
