// Issue 30, part 1: finer dependencies than a grid barrier for the Llama-3.2-1B Q4_K step
// (the follow-up of issue30-persistent-floor.cu, whose best walk with a grid barrier per phase
// took 374 us). Each of the step's 81 phases is cut into S x S tiles: out-slice r (of the
// phase's output rows) by in-slice j (of its input columns), each tile 1/S^2 of the phase's
// Q4_K bytes. A tile needs only in-slice j of its input, which is out-slice j of the phase
// before, complete when that phase's S tiles of out-slice j are done (a counter per slice, not
// a grid barrier). So tiles of phase p + 1 start while other tiles of phase p still run. A
// phase after an RMSNorm (Q/K/V, gate/up, the head) needs every slice (the norm's scale sums
// them all): its tiles wait for all S counters.
// Tiles are dealt to the resident blocks of one cooperative grid in phase order (tile t of
// phase p to block t mod blocks): a block only waits on tiles of earlier phases, which blocks
// before it in that order hold, so the walk cannot deadlock. Variants: `wait first` (a tile
// waits for its slice, then reads its bytes); `load first` (a tile reads up to 64 KB of its
// weights, then waits: the weights do not depend on the input, as a real kernel would keep
// them in shared memory until it does). Median of 30 steps; counters carry across steps (the
// target grows by S each step), so nothing is reset between launches.
// Build and run: docs/perf/issue30-dataflow-floor.sh.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

struct Phase { unsigned long long off, bytes; };

__device__ unsigned xsum(const uint4 *p, unsigned long long n) {
    unsigned acc = 0;
    for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) {
        uint4 v = p[i];
        acc += v.x ^ v.y ^ v.z ^ v.w;
    }
    return acc;
}

__global__ void flow(const uint4 *__restrict__ w, const Phase *phases, int nphases, int S, int load_first, unsigned step, unsigned *done, float *sink) {
    unsigned acc = 0;
    unsigned tiles = (unsigned)(S * S);
    const unsigned long long pre_max = 64 * 1024 / 16;
    for (int p = 0; p < nphases; p++) {
        Phase ph = phases[p];
        unsigned long long per = ph.bytes / 16 / tiles;
        for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
            unsigned r = t / S, j = t % S;
            const uint4 *tile = w + ph.off / 16 + (unsigned long long)t * per;
            unsigned long long pre = load_first ? min(per, pre_max) : 0;
            acc += xsum(tile, pre);
            if (p > 0) {
                // after an RMSNorm (Q/K/V, gate/up, the head) a tile needs the whole input:
                // the norm's scale sums every slice
                bool whole = p % 5 == 0 || p % 5 == 3 || p == nphases - 1;
                if (threadIdx.x == 0) {
                    unsigned want = (unsigned)S * (step + 1);
                    for (int k = whole ? 0 : (int)j; k < (whole ? S : (int)j + 1); k++) {
                        volatile unsigned *c = done + (p - 1) * S + k;
                        while (*c < want) { }
                    }
                    __threadfence();
                }
                __syncthreads();
            }
            acc += xsum(tile + pre, per - pre);
            __syncthreads();
            if (threadIdx.x == 0) {
                __threadfence();
                atomicAdd(done + p * S + r, 1);
            }
        }
    }
    unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (acc == 0x12345678u) sink[tid] = 1.0f;  // keeps the loads; never true for these bytes
}

int main() {
    const unsigned long long embd = 2048, ff = 8192, kv = 512, vocab = 128256, layers = 16;
    auto q4k = [](unsigned long long r, unsigned long long c) { return (r * c * 9 / 16 + 4095) / 4096 * 4096; };
    std::vector<Phase> step;
    unsigned long long off = 0;
    auto add = [&](unsigned long long bytes) { step.push_back({off, bytes}); off += bytes; };
    for (unsigned long long l = 0; l < layers; l++) {
        add(q4k(embd + 2 * kv, embd));
        add(256ull * kv * 2 * 2);
        add(q4k(embd, embd));
        add(q4k(2 * ff, embd));
        add(q4k(embd, ff));
    }
    add(q4k(vocab, embd));
    unsigned long long total = off;
    uint4 *w; Phase *ph; unsigned *done; float *sink;
    CK(cudaMalloc(&w, total));
    CK(cudaMemset(w, 0x5a, total));
    CK(cudaMalloc(&ph, step.size() * sizeof(Phase)));
    CK(cudaMemcpy(ph, step.data(), step.size() * sizeof(Phase), cudaMemcpyHostToDevice));
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaMalloc(&sink, (size_t)prop.multiProcessorCount * 8 * 1024 * 4));
    CK(cudaMalloc(&done, step.size() * 64 * 4));
    printf("%s, %d SMs; the step: %zu phases, %.1f MB\n", prop.name, prop.multiProcessorCount, step.size(), total / 1e6);
    int n = (int)step.size();
    for (int threads : {512, 1024}) {
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, flow, threads, 0));
        for (int bps : {1, 2, 4}) {
            if (bps > per_sm) continue;
            int blocks = bps * prop.multiProcessorCount;
            for (int S : {4, 8, 16, 32}) {
                for (int lf : {0, 1}) {
                    CK(cudaMemset(done, 0, step.size() * 64 * 4));
                    std::vector<float> ts;
                    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
                    for (unsigned it = 0; it < 33; it++) {
                        void *args[] = {&w, &ph, &n, &S, &lf, &it, &done, &sink};
                        cudaEventRecord(a);
                        CK(cudaLaunchCooperativeKernel((void *)flow, blocks, threads, args, 0, 0));
                        cudaEventRecord(b);
                        CK(cudaEventSynchronize(b));
                        float ms; cudaEventElapsedTime(&ms, a, b);
                        if (it >= 3) ts.push_back(ms * 1000);
                    }
                    std::sort(ts.begin(), ts.end());
                    float us = ts[ts.size() / 2];
                    printf("%4d threads x %d blocks/SM  S %2d (%4d tiles a phase)  %-10s  %7.1f us a step  %5.0f GB/s\n", threads, bps, S, S * S,
                           lf ? "load first" : "wait first", us, total / (us * 1e3));
                }
            }
        }
    }
    return 0;
}
