/* func_attr.cuh: a kernel's function attributes (its dynamic shared-memory
 * limit, carveout, cluster sizes) set once per device. cudaFuncSetAttribute
 * acts on the current device's context, so a library whose launches a caller
 * spreads over devices (cudaSetDevice before each) sets them on each. CUDA
 * C++ only (included by the .cu files that launch with such attributes). */
#ifndef QVET_KERNELS_FUNC_ATTR_CUH
#define QVET_KERNELS_FUNC_ATTR_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>

#include "internal/gpu.h"
#include "qvet/status.h"

namespace {

/* Runs set() (which sets one kernel's attributes and returns a status) on
 * the current device unless *done says it has run there: one bit per device
 * ordinal below 64, set after set() succeeds; an ordinal from 64 on runs it
 * every time. Two threads launching on a fresh device at once may both run
 * it, which sets the same values twice. */
template <class F> qv_status qv_func_attr_once(std::atomic<uint64_t> &done, F set)
{
    int dev = 0;
    QV_CUDA_TRY(cudaGetDevice(&dev), "cudaGetDevice");
    const uint64_t bit = dev >= 0 && dev < 64 ? (uint64_t)1 << dev : 0;
    if (bit && (done.load(std::memory_order_acquire) & bit)) return QV_OK;
    QV_TRY(set());
    done.fetch_or(bit, std::memory_order_release);
    return QV_OK;
}

} /* namespace */

#endif
