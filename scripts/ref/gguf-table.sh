#!/usr/bin/env bash
# Writes the reference table of SmolLM2-135M-Instruct Q4_1 as PyPI `gguf` 0.19.0's GGUFReader
# reads it: crates/rayo/tests/data/smollm2-q4_1.gguf.tsv (committed; tests/gguf_real.rs checks
# rayo's reader against it). Fetches the model first (scripts/fetch-smollm2.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x .venv-gguf/bin/python ] && .venv-gguf/bin/python -c 'import gguf, numpy' 2>/dev/null || {
  python3 -m venv .venv-gguf && .venv-gguf/bin/pip install -q gguf==0.19.0 numpy
}
model=$(scripts/fetch-smollm2.sh)
.venv-gguf/bin/python scripts/ref/gguf-table.py "$model" > crates/rayo/tests/data/smollm2-q4_1.gguf.tsv
echo crates/rayo/tests/data/smollm2-q4_1.gguf.tsv
