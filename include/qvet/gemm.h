/* gemm.h: the GPU launch ABI shared by qvet's kernels, the plugin ABI and the
 * GPU runner, and the GPU library's launch table. Included by the kernels,
 * src/gpu_run.c, src/gpu_launch.c and plugins. Rule: every pointer is a device
 * pointer to the *packed* buffers of the variant's layout (layout.h), or for a
 * spec (QV_LAYOUT_LOGICAL) to its logical arrays as plugin.h lists them; the
 * launch checks the shape and returns a status, never aborts. */
#ifndef QVET_GEMM_H
#define QVET_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qv_gemm_args {
    int m, n, k, g;
    const void *a;           /* (m, k) activations, row-major, v->afmt codes */
    const float *a_scale;    /* per v->act_scale, or NULL */
    const int32_t *azp;      /* per v->azp, or NULL */
    const void *b;           /* packed weights (layout.h: qv_packed.b) */
    const void *scales;      /* packed scales (qv_packed.scales) */
    const void *scales2;     /* packed second-level scales (qv_packed.scales2) or NULL */
    const void *zeros;       /* packed zero points (qv_packed.zeros) or NULL */
    const int32_t *perm;     /* act_order: (k) A column permutation (qv_packed.perm) or NULL */
    void *c;                 /* (m, n) output, row-major, v->ofmt codes */
    void *workspace;         /* qv_gpu_workspace(v, m, n, k) bytes, zeroed by the caller once */
    size_t workspace_bytes;
    void *stream;            /* cudaStream_t, or NULL for the default stream */
    /* Appended in plugin ABI version 2 (a version-1 plugin never reads them). */
    const float *bias;       /* (n) per-column bias, values decoded (v->bias_fmt), or NULL */
    const int32_t *g_idx;    /* act_order: (k) group of each row of b: for a spec, of logical
                                row k (problem.h); for a registry row, of each sorted row
                                (qv_packed.g_idx); else NULL */
} qv_gemm_args;

/* Launches the variant's kernel on device buffers; returns a status, never
 * aborts on a bad shape. */
typedef qv_status (*qv_launch_fn)(const qv_variant *v, const qv_gemm_args *args);
/* Bytes of device workspace the launch needs for this shape (0 if none). */
typedef size_t (*qv_workspace_fn)(const qv_variant *v, int m, int n, int k);

/* The launch table of the GPU library (src/gpu_launch.c): one entry per
 * family of registry rows. Registry rows are data (variant.h); a row with
 * gpu_kernel = 1 reaches its kernel through the entry of its family. */
typedef struct qv_launcher {
    const char *family;         /* qv_variant.family: "cublas", "marlin", "qqq", "w8a8" */
    qv_launch_fn launch;
    qv_workspace_fn workspace;  /* NULL: the family needs no workspace */
} qv_launcher;

/* The entry for v, or NULL when v has no kernel (gpu_kernel = 0: specs). */
const qv_launcher *qv_gpu_launcher(const qv_variant *v);
/* Launches v's kernel through the table; QV_ERR_UNSUPPORTED naming v when it
 * has none. */
qv_status qv_gpu_launch(const qv_variant *v, const qv_gemm_args *args);
/* Workspace bytes v's kernel needs at (m, n, k); 0 without a kernel or a
 * workspace. */
size_t qv_gpu_workspace(const qv_variant *v, int m, int n, int k);

/* Kernel launchers, one per family (kernels/). Each reads the row's fields.
 * Weight-only launches at M <= 16 (kernels/wonly_small.cu) are programmatic
 * dependents: they may start while the kernels in front of them on the stream
 * still run, and read their packed weights, scales and zero points before
 * those have finished (A, C and the workspace only after). So b, scales and
 * zeros must not be written by any kernel launched on the stream since its
 * last operation of another kind (a copy, a memset, an event record or wait):
 * weights made on the GPU need one of those between their kernel and the
 * GEMM. qvet's own kernels never write them. */
qv_status qv_launch_cublas(const qv_variant *v, const qv_gemm_args *a);
qv_status qv_launch_wonly(const qv_variant *v, const qv_gemm_args *a);   /* W4A16, W8A16, FP8A16 */
size_t    qv_workspace_wonly(const qv_variant *v, int m, int n, int k);
qv_status qv_launch_qqq(const qv_variant *v, const qv_gemm_args *a);     /* W4A8 */
size_t    qv_workspace_qqq(const qv_variant *v, int m, int n, int k);
qv_status qv_launch_w8a8(const qv_variant *v, const qv_gemm_args *a);    /* W8A8 int8 and fp8 */
size_t    qv_workspace_w8a8(const qv_variant *v, int m, int n, int k);

/* Per-token activation quantization kernels (kernels/act_quant.cu):
 * x (m, k) fp16/bf16 -> q (m, k) int8 with s[m] = absmax/127 (RNE), or e4m3
 * with s[m] = absmax/448. */
qv_status qv_act_quant(qv_fmt xfmt, qv_fmt qfmt, int m, int k, const void *x, void *q,
                       float *s, void *stream);

/* The same per token and QV_ACT_GROUP-wide K group (w8a8-fp8-block128's
 * activations): each group of QV_ACT_GROUP values of a row gets its own
 * scale, written MN-major, s (k / QV_ACT_GROUP, m) with s[b m + i] the scale of
 * token i's group b (variant.h, QV_ASCALE_TOKEN_BLOCK). k must be a multiple
 * of QV_ACT_GROUP. */
#define QV_ACT_GROUP 128
qv_status qv_act_quant_groups(qv_fmt xfmt, qv_fmt qfmt, int m, int k, const void *x, void *q,
                              float *s, void *stream);

/* 1 when a CUDA device is usable; fills name/driver/runtime strings when not NULL. */
int qv_cuda_available(char *name, size_t name_len, int *driver, int *runtime);

#ifdef __cplusplus
}
#endif
#endif
