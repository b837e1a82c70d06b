#!/usr/bin/env bash
# Issue 30, part 1: the narrowing folded into the products before it (QMatvecKernel::then_narrow)
# against the binary before, in one call on the GPU machine. Carries dev-bin/base/rayo.gz (before),
# dev-bin/new/rayo.gz (after) and dev-bin/b1/tok.gguf. For each shape in $SHAPES: `rayo bench
# --model --backend cuda` (pp512, tg128) with each binary, alternated twice, and the greedy text
# of both (default 8-bit activations: the fold must not change a bit of it); PyTorch's read
# stream first and last.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/f
for b in base new; do gunzip -c dev-bin/$b/rayo.gz >/tmp/f/rayo-$b && chmod +x /tmp/f/rayo-$b; done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 docs/perf/issue30-read-stream.py
for spec in ${SHAPES:-llama-3.2-1b:Q4_K llama-3.1-8b:Q4_K qwen2-0.5b:Q5_0 gemma3-270m:Q5_0}; do
  shape=${spec%%:*} ty=${spec##*:}
  f=/tmp/f/$shape-$ty.gguf
  /tmp/f/rayo-base synth $f --shape $shape --type $ty --tokenizer dev-bin/b1/tok.gguf >/dev/null
  echo "## $shape $ty"
  for r in 1 2; do
    for b in base new; do
      /tmp/f/rayo-$b bench --model $f --backend cuda 2>&1 | grep -E "^(pp|tg)" | sed "s/^/$b: /"
    done
  done
  for b in base new; do
    /tmp/f/rayo-$b generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 2>/dev/null | md5sum | sed "s/^/$b greedy md5: /"
  done
  /tmp/f/rayo-new bench --model $f --backend cuda 2>&1 | grep -E "graph replay"
done
python3 docs/perf/issue30-read-stream.py
