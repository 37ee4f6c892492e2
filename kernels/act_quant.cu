/* act_quant.cu: dynamic per-token activation quantization (gemm.h:
 * qv_act_quant), the step in front of every W8A8 / W4A8 GEMM. One block per
 * row, 16-byte loads (8 values) per thread: pass 1 finds absmax (exact in
 * fp32, since fp16 and bf16 values are fp32 values), pass 2 re-reads the row
 * (from L1/L2) and quantizes, 8 codes per 8-byte store.
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

#define AQ_MAX_THREADS 1024 /* a block per row; long rows get the largest block */

template <bool BF16>
__device__ __forceinline__ float aq_load_x(const uint16_t *x, int64_t i)
{
    const uint16_t h = x[i];
    if (BF16) return __uint_as_float((uint32_t)h << 16);
    return __half2float(__ushort_as_half(h));
}

/* The two values in one 32-bit word of fp16/bf16 bits, low half first. */
template <bool BF16>
__device__ __forceinline__ void aq_unpack2(uint32_t w, float &a, float &b)
{
    if (BF16) {
        a = __uint_as_float(w << 16);
        b = __uint_as_float(w & 0xffff0000u);
    } else {
        a = __half2float(__ushort_as_half((uint16_t)(w & 0xffffu)));
        b = __half2float(__ushort_as_half((uint16_t)(w >> 16)));
    }
}

/* One value's code: int8 rne(v / s) in [-128, 127], or e4m3 RNE-saturated. */
template <bool FP8>
__device__ __forceinline__ uint32_t aq_code(float v, float scale)
{
    if (!(scale > 0.0f)) return 0;
    const float r = __fdiv_rn(v, scale);
    if (FP8) return (uint32_t)__nv_cvt_float_to_fp8(r, __NV_SATFINITE, __NV_E4M3);
    return (uint32_t)(uint8_t)(int8_t)min(127, max(-128, __float2int_rn(r)));
}

/* x: (m, k) fp16 or bf16 bits, row-major; q: (m, k) int8 or e4m3 codes;
 * s: (m) f32 scales. Block b quantizes row b. */
template <bool BF16, bool FP8>
__global__ void __launch_bounds__(AQ_MAX_THREADS)
k_act_quant_token(const uint16_t *__restrict__ x, uint8_t *__restrict__ q, float *__restrict__ s, int k)
{
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    const uint16_t *xr = x + row * k;
    uint8_t *qr = q + row * k;
    /* 8 values (16 bytes) per access when rows are 16-byte aligned. */
    const bool vec = (k % 8) == 0;
    const int nv = k / 8;

    float amax = 0.0f;
    if (vec) {
        for (int i = threadIdx.x; i < nv; i += blockDim.x) {
            const uint4 v = *(const uint4 *)(xr + 8 * (int64_t)i);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float a, b;
                aq_unpack2<BF16>(w[j], a, b);
                amax = fmaxf(amax, fmaxf(fabsf(a), fabsf(b)));
            }
        }
    } else {
        for (int i = threadIdx.x; i < k; i += blockDim.x) amax = fmaxf(amax, fabsf(aq_load_x<BF16>(xr, i)));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    if (lane == 0) red[warp] = amax;
    __syncthreads();
    amax = lane < nwarps ? red[lane] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));

    /* 127 = int8 max magnitude used symmetrically; 448 = e4m3fn max finite. */
    const float scale = __fdiv_rn(amax, FP8 ? 448.0f : 127.0f);
    if (threadIdx.x == 0) s[row] = scale;

    if (vec) {
        for (int i = threadIdx.x; i < nv; i += blockDim.x) {
            const uint4 v = *(const uint4 *)(xr + 8 * (int64_t)i);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
            uint32_t c[2] = {0, 0};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float a, b;
                aq_unpack2<BF16>(w[j], a, b);
                c[j >> 1] |= (aq_code<FP8>(a, scale) | aq_code<FP8>(b, scale) << 8) << (16 * (j & 1));
            }
            *(uint2 *)(qr + 8 * (int64_t)i) = make_uint2(c[0], c[1]);
        }
    } else {
        for (int i = threadIdx.x; i < k; i += blockDim.x) qr[i] = (uint8_t)aq_code<FP8>(aq_load_x<BF16>(xr, i), scale);
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
    /* One thread per 8 values, in whole warps, at most AQ_MAX_THREADS. */
    int want = (k + 7) / 8;
    want = (want + 31) / 32 * 32;
    const unsigned threads = (unsigned)(want < 64 ? 64 : want > AQ_MAX_THREADS ? AQ_MAX_THREADS : want);
    const unsigned blocks = (unsigned)m;
    cudaStream_t st = (cudaStream_t)stream;
    const uint16_t *xx = (const uint16_t *)x;
    uint8_t *qq = (uint8_t *)q;
    if (bf && f8) k_act_quant_token<true, true><<<blocks, threads, 0, st>>>(xx, qq, s, k);
    else if (bf) k_act_quant_token<true, false><<<blocks, threads, 0, st>>>(xx, qq, s, k);
    else if (f8) k_act_quant_token<false, true><<<blocks, threads, 0, st>>>(xx, qq, s, k);
    else k_act_quant_token<false, false><<<blocks, threads, 0, st>>>(xx, qq, s, k);
    QV_CUDA_TRY(cudaGetLastError(), "launching k_act_quant_token");
    return QV_OK;
}
