/* ppl_stats.c: the statistics of llama.cpp's perplexity tool (eval.h), computed
 * from per-position values in double:
 *   nll       = logsumexp(z) - z[target]
 *   PPL       = exp(mean nll) +- PPL * stderr(nll), stderr = sqrt(var / (N-1))
 *   dPPL      = PPL - PPL_base, paired: stderr^2 = PPL^2 s^2 + PPL_b^2 s_b^2
 *               - 2 PPL PPL_b cov(mean nll, mean nll_base)
 *   KLD       = sum_v p_base(v) (log p_base(v) - log p(v)), mean +- stderr,
 *               p99 (nearest rank) and max
 *   same top1 = fraction of positions whose argmax agrees, +- sqrt(p(1-p)/(N-1))
 *   RMS dp    = sqrt(mean (p(target) - p_base(target))^2)
 * A chunk's rows can also be added at once against a baseline prepared once
 * (qv_ppl_base): the baseline's log-sum-exp, argmax and probabilities are then
 * computed once for all variants, and the rows run on the thread pool; every
 * value is computed by the same expressions as qv_ppl_acc_add, so both give
 * the same bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal/eval.h"

#include "eval_internal.h"

void qv_ppl_acc_init(qv_ppl_acc *a)
{
    memset(a, 0, sizeof *a);
}

void qv_ppl_acc_clear(qv_ppl_acc *a)
{
    free(a->nll);
    free(a->nll_base);
    free(a->kld);
    free(a->dp);
    memset(a, 0, sizeof *a);
}

/* log-sum-exp of z (vocab) in double, and the index of the largest entry. */
static double lse_argmax(const float *z, int vocab, int *arg)
{
    int am = 0;
    for (int i = 1; i < vocab; i++)
        if (z[i] > z[am]) am = i;
    double mx = z[am], s = 0;
    for (int i = 0; i < vocab; i++) s += exp((double)z[i] - mx);
    *arg = am;
    return mx + log(s);
}

/* Makes room for `more` entries. */
static void acc_reserve(qv_ppl_acc *a, int64_t more)
{
    if (a->n + more <= a->cap) return;
    while (a->n + more > a->cap) a->cap = a->cap ? 2 * a->cap : 1024;
    a->nll = realloc(a->nll, sizeof(double) * (size_t)a->cap);
    a->nll_base = realloc(a->nll_base, sizeof(double) * (size_t)a->cap);
    a->kld = realloc(a->kld, sizeof(double) * (size_t)a->cap);
    a->dp = realloc(a->dp, sizeof(double) * (size_t)a->cap);
    QV_ASSERT(a->nll && a->nll_base && a->kld && a->dp, "out of memory in the perplexity statistics");
}

void qv_ppl_acc_add(qv_ppl_acc *a, const float *logits, const float *base_logits, int vocab, int target)
{
    QV_ASSERT(target >= 0 && target < vocab, "qv_ppl_acc_add: target outside the vocabulary");
    acc_reserve(a, 1);
    int am, amb;
    double lse = lse_argmax(logits, vocab, &am), lseb = lse_argmax(base_logits, vocab, &amb);
    double kld = 0;
    for (int i = 0; i < vocab; i++) {
        double lpb = (double)base_logits[i] - lseb, lp = (double)logits[i] - lse;
        kld += exp(lpb) * (lpb - lp);
    }
    int64_t n = a->n++;
    a->nll[n] = lse - (double)logits[target];
    a->nll_base[n] = lseb - (double)base_logits[target];
    a->kld[n] = kld;
    a->dp[n] = exp(-a->nll[n]) - exp(-a->nll_base[n]);
    a->same_top1 += am == amb;
}

/* Baseline rows [lo, hi) of a chunk: log-sum-exp, argmax, probabilities. */
static void base_rows(void *vb, int64_t lo, int64_t hi)
{
    qv_ppl_base *b = vb;
    size_t V = (size_t)b->vocab;
    for (int64_t j = lo; j < hi; j++) {
        const float *z = b->logits + (size_t)j * V;
        int am;
        double lse = lse_argmax(z, b->vocab, &am);
        b->lse[j] = lse;
        b->argmax[j] = am;
        for (size_t i = 0; i < V; i++) b->p[(size_t)j * V + i] = exp((double)z[i] - lse);
    }
}

void ev_ppl_base_stats(qv_ppl_base *b)
{
    ev_parallel_for(b->n_scored, 1, base_rows, b);
}

typedef struct chunk_job {
    const float *logits;        /* (n_scored, vocab) */
    const qv_ppl_base *b;
    double *nll, *nll_base, *kld, *dp;
    int *same;
} chunk_job;

static void chunk_rows(void *vj, int64_t lo, int64_t hi)
{
    const chunk_job *c = vj;
    const qv_ppl_base *b = c->b;
    size_t V = (size_t)b->vocab;
    for (int64_t j = lo; j < hi; j++) {
        const float *z = c->logits + (size_t)j * V, *zb = b->logits + (size_t)j * V;
        const double *pb = b->p + (size_t)j * V;
        int am;
        double lse = lse_argmax(z, b->vocab, &am), lseb = b->lse[j];
        double kld = 0;
        for (size_t i = 0; i < V; i++) {
            double lpb = (double)zb[i] - lseb, lp = (double)z[i] - lse;
            kld += pb[i] * (lpb - lp);
        }
        int target = b->target[j];
        c->nll[j] = lse - (double)z[target];
        c->nll_base[j] = lseb - (double)zb[target];
        c->kld[j] = kld;
        c->dp[j] = exp(-c->nll[j]) - exp(-c->nll_base[j]);
        c->same[j] = am == b->argmax[j];
    }
}

void qv_ppl_acc_add_chunk(qv_ppl_acc *a, const float *logits, const qv_ppl_base *b)
{
    int64_t ns = b->n_scored;
    acc_reserve(a, ns);
    int *same = malloc(sizeof(int) * (size_t)(ns > 0 ? ns : 1));
    QV_ASSERT(same != NULL, "out of memory in the perplexity statistics");
    chunk_job c = {logits, b, a->nll + a->n, a->nll_base + a->n, a->kld + a->n, a->dp + a->n, same};
    ev_parallel_for(ns, 1, chunk_rows, &c);
    for (int64_t j = 0; j < ns; j++) a->same_top1 += same[j];
    a->n += ns;
    free(same);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

void qv_ppl_stats_compute(const qv_ppl_acc *a, qv_ppl_stats *s)
{
    memset(s, 0, sizeof *s);
    int64_t n = a->n;
    s->n = n;
    if (n == 0) return;
    double ma = 0, mb = 0, maa = 0, mbb = 0, mab = 0, mk = 0, mkk = 0, mdp = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = a->nll[i], y = a->nll_base[i], k = a->kld[i];
        ma += x; mb += y; maa += x * x; mbb += y * y; mab += x * y;
        mk += k; mkk += k * k; mdp += a->dp[i] * a->dp[i];
    }
    ma /= n; mb /= n; maa /= n; mbb /= n; mab /= n; mk /= n; mkk /= n; mdp /= n;
    /* Standard errors of the means need N-1; one position leaves them at 0. */
    double d = n > 1 ? (double)(n - 1) : INFINITY;
    double sa = sqrt(fmax(maa - ma * ma, 0) / d), sb = sqrt(fmax(mbb - mb * mb, 0) / d);
    double cov = (mab - ma * mb) / d;
    s->ppl = exp(ma);
    s->ppl_stderr = s->ppl * sa;
    s->ppl_base = exp(mb);
    s->dppl = s->ppl - s->ppl_base;
    double v = s->ppl * s->ppl * sa * sa + s->ppl_base * s->ppl_base * sb * sb - 2 * s->ppl * s->ppl_base * cov;
    s->dppl_stderr = sqrt(fmax(v, 0));
    s->kld_mean = mk;
    s->kld_stderr = sqrt(fmax(mkk - mk * mk, 0) / d);
    double *sorted = malloc(sizeof(double) * (size_t)n);
    QV_ASSERT(sorted != NULL, "out of memory in the perplexity statistics");
    memcpy(sorted, a->kld, sizeof(double) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(double), cmp_double);
    int64_t r = (int64_t)ceil(0.99 * (double)n) - 1; /* nearest rank of the 99th percentile */
    s->kld_p99 = sorted[r < 0 ? 0 : r];
    s->kld_max = sorted[n - 1];
    free(sorted);
    s->same_top1 = (double)a->same_top1 / (double)n;
    s->same_top1_stderr = sqrt(s->same_top1 * (1 - s->same_top1) / d);
    s->rms_dp = sqrt(mdp);
}
