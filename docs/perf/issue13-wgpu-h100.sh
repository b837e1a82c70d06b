#!/usr/bin/env bash
# The LLM on wgpu through NVIDIA's Vulkan driver on the GPU machine (issue 13, item 3), beside
# rayo's CUDA engine on the same file. Run there from the repository root with the stripped
# `rayo` in .devbin-gpu/, the loader debs in .gl/ (docs/perf/gpu-env.sh) and SmolLM2-135M Q4_1 at
# /tmp/m (carried in two halves, see issue12-cuda.sh). llama.cpp's CUDA build in the same session:
# docs/perf/issue12-llama-cuda.sh.
set -uo pipefail
. docs/perf/gpu-env.sh
M=/tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
$B/rayo info 2>/dev/null | grep -E "^(wgpu|cuda)" | tee "$OUT/info.txt"
for i in 1 2; do
  for be in wgpu cuda; do $B/rayo bench --model $M --backend $be --json 2>/dev/null; done
done | tee "$OUT/bench.txt"
# greedy text on both GPU backends and the CPU (f32 activations are the closer reference)
for be in wgpu cuda cpu; do
  printf '%s: ' $be
  $B/rayo generate --model $M --backend $be --prompt "The capital of France is" --max-tokens 24 --temperature 0 2>/dev/null | tr '\n' ' '
  echo
done | tee "$OUT/greedy.txt"
