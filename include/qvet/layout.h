/* layout.h: packing logical weights into the layouts published kernels read
 * (Marlin, vLLM Marlin variants, QQQ), byte for byte. Included by the CLI
 * (`qvet pack`), the GPU runner and tests. Rule: packers are written from the
 * recipes in DESIGN.md §7; the independent decoder in reference/ (reference.h:
 * ref_unpack) never runs these tables backwards. */
#ifndef QVET_LAYOUT_H
#define QVET_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/problem.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which permutation the packed scales went through (see the layout notes above). */
typedef enum qv_scale_order {
    QV_SORDER_PLAIN = 0,   /* unpermuted: tensor scales, PLAIN_NK */
    QV_SORDER_GROUP64,     /* scale_perm, in 64-wide blocks */
    QV_SORDER_CHANNEL32    /* scale_perm_single, in 32-wide blocks */
} qv_scale_order;

/* The packed form of a problem's weights: what a kernel reads. */
typedef struct qv_packed {
    qv_layout layout;
    int64_t k, n;
    int g;               /* group size, 0 when the scales are not grouped */
    int32_t *b;          /* packed weights, b_rows x b_cols int32 (Marlin: (k/16, 2n) for 4-bit) */
    int64_t b_rows, b_cols;
    void *scales;        /* permuted scales, same shape and dtype as the logical ones */
    int64_t s_rows, s_cols;
    size_t s_elem;       /* bytes per scale element */
    qv_scale_order s_order;
    int s_pow2;          /* MARLIN_FP8: the scales hold s * 2^s_pow2 (8 for f16 activations,
                            120 for bf16), the exponent bias the kernel's fp8 conversion omits */
    void *scales2;       /* permuted second-level scales (QQQ group: (1, n) f32) or NULL */
    int64_t s2_cols;
    void *zeros;         /* packed zero points (marlin-w4-zp): (k/g, n/8) int32, or NULL */
    int64_t z_bytes;
    int64_t z_rows, z_cols;
    int32_t *perm;       /* act_order: (k) logical row of each sorted row, or NULL */
    int32_t *g_idx;      /* act_order: (k) group of each sorted row, g_idx[perm[i]]
                            (non-decreasing; what vLLM passes the kernel), or NULL */
} qv_packed;

/* Packs p's weights into p->v->layout. Validates shape, q range and dtypes. */
qv_status qv_pack(const qv_problem *p, qv_packed *out);
void      qv_packed_destroy(qv_packed *pk);

/* Packs by layout name from raw logical arrays (qvet pack). */
struct qv_array;
qv_status qv_pack_arrays(qv_layout layout, const struct qv_array *q, const struct qv_array *scales,
                         const struct qv_array *scales2, const struct qv_array *zeros,
                         const struct qv_array *g_idx, qv_packed *out);

/* The scale permutations of Marlin/QQQ (DESIGN.md §7), as tables. */
void qv_scale_perm(int perm[64]);         /* grouped: scale_perm[8i+j] = i + 8j */
void qv_scale_perm_single(int perm[32]);  /* channelwise: {2i+j : j in {0,1,8,9,16,17,24,25}} */

/* Checkpoint readers into logical form. GPTQ: qweight (k/8, n) int32 packed
 * along K, qzeros (k/g, n/8) int32 packed along N storing z-1 (v1) or z (v2),
 * scales (k/g, n) fp16, g_idx (k). AWQ: qweight (k, n/8) packed along N in the
 * order [0,2,4,6,1,3,5,7], qzeros (k/g, n/8) likewise. Outputs are (k, n) u4
 * codes and (k/g, n) u4 zero codes. */
qv_status qv_gptq_unpack(const int32_t *qweight, const int32_t *qzeros, int64_t k, int64_t n, int g,
                         int v1_zeros, uint8_t *q_out, uint8_t *z_out);
qv_status qv_awq_unpack(const int32_t *qweight, const int32_t *qzeros, int64_t k, int64_t n, int g,
                        uint8_t *q_out, uint8_t *z_out);

#ifdef __cplusplus
}
#endif
#endif
