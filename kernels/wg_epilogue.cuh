/* wg_epilogue.cuh: the end of a tile in the two persistent wgmma kernels
 * (kernels/wonly_wg.cu, fp32 accumulators; kernels/qqq_wg.cu, int32), which
 * include it after wg_common.cuh: the stream-K sum of a tail tile's parts
 * and the epilogue's stores. Rule: the order of the sums and every barrier,
 * fence and store are here; how an accumulator becomes an output is the
 * kernel's epilogue policy (below), which also holds its mutant switches. */
#ifndef QVET_KERNELS_WG_EPILOGUE_CUH
#define QVET_KERNELS_WG_EPILOGUE_CUH

#include <stdint.h>

#include "async_copy.cuh"
#include "wg_common.cuh"

namespace {

/* Four accumulators as one 16-byte vector: float4 for fp32, int4 for int32. */
template <class T> struct wg_acc4;

template <> struct wg_acc4<float> {
    using V = float4;
    static __device__ __forceinline__ V make(float x, float y, float z, float w) { return make_float4(x, y, z, w); }
};

template <> struct wg_acc4<int> {
    using V = int4;
    static __device__ __forceinline__ V make(int x, int y, int z, int w) { return make_int4(x, y, z, w); }
};

/* Stream-K: the end of a piece that is a part of a tail tile (pt.parts > 0,
 * wg_part_of). Each consumer thread ct writes its accumulators to the part's
 * slot of p.partial (2 b + j for block b's j-th tail piece, kTileFloats
 * words a slot) 16 bytes at a time, vector q at q x 256 + ct, so that every
 * block's thread ct holds the same elements. The block whose part arrives
 * last (the tile's arrival counter in p.counters; its last-arrival flag,
 * wg_block::last_flags) reads every part back, its own included, and adds
 * them in part order, ((p0 + p1) + p2) + ... whoever adds them (exact in
 * int32), then zeroes the counter for the next launch. Part i lives in block
 * pt.first + i's slot: its first tail piece, except that part 0 is its
 * block's second piece when that block's units start in the tile before
 * (pt.j0). E::parts_summed(parts) parts are added. Returns whether this
 * block now holds the tile's sum in acc and writes the tile. (Part 0 and the
 * others are two loops: one loop with a select per element made ptxas spill
 * the accumulators.) */
template <class E, int TPW, int BX, class T, class P, class L>
__device__ __forceinline__ bool wg_streamk_sum(T (&acc)[TPW][BX / 2], const P &p, const wg_block<L> &b,
                                               const wg_pieces &pc, const wg_part &pt, int ct)
{
    using V = typename wg_acc4<T>::V;
    volatile int *last_flags = b.last_flags();
    const int parts = pt.parts;
    V *slot_mine = reinterpret_cast<V *>(p.partial + (int64_t)(2 * blockIdx.x + pc.j) * kTileFloats);
    constexpr int kQ = BX / 8; /* vectors per m64 tile */
#pragma unroll
    for (int q = 0; q < TPW * kQ; q++)
        slot_mine[q * 256 + ct] = wg_acc4<T>::make(acc[q / kQ][4 * (q % kQ)], acc[q / kQ][4 * (q % kQ) + 1],
                                                   acc[q / kQ][4 * (q % kQ) + 2], acc[q / kQ][4 * (q % kQ) + 3]);
    __threadfence();
    consumers_bar();
    if (ct == 0) last_flags[pc.j] = atomicAdd(&p.counters[pc.sk_t], 1) == parts - 1;
    consumers_bar();
    if (!last_flags[pc.j]) return false;
    __threadfence();
    const V *src0 = reinterpret_cast<const V *>(p.partial) + ct;
    const int n_sum = E::parts_summed(parts);
#pragma unroll 1
    for (int i = 0; i < n_sum; i++) {
        const int slot_i = i == 0 ? 2 * pt.first + pt.j0 : 2 * (pt.first + i);
        const V *src = src0 + (int64_t)slot_i * (kTileFloats / 4);
        if (i == 0) {
#pragma unroll
            for (int q = 0; q < TPW * kQ; q++) {
                const V v = __ldcg(src + q * 256);
                acc[q / kQ][4 * (q % kQ)] = v.x, acc[q / kQ][4 * (q % kQ) + 1] = v.y;
                acc[q / kQ][4 * (q % kQ) + 2] = v.z, acc[q / kQ][4 * (q % kQ) + 3] = v.w;
            }
        } else {
#pragma unroll
            for (int q = 0; q < TPW * kQ; q++) {
                const V v = __ldcg(src + q * 256);
                acc[q / kQ][4 * (q % kQ)] += v.x, acc[q / kQ][4 * (q % kQ) + 1] += v.y;
                acc[q / kQ][4 * (q % kQ) + 2] += v.z, acc[q / kQ][4 * (q % kQ) + 3] += v.w;
            }
        }
    }
    if (ct == 0) p.counters[pc.sk_t] = 0;
    return true;
}

/* The column of a chunk (0..63) and of the output that row 8 h + lane / 4
 * of the lane's m64 tile i (h 0 or 1) stands for, in tile t. */
template <int TPW> __device__ __forceinline__ int wg_chunk_col(const wg_consumer<TPW> &th, int i, int h)
{
    return 16 * (th.q0 + i) + 8 * h + (th.lane >> 2);
}
template <int TPW>
__device__ __forceinline__ int wg_out_col(const wg_tile &t, const wg_consumer<TPW> &th, int i, int h)
{
    return (t.c0 + th.chunk_l) * 64 + wg_chunk_col(th, i, h);
}

/* The direct form's rows of a policy whose token tok is row tok of its
 * output. */
struct wg_rows_identity {
    struct rows_t {};
    __device__ __forceinline__ rows_t direct_rows(int, int) const { return {}; }
    __device__ __forceinline__ int direct_row(const rows_t &, int, int tok) const { return tok; }
};

/* An epilogue policy E says what differs between the kernels: its
 * accumulator type acc_t (float or int) and
 *   kSwizzled, kReadWait    static constexpr bools, true but in the mutants
 *                           (mutants/) that stage the rows without the
 *                           128-byte swizzle or reuse the staging area
 *                           before the stores have read it; the switches sit
 *                           in the kernel file, so that one compiled in
 *                           changes that kernel alone;
 *   parts_summed(parts)     static: the stream-K parts added (parts);
 *   col_scale(ok, col)      the staged form's factor of column col (ok: the
 *                           warp's chunk lies inside N);
 *   token_scales(ts, tok0, tq)  the staged round's factors of the lane's
 *                           tokens tok0 + 8 jb + 2 tq + e as ts[jb][e] (a
 *                           policy without token scales leaves ts unset and
 *                           never reads it);
 *   pack(a0, a1, s, ts[jb]) the outputs of tokens 2 tq and 2 tq + 1 of block
 *                           jb in one column as a pair of 16-bit codes;
 *   col_t direct_col(col, even), direct_scale(s, y0, y1),
 *   direct_store(s, row, cp, even, y0, y1, recv)
 *                           the direct form: a column's factors, what
 *                           applies before the exchange with lane ^ 4, and
 *                           the store of a token's outputs in columns cp
 *                           and cp + 1 of its output row `row`;
 *   rows_t direct_rows(m0, lane), direct_row(rows, j, tok)
 *                           that row: direct_rows reads what the tile's
 *                           rows need once per tile (every lane of the
 *                           warp, before any store), direct_row gives
 *                           token tok's (of block j: tok - m0 = 8 j + tok
 *                           % 8) and is called by every lane of the warp,
 *                           tok past M included (wg_rows_identity: row tok
 *                           of C).
 *
 * The epilogue of tile t (m rows of C in all, n_chunks 64-column chunks):
 * row 16 w + lane/4 (+8) of m64 tile i is column 64 chunk + 16 (q0 + i) +
 * lane/4 (+8), and accumulator 4 j + 2 h + e holds token 8 j + 2 (lane%4) + e.
 *
 * With C 16-byte aligned (c_tma), through the staging area, in rounds of R
 * tokens: each warp writes its 16 TPW columns of the round's tokens there as
 * 8 x 8 matrices (stmatrix, transposed: the accumulators of one column and 8
 * tokens become 8 tokens' rows of 8 columns), each 64-column chunk as R rows
 * of 128 bytes on the 128-byte swizzle (16-byte unit u of row r at u ^ (r %
 * 8): conflict-free), then, after a barrier of both consumer warpgroups, one
 * thread of each stores its chunks with the tensor map c_map (rows past M
 * and chunks past N are not written) and the warpgroups go on while the copy
 * engine writes. (Both warpgroups take the same barriers, one wholly past N
 * included: with a barrier per warpgroup, compute-sanitizer's racecheck
 * reported the stream-K flag's barrier-ordered write and read as a race
 * where the two diverged.) Matrix mat of a round is token block jb = mat /
 * (2 TPW), m64 tile i = mat / 2 % TPW and column half h = mat % 2, its
 * columns 16 (q0 + i) + 8 h + 0..7 of the warp's chunk: 16-byte unit
 * 2 (q0 + i) + h of a staged row.
 *
 * Else by direct stores: lanes lane and lane ^ 4 hold neighbouring columns
 * of the same tokens; after one exchange, the even-column lane stores both
 * columns of its even token and the odd-column lane both of its odd token,
 * as one 4-byte word each. */
template <int TPW, int BX, class L, class E>
__device__ __forceinline__ void wg_epilogue(const E &epi, typename E::acc_t (&acc)[TPW][BX / 2],
                                            const wg_block<L> &b, const wg_consumer<TPW> &th, const wg_tile &t,
                                            int m, int n_chunks, bool c_tma, const CUtensorMap *c_map)
{
    using C = tile_cfg<TPW, BX>;
    using A = typename E::acc_t;
    if (c_tma) {
        constexpr int R = L::epi_rows, kRounds = C::bx / R, kMats = R / 8 * 2 * TPW;
        static_assert(kMats % 4 == 0, "whole stmatrix.x4 groups");
        const uint32_t epi_wg = b.smem_addr + L::epi_off + TPW * th.wgi * L::epi_chunk_bytes;
        const uint32_t epi_warp = b.smem_addr + L::epi_off + th.chunk_l * L::epi_chunk_bytes;
        const bool lead = (th.ct & 127) == 0;
        const int tq = th.lane & 3;
        float cs[TPW][2];
#pragma unroll
        for (int i = 0; i < TPW; i++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                cs[i][h] = epi.col_scale(t.chunk_ok, wg_out_col(t, th, i, h));
#pragma unroll
        for (int r = 0; r < kRounds; r++) {
            if (t.m0 + r * R >= m) break; /* the tile's rows past M (uniform over the block) */
            float ts[R / 8][2];
            epi.token_scales(ts, t.m0 + r * R, tq);
            /* The area is free once the stores of the round (or tile) before
             * have read it. */
            if (lead && E::kReadWait) bulk_wait_read<0>();
            consumers_bar();
            if (t.wg_active) { /* a warpgroup wholly past N writes nothing */
#pragma unroll
                for (int q = 0; q < kMats; q += 4) {
                    uint32_t v[4];
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int mat = q + e, jb = mat / (2 * TPW), i = mat / 2 % TPW, h = mat % 2;
                        const int j = r * (R / 8) + jb;
                        v[e] = epi.pack(acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1], cs[i][h], ts[jb]);
                    }
                    const int mat_l = q + (th.lane >> 3);
                    const int row = mat_l / (2 * TPW) * 8 + (th.lane & 7);
                    const int unit = 2 * (th.q0 + mat_l / 2 % TPW) + mat_l % 2;
                    stmatrix_x4_trans(epi_warp + row * 128 + ((E::kSwizzled ? unit ^ (th.lane & 7) : unit) << 4), v);
                }
            }
            fence_proxy_async();
            consumers_bar();
            if (lead && t.wg_active) {
#pragma unroll
                for (int c = 0; c < TPW; c++)
                    if (t.c0 + TPW * th.wgi + c < n_chunks)
                        tma_store_2d(c_map, (t.c0 + TPW * th.wgi + c) * 64, t.m0 + r * R,
                                     epi_wg + c * L::epi_chunk_bytes);
                bulk_commit();
            }
        }
        return;
    }
    if (!t.wg_active || !t.chunk_ok) return;

    const int gq = th.lane >> 2, tq = th.lane & 3;
    const bool even = (gq & 1) == 0;
    const typename E::rows_t rows = epi.direct_rows(t.m0, th.lane);
#pragma unroll
    for (int i = 0; i < TPW; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int col = wg_out_col(t, th, i, h);
            const typename E::col_t s = epi.direct_col(col, even);
#pragma unroll
            for (int j = 0; j < C::bx / 8; j++) {
                A y0 = acc[i][4 * j + 2 * h], y1 = acc[i][4 * j + 2 * h + 1];
                epi.direct_scale(s, y0, y1);
                const A recv = __shfl_xor_sync(0xFFFFFFFFu, even ? y1 : y0, 4);
                const int tok = t.m0 + 8 * j + 2 * tq + (even ? 0 : 1);
                const int cp = even ? col : col - 1;
                const int row = epi.direct_row(rows, j, tok);
                if (tok < m) epi.direct_store(s, row, cp, even, y0, y1, recv);
            }
        }
}

/* The epilogue of a tile of fp32 outputs (the grouped GEMM's: row s of C is
 * slot s's product) through the staging area and tensor-map stores, as the
 * 16-bit form of wg_epilogue: in rounds of R = L::epi_rows / 2 tokens, each
 * 64-column chunk staged as two halves of 32 floats, R rows of 128 bytes
 * each on the 128-byte swizzle (float c of row r at 16-byte unit (c / 4) ^
 * (r % 8), c_map's box: 32 columns x R rows), so that the area holds a round.
 * Each thread writes its outputs one float at a time: the 32 of one store,
 * tokens 2 (lane % 4) + e and columns lane / 4, fall in 32 different banks
 * through the swizzle. After a barrier of both consumer warpgroups, one
 * thread of each stores its halves (rows past M are not written, nor chunks
 * past N) and the warpgroups go on while the copy engine writes; the area is
 * rewritten once those stores have read it. The policy E gives kSwizzled
 * and kReadWait (as for wg_epilogue), direct_col and direct_scale (the
 * direct form's column factor and what applies to a token pair) and
 * store_col(col), the column of C where column col's box starts. */
template <int TPW, int BX, class L, class E>
__device__ __forceinline__ void wg_epilogue_f32(const E &epi, float (&acc)[TPW][BX / 2], const wg_block<L> &b,
                                                const wg_consumer<TPW> &th, const wg_tile &t, int m, int n_chunks,
                                                const CUtensorMap *c_map)
{
    constexpr int R = L::epi_rows / 2, kRounds = BX / R, kHalfB = R * 128;
    static_assert(2 * kHalfB == L::epi_chunk_bytes && R % 8 == 0, "a chunk's two halves of R rows fill its area");
    const uint32_t epi_wg = b.smem_addr + L::epi_off + TPW * th.wgi * L::epi_chunk_bytes;
    unsigned char *epi_warp = b.smem + L::epi_off + th.chunk_l * L::epi_chunk_bytes;
    const bool lead = (th.ct & 127) == 0;
    const int tq = th.lane & 3;
    float s[TPW][2];
#pragma unroll
    for (int i = 0; i < TPW; i++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            s[i][h] = epi.direct_col(wg_out_col(t, th, i, h), true);
#pragma unroll
    for (int r = 0; r < kRounds; r++) {
        if (t.m0 + r * R >= m) break; /* the tile's rows past M (uniform over the block) */
        /* The area is free once the stores of the round (or tile) before
         * have read it. */
        if (lead && E::kReadWait) bulk_wait_read<0>();
        consumers_bar();
        if (t.wg_active) { /* a warpgroup wholly past N writes nothing */
#pragma unroll
            for (int jb = 0; jb < R / 8; jb++) {
                const int j = r * (R / 8) + jb, row = 8 * jb + 2 * tq;
#pragma unroll
                for (int i = 0; i < TPW; i++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        float y0 = acc[i][4 * j + 2 * h], y1 = acc[i][4 * j + 2 * h + 1];
                        epi.direct_scale(s[i][h], y0, y1);
                        const int c = wg_chunk_col(th, i, h);
                        unsigned char *half = epi_warp + (c >> 5) * kHalfB + (c & 3) * 4;
                        const int u = (c & 31) >> 2, sw0 = E::kSwizzled ? row & 7 : 0;
                        const int sw1 = E::kSwizzled ? (row + 1) & 7 : 0;
                        *reinterpret_cast<float *>(half + row * 128 + ((u ^ sw0) << 4)) = y0;
                        *reinterpret_cast<float *>(half + (row + 1) * 128 + ((u ^ sw1) << 4)) = y1;
                    }
            }
        }
        fence_proxy_async();
        consumers_bar();
        if (lead && t.wg_active) {
#pragma unroll
            for (int c = 0; c < TPW; c++) {
                const int chunk = t.c0 + TPW * th.wgi + c;
                if (chunk < n_chunks)
#pragma unroll
                    for (int hh = 0; hh < 2; hh++)
                        tma_store_2d(c_map, epi.store_col(chunk * 64) + 32 * hh, t.m0 + r * R,
                                     epi_wg + c * L::epi_chunk_bytes + hh * kHalfB);
            }
            bulk_commit();
        }
    }
}

} /* namespace */

#endif
