/* cublas_handle.cuh: the cuBLAS handle of the calling thread on the current
 * device, shared by the cuBLAS baseline rows (cublas.cu) and the weight-only
 * large-M path (wonly_dq.cu). Private to kernels/. A handle belongs to the
 * device current at its creation, and its stream is state that callers set
 * before each call, so each (thread, device) has its own: two threads never
 * set each other's stream between that call and the GEMM. Every handle keeps
 * every reduction in fp32 (no reduced-precision split-K) and uses no
 * atomics, so the rows' declared arithmetic holds and repeated launches are
 * bitwise identical. */
#ifndef QVET_KERNELS_CUBLAS_HANDLE_CUH
#define QVET_KERNELS_CUBLAS_HANDLE_CUH

#include <cublas_v2.h>

#include "qvet/status.h"

/* A short text for a cuBLAS status, for qv_fail messages. */
const char *qv_cublas_msg(cublasStatus_t s);

/* The handle, created on the thread's first use on the device (device
 * ordinals 0..63; a later one is refused); NULL with *st set (QV_ERR_CUDA or
 * QV_ERR_UNSUPPORTED) when cuBLAS cannot be initialised. Never destroyed:
 * it lives as long as the thread may launch. */
cublasHandle_t qv_cublas_handle(qv_status *st);

#endif
