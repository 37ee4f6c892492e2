/* cmd_bench.c: `qvet bench`, kernel speed against cuBLAS fp16 and the
 * weight-read floor (DESIGN.md §8-§9).
 *
 * For every registry row with a launch (optionally filtered by --variant), every
 * model's four linear layers (qkv, o, gate_up, down) and every M, it times the
 * row's launch function with CUDA events (median of --runs launches after a
 * warm-up), rotating several copies of the layer's packed weights so that their
 * total exceeds the 60 MB L2 twice over. In the same run it measures the
 * device-to-device copy bandwidth and cuBLAS fp16 (the cublas-f16 row), and
 * reports per layer and per block: median µs, the fraction of the weight-read
 * floor (packed weight, scale and zero-point bytes at the copy bandwidth), and
 * cuBLAS fp16 time / the row's time. Any family's rows, baselines included,
 * show up here by being registry rows with a launch function.
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

#include "qvet/bench.h"
#include "qvet/campaign.h"
#include "qvet/cli.h"
#include "qvet/gemm.h"
#include "qvet/gpu.h"
#include "qvet/json.h"
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

/* DESIGN.md §8: the four linear layers of one transformer block. */
static const bench_model models[] = {
    {"llama2-7b", {{"qkv", 12288, 4096}, {"o", 4096, 4096}, {"gate_up", 22016, 4096}, {"down", 4096, 11008}}},
    {"llama3-70b", {{"qkv", 10240, 8192}, {"o", 8192, 8192}, {"gate_up", 57344, 8192}, {"down", 8192, 28672}}},
};
#define N_MODELS 2
#define N_LAYERS 4
#define MAX_M 16
#define MAX_VARIANTS 128

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
    w.scales2 = v->scale_layout == QV_SCALE_GROUP_CHANNEL ? (size_t)n * sizeof(float) : 0;
    w.zeros = v->zero_point && v->g > 0 ? (size_t)(k / v->g) * (size_t)n / 2 : 0;
    return w;
}

static size_t weight_total(weight_bytes w) { return w.b + w.scales + w.scales2 + w.zeros; }

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
} launch_ctx;

static qv_status launch_rotating(void *ctx, int iter, void *stream)
{
    launch_ctx *c = ctx;
    qv_gemm_args a = c->args;
    const weight_set *w = &c->sets[iter % c->n_sets];
    a.b = w->b, a.scales = w->scales, a.scales2 = w->scales2, a.zeros = w->zeros;
    a.stream = stream;
    return c->v->launch(c->v, &a);
}

/* Device allocations of one (variant, layer), freed together. */
typedef struct dev_pool {
    void *p[512];
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

/* Scale values: positive, around 2^-7, so random dot products stay finite. */
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
    const char *glob;
    int model_mask;
    int ms[MAX_M];
    int n_m;
    int runs, warmup;
    const char *out;
} bench_opts;

/* Times one variant on one layer at every M; t[mi] gets the median (NAN when
 * the shape is refused). */
static qv_status bench_layer_run(const qv_variant *v, const bench_layer *L, const bench_opts *o, FILE *jf,
                                 const char *model, double bw, const double *ref_us, double *t_out,
                                 qv_bench_timing *timings)
{
    for (int mi = 0; mi < o->n_m; mi++) t_out[mi] = NAN;
    if (qv_variant_check_shape(v, 1, L->n, L->k) != QV_OK) {
        fprintf(stderr, "qvet bench: %s skips %s %s: %s\n", v->name, model, L->name, qv_errmsg());
        return QV_OK;
    }
    weight_bytes wb = weight_sizes(v, L->n, L->k);
    size_t per_set = weight_total(wb);
    /* Enough copies that the rotation covers twice the 60 MB L2. */
    const size_t l2_twice = (size_t)120 << 20;
    int n_sets = (int)((l2_twice + per_set - 1) / per_set);
    if (n_sets < 1) n_sets = 1;
    if (n_sets > 64) n_sets = 64;

    int m_max = 1;
    for (int mi = 0; mi < o->n_m; mi++) m_max = o->ms[mi] > m_max ? o->ms[mi] : m_max;
    dev_pool pool = {.n = 0};
    weight_set sets[64];
    qv_status st = QV_OK;
    for (int s = 0; s < n_sets && st == QV_OK; s++) {
        weight_set *w = &sets[s];
        uint64_t seed = 1000 + (uint64_t)s * 16;
        st = pool_alloc(&pool, wb.b, &w->b);
        if (st == QV_OK) st = pool_alloc(&pool, wb.scales, &w->scales);
        if (st == QV_OK) st = pool_alloc(&pool, wb.scales2, &w->scales2);
        if (st == QV_OK) st = pool_alloc(&pool, wb.zeros, &w->zeros);
        if (st == QV_OK) st = fill_weights(v, w->b, wb.b, seed);
        if (st == QV_OK) st = fill_scales(v, w->scales, wb.scales, seed + 1);
        if (st == QV_OK && wb.scales2)
            st = qv_bench_fill(w->scales2, (int64_t)(wb.scales2 / 4), QV_FMT_F32, seed + 2, SCALE_LO, SCALE_HI, 0,
                               NULL);
        if (st == QV_OK && wb.zeros) st = qv_bench_fill(w->zeros, (int64_t)(wb.zeros / 4), QV_FMT_I32, seed + 3, 0, 0, 0, NULL);
    }
    /* Activations, output, per-token data and workspace, sized for the largest M. */
    launch_ctx c;
    memset(&c, 0, sizeof c);
    c.v = v, c.sets = sets, c.n_sets = n_sets;
    void *a = NULL, *out = NULL, *ascale = NULL, *azp = NULL, *perm = NULL, *ws = NULL;
    size_t ws_bytes = 0;
    for (int mi = 0; mi < o->n_m; mi++) {
        size_t w = v->workspace ? v->workspace(v, o->ms[mi], L->n, L->k) : 0;
        ws_bytes = w > ws_bytes ? w : ws_bytes;
    }
    if (st == QV_OK) st = pool_alloc(&pool, (size_t)m_max * L->k * qv_fmt_storage_bytes(v->afmt), &a);
    if (st == QV_OK) st = pool_alloc(&pool, (size_t)m_max * L->n * qv_fmt_storage_bytes(v->ofmt), &out);
    if (st == QV_OK) st = fill_acts(v, a, (int64_t)m_max * L->k, 77);
    if (st == QV_OK && v->act_scale != QV_ASCALE_NONE) {
        size_t cnt = (size_t)m_max * (size_t)((L->k + 127) / 128); /* covers every act_scale layout */
        st = pool_alloc(&pool, cnt * sizeof(float), &ascale);
        if (st == QV_OK) st = qv_bench_fill(ascale, (int64_t)cnt, QV_FMT_F32, 78, 0.01f, 0.02f, 0, NULL);
    }
    if (st == QV_OK && v->azp != QV_AZP_NONE) {
        st = pool_alloc(&pool, (size_t)m_max * sizeof(int32_t), &azp);
        if (st == QV_OK && cudaMemset(azp, 0, (size_t)m_max * sizeof(int32_t)) != cudaSuccess)
            st = qv_cuda_fail((int)cudaGetLastError(), "cudaMemset (azp)", __FILE__, __LINE__);
    }
    if (st == QV_OK && v->act_order) {
        /* A random permutation is no slower to gather than the identity; the
         * identity keeps the host side trivial. */
        int32_t *h = malloc(sizeof(int32_t) * (size_t)L->k);
        if (!h) st = qv_fail(QV_ERR_NOMEM, "permutation of %d rows", L->k);
        for (int i = 0; h && i < L->k; i++) h[i] = L->k - 1 - i;
        if (st == QV_OK) st = pool_alloc(&pool, sizeof(int32_t) * (size_t)L->k, &perm);
        if (st == QV_OK && cudaMemcpy(perm, h, sizeof(int32_t) * (size_t)L->k, cudaMemcpyHostToDevice) != cudaSuccess)
            st = qv_cuda_fail((int)cudaGetLastError(), "cudaMemcpy (perm)", __FILE__, __LINE__);
        free(h);
    }
    if (st == QV_OK && ws_bytes) {
        st = pool_alloc(&pool, ws_bytes, &ws);
        if (st == QV_OK && cudaMemset(ws, 0, ws_bytes) != cudaSuccess)
            st = qv_cuda_fail((int)cudaGetLastError(), "cudaMemset (workspace)", __FILE__, __LINE__);
    }
    if (st == QV_OK && cudaDeviceSynchronize() != cudaSuccess)
        st = qv_cuda_fail((int)cudaGetLastError(), "benchmark buffer fills", __FILE__, __LINE__);

    const double floor_us = (double)per_set / bw * 1e6;
    for (int mi = 0; mi < o->n_m && st == QV_OK; mi++) {
        const int m = o->ms[mi];
        if (qv_variant_check_shape(v, m, L->n, L->k) != QV_OK) continue;
        c.args.m = m, c.args.n = L->n, c.args.k = L->k, c.args.g = v->g;
        c.args.a = a, c.args.a_scale = ascale, c.args.azp = azp, c.args.perm = perm, c.args.c = out;
        c.args.workspace = ws, c.args.workspace_bytes = ws_bytes;
        qv_bench_timing t;
        st = qv_bench_time(launch_rotating, &c, o->warmup, o->runs, NULL, &t);
        if (st != QV_OK) {
            fprintf(stderr, "qvet bench: %s %s %s m=%d: %s\n", v->name, model, L->name, m, qv_errmsg());
            st = QV_OK; /* a refused or failing row does not stop the others */
            continue;
        }
        t_out[mi] = t.median_us;
        timings[mi] = t;
        if (jf) {
            fprintf(jf, "{\"kind\":\"bench\",\"variant\":");
            qv_json_fput_str(jf, v->name);
            fprintf(jf, ",\"model\":\"%s\",\"layer\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"median_us\":%.3f,"
                        "\"p10_us\":%.3f,\"p90_us\":%.3f,\"runs\":%d,\"floor_us\":%.3f,\"floor_fraction\":%.4f,"
                        "\"vs_cublas\":",
                    model, L->name, m, L->n, L->k, t.median_us, t.p10_us, t.p90_us, t.runs, floor_us,
                    floor_us / t.median_us);
            if (ref_us && isfinite(ref_us[mi]))
                fprintf(jf, "%.4f}\n", ref_us[mi] / t.median_us);
            else
                fprintf(jf, "null}\n");
        }
    }
    pool_free(&pool);
    return st;
}

static int parse_m_list(const char *s, bench_opts *o)
{
    o->n_m = 0;
    char buf[256];
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
    if (!o->n_m) {
        fprintf(stderr, "qvet bench: --m needs at least one value\n");
        return -1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qvet bench [--variant GLOB] [--model llama2-7b|llama3-70b|all] [--m LIST]\n"
            "                  [--runs N] [--out FILE]\n"
            "Times every registry row with a GPU kernel on the four linear layers of a\n"
            "Llama-2-7B or Llama-3-70B block (DESIGN.md §8) against cuBLAS fp16 and the\n"
            "weight-read floor at the measured copy bandwidth, with weights rotated past\n"
            "the L2 cache and CUDA-event medians.\n"
            "  --variant GLOB  rows to time (fnmatch, e.g. 'marlin-w4*'); cublas-f16 is\n"
            "                  always timed as the reference\n"
            "  --model NAME    llama2-7b, llama3-70b or all (default all)\n"
            "  --m LIST        comma-separated M values (default 1,4,16,32,64,128,256,512,1024)\n"
            "  --runs N        timed launches per point (default 50), after 5 warm-ups\n"
            "  --out FILE      JSON Lines results (docs/results-format.md, \"kind\":\"bench\")\n"
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
    const char *commit = getenv("QVET_COMMIT");
    fprintf(f, "{\"kind\":\"run\",\"command\":");
    qv_json_fput_str(f, cmd);
    fprintf(f, ",\"qvet_version\":\"%s\",\"commit\":", QV_VERSION);
    qv_json_fput_str(f, commit && *commit ? commit : "unknown");
    fprintf(f, ",\"date\":\"%s\",\"host\":", date);
    qv_json_fput_str(f, host);
    fprintf(f, ",\"backend\":\"gpu\",\"gpu\":");
    qv_json_fput_str(f, gi->name);
    fprintf(f, ",\"driver\":\"%d.%d\",\"cuda\":\"%d.%d\",\"seed\":1000,\"shard\":\"1/1\"}\n", gi->driver / 1000,
            (gi->driver % 1000) / 10, gi->runtime / 1000, (gi->runtime % 1000) / 10);
}

int qv_cmd_bench(int argc, char **argv)
{
    bench_opts o = {.glob = NULL, .model_mask = 3, .n_m = 0, .runs = 50, .warmup = 5, .out = NULL};
    for (int i = 0; i < (int)(sizeof default_m / sizeof default_m[0]); i++) o.ms[o.n_m++] = default_m[i];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--variant") && val) {
            o.glob = val, i++;
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
            i++;
        } else if (!strcmp(a, "--runs") && val) {
            long long r;
            if (qv_opt_long("--runs", val, 1, 100000, &r)) return 2;
            o.runs = (int)r, i++;
        } else if (!strcmp(a, "--out") && val) {
            o.out = val, i++;
        } else {
            fprintf(stderr, "qvet bench: unknown option or missing value: %s\n", a);
            usage(stderr);
            return 2;
        }
    }

    const qv_variant *list[MAX_VARIANTS];
    int nv = 0;
    const qv_variant *ref = qv_variant_find("cublas-f16");
    if (!ref || !ref->launch) {
        fprintf(stderr, "qvet bench: the registry has no cublas-f16 row to compare with\n");
        return 2;
    }
    list[nv++] = ref;
    for (int i = 0; i < qv_registry_count() && nv < MAX_VARIANTS; i++) {
        const qv_variant *v = qv_registry_get(i);
        if (v != ref && v->launch && qv_variant_match(v, o.glob)) list[nv++] = v;
    }
    if (nv == 1 && o.glob && !qv_variant_match(ref, o.glob)) {
        fprintf(stderr, "qvet bench: no row with a GPU kernel matches '%s'\n", o.glob);
        return 2;
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
    if (jf)
        fprintf(jf, "{\"kind\":\"bench\",\"variant\":\"copy\",\"model\":null,\"layer\":null,\"m\":0,\"n\":0,\"k\":0,"
                    "\"median_us\":%.3f,\"p10_us\":%.3f,\"p90_us\":%.3f,\"runs\":%d,\"bytes_per_s\":%.6g}\n",
                ct.median_us, ct.p10_us, ct.p90_us, ct.runs, bw);

    /* block[v][model][mi]: the sum of the four layers' medians. */
    static double layer_t[MAX_VARIANTS][N_MODELS][N_LAYERS][MAX_M];
    static double block[MAX_VARIANTS][N_MODELS][MAX_M];
    double floor_block[N_MODELS][MAX_VARIANTS];
    for (int vi = 0; vi < nv; vi++) {
        const qv_variant *v = list[vi];
        for (int md = 0; md < N_MODELS; md++) {
            if (!(o.model_mask & (1 << md))) continue;
            floor_block[md][vi] = 0;
            for (int li = 0; li < N_LAYERS; li++) {
                const bench_layer *L = &models[md].layers[li];
                qv_bench_timing tm[MAX_M];
                st = bench_layer_run(v, L, &o, jf, models[md].name, bw, vi ? layer_t[0][md][li] : NULL,
                                     layer_t[vi][md][li], tm);
                if (st != QV_OK) {
                    fprintf(stderr, "qvet bench: %s %s %s: %s\n", v->name, models[md].name, L->name, qv_errmsg());
                    if (jf) fclose(jf);
                    return qv_status_exit_code(st);
                }
                floor_block[md][vi] += (double)weight_total(weight_sizes(v, L->n, L->k)) / bw * 1e6;
            }
            for (int mi = 0; mi < o.n_m; mi++) {
                double s = 0;
                for (int li = 0; li < N_LAYERS; li++) s += layer_t[vi][md][li][mi];
                block[vi][md][mi] = s;
                if (jf && isfinite(s)) {
                    fprintf(jf, "{\"kind\":\"bench\",\"variant\":");
                    qv_json_fput_str(jf, v->name);
                    fprintf(jf, ",\"model\":\"%s\",\"layer\":\"block\",\"m\":%d,\"n\":0,\"k\":0,\"median_us\":%.3f,"
                                "\"p10_us\":null,\"p90_us\":null,\"runs\":%d,\"floor_us\":%.3f,"
                                "\"floor_fraction\":%.4f,\"vs_cublas\":",
                            models[md].name, o.ms[mi], s, o.runs, floor_block[md][vi], floor_block[md][vi] / s);
                    if (isfinite(block[0][md][mi]))
                        fprintf(jf, "%.4f}\n", block[0][md][mi] / s);
                    else
                        fprintf(jf, "null}\n");
                }
            }
        }
        fflush(stdout);
    }
    if (jf) fclose(jf);

    /* The table: per model, one line per row; each cell is the block's median
     * µs and cuBLAS fp16 time / this time; the last column is the fraction of
     * the weight-read floor at the smallest M. */
    for (int md = 0; md < N_MODELS; md++) {
        if (!(o.model_mask & (1 << md))) continue;
        printf("\n%s block (qkv+o+gate_up+down): median us [cuBLAS f16 time / this], floor fraction at M=%d\n",
               models[md].name, o.ms[0]);
        printf("%-28s", "variant");
        for (int mi = 0; mi < o.n_m; mi++) {
            char h[24];
            snprintf(h, sizeof h, "M=%d", o.ms[mi]);
            printf(" %-17s", h);
        }
        printf("  floor\n");
        for (int vi = 0; vi < nv; vi++) {
            printf("%-28s", list[vi]->name);
            for (int mi = 0; mi < o.n_m; mi++) {
                double t = block[vi][md][mi], r = block[0][md][mi] / t;
                if (isfinite(t))
                    printf(" %9.1f [%5.2fx]", t, r);
                else
                    printf(" %17s", "-");
            }
            double t0 = block[vi][md][0];
            if (isfinite(t0))
                printf("  %4.0f%%\n", 100.0 * floor_block[md][vi] / t0);
            else
                printf("  -\n");
        }
    }
    return 0;
}
