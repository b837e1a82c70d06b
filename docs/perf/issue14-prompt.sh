#!/usr/bin/env bash
# Issue 14, item 1 on the GPU machine: a prompt's products on Hopper's wgmma GEMM (the default
# on compute capability 9.0) against the mma.sync GEMM (`RAYO_CUDA_PREFILL=mma`) and llama.cpp's
# CUDA build, pp512 and tg128, on Llama-3.2-1B's and SmolLM2-135M's shapes (`rayo synth`, random
# weights), interleaved, twice; first the kernel tests.
# Run from the repository root there with `.devbin-gpu/bins.tgz` (stripped `rayo`,
# `rayo-cuda-test` and `rayo-cuda-llm-test`: rayo's tests/cuda.rs and tests/cuda_llm.rs) built
# on the dev VM, TOK a GGUF file whose tokenizer the synthetic models take (default
# `.devbin-gpu/tok.gguf`: `rayo synth --shape tiny --tokenizer SmolLM2-135M-Instruct.Q4_1.gguf`),
# and llama.cpp built by `docs/perf/issue12-llama-cuda.sh build` (skipped when absent).
# usage: docs/perf/issue14-prompt.sh [tests|bench]
set -u
mkdir -p /tmp/b && tar xzf .devbin-gpu/bins.tgz -C /tmp/b
TOK=${TOK:-.devbin-gpu/tok.gguf}
export RAYO_REQUIRE_CUDA=1
# the tests find their reference data under the path they were built in
mkdir -p /work && ln -sfn "$PWD" /work/main
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
if [ "${1:-tests}" = tests ]; then
  /tmp/b/rayo-cuda-test --test-threads 1 wgmma 2>&1 | grep -E "test result|panicked|SKIP|assert"
  /tmp/b/rayo-cuda-llm-test --test-threads 1 2>&1 | grep -E "test result|panicked|SKIP|assert"
  exit 0
fi
for s in "llama-3.2-1b Q4_K" "llama-3.2-1b Q8_0" "smollm2-135m Q8_0"; do
  set -- $s
  [ -f /tmp/$1-$2.gguf ] || /tmp/b/rayo synth /tmp/$1-$2.gguf --shape $1 --type $2 --tokenizer $TOK >/dev/null
done
rows() { sed -E 's/.*"op":"([a-z0-9]+)".*"tokens_per_s":([0-9.]+).*/\1 \2/' | tr '\n' ' '; echo; }
for r in 1 2; do
  for f in /tmp/llama-3.2-1b-Q4_K.gguf /tmp/llama-3.2-1b-Q8_0.gguf /tmp/smollm2-135m-Q8_0.gguf; do
    n=$(basename $f .gguf)
    printf '%s rayo default (wgmma from 2048 columns): ' $n; /tmp/b/rayo bench --model $f --backend cuda --json 2>/dev/null | rows
    printf '%s rayo mma.sync: ' $n; RAYO_CUDA_PREFILL=mma /tmp/b/rayo bench --model $f --backend cuda --json 2>/dev/null | rows
    if [ -x /tmp/l/build/bin/llama-bench ]; then
      /tmp/l/build/bin/llama-bench -m $f -ngl 99 -p 512 -n 128 -fa 1 -o csv 2>/dev/null |
        awk -F, -v n=$n 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
          { gsub(/"/, ""); op = ($c["n_prompt"] > 0) ? "pp" $c["n_prompt"] : "tg" $c["n_gen"]
            printf "%s llama.cpp fa=1 %s %.1f\n", n, op, $c["avg_ts"] }'
    fi
  done
done
