// Issue 30, part 1: what a persistent kernel could reach on the Llama-3.2-1B Q4_K shape's
// decoding step, before any of it is written in rayo. One cooperative grid (every block
// resident) walks the step's phases: per layer Q/K/V, attention, O, gate/up and down, then the
// head (82 phases). Each phase reads that product's Q4_K bytes (0.5625 bytes a value;
// attention: the 256-position f16 cache of the layer) with 16-byte loads spread over the whole
// grid, sums them (so the loads stay), and ends at a grid-wide barrier, as a product whose
// output the next phase needs must. Variants: `plain`; `ahead` (each block fetches its slice of
// the next phase into L2 before it arrives at the barrier); `barriers` (the same barriers, no
// bytes: what the synchronization costs); `one phase` (all the bytes, one barrier: the read
// stream); `staged` (below). Median of 30 steps each, for several grid shapes.
// Build and run (docs/perf/issue30-persistent-floor.sh): nvcc -O3 -arch=sm_90 -o pf
// issue30-persistent-floor.cu && ./pf
#include <cstdint>
#include "issue30-step.cuh"

// A sense-reversing grid barrier: the last block to arrive flips the generation.
__device__ void grid_barrier(unsigned *count, volatile unsigned *gen, unsigned blocks) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned g = *gen;
        __threadfence();
        if (atomicAdd(count, 1) == blocks - 1) {
            *count = 0;
            __threadfence();
            atomicAdd((unsigned *)gen, 1);
        } else {
            while (*gen == g) { }
        }
        __threadfence();
    }
    __syncthreads();
}

__global__ void walk(const uint4 *__restrict__ w, const Phase *phases, int nphases, int ahead, unsigned *count, unsigned *gen, float *sink) {
    unsigned blocks = gridDim.x;
    unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x, nthreads = (unsigned long long)blocks * blockDim.x;
    unsigned acc = 0;
    for (int p = 0; p < nphases; p++) {
        Phase ph = phases[p];
        const uint4 *base = w + ph.off / 16;
        unsigned long long n = ph.bytes / 16;
        for (unsigned long long i = tid; i < n; i += nthreads) {
            uint4 v = base[i];
            acc += v.x ^ v.y ^ v.z ^ v.w;
        }
        if (ahead && p + 1 < nphases) {
            // this block's share of the next phase's 128-byte lines, into L2
            Phase nx = phases[p + 1];
            unsigned long long lines = nx.bytes / 128, share = (lines + blocks - 1) / blocks;
            unsigned long long s = blockIdx.x * share, e = min(s + share, lines);
            const char *nb = (const char *)w + nx.off;
            for (unsigned long long l = s + threadIdx.x; l < e; l += blockDim.x)
                asm volatile("prefetch.global.L2 [%0];" ::"l"(nb + l * 128));
        }
        grid_barrier(count, gen, blocks);
    }
    if (acc == 0x12345678u) sink[tid] = 1.0f;  // keeps the loads; never true for random bytes
}

// `staged`: each block's contiguous share of a phase; before the barrier that ends phase p it
// copies the first `stage` bytes of its share of phase p + 1 into shared memory (cp.async), so
// the weight stream keeps going while the barrier waits; after it, those bytes come from
// shared memory and the rest of the share from global memory.
__device__ void stage_copy(const uint4 *src, unsigned long long n, uint4 *dst) {
    for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) {
        unsigned d = (unsigned)__cvta_generic_to_shared(dst + i);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + i));
    }
    asm volatile("cp.async.commit_group;");
}

__global__ void walk_staged(const uint4 *__restrict__ w, const Phase *phases, int nphases, unsigned stage, unsigned *count, unsigned *gen, float *sink) {
    extern __shared__ uint4 buf[];
    unsigned blocks = gridDim.x;
    unsigned acc = 0;
    auto share = [&](int p, unsigned long long &start, unsigned long long &len) {
        unsigned long long n = phases[p].bytes / 16, chunk = (n + blocks - 1) / blocks;
        start = min(blockIdx.x * chunk, n);
        len = min(chunk, n - start);
    };
    unsigned long long s0, l0;
    share(0, s0, l0);
    stage_copy(w + phases[0].off / 16 + s0, min(l0, (unsigned long long)stage / 16), buf);
    for (int p = 0; p < nphases; p++) {
        unsigned long long start, len;
        share(p, start, len);
        const uint4 *base = w + phases[p].off / 16 + start;
        unsigned long long staged = min(len, (unsigned long long)stage / 16);
        // the rest of the share, from global memory, first (its loads go out while the copies land)
        for (unsigned long long i = staged + threadIdx.x; i < len; i += blockDim.x) {
            uint4 v = base[i];
            acc += v.x ^ v.y ^ v.z ^ v.w;
        }
        asm volatile("cp.async.wait_all;");
        __syncthreads();
        for (unsigned long long i = threadIdx.x; i < staged; i += blockDim.x) {
            uint4 v = buf[i];
            acc += v.x ^ v.y ^ v.z ^ v.w;
        }
        __syncthreads();
        if (p + 1 < nphases) {
            unsigned long long sn, ln;
            share(p + 1, sn, ln);
            stage_copy(w + phases[p + 1].off / 16 + sn, min(ln, (unsigned long long)stage / 16), buf);
        }
        grid_barrier(count, gen, blocks);
    }
    unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (acc == 0x12345678u) sink[tid] = 1.0f;
}

int main() {
    std::vector<Phase> step = one_b_step(128);
    unsigned long long total = bytes_of(step);
    std::vector<Phase> none = step, one = {{0, total}};
    for (auto &p : none) p.bytes = 0;
    uint4 *w; Phase *ph; unsigned *count, *gen; float *sink;
    CK(cudaMalloc(&w, total));
    CK(cudaMemset(w, 0x5a, total));
    CK(cudaMalloc(&ph, step.size() * sizeof(Phase)));
    CK(cudaMalloc(&count, 4)); CK(cudaMalloc(&gen, 4)); CK(cudaMemset(count, 0, 4)); CK(cudaMemset(gen, 0, 4));
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaMalloc(&sink, (size_t)prop.multiProcessorCount * 8 * 1024 * 4));
    printf("%s, %d SMs, L2 %d MB; the step: %zu phases, %.1f MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, step.size(), total / 1e6);
    struct V { const char *name; std::vector<Phase> *phases; int ahead; };
    V vs[] = {{"plain", &step, 0}, {"ahead", &step, 1}, {"barriers", &none, 0}, {"one phase", &one, 0}};
    for (int threads : {256, 512, 1024}) {
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, walk, threads, 0));
        for (int bps : {1, 2, 4}) {
            if (bps > per_sm) continue;
            int blocks = bps * prop.multiProcessorCount;
            for (auto &v : vs) {
                int n = (int)v.phases->size();
                CK(cudaMemcpy(ph, v.phases->data(), n * sizeof(Phase), cudaMemcpyHostToDevice));
                void *args[] = {&w, &ph, &n, &v.ahead, &count, &gen, &sink};
                float us = median_us((void *)walk, blocks, threads, 0, [&](unsigned) { return args; });
                if (us < 0) return 1;
                printf("%4d threads x %d blocks/SM  %-9s  %7.1f us a step  %5.0f GB/s  (%.2f us a phase)\n", threads, bps, v.name, us,
                       bytes_of(*v.phases) / (us * 1e3), us / n);
            }
        }
    }
    // staged through shared memory: up to 200 KB a block at 1 block an SM, 96 KB at 2
    for (int threads : {512, 1024}) {
        for (int bps : {1, 2}) {
            unsigned stage = bps == 1 ? 200 * 1024 : 96 * 1024;
            CK(cudaFuncSetAttribute(walk_staged, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)stage));
            int per_sm = 0;
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, walk_staged, threads, stage));
            if (bps > per_sm) continue;
            int blocks = bps * prop.multiProcessorCount;
            for (auto *phs : {&step, &none}) {
                int n = (int)phs->size();
                CK(cudaMemcpy(ph, phs->data(), n * sizeof(Phase), cudaMemcpyHostToDevice));
                void *args[] = {&w, &ph, &n, &stage, &count, &gen, &sink};
                float us = median_us((void *)walk_staged, blocks, threads, stage, [&](unsigned) { return args; });
                if (us < 0) return 1;
                printf("%4d threads x %d blocks/SM  staged %3u KB %-8s  %7.1f us a step  %5.0f GB/s  (%.2f us a phase)\n", threads, bps, stage >> 10,
                       phs == &step ? "" : "no bytes", us, bytes_of(*phs) / (us * 1e3), us / n);
            }
        }
    }
    return 0;
}
