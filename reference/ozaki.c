/* ozaki.c: exact dot products of double operands through fp64 GEMMs on
 * error-free splits of the operands (Ozaki's scheme; ref_ozaki.h).
 *
 * Every operand value the reference forms (fp16/bf16/fp8/fp4/integer codes,
 * dequantized weights, folded scales) is a double with few significant bits.
 * Row i of A is written a_ik = 2^ea_i * sum_s A_s[i][k] 2^(-(s+1) ba) with
 * integer digits |A_s| <= 2^ba, exactly, when a_ik has no bit below
 * 2^(ea_i - S ba); likewise column j of W with T digits of bw bits. A product
 * of two digits is at most 2^(ba + bw) and K of them at most K 2^(ba + bw) <=
 * 2^53, so every partial sum of every digit GEMM C_st = A_s W_t is an integer
 * a double holds: dgemm computes it exactly in any order, with or without FMA.
 * Then
 *   sum_k a_ik w_kj = 2^(ea_i + ew_j - S ba - T bw) *
 *                     sum_{s,t} C_st[i][j] 2^((S - 1 - s) ba + (T - 1 - t) bw),
 * an integer combination that fits an __int128 while 53 + log2(S T) +
 * (S - 1) ba + (T - 1) bw < 127. The widths are split between A and W to make
 * S T smallest: S T GEMMs replace the per-element loops of the fixed-point
 * path at the speed of the BLAS. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ozaki.h"
#include "ref_parallel.h"

/* Column panel of the magnitude GEMM (the same in truth.c's compute_g). */
#define REF_G_PANEL REF_OZAKI_G_PANEL

/* Exponents of a finite nonzero double from its bits: |v| < 2^*top, and
 * 2^*low its lowest set bit. */
static void bit_span(double v, int *top, int *low)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    int ef = (int)((b >> 52) & 0x7FF);
    uint64_t mant = b & ((UINT64_C(1) << 52) - 1);
    if (ef == 0) { /* subnormal: mant 2^-1074 */
        *top = -1074 + 64 - __builtin_clzll(mant);
        *low = -1074 + __builtin_ctzll(mant);
    } else {
        *top = ef - 1022;
        mant |= UINT64_C(1) << 52;
        *low = ef - 1075 + __builtin_ctzll(mant);
    }
}

/* The exponent e with |x| < 2^e for the largest |x| of n values (stride st),
 * and the exponent of the lowest set bit over all of them; 0 when all zero. */
static int spans(const double *x, int64_t n, int64_t st, int *top, int *low)
{
    int any = 0;
    *top = -100000;
    *low = 100000;
    for (int64_t t = 0; t < n; t++) {
        double v = x[t * st];
        if (v == 0.0) continue;
        int e, lb;
        bit_span(v, &e, &lb);
        if (e > *top) *top = e;
        if (lb < *low) *low = lb;
        any = 1;
    }
    return any;
}

/* Round to the nearest integer, ties to even, for |r| < 2^51: adding and
 * subtracting 1.5 2^52 leaves the integer part in the default rounding mode
 * (the compiler keeps both operations: -ffp-contract=off, no fast-math). */
static inline double rne_int(double r)
{
    const double magic = 0x1.8p52;
    return (r + magic) - magic;
}

/* 2^e as a double for -1022 <= e <= 1023. */
static double pow2(int e) { return ldexp(1.0, e); }

/* Multiplies by 2^e exactly: in two factors when 2^e itself is out of the
 * normal range (the product of the reference's operands never is). */
static double scale2(double x, int e)
{
    if (e >= -1000 && e <= 1000) return x * pow2(e);
    return ldexp(x, e);
}

/* Digits of x (|x| < 2^top) in base `step` = 2^b: out[s] for s < S, such that
 * x = 2^top sum_s out[s] 2^(-(s+1) b) exactly (callers check S covers the
 * lowest bit). Each step scales by a power of two and takes the nearest
 * integer: both exact, so the remainder stays exact and below 1/2 in size. */
static void digits(double x, int top, double inv, double step, int S, double *out, int64_t stride)
{
    double r = inv != 0.0 ? x * inv : scale2(x, -top); /* |r| < 1 */
    for (int s = 0; s < S; s++) {
        r *= step;
        double d = rne_int(r);
        out[(int64_t)s * stride] = d;
        r -= d;
    }
}

/* Rows of W per block of the column sweep (ref_parallel_for). */
#define SWEEP_ROWS 256

typedef struct sweep_ctx {
    const double *w;
    double *aw;        /* (k, pw) |w| of the panel, or NULL */
    int64_t n, k, j0, pw;
    uint64_t *topb;    /* (blocks, P) each block's largest magnitude bits per column */
    int *lowe;         /* (blocks, P) each block's lowest set bit per column */
    int64_t P;
} sweep_ctx;

/* Block b of the panel's rows: |w| into aw, and per column the largest
 * magnitude's bits (ordered as integers, so an Inf or NaN is any value at or
 * above the Inf pattern) and the lowest set bit's exponent, ef - 1075 + ctz
 * of the significand with its hidden bit (subnormals: ef = 0, no hidden bit,
 * the exponent of ef = 1). */
static void sweep_rows(void *ctx, int64_t b)
{
    const sweep_ctx *sc = ctx;
    const uint64_t mag_mask = ~(UINT64_C(1) << 63), frac = (UINT64_C(1) << 52) - 1;
    uint64_t *topb = sc->topb + b * sc->P;
    int *lowe = sc->lowe + b * sc->P;
    const int64_t pw = sc->pw;
    for (int64_t jj = 0; jj < pw; jj++) {
        topb[jj] = 0;
        lowe[jj] = 100000;
    }
    int64_t k1 = (b + 1) * SWEEP_ROWS < sc->k ? (b + 1) * SWEEP_ROWS : sc->k;
    for (int64_t kk = b * SWEEP_ROWS; kk < k1; kk++) {
        const double *row = sc->w + kk * sc->n + sc->j0;
        if (sc->aw) {
            double *arow = sc->aw + kk * pw;
            for (int64_t jj = 0; jj < pw; jj++) arow[jj] = fabs(row[jj]);
        }
        for (int64_t jj = 0; jj < pw; jj++) {
            uint64_t bits;
            memcpy(&bits, &row[jj], sizeof bits);
            bits &= mag_mask;
            if (bits > topb[jj]) topb[jj] = bits;
            if (!bits) continue;
            int ef = (int)(bits >> 52);
            uint64_t sig = (bits & frac) | ((uint64_t)(ef != 0) << 52);
            int lb = (ef ? ef : 1) - 1075 + __builtin_ctzll(sig);
            if (lb < lowe[jj]) lowe[jj] = lb;
        }
    }
}

/* The magnitudes' sums G = |a| |w| ((m, n) into g) with dgemm on column panels
 * of REF_G_PANEL, the way truth.c's compute_g forms them, so both give the same
 * bits; and the bits each column of W spans (ew: the top, lw: the lowest set
 * bit, -100000 / 100000 for an all-zero column), in the same sweep over w,
 * whose blocks of rows run on `jobs` threads (maxima and minima: the same
 * values on any number). Returns 0 when a weight is not finite or memory
 * runs out. */
static int columns_pass(const double *a, const double *w, int64_t m, int64_t n, int64_t k, double *g, int jobs,
                        int *ew, int *lw)
{
    const int64_t P = n < REF_G_PANEL ? n : REF_G_PANEL;
    const int64_t nblk = (k + SWEEP_ROWS - 1) / SWEEP_ROWS;
    double *aa = g ? malloc(sizeof(double) * (size_t)(m * k)) : NULL;
    double *aw = g ? malloc(sizeof(double) * (size_t)(k * P)) : NULL;
    uint64_t *topb = malloc(sizeof(uint64_t) * (size_t)(nblk * P));
    int *lowe = malloc(sizeof(int) * (size_t)(nblk * P));
    int ok = topb && lowe && (!g || (aa && aw));
    for (int64_t i = 0; ok && g && i < m * k; i++) aa[i] = fabs(a[i]); /* a is finite here */
    for (int64_t j = 0; j < n; j++) {
        ew[j] = -100000;
        lw[j] = 100000;
    }
    const uint64_t inf_bits = UINT64_C(0x7FF) << 52;
    for (int64_t j0 = 0; j0 < n && ok; j0 += P) {
        int64_t pw = j0 + P <= n ? P : n - j0;
        sweep_ctx sc = {.w = w, .aw = aw, .n = n, .k = k, .j0 = j0, .pw = pw, .topb = topb, .lowe = lowe, .P = P};
        ref_parallel_for(nblk, jobs, sweep_rows, &sc);
        for (int64_t jj = 0; jj < pw && ok; jj++) {
            uint64_t top = 0;
            int low = 100000;
            for (int64_t b = 0; b < nblk; b++) {
                if (topb[b * P + jj] > top) top = topb[b * P + jj];
                if (lowe[b * P + jj] < low) low = lowe[b * P + jj];
            }
            if (top >= inf_bits) {
                ok = 0;
            } else if (top) {
                double v;
                int lb;
                memcpy(&v, &top, sizeof v);
                bit_span(v, &ew[j0 + jj], &lb);
                lw[j0 + jj] = low;
            }
        }
        if (ok && g)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)pw, (int)k, 1.0, aa, (int)k, aw,
                        (int)pw, 0.0, g + j0, (int)n);
    }
    free(topb);
    free(lowe);
    free(aa);
    free(aw);
    return ok;
}

/* Output rows per block of the digit GEMMs' combination (ref_parallel_for). */
#define COMBINE_ROWS 64

typedef struct combine_ctx {
    const double *c;          /* (S m, pw) one digit plane of W's GEMM values */
    unsigned __int128 *acc;   /* the panel's sums, row stride lda */
    int64_t lda, m, pw;
    int S, ba, tshift, first; /* first: the panel's first plane writes instead of adding */
    const double *scale;      /* (pw) T = 1 in place: 2^(bw - ew) per column, 0 for ldexp; or NULL */
    int e0;                   /* bw */
    const int *ew;            /* (pw) the columns' exponents */
} combine_ctx;

/* Adds block b's rows of the S digit planes, each shifted to its place, into
 * the int128 sums (unsigned: two's complement, exact modulo 2^128, and the
 * true value fits). Every sum is one row's own, so blocks are independent. */
static void combine_rows(void *ctx, int64_t b)
{
    const combine_ctx *cc = ctx;
    int64_t i1 = (b + 1) * COMBINE_ROWS < cc->m ? (b + 1) * COMBINE_ROWS : cc->m;
    for (int64_t i = b * COMBINE_ROWS; i < i1; i++) {
        unsigned __int128 *ar = cc->acc + i * cc->lda;
        for (int s = 0; s < cc->S; s++) {
            int shift = (cc->S - 1 - s) * cc->ba + cc->tshift;
            const double *cs = cc->c + (s * cc->m + i) * cc->pw;
            for (int64_t jj = 0; jj < cc->pw; jj++) {
                double v = cs[jj];
                if (cc->scale) v = cc->scale[jj] != 0.0 ? v * cc->scale[jj] : ldexp(v, cc->e0 - cc->ew[jj]);
                unsigned __int128 x = (unsigned __int128)(__int128)(int64_t)v << shift;
                ar[jj] = (cc->first && s == 0) ? x : ar[jj] + x;
            }
        }
    }
}

int ref_ozaki_sums(const double *a, const double *w, int64_t m, int64_t n, int64_t k, double *g, int jobs,
                   ref_ozaki_panel_fn panel, void *ctx, ref_ozaki_out *out)
{
    memset(out, 0, sizeof *out);
    if (m < 1 || n < 1 || k < 1 || k > ((int64_t)1 << 30)) return 0;
    int logk = 0;
    while (((int64_t)1 << logk) < k) logk++;
    int *ea = malloc(sizeof(int) * (size_t)m), *ew = malloc(sizeof(int) * (size_t)n);
    int *lw = malloc(sizeof(int) * (size_t)n);
    if (!ea || !ew || !lw) goto refuse;
    /* The bits each row of A and each column of W spans, from its largest
     * value's top to its lowest set bit; the widest of each. */
    int span_a = 0, span_w = 0;
    for (int64_t i = 0; i < m; i++) {
        int top, low;
        for (int64_t kk = 0; kk < k; kk++)
            if (!isfinite(a[i * k + kk])) goto refuse;
        ea[i] = 0;
        if (spans(a + i * k, k, 1, &top, &low)) {
            ea[i] = top;
            if (top - low > span_a) span_a = top - low;
        }
    }
    if (!columns_pass(a, w, m, n, k, g, jobs, ew, lw)) goto refuse;
    for (int64_t j = 0; j < n; j++) {
        if (ew[j] == -100000) {
            ew[j] = 0; /* an all-zero column */
            continue;
        }
        if (ew[j] - lw[j] > span_w) span_w = ew[j] - lw[j];
    }
    /* Digit widths: a product of digits below 2^(ba + bw) and K of them below
     * 2^53 need ba + bw + log2 K <= 53; among the splits (S = span_a / ba, T =
     * span_w / bw rounded up) whose combination 2^53 S T 2^((S - 1) ba + (T -
     * 1) bw) fits the int128, take the cheapest: the S digit planes of A are
     * one stacked (S m, k) operand, so a split costs T GEMMs of S m rows and,
     * for T > 1, T digit planes of W (with T = 1 the weights are their own
     * digit up to a power of two per column, and the GEMM reads w itself). */
#ifdef QV_MUTANT_orc_ozaki_budget_no_logk
    /* Oracle mutant: digit widths of 53 bits whatever K: a digit GEMM's
     * partial sums pass 2^53 and dgemm rounds them. */
    int budget = 53, S = 0, T = 0, ba = 0, bw = 0;
#else
    int budget = 53 - logk, S = 0, T = 0, ba = 0, bw = 0;
#endif
    double best = 0;
    for (int cw = 1; cw < budget; cw++) {
        int ca = budget - cw;
        int s = span_a ? (span_a + ca - 1) / ca : 1, t = span_w ? (span_w + cw - 1) / cw : 1;
        if (s < 1) s = 1;
        if (t < 1) t = 1;
        int lst = 0;
        while ((1 << lst) < s * t) lst++;
        if (53 + lst + (s - 1) * ca + (t - 1) * cw >= 127 || s * t > 16) continue;
        /* multiply-adds of the GEMMs (at about 16 a nanosecond) and the
         * digits split one by one */
        double cost = (double)s * t * m * n * k / 16.0 + (t > 1 ? (double)t * k * n : 0.0) + (double)s * m * k;
        if (!S || cost < best) {
            best = cost;
            S = s;
            T = t;
            ba = ca;
            bw = cw;
        }
    }
    if (!S) goto refuse;
    /* T = 1 reads w in place: its GEMM values are the digit GEMM's times
     * 2^(ew - bw) per column, integers below 2^53 times a power of two that
     * stays inside the doubles (subnormals included) and so exact. */
    int raw_w = T == 1;
    for (int64_t j = 0; raw_w && j < n; j++) raw_w = ew[j] - bw >= -1074 && ew[j] - bw <= 960;
    /* Weights in column panels of P: T digit planes of (k, P) at a time, so
     * the digits never cost the memory of a whole (k, n) copy. */
    const int64_t P = n < 256 ? n : 256;
    const int64_t sm = S * m;
    /* (m, n), or (m, P) reused for every panel */
    const int64_t acc_cols = panel ? P : n;
    out->acc = calloc((size_t)(m * acc_cols), sizeof(unsigned __int128));
    double *ad = malloc(sizeof(double) * (size_t)(sm * k));
    double *wd = raw_w ? NULL : malloc(sizeof(double) * (size_t)(T * k * P));
    double *c = malloc(sizeof(double) * (size_t)(sm * P));
    double *inv = malloc(sizeof(double) * (size_t)P);
    if (!out->acc || !ad || (!raw_w && !wd) || !c || !inv) {
        free(inv);
        free(ad);
        free(wd);
        free(c);
        free(out->acc);
        out->acc = NULL;
        goto refuse;
    }
    for (int64_t i = 0; i < m; i++) {
        double inv_i = ea[i] > -1000 && ea[i] < 1000 ? pow2(-ea[i]) : 0.0; /* 0: scale each by ldexp */
        for (int64_t kk = 0; kk < k; kk++)
            digits(a[i * k + kk], ea[i], inv_i, pow2(ba), S, ad + i * k + kk, m * k);
    }
    unsigned __int128 *acc = (unsigned __int128 *)out->acc;
    out->row_exp = ea;
    out->col_exp = ew;
    out->base = -(S * ba + T * bw);
    out->slices_a = S;
    out->slices_w = T;
    for (int64_t j0 = 0; j0 < n; j0 += P) {
        int64_t pw = j0 + P <= n ? P : n - j0;
        /* the panel's sums at acc + ja, row stride acc_cols */
        const int64_t ja = panel ? 0 : j0;
        const int64_t lda = panel ? pw : acc_cols;
        for (int64_t jj = 0; jj < pw; jj++) {
            int e = ew[j0 + jj];
            inv[jj] = e > -1000 && e < 1000 ? pow2(-e) : 0.0;
        }
        const double step = pow2(bw);
        if (!raw_w)
            for (int64_t kk = 0; kk < k; kk++)
                for (int64_t jj = 0; jj < pw; jj++)
                    digits(w[kk * n + j0 + jj], ew[j0 + jj], inv[jj], step, T, wd + kk * pw + jj, k * pw);
        for (int t = 0; t < T; t++) {
            /* the S digit planes of A at once: (S m, k) x (k, pw) */
            if (raw_w)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)sm, (int)pw, (int)k, 1.0, ad, (int)k,
                            w + j0, (int)n, 0.0, c, (int)pw);
            else
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)sm, (int)pw, (int)k, 1.0, ad, (int)k,
                            wd + t * k * pw, (int)pw, 0.0, c, (int)pw);
            if (raw_w)
                /* back to the digit GEMM's integers: times 2^(bw - ew), exact */
                for (int64_t jj = 0; jj < pw; jj++) {
                    int e = bw - ew[j0 + jj];
                    inv[jj] = e > -1000 && e < 1000 ? pow2(e) : 0.0; /* 0: scale each by ldexp */
                }
            combine_ctx cc = {.c = c, .acc = acc + ja, .lda = lda, .m = m, .pw = pw, .S = S, .ba = ba,
                              .tshift = (T - 1 - t) * bw, .first = t == 0 && panel,
                              .scale = raw_w ? inv : NULL, .e0 = bw, .ew = ew + j0};
            ref_parallel_for((m + COMBINE_ROWS - 1) / COMBINE_ROWS, jobs, combine_rows, &cc);
        }
        if (panel) panel(ctx, out, j0, pw);
    }
    if (panel) {
        free(out->acc);
        out->acc = NULL;
    }
    free(ad);
    free(wd);
    free(c);
    free(inv);
    free(lw);
    return 1;
refuse:
    free(ea);
    free(ew);
    free(lw);
    return 0;
}

void ref_ozaki_clear(ref_ozaki_out *out)
{
    free(out->acc);
    free(out->row_exp);
    free(out->col_exp);
    memset(out, 0, sizeof *out);
}
