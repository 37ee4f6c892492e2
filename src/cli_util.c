/* cli_util.c: option value parsing shared by the subcommands (cli.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "qvet/cli.h"

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
