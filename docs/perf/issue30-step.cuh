// Issue 30: what docs/perf/issue30-persistent-floor.cu and issue30-dataflow-floor.cu share: the
// Llama-3.2-1B Q4_K decoding step as phases of bytes, and the timing of a cooperative launch.
#pragma once
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

// One phase of the step: the bytes it reads, from `off` in the step's buffer.
struct Phase { unsigned long long off, bytes; };

// The step's 81 phases: per layer Q/K/V, attention (256 positions of f16 K and V), O, gate/up
// and down, then the head, at Q4_K's 0.5625 bytes a value; each rounded up to `align` bytes.
inline std::vector<Phase> one_b_step(unsigned long long align) {
    const unsigned long long embd = 2048, ff = 8192, kv = 512, vocab = 128256, layers = 16;
    auto q4k = [&](unsigned long long r, unsigned long long c) { return (r * c * 9 / 16 + align - 1) / align * align; };
    std::vector<Phase> step;
    unsigned long long off = 0;
    auto add = [&](unsigned long long bytes) { step.push_back({off, bytes}); off += bytes; };
    for (unsigned long long l = 0; l < layers; l++) {
        add(q4k(embd + 2 * kv, embd));  // Q, K, V
        add(256ull * kv * 2 * 2);       // attention
        add(q4k(embd, embd));           // O
        add(q4k(2 * ff, embd));         // gate, up
        add(q4k(embd, ff));             // down
    }
    add(q4k(vocab, embd));              // the head
    return step;
}

inline unsigned long long bytes_of(const std::vector<Phase> &phases) {
    unsigned long long n = 0;
    for (auto &p : phases) n += p.bytes;
    return n;
}

// The median of 30 cooperative launches of `kernel` (after 3 that warm up), in µs; launch `it`
// takes the arguments `args_at(it)` gives. Negative, after printing the error, when one fails.
template <class ArgsAt>
float median_us(const void *kernel, int blocks, int threads, unsigned smem, ArgsAt args_at) {
    std::vector<float> ts;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (unsigned it = 0; it < 33; it++) {
        cudaEventRecord(a);
        cudaError_t e = cudaLaunchCooperativeKernel(kernel, blocks, threads, args_at(it), smem, 0);
        if (e == cudaSuccess) e = cudaEventRecord(b);
        if (e == cudaSuccess) e = cudaEventSynchronize(b);
        if (e != cudaSuccess) {
            printf("launch %u: %s\n", it, cudaGetErrorString(e));
            return -1;
        }
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (it >= 3) ts.push_back(ms * 1000);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}
