/* example_moe_plugin.c: a qvet plugin (plugin.h, ABI version 3) implementing
 * one routed row, moe-mixtral-w4a16-g128-f16, on host pointers, in plain C
 * written independently of qvet's own routed model. It includes only qvet's
 * public headers and never links libqvet, as any third-party plugin would.
 *
 *   build: cc -O2 -std=c11 -ffp-contract=off -Iinclude -fPIC -shared example_moe_plugin.c \
 *              -o libqvet_example_moe_plugin.so -lm
 *   run:   qvet check --plugin ./libqvet_example_moe_plugin.so
 *          qvet fuzz --plugin ./libqvet_example_moe_plugin.so --cases 200
 *
 * The row's declared arithmetic (`qvet list --spec moe-mixtral-w4a16-g128-f16`,
 * docs/moe.md): w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2. Per
 * token: an fp32 softmax over the router logits, the two largest, their
 * weights divided by their sum; each chosen local expert's product with every
 * weight (q - 8) * s rounded once to fp16 and the products summed in fp32;
 * the weighted products and the shared experts' summed in fp32, then one RNE
 * cast to fp16. An expert mapped to -1 is held elsewhere and adds nothing.
 *
 * Built with -DQV_MUTANT_example_moe_weight_after_cast it weighs each product
 * after casting it to fp16 (the bug vLLM #32002 fixed), which qvet must fail. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "qvet/plugin.h"

#define ROW "moe-mixtral-w4a16-g128-f16"
#define TOPK 2
#define GROUP 128

int qv_plugin_abi_version(void) { return QV_PLUGIN_ABI_VERSION; }
const char *qv_plugin_name(void) { return "example-moe"; }
int qv_plugin_variant_count(void) { return 1; }
const char *qv_plugin_variant(int i) { return i == 0 ? ROW : NULL; }
int qv_plugin_pointers(void) { return QV_PLUGIN_HOST; }

/* No GEMM variant: the routed launch is the one that runs. */
int qv_plugin_launch(const char *variant, const qv_gemm_args *args)
{
    (void)variant, (void)args;
    return 1;
}

static float f16_value(uint16_t bits)
{
    _Float16 h;
    memcpy(&h, &bits, sizeof h);
    return (float)h;
}

static uint16_t f16_bits(float x)
{
    _Float16 h = (_Float16)x; /* round to nearest even, overflow to Inf */
    uint16_t b;
    memcpy(&b, &h, sizeof b);
    return b;
}

/* Expert e's product for token t, column j, before the output rounding. */
static float product(const qv_moe_problem *p, int e, int64_t t, int64_t j)
{
    const qv_problem *w = &p->w[e];
    const uint16_t *a = (const uint16_t *)p->a + t * p->k;
    const uint8_t *q = w->q;
    const uint16_t *s = w->scales;
    float acc = 0.0f;
    for (int64_t k = 0; k < p->k; k++) {
        float wk = (float)(_Float16)((float)((int)q[k * p->n + j] - 8) * f16_value(s[(k / GROUP) * p->n + j]));
        acc += f16_value(a[k]) * wk;
    }
    return acc;
}

int qv_plugin_moe_launch(const char *variant, const qv_moe_launch_args *args)
{
    const qv_moe_problem *p = args->p;
    if (strcmp(variant, ROW) || p->s->topk != TOPK || p->k % GROUP) return 2;
    const float *logits = p->logits;
    uint16_t *out = args->out;
    for (int64_t t = 0; t < p->t; t++) {
        /* the softmax over all E, then the top 2 (the lower index on a tie) */
        const float *l = logits + t * p->e;
        float mx = -INFINITY, sum = 0.0f;
        for (int j = 0; j < p->e; j++) mx = l[j] > mx ? l[j] : mx;
        for (int j = 0; j < p->e; j++) sum += expf(l[j] - mx);
        int id[TOPK] = {-1, -1};
        float pr[TOPK] = {-1.0f, -1.0f};
        for (int j = 0; j < p->e; j++) {
            float pj = expf(l[j] - mx) / sum;
            if (pj > pr[0]) pr[1] = pr[0], id[1] = id[0], pr[0] = pj, id[0] = j;
            else if (pj > pr[1]) pr[1] = pj, id[1] = j;
        }
        float norm = pr[0] + pr[1];
        for (int c = 0; c < TOPK; c++) {
            args->topk_ids[t * TOPK + c] = id[c];
            args->topk_weights[t * TOPK + c] = pr[c] / norm;
        }
        for (int64_t j = 0; j < p->n; j++) {
            float y = 0.0f;
            for (int c = 0; c < TOPK; c++) {
                int e = p->expert_map[id[c]];
                if (e < 0) continue; /* held by another rank */
                float w = args->topk_weights[t * TOPK + c];
#ifdef QV_MUTANT_example_moe_weight_after_cast
                y += f16_value(f16_bits(f16_value(f16_bits(product(p, e, t, j))) * w));
#else
                y += w * product(p, e, t, j);
#endif
            }
            for (int sx = 0; sx < p->shared; sx++) y += product(p, p->e_local + sx, t, j);
            out[t * p->n + j] = f16_bits(y);
        }
    }
    return 0;
}
