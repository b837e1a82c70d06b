#!/usr/bin/env bash
# Writes crates/rayo-llm/tests/data/tokenizer-golden-NAME.txt: the ids llama.cpp's
# llama-tokenize gives for every case of tests/data/tokenizer-corpus.txt (cases separated by a
# "\n__case__\n" line), with special tokens parsed and not, for SmolLM2-135M-Instruct (NAME
# smollm2), Qwen2.5-Coder-0.5B-Instruct (NAME qwen2.5-coder) and for llama.cpp's vocab-only
# files of the other tokenizer families rayo covers
# (NAME = gpt-2, llama-bpe, qwen2, qwen35, deepseek-coder, deepseek-llm, gemma-4, llama-spm, phi-3,
# starcoder); arguments, if any,
# name the ones to regenerate. Each case is passed verbatim
# through a file (-f, --no-escape); BOS is added as each model asks (llama-tokenize's
# add_special = the model's add_bos). Output: per case, "parse [ids]" and "noparse [ids]".
# Needs scripts/ref/llama-cpp.sh's build, scripts/fetch-smollm2.sh, scripts/fetch-qwen2.sh (for
# qwen2.5-coder) and scripts/fetch-vocabs.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(scripts/ref/llama-cpp.sh)
smollm2=${RAYO_SMOLLM2:-$(scripts/fetch-smollm2.sh)}
qwen2() { echo "${RAYO_QWEN2:-$(scripts/fetch-qwen2.sh)}"; }
vocab=${RAYO_VOCAB_DIR:-$(scripts/fetch-vocabs.sh)}
data=crates/rayo-llm/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$data/tokenizer-corpus.txt" "$tmp" <<'PY'
import sys
cases = open(sys.argv[1], encoding="utf-8", newline="").read().split("\n__case__\n")
for i, c in enumerate(cases):
    open(f"{sys.argv[2]}/{i:04d}.txt", "w", encoding="utf-8", newline="").write(c)
PY
golden() { # model-file name
  local out=$data/tokenizer-golden-$2.txt
  : > "$out.part"
  for f in "$tmp"/*.txt; do
    p=$("$bin/llama-tokenize" -m "$1" -f "$f" --no-escape --ids --log-disable 2>/dev/null)
    n=$("$bin/llama-tokenize" -m "$1" -f "$f" --no-escape --ids --log-disable --no-parse-special 2>/dev/null)
    printf 'parse %s\nnoparse %s\n' "$p" "$n" >> "$out.part"
  done
  mv "$out.part" "$out"
  echo "$out: $(( $(wc -l < "$out") / 2 )) cases"
}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(smollm2 qwen2.5-coder gpt-2 llama-bpe qwen2 qwen35 deepseek-coder deepseek-llm gemma-4 llama-spm phi-3 starcoder)
for v in "${names[@]}"; do
  case $v in
    smollm2) golden "$smollm2" smollm2 ;;
    qwen2.5-coder) golden "$(qwen2)" qwen2.5-coder ;;
    *) golden "$vocab/ggml-vocab-$v.gguf" "$v" ;;
  esac
done
