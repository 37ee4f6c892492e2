/* wg_common.cuh: what the two persistent wgmma kernels (sm_90a) share:
 * kernels/wonly_wg.cu (weight-only, fp16/bf16 activations) and
 * kernels/qqq_wg.cu (QQQ W4A8, int8 activations). Both compute Y^T = W^T .
 * A^T with the dequantized weights as the register A operand of wgmma and the
 * activations as its shared-memory B operand, on one producer warpgroup and
 * two consumer warpgroups per block, over the same persistent schedule with
 * a stream-K tail. Here: the block's shape, the stage layout's common part
 * and the ring, the schedule (host and device), the block's skeleton (its
 * shared memory, the producer's copies of a stage, the consumers' walk over
 * the ring and their place in a tile), the wgmma fences and descriptors, the
 * host's tensor-map encoding, tile rule and launch (launch options:
 * qv_launch_opts, tuning.h); the epilogue is wg_epilogue.cuh. Rule: nothing
 * here knows a weight format; each kernel file keeps its own operands past
 * the weights, dequantization and output arithmetic. Everything sits in an
 * unnamed namespace: each translation unit has its own copy, as nvcc's
 * whole-program device code needs anyway. */
#ifndef QVET_KERNELS_WG_COMMON_CUH
#define QVET_KERNELS_WG_COMMON_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_copy.cuh"
#include "func_attr.cuh"
#include "internal/gpu.h"
#include "internal/tuning.h"

namespace {

constexpr int kConsumerWarps = 8;                   /* two warpgroups */
constexpr int kThreads = 32 * (kConsumerWarps + 4); /* plus the producer warpgroup */
/* Registers per thread after setmaxnreg: the producer warpgroup gives up what
 * the consumers take (128 x 24 + 256 x 240 <= 65536); the kernel starts with
 * 168 (65536 / 384, __launch_bounds__). */
constexpr int kProducerRegs = 24;
constexpr int kConsumerRegs = 240;
constexpr int kSwizzleAtom = 1024;     /* 8 rows of 128 bytes: the 128-byte swizzle's repeat */
/* Dynamic shared memory of one block: the H200's 227 KiB less one atom of
 * slack (the dynamic base is only 16-byte aligned). */
constexpr int kSmemMax = 227 * 1024;

/* Tokens of output per epilogue round (at most the tile's), in both kernels:
 * each round the consumers write that many tokens of their columns into a
 * staging area after the ring (128 bytes per token and 64-column chunk, on
 * the 128-byte swizzle) and one thread per warpgroup stores them with the
 * output's tensor map while the next round is written (-DQV_WG_EPI_ROWS=16,
 * 32, 64, 128 or 256, for comparisons; the area takes shared memory from the
 * ring). On the H200 no other size is measurably faster than 64. */
#ifndef QV_WG_EPI_ROWS
#define QV_WG_EPI_ROWS 64
#endif
constexpr int kEpiRows = QV_WG_EPI_ROWS;
static_assert(kEpiRows == 16 || kEpiRows == 32 || kEpiRows == 64 || kEpiRows == 128 || kEpiRows == 256,
              "16 to 256 tokens per epilogue round, a power of two");

/* Four 8 x 8 matrices of 16-bit codes from the mma accumulator layout into
 * shared memory, transposed: register e of lane l holds elements (l / 4,
 * 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix e (low half first), and
 * row r of the stored matrix e (its column r before the transpose, 16
 * bytes) goes to the address lane 8 e + r gives. */
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, const uint32_t v[4])
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v[0]),
                 "r"(v[1]), "r"(v[2]), "r"(v[3])
                 : "memory");
}

/* A barrier of the two consumer warpgroups (named barrier 1, 256 threads;
 * the producer warpgroup never takes part). */
__device__ __forceinline__ void consumers_bar()
{
    asm volatile("bar.sync 1, %0;\n" ::"n"(32 * kConsumerWarps) : "memory");
}

/* The block's tile, by m64 tiles per warpgroup (TPW, 1, 2 or 4) and tokens
 * (BX, the wgmma N: 256 / TPW unless given): each warp feeds TPW x 16 rows of
 * weights, its lanes' words for TPW pairs of n8 tiles (a quarter of a
 * 64-column chunk per pair), so a warpgroup covers TPW chunks and the block
 * 2 TPW chunks; each thread holds TPW x BX / 2 accumulators (at most 128).
 *   TPW = 4: 512 columns x 64 tokens; each warp reads all of one chunk.
 *   TPW = 1: 128 columns x 256 tokens; each warp reads a quarter of one
 *            chunk, and every dequantized weight serves 256 tokens.
 *   TPW = 2: 256 columns x 128 tokens; each warp reads half of one chunk, and
 *            every dequantized weight serves twice as many tokens.
 *   TPW = 1, BX = 64 or 128: 128 columns x 64 or 128 tokens, four or two
 *            times as many tiles as the full-register forms of those tokens
 *            (small layers: fewer parts per tile in the stream-K tail).
 *   TPW = 4 or 1, BX = 32 or 16: 512 or 128 columns x
 *            32 or 16 tokens, so that M <= 32 does not pay for 64 tokens'
 *            tensor work.
 *   TPW = 1, BX = 192: 128 columns x 192 tokens (the grouped GEMM's tile of
 *            an expert's last three 64-slot blocks, moe_wg.cu). */
template <int TPW, int BX = 256 / TPW> struct tile_cfg {
    static_assert(TPW == 1 || TPW == 2 || TPW == 4, "one, two or four m64 tiles per warpgroup");
    static_assert((BX == 16 || BX == 32 || BX == 64 || BX == 128 || BX == 256 || (BX == 192 && TPW == 1)) &&
                      TPW * BX <= 256,
                  "16, 32, 64, 128 or 256 tokens (192 in one m64 tile), at most 128 accumulators per thread");
    static constexpr int bx = BX;               /* tokens per block: the wgmma N */
    static constexpr int chunks = 2 * TPW;      /* 64-column chunks per block */
    static constexpr int bn = 64 * chunks;      /* output columns per block */
};

/* One k16 row of ROW_BYTES packed weight bytes (whole chunks of
 * CHUNK_BYTES) as tensor-map boxes: a box row holds at most 256 elements of
 * 8 bytes, so the row is cut into n_seg segments of seg_bytes, and a stage of
 * kks rows holds each segment's kks rows together: byte b of k16 row u is at
 * (b / seg_bytes) kks seg_bytes + u seg_bytes + b % seg_bytes. */
template <int ROW_BYTES, int CHUNK_BYTES> struct wg_segments {
    static constexpr int seg_bytes = ROW_BYTES < 2048 ? ROW_BYTES : 2048;
    static constexpr int n_seg = ROW_BYTES / seg_bytes;
    static_assert(n_seg * seg_bytes == ROW_BYTES && seg_bytes % CHUNK_BYTES == 0,
                  "a k16 row is whole segments of whole chunks");
};

/* The ring of a block's shared memory: the barriers (full[s], empty[s]) in
 * a header of one swizzle atom, then stages of USED bytes rounded up to a
 * swizzle atom, as many as fit (one atom kept for aligning the dynamic base)
 * beside EXTRA bytes after them (whole swizzle atoms, at `extra_off`), at
 * most MAX_STAGES and at least three. */
template <int USED, int MAX_STAGES, int EXTRA = 0> struct wg_ring {
    static_assert(EXTRA % kSwizzleAtom == 0, "the extra bytes are whole swizzle atoms");
    static constexpr int bytes = (USED + kSwizzleAtom - 1) / kSwizzleAtom * kSwizzleAtom;
    static constexpr int header = kSwizzleAtom;
    static constexpr int fit = (kSmemMax - kSwizzleAtom - header - EXTRA) / bytes;
    static constexpr int stages = fit < MAX_STAGES ? fit : MAX_STAGES;
    static_assert(stages >= 3, "at least three stages fit");
    static_assert(2 * stages * 8 <= header, "the barriers fit the header");
    static constexpr int extra_off = header + stages * bytes;
    static constexpr int total = kSwizzleAtom + extra_off + EXTRA;
};

/* The epilogue's staging area of tile C, after the ring (kEpiRows): `rows`
 * tokens (one round) x 64 output columns of 16-bit codes per chunk, 128
 * bytes per token, chunk_bytes per chunk, `bytes` for the block's chunks. */
template <class C> struct wg_epi_area {
    static constexpr int rows = C::bx < kEpiRows ? C::bx : kEpiRows;
    static constexpr int chunk_bytes = rows * 128;
    static constexpr int bytes = C::chunks * chunk_bytes;
};

/* A block's shared-memory layout for tile C, as far as both kernels share it.
 * A stage holds the activations first (bx rows of 128 bytes, on a swizzle
 * atom: a_off), then its KS k16 rows of the block's packed weights (row_bytes
 * each, whole chunks of CHUNK_BYTES) cut into segments of at most 2 KiB (byte
 * b of k16 row u at (b / seg_bytes) KS seg_bytes + u seg_bytes + b %
 * seg_bytes, one tensor-map box per segment: wg_segments; w_off), then TAIL
 * bytes of the kernel's own operands (scales, zero points: tail_off). The
 * ring holds as many such stages as fit (wg_ring, at most MAX_STAGES), and
 * the epilogue's staging area (wg_epi_area) comes after it. */
template <class C, int KS, int CHUNK_BYTES, int TAIL, int MAX_STAGES> struct wg_layout {
    static constexpr int a_bytes = C::bx * 128;
    static constexpr int row_bytes = C::chunks * CHUNK_BYTES;
    using G = wg_segments<row_bytes, CHUNK_BYTES>;
    static constexpr int seg_bytes = G::seg_bytes;
    static constexpr int n_seg = G::n_seg;
    static constexpr int w_bytes = KS * row_bytes;
    static constexpr int a_off = 0;
    static constexpr int w_off = a_off + a_bytes;
    static constexpr int tail_off = w_off + w_bytes;
    using E = wg_epi_area<C>;
    static constexpr int epi_rows = E::rows;
    static constexpr int epi_chunk_bytes = E::chunk_bytes;
    using R = wg_ring<tail_off + TAIL, MAX_STAGES, E::bytes>;
    static constexpr int bytes = R::bytes;
    static constexpr int header = R::header;
    static constexpr int stages = R::stages;
    static constexpr int epi_off = R::extra_off;
    static constexpr int total = R::total;
};

/* 32-bit accumulators of one tile (fp32 or int32): at most 128 per consumer
 * thread (a stream-K slot's size, whatever the tile). */
constexpr int kTileFloats = 128 * 32 * kConsumerWarps;

/* The persistent grid's schedule, the same on host and device. Block b takes
 * the whole tiles b, b + grid, ... below dp_tiles; the sk_tiles tiles after
 * them (the "stream-K" tail, when the last round would leave many blocks
 * idle; every tile when there are fewer tiles than blocks) are cut into
 * their stages, unit u = t * n_steps + s for tail tile t, and block
 * b < sk_grid takes units [unit_start(b), unit_start(b + 1)): at least one,
 * fewer than one tile's worth, so at most two pieces. The pieces of a tail
 * tile are its parts, in increasing k; each part's accumulators go to
 * the partial slot 2b + j (its block's j-th piece), and the block whose part
 * arrives last adds all parts in part order (fp32, QV_RED_F32, or exact
 * int32), so the sum never depends on arrival order. */
struct wg_sched {
    int tiles, tiles_m, n_steps, grid, dp_tiles, sk_tiles;
    int sk_grid; /* blocks that take tail units: min(grid, units), so none gets an empty range */
    /* 32-bit: the plan keeps grid x sk_tiles x n_steps below 2^31 (a 64-bit
     * division would be a call, and the accumulators would spill around it). */
    __host__ __device__ int unit_start(int b) const { return b * (sk_tiles * n_steps) / sk_grid; }
    /* The block whose units hold unit x: the largest b with unit_start(b)
     * <= x, i.e. b U < (x + 1) sk_grid for U = sk_tiles x n_steps. */
    __host__ __device__ int owner(int x) const { return ((x + 1) * sk_grid - 1) / (sk_tiles * n_steps); }
};

/* Plans the schedule of an (m, n, k) problem in token tile tpw on `blocks`
 * persistent blocks (tile_cfg<tpw, bx>), kks k16 tiles per stage (4 for the weight-only kernel's
 * k64 stages, 8 for the W4A8 kernel's k128): when `tail` allows it and there
 * is more than one stage to share, the last round of whole tiles is shared along K if it
 * would keep fewer than 7/8 of the blocks busy; so are all the tiles when
 * there are fewer than 7/8 as many as blocks. */
inline wg_sched plan_sched(int m, int n, int k, int tpw, int bx, int kks, int blocks, bool tail)
{
    const int chunks = 2 * tpw;
    wg_sched sc;
    sc.tiles_m = (m + bx - 1) / bx;
    sc.tiles = sc.tiles_m * ((n / 64 + chunks - 1) / chunks);
    sc.n_steps = (k / 16 + kks - 1) / kks;
    sc.grid = sc.tiles < blocks ? sc.tiles : blocks;
    sc.dp_tiles = sc.tiles;
    sc.sk_tiles = 0;
    sc.sk_grid = 1;
    if (!tail || sc.n_steps < 2) return sc;
    if (sc.tiles < blocks) {
        /* Fewer tiles than blocks: all of them shared along K by every block. */
        if (sc.tiles * 8 < blocks * 7 && (int64_t)blocks * sc.tiles * sc.n_steps < ((int64_t)1 << 31)) {
            sc.grid = blocks;
            sc.dp_tiles = 0;
            sc.sk_tiles = sc.tiles;
            sc.sk_grid = sc.tiles * sc.n_steps < blocks ? sc.tiles * sc.n_steps : blocks;
        }
        return sc;
    }
    const int waves = sc.tiles / sc.grid, rem = sc.tiles - waves * sc.grid;
    if (rem > 0 && rem * 8 < sc.grid * 7 && (int64_t)sc.grid * rem * sc.n_steps < ((int64_t)1 << 31)) {
        sc.dp_tiles = waves * sc.grid;
        sc.sk_tiles = rem;
        sc.sk_grid = rem * sc.n_steps < sc.grid ? rem * sc.n_steps : sc.grid;
    }
    return sc;
}

/* A block's pieces of work in schedule order: its whole tiles, then its
 * units of the tail. Each piece is stages s0 .. s1 - 1 of tile `tile`; a tail
 * piece also names its tail tile (sk_t, else -1) and its ordinal j among the
 * block's tail pieces. */
struct wg_pieces {
    int tile, s0, s1, sk_t, j;
    int dp_next, x, end;
    __device__ wg_pieces(const wg_sched &sc, int b)
        : tile(0), s0(0), s1(0), sk_t(-1), j(-1), dp_next(b), x(sc.sk_tiles && b < sc.sk_grid ? sc.unit_start(b) : 0),
          end(sc.sk_tiles && b < sc.sk_grid ? sc.unit_start(b + 1) : 0)
    {
    }
    __device__ bool next(const wg_sched &sc)
    {
        if (dp_next < sc.dp_tiles) {
            tile = dp_next, s0 = 0, s1 = sc.n_steps, sk_t = -1;
            dp_next += sc.grid;
            return true;
        }
        if (x >= end) return false;
        sk_t = x / sc.n_steps;
        s0 = x - sk_t * sc.n_steps;
        s1 = end - x < sc.n_steps - s0 ? s0 + (end - x) : sc.n_steps;
        tile = sc.dp_tiles + sk_t;
        j++;
        x += s1 - s0;
        return true;
    }
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
 * the hardware applies the XOR of the swizzle to the full address.
 *
 * It comes in two halves: the low word, which alone depends on the tile's
 * address (its start-address field stays below 2^14 for every shared-memory
 * address, so adding 2 k for a tile k x 32 bytes on in the same rows never
 * carries out of it: a kernel makes it once per stage and adds to it), and
 * the whole descriptor from a low word. */
__device__ __forceinline__ uint32_t wg_desc_sw128_lo(const void *smem_tile)
{
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(smem_tile);
    return (addr & 0x3FFFF) >> 4 | 1u << 16;
}

__device__ __forceinline__ uint64_t wg_desc_sw128_from_lo(uint32_t lo)
{
    /* bits 32-45 (the stride) and 62-63 (the swizzle mode) in the high word */
    constexpr uint32_t hi = (uint32_t)(kSwizzleAtom >> 4) | 1u << 30;
    return (uint64_t)hi << 32 | lo;
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

/* The operand text of a register-A wgmma of N = 16, 32, 64, 128, 192 or 256: the
 * accumulator registers {%0..%(N/2 - 1)}, the A fragment's four registers,
 * then desc_b; and their constraints, d[0..N/2 - 1] read and written in
 * order with constraint C ("+f" for fp32, "+r" for int32 accumulators). */
#define WG_REGS16 "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12"
#define WG_REGS32                                                                                                    \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20"
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
#define WG_REGS256                                                                                                   \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "     \
    "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "      \
    "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, "      \
    "%65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "      \
    "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, "     \
    "%106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, "         \
    "%123, %124, %125, %126, %127}, "                                                                                \
    "{%128, %129, %130, %131}, %132"
#define WG_REGS192                                                                                                   \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "          \
    "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "           \
    "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "           \
    "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "           \
    "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "                                        \
    "{%96, %97, %98, %99}, %100"
#define WG_D8(C, o) C(d[o]), C(d[o + 1]), C(d[o + 2]), C(d[o + 3]), C(d[o + 4]), C(d[o + 5]), C(d[o + 6]), C(d[o + 7])
#define WG_D16(C) WG_D8(C, 0)
#define WG_D32(C) WG_D8(C, 0), WG_D8(C, 8)
#define WG_D64(C) WG_D8(C, 0), WG_D8(C, 8), WG_D8(C, 16), WG_D8(C, 24)
#define WG_D128(C) WG_D64(C), WG_D8(C, 32), WG_D8(C, 40), WG_D8(C, 48), WG_D8(C, 56)
#define WG_D192(C) WG_D128(C), WG_D8(C, 64), WG_D8(C, 72), WG_D8(C, 80), WG_D8(C, 88)
#define WG_D256(C) WG_D192(C), WG_D8(C, 96), WG_D8(C, 104), WG_D8(C, 112), WG_D8(C, 120)

/* N 32-bit words (1, 2 or a multiple of 4) from shared memory at src, in
 * loads of their whole size (src aligned to it), or zeros when !ok. */
template <int N>
__device__ __forceinline__ void ld_words(const unsigned char *src, bool ok, uint32_t *w)
{
    static_assert(N == 1 || N == 2 || N % 4 == 0, "one word, two or whole 16-byte vectors");
    if constexpr (N == 1) {
        w[0] = ok ? *reinterpret_cast<const uint32_t *>(src) : 0u;
    } else if constexpr (N == 2) {
        const uint2 v = ok ? *reinterpret_cast<const uint2 *>(src) : make_uint2(0, 0);
        w[0] = v.x, w[1] = v.y;
    } else {
#pragma unroll
        for (int q = 0; q < N / 4; q++) {
            const uint4 v = ok ? *reinterpret_cast<const uint4 *>(src + 16 * q) : make_uint4(0, 0, 0, 0);
            w[4 * q] = v.x, w[4 * q + 1] = v.y, w[4 * q + 2] = v.z, w[4 * q + 3] = v.w;
        }
    }
}

/* ---- the block's skeleton (device) ---- */

/* The block's shared memory (layout L: a wg_layout) and the thread's place:
 * the dynamic base rounded up to a swizzle atom in the shared address space
 * (smem, smem_addr: what the descriptors, the tensor-map copies and the
 * hardware's XOR see), the ring's barriers full[s] at full0 + 8 s and
 * empty[s] at empty0 + 8 s in the header, its stages from `ring` on. */
template <class L> struct wg_block {
    unsigned char *smem;
    uint32_t smem_addr, full0, empty0;
    unsigned char *ring;
    uint32_t ring_addr;
    int tid, lane, warp;

    __device__ __forceinline__ wg_block()
    {
        extern __shared__ __align__(16) unsigned char smem_raw[];
        const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);
        const uint32_t pad = (kSwizzleAtom - (raw_addr & (kSwizzleAtom - 1))) & (kSwizzleAtom - 1);
        smem = smem_raw + pad;
        smem_addr = raw_addr + pad;
        full0 = smem_addr, empty0 = smem_addr + 8 * L::stages;
        ring = smem + L::header;
        ring_addr = smem_addr + L::header;
        tid = threadIdx.x;
        lane = tid & 31;
        warp = tid >> 5;
    }

    /* Thread 0 makes the barriers (full: the producer's one arrival and the
     * copies' bytes; empty: one arrival per consumer thread), and the block
     * waits until they are made. */
    __device__ __forceinline__ void init_ring() const
    {
        if (tid == 0) {
            for (int s = 0; s < L::stages; s++) {
                mbar_init(full0 + 8 * s, 1);
                mbar_init(empty0 + 8 * s, 32 * kConsumerWarps);
            }
            mbar_fence_init();
        }
        __syncthreads();
    }

    /* Whether the stream-K part of this block's tail piece j arrived last
     * (wg_streamk_sum): one flag per tail piece (a block has at most two),
     * so that no flag is written again while a consumer may still read it;
     * in the header, after the barriers. */
    __device__ __forceinline__ volatile int *last_flags() const
    {
        return reinterpret_cast<volatile int *>(smem + 512);
    }
};

/* A walk over the S slots of the ring, the producer's or the consumers': the
 * slot of the next stage and the parity of the pass over the ring it is in. */
template <int S> struct wg_ring_pos {
    uint32_t slot = 0, phase = 0;
    __device__ __forceinline__ void advance()
    {
        if (++slot == S) slot = 0, phase ^= 1;
    }
};

/* Where the producer put one stage: the slot's shared address and its full
 * barrier. */
struct wg_stage_at {
    uint32_t st, bar;
};

/* The producer's part of stage `step` (KS k16 rows of 16-bit or 8-bit
 * activations: 16 KS elements, 128 bytes, of each token) of the tile whose
 * tokens start at m0 and whose weights at element w_x (8 bytes) of a k16 row,
 * its k16 rows counted from row w_row0 of the weights' map (the grouped
 * GEMM's expert; 0 elsewhere): waits until ring slot pos.slot is free, announces the stage's tx bytes on
 * its full barrier and copies the tile's activations and its weights' n_seg
 * segments into it. The kernel then copies its own operands of the stage
 * (its scales) to the place returned. */
template <class L, int KS>
__device__ __forceinline__ wg_stage_at wg_stage_in(const wg_block<L> &b, const wg_ring_pos<L::stages> &pos,
                                                   uint32_t tx, const CUtensorMap *a_map,
                                                   const CUtensorMap *w_map, int step, int m0, int w_x,
                                                   int w_row0 = 0)
{
    mbar_wait(b.empty0 + 8 * pos.slot, pos.phase ^ 1);
    const wg_stage_at at = {b.ring_addr + pos.slot * L::bytes, b.full0 + 8 * pos.slot};
    mbar_arrive_tx(at.bar, tx);
    tma_load_2d(at.st + L::a_off, a_map, step * (KS * 16), m0, at.bar);
#pragma unroll
    for (int j = 0; j < L::n_seg; j++)
        tma_load_2d(at.st + L::w_off + j * KS * L::seg_bytes, w_map, w_x + j * (L::seg_bytes / 8),
                    w_row0 + step * KS, at.bar);
    return at;
}

/* The consumers' walk over the ring (S slots; barriers full[s] at full0 +
 * 8 s, empty[s] at empty0 + 8 s): each stage of a tile is waited for (wait),
 * read by the warpgroup's wgmma groups and then held (hold) until those
 * groups have completed: the kernel gives it back (release_held) once the
 * next stage's first groups have waited for them, or the tile's end
 * (finish) does. `pend` is the slot held, -1 none. A warpgroup with nothing
 * to compute gives each stage back at once (skip). pos.advance() moves to
 * the next stage. */
template <int S> struct wg_ring_reader {
    uint32_t full0, empty0;
    wg_ring_pos<S> pos;
    int pend;

    __device__ __forceinline__ wg_ring_reader(uint32_t full, uint32_t empty) : full0(full), empty0(empty), pend(-1) {}
    __device__ __forceinline__ void wait() const { mbar_wait(full0 + 8 * pos.slot, pos.phase); }
    __device__ __forceinline__ void release_held()
    {
        if (pend >= 0) {
            mbar_arrive(empty0 + 8 * pend);
            pend = -1;
        }
    }
    /* The stage just issued is held; the one held before it (a stage too
     * short to release it) goes back once every group has completed. */
    __device__ __forceinline__ void hold()
    {
        if (pend >= 0) {
            wg_wait<0>();
            mbar_arrive(empty0 + 8 * pend);
        }
        pend = (int)pos.slot;
    }
    __device__ __forceinline__ void skip() const { mbar_arrive(empty0 + 8 * pos.slot); }
    /* After a tile's last stage: every group completed, the stage held
     * given back, none held for the next tile. */
    __device__ __forceinline__ void finish()
    {
        wg_wait<0>();
        if (pend >= 0) mbar_arrive(empty0 + 8 * pend);
        pend = -1;
    }
};

/* A consumer thread's place (thread ct, 0..255, of the two consumer
 * warpgroups): its warpgroup wgi, its warp's chunk chunk_l of the block's
 * 2 TPW, and the first q0 of the warp's TPW quarter-chunks (m64 tile i takes
 * n8 tiles 2 (q0 + i) and 2 (q0 + i) + 1 of the chunk). */
template <int TPW> struct wg_consumer {
    int ct, lane, wgi, chunk_l, q0;
    __device__ __forceinline__ wg_consumer(int tid, int warp, int lane_)
        : ct(tid), lane(lane_), wgi(warp >> 2), chunk_l(warp * TPW / 4), q0(warp * TPW % 4)
    {
    }
};

/* Tile `tile` of the schedule as a consumer thread sees it: its first token
 * m0 and first chunk c0; whether the thread's warpgroup has a chunk inside N
 * (wg_active: uniform over the warpgroup, as wgmma requires; a warpgroup
 * wholly past N computes and writes nothing) and whether its warp's chunk
 * does (chunk_ok: else the warp feeds zeros). */
struct wg_tile {
    int m0, c0;
    bool wg_active, chunk_ok;
};

template <int TPW, int BX>
__device__ __forceinline__ wg_tile wg_tile_at(int tile, int tiles_m, int n_chunks, const wg_consumer<TPW> &th)
{
    using C = tile_cfg<TPW, BX>;
    wg_tile t;
    t.m0 = tile % tiles_m * C::bx;
    t.c0 = tile / tiles_m * C::chunks;
    t.wg_active = t.c0 + TPW * th.wgi < n_chunks;
    t.chunk_ok = t.c0 + th.chunk_l < n_chunks;
    return t;
}

/* A tail piece that is not its whole tile is one of the tile's parts
 * (computed before the accumulators fill the registers): the first part's
 * block, the number of parts (0: the piece is no part), and whether the first
 * part is its block's second piece (its units start in the tile before). */
struct wg_part {
    int first, parts, j0;
};

__device__ __forceinline__ wg_part wg_part_of(const wg_sched &sc, const wg_pieces &pc)
{
    wg_part pt = {0, 0, 0};
    if (pc.sk_t >= 0 && (pc.s0 > 0 || pc.s1 < sc.n_steps)) {
        const int u0 = pc.sk_t * sc.n_steps;
        pt.first = sc.owner(u0);
        pt.parts = sc.owner(u0 + sc.n_steps - 1) - pt.first + 1;
        pt.j0 = sc.unit_start(pt.first) < u0 ? 1 : 0;
    }
    return pt;
}

/* cuTensorMapEncodeTiled, a driver function, found through the runtime so
 * that nothing links libcuda directly; looked up once. */
qv_status encode_fn(PFN_cuTensorMapEncodeTiled_v12000 *fn)
{
    static PFN_cuTensorMapEncodeTiled_v12000 cached = NULL;
    if (!cached) {
        void *f = NULL;
        cudaDriverEntryPointQueryResult q;
        /* 12000: the CUDA 12.0 signature of the function. */
        QV_CUDA_TRY(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q),
                    "cudaGetDriverEntryPointByVersion (cuTensorMapEncodeTiled)");
        if (q != cudaDriverEntryPointSuccess || !f)
            return qv_fail(QV_ERR_CUDA, "the driver has no cuTensorMapEncodeTiled (needs CUDA 12 or later)");
        cached = (PFN_cuTensorMapEncodeTiled_v12000)f;
    }
    *fn = cached;
    return QV_OK;
}

/* A 2D tensor map over `base`: dim0 elements of `elem` bytes per row (x,
 * innermost), dim1 rows `stride` bytes apart, read in boxes of box0 x box1;
 * elements out of range read as zeros and count toward the copy's bytes.
 * `what` names the operand in a failure. */
qv_status make_map_2d(CUtensorMap *map, const void *base, CUtensorMapDataType type, int elem, uint64_t dim0,
                      uint64_t dim1, uint64_t stride, uint32_t box0, uint32_t box1, CUtensorMapSwizzle swz,
                      const char *what)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    QV_TRY(encode_fn(&encode));
    const cuuint64_t dims[2] = {(cuuint64_t)dim0, (cuuint64_t)dim1};
    const cuuint64_t strides[1] = {(cuuint64_t)stride};
    const cuuint32_t box[2] = {box0, box1};
    const cuuint32_t elem_strides[2] = {1, 1};
    CUresult r = encode(map, type, 2, const_cast<void *>(base), dims, strides, box, elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, swz, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return qv_fail(QV_ERR_CUDA, "cuTensorMapEncodeTiled (%s: %llu x %llu elements of %d bytes, box %u x %u): "
                       "error %d", what, (unsigned long long)dim1, (unsigned long long)dim0, elem, box1, box0,
                       (int)r);
    return QV_OK;
}

/* ---- the host's plan: block count, tile and switches -------------------- */

/* The persistent grid is planned on one block per SM of the device
 * (qv_launch_ctx.sms), so the schedule, and with it the workspace size, is a
 * function of the shape and the SM count (a device with other SMs runs the
 * same schedule: no block ever waits for another). The options' *_blocks
 * field (tests) plans 1 to kMaxBlocks blocks instead (the counters area's
 * size), and the device's count is capped there. */
constexpr int kMaxBlocks = QV_WG_BLOCKS_MAX;

/* The blocks an (m, n, k) schedule is planned on: `blocks` (an options
 * field, 0 unset) or the device's SMs, at most kMaxBlocks. */
inline int plan_blocks(const qv_launch_ctx &c, int blocks)
{
    if (blocks) return blocks;
    return c.sms < kMaxBlocks ? c.sms : kMaxBlocks;
}

/* The block tiles (tile_cfg), columns x tokens, by name, in the order of
 * qv_wg_tile (kTiles[t - 1] is tile t). */
struct tile_form {
    const char *name;
    int tpw, bx;
};
constexpr tile_form kTiles[] = {{"128x256", 1, 256}, {"256x128", 2, 128}, {"128x128", 1, 128}, {"512x64", 4, 64},
                                {"128x64", 1, 64},   {"512x32", 4, 32},   {"128x32", 1, 32},   {"512x16", 4, 16},
                                {"128x16", 1, 16}};
/* Both kernels have all nine. */
constexpr int kNTiles = (int)(sizeof kTiles / sizeof kTiles[0]);
static_assert(kNTiles == QV_WG_TILE_COUNT - 1, "one tile per qv_wg_tile");

/* The schedule of an (m, n, k) problem in tile t with kks k16 tiles per
 * stage, on plan_blocks(c, blocks) blocks, with the stream-K tail unless
 * streamk is QV_OPT_OFF (for comparisons). */
wg_sched plan_grid(const qv_launch_ctx &c, int blocks, int streamk, int m, int n, int k, const tile_form &t, int kks)
{
    return plan_sched(m, n, k, t.tpw, t.bx, kks, plan_blocks(c, blocks), streamk != QV_OPT_OFF);
}

/* Both kernels' default tile for (m, n, k), with kks k16 tiles per stage,
 * on `blocks` planned blocks: the token count that holds m (16 up to M = 16,
 * 32 up to 32, 64 up to 64, 128 up to 128, else 256: on the H200, 256 is the
 * fastest from M = 256, and the 64- and 128-token tiles are much faster than
 * 256 at M = 64 and 128) in its wide form (512x16, 512x32, 512x64, 256x128,
 * 128x256), unless that form has fewer tiles than 7/8 of the blocks and
 * gives each block fewer than narrow_stages stages of work (tiles x stages <
 * narrow_stages x blocks): then the narrow form (128x16, 128x32, 128x64,
 * 128x128, 128x128), with two or four times the tiles and so fewer parts per
 * tile in the stream-K tail, whose partial sums (up to 128 KiB a part)
 * dominate small layers. Each kernel's narrow_stages is in the tuning
 * table. */
int tile_default(int m, int n, int k, int kks, int narrow_stages, int blocks)
{
    int wide = m <= 64 ? 3 : m <= 128 ? 1 : 0, narrow = m <= 64 ? 4 : 2;
    if (m <= 32) wide = m <= 16 ? 7 : 5, narrow = wide + 1;
    const tile_form &w = kTiles[wide];
    const int64_t tiles = (int64_t)((m + w.bx - 1) / w.bx) * ((n / 64 + 2 * w.tpw - 1) / (2 * w.tpw));
    const int64_t steps = ((int64_t)k / 16 + kks - 1) / kks;
    return tiles * 8 < (int64_t)blocks * 7 && tiles * steps < (int64_t)narrow_stages * blocks ? narrow : wide;
}

/* The tile index into kTiles: the options' `tile` (qv_wg_tile), or unset,
 * tile_default on one block per SM (whatever blocks the options plan the
 * grid on). */
int tile_pick(const qv_launch_ctx &c, qv_wg_tile tile, int m, int n, int k, int kks, int narrow_stages)
{
    if (tile != QV_WG_TILE_DEFAULT) return (int)tile - 1;
    return tile_default(m, n, k, kks, narrow_stages, plan_blocks(c, 0));
}

/* Launches kernel K on the persistent grid: sc.grid blocks of kThreads
 * threads with smem bytes of dynamic shared memory (allowed at K's first
 * launch), as a programmatic dependent of the kernel in front in the stream
 * when pdl (its blocks set up their ring while the last blocks in front
 * finish, then wait for them: griddepcontrol.wait). attr_what and
 * launch_what name the two steps in a failure. */
template <auto K, class... Args>
qv_status wg_launch(const wg_sched &sc, int smem, bool pdl, cudaStream_t stream, const char *attr_what,
                    const char *launch_what, const Args &...args)
{
    static std::atomic<uint64_t> attr_dev(0); /* the devices its attributes are set on */
    QV_TRY(qv_func_attr_once(attr_dev, [&]() -> qv_status {
        QV_CUDA_TRY(cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), attr_what);
        return QV_OK;
    }));
    return qv_launch_pdl(K, dim3((unsigned)sc.grid), dim3(kThreads), (size_t)smem, stream, pdl, launch_what, args...);
}

} /* namespace */

#endif
