/* gpu_tuning.c: the tuned defaults of the kernel paths, one row per device
 * architecture (tuning.h), the range check of qv_launch_opts (gemm.h) and
 * the planning context of a launch: the caller's options over the device's
 * row and SM count. Host C against the CUDA runtime API. */
#include "internal/tuning.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "internal/gpu.h"

/* Every number was measured on the H200 (docs/launch-options.md says where
 * each one comes from); sm_90 is the oldest architecture the kernels are
 * built for, so this row serves every device they run on until a newer
 * device gets measured and a row of its own. */
static const qv_tuning kRows[] = {
    {
        .arch = 90,
        .measured_on = "NVIDIA H200",
        .wo_wg_min_m = 17,
        .wo_wg_large_min_m = 9,
        .wo_wg_large_weights = (int64_t)1 << 27,
        .wo_wg_narrow_stages = 38,
        .wo_small_cluster = 8,
        .wo_small_pre_4bit = 1,
        .wo_small_pre_8bit = 2,
        /* cudaOccupancyMaxActiveClusters on the H200 (67-95 KiB blocks): 62
         * clusters of 4 (248 of 264 slots), 30 of 8 (240), 224 assumed of 16. */
        .wo_small_cluster_idle = {16, 24, 40},
        .wo_dq_min_m = 64,
        .wo_dq_chunk_mib = 0.0,
        .aq_wg_min_m = 17,
        .aq_wg_narrow_stages = 38,
        .aq_wg_pdl_max_m = 128,
        .aq_lt_min_m = 128,
        .aq_lt_chunk_mib = 48.0,
        .aq_lt_fp8_min_m_tensor = 1,
        .aq_lt_fp8_min_m_tok_ch = 1,
        .aq_lt_fp8_min_m_block = 4,
        .aq_lt_fp8_blk_min_m = 128,
        .aq_lt_fp8_blk_min_m_small = 256,
        .aq_lt_fp8_blk_small_nk = 8192,
        .aq_lt_fp8_outer_min_m = 128,
        .aq_pdl_max_m = 8,
        .aq_cluster_max = QV_AQ_CLUSTER_MAX,
        /* Fewer rows than the H200's 132 SMs leave SMs idle with a block
         * per row; 128 rows x 8 blocks = 1024 blocks. */
        .act_quant_cluster_max_m = 128,
        /* Routed layers (qvet bench --variant 'moe-*', every block forced
         * in turn): the wgmma grouped GEMM was the faster from 32 rows per
         * expert (Qwen3-MoE at 512 tokens: 1.7x the mma.sync kernel's
         * speed; at 16 rows the two within -3 %..+12 %), 128-slot blocks
         * from 64 rows (gpt-oss: +15 % over 64), 256-slot from 768 (at 512
         * rows 128 won on Mixtral by 9 % and lost on gpt-oss by 7 %; at
         * 1024 rows 256 won by 4-7 %), and for MXFP4 experts from 512
         * (gpt-oss at 4096 tokens, 512 rows, on an H100 after the
         * epilogue's slot reads moved ahead of its stores: 256 won by 11 %;
         * at 64 rows it lost by 38 %). An expert's 128-slot blocks paired
         * into 256-slot tiles (H100, two alternations) from 160 rows: at
         * 160, Mixtral and the channel row 8-10 % faster than 128-slot
         * tiles; at 4096 tokens 1-5 % faster than 256-slot ones; at 128
         * rows from 9 % faster (gpt-oss) to 14 % slower (channel). An
         * expert's 64-slot blocks fitted into tiles of up to 256 slots
         * from 128 rows to below 1536 (H100, the same binary with fit forced
         * off and on, the launches over the lists overlapping): at 128 rows
         * -0.7 % to +14.7 %, at 256 +1.8 % to +8.6 %, at 1024 (4096
         * tokens) -0.3 % to +2.6 %; not below (at 64 rows from 12 % slower
         * to 5 % faster, at 32 rows 3-10 % slower: the four launches and
         * the 64-slot tiles) nor at 2048 rows (-2.8 % to +0.1 %). */
        .moe_wg_min_rows = 32,
        .moe_wg_block128_rows = 64,
        .moe_wg_block256_rows = 768,
        .moe_wg_block256_rows_mxfp4 = 512,
        .moe_wg_pairs_rows = 160,
        .moe_wg_fit_rows = 128,
        .moe_wg_fit_rows_end = 1536,
        .sm_smem_kib = 228,
    },
};
#define N_ROWS ((int)(sizeof kRows / sizeof kRows[0]))

const qv_tuning *qv_tuning_rows(int *count)
{
    *count = N_ROWS;
    return kRows;
}

/* Field checks: each names the field and its accepted values. */
static qv_status bad_int(const char *field, int v, const char *accepted)
{
    return qv_fail(QV_ERR_USAGE, "qv_launch_opts.%s = %d: expected %s, or 0 for the tuned default", field, v,
                   accepted);
}

/* 0, QV_OPT_OFF (when off_ok) or lo..hi. */
static qv_status check_int(const char *field, int v, int lo, int hi, int off_ok, const char *accepted)
{
    if (v == 0 || (off_ok && v == QV_OPT_OFF) || (v >= lo && v <= hi)) return QV_OK;
    return bad_int(field, v, accepted);
}

static qv_status check_switch(const char *field, int v)
{
    return check_int(field, v, QV_OPT_ON, QV_OPT_ON, 1, "QV_OPT_ON (1) or QV_OPT_OFF (-1)");
}

static qv_status check_mib(const char *field, double v, int off_ok)
{
    if (v == 0.0 || (off_ok && v == (double)QV_OPT_OFF) || (isfinite(v) && v > 0.0 && v <= QV_CHUNK_MIB_MAX))
        return QV_OK;
    return qv_fail(QV_ERR_USAGE, "qv_launch_opts.%s = %g: expected MiB in (0, %g]%s, or 0 for the tuned default",
                   field, v, QV_CHUNK_MIB_MAX, off_ok ? ", QV_OPT_OFF (-1) for one chunk" : "");
}

#define M_RANGE "1 to 2147483647, or QV_OPT_OFF (-1) for never"

qv_status qv_launch_opts_check(const qv_launch_opts *o)
{
    if (!o) return QV_OK;
    QV_TRY(check_int("wo_wg_min_m", o->wo_wg_min_m, 1, QV_OPT_M_MAX, 1, M_RANGE));
    if ((int)o->wo_wg_tile < 0 || (int)o->wo_wg_tile >= QV_WG_TILE_COUNT)
        return bad_int("wo_wg_tile", (int)o->wo_wg_tile, "a qv_wg_tile");
    QV_TRY(check_int("wo_wg_blocks", o->wo_wg_blocks, 1, QV_WG_BLOCKS_MAX, 0, "1 to 264"));
    QV_TRY(check_switch("wo_wg_streamk", o->wo_wg_streamk));
    if ((int)o->wo_small < 0 || (int)o->wo_small >= QV_WO_SMALL_MODE_COUNT)
        return bad_int("wo_small", (int)o->wo_small, "a qv_wo_small_mode");
    const int c = o->wo_small_cluster;
    if (c != 0 && c != 1 && c != 2 && c != 4 && c != 8 && c != QV_WO_SMALL_CLUSTER_MAX)
        return bad_int("wo_small_cluster", c, "1, 2, 4, 8 or 16");
    QV_TRY(check_int("wo_small_splits", o->wo_small_splits, 1, QV_WO_SMALL_SPLITS_MAX, 0, "1 to 1048575"));
    QV_TRY(check_int("wo_small_pre", o->wo_small_pre, 1, QV_WO_SMALL_PRE_MAX, 1,
                     "1 to 4, or QV_OPT_OFF (-1) for none"));
    QV_TRY(check_int("wo_dq_min_m", o->wo_dq_min_m, 1, QV_OPT_M_MAX, 1, M_RANGE));
    QV_TRY(check_mib("wo_dq_chunk_mib", o->wo_dq_chunk_mib, 1));
    QV_TRY(check_switch("wo_dq_splitk", o->wo_dq_splitk));
    QV_TRY(check_switch("wo_dq_overlap", o->wo_dq_overlap));
    QV_TRY(check_int("aq_wg_min_m", o->aq_wg_min_m, 1, QV_OPT_M_MAX, 1, M_RANGE));
    if ((int)o->aq_wg_tile < 0 || (int)o->aq_wg_tile >= QV_WG_TILE_COUNT)
        return bad_int("aq_wg_tile", (int)o->aq_wg_tile, "a qv_wg_tile");
    QV_TRY(check_int("aq_wg_blocks", o->aq_wg_blocks, 1, QV_WG_BLOCKS_MAX, 0, "1 to 264"));
    QV_TRY(check_switch("aq_wg_streamk", o->aq_wg_streamk));
    QV_TRY(check_switch("aq_wg_pdl", o->aq_wg_pdl));
    QV_TRY(check_int("aq_lt_min_m", o->aq_lt_min_m, 1, QV_OPT_M_MAX, 1, M_RANGE));
    QV_TRY(check_mib("aq_lt_chunk_mib", o->aq_lt_chunk_mib, 0));
    QV_TRY(check_int("aq_lt_fp8_min_m", o->aq_lt_fp8_min_m, 1, QV_OPT_M_MAX, 1, M_RANGE));
    QV_TRY(check_int("aq_lt_fp8_blk_min_m", o->aq_lt_fp8_blk_min_m, 1, QV_OPT_M_MAX, 1, M_RANGE));
    QV_TRY(check_int("aq_lt_fp8_outer_min_m", o->aq_lt_fp8_outer_min_m, 1, QV_OPT_M_MAX, 1, M_RANGE));
    QV_TRY(check_int("aq_blocks_per_sm", o->aq_blocks_per_sm, 1, QV_AQ_BLOCKS_PER_SM_MAX, 0, "1 to 32"));
    QV_TRY(check_int("aq_splits", o->aq_splits, 1, QV_AQ_SPLITS_MAX, 0, "1 to 65535"));
    QV_TRY(check_int("aq_cluster_max", o->aq_cluster_max, 1, QV_AQ_CLUSTER_MAX, 0, "1 (none) to 16"));
    QV_TRY(check_int("aq_pdl_max_m", o->aq_pdl_max_m, 1, QV_OPT_M_MAX, 1, M_RANGE));
    QV_TRY(check_int("act_quant_cluster_max_m", o->act_quant_cluster_max_m, 1, QV_OPT_M_MAX, 1,
                     "1 to 2147483647, or QV_OPT_OFF (-1) for none"));
    QV_TRY(check_int("moe_wg_min_rows", o->moe_wg_min_rows, 1, QV_OPT_M_MAX, 1, M_RANGE));
    if (o->moe_wg_block != 0 && o->moe_wg_block != 64 && o->moe_wg_block != 128 && o->moe_wg_block != 256)
        return bad_int("moe_wg_block", o->moe_wg_block, "64, 128 or 256");
    QV_TRY(check_switch("moe_wg_pairs", o->moe_wg_pairs));
    QV_TRY(check_switch("moe_wg_fit", o->moe_wg_fit));
    QV_TRY(check_int("moe_ksplit", o->moe_ksplit, 1, QV_MOE_KSPLIT_MAX, 0, "1 (none) to 8"));
    QV_TRY(check_int("sms", o->sms, 1, QV_SMS_MAX, 0, "1 to 4096"));
    QV_TRY(check_int("arch", o->arch, 1, QV_ARCH_MAX, 0, "1 to 1000 (major * 10 + minor)"));
    if (o->trace & ~QV_TRACE_ALL) return qv_fail(QV_ERR_USAGE, "qv_launch_opts.trace = %#x: only QV_TRACE_* bits", o->trace);
    return QV_OK;
}

/* The device facts a context needs, per device ordinal, asked once: the SM
 * count in the low 16 bits, the architecture above them; 0 until asked.
 * Threads that race here store the same value. */
#define MAX_DEVICES 64
static _Atomic int g_device_facts[MAX_DEVICES];

static qv_status device_facts(int *sms, int *arch)
{
    int dev = 0;
    cudaError_t rc = cudaGetDevice(&dev);
    if (rc != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return qv_fail(QV_ERR_NODEVICE, "no CUDA device to plan the launch for (%s); set qv_launch_opts.sms and "
                       ".arch to plan without one", cudaGetErrorString(rc));
    }
    int packed = dev >= 0 && dev < MAX_DEVICES ? atomic_load_explicit(&g_device_facts[dev], memory_order_relaxed) : 0;
    if (!packed) {
        int count = 0, major = 0, minor = 0;
        QV_CUDA_TRY(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev),
                    "cudaDeviceGetAttribute (multiprocessor count)");
        QV_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev),
                    "cudaDeviceGetAttribute (compute capability major)");
        QV_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev),
                    "cudaDeviceGetAttribute (compute capability minor)");
        if (count < 1 || count > QV_SMS_MAX || major < 1 || 10 * major + minor > QV_ARCH_MAX)
            return qv_fail(QV_ERR_CUDA, "device %d reports %d SMs and compute capability %d.%d", dev, count, major,
                           minor);
        packed = (10 * major + minor) << 16 | count;
        if (dev >= 0 && dev < MAX_DEVICES)
            atomic_store_explicit(&g_device_facts[dev], packed, memory_order_relaxed);
    }
    *sms = packed & 0xFFFF;
    *arch = packed >> 16;
    return QV_OK;
}

qv_status qv_launch_ctx_get(const qv_launch_opts *o, qv_launch_ctx *ctx)
{
    static const qv_launch_opts unset;
    QV_TRY(qv_launch_opts_check(o));
    ctx->o = o ? o : &unset;
    ctx->sms = ctx->o->sms;
    ctx->arch = ctx->o->arch;
    if (!ctx->sms || !ctx->arch) {
        int sms = 0, arch = 0;
        QV_TRY(device_facts(&sms, &arch));
        if (!ctx->sms) ctx->sms = sms;
        if (!ctx->arch) ctx->arch = arch;
    }
    ctx->t = &kRows[0];
    for (int i = 0; i < N_ROWS; i++)
        if (kRows[i].arch <= ctx->arch) ctx->t = &kRows[i];
    return QV_OK;
}
