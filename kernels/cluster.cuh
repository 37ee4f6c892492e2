/* cluster.cuh: thread-block clusters of the Hopper kernels that sum split-K
 * slices through distributed shared memory (wonly_small.cu, aq_gemm.cuh;
 * PTX ISA 7.8, sm_90: "barrier.cluster", "mapa", "ld.shared::cluster").
 * Rule: each wrapper is one PTX instruction (two for a peer's load: map the
 * address, then load) with the semantics its comment names; shared addresses
 * are 32-bit shared-window addresses (__cvta_generic_to_shared). CUDA C++
 * only. */
#ifndef QVET_KERNELS_CLUSTER_CUH
#define QVET_KERNELS_CLUSTER_CUH

#include <cuda_runtime.h>
#include <stdint.h>

namespace {

/* This block's rank in its cluster (0 when the launch has no cluster). */
__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

/* Arrival of every thread of the block at the cluster barrier, releasing its
 * earlier shared-memory writes to the peers that wait. */
__device__ __forceinline__ void cluster_arrive()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}

/* Waits until every thread of every block of the cluster has arrived, and
 * acquires what they released. */
__device__ __forceinline__ void cluster_wait()
{
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* The address in peer block `rank`'s shared memory of this block's shared
 * address addr. */
__device__ __forceinline__ unsigned cluster_peer_addr(unsigned addr, unsigned rank)
{
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
    return remote;
}

/* The 16 bytes (four floats) at shared address addr of peer block `rank`. */
__device__ __forceinline__ float4 cluster_ld_peer_f4(unsigned addr, unsigned rank)
{
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(cluster_peer_addr(addr, rank))
                 : "memory");
    return v;
}

/* The 8 bytes (two words) at shared address addr of peer block `rank`. */
__device__ __forceinline__ uint2 cluster_ld_peer_u2(unsigned addr, unsigned rank)
{
    uint2 v;
    asm volatile("ld.shared::cluster.v2.u32 {%0,%1}, [%2];\n"
                 : "=r"(v.x), "=r"(v.y)
                 : "r"(cluster_peer_addr(addr, rank))
                 : "memory");
    return v;
}

} /* namespace */

#endif
