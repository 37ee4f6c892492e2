/* bench_verify.c: how long certifying one case takes (reference.h:
 * ref_bench_verify), for the docs/design.md §9 target of 16 x 4096 x 4096 under 1 s. */
#include <stdlib.h>
#include <time.h>

#include "qvet/probe.h"
#include "qvet/reference.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ref_bench_verify(int64_t m, int64_t n, int64_t k)
{
    const qv_variant *v = qv_variant_find("marlin-w4a16-g128-f16");
    QV_ASSERT(v, "the registry lost marlin-w4a16-g128-f16");
    qv_problem p;
    if (qv_problem_create(&p, v, m, n, k) != QV_OK) return -1.0;
    void *out = malloc((size_t)qv_problem_out_bytes(&p));
    double sec = -1.0;
    /* The output to verify comes from the CPU model, outside the timed part. */
    if (out && ref_probe_fill(&p, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 1) == QV_OK &&
        ref_model_run(&p, out) == QV_OK) {
        double t0 = now_s();
        ref_truth t;
        if (ref_truth_compute(&p, &t) == QV_OK) {
            qv_result r;
            ref_verify(&p, &t, out, &r);
            sec = now_s() - t0;
            ref_truth_clear(&t);
        }
    }
    free(out);
    qv_problem_destroy(&p);
    return sec;
}
