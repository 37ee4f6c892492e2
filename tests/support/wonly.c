/* wonly.c: wonly.h. */
#include "support/wonly.h"

#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "internal/gpu.h"
#include "internal/wonly_plan.h"
#include "qvet/formats.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "support/gpu.h"
#include "support/rand.h"

const char *const wonly_probe_names[PROBE_COUNT] = {"exact", "one-hot", "random"};
const char *const wonly_regime_names[REG_COUNT] = {"normal", "tiny", "large"};

/* ---- fills ------------------------------------------------------------------ */

static int64_t rnd_int(uint64_t seed, uint64_t stream, uint64_t i, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(test_rnd(seed, stream, i) % (uint64_t)(hi - lo + 1));
}

static uint32_t enc(qv_fmt f, double x) { return qv_encode(f, x, QV_SAT_FINITE); }

/* A random finite e4m3 code (0x7F / 0xFF are NaN). */
static uint8_t e4m3_random(uint64_t seed, uint64_t s, uint64_t i)
{
    uint8_t c = (uint8_t)test_rnd(seed, s, i);
    return (c & 0x7F) == 0x7F ? (uint8_t)(c - 1) : c;
}

/* Element i of buf, a scale array of format f (f32, one-byte codes for
 * E8M0 / UE4M3, else 16-bit codes). */
static void put(qv_fmt f, void *buf, int64_t i, double x)
{
    if (f == QV_FMT_F32)
        ((float *)buf)[i] = (float)x;
    else if (qv_fmt_storage_bytes(f) == 1)
        ((uint8_t *)buf)[i] = (uint8_t)enc(f, x);
    else
        ((uint16_t *)buf)[i] = (uint16_t)enc(f, x);
}

/* x rounded to format f and decoded (a value f holds exactly). */
static double held(qv_fmt f, double x) { return qv_decode(f, enc(f, x)); }

/* Scale exponent window [lo, hi] for the row, probe and regime. Exact probes
 * keep 4 bits of spread so that every partial sum stays exact in fp32 (4 bits
 * of spread + 13 of K = 4112 + 5 of |a * (q - z)| < 24); the tiny regime
 * reaches fp16 subnormal products (bf16: 2^-40 lower); fp8 rows keep scales
 * below 2^7 so that the packer's exponent-bias folding (x 2^8 in fp16) cannot
 * overflow. */
static void scale_window(const qv_variant *v, int probe, int regime, double *lo, double *hi)
{
    const int bf = v->afmt == QV_FMT_BF16;
    *lo = -6, *hi = 0;
    if (probe != PROBE_RANDOM) *lo = -4;
    if (regime == REG_TINY) *lo -= bf ? 40 : 14, *hi -= bf ? 40 : 14;
    if (regime == REG_LARGE) *lo += 4, *hi += 6;
}

void wonly_fill(qv_problem *p, int probe, int regime, uint64_t seed, uint64_t idx)
{
    const qv_variant *v = p->v;
    const int64_t m = p->m, n = p->n, k = p->k;
    /* 16 streams per case: activations 1 and 7, weights 2, scales 3, zero
     * points 4, the act_order permutation 5, FP4's global scale and bias 6. */
    const uint64_t s = idx * 16;

    /* Activations: small integers, one-hot rows, or signed log-uniform values. */
    for (int64_t i = 0; i < m; i++)
        for (int64_t kk = 0; kk < k; kk++) {
            const uint64_t e = (uint64_t)(i * k + kk);
            double x;
            if (probe == PROBE_EXACT)
                x = (double)rnd_int(seed, s + 1, e, -3, 3);
            else if (probe == PROBE_ONEHOT)
                x = kk == (i * 7 + 3) % k;
            else
                x = (test_rnd(seed, s + 7, e) & 1 ? -1 : 1) * exp2(-2.0 + 3.0 * test_rnd_unit(seed, s + 1, e));
            ((uint16_t *)p->a)[e] = (uint16_t)enc(v->afmt, x);
        }

    /* Weights: full code range (e2m1: every code, -0 included; all of them
     * multiples of 1/2 up to 6, exact in the exact probes' sums); exact e4m3
     * probes use small integers. */
    for (int64_t e = 0; e < k * n; e++) {
        switch (v->wfmt) {
        case QV_FMT_U4: ((uint8_t *)p->q)[e] = (uint8_t)rnd_int(seed, s + 2, (uint64_t)e, 0, 15); break;
        case QV_FMT_U8: ((uint8_t *)p->q)[e] = (uint8_t)rnd_int(seed, s + 2, (uint64_t)e, 0, 255); break;
        case QV_FMT_E2M1: ((uint8_t *)p->q)[e] = (uint8_t)rnd_int(seed, s + 2, (uint64_t)e, 0, 15); break;
        case QV_FMT_E4M3:
            ((uint8_t *)p->q)[e] = probe == PROBE_EXACT
                                       ? (uint8_t)enc(QV_FMT_E4M3, (double)rnd_int(seed, s + 2, (uint64_t)e, -4, 4))
                                       : e4m3_random(seed, s + 2, (uint64_t)e);
            break;
        case QV_FMT_F16:
        case QV_FMT_BF16: {
            double x = probe == PROBE_RANDOM ? (test_rnd_unit(seed, s + 2, (uint64_t)e) * 2.0 - 1.0)
                                             : (double)rnd_int(seed, s + 2, (uint64_t)e, -8, 7);
            ((uint16_t *)p->q)[e] = (uint16_t)enc(v->wfmt, x);
            break;
        }
        default: ck_abort_msg("%s: unexpected weight format", v->name);
        }
    }

    /* Scales: one value per channel / group, never one repeated value. */
    double lo, hi;
    scale_window(v, probe, regime, &lo, &hi);
    if (p->scales) {
        const int64_t cnt = qv_problem_scale_rows(p) * qv_problem_scale_cols(p);
        for (int64_t e = 0; e < cnt; e++) {
            double x = probe == PROBE_RANDOM
                           ? exp2(lo + (hi - lo) * test_rnd_unit(seed, s + 3, (uint64_t)e))
                           : ldexp(1.0, (int)rnd_int(seed, s + 3, (uint64_t)e, (int64_t)lo, (int64_t)hi));
            put(v->sfmt, p->scales, e, x);
        }
    }
    /* FP4: NVFP4's global scale (a power of two in the exact probes, so that
     * y G stays exact; log-uniform over 2^-8..2^8 in the random one) and the
     * bias (small integers, or signed log-uniform values held by its format),
     * stream 6. */
    if (p->scales2)
        for (int64_t e = 0; e < qv_problem_scale2_count(p); e++)
            p->scales2[e] = (float)(probe == PROBE_RANDOM
                                        ? held(v->s2fmt, exp2(-8.0 + 16.0 * test_rnd_unit(seed, s + 6, (uint64_t)e)))
                                        : ldexp(1.0, (int)rnd_int(seed, s + 6, (uint64_t)e, -3, 3)));
    if (p->bias)
        for (int64_t j = 0; j < n; j++) {
            const uint64_t e = (uint64_t)(2 * j);
            p->bias[j] = (float)(probe == PROBE_RANDOM
                                     ? held(v->bias_fmt, (test_rnd(seed, s + 6, e) & 1 ? -1 : 1) *
                                                             exp2(-4.0 + 8.0 * test_rnd_unit(seed, s + 6, e + 1)))
                                     : (double)rnd_int(seed, s + 6, e, -8, 7));
        }
    if (p->zeros) {
        const int64_t cnt = (k / p->g) * n;
        for (int64_t e = 0; e < cnt; e++) p->zeros[e] = (uint8_t)rnd_int(seed, s + 4, (uint64_t)e, 0, 15);
    }
    /* act_order: a random permutation of balanced groups, as GPTQ's desc_act
     * produces: g_idx[perm[i]] = i / g. */
    if (p->g_idx) {
        int64_t *perm = malloc(sizeof(int64_t) * (size_t)k);
        ck_assert_ptr_nonnull(perm);
        for (int64_t i = 0; i < k; i++) perm[i] = i;
        for (int64_t i = k - 1; i > 0; i--) {
            int64_t j = rnd_int(seed, s + 5, (uint64_t)i, 0, i), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int64_t i = 0; i < k; i++) p->g_idx[perm[i]] = (int32_t)(i / p->g);
        free(perm);
    }
}

void wonly_fill_scale_edges(qv_problem *p, int probe, uint64_t seed, uint64_t idx)
{
    const qv_variant *v = p->v;
    ck_assert_msg(v->g > 0 && p->scales, "%s: scale edges need group scales", v->name);
    const int64_t rows = qv_problem_scale_rows(p), cols = qv_problem_scale_cols(p);
    const uint64_t s = idx * 16 + 8; /* streams 8 and 9 of the case (wonly_fill uses 1-7) */
    const double largest_in = 65504.0 * ldexp(1.0, -20);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) {
            const uint64_t e = (uint64_t)(r * cols + j);
            const double u = test_rnd_unit(seed, s, e);
            double mag = r % 4 == 3 ? exp2(-4.0 + 4.0 * u) : exp2(-24.0 + 19.9 * u);
            if (r % 4 != 3 && j % 61 == r % 61) mag = largest_in;
            if (r % 4 == 1 && j == (r * 37) % cols) mag = 0.0625;
            if (r % 4 == 2 && j == (r * 53) % cols) mag = 1.0;
            put(v->sfmt, p->scales, (int64_t)e, test_rnd(seed, s + 1, e) & 1 ? -mag : mag);
        }
    if (probe == PROBE_ONEHOT) {
        const int64_t groups = p->k / p->g;
        for (int64_t i = 0; i < p->m; i++) {
            uint16_t *row = (uint16_t *)p->a + i * p->k;
            for (int64_t kk = 0; kk < p->k; kk++) row[kk] = (uint16_t)enc(v->afmt, 0.0);
            row[(i % groups) * p->g + (i * 7 + 3) % p->g] = (uint16_t)enc(v->afmt, 1.0);
        }
    }
}

/* ---- one case ----------------------------------------------------------------- */

/* After a bit-exact mismatch of the wgmma kernel: which column positions
 * inside a 64-column chunk and which token positions inside a 64-token tile
 * differ ('x'), the first mismatches, and for the first ones the columns of
 * the same chunk whose model value the kernel wrote there (a permuted
 * fragment shows as another column). out and model: (m, n) 16-bit codes,
 * row-major. */
static void diagnose(const qv_problem *p, const uint16_t *out, const uint16_t *model)
{
    char cols[65], toks[65];
    memset(cols, '.', 64), memset(toks, '.', 64);
    cols[64] = toks[64] = '\0';
    int shown = 0;
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            const int64_t e = i * p->n + j;
            if (out[e] == model[e]) continue;
            cols[j % 64] = 'x', toks[i % 64] = 'x';
            /* The first five mismatches in full: enough to see a pattern. */
            if (shown++ >= 4) continue;
            fprintf(stderr, "  (%" PRId64 ", %" PRId64 "): out 0x%04x model 0x%04x; model has it at columns", i, j,
                    out[e], model[e]);
            const int64_t c0 = j / 64 * 64;
            int found = 0;
            for (int64_t jj = c0; jj < c0 + 64 && found < 6; jj++)
                if (model[i * p->n + jj] == out[e]) fprintf(stderr, " %" PRId64, jj), found++;
            fprintf(stderr, "%s\n", found ? "" : " (none)");
        }
    fprintf(stderr, "  columns mod 64 differing: %s\n  tokens mod 64 differing:  %s\n", cols, toks);
}

int wonly_run_case(qv_problem *p, int probe, const char *label, unsigned flags, const qv_launch_opts *o)
{
    static const qv_probe_kind kinds[PROBE_COUNT] = {QV_PROBE_EXACT, QV_PROBE_ONEHOT, QV_PROBE_RANDOM};
    const qv_launch_opts opts = gpu_opts(o);
    if (flags & WONLY_WG) {
        qv_wo_path path = (qv_wo_path)0;
        ck_assert_int_eq(qv_wonly_route(p->v, (int)p->m, (int)p->n, (int)p->k, &opts, &path), QV_OK);
        ck_assert_msg(path == QV_WO_PATH_WG, "%s: the wgmma path does not take this case", label);
    }
    const size_t ob = (size_t)qv_problem_out_bytes(p);
    void *out = malloc(ob);
    ck_assert_ptr_nonnull(out);
    qv_gpu_stats st;
    qv_status s = qv_gpu_run(p, NULL, &opts, 2, out, &st);
    ck_assert_msg(s == QV_OK, "%s: qv_gpu_run: %s", label, qv_errmsg());
    int ok = 1;
    if (st.nondeterministic) {
        fprintf(stderr, "FAIL %s: two launches differ, first at element %" PRId64 "\n", label, st.first_diff);
        ok = 0;
    }
    if (st.guard_writes) {
        fprintf(stderr, "FAIL %s: %" PRId64 " bytes written past the output\n", label, st.guard_writes);
        ok = 0;
    }
    if (!gpu_verdict(p, kinds[probe], out, label, NULL)) {
        ok = 0;
        if ((flags & WONLY_WG) && probe != PROBE_RANDOM) {
            void *model = malloc(ob);
            ck_assert_ptr_nonnull(model);
            ck_assert_msg(ref_model_run(p, model) == QV_OK, "%s: model: %s", label, qv_errmsg());
            diagnose(p, out, model);
            free(model);
        }
    }
    free(out);
    return ok;
}

int wonly_one_case(const qv_variant *v, int64_t m, int64_t n, int64_t k, int probe, int regime, uint64_t seed,
                   uint64_t idx, unsigned flags, const qv_launch_opts *o)
{
    qv_problem p;
    ck_assert_msg(qv_problem_create(&p, v, m, n, k) == QV_OK, "%s: %s", v->name, qv_errmsg());
    wonly_fill(&p, probe, regime, seed, idx);
    char label[200];
    snprintf(label, sizeof label,
             "%s m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " %s/%s seed=%" PRIu64 " case=%" PRIu64, v->name, m, n,
             k, wonly_probe_names[probe], wonly_regime_names[regime], seed, idx);
    int ok = wonly_run_case(&p, probe, label, flags, o);
    qv_problem_destroy(&p);
    return ok;
}

qv_status wonly_counters_zero(const char *name, const void *ws, size_t ws_bytes, int64_t n)
{
    const size_t bytes = qv_wonly_counters_bytes((int)n);
    if (!ws || ws_bytes < bytes) return qv_fail(QV_ERR_USAGE, "%s: no counters area in the workspace", name);
    int *h = malloc(bytes);
    if (!h) return qv_fail(QV_ERR_NOMEM, "counters copy");
    const cudaError_t rc = cudaMemcpy(h, ws, bytes, cudaMemcpyDeviceToHost);
    int bad = -1;
    for (size_t i = 0; rc == cudaSuccess && i < bytes / sizeof(int) && bad < 0; i++)
        if (h[i] != 0) bad = (int)i;
    const int val = bad >= 0 ? h[bad] : 0;
    free(h);
    QV_CUDA_TRY(rc, "cudaMemcpy (counters)");
    if (bad >= 0) return qv_fail(QV_ERR_RANGE, "%s: workspace counter %d is %d after the launches", name, bad, val);
    return QV_OK;
}
