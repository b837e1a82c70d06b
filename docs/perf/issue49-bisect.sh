#!/usr/bin/env bash
# Where the CUDA wide steps' logits moved (issue 49): tests/cuda_batch.rs's "24 rows a step"
# largest difference from each sequence alone was 0.049 at a24b9c2 (docs/perf/issue29/
# cuda-all-2.txt, H200) and 0.467 at 8be7ce5 (this issue, H100); the f16 prefill's from the CPU's
# f32 path 0.081 (issue 27) and 0.516. The emitted PTX of every kernel but flash attention is
# byte-identical between the two (rayo-ptx's ptx_dump), so the change is on the host side or in
# flash attention.
#
# Here: builds the cuda_batch test binary at each commit below (a worktree in /work/bisect, its
# own target dir; ~3 min each on 2 cores) and packs them into target/gpu-bisect/ (2.5 MB).
# There, after scripts/gpu-test.sh --device has put SmolLM2 in .cache/models (the same call,
# carrying target/gpu-bisect beside the last chunk):
#   docs/perf/issue49-bisect.sh --device
# prints each commit's "24 rows a step" and "prompts beside decoding rows" lines.
set -euo pipefail
cd "$(dirname "$0")/../.."
COMMITS="a24b9c2 6d90b13 d7025b7 e092fc7 f0e43f7 18e3339 8be7ce5"
if [ "${1:-}" = --device ]; then
  mkdir -p /tmp/bis
  xz -dc target/gpu-bisect/bins.tar.xz | tar -C /tmp/bis -xf -
  for c in $COMMITS; do
    echo "== $c"
    RAYO_REQUIRE_CUDA=1 RAYO_SMOLLM2=$PWD/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      /tmp/bis/cuda_batch-$c --test-threads 1 --nocapture prompts_beside 2>&1 | grep -E "a step:|beside decoding rows:|test result" | cut -c1-400 || true
  done
  # this tree's binaries (unpacked by gpu-test.sh --device), with programmatic dependent launch
  # on (the default) and off
  smol=$PWD/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
  for pdl in 1 0; do
    echo "== HEAD, RAYO_CUDA_PDL=$pdl"
    (cd crates/rayo-llm && RAYO_CUDA_PDL=$pdl RAYO_REQUIRE_CUDA=1 RAYO_SMOLLM2=$smol \
      /tmp/rayo-gpu-test/bin/rayo-llm__cuda_batch --test-threads 1 --nocapture prompts_beside 2>&1 |
      grep -E "a step:|beside decoding rows:|test result" | cut -c1-400 || true)
  done
  exit 0
fi
root=$PWD
git worktree add -f /work/bisect "${COMMITS%% *}" >/dev/null 2>&1 || true
mkdir -p /tmp/bisect-bins
for c in $COMMITS; do
  (cd /work/bisect && git checkout -q -f "$c")
  exe=$(cd /work/bisect && CARGO_TARGET_DIR=/work/bisect-target cargo test -p rayo-llm --release --features cuda --test cuda_batch --no-run --message-format=json 2>/dev/null |
    python3 -c "import json, sys; print([m['executable'] for m in map(json.loads, sys.stdin) if m.get('executable') and m['target']['name'] == 'cuda_batch'][-1])")
  cp "$exe" "/tmp/bisect-bins/cuda_batch-$c"
  echo "$c: $exe"
done
mkdir -p "$root/target/gpu-bisect"
tar -C /tmp/bisect-bins -cf - . | xz -T2 -6 >"$root/target/gpu-bisect/bins.tar.xz"
echo "target/gpu-bisect/bins.tar.xz: carry it beside the last chunk of scripts/gpu-test.sh and append '; docs/perf/issue49-bisect.sh --device' to that call's command"
