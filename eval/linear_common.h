/* linear_common.h: what the CPU and GPU linear backends (linear_cpu.c,
 * linear_gpu.c) share: a model's linear layers quantized once into problems of
 * the variant, the per-call problem over staged activations, the record of
 * which input the staged activation codes hold, and the output decode.
 * Included by eval/ only. Rule: both backends see the same quantized weights
 * and activation codes, so they differ only in the GEMM that follows. */
#ifndef QVET_EVAL_LINEAR_COMMON_H
#define QVET_EVAL_LINEAR_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "internal/eval.h"

/* 128: the token-block width of QV_ASCALE_TOKEN_BLOCK, the finest activation
 * scale layout, so (m, ceil(k/128)) scales cover every layout. */
#define EV_ASCALE_BLOCK 128

/* One linear layer of the model, quantized. */
typedef struct ev_lin {
    qv_problem w;           /* weights quantized, m = 1 (activations are per call) */
    int n, k;               /* the layer's real n_out, n_in */
} ev_lin;

/* Every linear layer of a model, quantized for one variant. */
typedef struct ev_lins {
    const qv_variant *v;
    int n_layers;
    ev_lin *lin;            /* (n_layers * QV_LIN_COUNT), index layer * QV_LIN_COUNT + which */
    int64_t cap_k, cap_n;   /* padded k and n of the widest layers */
} ev_lins;

/* Quantizes every linear layer of m RTN into a problem of v (shapes padded to
 * its tiles) on the thread pool; a failure names the layer and leaves *ls
 * empty (ev_lins_free is still safe). */
qv_status ev_lins_quantize(ev_lins *ls, const qv_variant *v, const qv_llama *m);
void ev_lins_free(ev_lins *ls);
/* The number of layers: n_layers * QV_LIN_COUNT. */
int ev_lins_count(const ev_lins *ls);

/* Floats of activation scales for t rows of the widest layer:
 * (t, ceil(cap_k / EV_ASCALE_BLOCK)). */
size_t ev_ascale_floats(const ev_lins *ls, int t);

/* The per-call problem: L's weights with t rows of staged activations.
 * a: (t, k_pad) codes of v->afmt; a_scale: activation scales (ev_ascale_floats);
 * azp: (t) int32 zero points. The scales and zero points are attached only
 * when the variant has them. */
qv_problem ev_call_problem(const ev_lin *L, int t, void *a, float *a_scale, int32_t *azp);

/* What the staged activation codes hold: the input x of layer `layer`'s input
 * group (Q/K/V, O, gate/up, down) for m rows, padded to k; x NULL: nothing. */
typedef struct ev_acts_stamp {
    const float *x;
    int layer, group, m;
    int64_t k;
} ev_acts_stamp;

/* Whether linear `which` of `layer` on input x (t rows, padded to k) can reuse
 * the staged codes: K and V reuse those of Q, up those of gate (the same
 * input). Only the second and third layer of a group reuse, so a stale input
 * (a forward pass that stopped part way) is never reused. */
int ev_acts_reuse(const ev_acts_stamp *s, int layer, qv_llama_lin which, const float *x, int t, int64_t k);
/* Records that the staged codes now hold that input. */
void ev_acts_stamp_set(ev_acts_stamp *s, int layer, qv_llama_lin which, const float *x, int t, int64_t k);

/* Decodes output codes to f32 on the thread pool: out (t, n_pad) codes of f
 * (f16, bf16 or f32) row-major; y (t, n) f32 receives the first n columns. */
void ev_decode_out(qv_fmt f, const void *out, int64_t n_pad, int t, int n, float *y);
/* The same for f32 products yy (t, n_pad): each rounded to f (the kernel's
 * output cast) and back to f32. */
void ev_round_out(qv_fmt f, const float *yy, int64_t n_pad, int t, int n, float *y);

#endif
