/* bench_time.c: CUDA-event timing of an arbitrary launch closure and the
 * device copy bandwidth (bench.h). Host C against the CUDA runtime API. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "qvet/bench.h"
#include "qvet/gpu.h"

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

qv_status qv_bench_time(qv_bench_launch_fn fn, void *ctx, int warmup, int runs, void *stream,
                        qv_bench_timing *out)
{
    memset(out, 0, sizeof *out);
    if (runs < 1) return qv_fail(QV_ERR_USAGE, "benchmark: runs must be >= 1");
    cudaStream_t s = (cudaStream_t)stream;
    for (int i = 0; i < warmup; i++) QV_TRY(fn(ctx, i, stream));
    cudaEvent_t *ev = malloc(sizeof(cudaEvent_t) * 2 * (size_t)runs);
    double *us = malloc(sizeof(double) * (size_t)runs);
    if (!ev || !us) {
        free(ev);
        free(us);
        return qv_fail(QV_ERR_NOMEM, "benchmark: %d timing events", runs);
    }
    int made = 0;
    qv_status st = QV_OK;
    for (; made < 2 * runs; made++) {
        cudaError_t rc = cudaEventCreate(&ev[made]);
        if (rc != cudaSuccess) {
            st = qv_cuda_fail((int)rc, "cudaEventCreate", __FILE__, __LINE__);
            break;
        }
    }
    for (int i = 0; st == QV_OK && i < runs; i++) {
        /* Queue mode: a wait in front of every batch holds the stream while
         * the host submits the batch, so that each pair of events brackets
         * GPU work only, never a wait for the host's next launch. */
        if (g_batch && i % g_batch == 0) st = qv_bench_wait(g_wait_us, stream);
        if (st != QV_OK) break;
        cudaError_t rc = cudaEventRecord(ev[2 * i], s);
        if (rc == cudaSuccess) st = fn(ctx, warmup + i, stream);
        if (st == QV_OK && rc == cudaSuccess) rc = cudaEventRecord(ev[2 * i + 1], s);
        if (rc != cudaSuccess) st = qv_cuda_fail((int)rc, "cudaEventRecord", __FILE__, __LINE__);
    }
    if (st == QV_OK) {
        cudaError_t rc = cudaStreamSynchronize(s);
        if (rc != cudaSuccess) st = qv_cuda_fail((int)rc, "benchmark launches", __FILE__, __LINE__);
    }
    for (int i = 0; st == QV_OK && i < runs; i++) {
        float ms = 0;
        cudaError_t rc = cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]);
        if (rc != cudaSuccess) st = qv_cuda_fail((int)rc, "cudaEventElapsedTime", __FILE__, __LINE__);
        us[i] = 1000.0 * ms;
    }
    if (st == QV_OK) {
        qsort(us, (size_t)runs, sizeof us[0], cmp_double);
        out->median_us = quantile(us, runs, 0.5);
        out->p10_us = quantile(us, runs, 0.1);
        out->p90_us = quantile(us, runs, 0.9);
        out->runs = runs;
    }
    for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
    free(ev);
    free(us);
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
