/* example_plugin.c: a qvet plugin (plugin.h) implementing two registry rows,
 * w8a8-i8-tok-ch and w8a8-i8-tensor, and one spec (int8 x int8 with a bias and
 * a bf16 output), on host pointers, in plain C written independently of qvet's
 * own CPU models. It includes only qvet's public headers and never links
 * libqvet, as any third-party plugin would.
 *
 *   build: cc -O2 -std=c11 -ffp-contract=off -Iinclude -fPIC -shared example_plugin.c -o libqvet_example_plugin.so
 *   run:   qvet check --plugin ./libqvet_example_plugin.so
 *          qvet check --plugin ./libqvet_example_plugin.so --spec 'w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,bias=f32,out=bf16'
 *
 * The declared arithmetic of the two rows (qvet list --spec): exact int32
 * accumulation of int8 x int8, then in fp32 with round-to-nearest
 * acc -> float, times the weight scale, times the activation scale, then one
 * RNE cast to fp16 (overflow to Inf). The spec's (docs/spec.md): the same
 * with a per-channel weight scale and a per-token activation scale, then
 * + bias[n] in fp32, then one RNE cast to bf16 (overflow to Inf). */
#include <stdint.h>
#include <string.h>

#include "qvet/plugin.h"

/* The spec is the plugin's own text; qvet compares its canonical form. */
#define SPEC_I8_BIAS_BF16 "w=i8,ws=f32/c,a=i8,as=f32/tok,acc=i32,bias=f32,out=bf16"

static const char *const variants[] = {"w8a8-i8-tok-ch", "w8a8-i8-tensor", SPEC_I8_BIAS_BF16};

int qv_plugin_abi_version(void) { return QV_PLUGIN_ABI_VERSION; }
const char *qv_plugin_name(void) { return "example"; }
int qv_plugin_variant_count(void) { return (int)(sizeof variants / sizeof variants[0]); }
const char *qv_plugin_variant(int i)
{
    return i >= 0 && i < qv_plugin_variant_count() ? variants[i] : NULL;
}
int qv_plugin_pointers(void) { return QV_PLUGIN_HOST; }

/* fp32 -> fp16 bits, round to nearest even, overflow to Inf, NaN kept quiet. */
static uint16_t f32_to_f16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return sign | 0x7E00u;  /* NaN */
    if (a >= 0x477FF000u) return sign | 0x7C00u; /* >= 65520: rounds past 65504 to Inf */
    if (a >= 0x38800000u) {                      /* >= 2^-14: an fp16 normal */
        uint32_t h = ((a >> 23) - 127 + 15) << 10 | (a & 0x7FFFFFu) >> 13;
        uint32_t rem = a & 0x1FFFu; /* the 13 fraction bits fp16 drops */
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
        return sign | (uint16_t)h;
    }
    /* An fp16 subnormal: the value in units of 2^-24, rounded to even. */
    uint32_t e = a >> 23;
    if (e == 0) return sign; /* fp32 subnormals are far below 2^-25 */
    uint32_t full = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126 - e; /* value / 2^-24 = full * 2^(e - 126) */
    if (shift > 25) return sign;
    uint32_t r = full >> shift, rem = full & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return sign | (uint16_t)r;
}

/* fp32 -> bf16 bits, round to nearest even (overflow carries into Inf), NaN kept quiet. */
static uint16_t f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN */
    uint32_t lsb = (u >> 16) & 1u; /* ties go to the even bf16 */
    return (uint16_t)((u + 0x7FFFu + lsb) >> 16);
}

/* The spec, on its logical arrays (plugin.h): a (m, k) int8 row-major; b (k, n)
 * int8 row-major; scales f32 (n) per channel; a_scale f32 (m) per token; bias
 * f32 (n); c (m, n) bf16 bits row-major. */
static int launch_bias_bf16(const qv_gemm_args *args)
{
    if (args->m < 1 || args->n < 1 || args->k < 1 || !args->a || !args->b || !args->scales || !args->a_scale ||
        !args->bias || !args->c)
        return 2;
    const int8_t *a = args->a, *b = args->b;
    const float *s_w = args->scales, *s_a = args->a_scale, *bias = args->bias;
    uint16_t *c = args->c;
    for (int i = 0; i < args->m; i++)
        for (int j = 0; j < args->n; j++) {
            int64_t acc = 0; /* qvet hands out shapes with K * 128 * 128 < 2^31: exact */
            for (int kk = 0; kk < args->k; kk++)
                acc += (int32_t)a[(int64_t)i * args->k + kk] * (int32_t)b[(int64_t)kk * args->n + j];
            float y = (float)(int32_t)acc;
            y = y * s_w[j];
            y = y * s_a[i];
            /* tests/t_plugin.c builds a copy with -DQV_MUTANT_example_bias_ignored, which
             * never adds the bias: the campaign must FAIL that copy. */
#ifndef QV_MUTANT_example_bias_ignored
            y = y + bias[j];
#endif
            c[(int64_t)i * args->n + j] = f32_to_bf16(y);
        }
    return 0;
}

/* The rows, on their packed arrays: a (m, k) int8 row-major; b (n, k) int8
 * row-major (plain-nk); scales f32: (n) per channel or (1) per tensor; a_scale
 * f32: (m) per token or (1); c (m, n) fp16 bits row-major. */
int qv_plugin_launch(const char *variant, const qv_gemm_args *args)
{
    int per_channel;
    if (!strcmp(variant, variants[0])) per_channel = 1;
    else if (!strcmp(variant, variants[1])) per_channel = 0;
    else if (!strcmp(variant, variants[2])) return launch_bias_bf16(args);
    else return 1; /* not ours */
    if (args->m < 1 || args->n < 1 || args->k < 1 || !args->a || !args->b || !args->scales || !args->a_scale ||
        !args->c)
        return 2;
    const int8_t *a = args->a, *b = args->b;
    const float *s_w = args->scales, *s_a = args->a_scale;
    uint16_t *c = args->c;
    for (int i = 0; i < args->m; i++)
        for (int j = 0; j < args->n; j++) {
            int64_t acc = 0; /* the registry proves K * 128 * 128 < 2^31: exact */
            const int8_t *ar = a + (int64_t)i * args->k, *br = b + (int64_t)j * args->k;
            for (int kk = 0; kk < args->k; kk++) acc += (int32_t)ar[kk] * (int32_t)br[kk];
            float y = (float)(int32_t)acc;
            y = y * s_w[per_channel ? j : 0];
            y = y * s_a[per_channel ? i : 0];
            c[(int64_t)i * args->n + j] = f32_to_f16(y);
        }
    return 0;
}
