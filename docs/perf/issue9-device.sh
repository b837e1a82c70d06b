#!/usr/bin/env bash
# What ran on the lent H100 for docs/perf/issue9-h100.md (the foundation issue: op registry,
# shapes as kernel arguments, sound runtimes). From the repository root, with x86-64 release
# builds carried in .devbin-gpu/:
#   rayo-before  the `rayo` CLI at 7dbad93 (before the issue)
#   rayo         the `rayo` CLI after it
#   parity cuda gpu   the test binaries of crates/rayo/tests/{parity,cuda,gpu}.rs (features gpu,cuda)
# and libvulkan1 in .gl/*.deb (unpacked under .gl/root, never over /).
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" .gl/root; done
export LD_LIBRARY_PATH="$PWD/.gl/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export WGPU_BACKEND=vulkan PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=$(mktemp -d)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=.devbin-gpu
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if ! $B/rayo info 2>/dev/null | grep "^wgpu" | grep -q "NVIDIA"; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
$B/rayo info 2>&1 | grep -Ei "cuda|wgpu|nvidia" | head -5
echo "== correctness on this GPU: every op x backend (parity), CUDA and wgpu tests"
RAYO_REQUIRE_CUDA=1 RAYO_REQUIRE_GPU=1 $B/parity --nocapture 2>&1 | grep -E "^test |test result|parity|panicked|mismatch|  [a-z_]+\(" | tee "$OUT/tests.txt"
RAYO_REQUIRE_CUDA=1 $B/cuda 2>&1 | grep -E "^test |test result|panicked" | tee -a "$OUT/tests.txt"
RAYO_REQUIRE_GPU=1 $B/gpu 2>&1 | grep -E "^test |test result|panicked" | tee -a "$OUT/tests.txt"
echo "== speed, before and after, interleaved (two rounds each)"
CUDA_OPS="--op gemm --op add --op sigmoid --op fused --op sum --op dot --op max --op softmax --op log_softmax --op layernorm --op rmsnorm --op roundtrip_add --op graph_chain"
WGPU_OPS="--op add --op relu --op gelu --op sum --op dot --op softmax --op fused3"  # --quick: 5 samples of 20 ms
for round in 1 2; do
  for v in rayo-before rayo; do
    $B/$v bench --backend cuda --json $CUDA_OPS 2>/dev/null | sed "s/^{/{\"bin\":\"$v\",\"round\":$round,/" | tee -a "$OUT/cuda.jsonl"
    $B/$v bench --backend wgpu --json --quick --size 100000000 $WGPU_OPS 2>/dev/null | sed "s/^{/{\"bin\":\"$v\",\"round\":$round,/" | tee -a "$OUT/wgpu.jsonl"
  done
done
echo "== PyTorch, same run (the after rows' ops and sizes)"
grep '"bin":"rayo",' "$OUT/cuda.jsonl" | grep '"round":1' > /tmp/after1.jsonl
python3 docs/perf/cuda_torch_ref.py /tmp/after1.jsonl "$OUT/torch.jsonl" 2>&1 | tail -30
