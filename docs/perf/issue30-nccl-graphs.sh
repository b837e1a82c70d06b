#!/usr/bin/env bash
# A tensor-parallel rank's step recorded as a CUDA graph with NCCL's calls in it: the recorded
# sum of crates/rayo/tests/cuda_nccl.rs (a world of one here; two ranks where the machine has
# two GPUs), the CUDA test binaries of the tree, and the 1B shape's decode and greedy md5 as a
# graph (the one-token step's recording, which now falls back instead of failing).
# Carries dev-bin/new/{cuda,cuda_llm,cuda_nccl,cuda_persistent,cuda_synth,rayo}.gz (test
# binaries from `./scripts/test.sh`'s build, target/release/deps; rayo from target/release)
# and dev-bin/b1/tok.gguf (`rayo synth dev-bin/b1/tok.gguf --shape tiny --type Q8_0
# --tokenizer .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf`: SmolLM2's tokenizer).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RAYO_REQUIRE_CUDA=1
mkdir -p /tmp/f
for b in cuda cuda_llm cuda_nccl cuda_persistent cuda_synth rayo; do gunzip -c dev-bin/new/$b.gz >/tmp/f/$b && chmod +x /tmp/f/$b; done
nvidia-smi --query-gpu=name --format=csv,noheader
export RAYO_NCCL_LIBRARY=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
export RAYO_REQUIRE_NCCL=1
echo "## cuda_nccl"
/tmp/f/cuda_nccl --test-threads 1 --nocapture 2>&1 | grep -E "^test |^nccl|panicked|SKIP" | head -20
for t in cuda cuda_llm cuda_persistent; do
  echo "## $t"
  /tmp/f/$t --test-threads 1 2>&1 | grep -E "^test result|panicked|FAILED|failed" | head -10
done
echo "## cuda_synth"
RAYO_SMOLLM2=dev-bin/b1/tok.gguf RAYO_BIN=/tmp/f/rayo /tmp/f/cuda_synth --test-threads 1 2>&1 | grep -E "^test result|panicked|FAILED|SKIP" | head -10
f=/tmp/f/1b.gguf
/tmp/f/rayo synth $f --shape llama-3.2-1b --type Q4_K --tokenizer dev-bin/b1/tok.gguf >/dev/null
echo "## llama-3.2-1b Q4_K, graph"
for r in 1 2; do /tmp/f/rayo bench --model $f --backend cuda 2>&1 | grep -E "^tg|rror"; done
/tmp/f/rayo generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/greedy md5: /"
