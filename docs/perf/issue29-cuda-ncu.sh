#!/usr/bin/env bash
# Where a decoding step's time goes on the GPU machine: Nsight Compute's duration of every
# kernel of `rayo generate` (a 5-token prompt, 3 tokens: the graph's kernels profiled one by
# one) on the synth shapes in $SHAPES (default qwen2-0.5b gemma3-270m, Q5_0), summed per kernel
# name by docs/perf/ncu_summary.py. Run from the repository root with $BIN/rayo.gz (default
# dev-bin/g4) and dev-bin/b1/tok.gguf carried; CSVs into $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BIN=${BIN:-dev-bin/g4}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
mkdir -p /tmp/n && gunzip -c $BIN/rayo.gz >/tmp/n/rayo && chmod +x /tmp/n/rayo
for shape in ${SHAPES:-qwen2-0.5b gemma3-270m}; do
  /tmp/n/rayo synth /tmp/n/$shape.gguf --shape $shape --type Q5_0 --tokenizer dev-bin/b1/tok.gguf >/dev/null
  timeout 240 $NCU --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
    /tmp/n/rayo generate --model /tmp/n/$shape.gguf --backend cuda --prompt "The capital of France is" --max-tokens 3 --temperature 0 \
    >$OUT/ncu-$shape.csv 2>/dev/null
  echo "## $shape"
  grep -v "dram__bytes" $OUT/ncu-$shape.csv >/tmp/n/t.csv
  python3 docs/perf/ncu_summary.py /tmp/n/t.csv | head -25
done
