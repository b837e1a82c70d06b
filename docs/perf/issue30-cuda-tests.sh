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
# and the decode speed of the 1B shape as a graph, and persistent (p4), two rounds
f=/tmp/f/1b.gguf
/tmp/f/rayo synth $f --shape llama-3.2-1b --type Q4_K --tokenizer dev-bin/b1/tok.gguf >/dev/null
echo "## llama-3.2-1b Q4_K"
for r in 1 2; do
  for p in 0 4; do RAYO_CUDA_PERSISTENT=$p /tmp/f/rayo bench --model $f --backend cuda 2>&1 | grep -E "^tg|rror" | sed "s/^/RAYO_CUDA_PERSISTENT=$p: /"; done
done
for p in 0 4; do RAYO_CUDA_PERSISTENT=$p /tmp/f/rayo generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/RAYO_CUDA_PERSISTENT=$p greedy md5: /"; done
