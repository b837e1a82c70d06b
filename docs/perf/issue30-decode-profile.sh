#!/usr/bin/env bash
# Where one decoding step's time goes on the GPU machine (issue 30): Nsight Compute's duration
# and DRAM bytes of every kernel of `rayo generate` (a 5-token prompt, then 4 decoded tokens,
# each a graph replay whose kernels ncu profiles one by one), for the synth shapes in $SHAPES;
# the kernels of the last decoded token summed per name by docs/perf/ncu_decode.py, beside
# `rayo bench --model --backend cuda` (tg128, the same file). Run from the repository root
# with $BIN/rayo.gz (default dev-bin/p30) and dev-bin/b1/tok.gguf carried; CSVs into $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BIN=${BIN:-dev-bin/p30}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
mkdir -p /tmp/n && gunzip -c $BIN/rayo.gz >/tmp/n/rayo && chmod +x /tmp/n/rayo
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
for spec in ${SHAPES:-qwen2-0.5b:Q5_0 gemma3-270m:Q5_0 llama-3.2-1b:Q4_K}; do
  shape=${spec%%:*} ty=${spec##*:}
  f=/tmp/n/$shape-$ty.gguf
  /tmp/n/rayo synth $f --shape $shape --type $ty --tokenizer dev-bin/b1/tok.gguf >/dev/null
  echo "## $shape $ty"
  /tmp/n/rayo bench --model $f --backend cuda 2>&1 | grep -E "tg128|graph replay"
  timeout 200 $NCU --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
    /tmp/n/rayo generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 4 --temperature 0 \
    >$OUT/ncu-$shape.csv 2>/dev/null
  python3 docs/perf/ncu_decode.py $OUT/ncu-$shape.csv | head -30
done
