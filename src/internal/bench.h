/* bench.h: timing GPU work the way qvet's benchmark does (docs/design.md §8-§9).
 * Included by bench/ and by any kernel family that wants its own baselines
 * timed the same way. Rule: time with CUDA events around each launch, after a
 * warm-up, and report the median of many launches; callers rotate weights past
 * the L2 cache through the launch index. */
#ifndef QVET_BENCH_H
#define QVET_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/formats.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One timed launch: `iter` counts from 0 (warm-up launches included), so a
 * closure can pick weight copy iter % copies. Enqueues work on `stream`. */
typedef qv_status (*qv_bench_launch_fn)(void *ctx, int iter, void *stream);

typedef struct qv_bench_timing {
    double median_us, p10_us, p90_us;
    int runs;
} qv_bench_timing;

/* Runs `warmup` untimed launches, then `runs` launches each between two CUDA
 * events on `stream` (NULL: the default stream), and returns their median and
 * 10th/90th percentiles. A failing launch stops the timing and is returned. */
qv_status qv_bench_time(qv_bench_launch_fn fn, void *ctx, int warmup, int runs, void *stream,
                        qv_bench_timing *out);

/* Times two closures side by side: `warmup` untimed launches of each, then
 * `runs` timed launches of each in half batches (5 launches, or half the
 * queue mode's batch, each behind the queue mode's wait when it is on) in
 * the order a b b a a b b a ..., so that both see the same clocks: a GPU at
 * its power limit lowers its clocks with a lag, and whichever closure ran
 * after a hungrier one would otherwise pay for it. out_a and out_b get each
 * closure's median and percentiles. */
qv_status qv_bench_time_pair(qv_bench_launch_fn fn_a, void *ctx_a, qv_bench_launch_fn fn_b, void *ctx_b, int warmup,
                             int runs, void *stream, qv_bench_timing *out_a, qv_bench_timing *out_b);

/* Queue mode for every later qv_bench_time and qv_bench_time_pair: each batch of `batch` timed
 * launches is submitted behind a kernel that holds the stream for `wait_us`
 * (qv_bench_wait), long enough that the host has queued the whole batch
 * before the GPU reaches it; the events then time GPU work alone, with no gap
 * for a launch the host has not yet submitted (what a CUDA graph or a busy
 * inference stream sees). A wait of 0 turns it off (the default): each
 * launch is timed as the host submits it. */
qv_status qv_bench_queue(double wait_us, int batch);

/* One thread that sleeps on the stream for `us` microseconds of the GPU's
 * global timer: the stream is held, with next to no power drawn (a memset of
 * the same length would heat the GPU for the launches behind it). */
qv_status qv_bench_wait(double us, void *stream);

/* Device-to-device copy bandwidth in bytes per second, counting bytes read and
 * bytes written, as the median over `runs` copies of `bytes`. */
qv_status qv_bench_copy_bandwidth(size_t bytes, int runs, double *bytes_per_s, qv_bench_timing *t);

/* Fills `count` elements of format `fmt` at device pointer `dev` with random
 * data from `seed`: integer codes and QV_FMT_I32 words get uniform random bits;
 * e4m3 random finite codes (never NaN); e8m0 the codes of 2^floor(log2 x)
 * for x uniform in [lo, hi] (0 < lo); f16/bf16/f32 values of magnitude
 * uniform in [lo, hi], negative with probability 1/2 when `signed_values`. */
qv_status qv_bench_fill(void *dev, int64_t count, qv_fmt fmt, uint64_t seed, float lo, float hi,
                        int signed_values, void *stream);

#ifdef __cplusplus
}
#endif
#endif
