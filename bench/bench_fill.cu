/* bench_fill.cu: random device buffers for the benchmark (bench.h). Speed does
 * not depend on which codes a kernel reads, only on never timing zeros, so the
 * benchmark fills packed buffers with random bits directly on the device
 * instead of packing hundreds of millions of weights on the host. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "internal/bench.h"
#include "internal/gpu.h"

namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

enum { FILL_BYTES = 0, FILL_E4M3, FILL_E8M0, FILL_F16, FILL_BF16, FILL_F32 };

/* Element i of the buffer from the i-th random word of the seed. */
__global__ void k_bench_fill(unsigned char *dev, int64_t count, int kind, uint64_t seed, float lo, float hi,
                             int signed_values)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t r = mix64(seed ^ mix64((uint64_t)i));
        float u = (float)(r >> 40) * 0x1p-24f;
        float x = lo + (hi - lo) * u;
        if (signed_values && (r & 1)) x = -x;
        switch (kind) {
        case FILL_BYTES: dev[i] = (unsigned char)(r >> 8); break;
        case FILL_E4M3: {
            unsigned char c = (unsigned char)(r >> 8);
            /* 0x7F and 0xFF are e4m3fn's NaN codes. */
            dev[i] = (c & 0x7F) == 0x7F ? (unsigned char)(c - 1) : c;
            break;
        }
        /* 2^floor(log2 x): the biased exponent of the fp32 x (both bias
         * 127). MXFP4 kernels take a faster form when no code of a stage
         * exceeds 127 (scales up to 1, as in real checkpoints), so random
         * bytes, half of them 128 or more, would time a form real weights
         * never run. */
        case FILL_E8M0: dev[i] = (unsigned char)(__float_as_uint(x) >> 23); break;
        case FILL_F16: reinterpret_cast<__half *>(dev)[i] = __float2half_rn(x); break;
        case FILL_BF16: reinterpret_cast<__nv_bfloat16 *>(dev)[i] = __float2bfloat16_rn(x); break;
        default: reinterpret_cast<float *>(dev)[i] = x; break;
        }
    }
}

/* One thread waits `ns` nanoseconds of the global timer, sleeping between
 * reads: it holds the stream, and almost none of the GPU's power. */
__global__ void k_bench_wait(uint64_t ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

} /* namespace */

extern "C" qv_status qv_bench_wait(double us, void *stream)
{
    k_bench_wait<<<1, 1, 0, (cudaStream_t)stream>>>((uint64_t)(us * 1000.0));
    QV_CUDA_TRY(cudaGetLastError(), "benchmark wait launch");
    return QV_OK;
}

extern "C" qv_status qv_bench_fill(void *dev, int64_t count, qv_fmt fmt, uint64_t seed, float lo, float hi,
                                   int signed_values, void *stream)
{
    if (count <= 0) return QV_OK;
    int kind;
    int64_t n = count;
    switch (fmt) {
    case QV_FMT_E4M3: kind = FILL_E4M3; break;
    case QV_FMT_E8M0: kind = FILL_E8M0; break;
    case QV_FMT_F16: kind = FILL_F16; break;
    case QV_FMT_BF16: kind = FILL_BF16; break;
    case QV_FMT_F32: kind = FILL_F32; break;
    case QV_FMT_I32: kind = FILL_BYTES, n = count * 4; break;
    case QV_FMT_U4:
    case QV_FMT_I4: kind = FILL_BYTES, n = (count + 1) / 2; break; /* two codes per byte */
    default: kind = FILL_BYTES; break; /* 8-bit integer codes: any bits are codes */
    }
    int blocks = (int)((n + 255) / 256 < 8192 ? (n + 255) / 256 : 8192);
    k_bench_fill<<<blocks, 256, 0, (cudaStream_t)stream>>>((unsigned char *)dev, n, kind, seed, lo, hi,
                                                           signed_values);
    QV_CUDA_TRY(cudaGetLastError(), "benchmark fill launch");
    return QV_OK;
}
