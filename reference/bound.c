/* bound.c: the certified per-element bound E (docs/design.md §3).
 *
 *   E = D*S + ep_ops*u*(|y| + D*S) + abs + ref_err
 *
 * D bounds the accumulator's error in its own units: alpha*G for the
 * accumulators whose bound is a worst case over all of K (G = sum_k |a_k||w_k|
 * over the accumulator-level operands: dequant roundings, w_mul, azp already
 * applied, so the dequant terms are exact and contribute nothing), or the
 * block-structured sum of ref_bound_accum for the fp8 accumulator and for sums
 * whose segments scales multiply. S is the product of the epilogue scales'
 * magnitudes, u = 2^-24 (fp32 RN) and ep_ops the number of fp32 roundings in
 * the epilogue: the epilogue multiplies the accumulated value (within D of the
 * exact one) by S with ep_ops relative errors of at most u each, so
 * |c - y| <= D*S + ((1+u)^ep_ops - 1)(|y| + D*S), and (1+u)^e - 1 <=
 * e*u*(1 + 2^-20) for e <= 16. `abs` covers fp32 underflow (at most one
 * subnormal quantum 2^-149 per product, in the units the kernel's
 * accumulator works in: ref_acc_pow2), `ref_err` is the reference's own
 * error (0 for exact paths; the dgemm term for the fast path). A bias added in
 * the epilogue is one more rounding, relative to the sum it makes
 * (ref_bound_element_bias). */
#include <math.h>
#include <stdlib.h>

#include "ref_bound.h"

#define U24 0x1p-24
#define U23 0x1p-23

/* The accumulation and the epilogue's multiplications, before the terms of
 * y's own representation. */
static double mul_part(double alpha, double g, double s, double y, int ep_ops, int64_t k, double unit)
{
    const double u = ldexp(1.0, -24);
    double dacc = alpha * g * s;
#ifdef QV_MUTANT_orc_fp4_acc_unit_ignored
    /* Oracle mutant: the accumulator's underflow charged in the declared
     * units, as if marlin-fp4-nv's kernel summed there. */
    unit = 1.0;
#endif
    /* fp32 underflow: below fp32's normal range the accumulation loses at
     * most K + 2 quanta of 2^-149 absolute: half a quantum per RN rounding
     * (each product and each addition), or under truncation one per product,
     * since what a truncation keeps is a multiple of the subnormal quantum and
     * sums of such multiples are exact there. The quanta are the
     * accumulator's own, `unit` declared units each (ref_acc_pow2: 2^116 ..
     * 2^119 for marlin-fp4-nv with bf16 activations, whose kernel sums the
     * declared values times 2^(s_pow2 - 126), so that its partial sums below
     * 2^-s_pow2 of the declared ones are fp32 subnormals), then scaled by the
     * epilogue; at least 2^-149 a quantum in the output's units. This takes
     * the tensor core to keep fp32 subnormals, as every tc-f32 row's bound
     * does; the H200's does, truncating toward zero between two of them
     * (tools/probe-subnormal.cu). */
    double us = unit * s;
#ifdef QV_MUTANT_orc_underflow_term_dropped
    /* Oracle mutant: fp32 underflow left out (relative terms only). */
    if (0)
#else
    if (alpha > 0.0)
#endif
        dacc += (double)(k + 2) * ldexp(1.0, -149) * (us > 1.0 ? us : 1.0);
    double e = dacc + (double)ep_ops * u * (1.0 + ldexp(1.0, -20)) * (fabs(y) + dacc);
    if (ep_ops > 0) e += (double)ep_ops * ldexp(1.0, -149) * (s > 1.0 ? s : 1.0);
    return e;
}

double ref_bound_element(double alpha, double g, double s, double y, int ep_ops, int64_t k, double unit,
                         double ref_err)
{
    double e = mul_part(alpha, g, s, y, ep_ops, k, unit);
    /* y itself is carried as a double: its conversion from the exact value and up
     * to three scale multiplications give at most 4 relative roundings of 2^-53;
     * 2^-50 covers them with room (certified, not a tolerance). */
#ifdef QV_MUTANT_orc_ref_y_slack_wide
    /* Oracle mutant: y's double representation given 2^-30 instead of 2^-50. */
    e += ldexp(1.0, -30) * fabs(y);
#else
    e += ldexp(1.0, -50) * fabs(y);
#endif
    return e + ref_err;
}

double ref_bound_element_bias(double alpha, double g, double s1, int n1, double y1, double y2, double s2, int n2,
                              double y, int64_t k, double unit, double ref_err)
{
    const double u = ldexp(1.0, -24) * (1.0 + ldexp(1.0, -20));
    /* the steps before the bias, to the value y1 = acc * s1 */
    double e = mul_part(alpha, g, s1, y1, n1, k, unit);
    /* the addition: y2 = y1 + bias, one rounding relative to the computed sum */
#ifdef QV_MUTANT_orc_bias_term_operands
    /* Oracle mutant: the addition's rounding taken relative to its operands. */
    e += u * (fabs(y1) + fabs(y2 - y1) + e) + ldexp(1.0, -149);
#elif defined QV_MUTANT_orc_bias_term_dropped
    /* Oracle mutant: the bias addition counted as exact. */
    (void)y2;
#else
    e += u * (fabs(y2) + e) + ldexp(1.0, -149);
#endif
    /* the steps after it: y = y2 * s2 */
    if (n2 > 0) {
        double es = e * s2;
        e = es + (double)n2 * u * (fabs(y) + es) + (double)n2 * ldexp(1.0, -149) * (s2 > 1.0 ? s2 : 1.0);
    }
    return e + ldexp(1.0, -50) * (fabs(y) + fabs(y1) * s2) + ref_err;
}

/* The accumulator error of one block of products restarted at its start and
 * finished at a promotion: an accumulator of `bits` significand bits that
 * truncates, fed the products p (n of them) in any order and grouping. Every
 * partial it holds is at most M = sum |p| in magnitude (truncation toward zero
 * never grows a sum past its terms), so one truncation loses less than the
 * spacing of bits-bit numbers at M, 2^(floor(log2 M) - bits + 1); a product
 * enters through at most two truncations (its alignment to the accumulator,
 * the sum's own). When every product has one sign the accumulator keeps that
 * sign, and a truncation toward zero of acc + p lands between acc and acc + p,
 * so it loses no more than the addend it absorbs: 2 sum_k min(spacing, |p_k|).
 * With both signs an addend against the accumulator can lose a whole spacing
 * (2^14 + 2 - 1/4 truncates to 2^14 at 14 bits), so each nonzero product
 * counts 2 spacings. */
static double narrow_block(const double *p, int64_t n, int bits, double *m_out)
{
    double m = 0;
    int pos = 0, neg = 0;
    for (int64_t t = 0; t < n; t++) {
        m += fabs(p[t]);
        pos |= p[t] > 0;
        neg |= p[t] < 0;
    }
    m *= 1.0 + (double)(n + 1) * ldexp(1.0, -53); /* an upper bound on the exact sum */
    *m_out = m;
    if (m == 0.0) return 0.0;
#ifdef QV_MUTANT_orc_fp8_spacing_wide
    /* Oracle mutant: the spacing of a (bits - 1)-bit accumulator (twice as coarse). */
    double spacing = ldexp(1.0, ilogb(m) - bits + 2);
#else
    double spacing = ldexp(1.0, ilogb(m) - bits + 1);
#endif
    double e = 0;
    for (int64_t t = 0; t < n; t++) {
        double a = fabs(p[t]);
#ifdef QV_MUTANT_orc_fp8_min_dropped
        /* Oracle mutant: every product charged a whole spacing, however small. */
        (void)pos;
        (void)neg;
        e += spacing;
#else
        if (a != 0.0) e += (pos && neg) || a > spacing ? spacing : a;
#endif
    }
    return 2.0 * e * (1.0 + (double)(n + 1) * ldexp(1.0, -53));
}

double ref_bound_accum(const ref_accum_model *am, const double *ap, const double *sigma, int64_t k)
{
    int64_t seg = am->seg > 0 ? am->seg : k;
    int64_t nseg = (k + seg - 1) / seg;
    double total = 0, mag = 0;
    for (int64_t sg = 0; sg < nseg; sg++) {
        const double *p = ap + sg * seg;
        int64_t len = (sg + 1) * seg <= k ? seg : k - sg * seg;
        double m = 0, e = 0;
        switch (am->kind) {
        case REF_ACC_INT: {
            for (int64_t t = 0; t < len; t++) m += fabs(p[t]);
            m *= 1.0 + (double)(len + 1) * ldexp(1.0, -53);
            /* exact; a segment's partial is converted to fp32, one rounding
             * (at most u |P|) that happens only when |P| >= 2^24: the partial
             * P is an integer with |P| <= sum |p| <= m, and every integer
             * below 2^24 is an fp32 value, so for m < 2^24 the conversion
             * is exact and adds nothing. */
            e = am->seg > 0 && m >= 0x1p24 ? U24 * m : 0.0;
            break;
        }
        case REF_ACC_TC_F32:
        case REF_ACC_FMA_F32:
            for (int64_t t = 0; t < len; t++) m += fabs(p[t]);
            m *= 1.0 + (double)(len + 1) * ldexp(1.0, -53);
            e = am->alpha_per_k * (double)len * m;
            break;
        case REF_ACC_NARROW: {
            int64_t nb = am->promote > 0 ? am->promote : len;
            int64_t blocks = 0;
            for (int64_t b0 = 0; b0 < len; b0 += nb) {
                double mb;
                e += narrow_block(p + b0, b0 + nb <= len ? nb : len - b0, am->bits, &mb);
                m += mb;
                blocks++;
            }
            /* the promotions: each block's partial added into an fp32 sum (its
             * conversion exact below 24 bits), an RN or truncating fp32 add */
            e += (double)blocks * U23 * (m + e);
            break;
        }
        }
        if (am->seg > 0) {
            /* the segment's partial times its scale product sa*sw (rounded in
             * fp32), two roundings, then added to the fp32 total */
#ifdef QV_MUTANT_orc_segment_scale_dropped
            /* Oracle mutant: the segment's scale product left out of its terms. */
            double s = 1.0;
#else
            double s = sigma[sg];
#endif
            total += s * ((e * (1.0 + ldexp(1.0, -22))) + U23 * (1.0 + ldexp(1.0, -22)) * (m + e));
            mag += s * (m + e);
        } else {
            total += e;
            mag += m;
        }
    }
#ifdef QV_MUTANT_orc_segment_total_adds_dropped
    /* Oracle mutant: the fp32 additions of the segments' terms left out. */
    if (am->seg > 0) (void)mag;
#else
    if (am->seg > 0) total += (double)nseg * U24 * (1.0 + ldexp(1.0, -20)) * (mag + total);
#endif
    else if (am->kind == REF_ACC_INT && am->red_f32)
        /* int32 partials of up to K slices converted and added in fp32 */
        total += (double)k * U24 * (1.0 + ldexp(1.0, -20)) * mag;
    return total;
}
