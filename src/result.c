/* result.c: grade names and the JSON form of a comparison result (result.h). */
#include <math.h>
#include <stdio.h>

#include "qvet/result.h"

const char *qv_grade_name(qv_grade g)
{
    switch (g) {
    case QV_PASS: return "PASS";
    case QV_MARGINAL: return "MARGINAL";
    case QV_FAIL: return "FAIL";
    }
    return "?";
}

/* A JSON string literal; NULL is written as null. */
static void json_str(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* A JSON number; NaN and Inf have no JSON form and are written as null.
 * %.17g round-trips every double. */
static void json_num(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.17g", x);
    else
        fputs("null", f);
}

void qv_result_json_fields(FILE *f, const qv_result *r)
{
    fputs("\"verdict\":", f);
    json_str(f, qv_grade_name(r->grade));
    fputs(",\"reason\":", f);
    json_str(f, r->reason);
    fputs(",\"ref_path\":", f);
    json_str(f, r->ref_path);
    fputs(",\"ref_why\":", f);
    json_str(f, r->ref_why);
    fprintf(f, ",\"n_elements\":%lld,\"n_fail\":%lld,\"n_nan\":%lld,\"n_inf\":%lld,\"n_unwritten\":%lld",
            (long long)r->n_elements, (long long)r->n_fail, (long long)r->n_nan, (long long)r->n_inf,
            (long long)r->n_unwritten);
    const struct {
        const char *key;
        double val;
    } nums[] = {
        {"max_err_over_bound", r->max_err_over_bound},
        {"p99_err_over_bound", r->p99_err_over_bound},
        {"max_abs_err", r->max_abs_err},
        {"max_ulp", r->max_ulp},
        {"p99_ulp", r->p99_ulp},
        {"nmse", r->nmse},
        {"norm_rel", r->norm_rel},
        {"bias_z", r->bias_z},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        fprintf(f, ",\"%s\":", nums[i].key);
        json_num(f, nums[i].val);
    }
    fprintf(f, ",\"worst\":{\"m\":%lld,\"n\":%lld,\"out\":", (long long)r->worst_m,
            (long long)r->worst_n);
    json_num(f, r->worst_out);
    fputs(",\"y\":", f);
    json_num(f, r->worst_y);
    fputs(",\"bound\":", f);
    json_num(f, r->worst_bound);
    fputc('}', f);
}
