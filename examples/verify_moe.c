/* verify_moe.c: a routed (mixture-of-experts) layer checked with qvet's CPU library alone:
 *   cc -std=c11 -Iinclude verify_moe.c libqvet_cpu.a -lmpfr -lgmp -lopenblas -lm -lpthread
 * The layer is computed in plain C as a kernel would, with DeepSeek-V3's router: sigmoid
 * scores, a per-expert selection bias, 4 groups of 4 experts scored by their top-2 sums, the 2
 * best groups kept, the top-2 of their experts, the unbiased scores renormalized times 2.5;
 * bf16 experts summed in fp32. `verify_moe mask0` scores the groups not kept 0.0 where the
 * spec declares -Inf (the transformers gate against vLLM's grouped_topk): the tokens whose
 * biased scores are all below 0 then take other experts, and qvet says which. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qvet/moe.h"
#include "qvet/qvet.h"

enum { T = 6, E = 16, G = 4, GK = 2, TOPK = 2, K = 64, N = 32 };
static const char *const SPEC =
    "w=bf16,a=bf16,out=f32,route=sigmoid-topk-renorm,topk=2,rsf=2.5,groups=4,gtopk=2,sbias=f32";

/* The index of the largest of x[0..n) not yet taken, the lower one among equal values. */
static int best_of(const float *x, const int *taken, int n)
{
    int b = -1;
    for (int i = 0; i < n; i++)
        if (!taken[i] && (b < 0 || x[i] > x[b])) b = i;
    return b;
}

int main(int argc, char **argv)
{
    const int mask0 = argc > 1 && !strcmp(argv[1], "mask0");
    qv_moe_spec s;
    qv_moe_problem p;
    if (qv_moe_spec_parse(SPEC, &s) != QV_OK || qv_moe_problem_create(&p, &s, T, N, K, E, E, 0) != QV_OK) {
        fprintf(stderr, "verify_moe: %s\n", qv_errmsg());
        return 2;
    }
    uint16_t *a = p.a; /* (T, K) bf16 bits; expert x's weights p.w[x].q: (K, N) bf16 bits */
    float *logits = p.logits, out[T * N], w[T * TOPK];
    int32_t ids[T * TOPK];
    for (int i = 0; i < T * K; i++) a[i] = qv_f32_to_bf16((float)(i % 9 - 4) / 8);
    for (int x = 0; x < E; x++)
        for (int i = 0; i < K * N; i++) ((uint16_t *)p.w[x].q)[i] = qv_f32_to_bf16((float)((i * 7 + x) % 11 - 5) / 64);
    for (int j = 0; j < E; j++) p.score_bias[j] = -0.6f + 0.01f * (float)(j % 5);
    for (int i = 0; i < T * E; i++) logits[i] = (float)((i * 37) % 17 - 8) / 4 - (i / E >= T / 2 ? 4.0f : 0.0f);
    for (int t = 0; t < T; t++) {
        float sc[E], sk[E], gs[G];
        int taken[E] = {0}, kept[G] = {0};
        for (int j = 0; j < E; j++) {
            sc[j] = 1.0f / (1.0f + expf(-logits[t * E + j]));
            sk[j] = sc[j] + p.score_bias[j];
        }
        for (int g = 0; g < G; g++) { /* the sum of the group's two best selection scores */
            int in[E / G] = {0}, b1 = best_of(sk + g * (E / G), in, E / G);
            in[b1] = 1;
            gs[g] = sk[g * (E / G) + b1] + sk[g * (E / G) + best_of(sk + g * (E / G), in, E / G)];
        }
        for (int c = 0; c < GK; c++) kept[best_of(gs, kept, G)] = 1;
        for (int j = 0; j < E; j++)
            if (!kept[j / (E / G)]) sk[j] = mask0 ? 0.0f : -INFINITY;
        float sum = 0;
        for (int c = 0; c < TOPK; c++) {
            int j = best_of(sk, taken, E);
            taken[j] = 1;
            ids[t * TOPK + c] = j;
            sum += sc[j];
        }
        for (int c = 0; c < TOPK; c++) w[t * TOPK + c] = sc[ids[t * TOPK + c]] / sum * 2.5f;
        for (int n = 0; n < N; n++) {
            float y = 0;
            for (int c = 0; c < TOPK; c++) {
                const uint16_t *q = p.w[ids[t * TOPK + c]].q;
                float acc = 0;
                for (int k = 0; k < K; k++) acc += qv_bf16_to_f32(a[t * K + k]) * qv_bf16_to_f32(q[k * N + n]);
                y += w[t * TOPK + c] * acc;
            }
            out[t * N + n] = y;
        }
    }
    qv_moe_result r;
    qv_status st = ref_moe_verify(&p, out, ids, w, &r);
    if (st == QV_OK) printf("%s%s%s\n", qv_grade_name(r.out.grade), r.out.reason[0] ? ": " : "", r.out.reason);
    else fprintf(stderr, "verify_moe: %s\n", qv_errmsg());
    qv_moe_problem_destroy(&p);
    return st != QV_OK ? 2 : r.out.grade == QV_FAIL; /* 0: PASS or MARGINAL, 1: FAIL, 2: an error */
}
