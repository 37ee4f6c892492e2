/* cmd_verify_moe.c: `qvet verify` with a routed spec (moe.h, docs/moe.md): a
 * grouped GEMM's output checked against the exact routing and the experts'
 * declared arithmetic, from the router logits, the stacked expert weights and,
 * when the kernel reports them, its expert ids and weights.
 * Exit: 0 PASS or MARGINAL, 1 FAIL, 2 usage or input error (cli.h). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/cli.h"
#include "internal/json.h"
#include "internal/verify_io.h"
#include "qvet/array.h"
#include "qvet/formats.h"
#include "qvet/moe.h"
#include "qvet/spec.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qvet verify --spec 'EXPERT,route=R,topk=K[,...]' --a A.npy --logits L.npy\n"
            "                   --q Q.npy [--scales S.npy] [--scales2 S2.npy] [--zeros Z.npy] [--bias B.npy]\n"
            "                   [--g-idx G.npy] [--a-scale SA.npy] [--azp AZP.npy] [--expert-map MAP.npy]\n"
            "                   [--score-bias SB.npy] [--shared-gate SG.npy]\n"
            "                   [--shared S] [--ids IDS.npy [--weights W.npy]] --out C.npy [--jobs N] [--json]\n\n"
            "Verifies a routed (mixture-of-experts) GEMM: each token's top-k experts and weights\n"
            "are computed exactly from its router logits by the declared route, and C[t] must be\n"
            "the weighted sum of its local experts' products (plus the shared experts') within\n"
            "the certified bound of the declared combine. The spec is an expert's spec or row\n"
            "with the routing keys route, topk, rsf, tie, rw, sum, exp, logits, groups, gtopk,\n"
            "gscore, gmask, sbias, eps, sgate (docs/moe.md).\n\n"
            "Arrays (.npy, row-major; formats as `qvet verify --help` describes for one GEMM):\n"
            "  --a A.npy           (T, K) activations of the T tokens\n"
            "  --logits L.npy      (T, E) router logits, logits=: f32 float32, bf16 <u2, f16 float16\n"
            "  --score-bias SB.npy (E) float32: the per-expert selection bias (sbias=f32), added to\n"
            "                      the scores to choose the experts, never to the weights\n"
            "  --expert-map M.npy  (E) int32/int64: the local index of each router expert, or -1\n"
            "                      when another rank holds it (default: every expert local)\n"
            "  --shared S          shared experts, added to every token with weight 1 [0]\n"
            "  --shared-gate SG.npy  (S, K) the shared experts' gate vectors in the activation\n"
            "                      format (sgate=sigmoid): each weighs its expert by a sigmoid\n"
            "  --q Q.npy           (X, K, N) weight codes of the X = local + shared experts, the\n"
            "                      shared ones last; --scales (X, R, C), --scales2 (X, 1 or N),\n"
            "                      --zeros (X, R, C), --bias (X, N), --g-idx (X, K) likewise\n"
            "  --a-scale, --azp    as for one GEMM, over the T tokens\n"
            "  --ids IDS.npy       (T, topk) int32/int64: the experts the kernel took; each token's\n"
            "                      must be an admissible top-k (near ties in fp32 allowed)\n"
            "  --weights W.npy     (T, topk) float32: the kernel's routing weights (needs --ids),\n"
            "                      each within the certified bound of the exact one\n"
            "  --out C.npy         (T, N) output, in the expert's out= format\n"
            "  --jobs N            threads for each expert's reference and the verdict, and for\n"
            "                      the BLAS (default: the cores online; the same bits for every N)\n"
            "Without --ids, a token whose top-k is a near tie passes if its output matches any\n"
            "admissible selection.\n\n"
            "Exit status: 0 PASS or MARGINAL, 1 FAIL, 2 usage or input error.\n");
}

typedef struct moe_args {
    const char *spec, *a, *a_scale, *azp, *logits, *map, *shared, *q, *scales, *scales2, *zeros, *bias, *g_idx, *ids,
        *weights, *out, *jobs, *sbias, *sgate;
    int json;
} moe_args;

/* Which buffer of each expert's problem a stacked array fills. */
typedef enum { ST_Q, ST_SCALES, ST_SCALES2, ST_ZEROS, ST_ZEROS_F, ST_BIAS } stack_dst;

static void *dst_of(qv_problem *w, stack_dst d)
{
    switch (d) {
    case ST_Q: return w->q;
    case ST_SCALES: return w->scales;
    case ST_SCALES2: return w->scales2;
    case ST_ZEROS: return w->zeros;
    case ST_ZEROS_F: return w->zeros_f;
    case ST_BIAS: return w->bias;
    }
    return NULL;
}

/* Loads an (x, rows, cols) stack of op's format (for a vector, (x, len) or
 * (x, 1, len) or (x, len, 1)) into each expert's buffer d: codes range-checked,
 * or with `decode` values as float. */
static qv_status load_stack(const vio_operand *op, const char *path, qv_moe_problem *p, int64_t rows, int64_t cols,
                            stack_dst d, int decode)
{
    int x = p->e_local + p->shared;
    qv_array a = {0};
    char buf[96];
    QV_TRY(vio_load_as(op, path, &a));
    int64_t len = rows * cols;
    int vec = rows == 1 || cols == 1;
    int ok = (a.ndim == 3 && a.shape[0] == x && a.shape[1] == rows && a.shape[2] == cols) ||
             (vec && a.ndim == 3 && a.shape[0] == x && a.shape[1] * a.shape[2] == len &&
              (a.shape[1] == 1 || a.shape[2] == 1)) ||
             (vec && a.ndim == 2 && a.shape[0] == x && a.shape[1] == len);
    qv_status st = QV_OK;
    if (!ok)
        st = qv_fail(QV_ERR_SHAPE, "%s %s is %s; %s needs (%d, %lld, %lld) for %d experts", op->opt, path,
                     qv_array_describe(&a, buf, sizeof buf), op->label, x, (long long)rows, (long long)cols, x);
    int lo, hi;
    if (st == QV_OK && qv_fmt_storage_bytes(op->fmt) == 1 && vio_code_range(op->fmt, &lo, &hi))
        for (int64_t i = 0; i < a.count && st == QV_OK; i++) {
            int c = a.dtype == QV_DT_I1 ? ((int8_t *)a.data)[i] : ((uint8_t *)a.data)[i];
            if (c < lo || c > hi)
                st = qv_fail(QV_ERR_RANGE, "%s %s: expert %lld element %lld is %d, outside the codes %d..%d of %s",
                             op->opt, path, (long long)(i / len), (long long)(i % len), c, lo, hi, op->label);
        }
    size_t es = qv_dtype_size(a.dtype);
    for (int e = 0; e < x && st == QV_OK; e++) {
        const char *src = (const char *)a.data + (size_t)(e * len) * es;
        void *dst = dst_of(&p->w[e], d);
        if (decode) {
            size_t fs = qv_fmt_storage_bytes(op->fmt);
            for (int64_t i = 0; i < len; i++) {
                uint32_t code = 0;
                memcpy(&code, src + (size_t)i * fs, fs);
                ((float *)dst)[i] = (float)qv_decode(op->fmt, code);
            }
        } else {
            memcpy(dst, src, (size_t)len * es);
        }
    }
    qv_array_destroy(&a);
    return st;
}

/* An int32/int64 array of shape (rows, cols) as int32, each entry in [lo,
 * hi]; with rows = 1 also (cols) or any 2-D shape of cols entries. */
static qv_status load_ints(const char *opt, const char *path, int64_t rows, int64_t cols, int64_t lo, int64_t hi,
                           int32_t *dst)
{
    qv_array a = {0};
    char buf[96];
    qv_status st = qv_npy_load(path, &a);
    if (st != QV_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", qv_errmsg());
        return qv_fail(st, "%s: %s", opt, why);
    }
    if (a.dtype != QV_DT_I4 && a.dtype != QV_DT_I8)
        st = qv_fail(QV_ERR_DTYPE, "%s %s is %s; expected int32 or int64", opt, path, qv_dtype_name(a.dtype));
    int shape_ok = rows == 1 ? (a.ndim == 1 && a.shape[0] == cols) || (a.ndim == 2 && a.count == cols)
                             : a.ndim == 2 && a.shape[0] == rows && a.shape[1] == cols;
    if (st == QV_OK && !shape_ok)
        st = qv_fail(QV_ERR_SHAPE, "%s %s is %s; expected (%lld, %lld)", opt, path,
                     qv_array_describe(&a, buf, sizeof buf), (long long)rows, (long long)cols);
    for (int64_t i = 0; st == QV_OK && i < a.count; i++) {
        int64_t v = a.dtype == QV_DT_I4 ? ((int32_t *)a.data)[i] : ((int64_t *)a.data)[i];
        if (v < lo || v > hi)
            st = qv_fail(QV_ERR_RANGE, "%s %s: entry %lld is %lld, outside %lld..%lld", opt, path, (long long)i,
                         (long long)v, (long long)lo, (long long)hi);
        else
            dst[i] = (int32_t)v;
    }
    qv_array_destroy(&a);
    return st;
}

/* Reads everything into p (created here) and the kernel's ids/weights. */
static qv_status load(const moe_args *ma, const qv_moe_spec *s, qv_moe_problem *p, qv_array *out, int32_t **ids,
                      float **weights)
{
    const qv_variant *v = s->expert;
    char buf[96], buf2[96], buf3[96];
    qv_array a = {0}, lg = {0};
    const vio_operand aop = vio_operand_of("--a", v->afmt, "a=%s", vio_fname(v->afmt));
    const vio_operand lop = vio_operand_of("--logits", s->logit_fmt, "logits=%s", vio_fname(s->logit_fmt));
    const vio_operand oop = vio_operand_of("--out", v->ofmt, "out=%s", vio_fname(v->ofmt));
    QV_TRY(vio_load_as(&aop, ma->a, &a));
    qv_status st = vio_load_as(&lop, ma->logits, &lg);
    if (st == QV_OK) st = vio_load_as(&oop, ma->out, out);
    if (st == QV_OK && (a.ndim != 2 || lg.ndim != 2 || out->ndim != 2 || lg.shape[0] != a.shape[0] ||
                        out->shape[0] != a.shape[0]))
        st = qv_fail(QV_ERR_SHAPE, "--a is %s, --logits %s and --out %s; expected (T, K), (T, E) and (T, N)",
                     qv_array_describe(&a, buf, sizeof buf), qv_array_describe(&lg, buf2, sizeof buf2),
                     qv_array_describe(out, buf3, sizeof buf3));
    long long shared = 0;
    if (st == QV_OK && ma->shared && qv_opt_long("--shared", ma->shared, 0, 64, &shared))
        st = qv_fail(QV_ERR_USAGE, "--shared %s: expected 0..64", ma->shared);
    int e = st == QV_OK ? (int)lg.shape[1] : 0;
    int32_t *map = NULL;
    int e_local = e;
    if (st == QV_OK && ma->map) {
        map = malloc(sizeof(int32_t) * (size_t)(e ? e : 1));
        if (!map) st = qv_fail(QV_ERR_NOMEM, "out of memory");
        if (st == QV_OK) st = load_ints("--expert-map", ma->map, 1, e, -1, e - 1, map);
        e_local = 0;
        for (int j = 0; st == QV_OK && j < e; j++) e_local += map[j] >= 0;
    }
    if (st == QV_OK)
        st = qv_moe_problem_create(p, s, a.shape[0], out->shape[1], a.shape[1], e, e_local, (int)shared);
    if (st == QV_OK) {
        memcpy(p->a, a.data, a.nbytes);
        memcpy(p->logits, lg.data, lg.nbytes);
        if (map) memcpy(p->expert_map, map, sizeof(int32_t) * (size_t)e);
    }
    free(map);
    qv_array_destroy(&a);
    qv_array_destroy(&lg);
    QV_TRY(st);
    if (!s->sbias && ma->sbias)
        return qv_fail(QV_ERR_USAGE, "--score-bias given, but the spec declares no selection bias (sbias=f32)");
    if (s->sbias) {
        if (!ma->sbias)
            return qv_fail(QV_ERR_USAGE, "the spec declares sbias=f32: --score-bias SB.npy (E) float32 is required");
        const vio_operand op = vio_operand_of("--score-bias", QV_FMT_F32, "the selection bias (f32, one per router expert)");
        QV_TRY(vio_load_into(&op, ma->sbias, 1, p->e, p->score_bias, 0));
    }
    if (ma->sgate && !p->shared_gate)
        return qv_fail(QV_ERR_USAGE, "--shared-gate given, but %s", s->sgate ? "there is no shared expert (--shared)"
                                                                            : "the spec declares no gate (sgate=sigmoid)");
    if (p->shared_gate) {
        if (!ma->sgate)
            return qv_fail(QV_ERR_USAGE, "the spec declares sgate=sigmoid: --shared-gate SG.npy (%d, %lld) in %s is "
                           "required", p->shared, (long long)p->k, vio_fname(v->afmt));
        const vio_operand op = vio_operand_of("--shared-gate", v->afmt, "the shared experts' gates (a=%s)",
                                              vio_fname(v->afmt));
        QV_TRY(vio_load_into(&op, ma->sgate, p->shared, p->k, p->shared_gate, 0));
    }
    int64_t t = p->t, k = p->k, n = p->n;
    const qv_problem *w0 = &p->w[0];
    QV_TRY(vio_load_act_extras(v, ma->a_scale, ma->azp, t, k, p->a_scale, p->azp));
    if (!ma->q) return qv_fail(QV_ERR_USAGE, "--q (the (X, K, N) stacked weight codes) is required");
    const vio_operand qop = vio_operand_of("--q", v->wfmt, "w=%s", vio_w_name(v));
    QV_TRY(load_stack(&qop, ma->q, p, k, n, ST_Q, 0));
    QV_TRY(vio_want(ma->scales, w0->scales != NULL, v, "--scales", "weight scales"));
    if (w0->scales) {
        const vio_operand op = vio_operand_of("--scales", v->sfmt, "ws=%s", vio_fname(v->sfmt));
        QV_TRY(load_stack(&op, ma->scales, p, qv_problem_scale_rows(w0), qv_problem_scale_cols(w0), ST_SCALES, 0));
    }
    QV_TRY(vio_want(ma->scales2, w0->scales2 != NULL, v, "--scales2", "second-level scales"));
    if (w0->scales2) {
        const vio_operand op = vio_operand_of("--scales2", v->s2fmt, "ws2=%s", vio_fname(v->s2fmt));
        QV_TRY(load_stack(&op, ma->scales2, p, 1, qv_problem_scale2_count(w0), ST_SCALES2, 1));
    }
    QV_TRY(vio_want(ma->zeros, v->zero_point != QV_ZP_NONE, v, "--zeros", "zero points"));
    if (v->zero_point == QV_ZP_INT) {
        const vio_operand op = vio_operand_of("--zeros", v->wfmt, "wz=int (codes of w=%s)", vio_w_name(v));
        QV_TRY(load_stack(&op, ma->zeros, p, qv_problem_zero_rows(w0), qv_problem_zero_cols(w0), ST_ZEROS, 0));
    } else if (v->zero_point == QV_ZP_FLOAT) {
        const vio_operand op = vio_operand_of("--zeros", v->sfmt, "wz=float (values in ws=%s)", vio_fname(v->sfmt));
        QV_TRY(load_stack(&op, ma->zeros, p, qv_problem_zero_rows(w0), qv_problem_zero_cols(w0), ST_ZEROS_F, 1));
    }
    QV_TRY(vio_want(ma->bias, v->bias_fmt != QV_FMT_NONE, v, "--bias", "bias"));
    if (w0->bias) {
        const vio_operand op = vio_operand_of("--bias", v->bias_fmt, "bias=%s", vio_fname(v->bias_fmt));
        QV_TRY(load_stack(&op, ma->bias, p, 1, n, ST_BIAS, 1));
    }
    QV_TRY(vio_want(ma->g_idx, w0->g_idx != NULL, v, "--g-idx", "act_order (act=gidx)"));
    if (w0->g_idx) {
        int x = p->e_local + p->shared;
        int32_t *g = malloc(sizeof(int32_t) * (size_t)(x * k));
        if (!g) return qv_fail(QV_ERR_NOMEM, "out of memory");
        qv_status gs = load_ints("--g-idx", ma->g_idx, x, k, 0, k / w0->g - 1, g);
        for (int i = 0; gs == QV_OK && i < x; i++) memcpy(p->w[i].g_idx, g + i * k, sizeof(int32_t) * (size_t)k);
        free(g);
        QV_TRY(gs);
    }
    if (ma->weights && !ma->ids) return qv_fail(QV_ERR_USAGE, "--weights needs --ids (the experts they belong to)");
    if (ma->ids) {
        int topk = s->topk;
        *ids = malloc(sizeof(int32_t) * (size_t)(t * topk));
        if (!*ids) return qv_fail(QV_ERR_NOMEM, "out of memory");
        QV_TRY(load_ints("--ids", ma->ids, t, topk, 0, e - 1, *ids));
        if (ma->weights) {
            qv_array wa = {0};
            const vio_operand op = vio_operand_of("--weights", QV_FMT_F32, "routing weights (f32)");
            QV_TRY(vio_load_as(&op, ma->weights, &wa));
            qv_status ws = vio_check_shape(&op, ma->weights, &wa, t, topk);
            if (ws == QV_OK) {
                *weights = malloc(wa.nbytes);
                if (!*weights) ws = qv_fail(QV_ERR_NOMEM, "out of memory");
                else memcpy(*weights, wa.data, wa.nbytes);
            }
            qv_array_destroy(&wa);
            QV_TRY(ws);
        }
    }
    return QV_OK;
}

static int input_error(qv_status st)
{
    fprintf(stderr, "qvet verify: %s: %s\n", qv_status_str(st), qv_errmsg());
    return qv_status_exit_code(st);
}

int qv_cmd_verify_moe(int argc, char **argv)
{
    moe_args ma = {0};
    const vio_opt opts[] = {{"--spec", &ma.spec},       {"--a", &ma.a},           {"--a-scale", &ma.a_scale},
                            {"--azp", &ma.azp},         {"--logits", &ma.logits}, {"--expert-map", &ma.map},
                            {"--shared", &ma.shared},   {"--q", &ma.q},           {"--scales", &ma.scales},
                            {"--scales2", &ma.scales2}, {"--zeros", &ma.zeros},   {"--bias", &ma.bias},
                            {"--g-idx", &ma.g_idx},     {"--ids", &ma.ids},       {"--weights", &ma.weights},
                            {"--out", &ma.out},         {"--jobs", &ma.jobs},       {"--score-bias", &ma.sbias},
                            {"--shared-gate", &ma.sgate}};
    int pr = vio_parse_args(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), &ma.json, &ma.spec,
                            " (routed form)", usage);
    if (pr >= 0) return pr;
    if (!ma.spec || !ma.a || !ma.logits || !ma.out) {
        fprintf(stderr, "qvet verify: a routed spec needs --a, --logits, --q and --out\n");
        usage(stderr);
        return 2;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long long jobs = cores > 0 && cores <= 1024 ? cores : 1;
    if (ma.jobs && qv_opt_long("--jobs", ma.jobs, 1, 1024, &jobs)) return 2;
    qv_moe_spec s;
    qv_status st = qv_moe_spec_parse(ma.spec, &s);
    if (st != QV_OK) return input_error(st);
    qv_moe_problem p = {0};
    qv_array out = {0};
    int32_t *ids = NULL;
    float *weights = NULL;
    st = load(&ma, &s, &p, &out, &ids, &weights);
    qv_moe_result r;
    openblas_set_num_threads((int)jobs);
    if (st == QV_OK) st = ref_moe_verify_jobs(&p, out.data, ids, weights, (int)jobs, &r);
    if (st != QV_OK) {
        qv_moe_problem_destroy(&p);
        qv_array_destroy(&out);
        free(ids), free(weights);
        return input_error(st);
    }
    if (ma.json) {
        fputs("{\"spec\":", stdout);
        qv_json_fput_str(stdout, s.text);
        printf(",\"t\":%lld,\"n\":%lld,\"k\":%lld,\"experts\":%d,\"local\":%d,\"shared\":%d,\"topk\":%d,"
               "\"route_bad\":%lld,\"weight_bad\":%lld,\"ambiguous\":%lld,\"first_bad_token\":%lld,",
               (long long)p.t, (long long)p.n, (long long)p.k, p.e, p.e_local, p.shared, s.topk,
               (long long)r.n_route_bad, (long long)r.n_weight_bad, (long long)r.n_ambiguous,
               (long long)r.first_bad_token);
        qv_result_json_fields(stdout, &r.out);
        printf("}\n");
    } else {
        printf("qvet verify %s (t=%lld n=%lld k=%lld, %d experts, %d local, %d shared): %s\n", s.text, (long long)p.t,
               (long long)p.n, (long long)p.k, p.e, p.e_local, p.shared, qv_grade_name(r.out.grade));
        printf("  routing:    %s; %lld token(s) near a tie%s; %lld not an admissible top-%d; %lld weight(s) out "
               "of bound\n", ids ? "ids given" : "no ids", (long long)r.n_ambiguous,
               ids ? "" : " (decided by the output)", (long long)r.n_route_bad, s.topk, (long long)r.n_weight_bad);
        vio_print_result(&r.out);
    }
    int grade = r.out.grade;
    qv_moe_problem_destroy(&p);
    qv_array_destroy(&out);
    free(ids), free(weights);
    return grade == QV_FAIL ? 1 : 0;
}
