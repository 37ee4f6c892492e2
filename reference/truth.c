/* truth.c: the exact value y of the declared math, the certified bound E and the
 * correctly rounded output y_rn, per element (reference.h, docs/design.md §4).
 *
 * Paths, chosen per case (ref_truth.path / .why say which and why):
 *   "int64"      integer accumulators (W4A8, W8A8 int8, azp): the dot product is
 *                an integer, summed exactly in int64.
 *   "fixed128"   float products (fp16/bf16 x dequantized weight, e4m3 x e4m3, block
 *                scales folded): every operand is M*2^e with M an integer; when the
 *                products' integer mantissas fit 62 bits and the exponent range
 *                plus log2(K) fits 125 bits, the sum is exact in an __int128 with
 *                quantum 2^(min ea + min eb).
 *   "ozaki"      large cases whose operands are exact sums of base-2^beta digits:
 *                digit dgemms whose K products stay below 2^53 are exact, and
 *                are combined in __int128.
 *   "mpfr"       otherwise for small cases: exact products at 106 bits, mpfr_sum.
 *   "dgemm+cert" large cases: OpenBLAS dgemm on the decoded operands, with its own
 *                error bound (K+2)*2^-53*G added to E (Higham's gamma_K for a dot
 *                product of doubles, G itself from dgemm on |a|, |w| inflated by
 *                the same factor). y_rn is then the output rounding of the dgemm
 *                value, not certified: ULP statistics may be off by one ulp where
 *                y lies within E_dgemm of a rounding tie.
 * On the exact paths the accumulator is kept exactly (or rounded to odd at 256
 * bits), multiplied by the epilogue scales exactly in MPFR, and y_rn is the
 * output format's RNE of that value through a round-to-odd double, which is
 * correctly rounded for every format with fewer than 52 significand bits.
 * y is the exact epilogue product (the epilogue's fp32 roundings are in E). */
#include <cblas.h>
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/reference.h"
#include "qvet/spec.h"
#include "ref_bound.h"
#include "ref_operands.h"
#include "ref_ozaki.h"
#include "ref_parallel.h"

/* Above this many multiply-adds the automatic choice takes the dgemm path: the
 * exact paths cost ~5 ns (fixed128) to ~1 us (mpfr) per product. */
#define REF_EXACT_MAX_MACS ((int64_t)1 << 25)
/* From this many multiply-adds on, the digit GEMMs of the Ozaki path (a few
 * dgemm calls and the digit split) cost less than the per-element exact loops
 * (the int64 loop of integer operands is cheaper for longer). */
#define REF_OZAKI_MIN_MACS ((int64_t)1 << 18)
#define REF_OZAKI_MIN_MACS_INT ((int64_t)1 << 22)
#define REF_MPFR_MAX_MACS ((int64_t)1 << 22)
/* Working precision of the exact accumulator after mpfr_sum (rounded to odd):
 * far above any output format, and above 128 so an int128 converts exactly. */
#define REF_ACC_PREC 256
/* Precision of the epilogue product: the accumulator (256 bits) times up to three
 * scales of <= 24 significant bits each is exact at 256 + 72 bits. */
#define REF_EPI_PREC 336

typedef struct truth_ctx {
    const qv_problem *p;
    ref_operands o;
    double *g;      /* (m, n) certified sum |a||w|: t->bound's storage, which
                       bound_rows turns into E element by element in place */
    double alpha;
    double *y1;     /* (m, n) with a bias: the exact value before the bias is added */
    ref_truth *t;   /* what is being filled */
    int jobs;       /* threads for the per-element work (ref_parallel_for) */
    double *ref_err; /* (m, n) the reference's own error term of E; NULL: 0 */
    double unit;    /* 2^-ref_acc_pow2: the kernel accumulator's unit in declared ones */
} truth_ctx;

/* Output rows per block of the per-element loops: about 16384 elements, a
 * number that depends on the shape alone (ref_parallel.h). */
static int64_t rows_per_block(int64_t n) { return n >= 16384 ? 1 : 16384 / (n > 0 ? n : 1); }

/* x rounded to a double by round-to-odd: RZ, then the last bit set when inexact. */
static double odd_double(const mpfr_t x)
{
    double d = mpfr_get_d(x, MPFR_RNDZ);
    if (mpfr_cmp_d(x, d) != 0) {
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        bits |= 1u;
        memcpy(&d, &bits, sizeof d);
    }
    return d;
}

/* Makes an RZ-rounded MPFR value round-to-odd given its ternary value. */
static void make_odd(mpfr_t x, int ternary)
{
    if (ternary == 0 || mpfr_zero_p(x)) return;
    /* x = M * 2^(exp - prec) with M an integer; M is even exactly when
     * x / 2^(exp - prec + 1) is still an integer. */
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(x));
    mpfr_div_2si(t, x, mpfr_get_exp(x) - (mpfr_exp_t)mpfr_get_prec(x) + 1, MPFR_RNDN);
    int odd = !mpfr_integer_p(t);
    mpfr_clear(t);
    if (!odd) {
        if (mpfr_sgn(x) > 0)
            mpfr_nextabove(x);
        else
            mpfr_nextbelow(x);
    }
}

/* Finishes element (i, j) from its exact (or odd-rounded) accumulator value:
 * y = acc through the epilogue's steps in order (scales exact, a bias added
 * rounded to odd at REF_EPI_PREC bits), y_rn its output rounding. */
static void finish_exact(truth_ctx *c, int64_t i, int64_t j, mpfr_t acc, ref_truth *t)
{
    const qv_variant *v = c->p->v;
    ref_operands *o = &c->o;
    mpfr_t x;
    mpfr_init2(x, REF_EPI_PREC);
    mpfr_set(x, acc, MPFR_RNDN);
    int64_t e = i * o->n + j;
    for (int st = 0; st < QV_EP_MAX && v->arith.epilogue[st] != QV_EP_END; st++) {
        qv_ep_step s = v->arith.epilogue[st];
#ifdef QV_MUTANT_orc_truth_bias_last
        /* Oracle mutant: the bias added after every scale, whatever ep= says. */
        if (s == QV_EP_ADD_BIAS) continue;
#endif
#ifdef QV_MUTANT_orc_truth_scale2_skipped
        /* Oracle mutant: the second-level scale left out of the exact value. */
        if (s == QV_EP_MUL_WSCALE2) continue;
#endif
        if (s == QV_EP_ADD_BIAS) {
            c->y1[e] = mpfr_get_d(x, MPFR_RNDN);
            make_odd(x, mpfr_add_d(x, x, o->bias[j], MPFR_RNDZ));
        } else if (s == QV_EP_MUL_WSCALE || s == QV_EP_MUL_WSCALE2 || s == QV_EP_MUL_ASCALE) {
            /* exact while no bias came first: 256 + 3 x 24 bits */
            make_odd(x, mpfr_mul_d(x, x, ref_ep_factor(o, s, i, j), MPFR_RNDZ));
        }
    }
#ifdef QV_MUTANT_orc_truth_bias_last
    if (v->bias_fmt != QV_FMT_NONE) {
        c->y1[e] = mpfr_get_d(x, MPFR_RNDN);
        make_odd(x, mpfr_add_d(x, x, o->bias[j], MPFR_RNDZ));
    }
#endif
    t->y[e] = mpfr_get_d(x, MPFR_RNDN);
    t->y_rn[e] = ref_round_to(v->ofmt, odd_double(x), v->arith.out_sat == QV_SAT_FINITE);
    mpfr_clear(x);
}

/* Finishes element (i, j) as finish_exact does, without MPFR, when its exact
 * accumulator value is the double x and the epilogue only multiplies: then
 * the scales' product F is formed exactly in a double (checked with an fma),
 * x F = p + e exactly (p = RN(x F), e = fma(x, F, -p), exact away from
 * underflow), y = p is the double nearest the exact value, and y_rn is the
 * output rounding of p + e through a round-to-odd double (ref_round_sum), as
 * finish_exact's odd_double gives. Returns 0, touching nothing, when any of
 * that does not hold (a bias, a product of scales past 53 bits, a product
 * near underflow or past overflow); the caller then takes finish_exact. */
static int finish_fast(truth_ctx *c, int64_t i, int64_t j, double x, ref_truth *t)
{
    const qv_variant *v = c->p->v;
    const double tiny = 0x1p-960; /* above it a product's error is a double */
    double f = 1.0;
    for (int st = 0; st < QV_EP_MAX && v->arith.epilogue[st] != QV_EP_END; st++) {
        qv_ep_step s = v->arith.epilogue[st];
        if (s == QV_EP_ADD_BIAS) return 0;
#ifdef QV_MUTANT_orc_truth_scale2_skipped
        /* Oracle mutant: the second-level scale left out of the exact value. */
        if (s == QV_EP_MUL_WSCALE2) continue;
#endif
        if (s != QV_EP_MUL_WSCALE && s != QV_EP_MUL_WSCALE2 && s != QV_EP_MUL_ASCALE) continue;
        double g = ref_ep_factor(&c->o, s, i, j), fg = f * g;
        if (!isfinite(fg) || (fg != 0.0 && fabs(fg) < tiny) || fma(f, g, -fg) != 0.0) return 0;
        f = fg;
    }
    double p = x * f;
    if (!isfinite(p) || (p != 0.0 && fabs(p) < tiny)) return 0;
    double e = fma(x, f, -p);
    int64_t el = i * c->o.n + j;
    int sat = v->arith.out_sat == QV_SAT_FINITE;
    t->y[el] = p;
    t->y_rn[el] = e == 0.0 ? ref_round_to(v->ofmt, p, sat) : ref_round_sum(v->ofmt, p, e, sat);
    return 1;
}

/* x := the exact value acc * 2^exp of a signed __int128 (exact at REF_ACC_PREC). */
static void mpfr_set_i128(mpfr_t x, __int128 acc, long exp, mpfr_t lo)
{
    unsigned __int128 mag = acc < 0 ? -(unsigned __int128)acc : (unsigned __int128)acc;
    mpfr_set_uj(x, (uintmax_t)(uint64_t)(mag >> 64), MPFR_RNDN);
    mpfr_mul_2ui(x, x, 64, MPFR_RNDN);
    mpfr_set_uj(lo, (uintmax_t)(uint64_t)mag, MPFR_RNDN);
    mpfr_add(x, x, lo, MPFR_RNDN); /* exact: 128 bits <= REF_ACC_PREC */
    if (acc < 0) mpfr_neg(x, x, MPFR_RNDN);
    mpfr_mul_2si(x, x, exp, MPFR_RNDN);
}

/* An exact sum acc 2^ex (an __int128, |acc 2^ex| a double's range): as a
 * double when it is one (53 bits, not subnormal), through finish_fast, else
 * through MPFR (x and lo are scratch of REF_ACC_PREC and 64 bits). */
static void finish_i128(truth_ctx *c, int64_t i, int64_t j, __int128 acc, long ex, mpfr_t x, mpfr_t lo,
                        ref_truth *t)
{
    const __int128 lim = (__int128)1 << 53;
    if (acc < lim && acc > -lim && ex > -900 && ex < 900) {
        uint64_t sb = (uint64_t)(ex + 1023) << 52; /* 2^ex */
        double s2;
        memcpy(&s2, &sb, sizeof s2);
        double d = (double)acc * s2; /* exact: 53 bits, scaled within the normal range */
        if ((d == 0.0 || fabs(d) > 0x1p-1000) && finish_fast(c, i, j, d, t)) return;
    }
    mpfr_set_i128(x, acc, ex, lo);
    finish_exact(c, i, j, x, t);
}

/* Makes c->g, dgemm's sums of |a||w|, certified upper bounds. */
static void inflate_g(truth_ctx *c)
{
    int64_t mn = c->o.m * c->o.n, k = c->o.k;
    /* A sum of K nonnegative doubles computed in any order is within gamma_K of
     * the exact one; inflating by 2(K+2)2^-53 makes it an upper bound. */
#ifdef QV_MUTANT_orc_g_inflation_unscaled
    /* Oracle mutant: the rounding inflation of G written without its 2^-53. */
    double infl = 1.0 + 2.0 * (double)(k + 2);
#else
    double infl = 1.0 + 2.0 * (double)(k + 2) * ldexp(1.0, -53);
#endif
    for (int64_t i = 0; i < mn; i++) c->g[i] *= infl;
}

/* Certified G = sum |a||w| for every element, from dgemm on magnitudes. */
static qv_status compute_g(truth_ctx *c)
{
    ref_operands *o = &c->o;
    int64_t m = o->m, n = o->n, k = o->k;
    /* |w| in column panels of P, so no second (k, n) copy is made (ref_ozaki_sums
     * forms G with the same panels) */
    const int64_t P = n < REF_OZAKI_G_PANEL ? n : REF_OZAKI_G_PANEL;
    double *aa = malloc(sizeof(double) * (size_t)(m * k));
    double *aw = malloc(sizeof(double) * (size_t)(k * P));
    c->g = c->t->bound;
    if (!aa || !aw) {
        free(aa);
        free(aw);
        return qv_fail(QV_ERR_NOMEM, "out of memory computing the bound");
    }
    for (int64_t i = 0; i < m * k; i++) aa[i] = isfinite(o->a[i]) ? fabs(o->a[i]) : 0.0;
    for (int64_t j0 = 0; j0 < n; j0 += P) {
        int64_t pw = j0 + P <= n ? P : n - j0;
        for (int64_t kk = 0; kk < k; kk++)
            for (int64_t jj = 0; jj < pw; jj++) {
                double x = o->w[kk * n + j0 + jj];
                aw[kk * pw + jj] = isfinite(x) ? fabs(x) : 0.0;
            }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)pw, (int)k, 1.0, aa, (int)k, aw,
                    (int)pw, 0.0, c->g + j0, (int)n);
    }
    inflate_g(c);
    free(aa);
    free(aw);
    return QV_OK;
}

/* Integer operands: an int32 accumulator without segment scales folded in. */
static int is_integer_path(const qv_variant *v) { return v->arith.accum == QV_ACC_INT32 && !qv_spec_segment(v); }

/* ---- int64 --------------------------------------------------------------- */

/* Fills t->y and t->y_rn ((m, n) each) from exact int64 dot products. */
static void path_int64(truth_ctx *c, ref_truth *t)
{
    ref_operands *o = &c->o;
    int64_t m = o->m, n = o->n, k = o->k;
    int64_t *acc = calloc((size_t)n, sizeof(int64_t));
    int64_t *ai = malloc(sizeof(int64_t) * (size_t)k);
    int32_t *wi = malloc(sizeof(int32_t) * (size_t)(k * n));
    QV_ASSERT(acc && ai && wi, "out of memory in the int64 reference");
    for (int64_t i = 0; i < k * n; i++) wi[i] = (int32_t)o->w[i];
    mpfr_t x, lo;
    mpfr_init2(x, REF_ACC_PREC);
    mpfr_init2(lo, 64);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t kk = 0; kk < k; kk++) ai[kk] = (int64_t)o->a[i * k + kk];
        memset(acc, 0, sizeof(int64_t) * (size_t)n);
#ifdef QV_MUTANT_orc_int64_last_product_dropped
        /* Oracle mutant: the exact integer sum stops one product short. */
        for (int64_t kk = 0; kk < k - 1; kk++) {
#else
        for (int64_t kk = 0; kk < k; kk++) {
#endif
            int64_t av = ai[kk];
            if (!av) continue;
            const int32_t *wr = wi + kk * n;
            for (int64_t j = 0; j < n; j++) acc[j] += av * wr[j];
        }
        for (int64_t j = 0; j < n; j++) finish_i128(c, i, j, acc[j], 0, x, lo, t);
    }
    mpfr_clear(x);
    mpfr_clear(lo);
    free(acc);
    free(ai);
    free(wi);
}

/* ---- fixed128 ------------------------------------------------------------ */

/* x = mant * 2^exp with mant an odd integer (0 for x == 0), read from the
 * IEEE-754 fields: 52 fraction bits, exponent bias 1023, subnormals at 2^-1074. */
static void split_double(double x, int64_t *mant, int *exp)
{
    if (x == 0.0 || !isfinite(x)) {
        *mant = 0;
        *exp = 0;
        return;
    }
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int ef = (int)((bits >> 52) & 0x7FF);
    int64_t mm = (int64_t)(bits & ((UINT64_C(1) << 52) - 1));
    int e;
    if (ef == 0) {
        e = -1074;
    } else {
        mm |= INT64_C(1) << 52;
        e = ef - 1075;
    }
    int tz = __builtin_ctzll((unsigned long long)mm);
    mm >>= tz;
    *mant = (bits >> 63) ? -mm : mm;
    *exp = e + tz;
}

static int bit_len(int64_t v)
{
    uint64_t a = v < 0 ? (uint64_t)(-v) : (uint64_t)v;
    return a ? 64 - __builtin_clzll(a) : 0;
}

typedef struct fixed_ops {
    int64_t *ma, *mw; /* (m, k), (n, k): odd mantissas */
    int *ea, *ew;     /* exponents */
    int q;            /* the quantum exponent */
} fixed_ops;

/* Decides whether fixed128 is exact for these operands; fills f when it is. */
static int fixed_plan(truth_ctx *c, fixed_ops *f)
{
    ref_operands *o = &c->o;
    int64_t m = o->m, n = o->n, k = o->k;
    memset(f, 0, sizeof *f);
    if (o->nonfinite) return 0;
    f->ma = malloc(sizeof(int64_t) * (size_t)(m * k));
    f->mw = malloc(sizeof(int64_t) * (size_t)(n * k));
    f->ea = malloc(sizeof(int) * (size_t)(m * k));
    f->ew = malloc(sizeof(int) * (size_t)(n * k));
    QV_ASSERT(f->ma && f->mw && f->ea && f->ew, "out of memory in the fixed128 reference");
    int mina = 1 << 20, minw = 1 << 20, topa = -(1 << 20), topw = -(1 << 20), bitsa = 0, bitsw = 0;
    for (int64_t i = 0; i < m * k; i++) {
        split_double(o->a[i], &f->ma[i], &f->ea[i]);
        if (!f->ma[i]) continue;
        int b = bit_len(f->ma[i]);
        if (f->ea[i] < mina) mina = f->ea[i];
        if (f->ea[i] + b > topa) topa = f->ea[i] + b;
        if (b > bitsa) bitsa = b;
    }
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) {
            int64_t d = j * k + kk; /* transposed: k-inner for the dot products */
            split_double(o->w[kk * n + j], &f->mw[d], &f->ew[d]);
            if (!f->mw[d]) continue;
            int b = bit_len(f->mw[d]);
            if (f->ew[d] < minw) minw = f->ew[d];
            if (f->ew[d] + b > topw) topw = f->ew[d] + b;
            if (b > bitsw) bitsw = b;
        }
    if (bitsa == 0 || bitsw == 0) {
        f->q = 0; /* every product is zero */
        return 1;
    }
    f->q = mina + minw;
    int logk = 0;
    while (((int64_t)1 << logk) < k + 1) logk++;
    /* Products of mantissas in int64 (< 2^62), sum magnitude < 2^125. */
#ifdef QV_MUTANT_orc_fixed128_range_unchecked
    /* Oracle mutant: the 125-bit range test dropped: a wide exponent range
     * shifts products past the __int128. */
    if (bitsa + bitsw > 62) return 0;
    (void)logk;
#else
    if (bitsa + bitsw > 62 || topa + topw - f->q + logk > 125) return 0;
#endif
    return 1;
}

static void fixed_free(fixed_ops *f)
{
    free(f->ma);
    free(f->mw);
    free(f->ea);
    free(f->ew);
}

typedef struct ozaki_fin {
    truth_ctx *c;
    ref_truth *t;
    const ref_ozaki_out *oz;
    int64_t j0, pw, rows; /* the panel's columns; output rows per block */
} ozaki_fin;

/* Finishes the elements of block b (fin->rows output rows) of the current
 * column panel from the digit GEMMs' exact sums. */
static void ozaki_finish_rows(void *ctx, int64_t b)
{
    const ozaki_fin *fin = ctx;
    truth_ctx *c = fin->c;
    ref_truth *t = fin->t;
    const ref_ozaki_out *oz = fin->oz;
    const ref_operands *o = &c->o;
    const qv_variant *v = c->p->v;
    /* Without epilogue steps y is the sum itself: hi + lo with hi = RN(acc)
     * and lo = acc - hi (both exact doubles for |acc| < 2^106), scaled by a
     * power of two, and its correctly rounded output is RN of that exact sum
     * (ref_round_sum). Otherwise finish_i128 takes the epilogue. */
    int plain = v->arith.epilogue[0] == QV_EP_END;
    int sat = v->arith.out_sat == QV_SAT_FINITE;
    int64_t i1 = (b + 1) * fin->rows < o->m ? (b + 1) * fin->rows : o->m;
    mpfr_t x, lo;
    mpfr_init2(x, REF_ACC_PREC);
    mpfr_init2(lo, 64);
    for (int64_t i = b * fin->rows; i < i1; i++)
        for (int64_t jj = 0; jj < fin->pw; jj++) {
            int64_t j = fin->j0 + jj, e = i * o->n + j;
            long ex = (long)oz->row_exp[i] + oz->col_exp[j] + oz->base;
            __int128 acc = oz->acc[i * fin->pw + jj];
            const __int128 lim = (__int128)1 << 106;
            if (plain && ex > -900 && ex < 900 && acc < lim && acc > -lim) {
                double hi = (double)acc;                /* RN: |acc| < 2^127 */
                double rest = (double)(acc - (__int128)hi); /* exact: |acc| < 2^106 leaves 53 bits */
                double s = ldexp(1.0, (int)ex);
                if (fabs(hi * s) > 0x1p-1000 || hi == 0.0) {
                    t->y[e] = hi * s; /* exact: a power-of-two scaling in range */
                    t->y_rn[e] = ref_round_sum(v->ofmt, hi * s, rest * s, sat);
                    continue;
                }
            }
            finish_i128(c, i, j, acc, ex, x, lo, t);
        }
    mpfr_clear(x);
    mpfr_clear(lo);
}

/* ref_ozaki_panel_fn: finishes a panel's elements in blocks of output rows
 * (about 16384 elements each, fixed by the shape). */
static void ozaki_panel(void *ctx, const ref_ozaki_out *oz, int64_t j0, int64_t pw)
{
    ozaki_fin *fin = ctx;
    fin->oz = oz;
    fin->j0 = j0;
    fin->pw = pw;
    fin->rows = rows_per_block(pw);
    ref_parallel_for((fin->c->o.m + fin->rows - 1) / fin->rows, fin->c->jobs, ozaki_finish_rows, fin);
}

/* Fills t->y and t->y_rn ((m, n) each) from the exact sums of the digit
 * GEMMs (ozaki.c), panel by panel, and c->g; returns 0 (c->g NULL) when the
 * operands do not fit the scheme. */
static int path_ozaki(truth_ctx *c, ref_truth *t)
{
    ref_operands *o = &c->o;
    ref_ozaki_out oz;
    /* G from the same sweep over the weights (compute_g's bits) */
    c->g = t->bound;
    ozaki_fin fin = {.c = c, .t = t};
    if (o->nonfinite || !ref_ozaki_sums(o->a, o->w, o->m, o->n, o->k, c->g, c->jobs, ozaki_panel, &fin, &oz)) {
        c->g = NULL;
        return 0;
    }
    inflate_g(c);
    ref_ozaki_clear(&oz);
    return 1;
}

/* Fills t->y and t->y_rn ((m, n) each) from exact __int128 sums. */
static void path_fixed(truth_ctx *c, fixed_ops *f, ref_truth *t)
{
    ref_operands *o = &c->o;
    int64_t m = o->m, n = o->n, k = o->k;
    mpfr_t x, lo;
    mpfr_init2(x, REF_ACC_PREC);
    mpfr_init2(lo, 64);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            const int64_t *ma = f->ma + i * k, *mw = f->mw + j * k;
            const int *ea = f->ea + i * k, *ew = f->ew + j * k;
            __int128 acc = 0;
            for (int64_t kk = 0; kk < k; kk++) {
                int64_t pm = ma[kk] * mw[kk];
                if (pm) acc += (__int128)pm << (ea[kk] + ew[kk] - f->q);
            }
            finish_i128(c, i, j, acc, f->q, x, lo, t);
        }
    mpfr_clear(x);
    mpfr_clear(lo);
}

/* ---- mpfr ---------------------------------------------------------------- */

/* Fills t->y and t->y_rn ((m, n) each) from exact MPFR sums. */
static void path_mpfr(truth_ctx *c, ref_truth *t)
{
    ref_operands *o = &c->o;
    int64_t m = o->m, n = o->n, k = o->k;
    mpfr_t *prod = malloc(sizeof(mpfr_t) * (size_t)k);
    mpfr_ptr *ptr = malloc(sizeof(mpfr_ptr) * (size_t)k);
    QV_ASSERT(prod && ptr, "out of memory in the MPFR reference");
    /* A product of two doubles has at most 106 significant bits: exact at 106. */
    for (int64_t kk = 0; kk < k; kk++) {
#ifdef QV_MUTANT_orc_mpfr_products_rounded
        /* Oracle mutant: the products kept at double precision (53 bits). */
        mpfr_init2(prod[kk], 53);
#else
        mpfr_init2(prod[kk], 106);
#endif
        ptr[kk] = prod[kk];
    }
    mpfr_t acc, av;
    mpfr_init2(acc, REF_ACC_PREC);
    mpfr_init2(av, 53);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            for (int64_t kk = 0; kk < k; kk++) {
                double a = o->a[i * k + kk], w = o->w[kk * n + j];
                mpfr_set_d(av, isfinite(a) ? a : 0.0, MPFR_RNDN);
                mpfr_mul_d(prod[kk], av, isfinite(w) ? w : 0.0, MPFR_RNDN);
            }
            int tern = mpfr_sum(acc, ptr, (unsigned long)k, MPFR_RNDZ);
            make_odd(acc, tern);
            finish_exact(c, i, j, acc, t);
        }
    for (int64_t kk = 0; kk < k; kk++) mpfr_clear(prod[kk]);
    mpfr_clear(acc);
    mpfr_clear(av);
    free(prod);
    free(ptr);
}

/* ---- dgemm + certified term ---------------------------------------------- */

/* Fills t->y, t->y_rn and *ref_err_out ((m, n) each, made here: the dgemm
 * term of E). */
static qv_status path_dgemm(truth_ctx *c, ref_truth *t, double **ref_err_out)
{
    ref_operands *o = &c->o;
    const qv_variant *v = c->p->v;
    int64_t m = o->m, n = o->n, k = o->k;
    double *ref_err = *ref_err_out = calloc((size_t)(m * n), sizeof(double));
    if (!ref_err) return qv_fail(QV_ERR_NOMEM, "out of memory for the reference of %s", v->name);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, o->a, (int)k,
                o->w, (int)n, 0.0, t->y, (int)n);
#ifdef QV_MUTANT_orc_dgemm_term_dropped
    /* Oracle mutant: the fast path's own error left out of E. */
    double gam = 0.0;
#else
    double gam = (double)(k + 2) * ldexp(1.0, -53);
#endif
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t e = i * n + j;
            double x = t->y[e], s = 1.0, err = gam * c->g[e];
            for (int st = 0; st < QV_EP_MAX && v->arith.epilogue[st] != QV_EP_END; st++) {
                qv_ep_step sp = v->arith.epilogue[st];
                if (sp == QV_EP_ADD_BIAS) {
                    c->y1[e] = x;
                    /* the double sum's rounding, relative to its terms */
                    err = err * (1.0 + ldexp(1.0, -50)) + ldexp(1.0, -52) * (fabs(x) + fabs(o->bias[j]));
                    x += o->bias[j];
                } else {
                    double f = ref_ep_factor(o, sp, i, j);
                    x *= f;
                    s *= f;
                    err *= fabs(f) * (1.0 + ldexp(1.0, -50)); /* each product one rounding */
                }
            }
            (void)s;
            t->y[e] = x;
            ref_err[e] = err;
            t->y_rn[e] = ref_round_to(v->ofmt, t->y[e], v->arith.out_sat == QV_SAT_FINITE);
        }
    return QV_OK;
}

/* Elements whose row of A or column of W holds a NaN or Inf: plain IEEE double
 * arithmetic gives the NaN/Inf the declared math produces; E = 0 there. */
static void fix_nonfinite(truth_ctx *c, ref_truth *t, double *ref_err)
{
    ref_operands *o = &c->o;
    int64_t m = o->m, n = o->n, k = o->k;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            int bad = 0;
            for (int64_t kk = 0; kk < k; kk++) {
                double a = o->a[i * k + kk], w = o->w[kk * n + j];
                bad |= !isfinite(a) || !isfinite(w);
                s += a * w;
            }
            for (int st = 0; st < QV_EP_MAX && c->p->v->arith.epilogue[st] != QV_EP_END; st++) {
                qv_ep_step sp = c->p->v->arith.epilogue[st];
                s = sp == QV_EP_ADD_BIAS ? s + o->bias[j] : s * ref_ep_factor(o, sp, i, j);
            }
            if (!bad && isfinite(s)) continue;
            int64_t e = i * n + j;
            t->y[e] = t->y_rn[e] = s;
            if (ref_err) ref_err[e] = 0.0;
            c->g[e] = 0.0;
        }
}

/* The accumulators whose bound follows the sum's structure (bound.c): the
 * fp8 tensor core's narrow accumulator, any sum scaled per segment, and int32
 * partials of split-K slices added in fp32 (alpha is 0 for int32 otherwise). */
static int needs_accum_bound(const qv_variant *v)
{
    return v->arith.accum == QV_ACC_TC_FP8 || qv_spec_segment(v) > 0 ||
           (v->arith.accum == QV_ACC_INT32 && v->arith.reduce == QV_RED_F32);
}

/* The declared accumulator as bound.c models it. */
static ref_accum_model accum_model(const qv_variant *v, int64_t k)
{
    const qv_arith *ar = &v->arith;
    ref_accum_model am = {.seg = qv_spec_segment(v), .red_f32 = ar->reduce == QV_RED_F32};
    double b = ar->block_b > 0 ? ar->block_b : 16.0;
    switch (ar->accum) {
    case QV_ACC_INT32: am.kind = REF_ACC_INT; break;
    case QV_ACC_TC_F32:
        am.kind = REF_ACC_TC_F32;
        am.alpha_per_k = 2.0 * (1.0 + 1.0 / b) * ldexp(1.0, -23);
        break;
    case QV_ACC_FMA_F32: {
        /* gamma_L <= L u / (1 - L u): per product u / (1 - K u) for every L <= K */
        double ku = (double)k * ldexp(1.0, -24);
        am.kind = REF_ACC_FMA_F32;
        am.alpha_per_k = ku < 0.5 ? ldexp(1.0, -24) / (1.0 - ku) : INFINITY;
        break;
    }
    case QV_ACC_TC_FP8:
        am.kind = REF_ACC_NARROW;
        am.bits = ar->acc_bits > 0 ? ar->acc_bits : 14;
#ifdef QV_MUTANT_orc_fp8_promotion_ignored
        /* Oracle mutant: the bound takes all of K in the narrow accumulator. */
        am.promote = 0;
#else
        am.promote = ar->promote_nc;
#endif
        break;
    }
    return am;
}

/* c->g := the structured accumulator bound of every element, in the units of
 * the scaled sum, from the unscaled operands and the segment scales. */
static qv_status accum_bounds(truth_ctx *c)
{
    const qv_problem *p = c->p;
    int64_t m = p->m, n = p->n, k = p->k;
    /* The unscaled operands: the truth's own when it folded no segment
     * scales into them (they are then the same values). */
    ref_operands own;
    const ref_operands *u = &c->o;
    if (c->o.folded) {
        QV_TRY(ref_operands_create(p, 0, &own));
        u = &own;
    }
    ref_accum_model am = accum_model(p->v, k);
    int64_t nseg = am.seg > 0 ? (k + am.seg - 1) / am.seg : 1;
    double *wcol = malloc(sizeof(double) * (size_t)k);
    double *ap = malloc(sizeof(double) * (size_t)k);
    double *sigma = malloc(sizeof(double) * (size_t)nseg);
    if (!wcol || !ap || !sigma) {
        free(wcol);
        free(ap);
        free(sigma);
        if (u == &own) ref_operands_destroy(&own);
        return qv_fail(QV_ERR_NOMEM, "out of memory for the accumulator bound");
    }
    for (int64_t j = 0; j < n; j++) {
        /* column j of the (k, n) weights, contiguous along K */
        for (int64_t kk = 0; kk < k; kk++) wcol[kk] = u->w[kk * n + j];
        for (int64_t i = 0; i < m; i++) {
            const double *a = u->a + i * k;
            for (int64_t kk = 0; kk < k; kk++) {
                double x = a[kk] * wcol[kk];
                ap[kk] = isfinite(x) ? x : 0.0;
            }
            for (int64_t sg = 0; am.seg > 0 && sg < nseg; sg++) {
                double sa, sw;
                ref_segment_scales(p, i, j, sg, &sa, &sw);
                double x = fabs(sa * sw) * (1.0 + ldexp(1.0, -52));
                sigma[sg] = isfinite(x) ? x : 0.0;
            }
            c->g[i * n + j] = ref_bound_accum(&am, ap, sigma, k);
        }
    }
    free(wcol);
    free(ap);
    free(sigma);
    if (u == &own) ref_operands_destroy(&own);
    return QV_OK;
}

/* E for the elements of block b (rows_per_block output rows), from y, G
 * (or the structured accumulator bound in it), the epilogue and ref_err. */
static void bound_rows(void *ctx, int64_t b)
{
    truth_ctx *c = ctx;
    const qv_problem *p = c->p;
    const qv_variant *v = p->v;
    ref_truth *t = c->t;
    int64_t rows = rows_per_block(p->n);
    int64_t i0 = b * rows, i1 = i0 + rows < p->m ? i0 + rows : p->m;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = 0; j < p->n; j++) {
            int64_t e = i * p->n + j;
            if (!isfinite(t->y[e])) {
                t->bound[e] = 0.0;
                continue;
            }
            if (!c->y1) {
                double s = fabs(c->o.col_s1[j] * c->o.col_s2[j] * c->o.row_s[i]);
                s *= 1.0 + ldexp(1.0, -50); /* three double roundings in the product */
                t->bound[e] = ref_bound_element(c->alpha, c->g[e], s, t->y[e], c->o.ep_ops, p->k, c->unit,
                                                c->ref_err ? c->ref_err[e] : 0.0);
                continue;
            }
            /* a bias: the scales and roundings on each side of it */
            double s1 = 1.0, s2 = 1.0;
            int n1 = 0, n2 = 0, after = 0;
            for (int st2 = 0; st2 < QV_EP_MAX && v->arith.epilogue[st2] != QV_EP_END; st2++) {
                qv_ep_step sp = v->arith.epilogue[st2];
                if (sp == QV_EP_ADD_BIAS) {
                    after = 1;
                } else if (sp == QV_EP_SUB_AZP) {
                    continue;
                } else if (after) {
                    s2 *= fabs(ref_ep_factor(&c->o, sp, i, j));
                    n2++;
                } else {
                    s1 *= fabs(ref_ep_factor(&c->o, sp, i, j));
                    n1++;
                }
            }
            s1 *= 1.0 + ldexp(1.0, -50);
            s2 *= 1.0 + ldexp(1.0, -50);
            double y2 = c->y1[e] + c->o.bias[j];
            t->bound[e] = ref_bound_element_bias(c->alpha, c->g[e], s1, n1, c->y1[e], y2, s2, n2, t->y[e], p->k,
                                                 c->unit, c->ref_err ? c->ref_err[e] : 0.0);
        }
}

void ref_truth_clear(ref_truth *t)
{
    if (!t) return;
    free(t->y);
    free(t->bound);
    free(t->y_rn);
    memset(t, 0, sizeof *t);
}

qv_status ref_truth_compute_path(const qv_problem *p, const char *path, ref_truth *t)
{
    const ref_truth_opts opts = {.path = path, .jobs = 1};
    return ref_truth_compute_ex(p, &opts, t);
}

qv_status ref_truth_compute_ex(const qv_problem *p, const ref_truth_opts *opts, ref_truth *t)
{
    const qv_variant *v = p->v;
    const char *path = opts ? opts->path : NULL;
    memset(t, 0, sizeof *t);
    t->m = p->m;
    t->n = p->n;
    int64_t mn = p->m * p->n;
    t->y = calloc((size_t)mn, sizeof(double));
    t->bound = calloc((size_t)mn, sizeof(double));
    t->y_rn = calloc((size_t)mn, sizeof(double));
    double *ref_err = NULL; /* (m, n), made by the dgemm path alone: 0 elsewhere */
    if (!t->y || !t->bound || !t->y_rn) {
        free(ref_err);
        ref_truth_clear(t);
        return qv_fail(QV_ERR_NOMEM, "out of memory for the reference of %s", v->name);
    }
    truth_ctx c = {.p = p, .t = t, .jobs = opts && opts->jobs > 1 ? opts->jobs : 1};
    qv_status st = ref_operands_create_jobs(p, 1, c.jobs, &c.o);
    if (st == QV_OK && opts && opts->check_operands) {
        st = ref_operands_check_made(p, &c.o);
        if (st != QV_OK) ref_operands_destroy(&c.o);
    }
    if (st != QV_OK) {
        free(ref_err);
        ref_truth_clear(t);
        return st;
    }
    c.alpha = ref_alpha(v, p->k);
    if (v->bias_fmt != QV_FMT_NONE) {
        c.y1 = calloc((size_t)mn, sizeof(double));
        if (!c.y1) {
            free(ref_err);
            ref_operands_destroy(&c.o);
            ref_truth_clear(t);
            return qv_fail(QV_ERR_NOMEM, "out of memory for the reference of %s", v->name);
        }
    }

    int64_t macs = p->m * p->n * p->k;
    const char *want = path && *path ? path : NULL;
    fixed_ops f;
    memset(&f, 0, sizeof f);
    /* The digit GEMMs form G themselves (path_ozaki); every other path takes
     * compute_g's. */
    int oz = (want ? !strcmp(want, "ozaki")
                   : macs >= (is_integer_path(v) ? REF_OZAKI_MIN_MACS_INT : REF_OZAKI_MIN_MACS)) &&
             path_ozaki(&c, t);
    if (!oz) st = compute_g(&c);
    if (st != QV_OK) {
        /* no memory for G: that error is the result */
    } else if (want && !strcmp(want, "int64") && !is_integer_path(v))
        st = qv_fail(QV_ERR_UNSUPPORTED, "%s: the int64 path needs an integer accumulator", v->name);
    else if (want && strcmp(want, "int64") && strcmp(want, "fixed128") && strcmp(want, "mpfr") &&
             strcmp(want, "dgemm+cert") && strcmp(want, "ozaki"))
        st = qv_fail(QV_ERR_USAGE, "unknown reference path '%s' (int64, fixed128, ozaki, mpfr, dgemm+cert)", want);
    else if (oz) {
        t->path = "ozaki";
        t->why = "every operand an exact sum of base-2^beta digits whose K products stay below 2^53: "
                 "digit dgemms are exact, combined in __int128";
    } else if (want && !strcmp(want, "ozaki")) {
        st = qv_fail(QV_ERR_UNSUPPORTED, "%s: the operands span too many bits (or are not finite) for the digit "
                     "GEMMs' __int128 combination", v->name);
    } else if (want ? !strcmp(want, "int64") : is_integer_path(v)) {
        t->path = "int64";
        t->why = "integer operands: the dot product is summed exactly in int64";
        path_int64(&c, t);
    } else if (want ? !strcmp(want, "dgemm+cert") : macs > REF_EXACT_MAX_MACS) {
        t->path = "dgemm+cert";
        t->why = "large case: dgemm sum with (K+2)*2^-53*G added to E; y_rn from the dgemm value, "
                 "not certified rounding";
        st = path_dgemm(&c, t, &ref_err);
    } else if ((!want || !strcmp(want, "fixed128")) && fixed_plan(&c, &f)) {
        t->path = "fixed128";
        t->why = "every product is an integer multiple of 2^(min ea + min eb) below 2^125: exact __int128 sum";
        path_fixed(&c, &f, t);
    } else if (want && !strcmp(want, "fixed128")) {
        st = qv_fail(QV_ERR_UNSUPPORTED,
                     "%s: the operands' exponent range does not fit a 128-bit fixed-point accumulator",
                     v->name);
    } else if (want || macs <= REF_MPFR_MAX_MACS) {
        t->path = "mpfr";
        t->why = "exponent range beyond fixed point: exact products, mpfr_sum rounded to odd at 256 bits";
        path_mpfr(&c, t);
    } else {
        t->path = "dgemm+cert";
        t->why = "exponent range beyond fixed point and too large for MPFR: dgemm with (K+2)*2^-53*G in E";
        st = path_dgemm(&c, t, &ref_err);
    }
    fixed_free(&f);
    /* The accumulator's error per element: block-structured for the fp8
     * accumulator and for sums scaled per segment (c.g then holds that bound
     * and alpha is 1), alpha * G otherwise. */
    if (st == QV_OK && needs_accum_bound(v)) {
        st = accum_bounds(&c);
        c.alpha = 1.0;
    }
    if (st == QV_OK) {
#ifdef QV_MUTANT_orc_nonfinite_unmarked
        /* Oracle mutant: NaN and Inf operands never marked: their elements
         * keep the finite sums of the exact paths (which zero them). */
        (void)fix_nonfinite;
#else
        if (c.o.nonfinite) fix_nonfinite(&c, t, ref_err);
#endif
        /* the kernel's accumulator may sum in other units than the declared
         * ones (marlin-fp4-nv), which moves where fp32 underflow begins */
        c.unit = ldexp(1.0, -ref_acc_pow2(p));
        c.ref_err = ref_err;
        int64_t rows = rows_per_block(p->n);
        ref_parallel_for((p->m + rows - 1) / rows, c.jobs, bound_rows, &c);
    }
    free(ref_err);
    free(c.y1);
    ref_operands_destroy(&c.o);
    if (st != QV_OK) ref_truth_clear(t);
    return st;
}

qv_status ref_truth_compute(const qv_problem *p, ref_truth *t)
{
    return ref_truth_compute_path(p, NULL, t);
}
