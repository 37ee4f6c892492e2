/* cmd_verify.c: `qvet verify`: checks an output produced anywhere (a GPU kernel,
 * another library, a file from a colleague) against a variant's declared
 * arithmetic, from the same quantized inputs, with the certified reference.
 * Exit: 0 PASS or MARGINAL, 1 FAIL, 2 usage or input error (cli.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/array.h"
#include "qvet/cli.h"
#include "qvet/formats.h"
#include "qvet/layout.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/result.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qvet verify VARIANT --a A.npy [--a-scale SA.npy] [--azp AZP.npy]\n"
            "                   --q Q.npy --scales S.npy [--scales2 S2.npy] [--zeros Z.npy]\n"
            "                   [--g-idx G.npy] --out C.npy [--packed DIR] [--path P] [--json]\n\n"
            "Verifies C = A x W against VARIANT's declared arithmetic (qvet list), where W is\n"
            "dequantized from the logical quantized arrays exactly as the variant declares.\n"
            "Every element must lie in the output rounding of [y - E, y + E] (y exact, E the\n"
            "certified bound); statistical monitors give MARGINAL.\n\n"
            "  --a A.npy         (M, K) activations: float16, bf16 as <u2 bits, int8, or e4m3 codes (uint8)\n"
            "  --a-scale SA.npy  float32: (1) per tensor, (M, 1) per token, (ceil(K/128), M) per block\n"
            "                   (MN-major: the M tokens of each 128-K group contiguous)\n"
            "  --azp AZP.npy     int32 activation zero points: (1) or (M)\n"
            "  --q Q.npy         (K, N) weight codes: uint4 as int8/uint8 0..15, int4 as int8 -8..7,\n"
            "                    uint8 (q+128), int8, e4m3 codes (uint8), float16, bf16 (<u2)\n"
            "  --scales S.npy    weight scales: (1, 1), (1, N), (K/g, N) or (ceil(K/128), ceil(N/128))\n"
            "  --scales2 S2.npy  (1, N) float32 channel scales (QQQ per-group)\n"
            "  --zeros Z.npy     (K/g, N) zero points 0..15 (int8 or uint8)\n"
            "  --g-idx G.npy     (K) int32 or int64 group of each row (act_order)\n"
            "  --out C.npy       (M, N) output: float16, bf16 (<u2) or float32\n"
            "  --packed DIR      weights from DIR/B.npy, scales.npy, scales2.npy, zeros.npy,\n"
            "                    perm.npy, g_idx.npy as `qvet pack` writes them, decoded by the\n"
            "                    reference's independent decoder (replaces --q/--scales/...)\n"
            "  --path P          force the reference path: int64, fixed128, mpfr, dgemm+cert\n"
            "  --json            print one JSON object instead of the text report\n\n"
            "Exit status: 0 PASS or MARGINAL, 1 FAIL, 2 usage or input error.\n");
}

typedef struct verify_args {
    const char *variant, *a, *a_scale, *azp, *q, *scales, *scales2, *zeros, *g_idx, *out, *packed, *path;
    int json;
} verify_args;

/* Does the array's dtype hold codes of format f? */
static int dtype_fits(qv_fmt f, qv_dtype dt)
{
    switch (f) {
    case QV_FMT_F16: return dt == QV_DT_F2;
    case QV_FMT_BF16: return dt == QV_DT_U2 || dt == QV_DT_BF16;
    case QV_FMT_F32: return dt == QV_DT_F4;
    case QV_FMT_I8: return dt == QV_DT_I1;
    case QV_FMT_U4:
    case QV_FMT_I4: return dt == QV_DT_I1 || dt == QV_DT_U1;
    case QV_FMT_U8: return dt == QV_DT_U1;
    case QV_FMT_E4M3: return dt == QV_DT_U1 || dt == QV_DT_E4M3;
    default: return 0;
    }
}

/* Checks that `a` has `rows` x `cols` elements in an accepted form: exactly
 * (rows, cols), or for a vector (len), (1, len) or (len, 1). */
static qv_status check_shape(const char *what, const char *path, const qv_array *a, int64_t rows, int64_t cols)
{
    char buf[96];
    int ok;
    if (rows == 1 || cols == 1) {
        int64_t len = rows * cols;
        ok = a->count == len && (a->ndim == 1 || (a->ndim == 2 && (a->shape[0] == 1 || a->shape[1] == 1)) ||
                                 (a->ndim == 0 && len == 1));
    } else {
        ok = a->ndim == 2 && a->shape[0] == rows && a->shape[1] == cols;
    }
    if (!ok)
        return qv_fail(QV_ERR_SHAPE, "%s %s is %s; expected (%lld, %lld)", what, path,
                       qv_array_describe(a, buf, sizeof buf), (long long)rows, (long long)cols);
    return QV_OK;
}

static qv_status load_as(const char *what, const char *path, qv_fmt f, qv_array *a)
{
    QV_TRY(qv_npy_load(path, a));
    if (!dtype_fits(f, a->dtype)) {
        qv_status st = qv_fail(QV_ERR_DTYPE, "%s %s is %s; this variant needs %s codes", what, path,
                               qv_dtype_name(a->dtype), qv_fmt_get(f)->name);
        qv_array_destroy(a);
        return st;
    }
    return QV_OK;
}

/* Loads a (rows, cols) array of format f into dst (storage per qv_fmt_storage_bytes,
 * f32 as float), checking value ranges of the 4-bit codes. */
static qv_status load_into(const char *what, const char *path, qv_fmt f, int64_t rows, int64_t cols, void *dst)
{
    qv_array a = {0};
    QV_TRY(load_as(what, path, f, &a));
    qv_status st = check_shape(what, path, &a, rows, cols);
    if (st == QV_OK) {
        if (f == QV_FMT_U4 || f == QV_FMT_I4) {
            int lo = f == QV_FMT_U4 ? 0 : -8, hi = f == QV_FMT_U4 ? 15 : 7;
            for (int64_t i = 0; i < a.count && st == QV_OK; i++) {
                int x = a.dtype == QV_DT_I1 ? ((int8_t *)a.data)[i] : ((uint8_t *)a.data)[i];
                if (x < lo || x > hi)
                    st = qv_fail(QV_ERR_RANGE, "%s %s: element %lld is %d, outside %s's %d..%d", what, path,
                                 (long long)i, x, qv_fmt_get(f)->name, lo, hi);
                else
                    ((uint8_t *)dst)[i] = (uint8_t)x;
            }
        } else {
            memcpy(dst, a.data, a.nbytes);
        }
    }
    qv_array_destroy(&a);
    return st;
}

static qv_status load_g_idx(const char *path, qv_problem *p)
{
    qv_array a = {0};
    QV_TRY(qv_npy_load(path, &a));
    qv_status st = QV_OK;
    if (a.dtype != QV_DT_I4 && a.dtype != QV_DT_I8)
        st = qv_fail(QV_ERR_DTYPE, "--g-idx %s is %s; expected int32 or int64", path, qv_dtype_name(a.dtype));
    if (st == QV_OK) st = check_shape("--g-idx", path, &a, 1, p->k);
    for (int64_t i = 0; st == QV_OK && i < p->k; i++) {
        int64_t x = a.dtype == QV_DT_I4 ? ((int32_t *)a.data)[i] : ((int64_t *)a.data)[i];
        if (x < 0 || x >= p->k / p->g)
            st = qv_fail(QV_ERR_RANGE, "--g-idx %s: entry %lld is %lld, outside [0, %lld)", path, (long long)i,
                         (long long)x, (long long)(p->k / p->g));
        else
            p->g_idx[i] = (int32_t)x;
    }
    qv_array_destroy(&a);
    return st;
}

/* Weights from a `qvet pack` folder, through the reference's own decoder. */
static qv_status load_packed(const char *dir, qv_problem *p)
{
    const qv_variant *v = p->v;
    qv_pack_dir d;
    char buf[96];
    qv_status st = qv_pack_dir_load(dir, &d);
    const qv_array *b = &d.b, *s = &d.s, *s2 = &d.s2, *z = &d.z, *perm = &d.perm, *gi = &d.g_idx;
    const int hs = d.has_s, hs2 = d.has_s2, hz = d.has_z, hp = d.has_perm, hg = d.has_g_idx;
    if (st == QV_OK && (b->dtype != QV_DT_I4 || b->ndim != 2))
        st = qv_fail(QV_ERR_FORMAT, "%s/B.npy is %s; expected a 2-D int32 array", dir, qv_array_describe(b, buf, sizeof buf));
    int64_t srows = qv_problem_scale_rows(p), scols = qv_problem_scale_cols(p);
    if (st == QV_OK && srows > 0) {
        if (!hs) st = qv_fail(QV_ERR_IO, "%s/scales.npy does not exist", dir);
        else if (!dtype_fits(v->scale_layout == QV_SCALE_BLOCK ? QV_FMT_F32 : v->sfmt, s->dtype))
            st = qv_fail(QV_ERR_DTYPE, "%s/scales.npy is %s; %s has %s scales", dir, qv_dtype_name(s->dtype), v->name,
                         qv_fmt_get(v->sfmt)->name);
        else
            st = check_shape("scales", dir, s, srows, scols);
    }
    if (st == QV_OK && p->scales2) {
        if (!hs2) st = qv_fail(QV_ERR_IO, "%s/scales2.npy does not exist (%s has channel scales)", dir, v->name);
        else if (s2->dtype != QV_DT_F4) st = qv_fail(QV_ERR_DTYPE, "%s/scales2.npy must be float32", dir);
        else st = check_shape("scales2", dir, s2, 1, p->n);
    }
    if (st == QV_OK && p->zeros) {
        if (!hz) st = qv_fail(QV_ERR_IO, "%s/zeros.npy does not exist (%s has zero points)", dir, v->name);
        else if (z->dtype != QV_DT_I4 || z->count * 8 != p->k / p->g * p->n)
            st = qv_fail(QV_ERR_SHAPE, "%s/zeros.npy is %s; expected (%lld, %lld) int32", dir,
                         qv_array_describe(z, buf, sizeof buf), (long long)(p->k / p->g), (long long)(p->n / 8));
    }
    if (st == QV_OK && p->g_idx) {
        if (!hp || !hg) st = qv_fail(QV_ERR_IO, "%s needs perm.npy and g_idx.npy (act_order)", dir);
        else if (perm->dtype != QV_DT_I4 || perm->count != p->k || gi->dtype != QV_DT_I4 || gi->count != p->k)
            st = qv_fail(QV_ERR_SHAPE, "%s: perm.npy and g_idx.npy must be int32 (%lld)", dir, (long long)p->k);
    }
    if (st == QV_OK) {
        int tensor = v->scale_layout == QV_SCALE_TENSOR;
        qv_packed pk = {
            .layout = v->layout, .k = p->k, .n = p->n, .g = v->g,
            .b = b->data, .b_rows = b->shape[0], .b_cols = b->shape[1],
            .scales = hs ? s->data : NULL, .s_rows = srows, .s_cols = scols,
            .s_elem = hs ? qv_dtype_size(s->dtype) : 0,
            .s_order = tensor || v->layout == QV_LAYOUT_PLAIN_NK ? QV_SORDER_PLAIN
                       : (v->layout == QV_LAYOUT_QQQ_W4_GROUP || srows > 1) ? QV_SORDER_GROUP64
                                                                             : QV_SORDER_CHANNEL32,
            .s_pow2 = v->layout == QV_LAYOUT_MARLIN_FP8 ? (v->afmt == QV_FMT_BF16 ? 120 : 8) : 0,
            .scales2 = p->scales2 ? s2->data : NULL, .s2_cols = p->scales2 ? p->n : 0,
            .zeros = p->zeros ? z->data : NULL, .z_bytes = p->zeros ? (int64_t)z->nbytes : 0,
            .z_rows = p->zeros ? p->k / p->g : 0, .z_cols = p->zeros ? p->n / 8 : 0,
            .perm = p->g_idx ? perm->data : NULL, .g_idx = p->g_idx ? gi->data : NULL,
        };
        st = ref_unpack(&pk, p);
    }
    qv_pack_dir_destroy(&d);
    return st;
}

static qv_status load_problem(const verify_args *va, const qv_variant *v, qv_problem *p, qv_array *out)
{
    qv_array a = {0};
    char buf[96], buf2[96];
    QV_TRY(load_as("--a", va->a, v->afmt, &a));
    QV_TRY(load_as("--out", va->out, v->ofmt, out));
    qv_status st = QV_OK;
    if (a.ndim != 2 || out->ndim != 2 || out->shape[0] != a.shape[0])
        st = qv_fail(QV_ERR_SHAPE, "--a is %s and --out is %s; expected (M, K) and (M, N)",
                     qv_array_describe(&a, buf, sizeof buf), qv_array_describe(out, buf2, sizeof buf2));
    if (st == QV_OK) st = qv_problem_create(p, v, a.shape[0], out->shape[1], a.shape[1]);
    if (st == QV_OK) memcpy(p->a, a.data, a.nbytes);
    qv_array_destroy(&a);
    if (st != QV_OK) return st;
    int64_t m = p->m, k = p->k;
    if (v->act_scale != QV_ASCALE_NONE) {
        if (!va->a_scale) return qv_fail(QV_ERR_USAGE, "%s needs --a-scale (%s activation scales)", v->name,
                                         qv_act_scale_name(v->act_scale));
        /* Per token and 128-K group: (ceil(k/128), m), MN-major (variant.h). */
        int64_t rows = v->act_scale == QV_ASCALE_TENSOR ? 1 : v->act_scale == QV_ASCALE_TOKEN_BLOCK ? (k + 127) / 128 : m;
        int64_t cols = v->act_scale == QV_ASCALE_TOKEN_BLOCK ? m : 1;
        QV_TRY(load_into("--a-scale", va->a_scale, QV_FMT_F32, rows, cols, p->a_scale));
    } else if (va->a_scale) {
        return qv_fail(QV_ERR_USAGE, "%s has no activation scales; drop --a-scale", v->name);
    }
    if (v->azp != QV_AZP_NONE) {
        if (!va->azp) return qv_fail(QV_ERR_USAGE, "%s needs --azp (activation zero points)", v->name);
        qv_array z = {0};
        QV_TRY(qv_npy_load(va->azp, &z));
        st = z.dtype == QV_DT_I4 ? check_shape("--azp", va->azp, &z, 1, v->azp == QV_AZP_TOKEN ? m : 1)
                                 : qv_fail(QV_ERR_DTYPE, "--azp %s must be int32", va->azp);
        if (st == QV_OK) memcpy(p->azp, z.data, z.nbytes);
        qv_array_destroy(&z);
        QV_TRY(st);
    } else if (va->azp) {
        return qv_fail(QV_ERR_USAGE, "%s has no activation zero points; drop --azp", v->name);
    }
    if (va->packed) {
        if (va->q || va->scales || va->scales2 || va->zeros || va->g_idx)
            return qv_fail(QV_ERR_USAGE, "--packed replaces --q, --scales, --scales2, --zeros and --g-idx");
        return load_packed(va->packed, p);
    }
    if (!va->q) return qv_fail(QV_ERR_USAGE, "--q (or --packed) is required");
    QV_TRY(load_into("--q", va->q, v->wfmt, p->k, p->n, p->q));
    if (p->scales) {
        if (!va->scales) return qv_fail(QV_ERR_USAGE, "%s needs --scales", v->name);
        qv_fmt sf = v->scale_layout == QV_SCALE_BLOCK ? QV_FMT_F32 : v->sfmt;
        QV_TRY(load_into("--scales", va->scales, sf, qv_problem_scale_rows(p), qv_problem_scale_cols(p), p->scales));
    } else if (va->scales) {
        return qv_fail(QV_ERR_USAGE, "%s has no weight scales; drop --scales", v->name);
    }
    if (p->scales2) {
        if (!va->scales2) return qv_fail(QV_ERR_USAGE, "%s needs --scales2 (channel scales)", v->name);
        QV_TRY(load_into("--scales2", va->scales2, QV_FMT_F32, 1, p->n, p->scales2));
    } else if (va->scales2) {
        return qv_fail(QV_ERR_USAGE, "%s has no second-level scales; drop --scales2", v->name);
    }
    if (p->zeros) {
        if (!va->zeros) return qv_fail(QV_ERR_USAGE, "%s needs --zeros", v->name);
        QV_TRY(load_into("--zeros", va->zeros, QV_FMT_U4, p->k / p->g, p->n, p->zeros));
    } else if (va->zeros) {
        return qv_fail(QV_ERR_USAGE, "%s has no zero points; drop --zeros", v->name);
    }
    if (p->g_idx) {
        if (!va->g_idx) return qv_fail(QV_ERR_USAGE, "%s needs --g-idx (act_order)", v->name);
        QV_TRY(load_g_idx(va->g_idx, p));
    } else if (va->g_idx) {
        return qv_fail(QV_ERR_USAGE, "%s has no act_order; drop --g-idx", v->name);
    }
    return QV_OK;
}

static void print_text(const qv_variant *v, const qv_problem *p, const qv_result *r)
{
    printf("qvet verify %s (m=%lld n=%lld k=%lld): %s\n", v->name, (long long)p->m, (long long)p->n,
           (long long)p->k, qv_grade_name(r->grade));
    if (r->reason[0]) printf("  reason:     %s\n", r->reason);
    printf("  reference:  %s (%s)\n", r->ref_path ? r->ref_path : "?", r->ref_why ? r->ref_why : "");
    printf("  elements:   %lld; out of bound %lld, NaN %lld, Inf %lld, unwritten %lld\n", (long long)r->n_elements,
           (long long)r->n_fail, (long long)r->n_nan, (long long)r->n_inf, (long long)r->n_unwritten);
    printf("  err/E:      max %.4g, p99 %.4g (error beyond the output rounding over the bound)\n",
           r->max_err_over_bound, r->p99_err_over_bound);
    printf("  ulp:        max %.4g, p99 %.4g (from the correctly rounded value)\n", r->max_ulp, r->p99_ulp);
    printf("  nmse:       %.4g   normwise rel: %.4g   bias z: %.3g   max |err|: %.4g\n", r->nmse, r->norm_rel,
           r->bias_z, r->max_abs_err);
    if (r->worst_m >= 0)
        printf("  worst:      (%lld, %lld) out=%.9g y=%.9g E=%.4g\n", (long long)r->worst_m, (long long)r->worst_n,
               r->worst_out, r->worst_y, r->worst_bound);
}

static int input_error(qv_status st)
{
    fprintf(stderr, "qvet verify: %s: %s\n", qv_status_str(st), qv_errmsg());
    return qv_status_exit_code(st);
}

int qv_cmd_verify(int argc, char **argv)
{
    verify_args va = {0};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char **slot = NULL;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(o, "--json")) {
            va.json = 1;
            continue;
        }
        if (!strcmp(o, "--a")) slot = &va.a;
        else if (!strcmp(o, "--a-scale")) slot = &va.a_scale;
        else if (!strcmp(o, "--azp")) slot = &va.azp;
        else if (!strcmp(o, "--q")) slot = &va.q;
        else if (!strcmp(o, "--scales")) slot = &va.scales;
        else if (!strcmp(o, "--scales2")) slot = &va.scales2;
        else if (!strcmp(o, "--zeros")) slot = &va.zeros;
        else if (!strcmp(o, "--g-idx")) slot = &va.g_idx;
        else if (!strcmp(o, "--out")) slot = &va.out;
        else if (!strcmp(o, "--packed")) slot = &va.packed;
        else if (!strcmp(o, "--path")) slot = &va.path;
        if (slot) {
            if (i + 1 >= argc) {
                fprintf(stderr, "qvet verify: option %s needs a value\n", o);
                usage(stderr);
                return 2;
            }
            *slot = argv[++i];
        } else if (o[0] == '-' || va.variant) {
            fprintf(stderr, "qvet verify: unexpected argument '%s'\n", o);
            usage(stderr);
            return 2;
        } else {
            va.variant = o;
        }
    }
    if (!va.variant || !va.a || !va.out) {
        fprintf(stderr, "qvet verify: VARIANT, --a and --out are required\n");
        usage(stderr);
        return 2;
    }
    const qv_variant *v = qv_variant_find(va.variant);
    if (!v) {
        fprintf(stderr, "qvet verify: unknown variant '%s' (qvet list shows them)\n", va.variant);
        return 2;
    }
    qv_problem p = {0};
    qv_array out = {0};
    qv_status st = load_problem(&va, v, &p, &out);
    if (st != QV_OK) {
        qv_problem_destroy(&p);
        qv_array_destroy(&out);
        return input_error(st);
    }
    ref_truth t;
    st = ref_truth_compute_path(&p, va.path, &t);
    if (st != QV_OK) {
        qv_problem_destroy(&p);
        qv_array_destroy(&out);
        return input_error(st);
    }
    qv_result r;
    ref_verify(&p, &t, out.data, &r);
    if (va.json) {
        printf("{\"variant\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,", v->name, (long long)p.m, (long long)p.n,
               (long long)p.k);
        qv_result_json_fields(stdout, &r);
        printf("}\n");
    } else {
        print_text(v, &p, &r);
    }
    ref_truth_clear(&t);
    qv_problem_destroy(&p);
    qv_array_destroy(&out);
    return r.grade == QV_FAIL ? 1 : 0;
}
