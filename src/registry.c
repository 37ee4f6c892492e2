/* registry.c: every variant qvet knows, as rows of data (variant.h).
 * Adding a variant means adding a row here, a kernel launcher's support for it
 * and any format pieces it needs; no code elsewhere names a variant. */
#include <fnmatch.h>
#include <stddef.h>
#include <string.h>

#include "qvet/gemm.h"
#include "qvet/variant.h"

static const qv_variant registry[] = {
    {.name = "cublas-f16",
     .summary = "cuBLAS f16 GEMM, the baseline",
     .family = "cublas",
     .wfmt = QV_FMT_F16, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_NONE,
     .scale_layout = QV_SCALE_NONE, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 8,
     .arith = {.dequant = QV_DQ_NONE, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_cublas, .workspace = NULL, .cpu_model = 1},
    {.name = "marlin-w4a16-ch-f16",
     .summary = "int4 (q+8) x f16, channelwise fp32 epilogue scale, Marlin layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_EXACT, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g32-f16",
     .summary = "int4 (q+8) x f16, group 32, f16 dequant multiply, Marlin layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_GROUP, .g = 32, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g64-f16",
     .summary = "int4 (q+8) x f16, group 64, f16 dequant multiply, Marlin layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_GROUP, .g = 64, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g128-f16",
     .summary = "int4 (q+8) x f16, group 128, f16 dequant multiply, Marlin layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g128-zp-f16",
     .summary = "uint4 with zero points (AWQ) x f16, group 128, Marlin zp layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 1, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4_ZP, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g128-act-f16",
     .summary = "int4 (q+8) x f16, group 128 with act_order (g_idx)",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 0, .act_order = 1,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w8a16-ch-f16",
     .summary = "int8 (q+128) x f16, channelwise fp32 epilogue scale",
     .family = "marlin",
     .wfmt = QV_FMT_U8, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_EXACT, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w8a16-g128-f16",
     .summary = "int8 (q+128) x f16, group 128, f16 dequant multiply",
     .family = "marlin",
     .wfmt = QV_FMT_U8, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-fp8a16-tensor-f16",
     .summary = "fp8 e4m3 x f16, per-tensor fp32 epilogue scale",
     .family = "marlin",
     .wfmt = QV_FMT_E4M3, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_TENSOR, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_FP8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_EXACT, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-fp8a16-ch-f16",
     .summary = "fp8 e4m3 x f16, channelwise fp32 epilogue scale (the seed bug's path)",
     .family = "marlin",
     .wfmt = QV_FMT_E4M3, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_FP8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_EXACT, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-fp8a16-g128-f16",
     .summary = "fp8 e4m3 x f16, group/block 128 along K, f16 dequant multiply",
     .family = "marlin",
     .wfmt = QV_FMT_E4M3, .afmt = QV_FMT_F16, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_FP8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "cublas-bf16",
     .summary = "cuBLAS bf16 GEMM, the baseline",
     .family = "cublas",
     .wfmt = QV_FMT_BF16, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_NONE,
     .scale_layout = QV_SCALE_NONE, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 8,
     .arith = {.dequant = QV_DQ_NONE, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_cublas, .workspace = NULL, .cpu_model = 1},
    {.name = "marlin-w4a16-ch-bf16",
     .summary = "int4 (q+8) x bf16, channelwise fp32 epilogue scale, Marlin layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_EXACT, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g32-bf16",
     .summary = "int4 (q+8) x bf16, group 32, bf16 dequant multiply, Marlin layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_GROUP, .g = 32, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g64-bf16",
     .summary = "int4 (q+8) x bf16, group 64, bf16 dequant multiply, Marlin layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_GROUP, .g = 64, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g128-bf16",
     .summary = "int4 (q+8) x bf16, group 128, bf16 dequant multiply, Marlin layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g128-zp-bf16",
     .summary = "uint4 with zero points (AWQ) x bf16, group 128, Marlin zp layout",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 1, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4_ZP, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w4a16-g128-act-bf16",
     .summary = "int4 (q+8) x bf16, group 128 with act_order (g_idx)",
     .family = "marlin",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 0, .act_order = 1,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W4, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w8a16-ch-bf16",
     .summary = "int8 (q+128) x bf16, channelwise fp32 epilogue scale",
     .family = "marlin",
     .wfmt = QV_FMT_U8, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_EXACT, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-w8a16-g128-bf16",
     .summary = "int8 (q+128) x bf16, group 128, bf16 dequant multiply",
     .family = "marlin",
     .wfmt = QV_FMT_U8, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_W8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-fp8a16-tensor-bf16",
     .summary = "fp8 e4m3 x bf16, per-tensor fp32 epilogue scale",
     .family = "marlin",
     .wfmt = QV_FMT_E4M3, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_TENSOR, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_FP8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_EXACT, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-fp8a16-ch-bf16",
     .summary = "fp8 e4m3 x bf16, channelwise fp32 epilogue scale (the seed bug's path)",
     .family = "marlin",
     .wfmt = QV_FMT_E4M3, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_FP8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_EXACT, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "marlin-fp8a16-g128-bf16",
     .summary = "fp8 e4m3 x bf16, group/block 128 along K, bf16 dequant multiply",
     .family = "marlin",
     .wfmt = QV_FMT_E4M3, .afmt = QV_FMT_BF16, .ofmt = QV_FMT_BF16, .sfmt = QV_FMT_BF16,
     .scale_layout = QV_SCALE_GROUP, .g = 128, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_NONE, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_MARLIN_FP8, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_MUL_RN, .accum = QV_ACC_TC_F32, .block_b = 16, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_wonly, .workspace = qv_workspace_wonly, .cpu_model = 1},
    {.name = "qqq-w4a8-ch",
     .summary = "QQQ W4A8: signed int4 (16q in int8) x int8 per-token, channelwise, exact int32",
     .family = "qqq",
     .wfmt = QV_FMT_I4, .afmt = QV_FMT_I8, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_TOKEN, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_QQQ_W4_CHANNEL, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_EXACT, .w_mul = 16, .accum = QV_ACC_INT32, .reduce = QV_RED_NONE,
               .epilogue = {QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_qqq, .workspace = qv_workspace_qqq, .cpu_model = 1},
    {.name = "qqq-w4a8-g128",
     .summary = "QQQ W4A8: uint4 re-rounded to int8 by fp16 group scale, x int8 per-token, fp32 channel epilogue",
     .family = "qqq",
     .wfmt = QV_FMT_U4, .afmt = QV_FMT_I8, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F16,
     .scale_layout = QV_SCALE_GROUP_CHANNEL, .g = 128, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_TOKEN, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_QQQ_W4_GROUP, .n_tile = 64, .k_tile = 16,
     .arith = {.dequant = QV_DQ_INT8_RNE, .accum = QV_ACC_INT32, .reduce = QV_RED_NONE,
               .epilogue = {QV_EP_TO_F32, QV_EP_MUL_WSCALE2, QV_EP_MUL_ASCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_qqq, .workspace = qv_workspace_qqq, .cpu_model = 1},
    {.name = "w8a8-i8-tensor",
     .summary = "int8 x int8, per-tensor x per-tensor, exact int32",
     .family = "w8a8",
     .wfmt = QV_FMT_I8, .afmt = QV_FMT_I8, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_TENSOR, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_TENSOR, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 16,
     .arith = {.dequant = QV_DQ_NONE, .accum = QV_ACC_INT32, .reduce = QV_RED_NONE,
               .epilogue = {QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_w8a8, .workspace = qv_workspace_w8a8, .cpu_model = 1},
    {.name = "w8a8-i8-tok-ch",
     .summary = "int8 x int8, SmoothQuant-style per-token x per-channel, exact int32",
     .family = "w8a8",
     .wfmt = QV_FMT_I8, .afmt = QV_FMT_I8, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_TOKEN, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 16,
     .arith = {.dequant = QV_DQ_NONE, .accum = QV_ACC_INT32, .reduce = QV_RED_NONE,
               .epilogue = {QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_w8a8, .workspace = qv_workspace_w8a8, .cpu_model = 1},
    {.name = "w8a8-i8-tok-ch-azp",
     .summary = "int8 x int8, per-token asymmetric (azp per token) x per-channel, exact int32",
     .family = "w8a8",
     .wfmt = QV_FMT_I8, .afmt = QV_FMT_I8, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_TOKEN, .azp = QV_AZP_TOKEN,
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 16,
     .arith = {.dequant = QV_DQ_NONE, .accum = QV_ACC_INT32, .reduce = QV_RED_NONE,
               .epilogue = {QV_EP_SUB_AZP, QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_w8a8, .workspace = qv_workspace_w8a8, .cpu_model = 1},
    {.name = "w8a8-i8-tensor-ch-azp",
     .summary = "int8 x int8, per-tensor asymmetric (azp per tensor) x per-channel, exact int32",
     .family = "w8a8",
     .wfmt = QV_FMT_I8, .afmt = QV_FMT_I8, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_TENSOR, .azp = QV_AZP_TENSOR,
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 16,
     .arith = {.dequant = QV_DQ_NONE, .accum = QV_ACC_INT32, .reduce = QV_RED_NONE,
               .epilogue = {QV_EP_SUB_AZP, QV_EP_TO_F32, QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_w8a8, .workspace = qv_workspace_w8a8, .cpu_model = 1},
    /* The e4m3 rows declare the narrower of their two paths: cuBLASLt's promoted
     * accumulator (M from QVET_AQ_LT_FP8_MIN_M on), measured on the H200 as a
     * 14-bit truncating partial promoted to fp32 every 128 K; the mma kernel
     * below it keeps 24 bits, inside the same bound and equal on every unique probe. */
    {.name = "w8a8-fp8-tensor",
     .summary = "fp8 e4m3 x e4m3, per-tensor x per-tensor, promoted to fp32",
     .family = "w8a8",
     .wfmt = QV_FMT_E4M3, .afmt = QV_FMT_E4M3, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_TENSOR, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_TENSOR, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 16,
     .arith = {.dequant = QV_DQ_NONE, .accum = QV_ACC_TC_FP8, .promote_nc = 128, .acc_bits = 14, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_w8a8, .workspace = qv_workspace_w8a8, .cpu_model = 1},
    {.name = "w8a8-fp8-tok-ch",
     .summary = "fp8 e4m3 x e4m3, per-token x per-channel, promoted to fp32",
     .family = "w8a8",
     .wfmt = QV_FMT_E4M3, .afmt = QV_FMT_E4M3, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_CHANNEL, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_TOKEN, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 16,
     .arith = {.dequant = QV_DQ_NONE, .accum = QV_ACC_TC_FP8, .promote_nc = 128, .acc_bits = 14, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_MUL_WSCALE, QV_EP_MUL_ASCALE}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_w8a8, .workspace = qv_workspace_w8a8, .cpu_model = 1},
    {.name = "w8a8-fp8-block128",
     .summary = "fp8 e4m3 x e4m3, per-token x 128-K activation groups, 128x128 weight blocks (scales applied at each promotion), promoted to fp32",
     .family = "w8a8",
     .wfmt = QV_FMT_E4M3, .afmt = QV_FMT_E4M3, .ofmt = QV_FMT_F16, .sfmt = QV_FMT_F32,
     .scale_layout = QV_SCALE_BLOCK, .g = 0, .zero_point = 0, .act_order = 0,
     .act_scale = QV_ASCALE_TOKEN_BLOCK, .azp = QV_AZP_NONE,
     .layout = QV_LAYOUT_PLAIN_NK, .n_tile = 8, .k_tile = 16,
     .arith = {.dequant = QV_DQ_NONE, .accum = QV_ACC_TC_FP8, .promote_nc = 128, .acc_bits = 14, .reduce = QV_RED_F32,
               .epilogue = {QV_EP_END}, .out_sat = QV_SAT_NONE},
     .launch = qv_launch_w8a8, .workspace = qv_workspace_w8a8, .cpu_model = 1},
};
#define N_VARIANTS ((int)(sizeof registry / sizeof registry[0]))

int qv_registry_count(void) { return N_VARIANTS; }

const qv_variant *qv_registry_get(int i)
{
    return (i >= 0 && i < N_VARIANTS) ? &registry[i] : NULL;
}

const qv_variant *qv_variant_find(const char *name)
{
    for (int i = 0; i < N_VARIANTS; i++)
        if (!strcmp(registry[i].name, name)) return &registry[i];
    return NULL;
}

int qv_variant_match(const qv_variant *v, const char *glob)
{
    return !glob || !*glob || fnmatch(glob, v->name, 0) == 0;
}

/* Largest |code value| of an integer format as the kernel multiplies it. */
static double int_max_abs(qv_fmt f)
{
    const qv_fmt_info *fi = qv_fmt_get(f);
    double a = fi->max_finite, b = -fi->min_value;
    return a > b ? a : b;
}

qv_status qv_variant_check_shape(const qv_variant *v, int64_t m, int64_t n, int64_t k)
{
    /* Every dimension must be positive and fit the kernels' int arguments. */
    const int64_t dim_max = (int64_t)1 << 30;
    if (m < 1 || n < 1 || k < 1)
        return qv_fail(QV_ERR_SHAPE, "%s: m=%lld, n=%lld, k=%lld: every dimension must be >= 1",
                       v->name, (long long)m, (long long)n, (long long)k);
    if (m > dim_max || n > dim_max || k > dim_max)
        return qv_fail(QV_ERR_SHAPE, "%s: dimensions above 2^30 are not supported", v->name);
    if (n % v->n_tile)
        return qv_fail(QV_ERR_SHAPE, "%s: N=%lld is not a multiple of %d (the layout's N tile)",
                       v->name, (long long)n, v->n_tile);
    if (k % v->k_tile)
        return qv_fail(QV_ERR_SHAPE, "%s: K=%lld is not a multiple of %d (the layout's K tile)",
                       v->name, (long long)k, v->k_tile);
    if (v->g > 0 && k % v->g)
        return qv_fail(QV_ERR_SHAPE, "%s: group size g=%d does not divide K=%lld", v->name, v->g,
                       (long long)k);
    if (v->arith.accum == QV_ACC_INT32) {
        /* The int32 accumulator is exact only while K * max|a| * max|w| < 2^31.
         * QQQ per-group re-rounds weights to int8, so |w| <= 127 there. */
        double amax = int_max_abs(v->afmt);
        double wmax = v->arith.dequant == QV_DQ_INT8_RNE ? 128.0 : int_max_abs(v->wfmt);
        if (v->arith.w_mul > 1) wmax *= v->arith.w_mul;
        double worst = (double)k * amax * wmax;
        if (v->azp != QV_AZP_NONE) worst *= 2.0; /* A_q.B_q and azp*colsum(B_q) */
        if (worst >= 2147483648.0)
            return qv_fail(QV_ERR_SHAPE,
                           "%s: K=%lld could overflow the exact int32 accumulator (K*max|a|*max|w| = %.0f >= 2^31)",
                           v->name, (long long)k, worst);
    }
    return QV_OK;
}

const char *qv_scale_layout_name(qv_scale_layout s)
{
    switch (s) {
    case QV_SCALE_NONE: return "none";
    case QV_SCALE_TENSOR: return "tensor";
    case QV_SCALE_CHANNEL: return "channel";
    case QV_SCALE_GROUP: return "group";
    case QV_SCALE_GROUP_CHANNEL: return "group+channel";
    case QV_SCALE_BLOCK: return "block";
    }
    return "?";
}

static const char *const layout_names[QV_LAYOUT_COUNT] = {
    [QV_LAYOUT_PLAIN_NK] = "plain-nk",
    [QV_LAYOUT_MARLIN_W4] = "marlin-w4",
    [QV_LAYOUT_MARLIN_W4_ZP] = "marlin-w4-zp",
    [QV_LAYOUT_MARLIN_W8] = "marlin-w8",
    [QV_LAYOUT_MARLIN_FP8] = "marlin-fp8",
    [QV_LAYOUT_QQQ_W4_CHANNEL] = "qqq-w4-channel",
    [QV_LAYOUT_QQQ_W4_GROUP] = "qqq-w4-group",
};

const char *qv_layout_name(qv_layout l)
{
    return (l >= 0 && l < QV_LAYOUT_COUNT) ? layout_names[l] : "?";
}

qv_layout qv_layout_from_name(const char *name)
{
    for (int l = 0; l < QV_LAYOUT_COUNT; l++)
        if (!strcmp(layout_names[l], name)) return (qv_layout)l;
    return QV_LAYOUT_COUNT;
}

const char *qv_accum_name(qv_accum a)
{
    switch (a) {
    case QV_ACC_INT32: return "int32";
    case QV_ACC_TC_F32: return "tc-f32";
    case QV_ACC_TC_FP8: return "tc-fp8";
    case QV_ACC_FMA_F32: return "fma-f32";
    }
    return "?";
}

const char *qv_dequant_name(qv_dequant d)
{
    switch (d) {
    case QV_DQ_NONE: return "none";
    case QV_DQ_EXACT: return "exact";
    case QV_DQ_MUL_RN: return "mul-rn";
    case QV_DQ_INT8_RNE: return "int8-rne";
    }
    return "?";
}

const char *qv_act_scale_name(qv_act_scale s)
{
    switch (s) {
    case QV_ASCALE_NONE: return "none";
    case QV_ASCALE_TENSOR: return "tensor";
    case QV_ASCALE_TOKEN: return "token";
    case QV_ASCALE_TOKEN_BLOCK: return "token-block128";
    }
    return "?";
}
