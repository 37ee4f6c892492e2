/* t_gpu_aq.c: the activation-quantized kernel family on the GPU (QQQ W4A8,
 * W8A8 int8 and e4m3, per-token activation quantization).
 *
 * Witnesses, none of them the kernel's own output:
 *  - every registry row of family "qqq" or "w8a8" with a launch, over the edge
 *    set of M x shapes on and just past the tiles (the row's and the kernel's
 *    own 256/128-column and 128-K blocks), with the probes of reference/probe.c:
 *      exact and one-hot (and every witness that applies: fp8 promotion,
 *      split-K, scale overflow, RNE ties) have a unique correct output, so the
 *      kernel must equal the CPU model (ref_model_run) bit for bit;
 *      random, in a scale regime that rotates with M, must PASS ref_verify
 *      against the certified truth, and the integer rows (exact int32, fixed
 *      fp32 epilogue) must still equal the model bit for bit;
 *    every case launches twice and must be bitwise identical, with no write
 *    past the output (the runner's guard zone);
 *  - the mma kernel's two split-K sums (split_sums): with 2-16 forced K slices,
 *    the slices summed in a thread-block cluster and through the workspace
 *    must each equal the CPU model (exact probe) or pass the verdict
 *    (random), and equal each other bit for bit;
 *  - the published QQQ vectors in tests/data/golden (QVET_GOLDEN overrides the
 *    folder): our kernel on the real A, s_token, packed B and scales must give
 *    the real QQQ kernel's D bit for bit, and the QQQ model computed here from
 *    the logical arrays must give the same bits;
 *  - the e4m3 precision witness (docs/design.md §3): one product 2^16 alone in the
 *    first 128 K, then products of 1; the kernel must return the unique value
 *    the row's declared promotion (promote_nc, acc_bits) gives, the exact sum
 *    for every accumulator at least that wide, which differs from unpromoted
 *    accumulation (t_gpu_aq_lt_fp8 holds the cuBLASLt path to docs/design.md §3's own
 *    sequence, where the declared 14 bits lose 127);
 *  - the activation quantizers against a CPU computation of the same formulas
 *    (int8: s = absmax/127, q = rne(x/s); e4m3: s = absmax/448, q = RNE with
 *    saturation), codes and scales bit for bit.
 * Without a CUDA device the suite prints exactly "SKIP: no CUDA device" and
 * runs only the refusal checks, which make no CUDA call. QVET_AQ_ROWS=<text>
 * keeps the rows whose name contains it. QVET_AQ_BENCH=1 runs the family's benchmark instead:
 * `qvet bench --variant 'qqq-*,w8a8-*' --m 1,16,64,1024` (bench/aq_bench.c). Random cases come from (seed, index); the seed is
 * printed and QVET_SEED=<seed> replays it. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "internal/aq.h"
#include "qvet/array.h"
#include "qvet/formats.h"
#include "qvet/gemm.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/variant.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/rand.h"

static uint64_t g_seed = 20261129; /* default; QVET_SEED overrides */
/* QVET_AQ_QUICK=1: one random case at M = 1, 17 and 129 per row (one per tile
 * configuration), no witnesses, and the split sums at M = 1 in 5 slices only:
 * the run under compute-sanitizer. */
static int g_quick;

/* Uniform double in [0, 1): a pure function of (seed, stream, i). */
static double rnd_unit(uint64_t stream, uint64_t i) { return test_rnd_unit(g_seed, stream, i); }

/* ---- the rows under test --------------------------------------------------- */

static int g_rows[64];
static int g_nrows;

/* QVET_AQ_ROWS=<text> keeps only the rows whose name contains it (a sanitizer
 * pass on one row); unset, every row of the family. */
static int is_aq_row(const qv_variant *v)
{
    const char *only = getenv("QVET_AQ_ROWS");
    if (only && *only && !strstr(v->name, only)) return 0;
    return !strcmp(v->family, "qqq") || !strcmp(v->family, "w8a8");
}

/* Shapes on the row's tiles and at the smallest legal step past them, and past
 * the kernel's own block tiles (256 and 128 columns, 128 K per stage); the
 * longest K (8 stages and a tail) makes the kernel split K across blocks, so
 * the in-kernel split-K reduction runs at every tile configuration. K stays a
 * multiple of g for grouped rows; K/g takes 1, 2, 3 and 9. */
static void shape_for(const qv_variant *v, int idx, int64_t m, int64_t *n, int64_t *k)
{
    const int nt = v->n_tile, kt = v->k_tile > v->g ? v->k_tile : v->g;
    const int64_t ns[4] = {nt, 256 + nt, 128 + nt, 2 * nt};
    const int64_t ks[5] = {kt, 3 * kt > 128 ? 3 * kt : 128 + kt, 2 * kt, 256 + kt, 8 * 128 + kt};
    *n = ns[idx % 4];
    *k = ks[(idx / 2 + idx) % 5];
    /* Keep the CPU truth fast for the large M of the edge set. */
    if (m > 64 && *n > 128) *n = nt * ((128 + nt - 1) / nt);
}

/* ---- small helpers ----------------------------------------------------------------- */

static uint8_t e4m3_code(double x) { return (uint8_t)qv_encode(QV_FMT_E4M3, x, QV_SAT_FINITE); }

static void put_scale(qv_fmt f, void *buf, int64_t i, double x)
{
    if (f == QV_FMT_F32)
        ((float *)buf)[i] = (float)x;
    else
        ((uint16_t *)buf)[i] = (uint16_t)qv_encode(f, x, QV_SAT_FINITE);
}

/* ---- one case ----------------------------------------------------------------- */

/* Runs p twice on the GPU under the suite's base options, then checks the
 * verdicts; returns 1 when it passed. */
static int run_case(qv_problem *p, qv_probe_kind probe, const char *label)
{
    void *out = malloc((size_t)qv_problem_out_bytes(p));
    ck_assert_ptr_nonnull(out);
    const qv_launch_opts base = gpu_opts(NULL);
    gpu_run_twice(p, &base, out, label, NULL);
    const int ok = gpu_verdict(p, probe, out, label, NULL);
    free(out);
    return ok;
}

/* Runs one (row, m, shape, probe) case; returns 1 when it passed. */
static int one_case(const qv_variant *v, int64_t m, int64_t n, int64_t k, qv_probe_kind probe, qv_regime regime,
                    uint64_t seed)
{
    qv_problem p;
    char label[192];
    gpu_problem_probe(&p, v, m, n, k, probe, regime, seed, label, sizeof label);
    const int ok = run_case(&p, probe, label);
    qv_problem_destroy(&p);
    return ok;
}

/* One registry row over the whole edge set of M (gpu_edge_m) with the exact,
 * one-hot and random probes (the random regime rotates with M), then every
 * witness that applies to the row at three M. */
START_TEST(registry_edges)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    int failed = 0, cases = 0;
    for (int mi = 0; mi < GPU_N_EDGE_M; mi++) {
        const qv_probe_kind probes[3] = {QV_PROBE_EXACT, QV_PROBE_ONEHOT, QV_PROBE_RANDOM};
        if (g_quick && gpu_edge_m[mi] != 1 && gpu_edge_m[mi] != 17 && gpu_edge_m[mi] != 129) continue;
        for (int pi = g_quick ? 2 : 0; pi < 3; pi++) {
            const int64_t m = gpu_edge_m[mi];
            int64_t n, k;
            shape_for(v, mi * 3 + pi, m, &n, &k);
            if (!ref_probe_applies(v, probes[pi], m, n, k)) continue;
            const qv_regime regime = probes[pi] == QV_PROBE_RANDOM ? (qv_regime)(mi % QV_REGIME_COUNT)
                                                                    : QV_REGIME_LOGUNIFORM;
            const uint64_t seed = g_seed + (uint64_t)g_rows[_i] * 100000 + (uint64_t)mi * 10 + (uint64_t)pi;
            failed += !one_case(v, m, n, k, probes[pi], regime, seed);
            cases++;
        }
    }
    static const int witness_m[] = {1, 17, 129};
    for (int wi = 0; wi < (g_quick ? 0 : 3); wi++)
        for (int kind = QV_PROBE_WITNESS_FP8_PROMOTE; kind < QV_PROBE_COUNT; kind++) {
            int64_t n, k;
            shape_for(v, wi + kind, witness_m[wi], &n, &k);
            if (v->arith.accum == QV_ACC_TC_FP8 && kind == QV_PROBE_WITNESS_FP8_PROMOTE) k = 1024 * (wi + 1);
            if (!ref_probe_applies(v, (qv_probe_kind)kind, witness_m[wi], n, k)) continue;
            failed += !one_case(v, witness_m[wi], n, k, (qv_probe_kind)kind, QV_REGIME_LOGUNIFORM,
                                g_seed + (uint64_t)wi * 7 + (uint64_t)kind);
            cases++;
        }
    printf("%s: %d cases, %d failed\n", v->name, cases, failed);
    ck_assert_msg(failed == 0, "%s: %d of %d cases failed (see stderr)", v->name, failed, cases);
}
END_TEST

/* ---- split-K sums: in a cluster, and through the workspace ----------------------- */

/* The mma kernel's two split-K sums give the same bits: with aq_splits
 * forcing 2, 3, 5, 8 and 16 K slices, the default launch (the slices of a
 * tile in one cluster, summed through distributed shared memory) and
 * aq_cluster_max = 1 (atomic int32 adds, or the last e4m3 slice adding the
 * fp32 partials) must each equal the CPU model on the exact probe, pass the
 * verdict on a random one, and equal each other bit for bit there. Every row
 * at M = 1, 5 and 16 on the mma kernel (e4m3 rows with the cuBLASLt path off;
 * QQQ takes its wgmma kernel only from M = 17). */
START_TEST(split_sums)
{
    const qv_variant *v = qv_registry_get(g_rows[_i]);
    static const int ms[] = {1, 5, 16}, splits[] = {2, 3, 5, 8, 16};
    const int64_t n = 512, k = 16 * 128;
    int failed = 0, cases = 0;
    for (int mi = 0; mi < (g_quick ? 1 : 3); mi++)
        for (int si = 0; si < 5; si++) {
            if (g_quick && splits[si] != 5) continue;
            /* The two sums: the default (clusters) and no clusters. */
            const qv_launch_opts paths[2] = {
                {.aq_lt_fp8_min_m = QV_OPT_OFF, .aq_splits = splits[si]},
                {.aq_lt_fp8_min_m = QV_OPT_OFF, .aq_splits = splits[si], .aq_cluster_max = 1}};
            for (int pi = 0; pi < 2; pi++) {
                const qv_probe_kind probe = pi ? QV_PROBE_RANDOM : QV_PROBE_EXACT;
                if (!ref_probe_applies(v, probe, ms[mi], n, k)) continue;
                qv_problem p;
                char label[192], lab2[224];
                gpu_problem_probe(&p, v, ms[mi], n, k, probe, (qv_regime)((mi + si) % QV_REGIME_COUNT),
                                  g_seed + 500000 + (uint64_t)g_rows[_i] * 1000 + (uint64_t)(mi * 10 + si) * 2 + pi,
                                  label, sizeof label);
                const size_t ob = (size_t)qv_problem_out_bytes(&p);
                void *out[2] = {malloc(ob), malloc(ob)};
                ck_assert(out[0] && out[1]);
                for (int path = 0; path < 2; path++) {
                    const qv_launch_opts o = gpu_opts(&paths[path]);
                    snprintf(lab2, sizeof lab2, "%s splits=%d %s", label, splits[si], path ? "workspace" : "cluster");
                    gpu_run_twice(&p, &o, out[path], lab2, NULL);
                    failed += !gpu_verdict(&p, probe, out[path], lab2, NULL);
                    cases++;
                }
                if (memcmp(out[0], out[1], ob)) {
                    fprintf(stderr, "FAIL %s splits=%d: the cluster and workspace sums differ\n", label, splits[si]);
                    failed++;
                }
                free(out[0]);
                free(out[1]);
                qv_problem_destroy(&p);
            }
        }
    printf("%s split sums: %d cases, %d failed\n", v->name, cases, failed);
    ck_assert_msg(cases > 0, "%s: no split case applies", v->name);
    ck_assert_msg(failed == 0, "%s: %d of %d split cases failed (see stderr)", v->name, failed, cases);
}
END_TEST

/* ---- the published QQQ vectors -------------------------------------------------- */

static const char *const qqq_goldens[] = {"qqq_w4a8_k128_n256_g-1", "qqq_w4a8_k256_n256_g128"};

START_TEST(golden_qqq)
{
    gpu_qqq_golden gq;
    gpu_qqq_golden_open(&gq, qqq_goldens[_i]);
    const int group = gq.group, k = gq.k, n = gq.n, g = gq.g;
    qv_array q, schl, sgl = {0};
    golden_load(gq.name, group ? "q_logical_kxn_uint4" : "q_logical_kxn_int4", &q);
    golden_load(gq.name, "s_channel_logical_1xn_f32", &schl);
    if (group) golden_load(gq.name, "s_group_logical_gxn_f16", &sgl);
    /* The logical arrays describe the packed ones' shape. */
    ck_assert_int_eq((int)q.shape[0], k);
    ck_assert_int_eq((int)q.shape[1], n);
    if (group) ck_assert_int_eq((int)sgl.shape[0], k / g);

    for (int mi = 0; mi < gq.n_ms; mi++) {
        const int m = gq.ms[mi];
        gpu_qqq_case c;
        gpu_qqq_case_load(&gq, m, NULL, &c);

        /* The QQQ model from the logical arrays (golden/README.md). */
        uint16_t *model = malloc(sizeof(uint16_t) * (size_t)m * n);
        ck_assert_ptr_nonnull(model);
        const float *stok = c.s_tok.data, *sc = schl.data;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                int64_t acc = 0;
                for (int kk = 0; kk < k; kk++) {
                    const int av = ((const int8_t *)c.a.data)[(int64_t)i * k + kk];
                    int w;
                    if (group) {
                        const int qv = ((const int8_t *)q.data)[(int64_t)kk * n + j] - 8;
                        const double s = qv_decode(QV_FMT_F16, ((const uint16_t *)sgl.data)[(kk / g) * n + j]);
                        w = (int)nearbyint((double)qv * s); /* one product of fp16 values: exact in double */
                    } else {
                        w = 16 * ((const int8_t *)q.data)[(int64_t)kk * n + j];
                    }
                    acc += (int64_t)av * w;
                }
                const float y = ((float)acc * sc[j]) * stok[i];
                model[(int64_t)i * n + j] = (uint16_t)qv_encode(QV_FMT_F16, (double)y, QV_SAT_NONE);
            }

        /* Our kernel on the published bytes, twice. */
        const size_t ob = sizeof(uint16_t) * (size_t)m * n;
        uint16_t *out = malloc(ob), *out2 = malloc(ob);
        ck_assert_ptr_nonnull(out);
        ck_assert_ptr_nonnull(out2);
        gpu_qqq_case_launch(&gq, &c, out);
        gpu_qqq_case_launch(&gq, &c, out2);
        ck_assert_msg(!memcmp(out, out2, ob), "%s m=%d: two launches differ", gq.name, m);
        const uint16_t *dq = c.d.data;
        int64_t bad_model = 0;
        for (int64_t e = 0; e < (int64_t)m * n; e++) bad_model += model[e] != dq[e];
        ck_assert_msg(bad_model == 0, "%s m=%d: the QQQ model differs from the real kernel on %" PRId64 " elements",
                      gq.name, m, bad_model);
        gpu_qqq_case_assert(&gq, &c, out, "");
        printf("golden %s m=%d: %d x %d outputs equal the real QQQ kernel bit for bit\n", gq.name, m, m, n);
        free(out);
        free(out2);
        free(model);
        gpu_qqq_case_free(&c);
    }
    qv_array_destroy(&q);
    qv_array_destroy(&schl);
    if (group) qv_array_destroy(&sgl);
    gpu_qqq_golden_close(&gq);
}
END_TEST

/* ---- the e4m3 precision witness -------------------------------------------------- */

/* The row's declared accumulation on the witness: the model (promote_nc,
 * acc_bits) must give a value that differs from unpromoted accumulation, and
 * the kernel must give exactly that value. */
START_TEST(fp8_witness)
{
    /* The instruction's accumulator, measured (printed for the record; the
     * registry's acc_bits comes from these lines):
     *  - C = 2^e plus one product p: what survives of p next to a large C;
     *  - one instruction holding 2^16 and one product 2^(16-d): how far below
     *    the largest product the alignment still keeps bits. */
    {
        uint8_t a[32], b[32];
        float out;
        for (int e = 20; e <= 26; e++) {
            printf("fp8 mma.sync C=2^%d:", e);
            static const double ps[] = {1.0, 0.75, 0.5, 0.25};
            for (int pi = 0; pi < 4; pi++) {
                memset(a, 0, sizeof a);
                memset(b, 0, sizeof b);
                a[0] = e4m3_code(ps[pi]);
                b[0] = e4m3_code(1.0);
                ck_assert(qv_aq_fp8_probe(a, b, 32, 1, (float)ldexp(1.0, e), &out) == QV_OK);
                printf("  +%.2f -> %+.4g", ps[pi], (double)out - ldexp(1.0, e));
            }
            printf("\n");
        }
        printf("fp8 mma.sync in one instruction, 2^16 + 2^(16-d) (and + 3 x 2^(16-d)) kept:");
        for (int d = 14; d <= 30; d += 1) {
            memset(a, 0, sizeof a);
            memset(b, 0, sizeof b);
            a[0] = b[0] = e4m3_code(256.0);
            const int ea = (16 - d) / 2, eb = 16 - d - ea;
            for (int j = 1; j <= 3; j++) {
                a[j] = e4m3_code(ldexp(1.0, ea));
                b[j] = e4m3_code(ldexp(1.0, eb));
            }
            ck_assert(qv_aq_fp8_probe(a, b, 32, 1, 0.0f, &out) == QV_OK);
            printf(" d=%d:%.4g", d, ((double)out - 65536.0) / ldexp(1.0, 16 - d));
        }
        printf("\n");
    }
    static const int ks[] = {1024, 4096};
    int checked = 0;
    for (int r = 0; r < g_nrows; r++) {
        const qv_variant *v = qv_registry_get(g_rows[r]);
        if (v->arith.accum != QV_ACC_TC_FP8) continue;
        for (int ki = 0; ki < 2; ki++) {
            const int64_t m = 2, n = 16, k = ks[ki];
            qv_problem p;
            ck_assert(qv_problem_create(&p, v, m, n, k) == QV_OK);
            /* Row 0: a = (2^8, 0 up to K = 128, then 1, 1, ...); row 1: all ones.
             * Column j: w = (2^8, 1, ...). Row 0's first 128-K partial is 2^16
             * alone, so any accumulator at least as wide as declared, promoted
             * every 128, gives the exact sum; unpromoted, the ones vanish. */
            for (int64_t i = 0; i < m; i++)
                for (int64_t kk = 0; kk < k; kk++)
                    ((uint8_t *)p.a)[i * k + kk] =
                        e4m3_code(i == 0 && kk == 0 ? 256.0 : i == 0 && kk < 128 ? 0.0 : 1.0);
            for (int64_t kk = 0; kk < k; kk++)
                for (int64_t j = 0; j < n; j++) ((uint8_t *)p.q)[kk * n + j] = e4m3_code(kk == 0 ? 256.0 : 1.0);
            /* Scales 2^-3 x 2^-3 bring 65536 + K to fp16's [1024, 2048) x 2^k
             * range, where one ulp is 64 of the sum's units or less, so the
             * promoted sum and the unpromoted 65536 round to different codes. */
            const int64_t srows = qv_problem_scale_rows(&p), scols = qv_problem_scale_cols(&p);
            for (int64_t e = 0; e < srows * scols; e++) put_scale(v->sfmt, p.scales, e, 0.125);
            for (int64_t e = 0; e < qv_problem_ascale_count(&p); e++) p.a_scale[e] = 0.125f;
            char label[96];
            snprintf(label, sizeof label, "%s fp8 witness k=%" PRId64, v->name, k);
            ck_assert_msg(run_case(&p, QV_PROBE_EXACT, label), "%s: kernel differs from the declared promotion",
                          label);
            checked++;
            qv_problem_destroy(&p);
        }
    }
    /* (QVET_AQ_ROWS may leave no e4m3 row: then the printed lines above only.) */
    const char *only = getenv("QVET_AQ_ROWS");
    ck_assert_msg(checked > 0 || (only && *only), "no e4m3 row in the registry");

    /* The raw instruction chain, printed for the record (the registry's
     * promote_nc / acc_bits come from these numbers). */
    for (int ki = 0; ki < 2; ki++) {
        const int k = ks[ki];
        uint8_t *a = malloc((size_t)k), *b = malloc((size_t)k);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        for (int kk = 0; kk < k; kk++) a[kk] = b[kk] = e4m3_code(kk == 0 ? 256.0 : 1.0);
        float promoted, fast;
        ck_assert(qv_aq_fp8_probe(a, b, k, QV_AQ_FP8_PROMOTE_K / 32, 0.0f, &promoted) == QV_OK);
        ck_assert(qv_aq_fp8_probe(a, b, k, k / 32, 0.0f, &fast) == QV_OK);
        const double exact = 65536.0 + k - 1;
        printf("fp8 mma.sync witness k=%d: exact %.0f, promoted every %d: %.0f (exact %+.0f), unpromoted: %.0f "
               "(exact %+.0f)\n",
               k, exact, QV_AQ_FP8_PROMOTE_K, promoted, promoted - exact, fast, fast - exact);
        /* Promotion must beat no promotion on this witness, by construction. */
        ck_assert_msg(fabs(promoted - exact) < fabs(fast - exact) || fast == exact,
                      "k=%d: promotion does not help: promoted %.0f, unpromoted %.0f", k, promoted, fast);
        free(a);
        free(b);
    }
}
END_TEST

/* ---- activation quantization --------------------------------------------------- */

/* Cases cover every path of the quantizer's launch plan: short rows several to
 * a block and one to a warp, long rows over the warps of a block, few long rows
 * over a cluster of blocks (M <= 128, K >= 2048), K past what a block's
 * registers hold (cluster per row at any M) and past what a cluster holds (the
 * two-pass kernel); K tails (K % 8 != 0) and rows that are not 16-byte aligned
 * (x_off values before x), which take the scalar loads; M = 1 and large M; an
 * all-zero row (row 1 when M > 1, every row when zero_all). */
struct aq_case {
    qv_fmt xfmt, qfmt;
    int m, k;
    int x_off;    /* x starts this many values into its buffer (alignment) */
    int zero_all; /* every value 0 */
    int tiny;     /* values times 2^-100 (bf16): scales below 2^-90, the kernel's exact-division path */
    int groups;   /* qv_act_quant_groups: a scale per token and 128-K group, (k/128, m) MN-major */
};
static const struct aq_case aq_cases[] = {
    {QV_FMT_F16, QV_FMT_I8, 1, 16, 0, 0, 0, 0},         {QV_FMT_F16, QV_FMT_I8, 33, 4096, 0, 0, 0, 0},
    {QV_FMT_F16, QV_FMT_I8, 7, 1000, 0, 0, 0, 0},       {QV_FMT_BF16, QV_FMT_I8, 257, 136, 0, 0, 0, 0},
    {QV_FMT_F16, QV_FMT_E4M3, 3, 4096, 0, 0, 0, 0},     {QV_FMT_BF16, QV_FMT_E4M3, 65, 1003, 0, 0, 0, 0},
    {QV_FMT_F16, QV_FMT_E4M3, 129, 256, 0, 0, 0, 0},    {QV_FMT_BF16, QV_FMT_I8, 2, 8192, 0, 0, 0, 0},
    /* K tails and tiny K */
    {QV_FMT_F16, QV_FMT_I8, 5, 1, 0, 0, 0, 0},          {QV_FMT_BF16, QV_FMT_E4M3, 3, 7, 0, 0, 0, 0},
    {QV_FMT_F16, QV_FMT_E4M3, 40, 9, 0, 0, 0, 0},       {QV_FMT_F16, QV_FMT_I8, 2, 2049, 0, 0, 0, 0},
    {QV_FMT_BF16, QV_FMT_I8, 100, 4103, 0, 0, 0, 0},
    /* M = 1: the cluster path, the Llama K values, and an all-zero row */
    {QV_FMT_F16, QV_FMT_I8, 1, 4096, 0, 0, 0, 0},       {QV_FMT_F16, QV_FMT_E4M3, 1, 28672, 0, 0, 0, 0},
    {QV_FMT_BF16, QV_FMT_I8, 1, 11008, 0, 0, 0, 0},     {QV_FMT_F16, QV_FMT_I8, 1, 8192, 0, 1, 0, 0},
    {QV_FMT_F16, QV_FMT_E4M3, 1, 2048, 0, 1, 0, 0},     {QV_FMT_F16, QV_FMT_I8, 32, 8192, 0, 0, 0, 0},
    /* rows not 16-byte aligned: scalar loads, in a block and in a cluster */
    {QV_FMT_F16, QV_FMT_I8, 9, 64, 1, 0, 0, 0},         {QV_FMT_BF16, QV_FMT_E4M3, 2, 4096, 3, 0, 0, 0},
    {QV_FMT_F16, QV_FMT_E4M3, 200, 2051, 0, 0, 0, 0},   {QV_FMT_F16, QV_FMT_I8, 300, 4096, 1, 0, 0, 0},
    /* more rows than the cluster path takes: long rows in one block, 4, 8 and
     * 16 slots per thread */
    {QV_FMT_BF16, QV_FMT_I8, 200, 4096, 0, 0, 0, 0},    {QV_FMT_F16, QV_FMT_E4M3, 129, 11008, 0, 0, 0, 0},
    {QV_FMT_BF16, QV_FMT_E4M3, 200, 16392, 0, 0, 0, 0}, {QV_FMT_F16, QV_FMT_I8, 150, 28672, 0, 0, 0, 0},
    /* scales below 2^-90 */
    {QV_FMT_BF16, QV_FMT_I8, 3, 4096, 0, 0, 1, 0},   {QV_FMT_BF16, QV_FMT_E4M3, 140, 1003, 0, 0, 1, 0},
    /* K past a block's registers (32768), past a cluster's (262144) */
    {QV_FMT_F16, QV_FMT_I8, 129, 32776, 0, 0, 0, 0},    {QV_FMT_BF16, QV_FMT_E4M3, 2, 262152, 0, 0, 0, 0},
    {QV_FMT_F16, QV_FMT_I8, 1, 300001, 0, 0, 0, 0},
    /* large M: many blocks, and the Llama-3-70B down layer at M = 1024 */
    {QV_FMT_F16, QV_FMT_I8, 70000, 16, 0, 0, 0, 0},     {QV_FMT_F16, QV_FMT_E4M3, 1024, 28672, 0, 0, 0, 0},
    /* per token and 128-K group, scales MN-major: one group, a few, the
     * Llama K values, M = 1 and many rows, unaligned rows, an all-zero input */
    {QV_FMT_F16, QV_FMT_E4M3, 1, 128, 0, 0, 0, 1},    {QV_FMT_F16, QV_FMT_E4M3, 5, 384, 0, 0, 0, 1},
    {QV_FMT_BF16, QV_FMT_E4M3, 33, 4096, 0, 0, 0, 1}, {QV_FMT_F16, QV_FMT_E4M3, 1, 28672, 0, 0, 0, 1},
    {QV_FMT_F16, QV_FMT_I8, 300, 11008, 0, 0, 0, 1},  {QV_FMT_BF16, QV_FMT_E4M3, 7, 1024, 3, 0, 0, 1},
    {QV_FMT_F16, QV_FMT_E4M3, 4, 256, 0, 1, 0, 1},
};

START_TEST(act_quant)
{
    const struct aq_case *c = &aq_cases[_i];
    const int64_t m = c->m, k = c->k, off = c->x_off;
    /* Under compute-sanitizer (QVET_AQ_QUICK) every path runs, but not the one
     * case of 29 M values, whose paths smaller cases already take. */
    if (g_quick && m * k > ((int64_t)1 << 23)) {
        printf("act quant case %d: skipped in quick mode\n", _i);
        return;
    }
    uint16_t *x = malloc(sizeof(uint16_t) * (size_t)(m * k + off));
    uint8_t *q = malloc((size_t)(m * k));
    /* Scales: one per row, or with groups one per (128-K group, row). */
    const int64_t ng = c->groups ? k / 128 : 1, gw = c->groups ? 128 : k;
    float *s = malloc(sizeof(float) * (size_t)(m * ng));
    ck_assert(x && q && s);
    const uint64_t st = 7000 + (uint64_t)_i;
    const qv_launch_opts base = gpu_opts(NULL);
    printf("act quant case %d: m=%" PRId64 " k=%" PRId64 " x_off=%" PRId64 ", stream %" PRIu64 "\n", _i, m, k, off,
           st);
    for (int64_t i = 0; i < off; i++) x[i] = 0;
    uint16_t *xv = x + off;
    for (int64_t i = 0; i < m; i++)
        for (int64_t kk = 0; kk < k; kk++) {
            /* Gaussian-ish values with a x100 outlier channel and some -0
             * (whose e4m3 code is 0x80); row 1 is all zero. */
            double v = (rnd_unit(st, (uint64_t)(i * k + kk)) - 0.5) * 4.0;
            if (kk == 5 % k) v *= 100.0;
            if (kk % 97 == 3) v = -0.0;
            if (c->tiny) v = ldexp(v, -100);
            if (i == 1 || c->zero_all) v = 0.0;
            xv[i * k + kk] = (uint16_t)qv_encode(c->xfmt, v, QV_SAT_FINITE);
        }
    uint16_t *dx = gpu_dev_copy(x, sizeof(uint16_t) * (size_t)(m * k + off));
    void *dq = NULL, *ds = NULL;
    ck_assert_int_eq(cudaMalloc(&dq, (size_t)(m * k)), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&ds, sizeof(float) * (size_t)(m * ng)), cudaSuccess);
    /* Poison: every code and scale must be written. */
    ck_assert_int_eq(cudaMemset(dq, 0x5a, (size_t)(m * k)), cudaSuccess);
    ck_assert_int_eq(cudaMemset(ds, 0xff, sizeof(float) * (size_t)(m * ng)), cudaSuccess);
    if (c->groups)
        ck_assert_msg(qv_act_quant_groups(c->xfmt, c->qfmt, c->m, c->k, dx + off, dq, ds, NULL, &base) == QV_OK, "%s",
                      qv_errmsg());
    else
        ck_assert_msg(qv_act_quant(c->xfmt, c->qfmt, c->m, c->k, dx + off, dq, ds, NULL, &base) == QV_OK, "%s",
                      qv_errmsg());
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(q, dq, (size_t)(m * k), cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(s, ds, sizeof(float) * (size_t)(m * ng), cudaMemcpyDeviceToHost), cudaSuccess);
    const int f8 = c->qfmt == QV_FMT_E4M3;
    int64_t bad = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t g = 0; g < ng; g++) {
            /* The group's scale sits at g m + i (MN-major); a whole row's at i. */
            float amax = 0.0f;
            for (int64_t kk = g * gw; kk < (g + 1) * gw; kk++)
                amax = fmaxf(amax, fabsf((float)qv_decode(c->xfmt, xv[i * k + kk])));
            const float scale = amax / (f8 ? 448.0f : 127.0f);
            ck_assert_msg(memcmp(&scale, &s[g * m + i], 4) == 0,
                          "case %d row %" PRId64 " group %" PRId64 ": scale %.9g, expected %.9g", _i, i, g, s[g * m + i],
                          scale);
            for (int64_t kk = g * gw; kk < (g + 1) * gw; kk++) {
                uint8_t want = 0;
                if (scale > 0.0f) {
                    const float r = (float)qv_decode(c->xfmt, xv[i * k + kk]) / scale;
                    want = f8 ? e4m3_code((double)r) : (uint8_t)(int8_t)fmaxf(-128.0f, fminf(127.0f, rintf(r)));
                }
                if (q[i * k + kk] != want && bad++ < 5)
                    fprintf(stderr, "act quant case %d (%" PRId64 ", %" PRId64 "): got 0x%02x, expected 0x%02x\n", _i, i,
                            kk, q[i * k + kk], want);
            }
        }
    ck_assert_msg(bad == 0, "act quant case %d: %" PRId64 " codes differ", _i, bad);
    cudaFree(dx);
    cudaFree(dq);
    cudaFree(ds);
    free(x);
    free(q);
    free(s);
}
END_TEST

/* ---- refusals (no CUDA call happens before a refusal) ---------------------------- */

START_TEST(refusals)
{
    const qv_variant *ch = qv_variant_find("qqq-w4a8-ch"), *i8 = qv_variant_find("w8a8-i8-tensor");
    ck_assert_ptr_nonnull(ch);
    ck_assert_ptr_nonnull(i8);
    qv_gemm_args a;
    memset(&a, 0, sizeof a);
    a.m = 16, a.n = 96, a.k = 128;
    ck_assert_int_eq(qv_gpu_launch(ch, &a), QV_ERR_SHAPE);          /* N not a multiple of 64 */
    a.n = 128, a.k = 120;
    ck_assert_int_eq(qv_gpu_launch(ch, &a), QV_ERR_SHAPE);          /* K not a multiple of 16 */
    a.k = 128, a.m = 0;
    ck_assert_int_eq(qv_gpu_launch(ch, &a), QV_ERR_SHAPE);          /* M = 0 */
    a.m = 4, a.n = 12, a.k = 64;
    ck_assert_int_eq(qv_gpu_launch(i8, &a), QV_ERR_SHAPE);          /* N not a multiple of 8 */
    a.n = 16;
    ck_assert_int_eq(qv_gpu_launch(i8, &a), QV_ERR_USAGE);          /* buffers missing */
}
END_TEST

int main(void)
{
    g_quick = gpu_env_flag("QVET_AQ_QUICK");
    const int gpu = gpu_suite_start(&g_seed);
    if (gpu && gpu_env_flag("QVET_AQ_BENCH")) return qv_aq_bench();
    g_nrows = gpu_registry_rows(is_aq_row, g_rows, 64);
    TCase *tc;
    Suite *s = gpu_suite_create("gpu_aq", gpu, g_seed, g_nrows, &tc);
    /* The GPU cases only with a device; the refusals (no CUDA call) always. */
    if (gpu) {
        tcase_add_loop_test(tc, registry_edges, 0, g_nrows);
        tcase_add_loop_test(tc, split_sums, 0, g_nrows);
        tcase_add_loop_test(tc, golden_qqq, 0, (int)(sizeof qqq_goldens / sizeof qqq_goldens[0]));
        tcase_add_test(tc, fp8_witness);
        tcase_add_loop_test(tc, act_quant, 0, (int)(sizeof aq_cases / sizeof aq_cases[0]));
    }
    tcase_add_test(tc, refusals);
    return gpu_suite_run(s);
}
