#!/usr/bin/env bash
# Issue 30, part 2: the embedding table split by vocabulary rows, on the one lent H200. Carries
# dev-bin/base/rayo.gz (before), dev-bin/new/rayo.gz (after), dev-bin/new/cuda_synth.gz
# (`cargo test --release -p rayo-cli --test cuda_synth --no-run`) and dev-bin/b1/tok.gguf (a tiny
# GGUF with SmolLM2's tokenizer). Runs the CUDA tensor-parallel test (2 CUDA ranks against the
# CPU engine), then the llama-3.2-1b Q4_K shape's greedy md5 and `rayo bench --model` on 1 and 2
# ranks (both on GPU 0: threads, sums through the host), before and after: adding the other
# ranks' zero rows leaves the embedding's bits as they were, so the md5 must not change.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/f
for b in base new; do gunzip -c dev-bin/$b/rayo.gz >/tmp/f/rayo-$b && chmod +x /tmp/f/rayo-$b; done
gunzip -c dev-bin/new/cuda_synth.gz >/tmp/f/cuda_synth && chmod +x /tmp/f/cuda_synth
nvidia-smi --query-gpu=name --format=csv,noheader
echo "## cuda_synth tensor_parallel"
RAYO_SMOLLM2=dev-bin/b1/tok.gguf RAYO_BIN=/tmp/f/rayo-new RAYO_REQUIRE_CUDA=1 /tmp/f/cuda_synth tensor_parallel --nocapture --test-threads 1 2>&1 | grep -E "ranks|test result|panicked|SKIP" | head -20
f=/tmp/f/1b.gguf
/tmp/f/rayo-base synth $f --shape llama-3.2-1b --type Q4_K --tokenizer dev-bin/b1/tok.gguf >/dev/null
for b in base new; do
  for tp in 1 2; do
    echo "## $b, --tensor-parallel $tp"
    /tmp/f/rayo-$b generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 --tensor-parallel $tp 2>/dev/null | md5sum
    /tmp/f/rayo-$b bench --model $f --backend cuda --tensor-parallel $tp 2>&1 | grep -E "^(pp|tg)|error"
  done
done
