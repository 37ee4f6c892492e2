/* ref_operands.h: a problem decoded into the operands its accumulator sees.
 * Included by reference/ (truth, bound, model, verify, probe) only. Rule: the
 * decoding applies exactly the deterministic roundings the row declares
 * (fp16/bf16 dequant multiply, QQQ's int8 re-rounding, w_mul, azp, block scales
 * folded into the operands) and nothing else, so every value is a double exactly. */
#ifndef QVET_REF_OPERANDS_H
#define QVET_REF_OPERANDS_H

#include <stdint.h>

#include "qvet/problem.h"

typedef struct ref_operands {
    int64_t m, n, k;
    double *a;      /* (m, k) row-major: activation codes' values, azp subtracted; for
                       block-128 rows multiplied by a_scale[m][k/128] */
    double *w;      /* (k, n) row-major: the weight the accumulator multiplies:
                       dequantized per the row, times w_mul; for block-128 rows
                       multiplied by scales[k/128][n/128] */
    double *col_s1; /* (n) MUL_WSCALE factor of each column, 1 when absent */
    double *col_s2; /* (n) MUL_WSCALE2 factor of each column, 1 when absent */
    double *row_s;  /* (m) MUL_ASCALE factor of each row, 1 when absent */
    int ep_ops;     /* fp32 roundings in the epilogue (TO_F32 and each MUL) */
    int nonfinite;  /* 1 when an operand or scale is NaN or Inf */
} ref_operands;

/* fold_block: 1 folds block-128 activation and weight scales into a and w (the
 * truth); 0 leaves them out (the model applies them at each promotion). */
qv_status ref_operands_create(const qv_problem *p, int fold_block, ref_operands *o);
void      ref_operands_destroy(ref_operands *o);

/* x rounded to nearest-even in a binary format with `man_bits` fraction bits,
 * minimum normal exponent `emin` and largest finite value `maxf`; beyond the
 * rounding threshold it gives +-Inf (sat 0) or +-maxf (sat 1). Exact for every
 * finite double x. */
double ref_round_fmt(double x, int man_bits, int emin, double maxf, int sat);
/* ref_round_fmt with the parameters of an output/activation format (F16, BF16, F32). */
double ref_round_to(qv_fmt f, double x, int sat);

/* The accumulation constant alpha of the row (DESIGN.md §3) for depth k. */
double ref_alpha(const qv_variant *v, int64_t k);

#endif
