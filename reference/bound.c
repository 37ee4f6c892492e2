/* bound.c: the certified per-element bound E (DESIGN.md §3).
 *
 *   E = alpha*G*S + ep_ops*u*(|y| + alpha*G*S) + abs + ref_err
 *
 * G = sum_k |a_k|*|w_k| over the accumulator-level operands (ref_operands.h:
 * dequant roundings, w_mul, azp and block scales already applied, so the dequant
 * terms are exact and contribute nothing), S = the product of the epilogue
 * scales' magnitudes, u = 2^-24 (fp32 RN) and ep_ops the number of fp32
 * roundings in the epilogue: the epilogue multiplies the accumulated value
 * (within alpha*G of the exact one) by S with ep_ops relative errors of at most
 * u each, so |c - y| <= alpha*G*S + ((1+u)^ep_ops - 1)(|y| + alpha*G*S), and
 * (1+u)^e - 1 <= e*u*(1 + 2^-20) for e <= 16. `abs` covers fp32 underflow (at
 * most 2^-150 per rounding, one per product and addition), `ref_err` is the
 * reference's own error (0 for exact paths; the dgemm term for the fast path). */
#include <math.h>

#include "ref_bound.h"

double ref_bound_element(double alpha, double g, double s, double y, int ep_ops, int64_t k,
                         double ref_err)
{
    const double u = ldexp(1.0, -24);
    double dacc = alpha * g * s;
    if (alpha > 0.0)
        /* fp32 underflow: each of the 2K roundings of the accumulation loses at
         * most half of 2^-149 absolute, then scaled by the epilogue. */
        dacc += (double)(k + 2) * ldexp(1.0, -149) * (s > 1.0 ? s : 1.0);
    double e = dacc + (double)ep_ops * u * (1.0 + ldexp(1.0, -20)) * (fabs(y) + dacc);
    if (ep_ops > 0) e += (double)ep_ops * ldexp(1.0, -149) * (s > 1.0 ? s : 1.0);
    /* y itself is carried as a double: its conversion from the exact value and up
     * to three scale multiplications give at most 4 relative roundings of 2^-53;
     * 2^-50 covers them with room (certified, not a tolerance). */
    e += ldexp(1.0, -50) * fabs(y);
    return e + ref_err;
}
