/* probe-subnormal.cu: whether the f16/bf16 tensor core's fp32 accumulator
 * keeps fp32 subnormals (mma.sync.m16n8k16 with f32 C and D), which the
 * bound of the NVFP4 bf16 rows relies on: a kernel reading marlin-fp4-nv
 * with bf16 activations accumulates 2^(126 - s_pow2) below the declared
 * values (include/qvet/layout.h), so its partial sums of small outputs are
 * fp32 subnormals, and reference/bound.c charges each rounding there at most
 * half of 2^-149. A tensor core that flushed them to zero would lose up to
 * 2^-126 per operation instead.
 *
 * One warp runs one mma per case on A (16 x 16, row-major), B (16 x 8,
 * column-major) and C (16 x 8) given in natural order (the fragment
 * positions of the PTX ISA's m16n8k16 layout are formed in the kernel); only
 * D[0][0] = C[0][0] + sum_k A[0][k] B[k][0] is compared. Each case prints
 * D[0][0]'s bits beside the value with subnormals kept and rounded to
 * nearest, kept and truncated toward zero, and flushed; the last line says
 * which the hardware does. Either way of keeping them loses less than one
 * quantum 2^-149 per rounding, which is all the bound charges; flushing
 * would lose up to 2^-126.
 *
 * Build and run (an sm_90 GPU; not part of `make`):
 *   nvcc -O2 -arch=sm_90 -o probe-subnormal tools/probe-subnormal.cu
 *   ./probe-subnormal */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "probe_timing.cuh" /* CK */

/* a: (16, 16) row-major, b: (16, 8) with b[k * 8 + n], c, d: (16, 8)
 * row-major; 16-bit codes of bf16 (bf = 1) or f16. One warp. */
__global__ void k_mma_once(const uint16_t *a, const uint16_t *b, const float *c, float *d, int bf)
{
    const int lane = threadIdx.x, gid = lane / 4, tig = lane % 4;
    /* A fragment: a0 (gid, 2tig..2tig+1), a1 (gid+8, ...), a2 (gid, 2tig+8..), a3 (gid+8, 2tig+8..) */
    uint32_t ra[4], rb[2];
    for (int i = 0; i < 4; i++) {
        int row = gid + 8 * (i & 1), col = 2 * tig + 8 * (i >> 1);
        ra[i] = (uint32_t)a[row * 16 + col] | ((uint32_t)a[row * 16 + col + 1] << 16);
    }
    /* B fragment: b0 rows 2tig..2tig+1, b1 rows 2tig+8..2tig+9, column gid */
    for (int i = 0; i < 2; i++) {
        int row = 2 * tig + 8 * i;
        rb[i] = (uint32_t)b[row * 8 + gid] | ((uint32_t)b[(row + 1) * 8 + gid] << 16);
    }
    /* C/D fragment: c0 c1 (gid, 2tig..2tig+1), c2 c3 (gid+8, ...) */
    float rc[4], rd[4];
    for (int i = 0; i < 4; i++) rc[i] = c[(gid + 8 * (i >> 1)) * 8 + 2 * tig + (i & 1)];
    if (bf)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%10,%11,%12,%13};\n"
                     : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), "f"(rc[0]),
                       "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%10,%11,%12,%13};\n"
                     : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), "f"(rc[0]),
                       "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));
    for (int i = 0; i < 4; i++) d[(gid + 8 * (i >> 1)) * 8 + 2 * tig + (i & 1)] = rd[i];
}

/* bf16 / f16 code of x, which the cases keep exact in the format. */
static uint16_t code_of(double x, int bf)
{
    if (bf) {
        float f = (float)x;
        uint32_t u;
        memcpy(&u, &f, 4);
        return (uint16_t)(u >> 16);
    }
    return __half_as_ushort(__float2half((float)x));
}

/* One case: A row 0 and B column 0 (k = 0..15; the rest zero) and C[0][0]. */
typedef struct one_case {
    const char *what;
    int bf;
    double a[16], b[16], c;
    double kept, trunc, flushed; /* D[0][0] with fp32 subnormals kept (RN), kept (toward zero), flushed */
} one_case;

int main(void)
{
    const double s70 = ldexp(1.0, -70), s63 = ldexp(1.0, -63), s75 = ldexp(1.0, -75);
    one_case cs[] = {
        {"bf16: one product 2^-70 x 2^-70 = 2^-140 (an fp32 subnormal)", 1, {s70}, {s70}, 0,
         ldexp(1.0, -140), ldexp(1.0, -140), 0},
        {"bf16: C = 2^-140 (subnormal input), no products", 1, {0}, {0}, ldexp(1.0, -140), ldexp(1.0, -140),
         ldexp(1.0, -140), 0},
        {"bf16: 2^-126 - 0.875 2^-126 = 2^-129 (normal products cancel to a subnormal)", 1, {s63, -0.875 * s63},
         {s63, s63}, 0, ldexp(1.0, -129), ldexp(1.0, -129), 0},
        {"bf16: C = 2^-126, product -0.75 2^-126: 2^-128", 1, {-0.75 * s63}, {s63}, ldexp(1.0, -126),
         ldexp(1.0, -128), ldexp(1.0, -128), 0},
        {"bf16: sixteen products 2^-150 (each half the subnormal quantum): 2^-146 if summed exactly", 1,
         {s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75},
         {s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75, s75}, 0, ldexp(1.0, -146),
         ldexp(1.0, -146), 0},
        {"bf16: one product 1.5 2^-150 (between subnormals): 2^-149 under RN, 0 toward zero", 1, {s75}, {1.5 * s75},
         0, ldexp(1.0, -149), 0, 0},
        {"f16: C = 2^-140 (subnormal input), no products", 0, {0}, {0}, ldexp(1.0, -140), ldexp(1.0, -140),
         ldexp(1.0, -140), 0},
    };
    const int n = (int)(sizeof cs / sizeof cs[0]);
    uint16_t *a, *b;
    float *c, *d;
    CK(cudaMallocManaged(&a, 256 * 2));
    CK(cudaMallocManaged(&b, 128 * 2));
    CK(cudaMallocManaged(&c, 128 * 4));
    CK(cudaMallocManaged(&d, 128 * 4));
    int rn_all = 1, rz_all = 1, flushed_any = 0;
    for (int t = 0; t < n; t++) {
        memset(a, 0, 256 * 2);
        memset(b, 0, 128 * 2);
        memset(c, 0, 128 * 4);
        for (int k = 0; k < 16; k++) {
            a[k] = code_of(cs[t].a[k], cs[t].bf);
            b[k * 8] = code_of(cs[t].b[k], cs[t].bf);
        }
        c[0] = (float)cs[t].c;
        k_mma_once<<<1, 32>>>(a, b, c, d, cs[t].bf);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        float got = d[0];
        uint32_t u;
        memcpy(&u, &got, 4);
        int rn = (double)got == cs[t].kept, rz = (double)got == cs[t].trunc;
        int flushed = (double)got == cs[t].flushed && !rn && !rz;
        rn_all &= rn;
        rz_all &= rz;
        flushed_any |= flushed;
        printf("%-88s D = %-13.6a (0x%08x)  RN %-13.6a RZ %-13.6a : %s\n", cs[t].what, (double)got, u, cs[t].kept,
               cs[t].trunc, rn && rz ? "kept" : rn ? "kept, RN" : rz ? "kept, toward zero" : flushed ? "FLUSHED" : "neither");
    }
    printf("fp32 subnormals in the mma accumulator: %s\n",
           flushed_any ? "flushed in some case"
           : rn_all    ? "kept, rounded to nearest"
           : rz_all    ? "kept, rounded toward zero"
                       : "other (see above)");
    return 0;
}
