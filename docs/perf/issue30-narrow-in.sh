#!/usr/bin/env bash
# Issue 30, part 1: the products narrowing their own input (QMatvecKernel::narrowing_in: each
# block narrows its f32 row into shared memory, no narrowing launch) against the binary before,
# in one call on the GPU machine. Carries dev-bin/base/rayo.gz (before), dev-bin/new/rayo.gz
# (after), dev-bin/new/cuda_llm.gz (the CUDA tests of the LLM kernels, with the new kernels'
# bit-equality test) and dev-bin/b1/tok.gguf. For each shape in $SHAPES: `rayo bench --model
# --backend cuda` (pp512, tg128) with the binary before and after (RAYO_CUDA_NARROW_IN=auto),
# alternated twice; on the first shape also after with off, 1, 2 and 4 rows a warp; and the
# greedy text's md5 of each (the kernels give the narrowing launch's bits: it must not change).
# PyTorch's read stream first and last. The binary after (and the test binary) are built from the
# tree with docs/perf/issue30/narrow-in-attempt.diff applied (`git apply`): `cargo build
# --release -p rayo-cli`, `cargo test -p rayo --features cuda --release --test cuda_llm --no-run`.
# (The run recorded in docs/perf/issue30/narrow-in-h200.txt spelled `variant` out inline; the same
# commands.)
# (The setup now comes from docs/perf/issue30-ab.sh, with the same commands.)
. docs/perf/issue30-ab.sh
ab_setup
# `variant VARIANT ARGS...`: the binary before (base), or after with RAYO_CUDA_NARROW_IN=VARIANT
variant() {
  local v=$1; shift
  if [ $v = base ]; then /tmp/f/rayo-base "$@"; else RAYO_CUDA_NARROW_IN=$v /tmp/f/rayo-new "$@"; fi
}
first=1
for spec in ${SHAPES:-llama-3.2-1b:Q4_K smollm2-135m:Q4_1 llama-3.1-8b:Q4_K qwen2-0.5b:Q5_0}; do
  shape=${spec%%:*} ty=${spec##*:}
  f=/tmp/f/$shape-$ty.gguf
  /tmp/f/rayo-base synth $f --shape $shape --type $ty --tokenizer dev-bin/b1/tok.gguf >/dev/null
  echo "## $shape $ty"
  variants="base auto"
  if [ $first = 1 ]; then variants="base auto off 1 2 4"; fi
  for r in 1 2; do
    for v in $variants; do
      variant $v bench --model $f --backend cuda 2>&1 | grep -E "^(pp|tg)" | sed "s/^/$v: /"
    done
  done
  for v in $variants; do
    variant $v generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/$v greedy md5: /"
  done
  /tmp/f/rayo-new bench --model $f --backend cuda 2>&1 | grep -E "graph replay"
  first=0
  rm -f $f
done
python3 docs/perf/issue30-read-stream.py
