/* moe.c: the truth, verdict and CPU model of a routed GEMM (moe.h, docs/moe.md).
 *
 * Routing. Every route ranks experts by a strictly increasing function of the
 * logit (softmax, sigmoid, or the logit itself for topk-softmax), so the exact
 * ranking is the logits' order, exact ties being equal logits. The kernel
 * ranks by its fp32 key instead: for softmax and sigmoid a value within a
 * certified relative error beta (and an absolute one for exponentials that
 * underflow) of the exact score; for topk-softmax the logit itself. Expert j
 * *surely outranks* i when j's lowest possible key exceeds i's highest (or,
 * with tie=low, when their logits are equal and j < i). A selection S of k
 * experts is admissible when no expert outside S surely outranks one inside.
 *
 * Group-limited routes (groups=) rank by the selection key: the score, plus
 * the expert's bias (sbias=f32) with one more fp32 rounding, so exact ties
 * are equal (logit, bias) pairs. A group's kernel score (the fp32 sum of its
 * two largest keys, or the largest) lies in an interval built from its
 * experts' key intervals; group g surely outranks h as experts do, equal
 * groups being those whose scoring experts tie. A set of gtopk kept groups is
 * admissible when no group outside surely outranks one inside, and S is
 * admissible when it is, in some admissible set, with the other groups'
 * experts out (gmask=ninf) or scoring exactly 0 (gmask=zero).
 *
 * Weights. The exact weights of a selection come from MPFR (160 bits, then
 * rounded to double). The kernel's fp32 weights are within weight_rel * w +
 * weight_abs of them, from the declared fp32 arithmetic:
 *   exp:      e^ = exp(d)(1 + th), |th| <= rho(d) = (1 + x) exp(2u|d|) - 1, with x
 *             the declared exp ulps times 2^-23 and 2u|d| the argument's two
 *             roundings (l - max, and a scaling by log2(e) if the kernel uses exp2);
 *   softmax:  the sum of n such terms in any order (gamma_{n-1}) and a division
 *             or a reciprocal and a multiply (two roundings);
 *   sigmoid:  1 / (1 + e^) with e^ = exp(-l): two roundings and rho scaled by
 *             e^/(1 + e^);
 *   renorm:   a sum of k weights (gamma_{k-1}) and two roundings; with eps one
 *             more rounding (the sum plus eps), the exact weight s_c / (sum + eps);
 *   rsf:      one rounding.
 * Exponentials below 2^-110 and sigmoids of logits below -87 leave the relative
 * model (they underflow in fp32); their absolute error is below 2^-100, which
 * weight_abs covers.
 *
 * Output. Each term of token t is an interval: center w*y (y the expert's
 * truth), radius w*E + (weight radius)*(|y| + E) plus the declared roundings
 * (rw, sum), each at most half an ulp of its format at the term's magnitude
 * bound. The center is summed in double-double and rounded once; the bound
 * arithmetic is inflated by 2^-40 relative for its own double roundings. */
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/moe.h"
#include "ref_operands.h"

#define ROUTE_PREC 160
/* Combinations tried for one token whose selection is ambiguous. */
#define MAX_SELECTIONS 4096
/* Absolute error of an fp32 key or weight whose exponential underflows. */
#define WEIGHT_ABS 0x1p-100

static const double U32 = 0x1p-24;

/* ---- per token: logits, keys and their intervals ------------------------------------- */

/* The next need-element combination of 0..n-1 after idx (increasing
 * indices): 0 when idx was the last. */
static int next_combination(int *idx, int need, int n)
{
    int i = need - 1;
    while (i >= 0 && idx[i] == n - need + i) i--;
    if (i < 0) return 0;
    idx[i]++;
    for (int j = i + 1; j < need; j++) idx[j] = idx[j - 1] + 1;
    return 1;
}

/* Admissible group sets kept for one token (near-tied groups), and the
 * combinations of candidate groups tried to find them. */
#define MAX_GSETS 256

typedef struct token_route {
    int e;
    double lmax;     /* the largest logit */
    int n_finite;    /* logits above -Inf */
    int sig_bias;    /* the key is sigma(l) + b (sbias=f32) */
    double *l;       /* (e) logits */
    double *b;       /* (e) selection bias (0 without one) */
    double *key;     /* (e) the exact selection key to double: exp(l - lmax) (softmax), sigma(l)
                        (+ b), or l (topk-softmax); within [lo, hi] */
    double *lo, *hi; /* (e) the kernel's key lies in [lo, hi] */
    int *rank;       /* (e) experts by exact key, descending; equal keys by index */
    /* group-limited selection (ng = 0: none) */
    int ng, per, gk;
    int *top1, *top2;   /* (ng) a group's two best experts in rank order */
    double *glo, *ghi;  /* (ng) the kernel's group score lies in [glo, ghi] */
    double *gkey;       /* (ng) the exact group score to double */
    int *grank;         /* (ng) groups by gkey, descending, then index */
    int *gtmp, *gcand, *gidx; /* (ng) scratch */
    int n_sets;         /* admissible group sets, the canonical one first */
    unsigned char *sets; /* (MAX_GSETS, ng): 1 where the set keeps the group */
    int sets_overflow;  /* more than MAX_GSETS sets, or MAX_SELECTIONS tries */
} token_route;

static double logit_of(const qv_moe_problem *p, int64_t t, int j)
{
    int64_t x = t * p->e + j;
    if (p->s->logit_fmt == QV_FMT_F32) return ((const float *)p->logits)[x];
    return qv_decode(p->s->logit_fmt, ((const uint16_t *)p->logits)[x]);
}

static double gamma_n(int64_t n) { return n <= 0 ? 0.0 : (double)n * U32 / (1.0 - (double)n * U32); }

/* rho(d) of the header, rounded up. */
static double rho_exp(const qv_moe_spec *s, double d)
{
    double x = s->exp_ulps * 0x1p-23;
    double r = expm1(2.0 * U32 * fabs(d)) * (1.0 + x) + x;
    return r * (1.0 + 0x1p-40) + 0x1p-60;
}

/* The relative error bound of a kernel's fp32 sigmoid 1 / (1 + exp(-l)): the
 * exponential's (rho_exp, weighed by its share q = e / (1 + e) of the
 * denominator), the addition's and the division's roundings. */
static double sigmoid_rel(const qv_moe_spec *s, double l)
{
    double en = exp(-l), q = en / (1.0 + en);
    return (1.0 + U32) * (1.0 + U32) / ((1.0 - rho_exp(s, l) * q) * (1.0 - U32)) - 1.0;
}

static int is_softmax(qv_route r) { return r == QV_ROUTE_SOFTMAX_TOPK || r == QV_ROUTE_SOFTMAX_TOPK_RENORM; }
static int is_sigmoid(qv_route r) { return r == QV_ROUTE_SIGMOID_TOPK || r == QV_ROUTE_SIGMOID_TOPK_RENORM; }
static int is_renorm(qv_route r)
{
    return r == QV_ROUTE_SOFTMAX_TOPK_RENORM || r == QV_ROUTE_SIGMOID_TOPK_RENORM;
}

/* rho over the terms of a softmax whose largest logit is lmax: terms whose
 * exact exponential is below 2^-110 are counted absolutely (n * 2^-120 against
 * a sum of at least 1/2). */
static double rho_softmax(const qv_moe_spec *s, const double *l, const int *idx, int n, double lmax)
{
    double r = 0;
    for (int i = 0; i < n; i++) {
        double d = l[idx ? idx[i] : i] - lmax;
        if (d >= -76.0) { /* exp(-76) > 2^-110 */
            double ri = rho_exp(s, d);
            if (ri > r) r = ri;
        }
    }
    return r + n * 0x1p-120;
}

/* Equal exact keys. Every key is a strictly increasing function of the
 * logit plus the expert's bias, so equal (logit, bias) pairs tie. Other
 * pairs may tie only by a coincidence of transcendental values; such a pair
 * is left to the intervals, which then overlap and let either be taken. */
static int same_key(const token_route *r, int i, int j) { return r->l[i] == r->l[j] && r->b[i] == r->b[j]; }

/* Whether expert j's exact key is 0, the key gmask=zero gives the experts of
 * the groups not kept: sigma(-inf) + 0, sigma(0) - 1/2, or a softmax of -inf. */
static int key_is_zero(const token_route *r, int j)
{
    if (r->l[j] == -INFINITY) return r->b[j] == 0.0;
    return r->sig_bias && r->l[j] == 0.0 && r->b[j] == -0.5;
}

static int rank_cmp(const token_route *r, int a, int b)
{
    /* without a bias the logits order the keys exactly */
    const double *o = r->sig_bias ? r->key : r->l;
    if (same_key(r, a, b)) return a < b ? -1 : a > b;
    if (o[a] > o[b]) return -1;
    if (o[a] < o[b]) return 1;
    return a < b ? -1 : a > b;
}

/* Sorts rank[0..e) by (key desc, index asc): a merge sort. */
static void sort_rank(const token_route *r, int *rank, int *tmp, int e)
{
    for (int w = 1; w < e; w *= 2)
        for (int lo = 0; lo < e; lo += 2 * w) {
            int mid = lo + w < e ? lo + w : e, hi = lo + 2 * w < e ? lo + 2 * w : e;
            int i = lo, j = mid, o = lo;
            while (i < mid && j < hi) tmp[o++] = rank_cmp(r, rank[i], rank[j]) <= 0 ? rank[i++] : rank[j++];
            while (i < mid) tmp[o++] = rank[i++];
            while (j < hi) tmp[o++] = rank[j++];
            memcpy(rank + lo, tmp + lo, sizeof(int) * (size_t)(hi - lo));
        }
}

/* ---- groups ---------------------------------------------------------------------------- */

/* Equal exact group scores: the same key classes in its scoring experts. */
static int same_group(const qv_moe_spec *s, const token_route *r, int g, int h)
{
#ifdef QV_MUTANT_orc_route_group_ties_unseen
    (void)s, (void)r, (void)g, (void)h; /* oracle mutant: no exact group tie */
    return 0;
#endif
    if (!same_key(r, r->top1[g], r->top1[h])) return 0;
    return s->gscore == QV_GSCORE_MAX || same_key(r, r->top2[g], r->top2[h]);
}

/* 1 when group g surely outranks group h. */
static int g_outranks(const qv_moe_spec *s, const token_route *r, int g, int h)
{
    if (same_group(s, r, g, h)) return s->tie == QV_TIE_LOW && g < h;
    return r->glo[g] > r->ghi[h];
}

/* Whether the kept groups `set` are admissible: no group outside surely
 * outranks one inside. */
static int gset_admissible(const qv_moe_spec *s, const token_route *r, const unsigned char *set)
{
    for (int g = 0; g < r->ng; g++)
        if (set[g])
            for (int h = 0; h < r->ng; h++)
                if (!set[h] && g_outranks(s, r, h, g)) return 0;
    return 1;
}

/* The group scores' intervals and ranking, and every admissible set of kept
 * groups (the canonical one, the gk best by exact score, first). The
 * kernel's group score is its fp32 sum of its two largest keys (one
 * rounding), or its largest key; the two largest of keys each in [lo, hi]
 * sum to within [two largest lo, two largest hi]. */
static void route_groups(const qv_moe_spec *s, token_route *r)
{
    int ng = r->ng, per = r->per, gk = r->gk;
    for (int g = 0; g < ng; g++) r->top1[g] = r->top2[g] = -1;
    for (int a = 0; a < r->e; a++) {
        int i = r->rank[a], g = i / per;
        if (r->top1[g] < 0) r->top1[g] = i;
        else if (r->top2[g] < 0) r->top2[g] = i;
    }
    for (int g = 0; g < ng; g++) {
        double l1 = -INFINITY, l2 = -INFINITY, h1 = -INFINITY, h2 = -INFINITY;
        for (int j = g * per; j < (g + 1) * per; j++) {
            if (r->lo[j] > l1) l2 = l1, l1 = r->lo[j];
            else if (r->lo[j] > l2) l2 = r->lo[j];
            if (r->hi[j] > h1) h2 = h1, h1 = r->hi[j];
            else if (r->hi[j] > h2) h2 = r->hi[j];
        }
        if (s->gscore == QV_GSCORE_MAX) {
            r->glo[g] = l1;
            r->ghi[g] = h1;
            r->gkey[g] = r->key[r->top1[g]];
        } else {
            /* the fp32 sum's rounding and the double sums' own */
            double sl = l1 + l2, sh = h1 + h2;
            r->glo[g] = sl - fabs(sl) * (U32 + 0x1p-50) - 0x1p-140;
            r->ghi[g] = sh + fabs(sh) * (U32 + 0x1p-50) + 0x1p-140;
            r->gkey[g] = r->key[r->top1[g]] + r->key[r->top2[g]];
        }
    }
    for (int g = 0; g < ng; g++) r->grank[g] = g;
    /* insertion sort: (gkey desc, equal groups by index) */
    for (int a = 1; a < ng; a++) {
        int g = r->grank[a], b = a - 1;
        while (b >= 0) {
            int h = r->grank[b];
            int before = same_group(s, r, g, h) ? g < h : r->gkey[g] > r->gkey[h] || (r->gkey[g] == r->gkey[h] && g < h);
            if (!before) break;
            r->grank[b + 1] = h;
            b--;
        }
        r->grank[b + 1] = g;
    }
    /* groups in every admissible set, candidates, and the rest */
    int *in = r->gtmp, n_in = 0, nc = 0;
    for (int a = 0; a < ng; a++) {
        int g = r->grank[a], above = 0, below = 0;
        in[g] = 0;
        for (int h = 0; h < ng; h++) {
            if (h == g) continue;
            above += g_outranks(s, r, h, g);
            below += g_outranks(s, r, g, h);
        }
        if (above >= gk) continue;
        if (ng - 1 - below < gk) in[g] = 1, n_in++;
        else r->gcand[nc++] = g;
    }
    unsigned char *c0 = r->sets;
    memset(c0, 0, (size_t)ng);
    for (int a = 0; a < gk; a++) c0[r->grank[a]] = 1;
    r->n_sets = 1;
    r->sets_overflow = 0;
    int need = gk - n_in;
    QV_ASSERT(need >= 0 && need <= nc, "a token's group split excludes its canonical groups");
    for (int i = 0; i < need; i++) r->gidx[i] = i;
    for (int tried = 0;; tried++) {
        if (tried >= MAX_SELECTIONS || r->n_sets >= MAX_GSETS) {
            r->sets_overflow = 1;
            break;
        }
        unsigned char *set = r->sets + (size_t)r->n_sets * (size_t)ng;
        for (int g = 0; g < ng; g++) set[g] = (unsigned char)in[g];
        for (int i = 0; i < need; i++) set[r->gcand[r->gidx[i]]] = 1;
        if (memcmp(set, c0, (size_t)ng) && gset_admissible(s, r, set)) r->n_sets++;
        if (!next_combination(r->gidx, need, nc)) break;
    }
}

/* Fills r for token t: logits, key intervals, exact ranking, and with groups
 * their scores and admissible sets. */
static void route_token(const qv_moe_problem *p, int64_t t, token_route *r, int *tmp)
{
    const qv_moe_spec *s = p->s;
    int e = p->e;
    double lmax = -INFINITY;
    int n_finite = 0;
    for (int j = 0; j < e; j++) {
        r->l[j] = logit_of(p, t, j);
        n_finite += r->l[j] != -INFINITY;
#ifdef QV_MUTANT_orc_route_bias_ignored
        r->b[j] = 0.0; /* oracle mutant: the selection bias left out of the ranking */
#else
        r->b[j] = s->sbias ? (double)p->score_bias[j] : 0.0;
#endif
        if (r->l[j] > lmax) lmax = r->l[j];
        r->rank[j] = j;
    }
    r->lmax = lmax;
    r->n_finite = n_finite;
    if (s->route == QV_ROUTE_TOPK_SOFTMAX) {
        for (int j = 0; j < e; j++) r->key[j] = r->lo[j] = r->hi[j] = r->l[j];
        sort_rank(r, r->rank, tmp, e);
        return;
    }
    double rho_a = is_softmax(s->route) ? rho_softmax(s, r->l, NULL, e, lmax) : 0.0;
    for (int j = 0; j < e; j++) {
        double l = r->l[j], key, beta;
        if (l == -INFINITY) {
            /* exp(-inf) and 1/(1+inf) are 0 in fp32 too, and 0 + b is b */
            r->key[j] = r->lo[j] = r->hi[j] = r->b[j];
            continue;
        }
        if (is_softmax(s->route)) {
            /* the kernel's e^_j / S^ (an exp, a sum, a division), against exp(l - lmax) / S */
            key = exp(l - lmax); /* the common 1/S does not change the order, nor a group's */
            double rj = l - lmax >= -76.0 ? rho_exp(s, l - lmax) : 0.0;
            beta = (1.0 + rj) * (1.0 + U32) * (1.0 + U32) / ((1.0 - rho_a) * (1.0 - gamma_n(e - 1))) - 1.0;
        } else {
            key = 1.0 / (1.0 + exp(-l));
            beta = sigmoid_rel(s, l);
        }
        beta = beta * (1.0 + 0x1p-40) + 0x1p-48; /* the double evaluation of key */
        /* the relative model holds above 2^-100; below, the key may be anything in [0, 2^-100] */
        double lo = key * (1.0 - beta), hi = key * (1.0 + beta);
        if (is_softmax(s->route)) {
            lo -= WEIGHT_ABS; /* softmax keys are relative to exp(0) = 1 here, like the weights */
            hi += WEIGHT_ABS;
        } else if (l < -87.0) {
            lo = 0.0;
            hi = hi > WEIGHT_ABS ? hi : WEIGHT_ABS;
        }
        lo = lo > 0 ? lo : 0.0;
        if (s->sbias) {
            /* RN_f32(score + b): one rounding of a value in [lo + b, hi + b], and the double sums' */
            double xl = lo + r->b[j], xh = hi + r->b[j];
            lo = xl - fabs(xl) * (U32 + 0x1p-50) - 0x1p-149;
            hi = xh + fabs(xh) * (U32 + 0x1p-50) + 0x1p-149;
            key += r->b[j];
        }
        r->key[j] = key;
        r->lo[j] = lo;
        r->hi[j] = hi;
    }
    sort_rank(r, r->rank, tmp, e);
    if (r->ng) route_groups(s, r);
}

/* ---- experts ------------------------------------------------------------------------- */

/* How the final top-k sees expert j under the kept groups `set` (NULL: no
 * groups): a candidate with its own key, a candidate with key 0
 * (gmask=zero), or not a candidate (gmask=ninf). */
enum { V_IN, V_ZERO, V_OUT };
static int view(const qv_moe_spec *s, const token_route *r, const unsigned char *set, int j)
{
    if (!set || set[j / r->per]) return V_IN;
#ifdef QV_MUTANT_orc_route_mask_zero_as_ninf
    (void)s; /* oracle mutant: gmask=zero read as ninf */
    return V_OUT;
#else
    return s->gmask == QV_GMASK_ZERO ? V_ZERO : V_OUT;
#endif
}

/* Equal exact keys of two candidates in the view `set`. */
static int tied_in(const qv_moe_spec *s, const token_route *r, const unsigned char *set, int j, int i)
{
    int vj = view(s, r, set, j), vi = view(s, r, set, i);
    if (vj == V_IN && vi == V_IN) return same_key(r, j, i);
    if (vj == V_ZERO && vi == V_ZERO) return 1;
    return vj == V_ZERO ? key_is_zero(r, i) : key_is_zero(r, j);
}

/* 1 when j surely outranks i in the view `set` (both candidates there). */
static int outranks_in(const qv_moe_spec *s, const token_route *r, const unsigned char *set, int j, int i)
{
    int vj = view(s, r, set, j), vi = view(s, r, set, i);
    if (tied_in(s, r, set, j, i)) return s->tie == QV_TIE_LOW && j < i;
    double lo_j = vj == V_IN ? r->lo[j] : 0.0, hi_i = vi == V_IN ? r->hi[i] : 0.0;
    return lo_j > hi_i;
}

/* 1 when sel (k distinct experts) is admissible in the view `set`; else 0
 * with a reason. */
static int admissible_in(const qv_moe_spec *s, const token_route *r, const unsigned char *set, const int32_t *sel,
                         int k, char *why, size_t len)
{
    int e = r->e;
    for (int c = 0; c < k; c++)
        if (view(s, r, set, sel[c]) == V_OUT) {
            if (why)
                snprintf(why, len, "took expert %d of group %d, which is not among the %d groups kept", (int)sel[c],
                         (int)sel[c] / r->per, r->gk);
            return 0;
        }
    unsigned char in_buf[256], *in = e <= 256 ? in_buf : calloc((size_t)e, 1);
    QV_ASSERT(in, "out of memory checking a routing");
    memset(in, 0, (size_t)e);
    for (int c = 0; c < k; c++) in[sel[c]] = 1;
    int ok = 1;
    for (int c = 0; c < k && ok; c++)
        for (int j = 0; j < e && ok; j++)
            if (!in[j] && view(s, r, set, j) != V_OUT && outranks_in(s, r, set, j, sel[c])) {
                ok = 0;
                if (!why) continue;
                if (view(s, r, set, j) == V_ZERO)
                    snprintf(why, len, "took expert %d (selection score %.9g) over expert %d, whose group is not kept "
                             "and which gmask=zero scores 0, %s", (int)sel[c], r->key[sel[c]], j,
                             tied_in(s, r, set, j, sel[c]) ? "a tie at a lower index (tie=low)" : "above it");
                else
                    snprintf(why, len, "took expert %d (logit %.9g) over expert %d (logit %.9g), which %s", (int)sel[c],
                             r->l[sel[c]], j, r->l[j],
                             tied_in(s, r, set, j, sel[c]) ? "ties it at a lower index (tie=low)"
                                                           : "ranks above it beyond the fp32 scores' error");
            }
    if (in != in_buf) free(in);
    return ok;
}

/* 1 when sel is admissible: in some admissible set of kept groups (or
 * without groups); else 0 with the reason in the canonical set. */
static int admissible(const qv_moe_spec *s, const token_route *r, const int32_t *sel, int k, char *why, size_t len)
{
    if (!r->ng) return admissible_in(s, r, NULL, sel, k, why, len);
    for (int q = 0; q < r->n_sets; q++)
        if (admissible_in(s, r, r->sets + (size_t)q * (size_t)r->ng, sel, k, NULL, 0)) return 1;
    admissible_in(s, r, r->sets, sel, k, why, len);
    return 0;
}

/* The exact ranking's selection in the view `set` (ties to the lower
 * index): admissible there, each key lying in its interval. */
static void canonical_in(const qv_moe_spec *s, const token_route *r, const unsigned char *set, int k, int32_t *sel)
{
    if (!set) {
        for (int c = 0; c < k; c++) sel[c] = r->rank[c];
        return;
    }
    /* the kept groups' experts by rank, merged with the key-0 ones by index */
    int c = 0, z = 0;
    for (int a = 0; a < r->e && c < k; a++) {
        int i = r->rank[a];
        if (view(s, r, set, i) != V_IN) continue;
        /* key-0 experts (gmask=zero) before i when 0 beats i's key, or ties it at a lower index */
        while (c < k && s->gmask == QV_GMASK_ZERO) {
            while (z < r->e && view(s, r, set, z) != V_ZERO) z++;
            if (z >= r->e) break;
            int first = key_is_zero(r, i) ? z < i : 0.0 > r->key[i];
            if (!first) break;
            sel[c++] = z++;
        }
        if (c < k) sel[c++] = i;
    }
    while (c < k) {
        while (z < r->e && view(s, r, set, z) != V_ZERO) z++;
        QV_ASSERT(z < r->e, "fewer than topk candidates in a token's kept groups");
        sel[c++] = z++;
    }
}

/* In the view `set`: the experts surely taken (f = 2) and the others some
 * admissible selection there takes (f = 1). */
static void split_in(const qv_moe_spec *s, const token_route *r, const unsigned char *set, int k, unsigned char *f)
{
    int e = r->e, d = 0;
    for (int j = 0; j < e; j++) d += view(s, r, set, j) != V_OUT;
    for (int i = 0; i < e; i++) {
        f[i] = 0;
        if (view(s, r, set, i) == V_OUT) continue;
        int above = 0, below = 0;
        for (int j = 0; j < e; j++) {
            if (j == i || view(s, r, set, j) == V_OUT) continue;
            above += outranks_in(s, r, set, j, i);
            below += outranks_in(s, r, set, i, j);
        }
        if (above >= k) continue;            /* surely out */
        f[i] = d - 1 - below < k ? 2 : 1;    /* 2: too few others could take its place */
    }
}

/* Experts that are in some admissible selection but not in all: *n_cand of
 * them into cand (rank order), those in every one into sure. Returns the
 * number of sure experts. f: (3e) scratch. */
static int split_band(const qv_moe_spec *s, const token_route *r, int k, int *sure, int *cand, int *n_cand,
                      unsigned char *f)
{
    int e = r->e, ns = 0, nc = 0, nq = r->ng ? r->n_sets : 1;
    unsigned char *any = f + e, *all = f + 2 * e;
    memset(any, 0, (size_t)e);
    memset(all, 1, (size_t)e);
    for (int q = 0; q < nq; q++) {
        split_in(s, r, r->ng ? r->sets + (size_t)q * (size_t)r->ng : NULL, k, f);
        for (int j = 0; j < e; j++) {
            any[j] |= f[j] != 0;
            all[j] &= f[j] == 2;
        }
    }
    for (int a = 0; a < e; a++) {
        int i = r->rank[a];
        if (all[i]) sure[ns++] = i;
        else if (any[i]) cand[nc++] = i;
    }
    *n_cand = nc;
    return ns;
}

/* The exact ranking's selection (in the canonical set of kept groups) into
 * sel, and whether it is the only admissible one: one admissible set of
 * groups, and in it every expert taken surely outranks every candidate not
 * taken (otherwise swapping such a pair, or a chain of them, gives another). */
static int unique_selection(const qv_moe_spec *s, const token_route *r, int k, int32_t *sel)
{
    const unsigned char *set = r->ng ? r->sets : NULL;
    canonical_in(s, r, set, k, sel);
    if (r->ng && r->n_sets != 1) return 0;
    for (int j = 0; j < r->e; j++) {
        int taken = 0;
        for (int d = 0; d < k; d++) taken |= sel[d] == j;
        if (taken || view(s, r, set, j) == V_OUT) continue;
        for (int c = 0; c < k; c++)
            if (!outranks_in(s, r, set, sel[c], j)) return 0;
    }
    return 1;
}

/* ---- exact weights --------------------------------------------------------------------- */

typedef struct weight_ctx {
    mpfr_t x, y, sum, one;
} weight_ctx;

static void wctx_init(weight_ctx *w)
{
    mpfr_inits2(ROUTE_PREC, w->x, w->y, w->sum, w->one, (mpfr_ptr)0);
    mpfr_set_ui(w->one, 1, MPFR_RNDN);
}
static void wctx_clear(weight_ctx *w) { mpfr_clears(w->x, w->y, w->sum, w->one, (mpfr_ptr)0); }

/* w->x = exp(l - lmax), rounded to w's precision. */
static void exp_shifted(weight_ctx *w, double l, double lmax)
{
    mpfr_set_d(w->x, l, MPFR_RNDN);
    mpfr_sub_d(w->x, w->x, lmax, MPFR_RNDN);
    mpfr_exp(w->x, w->x, MPFR_RNDN);
}

/* out[c] = exp(l[sel[c]] - lmax) / sum, c < k, the sum over l[0..all) when
 * all > 0, else over the selection; each to w's precision, then a double. */
static void softmax_weights(weight_ctx *w, const double *l, const int32_t *sel, int k, int all, double lmax, double *out)
{
    mpfr_set_zero(w->sum, 1);
    for (int i = 0; i < (all > 0 ? all : k); i++) {
        exp_shifted(w, l[all > 0 ? i : sel[i]], lmax);
        mpfr_add(w->sum, w->sum, w->x, MPFR_RNDN);
    }
    for (int c = 0; c < k; c++) {
        exp_shifted(w, l[sel[c]], lmax);
        mpfr_div(w->x, w->x, w->sum, MPFR_RNDN);
        out[c] = mpfr_get_d(w->x, MPFR_RNDN);
    }
}

/* Exact weights of selection sel (rsf included), rounded to double, and the
 * certified relative bound of the kernel's fp32 weights (*rel). Returns
 * QV_ERR_RANGE when the route has no value (every selected score zero). */
static qv_status exact_weights(const qv_moe_problem *p, const token_route *r, const int32_t *sel, weight_ctx *w,
                               double *out, double *rel, int64_t t)
{
    const qv_moe_spec *s = p->s;
    int k = s->topk, e = p->e;
    double g;
    /* with eps the renormalizing sum takes one more fp32 rounding */
    const double eps_round = s->eps != 0.0f ? 1.0 - U32 : 1.0;
    if (is_sigmoid(s->route)) {
        /* sigma(l) = 1 / (1 + exp(-l)) */
        g = 0;
        mpfr_set_zero(w->sum, 1);
        for (int c = 0; c < k; c++) {
            double l = r->l[sel[c]];
            mpfr_set_d(w->x, -l, MPFR_RNDN);
            mpfr_exp(w->x, w->x, MPFR_RNDN);
            mpfr_add_ui(w->x, w->x, 1, MPFR_RNDN);
            mpfr_ui_div(w->x, 1, w->x, MPFR_RNDN);
            out[c] = mpfr_get_d(w->x, MPFR_RNDN);
            mpfr_add(w->sum, w->sum, w->x, MPFR_RNDN);
            if (l >= -87.0) {
                double gc = sigmoid_rel(s, l);
                if (gc > g) g = gc;
            }
        }
        if (is_renorm(s->route)) {
            if (mpfr_cmp_d(w->sum, 0x1p-100) < 0)
                return qv_fail(QV_ERR_RANGE, "token %lld: every selected sigmoid score is below 2^-100, so the "
                               "renormalized weights have no fp32 value", (long long)t);
#ifndef QV_MUTANT_orc_route_eps_ignored
            mpfr_add_d(w->sum, w->sum, (double)s->eps, MPFR_RNDN); /* eps: the sum plus it, in fp32 */
#endif
            for (int c = 0; c < k; c++) {
                double l = r->l[sel[c]];
                mpfr_set_d(w->x, -l, MPFR_RNDN);
                mpfr_exp(w->x, w->x, MPFR_RNDN);
                mpfr_add_ui(w->x, w->x, 1, MPFR_RNDN);
                mpfr_mul(w->x, w->x, w->sum, MPFR_RNDN);
                mpfr_ui_div(w->x, 1, w->x, MPFR_RNDN);
                out[c] = mpfr_get_d(w->x, MPFR_RNDN);
            }
            g = (1.0 + g) * (1.0 + U32) * (1.0 + U32) / ((1.0 - g) * (1.0 - gamma_n(k - 1)) * eps_round) - 1.0;
        }
    } else {
        /* softmax over all e (softmax-topk, and -renorm with eps, whose weights are not those of
         * a softmax over the selection) or over the selection */
        int over_all = s->route == QV_ROUTE_SOFTMAX_TOPK || (is_renorm(s->route) && s->eps != 0.0f);
        int n = over_all ? e : k;
        double lmax = -INFINITY;
        for (int i = 0; i < n; i++) {
            double l = r->l[over_all ? i : sel[i]];
            if (l > lmax) lmax = l;
        }
        if (lmax == -INFINITY)
            return qv_fail(QV_ERR_RANGE, "token %lld: every logit the softmax sees is -Inf", (long long)t);
        softmax_weights(w, r->l, sel, k, over_all ? e : 0, lmax, out);
        /* the kernel's exponentials are shifted by the largest of all e logits, which a
         * selection in kept groups need not hold */
        double rho_a = over_all ? rho_softmax(s, r->l, NULL, e, lmax) : rho_softmax(s, r->l, sel, k, r->lmax);
        g = (1.0 + rho_a) * (1.0 + U32) * (1.0 + U32) / ((1.0 - rho_a) * (1.0 - gamma_n(n - 1))) - 1.0;
        if (is_renorm(s->route) && s->eps == 0.0f) {
            /* exact: the softmax over the selection; kernel: the all-E weights renormalized (the
             * kernel's all-E sum cancels but for its roundings, so g is the selection's) */
            softmax_weights(w, r->l, sel, k, 0, lmax, out);
            g = (1.0 + g) * (1.0 + U32) * (1.0 + U32) / ((1.0 - g) * (1.0 - gamma_n(k - 1))) - 1.0;
        } else if (is_renorm(s->route)) {
            /* p_c / (sum of the selection's p + eps), p the all-E softmax above (doubles) */
            mpfr_set_zero(w->sum, 1);
            for (int c = 0; c < k; c++) mpfr_add_d(w->sum, w->sum, out[c], MPFR_RNDN);
#ifndef QV_MUTANT_orc_route_eps_ignored
            mpfr_add_d(w->sum, w->sum, (double)s->eps, MPFR_RNDN);
#endif
            for (int c = 0; c < k; c++) {
                mpfr_set_d(w->x, out[c], MPFR_RNDN);
                mpfr_div(w->x, w->x, w->sum, MPFR_RNDN);
                out[c] = mpfr_get_d(w->x, MPFR_RNDN);
            }
            g = (1.0 + g) * (1.0 + U32) * (1.0 + U32) / ((1.0 - g) * (1.0 - gamma_n(k - 1)) * eps_round) - 1.0;
        }
    }
    if (s->rsf != 1.0f) {
        for (int c = 0; c < k; c++) {
            mpfr_set_d(w->x, out[c], MPFR_RNDN); /* exact: a double */
            mpfr_mul_d(w->x, w->x, (double)s->rsf, MPFR_RNDN);
            out[c] = mpfr_get_d(w->x, MPFR_RNDN);
        }
        g = (1.0 + g) * (1.0 + U32) - 1.0;
    }
    /* the weights above are doubles (2^-53 each, and 2^-53 more through rsf) */
    *rel = g * (1.0 + 0x1p-40) + 0x1p-50;
    return QV_OK;
}

/* ---- output intervals -------------------------------------------------------------------- */

/* Half an ulp of format f at magnitude bound m (f32 for the fp32 roundings). */
static double half_ulp(qv_fmt f, double m) { return 0.5 * qv_ulp(f, m); }

/* The accumulators of one output element. */
typedef struct acc {
    double hi, lo;   /* center, double-double */
    double rad;      /* radius so far */
    double mag;      /* sum of the terms' magnitude bounds */
    int nonfinite;   /* a term was NaN or Inf: the center is plain IEEE arithmetic */
} acc;

static void two_sum(double a, double b, double *s, double *e)
{
    *s = a + b;
    double bb = *s - a;
    *e = (a - (*s - bb)) + (b - bb);
}

/* Adds the term w * (y +- E) with weight radius wr (shared: w 1, wr 0, routed 0;
 * with rw=in the routed terms too, their weight being in the expert's input). */
static void add_term(const qv_moe_spec *s, acc *a, int routed, double w, double wr, double y, double E)
{
    qv_fmt of = s->expert->ofmt;
    if (!isfinite(y) || !isfinite(E)) {
        if (!a->nonfinite) {
            a->nonfinite = 1;
            a->hi += a->lo;
            a->lo = 0;
        }
        a->hi += routed ? w * y : y;
        return;
    }
    double magp = fabs(y) + E, c_hi, c_lo;
    if (routed) {
        c_hi = w * y;
        c_lo = fma(w, y, -c_hi);
    } else {
        c_hi = y;
        c_lo = 0;
    }
    double rad, mag;
    if (s->rw != QV_RW_OUT) {
        if (routed) {
            rad = w * E + wr * magp;
            mag = (w + wr) * magp;
            rad += half_ulp(QV_FMT_F32, mag); /* the fp32 product */
        } else {
            rad = E;
            mag = magp;
        }
    } else {
        double hp = half_ulp(of, magp); /* the product rounded to the output format */
        double radp = E + hp, magq = magp + hp;
        if (routed) {
            double wr2 = wr + half_ulp(of, w + wr); /* the weight in the output format */
            rad = w * radp + wr2 * magq;
            mag = (w + wr2) * magq;
            rad += half_ulp(of, mag); /* their product in it */
        } else {
            rad = radp;
            mag = magq;
        }
    }
    if (a->nonfinite) {
        a->hi += c_hi;
    } else {
        double s1, e1;
        two_sum(a->hi, c_hi, &s1, &e1);
        a->lo += e1 + c_lo;
        two_sum(s1, a->lo, &a->hi, &a->lo);
    }
    a->rad += rad;
    a->mag += mag;
}

/* The element's (y, E) from its accumulator and its term count J. */
static void finish(const qv_moe_spec *s, const acc *a, int J, double *y, double *E)
{
    qv_fmt of = s->expert->ofmt;
    if (a->nonfinite) {
        *y = a->hi + a->lo;
        *E = 0;
        return;
    }
    double r = a->rad;
    if (J >= 2) {
        if (s->sum == QV_MSUM_F32) {
            r += (J - 1) * half_ulp(QV_FMT_F32, a->mag);
        } else {
            /* each term rounded to the output format (rw=acc; with rw=out they are
             * already), and J - 2 additions before the last, whose rounding is the
             * output's */
            if (s->rw != QV_RW_OUT) r += J * half_ulp(of, a->mag);
            r += (J - 2) * half_ulp(of, a->mag);
        }
    }
    *y = a->hi + a->lo;
    *E = r * (1.0 + 0x1p-40) + fabs(*y) * 0x1p-50;
}

/* ---- the truth ------------------------------------------------------------------------- */

/* Band experts a token without the kernel's ids may be decided among. */
#define MAX_BAND 64

/* Everything one verification needs per token. */
typedef struct moe_ctx {
    const qv_moe_problem *p;
    int k;                      /* topk */
    int jobs;                   /* threads of each expert's truth (ref_truth_opts) */
    int32_t *sel;               /* (t, k) the selection used */
    double *w;                  /* (t, k) its exact weights */
    double *rel;                /* (t) weight_rel of the token */
    unsigned char *bad_route;   /* (t) the given ids are not admissible */
    int64_t n_bad, first_bad, n_ambiguous;
    char why[192];
    /* (t, n) accumulators and the term count per token; a deferred token's hold
     * its shared experts' terms until its selection is decided */
    acc *acc;
    int *J;
    /* deferred tokens (no ids given, several admissible selections): their band
     * (sure experts first, then candidates) and its (y, E) rows */
    int64_t n_def;
    int64_t *def_token;         /* (n_def) */
    int *def_count, *def_sure;  /* (n_def) */
    int32_t **def_expert;       /* (n_def) router experts */
    double **def_y, **def_E;    /* (n_def) (count, n) */
    int64_t *def_of;            /* (t) index into def_*, or -1 */
    /* rw=in: the kernel's fp32 weights when given (they fix each input scale's
     * rounding), and a deferred band's exact weights and their bounds, one
     * per band expert (routes whose weights do not depend on the selection) */
    const float *given_w;
    double **def_w, **def_rel;  /* (n_def) (count) */
} moe_ctx;

static void ctx_free(moe_ctx *c)
{
    free(c->sel);
    free(c->w);
    free(c->rel);
    free(c->bad_route);
    free(c->acc);
    free(c->J);
    for (int64_t d = 0; d < c->n_def; d++) {
        free(c->def_expert[d]);
        free(c->def_y[d]);
        free(c->def_E[d]);
        free(c->def_w[d]);
        free(c->def_rel[d]);
    }
    free(c->def_token);
    free(c->def_count);
    free(c->def_sure);
    free(c->def_expert);
    free(c->def_y);
    free(c->def_E);
    free(c->def_of);
    free(c->def_w);
    free(c->def_rel);
    memset(c, 0, sizeof *c);
}

static qv_status ctx_alloc(moe_ctx *c, const qv_moe_problem *p)
{
    memset(c, 0, sizeof *c);
    c->p = p;
    c->k = p->s->topk;
    c->first_bad = -1;
    size_t t = (size_t)p->t, k = (size_t)c->k;
    c->sel = malloc(sizeof(int32_t) * t * k);
    c->w = malloc(sizeof(double) * t * k);
    c->rel = calloc(t, sizeof(double));
    c->bad_route = calloc(t, 1);
    c->acc = calloc(t * (size_t)p->n, sizeof(acc));
    c->J = calloc(t, sizeof(int));
    c->def_token = malloc(sizeof(int64_t) * t);
    c->def_count = malloc(sizeof(int) * t);
    c->def_sure = malloc(sizeof(int) * t);
    c->def_expert = calloc(t, sizeof(int32_t *));
    c->def_y = calloc(t, sizeof(double *));
    c->def_E = calloc(t, sizeof(double *));
    c->def_of = malloc(sizeof(int64_t) * t);
    c->def_w = calloc(t, sizeof(double *));
    c->def_rel = calloc(t, sizeof(double *));
    if (!c->sel || !c->w || !c->rel || !c->bad_route || !c->acc || !c->J || !c->def_token || !c->def_count ||
        !c->def_sure || !c->def_expert || !c->def_y || !c->def_E || !c->def_of || !c->def_w || !c->def_rel) {
        ctx_free(c);
        return qv_fail(QV_ERR_NOMEM, "out of memory for a routed GEMM of %lld tokens", (long long)p->t);
    }
    for (size_t i = 0; i < t; i++) c->def_of[i] = -1;
    return QV_OK;
}

typedef struct route_bufs {
    token_route r;
    int *tmp, *sure, *cand;
    unsigned char *flags; /* (3e) split_band's */
    int32_t *sel;         /* (topk) */
} route_bufs;

static void bufs_free(route_bufs *b)
{
    token_route *r = &b->r;
    free(r->l), free(r->b), free(r->key), free(r->lo), free(r->hi), free(r->rank);
    free(r->top1), free(r->top2), free(r->glo), free(r->ghi), free(r->gkey), free(r->grank);
    free(r->gtmp), free(r->gcand), free(r->gidx), free(r->sets);
    free(b->tmp), free(b->sure), free(b->cand), free(b->flags), free(b->sel);
    memset(b, 0, sizeof *b);
}

static qv_status bufs_alloc(route_bufs *b, const qv_moe_problem *p)
{
    memset(b, 0, sizeof *b);
    const qv_moe_spec *s = p->s;
    int e = p->e, ng = s->groups;
    size_t de = sizeof(double) * (size_t)e, ie = sizeof(int) * (size_t)e;
    token_route *r = &b->r;
    r->e = e;
    r->sig_bias = s->sbias;
    r->l = malloc(de), r->b = malloc(de), r->key = malloc(de), r->lo = malloc(de), r->hi = malloc(de);
    r->rank = malloc(ie);
    b->tmp = malloc(ie), b->sure = malloc(ie), b->cand = malloc(ie);
    b->flags = malloc(3 * (size_t)e);
    b->sel = malloc(sizeof(int32_t) * (size_t)s->topk);
    int ok = r->l && r->b && r->key && r->lo && r->hi && r->rank && b->tmp && b->sure && b->cand && b->flags && b->sel;
    if (ng) {
        size_t dg = sizeof(double) * (size_t)ng, ig = sizeof(int) * (size_t)ng;
        r->ng = ng, r->per = e / ng, r->gk = s->gtopk;
#ifdef QV_MUTANT_orc_route_groups_ignored
        r->ng = 0; /* oracle mutant: the group limit left out of the truth */
#endif
        r->top1 = malloc(ig), r->top2 = malloc(ig), r->grank = malloc(ig);
        r->gtmp = malloc(ig), r->gcand = malloc(ig), r->gidx = malloc(ig);
        r->glo = malloc(dg), r->ghi = malloc(dg), r->gkey = malloc(dg);
        r->sets = malloc((size_t)MAX_GSETS * (size_t)ng);
        ok = ok && r->top1 && r->top2 && r->grank && r->gtmp && r->gcand && r->gidx && r->glo && r->ghi && r->gkey &&
             r->sets;
    }
    if (!ok) {
        bufs_free(b);
        return qv_fail(QV_ERR_NOMEM, "out of memory routing over %d experts", e);
    }
    return QV_OK;
}

/* A token whose near-tied groups admit too many sets to list. */
static qv_status gsets_refused(const token_route *r, int64_t t)
{
    return qv_fail(QV_ERR_UNSUPPORTED, "token %lld: more than %d choices of the %d groups kept are admissible "
                   "(near-tied or tied group scores); qvet cannot list them", (long long)t, MAX_GSETS, r->gk);
}

/* Checks given ids of token t: in range, distinct, admissible. */
static int ids_ok(moe_ctx *c, const token_route *r, const int32_t *g, int64_t t)
{
    const qv_moe_problem *p = c->p;
    int k = c->k;
    char why[160] = "";
    int valid = 1;
    for (int a = 0; a < k && valid; a++) {
        if (g[a] < 0 || g[a] >= p->e) {
            valid = 0;
            snprintf(why, sizeof why, "has expert id %d, outside 0..%d", (int)g[a], p->e - 1);
        }
        for (int b = 0; b < a && valid; b++)
            if (g[a] == g[b]) {
                valid = 0;
                snprintf(why, sizeof why, "takes expert %d twice", (int)g[a]);
            }
    }
    if (valid && !admissible(p->s, r, g, k, why, sizeof why)) valid = 0;
    if (!valid && c->first_bad < 0) {
        c->first_bad = t;
        snprintf(c->why, sizeof c->why, "token %lld %s", (long long)t, why);
    }
    return valid;
}

/* rw=in, a deferred token d: the exact weight of each expert of its band and
 * its bound, for routes whose weights do not depend on the rest of the
 * selection (softmax over all experts, sigmoid without renormalization);
 * on the others each choice's input scale depends on the whole selection,
 * which only the kernel's ids fix. */
static qv_status band_weights(moe_ctx *c, int64_t d, const token_route *r, weight_ctx *wc)
{
    const qv_moe_problem *p = c->p;
    const qv_route route = p->s->route;
    int k = c->k, cnt = c->def_count[d];
    int64_t t = c->def_token[d];
    if (route != QV_ROUTE_SOFTMAX_TOPK && route != QV_ROUTE_SIGMOID_TOPK)
        return qv_fail(QV_ERR_UNSUPPORTED, "token %lld: several selections are admissible (near ties), and with "
                       "rw=in on route=%s each choice's input scale depends on the whole selection; give the "
                       "kernel's expert ids to decide it", (long long)t, qv_route_name(route));
    c->def_w[d] = malloc(sizeof(double) * (size_t)cnt);
    c->def_rel[d] = malloc(sizeof(double) * (size_t)cnt);
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)k);
    double *w = malloc(sizeof(double) * (size_t)k);
    qv_status st = QV_OK;
    if (!c->def_w[d] || !c->def_rel[d] || !sel || !w) st = qv_fail(QV_ERR_NOMEM, "out of memory for near-tied tokens");
    /* each weight is its expert's alone: the band in runs of k (the last one
     * padded with its first expert) */
    for (int i0 = 0; i0 < cnt && st == QV_OK; i0 += k) {
        for (int a = 0; a < k; a++) sel[a] = c->def_expert[d][i0 + a < cnt ? i0 + a : i0];
        double rel;
        st = exact_weights(p, r, sel, wc, w, &rel, t);
        for (int a = 0; a < k && i0 + a < cnt && st == QV_OK; a++) {
            c->def_w[d][i0 + a] = w[a];
            c->def_rel[d][i0 + a] = rel;
        }
    }
    free(sel), free(w);
    return st;
}

/* rw=in: the values in the activation format that the input scale of a
 * routed term (the kernel's fp32 weight, within rel * w + WEIGHT_ABS of the
 * exact w, rounded to that format) may take: one (*c2 == *c1) or two
 * neighbours. The kernel's own weight, given and within the bound, fixes it. */
static qv_status in_scales(const qv_moe_problem *p, double w, double rel, const float *given, int64_t t,
                           int32_t expert, double *c1, double *c2)
{
    const qv_fmt af = p->s->expert->afmt;
    const double r = rel * w + WEIGHT_ABS;
    if (given && fabs((double)*given - w) <= r) {
        *c1 = *c2 = ref_round_to(af, (double)*given, 0);
        return QV_OK;
    }
    /* a routed weight is never below 0 (exponentials, sigmoids, rsf > 0) */
    *c1 = ref_round_to(af, w - r > 0 ? w - r : 0.0, 0);
    *c2 = ref_round_to(af, w + r, 0);
    if (qv_encode(af, *c2, QV_SAT_NONE) - qv_encode(af, *c1, QV_SAT_NONE) <= 1) return QV_OK;
    return qv_fail(QV_ERR_UNSUPPORTED, "token %lld: the weight of expert %d (%.3g, within %.2g) may round to more "
                   "than two %s values, so its input scale (rw=in) is not fixed; give the kernel's expert ids "
                   "and weights", (long long)t, (int)expert, w, r, qv_fmt_get(af)->name);
}

/* Routing of every token: the selection used, its exact weights, and with
 * `defer` (no ids) the ambiguous tokens' bands. */
static qv_status route_all(moe_ctx *c, const int32_t *ids, int defer)
{
    const qv_moe_problem *p = c->p;
    const qv_moe_spec *s = p->s;
    int k = c->k;
    route_bufs b;
    QV_TRY(bufs_alloc(&b, p));
    weight_ctx wc;
    wctx_init(&wc);
    qv_status st = QV_OK;
    for (int64_t t = 0; t < p->t && st == QV_OK; t++) {
        route_token(p, t, &b.r, b.tmp);
        int32_t *sel = c->sel + t * k;
        if (b.r.n_finite < k && s->route != QV_ROUTE_SOFTMAX_TOPK && s->route != QV_ROUTE_SIGMOID_TOPK) {
            st = qv_fail(QV_ERR_RANGE, "token %lld: fewer than topk=%d logits are finite, so the %s weights have no "
                         "value", (long long)t, k, qv_route_name(s->route));
            break;
        }
        if (b.r.ng && b.r.sets_overflow) {
            st = gsets_refused(&b.r, t);
            break;
        }
        int unique = unique_selection(s, &b.r, k, b.sel);
        c->n_ambiguous += !unique;
        if (ids && ids_ok(c, &b.r, ids + t * k, t)) {
            memcpy(sel, ids + t * k, sizeof(int32_t) * (size_t)k);
        } else {
            if (ids) {
                c->bad_route[t] = 1;
                c->n_bad++;
            }
            memcpy(sel, b.sel, sizeof(int32_t) * (size_t)k); /* the canonical selection */
            if (!ids && defer && !unique) {
                int nc, ns = split_band(s, &b.r, k, b.sure, b.cand, &nc, b.flags);
                if (ns + nc > MAX_BAND) {
                    st = qv_fail(QV_ERR_UNSUPPORTED, "token %lld: %d experts are interchangeable at the top-%d "
                                 "boundary (near-tied or underflowing scores); give the kernel's expert ids to "
                                 "decide it", (long long)t, ns + nc, k);
                    break;
                }
                int64_t d = c->n_def++;
                c->def_token[d] = t;
                c->def_of[t] = d;
                c->def_count[d] = ns + nc;
                c->def_sure[d] = ns;
                c->def_expert[d] = malloc(sizeof(int32_t) * (size_t)(ns + nc));
                if (!c->def_expert[d]) {
                    st = qv_fail(QV_ERR_NOMEM, "out of memory for near-tied tokens");
                    break;
                }
                for (int i = 0; i < ns; i++) c->def_expert[d][i] = b.sure[i];
                for (int i = 0; i < nc; i++) c->def_expert[d][ns + i] = b.cand[i];
                if (s->rw == QV_RW_IN) st = band_weights(c, d, &b.r, &wc);
                if (st != QV_OK) break;
            }
        }
        if (st == QV_OK) st = exact_weights(p, &b.r, sel, &wc, c->w + t * k, &c->rel[t], t);
    }
    wctx_clear(&wc);
    bufs_free(&b);
    if (st != QV_OK) return st;
    int64_t n = p->n;
    for (int64_t d = 0; d < c->n_def; d++) {
        size_t cnt = (size_t)c->def_count[d] * (size_t)n;
        c->def_y[d] = malloc(sizeof(double) * (cnt ? cnt : 1));
        c->def_E[d] = malloc(sizeof(double) * (cnt ? cnt : 1));
        if (!c->def_y[d] || !c->def_E[d]) return qv_fail(QV_ERR_NOMEM, "out of memory for near-tied tokens");
        for (size_t i = 0; i < cnt; i++) c->def_y[d][i] = c->def_E[d][i] = NAN;
    }
    return QV_OK;
}

/* Token t wants expert x for choice c (c >= topk: shared expert c - topk), or
 * for band entry -1 - c of its deferred band. */
typedef struct want {
    int64_t t;
    int c;
} want;

/* Calls f(c, t, ch, x) for every (token, want) pair: the router experts a
 * token's selection or band holds that are local, and the shared experts. */
#define FOR_EACH_WANT(c, ...)                                                                       \
    for (int64_t t_ = 0; t_ < (c)->p->t; t_++) {                                                     \
        int64_t d_ = (c)->def_of[t_];                                                                \
        if (d_ >= 0) {                                                                               \
            for (int i_ = 0; i_ < (c)->def_count[d_]; i_++) {                                        \
                int32_t x_ = (c)->p->expert_map[(c)->def_expert[d_][i_]];                            \
                int ch_ = -1 - i_;                                                                   \
                if (x_ >= 0) __VA_ARGS__                                                                    \
            }                                                                                        \
        } else {                                                                                     \
            for (int a_ = 0; a_ < (c)->k; a_++) {                                                    \
                int32_t x_ = (c)->p->expert_map[(c)->sel[t_ * (c)->k + a_]];                         \
                int ch_ = a_;                                                                        \
                if (x_ >= 0) __VA_ARGS__                                                                    \
            }                                                                                        \
        }                                                                                            \
        for (int s_ = 0; s_ < (c)->p->shared; s_++) {                                                \
            int32_t x_ = (c)->p->e_local + s_;                                                       \
            int ch_ = (c)->k + s_;                                                                   \
            __VA_ARGS__                                                                                     \
        }                                                                                            \
    }

/* sgate: the values the gate of shared expert `sx` (0-based among the shared)
 * may take for token t, [*lo, *hi]: the exact dot product z of the token's
 * activations with the gate vector (MPFR), the accumulator's bound on the
 * kernel's fp32 sum (ref_alpha, plus one fp32 normal quantum a product for
 * underflow), its rounding to the activation format, the fp32 sigmoid's
 * relative error (the exponential's declared ulps, 1 + e and the division
 * each rounded), and that rounded to the activation format again. Rounding
 * is monotone, so the ends bound every value between. */
static void gate_interval(const qv_moe_problem *p, int64_t t, int sx, mpfr_t acc, double *lo, double *hi)
{
    const qv_moe_spec *s = p->s;
    const qv_fmt af = s->expert->afmt;
    const int64_t k = p->k;
    const uint16_t *x = (const uint16_t *)p->a + t * k, *g = (const uint16_t *)p->shared_gate + (int64_t)sx * k;
    double G = 0;
    mpfr_set_zero(acc, 1);
    for (int64_t i = 0; i < k; i++) {
        double pr = qv_decode(af, x[i]) * qv_decode(af, g[i]); /* exact: two 11-bit significands */
        mpfr_add_d(acc, acc, pr, MPFR_RNDN);
        G += fabs(pr);
    }
    double y = mpfr_get_d(acc, MPFR_RNDN);
    double E = (ref_alpha(s->expert, k) * G + (double)k * 0x1p-126) * (1.0 + 0x1p-40) + fabs(y) * 0x1p-52 +
               G * (double)k * 0x1p-52;
    double zl = ref_round_to(af, y - E, 0), zh = ref_round_to(af, y + E, 0);
    double sl = 0.0, sh = 1.0;
    if (zl != -INFINITY && zl >= -87.0) {
        sl = 1.0 / (1.0 + exp(-zl)) * (1.0 - sigmoid_rel(s, zl) * (1.0 + 0x1p-40) - 0x1p-50);
        if (sl < 0) sl = 0;
    }
    if (zh != INFINITY) {
        if (zh >= -87.0) {
            sh = 1.0 / (1.0 + exp(-zh)) * (1.0 + sigmoid_rel(s, zh) * (1.0 + 0x1p-40) + 0x1p-50) + WEIGHT_ABS;
        } else {
            sh = exp(-87.0) + WEIGHT_ABS; /* the kernel's exp(-z) may overflow to Inf: sigma 0 */
        }
        if (sh > 1) sh = 1;
    }
    *lo = ref_round_to(af, sl, 0);
    *hi = ref_round_to(af, sh, 0);
}

/* rw=in: a routed term's input scale, the exact weight w (bound rel) rounded
 * to the activation format: the values it may take (in_scales). Want (t, c)
 * of a selection (0 <= c < topk) or of band entry -1 - c. */
static qv_status want_scales(const moe_ctx *c, int64_t t, int ch, double *c1, double *c2)
{
    const qv_moe_problem *p = c->p;
    int k = c->k;
    if (ch < 0) {
        int64_t d = c->def_of[t];
        int i = -1 - ch;
        return in_scales(p, c->def_w[d][i], c->def_rel[d][i], NULL, t, c->def_expert[d][i], c1, c2);
    }
    const float *given = c->given_w && !c->bad_route[t] ? c->given_w + t * k + ch : NULL;
    return in_scales(p, c->w[t * k + ch], c->rel[t], given, t, c->sel[t * k + ch], c1, c2);
}

/* Each row r of sub with a scale (not NaN) becomes RN_a(scale[r] * a), the
 * activation format's rounding of an exact product (rw=in). */
static void scale_input(qv_problem *sub, const double *scale)
{
    const qv_fmt af = sub->v->afmt;
    uint16_t *a = sub->a;
    for (int64_t r = 0; r < sub->m; r++) {
        if (isnan(scale[r])) continue;
        for (int64_t i = 0; i < sub->k; i++) {
            uint16_t *x = &a[r * sub->k + i];
            *x = (uint16_t)qv_encode(af, ref_round_to(af, scale[r] * qv_decode(af, *x), 0), QV_SAT_NONE);
        }
    }
}

/* Every expert's truth over the tokens that want it, folded into the
 * accumulators (or the deferred bands). With rw=in a routed term's row is the
 * token's input times its scale; a scale that may round to either of two
 * values gets a row for each and the term their bounds' union. */
static qv_status experts_truth(moe_ctx *c)
{
    const qv_moe_problem *p = c->p;
    const qv_moe_spec *s = p->s;
#ifdef QV_MUTANT_orc_route_in_as_acc
    const int in = 0; /* oracle mutant: rw=in taken for rw=acc, the product weighed */
#else
    const int in = s->rw == QV_RW_IN;
#endif
    int nx = p->e_local + p->shared, k = c->k;
    int64_t n = p->n;
    int64_t *start = calloc((size_t)nx + 1, sizeof(int64_t)), *next = calloc((size_t)nx + 1, sizeof(int64_t));
    if (!start || !next) {
        free(start), free(next);
        return qv_fail(QV_ERR_NOMEM, "out of memory");
    }
    FOR_EACH_WANT(c, { start[x_ + 1]++; (void)ch_; })
    for (int x = 0; x < nx; x++) start[x + 1] += start[x];
    int64_t total = start[nx], cap = (in ? 2 : 1) * (total ? total : 1);
    want *list = malloc(sizeof(want) * (size_t)(total ? total : 1));
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)cap), *alt = malloc(sizeof(int64_t) * (size_t)cap);
    double *scale = malloc(sizeof(double) * (size_t)cap), *uy = malloc(sizeof(double) * (size_t)n),
           *uE = malloc(sizeof(double) * (size_t)n);
    if (!list || !rows || !alt || !scale || !uy || !uE) {
        free(start), free(next), free(list), free(rows), free(alt), free(scale), free(uy), free(uE);
        return qv_fail(QV_ERR_NOMEM, "out of memory listing the experts' tokens");
    }
    memcpy(next, start, sizeof(int64_t) * ((size_t)nx + 1));
    FOR_EACH_WANT(c, { list[next[x_]++] = (want){t_, ch_}; })
    free(next);
    mpfr_t gacc;
    mpfr_init2(gacc, 1200); /* a sum of products of two 16-bit floats, exactly */
    qv_status st = QV_OK;
    for (int x = 0; x < nx && st == QV_OK; x++) {
        int64_t nw = start[x + 1] - start[x], m = nw;
        if (!nw) continue;
        /* want i is row i; a second candidate scale's row goes after the wants */
        for (int64_t i = 0; i < nw && st == QV_OK; i++) {
            want wt = list[start[x] + i];
            rows[i] = wt.t;
            alt[i] = -1;
            scale[i] = NAN;
            if (!in || wt.c >= k) continue;
            double c1, c2;
            st = want_scales(c, wt.t, wt.c, &c1, &c2);
            scale[i] = c1;
#ifdef QV_MUTANT_orc_route_in_union_lost
            c2 = c1; /* oracle mutant: only the lower candidate scale */
#endif
            if (st == QV_OK && c2 != c1) {
                rows[m] = wt.t;
                scale[m] = c2;
                alt[i] = m++;
            }
        }
        if (st != QV_OK) break;
        qv_problem sub;
        st = qv_moe_subproblem(p, x, rows, m, &sub);
        if (st != QV_OK) break;
        if (in) scale_input(&sub, scale);
        ref_truth tr;
        const ref_truth_opts to = {.jobs = c->jobs};
        st = ref_truth_compute_ex(&sub, &to, &tr);
        qv_moe_subproblem_destroy(&sub);
        if (st != QV_OK) break;
        for (int64_t i = 0; i < nw && st == QV_OK; i++) {
            want wt = list[start[x] + i];
            const double *y = tr.y + i * n, *E = tr.bound + i * n;
            if (alt[i] >= 0) {
                /* the union of the two candidates' intervals */
                const double *y2 = tr.y + alt[i] * n, *E2 = tr.bound + alt[i] * n;
                for (int64_t j = 0; j < n && st == QV_OK; j++) {
                    if (!isfinite(y[j]) || !isfinite(y2[j]) || !isfinite(E[j]) || !isfinite(E2[j])) {
                        st = qv_fail(QV_ERR_UNSUPPORTED, "token %lld: its input scale (rw=in) may round to either "
                                     "of two values and one of them makes a product that is not finite; give the "
                                     "kernel's expert ids and weights", (long long)wt.t);
                        break;
                    }
                    double lo = fmin(y[j] - E[j], y2[j] - E2[j]), hi = fmax(y[j] + E[j], y2[j] + E2[j]);
                    uy[j] = 0.5 * lo + 0.5 * hi;
                    /* each end and the center rounded once in double: a unit of each */
                    uE[j] = (0.5 * hi - 0.5 * lo) * (1.0 + 0x1p-50) + (fabs(lo) + fabs(hi) + fabs(uy[j])) * 0x1p-52;
                }
                y = uy, E = uE;
            }
            if (st != QV_OK) break;
            if (wt.c < 0) {
                int64_t d = c->def_of[wt.t];
                size_t off = (size_t)(-1 - wt.c) * (size_t)n;
                memcpy(c->def_y[d] + off, y, sizeof(double) * (size_t)n);
                memcpy(c->def_E[d] + off, E, sizeof(double) * (size_t)n);
                continue;
            }
            int routed = wt.c < k;
            double w = routed ? c->w[wt.t * k + wt.c] : 1.0;
            double wr = routed ? c->rel[wt.t] * w + WEIGHT_ABS : 0.0;
            int weighed = routed && !in;
            if (!routed && s->sgate && p->shared_gate) {
                /* the shared expert's gate: weighed as a routed term, by an
                 * interval of activation-format values */
                double glo, ghi;
                gate_interval(p, wt.t, wt.c - k, gacc, &glo, &ghi);
#ifdef QV_MUTANT_orc_route_gate_ignored
                glo = ghi = 1.0; /* oracle mutant: the gate left out of the truth */
#endif
                w = 0.5 * glo + 0.5 * ghi;
                wr = (0.5 * ghi - 0.5 * glo) * (1.0 + 0x1p-50);
                weighed = 1;
            }
            acc *a = c->acc + wt.t * n;
            for (int64_t j = 0; j < n; j++) add_term(s, &a[j], weighed, w, wr, y[j], E[j]);
            c->J[wt.t]++;
        }
        ref_truth_clear(&tr);
    }
    mpfr_clear(gacc);
    free(start), free(list), free(rows), free(alt), free(scale), free(uy), free(uE);
    return st;
}

/* Deferred token d under selection sel (weights w, bound rel): its shared
 * terms (the accumulators) plus the routed ones, into row and *J. */
static void deferred_row(const moe_ctx *c, int64_t d, const int32_t *sel, const double *w, double rel, acc *row,
                         int *J)
{
    const qv_moe_problem *p = c->p;
    int64_t n = p->n, t = c->def_token[d];
    memcpy(row, c->acc + t * n, sizeof(acc) * (size_t)n);
    *J = c->J[t];
    for (int a = 0; a < c->k; a++) {
        if (p->expert_map[sel[a]] < 0) continue;
        int i = 0;
        while (i < c->def_count[d] && c->def_expert[d][i] != sel[a]) i++;
        QV_ASSERT(i < c->def_count[d], "a selection outside the token's band");
        const double *y = c->def_y[d] + (size_t)i * (size_t)n, *E = c->def_E[d] + (size_t)i * (size_t)n;
        for (int64_t j = 0; j < n; j++)
            add_term(p->s, &row[j], p->s->rw != QV_RW_IN, w[a], rel * w[a] + WEIGHT_ABS, y[j], E[j]);
        (*J)++;
    }
}

/* Does output row t (codes) lie in the rounded bound of (y, E) everywhere? */
static int row_passes(const qv_variant *v, const void *out, int64_t t, int64_t n, const double *y, const double *E)
{
    qv_fmt of = v->ofmt;
    int sat = v->arith.out_sat == QV_SAT_FINITE;
    size_t es = qv_fmt_storage_bytes(of);
    for (int64_t j = 0; j < n; j++) {
        uint32_t code = 0;
        memcpy(&code, (const char *)out + (size_t)(t * n + j) * es, es);
        double o = qv_decode(of, code);
        if (!isfinite(y[j])) {
            if (isnan(y[j]) ? !isnan(o) : o != y[j]) return 0;
            continue;
        }
        if (isnan(o)) return 0;
        double lo = ref_round_to(of, y[j] - E[j], sat), hi = ref_round_to(of, y[j] + E[j], sat);
        if (o < lo || o > hi) return 0;
    }
    return 1;
}

/* Decides each deferred token against the output (when given): the first
 * admissible selection of its band whose row the output matches, else the
 * exact ranking's; folds it into the accumulators. */
static qv_status decide_deferred(moe_ctx *c, const void *out)
{
    const qv_moe_problem *p = c->p;
    const qv_moe_spec *s = p->s;
    int k = c->k;
    int64_t n = p->n;
    route_bufs b;
    QV_TRY(bufs_alloc(&b, p));
    acc *row = malloc(sizeof(acc) * (size_t)n);
    double *y = malloc(sizeof(double) * (size_t)n), *E = malloc(sizeof(double) * (size_t)n);
    double *w = malloc(sizeof(double) * (size_t)k);
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)k);
    int *idx = malloc(sizeof(int) * (size_t)k);
    qv_status st = QV_OK;
    if (!row || !y || !E || !w || !sel || !idx) st = qv_fail(QV_ERR_NOMEM, "out of memory deciding near-tied tokens");
    weight_ctx wc;
    wctx_init(&wc);
    for (int64_t d = 0; d < c->n_def && st == QV_OK; d++) {
        int64_t t = c->def_token[d];
        route_token(p, t, &b.r, b.tmp);
        int ns = c->def_sure[d], nc = c->def_count[d] - ns, need = k - ns;
        for (int i = 0; i < need; i++) idx[i] = i;
        for (int tried = 0; out && need >= 0 && need <= nc && tried < MAX_SELECTIONS; tried++) {
            for (int i = 0; i < ns; i++) sel[i] = c->def_expert[d][i];
            for (int i = 0; i < need; i++) sel[ns + i] = c->def_expert[d][ns + idx[i]];
            if (admissible(s, &b.r, sel, k, NULL, 0)) {
                double rel;
                st = exact_weights(p, &b.r, sel, &wc, w, &rel, t);
                if (st != QV_OK) break;
                int J;
                deferred_row(c, d, sel, w, rel, row, &J);
                for (int64_t j = 0; j < n; j++) finish(s, &row[j], J, &y[j], &E[j]);
                if (row_passes(s->expert, out, t, n, y, E)) {
                    memcpy(c->sel + t * k, sel, sizeof(int32_t) * (size_t)k);
                    memcpy(c->w + t * k, w, sizeof(double) * (size_t)k);
                    c->rel[t] = rel;
                    break;
                }
            }
            if (!next_combination(idx, need, nc)) break;
        }
        if (st != QV_OK) break;
        int J;
        deferred_row(c, d, c->sel + t * k, c->w + t * k, c->rel[t], row, &J);
        memcpy(c->acc + t * n, row, sizeof(acc) * (size_t)n);
        c->J[t] = J;
    }
    wctx_clear(&wc);
    free(row), free(y), free(E), free(w), free(sel), free(idx);
    bufs_free(&b);
    return st;
}

/* The routed output's truth from the accumulators. */
static qv_status fill_truth(const moe_ctx *c, qv_moe_truth *t)
{
    const qv_moe_problem *p = c->p;
    const qv_variant *v = p->s->expert;
    int64_t n = p->n, mn = p->t * n;
    int k = c->k;
    ref_truth *o = &t->out;
    o->m = p->t;
    o->n = n;
    o->y = malloc(sizeof(double) * (size_t)mn);
    o->bound = malloc(sizeof(double) * (size_t)mn);
    o->y_rn = malloc(sizeof(double) * (size_t)mn);
    t->ids = malloc(sizeof(int32_t) * (size_t)(p->t * k));
    t->weight = malloc(sizeof(double) * (size_t)(p->t * k));
    if (!o->y || !o->bound || !o->y_rn || !t->ids || !t->weight) {
        ref_moe_truth_clear(t);
        return qv_fail(QV_ERR_NOMEM, "out of memory for the routed truth");
    }
    int sat = v->arith.out_sat == QV_SAT_FINITE;
    for (int64_t tt = 0; tt < p->t; tt++)
        for (int64_t j = 0; j < n; j++) {
            int64_t e = tt * n + j;
            finish(p->s, &c->acc[e], c->J[tt], &o->y[e], &o->bound[e]);
            o->y_rn[e] = ref_round_to(v->ofmt, o->y[e], sat);
        }
    memcpy(t->ids, c->sel, sizeof(int32_t) * (size_t)(p->t * k));
    memcpy(t->weight, c->w, sizeof(double) * (size_t)(p->t * k));
    t->weight_rel = 0;
    for (int64_t tt = 0; tt < p->t; tt++)
        if (c->rel[tt] > t->weight_rel) t->weight_rel = c->rel[tt];
    t->weight_abs = WEIGHT_ABS;
    t->n_ambiguous = c->n_ambiguous;
    o->path = "routed";
    o->why = "routing exact (MPFR, 160 bits), each expert's product on its own exact or certified path, "
             "the combine bounded as declared";
    return QV_OK;
}

void ref_moe_truth_clear(qv_moe_truth *t)
{
    if (!t) return;
    ref_truth_clear(&t->out);
    free(t->ids);
    free(t->weight);
    memset(t, 0, sizeof *t);
}

/* Route, run the experts' truths, decide near ties against `out` (or not). */
static qv_status truth_ctx(const qv_moe_problem *p, const int32_t *ids, const float *weights, const void *out,
                           int jobs, moe_ctx *c)
{
    QV_TRY(qv_moe_problem_check(p));
    QV_TRY(ctx_alloc(c, p));
    c->jobs = jobs;
    c->given_w = weights;
    qv_status st = route_all(c, ids, out != NULL);
    if (st == QV_OK) st = experts_truth(c);
    if (st == QV_OK) st = decide_deferred(c, out);
    if (st != QV_OK) ctx_free(c);
    return st;
}

qv_status ref_moe_truth(const qv_moe_problem *p, const int32_t *ids, qv_moe_truth *t)
{
    memset(t, 0, sizeof *t);
    moe_ctx c;
    QV_TRY(truth_ctx(p, ids, NULL, NULL, 1, &c));
    qv_status st = fill_truth(&c, t);
    ctx_free(&c);
    return st;
}

qv_status ref_moe_verify(const qv_moe_problem *p, const void *out, const int32_t *ids, const float *weights,
                         qv_moe_result *res)
{
    return ref_moe_verify_jobs(p, out, ids, weights, 1, res);
}

qv_status ref_moe_verify_jobs(const qv_moe_problem *p, const void *out, const int32_t *ids, const float *weights,
                              int jobs, qv_moe_result *res)
{
    memset(res, 0, sizeof *res);
    res->first_bad_token = -1;
    if (weights && !ids)
        return qv_fail(QV_ERR_USAGE, "routing weights without the expert ids they belong to");
    moe_ctx c;
    QV_TRY(truth_ctx(p, ids, weights, out, jobs, &c));
    qv_moe_truth t;
    memset(&t, 0, sizeof t);
    qv_status st = fill_truth(&c, &t);
    if (st != QV_OK) {
        ctx_free(&c);
        return st;
    }
    qv_problem shell = {.v = p->s->expert, .m = p->t, .n = p->n, .k = p->k};
    const ref_verify_opts vo = {.jobs = jobs};
    ref_verify_ex(&shell, &t.out, out, &vo, &res->out);
    res->n_route_bad = c.n_bad;
    res->first_bad_token = c.first_bad;
    res->n_ambiguous = c.n_ambiguous;
    snprintf(res->route_reason, sizeof res->route_reason, "%s", c.why);
    int k = c.k;
    if (weights)
        for (int64_t tt = 0; tt < p->t; tt++) {
            if (c.bad_route[tt]) continue;
            for (int a = 0; a < k; a++) {
                double w = c.w[tt * k + a], got = weights[tt * k + a];
                double r = c.rel[tt] * w + WEIGHT_ABS;
                if (!(fabs(got - w) <= r)) {
                    if (!res->n_weight_bad && c.first_bad < 0) {
                        res->first_bad_token = tt;
                        snprintf(res->route_reason, sizeof res->route_reason,
                                 "token %lld: weight of expert %d is %.9g, the exact one %.9g (bound %.3g)",
                                 (long long)tt, (int)c.sel[tt * k + a], got, w, r);
                    }
                    res->n_weight_bad++;
                }
            }
        }
    if (res->n_route_bad || res->n_weight_bad) {
        res->out.grade = QV_FAIL;
        snprintf(res->out.reason, sizeof res->out.reason, "routing: %.170s", res->route_reason);
    }
    ref_moe_truth_clear(&t);
    ctx_free(&c);
    return QV_OK;
}

/* ---- the CPU model ----------------------------------------------------------------------- */

/* The fp32 routing of token t: selection into sel, weights into w. */
static void model_route(const qv_moe_problem *p, int64_t t, float *key, float *ex, int32_t *sel, float *w)
{
    const qv_moe_spec *s = p->s;
    int e = p->e, k = s->topk;
    float lmax = -INFINITY;
    for (int j = 0; j < e; j++) {
        float l = (float)logit_of(p, t, j);
        ex[j] = l;
        if (l > lmax) lmax = l;
    }
    if (is_softmax(s->route)) {
        float sum = 0.0f;
        for (int j = 0; j < e; j++) {
            key[j] = expf(ex[j] - lmax);
            sum += key[j];
        }
        for (int j = 0; j < e; j++) key[j] = key[j] / sum;
    } else if (is_sigmoid(s->route)) {
        for (int j = 0; j < e; j++) key[j] = 1.0f / (1.0f + expf(-ex[j]));
    } else {
        for (int j = 0; j < e; j++) key[j] = ex[j];
    }
    /* the selection scores: the keys, plus the bias in fp32 (the weights keep the keys) */
    float *sk = key + e;
    for (int j = 0; j < e; j++) sk[j] = s->sbias ? key[j] + p->score_bias[j] : key[j];
    if (s->groups) {
        /* each group's score, the gtopk best groups kept (the lower index first among equal
         * scores), the other groups' experts set to the gmask value */
        int ng = s->groups, per = e / ng;
        float *gs = ex + e;
        unsigned char *kept = (unsigned char *)(gs + ng);
        for (int g = 0; g < ng; g++) {
            float a = -INFINITY, b = -INFINITY;
            for (int j = g * per; j < (g + 1) * per; j++) {
                if (sk[j] > a) b = a, a = sk[j];
                else if (sk[j] > b) b = sk[j];
            }
            gs[g] = s->gscore == QV_GSCORE_MAX ? a : a + b;
            kept[g] = 0;
        }
        for (int c = 0; c < s->gtopk; c++) {
            int best = -1;
            for (int g = 0; g < ng; g++)
                if (!kept[g] && (best < 0 || gs[g] > gs[best])) best = g;
            kept[best] = 1;
        }
#ifdef QV_MUTANT_moe_group_mask_zero
        /* Mutant (class 31, sglang #3705): the groups not kept scored 0.0 where -Inf is
         * declared: with every kept score below 0, their experts are taken. */
        const float fill = 0.0f;
#else
        const float fill = s->gmask == QV_GMASK_ZERO ? 0.0f : -INFINITY;
#endif
#ifndef QV_MUTANT_moe_groups_ignored
        /* Mutant (class 31, vLLM #32058): the group limit lost, the top-k taken over
         * every group's experts. */
        for (int j = 0; j < e; j++)
            if (!kept[j / per]) sk[j] = fill;
#else
        (void)fill;
#endif
    }
    /* the k largest selection scores, the lower index first among equal ones; with
     * gmask=ninf only a kept group's expert */
    for (int c = 0; c < k; c++) {
        int best = -1;
        for (int j = 0; j < e; j++) {
            int taken = 0;
            for (int d = 0; d < c; d++) taken |= sel[d] == j;
            if (!taken && (best < 0 || sk[j] > sk[best])) best = j;
        }
        sel[c] = best;
    }
#ifdef QV_MUTANT_moe_topk_before_softmax
    /* Mutant (class 26, vLLM #43223): softmax-topk computed as top-k then softmax. */
    if (s->route == QV_ROUTE_TOPK_SOFTMAX || s->route == QV_ROUTE_SOFTMAX_TOPK) {
#else
    if (s->route == QV_ROUTE_TOPK_SOFTMAX) {
#endif
        float m = ex[sel[0]], sum = 0.0f;
        for (int c = 0; c < k; c++) {
            w[c] = expf(ex[sel[c]] - m);
            sum += w[c];
        }
        for (int c = 0; c < k; c++) w[c] = w[c] / sum;
    } else {
#ifdef QV_MUTANT_moe_bias_in_weights
        /* Mutant (class 31, vLLM #12002): the weights gathered from the biased selection
         * scores, where the bias is declared for the selection only. */
        for (int c = 0; c < k; c++) w[c] = key[e + sel[c]];
#else
        for (int c = 0; c < k; c++) w[c] = key[sel[c]];
#endif
#ifdef QV_MUTANT_moe_renorm_skipped
        /* Mutant (class 26): the renormalization of the top-k weights skipped. */
        if (0) {
#else
        if (is_renorm(s->route)) {
#endif
            float sum = 0.0f;
            for (int c = 0; c < k; c++) sum += w[c];
            sum += s->eps;
            for (int c = 0; c < k; c++) w[c] = w[c] / sum;
        }
    }
#if defined QV_MUTANT_moe_rsf_dropped
    /* Mutant (class 27, vLLM #43769): the routed scaling factor dropped. */
#elif defined QV_MUTANT_moe_rsf_twice
    /* Mutant (class 27, sglang #22513): the routed scaling factor applied twice. */
    if (s->rsf != 1.0f)
        for (int c = 0; c < k; c++) w[c] = w[c] * s->rsf * s->rsf;
#else
    if (s->rsf != 1.0f)
        for (int c = 0; c < k; c++) w[c] = w[c] * s->rsf;
#endif
}

/* sgate: the CPU model's gate of shared expert sx for token t: the dot
 * product in fp32 (fused multiply-adds in K order), rounded to the activation
 * format, its sigmoid in fp32, rounded to it again. */
static float model_gate(const qv_moe_problem *p, int64_t t, int sx)
{
    const qv_fmt af = p->s->expert->afmt;
    const uint16_t *x = (const uint16_t *)p->a + t * p->k, *g = (const uint16_t *)p->shared_gate + (int64_t)sx * p->k;
    float z = 0.0f;
    for (int64_t i = 0; i < p->k; i++) z = fmaf((float)qv_decode(af, x[i]), (float)qv_decode(af, g[i]), z);
    float za = (float)ref_round_to(af, z, 0);
    float sg = 1.0f / (1.0f + expf(-za));
    return (float)ref_round_to(af, sg, 0);
}

qv_status ref_moe_model_run(const qv_moe_problem *p, int block, void *out, int32_t *ids_out, float *w_out)
{
    QV_TRY(qv_moe_problem_check(p));
    const qv_moe_spec *s = p->s;
    const qv_variant *v = s->expert;
    qv_fmt of = v->ofmt;
    int sat = v->arith.out_sat == QV_SAT_FINITE;
    int k = s->topk, e = p->e, per = k + p->shared, nx = p->e_local + p->shared;
    int64_t n = p->n, T = p->t;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(T * k));
    float *wts = malloc(sizeof(float) * (size_t)(T * k));
    /* model_route's scratch: keys and selection scores (2e); logits, group scores and flags */
    size_t ng = (size_t)s->groups;
    float *key = malloc(sizeof(float) * 2 * (size_t)e), *ex = malloc(sizeof(float) * ((size_t)e + ng) + ng);
    float *accum = calloc((size_t)(T * n), sizeof(float));
    int *J = calloc((size_t)T, sizeof(int));
    if (!ids || !wts || !key || !ex || !accum || !J) {
        free(ids), free(wts), free(key), free(ex), free(accum), free(J);
        return qv_fail(QV_ERR_NOMEM, "out of memory in the routed CPU model");
    }
    for (int64_t t = 0; t < T; t++) model_route(p, t, key, ex, ids + t * k, wts + t * k);
    free(key);
    free(ex);
    qv_moe_sorted so;
    qv_status st = qv_moe_sort(p, ids, block, &so);
    /* each expert's model writes fp32 values before the output rounding */
    qv_variant vf = *v;
    vf.ofmt = QV_FMT_F32;
    vf.arith.out_sat = QV_SAT_NONE;
    for (int x = 0; x < nx && st == QV_OK; x++) {
        int64_t m = so.expert_start[x + 1] - so.expert_start[x];
        if (!m) continue;
        const int32_t *slot = so.slot + so.expert_start[x];
        int64_t *rows = malloc(sizeof(int64_t) * (size_t)m);
        float *prod = malloc(sizeof(float) * (size_t)(m * n));
        if (!rows || !prod) {
            free(rows), free(prod);
            st = qv_fail(QV_ERR_NOMEM, "out of memory in the routed CPU model");
            break;
        }
        /* a padding slot computes token 0's row, which is never written */
        for (int64_t i = 0; i < m; i++) rows[i] = slot[i] >= 0 ? slot[i] / per : 0;
        qv_problem sub;
        st = qv_moe_subproblem(p, x, rows, m, &sub);
        if (st == QV_OK && s->rw == QV_RW_IN) {
            /* rw=in: a routed slot's input times its fp32 weight rounded to the
             * activation format (Llama 4's x * w.to(x.dtype)) */
            double *scale = malloc(sizeof(double) * (size_t)m);
            if (!scale) st = qv_fail(QV_ERR_NOMEM, "out of memory in the routed CPU model");
            for (int64_t i = 0; scale && i < m; i++) {
                int c = slot[i] >= 0 ? slot[i] % per : k;
                scale[i] = c < k ? ref_round_to(v->afmt, wts[(slot[i] / per) * k + c], 0) : NAN;
#ifdef QV_MUTANT_moe_weight_in_as_out
                scale[i] = NAN; /* mutant: the weight applied to the product instead (below) */
#endif
            }
            if (scale) scale_input(&sub, scale);
            free(scale);
        }
#ifdef QV_MUTANT_moe_prev_block_scale
        /* Mutant (class 23, CUTLASS #3596): the block scales of the previous group
         * (expert) reused for this one. */
        if (st == QV_OK && x > 0 && x < p->e_local) sub.scales = p->w[x - 1].scales;
#endif
        if (st == QV_OK) {
            sub.v = &vf;
            st = ref_model_run(&sub, prod);
            qv_moe_subproblem_destroy(&sub);
        }
        for (int64_t i = 0; i < m && st == QV_OK; i++) {
#ifdef QV_MUTANT_moe_padding_written
            /* Mutant (class 29, llama.cpp #17089): the fix-up of a partial block writes
             * its padding rows, as token 0's first choice. */
            int32_t sl = slot[i] < 0 ? 0 : slot[i];
#else
            if (slot[i] < 0) continue;
            int32_t sl = slot[i];
#endif
            int64_t t = sl / per;
            int c = sl % per, routed = c < k;
            /* a shared expert's gate weighs it as a routed weight would */
            const int gated = !routed && s->sgate && p->shared_gate;
            int weighed = routed || gated;
            float w = routed ? wts[t * k + c] : gated ? model_gate(p, t, c - k) : 1.0f;
#ifdef QV_MUTANT_moe_shared_gate_dropped
            /* Mutant (class 33, lmdeploy #3491, vllm-ascend #15953): the shared
             * expert's sigmoid gate never applied. */
            if (!routed) w = 1.0f;
#endif
            float *a = accum + t * n;
            for (int64_t j = 0; j < n; j++) {
                float pv = prod[i * n + j], q;
                if (s->rw == QV_RW_IN) {
#if defined QV_MUTANT_moe_weight_in_twice || defined QV_MUTANT_moe_weight_in_as_out
                    /* Mutants (class 32): the router weight applied to the product
                     * as well as to the input (vLLM #43694), or to the product
                     * instead of the input (llm-compressor #1907). */
                    q = routed ? w * pv : pv;
#else
                    q = pv; /* the weight is in the expert's input */
#endif
                } else if (s->rw == QV_RW_ACC) {
#ifdef QV_MUTANT_moe_weight_after_cast
                    /* Mutant (class 25, vLLM #32002): the router weight applied after the
                     * product is rounded to the output format. */
                    q = weighed ? (float)ref_round_to(of, ref_round_to(of, pv, sat) * w, sat) : pv;
#else
                    q = weighed ? w * pv : pv;
#endif
                } else {
                    double pr = ref_round_to(of, pv, sat);
                    q = weighed ? (float)ref_round_to(of, ref_round_to(of, w, sat) * pr, sat) : (float)pr;
                }
                if (s->sum == QV_MSUM_F32) {
                    a[j] = J[t] ? a[j] + q : q;
                } else {
                    double qo = ref_round_to(of, q, sat);
                    a[j] = (float)(J[t] ? ref_round_sum(of, a[j], qo, sat) : qo);
                }
            }
            J[t]++;
        }
        free(rows);
        free(prod);
    }
    qv_moe_sorted_destroy(&so);
    if (st == QV_OK) {
        size_t es = qv_fmt_storage_bytes(of);
        for (int64_t i = 0; i < T * n; i++) {
            uint32_t code = qv_encode(of, J[i / n] ? (double)accum[i] : 0.0, v->arith.out_sat);
            memcpy((char *)out + (size_t)i * es, &code, es);
        }
        if (ids_out) memcpy(ids_out, ids, sizeof(int32_t) * (size_t)(T * k));
        if (w_out) memcpy(w_out, wts, sizeof(float) * (size_t)(T * k));
    }
    free(ids), free(wts), free(accum), free(J);
    return st;
}
