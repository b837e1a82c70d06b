#!/usr/bin/env bash
# Issue 50 on the GPU machine: `rayo serve --backend cuda` at temperature 0 and 0.8 (the default
# request: top-k 40, top-p 0.95, min-p 0.05), 1, 8 and 64 streams of 128 tokens, through
# bench/serve.py over 8 processes (raw SSE; the openai client tops out near 5 K tokens/s).
# There, after `GPU_TEST_ONLY=NONE scripts/gpu-test.sh --device SHA` unpacked the rayo binary and
# SmolLM2 (the same call or an earlier one on the same warm machine); SmolLM2 Q4_1, then the
# Llama-3.2-1B Q4_K shape:
#   docs/perf/issue50-gpu.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rayo=${RAYO_BIN:-/tmp/rayo-gpu-test/bin/rayo}
smol=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
# the Llama-3.2-1B Q4_K shape, random weights (`rayo synth`; speed does not depend on them)
one_b=/tmp/llama-3.2-1b-shape.Q4_K.gguf
[ -f $one_b ] || "$rayo" synth $one_b --shape llama-3.2-1b --type Q4_K --tokenizer $smol >/dev/null
port=18091
nvidia-smi --query-gpu=name --format=csv,noheader
bench() { python3 bench/serve.py --url "http://127.0.0.1:$port" --concurrency "$1" --requests "$2" --max-tokens 128 --temperature "$3" --processes "$4"; }
for model in ${MODELS:-$smol $one_b}; do
  echo "== $(basename "$model")"
  "$rayo" serve --backend cuda --model "$model" --parallel 64 --ctx 1024 --port $port 2>/tmp/serve.err &
  pid=$!
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.2; done
  bench 64 64 0 8 >/dev/null  # warm-up: the recorded steps of every width
  for round in 1 2; do
    for c in 64 8 1; do
      n=$((c == 1 ? 4 : c * 3))
      for t in 0 0.8; do
        echo "round $round, $c streams, temperature $t: $(bench $c $n $t $((c < 8 ? 1 : 8)) | grep -E 'aggregate|inter-token' | tr '\n' ' ')"
      done
    done
  done
  kill $pid; wait $pid 2>/dev/null || true
done
