#!/usr/bin/env bash
# llama.cpp's source as vendored in the sdist of PyPI `llama-cpp-python` 0.3.36, in
# .cache/llama.cpp/src (ignored), with the venv holding cmake and ninja that build it
# (.cache/llama.cpp/venv), idempotently. Shared by scripts/ref/llama-cpp.sh (the CPU tools) and
# scripts/ref/llama-server.sh. Prints the llama.cpp source folder.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD/.cache/llama.cpp
mkdir -p "$root"
[ -x "$root/venv/bin/cmake" ] || { python3 -m venv "$root/venv" && "$root/venv/bin/pip" install -q scikit-build-core cmake ninja >&2; }
if [ ! -d "$root/src" ]; then
  # (the sdist's metadata step needs cmake, ninja and scikit-build-core: no build isolation)
  PATH=$root/venv/bin:$PATH "$root/venv/bin/pip" download -q --no-deps --no-build-isolation \
    --no-binary llama-cpp-python -d "$root" llama-cpp-python==0.3.36 >&2
  tar xzf "$root"/llama_cpp_python-0.3.36.tar.gz -C "$root"
  mv "$root"/llama_cpp_python-0.3.36 "$root/src"
fi
echo "$root/src/vendor/llama.cpp"
