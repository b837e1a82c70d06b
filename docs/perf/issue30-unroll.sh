#!/usr/bin/env bash
# Issue 30, part 1: the quantized products taking 1, 2 or 4 work items a thread per pass of
# their loop (QMatvecKernel::unrolled: the loads of all of them issued before the sums), and a
# block per row for Q4_K's 8-bit products from 4,096 values a row on (a down projection), against
# the binary before, in one call on the GPU machine. Carries dev-bin/base/rayo.gz (before),
# dev-bin/new/rayo.gz (after), dev-bin/new/cuda_llm.gz (the CUDA tests of the LLM kernels, with
# the unrolled variants' bit-equality tests) and dev-bin/b1/tok.gguf (`rayo synth --shape tiny
# --tokenizer SmolLM2-135M-Instruct.Q4_1.gguf`). Variants: base (before); uN (after,
# RAYO_CUDA_MATVEC_UNROLL=N); uNw (after, N items a pass, RAYO_CUDA_MATVEC=warp: a warp per row
# everywhere, as before the long-row rule). All after with RAYO_CUDA_PREFETCH_MIB=0. For each
# shape in $SHAPES: `rayo bench --model --backend cuda` (pp512, tg128), the variants alternated
# twice, and each one's greedy md5 (the same sums in the same order: it must not change).
# PyTorch's read stream first and last. Binaries: `cargo build --release -p rayo-cli`, `cargo
# test -p rayo --features cuda --release --test cuda_llm --no-run`, gzipped.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/f
for b in base new; do gunzip -c dev-bin/$b/rayo.gz >/tmp/f/rayo-$b && chmod +x /tmp/f/rayo-$b; done
gunzip -c dev-bin/new/cuda_llm.gz >/tmp/f/cuda_llm && chmod +x /tmp/f/cuda_llm
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
echo "## cuda_llm tests"
/tmp/f/cuda_llm --test-threads 1 2>&1 | grep -E "^test |test result|panicked|cuda device" | sort | uniq -c | sort -rn | head -20
python3 docs/perf/issue30-read-stream.py
variant() {
  local v=$1; shift
  case $v in
    base) /tmp/f/rayo-base "$@" ;;
    u*w) RAYO_CUDA_PREFETCH_MIB=0 RAYO_CUDA_MATVEC=warp RAYO_CUDA_MATVEC_UNROLL=${v:1:1} /tmp/f/rayo-new "$@" ;;
    u*) RAYO_CUDA_PREFETCH_MIB=0 RAYO_CUDA_MATVEC_UNROLL=${v:1:1} /tmp/f/rayo-new "$@" ;;
  esac
}
for spec in ${SHAPES:-llama-3.2-1b:Q4_K:base,u1,u1w,u2,u2w,u4 llama-3.1-8b:Q4_K:base,u1,u2,u4 smollm2-135m:Q4_1:base,u1,u2,u4}; do
  IFS=: read shape ty vs <<<"$spec"
  variants=${vs//,/ }
  f=/tmp/f/$shape-$ty.gguf
  /tmp/f/rayo-base synth $f --shape $shape --type $ty --tokenizer dev-bin/b1/tok.gguf >/dev/null
  echo "## $shape $ty"
  for r in 1 2; do
    for v in $variants; do
      variant $v bench --model $f --backend cuda 2>&1 | grep -E "^(pp|tg)" | sed "s/^/$v: /"
    done
  done
  for v in $variants; do
    variant $v generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/$v greedy md5: /"
  done
  rm -f $f
done
python3 docs/perf/issue30-read-stream.py
