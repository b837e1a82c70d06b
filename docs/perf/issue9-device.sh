#!/usr/bin/env bash
# What ran on the lent H100 for docs/perf/issue9-h100.md (the foundation issue: op registry,
# shapes as kernel arguments, sound runtimes). From the repository root, with x86-64 release
# builds carried in .devbin-gpu/:
#   rayo-before  the `rayo` CLI at 7dbad93 (before the issue)
#   rayo         the `rayo` CLI after it
#   parity cuda gpu   the test binaries of crates/rayo/tests/{parity,cuda,gpu}.rs (features gpu,cuda)
# and libvulkan1 in .gl/*.deb. SKIP_CUDA=1 runs the wgpu part alone.
set -uo pipefail
. "$(dirname "$0")/gpu-env.sh"
$B/rayo info 2>&1 | grep -Ei "cuda|wgpu|nvidia" | head -5
echo "== correctness on this GPU: every op x backend (parity), CUDA and wgpu tests"
RAYO_REQUIRE_CUDA=1 RAYO_REQUIRE_GPU=1 $B/parity --nocapture 2>&1 | grep -E "^test |test result|parity|panicked|mismatch|  [a-z_]+\(" | tee "$OUT/tests.txt"
[ "${SKIP_CUDA:-0}" = 1 ] || RAYO_REQUIRE_CUDA=1 $B/cuda 2>&1 | grep -E "^test |test result|panicked" | tee -a "$OUT/tests.txt"
RAYO_REQUIRE_GPU=1 $B/gpu 2>&1 | grep -E "^test |test result|panicked" | tee -a "$OUT/tests.txt"
echo "== speed, before and after, interleaved (two rounds each)"
$B/rayo bench --backend wgpu --quick --op matmul --size 4096 >/dev/null 2>&1   # clocks up
CUDA_OPS="--op gemm --op add --op sigmoid --op fused --op sum --op dot --op max --op softmax --op log_softmax --op layernorm --op rmsnorm --op roundtrip_add --op graph_chain"
WGPU_OPS="--op add --op relu --op gelu --op tanh --op sigmoid --op sum --op dot --op softmax --op fused3"
for round in 1 2; do
  for v in rayo-before rayo; do
    [ "${SKIP_CUDA:-0}" = 1 ] || $B/$v bench --backend cuda --json $CUDA_OPS 2>/dev/null | sed "s/^{/{\"bin\":\"$v\",\"round\":$round,/" | tee -a "$OUT/cuda.jsonl"
    $B/$v bench --backend wgpu --json --size 100000000 $WGPU_OPS 2>/dev/null | sed "s/^{/{\"bin\":\"$v\",\"round\":$round,/" | tee -a "$OUT/wgpu.jsonl"
  done
done
[ "${SKIP_CUDA:-0}" = 1 ] && exit 0
echo "== PyTorch, same run (the after rows' ops and sizes)"
grep '"bin":"rayo",' "$OUT/cuda.jsonl" | grep '"round":1' > /tmp/after1.jsonl
python3 docs/perf/cuda_torch_ref.py /tmp/after1.jsonl "$OUT/torch.jsonl" 2>&1 | tail -30
