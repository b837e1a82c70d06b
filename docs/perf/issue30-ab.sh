#!/usr/bin/env bash
# Issue 30: the A/B harness that docs/perf/issue30-prefetch.sh and issue30-unroll.sh source (on
# the GPU machine, from the repository root). It expects dev-bin/base/rayo.gz (the binary
# before), dev-bin/new/rayo.gz (after), dev-bin/new/cuda_llm.gz (the CUDA tests of the LLM
# kernels) and dev-bin/b1/tok.gguf (a tiny GGUF with SmolLM2's tokenizer), and a function
# `variant NAME ARGS...` from the sourcing script that runs the binary of variant NAME.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# The binaries unpacked into /tmp/f, the GPU named, the CUDA tests run, PyTorch's read stream.
ab_setup() {
  mkdir -p /tmp/f
  for b in base new; do gunzip -c dev-bin/$b/rayo.gz >/tmp/f/rayo-$b && chmod +x /tmp/f/rayo-$b; done
  gunzip -c dev-bin/new/cuda_llm.gz >/tmp/f/cuda_llm && chmod +x /tmp/f/cuda_llm
  nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
  echo "## cuda_llm tests"
  /tmp/f/cuda_llm --test-threads 1 2>&1 | grep -E "^test |test result|panicked|cuda device" | sort | uniq -c | sort -rn | head -20
  python3 docs/perf/issue30-read-stream.py
}

# `ab_shape SHAPE TYPE VARIANT...`: the shape synthesized, `rayo bench --model --backend cuda`
# (pp512, tg128) of every variant alternated twice, then each variant's greedy md5 of 32 tokens.
ab_shape() {
  local shape=$1 ty=$2 v r
  shift 2
  local f=/tmp/f/$shape-$ty.gguf
  /tmp/f/rayo-base synth $f --shape $shape --type $ty --tokenizer dev-bin/b1/tok.gguf >/dev/null
  echo "## $shape $ty"
  for r in 1 2; do
    for v in "$@"; do
      variant $v bench --model $f --backend cuda 2>&1 | grep -E "^(pp|tg)" | sed "s/^/$v: /"
    done
  done
  for v in "$@"; do
    variant $v generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/$v greedy md5: /"
  done
  rm -f $f
}
