/* aq_lt.cu: the large-M path of QQQ W4A8 and W8A8 int8 (aq_lt.cuh): per N
 * chunk, (QQQ) a kernel dequantizes the packed int4 weights into the very int8
 * values the mma kernel feeds its tensor cores, cuBLASLt multiplies int8 x int8
 * into int32 (exact: the registry proves K * max|a| * max|w| < 2^31), and
 * k_aq_lt_epilogue applies aq_gemm.cuh's own epilogue (zero point in int32,
 * then aq_finish) to the int32 products. Every step is exact or the same fp32
 * sequence as k_gemm_aq_mma, so both paths give the same bits.
 *
 * cuBLASLt runs the TN form int8 IGMMA needs, in column-major terms:
 *   C^T (w x m, ld w, int32) = W_chunk^T-op (k x w, ld k) x A^T (k x m, ld k),
 * i.e. row-major C (m, w) = A (m, k) x W_chunk (w, k)^T, W_chunk being the
 * chunk's weights (w, k) row-major: the plain-nk layout itself, or the
 * dequantized QQQ chunk. The algorithm of each (m, w, k, alignments) is chosen
 * once by the heuristic, never with the in-place (output-buffer) split-K
 * reduction, and cached (lt_cache.cuh). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <atomic>
#include <mutex>

#include <cublasLt.h>

#include "aq_lt.cuh"
#include "lt_cache.cuh"
#include "internal/aq.h"

namespace {

/* Dequantization tile: one QQQ 64-column chunk x 8 k16 rows (one warp each). */
constexpr int DQ_ROWS = 8;
/* Shared row pitch of the dequantization tile: 128 K bytes + 16, so the 8
 * columns one store instruction touches fall in 8 different 4-bank groups and
 * every row still starts on a 16-byte boundary. */
constexpr int DQ_PITCH = 144;
constexpr int DQ_THREADS = 32 * DQ_ROWS;
/* Epilogue and column-sum blocks: 256 threads, a common occupancy sweet spot
 * for memory-bound element-wise kernels. */
constexpr int EP_THREADS = 256;
/* One wave of output tiles: one 128 x 256 tile per SM, the tile cuBLASLt's
 * int8 kernels use at large M. */
constexpr double AQ_LT_TILE_OUTPUTS = 128.0 * 256.0;
/* The largest grid y / z dimension CUDA allows. */
constexpr int GRID_YZ_MAX = 65535;

std::atomic<long long> g_runs(0);

/* The chunk budget in bytes: the options' aq_lt_chunk_mib exactly (*floor
 * false), or the tuning table's (48 MiB: the chunk's dequantized weights and
 * int32 products can stay inside the H200's 60 MiB L2 between the kernels
 * that write and read them, for K up to about 8192 at M = 1024), widened to
 * one wave of output tiles (*floor true). */
double chunk_bytes(const qv_launch_ctx &c, bool *floor)
{
    *floor = c.o->aq_lt_chunk_mib == 0.0;
    return (*floor ? c.t->aq_lt_chunk_mib : c.o->aq_lt_chunk_mib) * 1048576.0;
}

/* One launch's chunking and workspace layout (byte offsets from the region's
 * 256-aligned base). */
struct lt_plan {
    int nc;                 /* columns per chunk: a multiple of 64, or all of N */
    int chunks;
    size_t off_colsum;      /* (n) int32 zero-point column sums, when azp */
    size_t off_c32;         /* (m, nc) int32 products of one chunk */
    size_t off_b[2];        /* QQQ: two (nc, k) int8 chunk buffers, used in turn: the
                               chunks run in order on the caller's stream, and the
                               buffer a GEMM reads is never the next dequantization's
                               target (ready for overlap on a second stream) */
    size_t total;           /* region bytes including 256 of alignment slack */
};

lt_plan plan_for(int kind, bool azp, int m, int n, int k, double chunk_bytes, bool wave_floor, int sms)
{
    const bool qqq = kind != AQ_B_PLAIN_I8;
    lt_plan pl;
    const double per_col = 4.0 * m + (qqq ? (double)k : 0.0);
    double nc_max = floor(chunk_bytes / per_col / 64.0) * 64.0;
    /* The default budget never leaves a chunk with less than one wave of
     * output tiles: Llama-3-70B's down projection (K = 28672) would otherwise
     * be cut into 1408-column chunks at M = 1024, 44 tiles for 132 SMs. */
    if (wave_floor) nc_max = fmax(nc_max, ceil(sms * AQ_LT_TILE_OUTPUTS / m / 64.0) * 64.0);
    if (nc_max < 64.0) nc_max = 64.0;
    if (nc_max >= (double)n) {
        pl.nc = n;
    } else {
        /* As many chunks as the budget needs, of equal width (up to 64), so no
         * short last chunk leaves most SMs idle. */
        const int chunks = (int)ceil((double)n / nc_max);
        pl.nc = ((n + chunks - 1) / chunks + 63) / 64 * 64;
    }
    pl.chunks = (n + pl.nc - 1) / pl.nc;
    size_t off = LT_WS_BYTES;
    pl.off_colsum = off;
    if (azp) off += lt_align256((size_t)n * 4);
    pl.off_c32 = off;
    off += lt_align256((size_t)m * (size_t)pl.nc * 4);
    pl.off_b[0] = pl.off_b[1] = off;
    if (qqq) {
        off += lt_align256((size_t)pl.nc * (size_t)k);
        if (pl.chunks > 1) {
            pl.off_b[1] = off;
            off += lt_align256((size_t)pl.nc * (size_t)k);
        }
    }
    pl.total = off + 256;
    return pl;
}

/* ---- device kernels ---------------------------------------------------------- */

/* QQQ chunk dequantization: packed b (k/16, 2n) int32 (the QQQ layout of
 * KIND), gscale (k/g, n) f16 in scale_perm order (AQ_B_QQQ_GROUP only), ->
 * out (w, k) int8 row-major, holding columns n0 .. n0+w-1 (n0, w multiples of
 * 64). Grid (w/64, ceil(k/128)), DQ_THREADS threads: warp r takes k16 row r of
 * the block's 128 K, lane l the same 16 bytes k_gemm_aq_mma's lane l loads,
 * and turns them into the same 8 B fragments (aq_mma.cuh), whose bytes are
 * (k = 16 kb + 4 (l%4) + byte, column 64 chunk + 8 t + l/4) for n8 tile t. The
 * tile is transposed in shared memory and stored as 128-byte rows. */
template <int KIND>
__global__ void __launch_bounds__(DQ_THREADS)
k_aq_lt_qqq_dequant(const int4 *b, const __half *gscale, int n, int k, int g, int n0, int8_t *out)
{
    __shared__ __align__(16) uint8_t tile[64 * DQ_PITCH];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t kb = (int64_t)blockIdx.y * DQ_ROWS + warp;
    const int64_t chunk = n0 / 64 + blockIdx.x;
    if (kb < k / 16) {
        const int4 v = b[kb * (n / 2) + chunk * 32 + lane];
        const uint32_t w4[4] = {(uint32_t)v.x, (uint32_t)v.y, (uint32_t)v.z, (uint32_t)v.w};
        uint32_t frag[8];
        if constexpr (KIND == AQ_B_QQQ_CH) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                frag[2 * j] = aq_qqq_ch_hi(w4[j]);
                frag[2 * j + 1] = aq_qqq_ch_lo(w4[j]);
            }
        } else {
            /* logical column 8t + lane/4 of the chunk sits at 8 (lane/4) + t */
            const int64_t grp = kb * 16 / g;
            const uint4 sv = *(const uint4 *)(gscale + grp * n + chunk * 64 + 8 * (lane >> 2));
            const uint32_t s4[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
            for (int t = 0; t < 8; t++) {
                const uint32_t h = (s4[t >> 1] >> (16 * (t & 1))) & 0xffffu;
                const uint32_t s2 = h | (h << 16);
                const uint32_t word = (t & 1) ? w4[t >> 1] >> 8 : w4[t >> 1];
#ifdef QV_MUTANT_gpu_aq_lt_group_rerounding_rz
                /* Mutant (class 17): the re-rounding of (q - 8) * s to int8
                 * truncates toward zero where the QQQ arithmetic rounds to nearest
                 * even. Bytes 0..3 are nibbles 0, 4, 1, 5 of the word. */
                uint32_t r = 0;
                const float s = __half2float(__ushort_as_half((unsigned short)h));
                const int nib[4] = {0, 4, 1, 5};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int q = (int)((word >> (4 * nib[e])) & 0xfu) - 8;
                    r |= ((uint32_t)(int)((float)q * s) & 0xffu) << (8 * e);
                }
                frag[t] = r;
                (void)s2;
#else
                frag[t] = aq_qqq_group_dq(word, s2);
#endif
            }
        }
#pragma unroll
        for (int t = 0; t < 8; t++)
            *(uint32_t *)(tile + (8 * t + (lane >> 2)) * DQ_PITCH + 16 * warp + 4 * (lane & 3)) = frag[t];
    }
    __syncthreads();
    const int kvalid = min(16 * DQ_ROWS, k - (int)blockIdx.y * 16 * DQ_ROWS);
    for (int i = threadIdx.x; i < 64 * DQ_ROWS; i += DQ_THREADS) {
        const int r = i / DQ_ROWS, c = i % DQ_ROWS;
        if (16 * c >= kvalid) continue;
        *(uint4 *)(out + ((int64_t)blockIdx.x * 64 + r) * k + (int64_t)blockIdx.y * 16 * DQ_ROWS + 16 * c) =
            *(const uint4 *)(tile + r * DQ_PITCH + 16 * c);
    }
}

/* Zero-point column sums: b (n, k) int8 row-major, k a multiple of 16 and b
 * 16-byte aligned (the launcher's rules) -> cs (n) int32 = sum over k of
 * b[col][k], exact (|sum| <= 128 k). One warp per column. */
__global__ void __launch_bounds__(EP_THREADS)
k_aq_lt_colsum(const int8_t *b, int n, int k, int32_t *cs)
{
    const int64_t col = (int64_t)blockIdx.x * (EP_THREADS / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (col >= n) return;
    int s = 0;
    for (int64_t kk = 16 * lane; kk < k; kk += 16 * 32) {
        const int4 v = *(const int4 *)(b + col * k + kk);
        /* dp4a with 0x01010101: the sum of 4 signed bytes, added exactly */
        s = __dp4a(v.x, 0x01010101, s);
        s = __dp4a(v.y, 0x01010101, s);
        s = __dp4a(v.z, 0x01010101, s);
        s = __dp4a(v.w, 0x01010101, s);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) cs[col] = s;
}

/* The epilogue of one chunk: acc (m, w) int32 row-major (w even), columns n0
 * .. n0+w-1 of the output; colsum (n) int32 when the row has a zero point.
 * Zero point as k_gemm_aq_mma subtracts it (unsigned arithmetic: wrap-around
 * is defined and the final value is in int32 range, so it is exact), then
 * aq_finish: the same fp32 sequence and fp16 store. Grid (ceil(w/2 /
 * EP_THREADS), min(m, 65535)); each thread takes one column pair per row. */
template <int KIND>
__global__ void __launch_bounds__(EP_THREADS)
k_aq_lt_epilogue(const aq_params p, const int32_t *acc, int w, int n0, const int32_t *colsum)
{
    const int j = 2 * (int)(blockIdx.x * EP_THREADS + threadIdx.x);
    if (j >= w) return;
    for (int64_t row = blockIdx.y; row < p.m; row += gridDim.y) {
        const int2 v = *(const int2 *)(acc + row * w + j);
        int v0 = v.x, v1 = v.y;
        if constexpr (KIND == AQ_B_PLAIN_I8) {
            if (p.azpm != AQ_AZP_NONE) {
                const unsigned z = (unsigned)(p.azpm == AQ_AZP_TENSOR ? p.azp[0] : p.azp[row]);
                const unsigned cs0 = (unsigned)colsum[n0 + j], cs1 = (unsigned)colsum[n0 + j + 1];
#ifdef QV_MUTANT_gpu_aq_lt_azp_sign
                /* Mutant (class 9, vLLM #5941): the zero-point correction added with
                 * the opposite sign convention, acc + azp * colsum(B_q). */
                v0 = (int)((unsigned)v0 + z * cs0);
                v1 = (int)((unsigned)v1 + z * cs1);
#else
                v0 = (int)((unsigned)v0 - z * cs0);
                v1 = (int)((unsigned)v1 - z * cs1);
#endif
            }
        }
        aq_finish<KIND>(p, row, (int64_t)n0 + j, v0, v1);
    }
}

/* ---- cuBLASLt: the one operation, cached algorithm choices ------------------- */

/* int8 weights and activations into int32 products; every split-K reduction
 * scheme but the in-place one, which sums slices into the output through
 * counters in an order the hardware picks. */
lt_cache g_lt = {"cuBLASLt", CUDA_R_8I, CUDA_R_8I, CUDA_R_32I,
                 CUBLASLT_REDUCTION_SCHEME_MASK & ~(uint32_t)CUBLASLT_REDUCTION_SCHEME_INPLACE};
std::mutex g_mu;
cublasLtMatmulDesc_t g_desc = NULL;

/* The one operation: int32 compute and scale, W^T-op x A. */
qv_status lt_init(void)
{
    if (g_desc) return QV_OK;
    return lt_desc_create(&g_lt, CUBLAS_COMPUTE_32I, CUDA_R_32I, &g_desc);
}

} /* namespace */

size_t aq_lt_workspace(const qv_launch_ctx &c, int kind, bool azp, int m, int n, int k)
{
    if (m < 1 || n < 1 || k < 1) return 0;
    bool floor;
    const double chunk = chunk_bytes(c, &floor);
    return plan_for(kind, azp, m, n, k, chunk, floor, c.sms).total;
}

qv_status aq_lt_try(const qv_launch_ctx &c, int kind, const aq_params &p, const qv_gemm_args *a, size_t ws_offset,
                    bool *taken)
{
    *taken = false;
    if (kind != AQ_B_PLAIN_I8 && kind != AQ_B_QQQ_CH && kind != AQ_B_QQQ_GROUP) return QV_OK;
    const bool qqq = kind != AQ_B_PLAIN_I8;
    const bool azp = !qqq && p.azpm != AQ_AZP_NONE;
    bool floor;
    const double chunk = chunk_bytes(c, &floor);
    const lt_plan pl = plan_for(kind, azp, p.m, p.n, p.k, chunk, floor, c.sms);
    uint8_t *base = lt_region(a, ws_offset, pl.total);
    if (!base) return QV_OK;
    /* The dequantization grid's y dimension counts 128-K blocks. */
    if ((p.k + 16 * DQ_ROWS - 1) / (16 * DQ_ROWS) > GRID_YZ_MAX) return QV_OK;

    int32_t *colsum = (int32_t *)(base + pl.off_colsum);
    int32_t *c32 = (int32_t *)(base + pl.off_c32);
    int8_t *bbuf[2] = {(int8_t *)(base + pl.off_b[0]), (int8_t *)(base + pl.off_b[1])};
    /* QQQ chunks live in the 256-aligned buffers; plain weights start at
     * b + n0 k, n0 k a multiple of 1024, so every chunk has b's alignment. */
    const unsigned aw = qqq ? 256u : lt_align_of(p.b), aa = lt_align_of(p.a);

    std::lock_guard<std::mutex> lock(g_mu);
    QV_TRY(lt_init());
    /* Every chunk width's algorithm first, so a shape cuBLASLt cannot take
     * launches nothing. */
    const int wlast = p.n - (pl.chunks - 1) * pl.nc;
    /* C is the 256-aligned int32 buffer of the region. */
    const lt_key key_full = {0, p.m, pl.nc, p.k, aw, aa, 256}, key_last = {0, p.m, wlast, p.k, aw, aa, 256};
    lt_entry *e_full = NULL, *e_last = NULL;
    QV_TRY(lt_lookup(&g_lt, g_desc, key_full, c.o->trace, &e_full));
    if (!e_full->found) return QV_OK;
    if (wlast != pl.nc) {
        QV_TRY(lt_lookup(&g_lt, g_desc, key_last, c.o->trace, &e_last));
        if (!e_last->found) return QV_OK;
        /* the second lookup may have evicted the first */
        QV_TRY(lt_lookup(&g_lt, g_desc, key_full, c.o->trace, &e_full));
        if (!e_full->found) return QV_OK;
    }

    cudaStream_t st = (cudaStream_t)a->stream;
    if (azp) {
        const unsigned gx = (unsigned)(((int64_t)p.n + EP_THREADS / 32 - 1) / (EP_THREADS / 32));
        k_aq_lt_colsum<<<gx, EP_THREADS, 0, st>>>((const int8_t *)p.b, p.n, p.k, colsum);
        QV_CUDA_TRY(cudaGetLastError(), "launching k_aq_lt_colsum");
    }
    /* int32 alpha = 1, beta = 0: D is the exact product sum. */
    const int32_t one = 1, zero = 0;
    for (int ci = 0; ci < pl.chunks; ci++) {
        const int n0 = ci * pl.nc, w = ci == pl.chunks - 1 ? wlast : pl.nc;
        lt_entry *e = w == pl.nc ? e_full : e_last;
        const int8_t *wchunk;
        if (qqq) {
            int8_t *dst = bbuf[ci & 1];
            const dim3 grid((unsigned)(w / 64), (unsigned)((p.k + 16 * DQ_ROWS - 1) / (16 * DQ_ROWS)));
            if (kind == AQ_B_QQQ_CH)
                k_aq_lt_qqq_dequant<AQ_B_QQQ_CH><<<grid, DQ_THREADS, 0, st>>>((const int4 *)p.b, NULL, p.n, p.k,
                                                                                p.g, n0, dst);
            else
                k_aq_lt_qqq_dequant<AQ_B_QQQ_GROUP><<<grid, DQ_THREADS, 0, st>>>(
                    (const int4 *)p.b, (const __half *)p.w_scale, p.n, p.k, p.g, n0, dst);
            QV_CUDA_TRY(cudaGetLastError(), "launching k_aq_lt_qqq_dequant");
            wchunk = dst;
        } else {
            wchunk = (const int8_t *)p.b + (int64_t)n0 * p.k;
        }
        bool ran;
        QV_TRY(lt_matmul(&g_lt, g_desc, e, &one, wchunk, p.a, &zero, c32, base, st, &ran));
        /* Refused: the shape goes to the mma kernel from now on, which
         * rewrites every output this launch may already have stored. */
        if (!ran) return QV_OK;
        const dim3 eg((unsigned)((w / 2 + EP_THREADS - 1) / EP_THREADS), (unsigned)min(p.m, GRID_YZ_MAX));
        switch (kind) {
        case AQ_B_QQQ_CH: k_aq_lt_epilogue<AQ_B_QQQ_CH><<<eg, EP_THREADS, 0, st>>>(p, c32, w, n0, colsum); break;
        case AQ_B_QQQ_GROUP:
            k_aq_lt_epilogue<AQ_B_QQQ_GROUP><<<eg, EP_THREADS, 0, st>>>(p, c32, w, n0, colsum);
            break;
        default: k_aq_lt_epilogue<AQ_B_PLAIN_I8><<<eg, EP_THREADS, 0, st>>>(p, c32, w, n0, colsum); break;
        }
        QV_CUDA_TRY(cudaGetLastError(), "launching k_aq_lt_epilogue");
    }
    g_runs++;
    *taken = true;
    return QV_OK;
}

extern "C" long long qv_aq_lt_runs(void) { return g_runs.load(); }
