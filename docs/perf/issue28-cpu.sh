#!/usr/bin/env bash
# Issue 28 on the dev VM's CPU (2 vCPUs): `rayo serve` against llama-server (built from the
# llama-cpp-python 0.3.36 sdist, as CI-RECIPES.md says), same model file, same load, same run:
# SmolLM2-135M-Instruct Q4_1, 2 threads, N concurrent streams of 128 tokens (bench/serve.py:
# streamed /v1/completions, temperature 0, ignore_eos), twice each, alternating. Also each
# server's resident memory after the load.
# usage: docs/perf/issue28-cpu.sh RAYO_BIN [CONCURRENCY...]
set -euo pipefail
cd "$(dirname "$0")/../.."
rayo=$1; shift
levels=("${@:-1 8}")
model=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
src=.cache/llama.cpp/src/vendor/llama.cpp
server=$src/build-server/bin/llama-server
if [ ! -x "$server" ]; then
  ./scripts/ref/llama-cpp.sh >/dev/null
  (cd $src && PATH=$PWD/../../../venv/bin:$PATH cmake -B build-server -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF >/dev/null && PATH=$PWD/../../../venv/bin:$PATH cmake --build build-server -j2 --target llama-server >/dev/null)
fi
port=18080
wait_up() { for _ in $(seq 600); do python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
rss() { awk '/VmRSS/ {print $2 / 1024 " MB"}' /proc/$1/status; }
for n in ${levels[@]}; do
  for round in 1 2; do
    for who in rayo llama-server; do
      if [ $who = rayo ]; then
        $rayo serve --model $model --port $port --parallel $n --threads 2 --ctx 1024 2>/dev/null & pid=$!
      else
        LD_LIBRARY_PATH=$src/build-server/bin $server -m $model --port $port -np $n -cb -t 2 -fa on -c $((1024 * n)) >/dev/null 2>&1 & pid=$!
      fi
      wait_up
      echo "== $who, $n streams, round $round (resident before: $(rss $pid))"
      python3 bench/serve.py --url http://127.0.0.1:$port --concurrency $n --requests $((2 * n)) --max-tokens 128
      echo "resident after: $(rss $pid)"
      kill $pid; wait $pid 2>/dev/null || true
    done
  done
done
