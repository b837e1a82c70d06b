#!/usr/bin/env bash
# Writes crates/rayo-llm/tests/data/tokenizer-golden-smollm2.txt: the ids llama.cpp's
# llama-tokenize gives for every case of tests/data/tokenizer-corpus.txt (cases separated by a
# "\n__case__\n" line) on SmolLM2-135M-Instruct, with special tokens parsed and not. Each case
# is passed verbatim through a file (-f, --no-escape); BOS is added as the model asks (it
# does not). Output: per case, "parse [ids]" and "noparse [ids]" lines, in corpus order.
# Needs scripts/ref/llama-cpp.sh's build and scripts/fetch-smollm2.sh's model.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(scripts/ref/llama-cpp.sh)
model=${RAYO_SMOLLM2:-$(scripts/fetch-smollm2.sh)}
data=crates/rayo-llm/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$data/tokenizer-corpus.txt" "$tmp" <<'PY'
import sys
cases = open(sys.argv[1], encoding="utf-8", newline="").read().split("\n__case__\n")
for i, c in enumerate(cases):
    open(f"{sys.argv[2]}/{i:04d}.txt", "w", encoding="utf-8", newline="").write(c)
PY
out=$data/tokenizer-golden-smollm2.txt
: > "$out.part"
for f in "$tmp"/*.txt; do
  p=$("$bin/llama-tokenize" -m "$model" -f "$f" --no-escape --ids --log-disable 2>/dev/null)
  n=$("$bin/llama-tokenize" -m "$model" -f "$f" --no-escape --ids --log-disable --no-parse-special 2>/dev/null)
  printf 'parse %s\nnoparse %s\n' "$p" "$n" >> "$out.part"
done
mv "$out.part" "$out"
echo "$out: $(( $(wc -l < "$out") / 2 )) cases"
