#!/usr/bin/env bash
# Issue 27 on the GPU machine: the CUDA backend owning its memory (handles, one_token_step in
# place of the public capture hooks), driven in the orders a session never uses, under
# compute-sanitizer; qwen2 (q/k/v biases on the device, half-split RoPE) against the CPU engine
# with graphs on; and the speed before/after in the same run.
#
# Run from the repository root there, three calls in a row while the machine stays warm.
# Carried in dev-bin/ (ignored; a call carries 64 MiB):
#   part1:  dev-bin/m1/smollm2.part1 (the first half of SmolLM2-135M-Instruct Q4_1) and
#           dev-bin/t/ (test binaries, stripped: llm-cuda-test and llm-cuda-misuse-test =
#           rayo-llm's tests/cuda.rs and tests/cuda_misuse.rs, rayo-cuda-llm-test = rayo's
#           tests/cuda_llm.rs; `cargo test --release --features cuda --no-run`)
#   part2:  dev-bin/m2/smollm2.part2 (the second half): joined and checked
#   qpart N (N = 0..8): dev-bin/q/N/part, the N-th ninth of Qwen2.5-Coder-0.5B-Instruct (491 MB)
#   tests:  after the ninth part: joined and checked, then the tests
#   bench:  dev-bin/b1/ (rayo of this commit, and rayo-base built from b0591d9)
# Output in $OUT. usage: docs/perf/issue27-gpu.sh part1|part2|qpart N|tests|bench
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
part2)
  cat /tmp/m/smollm2.part1 dev-bin/m2/smollm2.part2 >$M && rm /tmp/m/smollm2.part1
  echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $M" | sha256sum -c
  ;;
qpart)
  cat "dev-bin/q/$2/part" >>/tmp/m/qwen2.gguf && ls -la /tmp/m
  ;;
tests)
  export RAYO_QWEN2=/tmp/m/qwen2.gguf RAYO_REQUIRE_QWEN2=1
  echo "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32  $RAYO_QWEN2" | sha256sum -c || exit 1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
  /tmp/b/rayo-cuda-llm-test --test-threads 1 2>&1 | grep -E "test result|panicked" | tee "$OUT/kernels.txt"
  /tmp/b/llm-cuda-misuse-test --nocapture --test-threads 1 2>&1 | grep -vE "^$|^running" | tee "$OUT/misuse.txt"
  timeout 400 /tmp/b/llm-cuda-test --nocapture --test-threads 1 2>&1 | grep -E "positions|greedy|graph of|tokens equal|qwen2|test result|panicked" | tee "$OUT/llm-test.txt"
  # the misuse orders under memcheck: every report is shown (a host read inside a recording is
  # an API error the driver returns by design; no memory access may be reported)
  timeout 300 compute-sanitizer --tool memcheck /tmp/b/llm-cuda-misuse-test --test-threads 1 2>&1 | grep -E "test result|=========" | tee "$OUT/memcheck-misuse.txt"
  ;;
bench)
  cp dev-bin/b1/* /tmp/b/
  long="The quick brown fox jumps over the lazy dog while the farmer counts his sheep, one by one, until the sun sets behind the hills"
  timeout 200 compute-sanitizer --tool memcheck /tmp/b/rayo generate --model $M --backend cuda --temperature 0 --ctx 96 --prompt "$long" --max-tokens 4 2>&1 | tail -1 | tee "$OUT/memcheck-generate.txt"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$OUT/gpu.txt"
  for s in "llama-3.2-1b Q4_K" "qwen2-0.5b Q8_0"; do
    set -- $s
    [ -f /tmp/$1-$2.gguf ] || /tmp/b/rayo synth /tmp/$1-$2.gguf --shape $1 --type $2 --tokenizer $M >/dev/null
  done
  # qwen2 (synthetic weights): greedy text on CUDA (graphs on, biases on the device) equal to
  # the CPU engine's
  q=/tmp/qwen2-0.5b-Q8_0.gguf
  printf 'cuda at b0591d9: '; /tmp/b/rayo-base generate --model $q --backend cuda --temperature 0 --prompt "Hello there, how are" --max-tokens 24 2>&1 | tail -2 | tr '\n' ' '; echo
  for be in cuda cpu; do
    printf '%s: ' $be; /tmp/b/rayo generate --model $q --backend $be --temperature 0 --prompt "Hello there, how are" --max-tokens 24 2>/dev/null | tr '\n' ' '; echo
  done | tee "$OUT/qwen2-greedy.txt"
  rows() { sed -E 's/.*"op":"([a-z0-9]+)".*"tokens_per_s":([0-9.]+).*/\1 \2/' | tr '\n' ' '; echo; }
  for r in 1 2 3; do
    for f in $M /tmp/llama-3.2-1b-Q4_K.gguf $q; do
      for bin in rayo-base rayo; do
        printf '%s %s: ' "$(basename $f .gguf)" $bin
        /tmp/b/$bin bench --model $f --backend cuda --json 2>&1 | grep -E "tokens_per_s|rror" | rows
      done
    done
  done | tee "$OUT/bench.txt"
  ;;
*) echo "usage: $0 part1|tests|bench" >&2; exit 2 ;;
esac
