#!/usr/bin/env bash
# Issue 28 on the GPU machine: why the Llama-3.2-1B Q4_K shape (`rayo synth`, random weights)
# gives NaN logits on CUDA: a prompt of 16 rows or more on the tensor cores (f16 operands)
# overflows with these weights, alone (`rayo generate`) as in a batch; on the exact fp32 kernels
# (RAYO_CUDA_PREFILL=f32) neither does. Run after issue28-cuda.sh tests (rayo in /tmp/b, the
# shape in /tmp/m/1b.gguf).
cd /tmp/b
long="Here is a short guide to growing tomatoes in a small garden by the sea, written for beginners who have never grown anything before"
./rayo generate --model /tmp/m/1b.gguf --backend cuda --temperature 0 --prompt "$long" --max-tokens 4 2>&1 | tail -1
RAYO_CUDA_PREFILL=f32 ./rayo generate --model /tmp/m/1b.gguf --backend cuda --temperature 0 --prompt "$long" --max-tokens 4 2>&1 | tail -1
req() { curl -s localhost:18090/v1/completions -d "{\"prompt\":\"Here is a short guide number $1 to growing tomatoes:\",\"max_tokens\":8,\"temperature\":0,\"ignore_eos\":true}" >/dev/null; }
for env in RAYO_CUDA_PREFILL=f32 RAYO_X=1; do
  env $env ./rayo serve --model /tmp/m/1b.gguf --backend cuda --port 18090 --ctx 1024 --parallel 8 2>/tmp/s.log & pid=$!
  for i in $(seq 600); do [ "$(curl -s -o /dev/null -w '%{http_code}' localhost:18090/health)" = 200 ] && break; sleep 0.1; done
  cp=""; for i in 6 7 8 9 10 11; do req $i & cp="$cp $!"; done; wait $cp
  echo "== $env: errors after 6 at once: $(grep -c ERROR /tmp/s.log)"
  kill $pid; wait $pid 2>/dev/null
done
