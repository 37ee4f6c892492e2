/* t_gpu_ppl.c: the GPU linear backend of `qvet ppl` (eval/linear_gpu.c), which
 * stages activations in pinned buffers, quantizes the input of Q/K/V and of
 * gate/up once, poisons from a device buffer and uploads the weights once.
 *
 * Witness, not the backend's own output: for every registry row with a
 * kernel, each of the seven linear layers of a small llama block is also run
 * through the standard GPU runner (gpu.h qv_gpu_run: its own packing, upload,
 * poison and guard-zone check) on a problem built here from the same float
 * weights and activations (qv_quantize_weights, qv_quantize_acts); the
 * backend's outputs must equal the runner's bit for bit, over two rounds with
 * the input changed in place between them, and nothing may be written past
 * the runner's output. A whole forward pass through the backend then runs
 * twice with the same bits and finite logits.
 * Refusals: no device, or a row without a kernel, gives a status. Without a
 * CUDA device the suite prints exactly "SKIP: no CUDA device" and runs only
 * the refusals, which make no CUDA call besides the backend's device query.
 * Inputs come from (seed, row); the seed is printed and QVET_SEED=<seed>
 * replays it. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/eval.h"
#include "internal/gpu.h"
#include "qvet/formats.h"
#include "support/gpu.h"
#include "support/rand.h"

/* A small block: K = 64 and kv_dim = 32 need padding for g = 128 and 64-wide
 * N tiles, as the real model's K = 576 does. */
enum { DIM = 64, HID = 128, LAYERS = 2, HEADS = 4, KV_HEADS = 2, HD = DIM / HEADS, VOCAB = 96, T = 24 };

static uint64_t g_seed = 20261129;
static int g_gpu; /* a device is present (gpu_suite_start) */

/* A sequence of random draws: word i of stream `stream` under `seed` (rand.h),
 * i advancing with each draw. */
typedef struct draws {
    uint64_t seed, stream, i;
} draws;

/* Uniform in (-a, a). */
static float uni(draws *d, float a)
{
    return (float)((test_rnd_unit(d->seed, d->stream, d->i++) * 2 - 1) * a);
}

static float *rand_vec(draws *s, size_t n, float a, float base)
{
    float *x = malloc(sizeof(float) * n);
    ck_assert(x != NULL);
    for (size_t i = 0; i < n; i++) x[i] = base + uni(s, a);
    return x;
}

/* A random llama model in memory (qv_llama_free releases it). */
static void tiny_model(qv_llama *m, draws *s)
{
    memset(m, 0, sizeof *m);
    m->c = (qv_llama_config){DIM, HID, LAYERS, HEADS, KV_HEADS, HD, VOCAB, HD, 10000.0f, 1e-5f};
    m->tok_embd = rand_vec(s, (size_t)VOCAB * DIM, 0.3f, 0);
    m->out_norm = rand_vec(s, DIM, 0.2f, 1.0f);
    m->output = m->tok_embd;
    m->tied = 1;
    m->layers = calloc(LAYERS, sizeof *m->layers);
    ck_assert(m->layers != NULL);
    for (int l = 0; l < LAYERS; l++) {
        m->layers[l].attn_norm = rand_vec(s, DIM, 0.2f, 1.0f);
        m->layers[l].ffn_norm = rand_vec(s, DIM, 0.2f, 1.0f);
        for (int w = 0; w < QV_LIN_COUNT; w++) {
            int n_in, n_out;
            qv_llama_lin_shape(&m->c, (qv_llama_lin)w, &n_in, &n_out);
            /* 2/sqrt(n_in): outputs of order one for inputs of order one */
            m->layers[l].w[w] = rand_vec(s, (size_t)n_in * n_out, 2.0f / sqrtf((float)n_in), 0);
        }
    }
}

/* The runner's output of one layer as f32 (T, n_out), from a problem built
 * here. Returns the bytes written past the output. */
static int64_t runner_layer(const qv_variant *v, const float *w, int n_out, int n_in, const float *x, float *y)
{
    qv_problem p;
    ck_assert_msg(qv_quantize_weights(v, w, n_out, n_in, T, &p) == QV_OK, "%s: %s", v->name, qv_errmsg());
    ck_assert(qv_quantize_acts(&p, x, T, n_in) == QV_OK);
    size_t es = qv_fmt_storage_bytes(v->ofmt);
    unsigned char *out = malloc((size_t)qv_problem_out_bytes(&p));
    ck_assert(out != NULL);
    qv_gpu_stats st;
    const qv_launch_opts base = gpu_opts(NULL);
    ck_assert_msg(qv_gpu_run(&p, NULL, &base, 1, out, &st) == QV_OK, "%s: %s", v->name, qv_errmsg());
    for (int i = 0; i < T; i++)
        for (int j = 0; j < n_out; j++) {
            const unsigned char *c = out + ((size_t)i * (size_t)p.n + (size_t)j) * es;
            if (es == 4) {
                memcpy(&y[(size_t)i * n_out + j], c, 4);
            } else {
                uint16_t code;
                memcpy(&code, c, 2);
                y[(size_t)i * n_out + j] = (float)qv_decode(v->ofmt, code);
            }
        }
    free(out);
    qv_problem_destroy(&p);
    return st.guard_writes;
}

START_TEST(test_layers_match_runner)
{
    const qv_variant *v = qv_registry_get(_i);
    if (!v->gpu_kernel) return;
    draws s = {g_seed, (uint64_t)_i, 0}; /* the model, then the inputs */
    qv_llama m;
    tiny_model(&m, &s);
    qv_linear_backend lb;
    const qv_launch_opts base = gpu_opts(NULL);
    qv_status st = qv_linear_variant_gpu(v, &m, &base, &lb);
    ck_assert_msg(st == QV_OK, "%s: %s", v->name, qv_errmsg());
    ck_assert_msg(qv_linear_backend_prepare(&lb, T) == QV_OK, "%s: %s", v->name, qv_errmsg());
    float *x = rand_vec(&s, (size_t)T * HID, 2.0f, 0);
    float *y = malloc(sizeof(float) * T * HID), *want = malloc(sizeof(float) * T * HID);
    ck_assert(y && want);
    int64_t differ = 0;
    for (int round = 0; round < 2; round++) {
        for (int l = 0; l < LAYERS; l++)
            for (int w = 0; w < QV_LIN_COUNT; w++) {
                int n_in, n_out;
                qv_llama_lin_shape(&m.c, (qv_llama_lin)w, &n_in, &n_out);
                for (size_t i = 0; i < (size_t)T * n_out; i++) y[i] = NAN;
                st = lb.run(lb.ctx, &m, l, (qv_llama_lin)w, x, T, y);
                ck_assert_msg(st == QV_OK, "%s: %s", v->name, qv_errmsg());
                ck_assert_int_eq(runner_layer(v, m.layers[l].w[w], n_out, n_in, x, want), 0);
                for (size_t i = 0; i < (size_t)T * n_out; i++) {
                    uint32_t a, b;
                    memcpy(&a, &y[i], 4);
                    memcpy(&b, &want[i], 4);
                    differ += a != b;
                }
                ck_assert_msg(differ == 0, "%s: block %d layer %d round %d: %lld outputs differ from the runner",
                              v->name, l, w, round, (long long)differ);
            }
        for (size_t i = 0; i < (size_t)T * HID; i++) x[i] = 0.5f - 0.75f * x[i]; /* new values, same pointer */
    }
    /* A whole forward pass, twice: the same bits, finite logits. */
    int32_t tok[T];
    for (int i = 0; i < T; i++) tok[i] = (int32_t)(test_rnd(s.seed, s.stream, s.i++) % VOCAB);
    float *z0 = malloc(sizeof(float) * T * VOCAB), *z1 = malloc(sizeof(float) * T * VOCAB);
    ck_assert(z0 && z1);
    ck_assert(qv_llama_forward(&m, &lb, tok, T, z0, NULL) == QV_OK);
    ck_assert(qv_llama_forward(&m, &lb, tok, T, z1, NULL) == QV_OK);
    ck_assert_msg(memcmp(z0, z1, sizeof(float) * T * VOCAB) == 0, "%s: two forward passes differ", v->name);
    for (int i = 0; i < T * VOCAB; i++) ck_assert_msg(isfinite(z0[i]), "%s: logit %d is %g", v->name, i, z0[i]);
    free(z0); free(z1); free(x); free(y); free(want);
    qv_linear_backend_free(&lb);
    qv_llama_free(&m);
}
END_TEST

/* Refusals, with or without a device: no device (or a row without a kernel)
 * gives a status, not a crash, and an empty backend cannot be prepared. */
START_TEST(test_refusals)
{
    qv_llama m;
    draws s = {1, 0, 0};
    tiny_model(&m, &s);
    const int gpu = g_gpu;
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (gpu && v->gpu_kernel) continue;
        qv_linear_backend lb;
        memset(&lb, 0xA5, sizeof lb); /* the call must clear it */
        const qv_launch_opts base = gpu_opts(NULL);
    qv_status st = qv_linear_variant_gpu(v, &m, &base, &lb);
        ck_assert_int_eq(st, gpu ? QV_ERR_UNSUPPORTED : QV_ERR_NODEVICE);
        ck_assert(lb.run == NULL && lb.ctx == NULL);
        qv_linear_backend_free(&lb);
    }
    qv_linear_backend none;
    memset(&none, 0, sizeof none);
    ck_assert_int_eq(qv_linear_backend_prepare(&none, T), QV_ERR_USAGE);
    qv_llama_free(&m);
}
END_TEST

int main(void)
{
    g_gpu = gpu_suite_start(&g_seed);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_ppl", g_gpu, g_seed, qv_registry_count(), &tc);
    tcase_add_test(tc, test_refusals);
    if (g_gpu) tcase_add_loop_test(tc, test_layers_match_runner, 0, qv_registry_count());
    return gpu_suite_run(s);
}
