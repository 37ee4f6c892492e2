/* moe_cases.c: routed cases of the campaign (campaign.h): the fixed suite of a
 * routed row, generated cases, running one (CPU model or GPU kernels), and
 * its JSONL line. Like a GEMM case, a routed case is a pure function of (seed, index)
 * (or (seed, row, suite index)); the row of a generated case is drawn from
 * its own stream, so naming that row alone replays the case. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>

#include "internal/campaign.h"
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
        for (int j = 0; b->kind == QV_BACKEND_HOST_FN && b->moe_launch && j < b->n_only && !runs; j++)
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

/* The case on the GPU: one launch at a time (b->launch_lock), b->repeat
 * launches compared bit for bit. *why receives a backend refusal or what
 * the launches showed (differing bits, writes past the output). */
static qv_status run_gpu(const qv_backend *b, const qv_moe_problem *p, void *out, int32_t *ids, float *w, char *why,
                         size_t len)
{
    pthread_mutex_t *lock = b->launch_lock;
    qv_gpu_moe_stats gs;
    if (lock) pthread_mutex_lock(lock);
    qv_status st = qv_gpu_moe_run(p, b->opts, b->repeat > 1 ? b->repeat : 1, out, ids, w, NULL, &gs);
    if (lock) pthread_mutex_unlock(lock);
    if (st == QV_ERR_NODEVICE) return st;
    if (st != QV_OK)
        snprintf(why, len, "backend error: %s", qv_errmsg());
    else if (gs.nondeterministic)
        snprintf(why, len, "nondeterministic: two identical launches differ%s at (%lld, %lld)",
                 gs.first_diff < 0 ? " in the routing" : "", (long long)(gs.first_diff < 0 ? 0 : gs.first_diff / p->n),
                 (long long)(gs.first_diff < 0 ? 0 : gs.first_diff % p->n));
    else if (gs.guard_writes)
        snprintf(why, len, "%lld guard bytes written past the (%lld, %lld) output", (long long)gs.guard_writes,
                 (long long)p->t, (long long)p->n);
    return QV_OK;
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
    uint32_t poison = ref_poison_code(s->expert->ofmt);
    size_t es = qv_fmt_storage_bytes(s->expert->ofmt);
    for (int r = 0; r < reps && !why[0]; r++) {
        for (int64_t i = 0; i < p->t * p->n; i++) memcpy((char *)out + (size_t)i * es, &poison, es);
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

qv_status qv_moe_case_run(const qv_backend *b, const qv_moe_case *c, qv_moe_outcome *o)
{
    memset(o, 0, sizeof *o);
    double t0 = now_ms();
    const qv_moe_spec *s;
    QV_TRY(qv_moe_row_spec(c->row, &s));
    qv_moe_problem p;
    QV_TRY(qv_moe_problem_create(&p, s, c->t, c->n, c->k, c->e, c->e_local, c->shared));
    qv_status st = ref_moe_fill(&p, c->logits, c->probe, QV_REGIME_LOGUNIFORM, c->data_seed);
    size_t es = qv_fmt_storage_bytes(s->expert->ofmt);
    void *out = malloc((size_t)(c->t * c->n) * es);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(c->t * s->topk));
    float *w = malloc(sizeof(float) * (size_t)(c->t * s->topk));
    char why[sizeof o->res.out.reason] = "";
    if (st == QV_OK && (!out || !ids || !w)) st = qv_fail(QV_ERR_NOMEM, "out of memory for a routed case");
    if (st == QV_OK && b->kind == QV_BACKEND_GPU) {
        st = run_gpu(b, &p, out, ids, w, why, sizeof why);
    } else if (st == QV_OK && b->kind == QV_BACKEND_HOST_FN) {
        st = run_plugin(b, c->row->name, &p, out, ids, w, why, sizeof why);
    } else if (st == QV_OK) {
        uint32_t poison = ref_poison_code(s->expert->ofmt);
        for (int64_t i = 0; i < c->t * c->n; i++) memcpy((char *)out + (size_t)i * es, &poison, es);
        st = ref_moe_model_run(&p, 16, out, ids, w);
    }
    if (st == QV_OK && !strncmp(why, "backend error", 13)) {
        o->res.out.grade = QV_FAIL;
        o->res.out.n_elements = c->t * c->n;
        o->res.out.worst_m = o->res.out.worst_n = -1;
        o->res.first_bad_token = -1;
    } else if (st == QV_OK) {
        st = ref_moe_verify(&p, out, ids, w, &o->res);
    }
    if (st == QV_OK && why[0]) {
        o->res.out.grade = QV_FAIL;
        snprintf(o->res.out.reason, sizeof o->res.out.reason, "%s", why);
    }
    if (st == QV_OK) o->out_hash = qv_fnv1a64(out, (size_t)(c->t * c->n) * es);
    free(out), free(ids), free(w);
    qv_moe_problem_destroy(&p);
    o->st = st;
    o->time_ms = now_ms() - t0;
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
