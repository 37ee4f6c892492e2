/* eval.h: perplexity and KL divergence on a small real model (docs/design.md §10):
 * the BPE tokenizer from GGUF metadata, a llama forward pass whose linear
 * layers go through a pluggable backend (fp32 OpenBLAS, a variant's CPU model,
 * a variant's GPU kernel), RTN quantization of a float matrix into a qv_problem,
 * and the llama.cpp perplexity statistics. Included by eval/ and its tests.
 * Rule: the fp32 path is the baseline every variant is compared with, token by
 * token, on the same chunks; quantization error is measured, never judged. */
#ifndef QVET_EVAL_H
#define QVET_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "internal/gguf.h"
#include "qvet/gemm.h"
#include "qvet/problem.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- Tokenizer: GPT-2 style byte-level BPE (tokenizer.ggml.model "gpt2") ---- */
typedef struct qv_tokenizer qv_tokenizer;

/* Builds the tokenizer from tokenizer.ggml.tokens / merges / bos_token_id and
 * tokenizer.ggml.pre (pre-tokenizers "smollm" and "default"/"gpt2"). */
qv_status qv_tokenizer_create(const qv_gguf *g, qv_tokenizer **out);
void      qv_tokenizer_destroy(qv_tokenizer *t);
int       qv_tokenizer_vocab(const qv_tokenizer *t);
int       qv_tokenizer_bos(const qv_tokenizer *t);     /* -1 if none */
int       qv_tokenizer_add_bos(const qv_tokenizer *t); /* tokenizer.ggml.add_bos_token */
/* Encodes len bytes of text (any bytes; invalid UTF-8 is kept byte for byte)
 * into *ids (malloc'd, *n ids), without BOS and without parsing special tokens. */
qv_status qv_tokenizer_encode(const qv_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n);
/* Decodes ids back to bytes (malloc'd, NUL-terminated, *len bytes before the NUL). */
qv_status qv_tokenizer_decode(const qv_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len);
/* Splits text into pre-tokens (exposed for tests): calls cb(piece, piece_len, ctx)
 * for each piece in order. */
void qv_tokenizer_pretokenize(const qv_tokenizer *t, const char *text, size_t len,
                              void (*cb)(const char *piece, size_t piece_len, void *ctx), void *ctx);

/* Unicode classes the GPT-2 pre-tokenizer regex uses (eval/unicode_tab.c). */
int qv_uni_is_letter(uint32_t cp);   /* \p{L} */
int qv_uni_is_number(uint32_t cp);   /* \p{N} */
int qv_uni_is_space(uint32_t cp);    /* \s (White_Space) */

/* --- Llama model ------------------------------------------------------------ */
typedef struct qv_llama_config {
    int dim;            /* embedding width (576 for SmolLM2-135M) */
    int hidden;         /* feed-forward width */
    int n_layers;
    int n_heads;
    int n_kv_heads;
    int head_dim;       /* dim / n_heads */
    int vocab;
    int rope_dim;       /* rotated dimensions per head (llama.rope.dimension_count) */
    float rope_theta;   /* llama.rope.freq_base */
    float rms_eps;      /* llama.attention.layer_norm_rms_epsilon */
} qv_llama_config;

/* The linear layers of one block, in the order the forward pass calls them. */
typedef enum qv_llama_lin {
    QV_LIN_Q = 0, QV_LIN_K, QV_LIN_V, QV_LIN_O, QV_LIN_GATE, QV_LIN_UP, QV_LIN_DOWN,
    QV_LIN_COUNT
} qv_llama_lin;

/* Weights in f32. A linear weight is (n_out, n_in) row-major (ggml order:
 * each output's n_in inputs contiguous), so y = x W^T. */
typedef struct qv_llama_layer {
    float *attn_norm;           /* (dim) */
    float *ffn_norm;            /* (dim) */
    float *w[QV_LIN_COUNT];     /* Q (dim, dim), K/V (kv_dim, dim), O (dim, dim),
                                   GATE/UP (hidden, dim), DOWN (dim, hidden) */
} qv_llama_layer;

typedef struct qv_llama {
    qv_llama_config c;
    float *tok_embd;            /* (vocab, dim) */
    float *out_norm;            /* (dim) */
    float *output;              /* (vocab, dim): tok_embd when the embeddings are tied */
    int tied;
    qv_llama_layer *layers;     /* (n_layers) */
} qv_llama;

/* Loads a llama-architecture GGUF (general.architecture "llama"). */
qv_status qv_llama_load(const qv_gguf *g, qv_llama *m);
void      qv_llama_free(qv_llama *m);
/* n_in and n_out of a linear layer. */
void qv_llama_lin_shape(const qv_llama_config *c, qv_llama_lin which, int *n_in, int *n_out);

/* A linear-layer backend: y (t, n_out) = x (t, n_in) W^T for layer `layer`.
 * A call for K or V right after Q (or for up right after gate) of the same
 * layer, with the same x pointer and t, may reuse the activation codes of that
 * first call: x must not change in between (qv_llama_forward never does). */
typedef struct qv_linear_backend {
    qv_status (*run)(void *ctx, const qv_llama *m, int layer, qv_llama_lin which,
                     const float *x, int t, float *y);
    void *ctx;
    const char *name;
    /* The backend's own handling of ctx, behind qv_linear_backend_prepare,
     * _times and _free (NULL when it has nothing to do, as fp32 without a ctx). */
    qv_status (*prepare)(void *ctx, int t);
    void (*times)(const void *ctx, double *acts_s, double *gemm_s);
    void (*release)(void *ctx);
} qv_linear_backend;

/* The fp32 OpenBLAS backend (sgemm on the f32 weights). */
qv_linear_backend qv_linear_fp32(void);

/* Runs tokens[0..t) from position 0 with causal attention. logits: (t, vocab)
 * f32. layer_out: NULL, or (n_layers, t, dim) f32 residual stream after each
 * block. */
qv_status qv_llama_forward(const qv_llama *m, const qv_linear_backend *lb, const int32_t *tokens, int t,
                           float *logits, float *layer_out);

/* --- Quantization of a float weight into a variant's problem ------------------ */
/* Pads (n_in, n_out) up to the row's tiles: K up to a multiple of k_tile and g,
 * N up to n_tile; the padded rows and columns are zero and dropped again. */
void qv_quant_padded_shape(const qv_variant *v, int64_t k, int64_t n, int64_t *k_pad, int64_t *n_pad);
/* RTN of w (n_out = n, n_in = k) row-major f32 (the ggml/torch layout) into a
 * problem with m rows of activations (weights, scales, zeros, g_idx filled;
 * activations zero). The problem's k and n are the padded ones. */
qv_status qv_quantize_weights(const qv_variant *v, const float *w, int64_t n, int64_t k, int64_t m, qv_problem *p);
/* Quantizes activations x (m, k_real) f32 into p's activation codes (and
 * a_scale, azp) per the variant's afmt / act_scale / azp; columns past k_real
 * are zero. p->m must equal m. */
qv_status qv_quantize_acts(qv_problem *p, const float *x, int64_t m, int64_t k_real);
/* Effective dequantized weight of a problem as f32 (k, n) row-major: what the
 * variant's declared dequantization gives before accumulation (scales folded). */
qv_status qv_problem_weight_f32(const qv_problem *p, float *w_kn);

/* A CPU backend for a variant: weights quantized once per layer; each call
 * quantizes activations per token and runs ref_model_run (exact = 1) or an
 * sgemm on the dequantized operands (exact = 0, the fast emulation). */
qv_status qv_linear_variant_cpu(const qv_variant *v, const qv_llama *m, int exact, qv_linear_backend *out);
/* The threads of the evaluation's CPU pool (eval/parallel.c), the caller
 * included, when it starts (its first use): n >= 1, at most its limit of 64;
 * without a request, the online processors. A request after the start
 * changes nothing. */
void qv_eval_threads_request(int n);

/* The GPU backend: every linear layer runs the variant's kernel (gpu.h)
 * under launch options opts (copied; NULL: the defaults). */
qv_status qv_linear_variant_gpu(const qv_variant *v, const qv_llama *m, const qv_launch_opts *opts,
                                qv_linear_backend *out);
/* Wall time a backend spent since it was created, for the progress report:
 * quantizing (and for the fast CPU path dequantizing) activations, and in the
 * GEMMs (the GPU path: from the copy to the device to the decoded output). */
void      qv_linear_backend_times(const qv_linear_backend *lb, double *acts_s, double *gemm_s);
/* Readies a backend for calls of t rows ahead of the first call: the GPU
 * backend packs and uploads every layer's weights (otherwise done at each
 * layer's first call); the CPU backends have nothing to do. */
qv_status qv_linear_backend_prepare(qv_linear_backend *lb, int t);
void      qv_linear_backend_free(qv_linear_backend *lb);

/* SHA-256 of len bytes as 64 lowercase hex digits and a NUL (eval/sha256.c). */
void qv_sha256_hex(const void *data, size_t len, char hex[65]);

/* --- Perplexity statistics (llama.cpp's perplexity tool) --------------------- */
typedef struct qv_ppl_acc {
    int64_t n, cap;
    double *nll;        /* (n) -log p(target) of the evaluated model */
    double *nll_base;   /* (n) -log p(target) of the baseline */
    double *kld;        /* (n) KL(base || model) per position */
    double *dp;         /* (n) p(target) - p_base(target) */
    int64_t same_top1;
} qv_ppl_acc;

typedef struct qv_ppl_stats {
    int64_t n;
    double ppl, ppl_stderr;
    double ppl_base;
    double dppl, dppl_stderr;       /* PPL - PPL_base, paired */
    double kld_mean, kld_stderr, kld_p99, kld_max;
    double same_top1;               /* fraction in [0, 1] */
    double same_top1_stderr;
    double rms_dp;
} qv_ppl_stats;

void qv_ppl_acc_init(qv_ppl_acc *a);
void qv_ppl_acc_clear(qv_ppl_acc *a);
/* Adds one scored position: logits and base_logits (vocab) f32, target token. */
void qv_ppl_acc_add(qv_ppl_acc *a, const float *logits, const float *base_logits, int vocab, int target);
void qv_ppl_stats_compute(const qv_ppl_acc *a, qv_ppl_stats *s);

/* The llama.cpp protocol on tokens[0..n_tokens): chunks of ctx tokens, taken
 * one after another without overlap (at most `chunks` of them; <= 0: all);
 * the first token of each chunk is replaced by bos when bos >= 0; the
 * positions ctx/2 .. ctx-2 of each chunk are scored (each predicts the next
 * token). The baseline (fp32) runs on each chunk, then lb (NULL: the baseline
 * is compared with itself). layer_err and layer_ref (n_layers) accumulate the
 * squared error of each block's output against the baseline and the
 * baseline's squared norm, over every position of every chunk
 * (NMSE = err / ref). */
qv_status qv_ppl_eval(const qv_llama *m, const qv_linear_backend *lb, const int32_t *tokens, int64_t n_tokens,
                      int ctx, int chunks, int bos, qv_ppl_acc *acc, double *layer_err, double *layer_ref);

/* The same protocol one chunk at a time, so that the baseline of a chunk runs
 * once and serves every variant: qv_ppl_chunks gives the number of chunks,
 * qv_ppl_base_compute runs the fp32 baseline on chunk ci and keeps what the
 * statistics need, qv_ppl_eval_chunk runs a backend on that chunk and adds to
 * its accumulators exactly what qv_ppl_eval adds for that chunk. */
typedef struct qv_ppl_base {
    int ctx, vocab, n_layers, dim;
    int first, n_scored;        /* scored positions first .. first + n_scored - 1 (ctx/2 .. ctx-2) */
    int32_t *chunk;             /* (ctx) the tokens fed, bos first when asked */
    int32_t *target;            /* (n_scored) the next token of each scored position */
    float *logits;              /* (n_scored, vocab) baseline logits of the scored positions */
    double *p;                  /* (n_scored, vocab) baseline probabilities exp(z - lse) */
    double *lse;                /* (n_scored) log-sum-exp of each row, in double */
    int32_t *argmax;            /* (n_scored) most likely token of each row */
    float *layer_out;           /* (n_layers, ctx, dim) residual stream after each block */
    double *layer_ref;          /* (n_layers) squared norm of each block's output */
    float *scratch_logits;      /* (ctx, vocab) and (n_layers, ctx, dim): where the evaluated */
    float *scratch_out;         /* backend's forward pass writes, allocated once per chunk */
} qv_ppl_base;

/* Chunks the protocol takes from n_tokens (at most `chunks`; <= 0: all);
 * fails when ctx < 4 or the text holds less than one chunk. */
qv_status qv_ppl_chunks(int64_t n_tokens, int ctx, int chunks, int64_t *n_chunks);
qv_status qv_ppl_base_compute(const qv_llama *m, const int32_t *tokens, int64_t n_tokens, int ctx, int64_t ci,
                              int bos, qv_ppl_base *b);
void      qv_ppl_base_free(qv_ppl_base *b);
/* lb NULL: the baseline compared with itself. layer_err, layer_ref: (n_layers)
 * or NULL. Writes only b's scratch buffers. */
qv_status qv_ppl_eval_chunk(const qv_llama *m, const qv_linear_backend *lb, qv_ppl_base *b, qv_ppl_acc *acc,
                            double *layer_err, double *layer_ref);
/* Adds the scored positions of one chunk: logits (b->n_scored, vocab) of the
 * evaluated model against the baseline b; the same values, in the same order,
 * as qv_ppl_acc_add on each row. */
void      qv_ppl_acc_add_chunk(qv_ppl_acc *a, const float *logits, const qv_ppl_base *b);

#ifdef __cplusplus
}
#endif
#endif
