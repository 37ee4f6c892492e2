/* shrink.c: reducing a failing case to a small one that still fails, and
 * dumping a case's inputs as .npy (campaign.h, docs/design.md §5). A reduction is a
 * window of the original data (rows, columns, K slice) or the same shape with
 * half of the data zeroed; each candidate is run on the same backend and kept
 * only if it still FAILs with a non-vacuous reference. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal/campaign.h"
#include "qvet/array.h"
#include "qvet/formats.h"
#include "qvet/spec.h"

/* The smallest legal steps of N and K (K: a multiple of k_tile, of g and of
 * the zero points' group size). */
static int64_t n_step(const qv_variant *v) { return v->n_tile > 0 ? v->n_tile : 1; }

static int64_t lcm_step(int64_t s, int64_t g)
{
    int64_t a = s, b = g;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return s / a * g;
}

static int64_t k_step(const qv_variant *v)
{
    int64_t s = v->k_tile > 0 ? v->k_tile : 1;
    if (v->g > 0) s = lcm_step(s, v->g);
    if (v->zero_point && v->zp_layout == QV_SCALE_GROUP && v->zp_g > 0) s = lcm_step(s, v->zp_g);
    return s;
}

static int64_t snap_down(int64_t x, int64_t step)
{
    int64_t r = x / step * step;
    return r < step ? step : r;
}

/* Copies element `si` of src into element `di` of dst, both of format f. */
static void copy_el(qv_fmt f, void *dst, int64_t di, const void *src, int64_t si)
{
    size_t es = qv_fmt_storage_bytes(f);
    memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es, es);
}

/* The window of one (k, n)-covering array of granularity l (group size g,
 * block bk x bn): entry (r, c) of w's array takes the source entry that
 * covers the first weight of its group or block, at (k0 + kk, n0 + j) in p.
 * With act_order the window's groups are the first groups of p (g_idx is
 * folded modulo their count). es: bytes per element. */
static void window_gran(qv_scale_layout l, int g, int bk, int bn, size_t es, const qv_problem *p, const qv_problem *w,
                        int64_t n0, int64_t k0, const void *src, void *dst)
{
    int64_t rows = qv_gran_rows(l, g, bk, w->k), cols = qv_gran_cols(l, bn, w->n);
    int64_t ebk = bk > 0 ? bk : 128, ebn = bn > 0 ? bn : 128; /* 0 means 128 (variant.h) */
    int grouped = l == QV_SCALE_GROUP || l == QV_SCALE_GROUP_CHANNEL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t kk = grouped ? r * g : l == QV_SCALE_BLOCK ? r * ebk : 0;
            int64_t j = l == QV_SCALE_BLOCK ? c * ebn : l == QV_SCALE_TENSOR ? 0 : c;
            int64_t grp = grouped ? (p->g_idx ? r : (k0 + kk) / g) : 0;
            int64_t si = qv_gran_index(l, bk, bn, p->n, k0 + kk, n0 + j, grp);
            memcpy((char *)dst + (size_t)(r * cols + c) * es, (const char *)src + (size_t)si * es, es);
        }
}

/* A window of p: rows [m0, m0+m), columns [n0, n0+n), K rows [k0, k0+k).
 * Group and block data follow their rows (window_gran); an act_order g_idx is
 * folded into the new group count. */
static qv_status window(const qv_problem *p, int64_t m0, int64_t m, int64_t n0, int64_t n, int64_t k0,
                        int64_t k, qv_problem *w)
{
    const qv_variant *v = p->v;
    QV_TRY(qv_problem_create(w, v, m, n, k));
    for (int64_t i = 0; i < m; i++)
        for (int64_t kk = 0; kk < k; kk++) copy_el(v->afmt, w->a, i * k + kk, p->a, (m0 + i) * p->k + k0 + kk);
    for (int64_t kk = 0; kk < k; kk++)
        for (int64_t j = 0; j < n; j++) copy_el(v->wfmt, w->q, kk * n + j, p->q, (k0 + kk) * p->n + n0 + j);
    if (p->g_idx) {
        int64_t ng = k / p->g;
        for (int64_t kk = 0; kk < k; kk++) w->g_idx[kk] = (int32_t)(p->g_idx[k0 + kk] % ng);
    }
    if (w->scales)
        window_gran(v->scale_layout, p->g, v->block_k, v->block_n, qv_fmt_storage_bytes(v->sfmt), p, w, n0, k0,
                    p->scales, w->scales);
    if (w->scales2) {
        if (v->s2_layout == QV_SCALE_CHANNEL)
            for (int64_t j = 0; j < n; j++) w->scales2[j] = p->scales2[n0 + j];
        else
            w->scales2[0] = p->scales2[0];
    }
    if (w->zeros)
        window_gran(v->zp_layout, v->zp_g, v->zp_bk, v->zp_bn, 1, p, w, n0, k0, p->zeros, w->zeros);
    if (w->zeros_f)
        window_gran(v->zp_layout, v->zp_g, v->zp_bk, v->zp_bn, sizeof(float), p, w, n0, k0, p->zeros_f, w->zeros_f);
    if (w->bias)
        for (int64_t j = 0; j < n; j++) w->bias[j] = p->bias[n0 + j];
    switch (v->act_scale) {
    case QV_ASCALE_NONE: break;
    case QV_ASCALE_TENSOR: w->a_scale[0] = p->a_scale[0]; break;
    case QV_ASCALE_TOKEN:
        for (int64_t i = 0; i < m; i++) w->a_scale[i] = p->a_scale[m0 + i];
        break;
    case QV_ASCALE_TOKEN_BLOCK: {
        /* MN-major (ceil(k/128), m) in both, each with its own m. */
        int64_t kb = (k + 127) / 128, pkb = (p->k + 127) / 128;
        for (int64_t i = 0; i < m; i++)
            for (int64_t b = 0; b < kb; b++) {
                int64_t sb = (k0 + 128 * b) / 128;
                w->a_scale[b * m + i] = p->a_scale[(sb < pkb ? sb : pkb - 1) * p->m + m0 + i];
            }
        break;
    }
    }
    if (w->azp) {
        if (v->azp == QV_AZP_TOKEN)
            for (int64_t i = 0; i < m; i++) w->azp[i] = p->azp[m0 + i];
        else
            w->azp[0] = p->azp[0];
    }
    return QV_OK;
}

/* Zeroes activations (what = 0) or weights (what = 1) in K rows [k0, k1). */
static void zero_k_range(qv_problem *p, int what, int64_t k0, int64_t k1)
{
    const qv_variant *v = p->v;
    if (what == 0) {
        uint32_t zc = qv_encode(v->afmt, 0.0, QV_SAT_NONE);
        for (int64_t i = 0; i < p->m; i++)
            for (int64_t kk = k0; kk < k1; kk++) copy_el(v->afmt, p->a, i * p->k + kk, &zc, 0);
        return;
    }
    for (int64_t kk = k0; kk < k1; kk++)
        for (int64_t j = 0; j < p->n; j++) {
            int64_t at = kk * p->n + j;
            if (v->zero_point == QV_ZP_INT) {
                /* q = z: the code the zero point cancels (both one byte) */
                int64_t grp = v->zp_layout == QV_SCALE_GROUP ? (p->g_idx ? p->g_idx[kk] : kk / v->zp_g) : 0;
                ((uint8_t *)p->q)[at] = p->zeros[qv_gran_index(v->zp_layout, v->zp_bk, v->zp_bn, p->n, kk, j, grp)];
            } else if (v->wfmt == QV_FMT_I4 || v->wfmt == QV_FMT_I8) {
                ((int8_t *)p->q)[at] = 0;
            } else {
                uint32_t zc = qv_encode(v->wfmt, 0.0, QV_SAT_NONE);
                copy_el(v->wfmt, p->q, at, &zc, 0);
            }
        }
}

/* 1 when c still fails on b in a way worth keeping: a FAIL verdict from the
 * kernel (not a reference refusal) against a reference that is not all zero. */
static int still_fails(const qv_backend *b, const qv_problem *c, int unique, int *tries)
{
    qv_outcome o;
    ++*tries;
    if (qv_case_run(b, c, unique, &o) != QV_OK) {
        qv_outcome_clear(&o);
        return 0;
    }
    int fails = o.res.grade == QV_FAIL && (o.st == QV_OK || o.backend_error);
    if (fails && o.has_truth) {
        int nonzero = 0;
        for (int64_t i = 0; i < c->m * c->n && !nonzero; i++) nonzero = o.truth.y[i] != 0.0;
        fails = nonzero;
    }
    qv_outcome_clear(&o);
    return fails;
}

/* Candidate reductions of cur, in the order they are tried. */
typedef struct cand {
    int64_t m0, m, n0, n, k0, k;
    int zero_what;       /* -1: none, 0: activations, 1: weights */
    int64_t z0, z1;      /* zeroed K range */
} cand;

static int make_cands(const qv_problem *p, cand *out, int cap)
{
    const qv_variant *v = p->v;
    int64_t ns = n_step(v), ks = k_step(v);
    int c = 0;
    cand base = {0, p->m, 0, p->n, 0, p->k, -1, 0, 0};
#define ADD(expr)                                                              \
    do {                                                                       \
        if (c < cap) {                                                         \
            cand x_ = base;                                                    \
            expr;                                                              \
            out[c++] = x_;                                                     \
        }                                                                      \
    } while (0)
    /* Halve each dimension, keeping either half (snapped to the legal steps). */
    if (p->m > 1) {
        int64_t h = (p->m + 1) / 2;
        ADD((x_.m = h));
        ADD((x_.m0 = p->m - h, x_.m = h));
    }
    if (p->n > ns) {
        int64_t h = snap_down(p->n / 2, ns);
        ADD((x_.n = h));
        ADD((x_.n0 = p->n - h, x_.n = h));
    }
    if (p->k > ks) {
        int64_t h = snap_down(p->k / 2, ks);
        if (p->g > 0 && p->k > p->g) ADD((x_.k = p->g)); /* a single group */
        ADD((x_.k = h));
        ADD((x_.k0 = p->k - h, x_.k = h));
    }
    /* One step less, for bugs tied to a residue (a K or N tail). */
    if (p->k > ks) {
        ADD((x_.k = p->k - ks));
        ADD((x_.k0 = ks, x_.k = p->k - ks));
    }
    if (p->n > ns) ADD((x_.n = p->n - ns));
    if (p->m > 1) ADD((x_.m = p->m - 1));
    /* Zero halves of the data along K. */
    for (int what = 0; what < 2; what++)
        if (p->k > 1) {
            int64_t h = p->k / 2;
            ADD((x_.zero_what = what, x_.z0 = 0, x_.z1 = h));
            ADD((x_.zero_what = what, x_.z0 = h, x_.z1 = p->k));
        }
#undef ADD
    return c;
}

/* 1 when the data of [k0, k1) is already zero (the zeroing would change nothing). */
static int already_zero(const qv_problem *p, int what, int64_t k0, int64_t k1)
{
    if (what == 0) {
        for (int64_t i = 0; i < p->m; i++)
            for (int64_t kk = k0; kk < k1; kk++)
                if (qv_problem_a(p, i, kk) != 0.0) return 0;
        return 1;
    }
    for (int64_t kk = k0; kk < k1; kk++)
        for (int64_t j = 0; j < p->n; j++)
            if (qv_problem_wq(p, kk, j) != 0.0) return 0;
    return 1;
}

qv_status qv_shrink(const qv_backend *b, const qv_problem *p, int unique, int max_tries, qv_problem *small,
                    qv_shrunk *info)
{
    memset(info, 0, sizeof *info);
    qv_problem cur;
    QV_TRY(qv_problem_clone(&cur, p));
    int progress = 1;
    while (progress && info->tries < max_tries) {
        progress = 0;
        cand cs[24]; /* make_cands proposes at most 15 */
        int nc = make_cands(&cur, cs, (int)(sizeof cs / sizeof cs[0]));
        for (int i = 0; i < nc && info->tries < max_tries; i++) {
            qv_problem t;
            qv_status st;
            if (cs[i].zero_what >= 0) {
                if (already_zero(&cur, cs[i].zero_what, cs[i].z0, cs[i].z1)) continue;
                st = qv_problem_clone(&t, &cur);
                if (st == QV_OK) zero_k_range(&t, cs[i].zero_what, cs[i].z0, cs[i].z1);
            } else {
                st = window(&cur, cs[i].m0, cs[i].m, cs[i].n0, cs[i].n, cs[i].k0, cs[i].k, &t);
            }
            if (st != QV_OK) continue; /* an illegal reduction is simply not a candidate */
            if (still_fails(b, &t, unique, &info->tries)) {
                qv_problem_destroy(&cur);
                cur = t;
                info->steps++;
                progress = 1;
                break;
            }
            qv_problem_destroy(&t);
        }
    }
    info->m = cur.m;
    info->n = cur.n;
    info->k = cur.k;
    *small = cur;
    return QV_OK;
}

/* ---- .npy dumps ---- */

qv_dtype qv_dump_dtype(qv_fmt f)
{
    switch (f) {
    case QV_FMT_F16: return QV_DT_F2;
    case QV_FMT_BF16: return QV_DT_BF16; /* '<u2' raw bits (README) */
    case QV_FMT_F32: return QV_DT_F4;
    case QV_FMT_I4:
    case QV_FMT_I8: return QV_DT_I1;
    case QV_FMT_I32: return QV_DT_I4;
    default: return QV_DT_U1; /* u4b8, u4, u8b128, u8, e4m3, e5m2, e2m1, e8m0, ue4m3 codes */
    }
}

/* count decoded values (exact in f) as codes of f in its storage, a new
 * buffer (NULL when vals is NULL); they were decoded from f, so the encoding
 * is exact. */
static void *encode_values(qv_fmt f, const float *vals, int64_t count, qv_status *st)
{
    if (!vals || *st != QV_OK) return NULL;
    size_t es = qv_fmt_storage_bytes(f);
    unsigned char *buf = malloc((size_t)(count > 0 ? count : 1) * es);
    if (!buf) {
        *st = qv_fail(QV_ERR_NOMEM, "dump buffer of %lld values", (long long)count);
        return NULL;
    }
    for (int64_t i = 0; i < count; i++) {
        if (f == QV_FMT_F32) {
            memcpy(buf + (size_t)i * es, &vals[i], es);
        } else {
            uint32_t code = qv_encode(f, vals[i], QV_SAT_NONE);
            memcpy(buf + (size_t)i * es, &code, es); /* little-endian */
        }
    }
    return buf;
}

static qv_status save(const char *dir, const char *name, qv_dtype dt, int ndim, int64_t d0, int64_t d1,
                      void *data)
{
    if (!data) return QV_OK;
    qv_array a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    a.ndim = ndim;
    a.shape[0] = d0;
    a.shape[1] = d1;
    a.count = ndim == 1 ? d0 : d0 * d1;
    a.nbytes = (size_t)a.count * qv_dtype_size(dt);
    a.data = data;
    a.borrowed = 1;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    return qv_npy_save(path, &a);
}

qv_status qv_mkdirs(const char *dir)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return qv_fail(QV_ERR_IO, "folder name too long: %s", dir);
    for (char *s = tmp + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(tmp, 0777) && errno != EEXIST)
                return qv_fail(QV_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
            *s = '/';
        }
    if (mkdir(tmp, 0777) && errno != EEXIST) return qv_fail(QV_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    return QV_OK;
}

qv_status qv_case_dump(const qv_backend *b, const qv_problem *p, int unique, const char *dir, const char *replay_cmd)
{
    const qv_variant *v = p->v;
    QV_TRY(qv_mkdirs(dir));
    qv_outcome o;
    QV_TRY(qv_case_run(b, p, unique, &o));
    qv_status st = QV_OK;
    int64_t na = qv_problem_ascale_count(p), n2 = qv_problem_scale2_count(p);
    int64_t zr = qv_problem_zero_rows(p), zc = qv_problem_zero_cols(p);
    void *s2 = encode_values(v->s2fmt, p->scales2, n2, &st);
    void *zf = encode_values(v->sfmt, p->zeros_f, zr * zc, &st);
    void *bias = encode_values(v->bias_fmt, p->bias, p->n, &st);
#define SAVE(...)                                                              \
    do {                                                                       \
        if (st == QV_OK) st = save(__VA_ARGS__);                               \
    } while (0)
    SAVE(dir, "A", qv_dump_dtype(v->afmt), 2, p->m, p->k, p->a);
    if (v->act_scale == QV_ASCALE_TOKEN_BLOCK) SAVE(dir, "a_scale", QV_DT_F4, 2, na / p->m, p->m, p->a_scale);
    else if (v->act_scale == QV_ASCALE_TOKEN) SAVE(dir, "a_scale", QV_DT_F4, 2, p->m, 1, p->a_scale);
    else SAVE(dir, "a_scale", QV_DT_F4, 1, na, 0, p->a_scale);
    SAVE(dir, "azp", QV_DT_I4, 1, v->azp == QV_AZP_TOKEN ? p->m : 1, 0, p->azp);
    SAVE(dir, "q", qv_dump_dtype(v->wfmt), 2, p->k, p->n, p->q);
    SAVE(dir, "scales", qv_dump_dtype(v->sfmt), 2, qv_problem_scale_rows(p), qv_problem_scale_cols(p), p->scales);
    SAVE(dir, "scales2", qv_dump_dtype(v->s2fmt), 2, 1, n2, s2);
    SAVE(dir, "zeros", qv_dump_dtype(v->wfmt), 2, zr, zc, p->zeros);
    SAVE(dir, "zeros", qv_dump_dtype(v->sfmt), 2, zr, zc, zf);
    SAVE(dir, "bias", qv_dump_dtype(v->bias_fmt), 1, p->n, 0, bias);
    SAVE(dir, "g_idx", QV_DT_I4, 1, p->k, 0, p->g_idx);
    SAVE(dir, "out", qv_dump_dtype(v->ofmt), 2, p->m, p->n, o.out);
    if (o.has_truth) {
        SAVE(dir, "y", QV_DT_F8, 2, p->m, p->n, o.truth.y);
        SAVE(dir, "bound", QV_DT_F8, 2, p->m, p->n, o.truth.bound);
    }
#undef SAVE
    free(s2);
    free(zf);
    free(bias);
    char spec[QV_SPEC_MAX], path[1024];
    int has_spec = qv_spec_format(v, spec, sizeof spec) >= 0;
    if (st == QV_OK && has_spec) {
        snprintf(path, sizeof path, "%s/spec", dir);
        FILE *f = fopen(path, "w");
        if (!f) st = qv_fail(QV_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        else if ((fprintf(f, "%s\n", spec) < 0) | fclose(f)) st = qv_fail(QV_ERR_IO, "cannot write %s", path);
    }
    if (st == QV_OK) {
        snprintf(path, sizeof path, "%s/replay.txt", dir);
        FILE *f = fopen(path, "w");
        if (!f) {
            st = qv_fail(QV_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        } else {
            fprintf(f, "# %s m=%lld n=%lld k=%lld on %s: %s\n# %s\n", v->name, (long long)p->m,
                    (long long)p->n, (long long)p->k, b->name, qv_grade_name(o.res.grade), o.res.reason);
            fprintf(f, "# the original (unshrunk) case:\n%s\n", replay_cmd);
            fprintf(f, "# these inputs and this output against the model:\n");
            /* A spec goes in single quotes; it never holds one (spec.h). */
            if (v->layout == QV_LAYOUT_LOGICAL) fprintf(f, "qvet verify --spec '%s'", v->name);
            else fprintf(f, "qvet verify %s", v->name);
            fprintf(f, " --a %s/A.npy", dir);
            if (p->a_scale) fprintf(f, " --a-scale %s/a_scale.npy", dir);
            if (p->azp) fprintf(f, " --azp %s/azp.npy", dir);
            fprintf(f, " --q %s/q.npy", dir);
            if (p->scales) fprintf(f, " --scales %s/scales.npy", dir);
            if (p->scales2) fprintf(f, " --scales2 %s/scales2.npy", dir);
            if (p->zeros || p->zeros_f) fprintf(f, " --zeros %s/zeros.npy", dir);
            if (p->bias) fprintf(f, " --bias %s/bias.npy", dir);
            if (p->g_idx) fprintf(f, " --g-idx %s/g_idx.npy", dir);
            fprintf(f, " --out %s/out.npy\n", dir);
            if (fclose(f)) st = qv_fail(QV_ERR_IO, "cannot write %s", path);
        }
    }
    qv_outcome_clear(&o);
    return st;
}
