/* probe_read.cuh: the kernels two standalone probes share (tools/probe-read.cu,
 * tools/probe-ring.cu; not part of `make`): an empty kernel, the launch
 * between two events, and a grid-stride read of a buffer, the floor of any
 * kernel that reads the same bytes once. Both fold what they read into one
 * value that is stored only if it equals kKey, so that nothing is elided;
 * a buffer that happened to fold to it would cost one store, nothing else. */
#ifndef QVET_TOOLS_PROBE_READ_CUH
#define QVET_TOOLS_PROBE_READ_CUH

#include <cuda_runtime.h>
#include <stdint.h>

static const uint32_t kKey = 0x9E3779B9u;

__global__ void k_empty(uint32_t *out)
{
    if (out[0] == kKey + 1) out[1] = 0;
}

/* Streams n16 16-byte words: each thread U words in flight per step, plain
 * LDG.128 with L1 not allocated. */
template <int U> __global__ void k_read(const uint4 *__restrict__ src, int64_t n16, uint32_t *out)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t acc = 0;
    for (; i + (U - 1) * stride < n16; i += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                         : "l"(src + i + u * stride));
#pragma unroll
        for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n16; i += stride) {
        const uint4 v = src[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == kKey) out[0] = acc;
}

#endif
