/* verify.c: the verdict for one output against the truth (reference.h,
 * docs/design.md §3).
 *
 * FAIL, per element:
 *   - out outside [RN(y - E), RN(y + E)], RN being the row's output rounding
 *     (RNE, then its saturation rule; overflow is Inf unless saturating). The
 *     kernel's pre-cast value lies in [y - E, y + E] and RNE is monotone, so a
 *     correct kernel's output can only land there; this interval lies inside the
 *     directed roundings [RD(y - E), RU(y + E)] and is the sharper of the two.
 *   - a NaN or Inf where the model has none, or a different one;
 *   - the element still holds the poison code (never written).
 * MARGINAL, from statistical monitors on passing outputs:
 *   - p99 of r > 0.5, where r = max(0, |out - y| - ulp/2) / E is the error beyond
 *     the output rounding relative to the accumulation bound (r <= 1 for every
 *     element that passes; a kernel that routinely spends half its worst-case
 *     budget is suspicious, since real accumulation errors grow like sqrt(K));
 *   - a signed-bias z-score |z| > 6 over >= 64 distinct nonzero errors,
 *     z = sum s / sqrt(sum s^2) with s = (out - y) / (E + ulp/2), each distinct
 *     (y, s) pair counted once (repeated rows/columns are one observation): under
 *     symmetric independent errors z is about N(0,1), so 6 sigma is a one-in-10^9
 *     false alarm;
 *   - NMSE (llama.cpp: sum (out-y)^2 / sum y^2) above 4x its expectation
 *     sum (ulp^2/12 + (E/3)^2) / sum y^2: ulp^2/12 is the variance of an RNE cast,
 *     (E/3)^2 lets the accumulation error reach its worst case at 3 sigma.
 * A zero reference norm is a vacuous comparison: graded on its elements alone (the
 * zero output is the only correct one) and said in the reason, or FAIL when the
 * caller requires a non-vacuous case (ref_verify_opts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/reference.h"
#include "ref_operands.h"
#include "ref_parallel.h"

#define P99_MARGINAL 0.5  /* see the header comment */
#define BIAS_Z_MARGINAL 6.0
#ifdef QV_MUTANT_orc_monitor_bias_min_count
/* Oracle mutant: the bias monitor wants 4096 distinct errors before it looks. */
#define BIAS_MIN_COUNT 4096
#else
#define BIAS_MIN_COUNT 64
#endif
#ifdef QV_MUTANT_orc_monitor_nmse_factor
/* Oracle mutant: NMSE flagged only at 400 times its expectation. */
#define NMSE_FACTOR 400.0
#else
#define NMSE_FACTOR 4.0
#endif

uint32_t ref_poison_code(qv_fmt ofmt)
{
    switch (ofmt) {
    case QV_FMT_F16: return 0x7E5Au;
    case QV_FMT_BF16: return 0x7FDAu;
    case QV_FMT_F32: return 0x7FC05A5Au;
    /* INT32_MIN: the registry proves |sum| < 2^31, so no correct int32 output is it */
    case QV_FMT_I32: return 0x80000000u;
    default: return 0xFFFFFFFFu;
    }
}

/* out: (m, n) output codes in f (uint16 bits, f32 bits or int32); e: flat index. */
static uint32_t out_code(qv_fmt f, const void *out, int64_t e)
{
    if (f == QV_FMT_F32 || f == QV_FMT_I32) {
        uint32_t c;
        memcpy(&c, (const uint32_t *)out + e, 4);
        return c;
    }
    return ((const uint16_t *)out)[e];
}

static double out_value(qv_fmt f, uint32_t c)
{
    if (f == QV_FMT_F32) {
        float x;
        memcpy(&x, &c, 4);
        return x;
    }
    if (f == QV_FMT_I32) return (double)(int32_t)c;
    return f == QV_FMT_F16 ? qv_f16_to_f32((uint16_t)c) : qv_bf16_to_f32((uint16_t)c);
}

/* Codes ordered as integers along the real line (sign-magnitude to two's;
 * int32 codes are ordered already). */
static int64_t ordered(qv_fmt f, uint32_t c)
{
    if (f == QV_FMT_I32) return (int64_t)(int32_t)c;
    uint32_t sign = f == QV_FMT_F32 ? 0x80000000u : 0x8000u;
    int64_t mag = c & (sign - 1);
    return (c & sign) ? -mag : mag;
}

static uint32_t encode_out(qv_fmt f, double x, int sat)
{
    return qv_encode(f, x, sat ? QV_SAT_FINITE : QV_SAT_NONE);
}

/* k-th smallest of x: (n) doubles, reordered in place. */
static double select_kth(double *x, int64_t n, int64_t kth)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double piv = x[(lo + hi) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (x[i] < piv) i++;
            while (x[j] > piv) j--;
            if (i <= j) {
                double t = x[i];
                x[i] = x[j];
                x[j] = t;
                i++;
                j--;
            }
        }
        if (kth <= j)
            hi = j;
        else if (kth >= i)
            lo = i;
        else
            break;
    }
    return x[kth];
}

/* The p99 of n nonnegative values of which all but the nnz in x are zero
 * (x reordered in place): 0 when more than the 99th percentile's rank are
 * zeros, else a selection among the nonzero ones. */
static double p99_of(double *x, int64_t nnz, int64_t n)
{
    if (n <= 0) return 0.0;
    int64_t kth = (int64_t)ceil(0.99 * (double)n) - 1;
    if (kth < 0) kth = 0;
    int64_t zeros = n - nnz;
    if (zeros > kth) return 0.0;
    return select_kth(x, nnz, kth - zeros);
}

/* One signed, normalized error for the bias monitor. */
typedef struct bias_pt {
    double y, s;
} bias_pt;

/* The bits of a pair with -0 read as +0, so equal values have equal bits
 * (y and s are finite here). */
static void pair_bits(const bias_pt *b, uint64_t *hy, uint64_t *hs)
{
    double y = b->y + 0.0, s = b->s + 0.0; /* -0 + 0 = +0 in round-to-nearest */
    memcpy(hy, &y, 8);
    memcpy(hs, &s, 8);
}

static uint64_t pair_hash(const bias_pt *b)
{
    uint64_t hy, hs;
    pair_bits(b, &hy, &hs);
    uint64_t h = (hy ^ (hs * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 31);
}

/* Pairs per bucket of the bias monitor (for the largest cases more, up to
 * BIAS_MAX_BUCKETS buckets); the count depends on the shape alone. */
#define BIAS_BUCKET ((int64_t)1 << 15)
#define BIAS_MAX_LOG 12

/* Buckets (a power of two, 2^*lb) for up to mn pairs. */
static int64_t bias_buckets(int64_t mn, int *lb)
{
    *lb = 0;
    while ((BIAS_BUCKET << *lb) < mn && *lb < BIAS_MAX_LOG) (*lb)++;
    return (int64_t)1 << *lb;
}

static int64_t bucket_of(const bias_pt *b, int lb) { return lb ? (int64_t)(pair_hash(b) >> (64 - lb)) : 0; }

/* One block's pairs, bp (n), reordered by bucket (a counting sort, element
 * order kept within each) into sorted, with start (nb + 1) the offsets. */
static void bias_sort_block(const bias_pt *bp, int64_t n, int lb, bias_pt *sorted, int32_t *start)
{
    const int64_t nb = (int64_t)1 << lb;
    uint16_t *id = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
    QV_ASSERT(id, "out of memory in the bias monitor");
    memset(start, 0, sizeof(int32_t) * (size_t)(nb + 1));
    for (int64_t i = 0; i < n; i++) {
        id[i] = (uint16_t)bucket_of(&bp[i], lb);
        start[id[i] + 1]++;
    }
    for (int64_t b = 0; b < nb; b++) start[b + 1] += start[b];
    int32_t *at = malloc(sizeof(int32_t) * (size_t)nb);
    QV_ASSERT(at, "out of memory in the bias monitor");
    memcpy(at, start, sizeof(int32_t) * (size_t)nb);
    for (int64_t i = 0; i < n; i++) sorted[at[id[i]]++] = bp[i];
    free(at);
    free(id);
}

typedef struct bias_ctx {
    int64_t nblk, nb;
    bias_pt *const *bp;      /* (nblk) each block's pairs, by bucket */
    int32_t *const *bstart;  /* (nblk) each block's bucket offsets (nb + 1) */
    double *s1, *s2;         /* (nb) per bucket */
    int64_t *distinct;       /* (nb) */
} bias_ctx;

/* Keeps the first of equal pairs of bucket b (its part of every block, in
 * block order: element order) through an open-addressing table, and sums
 * their s and s^2 in that order. */
static void bias_bucket(void *ctx, int64_t b)
{
    bias_ctx *bc = ctx;
    int64_t total = 0;
    for (int64_t k = 0; k < bc->nblk; k++)
        if (bc->bstart[k]) total += bc->bstart[k][b + 1] - bc->bstart[k][b];
    double s1 = 0, s2 = 0;
    int64_t distinct = 0;
    if (total > 0) {
        int64_t ts = 16;
        while (ts < 2 * total) ts *= 2;
        const bias_pt **table = malloc(sizeof(bias_pt *) * (size_t)ts);
        QV_ASSERT(table, "out of memory in the bias monitor");
        for (int64_t t = 0; t < ts; t++) table[t] = NULL;
        for (int64_t k = 0; k < bc->nblk; k++) {
            if (!bc->bstart[k]) continue;
            const bias_pt *sc = bc->bp[k];
            for (int32_t i = bc->bstart[k][b]; i < bc->bstart[k][b + 1]; i++) {
                uint64_t yi, si;
                pair_bits(&sc[i], &yi, &si);
                int64_t slot = (int64_t)(pair_hash(&sc[i]) & (uint64_t)(ts - 1));
                int seen = 0;
                while (table[slot]) {
                    uint64_t yj, sj;
                    pair_bits(table[slot], &yj, &sj);
                    if (yj == yi && sj == si) {
                        seen = 1;
                        break;
                    }
                    slot = (slot + 1) & (ts - 1);
                }
                if (seen) continue;
                table[slot] = &sc[i];
                s1 += sc[i].s;
                s2 += sc[i].s * sc[i].s;
                distinct++;
            }
        }
        free(table);
    }
    bc->s1[b] = s1;
    bc->s2[b] = s2;
    bc->distinct[b] = distinct;
}

/* z = sum s / sqrt(sum s^2) over the distinct (y, s) pairs: repeated rows or
 * columns (one-hot, witnesses, broadcast data) repeat one error, which is one
 * observation, not many. Each block of the verdict has sorted its pairs by a
 * hash of their bits into nb buckets (bias_sort_block); a bucket keeps the
 * first of equal pairs, and the buckets' sums are added in bucket order.
 * Blocks and buckets depend on the shape alone, so z depends on the pairs
 * alone, whatever `jobs`. Returns the number of distinct pairs. */
static int64_t bias_z(bias_ctx *bc, int jobs, double *z)
{
    bc->s1 = malloc(sizeof(double) * (size_t)bc->nb);
    bc->s2 = malloc(sizeof(double) * (size_t)bc->nb);
    bc->distinct = malloc(sizeof(int64_t) * (size_t)bc->nb);
    QV_ASSERT(bc->s1 && bc->s2 && bc->distinct, "out of memory in the bias monitor");
    ref_parallel_for(bc->nb, jobs, bias_bucket, bc);
    double s1 = 0, s2 = 0;
    int64_t distinct = 0;
    for (int64_t b = 0; b < bc->nb; b++) {
        s1 += bc->s1[b];
        s2 += bc->s2[b];
        distinct += bc->distinct[b];
    }
    free(bc->s1);
    free(bc->s2);
    free(bc->distinct);
    *z = s2 > 0 ? s1 / sqrt(s2) : 0.0;
    return distinct;
}

static void result_init(qv_result *res, int64_t mn)
{
    memset(res, 0, sizeof *res);
    res->n_elements = mn;
    res->worst_m = res->worst_n = -1;
}

/* Elements per block of the verdict: the unit of its threads and of its
 * partial sums, fixed so the statistics' bits never depend on the thread count. */
#define VERIFY_BLOCK 16384

/* What one block of elements contributes: its counts, partial sums and
 * extremes (indices are flat element indices; -1 for none), and its values
 * in buffers of its own (freed as they are used): rs and ulps hold only the
 * nonzero ones (zeros are counted), bp the bias pairs sorted by bucket with
 * bstart their offsets (NULL with no pair). */
typedef struct vblock {
    int64_t nr, nrs, nul; /* graded values; of them nonzero r, nonzero ulps */
    int64_t nbias, nbad, n_normal, n_unwritten, n_nan, n_inf, n_fail;
    double sum_e2, sum_y2, sum_exp, max_abs_err, worst_r, worst_bad;
    int64_t first_bad, worst_e, worst_bad_e;
    const char *first_kind;
    double *rs, *ulps;
    bias_pt *bp;
    int32_t *bstart;
} vblock;

typedef struct vctx {
    const qv_problem *p;
    const ref_truth *t;
    const void *out;
    qv_fmt of;
    int sat;
    uint32_t poison;
    double min_normal;
    int64_t mn;
    int lb;          /* the bias monitor's 2^lb buckets */
    vblock *blocks;
    int fast_ulp;       /* out_ulp reads the exponent field (a float output format) */
    int ulp_lo, ulp_hi; /* the exponents of qv_ulp(of, 0) and qv_ulp(of, Inf) */
    int man_bits;
} vctx;

/* qv_ulp(of, x), from the exponent field: the spacing of x's binade, clamped
 * to the format's subnormal spacing and to its largest binade's. */
static inline double out_ulp(const vctx *vc, double x)
{
    if (!vc->fast_ulp) return qv_ulp(vc->of, x); /* integer outputs: 1 */
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int ef = (int)((b >> 52) & 0x7FF);
    if (ef == 0x7FF && (b << 12)) return NAN;
    int e = ef == 0x7FF ? vc->ulp_hi : ef == 0 ? vc->ulp_lo : ef - 1023 - vc->man_bits;
    e = e < vc->ulp_lo ? vc->ulp_lo : e > vc->ulp_hi ? vc->ulp_hi : e;
    uint64_t u = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static void verify_block(void *ctx, int64_t blk)
{
    vctx *vc = ctx;
    const ref_truth *t = vc->t;
    const void *out = vc->out;
    const qv_fmt of = vc->of;
    const int sat = vc->sat;
    const uint32_t poison = vc->poison;
    const double min_normal = vc->min_normal;
    const int64_t mn = vc->mn;
    const int64_t e0 = blk * VERIFY_BLOCK;
    int64_t e1 = e0 + VERIFY_BLOCK < mn ? e0 + VERIFY_BLOCK : mn;
    vblock *res = &vc->blocks[blk];
    memset(res, 0, sizeof *res);
    /* malloc'd pages are touched only where a value is written */
    double *rs = malloc(sizeof(double) * (size_t)VERIFY_BLOCK);
    double *ulps = malloc(sizeof(double) * (size_t)VERIFY_BLOCK);
    bias_pt *bp = malloc(sizeof(bias_pt) * (size_t)VERIFY_BLOCK);
    QV_ASSERT(rs && ulps && bp, "out of memory in ref_verify");
    int64_t nr = 0, nrs = 0, nul = 0, nbad = 0, nbias = 0, n_normal = 0;
    double sum_e2 = 0, sum_y2 = 0, sum_exp = 0;
    double worst_r = -1.0, worst_bad = -1.0;
    int64_t first_bad = -1, worst_e = -1, worst_bad_e = -1;
    const char *first_kind = NULL;
#ifdef QV_MUTANT_orc_verdict_last_element_skipped
    /* Oracle mutant: the loop stops one element short (the last is never graded). */
    if (e1 == mn) e1 = mn - 1;
#endif
    for (int64_t e = e0; e < e1; e++) {
        uint32_t c = out_code(of, out, e);
        double y = t->y[e], E = t->bound[e];
        const char *bad = NULL;
        double r = 0.0;
#ifdef QV_MUTANT_orc_verdict_poison_unnamed
        /* Oracle mutant: the poison code not looked for (it is a NaN, graded as one). */
        if (c == poison && 0) {
#else
        if (c == poison) {
#endif
            res->n_unwritten++;
            bad = "never written (poison)";
            r = INFINITY;
        } else {
            double o = out_value(of, c);
            if (!isfinite(y)) {
                /* The model has a NaN or Inf here: the output must be the same one. */
#ifdef QV_MUTANT_orc_verdict_model_nonfinite_any
                /* Oracle mutant: any NaN or Inf accepted for the model's NaN or Inf. */
                int same = !isfinite(o);
#else
                int same = isnan(y) ? isnan(o) : (o == y);
#endif
                if (!same) {
                    bad = "differs from the model's NaN/Inf";
                    if (isnan(o)) res->n_nan++;
                    if (isinf(o)) res->n_inf++;
                    r = INFINITY;
                }
            } else if (isnan(o)) {
                res->n_nan++;
#ifdef QV_MUTANT_orc_verdict_nan_passes
                /* Oracle mutant: a NaN where the model is finite counted, not failed. */
                r = 0.0;
#else
                bad = "NaN where the model is finite";
                r = INFINITY;
#endif
            } else {
                /* Strictly inside [y - E, y + E] (fl(o - y) below E by more than
                 * its rounding) is inside the rounded window, RN being monotone:
                 * the window is formed only for the other outputs. */
                int inside = E > 0x1p-900 && fabs(o - y) < E * (1.0 - 0x1p-40);
                if (!inside) {
#ifdef QV_MUTANT_orc_window_unrounded
                    /* Oracle mutant: [y - E, y + E] without the output rounding. */
                    double lo = y - E, hi = y + E;
#elif defined QV_MUTANT_orc_window_directed
                    /* Oracle mutant: the directed roundings RD(y - E), RU(y + E). */
                    double lo = ref_round_to(of, y - E, sat), hi = ref_round_to(of, y + E, sat);
                    if (lo > y - E) lo -= qv_ulp(of, lo);
                    if (hi < y + E) hi += qv_ulp(of, hi);
#elif defined QV_MUTANT_orc_window_half_ulp
                    /* Oracle mutant: half an output ulp added to E, then rounded as well. */
                    double hu = 0.5 * qv_ulp(of, fabs(y) + E);
                    double lo = ref_round_to(of, y - E - hu, sat), hi = ref_round_to(of, y + E + hu, sat);
#else
                    /* o = y_rn, the correctly rounded value, is in the window:
                     * every E holds 2^-50 |y| >= |exact - y|, so fl(y - E) <=
                     * exact <= fl(y + E), and RN is monotone */
                    double lo = o, hi = o;
                    if (o != t->y_rn[e]) {
                        lo = ref_round_to(of, y - E, sat);
                        hi = ref_round_to(of, y + E, sat);
                    }
#endif
#ifdef QV_MUTANT_orc_verdict_inf_unchecked
                    /* Oracle mutant: an Inf output is taken for an overflow inside the
                     * bound without the range test. */
                    if (!isinf(o) && (o < lo || o > hi)) {
#else
                    if (o < lo || o > hi) {
#endif
                        bad = isinf(o) ? "Inf outside the bound" : "outside the rounded bound";
                        if (isinf(o)) res->n_inf++;
                        else res->n_fail++;
                    }
                }
                double half = 0.5 * out_ulp(vc, fabs(y) + E);
                if (isfinite(o)) {
                    double err = o - y, ae = fabs(err);
                    double excess = ae > half ? ae - half : 0.0;
                    r = E > 0 ? excess / E : (excess > 0 ? INFINITY : 0.0);
                    if (r != 0.0) rs[nrs++] = r;
                    /* o == y_rn: the same code, or +-0 (both order as 0) */
                    if (o != t->y_rn[e] && isfinite(t->y_rn[e])) {
                        double ul = (double)llabs(ordered(of, c) - ordered(of, encode_out(of, t->y_rn[e], sat)));
                        if (ul != 0.0) ulps[nul++] = ul;
                    }
                    nr++;
                    if (ae > res->max_abs_err) res->max_abs_err = ae;
                    n_normal += fabs(y) >= min_normal;
                    sum_e2 += err * err;
                    sum_y2 += y * y;
                    double u = out_ulp(vc, y);
                    sum_exp += u * u / 12.0 + (E / 3.0) * (E / 3.0);
                    if (err != 0.0) {
                        bp[nbias].y = y;
                        bp[nbias].s = err / (E + half);
                        nbias++;
                    }
                } else {
                    /* An Inf inside the rounded interval: y + E reaches the
                     * overflow threshold. Correct, and outside the statistics. */
                    r = bad ? INFINITY : 0.0;
                }
            }
        }
        if (bad) {
            nbad++;
            if (first_bad < 0) {
                first_bad = e;
                first_kind = bad;
            }
            if (r > worst_bad || worst_bad_e < 0) {
                worst_bad = r;
                worst_bad_e = e;
            }
        }
        if (r > worst_r) {
            worst_r = r;
            worst_e = e;
        }
    }
    res->nr = nr;
    res->nrs = nrs;
    res->nul = nul;
    res->nbias = nbias;
    res->rs = rs;
    res->ulps = ulps;
    if (nbias) {
        res->bp = malloc(sizeof(bias_pt) * (size_t)nbias);
        res->bstart = malloc(sizeof(int32_t) * (size_t)((1 << vc->lb) + 1));
        QV_ASSERT(res->bp && res->bstart, "out of memory in ref_verify");
        bias_sort_block(bp, nbias, vc->lb, res->bp, res->bstart);
    }
    free(bp);
    res->nbad = nbad;
    res->n_normal = n_normal;
    res->sum_e2 = sum_e2;
    res->sum_y2 = sum_y2;
    res->sum_exp = sum_exp;
    res->worst_r = worst_r;
    res->worst_bad = worst_bad;
    res->first_bad = first_bad;
    res->worst_e = worst_e;
    res->worst_bad_e = worst_bad_e;
    res->first_kind = first_kind;
}

void ref_verify_ex(const qv_problem *p, const ref_truth *t, const void *out, const ref_verify_opts *opts,
                   qv_result *out_res)
{
    const qv_variant *v = p->v;
    qv_fmt of = v->ofmt;
    int64_t m = p->m, n = p->n, mn = m * n;
    qv_result *res = out_res;
    result_init(res, mn);
    res->ref_path = t->path;
    res->ref_why = t->why;
    /* Smallest normal magnitude of the output format: 2^(1 - bias). */
    const qv_fmt_info *fi = qv_fmt_get(of);
    int64_t nblk = (mn + VERIFY_BLOCK - 1) / VERIFY_BLOCK;
    vctx vc = {
        .p = p, .t = t, .out = out, .of = of, .sat = v->arith.out_sat == QV_SAT_FINITE,
        .poison = ref_poison_code(of),
        .min_normal = fi->is_float ? ldexp(1.0, 1 - fi->bias) : 0.0, /* integers: every value counts */
        .mn = mn,
        .blocks = malloc(sizeof(vblock) * (size_t)(nblk > 0 ? nblk : 1)),
    };
    QV_ASSERT(vc.blocks, "out of memory in ref_verify");
    if (fi->is_float) {
        /* both ends are normal doubles for every output format (2^-149 at least) */
        vc.ulp_lo = ilogb(qv_ulp(of, 0.0));
        vc.ulp_hi = ilogb(qv_ulp(of, INFINITY));
        vc.man_bits = fi->man_bits;
        vc.fast_ulp = vc.ulp_lo >= -1022 && vc.ulp_hi <= 1023;
    }
    const int jobs = opts ? opts->jobs : 1;
    bias_ctx bc = {.nblk = nblk, .nb = bias_buckets(mn, &vc.lb)};
    ref_parallel_for(nblk, jobs, verify_block, &vc);
    /* the blocks in order: the first and the worst elements are those a
     * single pass finds */
    int64_t tot_rs = 0, tot_ul = 0;
    for (int64_t b = 0; b < nblk; b++) {
        tot_rs += vc.blocks[b].nrs;
        tot_ul += vc.blocks[b].nul;
    }
    double *rs = malloc(sizeof(double) * (size_t)(tot_rs > 0 ? tot_rs : 1));
    double *ulps = malloc(sizeof(double) * (size_t)(tot_ul > 0 ? tot_ul : 1));
    bias_pt **bps = malloc(sizeof(bias_pt *) * (size_t)(nblk > 0 ? nblk : 1));
    int32_t **bst = malloc(sizeof(int32_t *) * (size_t)(nblk > 0 ? nblk : 1));
    QV_ASSERT(rs && ulps && bps && bst, "out of memory in ref_verify");
    int64_t nr = 0, nrs = 0, nul = 0, nbad = 0, nbias = 0, n_normal = 0;
    double sum_e2 = 0, sum_y2 = 0, sum_exp = 0;
    double worst_r = -1.0, worst_bad = -1.0;
    int64_t first_bad = -1, worst_e = -1, worst_bad_e = -1;
    const char *first_kind = NULL;
    for (int64_t b = 0; b < nblk; b++) {
        vblock *bk = &vc.blocks[b];
        memcpy(rs + nrs, bk->rs, sizeof(double) * (size_t)bk->nrs);
        memcpy(ulps + nul, bk->ulps, sizeof(double) * (size_t)bk->nul);
        free(bk->rs);
        free(bk->ulps);
        bps[b] = bk->bp;
        bst[b] = bk->bstart;
        nr += bk->nr;
        nrs += bk->nrs;
        nul += bk->nul;
        nbias += bk->nbias;
        nbad += bk->nbad;
        n_normal += bk->n_normal;
        res->n_unwritten += bk->n_unwritten;
        res->n_nan += bk->n_nan;
        res->n_inf += bk->n_inf;
        res->n_fail += bk->n_fail;
        if (bk->max_abs_err > res->max_abs_err) res->max_abs_err = bk->max_abs_err;
        sum_e2 += bk->sum_e2;
        sum_y2 += bk->sum_y2;
        sum_exp += bk->sum_exp;
        if (first_bad < 0 && bk->first_bad >= 0) {
            first_bad = bk->first_bad;
            first_kind = bk->first_kind;
        }
        if (bk->worst_bad_e >= 0 && (bk->worst_bad > worst_bad || worst_bad_e < 0)) {
            worst_bad = bk->worst_bad;
            worst_bad_e = bk->worst_bad_e;
        }
        if (bk->worst_e >= 0 && bk->worst_r > worst_r) {
            worst_r = bk->worst_r;
            worst_e = bk->worst_e;
        }
    }
    free(vc.blocks);
    int64_t we = nbad ? worst_bad_e : worst_e;
    if (we >= 0) {
        res->worst_m = we / n;
        res->worst_n = we % n;
        res->worst_out = out_value(of, out_code(of, out, we));
        res->worst_y = t->y[we];
        res->worst_bound = t->bound[we];
    }
    res->max_err_over_bound = worst_r < 0 ? 0.0 : worst_r;
    double maxu = 0;
    for (int64_t i = 0; i < nul; i++)
        if (ulps[i] > maxu) maxu = ulps[i];
    res->max_ulp = maxu;
    res->p99_err_over_bound = p99_of(rs, nrs, nr);
    res->p99_ulp = p99_of(ulps, nul, nr);
    res->nmse = sum_y2 > 0 ? sum_e2 / sum_y2 : (sum_e2 > 0 ? INFINITY : 0.0);
    res->norm_rel = sqrt(res->nmse);
    free(rs);
    free(ulps);
    bc.bp = bps;
    bc.bstart = bst;
    nbias = nbias ? bias_z(&bc, jobs, &res->bias_z) : 0;
    for (int64_t b = 0; b < nblk; b++) {
        free(bps[b]);
        free(bst[b]);
    }
    free(bps);
    free(bst);

    if (nbad) {
        res->grade = QV_FAIL;
        snprintf(res->reason, sizeof res->reason,
                 "%lld of %lld elements fail; first at (%lld, %lld): %s; worst at (%lld, %lld): out=%.9g y=%.9g E=%.3g",
                 (long long)nbad, (long long)mn, (long long)(first_bad / n), (long long)(first_bad % n),
                 first_kind, (long long)res->worst_m, (long long)res->worst_n, res->worst_out, res->worst_y,
                 res->worst_bound);
        return;
    }
    if (sum_y2 == 0.0) {
        int strict = opts && opts->require_nonvacuous;
        res->grade = strict ? QV_FAIL : QV_PASS;
        snprintf(res->reason, sizeof res->reason, "vacuous comparison: zero reference norm%s",
                 strict ? "" : " (graded on its elements only)");
        return;
    }
    res->grade = QV_PASS;
    if (n_normal * 10 < nr)
        /* Few normal values: the verdict holds, but the monitors see mostly
         * subnormal spacing, so say so (STYLE rule 7). */
        snprintf(res->reason, sizeof res->reason, "note: only %lld of %lld reference values are normal in %s",
                 (long long)n_normal, (long long)nr, fi->name);
#ifdef QV_MUTANT_orc_monitor_p99_off
    /* Oracle mutant: the p99 monitor never fires. */
    if (0) {
#else
    if (res->p99_err_over_bound > P99_MARGINAL) {
#endif
        res->grade = QV_MARGINAL;
        snprintf(res->reason, sizeof res->reason,
                 "p99 of the error beyond output rounding is %.3g of E (> %.2g)", res->p99_err_over_bound,
                 P99_MARGINAL);
#ifdef QV_MUTANT_orc_monitor_bias_one_sided
    /* Oracle mutant: only a positive bias is flagged (z, not |z|). */
    } else if (nbias >= BIAS_MIN_COUNT && res->bias_z > BIAS_Z_MARGINAL) {
#else
    } else if (nbias >= BIAS_MIN_COUNT && fabs(res->bias_z) > BIAS_Z_MARGINAL) {
#endif
        res->grade = QV_MARGINAL;
        snprintf(res->reason, sizeof res->reason, "signed bias: z = %.3g over %lld distinct nonzero errors (|z| > %.0f)",
                 res->bias_z, (long long)nbias, BIAS_Z_MARGINAL);
    } else if (res->nmse > NMSE_FACTOR * sum_exp / sum_y2) {
        res->grade = QV_MARGINAL;
        snprintf(res->reason, sizeof res->reason, "NMSE %.3g is above %.0fx its expectation %.3g",
                 res->nmse, NMSE_FACTOR, sum_exp / sum_y2);
    }
}

void ref_verify(const qv_problem *p, const ref_truth *t, const void *out, qv_result *res)
{
    ref_verify_ex(p, t, out, NULL, res);
}

void ref_verify_bitexact(const qv_problem *p, const void *expected, const void *out, qv_result *res)
{
    qv_fmt of = p->v->ofmt;
    int64_t m = p->m, n = p->n, mn = m * n;
    result_init(res, mn);
    res->ref_path = "model";
    res->ref_why = "probe with a unique correct output under the declared arithmetic: bit-exact comparison";
    uint32_t poison = ref_poison_code(of);
    int64_t first = -1, nbad = 0;
    double sum_e2 = 0, sum_y2 = 0;
    for (int64_t e = 0; e < mn; e++) {
        uint32_t c = out_code(of, out, e), x = out_code(of, expected, e);
        double o = out_value(of, c), y = out_value(of, x);
#ifdef QV_MUTANT_orc_bitexact_values_compared
        /* Oracle mutant: values compared instead of codes (-0 matches +0). */
        int same = (o == y) || (isnan(o) && isnan(y) && c != poison);
#else
        int same = (c == x) || (isnan(o) && isnan(y) && c != poison);
#endif
        if (c == poison && x != poison) res->n_unwritten++;
        if (!same) {
            nbad++;
            if (isnan(o) && c != poison) res->n_nan++;
            else if (isinf(o)) res->n_inf++;
            else if (c != poison) res->n_fail++;
            if (first < 0) first = e;
            double u = (isfinite(o) && isfinite(y)) ? (double)llabs(ordered(of, c) - ordered(of, x)) : INFINITY;
            if (u > res->max_ulp) res->max_ulp = u;
        }
        if (isfinite(o) && isfinite(y)) {
            double d = fabs(o - y);
            if (d > res->max_abs_err) res->max_abs_err = d;
            sum_e2 += d * d;
            sum_y2 += y * y;
        }
    }
    res->nmse = sum_y2 > 0 ? sum_e2 / sum_y2 : (sum_e2 > 0 ? INFINITY : 0.0);
    res->norm_rel = sqrt(res->nmse);
    res->p99_ulp = res->max_ulp;
    if (first >= 0) {
        res->grade = QV_FAIL;
        res->worst_m = first / n;
        res->worst_n = first % n;
        res->worst_out = out_value(of, out_code(of, out, first));
        res->worst_y = out_value(of, out_code(of, expected, first));
        res->max_err_over_bound = INFINITY;
        res->p99_err_over_bound = nbad * 100 > mn ? INFINITY : 0.0;
        snprintf(res->reason, sizeof res->reason,
                 "%lld of %lld elements differ from the unique correct output; first at (%lld, %lld): out=%.9g expected=%.9g",
                 (long long)nbad, (long long)mn, (long long)res->worst_m, (long long)res->worst_n, res->worst_out,
                 res->worst_y);
    } else {
        res->grade = QV_PASS;
        if (sum_y2 == 0.0)
            snprintf(res->reason, sizeof res->reason, "vacuous comparison: zero reference norm");
    }
}
