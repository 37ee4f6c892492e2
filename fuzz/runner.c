/* runner.c: one problem on one backend, graded (campaign.h). Every backend gets
 * a freshly poisoned output per launch and `repeat` launches compared bit for
 * bit; the verdict always comes from ref_truth_compute + ref_verify. Also the
 * JSONL "case" line and the replay command. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt_route.h"
#include "internal/campaign.h"
#include "qvet/formats.h"
#include "internal/gpu.h"
#include "internal/json.h"
#include "qvet/layout.h"
#include "qvet/spec.h"

uint64_t qv_fnv1a64(const void *data, size_t len)
{
    const unsigned char *b = data;
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a 64 offset basis */
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull; /* FNV-1a 64 prime */
    }
    return h;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Fills `count` output elements with the poison code of ofmt. */
static void poison_host(void *out, qv_fmt ofmt, int64_t count)
{
    size_t es = qv_fmt_storage_bytes(ofmt);
    uint32_t code = ref_poison_code(ofmt);
    for (int64_t i = 0; i < count; i++) memcpy((char *)out + (size_t)i * es, &code, es); /* little-endian */
}

/* The index of the first element where two outputs differ, or -1. */
static int64_t first_diff(const void *x, const void *y, int64_t count, size_t es)
{
    for (int64_t i = 0; i < count; i++)
        if (memcmp((const char *)x + (size_t)i * es, (const char *)y + (size_t)i * es, es)) return i;
    return -1;
}

/* A device-pointer plugin goes through qv_gpu_run, whose launch signature
 * carries the variant row; this trampoline forwards to the active plugin.
 * Launches hold the backend's launch lock, and each thread its own slot. */
static _Thread_local qv_ext_launch_fn active_device_launch;
static _Thread_local const char *active_device_name; /* the string the plugin declared the variant by */

static qv_status device_trampoline(const qv_variant *v, const qv_gemm_args *args)
{
    int rc = active_device_launch(active_device_name, args);
    if (rc) return qv_fail(QV_ERR_UNSUPPORTED, "%s: plugin launch returned %d", v->name, rc);
    return QV_OK;
}

/* The host-pointer path: pack with qv_pack (a spec's logical arrays go as they
 * are, plugin.h), poison a host output, launch on host buffers, repeat and
 * compare. */
static qv_status run_host(const qv_backend *b, const qv_problem *p, void *out, int64_t *diff)
{
    int logical = p->v->layout == QV_LAYOUT_LOGICAL;
    qv_packed pk;
    memset(&pk, 0, sizeof pk);
    if (!logical) QV_TRY(qv_pack(p, &pk));
    int64_t count = p->m * p->n;
    size_t es = qv_fmt_storage_bytes(p->v->ofmt);
    size_t bytes = (size_t)count * es;
    void *again = b->repeat > 1 ? malloc(bytes) : NULL;
    if (b->repeat > 1 && !again) {
        qv_packed_destroy(&pk);
        return qv_fail(QV_ERR_NOMEM, "determinism buffer of %zu bytes", bytes);
    }
    qv_gemm_args args = {
        .m = (int)p->m, .n = (int)p->n, .k = (int)p->k, .g = p->g,
        .a = p->a, .a_scale = p->a_scale, .azp = p->azp,
        .b = pk.b, .scales = pk.scales, .scales2 = pk.scales2, .zeros = pk.zeros, .perm = pk.perm,
        .c = out, .workspace = NULL, .workspace_bytes = 0, .stream = NULL,
        .bias = p->bias, .g_idx = pk.g_idx, .opts = b->opts,
    };
    if (logical) {
        args.b = p->q;
        args.scales = p->scales;
        args.scales2 = p->scales2;
        args.zeros = p->zeros ? (const void *)p->zeros : (const void *)p->zeros_f;
        args.perm = NULL;
        args.g_idx = p->g_idx;
    }
    const char *name = qv_backend_launch_name(b, p->v);
    qv_status st = QV_OK;
    *diff = -1;
    for (int r = 0; r < (b->repeat > 1 ? b->repeat : 1) && st == QV_OK && *diff < 0; r++) {
        args.c = r == 0 ? out : again;
        poison_host(args.c, p->v->ofmt, count);
        int rc = b->launch(name, &args);
        if (rc) st = qv_fail(QV_ERR_UNSUPPORTED, "%s: launch returned %d", p->v->name, rc);
        else if (r > 0) *diff = first_diff(out, again, count, es);
    }
    free(again);
    qv_packed_destroy(&pk);
    return st;
}

/* The CPU backend stands where a kernel would: it reads the weights the way a
 * kernel does, from the packed layout (qv_pack), decoded by the independent
 * fragment-based decoder (ref_unpack), and runs the variant's CPU model on
 * them. So a packer bug reaches the output exactly as it would on the GPU,
 * while the truth is still computed from the logical weights. A spec has no
 * packed form (QV_LAYOUT_LOGICAL): its model runs on a copy of the logical
 * arrays, as a plugin kernel receives them. */
static qv_status run_cpu_model(const qv_problem *p, void *out)
{
    poison_host(out, p->v->ofmt, p->m * p->n);
    qv_problem d;
    if (p->v->layout == QV_LAYOUT_LOGICAL) {
        QV_TRY(qv_problem_clone(&d, p));
        qv_status st = ref_model_run(&d, out);
        qv_problem_destroy(&d);
        return st;
    }
    qv_packed pk;
    QV_TRY(qv_pack(p, &pk));
    qv_status st = qv_problem_clone(&d, p);
    if (st == QV_OK) {
        st = ref_unpack(&pk, &d);
        if (st == QV_OK) st = ref_model_run(&d, out);
        qv_problem_destroy(&d);
    }
    qv_packed_destroy(&pk);
    return st;
}

/* Runs p on b into out; *diff is the first element two launches disagreed on. */
static qv_status run_on_backend(const qv_backend *b, const qv_problem *p, void *out, int64_t *diff)
{
    *diff = -1;
    switch (b->kind) {
    case QV_BACKEND_CPU: return run_cpu_model(p, out);
    case QV_BACKEND_HOST_FN: return run_host(b, p, out, diff);
    case QV_BACKEND_GPU:
    case QV_BACKEND_DEVICE_FN: {
        qv_gpu_stats gs;
        active_device_launch = b->launch;
        active_device_name = qv_backend_launch_name(b, p->v);
        qv_status st = qv_gpu_run(p, b->kind == QV_BACKEND_GPU ? NULL : device_trampoline, b->opts,
                                  b->repeat, out, &gs);
        if (st == QV_OK && gs.nondeterministic) *diff = gs.first_diff >= 0 ? gs.first_diff : 0;
        /* A write into the poisoned guard zone after the output is out of bounds (e.g. rows past M). */
        if (st == QV_OK && gs.guard_writes)
            st = qv_fail(QV_ERR_RANGE, "%s wrote %lld guard bytes past its (%lld, %lld) output", p->v->name,
                         (long long)gs.guard_writes, (long long)p->m, (long long)p->n);
        return st;
    }
    }
    return qv_fail(QV_ERR_USAGE, "unknown backend");
}

/* A backend's uint4 weights come through a GPTQ or AWQ checkpoint and the
 * project's readers, as in a deployment (ckpt_route.h); the truth keeps the
 * logical codes. A reader's refusal is the backend's error. */
static qv_status run_backend(const qv_backend *b, const qv_problem *p, void *out, int64_t *diff)
{
    *diff = -1;
    qv_ckpt_format f = qv_ckpt_choose(p);
    qv_problem d;
    if (f != QV_CKPT_NONE) QV_TRY(qv_ckpt_route(p, f, &d));
    /* The CPU models are pure; the GPU and plugins launch one at a time. */
    pthread_mutex_t *lock = b->kind == QV_BACKEND_CPU ? NULL : (pthread_mutex_t *)b->launch_lock;
    if (lock) pthread_mutex_lock(lock);
    qv_status st = run_on_backend(b, f == QV_CKPT_NONE ? p : &d, out, diff);
    if (lock) pthread_mutex_unlock(lock);
    if (f != QV_CKPT_NONE) qv_problem_destroy(&d);
    return st;
}

/* The accumulation constant alpha of docs/design.md §3 for the row's accumulator. */
static double alpha_of(const qv_variant *v, int64_t k)
{
    const qv_arith *a = &v->arith;
    double b = a->block_b > 0 ? a->block_b : 16; /* the fp16 mma K width when unstated */
    switch (a->accum) {
    case QV_ACC_INT32: return 0.0; /* exact */
    case QV_ACC_TC_F32: return 2 * (1 + 1 / b) * (double)k * 0x1p-23;
    case QV_ACC_TC_FP8: {
        double nc = a->promote_nc > 0 ? a->promote_nc : (double)k;
        int bits = a->acc_bits > 0 ? a->acc_bits : 14;
        return 2 * (1 + 1 / b) * nc * ldexp(1.0, 1 - bits) + ceil((double)k / nc) * 0x1p-23;
    }
    case QV_ACC_FMA_F32: return (double)k * 0x1p-24;
    }
    return 0.0;
}

/* |a_scale| that multiplies activation (i, kk), 1 when none. */
static double ascale_of(const qv_problem *p, int64_t i, int64_t kk)
{
    switch (p->v->act_scale) {
    case QV_ASCALE_NONE: return 1.0;
    case QV_ASCALE_TENSOR: return fabs(p->a_scale[0]);
    case QV_ASCALE_TOKEN: return fabs(p->a_scale[i]);
    case QV_ASCALE_TOKEN_BLOCK: return fabs(p->a_scale[(kk / 128) * p->m + i]); /* MN-major */
    }
    return 1.0;
}

/* The unbiased integer code of a one-byte buffer (i4/i8 signed, else unsigned). */
static double byte_code(qv_fmt f, const void *buf, int64_t i)
{
    if (f == QV_FMT_I4 || f == QV_FMT_I8) return (double)((const int8_t *)buf)[i];
    return (double)((const uint8_t *)buf)[i];
}

/* |s| (|q| + |z|) of weight (kk, j), both scale levels included: with integer
 * zero points q and z are the codes the scale multiplies; a float zero point
 * is added after the scale, so it enters unscaled. */
static double wmag_of(const qv_problem *p, int64_t kk, int64_t j)
{
    const qv_variant *v = p->v;
    double w, zf = 0;
    if (v->zero_point == QV_ZP_INT && p->zeros) {
        int64_t grp = v->zp_layout == QV_SCALE_GROUP ? (p->g_idx ? p->g_idx[kk] : kk / v->zp_g) : 0;
        w = fabs(byte_code(v->wfmt, p->q, kk * p->n + j)) +
            fabs(byte_code(v->wfmt, p->zeros, qv_gran_index(v->zp_layout, v->zp_bk, v->zp_bn, p->n, kk, j, grp)));
    } else {
        w = fabs(qv_problem_wq(p, kk, j));
        zf = fabs(qv_problem_zero_f(p, kk, j));
    }
    if (v->arith.w_mul > 1) w *= v->arith.w_mul;
    w = w * fabs(qv_problem_scale(p, kk, j)) + zf;
    return w * fabs(qv_problem_scale2(p, j));
}

/* max over outputs of alpha*G with G = sum_k |a_k| |s| (|q_k| + |z|)
 * (docs/design.md §3), scales included, summed in plain loops in a fixed order so the value is
 * the same bits on every machine and thread count. Large cases are sampled:
 * evenly spaced rows and columns, at most 2^24 multiply-adds (tens of ms). */
static double alpha_g_max(const qv_problem *p)
{
    double alpha = alpha_of(p->v, p->k);
    if (alpha == 0.0) return 0.0;
    int64_t k = p->k, rm = p->m < 64 ? p->m : 64, cn = p->n < 256 ? p->n : 256;
    const double budget = 16777216.0; /* 2^24 multiply-adds */
    while ((double)rm * (double)cn * (double)k > budget && (rm > 1 || cn > 1)) {
        if (cn >= rm && cn > 1) cn = (cn + 1) / 2;
        else rm = (rm + 1) / 2;
    }
    double *A = malloc((size_t)(rm * k) * sizeof *A);
    double *W = malloc((size_t)(cn * k) * sizeof *W); /* (cn, k): column c of |W| contiguous */
    double best = NAN;
    if (A && W) {
        for (int64_t r = 0; r < rm; r++) {
            int64_t i = r * p->m / rm;
            for (int64_t kk = 0; kk < k; kk++) A[r * k + kk] = fabs(qv_problem_a(p, i, kk)) * ascale_of(p, i, kk);
        }
        for (int64_t c = 0; c < cn; c++) {
            int64_t j = c * p->n / cn;
            for (int64_t kk = 0; kk < k; kk++) W[c * k + kk] = wmag_of(p, kk, j);
        }
        /* Four columns at a time: four independent sums, each in increasing
         * k as one column alone (the same bits), not one chain of additions. */
        best = 0;
        for (int64_t r = 0; r < rm; r++) {
            const double *ar = A + r * k;
            int64_t c = 0;
            for (; c + 4 <= cn; c += 4) {
                const double *w0 = W + c * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
                double g0 = 0, g1 = 0, g2 = 0, g3 = 0;
                for (int64_t kk = 0; kk < k; kk++) {
                    const double a = ar[kk];
                    g0 += a * w0[kk];
                    g1 += a * w1[kk];
                    g2 += a * w2[kk];
                    g3 += a * w3[kk];
                }
                const double g = fmax(fmax(g0, g1), fmax(g2, g3));
                if (g > best) best = g;
            }
            for (; c < cn; c++) {
                double g = 0;
                for (int64_t kk = 0; kk < k; kk++) g += ar[kk] * W[c * k + kk];
                if (g > best) best = g;
            }
        }
        best *= alpha;
    }
    free(A);
    free(W);
    return best;
}

/* Fills the outcome's histograms from the output and the reference. */
static void histograms(const qv_problem *p, qv_outcome *o)
{
    qv_fmt of = p->v->ofmt;
    size_t es = qv_fmt_storage_bytes(of);
    for (int64_t e = 0; e < p->m * p->n; e++) {
        uint32_t code = 0;
        memcpy(&code, (const char *)o->out + (size_t)e * es, es); /* little-endian */
        double x = qv_decode(of, code), y = o->truth.y[e], yr = o->truth.y_rn[e], b = o->truth.bound[e];
        if (!isfinite(x) || !isfinite(y)) continue;
        /* As ref_verify measures it: the error beyond half an output ulp, over E. */
        double d = fabs(x - y) - 0.5 * qv_ulp(of, fabs(y) + b);
        if (d < 0) d = 0;
        double r = b > 0 ? d / b : (d == 0 ? 0 : INFINITY);
        o->hist_eb[r >= 1 ? 20 : (int)(r * 20)]++;
        if (!isfinite(yr)) continue;
        double u = fabs(x - yr) / qv_ulp(of, yr);
        int bin = u < 0.5 ? 0 : u < 1.5 ? 1 : u < 2.5 ? 2 : u < 3.5 ? 3 : u < 7.5 ? 4 : u < 15.5 ? 5 : 6;
        o->hist_ulp[bin]++;
    }
}

/* Output code e of buf (little-endian, storage bytes es). */
static uint32_t code_of(const void *buf, int64_t e, size_t es)
{
    uint32_t c = 0;
    memcpy(&c, (const char *)buf + (size_t)e * es, es);
    return c;
}

/* The code one representable step above (up) or below x rounded to of; its
 * value in *val. Returns 0 when that step leaves the finite range. */
static int step_code(qv_fmt of, double x, int up, qv_sat sat, uint32_t *code, double *val)
{
    uint32_t c = qv_encode(of, x, sat);
    double v = qv_decode(of, c);
    if (!isfinite(v)) return 0;
    if (!qv_fmt_get(of)->is_float) {
        /* integers: the next value, inside the format's range */
        const qv_fmt_info *fi = qv_fmt_get(of);
        double w = v + (up ? 1 : -1);
        if (w > fi->max_finite || w < fi->min_value) return 0;
        *code = qv_encode(of, w, sat);
        *val = w;
        return 1;
    }
    uint32_t sign = 1u << (8 * qv_fmt_storage_bytes(of) - 1);
    if (v == 0) c = up ? 1u : sign | 1u; /* the smallest subnormal of that sign */
    else c = ((v > 0) == (up != 0)) ? c + 1 : c - 1; /* away from zero: the next code */
    *code = c;
    *val = qv_decode(of, c);
    return isfinite(*val) && (up ? *val > v : *val < v);
}

/* A known-answer test of the verdict on this very case: the output with one
 * element replaced by the first value above, then below, its rounded bound,
 * by a NaN and by the poison code must FAIL, and one flipped bit must fail the
 * bit-exact comparison. A verdict that passes any of them is broken; *why
 * names which. Returns 1 then, 0 when the verdict held. */
static int verdict_selftest(const qv_problem *p, const ref_truth *t, const void *out, char *why, size_t len)
{
    qv_fmt of = p->v->ofmt;
    qv_sat sat = p->v->arith.out_sat;
    size_t es = qv_fmt_storage_bytes(of);
    int64_t mn = p->m * p->n;
    int64_t e = 0;
    uint32_t above = 0, below = 0;
    double va, vb;
    while (e < mn && !(isfinite(t->y[e]) && isfinite(t->bound[e]) &&
                       step_code(of, t->y[e] + t->bound[e], 1, sat, &above, &va) &&
                       step_code(of, t->y[e] - t->bound[e], 0, sat, &below, &vb)))
        e++;
    if (e == mn) return 0; /* no element with a finite bound on both sides */
    size_t bytes = (size_t)mn * es;
    void *bad = malloc(bytes);
    QV_ASSERT(bad != NULL, "out of memory in the verdict self-test");
    const struct {
        const char *what;
        uint32_t code;
    } wrong[] = {
        {"the first value above the rounded bound", above},
        {"the first value below the rounded bound", below},
        {"the never-written poison", ref_poison_code(of)},
        {"a NaN", qv_encode(of, NAN, QV_SAT_NONE)}, /* last: integer outputs have none */
    };
    size_t n_wrong = sizeof wrong / sizeof wrong[0] - (qv_fmt_get(of)->has_nan ? 0 : 1);
    int broken = 0;
    qv_result r;
    for (size_t i = 0; i < n_wrong && !broken; i++) {
        memcpy(bad, out, bytes);
        memcpy((char *)bad + (size_t)e * es, &wrong[i].code, es); /* little-endian */
        ref_verify(p, t, bad, &r);
        if (r.grade != QV_FAIL) {
            snprintf(why, len, "verdict self-test: %s at (%lld, %lld) was graded %s", wrong[i].what,
                     (long long)(e / p->n), (long long)(e % p->n), r.grade == QV_PASS ? "PASS" : "MARGINAL");
            broken = 1;
        }
    }
    if (!broken) {
        memcpy(bad, out, bytes);
        uint32_t flipped = code_of(out, e, es) ^ 1u; /* one unit in the last place */
        memcpy((char *)bad + (size_t)e * es, &flipped, es);
        ref_verify_bitexact(p, out, bad, &r);
        if (r.grade != QV_FAIL) {
            snprintf(why, len, "verdict self-test: one flipped bit at (%lld, %lld) passed the bit-exact comparison",
                     (long long)(e / p->n), (long long)(e % p->n));
            broken = 1;
        }
    }
    free(bad);
    return broken;
}

/* A unique probe's output that equals its one correct output bit for bit
 * passes: the statistical monitors (MARGINAL) then only see the output
 * format's own rounding of the exact values (its ties fall to the even code,
 * whose parity a probe's structured values can skew), not the kernel. */
static void unique_is_pass(qv_result *res)
{
    if (res->grade != QV_MARGINAL) return;
    res->grade = QV_PASS;
    res->reason[0] = '\0';
}

/* A unique probe's output is the only one the declared arithmetic allows:
 * anything but its bits is wrong, however far inside the bound it lies.
 * Under the declared arithmetic its partial sums are exact, so those bits are
 * the exact value rounded to the output format, which the truth holds when its
 * path is exact. Two exceptions take the CPU model's bits instead: a narrower
 * fp8 accumulator (it drops bits on purpose), and a truth summed by dgemm
 * (its rounded value is not certified). The CPU model, which stands where a
 * kernel would, is held to the exact bits and, in those two cases, only to
 * the bound. */
static qv_status unique_bits(const qv_backend *b, const qv_problem *p, qv_outcome *o)
{
    int narrow = p->v->arith.accum == QV_ACC_TC_FP8 && p->v->arith.acc_bits < 24;
    int use_model = narrow || !strcmp(o->truth.path, "dgemm+cert");
    if (b->kind == QV_BACKEND_CPU && use_model) return QV_OK;
#ifdef QV_MUTANT_orc_runner_unique_bits_unchecked
    /* Oracle mutant: a kernel's unique output graded by the bound alone. */
    if (b->kind != QV_BACKEND_CPU) return QV_OK;
#endif
    size_t bytes = (size_t)qv_problem_out_bytes(p), es = qv_fmt_storage_bytes(p->v->ofmt);
    void *expected = malloc(bytes ? bytes : 1);
    if (!expected) return qv_fail(QV_ERR_NOMEM, "expected output of %zu bytes", bytes);
    qv_status st = QV_OK;
    if (use_model) {
        st = ref_model_run(p, expected);
    } else {
        for (int64_t e = 0; e < p->m * p->n; e++) {
            uint32_t code = qv_encode(p->v->ofmt, o->truth.y_rn[e], p->v->arith.out_sat);
            memcpy((char *)expected + (size_t)e * es, &code, es); /* little-endian */
        }
    }
    if (st == QV_OK) {
        qv_result bit;
        ref_verify_bitexact(p, expected, o->out, &bit);
        if (bit.grade == QV_FAIL) o->res = bit;
        else unique_is_pass(&o->res);
    } else {
        o->st = st;
        o->res.grade = QV_FAIL;
        snprintf(o->res.reason, sizeof o->res.reason, "the CPU model refused the case: %s", qv_errmsg());
    }
    free(expected);
    return QV_OK;
}

/* The usual criteria of the case's output against y rounded to the output format. */
static void usual_criteria(const qv_problem *p, const qv_outcome *o, qv_criteria *cr)
{
    int64_t count = p->m * p->n;
    qv_fmt of = p->v->ofmt;
    size_t es = qv_fmt_storage_bytes(of);
    double *x = malloc((size_t)count * sizeof *x);
    QV_ASSERT(x != NULL, "criteria buffer: out of memory");
    for (int64_t e = 0; e < count; e++) {
        uint32_t code = 0;
        memcpy(&code, (const char *)o->out + (size_t)e * es, es); /* little-endian */
        x[e] = qv_decode(of, code);
    }
    qv_usual_criteria(x, o->truth.y_rn, count, cr);
    free(x);
}

qv_status qv_case_run(const qv_backend *b, const qv_problem *p, int unique, qv_outcome *o)
{
    memset(o, 0, sizeof *o);
    double t0 = now_ms();
    size_t bytes = (size_t)qv_problem_out_bytes(p);
    o->out = malloc(bytes ? bytes : 1);
    if (!o->out) return qv_fail(QV_ERR_NOMEM, "output of %zu bytes", bytes);
    int64_t diff = -1;
    qv_status st = run_backend(b, p, o->out, &diff);
    if (st == QV_ERR_NODEVICE) return st;
    o->out_hash = qv_fnv1a64(o->out, bytes);
    if (st != QV_OK) {
        /* The generator only draws legal shapes, so a refusal or a CUDA error
         * is the kernel breaking its contract: a FAIL, recorded with why. */
        o->st = st;
        o->backend_error = 1;
#ifdef QV_MUTANT_orc_runner_backend_error_passes
        /* Oracle mutant: a refused launch graded PASS. */
        o->res.grade = QV_PASS;
#else
        o->res.grade = QV_FAIL;
#endif
        o->res.n_elements = p->m * p->n;
        o->res.worst_m = o->res.worst_n = -1;
        snprintf(o->res.reason, sizeof o->res.reason, "backend error: %s", qv_errmsg());
        o->time_ms = now_ms() - t0;
        return QV_OK;
    }
    /* The truth and the CPU model share the reference's decoding: the truth
     * checks its own against an independent one before any sum. */
#ifdef QV_MUTANT_orc_runner_operands_check_skipped
    /* Oracle mutant: the reference's decoding trusted unchecked. */
    const ref_truth_opts topts = {.jobs = 1};
#else
    const ref_truth_opts topts = {.jobs = 1, .check_operands = 1};
#endif
    st = ref_truth_compute_ex(p, &topts, &o->truth);
    if (st != QV_OK) {
        o->st = st;
        o->res.grade = QV_FAIL;
        o->res.n_elements = p->m * p->n;
        o->res.worst_m = o->res.worst_n = -1;
        snprintf(o->res.reason, sizeof o->res.reason, "reference refused the case: %s", qv_errmsg());
        o->time_ms = now_ms() - t0;
        return QV_OK;
    }
    o->has_truth = 1;
    ref_verify(p, &o->truth, o->out, &o->res);
    if (unique && o->res.grade != QV_FAIL) {
        st = unique_bits(b, p, o);
        if (st != QV_OK) return st; /* out of memory: the case has no verdict */
    }
    if (o->res.grade != QV_FAIL) {
        char why[sizeof o->res.reason];
        if (verdict_selftest(p, &o->truth, o->out, why, sizeof why)) {
            o->res.grade = QV_FAIL;
            snprintf(o->res.reason, sizeof o->res.reason, "%s", why);
        }
    }
#ifdef QV_MUTANT_orc_runner_nondeterminism_ignored
    /* Oracle mutant: two launches that differ are not failed. */
    if (diff >= 0 && 0) {
#else
    if (diff >= 0) {
#endif
        o->res.grade = QV_FAIL;
        snprintf(o->res.reason, sizeof o->res.reason,
                 "nondeterministic: two identical launches differ at (%lld, %lld)",
                 (long long)(diff / p->n), (long long)(diff % p->n));
    }
    histograms(p, o);
    usual_criteria(p, o, &o->crit);
    o->has_stats = 1;
    o->alpha_g_max = alpha_g_max(p);
    o->time_ms = now_ms() - t0;
    return QV_OK;
}

void qv_outcome_clear(qv_outcome *o)
{
    free(o->out);
    if (o->has_truth) ref_truth_clear(&o->truth);
    memset(o, 0, sizeof *o);
}

void qv_outcome_release(qv_outcome *o)
{
    free(o->out);
    o->out = NULL;
    if (o->has_truth) ref_truth_clear(&o->truth);
    o->has_truth = 0;
}


/* ---- JSONL ---- */

/* A shell word: safe characters pass as they are, anything else is quoted;
 * `quote` quotes it whatever it holds (specs, so that they read as one word). */
static size_t put_word_q(char *buf, size_t len, size_t at, const char *w, int quote)
{
    int plain = *w != '\0' && !quote;
    for (const char *c = w; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:+,", *c)) plain = 0;
    if (at >= len) return at;
    if (plain) return at + (size_t)snprintf(buf + at, len - at, " %s", w);
    at += (size_t)snprintf(buf + at, len - at, " '");
    for (const char *c = w; *c && at < len; c++)
        at += (size_t)(*c == '\'' ? snprintf(buf + at, len - at, "'\\''") : snprintf(buf + at, len - at, "%c", *c));
    if (at < len) at += (size_t)snprintf(buf + at, len - at, "'");
    return at;
}

static size_t put_word(char *buf, size_t len, size_t at, const char *w) { return put_word_q(buf, len, at, w, 0); }

void qv_case_replay_cmd(const qv_case *c, const qv_backend *b, const qv_gen *gen, const char *glob, char *buf,
                        size_t len)
{
    char num[64];
    size_t at = (size_t)snprintf(buf, len, "qvet replay");
    if (c->suite) at = put_word(buf, len, at, "--check");
    snprintf(num, sizeof num, "%llu", (unsigned long long)c->seed);
    at = put_word(buf, len, at, "--seed");
    at = put_word(buf, len, at, num);
    snprintf(num, sizeof num, "%lld", (long long)c->index);
    at = put_word(buf, len, at, "--case");
    at = put_word(buf, len, at, num);
    /* The fixed suite is per variant; a fuzz case draws among the glob's
     * variants, or among the listed ones, named again in their order. */
    if (gen && gen->listed) {
        for (int i = 0; i < gen->n_variants; i++)
            if (!c->suite || gen->variants[i] == c->v) {
                at = put_word(buf, len, at, "--spec");
                at = put_word_q(buf, len, at, gen->variants[i]->name, qv_is_spec(gen->variants[i]->name));
            }
    } else {
        const char *vg = c->suite ? c->v->name : glob;
        if (vg && *vg) {
            int spec = c->suite && c->v->layout == QV_LAYOUT_LOGICAL;
            at = put_word(buf, len, at, spec ? "--spec" : "--variant");
            at = put_word_q(buf, len, at, vg, spec);
        }
    }
    if (b->kind == QV_BACKEND_CPU) at = put_word(buf, len, at, "--cpu");
    else if (b->kind == QV_BACKEND_GPU) at = put_word(buf, len, at, "--gpu");
    if (b->plugin_path[0]) {
        at = put_word(buf, len, at, "--plugin");
        at = put_word(buf, len, at, b->plugin_path);
    }
    if (b->cap_mnk != qv_backend_default_cap(b->kind, c->suite)) {
        snprintf(num, sizeof num, "%lld", (long long)b->cap_mnk);
        at = put_word(buf, len, at, "--cap");
        at = put_word(buf, len, at, num);
    }
}

void qv_case_json(FILE *f, const qv_case *c, const qv_backend *b, const qv_outcome *o,
                  const char *replay, const qv_shrunk *shrunk)
{
    fprintf(f, "{\"kind\":\"case\",\"seed\":%llu,\"case\":%lld,\"suite\":", (unsigned long long)c->seed,
            (long long)c->index);
    qv_json_fput_str(f, c->suite ? "check" : "fuzz");
    fputs(",\"variant\":", f);
    qv_json_fput_str(f, c->v->name);
    fputs(",\"family\":", f);
    qv_json_fput_str(f, c->v->family);
    fputs(",\"backend\":", f);
    qv_json_fput_str(f, b->name);
    fprintf(f, ",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"g\":%d", (long long)c->m, (long long)c->n,
            (long long)c->k, c->v->g);
    fputs(",\"shape_class\":", f);
    qv_json_fput_str(f, qv_shape_class_name(c->shape_class));
    if (c->layer[0]) {
        fputs(",\"layer\":", f);
        qv_json_fput_str(f, c->layer);
    }
    if (c->capped)
        fprintf(f, ",\"capped_from\":{\"m\":%lld,\"n\":%lld,\"k\":%lld,\"cap_mnk\":%lld}",
                (long long)c->m0, (long long)c->n0, (long long)c->k0, (long long)b->cap_mnk);
    fputs(",\"probe\":", f);
    qv_json_fput_str(f, qv_probe_name(c->probe));
    fputs(",\"regime\":", f);
    qv_json_fput_str(f, qv_regime_name(c->regime));
    fputc(',', f);
    qv_result_json_fields(f, &o->res);
    if (o->has_stats) {
        /* The field's usual acceptance tests on the same output (criteria.c),
         * against the exact value rounded to the output format. */
        const qv_criteria cr = o->crit;
        fprintf(f, ",\"criteria\":{\"mean_rel\":");
        qv_json_fput_num(f, cr.mean_rel);
        fputs(",\"cosine\":", f);
        qv_json_fput_num(f, cr.cosine);
        fputs(",\"nmse\":", f);
        qv_json_fput_num(f, cr.nmse);
        fprintf(f, ",\"marlin_pass\":%s,\"vllm_pass\":%s,\"cosine_pass\":%s,\"nmse_pass\":%s}",
                cr.marlin_pass ? "true" : "false", cr.vllm_pass ? "true" : "false",
                cr.cosine_pass ? "true" : "false", cr.nmse_pass ? "true" : "false");
    }
    fputs(",\"alpha_g_max\":", f);
    qv_json_fput_num(f, o->alpha_g_max);
    fputs(",\"time_ms\":", f);
    qv_json_fput_num(f, o->time_ms);
    if (o->has_stats) {
        fputs(",\"hist_err_over_bound\":[", f);
        for (int i = 0; i < 21; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)o->hist_eb[i]);
        fputs("],\"hist_ulp\":[", f);
        for (int i = 0; i < 7; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)o->hist_ulp[i]);
        fputc(']', f);
    }
    fprintf(f, ",\"out_fnv1a64\":\"%016llx\"", (unsigned long long)o->out_hash);
    fputs(",\"replay\":", f);
    qv_json_fput_str(f, replay);
    if (shrunk) {
        fprintf(f, ",\"shrunk\":{\"m\":%lld,\"n\":%lld,\"k\":%lld,\"steps\":%d,\"tries\":%d,\"dir\":",
                (long long)shrunk->m, (long long)shrunk->n, (long long)shrunk->k, shrunk->steps,
                shrunk->tries);
        qv_json_fput_str(f, shrunk->dir);
        fputc('}', f);
    }
    fputs("}\n", f);
}
