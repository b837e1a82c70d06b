#!/usr/bin/env bash
# Issue 30, part 1: what launches cost the 1B step. In one call on the GPU machine: PyTorch's
# read stream; docs/perf/issue30-launch-floor.py (the step's 148 dependent kernels and bytes in
# PyTorch's own kernels, as a CUDA graph); and `rayo bench --model --backend cuda` on the
# llama-3.2-1b Q4_K shape with programmatic dependent launch on and off (RAYO_CUDA_PDL) and the
# step's graph on and off (RAYO_CUDA_GRAPHS), twice alternated. Carries dev-bin/base/rayo.gz
# (`cargo build --release -p rayo-cli`, gzipped) and dev-bin/b1/tok.gguf.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/f
gunzip -c dev-bin/base/rayo.gz >/tmp/f/rayo && chmod +x /tmp/f/rayo
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 docs/perf/issue30-read-stream.py
python3 docs/perf/issue30-launch-floor.py
f=/tmp/f/1b.gguf
/tmp/f/rayo synth $f --shape llama-3.2-1b --type Q4_K --tokenizer dev-bin/b1/tok.gguf >/dev/null
for r in 1 2; do
  for v in "1 1" "0 1" "1 0"; do
    set -- $v
    RAYO_CUDA_PDL=$1 RAYO_CUDA_GRAPHS=$2 /tmp/f/rayo bench --model $f --backend cuda 2>&1 | grep -E "^tg" | sed "s/^/pdl=$1 graphs=$2: /"
  done
done
python3 docs/perf/issue30-launch-floor.py
