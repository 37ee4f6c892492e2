/* gpu_cublas.c: the cuBLAS and cuBLASLt entry points the GPU library calls,
 * loaded on first use (dlopen) instead of at every process start. Linked into
 * libqvet_gpu.a in place of -lcublas -lcublasLt: mapping those libraries
 * (half a gigabyte of cuBLASLt) cost every qvet process ~0.1 s, also the ones
 * that never touch a GPU (qvet verify, list, the CLI tests). Rule: the same
 * prototypes as the CUDA headers (the compiler checks them); a library that
 * cannot be loaded makes every call return CUBLAS_STATUS_NOT_INITIALIZED. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#define QV_STR_(x) #x
#define QV_STR(x) QV_STR_(x)

/* The sonames of the toolkit qvet was built with; the executable's run path
 * (the CUDA toolkit's lib64) is searched first. */
static const char *const lib_names[2] = {"libcublas.so." QV_STR(CUBLAS_VER_MAJOR),
                                         "libcublasLt.so." QV_STR(CUBLAS_VER_MAJOR)};
enum { LIB_CUBLAS = 0, LIB_CUBLASLT = 1 };
static void *lib_handle[2];
static pthread_once_t lib_once[2] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};

/* Loads library `lib`; a failure is said once, with the loader's reason,
 * because every later call only sees CUBLAS_STATUS_NOT_INITIALIZED. */
static void open_lib(int lib)
{
    lib_handle[lib] = dlopen(lib_names[lib], RTLD_NOW | RTLD_GLOBAL);
    if (!lib_handle[lib]) {
        const char *why = dlerror();
        fprintf(stderr, "qvet: cannot load %s: %s\n", lib_names[lib], why ? why : "unknown reason");
    }
}
static void open_cublas(void) { open_lib(LIB_CUBLAS); }
static void open_cublaslt(void) { open_lib(LIB_CUBLASLT); }

/* The address of `name` in library `lib`, or NULL when it cannot be loaded. */
static void *resolve(int lib, const char *name)
{
    pthread_once(&lib_once[lib], lib == LIB_CUBLAS ? open_cublas : open_cublaslt);
    return lib_handle[lib] ? dlsym(lib_handle[lib], name) : NULL;
}

/* One forwarding definition: the real function's address is looked up once
 * (a racing second lookup stores the same value). */
#define FWD(lib, name, params, args)                                                                   \
    cublasStatus_t CUBLASWINAPI name params                                                            \
    {                                                                                                  \
        static cublasStatus_t(CUBLASWINAPI * fn) params;                                               \
        if (!fn) *(void **)&fn = resolve(lib, #name);                                                  \
        return fn ? fn args : CUBLAS_STATUS_NOT_INITIALIZED;                                           \
    }

FWD(LIB_CUBLAS, cublasCreate_v2, (cublasHandle_t *handle), (handle))
FWD(LIB_CUBLAS, cublasDestroy_v2, (cublasHandle_t handle), (handle))
FWD(LIB_CUBLAS, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t streamId), (handle, streamId))
FWD(LIB_CUBLAS, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
FWD(LIB_CUBLAS, cublasSetAtomicsMode, (cublasHandle_t handle, cublasAtomicsMode_t mode), (handle, mode))
FWD(LIB_CUBLAS, cublasGemmEx,
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
     const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb,
     const void *beta, void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo),
    (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo))
FWD(LIB_CUBLAS, cublasGemmStridedBatchedEx,
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
     const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA, const void *B,
     cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
     long long int strideC, int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo),
    (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
     strideC, batchCount, computeType, algo))

FWD(LIB_CUBLAS, cublasGemmGroupedBatchedEx,
    (cublasHandle_t handle, const cublasOperation_t transa_array[], const cublasOperation_t transb_array[],
     const int m_array[], const int n_array[], const int k_array[], const void *alpha_array, const void *const Aarray[],
     cudaDataType_t Atype, const int lda_array[], const void *const Barray[], cudaDataType_t Btype,
     const int ldb_array[], const void *beta_array, void *const Carray[], cudaDataType_t Ctype, const int ldc_array[],
     int group_count, const int group_size[], cublasComputeType_t computeType),
    (handle, transa_array, transb_array, m_array, n_array, k_array, alpha_array, Aarray, Atype, lda_array, Barray,
     Btype, ldb_array, beta_array, Carray, Ctype, ldc_array, group_count, group_size, computeType))

FWD(LIB_CUBLASLT, cublasLtCreate, (cublasLtHandle_t *lightHandle), (lightHandle))
FWD(LIB_CUBLASLT, cublasLtDestroy, (cublasLtHandle_t lightHandle), (lightHandle))
FWD(LIB_CUBLASLT, cublasLtMatmul,
    (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha, const void *A,
     cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
     cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
     void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream),
    (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
     workspaceSizeInBytes, stream))
FWD(LIB_CUBLASLT, cublasLtMatmulAlgoConfigGetAttribute,
    (const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, void *buf, size_t sizeInBytes,
     size_t *sizeWritten),
    (algo, attr, buf, sizeInBytes, sizeWritten))
FWD(LIB_CUBLASLT, cublasLtMatmulAlgoGetHeuristic,
    (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
     cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
     cublasLtMatmulPreference_t preference, int requestedAlgoCount,
     cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount),
    (lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount, heuristicResultsArray,
     returnAlgoCount))
FWD(LIB_CUBLASLT, cublasLtMatmulDescCreate,
    (cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType),
    (matmulDesc, computeType, scaleType))
FWD(LIB_CUBLASLT, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc), (matmulDesc))
FWD(LIB_CUBLASLT, cublasLtMatmulDescSetAttribute,
    (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void *buf, size_t sizeInBytes),
    (matmulDesc, attr, buf, sizeInBytes))
FWD(LIB_CUBLASLT, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t *pref), (pref))
FWD(LIB_CUBLASLT, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
FWD(LIB_CUBLASLT, cublasLtMatmulPreferenceSetAttribute,
    (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
     size_t sizeInBytes),
    (pref, attr, buf, sizeInBytes))
FWD(LIB_CUBLASLT, cublasLtMatrixLayoutCreate,
    (cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
    (matLayout, type, rows, cols, ld))
FWD(LIB_CUBLASLT, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout), (matLayout))

const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status)
{
    static const char *(CUBLASWINAPI *fn)(cublasStatus_t);
    if (!fn) *(void **)&fn = resolve(LIB_CUBLASLT, "cublasLtGetStatusString");
    return fn ? fn(status) : "cuBLASLt could not be loaded (libcublasLt not found)";
}
