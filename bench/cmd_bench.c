/* cmd_bench.c: `qvet bench`, kernel speed against cuBLAS and the weight-read
 * floor (docs/design.md §8-§9).
 *
 * For every registry row with a kernel (optionally filtered by --variant), every
 * model's four linear layers (qkv, o, gate_up, down) and every M, it times the
 * row's kernel (gemm.h: qv_gpu_launch) with CUDA events (median of --runs
 * launches after a warm-up), rotating several copies of the layer's packed
 * weights so that their total exceeds the 60 MB L2 twice over. In the same run it measures the
 * device-to-device copy bandwidth and cuBLAS fp16 (the cublas-f16 row), and
 * reports per layer and per block: median µs, the fraction of the weight-read
 * floor (packed weight, scale and zero-point bytes at the copy bandwidth), and
 * cuBLAS fp16 time / the row's time. Every registry row is also timed on the
 * whole block with its four layers launched back to back between two events
 * ("chain"), as a forward pass runs them: no event between the layers, and a
 * kernel may overlap the one before it. Any family's rows, baselines
 * included, show up here by being registry rows with a kernel. The
 * run goes one M at a time, smallest first (every row, model and layer at
 * that M), so that no small-M point is timed on clocks that a larger M's
 * power draw has lowered; at one M the models go one after the other, so
 * that a model's figures are those of a run of it alone. At each M and model
 * it times every row's GEMMs alone, then the quantizer + GEMM pairs, then
 * the chained blocks (so that a timing of one kind never follows a heavier
 * one of another kind in some rows only), each phase in --passes passes over
 * the rows (default 2), every other one in reverse order, and a point's time
 * is the mean of its pass medians, so that the rows timed last at a large M
 * are not the only ones timed on a GPU its own power draw has slowed. By
 * default every batch of 10 timed launches is queued behind a 500 us wait
 * (bench.h, qv_bench_queue: one sleeping thread, no power drawn), so that
 * the events time GPU work and never a wait for the host's next launch, and
 * each registry row's GEMM is timed side by side with cuBLAS fp16 on the
 * same layer (qv_bench_time_pair: half batches of their launches in the
 * order a b b a), its ratio against that cuBLAS time: at the power limit the
 * clocks follow the power drawn with a lag, and a row timed right after
 * cuBLAS ran slower than the same row after another on the H200
 * (docs/benchmark.md); --no-pair times rows alone.
 *
 * Activation-quantized rows (int8 or e4m3 activations) bring their own
 * baselines and costs into the same run:
 *   - cuBLASLt fp8 (e4m3 x e4m3 -> f16, per-tensor scales, default promoted
 *     accumulation) and cuBLASLt int8 (int8 x int8 -> int32), aq_bench.c;
 *     with an e4m3-activation row also cuBLASLt fp8 with per-token x
 *     per-channel scales (outer vectors) and with one scale per 128 K of every
 *     row of both operands (VEC128), and with 128x128 weight blocks and
 *     per-128-K activation scales (BLK128x128), the scalings of
 *     w8a8-fp8-tok-ch and of w8a8-fp8-block128's cuBLASLt paths, under the same split-K rule (fp32
 *     partials only), so each e4m3 row has its like;
 *   - for rows whose activations a per-token quantizer produces (symmetric int8
 *     or e4m3 per token, e4m3 per token and 128-K group), the row timed twice:
 *     the GEMM alone, and the quantizer (qv_act_quant, from fp16) followed by
 *     the GEMM, as one timed pair ("+aq");
 *   - the quantizer alone (rows "act-quant-*"), against its own memory floor
 *     (fp16 read plus code and scale write at the copy bandwidth).
 * Per-tensor and asymmetric (azp) rows have no dynamic quantizer in qvet: they
 * are timed as the GEMM alone, as with a static, calibrated activation scale.
 *
 * Packed buffers are filled with random codes on the device (bench.h): the
 * kernels' speed does not depend on the values, and correctness is the Check
 * suites' job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "aq_bench.h"
#include "moe_bench.h"
#include "internal/aq.h"
#include "internal/bench.h"
#include "internal/campaign.h"
#include "internal/cli.h"
#include "internal/gpu.h"
#include "internal/json.h"
#include "internal/launch_env.h"
#include "qvet/gemm.h"
#include "qvet/layout.h"
#include "qvet/problem.h"
#include "qvet/variant.h"

typedef struct bench_layer {
    const char *name;
    int n, k; /* output features, input features */
} bench_layer;

typedef struct bench_model {
    const char *name;
    bench_layer layers[4];
} bench_model;

/* docs/design.md §8: the four linear layers of one transformer block. */
static const bench_model models[] = {
    {"llama2-7b", {{"qkv", 12288, 4096}, {"o", 4096, 4096}, {"gate_up", 22016, 4096}, {"down", 4096, 11008}}},
    {"llama3-70b", {{"qkv", 10240, 8192}, {"o", 8192, 8192}, {"gate_up", 57344, 8192}, {"down", 8192, 28672}}},
};
#define N_MODELS 2
#define N_LAYERS 4
#define MAX_M 16
#define MAX_ROWS 128
#define MAX_GLOBS 16
#define L2_TWICE ((size_t)120 << 20) /* twice the H200's 60 MB L2: weights rotate past it */
#define BENCH_WAIT_US 500.0 /* queue mode: the stream held this long in front of each batch */
#define BENCH_BATCH 10       /* timed launches queued behind one wait */

static const int default_m[] = {1, 4, 16, 32, 64, 128, 256, 512, 1024};

/* Bytes of weights a launch must read, by buffer. */
typedef struct weight_bytes {
    size_t b, scales, scales2, zeros;
} weight_bytes;

static weight_bytes weight_sizes(const qv_variant *v, int n, int k)
{
    qv_problem shape;
    memset(&shape, 0, sizeof shape);
    shape.v = v, shape.m = 1, shape.n = n, shape.k = k, shape.g = v->g;
    weight_bytes w;
    /* Every packed layout is dense: k*n codes of the weight format's width. */
    w.b = (size_t)k * (size_t)n * (size_t)qv_fmt_get(v->wfmt)->bits / 8;
    size_t selem = v->scale_layout == QV_SCALE_BLOCK ? sizeof(float) : qv_fmt_storage_bytes(v->sfmt);
    w.scales = (size_t)(qv_problem_scale_rows(&shape) * qv_problem_scale_cols(&shape)) * selem;
    w.scales2 = v->scale_layout == QV_SCALE_GROUP_CHANNEL ? (size_t)n * sizeof(float)
                : v->scale_layout == QV_SCALE_BLOCK   ? (size_t)qv_block_scales2_cols(n, k) * sizeof(float)
                : v->s2_layout == QV_SCALE_TENSOR     ? sizeof(float) /* NVFP4's global scale */
                                                      : 0;
    w.zeros = v->zero_point && v->g > 0 ? (size_t)(k / v->g) * (size_t)n / 2 : 0;
    return w;
}

static size_t weight_total(weight_bytes w) { return w.b + w.scales + w.scales2 + w.zeros; }

/* The per-token quantizers that can stand in front of an activation-quantized
 * row (qv_act_quant from fp16). */
typedef enum aq_kind { AQK_NONE = -1, AQK_I8 = 0, AQK_E4M3, AQK_E4M3_G128, N_AQK } aq_kind;
static const char *const aqk_names[N_AQK] = {"act-quant-i8", "act-quant-e4m3", "act-quant-e4m3-g128"};

static aq_kind row_aq_kind(const qv_variant *v)
{
    if (v->azp != QV_AZP_NONE) return AQK_NONE; /* asymmetric: no quantizer in qvet */
    if (v->afmt == QV_FMT_I8 && v->act_scale == QV_ASCALE_TOKEN) return AQK_I8;
    if (v->afmt == QV_FMT_E4M3 && v->act_scale == QV_ASCALE_TOKEN) return AQK_E4M3;
    if (v->afmt == QV_FMT_E4M3 && v->act_scale == QV_ASCALE_TOKEN_BLOCK) return AQK_E4M3_G128;
    return AQK_NONE;
}

static qv_fmt aqk_fmt(aq_kind q) { return q == AQK_I8 ? QV_FMT_I8 : QV_FMT_E4M3; }

/* The quantizer's launch for an (m, k) activation: per token, m rows of k; per
 * token and 128-K group, m*k/128 rows of 128 (what qv_act_quant_groups runs
 * for the +aq pair, its scales MN-major; the quantizer-alone row times the
 * same rows through qv_act_quant, the same kernel and bytes). 0 when the kind
 * does not apply (k not a multiple of 128 for the grouped kind). */
static int aqk_shape(aq_kind q, int m, int k, int *rows, int *cols)
{
    if (q == AQK_E4M3_G128) {
        if (k % 128) return 0; /* the group width of QV_ASCALE_TOKEN_BLOCK */
        *rows = (int)((int64_t)m * k / 128), *cols = 128;
        return 1;
    }
    *rows = m, *cols = k;
    return 1;
}

/* One copy of a layer's packed weights on the device. */
typedef struct weight_set {
    void *b, *scales, *scales2, *zeros;
} weight_set;

/* What the timed closure launches. */
typedef struct launch_ctx {
    const qv_variant *v;
    qv_gemm_args args;
    weight_set *sets;
    int n_sets;
    aq_kind aqk;       /* the quantizer in front, for launch_with_aq */
    const void *x16;   /* (m, k) fp16 activations it reads */
    int aq_rows, aq_cols;
} launch_ctx;

static qv_status launch_rotating(void *ctx, int iter, void *stream)
{
    launch_ctx *c = ctx;
    qv_gemm_args a = c->args;
    const weight_set *w = &c->sets[iter % c->n_sets];
    a.b = w->b, a.scales = w->scales, a.scales2 = w->scales2, a.zeros = w->zeros;
    a.stream = stream;
    return qv_gpu_launch(c->v, &a);
}

/* The quantizer writes the GEMM's activation codes and scales, then the GEMM. */
static qv_status launch_with_aq(void *ctx, int iter, void *stream)
{
    launch_ctx *c = ctx;
    if (c->aqk == AQK_E4M3_G128)
        /* The (k/128, m) MN-major scales the row reads. */
        QV_TRY(qv_act_quant_groups(QV_FMT_F16, QV_FMT_E4M3, c->args.m, c->args.k, c->x16, (void *)c->args.a,
                                   (float *)c->args.a_scale, stream, c->args.opts));
    else
        QV_TRY(qv_act_quant(QV_FMT_F16, aqk_fmt(c->aqk), c->aq_rows, c->aq_cols, c->x16, (void *)c->args.a,
                            (float *)c->args.a_scale, stream, c->args.opts));
    return launch_rotating(ctx, iter, stream);
}

/* Device allocations of one (variant, layer), freed together. */
typedef struct dev_pool {
    void *p[2048];
    int n;
} dev_pool;

static qv_status pool_alloc(dev_pool *pool, size_t bytes, void **out)
{
    *out = NULL;
    if (!bytes) return QV_OK;
    QV_ASSERT(pool->n < (int)(sizeof pool->p / sizeof pool->p[0]), "benchmark allocation pool is full");
    QV_CUDA_TRY(cudaMalloc(out, bytes), "cudaMalloc (benchmark buffer)");
    pool->p[pool->n++] = *out;
    return QV_OK;
}

static void pool_free(dev_pool *pool)
{
    for (int i = 0; i < pool->n; i++) cudaFree(pool->p[i]);
    pool->n = 0;
}

/* Scale values: positive, around 2^-7, so random dot products stay finite
 * (e8m0 scales: 2^-8 to 2^-6, codes 119 to 121, mostly 119 and 120). */
#define SCALE_LO 0.004f
#define SCALE_HI 0.016f

static qv_status fill_scales(const qv_variant *v, void *dev, size_t bytes, uint64_t seed)
{
    if (!bytes) return QV_OK;
    qv_fmt f = v->scale_layout == QV_SCALE_BLOCK ? QV_FMT_F32 : v->sfmt;
    int64_t count = (int64_t)(bytes / qv_fmt_storage_bytes(f));
    return qv_bench_fill(dev, count, f, seed, SCALE_LO, SCALE_HI, 0, NULL);
}

/* Packed weights: random codes of the weight format (random bits are valid
 * codes for every integer layout; e4m3 avoids the NaN codes). */
static qv_status fill_weights(const qv_variant *v, void *dev, size_t bytes, uint64_t seed)
{
    switch (v->wfmt) {
    case QV_FMT_E4M3: return qv_bench_fill(dev, (int64_t)bytes, QV_FMT_E4M3, seed, 0, 0, 0, NULL);
    case QV_FMT_F16:
    case QV_FMT_BF16: return qv_bench_fill(dev, (int64_t)(bytes / 2), v->wfmt, seed, 0.0f, 0.05f, 1, NULL);
    default: return qv_bench_fill(dev, (int64_t)(bytes / 4), QV_FMT_I32, seed, 0, 0, 0, NULL);
    }
}

static qv_status fill_acts(const qv_variant *v, void *dev, int64_t count, uint64_t seed)
{
    if (v->afmt == QV_FMT_F16 || v->afmt == QV_FMT_BF16)
        return qv_bench_fill(dev, count, v->afmt, seed, 0.0f, 1.0f, 1, NULL);
    return qv_bench_fill(dev, count, v->afmt, seed, 0, 0, 0, NULL);
}

typedef struct bench_opts {
    const char *globs[MAX_GLOBS]; /* --variant, split at commas; none: every row */
    int n_globs;
    const char *variant_arg;      /* --variant as given */
    char glob_buf[512];
    int model_mask;
    int ms[MAX_M];
    int n_m;
    int m_set; /* --m given (routed rows: token counts, else their own default) */
    int runs, warmup;
    int passes; /* passes over the rows at each M, every other one in reverse order */
    int no_queue; /* time launches as the host submits them (no blocker in front of each batch) */
    int no_pair;  /* time a registry row's GEMMs alone, not side by side with cuBLAS fp16 */
    const char *out;
    int dry_run; /* list what would be timed, no CUDA call */
    qv_launch_opts launch; /* every launch's options (the QVET_* variables) */
} bench_opts;

static int opts_match(const bench_opts *o, const qv_variant *v)
{
    if (!o->n_globs) return 1;
    for (int i = 0; i < o->n_globs; i++)
        if (qv_variant_match(v, o->globs[i])) return 1;
    return 0;
}

/* What one line of the table times. */
typedef enum row_kind {
    ROW_VARIANT,
    ROW_LT_FP8,        /* cuBLASLt fp8, per-tensor scales */
    ROW_LT_FP8_OUTER,  /* cuBLASLt fp8, per-token x per-channel scales */
    ROW_LT_FP8_VEC128, /* cuBLASLt fp8, one scale per 128 K of every row */
    ROW_LT_FP8_BLK,    /* cuBLASLt fp8, weights per 128 x 128 block, activations per 128 K */
    ROW_LT_I8,
    ROW_ACTQ
} row_kind;

typedef struct bench_row {
    const char *name;
    row_kind kind;
    const qv_variant *v; /* ROW_VARIANT */
    aq_kind aqk;         /* ROW_VARIANT: its quantizer (or AQK_NONE); ROW_ACTQ: which one */
} bench_row;

/* Per (row, model, layer, M): the median µs (NAN: not run), the floor bytes,
 * and for rows with a quantizer the median of quantizer + GEMM. */
static double t_us[MAX_ROWS][N_MODELS][N_LAYERS][MAX_M];
static double t_aq_us[MAX_ROWS][N_MODELS][N_LAYERS][MAX_M];
/* Per (row, model, layer, M): cuBLAS fp16's median timed side by side with
 * the row (bench_layer_run's pairing; NAN: not paired), the reference of the
 * row's ratio. */
static double t_ref_us[MAX_ROWS][N_MODELS][N_LAYERS][MAX_M];
static double floor_b[MAX_ROWS][N_MODELS][N_LAYERS][MAX_M];
/* Per (registry row, model, M): the median µs of the block's four layers
 * launched as one sequence (bench_chain_run); NAN for other rows. */
static double t_chain_us[MAX_ROWS][N_MODELS][MAX_M];

/* One point's timings, pass by pass (--passes), at the M being timed. */
#define MAX_PASSES 8
typedef struct pass_acc {
    double us[MAX_PASSES], aq[MAX_PASSES]; /* median of the GEMM alone; of the +aq pair (NAN: none) */
    double ref[MAX_PASSES];                /* the paired reference's median (NAN: not paired) */
    qv_bench_timing t[MAX_PASSES];
} pass_acc;
static pass_acc p_layer[MAX_ROWS][N_MODELS][N_LAYERS];
static pass_acc p_chain[MAX_ROWS][N_MODELS];

static void pass_add(pass_acc *a, double us, double aq, double ref, const qv_bench_timing *t, int pass)
{
    a->us[pass] = us, a->aq[pass] = aq, a->ref[pass] = ref, a->t[pass] = *t;
}

/* The point over `passes` passes: the mean of the pass medians (NAN when any
 * pass has none), of the paired reference's medians, the lowest 10th and
 * highest 90th percentile, all runs. */
static void pass_result(const pass_acc *a, int passes, double *us, double *aq, double *ref, qv_bench_timing *t)
{
    double su = 0, sa = 0, sr = 0;
    memset(t, 0, sizeof *t);
    for (int i = 0; i < passes; i++) {
        su += a->us[i], sa += a->aq[i], sr += a->ref[i];
        t->p10_us = i == 0 || a->t[i].p10_us < t->p10_us ? a->t[i].p10_us : t->p10_us;
        t->p90_us = i == 0 || a->t[i].p90_us > t->p90_us ? a->t[i].p90_us : t->p90_us;
        t->runs += a->t[i].runs;
    }
    *us = su / passes, *aq = sa / passes, *ref = sr / passes; /* NAN stays NAN */
    t->median_us = *us;
}

/* One line of QVET_BENCH_TRACE: when the timing ended (seconds since t0),
 * the point, the pass, the phase (0 the GEMM alone, 1 with its quantizer, 2
 * the chained block) and the median in µs, with the 10th and 90th percentile
 * where the timing `t` has them (the quantizer pairs of phase 1 report their
 * median only). */
static void trace_point(struct timespec t0, const char *row, const char *model, const char *layer, int m, int pass,
                        int phase, double us, const qv_bench_timing *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double s = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
    fprintf(stderr, "trace %.3f %s %s %s m=%d pass=%d phase=%d median=%.3f", s, row, model, layer, m, pass, phase, us);
    if (t->runs > 0) fprintf(stderr, " p10=%.3f p90=%.3f", t->p10_us, t->p90_us);
    fputc('\n', stderr);
}

/* The bytes whose transfer at the copy bandwidth bounds a row's time: packed
 * weights, scales and zero points for a GEMM (activations are not counted);
 * for the quantizer, its fp16 read, code write and scale write. */
static double row_floor_bytes(const bench_row *r, int m, int n, int k)
{
    switch (r->kind) {
    case ROW_VARIANT: return (double)weight_total(weight_sizes(r->v, n, k));
    case ROW_LT_FP8:
    case ROW_LT_I8: return (double)n * (double)k;
    /* the weight-scale floats as well: (n) or (ceil(k/128), n) */
    case ROW_LT_FP8_OUTER: return (double)n * (double)k + 4.0 * n;
    case ROW_LT_FP8_VEC128: return (double)n * (double)k + 4.0 * n * (double)((k + 127) / 128);
    case ROW_LT_FP8_BLK: return (double)n * (double)k + 4.0 * (double)((n + 127) / 128) * (double)((k + 127) / 128);
    case ROW_ACTQ: {
        int rows, cols;
        if (!aqk_shape(r->aqk, m, k, &rows, &cols)) return NAN;
        return 3.0 * (double)rows * cols + 4.0 * rows;
    }
    }
    return NAN;
}

static void put_num(FILE *f, const char *key, double x, const char *fmt)
{
    fprintf(f, ",\"%s\":", key);
    if (isfinite(x))
        fprintf(f, fmt, x);
    else
        fprintf(f, "null");
}

/* The cuBLAS fp16 time a row's GEMM on a layer is set against: the
 * reference timed side by side with it (bench_layer_run's pairing) where
 * there is one, else the reference row's own time. */
static double ref_time(int ri, int md, int li, int mi)
{
    const double paired = t_ref_us[ri][md][li][mi];
    return isfinite(paired) ? paired : t_us[0][md][li][mi];
}

/* One "kind":"bench" line. t: the layer's timing, or NULL for a block sum.
 * ref_us: the cuBLAS fp16 time of vs_cublas, `paired` when it was timed side
 * by side with this row. */
static void emit(FILE *jf, const bench_row *r, const char *model, const char *layer, int m, int n, int k,
                 double us, const qv_bench_timing *t, int runs, double floor_bytes, double bw, double ref_us,
                 int paired, double aq_us)
{
    if (!jf || !isfinite(us)) return;
    fprintf(jf, "{\"kind\":\"bench\",\"variant\":");
    qv_json_fput_str(jf, r->name);
    fprintf(jf, ",\"model\":\"%s\",\"layer\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d", model, layer, m, n, k);
    put_num(jf, "median_us", us, "%.3f");
    put_num(jf, "p10_us", t ? t->p10_us : NAN, "%.3f");
    put_num(jf, "p90_us", t ? t->p90_us : NAN, "%.3f");
    fprintf(jf, ",\"runs\":%d", runs);
    const double floor_us = floor_bytes / bw * 1e6;
    put_num(jf, "floor_bytes", floor_bytes, "%.0f");
    put_num(jf, "floor_us", floor_us, "%.3f");
    put_num(jf, "floor_fraction", floor_us / us, "%.4f");
    put_num(jf, "vs_cublas", r->kind == ROW_ACTQ ? NAN : ref_us / us, "%.4f");
    if (paired) put_num(jf, "cublas_paired_us", ref_us, "%.3f");
    if (r->kind == ROW_VARIANT && r->aqk != AQK_NONE) {
        fprintf(jf, ",\"act_quant\":\"%s\"", aqk_names[r->aqk]);
        put_num(jf, "with_act_quant_us", aq_us, "%.3f");
        put_num(jf, "act_quant_share", (aq_us - us) / aq_us, "%.4f");
        put_num(jf, "with_act_quant_floor_fraction", floor_us / aq_us, "%.4f");
        put_num(jf, "with_act_quant_vs_cublas", ref_us / aq_us, "%.4f");
    }
    if (r->kind == ROW_ACTQ) put_num(jf, "queued_us", aq_us, "%.3f");
    fprintf(jf, "}\n");
}

/* The device buffers of one (row, layer): n_sets copies of the packed
 * weights (seeds from seed0), activations, output, per-token data and
 * workspace sized for the largest M of the run, all from pool; c gets the
 * buffers (c->args without m). */
static qv_status layer_alloc(const bench_row *r, const bench_layer *L, const bench_opts *o, int n_sets,
                             uint64_t seed0, dev_pool *pool, weight_set *sets, launch_ctx *c)
{
    const qv_variant *v = r->v;
    const weight_bytes wb = weight_sizes(v, L->n, L->k);
    int m_max = 1;
    for (int mi = 0; mi < o->n_m; mi++) m_max = o->ms[mi] > m_max ? o->ms[mi] : m_max;
    for (int s = 0; s < n_sets; s++) {
        weight_set *w = &sets[s];
        const uint64_t seed = seed0 + (uint64_t)s * 16;
        QV_TRY(pool_alloc(pool, wb.b, &w->b));
        QV_TRY(pool_alloc(pool, wb.scales, &w->scales));
        QV_TRY(pool_alloc(pool, wb.scales2, &w->scales2));
        QV_TRY(pool_alloc(pool, wb.zeros, &w->zeros));
        QV_TRY(fill_weights(v, w->b, wb.b, seed));
        QV_TRY(fill_scales(v, w->scales, wb.scales, seed + 1));
        if (wb.scales2)
            QV_TRY(qv_bench_fill(w->scales2, (int64_t)(wb.scales2 / 4), QV_FMT_F32, seed + 2, SCALE_LO, SCALE_HI, 0,
                                 NULL));
        if (wb.zeros) QV_TRY(qv_bench_fill(w->zeros, (int64_t)(wb.zeros / 4), QV_FMT_I32, seed + 3, 0, 0, 0, NULL));
    }
    memset(c, 0, sizeof *c);
    c->v = v, c->sets = sets, c->n_sets = n_sets, c->aqk = r->aqk;
    void *a = NULL, *out = NULL, *ascale = NULL, *azp = NULL, *perm = NULL, *ws = NULL, *x16 = NULL;
    size_t ws_bytes = 0;
    for (int mi = 0; mi < o->n_m; mi++) {
        size_t w = qv_gpu_workspace(v, o->ms[mi], L->n, L->k, &o->launch);
        ws_bytes = w > ws_bytes ? w : ws_bytes;
    }
    QV_TRY(pool_alloc(pool, (size_t)m_max * L->k * qv_fmt_storage_bytes(v->afmt), &a));
    QV_TRY(pool_alloc(pool, (size_t)m_max * L->n * qv_fmt_storage_bytes(v->ofmt), &out));
    QV_TRY(fill_acts(v, a, (int64_t)m_max * L->k, 77));
    if (v->act_scale != QV_ASCALE_NONE) {
        size_t cnt = (size_t)m_max * (size_t)((L->k + 127) / 128); /* covers every act_scale layout */
        QV_TRY(pool_alloc(pool, cnt * sizeof(float), &ascale));
        QV_TRY(qv_bench_fill(ascale, (int64_t)cnt, QV_FMT_F32, 78, 0.01f, 0.02f, 0, NULL));
    }
    if (r->aqk != AQK_NONE) {
        /* fp16 activations of a hidden state, magnitudes up to 4, for the quantizer. */
        QV_TRY(pool_alloc(pool, (size_t)m_max * L->k * 2, &x16));
        QV_TRY(qv_bench_fill(x16, (int64_t)m_max * L->k, QV_FMT_F16, 79, 0.01f, 4.0f, 1, NULL));
    }
    if (v->azp != QV_AZP_NONE) {
        QV_TRY(pool_alloc(pool, (size_t)m_max * sizeof(int32_t), &azp));
        QV_CUDA_TRY(cudaMemset(azp, 0, (size_t)m_max * sizeof(int32_t)), "cudaMemset (azp)");
    }
    if (v->act_order) {
        /* A random permutation is no slower to gather than the reversal; the
         * reversal keeps the host side trivial. */
        int32_t *h = malloc(sizeof(int32_t) * (size_t)L->k);
        if (!h) return qv_fail(QV_ERR_NOMEM, "permutation of %d rows", L->k);
        for (int i = 0; i < L->k; i++) h[i] = L->k - 1 - i;
        qv_status st = pool_alloc(pool, sizeof(int32_t) * (size_t)L->k, &perm);
        if (st == QV_OK && cudaMemcpy(perm, h, sizeof(int32_t) * (size_t)L->k, cudaMemcpyHostToDevice) != cudaSuccess)
            st = qv_cuda_fail((int)cudaGetLastError(), "cudaMemcpy (perm)", __FILE__, __LINE__);
        free(h);
        QV_TRY(st);
    }
    if (ws_bytes) {
        QV_TRY(pool_alloc(pool, ws_bytes, &ws));
        QV_CUDA_TRY(cudaMemset(ws, 0, ws_bytes), "cudaMemset (workspace)");
    }
    void *bias = NULL;
    if (v->bias_fmt != QV_FMT_NONE) {
        /* The FP4 rows' packed bias: n codes of its format, in [-1, 1]. */
        QV_TRY(pool_alloc(pool, (size_t)L->n * qv_fmt_storage_bytes(v->bias_fmt), &bias));
        QV_TRY(qv_bench_fill(bias, L->n, v->bias_fmt, 80, 0.0f, 1.0f, 1, NULL));
    }
    c->x16 = x16;
    c->args.bias_packed = bias;
    c->args.n = L->n, c->args.k = L->k, c->args.g = v->g;
    c->args.a = a, c->args.a_scale = ascale, c->args.azp = azp, c->args.perm = perm, c->args.c = out;
    c->args.workspace = ws, c->args.workspace_bytes = ws_bytes;
    c->args.opts = &o->launch;
    QV_CUDA_TRY(cudaDeviceSynchronize(), "benchmark buffer fills");
    return QV_OK;
}

/* Weight copies of `bytes` each that, rotated, exceed the L2 twice over. */
static int rotation_sets(size_t bytes)
{
    size_t n = (L2_TWICE + bytes - 1) / (bytes ? bytes : 1);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n; /* weight_set sets[64] */
}

/* Times one registry row on one layer at every M: t_out[mi] the GEMM alone
 * (when `alone`), aq_out[mi] the quantizer + GEMM pair when the row has a
 * quantizer (when `pair`); NAN when a shape is refused or a launch fails (the
 * message goes to stderr) or the timing was not asked for. With a reference
 * row `ref` (cuBLAS fp16, the pairing of bench_opts), the GEMM alone is timed
 * side by side with the reference's GEMM on the same layer
 * (qv_bench_time_pair: their launches alternate in half batches), and
 * ref_out[mi] gets the reference's median from that timing. */
static qv_status bench_layer_run(const bench_row *r, const bench_row *ref, const bench_layer *L, const bench_opts *o,
                                 double *t_out, double *ref_out, double *aq_out, qv_bench_timing *timings, int alone,
                                 int pair)
{
    const qv_variant *v = r->v;
    for (int mi = 0; mi < o->n_m; mi++) t_out[mi] = ref_out[mi] = aq_out[mi] = NAN;
    if (qv_variant_check_shape(v, 1, L->n, L->k) != QV_OK) {
        fprintf(stderr, "qvet bench: %s skips %s: %s\n", v->name, L->name, qv_errmsg());
        return QV_OK;
    }
    dev_pool pool = {.n = 0};
    weight_set sets[64];
    launch_ctx c;
    qv_status st = layer_alloc(r, L, o, rotation_sets(weight_total(weight_sizes(v, L->n, L->k))), 1000, &pool, sets,
                               &c);
    /* The reference's buffers as its own row has them (the same seed). */
    static weight_set ref_sets[64];
    launch_ctx ref_c;
    if (!alone || (ref && qv_variant_check_shape(ref->v, 1, L->n, L->k) != QV_OK)) ref = NULL;
    if (ref && st == QV_OK)
        st = layer_alloc(ref, L, o, rotation_sets(weight_total(weight_sizes(ref->v, L->n, L->k))), 1000, &pool,
                         ref_sets, &ref_c);
    for (int mi = 0; mi < o->n_m && st == QV_OK; mi++) {
        const int m = o->ms[mi];
        if (qv_variant_check_shape(v, m, L->n, L->k) != QV_OK) continue;
        c.args.m = m;
        qv_bench_timing t, tr;
        qv_status ps = QV_OK;
        if (alone) {
            const int paired = ref && qv_variant_check_shape(ref->v, m, L->n, L->k) == QV_OK;
            ref_c.args.m = m;
            ps = paired ? qv_bench_time_pair(launch_rotating, &c, launch_rotating, &ref_c, o->warmup, o->runs, NULL, &t,
                                             &tr)
                        : qv_bench_time(launch_rotating, &c, o->warmup, o->runs, NULL, &t);
            if (ps != QV_OK) {
                fprintf(stderr, "qvet bench: %s %s m=%d: %s\n", v->name, L->name, m, qv_errmsg());
                continue; /* a refused or failing row does not stop the others */
            }
            t_out[mi] = t.median_us;
            timings[mi] = t;
            if (paired) ref_out[mi] = tr.median_us;
        }
        if (pair && r->aqk != AQK_NONE && aqk_shape(r->aqk, m, L->k, &c.aq_rows, &c.aq_cols)) {
            qv_bench_timing ta;
            ps = qv_bench_time(launch_with_aq, &c, o->warmup, o->runs, NULL, &ta);
            if (ps == QV_OK)
                aq_out[mi] = ta.median_us;
            else
                fprintf(stderr, "qvet bench: %s +aq %s m=%d: %s\n", v->name, L->name, m, qv_errmsg());
        }
    }
    pool_free(&pool);
    return st;
}

/* The four layers of a block, launched back to back as one timed sequence. */
typedef struct chain_ctx {
    launch_ctx layer[N_LAYERS];
} chain_ctx;

static qv_status launch_chain(void *ctx, int iter, void *stream)
{
    chain_ctx *ch = ctx;
    for (int li = 0; li < N_LAYERS; li++) QV_TRY(launch_rotating(&ch->layer[li], iter, stream));
    return QV_OK;
}

/* Times one registry row on a whole block at every M: the four layers
 * launched back to back between two events, as a model's forward pass runs
 * them, so that a kernel may overlap the one before it (programmatic
 * dependent launch) and no event sits between them. Weight copies rotate as a
 * block. t_out[mi] NAN when a layer refuses the shape or a launch fails. */
static qv_status bench_chain_run(const bench_row *r, const bench_model *md, const bench_opts *o, double *t_out,
                                 qv_bench_timing *timings)
{
    const qv_variant *v = r->v;
    for (int mi = 0; mi < o->n_m; mi++) t_out[mi] = NAN;
    size_t block_bytes = 0;
    for (int li = 0; li < N_LAYERS; li++) {
        if (qv_variant_check_shape(v, 1, md->layers[li].n, md->layers[li].k) != QV_OK) return QV_OK;
        block_bytes += weight_total(weight_sizes(v, md->layers[li].n, md->layers[li].k));
    }
    const int n_sets = rotation_sets(block_bytes);
    dev_pool pool = {.n = 0};
    static weight_set sets[N_LAYERS][64];
    static chain_ctx ch;
    qv_status st = QV_OK;
    for (int li = 0; li < N_LAYERS && st == QV_OK; li++)
        st = layer_alloc(r, &md->layers[li], o, n_sets, 2000 + 100 * (uint64_t)li, &pool, sets[li], &ch.layer[li]);
    for (int mi = 0; mi < o->n_m && st == QV_OK; mi++) {
        const int m = o->ms[mi];
        int ok = 1;
        for (int li = 0; li < N_LAYERS; li++) {
            ok &= qv_variant_check_shape(v, m, md->layers[li].n, md->layers[li].k) == QV_OK;
            ch.layer[li].args.m = m;
        }
        if (!ok) continue;
        qv_status ps = qv_bench_time(launch_chain, &ch, o->warmup, o->runs, NULL, &timings[mi]);
        if (ps != QV_OK) {
            fprintf(stderr, "qvet bench: %s %s chained m=%d: %s\n", v->name, md->name, m, qv_errmsg());
            continue;
        }
        t_out[mi] = timings[mi].median_us;
    }
    pool_free(&pool);
    return st;
}

/* Times one baseline or quantizer row on one layer at every M; for a
 * quantizer, queued_out[mi] gets its GPU time per launch when queued. */
static qv_status bench_other_run(const bench_row *r, const bench_layer *L, const bench_opts *o, double *t_out,
                                 double *queued_out, qv_bench_timing *timings)
{
    for (int mi = 0; mi < o->n_m; mi++) t_out[mi] = NAN;
    if (r->kind == ROW_LT_FP8 || r->kind == ROW_LT_I8) {
        int ok[MAX_M];
        QV_TRY(qv_bench_lt_layer(r->kind == ROW_LT_FP8, L->n, L->k, o->ms, o->n_m, o->warmup, o->runs, &o->launch,
                                 timings, ok));
        for (int mi = 0; mi < o->n_m; mi++)
            if (ok[mi]) t_out[mi] = timings[mi].median_us;
        return QV_OK;
    }
    if (r->kind == ROW_LT_FP8_OUTER || r->kind == ROW_LT_FP8_VEC128 || r->kind == ROW_LT_FP8_BLK) {
        int ok[MAX_M];
        const qv_bench_lt_scale sc = r->kind == ROW_LT_FP8_OUTER    ? QV_BENCH_LT_OUTER
                                     : r->kind == ROW_LT_FP8_VEC128 ? QV_BENCH_LT_VEC128
                                                                    : QV_BENCH_LT_BLK;
        QV_TRY(qv_bench_lt_fp8_layer(sc, L->n, L->k, o->ms, o->n_m, o->warmup, o->runs, &o->launch, timings, ok));
        for (int mi = 0; mi < o->n_m; mi++)
            if (ok[mi]) t_out[mi] = timings[mi].median_us;
        return QV_OK;
    }
    int rows[MAX_M], cols = 0;
    for (int mi = 0; mi < o->n_m; mi++)
        if (!aqk_shape(r->aqk, o->ms[mi], L->k, &rows[mi], &cols)) return QV_OK;
    double queued[MAX_M];
    if (qv_bench_act_quant(aqk_fmt(r->aqk), rows, o->n_m, cols, o->warmup, o->runs, &o->launch, timings, queued) !=
        QV_OK) {
        /* like a failing row: reported, and the others still run */
        fprintf(stderr, "qvet bench: %s %s: %s\n", r->name, L->name, qv_errmsg());
        return QV_OK;
    }
    for (int mi = 0; mi < o->n_m; mi++) t_out[mi] = timings[mi].median_us, queued_out[mi] = queued[mi];
    return QV_OK;
}

/* A comma-separated option value: refused when it is empty, longer than
 * len - 1 characters or has an empty item (",4", "1,,4", "4,"), which a
 * tokenizer would skip silently. */
static int list_ok(const char *opt, const char *s, size_t len)
{
    const size_t n = strlen(s);
    if (n >= len) {
        fprintf(stderr, "qvet bench: %s is longer than %zu characters\n", opt, len - 1);
        return 0;
    }
    if (!n || s[0] == ',' || s[n - 1] == ',' || strstr(s, ",,")) {
        fprintf(stderr, "qvet bench: %s '%s' has an empty item (items are joined by single commas)\n", opt, s);
        return 0;
    }
    return 1;
}

static int parse_m_list(const char *s, bench_opts *o)
{
    o->n_m = 0;
    char buf[256];
    if (!list_ok("--m", s, sizeof buf)) return -1;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        long long v;
        if (o->n_m >= MAX_M) {
            fprintf(stderr, "qvet bench: --m takes at most %d values\n", MAX_M);
            return -1;
        }
        if (qv_opt_long("--m", tok, 1, 1 << 20, &v)) return -1;
        o->ms[o->n_m++] = (int)v;
    }
    return 0; /* list_ok: at least one item */
}

static int parse_globs(const char *s, bench_opts *o)
{
    if (!list_ok("--variant", s, sizeof o->glob_buf)) return -1;
    snprintf(o->glob_buf, sizeof o->glob_buf, "%s", s);
    o->n_globs = 0;
    for (char *tok = strtok(o->glob_buf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->n_globs >= MAX_GLOBS) {
            fprintf(stderr, "qvet bench: --variant takes at most %d patterns\n", MAX_GLOBS);
            return -1;
        }
        o->globs[o->n_globs++] = tok;
    }
    return 0; /* list_ok: at least one item */
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qvet bench [--variant GLOB[,GLOB...]] [--model llama2-7b|llama3-70b|all]\n"
            "                  [--m LIST] [--runs N] [--passes P] [--no-queue] [--no-pair]\n"
            "                  [--out FILE] [--dry-run]\n"
            "Times every registry row with a GPU kernel on the four linear layers of a\n"
            "Llama-2-7B or Llama-3-70B block (docs/design.md §8) against cuBLAS fp16 and the\n"
            "weight-read floor at the measured copy bandwidth, with weights rotated past\n"
            "the L2 cache and CUDA-event medians. With an activation-quantized row (int8\n"
            "or e4m3 activations) the same run also times cuBLASLt fp8 and int8 W8A8, each\n"
            "per-token row with its activation quantization in front (\"+aq\"), and the\n"
            "quantizer alone. Every registry row is also timed on the whole block, its\n"
            "four layers launched back to back (\"chain\").\n"
            "Routed rows (--variant 'moe-*') time the whole routed layer (routing, token\n"
            "sort, grouped GEMM, combine) at each token count (--m, default 1,8,64,512,4096)\n"
            "against cuBLAS GEMMs of the same experts in the row's 16-bit format, looped and\n"
            "grouped, in a table of their own after the registry rows' (--out: the same\n"
            "file); each point names its grouped GEMM's kernel (mma or wgmma:\n"
            "QVET_MOE_WG_MIN_ROWS), its K parts on mma (\"mma k3\": QVET_MOE_KSPLIT) and block.\n"
            "  --variant GLOB  rows to time (fnmatch, e.g. 'marlin-w4*'; several patterns\n"
            "                  separated by commas, e.g. 'qqq-*,w8a8-*'); cublas-f16 is\n"
            "                  always timed as the reference\n"
            "  --model NAME    llama2-7b, llama3-70b or all (default all)\n"
            "  --m LIST        comma-separated M values (default 1,4,16,32,64,128,256,512,1024)\n"
            "  --runs N        timed launches per point and pass (default 50), after 5 warm-ups\n"
            "  --passes P      passes over the rows at each M, 1 to 8 (default 2), every other\n"
            "                  one in reverse row order; a point is the mean of its pass medians\n"
            "  --no-queue      time each launch as the host submits it; by default every batch of\n"
            "                  10 timed launches is queued behind a 500 us wait kernel, so that the\n"
            "                  events time GPU work alone, not the host's launch overhead\n"
            "  --no-pair       time each registry row's GEMMs alone; by default they are timed side by\n"
            "                  side with cuBLAS fp16 on the same layer (batches of launches alternating)\n"
            "                  and the row's ratio is against that cuBLAS time: at its power limit the\n"
            "                  GPU lowers its clocks with a lag, so a row timed after a hungrier one\n"
            "                  runs on the clocks that one left\n"
            "  --out FILE      JSON Lines results (docs/results-format.md, \"kind\":\"bench\")\n"
            "  --dry-run       list the rows and the number of timings, touch no GPU\n"
            "Exit: 0 ok, 2 bad option, 3 no CUDA device or a CUDA error.\n");
}

static void write_run_line(FILE *f, int argc, char **argv, const qv_gpu_info *gi)
{
    char cmd[1024] = "qvet bench", host[256] = "unknown", date[64];
    for (int i = 1; i < argc; i++) {
        size_t l = strlen(cmd);
        snprintf(cmd + l, sizeof cmd - l, " %s", argv[i]);
    }
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char drv[64];
    qv_driver_version(gi->driver, drv, sizeof drv);
    fprintf(f, "{\"kind\":\"run\",\"command\":");
    qv_json_fput_str(f, cmd);
    fprintf(f, ",\"qvet_version\":\"%s\",\"commit\":", QV_VERSION);
    qv_json_fput_str(f, qv_build_commit());
    fprintf(f, ",\"date\":\"%s\",\"host\":", date);
    qv_json_fput_str(f, host);
    fprintf(f, ",\"backend\":\"gpu\",\"gpu\":");
    qv_json_fput_str(f, gi->name);
    fprintf(f, ",\"driver\":");
    qv_json_fput_str(f, drv);
    fprintf(f, ",\"cuda\":\"%d.%d\",\"seed\":1000,\"shard\":\"1/1\"}\n", gi->runtime / 1000, (gi->runtime % 1000) / 10);
}

/* The rows of the run: cublas-f16 first (the reference of every ratio); with
 * an activation-quantized row, the cuBLASLt baselines next (fp8 per tensor,
 * with an e4m3 row also fp8 per token x channel and per 128-K block, then
 * int8) and the quantizers that stand in front of the selected rows last.
 * Returns the count. */
static int collect_rows(const bench_opts *o, const qv_variant *ref, bench_row *rows)
{
    int n = 0, aq_rows = 0, fp8_rows = 0, used[N_AQK] = {0};
    rows[n++] = (bench_row){ref->name, ROW_VARIANT, ref, AQK_NONE};
    const int first = n;
    for (int i = 0; i < qv_registry_count() && n < MAX_ROWS - 5 - N_AQK; i++) {
        const qv_variant *v = qv_registry_get(i);
        if (v == ref || !v->gpu_kernel || !opts_match(o, v)) continue;
        const aq_kind q = row_aq_kind(v);
        rows[n++] = (bench_row){v->name, ROW_VARIANT, v, q};
        if (q != AQK_NONE) used[q] = 1;
        if (v->afmt == QV_FMT_I8 || v->afmt == QV_FMT_E4M3) aq_rows++;
        if (v->afmt == QV_FMT_E4M3) fp8_rows++;
    }
    if (aq_rows) {
        const int nb = fp8_rows ? 5 : 2;
        memmove(&rows[first + nb], &rows[first], sizeof rows[0] * (size_t)(n - first));
        int at = first;
        rows[at++] = (bench_row){"cublaslt-fp8", ROW_LT_FP8, NULL, AQK_NONE};
        if (fp8_rows) {
            rows[at++] = (bench_row){"cublaslt-fp8-tok-ch", ROW_LT_FP8_OUTER, NULL, AQK_NONE};
            rows[at++] = (bench_row){"cublaslt-fp8-block", ROW_LT_FP8_VEC128, NULL, AQK_NONE};
            rows[at++] = (bench_row){"cublaslt-fp8-blk128", ROW_LT_FP8_BLK, NULL, AQK_NONE};
        }
        rows[at++] = (bench_row){"cublaslt-int8", ROW_LT_I8, NULL, AQK_NONE};
        n += nb;
    }
    for (int q = 0; q < N_AQK; q++)
        if (used[q]) rows[n++] = (bench_row){aqk_names[q], ROW_ACTQ, NULL, (aq_kind)q};
    return n;
}

/* --dry-run: each row and what it times, then the count of timings. */
static void print_plan(const bench_opts *o, const bench_row *rows, int nr)
{
    static const char *const aqk_what[N_AQK] = {"f16 -> int8 per token", "f16 -> e4m3 per token",
                                                "f16 -> e4m3 per token and 128-K group"};
    const int models_n = (o->model_mask & 1) + ((o->model_mask >> 1) & 1);
    long timings = 0, chains = 0;
    for (int ri = 0; ri < nr; ri++) {
        const bench_row *r = &rows[ri];
        printf("%-26s ", r->name);
        switch (r->kind) {
        case ROW_VARIANT:
            if (ri == 0)
                printf("reference: cuBLAS fp16\n");
            else if (r->aqk != AQK_NONE)
                printf("GEMM, and +aq: %s in front\n", aqk_names[r->aqk]);
            else if (r->v->afmt == QV_FMT_I8 || r->v->afmt == QV_FMT_E4M3)
                printf("GEMM (no per-token quantizer for its activation scale or zero point)\n");
            else
                printf("GEMM\n");
            timings += r->aqk != AQK_NONE ? 2 : 1;
            chains++;
            break;
        case ROW_LT_FP8:
            printf("baseline: cuBLASLt e4m3 x e4m3 -> f16, per-tensor scales, promoted accumulation\n");
            timings++;
            break;
        case ROW_LT_FP8_OUTER:
            printf("baseline: cuBLASLt e4m3 x e4m3 -> f16, per-token x per-channel scales (outer vectors), "
                   "promoted accumulation, split K in fp32 only\n");
            timings++;
            break;
        case ROW_LT_FP8_VEC128:
            printf("baseline: cuBLASLt e4m3 x e4m3 -> f16, one scale per 128 K of every row (VEC128), "
                   "promoted accumulation, split K in fp32 only\n");
            timings++;
            break;
        case ROW_LT_FP8_BLK:
            printf("baseline: cuBLASLt e4m3 x e4m3 -> f16, weights per 128 x 128 block (BLK128x128), "
                   "activations per 128 K (VEC128), promoted accumulation, split K in fp32 only\n");
            timings++;
            break;
        case ROW_LT_I8:
            printf("baseline: cuBLASLt int8 x int8 -> int32\n");
            timings++;
            break;
        case ROW_ACTQ:
            printf("quantizer alone: %s\n", aqk_what[r->aqk]);
            timings++;
            break;
        }
    }
    timings *= (long)models_n * N_LAYERS * o->n_m;
    chains *= (long)models_n * o->n_m;
    printf("%d rows, %d model(s) x %d layers x %d M values: %ld timings of %d + %d launches, and %ld of the block's\n"
           "four layers launched back to back (chain), in each of %d pass%s over the rows (every other one in\n"
           "reverse order)\n",
           nr, models_n, N_LAYERS, o->n_m, timings, o->warmup, o->runs, chains, o->passes,
           o->passes == 1 ? "" : "es");
    if (o->no_pair)
        printf("each registry row's GEMMs timed alone (--no-pair)\n");
    else
        printf("each registry row's GEMMs timed side by side with cuBLAS fp16 on the same layer, batches of their\n"
               "launches alternating (--no-pair: alone)\n");
}

/* One table cell: "time [ratio floor%]"; `ratio` NAN leaves its place blank. */
static void print_cell(double us, double ratio, double floor_frac)
{
    char cell[64], r[16] = "", f[16] = "";
    if (!isfinite(us)) {
        printf(" %22s", "-");
        return;
    }
    if (isfinite(ratio)) snprintf(r, sizeof r, "%5.2fx", ratio);
    if (isfinite(floor_frac)) snprintf(f, sizeof f, "%3.0f%%", 100.0 * floor_frac);
    snprintf(cell, sizeof cell, "%.1f [%6s %4s]", us, r, f);
    printf(" %22s", cell);
}

static void print_table(const bench_opts *o, const bench_row *rows, int nr, int md, double bw)
{
    static double blk[MAX_ROWS][MAX_M], blk_aq[MAX_ROWS][MAX_M], blk_floor[MAX_ROWS][MAX_M], blk_ref[MAX_ROWS][MAX_M];
    for (int ri = 0; ri < nr; ri++)
        for (int mi = 0; mi < o->n_m; mi++) {
            double s = 0, sa = 0, fb = 0, sr = 0;
            for (int li = 0; li < N_LAYERS; li++) {
                s += t_us[ri][md][li][mi];
                sa += t_aq_us[ri][md][li][mi];
                fb += floor_b[ri][md][li][mi];
                sr += ref_time(ri, md, li, mi);
            }
            blk[ri][mi] = s, blk_aq[ri][mi] = sa, blk_floor[ri][mi] = fb / bw * 1e6, blk_ref[ri][mi] = sr;
        }
    printf("\n%s block (qkv+o+gate_up+down): median us [cuBLAS f16 time / this, floor / this]\n", models[md].name);
    if (!o->no_pair)
        printf("cuBLAS f16 time: for a registry row, cuBLAS fp16 timed side by side with it (their launches\n"
               "alternating in batches on the same layer), so that both see the same clocks\n");
    printf("floor: packed weight + scale + zero-point bytes at the copy bandwidth (activations not counted);\n"
           "+aq: the row with its per-token activation quantization from fp16 in front, timed as one pair;\n"
           "act-quant-*: the quantizer alone, its floor = fp16 read + code and scale write;\n"
           "  queued: its GPU time per launch when queued behind other work (no wait for the host)\n");
    printf("%-26s", "variant");
    for (int mi = 0; mi < o->n_m; mi++) {
        char h[24];
        snprintf(h, sizeof h, "M=%d", o->ms[mi]);
        printf(" %22s", h);
    }
    printf("\n");
    for (int ri = 0; ri < nr; ri++) {
        const bench_row *r = &rows[ri];
        printf("%-26s", r->name);
        for (int mi = 0; mi < o->n_m; mi++)
            print_cell(blk[ri][mi], r->kind == ROW_ACTQ ? NAN : blk_ref[ri][mi] / blk[ri][mi],
                       blk_floor[ri][mi] / blk[ri][mi]);
        printf("\n");
        if (r->kind == ROW_ACTQ) {
            char name[64];
            snprintf(name, sizeof name, "%s queued", r->name);
            printf("%-26s", name);
            for (int mi = 0; mi < o->n_m; mi++) print_cell(blk_aq[ri][mi], NAN, blk_floor[ri][mi] / blk_aq[ri][mi]);
            printf("\n");
        }
        if (r->kind == ROW_VARIANT && r->aqk != AQK_NONE) {
            char name[64];
            snprintf(name, sizeof name, "%s +aq", r->name);
            printf("%-26s", name);
            for (int mi = 0; mi < o->n_m; mi++)
                print_cell(blk_aq[ri][mi], blk_ref[ri][mi] / blk_aq[ri][mi], blk_floor[ri][mi] / blk_aq[ri][mi]);
            printf("\n");
        }
    }
    printf("%s block chained (its four layers launched back to back between two events):\n"
           "median us [cuBLAS f16 chained / this, floor / this]\n",
           models[md].name);
    for (int ri = 0; ri < nr; ri++) {
        const bench_row *r = &rows[ri];
        if (r->kind != ROW_VARIANT) continue;
        printf("%-26s", r->name);
        for (int mi = 0; mi < o->n_m; mi++)
            print_cell(t_chain_us[ri][md][mi], t_chain_us[0][md][mi] / t_chain_us[ri][md][mi],
                       blk_floor[ri][mi] / t_chain_us[ri][md][mi]);
        printf("\n");
    }
    int any = 0;
    for (int ri = 0; ri < nr; ri++) any |= rows[ri].kind == ROW_VARIANT && rows[ri].aqk != AQK_NONE;
    if (!any) return;
    printf("activation quantization share of the +aq time ((+aq - GEMM alone) / +aq)\n");
    for (int ri = 0; ri < nr; ri++) {
        const bench_row *r = &rows[ri];
        if (r->kind != ROW_VARIANT || r->aqk == AQK_NONE) continue;
        printf("%-26s", r->name);
        for (int mi = 0; mi < o->n_m; mi++) {
            const double sh = (blk_aq[ri][mi] - blk[ri][mi]) / blk_aq[ri][mi];
            if (isfinite(sh))
                printf(" %21.1f%%", 100.0 * sh);
            else
                printf(" %22s", "-");
        }
        printf("\n");
    }
}

int qv_cmd_bench(int argc, char **argv)
{
    static bench_opts o;
    memset(&o, 0, sizeof o);
    o.model_mask = 3, o.runs = 50, o.warmup = 5, o.passes = 2;
    for (int i = 0; i < (int)(sizeof default_m / sizeof default_m[0]); i++) o.ms[o.n_m++] = default_m[i];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--variant") && val) {
            if (parse_globs(val, &o)) return 2;
            o.variant_arg = val, i++;
        } else if (!strcmp(a, "--model") && val) {
            if (!strcmp(val, "llama2-7b")) o.model_mask = 1;
            else if (!strcmp(val, "llama3-70b")) o.model_mask = 2;
            else if (!strcmp(val, "all")) o.model_mask = 3;
            else {
                fprintf(stderr, "qvet bench: --model must be llama2-7b, llama3-70b or all, not '%s'\n", val);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--m") && val) {
            if (parse_m_list(val, &o)) return 2;
            o.m_set = 1, i++;
        } else if (!strcmp(a, "--runs") && val) {
            long long r;
            if (qv_opt_long("--runs", val, 1, 100000, &r)) return 2;
            o.runs = (int)r, i++;
        } else if (!strcmp(a, "--passes") && val) {
            long long r;
            if (qv_opt_long("--passes", val, 1, MAX_PASSES, &r)) return 2;
            o.passes = (int)r, i++;
        } else if (!strcmp(a, "--out") && val) {
            o.out = val, i++;
        } else if (!strcmp(a, "--no-queue")) {
            o.no_queue = 1;
        } else if (!strcmp(a, "--no-pair")) {
            o.no_pair = 1;
        } else if (!strcmp(a, "--dry-run")) {
            o.dry_run = 1;
        } else {
            fprintf(stderr, "qvet bench: unknown option or missing value: %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    /* QVET_BENCH_TRACE=1: every timing of every pass on stderr as it ends,
     * with the seconds since the start, to set beside a clock and power log
     * (nvidia-smi --query-gpu=... -lms); unset, empty or 0: none. */
    const char *trace_env = getenv("QVET_BENCH_TRACE");
    if (trace_env && *trace_env && strcmp(trace_env, "0") && strcmp(trace_env, "1")) {
        fprintf(stderr, "qvet bench: QVET_BENCH_TRACE=\"%s\": expected 1 (trace every timing) or 0\n", trace_env);
        return 2;
    }
    const int trace = trace_env && !strcmp(trace_env, "1");
    /* The kernel paths' variables (docs/launch-options.md). */
    const int env_rc = qv_cli_launch_env("bench", &o.launch);
    if (env_rc) return env_rc;

    /* Routed rows (moe-*) have their own table (moe_bench.cu), after the
     * registry rows' when --variant selects both. */
    const int routed = o.n_globs && qv_moe_bench_selected(o.globs, o.n_globs);
    const int *routed_t = o.m_set ? o.ms : NULL;

    const qv_variant *ref = qv_variant_find("cublas-f16");
    if (!ref || !ref->gpu_kernel) {
        fprintf(stderr, "qvet bench: the registry has no cublas-f16 row to compare with\n");
        return 2;
    }
    static bench_row rows[MAX_ROWS];
    const int nr = collect_rows(&o, ref, rows);
    const int dense = !(nr == 1 && o.n_globs && !opts_match(&o, ref));
    if (!dense && !routed) {
        fprintf(stderr, "qvet bench: no row with a GPU kernel matches '%s'\n", o.variant_arg);
        return 2;
    }
    if (o.dry_run) {
        if (dense) print_plan(&o, rows, nr);
        if (routed) qv_moe_bench_plan(o.globs, o.n_globs, routed_t, o.n_m, o.runs);
        return 0;
    }

    qv_gpu_info gi;
    if (access("/dev/nvidia0", F_OK) != 0 && access("/dev/nvidiactl", F_OK) != 0) {
        fprintf(stderr, "qvet bench: no CUDA device\n");
        return 3;
    }
    if (!qv_gpu_info_get(&gi)) {
        fprintf(stderr, "qvet bench: no CUDA device\n");
        return 3;
    }

    FILE *jf = NULL;
    if (o.out) {
        jf = fopen(o.out, "w");
        if (!jf) {
            fprintf(stderr, "qvet bench: cannot write %s\n", o.out);
            return 2;
        }
        write_run_line(jf, argc, argv, &gi);
    }
    if (!dense) {
        const int rc = qv_moe_bench(o.globs, o.n_globs, routed_t, o.n_m, o.runs, o.no_queue, jf, &o.launch);
        if (jf) fclose(jf);
        return rc;
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double bw;
    qv_bench_timing ct;
    qv_status st = qv_bench_copy_bandwidth((size_t)1 << 30, 20, &bw, &ct);
    if (st != QV_OK) {
        fprintf(stderr, "qvet bench: copy bandwidth: %s\n", qv_errmsg());
        if (jf) fclose(jf);
        return qv_status_exit_code(st);
    }
    printf("device: %s; copy bandwidth %.2f TB/s (1 GiB device-to-device, read+write, median of 20)\n", gi.name,
           bw * 1e-12);
    /* From here on each batch of timed launches waits behind a blocker (bench.h). */
    if (!o.no_queue) {
        st = qv_bench_queue(BENCH_WAIT_US, BENCH_BATCH);
        if (st != QV_OK) {
            fprintf(stderr, "qvet bench: %s\n", qv_errmsg());
            if (jf) fclose(jf);
            return qv_status_exit_code(st);
        }
    }
    if (o.no_queue)
        printf("timing: each launch as the host submits it");
    else
        printf("timing: GPU time, every %d timed launches queued behind a %.0f us wait", BENCH_BATCH,
               BENCH_WAIT_US);
    printf("; %d pass%s over the rows at each M, every other one in reverse order\n", o.passes,
           o.passes == 1 ? "" : "es");
    if (!o.no_pair)
        printf("pairing: each registry row's GEMMs timed side by side with cuBLAS fp16 on the same layer, batches\n"
               "of their launches alternating; the row's ratio is against that cuBLAS time\n");
    if (jf)
        fprintf(jf, "{\"kind\":\"bench\",\"variant\":\"copy\",\"model\":null,\"layer\":null,\"m\":0,\"n\":0,\"k\":0,"
                    "\"median_us\":%.3f,\"p10_us\":%.3f,\"p90_us\":%.3f,\"runs\":%d,\"bytes_per_s\":%.6g}\n",
                ct.median_us, ct.p10_us, ct.p90_us, ct.runs, bw);

    /* One pass per M, smallest first, each over every row, model and layer:
     * the large-M points draw the H200 to its power limit (about 700 W),
     * and the clocks it then lowers stay lowered for a second or more. Timed
     * after them, the small-M points ran slower than alone (the SM clocks
     * drop while the power cap is active). A point's time thus no longer depends on
     * the larger Ms of the run, and rows at one M are timed side by side.
     * At one M the models go one after the other, every row of Llama-2-7B
     * before any of Llama-3-70B: with the model loop inside the row loop,
     * each row's 7B layers ran right after the previous row's 70B layers,
     * and at M = 1024 they took 9-20 % longer in the weight-only rows (4-6 %
     * in cuBLAS) than in a run of that model alone. In this order a model's
     * figures in `--model all` are those of a run of it alone. */
    int order[MAX_M];
    for (int i = 0; i < o.n_m; i++) {
        int j = i;
        for (; j > 0 && o.ms[order[j - 1]] > o.ms[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    for (int pi = 0; pi < o.n_m; pi++) {
        const int mi = order[pi];
        bench_opts op = o;
        op.n_m = 1;
        op.ms[0] = o.ms[mi];
        /* --passes over every row at this M, the row order reversed on every
         * other pass: a row at place i of nr runs at places i and 2 nr - 1 -
         * i of two passes, the same mean place for every row, so a drift of
         * the clocks over the passes (the power cap at large M) weighs on
         * every row alike instead of on the rows timed last. A point's time
         * is the mean of its passes' medians. */
        /* Three phases, each over every row in --passes passes: the GEMMs
         * alone, then the quantizer + GEMM pairs, then the chained blocks, so
         * that every timing of one kind follows timings of the same kind (a
         * row's pairs or chain, run between its GEMMs, would heat the GPU
         * for the next GEMM of that row only). */
        for (int md = 0; md < N_MODELS; md++) {
            if (!(o.model_mask & (1 << md))) continue;
            for (int phase = 0; phase < 3; phase++)
                for (int pass = 0; pass < o.passes; pass++)
                    for (int rr = 0; rr < nr; rr++) {
                        const int ri = pass % 2 ? nr - 1 - rr : rr;
                        const bench_row *r = &rows[ri];
                        if (phase > 0 && r->kind != ROW_VARIANT) continue;
                        if (phase == 1 && r->aqk == AQK_NONE) continue;
                        if (phase == 2) {
                            qv_bench_timing tc[1];
                            double tcu = NAN;
                            memset(tc, 0, sizeof tc);
                            st = bench_chain_run(r, &models[md], &op, &tcu, tc);
                            if (st != QV_OK) {
                                fprintf(stderr, "qvet bench: %s %s chained: %s\n", r->name, models[md].name,
                                        qv_errmsg());
                                if (jf) fclose(jf);
                                return qv_status_exit_code(st);
                            }
                            pass_add(&p_chain[ri][md], tcu, NAN, NAN, &tc[0], pass);
                            if (trace) trace_point(t0, r->name, models[md].name, "chain", o.ms[mi], pass, phase, tcu,
                                                   &tc[0]);
                            continue;
                        }
                        for (int li = 0; li < N_LAYERS; li++) {
                            const bench_layer *L = &models[md].layers[li];
                            double tu = NAN, ta = NAN;
                            qv_bench_timing tm[1];
                            memset(tm, 0, sizeof tm);
                            double tr = NAN;
                            st = r->kind != ROW_VARIANT
                                     ? bench_other_run(r, L, &op, &tu, &ta, tm)
                                     : bench_layer_run(r, ri > 0 && !o.no_pair ? &rows[0] : NULL, L, &op, &tu, &tr,
                                                       &ta, tm, phase == 0, phase == 1);
                            if (st != QV_OK) {
                                fprintf(stderr, "qvet bench: %s %s %s: %s\n", r->name, models[md].name, L->name,
                                        qv_errmsg());
                                if (jf) fclose(jf);
                                return qv_status_exit_code(st);
                            }
                            pass_acc *pa = &p_layer[ri][md][li];
                            if (phase == 0) pass_add(pa, tu, r->kind != ROW_VARIANT ? ta : NAN, tr, &tm[0], pass);
                            else pa->aq[pass] = ta;
                            if (trace) trace_point(t0, r->name, models[md].name, L->name, o.ms[mi], pass, phase,
                                                   phase == 0 ? tu : ta, &tm[0]);
                        }
                    }
        }
        /* Row 0 (cublas-f16, the reference of every ratio) comes first, so
         * each line finds its reference's time already set. */
        for (int ri = 0; ri < nr; ri++) {
            const bench_row *r = &rows[ri];
            for (int md = 0; md < N_MODELS; md++) {
                if (!(o.model_mask & (1 << md))) continue;
                for (int li = 0; li < N_LAYERS; li++) {
                    const bench_layer *L = &models[md].layers[li];
                    qv_bench_timing tm;
                    double *tu = &t_us[ri][md][li][mi], *ta = &t_aq_us[ri][md][li][mi], *tr = &t_ref_us[ri][md][li][mi];
                    pass_result(&p_layer[ri][md][li], o.passes, tu, ta, tr, &tm);
                    floor_b[ri][md][li][mi] = row_floor_bytes(r, o.ms[mi], L->n, L->k);
                    emit(jf, r, models[md].name, L->name, o.ms[mi], L->n, L->k, *tu, &tm, o.runs * o.passes,
                         floor_b[ri][md][li][mi], bw, ref_time(ri, md, li, mi), isfinite(*tr), *ta);
                }
                double s = 0, sa = 0, fb = 0, ref_s = 0;
                int paired = 1;
                for (int li = 0; li < N_LAYERS; li++) {
                    s += t_us[ri][md][li][mi];
                    sa += t_aq_us[ri][md][li][mi];
                    fb += floor_b[ri][md][li][mi];
                    ref_s += ref_time(ri, md, li, mi);
                    paired &= isfinite(t_ref_us[ri][md][li][mi]);
                }
                emit(jf, r, models[md].name, "block", o.ms[mi], 0, 0, s, NULL, o.runs * o.passes, fb, bw, ref_s,
                     paired, sa);
                t_chain_us[ri][md][mi] = NAN;
                if (r->kind != ROW_VARIANT) continue;
                qv_bench_timing tc;
                double unused;
                pass_result(&p_chain[ri][md], o.passes, &t_chain_us[ri][md][mi], &unused, &unused, &tc);
                emit(jf, r, models[md].name, "chain", o.ms[mi], 0, 0, t_chain_us[ri][md][mi], &tc,
                     o.runs * o.passes, fb, bw, t_chain_us[0][md][mi], 0, NAN);
            }
        }
        printf("timed M = %d (%d rows, %d pass%s)\n", o.ms[mi], nr, o.passes, o.passes == 1 ? "" : "es");
        fflush(stdout);
    }
    qv_bench_queue(0, 0);

    for (int md = 0; md < N_MODELS; md++)
        if (o.model_mask & (1 << md)) print_table(&o, rows, nr, md, bw);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("\nqvet bench: %d rows x %d M values, %d timed launches per point: %.0f s\n", nr, o.n_m, o.runs,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    int rc = 0;
    if (routed) {
        printf("\n");
        fflush(stdout);
        rc = qv_moe_bench(o.globs, o.n_globs, routed_t, o.n_m, o.runs, o.no_queue, jf, &o.launch);
    }
    if (jf) fclose(jf);
    return rc;
}

/* The activation-quantized family's benchmark (aq.h; QVET_AQ_BENCH=1 t_gpu_aq). */
int qv_aq_bench(void)
{
    if (!qv_gpu_info_get(NULL)) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
    /* The family's rows with their baselines at the M values of docs/design.md §8's
     * QQQ anchors; `qvet bench` is the one implementation. */
    char *argv[] = {"bench", "--variant", "qqq-*,w8a8-*", "--m", "1,16,64,1024", NULL};
    const int rc = qv_cmd_bench(5, argv);
    return rc == 0 ? 0 : rc == 2 ? 1 : 3;
}
