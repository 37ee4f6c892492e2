/* act_quant.cu: dynamic per-token activation quantization (gemm.h:
 * qv_act_quant), the step in front of every W8A8 / W4A8 GEMM.
 *   int8: s = fp32(absmax) / 127 (IEEE division, RN), q = rne(x / s) in
 *         [-128, 127] (|x / s| <= 127 up to one rounding, so no clamp fires);
 *   e4m3: s = absmax / 448, q = e4m3(x / s) with RNE and saturation to +-448.
 * An all-zero row gets s = 0 and q = 0. Inputs are expected finite; a NaN or
 * Inf makes that row's output meaningless but never touches other rows.
 *
 * One pass over memory: a row is read once, 8 values (one 16-byte load) per
 * slot, and stays in registers between the absmax reduction and the
 * quantization; codes leave 8 per 8-byte store. A row is spread over a "row
 * group" of threads sized to K:
 *   - many rows (M > 128) or short rows: the group lives in one block (1..32
 *     lanes of a warp, or up to 256 threads with 4, 8 or 16 slots each, so
 *     that several rows share an SM), several rows per block when rows are
 *     short;
 *   - few long rows (M <= 128, K >= 2048), or rows longer than a block's
 *     registers hold (K > 32768): the group spans a cluster of AQ_CLUSTER
 *     blocks on as many SMs, joined through distributed shared memory, so that
 *     a single token is quantized by 8 SMs instead of one (at M = 1 the
 *     divisions of one long row would otherwise keep a single SM busy for
 *     microseconds). qv_launch_opts.act_quant_cluster_max_m moves the bound
 *     128 (QV_OPT_OFF: none; the tuning table holds the default).
 * Rows longer than the registers of a cluster can hold (K > 262144) take a
 * two-pass kernel that re-reads the row from L2. All paths compute every value
 * with the same operations, so the result does not depend on the path. */
#include <stdint.h>
#include <stdlib.h>

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "internal/gpu.h"
#include "internal/tuning.h"
#include "qvet/gemm.h"

namespace cg = cooperative_groups;

#define AQ_SLOT 8            /* values per slot: 16 bytes of fp16/bf16 */
#define AQ_MAX_THREADS 1024  /* CUDA's block limit */
#define AQ_BLOCK 256         /* threads of a block holding several short rows */
#define AQ_VPT_MAX 4         /* slots per thread of a cluster or of a block of up to 1024:
                             * 16 registers of values within the 64 such a block allows */
#define AQ_VPT_BIG 16        /* slots per thread of a single block at most (aq_block_limit) */
#define AQ_GROUP_CAP 256     /* threads of one row's group in a single block, for aligned
                             * rows: longer rows take more slots per thread, so that
                             * several rows share an SM and one row's loads overlap
                             * another's quantization */
#define AQ_CLUSTER 8         /* blocks per row in cluster mode: the portable cluster size */
#define AQ_CLUSTER_MIN_K 2048 /* shorter rows are too little work to split */

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

/* The divisions v / s of one row without a reciprocal instruction per value:
 * with inv = RN(1/s), q = RN(v inv), the residual r = v - q s exactly (one
 * fma) and RN(q + r inv) (Markstein's correction). Checked exhaustively on the
 * CPU with the same IEEE operations, for every positive fp16 and bf16 amax and
 * every |v| <= amax of that format, with s = RN(amax / 127) and RN(amax / 448):
 * fp16, the bits of v / s everywhere; bf16, everywhere except where the
 * residual underflows (v subnormal against a small s), all at |v / s| < 2^-23
 * with the sign of v / s, so the int8 code (0) and the e4m3 code (a zero of
 * that sign) are the same. A zero v keeps v * inv, whose sign is that of v / s
 * (the correction would turn -0 into +0). Rows with s < 2^-90 divide with
 * __fdiv_rn. */
struct aq_div {
    float s, inv;
    bool fast;  /* s >= 2^-90 */
    bool zero;  /* s is not positive (an all-zero row): every code is 0 */
};

__device__ __forceinline__ aq_div aq_div_make(float scale)
{
    aq_div d;
    d.s = scale;
    d.inv = __frcp_rn(scale);
    d.fast = scale >= 0x1p-90f;
    d.zero = !(scale > 0.0f);
    return d;
}

__device__ __forceinline__ float aq_quot(const aq_div &d, float v)
{
    if (!d.fast) return __fdiv_rn(v, d.s);
    const float q = __fmul_rn(v, d.inv);
    const float r = __fmaf_rn(-q, d.s, v);
    return v == 0.0f ? q : __fmaf_rn(r, d.inv, q);
}

/* rne(r) clamped to [-128, 127] as an int8 byte. Adding 1.5 * 2^23 leaves
 * rne(r) in the low mantissa bits for |r| < 2^22 (here |r| <= 127 up to one
 * rounding), the same as __float2int_rn without the conversion unit. */
__device__ __forceinline__ uint32_t aq_i8(float r)
{
    const int i = __float_as_int(__fadd_rn(r, 12582912.0f)) - 0x4B400000;
    return (uint32_t)(uint8_t)(int8_t)min(127, max(-128, i));
}

/* Two values' codes in the low 16 bits, a first: int8 rne(v / s), or e4m3
 * with RNE and saturation to +-448 (one two-value conversion). */
template <bool FP8>
__device__ __forceinline__ uint32_t aq_code2(float a, float b, const aq_div &d)
{
    if (d.zero) return 0;
    const float ra = aq_quot(d, a), rb = aq_quot(d, b);
    if (FP8) return (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(ra, rb), __NV_SATFINITE, __NV_E4M3);
    return aq_i8(ra) | aq_i8(rb) << 8;
}

/* The scale of a row from its absmax; 127 = int8 max magnitude used
 * symmetrically, 448 = e4m3fn max finite. */
template <bool FP8>
__device__ __forceinline__ float aq_scale(float amax)
{
    return __fdiv_rn(amax, FP8 ? 448.0f : 127.0f);
}

/* Slot `sl` of a row (values 8 sl .. 8 sl + 7) into four words, low value
 * first; values past k read as 0, which never raises an absmax.
 * xr: (k) fp16/bf16 bits of one row. VEC: xr is 16-byte aligned and k % 8 == 0. */
template <bool VEC>
__device__ __forceinline__ void aq_load_slot(const uint16_t *__restrict__ xr, int64_t sl, int64_t k, uint32_t w[4])
{
    if constexpr (VEC) {
        const uint4 v = *(const uint4 *)(xr + AQ_SLOT * sl);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t e = AQ_SLOT * sl + 2 * j;
            const uint32_t lo = e < k ? xr[e] : 0u, hi = e + 1 < k ? xr[e + 1] : 0u;
            w[j] = lo | hi << 16;
        }
    }
}

/* The codes of one slot. qr: (k) codes of one row; VEC: qr 8-byte aligned and
 * k % 8 == 0. */
template <bool BF16, bool FP8, bool VEC>
__device__ __forceinline__ void aq_store_slot(uint8_t *__restrict__ qr, int64_t sl, int64_t k, const uint32_t w[4],
                                              const aq_div &d)
{
    uint32_t c[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float a, b;
        aq_unpack2<BF16>(w[j], a, b);
        c[j >> 1] |= aq_code2<FP8>(a, b, d) << (16 * (j & 1));
    }
    if constexpr (VEC) {
        *(uint2 *)(qr + AQ_SLOT * sl) = make_uint2(c[0], c[1]);
    } else {
#pragma unroll
        for (int j = 0; j < AQ_SLOT; j++) {
            const int64_t e = AQ_SLOT * sl + j;
            if (e < k) qr[e] = (uint8_t)(c[j >> 2] >> (8 * (j & 3)));
        }
    }
}

/* x: (m, k) fp16 or bf16 bits, row-major; q: (m, k) int8 or e4m3 codes,
 * row-major; s: (m) f32 scales, s[row] when sg = 1; with sg > 1 the rows are
 * the sg K groups of m / sg tokens (qv_act_quant_groups) and row r's scale
 * goes to s[(r % sg) (m / sg) + r / sg], the groups' (sg, tokens) MN-major
 * order.
 * Without a cluster (CL false): a block holds blockDim / group rows, `group`
 * threads each (a power of two <= 32, or a multiple of 32).
 * With a cluster (CL true): each cluster of AQ_CLUSTER blocks holds one row,
 * block rank r taking slots r * blockDim + t + AQ_CLUSTER * blockDim * j.
 * Thread t of a row group holds slots t + G * j (j < VPT, G = the group's
 * thread count), so consecutive threads load consecutive 16 bytes. */
template <bool BF16, bool FP8, bool VEC, int VPT, bool CL>
__device__ __forceinline__ void aq_rows(const uint16_t *__restrict__ x, uint8_t *__restrict__ q,
                                        float *__restrict__ s, int64_t m, int64_t k, int group, int64_t sg)
{
    __shared__ float red[AQ_MAX_THREADS / 32];
    __shared__ float block_max;
    int64_t row, t, G;
    if (CL) {
        const cg::cluster_group cl = cg::this_cluster();
        row = blockIdx.x / AQ_CLUSTER;
        t = (int64_t)cl.block_rank() * blockDim.x + threadIdx.x;
        G = (int64_t)AQ_CLUSTER * blockDim.x;
    } else {
        row = (int64_t)blockIdx.x * (blockDim.x / group) + threadIdx.x / group;
        t = threadIdx.x % group;
        G = group;
    }
    const bool live = row < m;
    const int64_t nslot = (k + AQ_SLOT - 1) / AQ_SLOT;
    const uint16_t *xr = x + (live ? row : 0) * k;
    uint8_t *qr = q + (live ? row : 0) * k;

    uint32_t w[VPT][4];
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        const int64_t sl = t + G * j;
        if (live && sl < nslot) {
            aq_load_slot<VEC>(xr, sl, k, w[j]);
        } else {
            w[j][0] = w[j][1] = w[j][2] = w[j][3] = 0;
        }
    }
#pragma unroll
    for (int j = 0; j < VPT; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float a, b;
            aq_unpack2<BF16>(w[j][i], a, b);
            amax = fmaxf(amax, fmaxf(fabsf(a), fabsf(b)));
        }

    /* Within a warp: lanes of one group (group < 32: aligned runs of `group`
     * lanes, which xor offsets below `group` never leave). */
    const int lanes = (!CL && group < 32) ? group : 32;
    for (int o = lanes >> 1; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    /* Across the warps of a group (the condition is uniform over the block). */
    if (CL || group > 32) {
        const int warp = threadIdx.x >> 5;
        const int per_group = CL ? (int)(blockDim.x >> 5) : group >> 5;
        const int first = CL ? 0 : (int)(threadIdx.x / group) * per_group;
        if ((threadIdx.x & 31) == 0) red[warp] = amax;
        __syncthreads();
        amax = 0.0f;
        for (int i = 0; i < per_group; i++) amax = fmaxf(amax, red[first + i]);
    }
    /* Across the blocks of a cluster, through distributed shared memory. */
    if (CL) {
        cg::cluster_group cl = cg::this_cluster();
        if (threadIdx.x == 0) block_max = amax;
        cl.sync();
        amax = 0.0f;
        for (int r = 0; r < AQ_CLUSTER; r++) amax = fmaxf(amax, *cl.map_shared_rank(&block_max, r));
        cl.sync(); /* no block leaves while another still reads its block_max */
    }

    const float scale = aq_scale<FP8>(amax);
    if (live && t == 0) s[sg == 1 ? row : (row % sg) * (m / sg) + row / sg] = scale;
    const aq_div d = aq_div_make(scale);
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        const int64_t sl = t + G * j;
        if (live && sl < nslot) aq_store_slot<BF16, FP8, VEC>(qr, sl, k, w[j], d);
    }
}

/* Lets the next kernel in the stream start now if it was launched as a
 * programmatic dependent (the W4A8 / W8A8 GEMMs are): it prefetches its
 * weights and then waits (griddepcontrol.wait) until this grid has finished
 * and its codes and scales are visible. A no-op for any other successor. */
__device__ __forceinline__ void aq_allow_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::); }

/* The largest block of a row-group kernel with VPT slots per thread: 1024
 * threads leave 64 registers each, enough for 4 slots (16 registers of
 * values); 8 and 16 slots need 128 and 255 registers, so 512 and 256 threads. */
constexpr int aq_block_limit(int vpt) { return vpt <= 4 ? 1024 : vpt == 8 ? 512 : 256; }

/* The row groups in one block (aq_rows with CL false). x, q, s as for aq_rows. */
template <bool BF16, bool FP8, bool VEC, int VPT>
__global__ void __launch_bounds__(aq_block_limit(VPT))
k_act_quant(const uint16_t *__restrict__ x, uint8_t *__restrict__ q, float *__restrict__ s, int64_t m, int64_t k,
            int group, int64_t sg)
{
    aq_allow_dependents();
    aq_rows<BF16, FP8, VEC, VPT, false>(x, q, s, m, k, group, sg);
}

/* One row per cluster of AQ_CLUSTER blocks (aq_rows with CL true); the cluster
 * shape is part of the kernel, so a plain launch with a grid of m * AQ_CLUSTER
 * blocks suffices. x, q, s as for aq_rows. */
template <bool BF16, bool FP8, bool VEC, int VPT>
__global__ void __cluster_dims__(AQ_CLUSTER, 1, 1) __launch_bounds__(AQ_MAX_THREADS)
k_act_quant_cluster(const uint16_t *__restrict__ x, uint8_t *__restrict__ q, float *__restrict__ s, int64_t m,
                    int64_t k)
{
    aq_allow_dependents();
    aq_rows<BF16, FP8, VEC, VPT, true>(x, q, s, m, k, 0, 1);
}

/* Rows too long for a cluster's registers: block b quantizes row b in two
 * passes, the second re-reading the row (from L2). Same operations per value.
 * x, q, s as for k_act_quant. */
template <bool BF16, bool FP8, bool VEC>
__global__ void __launch_bounds__(AQ_MAX_THREADS)
k_act_quant_long(const uint16_t *__restrict__ x, uint8_t *__restrict__ q, float *__restrict__ s, int64_t k)
{
    __shared__ float red[AQ_MAX_THREADS / 32];
    aq_allow_dependents();
    const int64_t row = blockIdx.x;
    const uint16_t *xr = x + row * k;
    uint8_t *qr = q + row * k;
    const int64_t nslot = (k + AQ_SLOT - 1) / AQ_SLOT;

    float amax = 0.0f;
    for (int64_t sl = threadIdx.x; sl < nslot; sl += blockDim.x) {
        uint32_t w[4];
        aq_load_slot<VEC>(xr, sl, k, w);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float a, b;
            aq_unpack2<BF16>(w[i], a, b);
            amax = fmaxf(amax, fmaxf(fabsf(a), fabsf(b)));
        }
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
    __syncthreads();
    amax = 0.0f;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) amax = fmaxf(amax, red[i]);

    const float scale = aq_scale<FP8>(amax);
    if (threadIdx.x == 0) s[row] = scale;
    const aq_div d = aq_div_make(scale);
    for (int64_t sl = threadIdx.x; sl < nslot; sl += blockDim.x) {
        uint32_t w[4];
        aq_load_slot<VEC>(xr, sl, k, w);
        aq_store_slot<BF16, FP8, VEC>(qr, sl, k, w, d);
    }
}

namespace {

/* How one launch spreads the rows. */
struct aq_plan {
    bool vec;      /* 16-byte loads, 8-byte stores */
    bool longrow;  /* the two-pass kernel */
    int cluster;   /* 1 or AQ_CLUSTER blocks per row */
    int vpt;       /* slots per thread */
    int group;     /* threads per row within a block */
    int threads;   /* threads per block */
    int64_t blocks;
};

/* Threads per block so that `cluster` blocks of them, `vpt` slots each, cover
 * `nslot` slots; 0 when more than a block would be needed. */
int aq_threads(int64_t nslot, int cluster, int vpt)
{
    const int64_t per_block = (nslot + cluster - 1) / cluster;
    const int64_t need = (per_block + vpt - 1) / vpt;
    int64_t t;
    if (cluster == 1 && need <= 32) {
        t = 1;
        while (t < need) t <<= 1;
    } else {
        t = (need + 31) / 32 * 32;
    }
    return t <= AQ_MAX_THREADS ? (int)t : 0;
}

/* The largest M that takes the cluster path for rows of K >= AQ_CLUSTER_MIN_K:
 * the options' act_quant_cluster_max_m (QV_OPT_OFF: 0, only rows too long
 * for one block take it), or the tuning table's; the option exists to
 * measure the two paths against each other with `qvet bench` (both compute
 * the same bits). */
int64_t aq_cluster_max_m(const qv_launch_ctx &c)
{
    const int set = c.o->act_quant_cluster_max_m;
    if (set) return set == QV_OPT_OFF ? 0 : set;
    return c.t->act_quant_cluster_max_m;
}

aq_plan aq_make_plan(int64_t m, int64_t k, bool vec, int64_t cluster_max_m)
{
    aq_plan p = {vec, false, 1, 0, 0, 0, 0};
    const int64_t nslot = (k + AQ_SLOT - 1) / AQ_SLOT;
    const bool few_long = m <= cluster_max_m && k >= AQ_CLUSTER_MIN_K;
    if (!few_long) {
        /* A single block per row group: aligned rows with 4, 8 or 16 slots per
         * thread and at most AQ_GROUP_CAP threads; unaligned rows with 4. */
        for (int vpt = AQ_VPT_MAX; vpt <= (vec ? AQ_VPT_BIG : AQ_VPT_MAX) && !p.group; vpt *= 2) {
            const int t = aq_threads(nslot, 1, vpt);
            if (t && (!vec || t <= AQ_GROUP_CAP)) p.vpt = vpt, p.group = t;
        }
    }
    /* A cluster per row: 2 slots per thread when the cluster already spreads a
     * few rows over many SMs, 4 when the row is too long for that. */
    for (int vpt = vec && few_long ? 2 : AQ_VPT_MAX; vpt <= AQ_VPT_MAX && !p.group; vpt *= 2) {
        const int t = aq_threads(nslot, AQ_CLUSTER, vpt);
        if (t) p.cluster = AQ_CLUSTER, p.vpt = vpt, p.group = t;
    }
    if (!p.group) {
        p.longrow = true, p.cluster = 1, p.threads = AQ_MAX_THREADS, p.blocks = m;
        return p;
    }
    if (p.cluster > 1) {
        p.threads = p.group;
        p.blocks = m * p.cluster;
    } else {
        const int rows = p.group < AQ_BLOCK ? AQ_BLOCK / p.group : 1;
        p.threads = rows * p.group;
        p.blocks = (m + rows - 1) / rows;
    }
    return p;
}

template <bool BF16, bool FP8, bool VEC, int VPT>
cudaError_t aq_launch_rows(const aq_plan &p, const uint16_t *x, uint8_t *q, float *s, int64_t m, int64_t k,
                           int64_t sg, cudaStream_t st)
{
    /* Only the pairs the plan makes are compiled: clusters with 2 or 4 slots
     * per thread, single blocks with 4 to AQ_VPT_BIG. */
    const bool cluster = p.cluster > 1;
    if constexpr (VPT < AQ_VPT_MAX) {
        QV_ASSERT(cluster, "act quant plan: a single block with fewer than AQ_VPT_MAX slots per thread");
        k_act_quant_cluster<BF16, FP8, VEC, VPT><<<(unsigned)p.blocks, p.threads, 0, st>>>(x, q, s, m, k);
    } else if constexpr (VPT > AQ_VPT_MAX) {
        QV_ASSERT(!cluster, "act quant plan: a cluster with more than AQ_VPT_MAX slots per thread");
        k_act_quant<BF16, FP8, VEC, VPT><<<(unsigned)p.blocks, p.threads, 0, st>>>(x, q, s, m, k, p.group, sg);
    } else if (cluster) {
        k_act_quant_cluster<BF16, FP8, VEC, VPT><<<(unsigned)p.blocks, p.threads, 0, st>>>(x, q, s, m, k);
    } else {
        k_act_quant<BF16, FP8, VEC, VPT><<<(unsigned)p.blocks, p.threads, 0, st>>>(x, q, s, m, k, p.group, sg);
    }
    return cudaGetLastError();
}

template <bool BF16, bool FP8>
cudaError_t aq_launch(const aq_plan &p, const uint16_t *x, uint8_t *q, float *s, int64_t m, int64_t k,
                      int64_t sg, cudaStream_t st)
{
    /* Group rows (sg > 1) are 128 long: always a single block's row groups. */
    QV_ASSERT(sg == 1 || (!p.longrow && p.cluster == 1), "act quant: group scales need the single-block kernel");
    if (p.longrow) {
        if (p.vec)
            k_act_quant_long<BF16, FP8, true><<<(unsigned)p.blocks, p.threads, 0, st>>>(x, q, s, k);
        else
            k_act_quant_long<BF16, FP8, false><<<(unsigned)p.blocks, p.threads, 0, st>>>(x, q, s, k);
        return cudaGetLastError();
    }
    if (!p.vec) return aq_launch_rows<BF16, FP8, false, AQ_VPT_MAX>(p, x, q, s, m, k, sg, st);
    switch (p.vpt) {
    case 2: return aq_launch_rows<BF16, FP8, true, 2>(p, x, q, s, m, k, sg, st);
    case 4: return aq_launch_rows<BF16, FP8, true, 4>(p, x, q, s, m, k, sg, st);
    case 8: return aq_launch_rows<BF16, FP8, true, 8>(p, x, q, s, m, k, sg, st);
    default: return aq_launch_rows<BF16, FP8, true, AQ_VPT_BIG>(p, x, q, s, m, k, sg, st);
    }
}

} /* namespace */

/* Rows of k values, each with its scale at s[row] (sg = 1), or the sg groups
 * of each token as rows with MN-major scales (sg > 1, k the group width). */
static qv_status act_quant_rows(qv_fmt xfmt, qv_fmt qfmt, int64_t m, int64_t k, int64_t sg, const void *x, void *q,
                                float *s, void *stream, const qv_launch_opts *opts)
{
    if (xfmt != QV_FMT_F16 && xfmt != QV_FMT_BF16)
        return qv_fail(QV_ERR_DTYPE, "act quant: activations must be f16 or bf16");
    if (qfmt != QV_FMT_I8 && qfmt != QV_FMT_E4M3)
        return qv_fail(QV_ERR_DTYPE, "act quant: the quantized format must be i8 or e4m3");
    if (!x || !q || !s) return qv_fail(QV_ERR_USAGE, "act quant: a device buffer is missing");
    /* 16-byte loads need every row start 16-byte aligned: k % 8 == 0 and an
     * aligned base; 8-byte code stores likewise. */
    const bool vec = k % AQ_SLOT == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)q % 8 == 0;
    qv_launch_ctx c;
    QV_TRY(qv_launch_ctx_get(opts, &c));
    const aq_plan p = aq_make_plan(m, k, vec, aq_cluster_max_m(c));
    /* CUDA's grid limit along x. */
    if (p.blocks > 2147483647LL)
        return qv_fail(QV_ERR_SHAPE, "act quant: %lld rows of %lld need more than 2^31-1 blocks", (long long)m,
                       (long long)k);
    const bool bf = xfmt == QV_FMT_BF16, f8 = qfmt == QV_FMT_E4M3;
    cudaStream_t st = (cudaStream_t)stream;
    const uint16_t *xx = (const uint16_t *)x;
    uint8_t *qq = (uint8_t *)q;
    cudaError_t rc;
    if (bf && f8) rc = aq_launch<true, true>(p, xx, qq, s, m, k, sg, st);
    else if (bf) rc = aq_launch<true, false>(p, xx, qq, s, m, k, sg, st);
    else if (f8) rc = aq_launch<false, true>(p, xx, qq, s, m, k, sg, st);
    else rc = aq_launch<false, false>(p, xx, qq, s, m, k, sg, st);
    QV_CUDA_TRY(rc, "launching k_act_quant");
    return QV_OK;
}

extern "C" qv_status qv_act_quant(qv_fmt xfmt, qv_fmt qfmt, int m, int k, const void *x, void *q, float *s,
                                  void *stream, const qv_launch_opts *opts)
{
    if (m < 1 || k < 1) return qv_fail(QV_ERR_SHAPE, "act quant: m=%d, k=%d must be >= 1", m, k);
    return act_quant_rows(xfmt, qfmt, m, k, 1, x, q, s, stream, opts);
}

extern "C" qv_status qv_act_quant_groups(qv_fmt xfmt, qv_fmt qfmt, int m, int k, const void *x, void *q, float *s,
                                         void *stream, const qv_launch_opts *opts)
{
    if (m < 1 || k < 1 || k % QV_ACT_GROUP)
        return qv_fail(QV_ERR_SHAPE, "act quant groups: m=%d must be >= 1 and k=%d a positive multiple of %d", m, k,
                       QV_ACT_GROUP);
    const int64_t sg = k / QV_ACT_GROUP;
    return act_quant_rows(xfmt, qfmt, (int64_t)m * sg, QV_ACT_GROUP, sg, x, q, s, stream, opts);
}
