/* mma.cuh: PTX wrappers shared by qvet's tensor-core kernels: cp.async copies
 * into shared memory, ldmatrix, and the m16n8k16 mma.sync with fp32
 * accumulators. Included by kernels/wonly.cu (and read-only by other kernel
 * files). Rule: each wrapper is one PTX instruction with the exact semantics
 * named in its comment; none of them rounds anything the caller did not ask for. */
#ifndef QVET_KERNELS_MMA_CUH
#define QVET_KERNELS_MMA_CUH

#include <stdint.h>

/* 16-byte asynchronous copy global -> shared. When `valid` is false the source
 * size is 0: nothing is read and the 16 destination bytes are zero-filled, which
 * is how rows beyond M are predicated without touching memory. */
__device__ __forceinline__ void qv_cp_async16(void *smem_dst, const void *gmem_src, bool valid)
{
    unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
                 "r"(src_bytes));
}

__device__ __forceinline__ void qv_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/* Waits until at most N committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void qv_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Four 8x8 b16 matrices from shared memory: lanes 8i..8i+7 give the row
 * addresses of matrix i; register i of every lane receives matrix i's fragment
 * (row lane/4, columns 2*(lane%4)+{0,1}), which is the mma A-fragment order when
 * the matrices are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
 * (rows 8-15, k 8-15). */
__device__ __forceinline__ void qv_ldmatrix_x4(uint32_t r[4], const void *smem_row)
{
    unsigned addr = (unsigned)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* D = A (16x16, row) * B (16x8, col) + D with exact products and fp32
 * accumulation inside the tensor core. A fragment: a[0..3] as ldmatrix_x4 gives
 * it; B fragment: b[0] holds B[2*(lane%4)+{0,1}][lane/4], b[1] holds
 * B[2*(lane%4)+8+{0,1}][lane/4]; D: d[0..1] row lane/4, d[2..3] row lane/4+8,
 * columns 2*(lane%4)+{0,1}. IS_BF16 selects bf16 operands instead of fp16. */
template <bool IS_BF16>
__device__ __forceinline__ void qv_mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2]);

template <>
__device__ __forceinline__ void qv_mma_16816<false>(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ __forceinline__ void qv_mma_16816<true>(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#endif
