#!/usr/bin/env bash
# The CUDA test binaries of the tree on the GPU machine, after the launches went through
# CudaDevice::queue (each launch also kept while a step records, for the persistent step).
# Carries dev-bin/new/{cuda,cuda_llm,cuda_nccl,cuda_persistent,cuda_synth,rayo}.gz (built with
# `cargo test --release -p rayo --features cuda --test NAME --no-run`, and
# `cargo test --release -p rayo-cli --test cuda_synth --no-run`) and dev-bin/b1/tok.gguf.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RAYO_REQUIRE_CUDA=1
mkdir -p /tmp/f
for b in cuda cuda_llm cuda_nccl cuda_persistent cuda_synth rayo; do gunzip -c dev-bin/new/$b.gz >/tmp/f/$b && chmod +x /tmp/f/$b; done
nvidia-smi --query-gpu=name --format=csv,noheader
export RAYO_NCCL_LIBRARY=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
for t in cuda cuda_llm cuda_nccl cuda_persistent; do
  echo "## $t"
  /tmp/f/$t --test-threads 1 2>&1 | grep -E "^test result|panicked|FAILED|failed" | head -10
done
echo "## cuda_synth"
RAYO_SMOLLM2=dev-bin/b1/tok.gguf RAYO_BIN=/tmp/f/rayo /tmp/f/cuda_synth --test-threads 1 2>&1 | grep -E "^test result|panicked|FAILED|SKIP" | head -10
