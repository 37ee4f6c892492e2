/* campaign.h: the verification campaign (fuzz/, qvet check, fuzz, replay): case
 * generator, backends (CPU models, GPU kernels, plugins), shrinker, JSONL lines.
 * It lives in the CLI layer (libqvet_cli.a) over both libraries, so the GPU
 * backend calls the GPU runner (gpu.h) directly, with no hook to register.
 * Rule: a case is a pure function of (seed, index) (or (seed, variant, suite
 * index)); case J never depends on case J-1, so each replays bit for bit. */
#ifndef QVET_CAMPAIGN_H
#define QVET_CAMPAIGN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qvet/array.h"
#include "qvet/gemm.h"
#include "qvet/moe.h"
#include "qvet/plugin.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/reference.h"
#include "qvet/result.h"
#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version written into every "run" provenance line. */
#define QV_VERSION "0.1.0"

/* ---- Randomness: counter-based, so case J never depends on case J-1. ---- */

/* One splitmix64 step: advances *state and returns the next 64-bit output. */
uint64_t qv_splitmix64(uint64_t *state);
/* The RNG state of case `index` of a campaign with `seed`. */
uint64_t qv_case_stream(uint64_t seed, int64_t index);
/* Uniform double in [0, 1) with 53 random bits. */
double qv_rng_unit(uint64_t *state);
/* Uniform integer in [0, n) (n >= 1), without modulo bias. */
uint64_t qv_rng_below(uint64_t *state, uint64_t n);

/* ---- What a case is. ---- */

typedef enum qv_shape_class {
    QV_SHAPE_EDGE = 0, /* M from docs/design.md §5's edge set, N and K on tile edges */
    QV_SHAPE_RANDOM,   /* log-uniform M, N, K */
    QV_SHAPE_REAL,     /* a real layer of Llama-2-7B, Llama-3-8B/70B or Qwen2-7B */
    QV_SHAPE_COUNT
} qv_shape_class;
const char *qv_shape_class_name(qv_shape_class c); /* "edge", "random", "real" */

/* One case, fully determined by the generator's inputs. */
typedef struct qv_case {
    uint64_t seed;
    int64_t index;            /* fuzz: the case index J; check: the suite index */
    int suite;                /* 1: a case of the fixed `qvet check` suite */
    const qv_variant *v;
    int64_t m, n, k;          /* the shape that runs */
    int64_t m0, n0, k0;       /* the shape drawn before the CPU size cap */
    int capped;               /* 1 when the CPU cap reduced the drawn shape */
    qv_shape_class shape_class;
    qv_probe_kind probe;      /* probe.h: exact, one-hot, random or a precision witness */
    qv_regime regime;         /* the scale regime (random probes; loguniform otherwise) */
    uint64_t data_seed;       /* the seed ref_probe_fill draws every value from (g_idx included) */
    char layer[48];           /* QV_SHAPE_REAL: "llama2-7b.down", else "" */
} qv_case;

/* ---- Backends. ---- */

typedef enum qv_backend_kind {
    QV_BACKEND_CPU = 0,   /* the CPU models, ref_model_run */
    QV_BACKEND_GPU,       /* qvet's kernels, qv_gpu_run */
    QV_BACKEND_HOST_FN,   /* a launch function taking host pointers (host plugins, tests) */
    QV_BACKEND_DEVICE_FN  /* a launch function taking device pointers (device plugins) */
} qv_backend_kind;

/* The plugin launch signatures (plugin.h): 0 = ok. */
typedef int (*qv_ext_launch_fn)(const char *variant, const qv_gemm_args *args);
typedef int (*qv_ext_moe_launch_fn)(const char *variant, const qv_moe_launch_args *args);

typedef struct qv_backend {
    qv_backend_kind kind;
    char name[96];              /* "cpu", "gpu", "plugin:NAME" (JSONL "backend") */
    qv_ext_launch_fn launch;    /* HOST_FN / DEVICE_FN */
    qv_ext_moe_launch_fn moe_launch; /* HOST_FN: the routed rows' launch; NULL without one */
    const char *const *only;    /* HOST_FN / DEVICE_FN: the variants it implements, each a
                                   registry row name or a spec (spec.h); the launch receives
                                   the string that matched */
    int n_only;
    int repeat;                 /* launches per case for the determinism check (>= 1) */
    int64_t cap_mnk;            /* the largest m*n*k drawn for this backend; 0: no cap */
    char plugin_path[512];      /* for replay commands; "" if none */
    void *launch_lock;          /* a pthread_mutex_t * held around every launch when cases run on
                                   several threads (the GPU and plugins: one launch at a time,
                                   the verification in parallel); NULL: none */
    const qv_launch_opts *opts; /* GPU and plugins: every launch's options (qv_gemm_args.opts;
                                   a plugin may ignore them); NULL: the defaults */
} qv_backend;

/* The default m*n*k caps of CPU-model cases. The exact reference costs about
 * 0.3 us per multiply-add on one core, so fuzz cases stay below 2^19 (about
 * 50 ms each with the model, so 10^4 cases take minutes), and the fixed suite,
 * which has far fewer cases, keeps its shapes up to 2^22. */
#define QV_CPU_CAP_MNK ((int64_t)1 << 19)
#define QV_CPU_CAP_CHECK ((int64_t)1 << 22)
/* GPU cases are verified by the same CPU reference, whose fast certified path
 * handles 16 x 4096 x 4096 (2^28) in about a second (docs/design.md §9). */
#define QV_GPU_CAP_MNK ((int64_t)1 << 28)

/* The default cap of a backend kind, for fuzz cases (suite = 0) or the fixed
 * suite (suite = 1). */
int64_t qv_backend_default_cap(qv_backend_kind kind, int suite);

/* Fills a backend. kind CPU/GPU need no launch; names are set here. */
void qv_backend_init(qv_backend *b, qv_backend_kind kind);
/* 1 when b can run variant v (CPU: a CPU model; GPU: a launcher; FN: listed,
 * by row name or by a spec that parses to v). */
int qv_backend_has(const qv_backend *b, const qv_variant *v);
/* The string a HOST_FN / DEVICE_FN launch receives for v: the entry of
 * b->only that names it (as the plugin wrote it), else v->name. */
const char *qv_backend_launch_name(const qv_backend *b, const qv_variant *v);

/* ---- The generator. ---- */

#define QV_GEN_MAX_VARIANTS 256
/* The most specs one campaign names (--spec, given several times): every one
 * goes into each case's replay command. */
#define QV_GEN_MAX_SPECS 16
/* Room for a replay command: the options plus QV_GEN_MAX_SPECS quoted specs. */
#define QV_REPLAY_MAX 8192

typedef struct qv_gen {
    const qv_variant *variants[QV_GEN_MAX_VARIANTS]; /* candidates, in a fixed order */
    int n_variants;
    int64_t cap_mnk; /* copied from the backend */
    int listed;      /* 1: the candidates are an explicit list (qv_gen_init_list), which
                        a replay command names one by one with --spec */
} qv_gen;

/* The candidates: registry rows matching glob (NULL/"" = all) that b can run,
 * in registry order, then (for a plugin backend) the specs the plugin
 * declares that match glob, in its order. Refuses (QV_ERR_USAGE) a glob that
 * leaves no variant. */
qv_status qv_gen_init(qv_gen *gen, const char *glob, const qv_backend *b);

/* The candidates: exactly vs[0..n) (registry rows or parsed specs; a repeated
 * variant counts once), in that order. Refuses (QV_ERR_USAGE) an empty list,
 * more than QV_GEN_MAX_SPECS, or a variant b cannot run, naming it. */
qv_status qv_gen_init_list(qv_gen *gen, const qv_variant *const *vs, int n, const qv_backend *b);

/* Fuzz case `index` of campaign `seed`: variant, shape (about 50 % edge, 30 %
 * random, 20 % real), probe, regime, g_idx choice and data seed. */
void qv_gen_case(const qv_gen *gen, uint64_t seed, int64_t index, qv_case *c);

/* The fixed suite of `qvet check` for one variant: the number of cases, and
 * case j (0 <= j < count). The suite is the same for every seed; the seed only
 * draws the data (mixed with the variant: its registry position, or for a
 * spec a hash of its canonical text). */
int  qv_suite_count(const qv_variant *v, int64_t cap_mnk);
void qv_suite_case(const qv_variant *v, int64_t cap_mnk, uint64_t seed, int j, qv_case *c);

/* Allocates p for c's variant and shape and fills every buffer with
 * ref_probe_fill from c's probe, regime and data seed. */
qv_status qv_case_build(const qv_case *c, qv_problem *p);

/* ---- Running and verifying one problem. ---- */

typedef struct qv_outcome {
    qv_result res;            /* the verdict; a backend error is a FAIL with the message as reason */
    qv_status st;             /* QV_OK, or the backend's or reference's refusal */
    int backend_error;        /* 1 when st came from the backend (kernel refused a legal case) */
    double time_ms;           /* wall time of run + verify */
    double alpha_g_max;       /* the largest alpha*G over the outputs (docs/design.md §3) */
    uint64_t out_hash;        /* FNV-1a 64 of the output bytes */
    void *out;                /* (m, n) output codes in v->ofmt, owned (qv_outcome_clear) */
    ref_truth truth;          /* the reference (y, E), owned */
    int has_truth;
    /* Histograms of the finite elements (results-format.md): the error beyond
     * half an output ulp over E (as ref_verify's max_err_over_bound) in 20 bins
     * over [0, 1) plus one for >= 1, and the distance in output ulps to the
     * correctly rounded y: 0, 1, 2, 3, 4-7, 8-15, >= 16. */
    int64_t hist_eb[21], hist_ulp[7];
    qv_criteria crit; /* the field's usual criteria against y rounded (has_truth) */
    int has_stats;    /* crit and the histograms hold the case's; set with has_truth, kept by release */
} qv_outcome;

/* Runs p on b (poisoned output, `repeat` launches compared bit for bit) and
 * grades it with ref_truth_compute + ref_verify. With `unique` (a probe whose
 * correct output is unique, ref_probe_is_unique) a kernel backend's output must
 * also equal the CPU model's bit for bit (ref_verify_bitexact). Returns QV_OK
 * with o filled even for a FAIL verdict; a non-OK return is an environment
 * error (no device). */
qv_status qv_case_run(const qv_backend *b, const qv_problem *p, int unique, qv_outcome *o);
void      qv_outcome_clear(qv_outcome *o);
/* Frees the output and the truth, keeping what a results line and the tallies
 * read (verdict, hash, histograms, criteria): a campaign holds finished cases
 * that way until their turn to be written. */
void      qv_outcome_release(qv_outcome *o);

/* FNV-1a 64-bit hash of bytes (output fingerprints in JSONL). */
uint64_t qv_fnv1a64(const void *data, size_t len);

/* ---- Shrinking a failure (fuzz/shrink.c). ---- */

typedef struct qv_shrunk {
    int64_t m, n, k;
    int steps;                /* accepted reductions */
    int tries;                /* runs performed */
    char dir[512];            /* folder with the .npy inputs, or "" */
} qv_shrunk;

/* Starting from a failing problem, tries smaller problems (halve dims, snap to
 * tiles, one group, zero halves of the data) and keeps each one that still
 * FAILs on b (graded as qv_case_run grades with `unique`), within `max_tries` runs. *small receives the smallest failing
 * problem (a new allocation). */
qv_status qv_shrink(const qv_backend *b, const qv_problem *p, int unique, int max_tries, qv_problem *small,
                    qv_shrunk *info);

/* Writes every input array p has (A, a_scale, azp, q, scales, scales2, zeros
 * or zeros_f as zeros.npy, bias, g_idx), its output on b and the reference y
 * and E as .npy into dir (created), in `qvet verify`'s conventions (scales2,
 * float zero points and bias encoded back into their declared formats), plus
 * `spec` (the variant's canonical spec and a newline) and replay.txt holding
 * `replay_cmd` and a `qvet verify` command over these files. */
qv_status qv_case_dump(const qv_backend *b, const qv_problem *p, int unique, const char *dir,
                       const char *replay_cmd);

/* mkdir -p: creates dir and its missing parents. */
qv_status qv_mkdirs(const char *dir);
/* The numpy dtype of a stored code of format f (problem.h storage; the
 * `qvet verify` conventions: bf16 as '<u2' bits, 8-bit and 4-bit codes one
 * byte each, signed integer codes as int8). */
qv_dtype qv_dump_dtype(qv_fmt f);

/* ---- JSONL. ---- */

/* Writes one "case" line (with a trailing newline). `replay` is the shell
 * command that reproduces it; `shrunk` may be NULL. */
void qv_case_json(FILE *f, const qv_case *c, const qv_backend *b, const qv_outcome *o,
                  const char *replay, const qv_shrunk *shrunk);

/* The replay command of a case into buf (qvet replay ...; QV_REPLAY_MAX bytes
 * hold any): the case's variant selection is glob, or when gen->listed every
 * candidate as --spec in gen's order (a suite case: its own variant only). */
void qv_case_replay_cmd(const qv_case *c, const qv_backend *b, const qv_gen *gen, const char *glob,
                        char *buf, size_t len);

/* ---- Routed cases (fuzz/moe_cases.c). ---- */

/* One routed case: a routed row (moe.h), its shape and data. */
typedef struct qv_moe_case {
    const qv_moe_row *row;
    uint64_t seed;
    int64_t index;            /* fuzz: the case index J; check: the suite index */
    int suite;
    int64_t t, n, k;          /* tokens, expert GEMM N and K */
    int e, e_local, shared;   /* router experts, local ones, shared ones */
    qv_moe_logits logits;     /* the routing case */
    qv_probe_kind probe;      /* exact, onehot, random or the split-K witness */
    uint64_t data_seed;
} qv_moe_case;

typedef struct qv_moe_outcome {
    qv_moe_result res;
    qv_status st;
    double time_ms;
    uint64_t out_hash;        /* FNV-1a 64 of the output bytes */
} qv_moe_outcome;

/* The fixed suite of a routed row: every logits case at one and 37 tokens,
 * then batches of 8 to 256 tokens (fewer where the row's experts per token
 * would pass 2^22 multiply-adds), N = 128, K = 256 (K = 512 for the
 * one-token cases of weight-only rows with group scales, whose decode GEMM
 * the GPU splits along K); a decode step on the split-K witness (K = 512 on
 * those rows); last, an expert-parallel shard (32 tokens, top-k local
 * experts, N = 64, K = 128). */
int  qv_moe_suite_count(const qv_moe_row *r);
void qv_moe_suite_case(const qv_moe_row *r, uint64_t seed, int j, qv_moe_case *c);
/* Generated case `index` of campaign `seed` among rows[0..n): the row from
 * one stream, everything else from another, so a replay naming the row alone
 * draws the same case. */
void qv_moe_gen_case(const qv_moe_row *const *rows, int n, uint64_t seed, int64_t index, qv_moe_case *c);
/* The routed rows whose name matches glob (NULL/"" = all) that b runs (the
 * CPU: every row; the GPU: the rows with gpu_kernel = 1), at most max. */
int qv_moe_rows_match(const char *glob, const qv_backend *b, const qv_moe_row **out, int max);
/* Runs the case on b (the CPU model: routing, token sort, experts, combine;
 * the GPU: the grouped kernels, b->repeat launches compared bit for bit) and
 * grades it with ref_moe_verify, ids and weights included. A backend's
 * refusal, a difference between launches or a write past the output is a
 * FAIL with its reason; QV_ERR_NODEVICE is returned as it is. */
qv_status qv_moe_case_run(const qv_backend *b, const qv_moe_case *c, qv_moe_outcome *o);
void qv_moe_case_replay_cmd(const qv_moe_case *c, const qv_backend *b, char *buf, size_t len);
/* Reruns case c on b and writes its inputs, output, ids and weights into dir
 * as the .npy files `qvet verify --spec ROUTED` reads, with its spec and a
 * replay.txt holding that command and `replay`. With shrink, a FAIL is tried
 * on its first failing token alone (the routing's first bad token, else the
 * worst element's); when that token fails alone, only it is written and
 * *token is its index, else *token is -1. */
qv_status qv_moe_case_dump(const qv_backend *b, const qv_moe_case *c, int shrink, const char *dir, const char *replay,
                           int64_t *token);
/* The case's JSONL line ("kind":"routed", docs/results-format.md). */
void qv_moe_case_json(FILE *f, const qv_moe_case *c, const qv_backend *b, const qv_moe_outcome *o);

#ifdef __cplusplus
}
#endif
#endif
