/* probe.h: deterministic input generators for one GEMM problem (docs/design.md §3, §5).
 * Included by the campaign, `qvet verify` tests and the reference's tests. Rule:
 * a probe is a pure function of (variant, m, n, k, kind, regime, seed); "unique"
 * probes (exact, one-hot, witnesses) have exactly one correct output under the
 * row's declared arithmetic, which ref_model_run computes, so a kernel's output is
 * compared with it bit for bit (ref_verify_bitexact). */
#ifndef QVET_PROBE_H
#define QVET_PROBE_H

#include <stdint.h>

#include "qvet/problem.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qv_probe_kind {
    QV_PROBE_EXACT = 0,            /* small-integer activations, power-of-two scales that differ per
                                      channel, group and token; every partial sum exact */
    QV_PROBE_ONEHOT,               /* one-hot activation rows: output = dequantized weights x scales */
    QV_PROBE_RANDOM,               /* random data in a scale regime (qv_regime) */
    QV_PROBE_WITNESS_FP8_PROMOTE,  /* one product 2^16 then ones: the fp8 promotion interval shows */
    QV_PROBE_WITNESS_SPLITK,       /* partial sums 2049 and -2048: an fp16 reduction loses the 1 */
    QV_PROBE_WITNESS_SCALE_OVERFLOW, /* accumulator > 65504 with a small scale: cast-first overflows */
    QV_PROBE_WITNESS_RNE_TIE,      /* outputs exactly halfway between codes: RNE vs truncation/away */
    QV_PROBE_WITNESS_BIAS,         /* a sum one past a tie plus a bias of 1: the bias added in fp32
                                      before the output cast, not after it (nor dropped) */
    /* The FP4 probes: e2m1 weights, e8m0 / ue4m3 block scales and the NVFP4
     * global scale at the values vLLM's Marlin FP4 preparation treats apart
     * (layout.h); unique outputs, every partial sum exact. */
    QV_PROBE_FP4_CODES,            /* every e2m1 code, -0 included, in every column (K >= 16) and
                                      along every row's 16 consecutive columns; one-hot rows */
    QV_PROBE_FP4_SCALE_ENDS,       /* block scales at the ends of their range: e8m0 codes 1 and 254
                                      (f16: 1 and 104, 141 and 142), ue4m3 0, subnormals and 448
                                      (bf16: the low or the high end, which the lift cannot hold
                                      together); an e8m0 column whose dequantized weights overflow
                                      to Inf */
    QV_PROBE_FP4_GLOBAL_ONE,       /* global scale 1 with every block scale below 2^-6 (the
                                      checkpoints of vLLM #34577) */
    QV_PROBE_FP4_GLOBAL_TINY,      /* a tiny global scale with block scales up to 448: the
                                      accumulator far past 65504 before the global scale */
    QV_PROBE_FP4_GLOBAL_HUGE,      /* the largest global scale the layout carries (f32 G = 2^127
                                      with bf16) on tiny block scales and activations */
    QV_PROBE_COUNT
} qv_probe_kind;

typedef enum qv_regime {
    QV_REGIME_LOGUNIFORM = 0, /* scales log-uniform over 2^8, distinct per channel/group/token */
    QV_REGIME_TINY,           /* tiny and subnormal products */
    QV_REGIME_NEAR_MAX,       /* outputs near the fp16 maximum */
    QV_REGIME_ZERO_GROUP,     /* all-zero groups, zero channels and a zero activation row */
    QV_REGIME_OUTLIER,        /* outlier activation channels (x100) */
    QV_REGIME_COUNT
} qv_regime;

/* Names as in the results format: "exact", "onehot", "random", "witness-fp8-promote",
 * "witness-splitk", "witness-scale-overflow", "witness-rne-tie", "witness-bias",
 * "fp4-codes", "fp4-scale-ends", "fp4-global-one", "fp4-global-tiny",
 * "fp4-global-huge"; regimes "loguniform", "tiny", "near-max", "zero-group",
 * "outlier". */
const char   *qv_probe_name(qv_probe_kind kind);
qv_probe_kind qv_probe_from_name(const char *name); /* QV_PROBE_COUNT if unknown */
const char   *qv_regime_name(qv_regime r);
qv_regime     qv_regime_from_name(const char *name); /* QV_REGIME_COUNT if unknown */

/* 1 when the probe's output is unique under the declared arithmetic (compare bit
 * for bit against ref_model_run); 0 for random probes (use ref_verify). */
int ref_probe_is_unique(qv_probe_kind kind);

/* 1 when the probe means something for this row and shape (e.g. the fp8
 * promotion witness only for fp8 tensor-core rows, the scale-overflow witness
 * only for rows that scale after accumulating into an fp16 output). */
int ref_probe_applies(const qv_variant *v, qv_probe_kind kind, int64_t m, int64_t n, int64_t k);

/* Fills every buffer of p (created by qv_problem_create for its variant and
 * shape) for the probe; `regime` matters for QV_PROBE_RANDOM only. Returns
 * QV_ERR_UNSUPPORTED when the probe does not apply to the row or shape. */
qv_status ref_probe_fill(qv_problem *p, qv_probe_kind kind, qv_regime regime, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif
