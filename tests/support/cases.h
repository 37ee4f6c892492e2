/* cases.h: the seeded GEMM problems of the CPU suites that check the models,
 * the exact references and the verdict (t_model, t_truth, t_verify, and
 * t_layout, t_moe, t_pack_cli, t_spec): the
 * suite's seed, the per-case seed mixing, and a problem filled by a probe,
 * with its truth. Linked into every test binary from tests/support/.
 * Rule: setup failures are Check assertions; nothing here computes an
 * expected value (each suite derives its own). */
#ifndef QVET_TEST_CASES_H
#define QVET_TEST_CASES_H

#include <stdint.h>

#include "qvet/probe.h"
#include "qvet/reference.h"

/* $QVET_SEED when set and not empty (any base strtoull reads), else `dflt`. */
uint64_t case_seed(uint64_t dflt);

/* The seed of case b under suite seed a: a splitmix64-style finaliser of
 * a * golden ratio + b + salt. Each suite keeps its own salt, so its cases
 * draw the same problems as before the helper existed. */
uint64_t case_mix(uint64_t a, uint64_t b, uint64_t salt);

/* Creates p (the caller destroys it) as an m x n x k problem of row v and fills
 * it with probe `kind` in regime rg from `seed`; asserts both succeed. */
void case_fill(qv_problem *p, const qv_variant *v, int64_t m, int64_t n, int64_t k, qv_probe_kind kind, qv_regime rg,
               uint64_t seed);

/* case_fill for the registry row named `row`; asserts that the row exists. */
void case_fill_row(qv_problem *p, const char *row, int64_t m, int64_t n, int64_t k, qv_probe_kind kind,
                   qv_regime rg, uint64_t seed);

/* Computes p's exact truth into t (the caller clears it); asserts success. */
void case_truth(const qv_problem *p, ref_truth *t);

/* Clears t and destroys p: the end of every case that computed a truth. */
void case_release(qv_problem *p, ref_truth *t);

#endif
