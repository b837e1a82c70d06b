#!/usr/bin/env bash
# Issue 30, part 2 on the GPU machine (run there from the repository root by the `run` tool,
# carrying $BIN (default dev-bin/p32) = rayo.gz and cuda-synth.gz (crates/rayo-cli/tests/
# cuda_synth.rs built here), and dev-bin/b1/tok.gguf (a tiny GGUF with SmolLM2's tokenizer)):
#   1. cuda_synth: the whole model's CUDA engine and 2 tensor-parallel CUDA ranks against the
#      CPU engine (tiny-llama3, tiny-qwen3, qwen2-0.5b, ...);
#   2. `rayo generate --backend cuda`, greedy, whole and on 2 ranks, on `rayo synth` files of
#      llama-3.2-1b (Q4_K) and llama-3.1-8b (Q4_K), with the default activations and with f32
#      ones (RAYO_CUDA_DECODE=f32 RAYO_CUDA_PREFILL=f32);
#   3. `rayo bench --model --backend cuda` whole and `--tensor-parallel 2` on the same files.
# Every GPU this machine has is listed first; ranks go to GPU r (or share GPU 0).
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BIN=${BIN:-dev-bin/p32}
mkdir -p /tmp/r
gunzip -c $BIN/rayo.gz >/tmp/r/rayo && chmod +x /tmp/r/rayo
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
# STEPS picks the sections (default "1 2 3"); SHAPES the synth shapes of 2 and 3, ACTS the
# activations of 2 ("default f32").
STEPS=${STEPS:-1 2 3}
if [[ " $STEPS " == *" 1 "* ]]; then
echo "== 1. cuda_synth"
gunzip -c $BIN/cuda-synth.gz >/tmp/r/cuda-synth && chmod +x /tmp/r/cuda-synth
RAYO_BIN=/tmp/r/rayo RAYO_SMOLLM2=dev-bin/b1/tok.gguf RAYO_REQUIRE_CUDA=1 /tmp/r/cuda-synth ${TESTS:-} --nocapture 2>&1 | grep -vE "^\s*$|^cuda device" || true
fi
for shape in ${SHAPES:-llama-3.2-1b llama-3.1-8b}; do
  /tmp/r/rayo synth /tmp/r/$shape.gguf --shape "$shape" --type Q4_K --tokenizer dev-bin/b1/tok.gguf >/dev/null
  # (random weights make logits nearly flat and every layer amplify rounding: 8-bit activations'
  # rounding, which a partial sum in another order moves by one step here and there, changes
  # them by ~1; f32 activations and the fp32 prompt path leave only the order of the sums)
  [[ " $STEPS " == *" 2 "* ]] && for acts in ${ACTS:-default f32}; do
    echo "== 2. $shape Q4_K: greedy text, whole and on 2 ranks ($acts activations)"
    for tp in 1 2; do
      env $([ $acts = f32 ] && echo RAYO_CUDA_DECODE=f32 RAYO_CUDA_PREFILL=f32) /tmp/r/rayo generate --model /tmp/r/$shape.gguf --backend cuda \
        --tensor-parallel $tp --prompt "The capital of France is" --max-tokens 24 --temperature 0 2>/tmp/r/err.txt | tr '\n' ' ' | cut -c1-200
      echo
      tail -1 /tmp/r/err.txt
    done
  done
  [[ " $STEPS " == *" 3 "* ]] && echo "== 3. $shape Q4_K: rayo bench --model --backend cuda, whole and on 2 ranks" && for tp in 1 2; do
    /tmp/r/rayo bench --model /tmp/r/$shape.gguf --backend cuda --tensor-parallel $tp 2>&1 | grep -E "^(pp|tg)"
  done
  rm -f /tmp/r/$shape.gguf
done
