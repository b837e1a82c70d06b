#!/usr/bin/env bash
# Issue 50, CPU: `rayo serve` against llama-server (scripts/ref/llama-server.sh, the same machine,
# the same model file, 2 threads, 8 slots), 8 streams of 128 tokens through bench/serve.py (raw
# SSE over loopback: not the bottleneck at these rates), at temperature 0 and 0.8 (the default
# request: top-k 40, top-p 0.95, min-p 0.05), each server alone on the machine, rounds
# alternating. Usage: docs/perf/issue50-cpu.sh [ROUNDS] (RAYO_BIN: a release rayo; MODEL: a GGUF).
# Both held to AVX2 on an AVX-512 machine: RAYO_BACKEND=avx2 RAYO_REF_AVX2=1 docs/perf/issue50-cpu.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-2}
rayo=${RAYO_BIN:-target/release/rayo}
model=${MODEL:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
llama=$(scripts/ref/llama-server.sh)
port=18090
bench() { python3 bench/serve.py --url "http://127.0.0.1:$port" --concurrency 8 --requests 32 --max-tokens 128 --temperature "$1"; }
wait_up() { for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0; sleep 0.2; done; echo "no server" >&2; return 1; }
echo "machine: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2) ($(nproc) cores); model $(basename "$model"); RAYO_BACKEND=${RAYO_BACKEND:-auto}; llama-server $llama"
for r in $(seq "$rounds"); do
  for server in rayo llama-server; do
    if [ $server = rayo ]; then
      "$rayo" serve --model "$model" --threads 2 --parallel 8 --ctx 2048 --port $port 2>/dev/null &
    else
      "$llama" -m "$model" --port $port -np 8 -cb -t 2 -fa on -c 16384 >/dev/null 2>&1 &
    fi
    pid=$!
    wait_up
    bench 0 >/dev/null  # warm-up
    for t in 0 0.8; do
      echo "round $r, $server, temperature $t: $(bench $t | grep -E 'aggregate|inter-token' | tr '\n' ' ')"
    done
    kill $pid; wait $pid 2>/dev/null || true
  done
done
