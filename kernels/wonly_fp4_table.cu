/* wonly_fp4_table.cu: qv_wo_fp4_dequant_table (internal/wonly_fp4.h), the
 * FP4 dequantization of kernels/wonly_common.cuh one (scale byte, e2m1 code)
 * at a time: the same device helpers the weight-only kernels inline, on every
 * byte and code, so that a test can hold each form against the exact product
 * rounded once. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "dequant.cuh"
#include "internal/gpu.h"
#include "internal/wonly_fp4.h"
#include "wonly_common.cuh"

namespace {

/* Block c (the scale byte), thread 16 h + x: the code x at each of the
 * eight nibbles p of a word whose other nibbles hold 15 - x, so that a
 * nibble read from the wrong place shows, decoded as the kernels do
 * (qv_dqfp4_word: nibble p in register p % 2, in its low half for p < 4)
 * and scaled by byte c (PAIR: as the scale of n8 tile h of a pair
 * register). The eight results must agree; where one does not, the thread
 * writes 0xFFFF, a NaN that no form makes of a scale byte and a code. */
template <int WT, bool IS_BF16, bool PAIR, bool FAST> __global__ void k_fp4_table(uint16_t *out)
{
    const uint32_t c = blockIdx.x, x = threadIdx.x & 15u, h = threadIdx.x >> 4;
    uint32_t sc[8];
    if (PAIR) {
        /* bytes 0 and 2 of the lane's eight: the scales of n8 tiles 0 and 1,
         * the low and high half of register 0 */
        const uint32_t other = 255u - c;
        const uint2 sv = make_uint2(h ? other | c << 16 : c | other << 16, 0u);
        wo_fp4_lane_scale_pairs<WT, IS_BF16, FAST>(sv, sc);
    } else {
        sc[0] = wo_fp4_scale_reg<WT, IS_BF16, FAST>(c * 0x00010001u);
    }
    const uint32_t junk = (15u - x) * 0x11111111u;
    uint32_t v = 0;
#pragma unroll
    for (int p = 0; p < 8; p++) {
        const uint32_t w = (junk & ~(0xFu << (4 * p))) | x << (4 * p);
        uint32_t bf[2];
        qv_dqfp4_word<IS_BF16>(w, (p >> 1) & 1, bf);
        if (PAIR)
            wo_fp4_scale_half<WT, IS_BF16, FAST>(sc[0], sc[4], (int)h, bf);
        else
            wo_fp4_scale<WT, IS_BF16, FAST>(sc[0], bf);
        const uint32_t vp = (bf[p & 1] >> (16 * (p >> 2))) & 0xFFFFu;
        v = p == 0 ? vp : (vp == v ? v : 0xFFFFu);
    }
    out[2 * (16 * c + x) + h] = (uint16_t)v;
}

template <int WT, bool IS_BF16> void (*pick(qv_fp4_form form))(uint16_t *)
{
    switch (form) {
    case QV_FP4_FORM_REG: return k_fp4_table<WT, IS_BF16, false, false>;
    case QV_FP4_FORM_REG_FAST: return k_fp4_table<WT, IS_BF16, false, true>;
    case QV_FP4_FORM_PAIR: return k_fp4_table<WT, IS_BF16, true, false>;
    default: return k_fp4_table<WT, IS_BF16, true, true>;
    }
}

} /* namespace */

extern "C" qv_status qv_wo_fp4_dequant_table(int nv, int bf16, qv_fp4_form form, uint16_t out[256 * 16 * 2])
{
    if (form < 0 || form >= QV_FP4_FORM_COUNT) return qv_fail(QV_ERR_USAGE, "FP4 table: no form %d", (int)form);
    void (*k)(uint16_t *) = nv ? (bf16 ? pick<WT_FP4_NV, true>(form) : pick<WT_FP4_NV, false>(form))
                               : (bf16 ? pick<WT_FP4_MX, true>(form) : pick<WT_FP4_MX, false>(form));
    const size_t bytes = 256 * 16 * 2 * sizeof(uint16_t);
    uint16_t *d = NULL;
    QV_CUDA_TRY(cudaMalloc(&d, bytes), "cudaMalloc (FP4 table)");
    qv_status st = QV_OK;
    /* poisoned: a code no form makes of a finite product (a NaN) */
    if (cudaMemset(d, 0xFF, bytes) != cudaSuccess) st = qv_fail(QV_ERR_CUDA, "cudaMemset (FP4 table)");
    if (st == QV_OK) {
        k<<<256, 32>>>(d);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) st = qv_fail(QV_ERR_CUDA, "FP4 table launch: %s", cudaGetErrorString(e));
    }
    if (st == QV_OK) {
        const cudaError_t e = cudaMemcpy(out, d, bytes, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) st = qv_fail(QV_ERR_CUDA, "FP4 table copy: %s", cudaGetErrorString(e));
    }
    cudaFree(d);
    return st;
}
