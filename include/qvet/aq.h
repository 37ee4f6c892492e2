/* aq.h: extra entry points of the activation-quantized kernel family (QQQ
 * W4A8, W8A8 int8/fp8) beyond the launch ABI of gemm.h: the e4m3 tensor-core
 * precision probe. Included by the family's GPU suite and its benchmark. Rule:
 * the probe runs the very instruction sequence the W8A8 e4m3 kernel uses, so
 * what it measures is what the registry rows declare (promote_nc, acc_bits);
 * and the family's benchmark. */
#ifndef QVET_AQ_H
#define QVET_AQ_H

#include <stdint.h>

#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The W8A8 e4m3 kernel's promotion interval: 4 chained m16n8k32 mma = 128 K. */
#define QV_AQ_FP8_PROMOTE_K 128

/* One dot product through mma.sync.m16n8k32 e4m3 -> f32 on the device:
 * a, b: (k) host e4m3 codes (row 0 of A, column 0 of B; everything else is 0),
 * k a multiple of 32. Every `chain` consecutive k32 instructions accumulate in
 * the tensor core's own accumulator starting from c_init for the first chain
 * and from 0 afterwards; each chain's result is then added to an fp32 total in
 * order (chain = 4 is the kernel's promotion every 128; chain = k/32 is no
 * promotion at all). *out = the total. QV_ERR_NODEVICE without a GPU. */
qv_status qv_aq_fp8_probe(const uint8_t *a, const uint8_t *b, int k, int chain, float c_init, float *out);

/* The family's benchmark (bench/aq_bench.c): prints the block-time table of
 * DESIGN.md §8 for our rows, cuBLAS fp16, cuBLASLt fp8/int8 W8A8 and the
 * activation quantization share. Returns 0 when every point ran, 1 if some
 * failed, 3 on an environment error; prints "SKIP: no CUDA device" without one. */
int qv_aq_bench(void);

/* How many launches of the integer rows (QQQ W4A8, W8A8 int8) in this process
 * took the large-M path (cuBLASLt int8 IGMMA and the same fp32 epilogue,
 * kernels/aq_lt.cu) instead of the mma kernel; the GPU suite reads it to prove
 * which path ran. Makes no CUDA call. */
long long qv_aq_lt_runs(void);

/* The default smallest M of the W8A8 e4m3 rows' cuBLASLt path, per scaling
 * (QVET_AQ_LT_FP8_MIN_M overrides all three; "off" never takes the path).
 * Llama-3-70B block, H200, 2026-11-29, µs (qvet bench --runs 10):
 *  - per tensor: cuBLASLt 227-235 at M = 1..32, the mma kernel 265-342: M >= 1;
 *  - per token x channel: cuBLASLt's outer vectors 407/395/390 at M = 1/4/16,
 *    the mma kernel 281/295/364; past its 16-row tile the mma kernel runs
 *    64-row tiles (621 at M = 64) and cuBLASLt 365 at M = 32: M >= 17;
 *  - 128x128 blocks: cuBLASLt (VEC128) 236 at M = 4 and 16, the mma kernel
 *    297, 307 and 364 at M = 1, 4 and 16; other M run on M rounded up to 4
 *    (kernels/aq_lt_fp8.cu): M >= 1. */
#define QV_AQ_LT_FP8_MIN_M_TENSOR 1
#define QV_AQ_LT_FP8_MIN_M_TOK_CH 17
#define QV_AQ_LT_FP8_MIN_M_BLOCK 1

struct qv_variant;

/* The default smallest M above for row v (0 when v is not a W8A8 e4m3 row
 * with one of the three scalings). Makes no CUDA call. */
int qv_aq_lt_fp8_default_min_m(const struct qv_variant *v);

/* How many launches of the W8A8 e4m3 rows in this process took the cuBLASLt
 * fp8 path (kernels/aq_lt_fp8.cu: cuBLASLt's scaling modes, promoted
 * accumulation) instead of the mma kernel; the GPU suite reads it to prove
 * which path ran. Makes no CUDA call. */
long long qv_aq_lt_fp8_runs(void);

#ifdef __cplusplus
}
#endif
#endif
