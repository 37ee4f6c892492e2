/* wonly_fp4.h: the FP4 dequantization of the weight-only kernels, one code at
 * a time, for tests (t_gpu_fp4): the 16-bit weight each register form of
 * kernels/wonly_common.cuh makes from one e2m1 code and one packed block-scale
 * byte, on the device. Plain C for gcc and nvcc. */
#ifndef QVET_WONLY_FP4_H
#define QVET_WONLY_FP4_H

#include <stdint.h>

#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The scale-register forms (kernels/wonly_common.cuh):
 *   QV_FP4_FORM_REG: the byte in both halves of one register per n8 tile
 *     (wo_fp4_scale_reg, wo_fp4_scale), as the mma, dequantize + cuBLAS and
 *     wgmma kernels make it;
 *   QV_FP4_FORM_PAIR: two tiles' bytes in the halves of one register
 *     (wo_fp4_lane_scale_pairs, wo_fp4_scale_half), as the small-M kernel;
 *   _FAST: MXFP4's one-multiply form, which its kernels take only where every
 *     code is at most 127 (NVFP4 has one form). */
typedef enum {
    QV_FP4_FORM_REG = 0,
    QV_FP4_FORM_REG_FAST,
    QV_FP4_FORM_PAIR,
    QV_FP4_FORM_PAIR_FAST,
    QV_FP4_FORM_COUNT
} qv_fp4_form;

/* out[2 (16 c + x) + h] for every byte c (0..255) and e2m1 code x (0..15):
 * the f16 (bf16 when bf16) code the form makes of x with scale byte c (an
 * e8m0 code for MXFP4, nv = 0; the layout's S0E5M3 byte for NVFP4, nv = 1),
 * before any epilogue: h = 0, 1 is the half of the register the code sits in
 * (REG forms: x in the low or high half of the dequantized pair; PAIR forms:
 * c in the low or high half of the scale register, 255 - c in the other).
 * QV_ERR_CUDA on a CUDA failure. */
qv_status qv_wo_fp4_dequant_table(int nv, int bf16, qv_fp4_form form, uint16_t out[256 * 16 * 2]);

#ifdef __cplusplus
}
#endif

#endif
