/* wonly_wg.cu: the weight-only GEMM family at large M on Hopper (sm_90a):
 * Y (m, n) = A (m, k) x W (k, n) with A in fp16/bf16 and W Marlin-packed
 * (int4 "q+8" or with zero points, int8 "q+128", fp8 e4m3; layout.h), computed
 * as the transposed product Y^T (n, m) = W^T (n, k) . A^T (k, m) on wgmma:
 *  - the weights are the wgmma A operand, 64 output columns x 16 k per
 *    warpgroup, dequantized in registers straight from the packed words (the
 *    per-warp register fragment of wgmma's A is the m16n8k16 A fragment, and
 *    two n8 B fragments of a Marlin lane make one: kernels/dequant.cuh);
 *  - the activations are the wgmma B operand, 128 (or 64) tokens x 16 k read
 *    from shared memory through a matrix descriptor, K-major (K contiguous,
 *    no transpose) with the 128-byte swizzle.
 * The packed weights are read and dequantized once per 128 (64) tokens, never
 * expanded to memory.
 *
 * Declared arithmetic (src/registry.c, rows of family "marlin"), as in
 * wonly.cu:
 *  - group scales (QV_DQ_MUL_RN): w = half((q - z) * s), one half-precision
 *    rounding with q - z exact;
 *  - tensor/channel scales (QV_DQ_EXACT + QV_EP_MUL_WSCALE): w = value(q)
 *    exactly, the fp32 result times the scale in fp32;
 *  - products summed by the tensor cores into fp32, k16 by k16 in increasing
 *    k (one accumulator per output, no split K); output cast RNE.
 *
 * Structure: a block of two warpgroups computes a bn-column x bx-token tile
 * of Y^T (tile_cfg: 256 x 128 by default, 512 x 64 with QVET_WO_WG_TOKENS=64).
 * Each warp owns TPW quarters of a 64-column Marlin chunk: per k16 tile it
 * reads its lanes' words of those quarters (each quarter holds the fragments
 * of two n8 tiles) and feeds quarter i as its 16 rows of the warpgroup's i-th
 * m64 tile. Activations, packed weights, group scales and zero points
 * travel global -> shared through a 5-stage cp.async ring of 64 k each (one
 * 128-byte swizzle row of activations). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dequant.cuh"
#include "mma.cuh"
#include "qvet/gemm.h"
#include "qvet/gpu.h"
#include "wonly_common.cuh"
#include "wonly_small.cuh"
#include "wonly_wg.cuh"

namespace {

constexpr int kThreads = 256;          /* two warpgroups of four warps */
constexpr int kKs = 4;                 /* k16 tiles per stage: 64 fp16 = one 128-byte swizzle row */
constexpr int kStages = 5;             /* ring depth */
/* Stages requested ahead of the one computed: kStages - 2, so that the slot
 * refilled at step s is the one read at step s - 2, whose wgmma groups are
 * complete once step s - 1 has waited for all but its latest two: the tensor
 * cores never drain at a stage boundary. */
constexpr int kAhead = kStages - 2;
constexpr int kSwizzleAtom = 1024;     /* 8 rows of 128 bytes: the 128-byte swizzle's repeat */

/* The block's tile, by m64 tiles per warpgroup (TPW, 4 or 2): each warp
 * feeds TPW x 16 rows of weights, its lanes' words for TPW pairs of n8 tiles
 * (a quarter of a 64-column Marlin chunk per pair), so a warpgroup covers TPW
 * chunks and the block 2 TPW chunks; the 128 fp32 accumulators per thread
 * then hold 256 / TPW tokens, the wgmma N.
 *   TPW = 4: 512 columns x 64 tokens; each warp reads all of one chunk.
 *   TPW = 2: 256 columns x 128 tokens; each warp reads half of one chunk, and
 *            every dequantized weight serves twice as many tokens. */
template <int TPW> struct tile_cfg {
    static_assert(TPW == 2 || TPW == 4, "two or four m64 tiles per warpgroup");
    static constexpr int bx = 256 / TPW;        /* tokens per block: the wgmma N */
    static constexpr int chunks = 2 * TPW;      /* 64-column chunks per block */
    static constexpr int bn = 64 * chunks;      /* output columns per block */
};

template <int WT> struct wt_traits {
    static constexpr bool four = WT == WT_INT4 || WT == WT_INT4_ZP;
    static constexpr int lane_bytes = four ? 16 : 32;        /* packed bytes per lane per (k16, chunk) */
    static constexpr int parts = lane_bytes / 16;            /* 16-byte copies per lane */
    /* int32 words per (k16, 64 columns): 16 x 64 codes of 4 or 8 bits, i.e.
     * 32 lanes' bytes. */
    static constexpr int chunk_words = 32 * lane_bytes / 4;
    static_assert(chunk_words * 32 == 16 * 64 * (four ? 4 : 8), "a chunk is one k16 x 64-column tile");
};

/* Shared-memory byte layout of one stage. Activations first, so every stage
 * starts on a swizzle atom; group scales and zero points hold up to kKs group
 * rows (g = 16 gives one per k16 tile). At most (8-bit weights, TPW = 4)
 * 44 KiB a stage, 221 KiB for the ring, within the 227 KiB of one block. */
template <int WT, int TPW> struct stage_layout {
    using C = tile_cfg<TPW>;
    static constexpr int a_bytes = C::bx * 128;
    static constexpr int b_bytes = kKs * C::chunks * 32 * wt_traits<WT>::lane_bytes;
    static constexpr int s_bytes = kKs * C::bn * 2;
    static constexpr int z_bytes = WT == WT_INT4_ZP ? kKs * (C::bn / 8) * 4 : 0;
    static constexpr int a_off = 0;
    static constexpr int b_off = a_off + a_bytes;
    static constexpr int s_off = b_off + b_bytes;
    static constexpr int z_off = s_off + s_bytes;
    static constexpr int bytes = (z_off + z_bytes + kSwizzleAtom - 1) / kSwizzleAtom * kSwizzleAtom;
    static_assert(kStages * bytes + kSwizzleAtom <= 227 * 1024, "the ring fits one block's shared memory");
    /* The dynamic shared memory base is only 16-byte aligned: one atom of
     * slack lets the kernel round it up to 1024. */
    static constexpr int total = kStages * bytes + kSwizzleAtom;
};

struct wg_params {
    const void *a;           /* (m, k) fp16/bf16 codes, row-major (sorted columns under act_order) */
    const uint32_t *b;       /* Marlin-packed weights, (k/16, 2n) or (k/16, 4n) int32 */
    const void *scales;      /* packed scales: (k/g, n) group, (1, n) channel (f16/bf16), (1) tensor */
    const uint32_t *zeros;   /* packed zero points (k/g, n/8) int32, or NULL */
    void *c;                 /* (m, n) output, row-major, same format as A */
    int m, n, k;
    int scale_mode;          /* SC_* */
    int scale_fmt;           /* SF_*: storage of the epilogue scale */
    int g_shift;             /* log2(g / 16): the group of k16 tile kt is kt >> g_shift */
    int grp_single;          /* 1: group scales use the 32-wide channel permutation (k == g) */
    float unbias_f32;        /* fp8: 2^-s_pow2, undoes the exponent bias folded into the scales; else 1 */
    uint32_t unbias_h2;      /* the same power of two as a half2 of the activation format */
};

/* ---- wgmma (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
 * Instructions", sections wgmma.mma_async, wgmma.fence, wgmma.commit_group,
 * wgmma.wait_group and "Matrix Descriptor Format") ---- */

/* The 64-bit shared-memory matrix descriptor of a K-major operand tile with
 * the 128-byte swizzle (PTX ISA "Matrix Descriptor Format"): bits 0-13 the
 * start address >> 4, bits 16-29 the leading-dimension byte offset >> 4
 * (unused by swizzled K-major layouts; 1 by convention), bits 32-45 the
 * stride byte offset >> 4 (1024: from one 8-row swizzle atom to the next
 * along the tokens), bits 49-51 the base offset (0: every atom starts on a
 * 1024-byte boundary), bits 62-63 the swizzle mode (1 = 128-byte). Stepping
 * k16 inside the atom adds 32 bytes (2 in address >> 4) to the start address;
 * the hardware applies the XOR of the swizzle to the full address. */
__device__ __forceinline__ uint64_t wg_desc_sw128(const void *smem_tile)
{
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(smem_tile);
    uint64_t d = (uint64_t)((addr & 0x3FFFF) >> 4);
    d |= (uint64_t)1 << 16;
    d |= (uint64_t)(kSwizzleAtom >> 4) << 32;
    d |= (uint64_t)1 << 62;
    return d;
}

/* Orders this warpgroup's register and shared-memory accesses before the
 * wgmma.mma_async that follow (required whenever the A fragments or the
 * accumulators were written by other instructions). */
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

/* Waits until at most N committed wgmma groups of this warpgroup are pending. */
template <int N>
__device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Makes the generic-proxy writes of cp.async visible to wgmma, which reads
 * shared memory through the async proxy (PTX ISA "Memory Consistency Model",
 * proxies; fence.proxy.async). */
__device__ __forceinline__ void wg_fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* D (64 x N, fp32) += A (64 x 16, registers) . B (16 x N, shared memory
 * through `desc_b`), wgmma m64nNk16 with fp32 accumulation, N = 64 or 128.
 * a[0..3]: this warp's 16 rows as the m16n8k16 A fragment; d[4j + {0,1}]: row
 * lane/4, tokens 8j + 2(lane%4) + {0,1}; d[4j + {2,3}]: the same tokens of
 * row lane/4 + 8. Operands after B: scale-d 1 (accumulate), imm-scale-a/b 1
 * (no negation), imm-trans-b 0 (B is K-major). */
template <int N, bool IS_BF16> struct wg_mma;

/* The operand text of the four instantiations: the accumulator registers
 * {%0..%(N/2 - 1)}, the A fragment's four registers, then desc_b; and their
 * constraints, d[0..N/2 - 1] read and written in order. */
#define WG_REGS64                                                                                                    \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "                              \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                                        \
    "{%32, %33, %34, %35}, %36"
#define WG_REGS128                                                                                                   \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "                              \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "                               \
    "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "                               \
    "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                                        \
    "{%64, %65, %66, %67}, %68"
#define WG_D8(o)                                                                                                     \
    "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]),      \
        "+f"(d[o + 7])
#define WG_D64 WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
#define WG_D128 WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)

/* wg_mma<N, IS_BF16>: one wgmma.mma_async m64nNk16 of element type TYPE
 * ("f16" or "bf16") with the operands REGS and accumulator constraints DOPS. */
#define WG_MMA_SPEC(N, IS_BF16, TYPE, REGS, DOPS)                                                                    \
    template <> struct wg_mma<N, IS_BF16> {                                                                          \
        static __device__ __forceinline__ void run(float d[N / 2], const uint32_t a[4], uint64_t desc_b)             \
        {                                                                                                            \
            asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " REGS                    \
                         ", 1, 1, 1, 0;\n"                                                                           \
                         : DOPS                                                                                      \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));                                 \
        }                                                                                                            \
    };

WG_MMA_SPEC(64, false, "f16", WG_REGS64, WG_D64)
WG_MMA_SPEC(64, true, "bf16", WG_REGS64, WG_D64)
WG_MMA_SPEC(128, false, "f16", WG_REGS128, WG_D128)
WG_MMA_SPEC(128, true, "bf16", WG_REGS128, WG_D128)

#undef WG_MMA_SPEC
#undef WG_D128
#undef WG_D64
#undef WG_D8
#undef WG_REGS128
#undef WG_REGS64

/* The fp32 epilogue factor of column col: the channel or tensor scale (the
 * product with the power of two 2^-s_pow2 is exact and restores the stored
 * scale, layout.h MARLIN_FP8), or 1 for group scales. */
__device__ __forceinline__ float epilogue_scale(const wg_params &p, int col)
{
    if (p.scale_mode == SC_CHANNEL) return load_scale(p.scales, single_perm_index(col), p.scale_fmt) * p.unbias_f32;
    if (p.scale_mode == SC_TENSOR) return load_scale(p.scales, 0, p.scale_fmt) * p.unbias_f32;
    return 1.0f;
}

/* One block: a tile_cfg<TPW>::bn-column x tile_cfg<TPW>::bx-token tile of Y^T
 * over the whole of K. Up to 255 registers per thread (128 of them
 * accumulators), so one block per SM. */
template <int WT, bool IS_BF16, int TPW>
__global__ void __launch_bounds__(kThreads, 1) k_gemm_wonly_wgmma(const wg_params p)
{
    using T = wt_traits<WT>;
    using C = tile_cfg<TPW>;
    using L = stage_layout<WT, TPW>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    /* Rounded up to a swizzle atom in the shared address space, which is
     * what the descriptors and the hardware's XOR see. */
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);
    unsigned char *smem = smem_raw + ((kSwizzleAtom - (raw_addr & (kSwizzleAtom - 1))) & (kSwizzleAtom - 1));

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wgi = warp >> 2;              /* warpgroup */
    const int chunk_l = warp * TPW / 4;     /* this warp's chunk inside the block */
    /* The first of this warp's TPW quarter-chunks (4-bit words): m64 tile i
     * takes n8 tiles 2 (q0 + i) and 2 (q0 + i) + 1 of the chunk. */
    const int q0 = warp * TPW % 4;
    const int m0 = blockIdx.x * C::bx;
    const int c0 = blockIdx.y * C::chunks;  /* the block's first chunk */
    const int n_chunks = p.n / 64;
    const int kt_total = p.k / 16;
    const int n_steps = (kt_total + kKs - 1) / kKs;
    const bool grouped = p.scale_mode == SC_GROUP;
    /* Group-scale rows per stage: one per group the stage's 4 k16 tiles touch
     * (groups are whole, aligned multiples of 16 rows). */
    const int s_shift = p.g_shift < 2 ? p.g_shift : 2;
    const int s_rows = grouped ? kKs >> s_shift : 0;
    /* A warpgroup whose TPW chunks all lie past N has nothing to compute
     * (uniform over the warpgroup, as wgmma requires). */
    const bool wg_active = c0 + TPW * wgi < n_chunks;
    const uint16_t *a16 = static_cast<const uint16_t *>(p.a);
    const int64_t b_row_words = (int64_t)n_chunks * T::chunk_words;

    /* Issues the copies of pipeline step `step` into ring slot `slot`.
     * A: bx token rows x 8 chunks of 16 bytes, chunk c of row r stored at
     *    c ^ (r % 8) (the 128-byte swizzle the descriptor declares); rows past
     *    M and k16 tiles past K are zero-filled without a read.
     * B: each (k16 tile u, chunk, 16-byte part q) as 32 lanes' 16 bytes in a
     *    row, so a warp's read of one part is 512 contiguous bytes.
     * Scales: s_rows rows of bn halves; zero points: s_rows rows of bn/8 words. */
    auto load_stage = [&](int step, int slot) {
        unsigned char *st = smem + slot * L::bytes;
        const int kt0 = step * kKs;
#pragma unroll
        for (int i = 0; i < C::bx * 8 / kThreads; i++) {
            const int c = tid + i * kThreads;
            const int row = c >> 3, ch = c & 7;
            const bool ok = m0 + row < p.m && kt0 + (ch >> 1) < kt_total;
            const uint16_t *src = ok ? a16 + (int64_t)(m0 + row) * p.k + (int64_t)kt0 * 16 + ch * 8 : a16;
            qv_cp_async16(st + L::a_off + row * 128 + ((ch ^ (row & 7)) << 4), src, ok);
        }
        constexpr int b_iters = kKs * C::chunks * 32 * T::parts / kThreads;
#pragma unroll
        for (int i = 0; i < b_iters; i++) {
            const int c = tid + i * kThreads;
            const int ln = c & 31;
            const int part = (c >> 5) % T::parts;
            const int ck = (c >> 5) / T::parts % C::chunks;
            const int u = (c >> 5) / T::parts / C::chunks;
            const bool ok = c0 + ck < n_chunks && kt0 + u < kt_total;
            const uint32_t *src = ok ? p.b + (int64_t)(kt0 + u) * b_row_words + (int64_t)(c0 + ck) * T::chunk_words +
                                           ln * (T::lane_bytes / 4) + part * 4
                                     : p.b;
            qv_cp_async16(st + L::b_off + (((u * C::chunks + ck) * T::parts + part) * 32 + ln) * 16, src, ok);
        }
        if (grouped) {
            /* bn/8 copies of 16 bytes per scale row: at most 4 rows x 64. */
            const int r = tid / (C::bn / 8), piece = tid % (C::bn / 8);
            if (r < s_rows) {
                const int64_t grp = (int64_t)(kt0 >> p.g_shift) + r;
                const bool ok = kt0 + (r << p.g_shift) < kt_total && (c0 * 64 + piece * 8) < p.n;
                const uint16_t *src =
                    ok ? static_cast<const uint16_t *>(p.scales) + grp * p.n + c0 * 64 + piece * 8
                       : static_cast<const uint16_t *>(p.scales);
                qv_cp_async16(st + L::s_off + r * C::bn * 2 + piece * 16, src, ok);
            }
            if (WT == WT_INT4_ZP) {
                /* bn/32 copies of 16 bytes (32 columns each) per zero-point row. */
                const int rz = tid / (C::bn / 32), pz = tid % (C::bn / 32);
                if (rz < s_rows) {
                    const int64_t grp = (int64_t)(kt0 >> p.g_shift) + rz;
                    const bool ok = kt0 + (rz << p.g_shift) < kt_total && (c0 * 64 + pz * 32) < p.n;
                    const uint32_t *src = ok ? p.zeros + grp * (p.n / 8) + c0 * 8 + pz * 4 : p.zeros;
                    qv_cp_async16(st + L::z_off + rz * (C::bn / 8) * 4 + pz * 16, src, ok);
                }
            }
        }
    };

    float acc[TPW][C::bx / 2];
#pragma unroll
    for (int i = 0; i < TPW; i++)
#pragma unroll
        for (int r = 0; r < C::bx / 2; r++) acc[i][r] = 0.0f;

#pragma unroll
    for (int s = 0; s < kAhead; s++) {
        if (s < n_steps) load_stage(s, s);
        qv_cp_async_commit();
    }

    uint32_t sc[2 * TPW]; /* group scales of the current group, one half2 per n8 tile of the warp */
    uint32_t zw = 0;      /* packed zero points of the current group, nibble per n8 tile */
    int cur_grp = -1;
    uint32_t sym[2];      /* "q+8" codes: zero point 8 */
    qv_dq4_consts<IS_BF16>(8u, sym);

    for (int step = 0; step < n_steps; step++) {
        qv_cp_async_wait<kAhead - 1>();
        wg_fence_proxy_async();
        __syncthreads();
        /* The slot refilled in this step was read in step - 2: every
         * warpgroup has since waited until at most two wgmma groups were
         * pending, both of step - 1 (every step but the last holds kKs >= 2
         * k16 tiles). An active warpgroup issues its share of the copies
         * after its first group of the step, so the tensor cores have work
         * while the addresses are computed; one commit per step and thread. */
        const int next = step + kAhead;
        if (!wg_active) {
            if (next < n_steps) load_stage(next, next % kStages);
            qv_cp_async_commit();
            continue;
        }

        const unsigned char *st = smem + (step % kStages) * L::bytes;
        const int kt0 = step * kKs;
        const int nk = kt_total - kt0 < kKs ? kt_total - kt0 : kKs;
        const uint64_t desc0 = wg_desc_sw128(st + L::a_off);
#pragma unroll
        for (int u = 0; u < kKs; u++) {
            if (u >= nk) break;
            /* This lane's packed words of its n8 tiles 2 q0 .. 2 (q0 + TPW) - 1:
             * 4-bit, word q holds n8 tiles 2q and 2q + 1; 8-bit, word j8 holds
             * n8 tile j8 and the lane's 32 bytes are two 16-byte parts. */
            const unsigned char *blane = st + L::b_off + ((u * C::chunks + chunk_l) * T::parts * 32 + lane) * 16;
            uint32_t bw[T::four ? TPW : 2 * TPW];
            if constexpr (T::four && TPW == 4) {
                const uint4 v = *reinterpret_cast<const uint4 *>(blane);
                bw[0] = v.x, bw[1] = v.y, bw[2] = v.z, bw[3] = v.w;
            } else if constexpr (T::four) {
                const uint2 v = *reinterpret_cast<const uint2 *>(blane + 4 * q0);
                bw[0] = v.x, bw[1] = v.y;
            } else {
#pragma unroll
                for (int q = 0; q < TPW / 2; q++) {
                    const uint4 v = *reinterpret_cast<const uint4 *>(blane + (q0 / 2 + q) * 512);
                    bw[4 * q] = v.x, bw[4 * q + 1] = v.y, bw[4 * q + 2] = v.z, bw[4 * q + 3] = v.w;
                }
            }
            /* Group scales of this lane's n8 tiles, reloaded only when the
             * group changes: positions 8*(lane/4)+j8 of the warp's chunk
             * (scale_perm puts column 8*j8 + lane/4 there), unless k == g uses
             * the channel permutation. */
            if (grouped) {
                const int grp = (kt0 + u) >> p.g_shift;
                if (grp != cur_grp) {
                    cur_grp = grp;
                    const int r = u >> s_shift;
                    const unsigned char *srow = st + L::s_off + r * C::bn * 2;
                    if (!p.grp_single) {
                        const unsigned char *sp = srow + (chunk_l * 64 + 8 * (lane >> 2) + 2 * q0) * 2;
                        uint32_t s2[TPW];
                        if constexpr (TPW == 4) {
                            const uint4 sv = *reinterpret_cast<const uint4 *>(sp);
                            s2[0] = sv.x, s2[1] = sv.y, s2[2] = sv.z, s2[3] = sv.w;
                        } else {
                            const uint2 sv = *reinterpret_cast<const uint2 *>(sp);
                            s2[0] = sv.x, s2[1] = sv.y;
                        }
#pragma unroll
                        for (int jj = 0; jj < 2 * TPW; jj++)
                            sc[jj] = qv_h2<IS_BF16>::dup((s2[jj >> 1] >> (16 * (jj & 1))) & 0xFFFFu);
                    } else {
                        const uint16_t *s16 = reinterpret_cast<const uint16_t *>(srow);
#pragma unroll
                        for (int jj = 0; jj < 2 * TPW; jj++)
                            sc[jj] = qv_h2<IS_BF16>::dup(
                                s16[single_perm_index(chunk_l * 64 + 8 * (2 * q0 + jj) + (lane >> 2))]);
                    }
                    if (WT == WT_FP8) {
                        /* Exact: s * 2^s_pow2 * 2^-s_pow2 = s, a half-precision value. */
#pragma unroll
                        for (int jj = 0; jj < 2 * TPW; jj++) sc[jj] = qv_h2<IS_BF16>::mul(sc[jj], p.unbias_h2);
                    }
                    if (WT == WT_INT4_ZP)
                        /* The word of column lane/4 of each of the chunk's n8 tiles. */
                        zw = *reinterpret_cast<const uint32_t *>(st + L::z_off + r * (C::bn / 8) * 4 +
                                                                 (chunk_l * 8 + (lane >> 2)) * 4);
                }
            }
            /* The m64 tile i takes n8 tiles 2(q0+i) (rows 0-7) and 2(q0+i)+1
             * (rows 8-15): A fragment {lo tile k0-7, hi tile k0-7, lo tile
             * k8-15, hi tile k8-15}. */
            uint32_t af[TPW][4];
#pragma unroll
            for (int jj = 0; jj < 2 * TPW; jj++) {
                uint32_t bf[2];
                if (WT == WT_INT4) {
                    qv_dq4<IS_BF16>(bw[jj >> 1] >> (8 * (jj & 1)), sym, bf);
                } else if (WT == WT_INT4_ZP) {
                    /* Zero point of n8 tile j8 = 2 q0 + jj: packed position j8
                     * sits at nibble j8/2 + 4*(j8%2) (interleave
                     * [0,2,4,6,1,3,5,7]). The constants are rebuilt per tile
                     * rather than kept: registers are the scarcest resource. */
                    const int j8 = 2 * q0 + jj;
                    uint32_t zc[2];
                    qv_dq4_consts<IS_BF16>((zw >> (4 * ((j8 >> 1) + 4 * (j8 & 1)))) & 0xFu, zc);
                    qv_dq4<IS_BF16>(bw[jj >> 1] >> (8 * (jj & 1)), zc, bf);
                } else if (WT == WT_INT8) {
                    qv_dq8<IS_BF16>(bw[jj], bf);
                } else {
                    qv_dqfp8<IS_BF16>(bw[jj], bf);
                }
                if (grouped) {
                    bf[0] = qv_h2<IS_BF16>::mul(bf[0], sc[jj]);
                    bf[1] = qv_h2<IS_BF16>::mul(bf[1], sc[jj]);
                }
                af[jj >> 1][jj & 1] = bf[0];
                af[jj >> 1][2 + (jj & 1)] = bf[1];
            }
            wg_fence();
            /* k16 tile u of the stage: 32 bytes into each 128-byte row. */
            const uint64_t desc = desc0 + (uint64_t)(u * 32 >> 4);
#pragma unroll
            for (int i = 0; i < TPW; i++) wg_mma<C::bx, IS_BF16>::run(acc[i], af[i], desc);
            wg_commit();
            /* The group of two k16 tiles back is done: its fragment registers
             * may be reused while this tile's and the previous one's run, so
             * the dequantization of the next tile overlaps two groups. */
            wg_wait<2>();
            if (u == 0 && next < n_steps) load_stage(next, next % kStages);
        }
        qv_cp_async_commit();
    }
    wg_wait<0>();
    qv_cp_async_wait<0>();
    if (!wg_active || c0 + chunk_l >= n_chunks) return;

    /* Epilogue: row 16w + lane/4 (+8) of m64 tile i is column
     * 64*chunk + 16(q0+i) + lane/4 (+8); accumulator 4j + 2h + e holds token
     * 8j + 2(lane%4) + e. Lanes lane and lane^4 hold neighbouring columns of
     * the same tokens: after one exchange, the even-column lane stores both
     * columns of its even token and the odd-column lane both of its odd token,
     * as one 4-byte word each. */
    const int gq = lane >> 2, tq = lane & 3;
    const bool even = (gq & 1) == 0;
#pragma unroll
    for (int i = 0; i < TPW; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int col = (c0 + chunk_l) * 64 + 16 * (q0 + i) + 8 * h + gq;
            const float s = epilogue_scale(p, col);
#pragma unroll
            for (int j = 0; j < C::bx / 8; j++) {
                float y0 = acc[i][4 * j + 2 * h], y1 = acc[i][4 * j + 2 * h + 1];
                if (!grouped) {
                    y0 = y0 * s;
                    y1 = y1 * s;
                }
                const float recv = __shfl_xor_sync(0xFFFFFFFFu, even ? y1 : y0, 4);
                const int tok = m0 + 8 * j + 2 * tq + (even ? 0 : 1);
                const int cp = even ? col : col - 1;
                if (tok < p.m)
                    *reinterpret_cast<uint32_t *>(static_cast<uint16_t *>(p.c) + (int64_t)tok * p.n + cp) =
                        even ? qv_h2<IS_BF16>::pack(y0, recv) : qv_h2<IS_BF16>::pack(recv, y1);
            }
        }
}

/* act_order: out[i][j] = a[i][perm[j]], the activations in sorted-row order. */
__global__ void k_wg_permute_cols(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k)
{
    const int64_t total = (int64_t)m * k;
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = idx / k;
        const int j = (int)(idx % k);
        out[idx] = a[i * k + perm[j]];
    }
}

/* ---- host side ---- */

/* Whether the kernel covers the problem: every weight-only Marlin row that
 * qv_launch_wonly accepts (it checks the rest), N on the 64-column chunk and
 * K on the k16 tile, and a grid within CUDA's limits. */
bool covers(const qv_variant *v, int m, int n, int k)
{
    if (weight_type(v) < 0) return false;
    if ((v->afmt != QV_FMT_F16 && v->afmt != QV_FMT_BF16) || v->ofmt != v->afmt) return false;
    if (v->scale_layout != QV_SCALE_GROUP && v->scale_layout != QV_SCALE_CHANNEL &&
        v->scale_layout != QV_SCALE_TENSOR)
        return false;
    if (m < 1 || n < 64 || n % 64 || k < 16 || k % 16) return false;
    /* gridDim.y counts 256- or 512-column blocks (at most 65535). */
    return (n + 255) / 256 <= 65535;
}

/* QVET_WO_WG_MIN_M: 0 when unset or empty (the path is off), else the whole
 * number >= 1 it holds; anything else is a usage error. */
qv_status min_m_from_env(long *min_m)
{
    const char *s = getenv("QVET_WO_WG_MIN_M");
    *min_m = 0;
    if (!s || !*s) return QV_OK;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!end || *end != '\0' || v < 1)
        return qv_fail(QV_ERR_USAGE, "QVET_WO_WG_MIN_M=\"%s\": expected a whole number >= 1 (the smallest M "
                       "that takes the wgmma kernel), or unset to turn the path off", s);
    *min_m = v;
    return QV_OK;
}

/* QVET_WO_WG_TOKENS: the block's token tile, 128 (default: two m64 tiles
 * per warpgroup) or 64 (four); anything else is a usage error. */
qv_status tpw_from_env(int *tpw)
{
    const char *s = getenv("QVET_WO_WG_TOKENS");
    *tpw = 2;
    if (!s || !*s || !strcmp(s, "128")) return QV_OK;
    if (!strcmp(s, "64")) {
        *tpw = 4;
        return QV_OK;
    }
    return qv_fail(QV_ERR_USAGE, "QVET_WO_WG_TOKENS=\"%s\": expected 64 or 128 (tokens per block of the wgmma "
                   "kernel), or unset for 128", s);
}

template <int WT, bool BF, int TPW>
qv_status launch_kernel(const wg_params &p, cudaStream_t stream)
{
    using C = tile_cfg<TPW>;
    constexpr int smem = stage_layout<WT, TPW>::total;
    static bool attr_set = false;
    if (!attr_set) {
        QV_CUDA_TRY(cudaFuncSetAttribute(k_gemm_wonly_wgmma<WT, BF, TPW>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                    "cudaFuncSetAttribute (wgmma weight-only kernel shared memory)");
        attr_set = true;
    }
    const dim3 grid((unsigned)((p.m + C::bx - 1) / C::bx), (unsigned)((p.n + C::bn - 1) / C::bn));
    k_gemm_wonly_wgmma<WT, BF, TPW><<<grid, kThreads, smem, stream>>>(p);
    QV_CUDA_TRY(cudaGetLastError(), "wgmma weight-only kernel launch");
    return QV_OK;
}

template <bool BF, int TPW>
qv_status launch_wt(int wt, const wg_params &p, cudaStream_t stream)
{
    switch (wt) {
    case WT_INT4: return launch_kernel<WT_INT4, BF, TPW>(p, stream);
    case WT_INT4_ZP: return launch_kernel<WT_INT4_ZP, BF, TPW>(p, stream);
    case WT_INT8: return launch_kernel<WT_INT8, BF, TPW>(p, stream);
    default: return launch_kernel<WT_FP8, BF, TPW>(p, stream);
    }
}

} /* namespace */

extern "C" qv_status qv_wonly_wg_wanted(const qv_variant *v, int m, int n, int k, int *take)
{
    long min_m;
    *take = 0;
    QV_TRY(min_m_from_env(&min_m));
    *take = min_m >= 1 && m >= min_m && covers(v, m, n, k);
    return QV_OK;
}

extern "C" size_t qv_wonly_wg_workspace(const qv_variant *v, int m, int n, int k)
{
    if (!v->act_order) return 0;
    return qv_wonly_counters_bytes(n) + align256((size_t)m * (size_t)k * 2);
}

extern "C" qv_status qv_wonly_wg_launch(const qv_variant *v, const qv_gemm_args *a)
{
    if (!covers(v, a->m, a->n, a->k))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: m=%d n=%d k=%d is not covered by the wgmma weight-only kernel",
                       v->name, a->m, a->n, a->k);
    int tpw;
    QV_TRY(tpw_from_env(&tpw));
    const size_t need = qv_wonly_wg_workspace(v, a->m, a->n, a->k);
    if (need > a->workspace_bytes || (need && !a->workspace))
        return qv_fail(QV_ERR_USAGE, "%s: workspace of %zu bytes given, %zu needed (qv_workspace_wonly)", v->name,
                       a->workspace_bytes, need);
    cudaStream_t stream = (cudaStream_t)a->stream;

    wg_params p;
    p.a = a->a;
    if (v->act_order) {
        uint16_t *ap = (uint16_t *)((unsigned char *)a->workspace + qv_wonly_counters_bytes(a->n));
        const int64_t total = (int64_t)a->m * a->k;
        /* 256 threads per block; at most 4096 blocks, each then loops. */
        const int blocks = (int)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
        k_wg_permute_cols<<<blocks, 256, 0, stream>>>((const uint16_t *)a->a, a->perm, ap, a->m, a->k);
        QV_CUDA_TRY(cudaGetLastError(), "act_order column permutation launch");
        p.a = ap;
    }
    p.b = (const uint32_t *)a->b;
    p.scales = a->scales;
    p.zeros = (const uint32_t *)a->zeros;
    p.c = a->c;
    p.m = a->m;
    p.n = a->n;
    p.k = a->k;
    wo_set_scale_fields(p, v, a->k);
    const bool bf = v->afmt == QV_FMT_BF16;
    const int wt = weight_type(v);
    if (tpw == 4) return bf ? launch_wt<true, 4>(wt, p, stream) : launch_wt<false, 4>(wt, p, stream);
    return bf ? launch_wt<true, 2>(wt, p, stream) : launch_wt<false, 2>(wt, p, stream);
}
