/* probe_timing.cuh: what the standalone probes in tools/ share (not part of
 * `make`): a CUDA check that stops the probe, and the timing `qvet bench`
 * uses for a layer, so that a probe's microseconds compare with its table.
 *
 * median_launch_us(launch, runs): launch(j) issues one timed launch on the
 * j-th of the caller's buffers (taken modulo their count); three warm-ups
 * (j = 0, 1, 2), then `runs` launches (j = 3, 4, ...) in batches of 10
 * queued behind a 150 us spin kernel, so that the events time GPU work and
 * not the host's launch overhead; an event pair around each launch; the
 * median in microseconds. */
#ifndef QVET_TOOLS_PROBE_TIMING_CUH
#define QVET_TOOLS_PROBE_TIMING_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#define CK(x)                                                                                \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* Spins until `us` microseconds of the global timer have passed. */
__global__ void k_spin(double us)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while ((double)(t - t0) < us * 1000.0);
}

template <class F> static double median_launch_us(F launch, int runs)
{
    for (int w = 0; w < 3; w++) launch(w);
    CK(cudaGetLastError());
    std::vector<cudaEvent_t> ev(2 * runs);
    for (auto &e : ev) CK(cudaEventCreate(&e));
    for (int i0 = 0; i0 < runs; i0 += 10) {
        k_spin<<<1, 1>>>(150.0);
        for (int i = i0; i < runs && i < i0 + 10; i++) {
            CK(cudaEventRecord(ev[2 * i]));
            launch(3 + i);
            CK(cudaEventRecord(ev[2 * i + 1]));
        }
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<double> us(runs);
    for (int i = 0; i < runs; i++) {
        float ms;
        CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
        us[i] = 1000.0 * ms;
    }
    for (auto &e : ev) CK(cudaEventDestroy(e));
    std::sort(us.begin(), us.end());
    return us[runs / 2];
}

#endif
