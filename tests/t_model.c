/* t_model.c: the CPU models of every registry row against the truth.
 *   - the certified bound holds for the model on random cases of every regime
 *     (about 200 per variant; `make fuzz` runs many more);
 *   - exact, one-hot and witness probes: the model matches, bit for bit, the
 *     unique correct output derived independently (the exact truth's correctly
 *     rounded value, or a closed form for the fp8 promotion witness).
 * Seeds: QVET_SEED (default 1) with the case index; every failure prints both. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/formats.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "support/cases.h"
#include "support/suite.h"

#define CASES_PER_VARIANT 200

/* The suite's seed: QVET_SEED, default 1. */
static uint64_t base_seed(void) { return case_seed(1); }

/* This suite's case seeds (its own salt: an arbitrary odd constant). */
static uint64_t mix(uint64_t a, uint64_t b) { return case_mix(a, b, 0x632BE59BD9B4E019ull); }

/* A small legal shape for the row, drawn from the seed. */
static void pick_shape(const qv_variant *v, uint64_t s, int64_t *m, int64_t *n, int64_t *k)
{
    static const int64_t ms[] = {1, 2, 3, 5, 8};
    *m = ms[s % 5];
    *n = v->n_tile * (int64_t)(1 + (s >> 8) % 2);
    int64_t step = v->k_tile;
    if (v->g > 0 && v->g > step) step = v->g;
    int64_t mult = 1 + (int64_t)((s >> 16) % 3);
    if (step < 64) mult *= 4; /* reach K of a few hundred for the 16-wide rows */
    *k = step * mult;
}

static size_t out_bytes(const qv_problem *p) { return (size_t)qv_problem_out_bytes(p); }

/* The random case of seed s: a shape from pick_shape and a regime from bits
 * 40 and up, filled by the random probe into p (the caller destroys it). */
static qv_regime random_case(const qv_variant *v, uint64_t s, qv_problem *p)
{
    int64_t m, n, k;
    pick_shape(v, s, &m, &n, &k);
    qv_regime rg = (qv_regime)((s >> 40) % QV_REGIME_COUNT);
    case_fill(p, v, m, n, k, QV_PROBE_RANDOM, rg, s);
    return rg;
}

/* The output codes that the correctly rounded exact values give. */
static void expected_from_truth(const qv_problem *p, const ref_truth *t, void *exp)
{
    const qv_variant *v = p->v;
    for (int64_t e = 0; e < p->m * p->n; e++) {
        uint32_t c = qv_encode(v->ofmt, t->y_rn[e], v->arith.out_sat);
        if (v->ofmt == QV_FMT_F32)
            ((uint32_t *)exp)[e] = c;
        else
            ((uint16_t *)exp)[e] = (uint16_t)c;
    }
}

START_TEST(bound_holds_for_model)
{
    const qv_variant *v = qv_registry_get(_i);
    uint64_t seed = base_seed();
    int marginal = 0;
    for (int c = 0; c < CASES_PER_VARIANT; c++) {
        uint64_t s = mix(seed, (uint64_t)_i * 100003 + (uint64_t)c);
        qv_problem p;
        qv_regime rg = random_case(v, s, &p);
        void *out = malloc(out_bytes(&p));
        ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
        ref_truth t;
        case_truth(&p, &t);
        qv_result r;
        ref_verify(&p, &t, out, &r);
        if (r.grade == QV_FAIL)
            ck_abort_msg("%s seed=%llu case=%d m=%lld n=%lld k=%lld regime=%s path=%s: %s", v->name,
                         (unsigned long long)seed, c, (long long)p.m, (long long)p.n, (long long)p.k,
                         qv_regime_name(rg), t.path, r.reason);
        ck_assert_msg(r.max_err_over_bound <= 1.0, "%s case %d: max err/E %.3g > 1 in a passing case", v->name, c,
                      r.max_err_over_bound);
        marginal += r.grade == QV_MARGINAL;
        free(out);
        case_release(&p, &t);
    }
    /* The monitors are statistical: a correct model may trip one rarely, never often. */
    ck_assert_msg(marginal <= CASES_PER_VARIANT / 20, "%s: %d of %d model cases graded MARGINAL (seed %llu)",
                  v->name, marginal, CASES_PER_VARIANT, (unsigned long long)seed);
}
END_TEST

/* Runs one unique-output probe on the row and compares with the truth's RN value. */
static void check_unique_probe(const qv_variant *v, qv_probe_kind kind, int64_t m, int64_t n, int64_t k,
                               uint64_t s)
{
    if (!ref_probe_applies(v, kind, m, n, k)) return;
    qv_problem p;
    ck_assert_int_eq(qv_problem_create(&p, v, m, n, k), QV_OK);
    qv_status st = ref_probe_fill(&p, kind, QV_REGIME_LOGUNIFORM, s);
    if (st == QV_ERR_UNSUPPORTED) {
        qv_problem_destroy(&p);
        return;
    }
    ck_assert_msg(st == QV_OK, "%s %s: %s", v->name, qv_probe_name(kind), qv_errmsg());
    void *out = malloc(out_bytes(&p)), *exp = malloc(out_bytes(&p));
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    if (kind == QV_PROBE_WITNESS_FP8_PROMOTE) {
        /* Closed form: 2^16 alone in the first 128-block, then ones, each later
         * block's 128 ones summed exactly and promoted: the exact sum, for any
         * accumulator width the rows declare. */
        int64_t first = k < 128 ? k : 128;
        double y = (65536.0 + (double)(k - first)) * 0x1p-5;
        for (int64_t e = 0; e < m * n; e++) ((uint16_t *)exp)[e] = (uint16_t)qv_encode(v->ofmt, y, v->arith.out_sat);
    } else {
        ref_truth t;
        /* int64 or MPFR, never the model's arithmetic; fixed128 (also exact) for deep K. */
        const char *path = v->arith.accum == QV_ACC_INT32 ? "int64" : m * n * k > (1 << 18) ? "fixed128" : "mpfr";
        ck_assert_int_eq(ref_truth_compute_path(&p, path, &t), QV_OK);
        expected_from_truth(&p, &t, exp);
        ref_truth_clear(&t);
    }
    qv_result r;
    ref_verify_bitexact(&p, exp, out, &r);
    ck_assert_msg(r.grade == QV_PASS, "%s probe %s seed=%llu m=%lld n=%lld k=%lld: %s", v->name,
                  qv_probe_name(kind), (unsigned long long)s, (long long)m, (long long)n, (long long)k, r.reason);
    free(out);
    free(exp);
    qv_problem_destroy(&p);
}

START_TEST(unique_probes_bit_exact)
{
    const qv_variant *v = qv_registry_get(_i);
    uint64_t seed = base_seed();
    for (int c = 0; c < 6; c++) {
        uint64_t s = mix(seed, 7777 + (uint64_t)_i * 31 + (uint64_t)c);
        int64_t m, n, k;
        pick_shape(v, s, &m, &n, &k);
        for (int kind = 0; kind < QV_PROBE_COUNT; kind++)
            if (kind != QV_PROBE_RANDOM) check_unique_probe(v, (qv_probe_kind)kind, m, n, k, s);
    }
    /* Exact mode at a real layer depth: the partial sums must stay exact at K = 4096. */
    check_unique_probe(v, QV_PROBE_EXACT, 2, v->n_tile, 4096, mix(seed, 99));
    /* The fp8 promotion witness across a promotion boundary (K = 384). */
    if (v->arith.accum == QV_ACC_TC_FP8) check_unique_probe(v, QV_PROBE_WITNESS_FP8_PROMOTE, 2, v->n_tile, 384, seed);
}
END_TEST

/* A witness must separate the declared arithmetic from the cheaper one and
 * agree with every wider one. With a 14-bit accumulator promoted every 128
 * products (cuBLASLt's promoted path, measured), the probe's output is the
 * exact sum (65536 + 1024 - 128) / 32; promoted with 24 bits (the mma
 * kernel) it is the same; unpromoted (promote_nc = K) the ones vanish next to
 * 2^16 and 65536 / 32 remains. docs/design.md §3's sequence (ones right after 2^16)
 * is the measured anchor of the 14-bit model: exact minus 127. */
START_TEST(fp8_witness_separates)
{
    const qv_variant *row = qv_variant_find("w8a8-fp8-tensor");
    ck_assert_ptr_nonnull(row);
    qv_variant w = *row;
    w.arith.acc_bits = 14;
    w.arith.promote_nc = 128;
    const qv_variant *v = &w;
    qv_problem p;
    case_fill(&p, v, 1, 8, 1024, QV_PROBE_WITNESS_FP8_PROMOTE, QV_REGIME_LOGUNIFORM, 1);
    ref_truth t;
    case_truth(&p, &t);
    ck_assert_double_eq(t.y[0], (65536.0 + 1024.0 - 128.0) / 32.0);
    uint16_t out[8];
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    ck_assert_double_eq(qv_decode(QV_FMT_F16, out[0]), (65536.0 + 1024.0 - 128.0) / 32.0);
    w.arith.acc_bits = 24;
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    ck_assert_double_eq(qv_decode(QV_FMT_F16, out[0]), (65536.0 + 1024.0 - 128.0) / 32.0);
    w.arith.acc_bits = 14;
    w.arith.promote_nc = 1024;
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    ck_assert_double_eq(qv_decode(QV_FMT_F16, out[0]), 65536.0 / 32.0);
    /* docs/design.md §3's sequence: 2^16, then 1023 ones. */
    w.arith.promote_nc = 128;
    for (int64_t kk = 1; kk < 128; kk++) ((uint8_t *)p.a)[kk] = (uint8_t)qv_encode(QV_FMT_E4M3, 1.0, QV_SAT_FINITE);
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    ck_assert_double_eq(qv_decode(QV_FMT_F16, out[0]), (65536.0 + 1023.0 - 127.0) / 32.0);
    case_release(&p, &t);
}
END_TEST

/* Split-K witness: the exact output is 1 * scales; an fp16 reduction gives 0. */
START_TEST(splitk_witness_value)
{
    qv_problem p;
    case_fill_row(&p, "marlin-w4a16-g128-f16", 2, 64, 256, QV_PROBE_WITNESS_SPLITK, QV_REGIME_LOGUNIFORM, 5);
    uint16_t out[128];
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    for (int e = 0; e < 128; e++) ck_assert_double_eq(qv_decode(QV_FMT_F16, out[e]), 1.0);
    qv_problem_destroy(&p);
}
END_TEST

/* RNE-tie witness: every output is a tie, and RNE picks the even neighbour. */
START_TEST(rne_tie_witness_values)
{
    qv_problem p;
    case_fill_row(&p, "w8a8-i8-tok-ch", 1, 16, 64, QV_PROBE_WITNESS_RNE_TIE, QV_REGIME_LOGUNIFORM, 9);
    ref_truth t;
    case_truth(&p, &t);
    uint16_t out[16];
    ck_assert_int_eq(ref_model_run(&p, out), QV_OK);
    for (int j = 0; j < 16; j++) {
        double y = t.y[j], a = fabs(y);
        ck_assert_msg(a == 2049 || a == 2051, "column %d: y = %g is not a tie", j, y);
        double want = copysign(a == 2049 ? 2048 : 2052, y);
        ck_assert_double_eq(qv_decode(QV_FMT_F16, out[j]), want);
    }
    case_release(&p, &t);
}
END_TEST

/* Probes are pure functions of their inputs. */
START_TEST(probes_deterministic)
{
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-act-f16");
    qv_problem a, b;
    case_fill(&a, v, 3, 64, 256, QV_PROBE_RANDOM, QV_REGIME_OUTLIER, 42);
    case_fill(&b, v, 3, 64, 256, QV_PROBE_RANDOM, QV_REGIME_OUTLIER, 42);
    ck_assert_mem_eq(a.a, b.a, 3 * 256 * 2);
    ck_assert_mem_eq(a.q, b.q, 256 * 64);
    ck_assert_mem_eq(a.g_idx, b.g_idx, 256 * 4);
    ck_assert_int_eq(ref_probe_fill(&b, QV_PROBE_RANDOM, QV_REGIME_OUTLIER, 43), QV_OK);
    ck_assert(memcmp(a.q, b.q, 256 * 64) != 0);
    qv_problem_destroy(&a);
    qv_problem_destroy(&b);
}
END_TEST

/* An independent rendering of tensor-core fp32 accumulation, as adversarial
 * as the declared model allows: blocks of 16 products aligned to the largest
 * exponent among them and the accumulator, each product truncated to the
 * accumulator's 24 bits at that alignment (never finer than fp32's subnormal
 * quantum 2^-149), the block sum truncated again, and four split-K slices
 * reduced in fp32 in reverse order; then the epilogue's steps in order, in
 * fp32. A kernel reading marlin-fp4-nv sums in its own units (layout.h): the
 * weights times 2^(s_pow2 - bias), bias 14 (f16) or 126 (bf16), s_pow2 = 7
 * raised for bf16 until the smallest nonzero block scale s 2^s_pow2 reaches
 * 2, and the global scale times 2^(bias - s_pow2); so does this rendering.
 * Written from the problem's accessors only (qv_problem_a/wq/scale/scale2,
 * qv_encode). */
static double trunc_to(double x, double quantum) { return trunc(x / quantum) * quantum; }

/* The fp32 truncation quantum at exponent e: 2^(e - 23), at least 2^-149. */
static double quantum_at(int e) { return ldexp(1.0, e - 23 < -149 ? -149 : e - 23); }

/* The power of two a marlin-fp4-nv kernel's accumulator holds the declared
 * sums times (0 for every other layout), from the layout's definition. */
static int kernel_units(const qv_problem *p)
{
    const qv_variant *v = p->v;
    if (v->layout != QV_LAYOUT_MARLIN_FP4_NV) return 0;
    int s_pow2 = 7, bias = v->afmt == QV_FMT_BF16 ? 126 : 14;
    double lo = INFINITY;
    for (int64_t kk = 0; kk < p->k; kk++)
        for (int64_t j = 0; j < p->n; j++) {
            double sc = qv_problem_scale(p, kk, j);
            if (sc > 0 && sc < lo) lo = sc;
        }
    while (v->afmt == QV_FMT_BF16 && isfinite(lo) && ldexp(lo, s_pow2) < 2.0) s_pow2++;
    return s_pow2 - bias;
}

static void tensor_core_model(const qv_problem *p, uint16_t *out)
{
    const qv_variant *v = p->v;
    int64_t m = p->m, n = p->n, k = p->k, slices = 4, ks = (k + slices - 1) / slices;
    int eu = kernel_units(p);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float part[4] = {0, 0, 0, 0};
            for (int64_t sl = 0; sl < slices; sl++) {
                double acc = 0;
                for (int64_t b0 = sl * ks; b0 < (sl + 1) * ks && b0 < k; b0 += 16) {
                    double prod[16];
                    int np = 0, emax = acc != 0 ? ilogb(acc) : -1000;
                    for (int64_t kk = b0; kk < b0 + 16 && kk < (sl + 1) * ks && kk < k; kk++) {
                        double w = qv_problem_wq(p, kk, j);
                        if (v->arith.dequant == QV_DQ_MUL_RN)
                            w = qv_decode(v->afmt, qv_encode(v->afmt, w * qv_problem_scale(p, kk, j), QV_SAT_NONE));
                        prod[np] = ldexp(qv_problem_a(p, i, kk) * w, eu);
                        if (prod[np] != 0 && ilogb(prod[np]) > emax) emax = ilogb(prod[np]);
                        np++;
                    }
                    double q = quantum_at(emax), s = trunc_to(acc, q);
                    for (int t = 0; t < np; t++) s += trunc_to(prod[t], q);
                    acc = (float)s == s ? s : trunc_to(s, quantum_at(ilogb(s)));
                }
                part[sl] = (float)acc;
            }
            float x = ((part[3] + part[2]) + part[1]) + part[0];
            for (int st = 0; st < QV_EP_MAX && v->arith.epilogue[st] != QV_EP_END; st++)
                switch (v->arith.epilogue[st]) {
                case QV_EP_MUL_WSCALE: x = x * (float)qv_problem_scale(p, 0, j); break;
                case QV_EP_MUL_WSCALE2: x = x * (float)ldexp(qv_problem_scale2(p, j), -eu); break;
                case QV_EP_ADD_BIAS: x = x + p->bias[j]; break;
                default: break;
                }
            out[i * n + j] = (uint16_t)qv_encode(v->ofmt, x, v->arith.out_sat);
        }
}

START_TEST(bound_holds_for_tensor_core_rendering)
{
    const qv_variant *v = qv_registry_get(_i);
    if (v->arith.accum != QV_ACC_TC_F32) return;
    uint64_t seed = base_seed();
    for (int c = 0; c < 25; c++) {
        uint64_t s = mix(seed, 90000 + (uint64_t)_i * 977 + (uint64_t)c);
        qv_problem p;
        qv_regime rg = random_case(v, s, &p);
        uint16_t *out = malloc(out_bytes(&p));
        tensor_core_model(&p, out);
        ref_truth t;
        case_truth(&p, &t);
        qv_result r;
        ref_verify(&p, &t, out, &r);
        ck_assert_msg(r.grade != QV_FAIL, "%s seed=%llu case=%d m=%lld n=%lld k=%lld regime=%s: %s", v->name,
                      (unsigned long long)seed, c, (long long)p.m, (long long)p.n, (long long)p.k,
                      qv_regime_name(rg), r.reason);
        free(out);
        case_release(&p, &t);
    }
}
END_TEST

/* ref_probe_applies is exact: every probe it accepts fills without error, on
 * the shapes the campaign draws (tile edges, one group, deep K). */
START_TEST(applies_means_fills)
{
    const qv_variant *v = qv_registry_get(_i);
    const int64_t ks[] = {16, 32, 48, 128, 384, 4096, 20480};
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++) {
        int64_t k = ks[a];
        if (qv_variant_check_shape(v, 1, v->n_tile, k) != QV_OK) continue;
        for (int kind = 0; kind < QV_PROBE_COUNT; kind++) {
            if (!ref_probe_applies(v, (qv_probe_kind)kind, 1, v->n_tile, k)) continue;
            qv_problem p;
            ck_assert_int_eq(qv_problem_create(&p, v, 1, v->n_tile, k), QV_OK);
            qv_status st = ref_probe_fill(&p, (qv_probe_kind)kind, QV_REGIME_NEAR_MAX, 3);
            ck_assert_msg(st == QV_OK, "%s k=%lld probe %s: %s", v->name, (long long)k,
                          qv_probe_name((qv_probe_kind)kind), qv_errmsg());
            qv_problem_destroy(&p);
        }
    }
}
END_TEST

int main(void)
{
    printf("t_model: seed %llu (set QVET_SEED to replay)\n", (unsigned long long)base_seed());
    TCase *tc;
    Suite *s = suite_single("model", "model", 120, &tc);
    int nv = qv_registry_count();
    tcase_add_loop_test(tc, bound_holds_for_model, 0, nv);
    tcase_add_loop_test(tc, unique_probes_bit_exact, 0, nv);
    tcase_add_loop_test(tc, applies_means_fills, 0, nv);
    tcase_add_loop_test(tc, bound_holds_for_tensor_core_rendering, 0, nv);
    tcase_add_test(tc, fp8_witness_separates);
    tcase_add_test(tc, splitk_witness_value);
    tcase_add_test(tc, rne_tie_witness_values);
    tcase_add_test(tc, probes_deterministic);
    return suite_run(s);
}
