/* probe-perm.cu: what does act_order's permutation of A cost, timed as
 * `qvet bench` times a layer, and how close is it to a plain copy of the
 * same bytes? The weight-only wgmma kernel (kernels/wonly_wg.cu) reads A in
 * the packed weights' sorted-row order, so an act_order launch first writes
 * out[i][j] = a[i][perm[j]] (M x K fp16) to its workspace.
 *
 * For each K of the Llama-2-7B and Llama-3-70B layers and M in {64, 128,
 * 256, 512, 1024} it times, A hot (one copy, as `qvet bench` reuses its A)
 * and cold (copies rotated past the L2):
 *  - empty: an empty kernel (the launch between two events);
 *  - copy: out = a with 16-byte loads and stores, the floor of any pass that
 *    reads A once and writes it once;
 *  - gather: one thread per element reading a[i][perm[j]] from global memory
 *    (kernels/wonly.cu's permutation, the wgmma path's fallback);
 *  - old: the first rule of the staged permutation (rows loaded by a loop of
 *    16-byte loads, 512 threads, about 256 blocks);
 *  - R0-R3: the staged permutation under four launch rules (rows per
 *    block, threads, and whether one bulk copy or a loop of 16-byte loads
 *    brings the rows in; the rules are described where they are defined);
 * and, A hot, both ways of staging over 1, 2, 4, 5, 7 and 8 rows per block
 * and 512 or 1024 threads. Every configuration's output is checked against
 * the host's permutation once.
 *
 * Build and run (an sm_90 GPU; not part of `make`):
 *   nvcc -O3 -arch=sm_90 -o probe-perm tools/probe-perm.cu
 *   ./probe-perm */
#include <string.h>

#include "probe_timing.cuh"

__global__ void k_empty(int *out)
{
    if (out[0] == 12345) out[1] = 0;
}

__global__ void k_copy(const uint4 *__restrict__ a, uint4 *__restrict__ out, int64_t n16)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) out[i] = a[i];
}

/* One thread per element from global memory, as kernels/wonly.cu. */
__global__ void k_gather(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k)
{
    const int64_t total = (int64_t)m * k;
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x)
        out[idx] = a[idx / k * k + perm[idx % k]];
}

static void launch_gather(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k)
{
    const int64_t total = (int64_t)m * k;
    k_gather<<<(int)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096), 256>>>(a, perm, out, m, k);
}

constexpr int kPermSmem = 200 * 1024;
constexpr int kPermPair = 113 * 1024;

/* loop: the staged kernel whose rows come in by a loop of 16-byte loads. */
template <int TH>
__global__ void __launch_bounds__(TH) k_loop(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k, int rows)
{
    extern __shared__ uint4 stage4[];
    const uint16_t *stage = reinterpret_cast<const uint16_t *>(stage4);
    const int i0 = blockIdx.x * rows;
    const int r_n = m - i0 < rows ? m - i0 : rows;
    const int vecs = r_n * (k / 8);
    const uint4 *src = reinterpret_cast<const uint4 *>(a + (int64_t)i0 * k);
    for (int v = threadIdx.x; v < vecs; v += TH) stage4[v] = src[v];
    __syncthreads();
    for (int j = 2 * threadIdx.x; j < k; j += 2 * TH) {
        const int2 pj = *reinterpret_cast<const int2 *>(perm + j);
        const bool ok0 = (unsigned)pj.x < (unsigned)k, ok1 = (unsigned)pj.y < (unsigned)k;
        for (int r = 0; r < r_n; r++) {
            const uint32_t lo = ok0 ? stage[r * k + pj.x] : 0u, hi = ok1 ? stage[r * k + pj.y] : 0u;
            *reinterpret_cast<uint32_t *>(out + (int64_t)(i0 + r) * k + j) = lo | hi << 16;
        }
    }
}

__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    asm volatile(
        "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

/* bulk: as kernels/wonly_wg.cu's k_wg_permute_rows (TH threads). */
template <int TH>
__global__ void __launch_bounds__(TH)
    k_bulk(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k, int rows)
{
    extern __shared__ __align__(16) uint4 stage4[];
    __shared__ __align__(8) uint64_t full;
    const uint16_t *stage = reinterpret_cast<const uint16_t *>(stage4);
    const int i0 = blockIdx.x * rows;
    const int r_n = m - i0 < rows ? m - i0 : rows;
    const uint32_t bar = (uint32_t)__cvta_generic_to_shared(&full);
    if (threadIdx.x == 0) {
        mbar_init(bar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        const uint32_t bytes = (uint32_t)r_n * (uint32_t)k * 2u;
        mbar_expect(bar, bytes);
        uint64_t pol;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                     " [%0], [%1], %2, [%3], %4;\n" ::"r"((uint32_t)__cvta_generic_to_shared(stage4)),
                     "l"(a + (int64_t)i0 * k), "r"(bytes), "r"(bar), "l"(pol)
                     : "memory");
    }
    __syncthreads();
    mbar_wait(bar, 0);
    for (int j = 2 * threadIdx.x; j < k; j += 2 * TH) {
        const int2 pj = *reinterpret_cast<const int2 *>(perm + j);
        const bool ok0 = (unsigned)pj.x < (unsigned)k, ok1 = (unsigned)pj.y < (unsigned)k;
        for (int r = 0; r < r_n; r++) {
            const uint32_t lo = ok0 ? stage[r * k + pj.x] : 0u, hi = ok1 ? stage[r * k + pj.y] : 0u;
            *reinterpret_cast<uint32_t *>(out + (int64_t)(i0 + r) * k + j) = lo | hi << 16;
        }
    }
}

/* A configuration: rows per block, threads, bulk copy or the loop. */
struct cfg {
    int rows, th;
    bool bulk;
};
static int g_sms;

/* R0: the first rule with the bulk copy (about 256 blocks, rows capped so
 * that two blocks share an SM; one row: bulk, 1024 threads; else the loop,
 * 512 threads). */
static cfg rule0(int m, int k)
{
    const int64_t row_bytes = (int64_t)k * 2;
    const int fit = row_bytes <= kPermPair ? (int)(kPermPair / row_bytes) : 1;
    int rows = m / 256 > 1 ? m / 256 : 1;
    if (rows > fit) rows = fit;
    return rows == 1 ? cfg{1, 1024, true} : cfg{rows, 512, false};
}

/* R1: at most one block per SM where the rows allow it (rows = m / SMs
 * rounded up, capped so that two blocks share an SM); a grid within the SMs
 * takes 1024 threads and the loop, a grid past two blocks per SM the bulk
 * copy with 1024 threads, else the loop with 512. */
static cfg rule1(int m, int k)
{
    const int64_t row_bytes = (int64_t)k * 2;
    const int fit = row_bytes <= kPermPair ? (int)(kPermPair / row_bytes) : 1;
    int rows = (m + g_sms - 1) / g_sms;
    if (rows > fit) rows = fit;
    const int grid = (m + rows - 1) / rows;
    if (grid <= g_sms) return cfg{rows, 1024, false};
    if (grid > 2 * g_sms) return cfg{rows, 1024, true};
    return cfg{rows, 512, false};
}

/* R2: R1 below M = 512; from M = 512 R0's rows, the loop with 512 threads,
 * or the bulk copy with 1024 past two blocks per SM. */
static cfg rule2(int m, int k)
{
    if (m < 512) return rule1(m, k);
    cfg c = rule0(m, k);
    const int grid = (m + c.rows - 1) / c.rows;
    if (grid > 2 * g_sms) return cfg{c.rows, 1024, true};
    return cfg{c.rows, 512, false};
}

/* R3: kernels/wonly_wg.cu's rule: rows = M / SMs rounded up, one
 * block per SM, the loop with 1024 threads; where those rows pass the
 * stage's 200 KiB, as many as let two blocks share an SM, the bulk copy with
 * 1024 threads. */
static cfg rule3(int m, int k)
{
    const int64_t row_bytes = (int64_t)k * 2;
    const int rows = (m + g_sms - 1) / g_sms;
    if (rows * row_bytes <= kPermSmem) return cfg{rows, 1024, false};
    return cfg{row_bytes <= kPermPair ? (int)(kPermPair / row_bytes) : 1, 1024, true};
}

/* old: the first rule of the staged permutation (about 256 blocks, rows
 * capped by the stage's 200 KiB, the loop with 512 threads). */
static cfg rule_old(int m, int k)
{
    const int fit = (int)(kPermSmem / ((int64_t)k * 2));
    int rows = m / 256 > 1 ? m / 256 : 1;
    if (rows > fit) rows = fit;
    return cfg{rows, 512, false};
}

static cfg g_cfg;
static void launch_cfg(const uint16_t *a, const int32_t *perm, uint16_t *out, int m, int k)
{
    const int64_t row_bytes = (int64_t)k * 2;
    int rows = g_cfg.rows;
    if (rows * row_bytes > kPermSmem) rows = (int)(kPermSmem / row_bytes);
    const int grid = (m + rows - 1) / rows;
    const size_t sm = (size_t)rows * row_bytes;
    if (g_cfg.bulk) {
        if (g_cfg.th == 512) k_bulk<512><<<grid, 512, sm>>>(a, perm, out, m, k, rows);
        else k_bulk<1024><<<grid, 1024, sm>>>(a, perm, out, m, k, rows);
    } else {
        if (g_cfg.th == 1024) k_loop<1024><<<grid, 1024, sm>>>(a, perm, out, m, k, rows);
        else k_loop<512><<<grid, 512, sm>>>(a, perm, out, m, k, rows);
    }
}

static void launch_copy(const uint16_t *a, const int32_t *, uint16_t *out, int m, int k)
{
    k_copy<<<4 * 132, 512>>>(reinterpret_cast<const uint4 *>(a), reinterpret_cast<uint4 *>(out), (int64_t)m * k / 8);
}

static int *g_dummy;
static void launch_empty(const uint16_t *, const int32_t *, uint16_t *, int, int) { k_empty<<<1, 32>>>(g_dummy); }

typedef void (*launch_fn)(const uint16_t *, const int32_t *, uint16_t *, int, int);

/* fn over the buffers `as` in turn (probe_timing.cuh). */
static double time_launches(launch_fn fn, const std::vector<uint16_t *> &as, const int32_t *perm, uint16_t *out,
                            int m, int k, int runs)
{
    return median_launch_us([&](int j) { fn(as[j % as.size()], perm, out, m, k); }, runs);
}

int main(void)
{
    CK(cudaFuncSetAttribute(k_loop<512>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPermSmem));
    CK(cudaFuncSetAttribute(k_loop<1024>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPermSmem));
    CK(cudaFuncSetAttribute(k_bulk<512>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPermSmem));
    CK(cudaFuncSetAttribute(k_bulk<1024>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPermSmem));
    CK(cudaMalloc(&g_dummy, 64));
    CK(cudaMemset(g_dummy, 0, 64));
    int dev;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
    const int ks[] = {4096, 11008, 8192, 28672};
    const int ms[] = {64, 128, 256, 512, 1024};
    const int sweep_rows[] = {1, 2, 4, 5, 7, 8};
    typedef cfg (*rule_fn)(int, int);
    const rule_fn rules[] = {rule_old, rule0, rule1, rule2, rule3};
    const int64_t pool_bytes = (int64_t)256 << 20;
    char *pool;
    CK(cudaMalloc(&pool, pool_bytes));
    uint16_t *out;
    CK(cudaMalloc(&out, (int64_t)1024 * 28672 * 2));
    int32_t *perm_d;
    CK(cudaMalloc(&perm_d, 28672 * 4));
    printf("us per launch, median of 40; %d SMs. old: the staged kernel before 2026-12-02; R0-R3: the\n"
           "launch rules above (rows x threads, b = bulk copy, l = loop); then, A hot, the bulk copy and the loop\n"
           "with rows per block x threads\n",
           g_sms);
    printf("%-6s %-5s %-4s %9s %7s %7s %7s %7s %7s %7s %7s %7s  %s\n", "k", "m", "A", "bytes", "empty", "copy", "gather",
           "old", "R0", "R1", "R2", "R3", "configs (R0 / R1 / R2 / R3)");
    for (int k : ks) {
        /* A random permutation of k, as GPTQ's sort by the Hessian gives. */
        std::vector<int32_t> perm(k);
        for (int j = 0; j < k; j++) perm[j] = j;
        uint64_t s = 0x243F6A8885A308D3ull ^ (uint64_t)k;
        for (int j = k - 1; j > 0; j--) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const int r = (int)((s >> 33) % (uint64_t)(j + 1));
            std::swap(perm[j], perm[r]);
        }
        CK(cudaMemcpy(perm_d, perm.data(), k * 4, cudaMemcpyHostToDevice));
        for (int m : ms) {
            const int64_t bytes = (int64_t)m * k * 2;
            std::vector<uint16_t> ha((size_t)m * k);
            for (size_t i = 0; i < ha.size(); i++) ha[i] = (uint16_t)(i * 2654435761u >> 7);
            std::vector<uint16_t *> cold;
            for (int64_t off = 0; off + bytes <= pool_bytes && cold.size() < 512; off += (bytes + 4095) / 4096 * 4096)
                cold.push_back(reinterpret_cast<uint16_t *>(pool + off));
            CK(cudaMemcpy(cold[0], ha.data(), bytes, cudaMemcpyHostToDevice));
            for (size_t c = 1; c < cold.size(); c++) CK(cudaMemcpy(cold[c], cold[0], bytes, cudaMemcpyDeviceToDevice));
            /* The gather, every rule's configuration and every swept one, checked once. */
            std::vector<uint16_t> got((size_t)m * k);
            std::vector<std::pair<launch_fn, cfg>> checks{{launch_gather, cfg{0, 0, false}}};
            for (rule_fn r : rules) checks.push_back({launch_cfg, r(m, k)});
            for (int rows : sweep_rows)
                for (int th : {512, 1024})
                    for (bool bulk : {true, false}) checks.push_back({launch_cfg, cfg{rows, th, bulk}});
            for (auto &c : checks) {
                g_cfg = c.second;
                CK(cudaMemset(out, 0xFF, bytes));
                c.first(cold[1 % cold.size()], perm_d, out, m, k);
                CK(cudaGetLastError());
                CK(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost));
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < k; j++)
                        if (got[(size_t)i * k + j] != ha[(size_t)i * k + perm[j]]) {
                            fprintf(stderr, "%d x %d %s wrong at k=%d m=%d (%d, %d)\n", c.second.rows, c.second.th,
                                    c.second.bulk ? "bulk" : "loop", k, m, i, j);
                            return 1;
                        }
            }
            for (int hot = 1; hot >= 0; hot--) {
                std::vector<uint16_t *> as = hot ? std::vector<uint16_t *>{cold[0]} : cold;
                const double te = time_launches(launch_empty, as, perm_d, out, m, k, 40);
                const double tc = time_launches(launch_copy, as, perm_d, out, m, k, 40);
                const double tg = time_launches(launch_gather, as, perm_d, out, m, k, 40);
                printf("%-6d %-5d %-4s %9lld %7.2f %7.2f %7.2f", k, m, hot ? "hot" : "cold", (long long)bytes, te, tc,
                       tg);
                for (rule_fn r : rules) {
                    g_cfg = r(m, k);
                    printf(" %7.2f", time_launches(launch_cfg, as, perm_d, out, m, k, 40));
                }
                printf("  ");
                for (int i = 1; i < 5; i++) {
                    const cfg c = rules[i](m, k);
                    printf("%s%dx%d%c", i > 1 ? " / " : "", c.rows, c.th, c.bulk ? 'b' : 'l');
                }
                printf("\n");
                if (hot)
                    for (bool bulk : {true, false}) {
                        printf("    %s:", bulk ? "bulk" : "loop");
                        for (int rows : sweep_rows)
                            for (int th : {512, 1024}) {
                                g_cfg = cfg{rows, th, bulk};
                                printf(" r%dx%d %.2f", rows, th, time_launches(launch_cfg, as, perm_d, out, m, k, 40));
                            }
                        printf("\n");
                    }
            }
        }
    }
    CK(cudaFree(pool));
    CK(cudaFree(out));
    CK(cudaFree(perm_d));
    CK(cudaFree(g_dummy));
    return 0;
}
