/* ref_ozaki.h: exact dot products of double operands through fp64 GEMMs on
 * error-free splits (ozaki.c). Included by reference/truth.c.
 * Rule: a result is returned only when every digit GEMM is provably exact and
 * the combination fits an __int128; otherwise the caller takes another path. */
#ifndef QVET_REF_OZAKI_H
#define QVET_REF_OZAKI_H

#include <stdint.h>

typedef struct ref_ozaki_out {
    __int128 *acc;  /* (m, n), or with a panel callback (m, pw) of the current panel:
                       sum_k a_ik w_kj = acc * 2^(row_exp[i] + col_exp[j] + base) */
    int *row_exp;   /* (m) */
    int *col_exp;   /* (n) */
    int base;
    int slices_a, slices_w; /* digit planes of A and W: slices_a * slices_w GEMMs */
} ref_ozaki_out;

/* Columns per dgemm of the magnitude sums G (ref_ozaki_sums and truth.c's
 * compute_g): one panel width, so both give the same bits. */
#define REF_OZAKI_G_PANEL 512

/* Called once per column panel [j0, j0 + pw) when its sums are complete:
 * out->acc holds them as (m, pw) row-major, valid during the call. */
typedef void (*ref_ozaki_panel_fn)(void *ctx, const ref_ozaki_out *out, int64_t j0, int64_t pw);

/* a: (m, k) row-major, w: (k, n) row-major, finite doubles. Returns 1 and
 * fills out (free with ref_ozaki_clear) when the exact sums fit the scheme, 0
 * (out zeroed) when an operand is not finite, the operands span too many bits
 * for an int128 combination, or memory runs out. g: NULL, or (m, n) filled
 * with dgemm's sums |a| |w| (not yet inflated to a bound; valid only when 1
 * is returned), from the same sweep over w that reads its exponents. panel:
 * NULL keeps every sum in out->acc (m, n); otherwise each panel's sums go to
 * panel(ctx, ...) and out->acc is NULL on return (m by one panel of memory
 * instead of m by n). jobs: threads for the sweep over w (the BLAS calls use
 * the BLAS's own). */
int  ref_ozaki_sums(const double *a, const double *w, int64_t m, int64_t n, int64_t k, double *g, int jobs,
                    ref_ozaki_panel_fn panel, void *ctx, ref_ozaki_out *out);
void ref_ozaki_clear(ref_ozaki_out *out);

#endif
