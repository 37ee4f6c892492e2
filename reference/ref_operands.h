/* ref_operands.h: a problem decoded into the operands its accumulator sees.
 * Included by reference/ (truth, model, verify, probe, moe, operands_check)
 * only. Rule: the decoding applies exactly the deterministic roundings the
 * row declares (fp16/bf16 dequant multiply, QQQ's int8 re-rounding, w_mul,
 * azp, block scales folded into the operands) and nothing else, so every
 * value is a double exactly. */
#ifndef QVET_REF_OPERANDS_H
#define QVET_REF_OPERANDS_H

#include <stdint.h>

#include "qvet/problem.h"

typedef struct ref_operands {
    int64_t m, n, k;
    double *a;      /* (m, k) row-major: activation codes' values, azp subtracted; for
                       block-128 rows multiplied by the scale of (token, k/128),
                       stored (ceil(k/128), m): a_scale[(k/128) m + i] */
    double *w;      /* (k, n) row-major: the weight the accumulator multiplies:
                       dequantized per the row, times w_mul; for block-128 rows
                       multiplied by scales[k/128][n/128] */
    double *col_s1; /* (n) MUL_WSCALE factor of each column, 1 when absent */
    double *col_s2; /* (n) MUL_WSCALE2 factor of each column, 1 when absent */
    double *row_s;  /* (m) MUL_ASCALE factor of each row, 1 when absent */
    double *bias;   /* (n) ADD_BIAS term of each column, 0 when absent */
    int ep_ops;     /* fp32 roundings in the epilogue (TO_F32, each MUL and the ADD) */
    int seg;        /* qv_spec_segment: K extent of the scaled partial sums, 0 if none */
    int folded;     /* 1 when segment scales are folded into a and w */
    int nonfinite;  /* 1 when an operand, scale or bias is NaN or Inf */
    size_t w_bytes; /* the allocation behind w (ref_operands_destroy hands it back) */
} ref_operands;

/* fold_block: 1 folds the scales that vary along K and multiply partial sums
 * (qv_spec_segment: group or block weight scales with dq=exact, per-128-K
 * activation scales) into a and w (the truth); 0 leaves them out (the model
 * and the bound apply them to each segment's partial sum). */
qv_status ref_operands_create(const qv_problem *p, int fold_block, ref_operands *o);
/* The same with the weights' decoding on `jobs` threads where it runs in
 * blocks (the same values for every jobs). */
qv_status ref_operands_create_jobs(const qv_problem *p, int fold_block, int jobs, ref_operands *o);
void      ref_operands_destroy(ref_operands *o);

/* The factor of epilogue step st for element (i, j): its scale, or 1 for steps
 * that do not multiply. */
double ref_ep_factor(const ref_operands *o, qv_ep_step st, int64_t i, int64_t j);

/* The product of the segment scales of element (i, j) for K segment sg (the
 * activation's per-128-K scale times the weight's group or block scale, each
 * 1 when absent), as exact doubles: *sa, *sw. */
void ref_segment_scales(const qv_problem *p, int64_t i, int64_t j, int64_t sg, double *sa, double *sw);

/* RN to format f (F16, BF16, F32, E4M3 or any qv_fmt) of the exact sum x + y
 * of two doubles, correctly rounded whatever their exponents (through a
 * round-to-odd double). sat: saturate instead of overflowing to Inf. */
double ref_round_sum(qv_fmt f, double x, double y, int sat);

/* x rounded to nearest-even in a binary format with `man_bits` fraction bits,
 * minimum normal exponent `emin` and largest finite value `maxf`; beyond the
 * rounding threshold it gives +-Inf (sat 0) or +-maxf (sat 1). Exact for every
 * finite double x. */
double ref_round_fmt(double x, int man_bits, int emin, double maxf, int sat);
/* ref_round_fmt with the parameters of an output/activation format (F16, BF16, F32). */
double ref_round_to(qv_fmt f, double x, int sat);

/* The accumulation constant alpha of the row (docs/design.md §3) for depth k. */
double ref_alpha(const qv_variant *v, int64_t k);

/* The power of two e such that the fp32 accumulator of a kernel reading p's
 * packed layout holds the declared sum times 2^e: 0 for every layout but
 * marlin-fp4-nv, whose dequantization leaves each weight 2^-bias small (bias
 * 14 with f16 activations, 126 with bf16) while its scale bytes carry
 * s 2^s_pow2, so e = s_pow2 - bias, and the global scale it multiplies in
 * the epilogue is g 2^-e (layout.h). s_pow2 follows the layout's rule from
 * p's ue4m3 scales: 7, and with bf16 activations 7 + j, j >= 0 the smallest
 * that lifts the smallest nonzero scale to s 2^(7 + j) >= 2. The model
 * accumulates in those units; the bound charges their fp32 underflow. */
int ref_acc_pow2(const qv_problem *p);

/* ref_operands_check's comparison for operands already made by
 * ref_operands_create (their `folded` says which form): the truth checks its
 * own this way instead of decoding twice. */
qv_status ref_operands_check_made(const qv_problem *p, const ref_operands *o);

#endif
