/* func_attr.cuh: what the host side of the launches keeps per device: a
 * kernel's function attributes (its dynamic shared-memory limit, carveout,
 * cluster sizes) set once per device, and the current device's ordinal for
 * the per-device tables of the cuBLAS handles and side streams; and the one
 * launch with programmatic dependent launch that the chained kernels share.
 * CUDA calls
 * act on the current device's context, so a library whose launches a caller
 * spreads over devices (cudaSetDevice before each) keeps such state for
 * each. CUDA C++ only (included by the .cu files that keep it). */
#ifndef QVET_KERNELS_FUNC_ATTR_CUH
#define QVET_KERNELS_FUNC_ATTR_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>

#include "internal/gpu.h"
#include "qvet/status.h"

namespace {

/* The device ordinals the per-device state covers: 0 to 63, one bit each
 * in a 64-bit word. */
constexpr int kQvDevices = 64;

/* The current device's ordinal in *dev; QV_ERR_UNSUPPORTED naming `what`
 * (the path that keeps state per device) from ordinal kQvDevices on. */
inline qv_status qv_current_device(int *dev, const char *what)
{
    QV_CUDA_TRY(cudaGetDevice(dev), "cudaGetDevice");
    if (*dev < 0 || *dev >= kQvDevices)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: device ordinal %d (0 to %d only)", what, *dev, kQvDevices - 1);
    return QV_OK;
}

/* Runs set() (which sets one kernel's attributes and returns a status) on
 * the current device unless *done says it has run there: one bit per device
 * ordinal, set after set() succeeds. Two threads launching on a fresh device
 * at once may both run it, which sets the same values twice. */
template <class F> qv_status qv_func_attr_once(std::atomic<uint64_t> &done, F set)
{
    int dev = 0;
    QV_TRY(qv_current_device(&dev, "kernel attributes"));
    const uint64_t bit = (uint64_t)1 << dev;
    if (done.load(std::memory_order_acquire) & bit) return QV_OK;
    QV_TRY(set());
    done.fetch_or(bit, std::memory_order_release);
    return QV_OK;
}

/* Launches kernel k on stream, as a programmatic dependent of the kernel in
 * front when pdl (its threads then wait, griddepcontrol.wait, before they
 * read what that kernel writes); both the launch and its error state checked,
 * failures naming `what`. */
template <class... KArgs, class... Args>
qv_status qv_launch_pdl(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                        const char *what, const Args &...args)
{
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    QV_CUDA_TRY(cudaLaunchKernelEx(&cfg, k, args...), what);
    QV_CUDA_TRY(cudaGetLastError(), what);
    return QV_OK;
}

} /* namespace */

#endif
