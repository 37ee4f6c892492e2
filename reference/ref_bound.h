/* ref_bound.h: the certified per-element bound E (bound.c has the derivation).
 * Included by reference/truth.c. Rule: every term is a proven bound on
 * a rounding the declared arithmetic or the reference itself performs; nothing
 * is a tolerance tuned to make a case pass. */
#ifndef QVET_REF_BOUND_H
#define QVET_REF_BOUND_H

#include <stdint.h>

/* alpha: ref_alpha of the row; g: sum |a||w| of the element (certified upper
 * bound); s: product of the epilogue scale magnitudes; y: the exact value;
 * ep_ops: fp32 roundings in the epilogue; k: depth; unit: how many declared
 * units one unit of the kernel's accumulator is (2^-ref_acc_pow2; 1 when it
 * sums the declared values), which sizes its fp32 underflow; ref_err: the
 * reference's own error bound on y (0 on exact paths). With alpha = 1, g may
 * be any certified bound on the accumulator's error (ref_bound_accum). */
double ref_bound_element(double alpha, double g, double s, double y, int ep_ops, int64_t k, double unit,
                         double ref_err);

/* The same with a bias added between the epilogue's multiplications: n1
 * roundings and scale product s1 before it (y1 = acc * s1, exact), the
 * addition (y2 = y1 + bias), then n2 roundings and scale product s2 (y = y2 * s2). */
double ref_bound_element_bias(double alpha, double g, double s1, int n1, double y1, double y2, double s2, int n2,
                              double y, int64_t k, double unit, double ref_err);

/* How a declared accumulator sums K products, for ref_bound_accum. */
typedef enum ref_acc_kind {
    REF_ACC_INT,     /* exact integer sums */
    REF_ACC_TC_F32,  /* fp32: alpha_per_k * K * M per sum (docs/design.md §3's constants) */
    REF_ACC_FMA_F32,
    REF_ACC_NARROW   /* a `bits`-wide truncating accumulator promoted every `promote` products */
} ref_acc_kind;

typedef struct ref_accum_model {
    ref_acc_kind kind;
    double alpha_per_k; /* TC_F32 / FMA_F32: the relative error per product */
    int bits;           /* NARROW: significand bits */
    int64_t promote;    /* NARROW: promotion interval, 0 never (the whole segment) */
    int64_t seg;        /* > 0: segments of this many products, each scaled by sigma and added in fp32 */
    int red_f32;        /* INT without segments: partials of K slices added in fp32 */
} ref_accum_model;

/* A certified bound on |accumulated - exact| for one output element in the
 * units of the scaled sum: ap (k) the products a_k w_k in K order (signed: a
 * block of one sign is bounded more tightly); sigma (ceil(k/seg)) each
 * segment's |scale product| (unused without segments). */
double ref_bound_accum(const ref_accum_model *am, const double *ap, const double *sigma, int64_t k);

#endif
