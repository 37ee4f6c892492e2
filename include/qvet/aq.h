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

/* How many launches of the QQQ W4A8 rows in this process took the wgmma
 * kernel (kernels/qqq_wg.cu, sm_90a; from M = QVET_AQ_WG_MIN_M, default 17);
 * read by the GPU suite like qv_aq_lt_runs. No CUDA call. */
long long qv_qqq_wg_runs(void);

/* The tiles of an (m, n, k) QQQ problem that the wgmma kernel's schedule
 * shares over the blocks along K (its stream-K tail; 0 when none), for the
 * environment as it is now (QVET_AQ_WG_TILE, QVET_AQ_WG_BLOCKS,
 * QVET_AQ_WG_STREAMK); -1 when one of them is malformed. No CUDA call. */
int qv_qqq_wg_tail_tiles(int m, int n, int k);

/* Which kernel an (m, n, k) QQQ problem (group: per-group rows, group size g)
 * takes for the environment as it is now: 1 the wgmma kernel (by default
 * from M = 17, and below that on layers so wide that the mma kernel would not
 * split K), 0 the mma kernel (or cuBLASLt), -1 when QVET_AQ_WG_MIN_M is
 * malformed. No CUDA call. */
int qv_qqq_wg_route(int group, int m, int n, int k, int g);

/* QVET_LT_TRACE=1 (measurements): one stderr line with the configuration of
 * a cuBLASLt algorithm (algo: a cublasLtMatmulAlgo_t, or NULL for none) that
 * `label`'s (m, n, k) got from the heuristic, with its workspace and waves.
 * The activation-quantized rows' cuBLASLt paths and the benchmark's cuBLASLt
 * baselines call it once per shape. */
void qv_lt_trace_algo(const char *label, int m, int n, int k, const void *algo, size_t ws_bytes, float waves);

/* The default smallest M of the W8A8 e4m3 rows' cuBLASLt path, per scaling
 * (QVET_AQ_LT_FP8_MIN_M overrides all of them; "off" never takes the path).
 * H200, qvet bench, µs per layer:
 *  - per tensor: cuBLASLt 227-235 at M = 1..32 on the Llama-3-70B block, the
 *    mma kernel 265-342: M >= 1;
 *  - per token x channel, by the layer's size N x K (2026-11-30, --runs 15,
 *    the mma kernel with its one-wave plan / cuBLASLt's outer vectors):
 *    - N K < 2^26 (Llama-2-7B qkv, o, down): M = 8 qkv 27.1 / 28.4, o 17.2 /
 *      16.6, down 31.1 / 35.5; M = 12 30.3 / 27.8, 20.1 / 16.8, 36.9 / 32.9:
 *      M >= 12;
 *    - larger: the mma kernel at M = 16 Llama-2-7B gate_up 43.3 / 42.8,
 *      Llama-3-70B qkv 47.2 / 49.2, o 37.5 / 42.0, gate_up 126.9 / 181.2,
 *      down 77.6 / 112.4; past its 16-row tile the mma kernel runs 64-row
 *      tiles (621 at M = 64 on the Llama-3-70B block): M >= 17;
 *  - 128x128 blocks: cuBLASLt (VEC128, M rounded up to 4) 116.3 / 299.3 on the
 *    Llama-2-7B / Llama-3-70B block at M = 1, the mma kernel 107.0 / 291.6;
 *    at M = 4 cuBLASLt 89.5 / 262.2, the mma kernel 115.9 / 301.3: M >= 4. */
#define QV_AQ_LT_FP8_MIN_M_TENSOR 1
#define QV_AQ_LT_FP8_MIN_M_TOK_CH_SMALL 12
#define QV_AQ_LT_FP8_MIN_M_TOK_CH 17
#define QV_AQ_LT_FP8_MIN_M_BLOCK 4

/* From this M on, the 128x128-block row runs cuBLASLt's BLK128x128 weight
 * scaling instead of VEC128 over expanded weight scales (same arithmetic);
 * QVET_AQ_LT_FP8_BLK_MIN_M overrides it ("off": never). H200, 2026-11-30,
 * cuBLASLt alone (tools/probe-blk128.cu), µs, BLK128x128 / VEC128:
 * Llama-3-70B gate_up M = 64 143.6 / 128.4, M = 256 198.4 / 238.0, M = 1024
 * 698.5 / 879.5; Llama-2-7B o M = 64 16.8 / 10.4, M = 256 17.2 / 17.6. */
#define QV_AQ_LT_FP8_BLK_MIN_M 128

struct qv_variant;

/* The default smallest M above for row v at an N x K layer (0 when v is not
 * a W8A8 e4m3 row with one of the three scalings, or N or K < 1). Makes no
 * CUDA call. */
int qv_aq_lt_fp8_default_min_m(const struct qv_variant *v, int n, int k);

/* How many launches of the W8A8 e4m3 rows in this process took the cuBLASLt
 * fp8 path (kernels/aq_lt_fp8.cu: cuBLASLt's scaling modes, promoted
 * accumulation) instead of the mma kernel, and how many of them ran the
 * BLK128x128 form of the block row; the GPU suite reads them to prove which
 * path ran. Make no CUDA call. */
long long qv_aq_lt_fp8_runs(void);
long long qv_aq_lt_fp8_blk_runs(void);

#ifdef __cplusplus
}
#endif
#endif
