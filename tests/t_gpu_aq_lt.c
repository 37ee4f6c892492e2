/* t_gpu_aq_lt.c: the large-M path of the integer activation-quantized rows
 * (QQQ W4A8 channelwise and per group, W8A8 int8 with and without activation
 * zero point): cuBLASLt int8 IGMMA into int32, then the mma kernel's own fp32
 * epilogue (kernels/aq_lt.cu).
 *
 * Witnesses, none of them the path's own output:
 *  - every integer row of family "qqq" or "w8a8", over M below, at and above
 *    the default threshold, N with a short last chunk and K with a 16-wide
 *    tail: the same packed inputs through the mma kernel (QVET_AQ_LT_MIN_M set
 *    past M), through cuBLASLt in one N chunk and in several (QVET_AQ_LT_MIN_M
 *    = 1, QVET_AQ_LT_CHUNK_MB small), each launched twice; the three outputs
 *    must be bitwise equal (int32 accumulation is exact, the epilogue is the
 *    same fp32 sequence), equal to the CPU model bit for bit, and the
 *    path counter (qv_aq_lt_runs) must show which path ran;
 *  - the published QQQ vectors in ../shared/golden (QVET_GOLDEN overrides the
 *    folder) forced through cuBLASLt (their M is at most 33): the real QQQ
 *    kernel's D bit for bit;
 *  - a malformed QVET_AQ_LT_MIN_M or QVET_AQ_LT_CHUNK_MB is refused with a
 *    status before any CUDA call.
 * Without a CUDA device the suite prints exactly "SKIP: no CUDA device" and
 * runs only the refusal checks. QVET_AQ_QUICK=1 keeps one shape per row (the
 * compute-sanitizer run). Random cases come from (seed, index); the seed is
 * printed and QVET_SEED=<seed> replays it. */
#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "qvet/aq.h"
#include "qvet/array.h"
#include "qvet/gemm.h"
#include "qvet/gpu.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/variant.h"
#include "support/golden.h"

static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */
/* QVET_AQ_QUICK=1: one shape per row (M = 129) and the goldens: the run under
 * compute-sanitizer. */
static int g_quick;

static int g_rows[64];
static int g_nrows;

/* The integer rows: QQQ, and W8A8 with int8 weights (the e4m3 rows' cuBLASLt
 * path is not bit-identical to their mma kernel: t_gpu_aq_lt_fp8 checks it). */
static void collect_rows(void)
{
    g_nrows = 0;
    for (int i = 0; i < qv_registry_count() && g_nrows < 64; i++) {
        const qv_variant *v = qv_registry_get(i);
        if (!v->launch) continue;
        if (!strcmp(v->family, "qqq") || (!strcmp(v->family, "w8a8") && v->wfmt == QV_FMT_I8))
            g_rows[g_nrows++] = i;
    }
}

static void set_paths(const char *min_m, const char *chunk_mb)
{
    setenv("QVET_AQ_LT_MIN_M", min_m, 1);
    if (chunk_mb)
        setenv("QVET_AQ_LT_CHUNK_MB", chunk_mb, 1);
    else
        unsetenv("QVET_AQ_LT_CHUNK_MB");
}

static void clear_paths(void)
{
    unsetenv("QVET_AQ_LT_MIN_M");
    unsetenv("QVET_AQ_LT_CHUNK_MB");
}

/* Runs p twice under the current environment; `lt` says whether both
 * launches must have taken the cuBLASLt path. */
static void run_path(const qv_problem *p, void *out, int lt, const char *label, const char *path)
{
    const long long before = qv_aq_lt_runs();
    qv_gpu_stats st;
    const qv_status s = qv_gpu_run(p, NULL, 2, out, &st);
    ck_assert_msg(s == QV_OK, "%s [%s]: qv_gpu_run: %s", label, path, qv_errmsg());
    ck_assert_msg(!st.nondeterministic, "%s [%s]: two launches differ, first at element %" PRId64, label, path,
                  st.first_diff);
    ck_assert_msg(st.guard_writes == 0, "%s [%s]: %" PRId64 " bytes written past the output", label, path,
                  st.guard_writes);
    const long long ran = qv_aq_lt_runs() - before;
    ck_assert_msg(ran == (lt ? 2 : 0), "%s [%s]: %lld of 2 launches took the cuBLASLt path, expected %d", label,
                  path, ran, lt ? 2 : 0);
}

/* M on both sides of the default threshold (128) and past a 128-row tile. */
static const int lt_m[] = {1, 17, 127, 128, 129, 300};
#define N_LT_M ((int)(sizeof lt_m / sizeof lt_m[0]))

/* One row: every M, with N and K rotating over a single 64-column block, a
 * short last chunk (w8a8: N % 64 = 8) and the longer shapes, and K with and
 * without a tail past 128 (grouped rows: multiples of g). */
START_TEST(paths_equal)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    const int qqq = !strcmp(v->family, "qqq");
    const int64_t ns_qqq[3] = {64, 320, 192}, ns_i8[3] = {72, 320, 136};
    const int64_t ks_plain[3] = {144, 1040, 128}, ks_g[3] = {128, 1152, 384};
    int cases = 0;
    for (int mi = 0; mi < N_LT_M; mi++)
        for (int si = 0; si < 2; si++) {
            const int64_t m = lt_m[mi];
            if (g_quick && (m != 129 || si)) continue;
            const int64_t n = (qqq ? ns_qqq : ns_i8)[(mi + si) % 3];
            const int64_t k = (v->g > 0 ? ks_g : ks_plain)[(mi + 2 * si) % 3];
            if (qv_variant_check_shape(v, m, n, k) != QV_OK) continue;
            qv_problem p;
            ck_assert_msg(qv_problem_create(&p, v, m, n, k) == QV_OK, "%s: %s", v->name, qv_errmsg());
            const qv_regime regime = (qv_regime)((mi + si) % QV_REGIME_COUNT);
            const uint64_t seed = g_seed + (uint64_t)g_rows[_i] * 1000 + (uint64_t)mi * 10 + (uint64_t)si;
            ck_assert_msg(ref_probe_fill(&p, QV_PROBE_RANDOM, regime, seed) == QV_OK, "%s: %s", v->name,
                          qv_errmsg());
            char label[192];
            snprintf(label, sizeof label, "%s m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " random/%s seed=%" PRIu64,
                     v->name, m, n, k, qv_regime_name(regime), seed);
            const size_t ob = (size_t)qv_problem_out_bytes(&p);
            uint8_t *o_mma = malloc(ob), *o_lt = malloc(ob), *o_chunks = malloc(ob), *model = malloc(ob);
            ck_assert(o_mma && o_lt && o_chunks && model);

            /* The chunk size that gives 64-column chunks (the smallest): below
             * one column's bytes, so the plan rounds up to 64. */
            set_paths("2000000000", NULL);
            run_path(&p, o_mma, 0, label, "mma");
            set_paths("1", NULL);
            run_path(&p, o_lt, 1, label, "cuBLASLt, one chunk");
            set_paths("1", "0.000001");
            run_path(&p, o_chunks, 1, label, "cuBLASLt, 64-column chunks");
            clear_paths();

            ck_assert_msg(ref_model_run(&p, model) == QV_OK, "%s: model: %s", label, qv_errmsg());
            qv_result r;
            ref_verify_bitexact(&p, model, o_mma, &r);
            ck_assert_msg(r.grade == QV_PASS, "%s: mma kernel vs model: %s", label, r.reason);
            const struct { const uint8_t *o; const char *what; } alt[2] = {{o_lt, "one chunk"},
                                                                           {o_chunks, "64-column chunks"}};
            for (int ai = 0; ai < 2; ai++) {
                int64_t first = -1;
                for (size_t e = 0; e + 1 < ob && first < 0; e += 2)
                    if (memcmp(alt[ai].o + e, o_mma + e, 2)) first = (int64_t)(e / 2);
                ck_assert_msg(first < 0,
                              "%s: cuBLASLt (%s) differs from the mma kernel, first at (%" PRId64 ", %" PRId64
                              "): 0x%04x vs 0x%04x",
                              label, alt[ai].what, first / n, first % n,
                              ((const uint16_t *)alt[ai].o)[first], ((const uint16_t *)o_mma)[first]);
            }
            free(o_mma);
            free(o_lt);
            free(o_chunks);
            free(model);
            qv_problem_destroy(&p);
            cases++;
        }
    printf("%s: %d shapes, mma == cuBLASLt (one chunk) == cuBLASLt (64-column chunks) == model, bit for bit\n",
           v->name, cases);
    ck_assert_msg(cases >= (g_quick ? 1 : N_LT_M), "%s: only %d legal shapes", v->name, cases);
}
END_TEST

/* ---- the published QQQ vectors through cuBLASLt ------------------------------ */

static const char *const qqq_goldens[] = {"qqq_w4a8_k128_n256_g-1", "qqq_w4a8_k256_n256_g128"};

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, bytes), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

/* _i: golden case x (one chunk, 64-column chunks). */
START_TEST(golden_qqq_lt)
{
    const char *gname = qqq_goldens[_i / 2];
    const char *chunk = _i % 2 ? "0.000001" : NULL;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", golden_root(), gname);
    const int group = strstr(gname, "g128") != NULL;
    const qv_variant *v = qv_variant_find(group ? "qqq-w4a8-g128" : "qqq-w4a8-ch");
    ck_assert_ptr_nonnull(v);
    qv_array b, sch, sg = {0};
    golden_load(gname, "B_packed_int32", &b);
    golden_load(gname, "s_channel_packed_f32", &sch);
    if (group) golden_load(gname, "s_group_packed_f16", &sg);
    const int k = (int)b.shape[0] * 16, n = (int)b.shape[1] / 2;
    const int g = group ? k / (int)sg.shape[0] : 0;

    set_paths("1", chunk);
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    struct dirent *de;
    int ms = 0;
    while ((de = readdir(dd))) {
        int m;
        if (sscanf(de->d_name, "A_m%d_int8.npy", &m) != 1) continue;
        char name[64];
        qv_array a, st, d;
        snprintf(name, sizeof name, "A_m%d_int8", m);
        golden_load(gname, name, &a);
        snprintf(name, sizeof name, "s_token_m%d_f32", m);
        golden_load(gname, name, &st);
        snprintf(name, sizeof name, "D_qqq_kernel_m%d_f16", m);
        golden_load(gname, name, &d);
        ck_assert_int_eq((int)a.shape[1], k);

        qv_gemm_args ga;
        memset(&ga, 0, sizeof ga);
        ga.m = m, ga.n = n, ga.k = k, ga.g = g;
        ga.a = dev_copy(a.data, a.nbytes);
        ga.a_scale = dev_copy(st.data, st.nbytes);
        ga.b = dev_copy(b.data, b.nbytes);
        ga.scales = group ? dev_copy(sg.data, sg.nbytes) : dev_copy(sch.data, sch.nbytes);
        ga.scales2 = group ? dev_copy(sch.data, sch.nbytes) : NULL;
        const size_t ob = sizeof(uint16_t) * (size_t)m * n;
        uint16_t *out = malloc(ob);
        ck_assert_ptr_nonnull(out);
        ck_assert_int_eq(cudaMalloc(&ga.c, ob), cudaSuccess);
        ga.workspace_bytes = v->workspace(v, m, n, k);
        ck_assert_msg(ga.workspace_bytes > 0, "%s m=%d: no workspace for the cuBLASLt path", gname, m);
        ck_assert_int_eq(cudaMalloc(&ga.workspace, ga.workspace_bytes), cudaSuccess);
        ck_assert_int_eq(cudaMemset(ga.workspace, 0, ga.workspace_bytes), cudaSuccess);
        ck_assert(qv_gpu_poison(ga.c, QV_FMT_F16, (int64_t)m * n, NULL) == QV_OK);
        const long long before = qv_aq_lt_runs();
        ck_assert_msg(v->launch(v, &ga) == QV_OK, "%s m=%d: %s", gname, m, qv_errmsg());
        ck_assert_msg(qv_aq_lt_runs() == before + 1, "%s m=%d: the launch did not take the cuBLASLt path", gname,
                      m);
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(out, ga.c, ob, cudaMemcpyDeviceToHost), cudaSuccess);
        const uint16_t *dq = d.data;
        int64_t bad = 0, first = -1;
        for (int64_t e = 0; e < (int64_t)m * n; e++)
            if (out[e] != dq[e] && bad++ == 0) first = e;
        ck_assert_msg(bad == 0,
                      "%s m=%d (cuBLASLt path): %" PRId64 " elements differ from the real QQQ kernel, first (%" PRId64
                      ", %" PRId64 "): ours 0x%04x, QQQ 0x%04x",
                      gname, m, bad, first < 0 ? 0 : first / n, first < 0 ? 0 : first % n,
                      first < 0 ? 0 : out[first], first < 0 ? 0 : dq[first]);
        printf("golden %s m=%d through cuBLASLt (%s): equal to the real QQQ kernel bit for bit\n", gname, m,
               chunk ? "64-column chunks" : "one chunk");
        ms++;
        cudaFree((void *)ga.a);
        cudaFree((void *)ga.a_scale);
        cudaFree((void *)ga.b);
        cudaFree((void *)ga.scales);
        cudaFree((void *)ga.scales2);
        cudaFree(ga.c);
        cudaFree(ga.workspace);
        free(out);
        qv_array_destroy(&a);
        qv_array_destroy(&st);
        qv_array_destroy(&d);
    }
    closedir(dd);
    clear_paths();
    ck_assert_msg(ms > 0, "%s: no A_m*_int8.npy found", dir);
    qv_array_destroy(&b);
    qv_array_destroy(&sch);
    if (group) qv_array_destroy(&sg);
}
END_TEST

/* ---- refusals (no CUDA call happens before a refusal) ---------------------------- */

START_TEST(env_refusals)
{
    const qv_variant *i8 = qv_variant_find("w8a8-i8-tok-ch"), *ch = qv_variant_find("qqq-w4a8-ch");
    ck_assert_ptr_nonnull(i8);
    ck_assert_ptr_nonnull(ch);
    /* Non-NULL placeholders: the refusal comes before anything is read. */
    static char placeholder[16];
    qv_gemm_args a;
    memset(&a, 0, sizeof a);
    a.m = 256, a.n = 128, a.k = 256;
    a.a = a.b = a.scales = placeholder;
    a.a_scale = (const float *)placeholder;
    a.c = placeholder;
    static const char *const bad_min_m[] = {"abc", "0", "-5", "12x", "99999999999"};
    for (size_t i = 0; i < sizeof bad_min_m / sizeof bad_min_m[0]; i++) {
        set_paths(bad_min_m[i], NULL);
        ck_assert_int_eq(i8->launch(i8, &a), QV_ERR_USAGE);
        ck_assert_msg(strstr(qv_errmsg(), "QVET_AQ_LT_MIN_M") != NULL, "message: %s", qv_errmsg());
        ck_assert_int_eq(ch->launch(ch, &a), QV_ERR_USAGE);
    }
    static const char *const bad_chunk[] = {"0", "-1", "nan", "inf", "2e6", "4MB"};
    for (size_t i = 0; i < sizeof bad_chunk / sizeof bad_chunk[0]; i++) {
        set_paths("1", bad_chunk[i]);
        ck_assert_int_eq(i8->launch(i8, &a), QV_ERR_USAGE);
        ck_assert_msg(strstr(qv_errmsg(), "QVET_AQ_LT_CHUNK_MB") != NULL, "message: %s", qv_errmsg());
        ck_assert_int_eq(ch->launch(ch, &a), QV_ERR_USAGE);
    }
    clear_paths();
    /* The workspace grows by the cuBLASLt region from the threshold on and is a
     * pure function of the shape otherwise (no CUDA call either). */
    ck_assert_uint_gt(i8->workspace(i8, 128, 4096, 4096), i8->workspace(i8, 127, 4096, 4096) + (size_t)4096 * 128 * 4);
    ck_assert_uint_gt(ch->workspace(ch, 1024, 4096, 4096), (size_t)4096 * 4096);
}
END_TEST

static Suite *lt_suite(int gpu)
{
    Suite *s = suite_create("gpu_aq_lt");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 600);
    if (gpu) {
        tcase_add_loop_test(tc, paths_equal, 0, g_nrows);
        tcase_add_loop_test(tc, golden_qqq_lt, 0, 2 * (int)(sizeof qqq_goldens / sizeof qqq_goldens[0]));
    }
    tcase_add_test(tc, env_refusals);
    suite_add_tcase(s, tc);
    return s;
}

/* A device is looked for through the driver's files first, so that a machine
 * without one never sees a CUDA call. */
static int have_device(void)
{
    if (access("/dev/nvidia0", F_OK) != 0 && access("/dev/nvidiactl", F_OK) != 0) return 0;
    return qv_gpu_info_get(NULL);
}

int main(void)
{
    const char *env = getenv("QVET_SEED");
    if (env && *env) g_seed = strtoull(env, NULL, 0);
    env = getenv("QVET_AQ_QUICK");
    g_quick = env && *env && strcmp(env, "0") != 0;
    clear_paths();
    const int gpu = have_device();
    if (!gpu) printf("SKIP: no CUDA device\n");
    collect_rows();
    if (gpu) printf("t_gpu_aq_lt: seed %" PRIu64 " (QVET_SEED=%" PRIu64 " replays), %d rows\n", g_seed, g_seed, g_nrows);
    SRunner *sr = srunner_create(lt_suite(gpu));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
