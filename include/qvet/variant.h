/* variant.h: a GEMM variant is a row of data (docs/design.md §2) and its declared
 * arithmetic (docs/design.md §3). Included by the registry, the reference, the
 * kernels' launchers, the campaign and the CLI. Rule: nothing switches on a
 * variant's name; every behaviour follows from the fields of its row, which
 * are plain data (no function pointers: the CPU library links no kernel). */
#ifndef QVET_VARIANT_H
#define QVET_VARIANT_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/formats.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a scale (or zero-point) array is laid out over the logical (k, n)
 * weight matrix: its granularity. */
typedef enum qv_scale_layout {
    QV_SCALE_NONE = 0,      /* no such array */
    QV_SCALE_TENSOR,        /* (1, 1) */
    QV_SCALE_CHANNEL,       /* (1, n) */
    QV_SCALE_GROUP,         /* (k/g, n); row k uses group k/g, or g_idx[k] */
    QV_SCALE_GROUP_CHANNEL, /* first-level (k/g, n) group scale plus a (1, n) f32 second-level
                               channel scale (scales2): QQQ per-group; the same as GROUP with
                               s2_layout CHANNEL and s2fmt F32 */
    QV_SCALE_BLOCK          /* (ceil(k/bk), ceil(n/bn)), one per bk x bn block (block_k, block_n;
                               0 means 128) */
} qv_scale_layout;

/* Zero points (docs/design.md §2, key wz). */
typedef enum qv_zp_kind {
    QV_ZP_NONE = 0,
    QV_ZP_INT,              /* w = (q - z) * s, z an integer code like q (its bias replaced by z) */
    QV_ZP_FLOAT             /* w = (value(q)) * s + z, z a number in the weight scale's format */
} qv_zp_kind;

/* How the activations are scaled (activation-quantized variants only). */
typedef enum qv_act_scale {
    QV_ASCALE_NONE = 0,     /* fp16/bf16 activations */
    QV_ASCALE_TENSOR,       /* a_scale: (1) f32 */
    QV_ASCALE_TOKEN,        /* a_scale: (m) f32 */
    QV_ASCALE_TOKEN_BLOCK   /* a_scale: (ceil(k/128), m) f32, per token and 128-wide K group, stored
                               MN-major: the m tokens of each K group contiguous (index kb * m + i),
                               as cuBLASLt's VEC128 scaling and DeepGEMM-style kernels read them */
} qv_act_scale;

/* Activation zero point (W8A8 int8 asymmetric): out = s_a*s_w*(A_q.B_q - azp*colsum(B_q)). */
typedef enum qv_azp {
    QV_AZP_NONE = 0,
    QV_AZP_TENSOR,          /* azp: (1) int32 */
    QV_AZP_TOKEN            /* azp: (m) int32 */
} qv_azp;

/* Packed weight layouts (layout.h has the packers, reference/ the decoder). */
typedef enum qv_layout {
    QV_LAYOUT_PLAIN_NK = 0, /* (n, k) row-major weight codes, like torch.nn.Linear */
    QV_LAYOUT_MARLIN_W4,    /* IST-DASLab Marlin 4-bit */
    QV_LAYOUT_MARLIN_W4_ZP, /* Marlin 4-bit with zero points as vLLM awq_marlin packs them */
    QV_LAYOUT_MARLIN_W8,    /* vLLM Marlin 8-bit (u8 = q+128), interleave [0,2,1,3] */
    QV_LAYOUT_MARLIN_FP8,   /* vLLM fp8 Marlin (e4m3 codes), 8-bit interleave */
    QV_LAYOUT_QQQ_W4_CHANNEL, /* QQQ channelwise, signed int4, interleave [4,0,5,1,6,2,7,3] */
    QV_LAYOUT_QQQ_W4_GROUP,   /* QQQ per-group, u4 = q+8, interleave [0,2,4,6,1,3,5,7] */
    QV_LAYOUT_LOGICAL,        /* a spec's arrays as `qvet verify` reads them (problem.h): (k, n)
                                 codes, scales and zero points unpermuted; for kernels qvet did
                                 not write (plugins, dumps) */
    QV_LAYOUT_MARLIN_FP4_MX,  /* vLLM Marlin MXFP4: e2m1 codes in the Marlin 4-bit words, e8m0
                                 scale bytes per 32 along K (layout.h) */
    QV_LAYOUT_MARLIN_FP4_NV,  /* vLLM Marlin NVFP4: e2m1 codes, ue4m3 scales per 16 rewritten as
                                 S0E5M3 bytes, the f32 global scale rewritten to match (layout.h) */
    QV_LAYOUT_COUNT
} qv_layout;

/* Dequantization of one weight w[k][n] from its stored code. */
typedef enum qv_dequant {
    QV_DQ_NONE = 0,     /* weights are used as stored (fp16 baseline; W8A8: q as an integer or e4m3 value) */
    QV_DQ_EXACT,        /* w = value(q) exactly; scales applied later (epilogue or per block) */
    QV_DQ_MUL_RN,       /* w = RN((value(q) - z) * s) in the activation format (one
                           rounding: a multiply, or a fused multiply-add with a float zero
                           point: RN(value(q) * s + z)) */
    QV_DQ_MUL_RN2,      /* float zero points: w = RN(RN(value(q) * s) + z), two roundings */
    QV_DQ_INT8_RNE,     /* QQQ per-group: w8 = rne((q - 8) * s_group) as one fp16 FMA,
                           then int8; s_group is fp16 */
    QV_DQ_F32           /* w = RN(RN_f32((value(q) - z) * RN_f32(s * s2))): the scale product
                           (s2 only with a second-level scale, which then leaves the epilogue)
                           and the scaled value each rounded to fp32, then one rounding to the
                           activation format (torchao's NVFP4 emulation); z an integer code */
} qv_dequant;

/* How products are summed along K. */
typedef enum qv_accum {
    QV_ACC_INT32 = 0,   /* exact int32; registry and generator prove K*max|p| < 2^31 */
    QV_ACC_TC_F32,      /* fp16/bf16 tensor core into fp32, alignment block width `block_b` */
    QV_ACC_TC_FP8,      /* fp8 tensor core (an `acc_bits` accumulator that truncates), promoted
                           to fp32 every `promote_nc` products, never when promote_nc is 0 */
    QV_ACC_FMA_F32      /* fp32 FMA loop, round to nearest */
} qv_accum;

/* Split-K / global reduction precision. */
typedef enum qv_reduce {
    QV_RED_NONE = 0,    /* no float reduction: one thread finishes each output, or integer
                           partials add exactly in int32 */
    QV_RED_F32          /* partial sums of K slices are added in fp32 (with an int32
                           accumulator: each slice's partial converted to fp32 first) */
} qv_reduce;

/* One step of the epilogue, executed in order, each in fp32 with RN, after
 * accumulation and before the output cast. QV_EP_END terminates the list. */
typedef enum qv_ep_step {
    QV_EP_END = 0,
    QV_EP_SUB_AZP,      /* int32: acc -= azp * colsum(B_q) (exact in int32) */
    QV_EP_TO_F32,       /* int32 -> fp32, RN (exact when |acc| <= 2^24) */
    QV_EP_MUL_WSCALE,   /* *= weight scale: tensor, or channel s[n] (in sfmt, exact in fp32) */
    QV_EP_MUL_WSCALE2,  /* *= second-level scale: tensor or channel scales2 (f32); none with
                           QV_DQ_F32, whose dequantization applies it */
    QV_EP_MUL_ASCALE,   /* *= activation scale: tensor or token s_a[m] (f32) */
    QV_EP_ADD_BIAS      /* += bias[n] (exact in fp32) */
} qv_ep_step;
#define QV_EP_MAX 8

typedef struct qv_arith {
    qv_dequant dequant;
    int w_mul;          /* integer paths: the kernel multiplies each weight code by this
                           (QQQ channelwise sees a nibble q as 16*q in an int8); 0 means 1 */
    qv_accum accum;
    int block_b;        /* QV_ACC_TC_F32: alignment block width b (e.g. 16) */
    int promote_nc;     /* QV_ACC_TC_FP8: promotion interval N_C; 0: never promoted (fast
                           accumulation: the whole K, or each scale segment, in the narrow
                           accumulator) */
    int acc_bits;       /* QV_ACC_TC_FP8: accumulator significand bits kept (about 14) */
    qv_reduce reduce;
    qv_ep_step epilogue[QV_EP_MAX];
    qv_sat out_sat;     /* output cast: RNE then this saturation rule */
} qv_arith;

typedef struct qv_variant {
    const char *name;       /* a registry row's systematic name (README "Variant names"), or
                               for a spec the canonical spec string (spec.h) */
    const char *summary;    /* one line for `qvet list` */
    const char *family;     /* "cublas", "marlin", "qqq", "w8a8", "spec" (for reports) */

    qv_fmt wfmt;            /* stored weight code (formats.h) */
    qv_fmt afmt;            /* activation code: F16, BF16, I8, E4M3 */
    qv_fmt ofmt;            /* output: F16, BF16, F32, I32 */
    qv_fmt sfmt;            /* first-level weight scale format (NONE if no scale) */

    qv_scale_layout scale_layout;
    int g;                  /* group size along K for GROUP / GROUP_CHANNEL, else 0 */
    int block_k, block_n;   /* QV_SCALE_BLOCK: the block's extents (0 means 128) */
    qv_fmt s2fmt;           /* second-level weight scale format (NONE if none); its values are
                               held decoded in qv_problem.scales2 as f32 */
    qv_scale_layout s2_layout; /* NONE, TENSOR (1) or CHANNEL (n) */
    qv_zp_kind zero_point;  /* weight zero points; see zp_layout for their shape */
    qv_scale_layout zp_layout; /* zero-point granularity (as scales); GROUP uses zp_g */
    int zp_g, zp_bk, zp_bn; /* zero-point group size / block extents */
    int act_order;          /* g_idx: (k) group of each row; kernel sorts rows */
    qv_act_scale act_scale;
    qv_azp azp;
    qv_fmt bias_fmt;        /* per-column bias format (F16, BF16, F32), NONE if no bias */

    qv_layout layout;
    int n_tile;             /* N must be a multiple of this */
    int k_tile;             /* K must be a multiple of this */

    qv_arith arith;

    int gpu_kernel;         /* 1: the GPU library has a kernel for this row, reached through
                               the launch table keyed by family (gemm.h: qv_gpu_launcher);
                               0 for specs, which only plugins launch */
    int cpu_model;          /* 1: reference/ has a CPU model of this row */
} qv_variant;

/* The registry (src/registry.c). */
int qv_registry_count(void);
const qv_variant *qv_registry_get(int i);
const qv_variant *qv_variant_find(const char *name);
/* fnmatch-style glob over names ("marlin-*", "*-bf16"); NULL or "" matches all. */
int qv_variant_match(const qv_variant *v, const char *glob);

/* Refuses an illegal (m, n, k) for this row with a clear message: tile
 * multiples, g | k, overflow of the exact int32 accumulator, index ranges. */
qv_status qv_variant_check_shape(const qv_variant *v, int64_t m, int64_t n, int64_t k);

/* Names used in qvet list and JSON. */
const char *qv_scale_layout_name(qv_scale_layout s); /* "tensor", "channel", "group", "group+channel", "block", "none" */
/* Rows and columns of a (k, n)-covering array of granularity `l` (group size
 * g, block bk x bn, 0 meaning 128): 0 x 0 for NONE. */
int64_t qv_gran_rows(qv_scale_layout l, int g, int bk, int64_t k);
int64_t qv_gran_cols(qv_scale_layout l, int bn, int64_t n);
/* The flat index into such an array of the entry covering weight (kk, j);
 * grp is the group of row kk (kk / g, or g_idx[kk]) for GROUP layouts. */
int64_t qv_gran_index(qv_scale_layout l, int bk, int bn, int64_t n, int64_t kk, int64_t j, int64_t grp);
const char *qv_layout_name(qv_layout l);             /* "plain-nk", "marlin-w4", "marlin-fp4-mx", ...
                                                        (qvet pack names) */
qv_layout   qv_layout_from_name(const char *name);   /* QV_LAYOUT_COUNT if unknown */
const char *qv_accum_name(qv_accum a);               /* "int32", "tc-f32", "tc-fp8", "fma-f32" */
const char *qv_dequant_name(qv_dequant d);
const char *qv_act_scale_name(qv_act_scale s);

#ifdef __cplusplus
}
#endif
#endif
