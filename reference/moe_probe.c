/* moe_probe.c: generated routed cases (moe.h: ref_moe_fill). The routing cases
 * aim at the places routing goes wrong: ties and near ties at the top-k
 * boundary, one expert taking every token, experts nobody takes, exponentials
 * that underflow, masked (-Inf) experts, tokens whose experts all live on
 * another rank, scores far below 1, and with a selection bias (sbias=f32)
 * ties of (logit, bias) across groups and selection scores all below 0.
 * Each expert's weights and the activations come from the GEMM
 * probes (probe.h), filled per expert with its own seed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/moe.h"

static const char *const logit_names[QV_LOGITS_COUNT] = {"random", "ties",   "near-ties", "one-expert", "empty",
                                                         "wide",   "masked", "nonlocal",  "low-scores"};

const char *qv_moe_logits_name(qv_moe_logits c) { return (unsigned)c < QV_LOGITS_COUNT ? logit_names[c] : "?"; }

qv_moe_logits qv_moe_logits_from_name(const char *n)
{
    for (int i = 0; i < QV_LOGITS_COUNT; i++)
        if (n && !strcmp(n, logit_names[i])) return (qv_moe_logits)i;
    return QV_LOGITS_COUNT;
}

/* splitmix64: a pure function of the seed */
typedef struct rng {
    uint64_t s;
} rng;
static uint64_t next(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(rng *r) { return (double)(next(r) >> 11) * 0x1p-53; }
static int below(rng *r, int n) { return (int)(next(r) % (uint64_t)n); }

/* Stores x as a logit code of the problem's format (RNE). */
static void put_logit(qv_moe_problem *p, int64_t t, int j, double x)
{
    int64_t i = t * p->e + j;
    if (p->s->logit_fmt == QV_FMT_F32) ((float *)p->logits)[i] = (float)x;
    else ((uint16_t *)p->logits)[i] = (uint16_t)qv_encode(p->s->logit_fmt, x, QV_SAT_FINITE);
}
static double get_logit(const qv_moe_problem *p, int64_t t, int j)
{
    int64_t i = t * p->e + j;
    if (p->s->logit_fmt == QV_FMT_F32) return ((const float *)p->logits)[i];
    return qv_decode(p->s->logit_fmt, ((const uint16_t *)p->logits)[i]);
}

/* The next code of the logit format above x (x finite). */
static double code_above(qv_fmt f, double x)
{
    if (f == QV_FMT_F32) return nextafterf((float)x, INFINITY);
    uint32_t c = qv_encode(f, x, QV_SAT_FINITE);
    /* sign-magnitude 16-bit codes: one step toward +Inf */
    if (x >= 0) return qv_decode(f, c + 1);
    return qv_decode(f, (c & 0x7FFF) == 0 ? 0u : c - 1);
}

static qv_status fill_map(qv_moe_problem *p, rng *r)
{
    int e = p->e;
    if (p->e_local == e) {
        for (int j = 0; j < e; j++) p->expert_map[j] = j;
        return QV_OK;
    }
    int *perm = malloc(sizeof(int) * (size_t)e);
    if (!perm) return qv_fail(QV_ERR_NOMEM, "out of memory");
    for (int j = 0; j < e; j++) perm[j] = j;
    for (int j = e - 1; j > 0; j--) {
        int i = below(r, j + 1), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int j = 0; j < e; j++) p->expert_map[j] = -1;
    /* the first e_local of the shuffle are local, numbered in router order */
    int *is_local = calloc((size_t)e, sizeof(int));
    if (!is_local) {
        free(perm);
        return qv_fail(QV_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < p->e_local; i++) is_local[perm[i]] = 1;
    for (int j = 0, x = 0; j < e; j++)
        if (is_local[j]) p->expert_map[j] = x++;
    free(perm);
    free(is_local);
    return QV_OK;
}

/* sigma(l) + b in double: the selection score of a biased sigmoid route. */
static double biased_key(const qv_moe_problem *p, int64_t t, int j)
{
    return 1.0 / (1.0 + exp(-get_logit(p, t, j))) + (double)p->score_bias[j];
}

/* order[0..k] the k + 1 best experts of token t, by logit or (biased) by
 * sigma(l) + b, best first: a partial selection sort. order: (e). */
static void order_top(const qv_moe_problem *p, int64_t t, int *order, int biased)
{
    int e = p->e, k = p->s->topk;
    for (int j = 0; j < e; j++) order[j] = j;
    for (int a = 0; a <= k; a++)
        for (int b = a + 1; b < e; b++) {
            double kb = biased ? biased_key(p, t, order[b]) : get_logit(p, t, order[b]);
            double ka = biased ? biased_key(p, t, order[a]) : get_logit(p, t, order[a]);
            if (kb > ka) {
                int x = order[a];
                order[a] = order[b];
                order[b] = x;
            }
        }
}

/* With a selection bias, a near tie of the selection scores: the expert
 * ranked k-th by sigma(l) + b gets the logit whose score is the (k+1)-th's,
 * one code up, when such a logit exists. order: (e) scratch. */
static void near_tie_biased(qv_moe_problem *p, int64_t t, int *order)
{
    int k = p->s->topk;
    order_top(p, t, order, 1);
    int hi = order[k - 1], lo = order[k];
    double target = biased_key(p, t, lo) - (double)p->score_bias[hi];
    if (!(target > 0.0 && target < 1.0)) return;
    double l = log(target / (1.0 - target));
    if (!(fabs(l) < 60.0)) return;
    put_logit(p, t, hi, l);
    if (biased_key(p, t, hi) < biased_key(p, t, lo)) put_logit(p, t, hi, code_above(p->s->logit_fmt, get_logit(p, t, hi)));
}

/* The selection bias: with the ties logits a few dyadic values repeating in
 * every group (so that groups tie exactly), all in [-2, -1] with the
 * low-scores logits, else uniform in [-1/4, 1/4]. */
static void fill_bias(qv_moe_problem *p, qv_moe_logits c, rng *r)
{
    int e = p->e, per = p->s->groups ? e / p->s->groups : e;
    for (int j = 0; j < e; j++) {
        double b;
        if (c == QV_LOGITS_TIES) b = 0.125 * (double)((j % per) % 3) - 0.125;
        else if (c == QV_LOGITS_LOW_SCORES) b = -1.0 - unif(r);
        else b = 0.5 * unif(r) - 0.25;
        p->score_bias[j] = (float)b;
    }
}

/* sgate: each shared expert's gate vector, uniform in [-1, 1] times 4 / (K
 * mean |x|), so that a token's gate logit x . g is of order 1 and its sigmoid
 * away from 0 and 1; in the activation format. */
static void fill_gate(qv_moe_problem *p, rng *r)
{
    const qv_fmt af = p->s->expert->afmt;
    const uint16_t *a = p->a;
    double sum = 0;
    for (int64_t i = 0; i < p->t * p->k; i++) sum += fabs(qv_decode(af, a[i]));
    double mean = sum / (double)(p->t * p->k), scale = mean > 0 ? 4.0 / ((double)p->k * mean) : 1.0;
    uint16_t *g = p->shared_gate;
    for (int64_t i = 0; i < p->shared * p->k; i++)
        g[i] = (uint16_t)qv_encode(af, (2.0 * unif(r) - 1.0) * scale, QV_SAT_FINITE);
}

static qv_status fill_logits(qv_moe_problem *p, qv_moe_logits c, rng *r)
{
    int e = p->e, k = p->s->topk;
    int *order = malloc(sizeof(int) * (size_t)e);
    if (!order) return qv_fail(QV_ERR_NOMEM, "out of memory");
    int nonlocal = 0;
    for (int j = 0; j < e; j++) nonlocal += p->expert_map[j] < 0;
    if (c == QV_LOGITS_NONLOCAL && nonlocal < k) {
        free(order);
        return qv_fail(QV_ERR_UNSUPPORTED, "logits 'nonlocal' need at least topk=%d experts mapped -1 (%d are)", k,
                       nonlocal);
    }
    int star = below(r, e);
    for (int64_t t = 0; t < p->t; t++) {
        for (int j = 0; j < e; j++) {
            double x = 8.0 * unif(r) - 4.0;
            switch (c) {
            case QV_LOGITS_TIES: x = (double)below(r, 4); break;
            case QV_LOGITS_ONE_EXPERT: x = j == star ? 20.0 : x; break;
            case QV_LOGITS_EMPTY: x = j >= (e + 1) / 2 ? x - 40.0 : x; break;
            case QV_LOGITS_WIDE: x = 240.0 * unif(r) - 120.0; break;
            case QV_LOGITS_NONLOCAL: x = p->expert_map[j] < 0 ? x + 40.0 : x; break;
            case QV_LOGITS_LOW_SCORES: x = 10.0 * unif(r) - 30.0; break;
            default: break;
            }
            put_logit(p, t, j, x);
        }
        if (c == QV_LOGITS_MASKED) {
            int masked = (e - k) < e / 4 ? e - k : e / 4;
            for (int i = 0; i < masked; i++) put_logit(p, t, below(r, e), -INFINITY);
            /* keep at least k finite: unmask from the front if the draws hit fewer */
            int finite = 0;
            for (int j = 0; j < e; j++) finite += isfinite(get_logit(p, t, j));
            for (int j = 0; j < e && finite < k; j++)
                if (!isfinite(get_logit(p, t, j))) {
                    put_logit(p, t, j, 0.5);
                    finite++;
                }
        }
        if (c == QV_LOGITS_NEAR_TIES && k < e && p->s->sbias) {
            near_tie_biased(p, t, order);
        } else if (c == QV_LOGITS_NEAR_TIES && k < e) {
            /* the k-th largest set one code above the (k+1)-th */
            order_top(p, t, order, 0);
            put_logit(p, t, order[k - 1], code_above(p->s->logit_fmt, get_logit(p, t, order[k])));
        }
    }
    free(order);
    return QV_OK;
}

qv_status ref_moe_fill(qv_moe_problem *p, qv_moe_logits logits, qv_probe_kind kind, qv_regime regime,
                       uint64_t seed)
{
    if ((unsigned)logits >= QV_LOGITS_COUNT) return qv_fail(QV_ERR_USAGE, "unknown logits case %d", (int)logits);
    /* fp4-scale-ends scales the activations of each group row by the
     * reciprocal of that row's largest block scale; with e8m0 scales which
     * end a row takes follows from its index alone (probe.c), the same in
     * every expert's draw and in the activations' own (an ordinary row's
     * largest scale is 1 but with probability 0.8^n, which would cost the
     * case its exact sums, not its verdict). */
    const int mx_ends = kind == QV_PROBE_FP4_SCALE_ENDS && p->s->expert->sfmt == QV_FMT_E8M0;
    /* The split-K witness's activations are fixed by K alone and every
     * expert's weights make the same three products with them (each
     * expert's product is exactly 1 in every column), so one activation
     * draw serves all experts. */
    const int splitk = kind == QV_PROBE_WITNESS_SPLITK;
    if (kind != QV_PROBE_EXACT && kind != QV_PROBE_ONEHOT && kind != QV_PROBE_RANDOM && !mx_ends && !splitk)
        return qv_fail(QV_ERR_UNSUPPORTED, "probe %s ties the activations to one weight matrix; a routed case "
                       "takes exact, onehot, random or witness-splitk (and fp4-scale-ends with e8m0 scales)",
                       qv_probe_name(kind));
    if (splitk && !ref_probe_applies(p->s->expert, kind, p->t, p->n, p->k))
        return qv_fail(QV_ERR_UNSUPPORTED, "probe witness-splitk does not apply to %s at K = %lld",
                       p->s->expert->name, (long long)p->k);
    rng r = {seed ^ 0x6D6F65ull};
    QV_TRY(fill_map(p, &r));
    if (p->s->sbias) fill_bias(p, logits, &r);
    QV_TRY(fill_logits(p, logits, &r));
    const qv_variant *v = p->s->expert;
    qv_problem acts;
    QV_TRY(qv_problem_create(&acts, v, p->t, p->n, p->k));
    qv_status st = ref_probe_fill(&acts, kind, regime, seed);
    if (st == QV_OK) {
        memcpy(p->a, acts.a, (size_t)(p->t * p->k) * qv_fmt_storage_bytes(v->afmt));
        int64_t nas = qv_problem_ascale_count(&acts);
        if (nas) memcpy(p->a_scale, acts.a_scale, sizeof(float) * (size_t)nas);
        int64_t naz = v->azp == QV_AZP_TENSOR ? 1 : v->azp == QV_AZP_TOKEN ? p->t : 0;
        if (naz) memcpy(p->azp, acts.azp, sizeof(int32_t) * (size_t)naz);
    }
    qv_problem_destroy(&acts);
    if (st == QV_OK && p->shared_gate) fill_gate(p, &r);
    for (int x = 0; x < p->e_local + p->shared && st == QV_OK; x++)
        st = ref_probe_fill(&p->w[x], kind, regime, seed * 0x100000001B3ull + (uint64_t)x + 1);
    return st;
}
