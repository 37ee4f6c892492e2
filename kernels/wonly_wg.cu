/* wonly_wg.cu: the weight-only GEMM family from M = 17 on Hopper (sm_90a):
 * the dense launches of the wgmma kernel (wonly_wg_kernel.cuh, whose comment
 * describes it), the act_order permutation of A in front of it, and the host
 * plan: tile, persistent schedule, tensor maps, workspace. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "async_copy.cuh"
#include "dequant.cuh"
#include "internal/gpu.h"
#include "qvet/gemm.h"
#include "func_attr.cuh"
#include "wg_common.cuh"
#include "wg_epilogue.cuh"
#include "wonly_common.cuh"
#include "wonly_small.cuh"
#include "wonly_wg.cuh"

#include "wonly_wg_kernel.cuh"

namespace {

/* act_order: out[i][j] = a[i][perm[j]], the activations in sorted-row order.
 * Each block stages `rows` whole rows of A in shared memory (A read once,
 * coalesced) and writes their permuted copies two columns at a time; a perm
 * entry outside [0, k) writes zeros (never a read outside the staged rows).
 * The rows come in by one bulk copy (BULK: every byte in flight at once;
 * the faster where blocks share the SMs over more than one wave) or by a
 * loop of 16-byte loads (the faster where each block has an SM to itself);
 * the host picks (launch_permute). One gather from global memory per
 * element would cost a 32-byte sector per 2 bytes. */
constexpr int kPermSmem = 200 * 1024; /* staged rows per block: at most this many bytes */
constexpr int kPermPair = 113 * 1024; /* staged bytes per block that let two blocks share an SM */
constexpr int kPermThreads = 1024;

template <bool BULK>
__global__ void __launch_bounds__(kPermThreads)
    k_wg_permute_rows(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k, int rows)
{
    extern __shared__ __align__(16) uint4 stage4[];
    __shared__ __align__(8) uint64_t full;
    const uint16_t *stage = reinterpret_cast<const uint16_t *>(stage4);
    /* The GEMM behind may launch now (its griddepcontrol.wait still waits
     * for this whole grid). */
    asm volatile("griddepcontrol.launch_dependents;\n" ::);
    const int i0 = blockIdx.x * rows;
    const int r_n = m - i0 < rows ? m - i0 : rows;
    /* k % 16 == 0 and A 16-byte aligned: the rows are one run of whole
     * 16-byte vectors, at most kPermSmem bytes (the host's rows). */
    if (BULK) {
        const uint32_t bar = (uint32_t)__cvta_generic_to_shared(&full);
        if (threadIdx.x == 0) {
            mbar_init(bar, 1);
            mbar_fence_init();
            const uint32_t bytes = (uint32_t)r_n * (uint32_t)k * 2u;
            mbar_arrive_tx(bar, bytes);
            bulk_copy_hint((uint32_t)__cvta_generic_to_shared(stage4), a + (int64_t)i0 * k, bytes, bar,
                           l2_evict_first());
        }
        __syncthreads();
        mbar_wait(bar, 0);
    } else {
        const int vecs = r_n * (k / 8);
        const uint4 *src = reinterpret_cast<const uint4 *>(a + (int64_t)i0 * k);
        for (int v = threadIdx.x; v < vecs; v += kPermThreads) stage4[v] = src[v];
        __syncthreads();
    }
    for (int j = 2 * threadIdx.x; j < k; j += 2 * kPermThreads) {
        const int2 pj = *reinterpret_cast<const int2 *>(perm + j);
        const bool ok0 = (unsigned)pj.x < (unsigned)k, ok1 = (unsigned)pj.y < (unsigned)k;
        for (int r = 0; r < r_n; r++) {
            const uint32_t lo = ok0 ? stage[r * k + pj.x] : 0u, hi = ok1 ? stage[r * k + pj.y] : 0u;
            *reinterpret_cast<uint32_t *>(out + (int64_t)(i0 + r) * k + j) = lo | hi << 16;
        }
    }
}

/* One instance of the permutation with `rows` rows per block, its shared
 * memory allowed once. */
template <bool BULK>
qv_status launch_permute_as(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k, int rows,
                            cudaStream_t stream)
{
    static std::atomic<uint64_t> attr_dev(0); /* the devices its attributes are set on */
    QV_TRY(qv_func_attr_once(attr_dev, [&]() -> qv_status {
        QV_CUDA_TRY(cudaFuncSetAttribute(k_wg_permute_rows<BULK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         kPermSmem),
                    "cudaFuncSetAttribute (act_order permutation shared memory)");
        return QV_OK;
    }));
    k_wg_permute_rows<BULK><<<(m + rows - 1) / rows, kPermThreads, (size_t)rows * (size_t)k * 2, stream>>>(
        a, perm, out, m, k, rows);
    QV_CUDA_TRY(cudaGetLastError(), "act_order column permutation launch");
    return QV_OK;
}

/* The permutation of A into out (m x k, the workspace): staged rows where a
 * row fits a block and perm is 8-byte aligned (the staged kernel reads two
 * entries at a time), else one gather per element (kernels/wonly.cu).
 * Rows per block: M over the `sms` SMs rounded up, one block per SM, loaded
 * by the loop; where those rows pass the stage's bytes, as many as let two
 * blocks share an SM (kPermPair), loaded by the bulk copy (faster there than
 * the loop on the H200). Both are at or near the fastest of the
 * configurations tools/probe-perm.cu sweeps, at every K of both models and
 * M = 64-1024. */
qv_status launch_permute(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k, int sms,
                         cudaStream_t stream)
{
    const int64_t row_bytes = (int64_t)k * 2;
    if (row_bytes > kPermSmem || ((uintptr_t)perm & 7) != 0)
        return wo_permute_cols_gather(a, perm, out, m, k, stream);
    const int rows = (m + sms - 1) / sms;
    if ((int64_t)rows * row_bytes <= kPermSmem) return launch_permute_as<false>(a, perm, out, m, k, rows, stream);
    const int fit = row_bytes <= kPermPair ? (int)(kPermPair / row_bytes) : 1;
    return launch_permute_as<true>(a, perm, out, m, k, fit, stream);
}

/* ---- host side ---- */

/* Whether the kernel covers the problem: every weight-only Marlin row that
 * qv_launch_wonly accepts (it checks the rest), N on the 64-column chunk and
 * K on the k16 tile, and a grid within CUDA's limits. The launch refuses
 * what it does not cover; the route table's wgmma row (src/gpu_routes.c)
 * states the same cover, so that no launch is refused here. */
bool covers(const qv_variant *v, int m, int n, int k)
{
    if (weight_type(v) < 0) return false;
    if ((v->afmt != QV_FMT_F16 && v->afmt != QV_FMT_BF16) || v->ofmt != v->afmt) return false;
    if (v->scale_layout != QV_SCALE_GROUP && v->scale_layout != QV_SCALE_CHANNEL &&
        v->scale_layout != QV_SCALE_TENSOR)
        return false;
    if (m < 1 || n < 64 || n % 64 || k < 16 || k % 16) return false;
    /* Group scales: one group row per stage (g >= 64) or per two k16 tiles
     * (g = 32, SM_TILE), or a single group; NVFP4's g = 16 one per k16 tile
     * (SM_TILE16); 16-bit scales of g = 16 (no registry row) take the mma
     * kernel. The FP4 rows' other terms (check_fp4) qv_launch_wonly checks. */
    if (v->scale_layout == QV_SCALE_GROUP && v->g < 32 && v->g != k && v->layout != QV_LAYOUT_MARLIN_FP4_NV)
        return false;
    /* N below 2^24, and the schedule's tile count (at most (m / 16) x
     * (n / 128), over every token tile) within an int. */
    return (n + 255) / 256 <= 65535 && ((int64_t)m + 15) / 16 * (n / 128 + 1) < ((int64_t)1 << 31);
}

/* The kernel's tensor maps (every base 16-byte aligned and every row a
 * multiple of 16 bytes, as the maps require: qv_launch_wonly checks the
 * bases, and n % 64 == 0, k % 16 == 0 give the rows):
 *  - A (m, k) 16-bit codes, boxes of 64 k (128 bytes, the 128-byte
 *    swizzle's row) x bx tokens;
 *  - the packed weights, k / 16 rows of n / 64 chunks, as 8-byte elements,
 *    boxes of kKs rows x one segment (stage_layout);
 *  - group scales (k / g, n) 16-bit as pairs, boxes of s_rows rows x bn / 2
 *    pairs (FP4: bytes as words of four, rows x bn / 4), and zero points (k / g, n / 8) words, s_rows rows x bn / 8 (only
 *    with group rows staged, s_rows > 0);
 *  - C (m, n) 16-bit codes, boxes of 64 columns (128 bytes) x epi_rows tokens
 *    with the 128-byte swizzle, for the epilogue's stores (only with C
 *    16-byte aligned, c_tma). */
struct wg_maps {
    CUtensorMap a, w, s, z, c;
};

template <int WT, int TPW, int BX, bool GROUPED>
qv_status make_maps(wg_maps *mp, const wg_params &p, const void *a)
{
    using C = tile_cfg<TPW, BX>;
    using L = stage_layout<WT, TPW, BX, GROUPED>;
    memset(mp, 0, sizeof *mp);
    QV_TRY(make_map_2d(&mp->a, a, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (uint64_t)p.k, (uint64_t)p.m,
                       (uint64_t)p.k * 2, 64, C::bx, CU_TENSOR_MAP_SWIZZLE_128B, "A"));
    const uint64_t row = (uint64_t)(p.n / 64) * wt_traits<WT>::chunk_bytes;
    QV_TRY(make_map_2d(&mp->w, p.b, CU_TENSOR_MAP_DATA_TYPE_UINT64, 8, row / 8, (uint64_t)(p.k / 16), row,
                       L::seg_bytes / 8, kKs, CU_TENSOR_MAP_SWIZZLE_NONE, "packed weights"));
    if (GROUPED && p.s_rows > 0) {
        const uint64_t groups = (uint64_t)(p.k / 16) >> p.g_shift;
        const int eb = L::s_row / C::bn; /* bytes per scale: 2, FP4 1 */
        QV_TRY(make_map_2d(&mp->s, p.scales, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, (uint64_t)p.n * eb / 4, groups,
                           (uint64_t)p.n * eb, C::bn * eb / 4, (uint32_t)p.s_rows, CU_TENSOR_MAP_SWIZZLE_NONE,
                           "group scales"));
        if (WT == WT_INT4_ZP)
            QV_TRY(make_map_2d(&mp->z, p.zeros, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, (uint64_t)p.n / 8, groups,
                               (uint64_t)p.n / 2, C::bn / 8, (uint32_t)p.s_rows, CU_TENSOR_MAP_SWIZZLE_NONE,
                               "zero points"));
    }
    if (p.c_tma)
        QV_TRY(make_map_2d(&mp->c, p.c, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (uint64_t)p.n, (uint64_t)p.m,
                           (uint64_t)p.n * 2, 64, L::epi_rows, CU_TENSOR_MAP_SWIZZLE_128B, "C"));
    return QV_OK;
}

/* The schedule and workspace layout of one problem: the counters area at 0
 * (every weight-only path keeps it there, zero between launches), act_order's
 * sorted copy of A, then the stream-K tail's partial slots. */
struct wg_plan {
    int tile; /* index into kTiles (qv_launch_opts.wo_wg_tile) */
    wg_sched sc;
    size_t aperm_off, partial_off, bytes;
};

/* The tile (the default's narrow form below the tuning table's stages of
 * k64 per block, from a sweep of every tile on the H200) and the schedule
 * the options give. */
wg_plan plan(const qv_launch_ctx &c, const qv_variant *v, int m, int n, int k)
{
    wg_plan pl;
    pl.tile = tile_pick(c, c.o->wo_wg_tile, m, n, k, kKs, c.t->wo_wg_narrow_stages);
    pl.sc = plan_grid(c, c.o->wo_wg_blocks, c.o->wo_wg_streamk, m, n, k, kTiles[pl.tile], kKs);
    size_t off = qv_wonly_counters_bytes(n);
    pl.aperm_off = off;
    if (v->act_order) off += align256((size_t)m * (size_t)k * 2);
    pl.partial_off = off;
    if (pl.sc.sk_tiles > 0) off += (size_t)2 * pl.sc.grid * kTileFloats * sizeof(float);
    pl.bytes = v->act_order || pl.sc.sk_tiles > 0 ? off : 0;
    return pl;
}

template <int WT, bool BF, int TPW, int BX, int SM>
qv_status launch_kernel(const wg_params &p, const wg_sched &sc, const void *a, cudaStream_t stream)
{
    constexpr bool GROUPED = SM != SM_NONE;
    constexpr int smem = stage_layout<WT, TPW, BX, GROUPED>::total;
    static_assert(smem <= kSmemMax, "the ring fits one block's shared memory");
    wg_maps mp;
    QV_TRY((make_maps<WT, TPW, BX, GROUPED>(&mp, p, a)));
    /* A programmatic dependent of the kernel in front (act_order: the
     * permutation kernel, which lets it launch as soon as its own blocks
     * run). */
    return wg_launch<k_gemm_wonly_wgmma<WT, BF, TPW, BX, SM>>(
        sc, smem, p.pdl != 0, stream, "cudaFuncSetAttribute (wgmma weight-only kernel shared memory)",
        "wgmma weight-only kernel launch", p, sc, mp.a, mp.w, mp.s, mp.z, mp.c, wg_moe{});
}

/* sm: SM_NONE, SM_ROW, SM_TILE or SM_TILE16 (launch_sm); FP4 only in its
 * one mode (MX: SM_TILE, NV: SM_TILE16), the others not in SM_TILE16. */
template <bool BF, int TPW, int BX, int SM>
qv_status launch_wt(int wt, const wg_params &p, const wg_sched &sc, const void *a, cudaStream_t stream)
{
    const char *fp4_only = "wgmma weight-only kernel: FP4 block scales of g = 32 (MX) or 16 (NV) only";
    if constexpr (SM == SM_TILE16) {
        if (wt == WT_FP4_NV) return launch_kernel<WT_FP4_NV, BF, TPW, BX, SM>(p, sc, a, stream);
        return qv_fail(QV_ERR_UNSUPPORTED, "%s", fp4_only);
    } else {
        if (wt == WT_FP4_MX) {
            if constexpr (SM == SM_TILE)
                return launch_kernel<WT_FP4_MX, BF, TPW, BX, SM>(p, sc, a, stream);
            else
                return qv_fail(QV_ERR_UNSUPPORTED, "%s", fp4_only);
        }
        switch (wt) {
        case WT_INT4: return launch_kernel<WT_INT4, BF, TPW, BX, SM>(p, sc, a, stream);
        case WT_INT4_ZP:
            /* Zero points come with group scales only (no row has them otherwise). */
            if constexpr (SM == SM_NONE)
                return qv_fail(QV_ERR_UNSUPPORTED, "4-bit weights with zero points need group scales");
            else
                return launch_kernel<WT_INT4_ZP, BF, TPW, BX, SM>(p, sc, a, stream);
        case WT_INT8: return launch_kernel<WT_INT8, BF, TPW, BX, SM>(p, sc, a, stream);
        case WT_FP8: return launch_kernel<WT_FP8, BF, TPW, BX, SM>(p, sc, a, stream);
        default: return qv_fail(QV_ERR_UNSUPPORTED, "%s", fp4_only);
        }
    }
}

/* Group scales take SM_ROW when a stage's 64 k lie in one group (g >= 64,
 * or k == g: one group), SM_TILE for g = 32 (covers); FP4 SM_TILE (MX, g =
 * 32) or SM_TILE16 (NV, g = 16), whatever K (its scales are always staged). */
template <bool BF, int TPW, int BX>
qv_status launch_sm(int wt, const wg_params &p, const wg_sched &sc, const void *a, cudaStream_t stream)
{
    if (wt == WT_FP4_NV) return launch_wt<BF, TPW, BX, SM_TILE16>(wt, p, sc, a, stream);
    if (wt == WT_FP4_MX) return launch_wt<BF, TPW, BX, SM_TILE>(wt, p, sc, a, stream);
    if (p.scale_mode != SC_GROUP) return launch_wt<BF, TPW, BX, SM_NONE>(wt, p, sc, a, stream);
    if (p.grp_single || p.g_shift >= 2) return launch_wt<BF, TPW, BX, SM_ROW>(wt, p, sc, a, stream);
    return launch_wt<BF, TPW, BX, SM_TILE>(wt, p, sc, a, stream);
}

/* Tile kTiles[I], its shape taken from the table. */
template <int I>
qv_status launch_form(bool bf, int wt, const wg_params &p, const wg_sched &sc, const void *a, cudaStream_t stream)
{
    static_assert(I < kNTiles, "a tile of the table");
    constexpr int TPW = kTiles[I].tpw, BX = kTiles[I].bx;
    return bf ? launch_sm<true, TPW, BX>(wt, p, sc, a, stream) : launch_sm<false, TPW, BX>(wt, p, sc, a, stream);
}

} /* namespace */

extern "C" size_t qv_wonly_wg_workspace(const qv_variant *v, int m, int n, int k, const qv_launch_ctx *c)
{
    if (m < 1 || n < 64 || k < 16) return 0;
    return plan(*c, v, m, n, k).bytes;
}

extern "C" int qv_wonly_wg_tail_tiles(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o)
{
    qv_launch_ctx c;
    if (qv_launch_ctx_get(o, &c) != QV_OK) return -1;
    return plan(c, v, m, n, k).sc.sk_tiles;
}

extern "C" int qv_wonly_wg_sched_info(const qv_variant *v, int m, int n, int k, const qv_launch_opts *o,
                                      qv_wo_wg_sched_info *out)
{
    qv_launch_ctx c;
    if (m < 1 || n < 64 || k < 16 || !covers(v, m, n, k)) return 0;
    if (qv_launch_ctx_get(o, &c) != QV_OK) return 0;
    const wg_plan pl = plan(c, v, m, n, k);
    out->tile_cols = 128 * kTiles[pl.tile].tpw;
    out->tile_tokens = kTiles[pl.tile].bx;
    out->tiles = pl.sc.tiles;
    out->tiles_m = pl.sc.tiles_m;
    out->n_steps = pl.sc.n_steps;
    out->grid = pl.sc.grid;
    out->dp_tiles = pl.sc.dp_tiles;
    out->sk_tiles = pl.sc.sk_tiles;
    out->sk_grid = pl.sc.sk_grid;
    out->workspace = pl.bytes;
    return 1;
}

extern "C" qv_status qv_wonly_wg_launch(const qv_variant *v, const qv_gemm_args *a, const qv_launch_ctx *c)
{
    if (!covers(v, a->m, a->n, a->k))
        return qv_fail(QV_ERR_UNSUPPORTED, "%s: m=%d n=%d k=%d is not covered by the wgmma weight-only kernel",
                       v->name, a->m, a->n, a->k);
    const wg_plan pl = plan(*c, v, a->m, a->n, a->k);
    if (pl.bytes > a->workspace_bytes || (pl.bytes && !a->workspace))
        return qv_fail(QV_ERR_USAGE, "%s: workspace of %zu bytes given, %zu needed (qv_workspace_wonly)", v->name,
                       a->workspace_bytes, pl.bytes);
    unsigned char *ws = (unsigned char *)a->workspace;
    cudaStream_t stream = (cudaStream_t)a->stream;

    wg_params p;
    const void *act = a->a;
    if (v->act_order) {
        uint16_t *ap = (uint16_t *)(ws + pl.aperm_off);
        QV_TRY(launch_permute((const uint16_t *)a->a, a->perm, ap, a->m, a->k, c->sms, stream));
        act = ap;
    }
    p.b = (const uint32_t *)a->b;
    p.scales = a->scales;
    p.zeros = (const uint32_t *)a->zeros;
    p.c = a->c;
    /* The tensor-map stores need a 16-byte aligned C (qv_launch_wonly asks for 4 bytes). */
    p.c_tma = ((uintptr_t)a->c & 15) == 0;
    /* A programmatic dependent of the kernel before it: under act_order the
     * permutation kernel just launched, otherwise whatever the stream ran
     * last (in a forward pass, the layer before). */
    p.pdl = 1;
    p.m = a->m;
    p.n = a->n;
    p.k = a->k;
    p.counters = (int *)ws;
    p.partial = pl.sc.sk_tiles > 0 ? (float *)(ws + pl.partial_off) : NULL;
    wo_set_scale_fields(p, v, a->k);
#ifdef QV_MUTANT_gpu_wg_fp8_unbias_missing
    /* Mutant (class 8, vLLM #47315): the exponent bias folded into the scales is never taken out. */
    p.unbias_f32 = 1.0f;
    p.unbias_h2 = v->afmt == QV_FMT_BF16 ? 0x3F803F80u : 0x3C003C00u;
#endif
    /* Group rows staged per stage: one per group of its kKs k16 tiles (g
     * = 16 << g_shift), none when k == g (the one row is read directly;
     * FP4 never sets grp_single). */
    p.s_rows = p.scale_mode == SC_GROUP && !p.grp_single ? kKs >> (p.g_shift < 2 ? p.g_shift : 2) : 0;
    p.gscale = v->s2_layout == QV_SCALE_TENSOR ? (const float *)a->scales2 : NULL;
    p.bias = v->bias_fmt != QV_FMT_NONE ? a->bias_packed : NULL;
    p.bias_fmt = v->bias_fmt == QV_FMT_F32 ? SF_F32 : v->bias_fmt == QV_FMT_BF16 ? SF_BF16 : SF_F16;
    const bool bf = v->afmt == QV_FMT_BF16;
    const int wt = weight_type(v);
    switch (pl.tile) {
    case 0: return launch_form<0>(bf, wt, p, pl.sc, act, stream);
    case 1: return launch_form<1>(bf, wt, p, pl.sc, act, stream);
    case 2: return launch_form<2>(bf, wt, p, pl.sc, act, stream);
    case 3: return launch_form<3>(bf, wt, p, pl.sc, act, stream);
    case 4: return launch_form<4>(bf, wt, p, pl.sc, act, stream);
    case 5: return launch_form<5>(bf, wt, p, pl.sc, act, stream);
    case 6: return launch_form<6>(bf, wt, p, pl.sc, act, stream);
    case 7: return launch_form<7>(bf, wt, p, pl.sc, act, stream);
    default: return launch_form<8>(bf, wt, p, pl.sc, act, stream);
    }
}
