#!/usr/bin/env bash
# Llama-3.2-1B's shape (random weights, Q4_K and Q8_0) with the engine's defaults (8-bit decode
# activations from 1024 values a row), pp512 and tg128, two repetitions, beside the f32 decode
# and SmolLM2-135M Q4_1's defaults; the read stream of the same GPU for the bandwidth fraction.
# Binaries in /tmp/b, SmolLM2-135M Q4_1 in /tmp/m (issue12-cuda.sh). usage: OUT=DIR $0
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
M=/tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
python3 docs/perf/hbm_read.py | tee "$OUT/hbm-read.txt"
for ty in Q4_K Q8_0; do /tmp/b/rayo synth /tmp/llama1b-$ty.gguf --shape llama-3.2-1b --type $ty --tokenizer $M >/dev/null; done
rows() { grep -o '"op":"[a-z0-9]*".*tokens_per_s":[0-9.]*' | sed 's/"model.*tokens_per_s"//' | tr '\n' ' '; echo; }
for i in 1 2; do
  for f in /tmp/llama1b-Q4_K.gguf /tmp/llama1b-Q8_0.gguf; do
    printf '%s default: ' "$(basename $f)"; /tmp/b/rayo bench --model $f --backend cuda --json 2>/dev/null | rows
    printf '%s f32 decode: ' "$(basename $f)"; RAYO_CUDA_DECODE=f32 /tmp/b/rayo bench --model $f --backend cuda --json 2>/dev/null | rows
  done
  printf 'smollm2-135m-q4_1 default: '; /tmp/b/rayo bench --model $M --backend cuda --json 2>/dev/null | rows
done | tee "$OUT/final.txt"
