/* act_quant.cu: dynamic per-token activation quantization (gemm.h:
 * qv_act_quant), the step in front of every W8A8 / W4A8 GEMM. One warp per
 * row: pass 1 finds absmax (exact in fp32, since fp16 and bf16 values are
 * fp32 values), pass 2 re-reads the row (from L1/L2) and quantizes.
 *   int8: s = fp32(absmax) / 127 (IEEE division, RN), q = rne(x / s) in
 *         [-128, 127] (|x / s| <= 127 up to one rounding, so no clamp fires);
 *   e4m3: s = absmax / 448, q = e4m3(x / s) with RNE and saturation to +-448.
 * An all-zero row gets s = 0 and q = 0. Inputs are expected finite; a NaN or
 * Inf makes that row's output meaningless but never touches other rows. */
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "qvet/gemm.h"
#include "qvet/gpu.h"

#define AQ_ROWS_PER_BLOCK 8   /* 8 warps of 32: one row each */

template <bool BF16>
__device__ __forceinline__ float aq_load_x(const uint16_t *x, int64_t i)
{
    const uint16_t h = x[i];
    if (BF16) return __uint_as_float((uint32_t)h << 16);
    return __half2float(__ushort_as_half(h));
}

/* x: (m, k) fp16 or bf16 bits, row-major; q: (m, k) int8 or e4m3 codes;
 * s: (m) f32 scales. */
template <bool BF16, bool FP8>
__global__ void __launch_bounds__(32 * AQ_ROWS_PER_BLOCK)
k_act_quant_token(const uint16_t *__restrict__ x, uint8_t *__restrict__ q, float *__restrict__ s, int m, int k)
{
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * AQ_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= m) return;
    const uint16_t *xr = x + row * k;
    uint8_t *qr = q + row * k;
    /* 8 values (16 bytes) per lane per step when rows are 16-byte aligned. */
    const bool vec = (k % 8) == 0;

    float amax = 0.0f;
    if (vec) {
        for (int64_t i = 8 * lane; i < k; i += 256) {
            const uint4 v = *(const uint4 *)(xr + i);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float a, b;
                if (BF16) {
                    a = __uint_as_float(w[j] << 16);
                    b = __uint_as_float(w[j] & 0xffff0000u);
                } else {
                    a = __half2float(__ushort_as_half((uint16_t)(w[j] & 0xffffu)));
                    b = __half2float(__ushort_as_half((uint16_t)(w[j] >> 16)));
                }
                amax = fmaxf(amax, fmaxf(fabsf(a), fabsf(b)));
            }
        }
    } else {
        for (int64_t i = lane; i < k; i += 32) amax = fmaxf(amax, fabsf(aq_load_x<BF16>(xr, i)));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));

    /* 127 = int8 max magnitude used symmetrically; 448 = e4m3fn max finite. */
    const float scale = __fdiv_rn(amax, FP8 ? 448.0f : 127.0f);
    if (lane == 0) s[row] = scale;

    for (int64_t i = lane; i < k; i += 32) {
        uint8_t code = 0;
        if (scale > 0.0f) {
            const float r = __fdiv_rn(aq_load_x<BF16>(xr, i), scale);
            if (FP8) {
                code = (uint8_t)__nv_cvt_float_to_fp8(r, __NV_SATFINITE, __NV_E4M3);
            } else {
                const int v = min(127, max(-128, __float2int_rn(r)));
                code = (uint8_t)(int8_t)v;
            }
        }
        qr[i] = code;
    }
}

extern "C" qv_status qv_act_quant(qv_fmt xfmt, qv_fmt qfmt, int m, int k, const void *x, void *q, float *s,
                                  void *stream)
{
    if (xfmt != QV_FMT_F16 && xfmt != QV_FMT_BF16)
        return qv_fail(QV_ERR_DTYPE, "act quant: activations must be f16 or bf16");
    if (qfmt != QV_FMT_I8 && qfmt != QV_FMT_E4M3)
        return qv_fail(QV_ERR_DTYPE, "act quant: the quantized format must be i8 or e4m3");
    if (m < 1 || k < 1) return qv_fail(QV_ERR_SHAPE, "act quant: m=%d, k=%d must be >= 1", m, k);
    if (!x || !q || !s) return qv_fail(QV_ERR_USAGE, "act quant: a device buffer is missing");
    const bool bf = xfmt == QV_FMT_BF16, f8 = qfmt == QV_FMT_E4M3;
    const unsigned blocks = (unsigned)((m + AQ_ROWS_PER_BLOCK - 1) / AQ_ROWS_PER_BLOCK);
    const unsigned threads = 32 * AQ_ROWS_PER_BLOCK;
    cudaStream_t st = (cudaStream_t)stream;
    const uint16_t *xx = (const uint16_t *)x;
    uint8_t *qq = (uint8_t *)q;
    if (bf && f8) k_act_quant_token<true, true><<<blocks, threads, 0, st>>>(xx, qq, s, m, k);
    else if (bf) k_act_quant_token<true, false><<<blocks, threads, 0, st>>>(xx, qq, s, m, k);
    else if (f8) k_act_quant_token<false, true><<<blocks, threads, 0, st>>>(xx, qq, s, m, k);
    else k_act_quant_token<false, false><<<blocks, threads, 0, st>>>(xx, qq, s, m, k);
    QV_CUDA_TRY(cudaGetLastError(), "launching k_act_quant_token");
    return QV_OK;
}
