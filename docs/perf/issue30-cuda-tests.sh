#!/usr/bin/env bash
# The CUDA test binaries of the tree on the GPU machine, after the launches went through
# CudaDevice::queue (each launch also kept while a step records, for the persistent step).
# Carries dev-bin/new/{cuda,cuda_llm,cuda_nccl,cuda_persistent,cuda_synth,rayo}.gz (built with
# `cargo test --release -p rayo --features cuda --test NAME --no-run`, and
# `cargo test --release -p rayo-cli --test cuda_synth --no-run`) and dev-bin/b1/tok.gguf.
. "$(dirname "$0")/issue30-cuda-bins.sh"
test_results cuda cuda_llm cuda_nccl cuda_persistent
synth_results
# and the decode speed of the 1B shape as a graph, and persistent (p4), two rounds
synth_1b
echo "## llama-3.2-1b Q4_K"
for r in 1 2; do
  for p in 0 4; do RAYO_CUDA_PERSISTENT=$p /tmp/f/rayo bench --model $f --backend cuda 2>&1 | grep -E "^tg|rror" | sed "s/^/RAYO_CUDA_PERSISTENT=$p: /"; done
done
for p in 0 4; do RAYO_CUDA_PERSISTENT=$p /tmp/f/rayo generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/RAYO_CUDA_PERSISTENT=$p greedy md5: /"; done
