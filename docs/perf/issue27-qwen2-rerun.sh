#!/usr/bin/env bash
# Issue 27: the real Qwen2.5-Coder-0.5B on CUDA again after the LLM ops moved (tests/cuda.rs::qwen2_agrees_with_the_cpu_engine),
# the file carried in nine parts (dev-bin/q/N/part, 54,600,008 bytes each; the test binary with the last).
# usage: docs/perf/issue27-qwen2-rerun.sh N   (N = 0..8, in order, while the machine stays warm)
set -u
mkdir -p /tmp/m /tmp/b
cat dev-bin/q/$1/part >> /tmp/m/qwen2.gguf; ls -la /tmp/m/qwen2.gguf
if [ "$1" = 8 ]; then
  echo "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32  /tmp/m/qwen2.gguf" | sha256sum -c || exit 1
  mkdir -p /work && ln -sfn "$PWD" /work/main
  RAYO_QWEN2=/tmp/m/qwen2.gguf RAYO_REQUIRE_QWEN2=1 RAYO_REQUIRE_CUDA=1 timeout 400 dev-bin/q/8/llm-cuda-test qwen2 --nocapture --test-threads 1 2>&1 | grep -E "qwen2|test result|panicked"
fi
