#!/usr/bin/env bash
# Does llama.cpp load and run what `rayo quantize` writes? Quantizes SmolLM2-135M-Instruct (Q4_1)
# to each TYPE (default: every type and mix `rayo quantize` takes) with rayo, then runs
# llama.cpp's llama-simple (greedy, 24 tokens) on each file and prints its text, beside the
# same from llama-quantize's file of the same type. Needs scripts/ref/llama-cpp.sh's build.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(./scripts/ref/llama-cpp.sh)
model=${RAYO_SMOLLM2:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$model" ] || model=$(./scripts/fetch-smollm2.sh)
cargo build -q --release -p rayo-cli --no-default-features
rayo=${CARGO_TARGET_DIR:-target}/release/rayo
types=${*:-Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K Q4_K_M Q5_K_M}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompt="The capital of France is"
for t in $types; do
  "$rayo" quantize "$model" "$tmp/rayo-$t.gguf" "$t" >/dev/null 2>"$tmp/rayo-$t.log" || { cat "$tmp/rayo-$t.log"; exit 1; }
  "$bin/llama-quantize" --allow-requantize "$model" "$tmp/llama-$t.gguf" "$t" >/dev/null 2>&1
  for who in rayo llama; do
    out=$("$bin/llama-simple" -m "$tmp/$who-$t.gguf" -n 24 "$prompt" 2>/dev/null | tr '\n' ' ')
    printf '%-7s %-6s %10s bytes: %s\n' "$t" "$who" "$(stat -c %s "$tmp/$who-$t.gguf")" "$out"
  done
  cmp -s "$tmp/rayo-$t.gguf" "$tmp/llama-$t.gguf" && echo "$t: byte-identical to llama-quantize's file" || true
done
