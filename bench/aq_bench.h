/* aq_bench.h: the activation-quantized family's parts of `qvet bench`
 * (bench/aq_bench.c), used by bench/cmd_bench.c: the cuBLASLt W8A8 baselines
 * and the timing of the activation quantizer alone. Internal to bench/.
 * Rule: every timing here is taken the way bench.h says (CUDA events, median,
 * weights rotated past the L2), so it sits in the same table as the rows. */
#ifndef QVET_BENCH_AQ_BENCH_H
#define QVET_BENCH_AQ_BENCH_H

#include "internal/bench.h"
#include "qvet/formats.h"
#include "qvet/gemm.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cuBLASLt W8A8 on one layer: D (m, n) = A (m, k) x W (n, k)^T with
 * fp8 != 0: e4m3 x e4m3 -> f16, per-tensor scales (device 1.0f), fp32 compute
 * and the default (promoted) accumulation; fp8 == 0: int8 x int8 -> int32.
 * Times every M of ms[n_m] after `warmup` launches, `runs` timed, weights
 * rotated through enough copies to exceed twice the 60 MB L2. t[i] gets the
 * timing of ms[i]; ok[i] is 0 where cuBLASLt has no algorithm or the launch
 * failed (the message goes to stderr, the other M values still run). Returns
 * an error only for an allocation or CUDA failure outside the launches.
 * opts: the run's launch options (their QV_TRACE_LT prints each algorithm). */
qv_status qv_bench_lt_layer(int fp8, int n, int k, const int *ms, int n_m, int warmup, int runs,
                            const qv_launch_opts *opts, qv_bench_timing *t, int *ok);

/* How a cuBLASLt fp8 baseline scales both operands: per tensor (SCALAR_32F,
 * what qv_bench_lt_layer times), per output channel x per token (OUTER_VEC_32F,
 * like w8a8-fp8-tok-ch), one scale per 128 K of every weight and activation
 * row (VEC128_32F), or one per 128 x 128 block of the weights (BLK128x128_32F)
 * and per 128 K of every activation row (VEC128_32F): the two forms
 * w8a8-fp8-block128's cuBLASLt path runs (kernels/aq_lt_fp8.cu). */
typedef enum qv_bench_lt_scale {
    QV_BENCH_LT_TENSOR = 0,
    QV_BENCH_LT_OUTER,
    QV_BENCH_LT_VEC128,
    QV_BENCH_LT_BLK
} qv_bench_lt_scale;

/* qv_bench_lt_layer's fp8 baseline with the scaling `scale`: f32 scales of 1.0
 * ((1), (n) / (m), (ceil(k/128), n) / (ceil(k/128), m), or (ceil(n/128),
 * ceil(k/128) rounded up to 4) / (ceil(k/128), m)), one weight-scale
 * buffer per rotating weight copy; with outer-vector or VEC128 scales, split
 * K only through fp32 partials in the workspace (the e4m3 rows' own rule).
 * Same timing, results and errors. */
qv_status qv_bench_lt_fp8_layer(qv_bench_lt_scale scale, int n, int k, const int *ms, int n_m, int warmup, int runs,
                                const qv_launch_opts *opts, qv_bench_timing *t, int *ok);

/* The per-token activation quantizer (gemm.h qv_act_quant) alone:
 * rows x cols fp16 activations -> qfmt codes and (rows) f32 scales, for each
 * rows of rows_list[n] (one buffer sized for the largest). t[i] gets the timing
 * of rows_list[i], events around each launch like every row of the bench;
 * queued_us[i] the median over `runs` batches of launches queued behind a
 * sleeping wait kernel of AQB_WAIT_US (qv_bench_wait), per launch: the GPU's own time when it never waits for the
 * host to submit (what a CUDA graph or a busy stream sees). Every launch
 * under opts (NULL: the defaults). */
qv_status qv_bench_act_quant(qv_fmt qfmt, const int *rows_list, int n, int cols, int warmup, int runs,
                             const qv_launch_opts *opts, qv_bench_timing *t, double *queued_us);

#ifdef __cplusplus
}
#endif
#endif
