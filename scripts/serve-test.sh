#!/usr/bin/env bash
# `rayo serve` through the official OpenAI Python client (PyPI, pinned, in .venv-serve), on a
# free loopback port with SmolLM2: tests/serve/test_server.py (both endpoints streamed and not,
# greedy text against `rayo generate`, 16 concurrent clients, faults, SIGTERM). Builds the
# release binary and installs what it needs, idempotently.
# Usage: scripts/serve-test.sh   (RAYO_BIN=PATH: a rayo binary already built; CARGO_TARGET_DIR
# is honoured)
set -euo pipefail
cd "$(dirname "$0")/.."
OPENAI_VERSION=3.57.0
model=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || ./scripts/fetch-smollm2.sh >/dev/null
if [ ! -x .venv-serve/bin/python ]; then python3 -m venv .venv-serve; fi
if ! .venv-serve/bin/python -c "import openai, sys; sys.exit(openai.__version__ != '$OPENAI_VERSION')" 2>/dev/null; then
  .venv-serve/bin/pip install -q "openai==$OPENAI_VERSION"
fi
if [ -z "${RAYO_BIN:-}" ]; then
  cargo build --release -p rayo-cli
  RAYO_BIN=${CARGO_TARGET_DIR:-target}/release/rayo
fi
start=$(date +%s)
timeout 900 .venv-serve/bin/python tests/serve/test_server.py "$RAYO_BIN" "$model"
echo "serve: the server tests took $(($(date +%s) - start)) s"
