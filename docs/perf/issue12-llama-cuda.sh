#!/usr/bin/env bash
# llama.cpp's CUDA build as the same-run reference of issue 12, in two steps.
#   here:       docs/perf/issue12-llama-cuda.sh pack     -> .devllama/llama-src.tgz (~4 MB: the
#               vendored tree of scripts/ref/llama-cpp.sh without models, docs, tests and the
#               other backends), carried to the device (`carry: [".devllama"]`)
#   on the GPU: docs/perf/issue12-llama-cuda.sh build    (about 5 minutes on its 16 cores)
#               docs/perf/issue12-llama-cuda.sh bench MODEL [RAYO]   llama-bench -ngl 99 -p 64,512
#               -n 128 -fa 0,1 and `rayo bench --model MODEL --backend cuda`, alternating, twice
set -euo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
pack)
  src=.cache/llama.cpp/src/vendor/llama.cpp
  [ -d "$src" ] || scripts/ref/llama-cpp.sh >/dev/null
  mkdir -p .devllama
  ex=(build models docs media gguf-py benches tests examples tools/server/public tools/ui tools/mtmd tools/tts .git conversion pocs app)
  for b in vulkan sycl metal cann opencl musa hexagon webgpu openvino zdnn zendnn et virtgpu rpc; do ex+=("ggml/src/ggml-$b"); done
  tar czf .devllama/llama-src.tgz "${ex[@]/#/--exclude=./}" -C "$src" .
  ls -la .devllama/llama-src.tgz ;;
build)
  rm -rf /tmp/l && mkdir -p /tmp/l && tar xzf .devllama/llama-src.tgz -C /tmp/l && cd /tmp/l
  echo 'add_subdirectory(llama-bench)' > tools/CMakeLists.txt
  cmake -S . -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_CCACHE=OFF -DCMAKE_BUILD_TYPE=Release >cfg.log
  cmake --build build -j16 --target llama-bench >build.log
  ls build/bin/llama-bench ;;
bench)
  model=$2 rayo=${3:-/tmp/b/rayo}
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
  for r in 1 2; do
    echo "## repetition $r"
    /tmp/l/build/bin/llama-bench -m "$model" -ngl 99 -p 64,512 -n 128 -fa 0,1 -o csv 2>/dev/null |
      awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { gsub(/"/, ""); op = ($c["n_prompt"] > 0) ? "pp" $c["n_prompt"] : "tg" $c["n_gen"]
          printf "llama.cpp fa=%s %s %.1f tokens/s\n", $c["flash_attn"], op, $c["avg_ts"] }'
    "$rayo" bench --model "$model" --backend cuda --json 2>/dev/null |
      sed -E 's/.*"op":"([a-z0-9]+)".*"tokens_per_s":([0-9.]+).*/rayo \1 \2 tokens\/s/'
  done ;;
*) sed -n 2,8p "$0"; exit 2 ;;
esac
