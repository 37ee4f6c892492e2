/* t_llama.c: the llama forward pass, the quantized linear backends and the
 * perplexity statistics (eval.h) on a tiny random model that the test writes
 * as a GGUF file (so the loader runs too):
 *   - the fp32 path against a naive double-precision forward pass written here
 *     independently (explicit loops: RMSNorm, RoPE by cos/sin on pairs (2i,2i+1),
 *     causal grouped-query attention, SwiGLU, tied output);
 *   - every registry row with a CPU model runs the model through its CPU model
 *     (ref_model_run) and through the fast emulation: both give finite results
 *     and agree with each other;
 *   - RTN weight quantization stays within the rounding bound of each layout;
 *   - the protocol math on hand-computable logits;
 *   - a chunk's baseline computed once and shared gives the same bits as the
 *     per-row statistics on a fresh baseline; backends that share one
 *     activation quantization across Q/K/V and gate/up give the same bits as
 *     fresh ones. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/cli.h"
#include "internal/eval.h"
#include "internal/gguf.h"
#include "qvet/formats.h"

#include "support/suite.h"

/* The tiny model: shapes chosen so kv_dim (32) and the K of 64 need padding
 * for 64-wide N tiles and g = 128. */
enum { DIM = 64, HID = 128, LAYERS = 2, HEADS = 4, KV_HEADS = 2, HD = DIM / HEADS, VOCAB = 96 };
static const float THETA = 10000.0f, EPS = 1e-5f;

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uni(uint64_t *s, float a)
{
    return (float)(((double)(mix(s) >> 11) / 9007199254740992.0 * 2 - 1) * a);
}

typedef struct tiny {
    qv_gguf_writer *w;
    qv_gguf *g;
    qv_llama m;
} tiny;

static void add(qv_gguf_writer *w, const char *name, int64_t ne0, int64_t ne1, uint64_t *s, float scale, float base)
{
    int64_t n = ne0 * (ne1 > 0 ? ne1 : 1);
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = base + uni(s, scale);
    int64_t ne[2] = {ne0, ne1};
    ck_assert(qv_gguf_w_tensor(w, name, QV_GGML_F32, ne1 > 0 ? 2 : 1, ne, x) == QV_OK);
    free(x);
}

static void tiny_build(tiny *t, uint64_t seed)
{
    uint64_t s = seed;
    qv_gguf_writer *w = qv_gguf_writer_create();
    qv_gguf_w_str(w, "general.architecture", "llama");
    qv_gguf_w_u32(w, "llama.embedding_length", DIM);
    qv_gguf_w_u32(w, "llama.feed_forward_length", HID);
    qv_gguf_w_u32(w, "llama.block_count", LAYERS);
    qv_gguf_w_u32(w, "llama.attention.head_count", HEADS);
    qv_gguf_w_u32(w, "llama.attention.head_count_kv", KV_HEADS);
    qv_gguf_w_u32(w, "llama.rope.dimension_count", HD);
    qv_gguf_w_f32(w, "llama.rope.freq_base", THETA);
    qv_gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", EPS);
    add(w, "token_embd.weight", DIM, VOCAB, &s, 0.3f, 0); /* logits of a few units: a calm model */
    add(w, "output_norm.weight", DIM, 0, &s, 0.2f, 1.0f);
    static const char *const names[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (int l = 0; l < LAYERS; l++) {
        char nm[64];
        snprintf(nm, sizeof nm, "blk.%d.attn_norm.weight", l);
        add(w, nm, DIM, 0, &s, 0.2f, 1.0f);
        snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", l);
        add(w, nm, DIM, 0, &s, 0.2f, 1.0f);
        for (int k = 0; k < 7; k++) {
            int n_in = k == 6 ? HID : DIM;
            int n_out = k == 1 || k == 2 ? KV_HEADS * HD : k == 4 || k == 5 ? HID : DIM;
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, names[k]);
            add(w, nm, n_in, n_out, &s, 2.0f / sqrtf((float)n_in), 0);
        }
    }
    size_t len;
    const uint8_t *img = qv_gguf_writer_bytes(w, &len);
    ck_assert(qv_gguf_parse(img, len, 1, &t->g) == QV_OK);
    ck_assert_msg(qv_llama_load(t->g, &t->m) == QV_OK, "%s", qv_errmsg());
    t->w = w;
}

static void tiny_free(tiny *t)
{
    qv_llama_free(&t->m);
    qv_gguf_close(t->g);
    qv_gguf_writer_destroy(t->w);
}

/* --- the naive reference, in double ------------------------------------------ */
static void naive_linear(const float *W, int n_out, int n_in, const double *x, double *y)
{
    for (int o = 0; o < n_out; o++) {
        double s = 0;
        for (int i = 0; i < n_in; i++) s += (double)W[o * n_in + i] * x[i];
        y[o] = s;
    }
}

static void naive_norm(const double *x, const float *w, double *y)
{
    double ss = 0;
    for (int i = 0; i < DIM; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / DIM + EPS);
    for (int i = 0; i < DIM; i++) y[i] = x[i] * r * w[i];
}

static void naive_rope(double *v, int pos)
{
    for (int i = 0; i < HD; i += 2) {
        double ang = pos / pow(THETA, (double)i / HD);
        double a = v[i], b = v[i + 1];
        v[i] = a * cos(ang) - b * sin(ang);
        v[i + 1] = a * sin(ang) + b * cos(ang);
    }
}

/* logits (T, VOCAB) of tokens[0..T) */
static void naive_forward(const qv_llama *m, const int32_t *tok, int T, double *logits)
{
    enum { KV = KV_HEADS * HD };
    double (*x)[DIM] = calloc((size_t)T, sizeof *x);
    double (*K)[KV] = calloc((size_t)T, sizeof *K), (*V)[KV] = calloc((size_t)T, sizeof *V);
    double (*Q)[DIM] = calloc((size_t)T, sizeof *Q);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < DIM; i++) x[t][i] = m->tok_embd[tok[t] * DIM + i];
    for (int l = 0; l < LAYERS; l++) {
        const qv_llama_layer *L = &m->layers[l];
        for (int t = 0; t < T; t++) {
            double h[DIM];
            naive_norm(x[t], L->attn_norm, h);
            naive_linear(L->w[QV_LIN_Q], DIM, DIM, h, Q[t]);
            naive_linear(L->w[QV_LIN_K], KV, DIM, h, K[t]);
            naive_linear(L->w[QV_LIN_V], KV, DIM, h, V[t]);
            for (int hh = 0; hh < HEADS; hh++) naive_rope(&Q[t][hh * HD], t);
            for (int hh = 0; hh < KV_HEADS; hh++) naive_rope(&K[t][hh * HD], t);
        }
        for (int t = 0; t < T; t++) {
            double att[DIM] = {0}, o[DIM], h[DIM], gt[HID], up[HID], dn[DIM];
            for (int hh = 0; hh < HEADS; hh++) {
                int kh = hh / (HEADS / KV_HEADS);
                double sc[512], mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double d = 0;
                    for (int i = 0; i < HD; i++) d += Q[t][hh * HD + i] * K[u][kh * HD + i];
                    sc[u] = d / sqrt((double)HD);
                    mx = fmax(mx, sc[u]);
                }
                for (int u = 0; u <= t; u++) sum += (sc[u] = exp(sc[u] - mx));
                for (int u = 0; u <= t; u++)
                    for (int i = 0; i < HD; i++) att[hh * HD + i] += sc[u] / sum * V[u][kh * HD + i];
            }
            naive_linear(L->w[QV_LIN_O], DIM, DIM, att, o);
            double xr[DIM];
            for (int i = 0; i < DIM; i++) xr[i] = x[t][i] + o[i];
            naive_norm(xr, L->ffn_norm, h);
            naive_linear(L->w[QV_LIN_GATE], HID, DIM, h, gt);
            naive_linear(L->w[QV_LIN_UP], HID, DIM, h, up);
            for (int i = 0; i < HID; i++) gt[i] = gt[i] / (1 + exp(-gt[i])) * up[i];
            naive_linear(L->w[QV_LIN_DOWN], DIM, HID, gt, dn);
            for (int i = 0; i < DIM; i++) xr[i] += dn[i];
            /* x[t] is only read again at later layers, and attention of this layer
             * used K and V, computed above for every position */
            memcpy(x[t], xr, sizeof xr);
        }
    }
    for (int t = 0; t < T; t++) {
        double h[DIM];
        naive_norm(x[t], m->out_norm, h);
        naive_linear(m->tok_embd, VOCAB, DIM, h, logits + (size_t)t * VOCAB);
    }
    free(x); free(K); free(V); free(Q);
}

static void tokens_of(uint64_t seed, int32_t *tok, int n)
{
    uint64_t s = seed;
    for (int i = 0; i < n; i++) tok[i] = (int32_t)(mix(&s) % VOCAB);
}

START_TEST(test_fp32_vs_naive)
{
    uint64_t seed = 411 + (uint64_t)_i;
    printf("fp32 vs naive: seed %llu\n", (unsigned long long)seed);
    tiny t;
    tiny_build(&t, seed);
    ck_assert_int_eq(t.m.tied, 1);
    ck_assert_int_eq(t.m.c.head_dim, HD);
    enum { T = 40 };
    int32_t tok[T];
    tokens_of(seed, tok, T);
    float *got = malloc(sizeof(float) * T * VOCAB), *lo = malloc(sizeof(float) * LAYERS * T * DIM);
    double *want = malloc(sizeof(double) * T * VOCAB);
    qv_linear_backend lb = qv_linear_fp32();
    ck_assert(qv_llama_forward(&t.m, &lb, tok, T, got, lo) == QV_OK);
    naive_forward(&t.m, tok, T, want);
    double max_d = 0, max_w = 0;
    for (int i = 0; i < T * VOCAB; i++) {
        max_d = fmax(max_d, fabs(got[i] - want[i]));
        max_w = fmax(max_w, fabs(want[i]));
    }
    printf("  max |fp32 - naive| = %.3g (max |logit| %.3g)\n", max_d, max_w);
    ck_assert(max_w > 1.0); /* not a vacuous comparison */
    /* f32 sums of at most 128 terms through 2 blocks: relative ~ 1e-6; 1e-4 of
     * the largest logit leaves margin yet catches any structural error (O(1)). */
    ck_assert_msg(max_d < 1e-4 * max_w, "fp32 path differs from the naive forward by %g", max_d);
    free(got); free(lo); free(want);
    tiny_free(&t);
}
END_TEST

/* A structural change (tokens shifted) must change the logits: the test above
 * is not passing on constants. */
START_TEST(test_forward_is_causal_and_position_aware)
{
    tiny t;
    tiny_build(&t, 77);
    enum { T = 12 };
    int32_t a[T], b[T];
    tokens_of(5, a, T);
    memcpy(b, a, sizeof a);
    b[T - 1] = (a[T - 1] + 1) % VOCAB; /* change only the last token */
    float *za = malloc(sizeof(float) * T * VOCAB), *zb = malloc(sizeof(float) * T * VOCAB);
    qv_linear_backend lb = qv_linear_fp32();
    ck_assert(qv_llama_forward(&t.m, &lb, a, T, za, NULL) == QV_OK);
    ck_assert(qv_llama_forward(&t.m, &lb, b, T, zb, NULL) == QV_OK);
    ck_assert(memcmp(za, zb, sizeof(float) * (T - 1) * VOCAB) == 0); /* earlier positions untouched */
    ck_assert(memcmp(za + (T - 1) * VOCAB, zb + (T - 1) * VOCAB, sizeof(float) * VOCAB) != 0);
    int32_t bad = VOCAB;
    ck_assert(qv_llama_forward(&t.m, &lb, &bad, 1, za, NULL) == QV_ERR_RANGE);
    free(za); free(zb);
    tiny_free(&t);
}
END_TEST

/* Every row with a CPU model: the exact CPU model and the fast emulation both
 * run the tiny model; results are finite and the two paths agree (they differ
 * only in accumulation order and precision). */
START_TEST(test_quantized_cpu_paths)
{
    const qv_variant *v = qv_registry_get(_i);
    if (!v->cpu_model) return;
    tiny t;
    tiny_build(&t, 9001);
    enum { T = 32 };
    int32_t tok[2 * T];
    tokens_of(31, tok, 2 * T);
    /* A row that declares an accumulator narrower than fp32 (the e4m3 W8A8
     * rows: 14-bit partials promoted every 128 K, cuBLASLt's arithmetic) drops
     * the low bits of small products on purpose, which the fast path's f32 sum
     * does not: its model also runs with the accumulator widened to 24 bits,
     * and that run is the one the fast path must agree with. */
    const int narrow = v->arith.accum == QV_ACC_TC_FP8 && v->arith.acc_bits < 24;
    qv_variant wide = *v;
    wide.arith.acc_bits = 24;
    qv_ppl_stats st[3];
    for (int exact = 0; exact < 2 + narrow; exact++) {
        qv_linear_backend lb;
        qv_status s = qv_linear_variant_cpu(exact == 2 ? &wide : v, &t.m, exact > 0, &lb);
        ck_assert_msg(s == QV_OK, "%s: %s", v->name, qv_errmsg());
        qv_ppl_acc acc;
        qv_ppl_acc_init(&acc);
        double err[LAYERS] = {0}, ref[LAYERS] = {0};
        s = qv_ppl_eval(&t.m, &lb, tok, 2 * T, T, 0, -1, &acc, err, ref);
        ck_assert_msg(s == QV_OK, "%s: %s", v->name, qv_errmsg());
        qv_ppl_stats_compute(&acc, &st[exact]);
        ck_assert_int_eq(st[exact].n, 2 * (T - 1 - T / 2));
        ck_assert_msg(isfinite(st[exact].ppl) && st[exact].ppl > 1, "%s: PPL %g", v->name, st[exact].ppl);
        ck_assert_msg(isfinite(st[exact].kld_mean) && st[exact].kld_mean >= 0, "%s: KLD %g", v->name, st[exact].kld_mean);
        for (int l = 0; l < LAYERS; l++) ck_assert(ref[l] > 0 && isfinite(err[l]));
        qv_ppl_acc_clear(&acc);
        qv_linear_backend_free(&lb);
    }
    printf("%-28s PPL fast %.5f model %.5f, KLD fast %.3e model %.3e\n", v->name, st[0].ppl, st[1].ppl,
           st[0].kld_mean, st[1].kld_mean);
    if (narrow)
        printf("%-28s PPL model with a 24-bit accumulator %.5f, KLD %.3e\n", v->name, st[2].ppl, st[2].kld_mean);
    /* Both paths quantize identically; only f32 sgemm vs the declared (or, for
     * a narrow row, widened) accumulation differ, each output rounded to a
     * 16-bit format: per-output differences of an output ulp move the
     * perplexity by far less than 1 %. */
    const qv_ppl_stats *ref = &st[narrow ? 2 : 1];
    ck_assert_msg(fabs(st[0].ppl - ref->ppl) < 0.01 * ref->ppl, "%s: fast %g vs model %g%s", v->name, st[0].ppl,
                  ref->ppl, narrow ? " (24-bit accumulator)" : "");
    tiny_free(&t);
}
END_TEST

/* RTN bound: for every row, the dequantized weight is within the rounding step
 * of its layout (derived per format below) of the original. */
START_TEST(test_rtn_bound)
{
    const qv_variant *v = qv_registry_get(_i);
    uint64_t s = 123 + (uint64_t)_i;
    int n = 64, k = 192;
    float *w = malloc(sizeof(float) * (size_t)(n * k));
    for (int i = 0; i < n * k; i++) w[i] = uni(&s, 1.0f) * (i % 7 == 0 ? 4.0f : 1.0f);
    qv_problem p;
    ck_assert_msg(qv_quantize_weights(v, w, n, k, 1, &p) == QV_OK, "%s: %s", v->name, qv_errmsg());
    int64_t kp, np_;
    qv_quant_padded_shape(v, k, n, &kp, &np_);
    ck_assert_int_eq(p.k, kp);
    ck_assert_int_eq(p.n, np_);
    float *we = malloc(sizeof(float) * (size_t)(p.k * p.n));
    ck_assert(qv_problem_weight_f32(&p, we) == QV_OK);
    double worst = 0;
    for (int j = 0; j < n; j++)
        for (int kk = 0; kk < k; kk++) {
            double x = w[j * k + kk], y = we[kk * p.n + j];
            double sc = qv_problem_scale(&p, kk, j) * (v->arith.w_mul > 1 ? v->arith.w_mul : 1);
            double bound;
            const qv_fmt_info *fi = qv_fmt_get(v->wfmt);
            if (v->wfmt == QV_FMT_F16 || v->wfmt == QV_FMT_BF16)
                bound = fabs(x) * ldexp(1.0, -fi->man_bits - 1) + 1e-30; /* half an ulp */
            else if (v->wfmt == QV_FMT_E4M3)
                bound = fabs(x) * ldexp(1.0, -4) + sc * ldexp(1.0, -10); /* half ulp: 3 mantissa bits; subnormal step 2^-9 */
            else if (v->wfmt == QV_FMT_E2M1) {
                /* e2m1 under the block scale times the global one: half the code
                 * spacing at |x| / s (0.5 below 2, 1 below 4, 2 up to 6), and
                 * past 6 s what the saturation to 6 s leaves out */
                double sa = sc * qv_problem_scale2(&p, j), r = fabs(x) / sa;
                bound = sa * (r > 6 ? r - 6 : r < 2 ? 0.25 : r < 4 ? 0.5 : 1.0);
            } else if (v->scale_layout == QV_SCALE_GROUP_CHANNEL)
                /* int8 per channel (half a step of s2), then int4 of the int8 value
                 * (half a group step, plus the int8 re-rounding's half) */
                bound = p.scales2[j] * (0.5 + 0.5 * sc + 0.5);
            else
                bound = sc * (v->zero_point ? 1.0 : 0.5); /* zero point: its own rounding adds up to half a step */
            if (v->arith.dequant == QV_DQ_MUL_RN) bound += fabs(x) * ldexp(1.0, -qv_fmt_get(v->afmt)->man_bits) + 1e-7;
            bound *= 1 + 1e-6; /* the f32 of the dequantized weight */
            worst = fmax(worst, fabs(x - y) / bound);
        }
    for (int j = n; j < p.n; j++)
        for (int kk = 0; kk < p.k; kk++) ck_assert(we[kk * p.n + j] == 0); /* padding is zero */
    ck_assert_msg(worst <= 1.0, "%s: RTN error %.3f x its bound", v->name, worst);
    free(w);
    free(we);
    qv_problem_destroy(&p);
}
END_TEST

/* The FP4 quantizers on hand-derived blocks (quantize.c's rules), as the
 * CPU model's problem holds them: scale codes, the NVFP4 global scale and the
 * dequantized weights (qv_problem_weight_f32), for f16 and bf16 rows.
 *   MXFP4, column 0: block 0 holds e2m1 values times 2^-3 (absmax 0.75:
 *     X = 2^(floor(log2 0.75) - 2) = 2^-3, code 124), which come back
 *     exactly; block 1 holds 7, 2.5, -0.25 times 2^-3 (absmax 0.875: X = 2^-3
 *     again): 7 saturates to 6, 2.5 ties to the even code 2, -0.25 ties to
 *     -0. Every other column is zero (X = 1, code 127).
 *   NVFP4, column 0: the tensor's absmax 2.625 gives g = 2.625 / 2688 =
 *     2^-10; block 0 holds 6, -4, 1.5, 0.5 times 448 g (s = 448), block 1
 *     holds 3, -1, 0.5 times g (s = 0.5, codes 6, -2, 1), all exact; block 2
 *     holds 6 2^-9 g (s = 2^-9: exact with f16; bf16 raises it to 2^-6, the
 *     smallest scale the lift carries beside 448, and 0.75 ties to 1: 2^-16). */
START_TEST(test_fp4_quantizer)
{
    static const char *const rows[] = {"marlin-mxfp4a16-g32-bf16", "marlin-mxfp4a16-g32-f16",
                                       "marlin-nvfp4a16-g16-f16", "marlin-nvfp4a16-g16-bf16"};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const qv_variant *v = qv_variant_find(rows[r]);
        ck_assert_ptr_nonnull(v);
        const int nv = v->sfmt == QV_FMT_UE4M3, bf = v->afmt == QV_FMT_BF16;
        const int n = 64, k = nv ? 48 : 64;
        float *w = calloc((size_t)(n * k), sizeof(float)); /* (n, k): row j is column j of the problem */
        double want[64];
        int nw = 0;
        if (!nv) {
            static const double b0[] = {6, -3, 0.5, -0.0, 4, 1.5, -6, 1, 2, -0.5, 3, -1.5};
            for (int t = 0; t < 12; t++) w[t] = (float)ldexp(b0[t], -3), want[nw++] = ldexp(b0[t], -3);
            for (int t = 12; t < 32; t++) want[nw++] = 0;
            static const double b1[] = {7, 2.5, -0.25}, b1_out[] = {6, 2, -0.0};
            for (int t = 0; t < 3; t++) w[32 + t] = (float)ldexp(b1[t], -3), want[nw++] = ldexp(b1_out[t], -3);
            for (int t = 35; t < 64; t++) want[nw++] = 0;
        } else {
            static const double b0[] = {6, -4, 1.5, 0.5};
            for (int t = 0; t < 4; t++) w[t] = (float)ldexp(b0[t] * 448, -10), want[nw++] = ldexp(b0[t] * 448, -10);
            for (int t = 4; t < 16; t++) want[nw++] = 0;
            static const double b1[] = {3, -1, 0.5};
            for (int t = 0; t < 3; t++) w[16 + t] = (float)ldexp(b1[t], -10), want[nw++] = ldexp(b1[t], -10);
            for (int t = 19; t < 32; t++) want[nw++] = 0;
            w[32] = (float)ldexp(6, -19);
            want[nw++] = bf ? ldexp(1.0, -16) : ldexp(6, -19);
            for (int t = 33; t < 48; t++) want[nw++] = 0;
        }
        qv_problem p;
        ck_assert_msg(qv_quantize_weights(v, w, n, k, 1, &p) == QV_OK, "%s: %s", v->name, qv_errmsg());
        ck_assert_int_eq(p.k, k);
        const uint8_t *sc = p.scales;
        if (!nv) {
            ck_assert_int_eq(sc[0], 124);     /* block 0, column 0 */
            ck_assert_int_eq(sc[n], 124);     /* block 1, column 0 */
            ck_assert_int_eq(sc[1], 127);     /* a zero block */
        } else {
            ck_assert(p.scales2[0] == 0x1p-10f);
            ck_assert_int_eq(sc[0], 0x7E);    /* 448 */
            ck_assert_int_eq(sc[n], 0x30);    /* 0.5 */
            ck_assert_int_eq(sc[2 * n], bf ? 0x08 : 0x01); /* 2^-6 raised, or 2^-9 */
        }
        float *we = malloc(sizeof(float) * (size_t)(p.k * p.n));
        ck_assert(qv_problem_weight_f32(&p, we) == QV_OK);
        for (int kk = 0; kk < k; kk++) {
            double got = we[kk * p.n + 0];
            ck_assert_msg(got == want[kk] && signbit(got) == signbit(want[kk]), "%s: w[%d][0] = %a, hand-derived %a",
                          v->name, kk, got, want[kk]);
            for (int j = 1; j < n; j++) ck_assert(we[kk * p.n + j] == 0);
        }
        free(we);
        free(w);
        qv_problem_destroy(&p);
    }
}
END_TEST

START_TEST(test_padded_shapes)
{
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        int64_t kp, np_;
        qv_quant_padded_shape(v, 576, 192, &kp, &np_);
        ck_assert(kp >= 576 && kp % v->k_tile == 0 && (v->g == 0 || kp % v->g == 0));
        ck_assert(np_ >= 192 && np_ % v->n_tile == 0);
        ck_assert(qv_variant_check_shape(v, 16, np_, kp) == QV_OK);
        if (v->g == 128) ck_assert_int_eq(kp, 640);
        if (v->g == 0 && v->k_tile == 16) ck_assert_int_eq(kp, 576);
    }
}
END_TEST

/* Protocol math on logits whose statistics are known in closed form:
 * base logits (0, 0): p_base = (1/2, 1/2); model logits (ln 3, 0): p = (3/4, 1/4).
 * Position 1 targets token 0, position 2 token 1.
 *   nll = ln(4/3), ln 4  -> PPL = exp(mean) = 4/sqrt(3), stderr = PPL * (ln 3 / 2)
 *   nll_base = ln 2 (both) -> PPL_base = 2, no spread
 *   KLD = 1/2 ln(2/3) + 1/2 ln 2 = 1/2 ln(4/3) at both positions
 *   dp = +1/4, -1/4 -> RMS 1/4; argmax agrees (ties take the first index) */
START_TEST(test_protocol_math)
{
    float base[2] = {0, 0}, model[2] = {(float)log(3.0), 0};
    qv_ppl_acc a;
    qv_ppl_acc_init(&a);
    qv_ppl_acc_add(&a, model, base, 2, 0);
    qv_ppl_acc_add(&a, model, base, 2, 1);
    qv_ppl_stats s;
    qv_ppl_stats_compute(&a, &s);
    double tol = 1e-6; /* logits are f32: ln 3 carries a 2^-24 relative error */
    ck_assert_int_eq(s.n, 2);
    ck_assert_double_eq_tol(s.ppl, 4 / sqrt(3.0), tol);
    ck_assert_double_eq_tol(s.ppl_stderr, 4 / sqrt(3.0) * log(3.0) / 2, tol);
    ck_assert_double_eq_tol(s.ppl_base, 2.0, tol);
    ck_assert_double_eq_tol(s.dppl, 4 / sqrt(3.0) - 2, tol);
    ck_assert_double_eq_tol(s.dppl_stderr, 4 / sqrt(3.0) * log(3.0) / 2, tol);
    ck_assert_double_eq_tol(s.kld_mean, 0.5 * log(4.0 / 3.0), tol);
    ck_assert_double_eq_tol(s.kld_stderr, 0, tol);
    ck_assert_double_eq_tol(s.kld_p99, 0.5 * log(4.0 / 3.0), tol);
    ck_assert_double_eq_tol(s.kld_max, 0.5 * log(4.0 / 3.0), tol);
    ck_assert(s.same_top1 == 1.0);
    ck_assert_double_eq_tol(s.rms_dp, 0.25, tol);
    /* a third position where the argmax disagrees: model (0, ln 3), base (0, 0)
     * is a tie whose first index 0 differs from the model's 1 */
    float model2[2] = {0, (float)log(3.0)};
    qv_ppl_acc_add(&a, model2, base, 2, 1);
    qv_ppl_stats_compute(&a, &s);
    ck_assert_double_eq_tol(s.same_top1, 2.0 / 3.0, 1e-12);
    ck_assert_double_eq_tol(s.same_top1_stderr, sqrt(2.0 / 9.0 / 2.0), 1e-12);
    qv_ppl_acc_clear(&a);
    /* the baseline against itself: KLD 0, dPPL 0 */
    qv_ppl_acc_init(&a);
    qv_ppl_acc_add(&a, model, model, 2, 0);
    qv_ppl_acc_add(&a, model, model, 2, 1);
    qv_ppl_stats_compute(&a, &s);
    ck_assert_double_eq_tol(s.kld_mean, 0, 1e-15);
    ck_assert_double_eq_tol(s.dppl, 0, 1e-12);
    ck_assert_double_eq_tol(s.ppl, sqrt(16.0 / 3.0), tol); /* nll ln(4/3), ln 4 */
    qv_ppl_acc_clear(&a);
}
END_TEST

/* The chunking protocol on the tiny model: counts, BOS replacement and refusals. */
START_TEST(test_protocol_chunks)
{
    tiny t;
    tiny_build(&t, 5);
    int32_t tok[100];
    tokens_of(8, tok, 100);
    qv_ppl_acc acc;
    qv_ppl_acc_init(&acc);
    ck_assert(qv_ppl_eval(&t.m, NULL, tok, 100, 16, 0, 3, &acc, NULL, NULL) == QV_OK);
    ck_assert_int_eq(acc.n, 6 * (16 - 1 - 8)); /* 100/16 = 6 chunks, positions 8..14 */
    qv_ppl_stats s;
    qv_ppl_stats_compute(&acc, &s);
    ck_assert(s.kld_mean == 0 && s.ppl == s.ppl_base);
    /* nll of position 8 of chunk 0 equals the one computed directly */
    int32_t c0[16];
    memcpy(c0, tok, sizeof c0);
    c0[0] = 3;
    float *z = malloc(sizeof(float) * 16 * VOCAB);
    qv_linear_backend lb = qv_linear_fp32();
    ck_assert(qv_llama_forward(&t.m, &lb, c0, 16, z, NULL) == QV_OK);
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < VOCAB; i++) mx = fmax(mx, z[8 * VOCAB + i]);
    for (int i = 0; i < VOCAB; i++) sum += exp(z[8 * VOCAB + i] - mx);
    ck_assert_double_eq_tol(acc.nll[0], mx + log(sum) - z[8 * VOCAB + tok[9]], 1e-9);
    qv_ppl_acc_clear(&acc);
    qv_ppl_acc_init(&acc);
    ck_assert(qv_ppl_eval(&t.m, NULL, tok, 100, 16, 2, -1, &acc, NULL, NULL) == QV_OK);
    ck_assert_int_eq(acc.n, 2 * 7);
    ck_assert(qv_ppl_eval(&t.m, NULL, tok, 10, 16, 0, -1, &acc, NULL, NULL) == QV_ERR_USAGE);
    qv_ppl_acc_clear(&acc);
    free(z);
    tiny_free(&t);
}
END_TEST

/* One chunk's baseline, computed once (qv_ppl_base) and shared, gives the
 * same bits as the per-row statistics (qv_ppl_acc_add) on a baseline forward
 * pass run afresh, and the block errors summed here directly: for the baseline
 * against itself and for a quantized backend. */
START_TEST(test_shared_baseline_same_bits)
{
    tiny t;
    tiny_build(&t, 4242);
    enum { T = 24, N = 3 * T };
    int32_t tok[N];
    tokens_of(17, tok, N);
    const qv_variant *v = qv_variant_find("w8a8-i8-tok-ch");
    ck_assert(v != NULL);
    qv_linear_backend q;
    ck_assert_msg(qv_linear_variant_cpu(v, &t.m, 0, &q) == QV_OK, "%s", qv_errmsg());
    qv_linear_backend f = qv_linear_fp32();
    float *zb = malloc(sizeof(float) * T * VOCAB), *zq = malloc(sizeof(float) * T * VOCAB);
    float *ob = malloc(sizeof(float) * LAYERS * T * DIM), *oq = malloc(sizeof(float) * LAYERS * T * DIM);
    for (int use_q = 0; use_q < 2; use_q++) {
        qv_ppl_acc shared, rows;
        qv_ppl_acc_init(&shared);
        qv_ppl_acc_init(&rows);
        double e_sh[LAYERS] = {0}, r_sh[LAYERS] = {0}, e_rw[LAYERS] = {0}, r_rw[LAYERS] = {0};
        int64_t n_chunks = 0;
        ck_assert(qv_ppl_chunks(N, T, 0, &n_chunks) == QV_OK && n_chunks == 3);
        for (int64_t ci = 0; ci < n_chunks; ci++) {
            qv_ppl_base b;
            ck_assert(qv_ppl_base_compute(&t.m, tok, N, T, ci, 5, &b) == QV_OK);
            ck_assert(qv_ppl_eval_chunk(&t.m, use_q ? &q : NULL, &b, &shared, e_sh, r_sh) == QV_OK);
            qv_ppl_base_free(&b);
            /* the same chunk by hand */
            int32_t c[T];
            memcpy(c, tok + ci * T, sizeof c);
            c[0] = 5;
            ck_assert(qv_llama_forward(&t.m, &f, c, T, zb, ob) == QV_OK);
            ck_assert(qv_llama_forward(&t.m, use_q ? &q : &f, c, T, zq, oq) == QV_OK);
            for (int j = T / 2; j < T - 1; j++)
                qv_ppl_acc_add(&rows, zq + j * VOCAB, zb + j * VOCAB, VOCAB, tok[ci * T + j + 1]);
            for (int l = 0; l < LAYERS; l++) {
                double e = 0, r = 0; /* summed per chunk, then added, as the protocol does */
                for (int i = 0; i < T * DIM; i++) {
                    double bb = ob[l * T * DIM + i], d = (double)oq[l * T * DIM + i] - bb;
                    e += d * d;
                    r += bb * bb;
                }
                e_rw[l] += e;
                r_rw[l] += r;
            }
        }
        ck_assert_int_eq(shared.n, 3 * (T - 1 - T / 2));
        ck_assert_int_eq(shared.n, rows.n);
        size_t bytes = sizeof(double) * (size_t)rows.n;
        ck_assert(memcmp(shared.nll, rows.nll, bytes) == 0);
        ck_assert(memcmp(shared.nll_base, rows.nll_base, bytes) == 0);
        ck_assert(memcmp(shared.kld, rows.kld, bytes) == 0);
        ck_assert(memcmp(shared.dp, rows.dp, bytes) == 0);
        ck_assert_int_eq(shared.same_top1, rows.same_top1);
        ck_assert(memcmp(e_sh, e_rw, sizeof e_sh) == 0 && memcmp(r_sh, r_rw, sizeof r_sh) == 0);
        /* not a comparison of zeros: the quantized backend moves every statistic */
        if (use_q) ck_assert(rows.kld[0] > 0 && e_rw[LAYERS - 1] > 0 && rows.same_top1 < rows.n + 1);
        qv_ppl_acc_clear(&shared);
        qv_ppl_acc_clear(&rows);
    }
    free(zb); free(zq); free(ob); free(oq);
    qv_linear_backend_free(&q);
    tiny_free(&t);
}
END_TEST

/* A backend reuses the activation codes of Q for K and V, and of gate for up:
 * the outputs equal those of a fresh backend that sees each layer alone, and
 * an input changed in place under the same pointer is quantized again. */
START_TEST(test_backend_input_reuse)
{
    const qv_variant *v = qv_registry_get(_i);
    tiny t;
    tiny_build(&t, 606);
    enum { T = 10 };
    float x[T * HID], y[T * HID], want[T * HID];
    uint64_t sd = 99 + (uint64_t)_i;
    for (int i = 0; i < T * HID; i++) x[i] = uni(&sd, 2.0f);
    qv_linear_backend a, b;
    ck_assert_msg(qv_linear_variant_cpu(v, &t.m, 0, &a) == QV_OK, "%s: %s", v->name, qv_errmsg());
    ck_assert(qv_linear_backend_prepare(&a, T) == QV_OK);
    static const qv_llama_lin order[] = {QV_LIN_Q, QV_LIN_K, QV_LIN_V, QV_LIN_GATE, QV_LIN_UP};
    for (int round = 0; round < 2; round++) {
        for (size_t w = 0; w < sizeof order / sizeof order[0]; w++) {
            int n_in, n_out;
            qv_llama_lin_shape(&t.m.c, order[w], &n_in, &n_out);
            ck_assert(a.run(a.ctx, &t.m, 1, order[w], x, T, y) == QV_OK);
            ck_assert(qv_linear_variant_cpu(v, &t.m, 0, &b) == QV_OK);
            ck_assert(b.run(b.ctx, &t.m, 1, order[w], x, T, want) == QV_OK);
            qv_linear_backend_free(&b);
            ck_assert_msg(memcmp(y, want, sizeof(float) * T * (size_t)n_out) == 0, "%s: layer %d, round %d",
                          v->name, (int)order[w], round);
        }
        for (int i = 0; i < T * HID; i++) x[i] = -0.5f * x[i] + 0.25f; /* new values, same pointer */
    }
    qv_linear_backend_free(&a);
    tiny_free(&t);
}
END_TEST

/* `qvet ppl` refuses bad usage and a missing file with exit 2 (status.h:
 * bad input) before evaluating anything. */
START_TEST(test_cli_refusals)
{
    static const char *const cases[][8] = {
        {"ppl", NULL},
        {"ppl", "--model", "m.gguf", NULL},
        {"ppl", "--model", "m.gguf", "--text", "t.txt", "--max-seconds", "0", NULL},
        {"ppl", "--model", "m.gguf", "--text", "t.txt", "--max-seconds", "x", NULL},
        {"ppl", "--model", "m.gguf", "--text", "t.txt", "--cpu", "--gpu", NULL},
        {"ppl", "--model", "m.gguf", "--text", "t.txt", "--variant", "no-such-row", NULL},
        {"ppl", "--model", "m.gguf", "--text", "t.txt", "--chunks", "0", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[8];
        int argc = 0;
        while (cases[i][argc]) { argv[argc] = (char *)cases[i][argc]; argc++; }
        argv[argc] = NULL;
        ck_assert_msg(qv_cmd_ppl(argc, argv) == 2, "case %zu", i);
    }
    char *missing[] = {"ppl", "--model", "/nonexistent/m.gguf", "--text", "/nonexistent/t.txt", "--cpu-fast", NULL};
    ck_assert_int_eq(qv_cmd_ppl(6, missing), 2);
    /* a directory as the model (it opens, and its size reads as LONG_MAX:
     * once an out-of-memory exit 3) */
    char *dir[] = {"ppl", "--model", ".", "--text", ".", "--cpu-fast", NULL};
    ck_assert_int_eq(qv_cmd_ppl(6, dir), 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("llama");
    TCase *tc = tcase_create("tiny");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_fp32_vs_naive, 0, 3);
    tcase_add_test(tc, test_forward_is_causal_and_position_aware);
    tcase_add_loop_test(tc, test_quantized_cpu_paths, 0, qv_registry_count());
    tcase_add_loop_test(tc, test_rtn_bound, 0, qv_registry_count());
    tcase_add_test(tc, test_fp4_quantizer);
    tcase_add_test(tc, test_padded_shapes);
    tcase_add_test(tc, test_protocol_math);
    tcase_add_test(tc, test_protocol_chunks);
    tcase_add_test(tc, test_shared_baseline_same_bits);
    tcase_add_loop_test(tc, test_backend_input_reuse, 0, qv_registry_count());
    tcase_add_test(tc, test_cli_refusals);
    suite_add_tcase(s, tc);
    return suite_run(s);
}
