#!/usr/bin/env bash
# A/B of rayo builds on the GPU machine, same call: for each synth shape in $SHAPES (default
# gemma3-270m qwen2-0.5b; Q5_0, whose 32-value blocks take rows of 640 and 896), `rayo bench
# --model --backend cuda` (pp512, tg128) of each build named as an argument (folders holding
# rayo.gz, carried by the `run` tool), alternating, $REPS times (default 3). Run from the
# repository root with dev-bin/b1/tok.gguf (a tiny GGUF with SmolLM2's tokenizer) carried too.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/ab
for b in "$@"; do
  mkdir -p /tmp/ab/$(basename $b) && gunzip -c $b/rayo.gz >/tmp/ab/$(basename $b)/rayo && chmod +x /tmp/ab/$(basename $b)/rayo
done
first=/tmp/ab/$(basename $1)/rayo
for shape in ${SHAPES:-gemma3-270m qwen2-0.5b}; do
  [ -f /tmp/ab/$shape.gguf ] || $first synth /tmp/ab/$shape.gguf --shape $shape --type Q5_0 --tokenizer dev-bin/b1/tok.gguf >/dev/null
  for r in $(seq ${REPS:-3}); do
    for b in "$@"; do
      echo "## $shape $(basename $b) repetition $r"
      /tmp/ab/$(basename $b)/rayo bench --model /tmp/ab/$shape.gguf --backend cuda 2>&1 | grep -E "^(pp|tg)|graph replay"
    done
  done
done
