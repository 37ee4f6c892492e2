/* ppl_eval.c: the chunked perplexity protocol of llama.cpp (eval.h,
 * qv_ppl_eval): the fp32 baseline and the evaluated backend run on the same
 * chunks, and every scored position adds one entry to the statistics. The
 * baseline of a chunk is kept (qv_ppl_base) so that it runs once however many
 * variants are compared with it. */
#include <stdlib.h>
#include <string.h>

#include "internal/eval.h"

#include "eval_internal.h"

qv_status qv_ppl_chunks(int64_t n_tokens, int ctx, int chunks, int64_t *n_chunks)
{
    if (ctx < 4) return qv_fail(QV_ERR_USAGE, "--ctx %d is too small (at least 4)", ctx);
    int64_t avail = n_tokens / ctx;
    if (avail < 1)
        return qv_fail(QV_ERR_USAGE, "the text has %lld tokens, fewer than one chunk of %d", (long long)n_tokens, ctx);
    *n_chunks = chunks > 0 && chunks < avail ? chunks : avail;
    return QV_OK;
}

void qv_ppl_base_free(qv_ppl_base *b)
{
    if (!b) return;
    free(b->chunk); free(b->target); free(b->logits); free(b->p); free(b->lse); free(b->argmax);
    free(b->layer_out); free(b->layer_ref); free(b->scratch_logits); free(b->scratch_out);
    memset(b, 0, sizeof *b);
}

typedef struct sq_job {
    const float *out;       /* (n_layers, len) baseline block outputs */
    const float *q;         /* (n_layers, len) evaluated block outputs, or NULL */
    size_t len;
    double *r;              /* (n_layers) */
} sq_job;

/* Squared norm of the baseline's block outputs, layers [lo, hi). */
static void ref_layers(void *vj, int64_t lo, int64_t hi)
{
    const sq_job *j = vj;
    for (int64_t l = lo; l < hi; l++) {
        const float *b = j->out + (size_t)l * j->len;
        double r = 0;
        for (size_t i = 0; i < j->len; i++) r += (double)b[i] * b[i];
        j->r[l] = r;
    }
}

/* Squared error of the evaluated block outputs against the baseline's. */
static void err_layers(void *vj, int64_t lo, int64_t hi)
{
    const sq_job *j = vj;
    for (int64_t l = lo; l < hi; l++) {
        const float *b = j->out + (size_t)l * j->len, *q = j->q + (size_t)l * j->len;
        double e = 0;
        for (size_t i = 0; i < j->len; i++) {
            double d = (double)q[i] - b[i];
            e += d * d;
        }
        j->r[l] = e;
    }
}

qv_status qv_ppl_base_compute(const qv_llama *m, const int32_t *tokens, int64_t n_tokens, int ctx, int64_t ci,
                              int bos, qv_ppl_base *b)
{
    memset(b, 0, sizeof *b);
    int64_t n_chunks = 0;
    QV_TRY(qv_ppl_chunks(n_tokens, ctx, 0, &n_chunks));
    if (ci < 0 || ci >= n_chunks)
        return qv_fail(QV_ERR_USAGE, "chunk %lld is outside the %lld chunks of the text", (long long)ci, (long long)n_chunks);
    const qv_llama_config *c = &m->c;
    b->ctx = ctx;
    b->vocab = c->vocab;
    b->n_layers = c->n_layers;
    b->dim = c->dim;
    b->first = ctx / 2;
    b->n_scored = ctx - 1 - ctx / 2;
    size_t T = (size_t)ctx, V = (size_t)c->vocab, D = (size_t)c->dim, L = (size_t)c->n_layers, S = (size_t)b->n_scored;
    b->chunk = malloc(sizeof(int32_t) * T);
    b->target = malloc(sizeof(int32_t) * S);
    b->scratch_logits = malloc(sizeof(float) * T * V);
    b->logits = malloc(sizeof(float) * S * V);
    b->p = malloc(sizeof(double) * S * V);
    b->lse = malloc(sizeof(double) * S);
    b->argmax = malloc(sizeof(int32_t) * S);
    b->layer_out = malloc(sizeof(float) * L * T * D);
    b->scratch_out = malloc(sizeof(float) * L * T * D);
    b->layer_ref = malloc(sizeof(double) * L);
    if (!b->chunk || !b->target || !b->scratch_logits || !b->logits || !b->p || !b->lse || !b->argmax ||
        !b->layer_out || !b->scratch_out || !b->layer_ref) {
        qv_ppl_base_free(b);
        return qv_fail(QV_ERR_NOMEM, "no memory for the baseline of a chunk of %d tokens", ctx);
    }
    memcpy(b->chunk, tokens + ci * ctx, sizeof(int32_t) * T);
    if (bos >= 0) b->chunk[0] = bos;
    for (int j = 0; j < b->n_scored; j++) b->target[j] = tokens[ci * ctx + b->first + j + 1];
    qv_linear_backend base = qv_linear_fp32();
    qv_status st = qv_llama_forward(m, &base, b->chunk, ctx, b->scratch_logits, b->layer_out);
    if (st != QV_OK) { qv_ppl_base_free(b); return st; }
    memcpy(b->logits, b->scratch_logits + (size_t)b->first * V, sizeof(float) * S * V);
    ev_ppl_base_stats(b);
    sq_job j = {b->layer_out, NULL, T * D, b->layer_ref};
    ev_parallel_for((int64_t)L, 1, ref_layers, &j);
    return QV_OK;
}

qv_status qv_ppl_eval_chunk(const qv_llama *m, const qv_linear_backend *lb, qv_ppl_base *b, qv_ppl_acc *acc,
                            double *layer_err, double *layer_ref)
{
    size_t V = (size_t)b->vocab, L = (size_t)b->n_layers, TD = (size_t)b->ctx * (size_t)b->dim;
    if (m->c.vocab != b->vocab || m->c.n_layers != b->n_layers || m->c.dim != b->dim)
        return qv_fail(QV_ERR_SHAPE, "the baseline of the chunk belongs to another model");
    if (!lb) {
        /* The baseline against itself: every error is exactly zero. */
        qv_ppl_acc_add_chunk(acc, b->logits, b);
        for (size_t l = 0; l < L; l++) {
            if (layer_err) layer_err[l] += 0.0;
            if (layer_ref) layer_ref[l] += b->layer_ref[l];
        }
        return QV_OK;
    }
    QV_TRY(qv_llama_forward(m, lb, b->chunk, b->ctx, b->scratch_logits, b->scratch_out));
    qv_ppl_acc_add_chunk(acc, b->scratch_logits + (size_t)b->first * V, b);
    double *e = malloc(sizeof(double) * L);
    if (!e) return qv_fail(QV_ERR_NOMEM, "no memory");
    sq_job j = {b->layer_out, b->scratch_out, TD, e};
    ev_parallel_for((int64_t)L, 1, err_layers, &j);
    for (size_t l = 0; l < L; l++) {
        if (layer_err) layer_err[l] += e[l];
        if (layer_ref) layer_ref[l] += b->layer_ref[l];
    }
    free(e);
    return QV_OK;
}

qv_status qv_ppl_eval(const qv_llama *m, const qv_linear_backend *lb, const int32_t *tokens, int64_t n_tokens,
                      int ctx, int chunks, int bos, qv_ppl_acc *acc, double *layer_err, double *layer_ref)
{
    int64_t n_chunks = 0;
    QV_TRY(qv_ppl_chunks(n_tokens, ctx, chunks, &n_chunks));
    for (int64_t ci = 0; ci < n_chunks; ci++) {
        qv_ppl_base b;
        QV_TRY(qv_ppl_base_compute(m, tokens, n_tokens, ctx, ci, bos, &b));
        qv_status st = qv_ppl_eval_chunk(m, lb, &b, acc, layer_err, layer_ref);
        qv_ppl_base_free(&b);
        if (st != QV_OK) return st;
    }
    return QV_OK;
}
