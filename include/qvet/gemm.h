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

/* ---- Launch options ----------------------------------------------------
 *
 * Which kernel path a launch of qvet's own kernels takes, and how that path
 * is shaped: one field per choice. Every field's zero means "unset": the
 * tuned default of the device (one table per device, src/gpu_tuning.c), so a
 * NULL pointer, `qv_launch_opts o = {0}` and designated initializers that set
 * a few fields all mean "the defaults but these". QV_OPT_OFF turns a
 * threshold off (no M reaches it) or sets to none a count whose zero is
 * meaningful; QV_OPT_ON / QV_OPT_OFF set a switch. The same options go to
 * the launch (qv_gemm_args.opts) and to the workspace query, which returns
 * the largest workspace of the paths they allow. A value outside its range
 * is a QV_ERR_USAGE status naming the field (qv_launch_opts_check), never a
 * silent default. docs/launch-options.md lists every field, its range, its
 * default and the `qvet` environment variable that sets it. */
#define QV_OPT_OFF (-1)
#define QV_OPT_ON 1

/* The ranges (inclusive) of the fields below. */
#define QV_OPT_M_MAX 2147483647      /* an M threshold: 1 to INT_MAX */
#define QV_WG_BLOCKS_MAX 264         /* a wgmma kernel's persistent blocks (its counters area) */
#define QV_WO_SMALL_CLUSTER_MAX 16   /* 1, 2, 4, 8 or 16 */
#define QV_WO_SMALL_SPLITS_MAX 1048575
#define QV_WO_SMALL_PRE_MAX 4        /* the small-M kernel's weight-ring stages */
#define QV_AQ_BLOCKS_PER_SM_MAX 32
#define QV_AQ_SPLITS_MAX 65535
#define QV_AQ_CLUSTER_MAX 16         /* the most K slices one cluster of the mma kernel sums */
#define QV_MOE_KSPLIT_MAX 8          /* the most K parts of the routed layer's mma.sync grouped GEMM */
#define QV_CHUNK_MIB_MAX 1048576.0   /* a chunk size in MiB */
#define QV_SMS_MAX 4096
#define QV_ARCH_MAX 1000             /* compute capability major * 10 + minor */

/* A wgmma kernel's block tile, columns x tokens (QV_WG_TILE_DEFAULT: by M and
 * the layer's size). */
typedef enum qv_wg_tile {
    QV_WG_TILE_DEFAULT = 0,
    QV_WG_TILE_128X256, QV_WG_TILE_256X128, QV_WG_TILE_128X128, QV_WG_TILE_512X64, QV_WG_TILE_128X64,
    QV_WG_TILE_512X32, QV_WG_TILE_128X32, QV_WG_TILE_512X16, QV_WG_TILE_128X16,
    QV_WG_TILE_COUNT /* one past the last tile */
} qv_wg_tile;

/* The weight-only small-M kernel (M <= 16): which M it takes and in which
 * orientation. */
typedef enum qv_wo_small_mode {
    QV_WO_SMALL_DEFAULT = 0, /* every M <= 16; M <= 8 swapped, one or two chunks per warp as the plan says */
    QV_WO_SMALL_NEVER,       /* the general kernel runs every M */
    QV_WO_SMALL_M16_8,       /* M <= 8, m16 mma orientation */
    QV_WO_SMALL_M16_16,      /* M <= 16, m16 mma orientation */
    QV_WO_SMALL_SWAP,        /* M <= 8, swapped mma, one 64-column chunk per warp */
    QV_WO_SMALL_SWAP2,       /* M <= 8, swapped mma, two chunks per warp */
    QV_WO_SMALL_MODE_COUNT
} qv_wo_small_mode;

/* qv_launch_opts.trace: plans and choices printed on stderr (measurements). */
#define QV_TRACE_WO_SMALL 1u          /* each small-M launch's plan and concurrent clusters */
#define QV_TRACE_WO_SMALL_TIMELINE 2u /* its time line (a -DQV_WO_SMALL_TIMELINE build only) */
#define QV_TRACE_AQ 4u                /* each W4A8 / W8A8 mma-kernel launch's plan */
#define QV_TRACE_LT 8u                /* each cuBLASLt algorithm the heuristic gives */
#define QV_TRACE_ALL 15u

typedef struct qv_launch_opts {
    /* Weight-only rows (family "marlin"). A launch asks the wgmma kernel,
     * then the small-M kernel, then dequantize + cuBLAS, else the mma kernel. */
    int wo_wg_min_m;           /* the wgmma kernel from this M on (1..QV_OPT_M_MAX), QV_OPT_OFF never */
    qv_wg_tile wo_wg_tile;     /* its block tile */
    int wo_wg_blocks;          /* its persistent grid planned on this many blocks (1..QV_WG_BLOCKS_MAX) */
    int wo_wg_streamk;         /* its stream-K tail: QV_OPT_ON / QV_OPT_OFF (whole tiles) */
    qv_wo_small_mode wo_small; /* which M the small-M kernel takes, and how */
    int wo_small_cluster;      /* its largest split-K cluster: 1 (none), 2, 4, 8 or 16 */
    int wo_small_splits;       /* its K slices forced (1..QV_WO_SMALL_SPLITS_MAX) */
    int wo_small_pre;          /* ring stages requested before the wait for the kernel in front
                                  (1..QV_WO_SMALL_PRE_MAX), QV_OPT_OFF none */
    int wo_dq_min_m;           /* dequantize + cuBLAS from this M on (1..QV_OPT_M_MAX), QV_OPT_OFF never */
    double wo_dq_chunk_mib;    /* its N chunks in MiB of fp16 (0 < x <= QV_CHUNK_MIB_MAX), QV_OPT_OFF one chunk */
    int wo_dq_splitk;          /* its K split inside a chunk: QV_OPT_ON / QV_OPT_OFF */
    int wo_dq_overlap;         /* the next chunk dequantized on a side stream: QV_OPT_ON / QV_OPT_OFF */

    /* Activation-quantized rows (families "qqq" and "w8a8"). */
    int aq_wg_min_m;           /* QQQ rows on the wgmma kernel from this M on, QV_OPT_OFF never
                                  (set, the one threshold: no wide-layer rule below it) */
    qv_wg_tile aq_wg_tile;     /* its block tile */
    int aq_wg_blocks;          /* its persistent grid's blocks (1..QV_WG_BLOCKS_MAX) */
    int aq_wg_streamk;         /* its stream-K tail: QV_OPT_ON / QV_OPT_OFF */
    int aq_wg_pdl;             /* a programmatic dependent: QV_OPT_ON always, QV_OPT_OFF never */
    int aq_lt_min_m;           /* int8 rows on cuBLASLt from this M on, QV_OPT_OFF never */
    double aq_lt_chunk_mib;    /* that path's N chunks in MiB (0 < x <= QV_CHUNK_MIB_MAX): exactly
                                  this budget, no one-wave floor */
    int aq_lt_fp8_min_m;       /* e4m3 rows on cuBLASLt from this M on (every scaling), QV_OPT_OFF never */
    int aq_lt_fp8_blk_min_m;   /* the block row's BLK128x128 form from this M on, QV_OPT_OFF never */
    int aq_lt_fp8_outer_min_m; /* per token x channel's outer-vector form from this M on,
                                  QV_OPT_OFF never (always the two-step form) */
    int aq_blocks_per_sm;      /* the mma kernel's split-K plan: blocks per SM (1..QV_AQ_BLOCKS_PER_SM_MAX) */
    int aq_splits;             /* its K slices forced (1..QV_AQ_SPLITS_MAX) */
    int aq_cluster_max;        /* its largest split-K cluster (1: none, up to QV_AQ_CLUSTER_MAX) */
    int aq_pdl_max_m;          /* it is a programmatic dependent up to this M, QV_OPT_OFF never */
    int act_quant_cluster_max_m; /* activation quantization spreads a long row over a cluster up to
                                  this M, QV_OPT_OFF only rows too long for one block
                                  (qv_act_quant) */

    /* Routed (mixture-of-experts) layers: the grouped GEMM of W4A16 and FP4
     * experts (src/internal/gpu_moe.h, qv_moe_pick). */
    int moe_wg_min_rows;       /* the wgmma kernel from this mean of rows per expert that receives
                                  any on (1..QV_OPT_M_MAX), QV_OPT_OFF never (the mma.sync kernel) */
    int moe_wg_block;          /* its slot block (the sort's padding): 64, 128 or 256 rows */
    int moe_wg_pairs;          /* QV_OPT_ON: 128-slot blocks, an expert's blocks two by two in
                                  256-slot tiles (its odd last one alone), unless moe_wg_block
                                  forces another; QV_OPT_OFF: a tile per block. Unset: on from
                                  160 rows per expert (the tuning), moe_wg_block unset */
    int moe_wg_fit;            /* QV_OPT_ON: 64-slot blocks, an expert's blocks four by four in
                                  256-slot tiles and its last one, two or three in one tile of 64,
                                  128 or 192 slots, unless moe_wg_block forces another or
                                  moe_wg_pairs is on; QV_OPT_OFF: never. Unset: on from 128 to
                                  below 768 rows per expert (the tuning), moe_wg_block and
                                  moe_wg_pairs unset */
    int moe_ksplit;            /* the mma.sync kernel's K parts (1..QV_MOE_KSPLIT_MAX, 1: none),
                                  where its experts take them (group scales in the dequant, no
                                  NVFP4 global scale); unset, enough parts to fill the SMs at
                                  decode batches */

    /* Every family. */
    int sms;                   /* the SM count the plans assume (1..QV_SMS_MAX); unset, the device's */
    int arch;                  /* the compute capability whose tuning applies (major * 10 + minor,
                                  1..QV_ARCH_MAX); unset, the device's. With sms and arch both set,
                                  planning (route, workspace, plan queries) makes no CUDA call */
    unsigned trace;            /* QV_TRACE_* bits */
    /* A new field gets its range in qv_launch_opts_check (src/gpu_tuning.c)
     * and its place in the CLI's overlay (src/launch_env.c). */
} qv_launch_opts;

/* QV_OK, or QV_ERR_USAGE naming the first field outside its range (NULL is
 * valid: every default). */
qv_status qv_launch_opts_check(const qv_launch_opts *o);

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
    void *workspace;         /* qv_gpu_workspace(v, m, n, k, opts) bytes, zeroed by the caller once */
    size_t workspace_bytes;
    void *stream;            /* cudaStream_t, or NULL for the default stream */
    /* Appended in plugin ABI version 2 (a version-1 plugin never reads them). */
    const float *bias;       /* a spec's (n) per-column bias, values decoded (v->bias_fmt), or NULL
                                (a registry row's packed bias travels in bias_packed) */
    const int32_t *g_idx;    /* act_order: (k) group of each row of b: for a spec, of logical
                                row k (problem.h); for a registry row, of each sorted row
                                (qv_packed.g_idx); else NULL */
    /* Appended after plugin ABI version 2 was published, at the end so that
     * version-2 plugins built against the shorter struct keep working: qvet
     * launches read it, a plugin may ignore it. */
    const qv_launch_opts *opts; /* the path choices (above); NULL: every default */
    /* Appended with the FP4 rows, at the end for the same reason. */
    const void *bias_packed;    /* a registry row whose layout packs its bias (the FP4 layouts):
                                   qv_packed.bias, (n) bias_fmt codes in scale_perm_single order,
                                   4-byte aligned; `bias` is then NULL; else NULL */
} qv_gemm_args;

/* Launches the variant's kernel on device buffers; returns a status, never
 * aborts on a bad shape. */
typedef qv_status (*qv_launch_fn)(const qv_variant *v, const qv_gemm_args *args);
/* Bytes of device workspace a launch with the same options needs for this
 * shape (0 if none): the largest over the paths opts allows (NULL: the
 * defaults), so one query covers whichever of them the launch takes; 0 as
 * well for options qv_launch_opts_check refuses (the launch reports them). */
typedef size_t (*qv_workspace_fn)(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts);

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
 * has none. Launches run on the calling thread's current device (the
 * caller's cudaSetDevice) and may come from several threads and devices at
 * once: each kernel's function attributes are set once per device, the
 * cuBLAS handles and dequantize + cuBLAS's side streams are per thread and
 * device (these per-device tables hold ordinals 0 to 63: a launch that
 * needs one on a higher ordinal is refused, QV_ERR_UNSUPPORTED); the
 * cuBLASLt paths keep the algorithms of the first device that used them, and
 * their launches on another device run the rows' mma kernel instead. */
qv_status qv_gpu_launch(const qv_variant *v, const qv_gemm_args *args);
/* Workspace bytes v's kernel needs at (m, n, k) under opts (qv_workspace_fn);
 * 0 without a kernel or a workspace. Asks the current device for its SM count
 * and compute capability unless opts sets both. */
size_t qv_gpu_workspace(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts);

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
size_t    qv_workspace_wonly(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts);
qv_status qv_launch_qqq(const qv_variant *v, const qv_gemm_args *a);     /* W4A8 */
size_t    qv_workspace_qqq(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts);
qv_status qv_launch_w8a8(const qv_variant *v, const qv_gemm_args *a);    /* W8A8 int8 and fp8 */
size_t    qv_workspace_w8a8(const qv_variant *v, int m, int n, int k, const qv_launch_opts *opts);

/* Per-token activation quantization kernels (kernels/act_quant.cu):
 * x (m, k) fp16/bf16 -> q (m, k) int8 with s[m] = absmax/127 (RNE), or e4m3
 * with s[m] = absmax/448. opts (NULL: the defaults): its
 * act_quant_cluster_max_m moves the M up to which long rows are spread over
 * a cluster (every path computes the same bits). */
qv_status qv_act_quant(qv_fmt xfmt, qv_fmt qfmt, int m, int k, const void *x, void *q,
                       float *s, void *stream, const qv_launch_opts *opts);

/* The same per token and QV_ACT_GROUP-wide K group (w8a8-fp8-block128's
 * activations): each group of QV_ACT_GROUP values of a row gets its own
 * scale, written MN-major, s (k / QV_ACT_GROUP, m) with s[b m + i] the scale of
 * token i's group b (variant.h, QV_ASCALE_TOKEN_BLOCK). k must be a multiple
 * of QV_ACT_GROUP. */
#define QV_ACT_GROUP 128
qv_status qv_act_quant_groups(qv_fmt xfmt, qv_fmt qfmt, int m, int k, const void *x, void *q,
                              float *s, void *stream, const qv_launch_opts *opts);

/* 1 when a CUDA device is usable; fills name/driver/runtime strings when not NULL. */
int qv_cuda_available(char *name, size_t name_len, int *driver, int *runtime);

#ifdef __cplusplus
}
#endif
#endif
