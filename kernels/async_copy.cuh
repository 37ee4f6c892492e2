/* async_copy.cuh: the shared-memory rings of the Hopper kernels (wonly_small.cu,
 * wonly_wg.cu): mbarriers, bulk copies and tensor-map copies that complete on
 * them (PTX ISA 8.0, sm_90: "mbarrier", "cp.async.bulk",
 * "cp.async.bulk.tensor", "cp.async.bulk.commit_group", "cp.async.bulk.wait_group",
 * "Memory Consistency Model" for the proxies), and the tensor-map stores of
 * wonly_wg.cu's epilogue. Rule:
 * each wrapper is one PTX instruction (or one wait loop around one) with the
 * semantics its comment names; shared addresses are 32-bit shared-window
 * addresses (__cvta_generic_to_shared). CUDA C++ only. */
#ifndef QVET_KERNELS_ASYNC_COPY_CUH
#define QVET_KERNELS_ASYNC_COPY_CUH

#include <cuda.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

/* Makes the initialised barriers visible to the async proxy (the copies). */
__device__ __forceinline__ void mbar_fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* Orders this thread's earlier generic-proxy shared-memory accesses (and those
 * it has acquired) before its later copies, which write through the async
 * proxy. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* One arrival (release: this thread's earlier accesses are ordered before
 * whatever a waiter on the phase does next). */
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* One arrival that also announces `bytes` of copy data for the phase. */
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/* Spins until the barrier's phase with the given parity has completed
 * (acquire: what the arrivals ordered before them is visible after). A fresh
 * barrier is in phase 0: parity 1 passes at once. */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT_%=;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

/* An L2 policy that evicts the streamed data first (data read once per launch). */
__device__ __forceinline__ uint64_t l2_evict_first()
{
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    return pol;
}

/* bytes (a multiple of 16) from global src to shared dst, both 16-byte
 * aligned, completing on barrier bar, under L2 cache policy pol
 * (l2_evict_first). src is an input nothing writes during the kernel. */
__device__ __forceinline__ void bulk_copy_hint(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar,
                                               uint64_t pol)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(pol)
                 : "memory");
}

/* The box of a 2D tensor map at element coordinates (x, y) (x innermost) to
 * shared dst, completing on bar; elements outside the tensor arrive as zeros
 * and count towards the bytes. With a 128-byte swizzle dst is 1024-byte
 * aligned. `map` is a __grid_constant__ kernel parameter. */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int x, int y, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
                 : "memory");
}

/* The box of a 2D tensor map at element coordinates (x, y) written from
 * shared src (the layout a load of the same map would give, swizzle
 * included), as part of this thread's current bulk async-group; elements
 * outside the tensor are not written. The shared-memory writes of src must be
 * made visible to the async proxy first (fence_proxy_async by each writer,
 * then a barrier). */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, int x, int y, uint32_t src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(x), "r"(y), "r"(src)
                 : "memory");
}

/* Closes this thread's current bulk async-group (the stores issued since the
 * last commit). */
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

/* Waits until at most N of this thread's committed bulk async-groups still
 * read their shared source (the source may then be overwritten). */
template <int N> __device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

/* Waits until at most N of this thread's committed bulk async-groups are
 * incomplete (their global writes done). */
template <int N> __device__ __forceinline__ void bulk_wait()
{
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

} /* namespace */

#endif
