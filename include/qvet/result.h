/* result.h: the one comparison result (STYLE.md rule 7) and its JSON form.
 * Included by the reference, the campaign, `qvet verify` and reports. Rule: a
 * numerical mismatch is a result, never an error; a vacuous comparison (zero
 * reference norm, too few normal values) is said in the reason, and a zero
 * norm FAILs under ref_verify_opts.require_nonvacuous. */
#ifndef QVET_RESULT_H
#define QVET_RESULT_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qv_grade { QV_PASS = 0, QV_MARGINAL, QV_FAIL } qv_grade;
const char *qv_grade_name(qv_grade g); /* "PASS", "MARGINAL", "FAIL" */

typedef struct qv_result {
    qv_grade grade;
    char reason[192];          /* why FAIL/MARGINAL, e.g. "out of bound at (3, 17): ..." */
    const char *ref_path;      /* a ref_truth path, "model" (ref_verify_bitexact) or "routed" */
    const char *ref_why;       /* why that path is certified for this case */
    int64_t n_elements;
    int64_t n_fail;            /* elements outside the rounded bound interval */
    int64_t n_nan, n_inf;      /* NaN / Inf in the output that the model does not have */
    int64_t n_unwritten;       /* elements still holding the poison pattern */
    double max_err_over_bound; /* max |out - y| / E */
    double p99_err_over_bound;
    double max_abs_err;
    double max_ulp, p99_ulp;   /* distance in output ulps to the correctly rounded y */
    double nmse;               /* sum (out-y)^2 / sum y^2 (llama.cpp's definition) */
    double norm_rel;           /* ||out - y||_2 / ||y||_2 */
    double bias_z;             /* signed-bias z-score of (out - y)/E */
    int64_t worst_m, worst_n;  /* element with the largest |err|/E */
    double worst_out, worst_y, worst_bound;
} qv_result;

/* The field's usual acceptance criteria, computed on the same output for the
 * mutation report (src/criteria.c): would each of those tests have passed it?
 * C_ref is the exact value rounded to the output format (an fp16 reference of
 * the dequantized weights, as those tests build it). */
typedef struct qv_criteria {
    double mean_rel;    /* mean|C - C_ref| / mean|C_ref| */
    double cosine;      /* sum C*C_ref / (||C|| ||C_ref||) */
    double nmse;        /* sum (C - C_ref)^2 / sum C_ref^2 */
    int marlin_pass;    /* Marlin's test: mean_rel < 1e-3 */
    int vllm_pass;      /* vLLM's kernel tests: mean_rel < 0.04 */
    int cosine_pass;    /* a quanto-style check: cosine >= 0.99 */
    int nmse_pass;      /* llama.cpp test-backend-ops: nmse < 5e-4 */
} qv_criteria;

/* c, ref: (count) decoded output and reference values. NaN anywhere makes the
 * affected measures NaN, which no criterion passes. */
void qv_usual_criteria(const double *c, const double *ref, int64_t count, qv_criteria *out);

/* Writes the result's fields as JSON members (no braces), for embedding in a
 * JSONL line: "verdict":"PASS","max_err_over_bound":0.1,... */
void qv_result_json_fields(FILE *f, const qv_result *r);

#ifdef __cplusplus
}
#endif
#endif
