/* moe.h: a routed (mixture-of-experts) GEMM as declared arithmetic
 * (docs/design.md §11, docs/moe.md). Included by the reference, `qvet verify`, the MoE checks
 * and any C program that verifies a grouped GEMM qvet did not write.
 *
 * T tokens x (T, K) meet E router experts. Each token's router logits (E) give
 * its top-k experts and their weights by the declared route; every expert has
 * its own quantized (K, N) weights with the expert spec's arithmetic (any
 * spec.h value). The output of token t is
 *     y[t] = sum over its k choices j with a local expert  w_j * P_e(j)(x[t])
 *          + sum over the S shared experts                    P_s(x[t]),
 * where P_e is expert e's GEMM before the output rounding (its own epilogue
 * included) and w_j the routed weight (routed scaling factor included);
 * with rw=in the weight is in the input instead, P_e(RN_a(RN_a(w_j) x[t])). A
 * choice whose expert is not local (expert_map -1) contributes nothing: the
 * rank holding it adds it. Rule: the reference computes the routing exactly
 * from the logits (MPFR), accepts any selection the kernel's fp32 scores
 * could make (near ties) and no other, and bounds the output per token and
 * element from the declared combine. */
#ifndef QVET_MOE_H
#define QVET_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/result.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The route: scoring function and the order of its steps (key route=). */
typedef enum qv_route {
    QV_ROUTE_SOFTMAX_TOPK = 0,    /* softmax over all E, the k largest scores */
    QV_ROUTE_SOFTMAX_TOPK_RENORM, /* the same, the k weights divided by their sum */
    QV_ROUTE_TOPK_SOFTMAX,        /* the k largest logits, softmax over those k */
    QV_ROUTE_SIGMOID_TOPK,        /* sigmoid of each logit, the k largest */
    QV_ROUTE_SIGMOID_TOPK_RENORM  /* the same, divided by their sum */
} qv_route;

/* Equal logits at the top-k boundary (key tie=). */
typedef enum qv_tie {
    QV_TIE_ANY = 0,  /* any of the tied experts may be taken */
    QV_TIE_LOW       /* the lower expert index is taken first */
} qv_tie;

/* Where the routed weight multiplies an expert's product (key rw=). */
typedef enum qv_rw {
    QV_RW_ACC = 0,   /* in fp32, on the value before the output rounding */
    QV_RW_OUT,       /* after the product is rounded to the output format: the
                        weight rounded to that format, the product rounded again */
    QV_RW_IN         /* on the expert's input: the token's activations times the
                        weight rounded to the activation format (f16 or bf16),
                        each product rounded to it, before the expert's GEMM,
                        whose product then enters the sum with weight 1 (Llama 4,
                        apply_router_weight_on_input) */
} qv_rw;

/* How a token's expert terms are summed (key sum=). */
typedef enum qv_moe_sum {
    QV_MSUM_F32 = 0, /* in fp32, any order, one output rounding at the end */
    QV_MSUM_OUT      /* each term rounded to the output format, added in it, any order */
} qv_moe_sum;

/* How a group of experts is scored for the group selection (key gscore=). */
typedef enum qv_gscore {
    QV_GSCORE_TOP2 = 0, /* the sum of its two largest selection scores (DeepSeek-V3) */
    QV_GSCORE_MAX       /* its largest selection score (DeepSeek-V2) */
} qv_gscore;

/* What the experts of the groups not kept score in the final top-k (key gmask=). */
typedef enum qv_gmask {
    QV_GMASK_NINF = 0, /* -Inf: never taken */
    QV_GMASK_ZERO      /* 0.0: taken over a kept expert whose selection score is below 0 */
} qv_gmask;

/* Longest canonical routed spec, terminator included. */
#define QV_MOE_SPEC_MAX 384

typedef struct qv_moe_spec {
    const qv_variant *expert;  /* every expert's arithmetic (a spec or a registry row) */
    qv_route route;
    int topk;                  /* k >= 1 */
    float rsf;                 /* routed scaling factor, its f32 value (1: none); multiplies
                                  each routed weight in fp32, never the shared experts */
    qv_tie tie;
    qv_rw rw;
    qv_moe_sum sum;
    int exp_ulps;              /* the kernel's exp is within this many ulps (fp32) */
    qv_fmt logit_fmt;          /* F32, BF16 or F16 router logits */
    /* Group-limited selection (key groups=, 0: none): the E experts form
     * `groups` groups of E/groups consecutive ones; each group is scored
     * (gscore) from its experts' selection scores in fp32, the `gtopk` best
     * groups are kept, and the top-k is taken over their experts, the others
     * scoring as gmask says. */
    int groups;
    int gtopk;
    qv_gscore gscore;
    qv_gmask gmask;
    /* A per-expert fp32 correction bias (key sbias=f32; sigmoid routes): the
     * selection score is RN_f32(score + bias), and the weights still come
     * from the unbiased scores (DeepSeek-V3's auxiliary-loss-free balancing). */
    int sbias;
    float eps;                 /* renormalization: the weights' sum plus this f32 value,
                                  added in fp32, divides them (key eps=; 0: none) */
    /* A sigmoid gate on each shared expert (key sgate=sigmoid; Qwen2-MoE,
     * Qwen3-Next): token t's shared product is weighed by
     * RN_a(sigma(RN_a(x[t] . g_s))), the dot product of its activations with
     * the expert's gate vector g_s (K values in the activation format) summed
     * as the expert's accumulator declares, sigma in fp32, each result
     * rounded to the activation format; the weight applies where rw= says
     * (acc or out). 0: none. */
    int sgate;
    char text[QV_MOE_SPEC_MAX]; /* the canonical spec */
} qv_moe_spec;

/* 1 when the text is a routed spec (it has a route= key). */
int qv_moe_is_spec(const char *text);

/* Parses "EXPERT,route=...,topk=K[,rsf=X][,tie=..][,rw=..][,sum=..][,exp=N][,logits=FMT]
 * [,groups=G,gtopk=N[,gscore=..][,gmask=..]][,sbias=f32][,eps=X][,sgate=sigmoid]":
 * the routing keys are taken out and the rest is the expert's spec or a
 * registry row's name (spec.h). QV_ERR_USAGE names the key and the reason.
 * The expert's output must be f16, bf16 or f32. */
qv_status qv_moe_spec_parse(const char *text, qv_moe_spec *out);

/* The routing keys at their defaults are omitted; the expert part is its
 * canonical spec. Returns the length or -1 (a message in buf). */
int qv_moe_spec_format(const qv_moe_spec *s, char *buf, size_t len);

typedef struct qv_moe_problem {
    const qv_moe_spec *s;
    int64_t t, n, k;           /* tokens, output columns, reduction depth */
    int e;                     /* router experts: the logits' columns */
    int e_local;               /* experts with weights here */
    int shared;                /* shared experts, after the local ones in w */
    void *logits;              /* (t, e) codes in s->logit_fmt (uint16_t bits or float) */
    int32_t *expert_map;       /* (e): local index in [0, e_local) or -1 */
    float *score_bias;         /* (e) the selection bias when s->sbias, else NULL */
    /* Activations (t, k) as problem.h holds them for m = t. */
    void *a;
    float *a_scale;
    int32_t *azp;
    /* (e_local + shared) experts' weights: each a problem of m = 1 whose weight
     * buffers (q, scales, scales2, zeros, zeros_f, bias, g_idx) are expert i's;
     * its activation buffers are unused. */
    qv_problem *w;
    /* (shared, k) the shared experts' gate vectors, codes in the activation
     * format, when s->sgate and shared > 0; else NULL */
    void *shared_gate;
} qv_moe_problem;

/* Allocates a zeroed problem: expert_map the identity when e_local == e, else
 * every expert -1 (the caller fills it). Checks the shape (topk <= e, the
 * expert spec's rules for (t, n, k), groups dividing e with at least topk
 * experts in the kept groups, two experts a group for gscore=top2). */
qv_status qv_moe_problem_create(qv_moe_problem *p, const qv_moe_spec *s, int64_t t, int64_t n, int64_t k, int e,
                                int e_local, int shared);
void qv_moe_problem_destroy(qv_moe_problem *p);
/* Checks what the buffers hold: expert_map entries in range, each local
 * expert mapped at most once, logits not NaN, the selection bias finite. */
qv_status qv_moe_problem_check(const qv_moe_problem *p);

/* The (t, n, k) problem of expert `i` (0 <= i < e_local + shared) over the
 * tokens rows[0..m): activations gathered from p (with their scales and zero
 * points), weights shared with p->w[i] (not copied). Release with
 * qv_moe_subproblem_destroy, which frees only what it gathered. */
qv_status qv_moe_subproblem(const qv_moe_problem *p, int i, const int64_t *rows, int64_t m, qv_problem *out);
void qv_moe_subproblem_destroy(qv_problem *sub);

/* Token t of p alone: a one-token routed problem with t's logits,
 * activations, activation scales and zero point, and copies of p's experts,
 * expert map, selection bias and shared gates (a failing token's reproducer). */
qv_status qv_moe_problem_token(const qv_moe_problem *p, int64_t t, qv_moe_problem *out);

/* The token sort of a grouped GEMM: each (token, choice) pair whose expert is
 * local, and every token once per shared expert, grouped by local expert
 * (shared experts last), each expert's segment padded to a multiple of
 * `block` with -1. slot[i] is t * (topk + shared) + c, c < topk a routed
 * choice and c = topk + s shared expert s, or -1 (padding: never written);
 * block_expert[b] is the expert of slots [b*block, (b+1)*block). Experts
 * without tokens have no block. */
typedef struct qv_moe_sorted {
    int64_t n_slots;           /* a multiple of block */
    int32_t *slot;             /* (n_slots) */
    int32_t *block_expert;     /* (n_slots / block) local expert, shared ones as e_local + s */
    int64_t *expert_start;     /* (e_local + shared + 1) first slot of each expert's segment */
    int block;
} qv_moe_sorted;

/* ids (t, topk): the router experts each token takes. Refuses ids out of
 * [0, e) and a token taking one expert twice. */
qv_status qv_moe_sort(const qv_moe_problem *p, const int32_t *ids, int block, qv_moe_sorted *out);
void qv_moe_sorted_destroy(qv_moe_sorted *s);

/* The exact routing of a token and what the kernel's fp32 scores may do. */
typedef struct qv_moe_truth {
    ref_truth out;             /* (t, n): y, bound, y_rn of the routed output */
    int32_t *ids;              /* (t, topk) the selection the truth used per token */
    double *weight;            /* (t, topk) its exact weights (rsf included), as doubles */
    double weight_rel;         /* certified relative bound on the kernel's fp32 weights */
    double weight_abs;         /* and the absolute one (underflowing exponentials) */
    int64_t n_ambiguous;       /* tokens with more than one admissible selection */
} qv_moe_truth;

/* The verdict of a routed output. */
typedef struct qv_moe_result {
    qv_result out;             /* the (t, n) output against the truth */
    int64_t n_route_bad;       /* tokens whose given ids are not an admissible top-k */
    int64_t n_weight_bad;      /* given weights outside their certified bound */
    int64_t first_bad_token;   /* -1 if none */
    int64_t n_ambiguous;       /* tokens whose selection the output chose among several */
    char route_reason[192];    /* the first routing failure, in words */
} qv_moe_result;

/* Computes the truth. ids (t, topk), or NULL: the kernel's selection where it
 * reported one (each token's must be admissible, else the exact ranking's is
 * used and the token is counted by ref_moe_verify); with NULL, a token whose
 * selection is ambiguous gets the exact ranking's. */
qv_status ref_moe_truth(const qv_moe_problem *p, const int32_t *ids, qv_moe_truth *t);
void ref_moe_truth_clear(qv_moe_truth *t);

/* Grades a kernel's output (t, n) codes in the expert's output format. ids
 * and weights (t, topk) are the kernel's routing when it reports it (either
 * may be NULL). Without ids, a token with near-tied scores passes if its
 * output matches any admissible selection. */
qv_status ref_moe_verify(const qv_moe_problem *p, const void *out, const int32_t *ids, const float *weights,
                         qv_moe_result *res);
/* The same on `jobs` threads (each expert's truth and the verdict; the
 * result is the same bits for every value). */
qv_status ref_moe_verify_jobs(const qv_moe_problem *p, const void *out, const int32_t *ids, const float *weights,
                              int jobs, qv_moe_result *res);

/* The CPU model of the declared arithmetic: routing in fp32 (libm expf, ties
 * to the lower index), the token sort padded to `block`, each expert's CPU
 * model on its segment, the declared combine. Writes out (t, n) codes, and
 * ids/weights (t, topk) when not NULL. */
qv_status ref_moe_model_run(const qv_moe_problem *p, int block, void *out, int32_t *ids, float *weights);

/* Router logits of a generated case (ref_moe_fill). */
typedef enum qv_moe_logits {
    QV_LOGITS_RANDOM = 0,   /* uniform in [-4, 4] */
    QV_LOGITS_TIES,         /* whole numbers 0..3: exact ties at most top-k boundaries */
    QV_LOGITS_NEAR_TIES,    /* random, with the k-th and (k+1)-th one fp32 ulp apart (f32
                               logits; one code apart in bf16/f16) */
    QV_LOGITS_ONE_EXPERT,   /* one expert far above the rest for every token */
    QV_LOGITS_EMPTY,        /* the upper half of the experts far below: never chosen */
    QV_LOGITS_WIDE,         /* uniform in [-120, 120]: exponentials underflow fp32 */
    QV_LOGITS_MASKED,       /* random, a quarter of each token's logits -Inf (never more than
                               e - k) */
    QV_LOGITS_NONLOCAL,     /* every token's top-k among the experts mapped -1 (needs at least
                               k of them) */
    QV_LOGITS_LOW_SCORES,   /* logits in [-30, -20] (scores near 1e-9 and below); with a
                               selection bias, every bias in [-2, -1]: every selection score
                               is negative, where gmask=zero and gmask=ninf part */
    QV_LOGITS_COUNT
} qv_moe_logits;

const char   *qv_moe_logits_name(qv_moe_logits c);    /* "random", "ties", ... */
qv_moe_logits qv_moe_logits_from_name(const char *n); /* QV_LOGITS_COUNT if unknown */

/* Fills a created problem: the expert map (e_local < e: a seeded choice of
 * which router experts are local), the logits per `logits`, the activations
 * and every expert's weights per the GEMM probe `kind` and `regime`
 * (probe.h; only probes whose structure does not tie the activations to one
 * weight matrix: exact, onehot, random, witness-splitk where it applies at
 * this K, and fp4-scale-ends for e8m0 block scales, whose ends fall on the
 * same group rows in every expert). Pure
 * function of its arguments. */
qv_status ref_moe_fill(qv_moe_problem *p, qv_moe_logits logits, qv_probe_kind kind, qv_regime regime,
                       uint64_t seed);

/* The routed rows: a routed spec per model family, with its router's expert
 * count and shared experts (src/moe.c). `qvet list`, `qvet check` and `qvet
 * fuzz` run them like GEMM rows; rows without a grouped GPU kernel run on the
 * CPU model only. */
typedef struct qv_moe_row {
    const char *name;      /* "moe-mixtral-w4a16-g128-f16" */
    const char *summary;   /* one line for `qvet list` */
    const char *spec;      /* the routed spec */
    int experts;           /* router experts E */
    int shared;            /* shared experts */
    int64_t n, k;          /* the model's fused gate/up expert GEMM (for benchmarks) */
    int gpu_kernel;        /* 1: a grouped GEMM kernel runs it */
} qv_moe_row;

int qv_moe_row_count(void);
const qv_moe_row *qv_moe_row_get(int i);
const qv_moe_row *qv_moe_row_find(const char *name);
/* The row's parsed spec (interned for the life of the process). */
qv_status qv_moe_row_spec(const qv_moe_row *r, const qv_moe_spec **out);

/* Names for messages and JSON, as the keys spell them: "softmax-topk", ...;
 * "acc", "out", "in"; "f32", "out". */
const char *qv_route_name(qv_route r);
const char *qv_rw_name(qv_rw r);
const char *qv_moe_sum_name(qv_moe_sum s);

#ifdef __cplusplus
}
#endif
#endif
