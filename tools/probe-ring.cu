/* probe-ring.cu: how fast does the small-M weight-only kernel's weight ring
 * (kernels/wonly_small.cu) stream, and what in it sets the rate? The
 * kernel's ring without its math (-DQV_WO_SMALL_NO_MATH=1) streams a layer
 * more slowly than a kernel that only reads the same bytes
 * (tools/probe-read.cu), with a longer fixed cost. This probe rebuilds
 * the ring alone, the same grid (column tiles x K slices, the plans
 * `qvet bench` picks at M = 1), the same 4 x 16 KiB stages refilled by
 * thread 0 after a block barrier, the same shared memory per block (two
 * blocks per SM), and varies one thing at a time:
 *  - rowcopy: one bulk copy per k16 row of the block's columns (the kernel);
 *  - pf<P>:   the same, plus an L2 prefetch (cp.async.bulk.prefetch.L2) of
 *             the rows P stages past each refill, so more bytes are in
 *             flight without more shared memory;
 *  - tensor:  one 3D tensor-map copy per stage (all its rows at once);
 *  - split4:  each k16 row in four copies (smaller copies, same bytes);
 * each consumer thread reads its words of every stage from shared memory
 * (so the stage is really waited for) and folds them into a value stored
 * only if it matches a key no buffer holds. Next to them: an empty kernel
 * and the grid-stride read of probe-read.cu (2 blocks/SM x 1024 threads x 2
 * and x 512 x 8), timed the same way.
 *
 * Timing as `qvet bench` (probe_timing.cuh): buffers rotated past the L2, a
 * spin kernel in front of each batch, events around each launch, medians.
 *
 * Build and run (an sm_90 GPU; not part of `make`):
 *   nvcc -O3 -arch=sm_90 -o probe-ring tools/probe-ring.cu
 *   ./probe-ring */
#include <cuda.h>
#include <cudaTypedefs.h>

#include "../kernels/async_copy.cuh"
#include "probe_read.cuh"
#include "probe_timing.cuh"

static const int kThreads = 256;
static const int kStages = 4;
static const int kStageBytes = 16 * 1024;
static const int kSmemBytes = 70 * 1024; /* the kernel's at M = 1 (two blocks per SM) */

enum { MODE_ROW = 0, MODE_PF, MODE_TENSOR, MODE_SPLIT4 };

struct ring_params {
    const unsigned char *b; /* (k16 rows, row_bytes_total) */
    int64_t row_stride;     /* bytes of one k16 row of the whole layer */
    int blk_bytes;          /* bytes of one k16 row of one block's columns */
    int rows;               /* k16 rows of the layer */
    int slices;
    int pf;                 /* MODE_PF: stages ahead */
    uint32_t *out;
};

/* The ring's mbarriers and bulk copies: kernels/async_copy.cuh, as the kernel uses them. */
__device__ __forceinline__ void prefetch_l2(const void *src, uint32_t bytes)
{
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma3(uint32_t dst, const CUtensorMap *map, int x, int y, int z, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(bar)
                 : "memory");
}

template <int MODE>
__global__ void __launch_bounds__(kThreads, 2) k_ring(const ring_params p, const __grid_constant__ CUtensorMap map)
{
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned base = (unsigned)__cvta_generic_to_shared(smem);
    const int slice = blockIdx.y;
    const int q = p.rows / p.slices, r = p.rows % p.slices;
    const int kt0 = slice * q + min(slice, r);
    const int nt = q + (slice < r ? 1 : 0);
    const int rps = kStageBytes / p.blk_bytes;
    const int n_stages = (nt + rps - 1) / rps;
    const unsigned char *b_blk = p.b + (int64_t)kt0 * p.row_stride + (int64_t)blockIdx.x * p.blk_bytes;
    auto issue = [&](int st) {
        const uint64_t pol = l2_evict_first();
        const int slot = st % kStages;
        const int rows = min(rps, nt - st * rps);
        const unsigned dst = base + 128 + slot * kStageBytes;
        if (MODE == MODE_TENSOR) {
            mbar_arrive_tx(base + 8 * slot, rps * p.blk_bytes); /* rows past the slice's end arrive (zeros or the next slice's) */
            tma3(dst, &map, 0, blockIdx.x * (p.blk_bytes / 1024), kt0 + st * rps, base + 8 * slot);
            return;
        }
        mbar_arrive_tx(base + 8 * slot, rows * p.blk_bytes);
        for (int i = 0; i < rows; i++) {
            const unsigned char *src = b_blk + (int64_t)(st * rps + i) * p.row_stride;
            if (MODE == MODE_SPLIT4) {
                for (int j = 0; j < 4; j++)
                    bulk_copy_hint(dst + i * p.blk_bytes + j * (p.blk_bytes / 4), src + j * (p.blk_bytes / 4),
                                   p.blk_bytes / 4, base + 8 * slot, pol);
            } else {
                bulk_copy_hint(dst + i * p.blk_bytes, src, p.blk_bytes, base + 8 * slot, pol);
            }
        }
        if (MODE == MODE_PF) {
            const int ps = st + p.pf;
            if (ps < n_stages) {
                const int prow = min(rps, nt - ps * rps);
                for (int i = 0; i < prow; i++) prefetch_l2(b_blk + (int64_t)(ps * rps + i) * p.row_stride, p.blk_bytes);
            }
        }
    };
    if (threadIdx.x == 0) {
        for (int i = 0; i < kStages; i++) mbar_init(base + 8 * i, 1);
        mbar_fence_init();
        if (MODE == MODE_PF)
            for (int st = kStages; st < min(kStages + p.pf, n_stages); st++) {
                const int prow = min(rps, nt - st * rps);
                for (int i = 0; i < prow; i++) prefetch_l2(b_blk + (int64_t)(st * rps + i) * p.row_stride, p.blk_bytes);
            }
        for (int st = 0; st < min(kStages, n_stages); st++) issue(st);
    }
    __syncthreads();
    uint32_t acc = 0;
    for (int st = 0; st < n_stages; st++) {
        const int slot = st % kStages;
        mbar_wait(base + 8 * slot, (st / kStages) & 1);
        const int rows = min(rps, nt - st * rps);
        const uint4 *s = reinterpret_cast<const uint4 *>(smem + 128 + slot * kStageBytes);
        for (int w = threadIdx.x; w < rows * p.blk_bytes / 16; w += kThreads) {
            const uint4 v = s[w];
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
        if (st + kStages < n_stages) {
            __syncthreads();
            if (threadIdx.x == 0) issue(st + kStages);
        }
    }
    if (acc == kKey) p.out[0] = acc;
}

struct layer {
    const char *name;
    int k, n, tiles, slices; /* tiles x slices: the plan at M = 1 (512 columns per block) */
};

static PFN_cuTensorMapEncodeTiled_v12000 encode_fn()
{
    void *f = NULL;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !f) {
        fprintf(stderr, "no cuTensorMapEncodeTiled\n");
        exit(1);
    }
    return (PFN_cuTensorMapEncodeTiled_v12000)f;
}

int main(int argc, char **argv)
{
    const int runs = argc > 1 ? atoi(argv[1]) : 40;
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const layer layers[] = {{"qkv", 8192, 10240, 20, 13},
                            {"o", 8192, 8192, 16, 16},
                            {"gate_up", 8192, 57344, 112, 7},
                            {"down", 28672, 8192, 16, 16}};
    const int64_t max_bytes = (int64_t)8192 * 57344; /* 8-bit gate_up */
    const int nbuf = 4;                               /* 4 x 470 MB rotated: far past the 60 MB L2 */
    unsigned char *buf[nbuf];
    for (int i = 0; i < nbuf; i++) {
        CK(cudaMalloc(&buf[i], max_bytes));
        CK(cudaMemset(buf[i], 0x11 * (i + 1), max_bytes));
    }
    uint32_t *out;
    CK(cudaMalloc(&out, 64));
    CK(cudaMemset(out, 0, 64));
    auto enc = encode_fn();
    CK(cudaFuncSetAttribute(k_ring<MODE_ROW>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    CK(cudaFuncSetAttribute(k_ring<MODE_PF>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    CK(cudaFuncSetAttribute(k_ring<MODE_TENSOR>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    CK(cudaFuncSetAttribute(k_ring<MODE_SPLIT4>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));

    const double empty = median_launch_us([&](int) { k_empty<<<1, 32>>>(out); }, runs);
    printf("empty kernel %.2f us; %d SMs\n", empty, sms);
    printf("%-8s %4s %10s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "layer", "bits", "bytes", "read2k", "read512",
           "row", "pf2", "pf4", "pf8", "tensor", "split4", "row2x");
    for (int bits : {4, 8}) {
        for (const layer &L : layers) {
            const int64_t row_stride = (int64_t)L.n * 16 * bits / 8;
            const int rows = L.k / 16;
            const int64_t bytes = row_stride * rows;
            const int blk_bytes = 512 * 16 * bits / 8;
            double t[9];
            t[0] = median_launch_us(
                [&](int j) { k_read<2><<<2 * sms, 1024>>>((const uint4 *)buf[j % nbuf], bytes / 16, out); }, runs);
            t[1] = median_launch_us(
                [&](int j) { k_read<8><<<2 * sms, 512>>>((const uint4 *)buf[j % nbuf], bytes / 16, out); }, runs);
            /* the tensor maps: (1 KiB pieces as 256 u32) x (pieces of a row) x (rows), one per buffer */
            CUtensorMap maps[nbuf];
            for (int i = 0; i < nbuf; i++) {
                const cuuint64_t dims[3] = {256, (cuuint64_t)(row_stride / 1024), (cuuint64_t)rows};
                const cuuint64_t strides[2] = {1024, (cuuint64_t)row_stride};
                const cuuint32_t box[3] = {256, (cuuint32_t)(blk_bytes / 1024), (cuuint32_t)(kStageBytes / blk_bytes)};
                const cuuint32_t es[3] = {1, 1, 1};
                CUresult rc = enc(&maps[i], CU_TENSOR_MAP_DATA_TYPE_UINT32, 3, buf[i], dims, strides, box, es,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
                if (rc != CUDA_SUCCESS) {
                    fprintf(stderr, "tensor map encode failed (%d)\n", (int)rc);
                    exit(1);
                }
            }
            auto ring = [&](int mode, int pf, int blkb, int tiles) {
                ring_params p;
                p.row_stride = row_stride;
                p.blk_bytes = blkb;
                p.rows = rows;
                p.slices = L.slices;
                p.pf = pf;
                p.out = out;
                const dim3 grid(tiles, L.slices);
                return median_launch_us(
                    [&](int j) {
                        p.b = buf[j % nbuf];
                        switch (mode) {
                        case MODE_ROW: k_ring<MODE_ROW><<<grid, kThreads, kSmemBytes>>>(p, maps[j % nbuf]); break;
                        case MODE_PF: k_ring<MODE_PF><<<grid, kThreads, kSmemBytes>>>(p, maps[j % nbuf]); break;
                        case MODE_TENSOR: k_ring<MODE_TENSOR><<<grid, kThreads, kSmemBytes>>>(p, maps[j % nbuf]); break;
                        default: k_ring<MODE_SPLIT4><<<grid, kThreads, kSmemBytes>>>(p, maps[j % nbuf]); break;
                        }
                    },
                    runs);
            };
            t[2] = ring(MODE_ROW, 0, blk_bytes, L.tiles);
            t[3] = ring(MODE_PF, 2, blk_bytes, L.tiles);
            t[4] = ring(MODE_PF, 4, blk_bytes, L.tiles);
            t[5] = ring(MODE_PF, 8, blk_bytes, L.tiles);
            t[6] = ring(MODE_TENSOR, 0, blk_bytes, L.tiles);
            t[7] = ring(MODE_SPLIT4, 0, blk_bytes, L.tiles);
            /* 1024 columns per block: twice the bytes per row copy, half the column tiles */
            t[8] = ring(MODE_ROW, 0, 2 * blk_bytes, L.tiles / 2);
            printf("%-8s %4d %10lld %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", L.name, bits,
                   (long long)bytes, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]);
            fflush(stdout);
        }
    }
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < nbuf; i++) CK(cudaFree(buf[i]));
    CK(cudaFree(out));
    return 0;
}
