/* cli_util.c: option value parsing and the `qvet pack` folder reader shared by
 * the subcommands (cli.h). */
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
    if (st != QV_OK) qv_pack_dir_destroy(d);
    return st;
}

void qv_pack_dir_destroy(qv_pack_dir *d)
{
    qv_array_destroy(&d->b);
    qv_array_destroy(&d->s);
    qv_array_destroy(&d->s2);
    qv_array_destroy(&d->z);
    qv_array_destroy(&d->perm);
    qv_array_destroy(&d->g_idx);
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
