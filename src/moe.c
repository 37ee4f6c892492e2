/* moe.c: routed specs (moe.h): parsing the routing keys around an expert's
 * spec, the routed problem and its per-expert sub-problems, and the token sort
 * a grouped GEMM runs on. The routing arithmetic and its truth live in
 * reference/moe.c. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/moe.h"
#include "qvet/spec.h"

/* ---- the routing keys ---------------------------------------------------------- */

static const char *const route_names[] = {"softmax-topk", "softmax-topk-renorm", "topk-softmax", "sigmoid-topk",
                                          "sigmoid-topk-renorm"};
static const char *const tie_names[] = {"any", "low"};
static const char *const rw_names[] = {"acc", "out", "in"};
static const char *const sum_names[] = {"f32", "out"};
static const char *const gscore_names[] = {"top2", "max"};
static const char *const gmask_names[] = {"ninf", "zero"};
#define N_OF(t) (sizeof(t) / sizeof(t)[0])

const char *qv_route_name(qv_route r)
{
    return (unsigned)r < N_OF(route_names) ? route_names[r] : "?";
}
const char *qv_rw_name(qv_rw r) { return (unsigned)r < N_OF(rw_names) ? rw_names[r] : "?"; }
const char *qv_moe_sum_name(qv_moe_sum s) { return (unsigned)s < N_OF(sum_names) ? sum_names[s] : "?"; }

static qv_status bad(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return qv_fail(QV_ERR_USAGE, "routed spec: %s", msg);
}

/* Index of val in names[0..n), or -1. */
static int pick(const char *const *names, int n, const char *val)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], val)) return i;
    return -1;
}

/* A whole number in [lo, hi]. */
static int parse_int(const char *s, int lo, int hi, int *out)
{
    if (!*s) return 0;
    char *end;
    long x = strtol(s, &end, 10);
    if (*end || x < lo || x > hi) return 0;
    *out = (int)x;
    return 1;
}

int qv_moe_is_spec(const char *text)
{
    if (!text) return 0;
    for (const char *p = text; (p = strstr(p, "route=")) != NULL; p++)
        if (p == text || p[-1] == ',') return 1;
    return 0;
}

/* One routing key=value into s; 0 when key is not a routing key. */
static int routing_key(const char *key, const char *val, qv_moe_spec *s, int *have_topk, qv_status *st)
{
    *st = QV_OK;
    int i;
    if (!strcmp(key, "route")) {
        if ((i = pick(route_names, (int)N_OF(route_names), val)) < 0)
            *st = bad("route=%s: expected softmax-topk, softmax-topk-renorm, topk-softmax, sigmoid-topk or "
                      "sigmoid-topk-renorm", val);
        else s->route = (qv_route)i;
    } else if (!strcmp(key, "topk")) {
        if (!parse_int(val, 1, 1024, &s->topk)) *st = bad("topk=%s: expected a whole number 1..1024", val);
        else *have_topk = 1;
    } else if (!strcmp(key, "rsf")) {
        char *end;
        double x = strtod(val, &end);
        if (!*val || *end || !isfinite(x) || x <= 0 || !isfinite((float)x) || (float)x == 0.0f)
            *st = bad("rsf=%s: expected a positive number (the routed scaling factor, used as its f32 value)", val);
        else s->rsf = (float)x;
    } else if (!strcmp(key, "tie")) {
        if ((i = pick(tie_names, (int)N_OF(tie_names), val)) < 0) *st = bad("tie=%s: expected any or low", val);
        else s->tie = (qv_tie)i;
    } else if (!strcmp(key, "rw")) {
        if ((i = pick(rw_names, (int)N_OF(rw_names), val)) < 0) *st = bad("rw=%s: expected acc, out or in", val);
        else s->rw = (qv_rw)i;
    } else if (!strcmp(key, "sum")) {
        if ((i = pick(sum_names, (int)N_OF(sum_names), val)) < 0) *st = bad("sum=%s: expected f32 or out", val);
        else s->sum = (qv_moe_sum)i;
    } else if (!strcmp(key, "exp")) {
        if (!parse_int(val, 0, 1000000, &s->exp_ulps))
            *st = bad("exp=%s: expected the ulps of the kernel's exp, a whole number 0..1000000", val);
    } else if (!strcmp(key, "groups")) {
        if (!parse_int(val, 1, 65536, &s->groups)) *st = bad("groups=%s: expected a whole number 1..65536", val);
    } else if (!strcmp(key, "gtopk")) {
        if (!parse_int(val, 1, 65536, &s->gtopk)) *st = bad("gtopk=%s: expected a whole number 1..65536", val);
    } else if (!strcmp(key, "gscore")) {
        if ((i = pick(gscore_names, (int)N_OF(gscore_names), val)) < 0) *st = bad("gscore=%s: expected top2 or max", val);
        else s->gscore = (qv_gscore)i;
    } else if (!strcmp(key, "gmask")) {
        if ((i = pick(gmask_names, (int)N_OF(gmask_names), val)) < 0) *st = bad("gmask=%s: expected ninf or zero", val);
        else s->gmask = (qv_gmask)i;
    } else if (!strcmp(key, "sbias")) {
        if (strcmp(val, "f32")) *st = bad("sbias=%s: expected f32 (a per-expert float32 selection bias)", val);
        else s->sbias = 1;
    } else if (!strcmp(key, "eps")) {
        char *end;
        double x = strtod(val, &end);
        if (!*val || *end || !isfinite(x) || x < 0 || !isfinite((float)x))
            *st = bad("eps=%s: expected a number >= 0 (added to the renormalizing sum, as its f32 value)", val);
        else s->eps = (float)x;
    } else if (!strcmp(key, "sgate")) {
        if (strcmp(val, "sigmoid")) *st = bad("sgate=%s: expected sigmoid (a gate on each shared expert)", val);
        else s->sgate = 1;
    } else if (!strcmp(key, "logits")) {
        qv_fmt f = qv_fmt_from_name(val);
        if (f != QV_FMT_F32 && f != QV_FMT_BF16 && f != QV_FMT_F16) *st = bad("logits=%s: expected f32, bf16 or f16", val);
        else s->logit_fmt = f;
    } else {
        return 0;
    }
    return 1;
}

static int is_renorm_route(qv_route r) { return r == QV_ROUTE_SOFTMAX_TOPK_RENORM || r == QV_ROUTE_SIGMOID_TOPK_RENORM; }
static int is_sigmoid_route(qv_route r) { return r == QV_ROUTE_SIGMOID_TOPK || r == QV_ROUTE_SIGMOID_TOPK_RENORM; }

/* The rules between routing keys that one key alone cannot check. */
static qv_status check_keys(const qv_moe_spec *s, int have_gscore, int have_gmask)
{
    if (!s->groups && (s->gtopk || have_gscore || have_gmask))
        return bad("gtopk=, gscore= and gmask= need groups= (the expert groups)");
    if (s->groups && !s->gtopk) return bad("groups=%d needs gtopk= (the groups kept)", s->groups);
    if (s->groups && s->gtopk > s->groups)
        return bad("gtopk=%d is more than the %d groups", s->gtopk, s->groups);
    if (s->groups && s->route == QV_ROUTE_TOPK_SOFTMAX)
        return bad("groups= with route=topk-softmax: its selection scores are the logits; a group selection "
                   "takes softmax or sigmoid scores");
    if (s->sbias && !is_sigmoid_route(s->route))
        return bad("sbias=f32 with route=%s: a selection bias is declared for sigmoid routes", qv_route_name(s->route));
    if (s->sgate && s->rw == QV_RW_IN)
        return bad("sgate=sigmoid with rw=in: the shared gate weighs the shared expert's product, as rw=acc or "
                   "rw=out declares");
    if (s->eps != 0.0f && !is_renorm_route(s->route))
        return bad("eps= with route=%s: it is added to the renormalizing sum, which only -renorm routes have",
                   qv_route_name(s->route));
    return QV_OK;
}

qv_status qv_moe_spec_parse(const char *text, qv_moe_spec *out)
{
    memset(out, 0, sizeof *out);
    out->rsf = 1.0f;
    out->exp_ulps = 2;
    out->logit_fmt = QV_FMT_F32;
    if (!text || !*text) return bad("empty");
    size_t len = strlen(text);
    if (len >= 4096) return bad("longer than 4095 characters");
    char *copy = malloc(len + 1), *rest = malloc(len + 1);
    if (!copy || !rest) {
        free(copy);
        free(rest);
        return qv_fail(QV_ERR_NOMEM, "out of memory parsing a routed spec");
    }
    memcpy(copy, text, len + 1);
    rest[0] = 0;
    int have_route = 0, have_topk = 0;
    char seen[16][8] = {{0}};
    int n_seen = 0;
    qv_status st = QV_OK;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && st == QV_OK; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (eq) {
            *eq = 0;
            qv_status kst;
            if (routing_key(tok, eq + 1, out, &have_topk, &kst)) {
                for (int i = 0; i < n_seen; i++)
                    if (!strcmp(seen[i], tok)) kst = bad("%s= given twice", tok);
                if (n_seen < 16) snprintf(seen[n_seen++], sizeof seen[0], "%s", tok);
                have_route |= !strcmp(tok, "route");
                st = kst;
                continue;
            }
            *eq = '=';
        }
        if (rest[0]) strcat(rest, ",");
        strcat(rest, tok);
    }
    if (st == QV_OK && !have_route) st = bad("no route= (softmax-topk, softmax-topk-renorm, topk-softmax, ...)");
    if (st == QV_OK && !have_topk) st = bad("no topk= (the experts each token takes)");
    if (st == QV_OK && !rest[0]) st = bad("no expert spec (e.g. w=u4b8,ws=f16/g128) or registry row");
    int have_gscore = 0, have_gmask = 0;
    for (int i = 0; i < n_seen; i++) {
        have_gscore |= !strcmp(seen[i], "gscore");
        have_gmask |= !strcmp(seen[i], "gmask");
    }
    if (st == QV_OK) st = check_keys(out, have_gscore, have_gmask);
    if (st == QV_OK) st = qv_variant_resolve(rest, &out->expert);
    free(copy);
    free(rest);
    QV_TRY(st);
    qv_fmt of = out->expert->ofmt;
    if (of != QV_FMT_F16 && of != QV_FMT_BF16 && of != QV_FMT_F32)
        return bad("the experts' output is %s: a routed sum needs f16, bf16 or f32", qv_fmt_get(of)->name);
    qv_fmt af = out->expert->afmt;
    if (out->sgate && af != QV_FMT_F16 && af != QV_FMT_BF16)
        return bad("sgate=sigmoid rounds the gate to the activation format: it needs f16 or bf16 activations, "
                   "not %s", qv_fmt_get(af)->name);
    if (out->rw == QV_RW_IN && af != QV_FMT_F16 && af != QV_FMT_BF16)
        return bad("rw=in multiplies the activations by the weight before the expert's GEMM: it needs f16 or bf16 "
                   "activations, not %s (quantized activations would be scaled before their quantization)",
                   qv_fmt_get(af)->name);
    if (qv_moe_spec_format(out, out->text, sizeof out->text) < 0) return bad("%s", out->text);
    return QV_OK;
}

/* The shortest decimal that reads back as the same f32. */
static void f32_shortest(float x, char *num, size_t len)
{
    for (int d = 1; d <= 9; d++) {
        snprintf(num, len, "%.*g", d, (double)x);
        if ((float)strtod(num, NULL) == x) break;
    }
}

int qv_moe_spec_format(const qv_moe_spec *s, char *buf, size_t len)
{
    char ex[QV_SPEC_MAX];
    if (qv_spec_format(s->expert, ex, sizeof ex) < 0) {
        snprintf(buf, len, "%s", ex);
        return -1;
    }
    int n = snprintf(buf, len, "%s,route=%s,topk=%d", ex, qv_route_name(s->route), s->topk);
    if (s->rsf != 1.0f) {
        char num[32];
        f32_shortest(s->rsf, num, sizeof num);
        n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",rsf=%s", num);
    }
    if (s->tie != QV_TIE_ANY) n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",tie=%s", tie_names[s->tie]);
    if (s->rw != QV_RW_ACC) n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",rw=%s", rw_names[s->rw]);
    if (s->sum != QV_MSUM_F32) n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",sum=%s", sum_names[s->sum]);
    if (s->exp_ulps != 2) n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",exp=%d", s->exp_ulps);
    if (s->logit_fmt != QV_FMT_F32)
        n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",logits=%s", qv_fmt_get(s->logit_fmt)->name);
    if (s->groups) {
        n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",groups=%d,gtopk=%d", s->groups, s->gtopk);
        if (s->gscore != QV_GSCORE_TOP2)
            n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",gscore=%s", gscore_names[s->gscore]);
        if (s->gmask != QV_GMASK_NINF)
            n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",gmask=%s", gmask_names[s->gmask]);
    }
    if (s->sbias) n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",sbias=f32");
    if (s->eps != 0.0f) {
        char num[32];
        f32_shortest(s->eps, num, sizeof num);
        n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",eps=%s", num);
    }
    if (s->sgate) n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ",sgate=sigmoid");
    if ((size_t)n >= len) {
        snprintf(buf, len, "routed spec longer than %zu characters", len - 1);
        return -1;
    }
    return n;
}

/* ---- the problem ------------------------------------------------------------------ */

/* Activation scale and zero point counts of a problem of `m` tokens. */
static int64_t ascale_count(const qv_variant *v, int64_t m, int64_t k)
{
    qv_problem shell = {.v = v, .m = m, .k = k};
    return qv_problem_ascale_count(&shell);
}
static int64_t azp_count(const qv_variant *v, int64_t m)
{
    return v->azp == QV_AZP_TENSOR ? 1 : v->azp == QV_AZP_TOKEN ? m : 0;
}

void qv_moe_problem_destroy(qv_moe_problem *p)
{
    if (!p) return;
    if (p->w)
        for (int i = 0; i < p->e_local + p->shared; i++) qv_problem_destroy(&p->w[i]);
    free(p->w);
    free(p->logits);
    free(p->expert_map);
    free(p->score_bias);
    free(p->shared_gate);
    free(p->a);
    free(p->a_scale);
    free(p->azp);
    memset(p, 0, sizeof *p);
}

qv_status qv_moe_problem_create(qv_moe_problem *p, const qv_moe_spec *s, int64_t t, int64_t n, int64_t k, int e,
                                int e_local, int shared)
{
    memset(p, 0, sizeof *p);
    const qv_variant *v = s->expert;
    if (t < 1 || t > (1 << 24)) return qv_fail(QV_ERR_SHAPE, "routed GEMM: %lld tokens (1..16777216)", (long long)t);
    if (e < 1 || e > 65536) return qv_fail(QV_ERR_SHAPE, "routed GEMM: %d router experts (1..65536)", e);
    if (s->topk > e)
        return qv_fail(QV_ERR_SHAPE, "routed GEMM: topk=%d is more than the %d router experts", s->topk, e);
    if (e_local < 0 || e_local > e)
        return qv_fail(QV_ERR_SHAPE, "routed GEMM: %d local experts (0..%d, the router's)", e_local, e);
    if (shared < 0 || shared > 64) return qv_fail(QV_ERR_SHAPE, "routed GEMM: %d shared experts (0..64)", shared);
    if (e_local + shared < 1) return qv_fail(QV_ERR_SHAPE, "routed GEMM: no expert has weights here");
    if (s->groups) {
        if (e % s->groups)
            return qv_fail(QV_ERR_SHAPE, "routed GEMM: groups=%d does not divide the %d router experts", s->groups, e);
        int per = e / s->groups;
        if (s->gmask == QV_GMASK_NINF && (int64_t)s->gtopk * per < s->topk)
            return qv_fail(QV_ERR_SHAPE, "routed GEMM: gtopk=%d groups of %d experts hold fewer than topk=%d",
                           s->gtopk, per, s->topk);
        if (s->gscore == QV_GSCORE_TOP2 && per < 2)
            return qv_fail(QV_ERR_SHAPE, "routed GEMM: gscore=top2 needs two experts a group; groups=%d of %d "
                           "experts have one", s->groups, e);
    }
    QV_TRY(qv_variant_check_shape(v, t, n, k));
    if ((double)t * (double)k * 4.0 > 9.0e18 || (double)t * (double)e * 4.0 > 9.0e18)
        return qv_fail(QV_ERR_NOMEM, "routed GEMM: t=%lld k=%lld e=%d is too large to allocate", (long long)t,
                       (long long)k, e);
    p->s = s;
    p->t = t;
    p->n = n;
    p->k = k;
    p->e = e;
    p->e_local = e_local;
    p->shared = shared;
    size_t lb = qv_fmt_storage_bytes(s->logit_fmt);
    p->logits = calloc((size_t)(t * e), lb);
    p->expert_map = malloc(sizeof(int32_t) * (size_t)e);
    p->score_bias = s->sbias ? calloc((size_t)e, sizeof(float)) : NULL;
    p->a = calloc((size_t)(t * k), qv_fmt_storage_bytes(v->afmt));
    int64_t nas = ascale_count(v, t, k), naz = azp_count(v, t);
    p->a_scale = nas ? calloc((size_t)nas, sizeof(float)) : NULL;
    p->azp = naz ? calloc((size_t)naz, sizeof(int32_t)) : NULL;
    p->w = calloc((size_t)(e_local + shared), sizeof(qv_problem));
    const int gated = s->sgate && shared > 0;
    p->shared_gate = gated ? calloc((size_t)(shared * k), qv_fmt_storage_bytes(v->afmt)) : NULL;
    if (!p->logits || !p->expert_map || (s->sbias && !p->score_bias) || !p->a || (nas && !p->a_scale) ||
        (naz && !p->azp) || !p->w || (gated && !p->shared_gate)) {
        qv_moe_problem_destroy(p);
        return qv_fail(QV_ERR_NOMEM, "routed GEMM: out of memory for t=%lld n=%lld k=%lld", (long long)t,
                       (long long)n, (long long)k);
    }
    for (int i = 0; i < e; i++) p->expert_map[i] = e_local == e ? i : -1;
    for (int i = 0; i < e_local + shared; i++) {
        qv_status st = qv_problem_create(&p->w[i], v, 1, n, k);
        if (st != QV_OK) {
            qv_moe_problem_destroy(p);
            return st;
        }
    }
    return QV_OK;
}

/* The logit of token i, expert j, as a double (exact). */
static double logit(const qv_moe_problem *p, int64_t i, int j)
{
    int64_t x = i * p->e + j;
    if (p->s->logit_fmt == QV_FMT_F32) return ((const float *)p->logits)[x];
    return qv_decode(p->s->logit_fmt, ((const uint16_t *)p->logits)[x]);
}

qv_status qv_moe_problem_check(const qv_moe_problem *p)
{
    for (int j = 0; j < p->e; j++) {
        int32_t l = p->expert_map[j];
        if (l < -1 || l >= p->e_local)
            return qv_fail(QV_ERR_RANGE, "expert map: router expert %d maps to %d, outside -1..%d", j, (int)l,
                           p->e_local - 1);
        for (int i = 0; i < j && l >= 0; i++)
            if (p->expert_map[i] == l)
                return qv_fail(QV_ERR_RANGE, "expert map: router experts %d and %d both map to local expert %d", i, j,
                               (int)l);
    }
    if (p->s->sbias && !p->score_bias)
        return qv_fail(QV_ERR_USAGE, "the spec declares sbias=f32 but the problem has no score_bias");
    if (p->s->sgate && p->shared > 0 && !p->shared_gate)
        return qv_fail(QV_ERR_USAGE, "the spec declares sgate=sigmoid but the problem has no shared_gate");
    const qv_fmt af = p->s->expert->afmt;
    for (int64_t i = 0; p->shared_gate && i < p->shared * p->k; i++) {
        double g = qv_decode(af, ((const uint16_t *)p->shared_gate)[i]);
        if (!isfinite(g))
            return qv_fail(QV_ERR_RANGE, "gate of shared expert %lld, element %lld is %g: it must be finite",
                           (long long)(i / p->k), (long long)(i % p->k), g);
    }
    for (int j = 0; p->score_bias && j < p->e; j++)
        if (!isfinite(p->score_bias[j]))
            return qv_fail(QV_ERR_RANGE, "selection bias of expert %d is %g: it must be finite", j,
                           (double)p->score_bias[j]);
    for (int64_t i = 0; i < p->t; i++)
        for (int j = 0; j < p->e; j++) {
            double l = logit(p, i, j);
            if (isnan(l) || l == INFINITY)
                return qv_fail(QV_ERR_RANGE, "router logit (%lld, %d) is %s: no score has a value there", (long long)i,
                               j, isnan(l) ? "NaN" : "+Inf");
        }
    return QV_OK;
}

/* ---- sub-problems ------------------------------------------------------------------- */

/* Token t's activations, activation scales and zero point into row r of the
 * m-row buffers a, a_scale and azp, laid out as problem.h holds them. */
static void copy_token(const qv_moe_problem *p, int64_t t, int64_t r, int64_t m, void *a, float *a_scale, int32_t *azp)
{
    const qv_variant *v = p->s->expert;
    size_t es = qv_fmt_storage_bytes(v->afmt);
    int64_t k = p->k, kb = (k + 127) / 128;
    memcpy((char *)a + (size_t)(r * k) * es, (const char *)p->a + (size_t)(t * k) * es, (size_t)k * es);
    switch (v->act_scale) {
    case QV_ASCALE_NONE: break;
    case QV_ASCALE_TENSOR: a_scale[0] = p->a_scale[0]; break;
    case QV_ASCALE_TOKEN: a_scale[r] = p->a_scale[t]; break;
    case QV_ASCALE_TOKEN_BLOCK:
        /* (ceil(k/128), m) MN-major: group b of token r at b * m + r */
        for (int64_t b = 0; b < kb; b++) a_scale[b * m + r] = p->a_scale[b * p->t + t];
        break;
    }
    if (v->azp == QV_AZP_TENSOR) azp[0] = p->azp[0];
    else if (v->azp == QV_AZP_TOKEN) azp[r] = p->azp[t];
}

qv_status qv_moe_subproblem(const qv_moe_problem *p, int i, const int64_t *rows, int64_t m, qv_problem *out)
{
    QV_ASSERT(i >= 0 && i < p->e_local + p->shared && m >= 1, "qv_moe_subproblem: expert or row count out of range");
    const qv_variant *v = p->s->expert;
    *out = p->w[i];
    out->m = m;
    out->a = NULL;
    out->a_scale = NULL;
    out->azp = NULL;
    size_t es = qv_fmt_storage_bytes(v->afmt);
    int64_t k = p->k;
    out->a = malloc((size_t)(m * k) * es);
    int64_t nas = ascale_count(v, m, k), naz = azp_count(v, m);
    if (nas) out->a_scale = malloc(sizeof(float) * (size_t)nas);
    if (naz) out->azp = malloc(sizeof(int32_t) * (size_t)naz);
    if (!out->a || (nas && !out->a_scale) || (naz && !out->azp)) {
        qv_moe_subproblem_destroy(out);
        return qv_fail(QV_ERR_NOMEM, "routed GEMM: out of memory gathering %lld tokens", (long long)m);
    }
    for (int64_t r = 0; r < m; r++) {
        QV_ASSERT(rows[r] >= 0 && rows[r] < p->t, "qv_moe_subproblem: a row outside the tokens");
        copy_token(p, rows[r], r, m, out->a, out->a_scale, out->azp);
    }
    return QV_OK;
}

qv_status qv_moe_problem_token(const qv_moe_problem *p, int64_t t, qv_moe_problem *out)
{
    QV_ASSERT(t >= 0 && t < p->t, "qv_moe_problem_token: a token outside the problem");
    QV_TRY(qv_moe_problem_create(out, p->s, 1, p->n, p->k, p->e, p->e_local, p->shared));
    size_t lb = qv_fmt_storage_bytes(p->s->logit_fmt), ab = qv_fmt_storage_bytes(p->s->expert->afmt);
    memcpy(out->logits, (const char *)p->logits + (size_t)(t * p->e) * lb, (size_t)p->e * lb);
    copy_token(p, t, 0, 1, out->a, out->a_scale, out->azp);
    memcpy(out->expert_map, p->expert_map, sizeof(int32_t) * (size_t)p->e);
    if (p->score_bias) memcpy(out->score_bias, p->score_bias, sizeof(float) * (size_t)p->e);
    if (p->shared_gate) memcpy(out->shared_gate, p->shared_gate, (size_t)(p->shared * p->k) * ab);
    qv_status st = QV_OK;
    for (int i = 0; i < p->e_local + p->shared && st == QV_OK; i++) {
        qv_problem_destroy(&out->w[i]);
        st = qv_problem_clone(&out->w[i], &p->w[i]);
    }
    if (st != QV_OK) qv_moe_problem_destroy(out);
    return st;
}

void qv_moe_subproblem_destroy(qv_problem *sub)
{
    free(sub->a);
    free(sub->a_scale);
    free(sub->azp);
    memset(sub, 0, sizeof *sub);
}

/* ---- the token sort ----------------------------------------------------------------- */

void qv_moe_sorted_destroy(qv_moe_sorted *s)
{
    if (!s) return;
    free(s->slot);
    free(s->block_expert);
    free(s->expert_start);
    memset(s, 0, sizeof *s);
}

qv_status qv_moe_sort(const qv_moe_problem *p, const int32_t *ids, int block, qv_moe_sorted *out)
{
    memset(out, 0, sizeof *out);
    if (block < 1 || block > 4096) return qv_fail(QV_ERR_USAGE, "token sort: block %d (1..4096)", block);
    int topk = p->s->topk, nx = p->e_local + p->shared, per = topk + p->shared;
    for (int64_t t = 0; t < p->t; t++)
        for (int c = 0; c < topk; c++) {
            int32_t e = ids[t * topk + c];
            if (e < 0 || e >= p->e)
                return qv_fail(QV_ERR_RANGE, "token %lld choice %d: expert %d outside 0..%d", (long long)t, c, (int)e,
                               p->e - 1);
            for (int d = 0; d < c; d++)
                if (ids[t * topk + d] == e)
                    return qv_fail(QV_ERR_RANGE, "token %lld takes expert %d twice", (long long)t, (int)e);
        }
    int64_t *count = calloc((size_t)nx, sizeof(int64_t));
    out->expert_start = calloc((size_t)nx + 1, sizeof(int64_t));
    if (!count || !out->expert_start) {
        free(count);
        qv_moe_sorted_destroy(out);
        return qv_fail(QV_ERR_NOMEM, "token sort: out of memory");
    }
    /* the expert of pair (t, c), or -1 when it is not local */
#if defined QV_MUTANT_moe_expert_map_ignored
    /* Mutant (class 28, vLLM #51632): the router's expert id taken as the local
     * index (the expert map skipped): non-local experts land on local ones. */
#define PAIR_EXPERT(t, c)                                                                                         \
    ((c) < topk ? (ids[(t) * topk + (c)] < p->e_local ? ids[(t) * topk + (c)] : -1) : p->e_local + (c) - topk)
#elif defined QV_MUTANT_moe_shared_dropped
    /* Mutant (class 28): the shared experts' pairs dropped from the sort. */
#define PAIR_EXPERT(t, c) ((c) < topk ? p->expert_map[ids[(t) * topk + (c)]] : -1)
#else
#define PAIR_EXPERT(t, c) ((c) < topk ? p->expert_map[ids[(t) * topk + (c)]] : p->e_local + (c) - topk)
#endif
    for (int64_t t = 0; t < p->t; t++)
        for (int c = 0; c < per; c++) {
            int32_t x = PAIR_EXPERT(t, c);
            if (x >= 0) count[x]++;
        }
    int64_t total = 0;
    for (int x = 0; x < nx; x++) {
        out->expert_start[x] = total;
        total += (count[x] + block - 1) / block * block;
    }
    out->expert_start[nx] = total;
    out->n_slots = total;
    out->block = block;
    out->slot = malloc(sizeof(int32_t) * (size_t)(total ? total : 1));
    out->block_expert = malloc(sizeof(int32_t) * (size_t)(total ? total / block : 1));
    if (!out->slot || !out->block_expert || (double)p->t * per > 2147483647.0) {
        free(count);
        int big = out->slot && out->block_expert;
        qv_moe_sorted_destroy(out);
        return big ? qv_fail(QV_ERR_SHAPE, "token sort: %lld pairs do not fit int32 slots", (long long)(p->t * per))
                   : qv_fail(QV_ERR_NOMEM, "token sort: out of memory");
    }
    for (int64_t i = 0; i < total; i++) out->slot[i] = -1;
    for (int x = 0; x < nx; x++) {
        for (int64_t b = out->expert_start[x] / block; b < out->expert_start[x + 1] / block; b++) out->block_expert[b] = x;
        count[x] = out->expert_start[x]; /* next free slot */
    }
    for (int64_t t = 0; t < p->t; t++)
        for (int c = 0; c < per; c++) {
            int32_t x = PAIR_EXPERT(t, c);
            if (x >= 0) out->slot[count[x]++] = (int32_t)(t * per + c);
        }
#undef PAIR_EXPERT
    free(count);
    return QV_OK;
}

/* ---- the routed rows ------------------------------------------------------------------ */

/* Shapes: the fused gate and up projection of one expert, N = 2 x the expert's
 * intermediate size, K = the hidden size (the models' published configs). */
static const qv_moe_row rows[] = {
    {.name = "moe-mixtral-w4a16-g128-f16",
     .summary = "Mixtral-8x7B-style: 8 experts, top-2 renormalized softmax, Marlin W4A16 g128 experts",
     .spec = "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2", .experts = 8, .shared = 0, .n = 28672,
     .k = 4096, .gpu_kernel = 1},
    {.name = "moe-qwen3-w4a16-g128-bf16",
     .summary = "Qwen3-MoE-style: 128 experts, top-8 renormalized softmax, W4A16 g128 bf16 experts",
     .spec = "w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=8", .experts = 128, .shared = 0,
     .n = 1536, .k = 2048, .gpu_kernel = 1},
    {.name = "moe-w4a16-actorder-f16",
     .summary = "8 experts, top-2 softmax without renormalization, W4A16 g128 act_order experts",
     .spec = "w=u4b8,ws=f16/g128,act=gidx,route=softmax-topk,topk=2", .experts = 8, .shared = 0, .n = 28672,
     .k = 4096, .gpu_kernel = 1},
    {.name = "moe-w4a16-channel-f16",
     .summary = "16 experts, top-4 then softmax, W4A16 channelwise experts",
     .spec = "w=u4b8,ws=f16/c,route=topk-softmax,topk=4", .experts = 16, .shared = 0, .n = 28672, .k = 4096,
     .gpu_kernel = 1},
    {.name = "moe-deepseek-fp8-b128-bf16",
     .summary = "DeepSeek-V3-style: 256 experts + 1 shared, top-8 renormalized sigmoid, rsf 2.5, fp8 block-128 "
                "(no groups or selection bias)",
     .spec = "w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p128,out=bf16,route=sigmoid-topk-renorm,topk=8,"
             "rsf=2.5",
     .experts = 256, .shared = 1, .n = 4096, .k = 7168, .gpu_kernel = 1},
    {.name = "moe-deepseekv3-grouped-fp8-b128-bf16",
     .summary = "DeepSeek-V3's whole router: 8 groups of 32, the 4 best by top-2 sum, top-8 sigmoid with a "
                "selection bias, renormalized, rsf 2.5; fp8 block-128",
     .spec = "w=e4m3,ws=f32/b128x128,a=e4m3,as=f32/tok-b128,acc=f8p128,out=bf16,route=sigmoid-topk-renorm,topk=8,"
             "rsf=2.5,groups=8,gtopk=4,sbias=f32",
     .experts = 256, .shared = 1, .n = 4096, .k = 7168, .gpu_kernel = 1},
    {.name = "moe-gptoss-mxfp4-bias-bf16",
     .summary = "gpt-oss-style: 32 experts, top-4 then softmax, MXFP4 experts with a bias",
     .spec = "w=e2m1,ws=e8m0/g32,a=bf16,bias=bf16,route=topk-softmax,topk=4", .experts = 32, .shared = 0,
     .n = 5760, .k = 2880, .gpu_kernel = 1},
    {.name = "moe-llama4-w4a16-g128-bf16",
     .summary = "Llama-4-Scout-style: 16 experts + 1 shared, top-1 sigmoid, the weight on the expert's input, "
                "the shared and routed products added in bf16; W4A16 g128 bf16 experts",
     .spec = "w=u4b8,ws=bf16/g128,a=bf16,route=sigmoid-topk,topk=1,rw=in,sum=out", .experts = 16, .shared = 1,
     .n = 16384, .k = 5120, .gpu_kernel = 1},
    {.name = "moe-qwen3next-w4a16-g128-bf16",
     .summary = "Qwen3-Next-style: 512 experts + 1 shared with a sigmoid gate, top-10 renormalized softmax, the "
                "weights on the bf16 products and the sum in bf16; W4A16 g128 bf16 experts",
     .spec = "w=u4b8,ws=bf16/g128,a=bf16,route=softmax-topk-renorm,topk=10,rw=out,sum=out,sgate=sigmoid",
     .experts = 512, .shared = 1, .n = 1024, .k = 2048, .gpu_kernel = 1},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

int qv_moe_row_count(void) { return N_ROWS; }
const qv_moe_row *qv_moe_row_get(int i) { return i >= 0 && i < N_ROWS ? &rows[i] : NULL; }

const qv_moe_row *qv_moe_row_find(const char *name)
{
    for (int i = 0; name && i < N_ROWS; i++)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    return NULL;
}

static qv_moe_spec row_specs[N_ROWS];
static int row_parsed[N_ROWS];
static pthread_mutex_t row_lock = PTHREAD_MUTEX_INITIALIZER;

qv_status qv_moe_row_spec(const qv_moe_row *r, const qv_moe_spec **out)
{
    int i = (int)(r - rows);
    QV_ASSERT(i >= 0 && i < N_ROWS, "qv_moe_row_spec: not a routed row");
    qv_status st = QV_OK;
    pthread_mutex_lock(&row_lock);
    if (!row_parsed[i]) {
        st = qv_moe_spec_parse(r->spec, &row_specs[i]);
        row_parsed[i] = st == QV_OK;
    }
    pthread_mutex_unlock(&row_lock);
    *out = st == QV_OK ? &row_specs[i] : NULL;
    return st;
}
