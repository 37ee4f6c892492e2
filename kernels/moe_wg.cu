/* moe_wg.cu: the routed layer's grouped GEMM on Hopper's wgmma (sm_90a), for
 * prefill batches (gpu_moe.h, qv_moe_dev.wg): the weight-only kernel of
 * wonly_wg_kernel.cuh in its MOE instances, over the slots of the token sort
 * instead of the tokens.
 *
 *  - its A is the (max_slots, k) buffer of the slots' activations that
 *    moe_grouped.cu's k_moe_gather_slots wrote just before (act_order: in
 *    each expert's sorted-row order; zero rows for padding slots);
 *  - k_gemm_wonly_wgmma<..., MOE>: the persistent warp-specialized GEMM of
 *    that buffer (M = max_slots) with every expert's weights stacked in one
 *    tensor map: token tile y is expert block_expert[y]'s, whose k16 rows
 *    and group rows the producer copies at that expert's offset, and each
 *    slot's fp32 product (times the expert's channel, tensor or NVFP4
 *    global scale) goes to the slot's row of the combine's buffer, a
 *    tile's rows at a time through tensor-map stores (the combine finds a
 *    pair's row through the pair_slot index that the gather wrote; a
 *    padding slot's row is written and never read). The sort pads each
 *    expert's segment to the sort's block (64, 128 or 256: qv_moe_dev.mb
 *    4, 8 or 16);
 *  - paired (qv_moe_dev.pairs, 128-slot blocks): k_moe_tile_lists lists
 *    each expert's blocks two by two as 256-slot tiles and an odd last one
 *    as a 128-slot tile, and the GEMM runs once over each list; fitted
 *    (qv_moe_dev.fit, 64-slot blocks): four by four as 256-slot tiles and
 *    the last one to three as one tile of 64, 128 or 192 slots, four lists.
 *    The launches over the lists overlap (wg_params.pdl_order): each one
 *    after the first starts its tiles as the one in front frees SMs.
 * The arithmetic is the mma.sync grouped kernel's (moe_grouped.cu) and the
 * dense weight-only row's: the weights dequantized exactly as there,
 * products summed by the tensor cores in fp32, k16 by k16 in increasing k,
 * one accumulator per output (no split K); the same fp32 epilogue factor. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <string.h>

#include "internal/gpu_moe.h"
#include "internal/tuning.h"
#include "moe_common.cuh"
#include "wonly_wg_kernel.cuh"

namespace {

/* The kernel's tensor maps over the stacked experts (make_map_2d; bases
 * 16-byte aligned, rows multiples of 16 bytes: n % 64 == 0, k % 16 == 0):
 *  - A: the gathered slots (max_slots, k), boxes of 64 k x bx slots, the
 *    128-byte swizzle;
 *  - the packed weights: nx * k / 16 rows of n / 64 chunks (8-byte
 *    elements), boxes of kKs rows x one segment;
 *  - group scales: nx * (k / g) rows of n codes (as words), boxes of s_rows
 *    rows x bn codes. */
template <int WT, int TPW, int BX, bool GROUPED>
qv_status make_moe_maps(CUtensorMap *am, CUtensorMap *wm, CUtensorMap *sm, const wg_params &p, const void *a_slots,
                        int nx)
{
    using C = tile_cfg<TPW, BX>;
    using L = stage_layout<WT, TPW, BX, GROUPED>;
    QV_TRY(make_map_2d(am, a_slots, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (uint64_t)p.k, (uint64_t)p.m,
                       (uint64_t)p.k * 2, 64, C::bx, CU_TENSOR_MAP_SWIZZLE_128B, "gathered slots"));
    const uint64_t row = (uint64_t)(p.n / 64) * wt_traits<WT>::chunk_bytes;
    QV_TRY(make_map_2d(wm, p.b, CU_TENSOR_MAP_DATA_TYPE_UINT64, 8, row / 8, (uint64_t)nx * (uint64_t)(p.k / 16), row,
                       L::seg_bytes / 8, kKs, CU_TENSOR_MAP_SWIZZLE_NONE, "stacked packed weights"));
    if (GROUPED && p.s_rows > 0) {
        const uint64_t groups = (uint64_t)(p.k / 16) >> p.g_shift;
        const int eb = L::s_row / C::bn;
        QV_TRY(make_map_2d(sm, p.scales, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, (uint64_t)p.n * eb / 4,
                           (uint64_t)nx * groups, (uint64_t)p.n * eb, C::bn * eb / 4, (uint32_t)p.s_rows,
                           CU_TENSOR_MAP_SWIZZLE_NONE, "stacked group scales"));
    }
    return QV_OK;
}

/* tiles_m: the schedule's token tiles (p.m / BX rounded up without a tile
 * list, the list's capacity with one). */
template <int WT, bool BF, int TPW, int BX, int SM>
qv_status launch_moe(const wg_params &p, const wg_moe &mo, const void *a_slots, int sms, int tiles_m,
                     cudaStream_t stream)
{
    constexpr bool GROUPED = SM != SM_NONE;
    constexpr int smem = stage_layout<WT, TPW, BX, GROUPED>::total;
    static_assert(smem <= kSmemMax, "the ring fits one block's shared memory");
    using L = stage_layout<WT, TPW, BX, GROUPED>;
    CUtensorMap am, wm, sm, cm, none;
    memset(&sm, 0, sizeof sm);
    memset(&none, 0, sizeof none);
    QV_TRY((make_moe_maps<WT, TPW, BX, GROUPED>(&am, &wm, &sm, p, a_slots, mo.nx)));
    /* The products (max_slots, n) fp32, written in boxes of 32 columns x
     * half a staging round's rows (wg_epilogue_f32). */
    QV_TRY(make_map_2d(&cm, p.c, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, (uint64_t)p.n, (uint64_t)p.m, (uint64_t)p.n * 4,
                       32, L::epi_rows / 2, CU_TENSOR_MAP_SWIZZLE_128B, "products by slot"));
    /* Whole tiles on one block per SM (a stream-K tail would need the tile
     * count, which only the device's sort knows). */
    const wg_sched sc = plan_sched(tiles_m * BX, p.n, p.k, TPW, BX, kKs, sms, false);
    return wg_launch<k_gemm_wonly_wgmma<WT, BF, TPW, BX, SM, true>>(
        sc, smem, true, stream, "cudaFuncSetAttribute (grouped wgmma GEMM shared memory)",
        "grouped wgmma GEMM launch", p, sc, am, wm, sm, none, cm, mo);
}

/* The instance of (kind, bf16, group or epilogue scales) in tile TPW x BX. */
template <bool BF, int TPW, int BX>
qv_status launch_kind(int kind, const wg_params &p, const wg_moe &mo, const void *a_slots, int sms, int tiles_m,
                      cudaStream_t stream)
{
    if (kind == QV_MOE_MXFP4)
        return launch_moe<WT_FP4_MX, BF, TPW, BX, SM_TILE>(p, mo, a_slots, sms, tiles_m, stream);
    if (kind == QV_MOE_NVFP4)
        return launch_moe<WT_FP4_NV, BF, TPW, BX, SM_TILE16>(p, mo, a_slots, sms, tiles_m, stream);
    if (p.scale_mode == SC_GROUP)
        return launch_moe<WT_INT4, BF, TPW, BX, SM_ROW>(p, mo, a_slots, sms, tiles_m, stream);
    return launch_moe<WT_INT4, BF, TPW, BX, SM_NONE>(p, mo, a_slots, sms, tiles_m, stream);
}

/* launch_kind of the activations' format (fp16 or bf16) in tile TPW x BX. */
template <int TPW, int BX>
qv_status launch_tile(bool bf16, int kind, const wg_params &p, const wg_moe &mo, const void *a_slots, int sms,
                      int tiles_m, cudaStream_t stream)
{
    return bf16 ? launch_kind<true, TPW, BX>(kind, p, mo, a_slots, sms, tiles_m, stream)
                : launch_kind<false, TPW, BX>(kind, p, mo, a_slots, sms, tiles_m, stream);
}

/* The tile lists of a launch in whole-expert tiles (qv_moe_dev.pairs, .fit),
 * from the sort's segments of 2^SHIFT-slot blocks: expert x's blocks PER at
 * a time as tiles of PER blocks in list 0, its last b_x % PER blocks (b_x
 * its blocks), when there are any, as one tile of that many blocks in list
 * b_x % PER; each list its count, then the tiles' first slots in slot
 * order. List 0 holds at most max_blocks / PER tiles, the others one per
 * expert (tile_list). One block; nx <= kSortExperts. */
constexpr int kListThreads = 256;

/* Where list l of those (k_moe_tile_lists<SHIFT, PER>) starts in the
 * workspace's tiles, in ints (l = per: past the last list). */
__host__ __device__ __forceinline__ int tile_list_at(int l, int per, int max_blocks, int nx)
{
    return l == 0 ? 0 : 1 + max_blocks / per + (l - 1) * (nx + 1);
}
__host__ __device__ __forceinline__ int *tile_list(int *tiles, int l, int per, int max_blocks, int nx)
{
    return tiles + tile_list_at(l, per, max_blocks, nx);
}

template <int SHIFT, int PER>
__global__ void __launch_bounds__(kListThreads) k_moe_tile_lists(const int *expert_start, int nx, int *tiles,
                                                                 int max_blocks)
{
    chain_release();
    chain_wait();
    static_assert(kListThreads == 256, "block_scan256 scans 256 threads");
    __shared__ int s_scan[PER][8];
    /* thread i takes experts [i * span, (i + 1) * span) */
    const int span = (nx + kListThreads - 1) / kListThreads, x0 = threadIdx.x * span;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int cnt[PER];
#pragma unroll
    for (int l = 0; l < PER; l++) cnt[l] = 0;
    for (int x = x0; x < x0 + span && x < nx; x++) {
        const int b = (expert_start[x + 1] - expert_start[x]) >> SHIFT;
        cnt[0] += b / PER;
#pragma unroll
        for (int l = 1; l < PER; l++) cnt[l] += b % PER == l;
    }
    int *list[PER];
#pragma unroll
    for (int l = 0; l < PER; l++) {
        list[l] = tile_list(tiles, l, PER, max_blocks, nx);
        int total;
        cnt[l] = block_scan256(cnt[l], s_scan[l], lane, warp, &total);
        if (threadIdx.x == 0) list[l][0] = total;
    }
    for (int x = x0; x < x0 + span && x < nx; x++) {
        const int s0 = expert_start[x], b = (expert_start[x + 1] - s0) >> SHIFT;
        for (int j = 0; j < b / PER; j++) list[0][1 + cnt[0]++] = s0 + (PER << SHIFT) * j;
#pragma unroll
        for (int l = 1; l < PER; l++)
            if (b % PER == l) list[l][1 + cnt[l]++] = s0 + (PER << SHIFT) * (b / PER);
    }
}

} /* namespace */

extern "C" int qv_moe_wg_tile_of(int tile, int tiles_m, int n_tiles, int block)
{
    return moe_raster(tile, tiles_m, n_tiles, kMoeBand / block);
}

extern "C" int qv_moe_tile_blocks(const qv_moe_dev *d) { return d->fit ? 4 : 2; }

extern "C" size_t qv_moe_tile_lists_ints(int per, int max_blocks, int nx)
{
    return (size_t)tile_list_at(per, per, max_blocks, nx);
}

extern "C" int qv_moe_wg_covers(const qv_moe_dev *d)
{
    if (d->kind == QV_MOE_MXFP4 || d->kind == QV_MOE_NVFP4)
        return d->scale_mode == SC_GROUP && !d->grp_single && !d->act_order && d->n % 64 == 0 &&
               d->k % (16 << d->g_shift) == 0;
    if (d->kind != QV_MOE_W4A16 || d->n < 64 || d->n % 64 || d->k < 16 || d->k % 16) return 0;
    /* Group scales of g >= 64 (one group row per k64 stage, SM_ROW) in
     * whole groups, or one group of K (grp_single: the tile's row read
     * directly); channel or tensor scales in the epilogue. g = 32 takes
     * the mma.sync kernel. */
    if (d->scale_mode == SC_GROUP && d->grp_single) return 1;
    if (d->scale_mode == SC_GROUP) return d->g_shift >= 2 && d->g_shift < 30 && d->k % (16 << d->g_shift) == 0;
    return d->scale_mode == SC_CHANNEL || d->scale_mode == SC_TENSOR;
}

extern "C" qv_status qv_moe_wg_gemm(const qv_moe_dev *d, const qv_moe_ws *w, void *stream_v)
{
    if (!qv_moe_wg_covers(d))
        return qv_fail(QV_ERR_UNSUPPORTED, "grouped wgmma GEMM: kind %d, scale mode %d, g_shift %d, n=%d k=%d is not "
                       "covered (the mma.sync kernel takes it)", d->kind, d->scale_mode, d->g_shift, d->n, d->k);
    if (w->block != 64 && w->block != 128 && w->block != 256)
        return qv_fail(QV_ERR_USAGE, "grouped wgmma GEMM: the sort's block is %d rows (64, 128 or 256)", w->block);
    if (d->pairs && w->block != 128)
        return qv_fail(QV_ERR_USAGE, "grouped wgmma GEMM: paired tiles need the sort's 128-slot blocks, not %d",
                       w->block);
    if (d->fit && d->pairs)
        return qv_fail(QV_ERR_USAGE, "grouped wgmma GEMM: fitted and paired tiles exclude each other");
    if (d->fit && w->block != 64)
        return qv_fail(QV_ERR_USAGE, "grouped wgmma GEMM: fitted tiles need the sort's 64-slot blocks, not %d",
                       w->block);
    /* The schedule's tile count (token tiles x column tiles) is an int. */
    if ((int64_t)(w->max_slots / 64) * (d->n / 64 + 1) >= ((int64_t)1 << 31))
        return qv_fail(QV_ERR_SHAPE, "grouped wgmma GEMM: %lld slots x n=%d is past the schedule's tile count",
                       (long long)w->max_slots, d->n);
    cudaStream_t stream = (cudaStream_t)stream_v;
    /* The device's SM count, asked once per device (tuning.h): one block
     * per SM. */
    qv_launch_ctx c;
    QV_TRY(qv_launch_ctx_get(NULL, &c));
    const int sms = c.sms;
    const int nx = d->e_local + d->shared;
    unsigned char *ws = (unsigned char *)d->workspace;
    const int *block_expert = (const int *)(ws + w->block_expert);
    const int *expert_start = (const int *)(ws + w->expert_start);
    uint16_t *a_slots = (uint16_t *)(ws + w->a_slots);

    wg_params p;
    memset(&p, 0, sizeof p);
    p.b = (const uint32_t *)d->b;
    p.scales = d->scales;
    p.m = (int)w->max_slots;
    p.n = d->n;
    p.k = d->k;
    p.scale_mode = d->scale_mode;
    p.scale_fmt = d->scale_mode == SC_TENSOR ? SF_F32 : d->bf16 ? SF_BF16 : SF_F16;
    p.grp_single = d->grp_single;
    p.g_shift = d->scale_mode == SC_GROUP && !d->grp_single ? d->g_shift : 0;
    p.s_rows = d->scale_mode == SC_GROUP && !d->grp_single ? kKs >> (p.g_shift < 2 ? p.g_shift : 2) : 0;
    p.pdl = 1;
    p.unbias_f32 = 1.0f;
    p.gscale = d->kind == QV_MOE_NVFP4 ? d->gscale : nullptr;
    p.c = ws + w->inter; /* the products, a row per slot (qv_moe_ws_plan) */
    p.c_tma = 1;
    wg_moe mo;
    mo.block_expert = block_expert;
    mo.expert_start = expert_start;
    mo.e_scales = d->scales;
    mo.e_stride = d->scale_mode == SC_TENSOR ? 1 : d->n;
    mo.nx = nx;
    mo.w_rows = d->k / 16;
    mo.s_rows_x = p.s_rows > 0 ? (d->k / 16) >> p.g_shift : 0;
    mo.tiles = nullptr;
    mo.blk_shift = w->block == 256 ? 8 : w->block == 128 ? 7 : 6;
    if (d->pairs || d->fit) {
        /* Whole-expert tiles: pairs, an expert's 128-slot blocks two by two
         * in 256-slot tiles (128 columns) and its odd last block in a
         * 128-slot tile (256 columns): each weight dequantized once per 256
         * slots where the expert fills them. fit, its 64-slot blocks four by
         * four in 256-slot tiles and its last one, two or three in a tile of
         * 64, 128 or 192 slots (512, 256 or 128 columns): an expert of 129
         * to 192 rows in one tile of 192 slots, not in two of 128. No tile
         * holds more padding than the sort's. The widest launch first, the
         * others behind it in the chain. */
        const int per = qv_moe_tile_blocks(d);
        int *tiles = (int *)(ws + w->tiles);
        QV_TRY(launch_chained(d->fit ? k_moe_tile_lists<6, 4> : k_moe_tile_lists<7, 2>, dim3(1),
                              dim3(kListThreads), 0, stream, "tile list launch", expert_start, nx, tiles,
                              w->max_blocks));
        wg_moe ml[4] = {mo, mo, mo, mo};
        for (int l = 0; l < per; l++) ml[l].tiles = tile_list(tiles, l, per, w->max_blocks, nx);
        const int cap0 = w->max_blocks / per > 0 ? w->max_blocks / per : 1;
        /* One run (pdl_order): each launch after the first starts its tiles
         * on the SMs the one in front frees. */
        wg_params first = p, next = p;
        first.pdl_order = 1;
        next.pdl_order = 2;
        QV_TRY((launch_tile<1, 256>(d->bf16, d->kind, first, ml[0], a_slots, sms, cap0, stream)));
        if (!d->fit) return launch_tile<2, 128>(d->bf16, d->kind, next, ml[1], a_slots, sms, nx, stream);
        QV_TRY((launch_tile<1, 192>(d->bf16, d->kind, next, ml[3], a_slots, sms, nx, stream)));
        QV_TRY((launch_tile<2, 128>(d->bf16, d->kind, next, ml[2], a_slots, sms, nx, stream)));
        return launch_tile<4, 64>(d->bf16, d->kind, next, ml[1], a_slots, sms, nx, stream);
    }
    const int tiles_m = (int)((w->max_slots + w->block - 1) / w->block);
    /* 256-slot tiles in 128 columns, 128-slot tiles in 256, 64-slot tiles
     * in 512 (the dense kernel's wide forms of those tokens): the wider in
     * slots, the fewer times each weight is dequantized per product, and
     * the more padding rows computed. */
    if (w->block == 256)
        return launch_tile<1, 256>(d->bf16, d->kind, p, mo, a_slots, sms, tiles_m, stream);
    if (w->block == 128)
        return launch_tile<2, 128>(d->bf16, d->kind, p, mo, a_slots, sms, tiles_m, stream);
    return launch_tile<4, 64>(d->bf16, d->kind, p, mo, a_slots, sms, tiles_m, stream);
}
