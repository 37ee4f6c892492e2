/* reference.h: the CPU ground truth (DESIGN.md §3-§4). Included by the
 * campaign, `qvet verify`, tests and eval. Rule: the reference computes the exact
 * real value of the variant's declared math from the same quantized bits the
 * kernel reads, and a certified per-element bound E; it never compares against
 * unquantized weights and never trusts the packer's tables (ref_unpack decodes
 * packed layouts from the mma fragment definition). */
#ifndef QVET_REFERENCE_H
#define QVET_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/layout.h"
#include "qvet/problem.h"
#include "qvet/result.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exact value and bound for every output element. */
typedef struct ref_truth {
    int64_t m, n;
    double *y;          /* (m, n) the exact real value of the declared math (rounded to
                           double only where ref_path says the result is still certified) */
    double *bound;      /* (m, n) E: certified bound on |kernel_out_before_cast - y| */
    double *y_rn;       /* (m, n) y correctly rounded to the output format (as a double) */
    const char *path;   /* "int64", "fixed128", "mpfr", "dgemm+cert" */
    const char *why;    /* why the path is certified for this case */
} ref_truth;

/* Computes the truth for p, choosing the path per case (DESIGN.md §4). */
qv_status ref_truth_compute(const qv_problem *p, ref_truth *t);
void      ref_truth_clear(ref_truth *t);

/* The verdict for an output (m, n) codes in p->v->ofmt; `poison` tells which code
 * pattern means "never written" (the runner fills outputs with it). */
void ref_verify(const qv_problem *p, const ref_truth *t, const void *out, qv_result *res);

/* The CPU model of the variant: a C implementation of its declared arithmetic.
 * Writes (m, n) output codes in p->v->ofmt. */
qv_status ref_model_run(const qv_problem *p, void *out);

/* The independent decoder: packed layout -> logical (k, n) codes (+ scales,
 * zeros, perm), derived from the mma fragment definition. Fills a problem's
 * weight buffers (q, scales, scales2, zeros, g_idx must be allocated). */
qv_status ref_unpack(const qv_packed *pk, qv_problem *p);

/* The poison pattern written into outputs before each launch: NaN with a
 * payload that no arithmetic produces (f16 0x7E5A, bf16 0x7FDA, f32 0x7FC05A5A). */
uint32_t ref_poison_code(qv_fmt ofmt);

#ifdef __cplusplus
}
#endif
#endif
