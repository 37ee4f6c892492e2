/* gpu_moe.h: the routed (mixture-of-experts) GEMM on the GPU (docs/moe.md):
 * routing, the token sort, one grouped GEMM launch over (M block, N tile) for
 * every expert, and the weighted combine. Included by kernels/moe_grouped.cu,
 * the GPU runner of routed problems (src/gpu_moe.c), the campaign, the GPU
 * suite and bench. Rule: everything after the upload runs on the device in
 * one stream with no host round trip, and its result is a function of the
 * problem alone (no atomics decide an order), so two launches agree bit for
 * bit. */
#ifndef QVET_GPU_MOE_H
#define QVET_GPU_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/gemm.h"
#include "qvet/moe.h"
#include "qvet/plugin.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most choices per token the routing kernel keeps in registers. */
#define QV_MOE_GPU_MAX_TOPK 32
/* The most expert groups it takes: lane g of the warp holds group g's score. */
#define QV_MOE_GPU_MAX_GROUPS 32

/* What the grouped launch reads and writes, every pointer on the device.
 * nx = e_local + shared experts hold weights; per = topk + shared pairs per
 * token; a pair (t, c) is routed choice c < topk or shared expert c - topk. */
/* The experts' GEMM (qv_moe_dev.kind). */
enum {
    QV_MOE_W4A16 = 0,   /* Marlin-packed int4 "q+8" weights, f16/bf16 activations, mma.sync */
    QV_MOE_FP8_B128,    /* e4m3 (n, k) weights with f32 128x128 block scales, e4m3 activations
                           with f32 scales per token and 128 K; promoted to fp32 every 128 K */
    QV_MOE_MXFP4,       /* e2m1 codes in the Marlin W4 words with an e8m0 byte per 32 along K
                           (layout.h, MARLIN_FP4_MX), f16/bf16 activations, mma.sync */
    QV_MOE_NVFP4        /* the same with a ue4m3-derived byte per 16 (MARLIN_FP4_NV) and each
                           expert's f32 global scale in the epilogue */
};

typedef struct qv_moe_dev {
    int kind;                   /* QV_MOE_W4A16, QV_MOE_FP8_B128, QV_MOE_MXFP4 or QV_MOE_NVFP4 */
    int t, n, k, e, e_local, shared, topk;
    int route;                  /* qv_route */
    float rsf;                  /* routed scaling factor (1: none) */
    int groups, gtopk;          /* group-limited selection (0: none; at most QV_MOE_GPU_MAX_GROUPS) */
    int gscore, gmask;          /* qv_gscore, qv_gmask */
    float eps;                  /* added to the renormalizing sum (0: none) */
    int logit_fmt;              /* qv_fmt: F32, BF16 or F16 */
    int bf16;                   /* W4A16, FP4: 1 bf16 activations (and W4A16 scales), 0 f16 */
    int out_bf16;               /* 1: bf16 output, 0: f16 (W4A16, FP4: as the activations) */
    int act_order;              /* 1: each expert's rows sorted by its g_idx (perm) */
    int scale_mode;             /* 0: scales in the dequant (per group, or one group of K for
                                   channel scales); 1: exact dequant, fp32 channel scale in the
                                   epilogue; 2: the same with one f32 tensor scale */
    int g_shift;                /* log2(g / 16) for group scales (FP4: 1 MX, 0 NV); 30 for one
                                   group of K (W4A16 only) */
    int grp_single;             /* 1: the dequant scales are one row in the channel permutation */
    int mb;                     /* m16 tiles per block: the sort pads segments to 16 * mb rows
                                   (1, 2 or 4 on the mma.sync kernel; 4, 8 or 16 on the wgmma one) */
    int wg;                     /* 1: the grouped GEMM on a wgmma kernel (kernels/moe_wg.cu,
                                   kinds W4A16, MXFP4, NVFP4 where qv_moe_wg_covers; kernels/
                                   moe_fp8_wg.cu, fp8 block-128 with 64-row blocks where
                                   qv_moe_fp8_wg_covers), 0: mma.sync */
    int pairs;                  /* 1 (wgmma W4A16 / FP4 kernel, mb 8): an expert's 128-row
                                   blocks two by two in 256-slot tiles, an odd last one alone
                                   (kernels/moe_wg.cu); 0: a tile per block */
    int fit;                    /* 1 (wgmma W4A16 / FP4 kernel, mb 4, pairs 0): an expert's 64-row
                                   blocks four by four in 256-slot tiles, its last one, two or
                                   three in one tile of 64, 128 or 192 slots (kernels/moe_wg.cu) */
    int ksplit;                 /* the mma.sync kernel's K parts at most (1..QV_MOE_KSPLIT_MAX; 0
                                   and 1: none), where qv_moe_ksplit_covers: each part's fp32 sums
                                   to its own copy of the products, added in part order by the
                                   combine (qv_moe_parts: how many the launch makes) */
    int staged;                 /* 1: the combine's staged form (kernels/moe_grouped.cu), where it
                                   applies (up to 16 tokens, at most 96 pair and K-part terms a
                                   token); 0: the plain form. qv_moe_pick: 1 where the plain form's
                                   grid (a block per token and 1024 columns) fills at most half the
                                   SMs */
    const void *logits;         /* (t, e) in logit_fmt (float or uint16_t codes) */
    const int32_t *expert_map;  /* (e) local index or -1 */
    const float *score_bias;    /* (e) the selection bias (sbias=f32), or NULL */
    const void *a;              /* (t, k) activations: f16/bf16, or e4m3 codes */
    const float *a_scale;       /* FP8_B128: (ceil(k/128), t) f32, MN-major; else NULL */
    const void *b;              /* W4A16, FP4: (nx, k/16, 2n) Marlin-packed int32 words; FP8_B128:
                                   (nx, n, k) e4m3 codes; expert-major */
    const void *scales;         /* W4A16: (nx, k/g, n) f16/bf16 packed, (nx, 1, n), or (nx) f32
                                   for mode 2; FP4: (nx, k/g, n) scale bytes in the
                                   GROUP64_FP8 order (layout.h); FP8_B128: (nx, ceil(k/128),
                                   ceil(n/128)) f32 */
    const float *gscale;        /* NVFP4: (nx) each expert's packed f32 global scale
                                   (qv_packed.scales2), else NULL */
    const void *bias;           /* FP4: (nx, n) each expert's bias codes in scale_perm_single
                                   order (qv_packed.bias), or NULL: no bias */
    int bias_fmt;               /* qv_fmt of the bias codes: F16, BF16 or F32 */
    const int32_t *perm;        /* (nx, k) each expert's sorted-row order (act_order), else NULL */
    int rw;                     /* qv_rw: where a routed weight multiplies (ACC: the fp32 product;
                                   OUT: the product rounded to the output format, the weight
                                   rounded too, the result rounded; IN: the slot's activations,
                                   the weight rounded to their format, each product rounded,
                                   in the slot gather, so the product enters with weight 1) */
    int sum;                    /* qv_moe_sum: F32, or OUT (each term rounded to the output
                                   format and added in it) */
    int sgate;                  /* 1: each shared expert's product weighed by its gate,
                                   RN_a(sigmoid(RN_a(x . g))) (qv_moe_spec.sgate), as rw says */
    const void *shared_gate;    /* sgate: (shared, k) each shared expert's gate vector in the
                                   activation format (f16/bf16), else NULL */
    void *out;                  /* (t, n) output codes */
    void *workspace;            /* qv_moe_workspace bytes, any content */
} qv_moe_dev;

/* Where the workspace of a launch keeps each buffer (byte offsets), with the
 * largest padded slot count: (t * per) / block + nx blocks of `block` rows. */
typedef struct qv_moe_ws {
    int block, max_blocks;
    int64_t max_slots;
    size_t ids, weights, counts, expert_start, block_expert, slot, hist, a_slots, inter, pair_slot, tiles, gate, bytes;
} qv_moe_ws;

/* The plan of d's shape and path (d->wg, d->ksplit; mb and the pointers
 * are not read). hist holds the token sort's expert counts per 256-pair
 * chunk (nx, ceil(t * per / 256)); a_slots every slot's activations (max_slots, k) for
 * act_order, rw=in and the W4A16 / FP4 wgmma kernel, else nothing; gate the
 * shared experts' gates (t, shared) f32 with a shared_gate; inter one copy
 * of the products per K part, a row per pair, or with the W4A16 / FP4 wgmma
 * kernel a row per slot (max(pairs, max_slots) rows) and pair_slot each
 * pair's slot (t * per). */
void qv_moe_ws_plan(const qv_moe_dev *d, int mb, qv_moe_ws *w);
/* The grouped GEMM's path, block and K parts for d's shape under o (NULL:
 * the defaults): d->wg, d->mb and d->ksplit. The wgmma kernel where it covers d and the
 * mean rows per expert that receives any reach o->moe_wg_min_rows (unset:
 * the tuning's), with 64-, 128- or 256-row blocks by that mean (the
 * tuning's moe_wg_block128_rows and moe_wg_block256_rows, or
 * moe_wg_block256_rows_mxfp4 for MXFP4 experts; o's
 * moe_wg_block, when set, decides) or 128-row blocks paired (d->pairs: from
 * the tuning's moe_wg_pairs_rows with no block forced, or as
 * o->moe_wg_pairs says) or 64-row blocks fitted into tiles of up to 256
 * (d->fit: as o->moe_wg_fit says, or unset from the tuning's
 * moe_wg_fit_rows to below moe_wg_fit_rows_end, ahead of pairs, with no
 * block or pairs forced), else
 * the mma.sync kernel with 16-, 32-
 * or 64-row blocks by the same mean, and K parts where it takes them:
 * o->moe_ksplit, or unset, when the blocks that can hold rows are fewer than
 * the SMs, enough parts to fill the places the SMs hold at once (at most
 * QV_MOE_KSPLIT_MAX, each of 16 k16 tiles or more). QV_ERR_USAGE for options that
 * qv_launch_opts_check refuses; the device's SM count and architecture
 * asked once (qv_launch_ctx_get) unless o sets both. */
qv_status qv_moe_pick(qv_moe_dev *d, const qv_launch_opts *o);

/* The wgmma grouped GEMM's schedule order (for the suites): the tile, in
 * the dense order (token tiles fastest: token tile = result % tiles_m,
 * column tile = result / tiles_m), that schedule index `tile` computes,
 * for tiles_m token tiles of `block` slots and n_tiles column tiles. */
int qv_moe_wg_tile_of(int tile, int tiles_m, int n_tiles, int block);

/* Whether the wgmma kernel takes d's kind and scales (no CUDA call). */
int qv_moe_wg_covers(const qv_moe_dev *d);
/* The wgmma kernel's whole-expert tile lists (d->pairs or d->fit;
 * kernels/moe_wg.cu): the sort's blocks a full tile holds (2 paired, 4
 * fitted), and the ints the lists take in the workspace for max_blocks
 * blocks and nx experts (list 0 holds max_blocks / per full tiles, the per
 * - 1 others a tile an expert at most, each list its count first). */
int qv_moe_tile_blocks(const qv_moe_dev *d);
size_t qv_moe_tile_lists_ints(int per, int max_blocks, int nx);
/* Whether the mma.sync kernel can split d's K into parts: W4A16 and MXFP4
 * experts with every scale in the dequant (no fp32 epilogue factor), not on
 * the wgmma kernel. */
int qv_moe_ksplit_covers(const qv_moe_dev *d);
/* The K parts a launch of d makes (1 without a split) and the k16 tiles of
 * each but the last (*kt_part, a whole number of the kernel's stages). */
int qv_moe_parts(const qv_moe_dev *d, int *kt_part);
/* The grouped GEMM on the wgmma kernel (kernels/moe_wg.cu): one persistent
 * launch over the slots' activations in w's a_slots that writes every
 * pair's fp32 product to w's inter. Called by qv_moe_launch after the sort
 * and the slot gather, on its stream. */
qv_status qv_moe_wg_gemm(const qv_moe_dev *d, const qv_moe_ws *w, void *stream);

/* Whether the fp8 wgmma kernel takes d (no CUDA call): fp8 block-128 experts,
 * n a multiple of 64. */
int qv_moe_fp8_wg_covers(const qv_moe_dev *d);
/* The grouped fp8 block-128 GEMM on wgmma (kernels/moe_fp8_wg.cu): a block
 * per 64 weight columns and 64-slot block, the slots' activations read
 * through the slots, every pair's fp32 product to w's inter. Called by
 * qv_moe_launch after the sort, on its stream. */
qv_status qv_moe_fp8_wg_gemm(const qv_moe_dev *d, const qv_moe_ws *w, void *stream);
/* Launches of the fp8 wgmma kernel in this process (for the suites). */
long long qv_moe_fp8_wg_runs(void);

/* Routing, sort, grouped GEMM, combine on `stream` (a cudaStream_t, NULL the
 * default). Refuses (without a CUDA call) what the kernels do not implement. */
qv_status qv_moe_launch(const qv_moe_dev *d, void *stream);

/* ---- the runner (src/gpu_moe.c) ---- */

/* Whether qvet's grouped kernels run spec s: QV_OK, or QV_ERR_UNSUPPORTED
 * with the reason (no CUDA call). */
qv_status qv_gpu_moe_supported(const qv_moe_spec *s);

/* A routed problem on the device, for repeated launches (bench). */
typedef struct qv_gpu_moe {
    qv_moe_dev d;
    size_t out_bytes;        /* t * n codes; QV_GPU_GUARD_BYTES of guard follow them */
    qv_moe_ws ws;
    void *allocs[12];
    int n_allocs;
} qv_gpu_moe;

/* Packs each expert (Marlin W4 or FP4 layout, or plain (n, k) e4m3), stacks
 * them expert-major (FP4: their global scales and biases too) and uploads
 * them with the activations, logits and expert map; the grouped GEMM's path
 * and block are qv_moe_pick's under opts (NULL: the defaults). */
qv_status qv_gpu_moe_upload(const qv_moe_problem *p, const qv_launch_opts *opts, qv_gpu_moe *g);
void      qv_gpu_moe_free(qv_gpu_moe *g);

typedef struct qv_gpu_moe_stats {
    int launches;
    int nondeterministic;    /* two launches differed in a bit of the output, ids or weights */
    int64_t first_diff;      /* first differing output element, -1 if none */
    int64_t guard_writes;    /* bytes changed past the output */
    double ms;               /* the last launch, for information */
    int block;               /* rows per block of the sort */
    int wg;                  /* 1: the grouped GEMM ran on the wgmma kernel */
    int pairs;               /* 1: with the sort's blocks paired into 256-slot tiles */
    int fit;                 /* 1: with the sort's 64-slot blocks fitted into tiles of up to 256 */
    int parts;               /* its K parts (mma.sync; 1: none) */
    int count_bad;           /* first expert whose pair count in the workspace is not the
                                used slots of its sorted segment, -1 if none (with `sorted`) */
} qv_gpu_moe_stats;

/* Runs p on the GPU `repeat` (>= 1) times, each with a poisoned output,
 * and downloads the output (t, n) codes, the routing ids and weights (t,
 * topk; either may be NULL) and, when `sorted` is not NULL, the device's
 * token sort (released with qv_moe_sorted_destroy). */
qv_status qv_gpu_moe_run(const qv_moe_problem *p, const qv_launch_opts *opts, int repeat, void *out, int32_t *ids,
                         float *weights, qv_moe_sorted *sorted, qv_gpu_moe_stats *st);

/* Runs a plugin's routed launch that takes device pointers on p `repeat`
 * (>= 1) times: p's buffers and its experts' go up once (the problem and
 * expert structs stay on the host, their buffer pointers lead to the device),
 * the output and its guard are poisoned, the ids set to -1 and the weights to
 * a NaN before each launch; each launch is followed by a device
 * synchronization and an error check, and the output (t, n), ids and weights
 * (t, topk) come back. *rc is the launch's return (non-zero: refused, nothing
 * downloaded); st counts launches, guard bytes written and whether two
 * launches differed. */
qv_status qv_gpu_moe_run_ext(const qv_moe_problem *p,
                             int (*launch)(const char *variant, const qv_moe_launch_args *args), const char *variant,
                             int repeat,
                             void *out, int32_t *ids, float *weights, int *rc, qv_gpu_moe_stats *st);

#ifdef __cplusplus
}
#endif
#endif
