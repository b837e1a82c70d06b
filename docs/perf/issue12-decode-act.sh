#!/usr/bin/env bash
# A decoding step's products on 8-bit (dp4a) and f16 activations against f32 ones (issue 12,
# item 1: "measure both"), on the GPU machine, alternating in one run: Llama-3.2-1B's shape
# with random weights (Q4_K and Q8_0), SmolLM2-135M Q4_1 and Q4_K_M. `RAYO_CUDA_DECODE=f32|q8|f16`
# picks the path. Binaries in /tmp/b (rayo, llm-cuda-test), SmolLM2-135M Q4_1 in /tmp/m (see
# issue12-cuda.sh). usage: OUT=DIR docs/perf/issue12-decode-act.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
M=/tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
KM=/tmp/m/SmolLM2-135M-Instruct.Q4_K_M.gguf
[ -f $KM ] || /tmp/b/rayo quantize "$M" $KM Q4_K_M >/dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
python3 docs/perf/hbm_read.py | tee "$OUT/hbm-read.txt"
for ty in Q4_K Q8_0; do
  /tmp/b/rayo synth /tmp/llama1b-$ty.gguf --shape llama-3.2-1b --type $ty --tokenizer $M | tee -a "$OUT/synth.txt"
done
bench() { # model label
  for i in 1 2; do
    for act in f32 q8 f16; do
      printf '%s %s %s: ' "$2" "$act" "$i"
      RAYO_CUDA_DECODE=$act /tmp/b/rayo bench --model "$1" --backend cuda --json 2>/dev/null | grep -o "\"op\":\"tg128\".*tokens_per_s\":[0-9.]*" | grep -o "tokens_per_s.*"
      echo
    done
  done
}
{
  bench /tmp/llama1b-Q4_K.gguf 1b-q4_k
  bench /tmp/llama1b-Q8_0.gguf 1b-q8_0
  bench $M 135m-q4_1
  bench $KM 135m-q4_k_m
} | tee "$OUT/decode.txt"
# the launches of one recorded step, both ways
for act in f32 q8 f16; do
  printf '%s: ' $act; RAYO_CUDA_DECODE=$act /tmp/b/rayo bench --model /tmp/llama1b-Q4_K.gguf --backend cuda 2>&1 | grep -i graph | head -1
done | tee "$OUT/launches.txt"
# a warp or a block of threads per weight row, forced (the default takes a block for a
# decoding step's products under 8192 rows)
for rows in warp block; do
  for act in f32 q8; do
    printf '1b-q4_k %s %s: ' $act $rows
    RAYO_CUDA_MATVEC=$rows RAYO_CUDA_DECODE=$act /tmp/b/rayo bench --model /tmp/llama1b-Q4_K.gguf --backend cuda --json 2>/dev/null | grep -o "\"op\":\"tg128\".*tokens_per_s\":[0-9.]*" | grep -o "tokens_per_s.*"
  done
done | tee "$OUT/rows.txt"
# device time per kernel of the 1B decode (3 tokens; ncu serializes the launches)
for act in f32 q8; do
  RAYO_CUDA_DECODE=$act timeout 200 ncu --metrics gpu__time_duration.sum --csv /tmp/b/rayo generate --model /tmp/llama1b-Q4_K.gguf --backend cuda --prompt Hello --temperature 0 --ctx 64 --max-tokens 3 2>/dev/null >/tmp/ncu-$act.csv
  python3 docs/perf/ncu_summary.py /tmp/ncu-$act.csv | head -12 | tee "$OUT/ncu-1b-$act.txt"
done
# compute-sanitizer on a short generation through each narrowed path (the narrowing kernels
# and the 8-bit and f16 products; the prompt is one token so that every product is a matvec)
for act in q8 f16; do
  printf '%s memcheck: ' $act; RAYO_CUDA_DECODE=$act timeout 200 compute-sanitizer --tool memcheck /tmp/b/rayo generate --model $M --backend cuda --prompt Hello --temperature 0 --ctx 64 --max-tokens 4 2>&1 | tail -1
  printf '%s racecheck: ' $act; RAYO_CUDA_DECODE=$act timeout 250 compute-sanitizer --tool racecheck /tmp/b/rayo generate --model $M --backend cuda --prompt Hello --temperature 0 --ctx 64 --max-tokens 3 2>&1 | tail -1
done | tee "$OUT/sanitizer.txt"
