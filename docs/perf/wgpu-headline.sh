#!/usr/bin/env bash
# The headline run for docs/perf/wgpu-*.md: a warm-up, then the full plan (7 samples of 0.2 s)
# for the 100M-float rows under each RAYO_WGPU_EW_ITEMS, reductions, matmul 4096², the 1K round
# trip, then PyTorch with 1.4 s per row. Same layout as wgpu-run.sh (.devbin-gpu/, .gl/).
set -uo pipefail
. "$(dirname "$0")/gpu-env.sh"
$B/rayo bench --backend wgpu --quick --op matmul --size 4096 >/dev/null 2>&1   # clocks up
for p in 1 2 4; do
  RAYO_WGPU_EW_ITEMS=$p $B/rayo bench --backend wgpu --json --op add --op relu --op gelu --op fused3 --op unfused3 \
    --size 100000000 2>/dev/null | sed "s/}\$/,\"ew_items\":$p}/" | tee -a "$OUT/ew.jsonl"
done
$B/rayo bench --backend wgpu --json --op sum --op dot --op softmax --size 100000000 2>/dev/null | tee -a "$OUT/wgpu.jsonl"
$B/rayo bench --backend wgpu --json --op matmul --size 4096 2>/dev/null | tee -a "$OUT/wgpu.jsonl"
$B/rayo bench --backend wgpu --json --op add --size 1000 2>/dev/null | tee -a "$OUT/wgpu.jsonl"
python3 docs/perf/wgpu_torch.py --sizes 1000,100000000 --matmul 4096 --min-time 1.4 | tee "$OUT/torch.jsonl"
