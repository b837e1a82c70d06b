#!/usr/bin/env bash
# Fetches llama.cpp's vocab-only test files (models/ggml-vocab-*.gguf with their .inp/.out
# text pairs) from the sdist of PyPI `llama-cpp-python` 0.3.36 into .cache/vocab/ (ignored;
# never committed) and prints that folder. Reuses .cache/llama.cpp/llama_cpp_python-0.3.36.tar.gz
# when scripts/ref/llama-cpp.sh has downloaded it; otherwise `pip download`s the sdist (77 MB)
# into .cache/vocab/. Idempotent: a complete folder is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.3.36
dir=$PWD/.cache/vocab
stamp=$dir/.complete-$version
if [ -f "$stamp" ]; then echo "$dir"; exit 0; fi
mkdir -p "$dir"
sdist=$PWD/.cache/llama.cpp/llama_cpp_python-$version.tar.gz
if [ ! -f "$sdist" ]; then
  sdist=$dir/llama_cpp_python-$version.tar.gz
  if [ ! -f "$sdist" ]; then
    [ -x .cache/venv-pip/bin/pip ] || python3 -m venv .cache/venv-pip
    echo "fetch-vocabs: downloading llama-cpp-python $version sdist from PyPI" >&2
    .cache/venv-pip/bin/pip download -q --no-deps --no-binary :all: -d "$dir" "llama-cpp-python==$version" >&2
  fi
fi
tar xzf "$sdist" -C "$dir" --strip-components=4 --wildcards "llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-*"
n=$(ls "$dir"/ggml-vocab-*.gguf | wc -l)
[ "$n" -gt 10 ] || { echo "fetch-vocabs: only $n vocab files in $sdist" >&2; exit 1; }
# The sdist is only needed once: drop our own copy.
[ "$sdist" != "$dir/llama_cpp_python-$version.tar.gz" ] || rm -f "$sdist"
touch "$stamp"
echo "$dir"
