#!/usr/bin/env bash
# Where a prompt's time goes on the GPU machine (issue 12, prefill): `ncu` (clocks and caches as
# they run) over the first pp512 pass of `rayo bench --model … --backend cuda` (its warm-up: one
# 512-token batch), the device time summed per kernel. Run there from the repository root with the binaries in
# /tmp/b and the model in /tmp/m (see issue12-cuda.sh). Output in $OUT (default /tmp/out).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
model=${1:-/tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf}
launches=${LAUNCHES:-700}
timeout 300 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-count "$launches" \
  /tmp/b/rayo bench --model "$model" --backend cuda --json 2>/dev/null >/tmp/ncu-pp.csv
python3 docs/perf/ncu_summary.py /tmp/ncu-pp.csv | tee "$OUT/ncu-prefill.txt"
