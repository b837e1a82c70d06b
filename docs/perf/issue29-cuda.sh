#!/usr/bin/env bash
# Issue 29 on the GPU machine (run there from the repository root by the `run` tool, carrying
# dev-bin/p29 = rayo.gz, cuda-synth-test (crates/rayo-cli/tests/cuda_synth.rs built here),
# ggml-vocab-phi-3.gguf, and dev-bin/b1/tok.gguf (a tiny GGUF with SmolLM2's tokenizer)):
#   1. the CUDA engine against the CPU engine on tiny-llama3 / tiny-qwen3 / tiny-phi3 synth
#      files (and tiny-gemma3 refused, naming the CPU backend);
#   2. `rayo bench --model --backend cuda` (pp512, tg128) on full-size synth shapes of the new
#      architectures: qwen3-0.6b, phi3-mini, llama-3.2-1b (with Llama 3's rope_freqs), Q4_K.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/r
gunzip -c dev-bin/p29/rayo.gz >/tmp/r/rayo && chmod +x /tmp/r/rayo
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
echo "== 1. cuda_synth"
RAYO_BIN=/tmp/r/rayo RAYO_SMOLLM2=dev-bin/b1/tok.gguf RAYO_PHI3_VOCAB=dev-bin/p29/ggml-vocab-phi-3.gguf RAYO_REQUIRE_CUDA=1 \
  dev-bin/p29/cuda-synth-test --nocapture 2>&1 | grep -vE "^\s*$" || true
echo "== 2. rayo bench --model --backend cuda"
for shape in qwen3-0.6b phi3-mini llama-3.2-1b; do
  tok=dev-bin/b1/tok.gguf
  [ "$shape" = phi3-mini ] && tok=dev-bin/p29/ggml-vocab-phi-3.gguf
  /tmp/r/rayo synth /tmp/r/$shape.gguf --shape "$shape" --type Q4_K --tokenizer "$tok" >/dev/null
  echo "-- $shape Q4_K"
  /tmp/r/rayo bench --model /tmp/r/$shape.gguf --backend cuda 2>&1 | tail -3
  /tmp/r/rayo generate --model /tmp/r/$shape.gguf --backend cuda --prompt "The capital of France is" --max-tokens 8 --temperature 0 2>&1 | tail -1
done
