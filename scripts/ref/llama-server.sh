#!/usr/bin/env bash
# Builds llama.cpp's llama-server (the serving reference; CPU, no web UI, nothing downloaded at
# run time) from the same PyPI `llama-cpp-python` 0.3.36 sdist as scripts/ref/llama-cpp.sh, into
# .cache/llama.cpp/src/vendor/llama.cpp/build-server (ignored), idempotently. GGML_NATIVE, or
# with RAYO_REF_AVX2=1 AVX2 only (build-server-avx2: the reference for rayo's AVX2 paths on an
# AVX-512 machine). About 8 minutes on 2 cores. Prints the path of the llama-server binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD/.cache/llama.cpp
if [ "${RAYO_REF_AVX2:-0}" = 1 ]; then
  dir=build-server-avx2
  flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF"
else
  dir=build-server
  flags="-DGGML_NATIVE=ON"
fi
exe=$root/src/vendor/llama.cpp/$dir/bin/llama-server
if [ -x "$exe" ]; then echo "$exe"; exit 0; fi
scripts/ref/llama-src.sh >/dev/null
cd "$root/src/vendor/llama.cpp"
# (word splitting of $flags intended)
# shellcheck disable=SC2086
PATH=$root/venv/bin:$PATH cmake -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release $flags -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF >&2
PATH=$root/venv/bin:$PATH cmake --build "$dir" -j2 --target llama-server >&2
echo "$exe"
