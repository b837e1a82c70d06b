#!/usr/bin/env bash
# Issue 30, part 1: each decoding product fetching the next product's weights into L2 as it
# runs (QMatvecKernel::prefetching, the schedule in crates/rayo-llm/src/cuda/ahead.rs) against
# the binary before, in one call on the GPU machine. Carries dev-bin/base/rayo.gz (before),
# dev-bin/new/rayo.gz (after), dev-bin/new/cuda_llm.gz (the CUDA tests of the LLM kernels, with
# the prefetching variant's bit-equality test) and dev-bin/b1/tok.gguf (`rayo synth --shape tiny
# --tokenizer SmolLM2-135M-Instruct.Q4_1.gguf`). For each shape in $SHAPES: `rayo bench --model
# --backend cuda` (pp512, tg128) with the binary before and after at RAYO_CUDA_PREFETCH_MIB =
# each of $MIBS (0: no fetching ahead), alternated twice, and the greedy text's md5 of each (a
# prefetch changes no value: it must not change). PyTorch's read stream first and last.
# Binaries: `cargo build --release -p rayo-cli`, `cargo test -p rayo --features cuda --release
# --test cuda_llm --no-run`, gzipped.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/f
for b in base new; do gunzip -c dev-bin/$b/rayo.gz >/tmp/f/rayo-$b && chmod +x /tmp/f/rayo-$b; done
gunzip -c dev-bin/new/cuda_llm.gz >/tmp/f/cuda_llm && chmod +x /tmp/f/cuda_llm
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
echo "## cuda_llm tests"
/tmp/f/cuda_llm --test-threads 1 2>&1 | grep -E "^test |test result|panicked|cuda device" | sort | uniq -c | sort -rn | head -20
python3 docs/perf/issue30-read-stream.py
# `variant VARIANT ARGS...`: the binary before (base), or after with RAYO_CUDA_PREFETCH_MIB=VARIANT
variant() {
  local v=$1; shift
  if [ $v = base ]; then /tmp/f/rayo-base "$@"; else RAYO_CUDA_PREFETCH_MIB=$v /tmp/f/rayo-new "$@"; fi
}
first=1
for spec in ${SHAPES:-llama-3.2-1b:Q4_K smollm2-135m:Q4_1 llama-3.1-8b:Q4_K}; do
  shape=${spec%%:*} ty=${spec##*:}
  f=/tmp/f/$shape-$ty.gguf
  /tmp/f/rayo-base synth $f --shape $shape --type $ty --tokenizer dev-bin/b1/tok.gguf >/dev/null
  echo "## $shape $ty"
  variants="base 32"
  if [ $first = 1 ]; then variants="base ${MIBS:-0 4 16 32 64}"; fi
  for r in 1 2; do
    for v in $variants; do
      variant $v bench --model $f --backend cuda 2>&1 | grep -E "^(pp|tg)" | sed "s/^/$v: /"
    done
  done
  for v in $variants; do
    variant $v generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/$v greedy md5: /"
  done
  first=0
  rm -f $f
done
python3 docs/perf/issue30-read-stream.py
