/* cases.c: cases.h. */
#include "support/cases.h"

#include <check.h>
#include <stdlib.h>

uint64_t case_seed(uint64_t dflt)
{
    const char *s = getenv("QVET_SEED");
    return s && *s ? strtoull(s, NULL, 0) : dflt;
}

uint64_t case_mix(uint64_t a, uint64_t b, uint64_t salt)
{
    /* The multipliers and shifts of splitmix64's output function. */
    uint64_t z = a * 0x9E3779B97F4A7C15ull + b + salt;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void case_fill(qv_problem *p, const qv_variant *v, int64_t m, int64_t n, int64_t k, qv_probe_kind kind, qv_regime rg,
               uint64_t seed)
{
    ck_assert_msg(qv_problem_create(p, v, m, n, k) == QV_OK, "%s %lldx%lldx%lld: %s", v->name, (long long)m,
                  (long long)n, (long long)k, qv_errmsg());
    ck_assert_msg(ref_probe_fill(p, kind, rg, seed) == QV_OK, "%s probe %s seed %llu: %s", v->name,
                  qv_probe_name(kind), (unsigned long long)seed, qv_errmsg());
}

void case_fill_row(qv_problem *p, const char *row, int64_t m, int64_t n, int64_t k, qv_probe_kind kind,
                   qv_regime rg, uint64_t seed)
{
    const qv_variant *v = qv_variant_find(row);
    ck_assert_msg(v != NULL, "no registry row named %s", row);
    case_fill(p, v, m, n, k, kind, rg, seed);
}

void case_truth(const qv_problem *p, ref_truth *t)
{
    ck_assert_msg(ref_truth_compute(p, t) == QV_OK, "%s: truth: %s", p->v->name, qv_errmsg());
}

void case_release(qv_problem *p, ref_truth *t)
{
    ref_truth_clear(t);
    qv_problem_destroy(p);
}
