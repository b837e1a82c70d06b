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
#include <cstdint>
#include "issue30-step.cuh"

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
    // (phases rounded to 4 KB: every tile of up to 32 x 32 a whole number of 16-byte loads)
    std::vector<Phase> step = one_b_step(4096);
    unsigned long long total = bytes_of(step);
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
                    unsigned stepno = 0;
                    void *args[] = {&w, &ph, &n, &S, &lf, &stepno, &done, &sink};
                    float us = median_us((void *)flow, blocks, threads, 0, [&](unsigned it) {
                        stepno = it;
                        return args;
                    });
                    if (us < 0) return 1;
                    printf("%4d threads x %d blocks/SM  S %2d (%4d tiles a phase)  %-10s  %7.1f us a step  %5.0f GB/s\n", threads, bps, S, S * S,
                           lf ? "load first" : "wait first", us, total / (us * 1e3));
                }
            }
        }
    }
    return 0;
}
