/* cli_util.c: option value parsing, the `qvet pack` folder reader and the
 * provenance facts shared by the subcommands (cli.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal/cli.h"

int qv_opt_long(const char *opt, const char *val, long long lo, long long hi, long long *out)
{
    if (!val) {
        fprintf(stderr, "qvet: option %s needs a value\n", opt);
        return -1;
    }
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 0);
    if (errno || end == val || *end || v < lo || v > hi) {
        fprintf(stderr, "qvet: option %s: '%s' is not an integer in [%lld, %lld]\n", opt, val, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* dir/name into *a when the file exists (*present says whether it does). */
static qv_status load_opt(const char *dir, const char *name, qv_array *a, int *present)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat stt;
    *present = stat(path, &stt) == 0;
    return *present ? qv_npy_load(path, a) : QV_OK;
}

qv_status qv_pack_dir_load(const char *dir, qv_pack_dir *d)
{
    memset(d, 0, sizeof *d);
    int has_b = 0;
    qv_status st = load_opt(dir, "B.npy", &d->b, &has_b);
    if (st == QV_OK && !has_b) st = qv_fail(QV_ERR_IO, "%s/B.npy does not exist", dir);
    if (st == QV_OK) st = load_opt(dir, "scales.npy", &d->s, &d->has_s);
    if (st == QV_OK) st = load_opt(dir, "scales2.npy", &d->s2, &d->has_s2);
    if (st == QV_OK) st = load_opt(dir, "zeros.npy", &d->z, &d->has_z);
    if (st == QV_OK) st = load_opt(dir, "perm.npy", &d->perm, &d->has_perm);
    if (st == QV_OK) st = load_opt(dir, "g_idx.npy", &d->g_idx, &d->has_g_idx);
    if (st == QV_OK) st = load_opt(dir, "scale_pow2.npy", &d->pw, &d->has_pw);
    if (st == QV_OK) st = load_opt(dir, "bias.npy", &d->bias, &d->has_bias);
    if (st != QV_OK) qv_pack_dir_destroy(d);
    return st;
}

qv_status qv_pack_dir_fp4(const qv_pack_dir *d, const char *dir, qv_layout layout, qv_packed *pk, qv_fmt *bias_fmt)
{
    const char *ln = qv_layout_name(layout);
    const int nv = layout == QV_LAYOUT_MARLIN_FP4_NV;
    const int g = nv ? 16 : 32; /* the group the kernel reads one scale per */
    char buf[96];
    memset(pk, 0, sizeof *pk);
    *bias_fmt = QV_FMT_NONE;
    /* 128 = 2 words per column of a 64-wide chunk: N must be a multiple of 64 */
    if (d->b.dtype != QV_DT_I4 || d->b.ndim != 2 || d->b.shape[1] % 128 || d->b.shape[0] < 1 || d->b.shape[1] < 1)
        return qv_fail(QV_ERR_SHAPE, "%s/B.npy is %s; %s needs int32 (K/16, 2N) with N a multiple of 64", dir,
                       qv_array_describe(&d->b, buf, sizeof buf), ln);
    const int64_t k = d->b.shape[0] * 16, n = d->b.shape[1] / 2;
    if (k % g) return qv_fail(QV_ERR_SHAPE, "%s/B.npy: K=%lld is not a multiple of %d", dir, (long long)k, g);
    if (!d->has_s || d->s.ndim != 2 || d->s.dtype != QV_DT_U1 || d->s.shape[0] != k / g || d->s.shape[1] != n)
        return qv_fail(QV_ERR_SHAPE, "%s/scales.npy %s; %s needs uint8 (%lld, %lld)", dir,
                       d->has_s ? qv_array_describe(&d->s, buf, sizeof buf) : "does not exist", ln,
                       (long long)(k / g), (long long)n);
    if (nv && (!d->has_s2 || d->s2.dtype != QV_DT_F4 || d->s2.count != 1))
        return qv_fail(QV_ERR_SHAPE, "%s/scales2.npy %s; marlin-fp4-nv needs the f32 global scale, shape (1)", dir,
                       d->has_s2 ? "is not one float32" : "does not exist");
    if (nv && (!d->has_pw || d->pw.dtype != QV_DT_I4 || d->pw.count != 1))
        return qv_fail(QV_ERR_SHAPE, "%s/scale_pow2.npy %s; marlin-fp4-nv needs it (int32, shape (1): the power of "
                       "two the scale bytes carry)", dir, d->has_pw ? "is not one int32" : "does not exist");
    if (!nv && (d->has_s2 || d->has_pw))
        return qv_fail(QV_ERR_FORMAT, "%s: marlin-fp4-mx has no scales2.npy or scale_pow2.npy", dir);
    if (d->has_z || d->has_perm || d->has_g_idx)
        return qv_fail(QV_ERR_FORMAT, "%s: %s has no zero points and no act_order", dir, ln);
    if (d->has_bias) {
        qv_dtype t = d->bias.dtype;
        *bias_fmt = t == QV_DT_F2 ? QV_FMT_F16 : t == QV_DT_F4 ? QV_FMT_F32
                    : (t == QV_DT_U2 || t == QV_DT_BF16) ? QV_FMT_BF16 : QV_FMT_NONE;
        if (*bias_fmt == QV_FMT_NONE || d->bias.ndim != 1 || d->bias.shape[0] != n)
            return qv_fail(QV_ERR_SHAPE, "%s/bias.npy is %s; expected (%lld) float16, bf16 (<u2) or float32", dir,
                           qv_array_describe(&d->bias, buf, sizeof buf), (long long)n);
    }
    *pk = (qv_packed){.layout = layout, .k = k, .n = n, .g = g, .b = d->b.data, .b_rows = d->b.shape[0],
                      .b_cols = d->b.shape[1], .scales = d->s.data, .s_rows = k / g, .s_cols = n, .s_elem = 1,
                      .s_order = qv_layout_scale_order(layout, QV_SCALE_GROUP, k / g),
                      .s_pow2 = nv ? ((const int32_t *)d->pw.data)[0] : 0,
                      .scales2 = nv ? d->s2.data : NULL, .s2_cols = nv ? 1 : 0,
                      .bias = d->has_bias ? d->bias.data : NULL, .bias_cols = d->has_bias ? n : 0,
                      .bias_elem = d->has_bias ? qv_dtype_size(d->bias.dtype) : 0};
    return QV_OK;
}

void qv_pack_dir_destroy(qv_pack_dir *d)
{
    qv_array_destroy(&d->b);
    qv_array_destroy(&d->s);
    qv_array_destroy(&d->s2);
    qv_array_destroy(&d->z);
    qv_array_destroy(&d->perm);
    qv_array_destroy(&d->g_idx);
    qv_array_destroy(&d->pw);
    qv_array_destroy(&d->bias);
    memset(d, 0, sizeof *d);
}

int qv_opt_double(const char *opt, const char *val, double *out)
{
    if (!val) {
        fprintf(stderr, "qvet: option %s needs a value\n", opt);
        return -1;
    }
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end) {
        fprintf(stderr, "qvet: option %s: '%s' is not a number\n", opt, val);
        return -1;
    }
    *out = v;
    return 0;
}

const char *qv_build_commit(void)
{
#ifdef QV_GIT_COMMIT
    static const char commit[] = QV_GIT_COMMIT;
    /* A full SHA-1, as `git rev-parse HEAD` prints it, with "+changes" where
     * the build's tracked files differed from it; anything else (a build
     * outside a repository) is unknown. */
    if (strspn(commit, "0123456789abcdef") == 40 && (!commit[40] || !strcmp(commit + 40, "+changes")))
        return commit;
#endif
    return "unknown";
}

void qv_driver_version(int driver_api, char *buf, size_t len)
{
    if (!len) return;
    buf[0] = '\0';
    if (!driver_api) return;
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f) {
        /* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  ..."; the
         * open modules say "... Open Kernel Module for x86_64  580.159.03 ...":
         * the version is the first word after "Kernel Module" that starts
         * with a digit and holds a dot. */
        char line[256];
        if (fgets(line, sizeof line, f)) {
            char *k = strstr(line, "Kernel Module"), *save = NULL;
            for (char *w = k ? strtok_r(k + strlen("Kernel Module"), " \t\n", &save) : NULL; w;
                 w = strtok_r(NULL, " \t\n", &save))
                if (*w >= '0' && *w <= '9' && strchr(w, '.')) {
                    snprintf(buf, len, "%s", w);
                    break;
                }
        }
        fclose(f);
    }
    if (!buf[0]) snprintf(buf, len, "%d.%d", driver_api / 1000, driver_api % 1000 / 10);
}
