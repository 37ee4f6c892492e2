/* gpu.h: running one GEMM problem on the GPU, the way qvet's rules demand.
 * Included by the campaign, the GPU Check suites, bench and eval. Rule: every
 * launch gets a freshly poisoned output, every CUDA call and launch is checked,
 * and a determinism check repeats the launch and compares every bit. */
#ifndef QVET_GPU_H
#define QVET_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/gemm.h"
#include "qvet/layout.h"
#include "qvet/problem.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device information, filled by qv_gpu_info (all zero / "" without a device). */
typedef struct qv_gpu_info {
    int present;
    char name[256]; /* cudaDeviceProp.name holds up to 256 bytes */
    int driver;     /* cudaDriverGetVersion, e.g. 13000 */
    int runtime;    /* cudaRuntimeGetVersion */
    int sm;         /* compute capability major*10 + minor */
} qv_gpu_info;

/* 1 when a CUDA device is usable. Never aborts; safe on machines without a GPU. */
int qv_gpu_info_get(qv_gpu_info *info);

/* What a run observed besides the output. */
typedef struct qv_gpu_stats {
    int launches;          /* launches performed */
    int nondeterministic;  /* 1 if two identical launches differed in any bit */
    int64_t first_diff;    /* first differing element (row-major index), -1 if none */
    int64_t guard_writes;  /* bytes changed in the guard zone past the output (an
                              out-of-bounds write, e.g. rows beyond M): must be 0 */
    double ms;             /* time of the last launch (events), for information only */
} qv_gpu_stats;

/* Packs p (qv_pack), uploads it, poisons the output with ref_poison_code,
 * launches `launch` (NULL: the row's own, qv_gpu_launcher) under launch
 * options opts (NULL: the defaults; the workspace is sized for them), downloads the
 * (m, n) output codes into `out` (p->v->ofmt, row-major). With `repeat` >= 2,
 * relaunches with a fresh poison each time and compares every bit with the
 * first output. */
qv_status qv_gpu_run(const qv_problem *p, qv_launch_fn launch, const qv_launch_opts *opts, int repeat, void *out,
                     qv_gpu_stats *st);

/* Device copies of a packed problem, for repeated launches (bench, eval); for
 * a spec (QV_LAYOUT_LOGICAL) pk is NULL and the logical arrays are uploaded
 * as plugin.h describes. The arguments carry the launch options given to the
 * upload (args.opts, not copied: they must outlive the problem), and the
 * workspace is sized for them. */
typedef struct qv_gpu_problem {
    qv_gemm_args args;     /* device pointers ready to launch */
    size_t out_bytes;      /* m * n output codes; QV_GPU_GUARD_BYTES of guard follow them */
    void *dev_allocs[12];  /* owned allocations */
    int n_allocs;
} qv_gpu_problem;

/* Bytes of poison kept after every output allocation to catch writes past it. */
#define QV_GPU_GUARD_BYTES 4096

qv_status qv_gpu_problem_upload(const qv_problem *p, const qv_packed *pk, const qv_launch_opts *opts,
                                qv_gpu_problem *gp);
void      qv_gpu_problem_free(qv_gpu_problem *gp);
/* Fills the device output with the poison code of ofmt. */
qv_status qv_gpu_poison(void *dev_out, qv_fmt ofmt, int64_t count, void *stream);
/* Poisons `count` output codes at dev_out and the QV_GPU_GUARD_BYTES of guard
 * after them (the allocation must hold both), as one run of codes. */
qv_status qv_gpu_poison_guarded(void *dev_out, qv_fmt ofmt, int64_t count);
/* Adds to *writes the bytes of the guard after `count` output codes at
 * dev_out that lost their poison: writes past the output. */
qv_status qv_gpu_guard_count(const void *dev_out, qv_fmt ofmt, int64_t count, int64_t *writes);

/* Checks a CUDA runtime result; on error records "what: cuda message" via
 * qv_fail and returns QV_ERR_CUDA. */
#define QV_CUDA_TRY(call, what)                                                \
    do {                                                                       \
        int qv_cuda_rc_ = (int)(call);                                         \
        if (qv_cuda_rc_ != 0) return qv_cuda_fail(qv_cuda_rc_, (what), __FILE__, __LINE__); \
    } while (0)
qv_status qv_cuda_fail(int rc, const char *what, const char *file, int line);

#ifdef __cplusplus
}
#endif
#endif
