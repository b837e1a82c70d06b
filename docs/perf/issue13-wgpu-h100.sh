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
# wgpu three ways in the same run: as shipped (fused kernels, f16 where the adapter has
# shader-f16), f16 off (RAYO_WGPU_F16=0), fusion off (RAYO_WGPU_FUSE=0: the op-by-op step)
for i in 1 2; do
  for v in "wgpu" "wgpu RAYO_WGPU_F16=0" "wgpu RAYO_WGPU_FUSE=0" "cuda"; do
    set -- $v
    printf '%s ' "$v"
    env ${2:-RAYO_NONE=1} $B/rayo bench --model $M --backend $1 --json 2>/dev/null | tr '\n' ' '
    echo
  done
done | tee "$OUT/bench.txt"
# greedy text on both GPU backends and the CPU (f32 activations are the closer reference)
for v in "wgpu" "wgpu RAYO_WGPU_F16=0" "wgpu RAYO_WGPU_FUSE=0" "cuda" "cpu"; do
  set -- $v
  printf '%s: ' "$v"
  env ${2:-RAYO_NONE=1} $B/rayo generate --model $M --backend $1 --prompt "The capital of France is" --max-tokens 24 --temperature 0 2>/dev/null | tr '\n' ' '
  echo
done | tee "$OUT/greedy.txt"
