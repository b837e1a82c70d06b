#!/usr/bin/env bash
# Where a 512-token prompt's time goes on the GPU machine (issue 29: Gemma 3's and Qwen2.5's
# CUDA prefill): Nsight Compute's duration of every kernel of `rayo generate` on a prompt of
# ~512 tokens and one generated token (the prompt's pass only), summed per kernel name by
# docs/perf/ncu_summary.py, for the synth shapes in $SHAPES (shape:type). Then the
# `rayo bench --model --backend cuda` rows of the same file. Run from the repository root with
# $BIN/rayo.gz (default dev-bin/p30) and dev-bin/b1/tok.gguf carried; CSVs into $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BIN=${BIN:-dev-bin/p30}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
mkdir -p /tmp/n && gunzip -c $BIN/rayo.gz >/tmp/n/rayo && chmod +x /tmp/n/rayo
prompt=$(python3 -c "print(' '.join(['the quick brown fox jumps over the lazy dog'] * 56))")
for spec in ${SHAPES:-gemma3-270m:Q5_0 qwen2-0.5b:Q5_0}; do
  shape=${spec%%:*} ty=${spec##*:}
  f=/tmp/n/$shape-$ty.gguf
  [ -f $f ] || /tmp/n/rayo synth $f --shape $shape --type $ty --tokenizer dev-bin/b1/tok.gguf >/dev/null
  echo "## $shape $ty"
  /tmp/n/rayo bench --model $f --backend cuda 2>&1 | grep -E "pp512|tg128"
  /tmp/n/rayo generate --model $f --backend cuda --prompt "$prompt" --max-tokens 1 --temperature 0 2>&1 >/dev/null | tail -1
  timeout 240 $NCU --metrics gpu__time_duration.sum --csv \
    /tmp/n/rayo generate --model $f --backend cuda --prompt "$prompt" --max-tokens 1 --temperature 0 >$OUT/ncu-prefill-$shape.csv 2>/dev/null
  python3 docs/perf/ncu_summary.py $OUT/ncu-prefill-$shape.csv | head -24
done
