#!/usr/bin/env bash
# Issue 29 on the GPU machine (run there from the repository root by the `run` tool, carrying
# $BIN (default dev-bin/p29) = rayo.gz, cuda-synth.gz (crates/rayo-cli/tests/cuda_synth.rs built
# here), optionally cuda-ops.gz and cuda-batch.gz (crates/rayo-llm/tests/cuda_{ops,batch}.rs) and
# cuda-llm.gz (crates/rayo/tests/cuda_llm.rs), dev-bin/p29/ggml-vocab-phi-3.gguf,
# and dev-bin/b1/tok.gguf (a tiny GGUF with SmolLM2's tokenizer)):
#   1. the attention kernels against f64 (cuda-ops, cuda-llm: heads of 256, windows; cuda-batch's
#      batched decoding on the tiny synth model of tok.gguf), and the CUDA engine
#      against the CPU engine on tiny-llama3 / tiny-qwen3 / tiny-phi3 / tiny-gemma3 /
#      gemma3-270m synth files;
#   2. `rayo bench --model --backend cuda` (pp512, tg128) on full-size synth shapes of the new
#      architectures: qwen3-0.6b, phi3-mini, llama-3.2-1b (with Llama 3's rope_freqs), Q4_K, and
#      gemma3-270m, Q5_0.
# With the argument `all`: llama.cpp's build (below) started first, in the background, then 1 and 2,
# then the `llama` runs, in one call (the machine and its build are gone after it).
# With the argument `llama` (carrying dev-bin/ls/llama-src.tgz too: docs/perf/issue12-llama-cuda.sh
# pack), instead: llama.cpp's llama-bench built there with CUDA (about 5 minutes), then per shape
# (qwen2-0.5b, llama-3.2-1b, gemma3-270m, qwen3-0.6b, phi3-mini; Q4_K) `llama-bench -ngl 99 -p 512
# -n 128 -fa 1` beside `rayo bench --model --backend cuda`, REPS times (default 1).
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BIN=${BIN:-dev-bin/p29}
VOCAB=dev-bin/p29/ggml-vocab-phi-3.gguf
mkdir -p /tmp/r
gunzip -c $BIN/rayo.gz >/tmp/r/rayo && chmod +x /tmp/r/rayo
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
build_llama() {
  [ -x /tmp/l/build/bin/llama-bench ] || (rm -rf /tmp/l && mkdir -p /tmp/l && tar xzf dev-bin/ls/llama-src.tgz -C /tmp/l && cd /tmp/l && echo 'add_subdirectory(llama-bench)' >tools/CMakeLists.txt &&
    cmake -S . -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_CCACHE=OFF -DCMAKE_BUILD_TYPE=Release >cfg.log 2>&1 &&
    cmake --build build -j16 --target llama-bench >build.log 2>&1) || { tail -30 /tmp/l/*.log; exit 1; }
}
if [ "${1:-}" = all ]; then
  build_llama >/tmp/llama-build.txt 2>&1 &
  builder=$!
  "$0"
  echo "== 3. llama.cpp's CUDA build (waiting for it)"
  wait $builder || { cat /tmp/llama-build.txt; exit 1; }
  exec "$0" llama
fi
if [ "${1:-}" = llama ]; then
  build_llama
  for r in $(seq "${REPS:-1}"); do
    for shape in ${SHAPES:-qwen2-0.5b llama-3.2-1b gemma3-270m qwen3-0.6b phi3-mini}; do
      tok=dev-bin/b1/tok.gguf ty=Q4_K
      [ "$shape" = phi3-mini ] && tok=$VOCAB
      # rows of 896 and 640 values are no whole Q4_K blocks: Q5_0, as the real Q4_K_M files have
      case $shape in qwen2-0.5b | gemma3-270m) ty=Q5_0 ;; esac
      [ -f /tmp/r/$shape.gguf ] || /tmp/r/rayo synth /tmp/r/$shape.gguf --shape "$shape" --type $ty --tokenizer "$tok" >/dev/null
      echo "## $shape $ty, repetition $r"
      /tmp/l/build/bin/llama-bench -m /tmp/r/$shape.gguf -ngl 99 -p 512 -n 128 -fa 1 -o csv 2>/dev/null |
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
          { gsub(/"/, ""); op = ($c["n_prompt"] > 0) ? "pp" $c["n_prompt"] : "tg" $c["n_gen"]
            printf "llama.cpp %s %.1f tokens/s\n", op, $c["avg_ts"] }'
      /tmp/r/rayo bench --model /tmp/r/$shape.gguf --backend cuda --json 2>&1 |
        sed -E 's/.*"op":"([a-z0-9]+)".*"tokens_per_s":([0-9.]+).*/rayo \1 \2 tokens\/s/' | grep -E "^rayo (pp|tg)|rayo:" || true
    done
  done
  exit 0
fi
echo "== 1. cuda_ops, cuda_synth"
for t in cuda-ops cuda-llm cuda-batch cuda-synth; do
  [ -f $BIN/$t.gz ] || continue
  gunzip -c $BIN/$t.gz >/tmp/r/$t && chmod +x /tmp/r/$t
  RAYO_BIN=/tmp/r/rayo RAYO_SMOLLM2=dev-bin/b1/tok.gguf RAYO_PHI3_VOCAB=$VOCAB RAYO_REQUIRE_CUDA=1 \
    /tmp/r/$t --nocapture 2>&1 | grep -vE "^\s*$|^cuda device" || true
done
echo "== 2. rayo bench --model --backend cuda"
for shape in qwen3-0.6b phi3-mini llama-3.2-1b gemma3-270m; do
  tok=dev-bin/b1/tok.gguf ty=Q4_K
  [ "$shape" = phi3-mini ] && tok=$VOCAB
  [ "$shape" = gemma3-270m ] && ty=Q5_0
  /tmp/r/rayo synth /tmp/r/$shape.gguf --shape "$shape" --type $ty --tokenizer "$tok" >/dev/null
  echo "-- $shape $ty"
  /tmp/r/rayo bench --model /tmp/r/$shape.gguf --backend cuda 2>&1 | tail -3
  /tmp/r/rayo generate --model /tmp/r/$shape.gguf --backend cuda --prompt "The capital of France is" --max-tokens 8 --temperature 0 2>&1 | tail -1
done
