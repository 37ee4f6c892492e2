/* t_fp4.c: the Marlin FP4 rows (MXFP4 and NVFP4 weight-only, docs/design.md §11)
 * on the CPU side, from the registry: what each row declares and refuses,
 * that the GPU backend takes them (routes and launch refusals, without a
 * device; tests/t_gpu_ops.c runs their kernels), that every
 * FP4 probe produces what probe.h says it does (all 16 e2m1 codes, the scale
 * codes at the ends of their range, the global scales), that the fixed suite
 * of `qvet check` reaches each of them, that the CPU model run through
 * qv_pack and ref_unpack (the campaign's CPU backend) gives their unique
 * outputs bit for bit, and that the values the layouts cannot carry (e8m0 0
 * and 255, ue4m3 NaN or a sign, scale sets the bf16 lift overflows, a
 * partial last scale block) are refused with a message. Every expected
 * value comes from the formats' definitions (OCP MX v1.0, layout.h). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/campaign.h"
#include "internal/wonly_plan.h"
#include "qvet/formats.h"
#include "qvet/gemm.h"
#include "qvet/layout.h"
#include "qvet/probe.h"
#include "qvet/reference.h"
#include "qvet/spec.h"
#include "support/suite.h"

static int is_fp4(const qv_variant *v) { return qv_layout_is_fp4(v->layout); }

static int is_nv(const qv_variant *v) { return v->layout == QV_LAYOUT_MARLIN_FP4_NV; }

static int fp4_probe(int kind) { return kind >= QV_PROBE_FP4_CODES && kind < QV_PROBE_COUNT; }

/* The witness shape of the fixed suite (fuzz/gen.c, block F). */
enum { WM = 16, WN = 128, WK = 1024 };

static void fill(qv_problem *p, const qv_variant *v, int64_t m, int64_t n, int64_t k, qv_probe_kind kind, uint64_t seed)
{
    ck_assert_int_eq(qv_problem_create(p, v, m, n, k), QV_OK);
    ck_assert_msg(ref_probe_fill(p, kind, QV_REGIME_LOGUNIFORM, seed) == QV_OK, "%s %s: %s", v->name,
                  qv_probe_name(kind), qv_errmsg());
}

static uint8_t scale_code(const qv_problem *p, int64_t i) { return ((const uint8_t *)p->scales)[i]; }

static int64_t n_scales(const qv_problem *p) { return qv_problem_scale_rows(p) * qv_problem_scale_cols(p); }

/* 1 when some scale of p holds code c. */
static int has_code(const qv_problem *p, uint8_t c)
{
    for (int64_t i = 0; i < n_scales(p); i++)
        if (scale_code(p, i) == c) return 1;
    return 0;
}

/* The smallest and largest nonzero block scale values of p. */
static void scale_range(const qv_problem *p, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = 0;
    for (int64_t i = 0; i < n_scales(p); i++) {
        double s = qv_decode(p->v->sfmt, scale_code(p, i));
        if (s > 0 && s < *lo) *lo = s;
        if (s > *hi) *hi = s;
    }
}

/* The campaign's CPU backend on p (qv_pack, ref_unpack, the CPU model),
 * graded with the bits of the unique output; returns the grade. */
static qv_grade cpu_case(const qv_problem *p, int unique, char *reason, size_t len)
{
    qv_backend b;
    qv_backend_init(&b, QV_BACKEND_CPU);
    qv_outcome o;
    ck_assert_int_eq(qv_case_run(&b, p, unique, &o), QV_OK);
    qv_grade g = o.res.grade;
    snprintf(reason, len, "%s", o.res.reason);
    qv_outcome_clear(&o);
    return g;
}

/* ---- the rows ---------------------------------------------------------------- */

/* Eight rows: MXFP4 and NVFP4, f16 and bf16, with and without a bias in the
 * activation format; each row's fields are those of its formats, it has a
 * CPU model and a GPU kernel, and its canonical spec parses back to the same
 * arithmetic. */
START_TEST(rows_declare_their_formats)
{
    int seen[2][2][2] = {{{0}}};
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (!is_fp4(v)) continue;
        const int nv = is_nv(v), bf = v->afmt == QV_FMT_BF16, bias = v->bias_fmt != QV_FMT_NONE;
        seen[nv][bf][bias]++;
        ck_assert_int_eq(v->wfmt, QV_FMT_E2M1);
        ck_assert_int_eq(v->sfmt, nv ? QV_FMT_UE4M3 : QV_FMT_E8M0);
        ck_assert_int_eq(v->scale_layout, QV_SCALE_GROUP);
        ck_assert_int_eq(v->g, nv ? 16 : 32);
        ck_assert_int_eq(v->s2fmt, nv ? QV_FMT_F32 : QV_FMT_NONE);
        ck_assert_int_eq(v->s2_layout, nv ? QV_SCALE_TENSOR : QV_SCALE_NONE);
        ck_assert(v->afmt == QV_FMT_F16 || v->afmt == QV_FMT_BF16);
        ck_assert_int_eq(v->ofmt, v->afmt);
        ck_assert(!bias || v->bias_fmt == v->afmt);
        ck_assert_int_eq(v->arith.dequant, QV_DQ_MUL_RN);
        ck_assert_int_eq(v->arith.accum, QV_ACC_TC_F32);
        ck_assert_int_eq(v->n_tile, 64);
        ck_assert_int_eq(v->k_tile, 16);
        ck_assert_msg(v->gpu_kernel && v->cpu_model, "%s: gpu %d, cpu %d", v->name, v->gpu_kernel, v->cpu_model);
        /* epilogue: the global scale (NV), then the bias */
        int n_ep = 0;
        qv_ep_step want[2];
        if (nv) want[n_ep++] = QV_EP_MUL_WSCALE2;
        if (bias) want[n_ep++] = QV_EP_ADD_BIAS;
        for (int s = 0; s < n_ep; s++) ck_assert_int_eq(v->arith.epilogue[s], want[s]);
        ck_assert_int_eq(v->arith.epilogue[n_ep], QV_EP_END);
        char text[QV_SPEC_MAX];
        ck_assert_int_gt(qv_spec_format(v, text, sizeof text), 0);
        const qv_variant *sv;
        ck_assert_msg(qv_spec_parse(text, &sv) == QV_OK, "%s: spec '%s': %s", v->name, text, qv_errmsg());
        ck_assert(sv->wfmt == v->wfmt && sv->sfmt == v->sfmt && sv->g == v->g && sv->s2fmt == v->s2fmt &&
                  sv->s2_layout == v->s2_layout && sv->afmt == v->afmt && sv->ofmt == v->ofmt &&
                  sv->bias_fmt == v->bias_fmt && sv->arith.dequant == v->arith.dequant &&
                  sv->arith.accum == v->arith.accum && sv->arith.block_b == v->arith.block_b &&
                  !memcmp(sv->arith.epilogue, v->arith.epilogue, sizeof v->arith.epilogue));
    }
    for (int a = 0; a < 8; a++) ck_assert_msg(seen[a >> 2][(a >> 1) & 1][a & 1] == 1, "combination %d: %d rows", a,
                                              seen[a >> 2][(a >> 1) & 1][a & 1]);
}
END_TEST

/* N % 64, K % 16 and g | K: each refused with a message that says which, by
 * the row's shape check, qv_problem_create and the packer; a partial last
 * scale block (MXFP4: K = 48) among them. */
START_TEST(shape_rules)
{
    const qv_variant *v = qv_registry_get(_i);
    if (!is_fp4(v)) return;
    qv_problem p;
    ck_assert_int_eq(qv_variant_check_shape(v, 1, 64, v->g), QV_OK);
    ck_assert_int_eq(qv_variant_check_shape(v, 1, 96, 64), QV_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "not a multiple of 64"));
    ck_assert_int_eq(qv_variant_check_shape(v, 1, 64, 40), QV_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "not a multiple of 16"));
    if (!is_nv(v)) {
        ck_assert_int_eq(qv_variant_check_shape(v, 1, 64, 48), QV_ERR_SHAPE);
        ck_assert_msg(strstr(qv_errmsg(), "does not divide K=48") && strstr(qv_errmsg(), "partial"), "%s",
                      qv_errmsg());
        ck_assert_int_eq(qv_problem_create(&p, v, 1, 64, 48), QV_ERR_SHAPE);
        /* the packer refuses it too, from a problem built around the check */
        uint8_t q[48 * 64] = {0}, sc[2 * 64];
        memset(sc, 127, sizeof sc);
        qv_problem hand = {.v = v, .m = 1, .n = 64, .k = 48, .g = 32, .q = q, .scales = sc};
        float b[64] = {0};
        if (v->bias_fmt != QV_FMT_NONE) hand.bias = b;
        qv_packed pk;
        ck_assert_int_eq(qv_pack(&hand, &pk), QV_ERR_SHAPE);
        ck_assert_ptr_null(pk.b);
    }
    ck_assert_int_eq(qv_problem_create(&p, v, 1, 64, 2 * v->g), QV_OK);
    qv_problem_destroy(&p);
}
END_TEST

/* Their GPU kernels: both backends take every row, the whole registry's
 * GPU candidates include them, each reaches the weight-only launcher, whose
 * route table gives them the small-M kernel (M <= 16, M <= 8 on layers of
 * 2^27 weights or more) and the wgmma kernel above, and with the wgmma
 * kernel off the mma kernel (M = 17-63) and dequantize + cuBLAS (from
 * M = 64); a launch refuses an illegal shape (N off 64 columns, K off the group) and
 * missing buffers (the NV global scale, the packed bias) with a status and
 * a message, before any CUDA call. */
START_TEST(gpu_takes_them)
{
    qv_backend gpu, cpu;
    qv_backend_init(&gpu, QV_BACKEND_GPU);
    qv_backend_init(&cpu, QV_BACKEND_CPU);
    qv_gen gen;
    ck_assert_int_eq(qv_gen_init(&gen, "marlin-*fp4a16-*", &gpu), QV_OK);
    ck_assert_int_eq(gen.n_variants, 8);
    ck_assert_int_eq(qv_gen_init(&gen, "marlin-*fp4a16-*", &cpu), QV_OK);
    ck_assert_int_eq(gen.n_variants, 8);
    int fp4 = 0;
    ck_assert_int_eq(qv_gen_init(&gen, NULL, &gpu), QV_OK);
    for (int i = 0; i < gen.n_variants; i++) fp4 += is_fp4(gen.variants[i]);
    ck_assert_int_eq(fp4, 8);
    const qv_launch_opts h200 = {.sms = 132, .arch = 90};
    for (int i = 0; i < qv_registry_count(); i++) {
        const qv_variant *v = qv_registry_get(i);
        if (!is_fp4(v)) continue;
        ck_assert(qv_backend_has(&gpu, v) && qv_backend_has(&cpu, v));
        ck_assert_ptr_nonnull(qv_gpu_launcher(v));
        ck_assert_str_eq(qv_gpu_launcher(v)->family, "marlin");
        qv_wo_path path;
        ck_assert_int_eq(qv_wonly_route(v, 1, 4096, 4096, &h200, &path), QV_OK);
        ck_assert_int_eq(path, QV_WO_PATH_SMALL);
        /* M = 9-16 on a layer of 2^27 weights or more: the wgmma kernel,
         * as for the int4 rows (docs/kernel-paths.md). */
        ck_assert_int_eq(qv_wonly_route(v, 16, 4096, 4096, &h200, &path), QV_OK);
        ck_assert_int_eq(path, QV_WO_PATH_SMALL);
        ck_assert_int_eq(qv_wonly_route(v, 8, 8192, 28672, &h200, &path), QV_OK);
        ck_assert_int_eq(path, QV_WO_PATH_SMALL);
        ck_assert_int_eq(qv_wonly_route(v, 9, 8192, 28672, &h200, &path), QV_OK);
        ck_assert_int_eq(path, QV_WO_PATH_WG);
        ck_assert_int_eq(qv_wonly_route(v, 17, 4096, 4096, &h200, &path), QV_OK);
        ck_assert_int_eq(path, QV_WO_PATH_WG);
        ck_assert_int_eq(qv_wonly_route(v, 1024, 4096, 4096, &h200, &path), QV_OK);
        ck_assert_int_eq(path, QV_WO_PATH_WG);
        /* With the wgmma kernel off: the mma kernel to M = 63, dequantize +
         * cuBLAS from 64. */
        const qv_launch_opts no_wg = {.sms = 132, .arch = 90, .wo_wg_min_m = QV_OPT_OFF};
        ck_assert_int_eq(qv_wonly_route(v, 63, 8192, 28672, &no_wg, &path), QV_OK);
        ck_assert_int_eq(path, QV_WO_PATH_MMA);
        ck_assert_int_eq(qv_wonly_route(v, 64, 4096, 4096, &no_wg, &path), QV_OK);
        ck_assert_int_eq(path, QV_WO_PATH_DQ);
        qv_gemm_args args;
        memset(&args, 0, sizeof args);
        args.m = 1, args.n = 96, args.k = 64, args.g = v->g;
        ck_assert_int_ne(qv_gpu_launch(v, &args), QV_OK);
        ck_assert_msg(strstr(qv_errmsg(), "96"), "%s", qv_errmsg());
        args.n = 64, args.k = is_nv(v) ? 24 : 48; /* off the k16 tile (NV), off the group of 32 (MX) */
        ck_assert_int_ne(qv_gpu_launch(v, &args), QV_OK);
        ck_assert_msg(strstr(qv_errmsg(), is_nv(v) ? "24" : "48"), "%s", qv_errmsg());
        if (!is_nv(v) && v->bias_fmt == QV_FMT_NONE) continue;
        /* every buffer but the global scale and the packed bias */
        static const uint32_t buf[64];
        args.k = 2 * v->g;
        args.a = args.b = args.scales = buf;
        args.c = (void *)buf;
        ck_assert_int_eq(qv_gpu_launch(v, &args), QV_ERR_USAGE);
        ck_assert_msg(strstr(qv_errmsg(), "NULL"), "%s", qv_errmsg());
    }
}
END_TEST

/* ---- the probes -------------------------------------------------------------- */

/* Every FP4 probe applies where its formats are, and nowhere else. */
START_TEST(probes_apply_where_their_formats_are)
{
    const qv_variant *v = qv_registry_get(_i);
    for (int kind = QV_PROBE_FP4_CODES; kind < QV_PROBE_COUNT; kind++) {
        int want = is_fp4(v) && (kind <= QV_PROBE_FP4_SCALE_ENDS || is_nv(v));
        ck_assert_msg(ref_probe_applies(v, (qv_probe_kind)kind, WM, WN, WK) == want, "%s %s", v->name,
                      qv_probe_name((qv_probe_kind)kind));
    }
    if (is_fp4(v))
        ck_assert_int_eq(ref_probe_applies(v, QV_PROBE_WITNESS_BIAS, WM, WN, WK), v->bias_fmt != QV_FMT_NONE);
}
END_TEST

/* fp4-codes: every column holds all 16 codes (-0, code 8, among them),
 * every run of 16 columns of a row too, and every activation row is
 * one-hot. */
static void claims_codes(const qv_problem *p)
{
    const uint8_t *q = p->q;
    for (int64_t j = 0; j < p->n; j++) {
        int seen = 0;
        for (int64_t kk = 0; kk < p->k; kk++) seen |= 1 << q[kk * p->n + j];
        ck_assert_msg(seen == 0xFFFF, "column %lld holds codes 0x%04x", (long long)j, seen);
    }
    for (int64_t kk = 0; kk < p->k; kk++) {
        int seen = 0;
        for (int64_t j = 0; j < 16; j++) seen |= 1 << q[kk * p->n + j];
        ck_assert_int_eq(seen, 0xFFFF);
    }
    ck_assert(qv_decode(QV_FMT_E2M1, 8) == 0 && signbit(qv_decode(QV_FMT_E2M1, 8)));
    for (int64_t i = 0; i < p->m; i++) {
        int hot = 0;
        for (int64_t kk = 0; kk < p->k; kk++) hot += qv_problem_a(p, i, kk) != 0;
        ck_assert_int_eq(hot, 1);
    }
}

/* fp4-scale-ends: the codes at both ends of the block-scale format's range.
 * *end (bf16 NVFP4): 1 the low end was drawn, 2 the high one. */
static void claims_scale_ends(const qv_problem *p, int *end)
{
    const qv_variant *v = p->v;
    const int bf = v->afmt == QV_FMT_BF16;
    *end = 0;
    if (!is_nv(v)) {
        static const uint8_t bf_codes[] = {1, 2, 253, 254}, f16_codes[] = {1, 104, 141, 142, 254};
        const uint8_t *c = bf ? bf_codes : f16_codes;
        for (int t = 0; t < (bf ? 4 : 5); t++) ck_assert_msg(has_code(p, c[t]), "no e8m0 code %d", c[t]);
        ck_assert(!has_code(p, 0) && !has_code(p, 255));
        return;
    }
    double lo, hi;
    scale_range(p, &lo, &hi);
    ck_assert(has_code(p, 0));
    if (!bf) {
        ck_assert(has_code(p, 0x01) && has_code(p, 0x07) && has_code(p, 0x7D) && has_code(p, 0x7E));
        return;
    }
    if (has_code(p, 0x7E)) {
        *end = 2;
        ck_assert(has_code(p, 0x7D) && lo == 0x1p-6); /* 2^-6: no lift, so 448 2^7 fits */
    } else {
        *end = 1;
        ck_assert(has_code(p, 0x01) && has_code(p, 0x07) && lo == 0x1p-9 && hi <= 1.0);
    }
}

/* The value the packed operand's kernel reads as its global scale. */
static double packed_global(const qv_problem *p, int *s_pow2)
{
    qv_packed pk;
    ck_assert_msg(qv_pack(p, &pk) == QV_OK, "%s", qv_errmsg());
    double G = ((const float *)pk.scales2)[0];
    *s_pow2 = pk.s_pow2;
    qv_packed_destroy(&pk);
    return G;
}

static void claims_global(const qv_problem *p, qv_probe_kind kind)
{
    const qv_variant *v = p->v;
    const int bf = v->afmt == QV_FMT_BF16;
    double lo, hi, g = p->scales2[0];
    int s_pow2;
    scale_range(p, &lo, &hi);
    double G = packed_global(p, &s_pow2);
    if (kind == QV_PROBE_FP4_GLOBAL_ONE) {
        /* every block scale a ue4m3 subnormal: bf16 lifts them by 2^3 */
        ck_assert(g == 1.0 && hi < 0x1p-6 && lo == 0x1p-9);
        ck_assert_int_eq(s_pow2, bf ? 10 : 7);
        ck_assert(G == (bf ? 0x1p116 : 0x1p7));
    } else if (kind == QV_PROBE_FP4_GLOBAL_TINY) {
        ck_assert(g == (v->ofmt == QV_FMT_BF16 ? 0x1p-120 : 0x1p-24) && lo >= 256);
        /* the sum before the global scale passes 2^23: in an f16 kernel's
         * units (2^-7 of it) past 65504, where a cast first gives Inf */
        ref_truth t;
        ck_assert_int_eq(ref_truth_compute(p, &t), QV_OK);
        double top = 0;
        for (int64_t e = 0; e < p->m * p->n; e++) top = fmax(top, fabs(t.y[e]));
        ref_truth_clear(&t);
        ck_assert_msg(top / g > 0x1p23, "largest sum before g: %g", top / g);
    } else {
        /* bf16: g 2^(126 - s_pow2) with s_pow2 = 7 is 2^127, f32's largest power of two */
        ck_assert(g == (bf ? 0x1p8 : 0x1p32) && lo == 0x1p-6 && hi <= 0x1p-4);
        ck_assert_int_eq(s_pow2, 7);
        ck_assert(G == (bf ? 0x1p127 : 0x1p39));
    }
}

/* Each FP4 probe that applies to the row, over seeds: what it claims, and
 * the CPU backend's output equal to the unique correct one. Over the seeds a
 * bf16 NVFP4 row draws both ends of the ue4m3 range. */
START_TEST(probes_claim_and_pass)
{
    const qv_variant *v = qv_registry_get(_i);
    if (!is_fp4(v)) return;
    int ends[3] = {0};
    for (int kind = QV_PROBE_FP4_CODES; kind < QV_PROBE_COUNT; kind++) {
        if (!ref_probe_applies(v, (qv_probe_kind)kind, WM, WN, WK)) continue;
        for (uint64_t seed = 1; seed <= 6; seed++) {
            qv_problem p;
            int64_t k = seed % 2 ? WK : 4 * v->g;
            fill(&p, v, seed % 3 ? WM : 3, WN, k, (qv_probe_kind)kind, seed);
            if (kind == QV_PROBE_FP4_CODES) claims_codes(&p);
            else if (kind == QV_PROBE_FP4_SCALE_ENDS) {
                int end;
                claims_scale_ends(&p, &end);
                ends[end]++;
            } else if (k == WK)
                claims_global(&p, (qv_probe_kind)kind);
            char why[512];
            ck_assert_msg(cpu_case(&p, 1, why, sizeof why) == QV_PASS, "%s %s seed %llu k=%lld: %s", v->name,
                          qv_probe_name((qv_probe_kind)kind), (unsigned long long)seed, (long long)k, why);
            qv_problem_destroy(&p);
        }
    }
    if (is_nv(v) && v->afmt == QV_FMT_BF16) ck_assert_msg(ends[1] && ends[2], "ends drawn: low %d, high %d", ends[1], ends[2]);
}
END_TEST

/* MXFP4 scale ends: the high rows of the last column hold code 254 and
 * weights +-2, which the dequantization rounds to +-Inf (2 2^127 is past
 * bf16's range, 2 2^15 past f16's), so that column's sums are Inf or NaN;
 * every other column is finite. */
START_TEST(scale_ends_overflow_column)
{
    const qv_variant *v = qv_registry_get(_i);
    if (!is_fp4(v) || is_nv(v)) return;
    qv_problem p;
    fill(&p, v, 4, 64, 3 * 32 * 2, QV_PROBE_FP4_SCALE_ENDS, 5);
    ref_truth t;
    ck_assert_int_eq(ref_truth_compute(&p, &t), QV_OK);
    for (int64_t i = 0; i < p.m; i++)
        for (int64_t j = 0; j < p.n; j++) {
            int fin = isfinite(t.y[i * p.n + j]) != 0;
            ck_assert_msg(fin == (j != p.n - 1), "y[%lld][%lld] = %g", (long long)i, (long long)j, t.y[i * p.n + j]);
        }
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
}
END_TEST

/* The fixed suite of `qvet check` runs every FP4 probe that applies to the
 * row (block F, at the witness shape after the CPU cap). */
START_TEST(suite_reaches_the_probes)
{
    const qv_variant *v = qv_registry_get(_i);
    if (!is_fp4(v)) return;
    int seen[QV_PROBE_COUNT] = {0}, want = 0, got = 0;
    for (int j = 0; j < qv_suite_count(v, QV_CPU_CAP_CHECK); j++) {
        qv_case c;
        qv_suite_case(v, QV_CPU_CAP_CHECK, 7, j, &c);
        seen[c.probe]++;
    }
    for (int kind = 0; kind < QV_PROBE_COUNT; kind++) {
        if (!fp4_probe(kind) || !ref_probe_applies(v, (qv_probe_kind)kind, WM, WN, WK)) continue;
        want++;
        got += seen[kind] > 0;
        ck_assert_msg(seen[kind] == 1, "%s: the fixed suite runs %s %d times", v->name,
                      qv_probe_name((qv_probe_kind)kind), seen[kind]);
    }
    ck_assert_int_eq(got, is_nv(v) ? 5 : 2);
    ck_assert_int_eq(seen[QV_PROBE_WITNESS_BIAS], v->bias_fmt != QV_FMT_NONE);
}
END_TEST

/* ---- what the layouts cannot carry ---------------------------------------------- */

/* Sets scale i of p to byte c, packs, and expects a refusal whose message
 * holds `what`; the CPU backend FAILs the case with that message. */
static void refused(qv_problem *p, int64_t i, uint8_t c, const char *what)
{
    uint8_t old = ((uint8_t *)p->scales)[i];
    ((uint8_t *)p->scales)[i] = c;
    qv_packed pk;
    ck_assert_int_eq(qv_pack(p, &pk), QV_ERR_RANGE);
    ck_assert_msg(strstr(qv_errmsg(), what) != NULL, "%s code 0x%02X: '%s' lacks '%s'", p->v->name, c, qv_errmsg(),
                  what);
    ck_assert_ptr_null(pk.b);
    char why[512];
    ck_assert(cpu_case(p, 0, why, sizeof why) == QV_FAIL);
    ck_assert_msg(strstr(why, "backend error") && strstr(why, what), "%s", why);
    ((uint8_t *)p->scales)[i] = old;
}

/* e8m0 codes 0 (2^-127, which the kernel reads as 0) and 255 (NaN, read as
 * +Inf); ue4m3 NaN (0x7F) and a sign bit; with bf16 a scale set that spans
 * 2^-9 to 448 (the lift of 2^3 pushes 448 past the S0E5M3 byte); and the
 * decoder refuses an e8m0 byte 0 that a packer wrote. */
START_TEST(values_the_layouts_cannot_carry)
{
    const qv_variant *v = qv_registry_get(_i);
    if (!is_fp4(v)) return;
    qv_problem p;
    fill(&p, v, 2, 64, 4 * v->g, QV_PROBE_EXACT, 11);
    if (!is_nv(v)) {
        refused(&p, 3, 0x00, "e8m0 scale [0][3] = 0");
        refused(&p, 70, 0xFF, "e8m0 scale [1][6] = 0xFF (NaN)");
        qv_packed pk;
        ck_assert_int_eq(qv_pack(&p, &pk), QV_OK);
        ((uint8_t *)pk.scales)[5] = 0;
        qv_problem d;
        ck_assert_int_eq(qv_problem_clone(&d, &p), QV_OK);
        ck_assert_int_eq(ref_unpack(&pk, &d), QV_ERR_RANGE);
        qv_problem_destroy(&d);
        qv_packed_destroy(&pk);
    } else {
        refused(&p, 0, 0x7F, "not a finite non-negative ue4m3 code");
        refused(&p, 1, 0x88, "not a finite non-negative ue4m3 code");
        if (v->afmt == QV_FMT_BF16) {
            ((uint8_t *)p.scales)[2] = 0x01; /* 2^-9: the lift becomes 2^3 */
            refused(&p, 3, 0x7E, "overflows the kernel's S0E5M3 byte");
        }
    }
    qv_problem_destroy(&p);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = suite_single("fp4", "fp4", 120, &tc);
    tcase_add_test(tc, rows_declare_their_formats);
    tcase_add_loop_test(tc, shape_rules, 0, qv_registry_count());
    tcase_add_test(tc, gpu_takes_them);
    tcase_add_loop_test(tc, probes_apply_where_their_formats_are, 0, qv_registry_count());
    tcase_add_loop_test(tc, probes_claim_and_pass, 0, qv_registry_count());
    tcase_add_loop_test(tc, scale_ends_overflow_column, 0, qv_registry_count());
    tcase_add_loop_test(tc, suite_reaches_the_probes, 0, qv_registry_count());
    tcase_add_loop_test(tc, values_the_layouts_cannot_carry, 0, qv_registry_count());
    return suite_run(s);
}
