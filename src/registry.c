/* registry.c: every variant qvet knows, as rows of data (variant.h), in the
 * CPU library: a row names no function, and gpu_kernel = 1 says that the GPU
 * library's launch table (src/gpu_launch.c) has its family. Adding a variant
 * means adding a row here, a kernel launcher's support for it and any format
 * pieces it needs; no code elsewhere names a variant. */
#include <fnmatch.h>
#include <stddef.h>
#include <string.h>

#include "qvet/variant.h"

/* The rows are written with one macro per family. A macro's parameters are
 * the fields its rows differ in, in the order of the column comment above its
 * rows; its body sets every other field to what the whole family shares.
 * Names and summaries stay whole strings, so grep finds every row. */

/* The arithmetic of the f16/bf16 tensor-core rows: products summed in fp32 in
 * alignment blocks of 16 (qv_arith.block_b), split-K partials added in fp32;
 * the epilogue steps follow the dequantization. */
#define ARITH_TC(dequant_, ...)                                                                         \
    {.dequant = (dequant_), .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,                \
     .epilogue = {__VA_ARGS__}, .out_sat = QV_SAT_NONE}

/* The exact int32 rows: each weight code times w_mul_ (0 means 1), no float reduction. */
#define ARITH_INT32(dequant_, w_mul_, ...)                                                              \
    {.dequant = (dequant_), .w_mul = (w_mul_), .accum = QV_ACC_INT32, .reduce = QV_RED_NONE,            \
     .epilogue = {__VA_ARGS__}, .out_sat = QV_SAT_NONE}

/* The e4m3 x e4m3 rows: a 14-bit accumulator promoted to fp32 every 128 K
 * (the note above the rows says why). */
#define ARITH_FP8(...)                                                                                  \
    {.dequant = QV_DQ_NONE, .accum = QV_ACC_TC_FP8, .promote_nc = 128, .acc_bits = 14,                  \
     .reduce = QV_RED_F32, .epilogue = {__VA_ARGS__}, .out_sat = QV_SAT_NONE}

/* The cuBLAS baselines: fmt_ for weights, activations and output, no scales. */
#define CUBLAS_ROW(name_, fmt_, summary_)                                                               \
    {.name = (name_), .summary = (summary_), .family = "cublas",                                        \
     .wfmt = (fmt_), .afmt = (fmt_), .ofmt = (fmt_), .sfmt = QV_FMT_NONE,                               \
     .scale_layout = QV_SCALE_NONE, .g = 0, .zero_point = 0, .act_order = 0,                            \
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,                                                   \
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 8,                                            \
     .arith = ARITH_TC(QV_DQ_NONE, QV_EP_END),                                                          \
     .gpu_kernel = 1, .cpu_model = 1}

/* The Marlin weight-only rows: f16 or bf16 activations (act_) and the same
 * format out, no activation scale. */
#define WONLY_ROW(name_, wfmt_, act_, sfmt_, layout_, scales_, g_, zero_point_, act_order_, arith_,     \
                  summary_)                                                                             \
    {.name = (name_), .summary = (summary_), .family = "marlin",                                        \
     .wfmt = (wfmt_), .afmt = (act_), .ofmt = (act_), .sfmt = (sfmt_),                                  \
     .scale_layout = (scales_), .g = (g_), .zero_point = (zero_point_), .act_order = (act_order_),      \
     .zp_layout = (zero_point_) ? QV_SCALE_GROUP : QV_SCALE_NONE, .zp_g = (zero_point_) ? (g_) : 0,      \
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,                                                   \
     .layout = (layout_), .n_tile = 64, .k_tile = 16,                                                   \
     .arith = arith_,                                                                                   \
     .gpu_kernel = 1, .cpu_model = 1}

/* The QQQ W4A8 rows: int8 activations with per-token scales, f16 out. */
#define QQQ_ROW(name_, wfmt_, sfmt_, layout_, scales_, g_, arith_, summary_)                            \
    {.name = (name_), .summary = (summary_), .family = "qqq",                                           \
     .wfmt = (wfmt_), .afmt = QV_FMT_I8, .ofmt = QV_FMT_F16, .sfmt = (sfmt_),                           \
     .scale_layout = (scales_), .g = (g_), .zero_point = 0, .act_order = 0,                             \
     .s2fmt = (scales_) == QV_SCALE_GROUP_CHANNEL ? QV_FMT_F32 : QV_FMT_NONE,                           \
     .s2_layout = (scales_) == QV_SCALE_GROUP_CHANNEL ? QV_SCALE_CHANNEL : QV_SCALE_NONE,               \
     .act_scale = QV_ASCALE_TOKEN, .azp = QV_AZP_NONE,                                                  \
     .layout = (layout_), .n_tile = 64, .k_tile = 16,                                                   \
     .arith = arith_,                                                                                   \
     .gpu_kernel = 1, .cpu_model = 1}

/* The W8A8 rows: fmt_ (int8 or e4m3) for weights and activations, f32
 * scales, plain (n, k) weights, f16 out. */
#define W8A8_ROW(name_, fmt_, scales_, act_scale_, azp_, arith_, summary_)                              \
    {.name = (name_), .summary = (summary_), .family = "w8a8",                                          \
     .wfmt = (fmt_), .afmt = (fmt_), .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,                            \
     .scale_layout = (scales_), .g = 0, .zero_point = 0, .act_order = 0,                                \
     .act_scale = (act_scale_), .azp = (azp_),                                                          \
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 16,                                           \
     .arith = arith_,                                                                                   \
     .gpu_kernel = 1, .cpu_model = 1}

/* The Marlin FP4 weight-only rows (vLLM's marlin_utils_fp4.py layouts): e2m1
 * codes times an e8m0 (MXFP4, per 32 along K) or ue4m3 (NVFP4, per 16, with
 * the f32 global scale as a second-level tensor scale) block scale, one
 * rounding to the activation format (exact for every code and scale the
 * layouts carry, overflow to Inf aside), f16 or bf16 activations and the
 * same format out, an optional bias in that format added in fp32 before the
 * single output rounding. Their GPU kernels are the weight-only family's
 * small-M and mma kernels and dequantize + cuBLAS (kernels/wonly_small.cu,
 * wonly.cu, wonly_dq.cu), reading qv_pack's bytes as vLLM's Marlin FP4
 * kernel does. */
#define FP4_ROW(name_, sfmt_, g_, s2fmt_, layout_, act_, bias_, arith_, summary_)                        \
    {.name = (name_), .summary = (summary_), .family = "marlin",                                        \
     .wfmt = QV_FMT_E2M1, .afmt = (act_), .ofmt = (act_), .sfmt = (sfmt_),                              \
     .scale_layout = QV_SCALE_GROUP, .g = (g_), .zero_point = 0, .act_order = 0,                        \
     .s2fmt = (s2fmt_), .s2_layout = (s2fmt_) == QV_FMT_NONE ? QV_SCALE_NONE : QV_SCALE_TENSOR,         \
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE, .bias_fmt = (bias_),                              \
     .layout = (layout_), .n_tile = 64, .k_tile = 16,                                                   \
     .arith = arith_,                                                                                   \
     .gpu_kernel = 1, .cpu_model = 1}

static const qv_variant registry[] = {
    /*         name           format (weights, activations, output)
     *         summary */
    CUBLAS_ROW("cublas-f16",  QV_FMT_F16,
               "cuBLAS f16 GEMM, the baseline"),
    /*        name                          weights      act, out     scale        layout
     *        scale layout      g    zp act_order arithmetic
     *        summary */
    WONLY_ROW("marlin-w4a16-ch-f16",        QV_FMT_U4,   QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_W4,
              QV_SCALE_CHANNEL, 0,   0, 0, ARITH_TC(QV_DQ_EXACT, QV_EP_MUL_WSCALE),
              "int4 (q+8) x f16, channelwise fp32 epilogue scale, Marlin layout"),
    WONLY_ROW("marlin-w4a16-g32-f16",       QV_FMT_U4,   QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_W4,
              QV_SCALE_GROUP,   32,  0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int4 (q+8) x f16, group 32, f16 dequant multiply, Marlin layout"),
    WONLY_ROW("marlin-w4a16-g64-f16",       QV_FMT_U4,   QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_W4,
              QV_SCALE_GROUP,   64,  0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int4 (q+8) x f16, group 64, f16 dequant multiply, Marlin layout"),
    WONLY_ROW("marlin-w4a16-g128-f16",      QV_FMT_U4,   QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_W4,
              QV_SCALE_GROUP,   128, 0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int4 (q+8) x f16, group 128, f16 dequant multiply, Marlin layout"),
    WONLY_ROW("marlin-w4a16-g128-zp-f16",   QV_FMT_U4,   QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_W4_ZP,
              QV_SCALE_GROUP,   128, 1, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "uint4 with zero points (AWQ) x f16, group 128, Marlin zp layout"),
    WONLY_ROW("marlin-w4a16-g128-act-f16",  QV_FMT_U4,   QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_W4,
              QV_SCALE_GROUP,   128, 0, 1, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int4 (q+8) x f16, group 128 with act_order (g_idx)"),
    WONLY_ROW("marlin-w8a16-ch-f16",        QV_FMT_U8,   QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_W8,
              QV_SCALE_CHANNEL, 0,   0, 0, ARITH_TC(QV_DQ_EXACT, QV_EP_MUL_WSCALE),
              "int8 (q+128) x f16, channelwise fp32 epilogue scale"),
    WONLY_ROW("marlin-w8a16-g128-f16",      QV_FMT_U8,   QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_W8,
              QV_SCALE_GROUP,   128, 0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int8 (q+128) x f16, group 128, f16 dequant multiply"),
    WONLY_ROW("marlin-fp8a16-tensor-f16",   QV_FMT_E4M3, QV_FMT_F16,  QV_FMT_F32,  QV_LAYOUT_MARLIN_FP8,
              QV_SCALE_TENSOR,  0,   0, 0, ARITH_TC(QV_DQ_EXACT, QV_EP_MUL_WSCALE),
              "fp8 e4m3 x f16, per-tensor fp32 epilogue scale"),
    WONLY_ROW("marlin-fp8a16-ch-f16",       QV_FMT_E4M3, QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_FP8,
              QV_SCALE_CHANNEL, 0,   0, 0, ARITH_TC(QV_DQ_EXACT, QV_EP_MUL_WSCALE),
              "fp8 e4m3 x f16, channelwise fp32 epilogue scale (the seed bug's path)"),
    WONLY_ROW("marlin-fp8a16-g128-f16",     QV_FMT_E4M3, QV_FMT_F16,  QV_FMT_F16,  QV_LAYOUT_MARLIN_FP8,
              QV_SCALE_GROUP,   128, 0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "fp8 e4m3 x f16, group/block 128 along K, f16 dequant multiply"),
    CUBLAS_ROW("cublas-bf16", QV_FMT_BF16,
               "cuBLAS bf16 GEMM, the baseline"),
    WONLY_ROW("marlin-w4a16-ch-bf16",       QV_FMT_U4,   QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_W4,
              QV_SCALE_CHANNEL, 0,   0, 0, ARITH_TC(QV_DQ_EXACT, QV_EP_MUL_WSCALE),
              "int4 (q+8) x bf16, channelwise fp32 epilogue scale, Marlin layout"),
    WONLY_ROW("marlin-w4a16-g32-bf16",      QV_FMT_U4,   QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_W4,
              QV_SCALE_GROUP,   32,  0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int4 (q+8) x bf16, group 32, bf16 dequant multiply, Marlin layout"),
    WONLY_ROW("marlin-w4a16-g64-bf16",      QV_FMT_U4,   QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_W4,
              QV_SCALE_GROUP,   64,  0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int4 (q+8) x bf16, group 64, bf16 dequant multiply, Marlin layout"),
    WONLY_ROW("marlin-w4a16-g128-bf16",     QV_FMT_U4,   QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_W4,
              QV_SCALE_GROUP,   128, 0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int4 (q+8) x bf16, group 128, bf16 dequant multiply, Marlin layout"),
    WONLY_ROW("marlin-w4a16-g128-zp-bf16",  QV_FMT_U4,   QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_W4_ZP,
              QV_SCALE_GROUP,   128, 1, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "uint4 with zero points (AWQ) x bf16, group 128, Marlin zp layout"),
    WONLY_ROW("marlin-w4a16-g128-act-bf16", QV_FMT_U4,   QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_W4,
              QV_SCALE_GROUP,   128, 0, 1, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int4 (q+8) x bf16, group 128 with act_order (g_idx)"),
    WONLY_ROW("marlin-w8a16-ch-bf16",       QV_FMT_U8,   QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_W8,
              QV_SCALE_CHANNEL, 0,   0, 0, ARITH_TC(QV_DQ_EXACT, QV_EP_MUL_WSCALE),
              "int8 (q+128) x bf16, channelwise fp32 epilogue scale"),
    WONLY_ROW("marlin-w8a16-g128-bf16",     QV_FMT_U8,   QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_W8,
              QV_SCALE_GROUP,   128, 0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "int8 (q+128) x bf16, group 128, bf16 dequant multiply"),
    WONLY_ROW("marlin-fp8a16-tensor-bf16",  QV_FMT_E4M3, QV_FMT_BF16, QV_FMT_F32,  QV_LAYOUT_MARLIN_FP8,
              QV_SCALE_TENSOR,  0,   0, 0, ARITH_TC(QV_DQ_EXACT, QV_EP_MUL_WSCALE),
              "fp8 e4m3 x bf16, per-tensor fp32 epilogue scale"),
    WONLY_ROW("marlin-fp8a16-ch-bf16",      QV_FMT_E4M3, QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_FP8,
              QV_SCALE_CHANNEL, 0,   0, 0, ARITH_TC(QV_DQ_EXACT, QV_EP_MUL_WSCALE),
              "fp8 e4m3 x bf16, channelwise fp32 epilogue scale (the seed bug's path)"),
    WONLY_ROW("marlin-fp8a16-g128-bf16",    QV_FMT_E4M3, QV_FMT_BF16, QV_FMT_BF16, QV_LAYOUT_MARLIN_FP8,
              QV_SCALE_GROUP,   128, 0, 0, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
              "fp8 e4m3 x bf16, group/block 128 along K, bf16 dequant multiply"),
    /*      name             weights    scale       layout
     *      scale layout            g    arithmetic
     *      summary */
    QQQ_ROW("qqq-w4a8-ch",   QV_FMT_I4, QV_FMT_F32, QV_LAYOUT_QQQ_W4_CHANNEL,
            QV_SCALE_CHANNEL,       0,   ARITH_INT32(QV_DQ_EXACT, 16, QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE),
            "QQQ W4A8: signed int4 (16q in int8) x int8 per-token, channelwise, exact int32"),
    QQQ_ROW("qqq-w4a8-g128", QV_FMT_U4, QV_FMT_F16, QV_LAYOUT_QQQ_W4_GROUP,
            QV_SCALE_GROUP_CHANNEL, 128, ARITH_INT32(QV_DQ_INT8_RNE, 0, QV_EP_TO_F32, QV_EP_MUL_WSCALE2, QV_EP_MUL_ASCALE),
            "QQQ W4A8: uint4 re-rounded to int8 by fp16 group scale, x int8 per-token, fp32 channel epilogue"),
    /*       name                     format       scale layout      activation scale       activation zero point
     *       arithmetic
     *       summary */
    W8A8_ROW("w8a8-i8-tensor",        QV_FMT_I8,   QV_SCALE_TENSOR,  QV_ASCALE_TENSOR,      QV_AZP_NONE,
             ARITH_INT32(QV_DQ_NONE, 0, QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE),
             "int8 x int8, per-tensor x per-tensor, exact int32"),
    W8A8_ROW("w8a8-i8-tok-ch",        QV_FMT_I8,   QV_SCALE_CHANNEL, QV_ASCALE_TOKEN,       QV_AZP_NONE,
             ARITH_INT32(QV_DQ_NONE, 0, QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE),
             "int8 x int8, SmoothQuant-style per-token x per-channel, exact int32"),
    W8A8_ROW("w8a8-i8-tok-ch-azp",    QV_FMT_I8,   QV_SCALE_CHANNEL, QV_ASCALE_TOKEN,       QV_AZP_TOKEN,
             ARITH_INT32(QV_DQ_NONE, 0, QV_EP_SUB_AZP, QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE),
             "int8 x int8, per-token asymmetric (azp per token) x per-channel, exact int32"),
    W8A8_ROW("w8a8-i8-tensor-ch-azp", QV_FMT_I8,   QV_SCALE_CHANNEL, QV_ASCALE_TENSOR,      QV_AZP_TENSOR,
             ARITH_INT32(QV_DQ_NONE, 0, QV_EP_SUB_AZP, QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE),
             "int8 x int8, per-tensor asymmetric (azp per tensor) x per-channel, exact int32"),
    /* The e4m3 rows declare the narrower of their two paths: cuBLASLt's promoted
     * accumulator (M from qv_launch_opts.aq_lt_fp8_min_m on), measured on the H200 as a
     * 14-bit truncating partial promoted to fp32 every 128 K; the mma kernel
     * below it keeps 24 bits, inside the same bound and equal on every unique probe. */
    W8A8_ROW("w8a8-fp8-tensor",       QV_FMT_E4M3, QV_SCALE_TENSOR,  QV_ASCALE_TENSOR,      QV_AZP_NONE,
             ARITH_FP8(QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE),
             "fp8 e4m3 x e4m3, per-tensor x per-tensor, promoted to fp32"),
    W8A8_ROW("w8a8-fp8-tok-ch",       QV_FMT_E4M3, QV_SCALE_CHANNEL, QV_ASCALE_TOKEN,       QV_AZP_NONE,
             ARITH_FP8(QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE),
             "fp8 e4m3 x e4m3, per-token x per-channel, promoted to fp32"),
    W8A8_ROW("w8a8-fp8-block128",     QV_FMT_E4M3, QV_SCALE_BLOCK,   QV_ASCALE_TOKEN_BLOCK, QV_AZP_NONE,
             ARITH_FP8(QV_EP_END),
             "fp8 e4m3 x e4m3, per-token x 128-K activation groups, 128x128 weight blocks (scales applied at each promotion), promoted to fp32"),
    /* The FP4 rows come last: a row's place seeds its fixed suite's data
     * (fuzz/gen.c), so appending keeps every earlier row's cases as they were. */
    /*      name                             scale        g   second scale  layout
     *      act, out     bias         arithmetic
     *      summary */
    FP4_ROW("marlin-mxfp4a16-g32-bf16",      QV_FMT_E8M0,  32, QV_FMT_NONE, QV_LAYOUT_MARLIN_FP4_MX,
            QV_FMT_BF16, QV_FMT_NONE, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
            "MXFP4 (e2m1, e8m0 scale per 32) x bf16, bf16 dequant multiply, Marlin FP4 layout"),
    FP4_ROW("marlin-mxfp4a16-g32-f16",       QV_FMT_E8M0,  32, QV_FMT_NONE, QV_LAYOUT_MARLIN_FP4_MX,
            QV_FMT_F16,  QV_FMT_NONE, ARITH_TC(QV_DQ_MUL_RN, QV_EP_END),
            "MXFP4 (e2m1, e8m0 scale per 32) x f16, f16 dequant multiply, Marlin FP4 layout"),
    FP4_ROW("marlin-mxfp4a16-g32-bias-bf16", QV_FMT_E8M0,  32, QV_FMT_NONE, QV_LAYOUT_MARLIN_FP4_MX,
            QV_FMT_BF16, QV_FMT_BF16, ARITH_TC(QV_DQ_MUL_RN, QV_EP_ADD_BIAS),
            "MXFP4 x bf16 with a bf16 bias added in fp32 before the output cast (gpt-oss)"),
    FP4_ROW("marlin-mxfp4a16-g32-bias-f16",  QV_FMT_E8M0,  32, QV_FMT_NONE, QV_LAYOUT_MARLIN_FP4_MX,
            QV_FMT_F16,  QV_FMT_F16,  ARITH_TC(QV_DQ_MUL_RN, QV_EP_ADD_BIAS),
            "MXFP4 x f16 with an f16 bias added in fp32 before the output cast"),
    FP4_ROW("marlin-nvfp4a16-g16-f16",       QV_FMT_UE4M3, 16, QV_FMT_F32,  QV_LAYOUT_MARLIN_FP4_NV,
            QV_FMT_F16,  QV_FMT_NONE, ARITH_TC(QV_DQ_MUL_RN, QV_EP_MUL_WSCALE2),
            "NVFP4 (e2m1, ue4m3 scale per 16, fp32 global scale) x f16, global scale in the fp32 epilogue"),
    FP4_ROW("marlin-nvfp4a16-g16-bf16",      QV_FMT_UE4M3, 16, QV_FMT_F32,  QV_LAYOUT_MARLIN_FP4_NV,
            QV_FMT_BF16, QV_FMT_NONE, ARITH_TC(QV_DQ_MUL_RN, QV_EP_MUL_WSCALE2),
            "NVFP4 (e2m1, ue4m3 scale per 16, fp32 global scale) x bf16, global scale in the fp32 epilogue"),
    FP4_ROW("marlin-nvfp4a16-g16-bias-f16",  QV_FMT_UE4M3, 16, QV_FMT_F32,  QV_LAYOUT_MARLIN_FP4_NV,
            QV_FMT_F16,  QV_FMT_F16,  ARITH_TC(QV_DQ_MUL_RN, QV_EP_MUL_WSCALE2, QV_EP_ADD_BIAS),
            "NVFP4 x f16, global scale then an f16 bias in the fp32 epilogue"),
    FP4_ROW("marlin-nvfp4a16-g16-bias-bf16", QV_FMT_UE4M3, 16, QV_FMT_F32,  QV_LAYOUT_MARLIN_FP4_NV,
            QV_FMT_BF16, QV_FMT_BF16, ARITH_TC(QV_DQ_MUL_RN, QV_EP_MUL_WSCALE2, QV_EP_ADD_BIAS),
            "NVFP4 x bf16, global scale then a bf16 bias in the fp32 epilogue"),
};
#define N_VARIANTS ((int)(sizeof registry / sizeof registry[0]))

int qv_registry_count(void) { return N_VARIANTS; }

const qv_variant *qv_registry_get(int i)
{
    return (i >= 0 && i < N_VARIANTS) ? &registry[i] : NULL;
}

const qv_variant *qv_variant_find(const char *name)
{
    for (int i = 0; i < N_VARIANTS; i++)
        if (!strcmp(registry[i].name, name)) return &registry[i];
    return NULL;
}

int qv_variant_match(const qv_variant *v, const char *glob)
{
    return !glob || !*glob || fnmatch(glob, v->name, 0) == 0;
}

/* Largest |code value| of an integer format as the kernel multiplies it. */
static double int_max_abs(qv_fmt f)
{
    const qv_fmt_info *fi = qv_fmt_get(f);
    double a = fi->max_finite, b = -fi->min_value;
    return a > b ? a : b;
}

int64_t qv_gran_rows(qv_scale_layout l, int g, int bk, int64_t k)
{
    switch (l) {
    case QV_SCALE_NONE: return 0;
    case QV_SCALE_TENSOR:
    case QV_SCALE_CHANNEL: return 1;
    case QV_SCALE_GROUP:
    case QV_SCALE_GROUP_CHANNEL: return g > 0 ? k / g : 0;
    case QV_SCALE_BLOCK: {
        int64_t b = bk > 0 ? bk : 128; /* 128: the block edge when a row does not say */
        return (k + b - 1) / b;
    }
    }
    return 0;
}

int64_t qv_gran_cols(qv_scale_layout l, int bn, int64_t n)
{
    switch (l) {
    case QV_SCALE_NONE: return 0;
    case QV_SCALE_TENSOR: return 1;
    case QV_SCALE_BLOCK: {
        int64_t b = bn > 0 ? bn : 128;
        return (n + b - 1) / b;
    }
    default: return n;
    }
}

int64_t qv_gran_index(qv_scale_layout l, int bk, int bn, int64_t n, int64_t kk, int64_t j, int64_t grp)
{
    switch (l) {
    case QV_SCALE_TENSOR: return 0;
    case QV_SCALE_CHANNEL: return j;
    case QV_SCALE_GROUP:
    case QV_SCALE_GROUP_CHANNEL: return grp * n + j;
    case QV_SCALE_BLOCK: {
        int64_t b_k = bk > 0 ? bk : 128, b_n = bn > 0 ? bn : 128;
        return (kk / b_k) * ((n + b_n - 1) / b_n) + j / b_n;
    }
    default: return 0;
    }
}

/* Largest |q - z| of integer codes with integer zero points of the same format. */
static double int_span(qv_fmt f)
{
    const qv_fmt_info *fi = qv_fmt_get(f);
    return fi->max_finite - fi->min_value;
}

qv_status qv_variant_check_shape(const qv_variant *v, int64_t m, int64_t n, int64_t k)
{
    /* Every dimension must be positive and fit the kernels' int arguments. */
    const int64_t dim_max = (int64_t)1 << 30;
    if (m < 1 || n < 1 || k < 1)
        return qv_fail(QV_ERR_SHAPE, "%s: m=%lld, n=%lld, k=%lld: every dimension must be >= 1",
                       v->name, (long long)m, (long long)n, (long long)k);
    if (m > dim_max || n > dim_max || k > dim_max)
        return qv_fail(QV_ERR_SHAPE, "%s: dimensions above 2^30 are not supported", v->name);
    if (n % v->n_tile)
        return qv_fail(QV_ERR_SHAPE, "%s: N=%lld is not a multiple of %d (the layout's N tile)",
                       v->name, (long long)n, v->n_tile);
    if (k % v->k_tile)
        return qv_fail(QV_ERR_SHAPE, "%s: K=%lld is not a multiple of %d (the layout's K tile)",
                       v->name, (long long)k, v->k_tile);
    if (v->g > 0 && k % v->g)
        return qv_fail(QV_ERR_SHAPE, "%s: group size g=%d does not divide K=%lld (the last scale group would be "
                       "partial)", v->name, v->g, (long long)k);
    if (v->zp_layout == QV_SCALE_GROUP && v->zp_g > 0 && k % v->zp_g)
        return qv_fail(QV_ERR_SHAPE, "%s: zero-point group size %d does not divide K=%lld", v->name, v->zp_g,
                       (long long)k);
    if (v->arith.accum == QV_ACC_INT32) {
        /* The int32 accumulator is exact only while K * max|a| * max|w| < 2^31.
         * QQQ per-group re-rounds weights to int8, so |w| <= 128 there; integer
         * zero points make |q - z| up to the code range. */
        double amax = int_max_abs(v->afmt);
        double wmax = v->arith.dequant == QV_DQ_INT8_RNE ? 128.0
                      : v->zero_point == QV_ZP_INT   ? int_span(v->wfmt)
                                                     : int_max_abs(v->wfmt);
        if (v->arith.w_mul > 1) wmax *= v->arith.w_mul;
        double worst = (double)k * amax * wmax;
        if (v->azp != QV_AZP_NONE) worst *= 2.0; /* A_q.B_q and azp*colsum(B_q) */
        if (worst >= 2147483648.0)
            return qv_fail(QV_ERR_SHAPE,
                           "%s: K=%lld could overflow the exact int32 accumulator (K*max|a|*max|w| = %.0f >= 2^31)",
                           v->name, (long long)k, worst);
    }
    return QV_OK;
}

const char *qv_scale_layout_name(qv_scale_layout s)
{
    switch (s) {
    case QV_SCALE_NONE: return "none";
    case QV_SCALE_TENSOR: return "tensor";
    case QV_SCALE_CHANNEL: return "channel";
    case QV_SCALE_GROUP: return "group";
    case QV_SCALE_GROUP_CHANNEL: return "group+channel";
    case QV_SCALE_BLOCK: return "block";
    }
    return "?";
}

static const char *const layout_names[QV_LAYOUT_COUNT] = {
    [QV_LAYOUT_PLAIN_NK] = "plain-nk",
    [QV_LAYOUT_MARLIN_W4] = "marlin-w4",
    [QV_LAYOUT_MARLIN_W4_ZP] = "marlin-w4-zp",
    [QV_LAYOUT_MARLIN_W8] = "marlin-w8",
    [QV_LAYOUT_MARLIN_FP8] = "marlin-fp8",
    [QV_LAYOUT_QQQ_W4_CHANNEL] = "qqq-w4-channel",
    [QV_LAYOUT_QQQ_W4_GROUP] = "qqq-w4-group",
    [QV_LAYOUT_LOGICAL] = "logical",
    [QV_LAYOUT_MARLIN_FP4_MX] = "marlin-fp4-mx",
    [QV_LAYOUT_MARLIN_FP4_NV] = "marlin-fp4-nv",
};

const char *qv_layout_name(qv_layout l)
{
    return (l >= 0 && l < QV_LAYOUT_COUNT) ? layout_names[l] : "?";
}

qv_layout qv_layout_from_name(const char *name)
{
    for (int l = 0; l < QV_LAYOUT_COUNT; l++)
        if (!strcmp(layout_names[l], name)) return (qv_layout)l;
    return QV_LAYOUT_COUNT;
}

const char *qv_accum_name(qv_accum a)
{
    switch (a) {
    case QV_ACC_INT32: return "int32";
    case QV_ACC_TC_F32: return "tc-f32";
    case QV_ACC_TC_FP8: return "tc-fp8";
    case QV_ACC_FMA_F32: return "fma-f32";
    }
    return "?";
}

const char *qv_dequant_name(qv_dequant d)
{
    switch (d) {
    case QV_DQ_NONE: return "none";
    case QV_DQ_EXACT: return "exact";
    case QV_DQ_MUL_RN: return "mul-rn";
    case QV_DQ_MUL_RN2: return "mul-rn2";
    case QV_DQ_INT8_RNE: return "int8-rne";
    case QV_DQ_F32: return "mul-f32";
    }
    return "?";
}

const char *qv_act_scale_name(qv_act_scale s)
{
    switch (s) {
    case QV_ASCALE_NONE: return "none";
    case QV_ASCALE_TENSOR: return "tensor";
    case QV_ASCALE_TOKEN: return "token";
    case QV_ASCALE_TOKEN_BLOCK: return "token-block128";
    }
    return "?";
}
