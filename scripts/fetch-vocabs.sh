#!/usr/bin/env bash
# Fetches llama.cpp's vocab-only test files (models/ggml-vocab-*.gguf with their .inp/.out
# text pairs) from the sdist of PyPI `llama-cpp-python` 0.3.36 into .cache/vocab/ (ignored;
# never committed) and prints that folder. Reuses .cache/llama.cpp/llama_cpp_python-0.3.36.tar.gz
# when scripts/ref/llama-cpp.sh has downloaded it; otherwise downloads the sdist (77 MB) from
# PyPI into .cache/vocab/. Idempotent: a complete folder is not fetched again.
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
    # The file itself from PyPI's simple index, checked against the sha256 the index gives
    # (`pip download` of an sdist would first build its metadata: CMake, minutes).
    echo "fetch-vocabs: downloading llama-cpp-python $version sdist (77 MB) from PyPI" >&2
    python3 - "$version" "$sdist" <<'PY'
import hashlib, re, sys, urllib.request
version, out = sys.argv[1], sys.argv[2]
page = urllib.request.urlopen("https://pypi.org/simple/llama-cpp-python/", timeout=60).read().decode()
url = next(u for u in re.findall(r'href="([^"]+)"', page) if u.split("#")[0].endswith(f"llama_cpp_python-{version}.tar.gz"))
url, _, frag = url.partition("#sha256=")
h = hashlib.sha256()
with urllib.request.urlopen(url, timeout=600) as r, open(out + ".part", "wb") as f:
    while chunk := r.read(1 << 20):
        h.update(chunk)
        f.write(chunk)
if frag and h.hexdigest() != frag:
    sys.exit(f"fetch-vocabs: {url}: sha256 {h.hexdigest()}, the index says {frag}")
import os
os.replace(out + ".part", out)
PY
  fi
fi
tar xzf "$sdist" -C "$dir" --strip-components=4 --wildcards "llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-*"
n=$(ls "$dir"/ggml-vocab-*.gguf | wc -l)
[ "$n" -gt 10 ] || { echo "fetch-vocabs: only $n vocab files in $sdist" >&2; exit 1; }
# The sdist is only needed once: drop our own copy.
[ "$sdist" != "$dir/llama_cpp_python-$version.tar.gz" ] || rm -f "$sdist"
touch "$stamp"
echo "$dir"
