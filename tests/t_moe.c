/* t_moe.c: routed GEMMs (moe.h, docs/moe.md).
 *   - the routing keys' grammar: canonical forms, the expert part a spec or a
 *     row, every refusal naming its key;
 *   - the token sort: every local pair once, segments padded with -1 to the
 *     block, non-local choices dropped, shared experts over every token;
 *   - exact weights: dyadic cases known by hand, random logits against a
 *     softmax computed here with MPFR at 256 bits;
 *   - the truth against an independent MPFR sum of weights times expert
 *     products computed from problem.h's accessors;
 *   - the CPU model passes every logits case, route, combine and expert spec,
 *     and random routed specs drawing every routing key at once;
 *   - the split-K witness: each expert's product exactly 1, an output of K
 *     parts reduced in the 16-bit format fails, the int32 rows refuse it;
 *   - the bug classes of docs/design.md §6 rows 25-28 fail: the router weight applied
 *     after the output cast, another route order, the routed scaling factor
 *     dropped or applied twice, a non-local or shared expert dropped or
 *     misaligned; a tie broken against tie=low, inadmissible ids, weights off
 *     by 1e-3, unwritten rows; and a near tie decided either way passes;
 *   - rows 32 and 33 by hand: the router weight on the expert's input (rw=in)
 *     told from the weight on the product and from both, its ambiguous bf16
 *     rounding and its refusals; the shared expert's sigmoid gate (sgate)
 *     dropped or left unrounded. Expected values are computed here from the
 *     inputs, never from the model.
 * Seeds: QVET_SEED (default 1). */
#include <check.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/moe.h"
#include "qvet/spec.h"
#include "support/cases.h"
#include "support/rand.h"
#include "support/suite.h"

static uint64_t mix(uint64_t a, uint64_t b) { return case_mix(a, b, 0x4D6F45ull); }

static qv_moe_spec *moe_spec(const char *text)
{
    qv_moe_spec *s = malloc(sizeof *s);
    ck_assert_ptr_nonnull(s);
    qv_status st = qv_moe_spec_parse(text, s);
    ck_assert_msg(st == QV_OK, "routed spec '%s' refused: %s", text, qv_errmsg());
    return s;
}

/* A filled problem; asserts success. */
static void make(qv_moe_problem *p, const qv_moe_spec *s, int64_t t, int64_t n, int64_t k, int e, int e_local,
                 int shared, qv_moe_logits lc, qv_probe_kind kind, uint64_t seed)
{
    qv_status st = qv_moe_problem_create(p, s, t, n, k, e, e_local, shared);
    ck_assert_msg(st == QV_OK, "create: %s", qv_errmsg());
    st = ref_moe_fill(p, lc, kind, QV_REGIME_LOGUNIFORM, seed);
    ck_assert_msg(st == QV_OK, "fill %s: %s", qv_moe_logits_name(lc), qv_errmsg());
}

static void *out_alloc(const qv_moe_problem *p)
{
    void *o = malloc((size_t)(p->t * p->n) * qv_fmt_storage_bytes(p->s->expert->ofmt));
    ck_assert_ptr_nonnull(o);
    return o;
}

/* ---- grammar ------------------------------------------------------------------------ */

static const struct {
    const char *in, *canon;
} canon[] = {
    {"w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2", "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2"},
    {"topk=2,route=softmax-topk-renorm,ws=f16/g128,w=u4b8", "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2"},
    {"w=u4b8,ws=f16/g128,route=topk-softmax,topk=8,tie=any,rw=acc,sum=f32,exp=2,logits=f32,rsf=1",
     "w=u4b8,ws=f16/g128,route=topk-softmax,topk=8"},
    {"w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p128,out=bf16,route=sigmoid-topk-renorm,topk=8,rsf=2.5",
     "w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p128,out=bf16,route=sigmoid-topk-renorm,topk=8,rsf=2.5"},
    {"w=u4b8,ws=f16/c,route=softmax-topk,topk=1,tie=low,rw=out,sum=out,exp=4,logits=bf16",
     "w=u4b8,ws=f16/c,route=softmax-topk,topk=1,tie=low,rw=out,sum=out,exp=4,logits=bf16"},
    /* the group limit, the selection bias and eps: defaults dropped, in the canonical order */
    {"w=u4b8,ws=bf16/c,a=bf16,route=sigmoid-topk-renorm,topk=8,sbias=f32,gtopk=4,groups=8,rsf=2.5",
     "w=u4b8,ws=bf16/c,a=bf16,route=sigmoid-topk-renorm,topk=8,rsf=2.5,groups=8,gtopk=4,sbias=f32"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=6,gmask=zero,groups=8,gtopk=3,gscore=max",
     "w=u4b8,ws=f16/g128,route=softmax-topk,topk=6,groups=8,gtopk=3,gscore=max,gmask=zero"},
    {"w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,eps=1e-20,gscore=top2,groups=2,gtopk=1,gmask=ninf",
     "w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,groups=2,gtopk=1,eps=1e-20"},
    /* 2.827 is not an f32: its f32 value is written back shortest */
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,rsf=2.827", "w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,rsf=2.827"},
    /* the weight on the expert's input */
    {"rw=in,w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk,topk=1,sum=out",
     "w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk,topk=1,rw=in,sum=out"},
    /* the shared experts' gate: last */
    {"sgate=sigmoid,w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=10,rw=out,sum=out",
     "w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=10,rw=out,sum=out,sgate=sigmoid"},
};

START_TEST(canonical_forms)
{
    qv_moe_spec *s = moe_spec(canon[_i].in);
    ck_assert_str_eq(s->text, canon[_i].canon);
    qv_moe_spec *again = moe_spec(s->text);
    ck_assert_str_eq(again->text, s->text);
    ck_assert_ptr_eq(again->expert, s->expert); /* interned */
    ck_assert(qv_moe_is_spec(canon[_i].in));
    free(s);
    free(again);
}
END_TEST

START_TEST(row_as_expert)
{
    qv_moe_spec *s = moe_spec("marlin-w4a16-g128-f16,route=topk-softmax,topk=8");
    ck_assert_ptr_eq(s->expert, qv_variant_find("marlin-w4a16-g128-f16"));
    ck_assert_int_eq(s->topk, 8);
    ck_assert_int_eq(s->route, QV_ROUTE_TOPK_SOFTMAX);
    ck_assert(!qv_moe_is_spec("w=u4b8,ws=f16/g128"));
    ck_assert(!qv_moe_is_spec("w=u4b8,xroute=1"));
    free(s);
}
END_TEST

static const struct {
    const char *in, *needle;
} refused[] = {
    {"w=u4b8,ws=f16/g128,topk=2", "route="},
    {"w=u4b8,ws=f16/g128,route=softmax-topk", "topk="},
    {"route=softmax-topk,topk=2", "expert spec"},
    {"w=u4b8,ws=f16/g128,route=softmax,topk=2", "route=softmax"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=0", "topk=0"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,rsf=-1", "rsf=-1"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,rsf=1e39", "rsf=1e39"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,rsf=abc", "rsf=abc"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,tie=high", "tie=high"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,rw=f16", "rw=f16"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,sum=bf16", "sum=bf16"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,exp=-1", "exp=-1"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,logits=i8", "logits=i8"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,topk=3", "twice"},
    {"w=i8,a=i8,acc=i32,route=softmax-topk,topk=2", "i32"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,nokey=1", "nokey"},
    {"no-such-row,route=softmax-topk,topk=2", "no-such-row"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,gtopk=2", "need groups="},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,gmask=zero", "need groups="},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,groups=4", "needs gtopk="},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,groups=4,gtopk=5", "more than the 4 groups"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,groups=0,gtopk=1", "groups=0"},
    {"w=u4b8,ws=f16/g128,route=topk-softmax,topk=2,groups=4,gtopk=2", "topk-softmax"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,groups=4,gtopk=2,gscore=sum", "gscore=sum"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,groups=4,gtopk=2,gmask=inf", "gmask=inf"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2,sbias=f32", "sigmoid routes"},
    {"w=u4b8,ws=f16/g128,route=sigmoid-topk,topk=2,sbias=bf16", "sbias=bf16"},
    {"w=u4b8,ws=f16/g128,route=sigmoid-topk,topk=2,eps=1e-20", "-renorm"},
    {"w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,eps=-1", "eps=-1"},
    {"w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,eps=1e-20,eps=0", "twice"},
    {"w=e4m3,ws=f32/c,a=e4m3,as=f32/tok,acc=f8p128,out=bf16,route=sigmoid-topk,topk=1,rw=in", "rw=in"},
    {"w=i8,a=i8,acc=i32,out=f32,route=sigmoid-topk,topk=1,rw=in", "f16 or bf16 activations"},
    {"w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,sgate=tanh", "sgate=tanh"},
    {"w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk,topk=1,rw=in,sgate=sigmoid", "sgate=sigmoid with rw=in"},
    {"w=e4m3,ws=f32/c,a=e4m3,as=f32/tok,acc=f8p128,out=bf16,route=softmax-topk,topk=2,sgate=sigmoid",
     "f16 or bf16 activations"},
};

START_TEST(refusals)
{
    qv_moe_spec s;
    qv_status st = qv_moe_spec_parse(refused[_i].in, &s);
    ck_assert_msg(st == QV_ERR_USAGE, "'%s' accepted", refused[_i].in);
    ck_assert_msg(strstr(qv_errmsg(), refused[_i].needle) != NULL, "'%s': message '%s' lacks '%s'", refused[_i].in,
                  qv_errmsg(), refused[_i].needle);
}
END_TEST

/* ---- the token sort ------------------------------------------------------------------ */

START_TEST(sort_invariants)
{
    uint64_t seed = mix(case_seed(1), 100 + (uint64_t)_i);
    qv_moe_spec *s = moe_spec("w=u4b8,ws=f16/g128,route=softmax-topk,topk=3");
    int e = 9, e_local = _i % 2 ? 5 : 9, shared = _i % 3;
    int block = 1 + _i % 5 * 4;
    qv_moe_problem p;
    make(&p, s, 23, 64, 128, e, e_local, shared, QV_LOGITS_RANDOM, QV_PROBE_RANDOM, seed);
    int32_t ids[23 * 3];
    for (int t = 0; t < 23; t++)
        for (int c = 0; c < 3; c++) ids[t * 3 + c] = (t * 7 + c * 5 + _i) % e; /* distinct per token: 5 and 9 coprime */
    qv_moe_sorted so;
    ck_assert_int_eq(qv_moe_sort(&p, ids, block, &so), QV_OK);
    int nx = e_local + shared, per = 3 + shared;
    ck_assert_int_eq(so.n_slots % block, 0);
    ck_assert_int_eq(so.expert_start[0], 0);
    ck_assert_int_eq(so.expert_start[nx], so.n_slots);
    int seen[23 * 6] = {0};
    for (int x = 0; x < nx; x++) {
        int64_t a = so.expert_start[x], b = so.expert_start[x + 1];
        ck_assert_int_eq(a % block, 0);
        ck_assert_int_eq((b - a) % block, 0);
        int64_t real = 0;
        for (int64_t i = a; i < b; i++) {
            ck_assert_int_eq(so.block_expert[i / block], x);
            int32_t sl = so.slot[i];
            if (sl < 0) {
                /* padding only at a segment's end */
                for (int64_t j = i; j < b; j++) ck_assert_int_eq(so.slot[j], -1);
                break;
            }
            real++;
            int t = sl / per, c = sl % per;
            int want = c < 3 ? p.expert_map[ids[t * 3 + c]] : e_local + c - 3;
            ck_assert_int_eq(want, x);
            seen[sl]++;
        }
        ck_assert_int_lt(b - a - real, block); /* less than one block of padding */
    }
    for (int t = 0; t < 23; t++)
        for (int c = 0; c < per; c++) {
            int local = c < 3 ? p.expert_map[ids[t * 3 + c]] >= 0 : 1;
            ck_assert_int_eq(seen[t * per + c], local);
        }
    /* refusals */
    qv_moe_sorted bad;
    int32_t dup[23 * 3];
    memcpy(dup, ids, sizeof dup);
    dup[5] = dup[4];
    ck_assert_int_eq(qv_moe_sort(&p, dup, block, &bad), QV_ERR_RANGE);
    dup[5] = e;
    ck_assert_int_eq(qv_moe_sort(&p, dup, block, &bad), QV_ERR_RANGE);
    qv_moe_sorted_destroy(&so);
    qv_moe_problem_destroy(&p);
    free(s);
}
END_TEST

/* ---- weights --------------------------------------------------------------------------- */

/* All logits equal: every route's weights are dyadic, known by hand. */
START_TEST(weights_by_hand)
{
    static const struct {
        const char *route;
        double w;
    } r[] = {
        {"softmax-topk", 1.0 / 8},      {"softmax-topk-renorm", 1.0 / 2}, {"topk-softmax", 1.0 / 2},
        {"sigmoid-topk", 1.0 / 2},      {"sigmoid-topk-renorm", 1.0 / 2},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        for (int with_rsf = 0; with_rsf < 2; with_rsf++) {
            char text[160];
            snprintf(text, sizeof text, "w=u4b8,ws=f16/g128,route=%s,topk=2,tie=low%s", r[i].route,
                     with_rsf ? ",rsf=2.5" : "");
            qv_moe_spec *s = moe_spec(text);
            qv_moe_problem p;
            ck_assert_int_eq(qv_moe_problem_create(&p, s, 3, 64, 128, 8, 8, 0), QV_OK);
            /* logits all 0 (created zeroed); weights and activations zero too */
            qv_moe_truth t;
            ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
            for (int a = 0; a < 3 * 2; a++) {
                ck_assert_int_eq(t.ids[a], a % 2); /* tie=low: experts 0 and 1 */
                ck_assert_msg(t.weight[a] == r[i].w * (with_rsf ? 2.5 : 1.0), "%s: weight %.17g", text, t.weight[a]);
            }
            ck_assert_int_eq(t.n_ambiguous, 0); /* tie=low decides equal logits */
            ref_moe_truth_clear(&t);
            qv_moe_problem_destroy(&p);
            free(s);
        }
}
END_TEST

/* Softmax weights against MPFR at 256 bits, computed here from the definition. */
START_TEST(weights_against_mpfr)
{
    static const char *routes[] = {"softmax-topk", "softmax-topk-renorm", "topk-softmax", "sigmoid-topk",
                                   "sigmoid-topk-renorm"};
    const char *route = routes[_i % 5];
    int wide = _i >= 5;
    char text[160];
    snprintf(text, sizeof text, "w=u4b8,ws=f16/g128,route=%s,topk=4,rsf=1.5", route);
    qv_moe_spec *s = moe_spec(text);
    qv_moe_problem p;
    make(&p, s, 17, 64, 128, 16, 16, 0, wide ? QV_LOGITS_WIDE : QV_LOGITS_RANDOM, QV_PROBE_RANDOM,
         mix(case_seed(1), 200 + (uint64_t)_i));
    qv_moe_truth t;
    ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
    mpfr_t x, sum, wsum;
    mpfr_inits2(256, x, sum, wsum, (mpfr_ptr)0);
    for (int tok = 0; tok < 17; tok++) {
        float *l = (float *)p.logits + tok * 16;
        /* the top 4 by logit, independently (no ties in random f32 draws here) */
        int top[4];
        for (int c = 0; c < 4; c++) {
            int best = -1;
            for (int j = 0; j < 16; j++) {
                int used = 0;
                for (int d = 0; d < c; d++) used |= top[d] == j;
                if (!used && (best < 0 || l[j] > l[best])) best = j;
            }
            top[c] = best;
        }
        int sig = strncmp(route, "sigmoid", 7) == 0;
        mpfr_set_zero(sum, 1);
        mpfr_set_zero(wsum, 1);
        for (int j = 0; j < 16; j++) {
            int in = 0;
            for (int c = 0; c < 4; c++) in |= top[c] == j;
            mpfr_set_d(x, sig ? -(double)l[j] : (double)l[j], MPFR_RNDN);
            mpfr_exp(x, x, MPFR_RNDN);
            if (sig) {
                mpfr_add_ui(x, x, 1, MPFR_RNDN);
                mpfr_ui_div(x, 1, x, MPFR_RNDN);
            }
            mpfr_add(sum, sum, x, MPFR_RNDN);
            if (in) mpfr_add(wsum, wsum, x, MPFR_RNDN);
        }
        for (int c = 0; c < 4; c++) {
            ck_assert_int_eq(t.ids[tok * 4 + c], top[c]);
            mpfr_set_d(x, sig ? -(double)l[top[c]] : (double)l[top[c]], MPFR_RNDN);
            mpfr_exp(x, x, MPFR_RNDN);
            if (sig) {
                mpfr_add_ui(x, x, 1, MPFR_RNDN);
                mpfr_ui_div(x, 1, x, MPFR_RNDN);
            }
            if (!strcmp(route, "softmax-topk")) mpfr_div(x, x, sum, MPFR_RNDN);
            else if (strcmp(route, "sigmoid-topk")) mpfr_div(x, x, wsum, MPFR_RNDN);
            mpfr_mul_d(x, x, 1.5, MPFR_RNDN);
            double want = mpfr_get_d(x, MPFR_RNDN), got = t.weight[tok * 4 + c];
            ck_assert_msg(fabs(got - want) <= 0x1p-51 * fabs(want), "%s token %d choice %d: %.17g, MPFR %.17g", route,
                          tok, c, got, want);
        }
    }
    mpfr_clears(x, sum, wsum, (mpfr_ptr)0);
    ck_assert(t.weight_rel > 0 && t.weight_rel < 1e-4);
    ref_moe_truth_clear(&t);
    qv_moe_problem_destroy(&p);
    free(s);
}
END_TEST

/* ---- the truth, independently --------------------------------------------------------- */

/* y[t][j] = sum of weight * (exact product of the expert) + shared, the
 * product from problem.h's accessors (w = RN_f16(q * s) for this spec) in
 * MPFR, the weights from the truth (checked above). */
START_TEST(truth_equals_independent)
{
    qv_moe_spec *s = moe_spec(_i ? "w=u4b8,ws=f16/g32,route=softmax-topk,topk=2,rsf=2.5"
                                 : "w=u4b8,ws=f16/g32,route=topk-softmax,topk=3");
    int e = 6, e_local = _i ? 4 : 6, shared = _i ? 1 : 0;
    int64_t T = 9, n = 64, k = 64;
    qv_moe_problem p;
    make(&p, s, T, n, k, e, e_local, shared, QV_LOGITS_RANDOM, QV_PROBE_EXACT, mix(case_seed(1), 300 + (uint64_t)_i));
    qv_moe_truth t;
    ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
    mpfr_t acc, term;
    mpfr_inits2(300, acc, term, (mpfr_ptr)0);
    int topk = s->topk;
    for (int64_t tok = 0; tok < T; tok++)
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_zero(acc, 1);
            for (int c = 0; c < topk + shared; c++) {
                int x = c < topk ? p.expert_map[t.ids[tok * topk + c]] : e_local + c - topk;
                if (x < 0) continue;
                qv_problem *w = &p.w[x];
                w->a = p.a; /* the accessors read a row of the routed problem's activations */
                w->m = T;
                mpfr_set_zero(term, 1);
                for (int64_t kk = 0; kk < k; kk++) {
                    double wv = qv_decode(QV_FMT_F16, qv_encode(QV_FMT_F16, qv_problem_wq(w, kk, j) *
                                                                               qv_problem_scale(w, kk, j),
                                                                QV_SAT_NONE));
                    mpfr_t prod;
                    mpfr_init2(prod, 120);
                    mpfr_set_d(prod, qv_problem_a(w, tok, kk), MPFR_RNDN);
                    mpfr_mul_d(prod, prod, wv, MPFR_RNDN);
                    mpfr_add(term, term, prod, MPFR_RNDN);
                    mpfr_clear(prod);
                }
                w->a = NULL;
                w->m = 1;
                if (c < topk) mpfr_mul_d(term, term, t.weight[tok * topk + c], MPFR_RNDN);
                mpfr_add(acc, acc, term, MPFR_RNDN);
            }
            double want = mpfr_get_d(acc, MPFR_RNDN), got = t.out.y[tok * n + j];
            ck_assert_msg(fabs(got - want) <= 0x1p-48 * fabs(want) + 1e-300, "(%lld, %lld): truth %.17g, MPFR %.17g",
                          (long long)tok, (long long)j, got, want);
            ck_assert(t.out.bound[tok * n + j] >= 0 && isfinite(t.out.bound[tok * n + j]));
        }
    mpfr_clears(acc, term, (mpfr_ptr)0);
    ref_moe_truth_clear(&t);
    qv_moe_problem_destroy(&p);
    free(s);
}
END_TEST

/* ---- group-limited, biased routing --------------------------------------------------- */

/* sigma(l) in double; the test's logits are f32 values. */
static double sig(double l) { return 1.0 / (1.0 + exp(-l)); }

/* Sets token 0's logit of expert j so that sigma(l) + bias is near `key`. */
static void set_key(qv_moe_problem *p, int j, double key)
{
    double sg = key - (double)p->score_bias[j];
    ((float *)p->logits)[j] = (float)log(sg / (1.0 - sg));
}

/* The routing verdict of ids (one token) on the zero problem: n_route_bad. */
static int64_t route_bad(const qv_moe_problem *p, int32_t a, int32_t b, char *why, size_t len)
{
    int32_t ids[2] = {a, b};
    void *out = calloc((size_t)p->n, 2); /* +0 in bf16 and f16: every expert's product is 0 */
    ck_assert_ptr_nonnull(out);
    qv_moe_result r;
    ck_assert_msg(ref_moe_verify(p, out, ids, NULL, &r) == QV_OK, "%s", qv_errmsg());
    if (why) snprintf(why, len, "%s", r.route_reason);
    free(out);
    return r.n_route_bad;
}

/* One token over 8 experts in 4 groups of 2, 2 groups kept, top-2, whose
 * selection scores sigma(l) + b are set by hand:
 *     group 0: 0.9, 0.0 (logit 0, bias -1/2: exactly 0)   top-2 sum 0.9
 *     group 1: 0.6, 0.5                                    1.1
 *     group 2: 0.55, 0.54                                  1.09
 *     group 3: 0.1, 0.1 (equal logits)                     0.2
 * The top-2 sum keeps groups 1 and 2, so the top-2 is {2, 4}, not the
 * plain top-2 {0, 2}; the largest score keeps groups 0 and 1, so {0, 2}.
 * The weights are the unbiased sigmoids renormalized. */
START_TEST(groups_by_hand)
{
    static const char *const specs[] = {
        "w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,groups=4,gtopk=2,sbias=f32",
        "w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,groups=4,gtopk=2,gscore=max,sbias=f32",
    };
    static const double key[8] = {0.9, 0.0, 0.6, 0.5, 0.55, 0.54, 0.1, 0.1};
    for (int v = 0; v < 2; v++) {
        qv_moe_spec *s = moe_spec(specs[v]);
        qv_moe_problem p;
        ck_assert_int_eq(qv_moe_problem_create(&p, s, 1, 64, 128, 8, 8, 0), QV_OK);
        p.score_bias[1] = -0.5f;
        p.score_bias[4] = 0.25f; /* a bias on a kept expert: its weight keeps sigma(l) */
        for (int j = 0; j < 8; j++) set_key(&p, j, key[j]);
        ((float *)p.logits)[1] = 0.0f;
        ((float *)p.logits)[7] = ((float *)p.logits)[6];
        qv_moe_truth t;
        ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
        int32_t a = v == 0 ? 2 : 0, b = v == 0 ? 4 : 2;
        ck_assert_msg(t.ids[0] == a && t.ids[1] == b, "%s: took %d, %d", specs[v], t.ids[0], t.ids[1]);
        ck_assert_int_eq(t.n_ambiguous, 0);
        const float *l = p.logits;
        double sa = sig(l[a]), sb = sig(l[b]);
        ck_assert_msg(fabs(t.weight[0] - sa / (sa + sb)) <= 1e-15 && fabs(t.weight[1] - sb / (sa + sb)) <= 1e-15,
                      "%s: weights %.17g %.17g", specs[v], t.weight[0], t.weight[1]);
        ref_moe_truth_clear(&t);
        char why[192];
        ck_assert_int_eq(route_bad(&p, a, b, NULL, 0), 0);
        ck_assert_int_eq(route_bad(&p, b, a, NULL, 0), 0); /* any order */
        if (v == 0) {
            /* the plain top-2 takes expert 0, whose group is not kept */
            ck_assert_int_eq(route_bad(&p, 0, 2, why, sizeof why), 1);
            ck_assert_msg(strstr(why, "expert 0 of group 0") != NULL, "%s", why);
            /* within the kept groups, 3 over 4 */
            ck_assert_int_eq(route_bad(&p, 2, 3, why, sizeof why), 1);
            ck_assert_msg(strstr(why, "over expert 4") != NULL, "%s", why);
        } else {
            ck_assert_int_eq(route_bad(&p, 2, 4, NULL, 0), 1);
        }
        qv_moe_problem_destroy(&p);
        free(s);
    }
}
END_TEST

/* Every selection score below 0 (bias -1): gmask=zero takes the experts of
 * the groups not kept (their 0.0 beats every kept score), gmask=ninf never
 * does. With tie=low the zero-scored ones go by index; with tie=any any two
 * of them, and the token is ambiguous. */
START_TEST(mask_zero_or_ninf)
{
    static const double key[8] = {-0.1, -0.9, -0.4, -0.5, -0.45, -0.46, -0.8, -0.8};
    qv_moe_spec *ninf = moe_spec("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,groups=4,gtopk=2,sbias=f32");
    qv_moe_spec *zlow = moe_spec(
        "w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,tie=low,groups=4,gtopk=2,gmask=zero,sbias=f32");
    qv_moe_spec *zany =
        moe_spec("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,groups=4,gtopk=2,gmask=zero,sbias=f32");
    qv_moe_problem p;
    ck_assert_int_eq(qv_moe_problem_create(&p, ninf, 1, 64, 128, 8, 8, 0), QV_OK);
    for (int j = 0; j < 8; j++) p.score_bias[j] = -1.0f;
    for (int j = 0; j < 8; j++) set_key(&p, j, key[j]);
    ((float *)p.logits)[7] = ((float *)p.logits)[6];
    /* group sums: -1.0, -0.9, -0.91, -1.6: groups 1 and 2 kept */
    qv_moe_truth t;
    ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(t.ids[0], 2);
    ck_assert_int_eq(t.ids[1], 4);
    ref_moe_truth_clear(&t);
    ck_assert_int_eq(route_bad(&p, 0, 1, NULL, 0), 1);
    p.s = zlow;
    ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(t.ids[0], 0);
    ck_assert_int_eq(t.ids[1], 1);
    const float *l = p.logits;
    ck_assert(fabs(t.weight[0] - sig(l[0]) / (sig(l[0]) + sig(l[1]))) <= 1e-15);
    ref_moe_truth_clear(&t);
    ck_assert_int_eq(route_bad(&p, 2, 4, NULL, 0), 1);
    ck_assert_int_eq(route_bad(&p, 6, 7, NULL, 0), 1); /* tie=low: 0 and 1 first */
    p.s = zany;
    ck_assert_int_eq(route_bad(&p, 6, 7, NULL, 0), 0);
    ck_assert_int_eq(route_bad(&p, 1, 6, NULL, 0), 0);
    ck_assert_int_eq(route_bad(&p, 2, 6, NULL, 0), 1);
    ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(t.n_ambiguous, 1);
    ref_moe_truth_clear(&t);
    p.s = ninf;
    qv_moe_problem_destroy(&p);
    free(ninf), free(zlow), free(zany);
}
END_TEST

/* Two groups with equal (logit, bias) pairs tie exactly at the one group
 * kept: tie=low keeps the lower group, tie=any either. */
START_TEST(group_tie)
{
    qv_moe_spec *low =
        moe_spec("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,tie=low,groups=4,gtopk=1,sbias=f32");
    qv_moe_spec *any = moe_spec("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,groups=4,gtopk=1,sbias=f32");
    qv_moe_problem p;
    ck_assert_int_eq(qv_moe_problem_create(&p, low, 1, 64, 128, 8, 8, 0), QV_OK);
    float *l = p.logits;
    const float v[8] = {-2.0f, -3.0f, 1.5f, 0.25f, 1.5f, 0.25f, -1.0f, 1.0f};
    memcpy(l, v, sizeof v);
    p.score_bias[0] = 0.5f; /* group 0: sigma(-2) + 0.5 + sigma(-3) = 0.67; groups 1 and 2: 1.38 */
    qv_moe_truth t;
    ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(t.ids[0], 2);
    ck_assert_int_eq(t.ids[1], 3);
    ck_assert_int_eq(t.n_ambiguous, 0);
    ref_moe_truth_clear(&t);
    ck_assert_int_eq(route_bad(&p, 4, 5, NULL, 0), 1);
    p.s = any;
    ck_assert_int_eq(route_bad(&p, 4, 5, NULL, 0), 0);
    ck_assert_int_eq(route_bad(&p, 2, 5, NULL, 0), 1); /* one group only */
    ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
    ck_assert_int_eq(t.n_ambiguous, 1);
    ref_moe_truth_clear(&t);
    p.s = low;
    qv_moe_problem_destroy(&p);
    free(low), free(any);
}
END_TEST

/* eps joins the renormalizing sum: logits 0 give sigmoids of 1/2, so each
 * of two weights is (1/2) / (1 + 1/2) = 1/3 with eps = 1/2; a softmax over 4
 * equal logits gives 1/4 each, so (1/4) / (1/2 + 1/2) = 1/4 with eps = 1/2. */
START_TEST(eps_by_hand)
{
    qv_moe_spec *sg = moe_spec("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,tie=low,eps=0.5");
    qv_moe_spec *sm = moe_spec("w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2,tie=low,eps=0.5");
    const qv_moe_spec *specs[2] = {sg, sm};
    const double want[2] = {1.0 / 3.0, 1.0 / 4.0};
    for (int i = 0; i < 2; i++) {
        qv_moe_problem p;
        ck_assert_int_eq(qv_moe_problem_create(&p, specs[i], 1, 64, 128, 4, 4, 0), QV_OK);
        qv_moe_truth t;
        ck_assert_msg(ref_moe_truth(&p, NULL, &t) == QV_OK, "%s", qv_errmsg());
        ck_assert_msg(t.weight[0] == want[i] && t.weight[1] == want[i], "%s: %.17g %.17g", specs[i]->text,
                      t.weight[0], t.weight[1]);
        ref_moe_truth_clear(&t);
        /* the model's fp32 weights within the certified bound of them */
        float w[2];
        int32_t ids[2];
        void *out = calloc(64, 2);
        ck_assert_int_eq(ref_moe_model_run(&p, 16, out, ids, w), QV_OK);
        ck_assert_msg(fabs(w[0] - want[i]) <= 0x1p-22, "%s: model weight %.9g", specs[i]->text, (double)w[0]);
        qv_moe_result r;
        ck_assert_int_eq(ref_moe_verify(&p, out, ids, w, &r), QV_OK);
        ck_assert_int_eq(r.n_weight_bad, 0);
        /* the weights without eps (1/2 each) are out of bound */
        w[0] = w[1] = 0.5f;
        ck_assert_int_eq(ref_moe_verify(&p, out, ids, w, &r), QV_OK);
        ck_assert_int_eq(r.n_weight_bad, 2);
        free(out);
        qv_moe_problem_destroy(&p);
    }
    free(sg), free(sm);
}
END_TEST

/* ---- the weight on the expert's input (rw=in, row 32) -------------------------------------- */

/* One token, two experts (and `shared` shared ones), every activation 1 and
 * every weight 1 (u4b8 code 9, channel scale 1), K = 128: each expert's exact product is 128 in every
 * column, and the f32 output holds every candidate exactly. Expert 0 takes the
 * token with w = sigma(l0) = 0.75 + 0.45 * 2^-8, whose bf16 rounding is 0.75:
 * the weight on the input gives 0.75 * 128 = 96, on the product RN_f32(128 w),
 * on both w * 96. */
static const char *const in_spec = "w=u4b8,ws=bf16/c,a=bf16,out=f32,route=sigmoid-topk,topk=1,rw=in";
static const char *const acc_spec = "w=u4b8,ws=bf16/c,a=bf16,out=f32,route=sigmoid-topk,topk=1";

static void ones_problem(qv_moe_problem *p, const qv_moe_spec *s, float l0, float l1, int shared)
{
    const int64_t n = 64, k = 128;
    ck_assert_int_eq(qv_moe_problem_create(p, s, 1, n, k, 2, 2, shared), QV_OK);
    ((float *)p->logits)[0] = l0;
    ((float *)p->logits)[1] = l1;
    for (int64_t i = 0; i < k; i++) ((uint16_t *)p->a)[i] = 0x3F80; /* bf16 1.0 */
    for (int x = 0; x < 2 + shared; x++) {
        memset(p->w[x].q, 9, (size_t)(k * n)); /* u4b8: 9 - 8 = 1 */
        for (int64_t j = 0; j < n; j++) ((uint16_t *)p->w[x].scales)[j] = 0x3F80;
    }
}

/* 1 when every element of the (1, 64) f32 output is v. */
static int all_equal(const float *out, double v)
{
    for (int j = 0; j < 64; j++)
        if ((double)out[j] != v) return 0;
    return 1;
}

static qv_grade grade(const qv_moe_problem *p, const float *out, const int32_t *ids, const float *w)
{
    qv_moe_result r;
    ck_assert_msg(ref_moe_verify(p, out, ids, w, &r) == QV_OK, "%s", qv_errmsg());
    return r.out.grade;
}

START_TEST(weight_on_input_by_hand)
{
    qv_moe_spec *in = moe_spec(in_spec), *acc = moe_spec(acc_spec);
    const double wt = 0.75 + 0.45 * 0x1p-8;
    const float l0 = (float)log(wt / (1.0 - wt));
    const double w = sig(l0);
    /* bf16 keeps 8 bits: 0.75 is the nearest, and w is not within 2^-10 of a midpoint */
    ck_assert(fabs(w - 0.75) < 0x1p-9 && fabs(w - 0.75) > 0x1p-10);
    qv_moe_problem p;
    ones_problem(&p, in, l0, -10.0f, 0);
    float out[64], wk;
    int32_t id;
    /* the model under rw=in: 96 everywhere; passes rw=in, fails rw=acc */
    ck_assert_int_eq(ref_moe_model_run(&p, 16, out, &id, &wk), QV_OK);
    ck_assert_int_eq(id, 0);
    ck_assert_msg(all_equal(out, 96.0), "rw=in model: %.9g", (double)out[0]);
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_PASS);
    ck_assert_int_eq(grade(&p, out, &id, &wk), QV_PASS);
    p.s = acc;
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_FAIL);
    /* the model under rw=acc: RN_f32(128 w); passes rw=acc, fails rw=in */
    ck_assert_int_eq(ref_moe_model_run(&p, 16, out, &id, &wk), QV_OK);
    ck_assert_msg(all_equal(out, (double)(float)(128.0 * w)), "rw=acc model: %.9g", (double)out[0]);
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_PASS);
    p.s = in;
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_FAIL);
    ck_assert_int_eq(grade(&p, out, &id, &wk), QV_FAIL);
    /* the weight on both (vLLM #43694): fails either declaration */
    for (int j = 0; j < 64; j++) out[j] = (float)(96.0 * w);
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_FAIL);
    p.s = acc;
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_FAIL);
    qv_moe_problem_destroy(&p);
    free(in), free(acc);
}
END_TEST

/* A weight within its bound of the midpoint 0.75 + 2^-9 between two bf16
 * values: either input scale may be the kernel's, so without its weight both
 * 96 and 96.5 are within the bound (their union) and 96.75 is not; the kernel's weight, given,
 * fixes one. A weight below 2^-100 may round to many bf16 values: refused
 * without the kernel's weight, decided with it. A near tie on a renormalized
 * route: refused without the ids (each scale depends on the selection). */
START_TEST(weight_on_input_ambiguous)
{
    qv_moe_spec *in = moe_spec(in_spec);
    const double mid = 0.75 + 0x1p-9;
    float l0 = (float)log(mid / (1.0 - mid));
    /* the f32 logit whose sigma is nearest the midpoint */
    for (float c = nextafterf(l0, 0.0f), best = fabsf((float)(sig(l0) - mid)), i = 0; i < 4; i++) {
        if (fabs(sig(c) - mid) < best) best = (float)fabs(sig(c) - mid), l0 = c;
        c = nextafterf(c, 10.0f);
    }
    ck_assert_msg(fabs(sig(l0) - mid) < 1e-7, "sigma(l0) - mid = %g", sig(l0) - mid);
    qv_moe_problem p;
    ones_problem(&p, in, l0, -10.0f, 0);
    float out[64];
    /* each at an end of the union of the two candidates' intervals: not FAIL (MARGINAL) */
    for (int j = 0; j < 64; j++) out[j] = 96.0f;
    ck_assert_int_ne(grade(&p, out, NULL, NULL), QV_FAIL);
    for (int j = 0; j < 64; j++) out[j] = 96.5f;
    ck_assert_int_ne(grade(&p, out, NULL, NULL), QV_FAIL);
    for (int j = 0; j < 64; j++) out[j] = 96.75f;
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_FAIL);
    /* the kernel's weight on the high side of the midpoint: its scale is 0.75390625 */
    int32_t id = 0;
    float wk = nextafterf((float)mid, 1.0f);
    ck_assert_int_eq(grade(&p, out, &id, &wk), QV_FAIL);
    for (int j = 0; j < 64; j++) out[j] = 96.5f;
    ck_assert_int_eq(grade(&p, out, &id, &wk), QV_PASS);
    for (int j = 0; j < 64; j++) out[j] = 96.0f;
    ck_assert_int_eq(grade(&p, out, &id, &wk), QV_FAIL);
    qv_moe_problem_destroy(&p);

    /* sigma(-100) ~ 3.7e-44: below bf16's smallest subnormal, the bound 2^-100 */
    ones_problem(&p, in, -100.0f, -120.0f, 0);
    int32_t idm;
    float wm;
    ck_assert_int_eq(ref_moe_model_run(&p, 16, out, &idm, &wm), QV_OK);
    ck_assert(all_equal(out, 0.0));
    qv_moe_result r;
    ck_assert_int_eq(ref_moe_verify(&p, out, NULL, NULL, &r), QV_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(qv_errmsg(), "more than two bf16 values") != NULL, "%s", qv_errmsg());
    ck_assert_int_eq(grade(&p, out, &idm, &wm), QV_PASS);
    qv_moe_problem_destroy(&p);
    free(in);

    /* a tie between experts 0 and 1 on a renormalized route, top-1 of 3 */
    qv_moe_spec *rn = moe_spec("w=u4b8,ws=bf16/c,a=bf16,out=f32,route=softmax-topk-renorm,topk=1,rw=in");
    ck_assert_int_eq(qv_moe_problem_create(&p, rn, 1, 64, 128, 3, 3, 0), QV_OK);
    ((float *)p.logits)[0] = ((float *)p.logits)[1] = 1.0f;
    for (int j = 0; j < 64; j++) out[j] = 0.0f;
    ck_assert_int_eq(ref_moe_verify(&p, out, NULL, NULL, &r), QV_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(qv_errmsg(), "give the kernel's expert ids") != NULL, "%s", qv_errmsg());
    id = 1, wk = 1.0f;
    ck_assert_int_eq(grade(&p, out, &id, &wk), QV_PASS); /* zero activations: every product 0 */
    qv_moe_problem_destroy(&p);
    free(rn);
}
END_TEST

/* ---- the shared experts' gate (sgate=sigmoid, row 33) ------------------------------------ */

/* One token, expert 0 of 2 routed (logits 5 and 0: softmax weight w =
 * e^5 / (e^5 + 1)) and one shared expert, every activation 1 and every weight
 * 1, K = 128: each product is 128. The gate vector is 2^-7 everywhere, so the
 * gate logit is exactly 1, sigma(1) = 0.7310586 and its bf16 rounding 187 *
 * 2^-8 = 0.73046875 (0.6 thousandths away, a third of half an ulp). With the
 * weights in fp32 (rw=acc) and an f32 output, the declared result is
 * 128 w + 128 * 0.73046875. */
START_TEST(shared_gate_by_hand)
{
    qv_moe_spec *gs = moe_spec("w=u4b8,ws=bf16/c,a=bf16,out=f32,route=softmax-topk,topk=1,sgate=sigmoid");
    qv_moe_spec *plain = moe_spec("w=u4b8,ws=bf16/c,a=bf16,out=f32,route=softmax-topk,topk=1");
    qv_moe_problem p;
    ones_problem(&p, gs, 5.0f, 0.0f, 1);
    ck_assert_ptr_nonnull(p.shared_gate);
    for (int64_t i = 0; i < p.k; i++) ((uint16_t *)p.shared_gate)[i] = 0x3C00; /* bf16 2^-7 */
    const double sg = 1.0 / (1.0 + exp(-1.0)), gate = 187 * 0x1p-8;
    ck_assert(fabs(sg - gate) < 0x1p-10); /* the nearest bf16, well inside half an ulp (2^-9) */
    const double w = exp(5.0) / (exp(5.0) + 1.0);
    float out[64];
    int32_t id;
    float wk;
    /* the model's output and the declared value pass */
    ck_assert_int_eq(ref_moe_model_run(&p, 16, out, &id, &wk), QV_OK);
    ck_assert_int_eq(grade(&p, out, &id, &wk), QV_PASS);
    for (int j = 0; j < 64; j++) out[j] = (float)(128.0 * w + 128.0 * gate);
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_PASS);
    /* the gate dropped (lmdeploy #3491), or left unrounded: FAIL */
    for (int j = 0; j < 64; j++) out[j] = (float)(128.0 * w + 128.0);
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_FAIL);
    for (int j = 0; j < 64; j++) out[j] = (float)(128.0 * w + 128.0 * sg);
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_FAIL);
    /* declared without the gate, the ungated output passes and the gated one fails */
    p.s = plain;
    for (int j = 0; j < 64; j++) out[j] = (float)(128.0 * w + 128.0);
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_PASS);
    for (int j = 0; j < 64; j++) out[j] = (float)(128.0 * w + 128.0 * gate);
    ck_assert_int_eq(grade(&p, out, NULL, NULL), QV_FAIL);
    p.s = gs;
    /* a non-finite gate element is refused */
    ((uint16_t *)p.shared_gate)[5] = 0x7FC0;
    qv_moe_result r;
    ck_assert_int_eq(ref_moe_verify(&p, out, NULL, NULL, &r), QV_ERR_RANGE);
    ck_assert_msg(strstr(qv_errmsg(), "gate of shared expert 0, element 5") != NULL, "%s", qv_errmsg());
    qv_moe_problem_destroy(&p);
    free(gs), free(plain);
}
END_TEST

/* ---- the model passes ------------------------------------------------------------------- */

static const char *model_specs[] = {
    "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2",
    "w=u4b8,ws=bf16/c,a=bf16,route=topk-softmax,topk=4,logits=bf16",
    "w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p128,out=bf16,route=sigmoid-topk-renorm,topk=8,rsf=2.5",
    "w=u4b8,ws=f16/g128,route=softmax-topk,topk=3,rw=out,sum=out",
    "w=e2m1,ws=e8m0/g32,a=bf16,bias=bf16,route=softmax-topk-renorm,topk=4",
    "w=u4b8,ws=f16/g128,route=sigmoid-topk,topk=1,tie=low,sum=out",
    /* group-limited routes (16 experts: 4 groups of 4), with and without a selection bias */
    "w=u4b8,ws=bf16/c,a=bf16,route=sigmoid-topk-renorm,topk=4,rsf=2.5,groups=4,gtopk=2,sbias=f32",
    "w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,groups=4,gtopk=2,gscore=max",
    "w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=3,tie=low,groups=4,gtopk=1,gmask=zero,sbias=f32,eps=1e-20",
    /* a selection bias without groups (GLM-4.5, Kimi K2: one group) */
    "w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk-renorm,topk=4,rsf=2.827,sbias=f32",
    /* the weight on the expert's input (Llama 4), top-1 and top-3 (a softmax over all E:
     * each weight its expert's alone, so near ties decide without the ids) */
    "w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk,topk=1,rw=in,sum=out",
    "w=u4b8,ws=f16/c,route=softmax-topk,topk=3,rsf=2.5,rw=in",
    /* a sigmoid gate on the shared experts (Qwen2-MoE, Qwen3-Next), weighed in fp32 or in bf16 */
    "w=u4b8,ws=f16/c,route=sigmoid-topk,topk=2,sgate=sigmoid",
    "w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=4,rw=out,sum=out,logits=bf16,sgate=sigmoid",
};
#define N_MODEL_SPECS ((int)(sizeof model_specs / sizeof model_specs[0]))

START_TEST(model_passes)
{
    qv_moe_spec *s = moe_spec(model_specs[_i % N_MODEL_SPECS]);
    qv_moe_logits lc = (qv_moe_logits)(_i / N_MODEL_SPECS);
    uint64_t seed = mix(case_seed(1), 400 + (uint64_t)_i);
    int e = 16, e_local = lc == QV_LOGITS_NONLOCAL ? 6 : (_i % 3 ? 16 : 12), shared = _i % 2;
    int64_t k = 256, n = 128, T = 1 + (int64_t)(seed % 40);
    qv_moe_problem p;
    make(&p, s, T, n, k, e, e_local, shared, lc, (_i % 3) == 1 ? QV_PROBE_EXACT : QV_PROBE_RANDOM, seed);
    void *out = out_alloc(&p);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(T * s->topk));
    float *w = malloc(sizeof(float) * (size_t)(T * s->topk));
    ck_assert_msg(ref_moe_model_run(&p, 16, out, ids, w) == QV_OK, "%s", qv_errmsg());
    qv_moe_result r;
    ck_assert_msg(ref_moe_verify(&p, out, ids, w, &r) == QV_OK, "%s", qv_errmsg());
    ck_assert_msg(r.out.grade != QV_FAIL, "%s, logits %s: %s", s->text, qv_moe_logits_name(lc), r.out.reason);
    ck_assert_int_eq(r.n_route_bad, 0);
    ck_assert_int_eq(r.n_weight_bad, 0);
    /* without the ids: near ties are decided against the output */
    if (lc != QV_LOGITS_WIDE && lc != QV_LOGITS_MASKED && lc != QV_LOGITS_ONE_EXPERT && lc != QV_LOGITS_EMPTY &&
        lc != QV_LOGITS_NONLOCAL) {
        ck_assert_msg(ref_moe_verify(&p, out, NULL, NULL, &r) == QV_OK, "%s", qv_errmsg());
        ck_assert_msg(r.out.grade != QV_FAIL, "%s, logits %s, no ids: %s", s->text, qv_moe_logits_name(lc),
                      r.out.reason);
    }
    if (lc == QV_LOGITS_NONLOCAL && !shared && !s->groups) {
        /* every token's experts live elsewhere: the output is zero (a group limit may keep a
         * group with fewer than k of them, and take local experts there) */
        size_t es = qv_fmt_storage_bytes(s->expert->ofmt);
        for (int64_t i = 0; i < T * n; i++) {
            uint32_t c = 0;
            memcpy(&c, (char *)out + (size_t)i * es, es);
            ck_assert_msg(qv_decode(s->expert->ofmt, c) == 0.0, "element %lld not zero", (long long)i);
        }
    }
    free(out), free(ids), free(w);
    qv_moe_problem_destroy(&p);
    free(s);
}
END_TEST

/* Random routed specs: every routing key drawn (route, topk, rsf, tie, rw,
 * sum, logits format, groups, the selection bias, eps, the shared gate) over
 * a few expert specs; the parser's refusals are skipped (each has a test of
 * its own). A spec it takes must give a problem whose CPU model output
 * passes with the model's ids and weights, on a random logits case; without
 * them it must pass or be refused with a message (QV_ERR_UNSUPPORTED: a tie
 * the reference cannot list without the kernel's ids). */
START_TEST(random_specs_model_passes)
{
    static const char *const experts[] = {"w=u4b8,ws=f16/g128", "w=u4b8,ws=bf16/c,a=bf16",
                                          "w=u4b8,ws=bf16/g128,a=bf16,out=f32",
                                          "w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p128,out=bf16"};
    static const char *const routes[] = {"softmax-topk", "softmax-topk-renorm", "topk-softmax", "sigmoid-topk",
                                         "sigmoid-topk-renorm"};
    const uint64_t seed = mix(case_seed(1), 900 + (uint64_t)_i);
    uint64_t draw = 0;
#define RND() test_rnd(seed, 0, draw++)
    int taken = 0;
    for (int tries = 0; tries < 40 && taken < 3; tries++) {
        char text[512];
        int topk = 1 + (int)(RND() % 4), groups = RND() % 3 ? 0 : 4;
        const char *ex = experts[RND() % 4], *rt = routes[RND() % 5];
        int n = snprintf(text, sizeof text, "%s,route=%s,topk=%d", ex, rt, topk);
        if (RND() % 2) n += snprintf(text + n, sizeof text - (size_t)n, ",rsf=2.5");
        if (RND() % 2) n += snprintf(text + n, sizeof text - (size_t)n, ",tie=low");
        static const char *const rw[] = {"", ",rw=out", ",rw=in"}, *const sum[] = {"", ",sum=out"};
        const char *rws = rw[RND() % 3], *sums = sum[RND() % 2];
        n += snprintf(text + n, sizeof text - (size_t)n, "%s%s", rws, sums);
        if (RND() % 3 == 0) n += snprintf(text + n, sizeof text - (size_t)n, ",logits=bf16");
        if (groups) n += snprintf(text + n, sizeof text - (size_t)n, ",groups=4,gtopk=%d", 1 + (int)(RND() % 2));
        if (RND() % 3 == 0) n += snprintf(text + n, sizeof text - (size_t)n, ",sbias=f32");
        if (RND() % 4 == 0) n += snprintf(text + n, sizeof text - (size_t)n, ",eps=1e-20");
        if (RND() % 3 == 0) n += snprintf(text + n, sizeof text - (size_t)n, ",sgate=sigmoid");
        qv_moe_spec s;
        if (qv_moe_spec_parse(text, &s) != QV_OK) continue;
        int e = 16, shared = (int)(RND() % 3), e_local = RND() % 2 ? 16 : 12;
        int64_t T = 1 + (int64_t)(RND() % 24), k = s.expert->wfmt == QV_FMT_E4M3 ? 256 : 128;
        qv_moe_problem p;
        if (qv_moe_problem_create(&p, &s, T, 128, k, e, e_local, shared) != QV_OK) continue; /* e.g. kept groups too small */
        qv_moe_logits lc = (qv_moe_logits)(RND() % QV_LOGITS_COUNT);
        const qv_probe_kind kind = RND() % 2 ? QV_PROBE_RANDOM : QV_PROBE_EXACT;
        if (ref_moe_fill(&p, lc, kind, QV_REGIME_LOGUNIFORM, RND()) != QV_OK) {
            qv_moe_problem_destroy(&p);
            continue; /* a logits case the shape cannot hold (nonlocal without enough -1) */
        }
        void *out = out_alloc(&p);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)(T * topk));
        float *w = malloc(sizeof(float) * (size_t)(T * topk));
        qv_moe_result r;
        qv_status ms = ref_moe_model_run(&p, 16, out, ids, w);
        if (ms == QV_OK) {
            qv_status vs = ref_moe_verify(&p, out, ids, w, &r);
            ck_assert_msg(vs == QV_OK || vs == QV_ERR_UNSUPPORTED || vs == QV_ERR_RANGE, "%s, %s: %s", text,
                          qv_moe_logits_name(lc), qv_errmsg());
            if (vs == QV_OK) {
                ck_assert_msg(r.out.grade != QV_FAIL && !r.n_route_bad && !r.n_weight_bad, "%s, logits %s: %s",
                              s.text, qv_moe_logits_name(lc), r.out.reason);
                vs = ref_moe_verify(&p, out, NULL, NULL, &r);
                ck_assert_msg(vs == QV_OK || vs == QV_ERR_UNSUPPORTED, "%s, %s, no ids: %s", s.text,
                              qv_moe_logits_name(lc), qv_errmsg());
                if (vs == QV_OK)
                    ck_assert_msg(r.out.grade != QV_FAIL, "%s, logits %s, no ids: %s", s.text, qv_moe_logits_name(lc),
                                  r.out.reason);
                taken++;
            }
        }
        free(out), free(ids), free(w);
        qv_moe_problem_destroy(&p);
    }
#undef RND
    ck_assert_msg(taken > 0, "no random spec of this draw made a verified case");
}
END_TEST

/* qv_moe_problem_token: token t alone is the same routed problem for that
 * token. The CPU model computes each token on its own, so its output row,
 * ids and weights must be the full problem's row t bit for bit; on specs with
 * per-token and per-128-K activation scales, a selection bias, shared gates
 * and a local subset of the experts. */
START_TEST(one_token_problem)
{
    static const char *const specs[] = {
        "w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p128,out=bf16,route=sigmoid-topk-renorm,topk=4,"
        "rsf=2.5,groups=4,gtopk=2,sbias=f32",
        "w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,out=bf16,route=softmax-topk,topk=2",
        "w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=4,rw=out,sum=out,logits=bf16,sgate=sigmoid",
    };
    qv_moe_spec *s = moe_spec(specs[_i]);
    qv_moe_problem p, q;
    make(&p, s, 9, 128, 256, 16, 12, 2, QV_LOGITS_RANDOM, QV_PROBE_RANDOM, mix(case_seed(1), 950 + (uint64_t)_i));
    size_t es = qv_fmt_storage_bytes(s->expert->ofmt), row = (size_t)p.n * es;
    void *out = out_alloc(&p), *out1 = malloc(row);
    int k = s->topk;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(9 * k)), *ids1 = malloc(sizeof(int32_t) * (size_t)k);
    float *w = malloc(sizeof(float) * (size_t)(9 * k)), *w1 = malloc(sizeof(float) * (size_t)k);
    ck_assert_int_eq(ref_moe_model_run(&p, 16, out, ids, w), QV_OK);
    for (int64_t t = 0; t < p.t; t += 4) {
        ck_assert_msg(qv_moe_problem_token(&p, t, &q) == QV_OK, "%s", qv_errmsg());
        ck_assert_int_eq(q.t, 1);
        ck_assert_int_eq(ref_moe_model_run(&q, 16, out1, ids1, w1), QV_OK);
        ck_assert_msg(!memcmp(out1, (char *)out + (size_t)t * row, row), "%s: token %lld's row differs", s->text,
                      (long long)t);
        ck_assert(!memcmp(ids1, ids + t * k, sizeof(int32_t) * (size_t)k));
        ck_assert(!memcmp(w1, w + t * k, sizeof(float) * (size_t)k));
        qv_moe_problem_destroy(&q);
    }
    free(out), free(out1), free(ids), free(ids1), free(w), free(w1);
    qv_moe_problem_destroy(&p);
    free(s);
}
END_TEST

/* The split-K witness on routed problems: every expert's product is 2049 -
 * 2048 = 1 in every column, so each token's exact output is the sum of its
 * exact weights (plus 1 per shared expert). An output made as a reduction of
 * two K parts in the 16-bit output format would make it (2048 - 2048 = 0 per
 * expert) fails; the correctly rounded sum passes. (An fp8 sum's certified
 * bound, 4097 products in a 14-bit accumulator, exceeds the result: the
 * suite gives fp8 rows the exact probe instead.) Rows with an int32 sum
 * refuse the witness. */
static const char *witness_specs[] = {
    "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2",
    "w=e2m1,ws=e8m0/g32,a=bf16,route=topk-softmax,topk=4",
    "w=u4b8,ws=bf16/c,a=bf16,route=sigmoid-topk-renorm,topk=8,rsf=2.5",
};

START_TEST(splitk_witness)
{
    qv_moe_spec *s = moe_spec(witness_specs[_i]);
    const int shared = _i == 2, e = _i == 2 ? 16 : 8, e_local = _i == 1 ? 6 : e;
    const int64_t T = 5, n = 128, k = 512;
    qv_moe_problem p;
    make(&p, s, T, n, k, e, e_local, shared, QV_LOGITS_RANDOM, QV_PROBE_WITNESS_SPLITK, mix(case_seed(1), 700 + _i));
    qv_moe_truth tr;
    ck_assert_msg(ref_moe_truth(&p, NULL, &tr) == QV_OK, "%s", qv_errmsg());
    const qv_fmt of = s->expert->ofmt;
    const size_t es = qv_fmt_storage_bytes(of);
    void *good = out_alloc(&p), *bad = out_alloc(&p);
    int local_terms = 0;
    for (int64_t t = 0; t < T; t++) {
        double sum = shared;
        for (int c = 0; c < s->topk; c++)
            if (p.expert_map[tr.ids[t * s->topk + c]] >= 0) sum += tr.weight[t * s->topk + c], local_terms++;
        for (int64_t j = 0; j < n; j++) {
            ck_assert_msg(fabs(tr.out.y[t * n + j] - sum) <= 0x1p-40 * fabs(sum), "token %lld col %lld: y %.17g, sum of "
                          "weights %.17g", (long long)t, (long long)j, tr.out.y[t * n + j], sum);
            uint32_t g = qv_encode(of, sum, QV_SAT_NONE), z = qv_encode(of, 0.0, QV_SAT_NONE);
            memcpy((char *)good + (size_t)(t * n + j) * es, &g, es);
            memcpy((char *)bad + (size_t)(t * n + j) * es, &z, es);
        }
    }
    ck_assert_int_gt(local_terms, 0);
    qv_moe_result r;
    ck_assert_msg(ref_moe_verify(&p, good, NULL, NULL, &r) == QV_OK, "%s", qv_errmsg());
    ck_assert_msg(r.out.grade != QV_FAIL, "%s: the rounded sum of weights failed: %s", s->text, r.out.reason);
    ck_assert_msg(ref_moe_verify(&p, bad, NULL, NULL, &r) == QV_OK, "%s", qv_errmsg());
    ck_assert_msg(r.out.grade == QV_FAIL, "%s: the 16-bit reduction's zeros passed", s->text);
    ref_moe_truth_clear(&tr);
    free(good), free(bad);
    qv_moe_problem_destroy(&p);
    free(s);
    /* an int32 sum has no split to witness */
    qv_moe_spec *si = moe_spec("w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,out=f16,route=softmax-topk,topk=2");
    ck_assert_int_eq(qv_moe_problem_create(&p, si, 2, 64, 256, 4, 4, 0), QV_OK);
    ck_assert_int_eq(ref_moe_fill(&p, QV_LOGITS_RANDOM, QV_PROBE_WITNESS_SPLITK, QV_REGIME_LOGUNIFORM, 1),
                     QV_ERR_UNSUPPORTED);
    ck_assert(strstr(qv_errmsg(), "witness-splitk") != NULL);
    qv_moe_problem_destroy(&p);
    free(si);
}
END_TEST

/* ---- bug classes -------------------------------------------------------------------------- */

/* The model's output under spec `made` graded under spec `declared` (same
 * expert arithmetic, same data): the grade. */
static qv_grade cross(const char *made, const char *declared, qv_moe_logits lc, int e_local, int shared,
                      uint64_t seed, int give_ids)
{
    qv_moe_spec *sm = moe_spec(made), *sd = moe_spec(declared);
    qv_moe_problem p;
    make(&p, sd, 48, 128, 256, 8, e_local, shared, lc, QV_PROBE_RANDOM, seed);
    void *out = out_alloc(&p);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(48 * sm->topk));
    p.s = sm;
    ck_assert_msg(ref_moe_model_run(&p, 16, out, ids, NULL) == QV_OK, "%s", qv_errmsg());
    p.s = sd;
    qv_moe_result r;
    ck_assert_msg(ref_moe_verify(&p, out, give_ids ? ids : NULL, NULL, &r) == QV_OK, "%s", qv_errmsg());
    free(out), free(ids);
    qv_moe_problem_destroy(&p);
    free(sm), free(sd);
    return r.out.grade;
}

START_TEST(bug_classes_fail)
{
    uint64_t seed = mix(case_seed(1), 500);
    const char *base = "w=u4b8,ws=f16/g128,route=softmax-topk,topk=2";
    /* row 25: the router weight applied after the output cast */
    ck_assert_int_eq(cross("w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,rw=out", base, QV_LOGITS_RANDOM, 8, 0, seed, 1),
                     QV_FAIL);
    /* row 26: top-k then softmax where softmax then top-k is declared, and the reverse */
    ck_assert_int_eq(cross("w=u4b8,ws=f16/g128,route=topk-softmax,topk=2", base, QV_LOGITS_RANDOM, 8, 0, seed, 1),
                     QV_FAIL);
    ck_assert_int_eq(cross(base, "w=u4b8,ws=f16/g128,route=topk-softmax,topk=2", QV_LOGITS_RANDOM, 8, 0, seed, 1),
                     QV_FAIL);
    /* ... while renormalized softmax-topk is topk-softmax in exact arithmetic */
    ck_assert_int_ne(cross("w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2",
                           "w=u4b8,ws=f16/g128,route=topk-softmax,topk=2", QV_LOGITS_RANDOM, 8, 0, seed, 1),
                     QV_FAIL);
    /* row 27: the routed scaling factor dropped, or applied twice */
    const char *rsf = "w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,rsf=2.5";
    ck_assert_int_eq(cross("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2", rsf, QV_LOGITS_RANDOM, 8, 1, seed, 1),
                     QV_FAIL);
    ck_assert_int_eq(
        cross("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,rsf=6.25", rsf, QV_LOGITS_RANDOM, 8, 1, seed, 1),
        QV_FAIL);
    ck_assert_int_ne(cross(rsf, rsf, QV_LOGITS_RANDOM, 8, 1, seed, 1), QV_FAIL);
    /* a tie broken upward where tie=low is declared; accepted under tie=any */
    ck_assert_int_eq(cross("w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,tie=low",
                           "w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,tie=low", QV_LOGITS_TIES, 8, 0, seed, 1),
                     QV_PASS);
    /* no ids, a near tie at every token's boundary: decided against the output */
    ck_assert_int_ne(cross(base, base, QV_LOGITS_NEAR_TIES, 8, 0, seed, 0), QV_FAIL);
    /* row 31: the group-limited, biased route (8 experts: 4 groups of 2, 2 kept) */
    const char *g = "w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,rsf=2.5,groups=4,gtopk=2,sbias=f32";
    ck_assert_int_ne(cross(g, g, QV_LOGITS_RANDOM, 8, 1, seed, 1), QV_FAIL);
    ck_assert_int_ne(cross(g, g, QV_LOGITS_LOW_SCORES, 8, 1, seed, 1), QV_FAIL);
    /* the group limit lost */
    ck_assert_int_eq(cross("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,rsf=2.5,sbias=f32", g, QV_LOGITS_RANDOM,
                           8, 1, seed, 1),
                     QV_FAIL);
    /* the bias left out of the selection */
    ck_assert_int_eq(cross("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,rsf=2.5,groups=4,gtopk=2", g,
                           QV_LOGITS_RANDOM, 8, 1, seed, 1),
                     QV_FAIL);
    /* the groups not kept scored 0 where -Inf is declared, and the reverse, when every
     * selection score is below 0 */
    const char *gz = "w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=2,rsf=2.5,groups=4,gtopk=2,gmask=zero,sbias=f32";
    ck_assert_int_eq(cross(gz, g, QV_LOGITS_LOW_SCORES, 8, 1, seed, 1), QV_FAIL);
    ck_assert_int_eq(cross(g, gz, QV_LOGITS_LOW_SCORES, 8, 1, seed, 1), QV_FAIL);
    /* ... which agree while a kept score is above 0 for each of the k */
    ck_assert_int_ne(cross(gz, g, QV_LOGITS_ONE_EXPERT, 8, 1, seed, 1), QV_FAIL);
    /* row 33: the shared expert's gate dropped */
    const char *sgt = "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2,sgate=sigmoid";
    ck_assert_int_ne(cross(sgt, sgt, QV_LOGITS_RANDOM, 8, 1, seed, 1), QV_FAIL);
    ck_assert_int_eq(cross("w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2", sgt, QV_LOGITS_RANDOM, 8, 1, seed, 1),
                     QV_FAIL);
}
END_TEST

/* Row 28: a non-local expert's term kept (as if the map were the identity), a
 * shared expert dropped, and a token's ids misaligned with its weights. */
START_TEST(experts_dropped_or_kept)
{
    uint64_t seed = mix(case_seed(1), 600);
    qv_moe_spec *s = moe_spec("w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2");
    qv_moe_problem p;
    make(&p, s, 40, 128, 256, 8, 8, 1, QV_LOGITS_RANDOM, QV_PROBE_RANDOM, seed);
    void *out = out_alloc(&p);
    int32_t ids[80];
    float w[80];
    ck_assert_int_eq(ref_moe_model_run(&p, 16, out, ids, w), QV_OK);
    qv_moe_result r;
    ck_assert_int_eq(ref_moe_verify(&p, out, ids, w, &r), QV_OK);
    ck_assert_int_ne(r.out.grade, QV_FAIL);
    /* the same output where router expert ids[0] is declared non-local: its term should be gone */
    int32_t keep = p.expert_map[ids[0]];
    p.expert_map[ids[0]] = -1;
    ck_assert_int_eq(ref_moe_verify(&p, out, ids, w, &r), QV_OK);
    ck_assert_int_eq(r.out.grade, QV_FAIL);
    p.expert_map[ids[0]] = keep;
    /* the shared expert dropped: zero its weights for the model, grade with them */
    qv_problem *sh = &p.w[8];
    size_t qb = (size_t)(p.k * p.n) * qv_fmt_storage_bytes(s->expert->wfmt);
    void *save = malloc(qb);
    memcpy(save, sh->q, qb);
    memset(sh->q, 8, qb); /* u4b8 code 8 is the value 0 */
    void *dropped = out_alloc(&p);
    ck_assert_int_eq(ref_moe_model_run(&p, 16, dropped, NULL, NULL), QV_OK);
    memcpy(sh->q, save, qb);
    ck_assert_int_eq(ref_moe_verify(&p, dropped, ids, w, &r), QV_OK);
    ck_assert_int_eq(r.out.grade, QV_FAIL);
    /* ids swapped within a token while the weights stay: routing and weights disagree */
    int32_t sw[80];
    memcpy(sw, ids, sizeof sw);
    for (int t = 0; t < 40; t++) {
        sw[2 * t] = ids[2 * t + 1];
        sw[2 * t + 1] = ids[2 * t];
    }
    ck_assert_int_eq(ref_moe_verify(&p, out, sw, w, &r), QV_OK);
    ck_assert_int_eq(r.out.grade, QV_FAIL);
    ck_assert_int_gt(r.n_weight_bad, 0);
    /* weights off by 1e-3 */
    float wb[80];
    for (int i = 0; i < 80; i++) wb[i] = w[i] * 1.001f;
    ck_assert_int_eq(ref_moe_verify(&p, out, ids, wb, &r), QV_OK);
    ck_assert_int_eq(r.out.grade, QV_FAIL);
    ck_assert_int_eq(r.n_weight_bad, 80);
    /* an expert outside the top-k */
    int32_t bad[80];
    memcpy(bad, ids, sizeof bad);
    for (int e = 0; e < 8; e++)
        if (e != ids[0] && e != ids[1]) {
            bad[1] = e;
            break;
        }
    ck_assert_int_eq(ref_moe_verify(&p, out, bad, NULL, &r), QV_OK);
    ck_assert_int_eq(r.out.grade, QV_FAIL);
    ck_assert_int_eq(r.n_route_bad, 1);
    ck_assert_int_eq(r.first_bad_token, 0);
    /* a row never written */
    size_t es = qv_fmt_storage_bytes(s->expert->ofmt);
    uint32_t poison = ref_poison_code(s->expert->ofmt);
    for (int64_t j = 0; j < p.n; j++) memcpy((char *)out + (size_t)(7 * p.n + j) * es, &poison, es);
    ck_assert_int_eq(ref_moe_verify(&p, out, ids, w, &r), QV_OK);
    ck_assert_int_eq(r.out.grade, QV_FAIL);
    ck_assert_int_eq(r.out.n_unwritten, p.n);
    free(save), free(out), free(dropped);
    qv_moe_problem_destroy(&p);
    free(s);
}
END_TEST

/* tie=low against an output whose ties went to the higher index: the ids
 * fail the routing check; tie=any accepts the same ids. */
START_TEST(tie_rule)
{
    /* renormalized top-1: the weight is 1 whatever the other logits are */
    qv_moe_spec *low = moe_spec("w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=1,tie=low");
    qv_moe_spec *any = moe_spec("w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=1");
    qv_moe_problem p;
    ck_assert_int_eq(qv_moe_problem_create(&p, low, 2, 64, 128, 4, 4, 0), QV_OK);
    ck_assert_int_eq(ref_moe_fill(&p, QV_LOGITS_RANDOM, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 7), QV_OK);
    float *l = p.logits;
    for (int j = 0; j < 8; j++) l[j] = j % 4 == 1 || j % 4 == 3 ? 2.0f : -1.0f; /* experts 1 and 3 tie on top */
    void *out = out_alloc(&p);
    int32_t ids[2] = {3, 3};
    /* the output of the higher index: run the model on logits where 3 wins, grade on the tie */
    l[1] = l[5] = 1.5f;
    ck_assert_int_eq(ref_moe_model_run(&p, 16, out, NULL, NULL), QV_OK);
    l[1] = l[5] = 2.0f;
    qv_moe_result r;
    ck_assert_int_eq(ref_moe_verify(&p, out, ids, NULL, &r), QV_OK);
    ck_assert_int_eq(r.out.grade, QV_FAIL);
    ck_assert_int_eq(r.n_route_bad, 2);
    ck_assert_msg(strstr(r.route_reason, "tie=low") != NULL, "%s", r.route_reason);
    p.s = any;
    ck_assert_int_eq(ref_moe_verify(&p, out, ids, NULL, &r), QV_OK);
    ck_assert_msg(r.out.grade != QV_FAIL, "%s", r.out.reason);
    /* without ids, tie=any decides the tie by the output */
    ck_assert_int_eq(ref_moe_verify(&p, out, NULL, NULL, &r), QV_OK);
    ck_assert_msg(r.out.grade != QV_FAIL, "%s", r.out.reason);
    ck_assert_int_eq(r.n_ambiguous, 2);
    free(out);
    p.s = low;
    qv_moe_problem_destroy(&p);
    free(low), free(any);
}
END_TEST

/* Bad problems get a message, not a verdict. */
START_TEST(refused_problems)
{
    qv_moe_spec *s = moe_spec("w=u4b8,ws=f16/g128,route=topk-softmax,topk=2");
    qv_moe_problem p;
    ck_assert_int_eq(qv_moe_problem_create(&p, s, 2, 64, 128, 1, 1, 0), QV_ERR_SHAPE); /* topk > e */
    ck_assert_int_eq(qv_moe_problem_create(&p, s, 2, 64, 100, 4, 4, 0), QV_ERR_SHAPE); /* g128 does not divide K */
    ck_assert_int_eq(qv_moe_problem_create(&p, s, 2, 64, 128, 4, 0, 0), QV_ERR_SHAPE); /* no weights */
    ck_assert_int_eq(qv_moe_problem_create(&p, s, 2, 64, 128, 4, 4, 0), QV_OK);
    float *l = p.logits;
    l[3] = NAN;
    qv_moe_truth t;
    ck_assert_int_eq(ref_moe_truth(&p, NULL, &t), QV_ERR_RANGE);
    ck_assert(strstr(qv_errmsg(), "NaN") != NULL);
    l[3] = -INFINITY;
    l[2] = -INFINITY;
    l[1] = -INFINITY; /* token 0 keeps one finite logit, fewer than topk */
    ck_assert_int_eq(ref_moe_truth(&p, NULL, &t), QV_ERR_RANGE);
    ck_assert(strstr(qv_errmsg(), "finite") != NULL);
    l[1] = 0;
    ck_assert_int_eq(ref_moe_truth(&p, NULL, &t), QV_OK);
    ref_moe_truth_clear(&t);
    p.expert_map[0] = 1; /* two router experts on local 1 */
    ck_assert_int_eq(ref_moe_truth(&p, NULL, &t), QV_ERR_RANGE);
    p.expert_map[0] = 4;
    ck_assert_int_eq(ref_moe_truth(&p, NULL, &t), QV_ERR_RANGE);
    qv_moe_problem_destroy(&p);
    free(s);
    /* groups: dividing e, the kept ones holding topk experts, two a group for top2 */
    qv_moe_spec *g = moe_spec("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=4,groups=4,gtopk=1,sbias=f32");
    ck_assert_int_eq(qv_moe_problem_create(&p, g, 2, 64, 128, 6, 6, 0), QV_ERR_SHAPE);
    ck_assert(strstr(qv_errmsg(), "does not divide") != NULL);
    ck_assert_int_eq(qv_moe_problem_create(&p, g, 2, 64, 128, 8, 8, 0), QV_ERR_SHAPE);
    ck_assert(strstr(qv_errmsg(), "fewer than topk") != NULL);
    qv_moe_spec *g1 = moe_spec("w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=1,groups=4,gtopk=1");
    ck_assert_int_eq(qv_moe_problem_create(&p, g1, 2, 64, 128, 4, 4, 0), QV_ERR_SHAPE);
    ck_assert(strstr(qv_errmsg(), "two experts a group") != NULL);
    free(g1);
    ck_assert_int_eq(qv_moe_problem_create(&p, g, 2, 64, 128, 16, 16, 0), QV_OK);
    ck_assert_ptr_nonnull(p.score_bias);
    p.score_bias[5] = INFINITY;
    ck_assert_int_eq(ref_moe_truth(&p, NULL, &t), QV_ERR_RANGE);
    ck_assert(strstr(qv_errmsg(), "selection bias of expert 5") != NULL);
    qv_moe_problem_destroy(&p);
    free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("moe");
    TCase *tg = tcase_create("grammar");
    tcase_add_loop_test(tg, canonical_forms, 0, (int)(sizeof canon / sizeof canon[0]));
    tcase_add_test(tg, row_as_expert);
    tcase_add_loop_test(tg, refusals, 0, (int)(sizeof refused / sizeof refused[0]));
    tcase_add_loop_test(tg, sort_invariants, 0, 12);
    suite_add_tcase(s, tg);
    TCase *tr = tcase_create("reference");
    tcase_set_timeout(tr, 300);
    tcase_add_test(tr, weights_by_hand);
    tcase_add_loop_test(tr, weights_against_mpfr, 0, 10);
    tcase_add_loop_test(tr, truth_equals_independent, 0, 2);
    tcase_add_loop_test(tr, model_passes, 0, N_MODEL_SPECS * QV_LOGITS_COUNT);
    tcase_add_loop_test(tr, splitk_witness, 0, (int)(sizeof witness_specs / sizeof witness_specs[0]));
    tcase_add_test(tr, bug_classes_fail);
    tcase_add_test(tr, experts_dropped_or_kept);
    tcase_add_test(tr, tie_rule);
    tcase_add_test(tr, refused_problems);
    tcase_add_test(tr, groups_by_hand);
    tcase_add_test(tr, mask_zero_or_ninf);
    tcase_add_test(tr, group_tie);
    tcase_add_test(tr, eps_by_hand);
    tcase_add_test(tr, weight_on_input_by_hand);
    tcase_add_test(tr, weight_on_input_ambiguous);
    tcase_add_test(tr, shared_gate_by_hand);
    tcase_add_loop_test(tr, random_specs_model_passes, 0, 40);
    tcase_add_loop_test(tr, one_token_problem, 0, 3);
    suite_add_tcase(s, tr);
    printf("t_moe: seed %llu (QVET_SEED)\n", (unsigned long long)case_seed(1));
    return suite_run(s);
}
