#!/usr/bin/env bash
# Issue 51's models, rayo held to AVX2 (RAYO_BACKEND=avx2) against llama.cpp built AVX2-only
# (the build issue51-baseline.sh makes), same machine, same run, alternating, 1 and 2 threads,
# llama-bench's pp64/tg64; rayo's AVX-512 figures beside. Makes the SmolLM2 Q4_K_M mix with
# `rayo quantize` and the Llama-3.2-1B Q4_K shape with `rayo synth` (random weights) in .cache.
# Usage: docs/perf/issue51-models.sh [ROUNDS] (RAYO_BIN: a release rayo; MODELS: files instead)
set -euo pipefail
cd "$(dirname "$0")/../.."
rayo=${RAYO_BIN:-target/release/rayo}
rounds=${1:-2}
bench=.cache/llama.cpp/src/vendor/llama.cpp/build-avx2/bin/llama-bench
[ -x "$bench" ] || { echo "no $bench: run docs/perf/issue51-baseline.sh once (it builds it)" >&2; exit 1; }
m=.cache/models
smol=$m/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f $m/SmolLM2-135M-Instruct.Q4_K_M.gguf ] || "$rayo" quantize $smol $m/SmolLM2-135M-Instruct.Q4_K_M.gguf Q4_K_M >/dev/null
[ -f $m/llama-3.2-1b-shape.Q4_K.gguf ] || "$rayo" synth $m/llama-3.2-1b-shape.Q4_K.gguf --shape llama-3.2-1b --type Q4_K --tokenizer $smol >/dev/null
MODELS=${MODELS:-"$smol $m/SmolLM2-135M-Instruct.Q4_K_M.gguf $m/Qwen2.5-Coder-0.5B-Instruct.gguf $m/gemma-3-270m-q4_k_m.gguf $m/llama-3.2-1b-shape.Q4_K.gguf"}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cores), $(git rev-parse --short HEAD)"
for model in $MODELS; do
  for round in $(seq "$rounds"); do
    echo "== $(basename "$model"), round $round"
    "$bench" -m "$model" -t 1,2 -p 64 -n 64 -o md 2>/dev/null | grep -E "pp64|tg64" | awk -F'|' '{printf "llama.cpp avx2: %s t=%s %s\n", $7, $6, $8}'
    for isa in avx2 avx512; do
      RAYO_BACKEND=$isa "$rayo" bench --model "$model" --threads 1 --threads 2 2>/dev/null | grep -E "pp64|tg64" | awk -v isa=$isa '{printf "rayo %s: %s t=%s %s\n", isa, $1, $3, $4}'
    done
  done
done
