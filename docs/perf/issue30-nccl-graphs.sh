#!/usr/bin/env bash
# A tensor-parallel rank's step recorded as a CUDA graph with NCCL's calls in it: the recorded
# sum of crates/rayo/tests/cuda_nccl.rs (a world of one here; two ranks where the machine has
# two GPUs), the CUDA test binaries of the tree, and the 1B shape's decode and greedy md5 as a
# graph (the one-token step's recording, which now falls back instead of failing).
# Carries dev-bin/new/{cuda,cuda_llm,cuda_nccl,cuda_persistent,cuda_synth,rayo}.gz (test
# binaries from `./scripts/test.sh`'s build, target/release/deps; rayo from target/release)
# and dev-bin/b1/tok.gguf (`rayo synth dev-bin/b1/tok.gguf --shape tiny
# --tokenizer .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf`: SmolLM2's tokenizer).
. "$(dirname "$0")/issue30-cuda-bins.sh"
export RAYO_REQUIRE_NCCL=1
echo "## cuda_nccl"
/tmp/f/cuda_nccl --test-threads 1 --nocapture 2>&1 | grep -E "^test |^nccl|panicked|SKIP" | head -20
test_results cuda cuda_llm cuda_persistent
synth_results
synth_1b
echo "## llama-3.2-1b Q4_K, graph"
for r in 1 2; do /tmp/f/rayo bench --model $f --backend cuda 2>&1 | grep -E "^tg|rror"; done
/tmp/f/rayo generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/greedy md5: /"
