/* aq.h: extra entry points of the activation-quantized kernel family (QQQ
 * W4A8, W8A8 int8/fp8) beyond the launch ABI of gemm.h: the e4m3 tensor-core
 * precision probe. Included by the family's GPU suite and its benchmark. Rule:
 * the probe runs the very instruction sequence the W8A8 e4m3 kernel uses, so
 * what it measures is what the registry rows declare (promote_nc, acc_bits);
 * and the family's benchmark. */
#ifndef QVET_AQ_H
#define QVET_AQ_H

#include <stdint.h>

#include <stddef.h>

#include "qvet/gemm.h"
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

/* The family's benchmark (bench/cmd_bench.c, through `qvet bench`, whose
 * launch options come from the QVET_* variables): prints
 * the block-time table of docs/design.md §8 for our rows, cuBLAS fp16, cuBLASLt
 * fp8/int8 W8A8 and the activation quantization share. Returns 0 when every point ran, 1 if some
 * failed (or `qvet bench` refused its arguments or a variable), 3 on an environment error; prints
 * "SKIP: no CUDA device" without one. */
int qv_aq_bench(void);

/* How many launches of the integer rows (QQQ W4A8, W8A8 int8) in this process
 * took the large-M path (cuBLASLt int8 IGMMA and the same fp32 epilogue,
 * kernels/aq_lt.cu) instead of the mma kernel; the GPU suite reads it to prove
 * which path ran. Makes no CUDA call. */
long long qv_aq_lt_runs(void);

/* How many launches of the QQQ W4A8 rows in this process took the wgmma
 * kernel (kernels/qqq_wg.cu, sm_90a; from M = aq_wg_min_m, default 17);
 * read by the GPU suite like qv_aq_lt_runs. No CUDA call. */
long long qv_qqq_wg_runs(void);

/* The tiles of an (m, n, k) QQQ problem that the wgmma kernel's schedule
 * shares over the blocks along K (its stream-K tail; 0 when none) under
 * options o (aq_wg_tile, aq_wg_blocks, aq_wg_streamk); -1 when o is refused
 * or there is no device to plan for (qv_launch_ctx_get). */
int qv_qqq_wg_tail_tiles(int m, int n, int k, const qv_launch_opts *o);

/* Which kernel an (m, n, k) QQQ problem (group: per-group rows, group size g)
 * takes under options o: 1 the wgmma kernel (by default from M = 17, and
 * below that on layers so wide that the mma kernel would not split K), 0 the
 * mma kernel (or cuBLASLt), -1 when o is refused or there is no device to
 * plan for. */
int qv_qqq_wg_route(int group, int m, int n, int k, int g, const qv_launch_opts *o);

/* One stderr line (measurements) with the configuration of a cuBLASLt
 * algorithm (algo: a cublasLtMatmulAlgo_t, or NULL for none) that `label`'s
 * (m, n, k) got from the heuristic, with its workspace and waves. The
 * activation-quantized rows' cuBLASLt paths and the benchmark's cuBLASLt
 * baselines call it once per shape when their options' trace has
 * QV_TRACE_LT. */
void qv_lt_trace_algo(const char *label, int m, int n, int k, const void *algo, size_t ws_bytes, float waves);

/* The M from which the 128x128-block e4m3 row on cuBLASLt runs the
 * BLK128x128 weight scaling instead of VEC128 over expanded weight scales
 * (same arithmetic) on an N x K layer by default under options o (their
 * arch picks the tuning table's row): 128, or 256 on layers with N and K at
 * most 8192 on the H200's row; -1 when o is refused or there is no device to
 * plan for. */
int qv_aq_lt_fp8_blk_default_min_m(int n, int k, const qv_launch_opts *o);

/* 1 when the block row on cuBLASLt asks for the BLK128x128 form at (m, n, k)
 * under options o: from the threshold above (or o's aq_lt_fp8_blk_min_m), at
 * M = 128 and from M = 193 (VEC128 is faster at M = 129-192); -1 as above. */
int qv_aq_lt_fp8_blk_form(int m, int n, int k, const qv_launch_opts *o);

struct qv_variant;

/* The default smallest M of the W8A8 e4m3 rows' cuBLASLt path for row v at
 * an N x K layer under options o, per scaling (o's aq_lt_fp8_min_m overrides
 * all of them): on the H200's row, per tensor and per token x channel (in
 * two steps) 1, 128x128 blocks 4. 0 when v is not a W8A8 e4m3 row with one
 * of the three scalings, or N or K < 1; -1 as above. */
int qv_aq_lt_fp8_default_min_m(const struct qv_variant *v, int n, int k, const qv_launch_opts *o);

/* How many launches of the W8A8 e4m3 rows in this process took the cuBLASLt
 * fp8 path (kernels/aq_lt_fp8.cu: cuBLASLt's scaling modes, promoted
 * accumulation) instead of the mma kernel, and how many of them ran the
 * BLK128x128 form of the block row; the GPU suite reads them to prove which
 * path ran. Make no CUDA call. */
long long qv_aq_lt_fp8_runs(void);
long long qv_aq_lt_fp8_blk_runs(void);
/* How many of them ran per token x channel's two-step form. */
long long qv_aq_lt_fp8_two_step_runs(void);

#ifdef __cplusplus
}
#endif
#endif
