/* criteria.c: the acceptance tests the field uses today (result.h), computed
 * on qvet's own outputs so the mutation report can show which bugs they miss.
 * Thresholds: Marlin's test_marlin (1e-3) and vLLM's kernel tests (0.04) on the
 * mean relative error; a global cosine similarity of 0.99 as quanto-style
 * checks use; llama.cpp test-backend-ops' default NMSE limit 5e-4. */
#include <math.h>

#include "qvet/result.h"

void qv_usual_criteria(const double *c, const double *ref, int64_t count, qv_criteria *out)
{
    double sum_abs_err = 0, sum_abs_ref = 0, dot = 0, cc = 0, rr = 0, se = 0;
    for (int64_t i = 0; i < count; i++) {
        double d = c[i] - ref[i];
        sum_abs_err += fabs(d);
        sum_abs_ref += fabs(ref[i]);
        dot += c[i] * ref[i];
        cc += c[i] * c[i];
        rr += ref[i] * ref[i];
        se += d * d;
    }
    out->mean_rel = sum_abs_err / sum_abs_ref;
    out->cosine = dot / (sqrt(cc) * sqrt(rr));
    out->nmse = se / rr;
    /* Written as "x < limit" so a NaN measure never passes. */
    out->marlin_pass = out->mean_rel < 1e-3;
    out->vllm_pass = out->mean_rel < 0.04;
    out->cosine_pass = out->cosine >= 0.99;
    out->nmse_pass = out->nmse < 5e-4;
}
