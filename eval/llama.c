/* llama.c: a llama-architecture forward pass in f32 (eval.h), top to bottom in
 * the manner of llama2.c: embeddings, then per block RMSNorm -> Q, K, V ->
 * RoPE -> causal grouped-query attention -> O -> residual, RMSNorm -> SwiGLU
 * feed-forward -> residual, then the final RMSNorm and the output projection
 * (tied to the embeddings when the file has no output.weight). The seven linear layers of each block go through a backend
 * (fp32 OpenBLAS, a variant's CPU model or its GPU kernel); the output
 * projection always runs in f32, so only the variant's linear layers differ. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/eval.h"

#include "eval_internal.h"

void qv_llama_lin_shape(const qv_llama_config *c, qv_llama_lin which, int *n_in, int *n_out)
{
    int kv_dim = c->n_kv_heads * c->head_dim;
    switch (which) {
    case QV_LIN_Q: case QV_LIN_O: *n_in = c->dim; *n_out = c->dim; return;
    case QV_LIN_K: case QV_LIN_V: *n_in = c->dim; *n_out = kv_dim; return;
    case QV_LIN_GATE: case QV_LIN_UP: *n_in = c->dim; *n_out = c->hidden; return;
    case QV_LIN_DOWN: *n_in = c->hidden; *n_out = c->dim; return;
    case QV_LIN_COUNT: break;
    }
    QV_ASSERT(0, "qv_llama_lin_shape: unknown linear layer");
}

/* Reads tensor `name` as f32 after checking its ggml dims (ne0 contiguous). */
static qv_status load_tensor(const qv_gguf *g, const char *name, int64_t ne0, int64_t ne1, float **out)
{
    const qv_gguf_tensor *t = qv_gguf_tensor_find(g, name);
    if (!t) return qv_fail(QV_ERR_FORMAT, "model: tensor '%s' is missing", name);
    int64_t want_dims = ne1 > 0 ? 2 : 1;
    int64_t e1 = t->n_dims >= 2 ? t->ne[1] : 1;
    if (t->n_dims != want_dims || t->ne[0] != ne0 || (ne1 > 0 && e1 != ne1))
        return qv_fail(QV_ERR_SHAPE, "model: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name,
                       (long long)t->ne[0], (long long)e1, (long long)ne0, (long long)(ne1 > 0 ? ne1 : 1));
    *out = malloc(sizeof(float) * (size_t)t->nelem);
    if (!*out) return qv_fail(QV_ERR_NOMEM, "model: no memory for '%s'", name);
    return qv_gguf_tensor_f32(t, *out);
}

static qv_status get_dim(const qv_gguf *g, const char *key, int lo, int hi, int *out)
{
    uint64_t v;
    QV_TRY(qv_gguf_get_u64(g, key, &v));
    if (v < (uint64_t)lo || v > (uint64_t)hi)
        return qv_fail(QV_ERR_FORMAT, "model: %s = %llu is outside [%d, %d]", key, (unsigned long long)v, lo, hi);
    *out = (int)v;
    return QV_OK;
}

static qv_status load(const qv_gguf *g, qv_llama *m)
{
    qv_gguf_str arch;
    QV_TRY(qv_gguf_get_str(g, "general.architecture", &arch));
    if (arch.len != 5 || memcmp(arch.p, "llama", 5) != 0)
        return qv_fail(QV_ERR_UNSUPPORTED, "model: architecture '%.*s' is not supported (only llama)",
                       (int)(arch.len > 64 ? 64 : arch.len), arch.p);
    qv_llama_config *c = &m->c;
    /* The limits only keep later size products far from overflow. */
    QV_TRY(get_dim(g, "llama.embedding_length", 1, 1 << 16, &c->dim));
    QV_TRY(get_dim(g, "llama.feed_forward_length", 1, 1 << 18, &c->hidden));
    QV_TRY(get_dim(g, "llama.block_count", 1, 1024, &c->n_layers));
    QV_TRY(get_dim(g, "llama.attention.head_count", 1, 1024, &c->n_heads));
    c->n_kv_heads = c->n_heads;
    if (qv_gguf_find(g, "llama.attention.head_count_kv"))
        QV_TRY(get_dim(g, "llama.attention.head_count_kv", 1, 1024, &c->n_kv_heads));
    if (c->dim % c->n_heads || c->n_heads % c->n_kv_heads)
        return qv_fail(QV_ERR_SHAPE, "model: %d heads (%d kv) do not divide width %d", c->n_heads, c->n_kv_heads, c->dim);
    c->head_dim = c->dim / c->n_heads;
    c->rope_dim = c->head_dim;
    if (qv_gguf_find(g, "llama.rope.dimension_count"))
        QV_TRY(get_dim(g, "llama.rope.dimension_count", 2, c->head_dim, &c->rope_dim));
    if (c->rope_dim % 2) return qv_fail(QV_ERR_FORMAT, "model: odd rope dimension %d", c->rope_dim);
    double theta = 10000.0, eps; /* 10000: llama's rope base when the file names none */
    if (qv_gguf_find(g, "llama.rope.freq_base")) QV_TRY(qv_gguf_get_f64(g, "llama.rope.freq_base", &theta));
    QV_TRY(qv_gguf_get_f64(g, "llama.attention.layer_norm_rms_epsilon", &eps));
    if (!(theta > 1.0) || !(eps > 0.0 && eps < 1.0))
        return qv_fail(QV_ERR_FORMAT, "model: implausible rope base %g or rms epsilon %g", theta, eps);
    if (qv_gguf_find(g, "rope.scaling.type") || qv_gguf_find(g, "llama.rope.scaling.type"))
        return qv_fail(QV_ERR_UNSUPPORTED, "model: rope scaling is not supported");
    c->rope_theta = (float)theta;
    c->rms_eps = (float)eps;
    const qv_gguf_tensor *emb = qv_gguf_tensor_find(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return qv_fail(QV_ERR_FORMAT, "model: token_embd.weight is missing or not 2-D");
    if (emb->ne[1] > (1 << 24)) return qv_fail(QV_ERR_FORMAT, "model: vocabulary of %lld is implausible", (long long)emb->ne[1]);
    c->vocab = (int)emb->ne[1];
    QV_TRY(load_tensor(g, "token_embd.weight", c->dim, c->vocab, &m->tok_embd));
    QV_TRY(load_tensor(g, "output_norm.weight", c->dim, 0, &m->out_norm));
    if (qv_gguf_tensor_find(g, "output.weight")) {
        QV_TRY(load_tensor(g, "output.weight", c->dim, c->vocab, &m->output));
    } else {
        m->output = m->tok_embd;
        m->tied = 1;
    }
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return qv_fail(QV_ERR_NOMEM, "model: no memory");
    static const char *const lin_names[QV_LIN_COUNT] = {
        [QV_LIN_Q] = "attn_q", [QV_LIN_K] = "attn_k", [QV_LIN_V] = "attn_v", [QV_LIN_O] = "attn_output",
        [QV_LIN_GATE] = "ffn_gate", [QV_LIN_UP] = "ffn_up", [QV_LIN_DOWN] = "ffn_down"};
    for (int l = 0; l < c->n_layers; l++) {
        qv_llama_layer *L = &m->layers[l];
        char name[96];
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        QV_TRY(load_tensor(g, name, c->dim, 0, &L->attn_norm));
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
        QV_TRY(load_tensor(g, name, c->dim, 0, &L->ffn_norm));
        for (int w = 0; w < QV_LIN_COUNT; w++) {
            int n_in, n_out;
            qv_llama_lin_shape(c, (qv_llama_lin)w, &n_in, &n_out);
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, lin_names[w]);
            QV_TRY(load_tensor(g, name, n_in, n_out, &L->w[w]));
        }
    }
    return QV_OK;
}

void qv_llama_free(qv_llama *m)
{
    if (!m) return;
    if (m->layers) {
        for (int l = 0; l < m->c.n_layers; l++) {
            free(m->layers[l].attn_norm);
            free(m->layers[l].ffn_norm);
            for (int w = 0; w < QV_LIN_COUNT; w++) free(m->layers[l].w[w]);
        }
    }
    free(m->layers);
    if (!m->tied) free(m->output);
    free(m->tok_embd);
    free(m->out_norm);
    memset(m, 0, sizeof *m);
}

qv_status qv_llama_load(const qv_gguf *g, qv_llama *m)
{
    memset(m, 0, sizeof *m);
    qv_status st = load(g, m);
    if (st != QV_OK) qv_llama_free(m);
    return st;
}

/* --- The fp32 backend --------------------------------------------------------- */

static qv_status fp32_run(void *ctx, const qv_llama *m, int layer, qv_llama_lin which, const float *x, int t, float *y)
{
    int n_in, n_out;
    qv_llama_lin_shape(&m->c, which, &n_in, &n_out);
    /* y (t, n_out) = x (t, n_in) . W^T, W (n_out, n_in) row-major */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, n_out, n_in, 1.0f, x, n_in,
                m->layers[layer].w[which], n_in, 0.0f, y, n_out);
    return QV_OK;
}

qv_linear_backend qv_linear_fp32(void)
{
    return (qv_linear_backend){.run = fp32_run, .ctx = NULL, .name = "fp32"};
}

/* --- The forward pass ---------------------------------------------------------- */
/* The element-wise steps run on the thread pool (eval/parallel.c), each row or
 * element computed by one thread exactly as a serial loop would, so the
 * results do not depend on the number of threads. */

typedef struct norm_job {
    float *out;
    const float *x, *w;
    int dim;
    float eps;
} norm_job;

/* out (t, dim) = x (t, dim) / rms(x) * w (dim); the mean square summed in double. */
static void rmsnorm_rows(void *vj, int64_t lo, int64_t hi)
{
    const norm_job *j = vj;
    int dim = j->dim;
    for (int64_t i = lo; i < hi; i++) {
        const float *xi = j->x + (size_t)i * dim;
        double ss = 0;
        for (int c = 0; c < dim; c++) ss += (double)xi[c] * xi[c];
        float scale = 1.0f / sqrtf((float)(ss / dim) + j->eps);
        for (int c = 0; c < dim; c++) j->out[(size_t)i * dim + c] = xi[c] * scale * j->w[c];
    }
}

static void rmsnorm(float *out, const float *x, const float *w, int t, int dim, float eps)
{
    norm_job j = {out, x, w, dim, eps};
    ev_parallel_for(t, ev_grain(t, EV_ROW_GRAIN), rmsnorm_rows, &j);
}

/* Rotation table of ggml's "normal" rope, which llama GGUF files are converted
 * for: pair (2p, 2p+1) of the first rope_dim values of each head at position i
 * turns by the angle i * theta^(-2p/rope_dim). cs, sn: (t, rope_dim/2). */
static void rope_table(float *cs, float *sn, int t, int rope_dim, float theta)
{
    int half = rope_dim / 2;
    for (int i = 0; i < t; i++)
        for (int p = 0; p < half; p++) {
            double freq = pow((double)theta, -2.0 * p / rope_dim);
            double ang = (double)i * freq;
            cs[(size_t)i * half + p] = (float)cos(ang);
            sn[(size_t)i * half + p] = (float)sin(ang);
        }
}

typedef struct rope_job {
    float *v;
    const float *cs, *sn;
    int n_heads, head_dim, rope_dim;
} rope_job;

/* Rotates rows [lo, hi) of v (t, n_heads * head_dim) by the table. */
static void rope_rows(void *vj, int64_t lo, int64_t hi)
{
    const rope_job *j = vj;
    int half = j->rope_dim / 2;
    for (int64_t i = lo; i < hi; i++)
        for (int h = 0; h < j->n_heads; h++) {
            float *x = j->v + (size_t)i * j->n_heads * j->head_dim + (size_t)h * j->head_dim;
            const float *cr = j->cs + (size_t)i * half, *sr = j->sn + (size_t)i * half;
            for (int p = 0; p < half; p++) {
                float a = x[2 * p], b = x[2 * p + 1];
                x[2 * p] = a * cr[p] - b * sr[p];
                x[2 * p + 1] = a * sr[p] + b * cr[p];
            }
        }
}

static void rope(float *v, int t, int n_heads, int head_dim, int rope_dim, const float *cs, const float *sn)
{
    rope_job j = {v, cs, sn, n_heads, head_dim, rope_dim};
    ev_parallel_for(t, ev_grain(t, EV_ROW_GRAIN), rope_rows, &j);
}

typedef struct softmax_job {
    float *s;       /* (n_heads, t, t) */
    int t;
} softmax_job;

/* Causal softmax of rows [lo, hi) of s, row r = head * t + position. */
static void softmax_rows(void *vj, int64_t lo, int64_t hi)
{
    const softmax_job *j = vj;
    int t = j->t;
    for (int64_t row = lo; row < hi; row++) {
        int i = (int)(row % t);
        float *r = j->s + (size_t)row * t;
        float mx = r[0];
        for (int c = 1; c <= i; c++) mx = fmaxf(mx, r[c]);
        double sum = 0;
        for (int c = 0; c <= i; c++) { r[c] = expf(r[c] - mx); sum += r[c]; }
        for (int c = 0; c <= i; c++) r[c] = (float)(r[c] / sum);
        for (int c = i + 1; c < t; c++) r[c] = 0.0f;
    }
}

/* Causal grouped-query attention. q (t, n_heads*hd), k and v (t, n_kv*hd),
 * out (t, n_heads*hd); s: (n_heads, t, t) scratch. */
static void attention(const qv_llama_config *c, const float *q, const float *k, const float *v, int t,
                      float *s, float *out)
{
    int hd = c->head_dim, dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
    int group = c->n_heads / c->n_kv_heads;
    float scale = 1.0f / sqrtf((float)hd);
    size_t tt = (size_t)t * t;
    /* s_h (t, t) = q_h (t, hd) . k_kh^T * scale */
    for (int h = 0; h < c->n_heads; h++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hd, scale, q + (size_t)h * hd, dim,
                    k + (size_t)(h / group) * hd, kv_dim, 0.0f, s + h * tt, t);
    softmax_job j = {s, t};
    int64_t rows = (int64_t)c->n_heads * t;
    ev_parallel_for(rows, ev_grain(rows, EV_ROW_GRAIN), softmax_rows, &j);
    /* out_h (t, hd) = s_h (t, t) . v_kh (t, hd) */
    for (int h = 0; h < c->n_heads; h++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hd, t, 1.0f, s + h * tt, t,
                    v + (size_t)(h / group) * hd, kv_dim, 0.0f, out + (size_t)h * hd, dim);
}

typedef struct ew_job {
    float *x;
    const float *y;
} ew_job;

/* x += y over [lo, hi): the residual connection. */
static void add_range(void *vj, int64_t lo, int64_t hi)
{
    const ew_job *j = vj;
    for (int64_t i = lo; i < hi; i++) j->x[i] += j->y[i];
}

/* x = silu(x) * y over [lo, hi): SwiGLU's gate. */
static void swiglu_range(void *vj, int64_t lo, int64_t hi)
{
    const ew_job *j = vj;
    for (int64_t i = lo; i < hi; i++) j->x[i] = j->x[i] / (1.0f + expf(-j->x[i])) * j->y[i];
}

/* 4096 elements: below that a range costs more to hand out than to compute. */
#define EW_GRAIN 4096

static void ew(ev_range_fn fn, float *x, const float *y, size_t n)
{
    ew_job j = {x, y};
    ev_parallel_for((int64_t)n, ev_grain((int64_t)n, EW_GRAIN), fn, &j);
}

qv_status qv_llama_forward(const qv_llama *m, const qv_linear_backend *lb, const int32_t *tokens, int t,
                           float *logits, float *layer_out)
{
    const qv_llama_config *c = &m->c;
    int dim = c->dim, kv_dim = c->n_kv_heads * c->head_dim, hid = c->hidden;
    if (t < 1) return qv_fail(QV_ERR_USAGE, "forward: no tokens");
    for (int i = 0; i < t; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab)
            return qv_fail(QV_ERR_RANGE, "forward: token %d at position %d is outside the vocabulary", tokens[i], i);
    size_t T = (size_t)t, half = (size_t)c->rope_dim / 2;
    float *x = malloc(sizeof(float) * T * dim), *xn = malloc(sizeof(float) * T * dim);
    float *q = malloc(sizeof(float) * T * dim), *k = malloc(sizeof(float) * T * kv_dim);
    float *v = malloc(sizeof(float) * T * kv_dim), *att = malloc(sizeof(float) * T * dim);
    float *o = malloc(sizeof(float) * T * dim), *s = malloc(sizeof(float) * T * T * (size_t)c->n_heads);
    float *hg = malloc(sizeof(float) * T * hid), *hu = malloc(sizeof(float) * T * hid);
    float *cs = malloc(sizeof(float) * T * half), *sn = malloc(sizeof(float) * T * half);
    qv_status st = QV_OK;
    if (!x || !xn || !q || !k || !v || !att || !o || !s || !hg || !hu || !cs || !sn) {
        st = qv_fail(QV_ERR_NOMEM, "forward: no memory for %d tokens", t);
        goto done;
    }
    rope_table(cs, sn, t, c->rope_dim, c->rope_theta);
    for (int i = 0; i < t; i++) memcpy(x + (size_t)i * dim, m->tok_embd + (size_t)tokens[i] * dim, sizeof(float) * dim);
    for (int l = 0; l < c->n_layers; l++) {
        const qv_llama_layer *L = &m->layers[l];
        /* attention: xn = rmsnorm(x); q, k, v = xn W^T; x += attn(q, k, v) W_o^T */
        rmsnorm(xn, x, L->attn_norm, t, dim, c->rms_eps);
        if ((st = lb->run(lb->ctx, m, l, QV_LIN_Q, xn, t, q)) != QV_OK) goto done;
        if ((st = lb->run(lb->ctx, m, l, QV_LIN_K, xn, t, k)) != QV_OK) goto done;
        if ((st = lb->run(lb->ctx, m, l, QV_LIN_V, xn, t, v)) != QV_OK) goto done;
        rope(q, t, c->n_heads, c->head_dim, c->rope_dim, cs, sn);
        rope(k, t, c->n_kv_heads, c->head_dim, c->rope_dim, cs, sn);
        attention(c, q, k, v, t, s, att);
        if ((st = lb->run(lb->ctx, m, l, QV_LIN_O, att, t, o)) != QV_OK) goto done;
        ew(add_range, x, o, T * dim);
        /* feed-forward: x += (silu(xn W_g^T) * (xn W_u^T)) W_d^T */
        rmsnorm(xn, x, L->ffn_norm, t, dim, c->rms_eps);
        if ((st = lb->run(lb->ctx, m, l, QV_LIN_GATE, xn, t, hg)) != QV_OK) goto done;
        if ((st = lb->run(lb->ctx, m, l, QV_LIN_UP, xn, t, hu)) != QV_OK) goto done;
        ew(swiglu_range, hg, hu, T * hid);
        if ((st = lb->run(lb->ctx, m, l, QV_LIN_DOWN, hg, t, o)) != QV_OK) goto done;
        ew(add_range, x, o, T * dim);
        if (layer_out) memcpy(layer_out + (size_t)l * T * dim, x, sizeof(float) * T * dim);
    }
    rmsnorm(xn, x, m->out_norm, t, dim, c->rms_eps);
    /* logits (t, vocab) = xn (t, dim) . output^T, output (vocab, dim) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, c->vocab, dim, 1.0f, xn, dim, m->output, dim, 0.0f,
                logits, c->vocab);
done:
    free(x); free(xn); free(q); free(k); free(v); free(att); free(o); free(s); free(hg); free(hu); free(cs); free(sn);
    return st;
}
