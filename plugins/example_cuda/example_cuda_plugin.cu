/* example_cuda_plugin.cu: a qvet plugin (plugin.h, ABI version 3) on device
 * pointers, in CUDA C: one W4A16 GEMM spec and one routed row, each a plain
 * kernel written independently of qvet's own kernels and models. It includes
 * only qvet's public headers and never links libqvet, as a user's CUDA kernel
 * library would; it is what a plugin wrapping such a library looks like.
 *
 *   build: nvcc -O2 -std=c++17 -Iinclude -gencode=arch=compute_90,code=sm_90 -Xcompiler -fPIC -shared \
 *               example_cuda_plugin.cu -o libqvet_example_cuda_plugin.so
 *   run:   qvet check --plugin ./libqvet_example_cuda_plugin.so
 *          qvet fuzz --plugin ./libqvet_example_cuda_plugin.so --cases 200
 *
 * The GEMM spec w=u4b8,ws=f16/g128 (docs/spec.md): every weight (q - 8) * s
 * rounded once to fp16 (s the fp16 scale of its column and group of 128 K),
 * the products with the fp16 activations summed in fp32, one RNE cast to fp16.
 *
 * The routed row moe-mixtral-w4a16-g128-f16 (docs/moe.md): the same experts;
 * per token an fp32 softmax over the router logits (CUDA's expf, within the 2
 * ulps the row declares), the two largest (the lower index on a tie), their
 * weights divided by their sum; each chosen local expert's product weighed
 * in fp32 and the terms summed in fp32 with the shared experts' products,
 * then one RNE cast to fp16. An expert mapped to -1 adds nothing.
 *
 * Every pointer qvet passes is a device pointer except the routed problem and
 * its expert array, which are host structs (plugin.h): the launch copies the
 * experts' buffer addresses into a device table. Every CUDA call and launch
 * is checked; a failure returns non-zero, which qvet records as a FAIL.
 *
 * Mutants (bug classes of docs/design.md §6 that qvet must FAIL, built by
 * the Makefile into their own libraries):
 *   -DQV_MUTANT_example_cuda_scale_col0      every column takes column 0's
 *       scale (the per-channel scale that only worked when all were equal);
 *   -DQV_MUTANT_example_cuda_weight_after_cast  each expert's product cast
 *       to fp16 before its router weight (vLLM #32002). */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "qvet/plugin.h"

#define SPEC_W4A16 "w=u4b8,ws=f16/g128"
#define ROW_MOE "moe-mixtral-w4a16-g128-f16"
#define GROUP 128
#define TOPK 2

static const char *const variants[] = {SPEC_W4A16, ROW_MOE};

extern "C" {
int qv_plugin_abi_version(void) { return QV_PLUGIN_ABI_VERSION; }
const char *qv_plugin_name(void) { return "example-cuda"; }
int qv_plugin_variant_count(void) { return (int)(sizeof variants / sizeof variants[0]); }
const char *qv_plugin_variant(int i) { return i >= 0 && i < qv_plugin_variant_count() ? variants[i] : NULL; }
int qv_plugin_pointers(void) { return QV_PLUGIN_DEVICE; }
}

/* One expert's weights as the kernels read them: q (k, n) codes 0..15,
 * scales (k / 128, n) fp16 bits. */
struct expert_ptrs {
    const uint8_t *q;
    const __half *s;
};

/* Weight (kk, j) of one expert, rounded once to fp16. */
__device__ static float weight(const expert_ptrs w, int n, int kk, int j)
{
#ifdef QV_MUTANT_example_cuda_scale_col0
    const float s = __half2float(w.s[(kk / GROUP) * n]);
#else
    const float s = __half2float(w.s[(kk / GROUP) * n + j]);
#endif
    return __half2float(__float2half_rn((float)((int)w.q[(int64_t)kk * n + j] - 8) * s));
}

/* Row `row` of a (rows, k) fp16 activation matrix times column j of w, in fp32. */
__device__ static float dot(const __half *a, const expert_ptrs w, int n, int k, int j)
{
    float acc = 0.0f;
    for (int kk = 0; kk < k; kk++) acc = fmaf(__half2float(a[kk]), weight(w, n, kk, j), acc);
    return acc;
}

/* ---- the GEMM spec: a thread per output element ---- */

__global__ void k_gemm(const __half *a, expert_ptrs w, __half *c, int m, int n, int k)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)m * n) return;
    const int i = (int)(idx / n), j = (int)(idx % n);
    c[idx] = __float2half_rn(dot(a + (int64_t)i * k, w, n, k, j));
}

static int check(cudaError_t e) { return e == cudaSuccess ? 0 : 3; }

extern "C" int qv_plugin_launch(const char *variant, const qv_gemm_args *args)
{
    if (strcmp(variant, SPEC_W4A16)) return 1; /* not ours */
    if (args->m < 1 || args->n < 1 || args->k < 1 || args->k % GROUP || !args->a || !args->b || !args->scales ||
        !args->c)
        return 2;
    const int64_t count = (int64_t)args->m * args->n;
    const expert_ptrs w = {(const uint8_t *)args->b, (const __half *)args->scales};
    k_gemm<<<(unsigned)((count + 255) / 256), 256, 0, (cudaStream_t)args->stream>>>(
        (const __half *)args->a, w, (__half *)args->c, args->m, args->n, args->k);
    return check(cudaGetLastError());
}

/* ---- the routed row ---- */

/* A thread per token: softmax over the e logits, the two largest (lower
 * index first on equal probabilities), weights divided by their sum. */
__global__ void k_route(const float *logits, int t, int e, int32_t *ids, float *weights)
{
    const int tok = blockIdx.x * blockDim.x + threadIdx.x;
    if (tok >= t) return;
    const float *l = logits + (int64_t)tok * e;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j < e; j++) mx = fmaxf(mx, l[j]);
    for (int j = 0; j < e; j++) sum += expf(l[j] - mx);
    int id[TOPK] = {-1, -1};
    float pr[TOPK] = {-1.0f, -1.0f};
    for (int j = 0; j < e; j++) {
        const float pj = expf(l[j] - mx) / sum;
        if (pj > pr[0]) pr[1] = pr[0], id[1] = id[0], pr[0] = pj, id[0] = j;
        else if (pj > pr[1]) pr[1] = pj, id[1] = j;
    }
    const float norm = pr[0] + pr[1];
    for (int c = 0; c < TOPK; c++) {
        ids[(int64_t)tok * TOPK + c] = id[c];
        weights[(int64_t)tok * TOPK + c] = pr[c] / norm;
    }
}

/* A thread per output element: the chosen local experts' weighed products
 * and the shared experts' products, summed in fp32, cast once. */
__global__ void k_combine(const __half *a, const expert_ptrs *experts, const int32_t *expert_map, const int32_t *ids,
                          const float *weights, int e_local, int shared, __half *out, int t, int n, int k)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)t * n) return;
    const int tok = (int)(idx / n), j = (int)(idx % n);
    const __half *row = a + (int64_t)tok * k;
    float y = 0.0f;
    for (int c = 0; c < TOPK; c++) {
        const int x = expert_map[ids[(int64_t)tok * TOPK + c]];
        if (x < 0) continue; /* held by another rank */
        const float p = dot(row, experts[x], n, k, j), w = weights[(int64_t)tok * TOPK + c];
#ifdef QV_MUTANT_example_cuda_weight_after_cast
        y += __half2float(__float2half_rn(__half2float(__float2half_rn(p)) * w));
#else
        y += w * p;
#endif
    }
    for (int s = 0; s < shared; s++) y += dot(row, experts[e_local + s], n, k, j);
    out[idx] = __float2half_rn(y);
}

extern "C" int qv_plugin_moe_launch(const char *variant, const qv_moe_launch_args *args)
{
    const qv_moe_problem *p = args->p;
    if (strcmp(variant, ROW_MOE) || p->s->topk != TOPK || p->s->logit_fmt != QV_FMT_F32 || p->k % GROUP ||
        p->t < 1 || p->n < 1 || p->e < TOPK)
        return 2;
    const int nx = p->e_local + p->shared;
    expert_ptrs *table = (expert_ptrs *)malloc(sizeof(expert_ptrs) * (size_t)(nx > 0 ? nx : 1));
    if (!table) return 4;
    for (int i = 0; i < nx; i++) table[i] = {(const uint8_t *)p->w[i].q, (const __half *)p->w[i].scales};
    expert_ptrs *dev = NULL;
    int rc = check(cudaMalloc(&dev, sizeof(expert_ptrs) * (size_t)(nx > 0 ? nx : 1)));
    if (!rc) rc = check(cudaMemcpy(dev, table, sizeof(expert_ptrs) * (size_t)nx, cudaMemcpyHostToDevice));
    free(table);
    if (!rc) {
        k_route<<<(unsigned)((p->t + 127) / 128), 128>>>((const float *)p->logits, (int)p->t, p->e, args->topk_ids,
                                                         args->topk_weights);
        rc = check(cudaGetLastError());
    }
    if (!rc) {
        const int64_t count = p->t * p->n;
        k_combine<<<(unsigned)((count + 255) / 256), 256>>>((const __half *)p->a, dev, p->expert_map, args->topk_ids,
                                                            args->topk_weights, p->e_local, p->shared,
                                                            (__half *)args->out, (int)p->t, (int)p->n, (int)p->k);
        rc = check(cudaGetLastError());
    }
    /* the table lives until both kernels are done */
    if (!rc) rc = check(cudaDeviceSynchronize());
    if (dev) cudaFree(dev);
    return rc;
}
