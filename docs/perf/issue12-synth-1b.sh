#!/usr/bin/env bash
# Decoding a 1B-class model on the GPU machine (issue 12, item 5): `rayo synth` writes Llama 3.2
# 1B's shape with random weights (speed does not depend on their values) and `rayo bench
# --backend cuda` measures pp512 and tg128; the weight bytes read per token over the time per
# token is the fraction of HBM bandwidth decoding reaches, next to a read-only stream of the
# same GPU measured by PyTorch (a 4 GiB sum) in the same run.
# usage (on the GPU machine, binaries in /tmp/b: rayo and tok.gguf, a small model whose
# tokenizer the synthetic file takes): OUT=DIR docs/perf/issue12-synth-1b.sh [TYPES...]
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
TYPES=${*:-Q4_K}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu-1b.txt"
python3 docs/perf/hbm_read.py | tee "$OUT/hbm-read.txt"
for ty in $TYPES; do
  f=/tmp/llama1b-$ty.gguf
  /tmp/b/rayo synth "$f" --shape llama-3.2-1b --type "$ty" --tokenizer /tmp/b/tok.gguf | tee -a "$OUT/synth-1b.txt"
  /tmp/b/rayo bench --model "$f" --backend cuda 2>&1 | grep -E "model|pp512|tg128|graph" | tee -a "$OUT/synth-1b.txt"
  /tmp/b/rayo bench --model "$f" --backend cuda --json 2>&1 | grep tokens_per_s | tee -a "$OUT/synth-1b.txt"
done
