/* tuning.h: the tuned defaults of qvet's kernel paths, one table row per
 * device architecture (src/gpu_tuning.c), and the context a launch or a
 * workspace query plans with: the caller's options, the device's row and its
 * SM count. Included by the kernels' host code and src/gpu_tuning.c. Rule: a
 * number a path's choice depends on that was measured on a device lives in
 * the table, never in a kernel file; the SM count is the device's
 * (cudaDeviceGetAttribute), or the caller's qv_launch_opts.sms. */
#ifndef QVET_TUNING_H
#define QVET_TUNING_H

#include <stdint.h>

#include "qvet/gemm.h"
#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One architecture's defaults (docs/launch-options.md gives each one's
 * reason). Each field is the default of the qv_launch_opts field of the same
 * name unless its comment says otherwise. */
typedef struct qv_tuning {
    int arch;                      /* compute capability major * 10 + minor this row serves from */
    const char *measured_on;       /* the device the numbers were measured on */
    /* weight-only rows */
    int wo_wg_min_m;               /* on layers of fewer than wo_wg_large_weights weights */
    int wo_wg_large_min_m;         /* on layers of at least wo_wg_large_weights weights */
    int64_t wo_wg_large_weights;
    int wo_wg_narrow_stages;       /* the default tile's narrow form below this many k64 stages per block */
    int wo_small_cluster;
    int wo_small_pre_4bit;         /* wo_small_pre for 4-bit codes */
    int wo_small_pre_8bit;         /* wo_small_pre for 8-bit codes */
    int wo_small_cluster_idle[3];  /* block slots the GPCs leave idle in clusters of 4, 8 and 16
                                      (of 2 blocks per SM): the small-M plan's waves */
    int wo_dq_min_m;
    double wo_dq_chunk_mib;        /* 0: one chunk */
    /* activation-quantized rows */
    int aq_wg_min_m;
    int aq_wg_narrow_stages;       /* as wo_wg_narrow_stages, in k128 stages */
    int aq_wg_pdl_max_m;           /* the wgmma kernel is a programmatic dependent up to this M */
    int aq_lt_min_m;
    double aq_lt_chunk_mib;        /* widened to one wave of output tiles per chunk */
    int aq_lt_fp8_min_m_tensor;    /* aq_lt_fp8_min_m per scaling: per tensor, */
    int aq_lt_fp8_min_m_tok_ch;    /* per token x channel, */
    int aq_lt_fp8_min_m_block;     /* 128 x 128 blocks */
    int aq_lt_fp8_blk_min_m;       /* on layers with N or K above aq_lt_fp8_blk_small_nk */
    int aq_lt_fp8_blk_min_m_small; /* on layers with N and K at most aq_lt_fp8_blk_small_nk */
    int aq_lt_fp8_blk_small_nk;
    int aq_lt_fp8_outer_min_m;
    int aq_pdl_max_m;
    int aq_cluster_max;
    int act_quant_cluster_max_m;
    /* routed layers */
    int moe_wg_min_rows;
    int moe_wg_block128_rows;      /* moe_wg_block 128 from this mean of rows per expert on, else 64 */
    int moe_wg_block256_rows;      /* moe_wg_block 256 from this mean on */
    int moe_wg_block256_rows_mxfp4; /* the same for MXFP4 experts */
    int moe_wg_pairs_rows;         /* 128-slot blocks paired into 256-slot tiles from this mean of
                                      rows per expert on (qv_moe_dev.pairs), QV_OPT_OFF never */
    int moe_wg_fit_rows;           /* 64-slot blocks fitted into tiles of up to 256 slots from this
                                      mean of rows per expert on (qv_moe_dev.fit), ahead of pairs,
                                      QV_OPT_OFF never */
    int moe_wg_fit_rows_end;       /* ... up to below this mean */
    int sm_smem_kib;               /* shared memory of one SM: blocks per SM of the mma kernel's tiles */
} qv_tuning;

/* What one launch or query plans with. */
typedef struct qv_launch_ctx {
    const qv_launch_opts *o; /* the caller's options, or an all-unset one: never NULL */
    const qv_tuning *t;      /* the row of arch */
    int sms;                 /* o->sms, or the device's SM count */
    int arch;                /* o->arch, or the device's compute capability */
} qv_launch_ctx;

/* Checks o (qv_launch_opts_check) and fills ctx: the current device's SM
 * count and architecture where o leaves them unset (one CUDA query per device
 * and process, kept), and the table row of the architecture: the last row
 * whose arch is at most it, else the first. QV_ERR_USAGE for a bad o;
 * QV_ERR_NODEVICE without a device when o does not set both sms and arch. */
qv_status qv_launch_ctx_get(const qv_launch_opts *o, qv_launch_ctx *ctx);

/* The table itself, for the documentation's tests (tests/t_launch_opts.c). */
const qv_tuning *qv_tuning_rows(int *count);

#ifdef __cplusplus
}
#endif
#endif
