/* moe_cases.c: routed cases of the campaign (campaign.h): the fixed suite of a
 * routed row, generated cases, running one (CPU model or GPU kernels), and
 * its JSONL line. Like a GEMM case, a routed case is a pure function of (seed, index)
 * (or (seed, row, suite index)); the row of a generated case is drawn from
 * its own stream, so naming that row alone replays the case. */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>

#include "internal/campaign.h"
#include "qvet/array.h"
#include "internal/gpu_moe.h"
#include "internal/json.h"

/* ---- the suite ---------------------------------------------------------------------- */

/* Per logits case two token counts (a decode step and a batch), then four
 * larger batches, each within SUITE_CAP multiply-adds (t x (topk + shared)
 * x n x k), the GEMM suite's CPU cap: the models of fp8 rows cost about
 * 100 ns a multiply-add; then a decode step on the split-K witness; last,
 * an expert-parallel shard at a prefill batch (SHARD_T tokens, top-k local
 * experts, N = 64, K = 128): the launch plans SHARD_T rows per local expert,
 * from which fp8 block-128 experts take the wgmma GEMM on a GPU (32 rows,
 * qv_moe_pick), where the batches above, cut to a few tokens by the cap on
 * 257-expert rows, plan about 9. */
#define SUITE_CAP ((int64_t)1 << 22)
#define SUITE_PER_LOGITS 2
#define SUITE_BATCHES 4
#define SUITE_WITNESS 1
#define SUITE_SHARD 1
#define SHARD_T 32
static const int64_t batch_t[SUITE_BATCHES] = {8, 64, 128, 256};

int qv_moe_suite_count(const qv_moe_row *r)
{
    (void)r;
    return SUITE_PER_LOGITS * QV_LOGITS_COUNT + SUITE_BATCHES + SUITE_WITNESS + SUITE_SHARD;
}

/* Local experts of a case: all, three quarters (some -1 in the map), or half
 * for the nonlocal logits (every token's experts elsewhere). */
static int local_of(const qv_moe_row *r, int topk, qv_moe_logits lc, int variant)
{
    int e = r->experts;
    if (lc == QV_LOGITS_NONLOCAL) return e - (e / 2 > topk ? e / 2 : topk);
    return variant ? e - e / 4 : e;
}

static uint64_t mix64(uint64_t a, uint64_t b)
{
    uint64_t s = a * 0x9E3779B97F4A7C15ull + b + 0x6D6F65ull;
    return qv_splitmix64(&s);
}

static int topk_of(const qv_moe_row *r)
{
    const qv_moe_spec *s;
    return qv_moe_row_spec(r, &s) == QV_OK ? s->topk : 1;
}

/* Whether the row's experts are weight-only with group scales: those the
 * GPU's grouped GEMM splits along K at decode batches (qv_moe_ksplit_covers:
 * W4A16 and MXFP4) and NVFP4, whose global scale keeps it whole. */
static int weight_only_grouped(const qv_moe_row *r)
{
    const qv_moe_spec *s;
    if (qv_moe_row_spec(r, &s) != QV_OK) return 0;
    const qv_variant *v = s->expert;
    return (v->afmt == QV_FMT_F16 || v->afmt == QV_FMT_BF16) && v->scale_layout == QV_SCALE_GROUP;
}

void qv_moe_suite_case(const qv_moe_row *r, uint64_t seed, int j, qv_moe_case *c)
{
    memset(c, 0, sizeof *c);
    c->row = r;
    c->seed = seed;
    c->index = j;
    c->suite = 1;
    c->n = 128;
    c->k = 256;
    c->e = r->experts;
    c->shared = r->shared;
    int topk = topk_of(r);
    if (j < SUITE_PER_LOGITS * QV_LOGITS_COUNT) {
        c->logits = (qv_moe_logits)(j / SUITE_PER_LOGITS);
        c->t = j % SUITE_PER_LOGITS ? 37 : 1;
        /* A decode step of weight-only experts with group scales has K
         * long enough for two parts (16 k16 tiles a part, qv_moe_parts),
         * so that the combine's sum of the parts is checked too. */
        if (c->t == 1 && weight_only_grouped(r)) c->k = 512;
        c->probe = j % 3 == 0 ? QV_PROBE_EXACT : QV_PROBE_RANDOM;
        c->e_local = local_of(r, topk, c->logits, j % 4 == 3);
    } else if (j < SUITE_PER_LOGITS * QV_LOGITS_COUNT + SUITE_BATCHES) {
        int b = j - SUITE_PER_LOGITS * QV_LOGITS_COUNT;
        c->logits = QV_LOGITS_RANDOM;
        c->t = batch_t[b];
        c->probe = b == 1 ? QV_PROBE_ONEHOT : QV_PROBE_RANDOM;
        c->e_local = local_of(r, topk, c->logits, b == 2);
    } else if (j == qv_moe_suite_count(r) - 1) {
        c->logits = QV_LOGITS_RANDOM;
        c->t = SHARD_T;
        c->n = 64;
        c->k = 128;
        c->probe = QV_PROBE_RANDOM;
        c->e_local = topk;
    } else {
        /* Every expert's product 2049 - 2048 = 1 in every column, the 2049
         * in the first K part and the -2048 in the last: a reduction of
         * the GPU's K parts in a 16-bit format gives 0. On random data at
         * K = 512 such a reduction stays within the certified fp32 bound on
         * f16 rows (its errors are those of 2^-11 roundings of partial
         * sums, the bound's of 512 of 2^-24 each over the products'
         * magnitudes). An fp8 sum's bound exceeds the witness's result:
         * those rows take the exact probe. */
        c->logits = QV_LOGITS_RANDOM;
        c->t = 1;
        if (weight_only_grouped(r)) c->k = 512;
        const qv_moe_spec *s;
        c->probe = qv_moe_row_spec(r, &s) == QV_OK && s->expert->arith.accum == QV_ACC_TC_F32 &&
                           ref_probe_applies(s->expert, QV_PROBE_WITNESS_SPLITK, c->t, c->n, c->k)
                       ? QV_PROBE_WITNESS_SPLITK
                       : QV_PROBE_EXACT;
        c->e_local = local_of(r, topk, c->logits, 0);
    }
    while (c->t > 1 && c->t * (topk + r->shared) * c->n * c->k > SUITE_CAP) c->t /= 2;
    uint64_t h = 0;
    for (const char *p = r->name; *p; p++) h = h * 131 + (unsigned char)*p;
    c->data_seed = mix64(mix64(seed, h), (uint64_t)j);
}

/* ---- generated cases -------------------------------------------------------------------- */

/* The largest t x (topk + shared) x n x k a generated case draws. */
#define GEN_CAP ((int64_t)1 << 23)

void qv_moe_gen_case(const qv_moe_row *const *rows, int n_rows, uint64_t seed, int64_t index, qv_moe_case *c)
{
    memset(c, 0, sizeof *c);
    uint64_t pick = mix64(seed ^ 0x526F77ull, (uint64_t)index);
    const qv_moe_row *r = rows[qv_rng_below(&pick, (uint64_t)n_rows)];
    uint64_t st = mix64(seed, (uint64_t)index);
    c->row = r;
    c->seed = seed;
    c->index = index;
    int topk = topk_of(r);
    c->n = 64 * (int64_t)(1 + qv_rng_below(&st, 4));
    c->k = 128 * (int64_t)(1 + qv_rng_below(&st, 4));
    /* tokens in 1..1023: a power of two up to 512 plus a uniform part below
     * it, halved while past the cap */
    c->t = (int64_t)(1 << qv_rng_below(&st, 10));
    c->t += (int64_t)qv_rng_below(&st, (uint64_t)c->t);
    while (c->t > 1 && c->t * (topk + r->shared) * c->n * c->k > GEN_CAP) c->t /= 2;
    c->logits = (qv_moe_logits)qv_rng_below(&st, QV_LOGITS_COUNT);
    static const qv_probe_kind kinds[3] = {QV_PROBE_EXACT, QV_PROBE_ONEHOT, QV_PROBE_RANDOM};
    c->probe = kinds[qv_rng_below(&st, 3)];
    c->e = r->experts;
    c->shared = r->shared;
    c->e_local = local_of(r, topk, c->logits, (int)qv_rng_below(&st, 2));
    c->data_seed = qv_splitmix64(&st);
}

/* ---- rows of a run ---------------------------------------------------------------------- */

int qv_moe_rows_match(const char *glob, const qv_backend *b, const qv_moe_row **out, int max)
{
    int n = 0;
    for (int i = 0; i < qv_moe_row_count() && n < max; i++) {
        const qv_moe_row *r = qv_moe_row_get(i);
        int runs = b->kind == QV_BACKEND_CPU || (b->kind == QV_BACKEND_GPU && r->gpu_kernel);
        /* a plugin: the routed rows it names */
        const int fn = b->kind == QV_BACKEND_HOST_FN || b->kind == QV_BACKEND_DEVICE_FN;
        for (int j = 0; fn && b->moe_launch && j < b->n_only && !runs; j++)
            runs = !strcmp(b->only[j], r->name);
        if (runs && (!glob || !*glob || fnmatch(glob, r->name, 0) == 0)) out[n++] = r;
    }
    return n;
}

/* ---- running one ------------------------------------------------------------------------ */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* What a GPU run of p showed into *why: a backend error (st), differing
 * bits between launches, or writes past the output; nothing when clean. */
static void gpu_why(qv_status st, const qv_gpu_moe_stats *gs, const qv_moe_problem *p, char *why, size_t len)
{
    if (st != QV_OK)
        snprintf(why, len, "backend error: %s", qv_errmsg());
    else if (gs->nondeterministic)
        snprintf(why, len, "nondeterministic: two identical launches differ%s at (%lld, %lld)",
                 gs->first_diff < 0 ? " in the routing" : "",
                 (long long)(gs->first_diff < 0 ? 0 : gs->first_diff / p->n),
                 (long long)(gs->first_diff < 0 ? 0 : gs->first_diff % p->n));
    else if (gs->guard_writes)
        snprintf(why, len, "%lld guard bytes written past the (%lld, %lld) output", (long long)gs->guard_writes,
                 (long long)p->t, (long long)p->n);
}

/* The case on the GPU: one launch at a time (b->launch_lock), b->repeat
 * launches compared bit for bit. *why receives a backend refusal or what
 * the launches showed (gpu_why). */
static qv_status run_gpu(const qv_backend *b, const qv_moe_problem *p, void *out, int32_t *ids, float *w, char *why,
                         size_t len)
{
    pthread_mutex_t *lock = b->launch_lock;
    qv_gpu_moe_stats gs;
    if (lock) pthread_mutex_lock(lock);
    qv_status st = qv_gpu_moe_run(p, b->opts, b->repeat > 1 ? b->repeat : 1, out, ids, w, NULL, &gs);
    if (lock) pthread_mutex_unlock(lock);
    if (st == QV_ERR_NODEVICE) return st;
    gpu_why(st, &gs, p, why, len);
    return QV_OK;
}

/* Fills p's (t, n) output with the poison code of its format. */
static void poison_out(const qv_moe_problem *p, void *out)
{
    const qv_fmt of = p->s->expert->ofmt;
    const uint32_t poison = ref_poison_code(of);
    const size_t es = qv_fmt_storage_bytes(of);
    for (int64_t i = 0; i < p->t * p->n; i++) memcpy((char *)out + (size_t)i * es, &poison, es);
}

/* The case on a plugin's routed launch: poisoned outputs, b->repeat launches
 * (one at a time) compared bit for bit, ids and weights included. */
static qv_status run_plugin(const qv_backend *b, const char *row, const qv_moe_problem *p, void *out, int32_t *ids,
                            float *w, char *why, size_t len)
{
    const qv_moe_spec *s = p->s;
    size_t ob = (size_t)(p->t * p->n) * qv_fmt_storage_bytes(s->expert->ofmt), nk = (size_t)(p->t * s->topk);
    int reps = b->repeat > 1 ? b->repeat : 1;
    void *first = malloc(ob + nk * (sizeof(int32_t) + sizeof(float)));
    if (!first) return qv_fail(QV_ERR_NOMEM, "out of memory for a routed case");
    for (int r = 0; r < reps && !why[0]; r++) {
        poison_out(p, out);
        for (size_t i = 0; i < nk; i++) ids[i] = -1, w[i] = NAN;
        const qv_moe_launch_args a = {.p = p, .out = out, .topk_ids = ids, .topk_weights = w};
        pthread_mutex_t *lock = b->launch_lock;
        if (lock) pthread_mutex_lock(lock);
        int rc = b->moe_launch(row, &a);
        if (lock) pthread_mutex_unlock(lock);
        if (rc) {
            snprintf(why, len, "backend error: plugin launch returned %d", rc);
            break;
        }
        char *f = first;
        if (r == 0) {
            memcpy(f, out, ob), memcpy(f + ob, ids, nk * sizeof(int32_t));
            memcpy(f + ob + nk * sizeof(int32_t), w, nk * sizeof(float));
        } else if (memcmp(f, out, ob) || memcmp(f + ob, ids, nk * sizeof(int32_t)) ||
                   memcmp(f + ob + nk * sizeof(int32_t), w, nk * sizeof(float))) {
            snprintf(why, len, "nondeterministic: two identical launches differ%s",
                     memcmp(f, out, ob) ? "" : " in the routing");
        }
    }
    free(first);
    return QV_OK;
}

/* The case on a device plugin's routed launch (qv_gpu_moe_run_ext): one
 * launch at a time, b->repeat launches compared bit for bit. */
static qv_status run_device_plugin(const qv_backend *b, const char *row, const qv_moe_problem *p, void *out,
                                   int32_t *ids, float *w, char *why, size_t len)
{
    pthread_mutex_t *lock = b->launch_lock;
    qv_gpu_moe_stats gs;
    int rc = 0;
    if (lock) pthread_mutex_lock(lock);
    qv_status st = qv_gpu_moe_run_ext(p, b->moe_launch, row, b->repeat > 1 ? b->repeat : 1, out, ids, w, &rc, &gs);
    if (lock) pthread_mutex_unlock(lock);
    if (st == QV_ERR_NODEVICE) return st;
    if (st == QV_OK && rc) snprintf(why, len, "backend error: plugin launch returned %d", rc);
    else gpu_why(st, &gs, p, why, len);
    return QV_OK;
}

/* Runs backend b on problem p of row `row` and grades it (qv_moe_case_run's
 * work on a made problem); with keep, *keep receives the output, ids and
 * weights (one buffer: out, then ids, then weights) for the caller to free. */
static qv_status run_problem(const qv_backend *b, const char *row, const qv_moe_problem *p, qv_moe_outcome *o,
                             void **keep)
{
    const qv_moe_spec *s = p->s;
    size_t es = qv_fmt_storage_bytes(s->expert->ofmt), ob = (size_t)(p->t * p->n) * es;
    size_t nk = (size_t)(p->t * s->topk);
    char *buf = malloc(ob + nk * (sizeof(int32_t) + sizeof(float)));
    if (!buf) return qv_fail(QV_ERR_NOMEM, "out of memory for a routed case");
    void *out = buf;
    int32_t *ids = (int32_t *)(buf + ob);
    float *w = (float *)(buf + ob + nk * sizeof(int32_t));
    char why[sizeof o->res.out.reason] = "";
    qv_status st = QV_OK;
    if (b->kind == QV_BACKEND_GPU) {
        st = run_gpu(b, p, out, ids, w, why, sizeof why);
    } else if (b->kind == QV_BACKEND_HOST_FN) {
        st = run_plugin(b, row, p, out, ids, w, why, sizeof why);
    } else if (b->kind == QV_BACKEND_DEVICE_FN) {
        st = run_device_plugin(b, row, p, out, ids, w, why, sizeof why);
    } else {
        poison_out(p, out);
        st = ref_moe_model_run(p, 16, out, ids, w);
    }
    if (st == QV_OK && !strncmp(why, "backend error", 13)) {
        o->res.out.grade = QV_FAIL;
        o->res.out.n_elements = p->t * p->n;
        o->res.out.worst_m = o->res.out.worst_n = -1;
        o->res.first_bad_token = -1;
    } else if (st == QV_OK) {
        st = ref_moe_verify(p, out, ids, w, &o->res);
    }
    if (st == QV_OK && why[0]) {
        o->res.out.grade = QV_FAIL;
        snprintf(o->res.out.reason, sizeof o->res.out.reason, "%s", why);
    }
    if (st == QV_OK) o->out_hash = qv_fnv1a64(out, ob);
    if (st == QV_OK && keep) *keep = buf;
    else free(buf);
    return st;
}

/* The case's problem, made and filled from its seeds. */
static qv_status make_problem(const qv_moe_case *c, qv_moe_problem *p)
{
    const qv_moe_spec *s;
    QV_TRY(qv_moe_row_spec(c->row, &s));
    QV_TRY(qv_moe_problem_create(p, s, c->t, c->n, c->k, c->e, c->e_local, c->shared));
    qv_status st = ref_moe_fill(p, c->logits, c->probe, QV_REGIME_LOGUNIFORM, c->data_seed);
    if (st != QV_OK) qv_moe_problem_destroy(p);
    return st;
}

qv_status qv_moe_case_run(const qv_backend *b, const qv_moe_case *c, qv_moe_outcome *o)
{
    memset(o, 0, sizeof *o);
    double t0 = now_ms();
    qv_moe_problem p;
    QV_TRY(make_problem(c, &p));
    qv_status st = run_problem(b, c->row->name, &p, o, NULL);
    qv_moe_problem_destroy(&p);
    o->st = st;
    o->time_ms = now_ms() - t0;
    return st;
}

/* ---- a failure's inputs -------------------------------------------------------------------- */

/* dir/name.npy of shape dims[0..nd) and element type dt (data borrowed). */
static qv_status save_npy(const char *dir, const char *name, qv_dtype dt, int nd, const int64_t *dims,
                          const void *data)
{
    if (!data) return QV_OK;
    qv_array a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    a.ndim = nd;
    a.count = 1;
    for (int i = 0; i < nd; i++) a.shape[i] = dims[i], a.count *= dims[i];
    a.nbytes = (size_t)a.count * qv_dtype_size(dt);
    a.data = (void *)data;
    a.borrowed = 1;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    return qv_npy_save(path, &a);
}

/* Which expert buffer a stacked array holds; decoded float buffers are
 * written as codes of their format again (exact: they were decoded from it). */
typedef enum { SK_Q, SK_SCALES, SK_SCALES2, SK_ZEROS, SK_ZEROS_F, SK_BIAS, SK_GIDX } stack_kind;

/* The experts' buffers of kind sk stacked as (X, rows, cols), saved as name. */
static qv_status save_stack(const char *dir, const char *name, const qv_moe_problem *p, stack_kind sk, qv_fmt f,
                            int64_t rows, int64_t cols)
{
    const qv_problem *w0 = &p->w[0];
    const void *first = sk == SK_Q ? w0->q : sk == SK_SCALES ? w0->scales : sk == SK_SCALES2 ? (const void *)w0->scales2
                      : sk == SK_ZEROS ? (const void *)w0->zeros : sk == SK_ZEROS_F ? (const void *)w0->zeros_f
                      : sk == SK_BIAS ? (const void *)w0->bias : (const void *)w0->g_idx;
    if (!first || rows * cols == 0) return QV_OK;
    int x = p->e_local + p->shared;
    qv_dtype dt = sk == SK_GIDX ? QV_DT_I4 : qv_dump_dtype(f);
    size_t es = qv_dtype_size(dt), len = (size_t)(rows * cols);
    unsigned char *buf = malloc((size_t)x * len * es);
    if (!buf) return qv_fail(QV_ERR_NOMEM, "out of memory dumping %s", name);
    for (int e = 0; e < x; e++) {
        const qv_problem *w = &p->w[e];
        unsigned char *dst = buf + (size_t)e * len * es;
        const float *vals = sk == SK_SCALES2 ? w->scales2 : sk == SK_ZEROS_F ? w->zeros_f : sk == SK_BIAS ? w->bias : NULL;
        if (vals) {
            for (size_t i = 0; i < len; i++) {
                uint32_t code = 0;
                if (f == QV_FMT_F32) memcpy(&code, &vals[i], 4);
                else code = qv_encode(f, vals[i], QV_SAT_NONE);
                memcpy(dst + i * es, &code, es);
            }
        } else {
            memcpy(dst, sk == SK_Q ? w->q : sk == SK_SCALES ? w->scales : sk == SK_ZEROS ? (void *)w->zeros
                                                                                  : (void *)w->g_idx,
                   len * es);
        }
    }
    /* g_idx is (X, K), as `qvet verify` reads it; the others (X, rows, cols) */
    const int64_t dims[3] = {x, sk == SK_GIDX ? cols : rows, cols};
    qv_status st = save_npy(dir, name, dt, sk == SK_GIDX ? 2 : 3, dims, buf);
    free(buf);
    return st;
}

/* Writes problem p, its output and the kernel's ids and weights (kept by
 * run_problem) as the .npy files `qvet verify --spec ROUTED` reads, its spec
 * and a replay.txt with that command and the case's replay command. */
static qv_status dump_problem(const qv_moe_problem *p, const void *kept, const char *dir, const char *head,
                              const char *replay)
{
    const qv_moe_spec *s = p->s;
    const qv_variant *v = s->expert;
    const qv_problem *w0 = &p->w[0];
    QV_TRY(qv_mkdirs(dir));
    size_t ob = (size_t)(p->t * p->n) * qv_fmt_storage_bytes(v->ofmt), nk = (size_t)(p->t * s->topk);
    const char *out = kept;
    const int32_t *ids = (const int32_t *)(out + ob);
    const float *w = (const float *)(out + ob + nk * sizeof(int32_t));
    qv_status st = QV_OK;
#define SAVE(name, dt, nd, ...)                                                                        \
    do {                                                                                               \
        const int64_t d_[] = {__VA_ARGS__};                                                            \
        if (st == QV_OK) st = save_npy(dir, #name, dt, nd, d_, name##_data);                            \
    } while (0)
    const void *a_data = p->a, *logits_data = p->logits, *expert_map_data = p->expert_map;
    const void *score_bias_data = p->score_bias, *shared_gate_data = p->shared_gate, *out_data = out;
    const void *ids_data = ids, *weights_data = w, *azp_data = p->azp, *a_scale_data = p->a_scale;
    SAVE(a, qv_dump_dtype(v->afmt), 2, p->t, p->k);
    SAVE(logits, qv_dump_dtype(s->logit_fmt), 2, p->t, p->e);
    SAVE(expert_map, QV_DT_I4, 1, p->e);
    SAVE(score_bias, QV_DT_F4, 1, p->e);
    SAVE(shared_gate, qv_dump_dtype(v->afmt), 2, p->shared, p->k);
    SAVE(out, qv_dump_dtype(v->ofmt), 2, p->t, p->n);
    SAVE(ids, QV_DT_I4, 2, p->t, s->topk);
    SAVE(weights, QV_DT_F4, 2, p->t, s->topk);
    SAVE(azp, QV_DT_I4, 1, v->azp == QV_AZP_TOKEN ? p->t : 1);
    if (v->act_scale == QV_ASCALE_TOKEN_BLOCK) SAVE(a_scale, QV_DT_F4, 2, (p->k + 127) / 128, p->t);
    else if (v->act_scale == QV_ASCALE_TOKEN) SAVE(a_scale, QV_DT_F4, 2, p->t, 1);
    else SAVE(a_scale, QV_DT_F4, 1, 1);
#undef SAVE
    int64_t zr = qv_problem_zero_rows(w0), zc = qv_problem_zero_cols(w0);
    if (st == QV_OK) st = save_stack(dir, "q", p, SK_Q, v->wfmt, p->k, p->n);
    if (st == QV_OK)
        st = save_stack(dir, "scales", p, SK_SCALES, v->sfmt, qv_problem_scale_rows(w0), qv_problem_scale_cols(w0));
    if (st == QV_OK) st = save_stack(dir, "scales2", p, SK_SCALES2, v->s2fmt, 1, qv_problem_scale2_count(w0));
    if (st == QV_OK) st = save_stack(dir, "zeros", p, SK_ZEROS, v->wfmt, zr, zc);
    if (st == QV_OK) st = save_stack(dir, "zeros", p, SK_ZEROS_F, v->sfmt, zr, zc);
    if (st == QV_OK) st = save_stack(dir, "bias", p, SK_BIAS, v->bias_fmt, 1, p->n);
    if (st == QV_OK) st = save_stack(dir, "g_idx", p, SK_GIDX, QV_FMT_NONE, 1, p->k);
    char path[1200];
    snprintf(path, sizeof path, "%s/spec", dir);
    FILE *f = st == QV_OK ? fopen(path, "w") : NULL;
    if (st == QV_OK && !f) st = qv_fail(QV_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (f && ((fprintf(f, "%s\n", s->text) < 0) | fclose(f))) st = qv_fail(QV_ERR_IO, "cannot write %s", path);
    snprintf(path, sizeof path, "%s/replay.txt", dir);
    f = st == QV_OK ? fopen(path, "w") : NULL;
    if (st == QV_OK && !f) st = qv_fail(QV_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (f) {
        fprintf(f, "# %s\n# the original case:\n%s\n# these inputs and this output against the routed spec:\n", head,
                replay);
        /* a routed spec never holds a single quote */
        fprintf(f, "qvet verify --spec '%s' --a %s/a.npy --logits %s/logits.npy --expert-map %s/expert_map.npy",
                s->text, dir, dir, dir);
        if (p->shared) fprintf(f, " --shared %d", p->shared);
        if (p->shared_gate) fprintf(f, " --shared-gate %s/shared_gate.npy", dir);
        if (p->score_bias) fprintf(f, " --score-bias %s/score_bias.npy", dir);
        if (p->a_scale) fprintf(f, " --a-scale %s/a_scale.npy", dir);
        if (p->azp) fprintf(f, " --azp %s/azp.npy", dir);
        fprintf(f, " --q %s/q.npy", dir);
        if (w0->scales) fprintf(f, " --scales %s/scales.npy", dir);
        if (w0->scales2) fprintf(f, " --scales2 %s/scales2.npy", dir);
        if (w0->zeros || w0->zeros_f) fprintf(f, " --zeros %s/zeros.npy", dir);
        if (w0->bias) fprintf(f, " --bias %s/bias.npy", dir);
        if (w0->g_idx) fprintf(f, " --g-idx %s/g_idx.npy", dir);
        fprintf(f, " --ids %s/ids.npy --weights %s/weights.npy --out %s/out.npy\n", dir, dir, dir);
        if (fclose(f)) st = qv_fail(QV_ERR_IO, "cannot write %s", path);
    }
    return st;
}

qv_status qv_moe_case_dump(const qv_backend *b, const qv_moe_case *c, int shrink, const char *dir, const char *replay,
                           int64_t *token)
{
    *token = -1;
    qv_moe_problem p;
    QV_TRY(make_problem(c, &p));
    qv_moe_outcome o;
    memset(&o, 0, sizeof o);
    void *kept = NULL;
    qv_status st = run_problem(b, c->row->name, &p, &o, &kept);
    char head[600];
    snprintf(head, sizeof head, "%s t=%lld n=%lld k=%lld on %s: %s: %s", c->row->name, (long long)p.t,
             (long long)p.n, (long long)p.k, b->name, qv_grade_name(o.res.out.grade), o.res.out.reason);
    /* the failing token alone, when it fails alone: the routing's first bad
     * token, else the worst element's */
    int64_t t0 = o.res.first_bad_token >= 0 ? o.res.first_bad_token : o.res.out.worst_m;
    if (st == QV_OK && shrink && o.res.out.grade == QV_FAIL && p.t > 1 && t0 >= 0 && t0 < p.t) {
        qv_moe_problem q;
        if (qv_moe_problem_token(&p, t0, &q) == QV_OK) {
            qv_moe_outcome o1;
            memset(&o1, 0, sizeof o1);
            void *kept1 = NULL;
            if (run_problem(b, c->row->name, &q, &o1, &kept1) == QV_OK && o1.res.out.grade == QV_FAIL) {
                snprintf(head, sizeof head, "%s token %lld of %lld alone, n=%lld k=%lld on %s: %s: %s", c->row->name,
                         (long long)t0, (long long)p.t, (long long)q.n, (long long)q.k, b->name,
                         qv_grade_name(o1.res.out.grade), o1.res.out.reason);
                st = dump_problem(&q, kept1, dir, head, replay);
                *token = t0;
                free(kept1);
                qv_moe_problem_destroy(&q);
                free(kept);
                qv_moe_problem_destroy(&p);
                return st;
            }
            free(kept1);
            qv_moe_problem_destroy(&q);
        }
    }
    if (st == QV_OK) st = dump_problem(&p, kept, dir, head, replay);
    free(kept);
    qv_moe_problem_destroy(&p);
    return st;
}

void qv_moe_case_replay_cmd(const qv_moe_case *c, const qv_backend *b, char *buf, size_t len)
{
    if (b->plugin_path[0])
        snprintf(buf, len, "qvet replay%s --seed %llu --case %lld --variant %s --plugin %s", c->suite ? " --check" : "",
                 (unsigned long long)c->seed, (long long)c->index, c->row->name, b->plugin_path);
    else
        snprintf(buf, len, "qvet replay%s --seed %llu --case %lld --variant %s --%s", c->suite ? " --check" : "",
                 (unsigned long long)c->seed, (long long)c->index, c->row->name,
                 b->kind == QV_BACKEND_GPU ? "gpu" : "cpu");
}

void qv_moe_case_json(FILE *f, const qv_moe_case *c, const qv_backend *b, const qv_moe_outcome *o)
{
    const qv_moe_spec *s = NULL;
    qv_moe_row_spec(c->row, &s);
    fprintf(f, "{\"kind\":\"routed\",\"seed\":%llu,\"case\":%lld,\"suite\":", (unsigned long long)c->seed,
            (long long)c->index);
    qv_json_fput_str(f, c->suite ? "check" : "fuzz");
    fputs(",\"variant\":", f);
    qv_json_fput_str(f, c->row->name);
    fputs(",\"spec\":", f);
    qv_json_fput_str(f, s ? s->text : c->row->spec);
    fputs(",\"backend\":", f);
    qv_json_fput_str(f, b->name);
    fprintf(f, ",\"t\":%lld,\"n\":%lld,\"k\":%lld,\"experts\":%d,\"local\":%d,\"shared\":%d", (long long)c->t,
            (long long)c->n, (long long)c->k, c->e, c->e_local, c->shared);
    fputs(",\"logits\":", f);
    qv_json_fput_str(f, qv_moe_logits_name(c->logits));
    fputs(",\"probe\":", f);
    qv_json_fput_str(f, qv_probe_name(c->probe));
    fprintf(f, ",\"route_bad\":%lld,\"weight_bad\":%lld,\"ambiguous\":%lld,", (long long)o->res.n_route_bad,
            (long long)o->res.n_weight_bad, (long long)o->res.n_ambiguous);
    qv_result_json_fields(f, &o->res.out);
    fputs(",\"time_ms\":", f);
    qv_json_fput_num(f, o->time_ms);
    fprintf(f, ",\"out_fnv1a64\":\"%016llx\"", (unsigned long long)o->out_hash);
    char replay[512];
    qv_moe_case_replay_cmd(c, b, replay, sizeof replay);
    fputs(",\"replay\":", f);
    qv_json_fput_str(f, replay);
    fputs("}\n", f);
}
