#!/usr/bin/env bash
# The CUDA engine on the GPU machine (issue 12): correctness against the CPU engine, speed,
# compute-sanitizer, and a per-kernel time profile. Run there from the repository root with
# the binaries in /tmp/b (rayo, llm-cuda-test = rayo-llm's tests/cuda.rs, rayo-cuda-test and
# rayo-cuda-llm-test = rayo's tests/cuda.rs and tests/cuda_llm.rs; built here with `cargo test --release --features cuda --no-run`) and
# SmolLM2-135M-Instruct Q4_1 in /tmp/m (carried in two halves: a call carries at most 64 MiB).
# Output in $OUT (default /tmp/out). QUICK=1 stops after the speed rows (no sanitizer, no ncu);
# NOBENCH=1 skips the speed rows (while something else loads the host's CPUs).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export RAYO_SMOLLM2=/tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf RAYO_REQUIRE_CUDA=1
sha256sum "$RAYO_SMOLLM2" | cut -c1-16
# the tests find their reference data under the path they were built in
mkdir -p /work && ln -sfn "$PWD" /work/main
KM=/tmp/m/SmolLM2-135M-Instruct.Q4_K_M.gguf
[ -f $KM ] || /tmp/b/rayo quantize "$RAYO_SMOLLM2" $KM Q4_K_M >/dev/null 2>&1
for t in /tmp/b/rayo-cuda-test /tmp/b/rayo-cuda-llm-test; do $t --test-threads 1 2>&1; done | grep -E "test result|panicked" | tee "$OUT/kernels.txt"
timeout 300 /tmp/b/llm-cuda-test --nocapture --test-threads 1 2>&1 | grep -E "positions|greedy|graph of|test result|panicked" | tee "$OUT/llm-test.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
if [ "${NOBENCH:-0}" != 1 ]; then
for i in 1 2 3; do /tmp/b/rayo bench --model "$RAYO_SMOLLM2" --backend cuda --json 2>&1 | grep -v resident; done | tee "$OUT/bench-q41.txt"
/tmp/b/rayo bench --model $KM --backend cuda --json 2>&1 | grep -v resident | tee "$OUT/bench-qkm.txt"
RAYO_CUDA_GRAPHS=0 /tmp/b/rayo bench --model "$RAYO_SMOLLM2" --backend cuda --json 2>&1 | grep tg | tee "$OUT/bench-nographs.txt"
# without programmatic dependent launch (each kernel starts after the previous one ends)
for i in 1 2; do RAYO_CUDA_PDL=0 /tmp/b/rayo bench --model "$RAYO_SMOLLM2" --backend cuda --json 2>&1 | grep -v resident; done | tee "$OUT/bench-nopdl.txt"
# a prompt on the exact fp32 kernels instead of the tensor cores
RAYO_CUDA_PREFILL=f32 /tmp/b/rayo bench --model "$RAYO_SMOLLM2" --backend cuda --json 2>&1 | grep pp | tee "$OUT/bench-prefill-f32.txt"
fi
[ "${QUICK:-0}" = 1 ] && exit 0
gen="/tmp/b/rayo generate --model $RAYO_SMOLLM2 --backend cuda --prompt Hello --temperature 0 --ctx 64"
# a prompt of more than 16 tokens runs on the tensor cores (f16 GEMM, flash attention), then
# graph-replayed steps with greedy sampling on the device
long="The quick brown fox jumps over the lazy dog while the farmer counts his sheep, one by one, until the sun sets behind the hills"
san="/tmp/b/rayo generate --model $RAYO_SMOLLM2 --backend cuda --temperature 0 --ctx 96"
timeout 200 compute-sanitizer --tool memcheck $san --prompt "$long" --max-tokens 4 2>&1 | tail -1 | tee "$OUT/memcheck.txt"
timeout 250 compute-sanitizer --tool racecheck $san --prompt "$long" --max-tokens 3 2>&1 | tail -1 | tee "$OUT/racecheck.txt"
# device time per kernel over a 2-token prompt and 3 decoded tokens (ncu serializes launches)
timeout 200 ncu --metrics gpu__time_duration.sum --csv $gen --max-tokens 3 2>/dev/null >/tmp/ncu.csv
python3 docs/perf/ncu_summary.py /tmp/ncu.csv | tee "$OUT/ncu.txt"
