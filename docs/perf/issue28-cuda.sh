#!/usr/bin/env bash
# Issue 28 on the GPU machine: `rayo serve --backend cuda` (a BatchSession: every running
# request's token through each product at once, their attention in one launch per layer)
# against llama-server's CUDA build from the same llama.cpp source as the CPU references, same
# model file, same load, same machine and call: bench/serve.py, N concurrent streams of 128
# tokens (streamed /v1/completions, temperature 0, ignore_eos), 2N requests per level.
#
#   here:      docs/perf/issue28-cuda.sh pack   -> dev-bin/ls/llama-src.tgz (the vendored tree
#              with tools/server, tools/ui and tools/mtmd; no other backends, models or docs)
#   on the GPU (from the repository root; `bash docs/perf/issue28-cuda.sh STEP`, in this order
#   while the machine stays warm; each call carries at most 64 MiB):
#     build    dev-bin/ls/ and dev-bin/m1/ (the first half of SmolLM2-135M-Instruct Q4_1):
#              llama-server with -DGGML_CUDA=ON (about 5 minutes on 16 cores)
#     tests    dev-bin/m2/ (the second half: the model joined and checked), dev-bin/r/rayo.gz and
#              dev-bin/t/*.gz (gzipped, to fit one call: test binaries of `cargo test --release
#              -p rayo-llm --features cuda --no-run`: llm-cuda-ops-test, llm-cuda-batch-test,
#              llm-cuda-test): the tests
#     bench    rayo (default and --deterministic) against llama-server at 1, 8, 32 and 64
#              streams (LEVELS; WHO picks servers; WARM=1 runs an untimed round first; REQS
#              requests per stream, 2 by default) on
#              SmolLM2 Q4_1 and the Llama-3.2-1B Q4_K shape (`rayo synth`), and the GPU's memory
#     equal    bench/serve_equal.py: 64 concurrent greedy completions through rayo serve, each
#              against `rayo generate` alone, --deterministic and not, on both models
# Output in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
M=/tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# (on the GPU machine the tests find their reference data under the path they were built in)
case "${1:-}" in build | tests | bench | equal) mkdir -p "$OUT" /tmp/m /tmp/b /work && { [ "$PWD" = /work/main ] || ln -sfn "$PWD" /work/main; } ;; esac
case "${1:-}" in
pack)
  src=.cache/llama.cpp/src/vendor/llama.cpp
  [ -d "$src" ] || scripts/ref/llama-cpp.sh >/dev/null
  mkdir -p dev-bin/ls
  ex=(build build-server models docs media gguf-py benches tests examples tools/server/public tools/tts .git conversion pocs app)
  for b in vulkan sycl metal cann opencl musa hexagon webgpu openvino zdnn zendnn et virtgpu rpc; do ex+=("ggml/src/ggml-$b"); done
  tar czf dev-bin/ls/llama-src.tgz "${ex[@]/#/--exclude=./}" -C "$src" .
  ls -la dev-bin/ls/llama-src.tgz ;;
build)
  cp dev-bin/m1/smollm2.part1 /tmp/m/
  rm -rf /tmp/l && mkdir -p /tmp/l && tar xzf dev-bin/ls/llama-src.tgz -C /tmp/l && cd /tmp/l
  printf '%s\n' 'find_package(Threads REQUIRED)' 'llama_add_compile_flags()' 'add_subdirectory(mtmd)' 'add_subdirectory(ui)' \
    'add_subdirectory(server)' >tools/CMakeLists.txt
  cmake -S . -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DGGML_CCACHE=OFF -DCMAKE_BUILD_TYPE=Release >cfg.log 2>&1 || { tail -30 cfg.log; exit 1; }
  cmake --build build -j16 --target llama-server >build.log 2>&1 || { tail -30 build.log; exit 1; }
  ls -la build/bin/llama-server ;;
tests)
  [ -f $M ] || { cat /tmp/m/smollm2.part1 dev-bin/m2/smollm2.part2 >$M && rm /tmp/m/smollm2.part1; }
  echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $M" | sha256sum -c || exit 1
  for f in dev-bin/t/*.gz dev-bin/r/rayo.gz; do gunzip -c $f >/tmp/b/$(basename $f .gz) && chmod +x /tmp/b/$(basename $f .gz); done
  export RAYO_SMOLLM2=$M RAYO_REQUIRE_CUDA=1 RAYO_REQUIRE_SMOLLM2=1
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
  for t in llm-cuda-ops-test llm-cuda-batch-test; do
    echo "== $t"
    timeout 240 /tmp/b/$t --nocapture --test-threads 1 2>&1 | grep -E "^test |^ok |sequences|test result|panicked|SKIP"
  done | tee "$OUT/tests.txt"
  timeout 240 /tmp/b/llm-cuda-test --test-threads 1 2>&1 | grep -E "test result|panicked|SKIP" | tee -a "$OUT/tests.txt"
  echo "== memcheck llm-cuda-ops-test decoding_rows" | tee -a "$OUT/tests.txt"
  timeout 200 compute-sanitizer --tool memcheck /tmp/b/llm-cuda-ops-test decoding_rows --test-threads 1 2>&1 | grep -E "test result|=========" | head -20 | tee -a "$OUT/tests.txt"
  ;;
bench)
  rayo=/tmp/b/rayo server=/tmp/l/build/bin/llama-server port=18080
  [ -f /tmp/m/1b.gguf ] || $rayo synth /tmp/m/1b.gguf --shape llama-3.2-1b --type Q4_K --tokenizer $M >/dev/null
  wait_up() { for _ in $(seq 1200); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
  gpu_mem() { nvidia-smi --query-gpu=memory.used --format=csv,noheader; }
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$OUT/gpu.txt"
  for model in $M /tmp/m/1b.gguf; do
    for n in ${LEVELS:-1 8 32 64}; do
      for who in ${WHO:-rayo rayo-det llama-server}; do
        if [ $who = rayo ]; then
          $rayo serve --model $model --backend cuda --port $port --parallel $n --ctx 1024 --queue 1024 2>>"$OUT/rayo-serve.log" & pid=$!
        elif [ $who = rayo-det ]; then
          $rayo serve --model $model --backend cuda --deterministic --port $port --parallel $n --ctx 1024 --queue 1024 2>>"$OUT/rayo-serve.log" & pid=$!
        else
          $server -m $model --port $port -ngl 99 -np $n -cb -fa on -c $((1024 * n)) >>"$OUT/llama-server.log" 2>&1 & pid=$!
        fi
        wait_up || { echo "$who did not come up"; kill $pid; continue; }
        echo "== $(basename $model) $who, $n streams (GPU memory before: $(gpu_mem))"
        # WARM=1: one untimed round first (each server's first steps: rayo records them and
        # makes its f16 weight copies, llama-server builds its graphs)
        [ -n "${WARM:-}" ] && python3 bench/serve.py --url http://127.0.0.1:$port --concurrency $n --requests $n --max-tokens 16 >/dev/null
        python3 bench/serve.py --url http://127.0.0.1:$port --concurrency $n --requests $((${REQS:-2} * n)) --max-tokens 128
        echo "GPU memory after: $(gpu_mem)"
        kill $pid; wait $pid 2>/dev/null
      done
    done
  done 2>&1 | tee "$OUT/bench.txt" ;;
equal)
  rayo=/tmp/b/rayo port=18080
  wait_up() { for _ in $(seq 1200); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
  for model in $M /tmp/m/1b.gguf; do
    for det in --deterministic ""; do
      $rayo serve --model $model --backend cuda $det --port $port --parallel 64 --ctx 1024 2>>"$OUT/rayo-serve.log" & pid=$!
      wait_up || { echo "rayo did not come up"; kill $pid; continue; }
      echo "== $(basename $model) ${det:-default}"
      timeout 300 python3 bench/serve_equal.py --url http://127.0.0.1:$port --rayo $rayo --model $model -- --backend cuda $det 2>&1 | tail -4
      kill $pid; wait $pid 2>/dev/null
    done
  done 2>&1 | tee "$OUT/equal.txt" ;;
*) sed -n 2,23p "$0"; exit 2 ;;
esac
