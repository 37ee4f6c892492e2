/* cublas_handle.cuh: the process's one cuBLAS handle, shared by the cuBLAS
 * baseline rows (cublas.cu) and the weight-only large-M path (wonly_dq.cu).
 * Private to kernels/. The handle keeps every reduction in fp32 (no
 * reduced-precision split-K) and uses no atomics, so the rows' declared
 * arithmetic holds and repeated launches are bitwise identical; callers set
 * their stream before each call. */
#ifndef QVET_KERNELS_CUBLAS_HANDLE_CUH
#define QVET_KERNELS_CUBLAS_HANDLE_CUH

#include <cublas_v2.h>

#include "qvet/status.h"

/* A short text for a cuBLAS status, for qv_fail messages. */
const char *qv_cublas_msg(cublasStatus_t s);

/* The handle, created on first use; NULL with *st set (QV_ERR_CUDA) when
 * cuBLAS cannot be initialised. */
cublasHandle_t qv_cublas_handle(qv_status *st);

#endif
