/* ref_bound.h: the certified per-element bound E (bound.c has the derivation).
 * Included by reference/truth.c and tests. Rule: every term is a proven bound on
 * a rounding the declared arithmetic or the reference itself performs; nothing
 * is a tolerance tuned to make a case pass. */
#ifndef QVET_REF_BOUND_H
#define QVET_REF_BOUND_H

#include <stdint.h>

/* alpha: ref_alpha of the row; g: sum |a||w| of the element (certified upper
 * bound); s: product of the epilogue scale magnitudes; y: the exact value;
 * ep_ops: fp32 roundings in the epilogue; k: depth; ref_err: the reference's
 * own error bound on y (0 on exact paths). */
double ref_bound_element(double alpha, double g, double s, double y, int ep_ops, int64_t k,
                         double ref_err);

#endif
