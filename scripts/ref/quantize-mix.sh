#!/usr/bin/env bash
# The type llama.cpp gives each tensor of SmolLM2-135M-Instruct for every file type
# `rayo quantize` takes: runs llama-quantize (scripts/ref/llama-cpp.sh) on the Q4_1 file
# (scripts/fetch-smollm2.sh) and writes crates/rayo-cli/tests/data/smollm2-mix.txt: lines
# `input NAME TYPE SHAPE` (the input's tensors in file order, shape as ne0xne1) and
# `FILETYPE NAME TYPE` (llama-quantize's choice), read by the planner's test, and
# `sha256 FILETYPE HASH` of llama-quantize's whole file, which `rayo quantize` must reproduce.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(./scripts/ref/llama-cpp.sh)
model=${RAYO_SMOLLM2:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$model" ] || model=$(./scripts/fetch-smollm2.sh)
[ -x .venv-gguf/bin/python ] || { python3 -m venv .venv-gguf && .venv-gguf/bin/pip install -q gguf==0.19.0 numpy; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
types="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K F16 BF16"
for t in $types; do
  "$bin/llama-quantize" --allow-requantize "$model" "$tmp/$t.gguf" "$t" 2 >"$tmp/$t.log" 2>&1 || { cat "$tmp/$t.log"; exit 1; }
done
MODEL=$model .venv-gguf/bin/python - "$tmp" $types >crates/rayo-cli/tests/data/smollm2-mix.txt <<'PY'
import os, sys
from gguf import GGUFReader
d, types = sys.argv[1], sys.argv[2:]
# The input's tensors in file order: name, type, shape (ggml's ne: row length first).
for x in GGUFReader(os.environ["MODEL"]).tensors:
    print("input", x.name, x.tensor_type.name, "x".join(str(int(n)) for n in x.shape))
for t in types:
    for x in GGUFReader(f"{d}/{t}.gguf").tensors:
        print(t, x.name, x.tensor_type.name)
PY
(cd "$tmp" && for t in $types; do echo "sha256 $t $(sha256sum "$t.gguf" | cut -d' ' -f1)"; done) >>crates/rayo-cli/tests/data/smollm2-mix.txt
echo "wrote crates/rayo-cli/tests/data/smollm2-mix.txt" >&2
