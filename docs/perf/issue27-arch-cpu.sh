#!/usr/bin/env bash
# Issue 27 on the dev VM's CPU (2 vCPUs, AVX-512): the engine before this work (rayo built at
# 8834634) and after (architectures as data, BatchSession, batch-invariant Q4_K/Q5_K products),
# same run, alternating; greedy text of each, then `rayo bench --model` rows.
# usage: docs/perf/issue27-arch-cpu.sh BEFORE_BIN AFTER_BIN  (models from scripts/fetch-*.sh;
# the Llama-3.2-1B Q4_K shape from `rayo synth`)
set -euo pipefail
before=$1 after=$2
m=.cache/models
l1b=/tmp/llama-3.2-1b-Q4_K.gguf
[ -f $l1b ] || $after synth $l1b --shape llama-3.2-1b --type Q4_K --tokenizer $m/SmolLM2-135M-Instruct.Q4_1.gguf >/dev/null
models=("$m/SmolLM2-135M-Instruct.Q4_1.gguf" "$m/SmolLM2-135M-Instruct.Q4_K_M.gguf" "$m/Qwen2.5-Coder-0.5B-Instruct.gguf" "$l1b")
for f in "${models[@]}"; do
  for b in $before $after; do
    printf '%s %s: ' "$(basename $f .gguf)" "$(basename $b)"
    $b generate --model $f --prompt 'def fibonacci(n):' --temperature 0 --max-tokens 32 --threads 2 2>/dev/null | md5sum
  done
done
rows() { sed -E 's/.*"op":"([a-z0-9]+)".*"tokens_per_s":([0-9.]+).*/\1 \2/' | tr '\n' ' '; echo; }
for r in 1 2 3; do
  for f in "${models[@]}"; do
    for t in 1 2; do
      [ $t = 1 ] && [[ $f != *Q4_1* ]] && continue
      for b in $before $after; do
        printf '%s t%s %s: ' "$(basename $f .gguf)" $t "$(basename $b)"
        $b bench --model $f --threads $t --json 2>&1 | grep tokens_per_s | rows
      done
    done
  done
done
