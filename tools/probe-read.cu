/* probe-read.cu: how fast can any kernel read a layer's weights once, timed
 * as `qvet bench` times a layer? The answer bounds what the small-M
 * weight-only kernels (kernels/wonly_small.cu) can reach per layer: a kernel
 * that only streams its bytes and does nothing else, launched alone between
 * two CUDA events, pays the same launch, ramp-up and tail as they do.
 *
 * For each size (the packed weights of one Llama layer: 4-bit, 8-bit and
 * fp16 codes of Llama-2-7B and Llama-3-70B, docs/design.md §8) it times:
 *  - an empty kernel of one block (the launch between the two events);
 *  - a read kernel, several shapes (blocks per SM x threads x 16-byte loads
 *    in flight per thread), each thread streaming its share with plain
 *    LDG.128 (L1 not allocated), folding the words into one value that is
 *    stored only if it matches a key no buffer holds (so nothing is elided);
 * and prints the fastest shape's median next to the floor at the copy
 * bandwidth measured in the same run (a device-to-device copy, reads plus
 * writes, as `qvet bench` measures it).
 *
 * Timing as `qvet bench`: buffers rotated so that every launch reads bytes
 * past the 60 MB L2, a spin kernel in front of each batch holds the stream
 * while the host queues it, CUDA events around each launch, median of the
 * launches after a warm-up.
 *
 * Build and run (an sm_90 GPU; not part of `make`):
 *   nvcc -O3 -arch=sm_90 -o probe-read tools/probe-read.cu
 *   ./probe-read */
#include "probe_read.cuh"
#include "probe_timing.cuh"

struct shape {
    int blocks_per_sm, threads, unroll;
};

typedef void (*launch_fn)(const shape &, const uint4 *, int64_t, uint32_t *, int sms);

static void launch_read(const shape &s, const uint4 *src, int64_t n16, uint32_t *out, int sms)
{
    const int grid = s.blocks_per_sm * sms;
    switch (s.unroll) {
    case 2: k_read<2><<<grid, s.threads>>>(src, n16, out); break;
    case 4: k_read<4><<<grid, s.threads>>>(src, n16, out); break;
    default: k_read<8><<<grid, s.threads>>>(src, n16, out); break;
    }
}

static void launch_empty(const shape &, const uint4 *, int64_t, uint32_t *out, int)
{
    k_empty<<<1, 32>>>(out);
}

/* fn over the rotated buffers in turn (probe_timing.cuh). */
static double time_launches(launch_fn fn, const shape &s, const std::vector<uint4 *> &bufs, int64_t n16,
                            uint32_t *out, int sms, int runs)
{
    return median_launch_us([&](int j) { fn(s, bufs[j % bufs.size()], n16, out, sms); }, runs);
}

int main(void)
{
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    /* The layers' weights in bytes: Llama-2-7B and Llama-3-70B, (k, n). */
    struct layer {
        const char *model, *name;
        int64_t k, n;
    } layers[] = {{"llama2-7b", "qkv", 4096, 12288},   {"llama2-7b", "o", 4096, 4096},
                  {"llama2-7b", "gate_up", 4096, 22016}, {"llama2-7b", "down", 11008, 4096},
                  {"llama3-70b", "qkv", 8192, 10240},  {"llama3-70b", "o", 8192, 8192},
                  {"llama3-70b", "gate_up", 8192, 57344}, {"llama3-70b", "down", 28672, 8192}};
    const int n_layers = sizeof layers / sizeof layers[0];
    const int64_t max_bytes = 8192LL * 57344 * 2; /* fp16 gate_up of Llama-3-70B */
    const int64_t pool_bytes = 3 * max_bytes;     /* past the L2 several times over */
    char *pool;
    CK(cudaMalloc(&pool, pool_bytes));
    CK(cudaMemset(pool, 0x5A, pool_bytes)); /* every word 0x5A5A5A5A: folds to 0, never the key */
    uint32_t *out;
    CK(cudaMalloc(&out, 64));
    CK(cudaMemset(out, 0, 64));

    /* The copy bandwidth, as qvet bench measures it (reads plus writes). */
    double copy_bps;
    {
        const int64_t half = max_bytes / 2;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<double> us;
        for (int i = 0; i < 13; i++) {
            CK(cudaEventRecord(e0));
            CK(cudaMemcpyAsync(pool + (i % 2) * max_bytes, pool + 2 * max_bytes, half, cudaMemcpyDeviceToDevice));
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (i >= 3) us.push_back(1000.0 * ms);
        }
        std::sort(us.begin(), us.end());
        copy_bps = 2.0 * (double)half / (us[us.size() / 2] * 1e-6);
        printf("copy bandwidth %.3f TB/s (reads + writes)\n", copy_bps * 1e-12);
    }

    const shape shapes[] = {{1, 1024, 4}, {2, 512, 4}, {2, 512, 8}, {4, 256, 8}, {4, 512, 4},
                            {8, 256, 4},  {8, 256, 8}, {16, 128, 8}, {2, 1024, 2}};
    const shape none = {0, 0, 0};
    printf("%-11s %-8s %-5s %10s %9s %9s %9s %7s  %s\n", "model", "layer", "bits", "bytes", "floor_us",
           "empty_us", "read_us", "floor%", "fastest shape (blocks/SM x threads x loads)");
    for (int bits : {4, 8, 16}) {
        for (int li = 0; li < n_layers; li++) {
            const layer &L = layers[li];
            const int64_t bytes = L.k * L.n * bits / 8;
            const int64_t n16 = bytes / 16;
            std::vector<uint4 *> bufs;
            for (int64_t off = 0; off + bytes <= pool_bytes && bufs.size() < 16; off += (bytes + 4095) / 4096 * 4096)
                bufs.push_back(reinterpret_cast<uint4 *>(pool + off));
            if (bufs.size() < 2) {
                fprintf(stderr, "pool too small for %lld bytes\n", (long long)bytes);
                return 1;
            }
            const double empty = time_launches(launch_empty, none, bufs, n16, out, sms, 50);
            double best = 1e30;
            shape best_s = shapes[0];
            for (const shape &s : shapes) {
                const double t = time_launches(launch_read, s, bufs, n16, out, sms, 40);
                if (t < best) best = t, best_s = s;
            }
            const double floor_us = (double)bytes / copy_bps * 1e6;
            printf("%-11s %-8s %-5d %10lld %9.2f %9.2f %9.2f %6.1f%%  %d x %d x %d\n", L.model, L.name, bits,
                   (long long)bytes, floor_us, empty, best, 100.0 * floor_us / best, best_s.blocks_per_sm,
                   best_s.threads, best_s.unroll);
        }
    }
    uint32_t h[2];
    CK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    if (h[0] != 0 || h[1] != 0) {
        fprintf(stderr, "a read kernel stored its key: the fold is wrong\n");
        return 1;
    }
    CK(cudaFree(pool));
    CK(cudaFree(out));
    return 0;
}
