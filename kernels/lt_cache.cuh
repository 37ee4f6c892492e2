/* lt_cache.cuh: what the two cuBLASLt paths of the activation-quantized rows
 * share (aq_lt.cu: int8 x int8 -> int32; aq_lt_fp8.cu: e4m3 x e4m3 -> f16):
 * the TN operation, the heuristic's algorithm choice cached per shape, the
 * call itself, and the path's region of the launch workspace. Private to
 * kernels/. Both multiply, in cuBLASLt's column-major terms,
 *   D (n x m, ld n) = W^T-op (k x n, ld k) x A^T (k x m, ld k),
 * i.e. row-major D (m, n) = A (m, k) x W (n, k)^T: cuBLASLt's "A" is our
 * weights, its "B" our activations. Rule: an algorithm is the heuristic's
 * first answer under the path's own split-K reduction schemes, chosen once
 * per key; a shape the heuristic declines (or a call cuBLASLt refuses) stays
 * declined, and the caller's mma kernel runs it. Each path keeps its own
 * lt_cache (handle included) and guards it with its own mutex. */
#ifndef QVET_KERNELS_LT_CACHE_CUH
#define QVET_KERNELS_LT_CACHE_CUH

#include <stddef.h>
#include <stdint.h>

#include <cublasLt.h>

#include "qvet/gemm.h"
#include "qvet/status.h"

/* cuBLASLt's workspace: 32 MiB, what NVIDIA recommends on Hopper and what the
 * benchmark's cuBLASLt baselines are measured with. */
constexpr size_t LT_WS_BYTES = (size_t)32 << 20;
/* Cached algorithm choices per path; a bench or check touches a few dozen. */
constexpr int LT_CACHE = 64;

/* One GEMM as the heuristic sees it. */
struct lt_key {
    int op;              /* the path's operation (descriptor) index; 0 where it has one */
    int m, n, k;         /* n: this GEMM's columns (one chunk's width on the int8 path) */
    unsigned aw, aa, ad; /* alignment in bytes of W, A and D (C is D) */
};

struct lt_entry {
    lt_key key;
    bool found;                        /* false: cuBLASLt has no algorithm; the mma kernel runs */
    cublasLtMatrixLayout_t lw, la, ld; /* W (k x n, ld k), A (k x m, ld k), D (n x m, ld n) */
    cublasLtMatmulAlgo_t algo;
};

/* One path's handle, operand types and cached choices. A path defines one
 * with its first five fields; the rest start zero. */
struct lt_cache {
    const char *label;         /* prefix of every message: "cuBLASLt" or "cuBLASLt fp8" */
    cudaDataType_t tw, ta, td; /* element types of W, A and D */
    uint32_t schemes;          /* the split-K reduction schemes the heuristic may pick */
    cublasLtHandle_t handle;   /* created on first use */
    int dev1;                  /* 1 + the device current at the handle's creation (0 before): the
                                  device whose algorithms the cache holds; launches on another
                                  device are declined (the mma kernel runs them) */
    lt_entry entry[LT_CACHE];
    int count, evict;          /* entries in use; the next one to replace when full */
};

/* A failed cuBLASLt call as a QV_ERR_CUDA status naming it. */
qv_status lt_fail(const lt_cache *c, cublasStatus_t s, const char *what);

/* A new operation for c (its handle created on first use): `compute` and
 * `scale` types, W transposed, A as it is. The caller sets its own further
 * attributes and keeps the descriptor for the process. */
qv_status lt_desc_create(lt_cache *c, cublasComputeType_t compute, cudaDataType_t scale,
                         cublasLtMatmulDesc_t *out);

/* key's entry under operation desc: its layouts and the heuristic's first
 * algorithm within LT_WS_BYTES of workspace, created on first use (the
 * oldest entry is replaced when the cache is full; with QV_TRACE_LT in trace,
 * the new entry's algorithm is printed: qv_lt_trace_algo). *out->found
 * tells whether cuBLASLt takes the shape; on a device other than the
 * handle's (c->dev1) it never does. */
qv_status lt_lookup(lt_cache *c, cublasLtMatmulDesc_t desc, const lt_key &key, unsigned trace, lt_entry **out);

/* D = alpha W A + beta D (C is D) with e's algorithm on stream st; w, a and d
 * device pointers in e's layouts, ws LT_WS_BYTES of device workspace, alpha
 * and beta host scalars of desc's scale type. *ran is false when cuBLASLt
 * refused the call (its status, not a CUDA error) before writing D: e then
 * stays declined and the caller runs the mma kernel. */
qv_status lt_matmul(lt_cache *c, cublasLtMatmulDesc_t desc, lt_entry *e, const void *alpha, const void *w,
                    const void *a, const void *beta, void *d, void *ws, cudaStream_t st, bool *ran);

/* The path's region of a->workspace: `total` bytes (256 of them alignment
 * slack) from byte offset ws_offset, as a 256-aligned base; NULL when the
 * workspace is missing or smaller (sized for the mma kernel alone: the
 * variable changed after the size was asked for, or a caller's own rule), and
 * the launch is left to the mma kernel. */
uint8_t *lt_region(const qv_gemm_args *a, size_t ws_offset, size_t total);

/* x rounded up to a multiple of 256 bytes. */
static inline size_t lt_align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* The largest power of two <= 256 dividing the address: what cuBLASLt is told. */
static inline unsigned lt_align_of(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    unsigned r = 256;
    while (r > 1 && a % r) r >>= 1;
    return r;
}

#endif
