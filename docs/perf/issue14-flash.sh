#!/usr/bin/env bash
# Issue 14, item 3 on the GPU machine: rayo's Hopper flash attention against PyTorch SDPA in the
# same call, twice interleaved, after compute-sanitizer's memcheck, racecheck and synccheck over
# the f64 test. Run from the repository root there, with `.devbin-gpu/bins.tgz` holding the
# stripped `rayo` and the `tests/cuda.rs` binary (`rayo-cuda-test`) built on the dev VM.
set -u
mkdir -p /tmp/b && tar xzf .devbin-gpu/bins.tgz -C /tmp/b
here=$PWD
cd /tmp/b
export RAYO_REQUIRE_CUDA=1
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for t in memcheck racecheck synccheck; do
  echo "== $t"
  timeout 150 "$CS" --tool $t ./rayo-cuda-test wgmma_attention 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result"
done
for r in 1 2; do
  ./rayo bench --backend cuda --op flash_bf16 --op flash_bf16_causal --op flash_f16 --op flash_bf16_hd64 2>&1 | grep flash
  python3 "$here/docs/perf/issue14-sdpa.py" 2>&1 | grep -E "default|cudnn|flash "
done
