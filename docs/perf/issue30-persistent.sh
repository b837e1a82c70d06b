#!/usr/bin/env bash
# Issue 30, part 1: the recorded one-token step replayed as persistent kernels
# (RAYO_CUDA_PERSISTENT, rayo::cuda::CudaDevice::persistent) against the same binary replaying
# the CUDA graph, in one call on the GPU machine. Carries dev-bin/new/rayo.gz,
# dev-bin/new/cuda_persistent.gz (the bit-equality test of a persistent replay) and
# dev-bin/b1/tok.gguf. Variants: graph (RAYO_CUDA_PERSISTENT=0), pN (N blocks of 128 threads
# an SM at most; p1 = as many as fit), pNsS (N blocks an SM of S sub-blocks of 128 threads,
# RAYO_CUDA_PERSISTENT_SUBS=S). Same kernels, same values: the greedy md5 must not change.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/f
gunzip -c dev-bin/new/rayo.gz >/tmp/f/rayo && chmod +x /tmp/f/rayo
gunzip -c dev-bin/new/cuda_persistent.gz >/tmp/f/cuda_persistent && chmod +x /tmp/f/cuda_persistent
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
echo "## cuda_persistent"
RAYO_REQUIRE_CUDA=1 /tmp/f/cuda_persistent --nocapture 2>&1 | grep -vE "^$" | tail -8
python3 docs/perf/issue30-read-stream.py
variant() {
  local v=$1; shift
  case $v in
    graph) RAYO_CUDA_PERSISTENT=0 timeout 120 /tmp/f/rayo "$@" ;;
    p*s*) local b=${v#p}; RAYO_CUDA_PERSISTENT=${b%s*} RAYO_CUDA_PERSISTENT_SUBS=${b#*s} timeout 120 /tmp/f/rayo "$@" ;;
    p*) RAYO_CUDA_PERSISTENT=${v:1} timeout 120 /tmp/f/rayo "$@" ;;
  esac
}
shape() {
  local shape=$1 ty=$2 v r
  shift 2
  local f=/tmp/f/$shape-$ty.gguf
  /tmp/f/rayo synth $f --shape $shape --type $ty --tokenizer dev-bin/b1/tok.gguf >/dev/null
  echo "## $shape $ty"
  RUST_LOG=info RAYO_CUDA_PERSISTENT=1 RAYO_CUDA_PERSISTENT_SUBS=4 timeout 120 /tmp/f/rayo generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 4 --temperature 0 2>&1 | grep -iE "persistent|one-token step|error" | head -8
  for r in 1 2; do
    for v in "$@"; do
      variant $v bench --model $f --backend cuda 2>&1 | grep -E "^(tg)|rror" | sed "s/^/$v: /"
    done
  done
  for v in "$@"; do
    variant $v generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/$v greedy md5: /"
  done
  rm -f $f
}
shape llama-3.2-1b Q4_K ${VARIANTS:-graph p1 p2 p4 p8}
if [ -n "${MORE:-}" ]; then
  shape smollm2-135m Q4_1 ${MORE_VARIANTS:-graph p4}
  shape llama-3.1-8b Q4_K ${MORE_VARIANTS:-graph p4}
fi
python3 docs/perf/issue30-read-stream.py
