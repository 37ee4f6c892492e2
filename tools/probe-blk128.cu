/* probe-blk128.cu: which layout cuBLASLt's BLK128x128_32F scale tensor takes,
 * and how fast that form runs against VEC128_32F, on the Llama layer shapes.
 * kernels/aq_lt_fp8.cu runs the form this probe found.
 *
 * For D (n x m, f16) = W^T-op (k x n, e4m3, 128 x 128 block scales) x
 * A (k x m, e4m3, one scale per 128 K of each column), in cuBLASLt's
 * column-major terms, it compares three candidate layouts of the (nb, kb)
 * block scales (nb = ceil(n/128), kb = k/128) with the VEC128 x VEC128
 * product over the same scales expanded to (kb, n):
 *   - "nb-major L4": index i * roundup(kb, 4) + j, K blocks padded to 4;
 *   - "kb-major":    index j * nb + i;
 *   - "nb-major":    index i * kb + j.
 * Codes stay below 4 in magnitude and scales are powers of two, so every
 * output is finite and a layout that applies the right scale to every block
 * gives the expanded product bit for bit (or within the rounding of a
 * different summation order, reported as the largest relative difference).
 * The first layout that matches is then timed against VEC128 (CUDA events,
 * 25 launches queued back to back after 5 warm-ups, median, weights rotated
 * past the L2). "check" as the only argument skips the timings and M > 64.
 *
 * Build and run (an sm_90 GPU; not part of `make`):
 *   nvcc -O2 -arch=sm_90 -o probe-blk128 tools/probe-blk128.cu -lcublasLt
 *   ./probe-blk128 [check] */
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <math.h>
#include <string.h>

#include "probe_timing.cuh" /* CK (this probe keeps its own timing, described above) */

#define LK(x)                                                                                 \
    do {                                                                                      \
        cublasStatus_t s_ = (x);                                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                    \
            fprintf(stderr, "cuBLASLt status %d at line %d\n", (int)s_, __LINE__);            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static cublasLtHandle_t g_lt;
static void *g_ws;
static const size_t kWorkspace = (size_t)32 << 20; /* cuBLASLt's recommended workspace on Hopper */
static const int kLayouts = 3;
static const char *const kLayoutNames[kLayouts] = {"nb-major L4", "kb-major", "nb-major"};

/* One operation: its descriptor, layouts and the heuristic's first algorithm. */
struct op {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lw, la, ld;
    cublasLtMatmulAlgo_t algo;
    bool ok;
};

/* W (n, k) e4m3 row-major as W^T-op, A (m, k) e4m3 row-major, D (m, n) f16
 * row-major; wmode / amode scale W and A from sw / sa. */
static op op_make(int wmode, int amode, const float *sw, const float *sa, int m, int n, int k)
{
    op o;
    o.ok = false;
    LK(cublasLtMatmulDescCreate(&o.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    const int8_t fast = 0; /* promoted accumulation, as the rows declare */
    LK(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    LK(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt));
    LK(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &wmode, sizeof wmode));
    LK(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &amode, sizeof amode));
    LK(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    LK(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw, sizeof sw));
    LK(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa));
    LK(cublasLtMatrixLayoutCreate(&o.lw, CUDA_R_8F_E4M3, k, n, k));
    LK(cublasLtMatrixLayoutCreate(&o.la, CUDA_R_8F_E4M3, k, m, k));
    LK(cublasLtMatrixLayoutCreate(&o.ld, CUDA_R_16F, n, m, n));
    cublasLtMatmulPreference_t pref;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE; /* split K only in fp32 */
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                            sizeof kWorkspace));
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                            sizeof schemes));
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g_lt, o.desc, o.lw, o.la, o.ld, o.ld, pref, 1, &h, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_SUCCESS && found > 0) {
        o.algo = h.algo;
        o.ok = true;
    }
    return o;
}

static void op_free(op *o)
{
    cublasLtMatrixLayoutDestroy(o->lw);
    cublasLtMatrixLayoutDestroy(o->la);
    cublasLtMatrixLayoutDestroy(o->ld);
    cublasLtMatmulDescDestroy(o->desc);
}

static bool op_run(const op *o, const void *w, const void *a, void *d)
{
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(g_lt, o->desc, &one, w, o->lw, a, o->la, &zero, d, o->ld, d, o->ld, &o->algo, g_ws,
                          kWorkspace, 0) == CUBLAS_STATUS_SUCCESS;
}

/* Median µs of 25 launches queued back to back after 5 warm-ups, rotating weights. */
static double op_time(const op *o, const std::vector<void *> &w, const void *a, void *d)
{
    cudaEvent_t ev[50];
    for (int i = 0; i < 50; i++) CK(cudaEventCreate(&ev[i]));
    for (int r = 0; r < 5; r++) op_run(o, w[r % w.size()], a, d);
    for (int r = 0; r < 25; r++) {
        CK(cudaEventRecord(ev[2 * r]));
        op_run(o, w[(r + 5) % w.size()], a, d);
        CK(cudaEventRecord(ev[2 * r + 1]));
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> us(25);
    for (int r = 0; r < 25; r++) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]));
        us[r] = 1000.0f * ms;
    }
    for (int i = 0; i < 50; i++) CK(cudaEventDestroy(ev[i]));
    std::sort(us.begin(), us.end());
    return us[12];
}

/* A replayable stream of codes: a fixed LCG. */
static uint32_t g_state = 12345;
static uint32_t next_u32(void) { return (g_state = g_state * 1664525u + 1013904223u) >> 8; }

/* A random e4m3 code of magnitude below 4 (biased exponent 0..8, any sign and
 * mantissa), so that sums over K stay far inside fp16's range and every
 * output compared is finite. */
static uint8_t e4m3_code(void)
{
    const uint32_t r = next_u32();
    return (uint8_t)((r & 0x87u) | (((r >> 8) % 9u) << 3));
}

static float *upload(const std::vector<float> &h)
{
    float *d;
    CK(cudaMalloc(&d, h.size() * sizeof(float)));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

int main(int argc, char **argv)
{
    const bool check_only = argc > 1 && !strcmp(argv[1], "check");
    LK(cublasLtCreate(&g_lt));
    CK(cudaMalloc(&g_ws, kWorkspace));
    static const struct {
        const char *name;
        int n, k;
    } shapes[] = {{"7b-qkv", 12288, 4096},   {"7b-o", 4096, 4096},     {"7b-gu", 22016, 4096},
                  {"7b-down", 4096, 11008},  {"70b-qkv", 10240, 8192}, {"70b-o", 8192, 8192},
                  {"70b-gu", 57344, 8192},   {"70b-down", 8192, 28672}, {"small", 384, 640}};
    static const int ms[] = {1, 4, 16, 64, 256, 1024};
    const int vec = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, blk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    for (const auto &sh : shapes) {
        const int n = sh.n, k = sh.k, kb = k / 128, nb = (n + 127) / 128, kb4 = (kb + 3) / 4 * 4;
        const size_t wbytes = (size_t)n * k;
        /* Enough weight copies to exceed twice the H200's 60 MB L2. */
        const int copies = (int)(((size_t)160 << 20) / wbytes) + 1;
        std::vector<uint8_t> hw(wbytes);
        for (auto &c : hw) c = e4m3_code();
        std::vector<void *> dw(copies);
        for (auto &p : dw) {
            CK(cudaMalloc(&p, wbytes));
            CK(cudaMemcpy(p, hw.data(), wbytes, cudaMemcpyHostToDevice));
        }
        /* Block scales 2^-4 .. 2^4, the expanded (kb, n) tensor and the candidates. */
        std::vector<float> bs((size_t)nb * kb), expanded((size_t)kb * n);
        for (auto &x : bs) x = ldexpf(1.0f, (int)(next_u32() % 9) - 4);
        for (int j = 0; j < kb; j++)
            for (int i = 0; i < n; i++) expanded[(size_t)j * n + i] = bs[(size_t)(i / 128) * kb + j];
        std::vector<float> cand[kLayouts] = {std::vector<float>((size_t)nb * kb4, 0.0f),
                                             std::vector<float>((size_t)kb * nb), std::vector<float>((size_t)nb * kb)};
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < kb; j++) {
                const float v = bs[(size_t)i * kb + j];
                cand[0][(size_t)i * kb4 + j] = v;
                cand[1][(size_t)j * nb + i] = v;
                cand[2][(size_t)i * kb + j] = v;
            }
        float *d_expanded = upload(expanded), *d_cand[kLayouts];
        for (int c = 0; c < kLayouts; c++) d_cand[c] = upload(cand[c]);
        for (int m : ms) {
            if (check_only && m > 64) continue;
            std::vector<uint8_t> ha((size_t)m * k);
            for (auto &c : ha) c = e4m3_code();
            std::vector<float> sa((size_t)kb * m); /* (kb, m): K-block-major, as VEC128 takes it */
            for (auto &x : sa) x = ldexpf(1.0f, (int)(next_u32() % 5) - 2);
            void *da;
            CK(cudaMalloc(&da, ha.size()));
            CK(cudaMemcpy(da, ha.data(), ha.size(), cudaMemcpyHostToDevice));
            float *dsa = upload(sa);
            __half *d_vec, *d_blk;
            CK(cudaMalloc(&d_vec, (size_t)m * n * 2));
            CK(cudaMalloc(&d_blk, (size_t)m * n * 2));
            std::vector<__half> h_vec((size_t)m * n), h_blk((size_t)m * n);
            op ov = op_make(vec, vec, d_expanded, dsa, m, n, k);
            if (ov.ok) {
                CK(cudaMemset(d_vec, 0xff, (size_t)m * n * 2)); /* poison: NaN halves */
                if (op_run(&ov, dw[0], da, d_vec))
                    CK(cudaMemcpy(h_vec.data(), d_vec, h_vec.size() * 2, cudaMemcpyDeviceToHost));
                else
                    ov.ok = false;
            }
            if (!ov.ok) printf("%s m=%d: cuBLASLt has no VEC128 x VEC128 algorithm\n", sh.name, m);
            for (int c = 0; c < kLayouts && ov.ok; c++) {
                op ob = op_make(blk, vec, d_cand[c], dsa, m, n, k);
                if (!ob.ok) {
                    printf("%s m=%d BLK(%s): no algorithm\n", sh.name, m, kLayoutNames[c]);
                    op_free(&ob);
                    break;
                }
                CK(cudaMemset(d_blk, 0xff, (size_t)m * n * 2));
                if (!op_run(&ob, dw[0], da, d_blk)) {
                    printf("%s m=%d BLK(%s): refused\n", sh.name, m, kLayoutNames[c]);
                    op_free(&ob);
                    break;
                }
                CK(cudaMemcpy(h_blk.data(), d_blk, h_blk.size() * 2, cudaMemcpyDeviceToHost));
                long same = 0, finite = 0;
                double max_rel = 0;
                for (size_t i = 0; i < h_blk.size(); i++) {
                    if (!memcmp(&h_vec[i], &h_blk[i], 2)) same++;
                    finite += isfinite(__half2float(h_vec[i]));
                    const double x = __half2float(h_vec[i]), y = __half2float(h_blk[i]);
                    const double rel = fabs(x - y) / std::max(1e-3, fabs(x));
                    if (!(rel <= max_rel)) max_rel = rel; /* a NaN sticks */
                }
                printf("%s m=%d BLK(%s) vs VEC128: %ld/%zu bitwise equal (%ld finite), max rel %.3g\n", sh.name, m,
                       kLayoutNames[c], same, h_blk.size(), finite, max_rel);
                const bool match = finite == (long)h_blk.size() && (same == (long)h_blk.size() || max_rel < 1e-2);
                if (match && !check_only)
                    printf("TIME %s m=%d BLKxVEC %.1f us  VECxVEC %.1f us\n", sh.name, m, op_time(&ob, dw, da, d_blk),
                           op_time(&ov, dw, da, d_vec));
                op_free(&ob);
                if (match) break;
            }
            op_free(&ov);
            CK(cudaFree(da));
            CK(cudaFree(dsa));
            CK(cudaFree(d_vec));
            CK(cudaFree(d_blk));
        }
        for (auto p : dw) CK(cudaFree(p));
        CK(cudaFree(d_expanded));
        for (int c = 0; c < kLayouts; c++) CK(cudaFree(d_cand[c]));
    }
    printf("done\n");
    return 0;
}
