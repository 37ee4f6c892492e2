/* gpu.c: gpu.h. */
#include "support/gpu.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "internal/gpu.h"
#include "internal/launch_env.h"
#include "qvet/reference.h"
#include "support/golden.h"

/* ---- the suite ------------------------------------------------------------ */

/* The suite's base launch options (gpu_suite_start). */
static qv_launch_opts g_env_opts;

int gpu_suite_start(uint64_t *seed)
{
    const char *env = getenv("QVET_SEED");
    if (env && *env) *seed = strtoull(env, NULL, 0);
    if (qv_launch_env_read(&g_env_opts) != QV_OK) {
        fprintf(stderr, "%s\n", qv_errmsg());
        exit(2);
    }
    const int gpu = (access("/dev/nvidia0", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0) &&
                    qv_gpu_info_get(NULL);
    if (!gpu) printf("SKIP: no CUDA device\n");
    return gpu;
}

Suite *gpu_suite_create(const char *name, int gpu, uint64_t seed, int rows, TCase **tc)
{
    if (gpu) printf("t_%s: seed %" PRIu64 " (QVET_SEED=%" PRIu64 " replays), %d rows\n", name, seed, seed, rows);
    Suite *s = suite_create(name);
    *tc = tcase_create("gpu");
    /* One loop test covers a whole row: far longer than Check's 4 s default. */
    tcase_set_timeout(*tc, 600);
    suite_add_tcase(s, *tc);
    return s;
}

int gpu_suite_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

qv_launch_opts gpu_opts(const qv_launch_opts *over)
{
    qv_launch_opts o = g_env_opts;
    if (over) qv_launch_opts_overlay(&o, over);
    return o;
}

int gpu_env_flag(const char *name)
{
    const char *env = getenv(name);
    return env && *env && strcmp(env, "0") != 0;
}

int gpu_registry_rows(int (*keep)(const qv_variant *v), int *rows, int cap)
{
    int n = 0;
    for (int i = 0; i < qv_registry_count() && n < cap; i++) {
        const qv_variant *v = qv_registry_get(i);
        if (v->gpu_kernel && keep(v)) rows[n++] = i;
    }
    return n;
}

const int gpu_edge_m[GPU_N_EDGE_M] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257};

/* ---- problems, device buffers and runs ----------------------------------------- */

qv_gemm_args gpu_placeholder_args(int m, int n, int k)
{
    static char placeholder[16];
    qv_gemm_args a;
    memset(&a, 0, sizeof a);
    a.m = m, a.n = n, a.k = k;
    a.a = a.b = a.scales = placeholder;
    a.a_scale = (const float *)placeholder;
    a.c = placeholder;
    return a;
}

void gpu_problem_probe(qv_problem *p, const qv_variant *v, int64_t m, int64_t n, int64_t k, qv_probe_kind probe,
                       qv_regime regime, uint64_t seed, char *label, size_t cap)
{
    ck_assert_msg(qv_problem_create(p, v, m, n, k) == QV_OK, "%s: %s", v->name, qv_errmsg());
    snprintf(label, cap, "%s m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " %s/%s seed=%" PRIu64, v->name, m, n, k,
             qv_probe_name(probe), qv_regime_name(regime), seed);
    ck_assert_msg(ref_probe_fill(p, probe, regime, seed) == QV_OK, "%s: probe fill: %s", label, qv_errmsg());
}


void gpu_problem_load(const qv_problem *p, const qv_launch_opts *opts, qv_packed *pk, qv_gpu_problem *gp,
                      const char *label)
{
    ck_assert_msg(qv_pack(p, pk) == QV_OK, "%s: pack: %s", label, qv_errmsg());
    ck_assert_msg(qv_gpu_problem_upload(p, pk, opts, gp) == QV_OK, "%s: upload: %s", label, qv_errmsg());
}

void gpu_problem_unload(qv_packed *pk, qv_gpu_problem *gp)
{
    qv_gpu_problem_free(gp);
    qv_packed_destroy(pk);
}

void *gpu_dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, bytes), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

void gpu_run_twice(const qv_problem *p, const qv_launch_opts *opts, void *out, const char *label, const char *path)
{
    gpu_run_twice_with(p, NULL, opts, out, label, path);
}

void gpu_run_twice_with(const qv_problem *p, qv_launch_fn launch, const qv_launch_opts *opts, void *out,
                        const char *label, const char *path)
{
    char where[256];
    if (path)
        snprintf(where, sizeof where, "%s [%s]", label, path);
    else
        snprintf(where, sizeof where, "%s", label);
    qv_gpu_stats st;
    const qv_status s = qv_gpu_run(p, launch, opts, 2, out, &st);
    ck_assert_msg(s == QV_OK, "%s: qv_gpu_run: %s", where, qv_errmsg());
    ck_assert_msg(!st.nondeterministic, "%s: two launches differ, first at element %" PRId64, where, st.first_diff);
    ck_assert_msg(st.guard_writes == 0, "%s: %" PRId64 " bytes written past the output", where, st.guard_writes);
}

/* (support/gpu.h) The scratch buffer grows as cases need and is kept. */
#define OFF4_GUARD 2048 /* 16-bit codes of guard */

static void *g_off4;
static size_t g_off4_bytes;

qv_status gpu_launch_c_off4(const qv_variant *v, const qv_gemm_args *args)
{
    if (qv_fmt_storage_bytes(v->ofmt) != 2)
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: the 4-byte offset output takes 16-bit output codes", v->name);
    const size_t count = (size_t)args->m * (size_t)args->n, need = 16 + (count + OFF4_GUARD) * 2;
    if (need > g_off4_bytes) {
        if (g_off4) QV_CUDA_TRY(cudaFree(g_off4), "cudaFree");
        g_off4 = NULL, g_off4_bytes = 0;
        QV_CUDA_TRY(cudaMalloc(&g_off4, need), "cudaMalloc (4-byte offset output)");
        g_off4_bytes = need;
    }
    uint16_t *c4 = (uint16_t *)((char *)g_off4 + 4);
    QV_TRY(qv_gpu_poison(c4, v->ofmt, (int64_t)(count + OFF4_GUARD), NULL));
    qv_gemm_args a = *args;
    a.c = c4;
    QV_TRY(qv_gpu_launch(v, &a));
    QV_CUDA_TRY(cudaGetLastError(), "kernel launch");
    QV_CUDA_TRY(cudaDeviceSynchronize(), "kernel execution");
    QV_CUDA_TRY(cudaMemcpy(args->c, c4, count * 2, cudaMemcpyDeviceToDevice), "cudaMemcpy (output back)");
    static uint16_t guard[OFF4_GUARD];
    QV_CUDA_TRY(cudaMemcpy(guard, c4 + count, sizeof guard, cudaMemcpyDeviceToHost), "cudaMemcpy (guard)");
    const uint16_t code = (uint16_t)ref_poison_code(v->ofmt);
    for (int i = 0; i < OFF4_GUARD; i++)
        if (guard[i] != code) return qv_fail(QV_ERR_RANGE, "the guard after a 4-byte offset output: code %d past it was written", i);
    return QV_OK;
}

int gpu_verdict(const qv_problem *p, qv_probe_kind probe, const void *out, const char *label, const char *path)
{
    char where[256];
    if (path)
        snprintf(where, sizeof where, "%s [%s]", label, path);
    else
        snprintf(where, sizeof where, "%s", label);
    int ok = 1;
    qv_result r;
    if (ref_probe_is_unique(probe) || p->v->arith.accum == QV_ACC_INT32) {
        void *model = malloc((size_t)qv_problem_out_bytes(p));
        ck_assert_ptr_nonnull(model);
        ck_assert_msg(ref_model_run(p, model) == QV_OK, "%s: model: %s", label, qv_errmsg());
        ref_verify_bitexact(p, model, out, &r);
        free(model);
        if (r.grade != QV_PASS) {
            fprintf(stderr, "FAIL %s (bit-exact vs model): %s\n", where, r.reason);
            ok = 0;
        }
    }
    if (!ref_probe_is_unique(probe)) {
        ref_truth t;
        ck_assert_msg(ref_truth_compute(p, &t) == QV_OK, "%s: truth: %s", label, qv_errmsg());
        ref_verify(p, &t, out, &r);
        ref_truth_clear(&t);
        if (r.grade == QV_FAIL) {
            fprintf(stderr, "FAIL %s (truth): %s\n", where, r.reason);
            ok = 0;
        }
    }
    return ok;
}

/* ---- the published QQQ vectors ---------------------------------------------- */

static int int_cmp(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void gpu_qqq_golden_open(gpu_qqq_golden *gq, const char *name)
{
    memset(gq, 0, sizeof *gq);
    gq->name = name;
    gq->group = strstr(name, "g128") != NULL;
    gq->v = qv_variant_find(gq->group ? "qqq-w4a8-g128" : "qqq-w4a8-ch");
    ck_assert_ptr_nonnull(gq->v);
    golden_load(name, "B_packed_int32", &gq->b);
    golden_load(name, "s_channel_packed_f32", &gq->s_ch);
    if (gq->group) golden_load(name, "s_group_packed_f16", &gq->s_g);
    /* B: one row of int32 words per 16 K, two words per column (QQQ layout). */
    gq->k = (int)gq->b.shape[0] * 16;
    gq->n = (int)gq->b.shape[1] / 2;
    gq->g = gq->group ? gq->k / (int)gq->s_g.shape[0] : 0;

    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", golden_root(), name);
    DIR *dd = opendir(dir);
    ck_assert_msg(dd != NULL, "%s: cannot open the golden folder", dir);
    const struct dirent *de;
    while ((de = readdir(dd))) {
        int m;
        if (sscanf(de->d_name, "A_m%d_int8.npy", &m) != 1) continue;
        ck_assert_msg(gq->n_ms < (int)(sizeof gq->ms / sizeof gq->ms[0]), "%s: too many A_m*_int8.npy", dir);
        gq->ms[gq->n_ms++] = m;
    }
    closedir(dd);
    ck_assert_msg(gq->n_ms > 0, "%s: no A_m*_int8.npy found", dir);
    qsort(gq->ms, (size_t)gq->n_ms, sizeof gq->ms[0], int_cmp);
}

void gpu_qqq_golden_close(gpu_qqq_golden *gq)
{
    qv_array_destroy(&gq->b);
    qv_array_destroy(&gq->s_ch);
    if (gq->group) qv_array_destroy(&gq->s_g);
}

void gpu_qqq_case_load(const gpu_qqq_golden *gq, int m, const qv_launch_opts *opts, gpu_qqq_case *c)
{
    memset(c, 0, sizeof *c);
    c->m = m;
    c->opts = gpu_opts(opts);
    char name[64];
    snprintf(name, sizeof name, "A_m%d_int8", m);
    golden_load(gq->name, name, &c->a);
    snprintf(name, sizeof name, "s_token_m%d_f32", m);
    golden_load(gq->name, name, &c->s_tok);
    snprintf(name, sizeof name, "D_qqq_kernel_m%d_f16", m);
    golden_load(gq->name, name, &c->d);
    ck_assert_int_eq((int)c->a.shape[0], m);
    ck_assert_int_eq((int)c->a.shape[1], gq->k);

    qv_gemm_args *ga = &c->ga;
    ga->m = m;
    ga->n = gq->n;
    ga->k = gq->k;
    ga->g = gq->g;
    ga->a = gpu_dev_copy(c->a.data, c->a.nbytes);
    ga->a_scale = gpu_dev_copy(c->s_tok.data, c->s_tok.nbytes);
    ga->b = gpu_dev_copy(gq->b.data, gq->b.nbytes);
    /* Grouped rows take the f16 group scales first and the channel scales
     * second (gemm.h); channelwise rows the channel scales alone. */
    ga->scales = gpu_dev_copy(gq->group ? gq->s_g.data : gq->s_ch.data, gq->group ? gq->s_g.nbytes : gq->s_ch.nbytes);
    ga->scales2 = gq->group ? gpu_dev_copy(gq->s_ch.data, gq->s_ch.nbytes) : NULL;
    ck_assert_int_eq(cudaMalloc(&ga->c, sizeof(uint16_t) * (size_t)m * (size_t)gq->n), cudaSuccess);
    ga->opts = &c->opts;
    ga->workspace_bytes = qv_gpu_workspace(gq->v, m, gq->n, gq->k, ga->opts);
    if (ga->workspace_bytes) {
        /* gemm.h: the caller zeroes the workspace once (split-K counters). */
        ck_assert_int_eq(cudaMalloc(&ga->workspace, ga->workspace_bytes), cudaSuccess);
        ck_assert_int_eq(cudaMemset(ga->workspace, 0, ga->workspace_bytes), cudaSuccess);
    }
}

void gpu_qqq_case_free(gpu_qqq_case *c)
{
    cudaFree((void *)c->ga.a);
    cudaFree((void *)c->ga.a_scale);
    cudaFree((void *)c->ga.b);
    cudaFree((void *)c->ga.scales);
    cudaFree((void *)c->ga.scales2);
    cudaFree(c->ga.c);
    cudaFree(c->ga.workspace);
    qv_array_destroy(&c->a);
    qv_array_destroy(&c->s_tok);
    qv_array_destroy(&c->d);
}

void gpu_qqq_case_launch(const gpu_qqq_golden *gq, gpu_qqq_case *c, uint16_t *out)
{
    const int64_t count = (int64_t)c->m * gq->n;
    ck_assert(qv_gpu_poison(c->ga.c, QV_FMT_F16, count, NULL) == QV_OK);
    ck_assert_msg(qv_gpu_launch(gq->v, &c->ga) == QV_OK, "%s m=%d: %s", gq->name, c->m, qv_errmsg());
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(out, c->ga.c, sizeof(uint16_t) * (size_t)count, cudaMemcpyDeviceToHost),
                     cudaSuccess);
}

void gpu_qqq_case_assert(const gpu_qqq_golden *gq, const gpu_qqq_case *c, const uint16_t *out, const char *what)
{
    const uint16_t *dq = c->d.data;
    const int n = gq->n;
    int64_t bad = 0, first = -1;
    for (int64_t e = 0; e < (int64_t)c->m * n; e++)
        if (out[e] != dq[e] && bad++ == 0) first = e;
    ck_assert_msg(bad == 0,
                  "%s m=%d%s: %" PRId64 " elements differ from the real QQQ kernel, first (%" PRId64 ", %" PRId64
                  "): ours 0x%04x, QQQ 0x%04x",
                  gq->name, c->m, what, bad, first < 0 ? 0 : first / n, first < 0 ? 0 : first % n,
                  first < 0 ? 0 : out[first], first < 0 ? 0 : dq[first]);
}
