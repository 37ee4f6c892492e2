/* cublas.cu: the cuBLAS baseline rows (family "cublas"): Y (m, n) = A (m, k) x
 * W^T with W stored (n, k) row-major (QV_LAYOUT_PLAIN_NK, like torch.nn.Linear),
 * fp16 or bf16 in and out, fp32 compute. Used as a registry variant and as the
 * bench's reference speed. Rule: cuBLAS is told to keep every reduction in fp32
 * (no reduced-precision split-K) and to use no atomics, so the declared
 * arithmetic (tensor cores into fp32, fp32 reduction) holds and repeated
 * launches are bitwise identical. The family's route table has this one
 * path (src/gpu_routes.c); the launch goes through it like every family's. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cublas_handle.cuh"
#include "func_attr.cuh"
#include "internal/route.h"
#include "qvet/gemm.h"

const char *qv_cublas_msg(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
    }
}

cublasHandle_t qv_cublas_handle(qv_status *st)
{
    static thread_local cublasHandle_t handles[kQvDevices];
    int dev = 0;
    *st = qv_current_device(&dev, "cuBLAS paths");
    if (*st != QV_OK) return NULL;
    cublasHandle_t &h = handles[dev];
    if (h) return h;
    cublasStatus_t s = cublasCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        h = NULL;
        *st = qv_fail(QV_ERR_CUDA, "cublasCreate: %s", qv_cublas_msg(s));
        return NULL;
    }
    s = cublasSetMathMode(h, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(h);
        h = NULL;
        *st = qv_fail(QV_ERR_CUDA, "cublas math/atomics mode: %s", qv_cublas_msg(s));
        return NULL;
    }
    return h;
}

extern "C" qv_status qv_launch_cublas(const qv_variant *v, const qv_gemm_args *a)
{
    if (v->layout != QV_LAYOUT_PLAIN_NK || v->wfmt != v->afmt || v->ofmt != v->afmt ||
        (v->afmt != QV_FMT_F16 && v->afmt != QV_FMT_BF16) || v->scale_layout != QV_SCALE_NONE)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the cuBLAS launcher runs f16 x f16 or bf16 x bf16 with plain "
                       "(n, k) weights only", v->name);
    QV_TRY(qv_variant_check_shape(v, a->m, a->n, a->k));
    if (!a->a || !a->b || !a->c) return qv_fail(QV_ERR_USAGE, "%s: NULL device buffer", v->name);
    qv_launch_ctx c;
    QV_TRY(qv_launch_ctx_get(a->opts, &c));
    /* The route table's one row (src/gpu_routes.c). */
    return qv_route_launch(v, a, &c);
}

extern "C" qv_status qv_cublas_path_run(const qv_route_row *r, const qv_variant *v, const qv_gemm_args *a,
                                        const qv_launch_ctx *c, int *declined)
{
    *declined = 0;
    qv_status st;
    cublasHandle_t h = qv_cublas_handle(&st);
    if (!h) return st;
    cublasStatus_t s = cublasSetStream(h, (cudaStream_t)a->stream);
    if (s != CUBLAS_STATUS_SUCCESS) return qv_fail(QV_ERR_CUDA, "cublasSetStream: %s", qv_cublas_msg(s));
    cudaDataType_t t = v->afmt == QV_FMT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f, beta = 0.0f;
    /* Column-major view: Y^T (n x m, ld n) = W (n x k: the (k, n) column-major
     * buffer transposed, ld k) x A^T (k x m, ld k). */
    s = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, a->n, a->m, a->k, &alpha, a->b, t, a->k, a->a, t, a->k,
                     &beta, a->c, t, a->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return qv_fail(QV_ERR_CUDA, "%s: cublasGemmEx (m=%d, n=%d, k=%d): %s", v->name, a->m, a->n, a->k,
                       qv_cublas_msg(s));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return qv_fail(QV_ERR_CUDA, "%s: cublasGemmEx launch: %s", v->name, cudaGetErrorString(e));
    return QV_OK;
}
