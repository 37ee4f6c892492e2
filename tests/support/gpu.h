/* gpu.h: what the GPU suites share: finding a device without a CUDA call,
 * running a Check suite in the parent process, device copies, two launches of
 * a problem and their verdict, and the published QQQ vectors on the device.
 * Included by every t_gpu_* suite and by t_routes and t_wonly_plan; linked
 * into every test binary from tests/support/. Rule: nothing here makes a CUDA call
 * unless the suite calls it after gpu_suite_start found a device, and every
 * failure is a Check assertion (or, for verdicts, a FAIL line on stderr and a
 * 0 the caller counts). */
#ifndef QVET_TEST_GPU_H
#define QVET_TEST_GPU_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "internal/gpu.h"
#include "qvet/array.h"
#include "qvet/gemm.h"
#include "qvet/probe.h"
#include "qvet/problem.h"
#include "qvet/variant.h"

/* ---- the suite ------------------------------------------------------------ */

/* The start of a GPU suite's main: QVET_SEED (when set and not empty) into
 * *seed, the QVET_* kernel-path variables into the suite's base launch
 * options (launch_env.h: a refused value prints the message and exits with
 * status 2), then whether a device is present: the driver's files first, so
 * that a machine without one never sees a CUDA call. Without one it prints
 * exactly "SKIP: no CUDA device". */
int gpu_suite_start(uint64_t *seed);

/* A case's launch options: the suite's base (the variables read by
 * gpu_suite_start; all unset in CI) with every field `over` sets on top
 * (NULL: the base alone). The suites loop over arrays of such overlays, one
 * per kernel path. */
qv_launch_opts gpu_opts(const qv_launch_opts *over);

/* A suite `name` of one test case "gpu" with the GPU suites' 600 s timeout
 * (a whole registry row runs inside one test); *tc receives the case. With a
 * device (gpu) it prints the line that replays the run: "t_<name>: seed S
 * (QVET_SEED=S replays), R rows". */
Suite *gpu_suite_create(const char *name, int gpu, uint64_t seed, int rows, TCase **tc);

/* Runs s in this process (CUDA after fork() is undefined, so Check must not
 * fork), frees it, and returns the exit status: 0 when every test passed. */
int gpu_suite_run(Suite *s);

/* Whether environment variable `name` is set, not empty and not "0". */
int gpu_env_flag(const char *name);

/* The indices of the registry rows that have a launch and that `keep`
 * accepts, in registry order, into rows (at most cap of them); returns the
 * count. */
int gpu_registry_rows(int (*keep)(const qv_variant *v), int *rows, int cap);

/* The edge set of M (docs/design.md §5), ascending. */
#define GPU_N_EDGE_M 19
extern const int gpu_edge_m[GPU_N_EDGE_M];

/* ---- problems, device buffers and runs ----------------------------------------- */

/* Launch arguments at (m, n, k) whose buffers (a, b, scales, a_scale, c) are
 * one non-NULL placeholder of 16 host bytes, never to be read: for the
 * refusals a launcher makes before it reads a buffer or makes a CUDA call. */
qv_gemm_args gpu_placeholder_args(int m, int n, int k);

/* Creates *p for row v at (m, n, k) and fills it with `probe` in `regime`
 * from `seed` (ref_probe_fill); writes the case's name ("<row> m=.. n=.. k=..
 * <probe>/<regime> seed=..") into label (cap bytes). A failure fails the test. */
void gpu_problem_probe(qv_problem *p, const qv_variant *v, int64_t m, int64_t n, int64_t k, qv_probe_kind probe,
                       qv_regime regime, uint64_t seed, char *label, size_t cap);

/* p packed into *pk and uploaded into *gp (qv_pack, qv_gpu_problem_upload)
 * for launches under opts (which must outlive gp); a failure fails the test,
 * naming label. Undone by gpu_problem_unload. */
void gpu_problem_load(const qv_problem *p, const qv_launch_opts *opts, qv_packed *pk, qv_gpu_problem *gp,
                      const char *label);
void gpu_problem_unload(qv_packed *pk, qv_gpu_problem *gp);

/* A device copy of `bytes` host bytes at h; free with cudaFree. */
void *gpu_dev_copy(const void *h, size_t bytes);

/* Runs p twice through qv_gpu_run under opts into out ((m, n) output codes
 * of p->v->ofmt, row-major) and asserts that both launches succeeded, gave
 * the same bits and wrote nothing past the output. label names the case in
 * messages, path (NULL for none) the kernel path. */
void gpu_run_twice(const qv_problem *p, const qv_launch_opts *opts, void *out, const char *label, const char *path);
/* The same through launch (NULL: the row's own). */
void gpu_run_twice_with(const qv_problem *p, qv_launch_fn launch, const qv_launch_opts *opts, void *out,
                        const char *label, const char *path);

/* A launch of the row's own function with the output 4 bytes past a 16-byte
 * boundary (what the launches accept, and too little for tensor-map
 * stores): the kernel writes into a scratch buffer there, poisoned first,
 * output and guard alike, and the output is copied back to args->c; a guard
 * code that lost its poison is an error (a write past the output). For
 * qv_gpu_run and gpu_run_twice_with. */
qv_status gpu_launch_c_off4(const qv_variant *v, const qv_gemm_args *args);

/* The verdict on out, p's (m, n) output: the CPU model bit for bit when the
 * probe's correct output is unique or the row accumulates in int32 (exact
 * products, one fp32 epilogue), and the certified truth (ref_verify: no FAIL)
 * when the probe is random. A failure prints a FAIL line on stderr; returns 1
 * when every verdict passed. */
int gpu_verdict(const qv_problem *p, qv_probe_kind probe, const void *out, const char *label, const char *path);

/* ---- the published QQQ vectors (golden/README.md) ------------------------------ */

/* One golden folder of QQQ W4A8: the packed weights and the Ms it holds. */
typedef struct gpu_qqq_golden {
    const char *name;     /* folder under golden_root() */
    int group;            /* per-group scales (a "g128" folder), else channelwise */
    const qv_variant *v;  /* qqq-w4a8-g128 or qqq-w4a8-ch */
    int n, k, g;          /* g: 0 for channelwise */
    qv_array b;           /* B_packed_int32 (k/16, 2n) int32, QQQ layout */
    qv_array s_ch;        /* s_channel_packed_f32 (n) f32 */
    qv_array s_g;         /* s_group_packed_f16 (k/g, n) f16 (group only) */
    int ms[16];           /* the M of every A_m<M>_int8.npy, ascending */
    int n_ms;
} gpu_qqq_golden;

/* Loads folder `name` (a failure fails the test) and lists its Ms. */
void gpu_qqq_golden_open(gpu_qqq_golden *gq, const char *name);
void gpu_qqq_golden_close(gpu_qqq_golden *gq);

/* One M of a golden folder, ready to launch. */
typedef struct gpu_qqq_case {
    int m;
    qv_array a;      /* A_m<M>_int8 (m, k) int8 */
    qv_array s_tok;  /* s_token_m<M>_f32 (m) f32 */
    qv_array d;      /* D_qqq_kernel_m<M>_f16 (m, n) f16: the real QQQ kernel's output */
    qv_launch_opts opts; /* the launch options of ga (ga.opts points here) */
    qv_gemm_args ga; /* device copies of A, s_token, B and the scales; c (m, n) f16;
                        the row's workspace for opts (none when it needs 0 bytes), zeroed */
} gpu_qqq_case;

/* Loads M = m of gq for launches under opts (NULL: the suite's base). */
void gpu_qqq_case_load(const gpu_qqq_golden *gq, int m, const qv_launch_opts *opts, gpu_qqq_case *c);
void gpu_qqq_case_free(gpu_qqq_case *c);

/* Poisons c's output, launches gq's row, waits and copies the (m, n) f16
 * output codes into out. */
void gpu_qqq_case_launch(const gpu_qqq_golden *gq, gpu_qqq_case *c, uint16_t *out);

/* Asserts that out ((m, n) f16 codes) equals the real QQQ kernel's D bit for
 * bit; the message names the first differing element. what: the path, for
 * the message ("" for none). */
void gpu_qqq_case_assert(const gpu_qqq_golden *gq, const gpu_qqq_case *c, const uint16_t *out, const char *what);

#endif
