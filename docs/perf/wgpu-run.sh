#!/usr/bin/env bash
# What ran on the lent GPU for docs/perf/wgpu-*.md, from the repository root, with x86-64 release
# builds in .devbin-gpu/ (rayo, gpu-tests: the tests/gpu.rs binary) and libvulkan1 in .gl/*.deb.
set -uo pipefail
. "$(dirname "$0")/gpu-env.sh"
$B/rayo info | grep -E "^(cpu|threads|wgpu)"
echo "== correctness (tests/gpu.rs on this GPU)"
RAYO_REQUIRE_GPU=1 $B/gpu-tests 2>&1 | grep -E "^test |test result" | tee "$OUT/tests.txt"
echo "== wgpu rows"
$B/rayo bench --backend wgpu --json --quick --op add --op gelu --op sum \
  --size 1000 --size 10000 --size 100000 --size 1000000 --size 10000000 --size 100000000 | tee "$OUT/wgpu.jsonl"
$B/rayo bench --backend wgpu --json --quick --op relu --op dot --op softmax --op fused3 --op unfused3 \
  --size 1000 --size 1000000 --size 100000000 | tee -a "$OUT/wgpu.jsonl"
$B/rayo bench --backend wgpu --json --quick --op matmul --size 128 --size 256 --size 512 --size 1024 --size 2048 --size 4096 | tee -a "$OUT/wgpu.jsonl"
echo "== headline: 1K add round trip, full plan (7 samples of 0.2 s)"
$B/rayo bench --backend wgpu --json --op add --size 1000 | tee -a "$OUT/wgpu.jsonl"
echo "== torch rows"
python3 docs/perf/wgpu_torch.py --quick | tee "$OUT/torch.jsonl"
[ "${SKIP_CPU:-0}" = 1 ] && exit 0
echo "== cpu rows (for crossovers), all cores"
T=$(nproc)
$B/rayo bench --backend cpu --json --quick --op add --op gelu --op sum --threads "$T" \
  --size 1000 --size 10000 --size 100000 --size 1000000 --size 10000000 --size 100000000 | tee "$OUT/cpu.jsonl"
$B/rayo bench --backend cpu --json --quick --op matmul --threads "$T" --size 128 --size 256 --size 512 --size 1024 --size 2048 | tee -a "$OUT/cpu.jsonl"
