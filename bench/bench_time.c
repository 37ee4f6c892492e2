/* bench_time.c: CUDA-event timing of an arbitrary launch closure and the
 * device copy bandwidth (bench.h). Host C against the CUDA runtime API. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "internal/bench.h"
#include "internal/gpu.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of a sorted array, nearest rank. */
static double quantile(const double *s, int n, double q)
{
    int i = (int)(q * (n - 1) + 0.5);
    return s[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* The queue mode (qv_bench_queue): how long the wait in front of each batch
 * holds the stream, and the timed launches queued behind it. */
static double g_wait_us;
static int g_batch;

qv_status qv_bench_queue(double wait_us, int batch)
{
    g_wait_us = wait_us > 0 && batch > 0 ? wait_us : 0;
    g_batch = wait_us > 0 && batch > 0 ? batch : 0;
    return QV_OK;
}

/* Launches per batch when the closures of a pair alternate without the queue
 * mode's wait in front of each batch. */
enum { kPairBatch = 10 };

/* Times n closures (1 or 2): `warmup` untimed launches of each, then their
 * `runs` timed launches, each between two events; one closure in batches,
 * two in half batches in the order 0 1 1 0 0 1 1 0 ..., so that a clock
 * drift that is linear over four half batches weighs on both alike (in the
 * order 0 1 alone, closure 0 would take every batch's first place, and with
 * runs <= the batch the only one); each (half) batch behind the queue mode's
 * wait when it is on; outs[f] gets closure f's median and percentiles. */
static qv_status time_alternating(int n, const qv_bench_launch_fn *fns, void *const *ctxs, int warmup, int runs,
                                  void *stream, qv_bench_timing *outs)
{
    for (int f = 0; f < n; f++) memset(&outs[f], 0, sizeof outs[f]);
    if (runs < 1) return qv_fail(QV_ERR_USAGE, "benchmark: runs must be >= 1");
    cudaStream_t s = (cudaStream_t)stream;
    for (int i = 0; i < warmup; i++)
        for (int f = 0; f < n; f++) QV_TRY(fns[f](ctxs[f], i, stream));
    const size_t slots = (size_t)n * (size_t)runs;
    cudaEvent_t *ev = malloc(sizeof(cudaEvent_t) * 2 * slots);
    double *us = malloc(sizeof(double) * slots);
    if (!ev || !us) {
        free(ev);
        free(us);
        return qv_fail(QV_ERR_NOMEM, "benchmark: %zu timing events", 2 * slots);
    }
    size_t made = 0;
    qv_status st = QV_OK;
    for (; made < 2 * slots; made++) {
        cudaError_t rc = cudaEventCreate(&ev[made]);
        if (rc != cudaSuccess) {
            st = qv_cuda_fail((int)rc, "cudaEventCreate", __FILE__, __LINE__);
            break;
        }
    }
    /* Queue mode: a wait in front of every batch holds the stream while the
     * host submits the batch, so that each pair of events brackets GPU work
     * only, never a wait for the host's next launch. Closure f's launch i
     * uses events 2 (f runs + i) and 2 (f runs + i) + 1. */
    const int batch = g_batch ? g_batch : n > 1 ? kPairBatch : runs;
    const int step = n > 1 ? (batch + 1) / 2 : batch;
    for (int i0 = 0, h = 0; st == QV_OK && i0 < runs; i0 += step, h++)
        for (int k = 0; st == QV_OK && k < n; k++) {
            const int f = h % 2 ? n - 1 - k : k;
            if (g_batch) st = qv_bench_wait(g_wait_us, stream);
            for (int i = i0; st == QV_OK && i < runs && i < i0 + step; i++) {
                const size_t e = 2 * ((size_t)f * runs + i);
                cudaError_t rc = cudaEventRecord(ev[e], s);
                if (rc == cudaSuccess) st = fns[f](ctxs[f], warmup + i, stream);
                if (st == QV_OK && rc == cudaSuccess) rc = cudaEventRecord(ev[e + 1], s);
                if (rc != cudaSuccess) st = qv_cuda_fail((int)rc, "cudaEventRecord", __FILE__, __LINE__);
            }
        }
    if (st == QV_OK) {
        cudaError_t rc = cudaStreamSynchronize(s);
        if (rc != cudaSuccess) st = qv_cuda_fail((int)rc, "benchmark launches", __FILE__, __LINE__);
    }
    for (size_t i = 0; st == QV_OK && i < slots; i++) {
        float ms = 0;
        cudaError_t rc = cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]);
        if (rc != cudaSuccess) st = qv_cuda_fail((int)rc, "cudaEventElapsedTime", __FILE__, __LINE__);
        us[i] = 1000.0 * ms;
    }
    for (int f = 0; st == QV_OK && f < n; f++) {
        double *u = us + (size_t)f * runs;
        qsort(u, (size_t)runs, sizeof u[0], cmp_double);
        outs[f].median_us = quantile(u, runs, 0.5);
        outs[f].p10_us = quantile(u, runs, 0.1);
        outs[f].p90_us = quantile(u, runs, 0.9);
        outs[f].runs = runs;
    }
    for (size_t i = 0; i < made; i++) cudaEventDestroy(ev[i]);
    free(ev);
    free(us);
    return st;
}

qv_status qv_bench_time(qv_bench_launch_fn fn, void *ctx, int warmup, int runs, void *stream,
                        qv_bench_timing *out)
{
    return time_alternating(1, &fn, &ctx, warmup, runs, stream, out);
}

qv_status qv_bench_time_pair(qv_bench_launch_fn fn_a, void *ctx_a, qv_bench_launch_fn fn_b, void *ctx_b, int warmup,
                             int runs, void *stream, qv_bench_timing *out_a, qv_bench_timing *out_b)
{
    const qv_bench_launch_fn fns[2] = {fn_a, fn_b};
    void *const ctxs[2] = {ctx_a, ctx_b};
    qv_bench_timing outs[2];
    qv_status st = time_alternating(2, fns, ctxs, warmup, runs, stream, outs);
    *out_a = outs[0], *out_b = outs[1];
    return st;
}

typedef struct copy_ctx {
    void *dst, *src;
    size_t bytes;
} copy_ctx;

static qv_status copy_once(void *ctx, int iter, void *stream)
{
    copy_ctx *c = ctx;
    QV_CUDA_TRY(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream),
                "device-to-device copy");
    return QV_OK;
}

qv_status qv_bench_copy_bandwidth(size_t bytes, int runs, double *bytes_per_s, qv_bench_timing *t)
{
    copy_ctx c = {NULL, NULL, bytes};
    QV_CUDA_TRY(cudaMalloc(&c.src, bytes), "cudaMalloc (copy source)");
    cudaError_t rc = cudaMalloc(&c.dst, bytes);
    if (rc != cudaSuccess) {
        cudaFree(c.src);
        return qv_cuda_fail((int)rc, "cudaMalloc (copy destination)", __FILE__, __LINE__);
    }
    qv_status st = qv_bench_fill(c.src, (int64_t)(bytes / 4), QV_FMT_I32, 1, 0, 0, 0, NULL);
    if (st == QV_OK) st = qv_bench_time(copy_once, &c, 3, runs, NULL, t);
    cudaFree(c.src);
    cudaFree(c.dst);
    if (st != QV_OK) return st;
    /* Each copied byte is read once and written once. */
    *bytes_per_s = 2.0 * (double)bytes / (t->median_us * 1e-6);
    return QV_OK;
}
