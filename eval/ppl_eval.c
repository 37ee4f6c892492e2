/* ppl_eval.c: the chunked perplexity protocol of llama.cpp (eval.h,
 * qv_ppl_eval): the fp32 baseline and the evaluated backend run on the same
 * chunks, and every scored position adds one entry to the statistics. */
#include <stdlib.h>
#include <string.h>

#include "qvet/eval.h"

qv_status qv_ppl_eval(const qv_llama *m, const qv_linear_backend *lb, const int32_t *tokens, int64_t n_tokens,
                      int ctx, int chunks, int bos, qv_ppl_acc *acc, double *layer_err, double *layer_ref)
{
    const qv_llama_config *c = &m->c;
    if (ctx < 4) return qv_fail(QV_ERR_USAGE, "--ctx %d is too small (at least 4)", ctx);
    int64_t avail = n_tokens / ctx;
    if (avail < 1)
        return qv_fail(QV_ERR_USAGE, "the text has %lld tokens, fewer than one chunk of %d", (long long)n_tokens, ctx);
    int64_t n_chunks = chunks > 0 && chunks < avail ? chunks : avail;
    size_t T = (size_t)ctx, V = (size_t)c->vocab, D = (size_t)c->dim, L = (size_t)c->n_layers;
    qv_linear_backend base = qv_linear_fp32();
    int32_t *chunk = malloc(sizeof(int32_t) * T);
    float *lb_logits = malloc(sizeof(float) * T * V), *lq_logits = lb ? malloc(sizeof(float) * T * V) : NULL;
    float *ob = malloc(sizeof(float) * L * T * D), *oq = lb ? malloc(sizeof(float) * L * T * D) : NULL;
    qv_status st = QV_OK;
    if (!chunk || !lb_logits || !ob || (lb && (!lq_logits || !oq))) {
        st = qv_fail(QV_ERR_NOMEM, "no memory for a chunk of %d tokens", ctx);
        goto done;
    }
    for (int64_t ci = 0; ci < n_chunks; ci++) {
        memcpy(chunk, tokens + ci * ctx, sizeof(int32_t) * T);
        if (bos >= 0) chunk[0] = bos;
        if ((st = qv_llama_forward(m, &base, chunk, ctx, lb_logits, ob)) != QV_OK) goto done;
        const float *zq = lb_logits;
        const float *oqq = ob;
        if (lb) {
            if ((st = qv_llama_forward(m, lb, chunk, ctx, lq_logits, oq)) != QV_OK) goto done;
            zq = lq_logits;
            oqq = oq;
        }
        for (int j = ctx / 2; j < ctx - 1; j++)
            qv_ppl_acc_add(acc, zq + (size_t)j * V, lb_logits + (size_t)j * V, c->vocab, tokens[ci * ctx + j + 1]);
        for (size_t l = 0; l < L; l++) {
            double e = 0, r = 0;
            for (size_t i = 0; i < T * D; i++) {
                double b = ob[l * T * D + i], d = (double)oqq[l * T * D + i] - b;
                e += d * d;
                r += b * b;
            }
            if (layer_err) layer_err[l] += e;
            if (layer_ref) layer_ref[l] += r;
        }
    }
done:
    free(chunk); free(lb_logits); free(lq_logits); free(ob); free(oq);
    return st;
}
