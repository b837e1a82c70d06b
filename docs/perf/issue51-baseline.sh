#!/usr/bin/env bash
# Issue 51's starting point: decode and prefill of SmolLM2 Q4_1 with rayo held to AVX2
# (RAYO_BACKEND=avx2) against llama.cpp built for AVX2 only (CI-RECIPES: build-avx2), the same
# machine, the same run, 1 and 2 threads, llama-bench's pp64/tg64; rayo's AVX-512 figures beside.
# Usage: docs/perf/issue51-baseline.sh [MODEL] (RAYO_BIN: a release rayo)
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
rayo=${RAYO_BIN:-target/release/rayo}
src=.cache/llama.cpp/src/vendor/llama.cpp
scripts/ref/llama-src.sh >/dev/null
bench=$src/build-avx2/bin/llama-bench
if [ ! -x "$bench" ]; then
  (cd "$src" && PATH=$PWD/../../../venv/bin:$PATH cmake -B build-avx2 -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF \
    -DGGML_AVX_VNNI=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF >&2 &&
    PATH=$PWD/../../../venv/bin:$PATH cmake --build build-avx2 -j2 --target llama-bench >&2)
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cores); model $(basename "$model")"
for round in 1 2; do
  echo "== round $round"
  "$bench" -m "$model" -t 1,2 -p 64 -n 64 -o md 2>/dev/null | grep -E "pp64|tg64" | sed 's/^/llama.cpp AVX2: /'
  for isa in avx2 avx512; do
    RAYO_BACKEND=$isa "$rayo" bench --model "$model" --threads 1 --threads 2 2>/dev/null | grep -E "pp64|tg64" | sed "s/^/rayo $isa: /"
  done
done
