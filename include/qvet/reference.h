/* reference.h: the CPU ground truth (docs/design.md §3-§4). Included by the
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
    const char *path;   /* "int64", "fixed128", "ozaki", "mpfr", "dgemm+cert" */
    const char *why;    /* why the path is certified for this case */
} ref_truth;

/* Computes the truth for p, choosing the path per case (docs/design.md §4). */
qv_status ref_truth_compute(const qv_problem *p, ref_truth *t);
void      ref_truth_clear(ref_truth *t);

/* The verdict for an output (m, n) codes in p->v->ofmt; an element still
 * holding ref_poison_code(ofmt) (the runner fills outputs with it) counts as
 * never written. */
void ref_verify(const qv_problem *p, const ref_truth *t, const void *out, qv_result *res);

/* The CPU model of the variant: a C implementation of its declared arithmetic.
 * Writes (m, n) output codes in p->v->ofmt. */
qv_status ref_model_run(const qv_problem *p, void *out);

/* Checks the reference's decoding of p (dequantized weights, activations
 * less their zero points, epilogue scales; block-128 scales folded and not)
 * against an independent decoding from problem.h's accessors and the format
 * codec; QV_ERR_RANGE names the first disagreement. The truth and the CPU
 * model share that decoding, so only this check can see a bug in it. */
qv_status ref_operands_check(const qv_problem *p);

/* The independent decoder: packed layout -> logical (k, n) codes (+ scales,
 * zeros, perm), derived from the mma fragment definition. Fills a problem's
 * weight buffers (q, scales, scales2, zeros, g_idx must be allocated). */
qv_status ref_unpack(const qv_packed *pk, qv_problem *p);

/* ref_truth_compute with the path forced: "int64", "fixed128", "ozaki", "mpfr"
 * or "dgemm+cert" (NULL or "" chooses as ref_truth_compute does). Refuses a path
 * that cannot be exact for this case (QV_ERR_UNSUPPORTED). */
qv_status ref_truth_compute_path(const qv_problem *p, const char *path, ref_truth *t);

/* Options of the truth. path: as ref_truth_compute_path's (NULL chooses).
 * jobs: threads finishing the exact sums and the bounds in blocks of output
 * rows (0 or 1: the calling thread alone); every value is the same bits for
 * every jobs. The BLAS calls use the BLAS library's own threads, which the
 * caller sets (qvet verify --jobs sets both). check_operands: the truth's own
 * decoding goes through ref_operands_check's comparison before any sum (its
 * error is then the truth's), so a caller wanting both decodes once. */
typedef struct ref_truth_opts {
    const char *path;
    int jobs;
    int check_operands;
} ref_truth_opts;
qv_status ref_truth_compute_ex(const qv_problem *p, const ref_truth_opts *opts, ref_truth *t);

/* The calling thread keeps its largest decoded (k, n) weight buffer, up to
 * max_bytes, from one reference to the next instead of freeing it (0, the
 * default: keeps none); the thread's exit frees it. For threads that verify
 * many large cases in a row: fresh pages are cleared by the kernel on first
 * touch, a large share of a big case's time. */
void ref_keep_weight_buffer(size_t max_bytes);

/* Options of the verdict. require_nonvacuous: a zero reference norm grades FAIL
 * ("vacuous comparison") instead of being graded on its elements alone. jobs:
 * threads grading blocks of elements (0 or 1: the calling thread alone); the
 * result is the same bits for every value. */
typedef struct ref_verify_opts {
    int require_nonvacuous;
    int jobs;
} ref_verify_opts;
void ref_verify_ex(const qv_problem *p, const ref_truth *t, const void *out, const ref_verify_opts *opts,
                   qv_result *res);

/* Bit-exact verdict for probes whose correct output is unique (exact, one-hot,
 * witness): FAIL at the first element whose code differs from `expected` (any
 * NaN matches any NaN); statistics are filled against `expected`. */
void ref_verify_bitexact(const qv_problem *p, const void *expected, const void *out, qv_result *res);

/* Time in seconds to certify an m x n x k case of marlin-w4a16-g128-f16 with
 * random data (truth + verdict on the model's output), for speed checks. */
double ref_bench_verify(int64_t m, int64_t n, int64_t k);

/* The poison pattern written into outputs before each launch: NaN with a
 * payload that no arithmetic produces (f16 0x7E5A, bf16 0x7FDA, f32
 * 0x7FC05A5A), and INT32_MIN for i32 outputs (no correct int32 sum is it). */
uint32_t ref_poison_code(qv_fmt ofmt);

#ifdef __cplusplus
}
#endif
#endif
