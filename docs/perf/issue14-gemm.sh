#!/usr/bin/env bash
# Issue 14, item 2 on the GPU machine: rayo's Hopper GEMM (f32 C, C in the operand type `_h`,
# clusters of two `_c2`) against
# cuBLAS through PyTorch in the same call, three interleaved rounds. Run from the repository root
# there, with `.devbin-gpu/bins.tgz` holding the stripped `rayo` built on the dev VM.
set -u
mkdir -p /tmp/b && tar xzf .devbin-gpu/bins.tgz -C /tmp/b
for r in 1 2 3; do
  /tmp/b/rayo bench --backend cuda --op wgmma_bf16 --op wgmma_bf16_h --op wgmma_bf16_c2 --op wgmma_f16 --op wgmma_f16_h \
    --op wgmma_f16_c2 --op wgmma_tf32 --op wgmma_tf32_c2 --size 4096 --size 8192 2>&1 | grep wgmma
  python3 docs/perf/issue14-cublas.py
done
