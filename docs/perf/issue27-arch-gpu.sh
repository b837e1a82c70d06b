#!/usr/bin/env bash
# Issue 27, second part, on the GPU machine: architectures as data (llama, qwen2, qwen3 walked by
# one Session), the LLM's CUDA ops moved next to their backend behind a typed launch, and
# Q4_K/Q5_K products made batch-invariant — the moved ops' tests (also under memcheck), the
# backend against the CPU engine, qwen3 (per-head q/k norms) on CUDA, and the speed before and
# after in the same run.
#
# Run from the repository root there, three calls in a row while the machine stays warm.
# Carried in dev-bin/ (ignored; a call carries 64 MiB):
# (the working tree, ~5 MB, counts too)
#   part1:  dev-bin/m1/smollm2.part1 (the first half of SmolLM2-135M-Instruct Q4_1) and dev-bin/t/
#           (test binaries, stripped; `cargo test --release --features cuda --no-run`):
#           llm-cuda-test, llm-cuda-misuse-test, llm-cuda-ops-test = rayo-llm's tests/cuda.rs,
#           cuda_misuse.rs, cuda_ops.rs; rayo-cuda-test = rayo's tests/cuda.rs
#   tests:  dev-bin/m2/smollm2.part2 and dev-bin/b1/rayo (this commit): joined, checked, the tests
#   bench:  dev-bin/b1/rayo-base (built at 8834634, before this work) and dev-bin/t2/
#           (rayo-cuda-llm-test, rayo-lib-test = rayo's tests/cuda_llm.rs and its unit tests)
# Output in $OUT. usage: docs/perf/issue27-arch-gpu.sh part1|tests|bench
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/m /tmp/b
M=/tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
export RAYO_SMOLLM2=$M RAYO_REQUIRE_CUDA=1 RAYO_REQUIRE_SMOLLM2=1
# the tests find their reference data under the path they were built in
mkdir -p /work && ln -sfn "$PWD" /work/main
case "${1:-}" in
part1)
  cp dev-bin/m1/smollm2.part1 /tmp/m/ && cp dev-bin/t/* /tmp/b/ && ls -la /tmp/b /tmp/m
  ;;
tests)
  cat /tmp/m/smollm2.part1 dev-bin/m2/smollm2.part2 >$M && rm /tmp/m/smollm2.part1
  echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $M" | sha256sum -c || exit 1
  cp dev-bin/b1/rayo /tmp/b/
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
  for t in rayo-cuda-test llm-cuda-ops-test llm-cuda-misuse-test; do
    echo "== $t"
    timeout 200 /tmp/b/$t --test-threads 1 2>&1 | grep -E "^test |test result|panicked|SKIP"
  done | tee "$OUT/tests.txt"
  timeout 300 /tmp/b/llm-cuda-test --nocapture --test-threads 1 2>&1 | grep -E "positions|greedy|graph of|tokens equal|test result|panicked|SKIP" | tee "$OUT/llm-test.txt"
  # the misuse orders and the moved ops under memcheck: every report shown (a host read inside
  # a recording is an API error the driver returns by design; no memory access may be reported)
  for t in llm-cuda-misuse-test llm-cuda-ops-test; do
    echo "== memcheck $t"
    timeout 200 compute-sanitizer --tool memcheck /tmp/b/$t --test-threads 1 2>&1 | grep -E "test result|=========" | head -20
  done | tee "$OUT/memcheck.txt"
  ;;
bench)
  cp dev-bin/b1/rayo-base dev-bin/t2/* /tmp/b/
  for t in rayo-lib-test rayo-cuda-llm-test; do
    echo "== $t"
    args=(--test-threads 1)
    [ $t = rayo-lib-test ] && args+=(cuda)
    timeout 200 /tmp/b/$t "${args[@]}" 2>&1 | grep -E "^test |test result|panicked|SKIP"
  done | tee "$OUT/tests-core.txt"
  long="The quick brown fox jumps over the lazy dog while the farmer counts his sheep, one by one, until the sun sets behind the hills"
  timeout 200 compute-sanitizer --tool memcheck /tmp/b/rayo generate --model $M --backend cuda --temperature 0 --ctx 96 --prompt "$long" --max-tokens 4 2>&1 | tail -1 | tee "$OUT/memcheck-generate.txt"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$OUT/gpu.txt"
  for s in "llama-3.2-1b Q4_K" "qwen2-0.5b Q8_0" "qwen3-0.6b Q8_0"; do
    set -- $s
    [ -f /tmp/$1-$2.gguf ] || /tmp/b/rayo synth /tmp/$1-$2.gguf --shape $1 --type $2 --tokenizer $M >/dev/null
  done
  # greedy text, before and after, CUDA (graphs on) and CPU; qwen3 (new) after only
  for f in $M /tmp/llama-3.2-1b-Q4_K.gguf /tmp/qwen2-0.5b-Q8_0.gguf /tmp/qwen3-0.6b-Q8_0.gguf; do
    for bin in rayo-base rayo; do
      for be in cuda cpu; do
        printf '%s %s %s: ' "$(basename $f .gguf)" $bin $be
        timeout 60 /tmp/b/$bin generate --model $f --backend $be --temperature 0 --prompt "Hello there, how are" --max-tokens 24 2>&1 | tr '\n' ' ' | tail -c 400; echo
      done
    done
  done | tee "$OUT/greedy.txt"
  rows() { sed -E 's/.*"op":"([a-z0-9]+)".*"tokens_per_s":([0-9.]+).*/\1 \2/' | tr '\n' ' '; echo; }
  for r in 1 2 3; do
    for f in $M /tmp/llama-3.2-1b-Q4_K.gguf /tmp/qwen2-0.5b-Q8_0.gguf; do
      for bin in rayo-base rayo; do
        printf '%s %s: ' "$(basename $f .gguf)" $bin
        /tmp/b/$bin bench --model $f --backend cuda --json 2>&1 | grep -E "tokens_per_s|rror" | rows
      done
    done
    printf 'qwen3-0.6b-Q8_0 rayo: '
    /tmp/b/rayo bench --model /tmp/qwen3-0.6b-Q8_0.gguf --backend cuda --json 2>&1 | grep -E "tokens_per_s|rror" | rows
  done | tee "$OUT/bench.txt"
  ;;
*) echo "usage: $0 part1|tests|bench" >&2; exit 2 ;;
esac
